//! A load generator on the host's loopback: closed-loop HTTP clients in threads (requests/s
//! and each request's latency), and one large transfer each way (MB/s), for `bench net`.
//!
//! Every run is bounded twice, in requests and in time, and talks to 127.0.0.1 only (a
//! `--forward` into the guest). It never fails on what the server does: errors are counted
//! and the first is kept, so a benchmark reports them beside its figures.

use super::http::find;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// The longest response head read.
const MAX_HEAD: usize = 16 * 1024;

/// The body pattern `user/webd` serves: byte `k` is `PATTERN[k % 64]`.
const PATTERN: &[u8; 64] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-\n";

/// Closed-loop clients: `connections` threads, each sending its next request when the answer
/// to the last is in, `requests` in all, within `time_limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Load {
    pub port: u16,
    pub path: String,
    /// The body length every answer must have.
    pub body_length: usize,
    pub connections: usize,
    /// One connection per client for all its requests (true), or one per request with
    /// `Connection: close` (false).
    pub keep_alive: bool,
    pub requests: usize,
    pub time_limit: Duration,
}

/// What a [`Load`] measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadOutcome {
    /// Requests answered whole with status 200 and the expected length.
    pub completed: usize,
    /// Requests that failed (connection refused or reset, a short or wrong answer, a timeout).
    pub errors: usize,
    pub first_error: Option<String>,
    /// From the first request sent to the last answer read.
    pub elapsed: Duration,
    /// Each completed request's latency in ns, from its first byte sent (or the connect, for a
    /// connection per request) to its last byte read.
    pub latencies_ns: Vec<f64>,
    /// Whether the time limit ended the run before its requests were done.
    pub timed_out: bool,
    /// The slowest of the untimed first requests (one per client, each on a fresh connection),
    /// in ns: connections opened at once, where a server that drops a SYN shows its retry.
    pub warm_up_max_ns: Option<f64>,
}

impl LoadOutcome {
    /// Completed requests per second of the run.
    pub fn requests_per_second(&self) -> Option<f64> {
        (self.completed > 0 && !self.elapsed.is_zero()).then(|| self.completed as f64 / self.elapsed.as_secs_f64())
    }
}

/// Runs `load`: each client first makes one untimed request (opening its connection), then
/// all start together, and the clock runs from there.
pub fn run(load: &Load) -> LoadOutcome {
    let left = Arc::new(AtomicUsize::new(load.requests));
    let outcome = Arc::new(Mutex::new(LoadOutcome::default()));
    let clients = load.connections.max(1);
    let start_line = Arc::new(Barrier::new(clients + 1));
    let deadline = Instant::now() + load.time_limit;
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (load, left, outcome, start_line) = (load.clone(), left.clone(), outcome.clone(), start_line.clone());
            std::thread::spawn(move || client(&load, &left, &outcome, &start_line, deadline))
        })
        .collect();
    start_line.wait();
    let started = Instant::now();
    for thread in threads {
        let _ = thread.join();
    }
    let mut outcome = outcome.lock().map(|outcome| outcome.clone()).unwrap_or_default();
    outcome.elapsed = started.elapsed();
    outcome.timed_out = left.load(Ordering::Relaxed) > 0;
    outcome
}

/// One closed-loop client: one untimed request, the start line, then requests from `left`
/// until none is left or the deadline.
fn client(load: &Load, left: &AtomicUsize, outcome: &Mutex<LoadOutcome>, start_line: &Barrier, deadline: Instant) {
    let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, load.port));
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}\r\n",
        load.path,
        if load.keep_alive { "" } else { "Connection: close\r\n" }
    );
    let mut connection: Option<TcpStream> = None;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut latencies = Vec::new();
    let mut errors = Vec::new();
    let mut warm_up = None;
    let mut first = true;
    loop {
        let taken = || left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok();
        if !first && (Instant::now() >= deadline || !taken()) {
            break;
        }
        let start = Instant::now();
        let result = (|| -> Result<(), String> {
            let stream = match connection.as_mut() {
                Some(stream) => stream,
                None => connection.insert(connect(address, deadline)?),
            };
            stream.write_all(request.as_bytes()).map_err(|e| format!("sending the request: {e}"))?;
            let length = read_answer(stream, &mut buffer, deadline, false)?;
            if length != load.body_length as u64 {
                return Err(format!("a body of {length} bytes, not {}", load.body_length));
            }
            Ok(())
        })();
        let latency = start.elapsed().as_nanos() as f64;
        match result {
            Ok(()) if first => warm_up = Some(latency),
            Ok(()) => latencies.push(latency),
            Err(why) => {
                errors.push(why);
                connection = None;
            }
        }
        if !load.keep_alive {
            connection = None;
        }
        if first {
            first = false;
            start_line.wait();
        }
    }
    if let Ok(mut outcome) = outcome.lock() {
        outcome.warm_up_max_ns = match (outcome.warm_up_max_ns, warm_up) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        outcome.completed += latencies.len();
        outcome.latencies_ns.extend(latencies);
        outcome.errors += errors.len();
        if outcome.first_error.is_none() {
            outcome.first_error = errors.into_iter().next();
        }
    }
}

/// A connection to `address`, with reads and writes that give up at `deadline`.
fn connect(address: SocketAddr, deadline: Instant) -> Result<TcpStream, String> {
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let stream = TcpStream::connect_timeout(&address, left).map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    stream.set_write_timeout(Some(left)).map_err(|e| e.to_string())?;
    Ok(stream)
}

/// Reads one answer on `stream`: status 200 and a Content-Length, then the body, counted and
/// (with `check`) compared with webd's pattern; returns the body's length.
fn read_answer(stream: &mut TcpStream, buffer: &mut [u8], deadline: Instant, check: bool) -> Result<u64, String> {
    let mut head = Vec::new();
    let end = loop {
        if let Some(end) = find(&head, b"\r\n\r\n") {
            break end + 4;
        }
        if head.len() > MAX_HEAD {
            return Err("a response head past 16 KiB".into());
        }
        let most = 1024.min(buffer.len());
        let n = read_before(stream, &mut buffer[..most], deadline)?;
        if n == 0 {
            return Err("the connection closed before an answer".into());
        }
        head.extend_from_slice(&buffer[..n]);
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let status = text.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("status {status}: {}", text.lines().next().unwrap_or("")));
    }
    let length: u64 = text
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
        })
        .ok_or("an answer without a Content-Length")?;
    let mut received = (head.len() - end) as u64;
    let mut wrong = 0u64;
    let mut tally = |bytes: &[u8], from: u64| {
        if check {
            wrong += bytes.iter().zip(from..).filter(|(b, k)| **b != PATTERN[(*k % 64) as usize]).count() as u64;
        }
    };
    tally(&head[end..], 0);
    while received < length {
        let most = ((length - received) as usize).min(buffer.len());
        let n = read_before(stream, &mut buffer[..most], deadline)?;
        if n == 0 {
            return Err(format!("the connection closed after {received} of {length} body bytes"));
        }
        tally(&buffer[..n], received);
        received += n as u64;
    }
    if received > length {
        return Err(format!("{} bytes past the body's {length}", received - length));
    }
    if wrong > 0 {
        return Err(format!("{wrong} of {length} body bytes differ from webd's pattern"));
    }
    Ok(length)
}

/// One read, waiting no later than `deadline`.
fn read_before(stream: &mut TcpStream, buffer: &mut [u8], deadline: Instant) -> Result<usize, String> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no answer before the time limit".into());
        }
        stream.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match stream.read(buffer) {
            Ok(n) => return Ok(n),
            Err(error)
                if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(error) => return Err(format!("reading: {error}")),
        }
    }
}

/// One transfer's figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Transfer {
    pub bytes: u64,
    pub elapsed: Duration,
}

impl Transfer {
    /// Megabytes (10^6 bytes) per second.
    pub fn megabytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }
}

/// GETs `path` (`bytes` long) from 127.0.0.1:`port` on a new connection, every byte checked
/// against webd's pattern, timed from the connect to the last byte.
pub fn download(port: u16, path: &str, bytes: u64, time_limit: Duration) -> Result<Transfer, String> {
    let deadline = Instant::now() + time_limit;
    let started = Instant::now();
    let mut stream = connect(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)), deadline)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| format!("sending the request: {e}"))?;
    let length = read_answer(&mut stream, &mut vec![0u8; 256 * 1024], deadline, true)?;
    if length != bytes {
        return Err(format!("GET {path}: {length} bytes, not {bytes}"));
    }
    Ok(Transfer { bytes, elapsed: started.elapsed() })
}

/// POSTs `bytes` of the pattern to 127.0.0.1:`port` at `/sink` on a new connection, timed
/// from the connect to the answer, which must be the byte count.
pub fn upload(port: u16, bytes: u64, time_limit: Duration) -> Result<Transfer, String> {
    let deadline = Instant::now() + time_limit;
    let started = Instant::now();
    let mut stream = connect(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)), deadline)?;
    let head =
        format!("POST /sink HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {bytes}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).map_err(|e| format!("sending the request head: {e}"))?;
    let chunk: Vec<u8> = (0..64 * 1024).map(|k| PATTERN[k % 64]).collect();
    let mut sent = 0u64;
    while sent < bytes {
        if Instant::now() >= deadline {
            return Err(format!("POST /sink: {sent} of {bytes} bytes sent at the time limit"));
        }
        let n = ((bytes - sent) as usize).min(chunk.len());
        stream.write_all(&chunk[..n]).map_err(|e| format!("POST /sink: sending after {sent} bytes: {e}"))?;
        sent += n as u64;
    }
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let n = read_before(&mut stream, &mut buffer, deadline)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").trim();
    if !text.starts_with("HTTP/1.1 200") || body != bytes.to_string() {
        return Err(format!("POST /sink: the answer {:?} does not count {bytes} bytes", text.trim()));
    }
    Ok(Transfer { bytes, elapsed: started.elapsed() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A stand-in for webd on the host: keep-alive, `/kib/1`, `/mib/1` and `/sink`.
    fn tiny_server() -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || serve(stream));
            }
        });
        port
    }

    fn serve(mut stream: TcpStream) {
        let mut input = Vec::new();
        let mut buffer = [0u8; 65536];
        loop {
            let Some(end) = find(&input, b"\r\n\r\n") else {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => input.extend_from_slice(&buffer[..n]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&input[..end]).into_owned();
            input.drain(..end + 4);
            let close = head.contains("Connection: close");
            let body: Vec<u8> = if head.starts_with("POST /sink") {
                let mut left: usize =
                    head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
                let taken = left.min(input.len());
                input.drain(..taken);
                left -= taken;
                while left > 0 {
                    let n = stream.read(&mut buffer[..left.min(65536)]).unwrap();
                    left -= n;
                }
                format!("{}\n", head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap()).into_bytes()
            } else {
                let length = if head.starts_with("GET /mib/1 ") { 1 << 20 } else { 1024 };
                (0..length).map(|k| PATTERN[k % 64]).collect()
            };
            let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            stream.write_all(answer.as_bytes()).unwrap();
            stream.write_all(&body).unwrap();
            if close {
                return;
            }
        }
    }

    #[test]
    fn closed_loop_clients_count_requests_and_latencies() {
        let port = tiny_server();
        for keep_alive in [true, false] {
            let load = Load {
                port,
                path: "/kib/1".into(),
                body_length: 1024,
                connections: 4,
                keep_alive,
                requests: 200,
                time_limit: Duration::from_secs(20),
            };
            let outcome = run(&load);
            assert_eq!((outcome.completed, outcome.errors), (200, 0), "{outcome:?}");
            assert_eq!(outcome.latencies_ns.len(), 200);
            assert!(!outcome.timed_out && outcome.requests_per_second().unwrap() > 0.0);
            assert!(outcome.warm_up_max_ns.unwrap() > 0.0);
        }
        // A wrong length is an error, counted, not a panic.
        let load = Load {
            port,
            path: "/kib/1".into(),
            body_length: 7,
            connections: 1,
            keep_alive: true,
            requests: 3,
            time_limit: Duration::from_secs(20),
        };
        let outcome = run(&load);
        // The untimed first request fails too, and is counted.
        assert_eq!((outcome.completed, outcome.errors), (0, 4));
        assert!(outcome.first_error.unwrap().contains("not 7"));
    }

    #[test]
    fn transfers_each_way() {
        let port = tiny_server();
        let down = download(port, "/mib/1", 1 << 20, Duration::from_secs(20)).unwrap();
        assert_eq!(down.bytes, 1 << 20);
        assert!(down.megabytes_per_second() > 0.0);
        assert!(download(port, "/mib/1", 5, Duration::from_secs(20)).unwrap_err().contains("not 5"));
        let up = upload(port, 3 << 20, Duration::from_secs(20)).unwrap();
        assert_eq!(up.bytes, 3 << 20);
    }

    #[test]
    fn nobody_listening_is_counted_within_the_time_limit() {
        let port = super::super::free_port().unwrap();
        let started = Instant::now();
        let load = Load {
            port,
            path: "/".into(),
            body_length: 1,
            connections: 2,
            keep_alive: false,
            requests: 1_000_000,
            time_limit: Duration::from_millis(300),
        };
        let outcome = run(&load);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(outcome.completed, 0);
        assert!(outcome.errors > 0 && outcome.timed_out);
    }
}
