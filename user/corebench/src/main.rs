//! corebench: stopping and starting a core (Barrelfish/DC table 2), on Reef and Linux alike.
#![doc = include_str!("../README.md")]

mod load;
mod measure;
mod options;
mod output;

use load::Load;
use measure::{Failure, Figure, Sample};
use options::{Mode, Options, USAGE};
use output::About;
use rt::place::Place;
use std::process::ExitCode;
use std::time::Duration;

/// How long the TSC is counted against the monotonic clock.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(50);

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match rt::cli::options_or_exit("corebench", USAGE, options::parse(&arguments)) {
        Ok(Mode::Spin) => load::spin(),
        Ok(Mode::Measure(options)) => options,
        Err(status) => return status,
    };
    match run(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        // One line, on stdout with the figures: the host reads it as the reason for none.
        Err(message) => {
            println!("{}", output::error_line("setup", options.core, &message));
            ExitCode::FAILURE
        }
    }
}

/// Measures every figure `options` asks for and prints its lines; false when one failed.
/// Err: nothing can be measured here, and why.
fn run(options: &Options) -> Result<bool, String> {
    let core = options.core;
    let place = Place::find();
    let reef = matches!(place, Place::Reef { .. });
    if reef && place.core() == Some(core) {
        return Err(format!(
            "corebench runs on core {core}, the core it would stop: start it on another (`on 0 /bin/corebench ...`)"
        ));
    }
    let online_cores = load::online_cores();
    if !reef {
        // Off the CPU it takes offline, which Linux would otherwise move it from mid-figure.
        let home = online_cores.iter().flatten().copied().find(|&cpu| cpu != core).unwrap_or(usize::from(core == 0));
        rt::pin_current_thread(home).map_err(|error| format!("pinning corebench to CPU {home}: {error}"))?;
    }
    let online_file = online_file_ready(core);
    let boot_driver = if reef {
        measure::probe_boot_driver(core).map_err(|error| format!("the boot driver's reef_core: {error}"))
    } else {
        Err("not on Reef".to_string())
    };
    match (&online_file, &boot_driver) {
        (Err(file), Err(driver)) if reef => {
            return Err(format!("this kernel offers no way to stop core {core}: {file}; {driver}"));
        }
        (Err(file), _) if !reef => {
            return Err(format!(
                "{file}: Linux cannot take CPU {core} offline here (no such CPU, a CPU without hotplug such as \
                 CPU 0, or no sysfs)"
            ));
        }
        _ => {}
    }

    let tsc_hz = rt::tsc::calibrate(CALIBRATION_WINDOW);
    let loaded: Vec<usize> = if options.load {
        let others: Vec<usize> = online_cores?.into_iter().filter(|&other| other != core).collect();
        if others.is_empty() {
            return Err(format!("--load: no online core but {core} to load"));
        }
        others
    } else {
        Vec::new()
    };
    let images: Vec<&str> = if reef {
        options.images.iter().map(|image| options::image_name(image.as_deref())).collect()
    } else {
        Vec::new()
    };
    println!("{}", output::config_line(tsc_hz, place, core, options.runs, &loaded, &images));
    let load = if options.load {
        Some(Load::start(&loaded, reef).map_err(|error| format!("starting the load: {error}"))?)
    } else {
        None
    };

    let mut ok = true;
    let about = About { figure: Figure::Offline, target: core, load: options.load, image: "-" };
    match &online_file {
        Ok(()) => match measure::online_file(core, options.runs) {
            Ok(samples) => print_figures(&about, &[Figure::Offline, Figure::Online], &samples, tsc_hz),
            Err(failure) => ok &= report(&about, failure, boot_driver.is_ok()),
        },
        Err(error) => {
            for figure in [Figure::Offline, Figure::Online] {
                let failure = Failure { figure, run: None, message: error.clone() };
                ok &= report(&about, failure, boot_driver.is_ok());
            }
        }
    }
    if let (Some(host), true) = (options.park, reef) {
        if host == core {
            return Err(format!("--park {host}: a core cannot park on itself; name a core running /boot/multi"));
        }
    }
    if !reef {
        for figure in Figure::BOOT_DRIVER {
            println!("{}", output::skip_line(&About { figure, ..about }, "not-on-reef"));
        }
    }
    for image in options.images.iter().filter(|_| reef) {
        let about = About { figure: Figure::Stop, image: options::image_name(image.as_deref()), ..about };
        match &boot_driver {
            Ok(()) => match measure::boot_driver(core, image.as_deref(), options.runs) {
                Ok(samples) => print_figures(&about, &Figure::BOOT_DRIVER, &samples, tsc_hz),
                Err(failure) => ok &= report(&about, failure, true),
            },
            Err(error) => {
                let failure = Failure { figure: Figure::Stop, run: None, message: error.clone() };
                ok &= report(&about, failure, false);
            }
        }
    }
    if let (true, Some(host)) = (reef, options.park) {
        let about = About { figure: Figure::Park, ..about };
        match measure::parking(core, host, options.runs) {
            Ok(samples) => print_figures(&about, &Figure::PARKING, &samples, tsc_hz),
            Err(failure) => ok &= report(&about, failure, true),
        }
    }
    if let Some(load) = load {
        if let Err(error) = load.stop() {
            println!("{}", output::error_line("load", core, &format!("stopping the load: {error}")));
            ok = false;
        }
    }
    println!("{}", output::done_line(core, options.load));
    Ok(ok)
}

/// Whether `core`'s `online` file is there to measure with; a core found offline is brought
/// online first, so every figure starts from a running core.
fn online_file_ready(core: usize) -> Result<(), String> {
    let path = rt::cores::online_path(core);
    match rt::cores::is_online(core) {
        Ok(true) => Ok(()),
        Ok(false) => {
            rt::cores::set_online(core, true).map_err(|error| format!("bringing core {core} online first: {error}"))
        }
        Err(error) => Err(format!("{path}: {error}")),
    }
}

/// Prints every part of each of `figures`, whose samples `samples` holds in the same order.
fn print_figures(about: &About, figures: &[Figure], samples: &[Vec<Sample>], tsc_hz: u64) {
    for (&figure, samples) in figures.iter().zip(samples) {
        for &part in figure.parts() {
            println!("{}", output::part_line(&About { figure, ..*about }, part, samples, tsc_hz));
        }
    }
}

/// Prints a failed figure's error, after bringing the core back for the next figures (what
/// could not be is said on the same line); always false, for `ok &=`.
fn report(about: &About, mut failure: Failure, boot_driver: bool) -> bool {
    if let Err(note) = measure::restore(about.target, boot_driver) {
        failure.message = format!("{}; {note}", failure.message);
    }
    println!("{}", output::failure_line(about, &failure));
    false
}
