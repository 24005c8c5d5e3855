//! The test suites of the crates `nix` and `rustix`, on Reef and on the host, compared.
//!
//! Issue 27's foreign suites: pinned versions of the two crates are fetched from crates.io,
//! their tests built as static musl executables (`build`), and every test run in a process
//! of its own, under a watcher that kills it after a timeout, by one generated shell script:
//! on the host, as the reference, and on Reef, in QEMU. A case counts when it passes on the
//! host; one that does not pass on Reef fails the suite unless
//! `xtask/foreign/known-differences.txt` lists it, and a listed case that passes fails it
//! too, so the list only shrinks.
//!
//! One process per test, not one per executable: libtest has no per-test timeout, so a test
//! that hangs on Reef would end every test after it, and one that kills its process (a
//! signal Reef delivers differently) would take the rest with it.

mod build;
mod libtest;
mod report;

use super::exec;
use crate::qemu::Machine;
use crate::test::known_differences::{compare, parse_known_differences, KnownDifference};
use crate::test::runner::Integration;
use crate::tools::{self, ExtraFile};
use build::Built;
use libtest::Outcome;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A crate whose tests are a suite.
pub struct Suite {
    pub name: &'static str,
    /// The exact version fetched; `xtask/foreign/<name>-<version>.Cargo.lock` pins its
    /// dependencies.
    pub version: &'static str,
    /// What `cargo test --no-run` needs beyond the common arguments to build every test.
    pub cargo_arguments: &'static [&'static str],
    /// Files of the crate its tests open by a path relative to the crate (cargo runs tests
    /// there); they go beside the executables in the image.
    pub data_files: &'static [&'static str],
}

/// The suites. The published `rustix` crate ships its unit tests but not its `tests/`
/// directory, so its suite is the unit tests of every API (`all-apis`); `nix` ships both,
/// and its tests need every feature.
const SUITES: [Suite; 2] = [
    Suite { name: "nix", version: "0.30.1", cargo_arguments: &["--all-features"], data_files: &[] },
    Suite {
        name: "rustix",
        version: "1.1.6",
        cargo_arguments: &["--lib", "--features", "all-apis"],
        data_files: &["src/buffer.rs"],
    },
];

/// Seconds a test may take before `timeout` kills it. The slowest nix tests sleep for a
/// second or two on purpose; under TCG a wide margin over their real work remains. It stays
/// under the test watchdog's 60 s of silence, which would end the whole run.
const TEST_SECONDS: u32 = 20;

/// Where the image keeps the suites (`/opt/crate-tests/<suite>/<executable>`); the host
/// runs the same layout from `target/foreign/layout`.
const IMAGE_DIRECTORY: &str = "opt/crate-tests";

/// The image the suites boot: Reef's own, with the suites added.
const IMAGE_FILE: &str = "target/reef-crates-initramfs.cpio";

/// What the integrations share: the image and, per suite, the host's verdicts.
struct Prepared {
    image: PathBuf,
    host: BTreeMap<&'static str, BTreeMap<String, Outcome>>,
    known: Vec<KnownDifference>,
}

/// `foreign-crates-<suite>` for each suite, deferred: the crates are built and run on the
/// host (a minute or more the first time) in a thread at the lowest priority while the runs
/// before them go on, and only when one of them is selected (`--only`).
pub(super) fn integrations(machine: impl Fn(usize, &str) -> Machine + 'static) -> Vec<super::Deferred> {
    let names: Vec<String> = SUITES.iter().map(|suite| format!("foreign-crates-{}", suite.name)).collect();
    if !names.iter().any(|name| super::is_selected(name)) {
        return Vec::new();
    }
    let preparation = std::thread::spawn(|| {
        crate::test::lowest_priority_for_this_thread();
        prepare()
    });
    vec![Box::new(move || {
        let prepared = preparation.join().unwrap_or_else(|_| Err("the thread preparing the suites panicked".into()));
        SUITES
            .iter()
            .zip(names)
            .map(|(suite, name)| match &prepared {
                Ok(prepared) => suite_integration(suite, name, prepared, &machine),
                Err(why) => super::unprepared(name, why, &machine),
            })
            .collect()
    })]
}

fn suite_integration(
    suite: &'static Suite,
    name: String,
    prepared: &Prepared,
    machine: &dyn Fn(usize, &str) -> Machine,
) -> Integration {
    let mut m = machine(2, &exec(&format!("sh /{IMAGE_DIRECTORY}/run-{0}.sh /{IMAGE_DIRECTORY}", suite.name)));
    m.initrd = Some(prepared.image.clone());
    // The image's 25 MiB (the test executables are 1 to 3 MiB each) sit in guest memory
    // beside the cores' partitions, and the tests map memory of their own.
    m.memory_mib = 1024;
    // The nix run takes some 70 s under TCG; a test that hangs is killed after
    // TEST_SECONDS, so only a stuck kernel comes near this.
    m.timeout = Duration::from_secs(300);
    let host = prepared.host[suite.name].clone();
    let known = prepared.known.clone();
    Integration {
        name,
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            if !serial.lines().any(|l| l.trim() == format!("{} {}", libtest::DONE, suite.name)) {
                return Err(format!("the run of {} on Reef did not reach its end", suite.name));
            }
            let reef = libtest::verdicts(serial, suite.name);
            let comparison = compare(suite.name, &host, &reef, &known, report::RULES);
            println!("{}", report::summary(&comparison, suite.name));
            comparison.holds().then_some(()).ok_or_else(|| report::problems(&comparison, suite.name).join("\n"))
        }),
    }
}

/// Builds the suites, lays them out as the image holds them, runs them on the host and
/// builds the image.
fn prepare() -> Result<Prepared, String> {
    let known_path = build::pinned_file("known-differences.txt");
    let known_text =
        std::fs::read_to_string(&known_path).map_err(|e| format!("reading {}: {e}", known_path.display()))?;
    let known = parse_known_differences(&known_text, &known_path.display().to_string(), report::LAYOUT)?;
    let started = Instant::now();
    let built = build::build_all(&SUITES)?;
    println!("xtask: the crates' tests are built ({:.0} s)", started.elapsed().as_secs_f64());
    let layout = tools::root().join("target/foreign/layout");
    if layout.exists() {
        std::fs::remove_dir_all(&layout).map_err(|e| format!("removing {}: {e}", layout.display()))?;
    }
    let mut extra: Vec<ExtraFile> = Vec::new();
    let mut host = BTreeMap::new();
    for (suite, built) in SUITES.iter().zip(&built) {
        let tests = list_tests(built)?;
        let skipped: Vec<&str> = known
            .iter()
            .filter(|k| k.suite == suite.name && k.reason.starts_with(HANG_PREFIX))
            .map(|k| k.case.as_str())
            .collect();
        let mut files = layout_files(suite, built, &tests)?;
        // The host runs every test; Reef skips the listed hangs.
        let host_script = runner_script(suite.name, &tests, &[]);
        let reef_script = runner_script(suite.name, &tests, &skipped);
        files.push((format!("{IMAGE_DIRECTORY}/run-{}.sh", suite.name), 0o755, reef_script.into_bytes()));
        for (path, mode, bytes) in &files {
            write_file(&layout.join(path), *mode, bytes)?;
        }
        let host_path = layout.join(format!("run-{}-host.sh", suite.name));
        write_file(&host_path, 0o755, host_script.as_bytes())?;
        let started = Instant::now();
        let output = run_on_host(&host_path, &layout.join(IMAGE_DIRECTORY))?;
        // Kept for a reader comparing a case's two runs (Reef's is in the serial log).
        write_file(&layout.join(format!("host-{}.log", suite.name)), 0o644, output.as_bytes())?;
        let verdicts = libtest::verdicts(&output, suite.name);
        if verdicts.len() != tests.iter().map(|(_, t)| t.len()).sum::<usize>() {
            return Err(format!("the host run of {} gave {} verdicts for its tests", suite.name, verdicts.len()));
        }
        let passed = verdicts.values().filter(|v| **v == Outcome::Passed).count();
        println!(
            "xtask: {} {} on the host: {passed} of {} tests passed ({:.0} s)",
            suite.name,
            suite.version,
            verdicts.len(),
            started.elapsed().as_secs_f64()
        );
        host.insert(suite.name, verdicts);
        extra.extend(files);
    }
    let image = tools::build_initramfs_with(IMAGE_FILE, &extra)?;
    Ok(Prepared { image, host, known })
}

/// A known difference whose reason starts so is not run on Reef at all: the test hangs
/// there, and each would cost [`TEST_SECONDS`] of the suite's time.
const HANG_PREFIX: &str = "hangs:";

/// Each executable of a suite with its tests, from its `--list` on the host.
fn list_tests(built: &Built) -> Result<Vec<(String, Vec<String>)>, String> {
    built
        .binaries
        .iter()
        .map(|binary| {
            let output = Command::new(&binary.path)
                .args(["--list"])
                .current_dir(&built.crate_directory)
                .output()
                .map_err(|e| format!("cannot run {}: {e}", binary.path.display()))?;
            if !output.status.success() {
                return Err(format!("{} --list failed ({})", binary.path.display(), output.status));
            }
            Ok((binary.name.clone(), libtest::listed_tests(&String::from_utf8_lossy(&output.stdout))))
        })
        .collect()
}

/// The files of a suite in the image: its executables (the ones with tests) and data files.
fn layout_files(suite: &Suite, built: &Built, tests: &[(String, Vec<String>)]) -> Result<Vec<ExtraFile>, String> {
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()));
    let mut files = Vec::new();
    for binary in &built.binaries {
        if tests.iter().any(|(name, list)| *name == binary.name && !list.is_empty()) {
            files.push((format!("{IMAGE_DIRECTORY}/{}/{}", suite.name, binary.name), 0o755, read(&binary.path)?));
        }
    }
    for data in suite.data_files {
        files.push((
            format!("{IMAGE_DIRECTORY}/{}/{data}", suite.name),
            0o644,
            read(&built.crate_directory.join(data))?,
        ));
    }
    Ok(files)
}

/// The shell script that runs each test of `tests` but `skipped` (case names) in a process
/// of its own, in `<root>/<suite>` (`$1`: the image's or the host's layout), and prints
/// [`libtest::MARKER`] after each and [`libtest::DONE`] at the end. It runs in busybox `sh`
/// on Reef and in the host's `sh`. A watcher of its own kills a test still running after
/// [`TEST_SECONDS`], and ends within a second of the test's end. Not busybox's `timeout`: on
/// Reef its watcher, which a vforked child forks, dies at once of SIGSEGV (an instruction
/// fetch from its own text, not present), so the test would run unwatched.
fn runner_script(suite: &str, tests: &[(String, Vec<String>)], skipped: &[&str]) -> String {
    let mut script = format!(
        "# Runs the tests of {suite}, each in a process of its own (generated by cargo xtask test).\n\
         cd \"$1/{suite}\" || exit 1\n\
         t() {{\n\
         \t./$1 --exact $2 --test-threads=1 </dev/null 2>&1 &\n\
         \tp=$!\n\
         \t(i=0; while [ $i -lt {TEST_SECONDS} ] && kill -0 $p 2>/dev/null; do sleep 1; i=$((i + 1)); done; kill -9 $p 2>/dev/null) &\n\
         \twait $p\n\
         \techo {marker} {suite} $1 $2 status $?\n\
         }}\n",
        marker = libtest::MARKER,
    );
    for (binary, list) in tests {
        for test in list {
            if !skipped.contains(&libtest::case_name(binary, test).as_str()) {
                script.push_str(&format!("t {binary} {test}\n"));
            }
        }
    }
    script.push_str(&format!("echo {} {suite}\n", libtest::DONE));
    script
}

/// Runs a runner script on the host, in an environment like Reef's init gives (no
/// `RUST_BACKTRACE` or anything else of the caller's), and returns what it printed.
fn run_on_host(script: &Path, root: &Path) -> Result<String, String> {
    let output = Command::new("sh")
        .arg(script)
        .arg(root)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", "/tmp")
        .env("TERM", "vt100")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!("{} failed on the host ({})", script.display(), output.status));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn write_file(path: &Path, mode: u32, bytes: &[u8]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("setting the mode of {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_marks_every_test_but_the_skipped_hangs() {
        let tests =
            vec![("test".to_string(), vec!["a::b".to_string(), "c".to_string()]), ("nix".into(), vec!["d".into()])];
        let script = runner_script("nix", &tests, &["test/c"]);
        assert!(script.contains("cd \"$1/nix\" || exit 1\n"));
        assert!(script.contains("\t./$1 --exact $2 --test-threads=1 </dev/null 2>&1 &\n"));
        assert!(script.contains("while [ $i -lt 20 ] && kill -0 $p"));
        assert!(script.contains("echo crate-test nix $1 $2 status $?\n"));
        let runs: Vec<&str> = script.lines().filter(|l| l.starts_with("t ")).collect();
        assert_eq!(runs, ["t test a::b", "t nix d"]);
        assert!(script.ends_with("echo crate-tests-done nix\n"));
    }
}
