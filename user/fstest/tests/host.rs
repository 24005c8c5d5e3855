//! fstest, run as a program on the host: every case passes under Linux, one line each.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh base directory for one test, standing in for `/tmp`.
fn base(test: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!("fstest-host-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    base
}

fn fstest(arguments: &[&str], base: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fstest"));
    command.args(arguments).env("FSTEST_DIR", base);
    command
}

fn text(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// The run's `TEST` lines all say `ok`, and the summary counts them.
fn all_ok(stdout: &str) -> usize {
    let tests: Vec<&str> = stdout.lines().filter(|line| line.starts_with("TEST ")).collect();
    for line in &tests {
        let words: Vec<&str> = line.splitn(4, ' ').collect();
        assert!(words[1].starts_with("fs-"), "{line}");
        assert_eq!(words[2], "ok", "{line}");
        assert!(words.len() == 4 && !words[3].is_empty(), "no detail: {line}");
    }
    let summary = format!("fstest: {} passed, 0 failed", tests.len());
    assert_eq!(stdout.lines().last(), Some(summary.as_str()), "{stdout}");
    tests.len()
}

#[test]
fn every_case_passes_on_linux_and_the_scratch_directory_goes() {
    let base = base("cases");
    let output = fstest(&[], &base).output().unwrap();
    let stdout = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(all_ok(&stdout) > 60, "{stdout}");
    assert!(stdout.starts_with("fstest: pid "), "{stdout}");
    for skipped in ["erofs-write-etc", "erofs-mkdir-root", "erofs-create-bin"] {
        assert!(stdout.contains(&format!("TEST fs-{skipped} ok skipped: ")), "{stdout}");
    }
    assert!(!stdout.contains("fs-enospc"), "only with --fill");
    assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0, "the scratch directory is left behind");
    std::fs::remove_dir(&base).unwrap();
}

#[test]
fn two_runs_at_once_keep_apart() {
    let base = base("twice");
    let children: Vec<_> = (0..2).map(|_| fstest(&[], &base).output()).collect();
    let counts: Vec<usize> = children
        .into_iter()
        .map(|output| {
            let output = output.unwrap();
            assert_eq!(output.status.code(), Some(0), "{}", text(&output));
            all_ok(&text(&output))
        })
        .collect();
    assert_eq!(counts[0], counts[1]);
    std::fs::remove_dir(&base).unwrap();
}

#[test]
fn a_file_written_by_one_process_is_checked_by_another() {
    let base = base("shared");
    let path = base.join("shared");
    let path = path.to_str().unwrap();
    let output = fstest(&["--write", path, "100000", "7"], &base).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).starts_with("TEST fs-written ok linux: 100000 bytes of seed 7 written to "));
    assert_eq!(std::fs::metadata(path).unwrap().len(), 100_000);
    let output = fstest(&["--check", path, "100000", "7"], &base).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(all_ok(&text(&output)), 1);
    assert!(text(&output).starts_with("TEST fs-same-bytes ok linux: 100000 bytes of seed 7 in "));

    let output = fstest(&["--check", path, "100000", "8"], &base).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output).starts_with(&format!("TEST fs-same-bytes fail linux: {path}: byte 0 is ")),
        "{}",
        text(&output)
    );
    assert!(text(&output).ends_with("fstest: 0 passed, 1 failed\n"));
    let output = fstest(&["--check", path, "100001", "7"], &base).output().unwrap();
    assert!(text(&output).contains("100000 bytes instead of 100001"), "{}", text(&output));
    let output = fstest(&["--check", &format!("{path}-missing"), "1", "7"], &base).output().unwrap();
    assert!(text(&output).contains("ENOENT"), "{}", text(&output));
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn the_descriptor_check_exits_with_its_verdict() {
    let base = base("descriptors");
    // 0 (stdin) is open in the test's child; 900 is not.
    let status = |arguments: &[&str]| fstest(arguments, &base).output().unwrap().status.code();
    assert_eq!(status(&["--check-closed", "900", "--check-open", "0"]), Some(0));
    assert_eq!(status(&["--check-closed", "0", "--check-open", "900"]), Some(1));
    assert_eq!(status(&["--bogus"]), Some(2));
    std::fs::remove_dir(&base).unwrap();
}
