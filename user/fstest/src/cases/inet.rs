//! `AF_INET` sockets over the loopback: a TCP connection between two processes, names and
//! ports as Linux gives them, `epoll` on a listener, UDP datagrams, and the errors Linux
//! gives.

use super::{wait_for_success, Case, Context};
use crate::expect::{expect, expect_bytes, expect_equal, expect_error, Outcome, Step};
use crate::pattern::{checksum, pattern, CHECKSUM_START};
use crate::sys::{self, Fork};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;

pub const CASES: [Case; 6] = [
    Case { name: "inet-loopback", run: loopback },
    Case { name: "inet-any-address", run: any_address },
    Case { name: "inet-epoll-listener", run: epoll_listener },
    Case { name: "inet-udp", run: udp },
    Case { name: "inet-proc-net", run: proc_net },
    Case { name: "inet-errors", run: errors },
];

const TRANSFER: usize = 1 << 20;

/// A `sockaddr_in` of `address`:`port` as its bytes.
fn inet_address(address: [u8; 4], port: u16) -> Vec<u8> {
    let mut bytes = (libc::AF_INET as u16).to_ne_bytes().to_vec();
    bytes.extend_from_slice(&port.to_be_bytes());
    bytes.extend_from_slice(&address);
    bytes.resize(16, 0);
    bytes
}

fn loopback(_: &Context) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").step("bind 127.0.0.1:0 and listen")?;
    let at = listener.local_addr().step("getsockname of the listener")?;
    expect(at.port() != 0, "the listener bound to port 0 has no port of its own")?;
    expect_equal("the listener's address", at.ip(), std::net::IpAddr::from(Ipv4Addr::LOCALHOST))?;
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(move || {
            drop(listener);
            let Ok(mut stream) = TcpStream::connect(at) else { return 3 };
            let mut buffer = [0u8; 4];
            if stream.write_all(b"ping").is_err() || stream.read_exact(&mut buffer).is_err() || &buffer != b"pong" {
                return 4;
            }
            i32::from(stream.write_all(&pattern(9, TRANSFER)).is_err()) * 5
        }),
        Fork::Parent(pid) => pid,
    };
    let (mut served, peer) = listener.accept().step("accept")?;
    expect_equal("the peer's address", peer.ip(), std::net::IpAddr::from(Ipv4Addr::LOCALHOST))?;
    expect(peer.port() != 0 && peer.port() != at.port(), format_args!("the peer's port is {}", peer.port()))?;
    expect_equal("the accepted socket's own address", served.local_addr().step("getsockname")?, at)?;
    expect_equal("getpeername of the accepted socket", served.peer_addr().step("getpeername")?, peer)?;
    let mut buffer = [0u8; 4];
    served.read_exact(&mut buffer).step("read the ping")?;
    expect_bytes("the ping", &buffer, b"ping")?;
    served.write_all(b"pong").step("write the pong")?;
    let mut received = Vec::with_capacity(TRANSFER);
    served.read_to_end(&mut received).step("reading the child's mebibyte")?;
    wait_for_success(pid, "the connecting child")?;
    expect_equal("bytes received", received.len(), TRANSFER)?;
    let wanted = checksum(CHECKSUM_START, &pattern(9, TRANSFER));
    expect_equal("checksum", checksum(CHECKSUM_START, &received), wanted)?;
    expect_equal("SO_DOMAIN", sys::socket_option(served.as_fd(), libc::SO_DOMAIN).step("SO_DOMAIN")?, libc::AF_INET)?;
    expect_equal("SO_TYPE", sys::socket_option(served.as_fd(), libc::SO_TYPE).step("SO_TYPE")?, libc::SOCK_STREAM)?;
    expect(!served.nodelay().step("getsockopt TCP_NODELAY")?, "TCP_NODELAY is set on a new connection")?;
    served.set_nodelay(true).step("TCP_NODELAY")?;
    expect(served.nodelay().step("getsockopt TCP_NODELAY")?, "TCP_NODELAY is not set after setting it")?;
    served.set_nodelay(false).step("TCP_NODELAY off")?;
    expect(!served.nodelay().step("getsockopt TCP_NODELAY")?, "TCP_NODELAY is still set after clearing it")?;
    Ok(format!(
        "127.0.0.1: a child connects from port {} (ping, pong, {TRANSFER} bytes, checksum {wanted:#x}); names, \
         SO_DOMAIN, SO_TYPE, TCP_NODELAY",
        peer.port()
    ))
}

fn any_address(_: &Context) -> Outcome {
    let listener = TcpListener::bind("0.0.0.0:0").step("bind 0.0.0.0:0 and listen")?;
    let port = listener.local_addr().step("getsockname")?.port();
    expect_equal(
        "the listener's name",
        listener.local_addr().step("getsockname")?,
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)),
    )?;
    let mut client = TcpStream::connect(("127.0.0.1", port)).step("connect to 127.0.0.1")?;
    let (mut served, _) = listener.accept().step("accept")?;
    let reached = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    expect_equal("the accepted socket's own address", served.local_addr().step("getsockname")?, reached)?;
    expect_equal("the client's peer", client.peer_addr().step("getpeername")?, reached)?;
    client.write_all(b"last words").step("write")?;
    client.shutdown(Shutdown::Write).step("shutdown(SHUT_WR)")?;
    let mut received = Vec::new();
    served.read_to_end(&mut received).step("read to the end")?;
    expect_bytes("what came before the shutdown", &received, b"last words")?;
    served.write_all(b"reply").step("the other way, still open")?;
    drop(served);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).step("the client reads to the end")?;
    expect_bytes("the reply, then end of file", &rest, b"reply")?;
    let unbound = sys::socket(libc::AF_INET, libc::SOCK_STREAM, 0).step("socket")?;
    let name = sys::socket_name_bytes(unbound.as_fd()).step("getsockname of an unbound socket")?;
    expect_bytes("the name of an unbound socket", &name, &inet_address([0; 4], 0))?;
    Ok("a listener on 0.0.0.0 accepts at 127.0.0.1 and names itself so; SHUT_WR, end of file both ways; \
        an unbound socket is 0.0.0.0:0"
        .into())
}

fn epoll_listener(_: &Context) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").step("bind and listen")?;
    listener.set_nonblocking(true).step("O_NONBLOCK")?;
    expect_error("accept with nobody connecting", listener.accept().map(drop), libc::EAGAIN)?;
    let at = listener.local_addr().step("getsockname")?;
    super::sockets::epoll_on_a_listener(
        listener.as_fd(),
        || TcpStream::connect(at).step("connect"),
        || {
            let (mut served, _) = listener.accept().step("accept")?;
            served.set_nonblocking(true).step("O_NONBLOCK on the connection")?;
            expect_error("a read with nothing sent", served.read(&mut [0u8; 8]), libc::EAGAIN)?;
            Ok(served)
        },
    )?;
    Ok("EAGAIN from accept and read when non-blocking; EPOLLIN on a listener with a connection queued, then on \
        the connection with bytes"
        .into())
}

fn errors(_: &Context) -> Outcome {
    let listener = TcpListener::bind("127.0.0.1:0").step("bind")?;
    let port = listener.local_addr().step("getsockname")?.port();
    expect_error("a second bind of a listening port", TcpListener::bind(("127.0.0.1", port)), libc::EADDRINUSE)?;
    drop(listener);
    expect_error("connect to a port nobody listens on", TcpStream::connect(("127.0.0.1", port)), libc::ECONNREFUSED)?;
    let socket = sys::socket(libc::AF_INET, libc::SOCK_STREAM, 0).step("socket")?;
    // 192.0.2.1 (TEST-NET-1) is no address of any machine.
    expect_error(
        "bind to an address of no interface",
        sys::bind_bytes(socket.as_fd(), &inet_address([192, 0, 2, 1], 0)),
        libc::EADDRNOTAVAIL,
    )?;
    expect_error(
        "bind with a short address",
        sys::bind_bytes(socket.as_fd(), &inet_address([127, 0, 0, 1], 0)[..8]),
        libc::EINVAL,
    )?;
    let mut unix = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    unix.extend_from_slice(b"/tmp/x\0");
    // A whole `sockaddr_un`: a shorter address than a `sockaddr_in` is EINVAL before its family.
    unix.resize(std::mem::size_of::<libc::sockaddr_un>(), 0);
    expect_error(
        "connect of an inet socket to a unix address",
        sys::connect_bytes(socket.as_fd(), &unix),
        libc::EAFNOSUPPORT,
    )?;
    expect_error("getpeername of an unconnected socket", sys::peer_name_length(socket.as_fd()), libc::ENOTCONN)?;
    expect_error("socketpair(AF_INET)", sys::socketpair_of(libc::AF_INET, libc::SOCK_STREAM), libc::EOPNOTSUPP)?;
    expect_error(
        "a stream socket of protocol UDP",
        sys::socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_UDP),
        libc::EPROTONOSUPPORT,
    )?;
    Ok("EADDRINUSE, ECONNREFUSED, EADDRNOTAVAIL, EINVAL, EAFNOSUPPORT, ENOTCONN, EOPNOTSUPP, EPROTONOSUPPORT as \
        Linux"
        .into())
}

fn udp(_: &Context) -> Outcome {
    let server = UdpSocket::bind("127.0.0.1:0").step("bind a UDP socket to 127.0.0.1:0")?;
    let at = server.local_addr().step("getsockname")?;
    expect(at.port() != 0, "the UDP socket bound to port 0 has no port of its own")?;
    let client = UdpSocket::bind("0.0.0.0:0").step("bind a second one to 0.0.0.0:0")?;
    let client_port = client.local_addr().step("getsockname")?.port();
    // Three datagrams, each read whole and alone, with its sender.
    for message in [&b"one"[..], b"three!!", &[7u8; 9000]] {
        expect_equal("bytes sent", client.send_to(message, at).step("sendto")?, message.len())?;
    }
    let mut buffer = vec![0u8; 65536];
    for message in [&b"one"[..], b"three!!", &[7u8; 9000]] {
        let (count, from) = server.recv_from(&mut buffer).step("recvfrom")?;
        expect_bytes("a datagram", &buffer[..count], message)?;
        expect_equal("its sender", from, SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, client_port)))?;
    }
    // A short buffer takes the datagram's first bytes; the rest is gone.
    client.send_to(b"truncated", at).step("sendto")?;
    let (count, _) = server.recv_from(&mut buffer[..4]).step("recvfrom into 4 bytes")?;
    expect_bytes("a datagram cut to 4 bytes", &buffer[..count], b"trun")?;
    server.set_nonblocking(true).step("O_NONBLOCK")?;
    expect_error("recvfrom with nothing sent", server.recv_from(&mut buffer).map(drop), libc::EAGAIN)?;
    // Connected: send and recv without addresses, and the peer's name.
    client.connect(at).step("connect")?;
    expect_equal("the connected peer", client.peer_addr().step("getpeername")?, at)?;
    client.send(b"connected").step("send")?;
    let count = server.recv(&mut buffer).step("recv")?;
    expect_bytes("a datagram of the connected socket", &buffer[..count], b"connected")?;
    server.send_to(b"answer", ("127.0.0.1", client_port)).step("sendto the client")?;
    let count = client.recv(&mut buffer).step("recv of the answer")?;
    expect_bytes("the answer", &buffer[..count], b"answer")?;
    expect_error("a datagram longer than UDP carries", client.send(&vec![0u8; 65508]), libc::EMSGSIZE)?;
    expect_equal(
        "SO_PROTOCOL",
        sys::socket_option(server.as_fd(), libc::SO_PROTOCOL).step("SO_PROTOCOL")?,
        libc::IPPROTO_UDP,
    )?;
    let taken = UdpSocket::bind(at);
    expect_error("a second bind of a UDP port", taken, libc::EADDRINUSE)?;
    Ok(format!(
        "datagrams from port {client_port} to {at} keep their bounds and senders; a short read cuts; EAGAIN; \
         connected send and recv; EMSGSIZE past 65507; SO_PROTOCOL; EADDRINUSE"
    ))
}

/// The line of `/proc/net/<table>` whose local address is `127.0.0.1:port`, its fields.
fn proc_net_line(table: &str, port: u16) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(format!("/proc/net/{table}")).step(format_args!("reading /proc/net/{table}"))?;
    let local = format!("0100007F:{port:04X}");
    text.lines()
        .skip(1)
        .map(|line| line.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|fields| fields.get(1) == Some(&local))
        .ok_or_else(|| format!("/proc/net/{table} has no line of {local}:\n{text}"))
}

fn proc_net(_: &Context) -> Outcome {
    use std::os::unix::fs::MetadataExt;
    let inode = |fd: std::os::fd::BorrowedFd<'_>| -> Result<u64, String> {
        let copy = fd.try_clone_to_owned().step("dup")?;
        Ok(std::fs::File::from(copy).metadata().step("fstat")?.ino())
    };
    let listener = TcpListener::bind("127.0.0.1:0").step("bind and listen")?;
    let port = listener.local_addr().step("getsockname")?.port();
    let fields = proc_net_line("tcp", port)?;
    expect_equal("the listener's state", fields[3].as_str(), "0A")?;
    expect_equal("the listener's inode", fields[9].parse::<u64>().ok(), Some(inode(listener.as_fd())?))?;
    let client = TcpStream::connect(("127.0.0.1", port)).step("connect")?;
    let client_port = client.local_addr().step("getsockname")?.port();
    let fields = proc_net_line("tcp", client_port)?;
    expect_equal("the connection's state", fields[3].as_str(), "01")?;
    expect_equal("the connection's peer", fields[2].as_str(), format!("0100007F:{port:04X}").as_str())?;
    let udp = UdpSocket::bind("127.0.0.1:0").step("bind a UDP socket")?;
    let udp_port = udp.local_addr().step("getsockname")?.port();
    let fields = proc_net_line("udp", udp_port)?;
    expect_equal("the UDP socket's state", fields[3].as_str(), "07")?;
    expect_equal("the UDP socket's inode", fields[9].parse::<u64>().ok(), Some(inode(udp.as_fd())?))?;
    let dev = std::fs::read_to_string("/proc/net/dev").step("reading /proc/net/dev")?;
    expect(
        dev.lines().any(|line| line.trim_start().starts_with("lo:")),
        format_args!("no lo in /proc/net/dev:\n{dev}"),
    )?;
    Ok(format!(
        "/proc/net/tcp lists the listener on port {port} (0A) and the connection from {client_port} (01) with their \
         inodes; /proc/net/udp the UDP socket (07); /proc/net/dev has lo"
    ))
}
