//! Kernel stacks at fixed virtual addresses, each with unmapped guard pages below it.
//!
//! Every instance maps its stacks at the same virtual addresses, under its own page tables,
//! backed by frames of its own partition (the boot driver maps them). Below each stack the
//! rest of its slot stays unmapped, so an overflow is a page fault on a guard page rather than
//! a silent write into whatever lies below. Page faults switch to their own IST stack, so the
//! overflow of the main stack is still reported; [`guard_hit`] names the stack.

use super::paging::PAGE_SIZE;

/// Base of the stack area (one PML4 slot no other mapping uses).
pub const STACK_AREA_BASE: u64 = 0xFFFF_E000_0000_0000;
/// Virtual space per stack: the stack at the top, guard pages below.
const SLOT_SIZE: u64 = 1 << 20;

/// One of an instance's kernel stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelStack {
    /// The stack the instance runs on (idle loop, shell, handlers, interrupts).
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
