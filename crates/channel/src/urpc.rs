//! Barrelfish URPC: a single-producer/single-consumer ring of 64-byte slots.
//!
//! The receiver polls the sequence word of the next slot; it never writes a
//! slot, so a message costs one cache-line transfer one way. It reports its
//! progress through a consumer index alone on its own cache line, which the
//! sender reads only when its cached copy says the ring is full.
//!
//! Slot sequence for ticket `t` on lap `L = t / N`: the sender stores
//! `L + 1` (wrapping) to publish. A zeroed slot holds 0, which matches no
//! lap-0 ticket, so all-zero memory is an empty ring.

use crate::message::{lap, slot_index, CacheLine, Slot};
use crate::sync::{spin_wait, AtomicU32, AtomicU64, Ordering};
use crate::{ChannelError, Message};

/// A single-producer/single-consumer ring of `N` slots (`N` a power of two).
///
/// `#[repr(C)]`, `size_of` = `(N + 2) * 64` bytes, aligned to 64. All-zero
/// memory is a valid empty ring: the kernel carves one out of the zeroed
/// shared region with [`Urpc::from_zeroed`]. Each side then takes its
/// endpoint ([`Urpc::sender`], [`Urpc::receiver`]) and keeps it in its own
/// private memory.
#[repr(C)]
pub struct Urpc<const N: usize> {
    /// Sender claim and position, written by the sender after every send
    /// (for [`Urpc::reclaim_sender`]); the receiver never reads it.
    sender_line: CacheLine<EndpointLine>,
    /// The consumer index: written by the receiver, read by the sender.
    receiver_line: CacheLine<EndpointLine>,
    slots: [Slot; N],
}

/// Claim word and index of one endpoint, on the endpoint's own cache line.
#[repr(C)]
pub(crate) struct EndpointLine {
    /// 0 = free, 1 = an endpoint value exists.
    pub(crate) claimed: AtomicU32,
    /// The endpoint's position (next ticket), saved after every message so
    /// that a new endpoint, or one reclaimed from a dead core, resumes where
    /// the last one stopped.
    pub(crate) index: AtomicU64,
}

impl EndpointLine {
    const_unless_loom! {
        pub(crate) fn new() -> EndpointLine {
            EndpointLine {
                claimed: AtomicU32::new(0),
                index: AtomicU64::new(0),
            }
        }
    }

    /// Takes the claim. Acquire pairs with the Release in [`Self::release`]
    /// so the previous holder's saved index is visible.
    pub(crate) fn claim(&self) -> Result<(), ChannelError> {
        self.claimed
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|_| ChannelError::EndpointTaken)
    }

    pub(crate) fn release(&self) {
        self.claimed.store(0, Ordering::Release);
    }
}

// SAFETY: `Urpc` holds only atomics and `Slot`s (an atomic and an
// `UnsafeCell<Message>`), and zero means: endpoints unclaimed, both indexes
// 0, every slot sequence 0, which publishes no ticket (lap 0 publishes 1).
#[cfg(not(loom))]
unsafe impl<const N: usize> crate::message::ZeroIsEmpty for Urpc<N> {}

impl<const N: usize> Urpc<N> {
    /// Compile-time check of the capacity, evaluated by every constructor.
    const CAPACITY_OK: () = assert!(N.is_power_of_two() && N <= 1 << 30, "Urpc capacity must be a power of two");

    const_unless_loom! {
        /// An empty ring by value (a `const fn` outside loom, so it can
        /// initialise a `static` for both-ends-on-one-core tests).
        pub fn new() -> Self {
            let () = Self::CAPACITY_OK;
            Self {
                sender_line: CacheLine(EndpointLine::new()),
                receiver_line: CacheLine(EndpointLine::new()),
                slots: array_of![Slot::new(); N],
            }
        }
    }

    ring_constructors!("ring", CAPACITY_OK);

    /// Takes the sending endpoint. It resumes at the position where the
    /// previous sender endpoint, if any, stopped.
    pub fn sender(&self) -> Result<UrpcSender<'_, N>, ChannelError> {
        self.sender_line.claim()?;
        Ok(self.resume_sender())
    }

    /// Takes the sending endpoint even though it is claimed (its core died),
    /// resuming at the position the dead sender saved after its last send.
    /// A sender that died mid-write never published, so the new one simply
    /// rewrites that slot; one that died after publishing but before saving
    /// its position left the slot published for that ticket, and the new
    /// one starts after it.
    ///
    /// # Safety
    ///
    /// The previous sender endpoint of this ring is never used again (its
    /// core is dead), and its stores to the ring are visible to this core
    /// (the kernel learned of the death through memory it Acquired).
    pub unsafe fn reclaim_sender(&self) -> UrpcSender<'_, N> {
        // Acquire: pairs with a Release `release()` if the endpoint was free.
        self.sender_line.claimed.swap(1, Ordering::Acquire);
        self.resume_sender()
    }

    /// A sender at the saved position, moved past a ticket published before
    /// its position was saved.
    fn resume_sender(&self) -> UrpcSender<'_, N> {
        // Acquire: pairs with the previous sender's Release position stores.
        let mut next_ticket = self.sender_line.index.load(Ordering::Acquire);
        let slot = &self.slots[slot_index(next_ticket, N)];
        // Only this side writes slots, so "published for `next_ticket`" can
        // only mean the previous sender published it and died before saving.
        // Acquire: as for the index (the dead sender's stores are visible).
        if slot.sequence.load(Ordering::Acquire) == published_mark(next_ticket, N) {
            next_ticket = next_ticket.wrapping_add(1);
            self.sender_line.index.store(next_ticket, Ordering::Release);
        }
        UrpcSender {
            ring: self,
            next_ticket,
            // Acquire: the receiver's copy-outs below this index happen
            // before we overwrite their slots.
            known_consumer_index: self.receiver_line.index.load(Ordering::Acquire),
        }
    }

    /// Takes the receiving endpoint. It resumes at the consumer index.
    pub fn receiver(&self) -> Result<UrpcReceiver<'_, N>, ChannelError> {
        self.receiver_line.claim()?;
        Ok(self.resume_receiver())
    }

    /// Takes the receiving endpoint even though it is claimed (its core
    /// died), resuming at the consumer index, which the receiver publishes
    /// after every message. A message the dead receiver copied out but had
    /// not yet counted in the index is delivered again.
    ///
    /// # Safety
    ///
    /// The previous receiver endpoint of this ring is never used again (its
    /// core is dead), and its stores to the ring are visible to this core.
    pub unsafe fn reclaim_receiver(&self) -> UrpcReceiver<'_, N> {
        // Acquire: pairs with a Release `release()` if the endpoint was free.
        self.receiver_line.claimed.swap(1, Ordering::Acquire);
        self.resume_receiver()
    }

    fn resume_receiver(&self) -> UrpcReceiver<'_, N> {
        // Acquire: pairs with the previous receiver's Release index stores.
        UrpcReceiver { ring: self, next_ticket: self.receiver_line.index.load(Ordering::Acquire) }
    }
}

impl<const N: usize> Default for Urpc<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The sequence value that publishes `ticket`: its lap plus one.
#[inline(always)]
fn published_mark(ticket: u64, capacity: usize) -> u32 {
    lap(ticket, capacity).wrapping_add(1)
}

/// The sending end of a [`Urpc`] ring; at most one exists per ring.
pub struct UrpcSender<'a, const N: usize> {
    ring: &'a Urpc<N>,
    /// Ticket of the next message to write.
    next_ticket: u64,
    /// Last consumer index read from shared memory; refreshed only when the
    /// ring looks full, to keep the receiver's line out of the fast path.
    known_consumer_index: u64,
}

impl<const N: usize> UrpcSender<'_, N> {
    /// Writes `message` into the next slot, or fails with
    /// [`ChannelError::Full`] if the receiver has not freed it yet.
    #[inline]
    pub fn try_send(&mut self, message: &Message) -> Result<(), ChannelError> {
        let ticket = self.next_ticket;
        if ticket.wrapping_sub(self.known_consumer_index) >= N as u64 {
            // Acquire: pairs with the receiver's Release store of the index,
            // so its copy-out of the slot we reuse happens before our write.
            self.known_consumer_index = self.ring.receiver_line.index.load(Ordering::Acquire);
            if ticket.wrapping_sub(self.known_consumer_index) >= N as u64 {
                return Err(ChannelError::Full);
            }
        }
        let slot = &self.ring.slots[slot_index(ticket, N)];
        // SAFETY: the consumer index shows the receiver is done with this
        // slot's previous lap, and only this (unique) sender writes slots.
        unsafe { slot.write(message) };
        // Release: the message bytes are visible before the sequence says so.
        slot.sequence.store(published_mark(ticket, N), Ordering::Release);
        self.next_ticket = ticket.wrapping_add(1);
        // Release: saved for `Urpc::reclaim_sender`, after the publish, on
        // our own line (the receiver never reads it).
        self.ring.sender_line.index.store(self.next_ticket, Ordering::Release);
        Ok(())
    }

    /// Sends `message`, spinning while the ring is full.
    pub fn send_spin(&mut self, message: &Message) {
        while self.try_send(message).is_err() {
            spin_wait();
        }
    }
}

impl<const N: usize> Drop for UrpcSender<'_, N> {
    fn drop(&mut self) {
        // The position is already saved. Release (in `release`): it is
        // visible to the next claimer.
        self.ring.sender_line.release();
    }
}

/// The receiving end of a [`Urpc`] ring; at most one exists per ring.
pub struct UrpcReceiver<'a, const N: usize> {
    ring: &'a Urpc<N>,
    /// Ticket of the next message to read.
    next_ticket: u64,
}

impl<const N: usize> UrpcReceiver<'_, N> {
    /// Copies out the next message if one is published. The copy is not
    /// validated here: call [`Message::validate`] before using it.
    #[inline]
    pub fn try_recv(&mut self) -> Option<Message> {
        self.recv_polling(1, || {})
    }

    /// Polls the next slot up to `polls` times, calling `between` after each miss, and copies
    /// the message out once it is published (not validated, as with
    /// [`try_recv`](Self::try_recv)). The slot and the sequence value it waits for are worked
    /// out once, so a poll is one load and one compare (the Barrelfish receive loop); a caller
    /// that spins on a ring uses this rather than calling `try_recv` in a loop. `None` after
    /// `polls` misses.
    #[inline]
    pub fn recv_polling(&mut self, polls: usize, mut between: impl FnMut()) -> Option<Message> {
        let ticket = self.next_ticket;
        let slot = &self.ring.slots[slot_index(ticket, N)];
        let mark = published_mark(ticket, N);
        for _ in 0..polls {
            // Acquire: pairs with the sender's Release, so the bytes we copy are
            // the ones written for this ticket.
            if slot.sequence.load(Ordering::Acquire) == mark {
                // SAFETY: the slot is published for this ticket, and the sender will
                // not write it again until the consumer index passes this ticket.
                let message = unsafe { slot.read() };
                self.next_ticket = ticket.wrapping_add(1);
                // Release: our copy-out happens before the sender reuses the slot.
                self.ring.receiver_line.index.store(self.next_ticket, Ordering::Release);
                return Some(message);
            }
            between();
        }
        None
    }
}

impl<const N: usize> Drop for UrpcReceiver<'_, N> {
    fn drop(&mut self) {
        self.ring.receiver_line.release();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use std::thread;

    fn numbered(number: u64) -> Message {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&number.to_le_bytes());
        bytes[8..].copy_from_slice(&(!number).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
        Message::new(1 + (number % 7) as u16, &bytes).unwrap()
    }

    /// Sends messages `0..count`, yielding while the ring is full.
    fn send_numbered<const N: usize>(ring: &Urpc<N>, count: u64) {
        let mut sender = ring.sender().unwrap();
        for number in 0..count {
            while sender.try_send(&numbered(number)).is_err() {
                thread::yield_now();
            }
        }
    }

    #[test]
    fn full_after_capacity_then_frees() {
        let ring = Urpc::<4>::new_boxed();
        let mut sender = ring.sender().unwrap();
        let mut receiver = ring.receiver().unwrap();
        assert!(receiver.try_recv().is_none());
        for number in 0..4 {
            sender.try_send(&numbered(number)).unwrap();
        }
        assert_eq!(sender.try_send(&numbered(4)), Err(ChannelError::Full));
        assert_eq!(receiver.try_recv(), Some(numbered(0)));
        sender.try_send(&numbered(4)).unwrap();
        for number in 1..5 {
            assert_eq!(receiver.try_recv(), Some(numbered(number)));
        }
        assert!(receiver.try_recv().is_none());
    }

    #[test]
    fn recv_polling_gives_up_then_takes_messages_in_order() {
        let ring = Urpc::<4>::new_boxed();
        let mut sender = ring.sender().unwrap();
        let mut receiver = ring.receiver().unwrap();
        let mut misses = 0;
        assert_eq!(receiver.recv_polling(3, || misses += 1), None);
        assert_eq!(misses, 3);
        for round in 0..3 {
            for number in 0..4 {
                sender.try_send(&numbered(round * 4 + number)).unwrap();
            }
            for number in 0..4 {
                assert_eq!(receiver.recv_polling(1, || {}), Some(numbered(round * 4 + number)));
            }
            assert_eq!(receiver.recv_polling(1, || {}), None);
        }
    }

    #[test]
    fn recv_polling_across_threads() {
        const COUNT: u64 = 20_000;
        let ring = Urpc::<8>::new_boxed();
        let ring = &*ring;
        thread::scope(|scope| {
            scope.spawn(|| send_numbered(ring, COUNT));
            let mut receiver = ring.receiver().unwrap();
            for number in 0..COUNT {
                let message = loop {
                    if let Some(message) = receiver.recv_polling(64, thread::yield_now) {
                        break message;
                    }
                };
                assert_eq!(message, numbered(number), "message {number} out of order or torn");
            }
        });
    }

    #[test]
    fn endpoints_are_unique_and_resume() {
        let ring = Urpc::<2>::new_boxed();
        let sender = ring.sender().unwrap();
        assert!(matches!(ring.sender(), Err(ChannelError::EndpointTaken)));
        let receiver = ring.receiver().unwrap();
        assert!(matches!(ring.receiver(), Err(ChannelError::EndpointTaken)));
        drop((sender, receiver));
        for number in 0..7 {
            let mut sender = ring.sender().unwrap();
            sender.try_send(&numbered(number)).unwrap();
            drop(sender);
            let mut receiver = ring.receiver().unwrap();
            assert_eq!(receiver.try_recv(), Some(numbered(number)));
            assert_eq!(receiver.try_recv(), None);
        }
    }

    #[test]
    fn reclaimed_endpoints_resume_with_nothing_lost_or_duplicated() {
        let ring = Urpc::<4>::new_boxed();
        let mut sender = ring.sender().unwrap();
        let mut receiver = ring.receiver().unwrap();
        for number in 0..3 {
            sender.try_send(&numbered(number)).unwrap();
        }
        assert_eq!(receiver.try_recv(), Some(numbered(0)));
        // Both cores fault: no drop runs, both claims stay.
        core::mem::forget((sender, receiver));
        assert!(matches!(ring.sender(), Err(ChannelError::EndpointTaken)));
        assert!(matches!(ring.receiver(), Err(ChannelError::EndpointTaken)));
        // SAFETY: the first endpoints are never used again.
        let (mut sender, mut receiver) = unsafe { (ring.reclaim_sender(), ring.reclaim_receiver()) };
        for number in 3..7 {
            sender.send_spin(&numbered(number));
            assert_eq!(receiver.try_recv(), Some(numbered(number - 2)));
        }
        assert_eq!(receiver.try_recv(), Some(numbered(5)));
        assert_eq!(receiver.try_recv(), Some(numbered(6)));
        assert_eq!(receiver.try_recv(), None);
        // Reclaiming a free endpoint also works, and a dropped one resumes.
        drop(sender);
        // SAFETY: the sender was dropped; nothing uses it.
        let mut sender = unsafe { ring.reclaim_sender() };
        sender.try_send(&numbered(7)).unwrap();
        assert_eq!(receiver.try_recv(), Some(numbered(7)));
    }

    #[test]
    fn reclaimed_sender_passes_a_slot_published_before_its_position_was_saved() {
        let ring = Urpc::<4>::new_boxed();
        let mut sender = ring.sender().unwrap();
        sender.try_send(&numbered(0)).unwrap();
        core::mem::forget(sender);
        // Fake a death between publishing ticket 1 and saving position 2.
        // SAFETY: no endpoint writes slot 1 now.
        unsafe { ring.slots[1].write(&numbered(1)) };
        ring.slots[1].sequence.store(published_mark(1, 4), Ordering::Release);
        // SAFETY: the first sender is never used again.
        let mut sender = unsafe { ring.reclaim_sender() };
        sender.try_send(&numbered(2)).unwrap();
        let mut receiver = ring.receiver().unwrap();
        for number in 0..3 {
            assert_eq!(receiver.try_recv(), Some(numbered(number)));
        }
        assert_eq!(receiver.try_recv(), None);
    }

    #[test]
    fn zeroed_memory_is_an_empty_ring() {
        #[repr(C, align(64))]
        struct Region([u8; 64 * 10]);
        let mut region = std::boxed::Box::new(Region([0; 640]));
        let pointer = (&raw mut *region).cast::<Urpc<8>>();
        assert!(core::mem::size_of::<Urpc<8>>() <= 640);
        // SAFETY: the region is zeroed, 64-aligned, large enough, and only
        // used through this reference until it is dropped below.
        let ring = unsafe { Urpc::<8>::from_zeroed(pointer) };
        let mut receiver = ring.receiver().unwrap();
        assert!(receiver.try_recv().is_none());
        let mut sender = ring.sender().unwrap();
        sender.try_send(&numbered(5)).unwrap();
        assert_eq!(receiver.try_recv(), Some(numbered(5)));
    }

    #[test]
    fn two_threads_hundred_thousand_messages_in_order() {
        const COUNT: u64 = 100_000;
        let ring = Urpc::<64>::new_boxed();
        let ring = &*ring;
        thread::scope(|scope| {
            scope.spawn(|| send_numbered(ring, COUNT));
            let mut receiver = ring.receiver().unwrap();
            let mut checksum = 0u64;
            let mut expected_checksum = 0u64;
            for number in 0..COUNT {
                let message = loop {
                    match receiver.try_recv() {
                        Some(message) => break message,
                        None => thread::yield_now(),
                    }
                };
                message.validate().unwrap();
                assert_eq!(message, numbered(number), "message {number} out of order or torn");
                checksum = checksum
                    .wrapping_mul(31)
                    .wrapping_add(message.payload().iter().map(|&byte| u64::from(byte)).sum::<u64>());
                let reference = numbered(number);
                expected_checksum = expected_checksum
                    .wrapping_mul(31)
                    .wrapping_add(reference.payload().iter().map(|&byte| u64::from(byte)).sum::<u64>());
            }
            assert_eq!(checksum, expected_checksum);
            assert!(receiver.try_recv().is_none());
        });
    }
}
