//! The command line: which benchmarks, how many samples, where `tiny` is.

/// One of the benchmarks, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    /// `getppid` through the bare `syscall` instruction: the round trip into the kernel.
    Getppid,
    /// `fork`, `execve("/bin/tiny")` in the child, its exit, `wait4` in the parent.
    ForkExecWait,
    /// `std::thread::spawn(|| {}).join()`.
    ThreadSpawnJoin,
    /// A futex word handed back and forth between two threads on one core.
    FutexPingPong,
    /// The first write to a page of a fresh anonymous mapping.
    PageFirstTouch,
    /// `reef_spawn` of `tiny` on another core, then `wait4` (Reef only).
    SpawnOtherCore,
    /// The same on the caller's own core, the baseline of the one above (Reef only).
    SpawnSameCore,
}

impl Benchmark {
    pub const ALL: [Benchmark; 7] = [
        Self::Getppid,
        Self::ForkExecWait,
        Self::ThreadSpawnJoin,
        Self::FutexPingPong,
        Self::PageFirstTouch,
        Self::SpawnOtherCore,
        Self::SpawnSameCore,
    ];

    /// The name on the command line and in the result line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Getppid => "getppid",
            Self::ForkExecWait => "fork-exec-wait",
            Self::ThreadSpawnJoin => "thread-spawn-join",
            Self::FutexPingPong => "futex-pingpong",
            Self::PageFirstTouch => "page-first-touch",
            Self::SpawnOtherCore => "spawn-other-core",
            Self::SpawnSameCore => "spawn-same-core",
        }
    }

    /// Samples taken when `--iterations` does not say: enough for stable percentiles while a
    /// run under TCG stays within seconds.
    pub fn default_iterations(self) -> usize {
        match self {
            Self::Getppid | Self::FutexPingPong => 2000,
            Self::ForkExecWait | Self::SpawnOtherCore | Self::SpawnSameCore => 200,
            Self::ThreadSpawnJoin => 500,
            Self::PageFirstTouch => 4096,
        }
    }

    /// The most samples it can take: the mapping of `page-first-touch` has 16 384 pages, and
    /// every buffer stays bounded.
    pub fn max_iterations(self) -> usize {
        match self {
            Self::PageFirstTouch => crate::bench::MAPPING_PAGES,
            _ => MAX_SAMPLES,
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|benchmark| benchmark.name() == name)
    }
}

/// No sample buffer holds more than this.
pub const MAX_SAMPLES: usize = 100_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Samples per benchmark; `None` takes each one's default.
    pub iterations: Option<usize>,
    /// The benchmarks to run, in running order.
    pub benchmarks: Vec<Benchmark>,
    /// The program `fork-exec-wait` and the spawns start.
    pub tiny: String,
}

impl Options {
    /// Samples `benchmark` takes: `--iterations` or its default, within its maximum.
    pub fn iterations(&self, benchmark: Benchmark) -> usize {
        self.iterations.unwrap_or(benchmark.default_iterations()).min(benchmark.max_iterations())
    }
}

pub const USAGE: &str = "\
usage: procbench [--iterations N] [--only NAME[,NAME...]] [--tiny PATH]

  --iterations N  samples per benchmark (default: 2000 getppid, 200 fork-exec-wait,
                  500 thread-spawn-join, 2000 futex-pingpong, 4096 page-first-touch,
                  200 per spawn; at most 100000, 16384 for page-first-touch)
  --only NAMES    getppid, fork-exec-wait, thread-spawn-join, futex-pingpong,
                  page-first-touch, spawn-other-core, spawn-same-core
  --tiny PATH     the program to start (default /bin/tiny)";

/// What the command line asks for: a run with these options, or the usage.
pub type Request = rt::cli::Command<Options>;

/// Parses the arguments after the program name.
pub fn parse(arguments: &[String]) -> Result<Request, String> {
    let mut options = Options { iterations: None, benchmarks: Benchmark::ALL.to_vec(), tiny: "/bin/tiny".to_string() };
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        let mut value = || rest.next().ok_or_else(|| format!("{argument} needs a value"));
        match argument.as_str() {
            "--help" | "-h" => return Ok(Request::Help),
            "--iterations" => {
                let text = value()?;
                let iterations = text
                    .parse()
                    .ok()
                    .filter(|iterations| (1..=MAX_SAMPLES).contains(iterations))
                    .ok_or_else(|| format!("--iterations takes a number from 1 to {MAX_SAMPLES}, not `{text}`"))?;
                options.iterations = Some(iterations);
            }
            "--only" => {
                let mut wanted = Vec::new();
                for name in value()?.split(',') {
                    wanted.push(Benchmark::parse(name).ok_or_else(|| format!("no benchmark is called `{name}`"))?);
                }
                // Running order stays the fixed one, whatever order the names came in.
                options.benchmarks =
                    Benchmark::ALL.into_iter().filter(|benchmark| wanted.contains(benchmark)).collect();
            }
            "--tiny" => options.tiny = value()?.clone(),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Request::Run(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults() {
        let Ok(Request::Run(options)) = parse(&[]) else { panic!() };
        assert_eq!(options.benchmarks, Benchmark::ALL);
        assert_eq!(options.tiny, "/bin/tiny");
        assert_eq!(options.iterations(Benchmark::Getppid), 2000);
        assert_eq!(options.iterations(Benchmark::ForkExecWait), 200);
        assert_eq!(options.iterations(Benchmark::PageFirstTouch), 4096);
    }

    #[test]
    fn everything_set() {
        let Ok(Request::Run(options)) =
            parse(&strings(&["--iterations", "50000", "--only", "page-first-touch,getppid", "--tiny", "/t"]))
        else {
            panic!()
        };
        assert_eq!(options.benchmarks, [Benchmark::Getppid, Benchmark::PageFirstTouch]);
        assert_eq!(options.iterations(Benchmark::Getppid), 50_000);
        assert_eq!(options.iterations(Benchmark::PageFirstTouch), 16_384, "capped at the mapping");
        assert_eq!(options.tiny, "/t");
        assert_eq!(parse(&strings(&["--help"])), Ok(Request::Help));
    }

    #[test]
    fn mistakes_are_named() {
        assert!(parse(&strings(&["--iterations", "0"])).is_err());
        assert!(parse(&strings(&["--iterations", "100001"])).is_err());
        assert!(parse(&strings(&["--only", "fork"])).unwrap_err().contains("`fork`"));
        assert!(parse(&strings(&["--tiny"])).unwrap_err().contains("needs a value"));
        assert!(parse(&strings(&["-x"])).is_err());
    }

    #[test]
    fn names_are_unique() {
        for benchmark in Benchmark::ALL {
            assert_eq!(Benchmark::parse(benchmark.name()), Some(benchmark));
        }
    }
}
