//! The file page cache of this instance: the pages of files that processes map (`mmap` of a
//! file, which is how `ld.so` loads libc and every other library), one frame per page of a
//! file, mapped read-only into every process of this instance that maps the same page of
//! the same file. Ten `bash` processes hold one libc.
//!
//! A page is known by the file's version ([`FileVersion`]: device, inode, size and
//! modification time, from a `stat` of the open file at `mmap`) and its index: a file changed
//! since is another version, whose pages are read anew; pages of the old version stay with
//! the processes that map them (Linux leaves it unspecified whether a private mapping sees
//! later changes). A write to a page gets a private copy (the address space's copy on write).
//! A frame lives while some address space maps it (the base's shared-frame owner hooks count
//! the mappings) and goes back to the partition at the last unmap: the cache holds nothing
//! that no process maps, so the leak checks see no difference. Only files whose bytes change
//! only by writes are cached (the initramfs, tmpfs, shares: `vfs::pages_may_be_shared`), never
//! `/proc` or `/sys` files. The statics are this instance's own (`.bss` is per instance), so
//! each instance has its own cache; a process moving away takes private copies
//! (`AddressSpace::privatize_shared`).

use crate::mm::frames;
use abi::Errno;
use alloc::collections::BTreeMap;
use spin::Mutex;

/// Which file, as it was when its pages were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileVersion {
    pub device: u64,
    pub inode: u64,
    pub size: u64,
    pub modified_ns: u64,
}

impl FileVersion {
    /// The version of the file `metadata` describes, if its pages may be shared: only files
    /// whose bytes change only by writes (`vfs::pages_may_be_shared`).
    pub fn of(metadata: &abi::file::Metadata) -> Option<Self> {
        vfs::pages_may_be_shared(metadata.device).then_some(Self {
            device: metadata.device,
            inode: metadata.inode,
            size: metadata.size,
            modified_ns: metadata.modified_ns,
        })
    }
}

/// One cached page: what it holds, and how many address spaces map it (plus one while the
/// `mmap` that read it still holds it).
struct Page {
    key: (FileVersion, u64),
    holders: u32,
}

#[derive(Default)]
struct Cache {
    by_key: BTreeMap<(FileVersion, u64), u64>,
    by_frame: BTreeMap<u64, Page>,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache { by_key: BTreeMap::new(), by_frame: BTreeMap::new() });

/// What the cache holds now: (pages, mappings of them), for `/proc/reef/mem`.
pub fn counts() -> (usize, u64) {
    let cache = CACHE.lock();
    let mappings = cache.by_frame.values().map(|page| u64::from(page.holders)).sum();
    (cache.by_frame.len(), mappings)
}

/// Registers the cache as the owner of the base's shared frames (`boot`, once).
pub fn init() {
    crate::mm::user::register_shared_frames(crate::mm::user::SharedFrames { retain, release });
}

/// One more address space maps `frame`.
fn retain(frame: u64) {
    if let Some(page) = CACHE.lock().by_frame.get_mut(&frame) {
        page.holders += 1;
    }
}

/// One holder of `frame` fewer (an address space unmapped it, or [`page`]'s caller is done
/// with it): the last one gives the frame back to the partition.
pub fn release(frame: u64) {
    let mut cache = CACHE.lock();
    let Some(page) = cache.by_frame.get_mut(&frame) else {
        log::error!("file page cache: frame {frame:#x} released but not cached");
        return;
    };
    page.holders -= 1;
    if page.holders > 0 {
        return;
    }
    let key = page.key;
    cache.by_frame.remove(&frame);
    cache.by_key.remove(&key);
    drop(cache);
    if frames::free(frame).is_err() {
        log::error!("file page cache: frame {frame:#x} was not allocated");
    }
}

/// The cached frame of page `index` of `file`, held for the caller until it calls [`release`]
/// (after mapping it: the mapping holds it then), if there is one.
pub fn cached(file: FileVersion, index: u64) -> Option<u64> {
    hold((file, index))
}

/// Caches `bytes` (at most a page; the rest of the page is zero: bytes past the file's end)
/// as page `index` of `file` and returns its frame, held for the caller as [`cached`] does.
/// Two callers may read one page at once: the second's copy is dropped for the first's.
pub fn insert(file: FileVersion, index: u64, bytes: &[u8]) -> Result<u64, Errno> {
    let key = (file, index);
    let frame = frames::allocate_zeroed().map_err(|_| linux_raw_sys::errno::ENOMEM)?;
    let length = bytes.len().min(crate::arch::paging::PAGE_SIZE as usize);
    frames::with_frame_bytes(frame, |page| page[..length].copy_from_slice(&bytes[..length]))
        .map_err(|_| linux_raw_sys::errno::EIO)?;
    let mut cache = CACHE.lock();
    if let Some(&cached) = cache.by_key.get(&key) {
        if let Some(page) = cache.by_frame.get_mut(&cached) {
            page.holders += 1;
        }
        drop(cache);
        let _ = frames::free(frame);
        return Ok(cached);
    }
    cache.by_key.insert(key, frame);
    cache.by_frame.insert(frame, Page { key, holders: 1 });
    Ok(frame)
}

/// The cached frame of `key`, held once more, if there is one.
fn hold(key: (FileVersion, u64)) -> Option<u64> {
    let mut cache = CACHE.lock();
    let frame = *cache.by_key.get(&key)?;
    cache.by_frame.get_mut(&frame)?.holders += 1;
    Some(frame)
}
