//! Frames a service holds as plain pages (tmpfs contents, pipe buffers), read and written safely.
//!
//! A service that keeps data in whole frames (the file service's tmpfs and pipes) needs their
//! bytes as arrays. [`HeldFrames`] allocates the frames, remembers which it holds (a bit per
//! frame of the partition) and gives out their bytes only for frames it holds, borrowed from
//! itself: a frame's bytes cannot outlive the set, nor be written while they are read, nor be
//! used after the set freed the frame. The raw access stays here, in the memory manager.

use super::frames::{self, FrameError};
use crate::arch::paging::{physical_to_virtual, PAGE_SIZE};
use alloc::vec::Vec;

/// Bytes of one frame.
const FRAME_BYTES: usize = PAGE_SIZE as usize;

/// Frames of this instance's partition that one owner allocated and holds.
pub struct HeldFrames {
    /// The allocator's first address: bit `n` of `held` is the frame at `base + n * 4 KiB`.
    base: u64,
    /// A set bit is a frame this set allocated and has not freed; grown as frames come.
    held: Vec<u64>,
}

impl Default for HeldFrames {
    fn default() -> Self {
        Self::new()
    }
}

impl HeldFrames {
    /// A set holding no frame (over this instance's frame allocator).
    pub fn new() -> Self {
        Self { base: frames::first_address(), held: Vec::new() }
    }

    /// Where `frame`'s bit is: (word, mask), or `None` for an address this set never holds.
    fn bit(&self, frame: u64) -> Option<(usize, u64)> {
        if frame < self.base || !frame.is_multiple_of(PAGE_SIZE) {
            return None;
        }
        let index = usize::try_from((frame - self.base) / PAGE_SIZE).ok()?;
        Some((index / 64, 1 << (index % 64)))
    }

    /// Whether this set holds `frame`.
    pub fn holds(&self, frame: u64) -> bool {
        self.bit(frame).is_some_and(|(word, mask)| self.held.get(word).is_some_and(|bits| bits & mask != 0))
    }

    /// Allocates a zeroed frame of this instance's partition and holds it.
    pub fn allocate_zeroed(&mut self) -> Result<u64, FrameError> {
        let frame = frames::allocate_zeroed()?;
        let Some((word, mask)) = self.bit(frame) else {
            // Not one of the allocator's own: never happens; refused rather than held blind.
            let _ = frames::free(frame);
            return Err(FrameError::NotAllocated(frame));
        };
        if word >= self.held.len() {
            self.held.resize(word + 1, 0);
        }
        self.held[word] |= mask;
        Ok(frame)
    }

    /// Frees `frame`, which this set must hold (`NotAllocated` otherwise, and nothing is freed).
    pub fn free(&mut self, frame: u64) -> Result<(), FrameError> {
        if !self.holds(frame) {
            return Err(FrameError::NotAllocated(frame));
        }
        if let Some((word, mask)) = self.bit(frame) {
            self.held[word] &= !mask;
        }
        frames::free(frame)
    }

    /// The bytes of `frame`.
    ///
    /// # Panics
    /// If this set does not hold `frame`: a caller's bug that would otherwise read another
    /// owner's memory.
    pub fn bytes(&self, frame: u64) -> &[u8; FRAME_BYTES] {
        assert!(self.holds(frame), "frame {frame:#x} is not held");
        // SAFETY: (1) the set holds `frame`: it took it from this instance's allocator and has
        // not given it back, and no other code frees a frame it did not allocate (the
        // allocator's rule), so nothing else uses it; (2) the direct map covers the whole
        // partition, aligned to the frame; (3) the bytes borrow `self`, so the frame cannot be
        // freed, nor written through `bytes_mut`, while they live.
        unsafe { &*(physical_to_virtual(frame) as *const [u8; FRAME_BYTES]) }
    }

    /// The bytes of `frame`, to change them.
    ///
    /// # Panics
    /// If this set does not hold `frame`, as [`bytes`](Self::bytes).
    pub fn bytes_mut(&mut self, frame: u64) -> &mut [u8; FRAME_BYTES] {
        assert!(self.holds(frame), "frame {frame:#x} is not held");
        // SAFETY: as in `bytes` (1, 2); (3) the bytes borrow `self` mutably: no other reference
        // to any held frame's bytes lives meanwhile, and the frame cannot be freed.
        unsafe { &mut *(physical_to_virtual(frame) as *mut [u8; FRAME_BYTES]) }
    }
}

impl Drop for HeldFrames {
    /// Gives every frame held back to the allocator.
    fn drop(&mut self) {
        for (word, bits) in self.held.iter().enumerate() {
            for bit in 0..64 {
                if bits & (1 << bit) != 0 {
                    let _ = frames::free(self.base + (word as u64 * 64 + bit) * PAGE_SIZE);
                }
            }
        }
    }
}
