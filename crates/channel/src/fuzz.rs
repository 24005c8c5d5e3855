//! Fuzzing entry point: decode untrusted slot images and reassemble them.
//!
//! `fuzz/fuzz_targets/decode.rs` (cargo-fuzz, nightly) and the stable replay
//! test `tests/fuzz_corpus.rs` both call [`fuzz_decode`].

use alloc::vec::Vec;

use crate::message::CHANNEL_FLAGS;
use crate::{LargeMessageChunks, Message, Reassembler, Urpc, PAYLOAD_CAPACITY};

/// Bytes of one slot image: sequence word, header, payload.
pub const SLOT_IMAGE_LEN: usize = 64;

/// Largest large message [`fuzz_decode`] accepts.
pub const FUZZ_MAX_LEN: usize = 4096;

/// The raw bytes of a slot as another core left them in shared memory:
/// bytes 0..4 sequence word (ignored here), 4..6 kind (little-endian),
/// 6 flags, 7 len, 8..64 payload.
pub fn decode_slot_image(image: &[u8; SLOT_IMAGE_LEN]) -> Message {
    let mut payload = [0u8; PAYLOAD_CAPACITY];
    payload.copy_from_slice(&image[8..]);
    Message { kind: u16::from_le_bytes([image[4], image[5]]), flags: image[6], len: image[7], payload }
}

/// The slot image of `message` with sequence word `sequence`.
pub fn encode_slot_image(message: &Message, sequence: u32) -> [u8; SLOT_IMAGE_LEN] {
    let mut image = [0u8; SLOT_IMAGE_LEN];
    image[..4].copy_from_slice(&sequence.to_le_bytes());
    image[4..6].copy_from_slice(&message.kind.to_le_bytes());
    image[6] = message.flags;
    image[7] = message.len;
    image[8..].copy_from_slice(&message.payload);
    image
}

/// What one [`fuzz_decode`] run saw (for corpus coverage checks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuzzOutcome {
    /// Slot images decoded.
    pub nr_messages: usize,
    /// Messages rejected by [`Message::validate`].
    pub nr_invalid: usize,
    /// Chunks the reassembler refused.
    pub nr_chunk_errors: usize,
    /// Large messages completed (and checked against their chunks).
    pub nr_completed: usize,
}

/// Treats `data` as consecutive 64-byte slot images (a short tail is
/// ignored) and runs the receiver's decode path on each: copy through a
/// URPC ring, validate, and feed chunks to a [`Reassembler`].
///
/// Panics if an invariant breaks: a ring copy differs from what was put in,
/// or a completed large message is not exactly what its accepted chunks
/// encode (re-chunking the result must give back the same chunks).
pub fn fuzz_decode(data: &[u8]) -> FuzzOutcome {
    let mut outcome = FuzzOutcome::default();
    let ring = Urpc::<4>::new_boxed();
    let (Ok(mut sender), Ok(mut receiver)) = (ring.sender(), ring.receiver()) else {
        unreachable!("a fresh ring has both endpoints free");
    };
    let mut reassembler = Reassembler::new(FUZZ_MAX_LEN);
    // The chunks accepted for the message being collected.
    let mut accepted: Vec<Message> = Vec::new();
    for image in data.chunks_exact(SLOT_IMAGE_LEN) {
        let image: &[u8; SLOT_IMAGE_LEN] = image.try_into().expect("exact chunk");
        let sent = decode_slot_image(image);
        outcome.nr_messages += 1;
        // Whatever the bytes, the ring must carry them unchanged.
        assert!(sender.try_send(&sent).is_ok(), "ring drained every round");
        let message = receiver.try_recv().expect("just sent");
        assert_eq!(message, sent, "ring copy differs");
        if message.validate().is_err() {
            outcome.nr_invalid += 1;
            continue;
        }
        if !message.is_chunk() {
            continue;
        }
        match reassembler.push(&message) {
            Err(_) => {
                outcome.nr_chunk_errors += 1;
                assert!(!reassembler.is_collecting(), "not reset after an error");
                accepted.clear();
            }
            Ok(None) => {
                assert!(reassembler.is_collecting());
                accepted.push(message);
            }
            Ok(Some((kind, bytes))) => {
                accepted.push(message);
                check_completed(kind, &bytes, &accepted);
                outcome.nr_completed += 1;
                accepted.clear();
            }
        }
    }
    outcome
}

/// The accepted chunks must be exactly the canonical chunks of the result.
fn check_completed(kind: u16, bytes: &[u8], accepted: &[Message]) {
    assert!(bytes.len() <= FUZZ_MAX_LEN, "over the limit");
    let message_id = u32::from_le_bytes(accepted[0].payload()[..4].try_into().expect("4 bytes"));
    let expected = LargeMessageChunks::new(kind, message_id, bytes).expect("kind was valid");
    assert_eq!(expected.len(), accepted.len(), "chunk count");
    for (expected, got) in expected.zip(accepted) {
        assert_eq!(expected.kind, got.kind);
        assert_eq!(expected.flags, got.flags & CHANNEL_FLAGS);
        assert_eq!(expected.payload(), got.payload(), "accepted a non-canonical chunk");
    }
}
