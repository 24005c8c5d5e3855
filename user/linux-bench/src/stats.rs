//! Percentiles of round-trip samples and the `PEER name=...` result line.

use std::fmt::Write;

/// Extremes, mean and percentiles of a set of cycle counts, as the `samples` crate defines
/// them for Reef's figures too, so that both are computed alike.
pub type Summary = samples::Summary<u64>;

/// Summarises `samples` (sorting them in place); `None` when there are none.
pub fn summarize(samples: &mut [u64]) -> Option<Summary> {
    samples::summarize(samples)
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

    // The summary's own tests live with it, in `crates/samples`.

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
