//! `cargo xtask bench pingpong`: Barrelfish/DC figure 4's service half. A ping-pong service
//! (`user/pingpong`, its server on core 3, its client on core 1, through two pipes) while
//! core 3 is restarted twice with `/boot/full-v2` (the KCB keeps the server in place), then
//! parked on core 2 (restarted with `/boot/multi` first) and unparked: each round trip's
//! latency over time, the worst one through each operation, and a plot.

use crate::bench::common;
use crate::bench::plot::{self, Draw, Series};
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use serde_json::{json, Value};
use std::time::Duration;

const CORES: usize = 4;
const USAGE: &str = "bench pingpong [--rounds N] [--interval-us U] [--accel kvm|tcg]";
/// A round trip overlapping an operation, or ending this long after it, is the operation's.
const AFTER_NS: u64 = 20_000_000;

#[derive(Debug, PartialEq)]
struct Options {
    rounds: usize,
    interval_us: usize,
    accel: Accel,
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options { rounds: 10_000, interval_us: 250, accel: Accel::detect() };
    let mut i = 0;
    while i < arguments.len() {
        match arguments[i].as_str() {
            "--rounds" => options.rounds = common::number_option("--rounds", arguments.get(i + 1), 100..=1_000_000)?,
            "--interval-us" => {
                options.interval_us = common::number_option("--interval-us", arguments.get(i + 1), 10..=100_000)?
            }
            "--accel" => options.accel = Accel::parse(arguments.get(i + 1).map_or("", String::as_str))?,
            other => return Err(format!("unknown option `{other}`: {USAGE}")),
        }
        i += 2;
    }
    Ok(options)
}

/// The shell line: the service, and the operations on its core from core 2 (restarts) and
/// core 0 (park, unpark), each between two marks.
fn command_line(options: &Options) -> String {
    let mark = |label: &str| format!("/bin/pingpong --mark {label}");
    let restart = format!("{}; core restart 3 /boot/full-v2 > /dev/null; {}", mark("restart"), mark("restarted"));
    format!(
        "core restart 2 /boot/multi > /dev/null; \
         spawn 1 /bin/pingpong --rounds {} --interval-us {} > /tmp/pp.txt & sleep 0.3; \
         on 2 /bin/sh -c 'sleep 0.3; {restart}; sleep 0.3; {restart}'; sleep 0.3; \
         {}; core park 3 2 > /dev/null; {}; sleep 0.3; {}; core unpark 3 > /dev/null; {}; wait; cat /tmp/pp.txt",
        options.rounds,
        options.interval_us,
        mark("park"),
        mark("parked"),
        mark("unpark"),
        mark("unparked"),
    )
}

/// What the run printed.
#[derive(Debug, Default, PartialEq)]
struct Run {
    tsc_hz: u64,
    base_tsc: u64,
    /// (start since the first timed round, round trip), ns.
    samples: Vec<(u64, u64)>,
    /// (label, TSC) in order.
    marks: Vec<(String, u64)>,
    /// What the new kernels said of the kept server: µs it was stopped, per restart.
    kept_us: Vec<u64>,
}

fn field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace().find_map(|word| word.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

fn parse_run(serial: &str) -> Result<Run, String> {
    let mut run = Run::default();
    for line in serial.lines() {
        if let Some(rest) = line.strip_prefix("PINGPONG-MARK ") {
            let mut words = rest.split_whitespace();
            if let (Some(label), Some(Ok(tsc))) = (words.next(), words.next().map(str::parse)) {
                run.marks.push((label.to_string(), tsc));
            }
        } else if line.starts_with("PINGPONG-CONFIG ") {
            run.tsc_hz = field(line, "tsc_hz").unwrap_or(0);
            run.base_tsc = field(line, "base_tsc").unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("PINGPONG-SAMPLES ") {
            for pair in rest.split_whitespace() {
                if let Some((start, rtt)) = pair.split_once(':') {
                    if let (Ok(start), Ok(rtt)) = (start.parse::<u64>(), rtt.parse()) {
                        run.samples.push((start * 1000, rtt));
                    }
                }
            }
        } else if let Some(rest) = line.split(" kept through the restart: ").nth(1) {
            if let Some(us) = rest.split(" us since it stopped").next().and_then(|s| s.rsplit(' ').next()?.parse().ok())
            {
                run.kept_us.push(us);
            }
        } else if let Some(error) = line.strip_prefix("PINGPONG-ERROR ") {
            return Err(format!("pingpong: {error}"));
        }
    }
    if run.tsc_hz == 0 || run.samples.is_empty() {
        return Err("pingpong printed no round trips".into());
    }
    Ok(run)
}

/// One operation on the service's core: its window (ns since the first timed round) and the
/// round trips that overlap it.
#[derive(Debug, PartialEq)]
struct Operation {
    name: String,
    start_ns: u64,
    end_ns: u64,
    worst_ns: u64,
    round_trips: usize,
}

fn operations(run: &Run) -> Vec<Operation> {
    let to_ns =
        |tsc: u64| (u128::from(tsc.saturating_sub(run.base_tsc)) * 1_000_000_000 / u128::from(run.tsc_hz)) as u64;
    let mut list = Vec::new();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for pair in run.marks.windows(2) {
        let ((begin, start), (end, stop)) = (&pair[0], &pair[1]);
        if !end.starts_with(begin.as_str()) || end == begin {
            continue;
        }
        let count = counts.entry(begin.clone()).or_default();
        *count += 1;
        let (start_ns, end_ns) = (to_ns(*start), to_ns(*stop));
        let overlapping: Vec<u64> = run
            .samples
            .iter()
            .filter(|(s, rtt)| s + rtt >= start_ns && *s <= end_ns + AFTER_NS)
            .map(|(_, rtt)| *rtt)
            .collect();
        list.push(Operation {
            name: format!("{begin} {count}"),
            start_ns,
            end_ns,
            worst_ns: overlapping.iter().copied().max().unwrap_or(0),
            round_trips: overlapping.len(),
        });
    }
    list
}

/// The round trips that overlap no operation: the service undisturbed.
fn undisturbed(run: &Run, operations: &[Operation]) -> Vec<u64> {
    run.samples
        .iter()
        .filter(|(s, rtt)| operations.iter().all(|op| s + rtt < op.start_ns || *s > op.end_ns + AFTER_NS))
        .map(|(_, rtt)| *rtt)
        .collect()
}

pub fn run(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments)?;
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let initrd = tools::build_initramfs()?;
    let line = command_line(&options);
    eprintln!("xtask: pingpong on Reef ({CORES} cores, {}): {line}", options.accel.name());
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.initrd = Some(initrd);
    machine.kernel_args = qemu::exec_argument(&line)?;
    machine.timeout = Duration::from_secs(600);
    let (outcome, _) = qemu::boot(&machine, &kernel, None)?;
    let run = parse_run(&outcome.serial)?;
    let operations = operations(&run);
    let mut calm = undisturbed(&run, &operations);
    calm.sort_unstable();
    let pick = |percent: f64| samples::percentile(&calm, percent).unwrap_or(0);
    let us = |ns: u64| ns as f64 / 1000.0;
    println!(
        "ping-pong, server on core 3, client on core 1 ({}, TSC {:.0} MHz): {} round trips every {} us",
        options.accel.name(),
        run.tsc_hz as f64 / 1e6,
        run.samples.len(),
        options.interval_us
    );
    println!(
        "  undisturbed: {} round trips, median {:.1} us, p5 {:.1} us, p95 {:.1} us, p99 {:.1} us, max {:.1} us",
        calm.len(),
        us(pick(50.0)),
        us(pick(5.0)),
        us(pick(95.0)),
        us(pick(99.0)),
        us(calm.last().copied().unwrap_or(0))
    );
    for op in &operations {
        println!(
            "  {:<10} at {:>7.1} ms, took {:>6.1} ms: {} round trips overlap it, the longest {:.1} ms",
            op.name,
            op.start_ns as f64 / 1e6,
            (op.end_ns - op.start_ns) as f64 / 1e6,
            op.round_trips,
            op.worst_ns as f64 / 1e6
        );
    }
    if !run.kept_us.is_empty() {
        println!("  the new kernels kept the server stopped for {:?} us", run.kept_us);
    }
    let results = json!({
        "benchmark": "pingpong",
        "what": "Barrelfish/DC figure 4: round trips of a ping-pong service (user/pingpong, two pipes) with its \
                 server on core 3 and its client on core 1, through two restarts of core 3 with /boot/full-v2 \
                 (asked from core 2), a park of core 3 on core 2 (/boot/multi) and an unpark (asked from core 0)",
        "accelerator": options.accel.name(),
        "cores": CORES,
        "core_pair": [1, 3],
        "tsc_hz": run.tsc_hz,
        "interval_us": options.interval_us,
        "command": line,
        "undisturbed_ns": {
            "count": calm.len(), "median": pick(50.0), "p5": pick(5.0), "p95": pick(95.0), "p99": pick(99.0),
            "max": calm.last().copied().unwrap_or(0),
        },
        "operations": operations.iter().map(|op| json!({
            "name": op.name, "start_ns": op.start_ns, "end_ns": op.end_ns,
            "worst_round_trip_ns": op.worst_ns, "round_trips": op.round_trips,
        })).collect::<Vec<Value>>(),
        "kept_stopped_us": run.kept_us,
        "samples_start_ns_rtt_ns": run.samples,
    });
    let directory = common::write_results(&results, "pingpong.json")?;
    let series = Series {
        name: "round trip".into(),
        points: run.samples.iter().map(|&(s, rtt)| (s as f64 / 1e9, rtt as f64 / 1e6)).collect(),
        low_high: None,
    };
    let marks: Vec<plot::Mark> = operations.iter().map(|op| (op.start_ns as f64 / 1e9, op.name.clone())).collect();
    let path = directory.join("pingpong.png");
    match plot::trace_chart(
        &path,
        &format!("ping-pong round trips, server on core 3 ({})", options.accel.name()),
        ("time (s)", "round trip (ms)"),
        &[series],
        (false, true, Draw::Dots),
        &marks,
    ) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(error) => eprintln!("xtask: no plot: {error}"),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERIAL: &str = "\
PINGPONG-MARK restart 2000
[c3 INFO ] process 100002 (pingpong) kept through the restart: 1 threads, 124 pages, 1700 us since it stopped (x)
PINGPONG-MARK restarted 3000
PINGPONG-MARK park 5000
PINGPONG-MARK parked 5500
PINGPONG-CONFIG rounds=4 interval_us=1 warmup=0 tsc_hz=1000000000 server_core=3 client_core=1 base_tsc=1000 os=reef core=1
PINGPONG-SAMPLES 0:100 1:900 3:500 10:100
PINGPONG rounds=4 median_ns=1 p99_ns=1 max_ns=1 max_at_us=1 tsc_hz=1000000000";

    #[test]
    fn a_run_is_read_and_split_by_its_marks() {
        let run = parse_run(SERIAL).unwrap();
        assert_eq!(run.samples, [(0, 100), (1000, 900), (3000, 500), (10_000, 100)]);
        assert_eq!(run.kept_us, [1700]);
        let ops = operations(&run);
        assert_eq!(ops.len(), 2, "restart/restarted and park/parked; restarted/park is no pair");
        assert_eq!((ops[0].name.as_str(), ops[0].start_ns, ops[0].end_ns), ("restart 1", 1000, 2000));
        assert_eq!(ops[0].worst_ns, 900);
        assert_eq!(ops[1].name, "park 1");
        assert_eq!(undisturbed(&run, &ops), [100], "the one sample that ended before the first operation");
        assert!(parse_run("nothing").is_err());
        assert!(parse_run("PINGPONG-ERROR moving to core 3: no").unwrap_err().contains("moving"));
    }

    #[test]
    fn the_options() {
        let options = parse_options(&["--rounds".into(), "500".into()]).unwrap();
        assert_eq!((options.rounds, options.interval_us), (500, 250));
        assert!(parse_options(&["--rounds".into(), "5".into()]).is_err());
        assert!(parse_options(&["--what".into()]).is_err());
        assert!(command_line(&options).len() < 1024, "fits the kernel command line");
    }
}
