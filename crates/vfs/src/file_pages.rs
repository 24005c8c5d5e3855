//! A tmpfs file's contents: a size and a sparse map from page index to page.

use crate::pages::{CountedPages, PageHandle, PageStore, PAGE_SIZE};
use crate::{Errno, MAX_FILE_SIZE};
use alloc::collections::BTreeMap;
use linux_raw_sys::errno::{EFBIG, ENOSPC};

/// `PAGE_SIZE` as a file offset.
const PAGE: u64 = PAGE_SIZE as u64;

/// The contents of a regular tmpfs file. A page not in the map is a hole and reads as zeros.
/// Invariant: every byte of a page at or past `size` is zero, so growing the file (by a
/// write past the end or a truncation) shows zeros without touching any page.
#[derive(Default, Debug)]
pub(crate) struct FilePages {
    size: u64,
    pages: BTreeMap<u64, PageHandle>,
}

impl FilePages {
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Pages holding data.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Copies the bytes from `offset` into `buffer`, up to the end of the file; holes read as
    /// zeros. Returns how many bytes were copied, 0 at or past the end.
    pub fn read(&self, store: &dyn PageStore, offset: u64, buffer: &mut [u8]) -> usize {
        let available = self.size.saturating_sub(offset);
        let length = usize::try_from(available).map_or(buffer.len(), |available| available.min(buffer.len()));
        let mut done = 0;
        while done < length {
            let position = offset + done as u64;
            let within = (position % PAGE) as usize;
            let chunk = (PAGE_SIZE - within).min(length - done);
            let target = &mut buffer[done..done + chunk];
            match self.pages.get(&(position / PAGE)) {
                Some(&page) => target.copy_from_slice(&store.bytes(page)[within..within + chunk]),
                None => target.fill(0),
            }
            done += chunk;
        }
        length
    }

    /// Copies `data` into the file at `offset`, allocating the pages it lands on that are
    /// holes. When pages run out, what landed on the pages there were stays written and its
    /// length is returned; `ENOSPC` only when not one byte could be written. A write reaching
    /// past [`MAX_FILE_SIZE`] is cut there; one starting there is `EFBIG`.
    pub fn write(&mut self, pages: &mut CountedPages, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        if data.is_empty() {
            return Ok(0);
        }
        if offset >= MAX_FILE_SIZE {
            return Err(EFBIG);
        }
        let length = usize::try_from(MAX_FILE_SIZE - offset).map_or(data.len(), |room| room.min(data.len()));
        let mut done = 0;
        while done < length {
            let position = offset + done as u64;
            let within = (position % PAGE) as usize;
            let chunk = (PAGE_SIZE - within).min(length - done);
            let page = match self.pages.get(&(position / PAGE)) {
                Some(&page) => page,
                None => match pages.allocate() {
                    Some(page) => {
                        self.pages.insert(position / PAGE, page);
                        page
                    }
                    None => break,
                },
            };
            pages.store.bytes_mut(page)[within..within + chunk].copy_from_slice(&data[done..done + chunk]);
            done += chunk;
        }
        if done == 0 {
            return Err(ENOSPC);
        }
        self.size = self.size.max(offset + done as u64);
        Ok(done)
    }

    /// Makes the file `size` bytes long: shrinking frees every page wholly past the new end
    /// and zeroes the rest of the last one (the invariant); growing leaves a hole.
    pub fn truncate(&mut self, pages: &mut CountedPages, size: u64) -> Result<(), Errno> {
        if size > MAX_FILE_SIZE {
            return Err(EFBIG);
        }
        if size < self.size {
            for (_, page) in self.pages.split_off(&size.div_ceil(PAGE)) {
                pages.free(page);
            }
            let within = (size % PAGE) as usize;
            if within != 0 {
                if let Some(&page) = self.pages.get(&(size / PAGE)) {
                    pages.store.bytes_mut(page)[within..].fill(0);
                }
            }
        }
        self.size = size;
        Ok(())
    }

    /// Gives every page back: the file is being freed.
    pub fn release(&mut self, pages: &mut CountedPages) {
        for (_, page) in core::mem::take(&mut self.pages) {
            pages.free(page);
        }
        self.size = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::HeapPageStore;
    use alloc::boxed::Box;
    use alloc::vec;

    fn pages(limit: usize) -> CountedPages {
        CountedPages { store: Box::new(HeapPageStore::new()), used: 0, limit }
    }

    #[test]
    fn holes_read_as_zeros_and_take_no_page() {
        let mut pages = pages(10);
        let mut file = FilePages::default();
        assert_eq!(file.write(&mut pages, 3 * PAGE + 5, b"abc"), Ok(3));
        assert_eq!((file.size(), file.page_count(), pages.used), (3 * PAGE + 8, 1, 1));
        let mut buffer = vec![1u8; 4 * PAGE_SIZE];
        assert_eq!(file.read(&*pages.store, 0, &mut buffer), 3 * PAGE_SIZE + 8);
        assert!(buffer[..3 * PAGE_SIZE + 5].iter().all(|&byte| byte == 0));
        assert_eq!(&buffer[3 * PAGE_SIZE + 5..3 * PAGE_SIZE + 8], b"abc");
        assert_eq!(file.read(&*pages.store, 3 * PAGE + 8, &mut buffer), 0);
    }

    #[test]
    fn a_write_across_pages_stops_where_pages_run_out() {
        let mut pages = pages(2);
        let mut file = FilePages::default();
        let data = vec![7u8; 3 * PAGE_SIZE];
        assert_eq!(file.write(&mut pages, 100, &data), Ok(2 * PAGE_SIZE - 100));
        assert_eq!(file.size(), 2 * PAGE);
        assert_eq!(file.write(&mut pages, 2 * PAGE, b"x"), Err(ENOSPC));
        // Pages already held take writes whatever the limit.
        assert_eq!(file.write(&mut pages, 0, b"y"), Ok(1));
    }

    #[test]
    fn truncation_frees_pages_and_zeroes_the_tail() {
        let mut pages = pages(10);
        let mut file = FilePages::default();
        file.write(&mut pages, 0, &vec![9u8; 3 * PAGE_SIZE]).unwrap();
        file.truncate(&mut pages, PAGE + 10).unwrap();
        assert_eq!((file.page_count(), pages.used), (2, 2));
        file.truncate(&mut pages, 3 * PAGE).unwrap();
        let mut buffer = vec![1u8; 3 * PAGE_SIZE];
        assert_eq!(file.read(&*pages.store, 0, &mut buffer), 3 * PAGE_SIZE);
        assert!(buffer[..PAGE_SIZE + 10].iter().all(|&byte| byte == 9));
        assert!(buffer[PAGE_SIZE + 10..].iter().all(|&byte| byte == 0));
        assert_eq!(file.truncate(&mut pages, MAX_FILE_SIZE + 1), Err(EFBIG));
        file.truncate(&mut pages, PAGE).unwrap();
        assert_eq!(pages.used, 1, "a page ending exactly at the new size stays");
        file.release(&mut pages);
        assert_eq!(pages.used, 0);
    }

    #[test]
    fn the_size_limit_cuts_writes() {
        let mut pages = pages(10);
        let mut file = FilePages::default();
        assert_eq!(file.write(&mut pages, MAX_FILE_SIZE - 2, b"abcd"), Ok(2));
        assert_eq!(file.write(&mut pages, MAX_FILE_SIZE, b"a"), Err(EFBIG));
        assert_eq!(file.write(&mut pages, u64::MAX, b"a"), Err(EFBIG));
        assert_eq!(file.write(&mut pages, u64::MAX, b""), Ok(0));
    }
}
