//! sigtest, run as a program on the host: Linux itself passes every case.

use std::process::Command;

#[test]
fn linux_passes_every_case() {
    let output = Command::new(env!("CARGO_BIN_EXE_sigtest")).output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 23, "{text}");
    assert!(lines.iter().all(|line| line.starts_with("TEST sig-") && line.contains(" ok linux ")), "{text}");
    assert!(text.contains("TEST sig-kill-group ok linux skipped"), "{text}");
}

#[test]
fn runs_only_the_cases_named() {
    let output = Command::new(env!("CARGO_BIN_EXE_sigtest")).args(["fpu", "groups"]).output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let names: Vec<&str> = text.lines().filter_map(|line| line.split_whitespace().next().map(|_| line)).collect();
    assert_eq!(names.len(), 2, "{text}");
    assert!(names[0].starts_with("TEST sig-fpu ok") && names[1].starts_with("TEST sig-groups ok"), "{text}");
}
