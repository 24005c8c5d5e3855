//! Raw ICMP sockets (`socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)`, root's only, as Linux without
//! `CAP_NET_RAW`): what busybox `ping` sends its echo requests on. A process writes whole
//! ICMP messages (its own header and checksum) and reads IPv4 packets, the IP header in front,
//! as a raw socket reads them on Linux.
//!
//! To an address of this machine the service answers itself, as Linux's loopback does: every
//! raw ICMP socket reads the message sent and, for an echo request, the echo reply. Beyond the
//! machine the network stack sends it (a smoltcp ICMP socket bound to the message's
//! identifier, so it hears the replies to it).

use super::inet::Endpoint;
use super::INET;
use crate::fs::service::{Errno, Outcome, Reply, Service};
use alloc::vec::Vec;
use linux_raw_sys::errno;

/// `SOCK_RAW`.
pub(super) const RAW: u64 = 3;
/// ICMP's types of an echo request and its reply.
const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
/// The bytes of an ICMP header (type, code, checksum, and four of the message's own).
const HEADER: usize = 8;
/// The longest ICMP message over IPv4: 65535 less the IP header.
const MOST_MESSAGE: usize = 65515;
/// What the IPv4 header of a packet read says about its sender: `IPPROTO_ICMP`, and the hop
/// limit of a packet that crossed nothing.
const PROTOCOL: u8 = 1;
const TIME_TO_LIVE: u8 = 64;

/// The Internet checksum (RFC 1071) of `bytes`.
pub(super) fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for pair in bytes.chunks(2) {
        let word = u16::from_be_bytes([pair[0], pair.get(1).copied().unwrap_or(0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// `payload` from `source` to `destination` as an IPv4 packet: a 20-byte header in front.
pub(super) fn ipv4_packet(source: [u8; 4], destination: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut packet = Vec::with_capacity(usize::from(total));
    packet.extend_from_slice(&[0x45, 0]);
    packet.extend_from_slice(&total.to_be_bytes());
    // Identification 0, "don't fragment".
    packet.extend_from_slice(&[0, 0, 0x40, 0, TIME_TO_LIVE, PROTOCOL, 0, 0]);
    packet.extend_from_slice(&source);
    packet.extend_from_slice(&destination);
    let checksum = internet_checksum(&packet);
    packet[10..12].copy_from_slice(&checksum.to_be_bytes());
    packet.extend_from_slice(payload);
    packet
}

impl Service {
    /// Whether socket `id` is a raw ICMP socket.
    pub(in crate::fs::service) fn is_raw(&self, id: u64) -> bool {
        self.sockets.get(&id).is_some_and(|socket| socket.family == INET && socket.kind == RAW)
    }

    /// Sends the ICMP message `message` from raw socket `id` to `target`: its length.
    pub(super) fn raw_send(&mut self, id: u64, target: Endpoint, message: &[u8]) -> Result<Outcome, Errno> {
        if message.len() < HEADER {
            return Err(errno::EINVAL);
        }
        if message.len() > MOST_MESSAGE {
            return Err(errno::EMSGSIZE);
        }
        if !self.is_local(target.address) {
            self.network_send_icmp(id, target.address, message)?;
            return Ok(Outcome::Done(Reply::value(0, message.len() as u64)));
        }
        // This machine: every raw ICMP socket reads what was sent, then the answer.
        let address = target.address;
        self.deliver_icmp(None, address, address, message);
        self.count_loopback(message.len());
        if message[0] == ECHO_REQUEST && message[1] == 0 {
            let mut reply = message.to_vec();
            reply[0] = ECHO_REPLY;
            reply[2..4].copy_from_slice(&[0, 0]);
            let checksum = internet_checksum(&reply);
            reply[2..4].copy_from_slice(&checksum.to_be_bytes());
            self.deliver_icmp(None, address, address, &reply);
            self.count_loopback(reply.len());
        }
        Ok(Outcome::Done(Reply::value(0, message.len() as u64)))
    }

    /// Queues the ICMP message `message` from `source` to `destination`, as an IPv4 packet, on
    /// raw socket `only` or on every raw ICMP socket; one whose buffer is full misses it, as on
    /// Linux.
    pub(super) fn deliver_icmp(&mut self, only: Option<u64>, source: [u8; 4], destination: [u8; 4], message: &[u8]) {
        let packet = ipv4_packet(source, destination, message);
        let sender = Endpoint { address: source, port: 0 };
        for (id, socket) in self.sockets.iter_mut() {
            if socket.family != INET || socket.kind != RAW || only.is_some_and(|only| only != *id) {
                continue;
            }
            if socket.queue_datagram(sender, &packet) {
                self.changed = true;
            }
        }
    }
}
