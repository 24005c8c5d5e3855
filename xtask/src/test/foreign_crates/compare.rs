//! Reef's verdicts against the host's, less the reviewed list of known differences.

use super::libtest::Outcome;
use std::collections::BTreeMap;

/// One entry of `xtask/foreign/known-differences.txt`: `suite case reason`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownDifference {
    pub suite: String,
    pub case: String,
    pub reason: String,
}

/// The list's entries; `#` starts a comment line, blank lines are skipped. An entry without
/// a reason, or listed twice, is an error: every entry is reviewed and says why.
pub fn parse_known_differences(text: &str) -> Result<Vec<KnownDifference>, String> {
    let mut entries: Vec<KnownDifference> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.splitn(3, char::is_whitespace);
        let (Some(suite), Some(case), Some(reason)) = (words.next(), words.next(), words.next()) else {
            return Err(format!("known differences, line {}: `{line}` is not `suite case reason`", number + 1));
        };
        if entries.iter().any(|e| e.suite == suite && e.case == case) {
            return Err(format!("known differences, line {}: {suite} {case} is listed twice", number + 1));
        }
        entries.push(KnownDifference { suite: suite.into(), case: case.into(), reason: reason.trim().into() });
    }
    Ok(entries)
}

/// How a suite fared on Reef against the host.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Cases that passed on the host: the only ones that count.
    pub host_passed: usize,
    /// Of those, the ones that passed on Reef too.
    pub reef_passed: usize,
    /// Cases that passed on the host and not on Reef, and are listed.
    pub known: usize,
    /// Cases that passed on the host and not on Reef, unlisted: (case, Reef's outcome).
    pub new_failures: Vec<(String, String)>,
    /// Listed cases that pass on Reef now: the list must lose them.
    pub now_passing: Vec<String>,
    /// Listed cases the host did not run at all: renamed or gone, the entry is stale. (A
    /// listed case that ran on the host and did not pass there is kept: it does not count
    /// this time, as a few host results vary from run to run, such as a CPU time of zero.)
    pub not_in_suite: Vec<String>,
}

impl Comparison {
    /// Whether the suite holds: no unlisted difference, and the list has no stale entry.
    pub fn holds(&self) -> bool {
        self.new_failures.is_empty() && self.now_passing.is_empty() && self.not_in_suite.is_empty()
    }

    /// `nix: host 310 passed, Reef 250 passed, 60 known differences`.
    pub fn summary(&self, suite: &str) -> String {
        format!(
            "{suite}: host {} passed, Reef {} passed, {} known differences",
            self.host_passed, self.reef_passed, self.known
        )
    }

    /// What is wrong, one line each, or an empty list.
    pub fn problems(&self, suite: &str) -> Vec<String> {
        let mut lines = Vec::new();
        for (case, outcome) in &self.new_failures {
            lines.push(format!("{suite} {case}: passes on the host, {outcome} on Reef, and is not a known difference"));
        }
        for case in &self.now_passing {
            lines
                .push(format!("{suite} {case}: listed as a known difference but passes on Reef: take it off the list"));
        }
        for case in &self.not_in_suite {
            lines.push(format!("{suite} {case}: listed as a known difference but the suite has no such case"));
        }
        lines
    }
}

/// Compares `reef` to `host` for `suite`: a case counts when it passed on the host (the
/// reference decides what this machine can test); a missing Reef verdict (the run ended
/// early, or the case was skipped as a known hang) is a failure like any other.
pub fn compare(
    suite: &str,
    host: &BTreeMap<String, Outcome>,
    reef: &BTreeMap<String, Outcome>,
    known: &[KnownDifference],
) -> Comparison {
    let listed = |case: &str| known.iter().any(|k| k.suite == suite && k.case == case);
    let mut comparison = Comparison::default();
    for (case, _) in host.iter().filter(|(_, outcome)| **outcome == Outcome::Passed) {
        comparison.host_passed += 1;
        match (reef.get(case), listed(case)) {
            (Some(Outcome::Passed), false) => comparison.reef_passed += 1,
            (Some(Outcome::Passed), true) => {
                comparison.reef_passed += 1;
                comparison.now_passing.push(case.clone());
            }
            (_, true) => comparison.known += 1,
            (outcome, false) => comparison.new_failures.push((
                case.clone(),
                outcome.map_or_else(|| "no verdict (the run ended before it)".to_string(), Outcome::describe),
            )),
        }
    }
    for entry in known.iter().filter(|k| k.suite == suite) {
        if !host.contains_key(&entry.case) {
            comparison.not_in_suite.push(entry.case.clone());
        }
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(list: &[(&str, Outcome)]) -> BTreeMap<String, Outcome> {
        list.iter().map(|(case, outcome)| (case.to_string(), outcome.clone())).collect()
    }

    fn known(list: &str) -> Vec<KnownDifference> {
        parse_known_differences(list).unwrap()
    }

    #[test]
    fn only_cases_passing_on_the_host_count() {
        let host = verdicts(&[
            ("t/a", Outcome::Passed),
            ("t/b", Outcome::Passed),
            ("t/c", Outcome::Failed),
            ("t/d", Outcome::Ignored),
            ("t/e", Outcome::Passed),
        ]);
        let reef = verdicts(&[
            ("t/a", Outcome::Passed),
            ("t/b", Outcome::NoVerdict(137)),
            ("t/c", Outcome::Failed),
            ("t/d", Outcome::Passed),
        ]);
        let comparison = compare("nix", &host, &reef, &known("nix t/b pause never returns\n"));
        assert_eq!(comparison.host_passed, 3);
        assert_eq!(comparison.reef_passed, 1);
        assert_eq!(comparison.known, 1);
        // `t/e` has no Reef verdict at all: the run ended before it.
        assert_eq!(comparison.new_failures, [("t/e".to_string(), "no verdict (the run ended before it)".to_string())]);
        assert!(!comparison.holds());
        assert_eq!(comparison.summary("nix"), "nix: host 3 passed, Reef 1 passed, 1 known differences");
    }

    #[test]
    fn the_list_must_shrink_when_a_case_passes_and_name_only_cases_of_the_suite() {
        let host = verdicts(&[("t/a", Outcome::Passed), ("t/c", Outcome::Failed)]);
        let reef = verdicts(&[("t/a", Outcome::Passed), ("t/c", Outcome::Failed)]);
        let list = known("nix t/a no sockets\nnix t/c no sockets\nnix t/gone renamed\nrustix t/a another suite\n");
        let comparison = compare("nix", &host, &reef, &list);
        assert_eq!(comparison.now_passing, ["t/a"]);
        // `t/c` failed on the host this time: it does not count, and its entry stays.
        assert_eq!(comparison.not_in_suite, ["t/gone"]);
        assert_eq!(comparison.known, 0);
        assert!(!comparison.holds());
        assert_eq!(comparison.problems("nix").len(), 2);
        let clean = compare("nix", &host, &reef, &[]);
        assert!(clean.holds(), "{clean:?}");
        assert_eq!((clean.host_passed, clean.reef_passed, clean.known), (1, 1, 0));
    }

    #[test]
    fn a_listed_failure_of_any_kind_is_known() {
        let host = verdicts(&[("t/a", Outcome::Passed), ("t/b", Outcome::Passed)]);
        let reef = verdicts(&[("t/a", Outcome::Failed)]);
        let comparison = compare("s", &host, &reef, &known("s t/a why\ns t/b why\n"));
        assert!(comparison.holds(), "{comparison:?}");
        assert_eq!(comparison.known, 2);
    }

    #[test]
    fn every_entry_names_a_suite_a_case_and_a_reason_once() {
        let list = "# comment\n\nnix test/a::b no ptrace on Reef\n  rustix rustix/c   no sockets  \n";
        assert_eq!(
            parse_known_differences(list).unwrap(),
            [
                KnownDifference { suite: "nix".into(), case: "test/a::b".into(), reason: "no ptrace on Reef".into() },
                KnownDifference { suite: "rustix".into(), case: "rustix/c".into(), reason: "no sockets".into() },
            ]
        );
        assert!(parse_known_differences("nix test/a::b\n").is_err(), "no reason");
        assert!(parse_known_differences("nix a why\nnix a why again\n").is_err(), "twice");
    }
}
