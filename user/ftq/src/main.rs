//! ftq: fixed time quantum, the OS noise one core sees (HARE ch. 2), on Reef and Linux alike.
#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod options;
mod output;
mod quanta;
mod summary;

use options::{Options, USAGE};
use rt::place::Place;
use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

/// How long the TSC is counted against the monotonic clock: a quantum's length in cycles is
/// only as right as this rate.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(100);

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match rt::cli::options_or_exit("ftq", USAGE, options::parse(&arguments)) {
        Ok(options) => options,
        Err(status) => return status,
    };
    rt::cli::exit_status("ftq", "FTQ", run(&options))
}

/// Puts the program on `cpu`: pins it on Linux; on Reef it must be there already (a process
/// stays on the core it was started on).
fn go_to(cpu: usize) -> Result<(), String> {
    match Place::find() {
        Place::Reef { core, .. } if core == cpu => Ok(()),
        Place::Reef { core, .. } => {
            Err(format!("ftq runs on core {core}, not {cpu}: start it with `on {cpu}` or `execac {cpu}`"))
        }
        Place::Linux { .. } => rt::pin_current_thread(cpu).map_err(|error| format!("pinning to CPU {cpu}: {error}")),
    }
}

/// `/proc/interrupts` now, or why not.
fn read_interrupts() -> Result<String, String> {
    std::fs::read_to_string("/proc/interrupts").map_err(|error| error.to_string())
}

fn run(options: &Options) -> Result<(), String> {
    if let Some(cpu) = options.cpu {
        go_to(cpu)?;
    }
    let place = Place::find();
    let tsc_hz = rt::tsc::calibrate(CALIBRATION_WINDOW);
    let quantum_cycles = ((u128::from(options.quantum_ns) * u128::from(tsc_hz) + 500_000_000) / 1_000_000_000) as u64;
    let quantum_cycles = quantum_cycles.max(1);
    let configuration = format!(
        "quanta={} quantum_ns={} quantum_cycles={quantum_cycles} work={} warmup={}",
        options.quanta, options.quantum_ns, options.work, options.warmup
    );
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let write_error = |error: io::Error| format!("writing stdout: {error}");
    if !options.quiet {
        writeln!(out, "FTQ-CONFIG {configuration} tsc_hz={tsc_hz} {}", place.fields()).map_err(write_error)?;
        // Said before the run, so a person sees it started; nothing is printed during it.
        out.flush().map_err(write_error)?;
    }
    let mut run = quanta::Quanta::new(options.quanta);
    let before = options.interrupts.then(read_interrupts);
    run.measure(quantum_cycles, options.warmup, options.work);
    let after = options.interrupts.then(read_interrupts);
    let end = Place::find();

    let summary = summary::summarize(&run.counts, &run.starts, run.scheduled_start, run.quantum_cycles)
        .ok_or("no quanta were measured")?;
    let moved = match (place.core(), end.core()) {
        (Some(first), Some(last)) if first != last => format!(" core_end={last}"),
        _ => String::new(),
    };
    writeln!(out, "FTQ {configuration} {} tsc_hz={tsc_hz} {}{moved}", summary.fields(tsc_hz), place.fields())
        .map_err(write_error)?;
    if let Some(prefix) = &options.out {
        output::write_files(prefix, &run).map_err(|error| format!("writing {prefix}.counts and .times: {error}"))?;
    }
    if let (Some(before), Some(after)) = (before, after) {
        for (when, text) in [("before", before), ("after", after)] {
            match text {
                Ok(text) => write!(out, "FTQ-INTERRUPTS {when}\n{text}").map_err(write_error)?,
                Err(error) => writeln!(out, "FTQ-INTERRUPTS {when} unavailable: {error}").map_err(write_error)?,
            }
        }
        writeln!(out, "FTQ-INTERRUPTS end").map_err(write_error)?;
    }
    if options.dump {
        output::dump(&mut out, &run).map_err(write_error)?;
    }
    out.flush().map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_end_to_end() {
        let prefix = std::env::temp_dir().join(format!("ftq-main-{}", std::process::id()));
        let prefix = prefix.to_str().unwrap().to_string();
        let options = Options {
            quanta: 50,
            quantum_ns: 20_000,
            warmup: 5,
            work: 4,
            out: Some(prefix.clone()),
            dump: false,
            interrupts: false,
            quiet: true,
            cpu: None,
        };
        run(&options).unwrap();
        let counts = std::fs::read_to_string(format!("{prefix}.counts")).unwrap();
        assert_eq!(counts.lines().count(), 50);
        assert!(counts.lines().all(|line| line.parse::<u32>().is_ok()));
        let _ = std::fs::remove_file(format!("{prefix}.counts"));
        let _ = std::fs::remove_file(format!("{prefix}.times"));
    }
}
