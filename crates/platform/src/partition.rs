//! The partition plan: one private partition per core plus one shared region.

use crate::memmap::{Range, UsableMemory};
use crate::{align_down, align_up, LARGE_PAGE_SIZE};

/// Most cores Reef plans for (the size of per-core tables in the shared region).
pub const MAX_CORES: usize = 64;

/// Why no plan could be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The plan asked for zero cores or more than [`MAX_CORES`].
    BadCoreCount(usize),
    /// No usable range can hold the shared region of the requested size.
    NoRoomForSharedRegion { requested: u64 },
    /// After the shared region, a core would get less than the minimum partition size.
    PartitionTooSmall { cores: usize, available: u64, minimum: u64 },
}

/// The memory plan of the whole machine, made once by the bootstrap core.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Channel windows, KCBs and the console lock: the only RAM two instances both write.
    pub shared: Range,
    partitions: [Range; MAX_CORES],
    count: usize,
}

impl Plan {
    /// Splits usable memory into a shared region of `shared_size` bytes and `cores` equal,
    /// 2 MiB-aligned partitions of at least `minimum_partition` bytes each. Partitions are
    /// contiguous; what cannot fill a whole partition stays unassigned rather than being split.
    pub fn new(
        usable: &UsableMemory,
        cores: usize,
        shared_size: u64,
        minimum_partition: u64,
    ) -> Result<Self, PlanError> {
        if cores == 0 || cores > MAX_CORES {
            return Err(PlanError::BadCoreCount(cores));
        }
        let shared_size = align_up(shared_size, LARGE_PAGE_SIZE);
        // Only the large-page-aligned interior of each range is useful.
        let mut ranges = [Range { start: 0, end: 0 }; crate::memmap::MAX_RANGES];
        let mut count = 0;
        for range in usable.ranges() {
            let start = align_up(range.start, LARGE_PAGE_SIZE);
            let end = align_down(range.end, LARGE_PAGE_SIZE);
            if start < end {
                ranges[count] = Range { start, end };
                count += 1;
            }
        }
        let ranges = &mut ranges[..count];
        // The shared region comes from the lowest range that holds it.
        let holder = ranges
            .iter()
            .position(|r| r.length() >= shared_size)
            .ok_or(PlanError::NoRoomForSharedRegion { requested: shared_size })?;
        let shared = Range { start: ranges[holder].start, end: ranges[holder].start + shared_size };
        ranges[holder].start = shared.end;

        let available: u64 = ranges.iter().map(Range::length).sum();
        let mut size = align_down(available / cores as u64, LARGE_PAGE_SIZE);
        // Contiguity can waste a tail per range: shrink until every core fits.
        loop {
            if size < minimum_partition.max(LARGE_PAGE_SIZE) {
                return Err(PlanError::PartitionTooSmall { cores, available, minimum: minimum_partition });
            }
            let fits: u64 = ranges.iter().map(|r| r.length() / size).sum();
            if fits >= cores as u64 {
                break;
            }
            size -= LARGE_PAGE_SIZE;
        }
        let mut plan = Self { shared, partitions: [Range { start: 0, end: 0 }; MAX_CORES], count: 0 };
        for range in ranges.iter() {
            let mut start = range.start;
            while start + size <= range.end && plan.count < cores {
                plan.partitions[plan.count] = Range { start, end: start + size };
                plan.count += 1;
                start += size;
            }
        }
        Ok(plan)
    }

    /// The private partition of every core, indexed by logical core id.
    pub fn partitions(&self) -> &[Range] {
        &self.partitions[..self.count]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memmap::{Region, RegionKind};
    use proptest::prelude::*;

    const MIB: u64 = 1024 * 1024;

    fn usable(regions: &[(u64, u64)]) -> UsableMemory {
        let regions: std::vec::Vec<Region> =
            regions.iter().map(|&(start, length)| Region { start, length, kind: RegionKind::Usable }).collect();
        UsableMemory::new(&regions, &[Range { start: 0, end: 4 * MIB }])
    }

    fn check_invariants(plan: &Plan, memory: &UsableMemory, cores: usize) {
        assert_eq!(plan.partitions().len(), cores);
        let inside = |r: &Range| memory.ranges().iter().any(|u| u.start <= r.start && r.end <= u.end);
        assert!(inside(&plan.shared));
        for (i, a) in plan.partitions().iter().enumerate() {
            assert!(inside(a), "partition {i} outside usable memory");
            assert_eq!(a.start % LARGE_PAGE_SIZE, 0);
            assert_eq!(a.end % LARGE_PAGE_SIZE, 0);
            assert!(!a.overlaps(&plan.shared), "partition {i} overlaps the shared region");
            for b in &plan.partitions()[i + 1..] {
                assert!(!a.overlaps(b));
            }
        }
    }

    #[test]
    fn four_cores_in_512_mib() {
        let memory = usable(&[(0, 640 * 1024), (MIB, 511 * MIB)]);
        let plan = Plan::new(&memory, 4, 16 * MIB, 8 * MIB).unwrap();
        check_invariants(&plan, &memory, 4);
        assert_eq!(plan.shared, Range { start: 4 * MIB, end: 20 * MIB });
        assert_eq!(plan.partitions()[0].length(), 122 * MIB);
    }

    #[test]
    fn refuses_too_many_cores() {
        let memory = usable(&[(MIB, 63 * MIB)]);
        assert!(matches!(Plan::new(&memory, 16, 16 * MIB, 8 * MIB), Err(PlanError::PartitionTooSmall { .. })));
        assert_eq!(Plan::new(&memory, 0, 16 * MIB, 8 * MIB).unwrap_err(), PlanError::BadCoreCount(0));
    }

    #[test]
    fn split_memory_with_hole() {
        // Below and above a 3 GiB PCI hole, as on a pc machine with 4 GiB.
        let memory = usable(&[(MIB, 3071 * MIB), (4096 * MIB, 1024 * MIB)]);
        let plan = Plan::new(&memory, 8, 16 * MIB, 8 * MIB).unwrap();
        check_invariants(&plan, &memory, 8);
    }

    proptest! {
        #[test]
        fn plans_never_overlap(
            pieces in proptest::collection::vec((0u64..4096, 1u64..1024), 1..6),
            cores in 1usize..=16,
        ) {
            let regions: std::vec::Vec<(u64, u64)> = pieces.iter().map(|&(s, l)| (s * MIB, l * MIB)).collect();
            let memory = usable(&regions);
            if let Ok(plan) = Plan::new(&memory, cores, 16 * MIB, 4 * MIB) {
                check_invariants(&plan, &memory, cores);
            }
        }
    }
}
