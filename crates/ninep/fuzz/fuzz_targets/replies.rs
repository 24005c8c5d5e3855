//! Fuzz target: arbitrary bytes as messages both ways, and as a server's replies to a client.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ninep::wire::{DirEntry, Qid, Reply, Request, VERSION_9P2000_L};
use ninep::{Client, Errno, Transport};

/// Answers Tversion and Tattach properly, then each call with the next piece of the input:
/// a length byte, then that many bytes.
struct Replies<'a>(&'a [u8]);

impl Transport for Replies<'_> {
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, Errno> {
        let tag = u16::from_le_bytes([request[5], request[6]]);
        let mut out = Vec::new();
        let answer = match request[4] {
            100 => Some(Reply::Version { msize: 512, version: VERSION_9P2000_L }),
            104 => Some(Reply::Attach { qid: Qid::default() }),
            _ => None,
        };
        if let Some(answer) = answer {
            answer.encode(tag, &mut out).unwrap();
        } else {
            let (&length, rest) = self.0.split_first().ok_or(5u32)?;
            let (piece, rest) = rest.split_at(usize::from(length).min(rest.len()));
            out.extend_from_slice(piece);
            self.0 = rest;
        }
        let fits = out.len().min(reply.len());
        reply[..fits].copy_from_slice(&out[..fits]);
        Ok(out.len())
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = Request::decode(data);
    let _ = Reply::decode(data);
    let _ = DirEntry::decode_all(data);
    let (mut client, _) = Client::connect(Replies(data), 512, b"", b"", 0).unwrap();
    let root = client.root();
    let mut buffer = [0; 2000];
    if let Ok((fid, _)) = client.walk(root, &[b"a", b"b"]) {
        let _ = client.open(fid, 0);
        let _ = client.read(fid, 0, &mut buffer);
        let _ = client.write(fid, 0, &buffer);
        let _ = client.readdir(fid, 0, 400);
        let _ = client.getattr(fid, !0);
        let _ = client.readlink(fid);
        let _ = client.clunk(fid);
    }
    assert_eq!(client.fids_in_use(), 1);
});
