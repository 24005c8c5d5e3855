//! The raw cache-line ping-pong's lines, and the bounded spins and deadlines every measurement uses.

use super::*;

pub(super) fn wait_ready() -> bool {
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz;
    while cpu::read_tsc() < deadline {
        if area().bench.ready.0.swap(0, Ordering::AcqRel) != 0 {
            return true;
        }
        cpu::relax();
    }
    false
}

/// Writes a line-sized message: seven data words, then the sequence word with Release.
pub(super) fn write_line(line: &[AtomicU64; 8], sequence: u64) {
    for (i, word) in line.iter().take(7).enumerate() {
        word.store(sequence.wrapping_mul(i as u64 + 1), Ordering::Relaxed);
    }
    line[7].store(sequence, Ordering::Release);
}

/// Polls between deadline checks: a TSC read in every poll would slow the loop being timed.
pub(super) const POLLS_PER_CHECK: u32 = 1024;

/// Waits until `done()`, relaxing between polls, or until the TSC passes `deadline`; returns
/// whether `done()` held.
#[inline(always)]
pub(super) fn spin_until(deadline: u64, mut done: impl FnMut() -> bool) -> bool {
    let mut polls = 0u32;
    while !done() {
        polls += 1;
        if polls == POLLS_PER_CHECK {
            if cpu::read_tsc() > deadline {
                return false;
            }
            polls = 0;
        }
        cpu::relax();
    }
    true
}

/// Waits (until `deadline`) for sequence `sequence` on a line, then reads its seven data
/// words; `Some(true)` if they match it, `Some(false)` for a torn line, `None` if it never came.
pub(super) fn read_line(line: &[AtomicU64; 8], sequence: u64, deadline: u64) -> Option<bool> {
    if !spin_until(deadline, || line[7].load(Ordering::Acquire) == sequence) {
        return None;
    }
    Some(line.iter().take(7).enumerate().all(|(i, w)| w.load(Ordering::Relaxed) == sequence.wrapping_mul(i as u64 + 1)))
}

/// The TSC `seconds` from now.
pub(super) fn deadline_in(seconds: u64) -> u64 {
    cpu::read_tsc() + shared::facts().tsc_hz * seconds
}

pub(super) fn spin_cycles(cycles: u64) {
    let start = cpu::read_tsc();
    while cpu::read_tsc() - start < cycles {
        cpu::relax();
    }
}
