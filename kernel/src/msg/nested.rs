//! Sends made by handlers that run inside one of this core's own large sends.
//!
//! A large send to a full queue holds its reservation (the queue's sender record for this
//! core) while it waits for room, and handles this core's messages meanwhile
//! ([`super::send_large_draining`]), so two cores sending to each other never wait on each
//! other forever. A handler run in that wait that sends to the *same* target cannot take a
//! ticket: the record is held by the send it interrupted, whose tickets come first and cannot
//! be published until it returns (`ChannelError::EndpointTaken`). Such a send used to fail, and
//! an ICC's answer or an AC's event was lost with it.
//!
//! Now it waits here, in order, and goes out as soon as the interrupted send is done: the
//! send that held the reservation sends what was deferred behind it before it returns. A
//! handler that sends much (the message stress) is not run there at all: its ICC waits until
//! no reservation is held (`icc::register_outside_sends`).

use super::{Kind, SendError};
use ::core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use channel::{ChannelError, Message};
use spin::Mutex;

/// Targets whose queue this core holds a reservation in while it waits for room (a bit per
/// core; a nested send to one of them is deferred, so no target is held twice).
static HELD: AtomicU64 = AtomicU64::new(0);
/// What handlers sent meanwhile to held targets, in the order sent.
static DEFERRED: Mutex<VecDeque<Deferred>> = Mutex::new(VecDeque::new());
/// `DEFERRED`'s length, read without the lock by every send.
static DEFERRED_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Deferred messages at most: past this a nested send fails as it used to (a handler that
/// sends this much belongs outside sends).
const MAX_DEFERRED: usize = 1024;

struct Deferred {
    target: usize,
    body: Body,
}

enum Body {
    Line(Message),
    Large(Kind, Vec<u8>),
}

/// The reservation of this core's large send to one target, held while the send waits for
/// room; dropped when the send is done, it sends what was deferred behind it.
pub(super) struct Held(usize);

impl Held {
    pub(super) fn take(target: usize) -> Self {
        HELD.fetch_or(1 << target, Ordering::Relaxed);
        Self(target)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.fetch_and(!(1 << self.0), Ordering::Relaxed);
        if DEFERRED_COUNT.load(Ordering::Relaxed) != 0 {
            send_deferred(self.0);
        }
    }
}

/// Whether a send to `target` must wait behind this core's held reservation there, or behind
/// messages already waiting for it (their order is kept).
pub(super) fn must_wait(target: usize) -> bool {
    HELD.load(Ordering::Relaxed) & (1 << target) != 0
        || (DEFERRED_COUNT.load(Ordering::Relaxed) != 0 && DEFERRED.lock().iter().any(|d| d.target == target))
}

/// Whether this core holds a reservation anywhere: a long handler waits until it does not.
pub fn any_held() -> bool {
    HELD.load(Ordering::Relaxed) != 0
}

/// Keeps one line for `target` until the reservation there is let go.
pub(super) fn defer_line(target: usize, message: &Message) -> Result<(), SendError> {
    defer(Deferred { target, body: Body::Line(*message) })
}

/// Keeps one large message for `target` until the reservation there is let go.
pub(super) fn defer_large(target: usize, kind: Kind, bytes: &[u8]) -> Result<(), SendError> {
    defer(Deferred { target, body: Body::Large(kind, bytes.to_vec()) })
}

fn defer(deferred: Deferred) -> Result<(), SendError> {
    let mut queue = DEFERRED.lock();
    if queue.len() >= MAX_DEFERRED {
        return Err(super::counted(SendError::Channel(ChannelError::EndpointTaken)));
    }
    queue.push_back(deferred);
    DEFERRED_COUNT.store(queue.len(), Ordering::Relaxed);
    Ok(())
}

/// Sends, in order, what waited for `target` (until none is left: a handler run during these
/// sends may defer more behind them).
fn send_deferred(target: usize) {
    loop {
        let next = {
            let mut queue = DEFERRED.lock();
            let Some(index) = queue.iter().position(|d| d.target == target) else { return };
            let next = queue.remove(index);
            DEFERRED_COUNT.store(queue.len(), Ordering::Relaxed);
            next
        };
        let Some(Deferred { body, .. }) = next else { return };
        let sent = match &body {
            Body::Line(message) => super::send::send_blocking_now(target, message),
            Body::Large(kind, bytes) => super::send::send_large_now(target, *kind, bytes, true),
        };
        if let Err(error) = sent {
            log::warn!("a message deferred behind this core's send to core {target} was not sent: {error}");
        }
    }
}
