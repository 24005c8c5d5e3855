//! `cargo xtask bench host-files`: Debian's programs and files on the host share (virtio-9p),
//! started, read and walked on Reef and in the Linux guest (issue 29).
//!
//! Every figure is a program timed from `fork` to the reap by `fsbench run` (user/fsbench):
//! Debian's python3, bash and ls under `chroot /debian`, busybox `dd` of a 64 MiB file of the
//! share on the file service's core and on another core, busybox `find` and `ls -lR` of the
//! whole tree. The Linux guest boots right after each Reef run with the same QEMU flags, the
//! same `-fsdev` share and the same binaries, and mounts the share with 9P over virtio.

use crate::bench::common::{self, LINUX_KERNEL_ARGUMENTS};
use crate::bench::op_counts::{self, OpCounts};
use crate::bench::peer;
use crate::bench::plot;
use crate::bench::stats::{self, Summary};
use crate::linux_guest;
use crate::qemu::{self, Accel, Machine, Share};
use crate::tools;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Both guests: two cores (the file service's and one whose calls are forwarded to it: all
/// the figures need, and on a 2-CPU host no vCPU waits for another), and memory to spare.
const CORES: usize = 2;
const MEMORY_MIB: usize = 1024;
/// The core of the file service (it owns the virtio device), and the other one.
const SERVICE_CORE: usize = 0;
const OTHER_CORE: usize = 1;
/// Where both guests see the tree.
const MOUNT_POINT: &str = "/debian";
/// The file `dd` reads, inside the tree, and its size.
const BIG_FILE: &str = "srv/reef-bench/big64";
const BIG_FILE_BYTES: u64 = 64 << 20;
/// How long one guest may run.
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
/// The busybox both sides run (Debian's static one: Reef's initramfs and the Linux guest's
/// hold the same file).
const BUSYBOX: &str = "/bin/busybox";

#[derive(Debug)]
struct Options {
    runs: usize,
    /// Warm samples of each program in each run (`fsbench --repeat`), after the cold one.
    repeat: usize,
    accel: Accel,
    linux: bool,
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options { runs: 3, repeat: 5, accel: Accel::detect(), linux: true };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        let mut number = |range| common::number_option(word, words.next(), range);
        match word.as_str() {
            "--runs" => options.runs = number(1..=20)?,
            "--repeat" => options.repeat = number(1..=100)?,
            "--accel" => options.accel = Accel::parse(words.next().ok_or("--accel takes kvm or tcg")?)?,
            "--no-linux" => options.linux = false,
            other => {
                return Err(format!(
                    "unknown option `{other}`: bench host-files [--runs N] [--repeat K] [--accel kvm|tcg] [--no-linux]"
                ))
            }
        }
    }
    Ok(options)
}

// ---------------------------------------------------------------------------------------------
// What runs

/// What the goal is about for a program.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Goal {
    /// Start to exit: cold at most 1.2 times Linux's, warm at most 1.0.
    Start,
    /// Warm at most `ratio` times Linux's.
    Warm(f64),
}

/// One program timed by `fsbench run`: its name in fsbench's lines, the core, the command.
#[derive(Clone, Debug, PartialEq)]
struct Program {
    name: &'static str,
    core: usize,
    command: String,
    /// For the table and the JSON.
    what: &'static str,
    goal: Goal,
}

/// Every program of one boot, in the order run: the first program's cold sample is the first
/// thing after boot to read Debian's loader and libc, so later programs' cold samples find
/// those already read (on Reef in the file service's caches, on Linux in nothing: 9P files
/// are not cached by default).
fn programs() -> Vec<Program> {
    let chroot = format!("{BUSYBOX} chroot {MOUNT_POINT}");
    let dd = format!("{BUSYBOX} dd if={MOUNT_POINT}/{BIG_FILE} of=/dev/null bs=64k");
    vec![
        Program {
            name: "python3",
            core: SERVICE_CORE,
            command: format!("{chroot} /usr/bin/python3 -c pass"),
            what: "Debian's python3 -c pass under chroot /debian",
            goal: Goal::Start,
        },
        Program {
            name: "bash",
            core: SERVICE_CORE,
            command: format!("{chroot} /bin/bash -c true"),
            what: "Debian's bash -c true under chroot /debian",
            goal: Goal::Start,
        },
        Program {
            name: "ls-l",
            core: SERVICE_CORE,
            command: format!("{chroot} /bin/ls -l /usr/bin"),
            what: "Debian's ls -l /usr/bin under chroot /debian, stdout to /dev/null",
            goal: Goal::Start,
        },
        Program {
            name: "dd-core0",
            core: SERVICE_CORE,
            command: dd.clone(),
            what: "busybox dd of the 64 MiB file, bs=64k, to /dev/null, on the file service's core",
            goal: Goal::Warm(1.0),
        },
        Program {
            name: "dd-core1",
            core: OTHER_CORE,
            command: dd,
            what: "busybox dd of the 64 MiB file, bs=64k, to /dev/null, on core 1 (Reef: forwarded to core 0)",
            goal: Goal::Warm(1.5),
        },
        Program {
            name: "find",
            core: SERVICE_CORE,
            command: format!("{BUSYBOX} find {MOUNT_POINT} -type f"),
            what: "busybox find /debian -type f, stdout to /dev/null",
            goal: Goal::Warm(1.0),
        },
        Program {
            name: "ls-lR",
            core: SERVICE_CORE,
            command: format!("{BUSYBOX} ls -lR {MOUNT_POINT}"),
            what: "busybox ls -lR /debian, stdout to /dev/null",
            goal: Goal::Warm(1.0),
        },
    ]
}

/// fsbench's arguments for `program` (after `--pin`).
fn fsbench_arguments(program: &Program, repeat: usize) -> String {
    format!("--repeat {repeat} run {} -- {}", program.name, program.command)
}

/// The Reef command line: each program through `on <core>`, one after the other (the user
/// shell's `;`).
fn reef_shell_line(repeat: usize) -> String {
    let commands: Vec<String> = programs()
        .iter()
        .map(|p| format!("on {core} /bin/fsbench --pin {core} {}", fsbench_arguments(p, repeat), core = p.core))
        .collect();
    commands.join("; ")
}

/// The Linux guest's `/init` command: load the 9P modules in order, mount the share, then
/// fsbench pinned as on Reef. A failed mount is said (`PEER mount failed`) and skips the rest.
fn linux_shell_line(modules: &[String], repeat: usize) -> String {
    let mut lines = linux_guest::load_modules(modules);
    lines.push(format!("mkdir -p {MOUNT_POINT}"));
    let fsbench: Vec<String> =
        programs().iter().map(|p| format!("/bin/fsbench --pin {} {}", p.core, fsbench_arguments(p, repeat))).collect();
    lines.push(format!(
        "if {}; then {}; else echo 'PEER mount failed'; fi",
        linux_guest::mount_share(0, MOUNT_POINT),
        fsbench.join("; ")
    ));
    lines.join("\n")
}

// ---------------------------------------------------------------------------------------------
// What fsbench printed

/// Everything fsbench printed in one guest boot.
#[derive(Debug, Default, PartialEq)]
struct Report {
    /// Per program name, its samples in ns by sample number (0 the cold one).
    samples: BTreeMap<String, BTreeMap<u64, f64>>,
    /// Per program name, why it failed.
    errors: BTreeMap<String, String>,
    /// Per program name and cold or warm samples, the message lines and wake-ups they took
    /// (Reef only).
    counts: BTreeMap<(String, Samples), OpCounts>,
    notes: Vec<String>,
    /// The TSC rate of the first `FSBENCH-CONFIG` line.
    tsc_hz: Option<f64>,
}

impl Report {
    fn cold(&self, name: &str) -> Option<f64> {
        self.samples.get(name)?.get(&0).copied()
    }

    fn warm(&self, name: &str) -> Vec<f64> {
        self.samples.get(name).map(|s| s.range(1..).map(|(_, &ns)| ns).collect()).unwrap_or_default()
    }
}

/// The `key=value` words of `text`.
fn fields(text: &str) -> BTreeMap<&str, &str> {
    text.split_whitespace().filter_map(|word| word.split_once('=')).collect()
}

/// Parses fsbench's `run` lines out of a serial log (text before `FSBENCH` on a line is
/// skipped; summaries are not read: they are made here over every run).
fn parse(serial: &str) -> Report {
    let mut report = Report::default();
    for line in serial.lines() {
        let Some(position) = line.find("FSBENCH") else { continue };
        let line = line[position..].trim_end();
        if let Some(rest) = line.strip_prefix("FSBENCH run ") {
            let fields = fields(rest);
            let sample = fields.get("sample").and_then(|s| s.parse::<u64>().ok());
            let ns = fields.get("ns").and_then(|ns| ns.parse::<f64>().ok());
            if let (Some(name), Some(sample), Some(ns)) = (fields.get("name"), sample, ns) {
                report.samples.entry(name.to_string()).or_default().insert(sample, ns);
            }
        } else if let Some(rest) = line.strip_prefix("FSBENCH-COUNTS run ") {
            let fields = fields(rest);
            let samples = match fields.get("samples") {
                Some(&"cold") => Some(Samples::Cold),
                Some(&"warm") => Some(Samples::Warm),
                _ => None,
            };
            if let (Some(name), Some(samples), Some(counts)) = (fields.get("name"), samples, OpCounts::from_words(rest))
            {
                report.counts.insert((name.to_string(), samples), counts);
            }
        } else if let Some(rest) = line.strip_prefix("FSBENCH-ERROR run ") {
            let (head, message) = rest.split_once(": ").unwrap_or((rest, ""));
            if let Some(name) = fields(head).get("name") {
                report.errors.insert(name.to_string(), message.trim().to_string());
            }
        } else if let Some(rest) = line.strip_prefix("FSBENCH-NOTE ") {
            report.notes.push(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("FSBENCH-CONFIG ") {
            if report.tsc_hz.is_none() {
                report.tsc_hz = fields(rest).get("tsc_hz").and_then(|hz| hz.parse().ok());
            }
        }
    }
    report
}

// ---------------------------------------------------------------------------------------------
// Running

/// One guest boot: what fsbench printed, or why nothing was.
struct Run {
    report: Report,
    /// Why a program printed nothing when fsbench did not say (a timeout, a failed mount).
    failure: Option<String>,
    /// The TSC rate the guest's kernel reported (Reef's boot line), in Hz.
    kernel_tsc_hz: Option<u64>,
    kernel_version: Option<String>,
    machine: Option<String>,
}

impl Run {
    fn failed(why: String) -> Self {
        Run { report: Report::default(), failure: Some(why), kernel_tsc_hz: None, kernel_version: None, machine: None }
    }

    /// Why `name` has no samples in this run.
    fn why_missing(&self, name: &str) -> String {
        match (self.report.errors.get(name), &self.failure) {
            (Some(error), _) => error.clone(),
            (None, Some(failure)) => failure.clone(),
            (None, None) => "fsbench printed nothing for it".into(),
        }
    }
}

/// The machine both sides boot: the cores, the memory, the accelerator and the tree shared
/// at [`MOUNT_POINT`].
fn machine(options: &Options, tree: &Path) -> Machine {
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.memory_mib = MEMORY_MIB;
    machine.timeout = RUN_TIMEOUT;
    machine.shares = vec![Share { directory: tree.to_path_buf(), mount_point: MOUNT_POINT.into() }];
    machine
}

fn reef_run(options: &Options, tree: &Path, kernel: &Path, initrd: &Path) -> Result<Run, String> {
    let mut machine = machine(options, tree);
    machine.initrd = Some(initrd.to_path_buf());
    machine.kernel_args = qemu::exec_argument(&reef_shell_line(options.repeat))?;
    let (outcome, _) = qemu::boot(&machine, kernel, None)?;
    let shell_errors: Vec<&str> =
        outcome.serial.lines().filter(|line| line.starts_with("sh: ") || line.starts_with("on: ")).collect();
    let failure = if outcome.timed_out {
        Some(format!("the run timed out after {} s", RUN_TIMEOUT.as_secs()))
    } else if !shell_errors.is_empty() {
        Some(shell_errors.join("; "))
    } else {
        None
    };
    Ok(Run {
        report: parse(&outcome.serial),
        failure,
        kernel_tsc_hz: common::guest_tsc_hz(&outcome.serial),
        kernel_version: None,
        machine: None,
    })
}

fn linux_run(options: &Options, tree: &Path) -> Result<Run, String> {
    let fsbench = tools::user_program_bytes("fsbench")?;
    let (modules, names) = linux_guest::nine_p_modules()?;
    let mut machine = machine(options, tree);
    machine.kernel_args = LINUX_KERNEL_ARGUMENTS.into();
    let command = linux_shell_line(&names, options.repeat);
    let run = peer::run_program_with(&machine, &[("fsbench".to_string(), fsbench)], &modules, &command)?;
    let failure = run
        .serial
        .contains("PEER mount failed")
        .then(|| format!("mounting the share failed: {}", peer_lines_about_9p(&run.serial)));
    Ok(Run {
        report: parse(&run.serial),
        failure,
        kernel_tsc_hz: None,
        kernel_version: Some(run.kernel_version),
        machine: Some(run.machine),
    })
}

/// The guest's lines about 9P, virtio or insmod (what a failed mount printed), joined.
fn peer_lines_about_9p(serial: &str) -> String {
    let lines: Vec<&str> = serial
        .lines()
        .filter(|line| ["9p", "virtio", "insmod", "mount"].iter().any(|word| line.contains(word)))
        .take(8)
        .collect();
    if lines.is_empty() {
        "the guest said nothing more".into()
    } else {
        lines.join(" | ")
    }
}

/// Makes [`BIG_FILE`] in the tree unless a file of its size is there (kept between runs; the
/// tree is remade only when its packages change). Its bytes are a fixed pseudo-random
/// sequence, so nothing on the way can treat it as zeros or holes.
fn ensure_big_file(tree: &Path) -> Result<PathBuf, String> {
    let path = tree.join(BIG_FILE);
    if std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == BIG_FILE_BYTES) {
        return Ok(path);
    }
    eprintln!("xtask: writing {} ({} MiB)", path.display(), BIG_FILE_BYTES >> 20);
    let parent = path.parent().expect("a file in a directory");
    std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut bytes = Vec::with_capacity(BIG_FILE_BYTES as usize);
    while (bytes.len() as u64) < BIG_FILE_BYTES {
        // xorshift64: cheap, and no two 4 KiB pages alike.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    std::fs::write(&path, &bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------------
// Summing up

/// Which samples a row takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Samples {
    Cold,
    Warm,
}

/// One row of the table: a program's cold or warm figure.
struct Figure {
    program: Program,
    samples: Samples,
    goal: f64,
}

impl Figure {
    fn label(&self) -> String {
        let core =
            if self.program.core == SERVICE_CORE { String::new() } else { format!(", core {}", self.program.core) };
        let samples = match self.samples {
            Samples::Cold => "cold",
            Samples::Warm => "warm",
        };
        format!("{} {samples}{core}", self.program.name)
    }

    /// This figure's samples of one run, in ms, or why there are none.
    fn values(&self, run: &Run) -> Result<Vec<f64>, String> {
        let values: Vec<f64> = match self.samples {
            Samples::Cold => run.report.cold(self.program.name).into_iter().collect(),
            Samples::Warm => run.report.warm(self.program.name),
        };
        if values.is_empty() {
            Err(run.why_missing(self.program.name))
        } else {
            Ok(values.iter().map(|ns| ns / 1e6).collect())
        }
    }
}

/// Every row: cold and warm for the start-to-exit programs, warm for the others.
fn figures() -> Vec<Figure> {
    let mut figures = Vec::new();
    for program in programs() {
        match program.goal {
            Goal::Start => {
                figures.push(Figure { program: program.clone(), samples: Samples::Cold, goal: 1.2 });
                figures.push(Figure { program, samples: Samples::Warm, goal: 1.0 });
            }
            Goal::Warm(goal) => figures.push(Figure { program, samples: Samples::Warm, goal }),
        }
    }
    figures
}

/// One figure over every run: each side's values (ms) per run, the ratio Reef / Linux of
/// the medians inside each run, the median of those ratios, and whether it meets the goal.
struct Row {
    reef: Vec<Result<Vec<f64>, String>>,
    linux: Vec<Result<Vec<f64>, String>>,
    per_run: Vec<Option<f64>>,
    ratio: Option<f64>,
    met: Option<bool>,
}

fn median(values: &[f64]) -> Option<f64> {
    stats::summarize(values).map(|summary| summary.median)
}

/// Reef run `i` is compared with Linux run `i`, booted right after it.
fn row(figure: &Figure, reef_runs: &[Run], linux_runs: &[Run]) -> Row {
    let reef: Vec<_> = reef_runs.iter().map(|run| figure.values(run)).collect();
    let linux: Vec<_> = linux_runs.iter().map(|run| figure.values(run)).collect();
    let run_median = |side: &[Result<Vec<f64>, String>], i: usize| median(side.get(i)?.as_ref().ok()?);
    let per_run: Vec<Option<f64>> = (0..reef.len())
        .map(|i| match (run_median(&reef, i), run_median(&linux, i)) {
            (Some(r), Some(l)) if l > 0.0 => Some(r / l),
            _ => None,
        })
        .collect();
    let ratio = median(&per_run.iter().flatten().copied().collect::<Vec<_>>());
    Row { reef, linux, per_run, ratio, met: ratio.map(|ratio| ratio <= figure.goal) }
}

/// Every value of a side, over every run.
fn all_values(side: &[Result<Vec<f64>, String>]) -> Vec<f64> {
    side.iter().filter_map(|run| run.as_ref().ok()).flatten().copied().collect()
}

/// The distinct reasons a side's runs gave no values.
fn reasons(side: &[Result<Vec<f64>, String>]) -> Vec<String> {
    let mut reasons: Vec<String> = Vec::new();
    for reason in side.iter().filter_map(|run| run.as_ref().err()) {
        if !reasons.contains(reason) {
            reasons.push(reason.clone());
        }
    }
    reasons
}

fn side_json(side: &[Result<Vec<f64>, String>]) -> Value {
    json!({
        "summary": stats::summarize(&all_values(side)).as_ref().map(stats::to_json),
        "runs": side.iter().map(|run| match run {
            Ok(values) => json!({ "values": values }),
            Err(why) => json!({ "not_measured": why }),
        }).collect::<Vec<_>>(),
    })
}

fn text(summary: Option<Summary<f64>>) -> String {
    let number = |value: f64| if value >= 100.0 { format!("{value:.0}") } else { format!("{value:.2}") };
    summary.map_or("-".into(), |s| format!("{} ms ({}-{})", number(s.median), number(s.p5), number(s.p95)))
}

/// `cargo xtask bench host-files`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments)?;
    tools::ensure_qemu()?;
    let tree = crate::rootfs::build()?;
    ensure_big_file(&tree)?;
    let kernel = tools::build_kernel()?;
    let initrd = tools::build_initramfs()?;
    let mut reef_runs = Vec::new();
    let mut linux_runs = Vec::new();
    for run in 1..=options.runs {
        eprintln!(
            "xtask: run {run}/{}: Reef, cores {SERVICE_CORE} and {OTHER_CORE} of {CORES}, {} shared at {MOUNT_POINT} ({})",
            options.runs,
            tree.display(),
            options.accel.name()
        );
        reef_runs.push(reef_run(&options, &tree, &kernel, &initrd)?);
        if options.linux {
            eprintln!("xtask: run {run}/{}: the Linux guest, the same share over 9P", options.runs);
            linux_runs.push(linux_run(&options, &tree).unwrap_or_else(|error| {
                eprintln!("xtask: the Linux guest gave no figures: {error}");
                Run::failed(format!("the Linux guest did not run: {error}"))
            }));
        }
    }

    let tsc_hz = reef_runs.iter().find_map(|run| run.report.tsc_hz);
    println!(
        "host-files: {}, Reef cores {SERVICE_CORE} (file service) and {OTHER_CORE} of {CORES}, TSC {}, ratio Reef/Linux \
         inside each run, median over {} runs; {} warm samples after 1 cold per run",
        options.accel.name(),
        tsc_hz.map_or("unknown".into(), |hz| format!("{:.0} MHz", hz / 1e6)),
        options.runs,
        options.repeat
    );
    println!(
        "{:<20} {:<27} {:<27} {:>5}  {:<6} result",
        "figure", "Reef median (p5-p95)", "Linux median (p5-p95)", "ratio", "goal"
    );
    let (mut rows, mut ratio_bars) = (Vec::new(), Vec::new());
    let (mut groups, mut reef_values, mut linux_values) = (Vec::new(), Vec::new(), Vec::new());
    for figure in figures() {
        let row = row(&figure, &reef_runs, &linux_runs);
        let reef_summary = stats::summarize(&all_values(&row.reef));
        let linux_summary = stats::summarize(&all_values(&row.linux));
        println!(
            "{:<20} {:<27} {:<27} {:>5}  <= {:<3} {}",
            figure.label(),
            text(reef_summary),
            text(linux_summary),
            row.ratio.map_or("-".into(), |r| format!("{r:.2}")),
            figure.goal,
            match row.met {
                Some(true) => "met",
                Some(false) => "not met",
                None => "not measured",
            }
        );
        let mut missing = Vec::new();
        if !reasons(&row.reef).is_empty() {
            missing.push(format!("Reef: {}", reasons(&row.reef).join("; ")));
        }
        if !options.linux {
            missing.push("Linux: not run (--no-linux)".to_string());
        } else if !reasons(&row.linux).is_empty() {
            missing.push(format!("Linux: {}", reasons(&row.linux).join("; ")));
        }
        if !missing.is_empty() && (row.ratio.is_some() || options.linux) {
            println!("    not measured: {}", missing.join(" | "));
        }
        let reef_counts: Vec<Option<OpCounts>> = reef_runs
            .iter()
            .map(|run| run.report.counts.get(&(figure.program.name.to_string(), figure.samples)).copied())
            .collect();
        if let Some(counts) = OpCounts::sum(reef_counts.iter().flatten()) {
            println!("    Reef {}", counts.text("run"));
        }
        if let Some(ratio) = row.ratio {
            let ratios: Vec<f64> = row.per_run.iter().flatten().copied().collect();
            let whisker = stats::summarize(&ratios).filter(|s| s.count > 1).map(|s| (s.min, s.max));
            ratio_bars.push((figure.label(), ratio, whisker));
        }
        if reef_summary.is_some() || linux_summary.is_some() {
            groups.push(figure.label());
            reef_values.push(reef_summary.map_or(0.0, |s| s.median));
            linux_values.push(linux_summary.map_or(0.0, |s| s.median));
        }
        rows.push(json!({
            "figure": figure.label(),
            "program": figure.program.name,
            "what": figure.program.what,
            "command": figure.program.command,
            "core": figure.program.core,
            "samples": match figure.samples { Samples::Cold => "cold: sample 0, the first run since boot", Samples::Warm => "warm: samples 1 to K" },
            "unit": "ms",
            "goal": { "ratio": figure.goal, "reef_over_linux": "at most" },
            "reef": side_json(&row.reef),
            "reef_counts": op_counts::json("a run of the program, fork to reap", &reef_counts),
            "linux": side_json(&row.linux),
            "ratio_per_run": row.per_run,
            "ratio": row.ratio,
            "met": row.met,
            "not_measured": missing,
        }));
    }
    let mut notes: Vec<&String> = Vec::new();
    for note in reef_runs.iter().chain(&linux_runs).flat_map(|run| run.report.notes.iter()) {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    for note in &notes {
        println!("note from fsbench: {note}");
    }

    let first_linux = linux_runs.iter().find(|run| run.kernel_version.is_some());
    let results = json!({
        "benchmark": "host-files",
        "what": "Debian's programs and files on the host share over virtio-9p (issue 29): python3, bash and \
                 ls -l /usr/bin under chroot, dd of a 64 MiB file on core 0 and core 1, find and ls -lR of the \
                 tree, each by fsbench run (fork to reap, 1 cold then K warm samples), on Reef and in the \
                 Linux guest booted after each Reef run with the same QEMU flags and share",
        "accelerator": options.accel.name(),
        "runs": options.runs,
        "warm_samples_per_run": options.repeat,
        "clock": "CLOCK_MONOTONIC in the guest, fork to reap",
        "cores": CORES,
        "core_pair": { "service_core": SERVICE_CORE, "other_core": OTHER_CORE },
        "memory_mib": MEMORY_MIB,
        "tree": tree.display().to_string(),
        "big_file": { "path": format!("{MOUNT_POINT}/{BIG_FILE}"), "bytes": BIG_FILE_BYTES },
        "reef": {
            "command_line": reef_shell_line(options.repeat),
            "tsc_hz": tsc_hz,
            "kernel_tsc_hz": reef_runs.iter().find_map(|run| run.kernel_tsc_hz),
            "failures": reef_runs.iter().filter_map(|run| run.failure.clone()).collect::<Vec<_>>(),
        },
        "linux": if options.linux { json!({
            "init_command": linux_shell_line(&["<9P modules in order>".to_string()], options.repeat),
            "mount_options": linux_guest::NINE_P_MOUNT_OPTIONS,
            "kernel_arguments_added": LINUX_KERNEL_ARGUMENTS,
            "kernel_version": first_linux.and_then(|run| run.kernel_version.clone()),
            "machine": first_linux.and_then(|run| run.machine.clone()),
            "tsc_hz": linux_runs.iter().find_map(|run| run.report.tsc_hz),
            "failures": linux_runs.iter().filter_map(|run| run.failure.clone()).collect::<Vec<_>>(),
        }) } else { Value::Null },
        "notes": notes,
        "figures": rows,
    });
    let directory = common::write_results(&results, "host-files.json")?;
    let ratios_png = directory.join("host-files-ratios.png");
    let title = format!("Reef / Linux guest, median of per-run ratios ({}), host share", options.accel.name());
    match plot::bar_chart(&ratios_png, &title, "ratio", &ratio_bars, false) {
        Ok(()) => println!("wrote {}", ratios_png.display()),
        Err(error) => println!("no ratio chart: {error}"),
    }
    let times_png = directory.join("host-files.png");
    let (names, values): (Vec<String>, Vec<Vec<f64>>) = [("Reef", reef_values), ("Linux", linux_values)]
        .into_iter()
        .filter(|(_, values)| values.iter().any(|&value| value > 0.0))
        .map(|(name, values)| (name.to_string(), values))
        .unzip();
    let drawn = if groups.is_empty() {
        Err("no figure measured".to_string())
    } else {
        let title = format!("host share, median ({}): {}", options.accel.name(), names.join(" and "));
        plot::grouped_bar_chart(&times_png, &title, "ms", &groups, &names, &values, true)
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
FSBENCH-CONFIG run os=reef core=0 instances=2 clock=monotonic tsc_hz=2445000000
FSBENCH run name=python3 sample=0 core=0 ns=90000000
FSBENCH run name=python3 sample=1 core=0 ns=30000000
[c0 INFO ] noise FSBENCH run name=python3 sample=2 core=0 ns=50000000
FSBENCH-SUMMARY run name=python3 core=0 cold_ns=90000000 warm n=2 median_ns=40000000 p5_ns=1 p95_ns=2 min_ns=1 max_ns=2
FSBENCH-ERROR run name=dd-core1 core=1: sample 0: /bin/busybox dd ended with exit status: 1
FSBENCH run name=bash sample=x core=0 ns=5
FSBENCH-NOTE run: asked for core 1, running on core 0
FSBENCH-COUNTS run name=python3 core=0 samples=cold n=1 ops=1 lines=9000 wakeups=40 lines_per_op=9000.0000 wakeups_per_op=40.0000 reading_lines=0 reading_wakeups=0
FSBENCH-COUNTS run name=python3 core=0 samples=warm n=2 ops=2 lines=8000 wakeups=30 lines_per_op=4000.0000 wakeups_per_op=15.0000 reading_lines=0 reading_wakeups=0
FSBENCH-COUNTS run name=bash core=0 samples=lukewarm n=2 ops=2 lines=8 wakeups=3
";

    fn run_of(serial: &str) -> Run {
        Run { report: parse(serial), failure: None, kernel_tsc_hz: None, kernel_version: None, machine: None }
    }

    #[test]
    fn run_lines_are_parsed() {
        let report = parse(SERIAL);
        assert_eq!(report.tsc_hz, Some(2_445_000_000.0));
        assert_eq!(report.cold("python3"), Some(9e7));
        assert_eq!(report.warm("python3"), [3e7, 5e7], "noise before FSBENCH skipped, no summary");
        assert!(!report.samples.contains_key("bash"), "a line without a number is left out");
        assert_eq!(report.errors["dd-core1"], "sample 0: /bin/busybox dd ended with exit status: 1");
        assert_eq!(report.notes, ["run: asked for core 1, running on core 0"]);
        let counts = |samples| report.counts[&("python3".to_string(), samples)];
        assert_eq!(counts(Samples::Cold), OpCounts { samples: 1, ops: 1, lines: 9000, wakeups: 40 });
        assert_eq!(counts(Samples::Warm).lines_per_op(), Some(4000.0));
        assert_eq!(report.counts.len(), 2, "neither cold nor warm: left out");
    }

    #[test]
    fn cold_and_warm_rows_and_ratios_inside_each_run() {
        let figures = figures();
        let find = |label: &str| figures.iter().find(|f| f.label() == label).unwrap();
        assert_eq!(figures.len(), 3 * 2 + 4, "cold and warm for three programs, warm for four");
        assert_eq!(find("python3 cold").goal, 1.2);
        assert_eq!(find("python3 warm").goal, 1.0);
        assert_eq!(find("dd-core1 warm, core 1").goal, 1.5);
        let reef = [run_of(SERIAL), Run::failed("the run timed out".into())];
        let linux = [run_of("FSBENCH run name=python3 sample=0 core=0 ns=60000000\nFSBENCH run name=python3 sample=1 core=0 ns=20000000\n"), run_of("")];
        let cold = row(find("python3 cold"), &reef, &linux);
        assert_eq!(cold.per_run, [Some(1.5), None]);
        assert_eq!(cold.met, Some(false));
        let warm = row(find("python3 warm"), &reef, &linux);
        assert_eq!(warm.per_run[0], Some(2.0), "40 ms median over 20 ms");
        assert_eq!(reasons(&warm.reef), ["the run timed out"]);
        assert_eq!(reasons(&warm.linux), ["fsbench printed nothing for it"]);
        let dd = row(find("dd-core1 warm, core 1"), &reef, &linux);
        assert_eq!(reasons(&dd.reef)[0], "sample 0: /bin/busybox dd ended with exit status: 1");
    }

    #[test]
    fn both_sides_run_the_same_commands() {
        let reef = reef_shell_line(5);
        assert!(
            reef.starts_with(
                "on 0 /bin/fsbench --pin 0 --repeat 5 run python3 -- /bin/busybox chroot /debian /usr/bin/python3 -c pass; "
            ),
            "{reef}"
        );
        assert!(reef.contains("; on 1 /bin/fsbench --pin 1 --repeat 5 run dd-core1 -- /bin/busybox dd if=/debian/srv/reef-bench/big64 of=/dev/null bs=64k; "));
        assert!(qemu::exec_argument(&reef).unwrap().len() < platform::cmdline::MAX_VALUE, "fits the kernel's exec=");
        let modules = ["virtio_ring".to_string(), "9p".to_string()];
        let linux = linux_shell_line(&modules, 5);
        assert!(linux.starts_with(
            "insmod /lib/modules/extra/virtio_ring.ko\ninsmod /lib/modules/extra/9p.ko\nmkdir -p /debian\n"
        ));
        assert!(linux.contains("mount -t 9p -o trans=virtio,version=9p2000.L,msize=131072 share0 /debian; then "));
        for program in programs() {
            let arguments = fsbench_arguments(&program, 5);
            assert!(reef.contains(&arguments) && linux.contains(&format!("--pin {} {arguments}", program.core)));
        }
    }

    #[test]
    fn options() {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let options =
            parse_options(&strings(&["--runs", "2", "--repeat", "7", "--accel", "tcg", "--no-linux"])).unwrap();
        assert_eq!((options.runs, options.repeat, options.accel, options.linux), (2, 7, Accel::Tcg, false));
        assert!(parse_options(&strings(&["--runs", "0"])).is_err());
        assert!(parse_options(&strings(&["--vs-linux"])).unwrap_err().contains("--vs-linux"));
    }
}
