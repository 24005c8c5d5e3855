//! The I/O APIC: sends a device's interrupt line to one core's local APIC [82093AA datasheet].
//!
//! Only instance 0 maps it (it owns the legacy devices). Registers are reached through an
//! index (IOREGSEL, offset 0x00) and a data window (IOWIN, offset 0x10); only this instance
//! uses them, with interrupts off, so the index/data pair is never interleaved.

use super::cpu::without_interrupts;
use super::paging::physical_to_virtual;
use core::fmt;

const REGISTER_VERSION: u32 = 0x01;
const REGISTER_REDIRECTION_BASE: u32 = 0x10;
const REDIRECTION_ACTIVE_LOW: u32 = 1 << 13;
const REDIRECTION_LEVEL: u32 = 1 << 15;
const REDIRECTION_MASKED: u32 = 1 << 16;

/// One I/O APIC, by the virtual address of its registers.
pub struct IoApic {
    registers: u64,
    gsi_base: u32,
}

/// Why an interrupt could not be routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteError {
    /// The GSI is not one of this I/O APIC's pins.
    NoSuchPin { gsi: u32, gsi_base: u32, pins: u32 },
    /// An xAPIC-format redirection entry holds an 8-bit destination.
    DestinationTooWide(u32),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchPin { gsi, gsi_base, pins } => {
                write!(f, "GSI {gsi} is not on this I/O APIC (GSIs {gsi_base}..{})", gsi_base + pins)
            }
            Self::DestinationTooWide(id) => write!(f, "APIC id {id} does not fit a redirection entry"),
        }
    }
}

impl IoApic {
    /// The I/O APIC whose registers are at `physical` and whose pin 0 is `gsi_base`.
    ///
    /// # Safety
    ///
    /// `physical` is an I/O APIC's register page, mapped uncached in this instance's direct
    /// map, and no other instance uses it.
    pub unsafe fn new(physical: u64, gsi_base: u32) -> Self {
        Self { registers: physical_to_virtual(physical), gsi_base }
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

    /// Number of redirection entries (pins).
    pub fn pins(&self) -> u32 {
        ((self.read(REGISTER_VERSION) >> 16) & 0xff) + 1
    }

    /// Sends `gsi` to the local APIC `destination` as `vector` (fixed delivery, physical
    /// destination), with the line's polarity and trigger mode, and unmasks it.
    pub fn route(
        &self,
        gsi: u32,
        vector: u8,
        destination: u32,
        active_low: bool,
        level_triggered: bool,
    ) -> Result<(), RouteError> {
        let pins = self.pins();
        let pin = gsi.checked_sub(self.gsi_base).filter(|pin| *pin < pins);
        let pin = pin.ok_or(RouteError::NoSuchPin { gsi, gsi_base: self.gsi_base, pins })?;
        if destination > 0xff {
            return Err(RouteError::DestinationTooWide(destination));
        }
        let mut low = u32::from(vector);
        if active_low {
            low |= REDIRECTION_ACTIVE_LOW;
        }
        if level_triggered {
            low |= REDIRECTION_LEVEL;
        }
        let index = REGISTER_REDIRECTION_BASE + 2 * pin;
        // Masked while the destination changes, then unmasked with the final low word.
        self.write(index, low | REDIRECTION_MASKED);
        self.write(index + 1, destination << 24);
        self.write(index, low);
        Ok(())
    }
}
