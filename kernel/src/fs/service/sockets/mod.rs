//! `AF_UNIX` sockets: open files of the service, like pipes, so that two processes on any
//! instances talk through them and `poll`/`epoll` wait on them beside everything else.
//! Streams, and the message kinds of a connected pair: `SOCK_SEQPACKET` (also named, through
//! `listen`/`connect`) and `socketpair`'s `SOCK_DGRAM`, whose messages keep their bounds.
//!
//! A connected pair is two of the service's pipes, one each way: each end reads one and
//! writes the other, so bytes, end of file, `EPIPE`, atomic small writes and waking are the
//! pipes' own. `bind` makes a socket node in tmpfs (or an abstract name, a leading NUL, in a
//! table of the service), `listen` keeps a queue of connections made but not yet accepted,
//! `connect` makes the server's end at once and queues it (Linux's stream `connect` completes
//! without the server), `accept` takes the oldest. A name outlives its socket, as on Linux:
//! a `connect` to a name whose socket is gone is `ECONNREFUSED`, `unlink` removes it.
//!
//! `AF_INET` TCP sockets over the loopback are the same pairs with ports for names, UDP
//! sockets queues of datagrams ([`inet`]); beyond this machine, the network stack
//! ([`stack`]) is at the far end of a connection's pipes.

mod icmp;
mod inet;
mod stack;

pub use stack::poll_network;
pub(super) use stack::{has_work as network_has_work, Stack};

use super::open_files::{Object, OpenFile};
use super::pipes::Pipe;
use super::request::{events, flags, At};
use super::{Errno, Outcome, Reply, Service};
use abi::file::{HandleKind, Metadata};
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use linux_raw_sys::errno;
use vfs::{NodeId, NodeKind};

/// `SOCK_STREAM`, `SOCK_DGRAM`, `SOCK_SEQPACKET`.
pub(super) const STREAM: u64 = 1;
const DATAGRAM: u64 = 2;
const SEQUENCED: u64 = 5;
/// The longest message of a message socket: what its pipe holds.
const MOST_MESSAGE: usize = vfs::PIPE_CAPACITY;
/// How many connections a listening socket queues at most (Linux's `somaxconn` is 4096).
const MOST_PENDING: usize = 4096;
/// `SO_RCVBUF`/`SO_SNDBUF` as Linux reports a unix socket's by default.
const BUFFER_SIZE: u64 = 212_992;

/// `shutdown`'s `how`.
const SHUT_READ: u64 = 0;
const SHUT_WRITE: u64 = 1;
const SHUT_BOTH: u64 = 2;

/// `POLLRDHUP`: the peer shut its writing down (or is gone).
const READ_HANG_UP: u16 = 0x2000;

enum State {
    Unconnected,
    Listening {
        backlog: usize,
        pending: VecDeque<u64>,
    },
    /// A TCP connection to another machine being made (the network stack's `SYN` sent).
    Connecting,
    /// Reads `receive`, writes `send` (pipe ids); `peer` is the other end's socket (0: a
    /// connection through the network stack, whose far end is `remote`).
    Connected {
        receive: u64,
        send: u64,
        peer: u64,
    },
}

impl State {
    fn is_unconnected(&self) -> bool {
        matches!(self, State::Unconnected)
    }
}

pub(super) struct Socket {
    /// `AF_UNIX` or `AF_INET`.
    family: u16,
    /// `SOCK_STREAM`, `SOCK_DGRAM` or `SOCK_SEQPACKET`.
    kind: u64,
    /// A message socket's messages in its receiving pipe: their lengths, oldest first.
    records: VecDeque<usize>,
    state: State,
    /// Its address once bound: `sun_path` bytes (an abstract name starts with NUL), or an
    /// inet socket's address and port ([`inet::Endpoint`]).
    name: Option<Vec<u8>>,
    /// The tmpfs node a path-bound socket named.
    node: Option<NodeId>,
    /// `shutdown` done: reading, writing.
    shut_read: bool,
    shut_write: bool,
    /// The pid that made it (`SO_PEERCRED` of its peer).
    owner: u32,
    /// Moves when a listener's queue does, or a UDP socket's (edge-triggered `epoll`).
    generation: u64,
    /// A UDP socket's datagrams not yet read, with their senders, and their bytes in all.
    datagrams: VecDeque<(inet::Endpoint, Vec<u8>)>,
    queued: usize,
    /// The peer a UDP socket's `connect` named: where its sends go, whom it hears; a TCP
    /// connection's through the network stack.
    remote: Option<inet::Endpoint>,
    /// Why a connection through the network stack failed, for `SO_ERROR` (read once).
    error: Option<Errno>,
    /// `TCP_NODELAY`: a TCP connection through the stack sends small writes at once (smoltcp
    /// without Nagle's algorithm); an accepted connection takes its listener's.
    no_delay: bool,
}

impl Socket {
    /// Queues a datagram (UDP's, or a raw socket's packet) from `sender` for reading: whether
    /// it fit in the socket's buffer (one that does not is dropped, as on Linux).
    fn queue_datagram(&mut self, sender: inet::Endpoint, data: &[u8]) -> bool {
        if self.queued + data.len() > BUFFER_SIZE as usize {
            return false;
        }
        self.queued += data.len();
        self.datagrams.push_back((sender, data.to_vec()));
        self.generation += 1;
        true
    }

    fn new(owner: u32, kind: u64, family: u16) -> Self {
        Self {
            family,
            kind,
            records: VecDeque::new(),
            state: State::Unconnected,
            name: None,
            node: None,
            shut_read: false,
            shut_write: false,
            owner,
            generation: 0,
            datagrams: VecDeque::new(),
            queued: 0,
            remote: None,
            error: None,
            no_delay: false,
        }
    }
}

/// Where a socket's names lead: path-bound ones by node, abstract ones by name, inet ones by
/// port.
#[derive(Default)]
pub(super) struct Names {
    by_node: BTreeMap<NodeId, u64>,
    abstract_names: BTreeMap<Vec<u8>, u64>,
    /// TCP's ports in use and UDP's (two spaces, as on Linux).
    ports: BTreeMap<u16, u64>,
    udp_ports: BTreeMap<u16, u64>,
    /// Where the search for a free ephemeral port starts.
    next_ephemeral: u16,
    /// What went over the loopback, for `/proc/net/dev`: bytes, and packets (a datagram, or a
    /// write to a TCP connection).
    loopback_bytes: u64,
    loopback_packets: u64,
}

const UNIX: u16 = linux_raw_sys::net::AF_UNIX as u16;
const INET: u16 = linux_raw_sys::net::AF_INET as u16;

impl Service {
    fn socket_handle(&mut self, id: u64, status: u64) -> u64 {
        self.new_handle(OpenFile {
            object: Object::Socket(id),
            flags: flags::READ_WRITE | (status & flags::NONBLOCK),
            offset: 0,
            references: 1,
            name: alloc::format!("socket:[{id}]").into_bytes(),
        })
    }

    fn new_socket(&mut self, owner: u32, kind: u64, family: u16) -> u64 {
        let id = self.next_socket;
        self.next_socket += 1;
        self.sockets.insert(id, Socket::new(owner, kind & 0xf, family));
        id
    }

    /// `socket(family, kind, 0)`: `kind` holds `SOCK_NONBLOCK` (`O_NONBLOCK`'s bit). An
    /// unconnected unix datagram socket (`sendto` a path) is not served yet.
    pub(super) fn socket_create(&mut self, pid: u32, kind: u64, family: u16) -> Result<Outcome, Errno> {
        let served = match family {
            UNIX => matches!(kind & 0xf, STREAM | SEQUENCED),
            // Linux: a raw socket needs `CAP_NET_RAW` (root here).
            INET if kind & 0xf == icmp::RAW && !self.caller_is_privileged() => return Err(errno::EPERM),
            INET => matches!(kind & 0xf, STREAM | DATAGRAM | icmp::RAW),
            _ => return Err(errno::EAFNOSUPPORT),
        };
        if !served {
            return Err(errno::EPROTONOSUPPORT);
        }
        let id = self.new_socket(pid, kind, family);
        let handle = self.socket_handle(id, kind);
        Ok(super::open_files::opened(handle, HandleKind::Socket))
    }

    /// Two sockets connected to each other, as `connect` makes them.
    fn connect_pair(&mut self, first: u64, second: u64) {
        let (one_way, other_way) = self.connected_pipes();
        if let Some(socket) = self.sockets.get_mut(&first) {
            socket.state = State::Connected { receive: other_way, send: one_way, peer: second };
        }
        if let Some(socket) = self.sockets.get_mut(&second) {
            socket.state = State::Connected { receive: one_way, send: other_way, peer: first };
        }
        self.changed = true;
    }

    /// `socketpair(AF_UNIX, kind, 0)`: two connected sockets.
    pub(super) fn socket_pair(&mut self, pid: u32, kind: u64) -> Result<Outcome, Errno> {
        if !matches!(kind & 0xf, STREAM | DATAGRAM | SEQUENCED) {
            return Err(errno::EPROTONOSUPPORT);
        }
        let (first, second) = (self.new_socket(pid, kind, UNIX), self.new_socket(pid, kind, UNIX));
        self.connect_pair(first, second);
        let handles = [self.socket_handle(first, kind), self.socket_handle(second, kind)];
        Ok(Outcome::Done(Reply { words: handles, ..Reply::value(0, 0) }))
    }

    fn socket_of(&self, handle: u64) -> Result<u64, Errno> {
        match self.open.get(&handle).map(|file| &file.object) {
            Some(Object::Socket(id)) => Ok(*id),
            Some(_) => Err(errno::ENOTSOCK),
            None => Err(errno::EBADF),
        }
    }

    /// The family of socket `id`, checked against that of an address given to it (`family`):
    /// Linux says `EAFNOSUPPORT` to an inet socket, `EINVAL` to a unix one.
    fn family_of(&self, id: u64, family: u16) -> Result<u16, Errno> {
        let own = self.sockets.get(&id).ok_or(errno::EBADF)?.family;
        match own {
            _ if own == family => Ok(own),
            INET => Err(errno::EAFNOSUPPORT),
            _ => Err(errno::EINVAL),
        }
    }

    /// `bind(handle, name)` of an address of `family`: a path makes a socket node (`mode` the
    /// umask's), an abstract name (leading NUL) an entry of the service's table, an inet
    /// address takes its port.
    pub(super) fn socket_bind(
        &mut self,
        pid: u32,
        handle: u64,
        at: At,
        mode: u32,
        family: u16,
        name: &[u8],
    ) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        let family = self.family_of(id, family)?;
        if self.sockets.get(&id).is_some_and(|socket| socket.name.is_some()) {
            return Err(errno::EINVAL);
        }
        if family == INET {
            self.inet_bind(id, name)?;
            return Ok(Outcome::Done(Reply::value(0, 0)));
        }
        let node = if name.first() == Some(&0) {
            if self.socket_names.abstract_names.contains_key(name) {
                return Err(errno::EADDRINUSE);
            }
            self.socket_names.abstract_names.insert(name.to_vec(), id);
            None
        } else {
            let context = self.context(pid, at.working_directory, at.root)?;
            let (directory, last) = self.vfs.resolve_parent(&context, None, name)?;
            let node = self.vfs.make_socket_node(directory, &last, mode)?;
            self.socket_names.by_node.insert(node, id);
            Some(node)
        };
        if let Some(socket) = self.sockets.get_mut(&id) {
            socket.name = Some(name.to_vec());
            socket.node = node;
        }
        Ok(Outcome::Done(Reply::value(0, 0)))
    }

    /// `listen(handle, backlog)`.
    pub(super) fn socket_listen(&mut self, handle: u64, backlog: u64) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        if self.is_inet_datagram(id) {
            return Err(errno::EOPNOTSUPP);
        }
        if self.sockets.get(&id).is_some_and(|socket| socket.family == INET && socket.state.is_unconnected()) {
            self.inet_autobind(id, [0; 4])?;
        }
        let socket = self.sockets.get_mut(&id).ok_or(errno::EBADF)?;
        let backlog = (backlog as i32).clamp(1, MOST_PENDING as i32) as usize;
        match &mut socket.state {
            State::Listening { backlog: old, .. } => *old = backlog,
            State::Connected { .. } => return Err(errno::EINVAL),
            // Linux binds an unbound socket to an abstract name of its own (autobind); Reef
            // asks for a name first.
            State::Unconnected if socket.name.is_none() => return Err(errno::EINVAL),
            State::Unconnected => socket.state = State::Listening { backlog, pending: VecDeque::new() },
            State::Connecting => return Err(errno::EINVAL),
        }
        if self.sockets.get(&id).is_some_and(|socket| socket.family == INET) {
            self.network_listen(id);
        }
        Ok(Outcome::Done(Reply::value(0, 0)))
    }

    /// The listening socket a name leads to.
    fn listener_named(&self, pid: u32, at: At, name: &[u8]) -> Result<u64, Errno> {
        let id = if name.first() == Some(&0) {
            self.socket_names.abstract_names.get(name).copied().ok_or(errno::ECONNREFUSED)?
        } else {
            let context = self.context(pid, at.working_directory, at.root)?;
            let node = self.vfs.resolve(&context, None, name, true)?;
            if self.vfs.kind(node)? != NodeKind::Socket {
                return Err(errno::ECONNREFUSED);
            }
            self.socket_names.by_node.get(&node).copied().ok_or(errno::ECONNREFUSED)?
        };
        match self.sockets.get(&id).map(|socket| &socket.state) {
            Some(State::Listening { .. }) => Ok(id),
            _ => Err(errno::ECONNREFUSED),
        }
    }

    /// `connect(handle, name)` to an address of `family`: the server's end is made now and
    /// queued for its `accept`; a full queue makes the caller wait (`EAGAIN` if it does not).
    /// A TCP connection to another machine goes through the network stack: the caller waits
    /// until it is made or refused (`done` is 1 when it tries again), or is told
    /// `EINPROGRESS` if it does not wait.
    pub(super) fn socket_connect(
        &mut self,
        pid: u32,
        handle: u64,
        at: At,
        family: u16,
        name: &[u8],
        done: u64,
    ) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        let family = self.family_of(id, family)?;
        if self.is_inet_datagram(id) {
            self.udp_connect(id, name)?;
            return Ok(Outcome::Done(Reply::value(0, 0)));
        }
        let nonblocking = self.open.get(&handle).is_some_and(|file| file.flags & flags::NONBLOCK != 0);
        let socket = self.sockets.get_mut(&id).ok_or(errno::EBADF)?;
        match &socket.state {
            // A connection through the network stack, waited for.
            State::Connecting if done == 1 => return Ok(Outcome::Park(1)),
            State::Connected { .. } if done == 1 => return Ok(Outcome::Done(Reply::value(0, 0))),
            State::Unconnected if done == 1 => return Err(socket.error.take().unwrap_or(errno::ECONNREFUSED)),
            State::Connecting => return Err(errno::EALREADY),
            State::Connected { .. } => return Err(errno::EISCONN),
            State::Listening { .. } => return Err(errno::EINVAL),
            State::Unconnected => {}
        }
        if family == INET {
            if let Some(remote) = self.beyond_this_machine(name)? {
                self.inet_autobind(id, stack::ADDRESS)?;
                let local = self.inet_name(id)?;
                self.network_connect(id, local, remote)?;
                return if nonblocking { Err(errno::EINPROGRESS) } else { Ok(Outcome::Park(1)) };
            }
        }
        let (listener, reached) = if family == INET {
            let (listener, target) = self.inet_listener(name)?;
            (listener, Some(target))
        } else {
            (self.listener_named(pid, at, name)?, None)
        };
        let kind = self.sockets.get(&id).map_or(STREAM, |socket| socket.kind);
        if self.sockets.get(&listener).map(|socket| socket.kind) != Some(kind) {
            // Linux: a name of another socket type refuses the connection.
            return Err(errno::ECONNREFUSED);
        }
        let full = match self.sockets.get(&listener).map(|socket| &socket.state) {
            Some(State::Listening { backlog, pending }) => pending.len() >= *backlog,
            _ => return Err(errno::ECONNREFUSED),
        };
        if full {
            return if nonblocking { Err(errno::EAGAIN) } else { Ok(Outcome::Park(0)) };
        }
        if reached.is_some() {
            // The source address of a connection over the loopback is 127.0.0.1.
            self.inet_autobind(id, [127, 0, 0, 1])?;
            if let Some(socket) = self.sockets.get_mut(&id) {
                if let Some(name) = socket.name.as_mut().filter(|name| name.starts_with(&[0; 4])) {
                    name[..4].copy_from_slice(&[127, 0, 0, 1]);
                }
            }
        }
        let owner = self.sockets.get(&listener).map_or(0, |socket| socket.owner);
        let server_end = self.new_socket(owner, kind, family);
        // The server's end is named by the address the client reached (the listener's, or
        // the one a listener on any address was reached at).
        let listener_name = match reached {
            Some(target) => Some(target.encode()),
            None => self.sockets.get(&listener).and_then(|socket| socket.name.clone()),
        };
        if let Some(socket) = self.sockets.get_mut(&server_end) {
            socket.name = listener_name;
        }
        self.connect_pair(id, server_end);
        if let Some(Socket { state: State::Listening { pending, .. }, generation, .. }) =
            self.sockets.get_mut(&listener)
        {
            pending.push_back(server_end);
            *generation += 1;
        }
        Ok(Outcome::Done(Reply::value(0, 0)))
    }

    /// `accept4(handle, flags)`: the oldest queued connection, a new open file (`flags` may
    /// hold `SOCK_NONBLOCK`); the caller waits while none is queued.
    pub(super) fn socket_accept(&mut self, handle: u64, accept_flags: u64) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        if self.is_inet_datagram(id) {
            return Err(errno::EOPNOTSUPP);
        }
        let nonblocking = self.open.get(&handle).is_some_and(|file| file.flags & flags::NONBLOCK != 0);
        let Some(Socket { state: State::Listening { pending, .. }, generation, .. }) = self.sockets.get_mut(&id) else {
            return Err(errno::EINVAL);
        };
        *generation += 1;
        let Some(accepted) = pending.pop_front() else {
            return if nonblocking { Err(errno::EAGAIN) } else { Ok(Outcome::Park(0)) };
        };
        // A connection queued for the listener: a `connect` waiting for room goes on, and the
        // network stack may queue one it took.
        self.changed = true;
        self.network_due |= self.net.as_ref().is_some_and(|net| net.listens_for(id));
        let new = self.socket_handle(accepted, accept_flags);
        Ok(super::open_files::opened(new, HandleKind::Socket))
    }

    /// `shutdown(handle, how)`: an end closed in one direction or both, the pipes' own close.
    pub(super) fn socket_shutdown(&mut self, handle: u64, how: u64) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        if how > SHUT_BOTH {
            return Err(errno::EINVAL);
        }
        let socket = self.sockets.get_mut(&id).ok_or(errno::EBADF)?;
        let State::Connected { receive, send, .. } = socket.state else { return Err(errno::ENOTCONN) };
        let read = how != SHUT_WRITE && !socket.shut_read;
        let write = how != SHUT_READ && !socket.shut_write;
        socket.shut_read |= read;
        socket.shut_write |= write;
        if read {
            self.close_pipe_end(handle, receive, true, false);
        }
        if write {
            self.close_pipe_end(handle, send, false, true);
        }
        Ok(Outcome::Done(Reply::value(0, 0)))
    }

    /// `getsockname` (`peer` false) or `getpeername`: the name's bytes (none: unnamed; an
    /// unbound inet socket's is `0.0.0.0:0`), and the socket's family as the value.
    pub(super) fn socket_name(&self, handle: u64, peer: bool) -> Result<Outcome, Errno> {
        let id = self.socket_of(handle)?;
        let socket = self.sockets.get(&id).ok_or(errno::EBADF)?;
        let named = if peer && (self.is_inet_datagram(id) || socket.remote.is_some()) {
            Some(socket.remote.ok_or(errno::ENOTCONN)?.encode())
        } else if peer {
            let State::Connected { peer, .. } = socket.state else { return Err(errno::ENOTCONN) };
            self.sockets.get(&peer).and_then(|peer| peer.name.clone())
        } else {
            socket.name.clone()
        };
        let unnamed = if socket.family == INET { alloc::vec![0; inet::NAME_BYTES] } else { Vec::new() };
        Ok(Outcome::Done(Reply { bytes: named.unwrap_or(unnamed), ..Reply::value(0, u64::from(socket.family)) }))
    }

    /// `getsockopt(level, option)`, or `setsockopt` with `set`'s value: `SOL_SOCKET`'s options
    /// a unix stream socket has (read here; the system-call layer takes the settable ones),
    /// and `TCP_NODELAY` of a TCP socket, kept with it.
    pub(super) fn socket_option(
        &mut self,
        handle: u64,
        level: u64,
        option: u64,
        set: Option<u64>,
    ) -> Result<Outcome, Errno> {
        const TCP_NODELAY: u64 = 1;
        if level == linux_raw_sys::net::IPPROTO_TCP as u64 {
            let id = self.socket_of(handle)?;
            if !self.sockets.get(&id).is_some_and(|socket| socket.family == INET && socket.kind == STREAM) {
                return Err(errno::EOPNOTSUPP);
            }
            if option != TCP_NODELAY {
                return Err(errno::ENOPROTOOPT);
            }
            if let Some(value) = set {
                self.set_no_delay(id, value != 0);
            }
            let no_delay = self.sockets.get(&id).is_some_and(|socket| socket.no_delay);
            return Ok(Outcome::Done(Reply::value(0, u64::from(no_delay))));
        }
        if set.is_some() || level != u64::from(linux_raw_sys::net::SOL_SOCKET) {
            return Err(errno::ENOPROTOOPT);
        }
        const SO_TYPE: u64 = 3;
        const SO_ERROR: u64 = 4;
        const SO_SNDBUF: u64 = 7;
        const SO_RCVBUF: u64 = 8;
        const SO_PEERCRED: u64 = 17;
        const SO_ACCEPTCONN: u64 = 30;
        const SO_PROTOCOL: u64 = 38;
        const SO_DOMAIN: u64 = 39;
        let id = self.socket_of(handle)?;
        let socket = self.sockets.get_mut(&id).ok_or(errno::EBADF)?;
        let value = match option {
            SO_TYPE => socket.kind,
            SO_ERROR => u64::from(socket.error.take().unwrap_or(0)),
            SO_SNDBUF | SO_RCVBUF => BUFFER_SIZE,
            SO_ACCEPTCONN => u64::from(matches!(socket.state, State::Listening { .. })),
            SO_DOMAIN => u64::from(socket.family),
            // `IPPROTO_TCP`, `IPPROTO_UDP`; 0 for a unix socket.
            SO_PROTOCOL => match (socket.family, socket.kind) {
                (INET, STREAM) => 6,
                (INET, icmp::RAW) => 1,
                (INET, _) => 17,
                _ => 0,
            },
            // The peer's pid (uid and gid 0: one user), as the words' first.
            SO_PEERCRED => match socket.state {
                State::Connected { peer, .. } => u64::from(self.sockets.get(&peer).map_or(0, |peer| peer.owner)),
                _ => 0,
            },
            _ => return Err(errno::ENOPROTOOPT),
        };
        Ok(Outcome::Done(Reply::value(0, value)))
    }

    /// The pipes a connected socket reads and writes, for `io.rs`: `ENOTCONN` otherwise.
    pub(super) fn socket_pipes(&self, id: u64) -> Result<(u64, u64), Errno> {
        match self.sockets.get(&id).map(|socket| &socket.state) {
            Some(State::Connected { receive, send, .. }) => Ok((*receive, *send)),
            Some(_) => Err(errno::ENOTCONN),
            None => Err(errno::EBADF),
        }
    }

    /// Whether socket `id` is a TCP connection over the loopback (the network stack counts
    /// its own).
    pub(super) fn is_loopback_tcp(&self, id: u64) -> bool {
        self.sockets.get(&id).is_some_and(|socket| {
            socket.family == INET
                && socket.kind == STREAM
                && matches!(socket.state, State::Connected { peer, .. } if peer != 0)
        })
    }

    /// Counts `bytes` sent over the loopback as one packet (a datagram, or a write to a TCP
    /// connection).
    pub(super) fn count_loopback(&mut self, bytes: usize) {
        self.socket_names.loopback_bytes += bytes as u64;
        self.socket_names.loopback_packets += 1;
    }

    /// Whether socket `id` is an inet socket of datagrams: UDP's, or a raw ICMP socket's.
    pub(super) fn is_inet_datagram(&self, id: u64) -> bool {
        self.is_udp(id) || self.is_raw(id)
    }

    /// Whether socket `id` is a UDP socket.
    pub(super) fn is_udp(&self, id: u64) -> bool {
        self.sockets.get(&id).is_some_and(|socket| socket.family == INET && socket.kind == DATAGRAM)
    }

    /// Whether socket `id` keeps a byte stream (else its messages keep their bounds).
    pub(super) fn socket_is_stream(&self, id: u64) -> bool {
        self.sockets.get(&id).is_none_or(|socket| socket.kind == STREAM)
    }

    /// Reads the oldest message of message socket `id`: its first `length` bytes, the rest
    /// dropped (as Linux's `MSG_TRUNC` reading); `None` when the caller must wait; end of file
    /// (empty) once the peer is gone and no message is left.
    pub(super) fn socket_read_message(
        &mut self,
        id: u64,
        length: usize,
        nonblocking: bool,
    ) -> Result<Option<Vec<u8>>, Errno> {
        let (receive, _) = self.socket_pipes(id)?;
        let socket = self.sockets.get_mut(&id).ok_or(errno::EBADF)?;
        let Some(size) = socket.records.pop_front() else {
            // A datagram pair has no connection to end: its reader waits on, as on Linux.
            let peer_gone = socket.shut_read
                || (socket.kind == SEQUENCED && self.pipes.get(&receive).is_none_or(|pipe| pipe.writers == 0));
            return match () {
                _ if peer_gone => Ok(Some(Vec::new())),
                _ if nonblocking => Err(errno::EAGAIN),
                _ => Ok(None),
            };
        };
        let mut message = match self.read_pipe(receive, size, true) {
            Ok(Some(message)) => message,
            _ => return Err(errno::EIO),
        };
        message.truncate(length);
        Ok(Some(message))
    }

    /// Writes `data` as one message of message socket `id`: whole or not at all (`EMSGSIZE`
    /// past what the pipe holds); the caller waits for room.
    pub(super) fn socket_write_message(&mut self, id: u64, data: &[u8], nonblocking: bool) -> Result<Outcome, Errno> {
        if data.len() > MOST_MESSAGE {
            return Err(errno::EMSGSIZE);
        }
        let Some(Socket { state: State::Connected { send, peer, .. }, .. }) = self.sockets.get(&id) else {
            return Err(errno::ENOTCONN);
        };
        let (send, peer) = (*send, *peer);
        let pipe = self.pipes.get(&send).ok_or(errno::EPIPE)?;
        if pipe.readers == 0 {
            return Err(errno::EPIPE);
        }
        if pipe.buffer.space() < data.len() {
            return if nonblocking { Err(errno::EAGAIN) } else { Ok(Outcome::Park(0)) };
        }
        match self.write_pipe(send, data, 0, true)? {
            Outcome::Done(reply) if reply.result == data.len() as i64 => {}
            _ => return Err(errno::EIO),
        }
        if let Some(peer) = self.sockets.get_mut(&peer) {
            peer.records.push_back(data.len());
        }
        Ok(Outcome::Done(Reply::value(0, data.len() as u64)))
    }

    /// Whether socket `id` shut its reading down (a read is then end of file) and its writing
    /// (a write is then `EPIPE`).
    pub(super) fn socket_shut(&self, id: u64) -> (bool, bool) {
        self.sockets.get(&id).map_or((false, false), |socket| (socket.shut_read, socket.shut_write))
    }

    /// The `poll` events of socket `id`.
    pub(super) fn socket_readiness(&self, id: u64) -> u16 {
        let Some(socket) = self.sockets.get(&id) else { return events::INVALID };
        if socket.family == INET && matches!(socket.kind, DATAGRAM | icmp::RAW) {
            // A datagram may always be sent (one the receiver has no room for is dropped).
            return events::OUT | if socket.datagrams.is_empty() { 0 } else { events::IN };
        }
        match &socket.state {
            State::Unconnected if socket.error.is_some() => events::OUT | events::HANG_UP | events::ERROR,
            State::Unconnected => events::OUT | events::HANG_UP,
            State::Connecting => 0,
            State::Listening { pending, .. } => {
                if pending.is_empty() {
                    0
                } else {
                    events::IN
                }
            }
            State::Connected { receive, send, .. } => {
                let mut ready = 0;
                let peer_done = self.pipes.get(receive).is_none_or(|pipe| pipe.writers == 0);
                let waiting = if socket.kind == STREAM {
                    self.pipes.get(receive).is_some_and(|pipe| !pipe.buffer.is_empty())
                } else {
                    !socket.records.is_empty()
                };
                if waiting || peer_done {
                    ready |= events::IN;
                }
                if peer_done {
                    ready |= READ_HANG_UP;
                }
                match self.pipes.get(send) {
                    Some(pipe) if pipe.readers > 0 && !socket.shut_write => {
                        if pipe.buffer.space() > 0 {
                            ready |= events::OUT;
                        }
                    }
                    _ if peer_done => ready |= events::HANG_UP,
                    _ => ready |= events::OUT,
                }
                ready
            }
        }
    }

    /// A count that moves when what socket `id` is ready for may have changed (edge-triggered
    /// `epoll`): its pipes' generations, or its queue's length.
    pub(super) fn socket_generation(&self, id: u64) -> u64 {
        let Some(socket) = self.sockets.get(&id) else { return 0 };
        match &socket.state {
            State::Connected { receive, send, .. } => {
                let generation = |pipe: &u64| self.pipes.get(pipe).map_or(0, |pipe| pipe.generation);
                generation(receive).wrapping_add(generation(send))
            }
            _ => socket.generation,
        }
    }

    /// `fstat` of a socket: `S_IFSOCK`, its id as inode.
    pub(super) fn stat_socket(&self, id: u64) -> Metadata {
        Metadata { device: 8, inode: id, mode: initramfs::mode::SOCKET | 0o777, links: 1, ..Metadata::default() }
    }

    /// The last reference to socket `id`'s open file went: its ends close (what `shutdown`
    /// left), a listener's queued connections are dropped, its name leads nowhere.
    pub(super) fn close_socket(&mut self, handle: u64, id: u64) {
        let Some(socket) = self.sockets.remove(&id) else { return };
        if socket.family == INET {
            self.inet_release(id, &socket);
            self.network_release(id);
        }
        if let Some(node) = socket.node {
            self.socket_names.by_node.remove(&node);
        }
        if let Some(name) = socket.name.as_ref().filter(|name| name.first() == Some(&0)) {
            if self.socket_names.abstract_names.get(name) == Some(&id) {
                self.socket_names.abstract_names.remove(name);
            }
        }
        match socket.state {
            State::Connected { receive, send, .. } => {
                if !socket.shut_read {
                    self.close_pipe_end(handle, receive, true, false);
                }
                if !socket.shut_write {
                    self.close_pipe_end(handle, send, false, true);
                }
            }
            State::Listening { pending, .. } => {
                // Their clients read end of file and get EPIPE, as when a server closes them.
                for queued in pending {
                    self.close_socket(handle, queued);
                }
            }
            State::Unconnected | State::Connecting => {}
        }
        self.changed = true;
    }
}
