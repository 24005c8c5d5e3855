//! The page: 64 entries of 64 bytes, and the header word that says what each entry holds.

use crate::sync::{AtomicU64, Ordering};

/// Entries in one syspage: a 4 KiB page of 64-byte entries. (Loom models use a ring of two, so
/// that three calls wrap it.)
#[cfg(not(loom))]
pub const ENTRIES: usize = 64;
/// Entries in one syspage: a ring of two under loom, so that three calls wrap it.
#[cfg(loom)]
pub const ENTRIES: usize = 2;

/// Bytes of one page, and of one syspage.
pub const PAGE_SIZE: usize = 4096;
/// Bytes of one entry: one cache line, so the process and the kernel core never share a line
/// between two entries (Memsc 3.2: no false sharing).
pub const ENTRY_SIZE: usize = 64;
/// Arguments of a system call (Linux x86-64: `rdi, rsi, rdx, r10, r8, r9`).
pub const ARGUMENTS: usize = 6;

/// The values of [`Header::status`].
pub mod status {
    /// The entry is the submitter's: nothing for the kernel core to do.
    pub const FREE: u8 = 0;
    /// The submitter posted a call: the kernel core takes it when it is the ring's head.
    pub const SUBMITTED: u8 = 1;
    /// The kernel core executed the call and wrote its value: the submitter reads it, then
    /// frees the entry.
    pub const DONE: u8 = 2;
    /// The kernel core took the call (copied it and claimed the entry) and has not completed
    /// it yet. Without this state a taken call that is still being executed elsewhere (handed
    /// to the process's home) would look submitted when the head comes round to it again
    /// after a wrap, and would be taken, and executed, a second time.
    pub const TAKEN: u8 = 3;
}

/// The header word of an entry, unpacked. In the 64-bit word:
///
/// | bits | field |
/// |------|-------|
/// | 0..8 | `status` ([`status::FREE`], [`status::SUBMITTED`], [`status::TAKEN`], [`status::DONE`]; anything else is garbage the process wrote, and means nothing) |
/// | 8..32 | `sequence`: the submitter's count of calls, modulo 2^24 |
/// | 32..64 | `number`: the system call's number |
///
/// One word, so one atomic store publishes status, sequence and number together, and one
/// compare-exchange checks all three ([`complete`](crate::complete)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Bits 0..8.
    pub status: u8,
    /// Bits 8..32; only the low 24 bits are kept.
    pub sequence: u32,
    /// Bits 32..64.
    pub number: u32,
}

impl Header {
    /// The sequence numbers a header holds: 24 bits.
    pub const SEQUENCE_MASK: u32 = (1 << 24) - 1;

    /// The header as its word (the sequence cut to 24 bits).
    #[inline]
    pub const fn pack(self) -> u64 {
        self.status as u64 | ((self.sequence & Self::SEQUENCE_MASK) as u64) << 8 | (self.number as u64) << 32
    }

    /// The fields of a header word; every word is some header.
    #[inline]
    pub const fn unpack(word: u64) -> Self {
        Header { status: word as u8, sequence: (word >> 8) as u32 & Self::SEQUENCE_MASK, number: (word >> 32) as u32 }
    }
}

/// One system-call entry: exactly one cache line.
///
/// The fields are atomics because two sides that trust each other no further than the protocol
/// write them: the process (which may write anything, at any time, into its own syspage) and
/// the kernel core. Which side may write what when is the protocol of [`Ring`](crate::Ring),
/// [`complete`](crate::complete) and [`Submitter`](crate::Submitter).
#[repr(C, align(64))]
pub struct Entry {
    /// A [`Header`] word; its status says whose the entry is.
    pub header: AtomicU64,
    /// The call's arguments, written by the submitter before it publishes the header.
    pub arguments: [AtomicU64; ARGUMENTS],
    /// The call's return value, Linux's convention (`-errno` for an error, `-4095..=-1`),
    /// written by the kernel core before it marks the entry done.
    pub value: AtomicU64,
}

impl Entry {
    const_unless_loom! {
        /// A free entry, all zero.
        pub fn new() -> Self {
            Entry { header: AtomicU64::new(0), arguments: array_of![AtomicU64::new(0); ARGUMENTS], value: AtomicU64::new(0) }
        }
    }

    /// The header, read with Acquire: what the writer of this header wrote before it (the
    /// arguments, or the value) is visible after.
    #[inline]
    pub fn header(&self) -> Header {
        Header::unpack(self.header.load(Ordering::Acquire))
    }
}

impl Default for Entry {
    fn default() -> Self {
        Self::new()
    }
}

/// A syspage: a ring of [`ENTRIES`] entries, one page, page-aligned. All-zero bytes are a
/// fresh syspage (every entry free), so a freshly mapped anonymous page is one.
#[repr(C, align(4096))]
pub struct Page {
    /// The ring, processed in index order, wrapping from the last to the first.
    pub entries: [Entry; ENTRIES],
}

impl Page {
    const_unless_loom! {
        /// A fresh syspage: every entry free.
        pub fn new() -> Self {
            Page { entries: array_of![Entry::new(); ENTRIES] }
        }
    }

    /// The entry at `index` modulo [`ENTRIES`] (an index from anywhere never panics).
    #[inline]
    pub fn entry(&self, index: usize) -> &Entry {
        &self.entries[index % ENTRIES]
    }

    /// How many entries are not free: what a leak check after a run expects to be 0.
    pub fn nr_in_use(&self) -> usize {
        self.entries.iter().filter(|entry| entry.header().status != status::FREE).count()
    }
}

impl Default for Page {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::size_of::<Entry>() == ENTRY_SIZE);
    assert!(core::mem::align_of::<Entry>() == ENTRY_SIZE);
    assert!(core::mem::size_of::<Page>() == PAGE_SIZE);
    assert!(core::mem::align_of::<Page>() == PAGE_SIZE);
    assert!(ENTRIES * ENTRY_SIZE == PAGE_SIZE);
};
// The submitter keeps one bit per entry in a u64.
const _: () = assert!(ENTRIES <= 64);
