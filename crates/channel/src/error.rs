//! The one error type of the channel crate.

use core::fmt;

/// Why a channel operation or a message check failed.
///
/// Receivers never trust shared memory: a message that fails a check is
/// reported with one of these so the caller can drop it and count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelError {
    /// The ring has no free slot for this message; nothing was written.
    Full,
    /// The multicast group is closed: sends and joins are refused, and a
    /// member has read every message that was sent before the close.
    Closed,
    /// This endpoint (sender or receiver) of the ring is already held by
    /// someone else, or this MPSC sender id already has a send or a
    /// reservation in progress.
    EndpointTaken,
    /// The payload is longer than a slot holds, or a large message is longer
    /// than the receiver accepts (or than the chunk format can count).
    TooLong,
    /// A length field is impossible: `len` above 56, a chunk shorter than its
    /// chunk header, or a chunk count that does not match the total length.
    BadLength,
    /// The message kind is 0 (reserved for padding), or a chunk's kind differs
    /// from the kind of the first chunk of its large message.
    BadKind,
    /// The channel flag bits are inconsistent (FIRST or LAST without CHUNK,
    /// LAST missing on the last chunk), or a non-chunk message was given to
    /// the reassembler.
    BadFlags,
    /// A chunk is missing: an index skipped ahead, a continuation arrived
    /// without a first chunk, or a new large message began before the
    /// previous one was complete.
    ChunkGap,
    /// A chunk index that was already received arrived again.
    ChunkDuplicate,
    /// A chunk carries a message id other than the large message being
    /// reassembled.
    ChunkMismatch,
    /// A chunk carries more data than the announced total length leaves.
    ChunkOverrun,
    /// A chunk carries less data than it must: a short chunk before the last
    /// one, or a last chunk that leaves the announced total unfilled.
    ChunkUnderrun,
    /// The reassembler could not allocate the buffer for a large message.
    NoMemory,
    /// The member id is not below the group's `MAX_MEMBERS`, or (for
    /// `evict`) no reader holds it.
    NotMember,
    /// The member id is already taken by a reader of this group.
    AlreadyMember,
    /// Every member id of the group is taken.
    GroupFull,
    /// More messages were pushed into a reservation than it reserved slots.
    ReservationExhausted,
    /// The sender id is not below the queue's `SENDERS` (MPSC) or not below
    /// 64 (multicast).
    NoSuchSender,
    /// The caller's `keep_waiting` said stop while a reserved slot was still
    /// not free: the reservation is abandoned (its unwritten tickets will be
    /// skipped by the receiver) and writes nothing more.
    GaveUp,
    /// Another sender holds the multicast group's tail (BUSY) right now;
    /// nothing was written: retry, or recover it with `break_busy` if its
    /// holder is dead.
    Busy,
}

impl fmt::Display for ChannelError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Full => "ring full",
            Self::Closed => "multicast group closed",
            Self::EndpointTaken => "channel endpoint already taken",
            Self::TooLong => "message too long",
            Self::BadLength => "impossible length field",
            Self::BadKind => "bad message kind",
            Self::BadFlags => "inconsistent channel flags",
            Self::ChunkGap => "chunk missing",
            Self::ChunkDuplicate => "chunk received twice",
            Self::ChunkMismatch => "chunk of another large message",
            Self::ChunkOverrun => "chunk data beyond the announced length",
            Self::ChunkUnderrun => "chunk data short of the announced length",
            Self::NoMemory => "no memory for a large message",
            Self::NotMember => "member id out of range",
            Self::AlreadyMember => "member id already joined",
            Self::GroupFull => "multicast group full",
            Self::ReservationExhausted => "reservation exhausted",
            Self::NoSuchSender => "sender id out of range",
            Self::GaveUp => "gave up waiting; reservation abandoned",
            Self::Busy => "another sender holds the group",
        };
        formatter.write_str(text)
    }
}

impl core::error::Error for ChannelError {}
