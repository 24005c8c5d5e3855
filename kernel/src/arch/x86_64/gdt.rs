//! Per-core GDT and TSS with IST stacks for faults that must not trust the current stack.

use super::stacks::KernelStack;
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

static TSS: Once<TaskStateSegment> = Once::new();
static GDT: Once<(GlobalDescriptorTable, SegmentSelector, SegmentSelector, SegmentSelector)> = Once::new();

/// Loads this core's GDT, segment registers and TSS.
pub fn load() {
    let tss = TSS.call_once(|| {
        let mut tss = TaskStateSegment::new();
        // The IST stacks are mapped by the boot driver, with guard pages (see `stacks`).
        tss.interrupt_stack_table[IST_CRITICAL as usize] = VirtAddr::new(KernelStack::Critical.top());
        tss.interrupt_stack_table[IST_PAGE_FAULT as usize] = VirtAddr::new(KernelStack::PageFault.top());
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
