//! tiny, run as a program: the exit status its argument names.

use std::process::Command;

fn tiny() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tiny"))
}

#[test]
fn exits_with_the_status_asked_for() {
    assert_eq!(tiny().status().unwrap().code(), Some(0));
    assert_eq!(tiny().arg("7").status().unwrap().code(), Some(7));
    assert_eq!(tiny().arg("255").status().unwrap().code(), Some(255));
    let output = tiny().arg("seven").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("`seven`"));
    assert!(output.stdout.is_empty());
}
