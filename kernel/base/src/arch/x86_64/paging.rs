//! 4-level paging: the virtual layout every instance shares, entry flags, CR3 [SDM vol3 §4.5].

use core::arch::asm;

/// Physical memory an instance may touch appears at this base plus its physical address.
pub const DIRECT_MAP_BASE: u64 = 0xFFFF_8000_0000_0000;
/// Where the boot driver temporarily maps an offline core's partition to prepare it.
pub const BOOT_WINDOW_BASE: u64 = 0xFFFF_C000_0000_0000;
/// The kernel image is linked at this base plus its physical load address (-2 GiB).
pub const KERNEL_BASE: u64 = 0xFFFF_FFFF_8000_0000;
/// Size of a small page.
pub const PAGE_SIZE: u64 = 4096;
/// Size of a large page (one PD entry).
pub const LARGE_PAGE_SIZE: u64 = 2 * 1024 * 1024;

/// Page-table entry bits [SDM vol3 §4.5, table 4-19].
pub mod flags {
    pub const PRESENT: u64 = 1 << 0;
    pub const WRITABLE: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const WRITE_THROUGH: u64 = 1 << 3;
    pub const CACHE_DISABLE: u64 = 1 << 4;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    pub const LARGE: u64 = 1 << 7;
    pub const GLOBAL: u64 = 1 << 8;
    pub const NO_EXECUTE: u64 = 1 << 63;
    /// Bits 12..51 of an entry: the physical address it points to.
    pub const ADDRESS_MASK: u64 = 0x000F_FFFF_FFFF_F000;
}

/// The virtual address at which the direct map shows physical address `physical`.
#[inline(always)]
pub const fn physical_to_virtual(physical: u64) -> u64 {
    DIRECT_MAP_BASE + physical
}

/// Physical address of the active PML4.
#[inline]
pub fn current_root() -> u64 {
    let value: u64;
    // SAFETY: reading CR3 has no side effect.
    unsafe { asm!("mov {}, cr3", out(reg) value, options(nomem, nostack, preserves_flags)) };
    value & flags::ADDRESS_MASK
}

/// Loads a new PML4, flushing non-global TLB entries.
///
/// # Safety
/// `root` must be a valid PML4 that maps the running code, its stack and every static the
/// caller will touch at the same virtual addresses.
pub unsafe fn load_root(root: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { asm!("mov cr3, {}", in(reg) root, options(nostack, preserves_flags)) };
}

/// Flushes the TLB entry of one page.
pub fn flush_page(virtual_address: u64) {
    // SAFETY: INVLPG only drops a cached translation.
    unsafe { asm!("invlpg [{}]", in(reg) virtual_address, options(nostack, preserves_flags)) };
}

/// Switches to a freshly built instance address space and stack, then calls `entry(kcb)`.
/// This is how the bootstrap core becomes kernel instance 0, the same way an AP leaves the
/// trampoline.
///
/// # Safety
/// `root` must map the kernel image, `stack_top` and `kcb`; `entry` must never return.
pub unsafe fn enter_instance(root: u64, stack_top: u64, entry: extern "C" fn(u64) -> !, kcb: u64) -> ! {
    // SAFETY: guaranteed by the caller; after the switch nothing of the old stack is used.
    unsafe {
        asm!(
            "mov cr3, {root}",
            "mov rsp, {stack}",
            "xor ebp, ebp",
            "call {entry}",
            "ud2",
            root = in(reg) root,
            stack = in(reg) stack_top,
            entry = in(reg) entry,
            in("rdi") kcb,
            options(noreturn),
        )
    }
}
