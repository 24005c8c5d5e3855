//! The bash script suite: Debian's static bash runs `tests/bash` on Reef and on the host.
//!
//! Issue 27's foreign suites: every case script of `tests/bash` prints one `CASE` line per
//! case. The same `bash-static` binary runs the same scripts on the host, as the reference,
//! with busybox's applets as its commands (as on Reef), and on Reef, in QEMU. A case counts
//! when it passes on the host; one that does not pass on Reef fails the suite unless
//! `tests/bash/known-differences.txt` lists it, and a listed case that passes fails it too, so
//! the list only shrinks.

use super::exec;
use crate::debian;
use crate::qemu::Machine;
use crate::test::known_differences::{
    self, compare, parse_known_differences, Comparison, KnownDifference, Layout, Rules,
};
use crate::test::runner::Integration;
use crate::tools::{self, ExtraFile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The scripts, in the repository.
const SCRIPTS_DIRECTORY: &str = "tests/bash";
/// Cases that fail on Reef for a reason the kernel has yet to mend, each with that reason.
const KNOWN_DIFFERENCES_FILE: &str = "tests/bash/known-differences.txt";
/// Where the image keeps the scripts.
const IMAGE_DIRECTORY: &str = "opt/bash-tests";
/// The image the suite boots: Reef's own, with bash and the scripts added.
const IMAGE_FILE: &str = "target/reef-bash-initramfs.cpio";
/// The host's run: busybox's applets and bash in `bin`, the scratch directories in `tmp`.
const HOST_DIRECTORY: &str = "target/bash-suite";
/// The last line of a run of `run.sh` that went through every script.
const DONE: &str = "BASH-SUITE-DONE";
/// How long the host's run may take (it takes seconds).
const HOST_SECONDS: u32 = 300;

/// One run on Reef: the machine's cores, and the scripts that `run.sh` starts through
/// `on <core> bash` (on another core than its own, core 0).
struct ReefRun {
    cores: usize,
    on_core: Option<(usize, &'static [&'static str])>,
}

/// The runs: every script on core 0 of two cores; then, on four, the scripts heaviest in
/// processes and signals on core 2, where each fork, pipe and signal is another kernel
/// instance's while the console and the files stay on core 0's.
const REEF_RUNS: [ReefRun; 2] = [
    ReefRun { cores: 2, on_core: None },
    ReefRun { cores: 4, on_core: Some((2, &["jobs", "pipelines", "signals", "traps", "wait"])) },
];

impl ReefRun {
    fn name(&self) -> String {
        format!("foreign-bash-{}-cores", self.cores)
    }

    /// The command line init runs.
    fn line(&self) -> String {
        let runner = format!("/bin/bash /{IMAGE_DIRECTORY}/run.sh");
        match self.on_core {
            None => runner,
            Some((core, scripts)) => format!("{runner} --on {core} {}", scripts.join(" ")),
        }
    }
}

/// How one case ended in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Passed,
    /// With the script's detail (expected and got), or why the line was not one verdict.
    Failed(String),
}

/// The verdict of every `CASE <script>/<name> ok|fail <detail>` line of `output`, by case
/// name. A line may end in `\r` (a serial console). A case printed twice is failed: a
/// script that forks must not run its checks in two processes.
fn verdicts(output: &str) -> BTreeMap<String, Verdict> {
    let mut verdicts = BTreeMap::new();
    for line in output.lines() {
        let Some(rest) = line.trim_end().strip_prefix("CASE ") else { continue };
        let (name, outcome) = rest.split_once(' ').unwrap_or((rest, ""));
        let verdict = match outcome.split_once(' ').map_or((outcome, ""), |(word, detail)| (word, detail)) {
            ("ok", "") => Verdict::Passed,
            ("fail", detail) => Verdict::Failed(detail.to_string()),
            _ => Verdict::Failed(format!("not a verdict: `{line}`")),
        };
        if verdicts.insert(name.to_string(), verdict).is_some() {
            verdicts.insert(name.to_string(), Verdict::Failed("printed more than once".into()));
        }
    }
    verdicts
}

impl known_differences::Verdict for Verdict {
    fn passed(&self) -> bool {
        *self == Verdict::Passed
    }

    fn describe(&self) -> String {
        match self {
            Verdict::Passed => "passed".into(),
            Verdict::Failed(detail) => detail.clone(),
        }
    }

    fn missing() -> String {
        "no verdict on Reef (the script ended early)".into()
    }
}

/// The known-differences file names cases of this suite alone: `case reason`.
const LAYOUT: Layout = Layout::OneSuite("bash");

/// The scripts give the same verdicts every run and the same cases on both sides: a listed
/// case that fails on the host is stale, and a case only Reef printed fails the suite.
const RULES: Rules = Rules { stale_when_the_host_fails: true, reef_only_cases_fail: true };

/// `bash suite: host 120 passed, Reef 117 passed, 3 known differences`.
fn summary(comparison: &Comparison) -> String {
    let mut line = format!(
        "bash suite: host {} passed, Reef {} passed, {} known differences",
        comparison.host_passed,
        comparison.reef_passed + comparison.reef_passed_uncounted,
        comparison.known
    );
    if !comparison.host_failures.is_empty() {
        line.push_str(&format!(" ({} cases fail on the host and are left out)", comparison.host_failures.len()));
    }
    line
}

/// Every reason the suite fails, one a line; empty when it holds.
fn problems(comparison: &Comparison) -> Vec<String> {
    let mut problems: Vec<String> = comparison
        .new_failures
        .iter()
        .map(|(case, detail)| format!("{case} passes on the host but fails on Reef: {detail}"))
        .collect();
    problems.extend(comparison.now_passing.iter().map(|case| {
        format!("{case} now passes on Reef: remove it from {KNOWN_DIFFERENCES_FILE} (the list only shrinks)")
    }));
    problems.extend(comparison.stale.iter().map(|case| {
        format!("{case} is listed in {KNOWN_DIFFERENCES_FILE} but is no case that passes on the host: remove it")
    }));
    problems.extend(
        comparison.unknown_on_reef.iter().map(|case| format!("{case} was printed on Reef but not on the host")),
    );
    problems
}

/// What the runs share: the image, the host's verdicts and the known differences.
struct Prepared {
    image: PathBuf,
    host: BTreeMap<String, Verdict>,
    known: Vec<KnownDifference>,
}

/// Adds `foreign-bash-<N>-cores` for each of [`REEF_RUNS`]. The packages are fetched, the
/// image built and the host's reference run made only when one of them is selected.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    if !REEF_RUNS.iter().any(|run| super::is_selected(&run.name())) {
        return;
    }
    let prepared = prepare();
    for run in &REEF_RUNS {
        let integration = match &prepared {
            Ok(prepared) => reef_integration(run, prepared, machine),
            Err(why) => super::unprepared(run.name(), why, machine),
        };
        list.push(integration);
    }
}

fn reef_integration(run: &ReefRun, prepared: &Prepared, machine: &dyn Fn(usize, &str) -> Machine) -> Integration {
    let mut m = machine(run.cores, &exec(&run.line()));
    m.initrd = Some(prepared.image.clone());
    m.timeout = Duration::from_secs(300);
    let host = prepared.host.clone();
    let known = prepared.known.clone();
    Integration {
        name: run.name(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            let comparison = compare("bash", &host, &verdicts(serial), &known, RULES);
            println!("{}", summary(&comparison));
            let mut problems = problems(&comparison);
            if !serial.lines().any(|l| l.trim_end() == DONE) {
                problems.insert(0, format!("the run on Reef did not reach `{DONE}`"));
            }
            problems.is_empty().then_some(()).ok_or_else(|| problems.join("\n"))
        }),
    }
}

/// The case scripts and their helpers (`tests/bash/*.sh`), by file name.
fn scripts() -> Result<Vec<(String, Vec<u8>)>, String> {
    let directory = tools::root().join(SCRIPTS_DIRECTORY);
    let mut scripts: Vec<(String, Vec<u8>)> = std::fs::read_dir(&directory)
        .map_err(|e| format!("reading {}: {e}", directory.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "sh"))
        .map(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            std::fs::read(&path).map(|bytes| (name, bytes)).map_err(|e| format!("reading {}: {e}", path.display()))
        })
        .collect::<Result<_, _>>()?;
    scripts.sort();
    if !scripts.iter().any(|(name, _)| name == "run.sh") {
        return Err(format!("{SCRIPTS_DIRECTORY} has no run.sh"));
    }
    Ok(scripts)
}

/// Fetches bash and busybox, runs the suite on the host and builds the image.
fn prepare() -> Result<Prepared, String> {
    let known_path = tools::root().join(KNOWN_DIFFERENCES_FILE);
    let known_text =
        std::fs::read_to_string(&known_path).map_err(|e| format!("reading {}: {e}", known_path.display()))?;
    let known = parse_known_differences(&known_text, KNOWN_DIFFERENCES_FILE, LAYOUT)?;
    let cache = debian::cache()?;
    let bash = debian::fetch_bash_static(&cache)?;
    let busybox = debian::fetch_busybox(&cache)?;
    let started = Instant::now();
    let output = run_on_host(&bash.file, &busybox.file)?;
    let host = verdicts(&output);
    if !output.lines().any(|l| l == DONE) || host.is_empty() {
        return Err(format!("the host's run did not reach `{DONE}`:\n{output}"));
    }
    let passed = host.values().filter(|v| **v == Verdict::Passed).count();
    println!(
        "xtask: bash {} on the host: {passed} of {} cases passed ({:.0} s)",
        bash.version,
        host.len(),
        started.elapsed().as_secs_f64()
    );
    for (case, verdict) in &host {
        if let Verdict::Failed(detail) = verdict {
            println!("xtask: bad case {case}: fails on the host with the same bash: {detail}");
        }
    }
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()));
    let mut extra: Vec<ExtraFile> = vec![("bin/bash".into(), 0o755, read(&bash.file)?)];
    for (name, bytes) in scripts()? {
        extra.push((format!("{IMAGE_DIRECTORY}/{name}"), 0o644, bytes));
    }
    let image = tools::build_initramfs_with(IMAGE_FILE, &extra)?;
    Ok(Prepared { image, host, known })
}

/// Runs `run.sh` on the host with `bash` and, as Reef's `/bin` holds them, busybox's applets
/// as its commands, and returns what it printed. The environment is init's on Reef; the run
/// is the leader of a session of its own with no terminal (`setsid -w`), so that job control
/// cannot reach the terminal xtask runs in, with every signal at its default (`env
/// --default-signal`: a caller that ignores SIGINT would hand that on), and bounded in time.
fn run_on_host(bash: &Path, busybox: &Path) -> Result<String, String> {
    let host = tools::root().join(HOST_DIRECTORY);
    let bin = host.join("bin");
    let scratch = host.join("tmp");
    for directory in [&bin, &scratch] {
        if directory.exists() {
            std::fs::remove_dir_all(directory).map_err(|e| format!("removing {}: {e}", directory.display()))?;
        }
        std::fs::create_dir_all(directory).map_err(|e| format!("creating {}: {e}", directory.display()))?;
    }
    let listing = Command::new(busybox).arg("--list").output().map_err(|e| format!("cannot run busybox: {e}"))?;
    for applet in String::from_utf8_lossy(&listing.stdout).lines().filter(|a| !a.is_empty() && *a != "busybox") {
        symlink(busybox, &bin.join(applet))?;
    }
    symlink(bash, &bin.join("bash"))?;
    let runner = tools::root().join(SCRIPTS_DIRECTORY).join("run.sh");
    // Files, not pipes: a process a script left behind (a sleeper of a script killed at its
    // time limit) would hold a pipe open, and reading it to its end would wait for that.
    let (output_path, errors_path) = (host.join("output.txt"), host.join("errors.txt"));
    let create = |path: &Path| std::fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()));
    let status = Command::new("timeout")
        .args(["-k", "5", &HOST_SECONDS.to_string(), "setsid", "-w", "env", "-i", "--default-signal"])
        .arg(format!("PATH={}", bin.display()))
        .args(["HOME=/tmp", "TERM=vt100"])
        .arg(format!("TMPDIR={}", scratch.display()))
        .arg(bin.join("bash"))
        .arg(&runner)
        .current_dir(&scratch)
        .stdin(Stdio::null())
        .stdout(create(&output_path)?)
        .stderr(create(&errors_path)?)
        .status()
        .map_err(|e| format!("cannot run the bash suite on the host (timeout, setsid and env): {e}"))?;
    let read = |path: &Path| {
        std::fs::read(path)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|e| format!("reading {}: {e}", path.display()))
    };
    if !status.success() {
        let errors = read(&errors_path)?;
        return Err(format!(
            "the bash suite failed on the host ({status}; {}): {}",
            errors_path.display(),
            errors.lines().last().unwrap_or("no message")
        ));
    }
    read(&output_path)
}

fn symlink(target: &Path, link: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(target, link).map_err(|e| format!("linking {}: {e}", link.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(cases: &[(&str, Verdict)]) -> BTreeMap<String, Verdict> {
        cases.iter().map(|(name, verdict)| (name.to_string(), verdict.clone())).collect()
    }

    fn failed(detail: &str) -> Verdict {
        Verdict::Failed(detail.into())
    }

    #[test]
    fn case_lines_become_verdicts() {
        let output = "SCRIPT jobs start\r\nCASE jobs/a ok\r\n[c1 WARN ] noise\nCASE jobs/b fail expected 1 got 2\n\
                      CASE jobs/c maybe\nCASE jobs/d ok\nCASE jobs/d ok\n  CASE jobs/e ok\nCASE jobs/f ok trailing\n";
        let verdicts = verdicts(output);
        assert_eq!(
            verdicts,
            map(&[
                ("jobs/a", Verdict::Passed),
                ("jobs/b", failed("expected 1 got 2")),
                ("jobs/c", failed("not a verdict: `CASE jobs/c maybe`")),
                ("jobs/d", failed("printed more than once")),
                ("jobs/f", failed("not a verdict: `CASE jobs/f ok trailing`")),
            ])
        );
    }

    #[test]
    fn known_differences_need_a_reason_and_appear_once() {
        let parse = |text: &str| parse_known_differences(text, KNOWN_DIFFERENCES_FILE, LAYOUT);
        let text = "# comment\n\njobs/stop   Reef has no SIGSTOP\nprocsubst/cat no /dev/fd\n";
        assert_eq!(
            parse(text).unwrap(),
            vec![
                KnownDifference {
                    suite: "bash".into(),
                    case: "jobs/stop".into(),
                    reason: "Reef has no SIGSTOP".into()
                },
                KnownDifference { suite: "bash".into(), case: "procsubst/cat".into(), reason: "no /dev/fd".into() },
            ]
        );
        assert!(parse("jobs/stop\n").unwrap_err().contains("has no reason"));
        assert!(parse("a/b x\na/b y\n").unwrap_err().contains("listed twice"));
    }

    #[test]
    fn the_list_in_the_tree_parses() {
        let text = std::fs::read_to_string(tools::root().join(KNOWN_DIFFERENCES_FILE)).unwrap();
        parse_known_differences(&text, KNOWN_DIFFERENCES_FILE, LAYOUT).unwrap();
    }

    #[test]
    fn comparison_finds_regressions_and_shrinks_the_list() {
        let host = map(&[
            ("s/pass", Verdict::Passed),
            ("s/regressed", Verdict::Passed),
            ("s/missing", Verdict::Passed),
            ("s/known", Verdict::Passed),
            ("s/known-missing", Verdict::Passed),
            ("s/fixed", Verdict::Passed),
            ("s/bad", failed("host says no")),
        ]);
        let reef = map(&[
            ("s/pass", Verdict::Passed),
            ("s/regressed", failed("expected 1 got 2")),
            ("s/known", failed("no SIGSTOP")),
            ("s/fixed", Verdict::Passed),
            ("s/bad", Verdict::Passed),
            ("s/extra", Verdict::Passed),
        ]);
        let known: Vec<KnownDifference> = ["s/known", "s/known-missing", "s/fixed", "s/bad", "s/gone"]
            .iter()
            .map(|case| KnownDifference { suite: "bash".into(), case: case.to_string(), reason: "why".into() })
            .collect();
        let comparison = compare("bash", &host, &reef, &known, RULES);
        assert_eq!(comparison.host_passed, 6);
        assert_eq!(comparison.reef_passed + comparison.reef_passed_uncounted, 4);
        assert_eq!(comparison.known, 2);
        assert_eq!(comparison.host_failures, [("s/bad".to_string(), "host says no".to_string())]);
        assert_eq!(
            comparison.new_failures,
            [
                ("s/missing".to_string(), "no verdict on Reef (the script ended early)".to_string()),
                ("s/regressed".to_string(), "expected 1 got 2".to_string()),
            ]
        );
        assert_eq!(comparison.now_passing, ["s/fixed"]);
        assert_eq!(comparison.stale, ["s/bad", "s/gone"]);
        assert_eq!(comparison.unknown_on_reef, ["s/extra"]);
        assert_eq!(
            summary(&comparison),
            "bash suite: host 6 passed, Reef 4 passed, 2 known differences (1 cases fail on the host and are left out)"
        );
        let problems = problems(&comparison);
        assert_eq!(problems.len(), 6);
        assert!(problems[2].starts_with("s/fixed now passes on Reef: remove it from tests/bash/known-differences.txt"));
    }

    #[test]
    fn a_clean_comparison_has_no_problems() {
        let host = map(&[("s/a", Verdict::Passed), ("s/b", Verdict::Passed)]);
        let reef = map(&[("s/a", Verdict::Passed), ("s/b", failed("no /dev/fd"))]);
        let known = vec![KnownDifference { suite: "bash".into(), case: "s/b".into(), reason: "no /dev/fd".into() }];
        let comparison = compare("bash", &host, &reef, &known, RULES);
        assert!(problems(&comparison).is_empty(), "{:?}", problems(&comparison));
        assert_eq!(summary(&comparison), "bash suite: host 2 passed, Reef 1 passed, 1 known differences");
    }

    #[test]
    fn the_four_core_run_names_its_scripts() {
        assert_eq!(REEF_RUNS[0].line(), "/bin/bash /opt/bash-tests/run.sh");
        assert_eq!(REEF_RUNS[1].line(), "/bin/bash /opt/bash-tests/run.sh --on 2 jobs pipelines signals traps wait");
    }
}
