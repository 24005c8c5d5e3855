//! The two ends a round trip travels between: two pipes, a TCP connection over 127.0.0.1, or
//! a unix stream socket pair.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;

/// What carries the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// Two pipes, one each way (the first figure this program gave).
    Pipe,
    /// A TCP connection over 127.0.0.1: the server accepts on a port the system chose, the
    /// client connects to it; `TCP_NODELAY` on both ends, so no write waits for another.
    Tcp,
    /// `socketpair(AF_UNIX, SOCK_STREAM)`.
    Unix,
}

impl Over {
    pub fn parse(word: &str) -> Result<Self, String> {
        match word {
            "pipe" => Ok(Self::Pipe),
            "tcp" => Ok(Self::Tcp),
            "unix" => Ok(Self::Unix),
            other => Err(format!("--over takes pipe, tcp or unix, not `{other}`")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Pipe => "pipe",
            Self::Tcp => "tcp",
            Self::Unix => "unix",
        }
    }
}

/// One end: what it reads comes from the other end, what it writes goes there.
pub trait End: Read + Write {}

impl End for TcpStream {}
impl End for UnixStream {}

/// One end of the two pipes: it reads one and writes the other.
struct Pipes {
    incoming: File,
    outgoing: File,
}

impl Read for Pipes {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.incoming.read(buffer)
    }
}

impl Write for Pipes {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.outgoing.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.outgoing.flush()
    }
}

impl End for Pipes {}

/// What the two processes hold across the fork, before each takes its own end: made before
/// the fork so that both inherit it.
pub enum Rendezvous {
    /// Each end's (incoming, outgoing) pipe halves.
    Pipes { server: (File, File), client: (File, File) },
    /// Listening on 127.0.0.1 at this port.
    Tcp(TcpListener, u16),
    /// The server's end, the client's end.
    Unix(UnixStream, UnixStream),
}

impl Rendezvous {
    pub fn prepare(over: Over) -> Result<Self, String> {
        match over {
            Over::Pipe => {
                let pipe = || {
                    rt::pipe()
                        .map(|(read, write)| (File::from(read), File::from(write)))
                        .map_err(|e| format!("pipe: {e}"))
                };
                let (requests_in, requests_out) = pipe()?;
                let (answers_in, answers_out) = pipe()?;
                Ok(Self::Pipes { server: (requests_in, answers_out), client: (answers_in, requests_out) })
            }
            Over::Tcp => {
                let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .map_err(|e| format!("listening on 127.0.0.1 port 0: {e}"))?;
                let port = listener.local_addr().map_err(|e| format!("the listener's address: {e}"))?.port();
                Ok(Self::Tcp(listener, port))
            }
            Over::Unix => {
                let (server, client) = UnixStream::pair().map_err(|e| format!("socketpair(AF_UNIX): {e}"))?;
                Ok(Self::Unix(server, client))
            }
        }
    }

    /// The server's end, in the server process: for TCP the connection it accepts.
    pub fn server_end(self) -> Result<Box<dyn End>, String> {
        match self {
            Self::Pipes { server: (incoming, outgoing), .. } => Ok(Box::new(Pipes { incoming, outgoing })),
            Self::Tcp(listener, _) => {
                let (stream, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
                stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY on the accepted connection: {e}"))?;
                Ok(Box::new(stream))
            }
            Self::Unix(server, _) => Ok(Box::new(server)),
        }
    }

    /// The client's end, in the client process: for TCP a connection to the listener's port
    /// (the client lets go of its copy of the listener; the server's stays).
    pub fn client_end(self) -> Result<Box<dyn End>, String> {
        match self {
            Self::Pipes { client: (incoming, outgoing), .. } => Ok(Box::new(Pipes { incoming, outgoing })),
            Self::Tcp(listener, port) => {
                drop(listener);
                let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
                let stream = TcpStream::connect(address).map_err(|e| format!("connecting to {address}: {e}"))?;
                stream.set_nodelay(true).map_err(|e| format!("TCP_NODELAY on the connection: {e}"))?;
                Ok(Box::new(stream))
            }
            Self::Unix(_, client) => Ok(Box::new(client)),
        }
    }
}
