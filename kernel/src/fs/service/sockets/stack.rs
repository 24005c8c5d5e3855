//! The network stack: one `smoltcp` interface over the virtio-net device, kept by the file
//! service beside its sockets (Barrelfish's socket service, Popcorn's primary-kernel NIC), so
//! that a connection to another machine is one more kind of socket of the service, read,
//! written, polled and waited on through the same pipes as a loopback one.
//!
//! A TCP connection through the stack is a *link*: the socket's two pipes (as a loopback
//! connection has) with the stack at their far ends. The stack moves what the process wrote
//! from the sending pipe into smoltcp's socket, and what arrived from smoltcp into the
//! receiving pipe, each time it runs: after a request that moved bytes, when the device's
//! interrupt came (the interrupt only notes it; the service's instance runs the stack in
//! thread context at its next safe point, taking every frame waiting), and when smoltcp's own
//! timers ask (retransmission, delayed acknowledgement). A listening socket on any address or
//! on the interface's has a few smoltcp sockets listening on its port; each connection they
//! take becomes a link queued for `accept`, and a fresh one listens in its place. A UDP
//! socket bound to a port has a smoltcp socket there too; datagrams that arrive join its
//! queue as loopback ones do.

use super::inet::Endpoint;
use super::{Socket, State, INET, STREAM};
use crate::dev::net;
use crate::fs::service::{Errno, Service};
use crate::virtio::net::{PacketDevice, SLOTS};
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use linux_raw_sys::errno;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::{icmp, tcp, udp};
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, IpEndpoint, IpListenEndpoint, Ipv4Address};

/// QEMU user networking's defaults: the guest's address, its network and the gateway (which
/// also answers DNS at .3).
pub(in crate::fs::service) const ADDRESS: [u8; 4] = [10, 0, 2, 15];
const PREFIX: u8 = 24;
/// The network's mask, from [`PREFIX`].
const NETMASK: [u8; 4] = (u32::MAX << (32 - PREFIX as u32)).to_be_bytes();
const GATEWAY: [u8; 4] = [10, 0, 2, 2];
/// Bytes each way of a TCP connection's smoltcp buffers (its window).
const TCP_BUFFER: usize = 32 * 1024;
/// The most TCP sockets the stack holds at once (links and listening ones): with their
/// buffers, 64 KiB each, a quarter of the service instance's heap.
const MOST_TCP: usize = 64;
/// smoltcp sockets listening per listening socket at most: the SYNs it takes between two runs
/// of the stack (its `listen` backlog, if smaller); a SYN that finds none is answered with a
/// reset, which the peer sees as a refused connection.
const LISTENING_PER_PORT: usize = 16;
/// A link whose process closed it is dropped if its peer does not finish the close in this
/// long (smoltcp's timeout: no answer to what it sends).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);
/// Rounds of one run of the stack at most (smoltcp, then the pipes), so that a flood of frames
/// cannot keep the service's instance from its other work.
const MOST_ROUNDS: u32 = 16;
/// Datagrams, and bytes, a UDP socket's smoltcp buffers hold each way.
const UDP_PACKETS: usize = 32;
const UDP_BYTES: usize = 64 * 1024;

/// The device's interrupt came (set in interrupt context, taken by [`poll_network`]).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// When smoltcp next wants to run (monotonic ns; `u64::MAX`: not before something happens).
static NEXT_RUN_NS: AtomicU64 = AtomicU64::new(u64::MAX);

/// The device's interrupt listener: the stack has frames to take.
fn on_interrupt() {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Whether the stack has work now: the device interrupted, or a timer of smoltcp's is due.
pub(in crate::fs::service) fn has_work() -> bool {
    INTERRUPTED.load(Ordering::Relaxed) || crate::time::now_ns() >= NEXT_RUN_NS.load(Ordering::Relaxed)
}

/// The virtio-net device as smoltcp sees it.
struct Wire(PacketDevice);

/// A received frame, copied out of its slot (which goes back to the device at once).
struct Frame(Vec<u8>);

/// The right to send one frame.
struct Sender<'a>(&'a mut PacketDevice);

impl RxToken for Frame {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl TxToken for Sender<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, length: usize, f: F) -> R {
        let mut fill = Some(f);
        if let Ok(Some(result)) = self.0.transmit(length, |frame| fill.take().map(|f| f(frame))) {
            return result;
        }
        // No slot after all, or a frame longer than one: smoltcp still writes it, and it is
        // dropped (counted by the device); TCP sends it again.
        let mut scratch = vec![0; length];
        match fill.take() {
            Some(f) => f(&mut scratch),
            None => unreachable!("a frame filled and sent returned its result above"),
        }
    }
}

impl Device for Wire {
    type RxToken<'a> = Frame;
    type TxToken<'a> = Sender<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(Frame, Sender<'_>)> {
        let frame = self.0.receive(|bytes| bytes.to_vec())?;
        Some((Frame(frame), Sender(&mut self.0)))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<Sender<'_>> {
        self.0.can_transmit().then_some(Sender(&mut self.0))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut capabilities = DeviceCapabilities::default();
        capabilities.medium = Medium::Ethernet;
        capabilities.max_transmission_unit = 1514;
        capabilities.max_burst_size = Some(SLOTS);
        capabilities
    }
}

/// A TCP connection through the stack.
pub(in crate::fs::service) struct Link {
    handle: SocketHandle,
    /// The pipe the stack writes what arrives into (the socket reads it) and the one it takes
    /// what to send from; `None` while the connection is being made.
    pipes: Option<(u64, u64)>,
    /// The stack's own ends still open: its writing end of the receiving pipe (closed at the
    /// peer's FIN: the process reads end of file), its reading end of the sending pipe (closed
    /// when the connection is gone: the process's writes get `EPIPE`).
    writing: bool,
    reading: bool,
    /// The process's end is closed for writing and smoltcp was told to send FIN.
    finished: bool,
}

/// What the stack did, for `/proc/reef/net` and `/proc/net/dev`.
#[derive(Clone, Copy, Default)]
struct Counts {
    runs: u64,
    /// Runs that followed an interrupt of the device.
    interrupt_runs: u64,
    connections_made: u64,
    connections_accepted: u64,
    connections_refused: u64,
    /// SYNs a listener could not take (its queue or the stack's sockets full).
    listen_overflows: u64,
    bytes_in: u64,
    bytes_out: u64,
}

pub(in crate::fs::service) struct Stack {
    wire: Wire,
    interface: Interface,
    sockets: SocketSet<'static>,
    /// TCP connections, by the socket of the service they carry (kept after the socket
    /// closed, until its connection ends).
    links: BTreeMap<u64, Link>,
    /// Listening sockets of the service with smoltcp sockets on their port.
    listeners: BTreeMap<u64, Vec<SocketHandle>>,
    /// UDP sockets of the service with a smoltcp socket on their port.
    datagrams: BTreeMap<u64, SocketHandle>,
    /// Raw ICMP sockets of the service with a smoltcp ICMP socket (bound to the identifier of
    /// the echo requests they send).
    icmp: BTreeMap<u64, SocketHandle>,
    tcp_sockets: usize,
    counts: Counts,
}

impl Stack {
    /// The stack over the network device, if there is one (the file service's start).
    pub(in crate::fs::service) fn start() -> Option<Self> {
        let device = net::take()?;
        let mac = device.mac();
        let mut wire = Wire(device);
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        let mut seed = [0u8; 8];
        crate::random::fill(&mut seed);
        config.random_seed = u64::from_le_bytes(seed);
        let mut interface = Interface::new(config, &mut wire, now());
        let [a, b, c, d] = ADDRESS;
        interface.update_ip_addrs(|addresses| {
            let _ = addresses.push(IpCidr::new(IpAddress::v4(a, b, c, d), PREFIX));
        });
        let [a, b, c, d] = GATEWAY;
        let _ = interface.routes_mut().add_default_ipv4_route(Ipv4Address::new(a, b, c, d));
        net::register_listener(on_interrupt);
        let ([a, b, c, d], [e, f, g, h]) = (ADDRESS, GATEWAY);
        log::info!("network: eth0 {a}.{b}.{c}.{d}/{PREFIX} via {e}.{f}.{g}.{h}, MAC {}", EthernetAddress(mac));
        Some(Self {
            wire,
            interface,
            sockets: SocketSet::new(Vec::new()),
            links: BTreeMap::new(),
            listeners: BTreeMap::new(),
            datagrams: BTreeMap::new(),
            icmp: BTreeMap::new(),
            tcp_sockets: 0,
            counts: Counts::default(),
        })
    }

    /// Whether the stack listens for socket `id` of the service.
    pub(super) fn listens_for(&self, id: u64) -> bool {
        self.listeners.contains_key(&id)
    }

    fn new_tcp(&mut self) -> Result<SocketHandle, Errno> {
        if self.tcp_sockets >= MOST_TCP {
            return Err(errno::ENOBUFS);
        }
        self.tcp_sockets += 1;
        let socket =
            tcp::Socket::new(tcp::SocketBuffer::new(vec![0; TCP_BUFFER]), tcp::SocketBuffer::new(vec![0; TCP_BUFFER]));
        Ok(self.sockets.add(socket))
    }

    fn drop_tcp(&mut self, handle: SocketHandle) {
        self.sockets.get_mut::<tcp::Socket>(handle).abort();
        self.sockets.remove(handle);
        self.tcp_sockets -= 1;
    }

    fn tcp(&mut self, handle: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(handle)
    }

    /// `/proc/reef/net`.
    pub(in crate::fs::service) fn write_view(&self, out: &mut dyn Write) -> core::fmt::Result {
        let device = self.wire.0.counts();
        let interrupts = net::interrupts();
        let [a, b, c, d] = ADDRESS;
        writeln!(out, "interface: eth0 {a}.{b}.{c}.{d}/{PREFIX}, MAC {}, smoltcp", EthernetAddress(self.wire.0.mac()))?;
        writeln!(out, "frames received: {} ({} bytes)", device.received, device.received_bytes)?;
        writeln!(out, "frames sent: {} ({} bytes)", device.transmitted, device.transmitted_bytes)?;
        writeln!(out, "frames refused: {}, sends without a free slot: {}", device.bad, device.transmit_full)?;
        writeln!(out, "interrupts: {interrupts}")?;
        let per_interrupt = (device.received * 100).checked_div(interrupts).unwrap_or(0);
        writeln!(out, "frames received per interrupt: {}.{:02}", per_interrupt / 100, per_interrupt % 100)?;
        writeln!(out, "stack runs: {} ({} after an interrupt)", self.counts.runs, self.counts.interrupt_runs)?;
        writeln!(
            out,
            "tcp: {} links, {} listening sockets, {} of {MOST_TCP} smoltcp sockets; {} connected, {} accepted, {} \
             refused, {} SYNs not taken",
            self.links.len(),
            self.listeners.len(),
            self.tcp_sockets,
            self.counts.connections_made,
            self.counts.connections_accepted,
            self.counts.connections_refused,
            self.counts.listen_overflows
        )?;
        writeln!(out, "tcp bytes: {} in, {} out", self.counts.bytes_in, self.counts.bytes_out)?;
        writeln!(out, "udp: {} sockets", self.datagrams.len())?;
        writeln!(out, "icmp: {} raw sockets", self.icmp.len())
    }

    /// `/proc/net/dev`'s counts of eth0: bytes and frames received, then sent.
    pub(in crate::fs::service) fn device_counts(&self) -> [u64; 4] {
        let device = self.wire.0.counts();
        [device.received_bytes, device.received, device.transmitted_bytes, device.transmitted]
    }
}

fn now() -> Instant {
    Instant::from_micros((crate::time::now_ns() / 1000) as i64)
}

fn endpoint_of(endpoint: IpEndpoint) -> Endpoint {
    let IpAddress::Ipv4(address) = endpoint.addr;
    Endpoint { address: address.octets(), port: endpoint.port }
}

fn ip_endpoint(endpoint: Endpoint) -> IpEndpoint {
    let [a, b, c, d] = endpoint.address;
    IpEndpoint::new(IpAddress::v4(a, b, c, d), endpoint.port)
}

/// Runs the stack if it has work, on the service's instance at a safe point (idle, return to
/// user), and completes what that unblocks.
pub fn poll_network() {
    if !crate::fs::serves_files_here() || !has_work() {
        return;
    }
    let mut later = Vec::new();
    {
        let mut guard = crate::fs::service::SERVICE.lock();
        let Some(service) = guard.as_mut() else { return };
        service.run_network();
        service.retry_parked(&mut later);
    }
    crate::fs::service::transport::deliver(later);
}

impl Service {
    /// `/proc/reef/net`: the stack, or that there is none.
    pub(in crate::fs::service) fn network_text(&self) -> alloc::string::String {
        let mut text = alloc::string::String::new();
        match &self.net {
            Some(net) => {
                let _ = net.write_view(&mut text);
            }
            None => text.push_str("no network device (boot with `cargo xtask run --net`)\n"),
        }
        text
    }

    /// The machine's interfaces: the loopback, and eth0 when there is a network device.
    pub(in crate::fs::service) fn interfaces(&self) -> Vec<abi::net::Interface> {
        use abi::net::{flags, Interface};
        let mut interfaces = vec![Interface {
            address: [127, 0, 0, 1],
            netmask: [255, 0, 0, 0],
            flags: flags::UP | flags::LOOPBACK | flags::RUNNING,
            mtu: 65536,
            hardware_kind: abi::net::HARDWARE_LOOPBACK,
            transmit_queue: 1000,
            index: 1,
            ..Interface::named("lo")
        }];
        if let Some(net) = &self.net {
            interfaces.push(Interface {
                address: ADDRESS,
                netmask: NETMASK,
                flags: flags::UP | flags::BROADCAST | flags::RUNNING | flags::MULTICAST,
                mtu: 1500,
                hardware: net.wire.0.mac(),
                hardware_kind: abi::net::HARDWARE_ETHERNET,
                transmit_queue: SLOTS as u32,
                index: 2,
                ..Interface::named("eth0")
            });
        }
        interfaces
    }

    /// `/proc/net/route` as Linux writes it: eth0's network and its default route through the
    /// gateway (addresses as Linux prints them, the bytes in memory order read as a
    /// little-endian word).
    pub(in crate::fs::service) fn route_text(&self) -> alloc::string::String {
        let mut text = alloc::string::String::from(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n",
        );
        if self.net.is_some() {
            let hex = |address: [u8; 4]| alloc::format!("{:08X}", u32::from_le_bytes(address));
            let network: [u8; 4] = core::array::from_fn(|i| ADDRESS[i] & NETMASK[i]);
            // `RTF_UP | RTF_GATEWAY`, then `RTF_UP`.
            let _ = writeln!(text, "eth0\t{}\t{}\t0003\t0\t0\t0\t{}\t0\t0\t0", hex([0; 4]), hex(GATEWAY), hex([0; 4]));
            let _ = writeln!(text, "eth0\t{}\t{}\t0001\t0\t0\t0\t{}\t0\t0\t0", hex(network), hex([0; 4]), hex(NETMASK));
        }
        text
    }

    /// Whether `address` is this machine's: the loopback, any (`0.0.0.0`), or the interface's.
    pub(super) fn is_local(&self, address: [u8; 4]) -> bool {
        address[0] == 127 || address == [0; 4] || (self.net.is_some() && address == ADDRESS)
    }

    /// Runs the stack: what processes wrote goes to smoltcp, smoltcp takes and sends frames,
    /// what arrived goes to the processes' pipes, listeners' new connections are queued.
    /// Repeats while it moves something (a pipe emptied into smoltcp may take more).
    pub(in crate::fs::service) fn run_network(&mut self) {
        let Some(mut net) = self.net.take() else { return };
        let interrupted = INTERRUPTED.swap(false, Ordering::Relaxed);
        net.counts.runs += 1;
        if interrupted {
            net.counts.interrupt_runs += 1;
            net.wire.0.acknowledge();
        }
        // smoltcp first (frames in, acknowledgements that free room), then the pipes both
        // ways; again while the pipes moved something, which smoltcp must then send (or
        // acknowledge, or announce as a wider window).
        let mut rounds = 0;
        let more = loop {
            net.interface.poll(now(), &mut net.wire, &mut net.sockets);
            let moved = self.network_input(&mut net) | self.network_output(&mut net);
            rounds += 1;
            if !moved {
                break false;
            }
            if rounds == MOST_ROUNDS {
                break true;
            }
        };
        let next = match net.interface.poll_delay(now(), &net.sockets) {
            // Bytes left to move after the last round: run again at the next safe point.
            _ if more => crate::time::now_ns(),
            Some(delay) => crate::time::now_ns().saturating_add(delay.total_micros() * 1000),
            None => u64::MAX,
        };
        NEXT_RUN_NS.store(next, Ordering::Relaxed);
        // What the rounds moved themselves is done.
        self.network_due = false;
        self.net = Some(net);
    }

    /// Moves what processes wrote into smoltcp's sockets; whether anything moved.
    fn network_output(&mut self, net: &mut Stack) -> bool {
        let mut moved = false;
        for link in net.links.values_mut() {
            let Some((_, send)) = link.pipes else { continue };
            let socket = net.sockets.get_mut::<tcp::Socket>(link.handle);
            let Some(pipe) = self.pipes.get_mut(&send) else { continue };
            let store = self.vfs.page_store();
            while !pipe.buffer.is_empty() && socket.can_send() {
                let taken = socket.send(|room| {
                    let count = pipe.buffer.read(&mut *store, room);
                    (count, count)
                });
                match taken {
                    Ok(count) if count > 0 => {
                        net.counts.bytes_out += count as u64;
                        pipe.generation += 1;
                        self.changed = true;
                        moved = true;
                    }
                    _ => break,
                }
            }
            if pipe.buffer.is_empty() && pipe.writers == 0 && !link.finished {
                // The process closed its writing: FIN after what it wrote.
                socket.close();
                socket.set_timeout(Some(CLOSE_TIMEOUT));
                link.finished = true;
                moved = true;
            }
        }
        moved
    }

    /// Moves what arrived into processes' pipes, ends connections, queues listeners' new ones
    /// and UDP datagrams; whether anything moved.
    fn network_input(&mut self, net: &mut Stack) -> bool {
        let mut moved = false;
        let ids: Vec<u64> = net.links.keys().copied().collect();
        for id in ids {
            moved |= self.link_input(net, id);
        }
        let listeners: Vec<u64> = net.listeners.keys().copied().collect();
        for listener in listeners {
            moved |= self.listener_input(net, listener);
        }
        for (&id, &handle) in &net.datagrams {
            let socket = net.sockets.get_mut::<udp::Socket>(handle);
            while let Ok((data, meta)) = socket.recv() {
                let Some(reef) = self.sockets.get_mut(&id) else { break };
                if reef.remote.is_some_and(|remote| remote != endpoint_of(meta.endpoint)) {
                    continue;
                }
                if reef.queue_datagram(endpoint_of(meta.endpoint), data) {
                    self.changed = true;
                    moved = true;
                }
            }
        }
        let raw: Vec<(u64, SocketHandle)> = net.icmp.iter().map(|(id, handle)| (*id, *handle)).collect();
        for (id, handle) in raw {
            let socket = net.sockets.get_mut::<icmp::Socket>(handle);
            while let Ok((message, source)) = socket.recv() {
                let IpAddress::Ipv4(source) = source;
                self.deliver_icmp(Some(id), source.octets(), ADDRESS, message);
                moved = true;
            }
        }
        moved
    }

    /// One link after smoltcp ran: made, refused, bytes in, end of file, gone.
    fn link_input(&mut self, net: &mut Stack, id: u64) -> bool {
        let Some(link) = net.links.get_mut(&id) else { return false };
        let handle = link.handle;
        let state = net.sockets.get_mut::<tcp::Socket>(handle).state();
        let Some((receive, send)) = link.pipes else {
            // Being made: established, refused, or its socket closed meanwhile.
            let alive = self.sockets.contains_key(&id);
            match state {
                tcp::State::Established | tcp::State::CloseWait if alive => {
                    let pipes = self.link_pipes();
                    link.pipes = Some(pipes);
                    if let Some(socket) = self.sockets.get_mut(&id) {
                        socket.state = State::Connected { receive: pipes.0, send: pipes.1, peer: 0 };
                    }
                    net.counts.connections_made += 1;
                }
                tcp::State::SynSent | tcp::State::SynReceived if alive => return false,
                _ => {
                    if let Some(socket) = self.sockets.get_mut(&id) {
                        socket.state = State::Unconnected;
                        socket.error = Some(errno::ECONNREFUSED);
                        net.counts.connections_refused += 1;
                    }
                    net.links.remove(&id);
                    net.drop_tcp(handle);
                }
            }
            self.changed = true;
            return true;
        };
        let mut moved = false;
        let socket = net.sockets.get_mut::<tcp::Socket>(handle);
        let store = self.vfs.page_store();
        if let Some(pipe) = self.pipes.get_mut(&receive) {
            while socket.can_recv() {
                let readers = pipe.readers;
                let taken = socket.recv(|arrived| {
                    // Nobody reads any more: what arrives is dropped.
                    let count = if readers == 0 { arrived.len() } else { pipe.buffer.write(&mut *store, arrived) };
                    (count, count)
                });
                match taken {
                    Ok(count) if count > 0 => {
                        net.counts.bytes_in += count as u64;
                        pipe.generation += 1;
                        moved = true;
                    }
                    _ => break,
                }
            }
        }
        let peer_finished = !socket.may_recv() && !socket.can_recv();
        let gone = matches!(state, tcp::State::Closed | tcp::State::TimeWait);
        if peer_finished && link.writing {
            // The peer's FIN (or the connection's end): the process reads end of file.
            link.writing = false;
            self.close_pipe_end(0, receive, false, true);
            moved = true;
        }
        if state == tcp::State::Closed && link.reading {
            // Nothing will be sent any more: the process's writes get `EPIPE`.
            link.reading = false;
            self.close_pipe_end(0, send, true, false);
            moved = true;
        }
        let process_done = self.pipes.get(&receive).is_none_or(|pipe| pipe.readers == 0)
            && self.pipes.get(&send).is_none_or(|pipe| pipe.writers == 0);
        if process_done && gone {
            if link.writing {
                self.close_pipe_end(0, receive, false, true);
            }
            if link.reading {
                self.close_pipe_end(0, send, true, false);
            }
            net.links.remove(&id);
            net.drop_tcp(handle);
            moved = true;
        }
        if moved {
            self.changed = true;
        }
        moved
    }

    /// A listening socket's smoltcp sockets after smoltcp ran: each one that took a
    /// connection becomes a link queued for `accept`, and listens again through a new one.
    fn listener_input(&mut self, net: &mut Stack, listener: u64) -> bool {
        let Some(handles) = net.listeners.get(&listener).cloned() else { return false };
        let Some(Socket { state: State::Listening { backlog, .. }, name, owner, .. }) = self.sockets.get(&listener)
        else {
            // The listening socket is gone.
            for handle in handles {
                net.drop_tcp(handle);
            }
            net.listeners.remove(&listener);
            return true;
        };
        let (owner, port) =
            (*owner, name.as_deref().and_then(|name| Endpoint::decode(name).ok()).map_or(0, |e| e.port));
        let listening = (*backlog).clamp(1, LISTENING_PER_PORT);
        let no_delay = self.sockets.get(&listener).is_some_and(|socket| socket.no_delay);
        let mut moved = false;
        let mut kept = Vec::with_capacity(handles.len());
        for handle in handles {
            let socket = net.sockets.get_mut::<tcp::Socket>(handle);
            match socket.state() {
                tcp::State::Listen | tcp::State::SynReceived => kept.push(handle),
                tcp::State::Established | tcp::State::CloseWait => {
                    let full = match self.sockets.get(&listener).map(|socket| &socket.state) {
                        Some(State::Listening { backlog, pending }) => pending.len() >= *backlog,
                        _ => true,
                    };
                    if full {
                        kept.push(handle);
                        continue;
                    }
                    let (local, remote) = (socket.local_endpoint(), socket.remote_endpoint());
                    socket.set_nagle_enabled(!no_delay);
                    let id = self.new_socket(owner, STREAM, INET);
                    let pipes = self.link_pipes();
                    if let Some(accepted) = self.sockets.get_mut(&id) {
                        accepted.name = local.map(|local| endpoint_of(local).encode());
                        accepted.remote = remote.map(endpoint_of);
                        accepted.state = State::Connected { receive: pipes.0, send: pipes.1, peer: 0 };
                        accepted.no_delay = no_delay;
                    }
                    net.links
                        .insert(id, Link { handle, pipes: Some(pipes), writing: true, reading: true, finished: false });
                    if let Some(Socket { state: State::Listening { pending, .. }, generation, .. }) =
                        self.sockets.get_mut(&listener)
                    {
                        pending.push_back(id);
                        *generation += 1;
                    }
                    net.counts.connections_accepted += 1;
                    moved = true;
                }
                _ => {
                    // Reset before it was accepted: listen again.
                    socket.abort();
                    if socket.listen(port).is_ok() {
                        kept.push(handle);
                    } else {
                        net.drop_tcp(handle);
                    }
                }
            }
        }
        // Listen again in the place of those that became links.
        while kept.len() < listening {
            let Ok(handle) = net.new_tcp() else {
                net.counts.listen_overflows += 1;
                break;
            };
            if net.tcp(handle).listen(IpListenEndpoint { addr: None, port }).is_err() {
                net.drop_tcp(handle);
                break;
            }
            kept.push(handle);
        }
        net.listeners.insert(listener, kept);
        if moved {
            self.changed = true;
        }
        moved
    }

    /// Socket `id`'s `TCP_NODELAY`, and its connection's through the stack.
    pub(super) fn set_no_delay(&mut self, id: u64, no_delay: bool) {
        if let Some(socket) = self.sockets.get_mut(&id) {
            socket.no_delay = no_delay;
        }
        if let Some(net) = self.net.as_mut() {
            if let Some(link) = net.links.get(&id) {
                net.sockets.get_mut::<tcp::Socket>(link.handle).set_nagle_enabled(!no_delay);
            }
        }
    }

    /// A listening inet socket `id` on `port` (any address, or the interface's) also takes
    /// connections from the network.
    pub(super) fn network_listen(&mut self, id: u64) {
        let Some(net) = self.net.as_mut() else { return };
        if net.listeners.contains_key(&id) {
            return;
        }
        let Some(bound) = self.sockets.get(&id).and_then(|s| s.name.as_deref()).and_then(|n| Endpoint::decode(n).ok())
        else {
            return;
        };
        if bound.address != [0; 4] && bound.address != ADDRESS {
            return;
        }
        net.listeners.insert(id, Vec::new());
        self.run_network();
    }

    /// `connect` of TCP socket `id` (bound to `local`) to `remote` beyond this machine: a link
    /// being made; the caller waits for it.
    pub(super) fn network_connect(&mut self, id: u64, local: Endpoint, remote: Endpoint) -> Result<(), Errno> {
        let net = self.net.as_mut().ok_or(errno::ENETUNREACH)?;
        let handle = net.new_tcp()?;
        let connected = net.interface.context();
        let socket = net.sockets.get_mut::<tcp::Socket>(handle);
        socket.set_nagle_enabled(!self.sockets.get(&id).is_some_and(|socket| socket.no_delay));
        let made = socket.connect(connected, ip_endpoint(remote), local.port);
        if made.is_err() {
            net.drop_tcp(handle);
            return Err(errno::EADDRNOTAVAIL);
        }
        net.links.insert(id, Link { handle, pipes: None, writing: true, reading: true, finished: false });
        if let Some(socket) = self.sockets.get_mut(&id) {
            socket.state = State::Connecting;
            socket.remote = Some(remote);
            if let Some(name) = socket.name.as_mut() {
                name[..4].copy_from_slice(&ADDRESS);
            }
        }
        self.run_network();
        Ok(())
    }

    /// A UDP socket `id` bound to `port` hears the network there too.
    pub(super) fn network_udp_bind(&mut self, id: u64, port: u16) {
        let Some(net) = self.net.as_mut() else { return };
        if net.datagrams.contains_key(&id) || port == 0 {
            return;
        }
        let buffer = || udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; UDP_PACKETS], vec![0; UDP_BYTES]);
        let mut socket = udp::Socket::new(buffer(), buffer());
        if socket.bind(port).is_ok() {
            let handle = net.sockets.add(socket);
            net.datagrams.insert(id, handle);
        }
    }

    /// Sends `data` from UDP socket `id` to `target` beyond this machine: queued for the
    /// device, or dropped when smoltcp's queue is full, as UDP drops it.
    pub(super) fn network_send_datagram(
        &mut self,
        id: u64,
        port: u16,
        target: Endpoint,
        data: &[u8],
    ) -> Result<(), Errno> {
        self.network_udp_bind(id, port);
        let net = self.net.as_mut().ok_or(errno::ENETUNREACH)?;
        let handle = *net.datagrams.get(&id).ok_or(errno::ENOBUFS)?;
        let _ = net.sockets.get_mut::<udp::Socket>(handle).send_slice(data, ip_endpoint(target));
        self.run_network();
        Ok(())
    }

    /// Sends the ICMP message `message` of raw socket `id` to `target` beyond this machine,
    /// through a smoltcp ICMP socket bound to the message's identifier (bytes 4 and 5: an
    /// echo request's), which then hears the replies; dropped when its queue is full.
    pub(super) fn network_send_icmp(&mut self, id: u64, target: [u8; 4], message: &[u8]) -> Result<(), Errno> {
        let net = self.net.as_mut().ok_or(errno::ENETUNREACH)?;
        let identifier = u16::from_be_bytes([message[4], message[5]]);
        let handle = match net.icmp.get(&id) {
            Some(handle) => *handle,
            None => {
                let buffer =
                    || icmp::PacketBuffer::new(vec![icmp::PacketMetadata::EMPTY; UDP_PACKETS], vec![0; UDP_BYTES]);
                let mut socket = icmp::Socket::new(buffer(), buffer());
                socket.bind(icmp::Endpoint::Ident(identifier)).map_err(|_| errno::EINVAL)?;
                let handle = net.sockets.add(socket);
                net.icmp.insert(id, handle);
                handle
            }
        };
        let [a, b, c, d] = target;
        let _ = net.sockets.get_mut::<icmp::Socket>(handle).send_slice(message, IpAddress::v4(a, b, c, d));
        self.run_network();
        Ok(())
    }

    /// Socket `id` is gone: a UDP socket's smoltcp socket with it, a listener's (the next run
    /// drops them), a link being made aborted. A link's connection ends by itself: the
    /// process's ends of its pipes are closed, so the stack sends what is left and FIN.
    pub(super) fn network_release(&mut self, id: u64) {
        let Some(net) = self.net.as_mut() else { return };
        if let Some(handle) = net.datagrams.remove(&id) {
            net.sockets.remove(handle);
        }
        if let Some(handle) = net.icmp.remove(&id) {
            net.sockets.remove(handle);
        }
        // A listener's smoltcp sockets go at the next run.
        self.network_due |= net.listeners.contains_key(&id);
        if let Some(link) = net.links.get(&id) {
            if link.pipes.is_none() {
                let handle = link.handle;
                net.links.remove(&id);
                net.drop_tcp(handle);
            }
        }
    }

    /// A link's two pipes: a connection's, with the stack at their far end.
    fn link_pipes(&mut self) -> (u64, u64) {
        let pipes = self.connected_pipes();
        for pipe in [pipes.0, pipes.1] {
            if let Some(pipe) = self.pipes.get_mut(&pipe) {
                pipe.linked = true;
            }
        }
        pipes
    }

    /// A connection's two pipes, each with both ends open (the socket's and the stack's, or
    /// two sockets').
    pub(super) fn connected_pipes(&mut self) -> (u64, u64) {
        let mut pipe = || {
            let id = self.next_pipe;
            self.next_pipe += 1;
            let mut state = super::Pipe::new(None);
            state.add_ends(true, true);
            self.pipes.insert(id, state);
            id
        };
        (pipe(), pipe())
    }
}
