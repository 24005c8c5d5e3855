//! `on` and `spawn`: a program on a core (`reef_spawn`), waited for with `wait4`.

use crate::{FAILED_STATUS, NOT_FOUND_STATUS, USAGE_STATUS};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// Where programs are looked for when `$PATH` is not set (what init gives the shell).
const DEFAULT_PATH: &str = "/bin:/sbin";
/// Exit status when a program cannot be run (not a program, not executable), as a shell gives.
const NOT_EXECUTABLE_STATUS: u8 = 126;

/// Why a program name found no file.
#[derive(Debug, PartialEq, Eq)]
pub struct NotFound {
    /// The directories searched.
    pub searched: String,
}

/// The file `program` names: itself when it holds a `/`, else the first executable file of
/// that name in a directory of `search_path` (`$PATH`: `:`-separated; an empty entry is the
/// working directory).
pub fn resolve(program: &str, search_path: &str) -> Result<String, NotFound> {
    if program.contains('/') {
        return Ok(program.to_string());
    }
    search_path
        .split(':')
        .map(|directory| if directory.is_empty() { format!("./{program}") } else { format!("{directory}/{program}") })
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| NotFound { searched: search_path.to_string() })
}

/// A few words for why `reef_spawn` refused (the kernel's `proc::errno_text`, with a hint of
/// what to do).
pub fn spawn_error_text(errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::ENOENT) => "no such file in the initramfs (see `ls /bin`)",
        Some(libc::EACCES) => "not an executable file",
        Some(libc::ENOEXEC) => "not a static x86-64 ELF program",
        Some(libc::ENOMEM) => "out of memory on that core",
        Some(libc::E2BIG) => "arguments too long",
        Some(libc::EINVAL) => "no such core: see `cores`",
        Some(libc::EAGAIN) => "that core is not running: see `cores`, `start <core>`",
        Some(libc::EBUSY) => {
            "that core runs no processes (an application or kernel core): see `cores`, `role <core> tc`"
        }
        Some(libc::ETIMEDOUT) => "that core did not answer in time",
        Some(libc::ECHILD) => "no such child",
        Some(libc::ESRCH) => "no such process",
        Some(libc::EINTR) => "interrupted",
        Some(libc::ENOSYS) => "not on Reef: running a program on a core needs Reef's reef_spawn call",
        _ => "failed",
    }
}

/// The exit status a shell gives for a program that could not be started with `errno`.
fn start_failure_status(errno: Option<i32>) -> u8 {
    match errno {
        Some(libc::ENOENT) => NOT_FOUND_STATUS,
        Some(libc::ENOEXEC | libc::EACCES) => NOT_EXECUTABLE_STATUS,
        _ => FAILED_STATUS,
    }
}

/// The status a shell gives for how a child ended: its exit code, or 128 + the signal.
pub fn shell_status(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(signal)) => 128u8.wrapping_add(signal as u8),
        (None, None) => FAILED_STATUS,
    }
}

/// The environment to hand on: this program's own, the variables that are text.
fn environment() -> Vec<(String, String)> {
    std::env::vars_os().filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?))).collect()
}

/// A program to start: where it runs, which file, its arguments after the name.
struct Launch<'a> {
    core: usize,
    program: &'a str,
    path: String,
    arguments: &'a [&'a str],
}

/// Why `<core> <program> [args]` names nothing to start.
enum LaunchError<'a> {
    /// Fewer than two words.
    Usage,
    /// The first word is not a number.
    BadCore(&'a str),
    /// The program is in no directory of `$PATH`.
    NotFound { program: &'a str, searched: String },
}

impl<'a> Launch<'a> {
    /// Reads `<core> <program> [args]`, looking the program up in `$PATH`.
    fn parse(words: &'a [&'a str]) -> Result<Self, LaunchError<'a>> {
        let [core, program, arguments @ ..] = words else { return Err(LaunchError::Usage) };
        let core = core.parse().map_err(|_| LaunchError::BadCore(core))?;
        let search_path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string());
        let path = resolve(program, &search_path)
            .map_err(|not_found| LaunchError::NotFound { program, searched: not_found.searched })?;
        Ok(Self { core, program, path, arguments })
    }

    /// Starts the program; `tied`: it is killed when this launcher ends, even by SIGKILL,
    /// which the launcher cannot pass on (for a launcher that waits for it).
    fn start(&self, tied: bool) -> std::io::Result<rt::Pid> {
        let environment = environment();
        let pairs: Vec<(&str, &str)> = environment.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect();
        let death_signal = if tied { libc::SIGKILL } else { 0 };
        rt::spawn_with_death_signal(self.core, &self.path, self.arguments, &pairs, death_signal)
    }
}

/// While `on` or `spawn` waits for its program, `kill` of its pid (TERM, HUP, USR1, USR2)
/// reaches the program instead, and `spawn` then says how it ended.
fn pass_signals_on(pid: rt::Pid) {
    if let Err(error) = rt::forward_signals(pid) {
        eprintln!("warning: signals to this launcher will not reach pid {pid}: {error}");
    }
}

/// `on <core> <program> [args]`: runs the program on that core, waits, exits with its status.
pub fn on(words: &[&str]) -> u8 {
    const USAGE: &str = "on <core> <program> [args]";
    let launch = match Launch::parse(words) {
        Ok(launch) => launch,
        Err(LaunchError::Usage) => {
            eprintln!("on: usage: {USAGE}");
            return USAGE_STATUS;
        }
        Err(LaunchError::BadCore(core)) => {
            eprintln!("on: `{core}` is not a core number: see `cores`");
            return FAILED_STATUS;
        }
        Err(LaunchError::NotFound { program, searched }) => {
            eprintln!("on: {program}: no such program in $PATH ({searched}): give its path, or see `ls /bin`");
            return NOT_FOUND_STATUS;
        }
    };
    let pid = match launch.start(true) {
        Ok(pid) => pid,
        Err(error) => {
            let errno = error.raw_os_error();
            eprintln!("on: {} on core {}: {}", launch.program, launch.core, spawn_error_text(errno));
            return start_failure_status(errno);
        }
    };
    pass_signals_on(pid);
    match rt::wait(pid) {
        Ok(status) => shell_status(status),
        Err(error) => {
            eprintln!("on: pid {pid} on core {} could not be waited for: {error}", launch.core);
            FAILED_STATUS
        }
    }
}

/// `spawn [--no-wait] <core> <program> [args]`: `on`, saying how the program ended (`pid P on
/// core C exited with status S`, `… was killed by signal N`), or `pid P started on core C`
/// without waiting, or an `error: …` line on standard error. Exits with the child's status,
/// as a shell gives it.
pub fn spawn(words: &[&str]) -> u8 {
    const USAGE: &str = "spawn [--no-wait] <core> <program> [args]";
    let (wait, words) = match words {
        ["--no-wait", rest @ ..] => (false, rest),
        rest => (true, rest),
    };
    let launch = match Launch::parse(words) {
        Ok(launch) => launch,
        Err(LaunchError::Usage) => {
            eprintln!("error: wrong arguments: usage: {USAGE}");
            return USAGE_STATUS;
        }
        Err(LaunchError::BadCore(core)) => {
            eprintln!("error: `{core}` is not a core number: see `cores`");
            return FAILED_STATUS;
        }
        // The kernel's words for a program that is not there.
        Err(LaunchError::NotFound { program, .. }) => {
            eprintln!("error: {program} on core {}: {}", words[0], spawn_error_text(Some(libc::ENOENT)));
            return FAILED_STATUS;
        }
    };
    let pid = match launch.start(wait) {
        Ok(pid) => pid,
        Err(error) => {
            eprintln!("error: {} on core {}: {}", launch.program, launch.core, spawn_error_text(error.raw_os_error()));
            return FAILED_STATUS;
        }
    };
    if !wait {
        println!("pid {pid} started on core {}", launch.core);
        return 0;
    }
    pass_signals_on(pid);
    match rt::wait(pid) {
        Ok(status) => {
            match status.signal() {
                Some(signal) => println!("pid {pid} on core {} was killed by signal {signal}", launch.core),
                None => println!("pid {pid} on core {} exited with status {}", launch.core, shell_status(status)),
            }
            shell_status(status)
        }
        Err(error) => {
            eprintln!("error: waiting: {error}");
            FAILED_STATUS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_a_slash_are_used_as_they_are() {
        assert_eq!(resolve("/nowhere/x", "/bin"), Ok("/nowhere/x".to_string()));
        assert_eq!(resolve("./x", ""), Ok("./x".to_string()));
    }

    #[test]
    fn names_are_looked_up_in_path_order() {
        let directory = std::env::temp_dir().join(format!("reef-path-{}", std::process::id()));
        let (first, second) = (directory.join("first"), directory.join("second"));
        for place in [&first, &second] {
            std::fs::create_dir_all(place).unwrap();
        }
        let program = |place: &std::path::Path, mode: u32| {
            let file = place.join("prog");
            std::fs::write(&file, b"#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        program(&first, 0o644);
        program(&second, 0o755);
        let search = format!("{}:{}", first.display(), second.display());
        assert_eq!(resolve("prog", &search), Ok(format!("{}/prog", second.display())), "the executable one");
        assert_eq!(resolve("absent", &search), Err(NotFound { searched: search.clone() }));
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn statuses_as_a_shell_gives_them() {
        assert_eq!(shell_status(ExitStatus::from_raw(0)), 0);
        assert_eq!(shell_status(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(shell_status(ExitStatus::from_raw(9)), 137);
        assert_eq!(start_failure_status(Some(libc::ENOENT)), 127);
        assert_eq!(start_failure_status(Some(libc::ENOEXEC)), 126);
        assert_eq!(start_failure_status(Some(libc::EINVAL)), 1);
    }
}
