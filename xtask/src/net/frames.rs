//! Ethernet frames the host builds and reads on a frame wire: ARP, IPv4, ICMP echo, UDP, TCP.
//!
//! Only what `net-malformed-frames` needs ([`super::wire`]): builders that compute every
//! length and checksum (RFC 1071's sum, the TCP and UDP pseudo-header), so a malformed frame is
//! a valid one with exactly one thing changed, and parsers of the two answers the guest's stack
//! gives by itself (an ARP reply, an ICMP echo reply) that check every field they rely on.

use std::net::Ipv4Addr;

/// Bytes of an Ethernet header (no VLAN tag): two addresses and the type.
pub const ETHERNET_HEADER: usize = 14;
/// The longest frame of a 1500-byte MTU, without the frame check sequence.
pub const LONGEST_FRAME: usize = ETHERNET_HEADER + 1500;

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;

pub const PROTOCOL_ICMP: u8 = 1;
pub const PROTOCOL_TCP: u8 = 6;
pub const PROTOCOL_UDP: u8 = 17;

pub const ARP_REQUEST: u16 = 1;
pub const ARP_REPLY: u16 = 2;

pub const ICMP_ECHO_REPLY: u8 = 0;
pub const ICMP_ECHO_REQUEST: u8 = 8;

/// TCP's SYN flag.
pub const TCP_SYN: u8 = 0x02;

pub const BROADCAST: [u8; 6] = [0xff; 6];

/// The 16-bit ones' complement of the ones' complement sum of `bytes` (RFC 1071), with `initial`
/// already summed (a pseudo-header); an odd last byte is padded with zero.
pub fn checksum_with(initial: u32, bytes: &[u8]) -> u16 {
    let mut sum = initial;
    for pair in bytes.chunks(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// [`checksum_with`] of `bytes` alone: an IPv4 header's, an ICMP message's.
pub fn checksum(bytes: &[u8]) -> u16 {
    checksum_with(0, bytes)
}

/// The sum of TCP's and UDP's pseudo-header (RFC 793 §3.1, RFC 768).
fn pseudo_header(source: Ipv4Addr, destination: Ipv4Addr, protocol: u8, length: usize) -> u32 {
    let words = [source.octets(), destination.octets()];
    let addresses: u32 = words
        .iter()
        .flat_map(|o| [u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([o[2], o[3]])])
        .map(u32::from)
        .sum();
    addresses + u32::from(protocol) + length as u32
}

/// An Ethernet frame: `destination`, `source`, `ethertype`, then `payload`.
pub fn ethernet(destination: [u8; 6], source: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(ETHERNET_HEADER + payload.len());
    frame.extend_from_slice(&destination);
    frame.extend_from_slice(&source);
    frame.extend_from_slice(&ethertype.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// An ARP message for IPv4 over Ethernet (RFC 826): 28 bytes.
pub fn arp(operation: u16, sender: ([u8; 6], Ipv4Addr), target: ([u8; 6], Ipv4Addr)) -> Vec<u8> {
    let mut message = Vec::with_capacity(28);
    message.extend_from_slice(&1u16.to_be_bytes()); // hardware: Ethernet
    message.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    message.extend_from_slice(&[6, 4]);
    message.extend_from_slice(&operation.to_be_bytes());
    message.extend_from_slice(&sender.0);
    message.extend_from_slice(&sender.1.octets());
    message.extend_from_slice(&target.0);
    message.extend_from_slice(&target.1.octets());
    message
}

/// An IPv4 packet with a 20-byte header (no options, don't-fragment clear, TTL 64) and a
/// correct header checksum.
pub fn ipv4(protocol: u8, source: Ipv4Addr, destination: Ipv4Addr, identification: u16, payload: &[u8]) -> Vec<u8> {
    let mut packet = Vec::with_capacity(20 + payload.len());
    packet.extend_from_slice(&[0x45, 0]);
    packet.extend_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    packet.extend_from_slice(&identification.to_be_bytes());
    packet.extend_from_slice(&[0, 0, 64, protocol, 0, 0]);
    packet.extend_from_slice(&source.octets());
    packet.extend_from_slice(&destination.octets());
    set_ipv4_checksum(&mut packet);
    packet.extend_from_slice(payload);
    packet
}

/// Writes the header checksum of the IPv4 packet `packet` (its header length from IHL).
pub fn set_ipv4_checksum(packet: &mut [u8]) {
    let header = usize::from(packet[0] & 0x0f) * 4;
    packet[10..12].fill(0);
    let sum = checksum(&packet[..header.min(packet.len())]);
    packet[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// An ICMP echo message (`kind`: [`ICMP_ECHO_REQUEST`] or [`ICMP_ECHO_REPLY`]).
pub fn icmp_echo(kind: u8, identifier: u16, sequence: u16, data: &[u8]) -> Vec<u8> {
    let mut message = vec![kind, 0, 0, 0];
    message.extend_from_slice(&identifier.to_be_bytes());
    message.extend_from_slice(&sequence.to_be_bytes());
    message.extend_from_slice(data);
    let sum = checksum(&message);
    message[2..4].copy_from_slice(&sum.to_be_bytes());
    message
}

/// A UDP datagram with its checksum over the pseudo-header.
pub fn udp(source: (Ipv4Addr, u16), destination: (Ipv4Addr, u16), payload: &[u8]) -> Vec<u8> {
    let length = 8 + payload.len();
    let mut datagram = Vec::with_capacity(length);
    datagram.extend_from_slice(&source.1.to_be_bytes());
    datagram.extend_from_slice(&destination.1.to_be_bytes());
    datagram.extend_from_slice(&(length as u16).to_be_bytes());
    datagram.extend_from_slice(&[0, 0]);
    datagram.extend_from_slice(payload);
    let sum = checksum_with(pseudo_header(source.0, destination.0, PROTOCOL_UDP, length), &datagram);
    // RFC 768: a computed zero is sent as all ones (zero means "no checksum").
    datagram[6..8].copy_from_slice(&(if sum == 0 { 0xffff } else { sum }).to_be_bytes());
    datagram
}

/// A TCP segment with `flags`, `options` (padded to whole words with zeros, which is the end
/// of the option list) and its checksum over the pseudo-header.
pub fn tcp(source: (Ipv4Addr, u16), destination: (Ipv4Addr, u16), sequence: u32, flags: u8, options: &[u8]) -> Vec<u8> {
    let mut options = options.to_vec();
    options.resize(options.len().div_ceil(4) * 4, 0);
    let length = 20 + options.len();
    let mut segment = Vec::with_capacity(length);
    segment.extend_from_slice(&source.1.to_be_bytes());
    segment.extend_from_slice(&destination.1.to_be_bytes());
    segment.extend_from_slice(&sequence.to_be_bytes());
    segment.extend_from_slice(&0u32.to_be_bytes());
    segment.extend_from_slice(&[((length / 4) as u8) << 4, flags]);
    segment.extend_from_slice(&64240u16.to_be_bytes()); // window
    segment.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    segment.extend_from_slice(&options);
    set_transport_checksum(&mut segment, source.0, destination.0, PROTOCOL_TCP);
    segment
}

/// Writes the checksum of the TCP (`protocol` 6, at offset 16) or UDP (17, at offset 6)
/// `segment` over its pseudo-header.
pub fn set_transport_checksum(segment: &mut [u8], source: Ipv4Addr, destination: Ipv4Addr, protocol: u8) {
    let at = if protocol == PROTOCOL_TCP { 16 } else { 6 };
    segment[at..at + 2].fill(0);
    let sum = checksum_with(pseudo_header(source, destination, protocol, segment.len()), segment);
    segment[at..at + 2].copy_from_slice(&sum.to_be_bytes());
}

/// An ARP message for IPv4 over Ethernet as read from a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arp {
    pub destination: [u8; 6],
    pub operation: u16,
    pub sender: ([u8; 6], Ipv4Addr),
    pub target: ([u8; 6], Ipv4Addr),
}

/// The ARP message of `frame`, if it is one for IPv4 over Ethernet of the right lengths.
pub fn parse_arp(frame: &[u8]) -> Option<Arp> {
    let message = frame.get(ETHERNET_HEADER..ETHERNET_HEADER + 28)?;
    if u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_ARP || message[..6] != [0, 1, 8, 0, 6, 4] {
        return None;
    }
    let mac = |at: usize| -> [u8; 6] { message[at..at + 6].try_into().expect("six bytes") };
    let ip = |at: usize| Ipv4Addr::new(message[at], message[at + 1], message[at + 2], message[at + 3]);
    Some(Arp {
        destination: frame[..6].try_into().expect("six bytes"),
        operation: u16::from_be_bytes([message[6], message[7]]),
        sender: (mac(8), ip(14)),
        target: (mac(18), ip(24)),
    })
}

/// An ICMP echo message as read from a frame whose every length and checksum held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Echo {
    pub destination_mac: [u8; 6],
    pub source_mac: [u8; 6],
    pub source: Ipv4Addr,
    pub destination: Ipv4Addr,
    pub kind: u8,
    pub identifier: u16,
    pub sequence: u16,
    pub data: Vec<u8>,
}

/// The ICMP echo message of `frame`: an IPv4 frame with a whole, unfragmented packet whose
/// header checksum and ICMP checksum are right; `None` for anything else.
pub fn parse_echo(frame: &[u8]) -> Option<Echo> {
    if frame.len() < ETHERNET_HEADER + 20 || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV4 {
        return None;
    }
    let packet = &frame[ETHERNET_HEADER..];
    let header = usize::from(packet[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    let fragment = u16::from_be_bytes([packet[6], packet[7]]);
    let whole = fragment & 0x3fff == 0; // neither more fragments nor an offset
    if packet[0] >> 4 != 4 || header < 20 || total < header || total > packet.len() || !whole {
        return None;
    }
    if packet[9] != PROTOCOL_ICMP || checksum(&packet[..header]) != 0 {
        return None;
    }
    let message = &packet[header..total];
    if message.len() < 8 || checksum(message) != 0 || message[1] != 0 {
        return None;
    }
    let address = |at: usize| Ipv4Addr::new(packet[at], packet[at + 1], packet[at + 2], packet[at + 3]);
    Some(Echo {
        destination_mac: frame[..6].try_into().expect("six bytes"),
        source_mac: frame[6..12].try_into().expect("six bytes"),
        source: address(12),
        destination: address(16),
        kind: message[0],
        identifier: u16::from_be_bytes([message[4], message[5]]),
        sequence: u16::from_be_bytes([message[6], message[7]]),
        data: message[8..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);

    /// RFC 1071 §3's worked example: the sum of 0001 f203 f4f5 f6f7 is ddf2, sent as 220d.
    #[test]
    fn the_checksum_is_rfc_1071s() {
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
        // An odd length is padded with a zero byte.
        assert_eq!(checksum(&[0xab]), checksum(&[0xab, 0x00]));
        assert_eq!(checksum(&[]), 0xffff);
    }

    /// A header captured from a real stack (an example widely used for the IPv4 checksum):
    /// 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7.
    #[test]
    fn an_ipv4_header_checksum_matches_a_known_header() {
        let mut header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        set_ipv4_checksum(&mut header);
        assert_eq!(header[10..12], [0xb8, 0x61]);
        assert_eq!(checksum(&header), 0);
    }

    #[test]
    fn an_echo_request_reads_back_and_a_changed_byte_is_refused() {
        let message = icmp_echo(ICMP_ECHO_REQUEST, 0x5245, 7, b"reef");
        let frame = ethernet(BROADCAST, [2, 0, 0, 0, 0, 1], ETHERTYPE_IPV4, &ipv4(PROTOCOL_ICMP, A, B, 1, &message));
        let echo = parse_echo(&frame).unwrap();
        assert_eq!((echo.source, echo.destination, echo.kind), (A, B, ICMP_ECHO_REQUEST));
        assert_eq!((echo.identifier, echo.sequence, echo.data.as_slice()), (0x5245, 7, &b"reef"[..]));
        // Any one byte of the IP header or the message changed: a checksum no longer holds,
        // or a length, version or protocol is wrong.
        for at in ETHERNET_HEADER..frame.len() {
            let mut changed = frame.clone();
            changed[at] ^= 0x10;
            assert_eq!(parse_echo(&changed), None, "byte {at} changed");
        }
        assert_eq!(parse_echo(&frame[..frame.len() - 1]), None);
        // Padding after the packet (a short frame filled to 60 bytes) is not part of it.
        let mut padded = frame.clone();
        padded.resize(60, 0);
        assert_eq!(parse_echo(&padded).unwrap().data, b"reef");
    }

    #[test]
    fn an_arp_message_reads_back() {
        let mac = [2, 0, 0, 0, 0, 1];
        let frame = ethernet(BROADCAST, mac, ETHERTYPE_ARP, &arp(ARP_REQUEST, (mac, A), ([0; 6], B)));
        assert_eq!(frame.len(), 42);
        let message = parse_arp(&frame).unwrap();
        assert_eq!(
            message,
            Arp { destination: BROADCAST, operation: ARP_REQUEST, sender: (mac, A), target: ([0; 6], B) }
        );
        let mut wrong_length = frame.clone();
        wrong_length[ETHERNET_HEADER + 4] = 8;
        assert_eq!(parse_arp(&wrong_length), None);
        assert_eq!(parse_arp(&frame[..41]), None);
    }

    /// A receiver's check: the sum over the pseudo-header and the whole segment is zero.
    #[test]
    fn tcp_and_udp_checksums_cover_the_pseudo_header() {
        let segment = tcp((A, 40000), (B, 80), 1, TCP_SYN, &[2, 4, 5, 0xb4, 1]);
        assert_eq!(segment.len(), 28);
        assert_eq!(segment[12] >> 4, 7);
        assert_eq!(checksum_with(pseudo_header(A, B, PROTOCOL_TCP, segment.len()), &segment), 0);
        assert_ne!(checksum_with(pseudo_header(B, A, PROTOCOL_TCP, segment.len() + 2), &segment), 0);
        let datagram = udp((A, 5000), (B, 53), b"odd");
        assert_eq!(checksum_with(pseudo_header(A, B, PROTOCOL_UDP, datagram.len()), &datagram), 0);
    }
}
