//! `AF_INET` stream sockets over the loopback (`127.0.0.0/8`): TCP's ports and addresses on
//! the unix sockets' connected pairs. A connection between two processes of this machine,
//! on any instances, is two of the service's pipes, as a unix stream's is (Linux's loopback
//! device carries TCP segments; what a program sees, a reliable ordered byte stream with end
//! of file, `EPIPE` and `ECONNREFUSED`, is the same). The network device and its stack
//! (issue 30, smoltcp) will carry the connections to other machines.
//!
//! A socket's name is the six bytes of its address and port in network order, as in a
//! `sockaddr_in`. One table holds the ports in use: a listener's, a bound socket's and each
//! client's ephemeral port, so that no two sockets take one port (`EADDRINUSE`).

use super::{Socket, State, STREAM};
use crate::fs::service::{Errno, Service};
use linux_raw_sys::errno;

/// The bytes of an inet name: address (4), port (2), network order.
pub(in crate::fs::service) const NAME_BYTES: usize = 6;
/// The ephemeral ports Linux gives out (`ip_local_port_range`).
const EPHEMERAL: core::ops::RangeInclusive<u16> = 32768..=60999;
/// `127.0.0.1`.
const LOOPBACK: [u8; 4] = [127, 0, 0, 1];

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
    /// The next free ephemeral port, from where the last search stopped (`EADDRINUSE` when
    /// all are taken, as Linux says).
    fn ephemeral_port(&mut self) -> Result<u16, Errno> {
        let count = u32::from(EPHEMERAL.end() - EPHEMERAL.start()) + 1;
        for _ in 0..count {
            let port = self.socket_names.next_ephemeral.max(*EPHEMERAL.start());
            self.socket_names.next_ephemeral = if port >= *EPHEMERAL.end() { *EPHEMERAL.start() } else { port + 1 };
            if !self.socket_names.ports.contains_key(&port) {
                return Ok(port);
            }
        }
        Err(errno::EADDRINUSE)
    }

    /// `bind` of inet socket `id` to `name`: a loopback address or any (`0.0.0.0`), a port
    /// (0: an ephemeral one). Another address of this machine's does not exist yet
    /// (`EADDRNOTAVAIL`).
    pub(super) fn inet_bind(&mut self, id: u64, name: &[u8]) -> Result<(), Errno> {
        let mut endpoint = Endpoint::decode(name)?;
        if !endpoint.is_any() && !endpoint.is_loopback() {
            return Err(errno::EADDRNOTAVAIL);
        }
        if endpoint.port == 0 {
            endpoint.port = self.ephemeral_port()?;
        } else if self.socket_names.ports.contains_key(&endpoint.port) {
            return Err(errno::EADDRINUSE);
        }
        self.socket_names.ports.insert(endpoint.port, id);
        if let Some(socket) = self.sockets.get_mut(&id) {
            socket.name = Some(endpoint.encode());
        }
        Ok(())
    }

    /// Binds inet socket `id` to an ephemeral port of any address if it has no name yet (what
    /// Linux does before a `listen` or a `connect`).
    pub(super) fn inet_autobind(&mut self, id: u64, address: [u8; 4]) -> Result<(), Errno> {
        if self.sockets.get(&id).is_some_and(|socket| socket.name.is_none()) {
            let port = self.ephemeral_port()?;
            self.socket_names.ports.insert(port, id);
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
        let mut target = Endpoint::decode(name)?;
        if target.is_any() {
            // Linux: a connection to 0.0.0.0 goes to this machine.
            target.address = LOOPBACK;
        }
        if !target.is_loopback() {
            return Err(errno::ENETUNREACH);
        }
        let id = self.socket_names.ports.get(&target.port).copied().ok_or(errno::ECONNREFUSED)?;
        let socket = self.sockets.get(&id).ok_or(errno::ECONNREFUSED)?;
        let bound = socket.name.as_deref().map(Endpoint::decode).transpose()?;
        let listens = matches!(socket.state, State::Listening { .. }) && socket.kind == STREAM;
        match bound {
            Some(bound) if listens && (bound.is_any() || bound.address == target.address) => Ok((id, target)),
            _ => Err(errno::ECONNREFUSED),
        }
    }

    /// A socket's name is gone with it: its port is free again.
    pub(super) fn inet_release(&mut self, id: u64, socket: &Socket) {
        if let Some(endpoint) = socket.name.as_deref().and_then(|name| Endpoint::decode(name).ok()) {
            if self.socket_names.ports.get(&endpoint.port) == Some(&id) {
                self.socket_names.ports.remove(&endpoint.port);
            }
        }
    }
}
