//! The frame allocator of one kernel instance: a bitmap over its own partition only.

use crate::arch::paging::{physical_to_virtual, PAGE_SIZE};
use spin::Mutex;

/// A bitmap of the 4 KiB frames of `[base, base + frames * 4 KiB)`; a set bit is a used frame.
pub struct FrameAllocator {
    base: u64,
    frames: u64,
    bitmap: &'static mut [u64],
    free: u64,
    hint: usize,
}

/// Why a frame operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// No free frame is left in this instance's partition.
    OutOfMemory,
    /// The frame is outside this partition or was not allocated: a double free or a stray address.
    NotAllocated(u64),
}

impl FrameAllocator {
    /// Manages `[start, end)`; the bitmap itself is placed at `start` and marked used.
    ///
    /// # Safety
    /// `[start, end)` must be this instance's own, unused memory, mapped by its direct map.
    pub unsafe fn new(start: u64, end: u64) -> Self {
        let frames = (end - start) / PAGE_SIZE;
        let words = frames.div_ceil(64) as usize;
        // SAFETY: the caller gives us `[start, end)`; the bitmap fits in its first pages.
        let bitmap = unsafe {
            let pointer = physical_to_virtual(start) as *mut u64;
            core::ptr::write_bytes(pointer, 0, words);
            core::slice::from_raw_parts_mut(pointer, words)
        };
        let mut allocator = Self { base: start, frames, bitmap, free: frames, hint: 0 };
        let bitmap_frames = (words as u64 * 8).div_ceil(PAGE_SIZE);
        for frame in 0..bitmap_frames {
            allocator.mark_used(frame);
        }
        // Bits past the last frame never hold a frame.
        for frame in frames..(words as u64 * 64) {
            allocator.bitmap[(frame / 64) as usize] |= 1 << (frame % 64);
        }
        allocator
    }

    fn mark_used(&mut self, frame: u64) {
        self.bitmap[(frame / 64) as usize] |= 1 << (frame % 64);
        self.free -= 1;
    }

    /// Takes one frame (physical address), not zeroed.
    pub fn allocate(&mut self) -> Result<u64, FrameError> {
        let words = self.bitmap.len();
        for step in 0..words {
            let word = (self.hint + step) % words;
            let bits = self.bitmap[word];
            if bits != u64::MAX {
                let frame = word as u64 * 64 + u64::from((!bits).trailing_zeros());
                self.mark_used(frame);
                self.hint = word;
                return Ok(self.base + frame * PAGE_SIZE);
            }
        }
        Err(FrameError::OutOfMemory)
    }

    /// Takes `count` physically contiguous frames (the first's address), not zeroed: for
    /// buffers a device reads and writes by physical address. A first-fit scan of the bitmap.
    pub fn allocate_contiguous(&mut self, count: u64) -> Result<u64, FrameError> {
        if count == 0 || count > self.free {
            return Err(FrameError::OutOfMemory);
        }
        let used = |allocator: &Self, frame: u64| allocator.bitmap[(frame / 64) as usize] & (1 << (frame % 64)) != 0;
        let mut start = 0;
        while start + count <= self.frames {
            match (start..start + count).rev().find(|frame| used(self, *frame)) {
                // The run cannot start at or before a used frame: go past it.
                Some(taken) => start = taken + 1,
                None => {
                    for frame in start..start + count {
                        self.mark_used(frame);
                    }
                    return Ok(self.base + start * PAGE_SIZE);
                }
            }
        }
        Err(FrameError::OutOfMemory)
    }

    /// Gives one frame back.
    pub fn free(&mut self, physical: u64) -> Result<(), FrameError> {
        let frame = physical.wrapping_sub(self.base) / PAGE_SIZE;
        if physical < self.base || frame >= self.frames || !physical.is_multiple_of(PAGE_SIZE) {
            return Err(FrameError::NotAllocated(physical));
        }
        let bit = 1 << (frame % 64);
        let word = &mut self.bitmap[(frame / 64) as usize];
        if *word & bit == 0 {
            return Err(FrameError::NotAllocated(physical));
        }
        *word &= !bit;
        self.free += 1;
        Ok(())
    }

    /// Takes the free frame at `physical`: a frame a restart kept for this instance (a kept
    /// process's page, or the chain holding the images). `NotAllocated` when it is outside
    /// this allocator, unaligned or taken already.
    pub fn claim(&mut self, physical: u64) -> Result<(), FrameError> {
        let frame = physical.wrapping_sub(self.base) / PAGE_SIZE;
        if physical < self.base || frame >= self.frames || !physical.is_multiple_of(PAGE_SIZE) {
            return Err(FrameError::NotAllocated(physical));
        }
        if self.bitmap[(frame / 64) as usize] & (1 << (frame % 64)) != 0 {
            return Err(FrameError::NotAllocated(physical));
        }
        self.mark_used(frame);
        Ok(())
    }

    /// Where the direct map shows `frame`, if this allocator handed it out (or claimed it)
    /// and it is not one of the allocator's own bitmap frames.
    fn allocated_frame(&self, frame: u64) -> Result<*mut u8, FrameError> {
        let index = frame.wrapping_sub(self.base) / PAGE_SIZE;
        let bitmap_frames = (self.bitmap.len() as u64 * 8).div_ceil(PAGE_SIZE);
        let allocated = self.bitmap.get((index / 64) as usize).is_some_and(|word| word & (1 << (index % 64)) != 0);
        if frame < self.base
            || index >= self.frames
            || index < bitmap_frames
            || !allocated
            || !frame.is_multiple_of(PAGE_SIZE)
        {
            return Err(FrameError::NotAllocated(frame));
        }
        Ok(physical_to_virtual(frame) as *mut u8)
    }

    /// The bytes of `frame`, which this allocator handed out (or claimed) and which is not
    /// one of the allocator's own bitmap frames; borrowed from the allocator, so the frame
    /// cannot be freed and handed out again while the bytes are in use. For frames only the
    /// kernel uses (not a process's pages, which its threads may write meanwhile).
    pub fn frame_bytes(&mut self, frame: u64) -> Result<&mut [u8], FrameError> {
        let pointer = self.allocated_frame(frame)?;
        // SAFETY: the frame is in this instance's partition (which its direct map covers),
        // allocated (so no allocation of Rust's heap or the bitmap lies in it: the heap is
        // below the allocator's range, the bitmap frames are excluded), and the slice
        // borrows `self` mutably, so no free and re-allocation of it happens while it lives.
        Ok(unsafe { core::slice::from_raw_parts_mut(pointer, PAGE_SIZE as usize) })
    }

    /// Frames free now.
    pub fn free_frames(&self) -> u64 {
        self.free
    }

    /// Frames managed.
    pub fn total_frames(&self) -> u64 {
        self.frames
    }
}

/// This instance's allocator (private .bss: every instance has its own).
pub static FRAMES: Mutex<Option<FrameAllocator>> = Mutex::new(None);

/// Allocates one zeroed frame of this instance's partition.
pub fn allocate_zeroed() -> Result<u64, FrameError> {
    let frame = FRAMES.lock().as_mut().ok_or(FrameError::OutOfMemory)?.allocate()?;
    // SAFETY: the frame was just taken from this instance's partition, which its direct map covers.
    unsafe { core::ptr::write_bytes(physical_to_virtual(frame) as *mut u8, 0, PAGE_SIZE as usize) };
    Ok(frame)
}

/// Allocates `count` zeroed, physically contiguous frames of this instance's partition (the
/// first's address).
pub fn allocate_contiguous_zeroed(count: u64) -> Result<u64, FrameError> {
    let first = FRAMES.lock().as_mut().ok_or(FrameError::OutOfMemory)?.allocate_contiguous(count)?;
    // SAFETY: the frames were just taken from this instance's partition, which its direct map covers.
    unsafe { core::ptr::write_bytes(physical_to_virtual(first) as *mut u8, 0, (count * PAGE_SIZE) as usize) };
    Ok(first)
}

/// Runs `work` on the bytes of `frame`, an allocated frame of this instance (see
/// [`FrameAllocator::frame_bytes`]).
pub fn with_frame_bytes<T>(frame: u64, work: impl FnOnce(&mut [u8]) -> T) -> Result<T, FrameError> {
    let mut guard = FRAMES.lock();
    let allocator = guard.as_mut().ok_or(FrameError::NotAllocated(frame))?;
    Ok(work(allocator.frame_bytes(frame)?))
}

/// Runs `work` on `frame`, an allocated frame of this instance (a process's page), viewed as
/// a `T` made only of atomics (see [`crate::mm::window::SharedAtomics`]); the allocator stays
/// locked meanwhile, so the frame cannot be freed under the view.
pub fn with_frame_shared<T: crate::mm::window::SharedAtomics, R>(
    frame: u64,
    work: impl FnOnce(&T) -> R,
) -> Result<R, FrameError> {
    const { assert!(core::mem::size_of::<T>() <= PAGE_SIZE as usize && core::mem::align_of::<T>() <= PAGE_SIZE as usize) };
    let mut guard = FRAMES.lock();
    let allocator = guard.as_mut().ok_or(FrameError::NotAllocated(frame))?;
    let pointer = allocator.allocated_frame(frame)?;
    // SAFETY: an allocated frame of this instance, mapped by its direct map, which cannot be
    // freed while the allocator is locked (for the closure's length); a page is aligned and
    // large enough for `T` (asserted), and `T` is only atomics, valid for any bytes, so the
    // process writing the page meanwhile is no data race.
    let value = unsafe { &*(pointer as *const T) };
    Ok(work(value))
}

/// Frees one frame of this instance's partition.
pub fn free(frame: u64) -> Result<(), FrameError> {
    FRAMES.lock().as_mut().ok_or(FrameError::NotAllocated(frame))?.free(frame)
}

/// The lowest address a frame of this instance's allocator can have (0 before it exists).
pub fn first_address() -> u64 {
    FRAMES.lock().as_ref().map_or(0, |f| f.base)
}

/// (free, total) frames of this instance.
pub fn counts() -> (u64, u64) {
    FRAMES.lock().as_ref().map_or((0, 0), |f| (f.free_frames(), f.total_frames()))
}
