//! HTTP on the host's loopback, for a guest's network: a small file server and a GET client.
//!
//! Both speak just enough HTTP/1.0 and 1.1 for busybox's `wget` and `httpd`: GET, a
//! Content-Length on every answer, no chunks, no keep-alive negotiation. Both talk to
//! 127.0.0.1 only, and both are bounded in time, so a guest that never answers or never asks
//! costs a test its timeout and no more.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest request head the server reads, and the longest response head the client reads.
const MAX_HEAD: usize = 16 * 1024;

/// How long a blocked read or accept waits before the loop looks at its deadline and stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The most connections the server holds at once: QEMU's one `guestfwd` connection, and a few
/// of a client on the host.
const MAX_CONNECTIONS: usize = 8;

/// The largest body [`get`] accepts: ten times a test's largest file.
const MAX_BODY: usize = 64 << 20;

/// One request the server answered: what a failed test prints to say what the guest asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub method: String,
    pub path: String,
    pub status: u16,
    pub body_bytes: usize,
}

/// A file server on 127.0.0.1 in a thread of its own, which ends when it has answered
/// `max_requests` requests, when `lifetime` has passed, or when it is dropped.
///
/// It never closes a connection first: behind QEMU's `guestfwd` one host connection carries
/// every connection the guest makes, one after the other ([`super::GuestForward`]), so a
/// server that closed after one answer would leave the guest's next connection unanswered.
/// A client on the host reads the Content-Length and closes, which ends the connection.
pub struct FileServer {
    port: u16,
    served: Arc<Mutex<Vec<Served>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FileServer {
    /// Listens on 127.0.0.1:0 and serves `files` (path, such as `/big`, to bytes).
    pub fn start(files: Vec<(String, Vec<u8>)>, max_requests: usize, lifetime: Duration) -> Result<Self, String> {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("the file server cannot bind 127.0.0.1:0: {e}"))?;
        let port = listener.local_addr().map_err(|e| format!("the file server's address: {e}"))?.port();
        // Non-blocking, so the accept loop can look at its deadline and stop flag.
        listener.set_nonblocking(true).map_err(|e| format!("the file server's listener: {e}"))?;
        let served = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let limits = Limits {
            files: Arc::new(files.into_iter().collect()),
            deadline: Instant::now() + lifetime,
            requests_left: Arc::new(AtomicUsize::new(max_requests)),
            stop: stop.clone(),
            served: served.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("file-server-{port}"))
            .spawn(move || accept_loop(&listener, &limits))
            .map_err(|e| format!("starting the file server's thread: {e}"))?;
        Ok(Self { port, served, stop, thread: Some(thread) })
    }

    /// The port of 127.0.0.1 it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The requests answered so far, in order.
    pub fn served(&self) -> Vec<Served> {
        self.served.lock().map(|served| served.clone()).unwrap_or_default()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // A connection's thread sees the flag within one poll; the join waits for them.
            let _ = thread.join();
        }
    }
}

/// What every thread of one server shares.
#[derive(Clone)]
struct Limits {
    files: Arc<BTreeMap<String, Vec<u8>>>,
    deadline: Instant,
    requests_left: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    served: Arc<Mutex<Vec<Served>>>,
}

impl Limits {
    /// Whether the server is done: stopped, out of time, or out of requests.
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || Instant::now() >= self.deadline
            || self.requests_left.load(Ordering::Relaxed) == 0
    }

    /// Takes one request from the budget; false when none is left.
    fn take_request(&self) -> bool {
        self.requests_left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1)).is_ok()
    }
}

/// Accepts connections until the server is done, a thread each (at most [`MAX_CONNECTIONS`]),
/// then waits for them.
fn accept_loop(listener: &TcpListener, limits: &Limits) {
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    while !limits.over() {
        connections.retain(|connection| !connection.is_finished());
        match listener.accept() {
            Ok((stream, _)) if connections.len() < MAX_CONNECTIONS => {
                let limits = limits.clone();
                connections.push(std::thread::spawn(move || serve_connection(stream, &limits)));
            }
            // Past the bound: dropped, which the client sees as a reset.
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    for connection in connections {
        let _ = connection.join();
    }
}

/// Answers the requests of one connection, one after the other, until the client closes it,
/// sends something that is not HTTP, or the server is done.
fn serve_connection(mut stream: TcpStream, limits: &Limits) {
    // The accepted stream inherits nothing of the listener's non-blocking mode on Linux, but
    // say what is wanted: blocking reads that return every POLL to look at the limits.
    if stream.set_nonblocking(false).and_then(|()| stream.set_read_timeout(Some(POLL))).is_err() {
        return;
    }
    let mut buffer = Vec::new();
    loop {
        let head = loop {
            if let Some(end) = find(&buffer, b"\r\n\r\n") {
                break Some(buffer.drain(..end + 4).collect::<Vec<u8>>());
            }
            if buffer.len() > MAX_HEAD || limits.over() {
                break None;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk) {
                Ok(0) => break None,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break None,
            }
        };
        let Some(head) = head else { break };
        if !limits.take_request() {
            break;
        }
        let (served, response) = answer(&String::from_utf8_lossy(&head), &limits.files);
        let malformed = served.status == 400;
        if let Ok(mut log) = limits.served.lock() {
            log.push(served);
        }
        if stream.write_all(&response).and_then(|()| stream.flush()).is_err() || malformed {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// The response to a request head: 200 with the file, 404 for a path not served, 405 for a
/// method other than GET, 400 for what is not an HTTP/1.0 or 1.1 request line.
fn answer(head: &str, files: &BTreeMap<String, Vec<u8>>) -> (Served, Vec<u8>) {
    let request_line = head.lines().next().unwrap_or("");
    let words: Vec<&str> = request_line.split_whitespace().collect();
    let (method, target, version) = match words[..] {
        [method, target, version] if version == "HTTP/1.0" || version == "HTTP/1.1" => (method, target, version),
        _ => ("", "", "HTTP/1.1"),
    };
    // A proxy-style absolute target (`http://host/path`) names its path after the authority.
    let path =
        target.strip_prefix("http://").map(|rest| rest.find('/').map_or("/", |at| &rest[at..])).unwrap_or(target);
    let (status, reason, body): (u16, &str, &[u8]) = if method.is_empty() {
        (400, "Bad Request", b"not an HTTP/1.0 or HTTP/1.1 request\n")
    } else if method != "GET" {
        (405, "Method Not Allowed", b"only GET is served\n")
    } else {
        match files.get(path.split('?').next().unwrap_or(path)) {
            Some(bytes) => (200, "OK", bytes),
            None => (404, "Not Found", b"no such file\n"),
        }
    };
    let mut response = format!(
        "{version} {status} {reason}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n{}\r\n",
        body.len(),
        if status == 405 { "Allow: GET\r\n" } else { "" }
    )
    .into_bytes();
    response.extend_from_slice(body);
    let served = Served { method: method.to_string(), path: path.to_string(), status, body_bytes: body.len() };
    (served, response)
}

/// Where `needle` starts in `haystack`.
pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// What [`get`] received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// GET `path` from 127.0.0.1:`port`, within `timeout` in all.
///
/// Until the answer's status line arrives, a refused connection and a connection closed or
/// reset without an answer are tried again, every 100 ms: behind QEMU's `hostfwd` the host
/// side always accepts, and QEMU closes the connection when nothing listens on the guest's
/// port yet (the guest's server is still starting). A connection that broke after the status
/// line is an error, not retried.
pub fn get(port: u16, path: &str, timeout: Duration) -> Result<Response, String> {
    let deadline = Instant::now() + timeout;
    let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let mut attempts = 0;
    loop {
        attempts += 1;
        let last_error = match attempt(address, path, deadline) {
            Ok(response) => return Ok(response),
            Err(Attempt::Retry(why)) => why,
            Err(Attempt::Fail(why)) => return Err(format!("GET http://127.0.0.1:{port}{path}: {why}")),
        };
        if Instant::now() + Duration::from_millis(100) >= deadline {
            return Err(format!(
                "GET http://127.0.0.1:{port}{path}: no answer within {:.0} s (attempts: {attempts}; the last: {last_error})",
                timeout.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Why one attempt of [`get`] failed: worth another, or final.
enum Attempt {
    Retry(String),
    Fail(String),
}

/// One connection of [`get`].
fn attempt(address: SocketAddr, path: &str, deadline: Instant) -> Result<Response, Attempt> {
    let left = |deadline: Instant| deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let mut stream =
        TcpStream::connect_timeout(&address, left(deadline)).map_err(|e| Attempt::Retry(format!("connect: {e}")))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| Attempt::Retry(format!("sending the request: {e}")))?;
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    // The head: retried if the connection ends before it, as QEMU ends one with nobody behind.
    let head_end = loop {
        if let Some(end) = find(&received, b"\r\n\r\n") {
            break end;
        }
        if received.len() > MAX_HEAD {
            return Err(Attempt::Fail(format!("a response head longer than {MAX_HEAD} bytes")));
        }
        if Instant::now() >= deadline {
            return Err(Attempt::Retry("no response head before the deadline".into()));
        }
        stream.set_read_timeout(Some(left(deadline))).map_err(|e| Attempt::Fail(e.to_string()))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Err(Attempt::Retry("the connection closed before an answer".into())),
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(error) => return Err(Attempt::Retry(format!("reading the answer: {error}"))),
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let mut body = received[head_end + 4..].to_vec();
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or("");
    let status = match status_line.split_whitespace().collect::<Vec<_>>()[..] {
        [version, status, ..] if version.starts_with("HTTP/1.") => status.parse::<u16>().ok(),
        _ => None,
    }
    .ok_or_else(|| Attempt::Fail(format!("not an HTTP status line: {status_line:?}")))?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_string())
        })
    };
    if header("Transfer-Encoding").is_some_and(|coding| !coding.eq_ignore_ascii_case("identity")) {
        return Err(Attempt::Fail("a chunked (Transfer-Encoding) body, which this client does not read".into()));
    }
    let length = match header("Content-Length") {
        Some(text) => Some(
            text.parse::<usize>().map_err(|_| Attempt::Fail(format!("a Content-Length that is no number: {text}")))?,
        ),
        None => None,
    };
    if length.is_some_and(|length| length > MAX_BODY) {
        return Err(Attempt::Fail(format!(
            "a body of {} bytes, past the {MAX_BODY} this client takes",
            length.unwrap_or(0)
        )));
    }
    // The body: its Content-Length, or up to the end of the connection without one.
    while length.is_none_or(|length| body.len() < length) {
        if Instant::now() >= deadline {
            return Err(Attempt::Fail(format!("the body stopped at {} bytes at the deadline", body.len())));
        }
        stream.set_read_timeout(Some(left(deadline))).map_err(|e| Attempt::Fail(e.to_string()))?;
        match stream.read(&mut chunk) {
            Ok(0) if length.is_none() => break,
            Ok(0) => {
                return Err(Attempt::Fail(format!(
                    "the connection closed after {} of the body's {} bytes",
                    body.len(),
                    length.unwrap_or(0)
                )))
            }
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(error) => return Err(Attempt::Fail(format!("reading the body: {error}"))),
        }
        if body.len() > MAX_BODY {
            return Err(Attempt::Fail(format!("a body past {MAX_BODY} bytes")));
        }
    }
    if let Some(length) = length {
        if body.len() > length {
            return Err(Attempt::Fail(format!("{} bytes after the body's {length}", body.len() - length)));
        }
    }
    Ok(Response { status, body })
}

/// What [`flood`] got: connections answered whole with status 200, connections that got no
/// whole answer (refused, reset, cut short), and connections the flood itself cut short.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flood {
    pub answered: usize,
    pub unanswered: usize,
    pub cut: usize,
}

impl Flood {
    /// One line a test can write and parse back.
    pub fn line(self) -> String {
        format!("answered={} unanswered={} cut={}", self.answered, self.unanswered, self.cut)
    }
}

/// Opens `connections` connections to 127.0.0.1:`port` at once, each asking for `path`, all
/// within `timeout`. The first `cut` read the start of the answer and close with the rest
/// unread, which makes the host's TCP reset them (RFC 2525 2.17): a peer that resets
/// mid-transfer. The others read their answer whole, once, with no retry: a flood counts what
/// the server could take.
pub fn flood(port: u16, path: &str, connections: usize, cut: usize, timeout: Duration) -> Flood {
    let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + timeout;
    let threads: Vec<_> = (0..connections)
        .map(|index| {
            let path = path.to_string();
            std::thread::spawn(move || {
                if index < cut {
                    cut_short(address, &path, deadline);
                    return (false, true);
                }
                let answered = matches!(attempt(address, &path, deadline), Ok(Response { status: 200, .. }));
                (answered, false)
            })
        })
        .collect();
    let mut outcome = Flood::default();
    for thread in threads {
        match thread.join() {
            Ok((_, true)) => outcome.cut += 1,
            Ok((true, _)) => outcome.answered += 1,
            _ => outcome.unanswered += 1,
        }
    }
    outcome
}

/// Asks for `path` and closes after the first 4 KiB or so, the rest unread.
fn cut_short(address: SocketAddr, path: &str, deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, left) else { return };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return;
    }
    let _ = stream.set_read_timeout(Some(left));
    let mut chunk = [0u8; 4096];
    let _ = stream.read(&mut chunk);
    // Dropped with unread bytes waiting: the host resets the connection.
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn varied(length: usize) -> Vec<u8> {
        (0..length as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
    }

    #[test]
    fn the_server_serves_its_files_and_the_client_reads_them_whole() {
        let big = varied(1 << 20);
        let server = FileServer::start(
            vec![("/big".into(), big.clone()), ("/a".into(), b"a\n".to_vec())],
            10,
            Duration::from_secs(30),
        )
        .unwrap();
        let response = get(server.port(), "/big", Duration::from_secs(10)).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(Sha256::digest(&response.body), Sha256::digest(&big));
        assert_eq!(get(server.port(), "/a", Duration::from_secs(10)).unwrap().body, b"a\n");
        assert_eq!(get(server.port(), "/missing", Duration::from_secs(10)).unwrap().status, 404);
        let served = server.served();
        assert_eq!(served.len(), 3);
        assert_eq!(served[0], Served { method: "GET".into(), path: "/big".into(), status: 200, body_bytes: 1 << 20 });
        assert_eq!(served[2].status, 404);
    }

    /// As behind QEMU's `guestfwd`: requests one after the other on one connection, HTTP/1.0
    /// and 1.1, each answered with its length and the connection left open.
    #[test]
    fn one_connection_carries_request_after_request() {
        let server = FileServer::start(vec![("/f".into(), b"12345".to_vec())], 10, Duration::from_secs(30)).unwrap();
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, server.port())).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut read_answer = |request: &str| {
            stream.write_all(request.as_bytes()).unwrap();
            let mut answer = Vec::new();
            let mut byte = [0u8; 1];
            while !answer.ends_with(b"\r\n\r\n") {
                stream.read_exact(&mut byte).unwrap();
                answer.push(byte[0]);
            }
            let head = String::from_utf8(answer).unwrap();
            let length: usize = head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
            let mut body = vec![0u8; length];
            stream.read_exact(&mut body).unwrap();
            (head, body)
        };
        let (head, body) = read_answer("GET /f HTTP/1.0\r\nUser-Agent: Wget\r\n\r\n");
        assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{head}");
        assert_eq!(body, b"12345");
        let (head, body) =
            read_answer("GET http://10.0.2.100/f HTTP/1.1\r\nHost: 10.0.2.100\r\nConnection: close\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(body, b"12345");
        let (head, _) = read_answer("POST /f HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 405 ") && head.contains("Allow: GET\r\n"), "{head}");
        let (head, _) = read_answer("hello\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 400 "), "{head}");
        // A request that is not HTTP ends the connection.
        assert_eq!(stream.read(&mut [0u8; 1]).unwrap_or(0), 0);
    }

    #[test]
    fn the_server_stops_after_its_requests() {
        let server = FileServer::start(vec![("/f".into(), b"x".to_vec())], 1, Duration::from_secs(30)).unwrap();
        assert_eq!(get(server.port(), "/f", Duration::from_secs(5)).unwrap().body, b"x");
        let started = Instant::now();
        let error = get(server.port(), "/f", Duration::from_secs(1)).unwrap_err();
        assert!(error.contains("no answer within 1 s"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn the_server_stops_at_its_lifetime() {
        let server = FileServer::start(vec![("/f".into(), b"x".to_vec())], 100, Duration::from_millis(200)).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        assert!(get(server.port(), "/f", Duration::from_millis(500)).is_err());
    }

    /// The client waits for a server that starts late, as for a guest's httpd behind hostfwd.
    #[test]
    fn the_client_retries_until_the_server_listens() {
        let port = super::super::free_port().unwrap();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
            // First a connection closed without an answer, as QEMU closes one with no guest
            // server behind it; then an answer without Content-Length, ended by the close.
            drop(listener.accept().unwrap());
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).unwrap();
            stream.write_all(b"HTTP/1.0 200 OK\r\n\r\nuntil the end").unwrap();
        });
        let response = get(port, "/", Duration::from_secs(10)).unwrap();
        assert_eq!(response, Response { status: 200, body: b"until the end".to_vec() });
        late.join().unwrap();
        // Nobody at all: the error says how long it tried.
        let error = get(super::super::free_port().unwrap(), "/", Duration::from_millis(300)).unwrap_err();
        assert!(error.contains("no answer within") && error.contains("connect"), "{error}");
    }

    #[test]
    fn a_short_body_is_an_error() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let _ = stream.read(&mut [0u8; 1024]).unwrap();
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").unwrap();
        });
        let error = get(port, "/", Duration::from_secs(5)).unwrap_err();
        assert!(error.contains("closed after 5 of the body's 10 bytes"), "{error}");
        server.join().unwrap();
    }
}
