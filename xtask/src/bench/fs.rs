//! `cargo xtask bench fs`: the file benchmarks (`user/fsbench`: busybox dd and ls -l in /tmp,
//! pipe throughput) on Reef's cores 0 and 1 and in the Linux guest, and boot to the shell.
//!
//! Memsc §5.3 measured `dd` and `ls -l` with system calls forwarded to another core; here the
//! same commands run on core 0, where the file service lives, and on core 1, where every call
//! is forwarded to it, each against the Linux guest booted right after in the same QEMU setup.

use crate::bench::common::LINUX_KERNEL_ARGUMENTS;
use crate::bench::op_counts::{self, OpCounts};
use crate::bench::peer;
use crate::bench::plot;
use crate::bench::stats::{self, Summary};
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Both guests: 4 cores, and memory for a 64 MiB file in a tmpfs besides everything else.
const CORES: usize = 4;
const MEMORY_MIB: usize = 1024;
/// The core of the file service, and the core whose calls are all forwarded to it.
const SERVICE_CORE: usize = 0;
const OTHER_CORE: usize = 1;
/// The sizes of the issue: `dd` files in MiB, `ls -l` directories in files, the pipe transfer.
const DD_MIB: [u64; 4] = [1, 4, 16, 64];
const LS_FILES: [u64; 3] = [100, 1000, 10_000];
const PIPE_MIB: u64 = 64;
/// Boot to the `sh` prompt with 4 cores: the issue's goal, in ms.
const BOOT_GOAL_MS: f64 = 300.0;
/// How long a benchmark guest may run, and a boot may take to its shell banner.
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
const BOOT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Options {
    runs: usize,
    /// Samples of each size in each run (`fsbench --repeat`).
    repeat: usize,
    accel: Accel,
    vs_linux: bool,
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options { runs: 3, repeat: 3, accel: Accel::detect(), vs_linux: false };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        let mut number = |range| crate::bench::common::number_option(word, words.next(), range);
        match word.as_str() {
            "--runs" => options.runs = number(1..=20)?,
            "--repeat" => options.repeat = number(1..=100)?,
            "--accel" => options.accel = Accel::parse(words.next().ok_or("--accel takes kvm or tcg")?)?,
            "--vs-linux" => options.vs_linux = true,
            other => {
                return Err(format!(
                    "unknown option `{other}`: bench fs [--runs N] [--repeat K] [--accel kvm|tcg] [--vs-linux]"
                ))
            }
        }
    }
    Ok(options)
}

// ---------------------------------------------------------------------------------------------
// What runs

/// One run of fsbench: the core it runs on and its arguments after the program name.
#[derive(Clone, Debug, PartialEq)]
struct Invocation {
    core: usize,
    arguments: String,
}

/// Every fsbench run of one guest boot, in order: dd and ls on the service's core and on the
/// other core, the pipe on the service's core with its reader there and on the other core.
fn invocations(repeat: usize) -> Vec<Invocation> {
    let list = |values: &[u64]| values.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
    let mut invocations = Vec::new();
    for core in [SERVICE_CORE, OTHER_CORE] {
        invocations.push(Invocation { core, arguments: format!("--repeat {repeat} dd {}", list(&DD_MIB)) });
        invocations.push(Invocation { core, arguments: format!("--repeat {repeat} ls {}", list(&LS_FILES)) });
        if core == SERVICE_CORE {
            let pipe = format!("--repeat {repeat} pipe {PIPE_MIB}");
            invocations.push(Invocation { core, arguments: pipe.clone() });
            invocations.push(Invocation { core, arguments: format!("{pipe} --cross {OTHER_CORE}") });
        }
    }
    invocations
}

/// The Reef command line that runs `invocations` one after the other, each waited for: the
/// one place that knows the shell's syntax (the user shell's: `on <core> <program>`, `;`
/// between commands).
fn reef_shell_line(invocations: &[Invocation]) -> String {
    let commands: Vec<String> = invocations
        .iter()
        .map(|run| format!("on {core} /bin/fsbench --pin {core} {}", run.arguments, core = run.core))
        .collect();
    commands.join("; ")
}

/// The same for the Linux guest's `/init` (a busybox sh script): fsbench pins itself.
fn linux_shell_line(invocations: &[Invocation]) -> String {
    let commands: Vec<String> =
        invocations.iter().map(|run| format!("/bin/fsbench --pin {} {}", run.core, run.arguments)).collect();
    commands.join("; ")
}

// ---------------------------------------------------------------------------------------------
// What fsbench printed

/// Which figure a sample belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Key {
    Dd {
        mib: u64,
        core: u64,
    },
    Ls {
        files: u64,
        core: u64,
    },
    /// The writer on the service's core; the reader there too, or on another core (`cross`).
    Pipe {
        mib: u64,
        cross: bool,
    },
}

/// An `FSBENCH-ERROR` line: the figure's words it carries, and why.
#[derive(Clone, Debug, PartialEq)]
struct ErrorLine {
    kind: String,
    fields: BTreeMap<String, String>,
    message: String,
}

impl ErrorLine {
    /// Whether the error is about `key`: the same benchmark, and every field of the key that
    /// the line names agrees (a line naming no size is about every size).
    fn is_about(&self, key: Key) -> bool {
        let agrees = |name: &str, value: String| self.fields.get(name).is_none_or(|found| *found == value);
        match key {
            Key::Dd { mib, core } => {
                self.kind == "dd" && agrees("mib", mib.to_string()) && agrees("core", core.to_string())
            }
            Key::Ls { files, core } => {
                self.kind == "ls" && agrees("files", files.to_string()) && agrees("core", core.to_string())
            }
            Key::Pipe { mib, cross } => {
                self.kind == "pipe" && agrees("mib", mib.to_string()) && agrees("cross", u8::from(cross).to_string())
            }
        }
    }
}

/// Everything fsbench printed in one guest boot.
#[derive(Debug, Default, PartialEq)]
struct Report {
    /// Per figure, its samples in ns, in the order taken.
    samples: BTreeMap<Key, Vec<f64>>,
    /// Per figure, the message lines and wake-ups its samples took (Reef only).
    counts: BTreeMap<Key, OpCounts>,
    errors: Vec<ErrorLine>,
    /// `FSBENCH-NOTE` texts.
    notes: Vec<String>,
    /// The TSC rate of the first `FSBENCH-CONFIG` line.
    tsc_hz: Option<f64>,
}

/// The `key=value` words of `words`.
fn fields<'a>(words: impl Iterator<Item = &'a str>) -> BTreeMap<String, String> {
    words.filter_map(|word| word.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The figure of a sample line's benchmark word and fields; `None` if a field is missing.
fn key_of(kind: &str, fields: &BTreeMap<String, String>) -> Option<Key> {
    let number = |name: &str| fields.get(name)?.parse::<u64>().ok();
    match kind {
        "dd" => Some(Key::Dd { mib: number("mib")?, core: number("core")? }),
        "ls" => Some(Key::Ls { files: number("files")?, core: number("core")? }),
        "pipe" => Some(Key::Pipe { mib: number("mib")?, cross: number("cross")? != 0 }),
        _ => None,
    }
}

/// Parses fsbench's lines out of a serial log. Text before `FSBENCH` on a line (a kernel
/// message that got in first) is skipped; `FSBENCH-SUMMARY` lines are not read (the summaries
/// are made here, over every run's samples); a line that does not parse is left out. Two
/// `FSBENCH-COUNTS` lines of one figure (it ran twice in the boot) are added.
fn parse(serial: &str) -> Report {
    let mut report = Report::default();
    for line in serial.lines() {
        let Some(position) = line.find("FSBENCH") else { continue };
        let line = line[position..].trim_end();
        let Some((tag, rest)) = line.split_once(' ') else { continue };
        match tag {
            "FSBENCH" => {
                let mut words = rest.split_whitespace();
                let kind = words.next().unwrap_or_default();
                let fields = fields(words);
                let ns = fields.get("ns").and_then(|ns| ns.parse::<f64>().ok());
                if let (Some(key), Some(ns)) = (key_of(kind, &fields), ns) {
                    report.samples.entry(key).or_default().push(ns);
                }
            }
            "FSBENCH-COUNTS" => {
                let mut words = rest.split_whitespace();
                let kind = words.next().unwrap_or_default();
                if let (Some(key), Some(counts)) = (key_of(kind, &fields(words)), OpCounts::from_words(rest)) {
                    let entry = report.counts.entry(key).or_default();
                    *entry = entry.plus(counts);
                }
            }
            "FSBENCH-ERROR" => {
                let (head, message) = rest.split_once(": ").unwrap_or((rest, ""));
                let mut words = head.split_whitespace();
                let kind = words.next().unwrap_or_default().trim_end_matches(':').to_string();
                report.errors.push(ErrorLine { kind, fields: fields(words), message: message.trim().to_string() });
            }
            "FSBENCH-NOTE" => report.notes.push(rest.to_string()),
            "FSBENCH-CONFIG" if report.tsc_hz.is_none() => {
                report.tsc_hz = fields(rest.split_whitespace()).get("tsc_hz").and_then(|hz| hz.parse().ok());
            }
            _ => {}
        }
    }
    report
}

// ---------------------------------------------------------------------------------------------
// The figures

/// What a figure's samples are compared as.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Measure {
    /// Elapsed time, shown in ms; the goal is a ratio Reef / Linux at most.
    Time,
    /// MB/s from `bytes` over the elapsed time; the goal is a ratio Reef / Linux at least.
    Throughput { bytes: f64 },
}

impl Measure {
    fn unit(self) -> &'static str {
        match self {
            Measure::Time => "ms",
            Measure::Throughput { .. } => "MB/s",
        }
    }

    /// A sample in ns as this measure's value.
    fn value(self, ns: f64) -> f64 {
        match self {
            Measure::Time => ns / 1e6,
            Measure::Throughput { bytes } => bytes * 1e3 / ns.max(1.0),
        }
    }

    fn met(self, ratio: f64, goal: f64) -> bool {
        match self {
            Measure::Time => ratio <= goal,
            Measure::Throughput { .. } => ratio >= goal,
        }
    }

    fn goal_text(self, goal: f64) -> String {
        match self {
            Measure::Time => format!("<= {goal}"),
            Measure::Throughput { .. } => format!(">= {goal}"),
        }
    }
}

/// One row of the table.
struct Figure {
    key: Key,
    /// Short, for the table and the charts.
    label: String,
    what: String,
    measure: Measure,
    /// The issue's goal for Reef / Linux (of time, or of throughput).
    goal: f64,
    /// What fsbench counts messages and wake-ups per.
    operation: &'static str,
}

/// Every figure the issue asks for, in the table's order.
fn figures() -> Vec<Figure> {
    let mut figures = Vec::new();
    let forwarded = |core: usize| if core == SERVICE_CORE { "the service's core" } else { "calls forwarded to core 0" };
    let goal = |core: usize| if core == SERVICE_CORE { 1.0 } else { 1.5 };
    for core in [SERVICE_CORE, OTHER_CORE] {
        for mib in DD_MIB {
            figures.push(Figure {
                key: Key::Dd { mib, core: core as u64 },
                label: format!("dd {mib} MiB, core {core}"),
                what: format!(
                    "busybox dd if=/dev/zero of=/tmp/fsbench.dd bs=512 count={}, fork to reap, on core {core} ({})",
                    mib * 2048,
                    forwarded(core)
                ),
                measure: Measure::Time,
                goal: goal(core),
                operation: "512-byte block (a read and a write)",
            });
        }
    }
    for core in [SERVICE_CORE, OTHER_CORE] {
        for files in LS_FILES {
            figures.push(Figure {
                key: Key::Ls { files, core: core as u64 },
                label: format!("ls -l {files}, core {core}"),
                what: format!(
                    "busybox ls -l of a directory of {files} empty files in /tmp, stdout to /dev/null, on core {core} ({})",
                    forwarded(core)
                ),
                measure: Measure::Time,
                goal: goal(core),
                operation: "file listed",
            });
        }
    }
    for cross in [false, true] {
        let (label, reader) = if cross {
            (format!("pipe, cores {SERVICE_CORE}->{OTHER_CORE}"), format!("on core {OTHER_CORE}"))
        } else {
            (format!("pipe, core {SERVICE_CORE}"), "on the same core".to_string())
        };
        figures.push(Figure {
            key: Key::Pipe { mib: PIPE_MIB, cross },
            label,
            what: format!(
                "{PIPE_MIB} MiB through a pipe in 64 KiB writes from core {SERVICE_CORE}, read 64 KiB at a time {reader}"
            ),
            measure: Measure::Throughput { bytes: (PIPE_MIB << 20) as f64 },
            goal: 1.0,
            operation: "64 KiB write",
        });
    }
    figures
}

// ---------------------------------------------------------------------------------------------
// Running

/// One Reef boot running every invocation.
struct ReefRun {
    report: Report,
    timed_out: bool,
    /// The user shell's and `on`'s own one-line errors (`sh: …`, `on: …`: a program refused,
    /// say).
    shell_errors: Vec<String>,
    /// The TSC rate the kernel printed at boot.
    kernel_tsc_hz: Option<u64>,
}

/// One Linux guest boot running every invocation, or why it did not.
struct LinuxRun {
    report: Report,
    kernel_version: String,
    machine: String,
    boot_to_init_ms: Option<f64>,
}

fn machine(options: &Options, initrd: &std::path::Path) -> Machine {
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.memory_mib = MEMORY_MIB;
    machine.initrd = Some(initrd.to_path_buf());
    machine
}

fn reef_run(options: &Options, kernel: &std::path::Path, initrd: &std::path::Path) -> Result<ReefRun, String> {
    let mut machine = machine(options, initrd);
    machine.kernel_args = qemu::exec_argument(&reef_shell_line(&invocations(options.repeat)))?;
    machine.timeout = RUN_TIMEOUT;
    let (outcome, _) = qemu::boot(&machine, kernel, None)?;
    let shell_errors = outcome
        .serial
        .lines()
        .filter(|line| line.starts_with("sh: ") || line.starts_with("on: "))
        .map(str::to_string)
        .collect::<Vec<_>>();
    Ok(ReefRun {
        report: parse(&outcome.serial),
        timed_out: outcome.timed_out,
        shell_errors,
        kernel_tsc_hz: crate::bench::common::guest_tsc_hz(&outcome.serial),
    })
}

/// What a Reef boot is timed to, for the results.
const BOOT_MARK: &str = "user shell banner `Reef: <n> kernel instances up`, once the prompt shows";

/// Whether `serial` shows the user shell's banner among its whole lines (a log message saying
/// how many instances are up starts with `[c0 INFO ]`, so it is not one) and its prompt after
/// it (init prints the banner just before it starts the shell).
fn shell_banner(serial: &str) -> bool {
    let instances_up = |rest: &str| {
        let mut words = rest.split_whitespace();
        words.next().is_some_and(|n| n.parse::<u32>().is_ok())
            && words.next() == Some("kernel")
            && words.next() == Some("instances")
            && words.next().is_some_and(|word| word.starts_with("up"))
    };
    serial.contains(crate::bench::common::USER_PROMPT)
        && serial.lines().any(|line| line.strip_prefix("Reef: ").is_some_and(instances_up))
}

/// Boots Reef with nothing to run and times QEMU's start to the shell's banner.
fn reef_boot(options: &Options, kernel: &std::path::Path, initrd: &std::path::Path) -> Result<f64, String> {
    let mut machine = machine(options, initrd);
    machine.timeout = BOOT_TIMEOUT;
    let (_, after) = qemu::boot_until(&machine, kernel, Some(&shell_banner))?;
    match after {
        Some(after) => Ok((after.as_secs_f64() * 1e4).round() / 10.0),
        None => Err(format!("no shell banner within {} s", BOOT_TIMEOUT.as_secs())),
    }
}

fn linux_run(options: &Options) -> Result<LinuxRun, String> {
    let bytes = tools::user_program_bytes("fsbench")?;
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.memory_mib = MEMORY_MIB;
    machine.timeout = RUN_TIMEOUT;
    machine.kernel_args = LINUX_KERNEL_ARGUMENTS.into();
    let command = linux_shell_line(&invocations(options.repeat));
    let run = peer::run_program_on(&machine, &[("fsbench".to_string(), bytes)], &command)?;
    Ok(LinuxRun {
        report: parse(&run.serial),
        kernel_version: run.kernel_version,
        machine: run.machine,
        boot_to_init_ms: run.boot_to_init.map(|after| (after.as_secs_f64() * 1e4).round() / 10.0),
    })
}

// ---------------------------------------------------------------------------------------------
// Summing up

/// Why a side has no samples of `key` in one run.
fn why_missing(report: &Report, key: Key, timed_out: bool, shell_errors: &[String]) -> String {
    let errors: Vec<&str> =
        report.errors.iter().filter(|error| error.is_about(key)).map(|error| error.message.as_str()).collect();
    if !errors.is_empty() {
        errors.join("; ")
    } else if timed_out {
        format!("the run timed out after {} s", RUN_TIMEOUT.as_secs())
    } else if !shell_errors.is_empty() {
        shell_errors.join("; ")
    } else {
        "fsbench printed nothing for it".into()
    }
}

/// One side of one figure over every run.
#[derive(Default)]
struct Side {
    /// Per run: the samples (in the figure's unit), or why there are none.
    runs: Vec<Result<Vec<f64>, String>>,
}

impl Side {
    fn all_values(&self) -> Vec<f64> {
        self.runs.iter().filter_map(|run| run.as_ref().ok()).flatten().copied().collect()
    }

    fn summary(&self) -> Option<Summary<f64>> {
        stats::summarize(&self.all_values())
    }

    fn run_median(&self, run: usize) -> Option<f64> {
        stats::summarize(self.runs.get(run)?.as_ref().ok()?).map(|summary| summary.median)
    }

    /// The distinct reasons runs gave no samples.
    fn reasons(&self) -> Vec<String> {
        let mut reasons: Vec<String> = Vec::new();
        for reason in self.runs.iter().filter_map(|run| run.as_ref().err()) {
            if !reasons.contains(reason) {
                reasons.push(reason.clone());
            }
        }
        reasons
    }

    fn json(&self) -> Value {
        json!({
            "summary": self.summary().as_ref().map(stats::to_json),
            "runs": self.runs.iter().map(|run| match run {
                Ok(values) => json!({ "values": values }),
                Err(why) => json!({ "not_measured": why }),
            }).collect::<Vec<_>>(),
        })
    }
}

/// Samples of `key` in `report` in the figure's unit, or why there are none.
fn side_of(report: &Report, figure: &Figure, timed_out: bool, shell_errors: &[String]) -> Result<Vec<f64>, String> {
    match report.samples.get(&figure.key) {
        Some(samples) if !samples.is_empty() => Ok(samples.iter().map(|&ns| figure.measure.value(ns)).collect()),
        _ => Err(why_missing(report, figure.key, timed_out, shell_errors)),
    }
}

/// One figure over every run: each side's samples, the ratio Reef / Linux inside each run
/// (of the runs' medians: time, or throughput), their median, whether it meets the goal, and
/// why a side has no samples in some run.
struct Row {
    reef: Side,
    linux: Side,
    per_run: Vec<Option<f64>>,
    ratio: Option<f64>,
    met: Option<bool>,
    missing: Vec<String>,
}

/// Reef run `i` is compared with Linux run `i`, booted right after it.
fn row(figure: &Figure, reef_runs: &[ReefRun], linux_runs: &[Result<LinuxRun, String>], vs_linux: bool) -> Row {
    let mut reef = Side::default();
    for run in reef_runs {
        reef.runs.push(side_of(&run.report, figure, run.timed_out, &run.shell_errors));
    }
    let mut linux = Side::default();
    for run in linux_runs {
        linux.runs.push(match run {
            Ok(run) => side_of(&run.report, figure, false, &[]),
            Err(error) => Err(format!("the Linux guest did not run: {error}")),
        });
    }
    let per_run: Vec<Option<f64>> = (0..reef_runs.len())
        .map(|run| match (reef.run_median(run), linux.run_median(run)) {
            (Some(r), Some(l)) if l > 0.0 => Some(r / l),
            _ => None,
        })
        .collect();
    let ratio = median_of(&per_run.iter().flatten().copied().collect::<Vec<_>>());
    let met = ratio.map(|ratio| figure.measure.met(ratio, figure.goal));
    let mut missing = Vec::new();
    if !reef.reasons().is_empty() {
        missing.push(format!("Reef: {}", reef.reasons().join("; ")));
    }
    if !vs_linux {
        missing.push("Linux: not run (add --vs-linux)".into());
    } else if !linux.reasons().is_empty() {
        missing.push(format!("Linux: {}", linux.reasons().join("; ")));
    }
    Row { reef, linux, per_run, ratio, met, missing }
}

fn median_of(values: &[f64]) -> Option<f64> {
    stats::summarize(values).map(|summary| summary.median)
}

fn text(summary: Option<Summary<f64>>, unit: &str) -> String {
    let number = |value: f64| if value >= 100.0 { format!("{value:.0}") } else { format!("{value:.2}") };
    summary.map_or("-".into(), |s| format!("{} {unit} ({}-{})", number(s.median), number(s.p5), number(s.p95)))
}

/// `cargo xtask bench fs`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments)?;
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let initrd = tools::build_initramfs()?;
    let figures = figures();
    let mut reef_runs = Vec::new();
    let mut linux_runs: Vec<Result<LinuxRun, String>> = Vec::new();
    let mut reef_boots: Vec<Result<f64, String>> = Vec::new();
    for run in 1..=options.runs {
        eprintln!(
            "xtask: run {run}/{}: fsbench on Reef cores {SERVICE_CORE} and {OTHER_CORE} ({CORES} cores, {MEMORY_MIB} MiB, {})",
            options.runs,
            options.accel.name()
        );
        reef_runs.push(reef_run(&options, &kernel, &initrd)?);
        eprintln!("xtask: run {run}/{}: Reef boot to the shell banner", options.runs);
        reef_boots.push(reef_boot(&options, &kernel, &initrd));
        if options.vs_linux {
            eprintln!(
                "xtask: run {run}/{}: fsbench in the Linux guest ({CORES} cores, {MEMORY_MIB} MiB)",
                options.runs
            );
            let linux = linux_run(&options);
            if let Err(error) = &linux {
                eprintln!("xtask: the Linux guest gave no figures: {error}");
            }
            linux_runs.push(linux);
        }
    }

    println!(
        "figure                 Reef median (p5-p95)            Linux median (p5-p95)           ratio  goal    \
         ({}, ratio Reef/Linux inside each run, median over {} runs of {} samples)",
        options.accel.name(),
        options.runs,
        options.repeat
    );
    let mut rows = Vec::new();
    let mut ratio_bars = Vec::new();
    let (mut groups, mut reef_values, mut linux_values) = (Vec::new(), Vec::new(), Vec::new());
    for figure in &figures {
        let Row { reef, linux, per_run, ratio, met, missing } = row(figure, &reef_runs, &linux_runs, options.vs_linux);
        let ratios: Vec<f64> = per_run.iter().flatten().copied().collect();
        let unit = figure.measure.unit();
        println!(
            "{:<22} {:<31} {:<31} {:>5}  {:<7} {}",
            figure.label,
            text(reef.summary(), unit),
            text(linux.summary(), unit),
            ratio.map_or("-".into(), |r| format!("{r:.2}")),
            figure.measure.goal_text(figure.goal),
            match met {
                Some(true) => "met",
                Some(false) => "not met",
                None => "not measured",
            }
        );
        match (ratio, missing.is_empty()) {
            (None, _) => println!("    not measured: {}", missing.join(" | ")),
            (Some(_), false) => println!("    missing from some runs: {}", missing.join(" | ")),
            (Some(_), true) => {}
        }
        let reef_counts: Vec<Option<OpCounts>> =
            reef_runs.iter().map(|run| run.report.counts.get(&figure.key).copied()).collect();
        if let Some(counts) = OpCounts::sum(reef_counts.iter().flatten()) {
            println!("    Reef {}", counts.text(figure.operation));
        }
        if let Some(ratio) = ratio {
            let whisker = stats::summarize(&ratios).filter(|s| s.count > 1).map(|s| (s.min, s.max));
            ratio_bars.push((figure.label.clone(), ratio, whisker));
        }
        if figure.measure == Measure::Time && (reef.summary().is_some() || linux.summary().is_some()) {
            groups.push(figure.label.clone());
            reef_values.push(reef.summary().map_or(0.0, |s| s.median));
            linux_values.push(linux.summary().map_or(0.0, |s| s.median));
        }
        rows.push(json!({
            "figure": figure.label,
            "what": figure.what,
            "unit": unit,
            "goal": { "ratio": figure.goal, "reef_over_linux": if figure.measure == Measure::Time { "at most" } else { "at least" } },
            "reef": reef.json(),
            "reef_counts": op_counts::json(figure.operation, &reef_counts),
            "linux": linux.json(),
            "ratio_per_run": per_run,
            "ratio": ratio,
            "met": met,
            "not_measured": missing,
        }));
    }

    // Boot to the shell: Reef's own boots, and the Linux guest's boot to its /init.
    let reef_boot_ms: Vec<f64> = reef_boots.iter().filter_map(|boot| boot.as_ref().ok().copied()).collect();
    let boot_errors: Vec<String> = reef_boots.iter().filter_map(|boot| boot.as_ref().err().cloned()).collect();
    let linux_boot_ms: Vec<f64> =
        linux_runs.iter().filter_map(|run| run.as_ref().ok().and_then(|run| run.boot_to_init_ms)).collect();
    let reef_boot = stats::summarize(&reef_boot_ms);
    let linux_boot = stats::summarize(&linux_boot_ms);
    let boot_met = reef_boot.map(|s| s.median < BOOT_GOAL_MS);
    println!(
        "{:<22} {:<31} {:<31} {:>5}  {:<7} {}",
        "boot to sh, 4 cores",
        text(reef_boot, "ms"),
        text(linux_boot, "ms"),
        "",
        format!("< {BOOT_GOAL_MS:.0} ms"),
        match boot_met {
            Some(true) => "met",
            Some(false) => "not met",
            None => "not measured",
        }
    );
    if reef_boot.is_some() {
        println!("    Reef: timed to the {BOOT_MARK}; Linux: to its /init's first line");
    }
    if reef_boot.is_none() {
        println!("    not measured: Reef: {}", boot_errors.join("; "));
    }
    let mut notes: Vec<String> = Vec::new();
    for note in reef_runs.iter().flat_map(|run| run.report.notes.iter()) {
        if !notes.contains(note) {
            notes.push(note.clone());
        }
    }
    for note in &notes {
        println!("note from fsbench on Reef: {note}");
    }

    let first_linux = linux_runs.iter().find_map(|run| run.as_ref().ok());
    let results = json!({
        "benchmark": "fs",
        "what": "busybox dd (bs=512) and ls -l in /tmp and pipe throughput (user/fsbench), on Reef's \
                 core 0 (the file service's) and core 1 (every call forwarded to core 0), against the \
                 Linux guest booted after each Reef run in the same QEMU setup (Memsc section 5.3); and \
                 boot to the shell",
        "accelerator": options.accel.name(),
        "runs": options.runs,
        "samples_per_run": options.repeat,
        "clock": "CLOCK_MONOTONIC in the guest, fork to reap (dd, ls) or first write to the reader reaped (pipe)",
        "reef": {
            "cores": CORES,
            "memory_mib": MEMORY_MIB,
            "service_core": SERVICE_CORE,
            "other_core": OTHER_CORE,
            "command_line": reef_shell_line(&invocations(options.repeat)),
            "tsc_hz": reef_runs.iter().find_map(|run| run.report.tsc_hz),
            "kernel_tsc_hz": reef_runs.iter().find_map(|run| run.kernel_tsc_hz),
            "timed_out_runs": reef_runs.iter().filter(|run| run.timed_out).count(),
            "shell_errors": reef_runs.iter().map(|run| run.shell_errors.clone()).collect::<Vec<_>>(),
            "notes": notes,
        },
        "linux": if options.vs_linux { json!({
            "cores": CORES,
            "memory_mib": MEMORY_MIB,
            "command_line": linux_shell_line(&invocations(options.repeat)),
            "kernel_arguments_added": LINUX_KERNEL_ARGUMENTS,
            "kernel_version": first_linux.map(|run| run.kernel_version.clone()),
            "machine": first_linux.map(|run| run.machine.clone()),
            "tsc_hz": first_linux.and_then(|run| run.report.tsc_hz),
            "failed_runs": linux_runs.iter().filter_map(|run| run.as_ref().err().cloned()).collect::<Vec<_>>(),
        }) } else { Value::Null },
        "figures": rows,
        "boot_to_shell": {
            "goal_ms_below": BOOT_GOAL_MS,
            "reef_ms": { "summary": reef_boot.as_ref().map(stats::to_json), "runs": reef_boot_ms },
            "reef_measured_to": BOOT_MARK,
            "reef_not_measured": boot_errors,
            "linux_to_init_first_line_ms": { "summary": linux_boot.as_ref().map(stats::to_json), "runs": linux_boot_ms },
            "met": boot_met,
        },
    });
    let directory = tools::root().join("results");
    std::fs::create_dir_all(&directory).map_err(|e| e.to_string())?;
    let path = directory.join("fs-bench.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    let ratios_png = directory.join("fs-bench-ratios.png");
    match plot::bar_chart(
        &ratios_png,
        &format!("Reef / Linux guest, median of per-run ratios ({}): time, pipes throughput", options.accel.name()),
        "ratio",
        &ratio_bars,
        false,
    ) {
        Ok(()) => println!("wrote {}", ratios_png.display()),
        Err(error) => println!("no ratio chart: {error}"),
    }
    let times_png = directory.join("fs-bench.png");
    // A side with no figure at all is left out of the legend rather than drawn as nothing.
    let (names, rows): (Vec<String>, Vec<Vec<f64>>) = [("Reef", reef_values), ("Linux", linux_values)]
        .into_iter()
        .filter(|(_, values)| values.iter().any(|&value| value > 0.0))
        .map(|(name, values)| (name.to_string(), values))
        .unzip();
    let drawn = if groups.is_empty() {
        Err("no figure measured".to_string())
    } else {
        plot::grouped_bar_chart(
            &times_png,
            &format!("dd and ls -l, median ({}): {}", options.accel.name(), names.join(" and ")),
            "ms",
            &groups,
            &names,
            &rows,
            true,
        )
    };
    match drawn {
        Ok(()) => println!("wrote {}", times_png.display()),
        Err(error) => println!("no time chart: {error}"),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERIAL: &str = "\
[c0 INFO ] TSC 2445 MHz, LAPIC timer 1000 MHz, 1000 MiB usable
FSBENCH-CONFIG dd os=reef core=0 instances=4 clock=monotonic tsc_hz=2445000000
FSBENCH dd mib=1 core=0 ns=1000000
FSBENCH dd mib=1 core=0 ns=3000000
FSBENCH-SUMMARY dd mib=1 core=0 n=2 median_ns=2000000 p5_ns=1000000 p95_ns=3000000 min_ns=1 max_ns=2
FSBENCH-ERROR dd mib=4 core=0: creating /tmp/fsbench.dd: Read-only file system (os error 30)
[c1 WARN ] noise FSBENCH ls files=100 core=1 ns=250
FSBENCH pipe mib=64 cross=1 core=0 reader_core=1 ns=500000000 mb_per_s=134.2
FSBENCH-ERROR pipe mib=64 cross=0 core=0 reader_core=0: pipe2: Function not implemented (os error 38)
FSBENCH-ERROR ls: pinning to CPU 1: Invalid argument
FSBENCH-NOTE dd: asked for core 1, running on core 0
FSBENCH dd mib=16 core=0 ns=notanumber
FSBENCH cp mib=1 core=0 ns=5
FSBENCH dd mib=16 ns=5
FSBENCH-COUNTS dd mib=1 core=0 n=2 ops=4096 lines=0 wakeups=0 lines_per_op=0.0000 wakeups_per_op=0.0000 reading_lines=0 reading_wakeups=0
[c0 INFO ] FSBENCH-COUNTS ls files=100 core=1 n=2 ops=200 lines=2382 wakeups=553 lines_per_op=11.9100 wakeups_per_op=2.7650 reading_lines=54 reading_wakeups=10
FSBENCH-COUNTS ls files=100 core=1 n=1 ops=100 lines=1000 wakeups=47 lines_per_op=10.0000 wakeups_per_op=0.4700 reading_lines=54 reading_wakeups=10
FSBENCH-COUNTS pipe mib=64 cross=1 core=0 reader_core=1 n=1 ops=1024 lines=1403000 wakeups=6184 lines_per_op=1370.1172 wakeups_per_op=6.0391 reading_lines=0 reading_wakeups=0
FSBENCH-COUNTS dd mib=4 core=0 n=2 ops=16384 lines=12
";

    #[test]
    fn fsbench_lines_are_parsed() {
        let report = parse(SERIAL);
        assert_eq!(report.tsc_hz, Some(2_445_000_000.0));
        assert_eq!(report.samples[&Key::Dd { mib: 1, core: 0 }], [1e6, 3e6], "samples in order, no summary line");
        assert_eq!(report.samples[&Key::Ls { files: 100, core: 1 }], [250.0], "noise before FSBENCH is skipped");
        assert_eq!(report.samples[&Key::Pipe { mib: 64, cross: true }], [5e8]);
        assert_eq!(report.samples.len(), 3, "lines without a number, a known benchmark or a core are left out");
        assert_eq!(
            report.counts[&Key::Dd { mib: 1, core: 0 }],
            OpCounts { samples: 2, ops: 4096, lines: 0, wakeups: 0 }
        );
        assert_eq!(
            report.counts[&Key::Ls { files: 100, core: 1 }],
            OpCounts { samples: 3, ops: 300, lines: 3382, wakeups: 600 },
            "two lines of one figure are added, noise before FSBENCH skipped"
        );
        assert_eq!(report.counts[&Key::Pipe { mib: 64, cross: true }].lines_per_op(), Some(1403000.0 / 1024.0));
        assert_eq!(report.counts.len(), 3, "a counts line without wakeups= is left out");
        assert_eq!(report.notes, ["dd: asked for core 1, running on core 0"]);
        assert_eq!(report.errors.len(), 3);
        assert_eq!(report.errors[0].message, "creating /tmp/fsbench.dd: Read-only file system (os error 30)");
        assert!(report.errors[0].is_about(Key::Dd { mib: 4, core: 0 }));
        assert!(!report.errors[0].is_about(Key::Dd { mib: 4, core: 1 }));
        assert!(!report.errors[0].is_about(Key::Dd { mib: 1, core: 0 }));
        assert!(report.errors[1].is_about(Key::Pipe { mib: 64, cross: false }));
        assert!(!report.errors[1].is_about(Key::Pipe { mib: 64, cross: true }));
        // A line naming no size is about every size of its benchmark.
        assert_eq!(report.errors[2].kind, "ls");
        assert!(report.errors[2].is_about(Key::Ls { files: 10_000, core: 1 }));
        assert!(!report.errors[2].is_about(Key::Dd { mib: 1, core: 1 }));
    }

    #[test]
    fn a_missing_figure_says_why() {
        let report = parse(SERIAL);
        let figure = |key| figures().into_iter().find(|f| f.key == key).unwrap();
        let dd4 = figure(Key::Dd { mib: 4, core: 0 });
        assert_eq!(
            side_of(&report, &dd4, false, &[]).unwrap_err(),
            "creating /tmp/fsbench.dd: Read-only file system (os error 30)"
        );
        let dd64 = figure(Key::Dd { mib: 64, core: 1 });
        assert!(side_of(&report, &dd64, true, &[]).unwrap_err().contains("timed out"));
        let refused = ["error: /bin/fsbench on core 1: no such file".to_string()];
        assert_eq!(side_of(&report, &dd64, false, &refused).unwrap_err(), refused[0]);
        assert_eq!(side_of(&report, &dd64, false, &[]).unwrap_err(), "fsbench printed nothing for it");
        assert_eq!(side_of(&report, &figure(Key::Dd { mib: 1, core: 0 }), false, &[]).unwrap(), [1.0, 3.0], "ms");
        let pipe = figure(Key::Pipe { mib: 64, cross: true });
        let mb_per_s = side_of(&report, &pipe, false, &[]).unwrap()[0];
        assert!((mb_per_s - 134.2).abs() < 0.1, "{mb_per_s}");
        assert!(pipe.measure.met(1.2, 1.0) && !pipe.measure.met(0.9, 1.0), "throughput: at least");
        assert!(dd4.measure.met(0.9, 1.0) && !dd4.measure.met(1.1, 1.0), "time: at most");
    }

    fn reef_run(serial: &str) -> ReefRun {
        ReefRun { report: parse(serial), timed_out: false, shell_errors: Vec::new(), kernel_tsc_hz: None }
    }

    fn linux_run(serial: &str) -> Result<LinuxRun, String> {
        Ok(LinuxRun {
            report: parse(serial),
            kernel_version: "6.1".into(),
            machine: "microvm".into(),
            boot_to_init_ms: None,
        })
    }

    #[test]
    fn ratios_are_taken_inside_each_run() {
        let figure = |key| figures().into_iter().find(|f| f.key == key).unwrap();
        let dd = figure(Key::Dd { mib: 1, core: 1 });
        let reef = [
            reef_run("FSBENCH dd mib=1 core=1 ns=3000000\nFSBENCH dd mib=1 core=1 ns=4000000\n"),
            reef_run("FSBENCH dd mib=1 core=1 ns=1000000\n"),
            reef_run("FSBENCH-ERROR dd mib=1 core=1: no /tmp\n"),
        ];
        let linux = [
            linux_run("FSBENCH dd mib=1 core=1 ns=2000000\n"),
            linux_run("FSBENCH dd mib=1 core=1 ns=1000000\n"),
            Err("QEMU did not start".to_string()),
        ];
        let row = row(&dd, &reef, &linux, true);
        // Run 1: 3.5 ms / 2 ms; run 2: 1 ms / 1 ms; run 3 has neither side.
        assert_eq!(row.per_run, [Some(1.75), Some(1.0), None]);
        assert_eq!(row.ratio, Some(1.375));
        assert_eq!(row.met, Some(true), "core 1: at most 1.5");
        assert_eq!(row.reef.summary().unwrap().median, 3.0, "ms, over every run's samples");
        assert_eq!(row.missing, ["Reef: no /tmp", "Linux: the Linux guest did not run: QEMU did not start"]);

        // Throughput: a Reef transfer half as long is twice the MB/s, a ratio of 2.
        let pipe = figure(Key::Pipe { mib: 64, cross: false });
        let reef = [reef_run("FSBENCH pipe mib=64 cross=0 core=0 reader_core=0 ns=500000000\n")];
        let linux = [linux_run("FSBENCH pipe mib=64 cross=0 core=0 reader_core=0 ns=1000000000\n")];
        let row = super::row(&pipe, &reef, &linux, true);
        assert_eq!((row.ratio, row.met), (Some(2.0), Some(true)));
        assert!(row.missing.is_empty());
        let alone = super::row(&pipe, &reef, &[], false);
        assert_eq!((alone.ratio, alone.met), (None, None));
        assert_eq!(alone.missing, ["Linux: not run (add --vs-linux)"]);
    }

    #[test]
    fn every_figure_of_the_issue_is_run() {
        let runs = invocations(5);
        let figures = figures();
        assert_eq!(figures.len(), 2 * 4 + 2 * 3 + 2);
        assert!(figures.iter().filter(|f| matches!(f.key, Key::Dd { core: 1, .. })).all(|f| f.goal == 1.5));
        let reef = reef_shell_line(&runs);
        assert!(reef.starts_with("on 0 /bin/fsbench --pin 0 --repeat 5 dd 1 4 16 64; on 0 "), "{reef}");
        assert!(reef.contains("; on 0 /bin/fsbench --pin 0 --repeat 5 pipe 64 --cross 1; "), "{reef}");
        assert!(reef.ends_with("; on 1 /bin/fsbench --pin 1 --repeat 5 ls 100 1000 10000"), "{reef}");
        // The kernel keeps `exec=` values of up to 1024 bytes (`platform::cmdline::MAX_VALUE`).
        assert!(qemu::exec_argument(&reef).unwrap().len() < 1024, "fits the kernel's exec=");
        let linux = linux_shell_line(&runs);
        assert_eq!(linux.matches("/bin/fsbench --pin ").count(), runs.len());
    }

    #[test]
    fn the_shell_banners() {
        let log = "[c0 INFO ] 4 kernel instances up of 4 cores (80 ms since boot)\n";
        assert!(!shell_banner(&format!("{log}reef:/tmp# ")), "a log line is no banner");
        assert!(!shell_banner(&format!("{log}Reef: 4 kernel instances up\n$ ")), "no prompt yet");
        assert!(shell_banner(&format!("{log}Reef: 4 kernel instances up\nreef:/tmp# ")));
        assert!(!shell_banner("Reef: a multikernel OS.\nreef:/tmp# "), "the motd is no banner");
    }

    #[test]
    fn options() {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let options =
            parse_options(&strings(&["--runs", "2", "--repeat", "7", "--accel", "tcg", "--vs-linux"])).unwrap();
        assert_eq!((options.runs, options.repeat, options.accel, options.vs_linux), (2, 7, Accel::Tcg, true));
        assert!(parse_options(&strings(&["--runs", "0"])).is_err());
        assert!(parse_options(&strings(&["--repeat"])).is_err());
        assert!(parse_options(&strings(&["--what"])).unwrap_err().contains("--what"));
    }
}
