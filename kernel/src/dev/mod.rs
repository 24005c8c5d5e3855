//! Devices: the virtio-mmio transports of the machine, found and driven by the instance that
//! owns them (instance 0), their interrupts routed to it.
//!
//! At boot the owner probes every transport of microvm's window (`platform::virtio`), skips the
//! empty ones, logs a line per device it found, starts a driver for the kinds Reef drives (9P
//! shares, [`ninep`]; the network device, [`net`]) and routes each device's GSI to its own local APIC on a vector of its
//! own. Other instances reach a device's service by messages (the file service for 9P), never
//! the device. `docs/devices.md` says how another instance would own one and what an
//! interrupt costs. No `unsafe`: the transports, DMA pages and queues are the base's
//! (`base::virtio`).
#![deny(unsafe_code)]

pub mod net;
pub mod ninep;

use crate::arch::apic;
use crate::arch::idt::{InterruptFrame, DEVICE_VECTORS, VECTOR_DEVICE_BASE};
use crate::arch::ioapic::{Polarity, Route, Trigger};
use crate::virtio::{self, DeviceType, Probe, Transport};
use ::core::fmt::Write;
use ::core::sync::atomic::{AtomicU64, Ordering};
use alloc::string::String;
use alloc::vec::Vec;
use spin::Mutex;

/// The device vectors, one per transport slot: `boot` registers [`on_interrupt`] for each.
pub fn vectors() -> impl Iterator<Item = u8> {
    VECTOR_DEVICE_BASE..VECTOR_DEVICE_BASE + DEVICE_VECTORS
}

/// A device this instance found.
#[derive(Clone)]
pub struct Found {
    /// Its transport's slot in the window.
    pub slot: usize,
    /// Physical address of its registers.
    pub address: u64,
    pub kind: DeviceType,
    /// virtio-mmio transport version (1 legacy, 2 modern).
    pub transport_version: u32,
    /// The GSI its transport raises, and the vector it arrives on here.
    pub gsi: u32,
    pub vector: u8,
    /// Whether its interrupt reaches this core (routing may fail: no I/O APIC holds the GSI).
    pub routed: bool,
    /// What its driver says about it (a 9P share's tag and mount point), or why none runs.
    pub detail: String,
}

/// The devices this instance owns, in slot order (empty on other instances).
static FOUND: Mutex<Vec<Found>> = Mutex::new(Vec::new());

/// Interrupts taken per slot (this instance's own).
static INTERRUPTS: [AtomicU64; DEVICE_VECTORS as usize] = [const { AtomicU64::new(0) }; DEVICE_VECTORS as usize];

/// The device vectors' handler: counts it and ends it. The waiting driver (halted in
/// `time::halt_until`) looks at its queue when the interrupt wakes the core; the device is
/// acknowledged there, in thread context, which is why its line is routed edge-triggered.
pub fn on_interrupt(frame: &mut InterruptFrame) {
    if let Some(count) =
        frame.vector.checked_sub(u64::from(VECTOR_DEVICE_BASE)).and_then(|s| INTERRUPTS.get(s as usize))
    {
        count.fetch_add(1, Ordering::Relaxed);
        net::on_interrupt((frame.vector - u64::from(VECTOR_DEVICE_BASE)) as usize);
    }
    apic::local().end_of_interrupt();
}

/// Interrupts taken so far for the device in `slot`.
pub fn interrupts_of(slot: usize) -> u64 {
    INTERRUPTS.get(slot).map_or(0, |count| count.load(Ordering::Relaxed))
}

/// Probes the transports on the instance that owns the devices (`boot`, core 0, after the trap
/// table has the device vectors and before the file service starts): one log line per device.
pub fn probe_all() {
    let transports = virtio::transports();
    let core = crate::core::shared::this_core();
    let me = apic::local().id();
    let mut found = Vec::new();
    for slot in 0..transports.count {
        let transport = match virtio::probe(slot) {
            Ok(Probe::Device(transport)) => transport,
            Ok(Probe::Empty) => continue,
            Ok(Probe::Refused(why)) => {
                log::warn!("devices: transport {slot} at {:#x} ignored: {why}", transports.address(slot));
                continue;
            }
            Err(why) => {
                log::warn!("devices: transport {slot} not probed: {why:?}");
                continue;
            }
        };
        let gsi = transports.gsi(slot);
        let vector = VECTOR_DEVICE_BASE + slot as u8;
        let mut device = Found {
            slot,
            address: transports.address(slot),
            kind: transport.device_type(),
            transport_version: transport.version().into(),
            gsi,
            vector,
            routed: false,
            detail: String::new(),
        };
        // The driver first (the device is reset and set up), then its interrupt.
        match device.kind {
            DeviceType::_9P => ninep::start(slot, transport, &mut device.detail),
            DeviceType::Network => net::start(slot, transport, &mut device.detail),
            _ => {
                let _ = write!(device.detail, "no driver in Reef");
                // Dropping the transport resets the device and gives the slot back.
                drop(transport);
            }
        }
        device.routed = route(&device, me);
        log::info!(
            "devices: core {core} owns virtio-{} at {:#x} (transport {slot}, virtio-mmio v{}), GSI {gsi} -> vector {vector}{}: {}",
            kind_name(device.kind),
            device.address,
            device.transport_version,
            if device.routed { "" } else { " (not routed)" },
            device.detail,
        );
        found.push(device);
    }
    if found.is_empty() {
        log::info!("devices: core {core} found no virtio device in {} transports", transports.count);
    }
    *FOUND.lock() = found;
}

/// Routes `device`'s GSI to the local APIC `destination` on its vector: edge-triggered, active
/// high. virtio-mmio's line is level (high while the interrupt status is not acknowledged);
/// the driver acknowledges it after each request, in thread context, before the next one, so
/// each completion is a new rising edge and none is lost.
fn route(device: &Found, destination: u32) -> bool {
    let Some(controllers) = crate::interrupt::io_apics() else {
        return false;
    };
    let routed = controllers.route(Route {
        gsi: device.gsi,
        vector: device.vector,
        destination,
        trigger: Trigger::Edge,
        polarity: Polarity::ActiveHigh,
    });
    if let Err(why) = routed {
        log::warn!("devices: virtio-{} on transport {}: {why}", kind_name(device.kind), device.slot);
    }
    routed.is_ok()
}

/// A device kind's name in Linux's `/sys/bus/virtio` style.
pub fn kind_name(kind: DeviceType) -> &'static str {
    match kind {
        DeviceType::_9P => "9p",
        DeviceType::Network => "net",
        DeviceType::Block => "blk",
        DeviceType::Console => "console",
        DeviceType::EntropySource => "rng",
        DeviceType::Socket => "vsock",
        DeviceType::GPU => "gpu",
        DeviceType::Input => "input",
        _ => "other",
    }
}

/// `/proc/reef/devices`: the I/O APICs and every device this instance owns, one line each.
/// Written on the instance that owns them (the file service runs there).
pub fn write_view(out: &mut dyn Write) -> ::core::fmt::Result {
    writeln!(out, "owner: core {} (APIC id {})", crate::interrupt::DEVICE_OWNER, apic::local().id())?;
    if let Some(controllers) = crate::interrupt::io_apics() {
        for io_apic in controllers.iter() {
            writeln!(
                out,
                "I/O APIC {}: GSIs {}-{}",
                io_apic.id,
                io_apic.gsi_base,
                io_apic.gsi_base + io_apic.inputs - 1
            )?;
        }
    }
    writeln!(out, "slot  address      kind       gsi  vector  interrupts  detail")?;
    for device in FOUND.lock().iter() {
        writeln!(
            out,
            "{:<5} {:#011x}  virtio-{:<3}  {:<4} {:<7} {:<11} {}",
            device.slot,
            device.address,
            kind_name(device.kind),
            device.gsi,
            device.vector,
            interrupts_of(device.slot),
            device.detail
        )?;
    }
    for share in ninep::shares() {
        writeln!(
            out,
            "9p {} (transport {}): {}, {} requests, {} timed out, {} bad replies",
            share.tag,
            share.slot,
            match (&share.mount_point, share.available) {
                (Some(path), true) => alloc::format!("for {path}, not mounted yet"),
                (Some(path), false) => alloc::format!("mounted at {path}"),
                (None, _) => String::from("no mount point"),
            },
            share.requests,
            share.timeouts,
            share.bad_replies
        )?;
    }
    Ok(())
}
