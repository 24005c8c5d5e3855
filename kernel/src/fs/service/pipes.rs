//! Pipes and FIFOs: a buffer of pages with its open ends, `pipe()`, Linux's FIFO open rules,
//! reading and writing an end, and the last close.

use super::open_files::{opened, Object, OpenFile};
use super::request::flags;
use super::{Errno, Outcome, Reply, Service};
use abi::file::{HandleKind, Metadata};
use alloc::vec::Vec;
use linux_raw_sys::errno;
use vfs::{NodeId, PipeBuffer};

pub(super) struct Pipe {
    pub(super) buffer: PipeBuffer,
    pub(super) readers: u32,
    pub(super) writers: u32,
    /// The FIFO this pipe serves while any end of it is open; `None` for `pipe()`'s.
    pub(super) node: Option<NodeId>,
    /// Opens of each end so far: an `open` that waits for the other end waits for its count
    /// to change, so a writer that opened and closed meanwhile still lets a reader's open
    /// finish, as Linux's `r_counter` and `w_counter` do.
    reader_opens: u64,
    writer_opens: u64,
    /// Moves whenever what the pipe's ends are ready for may have changed (bytes in or out,
    /// an end opened or closed): what an edge-triggered `epoll` looks at.
    pub(super) generation: u64,
    /// The network stack is at one end (a connection to another machine): a process's read,
    /// write or close of it gives the stack work.
    pub(super) linked: bool,
}

impl Pipe {
    pub(super) fn new(node: Option<NodeId>) -> Self {
        Self {
            buffer: PipeBuffer::new(),
            readers: 0,
            writers: 0,
            node,
            reader_opens: 0,
            writer_opens: 0,
            generation: 0,
            linked: false,
        }
    }

    /// One more open end: for reading, writing or both.
    pub(super) fn add_ends(&mut self, reading: bool, writing: bool) {
        self.generation += 1;
        if reading {
            self.readers += 1;
            self.reader_opens += 1;
        }
        if writing {
            self.writers += 1;
            self.writer_opens += 1;
        }
    }

    /// The open file object of an end of pipe `pipe`.
    pub(super) fn end(pipe: u64, reading: bool, writing: bool) -> Object {
        match (reading, writing) {
            (true, true) => Object::PipeBoth(pipe),
            (true, false) => Object::PipeReader(pipe),
            _ => Object::PipeWriter(pipe),
        }
    }
}

impl Service {
    /// `pipe()`: a new pipe, its read end and its write end (`flags` may hold `O_NONBLOCK`).
    pub(super) fn make_pipe(&mut self, pipe_flags: u64) -> Result<Outcome, Errno> {
        let pipe = self.next_pipe;
        self.next_pipe += 1;
        let mut state = Pipe::new(None);
        state.add_ends(true, true);
        self.pipes.insert(pipe, state);
        let status = pipe_flags & flags::NONBLOCK;
        // Linux's name for a pipe: its inode number, which `fstat` gives too.
        let name = alloc::format!("pipe:[{pipe}]").into_bytes();
        let reader = self.new_handle(OpenFile {
            object: Object::PipeReader(pipe),
            flags: status,
            offset: 0,
            references: 1,
            name: name.clone(),
        });
        let writer = self.new_handle(OpenFile {
            object: Object::PipeWriter(pipe),
            flags: status | flags::WRITE_ONLY,
            offset: 0,
            references: 1,
            name,
        });
        Ok(Outcome::Done(Reply { words: [reader, writer], ..Reply::value(0, 0) }))
    }

    /// Opens the FIFO `node` as an end of the pipe the service keeps for it (made now if no
    /// end is open), with Linux's rules [fifo(7), Linux `fifo_open`]: for reading, or for
    /// writing, the open waits (parked, the handle its progress) until the other end is
    /// opened, unless `O_NONBLOCK`; a reader with `O_NONBLOCK` opens at once, a writer with
    /// `O_NONBLOCK` and no reader is `ENXIO`; `O_RDWR` opens at once as both ends.
    pub(super) fn open_fifo(&mut self, node: NodeId, status: u64, name: Vec<u8>) -> Result<Outcome, Errno> {
        let (reading, writing) = match status & flags::ACCESS_MODE {
            flags::WRITE_ONLY => (false, true),
            flags::READ_WRITE => (true, true),
            _ => (true, false),
        };
        let nonblocking = status & flags::NONBLOCK != 0;
        let existing = self.fifos.get(&node).copied();
        let readers = existing.and_then(|pipe| self.pipes.get(&pipe)).map_or(0, |pipe| pipe.readers);
        if writing && !reading && nonblocking && readers == 0 {
            return Err(errno::ENXIO);
        }
        self.vfs.open_node(node)?;
        let pipe = existing.unwrap_or_else(|| {
            let pipe = self.next_pipe;
            self.next_pipe += 1;
            self.pipes.insert(pipe, Pipe::new(Some(node)));
            self.fifos.insert(node, pipe);
            pipe
        });
        let Some(state) = self.pipes.get_mut(&pipe) else { return Err(errno::EIO) };
        state.add_ends(reading, writing);
        let waits_for = match (reading, writing) {
            _ if nonblocking => None,
            (true, false) => (state.writers == 0).then_some(state.writer_opens),
            (false, true) => (state.readers == 0).then_some(state.reader_opens),
            _ => None,
        };
        // An end opened: opens of the other end waiting for one go on.
        self.changed = true;
        let object = Pipe::end(pipe, reading, writing);
        let handle = self.new_handle(OpenFile { object, flags: status, offset: 0, references: 1, name });
        if let Some(seen) = waits_for {
            self.fifo_waits.insert(handle, seen);
            return Ok(Outcome::Park(handle));
        }
        Ok(opened(handle, HandleKind::Pipe))
    }

    /// A FIFO open parked until the other end opens: done once that end's open count moved.
    pub(super) fn fifo_open_waiting(&mut self, handle: u64) -> Result<Outcome, Errno> {
        let seen = *self.fifo_waits.get(&handle).ok_or(errno::EBADF)?;
        let (pipe, reading) = match self.open.get(&handle).map(|file| &file.object) {
            Some(Object::PipeReader(pipe)) => (*pipe, true),
            Some(Object::PipeWriter(pipe)) => (*pipe, false),
            _ => return Err(errno::EBADF),
        };
        let state = self.pipes.get(&pipe).ok_or(errno::EBADF)?;
        let opens = if reading { state.writer_opens } else { state.reader_opens };
        if opens == seen {
            return Ok(Outcome::Park(handle));
        }
        self.fifo_waits.remove(&handle);
        Ok(opened(handle, HandleKind::Pipe))
    }

    /// The open file `handle`, an end of `pipe` (`reader`, `writer` or both), was released.
    pub(super) fn close_pipe_end(&mut self, handle: u64, pipe: u64, reader: bool, writer: bool) {
        self.fifo_waits.remove(&handle);
        if let Some(state) = self.pipes.get_mut(&pipe) {
            state.generation += 1;
            self.network_due |= state.linked;
            state.readers -= u32::from(reader);
            state.writers -= u32::from(writer);
            let node = state.node;
            // The last end of a FIFO drops its bytes, as Linux's `free_pipe_info`.
            if state.readers == 0 && state.writers == 0 {
                if let Some(mut state) = self.pipes.remove(&pipe) {
                    state.buffer.release(self.vfs.page_store());
                }
                if let Some(node) = node {
                    self.fifos.remove(&node);
                }
            }
            if let Some(node) = node {
                let _ = self.vfs.close_node(node);
            }
        }
        self.changed = true;
    }

    /// `fstat` of a pipe's end: its FIFO's, or a `pipe()`'s own.
    pub(super) fn stat_pipe(&self, pipe: u64) -> Result<Metadata, Errno> {
        if let Some(node) = self.pipes.get(&pipe).and_then(|p| p.node) {
            return self.metadata(node);
        }
        Ok(Metadata {
            device: 12,
            inode: pipe,
            mode: initramfs::mode::FIFO | 0o600,
            links: 1,
            size: self.pipes.get(&pipe).map_or(0, |p| p.buffer.len() as u64),
            ..Metadata::default()
        })
    }

    /// Reads at most `length` bytes of `pipe`: `None` when the caller must wait (parked);
    /// end of file once no writer is left.
    pub(super) fn read_pipe(&mut self, pipe: u64, length: usize, nonblocking: bool) -> Result<Option<Vec<u8>>, Errno> {
        let pipe = self.pipes.get_mut(&pipe).ok_or(errno::EBADF)?;
        if pipe.buffer.is_empty() {
            if pipe.writers == 0 {
                return Ok(Some(Vec::new()));
            }
            if nonblocking {
                return Err(errno::EAGAIN);
            }
            return Ok(None);
        }
        let mut data = alloc::vec![0u8; length.min(pipe.buffer.len())];
        let count = pipe.buffer.read(self.vfs.page_store(), &mut data);
        data.truncate(count);
        pipe.generation += 1;
        self.changed = true;
        self.network_due |= pipe.linked;
        Ok(Some(data))
    }

    /// Writes what is left of `data` past `done` into `pipe`: done when all is in (or, not
    /// waiting, some), else parked with the progress.
    pub(super) fn write_pipe(
        &mut self,
        pipe: u64,
        data: &[u8],
        done: u64,
        nonblocking: bool,
    ) -> Result<Outcome, Errno> {
        let pipe = self.pipes.get_mut(&pipe).ok_or(errno::EBADF)?;
        if pipe.readers == 0 {
            return if done > 0 { Ok(Outcome::Done(Reply::value(0, done))) } else { Err(errno::EPIPE) };
        }
        let rest = &data[done as usize..];
        let written = pipe.buffer.write(self.vfs.page_store(), rest) as u64;
        if written > 0 {
            pipe.generation += 1;
            self.changed = true;
            self.network_due |= pipe.linked;
        }
        let done = done + written;
        if done == data.len() as u64 {
            Ok(Outcome::Done(Reply::value(0, done)))
        } else if nonblocking {
            if done == 0 {
                Err(errno::EAGAIN)
            } else {
                Ok(Outcome::Done(Reply::value(0, done)))
            }
        } else {
            Ok(Outcome::Park(done))
        }
    }
}
