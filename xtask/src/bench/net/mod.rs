//! `cargo xtask bench net`: `user/webd` served through `--forward` to the host's load
//! generator ([`crate::net::load`]), on Reef's network core (0) and on another core (2), then
//! the same binary in the Linux guest with the same `-netdev`/device flags (issue 30,
//! "Measurements").
//!
//! One boot per system. The guest starts webd on core 0, the host measures when webd says it
//! listens (a [`HostAction::Call`] at that line) and then types `go`; the guest ends webd
//! (SIGTERM: each worker prints its totals) and does the same on core 2. Reef then prints
//! `/proc/reef/net`, whose frames per interrupt are the mitigation figure. Figures are
//! reported, never judged: a failed measurement is a `-` with its reason in the JSON.
//!
//! After webd, each guest's shell runs `user/pingpong` between cores 1 and 3 over TCP on
//! 127.0.0.1, a unix socket pair and two pipes ([`round_trip`]); `--round-trips-only` runs
//! just those, without the network device.

mod round_trip;

use crate::bench::{common, plot, stats};
use crate::linux_guest;
use crate::net::load::{self, Load, LoadOutcome, Transfer};
use crate::net::{self, Forward, Network};
use crate::qemu::{self, Accel, HostAction, HostCall, Machine};
use crate::tools;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const USAGE: &str = "bench net [--accel kvm|tcg] [--quick] [--no-linux] [--round-trips-only]";

/// Cores of both guests.
const CORES: usize = 4;

/// What the guest prints when it is done (from arithmetic, so Reef's logged command line
/// never holds it).
const DONE: &str = "bench-net-1-done";

/// Where webd runs: on the network kernel's core, and on another.
struct Placement {
    name: &'static str,
    what: &'static str,
    /// The guest port webd listens on (one per placement, so the second never waits for the
    /// first's closing connections).
    guest_port: u16,
    reef_prefix: &'static str,
    linux_prefix: &'static str,
    /// The goal for requests/s, Reef / Linux at least.
    rps_goal: f64,
}

const PLACEMENTS: [Placement; 2] = [
    Placement {
        name: "core 0",
        what: "webd on core 0, the network kernel's core, where the smoltcp stack runs",
        guest_port: 80,
        reef_prefix: "on 0 ",
        linux_prefix: "taskset 1 ",
        rps_goal: 1.0,
    },
    Placement {
        name: "core 2",
        what: "webd on core 2: every socket call forwarded to core 0",
        guest_port: 81,
        reef_prefix: "on 2 ",
        linux_prefix: "taskset 4 ",
        rps_goal: 0.67,
    },
];

/// The transfer goal, Reef / Linux MB/s at least, each way.
const TRANSFER_GOAL: f64 = 1.0;

#[derive(Debug, PartialEq)]
struct Options {
    accel: Accel,
    quick: bool,
    linux: bool,
    /// webd through the forwards; without it only the round trips, and no network device.
    webd: bool,
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options { accel: Accel::detect(), quick: false, linux: true, webd: true };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--accel" => options.accel = Accel::parse(words.next().ok_or("--accel takes kvm or tcg")?)?,
            "--quick" => options.quick = true,
            "--no-linux" => options.linux = false,
            "--round-trips-only" => options.webd = false,
            other => return Err(format!("unknown option `{other}`: {USAGE}")),
        }
    }
    Ok(options)
}

/// How much load: requests per figure, the transfer's size, the bounds in time.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// Keep-alive clients, each on its own connection throughout.
    connections: usize,
    requests: usize,
    /// Requests of the connection-per-request figure, by one client: QEMU's `hostfwd`
    /// listens on the host with a backlog of 1 (libslirp's `listen(s, 1)`), so clients that
    /// connect at once overflow it, the host drops a SYN and its client retries 1 s later,
    /// on Reef and Linux alike; one such second would be most of the run.
    close_requests: usize,
    transfer_mib: u64,
    load_limit: Duration,
    transfer_limit: Duration,
}

impl Sizes {
    fn of(quick: bool) -> Self {
        if quick {
            Self {
                connections: 4,
                requests: 1000,
                close_requests: 200,
                transfer_mib: 8,
                load_limit: Duration::from_secs(30),
                transfer_limit: Duration::from_secs(60),
            }
        } else {
            Self {
                connections: 4,
                requests: 10_000,
                close_requests: 1000,
                transfer_mib: 64,
                load_limit: Duration::from_secs(120),
                transfer_limit: Duration::from_secs(300),
            }
        }
    }

    /// The longest one placement can take: the first answer, two loads, two transfers.
    fn placement_limit(self) -> Duration {
        READY_WAIT + 2 * self.load_limit + 2 * self.transfer_limit
    }
}

/// How long a boot that only measures round trips may take (under TCG, 4 vCPUs on 2 host CPUs).
const ROUND_TRIPS_LIMIT: Duration = Duration::from_secs(600);

/// How long the host waits for webd's first answer through the forward.
const READY_WAIT: Duration = Duration::from_secs(60);

/// What one placement measured.
#[derive(Clone, Debug, Default)]
struct Figures {
    /// Why nothing was measured: webd never answered.
    unreachable: Option<String>,
    keep_alive: Option<LoadOutcome>,
    close: Option<LoadOutcome>,
    /// Guest to host (GET /mib/N) and host to guest (POST /sink).
    download: Option<Result<Transfer, String>>,
    upload: Option<Result<Transfer, String>>,
}

/// The host's side of one placement, on `port` (the forward to webd).
fn measure(port: u16, sizes: Sizes) -> Figures {
    let mut figures = Figures::default();
    match net::http::get(port, "/kib/1", READY_WAIT) {
        Ok(response) if response.status == 200 && response.body.len() == 1024 => {}
        Ok(response) => {
            figures.unreachable =
                Some(format!("GET /kib/1 answered {} with {} bytes", response.status, response.body.len()));
            return figures;
        }
        Err(why) => {
            figures.unreachable = Some(why);
            return figures;
        }
    }
    for keep_alive in [true, false] {
        let outcome = load::run(&Load {
            port,
            path: "/kib/1".into(),
            body_length: 1024,
            connections: if keep_alive { sizes.connections } else { 1 },
            keep_alive,
            requests: if keep_alive { sizes.requests } else { sizes.close_requests },
            time_limit: sizes.load_limit,
        });
        eprintln!(
            "xtask:   {}: {} requests/s, {} of {} done, {} errors, slowest first request {:.1} ms{}",
            if keep_alive { "keep-alive" } else { "close" },
            outcome.requests_per_second().map_or("-".into(), |r| format!("{r:.0}")),
            outcome.completed,
            if keep_alive { sizes.requests } else { sizes.close_requests },
            outcome.errors,
            outcome.warm_up_max_ns.unwrap_or(0.0) / 1e6,
            outcome.first_error.as_ref().map_or(String::new(), |e| format!(" (first: {e})"))
        );
        if keep_alive {
            figures.keep_alive = Some(outcome);
        } else {
            figures.close = Some(outcome);
        }
    }
    let bytes = sizes.transfer_mib << 20;
    let download = load::download(port, &format!("/mib/{}", sizes.transfer_mib), bytes, sizes.transfer_limit);
    let upload = load::upload(port, bytes, sizes.transfer_limit);
    for (way, result) in [("guest to host", &download), ("host to guest", &upload)] {
        match result {
            Ok(transfer) => eprintln!("xtask:   {way}: {:.2} MB/s", transfer.megabytes_per_second()),
            Err(why) => eprintln!("xtask:   {way}: {why}"),
        }
    }
    figures.download = Some(download);
    figures.upload = Some(upload);
    figures
}

/// One system's run: the figures of each placement, the round trips, the serial log, and why
/// it stopped short.
struct SystemRun {
    figures: BTreeMap<&'static str, Figures>,
    round_trips: round_trip::Runs,
    serial: String,
    error: Option<String>,
}

/// The guest's script: webd at each placement in turn (with `options.webd`), ended after the
/// host's `go`; `reef` adds `/proc/reef/net` after each; then the round trips.
fn script(reef: bool, options: &Options) -> String {
    let mut script = String::new();
    for placement in PLACEMENTS.iter().filter(|_| options.webd) {
        let prefix = if reef { placement.reef_prefix } else { placement.linux_prefix };
        script.push_str(&format!("{prefix}/bin/webd --port {} & read go; kill $!; wait; ", placement.guest_port));
        if reef {
            script.push_str("cat /proc/reef/net; ");
        }
    }
    script.push_str(&round_trip::script(round_trip::rounds(options.quick)));
    script.push_str("echo bench-net-$((1))-done");
    script
}

/// The line webd prints when the placement's server listens.
fn ready_marker(placement: &Placement) -> String {
    format!("webd: listening on 0.0.0.0:{} with", placement.guest_port)
}

/// Gives `machine` the forwards, a measuring host step at each ready line and the `go` after it.
fn equip(machine: &mut Machine, sizes: Sizes) -> Result<Arc<Mutex<BTreeMap<&'static str, Figures>>>, String> {
    let results = Arc::new(Mutex::new(BTreeMap::new()));
    let mut network = Network::default();
    for placement in &PLACEMENTS {
        let host_port = net::free_port()?;
        network.add_forward(Forward { host_port, guest_port: placement.guest_port })?;
        let (results, name) = (results.clone(), placement.name);
        let call = HostCall::new(format!("bench net, webd on {name}"), move || {
            eprintln!("xtask: measuring webd on {name} through 127.0.0.1:{host_port}");
            let figures = measure(host_port, sizes);
            if let Ok(mut results) = results.lock() {
                results.insert(name, figures);
            }
            Ok(())
        });
        machine.host_actions.push((ready_marker(placement), HostAction::Call(call)));
        machine.typed.push((ready_marker(placement), "go\n".into()));
    }
    machine.network = Some(network);
    machine.timeout = Duration::from_secs(180) + 2 * sizes.placement_limit();
    Ok(results)
}

fn taken(results: &Arc<Mutex<BTreeMap<&'static str, Figures>>>) -> BTreeMap<&'static str, Figures> {
    results.lock().map(|results| results.clone()).unwrap_or_default()
}

fn reef_run(options: &Options, sizes: Sizes) -> Result<SystemRun, String> {
    let kernel = tools::build_kernel()?;
    let initrd = tools::build_initramfs()?;
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.initrd = Some(initrd);
    machine.kernel_args = qemu::exec_argument(&script(true, options))?;
    let results = if options.webd {
        eprintln!("xtask: Reef, {CORES} cores ({}), webd on core 0 then core 2", options.accel.name());
        equip(&mut machine, sizes)?
    } else {
        machine.timeout = ROUND_TRIPS_LIMIT;
        Arc::default()
    };
    eprintln!("xtask: Reef, round trips between cores {} and {}", round_trip::CLIENT_CORE, round_trip::SERVER_CORE);
    let (outcome, done) = qemu::boot(&machine, &kernel, Some(DONE))?;
    let error = done.is_none().then(|| {
        format!(
            "Reef did not finish ({}); the log's end:\n{}",
            if outcome.timed_out { "timed out" } else { "QEMU ended" },
            tail(&outcome.serial, 30)
        )
    });
    let round_trips = round_trip::parse(&outcome.serial);
    Ok(SystemRun { figures: taken(&results), round_trips, serial: outcome.serial, error })
}

fn linux_run(options: &Options, sizes: Sizes) -> Result<SystemRun, String> {
    let programs = vec![
        ("webd".to_string(), tools::user_program_bytes("webd")?),
        ("pingpong".to_string(), tools::user_program_bytes("pingpong")?),
    ];
    let mut machine = Machine::new(CORES);
    machine.accel = options.accel;
    machine.kernel_args = common::LINUX_KERNEL_ARGUMENTS.into();
    let (modules, mut lines, results) = if options.webd {
        let (modules, names) = linux_guest::network_modules()?;
        let mut lines = linux_guest::load_modules(&names);
        lines.extend(linux_guest::configure_network());
        eprintln!("xtask: the Linux guest, {CORES} CPUs ({}), webd on CPU 0 then CPU 2", options.accel.name());
        (modules, lines, equip(&mut machine, sizes)?)
    } else {
        machine.timeout = ROUND_TRIPS_LIMIT;
        (Vec::new(), vec!["ip link set lo up".to_string()], Arc::default())
    };
    lines.push(format!("( {} )", script(false, options)));
    eprintln!(
        "xtask: the Linux guest, round trips between CPUs {} and {}",
        round_trip::CLIENT_CORE,
        round_trip::SERVER_CORE
    );
    // The serial log of a run that did not finish is in the error; its round trips are lost.
    let (serial, error) =
        match linux_guest::run_program_with_host_steps(&machine, &programs, &modules, &lines.join("\n")) {
            Ok(serial) => (serial, None),
            Err(why) => (String::new(), Some(why)),
        };
    let round_trips = round_trip::parse(&serial);
    Ok(SystemRun { figures: taken(&results), round_trips, serial, error })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Reef's last `frames received per interrupt: X` line.
fn frames_per_interrupt(serial: &str) -> Option<f64> {
    serial
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix("frames received per interrupt:")?.trim().parse().ok())
}

fn rps(outcome: &Option<LoadOutcome>) -> Option<f64> {
    outcome.as_ref().and_then(LoadOutcome::requests_per_second)
}

fn mbs(transfer: &Option<Result<Transfer, String>>) -> Option<f64> {
    transfer.as_ref().and_then(|t| t.as_ref().ok()).map(Transfer::megabytes_per_second)
}

/// The figures of the table: (name, placement, what it reads from [`Figures`], unit, goal).
type Reading = fn(&Figures) -> Option<f64>;

fn rows() -> Vec<(String, &'static str, Reading, &'static str, f64)> {
    let mut rows: Vec<(String, &'static str, Reading, &'static str, f64)> = Vec::new();
    for placement in &PLACEMENTS {
        let (name, goal) = (placement.name, placement.rps_goal);
        rows.push((format!("req/s keep-alive, {name}"), name, |f| rps(&f.keep_alive), "req/s", goal));
        rows.push((format!("req/s close, {name}"), name, |f| rps(&f.close), "req/s", goal));
        rows.push((format!("MB/s guest to host, {name}"), name, |f| mbs(&f.download), "MB/s", TRANSFER_GOAL));
        rows.push((format!("MB/s host to guest, {name}"), name, |f| mbs(&f.upload), "MB/s", TRANSFER_GOAL));
    }
    rows
}

/// A load's JSON: its counts, requests/s and latency percentiles (ns).
fn load_json(outcome: &Option<LoadOutcome>) -> Value {
    let Some(outcome) = outcome else { return Value::Null };
    json!({
        "completed": outcome.completed, "errors": outcome.errors, "first_error": outcome.first_error,
        "elapsed_s": outcome.elapsed.as_secs_f64(), "timed_out": outcome.timed_out,
        "requests_per_second": outcome.requests_per_second(), "warm_up_max_ns": outcome.warm_up_max_ns,
        "latency_ns": stats::summarize(&outcome.latencies_ns).as_ref().map(stats::to_json),
    })
}

fn transfer_json(transfer: &Option<Result<Transfer, String>>) -> Value {
    match transfer {
        None => Value::Null,
        Some(Ok(t)) => {
            json!({ "bytes": t.bytes, "seconds": t.elapsed.as_secs_f64(), "mb_per_s": t.megabytes_per_second() })
        }
        Some(Err(why)) => json!({ "error": why }),
    }
}

fn run_json(run: Option<&SystemRun>) -> Value {
    let Some(run) = run else { return Value::Null };
    let mut placements = Map::new();
    for placement in &PLACEMENTS {
        let figures = run.figures.get(placement.name);
        placements.insert(
            placement.name.into(),
            json!({
                "what": placement.what,
                "unreachable": figures.and_then(|f| f.unreachable.clone()),
                "keep_alive": figures.map_or(Value::Null, |f| load_json(&f.keep_alive)),
                "close": figures.map_or(Value::Null, |f| load_json(&f.close)),
                "guest_to_host": figures.map_or(Value::Null, |f| transfer_json(&f.download)),
                "host_to_guest": figures.map_or(Value::Null, |f| transfer_json(&f.upload)),
            }),
        );
    }
    let totals: Vec<&str> = run.serial.lines().filter(|l| l.contains("webd: worker ")).map(str::trim).collect();
    json!({ "placements": placements, "error": run.error, "webd_totals": totals })
}

/// The latency line of a load: median and p5/p95 in ms.
fn latency_text(outcome: Option<&LoadOutcome>) -> String {
    match outcome.and_then(|o| stats::summarize(&o.latencies_ns)) {
        Some(s) => format!("{:.2} ms [{:.2}, {:.2}]", s.median / 1e6, s.p5 / 1e6, s.p95 / 1e6),
        None => "-".into(),
    }
}

/// `cargo xtask bench net`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let options = parse_options(arguments)?;
    let sizes = Sizes::of(options.quick);
    tools::ensure_qemu()?;
    let started = Instant::now();
    let reef = Some(reef_run(&options, sizes)?);
    let linux = if options.linux { Some(linux_run(&options, sizes)?) } else { None };
    for (system, run) in [("Reef", &reef), ("Linux", &linux)] {
        if let Some(SystemRun { error: Some(why), .. }) = run {
            eprintln!("xtask: {system}: {why}");
        }
    }
    if options.webd {
        report_webd(&options, sizes, &reef, &linux, started)?;
    }
    let round_trips = round_trip::report(
        reef.as_ref().map(|r| &r.round_trips),
        linux.as_ref().map(|r| &r.round_trips),
        round_trip::rounds(options.quick),
    );
    let reef_tsc = reef.as_ref().and_then(|r| round_trip::tsc_hz(Some(&r.round_trips)));
    let linux_tsc = linux.as_ref().and_then(|r| round_trip::tsc_hz(Some(&r.round_trips)));
    println!(
        "  ({}, {CORES} cores; TSC {} MHz in Reef, {} MHz in Linux)",
        options.accel.name(),
        reef_tsc.map_or("-".into(), |hz| format!("{:.0}", hz as f64 / 1e6)),
        linux_tsc.map_or("-".into(), |hz| format!("{:.0}", hz as f64 / 1e6)),
    );
    let results = json!({
        "benchmark": "net round trips",
        "accelerator": options.accel.name(),
        "cores": CORES,
        "quick": options.quick,
        "tsc_hz": { "reef": reef_tsc, "linux": linux_tsc },
        "round_trips": round_trips,
        "errors": { "reef": reef.as_ref().and_then(|r| r.error.clone()),
                    "linux": linux.as_ref().and_then(|r| r.error.clone()) },
        "seconds": started.elapsed().as_secs_f64(),
    });
    let directory = common::write_results(&results, "net-round-trip.json")?;
    round_trip::plot(
        &directory,
        options.accel.name(),
        reef.as_ref().map(|r| &r.round_trips),
        linux.as_ref().map(|r| &r.round_trips),
    );
    Ok(0)
}

/// webd's table, its JSON (`results/net.json`) and its plots.
fn report_webd(
    options: &Options,
    sizes: Sizes,
    reef: &Option<SystemRun>,
    linux: &Option<SystemRun>,
    started: Instant,
) -> Result<(), String> {
    let (reef, linux) = (reef.as_ref(), linux.as_ref());
    let figure = |run: Option<&SystemRun>, placement: &str, read: Reading| {
        run.and_then(|r| r.figures.get(placement)).and_then(read)
    };
    println!(
        "bench net ({}, {CORES} cores; 1 KiB answers: {} keep-alive requests over {} connections, {} requests of a \
         connection each by one client; {} MiB transfers)",
        options.accel.name(),
        sizes.requests,
        sizes.connections,
        sizes.close_requests,
        sizes.transfer_mib
    );
    println!("{:<32} {:>10} {:>10} {:>7} {:>7}  met", "figure", "Reef", "Linux", "ratio", "goal");
    let mut table = Vec::new();
    for (name, placement, read, unit, goal) in rows() {
        let (r, l) = (figure(reef, placement, read), figure(linux, placement, read));
        let ratio = match (r, l) {
            (Some(r), Some(l)) if l > 0.0 => Some(r / l),
            _ => None,
        };
        let text = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        println!(
            "{name:<32} {:>10} {:>10} {:>7} {:>7}  {}",
            text(r),
            text(l),
            ratio.map_or("-".into(), |r| format!("{r:.2}")),
            format!(">={goal}"),
            ratio.map_or("-", |r| if r >= goal { "yes" } else { "no" })
        );
        table.push(
            json!({ "figure": name, "unit": unit, "reef": r, "linux": l, "ratio": ratio, "goal_at_least": goal }),
        );
    }
    println!("latency, median [p5, p95] of each request (host clock):");
    for placement in &PLACEMENTS {
        for (kind, pick) in [
            ("keep-alive", (|f: &Figures| f.keep_alive.clone()) as fn(&Figures) -> Option<LoadOutcome>),
            ("close", |f: &Figures| f.close.clone()),
        ] {
            let of = |run: Option<&SystemRun>| run.and_then(|r| r.figures.get(placement.name)).and_then(pick);
            println!(
                "  {kind:<10} {:<7} Reef {:<28} Linux {}",
                placement.name,
                latency_text(of(reef).as_ref()),
                latency_text(of(linux).as_ref())
            );
        }
    }
    let frames = reef.and_then(|r| frames_per_interrupt(&r.serial));
    println!(
        "Reef's frames received per interrupt after both loads (/proc/reef/net; Popcorn 1.6-9.3): {}",
        frames.map_or("-".into(), |f| format!("{f:.2}"))
    );
    for (system, run) in [("Reef", reef), ("Linux", linux)] {
        for placement in &PLACEMENTS {
            if let Some(why) = run.and_then(|r| r.figures.get(placement.name)).and_then(|f| f.unreachable.as_ref()) {
                println!("{system}, {}: webd never answered: {why}", placement.name);
            }
        }
    }
    let results = json!({
        "benchmark": "net",
        "accelerator": options.accel.name(),
        "cores": CORES,
        "quick": options.quick,
        "tsc_hz": reef.and_then(|r| common::guest_tsc_hz(&r.serial)),
        "load": { "keep_alive_connections": sizes.connections, "keep_alive_requests": sizes.requests,
                  "close_clients": 1, "close_requests": sizes.close_requests, "response_bytes": 1024,
                  "transfer_bytes": sizes.transfer_mib << 20,
                  "load_limit_s": sizes.load_limit.as_secs(), "transfer_limit_s": sizes.transfer_limit.as_secs() },
        "figures": table,
        "reef": run_json(reef),
        "linux": run_json(linux),
        "reef_frames_per_interrupt": frames,
        "tcp_and_unix_round_trip": "results/net-round-trip.json",
        "seconds": started.elapsed().as_secs_f64(),
    });
    let directory = common::write_results(&results, "net.json")?;
    plots(&directory, options, reef, linux);
    Ok(())
}

/// `net.png`: requests/s, Reef and Linux side by side; `net-transfer.png`: MB/s.
fn plots(directory: &std::path::Path, options: &Options, reef: Option<&SystemRun>, linux: Option<&SystemRun>) {
    for (file, unit, title) in
        [("net.png", "req/s", "requests/s, 1 KiB"), ("net-transfer.png", "MB/s", "MB/s, one transfer")]
    {
        let mut groups = Vec::new();
        let (mut reef_values, mut linux_values) = (Vec::new(), Vec::new());
        for (name, placement, read, row_unit, _) in rows() {
            if row_unit != unit {
                continue;
            }
            let value = |run: Option<&SystemRun>| run.and_then(|r| r.figures.get(placement)).and_then(read);
            let (r, l) = (value(reef), value(linux));
            if r.is_none() && l.is_none() {
                continue;
            }
            groups.push(name.replace(&format!("{unit} "), ""));
            reef_values.push(r.unwrap_or(0.0));
            linux_values.push(l.unwrap_or(0.0));
        }
        if groups.is_empty() {
            eprintln!("xtask: no {file}: nothing measured");
            continue;
        }
        let path = directory.join(file);
        match plot::grouped_bar_chart(
            &path,
            &format!("webd: {title} ({})", options.accel.name()),
            unit,
            &groups,
            &["Reef".to_string(), "Linux".to_string()],
            &[reef_values, linux_values],
            false,
        ) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(error) => eprintln!("xtask: no {file}: {error}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_fit_and_hold_no_marker() {
        let options = parse_options(&[]).unwrap();
        for reef in [true, false] {
            let script = script(reef, &options);
            assert!(!script.contains(DONE), "{script}");
            assert!(PLACEMENTS.iter().all(|p| !script.contains(&ready_marker(p))), "{script}");
        }
        qemu::exec_argument(&script(true, &options)).unwrap();
        assert!(script(true, &options)
            .starts_with("on 0 /bin/webd --port 80 & read go; kill $!; wait; cat /proc/reef/net; on 2 "));
        assert!(script(false, &options).contains("taskset 4 /bin/webd --port 81 &"));
        assert!(script(true, &options).contains("done; done; echo bench-net-"), "the round trips after webd");
        let only = parse_options(&["--round-trips-only".into()]).unwrap();
        assert!(script(true, &only).starts_with("for o in tcp unix pipe; "), "{}", script(true, &only));
    }

    #[test]
    fn options() {
        let words = |line: &str| line.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let options = parse_options(&words("--accel tcg --quick --no-linux")).unwrap();
        assert_eq!(options, Options { accel: Accel::Tcg, quick: true, linux: false, webd: true });
        assert!(parse_options(&words("--runs 3")).unwrap_err().contains(USAGE));
    }

    #[test]
    fn frames_per_interrupt_is_the_last_line() {
        let serial = "frames received per interrupt: 1.00\nx\n  frames received per interrupt: 2.50\n";
        assert_eq!(frames_per_interrupt(serial), Some(2.5));
        assert_eq!(frames_per_interrupt("nothing"), None);
    }
}
