//! The virtio-9p transport: a host directory's 9P server (QEMU's `-fsdev` and
//! `virtio-9p-device`), one request at a time on the device's one queue.
//!
//! `virtio-drivers` 0.13 has a 9P driver, `VirtIO9p`, but it waits for the reply by spinning
//! with no bound; this one halts until the device's interrupt, gives `EIO` after
//! [`REPLY_TIMEOUT_MS`], and checks and counts what the device hands back (`platform::virtio`).
//! The file service holds a [`NinePDevice`] per mount ([`take_for`]) and speaks 9P2000.L
//! over [`NinePDevice::call`]; the wire format is not this room's concern.
#![deny(unsafe_code)]

use crate::core::shared;
use crate::virtio::{FeatureBits, MmioTransport, QueueError, RequestQueue, Transport};
use ::core::fmt::Write;
use ::core::sync::atomic::{AtomicU64, Ordering};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use platform::virtio::nine_p;
use spin::Mutex;

/// The largest request and reply a call must carry: a 128 KiB `Tread` or `Twrite` and its
/// header (`vfs::SHARE_MESSAGE_SIZE`); the queue rounds it up to pages (33, twice per device,
/// from instance 0's memory) and [`NinePDevice::max_message_size`] says what it carries.
pub const MAX_MESSAGE_SIZE: usize = 128 * 1024 + 24;
/// How long a call waits for the device before it gives `EIO` and the device is given up.
pub const REPLY_TIMEOUT_MS: u64 = 5_000;
/// Descriptors of the request queue: a call needs two (request, reply); QEMU offers 128.
const QUEUE_SIZE: usize = 4;

/// What a device did, for `/proc/reef/devices` (shared with the registry, so the counts stay
/// visible while the file service holds the device).
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    /// Calls that got no reply in [`REPLY_TIMEOUT_MS`].
    pub timeouts: AtomicU64,
    /// Replies refused (too long, a used length past the buffer, inconsistent sizes).
    pub bad_replies: AtomicU64,
}

/// A 9P share's device: its mount tag and its request queue.
pub struct NinePDevice {
    tag: String,
    mount_point: Option<String>,
    // Declared before the queue: dropped first, its reset makes the device let go of the
    // queue's pages before they are freed.
    transport: MmioTransport<'static>,
    queue: RequestQueue<QUEUE_SIZE>,
    counters: Arc<Counters>,
}

#[cfg_attr(not(feature = "test-hooks"), allow(dead_code, reason = "`tag` and `mount_point`: the in-guest test asks"))]
impl NinePDevice {
    /// The device's mount tag (QEMU's `mount_tag=`).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Where the command line (`share=TAG:/mountpoint`) says its files appear, if it does.
    pub fn mount_point(&self) -> Option<&str> {
        self.mount_point.as_deref()
    }

    /// The largest request and reply [`Self::call`] carries (a 9P `msize` at most this).
    pub fn max_message_size(&self) -> usize {
        self.queue.capacity()
    }

    /// Sends one 9P message and waits for the reply: `request` goes to the device as it is
    /// (device-readable), the reply is written into `reply` (device-writable, at most
    /// [`Self::max_message_size`] bytes of it used); its length on success. The core halts
    /// until the device's interrupt and nothing else runs on it meanwhile.
    ///
    /// Errors are Linux errnos: `EINVAL` for an empty request or a reply buffer shorter than a
    /// 9P header, `EMSGSIZE` for a request larger than the transport carries, `EIO` for device
    /// trouble (no reply within [`REPLY_TIMEOUT_MS`], after which the device is given up; a
    /// reply longer than the buffer, or a used length past it, counted in `bad_replies`).
    pub fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, u32> {
        if request.is_empty() || reply.len() < nine_p::HEADER_SIZE {
            return Err(errno::EINVAL);
        }
        if request.len() > self.queue.capacity() {
            return Err(errno::EMSGSIZE);
        }
        let capacity = reply.len().min(self.queue.capacity());
        // A status left from before (a configuration change) would hold the line high and
        // hide the next rising edge.
        self.transport.ack_interrupt();
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        self.queue.submit(&mut self.transport, request, capacity).map_err(|error| self.trouble(error))?;
        let deadline = crate::time::deadline_after_ms(REPLY_TIMEOUT_MS);
        let queue = &self.queue;
        if !crate::time::halt_until(deadline, || queue.finished()) {
            self.queue.abandon();
            self.counters.timeouts.fetch_add(1, Ordering::Relaxed);
            log::error!(
                "devices: virtio-9p `{}` did not answer in {REPLY_TIMEOUT_MS} ms: its calls fail with EIO from now on",
                self.tag
            );
            return Err(errno::EIO);
        }
        // Lowers the line, so the next completion is a new edge.
        self.transport.ack_interrupt();
        let (used, capacity) = match self.queue.poll() {
            Some(Ok(done)) => done,
            Some(Err(error)) => return Err(self.trouble(error)),
            None => return Err(errno::EIO),
        };
        let copied = self.queue.copy_reply(&mut reply[..capacity.min(used as usize)]);
        nine_p::check_reply(used, capacity, &reply[..copied]).map_err(|why| {
            self.counters.bad_replies.fetch_add(1, Ordering::Relaxed);
            log::warn!("devices: virtio-9p `{}`: reply refused: {why}", self.tag);
            errno::EIO
        })
    }

    fn trouble(&self, error: QueueError) -> u32 {
        match error {
            QueueError::TooLarge { .. } => errno::EMSGSIZE,
            QueueError::WrongToken => {
                self.counters.bad_replies.fetch_add(1, Ordering::Relaxed);
                log::warn!("devices: virtio-9p `{}` gave back a request it was not given", self.tag);
                errno::EIO
            }
            _ => errno::EIO,
        }
    }
}

/// A share the owner found: its device until the file service takes it.
struct Entry {
    slot: usize,
    tag: String,
    mount_point: Option<String>,
    device: Option<NinePDevice>,
    counters: Arc<Counters>,
}

/// The 9P devices of this instance, in slot order (only the device owner has any).
static SHARES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// What a share is, for whoever mounts or lists it.
#[derive(Clone, Debug)]
pub struct Share {
    pub slot: usize,
    pub tag: String,
    /// From `share=TAG:/mountpoint`; `None`: the command line names no mount point for it.
    pub mount_point: Option<String>,
    /// Whether its device is still here (not taken by [`take`]).
    pub available: bool,
    /// Calls so far, calls that timed out, replies refused.
    pub requests: u64,
    pub timeouts: u64,
    pub bad_replies: u64,
}

/// The shares found at boot (on the instance that owns the devices; empty elsewhere).
pub fn shares() -> Vec<Share> {
    SHARES
        .lock()
        .iter()
        .map(|entry| Share {
            slot: entry.slot,
            tag: entry.tag.clone(),
            mount_point: entry.mount_point.clone(),
            available: entry.device.is_some(),
            requests: entry.counters.requests.load(Ordering::Relaxed),
            timeouts: entry.counters.timeouts.load(Ordering::Relaxed),
            bad_replies: entry.counters.bad_replies.load(Ordering::Relaxed),
        })
        .collect()
}

/// Hands over the device tagged `tag` (once: the caller holds it from then on).
#[allow(
    dead_code,
    reason = "the file service takes its devices by mount point (`take_for`); by tag is for a mount by hand"
)]
pub fn take(tag: &str) -> Option<NinePDevice> {
    SHARES.lock().iter_mut().find(|entry| entry.tag == tag)?.device.take()
}

/// Hands over the device to mount at `mount_point` (`share=TAG:/mountpoint`), once.
pub fn take_for(mount_point: &str) -> Option<NinePDevice> {
    SHARES.lock().iter_mut().find(|entry| entry.mount_point.as_deref() == Some(mount_point))?.device.take()
}

/// Runs `work` on the device tagged `tag` while it is still here (a test of the transport).
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code, reason = "only the in-guest test borrows a device"))]
pub fn with_device<T>(tag: &str, work: impl FnOnce(&mut NinePDevice) -> T) -> Option<T> {
    let mut shares = SHARES.lock();
    let device = shares.iter_mut().find(|entry| entry.tag == tag)?.device.as_mut()?;
    Some(work(device))
}

/// Brings up the 9P device in `slot` (`dev::probe_all`): features, mount tag, queue, then
/// `DRIVER_OK`; says in `detail` what it is. A device that cannot be brought up is reset (its
/// transport dropped) and named in `detail`.
pub(super) fn start(slot: usize, mut transport: MmioTransport<'static>, detail: &mut String) {
    let wanted = FeatureBits::VERSION_1 | FeatureBits::from_bits_retain(nine_p::FEATURE_MOUNT_TAG);
    let features = transport.begin_init(wanted);
    if !features.contains(FeatureBits::from_bits_retain(nine_p::FEATURE_MOUNT_TAG)) {
        let _ = write!(detail, "not used: the device offers no mount tag");
        return;
    }
    let tag = match read_tag(&transport) {
        Ok(tag) => tag,
        Err(why) => {
            let _ = write!(detail, "not used: {why}");
            return;
        }
    };
    let queue = match RequestQueue::<QUEUE_SIZE>::new(&mut transport, 0, MAX_MESSAGE_SIZE) {
        Ok(queue) => queue,
        Err(why) => {
            let _ = write!(detail, "tag `{tag}` not used: its queue: {why:?}");
            return;
        }
    };
    transport.finish_init();
    let mount_point = shared::facts().options.shares.mount_point_of(&tag).map(String::from);
    match &mount_point {
        Some(path) => {
            let _ = write!(detail, "tag `{tag}`, mount point {path}");
        }
        None => {
            let _ = write!(detail, "tag `{tag}`, no mount point (the command line has no share={tag}:/path)");
        }
    }
    let counters = Arc::new(Counters::default());
    let device = NinePDevice {
        tag: tag.clone(),
        mount_point: mount_point.clone(),
        transport,
        queue,
        counters: counters.clone(),
    };
    SHARES.lock().push(Entry { slot, tag, mount_point, device: Some(device), counters });
}

/// The mount tag from the configuration space: `le16 tag_len`, then the bytes.
fn read_tag(transport: &MmioTransport<'static>) -> Result<String, String> {
    let length: u16 = transport.read_config_space(0).map_err(|e| alloc::format!("its configuration: {e}"))?;
    let length = nine_p::tag_length(length).map_err(|e| alloc::format!("{e}"))?;
    let mut bytes = Vec::with_capacity(length);
    for offset in 0..length {
        bytes
            .push(transport.read_config_space::<u8>(2 + offset).map_err(|e| alloc::format!("its configuration: {e}"))?);
    }
    nine_p::tag(&bytes).map(String::from).map_err(|e| alloc::format!("{e}"))
}
