//! sysfuzz, run as a program on the host: it survives a fixed seed and reports as documented.
//!
//! The seed is fixed, so every run makes the same calls (only the buffer's address differs);
//! the fuzzer runs in a directory of its own, where its junk files go, removed afterwards.

use std::process::{Command, Stdio};

#[test]
fn survives_a_fixed_seed_on_two_threads() {
    let directory = std::env::temp_dir().join(format!("sysfuzz-test-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sysfuzz"))
        .args(["--seed", "1", "--calls", "4000", "--threads", "2"])
        .current_dir(&directory)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&directory);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "sysfuzz: seed 1 calls 4000 threads 2");
    assert!(lines[1].starts_with("sysfuzz: results ok="), "{text}");
    assert!(lines[2].starts_with("TEST sysfuzz ok calls=4000 errors="), "{text}");
    assert!(lines[2].ends_with(" seed=1"), "{text}");
    assert_eq!(lines.len(), 3);
}
