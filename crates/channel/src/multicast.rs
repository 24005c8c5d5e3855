//! Popcorn multicast group ring (fig. 5.4) with per-slot reader sets.
//!
//! The sender writes each message once; every member reads it with its own
//! cursor, and the last member to read a slot frees it. Unlike Popcorn,
//! members join and leave while messages flow, and the group can be closed
//! and reopened at run time.
//!
//! # Per-slot readers
//!
//! Popcorn keeps a per-slot `read_counter`. Here each slot has a reader set:
//! the bitmask of members that still have to read it, whose population count
//! is Popcorn's counter. A member clears its bit after copying the message
//! out; the member whose clear empties the set frees the slot (exactly once,
//! since `fetch_and` returns each bit to one caller only). The mask rather
//! than a bare count lets a member tell whether a slot counted it, which is
//! what makes join and leave race-free: a member reads exactly the messages
//! whose reader set names it.
//!
//! Slot sequence for ticket `t`, lap `L = t / N` (wrapping u32): `2L` = free
//! for lap `L`, `2L + 1` = published; the last reader adds one, giving
//! `2L + 2` = free for lap `L + 1` (an add, not a store, so a double free
//! would show up as a corrupt sequence in the tests). Zero = free for lap 0.
//!
//! # The tail word and join/leave/close
//!
//! `tail` holds the next ticket plus two flag bits, BUSY and CLOSED. A
//! sender takes BUSY with a compare-exchange (this serialises senders and
//! refuses to start once CLOSED is set), snapshots the member set with an
//! atomic read-modify-write, writes and publishes the slot, then clears BUSY
//! and advances the ticket with one `fetch_add`.
//!
//! * Join reads `tail` before setting its member bit. Any ticket below the
//!   one it read had its member snapshot taken before that sender's release
//!   of `tail`, hence before the join's bit-set in the member word's total
//!   order: no earlier message names the joiner. Later messages may or may
//!   not name it; it reads those that do and skips those that do not.
//! * Leave clears its member bit, then waits until `tail` is not BUSY. A
//!   snapshot that still named the leaver precedes the clear in the member
//!   word's order; the clear synchronises with that read-modify-write, so
//!   the BUSY set before it is visible, and the leaver waits for that send
//!   to finish. The tail it then reads therefore covers every message that
//!   names it, and it clears its bit in each of them (freeing the slots it
//!   was the last reader of). No slot keeps a departed member's bit, so the
//!   sender never waits forever.
//! * Close sets CLOSED; a send already holding BUSY completes, later sends
//!   fail. A member that finds no message at its cursor while `tail` is
//!   CLOSED and not BUSY has read everything: it gets `Closed`.
//!
//! # Dead senders and dead members
//!
//! A sender puts its id (6 bits, below 64) into the tail next to BUSY, so
//! anyone waiting can tell who holds it ([`Multicast::busy_holder`]).
//! `try_send` never waits on BUSY for long: after a few polls it fails with
//! `Busy` and the caller retries, checking whether the holder is alive.
//!
//! * [`Multicast::break_busy`] recovers a tail held by a dead sender with a
//!   compare-exchange (so it does nothing if the tail moved): if the holder
//!   had published its slot for the current ticket (the slot's sequence is
//!   past "free for this lap"), the tail advances past it as the holder's
//!   release would have; otherwise BUSY is just cleared and the next sender
//!   takes the same ticket and rewrites the slot, whose half-written bytes
//!   no member ever read (the sequence never said published).
//! * [`MulticastReader::leave_with`] and [`Multicast::evict`] break a dead
//!   holder's BUSY while they wait for it; plain leave (`Drop`) waits for
//!   any holder, so it may wait forever on a dead one (host use).
//! * A dead member never reads, so the slots naming it are never freed and
//!   the ring fills. [`Multicast::evict`] does its leave on its behalf, from
//!   the cursor it saved after its last message; re-clearing a ticket below
//!   that cursor is harmless (its bit is gone, or the slot moved on).

use crate::message::{lap, slot_index, CacheLine, Slot};
use crate::sync::{spin_wait, AtomicU32, AtomicU64, Ordering};
use crate::{ChannelError, Message};

/// A sender holds the tail (set, and the ticket not yet advanced).
const BUSY: u64 = 1 << 63;
/// The group is closed: no new sends or joins.
const CLOSED: u64 = 1 << 62;
/// Lowest bit of the BUSY holder's sender id (bits 56..62).
const HOLDER_SHIFT: u32 = 56;
/// The BUSY holder's sender id bits (meaningful only with BUSY).
const HOLDER_MASK: u64 = 0x3f << HOLDER_SHIFT;
/// The ticket bits of the tail word (2^56 messages per group before they
/// would run into the holder bits).
const TICKET_MASK: u64 = (1 << HOLDER_SHIFT) - 1;
/// Sender ids fit in the holder bits.
const MAX_SENDERS: usize = 64;
/// Polls of a BUSY tail before `try_send` gives up with `Busy`: a live
/// holder keeps it for one slot write.
const BUSY_POLLS: usize = 32;

/// A multicast group ring of `N` slots (a power of two) for up to
/// `MAX_MEMBERS` readers (1 to 64).
///
/// `#[repr(C)]`, `size_of` = `(2 + MAX_MEMBERS + 2 * N) * 64` bytes,
/// aligned to 64; all-zero memory is a valid, empty, open group with no
/// members ([`Multicast::from_zeroed`]).
///
/// Senders call [`Multicast::try_send`] on the shared group with their
/// sender id (below 64; the kernel uses its core id); any core may send,
/// and concurrent senders are serialised by the tail's BUSY bit (held for
/// one slot write). Members take a [`MulticastReader`] with
/// [`Multicast::join`]; dropping it leaves the group.
#[repr(C)]
pub struct Multicast<const N: usize, const MAX_MEMBERS: usize> {
    /// Next ticket | BUSY | CLOSED.
    tail: CacheLine<AtomicU64>,
    /// Bit `m` set: member `m` is in the group and counted by new messages.
    members: CacheLine<AtomicU64>,
    /// Per member: claim word and read cursor, each on its own line so
    /// that members do not share lines, yet visible to everyone.
    member_lines: [CacheLine<MemberLine>; MAX_MEMBERS],
    /// Per slot: the members that still have to read it.
    pending_readers: [CacheLine<AtomicU64>; N],
    slots: [Slot; N],
}

/// One member's shared state.
#[repr(C)]
struct MemberLine {
    /// 0 = free; 1 = a reader holds this member id (from before its bit is
    /// set until its leave has finished clearing its bit everywhere).
    claimed: AtomicU32,
    /// Ticket of the next message this member will look at, saved after
    /// every receive (for [`Multicast::evict`]).
    cursor: AtomicU64,
}

// SAFETY: only atomics and `Slot`s; zero is: ticket 0, open, not busy, no
// members, no claimed member ids, no pending readers, every slot free for
// lap 0.
#[cfg(not(loom))]
unsafe impl<const N: usize, const MAX_MEMBERS: usize> crate::message::ZeroIsEmpty for Multicast<N, MAX_MEMBERS> {}

/// Sequence value meaning "free for the lap of `ticket`".
#[inline(always)]
fn free_mark(ticket: u64, capacity: usize) -> u32 {
    lap(ticket, capacity).wrapping_mul(2)
}

impl<const N: usize, const MAX_MEMBERS: usize> Multicast<N, MAX_MEMBERS> {
    /// Compile-time check of the geometry, evaluated by every constructor.
    const GEOMETRY_OK: () = assert!(
        N.is_power_of_two() && N <= 1 << 30 && MAX_MEMBERS >= 1 && MAX_MEMBERS <= 64,
        "Multicast needs a power-of-two capacity and 1 to 64 members"
    );

    const_unless_loom! {
        /// An empty open group by value (`const fn` outside loom).
        pub fn new() -> Self {
            let () = Self::GEOMETRY_OK;
            Self {
                tail: CacheLine(AtomicU64::new(0)),
                members: CacheLine(AtomicU64::new(0)),
                member_lines: array_of![
                    CacheLine(MemberLine {
                        claimed: AtomicU32::new(0),
                        cursor: AtomicU64::new(0),
                    });
                    MAX_MEMBERS
                ],
                pending_readers: array_of![CacheLine(AtomicU64::new(0)); N],
                slots: array_of![Slot::new(); N],
            }
        }
    }

    ring_constructors!("group", GEOMETRY_OK);

    /// Joins as member `member` (below `MAX_MEMBERS`). The reader sees only
    /// messages sent after the join; which of the messages in flight at the
    /// moment of the join it gets is decided consistently by the reader sets.
    pub fn join(&self, member: usize) -> Result<MulticastReader<'_, N, MAX_MEMBERS>, ChannelError> {
        let line = self.member_lines.get(member).ok_or(ChannelError::NotMember)?;
        // Acquire: the previous holder's leave (Release) has finished.
        line.claimed
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .map_err(|_| ChannelError::AlreadyMember)?;
        // Read the tail BEFORE setting our bit (see the module doc). Acquire:
        // pairs with the senders' Release of the tail, so every member
        // snapshot of an earlier ticket happens before our bit-set below.
        let tail = self.tail.load(Ordering::Acquire);
        if tail & CLOSED != 0 {
            line.claimed.store(0, Ordering::Release);
            return Err(ChannelError::Closed);
        }
        let start = tail & TICKET_MASK;
        line.cursor.store(start, Ordering::Relaxed);
        // AcqRel read-modify-write: ordered in the member word against the
        // senders' snapshots (themselves read-modify-writes).
        let previous = self.members.fetch_or(1 << member, Ordering::AcqRel);
        debug_assert_eq!(previous & (1 << member), 0, "claimed id had its bit set");
        Ok(MulticastReader { group: self, member, cursor: start })
    }

    /// Joins under the lowest free member id, or fails with
    /// [`ChannelError::GroupFull`].
    pub fn join_any(&self) -> Result<MulticastReader<'_, N, MAX_MEMBERS>, ChannelError> {
        for member in 0..MAX_MEMBERS {
            match self.join(member) {
                Err(ChannelError::AlreadyMember) => continue,
                result => return result,
            }
        }
        Err(ChannelError::GroupFull)
    }

    /// Closes the group: later sends and joins fail with
    /// [`ChannelError::Closed`]; members read what was sent before, then get
    /// `Closed`. A send in progress at the moment of the close completes.
    pub fn close(&self) {
        self.tail.fetch_or(CLOSED, Ordering::AcqRel);
    }

    /// Opens a closed group again; members that saw `Closed` simply go on
    /// reading. (To recreate a group instead, close it, let every member
    /// leave, and zero its memory again: `from_zeroed` takes zero as a new,
    /// open group.)
    pub fn reopen(&self) {
        self.tail.fetch_and(!CLOSED, Ordering::AcqRel);
    }

    /// Whether the group is closed.
    pub fn is_closed(&self) -> bool {
        self.tail.load(Ordering::Acquire) & CLOSED != 0
    }

    /// The current member set (bit `m` = member `m`).
    pub fn members(&self) -> u64 {
        self.members.load(Ordering::Acquire)
    }

    /// A member's read cursor (the ticket it reads next), if the id is held.
    pub fn member_cursor(&self, member: usize) -> Option<u64> {
        let line = self.member_lines.get(member)?;
        if line.claimed.load(Ordering::Acquire) == 0 {
            return None;
        }
        Some(line.cursor.load(Ordering::Relaxed))
    }

    /// Slots some member still has to read: 0 once every member has caught
    /// up (the leak check of a quiescent group).
    pub fn nr_slots_in_use(&self) -> usize {
        self.pending_readers.iter().filter(|readers| readers.load(Ordering::Acquire) != 0).count()
    }

    /// Sends `message` once to every current member, as sender `sender`
    /// (below 64). Fails with [`ChannelError::Full`] if the slot still has
    /// readers from the previous lap (nothing is overwritten),
    /// [`ChannelError::Closed`], [`ChannelError::Busy`] if another sender
    /// held the tail for a few polls (retry; see [`busy_holder`](Self::busy_holder)),
    /// or [`ChannelError::NoSuchSender`]. A send to a group without members
    /// succeeds and is read by no one.
    pub fn try_send(&self, sender: usize, message: &Message) -> Result<(), ChannelError> {
        if sender >= MAX_SENDERS {
            return Err(ChannelError::NoSuchSender);
        }
        let ticket = self.claim_tail(sender)?;
        // The member snapshot is a read-modify-write (of nothing) rather than
        // a load, so it is totally ordered with join's and leave's updates of
        // the member word and synchronises with them (module doc).
        let readers = self.members.fetch_or(0, Ordering::AcqRel);
        if readers == 0 {
            self.release_tail(sender, false);
            return Ok(());
        }
        let index = slot_index(ticket, N);
        let slot = &self.slots[index];
        let free = free_mark(ticket, N);
        // Acquire: pairs with the last reader's Release that freed the slot
        // (all readers' copy-outs happen before it through the reader set's
        // read-modify-writes).
        if slot.sequence.load(Ordering::Acquire) != free {
            self.release_tail(sender, false);
            return Err(ChannelError::Full);
        }
        // SAFETY: we hold BUSY, so no other sender writes now, and the slot is
        // free for our lap, so no member reads it.
        unsafe { slot.write(message) };
        // Release: a member that reads this set from a later lap sees the
        // sequence advanced (see `MulticastReader::try_recv`).
        self.pending_readers[index].store(readers, Ordering::Release);
        // Release: message and reader set are visible before "published".
        slot.sequence.store(free.wrapping_add(1), Ordering::Release);
        self.release_tail(sender, true);
        Ok(())
    }

    /// Sends, spinning while the oldest slot still has readers or another
    /// sender holds the tail (without bound: a dead holder means forever;
    /// the kernel calls [`try_send`](Self::try_send)). Fails with
    /// [`ChannelError::Closed`] or [`ChannelError::NoSuchSender`].
    pub fn send_spin(&self, sender: usize, message: &Message) -> Result<(), ChannelError> {
        loop {
            match self.try_send(sender, message) {
                Err(ChannelError::Full | ChannelError::Busy) => spin_wait(),
                result => return result,
            }
        }
    }

    /// The sender id holding the tail (BUSY) right now, if any.
    pub fn busy_holder(&self) -> Option<usize> {
        let tail = self.tail.load(Ordering::Acquire);
        (tail & BUSY != 0).then_some(((tail & HOLDER_MASK) >> HOLDER_SHIFT) as usize)
    }

    /// Recovers the tail if `holder` holds it (BUSY): advances it past the
    /// current ticket if `holder` had published that ticket's slot, else just
    /// clears BUSY (the half-written slot was never published, so no member
    /// read it; the next sender rewrites it). Returns whether it did; false
    /// if the tail is not held by `holder` (already released, or recovered
    /// by someone else). A compare-exchange: it never undoes a newer tail.
    ///
    /// # Safety
    ///
    /// `holder` never runs again (its core is dead), and its stores to the
    /// group are visible to this core.
    pub unsafe fn break_busy(&self, holder: usize) -> bool {
        if holder >= MAX_SENDERS {
            return false;
        }
        let holder_bits = BUSY | ((holder as u64) << HOLDER_SHIFT);
        // Acquire: pairs with the senders' Release of the tail.
        let mut tail = self.tail.load(Ordering::Acquire);
        loop {
            if tail & (BUSY | HOLDER_MASK) != holder_bits {
                return false;
            }
            let ticket = tail & TICKET_MASK;
            let slot = &self.slots[slot_index(ticket, N)];
            // Acquire: the holder's message and reader set are visible if it
            // published; then the advanced tail (Release below) passes them
            // on to joiners, leavers and closing readers, as its own release
            // would have. Published (and maybe already freed) = past free.
            let published = (slot.sequence.load(Ordering::Acquire).wrapping_sub(free_mark(ticket, N)) as i32) > 0;
            let next_ticket = if published { ticket.wrapping_add(1) & TICKET_MASK } else { ticket };
            let released = (tail & CLOSED) | next_ticket;
            match self.tail.compare_exchange(tail, released, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                // Only CLOSED can change while a dead holder holds BUSY.
                Err(current) => tail = current,
            }
        }
    }

    /// Does what [`MulticastReader::leave`] does, on behalf of a dead member:
    /// clears its member bit, waits out a send in progress (breaking the
    /// BUSY of a holder `is_live` says is dead), clears its bit in every slot
    /// from its saved cursor to the tail (freeing the slots it was the last
    /// reader of), and releases its member id. Returns how many messages
    /// named the member that it never read (the caller counts them lost).
    /// Fails with [`ChannelError::NotMember`] if no reader holds that member
    /// id.
    ///
    /// # Safety
    ///
    /// 1. The member's reader is never used again (its core is dead), and
    ///    its stores to the group are visible to this core;
    /// 2. `is_live(id)` returns false only for a sender that never runs
    ///    again (as for [`break_busy`](Self::break_busy)).
    pub unsafe fn evict(&self, member: usize, is_live: impl FnMut(usize) -> bool) -> Result<u64, ChannelError> {
        let line = self.member_lines.get(member).ok_or(ChannelError::NotMember)?;
        // Acquire: pairs with the member's Release claim and cursor stores.
        if line.claimed.load(Ordering::Acquire) == 0 {
            return Err(ChannelError::NotMember);
        }
        let cursor = line.cursor.load(Ordering::Acquire);
        // SAFETY: (1) the member never reads or leaves again, so this is its
        // only leave; (2) is the caller's promise about `is_live`.
        Ok(unsafe { self.remove_member(member, cursor, Some(is_live)) })
    }

    /// Leave, for a live or dead member: clears `member`'s bit, waits until
    /// the tail is not BUSY (breaking a dead holder's BUSY if `is_live` is
    /// given), clears the bit from every slot from `cursor` to the tail and
    /// releases the member id (module doc). Returns how many messages named
    /// `member` and were not read.
    ///
    /// # Safety
    ///
    /// 1. Nothing else reads or leaves as `member` during or after this;
    /// 2. `is_live`, if given, returns false only for a sender that never
    ///    runs again.
    unsafe fn remove_member(&self, member: usize, cursor: u64, mut is_live: Option<impl FnMut(usize) -> bool>) -> u64 {
        let bit = 1u64 << member;
        // AcqRel: ordered against the senders' snapshots in the member word
        // (module doc: a snapshot still naming us synchronises with this).
        self.members.fetch_and(!bit, Ordering::AcqRel);
        // Wait out a send that may have counted us; the tail we then read
        // covers every message that names us.
        let end = loop {
            let tail = self.tail.load(Ordering::Acquire);
            if tail & BUSY == 0 {
                break tail & TICKET_MASK;
            }
            if let Some(is_live) = is_live.as_mut() {
                let holder = ((tail & HOLDER_MASK) >> HOLDER_SHIFT) as usize;
                if !is_live(holder) {
                    // SAFETY: the caller promises (2) that `holder` never
                    // runs again.
                    unsafe { self.break_busy(holder) };
                    continue;
                }
            }
            spin_wait();
        };
        // Only the last N tickets can still be in slots: an older ticket's
        // slot has been reused, which required every reader to clear it.
        let start = cursor.max(end.saturating_sub(N as u64));
        let unread = (start..end).filter(|ticket| self.release_reader(*ticket, bit)).count() as u64;
        // Release: the member id is reusable only after our bit is gone.
        self.member_lines[member].claimed.store(0, Ordering::Release);
        unread
    }

    /// Sets BUSY with our sender id on an open, not-busy tail and returns
    /// the ticket; `Busy` after [`BUSY_POLLS`] polls of a busy tail.
    fn claim_tail(&self, sender: usize) -> Result<u64, ChannelError> {
        let holder_bits = BUSY | ((sender as u64) << HOLDER_SHIFT);
        let mut nr_busy_polls = 0;
        loop {
            let tail = self.tail.load(Ordering::Relaxed);
            if tail & CLOSED != 0 {
                return Err(ChannelError::Closed);
            }
            if tail & BUSY != 0 {
                // Another sender is writing one slot; wait a little for it.
                nr_busy_polls += 1;
                if nr_busy_polls >= BUSY_POLLS {
                    return Err(ChannelError::Busy);
                }
                spin_wait();
                continue;
            }
            // Acquire: pairs with the previous sender's release of the tail.
            if self.tail.compare_exchange(tail, tail | holder_bits, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Ok(tail & TICKET_MASK);
            }
        }
    }

    /// Clears BUSY and our holder id, advancing the ticket if a message was
    /// published.
    fn release_tail(&self, sender: usize, advance: bool) {
        let holder_bits = BUSY | ((sender as u64) << HOLDER_SHIFT);
        // Release: the slot's publish happens before the new tail, which
        // joiners, leavers and closing readers Acquire. The bits subtracted
        // are exactly the ones set, so nothing borrows; CLOSED is untouched.
        let delta = if advance { 1u64.wrapping_sub(holder_bits) } else { 0u64.wrapping_sub(holder_bits) };
        self.tail.fetch_add(delta, Ordering::Release);
    }

    /// Clears `bit` from the reader set of `ticket`'s slot if that slot is
    /// published for `ticket` and names `bit`; frees the slot if `bit` was
    /// its last reader. Returns whether it cleared the bit.
    fn release_reader(&self, ticket: u64, bit: u64) -> bool {
        let index = slot_index(ticket, N);
        let slot = &self.slots[index];
        let published = free_mark(ticket, N).wrapping_add(1);
        if slot.sequence.load(Ordering::Acquire) != published {
            return false;
        }
        let readers = &self.pending_readers[index];
        if readers.load(Ordering::Acquire) & bit == 0 {
            return false;
        }
        // AcqRel: our copy-out (if any) happens before the free, and the
        // last reader acquires every other reader's release.
        let previous = readers.fetch_and(!bit, Ordering::AcqRel);
        if previous == bit {
            // Popcorn fig. 5.4: the last reader frees the slot. Release pairs
            // with the sender's Acquire check of the sequence.
            slot.sequence.fetch_add(1, Ordering::Release);
        }
        true
    }
}

impl<const N: usize, const MAX_MEMBERS: usize> Default for Multicast<N, MAX_MEMBERS> {
    fn default() -> Self {
        Self::new()
    }
}

/// One member's reading end of a [`Multicast`] group. Dropping it leaves
/// the group (see [`MulticastReader::leave`]).
pub struct MulticastReader<'a, const N: usize, const MAX_MEMBERS: usize> {
    group: &'a Multicast<N, MAX_MEMBERS>,
    member: usize,
    /// Local copy of the shared cursor (only this reader writes it).
    cursor: u64,
}

impl<const N: usize, const MAX_MEMBERS: usize> MulticastReader<'_, N, MAX_MEMBERS> {
    /// This reader's member id.
    pub fn member(&self) -> usize {
        self.member
    }

    /// Copies out the next message sent to this member, if any; messages
    /// arrive in send order. `Err(Closed)` once the group is closed and
    /// everything sent before the close has been read. The copy is not
    /// validated here: call [`Message::validate`].
    pub fn try_recv(&mut self) -> Result<Option<Message>, ChannelError> {
        let group = self.group;
        let bit = 1u64 << self.member;
        let result = loop {
            let ticket = self.cursor;
            let index = slot_index(ticket, N);
            let slot = &group.slots[index];
            let published = free_mark(ticket, N).wrapping_add(1);
            // Acquire: pairs with the sender's Release publish.
            let sequence = slot.sequence.load(Ordering::Acquire);
            let distance = sequence.wrapping_sub(published) as i32;
            if distance > 0 {
                // The slot has moved past this ticket, so the ticket's message
                // did not name us (else it could not have been freed): skip.
                self.cursor = ticket.wrapping_add(1);
                continue;
            }
            if distance < 0 {
                break self.nothing_published(ticket);
            }
            // Acquire: if this set was stored for a later lap, we
            // synchronise with that sender and the re-read below sees the
            // sequence moved on.
            let readers = group.pending_readers[index].load(Ordering::Acquire);
            if slot.sequence.load(Ordering::Acquire) != sequence {
                continue; // reused meanwhile; the next round skips it
            }
            if readers & bit == 0 {
                // Sent while we were joining, to the members before us.
                self.cursor = ticket.wrapping_add(1);
                continue;
            }
            // SAFETY: the slot is published for this ticket and names us, so
            // it cannot be freed or rewritten until we clear our bit below.
            let message = unsafe { slot.read() };
            self.cursor = ticket.wrapping_add(1);
            group.release_reader(ticket, bit);
            break Ok(Some(message));
        };
        // Release: saved for `Multicast::evict`; the slots below it have
        // our bit cleared.
        group.member_lines[self.member].cursor.store(self.cursor, Ordering::Release);
        result
    }

    /// Nothing is published at `ticket`: empty, or closed and drained.
    fn nothing_published(&self, ticket: u64) -> Result<Option<Message>, ChannelError> {
        let group = self.group;
        // Acquire: pairs with the senders' Release of the tail, so every
        // ticket below it is visibly published when we re-check the slot.
        let tail = group.tail.load(Ordering::Acquire);
        if tail & CLOSED == 0 || tail & BUSY != 0 {
            return Ok(None);
        }
        let slot = &group.slots[slot_index(ticket, N)];
        let published = free_mark(ticket, N).wrapping_add(1);
        let distance = slot.sequence.load(Ordering::Acquire).wrapping_sub(published) as i32;
        if distance < 0 {
            // Still unpublished although every ticket below the closed tail
            // is: we are at the tail and nothing more can come.
            Err(ChannelError::Closed)
        } else {
            // A message arrived just before the close; read it next time.
            Ok(None)
        }
    }

    /// Receives, spinning while nothing is there. Fails only with
    /// [`ChannelError::Closed`].
    pub fn recv_spin(&mut self) -> Result<Message, ChannelError> {
        loop {
            if let Some(message) = self.try_recv()? {
                return Ok(message);
            }
            spin_wait();
        }
    }

    /// Leaves the group: new messages stop naming this member, and its bit
    /// is cleared from every message it has not read, freeing the slots it
    /// was the last reader of. Waits for a send in progress, without bound:
    /// if its sender died holding BUSY, forever (host use; the kernel calls
    /// [`leave_with`](Self::leave_with)).
    pub fn leave(self) {
        drop(self);
    }

    /// [`leave`](Self::leave) that never waits on a dead sender: while the
    /// tail is BUSY it asks `is_live(holder)` and, for a dead holder, breaks
    /// its BUSY ([`Multicast::break_busy`]). Returns how many messages named
    /// this member and were left unread.
    ///
    /// # Safety
    ///
    /// `is_live(id)` returns false only for a sender that never runs again
    /// (its core is dead), and whose stores are visible to this core.
    pub unsafe fn leave_with(self, is_live: impl FnMut(usize) -> bool) -> u64 {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: (1) `this` is consumed and its drop suppressed, so nothing
        // reads or leaves as this member afterwards; (2) is the caller's
        // promise.
        unsafe { this.group.remove_member(this.member, this.cursor, Some(is_live)) }
    }
}

impl<const N: usize, const MAX_MEMBERS: usize> Drop for MulticastReader<'_, N, MAX_MEMBERS> {
    fn drop(&mut self) {
        // SAFETY: (1) the reader is being dropped, so nothing reads or leaves
        // as this member afterwards; (2) no `is_live` is given: we wait.
        unsafe { self.group.remove_member(self.member, self.cursor, None::<fn(usize) -> bool>) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::thread;
    use std::vec::Vec;

    fn numbered(number: u64) -> Message {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&number.to_le_bytes());
        bytes[8..].copy_from_slice(&number.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
        Message::new(5, &bytes).unwrap()
    }

    fn number_of(message: &Message) -> u64 {
        message.validate().unwrap();
        let payload = message.payload();
        let number = u64::from_le_bytes(payload[..8].try_into().unwrap());
        let check = u64::from_le_bytes(payload[8..16].try_into().unwrap());
        assert_eq!(check, number.wrapping_mul(0x9e37_79b9_7f4a_7c15), "torn message");
        number
    }

    fn drain<const N: usize, const M: usize>(reader: &mut MulticastReader<'_, N, M>) -> Vec<u64> {
        let mut numbers = Vec::new();
        while let Ok(Some(message)) = reader.try_recv() {
            numbers.push(number_of(&message));
        }
        numbers
    }

    #[test]
    fn every_member_reads_each_message_and_the_last_frees_it() {
        let group = Multicast::<4, 8>::new_boxed();
        let mut first = group.join(0).unwrap();
        let mut second = group.join(5).unwrap();
        assert_eq!(group.members(), 0b10_0001);
        for number in 0..4 {
            group.try_send(0, &numbered(number)).unwrap();
        }
        assert_eq!(group.try_send(0, &numbered(4)), Err(ChannelError::Full));
        assert_eq!(group.nr_slots_in_use(), 4);
        assert_eq!(drain(&mut first), [0, 1, 2, 3]);
        // Read by one of two members: still not free.
        assert_eq!(group.try_send(0, &numbered(4)), Err(ChannelError::Full));
        assert_eq!(second.try_recv().map(|m| m.map(|m| number_of(&m))), Ok(Some(0)));
        assert_eq!(group.nr_slots_in_use(), 3);
        group.try_send(0, &numbered(4)).unwrap();
        assert_eq!(drain(&mut second), [1, 2, 3, 4]);
        assert_eq!(drain(&mut first), [4]);
        assert_eq!(group.nr_slots_in_use(), 0);
        assert_eq!(group.member_cursor(5), Some(5));
        assert_eq!(group.member_cursor(1), None);
        // Each slot was freed exactly once per lap: lap 0 for all four,
        // lap 1 for slot 0 (ticket 4). A double free would add one more.
        let sequences: Vec<u32> = group.slots.iter().map(|slot| slot.sequence.load(Ordering::Relaxed)).collect();
        assert_eq!(sequences, [4, 2, 2, 2]);
    }

    #[test]
    fn join_errors_and_join_any() {
        let group = Multicast::<2, 2>::new_boxed();
        assert!(matches!(group.join(2), Err(ChannelError::NotMember)));
        let first = group.join_any().unwrap();
        assert_eq!(first.member(), 0);
        assert!(matches!(group.join(0), Err(ChannelError::AlreadyMember)));
        let second = group.join_any().unwrap();
        assert_eq!(second.member(), 1);
        assert!(matches!(group.join_any(), Err(ChannelError::GroupFull)));
        drop(first);
        assert_eq!(group.join_any().unwrap().member(), 0);
    }

    #[test]
    fn joiner_sees_only_later_messages_and_leaver_frees_its_slots() {
        let group = Multicast::<4, 4>::new_boxed();
        // No members: delivered to no one, takes no slot.
        group.try_send(0, &numbered(100)).unwrap();
        let mut early = group.join(0).unwrap();
        group.try_send(0, &numbered(0)).unwrap();
        group.try_send(0, &numbered(1)).unwrap();
        let mut late = group.join(1).unwrap();
        group.try_send(0, &numbered(2)).unwrap();
        assert_eq!(drain(&mut late), [2]);
        group.try_send(0, &numbered(3)).unwrap();
        // `late` leaves without reading 3; `early` reads everything.
        late.leave();
        assert_eq!(drain(&mut early), [0, 1, 2, 3]);
        assert_eq!(group.nr_slots_in_use(), 0);
        // Leaving with unread messages frees them for the sender.
        for number in 4..8 {
            group.try_send(0, &numbered(number)).unwrap();
        }
        assert_eq!(group.try_send(0, &numbered(8)), Err(ChannelError::Full));
        early.leave();
        assert_eq!(group.nr_slots_in_use(), 0);
        assert_eq!(group.members(), 0);
        let mut again = group.join(0).unwrap();
        group.try_send(0, &numbered(8)).unwrap();
        assert_eq!(drain(&mut again), [8]);
    }

    #[test]
    fn close_drains_then_reports_closed_and_reopen_resumes() {
        let group = Multicast::<8, 2>::new_boxed();
        let mut reader = group.join(1).unwrap();
        group.try_send(0, &numbered(0)).unwrap();
        group.try_send(0, &numbered(1)).unwrap();
        group.close();
        assert!(group.is_closed());
        assert_eq!(group.try_send(0, &numbered(2)), Err(ChannelError::Closed));
        assert_eq!(group.send_spin(0, &numbered(2)), Err(ChannelError::Closed));
        assert!(matches!(group.join(0), Err(ChannelError::Closed)));
        assert_eq!(reader.try_recv().map(|m| m.map(|m| number_of(&m))), Ok(Some(0)));
        assert_eq!(reader.recv_spin().map(|m| number_of(&m)), Ok(1));
        assert_eq!(reader.try_recv(), Err(ChannelError::Closed));
        assert_eq!(reader.recv_spin(), Err(ChannelError::Closed));
        group.reopen();
        assert_eq!(reader.try_recv(), Ok(None));
        group.try_send(0, &numbered(2)).unwrap();
        assert_eq!(drain(&mut reader), [2]);
        assert_eq!(group.nr_slots_in_use(), 0);
    }

    #[test]
    fn sender_ids_are_checked() {
        let group = Multicast::<4, 2>::new_boxed();
        assert_eq!(group.try_send(64, &numbered(0)), Err(ChannelError::NoSuchSender));
        assert_eq!(group.send_spin(99, &numbered(0)), Err(ChannelError::NoSuchSender));
        group.try_send(63, &numbered(0)).unwrap();
        assert_eq!(group.busy_holder(), None);
        // SAFETY: no holder to break; ids out of range are refused.
        assert!(!unsafe { group.break_busy(64) });
    }

    /// Sender `holder` takes the tail and dies before publishing (it may
    /// have written the slot's bytes, which no one must read).
    fn die_holding_busy(group: &Multicast<4, 4>, holder: usize) -> u64 {
        let ticket = group.claim_tail(holder).unwrap();
        // SAFETY: we hold BUSY and the slot of this ticket is free.
        unsafe { group.slots[slot_index(ticket, 4)].write(&numbered(666)) };
        ticket
    }

    #[test]
    fn break_busy_of_a_sender_that_died_before_publishing() {
        let group = Multicast::<4, 4>::new_boxed();
        let mut reader = group.join(0).unwrap();
        group.try_send(1, &numbered(0)).unwrap();
        assert_eq!(die_holding_busy(&group, 5), 1);
        assert_eq!(group.busy_holder(), Some(5));
        assert_eq!(group.try_send(1, &numbered(1)), Err(ChannelError::Busy));
        assert_eq!(drain(&mut reader), [0]);
        // SAFETY: sender 5 never runs again. Only its own hold is broken.
        assert!(!unsafe { group.break_busy(4) });
        // SAFETY: as above.
        assert!(unsafe { group.break_busy(5) });
        // SAFETY: as above.
        assert!(!unsafe { group.break_busy(5) });
        assert_eq!(group.busy_holder(), None);
        // The same ticket is rewritten by the next sender.
        group.try_send(1, &numbered(1)).unwrap();
        group.try_send(2, &numbered(2)).unwrap();
        assert_eq!(drain(&mut reader), [1, 2]);
        assert_eq!(group.nr_slots_in_use(), 0);
    }

    #[test]
    fn break_busy_of_a_sender_that_died_after_publishing() {
        let group = Multicast::<4, 4>::new_boxed();
        let mut reader = group.join(0).unwrap();
        // Sender 9 does all of `try_send` but the release of the tail.
        let ticket = group.claim_tail(9).unwrap();
        let readers = group.members.fetch_or(0, Ordering::AcqRel);
        // SAFETY: we hold BUSY and the slot of this ticket is free.
        unsafe { group.slots[slot_index(ticket, 4)].write(&numbered(0)) };
        group.pending_readers[slot_index(ticket, 4)].store(readers, Ordering::Release);
        group.slots[slot_index(ticket, 4)].sequence.store(1, Ordering::Release);
        // The member may read it before the tail is recovered.
        assert_eq!(drain(&mut reader), [0]);
        // SAFETY: sender 9 never runs again.
        assert!(unsafe { group.break_busy(9) });
        group.close();
        assert_eq!(reader.try_recv(), Err(ChannelError::Closed));
        group.reopen();
        group.try_send(1, &numbered(1)).unwrap();
        assert_eq!(drain(&mut reader), [1]);
        assert_eq!(group.nr_slots_in_use(), 0);
    }

    #[test]
    fn leave_with_breaks_a_dead_holders_busy() {
        let group = Multicast::<4, 4>::new_boxed();
        let leaving = group.join(0).unwrap();
        let mut staying = group.join(1).unwrap();
        group.try_send(1, &numbered(0)).unwrap();
        die_holding_busy(&group, 7);
        let mut asked = Vec::new();
        // SAFETY: sender 7 never runs again; 1 is alive but holds nothing.
        unsafe {
            leaving.leave_with(|holder| {
                asked.push(holder);
                holder != 7
            })
        };
        assert_eq!(asked, [7]);
        assert_eq!(group.members(), 0b10);
        assert_eq!(group.busy_holder(), None);
        assert_eq!(drain(&mut staying), [0]);
        assert_eq!(group.nr_slots_in_use(), 0);
        group.try_send(1, &numbered(1)).unwrap();
        assert_eq!(drain(&mut staying), [1]);
    }

    #[test]
    fn evicting_a_dead_member_frees_the_group() {
        let group = Multicast::<4, 4>::new_boxed();
        let mut alive = group.join(0).unwrap();
        let mut dead = group.join(2).unwrap();
        for number in 0..4 {
            group.try_send(1, &numbered(number)).unwrap();
        }
        assert_eq!(dead.try_recv().map(|m| m.map(|m| number_of(&m))), Ok(Some(0)));
        core::mem::forget(dead); // its core faults: it never reads again
        assert_eq!(drain(&mut alive), [0, 1, 2, 3]);
        group.try_send(1, &numbered(4)).unwrap();
        assert_eq!(group.try_send(1, &numbered(5)), Err(ChannelError::Full));
        assert_eq!(group.nr_slots_in_use(), 4);
        assert_eq!(group.member_cursor(2), Some(1));
        // SAFETY: member 2's reader is never used again; every sender is live.
        assert_eq!(unsafe { group.evict(3, |_| true) }, Err(ChannelError::NotMember));
        // SAFETY: as above (member 4 does not exist).
        assert_eq!(unsafe { group.evict(4, |_| true) }, Err(ChannelError::NotMember));
        // SAFETY: as above. Member 2 never read 1, 2, 3 and 4.
        assert_eq!(unsafe { group.evict(2, |_| true) }, Ok(4));
        assert_eq!(group.members(), 0b1);
        assert_eq!(group.nr_slots_in_use(), 1);
        assert_eq!(group.member_cursor(2), None);
        for number in 5..8 {
            group.try_send(1, &numbered(number)).unwrap();
        }
        assert_eq!(drain(&mut alive), [4, 5, 6, 7]);
        // The id is free for the restarted core.
        let mut again = group.join(2).unwrap();
        group.try_send(1, &numbered(8)).unwrap();
        assert_eq!(drain(&mut again), [8]);
        assert_eq!(drain(&mut alive), [8]);
    }

    #[test]
    fn evict_breaks_a_dead_holders_busy_too() {
        let group = Multicast::<4, 4>::new_boxed();
        let mut alive = group.join(0).unwrap();
        let dead = group.join(1).unwrap();
        group.try_send(3, &numbered(0)).unwrap();
        core::mem::forget(dead);
        die_holding_busy(&group, 3);
        // SAFETY: member 1 and sender 3 never run again.
        assert_eq!(unsafe { group.evict(1, |sender| sender != 3) }, Ok(1));
        assert_eq!(group.busy_holder(), None);
        assert_eq!(drain(&mut alive), [0]);
        assert_eq!(group.nr_slots_in_use(), 0);
    }

    #[test]
    fn contending_senders_get_busy_never_a_lost_message() {
        const PER_SENDER: u64 = 20_000;
        let group = Multicast::<16, 2>::new_boxed();
        let group = &*group;
        let mut reader = group.join(0).unwrap();
        let nr_busy = AtomicUsize::new(0);
        thread::scope(|scope| {
            for sender in 0..2u64 {
                let nr_busy = &nr_busy;
                scope.spawn(move || {
                    for number in 0..PER_SENDER {
                        loop {
                            match group.try_send(sender as usize, &numbered(sender * PER_SENDER + number)) {
                                Ok(()) => break,
                                Err(ChannelError::Busy) => {
                                    nr_busy.fetch_add(1, Ordering::Relaxed);
                                    thread::yield_now();
                                }
                                Err(ChannelError::Full) => thread::yield_now(),
                                Err(error) => panic!("{error}"),
                            }
                        }
                    }
                });
            }
            let mut next = [0, PER_SENDER];
            while next != [PER_SENDER, 2 * PER_SENDER] {
                match reader.try_recv().unwrap() {
                    Some(message) => {
                        let number = number_of(&message);
                        let sender = (number / PER_SENDER) as usize;
                        assert_eq!(number, next[sender], "lost, duplicated or reordered");
                        next[sender] += 1;
                    }
                    None => thread::yield_now(),
                }
            }
        });
        assert_eq!(group.busy_holder(), None);
        std::println!("Busy returned {} times", nr_busy.load(Ordering::Relaxed));
    }

    #[test]
    fn sender_and_three_members_hundred_thousand_messages() {
        const COUNT: u64 = 100_000;
        let group = Multicast::<64, 4>::new_boxed();
        let group = &*group;
        let readers: Vec<_> = (0..3).map(|member| group.join(member).unwrap()).collect();
        thread::scope(|scope| {
            for mut reader in readers {
                scope.spawn(move || {
                    let mut sum = 0u64;
                    for expected in 0..COUNT {
                        let message = loop {
                            match reader.try_recv() {
                                Ok(Some(message)) => break message,
                                Ok(None) => thread::yield_now(),
                                Err(error) => panic!("{error}"),
                            }
                        };
                        assert_eq!(number_of(&message), expected, "lost, duplicated or reordered");
                        sum += expected;
                    }
                    assert_eq!(sum, COUNT * (COUNT - 1) / 2);
                    // After the close, the reader has nothing left.
                    while reader.try_recv() == Ok(None) {
                        thread::yield_now();
                    }
                    assert_eq!(reader.try_recv(), Err(ChannelError::Closed));
                });
            }
            scope.spawn(|| {
                for number in 0..COUNT {
                    while group.try_send(0, &numbered(number)).is_err() {
                        thread::yield_now();
                    }
                }
                group.close();
            });
        });
        assert_eq!(group.nr_slots_in_use(), 0);
        assert_eq!(group.members(), 0);
    }

    #[test]
    fn members_join_and_leave_during_traffic() {
        const COUNT: u64 = 30_000;
        let group = Multicast::<16, 8>::new_boxed();
        let group = &*group;
        let steady = group.join(0).unwrap();
        let sender_done = AtomicBool::new(false);
        let nr_suffix_checks = AtomicUsize::new(0);
        thread::scope(|scope| {
            scope.spawn(|| {
                for number in 0..COUNT {
                    while group.try_send(0, &numbered(number)).is_err() {
                        thread::yield_now();
                    }
                }
                sender_done.store(true, Ordering::Release);
            });
            for member in 1..3 {
                let sender_done = &sender_done;
                let nr_suffix_checks = &nr_suffix_checks;
                scope.spawn(move || {
                    let mut round = 0u64;
                    while !sender_done.load(Ordering::Acquire) {
                        round += 1;
                        let mut reader = group.join(member).unwrap();
                        let mut last: Option<u64> = None;
                        // Read a varying number of messages, then leave with
                        // the rest unread.
                        for _ in 0..(round * 7 + member as u64 * 13) % 50 {
                            match reader.try_recv().unwrap() {
                                Some(message) => {
                                    let number = number_of(&message);
                                    if let Some(last) = last {
                                        assert_eq!(number, last + 1, "gap inside a membership");
                                    }
                                    last = Some(number);
                                }
                                None => thread::yield_now(),
                            }
                        }
                        nr_suffix_checks.fetch_add(1, Ordering::Relaxed);
                        reader.leave();
                    }
                });
            }
            let mut steady = steady;
            for expected in 0..COUNT {
                let message = loop {
                    if let Some(message) = steady.try_recv().unwrap() {
                        break message;
                    }
                    thread::yield_now();
                };
                assert_eq!(number_of(&message), expected);
            }
        });
        assert!(nr_suffix_checks.load(Ordering::Relaxed) > 0);
        assert_eq!(group.nr_slots_in_use(), 0);
        assert_eq!(group.members(), 0);
    }
}
