//! What a run's counts and times say: the most work a quantum did, the median, and how many
//! quanta lost more than 0.1 %, 1 % and 10 % of that most.

/// The loss thresholds reported, as (numerator, denominator) of the maximum work, and the
/// name of each in the summary line: a quantum loses more than `n / d` of the maximum when
/// `(max - count) * d > max * n`, in integers so no threshold sits on a rounding edge.
pub const LOSS_THRESHOLDS: [(u64, u64, &str); 3] =
    [(1, 1000, "lost_gt_0.1pct"), (1, 100, "lost_gt_1pct"), (1, 10, "lost_gt_10pct")];

/// The share of `counts` whose loss against `max` exceeds `numerator / denominator` of it.
pub fn fraction_losing(counts: &[u32], max: u32, numerator: u64, denominator: u64) -> f64 {
    if counts.is_empty() {
        return 0.0;
    }
    let max = u64::from(max);
    let losing =
        counts.iter().filter(|&&count| (max.saturating_sub(u64::from(count))) * denominator > max * numerator).count();
    losing as f64 / counts.len() as f64
}

/// The summary of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub quanta: usize,
    /// The most work units a quantum did: the work of a quantum nothing interrupted.
    pub max: u32,
    pub median: f64,
    pub mean: f64,
    pub min: u32,
    /// Per [`LOSS_THRESHOLDS`], the share of quanta losing more than it.
    pub lost: [f64; 3],
    /// Quanta that did no work at all: something took the core for their whole length.
    pub empty: usize,
    /// How late the latest quantum started, in TSC cycles after its scheduled start.
    pub latest_start_cycles: u64,
}

/// Summarises `counts` and the quanta's actual `starts` against their schedule (quantum `i`
/// is due at `scheduled_start + i * quantum_cycles`). `None` when there are no quanta.
pub fn summarize(counts: &[u32], starts: &[u64], scheduled_start: u64, quantum_cycles: u64) -> Option<Summary> {
    // `samples` summarises u64s (so the median is computed as every other figure's).
    let mut sorted: Vec<u64> = counts.iter().map(|&count| u64::from(count)).collect();
    let sample = samples::summarize(&mut sorted)?;
    let max = sample.max as u32;
    let lost = LOSS_THRESHOLDS.map(|(numerator, denominator, _)| fraction_losing(counts, max, numerator, denominator));
    let latest_start_cycles = starts
        .iter()
        .enumerate()
        .map(|(index, &start)| start.saturating_sub(scheduled_start + index as u64 * quantum_cycles))
        .max()
        .unwrap_or(0);
    Some(Summary {
        quanta: counts.len(),
        max,
        median: sample.median,
        mean: sample.mean,
        min: sample.min as u32,
        lost,
        empty: counts.iter().filter(|&&count| count == 0).count(),
        latest_start_cycles,
    })
}

impl Summary {
    /// The `FTQ` line's fields after the configuration: `max=… median=… …`.
    pub fn fields(&self, tsc_hz: u64) -> String {
        let mut line = format!(
            "max={} median={} mean={:.1} min={} empty={}",
            self.max, self.median, self.mean, self.min, self.empty
        );
        for ((_, _, name), fraction) in LOSS_THRESHOLDS.iter().zip(self.lost) {
            line.push_str(&format!(" {name}={fraction:.6}"));
        }
        let late_ns = self.latest_start_cycles as f64 * 1e9 / tsc_hz.max(1) as f64;
        line.push_str(&format!(" latest_start_ns={late_ns:.0}"));
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_fractions_are_strict_and_exact() {
        // max 1000: 0.1 % is 1 unit, so 999 loses exactly 0.1 % (not more) and 998 more.
        let counts = [1000, 999, 998, 990, 989, 900, 899, 0];
        assert_eq!(fraction_losing(&counts, 1000, 1, 1000), 6.0 / 8.0);
        assert_eq!(fraction_losing(&counts, 1000, 1, 100), 4.0 / 8.0, "990 loses 1 %, not more");
        assert_eq!(fraction_losing(&counts, 1000, 1, 10), 2.0 / 8.0, "900 loses 10 %, not more");
        assert_eq!(fraction_losing(&[], 1000, 1, 10), 0.0);
        assert_eq!(fraction_losing(&[5, 5], 5, 1, 1000), 0.0, "nothing lost");
    }

    #[test]
    fn a_summary() {
        let counts = [500, 500, 250, 0, 499, 500];
        // Quantum 3 started 2000 cycles late (it did nothing), quantum 4 ten cycles late.
        let starts = [100, 1100, 2100, 5100, 4110, 5100];
        let summary = summarize(&counts, &starts, 100, 1000).unwrap();
        assert_eq!((summary.quanta, summary.max, summary.min, summary.empty), (6, 500, 0, 1));
        assert_eq!(summary.median, 499.5);
        assert!((summary.mean - 2249.0 / 6.0).abs() < 1e-9);
        assert_eq!(summary.lost, [3.0 / 6.0, 2.0 / 6.0, 2.0 / 6.0], "499 loses 0.2 %: more than 0.1 %, not 1 %");
        assert_eq!(summary.latest_start_cycles, 2000);
        assert_eq!(
            summary.fields(1_000_000_000),
            "max=500 median=499.5 mean=374.8 min=0 empty=1 lost_gt_0.1pct=0.500000 lost_gt_1pct=0.333333 \
             lost_gt_10pct=0.333333 latest_start_ns=2000"
        );
        assert!(summarize(&[], &[], 0, 1).is_none());
    }
}
