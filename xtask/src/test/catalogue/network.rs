//! The network card: busybox `httpd` in the guest fetched by the host through `--forward`, and
//! the host's file server fetched by the guest's `wget` through `--guest-forward`.
//!
//! The same scenario runs on Reef (`net-httpd-forward`) and on the Linux guest (`cargo xtask
//! peer net`), which proves the host's half (QEMU's flags, the forwards, the fetch, the file
//! server) apart from Reef's, and says the two guests pass the same test.

use super::{exec, Deferred};
use crate::linux_guest;
use crate::net::http::FileServer;
use crate::net::{self, Forward, GuestForward, Network};
use crate::qemu::{Accel, HostAction, Machine};
use crate::test::runner::Integration;
use crate::test::serial::printed_in_order;
use crate::tools;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The run's name in the suite.
const NAME: &str = "net-httpd-forward";

/// The guest's web server port, which `--forward` reaches.
const GUEST_PORT: u16 = 80;

/// Cores of the machine; `httpd` runs on core 2, away from the file service on core 0.
const CORES: usize = 4;

/// The guest's file: `seq 1000000 1131071`, 131072 lines of 7 digits and a newline, exactly
/// 1 MiB whose bytes the host knows, so the guest's `sha256sum`, the host's fetch and the
/// expected digest are three independent witnesses.
const GUEST_FILE_FIRST: u32 = 1_000_000;
const GUEST_FILE_LINES: u32 = 131_072;

/// Where the guest's `httpd` serves from, and the file's path below it.
const GUEST_DIRECTORY: &str = "/tmp/www";
const GUEST_FILE: &str = "/big";

/// The host's file the guest fetches through the guest forward, and where `wget` puts it.
const HOST_FILE: &str = "/served";
const FETCHED_IN_GUEST: &str = "/tmp/fetched";

/// What the guest prints when its server runs and it waits for the host's fetch; when its
/// try to reach the host past the forwards failed, as `restrict=on` wants; and at the end.
/// Printed from arithmetic (`$((1))`), so a command line that shows the script (Reef logs its
/// command line) never holds the marker.
const READY: &str = "net-1-ready";
const RESTRICTED: &str = "net-3-restricted-";
const DONE: &str = "net-2-done";

/// How long the guest's `wget` past the forwards may wait before busybox `timeout` ends it
/// (Debian's busybox wget has no `-T`: it takes the option for a crash). Its target is the
/// host's server, which listens: without `restrict=on` the gateway leads to the host's
/// loopback and the `wget` succeeds (tried: "the gateway leads to the host"). With it, QEMU
/// 7.2 refuses the connection (`wget` status 1); a QEMU that dropped it instead would leave
/// `wget` to this timeout (status 143). Those two statuses pass; a crash (139) does not.
const RESTRICTED_WAIT_SECONDS: u32 = 5;

/// The `wget` statuses of [`RESTRICTED_WAIT_SECONDS`] that mean the gateway led nowhere.
const RESTRICTED_STATUSES: [&str; 2] = ["1", "143"];

/// How long a run may take: a boot, 1 MiB each way through QEMU's user network under TCG.
const TIMEOUT: Duration = Duration::from_secs(180);

/// The bytes of the guest's file (`seq 1000000 1131071`).
fn guest_file_bytes() -> Vec<u8> {
    (GUEST_FILE_FIRST..GUEST_FILE_FIRST + GUEST_FILE_LINES).map(|n| format!("{n}\n")).collect::<String>().into_bytes()
}

/// The bytes the host serves: 1 MiB that no simple shift or truncation of itself matches.
fn host_file_bytes() -> Vec<u8> {
    (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

/// One run of the scenario: the host's file server (started before QEMU, which connects to it
/// when it starts, [`GuestForward`]), the forward's host port, and where the fetch lands.
struct Scenario {
    server: FileServer,
    host_port: u16,
    fetched: PathBuf,
}

impl Scenario {
    /// Starts the host's file server for a run of `lifetime` at most.
    fn start(lifetime: Duration) -> Result<Self, String> {
        let server = FileServer::start(vec![(HOST_FILE.into(), host_file_bytes())], 8, lifetime)?;
        let directory = tools::root().join("target/test-net");
        std::fs::create_dir_all(&directory).map_err(|e| format!("creating {}: {e}", directory.display()))?;
        let fetched = directory.join("fetched-from-guest");
        // A file of an earlier run must not pass for this one's fetch.
        let _ = std::fs::remove_file(&fetched);
        Ok(Self { server, host_port: net::free_port()?, fetched })
    }

    /// The card and its two forwards.
    fn network(&self) -> Network {
        Network {
            forwards: vec![Forward { host_port: self.host_port, guest_port: GUEST_PORT }],
            guest_forwards: vec![GuestForward { guest_port: GUEST_PORT, host_port: self.server.port() }],
            wire: None,
        }
    }

    /// The guest's script; `on_core_2` runs a program on core 2 (Reef's `on 2 `, Linux's
    /// `taskset 4 `); `httpd` drops to `user` once it listens (`-u`; none: it stays root). The file is made and hashed, `httpd` started, the marker printed; once
    /// the host has fetched the file it types a line, and the guest fetches the host's file
    /// through the guest forward, pings the gateway and the loopback (busybox `ping`, raw ICMP
    /// sockets), shows the interface and the routes (`ifconfig`, `route`), then tries the same server through the gateway, which
    /// without `restrict=on` would be the host's loopback, and must fail.
    fn script(&self, on_core_2: &str, user: &str) -> String {
        format!(
            "set -e; mkdir -p {GUEST_DIRECTORY}; seq {GUEST_FILE_FIRST} {last} > {GUEST_DIRECTORY}{GUEST_FILE}; \
             wc -c {GUEST_DIRECTORY}{GUEST_FILE}; sha256sum {GUEST_DIRECTORY}{GUEST_FILE}; \
             {on_core_2}httpd -f {user}-p {GUEST_PORT} -h {GUEST_DIRECTORY} & echo net-$((1))-ready; read go; \
             wget -q -O {FETCHED_IN_GUEST} http://{address}{HOST_FILE}; sha256sum {FETCHED_IN_GUEST}; \
             ping -c 2 {gateway}; ping -c 2 127.0.0.1; ifconfig eth0; route -n; \
             if timeout {RESTRICTED_WAIT_SECONDS} wget -q -O /tmp/leak http://{gateway}:{server}{HOST_FILE}; \
             then echo the gateway leads to the host; else echo net-$((3))-restricted-$?; fi; \
             kill $!; echo net-$((2))-done",
            last = GUEST_FILE_FIRST + GUEST_FILE_LINES - 1,
            address = net::GUEST_FORWARD_ADDRESS,
            gateway = net::GATEWAY,
            server = self.server.port(),
            user = if user.is_empty() { String::new() } else { format!("-u {user} ") },
        )
    }

    /// `machine` with the card, the host's fetch at the marker and the line typed after it.
    fn equip(&self, machine: &mut Machine) {
        machine.network = Some(self.network());
        machine.host_actions = vec![(
            READY.into(),
            HostAction::Fetch { port: self.host_port, path: GUEST_FILE.into(), save_to: self.fetched.clone() },
        )];
        machine.typed = vec![(READY.into(), "go\n".into())];
    }

    /// The verdict: the guest hashed the file the host expects, the host fetched those bytes
    /// through the forward, and the guest's `wget` got the host's file whole.
    fn check(&self, serial: &str) -> Result<(), String> {
        let guest_digest = hex_digest(&guest_file_bytes());
        let host_digest = hex_digest(&host_file_bytes());
        let outcome = printed_in_order(
            serial,
            &[
                &format!("{} {GUEST_DIRECTORY}{GUEST_FILE}", 1 << 20),
                &format!("{guest_digest}  {GUEST_DIRECTORY}{GUEST_FILE}"),
                READY,
                &format!("{host_digest}  {FETCHED_IN_GUEST}"),
                // busybox `ping`: the gateway (QEMU answers for it), then the loopback.
                &format!("PING {} ({}): 56 data bytes", net::GATEWAY, net::GATEWAY),
                "2 packets transmitted, 2 packets received, 0% packet loss",
                "PING 127.0.0.1 (127.0.0.1): 56 data bytes",
                "2 packets transmitted, 2 packets received, 0% packet loss",
                // busybox `ifconfig` (the interface ioctls) and `route` (`/proc/net/route`).
                "inet addr:10.0.2.15",
                "Mask:255.255.255.0",
                "0.0.0.0         10.0.2.2        0.0.0.0         UG",
                RESTRICTED,
                DONE,
            ],
        );
        let fetched = std::fs::read(&self.fetched)
            .map_err(|e| format!("the host's fetch through the forward left no {}: {e}", self.fetched.display()));
        let served = self.server.served();
        let said = |why: String| format!("{why} (the host's server answered: {served:?})");
        outcome.map_err(said)?;
        let status = serial.lines().find_map(|line| line.trim().strip_prefix(RESTRICTED)).unwrap_or_default();
        if !RESTRICTED_STATUSES.contains(&status) {
            return Err(format!(
                "the guest's wget past the forwards ended with status {status}, not refused (1) or timed out (143)"
            ));
        }
        let fetched = fetched.map_err(said)?;
        if hex_digest(&fetched) != guest_digest {
            return Err(format!(
                "the host fetched {} bytes through 127.0.0.1:{} whose sha256 is {}, not the guest's {guest_digest}",
                fetched.len(),
                self.host_port,
                hex_digest(&fetched)
            ));
        }
        if !served.iter().any(|request| request.path == HOST_FILE && request.status == 200) {
            return Err(said(format!("the guest's wget of {HOST_FILE} never reached the host's server")));
        }
        Ok(())
    }
}

/// The run on Reef, deferred so that the host's server starts only when its turn comes (QEMU
/// connects to it at its start, and the server's lifetime is the run's).
pub(super) fn deferred(machine: impl Fn(usize, &str) -> Machine + Clone + 'static) -> Vec<Deferred> {
    let mut runs = Vec::new();
    if super::is_selected(FLOOD_NAME) {
        runs.push(flood(machine.clone()));
    }
    if super::is_selected(WORKERS_NAME) {
        runs.push(workers(machine.clone()));
    }
    if !super::is_selected(NAME) {
        return runs;
    }
    runs.push(Box::new(move || {
        let scenario = match Scenario::start(TIMEOUT + Duration::from_secs(30)) {
            Ok(scenario) => scenario,
            Err(why) => return vec![super::unprepared(NAME.into(), &why, &machine)],
        };
        let mut m = machine(CORES, &exec(&scenario.script("on 2 ", "reef")));
        m.timeout = TIMEOUT;
        scenario.equip(&mut m);
        vec![Integration {
            name: NAME.into(),
            machine: m,
            expected_status: 0,
            check: Box::new(move |serial| scenario.check(serial)),
        }]
    }));
    runs
}

/// What a run through a `--forward` needs on the host: a free port for the forward's host
/// end, and the paths in `target/test-net` where its host actions leave what they got (`names`),
/// none of them left from an earlier run.
fn forwarded_run<const N: usize>(names: [&str; N]) -> Result<(u16, [PathBuf; N]), String> {
    let directory = tools::root().join("target/test-net");
    std::fs::create_dir_all(&directory).map_err(|e| format!("{}: {e}", directory.display()))?;
    let paths = names.map(|name| directory.join(name));
    for path in &paths {
        match std::fs::remove_file(path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("{}: {error}", path.display()));
            }
            _ => {}
        }
    }
    Ok((net::free_port()?, paths))
}

/// The flood's run in the suite.
const FLOOD_NAME: &str = "net-flood-and-resets";
/// Connections the host opens at once, and how many of them it resets mid-answer.
const FLOOD_CONNECTIONS: usize = 48;
const FLOOD_CUT: usize = 12;
/// The flood's file: `seq 1000000 1008191`, 8192 lines, 64 KiB.
const FLOOD_FILE_LINES: u32 = 8192;
/// Markers of the flood's guest script (from arithmetic, as [`READY`]).
const FLOOD_READY: &str = "net-flood-1-ready";
const FLOOD_DONE: &str = "net-flood-2-done";

/// `net-flood-and-resets`: busybox `httpd` on core 1 serves 64 KiB to 48 connections the
/// host opens at once through `--forward`, 12 of which the host resets after the first 4 KiB;
/// more SYNs than the listener takes at once (its backlog) must be refused or answered, never
/// hang or crash a kernel. Then the host fetches the file once more (the server still answers,
/// whole), the guest fetches it over the loopback, stops `httpd`, and the stack and the file
/// service must hold nothing of it: no link, no listening socket, no smoltcp socket, no socket
/// of the service.
fn flood(machine: impl Fn(usize, &str) -> Machine + 'static) -> Deferred {
    Box::new(move || {
        let (host_port, [counts, fetched]) = match forwarded_run(["flood-counts", "after-flood"]) {
            Ok(prepared) => prepared,
            Err(why) => return vec![super::unprepared(FLOOD_NAME.into(), &why, &machine)],
        };
        let script = format!(
            "set -e; mkdir -p {GUEST_DIRECTORY}; seq {GUEST_FILE_FIRST} {last} > {GUEST_DIRECTORY}{GUEST_FILE}; \
             on 1 httpd -f -p {GUEST_PORT} -h {GUEST_DIRECTORY} & echo net-flood-$((1))-ready; read go; \
             wget -q -O /tmp/loop http://127.0.0.1{GUEST_FILE}; sha256sum /tmp/loop; kill $!; sleep 1; \
             cat /proc/reef/net /proc/reef/files; echo net-flood-$((2))-done",
            last = GUEST_FILE_FIRST + FLOOD_FILE_LINES - 1,
        );
        let mut m = machine(CORES, &exec(&script));
        m.timeout = TIMEOUT;
        m.network =
            Some(Network { forwards: vec![Forward { host_port, guest_port: GUEST_PORT }], ..Network::default() });
        m.host_actions = vec![
            (
                FLOOD_READY.into(),
                HostAction::Flood {
                    port: host_port,
                    path: GUEST_FILE.into(),
                    connections: FLOOD_CONNECTIONS,
                    cut: FLOOD_CUT,
                    // Past the host's third SYN retry (7 s): a connection still waiting then
                    // counts as refused.
                    timeout: Duration::from_secs(10),
                    save_to: counts.clone(),
                },
            ),
            (
                FLOOD_READY.into(),
                HostAction::Fetch { port: host_port, path: GUEST_FILE.into(), save_to: fetched.clone() },
            ),
        ];
        m.typed = vec![(FLOOD_READY.into(), "go\n".into())];
        vec![Integration {
            name: FLOOD_NAME.into(),
            machine: m,
            expected_status: 0,
            check: Box::new(move |serial| check_flood(serial, &counts, &fetched)),
        }]
    })
}

/// The shared listener's run in the suite.
const WORKERS_NAME: &str = "net-webd-workers-on-4-cores";
/// Connections the host opens at once to the workers: no more than a listener takes between
/// two runs of the stack (16), so that none is refused and every one must be answered.
const WORKERS_CONNECTIONS: usize = 16;
const WORKERS_READY: &str = "net-workers-1-ready";
const WORKERS_DONE: &str = "net-workers-2-done";

/// `net-webd-workers-on-4-cores`: `webd --workers 4` listens on port 80 and forks three
/// workers that share its listening socket; the guest moves them to cores 1, 2 and 3 (the
/// parent stays on core 0), shows where each runs, and the host opens 16 connections at once
/// through `--forward`, each asking for 1 KiB. Every connection must be answered whole, and
/// the workers' totals (printed at SIGTERM) must add up to exactly 16 requests: each
/// connection accepted once, by one worker on one of the four kernels.
fn workers(machine: impl Fn(usize, &str) -> Machine + 'static) -> Deferred {
    Box::new(move || {
        let (host_port, [counts]) = match forwarded_run(["workers-counts"]) {
            Ok(prepared) => prepared,
            Err(why) => return vec![super::unprepared(WORKERS_NAME.into(), &why, &machine)],
        };
        let script = format!(
            "webd --port {GUEST_PORT} --workers 4 > /tmp/webd.log 2>&1 & parent=$!; \
             until grep -q listening /tmp/webd.log; do sleep 0.2; done; core=1; \
             for pid in $(pidof webd); do if [ $pid != $parent ]; then move $pid $core; core=$((core+1)); fi; done; \
             for pid in $(pidof webd); do grep Cpus_allowed_list /proc/$pid/status; done; \
             echo net-workers-$((1))-ready; read go; kill $parent; wait; cat /tmp/webd.log; \
             cat /proc/reef/net; echo net-workers-$((2))-done"
        );
        let mut m = machine(CORES, &exec(&script));
        m.timeout = TIMEOUT;
        m.network =
            Some(Network { forwards: vec![Forward { host_port, guest_port: GUEST_PORT }], ..Network::default() });
        m.host_actions = vec![(
            WORKERS_READY.into(),
            HostAction::Flood {
                port: host_port,
                path: "/kib/1".into(),
                connections: WORKERS_CONNECTIONS,
                cut: 0,
                // Every connection must be answered: long enough for the host's SYN retries
                // behind `hostfwd`'s backlog of 1 (1, 3, 7, 15 s).
                timeout: Duration::from_secs(30),
                save_to: counts.clone(),
            },
        )];
        m.typed = vec![(WORKERS_READY.into(), "go\n".into())];
        vec![Integration {
            name: WORKERS_NAME.into(),
            machine: m,
            expected_status: 0,
            check: Box::new(move |serial| check_workers(serial, &counts)),
        }]
    })
}

/// The shared listener's verdict (see [`workers`]).
fn check_workers(serial: &str, counts: &std::path::Path) -> Result<(), String> {
    printed_in_order(serial, &[WORKERS_READY, WORKERS_DONE])?;
    let mut cores: Vec<&str> =
        serial.lines().filter_map(|line| line.trim().strip_prefix("Cpus_allowed_list:")).map(str::trim).collect();
    cores.sort_unstable();
    if cores != ["0", "1", "2", "3"] {
        return Err(format!("webd's four processes run on cores {cores:?}, not one on each of 0, 1, 2 and 3"));
    }
    let counts = std::fs::read_to_string(counts).map_err(|e| format!("the host's connections left no counts: {e}"))?;
    if counts.trim() != format!("answered={WORKERS_CONNECTIONS} unanswered=0 cut=0") {
        return Err(format!("of {WORKERS_CONNECTIONS} connections to the workers, the host got {counts}"));
    }
    // `webd: worker W pid P: R requests, C connections, ...`
    let totals: Vec<u64> = serial
        .lines()
        .filter(|line| line.trim_start().starts_with("webd: worker "))
        .filter_map(|line| line.split(": ").nth(2)?.split_whitespace().next()?.parse().ok())
        .collect();
    if totals.len() != 4 || totals.iter().sum::<u64>() != WORKERS_CONNECTIONS as u64 {
        return Err(format!(
            "the workers' totals are {totals:?} requests: four workers answering {WORKERS_CONNECTIONS} in all were \
             expected"
        ));
    }
    println!("xtask: {WORKERS_NAME}: requests per worker {totals:?}");
    Ok(())
}

/// The flood's verdict (see [`flood`]).
fn check_flood(serial: &str, counts: &std::path::Path, fetched: &std::path::Path) -> Result<(), String> {
    let file: String = (GUEST_FILE_FIRST..GUEST_FILE_FIRST + FLOOD_FILE_LINES).map(|n| format!("{n}\n")).collect();
    let digest = hex_digest(file.as_bytes());
    printed_in_order(serial, &[FLOOD_READY, &format!("{digest}  /tmp/loop"), FLOOD_DONE])?;
    let counts = std::fs::read_to_string(counts).map_err(|e| format!("the flood left no counts: {e}"))?;
    let count = |key: &str| -> Result<usize, String> {
        counts
            .split_whitespace()
            .find_map(|field| field.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
            .ok_or_else(|| format!("no {key} in the flood's counts `{counts}`"))
    };
    let (answered, unanswered, cut) = (count("answered")?, count("unanswered")?, count("cut")?);
    if cut != FLOOD_CUT || answered + unanswered != FLOOD_CONNECTIONS - FLOOD_CUT || answered == 0 {
        return Err(format!(
            "of {FLOOD_CONNECTIONS} connections ({FLOOD_CUT} reset by the host), the flood got {counts}: every \
             other one must be answered whole or refused, and some answered"
        ));
    }
    let after = std::fs::read(fetched).map_err(|e| format!("the fetch after the flood left nothing: {e}"))?;
    if hex_digest(&after) != digest {
        return Err(format!("the fetch after the flood got {} bytes that are not the file", after.len()));
    }
    let stack = serial.lines().find(|line| line.trim_start().starts_with("tcp: ")).unwrap_or_default();
    if !stack.contains("tcp: 0 links, 0 listening sockets, 0 of ") {
        return Err(format!("after httpd stopped the stack still holds connections: `{}`", stack.trim()));
    }
    let files = serial.lines().find(|line| line.contains("open files ")).unwrap_or_default();
    if !files.contains("sockets 0,") {
        return Err(format!("after httpd stopped the file service still holds sockets: `{}`", files.trim()));
    }
    println!("xtask: {FLOOD_NAME}: {counts}; the stack: {}", stack.trim());
    Ok(())
}

/// `cargo xtask peer net [--accel kvm|tcg]`: the scenario in the Linux guest (Debian's kernel
/// with its virtio-mmio and virtio-net modules, 10.0.2.15/24 by busybox `ip`), judged as
/// Reef's run is.
pub fn peer(arguments: &[String]) -> Result<u8, String> {
    let mut accel = Accel::detect();
    match arguments {
        [] => {}
        [flag, value] if flag == "--accel" => accel = Accel::parse(value)?,
        _ => return Err("peer net takes only --accel kvm|tcg".into()),
    }
    let (modules, names) = linux_guest::network_modules()?;
    let mut lines = linux_guest::load_modules(&names);
    lines.extend(linux_guest::configure_network());
    // In a subshell: `set -e` ends it, not `/init`, which must still say it is done.
    let scenario = Scenario::start(TIMEOUT + Duration::from_secs(30))?;
    lines.push(format!("( {} )", scenario.script("taskset 4 ", "")));
    let mut machine = Machine::new(CORES);
    machine.accel = accel;
    machine.timeout = TIMEOUT;
    machine.kernel_args = linux_guest::LINUX_KERNEL_ARGUMENTS.into();
    scenario.equip(&mut machine);
    let started = Instant::now();
    let serial = linux_guest::run_program_with_host_steps(&machine, &[], &modules, &lines.join("\n"))?;
    let log = scenario.fetched.with_file_name("peer-net.log");
    std::fs::write(&log, &serial).map_err(|e| format!("writing {}: {e}", log.display()))?;
    eprintln!("xtask: the Linux guest's serial log is in {}", log.display());
    match scenario.check(&serial) {
        Ok(()) => {
            println!("PASS {NAME} on the Linux guest ({:.1} s)", started.elapsed().as_secs_f64());
            Ok(0)
        }
        Err(why) => {
            println!("FAIL {NAME} on the Linux guest: {why}\n----- serial log -----\n{serial}----------------------");
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_file_is_one_mebibyte_of_known_lines() {
        let bytes = guest_file_bytes();
        assert_eq!(bytes.len(), 1 << 20);
        assert!(bytes.starts_with(b"1000000\n1000001\n"));
        assert!(bytes.ends_with(b"1131071\n"));
        assert_eq!(host_file_bytes().len(), 1 << 20);
    }

    /// The script fits Reef's kernel command line and holds neither marker, which its output
    /// alone must show.
    #[test]
    fn the_script_fits_the_command_line_and_holds_no_marker() {
        let scenario = Scenario::start(Duration::from_secs(1)).unwrap();
        let script = scenario.script("on 2 ", "reef");
        exec(&script);
        assert!(![READY, RESTRICTED, DONE].iter().any(|marker| script.contains(marker)), "{script}");
        assert!(script.contains("seq 1000000 1131071 > /tmp/www/big"), "{script}");
        assert!(script.contains("wget -q -O /tmp/fetched http://10.0.2.100/served"), "{script}");
        assert!(script.contains("httpd -f -u reef -p 80"), "{script}");
    }
}
