//! CPython's own regression tests (Debian's `libpython3.11-testsuite`, in the Debian tree):
//! `python3 -m test -v` of the modules under `chroot /debian` on Reef, against the same
//! in the Linux guest (Debian's kernel, the same QEMU flags, the same tree over 9P, as root as
//! on Reef), compared case by case with the rule of the foreign suites (`known_differences`):
//! a case counts when it passes in the guest, and one that does not pass on Reef must be
//! listed, with its reason, in `xtask/cpython/known-differences.txt`.
//!
//! The guest's verdicts are a reference kept in the repository
//! (`xtask/cpython/linux-guest-verdicts.txt`, written by `cargo xtask peer cpython`), named by
//! the versions of the tree's Python packages and the modules: the guest's run takes ten
//! minutes under TCG, twice Reef's, too long for every suite. When the tree's versions or the
//! modules are not those of the reference, the suite runs the guest itself beside Reef.

use super::exec;
use super::Deferred;
use crate::linux_guest;
use crate::qemu::{Accel, Machine, Share};
use crate::test::known_differences::{compare, parse_known_differences, Layout, Rules, Verdict};
use crate::test::runner::Integration;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The run's name.
const NAME: &str = "cpython-tests-2-cores";

/// The modules run, as `python3 -m test` names them: the list.
const MODULES: [&str; 12] = [
    "test_glob",
    "test_fcntl",
    "test_select",
    "test_mmap",
    "test_shutil",
    "test_pathlib",
    "test_os",
    "test_posix",
    "test_tempfile",
    "test_threading",
    "test_subprocess",
    "test_signal",
];

/// The reviewed list of cases that pass in the Linux guest and not on Reef.
const KNOWN_DIFFERENCES: &str = include_str!("../../../cpython/known-differences.txt");

/// The Linux guest's verdicts, as `cargo xtask peer cpython` wrote them.
const REFERENCE: &str = include_str!("../../../cpython/linux-guest-verdicts.txt");

/// Where `peer cpython` writes the reference, from the repository's root.
const REFERENCE_PATH: &str = "xtask/cpython/linux-guest-verdicts.txt";

/// The reference's first line: what it was made from (the tree's Python packages, the
/// modules run).
fn reference_key(tree: &Path) -> Result<String, String> {
    let packages = crate::rootfs::package_versions(tree)?;
    let python: Vec<&str> =
        packages.lines().filter(|line| line.starts_with("python3") || line.starts_with("libpython3")).collect();
    Ok(format!("# made from {} running {}", python.join(" "), MODULES.join(" ")))
}

/// The reference's verdicts when it was made from `key`.
fn reference_verdicts(reference: &str, key: &str) -> Option<BTreeMap<String, Ended>> {
    let mut lines = reference.lines();
    if lines.next() != Some(key) {
        return None;
    }
    let found: BTreeMap<String, Ended> = lines
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| line.split_once(' '))
        .map(|(case, ended)| (case.to_string(), Ended(ended.to_string())))
        .collect();
    (!found.is_empty()).then_some(found)
}

/// The reference's text: `key`, a line on how to remake it, then `case verdict` a line.
fn reference_text(key: &str, found: &BTreeMap<String, Ended>) -> String {
    let mut text = format!("{key}\n# the Linux guest's verdicts (`cargo xtask peer cpython` rewrites this file)\n");
    for (case, ended) in found {
        text += &format!("{case} {}\n", ended.0);
    }
    text
}

/// `cargo xtask peer cpython [--accel kvm|tcg]`: runs the modules in the Linux guest and
/// writes the reference the suite compares Reef with.
pub(crate) fn peer(arguments: &[String]) -> Result<u8, String> {
    let mut accel = Accel::detect();
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--accel" => accel = Accel::parse(words.next().ok_or("--accel takes kvm or tcg")?)?,
            other => return Err(format!("peer cpython: unknown option `{other}` (takes --accel kvm|tcg)")),
        }
    }
    let tree = crate::rootfs::build()?;
    let key = reference_key(&tree)?;
    println!(
        "peer cpython: {} in the Linux guest ({}), about thirteen minutes under TCG",
        MODULES.join(" "),
        accel.name()
    );
    let found = linux_verdicts(accel, &tree)?;
    let passed = found.values().filter(|ended| ended.passed()).count();
    let path = crate::tools::root().join(REFERENCE_PATH);
    std::fs::write(&path, reference_text(&key, &found)).map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("peer cpython: {} cases, {passed} passed; wrote {REFERENCE_PATH}", found.len());
    Ok(0)
}

/// Printed by Reef after the tests.
const DONE: &str = "cpython-tests-done";

const RULES: Rules = Rules { stale_when_the_host_fails: true, reef_only_cases_fail: false };

/// How a case ended, as `unittest -v` says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ended(String);

impl Verdict for Ended {
    fn passed(&self) -> bool {
        self.0 == "ok" || self.0 == "expected failure"
    }

    fn describe(&self) -> String {
        self.0.clone()
    }

    fn missing() -> String {
        "no verdict (the run ended before it, or it printed over its own line)".into()
    }
}

/// The verdicts of `python3 -m test -v` output: lines `name (test.module.Class.name) ... ok`,
/// keyed by the dotted id. A case whose own output splits its line has no verdict here, on
/// either side; a line of Reef's kernel log (`[c0 INFO ] …`) that came in the middle of one is
/// taken out first.
pub(crate) fn verdicts(output: &str) -> BTreeMap<String, Ended> {
    without_kernel_log(output)
        .lines()
        .filter_map(|line| {
            let (head, ended) = line.trim_end().split_once(" ... ")?;
            let id = head.split_once(" (")?.1.strip_suffix(')')?;
            let ended = match ended {
                "ok" | "ERROR" | "FAIL" | "expected failure" | "unexpected success" => ended.to_string(),
                skipped if skipped.starts_with("skipped") => "skipped".to_string(),
                _ => return None,
            };
            id.starts_with("test.").then(|| (id.to_string(), Ended(ended)))
        })
        .collect()
}

/// `output` without the kernel's log lines (`[c<core> <LEVEL> ] …` to the end of a line): a
/// line that one cut after ` ... ` is joined with the verdict on the next.
fn without_kernel_log(output: &str) -> String {
    let is_log = |text: &str| {
        text.strip_prefix("[c").is_some_and(|rest| {
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            digits > 0
                && rest[digits..].starts_with(' ')
                && rest[digits..].get(..12).is_some_and(|head| head.contains(" ] "))
        })
    };
    let mut text = String::new();
    let mut joining = false;
    for line in output.lines() {
        let kept = match line.match_indices("[c").map(|(at, _)| at).find(|&at| is_log(&line[at..])) {
            Some(0) => continue,
            Some(at) => &line[..at],
            None => line,
        };
        if !joining && !text.is_empty() {
            text.push('\n');
        }
        text.push_str(kept);
        joining = kept.len() < line.len() && kept.ends_with(" ... ");
    }
    text
}

/// Where both machines see the Debian tree.
const TREE: &str = "/debian";

/// How long Reef's run may take: the modules take about six minutes under TCG.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// How long the Linux guest's run may take: about thirteen minutes under TCG.
const GUEST_TIMEOUT: Duration = Duration::from_secs(1500);

/// The Linux guest's run: Debian's kernel with the tree shared as on Reef (9P over virtio),
/// and `/tmp`, `/proc`, `/sys` and `/dev` mounted inside it, as Reef's chroot shows its own;
/// the same command under `chroot`, as root, as on Reef.
fn linux_verdicts(accel: Accel, tree: &Path) -> Result<BTreeMap<String, Ended>, String> {
    let (modules, names) = linux_guest::nine_p_modules()?;
    let mut lines = linux_guest::load_modules(&names);
    lines.push(format!("mkdir -p {TREE}"));
    lines.push(format!("{} || echo 'PEER mount failed'", linux_guest::mount_share(0, TREE)));
    for (kind, directory) in [("tmpfs", "tmp"), ("proc", "proc"), ("sysfs", "sys"), ("devtmpfs", "dev")] {
        lines.push(format!("mount -t {kind} {kind} {TREE}/{directory}"));
    }
    lines.push(format!("chroot {TREE} /bin/bash -c 'cd /tmp && exec {}' 2>&1", python_command(&MODULES)));
    let mut machine = Machine::new(2);
    machine.accel = accel;
    machine.memory_mib = 1024;
    machine.timeout = GUEST_TIMEOUT;
    machine.kernel_args = linux_guest::LINUX_KERNEL_ARGUMENTS.into();
    machine.shares = vec![Share { directory: tree.to_path_buf(), mount_point: TREE.into() }];
    let run = linux_guest::run_program_with(&machine, &[], &modules, &lines.join("\n"))?;
    if run.serial.contains("PEER mount failed") {
        return Err(format!("the Linux guest could not mount the tree:\n{}", linux_guest::tail(&run.serial, 30)));
    }
    let found = verdicts(&run.serial);
    if found.is_empty() {
        return Err(format!(
            "the Linux guest's run printed no verdict; it ended:\n{}",
            linux_guest::tail(&run.serial, 30)
        ));
    }
    Ok(found)
}

/// The command both machines run, in the tree, from `/tmp`: `modules` (the guest runs them
/// all in one).
fn python_command(modules: &[&str]) -> String {
    format!("/usr/bin/python3 -m test -v {}", modules.join(" "))
}

/// Modules of the reference that the suite leaves out unless `REEF_CPYTHON_ALL=1`:
/// `test_subprocess` takes about four minutes on Reef under TCG (330 cases, each starting
/// Pythons) and `test_signal` one (its cases sleep for their signals), which the suite's 20
/// minutes on a 2-core machine cannot hold beside the rest. On core 1 they would be slower
/// still (their file calls go to core 0's service, issue 31).
const LEFT_OUT_OF_THE_SUITE: [&str; 2] = ["test_subprocess", "test_signal"];

/// The modules Reef runs: every one with `REEF_CPYTHON_ALL=1`, else those not left out.
fn reef_modules() -> Vec<&'static str> {
    let all = std::env::var("REEF_CPYTHON_ALL").as_deref() == Ok("1");
    MODULES.iter().copied().filter(|module| all || !LEFT_OUT_OF_THE_SUITE.contains(module)).collect()
}

/// The module of a case id (`test.test_os.FileTests.test_x`: `test_os`).
fn module_of(case: &str) -> &str {
    case.split('.').nth(1).unwrap_or("")
}

/// Reef's shell line: the modules, from `/tmp`, then the end mark.
fn reef_script(modules: &[&str]) -> String {
    format!("cd /tmp; chroot {TREE} {} 2>&1; echo {DONE}", python_command(modules))
}

/// The run, deferred to after the suite's timed runs: when it is listed, the Linux guest's
/// run starts in a thread beside Reef's (each keeps about one host CPU busy: the Reef run's
/// second core halts), and its verdicts are awaited when Reef's run is judged.
pub(super) fn deferred(machine: impl Fn(usize, &str) -> Machine + 'static) -> Vec<Deferred> {
    if !super::is_selected(NAME) {
        return Vec::new();
    }
    let tree = match crate::rootfs::build() {
        Ok(tree) => tree,
        Err(why) => return vec![Box::new(move || vec![super::unprepared(NAME.to_string(), &why, &machine)])],
    };
    vec![Box::new(move || vec![integration(&machine, tree)])]
}

/// The Linux guest's verdicts: the reference's when it was made from this tree and these
/// modules, else those of a run of the guest, started now.
enum Reference {
    Kept(BTreeMap<String, Ended>),
    Running(std::thread::JoinHandle<Result<BTreeMap<String, Ended>, String>>),
}

/// Reef's run, with the Linux guest's verdicts from the reference or from a run beside it.
fn integration(machine: &dyn Fn(usize, &str) -> Machine, tree: PathBuf) -> Integration {
    let modules = reef_modules();
    let mut m = machine(2, &exec(&reef_script(&modules)));
    m.timeout = RUN_TIMEOUT;
    m.shares = vec![Share { directory: tree.clone(), mount_point: TREE.into() }];
    let accel = m.accel;
    let kept = reference_key(&tree).ok().and_then(|key| reference_verdicts(REFERENCE, &key));
    let reference = match kept {
        Some(found) => Reference::Kept(found),
        None => {
            println!(
                "cpython: {REFERENCE_PATH} was made from other packages or modules: the Linux guest \
                 runs them beside Reef (`cargo xtask peer cpython` remakes the reference)"
            );
            Reference::Running(std::thread::spawn(move || linux_verdicts(accel, &tree)))
        }
    };
    let linux = Mutex::new(Some(reference));
    Integration {
        name: NAME.into(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            let linux = match linux.lock().ok().and_then(|mut slot| slot.take()) {
                Some(Reference::Kept(found)) => found,
                Some(Reference::Running(run)) => {
                    run.join().map_err(|_| "the Linux guest's run panicked".to_string())??
                }
                None => return Err("the Linux guest's verdicts were taken already".into()),
            };
            if !serial.contains(DONE) {
                return Err("the tests did not finish".into());
            }
            // Only the modules Reef ran count, in the reference and in the list.
            let ran = |case: &str| modules.contains(&module_of(case));
            let linux: BTreeMap<String, Ended> = linux.into_iter().filter(|(case, _)| ran(case)).collect();
            let known: Vec<_> = parse_known_differences(
                KNOWN_DIFFERENCES,
                "xtask/cpython/known-differences.txt",
                Layout::OneSuite("cpython"),
            )?
            .into_iter()
            .filter(|entry| ran(&entry.case))
            .collect();
            let comparison = compare("cpython", &linux, &verdicts(serial), &known, RULES);
            println!(
                "cpython: the Linux guest passed {}, Reef {} of them, {} known differences ({})",
                comparison.host_passed,
                comparison.reef_passed,
                comparison.known,
                modules.join(" ")
            );
            if comparison.holds() {
                return Ok(());
            }
            Err(format!(
                "unlisted failures {:?}; listed but passing now {:?}; stale entries {:?}",
                comparison.new_failures, comparison.now_passing, comparison.stale
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_lines_are_read() {
        let output = "test_glob (test.test_glob.GlobTests.test_glob) ... ok\n\
                      test_x (test.test_m.C.test_x) ... ERROR\n\
                      test_y (test.test_m.C.test_y) ... skipped 'needs root'\n\
                      test_z (test.test_m.C.test_z) ... printed something\n\
                      Ran 4 tests in 0.1s\n";
        let found = verdicts(output);
        assert_eq!(found.len(), 3);
        assert!(found["test.test_glob.GlobTests.test_glob"].passed());
        assert!(!found["test.test_m.C.test_x"].passed());
        assert_eq!(found["test.test_m.C.test_y"].describe(), "skipped");
    }

    #[test]
    fn the_suite_runs_every_module_but_those_left_out() {
        let modules = reef_modules();
        let script = reef_script(&modules);
        for module in MODULES {
            let expected = usize::from(!LEFT_OUT_OF_THE_SUITE.contains(&module));
            assert_eq!(script.matches(&format!(" {module}")).count(), expected, "{module} in {script}");
        }
        assert!(exec(&script).len() <= platform::cmdline::MAX_VALUE);
        assert_eq!(module_of("test.test_os.FileTests.test_x"), "test_os");
    }

    #[test]
    fn a_kernel_log_line_does_not_split_a_verdict() {
        let output = "test_a (test.test_m.C.test_a) ... [c0 INFO ] system call 435 is not implemented\n\
                      ok\n\
                      [c1 WARN ] something else\n\
                      test_b (test.test_m.C.test_b) ... ERROR\n\
                      test_c (test.test_m.C.test_c) ... skipped '[c1 is not a log'\n";
        let found = verdicts(output);
        assert_eq!(found["test.test_m.C.test_a"].describe(), "ok");
        assert_eq!(found["test.test_m.C.test_b"].describe(), "ERROR");
        assert_eq!(found["test.test_m.C.test_c"].describe(), "skipped");
    }

    #[test]
    fn the_reference_reads_back_only_under_its_key() {
        let mut found = BTreeMap::new();
        found.insert("test.test_m.C.test_x".to_string(), Ended("ok".into()));
        found.insert("test.test_m.C.test_y".to_string(), Ended("skipped".into()));
        let text = reference_text("# made from python3=1 running test_m", &found);
        assert_eq!(reference_verdicts(&text, "# made from python3=1 running test_m"), Some(found));
        assert_eq!(reference_verdicts(&text, "# made from python3=2 running test_m"), None);
    }

    #[test]
    fn the_kept_reference_has_every_module() {
        let mut lines = REFERENCE.lines();
        let key = lines.next().expect("a key line");
        assert!(key.ends_with(&format!("running {}", MODULES.join(" "))), "made for other modules: {key}");
        let cases: Vec<&str> = lines.filter(|line| !line.starts_with('#')).collect();
        for module in MODULES {
            assert!(cases.iter().any(|line| line.starts_with(&format!("test.{module}."))), "{module} has no case");
        }
    }

    #[test]
    fn the_list_is_reviewed() {
        let known = parse_known_differences(KNOWN_DIFFERENCES, "known-differences.txt", Layout::OneSuite("cpython"))
            .expect("every entry has a reason");
        assert!(known.iter().all(|entry| entry.case.starts_with("test.")));
    }
}
