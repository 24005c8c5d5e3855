//! The measurement: work units counted in back-to-back quanta on a fixed schedule.

use rt::tsc;
use std::hint::black_box;

/// What one run measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quanta {
    /// Work units done in each quantum.
    pub counts: Vec<u32>,
    /// The TSC when each quantum's counting began: the first reading at or after its scheduled
    /// start (later when the core was taken away across the boundary).
    pub starts: Vec<u64>,
    /// When the first kept quantum was due; quantum `i` is due `i * quantum_cycles` later.
    pub scheduled_start: u64,
    pub quantum_cycles: u64,
}

/// One work unit: `steps` xorshift64 steps on `state`, each depending on the one before, so
/// neither the compiler nor the CPU can fold or overlap them. Not inlined, so every unit costs
/// the same call whatever the loop around it became.
#[inline(never)]
fn work(mut state: u64, steps: u32) -> u64 {
    for _ in 0..steps {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
    }
    state
}

impl Quanta {
    /// Room for `quanta` quanta, every page of it written now (not with zeros, so no allocator
    /// can hand back untouched zero pages): a page fault during the run would be noise of
    /// ftq's own making (NIX's AC run lost a quantum every 256 to exactly that).
    pub fn new(quanta: usize) -> Self {
        Self { counts: vec![u32::MAX; quanta], starts: vec![u64::MAX; quanta], scheduled_start: 0, quantum_cycles: 0 }
    }

    /// Runs `warmup` quanta, then as many kept ones as there is room for, each
    /// `quantum_cycles` long, counting work units of `steps` steps until each quantum's end.
    ///
    /// FTQ's rule (HARE ch. 2): quantum `i` ends at `origin + (i + 1) * quantum_cycles`, fixed
    /// before the run, never at "the last one's end plus a quantum". A quantum the core lost
    /// time in therefore shows a lower count, and the ones after it keep their schedule: the
    /// series is stationary, as a spectrum needs. A unit begun before the end is finished and
    /// counted.
    pub fn measure(&mut self, quantum_cycles: u64, warmup: usize, steps: u32) {
        let quanta = self.counts.len();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let origin = tsc::read();
        let mut now = origin;
        for index in 0..warmup + quanta {
            let end = origin + (index as u64 + 1) * quantum_cycles;
            let start = now;
            let mut count = 0u32;
            while now < end {
                state = work(state, steps);
                count += 1;
                now = tsc::read();
            }
            if let Some(kept) = index.checked_sub(warmup) {
                self.counts[kept] = count;
                self.starts[kept] = start;
            }
        }
        black_box(state);
        self.scheduled_start = origin + warmup as u64 * quantum_cycles;
        self.quantum_cycles = quantum_cycles;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_keep_their_schedule() {
        // 200 quanta of 20 µs at a nominal 1 GHz or more: well under a second.
        let quantum_cycles = 20_000;
        let mut run = Quanta::new(200);
        run.measure(quantum_cycles, 10, 4);
        assert_eq!((run.counts.len(), run.starts.len()), (200, 200));
        for (index, &start) in run.starts.iter().enumerate() {
            let due = run.scheduled_start + index as u64 * quantum_cycles;
            assert!(start >= due, "quantum {index} began before it was due");
        }
        assert!(run.counts.iter().any(|&count| count > 0), "some quantum did work");
        assert!(run.counts.iter().all(|&count| count != u32::MAX));
    }

    #[test]
    fn work_units_are_not_folded() {
        assert_ne!(work(1, 1), work(1, 2));
        assert_eq!(work(1, 0), 1);
    }
}
