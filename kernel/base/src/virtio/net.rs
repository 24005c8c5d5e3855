//! A virtio-net device's two queues, with frames only in pages this module owns.
//!
//! `virtio-drivers`' raw driver (`VirtIONetRaw`) puts buffers on the queues and takes them
//! back; which memory it lends the device is the caller's promise, so that promise is kept
//! here: every receive and transmit buffer is a 2 KiB slot of this module's own DMA pages, a
//! slot the device holds is never read or written by Rust code, and a slot goes back to the
//! driver only with the buffer it was lent as. The network stack above (safe code, in the
//! file service) sees a frame as a slice for the length of a closure.

use super::{BouncePages, Error, MmioTransport, QueueError, ReefHal};
use crate::arch::paging::PAGE_SIZE;
use core::mem::ManuallyDrop;
use virtio_drivers::device::net::VirtIONetRaw;

/// Bytes of a slot: a frame of 1514 bytes (no segmentation offloads are negotiated) behind the
/// device's header of 10 or 12 bytes.
pub const SLOT_BYTES: usize = 2048;
/// Slots per queue, and the queues' size.
pub const SLOTS: usize = 64;
const _: () = assert!(SLOTS <= 64 && SLOTS.is_power_of_two());

/// What the device did, for `/proc/reef/net`.
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketCounts {
    pub received: u64,
    pub received_bytes: u64,
    pub transmitted: u64,
    pub transmitted_bytes: u64,
    /// Frames the device gave back that did not fit their slot or a token no slot had.
    pub bad: u64,
    /// Frames the stack wanted to send while every transmit slot was the device's.
    pub transmit_full: u64,
}

/// A virtio-net device with its receive slots all lent to the device and its transmit slots
/// lent while a frame is in flight.
pub struct PacketDevice {
    // Dropped first, by hand (see `Drop`): the reset stops the device using the slots.
    driver: ManuallyDrop<VirtIONetRaw<ReefHal, MmioTransport<'static>, SLOTS>>,
    receive: ManuallyDrop<BouncePages>,
    transmit: ManuallyDrop<BouncePages>,
    /// The receive slot lent under each token (a token is the descriptor's index, < SLOTS).
    lent: [Option<u8>; SLOTS],
    /// The transmit slot and frame length in flight under each token.
    in_flight: [Option<(u8, u16)>; SLOTS],
    /// Transmit slots free (bit `n`: slot `n`).
    free: u64,
    broken: bool,
    counts: PacketCounts,
}

// SAFETY: the slots are frames of this instance reached only through this value (`&mut self`
// for every use); the transport's registers are this instance's mapping. A thread of the
// device owner may hold it.
unsafe impl Send for PacketDevice {}

impl PacketDevice {
    /// Brings the device up on `transport` and lends it every receive slot.
    pub fn new(transport: MmioTransport<'static>) -> Result<Self, QueueError> {
        let driver = VirtIONetRaw::new(transport).map_err(QueueError::Driver)?;
        let pages = (SLOTS * SLOT_BYTES).div_ceil(PAGE_SIZE as usize);
        let mut device = Self {
            driver: ManuallyDrop::new(driver),
            receive: ManuallyDrop::new(BouncePages::new(pages)?),
            transmit: ManuallyDrop::new(BouncePages::new(pages)?),
            lent: [None; SLOTS],
            in_flight: [None; SLOTS],
            free: if SLOTS == 64 { u64::MAX } else { (1 << SLOTS) - 1 },
            broken: false,
            counts: PacketCounts::default(),
        };
        for slot in 0..SLOTS as u8 {
            device.lend(slot)?;
        }
        Ok(device)
    }

    /// The device's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.driver.mac_address()
    }

    /// What it did so far.
    pub fn counts(&self) -> PacketCounts {
        self.counts
    }

    /// Acknowledges the device's interrupt (thread context, before looking at the queues).
    pub fn acknowledge(&mut self) {
        let _ = self.driver.ack_interrupt();
    }

    /// Receive slot `slot`, `SLOT_BYTES` long.
    ///
    /// # Safety
    ///
    /// The device does not hold the slot, or the slice only goes to the driver (to lend it, or
    /// to take it back with the same bounds), never read or written by Rust code meanwhile.
    unsafe fn receive_slot<'a>(&self, slot: u8) -> &'a mut [u8] {
        // SAFETY: slot < SLOTS lies inside the receive pages, which live as long as `self`
        // (the caller uses the slice no longer); aliasing as the caller promises.
        unsafe {
            core::slice::from_raw_parts_mut(self.receive.pointer.as_ptr().add(slot as usize * SLOT_BYTES), SLOT_BYTES)
        }
    }

    /// Transmit slot `slot`, as [`Self::receive_slot`].
    ///
    /// # Safety
    ///
    /// As for [`Self::receive_slot`].
    unsafe fn transmit_slot<'a>(&self, slot: u8) -> &'a mut [u8] {
        // SAFETY: as `receive_slot`, in the transmit pages.
        unsafe {
            core::slice::from_raw_parts_mut(self.transmit.pointer.as_ptr().add(slot as usize * SLOT_BYTES), SLOT_BYTES)
        }
    }

    /// Lends receive slot `slot` to the device.
    fn lend(&mut self, slot: u8) -> Result<(), QueueError> {
        // SAFETY: the device does not hold `slot` (it was just taken back, or never lent); the
        // slice goes to the driver only.
        let buffer = unsafe { self.receive_slot(slot) };
        // SAFETY: the slot stays allocated and untouched until `receive` takes it back with
        // the same slice (`lent` records it; `Drop` resets the device before freeing it).
        let token = unsafe { self.driver.receive_begin(buffer) }.map_err(QueueError::Driver)?;
        let entry = self.lent.get_mut(token as usize).ok_or(QueueError::WrongToken)?;
        *entry = Some(slot);
        Ok(())
    }

    /// The oldest frame the device received, given to `consume` (its slot is lent again
    /// after); `None` when there is none, or the device misbehaved (counted in `bad`).
    pub fn receive<R>(&mut self, consume: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if self.broken {
            return None;
        }
        let token = self.driver.poll_receive()?;
        let Some(slot) = self.lent.get_mut(token as usize).and_then(Option::take) else {
            // A token no slot was lent under: the queue cannot be trusted any more.
            self.counts.bad += 1;
            self.broken = true;
            return None;
        };
        // SAFETY: the same slice this slot was lent as; the device gave it back (its token is
        // on the used ring).
        let buffer = unsafe { self.receive_slot(slot) };
        // SAFETY: `buffer` is the one `receive_begin` was given for `token`.
        let taken = unsafe { self.driver.receive_complete(token, buffer) };
        let result = match taken {
            Ok((header, length)) if header + length <= SLOT_BYTES => {
                self.counts.received += 1;
                self.counts.received_bytes += length as u64;
                // SAFETY: the device no longer holds the slot; nothing else reaches it.
                let frame = unsafe { self.receive_slot(slot) };
                Some(consume(&frame[header..header + length]))
            }
            _ => {
                self.counts.bad += 1;
                None
            }
        };
        if self.lend(slot).is_err() {
            self.broken = true;
        }
        result
    }

    /// Takes back the transmit slots the device is done with.
    fn reclaim(&mut self) {
        while let Some(token) = self.driver.poll_transmit() {
            let Some((slot, length)) = self.in_flight.get_mut(token as usize).and_then(Option::take) else {
                self.counts.bad += 1;
                self.broken = true;
                return;
            };
            // SAFETY: the slot was lent as exactly this slice under `token`.
            let buffer = unsafe { self.transmit_slot(slot) };
            // SAFETY: `buffer[..length]` is what `transmit_begin` was given for `token`.
            if unsafe { self.driver.transmit_complete(token, &buffer[..length as usize]) }.is_err() {
                self.broken = true;
                return;
            }
            self.free |= 1 << slot;
        }
    }

    /// Whether a frame can be sent now (a transmit slot is free).
    pub fn can_transmit(&mut self) -> bool {
        self.reclaim();
        !self.broken && self.free != 0 && self.driver.can_send()
    }

    /// Sends a frame of `length` bytes that `fill` writes. `Err` when no slot is free (the
    /// frame is not sent; `fill` is not called) or the frame is longer than a slot holds.
    pub fn transmit<R>(&mut self, length: usize, fill: impl FnOnce(&mut [u8]) -> R) -> Result<R, Error> {
        if !self.can_transmit() {
            self.counts.transmit_full += 1;
            return Err(Error::QueueFull);
        }
        let slot = self.free.trailing_zeros() as u8;
        // SAFETY: a free slot: the device does not hold it.
        let buffer = unsafe { self.transmit_slot(slot) };
        let header = self.driver.fill_buffer_header(buffer)?;
        if header + length > SLOT_BYTES {
            return Err(Error::InvalidParam);
        }
        let result = fill(&mut buffer[header..header + length]);
        // SAFETY: the slot is marked busy below and not touched until `reclaim` takes it back
        // with the same slice.
        let token = unsafe { self.driver.transmit_begin(&buffer[..header + length]) }?;
        let Some(entry) = self.in_flight.get_mut(token as usize) else {
            self.broken = true;
            return Err(Error::WrongToken);
        };
        *entry = Some((slot, (header + length) as u16));
        self.free &= !(1 << slot);
        self.counts.transmitted += 1;
        self.counts.transmitted_bytes += length as u64;
        Ok(result)
    }
}

impl Drop for PacketDevice {
    fn drop(&mut self) {
        // SAFETY: dropped once, here: the driver unsets the queues and its transport resets
        // the device, which then holds none of the slots, so they can be freed after.
        unsafe {
            ManuallyDrop::drop(&mut self.driver);
            ManuallyDrop::drop(&mut self.receive);
            ManuallyDrop::drop(&mut self.transmit);
        }
    }
}
