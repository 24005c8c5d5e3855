//! The command line: which mechanisms, which benchmarks, how many calls, which kernel core.

/// How a call reaches the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mechanism {
    /// The `syscall` instruction (on a Reef AC: forwarded to the home TC by ICC).
    Trap,
    /// An entry of the thread's syspage, served by a kernel core (Reef only).
    Syspage,
    /// io_uring `NOP`s submitted with `io_uring_enter` (Linux only).
    Uring,
    /// io_uring `NOP`s picked up by the kernel's SQPOLL thread, completions polled (Linux only).
    UringSqpoll,
}

impl Mechanism {
    pub const ALL: [Mechanism; 4] = [Self::Trap, Self::Syspage, Self::Uring, Self::UringSqpoll];

    /// The name on the command line (`--<name>`) and in the result lines.
    pub fn name(self) -> &'static str {
        match self {
            Self::Trap => "trap",
            Self::Syspage => "syspage",
            Self::Uring => "uring",
            Self::UringSqpoll => "uring-sqpoll",
        }
    }
}

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Benchmark {
    /// Memsc table 5.1: N blocking `getppid`, each waited for before the next.
    Blocking,
    /// Memsc tables 5.2 and 5.5: `--calls` calls posted `--batch` at a time, each batch waited
    /// for as a whole.
    Batch,
    /// NIX table 1: `--threads` threads making `--per-thread` calls each.
    Threads,
}

impl Benchmark {
    pub const ALL: [Benchmark; 3] = [Self::Blocking, Self::Batch, Self::Threads];

    pub fn name(self) -> &'static str {
        match self {
            Self::Blocking => "blocking",
            Self::Batch => "batch",
            Self::Threads => "threads",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|benchmark| benchmark.name() == name)
    }
}

/// Calls of one blocking run, batch size and calls of one thread are bounded, so every buffer
/// and every run stays bounded.
pub const MAX_CALLS: usize = 1_000_000;
pub const MAX_BATCH: usize = 64;
pub const MAX_THREADS: usize = 256;
pub const MAX_REPEAT: usize = 1000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The mechanisms asked for; empty: every one that can run here.
    pub mechanisms: Vec<Mechanism>,
    pub benchmarks: Vec<Benchmark>,
    /// The kernel core serving syspages.
    pub kc: Option<usize>,
    /// Numbers of blocking calls, one figure each.
    pub counts: Vec<usize>,
    /// Batch sizes, one figure each.
    pub batches: Vec<usize>,
    /// Calls of one batch run.
    pub calls: usize,
    pub threads: usize,
    pub per_thread: usize,
    /// Runs of each batch and threads figure (and the least of each blocking figure).
    pub repeat: usize,
    /// A word on every line, so a host running several instances tells their lines apart.
    pub label: String,
    /// Linux: the CPU the program (and its threads) is pinned to.
    pub pin: Option<usize>,
    /// Linux: the CPU of the SQPOLL thread.
    pub sqpoll_cpu: Option<u32>,
    /// Start only once this many programs (this one included) reached the file: programs
    /// measured together then time the same window.
    pub start_with: Option<(String, usize)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mechanisms: Vec::new(),
            benchmarks: Benchmark::ALL.to_vec(),
            kc: None,
            counts: vec![1, 10, 100, 1000, 10_000, 100_000],
            batches: vec![1, 2, 3, 4, 8, 16, 32, 64],
            calls: 100_000,
            threads: 50,
            per_thread: 500,
            repeat: 5,
            label: "-".into(),
            pin: None,
            sqpoll_cpu: None,
            start_with: None,
        }
    }
}

impl Options {
    /// Runs of the blocking figure of `count` calls: enough for percentiles of short runs
    /// (1000 runs of one call), at least `--repeat` of long ones.
    pub fn blocking_runs(&self, count: usize) -> usize {
        (100_000 / count.max(1)).clamp(self.repeat, MAX_REPEAT.max(self.repeat))
    }
}

/// What the command line asks for: a run with these options, or the usage.
pub type Request = rt::cli::Command<Options>;

pub const USAGE: &str = "\
usage: syscallbench [--trap] [--syspage] [--uring] [--uring-sqpoll] [--kc CORE]
                    [--only blocking,batch,threads] [--counts N,N,...] [--batch N,N,...]
                    [--calls N] [--threads N] [--per-thread N] [--repeat N] [--label WORD]
                    [--pin CPU] [--sqpoll-cpu CPU] [--start-with FILE N]

  --trap, --syspage, --uring, --uring-sqpoll
                the mechanisms to measure (several may be given); without any, every one that
                can run here: trap, syspage when --kc is given, io_uring on Linux
  --kc CORE     the kernel core serving the syspages (Reef: a core made a KC with `role`)
  --only LIST   benchmarks: blocking (N blocking getppid, Memsc table 5.1), batch (--calls
                calls posted --batch at a time, Memsc tables 5.2 and 5.5), threads (--threads
                threads of --per-thread calls, NIX table 1); default all three
  --counts LIST numbers of blocking calls (default 1,10,100,1000,10000,100000)
  --batch LIST  batch sizes, 1 to 64 (default 1,2,3,4,8,16,32,64)
  --calls N     calls of one batch run (default 100000)
  --threads N   threads (default 50), --per-thread N calls each (default 500)
  --repeat N    runs of each figure (default 5; short blocking figures take more, to 1000)
  --label WORD  printed on every line (default -)
  --pin CPU     Linux: pin the program and its threads to CPU (as an AC holds its thread)
  --start-with FILE N
                start measuring only once N programs given the same FILE (a fresh one: each
                adds a byte to it) are ready, so programs measured together overlap
  --sqpoll-cpu CPU
                Linux: run the SQPOLL thread on CPU (as a KC serves the syspages)

Each figure prints one line: SYSCALLBENCH bench=... mechanism=... median_ns=... p5_ns=...
p95_ns=... (cycles too), the core it ran on and calls/s; see user/syscallbench/README.md.";

fn number(flag: &str, text: Option<&String>, range: std::ops::RangeInclusive<usize>) -> Result<usize, String> {
    let text = text.ok_or_else(|| format!("{flag} needs a value"))?;
    let value: usize = text.parse().map_err(|_| format!("{flag} takes a number, not `{text}`"))?;
    if !range.contains(&value) {
        return Err(format!("{flag} takes {} to {}, not {value}", range.start(), range.end()));
    }
    Ok(value)
}

fn list(flag: &str, text: Option<&String>, range: std::ops::RangeInclusive<usize>) -> Result<Vec<usize>, String> {
    let text = text.ok_or_else(|| format!("{flag} needs a value"))?;
    text.split(',').map(|item| number(flag, Some(&item.to_string()), range.clone())).collect()
}

pub fn parse(arguments: &[String]) -> Result<Request, String> {
    let mut options = Options::default();
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        if let Some(mechanism) = Mechanism::ALL.into_iter().find(|m| word.strip_prefix("--") == Some(m.name())) {
            if !options.mechanisms.contains(&mechanism) {
                options.mechanisms.push(mechanism);
            }
            continue;
        }
        match word.as_str() {
            "--help" | "-h" => return Ok(Request::Help),
            "--kc" => options.kc = Some(number("--kc", words.next(), 0..=4095)?),
            "--only" => {
                let names = words.next().ok_or("--only needs a value")?;
                let mut wanted = Vec::new();
                for name in names.split(',') {
                    wanted.push(
                        Benchmark::parse(name)
                            .ok_or_else(|| format!("no benchmark is called `{name}`: blocking, batch or threads"))?,
                    );
                }
                options.benchmarks = Benchmark::ALL.into_iter().filter(|b| wanted.contains(b)).collect();
            }
            "--counts" => options.counts = list("--counts", words.next(), 1..=MAX_CALLS)?,
            "--batch" => options.batches = list("--batch", words.next(), 1..=MAX_BATCH)?,
            "--calls" => options.calls = number("--calls", words.next(), 1..=MAX_CALLS)?,
            "--threads" => options.threads = number("--threads", words.next(), 1..=MAX_THREADS)?,
            "--per-thread" => options.per_thread = number("--per-thread", words.next(), 1..=MAX_CALLS)?,
            "--repeat" => options.repeat = number("--repeat", words.next(), 1..=MAX_REPEAT)?,
            "--pin" => options.pin = Some(number("--pin", words.next(), 0..=4095)?),
            "--sqpoll-cpu" => options.sqpoll_cpu = Some(number("--sqpoll-cpu", words.next(), 0..=4095)? as u32),
            "--start-with" => {
                let path = words.next().ok_or("--start-with needs a file and a count")?;
                options.start_with = Some((path.clone(), number("--start-with", words.next(), 1..=64)?));
            }
            "--label" => {
                let label = words.next().ok_or("--label needs a value")?;
                if label.is_empty() || label.contains(char::is_whitespace) || label.contains('=') {
                    return Err(format!("--label takes one word without `=`, not `{label}`"));
                }
                options.label = label.clone();
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if options.mechanisms.contains(&Mechanism::Syspage) && options.kc.is_none() {
        return Err("--syspage needs --kc CORE: the kernel core that serves the syspages".into());
    }
    options.mechanisms.sort();
    Ok(Request::Run(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn run(list: &[&str]) -> Options {
        match parse(&strings(list)) {
            Ok(Request::Run(options)) => options,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let options = run(&[]);
        assert_eq!(options, Options::default());
        assert!(options.mechanisms.is_empty(), "every mechanism that can run");
        assert_eq!(options.batches, [1, 2, 3, 4, 8, 16, 32, 64]);
        assert_eq!((options.threads, options.per_thread, options.calls), (50, 500, 100_000));
        assert_eq!(options.blocking_runs(1), 1000);
        assert_eq!(options.blocking_runs(1000), 100);
        assert_eq!(options.blocking_runs(100_000), 5);
        assert_eq!(parse(&strings(&["--help"])), Ok(Request::Help));
    }

    #[test]
    fn everything_set() {
        let options = run(&[
            "--syspage",
            "--trap",
            "--kc",
            "2",
            "--only",
            "threads,batch",
            "--counts",
            "5,7",
            "--batch",
            "64",
            "--calls",
            "1000",
            "--threads",
            "4",
            "--per-thread",
            "9",
            "--repeat",
            "2",
            "--label",
            "ac-syspage",
            "--syspage",
            "--start-with",
            "/tmp/go",
            "2",
        ]);
        assert_eq!(options.start_with, Some(("/tmp/go".to_string(), 2)));
        assert_eq!(options.mechanisms, [Mechanism::Trap, Mechanism::Syspage], "sorted, once each");
        assert_eq!(options.kc, Some(2));
        assert_eq!(options.benchmarks, [Benchmark::Batch, Benchmark::Threads]);
        assert_eq!((options.counts, options.batches), (vec![5, 7], vec![64]));
        assert_eq!((options.calls, options.threads, options.per_thread, options.repeat), (1000, 4, 9, 2));
        assert_eq!(options.label, "ac-syspage");
        assert_eq!(run(&["--uring-sqpoll", "--uring"]).mechanisms, [Mechanism::Uring, Mechanism::UringSqpoll]);
    }

    #[test]
    fn mistakes_are_named() {
        let error = |list: &[&str]| parse(&strings(list)).unwrap_err();
        assert!(error(&["--syspage"]).contains("--kc"));
        assert!(error(&["--batch", "65"]).contains("1 to 64"));
        assert!(error(&["--batch", "4,x"]).contains("`x`"));
        assert!(error(&["--calls"]).contains("needs a value"));
        assert!(error(&["--only", "sync"]).contains("`sync`"));
        assert!(error(&["--label", "a b"]).contains("one word"));
        assert!(error(&["--threads", "0"]).contains("1 to 256"));
        assert!(error(&["--fast"]).contains("`--fast`"));
        assert!(error(&["--start-with", "/tmp/go"]).contains("needs a value"));
        assert!(error(&["--start-with", "/tmp/go", "0"]).contains("1 to 64"));
    }
}
