//! What the client tests share: a session with a fresh test server, files made through it.
#![allow(dead_code)] // Each test file uses its own part.

use linux_raw_sys::general::{O_RDONLY, O_RDWR};
use ninep::server::Server;
use ninep::{Client, Errno, Fid};

/// A session with `msize` over a new, empty server.
pub fn connect(msize: u32) -> Client<Server> {
    connect_to(Server::new(), msize)
}

/// A session with `msize` over `server`, as uid 1000.
pub fn connect_to(server: Server, msize: u32) -> Client<Server> {
    let (client, _) = Client::connect(server, msize, b"tester", b"", 1000).unwrap();
    client
}

/// Creates `name` in the directory `directory` leads to, writes `contents`, and gives the
/// open fid.
pub fn create_file(client: &mut Client<Server>, directory: &[&[u8]], name: &[u8], contents: &[u8]) -> Fid {
    let (fid, _) = client.walk(client.root(), directory).unwrap();
    client.create(fid, name, O_RDWR, 0o644, 1000).unwrap();
    assert_eq!(client.write(fid, 0, contents), Ok(contents.len()));
    fid
}

/// A new fid for `path`, open with `flags`; nothing is left held when that fails.
pub fn open(client: &mut Client<Server>, path: &[&[u8]], flags: u32) -> Result<Fid, Errno> {
    let (fid, _) = client.walk(client.root(), path)?;
    match client.open(fid, flags) {
        Ok(_) => Ok(fid),
        Err(errno) => {
            client.clunk(fid).unwrap();
            Err(errno)
        }
    }
}

/// The whole contents of the file at `path`.
pub fn read_all(client: &mut Client<Server>, path: &[&[u8]]) -> Vec<u8> {
    let fid = open(client, path, O_RDONLY).unwrap();
    let mut contents = Vec::new();
    let mut buffer = vec![0; 3000];
    loop {
        let count = client.read(fid, contents.len() as u64, &mut buffer).unwrap();
        if count == 0 {
            break;
        }
        contents.extend_from_slice(&buffer[..count]);
    }
    client.clunk(fid).unwrap();
    contents
}

/// Bytes that differ from one offset to the next, so a misplaced chunk shows.
pub fn pattern(length: usize) -> Vec<u8> {
    (0..length).map(|index| (index * 7 + index / 251) as u8).collect()
}
