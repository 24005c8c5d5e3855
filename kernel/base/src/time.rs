//! Time from the TSC, calibrated once by the bootstrap core against the PIT.

use crate::arch::cpu::read_tsc;
use crate::percore::shared;
use core::cell::Cell;

/// Nanoseconds in `cycles` TSC ticks.
#[inline]
pub fn cycles_to_ns(cycles: u64) -> u64 {
    let hz = shared::facts().tsc_hz.max(1);
    ((u128::from(cycles) * 1_000_000_000) / u128::from(hz)) as u64
}

/// Nanoseconds since boot.
#[inline]
pub fn now_ns() -> u64 {
    cycles_to_ns(read_tsc().saturating_sub(shared::facts().boot_tsc))
}

/// TSC cycles in `ns` nanoseconds.
#[inline]
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
#[inline]
pub fn deadline_after_ms(ms: u64) -> u64 {
    crate::arch::cpu::read_tsc().saturating_add(ns_to_cycles(ms.saturating_mul(1_000_000)))
}

/// Halts this core until `done` says yes or `deadline_tsc` passes, whichever comes first;
/// whether `done` said yes. `done` is asked with interrupts off right before each halt, so an
/// interrupt that makes it true cannot slip in between (STI's shadow covers HLT), and again
/// after each interrupt. A core whose LAPIC timer is off (a kernel or application core) arms
/// it once per halt for the deadline, on the wake vector, and stops it again; a timesharing
/// core's tick wakes it anyway. For a wait on a device, which may never answer: nothing else
/// runs on this core meanwhile (the scheduler is not asked), and interrupts are enabled on
/// return.
pub fn halt_until(deadline_tsc: u64, mut done: impl FnMut() -> bool) -> bool {
    use crate::arch::{apic, cpu, idt};
    loop {
        cpu::disable_interrupts();
        if done() {
            cpu::enable_interrupts();
            return true;
        }
        let now = cpu::read_tsc();
        if now >= deadline_tsc {
            cpu::enable_interrupts();
            return false;
        }
        let local = apic::local();
        let armed = !local.timer_enabled();
        if armed {
            let facts = shared::facts();
            let ticks =
                u128::from(deadline_tsc - now) * u128::from(facts.apic_timer_hz) / u128::from(facts.tsc_hz.max(1));
            local.start_one_shot_timer(ticks.min(u128::from(u32::MAX)) as u32, idt::VECTOR_WAKE);
        }
        cpu::wait_for_interrupt();
        if armed {
            local.stop_timer();
        }
    }
}

/// A busy wait's deadline that reads the TSC once every [`SpinDeadline::POLLS_PER_READ`]
/// polls rather than at each.
///
/// Under QEMU's TCG every guest RDTSC takes one spinlock that all vCPUs share
/// (`cpu_get_ticks`, which also writes the last value beside it). A core that spins on the
/// TSC slows every other core that reads it: FTQ on one core did 15–30 % of its usual work
/// per quantum beside an FTQ on another, and 93–99 % beside a loop that reads no clock
/// (`docs/dynamic-cores.md`). When the host preempts the vCPU holding that lock, the others
/// spin on it for the host's time slice. A boot driver, an ICC caller or an idle core waiting
/// for a message spins this way while processes on other cores run. On hardware a poll costs
/// tens of nanoseconds, so the wait ends at most a few microseconds late.
pub struct SpinDeadline {
    end: u64,
    polls: Cell<u32>,
    /// A read found the deadline passed: every later poll says so without reading.
    passed: Cell<bool>,
}

impl SpinDeadline {
    /// Polls between two reads of the TSC.
    pub const POLLS_PER_READ: u32 = 32;

    /// The deadline `cycles` TSC ticks from now.
    pub fn after_cycles(cycles: u64) -> Self {
        Self::at(read_tsc().saturating_add(cycles))
    }

    /// The deadline `ms` milliseconds from now.
    pub fn after_ms(ms: u64) -> Self {
        Self::at(deadline_after_ms(ms))
    }

    fn at(end: u64) -> Self {
        Self { end, polls: Cell::new(0), passed: Cell::new(false) }
    }

    /// One poll: whether the deadline has passed, as last read (the TSC is read at the first
    /// poll and then every [`Self::POLLS_PER_READ`]); once it has, every later poll says so.
    pub fn passed(&self) -> bool {
        let polls = self.polls.get();
        if !self.passed.get() && polls.is_multiple_of(Self::POLLS_PER_READ) {
            self.passed.set(read_tsc() >= self.end);
        }
        self.polls.set(polls.wrapping_add(1));
        self.passed.get()
    }
}
