//! The process's side: post calls into free entries, in ring order, and collect their values.

use crate::page::{status, Header, Page, ARGUMENTS, ENTRIES};
use crate::sync::Ordering;

/// Every entry of the ring holds a call whose value was not taken yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl core::fmt::Display for Full {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        formatter.write_str("every syspage entry holds a call whose value was not taken yet")
    }
}

/// The submitter's private state for one syspage (user space, one thread): the next entry to
/// post into, the next sequence number, and which entries hold calls it posted whose values it
/// has not taken. Entries are posted in ring order, so the kernel core, which takes them in
/// ring order, executes them in the order they were posted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Submitter {
    next: usize,
    sequence: u32,
    /// Bit `i`: entry `i` holds a call posted here whose value was not taken.
    outstanding: u64,
}

impl Submitter {
    /// The state for a fresh page: entry 0 next, sequence 0, nothing outstanding.
    pub const fn new() -> Self {
        Submitter { next: 0, sequence: 0, outstanding: 0 }
    }

    /// Posts system call `number` with `arguments` into the next entry and returns its index.
    /// [`Full`] when that entry still holds a call whose value was not taken (the ring is full
    /// from there: entries are used in order).
    #[inline]
    pub fn add(&mut self, page: &Page, number: u32, arguments: [u64; ARGUMENTS]) -> Result<usize, Full> {
        let index = self.next;
        if self.outstanding & (1 << index) != 0 {
            return Err(Full);
        }
        let entry = &page.entries[index];
        for (word, argument) in entry.arguments.iter().zip(arguments) {
            word.store(argument, Ordering::Relaxed);
        }
        let header = Header { status: status::SUBMITTED, sequence: self.sequence, number };
        // Release: the arguments stored above are visible to the kernel core that sees
        // `submitted` with Acquire (Memsc 4.5: the status is written last).
        entry.header.store(header.pack(), Ordering::Release);
        self.outstanding |= 1 << index;
        self.next = (index + 1) % ENTRIES;
        self.sequence = self.sequence.wrapping_add(1) & Header::SEQUENCE_MASK;
        Ok(index)
    }

    /// Whether entry `index` (modulo [`ENTRIES`]) is done: its value is there to take.
    #[inline]
    pub fn is_done(page: &Page, index: usize) -> bool {
        page.entry(index).header().status == status::DONE
    }

    /// The value of the call posted into entry `index`, if it is done: reads it and frees the
    /// entry, once (Memsc's `retval`). `None` when the call is not done yet, or when `index`
    /// holds no call posted here whose value was not taken (taking twice gives `None`).
    #[inline]
    pub fn take_value(&mut self, page: &Page, index: usize) -> Option<i64> {
        if !self.is_pending(index) {
            return None;
        }
        let entry = &page.entries[index];
        // Acquire (in `header`): pairs with the kernel core's Release when it marked the entry
        // done, so the value read next is the one it wrote.
        let header = entry.header();
        if header.status != status::DONE {
            return None;
        }
        let value = entry.value.load(Ordering::Relaxed) as i64;
        // Relaxed: the kernel core does nothing with a free entry; the next write to it is this
        // submitter's own `add`, which publishes with Release.
        entry.header.store(Header { status: status::FREE, ..header }.pack(), Ordering::Relaxed);
        self.outstanding &= !(1 << index);
        Some(value)
    }

    /// How many calls were posted whose values were not taken.
    #[inline]
    pub fn pending(&self) -> usize {
        self.outstanding.count_ones() as usize
    }

    /// Whether entry `index` holds a call posted here whose value was not taken.
    #[inline]
    pub fn is_pending(&self, index: usize) -> bool {
        index < ENTRIES && self.outstanding & (1 << index) != 0
    }

    /// The entries holding calls posted here whose values were not taken, oldest first.
    pub fn pending_entries(&self) -> impl Iterator<Item = usize> {
        let submitter = *self;
        (0..ENTRIES)
            .map(move |step| (submitter.next + step) % ENTRIES)
            .filter(move |&index| submitter.is_pending(index))
    }

    /// The entry of the oldest call whose value was not taken. The kernel core takes calls in
    /// ring order, but it need not complete them in that order (Reef's KC answers some calls
    /// at once and hands the others to the process's home), so a later call may be done
    /// before this one.
    pub fn oldest_pending(&self) -> Option<usize> {
        self.pending_entries().next()
    }

    /// The entry of the newest call whose value was not taken.
    pub fn newest_pending(&self) -> Option<usize> {
        self.pending_entries().last()
    }

    /// The entry the next [`add`](Self::add) posts into.
    pub fn next_index(&self) -> usize {
        self.next
    }
}
