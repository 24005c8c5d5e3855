//! A small deterministic random generator, and the argument values the fuzzer draws from it.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): one 64-bit state, every seed is good, and a seed replays the same run.
#[derive(Clone, Debug)]
pub struct Random {
    state: u64,
}

impl Random {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    /// A number below `bound` (not 0); the bias of the modulo does not matter here.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    /// True one time in `odds`.
    pub fn one_in(&mut self, odds: u64) -> bool {
        self.below(odds) == 0
    }
}

/// The first address above user space on x86-64 (47-bit virtual addresses). Linux never maps
/// the page below it, so a copy that starts there and runs on must fault at the boundary.
pub const USER_END: u64 = 0x0000_8000_0000_0000;
/// The first canonical kernel-half address.
pub const KERNEL_START: u64 = 0xffff_8000_0000_0000;
/// Linux never maps below this (`vm.mmap_min_addr`); neither should Reef.
pub const LOW_END: u64 = 0x1_0000;

/// Values that often sit on a boundary a kernel checks: sign bits, 32-bit ends, page sizes.
const HUGE: [u64; 10] = [
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    0xffff_ffff_ffff_fffe,
    0xffff_ffff_ffff_f000,
    0x0000_7fff_ffff_ffff,
    1 << 40,
];

/// Draws one argument: `buffer` is the start of the fuzzer's own buffer of `buffer_size` bytes.
/// Returns the value and whether it points into the buffer.
pub fn argument(random: &mut Random, buffer: u64, buffer_size: u64) -> (u64, bool) {
    let value = match random.below(100) {
        // Small integers: descriptors, flags, commands, counts, indexes.
        0..=24 => {
            if random.one_in(2) {
                random.below(8)
            } else {
                random.below(65)
            }
        }
        25..=29 => u64::MAX, // -1
        30..=39 => {
            if random.one_in(3) {
                random.next()
            } else {
                HUGE[random.below(HUGE.len() as u64) as usize]
            }
        }
        // Bad pointers: each must fail with EFAULT and nothing written.
        40..=54 => match random.below(5) {
            0 => 0,
            1 => 1 + random.below(LOW_END - 1),
            2 => USER_END - 1 - random.below(4096),
            3 => KERNEL_START + (random.next() & 0x0000_7fff_ffff_fff8),
            _ => USER_END + (random.next() & 0x0000_00ff_ffff_ffff), // not canonical
        },
        // Into the fuzzer's own buffer: the copy paths run. Mostly 8-aligned, sometimes odd,
        // sometimes a few bytes before the guard page after it.
        55..=84 => {
            let offset = match random.below(8) {
                0 => random.below(buffer_size),
                1 => buffer_size - 1 - random.below(64),
                _ => random.below(buffer_size / 8) * 8,
            };
            return (buffer + offset, true);
        }
        _ => random.next(),
    };
    (value, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_the_same_values() {
        let first: Vec<u64> = std::iter::repeat_with({
            let mut random = Random::new(42);
            move || random.next()
        })
        .take(100)
        .collect();
        let mut again = Random::new(42);
        assert!(first.iter().all(|&value| value == again.next()));
        assert_ne!(Random::new(43).next(), first[0]);
        // SplitMix64's published first output for seed 0.
        assert_eq!(Random::new(0).next(), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn every_kind_of_argument_comes_up_and_buffer_pointers_stay_inside() {
        let mut random = Random::new(7);
        let (buffer, size) = (0x10_0000u64, 16384u64);
        let (mut small, mut minus_one, mut inside, mut kernel, mut top, mut null) = (0, 0, 0, 0, 0, 0);
        for _ in 0..100_000 {
            let (value, in_buffer) = argument(&mut random, buffer, size);
            if in_buffer {
                assert!((buffer..buffer + size).contains(&value), "{value:#x}");
                inside += 1;
            }
            small += usize::from(value <= 64);
            null += usize::from(value == 0);
            minus_one += usize::from(value == u64::MAX);
            kernel += usize::from(value >= KERNEL_START && value != u64::MAX);
            top += usize::from((USER_END - 4096..USER_END).contains(&value));
        }
        for count in [small, minus_one, inside, kernel, top, null] {
            assert!(count > 500, "{small} {minus_one} {inside} {kernel} {top} {null}");
        }
    }
}
