//! The lines corebench prints: its configuration, one line per figure part, skips, errors,
//! and the end; `key=value` words after a tag, as the host's parser reads every benchmark's.

use crate::measure::{Failure, Figure, Part, Sample};
use rt::place::Place;

/// What one line is about: which figure, on which core, loaded or not, with which image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct About<'a> {
    pub figure: Figure,
    pub target: usize,
    pub load: bool,
    /// The image a boot-driver figure started the core with (`booted` or its path); `-` for
    /// the `online` file, where the kernel chooses.
    pub image: &'a str,
}

impl About<'_> {
    fn fields(&self) -> String {
        format!(
            "figure={} target={} load={} image={}",
            self.figure.name(),
            self.target,
            if self.load { "yes" } else { "no" },
            self.image
        )
    }
}

/// The first line: the TSC rate every figure uses, where corebench runs (`core=`), the core
/// it stops and starts, the cores loaded (`-`: none) and the images (`-` off Reef).
pub fn config_line(tsc_hz: u64, place: Place, target: usize, runs: usize, loaded: &[usize], images: &[&str]) -> String {
    let list = |items: Vec<String>| if items.is_empty() { "-".to_string() } else { items.join(",") };
    format!(
        "COREBENCH-CONFIG tsc_hz={tsc_hz} {} target={target} runs={runs} load={} loaded={} images={}",
        place.fields(),
        if loaded.is_empty() { "no" } else { "yes" },
        list(loaded.iter().map(usize::to_string).collect()),
        list(images.iter().map(|image| image.to_string()).collect())
    )
}

/// The line of one part of a figure, from its samples; a kernel part that was 0 in every run
/// is a skip (the kernel did not report it), and no samples at all an error.
pub fn part_line(about: &About, part: Part, samples: &[Sample], tsc_hz: u64) -> String {
    let mut cycles: Vec<u64> = samples.iter().map(|sample| part.cycles(sample, tsc_hz)).collect();
    if part != Part::Call && cycles.iter().all(|&value| value == 0) && !cycles.is_empty() {
        return format!("COREBENCH-SKIP {} part={} reason=not-reported", about.fields(), part.name());
    }
    let Some(summary) = samples::summarize(&mut cycles) else {
        return format!("COREBENCH-ERROR {} part={}: no runs", about.fields(), part.name());
    };
    format!(
        "COREBENCH {} part={} runs={} tsc_hz={tsc_hz} {}",
        about.fields(),
        part.name(),
        summary.count,
        samples::CycleFields { summary: &summary, tsc_hz }
    )
}

/// The error line of a figure that failed; `about.figure` is replaced by the one that did.
pub fn failure_line(about: &About, failure: &Failure) -> String {
    let about = About { figure: failure.figure, ..*about };
    let run = failure.run.map_or("warm-up".to_string(), |run| (run + 1).to_string());
    format!("COREBENCH-ERROR {} run={run}: {}", about.fields(), failure.message.replace('\n', " "))
}

pub fn skip_line(about: &About, reason: &str) -> String {
    format!("COREBENCH-SKIP {} reason={reason}", about.fields())
}

/// An error that is no one figure's (the load, the machine): `what` names it.
pub fn error_line(what: &str, target: usize, message: &str) -> String {
    format!("COREBENCH-ERROR figure={what} target={target}: {}", message.replace('\n', " "))
}

pub fn done_line(target: usize, load: bool) -> String {
    format!("COREBENCH-DONE target={target} load={}", if load { "yes" } else { "no" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rt::cores::CoreTimes;

    const ABOUT: About = About { figure: Figure::StartCached, target: 1, load: true, image: "booted" };

    fn sample(cycles: u64, driver_ns: u64) -> Sample {
        Sample { cycles, times: CoreTimes { driver_ns, ..CoreTimes::default() } }
    }

    #[test]
    fn the_lines_of_a_figure() {
        let samples = [sample(3000, 0), sample(1000, 0), sample(2000, 0)];
        assert_eq!(
            part_line(&ABOUT, Part::Call, &samples, 1_000_000_000),
            "COREBENCH figure=start-cached target=1 load=yes image=booted part=call runs=3 tsc_hz=1000000000 \
             unit=ns median_ns=2000.0 p5_ns=1000.0 p95_ns=3000.0 min_ns=1000.0 max_ns=3000.0 median_cycles=2000 \
             p5_cycles=1000 p95_cycles=3000"
        );
        assert_eq!(
            part_line(&ABOUT, Part::Target, &samples, 1_000_000_000),
            "COREBENCH-SKIP figure=start-cached target=1 load=yes image=booted part=target reason=not-reported"
        );
        let driver = [sample(0, 500), sample(0, 1500)];
        // At 2 GHz: 1000 and 3000 cycles, whose median is 2000 cycles, 1000 ns.
        let line = part_line(&ABOUT, Part::Driver, &driver, 2_000_000_000);
        assert!(line.contains(" part=driver runs=2 ") && line.contains(" median_ns=1000.0 "), "{line}");
        assert!(line.contains(" median_cycles=2000 p5_cycles=1000 p95_cycles=3000"), "{line}");
        assert!(part_line(&ABOUT, Part::Call, &[], 1).starts_with("COREBENCH-ERROR "));
    }

    #[test]
    fn errors_skips_and_the_configuration() {
        let failure = Failure { figure: Figure::Online, run: Some(2), message: "writing 1:\nEIO".into() };
        let about = About { figure: Figure::Offline, target: 2, load: false, image: "-" };
        assert_eq!(
            failure_line(&about, &failure),
            "COREBENCH-ERROR figure=online target=2 load=no image=- run=3: writing 1: EIO"
        );
        let warm_up = Failure { run: None, ..failure };
        assert!(failure_line(&about, &warm_up).contains(" run=warm-up: "));
        assert_eq!(
            skip_line(&About { figure: Figure::Stop, ..about }, "not-on-reef"),
            "COREBENCH-SKIP figure=stop target=2 load=no image=- reason=not-on-reef"
        );
        assert_eq!(error_line("load", 1, "spawning: ENOSYS"), "COREBENCH-ERROR figure=load target=1: spawning: ENOSYS");
        assert_eq!(done_line(1, true), "COREBENCH-DONE target=1 load=yes");
        assert_eq!(
            config_line(5, Place::Reef { core: 0, instances: 4 }, 1, 20, &[0, 2, 3], &["booted", "/boot/rt"]),
            "COREBENCH-CONFIG tsc_hz=5 os=reef core=0 target=1 runs=20 load=yes loaded=0,2,3 images=booted,/boot/rt"
        );
        assert_eq!(
            config_line(5, Place::Linux { cpu: Some(0) }, 1, 3, &[], &[]),
            "COREBENCH-CONFIG tsc_hz=5 os=linux core=0 target=1 runs=3 load=no loaded=- images=-"
        );
    }
}
