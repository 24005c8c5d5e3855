//! procbench: process benchmarks (calls, fork+exec, threads, futex, page faults, spawn), Reef and Linux.
#![doc = include_str!("../README.md")]

mod bench;
mod options;
mod os;

use options::{Benchmark, Options, USAGE};
use rt::place::Place;
use std::process::ExitCode;
use std::time::Duration;

/// How long the TSC is counted against the monotonic clock.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(50);

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match rt::cli::options_or_exit("procbench", USAGE, options::parse(&arguments)) {
        Ok(options) => options,
        Err(status) => return status,
    };
    let place = Place::find();
    let tsc_hz = rt::tsc::calibrate(CALIBRATION_WINDOW);
    println!("{}", config_line(tsc_hz, place));
    let mut failed = false;
    let mut medians = Vec::new();
    for &benchmark in &options.benchmarks {
        match run(benchmark, &options, place) {
            Outcome::Samples(mut samples) => match summary_line(benchmark.name(), &mut samples, tsc_hz) {
                Some((line, median)) => {
                    println!("{line}");
                    medians.push((benchmark, median));
                }
                None => println!("BENCH-PROC-SKIP name={} reason=no-samples", benchmark.name()),
            },
            Outcome::Skipped(reason) => println!("BENCH-PROC-SKIP name={} reason={reason}", benchmark.name()),
            Outcome::Failed(message) => {
                println!("BENCH-PROC-ERROR name={} {}", benchmark.name(), message.replace('\n', " "));
                failed = true;
            }
        }
    }
    let median_of = |wanted| medians.iter().find(|(benchmark, _)| *benchmark == wanted).map(|(_, median)| *median);
    if let (Some(other), Some(same)) = (median_of(Benchmark::SpawnOtherCore), median_of(Benchmark::SpawnSameCore)) {
        println!("BENCH-PROC-RATIO name=spawn-other-core/spawn-same-core median={:.2}", other / same);
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What running one benchmark gave.
enum Outcome {
    Samples(Vec<u64>),
    /// Not run here; the reason is one word.
    Skipped(&'static str),
    Failed(String),
}

fn run(benchmark: Benchmark, options: &Options, place: Place) -> Outcome {
    let iterations = options.iterations(benchmark);
    let result = match (benchmark, place) {
        (Benchmark::Getppid, _) => bench::getppid(iterations),
        (Benchmark::ForkExecWait, _) => bench::fork_exec_wait(iterations, &options.tiny),
        (Benchmark::ThreadSpawnJoin, _) => bench::thread_spawn_join(iterations),
        // On Reef the threads of a process run on its home core: no pinning needed (or offered).
        (Benchmark::FutexPingPong, Place::Reef { .. }) => bench::futex_pingpong(iterations, None),
        (Benchmark::FutexPingPong, Place::Linux { cpu: Some(cpu) }) => bench::futex_pingpong(iterations, Some(cpu)),
        (Benchmark::FutexPingPong, Place::Linux { cpu: None }) => return Outcome::Skipped("no-getcpu"),
        (Benchmark::PageFirstTouch, _) => bench::page_first_touch(iterations),
        (Benchmark::SpawnOtherCore | Benchmark::SpawnSameCore, Place::Linux { .. }) => {
            return Outcome::Skipped("not-on-reef")
        }
        (Benchmark::SpawnOtherCore, Place::Reef { instances: 1, .. }) => return Outcome::Skipped("one-core"),
        (Benchmark::SpawnOtherCore, Place::Reef { core, instances }) => {
            bench::spawn_on(iterations, (core + 1) % instances, &options.tiny)
        }
        (Benchmark::SpawnSameCore, Place::Reef { core, .. }) => bench::spawn_on(iterations, core, &options.tiny),
    };
    match result {
        Ok(samples) => Outcome::Samples(samples),
        Err(message) => Outcome::Failed(message),
    }
}

fn config_line(tsc_hz: u64, place: Place) -> String {
    format!("BENCH-PROC-CONFIG tsc_hz={tsc_hz} {}", place.fields())
}

/// Cycles as nanoseconds at `tsc_hz`.
fn nanoseconds(cycles: f64, tsc_hz: u64) -> f64 {
    cycles * 1e9 / tsc_hz as f64
}

/// The `BENCH-PROC` line of `samples` (sorted in place) and their median in cycles; `None`
/// when there are none.
fn summary_line(name: &str, samples: &mut [u64], tsc_hz: u64) -> Option<(String, f64)> {
    let summary = samples::summarize(samples)?;
    let percentile = |percent| samples::percentile(samples, percent).unwrap_or(0) as f64;
    let ns = |cycles: f64| format!("{:.1}", nanoseconds(cycles, tsc_hz));
    let line = format!(
        "BENCH-PROC name={name} unit=ns samples={} median={} p5={} p25={} p75={} p95={} p99={} min={} max={} \
         median_cycles={:.0}",
        summary.count,
        ns(summary.median),
        ns(summary.p5 as f64),
        ns(percentile(25.0)),
        ns(percentile(75.0)),
        ns(summary.p95 as f64),
        ns(percentile(99.0)),
        ns(summary.min as f64),
        ns(summary.max as f64),
        summary.median,
    );
    Some((line, summary.median))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line() {
        let mut samples: Vec<u64> = (1..=100).rev().map(|n| n * 1000).collect();
        let (line, median) = summary_line("getppid", &mut samples, 1_000_000_000).unwrap();
        assert_eq!(
            line,
            "BENCH-PROC name=getppid unit=ns samples=100 median=50500.0 p5=6000.0 p25=26000.0 p75=75000.0 \
             p95=95000.0 p99=99000.0 min=1000.0 max=100000.0 median_cycles=50500"
        );
        assert_eq!(median, 50_500.0);
        assert!(summary_line("x", &mut [], 1).is_none());
        // At 2 GHz a cycle is half a nanosecond.
        let (line, _) = summary_line("x", &mut [3], 2_000_000_000).unwrap();
        assert!(line.contains(" median=1.5 "), "{line}");
    }

    #[test]
    fn config_lines() {
        assert_eq!(
            config_line(2_000_000_000, Place::Reef { core: 2, instances: 4 }),
            "BENCH-PROC-CONFIG tsc_hz=2000000000 os=reef core=2"
        );
        assert_eq!(config_line(5, Place::Linux { cpu: Some(1) }), "BENCH-PROC-CONFIG tsc_hz=5 os=linux core=1");
        assert_eq!(config_line(5, Place::Linux { cpu: None }), "BENCH-PROC-CONFIG tsc_hz=5 os=linux core=unknown");
    }
}
