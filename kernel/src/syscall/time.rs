//! Time calls: clocks from the TSC (monotonic since boot; realtime is boot time plus that).

use super::{read_user, write_user, SyscallResult};
use crate::proc::ThreadExt;
use crate::sched::{self, WaitToken};
use linux_raw_sys::errno;
use linux_raw_sys::general::{timespec, timeval};

const CLOCK_REALTIME: u64 = 0;
const CLOCK_MONOTONIC: u64 = 1;
const CLOCK_PROCESS_CPUTIME_ID: u64 = 2;
const CLOCK_THREAD_CPUTIME_ID: u64 = 3;
const CLOCK_MONOTONIC_RAW: u64 = 4;
const CLOCK_REALTIME_COARSE: u64 = 5;
const CLOCK_MONOTONIC_COARSE: u64 = 6;
const CLOCK_BOOTTIME: u64 = 7;
const TIMER_ABSTIME: u64 = 1;

fn now(clock: u64) -> Result<u64, u32> {
    let monotonic = crate::time::now_ns();
    match clock {
        CLOCK_REALTIME | CLOCK_REALTIME_COARSE => Ok(crate::time::realtime_ns()),
        CLOCK_MONOTONIC | CLOCK_MONOTONIC_RAW | CLOCK_MONOTONIC_COARSE | CLOCK_BOOTTIME => Ok(monotonic),
        CLOCK_PROCESS_CPUTIME_ID => cpu_clock(0, false),
        CLOCK_THREAD_CPUTIME_ID => cpu_clock(0, true),
        _ => match dynamic_cpu_clock(clock) {
            Some((pid, per_thread)) => cpu_clock(pid, per_thread),
            None => Err(errno::EINVAL),
        },
    }
}

/// The pid and kind of a CPU-time clock id made by `clock_getcpuclockid` or
/// `pthread_getcpuclockid` [Linux include/linux/posix-timers.h]: negative, `~pid << 3`, then
/// the thread bit (4) and the kind (0 `PROF`, 1 `VIRT`, 2 `SCHED`: Reef's clock counts every
/// one as user plus system time).
fn dynamic_cpu_clock(clock: u64) -> Option<(u32, bool)> {
    let clock = clock as i32;
    if clock >= 0 || clock & 3 == 3 {
        return None;
    }
    let pid = u32::try_from(!(clock >> 3)).ok()?;
    Some((pid, clock & 4 != 0))
}

/// CPU time in nanoseconds (microsecond grain) of a process of this instance (`pid` 0: the
/// caller's), or of one of the caller's threads.
fn cpu_clock(pid: u32, per_thread: bool) -> Result<u64, u32> {
    let total = |times: abi::process::CpuTimes| (times.user_us + times.system_us) * 1000;
    if per_thread {
        let thread = if pid == 0 { sched::current() } else { sched::find_thread(pid).ok_or(errno::EINVAL)? };
        let caller = crate::proc::current_process().ok_or(errno::EPERM)?;
        if thread.part().process.as_ref().is_none_or(|p| p.pid != caller.pid) {
            return Err(errno::EINVAL);
        }
        return Ok(total(thread.cpu.times()));
    }
    let process = if pid == 0 { crate::proc::current_process() } else { crate::proc::find(pid) };
    let process = process.ok_or(errno::EINVAL)?;
    Ok(total(process.cpu_times(&sched::threads_of(process.pid)).0))
}

fn to_timespec(ns: u64) -> timespec {
    timespec { tv_sec: (ns / 1_000_000_000) as _, tv_nsec: (ns % 1_000_000_000) as _ }
}

pub(super) fn from_timespec(value: &timespec) -> Result<u64, u32> {
    if value.tv_sec < 0 || !(0..1_000_000_000).contains(&value.tv_nsec) {
        return Err(errno::EINVAL);
    }
    Ok((value.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(value.tv_nsec as u64))
}

pub fn clock_gettime(clock: u64, out: u64) -> SyscallResult {
    let ns = now(clock)?;
    write_user(out, &to_timespec(ns))?;
    Ok(0)
}

pub fn clock_getres(out: u64) -> SyscallResult {
    if out != 0 {
        write_user(out, &to_timespec(1))?;
    }
    Ok(0)
}

pub fn gettimeofday(out: u64) -> SyscallResult {
    if out != 0 {
        let ns = now(CLOCK_REALTIME)?;
        write_user(out, &timeval { tv_sec: (ns / 1_000_000_000) as _, tv_usec: ((ns % 1_000_000_000) / 1000) as _ })?;
    }
    Ok(0)
}

pub fn time(out: u64) -> SyscallResult {
    let seconds = now(CLOCK_REALTIME)? / 1_000_000_000;
    if out != 0 {
        write_user(out, &seconds)?;
    }
    Ok(seconds)
}

/// Sleeps until monotonic time `until_ns`. A signal ends the sleep with `EINTR`, and the time
/// left is written to `remaining` (unless 0); the sleep is not restarted, as on Linux when a
/// handler runs.
pub(super) fn sleep_until(until_ns: u64, remaining: u64) -> SyscallResult {
    loop {
        let now_ns = crate::time::now_ns();
        if now_ns >= until_ns {
            return Ok(0);
        }
        let deadline = crate::arch::cpu::read_tsc() + crate::time::ns_to_cycles(until_ns - now_ns);
        let wakeup = sched::block(WaitToken::Sleep, Some(deadline));
        if wakeup == sched::Wakeup::Moving {
            // The process moves to another core: `restart_syscall` sleeps the rest there (the
            // monotonic clock is the same on every core).
            *sched::current().part().restart_sleep.lock() = Some((until_ns, remaining));
            return Err(crate::proc::signal::RESTART_BLOCK);
        }
        if wakeup.by_signal() {
            if remaining != 0 {
                write_user(remaining, &to_timespec(until_ns.saturating_sub(crate::time::now_ns())))?;
            }
            return Err(errno::EINTR);
        }
    }
}

/// `restart_syscall`: finishes the sleep a move cut short (see `sleep_until`); with none to
/// finish, `EINTR` as on Linux.
pub fn restart_syscall() -> SyscallResult {
    let pending = sched::current().part().restart_sleep.lock().take();
    match pending {
        Some((until_ns, remaining)) => sleep_until(until_ns, remaining),
        None => Err(errno::EINTR),
    }
}

pub fn nanosleep(request: u64, remaining: u64) -> SyscallResult {
    let duration = from_timespec(&read_user::<timespec>(request)?)?;
    sleep_until(crate::time::now_ns().saturating_add(duration), remaining)
}

pub fn clock_nanosleep(clock: u64, flags: u64, request: u64, remaining: u64) -> SyscallResult {
    let value = from_timespec(&read_user::<timespec>(request)?)?;
    let base = now(clock)?;
    let monotonic = crate::time::now_ns();
    let absolute = flags & TIMER_ABSTIME != 0;
    let until = if absolute { monotonic + value.saturating_sub(base) } else { monotonic.saturating_add(value) };
    // An absolute sleep has no time left to report.
    sleep_until(until, if absolute { 0 } else { remaining })
}

/// `setitimer` and `getitimer`'s only timer: `ITIMER_REAL` (SIGALRM on the monotonic clock).
/// `ITIMER_VIRTUAL` and `ITIMER_PROF` (user and user-plus-system CPU time) are not in Reef.
const ITIMER_REAL: u64 = 0;

/// `struct itimerval`: the interval, then the value.
type Itimerval = [timeval; 2];

fn from_timeval(value: &timeval) -> Result<u64, u32> {
    if value.tv_sec < 0 || !(0..1_000_000).contains(&value.tv_usec) {
        return Err(errno::EINVAL);
    }
    Ok((value.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(value.tv_usec as u64 * 1000))
}

fn to_timeval(ns: u64) -> timeval {
    // Rounded up, so that an armed timer never reads 0 (as Linux's `ns_to_timeval` rounds).
    let us = ns.div_ceil(1000);
    timeval { tv_sec: (us / 1_000_000) as _, tv_usec: (us % 1_000_000) as _ }
}

/// `timer` as `getitimer` writes it.
fn itimerval_of(timer: crate::proc::timer::RealTimer) -> Itimerval {
    let (left, interval) = timer.remaining(crate::time::now_ns());
    [to_timeval(interval), to_timeval(left)]
}

pub fn getitimer(which: u64, out: u64) -> SyscallResult {
    if which != ITIMER_REAL {
        return Err(errno::EINVAL);
    }
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    write_user(out, &itimerval_of(crate::proc::timer::get(&process)))?;
    Ok(0)
}

/// `setitimer(ITIMER_REAL, new, old)`: `new` 0 disarms, as Linux still accepts.
pub fn setitimer(which: u64, new: u64, old: u64) -> SyscallResult {
    if which != ITIMER_REAL {
        return Err(errno::EINVAL);
    }
    let (value, interval) = match new {
        0 => (0, 0),
        new => {
            let [interval, value]: Itimerval = read_user(new)?;
            (from_timeval(&value)?, from_timeval(&interval)?)
        }
    };
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    // `set` gives the previous timer back: one look at the process's timer, not two.
    let previous = crate::proc::timer::set(&process, value, interval);
    if old != 0 {
        write_user(old, &itimerval_of(previous))?;
    }
    Ok(0)
}

/// `alarm(seconds)`: SIGALRM once after `seconds` (0 disarms); the seconds the previous timer
/// had left, rounded to the nearest and at least 1 for an armed one, as Linux returns them.
pub fn alarm(seconds: u64) -> SyscallResult {
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let seconds = seconds & u64::from(u32::MAX);
    let previous = crate::proc::timer::set(&process, seconds * 1_000_000_000, 0);
    let (left, _) = previous.remaining(crate::time::now_ns());
    Ok(match left {
        0 => 0,
        left => ((left + 500_000_000) / 1_000_000_000).max(1),
    })
}
