//! A receiver's sleep until a message may have come, and the strategy of waiting that the
//! cores layer injects (parking: a guest gives its processor to its host, a host runs its
//! guests), so that messaging names nothing above it.

use super::receive::{dispatch, receive_one};
use super::{area, bump, counters, NotifyLine, NotifyMode, MESSAGING_CORES};
use crate::arch::cpu;
use crate::core::kcb::Role;
use crate::core::shared;
use ::core::sync::atomic::{fence, Ordering};

/// How this instance waits, given by the layer that knows about parking (`boot` registers
/// `core::park`'s at instance start, right after [`super::init`]).
#[derive(Clone, Copy)]
pub struct WaitStrategy {
    /// Called at every check of a wait for another core (a full channel, a call's reply, a
    /// restart): a parked core's host runs, or a host's guests (one of them may be the core
    /// waited for).
    pub while_waiting: fn(),
    /// Halts until an interrupt comes (with `mwait`, or the monitored doorbell is written:
    /// MONITOR was armed just before). Interrupts are masked on entry (the sleep's last look
    /// was taken) and enabled on return.
    pub sleep: fn(mwait: bool),
}

/// Until one is registered: nothing to let run while waiting, and a plain halt (a sender in
/// MWAIT mode also interrupts an armed receiver, so a halt misses no message).
const HALT: WaitStrategy = WaitStrategy { while_waiting: || {}, sleep: |_mwait| cpu::wait_for_interrupt() };

// Private per instance: set once at instance start.
static STRATEGY: spin::Once<WaitStrategy> = spin::Once::new();

/// Gives messaging its way of waiting (once per instance; later calls are ignored).
pub fn set_wait_strategy(strategy: WaitStrategy) {
    STRATEGY.call_once(|| strategy);
}

fn strategy() -> &'static WaitStrategy {
    STRATEGY.get().unwrap_or(&HALT)
}

/// What this core does at every check of a wait for another core (see [`WaitStrategy`]).
pub(super) fn while_waiting() {
    (strategy().while_waiting)();
}

/// Called from the message-notification interrupt: count it; the idle loop does the work.
pub fn on_notification() {
    if shared::region().is_some() {
        bump(&counters().ipis_taken);
    }
}

/// Takes this core's messages for at most `ns` nanoseconds, while `waiting` holds and no
/// other thread of this instance is ready; whether `waiting` stopped holding. For a thread
/// that has just sent a request whose reply usually comes within a few microseconds: it
/// keeps the core (no switch to the idle thread and back, and no halt that the reply's
/// sender must interrupt), and blocks as usual when the reply is slow or another thread
/// wants the core.
pub fn poll_briefly(ns: u64, waiting: impl Fn() -> bool) -> bool {
    let spin = crate::time::SpinDeadline::after_cycles(crate::time::ns_to_cycles(ns));
    while waiting() {
        if spin.passed() || crate::sched::others_than_idle_ready() {
            return false;
        }
        super::drain();
        cpu::relax();
    }
    true
}

/// Sleeps until a message may have arrived, the way this core's queue mode says.
pub fn wait_for_messages() {
    let me = shared::this_core() as usize;
    if me >= MESSAGING_CORES {
        cpu::wait_for_interrupt();
        return;
    }
    let line = &area().cores[me].notify;
    let mut mode = NotifyMode::from_u32(line.mode.load(Ordering::Relaxed));
    if mode == NotifyMode::Mwait && !shared::facts().has_mwait {
        mode = NotifyMode::Hybrid;
    }
    if mode == NotifyMode::Poll && shared::this_kcb().role() != Role::Timesharing {
        // No timer wakes an AC or a KC to look: polling means looking now, not sleeping.
        if let Some(incoming) = receive_one() {
            dispatch(&incoming);
        } else {
            cpu::relax();
        }
        return;
    }
    if mode == NotifyMode::Hybrid {
        let spin = crate::time::SpinDeadline::after_cycles(line.spin_cycles.load(Ordering::Relaxed));
        while !spin.passed() {
            if let Some(incoming) = receive_one() {
                dispatch(&incoming);
                return;
            }
            cpu::relax();
        }
    }
    if let Some(incoming) = sleep_armed(line, mode == NotifyMode::Mwait, receive_one) {
        dispatch(&incoming);
    }
}

/// Halts until a message or a notification comes, unless `ready` (another source of work,
/// such as a kernel core's syspages) or a message is there at the last look; handles the
/// message the last look found.
pub fn sleep_unless(mut ready: impl FnMut() -> bool) {
    let me = shared::this_core() as usize;
    if me >= MESSAGING_CORES {
        return;
    }
    let line = &area().cores[me].notify;
    if NotifyMode::from_u32(line.mode.load(Ordering::Relaxed)) == NotifyMode::Poll {
        // Senders in poll mode ring nobody: keep looking instead of sleeping.
        return;
    }
    let look = || {
        if ready() {
            return Some(None);
        }
        receive_one().map(Some)
    };
    if let Some(Some(incoming)) = sleep_armed(line, false, look) {
        dispatch(&incoming);
    }
}

/// Arms `line` (and MONITOR on its doorbell with `mwait`, where the processor offers it),
/// takes a last look with `look`, and sleeps only if it found nothing; returns what the last
/// look found. Interrupts are masked from before arming until the sleep, and a sender that
/// sees `armed` interrupts us, so a message published after the last look always wakes the
/// sleep (no lost wake-up).
pub fn sleep_armed<T>(line: &NotifyLine, mwait: bool, mut look: impl FnMut() -> Option<T>) -> Option<T> {
    cpu::disable_interrupts();
    // Callers ask for MWAIT only where CPUID offers it, so the monitor is armed whenever asked.
    let mwait = mwait && line.arm_monitor();
    line.armed.store(1, Ordering::Relaxed);
    // SeqCst fence: pairs with the sender's (see `notify`).
    fence(Ordering::SeqCst);
    if let Some(found) = look() {
        line.armed.store(0, Ordering::Relaxed);
        cpu::enable_interrupts();
        return Some(found);
    }
    // A parked core gives the processor to its host here, a host runs a due guest first.
    (strategy().sleep)(mwait);
    line.armed.store(0, Ordering::Relaxed);
    None
}
