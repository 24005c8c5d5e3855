//! virtio-mmio for the device owner: `virtio-drivers`' `Hal`, the transports, and a request
//! queue whose buffers only the device and this module touch.
//!
//! What needs `unsafe` is here, behind checks: a transport exists only on the instance that
//! maps the window (the device owner), once per slot; a request's buffers are bounce pages
//! this module owns, so the device never writes a caller's memory, and a request the device
//! never finishes leaves its pages lent to the device for good (leaked, never reused) rather
//! than freed under it. The drivers themselves (`kernel/src/dev`) are safe code.

use crate::arch::paging::{physical_to_virtual, DIRECT_MAP_BASE, PAGE_SIZE};
use crate::interrupt::DEVICE_OWNER;
use crate::mm::frames;
use crate::percore::shared;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use platform::virtio::{Transports, MAX_TRANSPORTS};
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::mmio::{MmioError, VirtIOHeader};
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

pub mod net;

pub use virtio_drivers::transport::mmio::{MmioTransport, MmioVersion};
pub use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
pub use virtio_drivers::Error;

/// The machine's virtio-mmio transports (microvm's window; `platform::virtio`).
pub fn transports() -> Transports {
    Transports::of_microvm(&shared::facts().io_apics)
}

/// Feature bits as the device offers them: every bit is known, so `Transport::begin_init`
/// keeps device-specific ones (a 9P device's `MOUNT_TAG`, bit 0), which
/// `virtio_drivers::device::common::Feature` would drop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeatureBits(u64);

bitflags::bitflags! {
    impl FeatureBits: u64 {
        /// Transport bit 32: the device is virtio 1.0 or later (not legacy).
        const VERSION_1 = 1 << 32;
        const _ = !0;
    }
}

/// `virtio-drivers`' platform layer: DMA from this instance's partition, through the direct map.
pub struct ReefHal;

/// The physical address of `pointer`, which must lie in this instance's direct map (the DMA
/// pages do: they are frames of its partition).
fn direct_map_physical(pointer: *const u8) -> PhysAddr {
    let address = pointer as u64;
    assert!(
        (DIRECT_MAP_BASE..crate::arch::paging::BOOT_WINDOW_BASE).contains(&address),
        "a virtio buffer outside the direct map: only bounce pages are given to devices"
    );
    address - DIRECT_MAP_BASE
}

// SAFETY: `dma_alloc` returns frames of this instance's partition, taken from its allocator
// (so they alias nothing else), zeroed, page-aligned, physically contiguous, at their direct
// map address; `dma_dealloc` gives the same frames back; `share` gives the physical address
// of a direct-map buffer, which a device without an IOMMU uses as is.
unsafe impl Hal for ReefHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        match frames::allocate_contiguous_zeroed(pages as u64) {
            Ok(first) => {
                let pointer = NonNull::new(physical_to_virtual(first) as *mut u8).expect("the direct map is not at 0");
                (first, pointer)
            }
            // `Dma::new` reads a physical address of 0 as the failure.
            Err(_) => (0, NonNull::dangling()),
        }
    }

    unsafe fn dma_dealloc(paddr: PhysAddr, _vaddr: NonNull<u8>, pages: usize) -> i32 {
        let mut status = 0;
        for page in 0..pages as u64 {
            if frames::free(paddr + page * PAGE_SIZE).is_err() {
                status = -1;
            }
        }
        status
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        // Only the PCI transport asks; the direct map is where this instance maps device pages.
        NonNull::new(physical_to_virtual(paddr) as *mut u8).expect("the direct map is not at 0")
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        direct_map_physical(buffer.as_ptr().cast::<u8>())
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}

/// What a transport slot holds.
pub enum Probe {
    /// A device, its transport ready for its driver.
    Device(MmioTransport<'static>),
    /// No device behind it (device id 0).
    Empty,
    /// Something that is not a transport Reef can drive (bad magic, unknown version or device).
    Refused(MmioError),
}

/// Why a slot could not be probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeError {
    /// This instance does not own the devices: it maps no transport.
    NotTheOwner,
    /// The machine has no such transport.
    NoSuchSlot(usize),
    /// A driver holds this slot's transport already.
    Taken(usize),
}

/// Slots whose transport a driver holds (bit `n`: slot `n`); this instance's own (.bss).
static TAKEN: AtomicU32 = AtomicU32::new(0);
const _: () = assert!(MAX_TRANSPORTS <= 32);

/// Looks at transport `slot` and, if a device is there, hands its transport over (once).
pub fn probe(slot: usize) -> Result<Probe, ProbeError> {
    if shared::this_core() != DEVICE_OWNER {
        return Err(ProbeError::NotTheOwner);
    }
    let transports = transports();
    if slot >= transports.count {
        return Err(ProbeError::NoSuchSlot(slot));
    }
    let bit = 1 << slot;
    if TAKEN.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
        return Err(ProbeError::Taken(slot));
    }
    let header = NonNull::new(physical_to_virtual(transports.address(slot)) as *mut VirtIOHeader)
        .expect("the direct map is not at 0");
    // SAFETY: 1. the boot driver maps the whole window uncached for the device owner
    // (`core::boot_driver`), this is the device owner, and the mapping lives as long as the
    // instance ('static); 2. `slot` is inside the window and 512-byte aligned, the transport's
    // registers and configuration space; 3. `TAKEN` makes this the only transport of the slot.
    match unsafe { MmioTransport::new(header, platform::virtio::TRANSPORT_SIZE as usize) } {
        Ok(transport) => Ok(Probe::Device(transport)),
        Err(error) => {
            TAKEN.fetch_and(!bit, Ordering::AcqRel);
            Ok(match error {
                MmioError::InvalidDeviceID(virtio_drivers::transport::DeviceTypeError::InvalidDeviceType(0)) => {
                    Probe::Empty
                }
                other => Probe::Refused(other),
            })
        }
    }
}

/// Why a request could not be queued or finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueError {
    /// A request is on the queue already (one at a time).
    Busy,
    /// An earlier request never finished: its pages stay lent to the device, the queue is
    /// unusable.
    Broken,
    /// The request or reply is empty, or larger than the bounce pages.
    TooLarge { length: usize, capacity: usize },
    /// The device gave back another request than the one in flight.
    WrongToken,
    /// `virtio-drivers` refused (queue full, DMA memory short).
    Driver(Error),
}

/// One request in flight: its descriptor chain's head and its buffers' lengths.
#[derive(Clone, Copy)]
struct InFlight {
    token: u16,
    request_length: usize,
    reply_capacity: usize,
}

/// Contiguous zeroed pages of this instance for one direction of a request, freed on drop.
pub(crate) struct BouncePages {
    physical: PhysAddr,
    pointer: NonNull<u8>,
    pages: usize,
}

// SAFETY: the pages are frames of this instance, reached only through the `RequestQueue` that
// owns them (by `&mut self` to write, `&self` to copy out while the device holds none of
// them); a thread of this instance may hold that queue, and no other instance maps them.
unsafe impl Send for BouncePages {}

impl BouncePages {
    pub(crate) fn new(pages: usize) -> Result<Self, QueueError> {
        let (physical, pointer) = ReefHal::dma_alloc(pages, BufferDirection::Both);
        if physical == 0 {
            return Err(QueueError::Driver(Error::DmaError));
        }
        Ok(Self { physical, pointer, pages })
    }
}

impl Drop for BouncePages {
    fn drop(&mut self) {
        // SAFETY: allocated by `dma_alloc` with these values, freed once (here).
        let _ = unsafe { ReefHal::dma_dealloc(self.physical, self.pointer, self.pages) };
    }
}

/// A virtqueue carrying one request at a time, through bounce pages: a device-readable
/// request and a device-writable reply of at most [`Self::capacity`] bytes each.
pub struct RequestQueue<const SIZE: usize> {
    // Dropped only when no request is in flight (see `Drop`).
    queue: ManuallyDrop<VirtQueue<ReefHal, SIZE>>,
    index: u16,
    request: ManuallyDrop<BouncePages>,
    reply: ManuallyDrop<BouncePages>,
    capacity: usize,
    in_flight: Option<InFlight>,
    broken: bool,
}

impl<const SIZE: usize> RequestQueue<SIZE> {
    /// Sets up queue `index` of `transport` (between `begin_init` and `finish_init`), with
    /// bounce pages for requests and replies of up to `capacity` bytes.
    pub fn new(transport: &mut impl Transport, index: u16, capacity: usize) -> Result<Self, QueueError> {
        let pages = capacity.div_ceil(PAGE_SIZE as usize).max(1);
        let request = BouncePages::new(pages)?;
        let reply = BouncePages::new(pages)?;
        // Without indirect descriptors (they would be heap memory the device reads) and
        // without event indices (a request at a time needs no notification suppression).
        let queue = VirtQueue::new(transport, index, false, false).map_err(QueueError::Driver)?;
        Ok(Self {
            queue: ManuallyDrop::new(queue),
            index,
            request: ManuallyDrop::new(request),
            reply: ManuallyDrop::new(reply),
            capacity: pages * PAGE_SIZE as usize,
            in_flight: None,
            broken: false,
        })
    }

    /// The largest request, and the largest reply, it carries.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether a request is on the queue.
    pub fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Copies `request` into the bounce pages, puts it on the queue with a reply buffer of
    /// `reply_capacity` bytes, and notifies the device if it asks for notifications.
    pub fn submit(
        &mut self,
        transport: &mut impl Transport,
        request: &[u8],
        reply_capacity: usize,
    ) -> Result<(), QueueError> {
        if self.broken {
            return Err(QueueError::Broken);
        }
        if self.in_flight.is_some() {
            return Err(QueueError::Busy);
        }
        for length in [request.len(), reply_capacity] {
            if length == 0 || length > self.capacity {
                return Err(QueueError::TooLarge { length, capacity: self.capacity });
            }
        }
        // SAFETY: no request is in flight, so the device does not use the request pages; they
        // hold `capacity` bytes, at least `request.len()`.
        unsafe {
            core::ptr::copy_nonoverlapping(request.as_ptr(), self.request.pointer.as_ptr(), request.len());
        }
        // SAFETY: used for this `add` only; both lengths were checked against the capacity.
        let (inputs, outputs) = unsafe { self.buffers(request.len(), reply_capacity) };
        // SAFETY: the buffers are this queue's bounce pages, which stay allocated and untouched
        // by anything but the device until `poll` pops this token (`submit` and `copy_reply`
        // refuse while a request is in flight, and `Drop` leaks them if it never completes).
        let token = unsafe { self.queue.add(&[inputs], &mut [outputs]) }.map_err(QueueError::Driver)?;
        self.in_flight = Some(InFlight { token, request_length: request.len(), reply_capacity });
        if self.queue.should_notify() {
            transport.notify(self.index);
        }
        Ok(())
    }

    /// The bounce pages as the buffers `add` and `pop_used` are given.
    ///
    /// # Safety
    ///
    /// The slices are used only for one `add` or `pop_used` call on this queue, while it lives
    /// (their lifetime is not tied to it), and the lengths are at most the capacity.
    unsafe fn buffers<'a>(&self, request_length: usize, reply_capacity: usize) -> (&'a [u8], &'a mut [u8]) {
        // SAFETY: both regions are this queue's own DMA pages of `capacity` bytes, live while
        // the queue is (the caller's promise covers the use); `virtio-drivers` only takes their
        // addresses and lengths (the device, not Rust code, reads and writes the bytes).
        unsafe {
            (
                core::slice::from_raw_parts(self.request.pointer.as_ptr(), request_length),
                core::slice::from_raw_parts_mut(self.reply.pointer.as_ptr(), reply_capacity),
            )
        }
    }

    /// Whether the device has given a request back (a look at the used ring, no register access).
    pub fn finished(&self) -> bool {
        self.in_flight.is_some() && self.queue.can_pop()
    }

    /// The request in flight, once the device gave it back: the length the device says it
    /// wrote into the reply buffer and the capacity that buffer had. `None` while it works.
    pub fn poll(&mut self) -> Option<Result<(u32, usize), QueueError>> {
        let in_flight = self.in_flight?;
        if !self.queue.can_pop() {
            return None;
        }
        // SAFETY: used for this `pop_used` only; the lengths `submit` checked.
        let (inputs, outputs) = unsafe { self.buffers(in_flight.request_length, in_flight.reply_capacity) };
        // SAFETY: the same buffers `submit` gave `add` for this token.
        let popped = unsafe { self.queue.pop_used(in_flight.token, &[inputs], &mut [outputs]) };
        Some(match popped {
            Ok(used) => {
                self.in_flight = None;
                Ok((used, in_flight.reply_capacity))
            }
            Err(Error::WrongToken) => {
                self.broken = true;
                Err(QueueError::WrongToken)
            }
            Err(error) => Err(QueueError::Driver(error)),
        })
    }

    /// Gives up on the request in flight (the device did not answer in time): its pages stay
    /// the device's, and the queue takes no more requests.
    pub fn abandon(&mut self) {
        if self.in_flight.is_some() {
            self.broken = true;
        }
    }

    /// Whether an abandoned or wrongly returned request made the queue unusable.
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// Copies the first `out.len()` bytes of the last reply out (no request in flight; at most
    /// the capacity). The number of bytes copied.
    pub fn copy_reply(&self, out: &mut [u8]) -> usize {
        if self.in_flight.is_some() || self.broken {
            return 0;
        }
        let length = out.len().min(self.capacity);
        // SAFETY: no request is in flight, so the device does not write the reply pages; they
        // hold `capacity` bytes.
        unsafe { core::ptr::copy_nonoverlapping(self.reply.pointer.as_ptr(), out.as_mut_ptr(), length) };
        length
    }
}

impl<const SIZE: usize> Drop for RequestQueue<SIZE> {
    fn drop(&mut self) {
        if self.in_flight.is_some() {
            // The device may still read the rings and write the reply pages: leave them
            // allocated for good rather than free memory a device holds.
            return;
        }
        // SAFETY: dropped once, here, and not used after; no request is in flight, so the
        // device holds none of the pages (its rings are idle until someone notifies it).
        unsafe {
            ManuallyDrop::drop(&mut self.queue);
            ManuallyDrop::drop(&mut self.request);
            ManuallyDrop::drop(&mut self.reply);
        }
    }
}
