//! `poll`: what each open file is ready for now, and a poll that waits until one is.

use super::open_files::Object;
use super::request::{events, PollEntry};
use super::{Errno, Outcome, Reply, Service};
use alloc::vec::Vec;
use vfs::Device;

impl Service {
    /// The `poll` events `handle` has now.
    pub(super) fn readiness(&self, handle: u64) -> u16 {
        let Some(file) = self.open.get(&handle) else { return events::INVALID };
        match &file.object {
            Object::Device { device: Device::Console | Device::Tty, .. } => {
                events::OUT | if self.terminal.readable() { events::IN } else { 0 }
            }
            Object::PipeReader(pipe) => match self.pipes.get(pipe) {
                Some(pipe) => {
                    (if pipe.buffer.is_empty() { 0 } else { events::IN })
                        | if pipe.writers == 0 { events::HANG_UP } else { 0 }
                }
                None => events::INVALID,
            },
            Object::PipeBoth(pipe) => match self.pipes.get(pipe) {
                Some(pipe) => {
                    (if pipe.buffer.is_empty() { 0 } else { events::IN })
                        | if pipe.buffer.space() > 0 { events::OUT } else { 0 }
                }
                None => events::INVALID,
            },
            Object::PipeWriter(pipe) => match self.pipes.get(pipe) {
                Some(pipe) if pipe.readers == 0 => events::ERROR,
                Some(pipe) => {
                    if pipe.buffer.space() > 0 {
                        events::OUT
                    } else {
                        0
                    }
                }
                None => events::INVALID,
            },
            Object::Socket(id) => self.socket_readiness(*id),
            Object::Epoll(id) => {
                if self.epoll_has_ready(*id, 0) {
                    events::IN
                } else {
                    0
                }
            }
            _ => events::IN | events::OUT,
        }
    }

    /// The events of each entry (`revents`, two bytes each) and how many have some; parked
    /// when none has and the caller `wait`s.
    pub(super) fn poll(&self, entries: &[PollEntry], wait: bool) -> Result<Outcome, Errno> {
        let mut ready = 0;
        let mut revents = Vec::with_capacity(entries.len() * 2);
        for entry in entries {
            let got = self.readiness(entry.handle) & (entry.events | events::ERROR | events::HANG_UP | events::INVALID);
            if got != 0 {
                ready += 1;
            }
            revents.extend_from_slice(&got.to_le_bytes());
        }
        if ready == 0 && wait {
            return Ok(Outcome::Park(0));
        }
        Ok(Outcome::Done(Reply { result: ready, words: [0; 2], bytes: revents, request_id: 0 }))
    }
}
