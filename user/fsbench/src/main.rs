//! fsbench: file benchmarks (busybox dd, ls -l, pipes, any program run), Reef and Linux.
#![doc = include_str!("../README.md")]

mod bench;
mod counts;
mod options;
mod os;

use counts::{Meter, Tally};
use options::{Options, Request, Work, USAGE};
use rt::place::Place;
use std::process::ExitCode;

/// The path to start `fsbench pipe-reader` from: how we were started, if that is a path.
fn own_path() -> String {
    std::env::args().next().filter(|path| path.starts_with('/')).unwrap_or_else(|| "/bin/fsbench".into())
}

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match options::parse(&arguments) {
        Ok(Request::Run(options)) => options,
        Ok(Request::PipeReader { bytes }) => {
            return match bench::pipe_reader(bytes) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("fsbench pipe-reader: {message}");
                    ExitCode::FAILURE
                }
            };
        }
        Ok(Request::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("fsbench: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let name = options.work.name();
    let mut place = Place::find();
    match (place, options.pin) {
        (Place::Linux { .. }, Some(cpu)) => {
            if let Err(error) = rt::pin_current_thread(cpu) {
                println!("FSBENCH-ERROR {name}: pinning to CPU {cpu}: {error}");
                return ExitCode::FAILURE;
            }
            place = Place::find();
        }
        (Place::Reef { core, .. }, Some(wanted)) if core != wanted => {
            println!("FSBENCH-NOTE {name}: asked for core {wanted}, running on core {core}");
        }
        _ => {}
    }
    println!("{}", config_line(name, place, os::tsc_hz()));
    let meter = match Meter::calibrate() {
        Some(Ok(meter)) => Some(meter),
        Some(Err(why)) => {
            println!("FSBENCH-NOTE {name}: no message counts: {why}");
            None
        }
        None => None,
    };
    if run(&options, place, meter) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs every size of the benchmark, printing each sample and summary, or the error of a size
/// that failed (the other sizes still run), and its message counts where `meter` reads them;
/// whether all succeeded.
fn run(options: &Options, place: Place, meter: Option<Meter>) -> bool {
    let core = place.core().map_or_else(|| "unknown".to_string(), |core| core.to_string());
    let null = || bench::open_null();
    let mut succeeded = true;
    let mut report = |figure: String, result: Result<Vec<u64>, String>, extra: &dyn Fn(u64) -> String| match result {
        Ok(mut samples) => {
            for &ns in &samples {
                println!("FSBENCH {figure} ns={ns}{}", extra(ns));
            }
            if let Some(line) = summary_line(&figure, &mut samples) {
                println!("{line}");
            }
        }
        Err(message) => {
            println!("FSBENCH-ERROR {figure}: {}", message.replace('\n', " "));
            succeeded = false;
        }
    };
    // What one operation of each figure is, for its counts: a block of dd (a read and a
    // write), a file listed, a 64 KiB write to the pipe, a run of the program.
    let print_counts = |figure: &str, tally: &Tally, ops_per_sample: u64| match tally.line(figure, ops_per_sample) {
        Ok(Some(line)) => println!("{line}"),
        Ok(None) => {}
        Err(why) => println!("FSBENCH-NOTE {}: no message counts for {figure}: {why}", options.work.name()),
    };
    match &options.work {
        Work::Dd(sizes) => {
            for &mib in sizes {
                let mut tally = Tally::new(meter);
                let result = null().and_then(|null| bench::dd(mib, options.repeat, &null, &mut tally));
                let figure = format!("dd mib={mib} core={core}");
                report(figure.clone(), result, &|_| String::new());
                print_counts(&figure, &tally, (mib << 20) / bench::DD_BLOCK);
            }
        }
        Work::Ls(counts) => {
            for &files in counts {
                let mut tally = Tally::new(meter);
                let result = null().and_then(|null| bench::ls(files, options.repeat, &null, &mut tally));
                let figure = format!("ls files={files} core={core}");
                report(figure.clone(), result, &|_| String::new());
                print_counts(&figure, &tally, files);
            }
        }
        &Work::Pipe { mib, cross } => {
            let reader = match (place, cross) {
                (Place::Reef { .. }, Some(core)) => Ok(bench::Reader::Spawn { core }),
                (Place::Reef { .. }, None) => Ok(bench::Reader::Fork { pin: None }),
                // On Linux the writer stays where it is and the reader goes where it is told.
                (Place::Linux { cpu: Some(cpu) }, _) => rt::pin_current_thread(cpu)
                    .map(|()| bench::Reader::Fork { pin: Some(cross.unwrap_or(cpu)) })
                    .map_err(|error| format!("pinning to CPU {cpu}: {error}")),
                (Place::Linux { cpu: None }, _) => Err("getcpu failed: cannot pin the writer and the reader".into()),
            };
            let reader_core = cross.map_or_else(|| core.clone(), |core| core.to_string());
            let figure =
                format!("pipe mib={mib} cross={} core={core} reader_core={reader_core}", u8::from(cross.is_some()));
            let mut tally = Tally::new(meter);
            let result = reader.and_then(|reader| bench::pipe(mib, options.repeat, reader, &own_path(), &mut tally));
            let throughput = |ns: u64| format!(" mb_per_s={:.1}", (mib << 20) as f64 * 1e3 / ns.max(1) as f64);
            report(figure.clone(), result, &throughput);
            print_counts(&figure, &tally, (mib << 20) / bench::PIPE_CHUNK as u64);
        }
        Work::Run { name, command } => {
            // Each sample carries its number: sample 0, the cold one, is a figure of its own.
            let figure = format!("run name={name} core={core}");
            let (mut cold, mut warm) = (Tally::new(meter), Tally::new(meter));
            match null().and_then(|null| bench::run(command, options.repeat, &null, [&mut cold, &mut warm])) {
                Ok(samples) => {
                    for (sample, ns) in samples.iter().enumerate() {
                        println!("FSBENCH run name={name} sample={sample} core={core} ns={ns}");
                    }
                    if let Some(line) = run_summary_line(&figure, &samples) {
                        println!("{line}");
                    }
                }
                Err(message) => {
                    println!("FSBENCH-ERROR {figure}: {}", message.replace('\n', " "));
                    succeeded = false;
                }
            }
            print_counts(&format!("{figure} samples=cold"), &cold, 1);
            print_counts(&format!("{figure} samples=warm"), &warm, 1);
        }
    }
    succeeded
}

fn config_line(name: &str, place: Place, tsc_hz: u64) -> String {
    let where_ = match place {
        Place::Reef { instances, .. } => format!("{} instances={instances}", place.fields()),
        Place::Linux { .. } => place.fields(),
    };
    format!("FSBENCH-CONFIG {name} {where_} clock=monotonic tsc_hz={tsc_hz}")
}

/// The `FSBENCH-SUMMARY` line of `samples` (sorted in place); `None` when there are none.
fn summary_line(figure: &str, samples: &mut [u64]) -> Option<String> {
    let summary = samples::summarize(samples)?;
    Some(format!(
        "FSBENCH-SUMMARY {figure} n={} median_ns={:.0} p5_ns={} p95_ns={} min_ns={} max_ns={}",
        summary.count, summary.median, summary.p5, summary.p95, summary.min, summary.max
    ))
}

/// The `FSBENCH-SUMMARY` line of a `run`: its cold sample (the first) and the summary of the
/// warm ones (the rest); `None` without a warm sample.
fn run_summary_line(figure: &str, samples: &[u64]) -> Option<String> {
    let (cold, warm) = samples.split_first()?;
    summary_line(&format!("{figure} cold_ns={cold} warm"), &mut warm.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_lines() {
        assert_eq!(
            config_line("dd", Place::Reef { core: 1, instances: 4 }, 2_000_000_000),
            "FSBENCH-CONFIG dd os=reef core=1 instances=4 clock=monotonic tsc_hz=2000000000"
        );
        assert_eq!(
            config_line("ls", Place::Linux { cpu: None }, 5),
            "FSBENCH-CONFIG ls os=linux core=unknown clock=monotonic tsc_hz=5"
        );
    }

    #[test]
    fn the_summary_line() {
        let mut samples = [30, 10, 20, 40];
        assert_eq!(
            summary_line("dd mib=1 core=0", &mut samples).unwrap(),
            "FSBENCH-SUMMARY dd mib=1 core=0 n=4 median_ns=25 p5_ns=10 p95_ns=40 min_ns=10 max_ns=40"
        );
        assert!(summary_line("x", &mut []).is_none());
    }

    #[test]
    fn the_run_summary_keeps_the_cold_sample_apart() {
        assert_eq!(
            run_summary_line("run name=bash core=1", &[900, 30, 10, 20]).unwrap(),
            "FSBENCH-SUMMARY run name=bash core=1 cold_ns=900 warm n=3 median_ns=20 p5_ns=10 p95_ns=30 min_ns=10 \
             max_ns=30"
        );
        assert!(run_summary_line("run name=x core=0", &[5]).is_none(), "no warm sample");
    }
}
