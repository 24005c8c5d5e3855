//! init: Reef's first user program; says where it runs and can start itself on every core.
#![doc = include_str!("../README.md")]

use std::process::ExitCode;

/// Where init is installed: what it spawns on the other cores.
const INIT_PATH: &str = "/sbin/init";

const USAGE: &str = "usage: init [--every-core]";

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let every_core = match arguments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => false,
        ["--every-core"] => true,
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
