//! reef: the kernel's control commands as programs, `on` and `spawn` to run one on a core,
//! `role` and `execac` for core roles.
#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod cores;
mod launch;
mod roles;
mod users;

use std::io::Write;
use std::process::ExitCode;

/// What to say when the kernel refused a core change because the caller is not root.
pub const NOT_ROOT: &str = "only root (effective user id 0) changes cores: operation not permitted";

/// Whether this process runs as root: the owner of `/proc/self` is its effective user id,
/// on Reef as on Linux.
pub fn runs_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(true, |metadata| metadata.uid() == 0)
}

/// Exit status of a command line that is wrong (as the kernel's `usage:` errors).
pub const USAGE_STATUS: u8 = 2;
/// Exit status of a command that failed.
pub const FAILED_STATUS: u8 = 1;
/// Exit status when there is no such command or program, as a shell gives.
pub const NOT_FOUND_STATUS: u8 = 127;

/// What a command does with its arguments (those after its name); returns the exit status.
type Body = fn(&str, &[&str]) -> u8;

/// One command of the program: the name it is called by, its usage, what it does.
struct Command {
    name: &'static str,
    usage: &'static str,
    what: &'static str,
    run: Body,
}

/// Every command, in the order `help` lists them.
const COMMANDS: [Command; 15] = [
    Command { name: "help", usage: "help", what: "list the commands", run: |_, _| help() },
    Command {
        name: "cores",
        usage: "cores",
        what: "every core: id, APIC id, state, role, kernel image, partition, uptime",
        run: control,
    },
    Command {
        name: "mem",
        usage: "mem",
        what: "the shared region, every core's partition, and this core's free frames and heap",
        run: control,
    },
    Command {
        name: "start",
        usage: "start <core> [from <core>]",
        what: "start an offline core with this core's boot driver (or another running core's)",
        run: control,
    },
    Command {
        name: "msg",
        usage: "msg stats|ping|mode|bench|stress",
        what: "channels: counters; ping <core> [n]; mode <core> <poll|ipi|hybrid|mwait> [spin ns]; bench [core] [n] and stress [lines] [cores, e.g. 0,1,2] (kernels built with the bench feature only: cargo xtask bench, test)",
        run: control,
    },
    Command {
        name: "syscalls",
        usage: "syscalls [core]",
        what: "system calls per core by number, the unimplemented ones (ENOSYS), paths this core answered itself",
        run: control,
    },
    Command {
        name: "ps",
        usage: "ps",
        what: "this core's processes and every core's counts (the leak check)",
        run: control,
    },
    Command { name: "poweroff", usage: "poweroff", what: "stop every core and leave QEMU", run: control },
    Command {
        name: "on",
        usage: "on <core> <program> [args]",
        what: "run a program on a core ($PATH searched), wait for it, exit with its status",
        run: |_, arguments| launch::on(arguments),
    },
    Command {
        name: "spawn",
        usage: "spawn [--no-wait] <core> <program> [args]",
        what: "start a program on a core and print how it ended (`pid P on core C exited with status S`)",
        run: |_, arguments| launch::spawn(arguments),
    },
    Command {
        name: "role",
        usage: "role <core> tc|ac|kc",
        what: "make a core a timesharing, application or kernel core while the system runs",
        run: |_, arguments| roles::role(arguments),
    },
    Command {
        name: "execac",
        usage: "execac [--syspage] <core|-1> <program> [args]",
        what: "run a program's thread on an application core (-1: any free AC), homed here",
        run: |_, arguments| roles::execac(arguments),
    },
    Command {
        name: "move",
        usage: "move <pid|self> <core>",
        what: "move a process (pid, memory, files, threads) to another timesharing core",
        run: |_, arguments| roles::move_process(arguments),
    },
    Command {
        name: "core",
        usage: "core stop|start|restart|park|unpark <core> [image|host|destination] [--keep|--uncached]",
        what: "stop, start or restart a core with a kernel image (/boot/full, /boot/rt, ...); park it on a multi core; stop --keep holds its processes until a start",
        run: |_, arguments| cores::core(arguments),
    },
    Command {
        name: "setuidgid",
        usage: "setuidgid <user|uid[:gid]> <program> [args]",
        what: "run a program as another user (root only: setgid, setgroups, setuid, then execve)",
        run: |_, arguments| users::setuidgid(arguments),
    },
];

fn main() -> ExitCode {
    let arguments: Vec<String> = match std::env::args_os().map(|argument| argument.into_string()).collect() {
        Ok(arguments) => arguments,
        Err(argument) => {
            eprintln!("reef: the argument {argument:?} is not UTF-8: Reef's commands take text");
            return ExitCode::from(USAGE_STATUS);
        }
    };
    let words: Vec<&str> = arguments.iter().map(String::as_str).collect();
    ExitCode::from(dispatch(&words))
}

/// Runs the command `words` name: the base name of `words[0]` (a link such as `/bin/cores`),
/// or, called as `reef`, the next word.
fn dispatch(words: &[&str]) -> u8 {
    let called_as = words.first().map_or("reef", |path| path.rsplit('/').next().unwrap_or(path));
    let (name, arguments) = match (called_as, words.get(1..).unwrap_or_default()) {
        ("reef", []) => {
            eprintln!("reef: usage: reef <command> [arguments]; `reef help` lists the commands");
            return USAGE_STATUS;
        }
        ("reef", ["-h" | "--help", ..]) => ("help", &[][..]),
        ("reef", [name, rest @ ..]) => (*name, rest),
        (name, rest) => (name, rest),
    };
    match COMMANDS.iter().find(|command| command.name == name) {
        Some(command) => (command.run)(name, arguments),
        None => {
            eprintln!("reef: no command `{name}`: `reef help` lists them");
            NOT_FOUND_STATUS
        }
    }
}

fn help() -> u8 {
    let mut text = String::new();
    for command in &COMMANDS {
        text.push_str(&format!("  {:<9} {:<44} {}\n", command.name, command.usage, command.what));
    }
    // ash runs its builtins and busybox's applets before it looks in $PATH.
    text.push_str(
        "In sh, `help` is sh's builtin and `ps`, `poweroff` are busybox's: for these, type /bin/ps or reef ps.\n",
    );
    write_out(&text)
}

/// Writes `text` to standard output; a failure is the command's failure.
fn write_out(text: &str) -> u8 {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("reef: standard output refused the text: {error}");
            FAILED_STATUS
        }
    }
}

/// A control command (`abi::call::CONTROL`): its text to standard output, its `error: …` line
/// to standard error, its status as the exit status.
fn control(name: &str, arguments: &[&str]) -> u8 {
    let words: Vec<&str> = std::iter::once(name).chain(arguments.iter().copied()).collect();
    match rt::control(&words) {
        Ok((text, status)) => {
            let (body, error) = if status == abi::call::control::OK { (text.as_str(), "") } else { split_error(&text) };
            let written = write_out(body);
            if !error.is_empty() {
                eprint!("{error}");
            }
            match status {
                abi::call::control::OK => written,
                abi::call::control::USAGE => USAGE_STATUS,
                _ => FAILED_STATUS,
            }
        }
        Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
            eprintln!("{name}: not on Reef: the kernel's control commands need Reef's reef_control call");
            FAILED_STATUS
        }
        Err(error) => {
            eprintln!("{name}: the kernel refused the command: {error}");
            FAILED_STATUS
        }
    }
}

/// Splits a failed command's text into what it printed and its last line, the `error: …` line.
fn split_error(text: &str) -> (&str, &str) {
    let without_newline = text.strip_suffix('\n').unwrap_or(text);
    match without_newline.rfind('\n') {
        Some(end) => text.split_at(end + 1),
        None => ("", text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_line_is_the_last() {
        assert_eq!(split_error("error: no\n"), ("", "error: no\n"));
        assert_eq!(split_error("note: x\nerror: no\n"), ("note: x\n", "error: no\n"));
        assert_eq!(split_error("a\nb\nerror: no"), ("a\nb\n", "error: no"));
        assert_eq!(split_error(""), ("", ""));
    }

    #[test]
    fn commands_are_found_by_name_and_listed_once() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|command| command.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), COMMANDS.len());
        for command in &COMMANDS {
            assert!(command.usage.starts_with(command.name), "{}", command.name);
        }
    }

    #[test]
    fn unknown_names_and_a_bare_reef_are_refused() {
        assert_eq!(dispatch(&["/bin/frobnicate"]), NOT_FOUND_STATUS);
        assert_eq!(dispatch(&["reef", "frobnicate"]), NOT_FOUND_STATUS);
        assert_eq!(dispatch(&["/bin/reef"]), USAGE_STATUS);
        assert_eq!(dispatch(&["/bin/on"]), USAGE_STATUS);
    }
}
