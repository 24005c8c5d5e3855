//! `epoll`: the instance is an open file at the file service, which keeps its interest list
//! and parks a wait until an interest is ready (`fs::service`'s `epoll.rs`); these calls
//! decode the user's arguments and turn descriptors into the service's handles.

use super::files::{handle_of, install, timespec_ms, words};
use super::SyscallResult;
use crate::arch::user::{copy_from_user, copy_to_user, is_user_range};
use crate::fs::client;
use crate::fs::Handle;
use abi::file::{FileOp, HandleKind};
use linux_raw_sys::errno;
use linux_raw_sys::general as linux;

/// Bytes of one `epoll_event` as x86-64 packs it: events (u32), then data (u64).
const EVENT_BYTES: u64 = 12;
/// The most events one wait returns (Linux's bound is `INT_MAX / 12`; fewer is allowed).
const MOST_EVENTS: u64 = 1024;

/// `epoll_create1(flags)`: only `EPOLL_CLOEXEC` is a flag.
pub fn epoll_create1(flags: u64) -> SyscallResult {
    let close_on_exec = u64::from(linux::EPOLL_CLOEXEC);
    if flags & !close_on_exec != 0 {
        return Err(errno::EINVAL);
    }
    let answer = client::call(FileOp::EpollCreate, words(&[]), &[], &[])?;
    let kind = HandleKind::from_u64(answer.words[1]).ok_or(errno::EIO)?;
    install(Handle::adopt(answer.words[0], kind), flags & close_on_exec != 0)
}

/// `epoll_create(size)`: the size is a hint that must be positive.
pub fn epoll_create(size: u64) -> SyscallResult {
    if size as i32 <= 0 {
        return Err(errno::EINVAL);
    }
    epoll_create1(0)
}

/// The service's handle of the `epoll` instance `fd` (EINVAL if it is not one).
fn epoll_handle(fd: i64) -> Result<u64, u32> {
    let handle = handle_of(fd)?;
    if handle.kind != HandleKind::Epoll {
        return Err(errno::EINVAL);
    }
    Ok(handle.id)
}

/// `epoll_ctl(epfd, op, fd, event)`; `event` may be null for `EPOLL_CTL_DEL`.
/// The service checks, in Linux's order, that the target can be watched (`EPERM`), then that
/// `epfd` is an `epoll` other than the target (`EINVAL`).
pub fn epoll_ctl(epoll_fd: i64, operation: u64, fd: i64, event: u64) -> SyscallResult {
    let epoll = handle_of(epoll_fd)?.id;
    let target = handle_of(fd)?;
    let (events, data) = if operation == u64::from(linux::EPOLL_CTL_DEL) {
        (0, 0)
    } else {
        let mut bytes = [0u8; EVENT_BYTES as usize];
        copy_from_user(&mut bytes, event).map_err(|_| errno::EFAULT)?;
        let events = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let mut data = [0u8; 8];
        data.copy_from_slice(&bytes[4..]);
        (u64::from(events), u64::from_le_bytes(data))
    };
    let values = [epoll, operation, target.id, fd as u64, events, data];
    client::call(FileOp::EpollControl, words(&values), &[], &[])?;
    Ok(0)
}

/// `epoll_wait` and its kin: up to `most` events into `events`, waiting `timeout_ms` at
/// most (`-1`: without end). The signal mask of `epoll_pwait` is not applied during the wait
/// (as `ppoll`'s).
fn wait(epoll_fd: i64, events: u64, most: u64, timeout_ms: i64) -> SyscallResult {
    if most as i32 <= 0 || most > (i32::MAX as u64) / EVENT_BYTES {
        return Err(errno::EINVAL);
    }
    if !is_user_range(events, most * EVENT_BYTES) {
        return Err(errno::EFAULT);
    }
    let epoll = epoll_handle(epoll_fd)?;
    let process = super::files::process()?;
    // A prompt printed without a newline shows before the process waits.
    crate::fs::console::flush(&process.console_pending);
    drop(process);
    let deadline = (timeout_ms > 0).then(|| crate::time::now_ns() + timeout_ms as u64 * 1_000_000);
    let values = [epoll, most.min(MOST_EVENTS), u64::from(timeout_ms != 0)];
    let answer = match client::call_until(FileOp::EpollWait, words(&values), &[], deadline) {
        Ok(answer) => answer,
        Err(errno::ETIMEDOUT) => return Ok(0),
        Err(error) => return Err(error),
    };
    if answer.bytes.len() as u64 != answer.value * EVENT_BYTES {
        return Err(errno::EIO);
    }
    copy_to_user(events, &answer.bytes).map_err(|_| errno::EFAULT)?;
    Ok(answer.value)
}

pub fn epoll_wait(epoll_fd: i64, events: u64, most: u64, timeout_ms: u64) -> SyscallResult {
    wait(epoll_fd, events, most, timeout_ms as i32 as i64)
}

pub fn epoll_pwait(epoll_fd: i64, events: u64, most: u64, timeout_ms: u64) -> SyscallResult {
    epoll_wait(epoll_fd, events, most, timeout_ms)
}

/// `epoll_pwait2`: the timeout is a `timespec` (null: without end).
pub fn epoll_pwait2(epoll_fd: i64, events: u64, most: u64, timeout: u64) -> SyscallResult {
    wait(epoll_fd, events, most, timespec_ms(timeout)?)
}
