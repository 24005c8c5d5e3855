//! PVH entry: 32-bit protected mode to long mode on boot page tables, then `boot_main`.
//!
//! QEMU's `-kernel` reads the PVH note and enters `_pvh_start` in 32-bit protected mode with
//! paging off and `%ebx` holding the physical address of the `hvm_start_info` [Xen PVH ABI].
//! Before any Rust runs, the entry saves a pristine copy of `.data` (the template the boot
//! driver gives every new kernel instance), zeroes `.bss`, and maps:
//! - the first 4 GiB identity (PML4[0]) and at the direct-map base (PML4[256]),
//! - the first 1 GiB at -2 GiB (PML4[511]), where the kernel is linked.

use core::arch::global_asm;

global_asm!(
    r#"
    .section .note.Xen, "a"
    .p2align 2
    .long 4
    .long 8
    .long 18
    .asciz "Xen"
    .p2align 2
    .quad _pvh_start

    .section .boot.bss, "aw", @nobits
    .p2align 12
boot_pml4:    .skip 4096
boot_pdpt_dm: .skip 4096
boot_pdpt_hi: .skip 4096
boot_pd:      .skip 4096 * 4
    .p2align 4
boot_stack:   .skip 65536
boot_stack_top:

    .section .boot.rodata, "a"
    .p2align 3
boot_gdt:
    .quad 0
    .quad 0x00AF9A000000FFFF
    .quad 0x00CF92000000FFFF
boot_gdt_pointer:
    .word boot_gdt_pointer - boot_gdt - 1
    .long boot_gdt

    .section .boot.text, "ax"
    .code32
    .global _pvh_start
_pvh_start:
    cli
    cld
    mov $boot_stack_top, %esp
    mov %ebx, %ebp

    /* The pristine .data template, before anything writes .data. */
    mov $__data_start_phys, %esi
    mov $__pristine_phys, %edi
    mov $__data_template_size, %ecx
    rep movsb
    xor %eax, %eax
    mov $__bss_start_phys, %edi
    mov $__bss_size, %ecx
    rep stosb

    /* Boot page tables: 7 pages from boot_pml4. */
    mov $boot_pml4, %edi
    mov $(4096 * 7 / 4), %ecx
    rep stosl

    mov $boot_pdpt_dm, %eax
    or $3, %eax
    mov %eax, boot_pml4
    mov %eax, boot_pml4 + 256 * 8
    mov $boot_pdpt_hi, %eax
    or $3, %eax
    mov %eax, boot_pml4 + 511 * 8

    mov $boot_pd, %eax
    or $3, %eax
    mov %eax, boot_pdpt_hi + 510 * 8
    mov $boot_pdpt_dm, %edi
    mov $4, %ecx
1:  mov %eax, (%edi)
    add $4096, %eax
    add $8, %edi
    loop 1b

    /* 2048 large pages: 0..4 GiB, present | writable | large. */
    mov $boot_pd, %edi
    mov $0x83, %eax
    mov $2048, %ecx
2:  mov %eax, (%edi)
    add $0x200000, %eax
    add $8, %edi
    loop 2b

    mov $boot_pml4, %eax
    mov %eax, %cr3
    mov %cr4, %eax
    or $(1 << 5), %eax            /* PAE */
    mov %eax, %cr4
    mov $0xC0000080, %ecx         /* EFER: long mode enable, no-execute enable */
    rdmsr
    or $((1 << 8) | (1 << 11)), %eax
    wrmsr
    mov %cr0, %eax
    or $0x80000001, %eax          /* paging, protection */
    mov %eax, %cr0
    lgdt boot_gdt_pointer
    ljmp $0x08, $boot_long_mode

    .code64
boot_long_mode:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %ax, %ax
    mov %ax, %fs
    mov %ax, %gs
    movabs $0xFFFFFFFF80000000, %rax
    add %rax, %rsp
    mov %ebp, %edi
    movabs $boot_main, %rax
    call *%rax
3:  cli
    hlt
    jmp 3b
    "#,
    options(att_syntax)
);
