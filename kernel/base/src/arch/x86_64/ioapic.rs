//! The I/O APICs: send a device's interrupt line (a GSI) to one core's local APIC
//! [82093AA datasheet].
//!
//! Only the instance that owns the devices (instance 0) maps them and routes through them.
//! Registers are reached through an index (IOREGSEL, offset 0x00) and a data window (IOWIN,
//! offset 0x10); only this instance uses them, with interrupts off, so the index/data pair is
//! never interleaved.

use super::cpu::without_interrupts;
use super::paging::physical_to_virtual;
use core::fmt;
use platform::madt::{IoApics, MAX_IO_APICS};

const REGISTER_VERSION: u32 = 0x01;
const REGISTER_REDIRECTION_BASE: u32 = 0x10;
const REDIRECTION_ACTIVE_LOW: u32 = 1 << 13;
const REDIRECTION_LEVEL: u32 = 1 << 15;
const REDIRECTION_MASKED: u32 = 1 << 16;

/// How an interrupt line signals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Once per rising edge (ISA devices; a line the driver acknowledges in thread context).
    Edge,
    /// For as long as the line is asserted: the device must be acknowledged before the EOI.
    Level,
}

/// Which level asserts the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polarity {
    ActiveHigh,
    ActiveLow,
}

/// Where a GSI goes: its vector, the local APIC that takes it, and how its line signals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub gsi: u32,
    pub vector: u8,
    /// The APIC id of the core that takes it (fixed delivery, physical destination).
    pub destination: u32,
    pub trigger: Trigger,
    pub polarity: Polarity,
}

/// Why an interrupt could not be routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteError {
    /// No I/O APIC the MADT lists has a pin for the GSI.
    NoSuchPin(u32),
    /// An xAPIC-format redirection entry holds an 8-bit destination.
    DestinationTooWide(u32),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchPin(gsi) => write!(f, "no I/O APIC has a pin for GSI {gsi}"),
            Self::DestinationTooWide(id) => write!(f, "APIC id {id} does not fit a redirection entry"),
        }
    }
}

/// One I/O APIC, by the virtual address of its registers.
#[derive(Clone, Copy, Debug)]
pub struct IoApic {
    registers: u64,
    /// Its I/O APIC id (from the MADT).
    pub id: u8,
    /// The GSI of its pin 0.
    pub gsi_base: u32,
    /// How many pins it has (its version register's maximum redirection entry + 1).
    pub inputs: u32,
}

impl IoApic {
    /// The I/O APIC whose registers are at `physical` and whose pin 0 is `gsi_base`; reads how
    /// many inputs it has.
    ///
    /// # Safety
    ///
    /// `physical` is an I/O APIC's register page, mapped uncached in this instance's direct
    /// map, and no other instance uses it.
    unsafe fn new(physical: u64, id: u8, gsi_base: u32) -> Self {
        let mut io_apic = Self { registers: physical_to_virtual(physical), id, gsi_base, inputs: 0 };
        io_apic.inputs = ((io_apic.read(REGISTER_VERSION) >> 16) & 0xff) + 1;
        io_apic
    }

    fn with_registers<T>(&self, access: impl FnOnce(*mut u32, *mut u32) -> T) -> T {
        without_interrupts(|| access(self.registers as *mut u32, (self.registers + 0x10) as *mut u32))
    }

    fn read(&self, index: u32) -> u32 {
        self.with_registers(|select, window| {
            // SAFETY: the register page is mapped (see `new`); index, then data.
            unsafe {
                select.write_volatile(index);
                window.read_volatile()
            }
        })
    }

    fn write(&self, index: u32, value: u32) {
        self.with_registers(|select, window| {
            // SAFETY: as in `read`.
            unsafe {
                select.write_volatile(index);
                window.write_volatile(value);
            }
        })
    }

    /// Whether `gsi` is one of its pins.
    pub fn holds(&self, gsi: u32) -> bool {
        gsi.checked_sub(self.gsi_base).is_some_and(|pin| pin < self.inputs)
    }

    fn program(&self, route: &Route) {
        let pin = route.gsi - self.gsi_base;
        let mut low = u32::from(route.vector);
        if route.polarity == Polarity::ActiveLow {
            low |= REDIRECTION_ACTIVE_LOW;
        }
        if route.trigger == Trigger::Level {
            low |= REDIRECTION_LEVEL;
        }
        let index = REGISTER_REDIRECTION_BASE + 2 * pin;
        // Masked while the destination changes, then unmasked with the final low word.
        self.write(index, low | REDIRECTION_MASKED);
        self.write(index + 1, route.destination << 24);
        self.write(index, low);
    }

    fn mask(&self, gsi: u32) {
        let index = REGISTER_REDIRECTION_BASE + 2 * (gsi - self.gsi_base);
        self.write(index, self.read(index) | REDIRECTION_MASKED);
    }
}

/// Every I/O APIC this instance routes through.
pub struct InterruptControllers {
    entries: [Option<IoApic>; MAX_IO_APICS],
}

// Instance 0's, once it looked at them (private .bss: another instance has none).
static CONTROLLERS: spin::Once<InterruptControllers> = spin::Once::new();

/// The I/O APICs `listed`, with the number of inputs each has (read now, once; later calls
/// return the first list).
///
/// # Safety
///
/// Every listed I/O APIC's register page is mapped uncached in this instance's direct map,
/// and no other instance uses them.
pub unsafe fn init(listed: &IoApics) -> &'static InterruptControllers {
    CONTROLLERS.call_once(|| {
        let mut entries = [None; MAX_IO_APICS];
        for (slot, io_apic) in entries.iter_mut().zip(listed.entries()) {
            // SAFETY: the caller's promise, for each listed one.
            *slot = Some(unsafe { IoApic::new(io_apic.address, io_apic.id, io_apic.gsi_base) });
        }
        InterruptControllers { entries }
    })
}

impl InterruptControllers {
    /// The I/O APICs, by GSI base.
    pub fn iter(&self) -> impl Iterator<Item = &IoApic> {
        self.entries.iter().flatten()
    }

    /// The I/O APIC whose pins hold `gsi`.
    pub fn holding(&self, gsi: u32) -> Option<&IoApic> {
        self.iter().find(|io_apic| io_apic.holds(gsi))
    }

    /// Sends `route.gsi` to `route.destination` as `route.vector`, with its trigger mode and
    /// polarity, on whichever I/O APIC holds that GSI, and unmasks it.
    pub fn route(&self, route: Route) -> Result<(), RouteError> {
        let io_apic = self.holding(route.gsi).ok_or(RouteError::NoSuchPin(route.gsi))?;
        if route.destination > 0xff {
            return Err(RouteError::DestinationTooWide(route.destination));
        }
        io_apic.program(&route);
        Ok(())
    }

    /// Masks `gsi` (a device that stops being used).
    pub fn mask(&self, gsi: u32) -> Result<(), RouteError> {
        self.holding(gsi).ok_or(RouteError::NoSuchPin(gsi))?.mask(gsi);
        Ok(())
    }
}
