//! Popcorn's many-to-one kernel receive queue (fig. 5.1), with dead-sender skips.
//!
//! Any number of senders on any cores, one receiver. A sender takes a ticket
//! with one `fetch_add` on the shared tail, spins only while its slot still
//! holds the unconsumed message of the previous lap, writes, and publishes
//! with a Release store of the slot's sequence word.
//!
//! Sequence word of the slot of ticket `t`, lap `L = t / N` (wrapping u32):
//! `2L` = free for lap `L`, `2L + 1` = holds the lap-`L` message, and the
//! receiver frees it by storing `2L + 2`, which is "free for lap `L + 1`".
//! Zero is "free for lap 0", so all-zero memory is an empty queue. Tickets
//! are `u64` and never wrap (2^64 messages).
//!
//! # Sender records: skipping tickets no one will publish
//!
//! The receiver takes tickets in order, so a sender that takes a ticket and
//! dies before publishing it would stop the queue for good. Each sender id
//! (`0..SENDERS`; the kernel uses its core id) therefore has a record on its
//! own cache line: the lowest ticket that sender may hold, or "none". It is
//! stored inverted (`!lowest`), so zero, the all-zero state, is "none"
//! (`lowest = u64::MAX`). One word suffices (no upper bound, see *Liveness*).
//!
//! A sender, per message or reservation:
//!
//! 1. **W1**: stores a lower bound of the ticket it is about to take (0 for
//!    `send_spin` and `reserve`; the tail it just loaded for `try_send`,
//!    since any ticket it later takes is at least that: the tail only grows);
//! 2. **R**: takes its ticket(s) with a Release read-modify-write of the tail
//!    (`fetch_add`, or the compare-exchange of `try_send`);
//! 3. narrows its record to its first ticket, before it waits for any slot
//!    (`send_spin`, `reserve`; `try_send` never waits and skips this);
//! 4. writes and publishes its slots (Release store of each sequence word);
//! 5. stores "none" right after its last publish, or instead of writing when
//!    it gives up ([`Reservation::push_or_give_up`]).
//!
//! Every record store is Release and every record load Acquire.
//!
//! [`MpscReceiver::skip_abandoned`] skips ticket `t` (at the receiver's
//! position) only if: its slot is not published; an Acquire load of the tail
//! shows `t` was taken (tail > `t`); no sender whose record may hold `t`
//! (lowest ≤ `t`) is live (`is_live(id)`); and then a compare-exchange of the
//! slot's sequence from "free for lap `L`" to "free for lap `L + 1`" succeeds.
//!
//! ## Why a live sender's ticket is never skipped
//!
//! Let live sender `s` hold `t`: its R returned a ticket `f ≤ t` with
//! `t < f + n`, and it has neither published `t` nor given up.
//!
//! 1. R wrote `f + n > t`, and every tail value before R in the tail's
//!    modification order is at most `f ≤ t`. So the receiver's tail load that
//!    returned a value > `t` read R's value or a later one. Every write of the
//!    tail is a read-modify-write, so every later one continues R's release
//!    sequence, and R (Release) synchronises with the receiver's Acquire load.
//! 2. W1 is sequenced before R, so W1 happens before the receiver's record
//!    load, which (write-read coherence) returns W1's value or a later one.
//! 3. The values `s` stores from W1 until it publishes `t` are W1's bound and
//!    the narrowed `f`, both ≤ `t`: a record load returning one of them says
//!    "may hold `t`", `is_live(s)` is true, and the receiver stops.
//! 4. Any later value was stored (Release) after `s` published `t` (Release
//!    store of the sequence word), so the record load (Acquire) makes that
//!    publish happen before the receiver's compare-exchange on the slot, which
//!    then reads the published mark or later and fails. The receiver does not
//!    skip; [`MpscReceiver::try_recv`] delivers the message.
//!
//! If `s` gave up on `t` instead, it never writes `t`'s slot, and skipping `t`
//! is exactly what is wanted. A dead sender's record is ignored: the caller
//! promises it never writes again (which is why `skip_abandoned` is `unsafe`).
//! The compare-exchange makes the skip atomic against a publish that landed
//! just before it. Only the tail RMW's Release, the record stores' Release and
//! the receiver's Acquire loads are needed (no SeqCst); the loom model
//! `mpsc_skip_never_skips_a_live_ticket` fails with a Relaxed `fetch_add`.
//!
//! ## Liveness: a live sender delays a skip only for a few instructions
//!
//! A live sender's record covers a ticket it does not hold only between W1
//! and step 3 (no waiting in between) or during `try_send` (never waits),
//! or, for tickets above its own, between its last publish and step 5 (the
//! receiver reaches those only after consuming all of its tickets). So a
//! sender waiting for the ring to drain never blocks the skip of a dead
//! sender's earlier ticket, and an upper bound in the record would buy
//! nothing.
//!
//! ## Rules for callers
//!
//! * One sender id is used by one sender at a time: the kernel uses its core
//!   id and never sends from interrupt context. A send or reservation while
//!   the same id has one in progress fails with
//!   [`ChannelError::EndpointTaken`] rather than corrupt the record.
//! * A restarted core calls [`MpscQueue::reset_sender_record`] before it is
//!   reported live again: the record its dead incarnation left may cover a
//!   ticket it never published (and its sends fail with `EndpointTaken`
//!   until then).
//! * The receiver saves its position in the shared receiver line after every
//!   message, so [`MpscQueue::reclaim_receiver`] on a restarted core resumes
//!   where the dead receiver stopped.
//! * A reservation's tickets are consecutive, so a ticket skipped while a
//!   [`Reassembler`](crate::Reassembler) is collecting belongs to that large
//!   message: reset the reassembler (the next first chunk would otherwise be
//!   refused with `ChunkGap` too).

use crate::message::{lap, slot_index, CacheLine, Slot, KIND_PADDING};
use crate::sync::{spin_wait, AtomicU64, Ordering};
use crate::urpc::EndpointLine;
use crate::{ChannelError, Message};

/// A sender record holding no ticket (the inverted `u64::MAX`): zero, so
/// all-zero memory has every sender idle.
const NO_TICKET: u64 = 0;

/// The record word saying "may hold any ticket from `lowest` on".
#[inline(always)]
fn record_from(lowest: u64) -> u64 {
    !lowest
}

/// A many-to-one receive queue of `N` slots (`N` a power of two) for sender
/// ids `0..SENDERS`.
///
/// `#[repr(C)]`, `size_of` = `(N + 2 + SENDERS) * 64` bytes, aligned to 64;
/// all-zero memory is a valid empty queue ([`MpscQueue::from_zeroed`]).
/// Senders use `&MpscQueue` directly with their sender id; the single
/// receiver takes [`MpscQueue::receiver`].
#[repr(C)]
pub struct MpscQueue<const N: usize, const SENDERS: usize> {
    /// Next ticket; every sender's `fetch_add` lands here, so it has a line
    /// of its own.
    tail: CacheLine<AtomicU64>,
    /// Receiver claim and its saved position (stored after every message).
    receiver_line: CacheLine<EndpointLine>,
    /// Per sender id: `!lowest ticket it may hold`, 0 = none (module doc).
    /// Written by that sender only, read by the receiver when it skips.
    sender_records: [CacheLine<AtomicU64>; SENDERS],
    slots: [Slot; N],
}

// SAFETY: only atomics and `Slot`s; zero is tail 0, receiver unclaimed at
// ticket 0, every sender record "no ticket", every slot "free for lap 0".
#[cfg(not(loom))]
unsafe impl<const N: usize, const SENDERS: usize> crate::message::ZeroIsEmpty for MpscQueue<N, SENDERS> {}

/// Sequence value meaning "free for the lap of `ticket`".
#[inline(always)]
fn free_mark(ticket: u64, capacity: usize) -> u32 {
    lap(ticket, capacity).wrapping_mul(2)
}

impl<const N: usize, const SENDERS: usize> MpscQueue<N, SENDERS> {
    /// Compile-time check of the geometry, evaluated by every constructor.
    const CAPACITY_OK: () = assert!(
        N.is_power_of_two() && N <= 1 << 30 && SENDERS >= 1,
        "MpscQueue capacity must be a power of two, with at least one sender id"
    );

    const_unless_loom! {
        /// An empty queue by value (`const fn` outside loom).
        pub fn new() -> Self {
            let () = Self::CAPACITY_OK;
            Self {
                tail: CacheLine(AtomicU64::new(0)),
                receiver_line: CacheLine(EndpointLine::new()),
                sender_records: array_of![CacheLine(AtomicU64::new(NO_TICKET)); SENDERS],
                slots: array_of![Slot::new(); N],
            }
        }
    }

    ring_constructors!("queue", CAPACITY_OK);

    /// Number of sender ids.
    pub const fn nr_senders(&self) -> usize {
        SENDERS
    }

    /// Takes the receiving endpoint; it resumes where the previous receiver
    /// endpoint, if any, stopped.
    pub fn receiver(&self) -> Result<MpscReceiver<'_, N, SENDERS>, ChannelError> {
        self.receiver_line.claim()?;
        Ok(self.resume_receiver())
    }

    /// Takes the receiving endpoint even though it is claimed, resuming at
    /// the position the previous receiver saved after its last message.
    ///
    /// If that receiver died after freeing a slot but before saving its
    /// position, the slot shows it (its sequence is past the ticket's
    /// "full" mark) and the new endpoint starts after it. A message the
    /// dead receiver copied out but had not freed is delivered again.
    ///
    /// # Safety
    ///
    /// The previous receiver endpoint of this queue is never used again (its
    /// core is dead), and its stores to the queue are visible to this core
    /// (the kernel learned of the death through memory it Acquired).
    pub unsafe fn reclaim_receiver(&self) -> MpscReceiver<'_, N, SENDERS> {
        // Acquire: pairs with a Release `release()` if the endpoint was free.
        self.receiver_line.claimed.swap(1, Ordering::Acquire);
        self.resume_receiver()
    }

    /// A receiver at the saved position, moved past a ticket whose slot was
    /// freed before its position was saved.
    fn resume_receiver(&self) -> MpscReceiver<'_, N, SENDERS> {
        // Acquire: pairs with the previous receiver's Release stores of its
        // position, so its slot updates before them are visible.
        let mut next_ticket = self.receiver_line.index.load(Ordering::Acquire);
        let slot = &self.slots[slot_index(next_ticket, N)];
        let full = free_mark(next_ticket, N).wrapping_add(1);
        // At the saved position the slot is free for its lap or full; past
        // full means the receiver freed (or skipped) it and died before
        // saving. Only one ticket can be in that state.
        if (slot.sequence.load(Ordering::Acquire).wrapping_sub(full) as i32) > 0 {
            next_ticket = next_ticket.wrapping_add(1);
            self.receiver_line.index.store(next_ticket, Ordering::Release);
        }
        MpscReceiver { queue: self, next_ticket, nr_padding_skipped: 0, nr_abandoned_skipped: 0 }
    }

    /// Clears the record a dead incarnation of sender `sender` left: whatever
    /// ticket it held is abandoned and [`MpscReceiver::skip_abandoned`] skips
    /// it. A restarted core calls this before it is reported live again.
    /// Fails with [`ChannelError::NoSuchSender`] for `sender >= SENDERS`.
    ///
    /// # Safety
    ///
    /// No send or reservation of sender id `sender` is in progress or will
    /// resume: its previous user is dead and the new one has not started.
    pub unsafe fn reset_sender_record(&self, sender: usize) -> Result<(), ChannelError> {
        let record = self.sender_records.get(sender).ok_or(ChannelError::NoSuchSender)?;
        // Release: like every record store (module doc).
        record.store(NO_TICKET, Ordering::Release);
        Ok(())
    }

    /// The record of `sender`, checked idle (module doc, rules for callers).
    fn idle_record(&self, sender: usize) -> Result<&AtomicU64, ChannelError> {
        let record = self.sender_records.get(sender).ok_or(ChannelError::NoSuchSender)?;
        // Relaxed: only this sender id writes its record, so this reads our
        // own last store; it catches a nested send on the same id.
        if record.load(Ordering::Relaxed) != NO_TICKET {
            return Err(ChannelError::EndpointTaken);
        }
        Ok(record)
    }

    /// Popcorn fig. 5.1: one `fetch_add` for a ticket, then spin until the
    /// slot is free, write, publish. Spins while the ring is full, without
    /// bound (a dead receiver means forever: the kernel uses
    /// [`reserve`](Self::reserve) and [`Reservation::push_or_give_up`]).
    /// Fails with [`ChannelError::NoSuchSender`] or
    /// [`ChannelError::EndpointTaken`] (this id has a send in progress).
    pub fn send_spin(&self, sender: usize, message: &Message) -> Result<(), ChannelError> {
        let record = self.idle_record(sender)?;
        // W1 (module doc): "any ticket from 0 on" until we know ours.
        record.store(record_from(0), Ordering::Release);
        // Release: W1 happens before any receiver that Acquires this tail
        // value or a later one (module doc, step 1). The ticket only chooses
        // the slot; the slot's sequence word synchronises the message.
        let ticket = self.tail.fetch_add(1, Ordering::Release);
        // Narrow before waiting, so we never delay a skip of an earlier ticket.
        record.store(record_from(ticket), Ordering::Release);
        let written = self.write_ticket(ticket, message, &mut || true);
        debug_assert!(written, "never gives up");
        // Release: the publish happens before "no ticket" (module doc, step 4).
        record.store(NO_TICKET, Ordering::Release);
        Ok(())
    }

    /// Sends `message` if the next slot is free, else fails with
    /// [`ChannelError::Full`] without taking a ticket (a compare-exchange
    /// instead of `fetch_add`, so a full queue is left untouched). Never
    /// waits. Also fails with [`ChannelError::NoSuchSender`] or
    /// [`ChannelError::EndpointTaken`] (this id has a send in progress).
    pub fn try_send(&self, sender: usize, message: &Message) -> Result<(), ChannelError> {
        let record = self.idle_record(sender)?;
        let mut ticket = self.tail.load(Ordering::Relaxed);
        // W1: every ticket we can take below is at least this one, since the
        // tail only grows and our later reads of it are coherence-ordered.
        record.store(record_from(ticket), Ordering::Release);
        let result = loop {
            let slot = &self.slots[slot_index(ticket, N)];
            // Acquire: pairs with the receiver's Release that freed the slot.
            let sequence = slot.sequence.load(Ordering::Acquire);
            let distance = sequence.wrapping_sub(free_mark(ticket, N)) as i32;
            if distance < 0 {
                // Still holds (or awaits) the previous lap's message.
                break Err(ChannelError::Full);
            }
            if distance > 0 {
                // Our view of the tail is stale: this ticket is taken already.
                ticket = self.tail.load(Ordering::Relaxed);
                continue;
            }
            // Release on success: W1 happens before any receiver that
            // Acquires this tail value or a later one (module doc, step 1).
            match self.tail.compare_exchange(ticket, ticket.wrapping_add(1), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => {
                    // SAFETY: we hold the ticket, and the Acquire load above
                    // saw its slot free for our lap, so the receiver is done
                    // with it, no other sender owns this ticket, and the
                    // receiver cannot skip it while our record covers it.
                    unsafe { slot.write(message) };
                    // Release: the bytes are visible before the sequence.
                    slot.sequence.store(free_mark(ticket, N).wrapping_add(1), Ordering::Release);
                    break Ok(());
                }
                Err(current) => ticket = current,
            }
        };
        // Release: the publish (if any) happens before "no ticket".
        record.store(NO_TICKET, Ordering::Release);
        result
    }

    /// Reserves `nr_slots` consecutive tickets with one `fetch_add`, for a
    /// large message (Popcorn 5.3.4). The receiver sees them in order with
    /// nothing between; `nr_slots` may exceed `N`, in which case
    /// [`Reservation::push`] waits per slot for the receiver to make room.
    /// A single notification after reserving is enough: the receiver polls
    /// until every reserved slot has been consumed. The sender id is busy
    /// until the reservation is written, abandoned or dropped. Fails with
    /// [`ChannelError::NoSuchSender`] or [`ChannelError::EndpointTaken`].
    pub fn reserve(&self, sender: usize, nr_slots: usize) -> Result<Reservation<'_, N, SENDERS>, ChannelError> {
        let record = self.idle_record(sender)?;
        let nr_slots = nr_slots as u64;
        // W1, then the ticket RMW with Release, as in `send_spin`.
        record.store(record_from(0), Ordering::Release);
        let first_ticket = self.tail.fetch_add(nr_slots, Ordering::Release);
        let mut reservation =
            Reservation { queue: self, record, first_ticket, nr_slots, nr_written: 0, state: ReservationState::Open };
        if nr_slots == 0 {
            reservation.close(ReservationState::Written);
        } else {
            // Narrow before any wait (module doc, step 3).
            record.store(record_from(first_ticket), Ordering::Release);
        }
        Ok(reservation)
    }

    /// Waits until the slot of `ticket` is free for its lap, writes, and
    /// publishes; calls `keep_waiting` between polls and returns false,
    /// having written nothing, once it says stop. The caller holds `ticket`
    /// and its record covers it.
    fn write_ticket(&self, ticket: u64, message: &Message, keep_waiting: &mut impl FnMut() -> bool) -> bool {
        let slot = &self.slots[slot_index(ticket, N)];
        let free = free_mark(ticket, N);
        // Popcorn fig. 5.1: spin until the slot is free. Acquire pairs with
        // the receiver's Release: its copy-out happens before our write.
        while slot.sequence.load(Ordering::Acquire) != free {
            if !keep_waiting() {
                return false;
            }
            spin_wait();
        }
        // SAFETY: the caller holds the ticket, so no other sender writes this
        // slot for this lap; the sequence shows the receiver freed it, and
        // the receiver does not skip it while the caller's record covers it.
        unsafe { slot.write(message) };
        // Release: the bytes are visible before the "full" sequence.
        slot.sequence.store(free.wrapping_add(1), Ordering::Release);
        true
    }

    /// Whether a sender that `is_live` says is live may hold `ticket`: its
    /// record's lowest ticket is at or below it. `is_live` is asked only
    /// about such senders.
    fn live_sender_may_hold(&self, ticket: u64, is_live: &mut impl FnMut(usize) -> bool) -> bool {
        self.sender_records.iter().enumerate().any(|(sender, record)| {
            // Acquire: pairs with the sender's Release record stores (module
            // doc, step 4).
            let lowest = !record.load(Ordering::Acquire);
            lowest <= ticket && is_live(sender)
        })
    }
}

impl<const N: usize, const SENDERS: usize> Default for MpscQueue<N, SENDERS> {
    fn default() -> Self {
        Self::new()
    }
}

/// The receiving end of an [`MpscQueue`]; at most one exists per queue.
pub struct MpscReceiver<'a, const N: usize, const SENDERS: usize> {
    queue: &'a MpscQueue<N, SENDERS>,
    next_ticket: u64,
    nr_padding_skipped: u64,
    nr_abandoned_skipped: u64,
}

impl<const N: usize, const SENDERS: usize> MpscReceiver<'_, N, SENDERS> {
    /// Copies out the next message if it is published; messages arrive in
    /// ticket order. Not validated here: call [`Message::validate`].
    /// Padding (kind 0, filler of a dropped reservation) is skipped. The
    /// position is saved in the shared receiver line after every message,
    /// for [`MpscQueue::reclaim_receiver`].
    pub fn try_recv(&mut self) -> Option<Message> {
        loop {
            let ticket = self.next_ticket;
            let slot = &self.queue.slots[slot_index(ticket, N)];
            let full = free_mark(ticket, N).wrapping_add(1);
            // Acquire: pairs with the sender's Release publish.
            if slot.sequence.load(Ordering::Acquire) != full {
                return None;
            }
            // SAFETY: the slot is published for this ticket; no sender writes
            // it again until we store the next lap's free mark below.
            let message = unsafe { slot.read() };
            // Release: our copy-out happens before the next lap's sender,
            // which Acquire-spins on this value, overwrites the slot.
            slot.sequence.store(full.wrapping_add(1), Ordering::Release);
            self.advance(ticket);
            if message.kind == KIND_PADDING && message.flags == 0 && message.len == 0 {
                self.nr_padding_skipped += 1;
                continue;
            }
            return Some(message);
        }
    }

    /// Moves past `ticket` (just freed or skipped) and saves the position.
    #[inline(always)]
    fn advance(&mut self, ticket: u64) {
        self.next_ticket = ticket.wrapping_add(1);
        // Release: the slot update above happens before a reclaiming
        // receiver's Acquire load of the position.
        self.queue.receiver_line.index.store(self.next_ticket, Ordering::Release);
    }

    /// Skips tickets that were taken but will never be published: while the
    /// next slot is not published, the tail shows its ticket was taken, and
    /// no live sender's record may hold it, frees the slot for its next lap
    /// without a message and moves on. Returns how many it skipped in this
    /// call (also added to [`nr_abandoned_skipped`](Self::nr_abandoned_skipped)).
    ///
    /// `is_live(id)` is asked only about sender ids whose record may hold the
    /// ticket; it returns false for a dead sender. The kernel calls this when
    /// the next message is overdue: it costs a load of the tail line and, if
    /// a ticket is pending, of every sender record. If it skips while a
    /// [`Reassembler`](crate::Reassembler) is collecting, the skipped ticket
    /// was part of that large message: reset the reassembler.
    ///
    /// Never skips a ticket a live sender holds (module doc); a sender that
    /// gave up ([`ChannelError::GaveUp`]) no longer holds its tickets.
    ///
    /// # Safety
    ///
    /// `is_live(id)` returns false only for a sender id whose sends will
    /// never write to this queue again (its core is dead, and its stores
    /// are visible to this core) until [`MpscQueue::reset_sender_record`]
    /// has been called for it. Otherwise the skip races that sender's write
    /// of the slot.
    pub unsafe fn skip_abandoned(&mut self, mut is_live: impl FnMut(usize) -> bool) -> u64 {
        let queue = self.queue;
        let mut nr_skipped = 0;
        loop {
            let ticket = self.next_ticket;
            let slot = &queue.slots[slot_index(ticket, N)];
            let free = free_mark(ticket, N);
            // Relaxed: a cheap early exit; the compare-exchange below decides.
            if slot.sequence.load(Ordering::Relaxed) != free {
                break; // published: `try_recv` takes it
            }
            // Acquire: pairs with the Release RMW that took `ticket` (module
            // doc, step 1), so its sender's W1 is visible to the loads below.
            let tail = queue.tail.load(Ordering::Acquire);
            if tail.wrapping_sub(ticket) as i64 <= 0 {
                break; // not taken yet: the queue is empty
            }
            if queue.live_sender_may_hold(ticket, &mut is_live) {
                break;
            }
            // AcqRel: fails if the ticket was published meanwhile (module doc,
            // step 4); Release so the next lap's sender, which Acquires this
            // value, also sees our earlier copy-outs of this slot.
            if slot.sequence.compare_exchange(free, free.wrapping_add(2), Ordering::AcqRel, Ordering::Relaxed).is_err()
            {
                break;
            }
            self.advance(ticket);
            nr_skipped += 1;
        }
        self.nr_abandoned_skipped += nr_skipped;
        nr_skipped
    }

    /// The ticket this receiver reads next.
    pub fn position(&self) -> u64 {
        self.next_ticket
    }

    /// Padding slots skipped so far by this endpoint (dropped reservations).
    pub fn nr_padding_skipped(&self) -> u64 {
        self.nr_padding_skipped
    }

    /// Tickets skipped so far by [`skip_abandoned`](Self::skip_abandoned)
    /// on this endpoint: messages lost to dead or giving-up senders.
    pub fn nr_abandoned_skipped(&self) -> u64 {
        self.nr_abandoned_skipped
    }
}

impl<const N: usize, const SENDERS: usize> Drop for MpscReceiver<'_, N, SENDERS> {
    fn drop(&mut self) {
        // The position is already saved. Release (in `release`): it is
        // visible to the next receiver, which claims with Acquire.
        self.queue.receiver_line.release();
    }
}

/// What a [`Reservation`] still owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReservationState {
    /// Some tickets are neither written nor abandoned; the record covers them.
    Open,
    /// Every ticket is written; the record is clear.
    Written,
    /// The unwritten tickets were abandoned; the record is clear.
    Abandoned,
}

/// Consecutive tickets of an [`MpscQueue`], taken with one `fetch_add` by
/// one sender id.
///
/// Messages are written in ticket order with [`Reservation::push`] (waits
/// without bound) or [`Reservation::push_or_give_up`] (the kernel's bounded
/// wait). Dropping a reservation with unwritten tickets never waits: it
/// pads those whose slot is free right now (kind 0, skipped by the
/// receiver's `try_recv`) and abandons the rest (skipped by
/// [`MpscReceiver::skip_abandoned`]).
pub struct Reservation<'a, const N: usize, const SENDERS: usize> {
    queue: &'a MpscQueue<N, SENDERS>,
    /// This sender id's record in the queue.
    record: &'a AtomicU64,
    first_ticket: u64,
    nr_slots: u64,
    nr_written: u64,
    state: ReservationState,
}

impl<const N: usize, const SENDERS: usize> Reservation<'_, N, SENDERS> {
    /// The ticket of the first reserved slot (unique per queue; large
    /// messages use it as their message id).
    pub fn first_ticket(&self) -> u64 {
        self.first_ticket
    }

    /// Number of reserved slots.
    pub fn len(&self) -> usize {
        self.nr_slots as usize
    }

    /// Whether the reservation has no slot at all.
    pub fn is_empty(&self) -> bool {
        self.nr_slots == 0
    }

    /// Reserved slots neither written nor abandoned.
    pub fn remaining(&self) -> usize {
        match self.state {
            ReservationState::Open => (self.nr_slots - self.nr_written) as usize,
            ReservationState::Written | ReservationState::Abandoned => 0,
        }
    }

    /// Whether the unwritten tickets were abandoned (by
    /// [`push_or_give_up`](Self::push_or_give_up) giving up).
    pub fn is_abandoned(&self) -> bool {
        self.state == ReservationState::Abandoned
    }

    /// Writes and publishes the next reserved slot, spinning without bound
    /// while the receiver has not freed it (host use; the kernel calls
    /// [`push_or_give_up`](Self::push_or_give_up)). In-order writing is what
    /// lets a reservation longer than the ring make progress. Fails with
    /// [`ChannelError::ReservationExhausted`] once every slot is written, or
    /// [`ChannelError::GaveUp`] if the reservation was abandoned.
    pub fn push(&mut self, message: &Message) -> Result<(), ChannelError> {
        self.push_or_give_up(message, || true)
    }

    /// Like [`push`](Self::push), but while the slot is not free it calls
    /// `keep_waiting()` between polls; when that returns false, abandons the
    /// reservation and fails with [`ChannelError::GaveUp`]. Abandoning clears
    /// the sender record without writing the remaining slots; the receiver
    /// skips them with [`MpscReceiver::skip_abandoned`]. After that the
    /// reservation writes nothing more (every push fails with `GaveUp`) and
    /// its drop does nothing.
    pub fn push_or_give_up(
        &mut self,
        message: &Message,
        mut keep_waiting: impl FnMut() -> bool,
    ) -> Result<(), ChannelError> {
        match self.state {
            ReservationState::Open => {}
            ReservationState::Written => return Err(ChannelError::ReservationExhausted),
            ReservationState::Abandoned => return Err(ChannelError::GaveUp),
        }
        let ticket = self.first_ticket.wrapping_add(self.nr_written);
        if !self.queue.write_ticket(ticket, message, &mut keep_waiting) {
            self.close(ReservationState::Abandoned);
            return Err(ChannelError::GaveUp);
        }
        self.nr_written += 1;
        if self.nr_written == self.nr_slots {
            // Clear the record right after the last publish (module doc,
            // liveness), not when the reservation is dropped.
            self.close(ReservationState::Written);
        }
        Ok(())
    }

    /// Clears the sender record: nothing more is written.
    fn close(&mut self, state: ReservationState) {
        // Release: every publish of ours happens before "no ticket" (module
        // doc, step 4).
        self.record.store(NO_TICKET, Ordering::Release);
        self.state = state;
    }
}

impl<const N: usize, const SENDERS: usize> Drop for Reservation<'_, N, SENDERS> {
    fn drop(&mut self) {
        if self.state != ReservationState::Open {
            return;
        }
        // Pad in order while slots are free right now; the first busy slot
        // means the receiver is behind, and every later slot is busy too.
        while self.nr_written < self.nr_slots {
            let ticket = self.first_ticket.wrapping_add(self.nr_written);
            if !self.queue.write_ticket(ticket, &Message::PADDING, &mut || false) {
                break;
            }
            self.nr_written += 1;
        }
        let state =
            if self.nr_written == self.nr_slots { ReservationState::Written } else { ReservationState::Abandoned };
        self.close(state);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use std::thread;
    use std::time::Duration;
    use std::vec::Vec;

    fn from_sender(sender: u16, number: u32) -> Message {
        let mut bytes = [0u8; 12];
        bytes[..4].copy_from_slice(&number.to_le_bytes());
        bytes[4..8].copy_from_slice(&number.wrapping_mul(2_654_435_761).to_le_bytes());
        bytes[8..].copy_from_slice(&u32::from(sender).to_le_bytes());
        Message::new(100 + sender, &bytes).unwrap()
    }

    fn decode(message: &Message) -> (u16, u32) {
        message.validate().unwrap();
        let payload = message.payload();
        assert_eq!(payload.len(), 12);
        let number = u32::from_le_bytes(payload[..4].try_into().unwrap());
        let check = u32::from_le_bytes(payload[4..8].try_into().unwrap());
        let sender = u32::from_le_bytes(payload[8..].try_into().unwrap()) as u16;
        assert_eq!(check, number.wrapping_mul(2_654_435_761), "torn message");
        assert_eq!(message.kind, 100 + sender);
        (sender, number)
    }

    fn drain<const N: usize, const S: usize>(receiver: &mut MpscReceiver<'_, N, S>) -> Vec<(u16, u32)> {
        core::iter::from_fn(|| receiver.try_recv()).map(|message| decode(&message)).collect()
    }

    /// A sender that "dies" holding a ticket: it reserves and never writes
    /// or clears its record (the value is forgotten, so no drop runs).
    fn die_holding<const N: usize, const S: usize>(queue: &MpscQueue<N, S>, sender: usize, nr_slots: usize) {
        core::mem::forget(queue.reserve(sender, nr_slots).unwrap());
    }

    #[test]
    fn try_send_reports_full_without_taking_a_ticket() {
        let queue = MpscQueue::<4, 2>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        for number in 0..4 {
            queue.try_send(0, &from_sender(0, number)).unwrap();
        }
        assert_eq!(queue.try_send(0, &from_sender(0, 4)), Err(ChannelError::Full));
        assert_eq!(queue.try_send(1, &from_sender(0, 4)), Err(ChannelError::Full));
        assert_eq!(receiver.try_recv().map(|m| decode(&m)), Some((0, 0)));
        queue.try_send(0, &from_sender(0, 4)).unwrap();
        for number in 1..5 {
            assert_eq!(receiver.try_recv().map(|m| decode(&m)), Some((0, number)));
        }
        assert_eq!(receiver.try_recv(), None);
        assert!(matches!(queue.receiver(), Err(ChannelError::EndpointTaken)));
    }

    #[test]
    fn sender_ids_are_checked() {
        let queue = MpscQueue::<4, 2>::new_boxed();
        let message = from_sender(0, 0);
        assert_eq!(queue.nr_senders(), 2);
        assert_eq!(queue.try_send(2, &message), Err(ChannelError::NoSuchSender));
        assert_eq!(queue.send_spin(7, &message), Err(ChannelError::NoSuchSender));
        assert!(matches!(queue.reserve(2, 1), Err(ChannelError::NoSuchSender)));
        // SAFETY: sender id 2 does not exist; nothing is in use.
        assert_eq!(unsafe { queue.reset_sender_record(2) }, Err(ChannelError::NoSuchSender));
        // A second use of an id with a reservation open is refused.
        let reservation = queue.reserve(1, 2).unwrap();
        assert_eq!(queue.try_send(1, &message), Err(ChannelError::EndpointTaken));
        assert_eq!(queue.send_spin(1, &message), Err(ChannelError::EndpointTaken));
        assert!(matches!(queue.reserve(1, 1), Err(ChannelError::EndpointTaken)));
        queue.try_send(0, &message).unwrap();
        drop(reservation);
        queue.try_send(1, &message).unwrap();
        // Nothing was taken by the refused calls: 2 padding, then 2 messages.
        let mut receiver = queue.receiver().unwrap();
        assert_eq!(drain(&mut receiver), [(0, 0), (0, 0)]);
        assert_eq!(receiver.nr_padding_skipped(), 2);
        assert_eq!(receiver.position(), 4);
    }

    #[test]
    fn dropped_reservation_is_padded_and_skipped() {
        let queue = MpscQueue::<8, 4>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        {
            let mut reservation = queue.reserve(1, 3).unwrap();
            assert_eq!(reservation.first_ticket(), 0);
            reservation.push(&from_sender(1, 0)).unwrap();
        }
        queue.send_spin(2, &from_sender(2, 0)).unwrap();
        let mut reservation = queue.reserve(3, 1).unwrap();
        reservation.push(&from_sender(3, 0)).unwrap();
        assert_eq!(reservation.push(&from_sender(3, 1)), Err(ChannelError::ReservationExhausted));
        // Written out: the id is free again before the drop.
        queue.try_send(3, &from_sender(3, 1)).unwrap();
        drop(reservation);
        assert_eq!(drain(&mut receiver), [(1, 0), (2, 0), (3, 0), (3, 1)]);
        assert_eq!(receiver.nr_padding_skipped(), 2);
        // SAFETY: every sender is idle; nothing to skip.
        assert_eq!(unsafe { receiver.skip_abandoned(|_| true) }, 0);
    }

    #[test]
    fn dropped_reservation_never_waits_and_abandons_what_is_not_free() {
        let queue = MpscQueue::<2, 2>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        // Five tickets on two slots: 0 and 1 are written, 2 and 3 are busy
        // (the receiver has not freed their slots), the drop abandons 2..5.
        let mut reservation = queue.reserve(0, 5).unwrap();
        reservation.push(&from_sender(0, 0)).unwrap();
        reservation.push(&from_sender(0, 1)).unwrap();
        drop(reservation);
        queue.try_send(1, &from_sender(1, 0)).unwrap_err();
        assert_eq!(drain(&mut receiver), [(0, 0), (0, 1)]);
        // Sender 0 is live but holds nothing any more.
        // SAFETY: no sender is dead; a live one that holds nothing is fine.
        assert_eq!(unsafe { receiver.skip_abandoned(|_| true) }, 3);
        assert_eq!(receiver.nr_abandoned_skipped(), 3);
        queue.try_send(1, &from_sender(1, 0)).unwrap();
        queue.send_spin(0, &from_sender(0, 2)).unwrap();
        assert_eq!(drain(&mut receiver), [(1, 0), (0, 2)]);
    }

    #[test]
    fn dead_ticket_holder_is_skipped_and_counted() {
        let queue = MpscQueue::<4, 3>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        queue.send_spin(0, &from_sender(0, 0)).unwrap();
        die_holding(&queue, 1, 1); // ticket 1, never published
        queue.send_spin(0, &from_sender(0, 1)).unwrap();
        queue.try_send(2, &from_sender(2, 0)).unwrap();
        assert_eq!(drain(&mut receiver), [(0, 0)]);
        // While sender 1 counts as live, its ticket is never skipped.
        // SAFETY: every sender is reported live.
        assert_eq!(unsafe { receiver.skip_abandoned(|_| true) }, 0);
        assert_eq!(receiver.try_recv(), None);
        // Once it is dead, it is skipped and counted; `is_live` is asked only
        // about the sender whose record may hold the ticket.
        let mut asked = Vec::new();
        // SAFETY: sender 1 never writes again (it was forgotten).
        let nr_skipped = unsafe {
            receiver.skip_abandoned(|sender| {
                asked.push(sender);
                sender != 1
            })
        };
        assert_eq!(nr_skipped, 1);
        assert_eq!(asked, [1]);
        assert_eq!(drain(&mut receiver), [(0, 1), (2, 0)]);
        assert_eq!(receiver.nr_abandoned_skipped(), 1);
        // Nothing taken, nothing to skip: an empty queue is left alone.
        // SAFETY: as above.
        assert_eq!(unsafe { receiver.skip_abandoned(|sender| sender != 1) }, 0);
        // The restarted core clears its dead incarnation's record, then
        // sends again under the same id.
        assert_eq!(queue.try_send(1, &from_sender(1, 0)), Err(ChannelError::EndpointTaken));
        // SAFETY: no endpoint of sender 1 is in use.
        unsafe { queue.reset_sender_record(1) }.unwrap();
        queue.try_send(1, &from_sender(1, 0)).unwrap();
        assert_eq!(drain(&mut receiver), [(1, 0)]);
        assert_eq!(receiver.position(), 5);
    }

    #[test]
    fn dead_holder_of_a_long_reservation_is_skipped_across_laps() {
        let queue = MpscQueue::<2, 2>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        die_holding(&queue, 1, 5); // tickets 0..5 over two slots
        let queue = &*queue;
        thread::scope(|scope| {
            // Sender 0's ticket 5 waits for slot 1 until the skips free it.
            scope.spawn(|| queue.send_spin(0, &from_sender(0, 0)).unwrap());
            let mut nr_skipped = 0;
            let message = loop {
                // SAFETY: sender 1 never writes again.
                nr_skipped += unsafe { receiver.skip_abandoned(|sender| sender == 0) };
                if let Some(message) = receiver.try_recv() {
                    break message;
                }
                thread::yield_now();
            };
            assert_eq!(decode(&message), (0, 0));
            assert_eq!(nr_skipped, 5);
        });
    }

    #[test]
    fn abandoned_reservation_is_skipped_and_later_messages_arrive_in_order() {
        let queue = MpscQueue::<4, 3>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        queue.send_spin(0, &from_sender(0, 0)).unwrap();
        // Sender 1 reserves 6 chunks through 4 slots; it writes 3, then the
        // fourth slot (ticket 4, slot 0) is not free and it gives up.
        let mut reservation = queue.reserve(1, 6).unwrap();
        for number in 0..3 {
            reservation.push_or_give_up(&from_sender(1, number), || false).unwrap();
        }
        let mut nr_polls = 0;
        let give_up_after_three = || {
            nr_polls += 1;
            nr_polls < 3
        };
        assert_eq!(reservation.push_or_give_up(&from_sender(1, 3), give_up_after_three), Err(ChannelError::GaveUp));
        assert_eq!(nr_polls, 3);
        assert!(reservation.is_abandoned());
        assert_eq!(reservation.remaining(), 0);
        assert_eq!(reservation.push(&from_sender(1, 3)), Err(ChannelError::GaveUp));
        // Others keep sending; their messages queue up behind the gap.
        let sender_two = thread::scope(|scope| {
            let handle = scope.spawn(|| {
                queue.send_spin(2, &from_sender(2, 0)).unwrap();
                queue.send_spin(2, &from_sender(2, 1)).unwrap();
            });
            let mut received = Vec::new();
            while received.len() < 6 {
                // SAFETY: every sender is live: only abandoned tickets go.
                unsafe { receiver.skip_abandoned(|_| true) };
                match receiver.try_recv() {
                    Some(message) => received.push(decode(&message)),
                    None => thread::yield_now(),
                }
            }
            handle.join().unwrap();
            received
        });
        drop(reservation); // does nothing: abandoned
        assert_eq!(sender_two, [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]);
        assert_eq!(receiver.nr_abandoned_skipped(), 3);
        assert_eq!(receiver.nr_padding_skipped(), 0);
        assert_eq!(receiver.try_recv(), None);
    }

    #[test]
    fn a_live_slow_senders_ticket_is_never_skipped() {
        const ROUNDS: u32 = 200;
        let queue = MpscQueue::<4, 2>::new_boxed();
        let queue = &*queue;
        thread::scope(|scope| {
            // Sender 1 reserves, then dawdles before each push, so the
            // receiver often sees its ticket taken and unpublished.
            scope.spawn(|| {
                for number in 0..ROUNDS {
                    let mut reservation = queue.reserve(1, 2).unwrap();
                    thread::sleep(Duration::from_micros(u64::from(number % 7) * 20));
                    reservation.push(&from_sender(1, 2 * number)).unwrap();
                    thread::yield_now();
                    reservation.push(&from_sender(1, 2 * number + 1)).unwrap();
                }
            });
            // Sender 0 interleaves plain messages.
            scope.spawn(|| {
                for number in 0..ROUNDS {
                    queue.send_spin(0, &from_sender(0, number)).unwrap();
                    thread::yield_now();
                }
            });
            let mut receiver = queue.receiver().unwrap();
            let mut next = [0u32; 2];
            let mut nr_skip_calls = 0u64;
            while next != [ROUNDS, 2 * ROUNDS] {
                // SAFETY: both senders are live and reported live.
                assert_eq!(unsafe { receiver.skip_abandoned(|_| true) }, 0, "skipped a live ticket");
                nr_skip_calls += 1;
                if let Some(message) = receiver.try_recv() {
                    let (sender, number) = decode(&message);
                    assert_eq!(number, next[usize::from(sender)], "lost, duplicated or reordered");
                    next[usize::from(sender)] += 1;
                }
            }
            assert!(nr_skip_calls > u64::from(ROUNDS));
            assert_eq!(receiver.nr_abandoned_skipped(), 0);
        });
    }

    #[test]
    fn reclaimed_receiver_resumes_with_nothing_lost_or_duplicated() {
        let queue = MpscQueue::<4, 2>::new_boxed();
        let mut received = Vec::new();
        let mut dead = queue.receiver().unwrap();
        for number in 0..3 {
            queue.send_spin(0, &from_sender(0, number)).unwrap();
        }
        received.push(decode(&dead.try_recv().unwrap()));
        received.push(decode(&dead.try_recv().unwrap()));
        // The receiver's core faults: no drop runs, the claim stays.
        core::mem::forget(dead);
        assert!(matches!(queue.receiver(), Err(ChannelError::EndpointTaken)));
        for number in 3..6 {
            queue.send_spin(0, &from_sender(0, number)).unwrap();
        }
        // SAFETY: the first receiver is never used again.
        let mut restarted = unsafe { queue.reclaim_receiver() };
        assert_eq!(restarted.position(), 2);
        received.extend(drain(&mut restarted));
        assert_eq!(received, (0..6).map(|number| (0, number)).collect::<Vec<_>>());
        // Dropped normally, the next one resumes too.
        drop(restarted);
        queue.send_spin(1, &from_sender(1, 0)).unwrap();
        assert_eq!(drain(&mut queue.receiver().unwrap()), [(1, 0)]);
    }

    #[test]
    fn reclaimed_receiver_passes_a_slot_freed_before_its_position_was_saved() {
        let queue = MpscQueue::<4, 2>::new_boxed();
        for number in 0..2 {
            queue.send_spin(0, &from_sender(0, number)).unwrap();
        }
        let mut dead = queue.receiver().unwrap();
        assert_eq!(dead.try_recv().map(|m| decode(&m)), Some((0, 0)));
        core::mem::forget(dead);
        // Fake a death between freeing ticket 1's slot and saving position 2.
        queue.slots[1].sequence.store(2, Ordering::Relaxed);
        // SAFETY: the first receiver is never used again.
        let mut restarted = unsafe { queue.reclaim_receiver() };
        assert_eq!(restarted.position(), 2);
        queue.send_spin(0, &from_sender(0, 2)).unwrap();
        assert_eq!(drain(&mut restarted), [(0, 2)]);
    }

    #[test]
    fn reservation_longer_than_ring_with_concurrent_receiver() {
        let queue = MpscQueue::<4, 8>::new_boxed();
        let queue = &*queue;
        thread::scope(|scope| {
            scope.spawn(|| {
                let mut reservation = queue.reserve(7, 1000).unwrap();
                for number in 0..1000 {
                    reservation.push(&from_sender(7, number)).unwrap();
                }
            });
            let mut receiver = queue.receiver().unwrap();
            for number in 0..1000 {
                let message = loop {
                    if let Some(message) = receiver.try_recv() {
                        break message;
                    }
                    thread::yield_now();
                };
                assert_eq!(decode(&message), (7, number));
            }
        });
    }

    #[test]
    fn many_senders_hundred_thousand_messages_per_sender_order() {
        const SENDERS: u16 = 3;
        const PER_SENDER: u32 = 40_000;
        let queue = MpscQueue::<64, 4>::new_boxed();
        let queue = &*queue;
        thread::scope(|scope| {
            for sender in 0..SENDERS {
                scope.spawn(move || {
                    for number in 0..PER_SENDER {
                        // Mix both send paths.
                        if number % 3 == 0 {
                            queue.send_spin(sender.into(), &from_sender(sender, number)).unwrap();
                        } else {
                            while queue.try_send(sender.into(), &from_sender(sender, number)).is_err() {
                                thread::yield_now();
                            }
                        }
                    }
                });
            }
            let mut receiver = queue.receiver().unwrap();
            let mut next_number = [0u32; SENDERS as usize];
            let mut sum = 0u64;
            for _ in 0..u64::from(SENDERS) * u64::from(PER_SENDER) {
                let message = loop {
                    if let Some(message) = receiver.try_recv() {
                        break message;
                    }
                    // SAFETY: every sender is live and reported live.
                    assert_eq!(unsafe { receiver.skip_abandoned(|_| true) }, 0);
                    thread::yield_now();
                };
                let (sender, number) = decode(&message);
                assert_eq!(number, next_number[usize::from(sender)], "lost, duplicated or reordered");
                next_number[usize::from(sender)] += 1;
                sum += u64::from(number);
            }
            assert_eq!(next_number, [PER_SENDER; SENDERS as usize]);
            let per_sender_sum = u64::from(PER_SENDER) * u64::from(PER_SENDER - 1) / 2;
            assert_eq!(sum, per_sender_sum * u64::from(SENDERS));
        });
        let mut receiver = queue.receiver().unwrap();
        assert_eq!(receiver.try_recv(), None);
        assert_eq!(receiver.nr_padding_skipped(), 0);
    }
}
