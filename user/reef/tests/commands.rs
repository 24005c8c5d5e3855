//! reef, run as a program on the host: `help`, the refusals, and what it says off Reef.

use std::process::{Command, Output};

fn reef(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reef")).args(arguments).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn help_lists_every_command_once_a_line() {
    let output = reef(&["help"]);
    assert!(output.status.success());
    let listing = text(&output.stdout);
    let (commands, notes): (Vec<&str>, Vec<&str>) = listing.lines().partition(|line| line.starts_with("  "));
    let names: Vec<&str> = commands.iter().filter_map(|line| line.split_whitespace().next()).collect();
    assert_eq!(
        names,
        [
            "help",
            "cores",
            "mem",
            "start",
            "msg",
            "syscalls",
            "ps",
            "poweroff",
            "on",
            "spawn",
            "role",
            "execac",
            "move",
            "core",
            "setuidgid"
        ]
    );
    assert!(notes.iter().any(|note| note.contains("/bin/ps")), "where Reef's ps is, in sh: {notes:?}");
    assert_eq!(text(&reef(&["--help"]).stdout), listing);
}

#[test]
fn control_commands_say_they_need_reef() {
    for command in ["cores", "mem", "ps", "syscalls", "poweroff"] {
        let output = reef(&[command]);
        assert_eq!(output.status.code(), Some(1), "{command}");
        assert!(output.stdout.is_empty());
        assert_eq!(
            text(&output.stderr),
            format!("{command}: not on Reef: the kernel's control commands need Reef's reef_control call\n")
        );
    }
}

#[test]
fn on_and_spawn_refuse_in_one_line() {
    let output = reef(&["on", "1", "/bin/true"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "on: /bin/true on core 1: not on Reef: running a program on a core needs Reef's reef_spawn call\n"
    );
    let output = reef(&["on", "x", "/bin/true"]);
    assert_eq!(
        (output.status.code(), text(&output.stderr).as_str()),
        (Some(1), "on: `x` is not a core number: see `cores`\n")
    );
    let output = reef(&["on", "1"]);
    assert_eq!(output.status.code(), Some(2));
    let output = Command::new(env!("CARGO_BIN_EXE_reef"))
        .args(["on", "1", "no-such-program"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(127));
    assert_eq!(
        text(&output.stderr),
        "on: no-such-program: no such program in $PATH (/nonexistent): give its path, or see `ls /bin`\n"
    );
    let output = reef(&["spawn", "--no-wait"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(text(&output.stderr), "error: wrong arguments: usage: spawn [--no-wait] <core> <program> [args]\n");
}

#[test]
fn unknown_commands_are_not_found() {
    let output = reef(&["frobnicate"]);
    assert_eq!(output.status.code(), Some(127));
    assert_eq!(text(&output.stderr), "reef: no command `frobnicate`: `reef help` lists them\n");
    assert_eq!(reef(&[]).status.code(), Some(2));
}

#[test]
fn move_refuses_in_one_line() {
    let output = reef(&["move", "self", "1"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "move: this process to core 1: not on Reef: moving processes needs Reef's reef_move_process call\n"
    );
    for (words, start) in [
        (&["move"][..], "move: usage: move <pid|self> <core>"),
        (&["move", "0", "1"][..], "move: `0` is not a pid"),
        (&["move", "12", "x"][..], "move: `x` is not a core number"),
    ] {
        let output = reef(words);
        assert_eq!(output.status.code(), Some(2), "{words:?}");
        assert!(text(&output.stderr).starts_with(start), "{words:?}: {}", text(&output.stderr));
    }
}

#[test]
fn role_and_execac_refuse_in_one_line() {
    let output = reef(&["role", "1", "ac"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(text(&output.stderr), "role: core 1 to AC: not on Reef: roles need Reef's reef_role call\n");
    let output = reef(&["role", "1", "xc"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).starts_with("role: `xc` is no role"));
    let output = reef(&["role", "one", "ac"]);
    assert_eq!(output.status.code(), Some(2));
    let output = reef(&["execac", "1", "/bin/sh"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "execac: core 1: not on Reef: application cores need Reef's reef_move_to_ac call\n"
    );
    let output = reef(&["execac", "--syspage"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).starts_with("execac: usage: "));
    let output = reef(&["execac", "-1", "/no/such/program"]);
    assert_eq!(output.status.code(), Some(127));
    assert!(text(&output.stderr).starts_with("execac: /no/such/program: no such program"));
}

#[test]
fn setuidgid_refuses_a_bad_line_and_an_unknown_user() {
    assert_eq!(reef(&["setuidgid"]).status.code(), Some(2));
    assert_eq!(reef(&["setuidgid", "no-such-user-here", "/bin/true"]).status.code(), Some(1));
}
