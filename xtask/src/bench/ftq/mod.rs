//! `cargo xtask bench ftq` and `peer ftq`: OS noise by fixed time quantum (`user/ftq`, HARE
//! ch. 2; NIX's TC-against-AC evaluation) on a Reef TC, a Reef AC, the Linux guest's CPU 1
//! with and without `nohz_full`, and the host itself (the floor under every guest), read as
//! loss fractions, interrupts and a Welch spectrum.

mod spectrum;

use crate::bench::peer;
use crate::bench::plot::{self, Draw, Mark, Series};
use crate::interrupts::{self, Table};
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use serde_json::{json, Map, Value};
use spectrum::{PeakTest, Spectrum};
use std::path::Path;
use std::time::{Duration, Instant};

/// Quanta per run and their length when the command line does not say: 100 000 quanta of
/// 50 µs (the issue's; NIX measured 50 000-cycle quanta), 5 s of measuring.
const DEFAULT_QUANTA: usize = 100_000;
const DEFAULT_QUANTUM_US: &str = "50";
/// The core or CPU ftq runs on, in a 2-core machine: core 0 keeps init, the shell and (on Reef)
/// the file service and the console.
const FTQ_CORE: usize = 1;
const CORES: usize = 2;
/// Reef's timer rate, given on the kernel command line so the spectrum is searched at the
/// rate really used (the default of `timer_hz=` in `crates/platform/src/cmdline.rs` is 100).
const REEF_TIMER_HZ: u32 = 100;
/// The Linux guest's tick: Debian's amd64 kernels are built with `CONFIG_HZ=250`. The
/// interrupts ftq's CPU took during the run (`LOC`) are reported beside it as a check.
const LINUX_TIMER_HZ: u32 = 250;
/// The tick of the machine QEMU runs on, for the host run (the noise floor under the
/// guests): this workplace's host kernel ticks at 250 Hz on a busy CPU (its `LOC` count, which
/// the run reports beside it).
const HOST_TIMER_HZ: u32 = 250;
/// Always on the Linux guest's command line (after `peer`'s own): its clock runs on the TSC
/// as Reef's does, without the clocksource watchdog's periodic checks (and under TCG without
/// falling back to jiffies, see `fs_bench`).
const LINUX_ARGUMENTS: &str = "tsc=reliable";
/// Added for the isolated run: no tick on CPU 1 while one task runs there, and no task there
/// unless pinned (RCU callbacks move off it with `nohz_full` too).
const LINUX_ISOLATION: &str = "nohz_full=1 isolcpus=1";
/// Where the results go, under the workspace root.
const RESULTS_FILE: &str = "results/ftq.json";
const LINUX_RESULTS_FILE: &str = "results/ftq-linux.json";

/// Where one FTQ run happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    /// Reef core 1 as a timesharing core (the default role): `on 1 /bin/ftq`.
    ReefTc,
    /// Reef core 1 made an application core: `role 1 ac; execac 1 /bin/ftq`.
    ReefAc,
    /// Reef core 1 restarted with the `rt` kernel image (an AC with no timer and no device
    /// interrupt, BF/DC §4.10 and figure 5): `core restart 1 /boot/rt; execac 1 /bin/ftq`.
    ReefRt,
    /// Reef core 1 as a TC, parked on core 0 one second into the run and unparked a second
    /// later (BF/DC figure 4); QEMU boots the `multi` image so that core 0 can host it.
    ReefParked,
    /// Reef core 1 as a TC, restarted with `/boot/full-v2` one second into the run (BF/DC
    /// figure 4): its process waits the restart out on core 0 and comes back.
    ReefRestarted,
    /// The Linux guest, ftq pinned to CPU 1.
    Linux,
    /// The same with `nohz_full=1 isolcpus=1`.
    LinuxIsolated,
    /// The same binary on the machine QEMU runs on, pinned to its CPU 1, no guest at all: the
    /// floor of what any guest run can show (under TCG a guest's vCPU is a thread there).
    Host,
}

impl Setup {
    /// The run's name in the results and the plot files.
    fn name(self) -> &'static str {
        match self {
            Self::ReefTc => "reef-tc",
            Self::ReefAc => "reef-ac",
            Self::ReefRt => "reef-rt",
            Self::ReefParked => "reef-parked",
            Self::ReefRestarted => "reef-restarted",
            Self::Linux => "linux",
            Self::LinuxIsolated => "linux-nohz",
            Self::Host => "host",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::ReefTc => "Reef TC (core 1)",
            Self::ReefAc => "Reef AC (core 1)",
            Self::ReefRt => "Reef AC on the rt image (core 1)",
            Self::ReefParked => "Reef TC (core 1), parked on core 0 at 1 s, unparked at 2 s",
            Self::ReefRestarted => "Reef TC (core 1), restarted with full-v2 at 1 s and 2 s",
            Self::Linux => "Linux CPU 1",
            Self::LinuxIsolated => "Linux CPU 1, nohz_full isolcpus",
            Self::Host => "host CPU 1, no guest",
        }
    }

    fn timer_hz(self) -> u32 {
        match self {
            Self::ReefTc | Self::ReefAc | Self::ReefRt | Self::ReefParked | Self::ReefRestarted => REEF_TIMER_HZ,
            Self::Linux | Self::LinuxIsolated => LINUX_TIMER_HZ,
            Self::Host => HOST_TIMER_HZ,
        }
    }

    /// The shell line that runs ftq with `arguments` (Reef's user shell, or Linux's `/init`).
    fn command(self, arguments: &str) -> String {
        match self {
            Self::ReefTc => format!("on {FTQ_CORE} /bin/ftq {arguments}"),
            Self::ReefAc => format!("role {FTQ_CORE} ac && execac {FTQ_CORE} /bin/ftq {arguments}"),
            Self::ReefRt => {
                format!("core restart {FTQ_CORE} /boot/rt > /dev/null && execac {FTQ_CORE} /bin/ftq {arguments}")
            }
            Self::ReefParked => format!(
                "(sleep 1; core park {FTQ_CORE} 0; sleep 1; core unpark {FTQ_CORE}) & on {FTQ_CORE} /bin/ftq {arguments}; wait"
            ),
            // Twice: the first restart with an image also pays for QEMU translating its code
            // for the first time (10-60 ms), the second is the restart itself.
            Self::ReefRestarted => format!(
                "(sleep 1; core restart {FTQ_CORE} /boot/full-v2 > /dev/null; sleep 1; \
                 core restart {FTQ_CORE} /boot/full-v2 > /dev/null) & on {FTQ_CORE} /bin/ftq {arguments}; wait"
            ),
            Self::Linux | Self::LinuxIsolated => format!("/bin/ftq {arguments}"),
            Self::Host => format!("ftq {arguments}"),
        }
    }

    /// What the Linux guest's command line gets beyond `peer`'s own.
    fn linux_arguments(self) -> Option<String> {
        match self {
            Self::Linux => Some(LINUX_ARGUMENTS.to_string()),
            Self::LinuxIsolated => Some(format!("{LINUX_ARGUMENTS} {LINUX_ISOLATION}")),
            Self::ReefTc | Self::ReefAc | Self::ReefRt | Self::ReefParked | Self::ReefRestarted | Self::Host => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Options {
    quanta: usize,
    /// As given: ftq parses it (µs, a decimal allowed).
    quantum_us: String,
    accel: Accel,
    setups: Vec<Setup>,
}

fn parse_options(arguments: &[String], setups: &[Setup], usage: &str) -> Result<Options, String> {
    let mut options = Options {
        quanta: DEFAULT_QUANTA,
        quantum_us: DEFAULT_QUANTUM_US.to_string(),
        accel: Accel::detect(),
        setups: setups.to_vec(),
    };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("{word} needs a value: {usage}"));
        match word.as_str() {
            "--quanta" => {
                let text = value()?;
                options.quanta = text
                    .parse()
                    .ok()
                    .filter(|quanta| (1000..=1_000_000).contains(quanta))
                    .ok_or_else(|| format!("--quanta takes 1000 to 1000000, not `{text}`"))?;
            }
            "--quantum-us" => {
                let text = value()?;
                if !text.parse::<f64>().is_ok_and(|us| (1.0..=1_000_000.0).contains(&us)) {
                    return Err(format!("--quantum-us takes a length in µs from 1 to 1000000, not `{text}`"));
                }
                options.quantum_us = text.clone();
            }
            "--accel" => options.accel = Accel::parse(value()?)?,
            "--no-linux" => options.setups.retain(|setup| !matches!(setup, Setup::Linux | Setup::LinuxIsolated)),
            "--only" => {
                let names: Vec<&str> = value()?.split(',').collect();
                if let Some(unknown) = names.iter().find(|name| !setups.iter().any(|s| s.name() == **name)) {
                    let known: Vec<&str> = setups.iter().map(|s| s.name()).collect();
                    return Err(format!("--only: no run `{unknown}` (runs: {})", known.join(", ")));
                }
                options.setups.retain(|setup| names.contains(&setup.name()));
            }
            other => return Err(format!("unknown option `{other}`: {usage}")),
        }
    }
    Ok(options)
}

const BENCH_USAGE: &str = "bench ftq [--quanta N] [--quantum-us U] [--accel kvm|tcg] [--no-linux] [--only RUN[,RUN]]";
const PEER_USAGE: &str = "peer ftq [--quanta N] [--quantum-us U] [--accel kvm|tcg] [--only RUN[,RUN]]";

/// ftq's arguments for every run: on core or CPU 1, interrupts around the run, the data dumped.
fn ftq_arguments(options: &Options) -> String {
    format!("--cpu {FTQ_CORE} --interrupts --dump {} {}", options.quanta, options.quantum_us)
}

// ---------------------------------------------------------------------------------------------
// What ftq printed

/// One run's output, parsed.
#[derive(Clone, Debug, PartialEq)]
struct Output {
    /// The `FTQ` summary line's fields, as ftq computed them.
    summary: Map<String, Value>,
    counts: Vec<u32>,
    /// The TSC when each quantum's counting began.
    starts: Vec<u64>,
    /// When the first quantum was due; quantum `i` is due `i * quantum_cycles` later.
    scheduled_start: u64,
    quantum_cycles: u64,
    tsc_hz: f64,
    /// `/proc/interrupts` just before and just after the quanta.
    interrupts: Option<(Table, Table)>,
}

/// The `key=value` words of a line, numbers as numbers.
fn fields(line: &str) -> Map<String, Value> {
    line.split_whitespace()
        .filter_map(|word| word.split_once('='))
        .map(|(key, value)| (key.to_string(), value.parse::<f64>().map_or_else(|_| json!(value), |n| json!(n))))
        .collect()
}

/// The part of `line` from `marker` on, if it holds it (a kernel message may come first).
fn from_marker<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|at| &line[at..])
}

/// The comma-separated numbers after `<marker> <first index> ` placed into `into`.
fn place<T: std::str::FromStr + Copy>(line: &str, marker: &str, into: &mut [Option<T>]) -> Result<(), String> {
    let rest = line[marker.len()..].trim();
    let (first, values) = rest.split_once(' ').ok_or_else(|| format!("`{marker}` line without values"))?;
    let first: usize = first.parse().map_err(|_| format!("`{marker}` line with a bad index `{first}`"))?;
    for (offset, text) in values.trim().split(',').enumerate() {
        let value = text.parse().map_err(|_| format!("`{marker}` line {first}: bad number `{text}`"))?;
        let slot = into
            .get_mut(first + offset)
            .ok_or_else(|| format!("`{marker}` index {} beyond the run", first + offset))?;
        *slot = Some(value);
    }
    Ok(())
}

/// Reads ftq's lines out of a serial log.
fn parse_output(serial: &str) -> Result<Output, String> {
    if let Some(error) = serial.lines().find_map(|line| from_marker(line, "FTQ-ERROR ")) {
        return Err(format!("ftq failed: {}", error.trim_start_matches("FTQ-ERROR ")));
    }
    let summary = serial
        .lines()
        .find_map(|line| from_marker(line, "FTQ quanta="))
        .map(fields)
        .ok_or("ftq printed no summary line")?;
    let header = serial
        .lines()
        .find_map(|line| from_marker(line, "FTQ-DATA begin "))
        .map(fields)
        .ok_or("ftq printed no FTQ-DATA")?;
    let number = |map: &Map<String, Value>, key: &str| {
        map.get(key).and_then(Value::as_f64).ok_or_else(|| format!("no `{key}=` in ftq's output"))
    };
    let quanta = number(&header, "quanta")? as usize;
    let scheduled_start = number(&header, "scheduled_start")? as u64;
    let quantum_cycles = number(&header, "quantum_cycles")? as u64;
    let tsc_hz = number(&summary, "tsc_hz")?;
    let mut counts = vec![None; quanta];
    let mut late = vec![None; quanta];
    for line in serial.lines() {
        if let Some(rest) = from_marker(line, "FTQ-COUNTS ") {
            place(rest, "FTQ-COUNTS", &mut counts)?;
        } else if let Some(rest) = from_marker(line, "FTQ-LATE ") {
            place(rest, "FTQ-LATE", &mut late)?;
        }
    }
    let missing = counts.iter().filter(|count| count.is_none()).count() + late.iter().filter(|l| l.is_none()).count();
    if missing > 0 {
        return Err(format!(
            "{missing} of {} counts and times missing from ftq's dump (lost on the console?)",
            2 * quanta
        ));
    }
    let counts: Vec<u32> = counts.into_iter().flatten().collect();
    let starts: Vec<u64> = late
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(index, late): (usize, u64)| scheduled_start + index as u64 * quantum_cycles + late)
        .collect();
    let interrupts = serial.find("FTQ-INTERRUPTS before").and_then(|start| {
        let end = serial[start..].find("FTQ-INTERRUPTS end")? + start;
        match &interrupts::tables(&serial[start..end])[..] {
            [before, after] => Some((before.clone(), after.clone())),
            _ => None,
        }
    });
    Ok(Output { summary, counts, starts, scheduled_start, quantum_cycles, tsc_hz, interrupts })
}

// ---------------------------------------------------------------------------------------------
// Reading the counts

/// The loss thresholds, as (numerator, denominator) of the maximum work and their JSON name.
const LOSS_THRESHOLDS: [(u64, u64, &str); 3] = [(1, 1000, "gt_0.1pct"), (1, 100, "gt_1pct"), (1, 10, "gt_10pct")];

/// The share of `counts` that lost more than `numerator / denominator` of the most any
/// quantum did: `(max - count) * denominator > max * numerator`, in integers, as ftq's own
/// summary line computes it.
fn fraction_losing(counts: &[u32], numerator: u64, denominator: u64) -> f64 {
    let Some(&max) = counts.iter().max() else { return 0.0 };
    let max = u64::from(max);
    let losing = counts.iter().filter(|&&count| (max - u64::from(count)) * denominator > max * numerator).count();
    losing as f64 / counts.len() as f64
}

/// The counts divided by their maximum (HARE's `fitmax`), the series the spectrum is taken of.
fn normalised(counts: &[u32]) -> Vec<f64> {
    let max = f64::from(counts.iter().copied().max().unwrap_or(1).max(1));
    counts.iter().map(|&count| f64::from(count) / max).collect()
}

/// Everything the host makes of one run.
struct Analysis {
    spectrum: Spectrum,
    timer: Option<PeakTest>,
    json: Value,
}

fn analyse(setup: Setup, output: &Output) -> Result<Analysis, String> {
    let counts = &output.counts;
    let sample_rate = output.tsc_hz / output.quantum_cycles as f64;
    let segment = spectrum::segment_length(counts.len()).ok_or("too few quanta for a spectrum")?;
    let spectrum = spectrum::welch(&normalised(counts), sample_rate, segment).ok_or("no spectrum")?;
    let timer = spectrum::peaks_at(&spectrum, f64::from(setup.timer_hz()));
    let values: Vec<f64> = counts.iter().map(|&count| f64::from(count)).collect();
    let work = crate::bench::stats::summarize(&values).ok_or("no counts")?;
    let lost: Map<String, Value> = LOSS_THRESHOLDS
        .iter()
        .map(|&(numerator, denominator, name)| {
            (name.to_string(), json!(fraction_losing(counts, numerator, denominator)))
        })
        .collect();
    let late: Vec<f64> = output
        .starts
        .iter()
        .enumerate()
        .map(|(index, &start)| start.saturating_sub(output.scheduled_start + index as u64 * output.quantum_cycles))
        .map(|cycles| cycles as f64 * 1e9 / output.tsc_hz)
        .collect();
    let late = crate::bench::stats::summarize(&late).ok_or("no times")?;
    let duration = counts.len() as f64 / sample_rate;
    let core_column = |table: &Table| table.cpus.iter().position(|&cpu| cpu == FTQ_CORE);
    let interrupts = output.interrupts.as_ref().map(|(before, after)| {
        let during = after.since(before);
        let on_core: u64 = core_column(&during)
            .map(|column| during.lines.iter().filter_map(|line| line.counts.get(column)).sum())
            .unwrap_or(0);
        json!({
            "on_ftq_core": on_core,
            "on_ftq_core_per_second": on_core as f64 / duration,
            "during_run": during.to_json(),
        })
    });
    let harmonics = |test: &PeakTest| {
        test.harmonics
            .iter()
            .map(|h| {
                json!({ "order": h.order, "hz": h.frequency, "psd": h.density, "background_psd": h.background,
                              "ratio": h.ratio })
            })
            .collect::<Vec<_>>()
    };
    let lines: Vec<Value> = spectrum::strongest_lines(&spectrum, 5)
        .into_iter()
        .map(|(hz, psd, ratio)| json!({ "hz": hz, "psd": psd, "ratio_to_its_surroundings": ratio }))
        .collect();
    let json = json!({
        "label": setup.label(),
        "quanta": counts.len(),
        "tsc_hz": output.tsc_hz,
        "quantum_cycles": output.quantum_cycles,
        "sample_rate_hz": sample_rate,
        "duration_s": duration,
        "work_units": { "max": work.max, "median": work.median, "mean": work.mean, "p5": work.p5, "min": work.min,
                        "empty_quanta": counts.iter().filter(|&&c| c == 0).count() },
        "lost": lost,
        "start_lateness_ns": crate::bench::stats::to_json(&late),
        "ftq_summary": output.summary,
        "interrupts": interrupts,
        "spectrum": {
            "segment": spectrum.segment,
            "segments": spectrum.segments,
            "resolution_hz": spectrum.resolution,
            "timer_hz": setup.timer_hz(),
            "timer_harmonics": timer.as_ref().map(harmonics),
            "timer_peak": timer.as_ref().map(|t| t.peak),
            "strongest_lines": lines,
        },
    });
    Ok(Analysis { spectrum, timer, json })
}

// ---------------------------------------------------------------------------------------------
// Running

/// One run: its output, or why there is none.
type RunResult = Result<(Output, Map<String, Value>), String>;

/// The non-log lines at the end of a Reef serial log: what the shell said.
fn shell_tail(serial: &str, count: usize) -> String {
    let lines: Vec<&str> = serial
        .lines()
        .filter(|line| !line.starts_with("[c") && !line.starts_with("FTQ-") && !line.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(count)..].join(" | ")
}

fn reef_run(setup: Setup, options: &Options, kernel: &Path, initrd: &Path) -> RunResult {
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.initrd = Some(initrd.to_path_buf());
    machine.timeout = Duration::from_secs(600);
    if setup == Setup::ReefParked {
        machine.kernel = Some(crate::kernel_images::built_path("multi"));
    }
    let line = setup.command(&ftq_arguments(options));
    machine.kernel_args = format!("timer_hz={REEF_TIMER_HZ} {}", qemu::exec_argument(&line)?);
    let (outcome, _) = qemu::boot(&machine, kernel, None)?;
    let mut context = Map::new();
    context.insert("command".into(), json!(line));
    context.insert("kernel_command_line".into(), json!(machine.kernel_args));
    context.insert("exit_status".into(), json!(outcome.guest_status));
    // A restarted core's new kernel says how long it kept each process stopped.
    let kept: Vec<u64> = outcome
        .serial
        .lines()
        .filter_map(|line| line.split(" kept through the restart: ").nth(1))
        .filter_map(|rest| rest.split(" us since it stopped").next()?.rsplit(' ').next()?.parse().ok())
        .collect();
    if !kept.is_empty() {
        println!("{}: the process was kept stopped through each restart for {kept:?} us", setup.name());
        context.insert("kept_stopped_us".into(), json!(kept));
    }
    match parse_output(&outcome.serial) {
        Ok(output) => Ok((output, context)),
        Err(error) => {
            let said = shell_tail(&outcome.serial, 4);
            let hint = if setup == Setup::ReefAc && (said.contains("role") || said.contains("execac")) {
                " (`role` and `execac` are not in this tree yet)"
            } else {
                ""
            };
            Err(format!(
                "{error}{hint}; exit status {:?}{}; the shell said: {said}",
                outcome.guest_status,
                if outcome.timed_out { ", timed out" } else { "" }
            ))
        }
    }
}

fn linux_run(setup: Setup, options: &Options) -> RunResult {
    let bytes = tools::user_program_bytes("ftq")?;
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.timeout = Duration::from_secs(900);
    machine.kernel_args = setup.linux_arguments().unwrap_or_default();
    let command = setup.command(&ftq_arguments(options));
    let run = peer::run_program_on(&machine, &[("ftq".to_string(), bytes)], &command)?;
    let mut context = Map::new();
    context.insert("command".into(), json!(command));
    context.insert("kernel_arguments_added".into(), json!(machine.kernel_args));
    context.insert("kernel_version".into(), json!(run.kernel_version));
    context.insert("machine".into(), json!(run.machine));
    parse_output(&run.serial).map(|output| (output, context))
}

/// ftq on the host itself, pinned to its CPU 1.
fn host_run(options: &Options) -> RunResult {
    let ftq = tools::user_program("ftq")?;
    let arguments = ftq_arguments(options);
    let output = std::process::Command::new(&ftq)
        .args(arguments.split_whitespace())
        .output()
        .map_err(|e| format!("running {}: {e}", ftq.display()))?;
    let mut context = Map::new();
    context.insert("command".into(), json!(format!("{} {arguments}", ftq.display())));
    context.insert(
        "host_kernel".into(),
        json!(std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim()),
    );
    parse_output(&String::from_utf8_lossy(&output.stdout)).map(|output| (output, context))
}

/// The host's CPU time so far, summed over its CPUs, from `/proc/stat`: (steal, all), in
/// ticks. Steal is time the host's own hypervisor ran something else on its CPUs.
fn host_cpu_time() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    cpu_time(&text)
}

fn cpu_time(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let values: Vec<u64> = line.split_whitespace().skip(1).filter_map(|word| word.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let all: u64 = values.iter().take(8).sum();
    Some((*values.get(7)?, all))
}

/// The host's load and the share of its CPU time stolen by its own hypervisor between `before`
/// (from [`host_cpu_time`]) and now.
fn host_context(before: Option<(u64, u64)>, load_before: f64) -> Value {
    let share = match (before, host_cpu_time()) {
        (Some((steal_0, all_0)), Some((steal_1, all_1))) if all_1 > all_0 => {
            Some((steal_1 - steal_0) as f64 / (all_1 - all_0) as f64)
        }
        _ => None,
    };
    json!({
        "cpus": std::thread::available_parallelism().map_or(0, usize::from),
        "load_average_before": load_before,
        "steal_share_during_run": share,
    })
}

fn host_load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Runs every setup of `options`, analyses and plots each, prints the table and writes
/// `results_file`.
fn measure(options: &Options, results_file: &str) -> Result<u8, String> {
    let started = Instant::now();
    let reef = options.setups.iter().any(|setup| {
        matches!(setup, Setup::ReefTc | Setup::ReefAc | Setup::ReefRt | Setup::ReefParked | Setup::ReefRestarted)
    });
    let images = if reef {
        tools::ensure_qemu()?;
        Some((tools::build_kernel()?, tools::build_initramfs()?))
    } else {
        None
    };
    let directory = tools::root().join("results");
    std::fs::create_dir_all(&directory).map_err(|e| format!("creating results/: {e}"))?;
    let mut runs = Map::new();
    let mut spectra: Vec<(Setup, Spectrum)> = Vec::new();
    let mut rows = Vec::new();
    for &setup in &options.setups {
        eprintln!(
            "xtask: ftq {} quanta of {} µs: {} ({})",
            options.quanta,
            options.quantum_us,
            setup.label(),
            options.accel.name()
        );
        let (load, cpu_time) = (host_load_average(), host_cpu_time());
        let result = match (setup, &images) {
            (
                Setup::ReefTc | Setup::ReefAc | Setup::ReefRt | Setup::ReefParked | Setup::ReefRestarted,
                Some((kernel, initrd)),
            ) => reef_run(setup, options, kernel, initrd),
            (Setup::Host, _) => host_run(options),
            _ => linux_run(setup, options),
        };
        let host = host_context(cpu_time, load);
        let entry = match result.and_then(|(output, context)| Ok((analyse(setup, &output)?, output, context))) {
            Ok((analysis, output, context)) => {
                let plots = plot_run(&directory, setup, &output, &analysis);
                let Analysis { spectrum, timer, mut json } = analysis;
                json["run"] = Value::Object(context);
                json["host"] = host;
                json["plots"] = json!(plots);
                rows.push(row(setup, &json, timer.as_ref()));
                spectra.push((setup, spectrum));
                json
            }
            Err(error) => {
                eprintln!("xtask: {}: {error}", setup.label());
                rows.push(format!("{:<34} not measured: {error}", setup.label()));
                json!({ "label": setup.label(), "error": error, "host": host })
            }
        };
        runs.insert(setup.name().to_string(), entry);
    }
    let mut plots = Vec::new();
    if spectra.len() > 1 {
        let name = if results_file == RESULTS_FILE { "ftq-psd.png" } else { "ftq-linux-psd.png" };
        plots.extend(plot_spectra(&directory.join(name), &spectra));
    }
    println!(
        "{:<34} {:>6} {:>8} {:>8} {:>8} {:>8} {:>6}  {:<22} interrupts on CPU 1 (/s)",
        "run", "max", "median", ">0.1%", ">1%", ">10%", "empty", "timer peak (ratio)"
    );
    for row in &rows {
        println!("{row}");
    }
    let results = json!({
        "benchmark": "ftq",
        "what": "fixed time quantum (user/ftq): work units done in each quantum on core or CPU 1 of a 2-core guest",
        "accelerator": options.accel.name(),
        "quanta": options.quanta,
        "quantum_us": options.quantum_us.parse::<f64>().ok(),
        "ftq_arguments": ftq_arguments(options),
        "cores": CORES,
        "ftq_core": FTQ_CORE,
        "spectrum_method": "Welch: counts over their maximum, segments of the largest power of two up to 4096 and \
                            at most an eighth of the quanta, half overlapping, mean removed, periodic Hann window, \
                            one-sided density; sample rate = TSC rate / quantum cycles",
        "peak_criterion": format!(
            "the highest PSD within one bin of the timer frequency's nearest bin is at least {} times its \
             background: the median PSD of the bins within half the timer frequency (at least 10 bins) on either \
             side, leaving out DC and the bins within two of any multiple of the timer frequency",
            spectrum::PEAK_RATIO
        ),
        "runs": runs,
        "plots": plots,
        "wall_seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
    });
    let path = tools::root().join(results_file);
    std::fs::write(&path, serde_json::to_string_pretty(&results).map_err(|e| e.to_string())? + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(0)
}

/// One line of the printed table.
fn row(setup: Setup, json: &Value, timer: Option<&PeakTest>) -> String {
    let lost = |name: &str| format!("{:.4}", json["lost"][name].as_f64().unwrap_or(f64::NAN));
    let peak = timer.map_or("-".to_string(), |t| {
        format!("{} {} Hz ({:.1})", if t.peak { "yes" } else { "no" }, t.frequency, t.harmonics[0].ratio)
    });
    let interrupts =
        match (json["interrupts"]["on_ftq_core"].as_u64(), json["interrupts"]["on_ftq_core_per_second"].as_f64()) {
            (Some(total), Some(rate)) => format!("{total} ({rate:.0})"),
            _ => "-".to_string(),
        };
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    format!(
        "{:<34} {:>6.0} {:>8.1} {:>8} {:>8} {:>8} {:>6}  {:<22} {}",
        setup.label(),
        number(&json["work_units"]["max"]),
        number(&json["work_units"]["median"]),
        lost("gt_0.1pct"),
        lost("gt_1pct"),
        lost("gt_10pct"),
        json["work_units"]["empty_quanta"],
        peak,
        interrupts
    )
}

/// Marks at the first harmonics of `hz` below `below`, the first labelled.
fn timer_marks(hz: u32, below: f64) -> Vec<Mark> {
    (1..=spectrum::HARMONICS as u32)
        .map(|order| f64::from(order * hz))
        .take_while(|&f| f < below)
        .enumerate()
        .map(|(index, f)| (f, if index == 0 { format!("timer {hz} Hz") } else { String::new() }))
        .collect()
}

/// The PSD as plot points, DC left out.
fn spectrum_points(spectrum: &Spectrum) -> Vec<(f64, f64)> {
    (1..spectrum.density.len()).map(|bin| (spectrum.frequency(bin), spectrum.density[bin])).collect()
}

/// Counts over time and the spectrum of one run; the files written (a failed plot is a note,
/// not a failure: benchmarks are data).
fn plot_run(directory: &Path, setup: Setup, output: &Output, analysis: &Analysis) -> Vec<String> {
    let mut written = Vec::new();
    let quantum_s = output.quantum_cycles as f64 / output.tsc_hz;
    let counts = Series {
        name: setup.label().to_string(),
        points: output.counts.iter().enumerate().map(|(i, &c)| (i as f64 * quantum_s, f64::from(c))).collect(),
        low_high: None,
    };
    let counts_file = directory.join(format!("ftq-{}-counts.png", setup.name()));
    let title = format!("FTQ work per quantum, {}", setup.label());
    match plot::trace_chart(
        &counts_file,
        &title,
        ("time (s)", "work units per quantum"),
        &[counts],
        (false, false, Draw::Dots),
        &[],
    ) {
        Ok(()) => written.push(counts_file.display().to_string()),
        Err(error) => eprintln!("xtask: no plot: {error}"),
    }
    let spectrum = &analysis.spectrum;
    let series = Series { name: setup.label().to_string(), points: spectrum_points(spectrum), low_high: None };
    let psd_file = directory.join(format!("ftq-{}-psd.png", setup.name()));
    let title = format!("FTQ power spectrum, {}", setup.label());
    let marks = timer_marks(setup.timer_hz(), spectrum.sample_rate / 2.0);
    match plot::trace_chart(
        &psd_file,
        &title,
        ("frequency (Hz)", "PSD of work / max (1/Hz)"),
        &[series],
        (true, true, Draw::Lines),
        &marks,
    ) {
        Ok(()) => written.push(psd_file.display().to_string()),
        Err(error) => eprintln!("xtask: no plot: {error}"),
    }
    written
}

/// Every run's spectrum on one chart (HARE fig. 2.3), with both timers marked.
fn plot_spectra(path: &Path, spectra: &[(Setup, Spectrum)]) -> Option<String> {
    let series: Vec<Series> = spectra
        .iter()
        .map(|(setup, spectrum)| Series {
            name: setup.label().to_string(),
            points: spectrum_points(spectrum),
            low_high: None,
        })
        .collect();
    let nyquist = spectra.iter().map(|(_, s)| s.sample_rate / 2.0).fold(0.0, f64::max);
    let mut marks = Vec::new();
    let mut rates: Vec<u32> = spectra.iter().map(|(setup, _)| setup.timer_hz()).collect();
    rates.sort_unstable();
    rates.dedup();
    for hz in rates {
        marks.extend(timer_marks(hz, nyquist).into_iter().take(1));
    }
    match plot::trace_chart(
        path,
        "FTQ power spectra",
        ("frequency (Hz)", "PSD of work / max (1/Hz)"),
        &series,
        (true, true, Draw::Lines),
        &marks,
    ) {
        Ok(()) => Some(path.display().to_string()),
        Err(error) => {
            eprintln!("xtask: no plot: {error}");
            None
        }
    }
}

/// `cargo xtask bench ftq`.
pub fn bench(arguments: &[String]) -> Result<u8, String> {
    let all = [
        Setup::ReefTc,
        Setup::ReefAc,
        Setup::ReefRt,
        Setup::ReefParked,
        Setup::ReefRestarted,
        Setup::Linux,
        Setup::LinuxIsolated,
        Setup::Host,
    ];
    measure(&parse_options(arguments, &all, BENCH_USAGE)?, RESULTS_FILE)
}

/// `cargo xtask peer ftq`.
pub fn peer(arguments: &[String]) -> Result<u8, String> {
    measure(&parse_options(arguments, &[Setup::Linux, Setup::LinuxIsolated], PEER_USAGE)?, LINUX_RESULTS_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn loss_fractions() {
        // max 2000: 0.1 % is 2 units, 1 % 20, 10 % 200; a loss of exactly that does not count.
        let counts = [2000, 1998, 1997, 1980, 1979, 1800, 1799, 0];
        assert_eq!(fraction_losing(&counts, 1, 1000), 6.0 / 8.0);
        assert_eq!(fraction_losing(&counts, 1, 100), 4.0 / 8.0);
        assert_eq!(fraction_losing(&counts, 1, 10), 2.0 / 8.0);
        assert_eq!(fraction_losing(&[], 1, 10), 0.0);
        assert_eq!(fraction_losing(&[7; 10], 1, 1000), 0.0);
        assert_eq!(normalised(&[0, 50, 100]), [0.0, 0.5, 1.0]);
    }

    const SERIAL: &str = "\
[c0 INFO ] 2 kernel instances up of 2 cores (57 ms since boot)
FTQ-CONFIG quanta=4 quantum_ns=50000 quantum_cycles=100 work=8 warmup=100 tsc_hz=2000000 os=reef core=1
FTQ quanta=4 quantum_ns=50000 quantum_cycles=100 work=8 warmup=100 max=10 median=9.5 mean=7.2 min=0 empty=1 lost_gt_0.1pct=0.5 lost_gt_1pct=0.5 lost_gt_10pct=0.25 latest_start_ns=20 tsc_hz=2000000 os=reef core=1
FTQ-INTERRUPTS before
           CPU0       CPU1       
 32:         10          7   timer
FTQ-INTERRUPTS after
           CPU0       CPU1       
 14:          0          3   page fault
 32:         20         12   timer
FTQ-INTERRUPTS end
FTQ-DATA begin quanta=4 scheduled_start=1000 quantum_cycles=100
FTQ-COUNTS 0 10,9
[c1 INFO ] a kernel line in between
FTQ-COUNTS 2 0,10
FTQ-LATE 0 0,3
FTQ-LATE 2 140,1
FTQ-DATA end
";

    #[test]
    fn output_from_serial() {
        let output = parse_output(SERIAL).unwrap();
        assert_eq!(output.counts, [10, 9, 0, 10]);
        assert_eq!(output.starts, [1000, 1103, 1340, 1301]);
        assert_eq!((output.quantum_cycles, output.tsc_hz), (100, 2_000_000.0));
        assert_eq!(output.summary["max"], 10.0);
        let (before, after) = output.interrupts.clone().unwrap();
        let during = after.since(&before);
        assert_eq!(during.line("32").unwrap().counts, [10, 5]);
        assert_eq!(during.line("14").unwrap().counts, [0, 3]);
    }

    #[test]
    fn output_errors_are_named() {
        let without = SERIAL.replace("FTQ-COUNTS 2 0,10\n", "");
        assert!(parse_output(&without).unwrap_err().contains("2 of 8 counts and times missing"));
        let failed = format!("{SERIAL}FTQ-ERROR ftq runs on core 0, not 1\n");
        assert!(parse_output(&failed).unwrap_err().contains("runs on core 0"));
        assert!(parse_output("sh: role: not found\n").unwrap_err().contains("no summary line"));
        let beyond = SERIAL.replace("FTQ-LATE 2 140,1", "FTQ-LATE 2 140,1,5");
        assert!(parse_output(&beyond).unwrap_err().contains("beyond the run"));
    }

    #[test]
    fn analysis_of_a_ticking_run() {
        // 20 000 quanta at 20 kHz, every 200th losing a quarter: a 100 Hz tick.
        let quanta = 20_000;
        let output = Output {
            summary: Map::new(),
            counts: (0..quanta).map(|i| if i % 200 == 5 { 600 } else { 800 + (i * 7 % 3) as u32 }).collect(),
            starts: (0..quanta as u64).map(|i| 5000 + i * 100).collect(),
            scheduled_start: 5000,
            quantum_cycles: 100,
            tsc_hz: 2_000_000.0,
            interrupts: None,
        };
        let analysis = analyse(Setup::ReefTc, &output).unwrap();
        assert!(analysis.timer.as_ref().unwrap().peak);
        assert_eq!(analysis.json["spectrum"]["timer_peak"], true);
        assert_eq!(analysis.json["sample_rate_hz"], 20_000.0);
        assert_eq!(analysis.json["lost"]["gt_10pct"], 100.0 / 20_000.0);
        assert_eq!(analysis.json["work_units"]["max"], 802.0);
        assert_eq!(analysis.json["start_lateness_ns"]["max"], 0.0);
        let row = row(Setup::ReefTc, &analysis.json, analysis.timer.as_ref());
        assert!(row.starts_with("Reef TC (core 1)") && row.contains("yes 100 Hz"), "{row}");
    }

    #[test]
    fn options_and_commands() {
        let all = [Setup::ReefTc, Setup::ReefAc, Setup::Linux, Setup::LinuxIsolated, Setup::Host];
        let options =
            parse_options(&strings(&["--quanta", "10000", "--quantum-us", "2.5", "--no-linux"]), &all, "u").unwrap();
        assert_eq!((options.quanta, options.quantum_us.as_str()), (10_000, "2.5"));
        assert_eq!(options.setups, [Setup::ReefTc, Setup::ReefAc, Setup::Host]);
        assert_eq!(ftq_arguments(&options), "--cpu 1 --interrupts --dump 10000 2.5");
        let only = parse_options(&strings(&["--only", "host,reef-ac"]), &all, "u").unwrap();
        assert_eq!(only.setups, [Setup::ReefAc, Setup::Host]);
        assert!(parse_options(&strings(&["--only", "reef-nothing"]), &all, "u").is_err());
        assert_eq!(Setup::ReefTc.command("x"), "on 1 /bin/ftq x");
        assert_eq!(Setup::ReefAc.command("x"), "role 1 ac && execac 1 /bin/ftq x");
        assert_eq!(Setup::LinuxIsolated.linux_arguments().unwrap(), "tsc=reliable nohz_full=1 isolcpus=1");
        assert!(qemu::exec_argument(&Setup::ReefAc.command(&ftq_arguments(&options))).is_ok());
        assert!(parse_options(&strings(&["--quanta", "5"]), &all, "u").is_err());
        assert!(parse_options(&strings(&["--quantum-us", "0"]), &all, "u").is_err());
        assert!(parse_options(&strings(&["--what"]), &all, "u").unwrap_err().contains("--what"));
    }

    #[test]
    fn steal_from_proc_stat() {
        let stat = "cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n";
        assert_eq!(cpu_time(stat), Some((35, 1000)));
        assert_eq!(cpu_time("intr 5\n"), None);
    }

    #[test]
    fn marks_stop_below_nyquist() {
        let marks = timer_marks(100, 450.0);
        assert_eq!(marks.len(), 4);
        assert_eq!(marks[0], (100.0, "timer 100 Hz".to_string()));
        assert_eq!(marks[3].1, "");
        assert_eq!(shell_tail("[c0 INFO ] x\nsh: role: not found\nFTQ-DATA end\n", 4), "sh: role: not found");
    }
}
