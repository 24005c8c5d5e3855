//! `cargo xtask bench`: figures, never verdicts. Each writes JSON under `results/`.

use crate::plot::{self, Series};
use crate::qemu::{self, Accel, Machine};
use crate::stats::{summarize, to_json};
use crate::tools;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// `cargo xtask bench <what>`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    match arguments.first().map(String::as_str) {
        Some("boot") => boot(&arguments[1..]),
        Some("msg") => msg(&arguments[1..]),
        Some(other) => Err(format!("unknown benchmark `{other}`: known are boot, msg")),
        None => Err("which benchmark? `cargo xtask bench boot` or `cargo xtask bench msg`".into()),
    }
}

/// The TSC rate the guest printed at boot, in Hz.
pub fn guest_tsc_hz(serial: &str) -> Option<u64> {
    let line = serial.lines().find(|l| l.contains("] TSC "))?;
    let mhz: u64 = line.split("TSC ").nth(1)?.split_whitespace().next()?.parse().ok()?;
    Some(mhz * 1_000_000)
}

fn boot(arguments: &[String]) -> Result<u8, String> {
    let mut runs = 5;
    let mut accel = Accel::detect();
    let mut i = 0;
    while i < arguments.len() {
        match arguments[i].as_str() {
            "--runs" => {
                runs = arguments
                    .get(i + 1)
                    .and_then(|r| r.parse().ok())
                    .filter(|r| *r > 0)
                    .ok_or("--runs takes a number")?;
                i += 1;
            }
            "--accel" => {
                accel = Accel::parse(arguments.get(i + 1).ok_or("--accel needs kvm or tcg")?)?;
                i += 1;
            }
            other => return Err(format!("unknown option `{other}` for bench boot")),
        }
        i += 1;
    }
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let mut configurations = Vec::new();
    let mut bars = Vec::new();
    let mut tsc_hz = None;
    for cores in [1usize, 4] {
        let mut machine = Machine::new(cores);
        machine.accel = accel;
        machine.timeout = Duration::from_secs(30);
        let mut samples = Vec::new();
        for _ in 0..runs {
            let (outcome, prompt) = qemu::boot(&machine, &kernel, Some("reef> "))?;
            let prompt = prompt.ok_or_else(|| format!("no prompt within 30 s:\n{}", outcome.serial))?;
            tsc_hz = tsc_hz.or_else(|| guest_tsc_hz(&outcome.serial));
            samples.push(prompt.as_secs_f64() * 1000.0);
        }
        let summary = summarize(&samples).expect("runs > 0");
        println!(
            "boot to prompt, {cores} core(s), {}: median {:.1} ms (p5 {:.1}, p95 {:.1}, min {:.1}) over {runs} runs",
            accel.name(),
            summary.median,
            summary.p5,
            summary.p95,
            summary.min
        );
        bars.push((cores, summary));
        configurations.push(serde_json::json!({
            "cores": cores, "unit": "ms", "samples": samples, "summary": to_json(&summary),
        }));
    }
    let result = serde_json::json!({
        "benchmark": "boot",
        "what": "wall time from QEMU process start to the shell prompt `reef> ` on the serial port",
        "accelerator": accel.name(),
        "tsc_hz": tsc_hz,
        "runs": runs,
        "configurations": configurations,
    });
    let path = tools::root().join("results/boot.json");
    std::fs::create_dir_all(path.parent().expect("results/")).map_err(|e| e.to_string())?;
    std::fs::write(&path, serde_json::to_string_pretty(&result).expect("json")).map_err(|e| e.to_string())?;
    let bars: Vec<plot::BarEntry> =
        bars.into_iter().map(|(cores, s)| (format!("{cores} core(s)"), s.median, Some((s.p5, s.p95)))).collect();
    let png = tools::root().join("results/boot.png");
    match plot::bar_chart(&png, &format!("Boot to shell prompt ({}, median, p5-p95)", accel.name()), "ms", &bars, false)
    {
        Ok(()) => println!("xtask: wrote {} and {}", path.display(), png.display()),
        Err(e) => println!("xtask: wrote {}; no plot: {e}", path.display()),
    }
    Ok(0)
}

/// One `BENCH` line of the guest.
#[derive(Clone, Debug)]
struct Figure {
    name: String,
    parameter: String,
    pair: String,
    n: u64,
    cycles: BTreeMap<String, f64>,
}

fn parse_figures(serial: &str) -> Vec<Figure> {
    serial
        .lines()
        .filter(|l| l.starts_with("BENCH name="))
        .filter_map(|line| {
            let fields: BTreeMap<&str, &str> = line.split_whitespace().filter_map(|w| w.split_once('=')).collect();
            let mut cycles = BTreeMap::new();
            for key in ["min", "p5", "median", "p95", "max"] {
                cycles.insert(key.to_string(), fields.get(key)?.parse().ok()?);
            }
            Some(Figure {
                name: fields.get("name")?.to_string(),
                parameter: fields.get("param")?.to_string(),
                pair: fields.get("pair")?.to_string(),
                n: fields.get("n")?.parse().ok()?,
                cycles,
            })
        })
        .collect()
}

fn median(figures: &[Figure], name: &str, parameter: &str) -> Option<f64> {
    figures.iter().find(|f| f.name == name && f.parameter == parameter).map(|f| f.cycles["median"])
}

/// One boot of the guest running `msg bench`.
struct GuestRun {
    tsc_hz: f64,
    figures: Vec<Figure>,
}

impl GuestRun {
    fn ns(&self, cycles: f64) -> f64 {
        cycles * 1e9 / self.tsc_hz
    }

    fn median_ns(&self, name: &str, parameter: &str) -> Option<f64> {
        median(&self.figures, name, parameter).map(|c| self.ns(c))
    }
}

fn guest_run(machine: &Machine, kernel: &std::path::Path, first: bool) -> Result<GuestRun, String> {
    let (outcome, _) = qemu::boot(machine, kernel, None)?;
    if outcome.timed_out {
        return Err(format!("the benchmark did not finish in {:?}:\n{}", machine.timeout, outcome.serial));
    }
    for line in
        outcome.serial.lines().filter(|l| l.starts_with("BENCH-ERROR") || (first && l.starts_with("BENCH-NOTE")))
    {
        println!("{line}");
    }
    let tsc_hz = outcome
        .serial
        .lines()
        .find(|l| l.starts_with("BENCH-INFO"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("tsc_hz=")))
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("no BENCH-INFO line:\n{}", outcome.serial))?;
    Ok(GuestRun { tsc_hz, figures: parse_figures(&outcome.serial) })
}

/// A ratio the issue sets a goal for, as measured in each run.
struct Ratio {
    what: String,
    goal: f64,
    per_run: Vec<Option<f64>>,
}

fn divide(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn median_of(values: &[f64]) -> Option<f64> {
    summarize(values).map(|s| s.median)
}

/// The median over runs of one figure's per-run median, in ns.
fn across_runs(runs: &[GuestRun], name: &str, parameter: &str) -> Option<f64> {
    let values: Vec<f64> = runs.iter().filter_map(|r| r.median_ns(name, parameter)).collect();
    median_of(&values)
}

/// `cargo xtask bench msg [--cores N] [--iterations N] [--runs N] [--accel kvm|tcg] [--vs-linux]`.
fn msg(arguments: &[String]) -> Result<u8, String> {
    let mut cores = 2;
    let mut iterations = 2000u64;
    let mut runs = 3usize;
    let mut accel = Accel::detect();
    let mut vs_linux = false;
    let mut i = 0;
    while i < arguments.len() {
        let value = arguments.get(i + 1);
        match arguments[i].as_str() {
            "--cores" => {
                cores = value
                    .and_then(|v| v.parse().ok())
                    .filter(|c| (2..=16).contains(c))
                    .ok_or("--cores takes 2 to 16")?;
                i += 1;
            }
            "--iterations" => {
                iterations = value
                    .and_then(|v| v.parse().ok())
                    .filter(|n| (10..=100_000).contains(n))
                    .ok_or("--iterations takes a number from 10 to 100000 (what `msg bench` accepts)")?;
                i += 1;
            }
            "--runs" => {
                runs = value.and_then(|v| v.parse().ok()).filter(|n| *n >= 1).ok_or("--runs takes a number >= 1")?;
                i += 1;
            }
            "--accel" => {
                accel = Accel::parse(value.ok_or("--accel needs kvm or tcg")?)?;
                i += 1;
            }
            "--vs-linux" => vs_linux = true,
            other => return Err(format!("unknown option `{other}` for bench msg")),
        }
        i += 1;
    }
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let mut machine = Machine::new(cores);
    machine.accel = accel;
    machine.timeout = Duration::from_secs(900);
    machine.kernel_args = qemu::exec_argument(&format!("msg bench 1 {iterations}"));
    let mut results: Vec<GuestRun> = Vec::new();
    // With --vs-linux, a Linux boot follows each Reef boot, so each per-run ratio compares
    // two guests the host ran minutes apart at most, and the Linux side is a median too.
    let mut linux_runs: Vec<Value> = Vec::new();
    for run in 0..runs {
        let result = guest_run(&machine, &kernel, run == 0)?;
        if vs_linux {
            linux_runs.push(crate::peer::linux_msg_results(accel, cores)?);
        }
        println!(
            "run {}: cache line {:.0} ns, polled URPC {:.0} ns, raw IPI {:.0} ns, IPI-notified {:.0} ns (round-trip medians)",
            run + 1,
            result.median_ns("cacheline_roundtrip", "-").unwrap_or(f64::NAN),
            result.median_ns("message_roundtrip", "poll").unwrap_or(f64::NAN),
            result.median_ns("ipi_roundtrip", "-").unwrap_or(f64::NAN),
            result.median_ns("message_roundtrip", "ipi").unwrap_or(f64::NAN),
        );
        results.push(result);
    }
    let last = results.last().expect("runs >= 1");
    println!(
        "Reef messaging, last run, {} cores, {}, TSC {:.0} MHz, medians (p5..p95):",
        cores,
        accel.name(),
        last.tsc_hz / 1e6
    );
    for f in &last.figures {
        println!(
            "  {:<28} {:<7} pair {} {:>10.0} cycles {:>9.0} ns  ({:.0}..{:.0})",
            f.name,
            f.parameter,
            f.pair,
            f.cycles["median"],
            last.ns(f.cycles["median"]),
            last.ns(f.cycles["p5"]),
            last.ns(f.cycles["p95"])
        );
    }
    let last_group = last
        .figures
        .iter()
        .filter(|f| f.name == "multicast_insert_cost")
        .filter_map(|f| f.parameter.parse::<u64>().ok())
        .max()
        .unwrap_or(1)
        .to_string();
    let per_run = |f: &dyn Fn(&GuestRun) -> Option<f64>| results.iter().map(f).collect::<Vec<_>>();
    let mut ratios = vec![
        Ratio {
            what: "URPC polled round trip / raw cache-line round trip".into(),
            goal: 1.25,
            per_run: per_run(&|r| {
                divide(r.median_ns("message_roundtrip", "poll"), r.median_ns("cacheline_roundtrip", "-"))
            }),
        },
        Ratio {
            what: "IPI-notified round trip / raw IPI round trip".into(),
            goal: 1.3,
            per_run: per_run(&|r| divide(r.median_ns("message_roundtrip", "ipi"), r.median_ns("ipi_roundtrip", "-"))),
        },
        Ratio {
            what: if last_group == "1" {
                "multicast insert cost, N-1 members / 1 (needs --cores 3 or more)".to_string()
            } else {
                format!("multicast insert cost, {last_group} members / 1 member")
            },
            goal: 1.5,
            per_run: per_run(&|r| {
                if last_group == "1" {
                    return None;
                }
                divide(r.median_ns("multicast_insert_cost", &last_group), r.median_ns("multicast_insert_cost", "1"))
            }),
        },
    ];
    // The raw mechanisms over the Linux figure: what no channel built on them can go below.
    let mut floors: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    let mut linux = Value::Null;
    if vs_linux {
        let linux_run_ns = |run: &Value, name: &str| run["benchmarks"][name]["ns"]["median"].as_f64();
        let linux_ns =
            |name: &str| median_of(&linux_runs.iter().filter_map(|run| linux_run_ns(run, name)).collect::<Vec<_>>());
        let fastest = ["pipe", "eventfd", "futex"]
            .iter()
            .filter_map(|b| linux_ns(b).map(|v| (*b, v)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        for (name, _) in fastest.iter() {
            let list: Vec<String> = linux_runs
                .iter()
                .map(|run| linux_run_ns(run, name).map_or("n/a".into(), |v| format!("{v:.0}")))
                .collect();
            println!("Linux {name} round trip per run, ns: {}", list.join(" "));
        }
        println!("Reef and Linux side by side, medians over {runs} runs of each, round trips in ns:");
        println!("  {:<44} {:>10} {:>10} {:>8}", "mechanism", "Reef", "Linux", "ratio");
        let reef_ipi = across_runs(&results, "message_roundtrip", "ipi");
        let rows = [
            ("cache-line round trip", across_runs(&results, "cacheline_roundtrip", "-"), linux_ns("cacheline")),
            ("URPC ring round trip, polled", across_runs(&results, "message_roundtrip", "poll"), linux_ns("urpc")),
            ("notified: Reef IPI / Linux futex", reef_ipi, linux_ns("futex")),
            ("notified: Reef IPI / Linux eventfd", reef_ipi, linux_ns("eventfd")),
            ("notified: Reef IPI / Linux pipe", reef_ipi, linux_ns("pipe")),
        ];
        let mut table = Vec::new();
        for (what, reef, other) in rows {
            let ratio = divide(reef, other);
            println!(
                "  {what:<44} {:>10} {:>10} {:>8}",
                reef.map_or("n/a".into(), |v| format!("{v:.0}")),
                other.map_or("n/a".into(), |v| format!("{v:.0}")),
                ratio.map_or("n/a".into(), |r| format!("{r:.3}"))
            );
            table.push(json!({ "mechanism": what, "reef_ns": reef, "linux_ns": other, "ratio": ratio }));
        }
        if let Some((name, _)) = fastest {
            // Reef run i against the Linux run booted right after it.
            let against_linux = |figure: &str, parameter: &str| -> Vec<Option<f64>> {
                results
                    .iter()
                    .zip(&linux_runs)
                    .map(|(reef, other)| divide(reef.median_ns(figure, parameter), linux_run_ns(other, name)))
                    .collect()
            };
            ratios.push(Ratio {
                what: format!("Reef IPI-notified round trip / Linux {name} (fastest blocking)"),
                goal: 0.1,
                per_run: against_linux("message_roundtrip", "ipi"),
            });
            ratios.push(Ratio {
                what: format!("Reef polled round trip / Linux {name} (fastest blocking)"),
                goal: 0.01,
                per_run: against_linux("message_roundtrip", "poll"),
            });
            floors.push((
                format!("raw IPI round trip / Linux {name} (floor of the 0.1 goal)"),
                against_linux("ipi_roundtrip", "-"),
            ));
            floors.push((
                format!("raw cache-line round trip / Linux {name} (floor of the 0.01 goal)"),
                against_linux("cacheline_roundtrip", "-"),
            ));
        }
        let side_by_side = json!(table);
        let groups: Vec<String> = ["cache line", "polled ring", "notified"].iter().map(|s| s.to_string()).collect();
        let reef_values = vec![rows[0].1.unwrap_or(0.0), rows[1].1.unwrap_or(0.0), reef_ipi.unwrap_or(0.0)];
        let linux_values =
            vec![linux_ns("cacheline").unwrap_or(0.0), linux_ns("urpc").unwrap_or(0.0), fastest.map_or(0.0, |f| f.1)];
        let path = tools::root().join("results/msg_vs_linux.png");
        if let Err(e) = plot::grouped_bar_chart(
            &path,
            "Round trips: Reef vs Linux guest (median)",
            "ns (log)",
            &groups,
            &["Reef".to_string(), "Linux".to_string()],
            &[reef_values, linux_values],
            true,
        ) {
            println!("xtask: no plot {}: {e}", path.display());
        }
        linux = json!({ "runs": linux_runs, "side_by_side": side_by_side });
    }
    println!("Ratios, each measured inside one run (runs: {runs}):");
    let mut ratio_json = Vec::new();
    for ratio in &ratios {
        let values: Vec<f64> = ratio.per_run.iter().flatten().copied().collect();
        let middle = median_of(&values);
        let reached = middle.map(|m| m <= ratio.goal);
        let list: Vec<String> = ratio.per_run.iter().map(|v| v.map_or("n/a".into(), |v| format!("{v:.3}"))).collect();
        println!(
            "  {:<66} median {:>7}  goal <= {:<5} {}   (runs: {})",
            ratio.what,
            middle.map_or("n/a".into(), |m| format!("{m:.3}")),
            ratio.goal,
            match reached {
                Some(true) => "reached",
                Some(false) => "NOT reached",
                None => "not measured",
            },
            list.join(" ")
        );
        ratio_json.push(json!({
            "what": ratio.what, "goal_at_most": ratio.goal, "per_run": ratio.per_run,
            "median": middle, "reached": reached,
        }));
    }
    let mut floor_json = Vec::new();
    if !floors.is_empty() {
        println!("Floors: the raw mechanism alone against Linux, in the same runs (no goal; a channel adds to these):");
    }
    for (what, per_run) in &floors {
        let middle = median_of(&per_run.iter().flatten().copied().collect::<Vec<_>>());
        let list: Vec<String> = per_run.iter().map(|v| v.map_or("n/a".into(), |v| format!("{v:.3}"))).collect();
        println!(
            "  {what:<66} median {:>7}   (runs: {})",
            middle.map_or("n/a".into(), |m| format!("{m:.3}")),
            list.join(" ")
        );
        floor_json.push(json!({ "what": what, "per_run": per_run, "median": middle }));
    }
    let runs_json: Vec<Value> = results
        .iter()
        .map(|run| {
            let figures: Vec<Value> = run
                .figures
                .iter()
                .map(|f| {
                    let in_ns: BTreeMap<String, f64> =
                        f.cycles.iter().map(|(k, v)| (k.clone(), (run.ns(*v) * 10.0).round() / 10.0)).collect();
                    json!({ "name": f.name, "parameter": f.parameter, "core_pair": f.pair, "n": f.n,
                            "cycles": f.cycles, "ns": in_ns })
                })
                .collect();
            json!({ "tsc_hz": run.tsc_hz, "figures": figures })
        })
        .collect();
    let result = json!({
        "benchmark": "msg",
        "what": "Reef inter-core messaging: raw cache line and IPI, one-line messages per notification mode, large messages, multicast, ICC (Popcorn tables 6.1-6.3, 6.9-6.11, figures 6.3-6.6)",
        "accelerator": accel.name(),
        "guest_cores": cores,
        "core_pair": "0-1 (multicast: 0 to members 1..N-1)",
        "iterations": iterations,
        "tsc_hz": last.tsc_hz,
        "runs": runs_json,
        "ratios": ratio_json,
        "floors": floor_json,
        "linux": linux,
    });
    let directory = tools::root().join("results");
    std::fs::create_dir_all(&directory).map_err(|e| e.to_string())?;
    std::fs::write(directory.join("msg.json"), serde_json::to_string_pretty(&result).expect("json"))
        .map_err(|e| e.to_string())?;
    plots(&last.figures, &directory, |c| last.ns(c));
    println!("xtask: wrote results/msg.json and results/msg_*.png (plots from the last run)");
    Ok(0)
}

fn plots(figures: &[Figure], directory: &std::path::Path, ns: impl Fn(f64) -> f64) {
    let series = |name: &str, label: &str| -> Series {
        let mut points: Vec<(f64, f64, f64, f64)> = figures
            .iter()
            .filter(|f| f.name == name)
            .filter_map(|f| {
                let x: f64 = f.parameter.parse().ok()?;
                Some((x, ns(f.cycles["median"]), ns(f.cycles["p5"]), ns(f.cycles["p95"])))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        Series {
            name: label.to_string(),
            points: points.iter().map(|p| (p.0, p.1)).collect(),
            low_high: Some(points.iter().map(|p| (p.2, p.3)).collect()),
        }
    };
    let mut errors = Vec::new();
    let large = [series("large_send_cost", "send cost"), series("large_roundtrip", "round trip")];
    if let Err(e) = plot::line_chart(
        &directory.join("msg_large.png"),
        "Large messages (Popcorn fig. 6.3)",
        "chunks",
        "ns (median, p5-p95)",
        &large,
        true,
        true,
    ) {
        errors.push(e);
    }
    let multicast = [series("multicast_insert_cost", "insertion"), series("multicast_notify_cost", "notification")];
    if let Err(e) = plot::line_chart(
        &directory.join("msg_multicast.png"),
        "Multicast sender cost vs group size (Popcorn fig. 6.6)",
        "members",
        "ns (median, p5-p95)",
        &multicast,
        false,
        false,
    ) {
        errors.push(e);
    }
    let mut bars = Vec::new();
    for f in figures.iter().filter(|f| {
        matches!(
            f.name.as_str(),
            "cacheline_roundtrip" | "ipi_roundtrip" | "message_roundtrip" | "icc_roundtrip" | "ipi_send_cost"
        )
    }) {
        let label = if f.parameter == "-" { f.name.clone() } else { format!("{} {}", f.name, f.parameter) };
        bars.push((
            label.replace("_roundtrip", " rtt"),
            ns(f.cycles["median"]),
            Some((ns(f.cycles["p5"]), ns(f.cycles["p95"]))),
        ));
    }
    if let Err(e) = plot::bar_chart(
        &directory.join("msg_roundtrips.png"),
        "Round trips and IPI cost (median, p5-p95)",
        "ns",
        &bars,
        true,
    ) {
        errors.push(e);
    }
    for e in errors {
        println!("xtask: a plot was not drawn: {e}");
    }
}
