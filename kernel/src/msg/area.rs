//! Where the channels are: the channel area of the shared region, its limits, and the modes
//! of notification a receiver can choose.

use crate::core::shared;

pub use crate::core::shared::message_area::{
    is_live, Group, MessageArea, NotifyLine, ReceiveQueue, GROUPS, GROUP_SLOTS, MESSAGING_CORES, PAIR_SLOTS,
};

/// Largest large message a receiver reassembles. A receiver collects at most one large
/// message per receive queue at a time (a reservation's chunks are consecutive), so two of
/// these, 2 MiB, is all that senders can make it hold: an eighth of its 16 MiB heap. A first
/// chunk announcing more is dropped and counted before anything is allocated. 1 MiB carries
/// the image of a process of 512 threads (760 bytes each), as many as a KCB records living
/// elsewhere (`kcb::block::MAX_MOVED_AWAY`).
pub const MAX_LARGE_MESSAGE: usize = 1 << 20;

/// The channel area of the shared region.
pub fn area() -> &'static MessageArea {
    &shared::get().messages
}

/// Cores that have channels on this machine.
pub fn messaging_cores() -> usize {
    (shared::facts().core_count as usize).min(MESSAGING_CORES)
}

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
