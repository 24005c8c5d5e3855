//! Reference counts of the frames a fork shares, and what a write to one does.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::vec::Vec;

/// The references of the frames of one partition beyond the first, by frame index.
#[derive(Debug, Default)]
pub struct References {
    /// References beyond the first, per frame; empty until the first share.
    beyond_first: Vec<u16>,
    /// Frames of the partition (the table's length once made).
    frames: usize,
    /// The sum of `beyond_first`.
    extra: u64,
}

/// A share refused: the frame already has the most references a count holds, or its index
/// is outside the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CannotShare;

/// What dropping one reference left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// Others still map the frame: it stays allocated.
    StillShared,
    /// That was the last reference: the caller frees the frame.
    Last,
}

/// What a write fault on a copy-on-write page does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnWrite {
    /// Others map the frame: copy the page into a fresh frame, map that writable, drop one
    /// reference of the old.
    Copy,
    /// The faulting address space is the frame's only holder: make the entry writable again.
    Reuse,
}

/// What a write to a copy-on-write page whose frame has `references` does.
pub const fn on_write(references: u32) -> OnWrite {
    if references > 1 {
        OnWrite::Copy
    } else {
        OnWrite::Reuse
    }
}

impl References {
    /// The counts of a partition of `frames` frames (no table until the first share).
    pub const fn new(frames: usize) -> Self {
        Self { beyond_first: Vec::new(), frames, extra: 0 }
    }

    /// One more reference to frame `index` (allocated: the caller checked).
    pub fn share(&mut self, index: usize) -> Result<(), CannotShare> {
        if index >= self.frames {
            return Err(CannotShare);
        }
        if self.beyond_first.is_empty() {
            self.beyond_first.resize(self.frames, 0);
        }
        let count = &mut self.beyond_first[index];
        *count = count.checked_add(1).ok_or(CannotShare)?;
        self.extra += 1;
        Ok(())
    }

    /// One reference to frame `index` fewer.
    pub fn release(&mut self, index: usize) -> Released {
        match self.beyond_first.get_mut(index) {
            Some(count) if *count > 0 => {
                *count -= 1;
                self.extra -= 1;
                Released::StillShared
            }
            _ => Released::Last,
        }
    }

    /// The references of frame `index`, an allocated frame (at least one).
    pub fn of(&self, index: usize) -> u32 {
        1 + u32::from(self.beyond_first.get(index).copied().unwrap_or(0))
    }

    /// References beyond the first, summed over every frame: what the address spaces' own
    /// counts of the frames they map exceed the frames they hold by.
    pub fn extra(&self) -> u64 {
        self.extra
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_never_shared_has_one_reference_and_no_table() {
        let references = References::new(8);
        assert_eq!(references.of(3), 1);
        assert_eq!(references.extra(), 0);
        assert!(references.beyond_first.is_empty());
    }

    #[test]
    fn the_last_release_frees_and_earlier_ones_do_not() {
        let mut references = References::new(8);
        references.share(2).unwrap();
        references.share(2).unwrap();
        assert_eq!(references.of(2), 3);
        assert_eq!(references.extra(), 2);
        assert_eq!(references.release(2), Released::StillShared);
        assert_eq!(references.release(2), Released::StillShared);
        assert_eq!(references.of(2), 1);
        assert_eq!(references.release(2), Released::Last);
        assert_eq!(references.extra(), 0);
    }

    #[test]
    fn a_frame_never_shared_is_freed_at_its_release() {
        let mut references = References::new(8);
        assert_eq!(references.release(5), Released::Last);
        references.share(1).unwrap();
        assert_eq!(references.release(5), Released::Last);
        assert_eq!(references.extra(), 1);
    }

    #[test]
    fn a_count_past_its_width_or_a_frame_outside_is_refused() {
        let mut references = References::new(4);
        assert_eq!(references.share(4), Err(CannotShare));
        for _ in 0..u16::MAX {
            references.share(0).unwrap();
        }
        assert_eq!(references.share(0), Err(CannotShare));
        assert_eq!(references.of(0), 1 + u32::from(u16::MAX));
        assert_eq!(references.extra(), u64::from(u16::MAX));
    }

    #[test]
    fn a_write_copies_a_shared_frame_and_reuses_a_lone_one() {
        assert_eq!(on_write(2), OnWrite::Copy);
        assert_eq!(on_write(1), OnWrite::Reuse);
    }

    /// A fork, a fork of the child, and the three processes writing or ending in some order:
    /// the frame is freed exactly once, at the last holder, and `extra` is back to 0.
    #[test]
    fn every_order_of_three_holders_frees_once() {
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
        for order in orders {
            let mut references = References::new(1);
            references.share(0).unwrap();
            references.share(0).unwrap();
            let mut freed = 0;
            for (step, _holder) in order.iter().enumerate() {
                // A holder writing while others remain copies and releases; the last one
                // writing reuses the frame, and its end then frees it.
                if on_write(references.of(0)) == OnWrite::Reuse {
                    assert_eq!(step, 2);
                }
                if references.release(0) == Released::Last {
                    freed += 1;
                }
            }
            assert_eq!(freed, 1);
            assert_eq!(references.extra(), 0);
        }
    }
}
