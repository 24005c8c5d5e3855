//! The kernel heap of one instance, carved from its own partition.

use crate::arch::paging::physical_to_virtual;
use linked_list_allocator::LockedHeap;

/// Heap size per instance.
pub const HEAP_SIZE: u64 = 16 * 1024 * 1024;

// Every instance has its own copy of this static (private .bss), so each heap is per core.
#[global_allocator]
static HEAP: LockedHeap = LockedHeap::empty();

/// Hands `[physical, physical + HEAP_SIZE)` of this instance's partition to the allocator.
///
/// # Safety
/// The range must be this instance's own unused memory, mapped by its direct map; call once.
pub unsafe fn init(physical: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { HEAP.lock().init(physical_to_virtual(physical) as *mut u8, HEAP_SIZE as usize) };
}

/// (used, free) heap bytes.
pub fn usage() -> (usize, usize) {
    let heap = HEAP.lock();
    (heap.used(), heap.free())
}
