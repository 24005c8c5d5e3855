//! The AP trampoline: real mode at 0x8000 → protected mode → long mode → instance entry.
//!
//! The boot driver copies these bytes to [`TRAMPOLINE_BASE`], fills [`TrampolineParameters`] at
//! their fixed offset and sends INIT-SIPI-SIPI with vector `TRAMPOLINE_BASE >> 12` [SDM vol3
//! §10.4.4.1]. The code runs at its copy, so every address in it is computed from the base.

use core::arch::global_asm;

/// Physical address the trampoline runs at (a 4 KiB page below 1 MiB, SIPI vector 0x08).
pub const TRAMPOLINE_BASE: u64 = 0x8000;

/// What the trampoline reads, written by the boot driver before the SIPI.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TrampolineParameters {
    /// Physical address of the new instance's PML4 (below 4 GiB: loaded from 32-bit mode).
    pub page_table_root: u64,
    /// Top of the new instance's boot stack (virtual).
    pub stack_top: u64,
    /// The instance entry point (virtual), `extern "C" fn(kcb: u64) -> !`.
    pub entry: u64,
    /// Address of the new core's KCB (virtual, in the shared region), the entry's argument.
    pub kcb: u64,
}

global_asm!(
    r#"
    .section .rodata.trampoline, "a"
    .global __trampoline_start
    .global __trampoline_end
    .global __trampoline_parameters
    .code16
__trampoline_start:
    cli
    cld
    xor %ax, %ax
    mov %ax, %ds
    lgdtl 0x8000 + (trampoline_gdt_pointer - __trampoline_start)
    mov %cr0, %eax
    or $1, %eax
    mov %eax, %cr0
    ljmpl $0x18, $(0x8000 + (trampoline_protected - __trampoline_start))

    .code32
trampoline_protected:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %cr4, %eax
    or $(1 << 5), %eax
    mov %eax, %cr4
    mov 0x8000 + (__trampoline_parameters - __trampoline_start), %eax
    mov %eax, %cr3
    mov $0xC0000080, %ecx
    rdmsr
    or $((1 << 8) | (1 << 11)), %eax
    wrmsr
    mov %cr0, %eax
    or $0x80010000, %eax          /* paging, write protection in ring 0 too */
    mov %eax, %cr0
    ljmp $0x08, $(0x8000 + (trampoline_long - __trampoline_start))

    .code64
trampoline_long:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %ax, %ax
    mov %ax, %fs
    mov %ax, %gs
    mov 0x8000 + (__trampoline_parameters - __trampoline_start) + 8, %rsp
    /* As if called: the System V ABI wants RSP + 8 16-byte aligned at a function's entry. */
    push $0
    mov 0x8000 + (__trampoline_parameters - __trampoline_start) + 24, %rdi
    mov 0x8000 + (__trampoline_parameters - __trampoline_start) + 16, %rax
    jmp *%rax

    .p2align 3
trampoline_gdt:
    .quad 0
    .quad 0x00AF9A000000FFFF
    .quad 0x00CF92000000FFFF
    .quad 0x00CF9A000000FFFF
trampoline_gdt_pointer:
    .word trampoline_gdt_pointer - trampoline_gdt - 1
    .long 0x8000 + (trampoline_gdt - __trampoline_start)
    .p2align 3
__trampoline_parameters:
    .skip 32
__trampoline_end:
    .code64
    "#,
    options(att_syntax)
);

extern "C" {
    static __trampoline_start: u8;
    static __trampoline_end: u8;
    static __trampoline_parameters: u8;
}

/// The trampoline's bytes, as linked into the kernel image.
pub fn code() -> &'static [u8] {
    // SAFETY: the two symbols delimit one contiguous, read-only run of bytes in .rodata.
    unsafe { super::image_note::linked_bytes(&raw const __trampoline_start, &raw const __trampoline_end) }
}

/// Offset of [`TrampolineParameters`] from the start of the trampoline.
pub fn parameters_offset() -> usize {
    (&raw const __trampoline_parameters) as usize - (&raw const __trampoline_start) as usize
}
