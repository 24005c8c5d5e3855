//! The command line: how many quanta, how long each, where the results go.

/// Quanta at most: the counts and times of 10 million quanta take 120 MB.
pub const MAX_QUANTA: usize = 10_000_000;
/// The longest quantum, in ns (one second).
pub const MAX_QUANTUM_NS: u64 = 1_000_000_000;
/// The shortest quantum, in ns (one microsecond): below it a quantum holds a handful of work
/// units and a TSC read or two.
pub const MIN_QUANTUM_NS: u64 = 1_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Quanta measured.
    pub quanta: usize,
    /// Length of one quantum, in ns.
    pub quantum_ns: u64,
    /// Quanta run first and not kept: caches, TLB and (under TCG) the translated code settle.
    pub warmup: usize,
    /// xorshift steps in one work unit.
    pub work: u32,
    /// Write `<prefix>.counts` and `<prefix>.times`.
    pub out: Option<String>,
    /// Print the counts and times on stdout after the run, between `FTQ-DATA` lines.
    pub dump: bool,
    /// Read `/proc/interrupts` just before and just after the quanta and print both.
    pub interrupts: bool,
    /// Only the summary line (and what `--dump`/`--interrupts` ask for).
    pub quiet: bool,
    /// Run on this CPU: Linux pins the thread there (`sched_setaffinity`); on Reef the program
    /// must already run on that core (`on N`, `execac N`), or it stops.
    pub cpu: Option<usize>,
}

/// xorshift steps per work unit when `--work` does not say: with the TSC read, some 50
/// cycles on hardware, so a 50 µs quantum holds over 2000 units and a loss of 0.1 % is two
/// units, clear of the one-unit jitter of where a quantum's end falls in a unit (HARE's runs
/// counted "just over 2000" in 50 000 cycles). Under TCG a unit takes about 60 ns.
pub const DEFAULT_WORK: u32 = 8;
/// Warm-up quanta when `--warmup` does not say.
pub const DEFAULT_WARMUP: usize = 100;

pub const USAGE: &str = "\
usage: ftq [--out PREFIX] [--quiet] [--dump] [--interrupts] [--cpu N] [--warmup N] [--work N]
           <quanta> <quantum_us>

  <quanta>      how many quanta to measure (1 to 10000000)
  <quantum_us>  the length of one quantum in microseconds (1 to 1000000; a decimal such as
                2.5 is taken to the nanosecond)
  --out PREFIX  write PREFIX.counts (work units per quantum, one a line) and PREFIX.times
                (the TSC at the start of each quantum, one a line)
  --quiet       print only the summary line
  --dump        after the run print the counts and times compactly between FTQ-DATA lines
  --interrupts  print /proc/interrupts as read just before and just after the quanta
  --cpu N       run on CPU N: pinned there on Linux; on Reef ftq must already run there
  --warmup N    quanta run first and not kept (default 100)
  --work N      xorshift steps in one work unit (default 8)";

/// What the command line asks for: a run with these options, or the usage.
pub type Request = rt::cli::Command<Options>;

/// A quantum length in µs, decimal, as whole nanoseconds.
fn quantum_ns(text: &str) -> Option<u64> {
    let microseconds: f64 = text.parse().ok().filter(|value: &f64| value.is_finite())?;
    let ns = (microseconds * 1000.0).round();
    (ns >= MIN_QUANTUM_NS as f64 && ns <= MAX_QUANTUM_NS as f64).then_some(ns as u64)
}

/// Parses the arguments after the program name.
pub fn parse(arguments: &[String]) -> Result<Request, String> {
    let mut options = Options {
        quanta: 0,
        quantum_ns: 0,
        warmup: DEFAULT_WARMUP,
        work: DEFAULT_WORK,
        out: None,
        dump: false,
        interrupts: false,
        quiet: false,
        cpu: None,
    };
    let mut positional = Vec::new();
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let mut value = || rest.next().ok_or_else(|| format!("{argument} needs a value"));
        match argument.as_str() {
            "--help" | "-h" => return Ok(Request::Help),
            "--out" => options.out = Some(value()?.clone()),
            "--quiet" | "-q" => options.quiet = true,
            "--dump" => options.dump = true,
            "--interrupts" => options.interrupts = true,
            "--cpu" => {
                let text = value()?;
                options.cpu = Some(text.parse().map_err(|_| format!("--cpu takes a CPU number, not `{text}`"))?);
            }
            "--warmup" => {
                let text = value()?;
                options.warmup = text
                    .parse()
                    .ok()
                    .filter(|warmup| *warmup <= MAX_QUANTA)
                    .ok_or_else(|| format!("--warmup takes 0 to {MAX_QUANTA} quanta, not `{text}`"))?;
            }
            "--work" => {
                let text = value()?;
                options.work = text
                    .parse()
                    .ok()
                    .filter(|work| (1..=1_000_000).contains(work))
                    .ok_or_else(|| format!("--work takes 1 to 1000000 steps, not `{text}`"))?;
            }
            other if other.starts_with('-') && other.len() > 1 => return Err(format!("unknown option `{other}`")),
            other => positional.push(other.to_string()),
        }
    }
    let [quanta, quantum] = &positional[..] else {
        return Err(format!("expected <quanta> <quantum_us>, got {} argument(s)", positional.len()));
    };
    options.quanta = quanta
        .parse()
        .ok()
        .filter(|quanta| (1..=MAX_QUANTA).contains(quanta))
        .ok_or_else(|| format!("<quanta> is a number from 1 to {MAX_QUANTA}, not `{quanta}`"))?;
    options.quantum_ns = quantum_ns(quantum)
        .ok_or_else(|| format!("<quantum_us> is a length in µs from 1 to 1000000, not `{quantum}`"))?;
    Ok(Request::Run(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn options(list: &[&str]) -> Options {
        match parse(&strings(list)) {
            Ok(Request::Run(options)) => options,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_acceptance_line() {
        let options = options(&["10000", "50"]);
        assert_eq!((options.quanta, options.quantum_ns), (10_000, 50_000));
        assert_eq!((options.warmup, options.work), (DEFAULT_WARMUP, DEFAULT_WORK));
        assert!(!options.quiet && !options.dump && !options.interrupts);
        assert_eq!((options.out, options.cpu), (None, None));
    }

    #[test]
    fn everything_set() {
        let options = options(&[
            "--out",
            "/tmp/r",
            "--quiet",
            "7",
            "--dump",
            "--interrupts",
            "2.5",
            "--cpu",
            "1",
            "--warmup",
            "0",
            "--work",
            "8",
        ]);
        assert_eq!(
            options,
            Options {
                quanta: 7,
                quantum_ns: 2500,
                warmup: 0,
                work: 8,
                out: Some("/tmp/r".into()),
                dump: true,
                interrupts: true,
                quiet: true,
                cpu: Some(1)
            }
        );
        assert_eq!(parse(&strings(&["-h"])), Ok(Request::Help));
    }

    #[test]
    fn mistakes_are_named() {
        for (arguments, says) in [
            (&["10"][..], "expected <quanta> <quantum_us>"),
            (&["1", "2", "3"], "got 3"),
            (&["0", "50"], "<quanta>"),
            (&["10000001", "50"], "<quanta>"),
            (&["10", "0.5"], "<quantum_us>"),
            (&["10", "1000001"], "<quantum_us>"),
            (&["10", "NaN"], "<quantum_us>"),
            (&["10", "50", "--work", "0"], "--work"),
            (&["10", "50", "--cpu"], "needs a value"),
            (&["10", "50", "--fast"], "`--fast`"),
        ] {
            let error = parse(&strings(arguments)).unwrap_err();
            assert!(error.contains(says), "{arguments:?}: {error}");
        }
    }

    #[test]
    fn quantum_lengths_round_to_the_nanosecond() {
        assert_eq!(quantum_ns("1"), Some(1000));
        assert_eq!(quantum_ns("0.0015e3"), Some(1500));
        assert_eq!(quantum_ns("1000000"), Some(1_000_000_000));
        assert_eq!(quantum_ns("-5"), None);
        assert_eq!(quantum_ns("inf"), None);
    }
}
