//! The shared region: the only memory two kernel instances both write.
//!
//! Layout (fixed, the same virtual address in every instance through the direct map):
//! one page of [`SharedHeader`] (boot facts written once by the bootstrap core before any other
//! core starts, then the console and boot-driver locks), then one [`Kcb`] page per core, then
//! the channel area. Everything another core may write is an atomic.

pub mod message_area;

use super::kcb::Kcb;
use crate::arch::boot::{BootInformation, InstanceEntry};
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
    /// Every I/O APIC the MADT lists (only instance 0 maps them: it owns the devices).
    pub io_apics: platform::madt::IoApics,
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
    #[cfg_attr(not(feature = "bench"), allow(dead_code, reason = "only msg bench takes a lock without waiting"))]
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
    /// Zeroes the region at `range`, writes the boot facts and the world-switch code, and
    /// names the region in every KCB: bootstrap core only, before any other core runs (which
    /// `boot` proves by the [`BootInformation`] only the bootstrap entry makes). Panics when
    /// called twice, or when `range` is not usable RAM of the loader's memory map below 4 GiB
    /// (the boot tables' direct map) big enough for the region.
    pub fn initialise(boot: &BootInformation, range: Range, facts: BootFacts) -> &'static Self {
        static INITIALISED: AtomicBool = AtomicBool::new(false);
        assert!(!INITIALISED.swap(true, Ordering::AcqRel), "the shared region is written once");
        assert!(region().is_none(), "the shared region is written before any instance attaches to it");
        // Covered by usable regions of the map (adjacent ones may share the range).
        let mut covered = range.start;
        while covered < range.end {
            let next = boot.memory_map().iter().find(|region| {
                region.kind == platform::memmap::RegionKind::Usable
                    && region.start <= covered
                    && covered < region.start + region.length
            });
            match next {
                Some(region) => covered = region.start + region.length,
                None => break,
            }
        }
        let usable = range.start < range.end && covered >= range.end;
        assert!(
            usable && range.end <= 1 << 32 && range.end - range.start >= core::mem::size_of::<SharedRegion>() as u64,
            "the shared region must be usable RAM below 4 GiB"
        );
        let pointer = physical_to_virtual(range.start) as *mut SharedRegion;
        // SAFETY: checked above: `range` is RAM the loader left usable, which the boot tables
        // map writable at the direct map, large enough, written once, and no other core runs
        // (a `BootInformation` exists); all-zero is a valid SharedRegion (atomics and integers).
        let region = unsafe {
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
        };
        // Every instance finds the region through its KCB (`attach_instance`).
        for kcb in &region.kcbs {
            kcb.shared_region.store(pointer as u64, Ordering::Relaxed);
        }
        region
    }

    /// Where the text of the image with `checksum` is in the image store: its slot when one
    /// holds it, else a free slot filled now with `span` bytes (a page multiple), `parts`
    /// (offset in the span, bytes) copied in; `None` when the store has no room. The caller
    /// holds the boot-driver lock (checked), so two drivers never fill one slot.
    pub fn store_image_text(&self, checksum: u64, span: u64, parts: &[(u64, &[u8])]) -> Option<u64> {
        assert!(
            self.header.boot_driver_lock.is_held_by(this_core()),
            "the image store is filled under the boot-driver lock"
        );
        let slots = &self.header.image_slots;
        if let Some(slot) = slots.iter().find(|slot| slot.checksum.load(Ordering::Acquire) == checksum) {
            return Some(slot.physical.load(Ordering::Relaxed));
        }
        let store = self.header.facts.shared.start + IMAGE_STORE_OFFSET;
        let used = slots.iter().map(|slot| slot.span.load(Ordering::Relaxed)).sum::<u64>();
        let free_slot = slots.iter().find(|slot| slot.checksum.load(Ordering::Acquire) == 0);
        let (Some(slot), true) = (free_slot, store + used + span <= self.header.facts.shared.end) else {
            return None;
        };
        let physical = store + used;
        if parts.iter().any(|(offset, bytes)| offset.checked_add(bytes.len() as u64).is_none_or(|end| end > span)) {
            return None;
        }
        let base = physical_to_virtual(physical) as *mut u8;
        for (offset, bytes) in parts {
            // SAFETY: the store is in the shared region every instance maps writable; the run
            // `[physical, physical + span)` is past every filled slot (so no core runs text
            // there) and inside the region (checked), the boot-driver lock makes this core its
            // only writer, and every part ends inside the span (checked).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(*offset as usize), bytes.len()) };
        }
        slot.physical.store(physical, Ordering::Relaxed);
        slot.span.store(span, Ordering::Relaxed);
        // Release: a driver that finds the checksum finds the text copied.
        slot.checksum.store(checksum, Ordering::Release);
        Some(physical)
    }

    /// Writes the AP trampoline and its `parameters` to the trampoline page, for the processor
    /// a boot driver is about to wake. The caller holds the boot-driver lock (checked), which
    /// serialises every use of the one trampoline page.
    pub fn write_trampoline(&self, parameters: crate::arch::trampoline::TrampolineParameters) {
        use crate::arch::trampoline;
        assert!(
            self.header.boot_driver_lock.is_held_by(this_core()),
            "the trampoline is written under the boot-driver lock"
        );
        let code = trampoline::code();
        assert!(
            code.len() <= 4096 && trampoline::parameters_offset() + core::mem::size_of_val(&parameters) <= code.len()
        );
        let base = physical_to_virtual(trampoline::TRAMPOLINE_BASE) as *mut u8;
        // SAFETY: the trampoline page (below 1 MiB) is in the low 2 MiB every instance maps
        // writable at the direct map; no Rust object lives there; the boot-driver lock makes
        // this core its only writer; the code and the parameters slot fit the page (checked),
        // and the slot is 8-byte aligned inside the copied code.
        unsafe {
            core::ptr::copy_nonoverlapping(code.as_ptr(), base, code.len());
            base.add(trampoline::parameters_offset())
                .cast::<trampoline::TrampolineParameters>()
                .write_volatile(parameters);
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

/// At instance entry: records the shared region the instance's KCB names and this core's id;
/// returns the region.
pub fn attach_instance(entry: &InstanceEntry) -> &'static SharedRegion {
    let kcb = entry.kcb();
    let address = kcb.shared_region.load(Ordering::Relaxed);
    // SAFETY: an `InstanceEntry` holds the KCB the boot driver started this instance with, in
    // the shared region; `SharedRegion::initialise` wrote the region's address into it (and
    // nothing else writes that word), and every instance maps the region at that address.
    let shared: &'static SharedRegion = unsafe { &*(address as *const SharedRegion) };
    SHARED.call_once(|| shared);
    THIS_CORE.call_once(|| kcb.core_id.load(Ordering::Relaxed));
    shared
}

/// The shared region, once attached.
#[inline]
pub fn region() -> Option<&'static SharedRegion> {
    SHARED.get().copied()
}

/// The shared region; panics before attachment (a bug: nothing runs before it but early boot).
#[inline]
pub fn get() -> &'static SharedRegion {
    region().expect("shared region used before attach")
}

/// The boot facts.
#[inline]
pub fn facts() -> &'static BootFacts {
    &get().header.facts
}

/// This instance's logical core id (0 during early boot).
#[inline]
pub fn this_core() -> u32 {
    THIS_CORE.get().copied().unwrap_or(0)
}

/// The APIC id of the core running OSnode `osnode` now.
#[inline]
pub fn apic_of(osnode: usize) -> u32 {
    get().header.osnodes[osnode].load(Ordering::Acquire)
}

/// This instance's KCB.
#[inline]
pub fn this_kcb() -> &'static Kcb {
    get().kcb(this_core() as usize)
}

/// The initramfs QEMU loaded (`-initrd`), as every instance maps it: read-only, the same
/// bytes for the system's life; `None` when the machine booted without one.
pub fn initramfs() -> Option<&'static [u8]> {
    let range = facts().initramfs;
    if range.end <= range.start {
        return None;
    }
    let start = physical_to_virtual(range.start) as *const u8;
    // SAFETY: the boot driver's layout of every instance (`boot_driver::prepare_instance`,
    // and the boot tables' direct map of the low 4 GiB before) maps the whole initramfs
    // read-only at its direct-map address; nothing writes it for the system's life, so a
    // shared slice of it never sees a write.
    Some(unsafe { core::slice::from_raw_parts(start, (range.end - range.start) as usize) })
}

/// Whether this core holds a lock of the shared region (console, boot driver, roles), which
/// another kernel instance could wait for.
pub fn holds_shared_lock() -> bool {
    let Some(region) = region() else { return false };
    let header = &region.header;
    let me = this_core();
    [&header.console_lock, &header.boot_driver_lock, &header.role_lock].iter().any(|lock| lock.is_held_by(me))
}
