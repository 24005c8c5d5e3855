//! Time from the TSC, calibrated once by the bootstrap core against the PIT.

use crate::arch::cpu::read_tsc;
use crate::core::shared;

/// Nanoseconds in `cycles` TSC ticks.
pub fn cycles_to_ns(cycles: u64) -> u64 {
    let hz = shared::facts().tsc_hz.max(1);
    ((u128::from(cycles) * 1_000_000_000) / u128::from(hz)) as u64
}

/// Nanoseconds since boot.
pub fn now_ns() -> u64 {
    cycles_to_ns(read_tsc().saturating_sub(shared::facts().boot_tsc))
}

/// TSC cycles in `ns` nanoseconds.
pub fn ns_to_cycles(ns: u64) -> u64 {
    ((u128::from(ns) * u128::from(shared::facts().tsc_hz)) / 1_000_000_000) as u64
}

/// Realtime at boot, in seconds since 1970. QEMU's microvm here has no RTC, so Reef takes a
/// fixed epoch (2026-01-01) unless a later issue reads one; monotonic time is exact.
const BOOT_EPOCH_SECONDS: u64 = 1_767_225_600;

/// Nanoseconds since 1970 (the fixed boot epoch plus the time since boot).
pub fn realtime_ns() -> u64 {
    now_ns() + BOOT_EPOCH_SECONDS * 1_000_000_000
}

/// The TSC value `ms` milliseconds from now: a deadline for `sched::block`.
pub fn deadline_after_ms(ms: u64) -> u64 {
    crate::arch::cpu::read_tsc().saturating_add(ns_to_cycles(ms.saturating_mul(1_000_000)))
}
