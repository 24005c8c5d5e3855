//! The world switch: a processor leaves one kernel instance for another (a parked OSnode's,
//! Barrelfish/DC §4.4), or takes up a saved instance after INIT-SIPI.
//!
//! Neighbouring instances may run different images at the same virtual addresses, so the code
//! that loads the other instance's CR3 cannot be either image's text: it is one page of the
//! shared region (`SharedHeader::switch_code`), written once by the bootstrap core from these
//! bytes and mapped read-only and executable at [`SWITCH_CODE_BASE`] in every instance (the
//! boot driver maps it). The bytes use no absolute address. Their calling convention is part
//! of the KCB layout: changing it means a new `kcb::VERSION`.
//!
//! What a switch carries is what a C call keeps: the callee-saved registers, RFLAGS and the
//! return address on the stack being left, and the stack pointer and CR3 in a
//! [`SwitchContext`] of the shared region. Everything else of the processor (descriptor
//! tables, system-call MSRs, FPU, FS base, the local APIC on a new core) is the resumed
//! kernel's to load again: [`reload`].

use super::cpu::{read_msr, write_msr};
use core::arch::global_asm;
use kcb::block::SwitchContext;

/// Where every instance maps the switch code page: its own PML4 slot, which nothing else uses.
pub const SWITCH_CODE_BASE: u64 = 0xFFFF_F000_0000_0000;

const MSR_FS_BASE: u32 = 0xC000_0100;

global_asm!(
    r#"
    .section .rodata.world_switch, "a"
    .global __world_switch_start
    .global __world_switch_resume
    .global __world_switch_park
    .global __world_switch_end
    /* The callee-saved registers and flags on the stack, then its pointer and CR3 into the
       context at rdi, interrupts masked. */
    .macro world_switch_save
    push %rbp
    push %rbx
    push %r12
    push %r13
    push %r14
    push %r15
    pushfq
    cli
    mov %rsp, (%rdi)
    mov %cr3, %rax
    mov %rax, 8(%rdi)
    .endm

    .p2align 4
__world_switch_start:
    /* switch(save: rdi, load: rsi): leave this kernel, resume the one `load` holds. */
    world_switch_save
    mov %rsi, %rdi
__world_switch_resume:
    /* resume(context: rdi): also where the trampoline enters on a woken core. */
    mov (%rdi), %rsp
    mov 8(%rdi), %rax
    mov %rax, %cr3
    /* Toggling CR4.PGE drops global translations too: the text at these addresses may
       be another image's [SDM vol3 §4.10.4.1]. */
    mov %cr4, %rax
    mov %rax, %rcx
    xor $0x80, %rcx
    mov %rcx, %cr4
    mov %rax, %cr4
    popfq
    pop %r15
    pop %r14
    pop %r13
    pop %r12
    pop %rbx
    pop %rbp
    ret
__world_switch_park:
    /* park(save: rdi, word: rsi, value: edx): save this kernel, publish `value`, halt.
       After the publication this processor touches nothing of the saved stack. */
    world_switch_save
    mov %edx, (%rsi)
1:  hlt
    jmp 1b
__world_switch_end:
    "#,
    options(att_syntax)
);

extern "C" {
    static __world_switch_start: u8;
    static __world_switch_resume: u8;
    static __world_switch_park: u8;
    static __world_switch_end: u8;
}

/// The switch code's bytes, as linked into this image (the bootstrap core copies them into
/// the shared region).
pub fn code() -> &'static [u8] {
    // SAFETY: the two symbols delimit one contiguous, read-only run of bytes in .rodata.
    unsafe { super::image_note::linked_bytes(&raw const __world_switch_start, &raw const __world_switch_end) }
}

fn entry(symbol: *const u8) -> u64 {
    SWITCH_CODE_BASE + (symbol as u64 - (&raw const __world_switch_start) as u64)
}

/// Where a woken core enters the switch code with `rdi` = the context to resume.
pub fn resume_entry() -> u64 {
    entry(&raw const __world_switch_resume)
}

/// What the running kernel keeps across a switch that the switch code does not: the FPU and
/// SSE registers (a user thread's, possibly) and the FS base. On the stack being left, whose
/// alignment is not promised (an AP's first frames), so the FXSAVE image is aligned by hand.
struct Kept {
    fpu: [u8; 512 + 16],
    fs_base: u64,
}

impl Kept {
    fn image(&mut self) -> *mut u8 {
        let offset = self.fpu.as_ptr().align_offset(16);
        self.fpu[offset..].as_mut_ptr()
    }

    /// Saves into `self`, which must not move until [`Self::restore`] (the image's place
    /// depends on its address).
    fn save(&mut self) {
        // SAFETY: FS_BASE exists on every x86-64 processor.
        self.fs_base = unsafe { read_msr(MSR_FS_BASE) };
        // SAFETY: FXSAVE64 writes 512 bytes at a 16-byte aligned address inside `fpu`.
        unsafe { core::arch::asm!("fxsave64 [{}]", in(reg) self.image(), options(nostack, preserves_flags)) };
    }

    fn restore(&mut self) {
        // SAFETY: FXRSTOR64 reads the 512 aligned bytes FXSAVE64 wrote on this processor
        // model, so the image is valid for it.
        unsafe { core::arch::asm!("fxrstor64 [{}]", in(reg) self.image(), options(nostack, preserves_flags)) };
        // SAFETY: the value was read from FS_BASE, so it is canonical.
        unsafe { write_msr(MSR_FS_BASE, self.fs_base) };
    }
}

/// Leaves the running kernel for the one `load` holds, saving this one in `save`; returns when
/// some processor resumes `save` (this one or, after an unpark, another), with this
/// instance's processor state loaded again ([`reload`]; `fresh`, asked on return, says
/// whether the processor is a newly woken one). Interrupts are masked across.
///
/// # Safety
/// `load` must hold a context saved by this module's code (a switch or a park) that no
/// processor runs; `save` must be the running kernel's own context slot; no lock may be held
/// that the other kernel could wait for.
pub unsafe fn switch(save: &SwitchContext, load: &SwitchContext, fresh: impl FnOnce() -> bool) {
    let mut kept = Kept { fpu: [0; 512 + 16], fs_base: 0 };
    kept.save();
    // SAFETY: the page at SWITCH_CODE_BASE holds `code()` in every instance's page tables,
    // and its first routine has this signature; the caller vouches for `load`.
    unsafe {
        let routine: extern "C" fn(*const SwitchContext, *const SwitchContext) =
            core::mem::transmute(SWITCH_CODE_BASE as usize);
        routine(save, load);
    }
    reload(fresh());
    kept.restore();
}

/// Saves the running kernel in `save`, stores `value` into `word` as the last thing it
/// writes, and halts this processor; returns when a processor resumes `save`.
///
/// # Safety
/// As [`switch`]; whoever sees `value` in `word` may resume `save` at once.
pub unsafe fn park(
    save: &SwitchContext,
    word: &core::sync::atomic::AtomicU32,
    value: u32,
    fresh: impl FnOnce() -> bool,
) {
    let mut kept = Kept { fpu: [0; 512 + 16], fs_base: 0 };
    kept.save();
    // SAFETY: as in `switch`: the park routine of the mapped switch code.
    unsafe {
        let routine: extern "C" fn(*const SwitchContext, *const core::sync::atomic::AtomicU32, u32) =
            core::mem::transmute(entry(&raw const __world_switch_park) as usize);
        routine(save, word, value);
    }
    reload(fresh());
    kept.restore();
}

/// Loads this instance's processor state after a switch brought it onto a processor that
/// ran another instance (`fresh`: a core just woken by INIT-SIPI, whose local APIC is
/// reset too): control registers and system-call MSRs, GDT and TSS, IDT, and what it caches
/// of the local APIC's registers. Before the FPU
/// image is loaded back: FXRSTOR needs CR4.OSFXSR for the SSE registers.
fn reload(fresh: bool) {
    super::user::reload_processor_state();
    super::gdt::reload();
    super::idt::reload();
    super::apic::forget_icr_destination();
    if fresh {
        super::apic::enable_again();
    }
}
