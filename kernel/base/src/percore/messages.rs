//! The channel area of the shared region: where every core's receive queues, the URPC rings
//! between pairs of cores and the multicast groups lie. `msg` drives them; the base lays them
//! out because the shared region is the base's (see `percore::shared`).

use super::shared::{CacheLine, SharedLock};
use channel::{MpscQueue, Multicast, Urpc};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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
pub type PairRing = Urpc<PAIR_SLOTS>;
pub type Group = Multicast<GROUP_SLOTS, 64>;

/// How a receiver learns of a message on a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum NotifyMode {
    /// No notification: the receiver finds messages when it looks (spinning, or on its next
    /// timer tick when idle).
    Poll = 0,
    /// The sender sends an IPI after every message.
    Ipi = 1,
    /// The receiver polls for a while after its last message, then arms an IPI and sleeps;
    /// the sender interrupts it only when armed (Barrelfish).
    Hybrid = 2,
    /// The receiver MONITORs a doorbell line and MWAITs; the sender writes the doorbell.
    /// Falls back to `Hybrid` where CPUID offers no MONITOR/MWAIT.
    Mwait = 3,
}

impl NotifyMode {
    /// From its number; unknown numbers mean `Hybrid`, the default.
    pub fn from_u32(value: u32) -> Self {
        match value {
            0 => Self::Poll,
            1 => Self::Ipi,
            3 => Self::Mwait,
            _ => Self::Hybrid,
        }
    }

    /// Parses `msg mode`'s word.
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "poll" => Self::Poll,
            "ipi" => Self::Ipi,
            "hybrid" => Self::Hybrid,
            "mwait" => Self::Mwait,
            _ => return None,
        })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Poll => "poll",
            Self::Ipi => "ipi",
            Self::Hybrid => "hybrid",
            Self::Mwait => "mwait",
        }
    }

    /// Every mode, in order.
    pub const ALL: [Self; 4] = [Self::Poll, Self::Ipi, Self::Hybrid, Self::Mwait];
}

/// Default spin of `Hybrid` before arming the IPI, in nanoseconds.
pub const DEFAULT_HYBRID_SPIN_NS: u64 = 20_000;

/// A receiving core's notification state, alone on its cache line; the owner writes `armed`
/// and `mode`, senders read them and write `doorbell`.
#[repr(C, align(64))]
pub struct NotifyLine {
    /// [`NotifyMode`] of the core's receive queues.
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

/// One core's receiving side.
#[repr(C)]
pub struct CoreChannels {
    pub high: ReceiveQueue,
    pub normal: ReceiveQueue,
    pub notify: NotifyLine,
    /// [`NotifyMode`] of the URPC ring from each core to this one.
    pub pair_modes: [AtomicU32; MESSAGING_CORES],
}

/// The channel area of the shared region. All-zero is valid: empty rings, poll mode.
#[repr(C)]
pub struct MessageArea {
    pub cores: [CoreChannels; MESSAGING_CORES],
    /// `pairs[from][to]`: the URPC ring from core `from` to core `to`.
    pub pairs: [[PairRing; MESSAGING_CORES]; MESSAGING_CORES],
    pub groups: [Group; GROUPS],
    pub bench: BenchArea,
}

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
    /// Stores `summary` and how many differences were negative.
    pub fn store(&self, summary: &samples::Summary<i64>, negative: u64) {
        self.count.store(summary.count as u64, Ordering::Relaxed);
        self.min.store(summary.min as u64, Ordering::Relaxed);
        self.p5.store(summary.p5 as u64, Ordering::Relaxed);
        self.median.store(summary.median.to_bits(), Ordering::Relaxed);
        self.p95.store(summary.p95 as u64, Ordering::Relaxed);
        self.max.store(summary.max as u64, Ordering::Relaxed);
        self.negative.store(negative, Ordering::Relaxed);
    }

    /// The summary stored and how many differences were negative.
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
