//! Building a kernel instance's page tables: shared read-only text, private data, own partition.
//!
//! The builder writes tables through a [`PhysicalView`], so the same code serves the bootstrap
//! core (which sees all RAM through its boot tables) and a boot driver on a running instance
//! (which sees the target partition only through its temporary boot window).

use crate::arch::paging::{flags, physical_to_virtual, DIRECT_MAP_BASE, LARGE_PAGE_SIZE, PAGE_SIZE};
use platform::memmap::Range;

/// How the caller reaches physical memory it is about to write.
///
/// # Safety
/// For every page-aligned `physical` of the partition a [`Builder`] is given, `pointer` must
/// return a pointer to that memory, writable, that nothing else uses while the builder runs.
pub unsafe trait PhysicalView {
    /// A writable pointer to physical address `physical` (page-aligned regions only).
    fn pointer(&self, physical: u64) -> *mut u8;
}

/// Through the direct map (the bootstrap core, or an instance's own partition).
pub struct DirectView;

// SAFETY: the bootstrap core's boot tables map the low 4 GiB at the direct map, where it
// builds instance 0's partition; an instance's own direct map covers its own partition.
unsafe impl PhysicalView for DirectView {
    fn pointer(&self, physical: u64) -> *mut u8 {
        physical_to_virtual(physical) as *mut u8
    }
}

/// Why an address space could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The partition ran out of frames while building tables or copying the image.
    PartitionFull,
}

/// Writes page tables for one instance, taking frames from the front of its partition.
pub struct Builder<'a> {
    view: &'a dyn PhysicalView,
    first_frame: u64,
    next_frame: u64,
    end: u64,
    /// Physical address of the PML4.
    pub root: u64,
}

const TABLE_FLAGS: u64 = flags::PRESENT | flags::WRITABLE;

impl<'a> Builder<'a> {
    /// Starts a new address space whose frames come from `[partition.start, partition.end)`.
    pub fn new(view: &'a dyn PhysicalView, partition: Range) -> Result<Self, BuildError> {
        let mut builder =
            Self { view, first_frame: partition.start, next_frame: partition.start, end: partition.end, root: 0 };
        builder.root = builder.allocate(PAGE_SIZE)?;
        Ok(builder)
    }

    /// Takes `size` zeroed bytes (page multiple) from the front of the partition.
    pub fn allocate(&mut self, size: u64) -> Result<u64, BuildError> {
        let frame = self.next_frame;
        if frame + size > self.end {
            return Err(BuildError::PartitionFull);
        }
        self.next_frame += size;
        // SAFETY: `[frame, frame + size)` lies in the partition being built, which no running
        // instance owns; the view maps it writable.
        unsafe { core::ptr::write_bytes(self.view.pointer(frame), 0, size as usize) };
        Ok(frame)
    }

    /// Copies `bytes` to `physical`, which must lie in what [`Self::allocate`] took.
    pub fn write_bytes(&mut self, physical: u64, bytes: &[u8]) -> Result<(), BuildError> {
        let end = physical.checked_add(bytes.len() as u64).ok_or(BuildError::PartitionFull)?;
        if physical < self.first_frame || end > self.next_frame {
            return Err(BuildError::PartitionFull);
        }
        // The view maps whole pages; copy page by page.
        let mut done = 0;
        while done < bytes.len() {
            let at = physical + done as u64;
            let page = at & !(PAGE_SIZE - 1);
            let length = ((page + PAGE_SIZE - at) as usize).min(bytes.len() - done);
            // SAFETY: `[at, at + length)` lies in one page the builder took from its partition
            // (checked above), which the view maps writable for the builder alone.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    bytes[done..].as_ptr(),
                    self.view.pointer(page).add((at - page) as usize),
                    length,
                )
            };
            done += length;
        }
        Ok(())
    }

    /// First physical address the builder has not taken.
    pub fn next_free(&self) -> u64 {
        self.next_frame
    }

    fn entry(&self, table: u64, index: u64) -> *mut u64 {
        // SAFETY: `table` is a page-table frame of this partition; index < 512.
        unsafe { self.view.pointer(table).cast::<u64>().add(index as usize) }
    }

    /// The table an entry points to, created if missing.
    fn next_table(&mut self, table: u64, index: u64) -> Result<u64, BuildError> {
        let entry = self.entry(table, index);
        // SAFETY: `entry` points into a page table of this partition (see `entry`).
        let value = unsafe { entry.read() };
        if value & flags::PRESENT != 0 {
            return Ok(value & flags::ADDRESS_MASK);
        }
        let new = self.allocate(PAGE_SIZE)?;
        // SAFETY: as above; the new frame is a zeroed table.
        unsafe { entry.write(new | TABLE_FLAGS) };
        Ok(new)
    }

    /// Maps one 4 KiB page.
    pub fn map_page(&mut self, virtual_address: u64, physical: u64, page_flags: u64) -> Result<(), BuildError> {
        let pdpt = self.next_table(self.root, (virtual_address >> 39) & 511)?;
        let pd = self.next_table(pdpt, (virtual_address >> 30) & 511)?;
        let pt = self.next_table(pd, (virtual_address >> 21) & 511)?;
        // SAFETY: a page table of this partition.
        unsafe { self.entry(pt, (virtual_address >> 12) & 511).write(physical | page_flags | flags::PRESENT) };
        Ok(())
    }

    /// Maps one 2 MiB page.
    pub fn map_large_page(&mut self, virtual_address: u64, physical: u64, page_flags: u64) -> Result<(), BuildError> {
        let pdpt = self.next_table(self.root, (virtual_address >> 39) & 511)?;
        let pd = self.next_table(pdpt, (virtual_address >> 30) & 511)?;
        // SAFETY: a page directory of this partition.
        unsafe {
            self.entry(pd, (virtual_address >> 21) & 511).write(physical | page_flags | flags::PRESENT | flags::LARGE)
        };
        Ok(())
    }

    /// Maps `[range.start, range.end)` (2 MiB aligned) into the direct map, writable, no-execute.
    pub fn map_direct(&mut self, range: Range) -> Result<(), BuildError> {
        let mut physical = range.start;
        while physical < range.end {
            self.map_large_page(DIRECT_MAP_BASE + physical, physical, flags::WRITABLE | flags::NO_EXECUTE)?;
            physical += LARGE_PAGE_SIZE;
        }
        Ok(())
    }
}

/// Physical address the current address space maps `virtual_address` to, if any.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code, reason = "only the isolation test asks"))]
pub fn translate(virtual_address: u64) -> Option<u64> {
    let mut table = crate::arch::paging::current_root();
    for level in (1..=4).rev() {
        let index = (virtual_address >> (12 + 9 * (level - 1))) & 511;
        // SAFETY: every page-table frame of this instance lies in its partition, which its
        // direct map covers; the walk only reads.
        let entry = unsafe { (physical_to_virtual(table) as *const u64).add(index as usize).read() };
        if entry & flags::PRESENT == 0 {
            return None;
        }
        let address = entry & flags::ADDRESS_MASK;
        if level == 1 || entry & flags::LARGE != 0 {
            let offset_bits = 12 + 9 * (level - 1);
            return Some(address + (virtual_address & ((1 << offset_bits) - 1)));
        }
        table = address;
    }
    None
}

/// Loads this instance's own root (the one the boot driver built), which maps the whole
/// kernel half and no process's user half.
pub fn load_instance_root() {
    let root = crate::percore::shared::this_kcb().page_table_root.load(core::sync::atomic::Ordering::Relaxed);
    // SAFETY: the instance's root maps the kernel image, its stacks, statics and direct map at
    // the addresses every root of this instance uses, and is never freed.
    unsafe { crate::arch::paging::load_root(root) };
}

// The root's entry 0 while it mapped the low 2 MiB at their identity addresses (private
// .data): kept so that an unpark can map the trampoline again (`restore_identity_map`).
static IDENTITY_ENTRY: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Drops the identity mapping of the low 2 MiB the trampoline needed (at entry, and again
/// after an unpark woke this instance through the trampoline).
pub fn remove_identity_map() {
    use core::sync::atomic::Ordering;
    let root = crate::percore::shared::this_kcb().page_table_root.load(Ordering::Relaxed);
    let entry = physical_to_virtual(root) as *mut u64;
    // SAFETY: the PML4 is in this instance's partition, covered by the direct map; entry 0
    // maps only the identity low 2 MiB, which no code runs from any more (the trampoline
    // jumped to the kernel half); reloading CR3 drops its translations.
    unsafe {
        let value = entry.read();
        if value != 0 {
            IDENTITY_ENTRY.store(value, Ordering::Relaxed);
        }
        entry.write(0);
        crate::arch::paging::load_root(crate::arch::paging::current_root());
    }
}

/// Maps the low 2 MiB at their identity addresses again in this instance's root, for the
/// trampoline a boot driver will wake a processor with to resume this instance.
pub fn restore_identity_map() {
    use core::sync::atomic::Ordering;
    let root = crate::percore::shared::this_kcb().page_table_root.load(Ordering::Relaxed);
    // SAFETY: as in `remove_identity_map`: the entry it removed, pointing at the tables the
    // boot driver built in this partition (never freed); the user half of process roots is
    // theirs, this is the instance's own root, which no process uses.
    unsafe { (physical_to_virtual(root) as *mut u64).write(IDENTITY_ENTRY.load(Ordering::Relaxed)) };
}
