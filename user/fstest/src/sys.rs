//! The system calls `std` does not expose, as safe functions: every `unsafe` block of fstest.
//!
//! Each function is one call (two for `fork`'s flush); errors come back as `io::Error` with the
//! kernel's errno, which is what the cases compare.

use std::ffi::CString;
use std::io::{self, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

/// The status a forked child exits with when its body panicked.
pub const CHILD_PANICKED: i32 = 101;

/// `path` as the NUL-terminated string the kernel takes.
fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{} holds a NUL byte", path.display())))
}

/// The result of a call that returns -1 and sets `errno` when it fails.
fn checked(result: libc::c_int) -> io::Result<libc::c_int> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// The result of `libc::syscall`, which returns -1 and sets `errno` when the call fails.
fn checked_long(result: libc::c_long) -> io::Result<libc::c_long> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// The descriptor a call just returned, now owned (closed on drop).
fn owned(result: libc::c_int) -> io::Result<OwnedFd> {
    let fd = checked(result)?;
    // SAFETY: the call succeeded, so `fd` is a descriptor the kernel just made for this
    // process, open, and no other owner knows its number.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open(path, flags, mode)`: unlike `std`, adds no `O_CLOEXEC` of its own.
pub fn open(path: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let path = c_path(path)?;
    // SAFETY: `path` is a NUL-terminated string alive for the whole call, which only reads it;
    // `mode` is passed as the variadic `unsigned int` C expects.
    owned(unsafe { libc::open(path.as_ptr(), flags, libc::c_uint::from(mode)) })
}

/// `openat(directory, name, flags, mode)`.
pub fn openat(directory: BorrowedFd, name: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let name = c_path(name)?;
    // SAFETY: as in `open`; `directory` is an open descriptor for the whole call (borrowed).
    owned(unsafe { libc::openat(directory.as_raw_fd(), name.as_ptr(), flags, libc::c_uint::from(mode)) })
}

/// `pipe2(flags)`: (read end, write end).
pub fn pipe2(flags: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends: [libc::c_int; 2] = [-1, -1];
    // SAFETY: `ends` is a writable array of two ints, where `pipe2` stores the descriptors.
    checked(unsafe { libc::pipe2(ends.as_mut_ptr(), flags) })?;
    // SAFETY: `pipe2` succeeded, so both are new descriptors of this process with no owner.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

/// `dup(fd)`: the lowest free number, for the same open file description.
pub fn dup(fd: BorrowedFd) -> io::Result<OwnedFd> {
    // SAFETY: `dup` reads and writes no memory of ours; `fd` is open (borrowed).
    owned(unsafe { libc::dup(fd.as_raw_fd()) })
}

/// `dup2(source, onto)`: `onto`'s number now names `source`'s description. `onto` keeps
/// owning the number, so dropping it closes the new descriptor.
pub fn dup2(source: BorrowedFd, onto: &OwnedFd) -> io::Result<()> {
    // SAFETY: no memory is passed; the number `onto` owns stays open (now for another
    // description), so its owner closes it exactly once, as before.
    checked(unsafe { libc::dup2(source.as_raw_fd(), onto.as_raw_fd()) }).map(drop)
}

/// `dup3(source, onto, flags)`: as [`dup2`], with `O_CLOEXEC` allowed in `flags`.
pub fn dup3(source: BorrowedFd, onto: &OwnedFd, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: as in `dup2`.
    checked(unsafe { libc::dup3(source.as_raw_fd(), onto.as_raw_fd(), flags) }).map(drop)
}

/// `fcntl(fd, command, argument)` for the commands that take and return plain integers.
fn fcntl_integer(fd: RawFd, command: libc::c_int, argument: libc::c_int) -> io::Result<libc::c_int> {
    // SAFETY: the commands used here (F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC)
    // take an integer, not a pointer, so the call touches no memory of ours; a number that
    // names no descriptor gives EBADF.
    checked(unsafe { libc::fcntl(fd, command, argument) })
}

/// `fcntl(F_GETFD)`: the descriptor flags (`FD_CLOEXEC`).
pub fn descriptor_flags(fd: BorrowedFd) -> io::Result<libc::c_int> {
    fcntl_integer(fd.as_raw_fd(), libc::F_GETFD, 0)
}

/// `fcntl(F_GETFD)` on a bare number, which need not be open (then: EBADF).
pub fn descriptor_flags_of_number(fd: RawFd) -> io::Result<libc::c_int> {
    fcntl_integer(fd, libc::F_GETFD, 0)
}

/// `fcntl(F_SETFD, flags)`.
pub fn set_descriptor_flags(fd: BorrowedFd, flags: libc::c_int) -> io::Result<()> {
    fcntl_integer(fd.as_raw_fd(), libc::F_SETFD, flags).map(drop)
}

/// `fcntl(F_GETFL)`: the access mode and status flags of the open file description.
pub fn status_flags(fd: BorrowedFd) -> io::Result<libc::c_int> {
    fcntl_integer(fd.as_raw_fd(), libc::F_GETFL, 0)
}

/// `fcntl(F_SETFL, flags)`.
pub fn set_status_flags(fd: BorrowedFd, flags: libc::c_int) -> io::Result<()> {
    fcntl_integer(fd.as_raw_fd(), libc::F_SETFL, flags).map(drop)
}

/// `fcntl(F_DUPFD_CLOEXEC, lowest)`: a copy numbered `lowest` or above, close-on-exec.
pub fn duplicate_close_on_exec(fd: BorrowedFd, lowest: RawFd) -> io::Result<OwnedFd> {
    let copy = fcntl_integer(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, lowest)?;
    owned(copy)
}

/// `renameat2(AT_FDCWD, from, AT_FDCWD, to, flags)`, through `syscall`: the call musl's
/// wrapper makes, without depending on the wrapper's version.
pub fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    let (from, to) = (c_path(from)?, c_path(to)?);
    // SAFETY: both paths are NUL-terminated strings alive for the call, which only reads them.
    checked_long(unsafe {
        libc::syscall(libc::SYS_renameat2, libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags)
    })
    .map(drop)
}

/// `getdents64(fd, buffer)`: how many bytes of `linux_dirent64` records it wrote (0 at the end).
pub fn getdents64(fd: BorrowedFd, buffer: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buffer` is writable for its whole length, which is the count passed; the
    // kernel writes at most that many bytes.
    let written = checked_long(unsafe {
        libc::syscall(libc::SYS_getdents64, fd.as_raw_fd(), buffer.as_mut_ptr(), buffer.len())
    })?;
    Ok(written as usize)
}

/// `poll(descriptors, timeout)`: how many descriptors have events (0: the timeout passed).
pub fn poll(descriptors: &mut [libc::pollfd], timeout_milliseconds: libc::c_int) -> io::Result<usize> {
    let count = libc::nfds_t::try_from(descriptors.len()).expect("a handful of descriptors");
    // SAFETY: `descriptors` is a writable array of `count` pollfd records for the whole call;
    // the kernel reads them and writes their `revents`.
    let ready = checked(unsafe { libc::poll(descriptors.as_mut_ptr(), count, timeout_milliseconds) })?;
    Ok(ready as usize)
}

/// Which side of a `fork` this is.
pub enum Fork {
    /// The new process: it must end through [`exit_child`], never return to the cases.
    Child,
    /// The caller, with the child's pid.
    Parent(rt::Pid),
}

/// `fork()`, after flushing stdout so the child cannot print the parent's output again.
///
/// fstest starts no thread (see `main.rs`): that is what makes the child, a copy of the one
/// thread, safe to run Rust code in.
pub fn fork() -> io::Result<Fork> {
    io::stdout().flush()?;
    // SAFETY: the process has exactly one thread, so the child finds no lock (allocator,
    // stdout) held by a thread that does not exist in it; the child leaves through
    // `exit_child`, which never returns into the parent's cases.
    let pid = checked(unsafe { libc::fork() })?;
    Ok(if pid == 0 { Fork::Child } else { Fork::Parent(rt::Pid::from_raw(pid)) })
}

/// Runs `body` in a forked child and ends the child with its status ([`CHILD_PANICKED`] if it
/// panicked), without running exit handlers or the destructors of the parent's state.
pub fn exit_child(body: impl FnOnce() -> i32) -> ! {
    let status = panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or(CHILD_PANICKED);
    // SAFETY: `_exit` ends the process at once and reads no memory of ours.
    unsafe { libc::_exit(status) }
}

/// `kill(pid, signal)`.
pub fn kill(pid: rt::Pid, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: `kill` reads and writes no memory of ours.
    checked(unsafe { libc::kill(pid.as_raw(), signal) }).map(drop)
}

/// What `SIGPIPE` does to this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigPipe {
    /// `SIG_IGN`: a write to a pipe with no reader fails with EPIPE (Rust's start-up sets this).
    Ignore,
    /// `SIG_DFL`: such a write kills the process with signal 13.
    Default,
}

/// `signal(SIGPIPE, disposition)`.
pub fn set_sigpipe(disposition: SigPipe) -> io::Result<()> {
    let handler = match disposition {
        SigPipe::Ignore => libc::SIG_IGN,
        SigPipe::Default => libc::SIG_DFL,
    };
    // SAFETY: SIG_IGN and SIG_DFL are dispositions, not handlers: no code of ours will run
    // inside a signal.
    let previous = unsafe { libc::signal(libc::SIGPIPE, handler) };
    if previous == libc::SIG_ERR {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `statx(AT_FDCWD, path, flags, STATX_BASIC_STATS)`.
pub fn statx(path: &Path, flags: libc::c_int) -> io::Result<libc::statx> {
    let path = c_path(path)?;
    let mut record = MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `path` is NUL-terminated and only read; `record` is writable and as large as the
    // `struct statx` the kernel fills.
    checked(unsafe {
        libc::statx(libc::AT_FDCWD, path.as_ptr(), flags, libc::STATX_BASIC_STATS, record.as_mut_ptr())
    })?;
    // SAFETY: every field of `statx` is an integer, so the zeroed record was already valid, and
    // the call filled it.
    Ok(unsafe { record.assume_init() })
}

/// `utimensat(AT_FDCWD, path, [UTIME_OMIT, mtime], 0)`: sets the modification time only.
pub fn set_modification_time(path: &Path, seconds: i64, nanoseconds: i64) -> io::Result<()> {
    let path = c_path(path)?;
    let times = [
        libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        libc::timespec { tv_sec: seconds, tv_nsec: nanoseconds },
    ];
    // SAFETY: `path` is NUL-terminated and `times` an array of two timespecs, both alive for
    // the call and only read.
    checked(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) }).map(drop)
}

/// `umask(mask)`: the previous mask.
pub fn umask(mask: libc::mode_t) -> libc::mode_t {
    // SAFETY: `umask` reads no memory and cannot fail.
    unsafe { libc::umask(mask) }
}

/// `fchdir(directory)`.
pub fn fchdir(directory: BorrowedFd) -> io::Result<()> {
    // SAFETY: `fchdir` reads no memory of ours; the descriptor is open (borrowed).
    checked(unsafe { libc::fchdir(directory.as_raw_fd()) }).map(drop)
}

/// `flock(fd, operation)`.
pub fn flock(file: BorrowedFd, operation: libc::c_int) -> io::Result<()> {
    // SAFETY: `flock` reads no memory of ours; the descriptor is open (borrowed).
    checked(unsafe { libc::flock(file.as_raw_fd(), operation) }).map(drop)
}

/// `access(path, mode)`.
pub fn access(path: &Path, mode: libc::c_int) -> io::Result<()> {
    let path = c_path(path)?;
    // SAFETY: `path` is a NUL-terminated string alive for the call, which only reads it.
    checked(unsafe { libc::access(path.as_ptr(), mode) }).map(drop)
}

/// `epoll_create1(flags)`.
pub fn epoll_create1(flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: the call takes no pointer.
    owned(unsafe { libc::epoll_create1(flags) })
}

/// `epoll_ctl(epoll, operation, fd, {events, data})`; `event: None` passes a null pointer.
pub fn epoll_ctl(epoll: BorrowedFd, operation: libc::c_int, fd: RawFd, event: Option<(u32, u64)>) -> io::Result<()> {
    let mut value = event.map(|(events, u64)| libc::epoll_event { events, u64 });
    let pointer = value.as_mut().map_or(std::ptr::null_mut(), |value| value as *mut libc::epoll_event);
    // SAFETY: `pointer` is null or points to an `epoll_event` alive for the whole call; the
    // descriptors are plain numbers the kernel checks.
    checked(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), operation, fd, pointer) }).map(drop)
}

/// `epoll_wait(epoll, events, timeout)`: the (events, data) of each ready interest, at most
/// `most` (which may be 0 or negative, to see the kernel refuse it).
pub fn epoll_wait(
    epoll: BorrowedFd,
    most: libc::c_int,
    timeout_milliseconds: libc::c_int,
) -> io::Result<Vec<(u32, u64)>> {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; most.max(1) as usize];
    // SAFETY: `events` holds at least `most` writable entries for the whole call.
    let count =
        checked(unsafe { libc::epoll_wait(epoll.as_raw_fd(), events.as_mut_ptr(), most, timeout_milliseconds) })?;
    Ok(events[..count as usize].iter().map(|event| (event.events, event.u64)).collect())
}

/// `getsockopt(fd, SOL_SOCKET, option)` of an `int` option.
pub fn socket_option(fd: BorrowedFd, option: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `length` are writable and alive for the whole call, `length` says
    // how many bytes `value` has.
    checked(unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, option, (&mut value as *mut libc::c_int).cast(), &mut length)
    })?;
    Ok(value)
}

/// `send(fd, data, flags)`: how many bytes went.
pub fn send(fd: BorrowedFd, data: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `data` is readable for its length for the whole call.
    let sent = unsafe { libc::send(fd.as_raw_fd(), data.as_ptr().cast(), data.len(), flags) };
    checked_long(sent as libc::c_long).map(|count| count as usize)
}

/// `accept4(fd, NULL, NULL, SOCK_CLOEXEC)`.
pub fn accept(fd: BorrowedFd) -> io::Result<OwnedFd> {
    // SAFETY: null address and length ask for no peer address.
    owned(unsafe { libc::accept4(fd.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) })
}

/// `socket(domain, type, protocol)`.
pub fn socket(domain: libc::c_int, kind: libc::c_int, protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: the call takes no pointer.
    owned(unsafe { libc::socket(domain, kind | libc::SOCK_CLOEXEC, protocol) })
}

/// `getpeername(fd)`: the length of the peer's address.
pub fn peer_name_length(fd: BorrowedFd) -> io::Result<usize> {
    // SAFETY: all-zero bytes are a valid `sockaddr_un`.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut length = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `address` and `length` are writable and alive for the whole call, `length`
    // says how many bytes `address` has.
    checked(unsafe {
        libc::getpeername(fd.as_raw_fd(), (&mut address as *mut libc::sockaddr_un).cast(), &mut length)
    })?;
    Ok(length as usize)
}

/// `socketpair(AF_UNIX, kind | SOCK_CLOEXEC, 0)`.
pub fn socketpair(kind: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    socketpair_of(libc::AF_UNIX, kind)
}

/// `socketpair(domain, kind | SOCK_CLOEXEC, 0)`.
pub fn socketpair_of(domain: libc::c_int, kind: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` holds the two descriptors the call writes.
    checked(unsafe { libc::socketpair(domain, kind | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
    // SAFETY: the call succeeded: both are descriptors it just made, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `recv(fd, buffer, flags)`: how many bytes came.
pub fn recv(fd: BorrowedFd, buffer: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buffer` is writable for its length for the whole call.
    let count = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), flags) };
    checked_long(count as libc::c_long).map(|count| count as usize)
}

/// `close_range(first, last, flags)`.
pub fn close_range(first: libc::c_uint, last: libc::c_uint, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: the call takes no pointer; the descriptors it closes are the caller's to close
    // (the case owns none of them any more, see `close_range` in descriptors.rs).
    checked_long(unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) }).map(drop)
}

/// `bind(fd, address)` of the raw bytes of an address (any family, any length).
pub fn bind_bytes(fd: BorrowedFd, address: &[u8]) -> io::Result<()> {
    // SAFETY: `address` is readable for its length for the whole call.
    checked(unsafe { libc::bind(fd.as_raw_fd(), address.as_ptr().cast(), address.len() as libc::socklen_t) }).map(drop)
}

/// `connect(fd, address)` of the raw bytes of an address (any family, any length).
pub fn connect_bytes(fd: BorrowedFd, address: &[u8]) -> io::Result<()> {
    // SAFETY: `address` is readable for its length for the whole call.
    checked(unsafe { libc::connect(fd.as_raw_fd(), address.as_ptr().cast(), address.len() as libc::socklen_t) })
        .map(drop)
}

/// `getsockname(fd)`: the address's bytes, as long as the call says.
pub fn socket_name_bytes(fd: BorrowedFd) -> io::Result<Vec<u8>> {
    let mut bytes = [0u8; 128];
    let mut length = bytes.len() as libc::socklen_t;
    // SAFETY: `bytes` and `length` are writable and alive for the whole call, `length` says
    // how many bytes `bytes` has.
    checked(unsafe { libc::getsockname(fd.as_raw_fd(), bytes.as_mut_ptr().cast(), &mut length) })?;
    Ok(bytes[..(length as usize).min(bytes.len())].to_vec())
}

/// A raw system call of up to three integer arguments: the ids calls go straight to the
/// kernel, as on both systems, with no libc wrapper in between (musl's and glibc's broadcast
/// them to every thread; fstest has one).
fn raw_call(number: libc::c_long, arguments: [libc::c_long; 3]) -> io::Result<libc::c_long> {
    // SAFETY: every caller below passes integers, or a pointer to memory it owns and that
    // is as large as the call reads or writes.
    checked_long(unsafe { libc::syscall(number, arguments[0], arguments[1], arguments[2]) })
}

/// `setresuid(real, effective, saved)`; `u32::MAX` leaves one.
pub fn setresuid(real: u32, effective: u32, saved: u32) -> io::Result<()> {
    raw_call(libc::SYS_setresuid, [real as libc::c_long, effective as libc::c_long, saved as libc::c_long]).map(drop)
}

/// `setresgid(real, effective, saved)`.
pub fn setresgid(real: u32, effective: u32, saved: u32) -> io::Result<()> {
    raw_call(libc::SYS_setresgid, [real as libc::c_long, effective as libc::c_long, saved as libc::c_long]).map(drop)
}

/// `setuid(id)`, `setgid(id)`.
pub fn setuid(id: u32) -> io::Result<()> {
    raw_call(libc::SYS_setuid, [id as libc::c_long, 0, 0]).map(drop)
}

pub fn setgid(id: u32) -> io::Result<()> {
    raw_call(libc::SYS_setgid, [id as libc::c_long, 0, 0]).map(drop)
}

/// `setreuid(real, effective)`.
pub fn setreuid(real: u32, effective: u32) -> io::Result<()> {
    raw_call(libc::SYS_setreuid, [real as libc::c_long, effective as libc::c_long, 0]).map(drop)
}

/// `setfsuid(id)`: the previous file-system user id (it never fails).
pub fn setfsuid(id: u32) -> u32 {
    raw_call(libc::SYS_setfsuid, [id as libc::c_long, 0, 0]).map_or(u32::MAX, |old| old as u32)
}

/// `getresuid()` / `getresgid()`: real, effective, saved.
pub fn getresuid() -> io::Result<[u32; 3]> {
    get_three(libc::SYS_getresuid)
}

pub fn getresgid() -> io::Result<[u32; 3]> {
    get_three(libc::SYS_getresgid)
}

fn get_three(number: libc::c_long) -> io::Result<[u32; 3]> {
    let mut ids = [0u32; 3];
    let [real, effective, saved] = ids.each_mut().map(|id| id as *mut u32 as libc::c_long);
    raw_call(number, [real, effective, saved])?;
    Ok(ids)
}

/// `geteuid()`.
pub fn geteuid() -> u32 {
    raw_call(libc::SYS_geteuid, [0; 3]).map_or(u32::MAX, |id| id as u32)
}

/// `setgroups(count, list)` with `count` given apart from the list, so a test can lie about
/// it (`list` must hold `count` ids unless the call is to fail first).
pub fn setgroups(count: usize, list: &[u32]) -> io::Result<()> {
    raw_call(libc::SYS_setgroups, [count as libc::c_long, list.as_ptr() as libc::c_long, 0]).map(drop)
}

/// `setgroups(count, address)` with an address that is not the process's (`EFAULT`).
pub fn setgroups_at(count: usize, address: usize) -> io::Result<()> {
    raw_call(libc::SYS_setgroups, [count as libc::c_long, address as libc::c_long, 0]).map(drop)
}

/// `getgroups(list.len(), list)`: how many groups (with an empty list: how many there are).
pub fn getgroups(list: &mut [u32]) -> io::Result<usize> {
    raw_call(libc::SYS_getgroups, [list.len() as libc::c_long, list.as_mut_ptr() as libc::c_long, 0])
        .map(|n| n as usize)
}

/// `chown(path, owner, group)`; `u32::MAX` leaves one.
pub fn chown(path: &Path, owner: u32, group: u32) -> io::Result<()> {
    let path = c_path(path)?;
    // SAFETY: `path` is NUL-terminated and only read.
    checked(unsafe { libc::chown(path.as_ptr(), owner, group) }).map(drop)
}

/// `utimensat(AT_FDCWD, path, times, 0)`: `None` sets both times to now (a null pointer).
pub fn set_times(path: &Path, times: Option<[libc::timespec; 2]>) -> io::Result<()> {
    let path = c_path(path)?;
    let pointer = times.as_ref().map_or(std::ptr::null(), |times| times.as_ptr());
    // SAFETY: `path` is NUL-terminated; `pointer` is null or two timespecs alive for the call.
    checked(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), pointer, 0) }).map(drop)
}

/// `execve(path, [path], [])`: returns only its error.
pub fn execve(path: &Path) -> io::Error {
    let Ok(path) = c_path(path) else { return io::Error::from(io::ErrorKind::InvalidInput) };
    let arguments = [path.as_ptr(), std::ptr::null()];
    let environment = [std::ptr::null::<libc::c_char>()];
    // SAFETY: the path and both arrays are NUL- or null-terminated and alive for the call;
    // on success the call does not return.
    unsafe { libc::execve(path.as_ptr(), arguments.as_ptr(), environment.as_ptr()) };
    io::Error::last_os_error()
}
