//! Random bytes for `getrandom` and `AT_RANDOM`: RDRAND where the CPU has it, else a
//! per-instance generator seeded from the TSC (not cryptographic; said in docs/processes.md).

use core::sync::atomic::{AtomicU64, Ordering};

static STATE: AtomicU64 = AtomicU64::new(0);

fn next_seeded() -> u64 {
    let mut state = STATE.load(Ordering::Relaxed);
    if state == 0 {
        state = crate::arch::cpu::read_tsc()
            ^ 0x9E37_79B9_7F4A_7C15
            ^ (u64::from(crate::percore::shared::this_core()) << 56);
    }
    // splitmix64
    state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    STATE.store(state, Ordering::Relaxed);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31) ^ crate::arch::cpu::read_tsc()
}

/// Fills `out` with random bytes.
pub fn fill(out: &mut [u8]) {
    for chunk in out.chunks_mut(8) {
        let value = crate::arch::cpu::rdrand().unwrap_or_else(next_seeded);
        chunk.copy_from_slice(&value.to_le_bytes()[..chunk.len()]);
    }
}
