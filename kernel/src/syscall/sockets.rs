//! Socket calls: `AF_UNIX` sockets and `AF_INET` TCP and UDP over the loopback, held at the
//! file service as open files (`fs::service`'s `sockets`). These decode the user's addresses,
//! flags and message headers, then ask the service; data goes as the service's reads and
//! writes of the socket, a UDP datagram with an address as its own request. `AF_INET6` and
//! addresses beyond this machine wait for the network device (issue 30).

use super::files::{cwd_word, handle_of, install, process, root_word, words};
use super::{read_user, write_user, SyscallResult};
use crate::arch::user::{copy_from_user, copy_to_user, is_user_range};
use crate::fs::client::{self, Answer};
use crate::fs::Handle;
use abi::file::{FileOp, HandleKind, MAX_TRANSFER, NONE, ROOT_WORD};
use abi::Errno;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use linux_raw_sys::general as linux;
use linux_raw_sys::net;

/// `SOCK_NONBLOCK` and `SOCK_CLOEXEC`, which a socket's type may carry (on x86-64 they are
/// `O_NONBLOCK` and `O_CLOEXEC`).
const SOCK_NONBLOCK: u64 = linux::O_NONBLOCK as u64;
const SOCK_CLOEXEC: u64 = linux::O_CLOEXEC as u64;
const TYPE_FLAGS: u64 = SOCK_NONBLOCK | SOCK_CLOEXEC;
/// Bytes of `sockaddr_un`: the family (u16), then 108 of path.
const ADDRESS_BYTES: usize = 110;
const FAMILY_BYTES: usize = 2;
/// Bytes of `sockaddr_in`: family, port, address, eight of padding.
const INET_ADDRESS_BYTES: usize = 16;
/// The most bytes of an address Linux reads (`sizeof(struct sockaddr_storage)`).
const MOST_ADDRESS_BYTES: u64 = 128;
const UNIX: u16 = net::AF_UNIX as u16;
const INET: u16 = net::AF_INET as u16;
/// `IPPROTO_TCP` and `IPPROTO_UDP`, the protocols an inet stream or datagram socket may name.
const TCP: u64 = 6;
const UDP: u64 = 17;
/// `IPPROTO_ICMP`, the protocol of the raw sockets served (busybox `ping`'s).
const ICMP: u64 = 1;
/// `IPPROTO_TCP`'s options that are taken: `TCP_NODELAY`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`,
/// `TCP_KEEPCNT` (`netinet/tcp.h`).
const TCP_NODELAY: u32 = 1;
const TCP_KEEPIDLE: u32 = 4;
const TCP_KEEPINTVL: u32 = 5;
const TCP_KEEPCNT: u32 = 6;
/// `recv`/`send` flags served: the others are `EOPNOTSUPP`.
const MSG_DONTWAIT: u64 = net::MSG_DONTWAIT as u64;
const MSG_NOSIGNAL: u64 = net::MSG_NOSIGNAL as u64;
const MSG_WAITALL: u64 = net::MSG_WAITALL as u64;
/// The most bytes one `sendmsg`/`recvmsg` gathers or scatters (Linux caps a stream message
/// at its buffer; more is sent in further calls, as a short count says).
const MOST_MESSAGE: u64 = 1 << 20;

fn ask(op: FileOp, values: &[u64], first: &[u8]) -> Result<Answer, Errno> {
    client::call(op, words(values), first, &[])
}

/// The socket `fd` names (`ENOTSOCK` for another open file).
fn socket_of(fd: i64) -> Result<alloc::sync::Arc<Handle>, Errno> {
    let handle = handle_of(fd)?;
    if handle.kind != HandleKind::Socket {
        return Err(errno::ENOTSOCK);
    }
    Ok(handle)
}

/// The family, type and protocol of a new socket: `AF_UNIX` and `AF_INET`.
fn check_kind(domain: u64, kind: u64, protocol: u64) -> Result<(), Errno> {
    // `AF_INET6`, netlink and the rest: not served (yet).
    if domain != u64::from(UNIX) && domain != u64::from(INET) {
        return Err(errno::EAFNOSUPPORT);
    }
    if kind & !(0xf | TYPE_FLAGS) != 0 {
        return Err(errno::EINVAL);
    }
    // The service says which of these it serves where (a datagram socket only in a pair).
    let protocol_ok = match ((kind & 0xf) as u32, domain == u64::from(INET)) {
        (net::SOCK_STREAM, true) => matches!(protocol, 0 | TCP),
        (net::SOCK_DGRAM, true) => matches!(protocol, 0 | UDP),
        (net::SOCK_STREAM | net::SOCK_DGRAM | net::SOCK_SEQPACKET, false) => protocol == 0,
        // Raw ICMP (busybox `ping`); other raw protocols are not served.
        (net::SOCK_RAW, true) => protocol == ICMP,
        _ => return Err(errno::ESOCKTNOSUPPORT),
    };
    if !protocol_ok {
        return Err(errno::EPROTONOSUPPORT);
    }
    Ok(())
}

fn close_on_exec(kind: u64) -> bool {
    kind & SOCK_CLOEXEC != 0
}

/// `socket(domain, type, protocol)`.
pub fn socket(domain: u64, kind: u64, protocol: u64) -> SyscallResult {
    check_kind(domain, kind, protocol)?;
    let answer = ask(FileOp::SocketCreate, &[kind, domain], &[])?;
    install(Handle::adopt(answer.words[0], HandleKind::Socket), close_on_exec(kind))
}

/// `socketpair(domain, type, protocol, fds)`.
pub fn socketpair(domain: u64, kind: u64, protocol: u64, fds: u64) -> SyscallResult {
    check_kind(domain, kind, protocol)?;
    if domain != u64::from(UNIX) {
        // Linux: only a unix socket comes in pairs.
        return Err(errno::EOPNOTSUPP);
    }
    if !is_user_range(fds, 8) {
        return Err(errno::EFAULT);
    }
    let answer = ask(FileOp::SocketPair, &[kind], &[])?;
    let first = Handle::adopt(answer.words[0], HandleKind::Socket);
    let second = Handle::adopt(answer.words[1], HandleKind::Socket);
    let first = install(first, close_on_exec(kind))?;
    let second = match install(second, close_on_exec(kind)) {
        Ok(fd) => fd,
        Err(error) => {
            let _ = process()?.state.lock().files.close(first as i64);
            return Err(error);
        }
    };
    write_user(fds, &[first as i32, second as i32])?;
    Ok(0)
}

/// The family of the address at `address` (`length` bytes) and its name as the service takes
/// it: a `sockaddr_un`'s path up to its NUL, or an abstract name (a leading NUL, then every
/// byte given); a `sockaddr_in`'s address and port (network order); nothing for another
/// family, which the service refuses as the socket's family says.
fn read_address(address: u64, length: u64) -> Result<(u16, Vec<u8>), Errno> {
    if !(FAMILY_BYTES as u64..=MOST_ADDRESS_BYTES).contains(&length) {
        return Err(errno::EINVAL);
    }
    let mut bytes = alloc::vec![0u8; length as usize];
    copy_from_user(&mut bytes, address).map_err(|_| errno::EFAULT)?;
    let family = u16::from_le_bytes([bytes[0], bytes[1]]);
    match family {
        UNIX if bytes.len() <= ADDRESS_BYTES => Ok((family, unix_path(bytes.split_off(FAMILY_BYTES))?)),
        UNIX => Err(errno::EINVAL),
        INET if bytes.len() < INET_ADDRESS_BYTES => Err(errno::EINVAL),
        // `sin_port` at 2, `sin_addr` at 4: the name is the address, then the port.
        INET => Ok((family, [&bytes[4..8], &bytes[2..4]].concat())),
        _ => Ok((family, Vec::new())),
    }
}

/// The name of a `sockaddr_un`'s `sun_path` bytes.
fn unix_path(mut path: Vec<u8>) -> Result<Vec<u8>, Errno> {
    if path.is_empty() {
        // Linux's autobind; Reef asks for a name.
        return Err(errno::EINVAL);
    }
    if path[0] != 0 {
        if let Some(end) = path.iter().position(|&b| b == 0) {
            path.truncate(end);
        }
    }
    Ok(path)
}

/// `name` of a socket of `family` as its `sockaddr_un` (a path with its NUL, as Linux counts
/// it) or `sockaddr_in`.
fn socket_address(family: u16, name: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(FAMILY_BYTES + name.len().max(INET_ADDRESS_BYTES));
    bytes.extend_from_slice(&family.to_le_bytes());
    if family == INET {
        let (host, port) = name.split_at(name.len().min(4));
        bytes.extend_from_slice(port);
        bytes.extend_from_slice(host);
        bytes.resize(INET_ADDRESS_BYTES, 0);
    } else {
        bytes.extend_from_slice(name);
        if name.first().is_some_and(|&b| b != 0) {
            bytes.push(0);
        }
    }
    bytes
}

/// Writes `name` of a socket of `family` as its `sockaddr_un` or `sockaddr_in` to `address`,
/// at most `*length_at` bytes, and its whole length to `length_at` (a path with its NUL, as
/// Linux counts it).
fn write_address(address: u64, length_at: u64, family: u16, name: &[u8]) -> Result<(), Errno> {
    if address == 0 {
        return Ok(());
    }
    let room: u32 = read_user(length_at)?;
    if (room as i32) < 0 {
        return Err(errno::EINVAL);
    }
    let bytes = socket_address(family, name);
    let copied = bytes.len().min(room as usize);
    copy_to_user(address, &bytes[..copied]).map_err(|_| errno::EFAULT)?;
    write_user(length_at, &(bytes.len() as u32))
}

/// `bind(fd, address, length)`: a path is made with the umask's permissions.
pub fn bind(fd: i64, address: u64, length: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    let (family, name) = read_address(address, length)?;
    let mode = 0o777 & !u64::from(process()?.state.lock().umask);
    let mut values = words(&[socket.id, cwd_word()?, mode, u64::from(family)]);
    values[ROOT_WORD] = root_word()?;
    client::call(FileOp::SocketBind, values, &name, &[])?;
    Ok(0)
}

/// `listen(fd, backlog)`.
pub fn listen(fd: i64, backlog: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    ask(FileOp::SocketListen, &[socket.id, backlog], &[])?;
    Ok(0)
}

/// `connect(fd, address, length)`.
pub fn connect(fd: i64, address: u64, length: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    let (family, name) = read_address(address, length)?;
    let mut values = words(&[socket.id, cwd_word()?, u64::from(family)]);
    values[ROOT_WORD] = root_word()?;
    match client::call(FileOp::SocketConnect, values, &name, &[]) {
        Ok(_) => Ok(0),
        Err(errno::EINTR) => Err(crate::proc::signal::interrupted_errno()),
        Err(error) => Err(error),
    }
}

/// `accept4(fd, address, length, flags)`: the peer's name (a client's is usually none).
pub fn accept4(fd: i64, address: u64, length: u64, flags: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    if flags & !TYPE_FLAGS != 0 {
        return Err(errno::EINVAL);
    }
    let answer = match ask(FileOp::SocketAccept, &[socket.id, flags], &[]) {
        Ok(answer) => answer,
        Err(errno::EINTR) => return Err(crate::proc::signal::interrupted_errno()),
        Err(error) => return Err(error),
    };
    let accepted = Handle::adopt(answer.words[0], HandleKind::Socket);
    if address != 0 {
        let peer = ask(FileOp::SocketName, &[accepted.id, 1], &[])?;
        write_address(address, length, peer.value as u16, &peer.bytes)?;
    }
    install(accepted, close_on_exec(flags))
}

pub fn accept(fd: i64, address: u64, length: u64) -> SyscallResult {
    accept4(fd, address, length, 0)
}

/// `shutdown(fd, how)`.
pub fn shutdown(fd: i64, how: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    ask(FileOp::SocketShutdown, &[socket.id, how], &[])?;
    Ok(0)
}

/// `getsockname` (`peer` false) and `getpeername`.
fn name(fd: i64, address: u64, length: u64, peer: bool) -> SyscallResult {
    let socket = socket_of(fd)?;
    let named = ask(FileOp::SocketName, &[socket.id, u64::from(peer)], &[])?;
    if address == 0 {
        return Err(errno::EFAULT);
    }
    write_address(address, length, named.value as u16, &named.bytes)?;
    Ok(0)
}

pub fn getsockname(fd: i64, address: u64, length: u64) -> SyscallResult {
    name(fd, address, length, false)
}

pub fn getpeername(fd: i64, address: u64, length: u64) -> SyscallResult {
    name(fd, address, length, true)
}

/// The flags a `send`/`recv` may carry here.
fn check_flags(flags: u64, allowed: u64) -> Result<bool, Errno> {
    if flags & !allowed != 0 {
        return Err(errno::EOPNOTSUPP);
    }
    Ok(flags & MSG_DONTWAIT != 0)
}

/// Sends `data` on `socket`: every byte, or what went before a signal or, not waiting, a
/// full buffer. `EPIPE` raises `SIGPIPE` unless `MSG_NOSIGNAL`.
fn send_bytes(socket: &Handle, data: &[u8], flags: u64) -> SyscallResult {
    let dont_wait = check_flags(flags, MSG_DONTWAIT | MSG_NOSIGNAL)?;
    // A message longer than one request carries is longer than a message socket's pipe.
    if data.len() > MAX_TRANSFER && !is_stream(socket)? {
        return Err(errno::EMSGSIZE);
    }
    let mut done = 0usize;
    while done < data.len() || data.is_empty() {
        let chunk = &data[done..(done + MAX_TRANSFER).min(data.len())];
        match ask(FileOp::Write, &[socket.id, NONE, u64::from(dont_wait)], chunk) {
            Ok(answer) => done += answer.value as usize,
            Err(error) if done > 0 && error != errno::EFAULT => break,
            Err(errno::EPIPE) => {
                if flags & MSG_NOSIGNAL == 0 {
                    crate::proc::signal::send_to_current(13);
                }
                return Err(errno::EPIPE);
            }
            Err(errno::EINTR) => return Err(crate::proc::signal::interrupted_errno()),
            Err(error) => return Err(error),
        }
        if data.is_empty() || (done < data.len() && dont_wait) {
            break;
        }
    }
    Ok(done as u64)
}

/// Receives into a buffer of `length` bytes: what is there (all of it under `MSG_WAITALL`,
/// unless the peer ends or a signal comes), 0 at end of file.
fn receive_bytes(socket: &Handle, length: u64, flags: u64) -> Result<Vec<u8>, Errno> {
    let dont_wait = check_flags(flags, MSG_DONTWAIT | MSG_WAITALL)?;
    let mut out = Vec::new();
    loop {
        let chunk = (length - out.len() as u64).min(MAX_TRANSFER as u64);
        let answer = match ask(FileOp::Read, &[socket.id, chunk, NONE, u64::from(dont_wait)], &[]) {
            Ok(answer) => answer,
            Err(_) if !out.is_empty() => return Ok(out),
            Err(errno::EINTR) => return Err(crate::proc::signal::interrupted_errno()),
            Err(error) => return Err(error),
        };
        let ended = answer.bytes.is_empty();
        out.extend_from_slice(&answer.bytes);
        // `MSG_WAITALL` fills the buffer from a stream; a message is one read.
        if ended || out.len() as u64 == length || flags & MSG_WAITALL == 0 || !is_stream(socket)? {
            return Ok(out);
        }
    }
}

/// `SOL_SOCKET`'s `option` of `socket`, as the file service keeps it.
fn socket_option(socket: &Handle, option: u32) -> Result<u64, Errno> {
    Ok(ask(FileOp::SocketOption, &[socket.id, u64::from(option), u64::from(net::SOL_SOCKET)], &[])?.value)
}

/// Whether `socket` is a stream (else its messages keep their bounds).
fn is_stream(socket: &Handle) -> Result<bool, Errno> {
    Ok(socket_option(socket, net::SO_TYPE)? == u64::from(net::SOCK_STREAM))
}

/// The family of `socket` (`SO_DOMAIN`).
fn family(socket: &Handle) -> Result<u16, Errno> {
    Ok(socket_option(socket, net::SO_DOMAIN)? as u16)
}

/// Whether an address given to a send on `socket` is refused: a unix socket's connection
/// takes none (`EISCONN`); TCP ignores it, as Linux's does.
fn check_send_address(socket: &Handle) -> Result<(), Errno> {
    if family(socket)? == INET {
        return Ok(());
    }
    Err(errno::EISCONN)
}

/// Whether `socket` sends datagrams to addresses: a UDP socket or a raw ICMP one
/// (`SO_PROTOCOL`).
fn is_udp(socket: &Handle) -> Result<bool, Errno> {
    Ok(matches!(socket_option(socket, net::SO_PROTOCOL)?, UDP | ICMP))
}

/// Sends `data` as one datagram of UDP socket `socket` to the address at `address`
/// (`length` bytes), or to its connected peer (`address` 0).
fn send_datagram(socket: &Handle, address: u64, length: u64, data: &[u8], flags: u64) -> SyscallResult {
    let dont_wait = check_flags(flags, MSG_DONTWAIT | MSG_NOSIGNAL)?;
    let (family, name) = if address == 0 { (INET, Vec::new()) } else { read_address(address, length)? };
    if data.len() > MAX_TRANSFER {
        return Err(errno::EMSGSIZE);
    }
    let values = words(&[socket.id, u64::from(dont_wait), u64::from(family)]);
    Ok(client::call(FileOp::SocketSendTo, values, data, &name)?.value)
}

/// Receives one datagram of UDP socket `socket` into a buffer of `length` bytes, with the
/// name of its sender (six bytes, as the service keeps inet names).
fn receive_datagram(socket: &Handle, length: u64, flags: u64) -> Result<(Vec<u8>, Vec<u8>), Errno> {
    let dont_wait = check_flags(flags, MSG_DONTWAIT)?;
    let answer = match ask(FileOp::SocketReceiveFrom, &[socket.id, length, u64::from(dont_wait)], &[]) {
        Ok(answer) => answer,
        Err(errno::EINTR) => return Err(crate::proc::signal::interrupted_errno()),
        Err(error) => return Err(error),
    };
    let sender = answer.words[1];
    let mut name = ((sender >> 16) as u32).to_be_bytes().to_vec();
    name.extend_from_slice(&(sender as u16).to_be_bytes());
    Ok((answer.bytes, name))
}

/// `sendto(fd, buffer, length, flags, address, address length)`: a UDP socket sends one
/// datagram there; a connected unix socket takes no address (`EISCONN`), a TCP socket
/// ignores it.
pub fn sendto(fd: i64, buffer: u64, length: u64, flags: u64, address: u64, address_length: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    let udp = address != 0 && is_udp(&socket)?;
    if address != 0 && !udp {
        check_send_address(&socket)?;
    }
    if !is_user_range(buffer, length) {
        return Err(errno::EFAULT);
    }
    let length = length.min(MOST_MESSAGE);
    let mut data = alloc::vec![0u8; length as usize];
    copy_from_user(&mut data, buffer).map_err(|_| errno::EFAULT)?;
    if udp {
        return send_datagram(&socket, address, address_length, &data, flags);
    }
    send_bytes(&socket, &data, flags)
}

/// `recvfrom(fd, buffer, length, flags, address, address length)`: the address is the peer's.
pub fn recvfrom(fd: i64, buffer: u64, length: u64, flags: u64, address: u64, address_length: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    if !is_user_range(buffer, length) {
        return Err(errno::EFAULT);
    }
    if address != 0 && is_udp(&socket)? {
        let (data, sender) = receive_datagram(&socket, length.min(MOST_MESSAGE), flags)?;
        copy_to_user(buffer, &data).map_err(|_| errno::EFAULT)?;
        write_address(address, address_length, INET, &sender)?;
        return Ok(data.len() as u64);
    }
    let data = receive_bytes(&socket, length.min(MOST_MESSAGE), flags)?;
    copy_to_user(buffer, &data).map_err(|_| errno::EFAULT)?;
    if address != 0 {
        let (family, peer) = match ask(FileOp::SocketName, &[socket.id, 1], &[]) {
            Ok(answer) => (answer.value as u16, answer.bytes),
            Err(_) => (family(&socket)?, Vec::new()),
        };
        write_address(address, address_length, family, &peer)?;
    }
    Ok(data.len() as u64)
}

/// A `struct msghdr` as its seven words (its `int`s have padding after them, so it is read
/// as words): name, name length, iovecs, their count, control, control length, flags.
type MessageHeader = [u64; 7];
const NAME: usize = 0;
const NAME_LENGTH: usize = 1;
const VECTORS: usize = 2;
const VECTOR_COUNT: usize = 3;
const CONTROL_LENGTH: usize = 5;
const FLAGS: usize = 6;

/// The `iovec`s of a message header: (base, length) each, their total bounded.
fn vectors(header: &MessageHeader) -> Result<Vec<(u64, u64)>, Errno> {
    if header[VECTOR_COUNT] > 1024 {
        return Err(errno::EMSGSIZE);
    }
    let mut list = Vec::with_capacity(header[VECTOR_COUNT] as usize);
    let mut total = 0u64;
    for index in 0..header[VECTOR_COUNT] {
        let vector: linux::iovec = read_user(header[VECTORS] + index * 16)?;
        let (base, length) = (vector.iov_base as u64, vector.iov_len);
        if !is_user_range(base, length) {
            return Err(errno::EFAULT);
        }
        let length = length.min(MOST_MESSAGE - total);
        total += length;
        list.push((base, length));
    }
    Ok(list)
}

/// `sendmsg(fd, header, flags)`: the vectors gathered into one write; ancillary data
/// (`SCM_RIGHTS`, credentials) is not carried yet and is refused (`EOPNOTSUPP`) rather than
/// dropped.
pub fn sendmsg(fd: i64, header: u64, flags: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    let header: MessageHeader = read_user(header)?;
    let named = header[NAME] != 0 && header[NAME_LENGTH] as u32 != 0;
    // Asked only for a message with a name: without one, the service's write sends a UDP
    // socket's datagram to its peer as it writes any other socket.
    let udp = named && is_udp(&socket)?;
    if named && !udp {
        check_send_address(&socket)?;
    }
    if header[CONTROL_LENGTH] != 0 {
        return Err(errno::EOPNOTSUPP);
    }
    let mut data = Vec::new();
    for (base, length) in vectors(&header)? {
        let start = data.len();
        data.resize(start + length as usize, 0);
        copy_from_user(&mut data[start..], base).map_err(|_| errno::EFAULT)?;
    }
    if udp {
        return send_datagram(&socket, header[NAME], u64::from(header[NAME_LENGTH] as u32), &data, flags);
    }
    send_bytes(&socket, &data, flags)
}

/// `recvmsg(fd, header, flags)`: scattered into the vectors; no ancillary data, no name.
pub fn recvmsg(fd: i64, header_address: u64, flags: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    let mut header: MessageHeader = read_user(header_address)?;
    let list = vectors(&header)?;
    let total = list.iter().map(|(_, length)| length).sum::<u64>();
    // A UDP socket's sender is the message's name, when one is asked for: a `sockaddr_in`,
    // cut to the room given. Without a name, the service's read takes a datagram as it reads
    // any other socket.
    let mut name_length = 0u64;
    let data = if header[NAME] != 0 && is_udp(&socket)? {
        let (data, sender) = receive_datagram(&socket, total, flags)?;
        let address = socket_address(INET, &sender);
        let room = (header[NAME_LENGTH] as u32 as usize).min(address.len());
        copy_to_user(header[NAME], &address[..room]).map_err(|_| errno::EFAULT)?;
        name_length = address.len() as u64;
        data
    } else {
        receive_bytes(&socket, total, flags)?
    };
    let mut done = 0usize;
    for (base, length) in list {
        let count = (length as usize).min(data.len() - done);
        copy_to_user(base, &data[done..done + count]).map_err(|_| errno::EFAULT)?;
        done += count;
    }
    header[NAME_LENGTH] = (header[NAME_LENGTH] & !0xffff_ffff) | name_length;
    header[CONTROL_LENGTH] = 0;
    header[FLAGS] &= !0xffff_ffff;
    write_user(header_address, &header)?;
    Ok(data.len() as u64)
}

/// `getsockopt(fd, level, option, value, length)`: `SOL_SOCKET`'s options a unix stream has.
pub fn getsockopt(fd: i64, level: u64, option: u64, value: u64, length_at: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    let answer = match level {
        _ if level == u64::from(net::SOL_SOCKET) => {
            ask(FileOp::SocketOption, &[socket.id, option, u64::from(net::SOL_SOCKET)], &[])?
        }
        // `TCP_NODELAY`, kept with the socket at the file service.
        TCP if option == u64::from(TCP_NODELAY) && family(&socket)? == INET => {
            ask(FileOp::SocketOption, &[socket.id, option, TCP], &[])?
        }
        _ => return Err(errno::ENOPROTOOPT),
    };
    let room: u32 = read_user(length_at)?;
    if room as i32 <= 0 {
        return Err(errno::EINVAL);
    }
    let bytes: Vec<u8> = if option == u64::from(net::SO_PEERCRED) {
        // `struct ucred`: the peer's pid, uid 0, gid 0 (one user).
        let mut credentials = (answer.value as u32).to_le_bytes().to_vec();
        credentials.extend_from_slice(&[0; 8]);
        credentials
    } else {
        (answer.value as u32).to_le_bytes().to_vec()
    };
    let copied = bytes.len().min(room as usize);
    copy_to_user(value, &bytes[..copied]).map_err(|_| errno::EFAULT)?;
    write_user(length_at, &(copied as u32))?;
    Ok(0)
}

/// `setsockopt(fd, level, option, value, length)`: the options that change nothing on a unix
/// stream socket in Linux either (address reuse, keep-alive, linger) and the buffer sizes,
/// which Linux takes as hints, are taken; so is TCP's keep-alive timing; `TCP_NODELAY` is kept
/// with the socket at the file service (the network stack honours it); any other is
/// `ENOPROTOOPT`.
pub fn setsockopt(fd: i64, level: u64, option: u64, value: u64, length: u64) -> SyscallResult {
    let socket = socket_of(fd)?;
    if level != u64::from(net::SOL_SOCKET) && level != TCP {
        return Err(errno::ENOPROTOOPT);
    }
    if length < 4 {
        return Err(errno::EINVAL);
    }
    let given: u32 = read_user(value)?;
    if level == TCP {
        if family(&socket)? != INET {
            return Err(errno::EOPNOTSUPP);
        }
        return match option as u32 {
            // Kept with the socket: a connection through the network stack sends small
            // writes at once with it.
            TCP_NODELAY => {
                ask(FileOp::SocketOption, &[socket.id, option, TCP, 1, u64::from(given)], &[])?;
                Ok(0)
            }
            TCP_KEEPIDLE | TCP_KEEPINTVL | TCP_KEEPCNT => Ok(0),
            _ => Err(errno::ENOPROTOOPT),
        };
    }
    match option as u32 {
        net::SO_REUSEADDR
        | net::SO_REUSEPORT
        | net::SO_KEEPALIVE
        | net::SO_LINGER
        | net::SO_SNDBUF
        | net::SO_RCVBUF
        | net::SO_PASSCRED
        | net::SO_BROADCAST => Ok(0),
        _ => Err(errno::ENOPROTOOPT),
    }
}

/// The interface ioctls of a socket (`netdevice(7)`), which `ifconfig` reads: `Some` for one
/// of them, answered from the file service's interfaces; `None` for another request.
pub fn interface_ioctl(request: u32, argument: u64) -> Option<SyscallResult> {
    use interface_request as r;
    let answer = match request {
        r::LIST => list_interfaces(argument),
        r::FLAGS
        | r::ADDRESS
        | r::DESTINATION
        | r::BROADCAST
        | r::NETMASK
        | r::METRIC
        | r::MTU
        | r::HARDWARE
        | r::MAP
        | r::TRANSMIT_QUEUE
        | r::INDEX
        | r::NAME => describe_interface(request, argument),
        // Changing an interface: the address is QEMU's default and stays.
        r::SET_FLAGS
        | r::SET_ADDRESS
        | r::SET_DESTINATION
        | r::SET_BROADCAST
        | r::SET_NETMASK
        | r::SET_MTU
        | r::SET_HARDWARE => {
            Err(if crate::proc::credentials::current_is_privileged() { errno::EOPNOTSUPP } else { errno::EPERM })
        }
        _ => return None,
    };
    Some(answer)
}

/// The `SIOC*` requests of `linux/sockios.h`.
mod interface_request {
    pub const NAME: u32 = 0x8910;
    pub const LIST: u32 = 0x8912;
    pub const FLAGS: u32 = 0x8913;
    pub const SET_FLAGS: u32 = 0x8914;
    pub const ADDRESS: u32 = 0x8915;
    pub const SET_ADDRESS: u32 = 0x8916;
    pub const DESTINATION: u32 = 0x8917;
    pub const SET_DESTINATION: u32 = 0x8918;
    pub const BROADCAST: u32 = 0x8919;
    pub const SET_BROADCAST: u32 = 0x891a;
    pub const NETMASK: u32 = 0x891b;
    pub const SET_NETMASK: u32 = 0x891c;
    pub const METRIC: u32 = 0x891d;
    pub const MTU: u32 = 0x8921;
    pub const SET_MTU: u32 = 0x8922;
    pub const SET_HARDWARE: u32 = 0x8924;
    pub const HARDWARE: u32 = 0x8927;
    pub const INDEX: u32 = 0x8933;
    pub const TRANSMIT_QUEUE: u32 = 0x8942;
    pub const MAP: u32 = 0x8970;
}

/// Bytes of a `struct ifreq`: the name, then a union of 24 bytes.
const INTERFACE_REQUEST_BYTES: usize = 40;

fn interfaces() -> Result<Vec<abi::net::Interface>, Errno> {
    let answer = ask(FileOp::NetInterfaces, &[], &[])?;
    let interfaces = abi::net::Interface::decode_all(&answer.bytes).ok_or(errno::EIO)?.collect();
    Ok(interfaces)
}

/// `SIOCGIFCONF`: a `struct ifconf` (length, then a buffer address); with no buffer, the
/// length the list needs, else as many entries (name and `sockaddr_in`) as fit, and their
/// length.
fn list_interfaces(argument: u64) -> SyscallResult {
    let length: i32 = read_user(argument)?;
    let buffer: u64 = read_user(argument + 8)?;
    let interfaces = interfaces()?;
    let needed = interfaces.len() * INTERFACE_REQUEST_BYTES;
    if buffer == 0 {
        write_user(argument, &(needed as i32))?;
        return Ok(0);
    }
    let fitting = (length.max(0) as usize / INTERFACE_REQUEST_BYTES).min(interfaces.len());
    for (index, interface) in interfaces.iter().take(fitting).enumerate() {
        let mut entry = [0u8; INTERFACE_REQUEST_BYTES];
        entry[..abi::net::NAME_BYTES].copy_from_slice(&interface.name);
        let address = socket_address(INET, &[&interface.address[..], &[0, 0]].concat());
        entry[16..16 + address.len()].copy_from_slice(&address);
        copy_to_user(buffer + (index * INTERFACE_REQUEST_BYTES) as u64, &entry).map_err(|_| errno::EFAULT)?;
    }
    write_user(argument, &((fitting * INTERFACE_REQUEST_BYTES) as i32))?;
    Ok(0)
}

/// One interface's attribute into the `struct ifreq` at `argument`, found by its name (or,
/// for `SIOCGIFNAME`, by its index): `ENODEV` for no such interface.
fn describe_interface(request: u32, argument: u64) -> SyscallResult {
    use interface_request as r;
    let mut entry = [0u8; INTERFACE_REQUEST_BYTES];
    copy_from_user(&mut entry, argument).map_err(|_| errno::EFAULT)?;
    let interfaces = interfaces()?;
    let found = if request == r::NAME {
        let index = u32::from_le_bytes([entry[16], entry[17], entry[18], entry[19]]);
        interfaces.iter().find(|interface| interface.index == index)
    } else {
        let end = entry[..abi::net::NAME_BYTES].iter().position(|&b| b == 0).unwrap_or(abi::net::NAME_BYTES);
        interfaces.iter().find(|interface| interface.name() == &entry[..end])
    };
    let interface = found.ok_or(errno::ENODEV)?;
    let mut union = [0u8; 24];
    let mut put = |bytes: &[u8]| union[..bytes.len()].copy_from_slice(bytes);
    let inet = |address: [u8; 4]| socket_address(INET, &[&address[..], &[0, 0]].concat());
    match request {
        r::NAME => {
            entry[..abi::net::NAME_BYTES].copy_from_slice(&interface.name);
            copy_to_user(argument, &entry[..abi::net::NAME_BYTES]).map_err(|_| errno::EFAULT)?;
            return Ok(0);
        }
        r::FLAGS => put(&interface.flags.to_le_bytes()),
        r::ADDRESS | r::DESTINATION => put(&inet(interface.address)),
        r::BROADCAST => put(&inet(interface.broadcast())),
        r::NETMASK => put(&inet(interface.netmask)),
        r::MTU => put(&interface.mtu.to_le_bytes()),
        r::TRANSMIT_QUEUE => put(&interface.transmit_queue.to_le_bytes()),
        r::INDEX => put(&interface.index.to_le_bytes()),
        r::HARDWARE => {
            put(&interface.hardware_kind.to_le_bytes());
            union[2..8].copy_from_slice(&interface.hardware);
        }
        // `SIOCGIFMETRIC` and `SIOCGIFMAP`: zeros, as Linux gives them.
        _ => {}
    }
    copy_to_user(argument + 16, &union).map_err(|_| errno::EFAULT)?;
    Ok(0)
}
