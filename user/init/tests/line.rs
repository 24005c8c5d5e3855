//! init, run as a program on the host: one line saying it is not on Reef.

use std::process::Command;

#[test]
fn says_it_is_not_on_reef() {
    let output = Command::new(env!("CARGO_BIN_EXE_init")).output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let line = text.strip_suffix('\n').unwrap();
    let pid = line.strip_prefix("init: pid ").unwrap().strip_suffix(" (not on Reef)").unwrap();
    assert!(pid.parse::<u32>().is_ok(), "{line}");
}

#[test]
fn every_core_is_skipped_and_mistakes_are_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_init")).arg("--every-core").output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8(output.stdout).unwrap().ends_with("init: --every-core skipped (not on Reef)\n"));
    let output = Command::new(env!("CARGO_BIN_EXE_init")).arg("--bogus").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}
