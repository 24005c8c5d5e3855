//! Kernel stacks at fixed virtual addresses, each with unmapped guard pages below it.
//!
//! Every instance maps its stacks at the same virtual addresses, under its own page tables,
//! backed by frames of its own partition (the boot driver maps them). Below each stack the
//! rest of its slot stays unmapped, so an overflow is a page fault on a guard page rather than
//! a silent write into whatever lies below. Page faults switch to their own IST stack, so the
//! overflow of the main stack is still reported; [`guard_hit`] names the stack. A fault from
//! ring 3 leaves the IST stack at once for the thread's own kernel stack (`idt.rs`), since
//! its handling may switch threads.

use super::paging::PAGE_SIZE;

/// Base of the stack area (one PML4 slot no other mapping uses).
pub const STACK_AREA_BASE: u64 = 0xFFFF_E000_0000_0000;
/// Virtual space per stack: the stack at the top, guard pages below.
const SLOT_SIZE: u64 = 1 << 20;

/// One of an instance's kernel stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelStack {
    /// The stack the instance runs on (idle loop, core 0's wait for init, handlers, interrupts).
    Main = 0,
    /// IST stack of double fault, NMI and machine check.
    Critical = 1,
    /// IST stack of page faults, so a stack overflow still gets a report.
    PageFault = 2,
}

impl KernelStack {
    /// Every stack an instance has.
    pub const ALL: [Self; 3] = [Self::Main, Self::Critical, Self::PageFault];

    /// Bytes of the stack (a page multiple).
    pub const fn size(self) -> u64 {
        match self {
            Self::Main => 64 * 1024,
            Self::Critical | Self::PageFault => 16 * 1024,
        }
    }

    /// One past its highest byte: the initial stack pointer.
    pub const fn top(self) -> u64 {
        STACK_AREA_BASE + (self as u64 + 1) * SLOT_SIZE
    }

    /// Its lowest mapped byte; the page below is a guard page.
    pub const fn bottom(self) -> u64 {
        self.top() - self.size()
    }

    /// Name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Main => "main",
            Self::Critical => "critical-fault",
            Self::PageFault => "page-fault",
        }
    }
}

const _: () = {
    let mut i = 0;
    while i < KernelStack::ALL.len() {
        let stack = KernelStack::ALL[i];
        assert!(stack.size().is_multiple_of(PAGE_SIZE) && stack.size() + PAGE_SIZE <= SLOT_SIZE);
        i += 1;
    }
};

/// The stack whose guard pages hold `address`, if any: a fault there is a stack overflow.
pub fn guard_hit(address: u64) -> Option<KernelStack> {
    KernelStack::ALL.into_iter().find(|stack| (stack.top() - SLOT_SIZE..stack.bottom()).contains(&address))
}

/// Kernel stack of one thread: pages in the stack area above an unmapped guard, at a slot
/// after the instance's own stacks. Slots are reused with their pages still mapped, so
/// creating a thread costs no page-table work after the first use of a slot.
#[derive(Debug)]
pub struct ThreadStack {
    slot: usize,
}

/// Bytes of a thread's kernel stack.
pub const THREAD_STACK_SIZE: u64 = 32 * 1024;
/// Most threads an instance runs at once (slots in the stack area).
pub const THREAD_STACK_SLOTS: usize = 1024;
const FIRST_THREAD_SLOT: usize = KernelStack::ALL.len();

/// Which slots hold a thread's stack now, and which have pages mapped (private .bss).
struct SlotTable {
    in_use: [u64; THREAD_STACK_SLOTS / 64],
    mapped: [u64; THREAD_STACK_SLOTS / 64],
    /// Frames the mapped slots hold (pages and tables), kept for reuse.
    cached_frames: u64,
}

static SLOTS: spin::Mutex<SlotTable> = spin::Mutex::new(SlotTable {
    in_use: [0; THREAD_STACK_SLOTS / 64],
    mapped: [0; THREAD_STACK_SLOTS / 64],
    cached_frames: 0,
});

/// Why a thread stack could not be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackError {
    /// Every slot holds a running thread's stack.
    NoSlot,
    /// No frame left for its pages or tables.
    OutOfMemory,
}

impl ThreadStack {
    /// Takes a free slot, mapping its pages on first use with `map_page(virtual)`, which
    /// returns how many frames it took (the page and any new table).
    pub fn allocate(map_page: impl Fn(u64) -> Result<u64, ()>) -> Result<Self, StackError> {
        let mut slots = SLOTS.lock();
        let slot =
            (0..THREAD_STACK_SLOTS).find(|&s| slots.in_use[s / 64] & (1 << (s % 64)) == 0).ok_or(StackError::NoSlot)?;
        let stack = Self { slot };
        if slots.mapped[slot / 64] & (1 << (slot % 64)) == 0 {
            let mut page = stack.bottom();
            while page < stack.top() {
                slots.cached_frames += map_page(page).map_err(|()| StackError::OutOfMemory)?;
                page += PAGE_SIZE;
            }
            slots.mapped[slot / 64] |= 1 << (slot % 64);
        }
        slots.in_use[slot / 64] |= 1 << (slot % 64);
        Ok(stack)
    }

    /// One past the highest byte.
    pub fn top(&self) -> u64 {
        STACK_AREA_BASE + (FIRST_THREAD_SLOT + self.slot + 1) as u64 * SLOT_SIZE
    }

    /// Lowest mapped byte.
    pub fn bottom(&self) -> u64 {
        self.top() - THREAD_STACK_SIZE
    }
}

impl Drop for ThreadStack {
    fn drop(&mut self) {
        SLOTS.lock().in_use[self.slot / 64] &= !(1 << (self.slot % 64));
    }
}

/// Thread stacks in use now, and the frames kept mapped for stack slots (the leak check
/// counts those as accounted for).
pub fn thread_stack_usage() -> (u32, u64) {
    let slots = SLOTS.lock();
    (slots.in_use.iter().map(|w| w.count_ones()).sum(), slots.cached_frames)
}
