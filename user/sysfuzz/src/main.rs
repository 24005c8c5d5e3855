//! sysfuzz: random system calls with random arguments; it must survive them, and so must the kernel.
#![doc = include_str!("../README.md")]

mod errno;
mod full_ring;
mod probes;
mod random;
mod rules;
mod scratch;
mod scribble;

use random::Random;
use rules::{Action, Rule};
use scratch::Scratch;
use std::process::ExitCode;

const USAGE: &str = "usage: sysfuzz [--seed S] [--calls N] [--threads T] [--trace]\n       \
                     sysfuzz --scribble <kernel core> [--seed S] [--calls N]   (a syspage, and garbage in it)\n       \
                     sysfuzz --full-ring <kernel core> [--rounds N]   (full rings of calls the kernel core hands home: each runs once)";
const DEFAULT_CALLS: u64 = 100_000;
/// Enough threads to load every core of a small machine; more only adds noise.
const MAX_THREADS: usize = 64;
/// One draw in this many is one of Reef's own numbers (or the first one past them).
const REEF_ODDS: u64 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Options {
    seed: u64,
    calls: u64,
    threads: usize,
    /// Print each call before it is made, so the last line before a crash names it.
    trace: bool,
    /// `--scribble <kc>`: scribble on a syspage served by that kernel core instead.
    scribble: Option<usize>,
    /// `--full-ring <kc>`: full rings of calls on a syspage served by that kernel core instead.
    full_ring: Option<usize>,
    /// `--rounds N`: how many full rings (with `--full-ring`).
    rounds: usize,
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

impl Options {
    /// Every option at its default, and `seed`.
    fn with_seed(seed: u64) -> Self {
        Options {
            seed,
            calls: DEFAULT_CALLS,
            threads: 1,
            trace: false,
            scribble: None,
            full_ring: None,
            rounds: full_ring::DEFAULT_ROUNDS,
        }
    }
}

/// `text` as a number from 1 to `most`, or what `option` takes.
fn count_up_to(option: &str, text: &str, most: usize) -> Result<usize, String> {
    text.parse()
        .ok()
        .filter(|count| (1..=most).contains(count))
        .ok_or(format!("{option} takes a number from 1 to {most}"))
}

/// Parses the arguments after the program name; `default_seed` is used without `--seed`.
fn parse(arguments: &[String], default_seed: u64) -> Result<Options, String> {
    let mut options = Options::with_seed(default_seed);
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let mut value = || rest.next().ok_or_else(|| format!("{argument} needs a value"));
        match argument.as_str() {
            "--seed" => options.seed = parse_number(value()?).ok_or("--seed takes a number (or 0x...)")?,
            "--calls" => options.calls = parse_number(value()?).ok_or("--calls takes a number")?,
            "--threads" => options.threads = count_up_to(argument, value()?, MAX_THREADS)?,
            "--trace" => options.trace = true,
            "--scribble" => {
                options.scribble = Some(value()?.parse().map_err(|_| "--scribble takes a kernel core's number")?)
            }
            "--full-ring" => {
                options.full_ring = Some(value()?.parse().map_err(|_| "--full-ring takes a kernel core's number")?)
            }
            "--rounds" => options.rounds = count_up_to(argument, value()?, full_ring::MAX_ROUNDS)?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(options)
}

/// A seed from the time-stamp counter, so that runs differ; it is printed to replay one.
fn seed_from_the_clock() -> u64 {
    // SAFETY: RDTSC reads a counter and has no preconditions; Linux and Reef leave it enabled in
    // user mode (CR4.TSD clear).
    let cycles = unsafe { core::arch::x86_64::_rdtsc() };
    // Mixed, so that runs started close together get unrelated seeds.
    Random::new(cycles).next()
}

/// What the calls of one thread (or all of them, summed) returned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tally {
    calls: u64,
    successes: u64,
    /// Calls that failed, by errno (index 1..=4095).
    by_errno: Vec<u64>,
}

impl Tally {
    fn new() -> Self {
        Self { calls: 0, successes: 0, by_errno: vec![0; 4096] }
    }

    fn record(&mut self, result: rt::raw::Return) {
        self.calls += 1;
        match result.errno() {
            Some(errno) => self.by_errno[errno as usize] += 1,
            None => self.successes += 1,
        }
    }

    fn add(&mut self, other: &Tally) {
        self.calls += other.calls;
        self.successes += other.successes;
        for (total, count) in self.by_errno.iter_mut().zip(&other.by_errno) {
            *total += count;
        }
    }

    fn errors(&self) -> u64 {
        self.by_errno.iter().sum()
    }

    /// `(errno, count)` of every errno seen, most frequent first.
    fn seen(&self) -> Vec<(i32, u64)> {
        let mut seen: Vec<(i32, u64)> = (1..self.by_errno.len())
            .filter(|&errno| self.by_errno[errno] > 0)
            .map(|errno| (errno as i32, self.by_errno[errno]))
            .collect();
        seen.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        seen
    }
}

/// A system-call number to issue: one of Linux's or, one time in `REEF_ODDS`, one of Reef's
/// or the first number past them; never one the rules skip.
fn draw_number(random: &mut Random) -> u64 {
    loop {
        let number = if random.one_in(REEF_ODDS) {
            abi::call::FIRST + random.below(abi::call::END - abi::call::FIRST + 1)
        } else {
            random.below(rules::LAST_LINUX_NUMBER + 1)
        };
        if !matches!(rules::rule(number), Some(Rule { action: Action::Skip, .. })) {
            return number;
        }
    }
}

/// Six arguments for call `number`, respecting its rule; and whether any points into the buffer.
fn draw_arguments(random: &mut Random, number: u64, buffer: u64) -> ([u64; 6], bool) {
    let (constraints, pins) = match rules::rule(number) {
        Some(Rule { action: Action::Avoid(constraints), .. }) => (*constraints, &[][..]),
        Some(Rule { action: Action::Pin(pins), .. }) => (&[][..], *pins),
        _ => (&[][..], &[][..]),
    };
    let mut into_buffer = false;
    let mut drawn = [0u64; 6];
    for (position, slot) in drawn.iter_mut().enumerate() {
        let (mut value, mut points_in) = random::argument(random, buffer, scratch::BUFFER_SIZE as u64);
        let avoided = constraints.iter().find(|(constrained, _)| *constrained == position).map(|(_, values)| *values);
        if let Some(values) = avoided {
            // The kernel reads these arguments as 32-bit integers: compare those.
            while values.contains(&(value as u32)) {
                (value, points_in) = random::argument(random, buffer, scratch::BUFFER_SIZE as u64);
            }
        }
        if let Some(&(_, pinned)) = pins.iter().find(|(pinned, _)| *pinned == position) {
            (value, points_in) = (pinned, false);
        }
        into_buffer |= points_in;
        *slot = value;
    }
    (drawn, into_buffer)
}

/// Issues `calls` random calls from seed `seed` on the calling thread.
fn fuzz(thread: usize, seed: u64, calls: u64, trace: bool) -> Result<Tally, String> {
    let mut random = Random::new(seed);
    let mut scratch = Scratch::new().map_err(|error| format!("thread {thread}: buffer: {error}"))?;
    scratch.refill(&mut random);
    let buffer = scratch.base() as u64;
    let mut tally = Tally::new();
    for index in 0..calls {
        let number = draw_number(&mut random);
        let (arguments, into_buffer) = draw_arguments(&mut random, number, buffer);
        if trace {
            let shown: Vec<String> = arguments.iter().map(|argument| format!("{argument:#x}")).collect();
            println!("sysfuzz: thread {thread} call {index} number {number} arguments {}", shown.join(" "));
        }
        // SAFETY: the rules keep out every call that could end, stop or block the fuzzer, or
        // change its memory map, signal handling, thread-local storage or standard descriptors
        // (`rules.rs`, one reason per entry); the arguments point nowhere but into the scratch
        // buffer, which nothing else uses and whose guard pages stop over-long copies, or at
        // addresses that are never mapped (null and the first 64 KiB, the top page of user
        // space, the kernel half, non-canonical ones), or are random 64-bit values, which land
        // in mapped memory with negligible odds.
        let result = unsafe { rt::raw::syscall(number, arguments) };
        tally.record(result);
        if into_buffer {
            // What the call wrote (a path from getcwd or readlink) must not become a path of
            // the next one.
            scratch.refill(&mut random);
        }
    }
    Ok(tally)
}

/// Runs the threads (or the calling thread alone for one) and sums what they found.
fn run(options: &Options) -> Result<Tally, String> {
    if options.threads == 1 {
        return fuzz(0, options.seed, options.calls, options.trace);
    }
    let threads = options.threads as u64;
    let workers: Vec<_> = (0..options.threads)
        .map(|thread| {
            let calls = options.calls / threads + u64::from((thread as u64) < options.calls % threads);
            let seed = options.seed.wrapping_add(thread as u64);
            let trace = options.trace;
            std::thread::Builder::new()
                .name(format!("fuzz{thread}"))
                .spawn(move || fuzz(thread, seed, calls, trace))
                .map_err(|error| format!("starting thread {thread}: {error}"))
        })
        .collect::<Result<_, _>>()?;
    let mut total = Tally::new();
    for (thread, worker) in workers.into_iter().enumerate() {
        let tally = worker.join().map_err(|_| format!("thread {thread} panicked"))??;
        total.add(&tally);
    }
    Ok(total)
}

/// `sysfuzz: results ok=<n> ENOSYS=<n> ...`, most frequent errno first.
fn results_line(tally: &Tally) -> String {
    let mut line = format!("sysfuzz: results ok={}", tally.successes);
    for (errno, count) in tally.seen() {
        let name = errno::name(errno).map_or_else(|| format!("E{errno}"), str::to_string);
        line.push_str(&format!(" {name}={count}"));
    }
    line
}

/// The final `TEST sysfuzz` line: `fail` when the kernel returned an errno Linux does not define.
fn test_line(tally: &Tally, seed: u64) -> (String, bool) {
    let unknown: Vec<String> = tally
        .seen()
        .into_iter()
        .filter(|&(errno, _)| errno::name(errno).is_none())
        .map(|(errno, count)| format!("{errno}x{count}"))
        .collect();
    let summary =
        format!("calls={} errors={} distinct-errno={} seed={seed}", tally.calls, tally.errors(), tally.seen().len());
    if unknown.is_empty() {
        (format!("TEST sysfuzz ok {summary}"), true)
    } else {
        (format!("TEST sysfuzz fail errno-not-in-linux={} {summary}", unknown.join(",")), false)
    }
}

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&arguments, seed_from_the_clock()) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("sysfuzz: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(kernel_core) = options.scribble {
        println!("sysfuzz: scribbling on a syspage served by core {kernel_core}, seed {}", options.seed);
        return match scribble::run(kernel_core, options.seed, options.calls) {
            Ok(detail) => {
                println!("TEST sysfuzz-scribble ok {detail} seed={}", options.seed);
                ExitCode::SUCCESS
            }
            Err(problem) => {
                println!("TEST sysfuzz-scribble fail {problem} seed={}", options.seed);
                ExitCode::FAILURE
            }
        };
    }
    if let Some(kernel_core) = options.full_ring {
        println!("sysfuzz: full rings on a syspage served by core {kernel_core}");
        return match full_ring::run(kernel_core, options.rounds) {
            Ok(detail) => {
                println!("TEST sysfuzz-full-ring ok {detail}");
                ExitCode::SUCCESS
            }
            Err(problem) => {
                println!("TEST sysfuzz-full-ring fail {problem}");
                ExitCode::FAILURE
            }
        };
    }
    println!("sysfuzz: seed {} calls {} threads {}", options.seed, options.calls, options.threads);
    let probes = probes::probe_control();
    match &probes {
        Some(Ok(count)) => println!("sysfuzz: bad pointers: reef_control refused all {count} with EFAULT"),
        Some(Err(problem)) => println!("sysfuzz: bad pointers: {problem}"),
        None => {}
    }
    match run(&options) {
        Ok(tally) => {
            println!("{}", results_line(&tally));
            let (mut line, mut ok) = test_line(&tally, options.seed);
            if let Some(Err(problem)) = probes {
                line = format!("TEST sysfuzz fail bad-pointers: {problem} seed={}", options.seed);
                ok = false;
            }
            println!("{line}");
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(message) => {
            println!("TEST sysfuzz fail {message} seed={}", options.seed);
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options() {
        let defaults = Options::with_seed(5);
        assert_eq!(parse(&[], 5), Ok(defaults));
        assert_eq!(
            parse(&strings(&["--seed", "0x10", "--calls", "7", "--threads", "3", "--trace"]), 5),
            Ok(Options { seed: 16, calls: 7, threads: 3, trace: true, ..defaults })
        );
        assert_eq!(parse(&strings(&["--full-ring", "3"]), 5), Ok(Options { full_ring: Some(3), ..defaults }));
        assert_eq!(
            parse(&strings(&["--full-ring", "3", "--rounds", "500"]), 5),
            Ok(Options { full_ring: Some(3), rounds: 500, ..defaults })
        );
        assert!(parse(&strings(&["--rounds", "0"]), 5).is_err());
        assert!(parse(&strings(&["--full-ring", "x"]), 5).unwrap_err().contains("kernel core"));
        assert!(parse(&strings(&["--threads", "0"]), 5).is_err());
        assert!(parse(&strings(&["--seed"]), 5).unwrap_err().contains("needs a value"));
        assert!(parse(&strings(&["--bogus"]), 5).is_err());
    }

    #[test]
    fn drawn_numbers_follow_the_rules() {
        let mut random = Random::new(3);
        let mut reef = 0;
        for _ in 0..50_000 {
            let number = draw_number(&mut random);
            assert!(number <= rules::LAST_LINUX_NUMBER || (abi::call::FIRST..=abi::call::END).contains(&number));
            assert_ne!(rules::rule(number).map(|rule| rule.action), Some(Action::Skip), "{number}");
            reef += usize::from(number >= abi::call::FIRST);
        }
        assert!(reef > 300, "Reef's numbers come up: {reef}");
    }

    #[test]
    fn avoided_arguments_never_come_up() {
        let mut random = Random::new(9);
        for number in [16u64, 72, 157, 331, 436] {
            let Some(Rule { action: Action::Avoid(constraints), .. }) = rules::rule(number) else {
                panic!("{number} has an Avoid rule");
            };
            for _ in 0..20_000 {
                let (drawn, _) = draw_arguments(&mut random, number, 0x10_0000);
                for (position, values) in *constraints {
                    assert!(!values.contains(&(drawn[*position] as u32)), "{number}: {:#x}", drawn[*position]);
                }
            }
        }
    }

    #[test]
    fn pinned_arguments_keep_their_value() {
        let mut random = Random::new(4);
        for number in [13u64, 14, 62, 131, 200, 234] {
            let Some(Rule { action: Action::Pin(pins), .. }) = rules::rule(number) else {
                panic!("{number} has a Pin rule");
            };
            for _ in 0..2_000 {
                let (drawn, _) = draw_arguments(&mut random, number, 0x10_0000);
                for (position, value) in *pins {
                    assert_eq!(drawn[*position], *value, "{number}");
                }
            }
        }
    }

    #[test]
    fn lines() {
        let mut tally = Tally::new();
        for result in [0, 3, -38, -38, -14, -512] {
            tally.record(rt::raw::Return(result));
        }
        assert_eq!(results_line(&tally), "sysfuzz: results ok=2 ENOSYS=2 EFAULT=1 E512=1");
        let (line, ok) = test_line(&tally, 11);
        assert!(!ok);
        assert_eq!(line, "TEST sysfuzz fail errno-not-in-linux=512x1 calls=6 errors=4 distinct-errno=3 seed=11");
        let mut clean = Tally::new();
        clean.record(rt::raw::Return(-2));
        clean.add(&clean.clone());
        assert_eq!(
            test_line(&clean, 1),
            ("TEST sysfuzz ok calls=2 errors=2 distinct-errno=1 seed=1".to_string(), true)
        );
    }
}
