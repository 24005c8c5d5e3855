//! One worker's poll loop: the shared listening socket and every connection it accepted,
//! each a small state machine (read a head, drop an upload, send an answer), all non-blocking.

use crate::http::{self, Answer, PATTERN};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// What this process did, read by the SIGTERM handler (`main.rs`), hence atomics.
pub static REQUESTS: AtomicU64 = AtomicU64::new(0);
pub static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
pub static BYTES_SENT: AtomicU64 = AtomicU64::new(0);
pub static BYTES_RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Connections one worker holds at once; past them it stops accepting until one ends (the
/// rest wait in the listener's backlog or go to another worker).
const MOST_CONNECTIONS: usize = 256;

/// The most bytes one `write` of a body sends, and one `read` takes.
const CHUNK: usize = 64 * 1024;

/// Pattern bytes sent with the head in one write, so that a small answer is one segment.
const FIRST_BODY: u64 = 16 * 1024;

/// Where a connection is.
enum State {
    /// Reading a request head (bytes gather in `Connection::input`).
    Head,
    /// Reading and dropping `left` more bytes of an upload of `total`.
    Sink { left: u64, total: u64, http11: bool, keep_alive: bool },
    /// Sending `out` from `sent`, then `body_left` pattern bytes from `body_offset`.
    Send { out: Vec<u8>, sent: usize, body_left: u64, body_offset: u64, keep_alive: bool },
}

/// What a connection waits for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Read,
    Write,
    /// Over: closed by the peer, an error, or an answer sent with `Connection: close`.
    Done,
}

struct Connection {
    stream: TcpStream,
    input: Vec<u8>,
    state: State,
    wait: Wait,
}

/// Serves on `listener` (non-blocking, shared with the other workers) until the process is
/// ended by a signal; returns only on an error of `poll` itself.
pub fn serve(listener: &TcpListener, default_body: u64) -> Result<(), String> {
    // The pattern, 64 bytes longer than a chunk, so a chunk can start at any offset of a line.
    let block: Vec<u8> = (0..(CHUNK + PATTERN.len()) as u64).map(http::pattern_byte).collect();
    let mut scratch = vec![0u8; CHUNK];
    let mut connections: Vec<Connection> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        fds.clear();
        let accepting = connections.len() < MOST_CONNECTIONS;
        fds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: if accepting { libc::POLLIN } else { 0 },
            revents: 0,
        });
        for connection in &connections {
            let events = if connection.wait == Wait::Write { libc::POLLOUT } else { libc::POLLIN };
            fds.push(libc::pollfd { fd: connection.stream.as_raw_fd(), events, revents: 0 });
        }
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structures poll may write.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("poll of {} descriptors: {error}", fds.len()));
        }
        for (connection, fd) in connections.iter_mut().zip(&fds[1..]) {
            if fd.revents != 0 {
                connection.wait = connection.drive(&block, &mut scratch, default_body);
            }
        }
        connections.retain(|connection| connection.wait != Wait::Done);
        if fds[0].revents != 0 {
            accept_all(listener, &mut connections, &block, &mut scratch, default_body);
        }
    }
}

/// Takes every connection waiting on the listener (another worker may have taken them:
/// `WouldBlock` is the usual end), and serves what each already sent.
fn accept_all(
    listener: &TcpListener,
    connections: &mut Vec<Connection>,
    block: &[u8],
    scratch: &mut [u8],
    default_body: u64,
) {
    while connections.len() < MOST_CONNECTIONS {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(error) if error.kind() == ErrorKind::WouldBlock => return,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            // ECONNABORTED and the like end that connection, not the server.
            Err(error) => {
                eprintln!("webd: accept: {error}");
                return;
            }
        };
        CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        // Answers are whole before they are written; a delay would only hold back their tail.
        let _ = stream.set_nodelay(true);
        if let Err(error) = stream.set_nonblocking(true) {
            eprintln!("webd: a connection cannot be non-blocking: {error}");
            continue;
        }
        let mut connection = Connection { stream, input: Vec::new(), state: State::Head, wait: Wait::Read };
        // The request is often there already: read it now rather than after another poll.
        connection.wait = connection.drive(block, scratch, default_body);
        if connection.wait != Wait::Done {
            connections.push(connection);
        }
    }
}

impl Connection {
    /// Moves the connection on until it would block or is over.
    fn drive(&mut self, block: &[u8], scratch: &mut [u8], default_body: u64) -> Wait {
        loop {
            match &mut self.state {
                State::Head => {
                    if let Some(end) = http::head_end(&self.input) {
                        let head: Vec<u8> = self.input.drain(..end).collect();
                        self.state = start(&head, default_body);
                        continue;
                    }
                    if self.input.len() > http::MAX_HEAD {
                        self.input.clear();
                        self.state = status_answer(true, 431, "Request Header Fields Too Large", "", false);
                        continue;
                    }
                    match self.stream.read(scratch) {
                        Ok(0) => return Wait::Done,
                        Ok(n) => self.input.extend_from_slice(&scratch[..n]),
                        Err(error) => match blocked(&error) {
                            Some(true) => return Wait::Read,
                            Some(false) => return Wait::Done,
                            None => continue,
                        },
                    }
                }
                State::Sink { left, total, http11, keep_alive } => {
                    if *left == 0 {
                        let text = format!("{total}\n");
                        let mut out = http::response_head(*http11, 200, "OK", text.len() as u64, *keep_alive);
                        out.extend_from_slice(text.as_bytes());
                        self.state =
                            State::Send { out, sent: 0, body_left: 0, body_offset: 0, keep_alive: *keep_alive };
                        continue;
                    }
                    // Body bytes that came with the head first; then straight from the socket,
                    // never past the body, so a pipelined request stays in the socket.
                    if !self.input.is_empty() {
                        let taken = (self.input.len() as u64).min(*left) as usize;
                        self.input.drain(..taken);
                        *left -= taken as u64;
                        BYTES_RECEIVED.fetch_add(taken as u64, Ordering::Relaxed);
                        continue;
                    }
                    let most = (*left).min(scratch.len() as u64) as usize;
                    match self.stream.read(&mut scratch[..most]) {
                        Ok(0) => return Wait::Done,
                        Ok(n) => {
                            *left -= n as u64;
                            BYTES_RECEIVED.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        Err(error) => match blocked(&error) {
                            Some(true) => return Wait::Read,
                            Some(false) => return Wait::Done,
                            None => continue,
                        },
                    }
                }
                State::Send { out, sent, body_left, body_offset, keep_alive } => {
                    let written = if *sent < out.len() {
                        self.stream.write(&out[*sent..])
                    } else if *body_left > 0 {
                        let start = (*body_offset % PATTERN.len() as u64) as usize;
                        let length = (*body_left).min(CHUNK as u64) as usize;
                        self.stream.write(&block[start..start + length])
                    } else {
                        REQUESTS.fetch_add(1, Ordering::Relaxed);
                        if !*keep_alive {
                            return Wait::Done;
                        }
                        self.state = State::Head;
                        continue;
                    };
                    match written {
                        Ok(0) => return Wait::Done,
                        Ok(n) => {
                            BYTES_SENT.fetch_add(n as u64, Ordering::Relaxed);
                            if *sent < out.len() {
                                *sent += n;
                            } else {
                                *body_left -= n as u64;
                                *body_offset += n as u64;
                            }
                        }
                        Err(error) => match blocked(&error) {
                            Some(true) => return Wait::Write,
                            Some(false) => return Wait::Done,
                            None => continue,
                        },
                    }
                }
            }
        }
    }
}

/// For an error of a read or write: `None` to try again (interrupted), `Some(true)` to wait
/// for the socket, `Some(false)` when the connection is over (reset, broken pipe...).
fn blocked(error: &std::io::Error) -> Option<bool> {
    match error.kind() {
        ErrorKind::Interrupted => None,
        ErrorKind::WouldBlock => Some(true),
        _ => Some(false),
    }
}

/// What a new request head starts.
fn start(head: &[u8], default_body: u64) -> State {
    let request = match http::parse_head(head) {
        Ok(request) => request,
        Err(bad) => {
            let (status, reason) = bad.status();
            return status_answer(true, status, reason, "not a request webd can answer\n", false);
        }
    };
    match http::answer(&request, default_body) {
        Answer::Pattern { length } => {
            let mut out = http::response_head(request.http11, 200, "OK", length, request.keep_alive);
            let first = length.min(FIRST_BODY);
            out.extend((0..first).map(http::pattern_byte));
            State::Send { out, sent: 0, body_left: length - first, body_offset: first, keep_alive: request.keep_alive }
        }
        Answer::Sink { length } => {
            State::Sink { left: length, total: length, http11: request.http11, keep_alive: request.keep_alive }
        }
        Answer::Status { status, reason, text, close } => {
            status_answer(request.http11, status, reason, text, request.keep_alive && !close)
        }
    }
}

/// An answer of `status` with `text` as its body.
fn status_answer(http11: bool, status: u16, reason: &str, text: &str, keep_alive: bool) -> State {
    let mut out = http::response_head(http11, status, reason, text.len() as u64, keep_alive);
    out.extend_from_slice(text.as_bytes());
    State::Send { out, sent: 0, body_left: 0, body_offset: 0, keep_alive }
}
