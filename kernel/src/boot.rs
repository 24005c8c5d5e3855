//! From the PVH entry to running kernel instances: early boot on the bootstrap core, then the
//! entry every instance (core 0 included) runs on its own page tables.

use crate::arch::paging::{physical_to_virtual, LARGE_PAGE_SIZE};
use crate::arch::{apic, cpu, gdt, idt, legacy};
use crate::core::boot_driver;
use crate::core::kcb::PartitionRange;
use crate::core::kcb::{CoreState, Kcb, Role};
use crate::core::shared::{self, BootFacts, SharedRegion, SHARED_REGION_SIZE};
use crate::mm::{frames, heap, image};
use ::core::ptr::NonNull;
use ::core::sync::atomic::Ordering;
use platform::memmap::{Range, Region, RegionKind, UsableMemory};
use platform::partition::{Plan, MAX_CORES};

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

#[repr(C)]
struct MemoryMapEntry {
    address: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

const START_INFO_MAGIC: u32 = 0x336e_c578;
/// Smallest partition Reef accepts: tables, data copy, stacks, heap and room to work.
const MINIMUM_PARTITION: u64 = 16 * 1024 * 1024;

/// Maps ACPI tables through the boot page tables' direct map (all of the low 4 GiB).
#[derive(Clone)]
struct BootAcpiMapper;

impl acpi::AcpiHandler for BootAcpiMapper {
    unsafe fn map_physical_region<T>(&self, address: usize, size: usize) -> acpi::PhysicalMapping<Self, T> {
        let pointer = NonNull::new(physical_to_virtual(address as u64) as *mut T).expect("direct map is never null");
        // SAFETY: during early boot the direct map covers the low 4 GiB, where firmware puts
        // ACPI tables; the mapping is permanent, so nothing to undo.
        unsafe { acpi::PhysicalMapping::new(address, pointer, size, size, Self) }
    }

    fn unmap_physical_region<T>(_region: &acpi::PhysicalMapping<Self, T>) {}
}

fn c_string(physical: u64) -> &'static str {
    if physical == 0 {
        return "";
    }
    let start = physical_to_virtual(physical) as *const u8;
    let mut length = 0;
    // SAFETY: the loader put a NUL-terminated command line there, in low memory the boot
    // tables map; we stop at 4 KiB whatever it holds.
    while length < 4096 && unsafe { *start.add(length) } != 0 {
        length += 1;
    }
    // SAFETY: `length` bytes were just read from the same mapped range.
    let bytes = unsafe { ::core::slice::from_raw_parts(start, length) };
    ::core::str::from_utf8(bytes).unwrap_or("")
}

/// The bootstrap core's Rust entry, from `_pvh_start` on the boot page tables.
#[no_mangle]
extern "C" fn boot_main(start_info_physical: u32) -> ! {
    let boot_tsc = cpu::read_tsc();
    legacy::com1::init();
    legacy::disable_pic(idt::VECTOR_LEGACY_BASE);
    crate::console::init_logging(platform::cmdline::LogLevel::Info);

    // SAFETY: PVH passes the physical address of a start_info the loader wrote below 4 GiB,
    // which the boot direct map covers.
    let start_info = unsafe { &*(physical_to_virtual(u64::from(start_info_physical)) as *const StartInfo) };
    if start_info.magic != START_INFO_MAGIC {
        panic!("no PVH start_info (magic {:#x}): boot Reef with QEMU -kernel", start_info.magic);
    }
    let command_line = c_string(start_info.command_line);
    let options = platform::cmdline::parse(command_line, |diagnostic| log::warn!("{diagnostic}"));
    crate::console::init_logging(options.log);

    // Memory map.
    let mut regions = [Region { start: 0, length: 0, kind: RegionKind::Reserved }; 64];
    let entries = (start_info.memory_map_entries as usize).min(regions.len());
    if start_info.version < 1 || entries == 0 {
        panic!("the loader gave no memory map (PVH start_info version {})", start_info.version);
    }
    for (i, region) in regions.iter_mut().enumerate().take(entries) {
        // SAFETY: `memory_map` points at `memory_map_entries` entries in low memory.
        let entry = unsafe { &*(physical_to_virtual(start_info.memory_map) as *const MemoryMapEntry).add(i) };
        *region = Region { start: entry.address, length: entry.size, kind: RegionKind::from_e820(entry.kind) };
    }
    let layout = image::ImageLayout::get();
    let (image_start, image_end) = layout.physical_range();
    let initramfs = if start_info.module_count > 0 && start_info.module_list != 0 {
        // SAFETY: PVH puts `module_count` entries at `module_list`, in low memory the boot
        // direct map covers.
        let module = unsafe { &*(physical_to_virtual(start_info.module_list) as *const ModuleEntry) };
        Range { start: module.address, end: module.address + module.size }
    } else {
        Range { start: 0, end: 0 }
    };
    // The 2 MiB pages around the initramfs: every instance maps them read-only, so no
    // partition may hold any of their bytes.
    let initramfs_cover =
        Range { start: initramfs.start & !(LARGE_PAGE_SIZE - 1), end: initramfs.end.next_multiple_of(LARGE_PAGE_SIZE) };
    // Low 2 MiB: trampoline, loader data, firmware; the image: shared read-only text.
    let reserved =
        [Range { start: 0, end: LARGE_PAGE_SIZE }, Range { start: image_start, end: image_end }, initramfs_cover];
    let usable = UsableMemory::new(&regions[..entries], &reserved);

    // Cores, from the MADT.
    // SAFETY: the RSDP address comes from the loader; when absent, the BIOS areas are searched,
    // which the boot direct map covers.
    let tables = unsafe {
        if start_info.rsdp != 0 {
            acpi::AcpiTables::from_rsdp(BootAcpiMapper, start_info.rsdp as usize)
        } else {
            acpi::AcpiTables::search_for_rsdp_bios(BootAcpiMapper)
        }
    };
    let tables = tables.unwrap_or_else(|error| panic!("no usable ACPI tables: {error:?}"));
    let listed = platform::madt::cores(&tables).unwrap_or_else(|error| panic!("cannot read the MADT: {error:?}"));

    // Calibration: TSC against the PIT, then the LAPIC timer against the TSC.
    let tsc_hz = legacy::measure_tsc_hz(5966).unwrap_or_else(|| {
        log::warn!("the PIT does not count: assuming a 2 GHz TSC, times will be off");
        2_000_000_000
    });
    let local = apic::init(listed.local_apic_address);
    let apic_timer_hz = local.measure_timer(tsc_hz / 200) * 200;
    let bootstrap_apic = local.id();

    // Logical ids: the bootstrap core is 0, the rest in MADT order.
    let mut apic_ids = [0u32; MAX_CORES];
    apic_ids[0] = bootstrap_apic;
    let mut count = 1;
    for entry in listed.entries() {
        if entry.apic_id != bootstrap_apic && count < MAX_CORES {
            apic_ids[count] = entry.apic_id;
            count += 1;
        }
    }
    for (core, apic_id) in apic_ids.iter().enumerate().take(count) {
        log::info!("found core {core}: APIC id {apic_id}{}", if core == 0 { " (bootstrap)" } else { "" });
    }

    let plan = Plan::new(&usable, count, SHARED_REGION_SIZE, MINIMUM_PARTITION)
        .unwrap_or_else(|error| panic!("cannot partition memory for {count} cores: {error:?}; give QEMU more memory"));
    let mut partitions = [Range { start: 0, end: 0 }; MAX_CORES];
    partitions[..count].copy_from_slice(plan.partitions());
    if initramfs.end > initramfs.start {
        log::info!(
            "initramfs {:#x}-{:#x} ({} KiB)",
            initramfs.start,
            initramfs.end,
            (initramfs.end - initramfs.start) >> 10
        );
    } else {
        log::info!("no initramfs (QEMU -initrd): no programs to run");
    }
    log::info!(
        "TSC {} MHz, LAPIC timer {} MHz, {} MiB usable, shared region {:#x}-{:#x}",
        tsc_hz / 1_000_000,
        apic_timer_hz / 1_000_000,
        usable.total() >> 20,
        plan.shared.start,
        plan.shared.end
    );
    let facts = BootFacts {
        tsc_hz,
        apic_timer_hz,
        boot_tsc,
        core_count: count as u32,
        local_apic_physical: listed.local_apic_address,
        io_apic: listed.io_apic,
        com1_route: listed.isa_routes[legacy::com1::ISA_IRQ],
        shared: plan.shared,
        options,
        partitions,
        has_mwait: cpu::has_monitor_mwait(),
        has_x2apic: apic::x2apic_supported(),
        pause_in_spins: !cpu::running_under_tcg(),
        initramfs,
    };
    // SAFETY: the plan's shared region is usable RAM the boot direct map covers, and no other
    // core runs yet.
    let region = unsafe { SharedRegion::initialise(plan.shared, facts) };
    for core in 0..count {
        let kcb = region.kcb(core);
        kcb.core_id.store(core as u32, Ordering::Relaxed);
        kcb.apic_id.store(apic_ids[core], Ordering::Relaxed);
        kcb.partition_start.store(partitions[core].start, Ordering::Relaxed);
        kcb.partition_end.store(partitions[core].end, Ordering::Relaxed);
        kcb.shared_region.store(region as *const SharedRegion as u64, Ordering::Relaxed);
        kcb.role.store(Role::Timesharing as u32, Ordering::Relaxed);
        kcb.parking.clear();
        kcb.version.store(kcb::VERSION, Ordering::Relaxed);
        region.header.osnodes[core].store(apic_ids[core], Ordering::Relaxed);
        kcb.set_state(CoreState::Offline);
    }
    boot_driver::enter_first_instance(region)
}

/// Where every kernel instance starts, on its own page tables and stack, with its KCB.
pub extern "C" fn instance_entry(kcb_address: u64) -> ! {
    // SAFETY: the boot driver passes the address of this core's KCB in the shared region,
    // which this instance's page tables map.
    let kcb = unsafe { &*(kcb_address as *const Kcb) };
    if kcb.version.load(Ordering::Acquire) != kcb::VERSION {
        // Nothing else of a KCB of another layout can be trusted, not even where the shared
        // region is: say so through the state word every version keeps in place, and halt.
        kcb.set_state(CoreState::Faulted);
        cpu::halt_forever();
    }
    // SAFETY: the KCB names the shared region, mapped at the same address in every instance.
    let region = unsafe { &*(kcb.shared_region.load(Ordering::Relaxed) as *const SharedRegion) };
    let core = kcb.core_id.load(Ordering::Relaxed);
    shared::attach(region, core);
    remove_identity_map();
    gdt::load();
    idt::load();
    let facts = &region.header.facts;
    cpu::set_pause_in_spins(facts.pause_in_spins);
    crate::console::init_logging(facts.options.log);

    // Own memory: heap first, then the frame allocator over the rest of the partition.
    let partition = kcb.partition();
    // The same place for every image (the boot driver keeps the reserve below it).
    let heap_start = partition.start + ::kcb::block::INSTANCE_RESERVE;
    // SAFETY: `[heap_start, heap_start + HEAP_SIZE)` and what follows up to the partition end
    // are this instance's own memory, unused so far, and covered by its direct map.
    unsafe {
        heap::init(heap_start);
        *frames::FRAMES.lock() = Some(frames::FrameAllocator::new(heap_start + heap::HEAP_SIZE, partition.end));
    }
    // Processes a restart kept for this kernel: their frames first, before anything takes one.
    // The frames that holds past its own work are the kept processes' (the leak check counts
    // them free at the baseline: they come back when the processes end). Measured on the
    // allocator, so a chain frame the adoption forgot to give back shows as a leak.
    let free_before_kept = frames::counts().0;
    crate::proc::keep::take_kept_frames();
    let kept_frames = free_before_kept - frames::counts().0;

    let local = apic::init(facts.local_apic_physical);
    // The role is the KCB's and outlives the kernel. The rt image runs what needs no timer:
    // an AC, or a KC, which keeps serving the syspages its KCB kept (a TC becomes an AC).
    // The thread an AC ran went home with the old kernel; the syspages a KC served are
    // counted again when this kernel takes them over (`syscall::syspage`).
    kcb.application_thread.store(0, Ordering::Release);
    kcb.syspages.store(0, Ordering::Release);
    kcb.stop_requested.store(0, Ordering::Release);
    if cfg!(feature = "rt") && kcb.role() != Role::Kernel {
        kcb.role.store(Role::Application as u32, Ordering::Release);
    }
    if kcb.role() == Role::Timesharing {
        crate::core::role::start_timer();
    }
    kcb.started_tsc.store(cpu::read_tsc(), Ordering::Relaxed);
    kcb.set_image_name(image::IMAGE_NAME);
    let build_id = image::build_id();
    let up = alloc::format!(
        "core {core} up: APIC id {} ({}), partition {:#x}-{:#x} ({} MiB), image {} build {}{}",
        local.id(),
        match local.mode() {
            apic::ApicMode::X2Apic => "x2APIC",
            apic::ApicMode::XApic { .. } => "xAPIC",
        },
        partition.start,
        partition.end,
        (partition.end - partition.start) >> 20,
        image::IMAGE_NAME,
        ::core::str::from_utf8(&build_id[..12]).unwrap_or("?"),
        if kcb.incarnation.load(Ordering::Relaxed) > 1 { ", restarted: taking over its channels" } else { "" },
    );
    // With processes kept for it, the line waits until they ran (`console::defer_info`).
    if crate::proc::keep::adopts_any() {
        crate::console::defer_info(up);
    } else {
        log::info!("{up}");
    }
    crate::msg::init();
    // Messaging waits the way the cores layer says: a parked core lets its host run.
    crate::msg::set_wait_strategy(crate::msg::WaitStrategy {
        while_waiting: crate::core::park::while_waiting,
        sleep: crate::core::park::sleep,
    });
    #[cfg(feature = "test-hooks")]
    if crate::selftest::requested("msg-restart") {
        crate::msg::test_hooks::register_fault_now();
    }
    if core == 0 {
        crate::console::route_input(facts);
    }
    let features = crate::arch::user::init();
    if let Err(error) = crate::mm::window::prepare_kernel_half() {
        log::error!("no frame for the kernel half's tables: {error:?}");
    }
    crate::sched::init();
    crate::proc::init();
    crate::core::role::init();
    crate::core::lifecycle::init();
    crate::core::park::init();
    crate::proc::record_baseline();
    crate::fs::console::init();
    crate::power::init();
    if facts.initramfs.end > facts.initramfs.start {
        let length = (facts.initramfs.end - facts.initramfs.start) as usize;
        // SAFETY: the boot driver mapped the initramfs read-only in this instance's direct
        // map; nothing writes it for the life of the system.
        let bytes =
            unsafe { ::core::slice::from_raw_parts(physical_to_virtual(facts.initramfs.start) as *const u8, length) };
        crate::fs::init(bytes);
    }
    crate::fs::start();
    if core == 0 {
        log::info!(
            "user mode: SMEP {}, SMAP {}, RDRAND {}",
            if features.smep { "on" } else { "absent" },
            if features.smap { "on" } else { "absent" },
            if features.rdrand { "yes" } else { "no (seeded generator)" }
        );
    }
    kcb.processes.baseline_free_frames.fetch_add(kept_frames, Ordering::Relaxed);
    crate::proc::keep::install_kept();
    kcb.running_tsc.store(cpu::read_tsc(), Ordering::Release);
    kcb.set_state(CoreState::Running);
    cpu::enable_interrupts();

    crate::selftest::on_instance_start(core);
    if core == 0 {
        start_requested_cores(region);
        crate::init_process::run()
    }
    idle_loop()
}

// The root's entry 0 while it mapped the low 2 MiB at their identity addresses (private
// .data): kept so that an unpark can map the trampoline again (`restore_identity_map`).
static IDENTITY_ENTRY: ::core::sync::atomic::AtomicU64 = ::core::sync::atomic::AtomicU64::new(0);

/// Drops the identity mapping of the low 2 MiB the trampoline needed (at entry, and again
/// after an unpark woke this instance through the trampoline).
pub fn remove_identity_map() {
    let root = crate::core::shared::this_kcb().page_table_root.load(Ordering::Relaxed);
    let entry = physical_to_virtual(root) as *mut u64;
    // SAFETY: the PML4 is in this instance's partition, covered by the direct map; entry 0
    // maps only the identity low 2 MiB, which no code runs from any more (the trampoline
    // jumped to the kernel half); reloading CR3 drops its translations.
    unsafe {
        let value = entry.read();
        if value != 0 {
            IDENTITY_ENTRY.store(value, Ordering::Relaxed);
        }
        entry.write(0);
        crate::arch::paging::load_root(crate::arch::paging::current_root());
    }
}

/// Maps the low 2 MiB at their identity addresses again in this instance's root, for the
/// trampoline a boot driver will wake a processor with to resume this instance.
pub fn restore_identity_map() {
    let root = crate::core::shared::this_kcb().page_table_root.load(Ordering::Relaxed);
    // SAFETY: as in `remove_identity_map`: the entry it removed, pointing at the tables the
    // boot driver built in this partition (never freed); the user half of process roots is
    // theirs, this is the instance's own root, which no process uses.
    unsafe { (physical_to_virtual(root) as *mut u64).write(IDENTITY_ENTRY.load(Ordering::Relaxed)) };
}

fn start_requested_cores(region: &SharedRegion) {
    let facts = &region.header.facts;
    let wanted = facts.options.cores.unwrap_or(facts.core_count as usize);
    if wanted > facts.core_count as usize {
        log::warn!("cores={wanted} asked, but the machine has {}: starting all", facts.core_count);
    }
    for target in 1..wanted.min(facts.core_count as usize) {
        if let Err(error) = boot_driver::start_core(target) {
            log::error!("core {target} not started: {error}");
        }
    }
    let running = region.listed_kcbs().iter().filter(|k| k.state() == CoreState::Running).count();
    // The boot driver's window took page tables of this instance, kept for later starts: the
    // leak check's baseline comes after them.
    crate::proc::record_baseline();
    region.header.boot_complete.0.store(true, Ordering::Release);
    log::info!(
        "{running} kernel instances up of {} cores ({} ms since boot)",
        facts.core_count,
        crate::time::now_ns() / 1_000_000
    );
}

/// What a core does when it has nothing to do: handle its messages, then sleep the way its
/// notification mode says. It never spins unbounded, so idle vCPUs cost the host little.
fn idle_loop() -> ! {
    loop {
        crate::sched::idle_once();
    }
}
