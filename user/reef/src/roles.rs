//! `role` and `execac`: change a core's role, run a program on an application core.

use crate::launch::resolve;
use crate::{FAILED_STATUS, NOT_FOUND_STATUS, USAGE_STATUS};
use rt::roles::{self, Role};
use std::os::unix::process::CommandExt;

/// Where programs are looked for when `$PATH` is not set.
const DEFAULT_PATH: &str = "/bin:/sbin";

/// A TC's processes move before it changes role or stops, and the program asking is one of
/// them: it cannot move while it waits for the answer.
const ASKED_FROM_THE_CORE: &str =
    "this program runs on that core, whose processes move first, and it cannot move while it asks: ask from another core, e.g. `on <other core> role ...`";

/// What to say when `reef_role` refused with `errno`, and what to do about it.
pub fn role_error_text(errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::EINVAL) => "no such core: see `cores`",
        Some(libc::EAGAIN) => "that core is not running (or did not answer): see `cores`",
        Some(libc::EPERM) if !crate::runs_as_root() => crate::NOT_ROOT,
        Some(libc::EPERM) => {
            "core 0 owns the devices and the file service: it can be a TC or a KC (which serves them), not an AC"
        }
        Some(libc::EBUSY) => {
            "the change would leave no timesharing core, or a process there cannot move to another TC, or the core runs a thread, or serves syspages with no other kernel core to take them (the kernel log says which): end them first, or make another core a KC"
        }
        Some(libc::EOPNOTSUPP) => "that core runs the rt image, whose role cannot change: restart it with /boot/full",
        Some(libc::EDEADLK) => ASKED_FROM_THE_CORE,
        Some(libc::ENOSYS) => "not on Reef: roles need Reef's reef_role call",
        _ => "failed",
    }
}

/// `role <core> tc|ac|kc`.
pub fn role(words: &[&str]) -> u8 {
    const USAGE: &str = "role <core> tc|ac|kc";
    let [core, role] = words else {
        eprintln!("role: usage: {USAGE}");
        return USAGE_STATUS;
    };
    let Ok(core) = core.parse::<usize>() else {
        eprintln!("role: `{core}` is not a core number: see `cores`");
        return USAGE_STATUS;
    };
    let Some(role) = Role::parse(role) else {
        eprintln!("role: `{role}` is no role: tc (timesharing), ac (application) or kc (kernel)");
        return USAGE_STATUS;
    };
    match roles::set_role(core, role) {
        Ok(()) => {
            println!("core {core} is now a{} {}", if role == Role::Application { "n" } else { "" }, role.name());
            0
        }
        Err(error) => {
            eprintln!("role: core {core} to {}: {}", role.name(), role_error_text(error.raw_os_error()));
            FAILED_STATUS
        }
    }
}

/// `move <pid|self> <core>`: moves a process to another timesharing core.
pub fn move_process(words: &[&str]) -> u8 {
    const USAGE: &str = "move <pid|self> <core>";
    let [pid, core] = words else {
        eprintln!("move: usage: {USAGE}");
        return USAGE_STATUS;
    };
    let pid = match *pid {
        "self" => None,
        word => match word.parse::<u32>() {
            Ok(pid) if pid > 0 => Some(pid),
            _ => {
                eprintln!("move: `{word}` is not a pid (or `self`): see `ps`");
                return USAGE_STATUS;
            }
        },
    };
    let Ok(core) = core.parse::<usize>() else {
        eprintln!("move: `{core}` is not a core number: see `cores`");
        return USAGE_STATUS;
    };
    let who = pid.map_or("this process".to_string(), |pid| format!("process {pid}"));
    match roles::move_process(pid, core) {
        Ok(core) => {
            println!("{who} runs on core {core}");
            0
        }
        Err(error) => {
            let why = match error.raw_os_error() {
                Some(libc::EINVAL) => "no such core: see `cores`",
                Some(libc::ESRCH) => "no such process: see `ps` on its core",
                Some(libc::EAGAIN) => "that core is not running: see `cores`",
                Some(libc::EBUSY) => {
                    "that core is no timesharing core, or the process cannot move (more than 512 threads, a syspage, or it is ending; the kernel log says which)"
                }
                Some(libc::ETIMEDOUT) => "it did not get there in 3 s",
                Some(libc::ENOSYS) => "not on Reef: moving processes needs Reef's reef_move_process call",
                _ => "failed",
            };
            eprintln!("move: {who} to core {core}: {why}");
            FAILED_STATUS
        }
    }
}

/// What to say when `reef_move_to_ac` refused with `errno`.
pub fn move_error_text(errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::EINVAL) => "not an application core (or no such core): make one with `role <core> ac`",
        Some(libc::EBUSY) => "that application core runs a thread already (or, with -1, no AC is free): see `cores`",
        Some(libc::EAGAIN) => "that core is not running: see `cores`",
        Some(libc::EALREADY) => "this thread runs on an application core already",
        Some(libc::ENXIO) => "no kernel core to serve the syspage: make one with `role <core> kc`",
        Some(libc::ENOSYS) => "not on Reef: application cores need Reef's reef_move_to_ac call",
        _ => "failed",
    }
}

/// `execac [--syspage] <core|-1> <program> [args]`: moves this process's thread to the AC,
/// then becomes the program (its `execve` is served by the home like every other call).
pub fn execac(words: &[&str]) -> u8 {
    const USAGE: &str = "execac [--syspage] <core|-1> <program> [args]";
    let (syspage, words) = match words {
        ["--syspage", rest @ ..] => (true, rest),
        _ => (false, words),
    };
    let [core, program, arguments @ ..] = words else {
        eprintln!("execac: usage: {USAGE}");
        return USAGE_STATUS;
    };
    let core = match *core {
        "-1" => None,
        word => match word.parse::<usize>() {
            Ok(core) => Some(core),
            Err(_) => {
                eprintln!("execac: `{word}` is not a core number (or -1 for any free AC): see `cores`");
                return USAGE_STATUS;
            }
        },
    };
    let search_path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string());
    let found = resolve(program, &search_path).ok().filter(|path| std::fs::metadata(path).is_ok_and(|m| m.is_file()));
    let Some(path) = found else {
        eprintln!("execac: {program}: no such program (in $PATH: {search_path}): give its path, or see `ls /bin`");
        return NOT_FOUND_STATUS;
    };
    if let Err(error) = roles::move_to_ac(core, syspage) {
        let core = core.map_or("-1".to_string(), |core| core.to_string());
        eprintln!("execac: core {core}: {}", move_error_text(error.raw_os_error()));
        return FAILED_STATUS;
    }
    let error = std::process::Command::new(&path).arg0(program).args(arguments).exec();
    eprintln!("execac: {program}: {error}");
    NOT_FOUND_STATUS
}
