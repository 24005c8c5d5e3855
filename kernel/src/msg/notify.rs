//! Waking a receiver: the sender's notification, and how each receiver wants to be woken.

use super::{area, bump, counters, icc, MessageCounters, NotifyMode, DEFAULT_HYBRID_SPIN_NS, SEND_TIMEOUT_MS};
use crate::arch::{apic, idt};
use crate::core::shared;
use ::core::sync::atomic::{fence, Ordering};

/// Tells `target` that a message waits on a channel with notification `mode`.
pub fn notify(target: usize, mode: NotifyMode) {
    let line = &area().cores[target].notify;
    let interrupt = |counters: &MessageCounters| {
        let apic_id = shared::apic_of(target);
        apic::local().send_ipi(apic_id, idt::VECTOR_MESSAGE);
        bump(&counters.ipis_sent);
    };
    match mode {
        NotifyMode::Poll => {}
        NotifyMode::Ipi => interrupt(counters()),
        NotifyMode::Hybrid | NotifyMode::Mwait => {
            if mode == NotifyMode::Mwait {
                line.doorbell.fetch_add(1, Ordering::Release);
            }
            // SeqCst fence: orders our publish before reading `armed`, against the receiver's
            // store of `armed` before its last look at the queues (no lost wake-up).
            fence(Ordering::SeqCst);
            if line.armed.load(Ordering::Relaxed) != 0 && line.armed.swap(0, Ordering::AcqRel) != 0 {
                interrupt(counters());
            }
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
