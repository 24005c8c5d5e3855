//! The boot window: where a boot driver sees an offline core's partition while preparing it.
//!
//! A running instance maps nothing of another partition; the window is mapped only for the
//! duration of one start, then removed and flushed.

use crate::arch::paging::{
    current_root, flags, flush_page, physical_to_virtual, BOOT_WINDOW_BASE, LARGE_PAGE_SIZE, PAGE_SIZE,
};
use crate::mm::frames::{self, FrameError};
use platform::memmap::Range;

fn entry(table: u64, index: u64) -> *mut u64 {
    // SAFETY: page tables of this instance live in its partition, covered by its direct map.
    unsafe { (physical_to_virtual(table) as *mut u64).add(index as usize) }
}

fn next_table(table: u64, index: u64) -> Result<u64, FrameError> {
    let slot = entry(table, index);
    // SAFETY: `slot` points into one of this instance's page tables (see `entry`).
    let value = unsafe { slot.read() };
    if value & flags::PRESENT != 0 {
        return Ok(value & flags::ADDRESS_MASK);
    }
    let new = frames::allocate_zeroed()?;
    // SAFETY: as above; `new` is a zeroed frame of this instance.
    unsafe { slot.write(new | flags::PRESENT | flags::WRITABLE) };
    Ok(new)
}

fn for_each_large_page(
    partition: Range,
    mut visit: impl FnMut(u64, u64) -> Result<(), FrameError>,
) -> Result<(), FrameError> {
    let mut offset = 0;
    while partition.start + offset < partition.end {
        visit(BOOT_WINDOW_BASE + offset, partition.start + offset)?;
        offset += LARGE_PAGE_SIZE;
    }
    Ok(())
}

/// The boot window while it shows one partition; dropping it removes the mapping.
pub struct Window {
    partition: Range,
}

impl Window {
    /// Maps `partition` (2 MiB aligned, another core's, which no running instance owns while
    /// the caller holds the boot-driver lock for it) at the boot window.
    pub fn open(partition: Range) -> Result<Self, FrameError> {
        map(partition)?;
        Ok(Self { partition })
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        unmap(self.partition);
    }
}

// SAFETY: while the window exists, `map` made every page of the partition writable at
// `BOOT_WINDOW_BASE + offset`; the pointer is computed only for physical addresses inside it.
unsafe impl crate::mm::address_space::PhysicalView for Window {
    fn pointer(&self, physical: u64) -> *mut u8 {
        assert!(self.partition.start <= physical && physical < self.partition.end, "outside the boot window");
        (BOOT_WINDOW_BASE + (physical - self.partition.start)) as *mut u8
    }
}

/// Maps `partition` (2 MiB aligned) at the boot window, writable, no-execute.
pub fn map(partition: Range) -> Result<(), FrameError> {
    let root = current_root();
    for_each_large_page(partition, |virtual_address, physical| {
        let pdpt = next_table(root, (virtual_address >> 39) & 511)?;
        let pd = next_table(pdpt, (virtual_address >> 30) & 511)?;
        // SAFETY: a page directory of this instance; the window's addresses map nothing else.
        unsafe {
            entry(pd, (virtual_address >> 21) & 511)
                .write(physical | flags::PRESENT | flags::WRITABLE | flags::LARGE | flags::NO_EXECUTE)
        };
        flush_page(virtual_address);
        Ok(())
    })
}

/// Removes the window mapping of `partition` and flushes it from this core's TLB.
pub fn unmap(partition: Range) {
    let root = current_root();
    let _ = for_each_large_page(partition, |virtual_address, _| {
        // The tables exist: `map` created them for this same range.
        let pdpt = next_table(root, (virtual_address >> 39) & 511)?;
        let pd = next_table(pdpt, (virtual_address >> 30) & 511)?;
        // SAFETY: as in `map`.
        unsafe { entry(pd, (virtual_address >> 21) & 511).write(0) };
        flush_page(virtual_address);
        Ok(())
    });
}

/// Maps a fresh zeroed frame at kernel address `virtual_address` in this instance's kernel
/// half (which every process of the instance shares), writable, no-execute.
pub fn map_kernel_page(virtual_address: u64) -> Result<u64, FrameError> {
    let root = crate::percore::shared::this_kcb().page_table_root.load(core::sync::atomic::Ordering::Relaxed);
    let (free_before, _) = frames::counts();
    let pdpt = next_table(root, (virtual_address >> 39) & 511)?;
    let pd = next_table(pdpt, (virtual_address >> 30) & 511)?;
    let pt = next_table(pd, (virtual_address >> 21) & 511)?;
    let tables = free_before - frames::counts().0;
    let frame = frames::allocate_zeroed()?;
    // SAFETY: a page table of this instance's kernel half; the address maps nothing yet.
    unsafe {
        entry(pt, (virtual_address >> 12) & 511).write(frame | flags::PRESENT | flags::WRITABLE | flags::NO_EXECUTE)
    };
    flush_page(virtual_address);
    Ok(tables + 1)
}

/// Makes sure the boot window's top-level entry exists in this instance's root before any
/// process copies the kernel half, so a boot driver running later maps its window where
/// every address space sees it; and the page directory of its first gigabyte, where a
/// partition is mapped, so a first start or restart asked from this core allocates no table
/// the leak check would count against it (a partition of this size fits there); and the
/// tables of the copy window ([`COPY_WINDOW`]) and of the syspage window
/// ([`SYSPAGE_WINDOW_BASE`]) for the same reason: a core that serves or runs a syspage for the
/// first time (as a KC or an AC, perhaps for a moment) would otherwise make two tables then and
/// keep them.
pub fn prepare_kernel_half() -> Result<(), FrameError> {
    let root = crate::percore::shared::this_kcb().page_table_root.load(core::sync::atomic::Ordering::Relaxed);
    let pdpt = next_table(root, (BOOT_WINDOW_BASE >> 39) & 511)?;
    next_table(pdpt, (BOOT_WINDOW_BASE >> 30) & 511)?;
    for window in [COPY_WINDOW, GRANT_WINDOW, SYSPAGE_WINDOW_BASE] {
        let pd = next_table(pdpt, (window >> 30) & 511)?;
        next_table(pd, (window >> 21) & 511)?;
    }
    Ok(())
}

/// Where syspage frames of processes homed elsewhere are mapped (inside the boot window's
/// top-level entry, which every root of the instance shares; far above any partition).
pub const SYSPAGE_WINDOW_BASE: u64 = BOOT_WINDOW_BASE + (256 << 30);

/// Where a kernel maps, one at a time, the frames of a process moving in from another core
/// while it copies them (`proc::migrate`): 1 GiB above the syspage slots.
pub const COPY_WINDOW: u64 = SYSPAGE_WINDOW_BASE + (1 << 30);

/// Where the file service maps, one page at a time, the frames of a grant it copies into or
/// out of (`mm::grant`): 2 MiB above the copy window, so the two never share a slot.
pub const GRANT_WINDOW: u64 = COPY_WINDOW + (2 << 20);

/// Maps the frame `physical` (a syspage another instance lent: the one page shared by a
/// process and this kernel core or application core) at `virtual_address`, writable,
/// no-execute. The frame stays the home's; [`unmap_frame`] removes the mapping.
pub fn map_frame(virtual_address: u64, physical: u64) -> Result<(), FrameError> {
    let root = crate::percore::shared::this_kcb().page_table_root.load(core::sync::atomic::Ordering::Relaxed);
    let pdpt = next_table(root, (virtual_address >> 39) & 511)?;
    let pd = next_table(pdpt, (virtual_address >> 30) & 511)?;
    let pt = next_table(pd, (virtual_address >> 21) & 511)?;
    // SAFETY: a page table of this instance's kernel half; the window's addresses map nothing
    // else, and the caller owns `virtual_address`'s slot.
    unsafe {
        entry(pt, (virtual_address >> 12) & 511)
            .write((physical & flags::ADDRESS_MASK) | flags::PRESENT | flags::WRITABLE | flags::NO_EXECUTE)
    };
    flush_page(virtual_address);
    Ok(())
}

/// Removes a mapping [`map_frame`] made and flushes it from this core's TLB.
pub fn unmap_frame(virtual_address: u64) {
    let root = crate::percore::shared::this_kcb().page_table_root.load(core::sync::atomic::Ordering::Relaxed);
    let Ok(pdpt) = next_table(root, (virtual_address >> 39) & 511) else { return };
    let Ok(pd) = next_table(pdpt, (virtual_address >> 30) & 511) else { return };
    let Ok(pt) = next_table(pd, (virtual_address >> 21) & 511) else { return };
    // SAFETY: as in `map_frame`; the tables exist (it created them).
    unsafe { entry(pt, (virtual_address >> 12) & 511).write(0) };
    flush_page(virtual_address);
}

/// Copies the frame `physical` of another partition (a page of a process moving in) into
/// `out`, at most one page of it, through this instance's copy window ([`COPY_WINDOW`]).
pub fn copy_from_frame(physical: u64, out: &mut [u8]) -> Result<(), FrameError> {
    map_frame(COPY_WINDOW, physical)?;
    let length = out.len().min(PAGE_SIZE as usize);
    // SAFETY: the window maps that one frame, readable, for the length of one page, and
    // `length` is at most a page; nothing else uses the copy window (its one user is the move
    // handler, `proc::migrate`, and message handlers do not nest on one core).
    unsafe { core::ptr::copy_nonoverlapping(COPY_WINDOW as *const u8, out.as_mut_ptr(), length) };
    unmap_frame(COPY_WINDOW);
    Ok(())
}

/// A type made only of atomics, for which every byte pattern is a valid value, so a page that
/// another party (a process, another core) writes meanwhile can be viewed as one without a
/// data race.
///
/// # Safety
/// Implement only for `repr(C)` types of atomics (and arrays and structs of them), at most one
/// page in size, whose alignment a page satisfies.
pub unsafe trait SharedAtomics: Sync + 'static {}

// SAFETY: a syspage is a `repr(C)`, page-aligned ring of atomics, one page (`syspage` crate).
unsafe impl SharedAtomics for syspage::Page {}

/// Slots of the syspage window this instance has mapped, one bit each.
static LENT_SLOTS: spin::Mutex<[u64; LENT_SLOT_COUNT / 64]> = spin::Mutex::new([0; LENT_SLOT_COUNT / 64]);
/// Slots of the syspage window (the page-tables of one 2 MiB run, below the copy window).
pub const LENT_SLOT_COUNT: usize = 512;

/// A frame another instance lent (a syspage), mapped at one slot of the syspage window while
/// this lives; the slot is this mapping's alone. Views of the page borrow it, so none
/// outlives the mapping.
pub struct LentPage {
    slot: usize,
}

impl LentPage {
    /// Maps `physical` at window slot `slot`; fails when the slot is in use or no frame is
    /// left for a page table.
    pub fn map(slot: usize, physical: u64) -> Result<Self, FrameError> {
        if slot >= LENT_SLOT_COUNT {
            return Err(FrameError::NotAllocated(physical));
        }
        let mut slots = LENT_SLOTS.lock();
        if slots[slot / 64] & (1 << (slot % 64)) != 0 {
            return Err(FrameError::NotAllocated(physical));
        }
        map_frame(Self::address(slot), physical & flags::ADDRESS_MASK)?;
        slots[slot / 64] |= 1 << (slot % 64);
        Ok(Self { slot })
    }

    fn address(slot: usize) -> u64 {
        SYSPAGE_WINDOW_BASE + slot as u64 * crate::arch::paging::PAGE_SIZE
    }

    /// The page as a `T`.
    pub fn get<T: SharedAtomics>(&self) -> &T {
        const { assert!(core::mem::size_of::<T>() <= 4096 && core::mem::align_of::<T>() <= 4096) };
        // SAFETY: the slot is mapped writable to the lent frame while `self` lives (the slot
        // bit keeps any other mapping off it, and only `drop` unmaps it), the reference
        // borrows `self`, the page is aligned for `T` and holds it, and `T` is only atomics
        // valid for any bytes, so writes by the process or its home meanwhile are no race.
        unsafe { &*(Self::address(self.slot) as *const T) }
    }
}

impl Drop for LentPage {
    fn drop(&mut self) {
        unmap_frame(Self::address(self.slot));
        LENT_SLOTS.lock()[self.slot / 64] &= !(1 << (self.slot % 64));
    }
}
