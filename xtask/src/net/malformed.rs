//! The malformed frames of `net-malformed-frames`: valid frames with one thing wrong, frames cut
//! short, and bytes that are no frame at all, each named by what is wrong with it.
//!
//! Built from the guest's and the host's addresses so that most reach past the guest's MAC
//! filter into ARP, IPv4, ICMP, UDP and TCP; random bytes come from a fixed seed, so a frame
//! that wedges a kernel is the same frame on the next run.

use super::frames::{self, *};
use std::net::Ipv4Addr;

/// A frame and what is wrong with it.
#[derive(Clone, Debug)]
pub struct Malformed {
    pub what: &'static str,
    pub frame: Vec<u8>,
}

/// Who is who on the wire.
#[derive(Clone, Copy, Debug)]
pub struct Addresses {
    pub guest_mac: [u8; 6],
    pub host_mac: [u8; 6],
    pub guest: Ipv4Addr,
    pub host: Ipv4Addr,
}

/// The guest's web server port, which the SYNs with garbage options aim at.
pub const GUEST_TCP_PORT: u16 = 80;

/// Random bytes from a fixed seed (xorshift64*): the same frames on every run.
pub struct Bytes(u64);

impl Bytes {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number from `low` to `high`, both included.
    pub fn between(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }

    pub fn fill(&mut self, length: usize) -> Vec<u8> {
        (0..length).map(|_| self.next() as u8).collect()
    }
}

/// The frames, in the order they are sent.
pub fn catalogue(at: &Addresses, seed: u64) -> Vec<Malformed> {
    let mut random = Bytes::new(seed);
    let mut out = Vec::new();
    let mut add = |what: &'static str, frame: Vec<u8>| out.push(Malformed { what, frame });
    let to_guest = |ethertype: u16, payload: &[u8]| ethernet(at.guest_mac, at.host_mac, ethertype, payload);
    let echo = |identifier: u16| icmp_echo(ICMP_ECHO_REQUEST, identifier, 1, b"malformed frames");
    let echo_packet = |identifier: u16| ipv4(PROTOCOL_ICMP, at.host, at.guest, identifier, &echo(identifier));
    // A packet `change` spoils after it was built, its header checksum made right again.
    let spoiled_ipv4 = |change: &dyn Fn(&mut Vec<u8>)| {
        let mut packet = echo_packet(0x1000);
        change(&mut packet);
        if packet.len() >= 12 {
            frames::set_ipv4_checksum(&mut packet);
        }
        to_guest(ETHERTYPE_IPV4, &packet)
    };
    let syn = |options: &[u8]| tcp((at.host, 40000), (at.guest, GUEST_TCP_PORT), 1000, TCP_SYN, options);
    let arp_request = || arp(ARP_REQUEST, (at.host_mac, at.host), ([0; 6], at.guest));

    for length in 1..ETHERNET_HEADER {
        add("shorter than an Ethernet header", random.fill(length));
        let mut start = at.guest_mac.to_vec();
        start.extend(random.fill(length.saturating_sub(6)));
        start.truncate(length);
        add("shorter than an Ethernet header, to the guest", start);
    }
    for ethertype in [ETHERTYPE_IPV4, ETHERTYPE_ARP, 0x1234] {
        add("an Ethernet header and nothing after", to_guest(ethertype, &[]));
    }
    for _ in 0..40 {
        let length = random.between(ETHERNET_HEADER, LONGEST_FRAME);
        let mut frame = at.guest_mac.to_vec();
        frame.extend(random.fill(length - 6));
        add("random bytes to the guest's MAC", frame);
    }
    for index in 0..20 {
        let length = random.between(ETHERNET_HEADER, LONGEST_FRAME);
        let mut frame = random.fill(length);
        if index % 2 == 0 {
            frame[..6].copy_from_slice(&BROADCAST);
        }
        add("random bytes", frame);
    }
    for _ in 0..25 {
        let length = random.between(0, 200);
        add("random bytes behind the IPv4 type", to_guest(ETHERTYPE_IPV4, &random.fill(length)));
    }
    for _ in 0..15 {
        let length = random.between(0, 60);
        add("random bytes behind the ARP type", to_guest(ETHERTYPE_ARP, &random.fill(length)));
    }
    for ethertype in [0x86dd, 0x8100, 0x88a8, 0x88cc, 0x0000, 0x05dc, 0xffff, 0x8035, 0x0842, 0x9000] {
        add("an unknown or unsupported ethertype around an echo request", to_guest(ethertype, &echo_packet(1)));
    }

    // IPv4: every field of the header wrong in turn.
    for identifier in 0..5 {
        let mut packet = echo_packet(identifier);
        packet[10] ^= 0x5a;
        add("IPv4 with a wrong header checksum", to_guest(ETHERTYPE_IPV4, &packet));
    }
    for total in [1000u16, 1500, 65535, 45] {
        add(
            "IPv4 total length longer than the frame",
            spoiled_ipv4(&|p| p[2..4].copy_from_slice(&total.to_be_bytes())),
        );
    }
    for total in [0u16, 1, 19] {
        add(
            "IPv4 total length shorter than its header",
            spoiled_ipv4(&|p| p[2..4].copy_from_slice(&total.to_be_bytes())),
        );
    }
    for total in [20u16, 24, 27] {
        add(
            "IPv4 total length that cuts the ICMP message",
            spoiled_ipv4(&|p| p[2..4].copy_from_slice(&total.to_be_bytes())),
        );
    }
    for ihl in 0..5u8 {
        add("IPv4 header length (IHL) below 5", spoiled_ipv4(&|p| p[0] = 0x40 | ihl));
    }
    add("IPv4 header length (IHL) 15 past the packet", spoiled_ipv4(&|p| p[0] = 0x4f));
    add("IPv4 options that are garbage", {
        let mut garbage = random.fill(40);
        garbage[0] = 0x44; // timestamp option, its length and pointer random
        spoiled_ipv4(&move |p| {
            p[0] = 0x4f;
            p.splice(20..20, garbage.iter().copied());
            let total = p.len() as u16;
            p[2..4].copy_from_slice(&total.to_be_bytes());
        })
    });
    for version in [0u8, 6, 15] {
        add("IPv4 type with another IP version", spoiled_ipv4(&|p| p[0] = version << 4 | 5));
    }
    for (flags, what) in [
        (0x2000u16, "a first IPv4 fragment (more fragments)"),
        (0x00b9, "a last IPv4 fragment alone"),
        (0x2001, "a middle IPv4 fragment"),
        (0x1fff, "an IPv4 fragment ending past 65535 bytes"),
        (0x6000, "an IPv4 fragment with don't-fragment and more fragments"),
        (0x8000, "IPv4 with the reserved flag"),
    ] {
        add(what, spoiled_ipv4(&|p| p[6..8].copy_from_slice(&flags.to_be_bytes())));
    }
    add("IPv4 with TTL 0", spoiled_ipv4(&|p| p[8] = 0));
    for protocol in [0u8, 2, 41, 50, 255] {
        add("IPv4 of an unsupported protocol", spoiled_ipv4(&|p| p[9] = protocol));
    }
    for (source, destination, what) in [
        (at.guest, at.guest, "an echo request from the guest's own address"),
        (Ipv4Addr::BROADCAST, at.guest, "an echo request from the broadcast address"),
        (Ipv4Addr::UNSPECIFIED, at.guest, "an echo request from 0.0.0.0"),
        (Ipv4Addr::new(224, 0, 0, 1), at.guest, "an echo request from a multicast address"),
        (at.host, Ipv4Addr::new(10, 0, 2, 255), "an echo request to the subnet's broadcast"),
        (at.host, Ipv4Addr::new(224, 0, 0, 1), "an echo request to a multicast group"),
        (at.host, Ipv4Addr::new(10, 0, 2, 16), "an echo request to another machine's address"),
    ] {
        add(what, to_guest(ETHERTYPE_IPV4, &ipv4(PROTOCOL_ICMP, source, destination, 2, &echo(2))));
    }

    // ICMP.
    let icmp = |message: &[u8]| to_guest(ETHERTYPE_IPV4, &ipv4(PROTOCOL_ICMP, at.host, at.guest, 3, message));
    let mut bad_sum = echo(3);
    bad_sum[2] ^= 0xff;
    add("an ICMP echo request with a wrong checksum", icmp(&bad_sum));
    for length in [0, 1, 3, 7] {
        add("an ICMP message cut short", icmp(&echo(3)[..length]));
    }
    let with_sum = |mut message: Vec<u8>| {
        message[2..4].fill(0);
        let sum = checksum(&message);
        message[2..4].copy_from_slice(&sum.to_be_bytes());
        message
    };
    let mut unreachable = vec![3, 3, 0, 0, 0, 0, 0, 0];
    unreachable.extend(random.fill(28));
    add("an ICMP port unreachable around random bytes", icmp(&with_sum(unreachable)));
    let mut inner = ipv4(PROTOCOL_UDP, at.guest, at.host, 4, &udp((at.guest, 5000), (at.host, 53), b"x"));
    inner[0] = 0x4f;
    let mut unreachable = vec![3, 3, 0, 0, 0, 0, 0, 0];
    unreachable.extend(&inner);
    add("an ICMP port unreachable around a header of IHL 15", icmp(&with_sum(unreachable)));
    let mut unreachable = vec![3, 4, 0, 0, 0, 0, 0, 0]; // fragmentation needed, next-hop MTU 0
    unreachable.extend(&ipv4(PROTOCOL_TCP, at.guest, at.host, 5, &syn(&[]))[..28]);
    add("an ICMP fragmentation-needed with MTU 0", icmp(&with_sum(unreachable)));
    for kind in [5u8, 11, 13, 255] {
        let mut message = vec![kind, 0, 0, 0];
        message.extend(random.fill(12));
        add("an ICMP message of another type", icmp(&with_sum(message)));
    }

    // UDP.
    let udp_to = |port: u16, payload: &[u8]| udp((at.host, 40001), (at.guest, port), payload);
    let udp_frame = |datagram: &[u8]| to_guest(ETHERTYPE_IPV4, &ipv4(PROTOCOL_UDP, at.host, at.guest, 6, datagram));
    for port in [53u16, 7, 9999] {
        let mut datagram = udp_to(port, b"wrong checksum");
        datagram[6] ^= 0x33;
        add("UDP with a wrong checksum", udp_frame(&datagram));
    }
    for length in [0u16, 7, 1000, 8] {
        let mut datagram = udp_to(9999, b"a length that lies");
        datagram[4..6].copy_from_slice(&length.to_be_bytes());
        frames::set_transport_checksum(&mut datagram, at.host, at.guest, PROTOCOL_UDP);
        add("UDP whose length field is wrong", udp_frame(&datagram));
    }
    add("UDP cut short", udp_frame(&udp_to(9999, b"")[..5]));
    add("UDP to port 0", udp_frame(&udp_to(0, b"port zero")));
    add("UDP from port 0", udp_frame(&udp((at.host, 0), (at.guest, 9999), b"port zero")));

    // TCP.
    let tcp_frame = |segment: &[u8]| to_guest(ETHERTYPE_IPV4, &ipv4(PROTOCOL_TCP, at.host, at.guest, 7, segment));
    let mut bad_sum = syn(&[]);
    bad_sum[16] ^= 0xff;
    add("a TCP SYN with a wrong checksum", tcp_frame(&bad_sum));
    for offset in [0u8, 1, 4, 15] {
        let mut segment = syn(&[]);
        segment[12] = offset << 4;
        frames::set_transport_checksum(&mut segment, at.host, at.guest, PROTOCOL_TCP);
        add("TCP whose data offset is wrong", tcp_frame(&segment));
    }
    add("TCP cut short", tcp_frame(&syn(&[])[..10]));
    for options in [
        &[2u8, 0][..],                // an option of length 0
        &[2, 1],                      // length 1
        &[3, 3, 255],                 // window scale 255
        &[2, 4, 0, 0],                // MSS 0
        &[2, 4, 0, 1],                // MSS 1
        &[4, 3, 0],                   // SACK permitted of length 3
        &[8, 2],                      // a timestamp of length 2
        &[8, 40, 1, 2],               // a length past the header
        &[5, 2],                      // a SACK block list that is empty
        &[5, 7, 0, 0, 0, 1, 0],       // a SACK block list of a length no block has
        &[255, 255],                  // unknown kind, longest length
        &[30, 3, 0, 34, 10, 0, 0, 0], // MPTCP
    ] {
        add("a TCP SYN with garbage options to port 80", tcp_frame(&syn(options)));
    }
    for _ in 0..20 {
        let length = random.between(1, 40);
        let options = random.fill(length);
        add("a TCP SYN with random options to port 80", tcp_frame(&syn(&options)));
    }
    for (flags, what) in [
        (0xff, "TCP with every flag set"),
        (0x03, "TCP with SYN and FIN"),
        (0x06, "TCP with SYN and RST"),
        (0x00, "TCP with no flag"),
        (0x01, "a TCP FIN to a port without a connection"),
        (0x10, "a TCP ACK to a port without a connection"),
    ] {
        let segment = tcp((at.host, 40002), (at.guest, GUEST_TCP_PORT), 5000, flags, &[]);
        add(what, tcp_frame(&segment));
    }

    // ARP.
    let request = arp_request();
    for (at_byte, value, what) in [
        (4usize, 0u8, "ARP with hardware length 0"),
        (4, 5, "ARP with hardware length 5"),
        (4, 7, "ARP with hardware length 7"),
        (4, 255, "ARP with hardware length 255"),
        (5, 0, "ARP with protocol length 0"),
        (5, 3, "ARP with protocol length 3"),
        (5, 16, "ARP with protocol length 16"),
        (5, 255, "ARP with protocol length 255"),
        (1, 6, "ARP of hardware type 6"),
        (1, 0, "ARP of hardware type 0"),
        (2, 0x86, "ARP of protocol type 0x86dd"),
        (7, 0, "ARP of operation 0"),
        (7, 3, "ARP of operation 3"),
        (6, 1, "ARP of operation 257"),
    ] {
        let mut message = request.clone();
        message[at_byte] = value;
        if at_byte == 2 {
            message[3] = 0xdd;
        }
        add(what, to_guest(ETHERTYPE_ARP, &message));
    }
    for length in [8, 20, 27] {
        add("ARP cut short", to_guest(ETHERTYPE_ARP, &request[..length]));
    }
    for (sender, what) in [
        ((BROADCAST, at.host), "ARP from the broadcast MAC"),
        (([1, 0, 0x5e, 0, 0, 1], at.host), "ARP from a multicast MAC"),
        ((at.host_mac, Ipv4Addr::UNSPECIFIED), "ARP from 0.0.0.0 (a probe)"),
        ((at.host_mac, Ipv4Addr::new(192, 168, 1, 1)), "ARP from outside the subnet"),
        (([2, 0, 0, 0, 0, 0x99], at.guest), "ARP claiming the guest's own address"),
    ] {
        add(what, ethernet(BROADCAST, at.host_mac, ETHERTYPE_ARP, &arp(ARP_REQUEST, sender, ([0; 6], at.guest))));
    }
    add(
        "an ARP reply nobody asked for",
        to_guest(
            ETHERTYPE_ARP,
            &arp(ARP_REPLY, ([2, 0, 0, 0, 0, 0x77], Ipv4Addr::new(10, 0, 2, 77)), (at.guest_mac, at.guest)),
        ),
    );

    // Lengths: exactly 1514 bytes, then past the MTU but within a receive slot.
    let data = random.fill(LONGEST_FRAME - ETHERNET_HEADER - 28);
    let longest = to_guest(
        ETHERTYPE_IPV4,
        &ipv4(PROTOCOL_ICMP, at.host, at.guest, 8, &icmp_echo(ICMP_ECHO_REQUEST, 0x0515, 1, &data)),
    );
    debug_assert_eq!(longest.len(), LONGEST_FRAME);
    add("a whole echo request of exactly 1514 bytes", longest);
    let udp_data = random.fill(LONGEST_FRAME - ETHERNET_HEADER - 28);
    add("a UDP datagram in a frame of exactly 1514 bytes", udp_frame(&udp_to(9999, &udp_data)));
    for _ in 0..4 {
        let mut frame = at.guest_mac.to_vec();
        frame.extend(random.fill(LONGEST_FRAME - 6));
        add("random bytes, exactly 1514 of them", frame);
    }
    for length in [1515usize, 1600, 2000, MOST_DELIVERED] {
        let data = random.fill(length - ETHERNET_HEADER - 28);
        let packet = ipv4(PROTOCOL_ICMP, at.host, at.guest, 9, &icmp_echo(ICMP_ECHO_REQUEST, 0x0516, 1, &data));
        add("an echo request longer than the MTU, within a receive slot", to_guest(ETHERTYPE_IPV4, &packet));
    }

    // Valid frames with a few bytes changed, or cut anywhere.
    let valid = [
        ethernet(BROADCAST, at.host_mac, ETHERTYPE_ARP, &request),
        to_guest(ETHERTYPE_IPV4, &echo_packet(10)),
        udp_frame(&udp_to(9999, b"a valid datagram")),
        tcp_frame(&syn(&[2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7])),
    ];
    for round in 0..80 {
        let mut frame = valid[round % valid.len()].clone();
        if round % 5 == 4 {
            let keep = random.between(ETHERNET_HEADER, frame.len() - 1);
            frame.truncate(keep);
            add("a valid frame cut short", frame);
        } else {
            // Past the addresses: the changed bytes are the frame's own, not where it goes.
            for _ in 0..random.between(1, 4) {
                let at_byte = random.between(12, frame.len() - 1);
                frame[at_byte] ^= (random.next() as u8).max(1);
            }
            add("a valid frame with bytes changed", frame);
        }
    }
    out
}

/// The longest frame QEMU can put in a receive slot: the slot less the device's header, 12
/// bytes when a modern device has one (10 for a legacy one; the shorter answer is taken).
pub const MOST_DELIVERED: usize = 2048 - 12;

/// Frames longer than a receive slot holds: QEMU's virtio-net, without mergeable receive
/// buffers, drops a frame that does not fit the buffer the guest gave it (`virtio_net_receive_rcu`
/// "must have consumed the complete packet. Otherwise, drop it"), so the guest never sees them;
/// they are sent to prove that.
pub fn oversized(at: &Addresses, seed: u64) -> Vec<Malformed> {
    let mut random = Bytes::new(seed);
    [2049usize, 2100, 4096, 9014, 65000]
        .into_iter()
        .map(|length| {
            let data = random.fill(length - ETHERNET_HEADER - 28);
            let packet = ipv4(PROTOCOL_ICMP, at.host, at.guest, 11, &icmp_echo(ICMP_ECHO_REQUEST, 0x0517, 1, &data));
            Malformed {
                what: "an echo request longer than a receive slot",
                frame: ethernet(at.guest_mac, at.host_mac, ETHERTYPE_IPV4, &packet),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses() -> Addresses {
        Addresses {
            guest_mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
            host_mac: [0x52, 0x55, 10, 0, 2, 2],
            guest: Ipv4Addr::new(10, 0, 2, 15),
            host: Ipv4Addr::new(10, 0, 2, 2),
        }
    }

    #[test]
    fn the_catalogue_is_a_few_hundred_frames_each_deliverable_and_none_empty() {
        let frames = catalogue(&addresses(), 30);
        assert!(frames.len() >= 300, "{}", frames.len());
        assert!(frames.iter().all(|m| !m.frame.is_empty() && m.frame.len() <= MOST_DELIVERED));
        assert!(frames.iter().any(|m| m.frame.len() == LONGEST_FRAME));
        assert!(frames.iter().any(|m| m.frame.len() < ETHERNET_HEADER));
        assert!(oversized(&addresses(), 30).iter().all(|m| m.frame.len() > 2048));
    }

    /// The same seed, the same frames: a frame that wedges a kernel comes again.
    #[test]
    fn the_catalogue_is_the_same_for_a_seed() {
        let (a, b) = (catalogue(&addresses(), 7), catalogue(&addresses(), 7));
        assert!(a.iter().zip(&b).all(|(a, b)| a.frame == b.frame));
        assert!(a.iter().zip(&catalogue(&addresses(), 8)).any(|(a, b)| a.frame != b.frame));
    }

    /// Each wrong thing is the only one: the frames that keep their checksums right are
    /// refused by a reader for the reason named, not for a checksum.
    #[test]
    fn spoiled_frames_are_spoiled_only_where_they_say() {
        let frames = catalogue(&addresses(), 30);
        let find = |what: &str| frames.iter().find(|m| m.what == what).unwrap().frame.clone();
        let bad_sum = find("IPv4 with a wrong header checksum");
        assert_ne!(checksum(&bad_sum[14..34]), 0);
        let long = find("IPv4 total length longer than the frame");
        assert_eq!(checksum(&long[14..34]), 0);
        assert_eq!(parse_echo(&long), None);
        let longest = find("a whole echo request of exactly 1514 bytes");
        assert_eq!(parse_echo(&longest).unwrap().kind, ICMP_ECHO_REQUEST);
        let arp = find("ARP with hardware length 0");
        assert_eq!(parse_arp(&arp), None);
        assert_eq!(arp.len(), 42);
    }
}
