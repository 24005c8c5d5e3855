//! Stable replay of the decode fuzz target over a generated corpus.
//!
//! cargo-fuzz needs nightly; this runs the same [`fuzz_decode`] on 20,000
//! deterministic inputs in the normal test suite, so a panic in the
//! decoder or reassembler (or a broken invariant it asserts) fails here.
#![cfg(not(loom))]

use channel::fuzz::{encode_slot_image, fuzz_decode, FuzzOutcome, SLOT_IMAGE_LEN};
use channel::{LargeMessageChunks, Message};

const NR_INPUTS: usize = 20_000;

/// xorshift64*: small, deterministic, good enough to spread inputs.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Slot images of one valid large message of a random length and kind.
fn valid_large_message(random: &mut Random, images: &mut Vec<[u8; SLOT_IMAGE_LEN]>) {
    let len = match random.below(4) {
        0 => random.below(40),
        1 => random.below(200),
        2 => random.below(1000),
        _ => random.below(5000), // some exceed FUZZ_MAX_LEN (4096)
    } as usize;
    let bytes: Vec<u8> = (0..len).map(|_| random.byte()).collect();
    let kind = 1 + random.below(u64::from(u16::MAX)) as u16;
    let id = random.next() as u32;
    for chunk in LargeMessageChunks::new(kind, id, &bytes).unwrap() {
        images.push(encode_slot_image(&chunk, random.next() as u32));
    }
}

/// One fuzz input: random bytes, or valid chunk runs and plain messages
/// with a few mutations (byte flips, dropped, repeated or swapped slots).
fn input(random: &mut Random) -> Vec<u8> {
    if random.below(5) == 0 {
        let len = random.below(12 * SLOT_IMAGE_LEN as u64 + 1) as usize;
        return (0..len).map(|_| random.byte()).collect();
    }
    let mut images = Vec::new();
    for _ in 0..1 + random.below(3) {
        if random.below(4) == 0 {
            let payload: Vec<u8> = (0..random.below(57)).map(|_| random.byte()).collect();
            let message = Message::new(1 + random.below(1000) as u16, &payload).unwrap();
            images.push(encode_slot_image(&message, 0));
        } else {
            valid_large_message(random, &mut images);
        }
    }
    let nr_mutations = random.below(4);
    for _ in 0..nr_mutations {
        if images.is_empty() {
            break;
        }
        let index = random.below(images.len() as u64) as usize;
        match random.below(6) {
            0 => {
                images.remove(index);
            }
            1 => images.insert(index, images[index]),
            2 => {
                let other = random.below(images.len() as u64) as usize;
                images.swap(index, other);
            }
            // Flip a byte, mostly in the header and chunk header.
            3 | 4 => {
                let offset = random.below(28) as usize + 4;
                images[index][offset] ^= 1 << random.below(8);
            }
            _ => {
                let offset = random.below(SLOT_IMAGE_LEN as u64) as usize;
                images[index][offset] = random.byte();
            }
        }
    }
    let mut bytes: Vec<u8> = images.concat();
    // Sometimes a ragged tail that is not a whole slot.
    if random.below(8) == 0 {
        bytes.extend((0..random.below(SLOT_IMAGE_LEN as u64)).map(|_| random.byte()));
    }
    bytes
}

#[test]
fn replay_generated_corpus() {
    let mut random = Random(0x5eed_0fc0_ffee);
    let mut total = FuzzOutcome::default();
    for _ in 0..NR_INPUTS {
        let outcome = fuzz_decode(&input(&mut random));
        total.nr_messages += outcome.nr_messages;
        total.nr_invalid += outcome.nr_invalid;
        total.nr_chunk_errors += outcome.nr_chunk_errors;
        total.nr_completed += outcome.nr_completed;
    }
    // The corpus must reach every path: malformed headers, refused chunks,
    // and completed large messages (checked inside `fuzz_decode`).
    assert!(total.nr_invalid > 1_000, "{total:?}");
    assert!(total.nr_chunk_errors > 1_000, "{total:?}");
    assert!(total.nr_completed > 10_000, "{total:?}");
}

#[test]
fn empty_and_ragged_inputs() {
    assert_eq!(fuzz_decode(&[]), FuzzOutcome::default());
    assert_eq!(fuzz_decode(&[0xff; SLOT_IMAGE_LEN - 1]).nr_messages, 0);
    // An all-zero slot is an unwritten slot: kind 0, rejected.
    let outcome = fuzz_decode(&[0; SLOT_IMAGE_LEN * 3]);
    assert_eq!((outcome.nr_messages, outcome.nr_invalid), (3, 3));
}
