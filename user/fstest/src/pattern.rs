//! The bytes the cases write, made from a seed, and the checksum that compares a transfer.

/// `length` bytes from `seed`: SplitMix64's output, eight bytes per step, little-endian. Any
/// two seeds give different bytes and no byte value is favoured, so a misplaced, dropped or
/// zeroed page shows up as a difference.
pub fn pattern(seed: u64, length: usize) -> Vec<u8> {
    let mut state = seed;
    let mut bytes = Vec::with_capacity(length + 8);
    while bytes.len() < length {
        // SplitMix64 (Steele, Lea, Flood 2014): the golden-ratio step, then two xor-multiplies.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut word = state;
        word = (word ^ (word >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        word = (word ^ (word >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        word ^= word >> 31;
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes.truncate(length);
    bytes
}

/// FNV-1a, 64 bits, continued from `hash` (start from [`CHECKSUM_START`]): a checksum of a
/// stream read in pieces of any size.
pub fn checksum(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The FNV-1a offset basis.
pub const CHECKSUM_START: u64 = 0xcbf2_9ce4_8422_2325;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_is_fixed_by_its_seed() {
        // SplitMix64 from seed 0 starts 0xe220a8397b1dcdaf (the reference implementation's).
        assert_eq!(pattern(0, 8), 0xe220_a839_7b1d_cdafu64.to_le_bytes());
        assert_eq!(pattern(7, 100_000), pattern(7, 100_000));
        assert_eq!(pattern(7, 100_000)[..5000], pattern(7, 5000)[..], "a prefix of a longer one");
        assert_ne!(pattern(7, 64), pattern(8, 64));
        assert!(pattern(1, 0).is_empty());
        assert_eq!(pattern(1, 4097).len(), 4097);
    }

    #[test]
    fn the_checksum_is_fnv1a_in_any_pieces() {
        assert_eq!(checksum(CHECKSUM_START, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(checksum(CHECKSUM_START, b"a"), 0xaf63_dc4c_8601_ec8c);
        let data = pattern(3, 10_000);
        let whole = checksum(CHECKSUM_START, &data);
        let pieces = data.chunks(333).fold(CHECKSUM_START, checksum);
        assert_eq!(whole, pieces);
    }
}
