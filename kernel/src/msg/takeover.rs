//! Restarts: a new kernel takes over the endpoints its predecessor held, senders wait out a
//! restart in progress, and a kernel that faults counts the messages it was handling lost.

use super::{add, counters, drain, is_live, wait};
use crate::arch::cpu;
use crate::core::kcb::CoreState;
use crate::core::shared;
use ::core::sync::atomic::Ordering;

/// Claims this instance's endpoints (core `me`), or, on a restarted instance, takes over
/// those its dead predecessor held where they stood; installs them for [`super::receive`].
pub(super) fn claim_or_take_over(me: usize) {
    let area = super::area();
    let restarted = shared::this_kcb().incarnation.load(Ordering::Relaxed) > 1;
    let endpoints = if restarted {
        area.take_over_endpoints(me)
    } else {
        // Never claimed before: a failure here is a protocol bug, reported and not hidden.
        area.claim_endpoints(me).ok()
    };
    match endpoints {
        Some(endpoints) => super::receive::install(endpoints, restarted),
        None => log::error!("receive queues of core {me} are already claimed"),
    }
}

/// Whether a message for `core` reaches a kernel: it runs one, or it is between two kernels
/// of a restart (a sender waits for the next one, [`wait_out_restart`]).
pub fn is_reachable(core: usize) -> bool {
    is_live(core) || shared::get().kcbs.get(core).is_some_and(|kcb| kcb.restart_pending.load(Ordering::Acquire) != 0)
}

/// How long a sender waits for a restarting core's next kernel.
const RESTART_WAIT_MS: u64 = 2000;

/// Waits while `target` is between two kernels of a restart (stopped or booting with a
/// restart pending), handling this core's own messages meanwhile: what is sent to a core
/// whose processes a restart keeps (a signal, a child's exit) goes to its next kernel rather
/// than being lost. Returns at once for a core that runs, or that stopped for good.
pub fn wait_out_restart(target: usize) {
    let Some(kcb) = shared::get().kcbs.get(target) else { return };
    if kcb.state().is_live() || kcb.restart_pending.load(Ordering::Acquire) == 0 {
        return;
    }
    let deadline = crate::time::SpinDeadline::after_ms(RESTART_WAIT_MS);
    while !kcb.state().is_live() && kcb.restart_pending.load(Ordering::Acquire) != 0 && !deadline.passed() {
        wait::while_waiting();
        drain();
        cpu::relax();
    }
}

/// Kernel instances running now.
pub fn live_instances() -> usize {
    shared::get().listed_kcbs().iter().filter(|kcb| kcb.state() == CoreState::Running).count()
}

/// Whether `core` is stopped with processes kept in its KCB for a later start (`core stop
/// --keep`): its receive queue waits for the next kernel, which takes it over where it stands
/// after it adopted them.
pub fn holds_kept_processes(core: usize) -> bool {
    shared::get()
        .kcbs
        .get(core)
        .is_some_and(|kcb| kcb.state() == CoreState::Stopped && kcb.kept.chain.load(Ordering::Acquire) != 0)
}

/// Called on the way down of a faulting core: the messages whose handlers were running are
/// lost (their senders counted them sent), so the counters still balance.
pub fn count_lost_in_fault() {
    let counters = counters();
    let running = counters.handlers_running.swap(0, Ordering::Relaxed);
    add(&counters.lost, running);
}
