//! The virtio-net device: found at boot, brought up with every receive slot lent to it, and
//! handed once to the network stack (the file service's, [`take`]), which polls it in thread
//! context. Its interrupt only tells the stack to look ([`register_listener`]); the stack
//! then takes every frame waiting, so one interrupt may carry many frames (Popcorn's
//! mitigation: `/proc/reef/net` reports frames per interrupt).
#![deny(unsafe_code)]

use crate::virtio::net::PacketDevice;
use crate::virtio::MmioTransport;
use ::core::fmt::Write;
use alloc::string::String;
use spin::{Mutex, Once};

/// The device, until the stack takes it.
static DEVICE: Mutex<Option<(usize, PacketDevice)>> = Mutex::new(None);

/// Who hears the device's interrupt: the stack's, registered when it starts (the device sits
/// below the file service and names none of it).
static LISTENER: Once<fn()> = Once::new();

/// The transport slot of the network device, once one was brought up.
static SLOT: Once<usize> = Once::new();

/// Brings up the network device on `transport` (boot, on the device owner); `detail` says
/// what happened, for the boot log and `/proc/reef/devices`.
pub fn start(slot: usize, transport: MmioTransport<'static>, detail: &mut String) {
    if SLOT.get().is_some() {
        let _ = write!(detail, "a second network device: Reef drives one, this one is left alone");
        return;
    }
    match PacketDevice::new(transport) {
        Ok(device) => {
            let mac = device.mac();
            let _ = write!(
                detail,
                "MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {} receive and {} transmit slots",
                mac[0],
                mac[1],
                mac[2],
                mac[3],
                mac[4],
                mac[5],
                crate::virtio::net::SLOTS,
                crate::virtio::net::SLOTS
            );
            SLOT.call_once(|| slot);
            *DEVICE.lock() = Some((slot, device));
        }
        Err(why) => {
            let _ = write!(detail, "not brought up: {why:?}");
        }
    }
}

/// The network device, for the stack that drives it (once; `None` without one).
pub fn take() -> Option<PacketDevice> {
    DEVICE.lock().take().map(|(_, device)| device)
}

/// Registers what the device's interrupt calls (in interrupt context: it must only note that
/// the stack has work).
pub fn register_listener(listener: fn()) {
    LISTENER.call_once(|| listener);
}

/// From `dev::on_interrupt`: the interrupt of slot `slot` came.
pub(super) fn on_interrupt(slot: usize) {
    if SLOT.get() == Some(&slot) {
        if let Some(listener) = LISTENER.get() {
            listener();
        }
    }
}

/// Interrupts the network device raised so far.
pub fn interrupts() -> u64 {
    SLOT.get().map_or(0, |slot| super::interrupts_of(*slot))
}
