//! The command line: which benchmark, its sizes, how many samples, where to run.

/// One benchmark and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// `busybox dd if=/dev/zero of=/tmp/fsbench.dd bs=512` of each size, in MiB.
    Dd(Vec<u64>),
    /// `busybox ls -l` of a directory of each number of empty files.
    Ls(Vec<u64>),
    /// `mib` MiB through a pipe in 64 KiB writes; the reader on `cross`, else on our core.
    Pipe { mib: u64, cross: Option<usize> },
    /// Any program, started to its exit: `name` labels its lines, `command` is the program's
    /// path and its arguments.
    Run { name: String, command: Vec<String> },
}

impl Work {
    /// The benchmark's name on the command line and in the output.
    pub fn name(&self) -> &'static str {
        match self {
            Work::Dd(_) => "dd",
            Work::Ls(_) => "ls",
            Work::Pipe { .. } => "pipe",
            Work::Run { .. } => "run",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub work: Work,
    /// Samples of each size.
    pub repeat: usize,
    /// On Linux, the CPU to pin fsbench (and so every child) to; on Reef, the core it must be on.
    pub pin: Option<usize>,
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    Run(Options),
    /// The reader end of `pipe` (started by fsbench itself): read `bytes` from stdin.
    PipeReader {
        bytes: u64,
    },
    Help,
}

/// The largest file, pipe transfer (MiB) and directory (files) asked for.
pub const MAX_MIB: u64 = 1024;
pub const MAX_FILES: u64 = 100_000;
pub const MAX_REPEAT: usize = 100;
/// The longest name of a `run` figure: it goes into every line as `name=NAME`.
pub const MAX_NAME: usize = 32;

pub const USAGE: &str = "\
usage: fsbench [--pin CPU] [--repeat K] dd MIB...
       fsbench [--pin CPU] [--repeat K] ls FILES...
       fsbench [--pin CPU] [--repeat K] pipe MIB [--cross CORE]
       fsbench [--pin CPU] [--repeat K] run NAME -- PROGRAM ARGS...

  dd MIB...      time `busybox dd if=/dev/zero of=/tmp/fsbench.dd bs=512` of MIB MiB each
  ls FILES...    time `busybox ls -l` of a directory of FILES empty files (in /tmp) each
  pipe MIB       time MIB MiB through a pipe in 64 KiB writes, the reader on this core, or
                 with --cross on CORE (Reef: reef_spawn there; Linux: pinned there)
  run NAME -- PROGRAM ARGS...
                 time PROGRAM (a path) with ARGS from fork to reap, stdout and stderr to
                 /dev/null: one cold sample (the first), then K warm ones; NAME labels the lines
  --repeat K     samples of each size, or warm samples of run (default 3, at most 100)
  --pin CPU      Linux: run on CPU alone (children too); Reef: say so if not on core CPU";

fn number(text: &str, what: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
    text.parse()
        .ok()
        .filter(|value| range.contains(value))
        .ok_or_else(|| format!("{what} takes a number from {} to {}, not `{text}`", range.start(), range.end()))
}

/// A `run` figure's name: letters, digits, `-`, `_` and `.`, so that `name=NAME` stays one
/// word of the output.
fn run_name(text: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if text.is_empty() || text.len() > MAX_NAME || !text.chars().all(allowed) {
        return Err(format!(
            "run: the name `{text}` must be 1 to {MAX_NAME} letters, digits, `-`, `_` or `.` (it labels the output)"
        ));
    }
    Ok(text.to_string())
}

/// Parses the arguments after the program name; options may come before or after the sizes
/// (for `run`, before `--`: what follows it is the command, untouched).
pub fn parse(arguments: &[String]) -> Result<Request, String> {
    let mut repeat = 3;
    let mut pin = None;
    let mut cross = None;
    let mut benchmark: Option<&str> = None;
    let mut sizes = Vec::new();
    let mut command: Option<Vec<String>> = None;
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        if argument == "--" && benchmark == Some("run") {
            command = Some(rest.by_ref().cloned().collect());
            break;
        }
        let mut value = || rest.next().map(String::as_str).ok_or_else(|| format!("{argument} needs a value"));
        match argument.as_str() {
            "--help" | "-h" => return Ok(Request::Help),
            "--repeat" => repeat = number(value()?, "--repeat", 1..=MAX_REPEAT as u64)? as usize,
            "--pin" => pin = Some(number(value()?, "--pin", 0..=1023)? as usize),
            "--cross" => cross = Some(number(value()?, "--cross", 0..=1023)? as usize),
            "pipe-reader" if benchmark.is_none() => {
                let bytes = number(value()?, "pipe-reader", 0..=MAX_MIB << 20)?;
                return Ok(Request::PipeReader { bytes });
            }
            "dd" | "ls" | "pipe" | "run" if benchmark.is_none() => benchmark = Some(argument),
            text if benchmark.is_some() && !text.starts_with('-') => sizes.push(text),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let sizes_of = |what: &str, range: std::ops::RangeInclusive<u64>| -> Result<Vec<u64>, String> {
        if sizes.is_empty() {
            return Err(format!("{what}: which sizes?"));
        }
        sizes.iter().map(|text| number(text, what, range.clone())).collect()
    };
    let work = match benchmark {
        Some("dd") => Work::Dd(sizes_of("dd", 1..=MAX_MIB)?),
        Some("ls") => Work::Ls(sizes_of("ls", 1..=MAX_FILES)?),
        Some("pipe") => match sizes_of("pipe", 1..=MAX_MIB)?[..] {
            [mib] => Work::Pipe { mib, cross },
            _ => return Err("pipe takes one size".into()),
        },
        Some("run") => {
            let name = match sizes[..] {
                [name] => run_name(name)?,
                _ => return Err("run takes one name before `--`".into()),
            };
            let command = command.filter(|command| !command.is_empty()).ok_or("run: which program? (after `--`)")?;
            if !command[0].starts_with('/') {
                return Err(format!("run: the program `{}` must be a path from / (no PATH search)", command[0]));
            }
            Work::Run { name, command }
        }
        _ => return Err("which benchmark: dd, ls, pipe or run?".into()),
    };
    if cross.is_some() && !matches!(work, Work::Pipe { .. }) {
        return Err("--cross is for pipe".into());
    }
    Ok(Request::Run(Options { work, repeat, pin }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> Result<Request, String> {
        parse(&line.split_whitespace().map(str::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn each_benchmark() {
        assert_eq!(
            parsed("dd 1 4 16 64"),
            Ok(Request::Run(Options { work: Work::Dd(vec![1, 4, 16, 64]), repeat: 3, pin: None }))
        );
        assert_eq!(
            parsed("--pin 1 ls 100 10000 --repeat 7"),
            Ok(Request::Run(Options { work: Work::Ls(vec![100, 10_000]), repeat: 7, pin: Some(1) }))
        );
        assert_eq!(
            parsed("pipe 64 --cross 1"),
            Ok(Request::Run(Options { work: Work::Pipe { mib: 64, cross: Some(1) }, repeat: 3, pin: None }))
        );
        assert_eq!(parsed("pipe-reader 65536"), Ok(Request::PipeReader { bytes: 65536 }));
        assert_eq!(
            parsed("--pin 1 run python3 --repeat 5 -- /bin/busybox chroot /debian /usr/bin/python3 -c pass"),
            Ok(Request::Run(Options {
                work: Work::Run {
                    name: "python3".into(),
                    command: ["/bin/busybox", "chroot", "/debian", "/usr/bin/python3", "-c", "pass"]
                        .map(String::from)
                        .to_vec(),
                },
                repeat: 5,
                pin: Some(1),
            }))
        );
        // After `--` nothing is fsbench's, not even `--repeat`.
        assert_eq!(
            parsed("run x -- /bin/echo --repeat 9"),
            Ok(Request::Run(Options {
                work: Work::Run {
                    name: "x".into(),
                    command: ["/bin/echo", "--repeat", "9"].map(String::from).to_vec()
                },
                repeat: 3,
                pin: None,
            }))
        );
        assert_eq!(parsed("--help"), Ok(Request::Help));
    }

    #[test]
    fn mistakes_are_named() {
        assert!(parsed("dd").unwrap_err().contains("which sizes"));
        assert!(parsed("dd 0").unwrap_err().contains("`0`"));
        assert!(parsed("ls 100001").is_err());
        assert!(parsed("pipe 1 2").unwrap_err().contains("one size"));
        assert!(parsed("dd 1 --cross 1").unwrap_err().contains("for pipe"));
        assert!(parsed("dd 1 --repeat 0").is_err());
        assert!(parsed("--repeat").unwrap_err().contains("needs a value"));
        assert!(parsed("cp 1").unwrap_err().contains("`cp`"));
        assert!(parsed("").unwrap_err().contains("which benchmark"));
        assert!(parsed("run x").unwrap_err().contains("which program"));
        assert!(parsed("run x --").unwrap_err().contains("which program"));
        assert!(parsed("run -- /bin/true").unwrap_err().contains("one name"));
        assert!(parsed("run a b -- /bin/true").unwrap_err().contains("one name"));
        assert!(parsed("run a=b -- /bin/true").unwrap_err().contains("`a=b`"));
        assert!(parsed("run x -- true").unwrap_err().contains("a path"));
        assert!(parsed("run x --cross 1 -- /bin/true").unwrap_err().contains("for pipe"));
    }
}
