//! Per-core GDT and TSS with IST stacks for faults that must not trust the current stack.

use core::cell::UnsafeCell;
use spin::Once;
use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;
use x86_64::VirtAddr;

/// IST slot (1-based in the IDT, 0-based here) for double fault, NMI and machine check.
pub const IST_CRITICAL: u16 = 0;
/// IST slot for page faults, so a stack overflow still gets a report.
pub const IST_PAGE_FAULT: u16 = 1;

const IST_STACK_SIZE: usize = 16 * 1024;

/// A stack only the CPU writes (on an IST switch); Rust never reads it.
#[repr(C, align(16))]
struct InterruptStack(UnsafeCell<[u8; IST_STACK_SIZE]>);

// SAFETY: the stack is only ever written by this core's CPU during an IST switch; no Rust
// reference into it exists, only its top address.
unsafe impl Sync for InterruptStack {}

impl InterruptStack {
    fn top(&self) -> VirtAddr {
        VirtAddr::new(self.0.get() as u64 + IST_STACK_SIZE as u64)
    }
}

// These statics live in .bss, which every instance maps to its own copy: one set per core.
static CRITICAL_STACK: InterruptStack = InterruptStack(UnsafeCell::new([0; IST_STACK_SIZE]));
static PAGE_FAULT_STACK: InterruptStack = InterruptStack(UnsafeCell::new([0; IST_STACK_SIZE]));
static TSS: Once<TaskStateSegment> = Once::new();
static GDT: Once<(GlobalDescriptorTable, SegmentSelector, SegmentSelector, SegmentSelector)> = Once::new();

/// Loads this core's GDT, segment registers and TSS.
pub fn load() {
    let tss = TSS.call_once(|| {
        let mut tss = TaskStateSegment::new();
        tss.interrupt_stack_table[IST_CRITICAL as usize] = CRITICAL_STACK.top();
        tss.interrupt_stack_table[IST_PAGE_FAULT as usize] = PAGE_FAULT_STACK.top();
        tss
    });
    let (gdt, code, data, tss_selector) = GDT.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss_selector = gdt.append(Descriptor::tss_segment(tss));
        (gdt, code, data, tss_selector)
    });
    gdt.load();
    // SAFETY: the selectors index descriptors of the GDT just loaded, which lives for the
    // whole life of this instance (a static of its private .bss).
    unsafe {
        CS::set_reg(*code);
        DS::set_reg(*data);
        ES::set_reg(*data);
        SS::set_reg(*data);
        load_tss(*tss_selector);
    }
}
