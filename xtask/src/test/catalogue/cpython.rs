//! CPython's own regression tests (Debian's `libpython3.11-testsuite`, in the Debian tree):
//! `python3 -m test -v` of a few modules under `chroot /debian` on Reef, against the same
//! tree's python3 run on the host, compared case by case with the rule of the foreign
//! suites (`known_differences`): a case counts when it passes on the host, and one that does
//! not pass on Reef must be listed, with its reason, in `xtask/cpython/known-differences.txt`.
//!
//! The host, not the Linux guest, is the reference here: it runs the same binaries of the
//! same tree (through the tree's loader) on Linux, without a second boot in the suite's
//! minutes.

use super::exec;
use crate::qemu::{Machine, Share};
use crate::test::known_differences::{compare, parse_known_differences, Layout, Rules, Verdict};
use crate::test::runner::Integration;
use std::collections::BTreeMap;
use std::path::Path;

/// The run's name.
const NAME: &str = "cpython-tests-2-cores";

/// The modules run, as `python3 -m test` names them: those that take seconds under TCG.
const MODULES: [&str; 6] = ["test_glob", "test_fcntl", "test_select", "test_mmap", "test_shutil", "test_pathlib"];

/// The reviewed list of cases that pass on the host and not on Reef.
const KNOWN_DIFFERENCES: &str = include_str!("../../../cpython/known-differences.txt");

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
/// either side.
pub(crate) fn verdicts(output: &str) -> BTreeMap<String, Ended> {
    output
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

/// The host's run: the tree's python3 through the tree's loader, in a scratch directory.
fn host_verdicts(tree: &Path) -> Result<BTreeMap<String, Ended>, String> {
    let root = tree.display().to_string();
    let library_path = format!("{root}/lib/x86_64-linux-gnu:{root}/usr/lib/x86_64-linux-gnu");
    let scratch = crate::tools::root().join("target/cpython-host");
    let _ = std::fs::create_dir_all(&scratch);
    let output = std::process::Command::new(tree.join("lib64/ld-linux-x86-64.so.2"))
        .args(["--library-path", &library_path])
        .arg(tree.join("usr/bin/python3"))
        .args(["-m", "test", "-v"])
        .args(MODULES)
        .current_dir(&scratch)
        .output()
        .map_err(|e| format!("running CPython's tests on the host: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    let found = verdicts(&text);
    if found.is_empty() {
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        return Err(format!(
            "the host's run printed no verdict; it ended:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    Ok(found)
}

/// Adds the run; the host's verdicts are taken when it is judged.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    if !super::is_selected(NAME) {
        return;
    }
    let tree = match crate::rootfs::build() {
        Ok(tree) => tree,
        Err(why) => {
            list.push(super::unprepared(NAME.to_string(), &why, machine));
            return;
        }
    };
    let modules = MODULES.join(" ");
    let script = format!("cd /tmp; chroot /debian /usr/bin/python3 -m test -v {modules} 2>&1; echo {DONE}");
    let mut m = machine(2, &exec(&script));
    m.timeout = std::time::Duration::from_secs(300);
    m.shares = vec![Share { directory: tree.clone(), mount_point: "/debian".into() }];
    list.push(Integration {
        name: NAME.into(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            if !serial.contains(DONE) {
                return Err("the tests did not finish".into());
            }
            let known = parse_known_differences(
                KNOWN_DIFFERENCES,
                "xtask/cpython/known-differences.txt",
                Layout::OneSuite("cpython"),
            )?;
            let host = host_verdicts(&tree)?;
            let comparison = compare("cpython", &host, &verdicts(serial), &known, RULES);
            println!(
                "cpython: host {} passed, Reef {} of them, {} known differences ({})",
                comparison.host_passed,
                comparison.reef_passed,
                comparison.known,
                MODULES.join(" ")
            );
            if comparison.holds() {
                return Ok(());
            }
            Err(format!(
                "unlisted failures {:?}; listed but passing now {:?}; stale entries {:?}",
                comparison.new_failures, comparison.now_passing, comparison.stale
            ))
        }),
    });
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
    fn the_list_is_reviewed() {
        let known = parse_known_differences(KNOWN_DIFFERENCES, "known-differences.txt", Layout::OneSuite("cpython"))
            .expect("every entry has a reason");
        assert!(known.iter().all(|entry| entry.case.starts_with("test.")));
    }
}
