//! `cargo xtask bench cores` and `peer cores`: stopping and starting a core (Barrelfish/DC
//! table 2) with `user/corebench`: on Reef by Linux's `cpuN/online` switch and by the boot
//! driver, in the Linux guest by its CPU hotplug; idle, then with every other core loaded.

use crate::bench::common::LINUX_KERNEL_ARGUMENTS;
use crate::bench::common::{self, time_text};
use crate::bench::figure_lines::{self, Record, Report, NO_LABEL};
use crate::bench::peer;
use crate::bench::plot;
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// Cores of both guests: the same QEMU setup, so Linux's offline has as many CPUs to stop
/// (`stop_machine`) as Reef has kernel instances that go on running.
const CORES: usize = 4;
const DEFAULT_CORE: usize = 1;
const DEFAULT_RUNS: usize = 20;
const MAX_RUNS: usize = 1000;
/// How long one guest may run: under TCG a Linux offline or online takes some 40 ms idle, and
/// more loaded, so 1000 runs of both, twice, are minutes.
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);
/// corebench's lines, and its own complaints.
const TAG: &str = "COREBENCH";
const PROGRAM: &str = "corebench";
const RESULTS_FILE: &str = "cores.json";
const LINUX_RESULTS_FILE: &str = "linux-cores.json";
const BENCH_USAGE: &str =
    "bench cores [--runs N] [--core N] [--image PATH]... [--park HOST | --no-park] [--accel kvm|tcg]";
const PEER_USAGE: &str = "peer cores [--runs N] [--core N] [--accel kvm|tcg]";
const WHAT: &str = "time to stop and start a core (Barrelfish/DC table 2), timed with the TSC by user/corebench \
                    around the call, N runs each after one untimed: 0 or 1 written to \
                    /sys/devices/system/cpu/cpuN/online (both systems), and on Reef the boot driver's reef_core \
                    stop and start (image cached and not), with the kernel's driver and target parts; idle, then \
                    with a busy loop on every other online core";

/// A Reef figure set against a Linux one: both `call` parts (what a caller sees), as medians.
struct Comparison {
    what: &'static str,
    reef: &'static str,
    /// `booted` for the boot driver's figures, `-` for the `online` file's.
    reef_image: &'static str,
    linux: &'static str,
    /// The goal: Reef at least this many times faster.
    goal_times_faster: Option<f64>,
}

const COMPARISONS: [Comparison; 4] = [
    Comparison {
        what: "core stop (reef_core) / Linux CPU offline",
        reef: "stop",
        reef_image: "booted",
        linux: "offline",
        goal_times_faster: Some(1000.0),
    },
    Comparison {
        what: "core start, image cached (reef_core) / Linux CPU online",
        reef: "start-cached",
        reef_image: "booted",
        linux: "online",
        goal_times_faster: Some(10.0),
    },
    Comparison {
        what: "offline by cpuN/online / Linux's (same write)",
        reef: "offline",
        reef_image: "-",
        linux: "offline",
        goal_times_faster: None,
    },
    Comparison {
        what: "online by cpuN/online / Linux's (same write)",
        reef: "online",
        reef_image: "-",
        linux: "online",
        goal_times_faster: None,
    },
];

#[derive(Debug, PartialEq)]
struct Options {
    runs: usize,
    core: usize,
    accel: Accel,
    /// Reef: the kernel images the boot driver starts the core with (corebench's `--image`).
    images: Vec<String>,
    /// Reef: the core restarted with `/boot/multi` to park the measured core on (`--park`;
    /// by default the core after it, never core 0; `--no-park`: none).
    park: Option<usize>,
}

fn parse_options(arguments: &[String], usage: &str, images_allowed: bool) -> Result<Options, String> {
    let mut options =
        Options { runs: DEFAULT_RUNS, core: DEFAULT_CORE, accel: Accel::detect(), images: Vec::new(), park: None };
    let mut no_park = false;
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--runs" => options.runs = common::number_option(word, words.next(), 1..=MAX_RUNS)?,
            "--core" => options.core = common::number_option(word, words.next(), 1..=CORES - 1)?,
            "--accel" => options.accel = Accel::parse(words.next().ok_or("--accel takes kvm or tcg")?)?,
            "--image" if images_allowed => {
                let image = words.next().ok_or("--image takes a path in Reef's file system, or `booted`")?;
                // One word of the guest's shell line, which a quote or a space would split.
                if image.is_empty() || image.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                    return Err(format!("--image takes one word without quotes, not `{image}`"));
                }
                options.images.push(image.clone());
            }
            "--park" if images_allowed => {
                options.park = Some(common::number_option(word, words.next(), 1..=CORES - 1)?)
            }
            "--no-park" if images_allowed => no_park = true,
            other => return Err(format!("unknown option `{other}`: {usage}")),
        }
    }
    if options.park == Some(options.core) {
        return Err(format!("--park names the host, another core than --core {}: {usage}", options.core));
    }
    if no_park {
        options.park = None;
    } else if images_allowed && options.park.is_none() {
        // The next core that is neither core 0 (the shell's, which cannot restart) nor the
        // measured one.
        options.park = Some(options.core % (CORES - 1) + 1);
    }
    Ok(options)
}

/// The guest's shell line: corebench idle, then loaded, whatever the first one gave.
fn command_line(options: &Options) -> String {
    let mut arguments = format!("--runs {} --core {}", options.runs, options.core);
    for image in &options.images {
        arguments += &format!(" --image {image}");
    }
    match options.park {
        // The host runs the multi image; core 0 (the shell's) cannot be restarted.
        Some(host) => format!(
            "core restart {host} /boot/multi; /bin/{PROGRAM} {arguments} --park {host}; \
             /bin/{PROGRAM} {arguments} --park {host} --load"
        ),
        None => format!("/bin/{PROGRAM} {arguments}; /bin/{PROGRAM} {arguments} --load"),
    }
}

/// The figures, or why there are none: the guest's error lines, what the shell said, a
/// timeout, else the end of the serial log.
fn measured(report: &Report, timed_out: bool, serial: &str) -> Result<(), String> {
    if !report.records.is_empty() {
        return Ok(());
    }
    let mut reasons: Vec<String> = Vec::new();
    // Each once: the idle and the loaded run of a kernel that cannot stop a core say the same.
    for reason in
        report.errors.iter().map(|error| format!("{TAG}-ERROR {error}")).chain(report.shell_errors.iter().cloned())
    {
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    if timed_out {
        reasons.push(format!("the guest timed out after {} s", RUN_TIMEOUT.as_secs()));
    }
    if reasons.is_empty() {
        let lines: Vec<&str> = serial.lines().collect();
        reasons.push(format!(
            "it printed nothing; the serial log ends:\n{}",
            lines[lines.len().saturating_sub(20)..].join("\n")
        ));
    }
    Err(format!("{PROGRAM} measured nothing:\n  {}", reasons.join("\n  ")))
}

/// The results file's common part; each side adds its own.
fn results_json(benchmark: &str, os: &str, options: &Options, report: &Report, timed_out: bool) -> Value {
    json!({
        "benchmark": benchmark,
        "what": WHAT,
        "os": os,
        "accelerator": options.accel.name(),
        "guest_cores": CORES,
        "core": options.core,
        "runs": options.runs,
        "tsc_hz": report.tsc_hz.get(NO_LABEL),
        "command_line": command_line(options),
        "figures": report.records.iter().map(Record::json).collect::<Vec<_>>(),
        "skips": report.skips,
        "errors": report.errors,
        "shell_errors": report.shell_errors,
        "corebench_runs_finished": report.done.len(),
        "timed_out": timed_out,
    })
}

/// The figure of `figures` (a results file's) with every `(key, value)` of `wanted`.
fn find<'a>(figures: &'a [Value], wanted: &[(&str, &str)]) -> Option<&'a Value> {
    figures.iter().find(|figure| wanted.iter().all(|(key, value)| figure[*key].as_str() == Some(*value)))
}

/// The median of a figure's `call` part, in ns.
fn call_median_ns(figures: &[Value], figure: &str, load: &str, image: &str) -> Option<f64> {
    find(figures, &[("figure", figure), ("part", "call"), ("load", load), ("image", image)])?["median_ns"].as_f64()
}

/// How a load word reads in a table.
fn load_name(load: &str) -> &'static str {
    if load == "yes" {
        "loaded"
    } else {
        "idle"
    }
}

/// Every comparison, idle and loaded: the medians, Reef / Linux, and the goal's verdict.
fn ratios(reef: &[Value], linux: &[Value]) -> Vec<Value> {
    let mut rows = Vec::new();
    for load in ["no", "yes"] {
        for comparison in &COMPARISONS {
            let reef_ns = call_median_ns(reef, comparison.reef, load, comparison.reef_image);
            let linux_ns = call_median_ns(linux, comparison.linux, load, "-");
            let ratio = match (reef_ns, linux_ns) {
                (Some(reef), Some(linux)) if reef > 0.0 && linux > 0.0 => Some(reef / linux),
                _ => None,
            };
            let verdict = match (comparison.goal_times_faster, ratio) {
                (None, _) => "no goal",
                (Some(_), None) => "not measured",
                (Some(goal), Some(ratio)) if 1.0 / ratio >= goal => "met",
                (Some(_), Some(_)) => "not met",
            };
            rows.push(json!({
                "what": comparison.what, "load": load_name(load), "reef_figure": comparison.reef,
                "linux_figure": comparison.linux, "reef_median_ns": reef_ns, "linux_median_ns": linux_ns,
                "reef_over_linux": ratio, "times_faster": ratio.map(|ratio| 1.0 / ratio),
                "goal_times_faster": comparison.goal_times_faster, "verdict": verdict,
            }));
        }
    }
    rows
}

fn print_ratios(rows: &[Value]) {
    println!("Reef / Linux, medians of the call as corebench timed it (the issue's goals: Reef so many times faster):");
    for row in rows {
        let number = |key: &str| row[key].as_f64();
        let goal = number("goal_times_faster").map_or(String::new(), |goal| format!("goal >= {goal}x: "));
        println!(
            "  {:<7} {:<56} {:>10} {:>10} {:>10} {:>10}  {goal}{}",
            row["load"].as_str().unwrap_or("?"),
            row["what"].as_str().unwrap_or("?"),
            time_text(number("reef_median_ns")),
            time_text(number("linux_median_ns")),
            number("reef_over_linux").map_or("-".into(), |ratio| format!("{ratio:.2e}")),
            number("times_faster").map_or("-".into(), |times| format!("{times:.0}x")),
            row["verdict"].as_str().unwrap_or("?"),
        );
    }
}

/// The table of every figure line.
fn print_figures(title: &str, report: &Report) {
    println!("{title}");
    println!(
        "  {:<15} {:<7} {:<7} {:<12} {:>6} {:>12} {:>12} {:>12}",
        "figure", "part", "load", "image", "runs", "median", "p5", "p95"
    );
    for record in &report.records {
        println!(
            "  {:<15} {:<7} {:<7} {:<12} {:>6} {:>12} {:>12} {:>12}",
            record.text("figure"),
            record.text("part"),
            load_name(record.text("load")),
            record.text("image"),
            record.text("runs"),
            time_text(record.number("median_ns")),
            time_text(record.number("p5_ns")),
            time_text(record.number("p95_ns")),
        );
    }
    for line in report
        .skips
        .iter()
        .map(|skip| format!("skipped: {skip}"))
        .chain(report.errors.iter().map(|error| format!("error: {error}")))
    {
        println!("  {line}");
    }
}

/// A bar per figure and part (median, p5-p95 whisker, ms) into `path`; `call` goes unsaid.
fn plot_figures(path: &Path, title: &str, figures: &[Value]) {
    let ms = |figure: &Value, key: &str| figure[key].as_f64().map(|ns| ns / 1e6);
    let bars: Vec<plot::BarEntry> = figures
        .iter()
        .filter_map(|figure| {
            let part = figure["part"].as_str().filter(|part| *part != "call");
            let image = figure["image"].as_str().filter(|image| !matches!(*image, "-" | "booted"));
            let label = format!(
                "{}{} {}{}",
                figure["figure"].as_str()?,
                part.map_or(String::new(), |part| format!(" {part}")),
                load_name(figure["load"].as_str()?),
                image.map_or(String::new(), |image| format!(" {image}"))
            );
            Some((label, ms(figure, "median_ns")?, ms(figure, "p5_ns").zip(ms(figure, "p95_ns"))))
        })
        .collect();
    match plot::bar_chart(path, title, "ms (log)", &bars, true) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(error) => println!("no plot {}: {error}", path.display()),
    }
}

/// Reef's and Linux's medians side by side, for every comparison both measured.
fn plot_ratios(path: &Path, title: &str, rows: &[Value]) {
    let mut groups = Vec::new();
    let mut values = vec![Vec::new(), Vec::new()];
    for row in rows {
        if let (Some(reef), Some(linux)) = (row["reef_median_ns"].as_f64(), row["linux_median_ns"].as_f64()) {
            groups.push(format!(
                "{} / {} {}",
                row["reef_figure"].as_str().unwrap_or("?"),
                row["linux_figure"].as_str().unwrap_or("?"),
                row["load"].as_str().unwrap_or("?")
            ));
            values[0].push(reef / 1e6);
            values[1].push(linux / 1e6);
        }
    }
    match plot::grouped_bar_chart(
        path,
        title,
        "ms (log)",
        &groups,
        &["Reef".to_string(), "Linux".to_string()],
        &values,
        true,
    ) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(error) => println!("no plot {}: {error}", path.display()),
    }
}

/// 0 when every figure was measured, 1 when some failed or the guest timed out (what was
/// measured is in the results all the same).
fn status(report: &Report, timed_out: bool) -> u8 {
    u8::from(!report.errors.is_empty() || timed_out)
}

/// `results/linux-cores.json`, if `peer cores` wrote one that reads.
fn linux_results() -> Option<Value> {
    let path = tools::root().join("results").join(LINUX_RESULTS_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    match serde_json::from_str(&text) {
        Ok(results) => Some(results),
        Err(error) => {
            println!("{} does not read ({error}): no ratios", path.display());
            None
        }
    }
}

/// `cargo xtask bench cores`.
pub fn bench(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments, BENCH_USAGE, true)?;
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let initrd = tools::build_initramfs()?;
    let line = command_line(&options);
    eprintln!("xtask: corebench on Reef ({CORES} cores, {}), core {}: {line}", options.accel.name(), options.core);
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.initrd = Some(initrd);
    machine.kernel_args = qemu::exec_argument(&line)?;
    machine.timeout = RUN_TIMEOUT;
    let (outcome, _) = qemu::boot(&machine, &kernel, None)?;
    let report = figure_lines::parse(&outcome.serial, TAG, PROGRAM);
    measured(&report, outcome.timed_out, &outcome.serial)?;
    print_figures(&format!("Reef, core {} of {CORES} ({}):", options.core, options.accel.name()), &report);
    let mut results = results_json("cores", "reef", &options, &report, outcome.timed_out);
    results["guest_exit_status"] = json!(outcome.guest_status);
    let mut rows = Vec::new();
    if let Some(linux) = linux_results() {
        if linux["accelerator"] != results["accelerator"] || linux["core"] != results["core"] {
            println!(
                "note: the Linux figures are of core {} under {}, these of core {} under {}: unlike machines",
                linux["core"], linux["accelerator"], results["core"], results["accelerator"]
            );
        }
        let empty = Vec::new();
        rows = ratios(results["figures"].as_array().unwrap_or(&empty), linux["figures"].as_array().unwrap_or(&empty));
        print_ratios(&rows);
        results["ratios_to_linux"] = json!({
            "linux_results": format!("results/{LINUX_RESULTS_FILE}"),
            "linux_accelerator": linux["accelerator"], "linux_kernel_version": linux["kernel_version"], "rows": rows,
        });
    } else {
        println!("no results/{LINUX_RESULTS_FILE}: `cargo xtask peer cores` measures Linux, then the ratios show here");
    }
    let directory = common::write_results(&results, RESULTS_FILE)?;
    plot_figures(
        &directory.join("cores.png"),
        &format!("Reef core stop and start, median, p5-p95 ({})", options.accel.name()),
        results["figures"].as_array().map_or(&[][..], Vec::as_slice),
    );
    if !rows.is_empty() {
        plot_ratios(
            &directory.join("cores-vs-linux.png"),
            &format!("core stop and start: Reef vs Linux, median ({})", options.accel.name()),
            &rows,
        );
    }
    Ok(status(&report, outcome.timed_out))
}

/// `cargo xtask peer cores`: corebench in the Linux guest, as root.
pub fn peer(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments, PEER_USAGE, false)?;
    let bytes = tools::user_program_bytes(PROGRAM)?;
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.timeout = RUN_TIMEOUT;
    machine.kernel_args = LINUX_KERNEL_ARGUMENTS.into();
    let line = command_line(&options);
    eprintln!(
        "xtask: corebench in the Linux guest ({CORES} CPUs, {}), CPU {}: {line}",
        options.accel.name(),
        options.core
    );
    let run = peer::run_program_on(&machine, &[(PROGRAM.to_string(), bytes)], &line)?;
    let report = figure_lines::parse(&run.serial, TAG, PROGRAM);
    measured(&report, false, &run.serial)?;
    print_figures(
        &format!("Linux {} ({}), CPU {} of {CORES}:", run.kernel_version, options.accel.name(), options.core),
        &report,
    );
    let mut results = results_json("linux-cores", "linux", &options, &report, false);
    results["kernel_version"] = json!(run.kernel_version);
    results["machine"] = json!(run.machine);
    results["kernel_arguments_added"] = json!(LINUX_KERNEL_ARGUMENTS);
    let directory = common::write_results(&results, LINUX_RESULTS_FILE)?;
    plot_figures(
        &directory.join("linux-cores.png"),
        &format!("Linux CPU offline and online, median, p5-p95 ({})", options.accel.name()),
        results["figures"].as_array().map_or(&[][..], Vec::as_slice),
    );
    Ok(status(&report, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_and_the_guest_line() {
        let options = parse_options(
            &strings(&["--runs", "3", "--core", "2", "--accel", "tcg", "--image", "/boot/rt", "--no-park"]),
            BENCH_USAGE,
            true,
        )
        .unwrap();
        assert_eq!(
            options,
            Options { runs: 3, core: 2, accel: Accel::Tcg, images: vec!["/boot/rt".into()], park: None }
        );
        // Parking by default, on the next core that is neither 0 nor the measured one.
        for (core, host) in [("1", 2), ("2", 3), ("3", 1)] {
            let options = parse_options(&strings(&["--core", core]), BENCH_USAGE, true).unwrap();
            assert_eq!(options.park, Some(host), "--core {core}");
        }
        assert_eq!(
            command_line(&options),
            "/bin/corebench --runs 3 --core 2 --image /boot/rt; /bin/corebench --runs 3 --core 2 --image /boot/rt --load"
        );
        assert!(qemu::exec_argument(&command_line(&options)).is_ok());
        let parked = parse_options(&strings(&["--core", "3", "--park", "2"]), BENCH_USAGE, true).unwrap();
        assert_eq!(
            command_line(&parked),
            "core restart 2 /boot/multi; /bin/corebench --runs 20 --core 3 --park 2; \
             /bin/corebench --runs 20 --core 3 --park 2 --load"
        );
        assert!(parse_options(&strings(&["--core", "2", "--park", "2"]), BENCH_USAGE, true).is_err());
        assert!(parse_options(&strings(&["--park", "2"]), PEER_USAGE, false).is_err());
        let defaults = parse_options(&[], PEER_USAGE, false).unwrap();
        assert_eq!((defaults.runs, defaults.core, defaults.images.len()), (20, 1, 0));
        assert!(parse_options(&strings(&["--core", "0"]), BENCH_USAGE, true).unwrap_err().contains("1 to 3"));
        assert!(parse_options(&strings(&["--core", "4"]), BENCH_USAGE, true).is_err());
        assert!(parse_options(&strings(&["--runs", "0"]), BENCH_USAGE, true).is_err());
        assert!(parse_options(&strings(&["--image", "a b"]), BENCH_USAGE, true).unwrap_err().contains("one word"));
        assert!(parse_options(&strings(&["--image", "/boot/rt"]), PEER_USAGE, false)
            .unwrap_err()
            .contains("peer cores"));
    }

    const LINUX_SERIAL: &str = "\
PEER boot kernel=6.1.0-40-amd64 cpus=4
COREBENCH-CONFIG tsc_hz=2000000000 os=linux core=0 target=1 runs=3 load=no loaded=- images=-
COREBENCH figure=offline target=1 load=no image=- part=call runs=3 tsc_hz=2000000000 unit=ns median_ns=40000000.0 p5_ns=38000000.0 p95_ns=45000000.0 min_ns=38000000.0 max_ns=45000000.0 median_cycles=80000000 p5_cycles=76000000 p95_cycles=90000000
[   12.5] smpboot: CPU 1 is now offline
COREBENCH figure=online target=1 load=no image=- part=call runs=3 tsc_hz=2000000000 unit=ns median_ns=33000000.0 p5_ns=30000000.0 p95_ns=36000000.0 min_ns=30000000.0 max_ns=36000000.0 median_cycles=66000000 p5_cycles=60000000 p95_cycles=72000000
COREBENCH-SKIP figure=stop target=1 load=no image=- reason=not-on-reef
COREBENCH-DONE target=1 load=no
";

    const REEF_SERIAL: &str = "\
COREBENCH-CONFIG tsc_hz=2000000000 os=reef core=0 target=1 runs=3 load=no loaded=- images=booted
COREBENCH-ERROR figure=offline target=1 load=no image=- run=warm-up: /sys/devices/system/cpu/cpu1/online: No such file or directory (os error 2)
COREBENCH figure=stop target=1 load=no image=booted part=call runs=3 tsc_hz=2000000000 unit=ns median_ns=20000.0 p5_ns=19000.0 p95_ns=30000.0
COREBENCH figure=stop target=1 load=no image=booted part=stop runs=3 tsc_hz=2000000000 unit=ns median_ns=15000.0 p5_ns=14000.0 p95_ns=16000.0
COREBENCH figure=start-cached target=1 load=no image=booted part=call runs=3 tsc_hz=2000000000 unit=ns median_ns=5000000.0 p5_ns=4000000.0 p95_ns=6000000.0
COREBENCH-DONE target=1 load=no
";

    fn options() -> Options {
        Options { runs: 3, core: 1, accel: Accel::Tcg, images: Vec::new(), park: None }
    }

    #[test]
    fn results_carry_every_figure_with_its_percentiles() {
        let report = figure_lines::parse(LINUX_SERIAL, TAG, PROGRAM);
        measured(&report, false, LINUX_SERIAL).unwrap();
        let results = results_json("linux-cores", "linux", &options(), &report, false);
        assert_eq!(results["accelerator"], "tcg");
        assert_eq!((results["core"].as_u64(), results["guest_cores"].as_u64()), (Some(1), Some(4)));
        assert_eq!(results["tsc_hz"], 2e9);
        assert_eq!(results["corebench_runs_finished"], 1);
        let figures = results["figures"].as_array().unwrap();
        assert_eq!(figures.len(), 2);
        let offline = &figures[0];
        assert_eq!(
            (offline["figure"].as_str(), offline["part"].as_str(), offline["load"].as_str()),
            (Some("offline"), Some("call"), Some("no"))
        );
        assert_eq!(
            (offline["median_ns"].as_f64(), offline["p5_ns"].as_f64(), offline["p95_ns"].as_f64()),
            (Some(4e7), Some(3.8e7), Some(4.5e7))
        );
        assert_eq!(
            (offline["median_cycles"].as_f64(), offline["target"].as_f64(), offline["tsc_hz"].as_f64()),
            (Some(8e7), Some(1.0), Some(2e9))
        );
        assert_eq!(results["skips"][0], "figure=stop target=1 load=no image=- reason=not-on-reef");
        assert_eq!((status(&report, false), status(&report, true)), (0, 1));
        assert_eq!(call_median_ns(figures, "online", "no", "-"), Some(3.3e7));
        assert_eq!(call_median_ns(figures, "online", "yes", "-"), None);
    }

    #[test]
    fn ratios_and_their_goals() {
        let linux =
            results_json("linux-cores", "linux", &options(), &figure_lines::parse(LINUX_SERIAL, TAG, PROGRAM), false);
        let reef_report = figure_lines::parse(REEF_SERIAL, TAG, PROGRAM);
        assert_eq!(status(&reef_report, false), 1, "a figure failed, the others are kept");
        let reef = results_json("cores", "reef", &options(), &reef_report, false);
        let rows = ratios(reef["figures"].as_array().unwrap(), linux["figures"].as_array().unwrap());
        assert_eq!(rows.len(), 8, "four comparisons, idle and loaded");
        // 20 µs against 40 ms: 2000 times faster; 5 ms against 33 ms: 6.6.
        assert_eq!(rows[0]["reef_over_linux"], 0.0005);
        assert_eq!((rows[0]["times_faster"].as_f64(), rows[0]["verdict"].as_str()), (Some(2000.0), Some("met")));
        assert_eq!(rows[1]["verdict"], "not met");
        assert_eq!((rows[2]["verdict"].as_str(), rows[2]["reef_median_ns"].as_f64()), (Some("no goal"), None));
        assert_eq!((rows[4]["load"].as_str(), rows[4]["verdict"].as_str()), (Some("loaded"), Some("not measured")));
    }

    #[test]
    fn nothing_measured_is_an_error_with_the_guests_reason() {
        let line = "COREBENCH-ERROR figure=setup target=1: this kernel offers no way to stop core 1: \
                    /sys/devices/system/cpu/cpu1/online: No such file or directory (os error 2); reef_core: \
                    Function not implemented (os error 38)\n";
        let serial = format!("{line}{line}");
        let error = measured(&figure_lines::parse(&serial, TAG, PROGRAM), false, &serial).unwrap_err();
        assert!(error.starts_with("corebench measured nothing:\n  COREBENCH-ERROR figure=setup"), "{error}");
        assert!(error.ends_with("(os error 38)"), "the idle and the loaded run's error once: {error}");
        let timed_out = measured(&Report::default(), true, "").unwrap_err();
        assert!(timed_out.contains("timed out after 1800 s"), "{timed_out}");
        let silent = measured(&Report::default(), false, "[c0 INFO ] booted\nsomething\n").unwrap_err();
        assert!(silent.contains("printed nothing") && silent.ends_with("something"), "{silent}");
    }
}
