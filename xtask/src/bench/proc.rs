//! `cargo xtask bench proc` and `peer proc`: the process benchmarks (`user/procbench`), the
//! same binary on Reef and in the Linux guest, and boot to `/sbin/init` on every core.

use crate::bench::peer;
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The figures, the goal for each (Reef / Linux median, TCG), and what they measure.
const FIGURES: [(&str, Option<f64>, &str); 7] = [
    ("getppid", Some(0.3), "getppid round trip by trap"),
    ("fork-exec-wait", Some(0.25), "fork + execve(/bin/tiny) + exit + wait4"),
    ("thread-spawn-join", Some(0.5), "std::thread::spawn + join"),
    ("futex-pingpong", Some(0.5), "two threads on one core handing a futex back and forth"),
    ("page-first-touch", Some(1.0), "first write to a fresh anonymous page"),
    ("spawn-other-core", None, "reef_spawn on another core to wait4 (Reef only)"),
    ("spawn-same-core", None, "reef_spawn on the same core to wait4 (Reef only)"),
];

/// How `init --every-core` is started for the boot figure: it includes starting pid 1 and the
/// shell, some 40 ms under TCG that the kernel shell's `spawn` did not take.
const BOOT_TO_INIT_PATH: &str = "started by the user shell: pid 1 init, then sh -c, then init --every-core";

struct Options {
    runs: usize,
    accel: Accel,
    vs_linux: bool,
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options { runs: 3, accel: Accel::detect(), vs_linux: false };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--runs" => options.runs = crate::bench::common::number_option(word, words.next(), 1..=20)?,
            "--accel" => options.accel = Accel::parse(words.next().ok_or("--accel takes kvm or tcg")?)?,
            "--vs-linux" => options.vs_linux = true,
            other => {
                return Err(format!("unknown option `{other}`: bench proc [--runs N] [--accel kvm|tcg] [--vs-linux]"))
            }
        }
    }
    Ok(options)
}

/// One `BENCH-PROC` line: name → (median ns, every field).
fn parse(serial: &str) -> Map<String, Value> {
    let mut figures = Map::new();
    for line in serial.lines().filter(|l| l.starts_with("BENCH-PROC ")) {
        let fields: Map<String, Value> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_string(), v.parse::<f64>().map_or_else(|_| json!(v), |n| json!(n))))
            .collect();
        if let Some(name) = fields.get("name").and_then(Value::as_str) {
            figures.insert(name.to_string(), Value::Object(fields.clone()));
        }
    }
    figures
}

fn config(serial: &str) -> Map<String, Value> {
    serial
        .lines()
        .find(|l| l.starts_with("BENCH-PROC-CONFIG "))
        .map(|line| {
            line.split_whitespace()
                .skip(1)
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.parse::<f64>().map_or_else(|_| json!(v), |n| json!(n))))
                .collect()
        })
        .unwrap_or_default()
}

fn median_ns(figures: &Map<String, Value>, name: &str) -> Option<f64> {
    figures.get(name)?.get("median")?.as_f64()
}

/// The median of per-run medians, by the `samples` definition every figure uses.
fn median_of(values: Vec<f64>) -> Option<f64> {
    crate::bench::stats::summarize(&values).map(|s| s.median)
}

/// The user programs procbench needs in the Linux guest.
fn linux_files() -> Result<Vec<(String, Vec<u8>)>, String> {
    let programs = tools::build_user_programs()?;
    programs
        .into_iter()
        .filter(|(name, _)| name == "procbench" || name == "tiny")
        .map(|(name, path)| {
            std::fs::read(&path).map(|bytes| (name, bytes)).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect()
}

/// One Linux guest run of procbench.
/// One Linux run: the figures, the configuration line (and the machine), the kernel version.
type LinuxRun = (Map<String, Value>, Map<String, Value>, String);

fn linux_run(accel: Accel) -> Result<LinuxRun, String> {
    let files = linux_files()?;
    let run = peer::run_program(accel, 2, &files, "/bin/procbench --tiny /bin/tiny", Duration::from_secs(900))?;
    let mut configuration = config(&run.serial);
    configuration.insert("machine".into(), json!(run.machine));
    Ok((parse(&run.serial), configuration, run.kernel_version))
}

/// `cargo xtask peer proc [--accel kvm|tcg]`: procbench in the Linux guest, printed.
pub fn peer(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments)?;
    let (figures, configuration, version) = linux_run(options.accel)?;
    println!("Linux {version} ({}), {:?}", options.accel.name(), configuration);
    for (name, _, what) in FIGURES {
        if let Some(median) = median_ns(&figures, name) {
            println!("  {name:<20} median {median:>12.0} ns   {what}");
        }
    }
    Ok(0)
}

/// `cargo xtask bench proc`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments)?;
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let initrd = tools::build_initramfs()?;
    let mut reef_runs = Vec::new();
    let mut linux_runs = Vec::new();
    let mut boot_to_init = Vec::new();
    let mut tsc_hz = 0.0;
    for run in 1..=options.runs {
        eprintln!("xtask: run {run}/{}: procbench on Reef core 1 (2 cores, {})", options.runs, options.accel.name());
        let mut machine = Machine::new(2);
        machine.accel = options.accel;
        machine.initrd = Some(initrd.clone());
        machine.kernel_args = qemu::exec_argument("on 1 /bin/procbench")?;
        machine.timeout = Duration::from_secs(900);
        let (outcome, _) = qemu::boot(&machine, &kernel, None)?;
        let figures = parse(&outcome.serial);
        if figures.is_empty() {
            return Err(format!("procbench printed no figures on Reef; serial log:\n{}", outcome.serial));
        }
        tsc_hz = config(&outcome.serial).get("tsc_hz").and_then(Value::as_f64).unwrap_or(tsc_hz);
        reef_runs.push(figures);

        let mut machine = Machine::new(4);
        machine.accel = options.accel;
        machine.initrd = Some(initrd.clone());
        // Started by the user shell, so the figure includes starting init and sh first.
        machine.kernel_args = qemu::exec_argument("/sbin/init --every-core")?;
        let (outcome, _) = qemu::boot(&machine, &kernel, None)?;
        let after = outcome.serial.lines().find_map(|l| {
            l.strip_prefix("init: running on every core (4) after ")?.split_whitespace().next()?.parse::<f64>().ok()
        });
        match after {
            Some(ms) => boot_to_init.push(ms),
            None => eprintln!("xtask: init did not report running on every core; serial:\n{}", outcome.serial),
        }
        if options.vs_linux {
            eprintln!("xtask: run {run}/{}: procbench in the Linux guest (2 cores)", options.runs);
            linux_runs.push(linux_run(options.accel)?);
        }
    }
    let mut table = Map::new();
    let mut groups = Vec::new();
    let mut reef_values = Vec::new();
    let mut linux_values = Vec::new();
    println!("figure                 Reef median     Linux median    ratio   goal   (TCG figures; medians over runs)");
    for (name, goal, what) in FIGURES {
        let reef = median_of(reef_runs.iter().filter_map(|f| median_ns(f, name)).collect());
        let linux = median_of(linux_runs.iter().filter_map(|(f, _, _)| median_ns(f, name)).collect());
        let ratio = match (reef, linux) {
            (Some(r), Some(l)) if l > 0.0 => Some(r / l),
            _ => None,
        };
        let text = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} ns"));
        println!(
            "{name:<22} {:>14} {:>14} {:>8} {:>6}",
            text(reef),
            text(linux),
            ratio.map_or("-".into(), |r| format!("{r:.2}")),
            goal.map_or("report".into(), |g| format!("<={g}"))
        );
        table.insert(
            name.to_string(),
            json!({ "what": what, "reef_median_ns": reef, "linux_median_ns": linux, "ratio": ratio, "goal_ratio": goal,
                    "reef_runs": reef_runs.iter().map(|f| f.get(name).cloned().unwrap_or(Value::Null)).collect::<Vec<_>>(),
                    "linux_runs": linux_runs.iter().map(|(f, _, _)| f.get(name).cloned().unwrap_or(Value::Null)).collect::<Vec<_>>() }),
        );
        if let (Some(r), Some(l)) = (reef, linux) {
            groups.push(name.to_string());
            reef_values.push(r);
            linux_values.push(l);
        }
    }
    let other = median_of(reef_runs.iter().filter_map(|f| median_ns(f, "spawn-other-core")).collect());
    let same = median_of(reef_runs.iter().filter_map(|f| median_ns(f, "spawn-same-core")).collect());
    let spawn_ratio = match (other, same) {
        (Some(o), Some(s)) if s > 0.0 => Some(o / s),
        _ => None,
    };
    let boot = median_of(boot_to_init.clone());
    println!(
        "spawn on another core / same core: {}  (goal <= 2)",
        spawn_ratio.map_or("-".into(), |r| format!("{r:.2}"))
    );
    println!(
        "boot to /sbin/init on every core (4 cores): {} (goal < 150 ms; {BOOT_TO_INIT_PATH})",
        boot.map_or("-".into(), |b| format!("{b:.1} ms"))
    );
    let results = json!({
        "benchmark": "proc",
        "accelerator": options.accel.name(),
        "tsc_hz": tsc_hz,
        "core_pair": { "procbench": 1, "other_core": 0, "cores": 2 },
        "runs": options.runs,
        "linux": linux_runs.first().map(|(_, c, v)| json!({ "kernel_version": v, "config": c })),
        "figures": table,
        "spawn_other_over_same_core": spawn_ratio,
        "boot_to_init_every_core_ms": { "median": boot, "runs": boot_to_init, "path": BOOT_TO_INIT_PATH },
    });
    let directory = tools::root().join("results");
    std::fs::create_dir_all(&directory).map_err(|e| e.to_string())?;
    let path = directory.join("proc.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    if !groups.is_empty() {
        let png = directory.join("proc.png");
        match crate::bench::plot::grouped_bar_chart(
            &png,
            &format!("process benchmarks, median ({})", options.accel.name()),
            "ns",
            &groups,
            &["Reef".to_string(), "Linux".to_string()],
            &[reef_values, linux_values],
            true,
        ) {
            Ok(()) => println!("wrote {}", png.display()),
            Err(error) => eprintln!("xtask: no plot: {error}"),
        }
    }
    Ok(0)
}
