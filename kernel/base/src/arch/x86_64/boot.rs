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
    or $0x80010001, %eax          /* paging, write protection in ring 0 too (a copy into a read-only user page faults), protection */
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

// ----- The Rust side of the two entries -----

use crate::arch::paging::physical_to_virtual;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;
use kcb::block::{CoreState, Kcb};
use platform::memmap::{Range, Region, RegionKind};

/// `hvm_start_info` [Xen include/public/arch-x86/hvm/start_info.h].
#[repr(C)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    module_count: u32,
    module_list: u64,
    command_line: u64,
    rsdp: u64,
    memory_map: u64,
    memory_map_entries: u32,
    reserved: u32,
}

/// `hvm_modlist_entry` [Xen start_info.h]: QEMU passes `-initrd` as module 0.
#[repr(C)]
struct ModuleEntry {
    address: u64,
    size: u64,
    command_line: u64,
    reserved: u64,
}

/// `hvm_memmap_table_entry` [Xen start_info.h]: an E820 entry.
#[repr(C)]
struct MemoryMapEntry {
    address: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

const START_INFO_MAGIC: u32 = 0x336e_c578;
/// Most memory-map entries read.
const MAX_REGIONS: usize = 64;

/// What the loader told the bootstrap core (the PVH start_info, read once). Only the
/// bootstrap entry makes one and hands it to the kernel's bootstrap function, so holding it
/// also says: early boot, on the bootstrap core, on the boot page tables (which map the low
/// 4 GiB at the direct-map base), with no other core running.
pub struct BootInformation {
    /// The kernel command line (empty when none, or not UTF-8).
    pub command_line: &'static str,
    regions: [Region; MAX_REGIONS],
    region_count: usize,
    /// Where QEMU loaded the initramfs (`-initrd`, PVH module 0); empty if none.
    pub initramfs: Range,
    rsdp: u64,
}

impl BootInformation {
    /// Reads the start_info at `start_info_physical`.
    ///
    /// # Safety
    /// `start_info_physical` must be the address PVH passed in `%ebx`, on the boot page tables.
    unsafe fn read(start_info_physical: u32) -> Result<Self, StartInfoError> {
        // SAFETY: PVH passes the physical address of a start_info the loader wrote below
        // 4 GiB, which the boot direct map covers (per the caller).
        let start_info = unsafe { &*(physical_to_virtual(u64::from(start_info_physical)) as *const StartInfo) };
        if start_info.magic != START_INFO_MAGIC {
            return Err(StartInfoError::NoStartInfo { magic: start_info.magic });
        }
        let mut regions = [Region { start: 0, length: 0, kind: RegionKind::Reserved }; MAX_REGIONS];
        let region_count = (start_info.memory_map_entries as usize).min(MAX_REGIONS);
        if start_info.version < 1 || region_count == 0 {
            return Err(StartInfoError::NoMemoryMap { version: start_info.version });
        }
        for (i, region) in regions.iter_mut().enumerate().take(region_count) {
            // SAFETY: `memory_map` points at `memory_map_entries` entries in low memory.
            let entry = unsafe { &*(physical_to_virtual(start_info.memory_map) as *const MemoryMapEntry).add(i) };
            *region = Region { start: entry.address, length: entry.size, kind: RegionKind::from_e820(entry.kind) };
        }
        let initramfs = if start_info.module_count > 0 && start_info.module_list != 0 {
            // SAFETY: PVH puts `module_count` entries at `module_list`, in low memory the boot
            // direct map covers.
            let module = unsafe { &*(physical_to_virtual(start_info.module_list) as *const ModuleEntry) };
            Range { start: module.address, end: module.address + module.size }
        } else {
            Range { start: 0, end: 0 }
        };
        // SAFETY: the loader's command line, in low memory the boot tables map.
        let command_line = unsafe { c_string(start_info.command_line) };
        Ok(Self { command_line, regions, region_count, initramfs, rsdp: start_info.rsdp })
    }

    /// The loader's memory map.
    pub fn memory_map(&self) -> &[Region] {
        &self.regions[..self.region_count]
    }

    /// The ACPI tables, from the RSDP the loader named or, without one, found in the BIOS
    /// areas.
    pub fn acpi_tables(&self) -> Result<acpi::AcpiTables<BootAcpiMapper>, acpi::AcpiError> {
        // SAFETY: the RSDP address comes from the loader; when absent, the BIOS areas are
        // searched; the boot direct map covers both (a `BootInformation` exists only while
        // the boot tables are loaded).
        unsafe {
            if self.rsdp != 0 {
                acpi::AcpiTables::from_rsdp(BootAcpiMapper, self.rsdp as usize)
            } else {
                acpi::AcpiTables::search_for_rsdp_bios(BootAcpiMapper)
            }
        }
    }
}

/// Why the loader's start_info cannot be used (the kernel says so once its console is up).
#[derive(Clone, Copy, Debug)]
pub enum StartInfoError {
    /// No PVH start_info: the kernel was not booted by a PVH loader.
    NoStartInfo { magic: u32 },
    /// The start_info lists no memory map.
    NoMemoryMap { version: u32 },
}

impl core::fmt::Display for StartInfoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoStartInfo { magic } => {
                write!(f, "no PVH start_info (magic {magic:#x}): boot Reef with QEMU -kernel")
            }
            Self::NoMemoryMap { version } => {
                write!(f, "the loader gave no memory map (PVH start_info version {version})")
            }
        }
    }
}

/// The NUL-terminated string at `physical` (at most 4 KiB; empty if not UTF-8).
///
/// # Safety
/// `physical` must be 0 or a string the boot direct map covers, never written afterwards.
unsafe fn c_string(physical: u64) -> &'static str {
    if physical == 0 {
        return "";
    }
    let start = physical_to_virtual(physical) as *const u8;
    let mut length = 0;
    // SAFETY: a NUL-terminated string in low memory the boot tables map (per the caller); we
    // stop at 4 KiB whatever it holds.
    while length < 4096 && unsafe { *start.add(length) } != 0 {
        length += 1;
    }
    // SAFETY: `length` bytes were just read from the same mapped range.
    let bytes = unsafe { core::slice::from_raw_parts(start, length) };
    core::str::from_utf8(bytes).unwrap_or("")
}

/// Maps ACPI tables through the boot page tables' direct map (all of the low 4 GiB).
#[derive(Clone)]
pub struct BootAcpiMapper;

impl acpi::AcpiHandler for BootAcpiMapper {
    unsafe fn map_physical_region<T>(&self, address: usize, size: usize) -> acpi::PhysicalMapping<Self, T> {
        let pointer = NonNull::new(physical_to_virtual(address as u64) as *mut T).expect("direct map is never null");
        // SAFETY: during early boot the direct map covers the low 4 GiB, where firmware puts
        // ACPI tables; the mapping is permanent, so nothing to undo.
        unsafe { acpi::PhysicalMapping::new(address, pointer, size, size, Self) }
    }

    fn unmap_physical_region<T>(_region: &acpi::PhysicalMapping<Self, T>) {}
}

/// What the instance entry hands the kernel: the KCB the boot driver passed, checked to be of
/// this kernel's layout version. Only [`instance_entry`] makes one, so holding it says the
/// KCB is this core's own, in the shared region, mapped by this instance's page tables.
pub struct InstanceEntry {
    kcb: &'static Kcb,
}

impl InstanceEntry {
    /// The KCB this instance was started with.
    pub fn kcb(&self) -> &'static Kcb {
        self.kcb
    }
}

extern "Rust" {
    /// The kernel's bootstrap function, given to this layer by [`kernel_entries!`].
    fn reef_bootstrap_main(information: Result<BootInformation, StartInfoError>) -> !;
    /// The kernel's instance function, given to this layer by [`kernel_entries!`].
    fn reef_instance_main(entry: InstanceEntry) -> !;
}

/// The bootstrap core's Rust entry, from `_pvh_start` on the boot page tables.
#[no_mangle]
extern "C" fn boot_main(start_info_physical: u32) -> ! {
    // SAFETY: only `_pvh_start` calls this symbol, with the start_info address PVH passed,
    // on the boot page tables.
    let information = unsafe { BootInformation::read(start_info_physical) };
    // SAFETY: `kernel_entries!` defines the symbol with exactly this signature (its body is a
    // type-checked call of the function the kernel names).
    unsafe { reef_bootstrap_main(information) }
}

/// Where every kernel instance starts, on its own page tables and stack, with its KCB: the
/// address in `.note.reef` that boot drivers (the trampoline, or [`super::paging::enter_instance`]
/// for instance 0) jump to.
pub extern "C" fn instance_entry(kcb_address: u64) -> ! {
    // SAFETY: the boot driver passes the address of this core's KCB in the shared region,
    // which this instance's page tables map; KCBs live as long as the system.
    let kcb = unsafe { &*(kcb_address as *const Kcb) };
    if kcb.version.load(Ordering::Acquire) != kcb::VERSION {
        // Nothing else of a KCB of another layout can be trusted, not even where the shared
        // region is: say so through the state word every version keeps in place, and halt.
        kcb.set_state(CoreState::Faulted);
        super::cpu::halt_forever();
    }
    // SAFETY: as for `reef_bootstrap_main`.
    unsafe { reef_instance_main(InstanceEntry { kcb }) }
}

/// Gives this layer the kernel's two entry functions: `bootstrap(Result<BootInformation,
/// StartInfoError>) -> !`, run
/// once on the bootstrap core, and `instance(InstanceEntry) -> !`, run by every kernel
/// instance. Invoke it once, in the crate root (the base names no service: the kernel
/// names itself here, as Asterinas's `#[ostd::main]` does).
#[macro_export]
macro_rules! kernel_entries {
    (bootstrap: $bootstrap:path, instance: $instance:path $(,)?) => {
        #[no_mangle]
        #[allow(unsafe_code)]
        fn reef_bootstrap_main(
            information: Result<$crate::arch::boot::BootInformation, $crate::arch::boot::StartInfoError>,
        ) -> ! {
            $bootstrap(information)
        }

        #[no_mangle]
        #[allow(unsafe_code)]
        fn reef_instance_main(entry: $crate::arch::boot::InstanceEntry) -> ! {
            $instance(entry)
        }
    };
}

/// The address of this image's instance entry.
pub fn instance_entry_address() -> u64 {
    instance_entry as *const () as u64
}

/// What a root maps at one address: whether writable and executable on every level.
struct Mapped {
    writable: bool,
    executable: bool,
}

/// Walks the tables under `root` for `virtual_address` through the boot direct map; `None`
/// if not mapped, or if a table lies above 4 GiB (out of the boot map's reach).
fn boot_walk(_boot: &BootInformation, root: u64, virtual_address: u64) -> Option<Mapped> {
    use super::paging::flags;
    let mut table = root;
    let mut mapped = Mapped { writable: true, executable: true };
    for level in (1..=4u32).rev() {
        if table >= 1 << 32 {
            return None;
        }
        let index = (virtual_address >> (12 + 9 * (level - 1))) & 511;
        // SAFETY: `table` is below 4 GiB, which the boot tables map at the direct map (a
        // `BootInformation` exists only while they are loaded); a table is 512 entries.
        let entry = unsafe { (physical_to_virtual(table) as *const u64).add(index as usize).read() };
        if entry & flags::PRESENT == 0 {
            return None;
        }
        mapped.writable &= entry & flags::WRITABLE != 0;
        mapped.executable &= entry & flags::NO_EXECUTE == 0;
        if level == 1 || entry & flags::LARGE != 0 {
            return Some(mapped);
        }
        table = entry & flags::ADDRESS_MASK;
    }
    None
}

/// The bootstrap core becomes kernel instance 0: loads `root`, moves to the stack below
/// `stack_top` and enters [`instance_entry`] with `kcb`; early boot ends here (the
/// `BootInformation` is used up). Panics unless `root` maps the instance entry executable,
/// and the stack's top word and the KCB writable.
pub fn enter_first_instance(information: BootInformation, root: u64, stack_top: u64, kcb: &'static Kcb) -> ! {
    let kcb_address = kcb as *const Kcb as u64;
    let entry = boot_walk(&information, root, instance_entry_address());
    let stack = boot_walk(&information, root, stack_top - 8);
    let kcb_end = kcb_address + core::mem::size_of::<Kcb>() as u64;
    let block = (kcb_address..kcb_end)
        .step_by(4096)
        .chain([kcb_end - 1])
        .all(|address| boot_walk(&information, root, address).is_some_and(|m| m.writable));
    assert!(
        entry.is_some_and(|m| m.executable) && stack.is_some_and(|m| m.writable) && block,
        "instance 0's page tables do not map its entry, stack and KCB"
    );
    // SAFETY: checked above: `root` maps the kernel's entry, the new stack and the whole KCB;
    // `instance_entry` never returns, and nothing of the old stack is used after the switch.
    unsafe { super::paging::enter_instance(root, stack_top, instance_entry, kcb_address) }
}
