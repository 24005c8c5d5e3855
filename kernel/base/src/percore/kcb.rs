//! The Kernel Control Block (`kcb::block`, shared by every kernel image), and what the kernel
//! adds to it: the partition as a memory range.

pub use kcb::block::*;

/// The KCB's partition as a range of the memory map.
pub trait PartitionRange {
    /// The private partition `[start, end)`.
    fn partition(&self) -> platform::memmap::Range;
}

impl PartitionRange for Kcb {
    fn partition(&self) -> platform::memmap::Range {
        let (start, end) = self.partition_bounds();
        platform::memmap::Range { start, end }
    }
}
