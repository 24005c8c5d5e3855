//! `net-malformed-frames`: a test double of the network on the card's other end floods the
//! guest with malformed frames; no kernel may crash or wedge, and the stack must still answer.

use super::{exec, Deferred};
use crate::net::wire::{HostEnd, Report};
use crate::net::Network;
use crate::qemu::{HostAction, HostCall, Machine};
use crate::test::runner::Integration;
use crate::test::serial::printed_in_order;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The run's name in the suite.
pub(super) const NAME: &str = "net-malformed-frames";

/// Cores of the machine: the stack on core 0, a second kernel to show alive after the flood.
const CORES: usize = 2;

/// Markers, printed from arithmetic so that the logged command line never holds them.
const READY: &str = "frames-1-ready";
const ALIVE: &str = "frames-alive-on-1";
const DONE: &str = "frames-2-done";

/// How long the host's exchange may take: under [`crate::qemu::TEST_WATCHDOG`], since the
/// serial console is not read meanwhile. About 25 probes of two answers each under TCG.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(40);

/// How long the run may take.
const TIMEOUT: Duration = Duration::from_secs(150);

/// The guest: `httpd` listens on port 80 (so the SYNs with garbage options reach a listener),
/// the stack's counts before, the marker, the host's go after the flood, the counts after, a
/// program on core 1 and one on core 0.
fn script() -> String {
    "httpd -f -p 80 -h /tmp & cat /proc/reef/net; echo frames-$((1))-ready; read go; cat /proc/reef/net; \
     on 1 sh -c 'grep Cpus_allowed_list /proc/self/status; echo frames-alive-on-$((1))'; \
     grep Cpus_allowed_list /proc/self/status; kill $!; echo frames-$((2))-done"
        .into()
}

pub(super) fn deferred(machine: impl Fn(usize, &str) -> Machine + 'static) -> Deferred {
    Box::new(move || {
        let host = match HostEnd::open() {
            Ok(host) => host,
            Err(why) => return vec![super::unprepared(NAME.into(), &why, &machine)],
        };
        let mut m = machine(CORES, &exec(&script()));
        m.timeout = TIMEOUT;
        m.network = Some(Network::on_wire(host.wire()));
        let outcome: Arc<Mutex<Option<Report>>> = Arc::default();
        let kept = outcome.clone();
        let call = HostCall::new("malformed frames", move || {
            let report = host.exchange(EXCHANGE_LIMIT)?;
            println!("xtask: {NAME}: {}", report.line());
            *kept.lock().expect("the report's lock") = Some(report);
            Ok(())
        });
        m.host_actions = vec![(READY.into(), HostAction::Call(call))];
        m.typed = vec![(READY.into(), "go\n".into())];
        vec![Integration {
            name: NAME.into(),
            machine: m,
            expected_status: 0,
            check: Box::new(move |serial| check(serial, outcome.lock().expect("the report's lock").as_ref())),
        }]
    })
}

/// `frames received: N (B bytes)` lines of `/proc/reef/net`, in order.
fn frames_received(serial: &str) -> Vec<u64> {
    serial
        .lines()
        .filter_map(|line| line.trim().strip_prefix("frames received: "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The verdict: every probe answered (the last one after all the frames), the guest went on
/// after the flood on both cores, and its stack counted every frame QEMU delivered.
fn check(serial: &str, report: Option<&Report>) -> Result<(), String> {
    let report = report.ok_or("the host's exchange left no report")?;
    if let Some(why) = &report.failure {
        return Err(format!("the guest's stack stopped answering: {why} ({})", report.line()));
    }
    if report.probes < 2 || report.probes != report.probes_answered || report.last_answers.is_none() {
        return Err(format!("the probes were not all answered: {}", report.line()));
    }
    printed_in_order(
        serial,
        &[READY, "frames received: ", "Cpus_allowed_list:\t1", ALIVE, "Cpus_allowed_list:\t0", DONE],
    )?;
    let counts = frames_received(serial);
    let [before, after] = counts[..] else {
        return Err(format!("/proc/reef/net was to be shown twice, its frames received are {counts:?}"));
    };
    // Exactly: nothing else is on the wire, QEMU delivers every frame that fits a receive slot
    // (even one shorter than an Ethernet header) and drops the longer ones before the guest.
    if after - before != report.deliverable {
        return Err(format!(
            "the guest's stack counted {} frames received during the exchange, not the {} sent that fit a slot",
            after - before,
            report.deliverable
        ));
    }
    let refused = serial.lines().find(|line| line.trim().starts_with("frames refused: ")).unwrap_or_default();
    println!("xtask: {NAME}: the guest received {} frames ({before} before); {}", after - before, refused.trim());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_fits_the_command_line_and_holds_no_marker() {
        let script = script();
        exec(&script);
        assert!(![READY, ALIVE, DONE].iter().any(|marker| script.contains(marker)), "{script}");
    }

    #[test]
    fn frames_received_are_read_from_the_view() {
        let serial = "frames received: 0 (0 bytes)\nframes sent: 1\n  frames received: 412 (90000 bytes)\n";
        assert_eq!(frames_received(serial), [0, 412]);
    }
}
