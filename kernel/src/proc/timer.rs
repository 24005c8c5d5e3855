//! A process's real-time interval timer (`setitimer(ITIMER_REAL)`, `getitimer`, `alarm`):
//! SIGALRM when it expires, then again every interval if it has one.
//!
//! The timer is a deadline on the monotonic clock kept in the process. Nothing in the
//! interrupt path sends the signal: the instance keeps the earliest deadline of its
//! processes, and [`fire_due`], called at the safe points a tick leads to (the return to ring
//! 3 after a tick, the idle loop, a waiting thread's `serve`), compares it with the clock and,
//! only when one is due, sends SIGALRM to each process whose deadline passed. So a timer's
//! resolution is the tick's period (`timer_hz`), as with `nanosleep`. A fork's child starts
//! with no timer; `execve` keeps it; a move to another core carries it (the monotonic clock is
//! the same on every core). An application core has no tick: a process there gets its
//! SIGALRM when it next enters its home kernel.

use super::Process;
use core::sync::atomic::{AtomicU64, Ordering};

/// A process's timer: when it next expires (monotonic ns; 0: disarmed) and its interval (0:
/// once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RealTimer {
    pub next_ns: u64,
    pub interval_ns: u64,
}

impl RealTimer {
    /// What `getitimer` reports at `now_ns`: the time left (0: disarmed) and the interval.
    pub fn remaining(self, now_ns: u64) -> (u64, u64) {
        let left = match self.next_ns {
            0 => 0,
            // Due but not yet fired: Linux reports a tiny positive value, never 0 for an
            // armed timer.
            next => next.saturating_sub(now_ns).max(1),
        };
        (left, self.interval_ns)
    }

    /// The timer after it expired at `now_ns` (`next_ns` ≤ `now_ns`): the next period not
    /// yet passed, or disarmed. Periods that passed unseen (the process slept through them)
    /// give one signal, as a pending signal does not count.
    fn after_expiry(self, now_ns: u64) -> Self {
        if self.interval_ns == 0 {
            return Self::default();
        }
        let periods = (now_ns - self.next_ns) / self.interval_ns + 1;
        Self { next_ns: self.next_ns.saturating_add(periods.saturating_mul(self.interval_ns)), ..self }
    }
}

/// The earliest deadline of this instance's armed timers (`u64::MAX`: none), so that the
/// safe points look at the processes only when one may be due.
static EARLIEST: AtomicU64 = AtomicU64::new(u64::MAX);

/// Arms (`value_ns` > 0, then every `interval_ns`) or disarms (`value_ns` 0) `process`'s
/// timer; returns the previous one.
pub fn set(process: &Process, value_ns: u64, interval_ns: u64) -> RealTimer {
    let next_ns = match value_ns {
        0 => 0,
        value => crate::time::now_ns().saturating_add(value).max(1),
    };
    let timer = RealTimer { next_ns, interval_ns: if next_ns == 0 { 0 } else { interval_ns } };
    install(process, timer)
}

/// Gives `process` the timer `timer` (a move's arrival, [`set`]); returns the previous one.
pub fn install(process: &Process, timer: RealTimer) -> RealTimer {
    let previous = core::mem::replace(&mut *process.real_timer.lock(), timer);
    if timer.next_ns != 0 {
        EARLIEST.fetch_min(timer.next_ns, Ordering::Relaxed);
    }
    previous
}

/// `process`'s timer now.
pub fn get(process: &Process) -> RealTimer {
    *process.real_timer.lock()
}

/// At a safe point: sends SIGALRM to the processes of this instance whose timer expired and
/// sets their next expiry. One atomic load and a clock read when none is due.
pub fn fire_due() {
    let now = crate::time::now_ns();
    if now < EARLIEST.load(Ordering::Relaxed) {
        return;
    }
    // Recomputed from the processes; a timer armed meanwhile lowers it again (`fetch_min`).
    EARLIEST.store(u64::MAX, Ordering::Relaxed);
    let mut earliest = u64::MAX;
    for process in super::all() {
        let expired = {
            let mut timer = process.real_timer.lock();
            let expired = timer.next_ns != 0 && timer.next_ns <= now;
            if expired {
                *timer = timer.after_expiry(now);
            }
            if timer.next_ns != 0 {
                earliest = earliest.min(timer.next_ns);
            }
            expired
        };
        if expired {
            super::signal::post_timer_expiry(&process);
        }
    }
    EARLIEST.fetch_min(earliest, Ordering::Relaxed);
}
