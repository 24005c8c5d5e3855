//! File calls on the initramfs (read-only) and the console.

use super::{read_string, read_user, write_user, SyscallResult};
use crate::arch::user::{copy_from_user, copy_to_user};
use crate::fs::{self, Open};
use crate::sched;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use linux_raw_sys::general as linux;

fn process() -> Result<Arc<crate::proc::Process>, u32> {
    sched::current_process().ok_or(errno::EPERM)
}

fn open_file(fd: i64) -> Result<Arc<Open>, u32> {
    let process = process()?;
    let file = process.state.lock().files.get(fd);
    file
}

/// Most bytes one read or write moves through the kernel buffer at a time.
const CHUNK: usize = 4096;

pub fn read(fd: i64, buffer: u64, length: u64) -> SyscallResult {
    let open = open_file(fd)?;
    read_open(&open, buffer, length, None)
}

fn read_open(open: &Open, buffer: u64, length: u64, at: Option<u64>) -> SyscallResult {
    match open {
        Open::Console => {
            if let Some(process) = sched::current_process() {
                fs::console::flush(&process);
            }
            let mut chunk = [0u8; 256];
            let n = fs::console::read(&mut chunk[..(length as usize).min(256)])?;
            copy_to_user(buffer, &chunk[..n]).map_err(|_| errno::EFAULT)?;
            Ok(n as u64)
        }
        Open::File { entry, offset } => {
            let start = at.unwrap_or_else(|| *offset.lock());
            let data = entry.data;
            let begin = (start as usize).min(data.len());
            let end = begin.saturating_add(length as usize).min(data.len());
            if !crate::arch::user::is_user_range(buffer, (end - begin) as u64) {
                return Err(errno::EFAULT);
            }
            copy_to_user(buffer, &data[begin..end]).map_err(|_| errno::EFAULT)?;
            if at.is_none() {
                *offset.lock() = end as u64;
            }
            Ok((end - begin) as u64)
        }
        Open::Directory { .. } => Err(errno::EISDIR),
    }
}

pub fn pread(fd: i64, buffer: u64, length: u64, offset: u64) -> SyscallResult {
    let open = open_file(fd)?;
    if matches!(*open, Open::Console) {
        return Err(errno::ESPIPE);
    }
    read_open(&open, buffer, length, Some(offset))
}

pub fn write(fd: i64, buffer: u64, length: u64) -> SyscallResult {
    let open = open_file(fd)?;
    write_open(&open, buffer, length)
}

fn write_open(open: &Open, buffer: u64, length: u64) -> SyscallResult {
    match open {
        Open::Console => {
            let process = process()?;
            let mut done = 0u64;
            let mut chunk = [0u8; CHUNK];
            while done < length {
                let n = ((length - done) as usize).min(CHUNK);
                copy_from_user(&mut chunk[..n], buffer + done).map_err(|_| errno::EFAULT)?;
                fs::console::write(&process, &chunk[..n]);
                done += n as u64;
            }
            Ok(done)
        }
        Open::File { .. } | Open::Directory { .. } => Err(errno::EBADF),
    }
}

fn vectored(fd: i64, vectors: u64, count: u64, writing: bool) -> SyscallResult {
    if count > 1024 {
        return Err(errno::EINVAL);
    }
    let open = open_file(fd)?;
    let mut total = 0u64;
    for index in 0..count {
        let vector: linux::iovec = read_user(vectors + index * 16)?;
        let (base, length) = (vector.iov_base as u64, vector.iov_len);
        if length == 0 {
            continue;
        }
        let done = if writing { write_open(&open, base, length)? } else { read_open(&open, base, length, None)? };
        total += done;
        if done < length {
            break;
        }
    }
    Ok(total)
}

pub fn readv(fd: i64, vectors: u64, count: u64) -> SyscallResult {
    vectored(fd, vectors, count, false)
}

pub fn writev(fd: i64, vectors: u64, count: u64) -> SyscallResult {
    vectored(fd, vectors, count, true)
}

/// The path `path` names from directory `fd` (or the working directory, the root).
fn path_at(fd: i64, path: &[u8]) -> Result<String, u32> {
    let path = core::str::from_utf8(path).map_err(|_| errno::ENOENT)?;
    if path.starts_with('/') || fd == linux::AT_FDCWD as i64 {
        return Ok(fs::join("/", path));
    }
    match &*open_file(fd)? {
        Open::Directory { entry, .. } => Ok(fs::join(&alloc::format!("/{}", entry.name), path)),
        _ => Err(errno::ENOTDIR),
    }
}

const O_ACCMODE: u64 = 3;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_DIRECTORY: u64 = 0o200000;
const O_NOFOLLOW: u64 = 0o400000;
const O_CLOEXEC: u64 = 0o2000000;

pub fn openat(directory: i64, path: u64, flags: u64) -> SyscallResult {
    let path = read_string(path, 4096)?;
    let full = path_at(directory, &path)?;
    let opened = if full == "/dev/console" || full == "/dev/tty" {
        Open::Console
    } else {
        let entry = fs::resolve(&full, flags & O_NOFOLLOW == 0).map_err(|e| {
            if flags & O_CREAT != 0 && e == errno::ENOENT {
                errno::EROFS
            } else {
                e
            }
        })?;
        if flags & O_ACCMODE != 0 || flags & O_TRUNC != 0 {
            return Err(if entry.is_directory() { errno::EISDIR } else { errno::EROFS });
        }
        if entry.is_directory() {
            Open::Directory { listing: spin::Mutex::new(fs::Listing::start(&entry)?), entry }
        } else if flags & O_DIRECTORY != 0 {
            return Err(errno::ENOTDIR);
        } else if entry.is_symlink() {
            return Err(errno::ELOOP);
        } else {
            Open::File { entry, offset: spin::Mutex::new(0) }
        }
    };
    let process = process()?;
    let fd = process.state.lock().files.install(Arc::new(opened), flags & O_CLOEXEC != 0, 0)?;
    Ok(fd as u64)
}

pub fn close(fd: i64) -> SyscallResult {
    process()?.state.lock().files.close(fd)?;
    Ok(0)
}

pub fn lseek(fd: i64, offset: i64, whence: u64) -> SyscallResult {
    let open = open_file(fd)?;
    match &*open {
        Open::Console => Err(errno::ESPIPE),
        Open::Directory { entry, listing } if offset == 0 && whence == 0 => {
            *listing.lock() = fs::Listing::start(entry)?;
            Ok(0)
        }
        Open::Directory { .. } => Err(errno::EINVAL),
        Open::File { entry, offset: position } => {
            let mut position = position.lock();
            let base = match whence {
                0 => 0,
                1 => *position as i64,
                2 => entry.data.len() as i64,
                _ => return Err(errno::EINVAL),
            };
            let new = base.checked_add(offset).filter(|&n| n >= 0).ok_or(errno::EINVAL)?;
            *position = new as u64;
            Ok(new as u64)
        }
    }
}

fn stat_of_open(open: &Open) -> linux::stat {
    match open {
        Open::Console => fs::console_stat(),
        Open::File { entry, .. } | Open::Directory { entry, .. } => fs::stat_of(entry),
    }
}

pub fn fstat(fd: i64, out: u64) -> SyscallResult {
    let open = open_file(fd)?;
    write_user(out, &stat_of_open(&open))?;
    Ok(0)
}

pub fn fstatat(directory: i64, path: u64, out: u64, flags: u64) -> SyscallResult {
    let path = read_string(path, 4096)?;
    let stat = if path.is_empty() && flags & u64::from(linux::AT_EMPTY_PATH) != 0 {
        stat_of_open(&*open_file(directory)?)
    } else {
        let full = path_at(directory, &path)?;
        if full == "/dev/console" || full == "/dev/tty" {
            fs::console_stat()
        } else {
            fs::stat_of(&fs::resolve(&full, flags & u64::from(linux::AT_SYMLINK_NOFOLLOW) == 0)?)
        }
    };
    write_user(out, &stat)?;
    Ok(0)
}

pub fn faccessat(directory: i64, path: u64) -> SyscallResult {
    let path = read_string(path, 4096)?;
    let full = path_at(directory, &path)?;
    fs::resolve(&full, true)?;
    Ok(0)
}

pub fn readlinkat(directory: i64, path: u64, buffer: u64, size: u64) -> SyscallResult {
    let path = read_string(path, 4096)?;
    let full = path_at(directory, &path)?;
    let target: Vec<u8> = if full == "/proc/self/exe" {
        process()?.state.lock().path.clone().into_bytes()
    } else {
        let entry = fs::resolve(&full, false)?;
        entry.symlink_target().ok_or(errno::EINVAL)?.as_bytes().to_vec()
    };
    let n = target.len().min(size as usize);
    copy_to_user(buffer, &target[..n]).map_err(|_| errno::EFAULT)?;
    Ok(n as u64)
}

pub fn getdents64(fd: i64, buffer: u64, size: u64) -> SyscallResult {
    let open = open_file(fd)?;
    let Open::Directory { entry, listing } = &*open else { return Err(errno::ENOTDIR) };
    let mut out: Vec<u8> = Vec::new();
    let mut listing = listing.lock();
    let mut did_not_fit = false;
    loop {
        let next = match listing.handed_out {
            0 => Some((".", 4u8, u64::from(entry.inode).max(1))),
            1 => Some(("..", 4u8, 1)),
            _ => listing
                .children
                .peek()
                .map(|child| (child.file_name(), fs::directory_entry_type(child), u64::from(child.inode).max(2))),
        };
        let Some((name, kind, inode)) = next else { break };
        let record = (19 + name.len() + 1).next_multiple_of(8);
        if out.len() + record > size as usize {
            did_not_fit = true;
            break;
        }
        listing.handed_out += 1;
        if listing.handed_out > 2 {
            listing.children.next();
        }
        out.extend_from_slice(&inode.to_le_bytes());
        out.extend_from_slice(&(listing.handed_out as i64).to_le_bytes());
        out.extend_from_slice(&(record as u16).to_le_bytes());
        out.push(kind);
        out.extend_from_slice(name.as_bytes());
        out.resize(out.len() + record - 19 - name.len(), 0);
    }
    drop(listing);
    if out.is_empty() && did_not_fit {
        // Linux: the buffer cannot hold even one entry.
        return Err(errno::EINVAL);
    }
    copy_to_user(buffer, &out).map_err(|_| errno::EFAULT)?;
    Ok(out.len() as u64)
}

pub fn dup(fd: i64) -> SyscallResult {
    let process = process()?;
    let mut state = process.state.lock();
    let open = state.files.get(fd)?;
    Ok(state.files.install(open, false, 0)? as u64)
}

pub fn dup3(old: i64, new: i64, flags: u64, is_dup2: bool) -> SyscallResult {
    let process = process()?;
    let mut state = process.state.lock();
    let open = state.files.get(old)?;
    if old == new {
        return if is_dup2 { Ok(new as u64) } else { Err(errno::EINVAL) };
    }
    let new_fd = usize::try_from(new).map_err(|_| errno::EBADF)?;
    state.files.install_at(new_fd, open, flags & O_CLOEXEC != 0)?;
    Ok(new as u64)
}

const F_DUPFD: u64 = 0;
const F_GETFD: u64 = 1;
const F_SETFD: u64 = 2;
const F_GETFL: u64 = 3;
const F_SETFL: u64 = 4;
const F_DUPFD_CLOEXEC: u64 = 1030;

pub fn fcntl(fd: i64, command: u64, argument: u64) -> SyscallResult {
    let process = process()?;
    let mut state = process.state.lock();
    match command {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            let open = state.files.get(fd)?;
            Ok(state.files.install(open, command == F_DUPFD_CLOEXEC, argument as usize)? as u64)
        }
        F_GETFD => Ok(u64::from(*state.files.close_on_exec_flag(fd)?)),
        F_SETFD => {
            *state.files.close_on_exec_flag(fd)? = argument & 1 != 0;
            Ok(0)
        }
        F_GETFL => {
            let open = state.files.get(fd)?;
            Ok(match *open {
                Open::Console => 2,
                Open::Directory { .. } => O_DIRECTORY,
                Open::File { .. } => 0,
            })
        }
        F_SETFL => {
            state.files.get(fd)?;
            Ok(0)
        }
        _ => Err(errno::EINVAL),
    }
}

pub fn ioctl(fd: i64, _request: u64, _argument: u64) -> SyscallResult {
    // A bad descriptor is EBADF; on any other, nothing is a terminal yet: the serial console
    // has no window size or settings Reef offers, so programs treat it as a plain stream.
    open_file(fd)?;
    Err(errno::ENOTTY)
}

/// `poll` on descriptors: the console is always writable and readable when bytes wait;
/// files are always ready.
pub fn poll(fds: u64, count: u64, timeout_ms: i64) -> SyscallResult {
    if count > 1024 {
        return Err(errno::EINVAL);
    }
    let deadline = (timeout_ms >= 0).then(|| crate::time::now_ns() + timeout_ms as u64 * 1_000_000);
    loop {
        let mut ready = 0;
        for index in 0..count {
            let address = fds + index * 8;
            let mut entry: linux::pollfd = read_user(address)?;
            entry.revents = 0;
            if entry.fd >= 0 {
                match open_file(i64::from(entry.fd)) {
                    Err(_) => entry.revents = 0x20, // POLLNVAL
                    Ok(open) => {
                        let readable = match *open {
                            Open::Console => crate::arch::legacy::com1::has_input(),
                            _ => true,
                        };
                        entry.revents = entry.events & (if readable { 0x1 } else { 0 } | 0x4);
                    }
                }
            }
            if entry.revents != 0 {
                ready += 1;
            }
            write_user(address, &entry)?;
        }
        if ready > 0 || deadline.is_some_and(|d| crate::time::now_ns() >= d) {
            return Ok(ready);
        }
        let wait_until = crate::arch::cpu::read_tsc() + crate::time::ns_to_cycles(10_000_000);
        if sched::block(sched::WaitToken::Console, Some(wait_until)).by_signal() {
            return Err(errno::EINTR);
        }
    }
}

pub fn ppoll(fds: u64, count: u64, timeout: u64) -> SyscallResult {
    let timeout_ms = if timeout == 0 {
        -1
    } else {
        let spec: linux::timespec = read_user(timeout)?;
        spec.tv_sec.saturating_mul(1000).saturating_add(spec.tv_nsec / 1_000_000)
    };
    poll(fds, count, timeout_ms)
}

pub fn getcwd(buffer: u64, size: u64) -> SyscallResult {
    if size < 2 {
        return Err(errno::ERANGE);
    }
    copy_to_user(buffer, b"/\0").map_err(|_| errno::EFAULT)?;
    Ok(2)
}

pub fn chdir(path: u64) -> SyscallResult {
    let path = read_string(path, 4096)?;
    let full = path_at(linux::AT_FDCWD as i64, &path)?;
    let entry = fs::resolve(&full, true)?;
    if !entry.is_directory() {
        return Err(errno::ENOTDIR);
    }
    // Every process works from the root until the file service (next issue) keeps a cwd.
    if entry.name.is_empty() {
        Ok(0)
    } else {
        Err(errno::ENOSYS)
    }
}
