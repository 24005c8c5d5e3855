//! A pipe's buffer: 64 KiB in a ring of pages taken when written and given back when read.

use crate::pages::{PageHandle, PageStore, PAGE_SIZE};

/// Bytes a pipe holds, as Linux's default (16 pages).
pub const PIPE_CAPACITY: usize = 16 * PAGE_SIZE;

/// Writes of at most this many bytes are atomic: written whole or not at all, never
/// interleaved with another writer's (POSIX `PIPE_BUF`, 4096 on Linux).
pub const PIPE_BUF: usize = linux_raw_sys::general::PIPE_BUF as usize;

/// Pages of the ring.
const SLOTS: usize = PIPE_CAPACITY / PAGE_SIZE;

/// The bytes written to a pipe and not read yet, in a ring of [`PIPE_CAPACITY`] bytes over
/// 16 page slots. A slot holds a page only while unread bytes lie in it: pages are taken
/// from the store when a write reaches them and given back as soon as reads have emptied
/// them, so an idle pipe holds no memory and a full one 16 pages. The ring knows no store
/// (a `Drop` could not reach one): a pipe dropped with bytes unread must be
/// [`released`](PipeBuffer::release) first, or its pages leak. Blocking, `EPIPE` and
/// `EAGAIN` are the service's: this is the buffer alone.
#[derive(Debug, Default)]
pub struct PipeBuffer {
    pages: [Option<PageHandle>; SLOTS],
    /// Ring offset of the first unread byte.
    start: usize,
    /// Unread bytes.
    length: usize,
}

impl PipeBuffer {
    /// An empty pipe, holding no page.
    pub const fn new() -> Self {
        Self { pages: [None; SLOTS], start: 0, length: 0 }
    }

    /// Bytes written and not read yet.
    pub fn len(&self) -> usize {
        self.length
    }

    /// Whether every byte written was read.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Bytes a write could add now.
    pub fn space(&self) -> usize {
        PIPE_CAPACITY - self.length
    }

    /// Pages taken from the store: those the unread bytes lie in.
    pub fn pages_held(&self) -> usize {
        self.pages.iter().filter(|page| page.is_some()).count()
    }

    /// Appends `data`, or as much of it as fits: how many bytes. A write of at most
    /// [`PIPE_BUF`] bytes is all or nothing: 0 unless there is room for all of it. 0 also
    /// when the store has no page for the first byte, with [`PipeBuffer::space`] still at
    /// least `data.len()`: the caller tells that from a full pipe and answers `ENOMEM`
    /// rather than waiting for a reader that will not come.
    pub fn write(&mut self, store: &mut dyn PageStore, data: &[u8]) -> usize {
        let atomic = data.len() <= PIPE_BUF;
        if atomic && data.len() > self.space() {
            return 0;
        }
        let mut wanted = data.len().min(self.space());
        let end = (self.start + self.length) % PIPE_CAPACITY;
        // Take the pages first, so that an atomic write that cannot get them all changes
        // nothing.
        let mut taken = [false; SLOTS];
        let mut offset = 0;
        while offset < wanted {
            let slot = (end + offset) % PIPE_CAPACITY / PAGE_SIZE;
            if self.pages[slot].is_none() {
                match store.allocate() {
                    Some(page) => {
                        self.pages[slot] = Some(page);
                        taken[slot] = true;
                    }
                    None if atomic => {
                        for (slot, taken) in taken.iter().enumerate() {
                            if let (true, Some(page)) = (*taken, self.pages[slot]) {
                                store.free(page);
                                self.pages[slot] = None;
                            }
                        }
                        return 0;
                    }
                    None => {
                        wanted = offset;
                        break;
                    }
                }
            }
            // To the start of the next page.
            offset += PAGE_SIZE - (end + offset) % PAGE_SIZE;
        }
        self.copy(wanted, end, |(page, within), done, length| {
            store.bytes_mut(page)[within..within + length].copy_from_slice(&data[done..done + length])
        });
        self.length += wanted;
        wanted
    }

    /// Takes up to `buffer.len()` bytes, oldest first: how many (0 when empty). Pages the
    /// read empties go back to the store.
    pub fn read(&mut self, store: &mut dyn PageStore, buffer: &mut [u8]) -> usize {
        let count = self.length.min(buffer.len());
        self.copy(count, self.start, |(page, within), done, length| {
            buffer[done..done + length].copy_from_slice(&store.bytes(page)[within..within + length])
        });
        self.start = (self.start + count) % PIPE_CAPACITY;
        self.length -= count;
        if self.length == 0 {
            // Writes after an emptying read start at a page boundary: fewer pages.
            self.start = 0;
        }
        for slot in 0..SLOTS {
            if !self.holds_unread(slot) {
                if let Some(page) = self.pages[slot].take() {
                    store.free(page);
                }
            }
        }
        count
    }

    /// Drops every unread byte and gives every page back: the last end closed.
    pub fn release(&mut self, store: &mut dyn PageStore) {
        for page in self.pages.iter_mut().filter_map(Option::take) {
            store.free(page);
        }
        self.start = 0;
        self.length = 0;
    }

    /// Whether unread bytes lie in `slot`.
    fn holds_unread(&self, slot: usize) -> bool {
        let (slot_start, slot_end) = (slot * PAGE_SIZE, (slot + 1) * PAGE_SIZE);
        let end = self.start + self.length;
        // The unread bytes are `start..end`, which may wrap past the ring's end to
        // `0..end - PIPE_CAPACITY`.
        let overlaps = |from: usize, to: usize| from < to && from < slot_end && slot_start < to;
        overlaps(self.start, end.min(PIPE_CAPACITY)) || overlaps(0, end.saturating_sub(PIPE_CAPACITY))
    }

    /// Calls `each((page, offset in page), done, length)` for the runs of `count` bytes from
    /// ring offset `from`, each within one page, in order; `done` counts the bytes before.
    fn copy(&self, count: usize, from: usize, mut each: impl FnMut((PageHandle, usize), usize, usize)) {
        let mut done = 0;
        while done < count {
            let position = (from + done) % PIPE_CAPACITY;
            let within = position % PAGE_SIZE;
            let length = (PAGE_SIZE - within).min(count - done);
            let page = self.pages[position / PAGE_SIZE].expect("the bytes' pages are held");
            each((page, within), done, length);
            done += length;
        }
    }
}
