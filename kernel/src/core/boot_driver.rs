//! The boot driver: any running instance uses it to start any offline core.
//!
//! Starting core T from core H (Barrelfish/DC §4.1): H claims T's KCB (`Offline → Booting`),
//! maps T's partition into its own boot window, writes T's page tables, a private copy of the
//! kernel's `.data`/`.bss` and a boot stack into the front of T's partition, unmaps the window,
//! and sends INIT-SIPI-SIPI to a trampoline below 1 MiB that enters long mode on T's page
//! tables and calls the base's instance entry with T's KCB. From then on only T writes its
//! partition. The trampoline page is shared, so starts are serialised by a lock in the shared
//! region; the lock is held until T has left the trampoline.
#![deny(unsafe_code)]

use super::kcb::{CoreState, Kcb};
use super::kernel_image::KernelImage;
use super::shared::{self, SharedRegion};
use crate::arch::apic;
use crate::arch::boot::BootInformation;
use crate::arch::cpu::{read_tsc, relax};
use crate::arch::paging::{flags, physical_to_virtual, KERNEL_BASE, LARGE_PAGE_SIZE, PAGE_SIZE};
use crate::arch::stacks::KernelStack;
use crate::arch::trampoline::{TrampolineParameters, TRAMPOLINE_BASE};
use crate::arch::world_switch;
use crate::core::kcb::PartitionRange;
use crate::mm::address_space::{BuildError, Builder, DirectView, PhysicalView};
use crate::mm::image::ImageLayout;
use crate::time::SpinDeadline;
use core::sync::atomic::Ordering;
use platform::memmap::Range;

/// Why a core could not be started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootError {
    /// No such core: the MADT lists fewer.
    NoSuchCore(usize),
    /// The core runs or is being started.
    NotOffline(CoreState),
    /// Its partition, or its half of the instance reserve, cannot hold page tables, data and
    /// stacks.
    PartitionFull,
    /// The page-table root would be above 4 GiB, out of the 32-bit trampoline's reach.
    RootAbove4GiB,
    /// The core did not report in after INIT and two STARTUP IPIs.
    NoResponse,
    /// The boot window could not be mapped (this instance ran out of frames).
    WindowUnavailable,
    /// The new kernel found a KCB of another layout version and halted.
    RefusedKcb,
    /// The shared image store has no room for another image's text.
    ImageStoreFull,
    /// The core's processor runs another OSnode (one unparked onto it).
    ProcessorTaken(usize),
}

impl core::fmt::Display for BootError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoSuchCore(id) => write!(f, "no core {id}: see `cores` for the cores this machine has"),
            Self::NotOffline(state) => {
                write!(
                    f,
                    "core is {}: only a stopped, offline, unresponsive or faulted core can be started",
                    state.name()
                )
            }
            Self::PartitionFull => write!(
                f,
                "the kernel instance does not fit: its partition is too small (give QEMU more memory, -m), or the \
                 image needs more than its half of the instance reserve (kcb::block::INSTANCE_RESERVE)"
            ),
            Self::RootAbove4GiB => write!(f, "partition above 4 GiB: the trampoline cannot load its page tables"),
            Self::NoResponse => write!(f, "core did not answer INIT-SIPI-SIPI; it is marked unresponsive"),
            Self::WindowUnavailable => {
                write!(f, "no frames left on this core to map the boot window")
            }
            Self::RefusedKcb => {
                write!(f, "the new kernel stopped before it ran (it refused the KCB, or faulted: see its report)")
            }
            Self::ImageStoreFull => {
                write!(f, "the shared image store is full: restart cores with images already loaded")
            }
            Self::ProcessorTaken(osnode) => {
                write!(f, "its processor runs core {osnode} now (unparked there): stop or park that first")
            }
        }
    }
}

impl From<BuildError> for BootError {
    fn from(_: BuildError) -> Self {
        Self::PartitionFull
    }
}

/// A new kernel instance laid out in its partition, not started yet.
#[derive(Clone, Copy, Debug)]
pub struct Prepared {
    root: u64,
    stack_top: u64,
    reserved_end: u64,
    /// The incarnation it was laid out for (which half of the reserve it took).
    incarnation: u64,
    /// TSC cycles the preparation took.
    cycles: u64,
}

/// The half of an OSnode's instance reserve (`kcb::block::INSTANCE_RESERVE`) that the kernel
/// of `incarnation` lays its page tables, private data and stacks out in. Successive kernels
/// alternate, so a restart prepares the next kernel in the half the running one does not use,
/// before it stops that one.
fn reserve_for(partition: Range, incarnation: u64) -> Range {
    let half = ::kcb::block::INSTANCE_RESERVE / 2;
    let start = partition.start + (incarnation & 1) * half;
    Range { start, end: (start + half).min(partition.end) }
}

/// Writes the address space, data copy and stack of `kcb`'s kernel of `incarnation` into its
/// partition through `view`. The KCB is not written ([`record`] does, once the core is
/// claimed).
fn prepare_instance(
    view: &dyn PhysicalView,
    shared: &SharedRegion,
    kcb: &Kcb,
    image: Option<&KernelImage>,
    incarnation: u64,
) -> Result<Prepared, BootError> {
    let begun = read_tsc();
    let facts = &shared.header.facts;
    let partition = kcb.partition();
    let mut builder = Builder::new(view, reserve_for(partition, incarnation))?;
    if builder.root >= 1 << 32 {
        return Err(BootError::RootAbove4GiB);
    }

    // The trampoline runs at its identity address until it jumps to the kernel; the instance
    // removes this mapping on entry.
    builder.map_large_page(0, 0, flags::WRITABLE)?;
    // Direct map: the low 2 MiB (trampoline, firmware tables), the shared region, the own
    // partition, and the local APIC page (uncached). Nothing of another partition.
    builder.map_direct(Range { start: 0, end: LARGE_PAGE_SIZE })?;
    builder.map_direct(facts.shared)?;
    builder.map_direct(partition)?;
    // The initramfs QEMU loaded: one copy, read-only for every instance.
    let initramfs = facts.initramfs;
    if initramfs.end > initramfs.start {
        let mut page = initramfs.start & !(LARGE_PAGE_SIZE - 1);
        while page < initramfs.end {
            builder.map_large_page(physical_to_virtual(page), page, flags::NO_EXECUTE)?;
            page += LARGE_PAGE_SIZE;
        }
    }
    let device = flags::WRITABLE | flags::NO_EXECUTE | flags::CACHE_DISABLE | flags::WRITE_THROUGH;
    let apic_page = facts.local_apic_physical & !(PAGE_SIZE - 1);
    builder.map_page(physical_to_virtual(apic_page), apic_page, device)?;
    // The device owner (instance 0: the console, the virtio-mmio transports) alone maps the
    // I/O APICs and the transports' window (docs/devices.md).
    if kcb.core_id.load(Ordering::Relaxed) == crate::interrupt::DEVICE_OWNER {
        for io_apic in facts.io_apics.entries() {
            let page = io_apic.address & !(PAGE_SIZE - 1);
            builder.map_page(physical_to_virtual(page), page, device)?;
        }
        let window = platform::virtio::Transports::of_microvm(&facts.io_apics).window();
        for page in (window.start..window.end).step_by(PAGE_SIZE as usize) {
            builder.map_page(physical_to_virtual(page), page, device)?;
        }
    }

    // The world-switch code, at one address in every instance (`arch::world_switch`).
    builder.map_page(world_switch::SWITCH_CODE_BASE, shared.switch_code_physical(), 0)?;

    match image {
        None => map_booted_image(&mut builder)?,
        Some(image) => {
            let text_physical = text_copy(shared, image)?;
            load_image(&mut builder, image, text_physical)?
        }
    }
    // Kernel stacks at their fixed addresses; the unmapped pages below each are its guard.
    for stack in KernelStack::ALL {
        let frames = builder.allocate(stack.size())?;
        for offset in (0..stack.size()).step_by(PAGE_SIZE as usize) {
            builder.map_page(stack.bottom() + offset, frames + offset, flags::WRITABLE | flags::NO_EXECUTE)?;
        }
    }
    let stack_top = KernelStack::Main.top();

    // The builder stays inside its half of the reserve, so every image's heap and frames
    // start at the same place and frames a restart keeps are never under the next kernel's.
    Ok(Prepared {
        root: builder.root,
        stack_top,
        reserved_end: builder.next_free(),
        incarnation,
        cycles: read_tsc() - begun,
    })
}

/// Writes what the kernel `prepared` needs of its KCB, once the core is claimed for it.
fn record(kcb: &Kcb, prepared: &Prepared, image: Option<&KernelImage>) {
    kcb.page_table_root.store(prepared.root, Ordering::Relaxed);
    kcb.reserved_end.store(prepared.reserved_end, Ordering::Relaxed);
    kcb.image_from_file.store(u32::from(image.is_some()), Ordering::Relaxed);
}

/// The image QEMU booted, which this instance runs too: its one physical copy of text and
/// rodata, shared read-only, and a private copy of `.data`/`.bss` from the pristine template.
fn map_booted_image(builder: &mut Builder<'_>) -> Result<(), BootError> {
    let layout = ImageLayout::get();
    for (start, end, extra) in
        [(layout.text.0, layout.text.1, 0), (layout.rodata.0, layout.rodata.1, flags::NO_EXECUTE)]
    {
        for page in (start..end).step_by(PAGE_SIZE as usize) {
            builder.map_page(page, page - KERNEL_BASE, extra | flags::GLOBAL)?;
        }
    }
    // The pristine template stays readable, so this instance can run a boot driver too.
    for page in (layout.pristine.0..layout.pristine.1).step_by(PAGE_SIZE as usize) {
        builder.map_page(page, page - KERNEL_BASE, flags::NO_EXECUTE)?;
    }
    // .data/.bss: a private copy in the partition, initialised from the template.
    let private = builder.allocate(layout.private_size())?;
    let template = layout.pristine_data();
    // `private` is a fresh run of zeroed bytes, so `.bss` is already zero.
    builder.write_bytes(private, template)?;
    for offset in (0..layout.private_size()).step_by(PAGE_SIZE as usize) {
        builder.map_page(layout.data.0 + offset, private + offset, flags::WRITABLE | flags::NO_EXECUTE)?;
    }
    Ok(())
}

/// An image from a file: text and rodata from the one read-only copy every core running the
/// image maps (`text_physical`: where its first byte is), `.data`/`.bss` and the pristine
/// template private in the target's partition.
fn load_image(builder: &mut Builder<'_>, image: &KernelImage, text_physical: u64) -> Result<(), BootError> {
    let note = &image.note;
    let shared_parts = [(note.image_start, note.text_end, 0), (note.text_end, note.shared_end, flags::NO_EXECUTE)];
    for (start, end, rights) in shared_parts {
        for page in (start..end).step_by(PAGE_SIZE as usize) {
            builder.map_page(page, text_physical + (page - note.image_start), rights | flags::GLOBAL)?;
        }
    }
    // `.data`/`.bss` then the pristine template: a fresh zeroed run (so `.bss` is zero), the
    // file's `.data` bytes copied into both.
    let private = builder.allocate(note.image_end - note.data_start)?;
    let at = |address: u64| private + (address - note.data_start);
    for segment in image.segments.iter().filter(|segment| segment.address >= note.data_start && segment.file_size > 0) {
        let bytes = image.segment_bytes(segment);
        let end = segment.address + bytes.len() as u64;
        if end > note.bss_start {
            return Err(BootError::PartitionFull);
        }
        for target in [segment.address, note.pristine_start + (segment.address - note.data_start)] {
            builder.write_bytes(at(target), bytes)?;
        }
    }
    let private_parts = [
        (note.data_start, note.data_end, flags::WRITABLE | flags::NO_EXECUTE),
        (note.pristine_start, note.image_end, flags::NO_EXECUTE),
    ];
    for (start, end, rights) in private_parts {
        for page in (start..end).step_by(PAGE_SIZE as usize) {
            builder.map_page(page, at(page), rights)?;
        }
    }
    Ok(())
}

/// Where the text of `image` is: the booted image's own copy when the file is that image
/// (same checksum), else its slot in the shared image store, filled now if it is not there.
/// Under the boot-driver lock, so two drivers never fill one slot.
fn text_copy(shared: &SharedRegion, image: &KernelImage) -> Result<u64, BootError> {
    let note = &image.note;
    if note.checksum == super::kernel_image::booted_checksum() {
        return Ok(note.image_start - KERNEL_BASE);
    }
    let span = (note.shared_end - note.image_start).next_multiple_of(PAGE_SIZE);
    let mut parts = alloc::vec::Vec::new();
    for segment in image.segments.iter().filter(|segment| segment.address < note.shared_end) {
        let bytes = image.segment_bytes(segment);
        if segment.address + bytes.len() as u64 > note.shared_end {
            return Err(BootError::ImageStoreFull);
        }
        parts.push((segment.address - note.image_start, bytes));
    }
    shared.store_image_text(note.checksum, span, &parts).ok_or(BootError::ImageStoreFull)
}

/// The bootstrap core becomes kernel instance 0: prepare partition 0 through the boot page
/// tables' direct map, then switch to it. Never returns.
pub fn enter_first_instance(information: BootInformation, shared: &'static SharedRegion) -> ! {
    let kcb = shared.kcb(0);
    let claimed = kcb.claim_for_boot();
    assert!(claimed.is_some(), "core 0 must be offline at boot");
    let incarnation = kcb.incarnation.load(Ordering::Relaxed);
    let prepared = match prepare_instance(&DirectView, shared, kcb, None, incarnation) {
        Ok(prepared) => prepared,
        Err(error) => panic!("cannot prepare kernel instance 0: {error}"),
    };
    record(kcb, &prepared, None);
    crate::arch::boot::enter_first_instance(information, prepared.root, prepared.stack_top, kcb)
}

/// Starts logical core `target` from this running instance with the image QEMU booted.
pub fn start_core(target: usize) -> Result<(), BootError> {
    start_core_with(target, None).map(drop)
}

/// What a start took, in TSC cycles: the boot driver's part (claim to the last STARTUP IPI:
/// partition, image copy, page tables, INIT-SIPI) and the target's (STARTUP IPI to running).
#[derive(Clone, Copy, Debug, Default)]
pub struct StartCycles {
    pub driver: u64,
    pub target: u64,
}

/// Starts logical core `target` from this running instance with `image` (`None`: the image
/// this instance runs, when it is the booted one).
pub fn start_core_with(target: usize, image: Option<&KernelImage>) -> Result<StartCycles, BootError> {
    start(target, image, None)
}

/// For a restart: lays core `target`'s next kernel out in its partition while the running one
/// goes on (in the half of the reserve that one does not use), so that only the wake-up is
/// left for after the stop ([`start_prepared`]). The caller keeps other boot drivers off the
/// core meanwhile (`restart_pending`).
pub fn prepare_next(target: usize, image: Option<&KernelImage>) -> Result<Prepared, BootError> {
    let shared = shared::get();
    if target >= shared.header.facts.core_count as usize {
        return Err(BootError::NoSuchCore(target));
    }
    let kcb = shared.kcb(target);
    let incarnation = kcb.incarnation.load(Ordering::Relaxed) + 1;
    shared.header.boot_driver_lock.lock(shared::this_core());
    let prepared = prepare_in_window(shared, kcb, image, incarnation);
    shared.header.boot_driver_lock.unlock();
    prepared
}

/// Starts stopped core `target` with the kernel [`prepare_next`] laid out; the preparation
/// counts in the boot driver's part.
pub fn start_prepared(
    target: usize,
    image: Option<&KernelImage>,
    prepared: Prepared,
) -> Result<StartCycles, BootError> {
    start(target, image, Some(prepared))
}

fn prepare_in_window(
    shared: &SharedRegion,
    kcb: &Kcb,
    image: Option<&KernelImage>,
    incarnation: u64,
) -> Result<Prepared, BootError> {
    let partition = kcb.partition();
    let window = crate::mm::window::Window::open(partition).map_err(|_| BootError::WindowUnavailable)?;
    prepare_instance(&window, shared, kcb, image, incarnation)
}

fn start(target: usize, image: Option<&KernelImage>, prepared: Option<Prepared>) -> Result<StartCycles, BootError> {
    let begun = read_tsc();
    let shared = shared::get();
    let facts = &shared.header.facts;
    if target >= facts.core_count as usize {
        return Err(BootError::NoSuchCore(target));
    }
    let kcb = shared.kcb(target);
    if let Some(osnode) = osnode_on(kcb.apic_id.load(Ordering::Relaxed), target) {
        return Err(BootError::ProcessorTaken(osnode));
    }
    let Some(before) = kcb.claim_for_boot() else {
        return Err(BootError::NotOffline(kcb.state()));
    };
    let me = shared::this_core();
    shared.header.boot_driver_lock.lock(me);
    let incarnation = kcb.incarnation.load(Ordering::Relaxed);
    // A preparation for another incarnation (another start came between) is laid out in the
    // half the kernel of this one may not use: lay it out again.
    let early = prepared.filter(|p| p.incarnation == incarnation);
    let prepared = match early {
        Some(prepared) => Ok(prepared),
        None => prepare_in_window(shared, kcb, image, incarnation),
    };
    let result = prepared.and_then(|prepared| {
        record(kcb, &prepared, image);
        wake_instance(shared, kcb, image, &prepared).map(|()| prepared.cycles)
    });
    shared.header.boot_driver_lock.unlock();
    let prepared_cycles = match result {
        Ok(cycles) => {
            log::debug!("boot driver: core {target} started");
            cycles
        }
        Err(error) => {
            // A core that never ran the new kernel is as it was; one that took INIT and did
            // not answer is unresponsive.
            let state = if error == BootError::NoResponse { CoreState::Unresponsive } else { before };
            kcb.set_state(state);
            return Err(error);
        }
    };
    if kcb.state() == CoreState::Faulted {
        // The new kernel refused its KCB (another layout version) before it could run.
        return Err(BootError::RefusedKcb);
    }
    let startup = kcb.startup_tsc.load(Ordering::Relaxed);
    let running = kcb.running_tsc.load(Ordering::Acquire);
    // A preparation made before the claim adds its own time to the driver's part.
    let earlier = if early.is_some() { prepared_cycles } else { 0 };
    Ok(StartCycles { driver: startup.saturating_sub(begun) + earlier, target: running.saturating_sub(startup) })
}

fn wake_instance(
    shared: &SharedRegion,
    kcb: &Kcb,
    image: Option<&KernelImage>,
    prepared: &Prepared,
) -> Result<(), BootError> {
    let entry = image.map_or(crate::arch::boot::instance_entry_address(), |image| image.note.instance_entry);
    let parameters = TrampolineParameters {
        page_table_root: prepared.root,
        stack_top: prepared.stack_top,
        entry,
        kcb: kcb as *const Kcb as u64,
    };
    let apic_id = kcb.apic_id.load(Ordering::Relaxed);
    wake_processor(shared, apic_id, parameters, &kcb.startup_tsc, || kcb.state() != CoreState::Booting)
}

/// Writes the trampoline with `parameters` and sends INIT-SIPI(-SIPI) to `apic_id`; done when
/// `left` says the woken kernel has left the trampoline. Under the boot-driver lock.
fn wake_processor(
    shared: &SharedRegion,
    apic_id: u32,
    parameters: TrampolineParameters,
    startup_tsc: &core::sync::atomic::AtomicU64,
    left: impl Fn() -> bool,
) -> Result<(), BootError> {
    shared.write_trampoline(parameters);

    let tsc_hz = shared.header.facts.tsc_hz;
    let microseconds = |us: u64| tsc_hz / 1_000_000 * us;
    let wait_left_trampoline = |timeout: u64| {
        let deadline = SpinDeadline::after_cycles(timeout);
        while !deadline.passed() {
            if left() {
                return true;
            }
            relax();
        }
        false
    };
    let local = apic::local();
    // [SDM vol3 §8.4.4.1]: INIT, 10 ms, STARTUP, 200 µs, STARTUP. Modern processors need no
    // INIT delay (`cpu::needs_init_delay`); the second SIPI is only sent if the first found no
    // taker.
    local.send_init(apic_id);
    if crate::arch::cpu::needs_init_delay() {
        spin_for(microseconds(10_000));
    }
    let page = (TRAMPOLINE_BASE >> 12) as u8;
    startup_tsc.store(read_tsc(), Ordering::Relaxed);
    local.send_startup(apic_id, page);
    if wait_left_trampoline(microseconds(200)) {
        return Ok(());
    }
    startup_tsc.store(read_tsc(), Ordering::Relaxed);
    local.send_startup(apic_id, page);
    if wait_left_trampoline(microseconds(500_000)) {
        Ok(())
    } else {
        Err(BootError::NoResponse)
    }
}

/// The live OSnode other than `except` whose kernel runs on the processor `apic_id` now (one
/// unparked onto another core's processor), if any.
pub fn osnode_on(apic_id: u32, except: usize) -> Option<usize> {
    let region = shared::get();
    region.listed_kcbs().iter().enumerate().position(|(id, kcb)| {
        id != except
            && matches!(kcb.state(), CoreState::Running | CoreState::Booting)
            && region.header.osnodes[id].load(Ordering::Acquire) == apic_id
    })
}

/// Wakes core `destination`'s processor with the saved context of `guest`, a parked OSnode
/// that left its host (`Resuming`, claimed by the caller): the trampoline enters long mode on
/// the guest's page tables (which map the trampoline again for this) and jumps into the
/// world-switch code, which resumes the context. Returns the TSC of the STARTUP IPI that took.
pub fn resume_on(destination: usize, guest: &Kcb) -> Result<u64, BootError> {
    let shared = shared::get();
    let parameters = TrampolineParameters {
        page_table_root: guest.page_table_root.load(Ordering::Relaxed),
        stack_top: guest.parking.context.stack_pointer.load(Ordering::Acquire),
        entry: world_switch::resume_entry(),
        kcb: &guest.parking.context as *const kcb::block::SwitchContext as u64,
    };
    let apic_id = shared.kcb(destination).apic_id.load(Ordering::Relaxed);
    let startup = core::sync::atomic::AtomicU64::new(0);
    shared.header.boot_driver_lock.lock(shared::this_core());
    let result = wake_processor(shared, apic_id, parameters, &startup, || {
        guest.parking.guest() != kcb::block::GuestState::Resuming
    });
    shared.header.boot_driver_lock.unlock();
    result.map(|()| startup.load(Ordering::Relaxed))
}

fn spin_for(cycles: u64) {
    let deadline = SpinDeadline::after_cycles(cycles);
    while !deadline.passed() {
        relax();
    }
}
