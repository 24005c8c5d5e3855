//! A foreign suite's verdicts on Reef against the host's, less the reviewed known differences.
//!
//! Issue 27's foreign suites (the bash scripts, the tests of the crates `nix` and `rustix`)
//! share one rule: a case counts when it passes on the host; one that does not pass on Reef
//! fails the suite unless the list names it, and a listed case that passes on Reef fails it
//! too, so the list only shrinks. Each suite reads its own output into verdicts and words its
//! own report; the list and the comparison are this module's.

use std::collections::BTreeMap;

/// How one case ended in one run, as a suite's reader of output tells it.
pub(crate) trait Verdict {
    /// Whether the case passed.
    fn passed(&self) -> bool;
    /// A few words for a report: how the case ended.
    fn describe(&self) -> String;
    /// What a report says of a case that has no verdict on Reef at all.
    fn missing() -> String;
}

/// One entry of a known-differences list: a case of a suite that does not pass on Reef, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KnownDifference {
    pub(crate) suite: String,
    pub(crate) case: String,
    pub(crate) reason: String,
}

/// How a list's lines name their case.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Layout {
    /// `case reason`: a list of one suite's cases (`tests/bash/known-differences.txt`).
    OneSuite(&'static str),
    /// `suite case reason`: a list shared by several suites
    /// (`xtask/foreign/known-differences.txt`).
    SuiteFirst,
}

/// The entries of the list `text` (named `list` in errors): one a line, blank lines and `#`
/// comments skipped. An entry without a reason, or a case listed twice, is refused: the list
/// is reviewed, so every entry says why.
pub(crate) fn parse_known_differences(text: &str, list: &str, layout: Layout) -> Result<Vec<KnownDifference>, String> {
    let mut entries: Vec<KnownDifference> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (suite, rest) = match layout {
            Layout::OneSuite(suite) => (suite, line),
            Layout::SuiteFirst => line.split_once(char::is_whitespace).unwrap_or((line, "")),
        };
        let rest = rest.trim_start();
        let (case, reason) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let entry = match layout {
            Layout::OneSuite(_) => case.to_string(),
            Layout::SuiteFirst => format!("{suite} {case}"),
        };
        if reason.trim().is_empty() {
            return Err(format!("{list} line {}: `{entry}` has no reason", number + 1));
        }
        if entries.iter().any(|e| e.suite == suite && e.case == case) {
            return Err(format!("{list} line {}: `{entry}` is listed twice", number + 1));
        }
        entries.push(KnownDifference { suite: suite.into(), case: case.into(), reason: reason.trim().into() });
    }
    Ok(entries)
}

/// Where the suites differ in what a comparison holds them to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    /// A listed case that the host ran and did not pass is a stale entry (the bash scripts
    /// give the same verdict every run). When false, the entry is kept and the case does not
    /// count this time: a few libtest results on the host vary from run to run, such as a
    /// CPU time of zero.
    pub(crate) stale_when_the_host_fails: bool,
    /// A case Reef printed that the host did not fails the suite (the bash scripts print the
    /// same cases on both sides). When false, such cases are not looked at: Reef runs only
    /// the tests listed from the host's build.
    pub(crate) reef_only_cases_fail: bool,
}

/// How a suite fared on Reef against the host.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    /// Cases that passed on the host: the only ones that count.
    pub(crate) host_passed: usize,
    /// Of those, the ones that passed on Reef too.
    pub(crate) reef_passed: usize,
    /// Cases that passed on Reef but not on the host (left out of the comparison).
    pub(crate) reef_passed_uncounted: usize,
    /// Cases that passed on the host and not on Reef, and are listed.
    pub(crate) known: usize,
    /// Cases the host ran and did not pass, with how they ended: bad cases, left out.
    pub(crate) host_failures: Vec<(String, String)>,
    /// Cases that passed on the host and not on Reef, unlisted: (case, how it ended on Reef).
    pub(crate) new_failures: Vec<(String, String)>,
    /// Listed cases that pass on Reef now: the list must lose them.
    pub(crate) now_passing: Vec<String>,
    /// Listed cases that are no case passing on the host, by [`Rules`]: renamed, removed or
    /// broken, the entry must go.
    pub(crate) stale: Vec<String>,
    /// Cases Reef printed that the host did not (looked at only by [`Rules`]).
    pub(crate) unknown_on_reef: Vec<String>,
}

impl Comparison {
    /// Whether the suite holds: no unlisted difference, and the list has no entry to remove.
    pub(crate) fn holds(&self) -> bool {
        self.new_failures.is_empty()
            && self.now_passing.is_empty()
            && self.stale.is_empty()
            && self.unknown_on_reef.is_empty()
    }
}

/// Compares `reef` to `host` for `suite`: a case counts when it passed on the host (the
/// reference decides what this machine can test); a missing Reef verdict (the run ended
/// early, or the case was skipped as a known hang) is a failure like any other.
pub(crate) fn compare<V: Verdict>(
    suite: &str,
    host: &BTreeMap<String, V>,
    reef: &BTreeMap<String, V>,
    known: &[KnownDifference],
    rules: Rules,
) -> Comparison {
    let listed = |case: &str| known.iter().any(|k| k.suite == suite && k.case == case);
    let mut comparison = Comparison::default();
    for (case, verdict) in host {
        if !verdict.passed() {
            comparison.host_failures.push((case.clone(), verdict.describe()));
            continue;
        }
        comparison.host_passed += 1;
        match (reef.get(case), listed(case)) {
            (Some(verdict), false) if verdict.passed() => comparison.reef_passed += 1,
            (Some(verdict), true) if verdict.passed() => {
                comparison.reef_passed += 1;
                comparison.now_passing.push(case.clone());
            }
            (_, true) => comparison.known += 1,
            (verdict, false) => {
                comparison.new_failures.push((case.clone(), verdict.map_or_else(V::missing, V::describe)))
            }
        }
    }
    comparison.reef_passed_uncounted =
        reef.iter().filter(|(case, verdict)| verdict.passed() && !host.get(*case).is_some_and(V::passed)).count();
    comparison.stale = known
        .iter()
        .filter(|k| k.suite == suite)
        .filter(|k| host.get(&k.case).is_none_or(|verdict| rules.stale_when_the_host_fails && !verdict.passed()))
        .map(|k| k.case.clone())
        .collect();
    if rules.reef_only_cases_fail {
        comparison.unknown_on_reef = reef.keys().filter(|case| !host.contains_key(*case)).cloned().collect();
    }
    comparison
}
