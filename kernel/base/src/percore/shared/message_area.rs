//! The channel area of the shared region, and safe recovery from what dead cores left in it.
//!
//! The layout (every core's receive queues and notification line, the URPC ring of every
//! pair of cores, the multicast groups) is part of the shared region, so it lives with the
//! region in the base; `msg` uses it. Taking over a dead kernel's endpoints, skipping tickets
//! a dead sender never published, and evicting dead members from groups are `unsafe` in
//! `channel`: sound only for a core that never writes its channels again. Whether a core is
//! such a core is read from its KCB, here, so these functions check it themselves and are
//! safe to call.

use super::{facts, get, this_core, this_kcb};
use crate::percore::kcb::CoreState;
use channel::{ChannelError, MpscQueue, MpscReceiver, Multicast, MulticastReader, Urpc, UrpcReceiver, UrpcSender};
use core::sync::atomic::{AtomicU32, AtomicU64};

/// Cores that get channels (the first ones the MADT lists).
pub const MESSAGING_CORES: usize = 16;
/// Slots of each receive queue.
pub const QUEUE_SLOTS: usize = 256;
/// Slots of each URPC pair ring.
pub const PAIR_SLOTS: usize = 64;
/// Multicast groups in the shared region.
pub const GROUPS: usize = 4;
/// Slots of each multicast group ring.
pub const GROUP_SLOTS: usize = 64;

pub type ReceiveQueue = MpscQueue<QUEUE_SLOTS, MESSAGING_CORES>;
pub type QueueReceiver = MpscReceiver<'static, QUEUE_SLOTS, MESSAGING_CORES>;
pub type PairRing = Urpc<PAIR_SLOTS>;
pub type Group = Multicast<GROUP_SLOTS, 64>;
pub type GroupReader = MulticastReader<'static, GROUP_SLOTS, 64>;

/// A receiving core's notification state, alone on its cache line; the owner writes `armed`
/// and `mode`, senders read them and write `doorbell`.
#[repr(C, align(64))]
pub struct NotifyLine {
    /// `msg::NotifyMode` of the core's receive queues.
    pub mode: AtomicU32,
    /// 1 while the core sleeps and wants an IPI for the next message (hybrid).
    pub armed: AtomicU32,
    /// Written by senders to wake an MWAIT.
    pub doorbell: AtomicU64,
    /// Hybrid spin before sleeping, in TSC cycles (0: the default).
    pub spin_cycles: AtomicU64,
    /// Bit k set: kind k goes to the high-priority queue (the receiver's registry decides).
    pub high_priority_kinds: AtomicU64,
}

impl NotifyLine {
    /// Arms MONITOR on the doorbell, where CPUID offers MONITOR/MWAIT; whether it did (an
    /// MWAIT may follow only then).
    pub fn arm_monitor(&self) -> bool {
        if !facts().has_mwait {
            return false;
        }
        // SAFETY: CPUID offers MONITOR/MWAIT (checked above); the doorbell is a field of a
        // live reference into the shared region, so its address is mapped.
        unsafe { crate::arch::cpu::monitor(&self.doorbell as *const AtomicU64 as u64) };
        true
    }
}

/// One core's receiving side.
#[repr(C)]
pub struct CoreChannels {
    pub high: ReceiveQueue,
    pub normal: ReceiveQueue,
    pub notify: NotifyLine,
    /// `msg::NotifyMode` of the URPC ring from each core to this one.
    pub pair_modes: [AtomicU32; MESSAGING_CORES],
}

/// The channel area of the shared region. All-zero is valid: empty rings, poll mode.
#[repr(C)]
pub struct MessageArea {
    pub cores: [CoreChannels; MESSAGING_CORES],
    /// `pairs[from][to]`: the URPC ring from core `from` to core `to`.
    pub pairs: [[PairRing; MESSAGING_CORES]; MESSAGING_CORES],
    pub groups: [Group; GROUPS],
    /// Last, so that images with and without benchmarks agree on every other offset.
    #[cfg(feature = "bench")]
    pub bench: bench::BenchArea,
}

/// Whether `core` runs a kernel instance that may still write its channels. Every other state
/// is final for what it left behind: a faulted, offline or unresponsive core never runs that
/// kernel again, and a booting one is a new kernel that starts by abandoning what its
/// predecessor held ([`MessageArea::take_over_endpoints`]) and sends nothing before it runs.
/// Its stores happened before it published that state (Release), which this Acquire load sees.
pub fn is_live(core: usize) -> bool {
    get().kcbs.get(core).is_some_and(|kcb| kcb.state().is_live())
}

/// The endpoints a kernel instance holds in the channel area: its two receive queues, and its
/// end of the URPC ring to and from every core.
pub struct OwnEndpoints {
    pub high: QueueReceiver,
    pub normal: QueueReceiver,
    /// `pair_senders[to]`: this core's end of the ring to `to`.
    pub pair_senders: [Option<UrpcSender<'static, PAIR_SLOTS>>; MESSAGING_CORES],
    /// `pair_receivers[from]`: this core's end of the ring from `from`.
    pub pair_receivers: [Option<UrpcReceiver<'static, PAIR_SLOTS>>; MESSAGING_CORES],
    /// Multicast lines the previous kernel of this core left unread (to be counted lost).
    pub unread_lines: u64,
}

impl MessageArea {
    /// Claims core `me`'s endpoints the first time a kernel runs there. Fails if its receive
    /// queues are claimed already (a protocol bug, for the caller to report).
    pub fn claim_endpoints(&'static self, me: usize) -> Result<OwnEndpoints, ChannelError> {
        let own = self.cores.get(me).ok_or(ChannelError::NoSuchSender)?;
        let (high, normal) = match (own.high.receiver(), own.normal.receiver()) {
            (Ok(high), Ok(normal)) => (high, normal),
            (Err(error), _) | (_, Err(error)) => return Err(error),
        };
        Ok(OwnEndpoints {
            high,
            normal,
            pair_senders: core::array::from_fn(|other| self.pairs[me][other].sender().ok()),
            pair_receivers: core::array::from_fn(|other| self.pairs[other][me].receiver().ok()),
            unread_lines: 0,
        })
    }

    /// A restarted instance takes over the channel endpoints its dead predecessor held, where
    /// they stood (positions are saved after every message), abandons the tickets it held in
    /// other cores' queues (their receivers skip them, counted lost), and evicts its old
    /// multicast memberships (their unread messages returned, to be counted lost).
    ///
    /// Only the kernel of core `me` itself, while it boots: `None` from anywhere else.
    pub fn take_over_endpoints(&'static self, me: usize) -> Option<OwnEndpoints> {
        // A booting kernel on its own core: its predecessor there stopped or faulted for good
        // (a core is claimed for booting only from those states), and this one sends nothing
        // before it publishes `Running`. The boot driver saw the old state with Acquire.
        if me >= MESSAGING_CORES || me != this_core() as usize || this_kcb().state() != CoreState::Booting {
            return None;
        }
        for channels in &self.cores {
            for queue in [&channels.high, &channels.normal] {
                // SAFETY: the only user of sender id `me` is this core, whose previous kernel
                // is dead and whose new one sends nothing until it runs (checked above).
                let _ = unsafe { queue.reset_sender_record(me) };
            }
        }
        let pair_senders = core::array::from_fn(|other| {
            // SAFETY: the endpoints taken over belonged to this core's previous kernel, which
            // faulted (or never finished booting) and never runs again; the boot driver saw its
            // state with Acquire, so its saved positions are visible.
            Some(unsafe { self.pairs[me][other].reclaim_sender() })
        });
        let pair_receivers = core::array::from_fn(|other| {
            // SAFETY: as for the senders.
            Some(unsafe { self.pairs[other][me].reclaim_receiver() })
        });
        let mut unread_lines = 0;
        for group in &self.groups {
            // SAFETY: member `me` was this core's previous kernel, which never runs again;
            // `is_live` is false only for cores that never write their channels again.
            if let Ok(count) = unsafe { group.evict(me, is_live) } {
                unread_lines += count;
            }
        }
        let own = &self.cores[me];
        // SAFETY: as for the URPC endpoints above.
        let (high, normal) = unsafe { (own.high.reclaim_receiver(), own.normal.reclaim_receiver()) };
        Some(OwnEndpoints { high, normal, pair_senders, pair_receivers, unread_lines })
    }
}

/// Skips the slots of `receiver`'s queue whose tickets a dead sender took and never published
/// (or gave up on); returns how many.
pub fn skip_abandoned_tickets(receiver: &mut QueueReceiver) -> u64 {
    // SAFETY: `is_live` is false only for cores whose kernel never writes its channels again,
    // and their stores are visible through the state's Release.
    unsafe { receiver.skip_abandoned(is_live) }
}

/// Leaves a multicast group; returns how many lines named this member and were left unread.
/// A sender that died holding the group is relieved.
pub fn leave_group(reader: GroupReader) -> u64 {
    // SAFETY: `is_live` is false only for cores that never write their channels again.
    unsafe { reader.leave_with(is_live) }
}

/// Frees `group`'s tail if a core that is not live holds it (it died sending); whether it did.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn break_dead_holder(group: &Group) -> bool {
    match group.busy_holder().filter(|holder| !is_live(*holder)) {
        // SAFETY: `holder` is not live, so it never writes the group again.
        Some(holder) => unsafe { group.break_busy(holder) },
        None => false,
    }
}

/// Evicts member `member` from `group` if its core is not live; the lines it left unread.
/// `None` if the member's core is live or it is no member.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn evict_dead_member(group: &Group, member: usize) -> Option<u64> {
    if is_live(member) {
        return None;
    }
    // SAFETY: the member's core is not live: its reader is never used again, and `is_live`
    // is false only for cores that never write their channels again.
    unsafe { group.evict(member, is_live) }.ok()
}

/// The cache lines `msg bench` measures with (the `bench` feature only).
#[cfg(feature = "bench")]
pub mod bench {
    use super::super::{CacheLine, SharedLock};
    use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    /// Cache lines and result slots shared by the initiator and the responder of a benchmark.
    #[repr(C)]
    pub struct BenchArea {
        /// Raw ping-pong: a whole line written by the initiator (7 data words, then word 7 the
        /// sequence), as the FOS/Barrelfish cache-line benchmark sends a line-sized message.
        pub ping: LinePair<[AtomicU64; 8]>,
        /// Raw ping-pong: the responder's line.
        pub pong: LinePair<[AtomicU64; 8]>,
        /// The responder is set up and waits for the first probe.
        pub ready: CacheLine<AtomicU32>,
        /// The responder's receive-side breakdown, one summary per phase (send→wake,
        /// wake→dequeue, dequeue→handler), written before its ICC reply, which orders them.
        pub breakdown: CacheLine<[PhaseSummary; 3]>,
        /// Held by the initiator for a whole run: the lines above, the responders and multicast
        /// group 0 serve one benchmark at a time, and processes on any core can start one.
        pub initiator: SharedLock,
    }

    /// A value alone in an aligned pair of cache lines. Hosts that fetch lines in pairs (the
    /// adjacent-line prefetch of x86 L2 caches) would otherwise make two vCPUs writing
    /// neighbouring lines contend as if they shared one, and the raw ping-pong, the floor of the
    /// polled ratio, would pay for a conflict the channel's rings do not have.
    #[repr(C, align(128))]
    pub struct LinePair<T>(pub T);

    /// A summary of signed cycle differences as the responder measured it, for the initiator to
    /// print: every field of a `samples::Summary<i64>` (as bits) and how many were negative.
    #[repr(C)]
    pub struct PhaseSummary {
        count: AtomicU64,
        min: AtomicU64,
        p5: AtomicU64,
        /// `f64` bits: the median of an even count is the mean of the middle two.
        median: AtomicU64,
        p95: AtomicU64,
        max: AtomicU64,
        negative: AtomicU64,
    }

    impl PhaseSummary {
        /// Publishes `summary` and its count of negative differences.
        pub fn store(&self, summary: &samples::Summary<i64>, negative: u64) {
            self.count.store(summary.count as u64, Ordering::Relaxed);
            self.min.store(summary.min as u64, Ordering::Relaxed);
            self.p5.store(summary.p5 as u64, Ordering::Relaxed);
            self.median.store(summary.median.to_bits(), Ordering::Relaxed);
            self.p95.store(summary.p95 as u64, Ordering::Relaxed);
            self.max.store(summary.max as u64, Ordering::Relaxed);
            self.negative.store(negative, Ordering::Relaxed);
        }

        /// What [`store`](Self::store) published (the mean is not kept).
        pub fn load(&self) -> (samples::Summary<i64>, u64) {
            let signed = |word: &AtomicU64| word.load(Ordering::Relaxed) as i64;
            let summary = samples::Summary {
                count: self.count.load(Ordering::Relaxed) as usize,
                min: signed(&self.min),
                p5: signed(&self.p5),
                median: f64::from_bits(self.median.load(Ordering::Relaxed)),
                p95: signed(&self.p95),
                max: signed(&self.max),
                mean: 0.0,
            };
            (summary, self.negative.load(Ordering::Relaxed))
        }
    }
}
