//! syscallbench: system calls by trap, through a syspage and through io_uring, Reef and Linux.
#![doc = include_str!("../README.md")]

mod bench;
mod options;
mod uring;

use bench::{Caller, Runs};
use options::{Benchmark, Mechanism, Options, USAGE};
use std::process::ExitCode;
use std::time::Duration;

/// How long the TSC is counted against the monotonic clock.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(50);

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match rt::cli::options_or_exit("syscallbench", USAGE, options::parse(&arguments)) {
        Ok(options) => options,
        Err(status) => return status,
    };
    let reef = rt::on_reef();
    if let (Some(cpu), false) = (options.pin, reef) {
        if let Err(error) = rt::pin_current_thread(cpu) {
            eprintln!("syscallbench: pinning to CPU {cpu}: {error}");
            return ExitCode::from(2);
        }
    }
    let tsc_hz = rt::tsc::calibrate(CALIBRATION_WINDOW);
    println!("{}", config_line(&options, reef, tsc_hz));
    if let Some((path, count)) = &options.start_with {
        bench::start_with(path, *count);
    }
    let mut failed = false;
    for benchmark in options.benchmarks.clone() {
        for mechanism in mechanisms(&options, reef) {
            failed |= !run(benchmark, mechanism, &options, reef, tsc_hz);
        }
    }
    println!("SYSCALLBENCH-DONE label={}", options.label);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The mechanisms asked for, or every one that can run here.
fn mechanisms(options: &Options, reef: bool) -> Vec<Mechanism> {
    if !options.mechanisms.is_empty() {
        return options.mechanisms.clone();
    }
    let mut all = vec![Mechanism::Trap];
    if options.kc.is_some() {
        all.push(Mechanism::Syspage);
    }
    if !reef {
        all.extend([Mechanism::Uring, Mechanism::UringSqpoll]);
    }
    all
}

/// One figure to measure: how many calls, in batches of how many, on how many threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Figure {
    benchmark: Benchmark,
    mechanism: Mechanism,
    /// Calls of one run (all threads together).
    calls: usize,
    batch: Option<usize>,
    threads: Option<(usize, usize)>,
    runs: usize,
}

/// The figures of `benchmark` by `mechanism`; none where the pair means nothing (io_uring has
/// no blocking `getppid`, a trap has no batches: its batch figure is the one-at-a-time
/// baseline).
fn figures(benchmark: Benchmark, mechanism: Mechanism, options: &Options) -> Vec<Figure> {
    let uring = matches!(mechanism, Mechanism::Uring | Mechanism::UringSqpoll);
    let figure = |calls, batch, threads, runs| Figure { benchmark, mechanism, calls, batch, threads, runs };
    match benchmark {
        Benchmark::Blocking if uring => Vec::new(),
        Benchmark::Blocking => {
            options.counts.iter().map(|&count| figure(count, None, None, options.blocking_runs(count))).collect()
        }
        Benchmark::Batch if mechanism == Mechanism::Trap => vec![figure(options.calls, Some(1), None, options.repeat)],
        Benchmark::Batch => {
            options.batches.iter().map(|&size| figure(options.calls, Some(size), None, options.repeat)).collect()
        }
        Benchmark::Threads if uring => Vec::new(),
        Benchmark::Threads => vec![figure(
            options.threads * options.per_thread,
            None,
            Some((options.threads, options.per_thread)),
            options.repeat,
        )],
    }
}

/// Runs every figure of `benchmark` by `mechanism` and prints its line; false if one failed.
fn run(benchmark: Benchmark, mechanism: Mechanism, options: &Options, reef: bool, tsc_hz: u64) -> bool {
    let figures = figures(benchmark, mechanism, options);
    if figures.is_empty() {
        return true;
    }
    let what = format!("label={} bench={} mechanism={}", options.label, benchmark.name(), mechanism.name());
    let mut caller = None;
    if benchmark != Benchmark::Threads {
        match Caller::new(mechanism, options.kc, options.sqpoll_cpu) {
            Ok(made) => caller = Some(made),
            Err(error) => return skip_or_fail(&what, mechanism, reef, &error),
        }
    }
    let mut ok = true;
    for figure in figures {
        let result = match (&mut caller, figure.threads) {
            (_, Some((threads, per_thread))) => bench::threads(mechanism, options.kc, threads, per_thread, figure.runs),
            (Some(caller), None) => match figure.batch {
                Some(size) => bench::batched(caller, figure.calls, size, figure.runs),
                None => bench::blocking(caller, figure.calls, figure.runs),
            },
            (None, None) => unreachable!("a caller is made for every figure but the threads'"),
        };
        match result {
            Ok(runs) => println!("{}", figure_line(&what, &figure, runs, tsc_hz)),
            Err(error) if figure.threads.is_some() && error.contains("registering") => {
                return skip_or_fail(&what, mechanism, reef, &error);
            }
            Err(error) => {
                println!("SYSCALLBENCH-ERROR {what} calls={}: {}", figure.calls, error.replace('\n', " "));
                ok = false;
            }
        }
    }
    ok
}

/// A mechanism that cannot be set up: a skip where it does not exist (syspages on Linux,
/// io_uring on Reef), else an error.
fn skip_or_fail(what: &str, mechanism: Mechanism, reef: bool, error: &str) -> bool {
    match (mechanism, reef) {
        (Mechanism::Syspage, false) => println!("SYSCALLBENCH-SKIP {what} reason=not-on-reef"),
        (Mechanism::Uring | Mechanism::UringSqpoll, true) => println!("SYSCALLBENCH-SKIP {what} reason=no-io-uring"),
        _ => {
            println!("SYSCALLBENCH-ERROR {what}: {}", error.replace('\n', " "));
            return false;
        }
    }
    true
}

fn config_line(options: &Options, reef: bool, tsc_hz: u64) -> String {
    let core = rt::current_cpu().map_or("unknown".to_string(), |core| core.to_string());
    let kc = options.kc.map_or("none".to_string(), |kc| kc.to_string());
    let instances = rt::instance_count().map_or("-".to_string(), |count| count.to_string());
    format!(
        "SYSCALLBENCH-CONFIG label={} tsc_hz={tsc_hz} os={} core={core} kc={kc} instances={instances}",
        options.label,
        if reef { "reef" } else { "linux" }
    )
}

/// The result line of one figure; the core is where the program runs when the figure is done.
fn figure_line(what: &str, figure: &Figure, runs: Runs, tsc_hz: u64) -> String {
    let core = rt::current_cpu().map_or("unknown".to_string(), |core| core.to_string());
    summary_line(what, figure, runs, tsc_hz, &core)
}

fn summary_line(what: &str, figure: &Figure, mut runs: Runs, tsc_hz: u64, core: &str) -> String {
    let Some(summary) = samples::summarize(&mut runs.cycles) else {
        return format!("SYSCALLBENCH-ERROR {what}: no runs");
    };
    let fields = samples::CycleFields { summary: &summary, tsc_hz };
    let median_ns = fields.nanoseconds(summary.median);
    let mut line = format!("SYSCALLBENCH {what} calls={}", figure.calls);
    if let Some(size) = figure.batch {
        line += &format!(" batch={size}");
    }
    if let Some((threads, per_thread)) = figure.threads {
        line += &format!(" threads={threads} per_thread={per_thread}");
    }
    line += &format!(
        " runs={} core={core} {fields} per_call_ns={:.1} calls_per_s={:.0} first_tsc={} last_tsc={} kicks={}",
        summary.count,
        median_ns / figure.calls as f64,
        figure.calls as f64 * 1e9 / median_ns.max(1e-9),
        runs.first_tsc,
        runs.last_tsc,
        runs.nr_kicks,
    );
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line() {
        let figure = Figure {
            benchmark: Benchmark::Batch,
            mechanism: Mechanism::Syspage,
            calls: 1000,
            batch: Some(64),
            threads: None,
            runs: 3,
        };
        let runs = Runs { cycles: vec![3000, 1000, 2000], first_tsc: 5, last_tsc: 9, nr_kicks: 1 };
        let line = summary_line("label=x bench=batch mechanism=syspage", &figure, runs, 1_000_000_000, "1");
        assert_eq!(
            line,
            "SYSCALLBENCH label=x bench=batch mechanism=syspage calls=1000 batch=64 runs=3 core=1 unit=ns \
             median_ns=2000.0 p5_ns=1000.0 p95_ns=3000.0 min_ns=1000.0 max_ns=3000.0 median_cycles=2000 \
             p5_cycles=1000 p95_cycles=3000 per_call_ns=2.0 calls_per_s=500000000 first_tsc=5 last_tsc=9 kicks=1"
        );
    }

    #[test]
    fn which_figures_run_where() {
        let options = Options::default();
        assert_eq!(mechanisms(&options, false), [Mechanism::Trap, Mechanism::Uring, Mechanism::UringSqpoll]);
        assert_eq!(mechanisms(&options, true), [Mechanism::Trap]);
        let with_kc = Options { kc: Some(2), ..Options::default() };
        assert_eq!(mechanisms(&with_kc, true), [Mechanism::Trap, Mechanism::Syspage]);
        assert_eq!(figures(Benchmark::Blocking, Mechanism::Syspage, &options).len(), 6);
        assert!(figures(Benchmark::Blocking, Mechanism::Uring, &options).is_empty());
        let trap_batch = figures(Benchmark::Batch, Mechanism::Trap, &options);
        assert_eq!(trap_batch.len(), 1);
        assert_eq!((trap_batch[0].calls, trap_batch[0].batch), (100_000, Some(1)));
        assert_eq!(figures(Benchmark::Batch, Mechanism::UringSqpoll, &options).len(), 8);
        let threads = figures(Benchmark::Threads, Mechanism::Trap, &options);
        assert_eq!((threads[0].calls, threads[0].threads), (25_000, Some((50, 500))));
    }

    #[test]
    fn setup_failures_are_skips_where_the_mechanism_does_not_exist() {
        assert!(skip_or_fail("x", Mechanism::Syspage, false, "ENOSYS"));
        assert!(skip_or_fail("x", Mechanism::UringSqpoll, true, "ENOSYS"));
        assert!(!skip_or_fail("x", Mechanism::Syspage, true, "ENXIO"));
    }
}
