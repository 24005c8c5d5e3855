//! The shared region: the only memory two kernel instances both write.
//!
//! Layout (fixed, the same virtual address in every instance through the direct map):
//! one page of [`SharedHeader`] (boot facts written once by the bootstrap core before any other
//! core starts, then the console and boot-driver locks), then one [`Kcb`] page per core, then
//! the channel area. Everything another core may write is an atomic.

pub mod message_area;

use super::kcb::Kcb;
use crate::arch::paging::physical_to_virtual;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use platform::cmdline::Options;
use platform::memmap::Range;
use platform::partition::MAX_CORES;

/// "REEFSHRD": marks an initialised shared region.
pub const SHARED_MAGIC: u64 = 0x4452_4853_4645_4552;

/// Bytes reserved for the shared region.
pub const SHARED_REGION_SIZE: u64 = 16 * 1024 * 1024;

/// Facts the bootstrap core learnt, fixed before the first AP starts and never written again.
#[repr(C)]
pub struct BootFacts {
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// LAPIC timer ticks per second (divide by 1).
    pub apic_timer_hz: u64,
    /// TSC at boot: time zero of uptimes.
    pub boot_tsc: u64,
    /// Cores the MADT lists.
    pub core_count: u32,
    /// Physical address of the local APIC registers.
    pub local_apic_physical: u64,
    /// The I/O APIC that ISA IRQs reach, if the MADT lists one (only instance 0 maps it: it
    /// owns the legacy devices).
    pub io_apic: Option<platform::madt::IoApic>,
    /// Where COM1's IRQ 4 arrives.
    pub com1_route: platform::madt::IsaRoute,
    /// The shared region.
    pub shared: Range,
    /// The parsed kernel command line.
    pub options: Options,
    /// Partition of every listed core.
    pub partitions: [Range; MAX_CORES],
    /// Whether MONITOR/MWAIT is offered.
    pub has_mwait: bool,
    /// Whether x2APIC is offered.
    pub has_x2apic: bool,
    /// Where QEMU loaded the initramfs (`-initrd`, PVH module 0); empty if none. Every
    /// instance maps it read-only.
    pub initramfs: Range,
    /// Whether spin loops execute PAUSE (not under QEMU's TCG, where PAUSE leaves the
    /// translated code for the emulator's main loop and costs microseconds).
    pub pause_in_spins: bool,
}

/// How many file images the store holds.
pub const IMAGE_SLOTS: usize = 8;
/// The image store: the second half of the shared region.
pub const IMAGE_STORE_OFFSET: u64 = SHARED_REGION_SIZE / 2;

/// One image in the store: its checksum (0: free) and where its text starts.
#[repr(C)]
pub struct ImageSlot {
    pub checksum: AtomicU64,
    pub physical: AtomicU64,
    pub span: AtomicU64,
}

/// A value alone on its cache line, so cores spinning on it disturb nothing else.
#[repr(C, align(64))]
pub struct CacheLine<T>(pub T);

/// A spin lock in the shared region; the value is the owning core id + 1 (0 = free), so a
/// faulting core can tell whether it holds the lock, and a waiter can tell who does.
#[repr(C, align(64))]
pub struct SharedLock(AtomicU32);

impl SharedLock {
    /// Spins until free, then takes it for `core_id`. A holder that died (faulted, offline,
    /// unresponsive) without releasing it, for instance a core that faulted inside the locked
    /// section so badly that its fault path never ran, is relieved of it: the waiter takes it
    /// over with a compare-exchange and logs it. A faulting core's own fault path releases what
    /// it holds first ([`Self::release_if_held_by`]), so this is the second line of defence.
    pub fn lock(&self, core_id: u32) {
        loop {
            let holder = match self.0.compare_exchange_weak(0, core_id + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return,
                Err(0) => continue,
                Err(holder) => holder,
            };
            if holder_is_dead(holder - 1)
                && self.0.compare_exchange(holder, core_id + 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                // No logging here: the console lock itself goes through this path.
                if let Some(region) = region() {
                    region.header.locks_recovered.0.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            core::hint::spin_loop();
        }
    }

    /// Takes it for `core_id` if it is free, or held by a core that died; else returns the
    /// holder's core id, without waiting.
    // Only `msg bench` takes a lock without waiting.
    #[cfg_attr(not(feature = "bench"), allow(dead_code))]
    pub fn try_lock(&self, core_id: u32) -> Result<(), u32> {
        match self.0.compare_exchange(0, core_id + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Ok(()),
            Err(holder)
                if holder_is_dead(holder - 1)
                    && self.0.compare_exchange(holder, core_id + 1, Ordering::Acquire, Ordering::Relaxed).is_ok() =>
            {
                if let Some(region) = region() {
                    region.header.locks_recovered.0.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            Err(holder) => Err(holder - 1),
        }
    }

    /// Releases it.
    pub fn unlock(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// Whether `core_id` holds it.
    pub fn is_held_by(&self, core_id: u32) -> bool {
        self.0.load(Ordering::Relaxed) == core_id + 1
    }

    /// Releases it only if `core_id` holds it (a faulting core drops what it held).
    pub fn release_if_held_by(&self, core_id: u32) {
        let _ = self.0.compare_exchange(core_id + 1, 0, Ordering::Release, Ordering::Relaxed);
    }
}

/// The first page of the shared region.
#[repr(C, align(4096))]
pub struct SharedHeader {
    pub magic: u64,
    pub facts: BootFacts,
    /// Serialises whole lines on COM1.
    pub console_lock: SharedLock,
    /// Serialises use of the one trampoline page below 1 MiB.
    pub boot_driver_lock: SharedLock,
    /// Serialises role changes, so two at once cannot both take the last timesharing core.
    pub role_lock: SharedLock,
    /// Set by core 0 once every requested core was started.
    pub boot_complete: CacheLine<AtomicBool>,
    /// Locks taken over from a holder that died without releasing them.
    pub locks_recovered: CacheLine<AtomicU32>,
    /// Kernel images loaded from files: one read-only copy of each image's text and rodata in
    /// the image store, shared by every core that runs it (written under the boot-driver lock).
    pub image_slots: [ImageSlot; IMAGE_SLOTS],
    /// The OSnode indirection table: OSnode id (the KCB's index) -> APIC id of the core that
    /// runs it now. Every IPI and ICC goes through it, so messages follow an OSnode that
    /// moves to another core (Barrelfish/DC §4.2).
    pub osnodes: [AtomicU32; MAX_CORES],
    /// The world-switch code (`arch::world_switch`), one page every instance maps read-only
    /// and executable at the same address, whatever image it runs: written once at boot.
    pub switch_code: SwitchCodePage,
}

/// A page of code in the shared region.
#[repr(C, align(4096))]
pub struct SwitchCodePage(pub [u8; 4096]);

/// Whether `core`'s KCB says it is faulted, offline, stopped or unresponsive: it will not release
/// anything it holds. (A booting core may hold locks: it logs before it runs.)
fn holder_is_dead(core: u32) -> bool {
    use super::kcb::CoreState;
    let Some(region) = region() else { return false };
    let Some(kcb) = region.kcbs.get(core as usize) else { return true };
    matches!(kcb.state(), CoreState::Faulted | CoreState::Offline | CoreState::Unresponsive | CoreState::Stopped)
}

/// The shared region as a typed structure.
#[repr(C)]
pub struct SharedRegion {
    pub header: SharedHeader,
    pub kcbs: [Kcb; MAX_CORES],
    /// Receive queues, URPC rings, multicast groups (see `msg`).
    pub messages: message_area::MessageArea,
}

const _: () = assert!(core::mem::size_of::<SharedHeader>() <= 4096 * 4);
const _: () =
    assert!(core::mem::size_of::<Kcb>() == 4096 * 3, "a KCB is three pages; say so in kcb::VERSION when it grows");
const _: () = assert!((core::mem::size_of::<SharedRegion>() as u64) < SHARED_REGION_SIZE / 2);

impl SharedRegion {
    /// Zeroes the region at `range` and writes the boot facts: bootstrap core only, before
    /// any other core runs.
    ///
    /// # Safety
    /// `range` must be the shared region of the plan, mapped writable by the direct map, and no
    /// other core may run yet.
    pub unsafe fn initialise(range: Range, facts: BootFacts) -> &'static Self {
        let pointer = physical_to_virtual(range.start) as *mut SharedRegion;
        // SAFETY: guaranteed by the caller: the memory is ours alone for now, and all-zero is
        // a valid SharedRegion (atomics and integers).
        unsafe {
            core::ptr::write_bytes(pointer.cast::<u8>(), 0, core::mem::size_of::<SharedRegion>());
            core::ptr::addr_of_mut!((*pointer).header.facts).write(facts);
            core::ptr::addr_of_mut!((*pointer).header.magic).write(SHARED_MAGIC);
            let code = crate::arch::world_switch::code();
            assert!(code.len() <= 4096, "the world-switch code fits its page");
            core::ptr::copy_nonoverlapping(
                code.as_ptr(),
                core::ptr::addr_of_mut!((*pointer).header.switch_code).cast::<u8>(),
                code.len(),
            );
            &*pointer
        }
    }

    /// Physical address of the world-switch code page.
    pub fn switch_code_physical(&self) -> u64 {
        self.header.facts.shared.start + core::mem::offset_of!(SharedHeader, switch_code) as u64
    }

    /// The KCB of logical core `core_id`.
    pub fn kcb(&self, core_id: usize) -> &Kcb {
        &self.kcbs[core_id]
    }

    /// KCBs of the cores the MADT lists.
    pub fn listed_kcbs(&self) -> &[Kcb] {
        &self.kcbs[..self.header.facts.core_count as usize]
    }
}

// Which shared region this instance uses (private .bss), set once at instance entry.
static SHARED: spin::Once<&'static SharedRegion> = spin::Once::new();
// This instance's logical core id.
static THIS_CORE: spin::Once<u32> = spin::Once::new();

/// Records the shared region and this core's id (instance entry, or the bootstrap core).
pub fn attach(shared: &'static SharedRegion, core_id: u32) {
    SHARED.call_once(|| shared);
    THIS_CORE.call_once(|| core_id);
}

/// The shared region, once attached.
pub fn region() -> Option<&'static SharedRegion> {
    SHARED.get().copied()
}

/// The shared region; panics before attachment (a bug: nothing runs before it but early boot).
pub fn get() -> &'static SharedRegion {
    region().expect("shared region used before attach")
}

/// The boot facts.
pub fn facts() -> &'static BootFacts {
    &get().header.facts
}

/// This instance's logical core id (0 during early boot).
pub fn this_core() -> u32 {
    THIS_CORE.get().copied().unwrap_or(0)
}

/// The APIC id of the core running OSnode `osnode` now.
pub fn apic_of(osnode: usize) -> u32 {
    get().header.osnodes[osnode].load(Ordering::Acquire)
}

/// This instance's KCB.
pub fn this_kcb() -> &'static Kcb {
    get().kcb(this_core() as usize)
}
