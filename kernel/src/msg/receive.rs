//! Taking lines off this core's channels: copy out, validate, then dispatch to the registered
//! handler; large messages reassembled per queue; what cannot be handled dropped and counted.

use super::{add, area, bump, counters, handler_of, icc, messaging_cores, HandlerResult};
use super::{GROUPS, GROUP_SLOTS, MAX_LARGE_MESSAGE, MESSAGING_CORES, PAIR_SLOTS};
use crate::core::instance_cell::InstanceCell;
use crate::core::shared;
use crate::core::shared::message_area::{self, OwnEndpoints, QueueReceiver};
use ::core::sync::atomic::{AtomicU32, Ordering};
use channel::{ChannelError, Message, MulticastReader, Reassembler, UrpcReceiver};

/// Where a received message came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    High,
    Normal,
    Pair(usize),
    Group(usize),
}

/// This instance's receive queues, each with the reassembler of its large messages.
pub(super) struct Receivers {
    pub(super) high: QueueReceiver,
    pub(super) normal: QueueReceiver,
    pub(super) high_reassembler: Reassembler,
    pub(super) normal_reassembler: Reassembler,
}

/// Bit 0 (high queue), bit 1 (normal queue): this instance is a restart and has not yet seen
/// a line on that queue that starts something. Continuation chunks met meanwhile belong to a
/// large message whose first chunks died with the previous kernel: they are counted lost,
/// not malformed. (Private to the instance; one load on the receive path once clear.)
static RESUMING: AtomicU32 = AtomicU32::new(0);

// Private per-instance state (each core has its own copy of these statics): borrowed
// without a locked instruction (`InstanceCell`), three times per empty `drain()`.
pub(super) static RECEIVERS: InstanceCell<Option<Receivers>> = InstanceCell::new(None);
pub(super) static PAIR_RECEIVERS: InstanceCell<[Option<UrpcReceiver<'static, PAIR_SLOTS>>; MESSAGING_CORES]> =
    InstanceCell::new([const { None }; MESSAGING_CORES]);
pub(super) static GROUP_READERS: InstanceCell<[Option<MulticastReader<'static, GROUP_SLOTS, 64>>; GROUPS]> =
    InstanceCell::new([const { None }; GROUPS]);

/// Installs the endpoints this instance claimed or took over; `restarted`: the first lines
/// of its queues may continue large messages its predecessor had begun.
pub(super) fn install(endpoints: OwnEndpoints, restarted: bool) {
    let OwnEndpoints { high, normal, pair_senders, pair_receivers, unread_lines } = endpoints;
    *super::send::PAIR_SENDERS.lock() = pair_senders;
    *PAIR_RECEIVERS.lock() = pair_receivers;
    add(&counters().lost, unread_lines);
    *RECEIVERS.lock() = Some(Receivers {
        high,
        normal,
        high_reassembler: Reassembler::new(MAX_LARGE_MESSAGE),
        normal_reassembler: Reassembler::new(MAX_LARGE_MESSAGE),
    });
    RESUMING.store(if restarted { 0b11 } else { 0 }, Ordering::Relaxed);
}

/// One received line, copied out of shared memory, not yet validated.
pub(super) struct Incoming {
    message: Message,
    source: Source,
}

/// Takes the next message from this core's channels: high queue first, then normal, then
/// the URPC rings, then the groups.
#[inline(always)]
pub(super) fn receive_one() -> Option<Incoming> {
    if let Some(receivers) = RECEIVERS.lock().as_mut() {
        if let Some(message) = receivers.high.try_recv() {
            return Some(Incoming { message, source: Source::High });
        }
        if let Some(message) = receivers.normal.try_recv() {
            return Some(Incoming { message, source: Source::Normal });
        }
    }
    let cores = messaging_cores();
    let mut pairs = PAIR_RECEIVERS.lock();
    for (from, receiver) in pairs.iter_mut().enumerate().take(cores) {
        if let Some(message) = receiver.as_mut().and_then(|r| r.try_recv()) {
            return Some(Incoming { message, source: Source::Pair(from) });
        }
    }
    drop(pairs);
    // This core holds a reader only while its member bit is set (join sets the bit before
    // it returns the reader, dropping the reader clears it), so a core in no group skips the
    // lock and the scan of every group.
    let me = 1u64.checked_shl(shared::this_core()).unwrap_or(0);
    if area().groups.iter().all(|group| group.members() & me == 0) {
        return None;
    }
    let mut groups = GROUP_READERS.lock();
    for (group, reader) in groups.iter_mut().enumerate() {
        if let Some(Ok(Some(message))) = reader.as_mut().map(|r| r.try_recv()) {
            return Some(Incoming { message, source: Source::Group(group) });
        }
    }
    None
}

/// Why a line was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    UnknownKind,
    Malformed,
    Chunk,
    TooLarge,
}

fn drop_message(reason: DropReason, message: &Message, source: Source) {
    let counters = counters();
    bump(&counters.dropped);
    bump(match reason {
        DropReason::UnknownKind => &counters.dropped_unknown_kind,
        DropReason::Malformed => &counters.dropped_malformed,
        DropReason::Chunk => &counters.dropped_chunk,
        DropReason::TooLarge => &counters.dropped_too_large,
    });
    log::debug!("dropped a message of kind {} from {source:?}: {reason:?}", message.kind);
}

/// Validates and dispatches one received line. Decode, then invoke: the handler sees only a
/// message whose header and payload passed validation. Inlined, like [`receive_one`], into
/// the loops that poll: under TCG every call and return costs a lookup of its target, and
/// this is the path every received message takes; chunks go to [`dispatch_chunk`].
#[inline(always)]
pub(super) fn dispatch(incoming: &Incoming) {
    let Incoming { ref message, source } = *incoming;
    if message.validate().is_err() {
        return drop_message(DropReason::Malformed, message, source);
    }
    if RESUMING.load(Ordering::Relaxed) != 0 {
        let bit = match source {
            Source::High => 1,
            Source::Normal => 2,
            _ => 0,
        };
        if RESUMING.load(Ordering::Relaxed) & bit != 0 {
            if message.is_chunk() && message.flags & channel::FLAG_FIRST == 0 {
                return bump(&counters().lost);
            }
            RESUMING.fetch_and(!bit, Ordering::Relaxed);
        }
    }
    if message.is_chunk() {
        return dispatch_chunk(message, source);
    }
    let handler = handler_of(message.kind).and_then(|h| h.on_line);
    match handler {
        None => drop_message(DropReason::UnknownKind, message, source),
        Some(handle) => match run_handler(|| handle(message)) {
            Ok(()) => bump(&counters().received),
            Err(_) => drop_message(DropReason::Malformed, message, source),
        },
    }
}

/// Runs a handler, counted in `handlers_running` so that a fault inside it counts the
/// message lost (see [`super::count_lost_in_fault`]).
#[inline(always)]
fn run_handler(handle: impl FnOnce() -> HandlerResult) -> HandlerResult {
    let running = &counters().handlers_running;
    running.store(running.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    let result = handle();
    running.store(running.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
    result
}

/// Hands a validated chunk to its queue's reassembler and a completed large message to its
/// kind's handler.
#[inline(never)]
fn dispatch_chunk(message: &Message, source: Source) {
    let mut receivers = RECEIVERS.lock();
    let reassembler = match (source, receivers.as_mut()) {
        (Source::High, Some(r)) => &mut r.high_reassembler,
        (Source::Normal, Some(r)) => &mut r.normal_reassembler,
        // Large messages travel only on receive queues.
        _ => return drop_message(DropReason::Chunk, message, source),
    };
    let result = reassembler.push(message);
    drop(receivers);
    match result {
        Err(ChannelError::TooLong | ChannelError::NoMemory) => drop_message(DropReason::TooLarge, message, source),
        Err(_) => drop_message(DropReason::Chunk, message, source),
        Ok(None) => bump(&counters().received),
        Ok(Some((kind, bytes))) => {
            let handler = handler_of(kind).and_then(|h| h.on_large);
            match handler {
                None => drop_message(DropReason::UnknownKind, message, source),
                Some(handle) => match run_handler(|| handle(&bytes)) {
                    Ok(()) => bump(&counters().received),
                    Err(_) => drop_message(DropReason::Malformed, message, source),
                },
            }
        }
    }
}

/// Whether this core holds part of a large message whose last chunks have not come yet: a
/// kernel that stopped now would leave them to its successor, which counts them lost.
pub fn is_collecting_large() -> bool {
    RECEIVERS
        .lock()
        .as_ref()
        .is_some_and(|r| r.high_reassembler.is_collecting() || r.normal_reassembler.is_collecting())
}

/// Handles every message waiting on this core's channels; returns how many.
pub fn drain() -> usize {
    icc::run_postponed();
    let mut handled = 0;
    while let Some(incoming) = receive_one() {
        dispatch(&incoming);
        handled += 1;
    }
    if handled == 0 {
        bump(&counters().empty_polls);
        skip_dead_tickets();
    }
    handled
}

/// When nothing could be received: a receive queue may be stuck behind a ticket whose holder
/// died (or gave up) before publishing it. Skip such slots, count them lost, and forget the
/// large message they interrupted (a reservation's chunks are consecutive, so a partly
/// collected message belongs to the holder of the skipped ticket).
fn skip_dead_tickets() {
    let mut receivers = RECEIVERS.lock();
    let Some(r) = receivers.as_mut() else { return };
    let mut skipped = 0;
    for (receiver, reassembler) in [(&mut r.high, &mut r.high_reassembler), (&mut r.normal, &mut r.normal_reassembler)]
    {
        let count = message_area::skip_abandoned_tickets(receiver);
        if count != 0 {
            reassembler.reset();
            skipped += count;
        }
    }
    drop(receivers);
    if skipped != 0 {
        log::debug!("skipped {skipped} queue slots whose senders died before publishing");
        add(&counters().lost, skipped);
    }
}
