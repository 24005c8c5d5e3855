//! What the benchmarks share: option parsing, the guest's prompt and TSC rate, times in
//! tables, and writing results under `results/`. It names no benchmark.

use crate::tools;
use serde_json::Value;

/// The prompt of the user shell (busybox `sh`, which `/sbin/init` starts in `/tmp`).
pub const USER_PROMPT: &str = "reef:/tmp# ";

/// The TSC rate the guest printed at boot, in Hz.
pub fn guest_tsc_hz(serial: &str) -> Option<u64> {
    let line = serial.lines().find(|l| l.contains("] TSC "))?;
    let mhz: u64 = line.split("TSC ").nth(1)?.split_whitespace().next()?.parse().ok()?;
    Some(mhz * 1_000_000)
}

pub use crate::linux_guest::LINUX_KERNEL_ARGUMENTS;

/// A time in ns as a table shows it: ms from 1 ms up, else µs; `-` when not measured.
pub fn time_text(ns: Option<f64>) -> String {
    match ns {
        Some(ns) if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        Some(ns) => format!("{:.1} µs", ns / 1e3),
        None => "-".into(),
    }
}

/// Writes `results` as `results/<name>` and says so; returns the `results` directory, where
/// the plots go.
pub fn write_results(results: &Value, name: &str) -> Result<std::path::PathBuf, String> {
    let directory = tools::root().join("results");
    std::fs::create_dir_all(&directory).map_err(|e| e.to_string())?;
    let path = directory.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(results).map_err(|e| e.to_string())? + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(directory)
}

/// The number an option such as `--runs` takes, within `range`; else `<option> takes A to B`.
pub fn number_option(
    option: &str,
    value: Option<&String>,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, String> {
    value.and_then(|n| n.parse().ok()).filter(|n| range.contains(n)).ok_or(format!(
        "{option} takes {} to {}",
        range.start(),
        range.end()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_tables() {
        assert_eq!(time_text(Some(40_123_456.0)), "40.12 ms");
        assert_eq!(time_text(Some(1_000_000.0)), "1.00 ms");
        assert_eq!(time_text(Some(12_345.0)), "12.3 µs");
        assert_eq!(time_text(None), "-");
    }
}
