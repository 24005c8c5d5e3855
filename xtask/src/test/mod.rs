//! `cargo xtask test`: check, host tests, loom models, then QEMU integration runs.
//!
//! The runs are listed in [`catalogue`], one file per area; [`runner`] boots one and judges
//! it; [`serial`] holds the readers of serial output the runs' checks are made of.

mod catalogue;
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
    let timed = |f: &dyn Fn() -> Result<(), String>| {
        let t = Instant::now();
        f().map(|()| t.elapsed())
    };

    if only.is_none() {
        record("check", timed(&crate::check::run_all));
        record(
            "host-unit-tests",
            timed(&|| {
                run_checked(
                    cargo().args(["test", "--quiet", "--workspace", "--exclude", "kernel", "--exclude", "base"]),
                    "cargo test",
                )
            }),
        );
        record(
            "loom-models",
            timed(&|| {
                ["channel", "syspage", "kcb"].into_iter().try_for_each(|package| {
                    run_checked(
                        cargo()
                            .args([
                                "test",
                                "--quiet",
                                "--release",
                                "-p",
                                package,
                                "--features",
                                "loom",
                                "--test",
                                "loom",
                            ])
                            .env("RUSTFLAGS", "--cfg loom")
                            .env("CARGO_TARGET_DIR", tools::root().join("target/loom")),
                        &format!("loom models of {package}"),
                    )
                })
            }),
        );
    }
    tools::ensure_qemu()?;
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
    for test in catalogue::integrations(accel, &initrd) {
        if only.as_deref().is_some_and(|o| !test.name.contains(o)) {
            continue;
        }
        let result = runner::run_integration(&test, &kernel);
        record(&test.name, result);
    }
    println!("xtask: suite took {:.1} s", started.elapsed().as_secs_f64());
    println!("summary: {passed} passed, {failed} failed");
    Ok(u8::from(failed != 0))
}
