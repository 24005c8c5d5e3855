//! Waking a receiver: the sender's notification, and how each receiver wants to be woken.

use super::{add, area, bump, counters, icc, NotifyMode, DEFAULT_HYBRID_SPIN_NS, SEND_TIMEOUT_MS};
use crate::arch::{apic, idt};
use crate::core::shared;
use ::core::sync::atomic::{fence, Ordering};

/// Tells `target` that a message waits on a channel with notification `mode`.
pub fn notify(target: usize, mode: NotifyMode) {
    if wants_interrupt(target, mode) {
        apic::local().send_ipi(shared::apic_of(target), idt::VECTOR_MESSAGE);
        bump(&counters().ipis_sent);
    }
}

/// Tells every core of `targets` (a bit per core) that a message waits for it, each with the
/// mode of its receive queues: the cores that want an interrupt get one IPI together
/// (`send_ipi_to_many`), so a multicast's notification does not grow with its members.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn notify_many(targets: u64) {
    let mut apic_ids = [0u32; super::MESSAGING_CORES];
    let mut count = 0;
    for target in (0..super::MESSAGING_CORES).filter(|t| targets & (1 << t) != 0) {
        if wants_interrupt(target, queue_mode(target)) {
            apic_ids[count] = shared::apic_of(target);
            count += 1;
        }
    }
    // Two OSnodes on one processor (a parked core's host) need its interrupt once.
    let apic_ids = &mut apic_ids[..count];
    apic_ids.sort_unstable();
    let mut unique = 0;
    for i in 0..apic_ids.len() {
        if i == 0 || apic_ids[i] != apic_ids[unique - 1] {
            apic_ids[unique] = apic_ids[i];
            unique += 1;
        }
    }
    apic::local().send_ipi_to_many(&apic_ids[..unique], idt::VECTOR_MESSAGE);
    add(&counters().ipis_sent, count as u64);
}

/// Whether `target`, whose channel has notification `mode`, must be interrupted for a message
/// just published (ringing its doorbell and disarming it on the way).
fn wants_interrupt(target: usize, mode: NotifyMode) -> bool {
    let line = &area().cores[target].notify;
    match mode {
        NotifyMode::Poll => false,
        NotifyMode::Ipi => true,
        NotifyMode::Hybrid | NotifyMode::Mwait => {
            if mode == NotifyMode::Mwait {
                line.doorbell.fetch_add(1, Ordering::Release);
            }
            // SeqCst fence: orders our publish before reading `armed`, against the receiver's
            // store of `armed` before its last look at the queues (no lost wake-up).
            fence(Ordering::SeqCst);
            line.armed.load(Ordering::Relaxed) != 0 && line.armed.swap(0, Ordering::AcqRel) != 0
        }
    }
}

/// The notification mode of `target`'s receive queues.
pub fn queue_mode(target: usize) -> NotifyMode {
    NotifyMode::from_u32(area().cores[target].notify.mode.load(Ordering::Acquire))
}

/// The notification mode of the URPC ring from this core to `target`.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub(super) fn pair_mode(target: usize) -> NotifyMode {
    let me = shared::this_core() as usize;
    NotifyMode::from_u32(area().cores[target].pair_modes[me].load(Ordering::Acquire))
}

/// At instance start: hybrid notification on every channel into core `me`, with the default
/// spin unless one was set before a restart.
pub(super) fn init_own_modes(me: usize) {
    let own = &area().cores[me];
    if own.notify.spin_cycles.load(Ordering::Relaxed) == 0 {
        own.notify.spin_cycles.store(crate::time::ns_to_cycles(DEFAULT_HYBRID_SPIN_NS), Ordering::Relaxed);
    }
    own.notify.mode.store(NotifyMode::Hybrid as u32, Ordering::Release);
    for mode in &own.pair_modes {
        mode.store(NotifyMode::Hybrid as u32, Ordering::Relaxed);
    }
}

/// Sets the notification mode of this core's receive queues and of every URPC ring into it,
/// and (if `spin_cycles` is not 0) the hybrid spin. The notification line is the receiver's
/// own: other cores ask it with [`set_mode`].
pub fn set_own_mode(mode: NotifyMode, spin_cycles: u64) {
    let channels = &area().cores[shared::this_core() as usize];
    if spin_cycles != 0 {
        channels.notify.spin_cycles.store(spin_cycles, Ordering::Relaxed);
    }
    channels.notify.mode.store(mode as u32, Ordering::Release);
    for pair in &channels.pair_modes {
        pair.store(mode as u32, Ordering::Release);
    }
}

/// Sets `core`'s notification mode; a failure (the core is not running or does not answer) is
/// logged. See [`configure_notification`].
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn set_mode(core: usize, mode: NotifyMode) {
    if let Err(error) = configure_notification(core, mode, 0) {
        log::warn!("notification mode of core {core} not set to {}: {error}", mode.name());
    }
}

/// Sets `core`'s notification mode (and hybrid spin, unless 0): directly on this core, by an
/// inter-core call to the owner of the notification line on any other.
pub fn configure_notification(core: usize, mode: NotifyMode, spin_cycles: u64) -> Result<(), icc::IccError> {
    if core == shared::this_core() as usize {
        set_own_mode(mode, spin_cycles);
        return Ok(());
    }
    icc::call(core, abi::message::handler::SET_NOTIFY_MODE, [mode as u64, spin_cycles, 0, 0, 0], SEND_TIMEOUT_MS)
        .map(|_| ())
}
