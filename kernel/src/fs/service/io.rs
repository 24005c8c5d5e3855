//! Reading, writing and moving within open files: regular files, `/proc` and `/sys` text,
//! devices, directories' entries, and the terminal's requests.

use super::open_files::{Object, OpenFile};
use super::request::flags;
use super::{Errno, Outcome, Reply, Service};
use abi::file::MAX_TRANSFER;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use vfs::Device;

impl Service {
    /// Reads at most `length` bytes at `offset` (`None`: the open file's position, which
    /// moves).
    pub(super) fn read(
        &mut self,
        handle: u64,
        length: usize,
        offset: Option<u64>,
        dont_wait: bool,
    ) -> Result<Outcome, Errno> {
        let length = length.min(MAX_TRANSFER);
        let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
        if !file.readable() {
            return Err(errno::EBADF);
        }
        let nonblocking = file.flags & flags::NONBLOCK != 0 || dont_wait;
        let position = offset.unwrap_or(file.offset);
        let data = match &mut file.object {
            Object::Regular(node) => {
                let node = *node;
                let mut data = alloc::vec![0u8; length];
                let count = self.vfs.read(node, position, &mut data)?;
                data.truncate(count);
                data
            }
            Object::Directory { .. } => return Err(errno::EISDIR),
            Object::Proc { text, .. } | Object::Sys { text, .. } => {
                let start = (position as usize).min(text.len());
                text[start..(start + length).min(text.len())].to_vec()
            }
            Object::Device { device, .. } => match device {
                Device::Null => Vec::new(),
                Device::Zero => alloc::vec![0u8; length],
                Device::Random => {
                    let mut data = alloc::vec![0u8; length];
                    crate::random::fill(&mut data);
                    data
                }
                Device::Console | Device::Tty => match self.terminal.read(length) {
                    Some(data) => {
                        self.changed = true;
                        self.terminal_generation += 1;
                        data
                    }
                    None if nonblocking => return Err(errno::EAGAIN),
                    None => return Ok(Outcome::Park(0)),
                },
            },
            Object::PipeReader(pipe) | Object::PipeBoth(pipe) => {
                let pipe = *pipe;
                match self.read_pipe(pipe, length, nonblocking)? {
                    Some(data) => data,
                    None => return Ok(Outcome::Park(0)),
                }
            }
            Object::PipeWriter(_) => return Err(errno::EBADF),
            Object::Epoll(_) => return Err(errno::EINVAL),
            Object::Socket(id) => {
                let id = *id;
                let read = if self.is_inet_datagram(id) {
                    self.udp_receive(id, length, nonblocking)?.map(|(_, data)| data)
                } else if !self.socket_is_stream(id) {
                    self.socket_read_message(id, length, nonblocking)?
                } else if self.socket_shut(id).0 {
                    // Its reading shut down: end of file (its end of the pipe is closed).
                    Some(Vec::new())
                } else {
                    let (receive, _) = self.socket_pipes(id)?;
                    self.read_pipe(receive, length, nonblocking)?
                };
                match read {
                    Some(data) => data,
                    None => return Ok(Outcome::Park(0)),
                }
            }
        };
        let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
        if offset.is_none() && matches!(file.object, Object::Regular(_) | Object::Proc { .. } | Object::Sys { .. }) {
            file.offset = position + data.len() as u64;
        }
        Ok(Outcome::Done(Reply { result: data.len() as i64, words: [0; 2], bytes: data, request_id: 0 }))
    }

    /// Writes `data` at `offset` (`None`: the open file's position, or its end under
    /// `O_APPEND`); `done` bytes of it are written already (a parked pipe write).
    pub(super) fn write(
        &mut self,
        handle: u64,
        offset: Option<u64>,
        data: &[u8],
        done: u64,
        dont_wait: bool,
    ) -> Result<Outcome, Errno> {
        let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
        if !file.writable() && !matches!(file.object, Object::Device { .. }) {
            return Err(errno::EBADF);
        }
        let nonblocking = file.flags & flags::NONBLOCK != 0 || dont_wait;
        match &file.object {
            Object::Regular(node) => {
                let node = *node;
                let position = if let Some(offset) = offset {
                    offset
                } else if file.flags & flags::APPEND != 0 {
                    self.vfs.stat(node)?.size
                } else {
                    file.offset
                };
                let count = self.vfs.write(node, position, data)?;
                let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
                if offset.is_none() {
                    file.offset = position + count as u64;
                }
                Ok(Outcome::Done(Reply::value(0, count as u64)))
            }
            Object::Directory { .. } => Err(errno::EISDIR),
            Object::Proc { .. } | Object::PipeReader(_) => Err(errno::EBADF),
            Object::Epoll(_) => Err(errno::EINVAL),
            Object::Socket(id) => {
                let id = *id;
                if self.is_inet_datagram(id) {
                    return self.udp_send(id, None, data);
                }
                let (_, send) = self.socket_pipes(id)?;
                if self.socket_shut(id).1 {
                    return Err(errno::EPIPE);
                }
                if !self.socket_is_stream(id) {
                    return self.socket_write_message(id, data, nonblocking);
                }
                let outcome = self.write_pipe(send, data, done, nonblocking)?;
                if let Outcome::Done(reply) = &outcome {
                    if reply.result > 0 && self.is_loopback_tcp(id) {
                        self.count_loopback(reply.result as usize);
                    }
                }
                Ok(outcome)
            }
            // Decoded now, carried out by `submit` once the lock is let go. An empty write
            // asks nothing and takes nothing.
            Object::Sys { node, .. } => match self.vfs.decode_sys_write(*node, data)? {
                // Stopping or starting a core is root's, whoever opened the file (a
                // descriptor a root process opened and handed on, or kept across `setuid`,
                // switches no core for its new holder).
                Some(request) if !self.caller_is_privileged() => {
                    log::warn!(
                        "pid {} (effective user {}) may not {request:?}: only root switches cores (EPERM)",
                        self.caller.pid,
                        self.caller.effective_uid
                    );
                    Err(errno::EPERM)
                }
                Some(request) => Ok(Outcome::Sys { request, length: data.len() as u64 }),
                None => Ok(Outcome::Done(Reply::value(0, 0))),
            },
            Object::Device { device, .. } => match device {
                Device::Console | Device::Tty => {
                    crate::fs::console::write_here(data);
                    Ok(Outcome::Done(Reply::value(0, data.len() as u64)))
                }
                _ => Ok(Outcome::Done(Reply::value(0, data.len() as u64))),
            },
            Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => {
                let pipe = *pipe;
                self.write_pipe(pipe, data, done, nonblocking)
            }
        }
    }

    /// `lseek`: `whence` 0 (from the start), 1 (from the position) or 2 (from the end); 3
    /// (`SEEK_DATA`) and 4 (`SEEK_HOLE`) as Linux's generic answer for a file system that keeps
    /// no holes: all of a file is data, with one hole at its end (`ENXIO` at or past the end).
    pub(super) fn seek(&mut self, handle: u64, offset: i64, whence: u64) -> Result<Outcome, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        let end = match &file.object {
            Object::Regular(node) => self.vfs.stat(*node)?.size as i64,
            Object::Proc { text, .. } | Object::Sys { text, .. } => text.len() as i64,
            Object::Directory { .. } => {
                if offset != 0 || whence != 0 {
                    return Err(errno::EINVAL);
                }
                if let Some(OpenFile { object: Object::Directory { cursor, .. }, .. }) = self.open.get_mut(&handle) {
                    *cursor = 0;
                }
                return Ok(Outcome::Done(Reply::value(0, 0)));
            }
            Object::Device { device: Device::Null | Device::Zero | Device::Random, .. } => {
                return Ok(Outcome::Done(Reply::value(0, 0)))
            }
            _ => return Err(errno::ESPIPE),
        };
        const SEEK_DATA: u64 = 3;
        const SEEK_HOLE: u64 = 4;
        let position = match whence {
            SEEK_DATA | SEEK_HOLE if offset < 0 || offset >= end => return Err(errno::ENXIO),
            SEEK_DATA => offset,
            SEEK_HOLE => end,
            _ => {
                let base = match whence {
                    0 => 0,
                    1 => file.offset as i64,
                    2 => end,
                    _ => return Err(errno::EINVAL),
                };
                base.checked_add(offset).filter(|&p| p >= 0).ok_or(errno::EINVAL)?
            }
        };
        if let Some(file) = self.open.get_mut(&handle) {
            file.offset = position as u64;
        }
        Ok(Outcome::Done(Reply::value(0, position as u64)))
    }

    /// `ftruncate`: only a regular file open for writing.
    pub(super) fn truncate(&mut self, handle: u64, size: u64) -> Result<Outcome, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        let Object::Regular(node) = file.object else { return Err(errno::EINVAL) };
        if !file.writable() {
            return Err(errno::EINVAL);
        }
        self.vfs.truncate(node, size)?;
        Ok(Outcome::Done(Reply::value(0, 0)))
    }

    /// `getdents64`: as many `linux_dirent64` records as fit `capacity` bytes, from where the
    /// last call stopped.
    pub(super) fn read_directory(&mut self, handle: u64, capacity: usize) -> Result<Outcome, Errno> {
        let capacity = capacity.min(MAX_TRANSFER);
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        let Object::Directory { node, mut cursor } = file.object else { return Err(errno::ENOTDIR) };
        let mut out: Vec<u8> = Vec::new();
        while let Some((entry, next)) = self.vfs.read_directory(node, cursor)? {
            let name = entry.name.as_slice();
            let record = (19 + name.len() + 1).next_multiple_of(8);
            if out.len() + record > capacity {
                if out.is_empty() {
                    return Err(errno::EINVAL);
                }
                break;
            }
            out.extend_from_slice(&entry.inode.to_le_bytes());
            out.extend_from_slice(&next.to_le_bytes());
            out.extend_from_slice(&(record as u16).to_le_bytes());
            out.push(entry.kind_code);
            out.extend_from_slice(name);
            out.resize(out.len() + record - 19 - name.len(), 0);
            cursor = next;
        }
        if let Some(OpenFile { object: Object::Directory { cursor: saved, .. }, .. }) = self.open.get_mut(&handle) {
            *saved = cursor;
        }
        Ok(Outcome::Done(Reply { result: out.len() as i64, words: [0; 2], bytes: out, request_id: 0 }))
    }

    /// `ioctl`: the terminal's requests on the console, and `FIONREAD` on a pipe.
    pub(super) fn control(&mut self, handle: u64, request: u32, argument: &[u8]) -> Result<Outcome, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        const FIONREAD: u32 = 0x541b;
        match &file.object {
            Object::Device { device: Device::Console | Device::Tty, .. } => {
                let out = self.terminal.control(request, argument)?;
                self.changed = true;
                Ok(Outcome::Done(Reply { bytes: out, ..Reply::value(0, 0) }))
            }
            Object::PipeReader(pipe) | Object::PipeBoth(pipe) if request == FIONREAD => {
                let length = self.pipes.get(pipe).map_or(0, |p| p.buffer.len() as u32);
                Ok(Outcome::Done(Reply { bytes: length.to_le_bytes().to_vec(), ..Reply::value(0, 0) }))
            }
            _ => Err(errno::ENOTTY),
        }
    }

    /// `F_GETFL`: the status flags, and `O_DIRECTORY` for a directory.
    pub(super) fn get_flags(&self, handle: u64) -> Result<Outcome, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        let directory = if matches!(file.object, Object::Directory { .. }) { flags::DIRECTORY } else { 0 };
        Ok(Outcome::Done(Reply::value(0, file.flags | directory)))
    }

    /// `F_SETFL`: only `O_APPEND` and `O_NONBLOCK` change.
    pub(super) fn set_flags(&mut self, handle: u64, new_flags: u64) -> Result<Outcome, Errno> {
        let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
        file.flags = (file.flags & !flags::CHANGEABLE) | (new_flags & flags::CHANGEABLE);
        self.changed = true;
        Ok(Outcome::Done(Reply::value(0, 0)))
    }
}
