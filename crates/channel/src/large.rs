//! Large messages: chunking into slots and reassembly (Popcorn 5.3.4).
//!
//! A large message of any length travels as a run of chunk messages,
//! reserved in the receive queue with one atomic add so that no other
//! message falls between them. Every chunk has [`FLAG_CHUNK`]; the first
//! also [`FLAG_FIRST`], the last also [`FLAG_LAST`] (a one-chunk message has
//! both). The chunk header is at the start of the payload, little-endian:
//!
//! | bytes  | field          | in            |
//! |--------|----------------|---------------|
//! | 0..4   | message id     | every chunk   |
//! | 4..8   | chunk index    | every chunk   |
//! | 8..16  | total length   | first chunk   |
//! | 16..20 | chunk count    | first chunk   |
//!
//! The rest of the payload is data: 36 bytes in the first chunk, 48 in the
//! others. Every chunk but the last is full, so the chunk count follows
//! from the total length and the receiver checks both. Unlike Popcorn's
//! 7-bit sequence number, indexes and counts are 32 bits (no 127-chunk cap;
//! 2^32 chunks is about 200 GiB).

use alloc::vec::Vec;

use crate::message::{FLAG_CHUNK, FLAG_FIRST, FLAG_LAST, KIND_PADDING, PAYLOAD_CAPACITY};
use crate::{ChannelError, Message, MpscQueue};

/// Header bytes at the start of every chunk: message id and chunk index.
pub const CHUNK_HEADER_LEN: usize = 8;
/// Header bytes of a first chunk: also the total length and chunk count.
pub const FIRST_CHUNK_HEADER_LEN: usize = 20;
/// Data bytes in a first chunk.
pub const FIRST_CHUNK_DATA_LEN: usize = PAYLOAD_CAPACITY - FIRST_CHUNK_HEADER_LEN;
/// Data bytes in every later chunk but the last.
pub const CHUNK_DATA_LEN: usize = PAYLOAD_CAPACITY - CHUNK_HEADER_LEN;

/// Number of chunks (slots) a large message of `total_len` bytes takes.
pub const fn chunk_count(total_len: u64) -> u64 {
    let first = FIRST_CHUNK_DATA_LEN as u64;
    let later = CHUNK_DATA_LEN as u64;
    if total_len <= first {
        1
    } else {
        1 + (total_len - first).div_ceil(later)
    }
}

/// Sends `bytes` as one large message of `kind` through `queue` from sender
/// id `sender`: reserves every chunk's slot with one `fetch_add`, then writes
/// them in order. The reservation's first ticket is the message id. Waits
/// without bound for the receiver (host use; the kernel calls
/// [`send_large_within`]).
///
/// With more chunks than `N` slots this returns only after the receiver
/// has consumed all but the last `N`, so the receiver must run
/// concurrently (on another core, or from an interrupt on this one).
pub fn send_large<const N: usize, const SENDERS: usize>(
    queue: &MpscQueue<N, SENDERS>,
    sender: usize,
    kind: u16,
    bytes: &[u8],
) -> Result<(), ChannelError> {
    send_large_within(queue, sender, kind, bytes, || true)
}

/// [`send_large`] with a bounded wait: while a chunk's slot is not free it
/// calls `keep_waiting()` between polls, and when that returns false it
/// abandons the rest of the message ([`Reservation::push_or_give_up`]) and
/// fails with [`ChannelError::GaveUp`]. The receiver skips the abandoned
/// chunks with [`MpscReceiver::skip_abandoned`](crate::MpscReceiver::skip_abandoned)
/// and must reset its reassembler when it does. Also fails, before taking
/// any ticket, with [`ChannelError::BadKind`], [`ChannelError::TooLong`],
/// [`ChannelError::NoSuchSender`] or [`ChannelError::EndpointTaken`].
///
/// [`Reservation::push_or_give_up`]: crate::Reservation::push_or_give_up
pub fn send_large_within<const N: usize, const SENDERS: usize>(
    queue: &MpscQueue<N, SENDERS>,
    sender: usize,
    kind: u16,
    bytes: &[u8],
    mut keep_waiting: impl FnMut() -> bool,
) -> Result<(), ChannelError> {
    // Check everything before reserving, so a refused message costs no slot.
    let chunks = LargeMessageChunks::new(kind, 0, bytes)?;
    let mut reservation = queue.reserve(sender, chunks.len())?;
    let chunks = chunks.with_message_id(reservation.first_ticket() as u32);
    for chunk in chunks {
        reservation.push_or_give_up(&chunk, &mut keep_waiting)?;
    }
    Ok(())
}

/// The chunk messages of one large message, in order.
///
/// Usable with any transport that keeps order (an [`MpscQueue`]
/// reservation, or a [`Urpc`](crate::Urpc) ring).
#[derive(Clone, Debug)]
pub struct LargeMessageChunks<'a> {
    kind: u16,
    message_id: u32,
    bytes: &'a [u8],
    chunk_count: u32,
    next_index: u32,
    offset: usize,
}

impl<'a> LargeMessageChunks<'a> {
    /// Plans the chunks of `bytes`. Fails with [`ChannelError::BadKind`] for
    /// kind 0 and [`ChannelError::TooLong`] beyond 2^32 chunks.
    pub fn new(kind: u16, message_id: u32, bytes: &'a [u8]) -> Result<Self, ChannelError> {
        if kind == KIND_PADDING {
            return Err(ChannelError::BadKind);
        }
        let chunk_count = u32::try_from(chunk_count(bytes.len() as u64)).map_err(|_| ChannelError::TooLong)?;
        Ok(Self { kind, message_id, bytes, chunk_count, next_index: 0, offset: 0 })
    }

    /// The same chunks under another message id.
    pub fn with_message_id(self, message_id: u32) -> Self {
        Self { message_id, ..self }
    }
}

impl Iterator for LargeMessageChunks<'_> {
    type Item = Message;

    fn next(&mut self) -> Option<Message> {
        if self.next_index == self.chunk_count {
            return None;
        }
        let index = self.next_index;
        let mut payload = [0u8; PAYLOAD_CAPACITY];
        payload[0..4].copy_from_slice(&self.message_id.to_le_bytes());
        payload[4..8].copy_from_slice(&index.to_le_bytes());
        let mut flags = FLAG_CHUNK;
        let (header_len, data_capacity) = if index == 0 {
            flags |= FLAG_FIRST;
            payload[8..16].copy_from_slice(&(self.bytes.len() as u64).to_le_bytes());
            payload[16..20].copy_from_slice(&self.chunk_count.to_le_bytes());
            (FIRST_CHUNK_HEADER_LEN, FIRST_CHUNK_DATA_LEN)
        } else {
            (CHUNK_HEADER_LEN, CHUNK_DATA_LEN)
        };
        if index + 1 == self.chunk_count {
            flags |= FLAG_LAST;
        }
        let data_len = data_capacity.min(self.bytes.len() - self.offset);
        payload[header_len..header_len + data_len].copy_from_slice(&self.bytes[self.offset..self.offset + data_len]);
        self.offset += data_len;
        self.next_index += 1;
        let message = Message::build(self.kind, flags, &payload[..header_len + data_len]);
        // `new` refused kind 0 and the length is at most 56 by construction.
        message.ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = (self.chunk_count - self.next_index) as usize;
        (remaining, Some(remaining))
    }
}

impl ExactSizeIterator for LargeMessageChunks<'_> {}

/// A large message being collected.
#[derive(Debug)]
struct PartialMessage {
    kind: u16,
    message_id: u32,
    total_len: usize,
    chunk_count: u32,
    next_index: u32,
    data: Vec<u8>,
}

/// Receiver-side state machine that rebuilds large messages from their
/// chunks (Popcorn fig. 5.3), validating everything it is told.
///
/// Owned by the receiver in its private memory. Feed it every chunk message
/// in arrival order. After an error it is back to idle, so later messages
/// still work.
///
/// Memory is bounded: it holds at most one message's buffer, allocated once
/// when a first chunk arrives, of exactly the announced length, which must
/// not exceed `max_len` (else `TooLong`, before allocating). The allocation
/// is fallible (`try_reserve_exact`): no memory is `NoMemory`, never an
/// abort. [`Reassembler::bytes_held`] tells the kernel what it holds now.
#[derive(Debug)]
pub struct Reassembler {
    max_len: usize,
    partial: Option<PartialMessage>,
}

impl Reassembler {
    /// A reassembler that refuses (without allocating) any large message
    /// announcing more than `max_len` bytes.
    pub const fn new(max_len: usize) -> Self {
        Self { max_len, partial: None }
    }

    /// Whether a large message is partly collected.
    pub fn is_collecting(&self) -> bool {
        self.partial.is_some()
    }

    /// Drops any partly collected message (and frees its buffer). Call it
    /// when the receiver skipped a ticket while collecting
    /// ([`MpscReceiver::skip_abandoned`](crate::MpscReceiver::skip_abandoned)).
    pub fn reset(&mut self) {
        self.partial = None;
    }

    /// Heap bytes held for the message being collected (its buffer's
    /// capacity: the announced length, at most `max_len`); 0 when idle.
    pub fn bytes_held(&self) -> usize {
        self.partial.as_ref().map_or(0, |partial| partial.data.capacity())
    }

    /// Feeds one received chunk. Returns the kind and bytes when this chunk
    /// completes a large message, `Ok(None)` when more chunks are due, and
    /// an error for anything malformed. After an error the reassembler is
    /// idle again: the partly collected message and the offending chunk are
    /// both dropped, and the next first chunk starts afresh.
    pub fn push(&mut self, message: &Message) -> Result<Option<(u16, Vec<u8>)>, ChannelError> {
        let result = self.accept(message);
        if result.is_err() {
            self.partial = None;
        }
        result
    }

    fn accept(&mut self, message: &Message) -> Result<Option<(u16, Vec<u8>)>, ChannelError> {
        message.validate()?;
        if !message.is_chunk() {
            return Err(ChannelError::BadFlags);
        }
        let payload = message.payload();
        if payload.len() < CHUNK_HEADER_LEN {
            return Err(ChannelError::BadLength);
        }
        if message.flags & FLAG_FIRST != 0 {
            if self.partial.is_some() {
                // A new message began before the last chunk of this one.
                return Err(ChannelError::ChunkGap);
            }
            return self.start(message);
        }
        let Some(partial) = self.partial.as_mut() else {
            return Err(ChannelError::ChunkGap);
        };
        if read_u32(payload, 0) != partial.message_id {
            return Err(ChannelError::ChunkMismatch);
        }
        if message.kind != partial.kind {
            return Err(ChannelError::BadKind);
        }
        let index = read_u32(payload, 4);
        if index < partial.next_index {
            return Err(ChannelError::ChunkDuplicate);
        }
        if index > partial.next_index {
            return Err(ChannelError::ChunkGap);
        }
        let data = &payload[CHUNK_HEADER_LEN..];
        let remaining = partial.total_len - partial.data.len();
        let is_last = index + 1 == partial.chunk_count;
        if data.len() > remaining {
            return Err(ChannelError::ChunkOverrun);
        }
        if is_last {
            if data.len() < remaining {
                return Err(ChannelError::ChunkUnderrun);
            }
            if message.flags & FLAG_LAST == 0 {
                return Err(ChannelError::BadFlags);
            }
        } else if message.flags & FLAG_LAST != 0 || data.len() < CHUNK_DATA_LEN {
            return Err(ChannelError::ChunkUnderrun);
        }
        partial.data.extend_from_slice(data);
        partial.next_index += 1;
        if is_last {
            let partial = self.partial.take().expect("collecting");
            return Ok(Some((partial.kind, partial.data)));
        }
        Ok(None)
    }

    /// Parses and checks a first chunk; completes one-chunk messages.
    fn start(&mut self, message: &Message) -> Result<Option<(u16, Vec<u8>)>, ChannelError> {
        let payload = message.payload();
        if payload.len() < FIRST_CHUNK_HEADER_LEN {
            return Err(ChannelError::BadLength);
        }
        if read_u32(payload, 4) != 0 {
            return Err(ChannelError::ChunkGap);
        }
        let total_len = u64::from_le_bytes(payload[8..16].try_into().expect("8 bytes"));
        if total_len > self.max_len as u64 {
            return Err(ChannelError::TooLong);
        }
        let total_len = total_len as usize;
        let announced_count = read_u32(payload, 16);
        if u64::from(announced_count) != chunk_count(total_len as u64) {
            return Err(ChannelError::BadLength);
        }
        let data = &payload[FIRST_CHUNK_HEADER_LEN..];
        if data.len() > total_len {
            return Err(ChannelError::ChunkOverrun);
        }
        let is_last = announced_count == 1;
        if is_last {
            if data.len() < total_len {
                return Err(ChannelError::ChunkUnderrun);
            }
            if message.flags & FLAG_LAST == 0 {
                return Err(ChannelError::BadFlags);
            }
        } else if message.flags & FLAG_LAST != 0 || data.len() < FIRST_CHUNK_DATA_LEN {
            return Err(ChannelError::ChunkUnderrun);
        }
        let mut bytes = Vec::new();
        // Fallible: a receive path must not panic on allocation failure.
        bytes.try_reserve_exact(total_len).map_err(|_| ChannelError::NoMemory)?;
        bytes.extend_from_slice(data);
        if is_last {
            return Ok(Some((message.kind, bytes)));
        }
        self.partial = Some(PartialMessage {
            kind: message.kind,
            message_id: read_u32(payload, 0),
            total_len,
            chunk_count: announced_count,
            next_index: 1,
            data: bytes,
        });
        Ok(None)
    }
}

/// Little-endian `u32` at `offset` (the caller checked the length).
fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use std::thread;
    use std::vec;

    fn pattern(len: usize, seed: u32) -> Vec<u8> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect()
    }

    fn round_trip(bytes: &[u8]) -> Vec<u8> {
        let mut reassembler = Reassembler::new(bytes.len());
        let chunks: Vec<_> = LargeMessageChunks::new(42, 9, bytes).unwrap().collect();
        assert_eq!(chunks.len() as u64, chunk_count(bytes.len() as u64));
        let (last, rest) = chunks.split_last().unwrap();
        for chunk in rest {
            assert_eq!(reassembler.push(chunk), Ok(None));
        }
        let (kind, data) = reassembler.push(last).unwrap().unwrap();
        assert_eq!(kind, 42);
        assert!(!reassembler.is_collecting());
        data
    }

    #[test]
    fn chunk_counts_at_boundaries() {
        assert_eq!(chunk_count(0), 1);
        assert_eq!(chunk_count(36), 1);
        assert_eq!(chunk_count(37), 2);
        assert_eq!(chunk_count(36 + 48), 2);
        assert_eq!(chunk_count(36 + 49), 3);
        for len in [0, 1, 35, 36, 37, 83, 84, 85, 132, 133, 1000] {
            assert_eq!(round_trip(&pattern(len, len as u32)), pattern(len, len as u32));
        }
    }

    #[test]
    fn refuses_too_long_before_allocating() {
        let bytes = pattern(100, 1);
        let mut reassembler = Reassembler::new(99);
        let first = LargeMessageChunks::new(5, 1, &bytes).unwrap().next().unwrap();
        assert_eq!(reassembler.push(&first), Err(ChannelError::TooLong));
        // A forged first chunk announcing an absurd length.
        let mut forged = first;
        forged.payload[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(Reassembler::new(usize::MAX).push(&forged), Err(ChannelError::BadLength));
        assert_eq!(Reassembler::new(1 << 20).push(&forged), Err(ChannelError::TooLong));
        assert!(!reassembler.is_collecting());
    }

    #[test]
    fn errors_reset_so_the_next_message_works() {
        let old = pattern(200, 2);
        let new = pattern(150, 3);
        let old_chunks: Vec<_> = LargeMessageChunks::new(7, 1, &old).unwrap().collect();
        let new_chunks: Vec<_> = LargeMessageChunks::new(8, 2, &new).unwrap().collect();
        let mut reassembler = Reassembler::new(1000);
        assert_eq!(reassembler.push(&old_chunks[0]), Ok(None));
        assert_eq!(reassembler.push(&old_chunks[1]), Ok(None));
        assert!(reassembler.is_collecting());
        // The new message's first chunk reveals the cut and is dropped too.
        assert_eq!(reassembler.push(&new_chunks[0]), Err(ChannelError::ChunkGap));
        assert!(!reassembler.is_collecting());
        assert_eq!(reassembler.push(&new_chunks[1]), Err(ChannelError::ChunkGap));
        assert_eq!(reassembler.push(&old_chunks[2]), Err(ChannelError::ChunkGap));
        for chunk in &new_chunks[..new_chunks.len() - 1] {
            assert_eq!(reassembler.push(chunk), Ok(None));
        }
        assert_eq!(reassembler.push(new_chunks.last().unwrap()), Ok(Some((8, new.clone()))));
        // A mismatched id, a wrong kind, a plain message: each resets.
        assert_eq!(reassembler.push(&old_chunks[0]), Ok(None));
        assert_eq!(reassembler.push(&new_chunks[1]), Err(ChannelError::ChunkMismatch));
        assert_eq!(reassembler.push(&old_chunks[0]), Ok(None));
        let wrong_kind = Message { kind: 9, ..old_chunks[1] };
        assert_eq!(reassembler.push(&wrong_kind), Err(ChannelError::BadKind));
        assert_eq!(reassembler.push(&Message::new(9, b"plain").unwrap()), Err(ChannelError::BadFlags));
        assert!(!reassembler.is_collecting());
        assert_eq!(round_trip(&new), new);
    }

    #[test]
    fn one_mebibyte_through_a_64_slot_queue_between_threads() {
        const LEN: usize = 1 << 20;
        let queue = crate::MpscQueue::<64, 1>::new_boxed();
        let queue = &*queue;
        let bytes = pattern(LEN, 0xdead_beef);
        thread::scope(|scope| {
            scope.spawn(|| {
                // A small message before and after, from the same sender.
                queue.send_spin(0, &Message::new(3, b"before").unwrap()).unwrap();
                send_large(queue, 0, 77, &bytes).unwrap();
                queue.send_spin(0, &Message::new(3, b"after").unwrap()).unwrap();
            });
            let mut receiver = queue.receiver().unwrap();
            let mut reassembler = Reassembler::new(LEN);
            let mut small = vec![];
            let mut large = None;
            let mut nr_chunks = 0u64;
            while small.len() < 2 {
                let Some(message) = receiver.try_recv() else {
                    thread::yield_now();
                    continue;
                };
                message.validate().unwrap();
                if message.is_chunk() {
                    nr_chunks += 1;
                    if let Some(done) = reassembler.push(&message).unwrap() {
                        assert!(large.is_none());
                        large = Some(done);
                    }
                } else {
                    small.push(message.payload().to_vec());
                }
            }
            assert_eq!(small, [b"before".to_vec(), b"after".to_vec()]);
            assert_eq!(nr_chunks, chunk_count(LEN as u64));
            let (kind, received) = large.expect("large message complete");
            assert_eq!(kind, 77);
            assert_eq!(received.len(), LEN);
            assert!(received == bytes, "1 MiB message differs");
        });
    }

    #[test]
    fn concurrent_large_senders_never_interleave() {
        let queue = crate::MpscQueue::<16, 3>::new_boxed();
        let queue = &*queue;
        let payloads: Vec<Vec<u8>> = (0..3).map(|sender| pattern(5000 + sender * 77, sender as u32 + 10)).collect();
        thread::scope(|scope| {
            for (sender, bytes) in payloads.iter().enumerate() {
                scope.spawn(move || {
                    for _ in 0..20 {
                        send_large(queue, sender, 10 + sender as u16, bytes).unwrap();
                    }
                });
            }
            let mut receiver = queue.receiver().unwrap();
            let mut reassembler = Reassembler::new(1 << 16);
            let mut nr_received = [0; 3];
            while nr_received.iter().sum::<usize>() < 60 {
                let Some(message) = receiver.try_recv() else {
                    thread::yield_now();
                    continue;
                };
                if let Some((kind, data)) = reassembler.push(&message).unwrap() {
                    let sender = usize::from(kind - 10);
                    assert!(data == payloads[sender]);
                    nr_received[sender] += 1;
                }
            }
            assert_eq!(nr_received, [20; 3]);
        });
    }
}
