//! A process's address space: the user half of its own page tables, built from frames of its
//! home instance's partition, with areas that say what may be mapped where (demand-zero pages
//! are mapped on first touch), and a kernel half shared with the instance.

use crate::arch::paging::{self, flags, physical_to_virtual, PAGE_SIZE};
use crate::arch::user::USER_END;
use crate::mm::frames;
use alloc::vec::Vec;

/// Access rights of an area, as `PROT_*` asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Protection {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
}

impl Protection {
    /// From Linux `PROT_READ | PROT_WRITE | PROT_EXEC` bits.
    pub fn from_linux(bits: u64) -> Self {
        Self { read: bits & 1 != 0, write: bits & 2 != 0, execute: bits & 4 != 0 }
    }

    pub const READ_WRITE: Self = Self { read: true, write: true, execute: false };

    fn page_flags(self) -> u64 {
        let mut bits = flags::USER;
        if self.write {
            bits |= flags::WRITABLE;
        }
        if !self.execute {
            bits |= flags::NO_EXECUTE;
        }
        bits
    }

    fn any(self) -> bool {
        self.read || self.write || self.execute
    }
}

/// What an area is for (named in reports and `/proc`-like listings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AreaKind {
    /// Loaded from the program file (pages mapped at exec).
    Program,
    /// The `brk` heap.
    Heap,
    /// The main thread's stack.
    Stack,
    /// Anonymous `mmap`.
    Anonymous,
}

/// A range of user addresses with one protection. Pages inside it that are not mapped yet
/// are mapped zeroed on first touch.
#[derive(Clone, Copy, Debug)]
pub struct Area {
    pub start: u64,
    pub end: u64,
    pub protection: Protection,
    pub kind: AreaKind,
}

/// Writes the page at an address into the fresh frame given as bytes.
pub type PageFill<'a> = dyn FnMut(u64, &mut [u8]) -> Result<(), MemoryError> + 'a;

/// Where the pages of a rebuilt address space come from ([`AddressSpace::rebuild`]).
pub enum PageSource<'a> {
    /// A fresh frame per page, which this writes: a copy of another partition's page.
    Copy(&'a mut PageFill<'a>),
    /// The frame this names for each page's address: one of this instance's, which it took
    /// for that page (a process kept through a restart keeps its memory where it is).
    Adopt(&'a dyn Fn(u64) -> Option<u64>),
}

/// Why a memory operation failed, as the `errno` it becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryError {
    /// The partition has no free frame left (`ENOMEM`).
    OutOfMemory,
    /// The range is not page aligned, empty, or leaves user space (`EINVAL`).
    BadRange,
    /// A fixed mapping would overlap what exists and the caller forbade replacing (`EEXIST`),
    /// or no free range is large enough (`ENOMEM`).
    NoSpace,
}

/// Where `mmap` without a hint starts looking, downwards.
const MMAP_TOP: u64 = 0x0000_7F00_0000_0000;
/// Lowest address `mmap` hands out.
const MMAP_BOTTOM: u64 = 0x0000_1000_0000_0000;
/// Top of the main stack (the page above it stays unmapped).
pub const STACK_TOP: u64 = 0x0000_7FFF_FFFF_E000;
/// Size of the main stack area (demand-zero; Linux's default `RLIMIT_STACK`).
pub const STACK_SIZE: u64 = 8 << 20;

const TABLE_FLAGS: u64 = flags::PRESENT | flags::WRITABLE | flags::USER;

/// A page-table bit the CPU leaves to software (bit 9): the page maps a frame of the
/// instance's file page cache, shared read-only by every address space that maps the same
/// page of the same file. Such a page is never writable in its entry (a write faults and gets
/// a private copy), never counted in [`AddressSpace::frames`], and never freed here: the
/// cache's registered [`SharedFrames::release`] is told instead.
const SHARED: u64 = 1 << 9;

/// In a list of unmapped frames ([`AddressSpace::take_deferred_frees`]): this one was shared
/// (frames are page aligned, so bit 0 is free to say it).
const SHARED_MARK: u64 = 1;

/// What the owner of shared frames (the file page cache, a service above) is told when an
/// address space maps one more time, or stops mapping, one of its frames.
pub struct SharedFrames {
    pub retain: fn(frame: u64),
    pub release: fn(frame: u64),
}

static SHARED_FRAMES: spin::Once<SharedFrames> = spin::Once::new();

/// Registers the owner of shared frames (`boot`, once, before the first process).
pub fn register_shared_frames(owner: SharedFrames) {
    SHARED_FRAMES.call_once(|| owner);
}

fn retain_shared(frame: u64) {
    if let Some(owner) = SHARED_FRAMES.get() {
        (owner.retain)(frame);
    }
}

fn release_shared(frame: u64) {
    if let Some(owner) = SHARED_FRAMES.get() {
        (owner.release)(frame);
    }
}

/// Gives back frames an address space unmapped ([`AddressSpace::take_deferred_frees`]) once
/// no core can reach them any more: its own are freed, shared ones released to their owner.
pub fn free_unmapped(unmapped: Vec<u64>) {
    for word in unmapped {
        if word & SHARED_MARK != 0 {
            release_shared(word & !SHARED_MARK);
        } else if frames::free(word).is_err() {
            log::error!("a frame unmapped under a shootdown was not allocated: {word:#x}");
        }
    }
}
/// PML4 entries of the user half.
const USER_ROOT_ENTRIES: usize = 256;

/// Mapping generations of this instance: an address space takes a new one when it is made and
/// whenever one of its present pages is unmapped or changes rights, so two equal generations
/// name one address space whose translations have not changed in between (an application
/// core running one of its threads keeps its cached translations across a forwarded call
/// only then).
static GENERATIONS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}

/// One process's address space.
pub struct AddressSpace {
    /// Physical address of its PML4.
    root: u64,
    areas: Vec<Area>,
    /// Start of the `brk` heap (after the program's last segment).
    pub heap_start: u64,
    /// Current program break.
    pub heap_end: u64,
    /// Frames this address space holds (pages and tables), for the leak check.
    frames: u64,
    /// While set, pages unmapped are collected here instead of freed: an application core
    /// may still hold translations of them until its TLB shootdown is answered.
    deferred_frees: Option<Vec<u64>>,
    /// Its mapping generation (see [`GENERATIONS`]).
    generation: u64,
}

fn table(physical: u64) -> *mut u64 {
    physical_to_virtual(physical) as *mut u64
}

const fn page_floor(address: u64) -> u64 {
    address & !(PAGE_SIZE - 1)
}

/// `address` rounded up to a page, or `None` past the address space.
fn page_ceiling(address: u64) -> Option<u64> {
    address.checked_add(PAGE_SIZE - 1).map(page_floor)
}

impl AddressSpace {
    /// An empty user half under a copy of this instance's kernel half.
    pub fn new() -> Result<Self, MemoryError> {
        let root = frames::allocate_zeroed().map_err(|_| MemoryError::OutOfMemory)?;
        let kernel_root =
            crate::percore::shared::this_kcb().page_table_root.load(core::sync::atomic::Ordering::Relaxed);
        // SAFETY: both are PML4 frames of this instance, mapped by its direct map; the kernel
        // half's entries point at tables every process of this instance shares (they are
        // created before the first process and never freed).
        unsafe {
            core::ptr::copy_nonoverlapping(
                table(kernel_root).add(USER_ROOT_ENTRIES),
                table(root).add(USER_ROOT_ENTRIES),
                512 - USER_ROOT_ENTRIES,
            )
        };
        Ok(Self {
            root,
            areas: Vec::new(),
            heap_start: 0,
            heap_end: 0,
            frames: 1,
            deferred_frees: None,
            generation: next_generation(),
        })
    }

    /// Physical address of the PML4 (what CR3 loads).
    pub fn root(&self) -> u64 {
        self.root
    }

    /// Makes this the active address space (loads its root).
    pub fn activate(&self) {
        // SAFETY: the root's kernel half is a copy of this instance's (`new`), so the running
        // code, its stack and every static stay mapped at the same addresses; the root lives
        // as long as `self`, and whoever drops `self` first loads another root (`let_go`).
        unsafe { crate::arch::paging::load_root(self.root) };
    }

    /// Runs `work` with this address space active, then loads again the root that was active
    /// before (interrupts masked throughout, so nothing else runs on this root meanwhile).
    pub fn while_active<T>(&self, work: impl FnOnce() -> T) -> T {
        crate::arch::cpu::without_interrupts(|| {
            let previous = crate::arch::paging::current_root();
            self.activate();
            let result = work();
            // SAFETY: `previous` was the active root a moment ago, so it maps the kernel half
            // this code runs on; with interrupts masked no thread ran that could free it.
            unsafe { crate::arch::paging::load_root(previous) };
            result
        })
    }

    /// The present top-level entries of the user half, as (index, entry), up to `out.len()`;
    /// returns how many. An application or kernel core borrows them (see `mm::borrowed`).
    pub fn top_level_entries(&self, out: &mut [(u16, u64)]) -> usize {
        let mut count = 0;
        for index in 0..USER_ROOT_ENTRIES {
            // SAFETY: the root is this address space's PML4, in this instance's partition.
            let entry = unsafe { table(self.root).add(index).read() };
            if entry & flags::PRESENT != 0 && count < out.len() {
                out[count] = (index as u16, entry);
                count += 1;
            }
        }
        count
    }

    /// Its mapping generation: unchanged since an earlier look means no page was unmapped or
    /// changed rights, so translations cached since are still right.
    pub fn mapping_generation(&self) -> u64 {
        self.generation
    }

    /// Frames held (pages and page tables; not the shared pages it maps).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The areas, in address order.
    pub fn areas(&self) -> &[Area] {
        &self.areas
    }

    /// The page-table entry of `address`, creating missing tables when `create`.
    fn entry(&mut self, address: u64, create: bool) -> Result<Option<*mut u64>, MemoryError> {
        let mut current = self.root;
        for level in (2..=4).rev() {
            let index = ((address >> (12 + 9 * (level - 1))) & 511) as usize;
            // SAFETY: `current` is a page-table frame of this address space (user half).
            let slot = unsafe { table(current).add(index) };
            // SAFETY: as above.
            let value = unsafe { slot.read() };
            if value & flags::PRESENT == 0 {
                if !create {
                    return Ok(None);
                }
                let new = frames::allocate_zeroed().map_err(|_| MemoryError::OutOfMemory)?;
                self.frames += 1;
                // SAFETY: as above; `new` is a zeroed frame of this instance.
                unsafe { slot.write(new | TABLE_FLAGS) };
                current = new;
            } else {
                current = value & flags::ADDRESS_MASK;
            }
        }
        // SAFETY: `current` is a page table of this address space.
        Ok(Some(unsafe { table(current).add(((address >> 12) & 511) as usize) }))
    }

    /// Physical frame mapped at `address`, if any.
    pub fn translate(&mut self, address: u64) -> Option<u64> {
        let entry = self.entry(address, false).ok().flatten()?;
        // SAFETY: a page-table entry of this address space.
        let value = unsafe { entry.read() };
        (value & flags::PRESENT != 0).then_some(value & flags::ADDRESS_MASK)
    }

    /// Maps a fresh zeroed page at `address` (page aligned) with `protection`; returns its frame.
    fn map_zeroed(&mut self, address: u64, protection: Protection) -> Result<u64, MemoryError> {
        let entry = self.entry(address, true)?.ok_or(MemoryError::OutOfMemory)?;
        // SAFETY: a page-table entry of this address space.
        let value = unsafe { entry.read() };
        if value & flags::PRESENT != 0 {
            return Ok(value & flags::ADDRESS_MASK);
        }
        let frame = frames::allocate_zeroed().map_err(|_| MemoryError::OutOfMemory)?;
        self.frames += 1;
        // SAFETY: as above.
        unsafe { entry.write(frame | protection.page_flags() | flags::PRESENT) };
        Ok(frame)
    }

    /// Adds an area (the caller checked it overlaps nothing).
    fn insert_area(&mut self, area: Area) {
        let at = self.areas.partition_point(|a| a.start < area.start);
        self.areas.insert(at, area);
    }

    /// The area holding `address`.
    pub fn area_of(&self, address: u64) -> Option<&Area> {
        let at = self.areas.partition_point(|a| a.end <= address);
        self.areas.get(at).filter(|a| a.start <= address)
    }

    /// Whether every page of `[start, start + length)` lies in an area that may be written,
    /// so that a copy into it succeeds (pages not mapped yet are mapped on first touch).
    /// An empty range is writable anywhere.
    pub fn allows_write(&self, start: u64, length: u64) -> bool {
        let Some(end) = start.checked_add(length).filter(|&end| end <= USER_END) else { return false };
        let mut at = start;
        while at < end {
            match self.area_of(at) {
                Some(area) if area.protection.write => at = area.end,
                _ => return false,
            }
        }
        true
    }

    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.areas.iter().any(|a| a.start < end && start < a.end)
    }

    /// Declares `[start, end)` as an area and maps every page of it now, zeroed; used by exec
    /// for program segments (which it then fills) and for the initial stack's top pages.
    pub fn map_now(&mut self, start: u64, end: u64, protection: Protection, kind: AreaKind) -> Result<(), MemoryError> {
        let start = page_floor(start);
        let end = page_ceiling(end).ok_or(MemoryError::BadRange)?;
        if start >= end || end > USER_END {
            return Err(MemoryError::BadRange);
        }
        // Segments may share a page at their boundary: merge into the existing area's rights.
        let mut page = start;
        while page < end {
            if let Some(existing) = self.areas.iter_mut().find(|a| a.start <= page && page < a.end) {
                let merged = Protection {
                    read: existing.protection.read || protection.read,
                    write: existing.protection.write || protection.write,
                    execute: existing.protection.execute || protection.execute,
                };
                existing.protection = merged;
                self.map_zeroed(page, merged)?;
                self.set_page_rights(page, merged);
            } else {
                let run_end = self.areas.iter().map(|a| a.start).filter(|&s| s > page && s < end).min().unwrap_or(end);
                self.insert_area(Area { start: page, end: run_end, protection, kind });
                while page < run_end {
                    self.map_zeroed(page, protection)?;
                    page += PAGE_SIZE;
                }
                continue;
            }
            page += PAGE_SIZE;
        }
        Ok(())
    }

    /// Declares a demand-zero area without mapping anything.
    pub fn reserve(&mut self, start: u64, end: u64, protection: Protection, kind: AreaKind) -> Result<(), MemoryError> {
        if start >= end || end > USER_END || !start.is_multiple_of(PAGE_SIZE) || !end.is_multiple_of(PAGE_SIZE) {
            return Err(MemoryError::BadRange);
        }
        if self.overlaps(start, end) {
            return Err(MemoryError::NoSpace);
        }
        self.insert_area(Area { start, end, protection, kind });
        Ok(())
    }

    /// Copies `bytes` to user address `address` of this address space (not necessarily the
    /// current one), through the direct map; pages must be mapped.
    pub fn write(&mut self, mut address: u64, mut bytes: &[u8]) -> Result<(), MemoryError> {
        while !bytes.is_empty() {
            let frame = self.translate(page_floor(address)).ok_or(MemoryError::BadRange)?;
            let offset = address % PAGE_SIZE;
            let length = bytes.len().min((PAGE_SIZE - offset) as usize);
            // SAFETY: `frame` is a frame of this address space in this instance's partition,
            // mapped by the direct map; the copy stays inside it.
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), (physical_to_virtual(frame) + offset) as *mut u8, length)
            };
            address += length as u64;
            bytes = &bytes[length..];
        }
        Ok(())
    }

    /// Resolves a fault at `address`: maps a zeroed page if an area allows the access.
    /// Returns false if the access is not allowed (the process has a bad pointer).
    pub fn handle_fault(&mut self, address: u64, write: bool, execute: bool) -> bool {
        let Some(area) = self.area_of(address).copied() else { return false };
        let allowed =
            area.protection.any() && (!write || area.protection.write) && (!execute || area.protection.execute);
        if !allowed {
            return false;
        }
        if self.translate(page_floor(address)).is_some() {
            if write && self.is_shared(page_floor(address)) {
                // A write to a shared file page the area allows: a private copy (copy on write).
                return self.copy_shared_page(page_floor(address), area.protection).is_ok();
            }
            // Present and allowed: a fault from a stale TLB entry after mprotect; retry.
            paging::flush_page(page_floor(address));
            return true;
        }
        self.map_zeroed(page_floor(address), area.protection).is_ok()
    }

    /// Maps `frame`, a frame of the shared-frame owner, at `address` (page aligned, inside an
    /// area) read-only whatever `protection` says of writing (a write gets a private copy);
    /// the owner is told it is mapped once more. The page must not be mapped yet.
    pub fn map_shared(&mut self, address: u64, frame: u64, protection: Protection) -> Result<(), MemoryError> {
        if !address.is_multiple_of(PAGE_SIZE) || self.area_of(address).is_none() {
            return Err(MemoryError::BadRange);
        }
        let entry = self.entry(address, true)?.ok_or(MemoryError::OutOfMemory)?;
        // SAFETY: a page-table entry of this address space.
        if unsafe { entry.read() } & flags::PRESENT != 0 {
            return Err(MemoryError::NoSpace);
        }
        let rights = protection.page_flags() & !flags::WRITABLE;
        // SAFETY: as above; the frame stays allocated while its owner counts this mapping.
        unsafe { entry.write(frame | rights | SHARED | flags::PRESENT) };
        retain_shared(frame);
        Ok(())
    }

    /// Whether the page at `page` maps a shared frame.
    fn is_shared(&mut self, page: u64) -> bool {
        // SAFETY: a page-table entry of this address space.
        matches!(self.entry(page, false), Ok(Some(entry)) if unsafe { entry.read() } & (flags::PRESENT | SHARED) == flags::PRESENT | SHARED)
    }

    /// Replaces the shared frame mapped at `page` by a private copy with `protection`, and
    /// releases the shared one (later, if frees are deferred: a core may still read it).
    fn copy_shared_page(&mut self, page: u64, protection: Protection) -> Result<(), MemoryError> {
        let entry = self.entry(page, false)?.ok_or(MemoryError::BadRange)?;
        // SAFETY: a page-table entry of this address space.
        let value = unsafe { entry.read() };
        if value & (flags::PRESENT | SHARED) != flags::PRESENT | SHARED {
            return Ok(());
        }
        let shared = value & flags::ADDRESS_MASK;
        let private = frames::allocate_zeroed().map_err(|_| MemoryError::OutOfMemory)?;
        // SAFETY: both are frames of this instance, mapped by the direct map, one page each.
        unsafe {
            core::ptr::copy_nonoverlapping(
                physical_to_virtual(shared) as *const u8,
                physical_to_virtual(private) as *mut u8,
                PAGE_SIZE as usize,
            )
        };
        let kept = value & (flags::ACCESSED | flags::DIRTY);
        // SAFETY: as above; the new frame is this address space's own now.
        unsafe { entry.write(private | kept | protection.page_flags() | flags::PRESENT) };
        paging::flush_page(page);
        self.generation = next_generation();
        self.frames += 1;
        self.unmapped_shared(shared);
        Ok(())
    }

    /// A shared frame this address space no longer maps: released to its owner now, or later
    /// if frees are deferred (an application core may still read it).
    fn unmapped_shared(&mut self, frame: u64) {
        match self.deferred_frees.as_mut() {
            Some(deferred) => deferred.push(frame | SHARED_MARK),
            None => release_shared(frame),
        }
    }

    /// Gives every shared page a private copy: before the pages are handed to another
    /// kernel (a move, a restart that keeps the process), which knows nothing of this one's
    /// shared frames.
    pub fn privatize_shared(&mut self) -> Result<(), MemoryError> {
        let mut shared = Vec::new();
        self.for_each_page(|address, _, entry| {
            if entry & SHARED != 0 {
                shared.push(address);
            }
            Ok(())
        })?;
        for page in shared {
            let protection = self.area_of(page).map_or(Protection::default(), |area| area.protection);
            self.copy_shared_page(page, protection)?;
        }
        Ok(())
    }

    /// `mremap` in place: the area ending at `old_end` (it must end there) grows to `new_end`,
    /// if nothing lies between; the new part is demand-zero.
    pub fn grow_area(&mut self, old_end: u64, new_end: u64) -> Result<(), MemoryError> {
        if !old_end.is_multiple_of(PAGE_SIZE) || !new_end.is_multiple_of(PAGE_SIZE) || new_end <= old_end {
            return Err(MemoryError::BadRange);
        }
        if new_end > USER_END || self.overlaps(old_end, new_end) {
            return Err(MemoryError::NoSpace);
        }
        let at = self.areas.iter().position(|a| a.end == old_end && a.start < old_end).ok_or(MemoryError::BadRange)?;
        if self.areas[at].kind == AreaKind::Heap {
            // The heap grows by `brk` alone.
            return Err(MemoryError::BadRange);
        }
        self.areas[at].end = new_end;
        Ok(())
    }

    /// `mremap` with a move: `[from, from + length)`, inside one area, moves with its pages
    /// (their entries move; no byte is copied, a shared page stays shared) to `to`, as an area
    /// of `new_length` bytes (at least `length`; the rest demand-zero) with the same rights.
    /// `[to, to + new_length)` must be free.
    pub fn move_area(&mut self, from: u64, length: u64, to: u64, new_length: u64) -> Result<(), MemoryError> {
        let aligned = [from, length, to, new_length].iter().all(|value| value.is_multiple_of(PAGE_SIZE));
        if !aligned || length == 0 || new_length < length || !is_user(to, new_length) {
            return Err(MemoryError::BadRange);
        }
        let area = *self.area_of(from).ok_or(MemoryError::BadRange)?;
        if area.end < from + length || area.kind == AreaKind::Heap {
            return Err(MemoryError::BadRange);
        }
        if self.overlaps(to, to + new_length) {
            return Err(MemoryError::NoSpace);
        }
        // Tables for the destination first: a failure leaves every page where it was.
        let mut offset = 0;
        while offset < length {
            self.entry(to + offset, true)?.ok_or(MemoryError::OutOfMemory)?;
            offset += PAGE_SIZE;
        }
        offset = 0;
        while offset < length {
            if let Ok(Some(source)) = self.entry(from + offset, false) {
                // SAFETY: a page-table entry of this address space.
                let value = unsafe { source.read() };
                if value & flags::PRESENT != 0 {
                    // SAFETY: as above; the entry is cleared and its page mapped once, below.
                    unsafe { source.write(0) };
                    paging::flush_page(from + offset);
                    if let Ok(Some(destination)) = self.entry(to + offset, false) {
                        // SAFETY: a page-table entry of this address space, made above.
                        unsafe { destination.write(value) };
                    }
                }
            }
            offset += PAGE_SIZE;
        }
        self.cut_areas(from, from + length, None);
        self.insert_area(Area { start: to, end: to + new_length, ..area });
        self.generation = next_generation();
        Ok(())
    }

    /// Sets the program break (`brk`); returns the break in effect afterwards.
    pub fn set_break(&mut self, wanted: u64) -> u64 {
        if wanted < self.heap_start || wanted > self.heap_start + (1 << 36) {
            return self.heap_end;
        }
        let old_top = page_ceiling(self.heap_end).unwrap_or(self.heap_end);
        let new_top = page_ceiling(wanted).unwrap_or(old_top);
        if new_top > old_top {
            if self.overlaps(old_top, new_top) {
                return self.heap_end;
            }
            match self.areas.iter_mut().find(|a| a.kind == AreaKind::Heap) {
                Some(heap) => heap.end = new_top,
                None => self.insert_area(Area {
                    start: old_top,
                    end: new_top,
                    protection: Protection::READ_WRITE,
                    kind: AreaKind::Heap,
                }),
            }
        } else if new_top < old_top {
            self.unmap_pages(new_top, old_top);
            if let Some(at) = self.areas.iter().position(|a| a.kind == AreaKind::Heap) {
                self.areas[at].end = new_top;
                if self.areas[at].start >= new_top {
                    self.areas.remove(at);
                }
            }
        }
        self.heap_end = wanted;
        wanted
    }

    /// Finds `length` free bytes for `mmap` (top-down), or uses `hint` if it is free.
    pub fn find_free(&self, hint: u64, length: u64) -> Result<u64, MemoryError> {
        if hint != 0 && hint.is_multiple_of(PAGE_SIZE) && is_user(hint, length) && !self.overlaps(hint, hint + length) {
            return Ok(hint);
        }
        let mut top = MMAP_TOP;
        for area in self.areas.iter().rev() {
            if area.start >= top {
                continue;
            }
            if area.end <= top.saturating_sub(length) {
                break;
            }
            top = area.start;
        }
        let start = top.checked_sub(length).ok_or(MemoryError::NoSpace)?;
        if start < MMAP_BOTTOM {
            return Err(MemoryError::NoSpace);
        }
        Ok(start)
    }

    /// From now on, pages unmapped are kept for [`Self::take_deferred_frees`] instead of freed.
    pub fn defer_frees(&mut self) {
        self.deferred_frees.get_or_insert_with(Vec::new);
    }

    /// The frames unmapped since [`Self::defer_frees`], no longer this address space's: the
    /// caller frees them once no core can reach them through a cached translation.
    pub fn take_deferred_frees(&mut self) -> Vec<u64> {
        self.deferred_frees.take().unwrap_or_default()
    }

    /// Unmaps `[start, end)`: frees its pages and cuts the areas there.
    pub fn unmap(&mut self, start: u64, end: u64) -> Result<(), MemoryError> {
        if !start.is_multiple_of(PAGE_SIZE) || start >= end || end > USER_END {
            return Err(MemoryError::BadRange);
        }
        self.unmap_pages(start, end);
        self.cut_areas(start, end, None);
        Ok(())
    }

    /// Changes the rights of `[start, end)`; fails if part of it is not mapped.
    pub fn protect(&mut self, start: u64, end: u64, protection: Protection) -> Result<(), MemoryError> {
        if !start.is_multiple_of(PAGE_SIZE) || start >= end || end > USER_END {
            return Err(MemoryError::BadRange);
        }
        // Linux: ENOMEM when part of the range is unmapped.
        let mut covered = start;
        for area in &self.areas {
            if area.end <= covered || area.start >= end {
                continue;
            }
            if area.start > covered {
                return Err(MemoryError::NoSpace);
            }
            covered = area.end;
        }
        if covered < end {
            return Err(MemoryError::NoSpace);
        }
        self.cut_areas(start, end, Some(protection));
        let mut page = start;
        while page < end {
            self.set_page_rights(page, protection);
            page += PAGE_SIZE;
        }
        Ok(())
    }

    fn set_page_rights(&mut self, page: u64, protection: Protection) {
        if let Ok(Some(entry)) = self.entry(page, false) {
            // SAFETY: a page-table entry of this address space.
            let value = unsafe { entry.read() };
            if value & flags::PRESENT != 0 {
                let kept = value & (flags::ADDRESS_MASK | flags::ACCESSED | flags::DIRTY | SHARED);
                // A shared page stays read-only: a write gets a private copy.
                let rights = if value & SHARED != 0 {
                    protection.page_flags() & !flags::WRITABLE
                } else {
                    protection.page_flags()
                };
                // SAFETY: as above.
                unsafe { entry.write(kept | rights | flags::PRESENT) };
                paging::flush_page(page);
                self.generation = next_generation();
            }
        }
    }

    /// Splits areas at `start` and `end`; the parts inside are removed (`None`) or given
    /// `protection`.
    fn cut_areas(&mut self, start: u64, end: u64, protection: Option<Protection>) {
        let mut result = Vec::with_capacity(self.areas.len() + 2);
        for area in self.areas.drain(..) {
            if area.end <= start || area.start >= end {
                result.push(area);
                continue;
            }
            if area.start < start {
                result.push(Area { end: start, ..area });
            }
            if let Some(protection) = protection {
                result.push(Area { start: area.start.max(start), end: area.end.min(end), protection, ..area });
            }
            if area.end > end {
                result.push(Area { start: end, ..area });
            }
        }
        self.areas = result;
    }

    /// Frees every mapped page of `[start, end)`.
    fn unmap_pages(&mut self, start: u64, end: u64) {
        let mut page = start;
        while page < end {
            if let Ok(Some(entry)) = self.entry(page, false) {
                // SAFETY: a page-table entry of this address space.
                let value = unsafe { entry.read() };
                if value & flags::PRESENT != 0 {
                    // SAFETY: as above.
                    unsafe { entry.write(0) };
                    paging::flush_page(page);
                    self.generation = next_generation();
                    let frame = value & flags::ADDRESS_MASK;
                    if value & SHARED != 0 {
                        self.unmapped_shared(frame);
                    } else if let Some(deferred) = self.deferred_frees.as_mut() {
                        deferred.push(frame);
                        self.frames -= 1;
                    } else if frames::free(frame).is_ok() {
                        self.frames -= 1;
                    }
                }
                page += PAGE_SIZE;
            } else {
                // No page table here: skip to the next 2 MiB.
                page = (page | (paging::LARGE_PAGE_SIZE - 1)) + 1;
            }
        }
    }

    /// A copy for `fork`: the same areas, every mapped page copied into a new frame.
    pub fn duplicate(&mut self) -> Result<Self, MemoryError> {
        let mut copy = Self::new()?;
        copy.heap_start = self.heap_start;
        copy.heap_end = self.heap_end;
        copy.areas = self.areas.clone();
        let result = self.for_each_page(|page, frame, entry_flags| {
            if entry_flags & SHARED != 0 {
                // The child maps the same shared frame, read-only as here.
                let entry = copy.entry(page, true)?.ok_or(MemoryError::OutOfMemory)?;
                // SAFETY: a page-table entry of the copy; the owner counts the new mapping.
                unsafe { entry.write(entry_flags) };
                retain_shared(frame);
                return Ok(());
            }
            let new = copy.map_zeroed(page, Protection::READ_WRITE)?;
            // SAFETY: both frames are this instance's, mapped by the direct map, one page each.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    physical_to_virtual(frame) as *const u8,
                    physical_to_virtual(new) as *mut u8,
                    PAGE_SIZE as usize,
                )
            };
            if let Ok(Some(entry)) = copy.entry(page, false) {
                // SAFETY: the entry just written by `map_zeroed`.
                unsafe { entry.write(new | (entry_flags & !flags::ADDRESS_MASK)) };
            }
            Ok(())
        });
        match result {
            Ok(()) => Ok(copy),
            Err(error) => {
                copy.destroy();
                Err(error)
            }
        }
    }

    /// Every present page: (user address, frame, the entry's flag bits), in address order.
    /// Shared pages among them are not this address space's to hand on: call
    /// [`Self::privatize_shared`] first.
    pub fn present_pages(&self) -> Vec<(u64, u64, u64)> {
        let mut pages = Vec::new();
        let _ = self.for_each_page(|address, frame, entry| {
            pages.push((address, frame, entry & !flags::ADDRESS_MASK));
            Ok(())
        });
        pages
    }

    /// An address space of these areas and break for a process built from an image: one
    /// moving in from another core (`PageSource::Copy`: each of `pages` (address, entry
    /// flags) gets a fresh frame that the source writes), or one kept through a restart
    /// (`PageSource::Adopt`: each page maps the frame the source names, which this instance
    /// took for it). Refuses an area or page outside user space, unaligned, or a page outside
    /// every area; frees what it built on any failure (adopted frames included: they are
    /// this instance's).
    pub fn rebuild(
        areas: Vec<Area>,
        heap: (u64, u64),
        pages: impl Iterator<Item = (u64, u64)>,
        mut source: PageSource<'_>,
    ) -> Result<Self, MemoryError> {
        let aligned = |address: u64| address.is_multiple_of(PAGE_SIZE);
        let sane = areas.windows(2).all(|pair| pair[0].end <= pair[1].start)
            && areas
                .iter()
                .all(|a| aligned(a.start) && aligned(a.end) && a.start < a.end && is_user(a.start, a.end - a.start));
        // The break may equal its start (no heap yet).
        if !sane || heap.0 > heap.1 || heap.1 > USER_END {
            return Err(MemoryError::BadRange);
        }
        let mut memory = Self::new()?;
        memory.areas = areas;
        memory.heap_start = heap.0;
        memory.heap_end = heap.1;
        let result = pages.into_iter().try_for_each(|(address, entry_flags)| {
            if !aligned(address) || memory.area_of(address).is_none() {
                return Err(MemoryError::BadRange);
            }
            let frame = match &mut source {
                PageSource::Copy(fill) => {
                    let frame = memory.map_zeroed(address, Protection::READ_WRITE)?;
                    // SAFETY: a frame of this instance just mapped for this page, one page long.
                    let bytes = unsafe {
                        core::slice::from_raw_parts_mut(physical_to_virtual(frame) as *mut u8, PAGE_SIZE as usize)
                    };
                    fill(address, bytes)?;
                    frame
                }
                PageSource::Adopt(frame_of) => {
                    let frame = frame_of(address).ok_or(MemoryError::BadRange)?;
                    let entry = memory.entry(address, true)?.ok_or(MemoryError::OutOfMemory)?;
                    // SAFETY: a page-table entry of this address space; the rights are
                    // written below.
                    if unsafe { entry.read() } & flags::PRESENT != 0 {
                        return Err(MemoryError::BadRange);
                    }
                    // SAFETY: as above; the frame is this instance's, taken for this page.
                    unsafe { entry.write(frame | flags::PRESENT) };
                    memory.frames += 1;
                    frame
                }
            };
            // Only the rights and the bits the hardware sets travel; the frame is ours.
            let kept = entry_flags
                & (flags::PRESENT | flags::WRITABLE | flags::USER | flags::NO_EXECUTE | flags::ACCESSED | flags::DIRTY);
            if let Ok(Some(entry)) = memory.entry(address, false) {
                // SAFETY: the entry `map_zeroed` just wrote.
                unsafe { entry.write(frame | kept | flags::PRESENT | flags::USER) };
            }
            Ok(())
        });
        match result {
            Ok(()) => Ok(memory),
            Err(error) => {
                memory.destroy();
                Err(error)
            }
        }
    }

    /// Walks the user half: `visit_page(address, frame, entry)` for every mapped page, and,
    /// when `visit_table` is given, `visit_table(frame)` for every page table after the
    /// entries below it were visited (so a table can be freed once its pages are).
    fn walk(
        &self,
        visit_page: &mut dyn FnMut(u64, u64, u64) -> Result<(), MemoryError>,
        mut visit_table: Option<&mut dyn FnMut(u64)>,
    ) -> Result<(), MemoryError> {
        let read = |t: u64, i: usize| {
            // SAFETY: `t` is a page-table frame of this address space; i < 512.
            unsafe { table(t).add(i).read() }
        };
        let present = |entry: u64| (entry & flags::PRESENT != 0).then_some(entry & flags::ADDRESS_MASK);
        for i4 in 0..USER_ROOT_ENTRIES {
            let Some(pdpt) = present(read(self.root, i4)) else { continue };
            for i3 in 0..512 {
                let Some(pd) = present(read(pdpt, i3)) else { continue };
                for i2 in 0..512 {
                    let Some(pt) = present(read(pd, i2)) else { continue };
                    for i1 in 0..512 {
                        let entry = read(pt, i1);
                        if let Some(frame) = present(entry) {
                            let address =
                                ((i4 as u64) << 39) | ((i3 as u64) << 30) | ((i2 as u64) << 21) | ((i1 as u64) << 12);
                            visit_page(address, frame, entry)?;
                        }
                    }
                    if let Some(visit) = visit_table.as_mut() {
                        visit(pt);
                    }
                }
                if let Some(visit) = visit_table.as_mut() {
                    visit(pd);
                }
            }
            if let Some(visit) = visit_table.as_mut() {
                visit(pdpt);
            }
        }
        Ok(())
    }

    /// Calls `visit(address, frame, entry)` for every mapped user page.
    fn for_each_page(
        &self,
        mut visit: impl FnMut(u64, u64, u64) -> Result<(), MemoryError>,
    ) -> Result<(), MemoryError> {
        self.walk(&mut visit, None)
    }

    /// Frees every page and table of the user half and the root: the end of the process's
    /// memory. Afterwards the address space holds no frame.
    pub fn destroy(&mut self) {
        // Frames go back as the walk passes them: a table is freed only after its entries were
        // read, and nothing allocates meanwhile (this core runs only this code).
        let count = core::cell::Cell::new(self.frames);
        let free_frame = |frame: u64| {
            if frames::free(frame).is_ok() {
                count.set(count.get() - 1);
            } else {
                log::error!("address space: frame {frame:#x} was not allocated");
            }
        };
        let _ = self.walk(
            &mut |_, frame, entry| {
                if entry & SHARED != 0 {
                    release_shared(frame);
                } else {
                    free_frame(frame);
                }
                Ok(())
            },
            Some(&mut |table| free_frame(table)),
        );
        free_frame(self.root);
        self.frames = count.get();
        self.root = 0;
        self.areas.clear();
        self.generation = next_generation();
    }
}

impl Drop for AddressSpace {
    fn drop(&mut self) {
        if self.root != 0 {
            self.destroy();
        }
    }
}

/// Whether `[address, address + length)` is inside user space and not empty.
pub fn is_user(address: u64, length: u64) -> bool {
    length > 0 && address.checked_add(length).is_some_and(|end| end <= USER_END)
}
