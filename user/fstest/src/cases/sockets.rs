//! `AF_UNIX` stream sockets: pairs, names, `shutdown`, end of file and `EPIPE`, a mebibyte
//! from another process, `epoll` on a listener, and the errors Linux gives.

use super::{wait_for_success, Case, Context};
use crate::expect::{expect, expect_bytes, expect_equal, expect_error, Outcome, Step};
use crate::pattern::{checksum, pattern, CHECKSUM_START};
use crate::sys::{self, Fork};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};

pub const CASES: [Case; 8] = [
    Case { name: "unix-pair", run: pair },
    Case { name: "unix-pair-end", run: pair_end },
    Case { name: "unix-shutdown", run: shutdown },
    Case { name: "unix-named", run: named },
    Case { name: "unix-1mib", run: one_mebibyte },
    Case { name: "unix-epoll-listener", run: epoll_listener },
    Case { name: "unix-messages", run: messages },
    Case { name: "unix-errors", run: errors },
];

const TRANSFER: usize = 1 << 20;

fn pair(_: &Context) -> Outcome {
    let (mut one, mut other) = UnixStream::pair().step("socketpair")?;
    one.write_all(b"there").step("write one way")?;
    other.write_all(b"and back").step("write the other way")?;
    let mut buffer = [0u8; 16];
    let count = other.read(&mut buffer).step("read one way")?;
    expect_bytes("read one way", &buffer[..count], b"there")?;
    let count = one.read(&mut buffer).step("read the other way")?;
    expect_bytes("read the other way", &buffer[..count], b"and back")?;
    let kind = one.as_fd().try_clone_to_owned().step("dup")?;
    let metadata = std::fs::File::from(kind).metadata().step("fstat")?;
    expect(metadata.file_type().is_socket(), "fstat of a socket does not say S_IFSOCK")?;
    expect_equal("SO_TYPE", sys::socket_option(one.as_fd(), libc::SO_TYPE).step("SO_TYPE")?, libc::SOCK_STREAM)?;
    expect_equal("SO_DOMAIN", sys::socket_option(one.as_fd(), libc::SO_DOMAIN).step("SO_DOMAIN")?, libc::AF_UNIX)?;
    Ok("bytes both ways; fstat S_IFSOCK; SO_TYPE stream, SO_DOMAIN AF_UNIX".into())
}

fn pair_end(_: &Context) -> Outcome {
    let (mut one, other) = UnixStream::pair().step("socketpair")?;
    drop(other);
    let mut buffer = [0u8; 4];
    expect_equal("a read once the peer closed", one.read(&mut buffer).step("read")?, 0)?;
    expect_error("a send once the peer closed", sys::send(one.as_fd(), b"x", libc::MSG_NOSIGNAL), libc::EPIPE)?;
    Ok("end of file, then EPIPE (MSG_NOSIGNAL: no SIGPIPE) once the peer closed".into())
}

fn shutdown(_: &Context) -> Outcome {
    let (mut one, mut other) = UnixStream::pair().step("socketpair")?;
    one.write_all(b"last").step("write")?;
    one.shutdown(std::net::Shutdown::Write).step("shutdown(SHUT_WR)")?;
    let mut received = Vec::new();
    other.read_to_end(&mut received).step("reading to the end")?;
    expect_bytes("what came before the shutdown", &received, b"last")?;
    expect_error("a send after SHUT_WR", sys::send(one.as_fd(), b"x", libc::MSG_NOSIGNAL), libc::EPIPE)?;
    other.write_all(b"reply").step("the other way, still open")?;
    let mut buffer = [0u8; 8];
    let count = one.read(&mut buffer).step("read the reply")?;
    expect_bytes("the reply", &buffer[..count], b"reply")?;
    Ok("SHUT_WR: the peer reads the bytes then end of file; the other way stays open".into())
}

fn named(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let path = directory.join("server");
    let listener = UnixListener::bind(&path).step("bind and listen")?;
    let kind = std::fs::symlink_metadata(&path).step("lstat of the bound path")?.file_type();
    expect(kind.is_socket(), format_args!("the bound path is a {kind:?}, not a socket"))?;
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(|| {
            let Ok(mut stream) = UnixStream::connect(&path) else { return 3 };
            if stream.write_all(b"ping").is_err() {
                return 4;
            }
            let mut buffer = [0u8; 4];
            match stream.read_exact(&mut buffer) {
                Ok(()) if &buffer == b"pong" => 0,
                _ => 5,
            }
        }),
        Fork::Parent(pid) => pid,
    };
    let (mut stream, _) = listener.accept().step("accept")?;
    let mut buffer = [0u8; 4];
    stream.read_exact(&mut buffer).step("reading the client's ping")?;
    expect_bytes("the client's message", &buffer, b"ping")?;
    stream.write_all(b"pong").step("answering")?;
    wait_for_success(pid, "the connecting child")?;
    let name = listener.local_addr().step("getsockname")?;
    expect_equal("getsockname", name.as_pathname(), Some(path.as_path()))?;
    drop(listener);
    expect_error("connect once the listener closed", UnixStream::connect(&path), libc::ECONNREFUSED)?;
    std::fs::remove_file(&path).step("unlink of the name")?;
    Ok("bind makes a socket node; a child connects, ping and pong; getsockname; ECONNREFUSED after close".into())
}

fn one_mebibyte(_: &Context) -> Outcome {
    let (mut reader, writer) = UnixStream::pair().step("socketpair")?;
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(move || {
            drop(reader);
            let mut writer = writer;
            i32::from(writer.write_all(&pattern(5, TRANSFER)).is_err())
        }),
        Fork::Parent(pid) => pid,
    };
    drop(writer);
    let mut received = Vec::with_capacity(TRANSFER);
    reader.read_to_end(&mut received).step("reading the child's mebibyte")?;
    wait_for_success(pid, "the writing child")?;
    expect_equal("bytes received", received.len(), TRANSFER)?;
    let wanted = checksum(CHECKSUM_START, &pattern(5, TRANSFER));
    expect_equal("checksum", checksum(CHECKSUM_START, &received), wanted)?;
    Ok(format!("{TRANSFER} bytes from a child through a socket pair, checksum {wanted:#x}"))
}

fn epoll_listener(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let path = directory.join("listener");
    let listener = UnixListener::bind(&path).step("bind and listen")?;
    epoll_on_a_listener(
        listener.as_fd(),
        || UnixStream::connect(&path).step("connect"),
        || Ok(listener.accept().step("accept")?.0),
    )?;
    Ok("EPOLLIN on a listener with a connection queued, then on the connection with bytes".into())
}

/// `epoll` on `listener`: no event while nobody connects, `EPOLLIN` once `connect` queued a
/// connection, then `EPOLLIN` on the connection `accept` took once the client wrote to it.
pub(super) fn epoll_on_a_listener<C: Write, S: Read + AsRawFd>(
    listener: std::os::fd::BorrowedFd<'_>,
    connect: impl FnOnce() -> Result<C, String>,
    accept: impl FnOnce() -> Result<S, String>,
) -> Result<(), String> {
    let epoll = sys::epoll_create1(libc::EPOLL_CLOEXEC).step("epoll_create1")?;
    sys::epoll_ctl(epoll.as_fd(), libc::EPOLL_CTL_ADD, listener.as_raw_fd(), Some((libc::EPOLLIN as u32, 1)))
        .step("epoll_ctl ADD of the listener")?;
    expect_equal("events with nobody connecting", sys::epoll_wait(epoll.as_fd(), 4, 0).step("epoll_wait")?, vec![])?;
    let mut client = connect()?;
    expect_equal(
        "events with a connection queued",
        sys::epoll_wait(epoll.as_fd(), 4, 1000).step("epoll_wait")?,
        vec![(libc::EPOLLIN as u32, 1)],
    )?;
    let mut served = accept()?;
    sys::epoll_ctl(epoll.as_fd(), libc::EPOLL_CTL_ADD, served.as_raw_fd(), Some((libc::EPOLLIN as u32, 2)))
        .step("epoll_ctl ADD of the connection")?;
    client.write_all(b"hello").step("write")?;
    expect_equal(
        "events with bytes on the connection",
        sys::epoll_wait(epoll.as_fd(), 4, 1000).step("epoll_wait")?,
        vec![(libc::EPOLLIN as u32, 2)],
    )?;
    let mut buffer = [0u8; 8];
    let count = served.read(&mut buffer).step("read")?;
    expect_bytes("read", &buffer[..count], b"hello")?;
    Ok(())
}

fn messages(_: &Context) -> Outcome {
    for (kind, name) in [(libc::SOCK_SEQPACKET, "SOCK_SEQPACKET"), (libc::SOCK_DGRAM, "SOCK_DGRAM")] {
        let (one, other) = sys::socketpair(kind).step(format_args!("socketpair({name})"))?;
        sys::send(one.as_fd(), b"one", 0).step("send one")?;
        sys::send(one.as_fd(), b"three!!", 0).step("send three")?;
        let mut buffer = [0u8; 64];
        let count = sys::recv(other.as_fd(), &mut buffer, 0).step("recv")?;
        expect_bytes(format_args!("{name}: the first message"), &buffer[..count], b"one")?;
        let count = sys::recv(other.as_fd(), &mut buffer[..3], 0).step("recv into 3 bytes")?;
        expect_bytes(format_args!("{name}: the second, cut to 3"), &buffer[..count], b"thr")?;
        expect_error(
            format_args!("{name}: recv with nothing left (the cut bytes dropped)"),
            sys::recv(other.as_fd(), &mut buffer, libc::MSG_DONTWAIT),
            libc::EAGAIN,
        )?;
        expect_error(
            format_args!("{name}: a message of 300000 bytes"),
            sys::send(one.as_fd(), &vec![7u8; 300_000], 0),
            libc::EMSGSIZE,
        )?;
        expect_equal(
            format_args!("{name}: SO_TYPE"),
            sys::socket_option(one.as_fd(), libc::SO_TYPE).step("SO_TYPE")?,
            kind,
        )?;
        drop(one);
        if kind == libc::SOCK_SEQPACKET {
            let count = sys::recv(other.as_fd(), &mut buffer, 0).step("recv")?;
            expect_equal(format_args!("{name}: recv once the peer closed"), count, 0)?;
        } else {
            // A datagram socket has no connection to end: it waits on (Linux too).
            let waited = sys::recv(other.as_fd(), &mut buffer, libc::MSG_DONTWAIT);
            expect_error(format_args!("{name}: recv once the peer closed"), waited, libc::EAGAIN)?;
        }
    }
    Ok("SOCK_SEQPACKET and SOCK_DGRAM pairs: messages keep their bounds, a short read drops the rest, EMSGSIZE; \
        end of file for a sequenced packet pair whose peer closed, none for datagrams"
        .into())
}

fn errors(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let missing = directory.join("missing");
    expect_error("connect to a missing path", UnixStream::connect(&missing), libc::ENOENT)?;
    let plain = directory.join("plain");
    std::fs::write(&plain, b"").step("creating a file")?;
    expect_error("connect to a regular file", UnixStream::connect(&plain), libc::ECONNREFUSED)?;
    let path = directory.join("taken");
    let _listener = UnixListener::bind(&path).step("bind")?;
    expect_error("a second bind of one path", UnixListener::bind(&path), libc::EADDRINUSE)?;
    expect_error("open of a socket's path", std::fs::File::open(&path), libc::ENXIO)?;
    let (one, _other) = UnixStream::pair().step("socketpair")?;
    expect_error("accept on a connected socket", sys::accept(one.as_fd()), libc::EINVAL)?;
    let (read_end, _write_end) = sys::pipe2(libc::O_CLOEXEC).step("pipe2")?;
    expect_error("getsockopt of a pipe", sys::socket_option(read_end.as_fd(), libc::SO_TYPE), libc::ENOTSOCK)?;
    expect_error("a protocol for AF_UNIX", sys::socket(libc::AF_UNIX, libc::SOCK_STREAM, 5), libc::EPROTONOSUPPORT)?;
    let unbound = sys::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0).step("socket")?;
    expect_error("getpeername of an unconnected socket", sys::peer_name_length(unbound.as_fd()), libc::ENOTCONN)?;
    Ok("ENOENT, ECONNREFUSED, EADDRINUSE, ENXIO, EINVAL, ENOTSOCK, EPROTONOSUPPORT, ENOTCONN as Linux".into())
}
