//! webd: a small HTTP/1.1 server for `cargo xtask bench net`, the same binary on Reef and Linux.
#![doc = include_str!("../README.md")]

mod http;
mod server;

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// The most worker processes.
const MOST_WORKERS: usize = 64;

const USAGE: &str = "\
usage: webd --port P [--workers N] [--body-size BYTES]

  --port P           listen on 0.0.0.0:P
  --workers N        processes accepting on the one listening socket: this one and N-1
                     forked children (default 1, at most 64)
  --body-size BYTES  the length of GET / (default 1024)

  GET /kib/N and GET /mib/N answer N KiB or N MiB of a fixed 64-byte pattern (streamed);
  POST /sink reads and drops the body and answers its byte count. Keep-alive as HTTP/1.1
  has it (Connection: close honoured). SIGTERM prints what each worker did and ends them.";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Options {
    port: u16,
    workers: usize,
    body_size: u64,
}

fn parse(arguments: &[String]) -> Result<rt::cli::Command<Options>, String> {
    let mut port = None;
    let mut options = Options { port: 0, workers: 1, body_size: 1024 };
    let mut words = arguments.iter();
    while let Some(word) = words.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let text = words.next().ok_or_else(|| format!("{name} needs a number"))?;
            text.parse().map_err(|_| format!("{name}: `{text}` is not a number"))
        };
        match word.as_str() {
            "--help" | "-h" => return Ok(rt::cli::Command::Help),
            "--port" => port = Some(value(word)?),
            "--workers" => options.workers = value(word)? as usize,
            "--body-size" => options.body_size = value(word)?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    options.port = match port {
        Some(port @ 1..=65535) => port as u16,
        Some(_) => return Err("--port takes 1 to 65535".into()),
        None => return Err("--port is needed".into()),
    };
    if !(1..=MOST_WORKERS).contains(&options.workers) {
        return Err(format!("--workers takes 1 to {MOST_WORKERS}"));
    }
    if options.body_size > http::MAX_BODY {
        return Err(format!("--body-size takes at most {} bytes", http::MAX_BODY));
    }
    Ok(rt::cli::Command::Run(options))
}

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let options = match rt::cli::options_or_exit("webd", USAGE, parse(&arguments)) {
        Ok(options) => options,
        Err(status) => return status,
    };
    rt::cli::exit_status("webd", "WEBD", run(&options))
}

/// Which worker this process is (0: the parent), for its SIGTERM line.
static WORKER: AtomicUsize = AtomicUsize::new(0);
/// The parent's children, which its SIGTERM handler ends and waits for (0: no child).
static CHILDREN: [AtomicI32; MOST_WORKERS] = [const { AtomicI32::new(0) }; MOST_WORKERS];

fn run(options: &Options) -> Result<(), String> {
    let address = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, options.port);
    let listener = TcpListener::bind(address).map_err(|error| format!("binding {address}: {error}"))?;
    // Every worker polls it: the losers of a race to accept get `EAGAIN`, not a block.
    listener.set_nonblocking(true).map_err(|error| format!("the listener: {error}"))?;
    on_sigterm(end_parent)?;
    for (worker, slot) in CHILDREN.iter().enumerate().take(options.workers).skip(1) {
        // SAFETY: the process has one thread (webd starts none), so the child may run any code.
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(format!("fork of worker {worker}: {}", std::io::Error::last_os_error()));
        }
        if child == 0 {
            WORKER.store(worker, Ordering::Relaxed);
            for slot in &CHILDREN {
                slot.store(0, Ordering::Relaxed);
            }
            on_sigterm(end_worker)?;
            return server::serve(&listener, options.body_size);
        }
        slot.store(child, Ordering::Relaxed);
    }
    println!("webd: listening on {address} with {} workers", options.workers);
    server::serve(&listener, options.body_size)
}

/// Installs `handler` for SIGTERM.
fn on_sigterm(handler: extern "C" fn(libc::c_int)) -> Result<(), String> {
    // SAFETY: a zeroed sigaction is a valid one (no flags, empty mask) before the handler is set.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler as libc::sighandler_t;
    // SAFETY: `action` is a valid sigaction; the handler only makes async-signal-safe calls
    // (write, kill, waitpid, _exit) and formats into a buffer on its stack.
    if unsafe { libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut()) } != 0 {
        return Err(format!("sigaction(SIGTERM): {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// A worker's SIGTERM: its line, then the end.
extern "C" fn end_worker(_: libc::c_int) {
    say_totals();
    // SAFETY: _exit is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(0) }
}

/// The parent's SIGTERM: the children end first (each prints its line), then its own line.
extern "C" fn end_parent(_: libc::c_int) {
    for slot in &CHILDREN {
        let child = slot.load(Ordering::Relaxed);
        if child > 0 {
            // SAFETY: kill and waitpid are async-signal-safe; `child` is this process's child.
            unsafe {
                libc::kill(child, libc::SIGTERM);
                libc::waitpid(child, std::ptr::null_mut(), 0);
            }
        }
    }
    say_totals();
    // SAFETY: _exit is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(0) }
}

/// `webd: worker W pid P: R requests, C connections, S bytes sent, B bytes received`, written
/// with one `write(2)` from a buffer on the stack (no allocation in a signal handler).
fn say_totals() {
    use std::fmt::Write as _;
    let mut line = StackLine { bytes: [0; 192], length: 0 };
    let _ = writeln!(
        line,
        "webd: worker {} pid {}: {} requests, {} connections, {} bytes sent, {} bytes received",
        WORKER.load(Ordering::Relaxed),
        std::process::id(),
        server::REQUESTS.load(Ordering::Relaxed),
        server::CONNECTIONS.load(Ordering::Relaxed),
        server::BYTES_SENT.load(Ordering::Relaxed),
        server::BYTES_RECEIVED.load(Ordering::Relaxed),
    );
    // SAFETY: the first `length` bytes of `bytes` are initialised; write is async-signal-safe.
    unsafe { libc::write(1, line.bytes.as_ptr().cast(), line.length) };
}

/// A line formatted in place, cut at its capacity.
struct StackLine {
    bytes: [u8; 192],
    length: usize,
}

impl std::fmt::Write for StackLine {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.length;
        let taken = text.len().min(room);
        self.bytes[self.length..self.length + taken].copy_from_slice(&text.as_bytes()[..taken]);
        self.length += taken;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn options() {
        let parsed = parse(&words("--port 80 --workers 4 --body-size 10")).unwrap();
        assert_eq!(parsed, rt::cli::Command::Run(Options { port: 80, workers: 4, body_size: 10 }));
        assert_eq!(
            parse(&words("--port 8080")).unwrap(),
            rt::cli::Command::Run(Options { port: 8080, workers: 1, body_size: 1024 })
        );
        assert!(parse(&words("")).unwrap_err().contains("--port is needed"));
        assert!(parse(&words("--port 0")).is_err());
        assert!(parse(&words("--port 80 --workers 0")).is_err());
        assert!(parse(&words("--port 80 --workers 65")).is_err());
        assert!(parse(&words("--port 80 --what")).is_err());
    }
}
