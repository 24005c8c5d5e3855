//! `core`: stop, start and restart a core with a kernel image, park a core on another's
//! kernel and unpark it (Barrelfish/DC's boot driver).

use crate::{FAILED_STATUS, USAGE_STATUS};
use rt::cores::{self, CoreTimes};

const USAGE: &str = "core stop <core> [--keep] | core start <core> [image] [--uncached] | core restart <core> <image> [--uncached] | core park <core> <host> | core unpark <core> [destination]";

/// What to say when `reef_core_operation` refused with `errno`, and what to do about it.
pub fn core_error_text(operation: &str, errno: Option<i32>) -> &'static str {
    match errno {
        Some(libc::EALREADY) if operation == "restart" => {
            "the core is not running (stopped or offline), so there is no kernel to replace: `core start <core> <image>` starts it with that image"
        }
        Some(libc::EINVAL) => "no such core, a bad image path, or a core that is not parked: see `cores` and `ls /boot`",
        Some(libc::EPERM) if !crate::runs_as_root() => crate::NOT_ROOT,
        Some(libc::EPERM) => "core 0 owns the devices and the file service, and never stops",
        Some(libc::EDEADLK) => {
            "this program runs on that core, whose processes move (or freeze) first, and it cannot while it asks: ask from another core, e.g. `on <other core> core ...`"
        }
        Some(libc::EBUSY) => {
            "something keeps it: a process homed there that cannot move to another TC or be kept through a restart (a TC's processes move before it stops and stay through a restart or a stop --keep; ask from another core), an application thread, syspages, a parked core (unpark it), a stopped core keeping processes started with an image that runs no timesharing, or it is parked, an AC (which neither parks nor hosts) or a KC asked to host (the kernel log says which)"
        }
        Some(libc::EOPNOTSUPP) => {
            "that core's image cannot do this: a host must run /boot/multi (core restart <host> /boot/multi)"
        }
        Some(libc::EALREADY) => "the core is in that state already: see `cores`",
        Some(libc::EAGAIN) => "the core is booting: try again in a moment",
        Some(libc::ENODEV) => "that core (or the host) is stopped or offline: start it first with `core start <core>`",
        Some(libc::ENOENT) => "no such kernel image: `ls /boot` lists them",
        Some(libc::ENOEXEC) => "that file is no Reef kernel image, or it is corrupt: rebuild it with `cargo xtask build`",
        Some(libc::EPROTO) => "that image was built for another KCB layout version: rebuild it from this tree",
        Some(libc::ETIMEDOUT) => "the core did not answer in time: see `cores`",
        Some(libc::ENOMEM) => "the boot driver ran out of memory for the new kernel: see `mem`",
        Some(libc::ENOSYS) => "not on Reef: core operations need Reef's reef_core_operation call",
        _ => "failed",
    }
}

fn micros(ns: u64) -> String {
    format!("{}.{:03} ms", ns / 1_000_000, ns / 1000 % 1000)
}

fn report(core: usize, what: &str, times: &CoreTimes) {
    let mut parts = vec![format!("core {core} {what} in {}", micros(times.total_ns))];
    if times.stop_ns != 0 && times.stop_ns != times.total_ns {
        parts.push(format!("stop {}", micros(times.stop_ns)));
    }
    if times.driver_ns != 0 || times.target_ns != 0 {
        parts.push(format!("boot driver {}", micros(times.driver_ns)));
        parts.push(format!("target {}", micros(times.target_ns)));
        parts.push(format!("image {}", if times.image_cached != 0 { "cached" } else { "loaded" }));
    }
    println!("{}", parts.join(", "));
}

/// `core park <core> <host>` and `core unpark <core> [destination]`.
fn park_or_unpark(words: &[&str]) -> u8 {
    let numbers: Result<Vec<usize>, _> = words[1..].iter().map(|word| word.parse::<usize>()).collect();
    let (operation, result, what) = match (words[0], numbers.as_deref()) {
        ("park", Ok([core, host])) => ("park", (cores::park(*core, *host), *core), format!("parked on core {host}")),
        ("unpark", Ok([core])) => ("unpark", (cores::unpark(*core, None), *core), "unparked".to_string()),
        ("unpark", Ok([core, to])) => {
            ("unpark", (cores::unpark(*core, Some(*to)), *core), format!("unparked onto core {to}'s processor"))
        }
        _ => {
            eprintln!("core: usage: {USAGE}");
            return USAGE_STATUS;
        }
    };
    let (result, core) = result;
    match result {
        Ok(times) => {
            let ms = micros;
            let mut line = format!("core {core} {what} in {}", ms(times.total_ns));
            if operation == "park" {
                line += &format!(
                    ", left its core {}, first run on the host {} later",
                    ms(times.stop_ns),
                    ms(times.target_ns)
                );
            } else {
                line += &format!(
                    ", left the host {}, INIT-SIPI {}, running {} later",
                    ms(times.stop_ns),
                    ms(times.driver_ns),
                    ms(times.target_ns)
                );
            }
            println!("{line}");
            0
        }
        Err(error) => {
            eprintln!("core: {operation} core {core}: {}", core_error_text(operation, error.raw_os_error()));
            FAILED_STATUS
        }
    }
}

/// `core stop|start|restart|park|unpark ...`.
pub fn core(words: &[&str]) -> u8 {
    if matches!(words.first(), Some(&("park" | "unpark"))) {
        return park_or_unpark(words);
    }
    let uncached = words.contains(&"--uncached");
    let keep = words.contains(&"--keep");
    let words: Vec<&str> = words.iter().copied().filter(|word| !matches!(*word, "--uncached" | "--keep")).collect();
    let (operation, core, image) = match words.as_slice() {
        [operation @ "stop", core] if !uncached => (*operation, *core, None),
        _ if keep => {
            eprintln!("core: --keep goes with stop only: core stop <core> --keep");
            return USAGE_STATUS;
        }
        [operation @ "start", core] => (*operation, *core, None),
        [operation @ ("start" | "restart"), core, image] => (*operation, *core, Some(*image)),
        _ => {
            eprintln!("core: usage: {USAGE}");
            return USAGE_STATUS;
        }
    };
    let Ok(core) = core.parse::<usize>() else {
        eprintln!("core: `{core}` is not a core number: see `cores`");
        return USAGE_STATUS;
    };
    let (result, done) = match operation {
        "stop" if keep => (cores::stop_keeping(core), "stopped, its processes kept in its KCB,"),
        "stop" => (cores::stop(core), "stopped"),
        "start" => (cores::start(core, image, uncached), "started"),
        _ => (cores::restart(core, image, uncached), "restarted"),
    };
    match result {
        Ok(times) => {
            let what = match image {
                Some(image) => format!("{done} with {image}"),
                None => done.to_string(),
            };
            report(core, &what, &times);
            0
        }
        Err(error) => {
            eprintln!("core: {operation} core {core}: {}", core_error_text(operation, error.raw_os_error()));
            FAILED_STATUS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_usage_is_refused_before_any_call() {
        assert_eq!(core(&[]), USAGE_STATUS);
        assert_eq!(core(&["stop"]), USAGE_STATUS);
        assert_eq!(core(&["stop", "x"]), USAGE_STATUS);
        assert_eq!(core(&["stop", "1", "/boot/rt"]), USAGE_STATUS);
        assert_eq!(core(&["stop", "1", "--uncached"]), USAGE_STATUS);
        assert_eq!(core(&["start", "1", "--keep"]), USAGE_STATUS);
        assert_eq!(core(&["restart", "1", "/boot/full", "--keep"]), USAGE_STATUS);
        assert_eq!(core(&["restart", "1"]), USAGE_STATUS);
        assert_eq!(core(&["park", "1"]), USAGE_STATUS);
        assert_eq!(core(&["park", "1", "x"]), USAGE_STATUS);
        assert_eq!(core(&["unpark"]), USAGE_STATUS);
        assert_eq!(core(&["unpark", "1", "2", "3"]), USAGE_STATUS);
        assert_eq!(core(&["fly", "1"]), USAGE_STATUS);
    }

    #[test]
    fn off_reef_the_call_fails_with_a_sentence() {
        if rt::on_reef() {
            return;
        }
        assert_eq!(core(&["stop", "1"]), FAILED_STATUS);
        assert!(core_error_text("stop", Some(libc::ENOSYS)).contains("not on Reef"));
    }
}
