//! Popcorn's many-to-one kernel receive queue (fig. 5.1), with reservations.
//!
//! Any number of senders on any cores, one receiver. A sender takes a ticket
//! with one `fetch_add` on the shared tail, spins only while its slot still
//! holds the unconsumed message of the previous lap, writes, and publishes
//! with a Release store of the slot's sequence word.
//!
//! Sequence word of the slot of ticket `t`, lap `L = t / N` (wrapping u32):
//! `2L` = free for lap `L`, `2L + 1` = holds the lap-`L` message, and the
//! receiver frees it by storing `2L + 2`, which is "free for lap `L + 1`".
//! Zero is "free for lap 0", so all-zero memory is an empty queue.

use crate::message::{lap, slot_index, CacheLine, Slot, KIND_PADDING};
use crate::sync::{spin_wait, AtomicU64, Ordering};
use crate::urpc::EndpointLine;
use crate::{ChannelError, Message};

/// A many-to-one receive queue of `N` slots (`N` a power of two).
///
/// `#[repr(C)]`, `size_of` = `(N + 2) * 64` bytes, aligned to 64; all-zero
/// memory is a valid empty queue ([`MpscQueue::from_zeroed`]). Senders use
/// `&MpscQueue` directly; the single receiver takes [`MpscQueue::receiver`].
#[repr(C)]
pub struct MpscQueue<const N: usize> {
    /// Next ticket; every sender's `fetch_add` lands here, so it has a line
    /// of its own.
    tail: CacheLine<AtomicU64>,
    /// Receiver claim and its saved position.
    receiver_line: CacheLine<EndpointLine>,
    slots: [Slot; N],
}

// SAFETY: only atomics and `Slot`s; zero is tail 0, receiver unclaimed at
// ticket 0, every slot "free for lap 0".
#[cfg(not(loom))]
unsafe impl<const N: usize> crate::message::ZeroIsEmpty for MpscQueue<N> {}

/// Sequence value meaning "free for the lap of `ticket`".
#[inline(always)]
fn free_mark(ticket: u64, capacity: usize) -> u32 {
    lap(ticket, capacity).wrapping_mul(2)
}

impl<const N: usize> MpscQueue<N> {
    /// Compile-time check of the capacity, evaluated by every constructor.
    const CAPACITY_OK: () = assert!(N.is_power_of_two() && N <= 1 << 30, "MpscQueue capacity must be a power of two");

    const_unless_loom! {
        /// An empty queue by value (`const fn` outside loom).
        pub fn new() -> Self {
            let () = Self::CAPACITY_OK;
            Self {
                tail: CacheLine(AtomicU64::new(0)),
                receiver_line: CacheLine(EndpointLine::new()),
                slots: array_of![Slot::new(); N],
            }
        }
    }

    ring_constructors!("queue", CAPACITY_OK);

    /// Takes the receiving endpoint; it resumes where the previous receiver
    /// endpoint, if any, was dropped.
    pub fn receiver(&self) -> Result<MpscReceiver<'_, N>, ChannelError> {
        self.receiver_line.claim()?;
        Ok(MpscReceiver {
            queue: self,
            next_ticket: self.receiver_line.index.load(Ordering::Relaxed),
            nr_padding_skipped: 0,
        })
    }

    /// Popcorn fig. 5.1: one `fetch_add` for a ticket, then spin until the
    /// slot is free, write, publish. Spins only while the ring is full.
    pub fn send_spin(&self, message: &Message) {
        // Relaxed: the ticket only chooses the slot; the slot's sequence word
        // carries all synchronisation with the receiver.
        let ticket = self.tail.fetch_add(1, Ordering::Relaxed);
        self.write_ticket(ticket, message);
    }

    /// Sends `message` if the next slot is free, else fails with
    /// [`ChannelError::Full`] without taking a ticket (a compare-exchange
    /// instead of `fetch_add`, so a full queue is left untouched).
    pub fn try_send(&self, message: &Message) -> Result<(), ChannelError> {
        let mut ticket = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[slot_index(ticket, N)];
            // Acquire: pairs with the receiver's Release that freed the slot.
            let sequence = slot.sequence.load(Ordering::Acquire);
            let distance = sequence.wrapping_sub(free_mark(ticket, N)) as i32;
            if distance < 0 {
                // Still holds (or awaits) the previous lap's message.
                return Err(ChannelError::Full);
            }
            if distance > 0 {
                // Our view of the tail is stale: this ticket is taken already.
                ticket = self.tail.load(Ordering::Relaxed);
                continue;
            }
            match self.tail.compare_exchange(ticket, ticket.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    // SAFETY: we hold the ticket, and the Acquire load above
                    // saw its slot free for our lap, so the receiver is done
                    // with it and no other sender owns this ticket.
                    unsafe { slot.write(message) };
                    // Release: the bytes are visible before the sequence.
                    slot.sequence.store(free_mark(ticket, N).wrapping_add(1), Ordering::Release);
                    return Ok(());
                }
                Err(current) => ticket = current,
            }
        }
    }

    /// Reserves `nr_slots` consecutive tickets with one `fetch_add`, for a
    /// large message (Popcorn 5.3.4). The receiver sees them in order with
    /// nothing between; `nr_slots` may exceed `N`, in which case
    /// [`Reservation::push`] waits per slot for the receiver to make room.
    /// A single notification after reserving is enough: the receiver polls
    /// until every reserved slot has been consumed.
    pub fn reserve(&self, nr_slots: usize) -> Reservation<'_, N> {
        let nr_slots = nr_slots as u64;
        // Relaxed: as in `send_spin`, the slots synchronise.
        let first_ticket = self.tail.fetch_add(nr_slots, Ordering::Relaxed);
        Reservation { queue: self, first_ticket, nr_slots, nr_written: 0 }
    }

    /// Waits until the slot of `ticket` is free for its lap, writes, and
    /// publishes. The caller holds `ticket`.
    fn write_ticket(&self, ticket: u64, message: &Message) {
        let slot = &self.slots[slot_index(ticket, N)];
        let free = free_mark(ticket, N);
        // Popcorn fig. 5.1: spin until the slot is free. Acquire pairs with
        // the receiver's Release: its copy-out happens before our write.
        while slot.sequence.load(Ordering::Acquire) != free {
            spin_wait();
        }
        // SAFETY: the caller holds the ticket, so no other sender writes this
        // slot for this lap, and the sequence shows the receiver freed it.
        unsafe { slot.write(message) };
        // Release: the bytes are visible before the "full" sequence.
        slot.sequence.store(free.wrapping_add(1), Ordering::Release);
    }
}

impl<const N: usize> Default for MpscQueue<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The receiving end of an [`MpscQueue`]; at most one exists per queue.
pub struct MpscReceiver<'a, const N: usize> {
    queue: &'a MpscQueue<N>,
    next_ticket: u64,
    nr_padding_skipped: u64,
}

impl<const N: usize> MpscReceiver<'_, N> {
    /// Copies out the next message if it is published; messages arrive in
    /// ticket order. Not validated here: call [`Message::validate`].
    /// Padding (kind 0, filler of an abandoned reservation) is skipped.
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
            self.next_ticket = ticket.wrapping_add(1);
            if message.kind == KIND_PADDING && message.flags == 0 && message.len == 0 {
                self.nr_padding_skipped += 1;
                continue;
            }
            return Some(message);
        }
    }

    /// Padding slots skipped so far by this endpoint (abandoned reservations).
    pub fn nr_padding_skipped(&self) -> u64 {
        self.nr_padding_skipped
    }
}

impl<const N: usize> Drop for MpscReceiver<'_, N> {
    fn drop(&mut self) {
        self.queue.receiver_line.index.store(self.next_ticket, Ordering::Relaxed);
        // Release (in `release`): the saved position is visible to the next
        // receiver, which claims with Acquire.
        self.queue.receiver_line.release();
    }
}

/// Consecutive tickets of an [`MpscQueue`], taken with one `fetch_add`.
///
/// Messages are written in ticket order with [`Reservation::push`]. Slots
/// not written when the reservation is dropped are filled with padding,
/// which the receiver skips, so an abandoned reservation never blocks the
/// queue; like `push`, the drop waits for the receiver to free those slots.
pub struct Reservation<'a, const N: usize> {
    queue: &'a MpscQueue<N>,
    first_ticket: u64,
    nr_slots: u64,
    nr_written: u64,
}

impl<const N: usize> Reservation<'_, N> {
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

    /// Reserved slots not written yet.
    pub fn remaining(&self) -> usize {
        (self.nr_slots - self.nr_written) as usize
    }

    /// Writes and publishes the next reserved slot, spinning while the
    /// receiver has not freed it. In-order writing is what lets a reservation
    /// longer than the ring make progress. Fails with
    /// [`ChannelError::ReservationExhausted`] once every slot is written.
    pub fn push(&mut self, message: &Message) -> Result<(), ChannelError> {
        if self.nr_written == self.nr_slots {
            return Err(ChannelError::ReservationExhausted);
        }
        self.queue.write_ticket(self.first_ticket.wrapping_add(self.nr_written), message);
        self.nr_written += 1;
        Ok(())
    }
}

impl<const N: usize> Drop for Reservation<'_, N> {
    fn drop(&mut self) {
        while self.nr_written < self.nr_slots {
            self.queue.write_ticket(self.first_ticket.wrapping_add(self.nr_written), &Message::PADDING);
            self.nr_written += 1;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use std::thread;
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

    #[test]
    fn try_send_reports_full_without_taking_a_ticket() {
        let queue = MpscQueue::<4>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        for number in 0..4 {
            queue.try_send(&from_sender(0, number)).unwrap();
        }
        assert_eq!(queue.try_send(&from_sender(0, 4)), Err(ChannelError::Full));
        assert_eq!(queue.try_send(&from_sender(0, 4)), Err(ChannelError::Full));
        assert_eq!(receiver.try_recv().map(|m| decode(&m)), Some((0, 0)));
        queue.try_send(&from_sender(0, 4)).unwrap();
        for number in 1..5 {
            assert_eq!(receiver.try_recv().map(|m| decode(&m)), Some((0, number)));
        }
        assert_eq!(receiver.try_recv(), None);
        assert!(matches!(queue.receiver(), Err(ChannelError::EndpointTaken)));
    }

    #[test]
    fn abandoned_reservation_is_padded_and_skipped() {
        let queue = MpscQueue::<8>::new_boxed();
        let mut receiver = queue.receiver().unwrap();
        {
            let mut reservation = queue.reserve(3);
            assert_eq!(reservation.first_ticket(), 0);
            reservation.push(&from_sender(1, 0)).unwrap();
        }
        queue.send_spin(&from_sender(2, 0));
        let mut reservation = queue.reserve(1);
        reservation.push(&from_sender(3, 0)).unwrap();
        assert_eq!(reservation.push(&from_sender(3, 1)), Err(ChannelError::ReservationExhausted));
        drop(reservation);
        let received: Vec<_> = core::iter::from_fn(|| receiver.try_recv()).map(|message| decode(&message)).collect();
        assert_eq!(received, [(1, 0), (2, 0), (3, 0)]);
        assert_eq!(receiver.nr_padding_skipped(), 2);
    }

    #[test]
    fn reservation_longer_than_ring_with_concurrent_receiver() {
        let queue = MpscQueue::<4>::new_boxed();
        let queue = &*queue;
        thread::scope(|scope| {
            scope.spawn(|| {
                let mut reservation = queue.reserve(1000);
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
        let queue = MpscQueue::<64>::new_boxed();
        let queue = &*queue;
        thread::scope(|scope| {
            for sender in 0..SENDERS {
                scope.spawn(move || {
                    for number in 0..PER_SENDER {
                        // Mix both send paths.
                        if number % 3 == 0 {
                            queue.send_spin(&from_sender(sender, number));
                        } else {
                            while queue.try_send(&from_sender(sender, number)).is_err() {
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
