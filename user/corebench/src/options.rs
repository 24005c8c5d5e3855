//! The command line: how many runs, which core, with load or not, which kernel images.

/// Runs of each figure at most: under TCG a Linux CPU offline takes some 40 ms, so 1000 runs
/// of both directions, idle and loaded, are minutes.
pub const MAX_RUNS: usize = 1000;
pub const DEFAULT_RUNS: usize = 20;
/// Core 0 owns the devices on Reef and is not hot-pluggable on Linux: the first core that can
/// stop is 1.
pub const DEFAULT_CORE: usize = 1;
/// The highest core number `--core` takes (Linux's `cpu_set_t` holds 1024 CPUs).
pub const MAX_CORE: usize = 1023;
/// What `--image` takes for the image the system booted.
pub const BOOTED_IMAGE: &str = "booted";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Timed runs of each figure.
    pub runs: usize,
    /// The core stopped and started.
    pub core: usize,
    /// Every other online core busy while measuring.
    pub load: bool,
    /// Reef: the kernel images the core is started with, each measured in turn; `None` is the
    /// image the system booted.
    pub images: Vec<Option<String>>,
    /// Reef: also park the core on this one (which runs the `multi` image) and unpark it.
    pub park: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options { runs: DEFAULT_RUNS, core: DEFAULT_CORE, load: false, images: vec![None], park: None }
    }
}

/// What the program is asked to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Measure(Options),
    /// Loop until killed: the load `--load` spawns on each other core on Reef, where a thread
    /// runs on its process's core and only a process can be placed on another.
    Spin,
}

/// What the command line asks for: a mode, or the usage.
pub type Request = rt::cli::Command<Mode>;

pub const USAGE: &str = "\
usage: corebench [--runs N] [--core N] [--load] [--image PATH]... [--park HOST]

  --runs N      timed runs of each figure (1 to 1000, default 20)
  --core N      the core (Linux: CPU) stopped and started (default 1); not the core corebench
                runs on (Linux: corebench pins itself to another CPU)
  --load        every other online core busy meanwhile, the one corebench runs on included: a
                spinning thread pinned to each (Linux), a spinning process spawned on each (Reef)
  --image PATH  Reef: start the core with the kernel image at PATH (`booted`: the image the
                system booted); several may be given, each measured in turn (default: booted)
  --park HOST   Reef: also park the core on core HOST (which must run /boot/multi) and unpark
                it, N timed rounds after one untimed
  --spin        loop until killed (what --load spawns on Reef; no figures)

Figures, N runs each: offline and online (0 or 1 written to
/sys/devices/system/cpu/cpuN/online, Linux and Reef alike: root on Linux); on Reef also stop
and start through the boot driver (reef_core), the image cached and not cached, with the
driver's and the target core's part. Each part prints one line: COREBENCH figure=... part=...
target=... median_ns=... p5_ns=... p95_ns=... (cycles too); see user/corebench/README.md.";

fn number(flag: &str, text: Option<&String>, range: std::ops::RangeInclusive<usize>) -> Result<usize, String> {
    let text = text.ok_or_else(|| format!("{flag} needs a value"))?;
    text.parse()
        .ok()
        .filter(|value| range.contains(value))
        .ok_or_else(|| format!("{flag} takes {} to {}, not `{text}`", range.start(), range.end()))
}

/// Parses the arguments after the program name.
pub fn parse(arguments: &[String]) -> Result<Request, String> {
    let mut options = Options::default();
    let mut images = Vec::new();
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--help" | "-h" => return Ok(Request::Help),
            "--spin" => return Ok(Request::Run(Mode::Spin)),
            "--runs" => options.runs = number(word, words.next(), 1..=MAX_RUNS)?,
            "--core" => options.core = number(word, words.next(), 0..=MAX_CORE)?,
            "--load" => options.load = true,
            "--park" => options.park = Some(number(word, words.next(), 0..=MAX_CORE)?),
            "--image" => {
                let path = words.next().ok_or("--image needs a value")?;
                images.push(match path.as_str() {
                    BOOTED_IMAGE => None,
                    // The kernel reads the image from its own file system, which has no
                    // current directory of ours to resolve a relative name against.
                    path if path.starts_with('/') && !path.contains(char::is_whitespace) => Some(path.to_string()),
                    other => {
                        return Err(format!(
                            "--image takes an absolute path without spaces or `{BOOTED_IMAGE}`, not `{other}`"
                        ))
                    }
                });
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if !images.is_empty() {
        // Each image once, where it was first named.
        let mut unique: Vec<Option<String>> = Vec::new();
        for image in images {
            if !unique.contains(&image) {
                unique.push(image);
            }
        }
        options.images = unique;
    }
    Ok(Request::Run(Mode::Measure(options)))
}

/// How a line names an image: its path, or `booted`.
pub fn image_name(image: Option<&str>) -> &str {
    image.unwrap_or(BOOTED_IMAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn measure(list: &[&str]) -> Options {
        match parse(&strings(list)) {
            Ok(Request::Run(Mode::Measure(options))) => options,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let options = measure(&[]);
        assert_eq!(options, Options::default());
        assert_eq!((options.runs, options.core, options.load), (20, 1, false));
        assert_eq!(options.images, [None], "the booted image alone");
        assert_eq!(parse(&strings(&["--help"])), Ok(Request::Help));
        assert_eq!(parse(&strings(&["--spin"])), Ok(Request::Run(Mode::Spin)));
    }

    #[test]
    fn everything_set() {
        let options = measure(&["--runs", "3", "--core", "2", "--load", "--image", "/boot/rt", "--image", "booted"]);
        assert_eq!((options.runs, options.core, options.load), (3, 2, true));
        assert_eq!(options.images, [Some("/boot/rt".to_string()), None], "in the order given");
        let twice = measure(&["--image", "/boot/rt", "--image", "booted", "--image", "/boot/rt"]);
        assert_eq!(twice.images, [Some("/boot/rt".to_string()), None], "each once");
        assert_eq!(image_name(None), "booted");
        assert_eq!(image_name(Some("/boot/full")), "/boot/full");
    }

    #[test]
    fn mistakes_are_named() {
        let error = |list: &[&str]| parse(&strings(list)).unwrap_err();
        assert!(error(&["--runs", "0"]).contains("1 to 1000"));
        assert!(error(&["--runs", "x"]).contains("`x`"));
        assert!(error(&["--core"]).contains("needs a value"));
        assert!(error(&["--core", "1024"]).contains("0 to 1023"));
        assert!(error(&["--image", "boot/rt"]).contains("absolute path"));
        assert!(error(&["--image"]).contains("needs a value"));
        assert!(error(&["--fast"]).contains("`--fast`"));
        assert!(error(&["--park"]).contains("needs a value"));
        assert_eq!(measure(&["--park", "2"]).park, Some(2));
    }
}
