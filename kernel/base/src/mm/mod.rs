//! Memory of one kernel instance: its partition's frames, its heap, its address space.

pub mod address_space;
pub mod borrowed;
pub mod frames;
pub mod grant;
pub mod heap;
pub mod held_frames;
pub mod image;
pub mod plain;
pub mod user;
pub mod window;

use core::sync::atomic::{AtomicBool, Ordering};

// Whether this instance handed its partition to the heap and the frame allocator (private
// .data: every instance starts with it clear).
static MEMORY_GIVEN: AtomicBool = AtomicBool::new(false);

/// At instance entry: hands this instance's own partition to its heap (first) and its frame
/// allocator (the rest up to the partition's end). Only the first call does anything.
pub fn init_instance_memory() {
    if MEMORY_GIVEN.swap(true, Ordering::AcqRel) {
        return;
    }
    use crate::percore::kcb::PartitionRange;
    let partition = crate::percore::shared::this_kcb().partition();
    // The same place for every image (the boot driver keeps the reserve below it).
    let heap_start = partition.start + ::kcb::block::INSTANCE_RESERVE;
    // SAFETY: `[heap_start, partition.end)` is this instance's own partition past the instance
    // reserve, where the boot driver laid out nothing (its builder stays inside the reserve),
    // and the instance's direct map covers it; the flag above makes this the only hand-over.
    unsafe {
        heap::init(heap_start);
        *frames::FRAMES.lock() = Some(frames::FrameAllocator::new(heap_start + heap::HEAP_SIZE, partition.end));
    }
}
