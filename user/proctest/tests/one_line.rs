//! proctest, run as a program on the host: exactly one `TEST proc-std` line.

use std::process::Command;

fn run(arguments: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_proctest")).args(arguments).output().unwrap();
    (output.status.code(), String::from_utf8(output.stdout).unwrap())
}

#[test]
fn passes_with_one_line() {
    let (status, text) = run(&[]);
    assert_eq!(status, Some(0), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("TEST proc-std ok linux mutex=40000 atomic=40000 map=1000 "), "{text}");
    assert!(text.contains(" hello=skipped fork-exit=7 command=status-3,not-found "), "{text}");
}

#[test]
fn reads_the_hello_file_it_is_given_and_fails_on_a_missing_one() {
    let path = std::env::temp_dir().join(format!("proctest-hello-{}", std::process::id()));
    std::fs::write(&path, "hello from the initramfs\n").unwrap();
    let (status, text) = run(&["--hello", path.to_str().unwrap()]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(status, Some(0), "{text}");
    assert!(text.contains(" hello=25B "), "{text}");
    let (status, text) = run(&["--hello", "/nonexistent/hello.txt"]);
    assert_eq!(status, Some(1));
    assert_eq!(text.lines().count(), 1);
    assert!(text.starts_with("TEST proc-std fail linux hello: /nonexistent/hello.txt: "), "{text}");
}
