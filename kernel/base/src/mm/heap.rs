//! The kernel heap of one instance, carved from its own partition.

use crate::arch::cpu::without_interrupts;
use crate::arch::paging::physical_to_virtual;
use core::alloc::{GlobalAlloc, Layout};
use linked_list_allocator::LockedHeap;

/// Heap size per instance.
pub const HEAP_SIZE: u64 = 16 * 1024 * 1024;

/// The instance's heap, whose lock is held with interrupts masked.
///
/// An interrupt handler allocates too (the timer's wake-ups grow the ready queue). Had it
/// interrupted kernel code holding the heap's spin lock, it would spin for it forever with
/// interrupts off. A core running a process of a few hundred threads, each sleeping 1 ms,
/// hung so under a loaded host: no timer tick any more, no message taken.
struct InterruptSafeHeap(LockedHeap);

// SAFETY: every call is `LockedHeap`'s own, made with interrupts masked on this core; the
// heap is this instance's alone (no other core touches it), so masking them makes the lock
// uncontended whenever it is taken.
unsafe impl GlobalAlloc for InterruptSafeHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        without_interrupts(|| unsafe { self.0.alloc(layout) })
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        without_interrupts(|| unsafe { self.0.dealloc(pointer, layout) })
    }
}

// Every instance has its own copy of this static (private .bss), so each heap is per core.
#[global_allocator]
static HEAP: InterruptSafeHeap = InterruptSafeHeap(LockedHeap::empty());

/// Hands `[physical, physical + HEAP_SIZE)` of this instance's partition to the allocator.
///
/// # Safety
/// The range must be this instance's own unused memory, mapped by its direct map; call once.
pub unsafe fn init(physical: u64) {
    // SAFETY: guaranteed by the caller.
    without_interrupts(|| unsafe { HEAP.0.lock().init(physical_to_virtual(physical) as *mut u8, HEAP_SIZE as usize) });
}

/// (used, free) heap bytes.
pub fn usage() -> (usize, usize) {
    without_interrupts(|| {
        let heap = HEAP.0.lock();
        (heap.used(), heap.free())
    })
}
