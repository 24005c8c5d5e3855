//! `AF_INET` sockets over the loopback (`127.0.0.0/8`). TCP: ports and addresses on the unix
//! sockets' connected pairs. A connection between two processes of this machine, on any
//! instances, is two of the service's pipes, as a unix stream's is (Linux's loopback device
//! carries TCP segments; what a program sees, a reliable ordered byte stream with end of
//! file, `EPIPE` and `ECONNREFUSED`, is the same). UDP: each socket keeps the datagrams sent
//! to its port, with their senders, up to its buffer's size; one that does not fit is dropped,
//! as UDP drops it. Addresses beyond this machine go through the network stack
//! ([`super::stack`]), when the machine has a network device; the interface's own address is
//! this machine's, as the loopback is.
//!
//! A socket's name is the six bytes of its address and port in network order, as in a
//! `sockaddr_in`. A table per protocol holds the ports in use: a listener's, a bound socket's
//! and each client's ephemeral port, so that no two sockets take one port (`EADDRINUSE`).

use super::{Socket, State, DATAGRAM, STREAM};
use crate::fs::service::{Errno, Outcome, Reply, Service};
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use linux_raw_sys::errno;

/// The bytes of an inet name: address (4), port (2), network order.
pub(in crate::fs::service) const NAME_BYTES: usize = 6;
/// The ephemeral ports Linux gives out (`ip_local_port_range`).
const EPHEMERAL: core::ops::RangeInclusive<u16> = 32768..=60999;
/// `127.0.0.1`.
const LOOPBACK: [u8; 4] = [127, 0, 0, 1];
/// Ports below this are root's to bind (Linux's `ip_unprivileged_port_start`).
const PRIVILEGED_PORTS: u16 = 1024;
/// The longest UDP datagram over IPv4 (65535 less the IP and UDP headers).
const MOST_DATAGRAM: usize = 65507;

/// An address and a port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::fs::service) struct Endpoint {
    pub address: [u8; 4],
    pub port: u16,
}

impl Endpoint {
    /// From a name's six bytes (`EINVAL` for another length).
    pub fn decode(name: &[u8]) -> Result<Self, Errno> {
        let bytes: [u8; NAME_BYTES] = name.try_into().map_err(|_| errno::EINVAL)?;
        Ok(Self { address: [bytes[0], bytes[1], bytes[2], bytes[3]], port: u16::from_be_bytes([bytes[4], bytes[5]]) })
    }

    pub fn encode(self) -> alloc::vec::Vec<u8> {
        let mut bytes = self.address.to_vec();
        bytes.extend_from_slice(&self.port.to_be_bytes());
        bytes
    }

    fn is_any(self) -> bool {
        self.address == [0; 4]
    }

    fn is_loopback(self) -> bool {
        self.address[0] == 127
    }
}

impl Service {
    /// The ports in use of socket `id`'s protocol.
    fn ports_of(&mut self, id: u64) -> &mut BTreeMap<u16, u64> {
        if self.is_udp(id) {
            &mut self.socket_names.udp_ports
        } else {
            &mut self.socket_names.ports
        }
    }

    /// The next free ephemeral port of socket `id`'s protocol, from where the last search
    /// stopped (`EADDRINUSE` when all are taken, as Linux says).
    fn ephemeral_port(&mut self, id: u64) -> Result<u16, Errno> {
        let count = u32::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        for _ in 0..count {
            let port = self.socket_names.next_ephemeral.max(*EPHEMERAL.start());
            self.socket_names.next_ephemeral = if port >= *EPHEMERAL.end() { *EPHEMERAL.start() } else { port + 1 };
            if !self.ports_of(id).contains_key(&port) {
                return Ok(port);
            }
        }
        Err(errno::EADDRINUSE)
    }

    /// `bind` of inet socket `id` to `name`: an address of this machine's (the loopback, the
    /// interface's) or any (`0.0.0.0`), a port (0: an ephemeral one; below 1024 root's only,
    /// else `EACCES`). Another address is `EADDRNOTAVAIL`.
    pub(super) fn inet_bind(&mut self, id: u64, name: &[u8]) -> Result<(), Errno> {
        let mut endpoint = Endpoint::decode(name)?;
        if !self.is_local(endpoint.address) {
            return Err(errno::EADDRNOTAVAIL);
        }
        if self.is_raw(id) {
            // A raw socket has no ports: its address only filters nothing here.
            if let Some(socket) = self.sockets.get_mut(&id) {
                socket.name = Some(Endpoint { port: 0, ..endpoint }.encode());
            }
            return Ok(());
        }
        if endpoint.port == 0 {
            endpoint.port = self.ephemeral_port(id)?;
        } else if endpoint.port < PRIVILEGED_PORTS && !self.caller_is_privileged() {
            // Linux: below 1024 without `CAP_NET_BIND_SERVICE` (root here).
            return Err(errno::EACCES);
        } else if self.ports_of(id).contains_key(&endpoint.port) {
            return Err(errno::EADDRINUSE);
        }
        self.ports_of(id).insert(endpoint.port, id);
        if let Some(socket) = self.sockets.get_mut(&id) {
            socket.name = Some(endpoint.encode());
        }
        if self.is_udp(id) && !endpoint.is_loopback() {
            // Bound where the network reaches: it hears datagrams from there too.
            self.network_udp_bind(id, endpoint.port);
        }
        Ok(())
    }

    /// The name of bound inet socket `id`.
    pub(super) fn inet_name(&self, id: u64) -> Result<Endpoint, Errno> {
        let name = self.sockets.get(&id).and_then(|socket| socket.name.as_deref()).ok_or(errno::EINVAL)?;
        Endpoint::decode(name)
    }

    /// Where `name` is when it is beyond this machine and the network stack reaches it;
    /// `None` for an address of this machine; `ENETUNREACH` without a network device.
    pub(super) fn beyond_this_machine(&self, name: &[u8]) -> Result<Option<Endpoint>, Errno> {
        let target = self.reachable(name)?;
        Ok((!self.is_local(target.address)).then_some(target))
    }

    /// Binds inet socket `id` to an ephemeral port of any address if it has no name yet (what
    /// Linux does before a `listen` or a `connect`).
    pub(super) fn inet_autobind(&mut self, id: u64, address: [u8; 4]) -> Result<(), Errno> {
        if self.sockets.get(&id).is_some_and(|socket| socket.name.is_none()) {
            let port = self.ephemeral_port(id)?;
            self.ports_of(id).insert(port, id);
            if let Some(socket) = self.sockets.get_mut(&id) {
                socket.name = Some(Endpoint { address, port }.encode());
            }
        }
        Ok(())
    }

    /// The listening socket `connect` to `name` reaches: one listening on its port, at any
    /// address or at that one. `ECONNREFUSED` without one (Linux's reset); `ENETUNREACH` for an
    /// address beyond this machine (no network device yet).
    pub(super) fn inet_listener(&self, name: &[u8]) -> Result<(u64, Endpoint), Errno> {
        let target = self.reachable(name)?;
        let id = self.socket_names.ports.get(&target.port).copied().ok_or(errno::ECONNREFUSED)?;
        let socket = self.sockets.get(&id).ok_or(errno::ECONNREFUSED)?;
        let bound = socket.name.as_deref().map(Endpoint::decode).transpose()?;
        let listens = matches!(socket.state, State::Listening { .. }) && socket.kind == STREAM;
        match bound {
            Some(bound) if listens && (bound.is_any() || bound.address == target.address) => Ok((id, target)),
            _ => Err(errno::ECONNREFUSED),
        }
    }

    /// A socket's name is gone with it (it is out of the table of sockets): its port is free
    /// again.
    pub(super) fn inet_release(&mut self, id: u64, socket: &Socket) {
        if let Some(endpoint) = socket.name.as_deref().and_then(|name| Endpoint::decode(name).ok()) {
            let ports =
                if socket.kind == DATAGRAM { &mut self.socket_names.udp_ports } else { &mut self.socket_names.ports };
            if ports.get(&endpoint.port) == Some(&id) {
                ports.remove(&endpoint.port);
            }
        }
    }

    /// Where a datagram or a connection to `name` goes: an address of this machine (Linux
    /// takes `0.0.0.0` for the loopback), or one the network stack reaches; `ENETUNREACH`
    /// beyond this machine without a network device.
    fn reachable(&self, name: &[u8]) -> Result<Endpoint, Errno> {
        let mut target = Endpoint::decode(name)?;
        if target.is_any() {
            target.address = LOOPBACK;
        }
        if !self.is_local(target.address) && self.net.is_none() {
            return Err(errno::ENETUNREACH);
        }
        Ok(target)
    }

    /// `/proc/net/tcp`, `udp` or `dev` as Linux writes them (addresses and ports in hex, in
    /// the byte order Linux prints them; the socket's id as its inode, as `/proc/<pid>/fd`'s
    /// `socket:[id]` names it; states `0A` listening, `01` established or a connected UDP
    /// socket, `07` closed or an unconnected UDP socket).
    pub(in crate::fs::service) fn net_text(&self, view: vfs::NetView) -> String {
        let mut text = String::new();
        if view == vfs::NetView::Route {
            return self.route_text();
        }
        if view == vfs::NetView::Dev {
            let (bytes, packets) = (self.socket_names.loopback_bytes, self.socket_names.loopback_packets);
            text.push_str(
                "Inter-|   Receive                                                |  Transmit\n \
                 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo \
                 colls carrier compressed\n",
            );
            // Linux's `dev_seq_printf_stats`: receive, then transmit (the loopback's are one).
            let mut interfaces = alloc::vec![("lo", [bytes, packets, bytes, packets])];
            if let Some(net) = &self.net {
                interfaces.push(("eth0", net.device_counts()));
            }
            for (name, [received_bytes, received, sent_bytes, sent]) in interfaces {
                let _ = writeln!(
                    text,
                    "{name:>6}:{received_bytes:>8} {received:>7} {:>4} {:>4} {:>4} {:>5} {:>10} {:>9} {sent_bytes:>8} \
                     {sent:>7} {:>4} {:>4} {:>4} {:>5} {:>7} {:>10}",
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
                );
            }
            return text;
        }
        let udp = view == vfs::NetView::Udp;
        text.push_str(if udp {
            "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref \
             pointer drops\n"
        } else {
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        });
        let hex = |endpoint: Option<Endpoint>| {
            let endpoint = endpoint.unwrap_or(Endpoint { address: [0; 4], port: 0 });
            alloc::format!("{:08X}:{:04X}", u32::from_le_bytes(endpoint.address), endpoint.port)
        };
        let name_of = |socket: &Socket| socket.name.as_deref().and_then(|name| Endpoint::decode(name).ok());
        let mut line = 0;
        for (id, socket) in self.sockets.iter().filter(|(_, socket)| socket.family == super::INET) {
            // Raw sockets have no table of their own here (Linux's `/proc/net/raw`).
            if (socket.kind == DATAGRAM) != udp || socket.kind == super::icmp::RAW {
                continue;
            }
            let queued = |pipe: &u64| self.pipes.get(pipe).map_or(0, |pipe| pipe.buffer.len());
            let (state, remote, transmit, receive) = match &socket.state {
                _ if udp => (if socket.remote.is_some() { 1 } else { 7 }, socket.remote, 0, socket.queued),
                State::Listening { pending, .. } => (0x0a, None, 0, pending.len()),
                State::Connected { receive, send, peer } => {
                    (1, self.sockets.get(peer).and_then(name_of).or(socket.remote), queued(send), queued(receive))
                }
                // `SYN_SENT`.
                State::Connecting => (2, socket.remote, 0, 0),
                State::Unconnected => (7, None, 0, 0),
            };
            let _ = write!(
                text,
                "{line:>4}: {} {} {state:02X} {transmit:08X}:{receive:08X} 00:00000000 00000000     0        0 {id} 1 \
                 0000000000000000",
                hex(name_of(socket)),
                hex(remote),
            );
            text.push_str(if udp { " 0\n" } else { " 100 0 0 10 0\n" });
            line += 1;
        }
        text
    }

    /// `connect` of UDP socket `id`: its sends go to `name` and it hears only from there.
    pub(super) fn udp_connect(&mut self, id: u64, name: &[u8]) -> Result<(), Errno> {
        let target = self.reachable(name)?;
        if !self.is_raw(id) {
            self.inet_autobind(id, [0; 4])?;
        }
        if let Some(socket) = self.sockets.get_mut(&id) {
            socket.remote = Some(target);
        }
        Ok(())
    }

    /// A UDP `sendto` (`name` empty: to the connected peer) of `data` from socket `handle`:
    /// its length. `family` is the family of the address given.
    pub(in crate::fs::service) fn socket_send_to(
        &mut self,
        handle: u64,
        family: u16,
        name: &[u8],
        data: &[u8],
        _dont_wait: bool,
    ) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        if !self.is_inet_datagram(id) {
            return Err(errno::EOPNOTSUPP);
        }
        let target = if name.is_empty() {
            None
        } else {
            self.family_of(id, family)?;
            Some(name)
        };
        self.udp_send(id, target, data)
    }

    /// Sends `data` from UDP socket `id` to `name`, or to its connected peer: the datagram
    /// joins the receiver's queue, or is dropped (nobody at that port, no room, or a receiver
    /// connected to another peer), as UDP does; the length either way.
    pub(in crate::fs::service) fn udp_send(
        &mut self,
        id: u64,
        name: Option<&[u8]>,
        data: &[u8],
    ) -> Result<Outcome, Errno> {
        if data.len() > MOST_DATAGRAM {
            return Err(errno::EMSGSIZE);
        }
        let target = match name {
            Some(name) => self.reachable(name)?,
            None => self.sockets.get(&id).and_then(|socket| socket.remote).ok_or(errno::EDESTADDRREQ)?,
        };
        if self.is_raw(id) {
            return self.raw_send(id, target, data);
        }
        self.inet_autobind(id, [0; 4])?;
        let port = self.inet_name(id)?.port;
        if !self.is_local(target.address) {
            self.network_send_datagram(id, port, target, data)?;
            return Ok(Outcome::Done(Reply::value(0, data.len() as u64)));
        }
        let source = Endpoint { address: LOOPBACK, port };
        self.count_loopback(data.len());
        let receiver = self.socket_names.udp_ports.get(&target.port).copied();
        if let Some(socket) = receiver.and_then(|receiver| self.sockets.get_mut(&receiver)) {
            let bound = socket.name.as_deref().map(Endpoint::decode).transpose()?;
            let hears = bound.is_some_and(|bound| bound.is_any() || bound.address == target.address)
                && socket.remote.is_none_or(|remote| remote == source);
            if hears && socket.queue_datagram(source, data) {
                self.changed = true;
            }
        }
        Ok(Outcome::Done(Reply::value(0, data.len() as u64)))
    }

    /// The oldest datagram of UDP socket `id`, its first `length` bytes (the rest dropped),
    /// with its sender; `None` when the caller must wait.
    pub(in crate::fs::service) fn udp_receive(
        &mut self,
        id: u64,
        length: usize,
        nonblocking: bool,
    ) -> Result<Option<(Endpoint, Vec<u8>)>, Errno> {
        let socket = self.sockets.get_mut(&id).ok_or(errno::EBADF)?;
        let Some((source, mut data)) = socket.datagrams.pop_front() else {
            return if nonblocking { Err(errno::EAGAIN) } else { Ok(None) };
        };
        socket.queued -= data.len();
        socket.generation += 1;
        data.truncate(length);
        Ok(Some((source, data)))
    }

    /// A UDP `recvfrom` on socket `handle`: the datagram, its sender's family and address and
    /// port (`address << 16 | port`) in the words; parked while none came.
    pub(in crate::fs::service) fn socket_receive_from(
        &mut self,
        handle: u64,
        length: usize,
        dont_wait: bool,
    ) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        if !self.is_inet_datagram(id) {
            return Err(errno::EOPNOTSUPP);
        }
        let nonblocking =
            dont_wait || self.open.get(&handle).is_some_and(|file| file.flags & super::flags::NONBLOCK != 0);
        match self.udp_receive(id, length.min(abi::file::MAX_TRANSFER), nonblocking)? {
            Some((source, data)) => {
                let address = u64::from(u32::from_be_bytes(source.address));
                Ok(Outcome::Done(Reply {
                    result: data.len() as i64,
                    words: [u64::from(super::INET), address << 16 | u64::from(source.port)],
                    bytes: data,
                    request_id: 0,
                }))
            }
            None => Ok(Outcome::Park(0)),
        }
    }
}
