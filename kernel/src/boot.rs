//! From the PVH entry to running kernel instances: early boot on the bootstrap core, then the
//! entry every instance (core 0 included) runs on its own page tables.
#![deny(unsafe_code)]

use crate::arch::boot::{BootInformation, InstanceEntry, StartInfoError};
use crate::arch::paging::LARGE_PAGE_SIZE;
use crate::arch::{apic, cpu, gdt, idt, legacy};
use crate::core::boot_driver;
use crate::core::kcb::PartitionRange;
use crate::core::kcb::{CoreState, Role};
use crate::core::shared::{self, BootFacts, SharedRegion, SHARED_REGION_SIZE};
use crate::mm::{frames, image};
use ::core::sync::atomic::Ordering;
use platform::memmap::{Range, UsableMemory};
use platform::partition::{Plan, MAX_CORES};

/// Smallest partition Reef accepts: tables, data copy, stacks, heap and room to work.
const MINIMUM_PARTITION: u64 = 16 * 1024 * 1024;

/// The bootstrap core's part of boot (given to the base's PVH entry by `main.rs`): read the
/// machine, partition its memory, write the shared region, and become kernel instance 0.
pub fn bootstrap(information: Result<BootInformation, StartInfoError>) -> ! {
    let boot_tsc = cpu::read_tsc();
    legacy::com1::init();
    legacy::disable_pic(idt::VECTOR_LEGACY_BASE);
    crate::console::init_logging(platform::cmdline::LogLevel::Info);

    let information = information.unwrap_or_else(|error| panic!("{error}"));

    let options = platform::cmdline::parse(information.command_line, |diagnostic| log::warn!("{diagnostic}"));
    crate::console::init_logging(options.log);

    // Memory map.
    let regions = information.memory_map();
    let layout = image::ImageLayout::get();
    let (image_start, image_end) = layout.physical_range();
    let initramfs = information.initramfs;
    // The 2 MiB pages around the initramfs: every instance maps them read-only, so no
    // partition may hold any of their bytes.
    let initramfs_cover =
        Range { start: initramfs.start & !(LARGE_PAGE_SIZE - 1), end: initramfs.end.next_multiple_of(LARGE_PAGE_SIZE) };
    // Low 2 MiB: trampoline, loader data, firmware; the image: shared read-only text.
    let reserved =
        [Range { start: 0, end: LARGE_PAGE_SIZE }, Range { start: image_start, end: image_end }, initramfs_cover];
    let usable = UsableMemory::new(regions, &reserved);

    // Cores, from the MADT.
    let tables = information.acpi_tables();
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
    for io_apic in listed.io_apics.entries() {
        log::info!("found I/O APIC {} at {:#x}: GSIs from {}", io_apic.id, io_apic.address, io_apic.gsi_base);
    }
    if listed.io_apics.nr_ignored > 0 {
        log::warn!("{} I/O APICs of the MADT ignored (listed twice, or past 8)", listed.io_apics.nr_ignored);
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
        io_apics: listed.io_apics,
        com1_route: listed.isa_routes[legacy::com1::ISA_IRQ],
        shared: plan.shared,
        options,
        partitions,
        has_mwait: cpu::has_monitor_mwait(),
        has_x2apic: apic::x2apic_supported(),
        pause_in_spins: !cpu::running_under_tcg(),
        initramfs,
    };
    let region = SharedRegion::initialise(&information, plan.shared, facts);
    for core in 0..count {
        let kcb = region.kcb(core);
        kcb.core_id.store(core as u32, Ordering::Relaxed);
        kcb.apic_id.store(apic_ids[core], Ordering::Relaxed);
        kcb.partition_start.store(partitions[core].start, Ordering::Relaxed);
        kcb.partition_end.store(partitions[core].end, Ordering::Relaxed);
        kcb.role.store(Role::Timesharing as u32, Ordering::Relaxed);
        kcb.parking.clear();
        kcb.version.store(kcb::VERSION, Ordering::Relaxed);
        region.header.osnodes[core].store(apic_ids[core], Ordering::Relaxed);
        kcb.set_state(CoreState::Offline);
    }
    boot_driver::enter_first_instance(information, region)
}

/// Every kernel instance's part of boot (given to the base's instance entry by `main.rs`),
/// on its own page tables and stack, with its KCB.
pub fn instance(entry: InstanceEntry) -> ! {
    let kcb = entry.kcb();
    let region = shared::attach_instance(&entry);
    let core = kcb.core_id.load(Ordering::Relaxed);
    crate::mm::address_space::remove_identity_map();
    gdt::load();
    idt::load(crate::interrupt::dispatch);
    let facts = &region.header.facts;
    cpu::set_pause_in_spins(facts.pause_in_spins);
    crate::console::init_logging(facts.options.log);

    // Own memory: heap first, then the frame allocator over the rest of the partition.
    let partition = kcb.partition();
    crate::mm::init_instance_memory();
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
    kcb.set_image_name(image::image_name());
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
        image::image_name(),
        ::core::str::from_utf8(&build_id[..12]).unwrap_or("?"),
        if kcb.incarnation.load(Ordering::Relaxed) > 1 { ", restarted: taking over its channels" } else { "" },
    );
    // With processes kept for it, the line waits until they ran (`console::defer_info`).
    if crate::proc::keep::adopts_any() {
        crate::console::defer_info(up);
    } else {
        log::info!("{up}");
    }
    register_hooks();
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
    if core == crate::interrupt::DEVICE_OWNER {
        crate::console::route_input(facts);
        // Before the file service starts: it takes the 9P shares found here.
        crate::dev::probe_all();
    }
    let features = crate::arch::user::init();
    if let Err(error) = crate::mm::window::prepare_kernel_half() {
        log::error!("no frame for the kernel half's tables: {error:?}");
    }
    crate::sched::init(crate::proc::ThreadPart::boot());
    crate::proc::init();
    crate::core::ac::init();
    crate::core::role::init();
    crate::core::lifecycle::init();
    crate::core::park::init();
    crate::proc::record_baseline();
    crate::fs::console::init();
    crate::power::init();
    register_with_files();
    if let Some(bytes) = shared::initramfs() {
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

    #[cfg(feature = "test-hooks")]
    crate::selftest::on_instance_start(core);
    if core == 0 {
        start_requested_cores(region);
        crate::init_process::run()
    }
    idle_loop()
}

/// What the file service (below processes, the cores layer and control) needs of them,
/// registered before it starts: the calling process's pid and descriptor changes, the signals
/// of the terminal's keys, starting and stopping a core through `/sys`, and the `/proc/reef`
/// views (the watchdog dump's `ps` table among them).
fn register_with_files() {
    crate::fs::client::register_current_pid(crate::proc::current_pid);
    crate::fs::client::register_current_caller(crate::proc::credentials::current_caller);
    crate::fs::proc::register_descriptors(crate::proc::descriptor_changes);
    crate::fs::service::register_signal_group(|group, signal| {
        let _ = crate::proc::signal::signal_group(group, signal);
    });
    crate::fs::sys::register_core_switch(crate::core::lifecycle::set_online);
    crate::fs::proc::register_views(crate::control::write_reef_view);
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
        crate::core::idle::idle_once();
    }
}

/// Wires the services into the base's hook points, in one place, before the first thread
/// runs or the first interrupt comes. The base (scheduler, trap table, system-call entry,
/// console) names no service: each hook below is where a higher layer registers.
///
/// Order: the system-call entry and the trap table first (an exception or a system call
/// may come as soon as a thread runs; the device vectors before `dev::probe_all` routes their
/// interrupts), then the scheduler (before `sched::init`), then the console's input listener
/// (before its interrupt is routed).
fn register_hooks() {
    crate::arch::user::set_system_call_handler(crate::syscall::dispatch);
    crate::proc::remote::register_system_call_executor(crate::syscall::execute);
    crate::syscall::syspage::register_hooks(crate::syscall::syspage::SyspageHooks {
        execute: crate::syscall::execute_for_syspage,
        forwarded: crate::proc::keep::nudge,
    });
    crate::interrupt::register_hooks(crate::interrupt::TrapHooks {
        on_interrupt: crate::core::park::note_interrupt,
        exception_from_user: crate::core::traps::exception_from_user,
        resolve_user_fault: crate::proc::thread::resolve_user_fault,
        kill_for_fault: crate::proc::kill_for_fault,
        return_to_user: crate::core::traps::return_to_user,
        core_ending: crate::msg::count_lost_in_fault,
        core_ended: crate::core::park::leave_for_good,
    });
    crate::interrupt::register_vector(crate::arch::idt::VECTOR_MESSAGE, message_interrupt);
    for vector in crate::dev::vectors() {
        crate::interrupt::register_vector(vector, crate::dev::on_interrupt);
    }
    #[cfg(feature = "bench")]
    crate::interrupt::register_vector(crate::arch::idt::VECTOR_BENCH, bench_interrupt);
    crate::sched::register_hooks(crate::sched::Hooks {
        wakeup_before_block: crate::proc::thread::wakeup_before_block,
        serve: crate::core::idle::serve,
        idle: crate::core::idle::idle_while_waiting,
        after_slice: crate::core::park::while_waiting,
        thread_start: crate::proc::thread::on_thread_start,
        threads_freed: crate::proc::publish_counts,
    });
    crate::console::set_input_listener(crate::fs::service::note_console_input);
    crate::fs::mapped::init();
}

/// The message IPI: the channels have news for this core; its threads look on their way
/// back to ring 3.
fn message_interrupt(_frame: &mut crate::arch::idt::InterruptFrame) {
    crate::msg::on_notification();
    crate::sched::on_message_notification();
    crate::arch::apic::local().end_of_interrupt();
}

/// The benchmark IPI (`msg bench`): acknowledged first, as the benchmark times the handler.
#[cfg(feature = "bench")]
fn bench_interrupt(_frame: &mut crate::arch::idt::InterruptFrame) {
    crate::arch::apic::local().end_of_interrupt();
    crate::msg::bench::on_bench_interrupt();
}
