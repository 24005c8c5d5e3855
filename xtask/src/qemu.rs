//! Booting Reef in QEMU: the command line, the accelerator choice, timeouts, exit codes.

use crate::net::{self, Forward, GuestForward, Network};
use crate::tools;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Which accelerator QEMU uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// Binary translation; works everywhere (the default here).
    Tcg,
    /// Hardware virtualisation; only where `/dev/kvm` opens and the CPU has VMX or SVM.
    Kvm,
}

impl Accel {
    /// The name printed in results.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcg => "tcg",
            Self::Kvm => "kvm",
        }
    }

    /// KVM when it is real (VMX/SVM flags and an openable `/dev/kvm`), else TCG. A `/dev/kvm`
    /// without those flags is a software hypervisor, far slower than TCG for a kernel.
    pub fn detect() -> Self {
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let hardware = flags
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
        let opens = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok();
        if hardware && opens {
            Self::Kvm
        } else {
            Self::Tcg
        }
    }

    /// Parses `kvm` / `tcg`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "kvm" => Ok(Self::Kvm),
            "tcg" => Ok(Self::Tcg),
            _ => Err(format!("unknown accelerator `{text}`: use kvm or tcg")),
        }
    }
}

/// One QEMU boot of Reef.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cores: usize,
    pub memory_mib: usize,
    pub accel: Accel,
    pub kernel_args: String,
    pub timeout: Duration,
    /// Typed on the serial console, step by step: each (marker, text) once the serial output
    /// shows the marker after what the step before typed.
    pub typed: Vec<(String, String)>,
    /// Copy the serial output to our stdout as it arrives (`run -- <command>`), so a user sees
    /// progress, and sees what was printed even when the run is killed.
    pub echo: bool,
    /// Start paused with a gdb stub on :1234 (`-s -S`).
    pub gdb: bool,
    /// The initramfs, passed with `-initrd`: QEMU's firmware loads it at the top of the RAM
    /// below 4 GiB and names it as module 0 in the PVH start_info (`docs/initramfs.md`).
    pub initrd: Option<PathBuf>,
    /// Boot this kernel ELF instead of the one the caller built (a test of the `multi`
    /// image as core 0's kernel).
    pub kernel: Option<PathBuf>,
    /// The watchdog: after this long without serial output, ask the kernel for its dump
    /// (BREAK then `t` on the console), wait [`DUMP_WAIT`] for it, end QEMU and report the run
    /// as stalled (docs/failures.md, Watchdog). `None` (benchmarks, `run`): only `timeout`.
    /// `cargo xtask test` gives every run [`TEST_WATCHDOG`]; a test that is quiet longer on
    /// purpose sets more.
    pub watchdog: Option<Duration>,
    /// Host directories shared over virtio-9p (`--share DIR[:/mountpoint]`), in order.
    pub shares: Vec<Share>,
    /// A virtio-net card on QEMU's user network, closed but for its forwards (`--net`,
    /// `--forward`, `--guest-forward`); `None`: no network card.
    pub network: Option<Network>,
    /// Done on the host, step by step: each (marker, action) once the serial output shows
    /// the marker, from where the step before found its own (so steps of one marker run
    /// together). A test changes a share under a running guest; a typed step with the same
    /// marker then tells the guest it is done.
    pub host_actions: Vec<(String, HostAction)>,
}

/// What a run does on the host while the guest runs ([`Machine::host_actions`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostAction {
    /// Writes the file (created or replaced).
    Write(PathBuf, Vec<u8>),
    /// Removes the directory and all it holds.
    RemoveDirectory(PathBuf),
    /// GETs `path` from the host's 127.0.0.1:`port` (a `--forward` into the guest) and writes
    /// the body to `save_to`; anything but status 200 within [`FETCH_TIMEOUT`] fails the run.
    Fetch { port: u16, path: String, save_to: PathBuf },
    /// Opens `connections` connections at once to 127.0.0.1:`port` asking for `path`, the
    /// first `cut` of them reset after the start of their answer ([`net::http::flood`]), and
    /// writes what they got ([`net::http::Flood::line`]) to `save_to`; a connection with no
    /// whole answer within `timeout` counts as unanswered. Never fails the run by itself (the
    /// test judges the counts). QEMU's `hostfwd` listens with a backlog of 1, so the host drops
    /// SYNs of a burst and its clients send them again after 1, 3 and 7 s: a flood's slowest
    /// connections wait on the host, before the guest sees them.
    Flood { port: u16, path: String, connections: usize, cut: usize, timeout: Duration, save_to: PathBuf },
    /// Calls a function of the caller's (a benchmark's load on a `--forward`, which keeps its
    /// figures where the caller reads them); its error fails the run.
    Call(HostCall),
}

/// A function a run calls on the host at a marker ([`HostAction::Call`]); equal only to itself.
#[derive(Clone)]
pub struct HostCall {
    /// What it does, for messages.
    pub name: String,
    pub call: std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
}

impl HostCall {
    pub fn new(name: impl Into<String>, call: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Self { name: name.into(), call: std::sync::Arc::new(call) }
    }
}

impl std::fmt::Debug for HostCall {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "HostCall({})", self.name)
    }
}

impl PartialEq for HostCall {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.call, &other.call)
    }
}

impl Eq for HostCall {}

/// How long a [`HostAction::Fetch`] may take, connection retries included: less than
/// [`TEST_WATCHDOG`], since the serial output is not read meanwhile.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(45);

impl HostAction {
    fn run(&self) -> Result<(), String> {
        match self {
            Self::Write(path, contents) => std::fs::write(path, contents),
            Self::RemoveDirectory(path) => std::fs::remove_dir_all(path),
            Self::Fetch { port, path, save_to } => {
                let response = net::http::get(*port, path, FETCH_TIMEOUT).map_err(|e| format!("host action: {e}"))?;
                if response.status != 200 {
                    return Err(format!(
                        "host action: GET http://127.0.0.1:{port}{path} answered {} ({} bytes)",
                        response.status,
                        response.body.len()
                    ));
                }
                std::fs::write(save_to, &response.body)
            }
            Self::Flood { port, path, connections, cut, timeout, save_to } => {
                let flood = net::http::flood(*port, path, *connections, *cut, *timeout);
                std::fs::write(save_to, flood.line())
            }
            Self::Call(call) => return (call.call)().map_err(|e| format!("host action {}: {e}", call.name)),
        }
        .map_err(|e| match self {
            Self::Fetch { save_to, .. } | Self::Flood { save_to, .. } => {
                format!("host action: writing {}: {e}", save_to.display())
            }
            _ => format!("host action {self:?}: {e}"),
        })
    }
}

/// A host directory shared with the guest over virtio-9p.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// The directory on the host (it exists and is a directory: [`Share::parse`] checked).
    pub directory: PathBuf,
    /// Where Reef mounts it (absolute; empty: nowhere, the device is only found).
    pub mount_point: String,
}

/// Where a share is mounted when `--share` names no mount point.
pub const DEFAULT_MOUNT_POINT: &str = "/host";

impl Share {
    /// `DIR[:/mountpoint]`: a host directory that exists, and an absolute mount point (default
    /// [`DEFAULT_MOUNT_POINT`]) the kernel command line can carry.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (directory, mount_point) = match text.rsplit_once(":/") {
            Some((directory, path)) if !directory.is_empty() => (directory, format!("/{path}")),
            _ => (text, DEFAULT_MOUNT_POINT.to_string()),
        };
        let mount_point =
            if mount_point.len() > 1 { mount_point.trim_end_matches('/').to_string() } else { mount_point };
        let limit = platform::cmdline::MAX_MOUNT_POINT;
        let printable = mount_point.bytes().all(|b| b.is_ascii_graphic());
        if mount_point == "/" || mount_point.len() > limit || !printable || mount_point.split('/').any(|p| p == "..") {
            return Err(format!(
                "--share {text}: the mount point `{mount_point}` must be an absolute path other than /, without \
                 spaces or `..`, of at most {limit} characters"
            ));
        }
        let path = PathBuf::from(directory);
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => return Err(format!("--share {text}: `{directory}` is not a directory")),
            Err(error) => return Err(format!("--share {text}: cannot use `{directory}`: {error}")),
        }
        let directory = path.canonicalize().map_err(|e| format!("--share {text}: `{directory}`: {e}"))?;
        Ok(Self { directory, mount_point })
    }

    /// The mount tag of the `index`th share: QEMU's `mount_tag=`, the kernel's `share=TAG:`.
    pub fn tag(index: usize) -> String {
        format!("share{index}")
    }
}

/// The watchdog of every `cargo xtask test` run unless the test says otherwise.
pub const TEST_WATCHDOG: Duration = Duration::from_secs(60);

/// How long the watchdog waits for the kernel's dump before it ends QEMU anyway (a kernel
/// whose core 0 is wedged never prints it).
pub const DUMP_WAIT: Duration = Duration::from_secs(5);

/// Ctrl-A b, then `t`: the console multiplexer's escape sends a BREAK to the serial port
/// (QEMU `chardev/char-mux.c`), and `t` after a BREAK is the kernel's dump key
/// (`kernel/src/fs/magic_key.rs`).
const DUMP_REQUEST: &[u8] = b"\x01bt";

/// The last line of the kernel's dump (`magic_key::DUMP_END`).
const DUMP_END: &str = "WATCHDOG] end of the watchdog dump";

impl Machine {
    /// `cores` cores, 512 MiB, the detected accelerator, no arguments, a 60 s timeout, no
    /// initramfs.
    pub fn new(cores: usize) -> Self {
        Self {
            cores,
            memory_mib: 512,
            accel: Accel::detect(),
            kernel_args: String::new(),
            timeout: Duration::from_secs(60),
            typed: Vec::new(),
            echo: false,
            gdb: false,
            initrd: None,
            kernel: None,
            watchdog: None,
            shares: Vec::new(),
            network: None,
            host_actions: Vec::new(),
        }
    }

    /// The same machine, killed after `seconds` instead.
    pub fn with_timeout(mut self, seconds: u64) -> Self {
        self.timeout = std::time::Duration::from_secs(seconds);
        self
    }

    /// The QEMU command line for `kernel`.
    pub fn command(&self, kernel: &Path, interactive: bool) -> Command {
        let mut command = Command::new(emulator());
        command.args(["-M", "microvm,pit=on,rtc=off", "-nodefaults", "-no-user-config", "-display", "none"]);
        match self.accel {
            // `max`: the emulated CPU offers SMEP, SMAP and RDRAND, which Reef's user mode uses.
            Accel::Tcg => command.args(["-accel", "tcg,thread=multi", "-cpu", "max"]),
            Accel::Kvm => command.args(["-enable-kvm", "-cpu", "host,-arch-capabilities"]),
        };
        command.args(["-smp", &self.cores.to_string(), "-m", &format!("{}M", self.memory_mib)]);
        if interactive {
            command.args(["-serial", "mon:stdio"]);
        } else if self.watchdog.is_some() {
            // Multiplexed, with no monitor behind it, for its escape: Ctrl-A b is how the
            // watchdog sends a BREAK ([`console_bytes`] doubles a typed Ctrl-A).
            command.args(["-chardev", "stdio,id=console,mux=on", "-serial", "chardev:console"]);
        } else {
            command.args(["-serial", "stdio"]);
        }
        // Each share: a 9P server on the host directory and a virtio-9p transport for it (on
        // microvm's virtio-mmio window, in order); the kernel learns each tag's mount point from
        // its command line.
        let mut kernel_args = self.kernel_args.clone();
        for (index, share) in self.shares.iter().enumerate() {
            let tag = Share::tag(index);
            // QEMU's option syntax doubles a comma inside a value.
            let path = share.directory.to_string_lossy().replace(',', ",,");
            command
                .args(["-fsdev", &format!("local,id={tag},path={path},security_model=none")])
                .args(["-device", &format!("virtio-9p-device,fsdev={tag},mount_tag={tag}")]);
            // No mount point (the device test's raw share): the kernel finds the device and
            // the file service leaves it to whoever takes it.
            if !share.mount_point.is_empty() {
                kernel_args = format!("share={tag}:{} {kernel_args}", share.mount_point);
            }
        }
        // After the shares, so each share keeps the transport it has without a network card:
        // microvm fills its virtio-mmio window from the top, so with one share the 9P device
        // is transport 23 (0xfeb02e00) and the card 22 (0xfeb02c00), as QEMU's `info qtree`
        // shows. The kernel needs no word on its command line: it takes QEMU's 10.0.2.15/24.
        if let Some(network) = &self.network {
            command.args(network.qemu_arguments());
        }
        command
            .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
            .arg("-kernel")
            .arg(self.kernel.as_deref().unwrap_or(kernel))
            .args(["-append", kernel_args.trim_end()]);
        if let Some(initrd) = &self.initrd {
            command.arg("-initrd").arg(initrd);
        }
        if self.gdb {
            command.args(["-s", "-S"]);
        }
        command
    }

    /// The bytes that type `text` on this machine's console: with the watchdog's multiplexed
    /// console a Ctrl-A is the escape, so a Ctrl-A meant for the guest is sent twice.
    pub fn console_bytes(&self, text: &str) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(text.len());
        for &byte in text.as_bytes() {
            if byte == 0x01 && self.watchdog.is_some() {
                bytes.push(0x01);
            }
            bytes.push(byte);
        }
        bytes
    }
}

/// The emulator to run: `$REEF_QEMU` when set (a QEMU of one's own build), else
/// `qemu-system-x86_64` from the PATH.
pub fn emulator() -> String {
    std::env::var("REEF_QEMU").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "qemu-system-x86_64".into())
}

/// What a non-interactive boot produced.
#[derive(Debug)]
pub struct Outcome {
    /// The guest's exit code through isa-debug-exit, if it exited that way.
    pub guest_status: Option<u32>,
    /// QEMU was killed by the timeout.
    pub timed_out: bool,
    /// QEMU was ended by the watchdog: how long the guest had printed nothing when it fired.
    pub stalled: Option<Duration>,
    /// Everything the serial port printed.
    pub serial: String,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Maps QEMU's exit status to the guest's: isa-debug-exit makes QEMU exit with `(v << 1) | 1`.
pub fn guest_status(qemu_status: i32) -> Option<u32> {
    (qemu_status & 1 == 1).then_some((qemu_status >> 1) as u32)
}

/// Boots `machine`, collects the serial output, kills QEMU at the timeout or when `stop_at`
/// is printed (returning the time it took to appear).
pub fn boot(machine: &Machine, kernel: &Path, stop_at: Option<&str>) -> Result<(Outcome, Option<Duration>), String> {
    match stop_at {
        Some(marker) => boot_until(machine, kernel, Some(&|serial: &str| serial.contains(marker))),
        None => boot_until(machine, kernel, None),
    }
}

/// [`boot`], stopping when `stop` says yes to the serial output so far (a test of whole
/// lines, where a substring would also match a log message).
pub fn boot_until(
    machine: &Machine,
    kernel: &Path,
    stop: Option<&dyn Fn(&str) -> bool>,
) -> Result<(Outcome, Option<Duration>), String> {
    let start = Instant::now();
    let mut child = machine
        .command(kernel, false)
        // Piped while something may be typed: the steps, or the watchdog's request.
        .stdin(if machine.typed.is_empty() && machine.watchdog.is_none() { Stdio::null() } else { Stdio::piped() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", emulator()))?;
    let mut keyboard = child.stdin.take();
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (sender, receiver) = mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 || sender.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let error_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut serial = Vec::new();
    let echo = |chunk: &[u8]| {
        if machine.echo {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&chunk.iter().copied().filter(|b| *b != b'\r').collect::<Vec<u8>>());
            let _ = out.flush();
        }
    };
    // `keyboard` stays open to the end: QEMU may read it slowly, EOF on stdio would end the
    // console, and the watchdog may still have to type.
    let mut next_step = 0;
    let mut typed_until = 0;
    let (mut next_action, mut acted_until) = (0, 0);
    let mut marker_time = None;
    let mut timed_out = false;
    let mut last_output = Instant::now();
    // Set when the watchdog fired: when, how quiet the guest had been, where the dump starts.
    let mut dump_asked: Option<(Instant, Duration, usize)> = None;
    let status = loop {
        while let Ok(chunk) = receiver.try_recv() {
            echo(&chunk);
            serial.extend_from_slice(&chunk);
            last_output = Instant::now();
        }
        // Before the typed step of the same marker: the guest is told only once it is done.
        // Every action whose marker is there, in order; those of one marker all at once.
        while let Some((marker, action)) = machine.host_actions.get(next_action) {
            let Some(at) = String::from_utf8_lossy(&serial[acted_until..]).find(marker.as_str()) else { break };
            if let Err(why) = action.run() {
                // QEMU would outlive the run otherwise: nothing else ends it.
                let _ = child.kill();
                let _ = child.wait();
                let serial = String::from_utf8_lossy(&serial).replace('\r', "");
                return Err(format!("{why}\n----- serial log so far -----\n{serial}----------------------"));
            }
            next_action += 1;
            acted_until += at;
        }
        if let (Some((marker, text)), Some(stdin)) = (machine.typed.get(next_step), keyboard.as_mut()) {
            if dump_asked.is_none() && String::from_utf8_lossy(&serial[typed_until..]).contains(marker.as_str()) {
                stdin
                    .write_all(&machine.console_bytes(text))
                    .map_err(|e| format!("typing into the serial console: {e}"))?;
                stdin.flush().map_err(|e| format!("typing into the serial console: {e}"))?;
                next_step += 1;
                typed_until = serial.len();
            }
        }
        if let (Some(watchdog), None) = (machine.watchdog, dump_asked) {
            let quiet = last_output.elapsed();
            if quiet > watchdog {
                if let Some(stdin) = keyboard.as_mut() {
                    // A failed write (QEMU closing) leaves only the kill: the log says why.
                    let _ = stdin.write_all(DUMP_REQUEST).and_then(|()| stdin.flush());
                }
                dump_asked = Some((Instant::now(), quiet, serial.len()));
            }
        }
        if let Some((asked, _, from)) = dump_asked {
            if asked.elapsed() > DUMP_WAIT || dump_finished(&serial[from..]) {
                let _ = child.kill();
                break child.wait().ok();
            }
        }
        if let Some(stop) = stop {
            if marker_time.is_none() && stop(&String::from_utf8_lossy(&serial)) {
                marker_time = Some(start.elapsed());
            }
        }
        if marker_time.is_some() {
            let _ = child.kill();
            break child.wait().ok();
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if start.elapsed() > machine.timeout && !timed_out {
            timed_out = true;
            // A watched run that times out asks for the dump too (unless the watchdog did
            // already), so a slow hang that still printed now and then names its cause.
            match (machine.watchdog, keyboard.as_mut()) {
                (Some(_), Some(stdin)) if dump_asked.is_none() => {
                    let _ = stdin.write_all(DUMP_REQUEST).and_then(|()| stdin.flush());
                    dump_asked = Some((Instant::now(), last_output.elapsed(), serial.len()));
                }
                (Some(_), _) if dump_asked.is_some() => {}
                _ => {
                    let _ = child.kill();
                    break child.wait().ok();
                }
            }
        }
        if let Ok(chunk) = receiver.recv_timeout(Duration::from_millis(2)) {
            echo(&chunk);
            serial.extend_from_slice(&chunk);
            last_output = Instant::now();
        }
    };
    drop(keyboard);
    let _ = reader.join();
    while let Ok(chunk) = receiver.try_recv() {
        echo(&chunk);
        serial.extend_from_slice(&chunk);
    }
    let errors = error_reader.join().unwrap_or_default();
    let mut serial = String::from_utf8_lossy(&serial).replace('\r', "");
    if !errors.trim().is_empty() {
        serial.push_str("\n[qemu stderr] ");
        serial.push_str(errors.trim());
        serial.push('\n');
    }
    // A dump the timeout asked for is no stall: the run printed within its watchdog.
    let stalled = if timed_out { None } else { dump_asked.map(|(_, quiet, _)| quiet) };
    let guest_status = if timed_out || marker_time.is_some() || stalled.is_some() {
        None
    } else {
        status.and_then(|s| s.code()).and_then(guest_status)
    };
    Ok((Outcome { guest_status, timed_out, stalled, serial, elapsed: start.elapsed() }, marker_time))
}

/// Whether the serial output since the watchdog's request holds the dump's last line.
fn dump_finished(since_request: &[u8]) -> bool {
    String::from_utf8_lossy(since_request)
        .lines()
        .any(|line| line.starts_with("[c") && line.trim_end().ends_with(DUMP_END))
}

/// A command line for the user shell (`/sbin/init -c`, so busybox `sh -c`), as the kernel
/// command line's `exec=`; refused when it holds a double quote, which that line cannot carry.
pub fn exec_argument(command: &str) -> Result<String, String> {
    if command.contains('"') {
        return Err(format!(
            "the command line `{command}` holds a double quote, which the kernel command line cannot carry: \
             use single quotes ('...') inside it"
        ));
    }
    // The kernel ignores a longer `exec=` (and boots to the interactive shell, which would
    // wait for a keyboard): refused here with the reason instead.
    let limit = platform::cmdline::MAX_VALUE;
    if command.is_empty() || command.len() > limit || !command.is_ascii() {
        return Err(format!(
            "the command line is {} bytes{}; the kernel takes 1 to {limit} ASCII characters: \
             put the commands in a script and run that",
            command.len(),
            if command.is_ascii() { "" } else { " and not all ASCII" }
        ));
    }
    Ok(format!("exec=\"{command}\""))
}

/// `cargo xtask run`.
pub fn run_command(arguments: &[String]) -> Result<u8, String> {
    let mut machine = Machine::new(4);
    machine.timeout = Duration::from_secs(600);
    let mut shell_command: Option<String> = None;
    let mut image: Option<String> = None;
    let mut i = 0;
    let value = |i: usize, flag: &str| -> Result<&String, String> {
        arguments.get(i + 1).ok_or_else(|| format!("{flag} needs a value: see `cargo xtask help`"))
    };
    while i < arguments.len() {
        match arguments[i].as_str() {
            "--cores" => {
                machine.cores = value(i, "--cores")?
                    .parse()
                    .ok()
                    .filter(|n| (1..=64).contains(n))
                    .ok_or("--cores takes a number from 1 to 64")?;
                i += 1;
            }
            "--memory" => {
                machine.memory_mib = value(i, "--memory")?.parse().map_err(|_| "--memory takes MiB, e.g. 1024")?;
                i += 1;
            }
            "--accel" => {
                machine.accel = Accel::parse(value(i, "--accel")?)?;
                i += 1;
            }
            "--kernel-args" => {
                machine.kernel_args = value(i, "--kernel-args")?.clone();
                i += 1;
            }
            "--timeout" => {
                let seconds: u64 = value(i, "--timeout")?
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or("--timeout takes whole seconds, e.g. 30")?;
                machine.timeout = Duration::from_secs(seconds);
                i += 1;
            }
            "--gdb" => machine.gdb = true,
            "--debian" => {
                let tree = crate::rootfs::build()?;
                machine.shares.push(Share { directory: tree, mount_point: "/debian".into() });
                if machine.shares.len() > platform::cmdline::MAX_SHARES {
                    return Err(format!("--debian: {} shares at most", platform::cmdline::MAX_SHARES));
                }
            }
            "--share" => {
                machine.shares.push(Share::parse(value(i, "--share")?)?);
                if machine.shares.len() > platform::cmdline::MAX_SHARES {
                    return Err(format!("--share: {} shares at most", platform::cmdline::MAX_SHARES));
                }
                i += 1;
            }
            "--net" => {
                machine.network.get_or_insert_with(Network::default);
            }
            "--forward" => {
                let forward = Forward::parse(value(i, "--forward")?)?;
                machine.network.get_or_insert_with(Network::default).add_forward(forward)?;
                i += 1;
            }
            "--guest-forward" => {
                let forward = GuestForward::parse(value(i, "--guest-forward")?)?;
                machine.network.get_or_insert_with(Network::default).add_guest_forward(forward)?;
                i += 1;
            }
            "--image" => {
                let name = value(i, "--image")?;
                if !["full", "multi", "rt", "full-v2"].contains(&name.as_str()) {
                    return Err(format!(
                        "--image takes full, multi, rt or full-v2 (the images of /boot), not `{name}`"
                    ));
                }
                if name != "full" {
                    image = Some(name.clone());
                }
                i += 1;
            }
            "--" => {
                shell_command = Some(arguments[i + 1..].join(" "));
                break;
            }
            other => return Err(format!("unknown option `{other}` for run: see `cargo xtask help`")),
        }
        i += 1;
    }
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    machine.initrd = Some(tools::build_initramfs()?);
    // Built with the initramfs, which holds every image.
    machine.kernel = image.map(|name| crate::kernel_images::built_path(&name));
    let kernel = machine.kernel.clone().unwrap_or(kernel);
    if machine.gdb {
        let script = tools::root().join("target/reef.gdb");
        std::fs::write(
            &script,
            format!("file {}\ntarget remote :1234\nset disassembly-flavor intel\n", kernel.display()),
        )
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
        eprintln!("xtask: QEMU waits for gdb on :1234; in another terminal: gdb -x {}", script.display());
    }
    if let Some(command) = shell_command.filter(|c| !c.trim().is_empty()) {
        machine.kernel_args = format!("{} {}", machine.kernel_args, exec_argument(&command)?);
        machine.echo = true;
        if machine.gdb && !arguments.iter().any(|a| a == "--timeout") {
            // A debugging session has no deadline unless one was asked for.
            machine.timeout = Duration::from_secs(24 * 3600);
        }
        let (outcome, _) = boot(&machine, &kernel, None)?;
        return match (outcome.timed_out, outcome.guest_status) {
            (true, _) => Err(format!("Reef did not finish `{command}` within {:?}", machine.timeout)),
            (false, Some(status)) => Ok(status.min(255) as u8),
            (false, None) => Err("QEMU ended without Reef's exit code: see the log above".into()),
        };
    }
    interactive(&machine, &kernel)
}

fn interactive(machine: &Machine, kernel: &Path) -> Result<u8, String> {
    let mut command = machine.command(kernel, true);
    eprintln!(
        "xtask: booting Reef on {} cores ({}); quit with `poweroff` or Ctrl-A X",
        machine.cores,
        machine.accel.name()
    );
    let status = command.status().map_err(|e| format!("cannot start {}: {e}", emulator()))?;
    Ok(status.code().and_then(guest_status).unwrap_or(1).min(255) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(machine: &Machine) -> Vec<String> {
        machine.command(Path::new("kernel"), false).get_args().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn the_watchdog_multiplexes_the_console_and_only_then() {
        let mut machine = Machine::new(1);
        assert!(arguments(&machine).windows(2).any(|w| w == ["-serial", "stdio"]));
        machine.watchdog = Some(TEST_WATCHDOG);
        let with = arguments(&machine);
        assert!(with.windows(2).any(|w| w == ["-chardev", "stdio,id=console,mux=on"]));
        assert!(with.windows(2).any(|w| w == ["-serial", "chardev:console"]));
        // No monitor behind the multiplexer: Ctrl-A c must not reach one.
        assert!(!with.iter().any(|a| a.contains("mon")));
    }

    #[test]
    fn a_share_is_a_directory_and_a_mount_point() {
        let directory = std::env::temp_dir().join(format!("reef-share-test-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let text = directory.to_string_lossy().into_owned();
        let share = Share::parse(&text).unwrap();
        assert_eq!(share.mount_point, "/host");
        assert_eq!(share.directory, directory.canonicalize().unwrap());
        assert_eq!(Share::parse(&format!("{text}:/data/in/")).unwrap().mount_point, "/data/in");
        for bad in [format!("{text}:/"), format!("{text}:/a/../b"), format!("{text}:/a b")] {
            assert!(Share::parse(&bad).is_err(), "{bad}");
        }
        let missing = Share::parse(&format!("{text}/missing")).unwrap_err();
        assert!(missing.contains("cannot use"), "{missing}");
        let file = directory.join("file");
        std::fs::write(&file, b"x").unwrap();
        let not_directory = Share::parse(&file.to_string_lossy()).unwrap_err();
        assert!(not_directory.contains("is not a directory"), "{not_directory}");

        let mut machine = Machine::new(1);
        machine.kernel_args = "log=info".into();
        machine.shares = vec![share, Share::parse(&format!("{text}:/data")).unwrap()];
        let arguments = arguments(&machine);
        let path = directory.canonicalize().unwrap().to_string_lossy().into_owned();
        assert!(arguments
            .windows(2)
            .any(|w| w == ["-fsdev", &format!("local,id=share0,path={path},security_model=none")]));
        assert!(arguments.windows(2).any(|w| w == ["-device", "virtio-9p-device,fsdev=share1,mount_tag=share1"]));
        let append = arguments.iter().position(|a| a == "-append").map(|at| arguments[at + 1].clone()).unwrap();
        assert_eq!(append, "share=share1:/data share=share0:/host log=info");
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn the_network_card_comes_after_the_shares_and_changes_no_kernel_argument() {
        let directory = std::env::temp_dir().join(format!("reef-net-share-test-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let mut machine = Machine::new(1);
        machine.kernel_args = "log=info".into();
        assert!(!arguments(&machine).iter().any(|a| a.contains("netdev")));
        machine.shares = vec![Share::parse(&directory.to_string_lossy()).unwrap()];
        let mut network = Network::default();
        network.add_forward(Forward::parse("8080:80").unwrap()).unwrap();
        network.add_guest_forward(GuestForward::parse("80:127.0.0.1:8000").unwrap()).unwrap();
        machine.network = Some(network);
        let arguments = arguments(&machine);
        let at = |wanted: &str| arguments.iter().position(|a| a == wanted).unwrap();
        assert_eq!(
            arguments[at("-netdev") + 1],
            "user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:8080-:80,guestfwd=tcp:10.0.2.100:80-tcp:127.0.0.1:8000"
        );
        let nine_p = at("virtio-9p-device,fsdev=share0,mount_tag=share0");
        let card = at("virtio-net-device,netdev=net0");
        assert!(nine_p < card, "{arguments:?}");
        assert_eq!(arguments[at("-append") + 1], "share=share0:/host log=info");
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn a_typed_ctrl_a_is_doubled_behind_the_multiplexer() {
        let mut machine = Machine::new(1);
        assert_eq!(machine.console_bytes("a\x01b\x03\r"), b"a\x01b\x03\r");
        machine.watchdog = Some(TEST_WATCHDOG);
        assert_eq!(machine.console_bytes("a\x01b\x03\r"), b"a\x01\x01b\x03\r");
        assert_eq!(machine.console_bytes("echo typed\r"), b"echo typed\r");
    }

    #[test]
    fn the_dump_ends_at_its_last_line_on_any_core() {
        assert!(dump_finished(b"[c0 WATCHDOG] core  processes\r\n[c0 WATCHDOG] end of the watchdog dump\r\n"));
        assert!(dump_finished(b"[c2 WATCHDOG] end of the watchdog dump"));
        assert!(!dump_finished(b"[c0 WATCHDOG] dump asked on the console\r\n[c0 WATCHDOG] core  processes\r\n"));
        // A program that echoes the words is not the kernel's line.
        assert!(!dump_finished(b"echo WATCHDOG] end of the watchdog dump\r\n"));
        assert!(!dump_finished(b""));
    }
}
