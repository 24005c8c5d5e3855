//! pingpong: the round-trip latency of a service on another core, over time (Barrelfish/DC
//! figure 4), on Reef and Linux alike.
#![doc = include_str!("../README.md")]

mod link;

use link::{End, Over, Rendezvous};
use rt::place::Place;
use std::io::{self, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

/// How long the TSC is counted against the monotonic clock.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(50);
/// Round trips at most (their samples are kept in memory and printed at the end).
const MAX_ROUNDS: usize = 1_000_000;
/// Samples on one `PINGPONG-SAMPLES` line.
const SAMPLES_PER_LINE: usize = 100;
/// The largest message.
const MAX_SIZE: usize = 65_536;

const USAGE: &str = "\
usage: pingpong [--over pipe|tcp|unix] [--size B] [--server-core N] [--client-core M]
                [--rounds R] [--interval-us U] [--warmup W]
       pingpong --mark LABEL

  --over WHAT      what carries the messages: two pipes (the default), a TCP connection
                   over 127.0.0.1 (TCP_NODELAY), or socketpair(AF_UNIX, SOCK_STREAM)
  --size B         bytes of each message, 1 to 65536 (default 1)

  --server-core N  the core the server process answers on (default 3)
  --client-core M  the core the client process times the round trips on (default 1)
  --rounds R       timed round trips (default 4000, at most 1000000)
  --interval-us U  one round trip starts every U microseconds (default 250)
  --warmup W       untimed round trips first (default 100)
  --mark LABEL     print `PINGPONG-MARK LABEL <tsc>` and exit";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Options {
    over: Over,
    size: usize,
    server_core: usize,
    client_core: usize,
    rounds: usize,
    interval_us: u64,
    warmup: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Mode {
    Run(Options),
    Mark(String),
}

fn parse(arguments: &[String]) -> Result<rt::cli::Command<Mode>, String> {
    let mut options = Options {
        over: Over::Pipe,
        size: 1,
        server_core: 3,
        client_core: 1,
        rounds: 4000,
        interval_us: 250,
        warmup: 100,
    };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let text = words.next().ok_or_else(|| format!("{name} needs a number"))?;
            text.parse().map_err(|_| format!("{name}: `{text}` is not a number"))
        };
        match word.as_str() {
            "--help" | "-h" => return Ok(rt::cli::Command::Help),
            "--mark" => {
                let label = words.next().ok_or("--mark needs a label")?;
                return Ok(rt::cli::Command::Run(Mode::Mark(label.clone())));
            }
            "--over" => options.over = Over::parse(words.next().ok_or("--over needs pipe, tcp or unix")?)?,
            "--size" => options.size = value(word)? as usize,
            "--server-core" => options.server_core = value(word)? as usize,
            "--client-core" => options.client_core = value(word)? as usize,
            "--rounds" => options.rounds = value(word)? as usize,
            "--interval-us" => options.interval_us = value(word)?,
            "--warmup" => options.warmup = value(word)? as usize,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if !(1..=MAX_ROUNDS).contains(&options.rounds) {
        return Err(format!("--rounds must be 1 to {MAX_ROUNDS}"));
    }
    if !(1..=MAX_SIZE).contains(&options.size) {
        return Err(format!("--size must be 1 to {MAX_SIZE}"));
    }
    if options.server_core == options.client_core {
        return Err("the server and the client need two cores".into());
    }
    Ok(rt::cli::Command::Run(Mode::Run(options)))
}

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let mode = match rt::cli::options_or_exit("pingpong", USAGE, parse(&arguments)) {
        Ok(mode) => mode,
        Err(status) => return status,
    };
    let result = match mode {
        Mode::Mark(label) => {
            println!("PINGPONG-MARK {label} {}", rt::tsc::read());
            Ok(())
        }
        Mode::Run(options) => run(&options),
    };
    rt::cli::exit_status("pingpong", "PINGPONG", result)
}

/// Puts the calling process on `core`: on Reef it moves there (a process may move itself),
/// on Linux it pins itself there.
fn go_to(core: usize) -> Result<(), String> {
    match Place::find() {
        Place::Reef { core: here, .. } if here == core => Ok(()),
        Place::Reef { .. } => {
            rt::roles::move_process(None, core).map(drop).map_err(|error| format!("moving to core {core}: {error}"))
        }
        Place::Linux { .. } => rt::pin_current_thread(core).map_err(|error| format!("pinning to CPU {core}: {error}")),
    }
}

fn run(options: &Options) -> Result<(), String> {
    let tsc_hz = rt::tsc::calibrate(CALIBRATION_WINDOW);
    let rendezvous = Rendezvous::prepare(options.over)?;
    // SAFETY: the process has one thread here, so the child may run any code after fork.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if child == 0 {
        let status = match serve(options, rendezvous) {
            Ok(()) => 0,
            Err(message) => {
                println!("PINGPONG-ERROR server: {message}");
                1
            }
        };
        std::process::exit(status);
    }
    let result =
        go_to(options.client_core).and_then(|()| rendezvous.client_end()).and_then(|end| client(options, tsc_hz, end));
    // The client's end is closed now: the server sees the end of its requests and exits. A
    // client that never reached the server leaves it waiting (in `accept`): it is ended.
    if result.is_err() {
        // SAFETY: `kill` takes any pid and signal; `child` is this process's child.
        unsafe { libc::kill(child, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: `child` is this process's child; `status` is a valid place for its status.
    unsafe { libc::waitpid(child, &mut status, 0) };
    result
}

/// The server: on its core, answers every message with itself until the requests end.
fn serve(options: &Options, rendezvous: Rendezvous) -> Result<(), String> {
    go_to(options.server_core)?;
    let mut end = rendezvous.server_end()?;
    let mut message = vec![0u8; options.size];
    loop {
        // The first byte tells a message from the end of the requests; the rest are read whole.
        match end.read(&mut message) {
            Ok(0) => return Ok(()),
            Ok(got) => end.read_exact(&mut message[got..]).map_err(|error| format!("reading a request: {error}"))?,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(format!("reading a request: {error}")),
        }
        end.write_all(&message).map_err(|error| format!("answering: {error}"))?;
    }
}

/// The client: on its core, `warmup` round trips, then `rounds` timed ones, one every
/// `interval_us`; prints them and their summary.
fn client(options: &Options, tsc_hz: u64, mut end: Box<dyn End>) -> Result<(), String> {
    let interval = options.interval_us * tsc_hz / 1_000_000;
    let mut message = vec![7u8; options.size];
    let mut round_trip = || -> Result<u64, String> {
        let start = rt::tsc::read();
        end.write_all(&message).map_err(|error| format!("sending: {error}"))?;
        end.read_exact(&mut message).map_err(|error| format!("reading the answer: {error}"))?;
        Ok(rt::tsc::read() - start)
    };
    for _ in 0..options.warmup {
        round_trip()?;
    }
    let mut starts = Vec::with_capacity(options.rounds);
    let mut cycles = Vec::with_capacity(options.rounds);
    let base = rt::tsc::read();
    let mut next = base;
    for _ in 0..options.rounds {
        while rt::tsc::read() < next {
            std::hint::spin_loop();
        }
        starts.push(rt::tsc::read());
        cycles.push(round_trip()?);
        next += interval;
    }
    let to_ns = |cycles: u64| (u128::from(cycles) * 1_000_000_000 / u128::from(tsc_hz.max(1))) as u64;
    println!(
        "PINGPONG-CONFIG rounds={} over={} size={} interval_us={} warmup={} tsc_hz={tsc_hz} server_core={} \
         client_core={} base_tsc={base} {}",
        options.rounds,
        options.over.name(),
        options.size,
        options.interval_us,
        options.warmup,
        options.server_core,
        options.client_core,
        Place::find().fields(),
    );
    let pairs: Vec<String> = starts
        .iter()
        .zip(&cycles)
        .map(|(&start, &rtt)| format!("{}:{}", to_ns(start - base) / 1000, to_ns(rtt)))
        .collect();
    for line in pairs.chunks(SAMPLES_PER_LINE) {
        println!("PINGPONG-SAMPLES {}", line.join(" "));
    }
    let (worst, at) = cycles.iter().zip(&starts).max_by_key(|(rtt, _)| **rtt).map_or((0, base), |(r, s)| (*r, *s));
    let mut sorted = cycles.clone();
    sorted.sort_unstable();
    let percentile = |percent: f64| samples::percentile(&sorted, percent).map_or(0, to_ns);
    println!(
        "PINGPONG rounds={} over={} size={} median_ns={} p5_ns={} p95_ns={} p99_ns={} max_ns={} max_at_us={} \
         tsc_hz={tsc_hz}",
        options.rounds,
        options.over.name(),
        options.size,
        percentile(50.0),
        percentile(5.0),
        percentile(95.0),
        percentile(99.0),
        to_ns(worst),
        to_ns(at - base) / 1000,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_command_line() {
        let parsed = parse(&words("--server-core 2 --client-core 0 --rounds 10 --interval-us 100")).unwrap();
        let rt::cli::Command::Run(Mode::Run(options)) = parsed else { panic!("a run") };
        assert_eq!((options.server_core, options.client_core, options.rounds, options.interval_us), (2, 0, 10, 100));
        assert_eq!((options.over, options.size), (Over::Pipe, 1), "two pipes and one byte unless asked");
        let parsed = parse(&words("--over tcp --size 64")).unwrap();
        let rt::cli::Command::Run(Mode::Run(options)) = parsed else { panic!("a run") };
        assert_eq!((options.over, options.size), (Over::Tcp, 64));
        assert!(parse(&words("--over udp")).unwrap_err().contains("pipe, tcp or unix"));
        assert!(parse(&words("--size 0")).is_err());
        assert!(parse(&words("--size 65537")).is_err());
        assert_eq!(parse(&words("--mark before")).unwrap(), rt::cli::Command::Run(Mode::Mark("before".into())));
        assert!(parse(&words("--server-core 1 --client-core 1")).unwrap_err().contains("two cores"));
        assert!(parse(&words("--rounds 0")).is_err());
        assert!(parse(&words("--rounds x")).unwrap_err().contains("not a number"));
        assert!(parse(&words("--bogus")).is_err());
        assert_eq!(parse(&words("--help")).unwrap(), rt::cli::Command::Help);
    }

    #[test]
    fn round_trips_between_two_processes_on_linux() {
        // Two CPUs may not exist where the tests run: 0 and 0 is refused by the parser only.
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        if cpus < 2 {
            return;
        }
        for (over, size) in [(Over::Pipe, 1), (Over::Tcp, 1), (Over::Tcp, 64), (Over::Unix, 64)] {
            let options =
                Options { over, size, server_core: 1, client_core: 0, rounds: 50, interval_us: 10, warmup: 5 };
            run(&options).unwrap_or_else(|error| panic!("{over:?}, {size} bytes: {error}"));
        }
    }
}
