//! `cargo xtask bench`: figures, never verdicts. Each writes JSON under `results/`.

use crate::qemu::{self, Accel, Machine};
use crate::stats::summarize;
use crate::tools;
use std::time::Duration;

/// `cargo xtask bench <what>`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    match arguments.first().map(String::as_str) {
        Some("boot") => boot(&arguments[1..]),
        Some(other) => Err(format!("unknown benchmark `{other}`: known are boot")),
        None => Err("which benchmark? `cargo xtask bench boot`".into()),
    }
}

/// The TSC rate the guest printed at boot, in Hz.
pub fn guest_tsc_hz(serial: &str) -> Option<u64> {
    let line = serial.lines().find(|l| l.contains("] TSC "))?;
    let mhz: u64 = line.split("TSC ").nth(1)?.split_whitespace().next()?.parse().ok()?;
    Some(mhz * 1_000_000)
}

fn boot(arguments: &[String]) -> Result<u8, String> {
    let mut runs = 5;
    let mut accel = Accel::detect();
    let mut i = 0;
    while i < arguments.len() {
        match arguments[i].as_str() {
            "--runs" => {
                runs = arguments
                    .get(i + 1)
                    .and_then(|r| r.parse().ok())
                    .filter(|r| *r > 0)
                    .ok_or("--runs takes a number")?;
                i += 1;
            }
            "--accel" => {
                accel = Accel::parse(arguments.get(i + 1).ok_or("--accel needs kvm or tcg")?)?;
                i += 1;
            }
            other => return Err(format!("unknown option `{other}` for bench boot")),
        }
        i += 1;
    }
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    let mut configurations = Vec::new();
    let mut tsc_hz = None;
    for cores in [1usize, 4] {
        let mut machine = Machine::new(cores);
        machine.accel = accel;
        machine.timeout = Duration::from_secs(30);
        let mut samples = Vec::new();
        for _ in 0..runs {
            let (outcome, prompt) = qemu::boot(&machine, &kernel, Some("reef> "))?;
            let prompt = prompt.ok_or_else(|| format!("no prompt within 30 s:\n{}", outcome.serial))?;
            tsc_hz = tsc_hz.or_else(|| guest_tsc_hz(&outcome.serial));
            samples.push(prompt.as_secs_f64() * 1000.0);
        }
        let summary = summarize(&samples).expect("runs > 0");
        println!(
            "boot to prompt, {cores} core(s), {}: median {:.1} ms (p5 {:.1}, p95 {:.1}, min {:.1}) over {runs} runs",
            accel.name(),
            summary.median,
            summary.p5,
            summary.p95,
            summary.min
        );
        configurations.push(serde_json::json!({
            "cores": cores, "unit": "ms", "samples": samples, "summary": summary.to_json(),
        }));
    }
    let result = serde_json::json!({
        "benchmark": "boot",
        "what": "wall time from QEMU process start to the shell prompt `reef> ` on the serial port",
        "accelerator": accel.name(),
        "tsc_hz": tsc_hz,
        "runs": runs,
        "configurations": configurations,
    });
    let path = tools::root().join("results/boot.json");
    std::fs::create_dir_all(path.parent().expect("results/")).map_err(|e| e.to_string())?;
    std::fs::write(&path, serde_json::to_string_pretty(&result).expect("json")).map_err(|e| e.to_string())?;
    println!("xtask: wrote {}", path.display());
    Ok(0)
}
