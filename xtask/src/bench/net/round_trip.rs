//! `bench net`'s round trips: `user/pingpong` between two cores over TCP on 127.0.0.1, a unix
//! stream socket pair, and two pipes (the floor: the same processes, cores and message, no
//! socket), on Reef and the Linux guest alike.
//!
//! The guest's shell runs one pingpong per transport and message size after webd, each after
//! a `PINGPONG-RUN <over> <size>` line, so a run that fails or prints nothing is known by name.
//! The round trips are timed with the TSC in the guest; the host reads every sample and
//! takes their median and p5/p95 itself.

use crate::bench::{plot, stats};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The client's core: it times the round trips.
pub const CLIENT_CORE: usize = 1;
/// The server's core: it answers each message with itself.
pub const SERVER_CORE: usize = 3;

/// What carries the messages, the shell's word for it (`pingpong --over`), the table's name,
/// and the goal (Reef / Linux at most) if there is one.
pub const TRANSPORTS: [(&str, &str, Option<f64>); 3] = [
    ("tcp", "TCP round trip over 127.0.0.1", Some(1.0)),
    ("unix", "AF_UNIX round trip (socketpair)", Some(1.0)),
    ("pipe", "pipe round trip (the floor)", None),
];

/// Message sizes, bytes.
pub const SIZES: [usize; 2] = [1, 64];

/// Untimed round trips before each run's timed ones.
const WARMUP: usize = 50;

/// Timed round trips per transport and size.
pub fn rounds(quick: bool) -> usize {
    if quick {
        200
    } else {
        2000
    }
}

/// The shell loop that runs every transport and size in turn, back to back (no interval).
pub fn script(rounds: usize) -> String {
    let overs: Vec<&str> = TRANSPORTS.iter().map(|(over, _, _)| *over).collect();
    let sizes: Vec<String> = SIZES.iter().map(usize::to_string).collect();
    format!(
        "for o in {}; do for s in {}; do echo PINGPONG-RUN $o $s; /bin/pingpong --over $o --size $s \
         --client-core {CLIENT_CORE} --server-core {SERVER_CORE} --rounds {rounds} --interval-us 0 --warmup {WARMUP}; \
         done; done; ",
        overs.join(" "),
        sizes.join(" ")
    )
}

/// One pingpong run: its round trips (ns) and the TSC rate it timed them with, or why there
/// are none.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub tsc_hz: u64,
    pub round_trips_ns: Vec<f64>,
}

/// Every run of a serial log by (transport, size): what it measured, or why it did not.
pub type Runs = BTreeMap<(String, usize), Result<Measured, String>>;

/// Reads the runs [`script`] printed from `serial`. A run whose program stopped short (an
/// error, or the guest ended) is an `Err` with what it said.
pub fn parse(serial: &str) -> Runs {
    let mut runs = Runs::new();
    let mut current: Option<((String, usize), Measured, Option<String>)> = None;
    let finish = |runs: &mut Runs, current: Option<((String, usize), Measured, Option<String>)>, ended: bool| {
        let Some((key, measured, error)) = current else { return };
        let outcome = match error {
            Some(why) => Err(why),
            None if !ended => Err("pingpong printed no summary (it stopped short or the guest ended)".into()),
            None if measured.round_trips_ns.is_empty() => Err("pingpong printed no round trips".into()),
            None => Ok(measured),
        };
        runs.insert(key, outcome);
    };
    for line in serial.lines() {
        if let Some(rest) = line.strip_prefix("PINGPONG-RUN ") {
            finish(&mut runs, current.take(), false);
            let mut words = rest.split_whitespace();
            if let (Some(over), Some(Ok(size))) = (words.next(), words.next().map(str::parse)) {
                current = Some(((over.to_string(), size), Measured { tsc_hz: 0, round_trips_ns: Vec::new() }, None));
            }
            continue;
        }
        let Some((_, measured, error)) = current.as_mut() else { continue };
        if line.starts_with("PINGPONG-CONFIG ") {
            measured.tsc_hz = field(line, "tsc_hz").unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("PINGPONG-SAMPLES ") {
            let rtt = |pair: &str| pair.split_once(':').and_then(|(_, rtt)| rtt.parse::<u64>().ok());
            measured.round_trips_ns.extend(rest.split_whitespace().filter_map(rtt).map(|ns| ns as f64));
        } else if let Some(why) = line.strip_prefix("PINGPONG-ERROR ") {
            *error = Some(why.trim().to_string());
        } else if line.starts_with("PINGPONG rounds=") {
            finish(&mut runs, current.take(), true);
        }
    }
    finish(&mut runs, current, false);
    runs
}

fn field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace().find_map(|word| word.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

/// The table's name of a figure: `TCP round trip over 127.0.0.1, 1 B, cores 1↔3`.
fn figure_name(name: &str, size: usize) -> String {
    format!("{name}, {size} B, cores {CLIENT_CORE}↔{SERVER_CORE}")
}

fn summary(runs: Option<&Runs>, over: &str, size: usize) -> Option<stats::Summary<f64>> {
    match runs?.get(&(over.to_string(), size))? {
        Ok(measured) => stats::summarize(&measured.round_trips_ns),
        Err(_) => None,
    }
}

fn text(summary: Option<&stats::Summary<f64>>) -> String {
    match summary {
        Some(s) => format!("{:.1} µs [{:.1}, {:.1}]", s.median / 1e3, s.p5 / 1e3, s.p95 / 1e3),
        None => "-".into(),
    }
}

/// Prints the table (median [p5, p95] per round trip, Reef / Linux of the medians, the goal)
/// and the runs that measured nothing, and returns the figures as JSON.
pub fn report(reef: Option<&Runs>, linux: Option<&Runs>, rounds: usize) -> Value {
    println!(
        "round trips of user/pingpong, client on core {CLIENT_CORE}, server on core {SERVER_CORE}, {rounds} each \
         back to back, median [p5, p95] (the guest's TSC):"
    );
    println!("  {:<52} {:>26} {:>26} {:>6} {:>6}  met", "figure", "Reef", "Linux", "ratio", "goal");
    let mut figures = Vec::new();
    for (over, name, goal) in TRANSPORTS {
        for size in SIZES {
            let (r, l) = (summary(reef, over, size), summary(linux, over, size));
            let ratio = match (&r, &l) {
                (Some(r), Some(l)) if l.median > 0.0 => Some(r.median / l.median),
                _ => None,
            };
            println!(
                "  {:<52} {:>26} {:>26} {:>6} {:>6}  {}",
                figure_name(name, size),
                text(r.as_ref()),
                text(l.as_ref()),
                ratio.map_or("-".into(), |r| format!("{r:.2}")),
                goal.map_or("floor".into(), |g| format!("<={g:.1}")),
                match (ratio, goal) {
                    (Some(ratio), Some(goal)) => {
                        if ratio <= goal {
                            "yes"
                        } else {
                            "no"
                        }
                    }
                    _ => "-",
                }
            );
            let run_json = |runs: Option<&Runs>, summary: &Option<stats::Summary<f64>>| match runs
                .and_then(|runs| runs.get(&(over.to_string(), size)))
            {
                None => Value::Null,
                Some(Err(why)) => json!({ "error": why }),
                Some(Ok(measured)) => json!({
                    "tsc_hz": measured.tsc_hz,
                    "round_trip_ns": summary.as_ref().map(stats::to_json),
                }),
            };
            figures.push(json!({
                "figure": figure_name(name, size), "over": over, "message_bytes": size,
                "reef": run_json(reef, &r), "linux": run_json(linux, &l),
                "ratio_of_medians": ratio, "goal_at_most": goal,
            }));
        }
    }
    for (system, runs) in [("Reef", reef), ("Linux", linux)] {
        for ((over, size), outcome) in runs.into_iter().flatten() {
            if let Err(why) = outcome {
                println!("{system}: pingpong --over {over} --size {size} measured nothing: {why}");
            }
        }
        let missing: Vec<String> = TRANSPORTS
            .iter()
            .flat_map(|(over, _, _)| SIZES.iter().map(move |size| (over.to_string(), *size)))
            .filter(|key| runs.is_some_and(|runs| !runs.contains_key(key)))
            .map(|(over, size)| format!("{over} {size} B"))
            .collect();
        if !missing.is_empty() {
            println!("{system}: pingpong never ran for {}", missing.join(", "));
        }
    }
    json!({
        "program": "user/pingpong (--interval-us 0: each round trip starts when the last ends)",
        "client_core": CLIENT_CORE, "server_core": SERVER_CORE, "rounds": rounds, "warmup": WARMUP,
        "figures": figures,
    })
}

/// `net-round-trip.png`: each figure's median with its p5–p95 whisker, Reef beside Linux, µs.
pub fn plot(directory: &Path, accel: &str, reef: Option<&Runs>, linux: Option<&Runs>) {
    let mut bars: Vec<plot::BarEntry> = Vec::new();
    for (over, _, _) in TRANSPORTS {
        for size in SIZES {
            for (system, runs) in [("Reef", reef), ("Linux", linux)] {
                if let Some(s) = summary(runs, over, size) {
                    bars.push((format!("{system} {over} {size} B"), s.median / 1e3, Some((s.p5 / 1e3, s.p95 / 1e3))));
                }
            }
        }
    }
    if bars.is_empty() {
        eprintln!("xtask: no net-round-trip.png: no round trip measured");
        return;
    }
    let path = directory.join("net-round-trip.png");
    let title = format!("pingpong round trip, cores {CLIENT_CORE}↔{SERVER_CORE}, median [p5, p95] ({accel})");
    match plot::bar_chart(&path, &title, "round trip (µs)", &bars, false) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(error) => eprintln!("xtask: no net-round-trip.png: {error}"),
    }
}

/// The TSC rate the runs of `runs` timed with (the first one's), for the JSON's head.
pub fn tsc_hz(runs: Option<&Runs>) -> Option<u64> {
    runs?.values().find_map(|outcome| outcome.as_ref().ok().map(|m| m.tsc_hz)).filter(|&hz| hz > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_names_each_run_and_fits() {
        let script = script(2000);
        assert!(script.starts_with("for o in tcp unix pipe; do for s in 1 64; do echo PINGPONG-RUN $o $s; "));
        assert!(script.contains("--client-core 1 --server-core 3 --rounds 2000 --interval-us 0"));
        assert!(script.len() < 400, "{script}");
    }

    #[test]
    fn runs_are_read_by_name() {
        let serial = "\
[c0 INFO ] exec: for o in tcp; do echo PINGPONG-RUN $o $s; done
PINGPONG-RUN tcp 1
PINGPONG-CONFIG rounds=3 over=tcp size=1 interval_us=0 warmup=0 tsc_hz=2000000000 server_core=3 client_core=1 base_tsc=5
PINGPONG-SAMPLES 0:3000 1:1000 2:2000
PINGPONG rounds=3 over=tcp size=1 median_ns=2000
PINGPONG-RUN tcp 64
PINGPONG-ERROR connecting to 127.0.0.1:40000: Connection refused (os error 111)
PINGPONG-RUN unix 1
PINGPONG-RUN unix 64
PINGPONG-CONFIG rounds=1 tsc_hz=1
PINGPONG-SAMPLES 0:10
";
        let runs = parse(serial);
        assert_eq!(runs.len(), 4);
        let tcp = runs[&("tcp".to_string(), 1)].as_ref().unwrap();
        assert_eq!((tcp.tsc_hz, tcp.round_trips_ns.clone()), (2_000_000_000, vec![3000.0, 1000.0, 2000.0]));
        assert!(runs[&("tcp".to_string(), 64)].as_ref().unwrap_err().contains("refused"));
        assert!(runs[&("unix".to_string(), 1)].as_ref().unwrap_err().contains("no summary"));
        assert!(runs[&("unix".to_string(), 64)].as_ref().unwrap_err().contains("no summary"), "the guest ended");
        assert_eq!(summary(Some(&runs), "tcp", 1).unwrap().median, 2000.0);
        assert_eq!(tsc_hz(Some(&runs)), Some(2_000_000_000));
    }
}
