//! `cargo xtask bench msg`: the channel measurements of `msg bench` in the guest, run by run,
//! their ratios, and with `--vs-linux` the Linux peer's figures beside them.

use crate::bench::plot::{self, Series};
use crate::bench::stats::summarize;
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// One `BENCH` line of the guest. The guest prints only what it measured, so every
/// statistic may be missing (a figure without samples has `n=0` and nothing else).
#[derive(Clone, Debug, PartialEq)]
struct Figure {
    name: String,
    parameter: String,
    pair: String,
    n: Option<u64>,
    /// Those of min, p5, median, p95, max the line has, in cycles.
    cycles: BTreeMap<String, f64>,
    /// For differences of two TSC readings (`negative=`): how many came out negative.
    negative: Option<u64>,
}

/// The statistics a `BENCH` line may carry.
const STATISTICS: [&str; 5] = ["min", "p5", "median", "p95", "max"];

/// The `BENCH name=` lines of a serial log; `BENCH-INFO`, `BENCH-NOTE`, `BENCH-PROGRESS` and
/// `BENCH-ERROR` lines are not figures. A line without name, param or pair is skipped; a
/// statistic that is missing or not a number is left out of that figure.
fn parse_figures(serial: &str) -> Vec<Figure> {
    serial
        .lines()
        .filter(|l| l.starts_with("BENCH name="))
        .filter_map(|line| {
            let fields: BTreeMap<&str, &str> = line.split_whitespace().filter_map(|w| w.split_once('=')).collect();
            let cycles = STATISTICS
                .iter()
                .filter_map(|key| Some((key.to_string(), fields.get(key)?.parse::<f64>().ok()?)))
                .collect();
            Some(Figure {
                name: fields.get("name")?.to_string(),
                parameter: fields.get("param")?.to_string(),
                pair: fields.get("pair")?.to_string(),
                n: fields.get("n").and_then(|n| n.parse().ok()),
                cycles,
                negative: fields.get("negative").and_then(|n| n.parse().ok()),
            })
        })
        .collect()
}

fn median(figures: &[Figure], name: &str, parameter: &str) -> Option<f64> {
    figures.iter().find(|f| f.name == name && f.parameter == parameter).and_then(|f| f.cycles.get("median").copied())
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

/// A ratio, as measured in each run: one the issue sets a goal for, or one for information.
struct Ratio {
    what: String,
    /// The goal: the median over runs at most this.
    goal: Option<f64>,
    /// `None`: like for like, the two sides do the same work apart from what is measured, on
    /// the path real callers use. Else why the ratio is information only.
    information: Option<&'static str>,
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
pub fn run(arguments: &[String]) -> Result<u8, String> {
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
                    .filter(|n| (10..=50_000).contains(n))
                    .ok_or("--iterations takes a number from 10 to 50000 (what `msg bench` accepts)")?;
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
    machine.initrd = Some(tools::build_initramfs()?);
    // `/bin/msg` runs the benchmark in the kernel of core 0, where the shell runs it.
    machine.kernel_args = qemu::exec_argument(&format!("msg bench 1 {iterations}"))?;
    let mut results: Vec<GuestRun> = Vec::new();
    // With --vs-linux, a Linux boot follows each Reef boot, so each per-run ratio compares
    // two guests the host ran minutes apart at most, and the Linux side is a median too.
    let mut linux_runs: Vec<Value> = Vec::new();
    for run in 0..runs {
        let result = guest_run(&machine, &kernel, run == 0)?;
        if vs_linux {
            linux_runs.push(crate::bench::peer::msg::linux_results(accel, cores)?);
        }
        let ns = |name: &str, parameter: &str| {
            result.median_ns(name, parameter).map_or("n/a".to_string(), |v| format!("{v:.0}"))
        };
        println!(
            "run {}: round-trip medians, ns: cache line {}, polled URPC held {} drain {}, IPI out/poll back {}, \
             notified drain {}, both asleep {}",
            run + 1,
            ns("cacheline_roundtrip", "-"),
            ns("message_roundtrip", "poll"),
            ns("message_roundtrip_drain", "poll"),
            ns("ipi_out_poll_back", "-"),
            ns("message_roundtrip_drain", "ipi"),
            ns("message_roundtrip_sleeping", "ipi"),
        );
        results.push(result);
    }
    let last = results.last().expect("runs >= 1");
    println!(
        "Reef messaging, last run, {} cores, {}, TSC {:.0} MHz, medians (p5..p95; neg: differences of two \
         cores' TSCs that came out negative):",
        cores,
        accel.name(),
        last.tsc_hz / 1e6
    );
    for f in &last.figures {
        let ns = |key: &str| f.cycles.get(key).map_or("-".to_string(), |c| format!("{:.0}", last.ns(*c)));
        println!(
            "  {:<30} {:<7} pair {} {:>10} cycles {:>9} ns  ({}..{}){}",
            f.name,
            f.parameter,
            f.pair,
            f.cycles.get("median").map_or("-".to_string(), |c| format!("{c:.0}")),
            ns("median"),
            ns("p5"),
            ns("p95"),
            f.negative.map_or(String::new(), |n| format!("  neg {n}/{}", f.n.unwrap_or(0))),
        );
    }
    let last_group = last
        .figures
        .iter()
        .filter(|f| f.name == "multicast_send_cost")
        .filter_map(|f| f.parameter.parse::<u64>().ok())
        .max()
        .unwrap_or(1)
        .to_string();
    let per_run = |f: &dyn Fn(&GuestRun) -> Option<f64>| results.iter().map(f).collect::<Vec<_>>();
    let reef_ratio = |numerator: (&'static str, &'static str), denominator: (&'static str, &'static str)| {
        per_run(&move |r: &GuestRun| {
            divide(r.median_ns(numerator.0, numerator.1), r.median_ns(denominator.0, denominator.1))
        })
    };
    let multicast_ratio = |name: &'static str| {
        per_run(&|r: &GuestRun| {
            if last_group == "1" {
                return None;
            }
            divide(r.median_ns(name, &last_group), r.median_ns(name, "1"))
        })
    };
    let members = if last_group == "1" {
        "N-1 members / 1 (needs --cores 3 or more)".to_string()
    } else {
        format!("{last_group} members / 1 member")
    };
    let mut ratios = vec![
        Ratio {
            what: "polled URPC round trip through msg::drain / raw cache-line round trip".into(),
            goal: Some(1.25),
            information: None,
            per_run: reef_ratio(("message_roundtrip_drain", "poll"), ("cacheline_roundtrip", "-")),
        },
        Ratio {
            what: "IPI-notified round trip through msg::drain / IPI out, poll back".into(),
            goal: Some(1.3),
            information: None,
            per_run: reef_ratio(("message_roundtrip_drain", "ipi"), ("ipi_out_poll_back", "-")),
        },
        Ratio {
            what: format!("multicast sender cost (insertion + notification), {members}"),
            goal: Some(1.5),
            information: None,
            per_run: multicast_ratio("multicast_send_cost"),
        },
        Ratio {
            what: "polled URPC round trip, held endpoints / raw cache-line round trip".into(),
            goal: None,
            information: Some("benchmark-only path"),
            per_run: reef_ratio(("message_roundtrip", "poll"), ("cacheline_roundtrip", "-")),
        },
        Ratio {
            what: "IPI-notified round trip, held endpoints / IPI out, poll back".into(),
            goal: None,
            information: Some("benchmark-only path"),
            per_run: reef_ratio(("message_roundtrip", "ipi"), ("ipi_out_poll_back", "-")),
        },
        Ratio {
            what: "IPI-notified round trip through msg::drain / IPI ping-pong, two interrupts".into(),
            goal: None,
            information: Some("old floor: two interrupts"),
            per_run: reef_ratio(("message_roundtrip_drain", "ipi"), ("ipi_pingpong_two_interrupts", "-")),
        },
        Ratio {
            what: format!("multicast slot insertion alone, {members}"),
            goal: None,
            information: Some("insertion alone, constant by design"),
            per_run: multicast_ratio("multicast_insert_cost"),
        },
    ];
    // The raw mechanisms over the Linux figure: what no channel built on them can go below.
    let mut floors: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    let mut linux = Value::Null;
    if vs_linux {
        let linux_run_ns = |run: &Value, name: &str| run["benchmarks"][name]["ns"]["median"].as_f64();
        let linux_ns =
            |name: &str| median_of(&linux_runs.iter().filter_map(|run| linux_run_ns(run, name)).collect::<Vec<_>>());
        for name in ["urpc", "futex"] {
            let list: Vec<String> = linux_runs
                .iter()
                .map(|run| linux_run_ns(run, name).map_or("n/a".into(), |v| format!("{v:.0}")))
                .collect();
            println!("Linux {name} round trip per run, ns: {}", list.join(" "));
        }
        println!("Reef and Linux side by side, medians over {runs} runs of each, round trips in ns:");
        println!("  {:<74} {:>10} {:>10} {:>8}", "mechanism", "Reef", "Linux", "ratio");
        let reef = |name: &str, parameter: &str| across_runs(&results, name, parameter);
        let like = [
            (
                "polled ring: Reef URPC, held endpoints vs Linux URPC (the same channel crate)",
                reef("message_roundtrip", "poll"),
                linux_ns("urpc"),
            ),
            (
                "notified, both sides asleep: Reef IPI through msg::drain vs Linux futex",
                reef("message_roundtrip_sleeping", "ipi"),
                linux_ns("futex"),
            ),
        ];
        let unlike = [
            ("cache line: Reef 8-word line vs Linux one word", reef("cacheline_roundtrip", "-"), linux_ns("cacheline")),
            (
                "polled: Reef URPC through msg::drain vs Linux URPC ring",
                reef("message_roundtrip_drain", "poll"),
                linux_ns("urpc"),
            ),
            (
                "polled: Reef URPC through msg::drain vs Linux futex (blocking)",
                reef("message_roundtrip_drain", "poll"),
                linux_ns("futex"),
            ),
            (
                "notified: Reef IPI, initiator polling, vs Linux futex",
                reef("message_roundtrip_drain", "ipi"),
                linux_ns("futex"),
            ),
            (
                "notified, both asleep: Reef IPI vs Linux eventfd",
                reef("message_roundtrip_sleeping", "ipi"),
                linux_ns("eventfd"),
            ),
            (
                "notified, both asleep: Reef IPI vs Linux pipe",
                reef("message_roundtrip_sleeping", "ipi"),
                linux_ns("pipe"),
            ),
        ];
        let mut table = Vec::new();
        for (heading, rows, like_for_like) in
            [("like for like:", &like[..], true), ("information only (not like for like):", &unlike[..], false)]
        {
            println!("  {heading}");
            for (what, reef, other) in rows {
                let ratio = divide(*reef, *other);
                println!(
                    "    {what:<72} {:>10} {:>10} {:>8}",
                    reef.map_or("n/a".into(), |v| format!("{v:.0}")),
                    other.map_or("n/a".into(), |v| format!("{v:.0}")),
                    ratio.map_or("n/a".into(), |r| format!("{r:.3}"))
                );
                table.push(json!({
                    "mechanism": what, "like_for_like": like_for_like,
                    "reef_ns": reef, "linux_ns": other, "ratio": ratio,
                }));
            }
        }
        // Reef run i against the Linux run booted right after it.
        let against_linux = |figure: &str, parameter: &str, linux_name: &str| -> Vec<Option<f64>> {
            results
                .iter()
                .zip(&linux_runs)
                .map(|(reef, other)| divide(reef.median_ns(figure, parameter), linux_run_ns(other, linux_name)))
                .collect()
        };
        ratios.push(Ratio {
            what: "Reef notified round trip, both sides asleep (msg::drain) / Linux futex".into(),
            goal: Some(0.1),
            information: None,
            per_run: against_linux("message_roundtrip_sleeping", "ipi", "futex"),
        });
        ratios.push(Ratio {
            what: "Reef polled URPC, held endpoints / Linux polled URPC (the same channel crate)".into(),
            goal: None,
            information: None,
            per_run: against_linux("message_roundtrip", "poll", "urpc"),
        });
        ratios.push(Ratio {
            what: "Reef polled round trip (msg::drain) / Linux futex".into(),
            goal: Some(0.01),
            information: Some("polling against blocking"),
            per_run: against_linux("message_roundtrip_drain", "poll", "futex"),
        });
        ratios.push(Ratio {
            what: "Reef IPI round trip, initiator polling (msg::drain) / Linux futex".into(),
            goal: None,
            information: Some("Reef initiator polls, Linux blocks"),
            per_run: against_linux("message_roundtrip_drain", "ipi", "futex"),
        });
        floors.push((
            "IPI ping-pong, two interrupts / Linux futex (floor of the both-asleep ratio)".into(),
            against_linux("ipi_pingpong_two_interrupts", "-", "futex"),
        ));
        floors.push((
            "raw cache-line round trip / Linux futex (floor of the polled-vs-futex ratio)".into(),
            against_linux("cacheline_roundtrip", "-", "futex"),
        ));
        let groups: Vec<String> = ["polled ring", "notified, both asleep"].iter().map(|s| s.to_string()).collect();
        let value = |v: Option<f64>| v.unwrap_or(0.0);
        let reef_values = vec![value(like[0].1), value(like[1].1)];
        let linux_values = vec![value(like[0].2), value(like[1].2)];
        let path = tools::root().join("results/msg_vs_linux.png");
        if let Err(e) = plot::grouped_bar_chart(
            &path,
            "Round trips, like for like: Reef vs Linux guest (median)",
            "ns (log)",
            &groups,
            &["Reef".to_string(), "Linux".to_string()],
            &[reef_values, linux_values],
            true,
        ) {
            println!("xtask: no plot {}: {e}", path.display());
        }
        linux = json!({ "runs": linux_runs, "side_by_side": table });
    }
    println!("Ratios, each measured inside one run (runs: {runs}):");
    let mut ratio_json = Vec::new();
    for (heading, like_for_like) in [("like for like:", true), ("information only (why in brackets):", false)] {
        println!("  {heading}");
        for ratio in ratios.iter().filter(|r| r.information.is_none() == like_for_like) {
            let values: Vec<f64> = ratio.per_run.iter().flatten().copied().collect();
            let middle = median_of(&values);
            let reached = ratio.goal.and_then(|goal| middle.map(|m| m <= goal));
            let list: Vec<String> =
                ratio.per_run.iter().map(|v| v.map_or("n/a".into(), |v| format!("{v:.3}"))).collect();
            let verdict = match (ratio.goal, reached) {
                (None, _) => String::new(),
                (Some(goal), Some(true)) => format!("goal <= {goal}: reached"),
                (Some(goal), Some(false)) => format!("goal <= {goal}: NOT reached"),
                (Some(goal), None) => format!("goal <= {goal}: not measured"),
            };
            let what = match ratio.information {
                Some(why) => format!("{} [{why}]", ratio.what),
                None => ratio.what.clone(),
            };
            println!(
                "    {:<96} median {:>7}  {:<26} (runs: {})",
                what,
                middle.map_or("n/a".into(), |m| format!("{m:.3}")),
                verdict,
                list.join(" ")
            );
            ratio_json.push(json!({
                "what": ratio.what, "like_for_like": ratio.information.is_none(),
                "information_because": ratio.information, "goal_at_most": ratio.goal,
                "per_run": ratio.per_run, "median": middle, "reached": reached,
            }));
        }
    }
    let mut floor_json = Vec::new();
    if !floors.is_empty() {
        println!("Floors: the raw mechanism alone against Linux, in the same runs (no goal; a channel adds to these):");
    }
    for (what, per_run) in &floors {
        let middle = median_of(&per_run.iter().flatten().copied().collect::<Vec<_>>());
        let list: Vec<String> = per_run.iter().map(|v| v.map_or("n/a".into(), |v| format!("{v:.3}"))).collect();
        println!(
            "  {what:<96} median {:>7}   (runs: {})",
            middle.map_or("n/a".into(), |m| format!("{m:.3}")),
            list.join(" ")
        );
        floor_json.push(json!({ "what": what, "per_run": per_run, "median": middle }));
    }
    let runs_json: Vec<Value> = results.iter().map(run_json).collect();
    let result = json!({
        "benchmark": "msg",
        "what": "Reef inter-core messaging: raw cache line and IPI, one-line messages per notification mode (held endpoints and through msg::drain), large messages, multicast, ICC (Popcorn tables 6.1-6.3, 6.9-6.11, figures 6.3-6.6)",
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

/// One run's figures as JSON: only the statistics each figure has, in cycles and in ns.
fn run_json(run: &GuestRun) -> Value {
    let figures: Vec<Value> = run
        .figures
        .iter()
        .map(|f| {
            let in_ns: BTreeMap<String, f64> =
                f.cycles.iter().map(|(k, v)| (k.clone(), (run.ns(*v) * 10.0).round() / 10.0)).collect();
            let mut figure = json!({ "name": f.name, "parameter": f.parameter, "core_pair": f.pair, "n": f.n,
                                     "cycles": f.cycles, "ns": in_ns });
            if let Some(negative) = f.negative {
                figure["negative_differences"] = json!(negative);
            }
            figure
        })
        .collect();
    json!({ "tsc_hz": run.tsc_hz, "figures": figures })
}

fn plots(figures: &[Figure], directory: &std::path::Path, ns: impl Fn(f64) -> f64) {
    let series = |name: &str, label: &str| -> Series {
        let mut points: Vec<(f64, f64, f64, f64)> = figures
            .iter()
            .filter(|f| f.name == name)
            .filter_map(|f| {
                let x: f64 = f.parameter.parse().ok()?;
                let median = *f.cycles.get("median")?;
                let (low, high) = (f.cycles.get("p5").unwrap_or(&median), f.cycles.get("p95").unwrap_or(&median));
                Some((x, ns(median), ns(*low), ns(*high)))
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
            "cacheline_roundtrip"
                | "ipi_out_poll_back"
                | "ipi_pingpong_two_interrupts"
                | "message_roundtrip"
                | "message_roundtrip_drain"
                | "message_roundtrip_sleeping"
                | "icc_roundtrip"
                | "ipi_send_cost"
        )
    }) {
        let Some(&median) = f.cycles.get("median") else { continue };
        let label = if f.parameter == "-" { f.name.clone() } else { format!("{} {}", f.name, f.parameter) };
        let whisker = f.cycles.get("p5").zip(f.cycles.get("p95")).map(|(low, high)| (ns(*low), ns(*high)));
        bars.push((label.replace("_roundtrip", " rtt"), ns(median), whisker));
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

#[cfg(test)]
mod tests {
    use super::*;

    const SERIAL: &str = "\
BENCH-INFO tsc_hz=2000000000 pair=0-1 iterations=40 mwait=no apic=xapic cores=2
BENCH-PROGRESS 2/10 cache line and polled message round trips (after 44 ms)
BENCH name=cacheline_roundtrip param=- pair=0-1 unit=cycles n=40 min=380 p5=420 median=440.5 p95=520 max=9000
BENCH-ERROR cacheline: no answer to line 7
BENCH name=message_send_to_wake param=poll pair=0-1 unit=cycles n=40 min=-120 p5=-40 median=300 p95=900 max=2000 negative=3
BENCH name=large_roundtrip param=1 pair=0-1 unit=cycles n=0
BENCH name=message_roundtrip param=ipi pair=0-1 unit=cycles n=12 median=30000
BENCH name=broken param=- unit=cycles n=1 median=1
";

    #[test]
    fn only_figure_lines_are_parsed_and_missing_fields_are_left_out() {
        let figures = parse_figures(SERIAL);
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        // No BENCH-INFO, -PROGRESS or -ERROR line, and not the line without a pair.
        assert_eq!(names, ["cacheline_roundtrip", "message_send_to_wake", "large_roundtrip", "message_roundtrip"]);
        assert_eq!(figures[0].cycles["median"], 440.5);
        assert_eq!((figures[0].n, figures[0].negative), (Some(40), None));
        assert_eq!(figures[1].cycles["min"], -120.0);
        assert_eq!(figures[1].negative, Some(3));
        assert_eq!((figures[2].n, figures[2].cycles.len()), (Some(0), 0));
        assert_eq!(figures[3].cycles.keys().collect::<Vec<_>>(), ["median"]);
        assert_eq!(median(&figures, "large_roundtrip", "1"), None);
        assert_eq!(median(&figures, "message_roundtrip", "ipi"), Some(30000.0));
    }

    #[test]
    fn json_carries_only_what_was_measured() {
        let run = GuestRun { tsc_hz: 2e9, figures: parse_figures(SERIAL) };
        let json = run_json(&run);
        let figures = json["figures"].as_array().unwrap();
        assert_eq!(figures[1]["negative_differences"], 3);
        assert_eq!(figures[1]["ns"]["min"], -60.0);
        assert!(figures[0].get("negative_differences").is_none());
        assert_eq!(figures[2]["cycles"], json!({}));
        assert_eq!(figures[3]["ns"], json!({ "median": 15000.0 }));
        assert_eq!(run.median_ns("message_roundtrip", "ipi"), Some(15000.0));
    }
}
