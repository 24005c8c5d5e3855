//! What the ACPI MADT says, read through the `acpi` crate: the cores, the local APIC address,
//! every I/O APIC and where each ISA IRQ arrives.

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

/// An I/O APIC: its registers and the first global system interrupt (GSI) its pins carry.
/// How many pins it has is not in the MADT: its version register says (the base reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoApic {
    /// Its I/O APIC id.
    pub id: u8,
    /// Physical address of its registers.
    pub address: u64,
    /// The GSI of its pin 0.
    pub gsi_base: u32,
}

/// Most I/O APICs an [`IoApics`] list holds (QEMU's microvm has two, large servers eight).
pub const MAX_IO_APICS: usize = 8;

/// The I/O APICs the MADT lists, by GSI base, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoApics {
    entries: [IoApic; MAX_IO_APICS],
    count: usize,
    /// Listed past [`MAX_IO_APICS`] (their GSIs cannot be routed), or listed twice.
    pub nr_ignored: usize,
}

impl IoApics {
    /// No I/O APIC.
    pub const EMPTY: Self =
        Self { entries: [IoApic { id: 0, address: 0, gsi_base: 0 }; MAX_IO_APICS], count: 0, nr_ignored: 0 };

    /// The listed I/O APICs, by GSI base, lowest first.
    pub fn entries(&self) -> &[IoApic] {
        &self.entries[..self.count]
    }

    /// The one with the lowest GSI base (the one ISA IRQs reach), if any.
    pub fn first(&self) -> Option<IoApic> {
        self.entries().first().copied()
    }

    /// Whether one of them has pin 0 at `gsi_base`.
    pub fn has_gsi_base(&self, gsi_base: u32) -> bool {
        self.entries().iter().any(|io_apic| io_apic.gsi_base == gsi_base)
    }

    /// Adds `found` in GSI-base order; a second entry with the same address or GSI base, or
    /// one past the capacity, is counted in `nr_ignored`.
    pub fn insert(&mut self, found: IoApic) {
        let duplicate = self.entries().iter().any(|e| e.address == found.address || e.gsi_base == found.gsi_base);
        if duplicate || self.count == MAX_IO_APICS {
            self.nr_ignored += 1;
            return;
        }
        let at = self.entries().iter().position(|e| e.gsi_base > found.gsi_base).unwrap_or(self.count);
        self.entries.copy_within(at..self.count, at + 1);
        self.entries[at] = found;
        self.count += 1;
    }
}

/// Where an ISA IRQ arrives: its GSI and the signal's polarity and trigger mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsaRoute {
    pub gsi: u32,
    pub active_low: bool,
    pub level_triggered: bool,
}

/// ISA IRQs 0..16.
pub const ISA_IRQS: usize = 16;

/// The usable cores, in MADT order (the firmware lists the bootstrap core first), and the
/// interrupt routing the MADT describes.
#[derive(Clone, Debug)]
pub struct Cores {
    entries: [CoreEntry; MAX_LISTED_CORES],
    count: usize,
    /// Physical address of the local APIC registers (xAPIC mode).
    pub local_apic_address: u64,
    /// Every I/O APIC, by GSI base.
    pub io_apics: IoApics,
    /// ISA IRQ `n` arrives as `isa_routes[n]`: GSI `n`, edge, active high (the ISA defaults)
    /// unless an interrupt source override says otherwise [ACPI 6.4 §5.2.12.5].
    pub isa_routes: [IsaRoute; ISA_IRQS],
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

/// An override's GSI with its MPS INTI flags: bits 0–1 polarity, 2–3 trigger mode; 0 means
/// "conforms to the bus", which for ISA is active high and edge [ACPI 6.4 table 5.50].
fn isa_route(gsi: u32, flags: u16) -> IsaRoute {
    IsaRoute { gsi, active_low: flags & 0b11 == 0b11, level_triggered: (flags >> 2) & 0b11 == 0b11 }
}

/// Reads the cores from parsed ACPI tables.
pub fn cores<H: AcpiHandler>(tables: &AcpiTables<H>) -> Result<Cores, MadtError> {
    let madt = tables.find_table::<Madt>().map_err(MadtError::Acpi)?;
    let madt = madt.get();
    let mut cores = Cores {
        entries: [CoreEntry { apic_id: 0, x2apic_entry: false }; MAX_LISTED_CORES],
        count: 0,
        local_apic_address: u64::from(madt.local_apic_address),
        io_apics: IoApics::EMPTY,
        isa_routes: core::array::from_fn(|irq| IsaRoute { gsi: irq as u32, active_low: false, level_triggered: false }),
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
            MadtEntry::IoApic(e) => {
                cores.io_apics.insert(IoApic {
                    id: e.io_apic_id,
                    address: u64::from(e.io_apic_address),
                    gsi_base: e.global_system_interrupt_base,
                });
            }
            MadtEntry::InterruptSourceOverride(e) if e.bus == 0 && usize::from(e.irq) < ISA_IRQS => {
                cores.isa_routes[usize::from(e.irq)] = isa_route(e.global_system_interrupt, e.flags);
            }
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
    use std::vec;
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

    fn io_apic(id: u8, address: u32, gsi_base: u32) -> Vec<u8> {
        let mut entry = vec![1, 12, id, 0];
        entry.extend_from_slice(&address.to_le_bytes());
        entry.extend_from_slice(&gsi_base.to_le_bytes());
        entry
    }

    fn source_override(irq: u8, gsi: u32, flags: u16) -> Vec<u8> {
        let mut entry = vec![2, 10, 0, irq];
        entry.extend_from_slice(&gsi.to_le_bytes());
        entry.extend_from_slice(&flags.to_le_bytes());
        entry
    }

    #[test]
    fn isa_irqs_default_to_their_gsi_edge_active_high() {
        let cores = parse(&local_apic(0, 0, 1)).unwrap();
        assert_eq!(cores.io_apics.first(), None);
        assert!(cores.io_apics.entries().is_empty());
        assert_eq!(cores.isa_routes[4], IsaRoute { gsi: 4, active_low: false, level_triggered: false });
    }

    #[test]
    fn reads_the_io_apic_and_source_overrides() {
        let mut entries = Vec::new();
        entries.extend_from_slice(&local_apic(0, 0, 1));
        entries.extend_from_slice(&io_apic(3, 0xfec1_0000, 24)); // a second one, listed first
        entries.extend_from_slice(&io_apic(2, 0xfec0_0000, 0));
        entries.extend_from_slice(&source_override(0, 2, 0)); // the PIT on GSI 2, bus defaults
        entries.extend_from_slice(&source_override(9, 9, 0b1111)); // SCI: level, active low
        entries.extend_from_slice(&source_override(4, 20, 0b0101)); // edge, active high, moved
        let cores = parse(&entries).unwrap();
        assert_eq!(cores.io_apics.first(), Some(IoApic { id: 2, address: 0xfec0_0000, gsi_base: 0 }));
        // Both are kept, lowest GSI base first, whatever the listing order.
        assert_eq!(
            cores.io_apics.entries(),
            [IoApic { id: 2, address: 0xfec0_0000, gsi_base: 0 }, IoApic { id: 3, address: 0xfec1_0000, gsi_base: 24 }]
        );
        assert!(cores.io_apics.has_gsi_base(24));
        assert_eq!(cores.io_apics.nr_ignored, 0);
        assert_eq!(cores.isa_routes[0], IsaRoute { gsi: 2, active_low: false, level_triggered: false });
        assert_eq!(cores.isa_routes[9], IsaRoute { gsi: 9, active_low: true, level_triggered: true });
        assert_eq!(cores.isa_routes[4], IsaRoute { gsi: 20, active_low: false, level_triggered: false });
        assert_eq!(cores.isa_routes[3], IsaRoute { gsi: 3, active_low: false, level_triggered: false });
    }

    #[test]
    fn io_apics_past_the_capacity_or_listed_twice_are_counted_not_kept() {
        let mut entries = Vec::new();
        entries.extend_from_slice(&local_apic(0, 0, 1));
        // Ten, listed from the highest GSI base down, and one listed twice.
        for n in (0..10u8).rev() {
            entries.extend_from_slice(&io_apic(n, 0xfec0_0000 + u32::from(n) * 0x1000, u32::from(n) * 24));
        }
        entries.extend_from_slice(&io_apic(1, 0xfec0_1000, 24));
        let cores = parse(&entries).unwrap();
        let bases: Vec<u32> = cores.io_apics.entries().iter().map(|e| e.gsi_base).collect();
        // The first eight listed are kept (GSI bases 216 down to 48), in GSI order.
        assert_eq!(bases, [48, 72, 96, 120, 144, 168, 192, 216]);
        assert_eq!(cores.io_apics.nr_ignored, 3);
    }

    /// QEMU's microvm with ACPI: the first I/O APIC at 0xfec00000 for GSIs 0..24, the second at
    /// 0xfec10000 from GSI 24 (`ioapic2=off` leaves only the first).
    #[test]
    fn microvm_lists_two_io_apics() {
        let mut entries = Vec::new();
        entries.extend_from_slice(&local_apic(0, 0, 1));
        entries.extend_from_slice(&io_apic(0, 0xfec0_0000, 0));
        entries.extend_from_slice(&io_apic(1, 0xfec1_0000, 24));
        entries.extend_from_slice(&source_override(0, 2, 0));
        let cores = parse(&entries).unwrap();
        assert_eq!(cores.io_apics.entries().len(), 2);
        assert_eq!(cores.io_apics.entries()[1], IoApic { id: 1, address: 0xfec1_0000, gsi_base: 24 });
        assert_eq!(cores.isa_routes[0].gsi, 2);
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
