//! linux-bench: Reef's inter-core messaging benchmarks as a Linux program, for comparison.
#![doc = include_str!("../README.md")]

mod options;
mod os;
mod pingpong;
mod spin;
mod stats;
mod tsc;

use options::{Options, Request, USAGE};
use stats::CpuPair;
use std::process::ExitCode;
use std::time::Duration;

/// How long the TSC is counted against the monotonic clock.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(100);

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match options::parse(&arguments) {
        Ok(Request::Run(options)) => options,
        Ok(Request::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Request::TscOnly) => {
            // `cargo xtask peer` runs this on the host to hand the guest kernel its TSC rate.
            let first_cpu = os::allowed_cpus().ok().and_then(|set| set.cpus().first().copied()).unwrap_or(0);
            return match print_tsc_line(first_cpu) {
                Ok(_) => ExitCode::SUCCESS,
                Err(message) => {
                    println!("PEER error {message}");
                    ExitCode::FAILURE
                }
            };
        }
        Err(message) => {
            println!("PEER error {message}");
            eprintln!("linux-bench: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // On stdout too: in the guest, stdout is the serial console the host reads.
            println!("PEER error {message}");
            eprintln!("linux-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the setup lines, one result line per benchmark, and `PEER done`.
fn run(options: &Options) -> Result<(), String> {
    let names: Vec<&str> = options.benchmarks.iter().map(|benchmark| benchmark.name()).collect();
    println!("PEER start rounds={} warmup={} benchmarks={}", options.rounds, options.warmup, names.join(","));

    let allowed = os::allowed_cpus().map_err(|error| format!("sched_getaffinity: {error}"))?;
    let available = allowed.cpus();
    let listed = available.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let cpus = usable_pair(options.cpus, &available).ok_or("sched_getaffinity allows no CPU at all")?;
    if cpus != options.cpus {
        let sharing = if cpus.initiator == cpus.responder {
            ": both threads share it, and the polling benchmarks, which need a CPU per side, are skipped"
        } else {
            ""
        };
        println!(
            "PEER note CPUs {},{} are not both available (only {listed}), so the pair is {},{}{sharing}",
            options.cpus.initiator, options.cpus.responder, cpus.initiator, cpus.responder
        );
    }
    println!("PEER cpus initiator={} responder={} available={}", cpus.initiator, cpus.responder, available.len());

    let tsc_hz = print_tsc_line(cpus.initiator)?;
    if spin::running_under_tcg() {
        println!("PEER note spin loops skip PAUSE under TCG, as Reef's kernels do");
    }

    let plan = pingpong::Plan { warmup: options.warmup, rounds: options.rounds };
    for &benchmark in &options.benchmarks {
        if benchmark.polls() && cpus.initiator == cpus.responder {
            println!("PEER skip name={} reason=needs-two-cpus", benchmark.name());
            continue;
        }
        let mut samples =
            pingpong::run(benchmark, plan, cpus).map_err(|error| format!("{}: {error}", benchmark.name()))?;
        let summary = stats::summarize(&mut samples).ok_or("no samples")?;
        println!("{}", stats::result_line(benchmark.name(), &summary, tsc_hz, cpus));
    }
    println!("PEER done");
    Ok(())
}

/// `wanted` if this process may run on both of its CPUs; else the first two it may run on, or
/// the only one twice; `None` if it may run nowhere.
fn usable_pair(wanted: CpuPair, available: &[usize]) -> Option<CpuPair> {
    if available.contains(&wanted.initiator) && available.contains(&wanted.responder) {
        return Some(wanted);
    }
    let initiator = *available.first()?;
    let responder = *available.get(1).unwrap_or(&initiator);
    Some(CpuPair { initiator, responder })
}

/// Measures the TSC on `cpu` (the initiator's, where every sample is taken), prints the
/// `PEER tsc` line and returns the rate to convert cycles with.
fn print_tsc_line(cpu: usize) -> Result<u64, String> {
    let (calibration, read_overhead) = measure_tsc(cpu)?;
    let kernel_hz = tsc::kernel_hz();
    let (tsc_hz, source) = tsc::chosen_rate(calibration, kernel_hz);
    println!(
        "PEER tsc hz={tsc_hz} source={} calibrated_hz={} clock_step_ns={} kernel_hz={} read_overhead={read_overhead}",
        source.name(),
        calibration.hz,
        calibration.clock_step_ns,
        kernel_hz.unwrap_or(0)
    );
    Ok(tsc_hz)
}

/// The TSC calibration and the cost of one read, measured on `cpu`.
fn measure_tsc(cpu: usize) -> Result<(tsc::Calibration, u64), String> {
    std::thread::spawn(move || {
        os::pin_current_thread(cpu).map_err(|error| format!("pinning to CPU {cpu}: {error}"))?;
        Ok((tsc::calibrate(CALIBRATION_WINDOW), tsc::read_overhead(1000)))
    })
    .join()
    .map_err(|_| "the TSC calibration thread panicked".to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_falls_back_to_the_cpus_we_may_use() {
        let pair = |initiator, responder| CpuPair { initiator, responder };
        assert_eq!(usable_pair(pair(0, 1), &[0, 1, 2]), Some(pair(0, 1)));
        assert_eq!(usable_pair(pair(2, 0), &[0, 1, 2]), Some(pair(2, 0)));
        assert_eq!(usable_pair(pair(0, 1), &[2, 3]), Some(pair(2, 3)));
        assert_eq!(usable_pair(pair(0, 1), &[1]), Some(pair(1, 1)));
        assert_eq!(usable_pair(pair(0, 1), &[]), None);
    }
}
