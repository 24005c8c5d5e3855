//! Benchmark sample summaries, computed alike in the kernel, the Linux peer and the host.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]

use core::cmp::Ordering;

/// A kind of sample: totally ordered for sorting, and readable as `f64` for the median and mean.
pub trait Sample: Copy {
    /// The order samples are sorted in.
    fn order(&self, other: &Self) -> Ordering;
    /// The sample as a real number.
    fn value(self) -> f64;
    /// The mean of `samples` (not empty).
    fn mean(samples: &[Self]) -> f64;
}

impl Sample for u64 {
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
    fn value(self) -> f64 {
        self as f64
    }
    fn mean(samples: &[Self]) -> f64 {
        let total: u128 = samples.iter().map(|&sample| u128::from(sample)).sum();
        total as f64 / samples.len() as f64
    }
}

/// Signed samples: differences of two cores' TSCs, which can come out negative (the cores'
/// counters are not exactly in step, or the later event was stamped before the earlier one
/// became visible); they are summarised as they are, never clamped.
impl Sample for i64 {
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
    fn value(self) -> f64 {
        self as f64
    }
    fn mean(samples: &[Self]) -> f64 {
        let total: i128 = samples.iter().map(|&sample| i128::from(sample)).sum();
        total as f64 / samples.len() as f64
    }
}

impl Sample for f64 {
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
    fn value(self) -> f64 {
        self
    }
    fn mean(samples: &[Self]) -> f64 {
        samples.iter().sum::<f64>() / samples.len() as f64
    }
}

/// Extremes, percentiles, median and mean of a set of samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary<T> {
    pub count: usize,
    pub min: T,
    pub p5: T,
    /// The middle sample, or the mean of the middle two for an even count.
    pub median: f64,
    pub p95: T,
    pub max: T,
    pub mean: f64,
}

/// The sample at percentile `percent` (0..=100) of `sorted` (not empty), by nearest rank.
fn nearest_rank<T: Sample>(sorted: &[T], percent: f64) -> T {
    // `as usize` truncates; adding 0.5 first rounds (the rank is never negative).
    let rank = (percent / 100.0 * (sorted.len() - 1) as f64 + 0.5) as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The sample at percentile `percent` (0..=100) of `sorted`, by the same nearest rank as
/// [`Summary`]'s p5 and p95, for callers that report more percentiles (p25, p75, p99) from the
/// samples [`summarize`] has just sorted; `None` when there are none.
pub fn percentile<T: Sample>(sorted: &[T], percent: f64) -> Option<T> {
    (!sorted.is_empty()).then(|| nearest_rank(sorted, percent))
}

/// Summarises `samples`, sorting them in place; `None` when there are none.
pub fn summarize<T: Sample>(samples: &mut [T]) -> Option<Summary<T>> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable_by(T::order);
    let count = samples.len();
    let median = if count % 2 == 1 {
        samples[count / 2].value()
    } else {
        (samples[count / 2 - 1].value() + samples[count / 2].value()) / 2.0
    };
    Some(Summary {
        count,
        min: samples[0],
        p5: nearest_rank(samples, 5.0),
        median,
        p95: nearest_rank(samples, 95.0),
        max: samples[count - 1],
        mean: T::mean(samples),
    })
}

/// A [`Summary`] of TSC cycles as the `key=value` words the result lines of
/// `user/syscallbench` and `user/corebench` carry, which the host reads back:
/// `unit=ns median_ns=.. p5_ns=.. p95_ns=.. min_ns=.. max_ns=..` (at `tsc_hz`, to a tenth of a
/// ns), then `median_cycles=.. p5_cycles=.. p95_cycles=..`. Written with `{}`, no allocation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CycleFields<'a> {
    pub summary: &'a Summary<u64>,
    pub tsc_hz: u64,
}

impl CycleFields<'_> {
    /// `cycles` in ns at the TSC rate (a rate of 0 counts as 1 Hz, so nothing divides by 0).
    pub fn nanoseconds(&self, cycles: f64) -> f64 {
        cycles * 1e9 / self.tsc_hz.max(1) as f64
    }
}

impl core::fmt::Display for CycleFields<'_> {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let summary = self.summary;
        let ns = |cycles: u64| self.nanoseconds(cycles as f64);
        write!(
            formatter,
            "unit=ns median_ns={:.1} p5_ns={:.1} p95_ns={:.1} min_ns={:.1} max_ns={:.1} median_cycles={:.0} \
             p5_cycles={} p95_cycles={}",
            self.nanoseconds(summary.median),
            ns(summary.p5),
            ns(summary.p95),
            ns(summary.min),
            ns(summary.max),
            summary.median,
            summary.p5,
            summary.p95
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_count() {
        let summary = summarize(&mut [50u64, 10, 30, 20, 40]).unwrap();
        assert_eq!(summary.count, 5);
        assert_eq!((summary.min, summary.median, summary.max), (10, 30.0, 50));
        assert_eq!((summary.p5, summary.p95), (10, 50));
        assert_eq!(summary.mean, 30.0);
    }

    #[test]
    fn even_count_median_is_the_mean_of_the_middle_two() {
        let summary = summarize(&mut [1u64, 2, 3, 10]).unwrap();
        assert_eq!(summary.median, 2.5);
        assert_eq!(summary.mean, 4.0);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut samples: [u64; 101] = core::array::from_fn(|i| 101 - i as u64);
        let summary = summarize(&mut samples).unwrap();
        assert_eq!((summary.p5, summary.median, summary.p95), (6, 51.0, 96));
        assert_eq!(samples[0], 1, "sorted in place");
        let summary = summarize(&mut [7u64]).unwrap();
        assert_eq!((summary.min, summary.p5, summary.median, summary.p95, summary.max), (7, 7, 7.0, 7, 7));
    }

    #[test]
    fn more_percentiles_from_the_sorted_samples() {
        let mut samples: [u64; 101] = core::array::from_fn(|i| 101 - i as u64);
        let summary = summarize(&mut samples).unwrap();
        assert_eq!(percentile(&samples, 5.0), Some(summary.p5));
        assert_eq!(percentile(&samples, 95.0), Some(summary.p95));
        assert_eq!((percentile(&samples, 25.0), percentile(&samples, 75.0)), (Some(26), Some(76)));
        assert_eq!((percentile(&samples, 99.0), percentile(&samples, 100.0)), (Some(100), Some(101)));
        assert_eq!(percentile::<u64>(&[], 50.0), None);
    }

    #[test]
    fn no_samples_no_summary() {
        assert!(summarize::<u64>(&mut []).is_none());
    }

    #[test]
    fn mean_does_not_overflow() {
        let summary = summarize(&mut [u64::MAX, u64::MAX]).unwrap();
        assert_eq!(summary.mean, u64::MAX as f64);
    }

    #[test]
    fn signed_samples_keep_their_sign() {
        let summary = summarize(&mut [5i64, -3, 1, -1]).unwrap();
        assert_eq!((summary.min, summary.median, summary.max), (-3, 0.0, 5));
        assert_eq!(summary.mean, 0.5);
        let summary = summarize(&mut [i64::MIN, i64::MIN]).unwrap();
        assert_eq!(summary.mean, i64::MIN as f64);
    }

    /// A `core::fmt::Write` into a fixed buffer, as the crate has no allocation.
    struct Text {
        bytes: [u8; 256],
        length: usize,
    }

    impl core::fmt::Write for Text {
        fn write_str(&mut self, text: &str) -> core::fmt::Result {
            let end = self.length + text.len();
            self.bytes.get_mut(self.length..end).ok_or(core::fmt::Error)?.copy_from_slice(text.as_bytes());
            self.length = end;
            Ok(())
        }
    }

    #[test]
    fn cycle_fields_as_the_result_lines_carry_them() {
        use core::fmt::Write;
        let summary = summarize(&mut [3000u64, 1000, 2000, 4000]).unwrap();
        let mut text = Text { bytes: [0; 256], length: 0 };
        // At 2 GHz a cycle is half a nanosecond.
        write!(text, "{}", CycleFields { summary: &summary, tsc_hz: 2_000_000_000 }).unwrap();
        assert_eq!(
            core::str::from_utf8(&text.bytes[..text.length]).unwrap(),
            "unit=ns median_ns=1250.0 p5_ns=500.0 p95_ns=2000.0 min_ns=500.0 max_ns=2000.0 median_cycles=2500 \
             p5_cycles=1000 p95_cycles=4000"
        );
        assert_eq!(CycleFields { summary: &summary, tsc_hz: 0 }.nanoseconds(2.0), 2e9, "no division by zero");
    }

    #[test]
    fn reals_sort_totally() {
        let summary = summarize(&mut [3.5, -1.0, 2.0]).unwrap();
        assert_eq!((summary.min, summary.median, summary.max), (-1.0, 2.0, 3.5));
    }
}
