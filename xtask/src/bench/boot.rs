//! `cargo xtask bench boot`: time from QEMU's start to the shell prompt, with 1 and 4 cores.

use crate::bench::common::{guest_tsc_hz, USER_PROMPT};
use crate::bench::plot;
use crate::bench::stats::{summarize, to_json};
use crate::qemu::{self, Accel, Machine};
use crate::tools;
use std::time::Duration;

/// `cargo xtask bench boot [--runs N] [--accel kvm|tcg]`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
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
    let initrd = tools::build_initramfs()?;
    let mut configurations = Vec::new();
    let mut bars = Vec::new();
    let mut tsc_hz = None;
    for cores in [1usize, 4] {
        let mut machine = Machine::new(cores);
        machine.accel = accel;
        machine.timeout = Duration::from_secs(30);
        machine.initrd = Some(initrd.clone());
        let mut samples = Vec::new();
        for _ in 0..runs {
            // The prompt ash prints once init has started it in /tmp: the machine is usable.
            let (outcome, prompt) = qemu::boot(&machine, &kernel, Some(USER_PROMPT))?;
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
        bars.push((cores, summary));
        configurations.push(serde_json::json!({
            "cores": cores, "unit": "ms", "samples": samples, "summary": to_json(&summary),
        }));
    }
    let result = serde_json::json!({
        "benchmark": "boot",
        "what": "wall time from QEMU process start to the user shell's prompt `reef:/tmp# ` on the serial port",
        "accelerator": accel.name(),
        "tsc_hz": tsc_hz,
        "runs": runs,
        "configurations": configurations,
    });
    let path = tools::root().join("results/boot.json");
    std::fs::create_dir_all(path.parent().expect("results/")).map_err(|e| e.to_string())?;
    std::fs::write(&path, serde_json::to_string_pretty(&result).expect("json")).map_err(|e| e.to_string())?;
    let bars: Vec<plot::BarEntry> =
        bars.into_iter().map(|(cores, s)| (format!("{cores} core(s)"), s.median, Some((s.p5, s.p95)))).collect();
    let png = tools::root().join("results/boot.png");
    match plot::bar_chart(&png, &format!("Boot to shell prompt ({}, median, p5-p95)", accel.name()), "ms", &bars, false)
    {
        Ok(()) => println!("xtask: wrote {} and {}", path.display(), png.display()),
        Err(e) => println!("xtask: wrote {}; no plot: {e}", path.display()),
    }
    Ok(0)
}
