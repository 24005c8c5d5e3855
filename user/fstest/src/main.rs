//! fstest: the file calls a program makes, each case checked against Linux's semantics.
#![doc = include_str!("../README.md")]
// fstest starts no thread: every `fork` (sys.rs) relies on the process having one thread.

mod cases;
mod coherence;
mod dirent;
mod echo;
mod expect;
mod pattern;
mod sys;

use expect::{expect_bytes, Outcome, Step};
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::RawFd;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The environment variable that names where the scratch directory goes (else `/tmp`).
const SCRATCH_VARIABLE: &str = "FSTEST_DIR";
const DEFAULT_BASE: &str = "/tmp";

const USAGE: &str = "fstest [--dir DIR] [--fill] | --write PATH BYTES SEED | --check PATH BYTES SEED \
                     | --echo-serve PATH CONNECTIONS | --echo PATH BYTES SEED \
                     | --coherence-write DIR ROUNDS | --coherence-read DIR ROUNDS";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    /// Every case, in `<dir>/fstest-<pid>` (`--dir`, else `$FSTEST_DIR`, else `/tmp`);
    /// `--fill` adds the ENOSPC case.
    Cases { base: Option<PathBuf>, fill: bool },
    /// `--write PATH BYTES SEED`: writes the pattern of `SEED` into `PATH`.
    Write { path: PathBuf, bytes: usize, seed: u64 },
    /// `--check PATH BYTES SEED`: `PATH` must hold exactly that pattern.
    Check { path: PathBuf, bytes: usize, seed: u64 },
    /// `--check-closed FD --check-open FD`: what `exec-cloexec` runs through `execve`.
    CheckDescriptors { closed: RawFd, open: RawFd },
    /// `--echo-serve PATH CONNECTIONS`: an echo server at `PATH` (an `AF_UNIX` socket's path,
    /// or a TCP address such as `127.0.0.1:7000`) for that many connections, one after another.
    EchoServe { path: PathBuf, connections: usize },
    /// `--echo PATH BYTES SEED`: sends the pattern of `SEED` to the echo server at `PATH` and
    /// checks what comes back.
    Echo { path: PathBuf, bytes: usize, seed: u64 },
    /// `--coherence-write DIR ROUNDS`: the writer of the coherence loop (`coherence.rs`).
    CoherenceWrite { directory: PathBuf, rounds: u64 },
    /// `--coherence-read DIR ROUNDS`: one of its readers, until the last round.
    CoherenceRead { directory: PathBuf, rounds: u64 },
}

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{what} must be a number, not {text:?}"))
}

fn parse(arguments: &[String]) -> Result<Mode, String> {
    let words: Vec<&str> = arguments.iter().map(String::as_str).collect();
    match words[..] {
        ["--write", path, bytes, seed] => {
            Ok(Mode::Write { path: path.into(), bytes: number(bytes, "BYTES")?, seed: number(seed, "SEED")? })
        }
        ["--check", path, bytes, seed] => {
            Ok(Mode::Check { path: path.into(), bytes: number(bytes, "BYTES")?, seed: number(seed, "SEED")? })
        }
        ["--echo-serve", path, connections] => {
            Ok(Mode::EchoServe { path: path.into(), connections: number(connections, "CONNECTIONS")? })
        }
        ["--echo", path, bytes, seed] => {
            Ok(Mode::Echo { path: path.into(), bytes: number(bytes, "BYTES")?, seed: number(seed, "SEED")? })
        }
        ["--coherence-write", directory, rounds] => {
            Ok(Mode::CoherenceWrite { directory: directory.into(), rounds: number(rounds, "ROUNDS")? })
        }
        ["--coherence-read", directory, rounds] => {
            Ok(Mode::CoherenceRead { directory: directory.into(), rounds: number(rounds, "ROUNDS")? })
        }
        [cases::CHECK_CLOSED, closed, cases::CHECK_OPEN, open] => {
            Ok(Mode::CheckDescriptors { closed: number(closed, "FD")?, open: number(open, "FD")? })
        }
        _ => {
            let (mut base, mut fill) = (None, false);
            let mut rest = words.iter();
            while let Some(word) = rest.next() {
                match *word {
                    "--fill" => fill = true,
                    "--dir" => base = Some(rest.next().ok_or("--dir needs a directory")?.into()),
                    other => return Err(format!("unknown argument {other:?}")),
                }
            }
            Ok(Mode::Cases { base, fill })
        }
    }
}

/// `core <n>` on Reef, `linux` elsewhere.
fn place() -> String {
    match rt::current_core() {
        Some(core) => format!("core {core}"),
        None => "linux".to_string(),
    }
}

/// The `TEST` lines printed so far, and the summary at the end.
#[derive(Default)]
struct Report {
    passed: usize,
    failed: usize,
}

impl Report {
    /// Runs `case`, catching a panic as a failure, and prints its one line.
    fn run(&mut self, name: &str, case: impl FnOnce() -> Outcome) {
        let outcome = panic::catch_unwind(AssertUnwindSafe(case))
            .unwrap_or_else(|payload| Err(format!("panicked: {}", rt::panic_message(payload.as_ref()))));
        let (verdict, detail) = match outcome {
            Ok(detail) => {
                self.passed += 1;
                ("ok", detail)
            }
            Err(problem) => {
                self.failed += 1;
                ("fail", problem)
            }
        };
        println!("TEST fs-{name} {verdict} {}", detail.replace(['\n', '\r'], " "));
    }

    fn finish(self) -> ExitCode {
        println!("fstest: {} passed, {} failed", self.passed, self.failed);
        if self.failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// `<base>/fstest-<pid>`, the base made absolute and free of links, so `getcwd` inside the
/// scratch directory gives back exactly the paths the cases build.
fn scratch_directory(base: Option<PathBuf>) -> PathBuf {
    let base = base
        .or_else(|| std::env::var_os(SCRATCH_VARIABLE).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BASE));
    let base = fs::canonicalize(&base).unwrap_or(base);
    base.join(format!("fstest-{}", std::process::id()))
}

/// This program's file, for `execve`: `/proc/self/exe` when the kernel has it, else `argv[0]`.
fn program_path() -> PathBuf {
    std::env::current_exe()
        .ok()
        .filter(|path| path.is_file())
        .or_else(|| std::env::args_os().next().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/bin/fstest"))
}

fn run_cases(base: Option<PathBuf>, fill: bool) -> ExitCode {
    let scratch = scratch_directory(base);
    let program = program_path();
    let reef = rt::on_reef();
    println!("fstest: pid {} on {}, scratch directory {}", std::process::id(), place(), scratch.display());
    let mut report = Report::default();
    for case in cases::all(fill) {
        let context = cases::Context { scratch: &scratch, name: case.name, reef, program: &program };
        report.run(case.name, || (case.run)(&context));
    }
    report.finish()
}

/// `--write`: the pattern of `seed` into `path`, fsync'd; the line says where it ran.
fn write_pattern(path: &Path, bytes: usize, seed: u64) -> Outcome {
    let place = place();
    let write = || -> Result<(), String> {
        let mut file = File::create(path).step(format_args!("creating {}", path.display()))?;
        file.write_all(&pattern::pattern(seed, bytes)).step(format_args!("writing {bytes} bytes"))?;
        file.sync_all().step("fsync")
    };
    write().map_err(|problem| format!("{place}: {problem}"))?;
    Ok(format!("{place}: {bytes} bytes of seed {seed} written to {}", path.display()))
}

/// `--check`: `path` must hold exactly the pattern of `seed`; the line says where it ran.
fn check_pattern(path: &Path, bytes: usize, seed: u64) -> Outcome {
    let place = place();
    let check = || -> Result<(), String> {
        let contents = fs::read(path).step(format_args!("reading {}", path.display()))?;
        expect_bytes(path.display(), &contents, &pattern::pattern(seed, bytes))
    };
    check().map_err(|problem| format!("{place}: {problem}"))?;
    Ok(format!("{place}: {bytes} bytes of seed {seed} in {}", path.display()))
}

fn main() -> ExitCode {
    // A case that panics is reported on its own line, not by the default panic message.
    panic::set_hook(Box::new(|_| {}));
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match parse(&arguments) {
        Ok(Mode::Cases { base, fill }) => run_cases(base, fill),
        Ok(Mode::Write { path, bytes, seed }) => {
            let mut report = Report::default();
            report.run("written", || write_pattern(&path, bytes, seed));
            report.finish()
        }
        Ok(Mode::Check { path, bytes, seed }) => {
            let mut report = Report::default();
            report.run("same-bytes", || check_pattern(&path, bytes, seed));
            report.finish()
        }
        Ok(Mode::EchoServe { path, connections }) => {
            let mut report = Report::default();
            report.run("echo-served", || echo::serve(&path, connections, &place()));
            report.finish()
        }
        Ok(Mode::Echo { path, bytes, seed }) => {
            let mut report = Report::default();
            report.run("echoed", || echo::send(&path, bytes, seed, &place()));
            report.finish()
        }
        Ok(Mode::CoherenceWrite { directory, rounds }) => {
            let mut report = Report::default();
            report.run("coherence-written", || coherence::write(&directory, rounds, &place()));
            report.finish()
        }
        Ok(Mode::CoherenceRead { directory, rounds }) => {
            let mut report = Report::default();
            report.run("coherence-read", || coherence::read(&directory, rounds, &place()));
            report.finish()
        }
        Ok(Mode::CheckDescriptors { closed, open }) => match cases::check_descriptors(closed, open) {
            Ok(()) => ExitCode::SUCCESS,
            Err(problem) => {
                eprintln!("fstest {}: {problem}", cases::CHECK_CLOSED);
                ExitCode::FAILURE
            }
        },
        Err(problem) => {
            eprintln!("fstest: {problem}\nusage: {USAGE}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(words: &[&str]) -> Result<Mode, String> {
        parse(&words.iter().map(|word| word.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_command_line_chooses_the_mode() {
        assert_eq!(parsed(&[]), Ok(Mode::Cases { base: None, fill: false }));
        assert_eq!(
            parsed(&["--fill", "--dir", "/mnt/small"]),
            Ok(Mode::Cases { base: Some("/mnt/small".into()), fill: true })
        );
        assert_eq!(
            parsed(&["--write", "/tmp/shared", "100000", "7"]),
            Ok(Mode::Write { path: "/tmp/shared".into(), bytes: 100_000, seed: 7 })
        );
        assert_eq!(
            parsed(&["--coherence-read", "/tmp/co", "10000"]),
            Ok(Mode::CoherenceRead { directory: "/tmp/co".into(), rounds: 10_000 })
        );
        assert_eq!(
            parsed(&["--coherence-write", "/tmp/co", "3"]),
            Ok(Mode::CoherenceWrite { directory: "/tmp/co".into(), rounds: 3 })
        );
        assert_eq!(
            parsed(&["--check", "/tmp/shared", "100000", "7"]),
            Ok(Mode::Check { path: "/tmp/shared".into(), bytes: 100_000, seed: 7 })
        );
        assert_eq!(
            parsed(&["--check-closed", "3", "--check-open", "4"]),
            Ok(Mode::CheckDescriptors { closed: 3, open: 4 })
        );
        assert_eq!(
            parsed(&["--echo-serve", "/tmp/echo", "2"]),
            Ok(Mode::EchoServe { path: "/tmp/echo".into(), connections: 2 })
        );
        assert_eq!(
            parsed(&["--echo", "/tmp/echo", "5000", "4"]),
            Ok(Mode::Echo { path: "/tmp/echo".into(), bytes: 5000, seed: 4 })
        );
    }

    #[test]
    fn bad_command_lines_are_refused() {
        assert!(parsed(&["--dir"]).unwrap_err().contains("--dir needs"));
        assert!(parsed(&["--frobnicate"]).unwrap_err().contains("--frobnicate"));
        assert!(parsed(&["--write", "/tmp/x", "many", "7"]).unwrap_err().contains("BYTES"));
        assert!(parsed(&["--check", "/tmp/x", "10", "-1"]).unwrap_err().contains("SEED"));
        assert!(parsed(&["--check-closed", "x", "--check-open", "4"]).unwrap_err().contains("FD"));
    }

    #[test]
    fn the_scratch_directory_is_per_process() {
        let directory = scratch_directory(Some("/nonexistent/base".into()));
        assert_eq!(directory, Path::new("/nonexistent/base").join(format!("fstest-{}", std::process::id())));
    }

    #[test]
    fn every_case_has_its_own_name() {
        let all = cases::all(true);
        let mut names: Vec<&str> = all.iter().map(|case| case.name).collect();
        assert_eq!(names.first(), Some(&"scratch"));
        assert_eq!(names.last(), Some(&"cleanup"));
        assert!(names.contains(&"enospc"));
        assert!(!cases::all(false).iter().any(|case| case.name == "enospc"));
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a case name is used twice: directories would collide");
        assert!(names
            .iter()
            .all(|name| name.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')));
    }
}
