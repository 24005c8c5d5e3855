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
    let environment = ["PATH=/bin:/sbin", "HOME=/tmp", "TERM=vt100", "ENV=/etc/profile", "PS1=reef:\\w# "];
    let mut command = std::process::Command::new(SHELL);
    match line {
        Some(line) => {
            command.arg("-c").arg(line);
        }
        None => {
            command.arg("-i");
            let instances = rt::instance_count().unwrap_or(1);
            println!("Reef: {instances} kernel instances up; /bin/sh on the console (`help` lists Reef's commands, `exit` powers off)");
        }
    }
    command.env_clear().current_dir("/tmp");
    for variable in environment {
        if let Some((name, value)) = variable.split_once('=') {
            command.env(name, value);
        }
    }
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (setsid, ioctl) on no shared memory.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("init: {SHELL} did not start: {error}; the initramfs must hold busybox as /bin/sh");
            return ExitCode::from(127);
        }
    };
    let shell_pid = child.id() as i32;
    if line.is_none() {
        // SAFETY: plain system call on the console descriptor; the group is the shell's.
        unsafe { libc::tcsetpgrp(0, shell_pid) };
    }
    // Reap every child (orphans included) until the shell itself ends.
    loop {
        let mut status = 0;
        // SAFETY: `status` is a live, writable int.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == shell_pid {
            let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
            return ExitCode::from(code as u8);
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            eprintln!("init: waiting for the shell failed: {}", std::io::Error::last_os_error());
            return ExitCode::from(1);
        }
    }
}
