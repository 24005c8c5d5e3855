//! Percentiles of round-trip samples and the `PEER name=...` result line.

use std::fmt::Write;

/// Extremes, mean and percentiles of a set of cycle counts.
///
/// The definitions are those of `xtask/src/stats.rs`, so that Reef's and Linux's figures are
/// computed alike: the median of an even count is the mean of the two middle samples, p5 and
/// p95 are the nearest rank `round(p / 100 * (n - 1))` of the sorted samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub min: u64,
    pub p5: u64,
    pub median: f64,
    pub p95: u64,
    pub max: u64,
    pub mean: f64,
}

/// The sample at percentile `percent` (0..=100) of `sorted`, by nearest rank.
fn nearest_rank(sorted: &[u64], percent: f64) -> u64 {
    let rank = (percent / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Summarises `samples` (sorting them in place); `None` when there are none.
pub fn summarize(samples: &mut [u64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let count = samples.len();
    let median = if count % 2 == 1 {
        samples[count / 2] as f64
    } else {
        (samples[count / 2 - 1] as f64 + samples[count / 2] as f64) / 2.0
    };
    let total: u128 = samples.iter().map(|&sample| u128::from(sample)).sum();
    Some(Summary {
        count,
        min: samples[0],
        p5: nearest_rank(samples, 5.0),
        median,
        p95: nearest_rank(samples, 95.0),
        max: samples[count - 1],
        mean: total as f64 / count as f64,
    })
}

/// The two CPUs of a benchmark: the one that starts and times each round trip, and the one
/// that answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuPair {
    pub initiator: usize,
    pub responder: usize,
}

/// The result line of one benchmark, e.g.
/// `PEER name=futex unit=cycles n=10000 min=.. p5=.. median=.. p95=.. max=.. mean=.. tsc_hz=..
/// initiator=0 responder=1`: space-separated `key=value` pairs with no spaces inside values.
/// A median or mean with a fraction is printed with one decimal, others as integers.
pub fn result_line(name: &str, summary: &Summary, tsc_hz: u64, cpus: CpuPair) -> String {
    let mut line = format!("PEER name={name} unit=cycles n={}", summary.count);
    let _ = write!(
        line,
        " min={} p5={} median={} p95={} max={} mean={}",
        summary.min,
        summary.p5,
        decimal(summary.median),
        summary.p95,
        summary.max,
        decimal(summary.mean)
    );
    let _ = write!(line, " tsc_hz={tsc_hz} initiator={} responder={}", cpus.initiator, cpus.responder);
    line
}

/// `value` as an integer when it is one, else with one decimal.
fn decimal(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_count() {
        let summary = summarize(&mut [50, 10, 30, 20, 40]).unwrap();
        assert_eq!(summary.count, 5);
        assert_eq!((summary.min, summary.median, summary.max), (10, 30.0, 50));
        assert_eq!((summary.p5, summary.p95), (10, 50));
        assert_eq!(summary.mean, 30.0);
    }

    #[test]
    fn even_count_median_is_the_mean_of_the_middle_two() {
        let summary = summarize(&mut [1, 2, 3, 10]).unwrap();
        assert_eq!(summary.median, 2.5);
        assert_eq!(summary.mean, 4.0);
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut samples: Vec<u64> = (1..=101).rev().collect();
        let summary = summarize(&mut samples).unwrap();
        assert_eq!((summary.p5, summary.median, summary.p95), (6, 51.0, 96));
        assert_eq!(samples[0], 1, "sorted in place");
        let mut one = [7];
        let summary = summarize(&mut one).unwrap();
        assert_eq!((summary.min, summary.p5, summary.median, summary.p95, summary.max), (7, 7, 7.0, 7, 7));
    }

    #[test]
    fn no_samples_no_summary() {
        assert!(summarize(&mut []).is_none());
    }

    #[test]
    fn mean_does_not_overflow() {
        let summary = summarize(&mut [u64::MAX, u64::MAX]).unwrap();
        assert_eq!(summary.mean, u64::MAX as f64);
    }

    #[test]
    fn line_format() {
        let summary = summarize(&mut [100, 200, 300, 401]).unwrap();
        let line = result_line("urpc", &summary, 2_000_000_000, CpuPair { initiator: 0, responder: 1 });
        assert_eq!(
            line,
            "PEER name=urpc unit=cycles n=4 min=100 p5=100 median=250 p95=401 max=401 mean=250.2 \
             tsc_hz=2000000000 initiator=0 responder=1"
        );
        let pairs: Vec<(&str, &str)> =
            line.split_whitespace().skip(1).map(|pair| pair.split_once('=').expect("key=value")).collect();
        assert_eq!(pairs.len(), 12);
        assert_eq!(pairs[0], ("name", "urpc"));
    }
}
