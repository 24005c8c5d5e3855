//! `cargo xtask bench syscall` and `peer syscall`: system calls by trap, through syspages and
//! through io_uring (`user/syscallbench`), on Reef's timesharing, application and kernel cores
//! and in the Linux guest, with the goal ratios of issue 11.
//!
//! Reef's side boots once per configuration, so a configuration that fails (a role change
//! refused, an AC that hangs) costs only its own figures, which the table reports as not
//! measured, with why. The plan of cores: with 3, core 0 is the TC, core 1 an AC, core 2 the
//! KC; with 4, cores 1 and 2 are ACs sharing KC 3.

use crate::bench::common::LINUX_KERNEL_ARGUMENTS;
use crate::bench::figure_lines::{self, Record, Report};
use crate::bench::peer;
use crate::bench::plot::{self, Series};
use crate::bench::stats;
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use serde_json::{json, Value};
use std::time::Duration;

/// How long one guest may run: the figures take minutes under TCG.
const RUN_TIMEOUT: Duration = Duration::from_secs(2400);
/// The cores of the Linux guest: as many as Reef's main configurations.
const LINUX_CORES: usize = 3;
/// The batch size the throughput goals are set at (a full syspage).
const GOAL_BATCH: u64 = 64;
/// The blocking figure the per-call goal is read from.
const GOAL_BLOCKING_CALLS: u64 = 100_000;

#[derive(Debug, PartialEq)]
struct Options {
    runs: usize,
    accel: Accel,
    linux: bool,
    /// Fewer calls, for a look in minutes rather than tens of minutes.
    quick: bool,
}

const USAGE: &str = "bench syscall [--runs N] [--accel kvm|tcg] [--no-linux] [--quick]";

fn parse_options(arguments: &[String], usage: &str) -> Result<Options, String> {
    let mut options = Options { runs: 1, accel: Accel::detect(), linux: true, quick: false };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--runs" => options.runs = crate::bench::common::number_option(word, words.next(), 1..=20)?,
            "--accel" => options.accel = Accel::parse(words.next().ok_or("--accel takes kvm or tcg")?)?,
            "--no-linux" => options.linux = false,
            "--quick" => options.quick = true,
            other => return Err(format!("unknown option `{other}`: {usage}")),
        }
    }
    Ok(options)
}

/// The arguments every syscallbench run gets besides its mechanism and label.
fn common_arguments(quick: bool) -> &'static str {
    if quick {
        "--counts 1,10,100,1000,10000 --calls 10000 --threads 10 --per-thread 100 --repeat 3"
    } else {
        "--repeat 3"
    }
}

// ---------------------------------------------------------------------------------------------
// What runs

/// One Reef boot: its cores and the shell line it runs.
#[derive(Clone, Debug, PartialEq)]
struct Configuration {
    name: &'static str,
    cores: usize,
    /// What it measures, for the results.
    what: &'static str,
    line: String,
}

/// Every Reef boot, in order. The role changes come first in each; `role` and `execac` are
/// `/bin` programs of the kernel side (`role <core> tc|ac|kc`, `execac <core> <program>`).
fn configurations(quick: bool) -> Vec<Configuration> {
    let common = common_arguments(quick);
    let three = "role 2 kc; role 1 ac";
    let four = "role 3 kc; role 1 ac; role 2 ac";
    let batch_only = "--only batch --batch 64 --repeat 3";
    vec![
        Configuration {
            name: "tc-trap",
            cores: 3,
            what: "trap on the TC (core 0), cores 1 and 2 an AC and a KC",
            line: format!("{three}; /bin/syscallbench --trap --label tc-trap {common}"),
        },
        Configuration {
            name: "ac-trap",
            cores: 3,
            what: "trap on AC 1, forwarded by ICC to the home TC (NIX)",
            line: format!("{three}; execac 1 /bin/syscallbench --trap --label ac-trap {common}"),
        },
        Configuration {
            name: "ac-syspage",
            cores: 3,
            what: "syspage from AC 1, served by KC 2 (Memsc)",
            line: format!("{three}; execac 1 /bin/syscallbench --syspage --kc 2 --label ac-syspage {common}"),
        },
        Configuration {
            name: "two-acs",
            cores: 4,
            what: "batch-64 syspage throughput of AC 1 alone, then of ACs 1 and 2 at once, both served by KC 3",
            line: format!(
                "{four}; execac 1 /bin/syscallbench --syspage --kc 3 {batch_only} --label one-ac; rm -f /tmp/two-acs; \
                 execac 1 /bin/syscallbench --syspage --kc 3 {batch_only} --start-with /tmp/two-acs 2 --label two-acs-1 & \
                 execac 2 /bin/syscallbench --syspage --kc 3 {batch_only} --start-with /tmp/two-acs 2 --label two-acs-2 & wait"
            ),
        },
    ]
}

/// The Linux guest's command: trap, io_uring with and without SQPOLL; the program on CPU 1
/// and the SQPOLL thread on CPU 2, as Reef's AC 1 and KC 2.
fn linux_line(quick: bool) -> String {
    format!("/bin/syscallbench --label linux --pin 1 --sqpoll-cpu 2 {}", common_arguments(quick))
}

// ---------------------------------------------------------------------------------------------
// What syscallbench printed

/// Whether `record` is of (label, bench, mechanism).
fn is(record: &Record, label: &str, bench: &str, mechanism: &str) -> bool {
    record.has(&[("label", label), ("bench", bench), ("mechanism", mechanism)])
}

/// Parses syscallbench's lines out of a serial log.
fn parse(serial: &str) -> Report {
    figure_lines::parse(serial, "SYSCALLBENCH", "syscallbench")
}

/// One guest boot: what it printed, or why it did not run at all.
struct GuestRun {
    name: String,
    cores: usize,
    line: String,
    outcome: Result<(Report, bool), String>,
}

impl GuestRun {
    fn report(&self) -> Option<&Report> {
        self.outcome.as_ref().ok().map(|(report, _)| report)
    }

    /// Why a label printed nothing, from what this boot shows.
    fn why_missing(&self, label: &str) -> String {
        match &self.outcome {
            Err(error) => format!("{}: the guest did not run: {error}", self.name),
            Ok((report, timed_out)) => {
                let errors: Vec<&str> = report
                    .errors
                    .iter()
                    .chain(&report.skips)
                    .filter(|line| line.starts_with(&format!("label={label} ")))
                    .map(String::as_str)
                    .collect();
                if !errors.is_empty() {
                    format!("{}: {}", self.name, errors.join("; "))
                } else if *timed_out {
                    format!("{}: timed out after {} s", self.name, RUN_TIMEOUT.as_secs())
                } else if !report.shell_errors.is_empty() {
                    format!("{}: {}", self.name, report.shell_errors.join("; "))
                } else {
                    format!("{}: syscallbench printed nothing for it", self.name)
                }
            }
        }
    }

    fn json(&self) -> Value {
        match &self.outcome {
            Ok((report, timed_out)) => json!({
                "name": self.name, "cores": self.cores, "command_line": self.line, "timed_out": timed_out,
                "figures": report.records.iter().map(Record::json).collect::<Vec<_>>(),
                "errors": report.errors, "skips": report.skips, "shell_errors": report.shell_errors,
                "tsc_hz": report.tsc_hz, "finished": report.done,
            }),
            Err(error) => {
                json!({ "name": self.name, "cores": self.cores, "command_line": self.line, "not_run": error })
            }
        }
    }
}

fn reef_run(
    configuration: &Configuration,
    accel: Accel,
    kernel: &std::path::Path,
    initrd: &std::path::Path,
) -> GuestRun {
    let outcome = (|| {
        let mut machine = Machine::new(configuration.cores);
        machine.accel = accel;
        machine.initrd = Some(initrd.to_path_buf());
        machine.kernel_args = qemu::exec_argument(&configuration.line)?;
        machine.timeout = RUN_TIMEOUT;
        let (outcome, _) = qemu::boot(&machine, kernel, None)?;
        Ok((parse(&outcome.serial), outcome.timed_out))
    })();
    GuestRun {
        name: configuration.name.to_string(),
        cores: configuration.cores,
        line: configuration.line.clone(),
        outcome,
    }
}

/// The Linux guest's run, and its kernel version.
fn linux_run(accel: Accel, quick: bool) -> (GuestRun, Option<String>) {
    let line = linux_line(quick);
    let outcome = (|| {
        let bytes = tools::user_program_bytes("syscallbench")?;
        let mut machine = Machine::new(LINUX_CORES);
        machine.accel = accel;
        machine.timeout = RUN_TIMEOUT;
        machine.kernel_args = LINUX_KERNEL_ARGUMENTS.into();
        let run = peer::run_program_on(&machine, &[("syscallbench".to_string(), bytes)], &line)?;
        Ok((parse(&run.serial), run.kernel_version))
    })();
    let (outcome, version) = match outcome {
        Ok((report, version)) => (Ok((report, false)), Some(version)),
        Err(error) => (Err(error), None),
    };
    (GuestRun { name: "linux".into(), cores: LINUX_CORES, line, outcome }, version)
}

// ---------------------------------------------------------------------------------------------
// Summing up

/// Every record of one figure over all boots, and why boots gave none.
struct Figure<'a> {
    records: Vec<&'a Record>,
    missing: Vec<String>,
}

/// The records of (label, bench, mechanism) with `key=value` in every one of `extra`.
fn figure<'a>(runs: &'a [GuestRun], label: &str, bench: &str, mechanism: &str, extra: &[(&str, u64)]) -> Figure<'a> {
    let mut records = Vec::new();
    let mut missing = Vec::new();
    for run in runs {
        let found: Vec<&Record> = run
            .report()
            .map(|report| {
                report
                    .records
                    .iter()
                    .filter(|r| is(r, label, bench, mechanism))
                    .filter(|r| extra.iter().all(|(key, value)| r.number(key) == Some(*value as f64)))
                    .collect()
            })
            .unwrap_or_default();
        if found.is_empty() {
            // A boot of another configuration has nothing to say about this label.
            let about =
                run.line.contains(&format!("--label {label} ")) || run.line.ends_with(&format!("--label {label}"));
            if about || run.report().is_none() && run.name == label {
                missing.push(run.why_missing(label));
            }
        }
        records.extend(found);
    }
    Figure { records, missing }
}

impl Figure<'_> {
    /// The median over boots of `key` (a figure's median), with the lowest p5 and highest p95
    /// when `key` is `median_ns`.
    fn median(&self, key: &str) -> Option<f64> {
        let values: Vec<f64> = self.records.iter().filter_map(|r| r.number(key)).collect();
        stats::summarize(&values).map(|s| s.median)
    }

    fn spread_ns(&self) -> Option<(f64, f64)> {
        let low = self.records.iter().filter_map(|r| r.number("p5_ns")).fold(f64::INFINITY, f64::min);
        let high = self.records.iter().filter_map(|r| r.number("p95_ns")).fold(f64::NEG_INFINITY, f64::max);
        (low.is_finite() && high.is_finite()).then_some((low, high))
    }

    fn why(&self) -> String {
        if self.missing.is_empty() {
            "no boot printed it".into()
        } else {
            self.missing.join(" | ")
        }
    }
}

/// Aggregate calls/s of several instances that ran at once: all their calls over the window
/// from the first start to the last end (their TSC bounds), at `tsc_hz`.
fn aggregate_throughput(records: &[&Record], tsc_hz: f64) -> Option<f64> {
    if records.is_empty() || tsc_hz <= 0.0 {
        return None;
    }
    let mut calls = 0.0;
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for record in records {
        calls += record.number("calls")? * record.number("runs")?;
        first = first.min(record.number("first_tsc")?);
        last = last.max(record.number("last_tsc")?);
    }
    (last > first).then(|| calls * tsc_hz / (last - first))
}

/// One goal: a ratio, what it compares and the goal it has, if any.
struct Goal {
    name: &'static str,
    what: &'static str,
    ratio: Result<f64, String>,
    /// At least this much.
    at_least: Option<f64>,
}

impl Goal {
    fn verdict(&self) -> &'static str {
        match (&self.ratio, self.at_least) {
            (Err(_), _) => "not measured",
            (Ok(_), None) => "report",
            (Ok(ratio), Some(goal)) if *ratio >= goal => "met",
            (Ok(_), Some(_)) => "not met",
        }
    }

    fn json(&self) -> Value {
        json!({
            "goal": self.name, "what": self.what, "at_least": self.at_least, "verdict": self.verdict(),
            "ratio": self.ratio.as_ref().ok(), "not_measured": self.ratio.as_ref().err(),
        })
    }
}

/// `numerator / denominator`, each from a figure's value, or why not.
fn ratio(numerator: (Option<f64>, &Figure), denominator: (Option<f64>, &Figure)) -> Result<f64, String> {
    match (numerator.0, denominator.0) {
        (Some(n), Some(d)) if d > 0.0 => Ok(n / d),
        (None, _) => Err(numerator.1.why()),
        (_, None) => Err(denominator.1.why()),
        (Some(_), Some(_)) => Err("a zero in the denominator".into()),
    }
}

fn goals(reef: &[GuestRun], linux: &[GuestRun]) -> Vec<Goal> {
    let blocking = [("calls", GOAL_BLOCKING_CALLS)];
    let batch = [("batch", GOAL_BATCH)];
    let ac_syspage_call = figure(reef, "ac-syspage", "blocking", "syspage", &blocking);
    let ac_trap_call = figure(reef, "ac-trap", "blocking", "trap", &blocking);
    let linux_trap_call = figure(linux, "linux", "blocking", "trap", &blocking);
    let ac_syspage_64 = figure(reef, "ac-syspage", "batch", "syspage", &batch);
    // The trap's throughput baseline is its best figure: the batch run's one-at-a-time loop, or
    // the 100000 blocking calls (the same calls; the guest has shown the first slower), a true
    // floor either way.
    let linux_trap_batch = figure(linux, "linux", "batch", "trap", &[]);
    let linux_trap_throughput = if linux_trap_call.median("calls_per_s") > linux_trap_batch.median("calls_per_s") {
        &linux_trap_call
    } else {
        &linux_trap_batch
    };
    let sqpoll_64 = figure(linux, "linux", "batch", "uring-sqpoll", &batch);
    let one_ac = figure(reef, "one-ac", "batch", "syspage", &batch);
    let two_acs: Vec<Figure> =
        ["two-acs-1", "two-acs-2"].iter().map(|label| figure(reef, label, "batch", "syspage", &batch)).collect();
    let tsc_hz = reef
        .iter()
        .filter_map(GuestRun::report)
        .find_map(|report| report.tsc_hz.get("one-ac").or(report.tsc_hz.get("two-acs-1")).copied())
        .unwrap_or(0.0);
    let pair: Vec<&Record> = two_acs.iter().flat_map(|f| f.records.iter().copied()).collect();
    let two_acs_ratio = if two_acs.iter().any(|f| f.records.is_empty()) {
        let mut reasons: Vec<String> = two_acs.iter().filter(|f| f.records.is_empty()).map(Figure::why).collect();
        reasons.dedup();
        Err(reasons.join(" | "))
    } else {
        ratio(
            (aggregate_throughput(&pair, tsc_hz), &two_acs[0]),
            (aggregate_throughput(&one_ac.records, tsc_hz), &one_ac),
        )
    };
    vec![
        Goal {
            name: "ac-syspage-call/linux-trap-call",
            what: "time of one blocking getppid: through the syspage from an AC (KC serving) over by trap on Linux, per call of 100000",
            ratio: ratio(
                (ac_syspage_call.median("per_call_ns"), &ac_syspage_call),
                (linux_trap_call.median("per_call_ns"), &linux_trap_call),
            ),
            at_least: None,
        },
        Goal {
            name: "ac-trap-call/ac-syspage-call",
            what: "time of one blocking getppid from an AC: trap forwarded by ICC over syspage (Memsc's comparison)",
            ratio: ratio(
                (ac_trap_call.median("per_call_ns"), &ac_trap_call),
                (ac_syspage_call.median("per_call_ns"), &ac_syspage_call),
            ),
            at_least: None,
        },
        Goal {
            name: "syspage-batch64/linux-trap",
            what: "calls/s: syspage batches of 64 from an AC over getppid by trap on Linux (the better of its batch and 100000-blocking figures)",
            ratio: ratio(
                (ac_syspage_64.median("calls_per_s"), &ac_syspage_64),
                (linux_trap_throughput.median("calls_per_s"), linux_trap_throughput),
            ),
            at_least: Some(5.0),
        },
        Goal {
            name: "syspage-batch64/io_uring-sqpoll-batch64",
            what: "calls/s: syspage batches of 64 from an AC over io_uring NOPs in batches of 64 with SQPOLL on Linux",
            ratio: ratio((ac_syspage_64.median("calls_per_s"), &ac_syspage_64), (sqpoll_64.median("calls_per_s"), &sqpoll_64)),
            at_least: None,
        },
        Goal {
            name: "two-acs/one-ac",
            what: "calls/s of batch-64 syspages: two ACs at once sharing one KC (all calls over the window from the first start to the last end) over one AC alone",
            ratio: two_acs_ratio,
            at_least: Some(1.6),
        },
    ]
}

/// The series of the two charts: per (label, mechanism) its points.
struct Curve {
    name: &'static str,
    label: &'static str,
    mechanism: &'static str,
}

const BLOCKING_CURVES: [Curve; 4] = [
    Curve { name: "Reef TC, trap", label: "tc-trap", mechanism: "trap" },
    Curve { name: "Reef AC, trap (ICC to the TC)", label: "ac-trap", mechanism: "trap" },
    Curve { name: "Reef AC, syspage (KC)", label: "ac-syspage", mechanism: "syspage" },
    Curve { name: "Linux, trap", label: "linux", mechanism: "trap" },
];

const BATCH_CURVES: [Curve; 5] = [
    Curve { name: "Reef AC, syspage (KC)", label: "ac-syspage", mechanism: "syspage" },
    Curve { name: "Linux, io_uring NOP", label: "linux", mechanism: "uring" },
    Curve { name: "Linux, io_uring NOP, SQPOLL", label: "linux", mechanism: "uring-sqpoll" },
    Curve { name: "Reef TC, trap (one at a time)", label: "tc-trap", mechanism: "trap" },
    Curve { name: "Linux, trap (one at a time)", label: "linux", mechanism: "trap" },
];

/// Points of `bench` for `curve`: x from `x_key`, y from `y` of each record (median over boots),
/// with the p5..p95 spread scaled alike when `spread` says how.
fn curve_points(
    runs: &[GuestRun],
    curve: &Curve,
    bench: &str,
    x_key: &str,
    y: impl Fn(&Figure) -> Option<(f64, Option<(f64, f64)>)>,
) -> Series {
    let mut xs: Vec<u64> = runs
        .iter()
        .filter_map(GuestRun::report)
        .flat_map(|report| report.records.iter())
        .filter(|r| is(r, curve.label, bench, curve.mechanism))
        .filter_map(|r| r.number(x_key).map(|x| x as u64))
        .collect();
    xs.sort_unstable();
    xs.dedup();
    let mut series = Series { name: curve.name.to_string(), points: Vec::new(), low_high: Some(Vec::new()) };
    for x in xs {
        let figure = figure(runs, curve.label, bench, curve.mechanism, &[(x_key, x)]);
        if let Some((value, spread)) = y(&figure) {
            series.points.push((x as f64, value));
            series.low_high.as_mut().expect("set above").push(spread.unwrap_or((value, value)));
        }
    }
    series
}

fn charts(runs: &[GuestRun], accel: Accel, directory: &std::path::Path) {
    let blocking: Vec<Series> = BLOCKING_CURVES
        .iter()
        .map(|curve| {
            curve_points(runs, curve, "blocking", "calls", |figure| {
                let us = figure.median("median_ns")? / 1e3;
                Some((us, figure.spread_ns().map(|(low, high)| (low / 1e3, high / 1e3))))
            })
        })
        .filter(|series| !series.points.is_empty())
        .collect();
    draw(
        &directory.join("syscall-blocking.png"),
        &format!("N blocking getppid, median with p5-p95 ({})", accel.name()),
        ("calls", "time (µs)"),
        &blocking,
        "blocking",
    );

    let batch_sizes: Vec<f64> = [1.0, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0].to_vec();
    let mut batch: Vec<Series> = Vec::new();
    for curve in &BATCH_CURVES {
        let mut series =
            curve_points(runs, curve, "batch", "batch", |figure| Some((figure.median("calls_per_s")?, None)));
        // A trap has no batches: its one figure is drawn flat across the sizes, a baseline.
        if curve.mechanism == "trap" {
            if let Some(&(_, value)) = series.points.first() {
                series.points = batch_sizes.iter().map(|&size| (size, value)).collect();
            }
        }
        series.low_high = None;
        if !series.points.is_empty() {
            batch.push(series);
        }
    }
    draw(
        &directory.join("syscall-batch.png"),
        &format!("throughput against batch size, median ({})", accel.name()),
        ("batch size", "calls/s"),
        &batch,
        "batch",
    );
}

/// Draws `series` on log-log axes into `path`, or says why there is no chart of `what`.
fn draw(path: &std::path::Path, title: &str, (x_label, y_label): (&str, &str), series: &[Series], what: &str) {
    let drawn = if series.is_empty() {
        Err(format!("no {what} figure measured"))
    } else {
        plot::line_chart(path, title, x_label, y_label, series, true, true)
    };
    match drawn {
        Ok(()) => println!("wrote {}", path.display()),
        Err(error) => println!("no {what} chart: {error}"),
    }
}

/// The table of every figure of `runs`, one line each.
fn print_figures(runs: &[GuestRun]) {
    println!(
        "{:<11} {:<9} {:<13} {:>8} {:>6} {:>16} {:>16} {:>16} {:>12} {:>5}",
        "label", "bench", "mechanism", "calls", "batch", "median", "p5", "p95", "calls/s", "core"
    );
    let time = crate::bench::common::time_text;
    for run in runs {
        match &run.outcome {
            Err(error) => println!("{:<11} not run: {error}", run.name),
            Ok((report, timed_out)) => {
                for record in &report.records {
                    println!(
                        "{:<11} {:<9} {:<13} {:>8} {:>6} {:>16} {:>16} {:>16} {:>12.0} {:>5}",
                        record.text("label"),
                        record.text("bench"),
                        record.text("mechanism"),
                        record.text("calls"),
                        record.fields.get("batch").map_or("-", String::as_str),
                        time(record.number("median_ns")),
                        time(record.number("p5_ns")),
                        time(record.number("p95_ns")),
                        record.number("calls_per_s").unwrap_or(0.0),
                        record.text("core"),
                    );
                }
                for line in report.errors.iter().chain(&report.skips) {
                    println!("{:<11} not measured: {line}", run.name);
                }
                if *timed_out {
                    println!("{:<11} timed out after {} s", run.name, RUN_TIMEOUT.as_secs());
                }
                if report.records.is_empty() && !report.shell_errors.is_empty() {
                    println!("{:<11} failed: {}", run.name, report.shell_errors.join("; "));
                } else if report.records.is_empty() && report.errors.is_empty() {
                    println!("{:<11} printed no figure", run.name);
                }
            }
        }
    }
}

/// `cargo xtask bench syscall`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments, USAGE)?;
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let initrd = tools::build_initramfs()?;
    let mut reef_runs = Vec::new();
    let mut linux_runs = Vec::new();
    let mut linux_version = None;
    for run in 1..=options.runs {
        for configuration in configurations(options.quick) {
            eprintln!(
                "xtask: run {run}/{}: {} on Reef ({} cores, {}): {}",
                options.runs,
                configuration.name,
                configuration.cores,
                options.accel.name(),
                configuration.line
            );
            let guest = reef_run(&configuration, options.accel, &kernel, &initrd);
            if let Err(error) = &guest.outcome {
                eprintln!("xtask: {} did not run: {error}", configuration.name);
            }
            reef_runs.push(guest);
        }
        if options.linux {
            eprintln!("xtask: run {run}/{}: syscallbench in the Linux guest ({LINUX_CORES} cores)", options.runs);
            let (guest, version) = linux_run(options.accel, options.quick);
            if let Err(error) = &guest.outcome {
                eprintln!("xtask: the Linux guest gave no figures: {error}");
            }
            linux_version = linux_version.or(version);
            linux_runs.push(guest);
        }
    }
    println!("figures ({}; times are of one whole run of `calls` calls):", options.accel.name());
    print_figures(&reef_runs);
    print_figures(&linux_runs);
    let goals = goals(&reef_runs, &linux_runs);
    println!("goals:");
    for goal in &goals {
        let at_least = goal.at_least.map_or("report".to_string(), |g| format!(">= {g}"));
        match &goal.ratio {
            Ok(ratio) => println!("  {:<40} {:>8.2}  {:<8} {}", goal.name, ratio, at_least, goal.verdict()),
            Err(why) => println!("  {:<40} {:>8}  {:<8} not measured: {why}", goal.name, "-", at_least),
        }
    }
    let tsc_hz =
        |runs: &[GuestRun]| runs.iter().filter_map(GuestRun::report).find_map(|r| r.tsc_hz.values().next().copied());
    let results = json!({
        "benchmark": "syscall",
        "what": "getppid by trap and through syspages (user/syscallbench) on Reef's TC, an AC (trap forwarded \
                 by ICC, or syspage served by a KC) and two ACs sharing a KC; Memsc tables 5.1, 5.2/5.5 and \
                 NIX table 1; against the Linux guest's trap and io_uring NOPs with and without SQPOLL",
        "accelerator": options.accel.name(),
        "runs": options.runs,
        "quick": options.quick,
        "cores_plan": { "tc": 0, "ac": 1, "kc": 2, "cores": 3, "two_acs": { "acs": [1, 2], "kc": 3, "cores": 4 } },
        "reef": { "tsc_hz": tsc_hz(&reef_runs), "boots": reef_runs.iter().map(GuestRun::json).collect::<Vec<_>>() },
        "linux": if options.linux { json!({
            "tsc_hz": tsc_hz(&linux_runs), "kernel_version": linux_version, "cores": LINUX_CORES,
            "kernel_arguments_added": LINUX_KERNEL_ARGUMENTS,
            "boots": linux_runs.iter().map(GuestRun::json).collect::<Vec<_>>(),
        }) } else { Value::Null },
        "goals": goals.iter().map(Goal::json).collect::<Vec<_>>(),
    });
    let directory = crate::bench::common::write_results(&results, "syscall.json")?;
    let mut every = reef_runs;
    every.extend(linux_runs);
    charts(&every, options.accel, &directory);
    Ok(0)
}

/// `cargo xtask peer syscall`: syscallbench in the Linux guest alone, printed.
pub fn peer(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments, "peer syscall [--accel kvm|tcg] [--quick]")?;
    let (guest, version) = linux_run(options.accel, options.quick);
    println!(
        "Linux {} ({}, {LINUX_CORES} cores): {}",
        version.as_deref().unwrap_or("?"),
        options.accel.name(),
        guest.line
    );
    print_figures(std::slice::from_ref(&guest));
    Ok(u8::from(guest.outcome.is_err()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const SERIAL: &str = "\
[c0 INFO ] TSC 2000 MHz
SYSCALLBENCH-CONFIG label=ac-syspage tsc_hz=2000000000 os=reef core=1 kc=2 instances=3
SYSCALLBENCH label=ac-syspage bench=blocking mechanism=syspage calls=100000 runs=5 core=1 unit=ns median_ns=200000000.0 p5_ns=190000000.0 p95_ns=230000000.0 per_call_ns=2000.0 calls_per_s=500000
[c2 WARN ] noise SYSCALLBENCH label=ac-syspage bench=batch mechanism=syspage calls=100000 batch=64 runs=3 core=1 unit=ns median_ns=10000000.0 p5_ns=9000000.0 p95_ns=11000000.0 calls_per_s=10000000 first_tsc=0 last_tsc=60000000
SYSCALLBENCH-ERROR label=ac-syspage bench=threads mechanism=syspage: registering a syspage with core 2: Device busy (os error 16)
SYSCALLBENCH-SKIP label=ac-syspage bench=batch mechanism=uring reason=no-io-uring
SYSCALLBENCH-DONE label=ac-syspage
";

    fn run_of(name: &str, line: &str, serial: &str) -> GuestRun {
        GuestRun { name: name.into(), cores: 3, line: line.into(), outcome: Ok((parse(serial), false)) }
    }

    #[test]
    fn syscallbench_lines_are_parsed() {
        let report = parse(SERIAL);
        assert_eq!(report.records.len(), 2, "noise before the tag is skipped");
        assert!(is(&report.records[1], "ac-syspage", "batch", "syspage"));
        assert_eq!(report.records[1].number("batch"), Some(64.0));
        assert_eq!(report.errors.len(), 1);
        assert!(report.errors[0].contains("os error 16"));
        assert_eq!(report.skips, ["label=ac-syspage bench=batch mechanism=uring reason=no-io-uring"]);
        assert_eq!(report.tsc_hz["ac-syspage"], 2e9);
        assert_eq!(report.done, ["ac-syspage"]);
        let failed = parse("sh: role: not found\nsh: role: not found\nexecac: core 1 is not an application core\n");
        assert_eq!(failed.shell_errors.len(), 2, "each message once");
        assert!(failed.records.is_empty());
    }

    #[test]
    fn goals_from_figures_and_why_they_are_missing() {
        let reef = [
            run_of("ac-syspage", "role 2 kc; execac 1 /bin/syscallbench --syspage --kc 2 --label ac-syspage --repeat 3", SERIAL),
            run_of("ac-trap", "role 2 kc; execac 1 /bin/syscallbench --trap --label ac-trap --repeat 3", "sh: execac: not found\n"),
            run_of(
                "two-acs",
                "… --label one-ac; … --label two-acs-1 & … --label two-acs-2 & wait",
                "SYSCALLBENCH-CONFIG label=one-ac tsc_hz=1000000000\n\
                 SYSCALLBENCH label=one-ac bench=batch mechanism=syspage calls=1000 batch=64 runs=2 first_tsc=0 last_tsc=2000000\n\
                 SYSCALLBENCH label=two-acs-1 bench=batch mechanism=syspage calls=1000 batch=64 runs=2 first_tsc=0 last_tsc=2000000\n\
                 SYSCALLBENCH label=two-acs-2 bench=batch mechanism=syspage calls=1000 batch=64 runs=2 first_tsc=500000 last_tsc=2500000\n",
            ),
        ];
        let linux = [run_of(
            "linux",
            "/bin/syscallbench --label linux --repeat 3",
            "SYSCALLBENCH label=linux bench=blocking mechanism=trap calls=100000 per_call_ns=500.0\n\
             SYSCALLBENCH label=linux bench=batch mechanism=trap calls=100000 batch=1 calls_per_s=1000000\n",
        )];
        let goals = goals(&reef, &linux);
        let by_name = |name: &str| goals.iter().find(|g| g.name == name).unwrap();
        assert_eq!(by_name("ac-syspage-call/linux-trap-call").ratio, Ok(4.0));
        assert_eq!(by_name("syspage-batch64/linux-trap").ratio, Ok(10.0));
        assert_eq!(by_name("syspage-batch64/linux-trap").verdict(), "met");
        let sqpoll = by_name("syspage-batch64/io_uring-sqpoll-batch64");
        assert_eq!(sqpoll.verdict(), "not measured");
        assert!(
            sqpoll.ratio.as_ref().unwrap_err().contains("linux: syscallbench printed nothing"),
            "{:?}",
            sqpoll.ratio
        );
        let forwarded = by_name("ac-trap-call/ac-syspage-call");
        assert!(
            forwarded.ratio.as_ref().unwrap_err().contains("ac-trap: sh: execac: not found"),
            "{:?}",
            forwarded.ratio
        );
        // One AC: 2000 calls in 2 ms, 1e6/s; two: 4000 calls in 2.5 ms, 1.6e6/s.
        let two = by_name("two-acs/one-ac");
        assert!((two.ratio.clone().unwrap() - 1.6).abs() < 1e-9, "{:?}", two.ratio);
        assert_eq!(two.verdict(), "met");
    }

    #[test]
    fn a_boot_that_never_ran_is_reported() {
        let reef = [GuestRun {
            name: "ac-syspage".into(),
            cores: 3,
            line: "execac 1 /bin/syscallbench --syspage --kc 2 --label ac-syspage --repeat 3".into(),
            outcome: Err("QEMU did not start".into()),
        }];
        let figure = figure(&reef, "ac-syspage", "batch", "syspage", &[("batch", 64)]);
        assert!(figure.records.is_empty());
        assert_eq!(figure.why(), "ac-syspage: the guest did not run: QEMU did not start");
        assert!(reef[0].json()["not_run"].as_str().unwrap().contains("QEMU"));
    }

    #[test]
    fn the_configurations_follow_the_core_plan() {
        let configurations = configurations(false);
        let names: Vec<&str> = configurations.iter().map(|c| c.name).collect();
        assert_eq!(names, ["tc-trap", "ac-trap", "ac-syspage", "two-acs"]);
        for configuration in &configurations {
            // The kernel keeps `exec=` values of up to 1024 bytes.
            assert!(qemu::exec_argument(&configuration.line).unwrap().len() < 1024, "{}", configuration.line);
            let kc = if configuration.cores == 4 { "role 3 kc" } else { "role 2 kc" };
            assert!(configuration.line.starts_with(kc), "{}", configuration.line);
        }
        assert!(configurations[0].line.contains("; /bin/syscallbench --trap --label tc-trap "));
        assert!(configurations[1].line.contains("execac 1 /bin/syscallbench --trap --label ac-trap "));
        assert!(configurations[2].line.contains("execac 1 /bin/syscallbench --syspage --kc 2 --label ac-syspage "));
        let two = &configurations[3].line;
        // The two meet on a fresh file before their timed runs, so their windows overlap.
        assert!(two.contains("rm -f /tmp/two-acs; "));
        for ac in [1, 2] {
            let line = format!(
                "execac {ac} /bin/syscallbench --syspage --kc 3 --only batch --batch 64 --repeat 3 \
                 --start-with /tmp/two-acs 2 --label two-acs-{ac} &"
            );
            assert!(two.contains(&line), "{two}");
        }
        assert!(two.ends_with("& wait"));
        assert!(linux_line(true).contains("--calls 10000"));
    }

    #[test]
    fn options() {
        let options =
            parse_options(&strings(&["--runs", "2", "--accel", "tcg", "--no-linux", "--quick"]), USAGE).unwrap();
        assert_eq!(options, Options { runs: 2, accel: Accel::Tcg, linux: false, quick: true });
        assert!(parse_options(&strings(&["--runs", "0"]), USAGE).is_err());
        assert!(parse_options(&strings(&["--vs"]), USAGE).unwrap_err().contains("`--vs`"));
    }
}
