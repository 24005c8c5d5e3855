//! Reading libtest's output, one test per process, into a verdict per case.

use std::collections::BTreeMap;

/// How one test ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    /// `#[ignore]`d: libtest did not run it.
    Ignored,
    /// Libtest gave no verdict: the process was killed (by the timeout, or a signal such as
    /// SIGSEGV) or ended before it printed one; the shell's status of it (137: SIGKILL).
    NoVerdict(i32),
}

impl Outcome {
    /// A few words for a report.
    pub fn describe(&self) -> String {
        match self {
            Self::Passed => "passed".into(),
            Self::Failed => "FAILED".into(),
            Self::Ignored => "ignored".into(),
            Self::NoVerdict(137) => "killed (SIGKILL: the timeout) before a verdict".into(),
            Self::NoVerdict(status) if *status > 128 => {
                format!("killed by signal {} before a verdict", status - 128)
            }
            Self::NoVerdict(status) => format!("ended with status {status} and no verdict"),
        }
    }
}

/// The line the runner prints after each test's process: `crate-test <suite> <binary>
/// <test> status <n>`. Everything a test printed comes before it.
pub const MARKER: &str = "crate-test";

/// The line the runner prints when every test of a suite has run.
pub const DONE: &str = "crate-tests-done";

/// A case's name in reports and in the known-differences list: `<binary>/<test path>`, as
/// `test/sys::test_epoll::test_epoll_ctl` (the same test path can be in two binaries).
pub fn case_name(binary: &str, test: &str) -> String {
    format!("{binary}/{test}")
}

/// The verdict of every test of `suite` in `output`, the runner's output: each test's own
/// lines, then its marker. The verdict is libtest's line `test <name> ... ok|FAILED|ignored`
/// when it is there whole; else its summary `test result: ... 1 passed; ...` (output that a
/// test wrote past libtest's capture can split the first line); else none, and the status.
pub fn verdicts(output: &str, suite: &str) -> BTreeMap<String, Outcome> {
    let mut verdicts = BTreeMap::new();
    let mut since_marker: Vec<&str> = Vec::new();
    for line in output.lines().map(|l| l.trim_end_matches('\r')) {
        // A process killed mid-line leaves `test <name> ... ` with the marker after it.
        let (before, marker) = match line.find(&format!("{MARKER} ")) {
            Some(at) => (&line[..at], &line[at..]),
            None => (line, ""),
        };
        since_marker.push(before);
        let words: Vec<&str> = marker.split_whitespace().collect();
        if let [MARKER, marked_suite, binary, test, "status", status] = words[..] {
            if marked_suite == suite {
                let status = status.parse().unwrap_or(-1);
                let outcome = verdict_of(&since_marker, test).unwrap_or(Outcome::NoVerdict(status));
                verdicts.insert(case_name(binary, test), outcome);
            }
            since_marker.clear();
        }
    }
    verdicts
}

/// Libtest's verdict on `test` among a process's lines.
fn verdict_of(lines: &[&str], test: &str) -> Option<Outcome> {
    let head = format!("test {test} ... ");
    let from_line = lines.iter().find_map(|line| {
        let rest = &line[line.find(&head)? + head.len()..];
        match rest.split([' ', ',']).next()? {
            "ok" => Some(Outcome::Passed),
            "FAILED" => Some(Outcome::Failed),
            "ignored" => Some(Outcome::Ignored),
            _ => None,
        }
    });
    from_line.or_else(|| lines.iter().rev().find_map(|line| verdict_of_summary(line)))
}

/// `test result: ok. 1 passed; 0 failed; 0 ignored; ...` of a run of one test.
fn verdict_of_summary(line: &str) -> Option<Outcome> {
    let counts = &line[line.find("test result: ")?..];
    let count = |what: &str| {
        counts
            .split(';')
            .find_map(|part| part.trim().strip_suffix(what)?.trim().rsplit(' ').next()?.parse::<u32>().ok())
    };
    match (count(" passed")?, count(" failed")?, count(" ignored")?) {
        (1, 0, 0) => Some(Outcome::Passed),
        (0, 1, 0) => Some(Outcome::Failed),
        (0, 0, 1) => Some(Outcome::Ignored),
        _ => None,
    }
}

/// The tests a test executable holds, from its `--list` output (`<name>: test`; benchmarks,
/// `<name>: benchmark`, are left out).
pub fn listed_tests(listing: &str) -> Vec<String> {
    listing.lines().filter_map(|line| line.strip_suffix(": test")).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "\
running 1 test
test sys::test_epoll::test_epoll_ctl ... FAILED

failures:

---- sys::test_epoll::test_epoll_ctl stdout ----
thread 'sys::test_epoll::test_epoll_ctl' panicked at test/sys/test_epoll.rs:24:57:
called `Result::unwrap()` on an `Err` value: EPERM

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 378 filtered out; finished in 0.00s

crate-test nix test sys::test_epoll::test_epoll_ctl status 101
\r
running 1 test\r
test test_pty::test_ptymaster_drop ... ignored, doesn't work on Reef\r
\r
test result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 378 filtered out; finished in 0.00s\r
crate-test nix test test_pty::test_ptymaster_drop status 0\r
running 1 test
test test_unistd::test_fork_and_waitpid ... child says hello
ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 378 filtered out; finished in 0.01s
crate-test nix test test_unistd::test_fork_and_waitpid status 0
running 1 test
test test_unistd::test_pause ... crate-test nix test test_unistd::test_pause status 137
running 1 test
test fcntl::tests::test_ok ... ok
crate-test rustix rustix fcntl::tests::test_ok status 0
running 1 test
test sys::test_signal::test_kill_none ... ok
crate-test nix nix sys::test_signal::test_kill_none status 0
crate-test nix test test_mq::test_segv status 139
";

    #[test]
    fn every_marked_test_gets_the_verdict_its_process_printed() {
        let nix = verdicts(RUN, "nix");
        let expected = [
            ("test/sys::test_epoll::test_epoll_ctl", Outcome::Failed),
            ("test/test_pty::test_ptymaster_drop", Outcome::Ignored),
            // Output past the capture split libtest's line: the summary decides.
            ("test/test_unistd::test_fork_and_waitpid", Outcome::Passed),
            // Killed by the timeout: the head of libtest's line, no verdict.
            ("test/test_unistd::test_pause", Outcome::NoVerdict(137)),
            ("nix/sys::test_signal::test_kill_none", Outcome::Passed),
            ("test/test_mq::test_segv", Outcome::NoVerdict(139)),
        ];
        assert_eq!(nix.len(), expected.len(), "{nix:?}");
        for (case, outcome) in expected {
            assert_eq!(nix.get(case), Some(&outcome), "{case}");
        }
        let rustix = verdicts(RUN, "rustix");
        assert_eq!(rustix.into_iter().collect::<Vec<_>>(), [("rustix/fcntl::tests::test_ok".into(), Outcome::Passed)]);
    }

    #[test]
    fn a_verdict_is_never_taken_from_another_test_or_process() {
        // The first process passed `a`; the second printed nothing but its marker.
        let output = "test a ... ok\ntest result: ok. 1 passed; 0 failed; 0 ignored\ncrate-test s b a status 0\n\
                      crate-test s b c status 101\n";
        let verdicts = verdicts(output, "s");
        assert_eq!(verdicts["b/a"], Outcome::Passed);
        assert_eq!(verdicts["b/c"], Outcome::NoVerdict(101));
        // A line naming another test, and a summary of more than one test, decide nothing.
        assert_eq!(verdict_of(&["test other ... ok"], "mine"), None);
        assert_eq!(verdict_of(&["test result: ok. 2 passed; 0 failed; 0 ignored;"], "mine"), None);
        assert_eq!(verdict_of(&["test result: FAILED. 0 passed; 1 failed; 0 ignored;"], "mine"), Some(Outcome::Failed));
    }

    #[test]
    fn the_listing_holds_tests_not_benchmarks() {
        let listing = "a::b: test\nc: benchmark\nd::e::f: test\n\n3 tests, 1 benchmark\n";
        assert_eq!(listed_tests(listing), ["a::b", "d::e::f"]);
    }
}
