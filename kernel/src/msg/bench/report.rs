//! How `msg bench` prints: one `BENCH` line per figure, progress lines, a failed call's line.

use super::*;

/// Prints one figure's `BENCH` line: its statistics only if it has samples.
pub(super) fn report(out: &mut dyn Write, name: &str, parameter: &str, pair: (usize, usize), samples: &mut [u64]) {
    match samples::summarize(samples) {
        Some(s) => say!(
            out,
            "BENCH name={name} param={parameter} pair={}-{} unit=cycles n={} min={} p5={} median={} p95={} max={}",
            pair.0,
            pair.1,
            s.count,
            s.min,
            s.p5,
            s.median,
            s.p95,
            s.max
        ),
        None => say!(out, "BENCH name={name} param={parameter} pair={}-{} unit=cycles n=0", pair.0, pair.1),
    }
}

/// Prints the `BENCH` line of signed differences, with how many came out negative.
pub(super) fn report_signed(
    out: &mut dyn Write,
    name: &str,
    parameter: &str,
    pair: (usize, usize),
    s: &samples::Summary<i64>,
    negative: u64,
) {
    if s.count == 0 {
        say!(out, "BENCH name={name} param={parameter} pair={}-{} unit=cycles n=0", pair.0, pair.1);
        return;
    }
    say!(
        out,
        "BENCH name={name} param={parameter} pair={}-{} unit=cycles n={} min={} p5={} median={} p95={} max={} negative={negative}",
        pair.0, pair.1, s.count, s.min, s.p5, s.median, s.p95, s.max
    );
}

/// `BENCH-PROGRESS` lines: which measurement starts, so a long run shows it is alive. The
/// host's parser reads only `BENCH name=` lines and ignores these.
pub(super) struct Progress {
    pub(super) step: u32,
    pub(super) steps: u32,
    pub(super) start: u64,
}

impl Progress {
    pub(super) fn next(&mut self, out: &mut dyn Write, what: &str) {
        self.step += 1;
        let elapsed_ms = crate::time::cycles_to_ns(cpu::read_tsc() - self.start) / 1_000_000;
        say!(out, "BENCH-PROGRESS {}/{} {what} (after {elapsed_ms} ms)", self.step, self.steps);
    }
}

pub(super) fn finish_call(out: &mut dyn Write, call: Result<u32, icc::IccError>, what: &str) -> bool {
    match call.and_then(|id| icc::wait(id, 30_000)) {
        Ok(_) => true,
        Err(error) => {
            say!(out, "BENCH-ERROR {what}: responder failed: {error}");
            false
        }
    }
}
