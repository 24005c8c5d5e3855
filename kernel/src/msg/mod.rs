//! Kernel side of channels: receive queues, URPC pairs and multicast groups in the shared
//! region; the handler registry with priorities; notification; per-core counters.
//!
//! Every core owns two many-to-one receive queues (high and normal priority, Popcorn fig. 5.1)
//! and one URPC ring from every other core. A receiver copies each message out, validates it
//! and only then dispatches it to the handler registered for its kind; anything malformed or
//! unknown is dropped and counted (`msg stats`). Handlers run in the core's idle loop, never
//! in interrupt context: a notification IPI only wakes the core.

pub mod bench;
pub mod icc;
pub mod nested;
pub mod stress;

use crate::arch::{apic, cpu, idt};
use crate::core::kcb::CoreState;
use crate::core::shared;
use ::core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use abi::message::{DecodeError, Kind, Ping, Probe, MAX_KIND, PAYLOAD_SIZE};
use alloc::vec::Vec;
use channel::{ChannelError, Message, MpscReceiver, MulticastReader, Reassembler};
use channel::{UrpcReceiver, UrpcSender};
use spin::Mutex;

pub use crate::core::messages::{
    Group, MessageArea, NotifyLine, NotifyMode, ReceiveQueue, DEFAULT_HYBRID_SPIN_NS, GROUPS, GROUP_SLOTS,
    MESSAGING_CORES, PAIR_SLOTS, QUEUE_SLOTS,
};

/// Largest large message a receiver reassembles. A receiver collects at most one large
/// message per receive queue at a time (a reservation's chunks are consecutive), so two of
/// these, 2 MiB, is all that senders can make it hold: an eighth of its 16 MiB heap. A first
/// chunk announcing more is dropped and counted before anything is allocated. 1 MiB carries
/// the image of a process of 512 threads (760 bytes each), as many as a KCB records living
/// elsewhere (`kcb::block::MAX_MOVED_AWAY`).
pub const MAX_LARGE_MESSAGE: usize = 1 << 20;

pub use kcb::block::MessageCounters;

fn counters() -> &'static MessageCounters {
    &shared::this_kcb().messages
}

fn bump(counter: &AtomicU64) {
    // Only the owning core writes its counters: a load and store is enough, no locked add.
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

fn add(counter: &AtomicU64, amount: u64) {
    counter.store(counter.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
}

/// How long a send waits for room in a full channel, or a call for its reply, before it gives
/// up with [`SendError::Timeout`]. A dead target is noticed at once, not after this.
pub const SEND_TIMEOUT_MS: u64 = 2000;

/// Why a message could not be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No such core, or one beyond [`MESSAGING_CORES`].
    NoSuchCore(usize),
    /// The target's kernel instance is not running (faulted, offline, booting, unresponsive):
    /// nothing would take the message.
    TargetNotRunning { core: usize, state: CoreState },
    /// The target runs but took nothing from the full channel within the time allowed.
    Timeout { core: usize, waited_ms: u64 },
    /// The channel refused it (too long, closed, endpoint missing).
    Channel(ChannelError),
}

impl ::core::fmt::Display for SendError {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        match self {
            Self::NoSuchCore(core) => {
                write!(f, "no core {core} with channels: pick one from 0 to {}, see `cores`", messaging_cores() - 1)
            }
            Self::TargetNotRunning { core, state: CoreState::Faulted } => {
                write!(f, "core {core} is faulted and takes no messages: `start {core}` restarts it")
            }
            Self::TargetNotRunning { core, state } => {
                write!(f, "core {core} is {} and takes no messages: see `cores`", state.name())
            }
            Self::Timeout { core, waited_ms } => write!(
                f,
                "core {core} took nothing for {waited_ms} ms: it runs but is stuck or overloaded; see `cores` and `msg stats`"
            ),
            Self::Channel(error) => write!(f, "channel refused the message: {error}"),
        }
    }
}

/// Counts a send error in this core's KCB (`msg stats`) and hands it back.
fn counted(error: SendError) -> SendError {
    match error {
        SendError::TargetNotRunning { .. } => bump(&counters().send_refused),
        SendError::Timeout { .. } => bump(&counters().send_timeouts),
        SendError::NoSuchCore(_) | SendError::Channel(_) => {}
    }
    error
}

/// The bounded wait of one send or call to `target`: every [`Patience::check`] fails once the
/// target stops running or the time is up, so no caller waits for a dead or stuck core forever.
pub struct Patience {
    target: usize,
    started: u64,
    /// Read at one check in `SpinDeadline::POLLS_PER_READ` (under TCG every read of the
    /// clock takes a lock all vCPUs share).
    deadline: crate::time::SpinDeadline,
}

impl Patience {
    /// Starts waiting for `target`, for at most `timeout_ms`.
    pub fn new(target: usize, timeout_ms: u64) -> Self {
        Self { target, started: cpu::read_tsc(), deadline: crate::time::SpinDeadline::after_ms(timeout_ms) }
    }

    /// `Ok` while the target runs and time is left; else the (counted) reason to give up.
    pub fn check(&self) -> Result<(), SendError> {
        // While this core waits, a parked core's host runs, or a host's guests (one of them
        // may be the core waited for).
        crate::core::park::while_waiting();
        let state = shared::get().kcb(self.target).state();
        if !state.is_live() {
            return Err(counted(SendError::TargetNotRunning { core: self.target, state }));
        }
        if self.deadline.passed() {
            let waited = cpu::read_tsc().wrapping_sub(self.started);
            let waited_ms = waited / (shared::facts().tsc_hz / 1000).max(1);
            return Err(counted(SendError::Timeout { core: self.target, waited_ms }));
        }
        Ok(())
    }
}

/// Why a handler refused a message.
pub type HandlerResult = Result<(), DecodeError>;

/// What a kind's handler does, and with which priority it is drained.
#[derive(Clone, Copy)]
pub struct Handler {
    /// High-priority kinds go to the high queue, drained before the normal one (Popcorn 5.3.2).
    pub high_priority: bool,
    /// For one-line messages.
    pub on_line: Option<fn(&Message) -> HandlerResult>,
    /// For reassembled large messages.
    pub on_large: Option<fn(&[u8]) -> HandlerResult>,
}

/// Where a received message came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    High,
    Normal,
    Pair(usize),
    Group(usize),
}

struct Receivers {
    high: MpscReceiver<'static, QUEUE_SLOTS, MESSAGING_CORES>,
    normal: MpscReceiver<'static, QUEUE_SLOTS, MESSAGING_CORES>,
    high_reassembler: Reassembler,
    normal_reassembler: Reassembler,
}

/// Bit 0 (high queue), bit 1 (normal queue): this instance is a restart and has not yet seen
/// a line on that queue that starts something. Continuation chunks met meanwhile belong to a
/// large message whose first chunks died with the previous kernel: they are counted lost,
/// not malformed. (Private to the instance; one load on the receive path once clear.)
static RESUMING: AtomicU32 = AtomicU32::new(0);

// Private per-instance state (each core has its own copy of these statics).
static HANDLERS: Mutex<[Option<Handler>; MAX_KIND as usize + 1]> = Mutex::new([None; MAX_KIND as usize + 1]);
static RECEIVERS: Mutex<Option<Receivers>> = Mutex::new(None);
static PAIR_SENDERS: Mutex<[Option<UrpcSender<'static, PAIR_SLOTS>>; MESSAGING_CORES]> =
    Mutex::new([const { None }; MESSAGING_CORES]);
static PAIR_RECEIVERS: Mutex<[Option<UrpcReceiver<'static, PAIR_SLOTS>>; MESSAGING_CORES]> =
    Mutex::new([const { None }; MESSAGING_CORES]);
static GROUP_READERS: Mutex<[Option<MulticastReader<'static, GROUP_SLOTS, 64>>; GROUPS]> =
    Mutex::new([const { None }; GROUPS]);
static PONGS: AtomicU64 = AtomicU64::new(0);

/// The channel area of the shared region.
pub fn area() -> &'static MessageArea {
    &shared::get().messages
}

/// Cores that have channels on this machine.
pub fn messaging_cores() -> usize {
    (shared::facts().core_count as usize).min(MESSAGING_CORES)
}

/// Registers the handler of `kind` on this instance and publishes its priority.
pub fn register(kind: Kind, handler: Handler) {
    HANDLERS.lock()[kind as usize] = Some(handler);
    let me = shared::this_core() as usize;
    if me < MESSAGING_CORES {
        let line = &area().cores[me].notify;
        let bit = 1u64 << (kind as u16);
        if handler.high_priority {
            line.high_priority_kinds.fetch_or(bit, Ordering::Release);
        } else {
            line.high_priority_kinds.fetch_and(!bit, Ordering::Release);
        }
    }
}

/// Sets up this instance's endpoints: its receive queues, the URPC rings from and to every
/// other core (including cores started later: rings exist for all), and the handlers.
pub fn init() {
    let me = shared::this_core() as usize;
    if me >= MESSAGING_CORES {
        log::warn!("core {me} has no channels: only the first {MESSAGING_CORES} cores do");
        return;
    }
    let area = area();
    let own = &area.cores[me];
    let restarted = shared::this_kcb().incarnation.load(Ordering::Relaxed) > 1;
    let endpoints = if restarted {
        take_over_endpoints(me)
    } else {
        // Never claimed before: a failure here is a protocol bug, reported and not hidden.
        match (own.high.receiver(), own.normal.receiver()) {
            (Ok(high), Ok(normal)) => {
                let mut senders = PAIR_SENDERS.lock();
                let mut receivers = PAIR_RECEIVERS.lock();
                for other in 0..MESSAGING_CORES {
                    senders[other] = area.pairs[me][other].sender().ok();
                    receivers[other] = area.pairs[other][me].receiver().ok();
                }
                Some((high, normal))
            }
            _ => None,
        }
    };
    match endpoints {
        Some((high, normal)) => {
            *RECEIVERS.lock() = Some(Receivers {
                high,
                normal,
                high_reassembler: Reassembler::new(MAX_LARGE_MESSAGE),
                normal_reassembler: Reassembler::new(MAX_LARGE_MESSAGE),
            });
            RESUMING.store(if restarted { 0b11 } else { 0 }, Ordering::Relaxed);
        }
        None => log::error!("receive queues of core {me} are already claimed"),
    }
    if own.notify.spin_cycles.load(Ordering::Relaxed) == 0 {
        own.notify.spin_cycles.store(crate::time::ns_to_cycles(DEFAULT_HYBRID_SPIN_NS), Ordering::Relaxed);
    }
    own.notify.mode.store(NotifyMode::Hybrid as u32, Ordering::Release);
    for mode in &own.pair_modes {
        mode.store(NotifyMode::Hybrid as u32, Ordering::Relaxed);
    }
    register(Kind::Ping, Handler { high_priority: false, on_line: Some(on_ping), on_large: None });
    register(Kind::Pong, Handler { high_priority: false, on_line: Some(on_pong), on_large: None });
    icc::register_handlers();
    stress::register_handlers();
    bench::register_handlers();
}

/// Whether `core` runs a kernel instance that may still write its channels. Every other state
/// is final for what it left behind: a faulted, offline or unresponsive core never runs that
/// kernel again, and a booting one is a new kernel that starts by abandoning what its
/// predecessor held ([`take_over_endpoints`]) and sends nothing before it runs. Its stores
/// happened before it published that state (Release), which this Acquire load sees.
pub fn is_live(core: usize) -> bool {
    shared::get().kcbs.get(core).is_some_and(|kcb| kcb.state().is_live())
}

/// Whether a message for `core` reaches a kernel: it runs one, or it is between two kernels
/// of a restart (a sender waits for the next one, [`wait_out_restart`]).
pub fn is_reachable(core: usize) -> bool {
    is_live(core) || shared::get().kcbs.get(core).is_some_and(|kcb| kcb.restart_pending.load(Ordering::Acquire) != 0)
}

/// How long a sender waits for a restarting core's next kernel.
const RESTART_WAIT_MS: u64 = 2000;

/// Waits while `target` is between two kernels of a restart (stopped or booting with a
/// restart pending), handling this core's own messages meanwhile: what is sent to a core
/// whose processes a restart keeps (a signal, a child's exit) goes to its next kernel rather
/// than being lost. Returns at once for a core that runs, or that stopped for good.
pub fn wait_out_restart(target: usize) {
    let Some(kcb) = shared::get().kcbs.get(target) else { return };
    if kcb.state().is_live() || kcb.restart_pending.load(Ordering::Acquire) == 0 {
        return;
    }
    let deadline = crate::time::SpinDeadline::after_ms(RESTART_WAIT_MS);
    while !kcb.state().is_live() && kcb.restart_pending.load(Ordering::Acquire) != 0 && !deadline.passed() {
        crate::core::park::while_waiting();
        drain();
        cpu::relax();
    }
}

/// Kernel instances running now.
pub fn live_instances() -> usize {
    shared::get().listed_kcbs().iter().filter(|kcb| kcb.state() == CoreState::Running).count()
}

/// A restarted instance takes over the channel endpoints its dead predecessor held, where
/// they stood (positions are saved after every message), abandons the tickets it held in
/// other cores' queues (their receivers skip them, counted lost), and evicts its old
/// multicast memberships (their unread messages counted lost).
fn take_over_endpoints(
    me: usize,
) -> Option<(MpscReceiver<'static, QUEUE_SLOTS, MESSAGING_CORES>, MpscReceiver<'static, QUEUE_SLOTS, MESSAGING_CORES>)>
{
    let area = area();
    for channels in &area.cores {
        for queue in [&channels.high, &channels.normal] {
            // SAFETY: `me` < MESSAGING_CORES; the only user of this sender id is this core,
            // whose previous kernel is dead and whose new one sends nothing until it runs.
            let _ = unsafe { queue.reset_sender_record(me) };
        }
    }
    let mut senders = PAIR_SENDERS.lock();
    let mut receivers = PAIR_RECEIVERS.lock();
    for other in 0..MESSAGING_CORES {
        // SAFETY: the endpoints being taken over belonged to this core's previous kernel,
        // which faulted (or never finished booting) and never runs again; the boot driver
        // saw its state with Acquire, so its saved positions are visible.
        unsafe {
            senders[other] = Some(area.pairs[me][other].reclaim_sender());
            receivers[other] = Some(area.pairs[other][me].reclaim_receiver());
        }
    }
    drop((senders, receivers));
    let mut unread = 0;
    for group in &area.groups {
        // SAFETY: member `me` was this core's previous kernel, which never runs again;
        // `is_live` is false only for cores that never write their channels again.
        if let Ok(count) = unsafe { group.evict(me, is_live) } {
            unread += count;
        }
    }
    add(&counters().lost, unread);
    let own = &area.cores[me];
    // SAFETY: as for the URPC endpoints above.
    unsafe { Some((own.high.reclaim_receiver(), own.normal.reclaim_receiver())) }
}

fn on_ping(message: &Message) -> HandlerResult {
    let ping = Ping::decode(message.payload())?;
    let pong = Ping { from: shared::this_core() as u16, ..ping };
    if let Err(error) = send_blocking(ping.from as usize, &line(Kind::Pong, |out| pong.encode(out))) {
        log::debug!("pong to core {} not sent: {error}", ping.from);
    }
    Ok(())
}

fn on_pong(message: &Message) -> HandlerResult {
    Ping::decode(message.payload())?;
    PONGS.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Builds a one-line message of `kind` whose payload `encode` writes, in place (no copy).
#[inline]
pub fn line(kind: Kind, encode: impl FnOnce(&mut [u8; PAYLOAD_SIZE]) -> usize) -> Message {
    let mut message = Message { kind: kind as u16, flags: 0, len: 0, payload: [0; PAYLOAD_SIZE] };
    let length = encode(&mut message.payload);
    debug_assert!(length <= PAYLOAD_SIZE, "abi payloads fit one message");
    message.len = length as u8;
    message
}

/// A target must exist and run; a refusal is counted.
fn check_target(target: usize) -> Result<(), SendError> {
    if target >= messaging_cores() {
        return Err(SendError::NoSuchCore(target));
    }
    let mut state = shared::get().kcb(target).state();
    if !state.is_live() {
        // Only a core that does not run can be between two kernels: the common send pays
        // for one load.
        wait_out_restart(target);
        state = shared::get().kcb(target).state();
    }
    if !state.is_live() {
        return Err(counted(SendError::TargetNotRunning { core: target, state }));
    }
    Ok(())
}

fn queue_for(target: usize, kind: u16) -> &'static ReceiveQueue {
    let channels = &area().cores[target];
    let high = kind < 64 && channels.notify.high_priority_kinds.load(Ordering::Acquire) & (1 << kind) != 0;
    if high {
        &channels.high
    } else {
        &channels.normal
    }
}

/// Tells `target` that a message waits on a channel with notification `mode`.
pub fn notify(target: usize, mode: NotifyMode) {
    let line = &area().cores[target].notify;
    let interrupt = |counters: &MessageCounters| {
        let apic_id = shared::apic_of(target);
        apic::local().send_ipi(apic_id, idt::VECTOR_MESSAGE);
        bump(&counters.ipis_sent);
    };
    match mode {
        NotifyMode::Poll => {}
        NotifyMode::Ipi => interrupt(counters()),
        NotifyMode::Hybrid | NotifyMode::Mwait => {
            if mode == NotifyMode::Mwait {
                line.doorbell.fetch_add(1, Ordering::Release);
            }
            // SeqCst fence: orders our publish before reading `armed`, against the receiver's
            // store of `armed` before its last look at the queues (no lost wake-up).
            fence(Ordering::SeqCst);
            if line.armed.load(Ordering::Relaxed) != 0 && line.armed.swap(0, Ordering::AcqRel) != 0 {
                interrupt(counters());
            }
        }
    }
}

/// The notification mode of `target`'s receive queues.
pub fn queue_mode(target: usize) -> NotifyMode {
    NotifyMode::from_u32(area().cores[target].notify.mode.load(Ordering::Acquire))
}

/// Sends one line to `target`'s receive queue (high or normal as its registry says) and
/// notifies it; fails at once if the queue is full. From a handler run inside this core's own
/// large send to `target`, the line waits until that send is done ([`nested`]).
pub fn try_send(target: usize, message: &Message) -> Result<(), SendError> {
    if nested::must_wait(target) {
        check_target(target)?;
        return nested::defer_line(target, message);
    }
    try_send_now(target, message)
}

fn try_send_now(target: usize, message: &Message) -> Result<(), SendError> {
    check_target(target)?;
    enqueue(target, message)?;
    notify(target, queue_mode(target));
    Ok(())
}

/// Puts one line in `target`'s receive queue (high or normal as its registry says), counted
/// sent; fails at once if the queue is full. No notification.
fn enqueue(target: usize, message: &Message) -> Result<(), SendError> {
    // Counted before the ticket is taken: should this core die holding it, the receiver skips
    // the slot and counts it lost, and sent = received + dropped + lost still holds.
    let sent = &counters().sent;
    bump(sent);
    if let Err(error) = queue_for(target, message.kind).try_send(shared::this_core() as usize, message) {
        sent.store(sent.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
        return Err(SendError::Channel(error));
    }
    Ok(())
}

/// Sends one line, draining this core's own channels while the target's queue is full, so
/// two cores sending to each other never deadlock. Gives up, with a named and counted error,
/// as soon as the target stops running or after [`SEND_TIMEOUT_MS`].
pub fn send_blocking(target: usize, message: &Message) -> Result<(), SendError> {
    send_blocking_with(target, message, try_send)
}

/// [`send_blocking`] of a line deferred behind a large send, once that is done.
fn send_blocking_now(target: usize, message: &Message) -> Result<(), SendError> {
    send_blocking_with(target, message, try_send_now)
}

fn send_blocking_with(
    target: usize,
    message: &Message,
    send: fn(usize, &Message) -> Result<(), SendError>,
) -> Result<(), SendError> {
    let patience = Patience::new(target, SEND_TIMEOUT_MS);
    loop {
        match send(target, message) {
            Err(SendError::Channel(ChannelError::Full)) => {
                patience.check()?;
                drain();
                cpu::relax();
            }
            result => return result,
        }
    }
}

/// Whether `core` is stopped with processes kept in its KCB for a later start (`core stop
/// --keep`): its receive queue waits for the next kernel, which takes it over where it stands
/// after it adopted them.
pub fn holds_kept_processes(core: usize) -> bool {
    shared::get()
        .kcbs
        .get(core)
        .is_some_and(|kcb| kcb.state() == CoreState::Stopped && kcb.kept.chain.load(Ordering::Acquire) != 0)
}

/// Leaves one line in the receive queue of `target`, a core stopped with processes kept for a
/// later start ([`holds_kept_processes`]), for its next kernel: for the lines such a process
/// must not miss (a child's exit: its parent's `wait4` would wait forever). No notification
/// (nothing runs there), unless the core was started meanwhile. Never blocks: a full queue is
/// an error, since nothing empties it before the start.
pub fn leave_for_next_kernel(target: usize, message: &Message) -> Result<(), SendError> {
    if target >= messaging_cores() {
        return Err(SendError::NoSuchCore(target));
    }
    enqueue(target, message)?;
    if is_live(target) {
        notify(target, queue_mode(target));
    }
    Ok(())
}

/// [`send_blocking`], or [`leave_for_next_kernel`] when `target` holds kept processes.
pub fn send_or_leave(target: usize, message: &Message) -> Result<(), SendError> {
    if holds_kept_processes(target) {
        leave_for_next_kernel(target, message)
    } else {
        send_blocking(target, message)
    }
}

/// Sends `bytes` as one large message of `kind` to `target`'s receive queue: its chunks are
/// reserved with one atomic add and announced with one notification (Popcorn 5.3.4).
pub fn send_large(target: usize, kind: Kind, bytes: &[u8]) -> Result<(), SendError> {
    send_large_waiting(target, kind, bytes, false)
}

/// As [`send_large`], handling this core's own messages while the target's queue is full,
/// so two cores sending large messages to each other never wait on each other forever.
/// Only for callers outside message handlers (a nested send to the same target would wait
/// behind the reservation it interrupted).
pub fn send_large_draining(target: usize, kind: Kind, bytes: &[u8]) -> Result<(), SendError> {
    send_large_waiting(target, kind, bytes, true)
}

fn send_large_waiting(target: usize, kind: Kind, bytes: &[u8], draining: bool) -> Result<(), SendError> {
    if nested::must_wait(target) {
        check_target(target)?;
        return nested::defer_large(target, kind, bytes);
    }
    send_large_now(target, kind, bytes, draining)
}

fn send_large_now(target: usize, kind: Kind, bytes: &[u8], draining: bool) -> Result<(), SendError> {
    check_target(target)?;
    if bytes.len() > MAX_LARGE_MESSAGE {
        return Err(SendError::Channel(ChannelError::TooLong));
    }
    let chunks = channel::chunk_count(bytes.len() as u64);
    // Counted before the reservation: chunks this core never writes (it gives up, or dies)
    // are skipped by the receiver and counted lost there.
    let sent = &counters().sent;
    add(sent, chunks);
    let patience = Patience::new(target, SEND_TIMEOUT_MS);
    let failure = ::core::cell::Cell::new(None);
    let waits = ::core::cell::Cell::new(0u32);
    let keep_waiting = || match patience.check() {
        Ok(()) => {
            // The queue is full: the receiver may be asleep, waiting for the one notification
            // that comes after the last chunk. Wake it now (and now and then) so it drains.
            if waits.get().is_multiple_of(256) {
                notify(target, queue_mode(target));
            }
            waits.set(waits.get().wrapping_add(1));
            if draining {
                drain();
            }
            true
        }
        Err(error) => {
            failure.set(Some(error));
            false
        }
    };
    let queue = queue_for(target, kind as u16);
    // A handler run while this waits (draining) and sending to `target` waits behind it; what
    // it sent goes out when `held` is dropped, after this send.
    let held = draining.then(|| nested::Held::take(target));
    let result = channel::send_large_within(queue, shared::this_core() as usize, kind as u16, bytes, keep_waiting);
    let outcome = match result {
        Ok(()) => {
            notify(target, queue_mode(target));
            Ok(())
        }
        Err(ChannelError::GaveUp) => {
            // What was written is delivered; the rest is abandoned to the receiver's skip.
            notify(target, queue_mode(target));
            Err(failure.get().unwrap_or(SendError::Channel(ChannelError::GaveUp)))
        }
        Err(error) => {
            sent.store(sent.load(Ordering::Relaxed) - chunks, Ordering::Relaxed);
            Err(SendError::Channel(error))
        }
    };
    drop(held);
    outcome
}

/// Sends one line on the URPC ring from this core to `target`.
pub fn try_send_pair(target: usize, message: &Message) -> Result<(), SendError> {
    check_target(target)?;
    let me = shared::this_core() as usize;
    let mut senders = PAIR_SENDERS.lock();
    let sender = senders[target].as_mut().ok_or(SendError::Channel(ChannelError::EndpointTaken))?;
    sender.try_send(message).map_err(SendError::Channel)?;
    drop(senders);
    bump(&counters().sent);
    notify(target, NotifyMode::from_u32(area().cores[target].pair_modes[me].load(Ordering::Acquire)));
    Ok(())
}

/// This core joins multicast group `group` as member `core id`.
pub fn join_group(group: usize) -> Result<(), ChannelError> {
    let reader = area().groups.get(group).ok_or(ChannelError::NotMember)?.join(shared::this_core() as usize)?;
    GROUP_READERS.lock()[group] = Some(reader);
    Ok(())
}

/// This core leaves `group` (its unread messages are released, so slots are freed once, and
/// counted lost: they were sent to it). A sender that died holding the group is relieved.
pub fn leave_group(group: usize) {
    if let Some(reader) = GROUP_READERS.lock().get_mut(group).and_then(Option::take) {
        // SAFETY: `is_live` is false only for cores that never write their channels again.
        let unread = unsafe { reader.leave_with(is_live) };
        add(&counters().lost, unread);
    }
}

/// Inserts one line into `group` and returns (insert cycles, notify cycles); members are
/// notified each with its queue's mode. A full or busy group is first cleared of what dead
/// cores left: a member that will never read (evicted, its unread messages counted lost) or
/// a sender that died holding the tail.
pub fn send_group(group: usize, message: &Message) -> Result<(u64, u64), SendError> {
    let ring = area().groups.get(group).ok_or(SendError::Channel(ChannelError::NotMember))?;
    let members = ring.members();
    let start = cpu::read_tsc();
    if let Err(error) = ring.try_send(shared::this_core() as usize, message) {
        if matches!(error, ChannelError::Full | ChannelError::Busy) {
            clear_dead_from_group(ring);
        }
        return Err(SendError::Channel(error));
    }
    let inserted = cpu::read_tsc();
    add(&counters().sent, u64::from(members.count_ones()));
    for member in 0..messaging_cores() {
        if members & (1 << member) != 0 {
            notify(member, queue_mode(member));
        }
    }
    Ok((inserted - start, cpu::read_tsc() - inserted))
}

fn clear_dead_from_group(ring: &Group) {
    if let Some(holder) = ring.busy_holder().filter(|h| !is_live(*h)) {
        // SAFETY: `holder` is not live, so it never writes the group again.
        unsafe { ring.break_busy(holder) };
    }
    let members = ring.members();
    for member in (0..messaging_cores()).filter(|m| members & (1 << m) != 0 && !is_live(*m)) {
        // SAFETY: the member's core is not live: its reader is never used again, and
        // `is_live` is false only for cores that never write their channels again.
        if let Ok(unread) = unsafe { ring.evict(member, is_live) } {
            log::debug!("core {member} left group traffic unread ({unread} lines): evicted");
            add(&counters().lost, unread);
        }
    }
}

/// One received line, copied out of shared memory, not yet validated.
struct Incoming {
    message: Message,
    source: Source,
}

/// Takes the next message from this core's channels: high queue first, then normal, then
/// the URPC rings, then the groups.
#[inline(always)]
fn receive_one() -> Option<Incoming> {
    if let Some(receivers) = RECEIVERS.lock().as_mut() {
        if let Some(message) = receivers.high.try_recv() {
            return Some(Incoming { message, source: Source::High });
        }
        if let Some(message) = receivers.normal.try_recv() {
            return Some(Incoming { message, source: Source::Normal });
        }
    }
    let cores = messaging_cores();
    let mut pairs = PAIR_RECEIVERS.lock();
    for (from, receiver) in pairs.iter_mut().enumerate().take(cores) {
        if let Some(message) = receiver.as_mut().and_then(|r| r.try_recv()) {
            return Some(Incoming { message, source: Source::Pair(from) });
        }
    }
    drop(pairs);
    // This core holds a reader only while its member bit is set (join sets the bit before
    // it returns the reader, dropping the reader clears it), so a core in no group skips the
    // lock and the scan of every group.
    let me = 1u64.checked_shl(shared::this_core()).unwrap_or(0);
    if area().groups.iter().all(|group| group.members() & me == 0) {
        return None;
    }
    let mut groups = GROUP_READERS.lock();
    for (group, reader) in groups.iter_mut().enumerate() {
        if let Some(Ok(Some(message))) = reader.as_mut().map(|r| r.try_recv()) {
            return Some(Incoming { message, source: Source::Group(group) });
        }
    }
    None
}

/// Why a line was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    UnknownKind,
    Malformed,
    Chunk,
    TooLarge,
}

fn drop_message(reason: DropReason, message: &Message, source: Source) {
    let counters = counters();
    bump(&counters.dropped);
    bump(match reason {
        DropReason::UnknownKind => &counters.dropped_unknown_kind,
        DropReason::Malformed => &counters.dropped_malformed,
        DropReason::Chunk => &counters.dropped_chunk,
        DropReason::TooLarge => &counters.dropped_too_large,
    });
    log::debug!("dropped a message of kind {} from {source:?}: {reason:?}", message.kind);
}

/// Validates and dispatches one received line. Decode, then invoke: the handler sees only a
/// message whose header and payload passed validation. Inlined, like [`receive_one`], into
/// the loops that poll: under TCG every call and return costs a lookup of its target, and
/// this is the path every received message takes; chunks go to [`dispatch_chunk`].
#[inline(always)]
fn dispatch(incoming: &Incoming) {
    let Incoming { ref message, source } = *incoming;
    if message.validate().is_err() {
        return drop_message(DropReason::Malformed, message, source);
    }
    if RESUMING.load(Ordering::Relaxed) != 0 {
        let bit = match source {
            Source::High => 1,
            Source::Normal => 2,
            _ => 0,
        };
        if RESUMING.load(Ordering::Relaxed) & bit != 0 {
            if message.is_chunk() && message.flags & channel::FLAG_FIRST == 0 {
                return bump(&counters().lost);
            }
            RESUMING.fetch_and(!bit, Ordering::Relaxed);
        }
    }
    if message.is_chunk() {
        return dispatch_chunk(message, source);
    }
    let handler = HANDLERS.lock().get(message.kind as usize).copied().flatten().and_then(|h| h.on_line);
    match handler {
        None => drop_message(DropReason::UnknownKind, message, source),
        Some(handle) => match run_handler(|| handle(message)) {
            Ok(()) => bump(&counters().received),
            Err(_) => drop_message(DropReason::Malformed, message, source),
        },
    }
}

/// Runs a handler, counted in `handlers_running` so that a fault inside it counts the
/// message lost (see [`count_lost_in_fault`]).
#[inline(always)]
fn run_handler(handle: impl FnOnce() -> HandlerResult) -> HandlerResult {
    let running = &counters().handlers_running;
    running.store(running.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    let result = handle();
    running.store(running.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
    result
}

/// Hands a validated chunk to its queue's reassembler and a completed large message to its
/// kind's handler.
#[inline(never)]
fn dispatch_chunk(message: &Message, source: Source) {
    let mut receivers = RECEIVERS.lock();
    let reassembler = match (source, receivers.as_mut()) {
        (Source::High, Some(r)) => &mut r.high_reassembler,
        (Source::Normal, Some(r)) => &mut r.normal_reassembler,
        // Large messages travel only on receive queues.
        _ => return drop_message(DropReason::Chunk, message, source),
    };
    let result = reassembler.push(message);
    drop(receivers);
    match result {
        Err(ChannelError::TooLong | ChannelError::NoMemory) => drop_message(DropReason::TooLarge, message, source),
        Err(_) => drop_message(DropReason::Chunk, message, source),
        Ok(None) => bump(&counters().received),
        Ok(Some((kind, bytes))) => {
            let handler = HANDLERS.lock().get(kind as usize).copied().flatten().and_then(|h| h.on_large);
            match handler {
                None => drop_message(DropReason::UnknownKind, message, source),
                Some(handle) => match run_handler(|| handle(&bytes)) {
                    Ok(()) => bump(&counters().received),
                    Err(_) => drop_message(DropReason::Malformed, message, source),
                },
            }
        }
    }
}

/// Whether this core holds part of a large message whose last chunks have not come yet: a
/// kernel that stopped now would leave them to its successor, which counts them lost.
pub fn is_collecting_large() -> bool {
    RECEIVERS
        .lock()
        .as_ref()
        .is_some_and(|r| r.high_reassembler.is_collecting() || r.normal_reassembler.is_collecting())
}

/// Handles every message waiting on this core's channels; returns how many.
pub fn drain() -> usize {
    icc::run_postponed();
    let mut handled = 0;
    while let Some(incoming) = receive_one() {
        dispatch(&incoming);
        handled += 1;
    }
    if handled == 0 {
        bump(&counters().empty_polls);
        skip_dead_tickets();
    }
    handled
}

/// When nothing could be received: a receive queue may be stuck behind a ticket whose holder
/// died (or gave up) before publishing it. Skip such slots, count them lost, and forget the
/// large message they interrupted (a reservation's chunks are consecutive, so a partly
/// collected message belongs to the holder of the skipped ticket).
fn skip_dead_tickets() {
    let mut receivers = RECEIVERS.lock();
    let Some(r) = receivers.as_mut() else { return };
    let mut skipped = 0;
    for (receiver, reassembler) in [(&mut r.high, &mut r.high_reassembler), (&mut r.normal, &mut r.normal_reassembler)]
    {
        // SAFETY: `is_live` is false only for cores whose kernel never writes its channels
        // again (see `is_live`), and their stores are visible through the state's Release.
        let count = unsafe { receiver.skip_abandoned(is_live) };
        if count != 0 {
            reassembler.reset();
            skipped += count;
        }
    }
    drop(receivers);
    if skipped != 0 {
        log::debug!("skipped {skipped} queue slots whose senders died before publishing");
        add(&counters().lost, skipped);
    }
}

/// Called from the message-notification interrupt: count it; the idle loop does the work.
pub fn on_notification() {
    if shared::region().is_some() {
        bump(&counters().ipis_taken);
    }
}

/// Sleeps until a message may have arrived, the way this core's queue mode says.
pub fn wait_for_messages() {
    let me = shared::this_core() as usize;
    if me >= MESSAGING_CORES {
        cpu::wait_for_interrupt();
        return;
    }
    let line = &area().cores[me].notify;
    let mut mode = NotifyMode::from_u32(line.mode.load(Ordering::Relaxed));
    if mode == NotifyMode::Mwait && !shared::facts().has_mwait {
        mode = NotifyMode::Hybrid;
    }
    if mode == NotifyMode::Poll && shared::this_kcb().role() != crate::core::kcb::Role::Timesharing {
        // No timer wakes an AC or a KC to look: polling means looking now, not sleeping.
        if let Some(incoming) = receive_one() {
            dispatch(&incoming);
        } else {
            cpu::relax();
        }
        return;
    }
    if mode == NotifyMode::Hybrid {
        let spin = crate::time::SpinDeadline::after_cycles(line.spin_cycles.load(Ordering::Relaxed));
        while !spin.passed() {
            if let Some(incoming) = receive_one() {
                dispatch(&incoming);
                return;
            }
            cpu::relax();
        }
    }
    if let Some(incoming) = sleep_armed(line, mode == NotifyMode::Mwait, receive_one) {
        dispatch(&incoming);
    }
}

/// Halts until a message or a notification comes, unless `ready` (another source of work,
/// such as a kernel core's syspages) or a message is there at the last look; handles the
/// message the last look found.
pub fn sleep_unless(mut ready: impl FnMut() -> bool) {
    let me = shared::this_core() as usize;
    if me >= MESSAGING_CORES {
        return;
    }
    let line = &area().cores[me].notify;
    if NotifyMode::from_u32(line.mode.load(Ordering::Relaxed)) == NotifyMode::Poll {
        // Senders in poll mode ring nobody: keep looking instead of sleeping.
        return;
    }
    let look = || {
        if ready() {
            return Some(None);
        }
        receive_one().map(Some)
    };
    if let Some(Some(incoming)) = sleep_armed(line, false, look) {
        dispatch(&incoming);
    }
}

/// Arms `line` (and MONITOR on its doorbell with `mwait`), takes a last look with `look`, and
/// sleeps only if it found nothing; returns what the last look found. Interrupts are masked
/// from before arming until the sleep, and a sender that sees `armed` interrupts us, so a
/// message published after the last look always wakes the sleep (no lost wake-up).
pub fn sleep_armed<T>(line: &NotifyLine, mwait: bool, mut look: impl FnMut() -> Option<T>) -> Option<T> {
    cpu::disable_interrupts();
    if mwait {
        // SAFETY: callers pass `mwait` only where CPUID offers MONITOR/MWAIT; the doorbell is mapped.
        unsafe { cpu::monitor(&line.doorbell as *const AtomicU64 as u64) };
    }
    line.armed.store(1, Ordering::Relaxed);
    // SeqCst fence: pairs with the sender's (see `notify`).
    fence(Ordering::SeqCst);
    if let Some(found) = look() {
        line.armed.store(0, Ordering::Relaxed);
        cpu::enable_interrupts();
        return Some(found);
    }
    // A parked core gives the processor to its host here, a host runs a due guest first.
    crate::core::park::sleep(mwait);
    line.armed.store(0, Ordering::Relaxed);
    None
}

/// Sets the notification mode of this core's receive queues and of every URPC ring into it,
/// and (if `spin_cycles` is not 0) the hybrid spin. The notification line is the receiver's
/// own: other cores ask it with [`set_mode`].
pub fn set_own_mode(mode: NotifyMode, spin_cycles: u64) {
    let channels = &area().cores[shared::this_core() as usize];
    if spin_cycles != 0 {
        channels.notify.spin_cycles.store(spin_cycles, Ordering::Relaxed);
    }
    channels.notify.mode.store(mode as u32, Ordering::Release);
    for pair in &channels.pair_modes {
        pair.store(mode as u32, Ordering::Release);
    }
}

/// Sets `core`'s notification mode; a failure (the core is not running or does not answer) is
/// logged. See [`configure_notification`].
pub fn set_mode(core: usize, mode: NotifyMode) {
    if let Err(error) = configure_notification(core, mode, 0) {
        log::warn!("notification mode of core {core} not set to {}: {error}", mode.name());
    }
}

/// Sets `core`'s notification mode (and hybrid spin, unless 0): directly on this core, by an
/// inter-core call to the owner of the notification line on any other.
pub fn configure_notification(core: usize, mode: NotifyMode, spin_cycles: u64) -> Result<(), icc::IccError> {
    if core == shared::this_core() as usize {
        set_own_mode(mode, spin_cycles);
        return Ok(());
    }
    icc::call(core, abi::message::handler::SET_NOTIFY_MODE, [mode as u64, spin_cycles, 0, 0, 0], SEND_TIMEOUT_MS)
        .map(|_| ())
}

/// Pings `target` `count` times (one outstanding); returns round-trip cycles. Fails at once
/// if the target stops running, and after [`SEND_TIMEOUT_MS`] without a pong.
pub fn ping(target: usize, count: usize) -> Result<Vec<u64>, SendError> {
    check_target(target)?;
    let me = shared::this_core() as u16;
    let mut samples = Vec::with_capacity(count);
    for sequence in 0..count as u64 {
        let before = PONGS.load(Ordering::Relaxed);
        let start = cpu::read_tsc();
        let ping = Ping { from: me, sequence, sent_tsc: start, tag: 0 };
        send_blocking(target, &line(Kind::Ping, |out| ping.encode(out)))?;
        let patience = Patience::new(target, SEND_TIMEOUT_MS);
        while PONGS.load(Ordering::Relaxed) == before {
            if drain() == 0 {
                patience.check()?;
            }
        }
        samples.push(cpu::read_tsc() - start);
    }
    Ok(samples)
}

/// `test=msg-restart` only: takes four tickets in `target`'s normal queue with one
/// reservation, publishes the first and keeps the other three, so that the fault that follows
/// leaves `target`'s receiver behind tickets their holder will never publish.
pub fn hold_tickets_for_fault(target: usize) {
    let me = shared::this_core() as usize;
    let Some(channels) = area().cores.get(target) else { return };
    let Ok(mut reservation) = channels.normal.reserve(me, 4) else { return };
    add(&counters().sent, 4);
    let probe = Probe { from: me as u16, sequence: 0, sent_tsc: cpu::read_tsc() };
    let _ = reservation.push(&line(Kind::Probe, |out| probe.encode(out)));
    notify(target, queue_mode(target));
    log::warn!("test msg-restart: core {me} holds 3 unpublished tickets in core {target}'s queue");
    // Never dropped: dropping would pad the slots, and the point is to die holding them.
    ::core::mem::forget(reservation);
}

/// Called on the way down of a faulting core: the messages whose handlers were running are
/// lost (their senders counted them sent), so the counters still balance.
pub fn count_lost_in_fault() {
    let counters = counters();
    let running = counters.handlers_running.swap(0, Ordering::Relaxed);
    add(&counters.lost, running);
}
