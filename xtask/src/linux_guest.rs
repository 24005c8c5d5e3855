//! The Linux guest: Debian's kernel and busybox, booted with Reef's QEMU flags, running one
//! program from `/init` and read line by line from its serial port.
//!
//! Debian's own kernel and busybox are fetched with `apt-get download`, never installed; the
//! initramfs is packed here and booted with the QEMU flags of [`Machine::command`], so the
//! figures sit beside Reef's. The benchmarks' Linux half runs here, and so do the test
//! suite's reference runs of Debian programs (CPython's tests).

use crate::debian;
use crate::qemu::{Accel, Machine, Share};
use crate::tools;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What linux-bench prints last, and `/init` after it.
pub(crate) const DONE_MARKER: &str = "PEER done";

/// What `/init` prints first: the kernel got as far as user space.
pub(crate) const INIT_MARKER: &str = "PEER boot";

/// The kernel command line. `console=ttyS0` sends the console (and `/init`'s output) to the
/// serial port QEMU gives us on stdio; `quiet` keeps boot messages out of the results.
/// [`kernel_arguments`] adds the TSC rate.
const KERNEL_ARGUMENTS: &str = "console=ttyS0 quiet";

/// How long the guest may take to reach `/init`: about 8 s under TCG here.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// How many times Reef's machine type gets to bring the kernel to `/init` before the
/// fallback: once more after a first failure, in case that one was a fluke of a busy host.
const REEF_MACHINE_TRIES: usize = 2;

/// Boots the guest on Reef's machine type, or on `-M pc` if that cannot reach `/init`
/// (saying why); returns the run, the machine type used and the reason for a fallback. The
/// serial log of each failed boot is kept in `cache` for a look.
pub(crate) fn boot_linux(
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

/// The host's TSC rate in kHz, from `linux-bench --tsc` run on the host; `None` (with a
/// note) if that fails. Under TCG the guest's RDTSC returns the host's counter, and KVM gives
/// the guest the host's rate, so this is the guest's rate too.
pub(crate) fn host_tsc_khz(linux_bench: &Path) -> Option<u64> {
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
pub(crate) fn kernel_arguments(tsc_khz: Option<u64>) -> String {
    match tsc_khz {
        Some(khz) => format!("{KERNEL_ARGUMENTS} tsc_early_khz={khz}"),
        None => KERNEL_ARGUMENTS.to_string(),
    }
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// The last `count` lines of `text`.
pub(crate) fn tail(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

/// Builds `linux-bench` static (the initramfs has no loader or libc) into its own target
/// directory, so the flags do not invalidate the workspace's build cache; returns the binary.
pub(crate) fn build_linux_bench() -> Result<PathBuf, String> {
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
    if tools::has_program_interpreter(&read(&binary)?) {
        return Err(format!("{} is dynamically linked: the initramfs has no loader", binary.display()));
    }
    Ok(binary)
}

/// Busybox applets the init script and a person at the console use (`insmod` for the modules
/// a run brings, [`run_program_with`]; `ip` for a network card, [`configure_network`]; the
/// rest for the network test's script, `test/catalogue/network.rs`).
pub(crate) const BUSYBOX_APPLETS: [&str; 25] = [
    "sh",
    "mount",
    "umount",
    "poweroff",
    "reboot",
    "uname",
    "cat",
    "echo",
    "ls",
    "dmesg",
    "grep",
    "sleep",
    "nproc",
    "mkdir",
    "insmod",
    "chroot",
    "ip",
    "seq",
    "wc",
    "sha256sum",
    "httpd",
    "wget",
    "kill",
    "taskset",
    "timeout",
];

/// The machine type (`-M` value) of a QEMU command.
pub(crate) fn machine_type(command: &Command) -> Option<String> {
    let arguments: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let position = arguments.iter().position(|a| a == "-M" || a == "-machine")?;
    arguments.get(position + 1).cloned()
}

/// Reef's QEMU command for `machine` with the Linux kernel and initramfs: the same arguments
/// (from [`Machine::command`], so they cannot drift apart), with the Linux initramfs as the
/// `-initrd`, and with the machine type replaced when `replace_machine` says so.
fn linux_command(machine: &Machine, kernel: &Path, initramfs: &Path, replace_machine: Option<&str>) -> Command {
    let mut linux = machine.clone();
    linux.initrd = Some(initramfs.to_path_buf());
    let reef = linux.command(kernel, false);
    let mut command = Command::new(reef.get_program());
    let mut replace_next = false;
    for argument in reef.get_args() {
        match (replace_next, replace_machine) {
            (true, Some(replacement)) => command.arg(replacement),
            _ => command.arg(argument),
        };
        replace_next = argument == "-M" || argument == "-machine";
    }
    command
}

/// What one guest run printed and how far it got.
pub(crate) struct GuestRun {
    /// The serial output, `\r` removed.
    pub(crate) serial: String,
    /// When `/init` said it started, from QEMU's start.
    pub(crate) init_after: Option<Duration>,
    /// When linux-bench (or `/init`) printed `PEER done`.
    pub(crate) done_after: Option<Duration>,
    /// QEMU's exit status, if it exited by itself.
    pub(crate) exit: Option<ExitStatus>,
    /// Which timeout stopped it, if one did.
    pub(crate) timed_out: Option<&'static str>,
    pub(crate) elapsed: Duration,
}

impl GuestRun {
    /// Why the run stopped short, in a few words.
    pub(crate) fn failure_summary(&self) -> String {
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

/// The `key=value` fields of a `PEER <word> ...` line (the first word may itself be one).
pub(crate) fn fields(line: &str) -> Vec<(&str, &str)> {
    line.split_whitespace().skip(1).filter_map(|pair| pair.split_once('=')).collect()
}

/// The value of `key` among `fields`.
pub(crate) fn field<'a>(fields: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    fields.iter().find(|(name, _)| *name == key).map(|(_, value)| *value)
}

/// `/init` that says it started, runs `command`, says it is done, and powers off.
fn program_init_script(command: &str) -> String {
    format!(
        "#!/bin/sh\n\
         # Written by `cargo xtask peer`: runs one command and powers the machine off.\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sysfs /sys\n\
         mount -t devtmpfs devtmpfs /dev\n\
         mount -t tmpfs tmpfs /tmp\n\
         echo \"{INIT_MARKER} kernel=$(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo)\"\n\
         {command}\n\
         echo \"PEER exit status=$?\"\n\
         echo \"{DONE_MARKER}\"\n\
         poweroff -f\n"
    )
}

/// Added to the Linux guest's command line: its `CLOCK_MONOTONIC`, which the samples are read
/// off, runs on the TSC as Reef's does. Without it the guest's TSC check fails under TCG
/// ("TSCs unsynchronized"), and on microvm, which has no HPET or ACPI PM timer, the clock
/// falls back to jiffies: 4 ms steps, a sixth of an `ls -l` of 100 files.
pub const LINUX_KERNEL_ARGUMENTS: &str = "tsc=reliable";

/// How the guest mounts a share: 9P2000.L over virtio with 128 KiB messages, the host-files
/// issue's options; no `cache=` option, so Linux 6.1's default (no page cache for 9P files).
pub(crate) const NINE_P_MOUNT_OPTIONS: &str = "trans=virtio,version=9p2000.L,msize=131072";

/// Where the guest's initramfs holds the kernel modules a run brings ([`nine_p_modules`],
/// [`network_modules`]): one directory, so a module both need (`virtio_mmio`) is one file.
const MODULE_DIRECTORY: &str = "lib/modules/extra";

/// The modules `wanted` of the guest's kernel and those they need, as initramfs files (for
/// [`run_program_with`]), and their names in the order to load them ([`load_modules`]).
fn guest_modules(wanted: &[&str]) -> Result<(Vec<tools::ExtraFile>, Vec<String>), String> {
    let cache = debian::cache()?;
    let kernel = debian::fetch_kernel(&cache)?;
    let mut files = Vec::new();
    let mut names = Vec::new();
    for module in debian::modules(&cache, &kernel, wanted)? {
        files.push((format!("{MODULE_DIRECTORY}/{}.ko", module.name), 0o644, read(&module.file)?));
        names.push(module.name);
    }
    Ok((files, names))
}

/// The 9P modules of the guest's kernel (a share), as [`guest_modules`] gives them.
pub(crate) fn nine_p_modules() -> Result<(Vec<tools::ExtraFile>, Vec<String>), String> {
    guest_modules(&debian::NINE_P_MODULES)
}

/// The modules of the guest's kernel for a `virtio-net-device` (Debian's kernel has
/// virtio-mmio and virtio-net as modules, not built in: without them microvm's card is never
/// found), as [`guest_modules`] gives them.
pub(crate) fn network_modules() -> Result<(Vec<tools::ExtraFile>, Vec<String>), String> {
    guest_modules(&debian::NETWORK_MODULES)
}

/// The `/init` lines that load the modules `names`, in order; a module already loaded (one
/// both the 9P and the network lists bring) is skipped.
pub(crate) fn load_modules(names: &[String]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for name in names {
        let line = format!("insmod /{MODULE_DIRECTORY}/{name}.ko");
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// The `/init` lines that give the guest's card QEMU's user-network address, as Reef's kernel
/// takes it by default: 10.0.2.15/24 on `eth0` (the only card), the route out through the
/// gateway 10.0.2.2 (QEMU itself), and the loopback up. Needs [`network_modules`] loaded.
pub(crate) fn configure_network() -> Vec<String> {
    vec![
        "ip link set lo up".into(),
        "ip link set eth0 up".into(),
        format!("ip addr add {}/24 dev eth0", crate::net::GUEST_ADDRESS),
        format!("ip route add default via {}", crate::net::GATEWAY),
    ]
}

/// The command that mounts the machine's share `index` (its tag, [`Share::tag`]) on
/// `mount_point`, which must exist.
pub(crate) fn mount_share(index: usize, mount_point: &str) -> String {
    format!("mount -t 9p -o {NINE_P_MOUNT_OPTIONS} {} {mount_point}", Share::tag(index))
}

/// The directories of the guest's initramfs.
const DIRECTORIES: [&str; 10] = ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root"];

/// What [`run_program`] saw: the serial log, the guest kernel's version, the machine type,
/// and how long the guest took from QEMU's start to `/init`'s first line.
pub struct ProgramRun {
    pub serial: String,
    pub kernel_version: String,
    pub machine: String,
    pub boot_to_init: Option<Duration>,
}

/// Boots Debian's Linux in the same QEMU setup as Reef (`cores`, `accel`) with `files` at
/// `/bin/<name>` next to busybox, runs `command` from `/init`, and returns what it printed.
pub fn run_program(
    accel: Accel,
    cores: usize,
    files: &[(String, Vec<u8>)],
    command: &str,
    timeout: Duration,
) -> Result<ProgramRun, String> {
    let mut machine = Machine::new(cores);
    machine.accel = accel;
    machine.timeout = timeout;
    run_program_on(&machine, files, command)
}

/// [`run_program`] on `machine` (its cores, memory, accelerator and timeout; the kernel
/// command line is the Linux guest's own, with the host's TSC rate, then `machine.kernel_args`). `/init` mounts `/proc`, `/sys`, devtmpfs on `/dev`
/// (so `/dev/null` and `/dev/zero` exist) and a tmpfs on `/tmp`.
pub fn run_program_on(machine: &Machine, files: &[(String, Vec<u8>)], command: &str) -> Result<ProgramRun, String> {
    run_program_with(machine, files, &[], command)
}

/// [`run_program_on`] with `extra` files in the initramfs besides `/bin/<name>`: each at its
/// path (no leading `/`; its parent directories are made, 0755), with its permissions, e.g.
/// kernel modules for `command` to `insmod`. `machine.shares` are given to the guest as to
/// Reef (`-fsdev local` and a virtio-9p device each, mount tag `shareN`); mounting them is
/// `command`'s business.
pub fn run_program_with(
    machine: &Machine,
    files: &[(String, Vec<u8>)],
    extra: &[tools::ExtraFile],
    command: &str,
) -> Result<ProgramRun, String> {
    let program = prepare_program(machine, files, extra, command)?;
    let (guest, used_machine, _) =
        boot_linux(&program.machine, &program.kernel.file, &program.initramfs, &program.cache)?;
    if guest.done_after.is_none() {
        return Err(format!(
            "the Linux guest did not finish ({}); serial log:\n{}",
            guest.failure_summary(),
            tail(&guest.serial, 60)
        ));
    }
    Ok(ProgramRun {
        serial: guest.serial,
        kernel_version: program.kernel.version,
        machine: used_machine,
        boot_to_init: guest.init_after,
    })
}

/// [`run_program_with`] through Reef's own boot loop ([`crate::qemu::boot`]), so that
/// `machine.host_actions` and `machine.typed` happen as on a Reef run: a test's host side
/// (a fetch through a `--forward`, a key typed when it is done) is checked against Linux with
/// the same steps. It stops at [`DONE_MARKER`] and returns the serial output. It has no
/// fallback to `-M pc` (which has no virtio-mmio for the machine's cards): a boot that does
/// not finish is an error with the log's end.
pub(crate) fn run_program_with_host_steps(
    machine: &Machine,
    files: &[(String, Vec<u8>)],
    extra: &[tools::ExtraFile],
    command: &str,
) -> Result<String, String> {
    let program = prepare_program(machine, files, extra, command)?;
    let mut machine = program.machine;
    machine.initrd = Some(program.initramfs);
    machine.kernel = None;
    let (outcome, done) = crate::qemu::boot(&machine, &program.kernel.file, Some(DONE_MARKER))?;
    if done.is_none() {
        let why =
            if outcome.timed_out { format!("timed out after {:?}", machine.timeout) } else { "QEMU ended".into() };
        return Err(format!("the Linux guest did not finish ({why}); serial log:\n{}", tail(&outcome.serial, 60)));
    }
    Ok(outcome.serial)
}

/// What a guest run of one program boots: the guest's kernel, an initramfs written into the
/// cache, and the machine with the guest's kernel command line.
struct Program {
    kernel: debian::Unpacked,
    initramfs: PathBuf,
    machine: Machine,
    cache: PathBuf,
}

/// Fetches the guest's kernel and busybox, and packs the initramfs of [`run_program_with`]:
/// busybox with [`BUSYBOX_APPLETS`], `files` at `/bin/<name>`, `extra` at their paths and an
/// `/init` that runs `command`.
fn prepare_program(
    machine: &Machine,
    files: &[(String, Vec<u8>)],
    extra: &[tools::ExtraFile],
    command: &str,
) -> Result<Program, String> {
    tools::ensure_qemu()?;
    let cache = debian::cache()?;
    let kernel = debian::fetch_kernel(&cache)?;
    let busybox = debian::fetch_busybox(&cache)?;
    let mut archive = initramfs::Writer::new();
    for directory in DIRECTORIES {
        archive.directory(directory, 0o755);
    }
    archive.character_device("dev/console", 0o600, 5, 1);
    archive.character_device("dev/null", 0o666, 1, 3);
    archive.file("bin/busybox", 0o755, &read(&busybox.file)?);
    for applet in BUSYBOX_APPLETS {
        archive.symlink(&format!("bin/{applet}"), "busybox");
    }
    for (name, bytes) in files {
        archive.file(&format!("bin/{name}"), 0o755, bytes);
    }
    let mut directories: std::collections::BTreeSet<String> = DIRECTORIES.into_iter().map(str::to_string).collect();
    for (path, mode, bytes) in extra {
        let components: Vec<&str> = path.split('/').collect();
        for end in 1..components.len() {
            let parent = components[..end].join("/");
            if directories.insert(parent.clone()) {
                archive.directory(&parent, 0o755);
            }
        }
        archive.file(path, *mode, bytes);
    }
    archive.file("init", 0o755, program_init_script(command).as_bytes());
    let initramfs = cache.join("program-initramfs.cpio");
    std::fs::write(&initramfs, archive.finish()).map_err(|e| format!("writing {}: {e}", initramfs.display()))?;
    let mut machine = machine.clone();
    // With the TSC rate given, the guest skips calibrating it against the PIT, which hangs the
    // boot on microvm when the host deschedules a vCPU thread meanwhile: more vCPUs than host
    // CPUs made that happen on every boot (see `kernel_arguments`).
    let tsc_khz = build_linux_bench().ok().and_then(|bench| host_tsc_khz(&bench));
    machine.kernel_args = format!("{} {}", kernel_arguments(tsc_khz), machine.kernel_args).trim_end().to_string();
    Ok(Program { kernel, initramfs, machine, cache })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
