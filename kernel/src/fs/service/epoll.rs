//! `epoll`: an interest list held at the service as an open file of its own, so that it is
//! shared by `dup` and `fork` and reached from every instance as any file is, and so that a
//! wait parks here beside the pipes, the console and the sockets it waits for.
//!
//! Level-triggered interest reports an open file whenever it is ready. Edge-triggered interest
//! (`EPOLLET`) reports it when it becomes ready or when its object changed since the last
//! report (a pipe's [`Pipe::generation`], the terminal's input), never twice for one state; a
//! program that reads until `EAGAIN`, as edge-triggered programs must, misses no event.
//! `EPOLLONESHOT` disarms an interest once it is reported, until `EPOLL_CTL_MOD`. An open
//! file's interest goes when its last reference does (Linux: when its last descriptor
//! closes). Regular files, directories and `/proc` files are refused (`EPERM`), as by Linux.
//!
//! [`Pipe::generation`]: super::pipes::Pipe

use super::open_files::{opened, Object, OpenFile};
use super::{Errno, Outcome, Reply, Service};
use abi::file::HandleKind;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use vfs::Device;

/// `epoll_event` bits (the low ones are `poll`'s).
pub(super) mod bits {
    pub const ERROR: u32 = 0x8;
    pub const HANG_UP: u32 = 0x10;
    pub const EXCLUSIVE: u32 = 1 << 28;
    pub const ONE_SHOT: u32 = 1 << 30;
    pub const EDGE: u32 = 1 << 31;
}

/// `epoll_ctl` operations.
const ADD: u64 = 1;
const DELETE: u64 = 2;
const MODIFY: u64 = 3;

/// How deep an `epoll` inside an `epoll` is looked into for its readiness.
const NESTING: u32 = 4;

/// One open file an `epoll` instance watches, under one descriptor.
struct Interest {
    events: u32,
    data: u64,
    /// Reported under `EPOLLONESHOT`: silent until modified.
    disarmed: bool,
    /// Under `EPOLLET`: the readiness and the object's generation last reported.
    reported: u32,
    generation: u64,
}

/// An `epoll` instance: (target handle, descriptor) → interest, as Linux keys it by the
/// open file and the descriptor.
#[derive(Default)]
pub(super) struct Epoll {
    interest: BTreeMap<(u64, u32), Interest>,
}

impl Service {
    /// `epoll_create1`: a new instance, an open file.
    pub(super) fn epoll_create(&mut self) -> Result<Outcome, Errno> {
        let id = self.next_epoll;
        self.next_epoll += 1;
        self.epolls.insert(id, Epoll::default());
        let handle = self.new_handle(OpenFile {
            object: Object::Epoll(id),
            flags: super::request::flags::READ_WRITE,
            offset: 0,
            references: 1,
            name: b"anon_inode:[eventpoll]".to_vec(),
        });
        Ok(opened(handle, HandleKind::Epoll))
    }

    fn epoll_of(&self, handle: u64) -> Result<u64, Errno> {
        match self.open.get(&handle).map(|file| &file.object) {
            Some(Object::Epoll(id)) => Ok(*id),
            Some(_) => Err(errno::EINVAL),
            None => Err(errno::EBADF),
        }
    }

    /// `epoll_ctl(epoll, operation, descriptor → target, {events, data})`.
    pub(super) fn epoll_control(
        &mut self,
        epoll: u64,
        operation: u64,
        (target, descriptor): (u64, u32),
        events: u32,
        data: u64,
    ) -> Result<Outcome, Errno> {
        let file = self.open.get(&target).ok_or(errno::EBADF)?;
        if !pollable(&file.object) {
            return Err(errno::EPERM);
        }
        if target == epoll {
            return Err(errno::EINVAL);
        }
        let id = self.epoll_of(epoll)?;
        let generation = self.generation_of(target);
        let list = &mut self.epolls.get_mut(&id).ok_or(errno::EBADF)?.interest;
        let key = (target, descriptor);
        match operation {
            ADD if list.contains_key(&key) => Err(errno::EEXIST),
            ADD => {
                list.insert(key, Interest { events, data, disarmed: false, reported: 0, generation });
                self.changed = true;
                Ok(Outcome::Done(Reply::value(0, 0)))
            }
            DELETE => list.remove(&key).map(|_| Outcome::Done(Reply::value(0, 0))).ok_or(errno::ENOENT),
            MODIFY => {
                let interest = list.get_mut(&key).ok_or(errno::ENOENT)?;
                // Linux: `EPOLLEXCLUSIVE` is only for an add, and an exclusive interest stays so.
                if events & bits::EXCLUSIVE != 0 || interest.events & bits::EXCLUSIVE != 0 {
                    return Err(errno::EINVAL);
                }
                *interest = Interest { events, data, disarmed: false, reported: 0, generation };
                self.changed = true;
                Ok(Outcome::Done(Reply::value(0, 0)))
            }
            _ => Err(errno::EINVAL),
        }
    }

    /// `epoll_wait`: at most `most` ready interests as `epoll_event`s; parked when none is
    /// and the caller waits.
    pub(super) fn epoll_wait(&mut self, epoll: u64, most: usize, wait: bool) -> Result<Outcome, Errno> {
        let id = self.epoll_of(epoll)?;
        let keys: Vec<(u64, u32)> =
            self.epolls.get(&id).map(|e| e.interest.keys().copied().collect()).unwrap_or_default();
        let mut out = Vec::new();
        let mut count = 0;
        for key in keys {
            if count == most {
                break;
            }
            let ready = self.epoll_readiness(key.0, 0);
            let generation = self.generation_of(key.0);
            let Some(interest) = self.epolls.get_mut(&id).and_then(|e| e.interest.get_mut(&key)) else { continue };
            let got = ready & (interest.events | bits::ERROR | bits::HANG_UP);
            if interest.disarmed || got == 0 {
                // Under `EPOLLET`, a state no longer ready is one a later one is an edge from.
                interest.reported &= ready;
                continue;
            }
            if interest.events & bits::EDGE != 0 {
                if got & !interest.reported == 0 && generation == interest.generation {
                    continue;
                }
                interest.reported = got;
                interest.generation = generation;
            }
            if interest.events & bits::ONE_SHOT != 0 {
                interest.disarmed = true;
            }
            out.extend_from_slice(&got.to_le_bytes());
            out.extend_from_slice(&interest.data.to_le_bytes());
            count += 1;
        }
        if count == 0 && wait {
            return Ok(Outcome::Park(0));
        }
        Ok(Outcome::Done(Reply { result: count as i64, words: [0; 2], bytes: out, request_id: 0 }))
    }

    /// What `handle` is ready for, in `epoll` bits; an `epoll` is readable when one of its
    /// armed interests is ready (looked into `NESTING` deep).
    fn epoll_readiness(&self, handle: u64, depth: u32) -> u32 {
        match self.open.get(&handle).map(|file| &file.object) {
            Some(Object::Epoll(id)) => u32::from(self.epoll_has_ready(*id, depth)),
            Some(_) => u32::from(self.readiness(handle)),
            None => 0,
        }
    }

    /// Whether one of epoll `id`'s armed interests is ready now (without reporting it).
    pub(super) fn epoll_has_ready(&self, id: u64, depth: u32) -> bool {
        if depth >= NESTING {
            return false;
        }
        let Some(epoll) = self.epolls.get(&id) else { return false };
        epoll.interest.iter().any(|(&(target, _), interest)| {
            let got = self.epoll_readiness(target, depth + 1) & (interest.events | bits::ERROR | bits::HANG_UP);
            !interest.disarmed
                && got != 0
                && (interest.events & bits::EDGE == 0
                    || got & !interest.reported != 0
                    || self.generation_of(target) != interest.generation)
        })
    }

    /// A count that moves whenever what `handle`'s object is ready for may have changed: a
    /// pipe's, the terminal's input; 0 for what never changes.
    fn generation_of(&self, handle: u64) -> u64 {
        match self.open.get(&handle).map(|file| &file.object) {
            Some(Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe)) => {
                self.pipes.get(pipe).map_or(0, |pipe| pipe.generation)
            }
            Some(Object::Device { device: Device::Console | Device::Tty, .. }) => self.terminal_generation,
            Some(Object::Socket(id)) => self.socket_generation(*id),
            _ => 0,
        }
    }

    /// The open file `handle` is gone: no instance watches it any more; an `epoll` that was
    /// it goes too.
    pub(super) fn forget_in_epolls(&mut self, handle: u64, object: &Object) {
        if let Object::Epoll(id) = object {
            self.epolls.remove(id);
        }
        for epoll in self.epolls.values_mut() {
            epoll.interest.retain(|&(target, _), _| target != handle);
        }
    }
}

/// Whether `epoll` may watch an open file of `object` (Linux: one whose file has `poll`).
fn pollable(object: &Object) -> bool {
    match object {
        Object::Regular(_) | Object::Directory { .. } | Object::Proc { .. } | Object::Sys { .. } => false,
        Object::Device { device, .. } => !matches!(device, Device::Null | Device::Zero),
        _ => true,
    }
}
