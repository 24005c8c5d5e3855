//! File calls: each decodes its user arguments, then asks the file service (`fs::client`);
//! descriptors, `FD_CLOEXEC`, the working directory and the umask stay with the process.

use super::{read_string, read_user, write_user, SyscallResult};
use crate::arch::user::{copy_from_user, copy_to_user, is_user_range};
use crate::fs::client::{self, Answer};
use crate::fs::service::{events, flags};
use crate::fs::{self, Handle};
use crate::proc::{Errno, Process};
use abi::file::{FileOp, HandleKind, Metadata, MAX_TRANSFER, NONE, REQUEST_WORDS};
use alloc::sync::Arc;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use linux_raw_sys::general as linux;
use vfs::Local;

/// Longest path a call takes (Linux `PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

pub(super) fn process() -> Result<Arc<Process>, Errno> {
    crate::proc::current_process().ok_or(errno::EPERM)
}

pub(super) fn handle_of(fd: i64) -> Result<Arc<Handle>, Errno> {
    let process = process()?;
    let handle = process.state.lock().files.get(fd);
    handle
}

pub(super) fn words(values: &[u64]) -> [u64; REQUEST_WORDS] {
    let mut words = [0u64; REQUEST_WORDS];
    words[..values.len()].copy_from_slice(values);
    words
}

fn ask(op: FileOp, values: &[u64], first: &[u8], second: &[u8]) -> Result<Answer, Errno> {
    client::call(op, words(values), first, second)
}

/// As [`ask`], for an operation on paths: with the caller's root directory in the last word.
fn ask_path(op: FileOp, values: &[u64], first: &[u8], second: &[u8]) -> Result<Answer, Errno> {
    let mut words = words(values);
    words[abi::file::ROOT_WORD] = root_word()?;
    client::call(op, words, first, second)
}

/// The handle a `*at` call's directory descriptor names: `NONE` for `AT_FDCWD` or an
/// absolute path (which ignores it).
fn directory_word(fd: i64, path: &[u8]) -> Result<u64, Errno> {
    if fd == linux::AT_FDCWD as i64 || path.first() == Some(&b'/') {
        return Ok(NONE);
    }
    let handle = handle_of(fd)?;
    if handle.kind != HandleKind::Directory {
        return Err(errno::ENOTDIR);
    }
    Ok(handle.id)
}

/// The working directory's handle (`NONE`: the root).
pub(super) fn cwd_word() -> Result<u64, Errno> {
    Ok(process()?.state.lock().cwd.as_ref().map_or(NONE, |handle| handle.id))
}

/// The root directory's handle (`NONE`: the file system's root, the process never `chroot`ed).
pub(super) fn root_word() -> Result<u64, Errno> {
    Ok(process()?.state.lock().root_directory.as_ref().map_or(NONE, |handle| handle.id))
}

/// A path argument: at most `PATH_MAX` bytes before its NUL (longer is ENAMETOOLONG).
fn path_argument(address: u64) -> Result<Vec<u8>, Errno> {
    let path = read_string(address, PATH_MAX)?;
    if path.len() >= PATH_MAX {
        return Err(errno::ENAMETOOLONG);
    }
    Ok(path)
}

pub fn read(fd: i64, buffer: u64, length: u64) -> SyscallResult {
    read_handle(&*handle_of(fd)?, buffer, length, NONE)
}

pub fn pread(fd: i64, buffer: u64, length: u64, offset: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    if matches!(handle.kind, HandleKind::Pipe | HandleKind::Console) {
        return Err(errno::ESPIPE);
    }
    if offset > i64::MAX as u64 {
        return Err(errno::EINVAL);
    }
    read_handle(&handle, buffer, length, offset)
}

fn read_handle(handle: &Handle, buffer: u64, length: u64, offset: u64) -> SyscallResult {
    if !is_user_range(buffer, length) {
        return Err(errno::EFAULT);
    }
    if handle.kind == HandleKind::Directory {
        return Err(errno::EISDIR);
    }
    // Devices without state are answered here, not by the service: no round trip.
    match handle.kind {
        HandleKind::Null => return Ok(0),
        HandleKind::Zero => {
            let zeros = [0u8; 4096];
            let mut done = 0;
            while done < length {
                let count = (length - done).min(zeros.len() as u64);
                copy_to_user(buffer + done, &zeros[..count as usize]).map_err(|_| errno::EFAULT)?;
                done += count;
            }
            return Ok(length);
        }
        _ => {}
    }
    // What the process printed without a newline (a prompt) shows before it may wait.
    if handle.kind != HandleKind::Regular {
        if let Some(process) = crate::proc::current_process() {
            fs::console::flush(&process.console_pending);
        }
    }
    let mut done = 0u64;
    loop {
        let chunk = (length - done).min(MAX_TRANSFER as u64);
        let at = if offset == NONE { NONE } else { offset + done };
        let answer = match ask(FileOp::Read, &[handle.id, chunk, at], &[], &[]) {
            Ok(answer) => answer,
            // A signal cut the wait: restartable, as Linux's ERESTARTSYS.
            Err(errno::EINTR) if done == 0 => return Err(crate::proc::signal::interrupted_errno()),
            Err(error) if done == 0 => return Err(error),
            Err(_) => return Ok(done),
        };
        let count = answer.bytes.len() as u64;
        copy_to_user(buffer + done, &answer.bytes).map_err(|_| errno::EFAULT)?;
        done += count;
        // Only a regular file is read on to fill the buffer; a pipe or a terminal gives what
        // it has, as on Linux.
        if count < chunk || done == length || handle.kind != HandleKind::Regular {
            return Ok(done);
        }
    }
}

pub fn write(fd: i64, buffer: u64, length: u64) -> SyscallResult {
    write_handle(&*handle_of(fd)?, buffer, length, NONE)
}

pub fn pwrite(fd: i64, buffer: u64, length: u64, offset: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    if matches!(handle.kind, HandleKind::Pipe | HandleKind::Console) {
        return Err(errno::ESPIPE);
    }
    if offset > i64::MAX as u64 {
        return Err(errno::EINVAL);
    }
    write_handle(&handle, buffer, length, offset)
}

fn write_handle(handle: &Handle, buffer: u64, length: u64, offset: u64) -> SyscallResult {
    if !is_user_range(buffer, length) {
        return Err(errno::EFAULT);
    }
    if matches!(handle.kind, HandleKind::Null | HandleKind::Zero) {
        return Ok(length);
    }
    let mut done = 0u64;
    let mut chunk = alloc::vec![0u8; (length as usize).min(MAX_TRANSFER)];
    while done < length {
        let count = ((length - done) as usize).min(MAX_TRANSFER);
        copy_from_user(&mut chunk[..count], buffer + done).map_err(|_| errno::EFAULT)?;
        let at = if offset == NONE { NONE } else { offset + done };
        let written = match write_chunk(handle, &chunk[..count], at) {
            Ok(written) => written,
            Err(error) if done == 0 => return Err(error),
            Err(_) => return Ok(done),
        };
        done += written;
        if written < count as u64 {
            break;
        }
    }
    Ok(done)
}

/// Writes `bytes` (at most `MAX_TRANSFER`) at `offset` (`NONE`: the file's position) to
/// `handle`; returns how many were written. A pipe nobody reads raises SIGPIPE too.
pub(super) fn write_chunk(handle: &Handle, bytes: &[u8], offset: u64) -> Result<u64, Errno> {
    if handle.kind == HandleKind::Console {
        // Line-buffered by the process and written by the console's owner: no round trip.
        fs::console::write(&process()?.console_pending, bytes);
        return Ok(bytes.len() as u64);
    }
    match ask(FileOp::Write, &[handle.id, offset], bytes, &[]) {
        Ok(answer) => Ok(answer.value),
        Err(errno::EPIPE) => {
            // The reader is gone: SIGPIPE, whose default ends the writer [pipe(7)].
            crate::proc::signal::send_to_current(13);
            Err(errno::EPIPE)
        }
        Err(errno::EINTR) => Err(crate::proc::signal::interrupted_errno()),
        Err(error) => Err(error),
    }
}

/// `statfs(path, buffer)`: the file system holding `path`.
pub fn statfs(path: u64, buffer: u64) -> SyscallResult {
    let path = path_argument(path)?;
    write_filesystem_stats(stat_at(linux::AT_FDCWD as i64, &path, 0)?.device, buffer)
}

/// `fstatfs(fd, buffer)`: the file system holding what `fd` has open. A pipe or the console
/// is on Linux's pipefs or devtmpfs.
pub fn fstatfs(fd: i64, buffer: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    let device = match handle.kind {
        HandleKind::Pipe => return write_statfs(buffer, vfs_pipe_space()),
        _ => metadata_of(ask(FileOp::Stat, &[handle.id], &[], &[])?)?.device,
    };
    write_filesystem_stats(device, buffer)
}

/// What Linux's pipefs says: no room to speak of.
fn vfs_pipe_space() -> vfs::Space {
    /// `PIPEFS_MAGIC` [Linux include/uapi/linux/magic.h].
    const PIPEFS_MAGIC: u64 = 0x5049_5045;
    vfs::Space { magic: PIPEFS_MAGIC, read_only: false, pages: 0, free_pages: 0, nodes: 0, free_nodes: 0 }
}

/// Asks the service about the file system of device `device` and writes its `statfs`.
fn write_filesystem_stats(device: u64, buffer: u64) -> SyscallResult {
    let bytes = ask(FileOp::FilesystemSpace, &[device], &[], &[])?.bytes;
    let mut words = [0u64; 6];
    if bytes.len() != words.len() * 8 {
        return Err(errno::EIO);
    }
    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_le_bytes(chunk.try_into().map_err(|_| errno::EIO)?);
    }
    let space = vfs::Space {
        magic: words[0],
        read_only: words[1] != 0,
        pages: words[2],
        free_pages: words[3],
        nodes: words[4],
        free_nodes: words[5],
    };
    write_statfs(buffer, space)
}

/// Linux's x86-64 `struct statfs`: type, block size, blocks, free, available, files, free
/// files, fsid (two ints), name length, fragment size, mount flags, four spare words.
fn write_statfs(buffer: u64, space: vfs::Space) -> SyscallResult {
    /// `ST_RDONLY`, `ST_NOATIME` (Reef's mounts do not update access times).
    const READ_ONLY: u64 = 1;
    const NO_ACCESS_TIME: u64 = 1024;
    let page = vfs::PAGE_SIZE as u64;
    let flags = NO_ACCESS_TIME | if space.read_only { READ_ONLY } else { 0 };
    let fields: [u64; 15] = [
        space.magic,
        page,
        space.pages,
        space.free_pages,
        space.free_pages,
        space.nodes,
        space.free_nodes,
        0,
        255,
        page,
        flags,
        0,
        0,
        0,
        0,
    ];
    write_user(buffer, &fields)?;
    Ok(0)
}

/// `fadvise64(fd, offset, length, advice)`: advice about the access pattern, which a kernel
/// may follow or not (POSIX); Reef reads every file the same way, so it checks the descriptor
/// and the advice and does nothing.
pub fn fadvise(fd: i64, advice: u64) -> SyscallResult {
    /// `POSIX_FADV_NORMAL` to `POSIX_FADV_NOREUSE`.
    const LAST_ADVICE: u64 = 5;
    let handle = handle_of(fd)?;
    if handle.kind == HandleKind::Pipe {
        return Err(errno::ESPIPE);
    }
    if advice > LAST_ADVICE {
        return Err(errno::EINVAL);
    }
    Ok(0)
}

/// `sendfile(out, in, offset, count)`: copies up to `count` bytes from `in` (at `*offset`,
/// which advances, or at its position) to `out`, through the kernel, a chunk at a time.
pub fn sendfile(out_fd: i64, in_fd: i64, offset_address: u64, count: u64) -> SyscallResult {
    let (input, output) = (handle_of(in_fd)?, handle_of(out_fd)?);
    if matches!(input.kind, HandleKind::Directory) || matches!(output.kind, HandleKind::Directory) {
        return Err(errno::EINVAL);
    }
    let mut offset = if offset_address == 0 {
        NONE
    } else {
        let offset: i64 = read_user(offset_address)?;
        if offset < 0 || matches!(input.kind, HandleKind::Pipe | HandleKind::Console) {
            return Err(if offset < 0 { errno::EINVAL } else { errno::ESPIPE });
        }
        offset as u64
    };
    let count = count.min(0x7fff_f000);
    let mut done = 0u64;
    let result = loop {
        if done == count {
            break Ok(done);
        }
        let chunk = (count - done).min(MAX_TRANSFER as u64);
        let bytes = match ask(FileOp::Read, &[input.id, chunk, offset], &[], &[]) {
            Ok(answer) => answer.bytes,
            Err(error) if done == 0 => {
                break Err(if error == errno::EINTR { crate::proc::signal::interrupted_errno() } else { error })
            }
            Err(_) => break Ok(done),
        };
        if bytes.is_empty() {
            break Ok(done);
        }
        let written = match write_chunk(&output, &bytes, NONE) {
            Ok(written) => written,
            Err(error) if done == 0 => break Err(error),
            Err(_) => break Ok(done),
        };
        done += written;
        if offset != NONE {
            offset += written;
        }
        if written < bytes.len() as u64 || bytes.len() < chunk as usize {
            break Ok(done);
        }
    };
    if offset_address != 0 && offset != NONE {
        write_user(offset_address, &(offset as i64))?;
    }
    result
}

fn vectored(fd: i64, vectors: u64, count: u64, writing: bool, offset: u64) -> SyscallResult {
    if count > 1024 {
        return Err(errno::EINVAL);
    }
    let handle = handle_of(fd)?;
    let mut total = 0u64;
    for index in 0..count {
        let vector: linux::iovec = read_user(vectors + index * 16)?;
        let (base, length) = (vector.iov_base as u64, vector.iov_len);
        if length == 0 {
            continue;
        }
        let at = if offset == NONE { NONE } else { offset + total };
        let result =
            if writing { write_handle(&handle, base, length, at) } else { read_handle(&handle, base, length, at) };
        let done = match result {
            Ok(done) => done,
            Err(error) if total == 0 => return Err(error),
            Err(_) => break,
        };
        total += done;
        if done < length {
            break;
        }
    }
    Ok(total)
}

pub fn readv(fd: i64, vectors: u64, count: u64) -> SyscallResult {
    vectored(fd, vectors, count, false, NONE)
}

pub fn writev(fd: i64, vectors: u64, count: u64) -> SyscallResult {
    vectored(fd, vectors, count, true, NONE)
}

pub fn preadv(fd: i64, vectors: u64, count: u64, offset: u64) -> SyscallResult {
    vectored(fd, vectors, count, false, offset)
}

pub fn pwritev(fd: i64, vectors: u64, count: u64, offset: u64) -> SyscallResult {
    vectored(fd, vectors, count, true, offset)
}

pub(super) fn install(handle: Handle, close_on_exec: bool) -> SyscallResult {
    let process = process()?;
    let fd = process.state.lock().files.install(Arc::new(handle), close_on_exec, 0)?;
    Ok(fd as u64)
}

fn open_handle(directory: i64, path: &[u8], open_flags: u64, mode: u64) -> Result<Handle, Errno> {
    let umask = process()?.state.lock().umask;
    let permissions = (mode & 0o7777) & !u64::from(umask);
    let directory = directory_word(directory, path)?;
    // A path that fails inside the initramfs fails the same everywhere (a missing
    // `/etc/localtime`, which glibc probes at every `localtime`): no message for it. What
    // it names, the service opens.
    if open_flags & flags::CREATE == 0 {
        if let Local::Failed(error) = local_stat(path, open_flags & flags::NO_FOLLOW == 0)? {
            return Err(error);
        }
    }
    let answer = ask_path(FileOp::Open, &[directory, cwd_word()?, open_flags, permissions], path, &[])?;
    let kind = HandleKind::from_u64(answer.words[1]).ok_or(errno::EIO)?;
    Ok(Handle::adopt(answer.words[0], kind))
}

pub fn openat(directory: i64, path: u64, open_flags: u64, mode: u64) -> SyscallResult {
    let path = path_argument(path)?;
    let handle = match open_handle(directory, &path, open_flags, mode) {
        Ok(handle) => handle,
        // Only a FIFO's open waits (for the other end): a signal cuts it short, and it runs
        // again after the handler if that asks for restarts, as Linux's `fifo_open`.
        Err(errno::EINTR) => return Err(crate::proc::signal::interrupted_errno()),
        Err(error) => return Err(error),
    };
    install(handle, open_flags & flags::CLOSE_ON_EXEC != 0)
}

pub fn close(fd: i64) -> SyscallResult {
    process()?.state.lock().files.close(fd)?;
    Ok(0)
}

pub fn lseek(fd: i64, offset: i64, whence: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    Ok(ask(FileOp::Seek, &[handle.id, offset as u64, whence], &[], &[])?.value)
}

/// What this instance knows of `path` without the service (`fs::local`): only for a process
/// that never changed its root (the view is of the file system's root; relative paths ask).
fn local_stat(path: &[u8], follow_last: bool) -> Result<Local, Errno> {
    if root_word()? != NONE {
        return Ok(Local::Ask);
    }
    Ok(fs::local::stat(path, follow_last))
}

fn metadata_of(answer: Answer) -> Result<Metadata, Errno> {
    Metadata::decode(&answer.bytes).map_err(|_| errno::EIO)
}

fn stat_at(directory: i64, path: &[u8], at_flags: u64) -> Result<Metadata, Errno> {
    if path.is_empty() {
        if at_flags & u64::from(linux::AT_EMPTY_PATH) == 0 {
            return Err(errno::ENOENT);
        }
        let handle = if directory == linux::AT_FDCWD as i64 { None } else { Some(handle_of(directory)?) };
        return match handle {
            Some(handle) => metadata_of(ask(FileOp::Stat, &[handle.id], &[], &[])?),
            None => metadata_of(ask_path(FileOp::StatPath, &[NONE, cwd_word()?, 1], b".", &[])?),
        };
    }
    let follow = u64::from(at_flags & u64::from(linux::AT_SYMLINK_NOFOLLOW) == 0);
    let directory = directory_word(directory, path)?;
    match local_stat(path, follow == 1)? {
        Local::Found(metadata) => return Ok(fs::wire_metadata(&metadata)),
        Local::Failed(error) => return Err(error),
        Local::Ask => {}
    }
    metadata_of(ask_path(FileOp::StatPath, &[directory, cwd_word()?, follow], path, &[])?)
}

pub fn fstat(fd: i64, out: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    let metadata = metadata_of(ask(FileOp::Stat, &[handle.id], &[], &[])?)?;
    write_user(out, &fs::linux_stat(&metadata))?;
    Ok(0)
}

/// What the `*xattr` reads answer once the file is found: the file service keeps no extended
/// attributes (and so no ACLs), so every one is absent (`getxattr`: `ENODATA`) and the list is
/// empty, as on a file system mounted without them (`ls -l` asks for
/// `system.posix_acl_access`). A path that names nothing is `ENOENT`, a bad descriptor
/// `EBADF`, as on Linux.
pub enum XattrRead {
    Get,
    List,
}

/// `getxattr`/`listxattr` (`follow`) and their `l` forms, on `path`.
pub fn xattr_at(path: u64, follow: bool, read: XattrRead) -> SyscallResult {
    let path = path_argument(path)?;
    stat_at(linux::AT_FDCWD as i64, &path, if follow { 0 } else { u64::from(linux::AT_SYMLINK_NOFOLLOW) })?;
    xattr_answer(read)
}

/// `fgetxattr`/`flistxattr` on `fd`.
pub fn xattr_of(fd: i64, read: XattrRead) -> SyscallResult {
    handle_of(fd)?;
    xattr_answer(read)
}

fn xattr_answer(read: XattrRead) -> SyscallResult {
    match read {
        XattrRead::Get => Err(errno::ENODATA),
        XattrRead::List => Ok(0),
    }
}

pub fn fstatat(directory: i64, path: u64, out: u64, at_flags: u64) -> SyscallResult {
    let path = path_argument(path)?;
    let metadata = stat_at(directory, &path, at_flags)?;
    write_user(out, &fs::linux_stat(&metadata))?;
    Ok(0)
}

/// `statx` [Linux include/uapi/linux/stat.h]: the basic fields, all reported valid.
pub fn statx(directory: i64, path: u64, at_flags: u64, _mask: u64, out: u64) -> SyscallResult {
    let path = path_argument(path)?;
    let metadata = stat_at(directory, &path, at_flags)?;
    let mut record = [0u8; 256];
    let mut put = |at: usize, bytes: &[u8]| record[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &0x7ffu32.to_le_bytes()); // STATX_BASIC_STATS
    put(4, &4096u32.to_le_bytes());
    put(16, &metadata.links.to_le_bytes());
    put(20, &metadata.uid.to_le_bytes());
    put(24, &metadata.gid.to_le_bytes());
    put(28, &(metadata.mode as u16).to_le_bytes());
    put(32, &metadata.inode.to_le_bytes());
    put(40, &metadata.size.to_le_bytes());
    put(48, &metadata.blocks.to_le_bytes());
    for (at, ns) in [(64, metadata.accessed_ns), (96, metadata.changed_ns), (112, metadata.modified_ns)] {
        put(at, &(ns / 1_000_000_000).to_le_bytes());
        put(at + 8, &((ns % 1_000_000_000) as u32).to_le_bytes());
    }
    put(128, &((metadata.rdev >> 8) as u32).to_le_bytes());
    put(132, &((metadata.rdev & 0xff) as u32).to_le_bytes());
    put(136, &((metadata.device >> 8) as u32).to_le_bytes());
    put(140, &((metadata.device & 0xff) as u32).to_le_bytes());
    copy_to_user(out, &record).map_err(|_| errno::EFAULT)?;
    Ok(0)
}

pub fn faccessat(directory: i64, path: u64, mode: u64, at_flags: u64) -> SyscallResult {
    let path = path_argument(path)?;
    if mode & !7 != 0 {
        return Err(errno::EINVAL);
    }
    let follow = u64::from(at_flags & u64::from(linux::AT_SYMLINK_NOFOLLOW) == 0);
    let mut words = words(&[directory_word(directory, &path)?, cwd_word()?, mode, follow]);
    words[abi::file::ROOT_WORD] = root_word()?;
    // Checked with the real ids, unless `AT_EACCESS` asks for the effective ones (access(2)).
    if at_flags & u64::from(linux::AT_EACCESS) != 0 {
        client::call(FileOp::Access, words, &path, &[])?;
    } else {
        client::call_as_real(FileOp::Access, words, &path)?;
    }
    Ok(0)
}

pub fn readlinkat(directory: i64, path: u64, buffer: u64, size: u64) -> SyscallResult {
    let path = path_argument(path)?;
    if size == 0 || size > i32::MAX as u64 {
        return Err(errno::EINVAL);
    }
    let target: Vec<u8> = if path == b"/proc/self/exe" {
        process()?.state.lock().path.clone().into_bytes()
    } else {
        ask_path(FileOp::ReadLink, &[directory_word(directory, &path)?, cwd_word()?], &path, &[])?.bytes
    };
    let n = target.len().min(size as usize);
    copy_to_user(buffer, &target[..n]).map_err(|_| errno::EFAULT)?;
    Ok(n as u64)
}

pub fn getdents64(fd: i64, buffer: u64, size: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    if handle.kind != HandleKind::Directory {
        return Err(errno::ENOTDIR);
    }
    if !is_user_range(buffer, size) {
        return Err(errno::EFAULT);
    }
    let answer = ask(FileOp::ReadDirectory, &[handle.id, size.min(MAX_TRANSFER as u64)], &[], &[])?;
    copy_to_user(buffer, &answer.bytes).map_err(|_| errno::EFAULT)?;
    Ok(answer.bytes.len() as u64)
}

pub fn mkdirat(directory: i64, path: u64, mode: u64) -> SyscallResult {
    let path = path_argument(path)?;
    let umask = process()?.state.lock().umask;
    let permissions = (mode & 0o7777) & !u64::from(umask);
    ask_path(FileOp::MakeDirectory, &[directory_word(directory, &path)?, cwd_word()?, permissions], &path, &[])?;
    Ok(0)
}

/// `mknodat`: a FIFO or a regular file (the service's `Vfs::make_node` says what else is
/// refused, and why); the device number is for device nodes, which are refused.
pub fn mknodat(directory: i64, path: u64, mode: u64, _device: u64) -> SyscallResult {
    let path = path_argument(path)?;
    let umask = process()?.state.lock().umask;
    let type_and_permissions = (mode & 0o170_000) | ((mode & 0o7777) & !u64::from(umask));
    ask_path(FileOp::MakeNode, &[directory_word(directory, &path)?, cwd_word()?, type_and_permissions], &path, &[])?;
    Ok(0)
}

pub fn unlinkat(directory: i64, path: u64, at_flags: u64) -> SyscallResult {
    let path = path_argument(path)?;
    if at_flags & !u64::from(linux::AT_REMOVEDIR) != 0 {
        return Err(errno::EINVAL);
    }
    let remove_directory = u64::from(at_flags & u64::from(linux::AT_REMOVEDIR) != 0);
    ask_path(FileOp::Unlink, &[directory_word(directory, &path)?, cwd_word()?, remove_directory], &path, &[])?;
    Ok(0)
}

pub fn renameat2(from_directory: i64, from: u64, to_directory: i64, to: u64, rename_flags: u64) -> SyscallResult {
    let (from, to) = (path_argument(from)?, path_argument(to)?);
    if rename_flags & !3 != 0 || rename_flags == 3 {
        return Err(errno::EINVAL);
    }
    let words = [directory_word(from_directory, &from)?, directory_word(to_directory, &to)?, cwd_word()?, rename_flags];
    ask_path(FileOp::Rename, &words, &from, &to)?;
    Ok(0)
}

pub fn linkat(from_directory: i64, from: u64, to_directory: i64, to: u64, at_flags: u64) -> SyscallResult {
    let (from, to) = (path_argument(from)?, path_argument(to)?);
    let follow = u64::from(at_flags & u64::from(linux::AT_SYMLINK_FOLLOW) != 0);
    let words = [directory_word(from_directory, &from)?, directory_word(to_directory, &to)?, cwd_word()?, follow];
    ask_path(FileOp::Link, &words, &from, &to)?;
    Ok(0)
}

pub fn symlinkat(target: u64, directory: i64, path: u64) -> SyscallResult {
    let (target, path) = (path_argument(target)?, path_argument(path)?);
    if target.is_empty() {
        return Err(errno::ENOENT);
    }
    ask_path(FileOp::Symlink, &[directory_word(directory, &path)?, cwd_word()?], &target, &path)?;
    Ok(0)
}

pub fn ftruncate(fd: i64, size: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    if size > i64::MAX as u64 {
        return Err(errno::EINVAL);
    }
    if handle.kind != HandleKind::Regular {
        return Err(errno::EINVAL);
    }
    ask(FileOp::Truncate, &[handle.id, size], &[], &[])?;
    Ok(0)
}

/// `fallocate(fd, mode, offset, length)`: mode 0 makes the file at least `offset + length`
/// long (the new bytes read as zeros, as after Linux's allocation); `FALLOC_FL_KEEP_SIZE`
/// changes nothing a reader sees (the file services allocate on write); the other modes
/// (punching or collapsing ranges) are `EOPNOTSUPP`, which glibc's `posix_fallocate` meets
/// by writing.
pub fn fallocate(fd: i64, mode: u64, offset: u64, length: u64) -> SyscallResult {
    const FALLOC_FL_KEEP_SIZE: u64 = 1;
    let handle = handle_of(fd)?;
    let (offset, length) = (offset as i64, length as i64);
    if offset < 0 || length <= 0 {
        return Err(errno::EINVAL);
    }
    let end = offset.checked_add(length).ok_or(errno::EFBIG)? as u64;
    match handle.kind {
        HandleKind::Regular => {}
        HandleKind::Directory => return Err(errno::EISDIR),
        HandleKind::Pipe => return Err(errno::ESPIPE),
        _ => return Err(errno::ENODEV),
    }
    let access = ask(FileOp::GetFlags, &[handle.id], &[], &[])?.value & flags::ACCESS_MODE;
    if access != flags::WRITE_ONLY && access != flags::READ_WRITE {
        return Err(errno::EBADF);
    }
    match mode {
        0 => {
            let size = metadata_of(ask(FileOp::Stat, &[handle.id], &[], &[])?)?.size;
            if end > size {
                ask(FileOp::Truncate, &[handle.id, end], &[], &[])?;
            }
            Ok(0)
        }
        FALLOC_FL_KEEP_SIZE => Ok(0),
        _ => Err(errno::EOPNOTSUPP),
    }
}

pub fn truncate(path: u64, size: u64) -> SyscallResult {
    let path = path_argument(path)?;
    if size > i64::MAX as u64 {
        return Err(errno::EINVAL);
    }
    let handle = open_handle(linux::AT_FDCWD as i64, &path, flags::WRITE_ONLY, 0)?;
    if handle.kind != HandleKind::Regular {
        return Err(errno::EINVAL);
    }
    ask(FileOp::Truncate, &[handle.id, size], &[], &[])?;
    Ok(0)
}

pub fn fsync(fd: i64) -> SyscallResult {
    // Everything lives in memory: written is as durable as it gets.
    handle_of(fd)?;
    Ok(0)
}

/// `UTIME_NOW` and `UTIME_OMIT` in a `timespec`'s nanoseconds.
const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

pub fn utimensat(directory: i64, path: u64, times: u64, at_flags: u64) -> SyscallResult {
    let path = if path == 0 { Vec::new() } else { path_argument(path)? };
    let now = crate::time::realtime_ns();
    // A time given, not "now" or "omit": only the owner may set it (utimensat(2)).
    let mut explicit = false;
    let [accessed, modified] = if times == 0 {
        [now, now]
    } else {
        let spec: [linux::timespec; 2] = read_user(times)?;
        let mut result = [0u64; 2];
        for (out, time) in result.iter_mut().zip(spec) {
            *out = match time.tv_nsec {
                UTIME_NOW => now,
                UTIME_OMIT => NONE,
                ns if (0..1_000_000_000).contains(&ns) && time.tv_sec >= 0 => {
                    explicit = true;
                    (time.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ns as u64)
                }
                _ => return Err(errno::EINVAL),
            };
        }
        result
    };
    let follow = u64::from(at_flags & u64::from(linux::AT_SYMLINK_NOFOLLOW) == 0);
    let follow = follow | if explicit { crate::fs::service::request::SET_TIMES_EXPLICIT } else { 0 };
    let base = if path.is_empty() { handle_of(directory)?.id } else { directory_word(directory, &path)? };
    ask_path(FileOp::SetTimes, &[base, cwd_word()?, accessed, modified, follow], &path, &[])?;
    Ok(0)
}

pub fn fchmodat(directory: i64, path: u64, mode: u64) -> SyscallResult {
    let path = path_argument(path)?;
    ask_path(FileOp::ChangeMode, &[directory_word(directory, &path)?, cwd_word()?, mode & 0o7777, 1], &path, &[])?;
    Ok(0)
}

pub fn fchmod(fd: i64, mode: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    ask(FileOp::ChangeMode, &[handle.id, NONE, mode & 0o7777, 1], &[], &[])?;
    Ok(0)
}

/// `fchownat`, `chown`, `lchown`, `fchown`: `-1` leaves an id. The file service decides with
/// the caller's ids (root gives any owner; a user only the no-op or one of its groups).
pub fn fchownat(directory: i64, path: u64, owner: u64, group: u64, at_flags: u64) -> SyscallResult {
    let mut path = if path == 0 { Vec::new() } else { path_argument(path)? };
    let id = |id: u64| if id as u32 == u32::MAX { NONE } else { u64::from(id as u32) };
    let follow = u64::from(at_flags & u64::from(linux::AT_SYMLINK_NOFOLLOW) == 0);
    if path.is_empty() && at_flags & u64::from(linux::AT_EMPTY_PATH) == 0 {
        return Err(errno::ENOENT);
    }
    if path.is_empty() && directory == linux::AT_FDCWD as i64 {
        // `AT_EMPTY_PATH` with `AT_FDCWD`: the working directory.
        path = b".".to_vec();
    }
    let base = if path.is_empty() { handle_of(directory)?.id } else { directory_word(directory, &path)? };
    ask_path(FileOp::ChangeOwner, &[base, cwd_word()?, id(owner), id(group), follow], &path, &[])?;
    Ok(0)
}

pub fn dup(fd: i64) -> SyscallResult {
    let process = process()?;
    let mut state = process.state.lock();
    let open = state.files.get(fd)?;
    Ok(state.files.install(open, false, 0)? as u64)
}

pub fn dup3(old: i64, new: i64, dup_flags: u64, is_dup2: bool) -> SyscallResult {
    let process = process()?;
    let replaced = {
        let mut state = process.state.lock();
        let open = state.files.get(old)?;
        if old == new {
            return if is_dup2 { Ok(new as u64) } else { Err(errno::EINVAL) };
        }
        if !is_dup2 && dup_flags & !flags::CLOSE_ON_EXEC != 0 {
            return Err(errno::EINVAL);
        }
        let new_fd = usize::try_from(new).map_err(|_| errno::EBADF)?;
        let replaced = state.files.get(new).ok();
        state.files.install_at(new_fd, open, dup_flags & flags::CLOSE_ON_EXEC != 0)?;
        replaced
    };
    drop(replaced);
    Ok(new as u64)
}

const F_DUPFD: u64 = 0;
const F_GETFD: u64 = 1;
const F_SETFD: u64 = 2;
const F_GETFL: u64 = 3;
const F_SETFL: u64 = 4;
const F_SETLK: u64 = 6;
const F_SETLKW: u64 = 7;
const F_GETLK: u64 = 5;
/// `F_SETPIPE_SZ`, `F_GETPIPE_SZ` [Linux include/uapi/linux/fcntl.h].
const F_SETPIPE_SZ: u64 = 1031;
const F_GETPIPE_SZ: u64 = 1032;

/// `F_GETPIPE_SZ` and `F_SETPIPE_SZ`: a pipe's capacity is fixed (`vfs::PIPE_CAPACITY`,
/// 64 KiB, Linux's default), so a request up to it is granted with that capacity (Linux too
/// may give more than asked) and a larger one is `EPERM`, as above `pipe-max-size`; a
/// descriptor that is not a pipe is `EBADF`, as on Linux.
fn pipe_size(fd: i64, command: u64, argument: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    let metadata = metadata_of(ask(FileOp::Stat, &[handle.id], &[], &[])?)?;
    if metadata.mode & linux::S_IFMT != linux::S_IFIFO {
        return Err(errno::EBADF);
    }
    let capacity = vfs::PIPE_CAPACITY as u64;
    match command {
        F_SETPIPE_SZ if argument > capacity => Err(errno::EPERM),
        _ => Ok(capacity),
    }
}
const F_DUPFD_CLOEXEC: u64 = 1030;

pub fn fcntl(fd: i64, command: u64, argument: u64) -> SyscallResult {
    let process = process()?;
    match command {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            if argument >= crate::fs::MAX_FILES as u64 {
                return Err(errno::EINVAL);
            }
            let mut state = process.state.lock();
            let open = state.files.get(fd)?;
            Ok(state.files.install(open, command == F_DUPFD_CLOEXEC, argument as usize)? as u64)
        }
        F_GETFD => Ok(u64::from(*process.state.lock().files.close_on_exec_flag(fd)?)),
        F_SETFD => {
            *process.state.lock().files.close_on_exec_flag(fd)? = argument & 1 != 0;
            Ok(0)
        }
        F_GETFL => {
            let handle = handle_of(fd)?;
            Ok(ask(FileOp::GetFlags, &[handle.id], &[], &[])?.value)
        }
        F_SETFL => {
            let handle = handle_of(fd)?;
            ask(FileOp::SetFlags, &[handle.id, argument], &[], &[])?;
            Ok(0)
        }
        // Record locks: one process at a time uses a file in Reef's programs; a lock is
        // granted, and F_GETLK says nobody holds one (`l_type = F_UNLCK`).
        F_SETLK | F_SETLKW => {
            handle_of(fd)?;
            Ok(0)
        }
        F_GETLK => {
            handle_of(fd)?;
            write_user(argument, &2u16)?;
            Ok(0)
        }
        F_SETPIPE_SZ | F_GETPIPE_SZ => pipe_size(fd, command, argument & u64::from(u32::MAX)),
        _ => Err(errno::EINVAL),
    }
}

/// The ioctls every descriptor takes, whatever it names [Linux fs/ioctl.c `do_vfs_ioctl`].
mod generic_ioctl {
    /// `FIOCLEX`, `FIONCLEX`: set or clear `FD_CLOEXEC`.
    pub const SET_CLOSE_ON_EXEC: u32 = 0x5451;
    pub const CLEAR_CLOSE_ON_EXEC: u32 = 0x5450;
    /// `FIONBIO`: an int, non-zero for `O_NONBLOCK` (Rust's `set_nonblocking` uses it).
    pub const NON_BLOCKING: u32 = 0x5421;
}

pub fn ioctl(fd: i64, request: u64, argument: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    let request = request as u32;
    match request {
        generic_ioctl::SET_CLOSE_ON_EXEC | generic_ioctl::CLEAR_CLOSE_ON_EXEC => {
            *process()?.state.lock().files.close_on_exec_flag(fd)? = request == generic_ioctl::SET_CLOSE_ON_EXEC;
            return Ok(0);
        }
        generic_ioctl::NON_BLOCKING => {
            let on: i32 = read_user(argument)?;
            let status = ask(FileOp::GetFlags, &[handle.id], &[], &[])?.value;
            let status = if on != 0 { status | flags::NONBLOCK } else { status & !flags::NONBLOCK };
            ask(FileOp::SetFlags, &[handle.id, status], &[], &[])?;
            return Ok(0);
        }
        _ => {}
    }
    if handle.kind == HandleKind::Socket {
        if let Some(answer) = super::sockets::interface_ioctl(request, argument) {
            return answer;
        }
    }
    let (bytes_in, bytes_out) = match handle.kind {
        HandleKind::Console => fs::terminal::argument_sizes(request).ok_or(errno::ENOTTY)?,
        HandleKind::Pipe if request == fs::terminal::request::BYTES_READABLE => (0, 4),
        _ => return Err(errno::ENOTTY),
    };
    let mut input = alloc::vec![0u8; bytes_in];
    copy_from_user(&mut input, argument).map_err(|_| errno::EFAULT)?;
    if bytes_out > 0 && !is_user_range(argument, bytes_out as u64) {
        return Err(errno::EFAULT);
    }
    let answer = ask(FileOp::Control, &[handle.id, u64::from(request), argument], &input, &[])?;
    let n = answer.bytes.len().min(bytes_out);
    copy_to_user(argument, &answer.bytes[..n]).map_err(|_| errno::EFAULT)?;
    Ok(0)
}

pub fn pipe2(out: u64, pipe_flags: u64) -> SyscallResult {
    if pipe_flags & !(flags::CLOSE_ON_EXEC | flags::NONBLOCK) != 0 {
        return Err(errno::EINVAL);
    }
    if !is_user_range(out, 8) {
        return Err(errno::EFAULT);
    }
    let answer = ask(FileOp::Pipe, &[pipe_flags], &[], &[])?;
    let reader = Handle::adopt(answer.words[0], HandleKind::Pipe);
    let writer = Handle::adopt(answer.words[1], HandleKind::Pipe);
    let close_on_exec = pipe_flags & flags::CLOSE_ON_EXEC != 0;
    let process = process()?;
    let fds = {
        let mut state = process.state.lock();
        let read_fd = state.files.install(Arc::new(reader), close_on_exec, 0)?;
        match state.files.install(Arc::new(writer), close_on_exec, 0) {
            Ok(write_fd) => [read_fd as i32, write_fd as i32],
            Err(error) => {
                let _ = state.files.close(read_fd as i64);
                return Err(error);
            }
        }
    };
    if write_user(out, &fds).is_err() {
        let mut state = process.state.lock();
        let _ = state.files.close(i64::from(fds[0]));
        let _ = state.files.close(i64::from(fds[1]));
        return Err(errno::EFAULT);
    }
    Ok(0)
}

/// `poll`: the service says which descriptors are ready, and parks the question until one
/// is (or the timeout passes: then this instance cancels it).
pub fn poll(fds: u64, count: u64, timeout_ms: i64) -> SyscallResult {
    if count > crate::fs::MAX_FILES as u64 {
        return Err(errno::EINVAL);
    }
    let mut entries: Vec<linux::pollfd> = Vec::with_capacity(count as usize);
    for index in 0..count {
        entries.push(read_user(fds + index * 8)?);
    }
    let ready = poll_entries(&mut entries, timeout_ms)?;
    for (index, entry) in entries.iter().enumerate() {
        write_user(fds + index as u64 * 8, entry)?;
    }
    Ok(ready)
}

/// `poll` on entries in kernel memory: fills each `revents` and returns how many have one.
fn poll_entries(entries: &mut [linux::pollfd], timeout_ms: i64) -> SyscallResult {
    let process = process()?;
    // A prompt printed without a newline shows before the process waits.
    fs::console::flush(&process.console_pending);
    let mut question = Vec::with_capacity(entries.len() * 10);
    let mut asked = Vec::new();
    for (index, entry) in entries.iter_mut().enumerate() {
        entry.revents = 0;
        if entry.fd < 0 {
            continue;
        }
        match process.state.lock().files.get(i64::from(entry.fd)) {
            Ok(handle) => {
                question.extend_from_slice(&handle.id.to_le_bytes());
                question.extend_from_slice(&(entry.events as u16).to_le_bytes());
                asked.push(index);
            }
            Err(_) => entry.revents = events::INVALID as i16,
        }
    }
    drop(process);
    let invalid = entries.iter().filter(|e| e.revents != 0).count() as u64;
    let wait = invalid == 0 && timeout_ms != 0;
    let deadline = (timeout_ms > 0).then(|| crate::time::now_ns() + timeout_ms as u64 * 1_000_000);
    let ready = if asked.is_empty() {
        if wait {
            if let Some(deadline) = deadline {
                super::time::sleep_until(deadline, 0)?;
            }
        }
        0
    } else {
        let answer =
            client::call_until(FileOp::Poll, words(&[asked.len() as u64, u64::from(wait)]), &question, deadline);
        match answer {
            Ok(answer) => {
                for (slot, revents) in asked.iter().zip(answer.bytes.chunks_exact(2)) {
                    entries[*slot].revents = u16::from_le_bytes([revents[0], revents[1]]) as i16;
                }
                answer.value
            }
            Err(errno::ETIMEDOUT) => 0,
            Err(error) => return Err(error),
        }
    };
    Ok(ready + invalid)
}

/// Descriptors a `select` set may name (`FD_SETSIZE`).
const SELECT_SET_SIZE: u64 = 1024;

/// `select`/`pselect6` on `count` descriptors, over `poll`: the three sets (read, write,
/// exceptional; an address of 0 is no set) are read, polled with `timeout_ms`, and written
/// back holding only the ready descriptors; returns how many bits are set. A set naming a
/// descriptor that is not open is `EBADF`, as Linux's `select` says (poll says `POLLNVAL`).
fn select(count: u64, sets: [u64; 3], timeout_ms: i64) -> SyscallResult {
    if count > SELECT_SET_SIZE {
        return Err(errno::EINVAL);
    }
    let words = count.div_ceil(64) as usize;
    let mut wanted = [[0u64; (SELECT_SET_SIZE / 64) as usize]; 3];
    for (set, &address) in wanted.iter_mut().zip(&sets) {
        for (index, word) in set.iter_mut().take(words).enumerate() {
            if address != 0 {
                *word = read_user(address + index as u64 * 8)?;
            }
        }
    }
    let bit = |set: &[u64; 16], fd: usize| set[fd / 64] & (1 << (fd % 64)) != 0;
    const PRIORITY: i16 = 0x2;
    let mut entries = Vec::new();
    for fd in 0..count as usize {
        let events = [events::IN as i16, events::OUT as i16, PRIORITY]
            .iter()
            .zip(&wanted)
            .filter(|(_, set)| bit(set, fd))
            .fold(0, |all, (event, _)| all | event);
        if events != 0 {
            entries.push(linux::pollfd { fd: fd as i32, events, revents: 0 });
        }
    }
    poll_entries(&mut entries, timeout_ms)?;
    if entries.iter().any(|entry| entry.revents & events::INVALID as i16 != 0) {
        return Err(errno::EBADF);
    }
    let mut ready = [[0u64; (SELECT_SET_SIZE / 64) as usize]; 3];
    let mut total = 0;
    for entry in &entries {
        let revents = entry.revents as u16;
        let fired = [
            revents & (events::IN | events::HANG_UP | events::ERROR) != 0,
            revents & (events::OUT | events::ERROR) != 0,
            revents & PRIORITY as u16 != 0,
        ];
        for ((set, asked), fired) in ready.iter_mut().zip(&wanted).zip(fired) {
            let fd = entry.fd as usize;
            if fired && bit(asked, fd) {
                set[fd / 64] |= 1 << (fd % 64);
                total += 1;
            }
        }
    }
    for (set, &address) in ready.iter().zip(&sets) {
        if address != 0 {
            for (index, word) in set.iter().take(words).enumerate() {
                write_user(address + index as u64 * 8, word)?;
            }
        }
    }
    Ok(total)
}

/// `select(count, read, write, except, timeval)`.
pub fn select_call(count: u64, read: u64, write: u64, except: u64, timeout: u64) -> SyscallResult {
    let timeout_ms = if timeout == 0 {
        -1
    } else {
        let value: linux::timeval = read_user(timeout)?;
        if value.tv_sec < 0 || !(0..1_000_000).contains(&value.tv_usec) {
            return Err(errno::EINVAL);
        }
        value.tv_sec.saturating_mul(1000).saturating_add((value.tv_usec + 999) / 1000)
    };
    select(count as i32 as i64 as u64, [read, write, except], timeout_ms)
}

/// `pselect6(count, read, write, except, timespec, sigmask)`; the signal mask is not applied
/// during the wait (as `ppoll`'s).
pub fn pselect6(count: u64, read: u64, write: u64, except: u64, timeout: u64) -> SyscallResult {
    select(count as i32 as i64 as u64, [read, write, except], timespec_ms(timeout)?)
}

/// A `timespec` timeout in milliseconds, rounded up (`-1`: none, for a null pointer).
pub(super) fn timespec_ms(timeout: u64) -> Result<i64, Errno> {
    if timeout == 0 {
        return Ok(-1);
    }
    let spec: linux::timespec = read_user(timeout)?;
    if spec.tv_sec < 0 || !(0..1_000_000_000).contains(&spec.tv_nsec) {
        return Err(errno::EINVAL);
    }
    Ok(spec.tv_sec.saturating_mul(1000).saturating_add((spec.tv_nsec + 999_999) / 1_000_000))
}

pub fn ppoll(fds: u64, count: u64, timeout: u64) -> SyscallResult {
    poll(fds, count, timespec_ms(timeout)?)
}

pub fn getcwd(buffer: u64, size: u64) -> SyscallResult {
    let cwd = process()?.state.lock().cwd.clone();
    let mut path = match cwd {
        None => b"/".to_vec(),
        Some(handle) => ask_path(FileOp::PathOf, &[handle.id], &[], &[])?.bytes,
    };
    path.push(0);
    if (size as usize) < path.len() {
        return Err(errno::ERANGE);
    }
    copy_to_user(buffer, &path).map_err(|_| errno::EFAULT)?;
    Ok(path.len() as u64)
}

pub fn chdir(path: u64) -> SyscallResult {
    let path = path_argument(path)?;
    let handle = open_handle(linux::AT_FDCWD as i64, &path, flags::DIRECTORY, 0)?;
    let previous = process()?.state.lock().cwd.replace(Arc::new(handle));
    drop(previous);
    Ok(0)
}

/// `chroot`: absolute paths start at `path`'s directory from now on, and `..` stops there;
/// the working directory stays where it is, as on Linux. Every process is root today, so
/// `CAP_SYS_CHROOT` is not asked for.
pub fn chroot(path: u64) -> SyscallResult {
    // Root's alone (Linux: `CAP_SYS_CHROOT`, asked after the lookup).
    let path = path_argument(path)?;
    if !crate::proc::credentials::current_is_privileged() {
        stat_at(linux::AT_FDCWD as i64, &path, 0)?;
        return Err(errno::EPERM);
    }
    let handle = open_handle(linux::AT_FDCWD as i64, &path, flags::DIRECTORY, 0)?;
    let previous = process()?.state.lock().root_directory.replace(Arc::new(handle));
    drop(previous);
    Ok(0)
}

pub fn fchdir(fd: i64) -> SyscallResult {
    let handle = handle_of(fd)?;
    if handle.kind != HandleKind::Directory {
        return Err(errno::ENOTDIR);
    }
    let previous = process()?.state.lock().cwd.replace(handle);
    drop(previous);
    Ok(0)
}

/// `flock(fd, operation)`: the file service keeps the lock with the open file (see
/// `fs::service::locks`); a wait for a conflicting lock ends with `EINTR` on a signal.
pub fn flock(fd: i64, operation: u64) -> SyscallResult {
    let handle = handle_of(fd)?;
    ask(FileOp::Lock, &[handle.id, operation], &[], &[])?;
    Ok(0)
}

/// `close_range(first, last, flags)`: `CLOSE_RANGE_CLOEXEC` marks instead of closing;
/// `CLOSE_RANGE_UNSHARE` asks for a table of the caller's own, which a process with one
/// thread has already (its threads share one table, and Reef cannot give one its own: with
/// several, `EINVAL`, rather than closing the other threads' descriptors).
pub fn close_range(first: u64, last: u64, flags: u64) -> SyscallResult {
    const UNSHARE: u64 = 1 << 1;
    const CLOSE_ON_EXEC: u64 = 1 << 2;
    let (first, last) = (first as u32, last as u32);
    if flags & !(UNSHARE | CLOSE_ON_EXEC) != 0 || first > last {
        return Err(errno::EINVAL);
    }
    let process = process()?;
    let mut state = process.state.lock();
    if flags & UNSHARE != 0 && state.threads.len() > 1 {
        return Err(errno::EINVAL);
    }
    state.files.close_range(first as usize, last as usize, flags & CLOSE_ON_EXEC != 0);
    Ok(0)
}

pub fn umask(mask: u64) -> SyscallResult {
    let process = process()?;
    let mut state = process.state.lock();
    let previous = state.umask;
    state.umask = (mask & 0o777) as u32;
    Ok(u64::from(previous))
}

/// Where a file mapping's bytes go: (offset in the mapping, bytes).
pub type MappingSink<'a> = dyn FnMut(u64, &[u8]) -> Result<(), Errno> + 'a;

/// Reads `length` bytes of `fd` from `offset` (for a private file mapping).
/// The version of the file open on `fd` whose pages a mapping may share with other
/// processes (`fs::mapped`), or `None` when it must have its own copy: a file of `/proc` or
/// `/sys`, or anything but a regular file.
pub fn mapping_version(fd: i64) -> Result<Option<fs::mapped::FileVersion>, Errno> {
    let handle = handle_of(fd)?;
    if handle.kind != HandleKind::Regular {
        return Ok(None);
    }
    let metadata = metadata_of(ask(FileOp::Stat, &[handle.id], &[], &[])?)?;
    Ok(fs::mapped::FileVersion::of(&metadata))
}

pub fn read_for_mapping(fd: i64, offset: u64, length: u64, out: &mut MappingSink<'_>) -> Result<(), Errno> {
    let handle = handle_of(fd)?;
    if handle.kind != HandleKind::Regular {
        return Err(errno::ENODEV);
    }
    let mut done = 0u64;
    while done < length {
        let chunk = (length - done).min(MAX_TRANSFER as u64);
        let answer = ask(FileOp::Read, &[handle.id, chunk, offset + done], &[], &[])?;
        if answer.bytes.is_empty() {
            break;
        }
        out(done, &answer.bytes)?;
        done += answer.bytes.len() as u64;
    }
    Ok(())
}
