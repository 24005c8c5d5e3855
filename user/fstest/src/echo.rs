//! `--echo-serve` and `--echo`: an echo between processes that may run on different cores
//! (the integration test puts the server and its clients on three), over an `AF_UNIX` socket
//! at a path or a TCP connection to an address and port (`127.0.0.1:7000`).

use crate::expect::{expect_bytes, Outcome, Step};
use crate::pattern::pattern;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// A connection of either kind.
trait Stream: Read + Write {
    fn shut_write(&self) -> io::Result<()>;
}

impl Stream for UnixStream {
    fn shut_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

impl Stream for TcpStream {
    fn shut_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

/// The TCP address `path` spells, if it spells one (else it is a unix socket's path).
fn inet(path: &Path) -> Option<SocketAddr> {
    path.to_str()?.parse().ok()
}

enum Listener {
    Unix(UnixListener),
    Inet(TcpListener),
}

impl Listener {
    fn bind(path: &Path) -> io::Result<Self> {
        match inet(path) {
            Some(address) => TcpListener::bind(address).map(Self::Inet),
            None => {
                let _ = std::fs::remove_file(path);
                UnixListener::bind(path).map(Self::Unix)
            }
        }
    }

    fn accept(&self) -> io::Result<Box<dyn Stream>> {
        Ok(match self {
            Self::Unix(listener) => Box::new(listener.accept()?.0),
            Self::Inet(listener) => Box::new(listener.accept()?.0),
        })
    }
}

fn connect(path: &Path) -> io::Result<Box<dyn Stream>> {
    Ok(match inet(path) {
        Some(address) => Box::new(TcpStream::connect(address)?),
        None => Box::new(UnixStream::connect(path)?),
    })
}

/// The bytes sent before the echo of them is read back (below a pipe's capacity, so neither
/// side can wait on the other).
const STEP: usize = 4096;
/// How long a client tries to reach a server that is not listening yet.
const PATIENCE: Duration = Duration::from_secs(10);

/// Serves `connections` connections at `path`, one after another: each gets back every
/// byte it sends, until it shuts its writing down.
pub fn serve(path: &Path, connections: usize, place: &str) -> Outcome {
    let listener = Listener::bind(path).step(format_args!("{place}: bind {}", path.display()))?;
    let mut total = 0u64;
    for _ in 0..connections {
        let mut stream = listener.accept().step(format_args!("{place}: accept"))?;
        let mut buffer = vec![0u8; STEP];
        loop {
            let count = stream.read(&mut buffer).step(format_args!("{place}: read"))?;
            if count == 0 {
                break;
            }
            stream.write_all(&buffer[..count]).step(format_args!("{place}: echo"))?;
            total += count as u64;
        }
    }
    if let Listener::Unix(listener) = listener {
        drop(listener);
        std::fs::remove_file(path).step(format_args!("{place}: unlink {}", path.display()))?;
    }
    Ok(format!("{place}: {connections} connections at {}, {total} bytes echoed", path.display()))
}

/// Sends the pattern of `seed` (`bytes` long) to the server at `path` a step at a time and
/// checks each step's echo.
pub fn send(path: &Path, bytes: usize, seed: u64, place: &str) -> Outcome {
    let started = Instant::now();
    let mut stream = loop {
        match connect(path) {
            Ok(stream) => break stream,
            Err(_) if started.elapsed() < PATIENCE => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => return Err(format!("{place}: connect to {}: {error}", path.display())),
        }
    };
    let data = pattern(seed, bytes);
    let mut echoed = vec![0u8; STEP];
    for chunk in data.chunks(STEP) {
        stream.write_all(chunk).step(format_args!("{place}: send"))?;
        stream.read_exact(&mut echoed[..chunk.len()]).step(format_args!("{place}: read the echo"))?;
        expect_bytes("the echo", &echoed[..chunk.len()], chunk)?;
    }
    stream.shut_write().step(format_args!("{place}: shutdown"))?;
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).step(format_args!("{place}: read to the end"))?;
    expect_bytes("what came after the last echo", &rest, b"")?;
    Ok(format!("{place}: {bytes} bytes of seed {seed} echoed by {}", path.display()))
}
