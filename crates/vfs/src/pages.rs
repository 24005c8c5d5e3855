//! Where file and pipe contents live: whole 4 KiB pages from a store, never the heap.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

/// Bytes in a page.
pub const PAGE_SIZE: usize = 4096;

/// Names one page of a [`PageStore`]; what the number means is the store's business (the
/// kernel's store uses the frame's physical address).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PageHandle(pub u64);

/// Where tmpfs keeps file contents, and pipes their buffers: whole 4 KiB pages. The kernel
/// heap is a few MiB and files are tens of MiB, so contents never go to the heap.
pub trait PageStore: Send {
    /// A zeroed page, or `None` when memory is exhausted (tmpfs answers `ENOSPC`).
    fn allocate(&mut self) -> Option<PageHandle>;

    /// Gives back a page [`PageStore::allocate`] returned; the caller no longer uses it.
    fn free(&mut self, page: PageHandle);

    /// The bytes of a page the caller holds.
    fn bytes(&self, page: PageHandle) -> &[u8; PAGE_SIZE];

    /// The bytes of a page the caller holds, to change them.
    fn bytes_mut(&mut self, page: PageHandle) -> &mut [u8; PAGE_SIZE];
}

/// A [`PageStore`] on the heap, for host tests and for a kernel that has heap to spare: a
/// vector of boxed pages, the free slots of which are reused first. It can be given a limit,
/// to test what happens when memory runs out.
#[derive(Default)]
pub struct HeapPageStore {
    /// The pages by handle; `None` for a slot freed and not reused yet.
    pages: Vec<Option<Box<[u8; PAGE_SIZE]>>>,
    /// Slots of `pages` that are `None`, reused before the vector grows.
    free_slots: Vec<usize>,
    /// The most pages allocated at once, `None` for as many as the heap holds.
    limit: Option<usize>,
}

impl HeapPageStore {
    /// A store with no limit but the heap's.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that refuses to hold more than `limit` pages at once.
    pub fn with_limit(limit: usize) -> Self {
        Self { limit: Some(limit), ..Self::default() }
    }

    /// Pages allocated and not freed.
    pub fn allocated(&self) -> usize {
        self.pages.len() - self.free_slots.len()
    }

    /// # Panics
    /// If `page` is not a page this store allocated and has not freed: a caller's bug that
    /// would otherwise corrupt another file's contents.
    fn slot(&self, page: PageHandle) -> usize {
        let slot = usize::try_from(page.0).unwrap_or(usize::MAX);
        assert!(self.pages.get(slot).is_some_and(Option::is_some), "page {page:?} is not allocated");
        slot
    }
}

impl PageStore for HeapPageStore {
    fn allocate(&mut self) -> Option<PageHandle> {
        if self.limit.is_some_and(|limit| self.allocated() >= limit) {
            return None;
        }
        // Built on the heap directly: a 4 KiB array on the stack first is what a kernel
        // stack can least afford.
        let page: Box<[u8; PAGE_SIZE]> = vec![0u8; PAGE_SIZE].into_boxed_slice().try_into().ok()?;
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.pages[slot] = Some(page);
                slot
            }
            None => {
                self.pages.push(Some(page));
                self.pages.len() - 1
            }
        };
        Some(PageHandle(slot as u64))
    }

    fn free(&mut self, page: PageHandle) {
        let slot = self.slot(page);
        self.pages[slot] = None;
        self.free_slots.push(slot);
    }

    fn bytes(&self, page: PageHandle) -> &[u8; PAGE_SIZE] {
        let slot = self.slot(page);
        self.pages[slot].as_deref().expect("checked by slot")
    }

    fn bytes_mut(&mut self, page: PageHandle) -> &mut [u8; PAGE_SIZE] {
        let slot = self.slot(page);
        self.pages[slot].as_deref_mut().expect("checked by slot")
    }
}

/// The store tmpfs takes its pages from, with the count of pages it holds and the most it may
/// hold, so that tmpfs fails with `ENOSPC` before it eats the memory processes need.
pub(crate) struct CountedPages {
    pub store: Box<dyn PageStore>,
    /// Pages tmpfs holds.
    pub used: usize,
    /// The most pages tmpfs may hold.
    pub limit: usize,
}

impl CountedPages {
    /// A zeroed page, or `None` at the limit or when the store is out of memory.
    pub fn allocate(&mut self) -> Option<PageHandle> {
        if self.used >= self.limit {
            return None;
        }
        let page = self.store.allocate()?;
        self.used += 1;
        Some(page)
    }

    pub fn free(&mut self, page: PageHandle) {
        self.store.free(page);
        self.used -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_zeroed_and_slots_are_reused() {
        let mut store = HeapPageStore::with_limit(2);
        let first = store.allocate().unwrap();
        store.bytes_mut(first)[7] = 7;
        let second = store.allocate().unwrap();
        assert_eq!(store.allocate(), None, "the limit holds");
        store.free(first);
        let third = store.allocate().unwrap();
        assert_eq!(third, first, "the freed slot is reused");
        assert_eq!(store.bytes(third)[7], 0, "and zeroed");
        assert_ne!(second, third);
        assert_eq!(store.allocated(), 2);
    }

    #[test]
    #[should_panic(expected = "not allocated")]
    fn a_freed_page_cannot_be_read() {
        let mut store = HeapPageStore::new();
        let page = store.allocate().unwrap();
        store.free(page);
        let _ = store.bytes(page);
    }
}
