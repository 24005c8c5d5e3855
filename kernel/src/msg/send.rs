//! Every way of sending, in one room, with the errors a send can meet and its bounded wait.
//!
//! | function | channel | when the channel is full |
//! |---|---|---|
//! | [`try_send`] | the target's receive queue | fails at once |
//! | [`send_blocking`] | the target's receive queue | waits, handling this core's messages |
//! | [`leave_for_next_kernel`] | the queue of a core stopped with kept processes | fails at once |
//! | [`send_or_leave`] | one of the two above, as the target's state says | as that one |
//! | [`send_large`] | the target's queue, in chunks reserved at once | waits |
//! | [`send_large_draining`] | as `send_large` (outside handlers only) | waits, handling messages |
//! | [`try_send_pair`] | the URPC ring from this core to the target | fails at once |
//! | [`super::send_group`] | a multicast group | fails at once, after clearing dead cores |
//!
//! Every wait is bounded ([`Patience`]): it gives up as soon as the target stops running, or
//! after [`SEND_TIMEOUT_MS`]. A send to a queue this core's own large send holds waits behind
//! that send ([`super::nested`]); the `_now` functions are what runs once it is done.

use super::{add, area, bump, counters, drain, messaging_cores, nested, notify, queue_mode, wait};
use super::{ReceiveQueue, MAX_LARGE_MESSAGE, MESSAGING_CORES, PAIR_SLOTS};
use crate::arch::cpu;
use crate::core::instance_cell::InstanceCell;
use crate::core::kcb::CoreState;
use crate::core::shared;
use ::core::sync::atomic::Ordering;
use abi::message::{Kind, PAYLOAD_SIZE};
use channel::{ChannelError, Message, UrpcSender};

/// How long a send waits for room in a full channel, or a call for its reply, before it gives
/// up with [`SendError::Timeout`]. A dead target is noticed at once, not after this.
pub const SEND_TIMEOUT_MS: u64 = 2000;

/// This instance's end of the URPC ring to every core (private per instance).
pub(super) static PAIR_SENDERS: InstanceCell<[Option<UrpcSender<'static, PAIR_SLOTS>>; MESSAGING_CORES]> =
    InstanceCell::new([const { None }; MESSAGING_CORES]);

/// Why a message could not be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No such core, or one beyond [`MESSAGING_CORES`].
    NoSuchCore(usize),
    /// The target's kernel instance is not running (faulted, offline, booting, unresponsive):
    /// nothing would take the message.
    TargetNotRunning { core: usize, state: CoreState },
    /// The target runs but took nothing from the full channel within the time allowed.
    Timeout { core: usize, waited_ms: u64 },
    /// The channel refused it (too long, closed, endpoint missing).
    Channel(ChannelError),
}

impl ::core::fmt::Display for SendError {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        match self {
            Self::NoSuchCore(core) => {
                write!(f, "no core {core} with channels: pick one from 0 to {}, see `cores`", messaging_cores() - 1)
            }
            Self::TargetNotRunning { core, state: CoreState::Faulted } => {
                write!(f, "core {core} is faulted and takes no messages: `start {core}` restarts it")
            }
            Self::TargetNotRunning { core, state } => {
                write!(f, "core {core} is {} and takes no messages: see `cores`", state.name())
            }
            Self::Timeout { core, waited_ms } => write!(
                f,
                "core {core} took nothing for {waited_ms} ms: it runs but is stuck or overloaded; see `cores` and `msg stats`"
            ),
            Self::Channel(error) => write!(f, "channel refused the message: {error}"),
        }
    }
}

/// Counts a send error in this core's KCB (`msg stats`) and hands it back.
pub(super) fn counted(error: SendError) -> SendError {
    match error {
        SendError::TargetNotRunning { .. } => bump(&counters().send_refused),
        SendError::Timeout { .. } => bump(&counters().send_timeouts),
        SendError::NoSuchCore(_) | SendError::Channel(_) => {}
    }
    error
}

/// The bounded wait of one send or call to `target`: every [`Patience::check`] fails once the
/// target stops running or the time is up, so no caller waits for a dead or stuck core forever.
pub struct Patience {
    target: usize,
    started: u64,
    /// Read at one check in `SpinDeadline::POLLS_PER_READ` (under TCG every read of the
    /// clock takes a lock all vCPUs share).
    deadline: crate::time::SpinDeadline,
}

impl Patience {
    /// Starts waiting for `target`, for at most `timeout_ms`.
    pub fn new(target: usize, timeout_ms: u64) -> Self {
        Self { target, started: cpu::read_tsc(), deadline: crate::time::SpinDeadline::after_ms(timeout_ms) }
    }

    /// `Ok` while the target runs and time is left; else the (counted) reason to give up.
    pub fn check(&self) -> Result<(), SendError> {
        // While this core waits, a parked core's host runs, or a host's guests (one of them
        // may be the core waited for).
        wait::while_waiting();
        let state = shared::get().kcb(self.target).state();
        if !state.is_live() {
            return Err(counted(SendError::TargetNotRunning { core: self.target, state }));
        }
        if self.deadline.passed() {
            let waited = cpu::read_tsc().wrapping_sub(self.started);
            let waited_ms = waited / (shared::facts().tsc_hz / 1000).max(1);
            return Err(counted(SendError::Timeout { core: self.target, waited_ms }));
        }
        Ok(())
    }
}

/// Builds a one-line message of `kind` whose payload `encode` writes, in place (no copy).
#[inline]
pub fn line(kind: Kind, encode: impl FnOnce(&mut [u8; PAYLOAD_SIZE]) -> usize) -> Message {
    let mut message = Message { kind: kind as u16, flags: 0, len: 0, payload: [0; PAYLOAD_SIZE] };
    let length = encode(&mut message.payload);
    debug_assert!(length <= PAYLOAD_SIZE, "abi payloads fit one message");
    message.len = length as u8;
    message
}

/// A target must exist and run; a refusal is counted.
pub(super) fn check_target(target: usize) -> Result<(), SendError> {
    if target >= messaging_cores() {
        return Err(SendError::NoSuchCore(target));
    }
    let mut state = shared::get().kcb(target).state();
    if !state.is_live() {
        // Only a core that does not run can be between two kernels: the common send pays
        // for one load.
        super::wait_out_restart(target);
        state = shared::get().kcb(target).state();
    }
    if !state.is_live() {
        return Err(counted(SendError::TargetNotRunning { core: target, state }));
    }
    Ok(())
}

fn queue_for(target: usize, kind: u16) -> &'static ReceiveQueue {
    let channels = &area().cores[target];
    let high = kind < 64 && channels.notify.high_priority_kinds.load(Ordering::Acquire) & (1 << kind) != 0;
    if high {
        &channels.high
    } else {
        &channels.normal
    }
}

/// Sends one line to `target`'s receive queue (high or normal as its registry says) and
/// notifies it; fails at once if the queue is full. From a handler run inside this core's own
/// large send to `target`, the line waits until that send is done ([`nested`]).
pub fn try_send(target: usize, message: &Message) -> Result<(), SendError> {
    if nested::must_wait(target) {
        check_target(target)?;
        return nested::defer_line(target, message);
    }
    try_send_now(target, message)
}

fn try_send_now(target: usize, message: &Message) -> Result<(), SendError> {
    check_target(target)?;
    enqueue(target, message)?;
    notify(target, queue_mode(target));
    Ok(())
}

/// Puts one line in `target`'s receive queue (high or normal as its registry says), counted
/// sent; fails at once if the queue is full. No notification.
fn enqueue(target: usize, message: &Message) -> Result<(), SendError> {
    // Counted before the ticket is taken: should this core die holding it, the receiver skips
    // the slot and counts it lost, and sent = received + dropped + lost still holds.
    let sent = &counters().sent;
    bump(sent);
    if let Err(error) = queue_for(target, message.kind).try_send(shared::this_core() as usize, message) {
        sent.store(sent.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        return Err(SendError::Channel(error));
    }
    Ok(())
}

/// Sends one line, draining this core's own channels while the target's queue is full, so
/// two cores sending to each other never deadlock. Gives up, with a named and counted error,
/// as soon as the target stops running or after [`SEND_TIMEOUT_MS`].
pub fn send_blocking(target: usize, message: &Message) -> Result<(), SendError> {
    send_blocking_with(target, message, try_send)
}

/// [`send_blocking`] of a line deferred behind a large send, once that is done.
pub(super) fn send_blocking_now(target: usize, message: &Message) -> Result<(), SendError> {
    send_blocking_with(target, message, try_send_now)
}

fn send_blocking_with(
    target: usize,
    message: &Message,
    send: fn(usize, &Message) -> Result<(), SendError>,
) -> Result<(), SendError> {
    let patience = Patience::new(target, SEND_TIMEOUT_MS);
    loop {
        match send(target, message) {
            Err(SendError::Channel(ChannelError::Full)) => {
                patience.check()?;
                drain();
                cpu::relax();
            }
            result => return result,
        }
    }
}

/// Leaves one line in the receive queue of `target`, a core stopped with processes kept for a
/// later start ([`super::holds_kept_processes`]), for its next kernel: for the lines such a
/// process must not miss (a child's exit: its parent's `wait4` would wait forever). No
/// notification (nothing runs there), unless the core was started meanwhile. Never blocks: a
/// full queue is an error, since nothing empties it before the start.
pub fn leave_for_next_kernel(target: usize, message: &Message) -> Result<(), SendError> {
    if target >= messaging_cores() {
        return Err(SendError::NoSuchCore(target));
    }
    enqueue(target, message)?;
    if super::is_live(target) {
        notify(target, queue_mode(target));
    }
    Ok(())
}

/// [`send_blocking`], or [`leave_for_next_kernel`] when `target` holds kept processes.
pub fn send_or_leave(target: usize, message: &Message) -> Result<(), SendError> {
    if super::holds_kept_processes(target) {
        leave_for_next_kernel(target, message)
    } else {
        send_blocking(target, message)
    }
}

/// Sends `bytes` as one large message of `kind` to `target`'s receive queue: its chunks are
/// reserved with one atomic add and announced with one notification (Popcorn 5.3.4).
pub fn send_large(target: usize, kind: Kind, bytes: &[u8]) -> Result<(), SendError> {
    send_large_waiting(target, kind, bytes, false)
}

/// As [`send_large`], handling this core's own messages while the target's queue is full,
/// so two cores sending large messages to each other never wait on each other forever.
/// Only for callers outside message handlers (a nested send to the same target would wait
/// behind the reservation it interrupted).
pub fn send_large_draining(target: usize, kind: Kind, bytes: &[u8]) -> Result<(), SendError> {
    send_large_waiting(target, kind, bytes, true)
}

fn send_large_waiting(target: usize, kind: Kind, bytes: &[u8], draining: bool) -> Result<(), SendError> {
    if nested::must_wait(target) {
        check_target(target)?;
        return nested::defer_large(target, kind, bytes);
    }
    send_large_now(target, kind, bytes, draining)
}

/// [`send_large`] (or, `draining`, [`send_large_draining`]) without the check for a held
/// reservation: also what sends a large message deferred behind one, once it is let go.
pub(super) fn send_large_now(target: usize, kind: Kind, bytes: &[u8], draining: bool) -> Result<(), SendError> {
    check_target(target)?;
    if bytes.len() > MAX_LARGE_MESSAGE {
        return Err(SendError::Channel(ChannelError::TooLong));
    }
    let chunks = channel::chunk_count(bytes.len() as u64);
    // Counted before the reservation: chunks this core never writes (it gives up, or dies)
    // are skipped by the receiver and counted lost there.
    let sent = &counters().sent;
    add(sent, chunks);
    let patience = Patience::new(target, SEND_TIMEOUT_MS);
    let failure = ::core::cell::Cell::new(None);
    let waits = ::core::cell::Cell::new(0u32);
    let keep_waiting = || match patience.check() {
        Ok(()) => {
            // The queue is full: the receiver may be asleep, waiting for the one notification
            // that comes after the last chunk. Wake it now (and now and then) so it drains.
            if waits.get().is_multiple_of(256) {
                notify(target, queue_mode(target));
            }
            waits.set(waits.get().wrapping_add(1));
            if draining {
                drain();
            }
            true
        }
        Err(error) => {
            failure.set(Some(error));
            false
        }
    };
    let queue = queue_for(target, kind as u16);
    // A handler run while this waits (draining) and sending to `target` waits behind it; what
    // it sent goes out when `held` is dropped, after this send.
    let held = draining.then(|| nested::Held::take(target));
    let result = channel::send_large_within(queue, shared::this_core() as usize, kind as u16, bytes, keep_waiting);
    let outcome = match result {
        Ok(()) => {
            notify(target, queue_mode(target));
            Ok(())
        }
        Err(ChannelError::GaveUp) => {
            // What was written is delivered; the rest is abandoned to the receiver's skip.
            notify(target, queue_mode(target));
            Err(failure.get().unwrap_or(SendError::Channel(ChannelError::GaveUp)))
        }
        Err(error) => {
            sent.store(sent.load(Ordering::Relaxed) - chunks, Ordering::Relaxed);
            Err(SendError::Channel(error))
        }
    };
    drop(held);
    outcome
}

/// Sends one line on the URPC ring from this core to `target`.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn try_send_pair(target: usize, message: &Message) -> Result<(), SendError> {
    check_target(target)?;
    let mut senders = PAIR_SENDERS.lock();
    let sender = senders[target].as_mut().ok_or(SendError::Channel(ChannelError::EndpointTaken))?;
    sender.try_send(message).map_err(SendError::Channel)?;
    drop(senders);
    bump(&counters().sent);
    notify(target, super::notify::pair_mode(target));
    Ok(())
}
