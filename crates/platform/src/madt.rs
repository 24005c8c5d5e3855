//! The cores the ACPI MADT lists, read through the `acpi` crate.

use acpi::madt::{Madt, MadtEntry};
use acpi::{AcpiHandler, AcpiTables};

/// Most cores a [`Cores`] list holds.
pub const MAX_LISTED_CORES: usize = crate::partition::MAX_CORES;

/// One processor the MADT lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreEntry {
    /// The local APIC id (x2APIC id when listed by an x2APIC entry).
    pub apic_id: u32,
    /// Listed by an x2APIC entry (its id may not fit the 8-bit xAPIC id).
    pub x2apic_entry: bool,
}

/// Why the cores could not be read.
#[derive(Debug)]
pub enum MadtError {
    /// The RSDP, root table or MADT failed validation, or the MADT is missing.
    Acpi(acpi::AcpiError),
    /// The MADT lists no usable processor.
    NoCores,
}

/// The usable cores, in MADT order (the firmware lists the bootstrap core first).
#[derive(Clone, Debug)]
pub struct Cores {
    entries: [CoreEntry; MAX_LISTED_CORES],
    count: usize,
    /// Physical address of the local APIC registers (xAPIC mode).
    pub local_apic_address: u64,
}

impl Cores {
    /// The listed cores, enabled or online-capable; duplicates and disabled entries are dropped.
    pub fn entries(&self) -> &[CoreEntry] {
        &self.entries[..self.count]
    }

    fn push(&mut self, entry: CoreEntry) {
        if self.count < MAX_LISTED_CORES && !self.entries().iter().any(|e| e.apic_id == entry.apic_id) {
            self.entries[self.count] = entry;
            self.count += 1;
        }
    }
}

/// MADT processor flags [ACPI 6.4 §5.2.12.2]: bit 0 enabled, bit 1 online capable.
fn usable(flags: u32) -> bool {
    flags & 0b11 != 0
}

/// Reads the cores from parsed ACPI tables.
pub fn cores<H: AcpiHandler>(tables: &AcpiTables<H>) -> Result<Cores, MadtError> {
    let madt = tables.find_table::<Madt>().map_err(MadtError::Acpi)?;
    let madt = madt.get();
    let mut cores = Cores {
        entries: [CoreEntry { apic_id: 0, x2apic_entry: false }; MAX_LISTED_CORES],
        count: 0,
        local_apic_address: u64::from(madt.local_apic_address),
    };
    for entry in madt.entries() {
        match entry {
            MadtEntry::LocalApic(e) if usable(e.flags) => {
                cores.push(CoreEntry { apic_id: u32::from(e.apic_id), x2apic_entry: false })
            }
            MadtEntry::LocalX2Apic(e) if usable(e.flags) => {
                cores.push(CoreEntry { apic_id: e.x2apic_id, x2apic_entry: true })
            }
            MadtEntry::LocalApicAddressOverride(e) => cores.local_apic_address = e.local_apic_address,
            _ => {}
        }
    }
    if cores.count == 0 {
        return Err(MadtError::NoCores);
    }
    Ok(cores)
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use acpi::PhysicalMapping;
    use core::ptr::NonNull;
    use std::vec::Vec;

    /// Host "physical memory": addresses are host pointers into fixture buffers.
    #[derive(Clone)]
    struct HostMemory;

    impl AcpiHandler for HostMemory {
        unsafe fn map_physical_region<T>(&self, address: usize, size: usize) -> PhysicalMapping<Self, T> {
            // SAFETY: fixture addresses are pointers into live, leaked buffers of at least `size` bytes.
            unsafe { PhysicalMapping::new(address, NonNull::new(address as *mut T).unwrap(), size, size, Self) }
        }
        fn unmap_physical_region<T>(_region: &PhysicalMapping<Self, T>) {}
    }

    fn checksum(bytes: &mut [u8], at: usize) {
        let sum = bytes.iter().fold(0u8, |a, b| a.wrapping_add(*b));
        bytes[at] = bytes[at].wrapping_sub(sum);
    }

    fn sdt(signature: &[u8; 4], body: &[u8]) -> &'static mut [u8] {
        let mut table = Vec::new();
        table.extend_from_slice(signature);
        table.extend_from_slice(&((36 + body.len()) as u32).to_le_bytes());
        table.push(1); // revision
        table.push(0); // checksum
        table.extend_from_slice(b"REEFOS");
        table.extend_from_slice(b"FIXTURE ");
        table.extend_from_slice(&[0; 12]);
        table.extend_from_slice(body);
        checksum(&mut table, 9);
        table.leak()
    }

    /// RSDP (revision 2) → XSDT → MADT, as firmware lays them out.
    fn fixture(madt_entries: &[u8]) -> usize {
        let mut body = Vec::new();
        body.extend_from_slice(&0xfee0_0000u32.to_le_bytes());
        body.extend_from_slice(&1u32.to_le_bytes()); // PC-AT compatible
        body.extend_from_slice(madt_entries);
        let madt = sdt(b"APIC", &body);
        let xsdt = sdt(b"XSDT", &(madt.as_ptr() as u64).to_le_bytes());
        let mut rsdp = Vec::new();
        rsdp.extend_from_slice(b"RSD PTR ");
        rsdp.push(0);
        rsdp.extend_from_slice(b"REEFOS");
        rsdp.push(2);
        rsdp.extend_from_slice(&0u32.to_le_bytes());
        rsdp.extend_from_slice(&36u32.to_le_bytes());
        rsdp.extend_from_slice(&(xsdt.as_ptr() as u64).to_le_bytes());
        rsdp.push(0);
        rsdp.extend_from_slice(&[0; 3]);
        checksum(&mut rsdp[..20], 8);
        checksum(&mut rsdp, 32);
        rsdp.leak().as_ptr() as usize
    }

    fn local_apic(processor: u8, apic_id: u8, flags: u32) -> [u8; 8] {
        let f = flags.to_le_bytes();
        [0, 8, processor, apic_id, f[0], f[1], f[2], f[3]]
    }

    fn parse(entries: &[u8]) -> Result<Cores, MadtError> {
        let rsdp = fixture(entries);
        // SAFETY: `rsdp` points at a leaked, well-formed fixture RSDP.
        let tables = unsafe { AcpiTables::from_rsdp(HostMemory, rsdp) }.map_err(MadtError::Acpi)?;
        cores(&tables)
    }

    #[test]
    fn lists_enabled_and_online_capable_cores() {
        let mut entries = Vec::new();
        entries.extend_from_slice(&local_apic(0, 0, 1));
        entries.extend_from_slice(&local_apic(1, 1, 1));
        entries.extend_from_slice(&local_apic(2, 2, 0)); // disabled: skipped
        entries.extend_from_slice(&local_apic(3, 6, 2)); // online capable
        entries.extend_from_slice(&[1, 12, 0, 0, 0, 0, 0xc0, 0xfe, 0, 0, 0, 0]); // an I/O APIC
        let mut x2apic = [9u8, 16, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0];
        x2apic[4..8].copy_from_slice(&300u32.to_le_bytes());
        entries.extend_from_slice(&x2apic);
        let cores = parse(&entries).unwrap();
        let ids: Vec<u32> = cores.entries().iter().map(|c| c.apic_id).collect();
        assert_eq!(ids, [0, 1, 6, 300]);
        assert!(cores.entries()[3].x2apic_entry);
        assert_eq!(cores.local_apic_address, 0xfee0_0000);
    }

    #[test]
    fn no_cores_is_an_error() {
        assert!(matches!(parse(&local_apic(0, 0, 0)), Err(MadtError::NoCores)));
    }

    #[test]
    fn bad_checksum_is_refused() {
        let rsdp = fixture(&local_apic(0, 0, 1));
        // SAFETY: corrupting one byte of our own leaked fixture.
        unsafe { *(rsdp as *mut u8).add(10) ^= 0xff };
        // SAFETY: `rsdp` still points at a readable fixture; validation must catch the corruption.
        let result = unsafe { AcpiTables::from_rsdp(HostMemory, rsdp) };
        assert!(result.is_err());
    }
}
