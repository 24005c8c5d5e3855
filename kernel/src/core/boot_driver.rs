//! The boot driver: any running instance uses it to start any offline core.
//!
//! Starting core T from core H (Barrelfish/DC §4.1): H claims T's KCB (`Offline → Booting`),
//! maps T's partition into its own boot window, writes T's page tables, a private copy of the
//! kernel's `.data`/`.bss` and a boot stack into the front of T's partition, unmaps the window,
//! and sends INIT-SIPI-SIPI to a trampoline below 1 MiB that enters long mode on T's page
//! tables and calls [`crate::instance_entry`] with T's KCB. From then on only T writes its
//! partition. The trampoline page is shared, so starts are serialised by a lock in the shared
//! region; the lock is held until T has left the trampoline.

use super::kcb::{CoreState, Kcb};
use super::shared::{self, SharedRegion};
use crate::arch::apic;
use crate::arch::cpu::{read_tsc, relax};
use crate::arch::paging::{flags, physical_to_virtual, KERNEL_BASE, LARGE_PAGE_SIZE, PAGE_SIZE};
use crate::arch::stacks::KernelStack;
use crate::arch::trampoline::{self, TrampolineParameters, TRAMPOLINE_BASE};
use crate::mm::address_space::{BuildError, Builder, DirectView, PhysicalView};
use crate::mm::image::ImageLayout;
use core::sync::atomic::Ordering;
use platform::memmap::Range;

/// Why a core could not be started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootError {
    /// No such core: the MADT lists fewer.
    NoSuchCore(usize),
    /// The core runs or is being started.
    NotOffline(CoreState),
    /// Its partition cannot hold page tables, data and stack.
    PartitionFull,
    /// The page-table root would be above 4 GiB, out of the 32-bit trampoline's reach.
    RootAbove4GiB,
    /// The core did not report in after INIT and two STARTUP IPIs.
    NoResponse,
    /// The boot window could not be mapped (this instance ran out of frames).
    WindowUnavailable,
}

impl core::fmt::Display for BootError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoSuchCore(id) => write!(f, "no core {id}: see `cores` for the cores this machine has"),
            Self::NotOffline(state) => {
                write!(f, "core is {}: only an offline, unresponsive or faulted core can be started", state.name())
            }
            Self::PartitionFull => write!(f, "partition too small for the kernel instance: give QEMU more memory (-m)"),
            Self::RootAbove4GiB => write!(f, "partition above 4 GiB: the trampoline cannot load its page tables"),
            Self::NoResponse => write!(f, "core did not answer INIT-SIPI-SIPI; it is marked unresponsive"),
            Self::WindowUnavailable => {
                write!(f, "no frames left on this core to map the boot window")
            }
        }
    }
}

impl From<BuildError> for BootError {
    fn from(_: BuildError) -> Self {
        Self::PartitionFull
    }
}

/// Writes the new instance's address space, data copy and stack into its partition through
/// `view`; returns (page-table root, stack top) and records the reserved prefix in its KCB.
fn prepare_instance(view: &dyn PhysicalView, shared: &SharedRegion, kcb: &Kcb) -> Result<(u64, u64), BootError> {
    let facts = &shared.header.facts;
    let partition = kcb.partition();
    let layout = ImageLayout::get();
    let mut builder = Builder::new(view, partition)?;
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
    // Instance 0 owns the legacy devices (the console), so it alone maps the I/O APIC.
    if let (0, Some(io_apic)) = (kcb.core_id.load(Ordering::Relaxed), facts.io_apic) {
        let page = io_apic.address & !(PAGE_SIZE - 1);
        builder.map_page(physical_to_virtual(page), page, device)?;
    }

    // Text and rodata: the one shared physical copy, read-only.
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
    // SAFETY: `private` is a fresh run of `private_size()` zeroed bytes in the target
    // partition (so `.bss` is already zero); the template is shorter than that.
    unsafe { core::ptr::copy_nonoverlapping(template.as_ptr(), view.pointer(private), template.len()) };
    for offset in (0..layout.private_size()).step_by(PAGE_SIZE as usize) {
        builder.map_page(layout.data.0 + offset, private + offset, flags::WRITABLE | flags::NO_EXECUTE)?;
    }
    // Kernel stacks at their fixed addresses; the unmapped pages below each are its guard.
    for stack in KernelStack::ALL {
        let frames = builder.allocate(stack.size())?;
        for offset in (0..stack.size()).step_by(PAGE_SIZE as usize) {
            builder.map_page(stack.bottom() + offset, frames + offset, flags::WRITABLE | flags::NO_EXECUTE)?;
        }
    }
    let stack_top = KernelStack::Main.top();

    kcb.page_table_root.store(builder.root, Ordering::Relaxed);
    kcb.reserved_end.store(builder.next_free(), Ordering::Relaxed);
    Ok((builder.root, stack_top))
}

/// The bootstrap core becomes kernel instance 0: prepare partition 0 through the boot page
/// tables' direct map, then switch to it. Never returns.
pub fn enter_first_instance(shared: &'static SharedRegion) -> ! {
    let kcb = shared.kcb(0);
    let claimed = kcb.claim_for_boot();
    assert!(claimed, "core 0 must be offline at boot");
    let (root, stack_top) = match prepare_instance(&DirectView, shared, kcb) {
        Ok(prepared) => prepared,
        Err(error) => panic!("cannot prepare kernel instance 0: {error}"),
    };
    // SAFETY: `root` maps the kernel image, the new stack and the shared region (which holds
    // the KCB); `instance_entry` never returns.
    unsafe { crate::arch::paging::enter_instance(root, stack_top, crate::instance_entry, kcb as *const Kcb as u64) }
}

/// Where a running instance sees the target partition: its boot window.
struct WindowView {
    partition: Range,
}

impl PhysicalView for WindowView {
    fn pointer(&self, physical: u64) -> *mut u8 {
        debug_assert!(self.partition.start <= physical && physical < self.partition.end);
        (crate::arch::paging::BOOT_WINDOW_BASE + (physical - self.partition.start)) as *mut u8
    }
}

/// Starts logical core `target` from this running instance.
pub fn start_core(target: usize) -> Result<(), BootError> {
    let shared = shared::get();
    let facts = &shared.header.facts;
    if target >= facts.core_count as usize {
        return Err(BootError::NoSuchCore(target));
    }
    let kcb = shared.kcb(target);
    if !kcb.claim_for_boot() {
        return Err(BootError::NotOffline(kcb.state()));
    }
    let me = shared::this_core();
    shared.header.boot_driver_lock.lock(me);
    let result = boot_claimed_core(shared, kcb);
    shared.header.boot_driver_lock.unlock();
    match result {
        Ok(()) => log::debug!("boot driver: core {target} started"),
        Err(error) => {
            let state = if error == BootError::NoResponse { CoreState::Unresponsive } else { CoreState::Offline };
            kcb.set_state(state);
        }
    }
    result
}

fn boot_claimed_core(shared: &SharedRegion, kcb: &Kcb) -> Result<(), BootError> {
    let partition = kcb.partition();
    crate::mm::window::map(partition).map_err(|_| BootError::WindowUnavailable)?;
    let prepared = prepare_instance(&WindowView { partition }, shared, kcb);
    crate::mm::window::unmap(partition);
    let (root, stack_top) = prepared?;

    // The trampoline page is in the low 2 MiB every instance maps; the boot-driver lock
    // makes this core its only writer.
    let code = trampoline::code();
    let base = physical_to_virtual(TRAMPOLINE_BASE) as *mut u8;
    let parameters = TrampolineParameters {
        page_table_root: root,
        stack_top,
        entry: crate::instance_entry as *const () as u64,
        kcb: kcb as *const Kcb as u64,
    };
    // SAFETY: the trampoline page is mapped writable and held under the boot-driver lock; the
    // code fits in one page; the parameters slot is inside the copied code, 8-byte aligned.
    unsafe {
        core::ptr::copy_nonoverlapping(code.as_ptr(), base, code.len());
        base.add(trampoline::parameters_offset()).cast::<TrampolineParameters>().write_volatile(parameters);
    }

    let tsc_hz = shared.header.facts.tsc_hz;
    let microseconds = |us: u64| tsc_hz / 1_000_000 * us;
    let wait_left_trampoline = |timeout: u64| {
        let start = read_tsc();
        while read_tsc() - start < timeout {
            if kcb.state() != CoreState::Booting {
                return true;
            }
            relax();
        }
        false
    };
    let apic_id = kcb.apic_id.load(Ordering::Relaxed);
    let local = apic::local();
    // [SDM vol3 §8.4.4.1]: INIT, 10 ms, STARTUP, 200 µs, STARTUP. QEMU needs no INIT delay
    // but real parts do; the second SIPI is only sent if the first found no taker.
    local.send_init(apic_id);
    spin_for(microseconds(10_000));
    let page = (TRAMPOLINE_BASE >> 12) as u8;
    local.send_startup(apic_id, page);
    if wait_left_trampoline(microseconds(200)) {
        return Ok(());
    }
    local.send_startup(apic_id, page);
    if wait_left_trampoline(microseconds(500_000)) {
        Ok(())
    } else {
        Err(BootError::NoResponse)
    }
}

fn spin_for(cycles: u64) {
    let start = read_tsc();
    while read_tsc() - start < cycles {
        relax();
    }
}
