//! The time-stamp counter: reading it, and its rate measured against the monotonic clock.

use std::time::{Duration, Instant};

/// Reads the time-stamp counter. Not serialising: the shortest thing measured (a system call)
/// is hundreds of cycles, which swamps the few instructions that may move across the read.
#[inline(always)]
pub fn read() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU, reads no memory and has no preconditions; Linux
    // and Reef leave it enabled in user mode (CR4.TSD clear), so it cannot fault.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Spins until the monotonic clock moves and returns the new time with the TSC read right
/// after: a window from edge to edge loses nothing to the clock's granularity.
fn next_clock_edge() -> (Instant, u64) {
    let before = Instant::now();
    loop {
        let now = Instant::now();
        let cycles = read();
        if now != before {
            return (now, cycles);
        }
    }
}

/// TSC cycles per second, counted over at least `window` of the monotonic clock. The wait
/// spins on the clock rather than sleeping, so it needs no timer.
pub fn calibrate(window: Duration) -> u64 {
    let (start, start_cycles) = next_clock_edge();
    while start.elapsed() < window {
        std::hint::spin_loop();
    }
    let (end, end_cycles) = next_clock_edge();
    hz_from(end_cycles.wrapping_sub(start_cycles), end - start)
}

fn hz_from(cycles: u64, elapsed: Duration) -> u64 {
    (cycles as u128 * 1_000_000_000 / elapsed.as_nanos().max(1)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_arithmetic() {
        assert_eq!(hz_from(2_000_000, Duration::from_millis(1)), 2_000_000_000);
        assert_eq!(hz_from(5, Duration::ZERO), 5_000_000_000, "no division by zero");
    }

    #[test]
    fn the_counter_runs_at_a_plausible_rate() {
        let hz = calibrate(Duration::from_millis(20));
        assert!((100_000_000..20_000_000_000).contains(&hz), "{hz}");
    }
}
