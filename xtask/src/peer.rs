//! `cargo xtask peer msg`: the messaging benchmarks on a Linux guest in Reef's QEMU setup.
//!
//! The Linux peer is Debian's own kernel and busybox (fetched with `apt-get download`, never
//! installed) plus the `linux-bench` program built static, packed into an initramfs and booted
//! with the QEMU flags of [`Machine::command`], so the figures sit beside Reef's.

use crate::qemu::{Accel, Machine};
use crate::tools;
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The metapackage that names Debian's current kernel for amd64.
const KERNEL_METAPACKAGE: &str = "linux-image-amd64";
/// Busybox linked statically: a whole userland in one file with no loader or libraries.
const BUSYBOX_PACKAGE: &str = "busybox-static";
/// The benchmark names, in the order linux-bench runs them.
const BENCHMARKS: [&str; 5] = ["cacheline", "urpc", "pipe", "eventfd", "futex"];
/// What linux-bench prints last, and `/init` after it.
const DONE_MARKER: &str = "PEER done";
/// What `/init` prints first: the kernel got as far as user space.
const INIT_MARKER: &str = "PEER boot";
/// The results file, under the workspace root.
const RESULTS_FILE: &str = "results/linux-msg.json";
/// Set to 1 to make [`linux_msg_results`] reuse `results/linux-msg.json` when it matches.
const REUSE_VARIABLE: &str = "REEF_PEER_REUSE";
/// The kernel command line. `console=ttyS0` sends the console (and `/init`'s output) to the
/// serial port QEMU gives us on stdio; `quiet` keeps boot messages out of the results.
/// [`kernel_arguments`] adds the TSC rate.
const KERNEL_ARGUMENTS: &str = "console=ttyS0 quiet";
/// How long the guest may take to reach `/init`: about 8 s under TCG here.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the whole guest run may take, before the per-round allowance.
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// What to run.
#[derive(Clone, Debug, PartialEq)]
struct Options {
    accel: Accel,
    /// `-smp` of the guest; the benchmarks use CPUs 0 and 1.
    cores: usize,
    /// Timed round trips per benchmark (`linux-bench --rounds`).
    rounds: usize,
    /// Print the table of the existing results file instead of running (when it matches).
    reuse: bool,
}

/// `cargo xtask peer <what>`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    match arguments.first().map(String::as_str) {
        Some("msg") => {
            let options = parse_options(&arguments[1..])?;
            let results = results(&options)?;
            print_table(&results);
            Ok(0)
        }
        Some(other) => Err(format!("unknown peer benchmark `{other}`: known is msg")),
        None => Err("which peer benchmark? `cargo xtask peer msg`".into()),
    }
}

/// The Linux figures for `bench msg --vs-linux`: runs the whole peer (download on first use,
/// build, boot, parse) with the default 10 000 round trips per benchmark and writes
/// `results/linux-msg.json`. With `REEF_PEER_REUSE=1` in the environment, an existing results
/// file for the same accelerator and core count is returned instead of running again.
pub fn linux_msg_results(accel: Accel, cores: usize) -> Result<Value, String> {
    let reuse = std::env::var(REUSE_VARIABLE).is_ok_and(|value| value == "1");
    results(&Options { accel, cores, rounds: 10_000, reuse })
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options { accel: Accel::detect(), cores: 2, rounds: 10_000, reuse: false };
    let mut position = 0;
    while position < arguments.len() {
        let flag = arguments[position].as_str();
        let value = arguments.get(position + 1).map(String::as_str);
        match flag {
            "--cores" => {
                options.cores = value
                    .and_then(|text| text.parse().ok())
                    .filter(|cores| (2..=64).contains(cores))
                    .ok_or("--cores takes a number from 2 to 64 (the benchmarks use CPUs 0 and 1)")?;
            }
            "--runs-per-bench" => {
                options.rounds = value
                    .and_then(|text| text.parse().ok())
                    .filter(|&rounds| rounds > 0)
                    .ok_or("--runs-per-bench takes a number of round trips above 0")?;
            }
            "--accel" => options.accel = Accel::parse(value.ok_or("--accel needs kvm or tcg")?)?,
            "--reuse" => {
                options.reuse = true;
                position += 1;
                continue;
            }
            other => return Err(format!("unknown option `{other}` for peer msg: see `cargo xtask help`")),
        }
        position += 2;
    }
    Ok(options)
}

/// Reuses the results file if asked and it matches, else runs the peer and writes it.
fn results(options: &Options) -> Result<Value, String> {
    let path = tools::root().join(RESULTS_FILE);
    if options.reuse {
        match reusable(&path, options) {
            Ok(results) => {
                eprintln!("xtask: reusing {}", path.display());
                return Ok(results);
            }
            Err(reason) => eprintln!("xtask: not reusing {}: {reason}; running the Linux peer", path.display()),
        }
    }
    let start = Instant::now();
    let mut results = run_peer(options)?;
    results["wall_seconds"] = json!(round_to(start.elapsed().as_secs_f64(), 1));
    std::fs::create_dir_all(path.parent().expect("results/")).map_err(|e| format!("creating results/: {e}"))?;
    std::fs::write(&path, serde_json::to_string_pretty(&results).expect("json") + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    eprintln!("xtask: wrote {} (whole run {:.1} s)", path.display(), start.elapsed().as_secs_f64());
    Ok(results)
}

/// The results file, if it was measured with the same accelerator, cores and round count.
fn reusable(path: &Path, options: &Options) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let results: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let wanted = (options.accel.name(), options.cores as u64, options.rounds as u64);
    let found = (
        results["accelerator"].as_str().unwrap_or_default(),
        results["guest_cores"].as_u64().unwrap_or_default(),
        results["rounds"].as_u64().unwrap_or_default(),
    );
    if found != wanted {
        return Err(format!("it has (accelerator, cores, rounds) = {found:?}, not {wanted:?}"));
    }
    Ok(results)
}

/// Fetches, builds, boots and parses: the whole peer run.
fn run_peer(options: &Options) -> Result<Value, String> {
    tools::ensure_qemu()?;
    let cache = tools::root().join("target/peer");
    std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let kernel = fetch_kernel(&cache)?;
    let busybox = fetch_busybox(&cache)?;
    eprintln!(
        "xtask: Linux peer: {} {} ({}), {} {}",
        kernel.package,
        kernel.version,
        kernel.file.display(),
        busybox.package,
        busybox.version
    );
    let bench = build_linux_bench()?;
    let bench_arguments = format!("--rounds {}", options.rounds);
    let initramfs = cache.join("initramfs.cpio");
    let image = initramfs_image(&read(&busybox.file)?, &read(&bench)?, &init_script(&bench_arguments));
    std::fs::write(&initramfs, image).map_err(|e| format!("writing {}: {e}", initramfs.display()))?;

    let mut machine = Machine::new(options.cores);
    machine.accel = options.accel;
    machine.kernel_args = kernel_arguments(host_tsc_khz(&bench));
    // Blocking round trips take ~70 µs each under TCG; allow 5 ms for every round trip of
    // the five benchmarks on top, which no working run comes near.
    machine.timeout = RUN_TIMEOUT + Duration::from_millis(5 * 5 * (options.rounds as u64 + 1_000));
    let reef_machine = machine_type(&machine.command(&kernel.file, false)).unwrap_or_default();

    eprintln!("xtask: booting Linux on {} cores ({}, -M {reef_machine})", options.cores, options.accel.name());
    let load_before = host_load_average();
    let (guest, used_machine, fallback_reason) = boot_linux(&machine, &kernel.file, &initramfs, &cache)?;
    let load_after = host_load_average();
    if guest.done_after.is_none() {
        return Err(format!(
            "the Linux guest did not finish ({}); serial log:\n{}",
            guest.failure_summary(),
            tail(&guest.serial, 60)
        ));
    }
    let report = parse_report(&guest.serial).map_err(|e| format!("{e}; serial log:\n{}", tail(&guest.serial, 60)))?;
    let host_cpus = std::thread::available_parallelism().map_or(0, usize::from);
    // The load before QEMU starts is the others' (after, it counts our vCPU threads too).
    if options.accel == Accel::Tcg && load_before > host_cpus.saturating_sub(options.cores) as f64 + 0.5 {
        eprintln!(
            "xtask: note: host load average {load_before:.1} -> {load_after:.1} on {host_cpus} CPUs: other work \
             competed with the {} vCPU threads, which inflates TCG figures, the blocking ones most",
            options.cores
        );
    }
    Ok(json!({
        "benchmark": "linux-msg",
        "what": "round trips between two threads of a Linux guest pinned to two CPUs, timed with RDTSC \
                 by the initiator; cacheline and urpc poll, pipe, eventfd and futex block",
        "os": "linux",
        "accelerator": options.accel.name(),
        "machine": used_machine,
        "reef_machine": reef_machine,
        "machine_fallback": fallback_reason,
        "guest_cores": options.cores,
        "memory_mib": machine.memory_mib,
        "core_pair": { "initiator": report.initiator, "responder": report.responder },
        "tsc_hz": report.tsc_hz,
        "tsc": {
            "hz": report.tsc_hz,
            "source": report.tsc_source,
            "calibrated_hz": report.tsc_calibrated_hz,
            "kernel_hz": report.tsc_kernel_hz,
            "clock_step_ns": report.clock_step_ns,
            "read_overhead_cycles": report.tsc_read_overhead,
        },
        "kernel_package": kernel.package,
        "kernel_version": kernel.version,
        "kernel_release": report.kernel_release,
        "kernel_clocksource": report.clocksource,
        "kernel_command_line": machine.kernel_args,
        "busybox_version": busybox.version,
        "rounds": options.rounds,
        "warmup": report.warmup,
        "boot_to_init_seconds": guest.init_after.map(|t| round_to(t.as_secs_f64(), 2)),
        "qemu_seconds": round_to(guest.elapsed.as_secs_f64(), 1),
        "host": { "cpus": host_cpus, "load_average_before": load_before, "load_average_after": load_after },
        "benchmarks": report.benchmarks,
        "skipped": report.skipped,
    }))
}

/// How many times Reef's machine type gets to bring the kernel to `/init` before the
/// fallback: once more after a first failure, in case that one was a fluke of a busy host.
const REEF_MACHINE_TRIES: usize = 2;

/// Boots the guest on Reef's machine type, or on `-M pc` if that cannot reach `/init`
/// (saying why); returns the run, the machine type used and the reason for a fallback. The
/// serial log of each failed boot is kept in `cache` for a look.
fn boot_linux(
    machine: &Machine,
    kernel: &Path,
    initramfs: &Path,
    cache: &Path,
) -> Result<(GuestRun, String, Option<String>), String> {
    let reef_machine = machine_type(&machine.command(kernel, false)).unwrap_or_default();
    let mut failures = Vec::new();
    for attempt in 1..=REEF_MACHINE_TRIES {
        let guest = run_guest(machine, kernel, initramfs, None)?;
        if guest.init_after.is_some() {
            return Ok((guest, reef_machine, None));
        }
        let log = cache.join(format!("failed-boot-{attempt}.log"));
        let _ = std::fs::write(&log, &guest.serial);
        eprintln!(
            "xtask: -M {reef_machine} did not reach /init ({}), log in {}; last lines:\n{}",
            guest.failure_summary(),
            log.display(),
            tail(&guest.serial, 10)
        );
        failures.push(guest.failure_summary());
    }
    let reason =
        format!("-M {reef_machine} did not reach /init in {REEF_MACHINE_TRIES} tries: {}", failures.join("; "));
    eprintln!("xtask: falling back to -M pc");
    let guest = run_guest(machine, kernel, initramfs, Some("pc"))?;
    Ok((guest, "pc".to_string(), Some(reason)))
}

/// The host's one-minute load average (TCG figures depend on the host CPUs being free).
fn host_load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The host's TSC rate in kHz, from `linux-bench --tsc` run on the host; `None` (with a
/// note) if that fails. Under TCG the guest's RDTSC returns the host's counter, and KVM gives
/// the guest the host's rate, so this is the guest's rate too.
fn host_tsc_khz(linux_bench: &Path) -> Option<u64> {
    let output = Command::new(linux_bench).arg("--tsc").output();
    let text = output.as_ref().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let hz = text
        .lines()
        .find(|line| line.starts_with("PEER tsc "))
        .and_then(|line| field(&fields(line), "hz")?.parse::<u64>().ok())
        .filter(|&hz| hz > 0);
    if hz.is_none() {
        eprintln!("xtask: note: could not measure the host's TSC rate ({output:?}); the guest calibrates its own");
    }
    hz.map(|hz| hz / 1000)
}

/// The guest's command line: [`KERNEL_ARGUMENTS`], plus `tsc_early_khz` when the TSC rate is
/// known. Without it the kernel calibrates the TSC against the PIT, which fails now and then
/// when the host deschedules a vCPU thread during the calibration loop ("Fast TSC calibration
/// failed"); on microvm, which has no HPET or ACPI PM timer to try next, the boot then hangs.
fn kernel_arguments(tsc_khz: Option<u64>) -> String {
    match tsc_khz {
        Some(khz) => format!("{KERNEL_ARGUMENTS} tsc_early_khz={khz}"),
        None => KERNEL_ARGUMENTS.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

/// The last `count` lines of `text`.
fn tail(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Debian packages

/// One unpacked Debian package file in the cache.
struct Unpacked {
    package: String,
    version: String,
    /// The file of the package we need (the kernel image, the busybox binary).
    file: PathBuf,
}

/// Runs an apt or dpkg tool and returns its stdout; a missing tool or a failure is one line.
fn run_tool(command: &mut Command) -> Result<String, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            format!("`{program}` is missing: the Linux peer needs Debian's apt-get, apt-cache and dpkg-deb")
        } else {
            format!("cannot start `{program}`: {error}")
        }
    })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let errors = String::from_utf8_lossy(&output.stderr);
    // apt's own one-line reason ("E: ...") when it gave one.
    let reason = errors
        .lines()
        .rev()
        .find(|line| line.starts_with("E:"))
        .or_else(|| errors.lines().rev().find(|line| !line.trim().is_empty()))
        .unwrap_or("no message");
    let arguments: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    Err(format!("`{program} {}` failed ({}): {}", arguments.join(" "), output.status, reason.trim()))
}

/// The package `linux-image-amd64` depends on, from `apt-cache depends` output such as
/// `linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n`.
fn kernel_dependency(depends_output: &str) -> Option<String> {
    depends_output.lines().find_map(|line| {
        let name = line.trim().trim_start_matches('|').strip_prefix("Depends:")?.trim();
        (name.starts_with("linux-image-") && !name.starts_with('<')).then(|| name.to_string())
    })
}

/// Resolves the real kernel package of the metapackage.
fn resolve_kernel_package() -> Result<String, String> {
    let output = run_tool(Command::new("apt-cache").args(["depends", KERNEL_METAPACKAGE]))?;
    kernel_dependency(&output).ok_or_else(|| format!("`apt-cache depends {KERNEL_METAPACKAGE}` names no kernel"))
}

/// Where a package is unpacked in the cache, and its version note.
fn unpack_directory(cache: &Path, package: &str) -> PathBuf {
    cache.join(package)
}

/// The cached copy of `package` if it was unpacked before: its version note and `file`.
fn cached(cache: &Path, package: &str, find_file: impl Fn(&Path) -> Option<PathBuf>) -> Option<Unpacked> {
    let directory = unpack_directory(cache, package);
    let version = std::fs::read_to_string(directory.join("VERSION")).ok()?;
    let file = find_file(&directory)?;
    Some(Unpacked { package: package.to_string(), version: version.trim().to_string(), file })
}

/// `apt-get download package` into `cache/debs`, running `apt-get update` once if the first
/// try fails (a fresh machine has no package lists); returns the .deb path.
fn download(cache: &Path, package: &str) -> Result<PathBuf, String> {
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| format!("creating {}: {e}", debs.display()))?;
    let debs_of_package = || -> Vec<PathBuf> {
        let prefix = format!("{package}_");
        std::fs::read_dir(&debs)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                name.starts_with(&prefix) && name.ends_with(".deb")
            })
            .collect()
    };
    for stale in debs_of_package() {
        let _ = std::fs::remove_file(stale);
    }
    eprintln!("xtask: apt-get download {package}");
    let download = || run_tool(Command::new("apt-get").args(["download", "-q", package]).current_dir(&debs));
    if let Err(first) = download() {
        eprintln!("xtask: {first}; running apt-get update and trying again");
        run_tool(Command::new("apt-get").args(["update", "-q"]))?;
        download()?;
    }
    debs_of_package().into_iter().next().ok_or_else(|| format!("apt-get download {package} left no .deb"))
}

/// The `Version` field of a .deb.
fn deb_version(deb: &Path) -> Result<String, String> {
    Ok(run_tool(Command::new("dpkg-deb").arg("-f").arg(deb).arg("Version"))?.trim().to_string())
}

/// Unpacks only `./boot/vmlinuz-*` of a kernel .deb: `dpkg-deb -x` would also write its
/// ~400 MB of modules, which an initramfs boot without modules never reads.
fn unpack_kernel_image(deb: &Path, directory: &Path) -> Result<(), String> {
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start dpkg-deb: {e}"))?;
    let archive = dpkg.stdout.take().expect("piped");
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(directory)
        .args(["--wildcards", "./boot/vmlinuz-*"])
        .stdin(archive)
        .status()
        .map_err(|e| format!("cannot start tar: {e}"))?;
    let dpkg = dpkg.wait().map_err(|e| e.to_string())?;
    if dpkg.success() && tar.success() {
        Ok(())
    } else {
        Err(format!("unpacking {}: dpkg-deb {dpkg}, tar {tar}", deb.display()))
    }
}

/// Downloads `package` and unpacks it with `unpack` into its cache directory, writing the
/// version note last so that an interrupted unpack is redone.
fn fetch(
    cache: &Path,
    package: &str,
    unpack: impl Fn(&Path, &Path) -> Result<(), String>,
    find_file: impl Fn(&Path) -> Option<PathBuf>,
) -> Result<Unpacked, String> {
    if let Some(unpacked) = cached(cache, package, &find_file) {
        return Ok(unpacked);
    }
    let deb = download(cache, package)?;
    let version = deb_version(&deb)?;
    let directory = unpack_directory(cache, package);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).map_err(|e| format!("creating {}: {e}", directory.display()))?;
    unpack(&deb, &directory)?;
    std::fs::write(directory.join("VERSION"), format!("{version}\n")).map_err(|e| e.to_string())?;
    // The unpacked file is the cache; the 70 MB kernel .deb is not needed again.
    let _ = std::fs::remove_file(&deb);
    cached(cache, package, &find_file).ok_or_else(|| format!("{package} {version} holds no file we can boot or run"))
}

/// The kernel image in an unpacked kernel package.
fn find_kernel_image(directory: &Path) -> Option<PathBuf> {
    let mut images: Vec<PathBuf> = std::fs::read_dir(directory.join("boot"))
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("vmlinuz-")))
        .collect();
    images.sort();
    images.pop()
}

/// Debian's kernel: the one the metapackage names now, or, when apt cannot say (no package
/// lists, no network), the one already in the cache.
fn fetch_kernel(cache: &Path) -> Result<Unpacked, String> {
    let package = match resolve_kernel_package() {
        Ok(package) => package,
        Err(first) => {
            let cached_packages: Vec<String> = std::fs::read_dir(cache)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("linux-image-"))
                .collect();
            if let Some(unpacked) = cached_packages.iter().find_map(|p| cached(cache, p, find_kernel_image)) {
                eprintln!("xtask: {first}; using the cached {}", unpacked.package);
                return Ok(unpacked);
            }
            eprintln!("xtask: {first}; running apt-get update and trying again");
            run_tool(Command::new("apt-get").args(["update", "-q"]))?;
            resolve_kernel_package()?
        }
    };
    fetch(cache, &package, unpack_kernel_image, find_kernel_image)
}

/// Debian's static busybox.
fn fetch_busybox(cache: &Path) -> Result<Unpacked, String> {
    fetch(
        cache,
        BUSYBOX_PACKAGE,
        |deb, directory| run_tool(Command::new("dpkg-deb").arg("-x").arg(deb).arg(directory)).map(drop),
        |directory| Some(directory.join("bin/busybox")).filter(|path| path.is_file()),
    )
}

// ---------------------------------------------------------------------------------------------
// The guest's programs

/// Builds `linux-bench` static (the initramfs has no loader or libc) into its own target
/// directory, so the flags do not invalidate the workspace's build cache; returns the binary.
fn build_linux_bench() -> Result<PathBuf, String> {
    let target_directory = tools::root().join("target/peer-build");
    eprintln!("xtask: building linux-bench (static, release)");
    tools::run_checked(
        tools::cargo()
            .args(["build", "--quiet", "--release", "-p", "linux-bench", "--target", "x86_64-unknown-linux-gnu"])
            .arg("--target-dir")
            .arg(&target_directory)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            // Debug info would triple the binary the guest unpacks; nobody debugs it there.
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false"),
        "building linux-bench",
    )?;
    let binary = target_directory.join("x86_64-unknown-linux-gnu/release/linux-bench");
    if has_program_interpreter(&read(&binary)?) {
        return Err(format!("{} is dynamically linked: the initramfs has no loader", binary.display()));
    }
    Ok(binary)
}

/// Whether an ELF64 executable names a program interpreter (a `PT_INTERP` header), i.e. needs
/// the dynamic loader. Anything that is not a readable ELF64 counts as needing one.
fn has_program_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let field = |offset: usize, size: usize| -> Option<u64> {
        let bytes = elf.get(offset..offset + size)?;
        Some(bytes.iter().rev().fold(0u64, |value, &byte| value << 8 | u64::from(byte)))
    };
    let parsed = (|| {
        if elf.get(..5)? != b"\x7fELF\x02" {
            return None;
        }
        let (table, entry_size, count) = (field(0x20, 8)? as usize, field(0x36, 2)? as usize, field(0x38, 2)?);
        let mut interpreter = false;
        for index in 0..count as usize {
            interpreter |= field(table + index * entry_size, 4)? as u32 == PT_INTERP;
        }
        Some(interpreter)
    })();
    parsed.unwrap_or(true)
}

/// Busybox applets the init script and a person at the console use.
const BUSYBOX_APPLETS: [&str; 14] = [
    "sh", "mount", "umount", "poweroff", "reboot", "uname", "cat", "echo", "ls", "dmesg", "grep", "sleep", "nproc",
    "mkdir",
];

/// `/init`: mounts the kernel file systems, says it started, runs the benchmarks, powers off.
fn init_script(bench_arguments: &str) -> String {
    format!(
        "#!/bin/sh\n\
         # Written by `cargo xtask peer`: runs linux-bench once and powers the machine off.\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev\n\
         clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)\n\
         echo \"{INIT_MARKER} kernel=$(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo) clocksource=$clocksource\"\n\
         /linux-bench {bench_arguments}\n\
         echo \"PEER exit status=$?\"\n\
         echo \"{DONE_MARKER}\"\n\
         poweroff -f\n"
    )
}

/// The initramfs: busybox and its applet links, `/init`, `/linux-bench`, and `/dev/console`
/// (the kernel opens it for init's output before anything could mount devtmpfs).
fn initramfs_image(busybox: &[u8], linux_bench: &[u8], init: &str) -> Vec<u8> {
    let mut archive = Cpio::default();
    for directory in ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root"] {
        archive.directory(directory, 0o755);
    }
    archive.character_device("dev/console", 0o600, 5, 1);
    archive.character_device("dev/null", 0o666, 1, 3);
    archive.file("bin/busybox", 0o755, busybox);
    for applet in BUSYBOX_APPLETS {
        archive.symlink(&format!("bin/{applet}"), "busybox");
    }
    archive.file("init", 0o755, init.as_bytes());
    archive.file("linux-bench", 0o755, linux_bench);
    archive.finish()
}

/// A writer of the `newc` cpio format the kernel unpacks as an initramfs
/// (Linux `Documentation/driver-api/early-userspace/buffer-format.rst`): per entry a
/// 110-byte ASCII header of 13 eight-digit hex fields after the magic `070701`, the name with
/// its NUL, padding to 4 bytes, the data, padding to 4 bytes; a `TRAILER!!!` entry ends it.
#[derive(Default)]
struct Cpio {
    bytes: Vec<u8>,
    next_inode: u32,
}

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, device: (u32, u32), data: &[u8]) {
        self.next_inode += 1;
        let is_directory = mode & 0o170_000 == S_IFDIR;
        let fields = [
            self.next_inode,
            mode,
            0, // uid: root
            0, // gid: root
            if is_directory { 2 } else { 1 },
            0, // mtime: fixed, so the same inputs give the same image
            data.len() as u32,
            0, // major and minor of the device holding the file: none
            0,
            device.0, // major and minor of a device node
            device.1,
            name.len() as u32 + 1,
            0, // checksum: only in the `070702` variant
        ];
        self.bytes.extend_from_slice(b"070701");
        for field in fields {
            self.bytes.extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    fn directory(&mut self, name: &str, permissions: u32) {
        self.entry(name, S_IFDIR | permissions, (0, 0), &[]);
    }

    fn file(&mut self, name: &str, permissions: u32, data: &[u8]) {
        self.entry(name, S_IFREG | permissions, (0, 0), data);
    }

    fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes());
    }

    fn character_device(&mut self, name: &str, permissions: u32, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | permissions, (major, minor), &[]);
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.bytes
    }
}

// ---------------------------------------------------------------------------------------------
// Booting

/// The machine type (`-M` value) of a QEMU command.
fn machine_type(command: &Command) -> Option<String> {
    let arguments: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let position = arguments.iter().position(|a| a == "-M" || a == "-machine")?;
    arguments.get(position + 1).cloned()
}

/// Reef's QEMU command for `machine` with the Linux kernel and initramfs: the same arguments
/// (from [`Machine::command`], so they cannot drift apart), plus `-initrd`, and with the
/// machine type replaced when `replace_machine` says so.
fn linux_command(machine: &Machine, kernel: &Path, initramfs: &Path, replace_machine: Option<&str>) -> Command {
    let reef = machine.command(kernel, false);
    let mut command = Command::new(reef.get_program());
    let mut replace_next = false;
    for argument in reef.get_args() {
        match (replace_next, replace_machine) {
            (true, Some(replacement)) => command.arg(replacement),
            _ => command.arg(argument),
        };
        replace_next = argument == "-M" || argument == "-machine";
    }
    command.arg("-initrd").arg(initramfs);
    command
}

/// What one guest run printed and how far it got.
struct GuestRun {
    /// The serial output, `\r` removed.
    serial: String,
    /// When `/init` said it started, from QEMU's start.
    init_after: Option<Duration>,
    /// When linux-bench (or `/init`) printed `PEER done`.
    done_after: Option<Duration>,
    /// QEMU's exit status, if it exited by itself.
    exit: Option<ExitStatus>,
    /// Which timeout stopped it, if one did.
    timed_out: Option<&'static str>,
    elapsed: Duration,
}

impl GuestRun {
    /// Why the run stopped short, in a few words.
    fn failure_summary(&self) -> String {
        match (self.timed_out, self.exit) {
            (Some(which), _) => format!("{which} after {:.0} s", self.elapsed.as_secs_f64()),
            (None, Some(status)) => format!("QEMU exited ({status}) after {:.1} s", self.elapsed.as_secs_f64()),
            (None, None) => "no output".to_string(),
        }
    }
}

/// Boots the Linux guest and reads its serial port line by line, echoing the `PEER` lines,
/// until `PEER done` (then QEMU is killed: nothing after it matters, so the guest's own
/// `poweroff` is not waited for), QEMU exits, or a timeout: [`BOOT_TIMEOUT`] to reach
/// `/init`, `machine.timeout` in all.
fn run_guest(
    machine: &Machine,
    kernel: &Path,
    initramfs: &Path,
    replace_machine: Option<&str>,
) -> Result<GuestRun, String> {
    let start = Instant::now();
    let mut child = linux_command(machine, kernel, initramfs, replace_machine)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start qemu-system-x86_64: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (sender, receiver) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout);
        let mut line = Vec::new();
        while lines.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            if sender.send(String::from_utf8_lossy(&line).replace('\r', "")).is_err() {
                break;
            }
            line.clear();
        }
    });
    let error_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut run = GuestRun {
        serial: String::new(),
        init_after: None,
        done_after: None,
        exit: None,
        timed_out: None,
        elapsed: Duration::ZERO,
    };
    loop {
        match receiver.recv_timeout(Duration::from_millis(20)) {
            Ok(line) => {
                if let Some(position) = line.find("PEER ") {
                    eprint!("  guest: {}", &line[position..]);
                }
                if run.init_after.is_none() && line.contains(INIT_MARKER) {
                    run.init_after = Some(start.elapsed());
                }
                if line.contains(DONE_MARKER) {
                    run.done_after = Some(start.elapsed());
                }
                run.serial.push_str(&line);
                if run.done_after.is_some() {
                    break;
                }
                continue;
            }
            // QEMU closed the serial port: it is exiting, which `try_wait` sees shortly.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(20)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            run.exit = Some(status);
            break;
        }
        if run.init_after.is_none() && start.elapsed() > BOOT_TIMEOUT {
            run.timed_out = Some("no /init within the boot timeout");
            break;
        }
        if start.elapsed() > machine.timeout {
            run.timed_out = Some("the benchmarks did not finish within the run timeout");
            break;
        }
    }
    if run.exit.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = reader.join();
    run.serial.extend(receiver.try_iter());
    let errors = error_reader.join().unwrap_or_default();
    if !errors.trim().is_empty() {
        run.serial.push_str("\n[qemu stderr] ");
        run.serial.push_str(errors.trim());
        run.serial.push('\n');
    }
    run.elapsed = start.elapsed();
    Ok(run)
}

// ---------------------------------------------------------------------------------------------
// Results

/// What the guest reported.
#[derive(Debug, PartialEq)]
struct Report {
    initiator: u64,
    responder: u64,
    /// The rate cycles are converted to time with, and where it came from (`clock`, `kernel`).
    tsc_hz: u64,
    tsc_source: String,
    tsc_calibrated_hz: u64,
    tsc_kernel_hz: u64,
    /// How coarse the guest's monotonic clock was.
    clock_step_ns: u64,
    tsc_read_overhead: u64,
    warmup: u64,
    kernel_release: String,
    clocksource: String,
    /// Per benchmark name: unit, n, and the statistics in cycles and in ns.
    benchmarks: Map<String, Value>,
    skipped: Vec<String>,
}

/// The `key=value` fields of a `PEER <word> ...` line (the first word may itself be one).
fn fields(line: &str) -> Vec<(&str, &str)> {
    line.split_whitespace().skip(1).filter_map(|pair| pair.split_once('=')).collect()
}

/// The value of `key` among `fields`.
fn field<'a>(fields: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    fields.iter().find(|(name, _)| *name == key).map(|(_, value)| *value)
}

fn number(fields: &[(&str, &str)], key: &str, line: &str) -> Result<f64, String> {
    field(fields, key)
        .and_then(|value| value.parse::<f64>().ok())
        .ok_or_else(|| format!("no number `{key}=` in `{line}`"))
}

/// Parses linux-bench's lines out of the serial log (anything before `PEER` on a line, such as
/// a kernel message that got in first, is skipped).
fn parse_report(serial: &str) -> Result<Report, String> {
    let mut report = Report {
        initiator: 0,
        responder: 0,
        tsc_hz: 0,
        tsc_source: String::new(),
        tsc_calibrated_hz: 0,
        tsc_kernel_hz: 0,
        clock_step_ns: 0,
        tsc_read_overhead: 0,
        warmup: 0,
        kernel_release: String::new(),
        clocksource: String::new(),
        benchmarks: Map::new(),
        skipped: Vec::new(),
    };
    for line in serial.lines() {
        let Some(position) = line.find("PEER ") else {
            continue;
        };
        let line = line[position..].trim_end();
        let fields = fields(line);
        match line.split_whitespace().nth(1).unwrap_or_default() {
            "error" => return Err(format!("linux-bench failed: {line}")),
            "boot" => {
                report.kernel_release = field(&fields, "kernel").unwrap_or_default().to_string();
                report.clocksource = field(&fields, "clocksource").unwrap_or_default().to_string();
            }
            "start" => report.warmup = number(&fields, "warmup", line)? as u64,
            "cpus" => {
                report.initiator = number(&fields, "initiator", line)? as u64;
                report.responder = number(&fields, "responder", line)? as u64;
            }
            "tsc" => {
                report.tsc_hz = number(&fields, "hz", line)? as u64;
                report.tsc_source = field(&fields, "source").unwrap_or_default().to_string();
                report.tsc_calibrated_hz = number(&fields, "calibrated_hz", line)? as u64;
                report.tsc_kernel_hz = number(&fields, "kernel_hz", line)? as u64;
                report.clock_step_ns = number(&fields, "clock_step_ns", line)? as u64;
                report.tsc_read_overhead = number(&fields, "read_overhead", line)? as u64;
            }
            "skip" => report.skipped.push(field(&fields, "name").unwrap_or_default().to_string()),
            first if first.starts_with("name=") => {
                let name = field(&fields, "name").unwrap_or_default().to_string();
                let hz = number(&fields, "tsc_hz", line)?;
                if hz <= 0.0 {
                    return Err(format!("no TSC rate in `{line}`"));
                }
                let mut cycles = Map::new();
                let mut nanoseconds = Map::new();
                for key in ["min", "p5", "median", "p95", "max", "mean"] {
                    let value = number(&fields, key, line)?;
                    cycles.insert(key.to_string(), json!(value));
                    nanoseconds.insert(key.to_string(), json!(round_to(value * 1e9 / hz, 1)));
                }
                report.benchmarks.insert(
                    name,
                    json!({
                        "unit": field(&fields, "unit").unwrap_or("cycles"),
                        "n": number(&fields, "n", line)? as u64,
                        "cycles": cycles,
                        "ns": nanoseconds,
                    }),
                );
            }
            _ => {}
        }
    }
    if report.tsc_hz == 0 {
        return Err("linux-bench printed no `PEER tsc` line".into());
    }
    let missing: Vec<&str> = BENCHMARKS
        .into_iter()
        .filter(|name| !report.benchmarks.contains_key(*name) && !report.skipped.iter().any(|s| s == name))
        .collect();
    if !missing.is_empty() {
        return Err(format!("no results for {}", missing.join(", ")));
    }
    Ok(report)
}

/// The short table of a results file.
fn print_table(results: &Value) {
    println!(
        "Linux {} ({} {}), -M {}, {}, CPU {} -> CPU {}, TSC {:.3} GHz, {} round trips each",
        results["kernel_release"].as_str().unwrap_or("?"),
        results["kernel_package"].as_str().unwrap_or("?"),
        results["kernel_version"].as_str().unwrap_or("?"),
        results["machine"].as_str().unwrap_or("?"),
        results["accelerator"].as_str().unwrap_or("?"),
        results["core_pair"]["initiator"],
        results["core_pair"]["responder"],
        results["tsc_hz"].as_f64().unwrap_or(0.0) / 1e9,
        results["rounds"],
    );
    if let Some(reason) = results["machine_fallback"].as_str() {
        println!("note: not Reef's machine type: {reason}");
    }
    println!("{:<10} {:>12} {:>12} {:>12} {:>14}", "round trip", "median ns", "p5 ns", "p95 ns", "median cycles");
    for name in BENCHMARKS {
        let entry = &results["benchmarks"][name];
        if entry.is_null() {
            println!("{name:<10} {:>12}", "skipped");
            continue;
        }
        let value = |unit: &str, key: &str| entry[unit][key].as_f64().unwrap_or(f64::NAN);
        println!(
            "{name:<10} {:>12.1} {:>12.1} {:>12.1} {:>14.0}",
            value("ns", "median"),
            value("ns", "p5"),
            value("ns", "p95"),
            value("cycles", "median")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry read back from an archive: name, mode, device numbers, data.
    type Entry = (String, u32, (u32, u32), Vec<u8>);

    /// Reads back a newc archive, trailer excluded.
    fn read_cpio(mut bytes: &[u8]) -> Vec<Entry> {
        let mut entries = Vec::new();
        let mut offset = 0usize;
        loop {
            assert_eq!(&bytes[..6], b"070701", "magic at offset {offset}");
            let field = |index: usize| {
                u32::from_str_radix(std::str::from_utf8(&bytes[6 + 8 * index..14 + 8 * index]).unwrap(), 16).unwrap()
            };
            let (mode, size, name_size) = (field(1), field(6) as usize, field(11) as usize);
            let device = (field(9), field(10));
            let name = std::str::from_utf8(&bytes[110..110 + name_size - 1]).unwrap().to_string();
            assert_eq!(bytes[110 + name_size - 1], 0, "name of {name} ends in NUL");
            let data_start = (110 + name_size).next_multiple_of(4);
            let data = bytes[data_start..data_start + size].to_vec();
            let next = (data_start + size).next_multiple_of(4);
            offset += next;
            bytes = &bytes[next..];
            if name == "TRAILER!!!" {
                assert!(bytes.is_empty(), "nothing after the trailer");
                return entries;
            }
            entries.push((name, mode, device, data));
        }
    }

    #[test]
    fn cpio_entries_round_trip_with_padding() {
        let mut archive = Cpio::default();
        archive.directory("bin", 0o755);
        archive.file("bin/x", 0o644, b"hello");
        archive.symlink("bin/sh", "busybox");
        archive.character_device("dev/console", 0o600, 5, 1);
        let bytes = archive.finish();
        assert_eq!(bytes.len() % 4, 0);
        // The first header: magic, inode 1, a directory 0755, two links, name size 4.
        let header = std::str::from_utf8(&bytes[..110]).unwrap();
        assert_eq!(&header[..22], "07070100000001000041ed");
        assert_eq!(&header[94..102], "00000004");
        let entries = read_cpio(&bytes);
        assert_eq!(
            entries,
            vec![
                ("bin".to_string(), 0o040_755, (0, 0), vec![]),
                ("bin/x".to_string(), 0o100_644, (0, 0), b"hello".to_vec()),
                ("bin/sh".to_string(), 0o120_777, (0, 0), b"busybox".to_vec()),
                ("dev/console".to_string(), 0o020_600, (5, 1), vec![]),
            ]
        );
    }

    #[test]
    fn initramfs_has_init_console_and_shell() {
        let image = initramfs_image(b"BUSYBOX", b"BENCH", &init_script("--rounds 7"));
        let entries = read_cpio(&image);
        let find = |name: &str| entries.iter().find(|entry| entry.0 == name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(find("dev/console").2, (5, 1));
        assert_eq!(find("bin/sh").3, b"busybox");
        assert_eq!(find("linux-bench").3, b"BENCH");
        let init = String::from_utf8(find("init").3.clone()).unwrap();
        assert!(init.starts_with("#!/bin/sh\n"));
        assert!(init.contains("/linux-bench --rounds 7\n"));
        assert!(init.contains("echo \"PEER done\"\n"));
        assert_eq!(find("init").1, 0o100_755);
    }

    #[test]
    fn kernel_package_from_apt_cache() {
        let output = "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n  Recommends: firmware\n";
        assert_eq!(kernel_dependency(output).as_deref(), Some("linux-image-6.1.0-56-amd64"));
        assert_eq!(
            kernel_dependency("linux-image-amd64\n |Depends: linux-image-6.12-amd64\n").as_deref(),
            Some("linux-image-6.12-amd64")
        );
        assert_eq!(kernel_dependency("E: No packages found\n"), None);
    }

    #[test]
    fn static_and_dynamic_elf() {
        // A minimal ELF64 header with one program header of type `type_`.
        let elf = |type_: u32| {
            let mut bytes = vec![0u8; 64 + 56];
            bytes[..5].copy_from_slice(b"\x7fELF\x02");
            bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
            bytes[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
            bytes[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
            bytes[64..68].copy_from_slice(&type_.to_le_bytes());
            bytes
        };
        assert!(has_program_interpreter(&elf(3)));
        assert!(!has_program_interpreter(&elf(1)));
        assert!(has_program_interpreter(b"#!/bin/sh"));
    }

    #[test]
    fn kernel_command_line() {
        assert_eq!(kernel_arguments(None), "console=ttyS0 quiet");
        assert_eq!(kernel_arguments(Some(2_600_000)), "console=ttyS0 quiet tsc_early_khz=2600000");
    }

    #[test]
    fn qemu_command_is_reefs_plus_initrd() {
        let mut machine = Machine::new(2);
        machine.accel = Accel::Tcg;
        machine.kernel_args = KERNEL_ARGUMENTS.into();
        let arguments = |command: Command| -> Vec<String> {
            command.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
        };
        let reef = arguments(machine.command(Path::new("vmlinuz"), false));
        let linux = arguments(linux_command(&machine, Path::new("vmlinuz"), Path::new("initrd"), None));
        assert_eq!(linux[..reef.len()], reef[..]);
        assert_eq!(linux[reef.len()..], ["-initrd", "initrd"]);
        let pc = linux_command(&machine, Path::new("vmlinuz"), Path::new("initrd"), Some("pc"));
        assert_eq!(machine_type(&pc).as_deref(), Some("pc"));
        assert_eq!(arguments(pc).len(), linux.len());
    }

    const SERIAL: &str = "\
[    7.1] random: crng init done
PEER boot kernel=6.1.0-56-amd64 cpus=2 clocksource=refined-jiffies
PEER start rounds=100 warmup=1000 benchmarks=cacheline,urpc,pipe,eventfd,futex
PEER cpus initiator=0 responder=1 available=2
PEER tsc hz=2000000000 source=kernel calibrated_hz=2100000000 clock_step_ns=4000000 kernel_hz=2000000000 read_overhead=30
PEER name=cacheline unit=cycles n=100 min=100 p5=110 median=120.5 p95=200 max=900 mean=130.2 tsc_hz=2000000000 initiator=0 responder=1
PEER name=urpc unit=cycles n=100 min=1 p5=2 median=3 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
noise PEER name=pipe unit=cycles n=100 min=1 p5=2 median=3 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
PEER name=eventfd unit=cycles n=100 min=1 p5=2 median=3 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
PEER name=futex unit=cycles n=100 min=1 p5=2 median=124000 p95=4 max=5 mean=3 tsc_hz=2000000000 initiator=0 responder=1
PEER done
";

    #[test]
    fn report_from_serial() {
        let report = parse_report(SERIAL).unwrap();
        assert_eq!((report.initiator, report.responder, report.tsc_hz), (0, 1, 2_000_000_000));
        assert_eq!((report.tsc_read_overhead, report.warmup), (30, 1000));
        assert_eq!(report.kernel_release, "6.1.0-56-amd64");
        assert_eq!(report.clocksource, "refined-jiffies");
        assert_eq!((report.tsc_source.as_str(), report.tsc_calibrated_hz), ("kernel", 2_100_000_000));
        assert_eq!((report.tsc_kernel_hz, report.clock_step_ns), (2_000_000_000, 4_000_000));
        assert_eq!(report.benchmarks.len(), 5);
        let cacheline = &report.benchmarks["cacheline"];
        assert_eq!(cacheline["n"], 100);
        assert_eq!(cacheline["cycles"]["median"], 120.5);
        assert_eq!(cacheline["ns"]["median"], 60.3);
        assert_eq!(report.benchmarks["futex"]["ns"]["median"], 62_000.0);
        assert!(report.benchmarks.contains_key("pipe"), "a line with noise before PEER still counts");
    }

    #[test]
    fn report_errors_are_named() {
        let without_futex: String =
            SERIAL.lines().filter(|l| !l.contains("name=futex")).map(|l| l.to_string() + "\n").collect();
        assert_eq!(parse_report(&without_futex).unwrap_err(), "no results for futex");
        let skipped = without_futex.replace("PEER done", "PEER skip name=futex reason=needs-two-cpus");
        assert_eq!(parse_report(&skipped).unwrap().skipped, ["futex"]);
        let failed = format!("{SERIAL}PEER error urpc: ring full\n");
        assert!(parse_report(&failed).unwrap_err().contains("ring full"));
        assert!(parse_report("PEER boot kernel=x\n").unwrap_err().contains("PEER tsc"));
    }

    #[test]
    fn options() {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let options =
            parse_options(&strings(&["--cores", "4", "--runs-per-bench", "50", "--accel", "kvm", "--reuse"])).unwrap();
        assert_eq!(options, Options { accel: Accel::Kvm, cores: 4, rounds: 50, reuse: true });
        assert!(parse_options(&strings(&["--cores", "1"])).is_err());
        assert!(parse_options(&strings(&["--runs-per-bench"])).is_err());
        assert!(parse_options(&strings(&["--what"])).unwrap_err().contains("--what"));
    }
}
