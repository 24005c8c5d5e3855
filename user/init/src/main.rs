//! init: Reef's first user program: starts the user shell on the console (or runs one
//! command line through it) and reaps; can also start itself on every core.
#![doc = include_str!("../README.md")]

use std::process::ExitCode;

/// Where init is installed: what it spawns on the other cores.
const INIT_PATH: &str = "/sbin/init";

/// The user shell init starts.
const SHELL: &str = "/bin/sh";

const USAGE: &str = "usage: init [--every-core | --shell | -c <command line>]";

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let every_core = match arguments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => false,
        ["--every-core"] => true,
        ["--shell"] => return shell(None),
        ["-c", line] => return shell(Some(line)),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let pid = std::process::id();
    let (Some(core), Some(count)) = (rt::current_core(), rt::instance_count()) else {
        println!("init: pid {pid} (not on Reef)");
        if every_core {
            println!("init: --every-core skipped (not on Reef)");
        }
        return ExitCode::SUCCESS;
    };
    println!("init: pid {pid} on core {core} of {count} instances");
    if !every_core {
        return ExitCode::SUCCESS;
    }
    let reached = start_on_every_other_core(core, count);
    let milliseconds = milliseconds_since_boot();
    if reached == count {
        println!("init: running on every core ({count}) after {milliseconds:.1} ms since boot");
        ExitCode::SUCCESS
    } else {
        println!("init: reached {reached} of {count} cores after {milliseconds:.1} ms since boot");
        ExitCode::FAILURE
    }
}

/// Spawns init on every running core but `own_core`, then reaps every child; returns how many
/// cores ran init to a clean exit, this one included.
fn start_on_every_other_core(own_core: usize, count: usize) -> usize {
    let mut children = Vec::new();
    let mut core = 0;
    // All spawns first, then all waits: the cores start init in parallel.
    while children.len() + 1 < count {
        if core != own_core {
            match rt::spawn(core, INIT_PATH, &[], &[]) {
                Ok(pid) => children.push((core, pid)),
                // Not running: a core that is down, the ones above it may be up.
                Err(error) if error.raw_os_error() == Some(libc::EAGAIN) => {}
                // No such core: none above it either.
                Err(error) if error.raw_os_error() == Some(libc::EINVAL) => break,
                Err(error) => println!("init: spawn on core {core} failed: {error}"),
            }
        }
        core += 1;
    }
    let mut reached = 1;
    for (core, pid) in children {
        match rt::wait(pid) {
            Ok(status) if status.success() => reached += 1,
            Ok(status) => println!("init: core {core} pid {pid} ended with {status}"),
            Err(error) => println!("init: core {core} pid {pid} could not be waited for: {error}"),
        }
    }
    reached
}

/// `CLOCK_MONOTONIC` in milliseconds: on Reef the time since boot (see the README).
fn milliseconds_since_boot() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a live, writable `timespec`, the only memory `clock_gettime` writes.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    if status != 0 {
        return f64::NAN;
    }
    now.tv_sec as f64 * 1e3 + now.tv_nsec as f64 / 1e6
}

/// Runs the user shell: interactive on the console (`line` None), or `sh -c line`. init
/// makes the shell the leader of a new session whose controlling terminal is the console, so
/// Ctrl-C reaches the foreground job, not init; it then reaps every child until the shell
/// ends, and ends with the shell's status (the kernel powers off with it).
fn shell(line: Option<&str>) -> ExitCode {
    use std::ffi::CString;
    let environment = [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/tmp",
        "TERM=vt100",
        "ENV=/etc/profile",
        "PS1=reef:\\w# ",
    ];
    let mut arguments = vec![CString::from(c"sh")];
    match line {
        Some(line) => {
            arguments.push(CString::from(c"-c"));
            match CString::new(line) {
                Ok(line) => arguments.push(line),
                Err(_) => {
                    eprintln!("init: the command line holds a NUL byte");
                    return ExitCode::from(2);
                }
            }
        }
        None => {
            arguments.push(CString::from(c"-i"));
            let instances = rt::instance_count().unwrap_or(1);
            println!(
                "Reef: {instances} kernel instances up; /bin/sh on the console (`reef help` lists Reef's commands, `exit` powers off)"
            );
        }
    }
    let environment: Vec<CString> = environment.iter().filter_map(|v| CString::new(*v).ok()).collect();
    let mut argv: Vec<*const libc::c_char> = arguments.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = environment.iter().map(|v| v.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: fork has no memory preconditions; the child only makes async-signal-safe calls
    // (setsid, ioctl, chdir, execve, _exit) on memory prepared before the fork.
    let shell_pid = unsafe { libc::fork() };
    if shell_pid == 0 {
        // SAFETY: as above; argv and envp are NULL-ended arrays of live C strings.
        unsafe {
            // Rust's runtime ignores SIGPIPE in init; an ignored signal stays ignored across
            // execve, so without this every program the shell ran would live on past a closed
            // pipe (`yes | head` never ended) and `kill -s PIPE` would do nothing.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY, 0);
            // The new session's group is the console's foreground before the shell looks
            // (an interactive shell waits until it is).
            libc::tcsetpgrp(0, libc::getpid());
            libc::chdir(c"/tmp".as_ptr());
            libc::execve(c"/bin/sh".as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
    }
    if shell_pid < 0 {
        eprintln!("init: {SHELL} did not start: {}; init cannot fork", std::io::Error::last_os_error());
        return ExitCode::from(127);
    }
    // Reap every child (orphans included) until the shell itself ends.
    // busybox's `halt`, `poweroff` and `reboot` (without -f) ask init by signal, as they ask
    // busybox's init: SIGUSR1, SIGUSR2, SIGTERM.
    // No SA_RESTART: the signal must end init's `waitpid` so that init acts on it.
    // SAFETY: an all-zero `sigaction` is valid (empty mask, no flags).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_power_signal as *const () as libc::sighandler_t;
    for signal in [libc::SIGUSR1, libc::SIGUSR2, libc::SIGTERM] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe; `action`
        // is a live, initialised `sigaction`.
        unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
    }
    loop {
        obey_power_signal();
        let mut status = 0;
        // SAFETY: `status` is a live, writable int.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == shell_pid {
            // `poweroff; …` may end the shell before init saw the signal.
            obey_power_signal();
            let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
            return ExitCode::from(code as u8);
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            eprintln!("init: waiting for the shell failed: {}", std::io::Error::last_os_error());
            return ExitCode::from(1);
        }
    }
}

/// Halts, powers off or reboots if a power signal came (busybox init's meanings).
fn obey_power_signal() {
    let asked = POWER_SIGNAL.swap(0, std::sync::atomic::Ordering::Relaxed);
    if asked == 0 {
        return;
    }
    let command = match asked {
        libc::SIGUSR1 => libc::RB_HALT_SYSTEM,
        libc::SIGTERM => libc::RB_AUTOBOOT,
        _ => libc::RB_POWER_OFF,
    };
    // SAFETY: a plain system call; on success it does not return.
    unsafe { libc::reboot(command) };
    eprintln!("init: reboot failed: {}", std::io::Error::last_os_error());
}

/// The power signal init was sent last (0: none).
static POWER_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_power_signal(signal: libc::c_int) {
    POWER_SIGNAL.store(signal, std::sync::atomic::Ordering::Relaxed);
}
