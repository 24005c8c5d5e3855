//! The time-stamp counter: reading it, its rate, and the cost of reading it.

use std::time::{Duration, Instant};

/// Reads the time-stamp counter. Not serialising: a round trip of hundreds of cycles or more
/// swamps the few instructions that may be reordered around it, and Popcorn (thesis §6.2.1)
/// and Barrelfish time their ping-pongs the same way.
#[inline(always)]
pub fn read_tsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU, reads no memory and has no preconditions;
    // Linux leaves it enabled in user mode (CR4.TSD clear), so it cannot fault here.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The TSC rate measured against the monotonic clock, and how coarse that clock is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// Cycles per second over the window.
    pub hz: u64,
    /// The step the clock took at the edge we waited for, in ns: tens of ns on a TSC or HPET
    /// clock source, a whole jiffy (4 ms at 250 Hz) on `refined-jiffies`.
    pub clock_step_ns: u64,
}

/// Spins until the monotonic clock moves, and returns the new time and the TSC read at once
/// after it: both ends of the window sit on a clock edge, so a clock that moves in jiffies
/// costs no granularity error.
fn next_clock_edge() -> (Instant, u64, Duration) {
    let before = Instant::now();
    loop {
        let now = Instant::now();
        let tsc = read_tsc();
        if now != before {
            return (now, tsc, now - before);
        }
    }
}

/// Counts the TSC against the monotonic clock over at least `window` (the caller picks about
/// 100 ms), from one clock edge to another.
pub fn calibrate(window: Duration) -> Calibration {
    let (start_time, start_tsc, step) = next_clock_edge();
    std::thread::sleep(window.saturating_sub(step));
    let (end_time, end_tsc, _) = next_clock_edge();
    Calibration {
        hz: hz_from(end_tsc.wrapping_sub(start_tsc), end_time - start_time),
        clock_step_ns: step.as_nanos() as u64,
    }
}

/// The TSC rate the kernel calibrated at boot (against the PIT or from CPUID), as
/// `/proc/cpuinfo` shows it in `cpu MHz` on x86 CPUs that cannot report an effective
/// frequency (QEMU's `qemu64`); `None` if there is no such line.
pub fn kernel_hz() -> Option<u64> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    kernel_hz_from(&cpuinfo)
}

/// The first `cpu MHz` of a `/proc/cpuinfo` text, in Hz.
fn kernel_hz_from(cpuinfo: &str) -> Option<u64> {
    let line = cpuinfo.lines().find(|line| line.starts_with("cpu MHz"))?;
    let megahertz: f64 = line.split(':').nth(1)?.trim().parse().ok()?;
    (megahertz > 0.0).then(|| (megahertz * 1e6).round() as u64)
}

/// A clock step above this means the monotonic clock runs on jiffies: a guest whose TSC the
/// kernel found unstable and that has no HPET or ACPI PM timer (QEMU microvm under TCG).
/// Jiffies also go missing when the host deschedules the vCPU that counts them, which skews
/// any calibration against that clock, so the kernel's own figure is used instead.
const COARSE_CLOCK_NS: u64 = 100_000;

/// Which TSC rate to convert cycles to time with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateSource {
    /// Our calibration against the monotonic clock.
    Clock,
    /// The kernel's boot-time calibration.
    Kernel,
}

impl RateSource {
    /// The name in the `PEER tsc` line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Clock => "clock",
            Self::Kernel => "kernel",
        }
    }
}

/// Our calibration, unless the clock is too coarse to trust and the kernel knows the rate.
pub fn chosen_rate(calibration: Calibration, kernel_hz: Option<u64>) -> (u64, RateSource) {
    match kernel_hz {
        Some(hz) if calibration.clock_step_ns > COARSE_CLOCK_NS => (hz, RateSource::Kernel),
        _ => (calibration.hz, RateSource::Clock),
    }
}

/// Cycles per second for `cycles` counted over `elapsed`; 0 for an empty interval.
pub fn hz_from(cycles: u64, elapsed: Duration) -> u64 {
    let nanoseconds = elapsed.as_nanos();
    if nanoseconds == 0 {
        return 0;
    }
    (u128::from(cycles) * 1_000_000_000 / nanoseconds) as u64
}

/// The median difference between two back-to-back TSC reads over `tries` tries: what one
/// read adds to every sample. Popcorn subtracts it; we report it beside the raw figures.
/// The median, not the minimum: a virtual TSC can advance in steps, so the minimum can be 0.
pub fn read_overhead(tries: usize) -> u64 {
    let mut differences: Vec<u64> = (0..tries)
        .map(|_| {
            let first = read_tsc();
            let second = read_tsc();
            second.wrapping_sub(first)
        })
        .collect();
    differences.sort_unstable();
    differences.get(differences.len() / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_arithmetic() {
        assert_eq!(hz_from(300_000_000, Duration::from_millis(100)), 3_000_000_000);
        assert_eq!(hz_from(1, Duration::from_secs(2)), 0);
        assert_eq!(hz_from(5, Duration::ZERO), 0);
    }

    #[test]
    fn the_counter_moves_and_has_a_plausible_rate() {
        let calibration = calibrate(Duration::from_millis(20));
        // Any x86-64 TSC since 2005 ticks between 100 MHz and 10 GHz.
        assert!((100_000_000..10_000_000_000).contains(&calibration.hz), "{calibration:?}");
        assert!(calibration.clock_step_ns > 0);
        assert!(read_overhead(100) < 100_000);
    }

    #[test]
    fn kernel_rate_from_cpuinfo() {
        let cpuinfo =
            "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu MHz\t\t: 2599.995\n\nprocessor\t: 1\ncpu MHz\t\t: 1.0\n";
        assert_eq!(kernel_hz_from(cpuinfo), Some(2_599_995_000));
        assert_eq!(kernel_hz_from("processor\t: 0\n"), None);
        assert_eq!(kernel_hz_from("cpu MHz\t\t: 0.000\n"), None);
    }

    #[test]
    fn a_coarse_clock_defers_to_the_kernel() {
        let fine = Calibration { hz: 2_500_000_000, clock_step_ns: 40 };
        let coarse = Calibration { hz: 2_900_000_000, clock_step_ns: 4_000_000 };
        assert_eq!(chosen_rate(fine, Some(2_600_000_000)), (2_500_000_000, RateSource::Clock));
        assert_eq!(chosen_rate(coarse, Some(2_600_000_000)), (2_600_000_000, RateSource::Kernel));
        assert_eq!(chosen_rate(coarse, None), (2_900_000_000, RateSource::Clock));
    }
}
