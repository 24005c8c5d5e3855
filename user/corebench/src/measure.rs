//! The timed operations: Linux's `online` switch, on both systems, and Reef's boot driver.

use rt::cores::{self, CoreTimes};
use rt::tsc;
use std::io;

/// What one figure times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// `0` written to `cpuN/online`: Linux's CPU offline, Reef's stop by the same file.
    Offline,
    /// `1` written to `cpuN/online`.
    Online,
    /// `reef_core` STOP: the core saves its KCB and halts.
    Stop,
    /// `reef_core` START with the image from the boot driver's cache, filled by a start before.
    StartCached,
    /// `reef_core` START with the image read afresh (`UNCACHED`).
    StartUncached,
    /// `reef_core` PARK onto a host running the `multi` image.
    Park,
    /// `reef_core` UNPARK back onto the core's own processor.
    Unpark,
}

impl Figure {
    /// The figures of Reef's boot driver, in the order they are printed.
    pub const BOOT_DRIVER: [Figure; 3] = [Figure::Stop, Figure::StartCached, Figure::StartUncached];
    /// The figures of parking, in the order they are printed.
    pub const PARKING: [Figure; 2] = [Figure::Park, Figure::Unpark];

    /// The name in the result lines.
    pub fn name(self) -> &'static str {
        match self {
            Self::Offline => "offline",
            Self::Online => "online",
            Self::Stop => "stop",
            Self::StartCached => "start-cached",
            Self::StartUncached => "start-uncached",
            Self::Park => "park",
            Self::Unpark => "unpark",
        }
    }

    /// The parts it is reported in: the call as the program timed it, then those of
    /// [`CoreTimes`] the kernel fills for this operation (Barrelfish/DC table 2 splits a start
    /// into the boot driver's part and the target core's).
    pub fn parts(self) -> &'static [Part] {
        match self {
            Self::Offline | Self::Online => &[Part::Call],
            Self::Stop => &[Part::Call, Part::Total, Part::Stop],
            Self::StartCached | Self::StartUncached => &[Part::Call, Part::Total, Part::Driver, Part::Target],
            // Park: until the core left its processor, then until the host first ran it.
            Self::Park => &[Part::Call, Part::Total, Part::Stop, Part::Target],
            // Unpark: until it left the host, the INIT-SIPI, until it ran on its processor.
            Self::Unpark => &[Part::Call, Part::Total, Part::Stop, Part::Driver, Part::Target],
        }
    }
}

/// A part of an operation's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The whole call, timed with the TSC by the program around it.
    Call,
    /// The whole operation as the calling kernel timed it (`CoreTimes::total_ns`).
    Total,
    /// From asking the core to stop until it said it had (`stop_ns`).
    Stop,
    /// The boot driver's part of a start: image, page tables, INIT-SIPI (`driver_ns`).
    Driver,
    /// The target's part: from the STARTUP IPI until its kernel said it runs (`target_ns`).
    Target,
}

impl Part {
    pub fn name(self) -> &'static str {
        match self {
            Self::Call => "call",
            Self::Total => "total",
            Self::Stop => "stop",
            Self::Driver => "driver",
            Self::Target => "target",
        }
    }

    /// This part of `sample` in TSC cycles: the call's own count, or the kernel's nanoseconds
    /// at `tsc_hz`, so every line is summarised alike.
    pub fn cycles(self, sample: &Sample, tsc_hz: u64) -> u64 {
        let nanoseconds = match self {
            Self::Call => return sample.cycles,
            Self::Total => sample.times.total_ns,
            Self::Stop => sample.times.stop_ns,
            Self::Driver => sample.times.driver_ns,
            Self::Target => sample.times.target_ns,
        };
        (u128::from(nanoseconds) * u128::from(tsc_hz) / 1_000_000_000) as u64
    }
}

/// One timed operation: the call's TSC cycles, and what the kernel reported of it (all zero
/// for a write to the `online` file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub cycles: u64,
    pub times: CoreTimes,
}

/// Why a figure has no samples: which one, in which run (`None`: the untimed one before).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub figure: Figure,
    pub run: Option<usize>,
    pub message: String,
}

/// Writes `0` or `1` to `core`'s `online` file, timed, then reads it back: a write that
/// succeeds but leaves the state as it was is an error, not a figure.
fn switch(core: usize, online: bool) -> Result<Sample, String> {
    let path = cores::online_path(core);
    let value = u8::from(online);
    let start = tsc::read();
    let written = cores::set_online(core, online);
    let cycles = tsc::read().wrapping_sub(start);
    written.map_err(|error| format!("writing {value} to {path}: {error}"))?;
    match cores::is_online(core) {
        Ok(state) if state == online => Ok(Sample { cycles, times: CoreTimes::default() }),
        Ok(_) => Err(format!("writing {value} to {path} succeeded, but the file still says {}", 1 - value)),
        Err(error) => Err(format!("reading {path} back after writing {value}: {error}")),
    }
}

/// `runs` rounds of taking `core` offline and back by its `online` file, after one untimed
/// round (the first of Linux's is slower: its per-CPU threads and caches are set up then).
/// Returns the offline samples and the online samples.
pub fn online_file(core: usize, runs: usize) -> Result<[Vec<Sample>; 2], Failure> {
    let mut offline = Vec::with_capacity(runs);
    let mut online = Vec::with_capacity(runs);
    for run in std::iter::once(None).chain((0..runs).map(Some)) {
        let fail = |figure, message| Failure { figure, run, message };
        let down = switch(core, false).map_err(|message| fail(Figure::Offline, message))?;
        let up = switch(core, true).map_err(|message| fail(Figure::Online, message))?;
        if run.is_some() {
            offline.push(down);
            online.push(up);
        }
    }
    Ok([offline, online])
}

/// One `reef_core` operation on `core`, timed. A start that reports the image cached when it
/// was asked not to be, or the other way round, would be counted in the wrong figure, so it
/// is an error.
fn operation(figure: Figure, core: usize, image: Option<&str>) -> Result<Sample, String> {
    let start = tsc::read();
    let result = match figure {
        Figure::Stop => cores::stop(core),
        Figure::StartCached => cores::start(core, image, false),
        Figure::StartUncached => cores::start(core, image, true),
        Figure::Offline | Figure::Online | Figure::Park | Figure::Unpark => {
            unreachable!("not a stop or a start")
        }
    };
    let cycles = tsc::read().wrapping_sub(start);
    let times = result.map_err(|error| format!("reef_core {} of core {core}: {error}", figure.name()))?;
    let expected = u64::from(figure == Figure::StartCached);
    if figure != Figure::Stop && times.image_cached != expected {
        return Err(format!(
            "reef_core {} of core {core} reported image_cached={}, not {expected}",
            figure.name(),
            times.image_cached
        ));
    }
    Ok(Sample { cycles, times })
}

/// Reef's boot driver on `core` with `image`: one untimed stop and uncached start (which fills
/// the cache), then `runs` timed stops each followed by a timed cached start, then `runs`
/// untimed stops each followed by a timed uncached start. Returns the samples of
/// [`Figure::BOOT_DRIVER`], in its order.
pub fn boot_driver(core: usize, image: Option<&str>, runs: usize) -> Result<[Vec<Sample>; 3], Failure> {
    let mut stops = Vec::with_capacity(runs);
    let mut cached = Vec::with_capacity(runs);
    let mut uncached = Vec::with_capacity(runs);
    let step = |figure, run| operation(figure, core, image).map_err(|message| Failure { figure, run, message });
    step(Figure::Stop, None)?;
    step(Figure::StartUncached, None)?;
    for run in 0..runs {
        stops.push(step(Figure::Stop, Some(run))?);
        cached.push(step(Figure::StartCached, Some(run))?);
    }
    for run in 0..runs {
        // Untimed here: the stops were measured above, with the cache in the same state.
        step(Figure::Stop, Some(run))?;
        uncached.push(step(Figure::StartUncached, Some(run))?);
    }
    Ok([stops, cached, uncached])
}

/// Parking `core` on `host` (which runs the `multi` image) and unparking it: one untimed
/// round, then `runs` timed rounds. Returns the samples of [`Figure::PARKING`], in its order.
pub fn parking(core: usize, host: usize, runs: usize) -> Result<[Vec<Sample>; 2], Failure> {
    let mut parks = Vec::with_capacity(runs);
    let mut unparks = Vec::with_capacity(runs);
    let timed = |figure: Figure, run| {
        let start = tsc::read();
        let result = if figure == Figure::Park { cores::park(core, host) } else { cores::unpark(core, None) };
        let cycles = tsc::read().wrapping_sub(start);
        result.map(|times| Sample { cycles, times }).map_err(|error| Failure {
            figure,
            run,
            message: format!("reef_core {} of core {core} (host {host}): {error}", figure.name()),
        })
    };
    for run in std::iter::once(None).chain((0..runs).map(Some)) {
        let park = timed(Figure::Park, run)?;
        let unpark = timed(Figure::Unpark, run)?;
        if run.is_some() {
            parks.push(park);
            unparks.push(unpark);
        }
    }
    Ok([parks, unparks])
}

/// Whether the boot driver answers: a START of a running core is refused with `EALREADY`, and
/// of a stopped one starts it, so either way the core runs afterwards and nothing else
/// changed. The error is the call's: `ENOSYS` on Linux, or on a Reef without `reef_core`.
pub fn probe_boot_driver(core: usize) -> io::Result<()> {
    match cores::start(core, None, false) {
        Err(error) if error.raw_os_error() != Some(libc::EALREADY) => Err(error),
        _ => Ok(()),
    }
}

/// Brings `core` back after a failed figure, so the next figures (and the machine) find it
/// running: by its `online` file, else by the boot driver where there is one. Says what it
/// could not do.
pub fn restore(core: usize, boot_driver: bool) -> Result<(), String> {
    // A figure that failed between a park and its unpark leaves the core parked.
    if boot_driver {
        let _ = cores::unpark(core, None);
    }
    match cores::is_online(core) {
        Ok(true) => Ok(()),
        Ok(false) => cores::set_online(core, true).map_err(|error| format!("core {core} is left offline: {error}")),
        Err(_) if boot_driver => {
            probe_boot_driver(core).map_err(|error| format!("core {core} may be left stopped: {error}"))
        }
        Err(error) => Err(format!("cannot tell whether core {core} is online: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_in_cycles() {
        let sample = Sample {
            cycles: 7,
            times: CoreTimes { total_ns: 3000, stop_ns: 0, driver_ns: 1000, target_ns: 2000, image_cached: 1 },
        };
        // At 2 GHz a nanosecond is two cycles.
        assert_eq!(Part::Call.cycles(&sample, 2_000_000_000), 7);
        assert_eq!(Part::Total.cycles(&sample, 2_000_000_000), 6000);
        assert_eq!(Part::Driver.cycles(&sample, 2_000_000_000), 2000);
        assert_eq!(Part::Target.cycles(&sample, 2_000_000_000), 4000);
        assert_eq!(Part::Stop.cycles(&sample, 2_000_000_000), 0);
        let long = Sample { cycles: 0, times: CoreTimes { total_ns: u64::MAX, ..CoreTimes::default() } };
        assert_eq!(Part::Total.cycles(&long, 1_000_000_000), u64::MAX, "no overflow");
    }

    #[test]
    fn figures_and_their_parts() {
        let names: Vec<&str> = Figure::BOOT_DRIVER.iter().map(|figure| figure.name()).collect();
        assert_eq!(names, ["stop", "start-cached", "start-uncached"]);
        assert_eq!(Figure::Offline.parts(), [Part::Call]);
        assert_eq!(Figure::Stop.parts(), [Part::Call, Part::Total, Part::Stop]);
        assert_eq!(Figure::StartUncached.parts(), [Part::Call, Part::Total, Part::Driver, Part::Target]);
    }

    #[test]
    fn off_reef_the_boot_driver_says_enosys_and_changes_nothing() {
        if rt::on_reef() {
            return;
        }
        assert_eq!(probe_boot_driver(1).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
        let failure = boot_driver(1, None, 3).unwrap_err();
        assert_eq!((failure.figure, failure.run), (Figure::Stop, None), "the first call fails, untimed");
        assert!(failure.message.contains("reef_core stop of core 1") && failure.message.contains("os error 38"));
    }

    #[test]
    fn a_missing_online_file_is_named() {
        // No machine has a CPU 1023 (cpu_set_t's last) with a hotplug switch.
        let failure = online_file(1023, 2).unwrap_err();
        assert_eq!((failure.figure, failure.run), (Figure::Offline, None));
        assert!(failure.message.starts_with("writing 0 to /sys/devices/system/cpu/cpu1023/online: "));
        assert!(restore(1023, false).unwrap_err().contains("cannot tell whether core 1023 is online"));
    }
}
