//! A frame wire: the guest's network card with the host's test at its other end, one Ethernet
//! frame a UDP datagram on 127.0.0.1 (QEMU's `-netdev socket,udp=...`), for
//! `net-malformed-frames`.
//!
//! The host end sends the malformed frames of [`super::malformed`] in batches and, after each,
//! a probe: an ARP request for the guest's address and an ICMP echo request, which the guest's
//! stack answers by itself. Frames reach the guest in the order they are sent (one socket, one
//! queue in QEMU, one receive ring), so a probe answered means every frame before it was taken
//! and the stack still works; a batch is never more than the ring's 64 slots, so QEMU never
//! has to hold back what the host sent (and the host's socket buffer never drops it).

use super::frames::{self, Arp, Echo, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use super::malformed::{self, Addresses, Malformed};
use super::{GATEWAY, GUEST_ADDRESS, NETDEV_ID};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

/// Both UDP ports of a frame wire, each on 127.0.0.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameWire {
    /// Where the host's test listens and QEMU sends the guest's frames (QEMU's `udp=`).
    pub host_port: u16,
    /// Where QEMU listens for the host's frames (QEMU's `localaddr=`).
    pub qemu_port: u16,
}

impl FrameWire {
    /// QEMU 7.2's `-netdev` value: a UDP tunnel between two ports of the host's loopback, so
    /// nothing but the host's own test can send the guest a frame or read one of its frames.
    pub fn netdev(self) -> String {
        format!("socket,id={NETDEV_ID},udp=127.0.0.1:{},localaddr=127.0.0.1:{}", self.host_port, self.qemu_port)
    }
}

/// The host's MAC on the wire: locally administered, QEMU's user network's pattern for its
/// gateway (52:55 and the address).
pub const HOST_MAC: [u8; 6] = [0x52, 0x55, 10, 0, 2, 2];

/// The identifier of the host's echo requests.
const ECHO_IDENTIFIER: u16 = 0x5245;

/// Malformed frames between two probes: well under the receive ring's 64 slots.
const BATCH: usize = 16;

/// How long a probe waits for each answer, and how often it asks again meanwhile.
const PROBE_TIMEOUT: Duration = Duration::from_secs(6);
const PROBE_AGAIN: Duration = Duration::from_millis(750);

/// The seed of the catalogue's random bytes.
const SEED: u64 = 30;

/// The host's end of a frame wire: a UDP socket on 127.0.0.1 that hears only QEMU's end.
pub struct HostEnd {
    socket: UdpSocket,
    wire: FrameWire,
}

/// What the host's end did and heard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Frames sent that fit a receive slot (malformed, probes, answers to the guest's ARP),
    /// all of which QEMU delivers.
    pub deliverable: u64,
    /// Malformed frames among them.
    pub malformed: u64,
    /// Frames sent that are longer than a receive slot (QEMU drops them).
    pub oversized: u64,
    /// Probes sent, and probes whose ARP reply and echo reply both came.
    pub probes: u64,
    pub probes_answered: u64,
    /// The guest's ARP requests for the host's address the host answered.
    pub arp_requests_answered: u64,
    /// Other frames from the guest (answers to malformed frames that were valid enough).
    pub other_frames: u64,
    /// The guest's MAC, from its first ARP reply.
    pub guest_mac: Option<[u8; 6]>,
    /// The last probe's two answers, as read.
    pub last_answers: Option<(Arp, Echo)>,
    /// Why the exchange stopped early: the probe that went unanswered and the frames before it.
    pub failure: Option<String>,
}

impl Report {
    /// One line for the log.
    pub fn line(&self) -> String {
        format!(
            "{} frames sent ({} malformed, {} oversized not counted), {}/{} probes answered, {} ARP requests of \
             the guest answered, {} other frames from the guest{}",
            self.deliverable,
            self.malformed,
            self.oversized,
            self.probes_answered,
            self.probes,
            self.arp_requests_answered,
            self.other_frames,
            self.failure.as_ref().map(|why| format!("; stopped: {why}")).unwrap_or_default()
        )
    }
}

impl HostEnd {
    /// Binds the host's port on 127.0.0.1 and picks QEMU's (a port that was free a moment ago).
    pub fn open() -> Result<Self, String> {
        let localhost = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
        let socket = UdpSocket::bind(localhost).map_err(|e| format!("binding a UDP socket on 127.0.0.1: {e}"))?;
        let host_port = socket.local_addr().map_err(|e| e.to_string())?.port();
        let qemu_port = UdpSocket::bind(localhost)
            .and_then(|other| other.local_addr())
            .map_err(|e| format!("finding a free UDP port on 127.0.0.1: {e}"))?
            .port();
        // Only QEMU's end is heard: nothing else on the machine can pass for the guest.
        socket
            .connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, qemu_port))
            .map_err(|e| format!("connecting to 127.0.0.1:{qemu_port}: {e}"))?;
        Ok(Self { socket, wire: FrameWire { host_port, qemu_port } })
    }

    pub fn wire(&self) -> FrameWire {
        self.wire
    }

    /// The malformed frames, a probe after each batch, the oversized frames and a last probe,
    /// within about `limit`; stops at the first probe that goes unanswered.
    pub fn exchange(&self, limit: Duration) -> Result<Report, String> {
        self.exchange_with(limit, |_| {})
    }

    /// [`Self::exchange`], with `spoil` applied to every probe's echo request before it is sent
    /// (a test of the test: a spoiled probe must leave the exchange failed).
    pub fn exchange_with(&self, limit: Duration, spoil: impl Fn(&mut Vec<u8>)) -> Result<Report, String> {
        let deadline = Instant::now() + limit;
        let mut report = Report::default();
        self.socket.set_read_timeout(Some(Duration::from_millis(50))).map_err(|e| e.to_string())?;
        if let Err(why) = self.probe(&mut report, 0, deadline, &spoil)? {
            report.failure = Some(format!("before any malformed frame: {why}"));
            return Ok(report);
        }
        let guest_mac = report.guest_mac.expect("an answered probe learnt it");
        let addresses = Addresses { guest_mac, host_mac: HOST_MAC, guest: GUEST_ADDRESS, host: GATEWAY };
        let catalogue = malformed::catalogue(&addresses, SEED);
        let oversized = malformed::oversized(&addresses, SEED);
        let batches = catalogue.chunks(BATCH).chain(std::iter::once(&oversized[..]));
        for (index, batch) in batches.enumerate() {
            for Malformed { frame, .. } in batch {
                self.send(&mut report, frame)?;
                if frame.len() <= malformed::MOST_DELIVERED {
                    report.malformed += 1;
                }
            }
            if let Err(why) = self.probe(&mut report, index as u16 + 1, deadline, &spoil)? {
                let kinds: Vec<&str> = batch.iter().map(|m| m.what).collect();
                report.failure = Some(format!("{why}, after the batch {index} of {kinds:?}"));
                return Ok(report);
            }
        }
        Ok(report)
    }

    /// Sends one frame, counted.
    fn send(&self, report: &mut Report, frame: &[u8]) -> Result<(), String> {
        if frame.len() <= malformed::MOST_DELIVERED {
            report.deliverable += 1;
        } else {
            report.oversized += 1;
        }
        match self.socket.send(frame) {
            Ok(_) => Ok(()),
            Err(e) => Err(format!(
                "sending a frame of {} bytes to QEMU at 127.0.0.1:{}: {e}",
                frame.len(),
                self.wire.qemu_port
            )),
        }
    }

    /// One probe: an ARP request for the guest's address until its reply comes, then an echo
    /// request until its reply comes. `Ok(Err(why))`: an answer did not come in time.
    fn probe(
        &self,
        report: &mut Report,
        sequence: u16,
        deadline: Instant,
        spoil: &impl Fn(&mut Vec<u8>),
    ) -> Result<Result<(), String>, String> {
        report.probes += 1;
        let request = frames::ethernet(
            frames::BROADCAST,
            HOST_MAC,
            ETHERTYPE_ARP,
            &frames::arp(frames::ARP_REQUEST, (HOST_MAC, GATEWAY), ([0; 6], GUEST_ADDRESS)),
        );
        let wanted_arp = |arp: &Arp| {
            arp.operation == frames::ARP_REPLY
                && arp.sender.1 == GUEST_ADDRESS
                && arp.target == (HOST_MAC, GATEWAY)
                && arp.destination == HOST_MAC
        };
        let Some(Heard::Arp(arp)) = self.ask(report, &request, deadline, &|heard| match heard {
            Heard::Arp(arp) => wanted_arp(arp),
            Heard::Echo(_) => false,
        })?
        else {
            return Ok(Err(format!("probe {sequence}: no ARP reply for {GUEST_ADDRESS}")));
        };
        let guest_mac = arp.sender.0;
        report.guest_mac.get_or_insert(guest_mac);
        let data: Vec<u8> = (0..32).map(|i| sequence as u8 ^ i).collect();
        let message = frames::icmp_echo(frames::ICMP_ECHO_REQUEST, ECHO_IDENTIFIER, sequence, &data);
        let mut echo = frames::ethernet(
            guest_mac,
            HOST_MAC,
            ETHERTYPE_IPV4,
            &frames::ipv4(frames::PROTOCOL_ICMP, GATEWAY, GUEST_ADDRESS, sequence, &message),
        );
        spoil(&mut echo);
        let Some(Heard::Echo(reply)) = self.ask(report, &echo, deadline, &|heard| match heard {
            Heard::Echo(reply) => {
                reply.kind == frames::ICMP_ECHO_REPLY
                    && (reply.source, reply.destination) == (GUEST_ADDRESS, GATEWAY)
                    && (reply.source_mac, reply.destination_mac) == (guest_mac, HOST_MAC)
                    && (reply.identifier, reply.sequence) == (ECHO_IDENTIFIER, sequence)
                    && reply.data == data
            }
            Heard::Arp(_) => false,
        })?
        else {
            return Ok(Err(format!("probe {sequence}: no echo reply from {GUEST_ADDRESS}")));
        };
        report.probes_answered += 1;
        report.last_answers = Some((arp, reply));
        Ok(Ok(()))
    }

    /// Sends `frame` and listens until `wanted` says yes to something heard, sending it again
    /// every [`PROBE_AGAIN`]; answers the guest's ARP requests for the host meanwhile.
    fn ask(
        &self,
        report: &mut Report,
        frame: &[u8],
        deadline: Instant,
        wanted: &dyn Fn(&Heard) -> bool,
    ) -> Result<Option<Heard>, String> {
        let give_up = (Instant::now() + PROBE_TIMEOUT).min(deadline);
        let mut buffer = vec![0u8; 65536];
        loop {
            self.send(report, frame)?;
            let again = Instant::now() + PROBE_AGAIN;
            while Instant::now() < again.min(give_up) {
                let length = match self.socket.recv(&mut buffer) {
                    Ok(length) => length,
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        continue;
                    }
                    // Before QEMU's socket exists, a send may come back refused: not fatal.
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(format!("reading 127.0.0.1:{}: {e}", self.wire.host_port)),
                };
                let received = &buffer[..length];
                let heard = if let Some(arp) = frames::parse_arp(received) {
                    if arp.operation == frames::ARP_REQUEST && arp.target.1 == GATEWAY {
                        let answer = frames::ethernet(
                            arp.sender.0,
                            HOST_MAC,
                            ETHERTYPE_ARP,
                            &frames::arp(frames::ARP_REPLY, (HOST_MAC, GATEWAY), arp.sender),
                        );
                        self.send(report, &answer)?;
                        report.arp_requests_answered += 1;
                        continue;
                    }
                    Heard::Arp(arp)
                } else if let Some(echo) = frames::parse_echo(received) {
                    Heard::Echo(echo)
                } else {
                    report.other_frames += 1;
                    continue;
                };
                if wanted(&heard) {
                    return Ok(Some(heard));
                }
                report.other_frames += 1;
            }
            if Instant::now() >= give_up {
                return Ok(None);
            }
        }
    }
}

/// A frame from the guest the host may be waiting for.
enum Heard {
    Arp(Arp),
    Echo(Echo),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_netdev_is_a_udp_tunnel_on_the_loopback() {
        let wire = FrameWire { host_port: 40000, qemu_port: 40001 };
        assert_eq!(wire.netdev(), "socket,id=net0,udp=127.0.0.1:40000,localaddr=127.0.0.1:40001");
    }

    /// The host end against a stand-in for the guest on the loopback: a thread that answers
    /// ARP and echo requests as a stack would, and counts what it got. A stand-in that stops
    /// answering echoes leaves the exchange failed, with the batch named.
    #[test]
    fn the_exchange_passes_with_an_answering_peer_and_fails_without() {
        for answers_echoes in [true, false] {
            let host = HostEnd::open().unwrap();
            let wire = host.wire();
            let peer = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, wire.qemu_port)).unwrap();
            peer.connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, wire.host_port)).unwrap();
            peer.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let guest_mac = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
            let stand_in = std::thread::spawn(move || {
                let (mut received, mut buffer) = (0u64, vec![0u8; 65536]);
                while let Ok(length) = peer.recv(&mut buffer) {
                    received += 1;
                    let frame = &buffer[..length];
                    if let Some(arp) = frames::parse_arp(frame).filter(|a| a.target.1 == GUEST_ADDRESS) {
                        let reply = frames::arp(frames::ARP_REPLY, (guest_mac, GUEST_ADDRESS), arp.sender);
                        peer.send(&frames::ethernet(arp.sender.0, guest_mac, ETHERTYPE_ARP, &reply)).unwrap();
                    }
                    let echo = frames::parse_echo(frame).filter(|e| e.identifier == ECHO_IDENTIFIER);
                    if let Some(echo) = echo.filter(|_| answers_echoes || received < 3) {
                        let message =
                            frames::icmp_echo(frames::ICMP_ECHO_REPLY, echo.identifier, echo.sequence, &echo.data);
                        let packet = frames::ipv4(frames::PROTOCOL_ICMP, GUEST_ADDRESS, echo.source, 1, &message);
                        peer.send(&frames::ethernet(echo.source_mac, guest_mac, ETHERTYPE_IPV4, &packet)).unwrap();
                    }
                }
                received
            });
            let report = host.exchange(Duration::from_secs(30)).unwrap();
            let received = stand_in.join().unwrap();
            assert_eq!(report.guest_mac, Some(guest_mac));
            if answers_echoes {
                assert_eq!(report.failure, None, "{}", report.line());
                assert_eq!(report.probes, report.probes_answered);
                assert!(report.malformed >= 300, "{}", report.line());
                assert_eq!(received, report.deliverable + report.oversized);
                let (arp, echo) = report.last_answers.unwrap();
                assert_eq!((arp.sender.1, echo.source), (GUEST_ADDRESS, GUEST_ADDRESS));
            } else {
                let failure = report.failure.unwrap();
                assert!(failure.contains("probe 1: no echo reply"), "{failure}");
                assert!(failure.contains("shorter than an Ethernet header"), "{failure}");
            }
        }
    }
}
