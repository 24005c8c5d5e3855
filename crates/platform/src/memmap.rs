//! The physical memory map the firmware hands over, normalised for partitioning.

/// What a range of physical memory may be used for (E820 / PVH memmap types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// Ordinary RAM, free for the kernel.
    Usable,
    /// ACPI tables; readable, must not be reused before the tables are parsed.
    AcpiReclaimable,
    /// ACPI non-volatile storage.
    AcpiNvs,
    /// Reserved by firmware or devices.
    Reserved,
    /// Bad memory.
    Unusable,
}

impl RegionKind {
    /// Decodes an E820 type number (1 usable, 3 ACPI, 4 NVS, 5 bad; anything else reserved).
    pub fn from_e820(kind: u32) -> Self {
        match kind {
            1 => Self::Usable,
            3 => Self::AcpiReclaimable,
            4 => Self::AcpiNvs,
            5 => Self::Unusable,
            _ => Self::Reserved,
        }
    }
}

/// One range of physical memory: `[start, start + length)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// Length in bytes.
    pub length: u64,
    /// What the range is.
    pub kind: RegionKind,
}

impl Region {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.length)
    }
}

/// A usable range `[start, end)` after reserved ranges were cut out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl Range {
    /// Length in bytes.
    pub fn length(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, other: &Range) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// Most usable ranges Reef keeps; firmware maps have a handful.
pub const MAX_RANGES: usize = 64;

/// The usable RAM of a memory map, sorted, merged, with `reserved` ranges cut out.
#[derive(Clone, Debug)]
pub struct UsableMemory {
    ranges: [Range; MAX_RANGES],
    count: usize,
}

impl UsableMemory {
    /// Builds the usable set from firmware regions minus `reserved` ranges (kernel image, low memory).
    /// Overlapping usable regions are merged; a usable byte that any non-usable region also
    /// claims is dropped, since firmware maps sometimes overlap and reserved must win.
    pub fn new(regions: &[Region], reserved: &[Range]) -> Self {
        let mut set = Self { ranges: [Range { start: 0, end: 0 }; MAX_RANGES], count: 0 };
        for region in regions.iter().filter(|r| r.kind == RegionKind::Usable && r.length > 0) {
            set.add(Range { start: region.start, end: region.end() });
        }
        for region in regions.iter().filter(|r| r.kind != RegionKind::Usable && r.length > 0) {
            set.remove(Range { start: region.start, end: region.end() });
        }
        for range in reserved {
            set.remove(*range);
        }
        set
    }

    /// The usable ranges, sorted by address and disjoint.
    pub fn ranges(&self) -> &[Range] {
        &self.ranges[..self.count]
    }

    /// Total usable bytes.
    pub fn total(&self) -> u64 {
        self.ranges().iter().map(Range::length).sum()
    }

    fn add(&mut self, new: Range) {
        let mut merged = new;
        let mut kept = [Range { start: 0, end: 0 }; MAX_RANGES];
        let mut kept_count = 0;
        for range in self.ranges() {
            if range.start <= merged.end && merged.start <= range.end {
                merged.start = merged.start.min(range.start);
                merged.end = merged.end.max(range.end);
            } else {
                kept[kept_count] = *range;
                kept_count += 1;
            }
        }
        if kept_count < MAX_RANGES {
            kept[kept_count] = merged;
            kept_count += 1;
        }
        kept[..kept_count].sort_unstable_by_key(|r| r.start);
        self.ranges = kept;
        self.count = kept_count;
    }

    fn remove(&mut self, cut: Range) {
        let mut kept = [Range { start: 0, end: 0 }; MAX_RANGES];
        let mut kept_count = 0;
        for range in self.ranges() {
            let pieces = [
                Range { start: range.start, end: range.end.min(cut.start) },
                Range { start: range.start.max(cut.end), end: range.end },
            ];
            for piece in pieces {
                if piece.start < piece.end && kept_count < MAX_RANGES {
                    kept[kept_count] = piece;
                    kept_count += 1;
                }
            }
        }
        self.ranges = kept;
        self.count = kept_count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn merges_and_cuts_reserved() {
        let regions = [
            Region { start: 0, length: 640 * 1024, kind: RegionKind::Usable },
            Region { start: MIB, length: 100 * MIB, kind: RegionKind::Usable },
            Region { start: 50 * MIB, length: 100 * MIB, kind: RegionKind::Usable },
            Region { start: 120 * MIB, length: MIB, kind: RegionKind::Reserved },
        ];
        let usable = UsableMemory::new(&regions, &[Range { start: 0, end: 2 * MIB }]);
        assert_eq!(
            usable.ranges(),
            &[Range { start: 2 * MIB, end: 120 * MIB }, Range { start: 121 * MIB, end: 150 * MIB }]
        );
        assert_eq!(usable.total(), 118 * MIB + 29 * MIB);
    }

    #[test]
    fn reserved_wins_over_overlapping_usable() {
        let regions = [
            Region { start: 0, length: 10 * MIB, kind: RegionKind::Usable },
            Region { start: 4 * MIB, length: MIB, kind: RegionKind::AcpiReclaimable },
        ];
        let usable = UsableMemory::new(&regions, &[]);
        assert_eq!(usable.ranges().len(), 2);
        assert!(usable.ranges().iter().all(|r| !r.overlaps(&Range { start: 4 * MIB, end: 5 * MIB })));
    }
}
