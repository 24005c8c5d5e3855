//! How a crate suite's comparison with the host reads: its rules, its summary and its problems.

use super::libtest::Outcome;
use crate::test::known_differences::{self, Comparison, Layout, Rules};

impl known_differences::Verdict for Outcome {
    fn passed(&self) -> bool {
        *self == Outcome::Passed
    }

    fn describe(&self) -> String {
        Outcome::describe(self)
    }

    fn missing() -> String {
        "no verdict (the run ended before it)".into()
    }
}

/// `xtask/foreign/known-differences.txt` names the cases of every suite: `suite case reason`.
pub const LAYOUT: Layout = Layout::SuiteFirst;

/// A listed case the host ran and did not pass is kept: it does not count this time, as a
/// few host results vary from run to run, such as a CPU time of zero. Reef runs only the
/// tests listed from the host's build, so it prints no case the host did not.
pub const RULES: Rules = Rules { stale_when_the_host_fails: false, reef_only_cases_fail: false };

/// `nix: host 310 passed, Reef 250 passed, 60 known differences`.
pub fn summary(comparison: &Comparison, suite: &str) -> String {
    format!(
        "{suite}: host {} passed, Reef {} passed, {} known differences",
        comparison.host_passed, comparison.reef_passed, comparison.known
    )
}

/// What is wrong, one line each, or an empty list.
pub fn problems(comparison: &Comparison, suite: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for (case, outcome) in &comparison.new_failures {
        lines.push(format!("{suite} {case}: passes on the host, {outcome} on Reef, and is not a known difference"));
    }
    for case in &comparison.now_passing {
        lines.push(format!("{suite} {case}: listed as a known difference but passes on Reef: take it off the list"));
    }
    for case in &comparison.stale {
        lines.push(format!("{suite} {case}: listed as a known difference but the suite has no such case"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test::known_differences::{compare, parse_known_differences, KnownDifference};
    use std::collections::BTreeMap;

    fn verdicts(list: &[(&str, Outcome)]) -> BTreeMap<String, Outcome> {
        list.iter().map(|(case, outcome)| (case.to_string(), outcome.clone())).collect()
    }

    fn known(list: &str) -> Vec<KnownDifference> {
        parse_known_differences(list, "known differences", LAYOUT).unwrap()
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
        let comparison = compare("nix", &host, &reef, &known("nix t/b pause never returns\n"), RULES);
        assert_eq!(comparison.host_passed, 3);
        assert_eq!(comparison.reef_passed, 1);
        assert_eq!(comparison.known, 1);
        // `t/e` has no Reef verdict at all: the run ended before it.
        assert_eq!(comparison.new_failures, [("t/e".to_string(), "no verdict (the run ended before it)".to_string())]);
        assert!(!comparison.holds());
        assert_eq!(summary(&comparison, "nix"), "nix: host 3 passed, Reef 1 passed, 1 known differences");
    }

    #[test]
    fn the_list_must_shrink_when_a_case_passes_and_name_only_cases_of_the_suite() {
        let host = verdicts(&[("t/a", Outcome::Passed), ("t/c", Outcome::Failed)]);
        let reef = verdicts(&[("t/a", Outcome::Passed), ("t/c", Outcome::Failed)]);
        let list = known("nix t/a no sockets\nnix t/c no sockets\nnix t/gone renamed\nrustix t/a another suite\n");
        let comparison = compare("nix", &host, &reef, &list, RULES);
        assert_eq!(comparison.now_passing, ["t/a"]);
        // `t/c` failed on the host this time: it does not count, and its entry stays.
        assert_eq!(comparison.stale, ["t/gone"]);
        assert_eq!(comparison.known, 0);
        assert!(!comparison.holds());
        assert_eq!(problems(&comparison, "nix").len(), 2);
        let clean = compare("nix", &host, &reef, &[], RULES);
        assert!(clean.holds(), "{clean:?}");
        assert_eq!((clean.host_passed, clean.reef_passed, clean.known), (1, 1, 0));
    }

    #[test]
    fn a_listed_failure_of_any_kind_is_known() {
        let host = verdicts(&[("t/a", Outcome::Passed), ("t/b", Outcome::Passed)]);
        let reef = verdicts(&[("t/a", Outcome::Failed)]);
        let comparison = compare("s", &host, &reef, &known("s t/a why\ns t/b why\n"), RULES);
        assert!(comparison.holds(), "{comparison:?}");
        assert_eq!(comparison.known, 2);
    }

    #[test]
    fn the_list_in_the_tree_parses() {
        let path = super::super::build::pinned_file("known-differences.txt");
        let entries = parse_known_differences(&std::fs::read_to_string(path).unwrap(), "list", LAYOUT).unwrap();
        assert!(entries.iter().all(|entry| entry.suite == "nix" || entry.suite == "rustix"), "{entries:?}");
    }

    #[test]
    fn every_entry_names_a_suite_a_case_and_a_reason_once() {
        let list = "# comment\n\nnix test/a::b no ptrace on Reef\n  rustix rustix/c   no sockets  \n";
        assert_eq!(
            parse_known_differences(list, "known differences", LAYOUT).unwrap(),
            [
                KnownDifference { suite: "nix".into(), case: "test/a::b".into(), reason: "no ptrace on Reef".into() },
                KnownDifference { suite: "rustix".into(), case: "rustix/c".into(), reason: "no sockets".into() },
            ]
        );
        assert!(parse_known_differences("nix test/a::b\n", "known differences", LAYOUT).is_err(), "no reason");
        assert!(parse_known_differences("nix a why\nnix a why again\n", "known differences", LAYOUT).is_err(), "twice");
    }
}
