//! The command line: round counts, the CPU pair and which benchmarks to run.

use crate::stats::CpuPair;

/// One of the benchmarks, in the order they run by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    /// One cache line bounced between the two CPUs, both spinning.
    Cacheline,
    /// A one-slot message over two `channel` URPC rings, both polling.
    Urpc,
    /// One byte over two pipes, both blocking in `read`.
    Pipe,
    /// An eventfd count per direction, both blocking in `read`.
    Eventfd,
    /// A shared word, both blocking in `FUTEX_WAIT`.
    Futex,
}

impl Benchmark {
    /// All of them, in running order.
    pub const ALL: [Benchmark; 5] = [Self::Cacheline, Self::Urpc, Self::Pipe, Self::Eventfd, Self::Futex];

    /// The name on the command line and in the result line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cacheline => "cacheline",
            Self::Urpc => "urpc",
            Self::Pipe => "pipe",
            Self::Eventfd => "eventfd",
            Self::Futex => "futex",
        }
    }

    /// Whether both sides spin (and so need a CPU each to make progress).
    pub fn polls(self) -> bool {
        matches!(self, Self::Cacheline | Self::Urpc)
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|benchmark| benchmark.name() == name)
    }
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Timed round trips per benchmark.
    pub rounds: usize,
    /// Untimed round trips before them (caches, TLB, branch predictors, the scheduler).
    pub warmup: usize,
    /// Where the two threads run.
    pub cpus: CpuPair,
    /// The benchmarks, in order.
    pub benchmarks: Vec<Benchmark>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            rounds: 10_000,
            warmup: 1_000,
            cpus: CpuPair { initiator: 0, responder: 1 },
            benchmarks: Benchmark::ALL.to_vec(),
        }
    }
}

/// Usage text, printed for `--help` and after an error.
pub const USAGE: &str = "\
usage: linux-bench [--rounds N] [--warmup N] [--cpus A,B] [BENCHMARK ...]
       linux-bench --tsc

  --rounds N   timed round trips per benchmark (default 10000)
  --warmup N   untimed round trips before them (default 1000)
  --cpus A,B   initiator and responder CPUs (default 0,1)
  BENCHMARK    cacheline, urpc, pipe, eventfd, futex (default: all, in this order)
  --tsc        only measure the TSC rate and print the `PEER tsc` line";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// Run the benchmarks.
    Run(Options),
    /// Print the usage.
    Help,
    /// Print the `PEER tsc` line and nothing else.
    TscOnly,
}

/// Parses the arguments after the program name.
pub fn parse(arguments: &[String]) -> Result<Request, String> {
    let mut options = Options::default();
    let mut named = Vec::new();
    let mut position = 0;
    while position < arguments.len() {
        let argument = arguments[position].as_str();
        let mut value = || {
            position += 1;
            arguments.get(position).map(String::as_str).ok_or_else(|| format!("{argument} needs a value"))
        };
        match argument {
            "--help" | "-h" => return Ok(Request::Help),
            "--tsc" => return Ok(Request::TscOnly),
            "--rounds" => {
                options.rounds = value()?.parse().ok().filter(|&n| n > 0).ok_or("--rounds takes a number above 0")?;
            }
            "--warmup" => options.warmup = value()?.parse().map_err(|_| "--warmup takes a number")?,
            "--cpus" => {
                let text = value()?;
                let (initiator, responder) = text
                    .split_once(',')
                    .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                    .ok_or_else(|| format!("--cpus takes two CPU numbers like 0,1, not `{text}`"))?;
                options.cpus = CpuPair { initiator, responder };
            }
            name => named.push(Benchmark::parse(name).ok_or_else(|| format!("unknown benchmark or option `{name}`"))?),
        }
        position += 1;
    }
    if !named.is_empty() {
        options.benchmarks = named;
    }
    Ok(Request::Run(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(arguments: &[&str]) -> Vec<String> {
        arguments.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults() {
        assert_eq!(parse(&[]), Ok(Request::Run(Options::default())));
        let options = Options::default();
        assert_eq!((options.rounds, options.warmup), (10_000, 1_000));
        assert_eq!(options.benchmarks.len(), 5);
    }

    #[test]
    fn everything_set() {
        let request = parse(&strings(&["--rounds", "100", "futex", "--cpus", "2,3", "--warmup", "0", "urpc"]));
        assert_eq!(
            request,
            Ok(Request::Run(Options {
                rounds: 100,
                warmup: 0,
                cpus: CpuPair { initiator: 2, responder: 3 },
                benchmarks: vec![Benchmark::Futex, Benchmark::Urpc],
            }))
        );
        assert_eq!(parse(&strings(&["--help"])), Ok(Request::Help));
        assert_eq!(parse(&strings(&["--tsc"])), Ok(Request::TscOnly));
    }

    #[test]
    fn mistakes_are_named() {
        assert!(parse(&strings(&["--rounds"])).unwrap_err().contains("needs a value"));
        assert!(parse(&strings(&["--rounds", "0"])).is_err());
        assert!(parse(&strings(&["--cpus", "1"])).unwrap_err().contains("two CPU numbers"));
        assert!(parse(&strings(&["ping"])).unwrap_err().contains("`ping`"));
    }
}
