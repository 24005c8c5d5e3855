//! The reassembler's memory is bounded and allocated fallibly: under an
//! allocator that refuses large blocks it reports `NoMemory`, never aborts.
#![cfg(not(loom))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use channel::{ChannelError, LargeMessageChunks, Reassembler};

/// Refuses any single allocation above `LIMIT` bytes.
struct LimitedAllocator;

static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

// SAFETY: forwards to `System`, or returns null, which `GlobalAlloc` allows
// for a failed allocation.
unsafe impl GlobalAlloc for LimitedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > LIMIT.load(Ordering::Relaxed) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` came from `System.alloc` with this layout.
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: LimitedAllocator = LimitedAllocator;

#[test]
fn refused_allocation_is_no_memory_and_bytes_held_is_bounded() {
    const LEN: usize = 1 << 20;
    let bytes = vec![0x5a; LEN];
    let chunks: Vec<_> = LargeMessageChunks::new(4, 1, &bytes).unwrap().collect();
    let mut reassembler = Reassembler::new(usize::MAX);
    assert_eq!(reassembler.bytes_held(), 0);

    // Only this thread allocates large blocks; the limit is below LEN.
    LIMIT.store(LEN / 2, Ordering::Relaxed);
    assert_eq!(reassembler.push(&chunks[0]), Err(ChannelError::NoMemory));
    LIMIT.store(usize::MAX, Ordering::Relaxed);
    assert!(!reassembler.is_collecting());
    assert_eq!(reassembler.bytes_held(), 0);

    // With memory, the buffer is exactly the announced length, allocated
    // once: it never grows while the chunks arrive.
    let (last, rest) = chunks.split_last().unwrap();
    for chunk in rest {
        assert_eq!(reassembler.push(chunk), Ok(None));
        assert_eq!(reassembler.bytes_held(), LEN);
    }
    assert_eq!(reassembler.push(last), Ok(Some((4, bytes))));
    assert_eq!(reassembler.bytes_held(), 0);

    // A maximum below the announced length refuses before allocating.
    let mut small = Reassembler::new(LEN - 1);
    assert_eq!(small.push(&chunks[0]), Err(ChannelError::TooLong));
    assert_eq!(small.bytes_held(), 0);
    // `reset` frees what a partial message held.
    assert_eq!(reassembler.push(&chunks[0]), Ok(None));
    assert_eq!(reassembler.bytes_held(), LEN);
    reassembler.reset();
    assert_eq!(reassembler.bytes_held(), 0);
}
