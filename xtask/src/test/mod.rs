//! `cargo xtask test`: the QEMU integration runs, with check, host tests and loom models beside them.
//!
//! The runs are listed in [`catalogue`], one file per area; [`runner`] boots one and judges
//! it; [`serial`] holds the readers of serial output the runs' checks are made of.

pub(crate) mod catalogue;
mod host_checks;
mod known_differences;
mod runner;
mod serial;

use crate::qemu::Accel;
use crate::tools::{self, cargo, run_checked};
use std::time::{Duration, Instant};

/// `cargo xtask test [--accel kvm|tcg] [--only NAME]`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let mut accel = Accel::detect();
    let mut only: Option<String> = None;
    let mut i = 0;
    while i < arguments.len() {
        match arguments[i].as_str() {
            "--accel" => {
                accel = Accel::parse(arguments.get(i + 1).ok_or("--accel needs kvm or tcg")?)?;
                i += 1;
            }
            "--only" => {
                only = Some(arguments.get(i + 1).ok_or("--only needs a name")?.clone());
                i += 1;
            }
            other => return Err(format!("unknown option `{other}` for test: see `cargo xtask help`")),
        }
        i += 1;
    }
    let started = Instant::now();
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut record = |name: &str, result: Result<Duration, String>| match result {
        Ok(elapsed) => {
            passed += 1;
            println!("PASS {name} ({:.2} s)", elapsed.as_secs_f64());
        }
        Err(why) => {
            failed += 1;
            println!("FAIL {name}: {why}");
        }
    };

    tools::ensure_qemu()?;
    // The host's checks and tests run beside the image builds and the QEMU runs, at the lowest
    // priority: a QEMU run keeps about one of two host CPUs busy (idle vCPUs halt) and a build
    // leaves CPUs idle while it links or fetches, and the checks take what they leave, so the
    // runs' timing is what it is alone.
    let host_phases = only.is_none().then(|| {
        std::thread::spawn(move || {
            let results = host_phases();
            // When the QEMU runs go on alone after this, they are the suite's critical path.
            println!(
                "xtask: host checks, unit tests and loom models done {:.0} s into the suite",
                started.elapsed().as_secs_f64()
            );
            results
        })
    });
    let kernel = tools::build_kernel()?;
    // Built once: every QEMU run of the suite boots the same image.
    let initrd = tools::build_initramfs()?;
    if only.as_deref().is_none_or(|o| "initramfs-image".contains(o)) {
        record("initramfs-image", timed(&|| host_checks::initramfs_image_checks(&initrd)));
    }
    if only.as_deref().is_none_or(|o| "run-command".contains(o)) {
        record("run-command", timed(&host_checks::run_command_checks));
    }
    println!("xtask: QEMU integration runs with {}", accel.name());
    let (listed, deferred) = catalogue::integrations(accel, &initrd);
    for test in listed.into_iter().chain(deferred.into_iter().flat_map(|later| later())) {
        if only.as_deref().is_some_and(|o| !test.name.contains(o)) {
            continue;
        }
        let result = runner::run_integration(&test, &kernel);
        record(&test.name, result);
    }
    if let Some(phases) = host_phases {
        match phases.join() {
            Ok(results) => results.into_iter().for_each(|(name, result)| record(name, result)),
            Err(_) => record("host-checks", Err("the thread running them panicked".into())),
        }
    }
    println!("xtask: suite took {:.1} s", started.elapsed().as_secs_f64());
    println!("summary: {passed} passed, {failed} failed");
    Ok(u8::from(failed != 0))
}

/// Runs `f`, timed.
fn timed(f: &dyn Fn() -> Result<(), String>) -> Result<Duration, String> {
    let t = Instant::now();
    f().map(|()| t.elapsed())
}

/// `cargo xtask check`, the host crates' unit tests and the loom models, from a thread at the
/// lowest priority (its children inherit it): each with its result.
fn host_phases() -> Vec<(&'static str, Result<Duration, String>)> {
    lowest_priority_for_this_thread();
    let unit_tests = || {
        run_checked(
            cargo().args(["test", "--quiet", "--workspace", "--exclude", "kernel", "--exclude", "base"]),
            "cargo test",
        )
    };
    let loom = || {
        ["channel", "syspage", "kcb"].into_iter().try_for_each(|package| {
            run_checked(
                cargo()
                    .args(["test", "--quiet", "--release", "-p", package, "--features", "loom", "--test", "loom"])
                    .env("RUSTFLAGS", "--cfg loom")
                    .env("CARGO_TARGET_DIR", tools::root().join("target/loom")),
                &format!("loom models of {package}"),
            )
        })
    };
    vec![
        ("check", timed(&crate::check::run_all)),
        ("host-unit-tests", timed(&unit_tests)),
        ("loom-models", timed(&loom)),
    ]
}

/// Nice 19 for the calling thread (Linux keeps a nice value per thread, and a child takes its
/// creator's): `renice` of its thread id. Without it (no `/proc`, no `renice`) the phases
/// still run, only competing with the QEMU runs.
pub(crate) fn lowest_priority_for_this_thread() {
    let thread = std::fs::read_link("/proc/thread-self").ok();
    let Some(id) = thread.as_ref().and_then(|path| path.file_name()).and_then(|name| name.to_str()) else {
        return;
    };
    let quiet = std::process::Stdio::null();
    let _ = std::process::Command::new("renice").args(["-n", "19", "-p", id]).stdout(quiet).status();
}
