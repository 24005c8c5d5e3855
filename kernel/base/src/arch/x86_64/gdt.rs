//! Per-core GDT and TSS: kernel and user segments in the order SYSCALL/SYSRET need, IST
//! stacks for faults that must not trust the current stack, and `rsp0` for entries from ring 3.

use super::stacks::KernelStack;
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

/// Kernel code selector (`SYSCALL` loads it from STAR[47:32]).
pub const KERNEL_CODE: u16 = 0x08;
/// Kernel data selector (`SYSCALL` loads STAR[47:32] + 8).
pub const KERNEL_DATA: u16 = 0x10;
/// User data selector with RPL 3 (`SYSRET` loads STAR[63:48] + 8) [SDM vol3 §5.8.8].
pub const USER_DATA: u16 = 0x18 | 3;
/// User code selector with RPL 3 (`SYSRET` to 64-bit code loads STAR[63:48] + 16).
pub const USER_CODE: u16 = 0x20 | 3;
/// What STAR[63:48] holds so that SYSRET lands on [`USER_CODE`] and [`USER_DATA`].
pub const SYSRET_BASE: u16 = 0x10;

/// This core's TSS. The CPU reads it on every entry from ring 3; only this core writes it
/// (`rsp0`, at each switch to another thread).
struct Tss(UnsafeCell<TaskStateSegment>);

// SAFETY: each instance has its own copy (private .bss); it is written by this core only,
// with interrupts masked, and read by the CPU.
unsafe impl Sync for Tss {}

static TSS: Tss = Tss(UnsafeCell::new(TaskStateSegment::new()));
static GDT: Once<(GlobalDescriptorTable, SegmentSelector)> = Once::new();

/// Loads this core's GDT, segment registers and TSS.
pub fn load() {
    // SAFETY: nothing else runs on this core yet and the CPU has not loaded this TSS.
    let tss = unsafe { &mut *TSS.0.get() };
    // The IST stacks are mapped by the boot driver, with guard pages (see `stacks`).
    tss.interrupt_stack_table[IST_CRITICAL as usize] = VirtAddr::new(KernelStack::Critical.top());
    tss.interrupt_stack_table[IST_PAGE_FAULT as usize] = VirtAddr::new(KernelStack::PageFault.top());
    tss.privilege_stack_table[0] = VirtAddr::new(KernelStack::Main.top());
    let (gdt, tss_selector) = GDT.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let user_data = gdt.append(Descriptor::user_data_segment());
        let user_code = gdt.append(Descriptor::user_code_segment());
        // SAFETY: the TSS is a static of this instance that lives as long as the GDT.
        let tss_selector = gdt.append(Descriptor::tss_segment(unsafe { &*TSS.0.get() }));
        assert!(code.0 == KERNEL_CODE && data.0 == KERNEL_DATA);
        assert!(user_data.0 == USER_DATA && user_code.0 == USER_CODE);
        (gdt, tss_selector)
    });
    load_table(gdt, *tss_selector);
}

/// Loads `gdt`, this instance's table, with the segment registers and the TSS it names.
fn load_table(gdt: &'static GlobalDescriptorTable, tss_selector: SegmentSelector) {
    gdt.load();
    // SAFETY: the selectors index descriptors of the GDT just loaded, which lives for the
    // whole life of this instance (a static of its private .bss).
    unsafe {
        CS::set_reg(SegmentSelector(KERNEL_CODE));
        DS::set_reg(SegmentSelector(KERNEL_DATA));
        ES::set_reg(SegmentSelector(KERNEL_DATA));
        SS::set_reg(SegmentSelector(KERNEL_DATA));
        load_tss(tss_selector);
    }
}

/// Loads this instance's GDT, segment registers and TSS again on a processor that ran another
/// instance (a world switch), or a newly woken one. The TSS descriptor is marked busy since
/// this instance's first load; LTR takes only an available one, so the busy bit goes first.
pub fn reload() {
    let Some((gdt, tss_selector)) = GDT.get() else { return load() };
    let descriptor = gdt as *const GlobalDescriptorTable as u64 + u64::from(tss_selector.0 & !7);
    // SAFETY: `descriptor` is the low word of this instance's TSS descriptor, in its private
    // .bss; the processor itself writes its busy bit (type bit 1, bit 41) at every LTR, and
    // nothing in Rust reads the descriptor after the table was built. Interrupts are masked
    // by the caller (a world switch).
    unsafe { core::arch::asm!("btr qword ptr [{}], 41", in(reg) descriptor, options(nostack)) };
    load_table(gdt, *tss_selector);
}

/// Sets the stack the CPU switches to on an interrupt or exception from ring 3: the kernel
/// stack of the thread about to run.
pub fn set_kernel_stack(top: u64) {
    super::cpu::without_interrupts(|| {
        // SAFETY: only this core writes its TSS, with interrupts masked; the CPU reads the
        // field only on an entry from ring 3, which cannot happen on this core meanwhile.
        unsafe { (*TSS.0.get()).privilege_stack_table[0] = VirtAddr::new(top) };
    });
}
