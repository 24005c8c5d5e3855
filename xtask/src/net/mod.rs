//! QEMU user networking for a guest: the `--net`, `--forward` and `--guest-forward` options,
//! always closed to the outside (`restrict=on`), the host's HTTP helpers ([`http`]), and a
//! frame wire whose other end is a test on the host ([`wire`]).
//!
//! QEMU's user network (slirp) puts the guest behind a NAT of its own: the guest is 10.0.2.15/24,
//! the gateway 10.0.2.2, and with `restrict=on` the guest reaches nothing outside QEMU except
//! the forwards named here. Every host end is on 127.0.0.1, never on another address: a test
//! machine's guest is never reachable from the network, and never reaches it.

pub(crate) mod frames;
pub(crate) mod http;
pub(crate) mod load;
pub(crate) mod malformed;
pub(crate) mod wire;

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
pub use wire::FrameWire;

/// The id of the `-netdev` the NIC is plugged into.
pub(crate) const NETDEV_ID: &str = "net0";

/// The address a `guestfwd` rule gives the host's server inside the guest's network: an
/// address of QEMU's 10.0.2.0/24 that no built-in service (gateway .2, DNS .3, guest .15) uses.
pub const GUEST_FORWARD_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 100);

/// The guest's own address, which Reef's kernel takes by default and the Linux guest is given.
pub const GUEST_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);

/// The gateway of QEMU's user network (QEMU itself).
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// A guest with a network card on QEMU's user network, and what crosses it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Network {
    /// `--forward HOSTPORT:GUESTPORT`: a connection to the host's 127.0.0.1:HOSTPORT reaches the
    /// guest's port (QEMU `hostfwd`).
    pub forwards: Vec<Forward>,
    /// `--guest-forward GUESTPORT:127.0.0.1:HOSTPORT`: a connection from the guest to
    /// [`GUEST_FORWARD_ADDRESS`]:GUESTPORT reaches a server on the host's loopback (QEMU
    /// `guestfwd`).
    pub guest_forwards: Vec<GuestForward>,
    /// Instead of QEMU's user network, the card's other end is a test on the host: each frame
    /// a UDP datagram between two ports of 127.0.0.1 ([`FrameWire`]). No forwards then: there
    /// is no NAT to forward through ([`Network::on_wire`]; `add_forward` refuses).
    pub wire: Option<FrameWire>,
}

/// The host's 127.0.0.1:`host_port` forwarded to the guest's `guest_port` (TCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forward {
    pub host_port: u16,
    pub guest_port: u16,
}

/// The guest's [`GUEST_FORWARD_ADDRESS`]:`guest_port` forwarded to the host's
/// 127.0.0.1:`host_port` (TCP).
///
/// QEMU 7.2 opens the host end once, when it starts (a chardev `tcp:127.0.0.1:PORT`, client
/// mode): the server must already listen, or QEMU exits with "Could not open guest forwarding
/// device", and every connection the guest makes to the rule travels in that one host
/// connection, one after the other. A server behind it must therefore answer request after
/// request on one connection and never close it first ([`http::FileServer`] does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestForward {
    pub guest_port: u16,
    pub host_port: u16,
}

/// A TCP port from 1 to 65535, from `text`; `None` for anything else.
fn port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|&port| port != 0)
}

impl Forward {
    /// `HOSTPORT:GUESTPORT`, each from 1 to 65535.
    pub fn parse(text: &str) -> Result<Self, String> {
        let wanted = "write HOSTPORT:GUESTPORT, two ports from 1 to 65535, e.g. --forward 8080:80 \
                      (the host's 127.0.0.1:8080 reaches the guest's port 80)";
        let Some((host, guest)) = text.split_once(':') else {
            return Err(format!("--forward {text}: {wanted}"));
        };
        match (port(host), port(guest)) {
            (Some(host_port), Some(guest_port)) => Ok(Self { host_port, guest_port }),
            _ => Err(format!("--forward {text}: {wanted}")),
        }
    }

    /// QEMU's `hostfwd=` value: the host side bound to 127.0.0.1, the guest's address left to
    /// QEMU (its DHCP address, 10.0.2.15, which the guest takes).
    fn rule(self) -> String {
        format!("hostfwd=tcp:127.0.0.1:{}-:{}", self.host_port, self.guest_port)
    }
}

impl GuestForward {
    /// `GUESTPORT:127.0.0.1:HOSTPORT`; any target but 127.0.0.1 is refused, so that a guest can
    /// reach only what runs on this host's loopback.
    pub fn parse(text: &str) -> Result<Self, String> {
        let wanted = "write GUESTPORT:127.0.0.1:HOSTPORT, ports from 1 to 65535, e.g. --guest-forward \
                      80:127.0.0.1:8000 (the guest's connections to 10.0.2.100:80 reach the host's \
                      127.0.0.1:8000)";
        let parts: Vec<&str> = text.split(':').collect();
        let [guest, host, host_port] = parts[..] else {
            return Err(format!("--guest-forward {text}: {wanted}"));
        };
        if host != "127.0.0.1" {
            return Err(format!(
                "--guest-forward {text}: the target `{host}` is not 127.0.0.1; a guest may reach only the \
                 host's loopback: {wanted}"
            ));
        }
        match (port(guest), port(host_port)) {
            (Some(guest_port), Some(host_port)) => Ok(Self { guest_port, host_port }),
            _ => Err(format!("--guest-forward {text}: {wanted}")),
        }
    }

    /// QEMU's `guestfwd=` value.
    fn rule(self) -> String {
        format!("guestfwd=tcp:{GUEST_FORWARD_ADDRESS}:{}-tcp:127.0.0.1:{}", self.guest_port, self.host_port)
    }
}

impl Network {
    /// A card on a frame wire: the host's test is the only other machine.
    pub fn on_wire(wire: FrameWire) -> Self {
        Self { wire: Some(wire), ..Self::default() }
    }

    /// Adds a forward; a host port forwarded twice is refused (QEMU could bind it only once).
    pub fn add_forward(&mut self, forward: Forward) -> Result<(), String> {
        if self.wire.is_some() {
            return Err("--forward: a card on a frame wire has no user network to forward through".into());
        }
        if self.forwards.iter().any(|other| other.host_port == forward.host_port) {
            return Err(format!(
                "--forward: the host port {} is forwarded twice; give each forward its own host port",
                forward.host_port
            ));
        }
        self.forwards.push(forward);
        Ok(())
    }

    /// Adds a guest forward; a guest port forwarded twice is refused (the guest could reach
    /// only one of them).
    pub fn add_guest_forward(&mut self, forward: GuestForward) -> Result<(), String> {
        if self.wire.is_some() {
            return Err("--guest-forward: a card on a frame wire has no user network to forward through".into());
        }
        if self.guest_forwards.iter().any(|other| other.guest_port == forward.guest_port) {
            return Err(format!(
                "--guest-forward: the guest port {} is forwarded twice; give each its own guest port",
                forward.guest_port
            ));
        }
        self.guest_forwards.push(forward);
        Ok(())
    }

    /// QEMU's arguments: the user network, closed (`restrict=on`) but for the forwards, or the
    /// frame wire; and a virtio-net device on microvm's virtio-mmio window.
    pub fn qemu_arguments(&self) -> [String; 4] {
        let device = format!("virtio-net-device,netdev={NETDEV_ID}");
        if let Some(wire) = self.wire {
            // The fields are public: a network built with both is the caller's mistake, which
            // must not turn into a wire that silently drops the forwards.
            assert!(
                self.forwards.is_empty() && self.guest_forwards.is_empty(),
                "a network on a frame wire has no forwards"
            );
            return ["-netdev".into(), wire.netdev(), "-device".into(), device];
        }
        let mut netdev = format!("user,id={NETDEV_ID},restrict=on");
        for rule in self.forwards.iter().map(|f| f.rule()).chain(self.guest_forwards.iter().map(|f| f.rule())) {
            netdev.push(',');
            netdev.push_str(&rule);
        }
        ["-netdev".into(), netdev, "-device".into(), device]
    }
}

/// A port of 127.0.0.1 that was free a moment ago: bound to port 0 and let go. Another
/// program may take it in between; a run whose forward fails to bind says so in QEMU's error.
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("binding 127.0.0.1:0 to find a free port: {e}"))?;
    listener.local_addr().map(|address| address.port()).map_err(|e| format!("the address of 127.0.0.1:0: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forward_is_two_ports() {
        assert_eq!(Forward::parse("8080:80"), Ok(Forward { host_port: 8080, guest_port: 80 }));
        assert_eq!(Forward::parse("65535:1"), Ok(Forward { host_port: 65535, guest_port: 1 }));
        for bad in ["8080", "x:y", "0:80", "8080:0", "65536:80", "8080:80:1", ":80", "8080:", "-1:80", " 80:80"] {
            let error = Forward::parse(bad).unwrap_err();
            assert!(error.starts_with(&format!("--forward {bad}: write HOSTPORT:GUESTPORT")), "{error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn a_guest_forward_reaches_only_the_loopback() {
        assert_eq!(GuestForward::parse("80:127.0.0.1:8000"), Ok(GuestForward { guest_port: 80, host_port: 8000 }));
        for host in ["0.0.0.0", "10.0.2.2", "localhost", "192.168.1.1", "127.0.0.2"] {
            let error = GuestForward::parse(&format!("80:{host}:8000")).unwrap_err();
            assert!(error.contains(&format!("the target `{host}` is not 127.0.0.1")), "{error}");
        }
        for bad in ["80", "80:8000", "0:127.0.0.1:8000", "80:127.0.0.1:0", "80:127.0.0.1:70000", "x:127.0.0.1:1"] {
            let error = GuestForward::parse(bad).unwrap_err();
            assert!(error.contains("write GUESTPORT:127.0.0.1:HOSTPORT"), "{error}");
        }
    }

    #[test]
    fn the_netdev_is_restricted_and_every_host_end_is_the_loopback() {
        let mut network = Network::default();
        assert_eq!(
            network.qemu_arguments(),
            ["-netdev", "user,id=net0,restrict=on", "-device", "virtio-net-device,netdev=net0"]
        );
        network.add_forward(Forward::parse("8080:80").unwrap()).unwrap();
        network.add_forward(Forward::parse("2222:22").unwrap()).unwrap();
        network.add_guest_forward(GuestForward::parse("80:127.0.0.1:8000").unwrap()).unwrap();
        assert_eq!(
            network.qemu_arguments()[1],
            "user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:8080-:80,hostfwd=tcp:127.0.0.1:2222-:22,\
             guestfwd=tcp:10.0.2.100:80-tcp:127.0.0.1:8000"
        );
        assert!(network.add_forward(Forward::parse("8080:81").unwrap()).unwrap_err().contains("forwarded twice"));
        let twice = network.add_guest_forward(GuestForward::parse("80:127.0.0.1:9000").unwrap()).unwrap_err();
        assert!(twice.contains("forwarded twice"), "{twice}");
    }

    #[test]
    fn a_wire_is_a_udp_tunnel_on_the_loopback_and_takes_no_forward() {
        let mut network = Network::on_wire(FrameWire { host_port: 40000, qemu_port: 40001 });
        assert_eq!(
            network.qemu_arguments(),
            [
                "-netdev",
                "socket,id=net0,udp=127.0.0.1:40000,localaddr=127.0.0.1:40001",
                "-device",
                "virtio-net-device,netdev=net0"
            ]
        );
        assert!(network.add_forward(Forward::parse("8080:80").unwrap()).unwrap_err().contains("frame wire"));
        let guest = network.add_guest_forward(GuestForward::parse("80:127.0.0.1:8000").unwrap()).unwrap_err();
        assert!(guest.contains("frame wire"), "{guest}");
    }

    #[test]
    fn a_free_port_can_be_bound() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
