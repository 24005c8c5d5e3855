//! Local APIC in x2APIC mode when the CPU offers it, else xAPIC: timer, EOI, IPIs, INIT-SIPI.

use super::cpu::{cpuid, read_msr, read_tsc, relax, without_interrupts, write_msr};
use super::paging::physical_to_virtual;
use core::sync::atomic::{AtomicU32, Ordering};
use spin::Once;

const IA32_APIC_BASE: u32 = 0x1B;
const APIC_BASE_ENABLE: u64 = 1 << 11;
const APIC_BASE_X2APIC: u64 = 1 << 10;

/// Local APIC register offsets (xAPIC MMIO; x2APIC MSR = 0x800 + offset / 16) [SDM vol3 table 10-1].
#[derive(Clone, Copy)]
#[repr(u32)]
enum Register {
    Id = 0x20,
    TaskPriority = 0x80,
    EndOfInterrupt = 0xB0,
    LogicalDestination = 0xD0,
    DestinationFormat = 0xE0,
    SpuriousVector = 0xF0,
    ErrorStatus = 0x280,
    InterruptCommandLow = 0x300,
    InterruptCommandHigh = 0x310,
    LvtTimer = 0x320,
    LvtLint0 = 0x350,
    LvtLint1 = 0x360,
    LvtError = 0x370,
    TimerInitialCount = 0x380,
    TimerCurrentCount = 0x390,
    TimerDivide = 0x3E0,
}

const LVT_MASKED: u32 = 1 << 16;
const LVT_TIMER_PERIODIC: u32 = 1 << 17;
const ICR_DELIVERY_PENDING: u32 = 1 << 12;
const ICR_DESTINATION_LOGICAL: u32 = 1 << 11;
/// xAPIC flat model: the destination is an 8-bit mask, one bit per local APIC whose logical
/// destination register holds that bit [SDM vol3 §10.6.2.2].
const FLAT_MODEL: u32 = 0xFFFF_FFFF;
/// APIC ids below this get a bit of their own in the xAPIC flat model.
const FLAT_LOGICAL_IDS: u32 = 8;
const ICR_LEVEL_ASSERT: u32 = 1 << 14;
const ICR_TRIGGER_LEVEL: u32 = 1 << 15;
const ICR_DELIVERY_INIT: u32 = 0b101 << 8;
const ICR_DELIVERY_STARTUP: u32 = 0b110 << 8;

/// How this core talks to its local APIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApicMode {
    /// Memory-mapped registers at this virtual address.
    XApic { registers: u64 },
    /// MSR access, 32-bit APIC ids [SDM vol3 §10.12].
    X2Apic,
}

/// This core's local APIC.
pub struct LocalApic {
    mode: ApicMode,
    /// xAPIC: the destination last written to ICR high by this core, or `u32::MAX`. ICR high
    /// keeps its value, so an IPI to the same core as the last one writes ICR low only (one
    /// register access fewer; under emulation each access is an exit).
    icr_destination: AtomicU32,
}

// One per instance (private .bss).
static LOCAL_APIC: Once<LocalApic> = Once::new();

/// Whether the CPU offers x2APIC (CPUID.1:ECX[21]).
pub fn x2apic_supported() -> bool {
    cpuid(1, 0).ecx & (1 << 21) != 0
}

/// Enables this core's local APIC (x2APIC when offered) with all LVTs masked; returns it.
pub fn init(physical_base: u64) -> &'static LocalApic {
    LOCAL_APIC.call_once(|| {
        let mode = enable_hardware(physical_base);
        let apic = LocalApic { mode, icr_destination: AtomicU32::new(u32::MAX) };
        apic.mask_all();
        apic
    })
}

/// Forgets which destination this instance last wrote into the xAPIC's ICR: the register is
/// the processor's, and after a world switch another instance (or INIT) wrote it last.
pub fn forget_icr_destination() {
    if let Some(apic) = LOCAL_APIC.get() {
        apic.icr_destination.store(u32::MAX, Ordering::Relaxed);
    }
}

/// Enables the local APIC of a processor newly woken by INIT-SIPI for this instance, which
/// ran on another processor before (an unparked OSnode): INIT reset its registers, and the
/// instance keeps the mode it chose at entry.
pub fn enable_again() {
    let apic = local();
    // The mode and register address are the instance's already: only the hardware is new.
    enable_hardware(0);
    apic.mask_all();
}

fn enable_hardware(physical_base: u64) -> ApicMode {
    // SAFETY: IA32_APIC_BASE exists on every x86-64 CPU; setting EN (and EXTD when CPUID
    // says x2APIC exists) is the documented enable sequence [SDM vol3 §10.12.1].
    unsafe {
        let base = read_msr(IA32_APIC_BASE);
        if x2apic_supported() {
            write_msr(IA32_APIC_BASE, base | APIC_BASE_ENABLE);
            write_msr(IA32_APIC_BASE, base | APIC_BASE_ENABLE | APIC_BASE_X2APIC);
            ApicMode::X2Apic
        } else {
            write_msr(IA32_APIC_BASE, (base & !APIC_BASE_X2APIC) | APIC_BASE_ENABLE);
            ApicMode::XApic { registers: physical_to_virtual(physical_base) }
        }
    }
}

impl LocalApic {
    /// Priority 0, every local vector masked, software-enabled with the spurious vector.
    fn mask_all(&self) {
        self.write(Register::TaskPriority, 0);
        self.write(Register::LvtTimer, LVT_MASKED);
        self.write(Register::LvtLint0, LVT_MASKED);
        self.write(Register::LvtLint1, LVT_MASKED);
        self.write(Register::LvtError, LVT_MASKED);
        self.write(Register::SpuriousVector, (1 << 8) | u32::from(super::idt::VECTOR_SPURIOUS));
        if let ApicMode::XApic { .. } = self.mode {
            // Flat logical mode, this processor's bit its APIC id's (none past 8), so one IPI
            // can name several processors ([`LocalApic::send_ipi_to_many`]). x2APIC derives
            // the logical id from the APIC id itself.
            let id = self.id();
            self.write(Register::DestinationFormat, FLAT_MODEL);
            let logical = if id < FLAT_LOGICAL_IDS { 1 << (24 + id) } else { 0 };
            self.write(Register::LogicalDestination, logical);
        }
    }
}

/// This core's local APIC, once [`init`] ran.
#[inline]
pub fn local() -> &'static LocalApic {
    LOCAL_APIC.get().expect("local APIC used before init")
}

impl LocalApic {
    fn read(&self, register: Register) -> u32 {
        match self.mode {
            // SAFETY: the register page is mapped uncached in every instance's direct map and
            // `register` is a valid offset in it.
            ApicMode::XApic { registers } => unsafe {
                core::ptr::read_volatile((registers + register as u64) as *const u32)
            },
            // SAFETY: x2APIC mode is enabled, so MSR 0x800 + offset/16 is the register.
            ApicMode::X2Apic => unsafe { read_msr(0x800 + (register as u32 >> 4)) as u32 },
        }
    }

    fn write(&self, register: Register, value: u32) {
        match self.mode {
            // SAFETY: as in `read`.
            ApicMode::XApic { registers } => unsafe {
                core::ptr::write_volatile((registers + register as u64) as *mut u32, value)
            },
            // SAFETY: as in `read`; x2APIC registers are written with WRMSR.
            ApicMode::X2Apic => unsafe { write_msr(0x800 + (register as u32 >> 4), u64::from(value)) },
        }
    }

    /// The access mode in use.
    pub fn mode(&self) -> ApicMode {
        self.mode
    }

    /// This core's APIC id.
    pub fn id(&self) -> u32 {
        match self.mode {
            ApicMode::XApic { .. } => self.read(Register::Id) >> 24,
            ApicMode::X2Apic => self.read(Register::Id),
        }
    }

    /// Signals the end of the interrupt being handled.
    pub fn end_of_interrupt(&self) {
        self.write(Register::EndOfInterrupt, 0);
    }

    /// Writes the interrupt command register, once the previous IPI has left (xAPIC only
    /// reports it).
    ///
    /// The xAPIC ICR is two registers: interrupts are off from the high write to the low one,
    /// so an IPI sent by an interrupt handler in between cannot redirect this one.
    fn send_command(&self, destination: u32, command: u32) {
        match self.mode {
            ApicMode::XApic { .. } => without_interrupts(|| {
                // The previous IPI must have left before the ICR is written again. Waiting
                // here rather than after the write (as Linux does) lets the sender go on as
                // soon as its IPI is out; under emulation, it also leaves the target's wake-up
                // without a register access of ours competing for the emulator's lock.
                while self.read(Register::InterruptCommandLow) & ICR_DELIVERY_PENDING != 0 {
                    relax();
                }
                // Only this core touches its ICR and its cached destination, with interrupts off.
                if self.icr_destination.load(Ordering::Relaxed) != destination {
                    self.write(Register::InterruptCommandHigh, destination << 24);
                    self.icr_destination.store(destination, Ordering::Relaxed);
                }
                self.write(Register::InterruptCommandLow, command);
            }),
            // SAFETY: the x2APIC ICR is one 64-bit MSR (0x830), destination in the high half.
            ApicMode::X2Apic => unsafe { write_msr(0x830, (u64::from(destination) << 32) | u64::from(command)) },
        }
    }

    /// Sends a fixed interrupt with `vector` to the core with APIC id `destination`.
    pub fn send_ipi(&self, destination: u32, vector: u8) {
        self.send_command(destination, u32::from(vector) | ICR_LEVEL_ASSERT);
    }

    /// Sends a fixed interrupt with `vector` to every core of `apic_ids` (no id twice): with
    /// one logical-destination IPI when the mode can name them all (xAPIC flat: ids below 8;
    /// x2APIC: ids of one cluster of 16 [SDM vol3 §10.12.10.2]), else one IPI each. Under
    /// emulation every ICR write is an exit and a wake-up of the target's thread under the
    /// emulator's lock: a multicast that writes the ICR once pays that once.
    pub fn send_ipi_to_many(&self, apic_ids: &[u32], vector: u8) {
        let command = u32::from(vector) | ICR_LEVEL_ASSERT;
        match apic_ids {
            [] => {}
            [only] => self.send_command(*only, command),
            _ => match self.logical_destination(apic_ids) {
                Some(destination) => self.send_command(destination, command | ICR_DESTINATION_LOGICAL),
                None => apic_ids.iter().for_each(|id| self.send_command(*id, command)),
            },
        }
    }

    /// The logical destination that names exactly `apic_ids`, if there is one.
    fn logical_destination(&self, apic_ids: &[u32]) -> Option<u32> {
        match self.mode {
            ApicMode::XApic { .. } => {
                apic_ids.iter().try_fold(0u32, |mask, id| (*id < FLAT_LOGICAL_IDS).then(|| mask | 1 << id))
            }
            ApicMode::X2Apic => {
                let cluster = apic_ids.first()? >> 4;
                apic_ids.iter().try_fold(cluster << 16, |destination, id| {
                    (id >> 4 == cluster).then(|| destination | 1 << (id & 0xF))
                })
            }
        }
    }

    /// Sends INIT (assert, then de-assert for older xAPICs) [SDM vol3 §10.6.1].
    pub fn send_init(&self, destination: u32) {
        self.write(Register::ErrorStatus, 0);
        self.send_command(destination, ICR_DELIVERY_INIT | ICR_LEVEL_ASSERT | ICR_TRIGGER_LEVEL);
        if matches!(self.mode, ApicMode::XApic { .. }) {
            self.send_command(destination, ICR_DELIVERY_INIT | ICR_TRIGGER_LEVEL);
        }
    }

    /// Sends a STARTUP IPI: the target starts in real mode at `page << 12`.
    pub fn send_startup(&self, destination: u32, page: u8) {
        self.send_command(destination, ICR_DELIVERY_STARTUP | ICR_LEVEL_ASSERT | u32::from(page));
    }

    /// Counts LAPIC timer ticks (divide by 1) over `tsc_cycles` of the TSC: the timer rate.
    pub fn measure_timer(&self, tsc_cycles: u64) -> u64 {
        self.write(Register::TimerDivide, 0b1011);
        self.write(Register::LvtTimer, LVT_MASKED);
        self.write(Register::TimerInitialCount, u32::MAX);
        let start = read_tsc();
        while read_tsc() - start < tsc_cycles {
            relax();
        }
        let counted = u32::MAX - self.read(Register::TimerCurrentCount);
        self.write(Register::TimerInitialCount, 0);
        u64::from(counted)
    }

    /// Starts the periodic timer: `initial_count` ticks (divide by 1) between interrupts;
    /// zero stops it.
    pub fn start_periodic_timer(&self, initial_count: u32, vector: u8) {
        self.write(Register::TimerDivide, 0b1011);
        self.write(Register::LvtTimer, u32::from(vector) | LVT_TIMER_PERIODIC);
        self.write(Register::TimerInitialCount, initial_count);
    }

    /// Whether the timer is on (periodic or one-shot armed): its LVT entry is unmasked.
    pub fn timer_enabled(&self) -> bool {
        self.read(Register::LvtTimer) & LVT_MASKED == 0
    }

    /// Arms the timer once: one interrupt with `vector` after `count` ticks (divide by 1).
    pub fn start_one_shot_timer(&self, count: u32, vector: u8) {
        self.write(Register::TimerDivide, 0b1011);
        self.write(Register::LvtTimer, u32::from(vector));
        self.write(Register::TimerInitialCount, count.max(1));
    }

    /// Stops the timer: masked, and its count cleared so no tick is pending.
    pub fn stop_timer(&self) {
        self.write(Register::LvtTimer, LVT_MASKED);
        self.write(Register::TimerInitialCount, 0);
    }
}
