//! Signal, process-group and session calls, decoded for `proc::signal`.

use super::{read_user, write_user, SyscallResult};
use crate::arch::idt::InterruptFrame;
use crate::arch::signal::AlternateStack;
use crate::proc::group;
use crate::proc::signal::{self, Action, MaskChange, SignalSet};
use linux_raw_sys::errno;

/// The only `sigsetsize` x86-64 Linux takes: 64 signals, 8 bytes.
const SIGNAL_SET_SIZE: u64 = 8;

/// `SIG_BLOCK`, `SIG_UNBLOCK`, `SIG_SETMASK`.
const SIG_BLOCK: u64 = 0;
const SIG_UNBLOCK: u64 = 1;
const SIG_SETMASK: u64 = 2;

/// A signal number as the calls take it: 0 to 64, or `EINVAL`.
fn signal_number(value: u64) -> Result<u32, u32> {
    u32::try_from(value).ok().filter(|&signal| signal <= abi::signal::MAX_SIGNAL).ok_or(errno::EINVAL)
}

/// A pid argument (an `int`): its value, or `EINVAL` when negative.
fn pid_argument(value: u64) -> Result<u32, u32> {
    u32::try_from(value as i32).map_err(|_| errno::EINVAL)
}

pub fn rt_sigaction(signal: u64, action: u64, old_action: u64, size: u64) -> SyscallResult {
    if size != SIGNAL_SET_SIZE {
        return Err(errno::EINVAL);
    }
    let signal = signal_number(signal)?;
    // `struct kernel_sigaction` of x86-64: handler, flags, restorer, mask, four words.
    let new = if action != 0 {
        let [handler, flags, restorer, mask] = read_user::<[u64; 4]>(action)?;
        Some(Action { handler, flags, restorer, mask })
    } else {
        None
    };
    let previous = signal::set_action(signal, new)?;
    if old_action != 0 {
        write_user(old_action, &[previous.handler, previous.flags, previous.restorer, previous.mask])?;
    }
    Ok(0)
}

pub fn rt_sigprocmask(how: u64, set: u64, old_set: u64, size: u64) -> SyscallResult {
    if size != SIGNAL_SET_SIZE {
        return Err(errno::EINVAL);
    }
    let change = if set != 0 {
        let set: SignalSet = read_user(set)?;
        Some(match how {
            SIG_BLOCK => MaskChange::Block(set),
            SIG_UNBLOCK => MaskChange::Unblock(set),
            SIG_SETMASK => MaskChange::Set(set),
            _ => return Err(errno::EINVAL),
        })
    } else {
        None
    };
    let previous = signal::change_mask(change);
    if old_set != 0 {
        write_user(old_set, &previous)?;
    }
    Ok(0)
}

pub fn rt_sigpending(set: u64, size: u64) -> SyscallResult {
    if size > SIGNAL_SET_SIZE {
        return Err(errno::EINVAL);
    }
    let pending = signal::pending().to_le_bytes();
    crate::arch::user::copy_to_user(set, &pending[..size as usize]).map_err(|_| errno::EFAULT)?;
    Ok(0)
}

pub fn rt_sigsuspend(mask: u64, size: u64) -> SyscallResult {
    if size != SIGNAL_SET_SIZE {
        return Err(errno::EINVAL);
    }
    let mask: SignalSet = read_user(mask)?;
    Err(signal::suspend(Some(mask)))
}

/// `rt_sigtimedwait(set, info, timeout, sigsetsize)`: the signal taken, its `siginfo` written
/// to `info` (unless 0); `timeout` 0 waits as long as it takes.
pub fn rt_sigtimedwait(set: u64, info: u64, timeout: u64, size: u64) -> SyscallResult {
    if size != SIGNAL_SET_SIZE {
        return Err(errno::EINVAL);
    }
    let set: SignalSet = read_user(set)?;
    let deadline = match timeout {
        0 => None,
        timeout => {
            let ns = super::time::from_timespec(&read_user(timeout)?)?;
            Some(crate::arch::cpu::read_tsc().saturating_add(crate::time::ns_to_cycles(ns)))
        }
    };
    let taken = signal::timed_wait(set, deadline)?;
    if info != 0 {
        write_user(info, &taken.to_bytes())?;
    }
    Ok(u64::from(taken.signal))
}

pub fn pause() -> SyscallResult {
    Err(signal::suspend(None))
}

pub fn sigaltstack(new: u64, old: u64, frame: &InterruptFrame) -> SyscallResult {
    let new = if new != 0 {
        let bytes: [u8; AlternateStack::SIZE] = read_user(new)?;
        Some(AlternateStack::from_bytes(&bytes))
    } else {
        None
    };
    let previous = signal::alternate_stack(new, frame.rsp)?;
    if old != 0 {
        write_user(old, &previous.to_bytes())?;
    }
    Ok(0)
}

pub fn rt_sigreturn(frame: &mut InterruptFrame) -> SyscallResult {
    signal::sigreturn(frame)
}

pub fn kill(pid: u64, signal: u64) -> SyscallResult {
    let signal = signal_number(signal)?;
    signal::kill(pid as i32, signal)?;
    Ok(0)
}

pub fn tkill(thread: u64, signal: u64) -> SyscallResult {
    kill_thread(0, thread, signal)
}

pub fn tgkill(process: u64, thread: u64, signal: u64) -> SyscallResult {
    match pid_argument(process)? {
        0 => Err(errno::EINVAL),
        process => kill_thread(process, thread, signal),
    }
}

/// A signal for thread `thread`, of process `process` unless 0.
fn kill_thread(process: u32, thread: u64, signal: u64) -> SyscallResult {
    let thread = pid_argument(thread)?;
    if thread == 0 {
        return Err(errno::EINVAL);
    }
    signal::kill_thread(process, thread, signal_number(signal)?)?;
    Ok(0)
}

/// `setpgid(pid, group)`: a negative group is `EINVAL`; a negative pid names no process
/// (`ESRCH`), unless the group is 0 and so takes that negative value (`EINVAL`), as on Linux.
pub fn setpgid(pid: u64, group: u64) -> SyscallResult {
    let (pid, group) = (pid as i32, group as i32);
    if group < 0 || (pid < 0 && group == 0) {
        return Err(errno::EINVAL);
    }
    let pid = u32::try_from(pid).map_err(|_| errno::ESRCH)?;
    group::set_group(pid, group as u32)?;
    Ok(0)
}

pub fn getpgid(pid: u64) -> SyscallResult {
    let pid = pid_argument(pid).map_err(|_| errno::ESRCH)?;
    Ok(u64::from(group::ids(pid)?.group))
}

pub fn getsid(pid: u64) -> SyscallResult {
    let pid = pid_argument(pid).map_err(|_| errno::ESRCH)?;
    Ok(u64::from(group::ids(pid)?.session))
}

pub fn setsid() -> SyscallResult {
    group::new_session().map(u64::from)
}
