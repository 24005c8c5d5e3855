//! `cargo xtask peer msg`: the messaging benchmarks (`linux-bench`) on the Linux guest, and
//! its figures for `cargo xtask bench msg --vs-linux`.

use crate::debian;
use crate::linux_guest::{
    boot_linux, build_linux_bench, field, fields, host_tsc_khz, kernel_arguments, machine_type, read, tail,
    BUSYBOX_APPLETS, DONE_MARKER, INIT_MARKER,
};
use crate::qemu::{Accel, Machine};
use crate::tools;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// The benchmark names, in the order linux-bench runs them.
const BENCHMARKS: [&str; 5] = ["cacheline", "urpc", "pipe", "eventfd", "futex"];

/// The results file, under the workspace root.
const RESULTS_FILE: &str = "results/linux-msg.json";

/// Set to 1 to make [`linux_results`] reuse `results/linux-msg.json` when it matches.
const REUSE_VARIABLE: &str = "REEF_PEER_REUSE";

/// How long the whole guest run may take, before the per-round allowance.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// What to run.
#[derive(Clone, Debug, PartialEq)]
struct Options {
    accel: Accel,
    /// `-smp` of the guest; the benchmarks use CPUs 0 and 1.
    cores: usize,
    /// Timed round trips per benchmark (`linux-bench --rounds`).
    rounds: usize,
    /// Print the table of the existing results file instead of running (when it matches).
    reuse: bool,
}

/// `cargo xtask peer msg [--cores N] [--runs-per-bench N] [--accel kvm|tcg] [--reuse]`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments)?;
    let results = results(&options)?;
    print_table(&results);
    Ok(0)
}

/// The Linux figures for `bench msg --vs-linux`: runs the whole peer (download on first use,
/// build, boot, parse) with the default 10 000 round trips per benchmark and writes
/// `results/linux-msg.json`. With `REEF_PEER_REUSE=1` in the environment, an existing results
/// file for the same accelerator and core count is returned instead of running again.
pub fn linux_results(accel: Accel, cores: usize) -> Result<Value, String> {
    let reuse = std::env::var(REUSE_VARIABLE).is_ok_and(|value| value == "1");
    results(&Options { accel, cores, rounds: 10_000, reuse })
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options { accel: Accel::detect(), cores: 2, rounds: 10_000, reuse: false };
    let mut position = 0;
    while position < arguments.len() {
        let flag = arguments[position].as_str();
        let value = arguments.get(position + 1).map(String::as_str);
        match flag {
            "--cores" => {
                options.cores = value
                    .and_then(|text| text.parse().ok())
                    .filter(|cores| (2..=64).contains(cores))
                    .ok_or("--cores takes a number from 2 to 64 (the benchmarks use CPUs 0 and 1)")?;
            }
            "--runs-per-bench" => {
                options.rounds = value
                    .and_then(|text| text.parse().ok())
                    .filter(|&rounds| rounds > 0)
                    .ok_or("--runs-per-bench takes a number of round trips above 0")?;
            }
            "--accel" => options.accel = Accel::parse(value.ok_or("--accel needs kvm or tcg")?)?,
            "--reuse" => {
                options.reuse = true;
                position += 1;
                continue;
            }
            other => return Err(format!("unknown option `{other}` for peer msg: see `cargo xtask help`")),
        }
        position += 2;
    }
    Ok(options)
}

/// Reuses the results file if asked and it matches, else runs the peer and writes it.
fn results(options: &Options) -> Result<Value, String> {
    let path = tools::root().join(RESULTS_FILE);
    if options.reuse {
        match reusable(&path, options) {
            Ok(results) => {
                eprintln!("xtask: reusing {}", path.display());
                return Ok(results);
            }
            Err(reason) => eprintln!("xtask: not reusing {}: {reason}; running the Linux peer", path.display()),
        }
    }
    let start = Instant::now();
    let mut results = run_peer(options)?;
    results["wall_seconds"] = json!(round_to(start.elapsed().as_secs_f64(), 1));
    std::fs::create_dir_all(path.parent().expect("results/")).map_err(|e| format!("creating results/: {e}"))?;
    std::fs::write(&path, serde_json::to_string_pretty(&results).expect("json") + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    eprintln!("xtask: wrote {} (whole run {:.1} s)", path.display(), start.elapsed().as_secs_f64());
    Ok(results)
}

/// The results file, if it was measured with the same accelerator, cores and round count.
fn reusable(path: &Path, options: &Options) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let results: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let wanted = (options.accel.name(), options.cores as u64, options.rounds as u64);
    let found = (
        results["accelerator"].as_str().unwrap_or_default(),
        results["guest_cores"].as_u64().unwrap_or_default(),
        results["rounds"].as_u64().unwrap_or_default(),
    );
    if found != wanted {
        return Err(format!("it has (accelerator, cores, rounds) = {found:?}, not {wanted:?}"));
    }
    Ok(results)
}

/// Fetches, builds, boots and parses: the whole peer run.
fn run_peer(options: &Options) -> Result<Value, String> {
    tools::ensure_qemu()?;
    let cache = debian::cache()?;
    let kernel = debian::fetch_kernel(&cache)?;
    let busybox = debian::fetch_busybox(&cache)?;
    eprintln!(
        "xtask: Linux peer: {} {} ({}), {} {}",
        kernel.package,
        kernel.version,
        kernel.file.display(),
        busybox.package,
        busybox.version
    );
    let bench = build_linux_bench()?;
    let bench_arguments = format!("--rounds {}", options.rounds);
    let initramfs = cache.join("initramfs.cpio");
    let image = initramfs_image(&read(&busybox.file)?, &read(&bench)?, &init_script(&bench_arguments));
    std::fs::write(&initramfs, image).map_err(|e| format!("writing {}: {e}", initramfs.display()))?;

    let mut machine = Machine::new(options.cores);
    machine.accel = options.accel;
    machine.kernel_args = kernel_arguments(host_tsc_khz(&bench));
    // Blocking round trips take ~70 µs each under TCG; allow 5 ms for every round trip of
    // the five benchmarks on top, which no working run comes near.
    machine.timeout = RUN_TIMEOUT + Duration::from_millis(5 * 5 * (options.rounds as u64 + 1_000));
    let reef_machine = machine_type(&machine.command(&kernel.file, false)).unwrap_or_default();

    eprintln!("xtask: booting Linux on {} cores ({}, -M {reef_machine})", options.cores, options.accel.name());
    let load_before = host_load_average();
    let (guest, used_machine, fallback_reason) = boot_linux(&machine, &kernel.file, &initramfs, &cache)?;
    let load_after = host_load_average();
    if guest.done_after.is_none() {
        return Err(format!(
            "the Linux guest did not finish ({}); serial log:\n{}",
            guest.failure_summary(),
            tail(&guest.serial, 60)
        ));
    }
    let report = parse_report(&guest.serial).map_err(|e| format!("{e}; serial log:\n{}", tail(&guest.serial, 60)))?;
    let host_cpus = std::thread::available_parallelism().map_or(0, usize::from);
    // The load before QEMU starts is the others' (after, it counts our vCPU threads too).
    if options.accel == Accel::Tcg && load_before > host_cpus.saturating_sub(options.cores) as f64 + 0.5 {
        eprintln!(
            "xtask: note: host load average {load_before:.1} -> {load_after:.1} on {host_cpus} CPUs: other work \
             competed with the {} vCPU threads, which inflates TCG figures, the blocking ones most",
            options.cores
        );
    }
    Ok(json!({
        "benchmark": "linux-msg",
        "what": "round trips between two threads of a Linux guest pinned to two CPUs, timed with RDTSC \
                 by the initiator; cacheline and urpc poll, pipe, eventfd and futex block",
        "os": "linux",
        "accelerator": options.accel.name(),
        "machine": used_machine,
        "reef_machine": reef_machine,
        "machine_fallback": fallback_reason,
        "guest_cores": options.cores,
        "memory_mib": machine.memory_mib,
        "core_pair": { "initiator": report.initiator, "responder": report.responder },
        "tsc_hz": report.tsc_hz,
        "tsc": {
            "hz": report.tsc_hz,
            "source": report.tsc_source,
            "calibrated_hz": report.tsc_calibrated_hz,
            "kernel_hz": report.tsc_kernel_hz,
            "clock_step_ns": report.clock_step_ns,
            "read_overhead_cycles": report.tsc_read_overhead,
        },
        "kernel_package": kernel.package,
        "kernel_version": kernel.version,
        "kernel_release": report.kernel_release,
        "kernel_clocksource": report.clocksource,
        "kernel_command_line": machine.kernel_args,
        "busybox_version": busybox.version,
        "rounds": options.rounds,
        "warmup": report.warmup,
        "boot_to_init_seconds": guest.init_after.map(|t| round_to(t.as_secs_f64(), 2)),
        "qemu_seconds": round_to(guest.elapsed.as_secs_f64(), 1),
        "host": { "cpus": host_cpus, "load_average_before": load_before, "load_average_after": load_after },
        "benchmarks": report.benchmarks,
        "skipped": report.skipped,
    }))
}

/// The host's one-minute load average (TCG figures depend on the host CPUs being free).
fn host_load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// `/init`: mounts the kernel file systems, says it started, runs the benchmarks, powers off.
fn init_script(bench_arguments: &str) -> String {
    format!(
        "#!/bin/sh\n\
         # Written by `cargo xtask peer`: runs linux-bench once and powers the machine off.\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev\n\
         clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)\n\
         echo \"{INIT_MARKER} kernel=$(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo) clocksource=$clocksource\"\n\
         /linux-bench {bench_arguments}\n\
         echo \"PEER exit status=$?\"\n\
         echo \"{DONE_MARKER}\"\n\
         poweroff -f\n"
    )
}

/// The initramfs: busybox and its applet links, `/init`, `/linux-bench`, and `/dev/console`
/// (the kernel opens it for init's output before anything could mount devtmpfs).
fn initramfs_image(busybox: &[u8], linux_bench: &[u8], init: &str) -> Vec<u8> {
    let mut archive = initramfs::Writer::new();
    for directory in ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root"] {
        archive.directory(directory, 0o755);
    }
    archive.character_device("dev/console", 0o600, 5, 1);
    archive.character_device("dev/null", 0o666, 1, 3);
    archive.file("bin/busybox", 0o755, busybox);
    for applet in BUSYBOX_APPLETS {
        archive.symlink(&format!("bin/{applet}"), "busybox");
    }
    archive.file("init", 0o755, init.as_bytes());
    archive.file("linux-bench", 0o755, linux_bench);
    archive.finish()
}

/// What the guest reported.
#[derive(Debug, PartialEq)]
struct Report {
    initiator: u64,
    responder: u64,
    /// The rate cycles are converted to time with, and where it came from (`clock`, `kernel`).
    tsc_hz: u64,
    tsc_source: String,
    tsc_calibrated_hz: u64,
    tsc_kernel_hz: u64,
    /// How coarse the guest's monotonic clock was.
    clock_step_ns: u64,
    tsc_read_overhead: u64,
    warmup: u64,
    kernel_release: String,
    clocksource: String,
    /// Per benchmark name: unit, n, and the statistics in cycles and in ns.
    benchmarks: Map<String, Value>,
    skipped: Vec<String>,
}

fn number(fields: &[(&str, &str)], key: &str, line: &str) -> Result<f64, String> {
    field(fields, key)
        .and_then(|value| value.parse::<f64>().ok())
        .ok_or_else(|| format!("no number `{key}=` in `{line}`"))
}

/// Parses linux-bench's lines out of the serial log (anything before `PEER` on a line, such as
/// a kernel message that got in first, is skipped).
fn parse_report(serial: &str) -> Result<Report, String> {
    let mut report = Report {
        initiator: 0,
        responder: 0,
        tsc_hz: 0,
        tsc_source: String::new(),
        tsc_calibrated_hz: 0,
        tsc_kernel_hz: 0,
        clock_step_ns: 0,
        tsc_read_overhead: 0,
        warmup: 0,
        kernel_release: String::new(),
        clocksource: String::new(),
        benchmarks: Map::new(),
        skipped: Vec::new(),
    };
    for line in serial.lines() {
        let Some(position) = line.find("PEER ") else {
            continue;
        };
        let line = line[position..].trim_end();
        let fields = fields(line);
        match line.split_whitespace().nth(1).unwrap_or_default() {
            "error" => return Err(format!("linux-bench failed: {line}")),
            "boot" => {
                report.kernel_release = field(&fields, "kernel").unwrap_or_default().to_string();
                report.clocksource = field(&fields, "clocksource").unwrap_or_default().to_string();
            }
            "start" => report.warmup = number(&fields, "warmup", line)? as u64,
            "cpus" => {
                report.initiator = number(&fields, "initiator", line)? as u64;
                report.responder = number(&fields, "responder", line)? as u64;
            }
            "tsc" => {
                report.tsc_hz = number(&fields, "hz", line)? as u64;
                report.tsc_source = field(&fields, "source").unwrap_or_default().to_string();
                report.tsc_calibrated_hz = number(&fields, "calibrated_hz", line)? as u64;
                report.tsc_kernel_hz = number(&fields, "kernel_hz", line)? as u64;
                report.clock_step_ns = number(&fields, "clock_step_ns", line)? as u64;
                report.tsc_read_overhead = number(&fields, "read_overhead", line)? as u64;
            }
            "skip" => report.skipped.push(field(&fields, "name").unwrap_or_default().to_string()),
            first if first.starts_with("name=") => {
                let name = field(&fields, "name").unwrap_or_default().to_string();
                let hz = number(&fields, "tsc_hz", line)?;
                if hz <= 0.0 {
                    return Err(format!("no TSC rate in `{line}`"));
                }
                let mut cycles = Map::new();
                let mut nanoseconds = Map::new();
                for key in ["min", "p5", "median", "p95", "max", "mean"] {
                    let value = number(&fields, key, line)?;
                    cycles.insert(key.to_string(), json!(value));
                    nanoseconds.insert(key.to_string(), json!(round_to(value * 1e9 / hz, 1)));
                }
                report.benchmarks.insert(
                    name,
                    json!({
                        "unit": field(&fields, "unit").unwrap_or("cycles"),
                        "n": number(&fields, "n", line)? as u64,
                        "cycles": cycles,
                        "ns": nanoseconds,
                    }),
                );
            }
            _ => {}
        }
    }
    if report.tsc_hz == 0 {
        return Err("linux-bench printed no `PEER tsc` line".into());
    }
    let missing: Vec<&str> = BENCHMARKS
        .into_iter()
        .filter(|name| !report.benchmarks.contains_key(*name) && !report.skipped.iter().any(|s| s == name))
        .collect();
    if !missing.is_empty() {
        return Err(format!("no results for {}", missing.join(", ")));
    }
    Ok(report)
}

/// The short table of a results file.
fn print_table(results: &Value) {
    println!(
        "Linux {} ({} {}), -M {}, {}, CPU {} -> CPU {}, TSC {:.3} GHz, {} round trips each",
        results["kernel_release"].as_str().unwrap_or("?"),
        results["kernel_package"].as_str().unwrap_or("?"),
        results["kernel_version"].as_str().unwrap_or("?"),
        results["machine"].as_str().unwrap_or("?"),
        results["accelerator"].as_str().unwrap_or("?"),
        results["core_pair"]["initiator"],
        results["core_pair"]["responder"],
        results["tsc_hz"].as_f64().unwrap_or(0.0) / 1e9,
        results["rounds"],
    );
    if let Some(reason) = results["machine_fallback"].as_str() {
        println!("note: not Reef's machine type: {reason}");
    }
    println!("{:<10} {:>12} {:>12} {:>12} {:>14}", "round trip", "median ns", "p5 ns", "p95 ns", "median cycles");
    for name in BENCHMARKS {
        let entry = &results["benchmarks"][name];
        if entry.is_null() {
            println!("{name:<10} {:>12}", "skipped");
            continue;
        }
        let value = |unit: &str, key: &str| entry[unit][key].as_f64().unwrap_or(f64::NAN);
        println!(
            "{name:<10} {:>12.1} {:>12.1} {:>12.1} {:>14.0}",
            value("ns", "median"),
            value("ns", "p5"),
            value("ns", "p95"),
            value("cycles", "median")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initramfs_has_init_console_and_shell() {
        let image = initramfs_image(b"BUSYBOX", b"BENCH", &init_script("--rounds 7"));
        let archive = initramfs::Archive::parse(&image).unwrap();
        let find = |name: &str| archive.find(name).unwrap_or_else(|| panic!("{name}"));
        let console = find("dev/console");
        assert!(console.is_character_device());
        assert_eq!((console.node_major, console.node_minor), (5, 1));
        assert_eq!(find("bin/sh").symlink_target(), Some("busybox"));
        assert_eq!(archive.resolve("/bin/sh", true).unwrap().data, b"BUSYBOX");
        assert_eq!(find("linux-bench").data, b"BENCH");
        let init = std::str::from_utf8(find("init").data).unwrap();
        assert!(init.starts_with("#!/bin/sh\n"));
        assert!(init.contains("/linux-bench --rounds 7\n"));
        assert!(init.contains("echo \"PEER done\"\n"));
        assert_eq!(find("init").mode, 0o100_755);
    }

    const SERIAL: &str = "\
[    7.1] random: crng init done
PEER boot kernel=6.1.0-56-amd64 cpus=2 clocksource=refined-jiffies
PEER start rounds=100 warmup=1000 benchmarks=cacheline,urpc,pipe,eventfd,futex
PEER cpus initiator=0 responder=1 available=2
PEER tsc hz=2000000000 source=kernel calibrated_hz=2100000000 clock_step_ns=4000000 kernel_hz=2000000000 read_overhead=30
PEER name=cacheline unit=cycles n=100 min=100 p5=110 median=120.5 p95=200 max=900 mean=130.2 tsc_hz=2000000000 initiator=0 responder=1
PEER name=urpc unit=cycles n=100 min=1 p5=2 median=3 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
noise PEER name=pipe unit=cycles n=100 min=1 p5=2 median=3 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
PEER name=eventfd unit=cycles n=100 min=1 p5=2 median=3 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
PEER name=futex unit=cycles n=100 min=1 p5=2 median=124000 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
PEER done
";

    #[test]
    fn report_from_serial() {
        let report = parse_report(SERIAL).unwrap();
        assert_eq!((report.initiator, report.responder, report.tsc_hz), (0, 1, 2_000_000_000));
        assert_eq!((report.tsc_read_overhead, report.warmup), (30, 1000));
        assert_eq!(report.kernel_release, "6.1.0-56-amd64");
        assert_eq!(report.clocksource, "refined-jiffies");
        assert_eq!((report.tsc_source.as_str(), report.tsc_calibrated_hz), ("kernel", 2_100_000_000));
        assert_eq!((report.tsc_kernel_hz, report.clock_step_ns), (2_000_000_000, 4_000_000));
        assert_eq!(report.benchmarks.len(), 5);
        let cacheline = &report.benchmarks["cacheline"];
        assert_eq!(cacheline["n"], 100);
        assert_eq!(cacheline["cycles"]["median"], 120.5);
        assert_eq!(cacheline["ns"]["median"], 60.3);
        assert_eq!(report.benchmarks["futex"]["ns"]["median"], 62_000.0);
        assert!(report.benchmarks.contains_key("pipe"), "a line with noise before PEER still counts");
    }

    #[test]
    fn report_errors_are_named() {
        let without_futex: String =
            SERIAL.lines().filter(|l| !l.contains("name=futex")).map(|l| l.to_string() + "\n").collect();
        assert_eq!(parse_report(&without_futex).unwrap_err(), "no results for futex");
        let skipped = without_futex.replace("PEER done", "PEER skip name=futex reason=needs-two-cpus");
        assert_eq!(parse_report(&skipped).unwrap().skipped, ["futex"]);
        let failed = format!("{SERIAL}PEER error urpc: ring full\n");
        assert!(parse_report(&failed).unwrap_err().contains("ring full"));
        assert!(parse_report("PEER boot kernel=x\n").unwrap_err().contains("PEER tsc"));
    }

    #[test]
    fn options() {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let options =
            parse_options(&strings(&["--cores", "4", "--runs-per-bench", "50", "--accel", "kvm", "--reuse"])).unwrap();
        assert_eq!(options, Options { accel: Accel::Kvm, cores: 4, rounds: 50, reuse: true });
        assert!(parse_options(&strings(&["--cores", "1"])).is_err());
        assert!(parse_options(&strings(&["--runs-per-bench"])).is_err());
        assert!(parse_options(&strings(&["--what"])).unwrap_err().contains("--what"));
    }
}
