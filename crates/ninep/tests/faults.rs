//! Faults: the share gone, garbage, over-long and mistagged replies, arbitrary replies. Each is
//! the errno the client documents, and the client goes on afterwards.

mod common;

use common::{connect, create_file, read_all};
use linux_raw_sys::errno::{EBADF, EIO, ENODEV, ENOENT};
use linux_raw_sys::general::O_RDONLY;
use ninep::server::Server;
use ninep::wire::GETATTR_BASIC;
use ninep::{Client, Errno, SetAttr, Transport};
use proptest::prelude::*;

#[test]
fn a_vanished_share_fails_every_call_with_its_errno() {
    let mut client = connect(8192);
    let file = create_file(&mut client, &[], b"file", b"contents");
    let counters = client.counters();
    client.transport_mut().fail_all(ENODEV);
    assert_eq!(client.getattr(file, GETATTR_BASIC), Err(ENODEV));
    assert_eq!(client.read(file, 0, &mut [0; 8]), Err(ENODEV));
    assert_eq!(client.walk(client.root(), &[b"file"]), Err(ENODEV));
    assert_eq!(client.clunk(file), Err(ENODEV));
    assert_eq!(client.fids_in_use(), 1, "fids are freed even so");
    client.transport_mut().fail_all(EIO);
    assert_eq!(client.statfs(client.root()), Err(EIO));
    let after = client.counters();
    assert_eq!((after.errors_from_server, after.malformed_replies), (counters.errors_from_server, 0));
    client.transport_mut().restore();
    // The file's fid never reached the server's clunk: its number is not used again.
    assert_eq!(read_all(&mut client, &[b"file"]), b"contents", "the share is back");
    assert_eq!((client.fids_in_use(), client.transport().fids_in_use()), (1, 2));
}

/// Each damaging fault: the next call is `EIO` and counted, the one after works.
fn check_fault(inject: fn(&mut Server)) {
    let mut client = connect(8192);
    let file = create_file(&mut client, &[], b"file", b"contents");
    inject(client.transport_mut());
    assert_eq!(client.getattr(file, GETATTR_BASIC), Err(EIO));
    assert_eq!(client.counters().malformed_replies, 1);
    assert_eq!(client.getattr(file, GETATTR_BASIC).unwrap().size, 8, "the next call works");

    // A walk whose reply is lost: the server made the fid, the client clunks it.
    inject(client.transport_mut());
    assert_eq!(client.walk(client.root(), &[b"file"]), Err(EIO));
    assert_eq!((client.fids_in_use(), client.transport().fids_in_use()), (2, 2), "the root and the file");

    // A read whose reply is lost: nothing read, and the next read reads.
    inject(client.transport_mut());
    assert_eq!(client.read(file, 0, &mut [0; 8]), Err(EIO));
    let mut buffer = [0; 8];
    assert_eq!(client.read(file, 0, &mut buffer), Ok(8));
    assert_eq!(&buffer, b"contents");
    client.clunk(file).unwrap();
    assert_eq!(client.counters().malformed_replies, 3);
    assert_eq!(client.counters().errors_from_server, 0);
}

#[test]
fn a_garbage_reply_is_eio() {
    check_fault(Server::malformed_next);
}

#[test]
fn a_reply_longer_than_the_buffer_is_eio() {
    check_fault(Server::too_long_next);
}

#[test]
fn a_reply_with_another_tag_is_eio() {
    check_fault(Server::wrong_tag_next);
}

#[test]
fn server_errors_are_counted_and_returned_as_they_are() {
    let mut client = connect(8192);
    assert_eq!(client.walk(client.root(), &[b"missing"]), Err(ENOENT));
    assert_eq!(client.setattr(ninep::Fid(77), &SetAttr::default()), Err(EBADF));
    let counters = client.counters();
    assert_eq!((counters.errors_from_server, counters.malformed_replies), (2, 0));
    assert_eq!(client.fids_in_use(), 1);
}

/// Answers Tversion and Tattach as a server would, then each call with the next of a list of
/// arbitrary replies, claiming arbitrary lengths (some beyond the buffer).
struct Chaos {
    server: Server,
    replies: Vec<(Vec<u8>, usize)>,
}

impl Transport for Chaos {
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, Errno> {
        if matches!(request.get(4), Some(100 | 104)) {
            return self.server.call(request, reply);
        }
        let (bytes, claimed) = self.replies.pop().ok_or(ENODEV)?;
        let fits = bytes.len().min(reply.len());
        reply[..fits].copy_from_slice(&bytes[..fits]);
        Ok(claimed)
    }
}

/// A reply: random bytes, or a plausible header of a random type and this session's first
/// tags, with a random body.
fn arbitrary_reply() -> impl Strategy<Value = (Vec<u8>, usize)> {
    let body = prop::collection::vec(any::<u8>(), 0..200);
    let header = (
        prop::sample::select(vec![7u8, 9, 13, 15, 17, 19, 23, 25, 27, 41, 51, 71, 73, 75, 77, 111, 117, 119, 121]),
        1u16..20,
    );
    let framed = (header, body.clone()).prop_map(|((message_type, tag), body)| {
        let size = (7 + body.len()) as u32;
        let bytes = [&size.to_le_bytes()[..], &[message_type], &tag.to_le_bytes(), &body].concat();
        let length = bytes.len();
        (bytes, length)
    });
    prop_oneof![framed, (body, 0usize..300)]
}

proptest! {
    #[test]
    fn arbitrary_replies_never_panic_the_client(replies in prop::collection::vec(arbitrary_reply(), 0..40)) {
        let chaos = Chaos { server: Server::new(), replies };
        let (mut client, _) = Client::connect(chaos, 256, b"", b"", 0).unwrap();
        let root = client.root();
        let mut buffer = vec![0; 1000];
        for round in 0..4 {
            let walked = client.walk(root, &[b"a", b"b"]);
            let fid = walked.as_ref().map_or(root, |(fid, _)| *fid);
            let _ = client.open(fid, O_RDONLY);
            let _ = client.read(fid, 0, &mut buffer);
            let _ = client.write(fid, 0, &buffer[..round * 300]);
            let _ = client.readdir(fid, 0, 200);
            let _ = client.getattr(fid, GETATTR_BASIC);
            let _ = client.readlink(fid);
            let _ = client.statfs(fid);
            let _ = client.create(fid, b"new", 0, 0o644, 0);
            if walked.is_ok() {
                let _ = client.clunk(fid);
            }
        }
        prop_assert_eq!(client.fids_in_use(), 1, "every fid given back");
    }
}
