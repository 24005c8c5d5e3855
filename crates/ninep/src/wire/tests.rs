//! The wire against byte strings written out by hand from the 9P2000.L description, and its
//! properties: every message round-trips, no input makes decoding panic.

use super::codec::{Codec, Sample};
use super::*;
use alloc::vec;
use alloc::vec::Vec;
use proptest::prelude::*;

/// `size[4] type[1] tag[2]` and `body`, the size counted by hand.
fn message(message_type: u8, tag: u16, body: &[&[u8]]) -> Vec<u8> {
    let body: Vec<u8> = body.concat();
    let size = (7 + body.len()) as u32;
    [&size.to_le_bytes()[..], &[message_type], &tag.to_le_bytes(), &body].concat()
}

fn assert_request(request: Request<'_>, tag: u16, bytes: &[u8]) {
    let mut out = Vec::new();
    request.encode(tag, &mut out).unwrap();
    assert_eq!(out, bytes, "{request:?}");
    assert_eq!(Request::decode(bytes), Ok((tag, request)));
}

fn assert_reply(reply: Reply<'_>, tag: u16, bytes: &[u8]) {
    let mut out = Vec::new();
    reply.encode(tag, &mut out).unwrap();
    assert_eq!(out, bytes, "{reply:?}");
    assert_eq!(Reply::decode(bytes), Ok((tag, reply)));
}

#[test]
fn version_is_msize_and_the_protocol_string() {
    let bytes = [21, 0, 0, 0, 100, 0xFF, 0xFF, 0x00, 0x20, 0, 0, 8, 0, b'9', b'P', b'2', b'0', b'0', b'0', b'.', b'L'];
    assert_request(Request::Version { msize: 8192, version: b"9P2000.L" }, NO_TAG, &bytes);
    let mut reply = bytes;
    reply[4] = 101;
    assert_reply(Reply::Version { msize: 8192, version: b"9P2000.L" }, NO_TAG, &reply);
}

#[test]
fn attach_carries_the_numeric_uid_after_the_names() {
    let bytes = [
        27, 0, 0, 0, 104, 1, 0, // size, Tattach, tag 1
        0, 0, 0, 0, // fid 0
        0xFF, 0xFF, 0xFF, 0xFF, // afid NOFID
        4, 0, b'r', b'o', b'o', b't', // uname "root"
        0, 0, // aname ""
        0xF4, 0x01, 0, 0, // n_uname 500
    ];
    let request = Request::Attach { fid: Fid(0), afid: NO_FID, uname: b"root", aname: b"", n_uname: 500 };
    assert_request(request, 1, &bytes);
    // diod's sample session: Rattach qid (00000000002c1fac 0 'd').
    let bytes = [20, 0, 0, 0, 105, 1, 0, 0x80, 0, 0, 0, 0, 0xAC, 0x1F, 0x2C, 0, 0, 0, 0, 0];
    assert_reply(Reply::Attach { qid: Qid { kind: QID_DIRECTORY, version: 0, path: 0x2C_1FAC } }, 1, &bytes);
}

#[test]
fn walk_counts_names_and_qids() {
    let bytes = [22, 0, 0, 0, 110, 1, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 3, 0, b'f', b'o', b'o'];
    assert_request(Request::Walk { fid: Fid(1), new_fid: Fid(2), names: vec![b"foo"] }, 1, &bytes);
    let bytes = [22, 0, 0, 0, 111, 1, 0, 1, 0, 0, 0, 0, 0, 0xD1, 0x1B, 0x2C, 0, 0, 0, 0, 0];
    assert_eq!(Reply::decode(&bytes), Err(DecodeError::SizeMismatch), "21 bytes said to be 22");
    let bytes = [22, 0, 0, 0, 111, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0xD1, 0x1B, 0x2C, 0, 0, 0, 0, 0];
    assert_reply(Reply::Walk { qids: vec![Qid { kind: QID_FILE, version: 0, path: 0x2C_1BD1 }] }, 1, &bytes);
    // A clone: no names, no qids.
    assert_request(
        Request::Walk { fid: Fid(1), new_fid: Fid(2), names: vec![] },
        1,
        &[17, 0, 0, 0, 110, 1, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0],
    );
    assert_reply(Reply::Walk { qids: vec![] }, 1, &[9, 0, 0, 0, 111, 1, 0, 0, 0]);
}

#[test]
fn walk_of_more_than_sixteen_is_refused_both_ways() {
    let names = vec![&b"a"[..]; 17];
    let mut out = vec![1, 2, 3];
    let request = Request::Walk { fid: Fid(0), new_fid: Fid(1), names };
    assert_eq!(request.encode(1, &mut out), Err(EncodeError::TooManyElements));
    assert_eq!(out, [1, 2, 3], "a failed encoding leaves the buffer as it was");
    let names: Vec<&[u8]> = vec![b"a"; 17];
    let body: Vec<&[u8]> = [&[0, 0, 0, 0][..], &[1, 0, 0, 0], &[17, 0]]
        .into_iter()
        .chain(names.iter().map(|_| &[1, 0, b'a'][..]))
        .collect();
    assert_eq!(Request::decode(&message(110, 1, &body)), Err(DecodeError::TooManyElements));
}

#[test]
fn read_and_its_data() {
    // diod's sample: Tread tag 1 fid 5 offset 6 count 32768, Rread count 6 "hello\n".
    let bytes = [23, 0, 0, 0, 116, 1, 0, 5, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0];
    assert_request(Request::Read { fid: Fid(5), offset: 6, count: 32768 }, 1, &bytes);
    let bytes = [17, 0, 0, 0, 117, 1, 0, 6, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', b'\n'];
    assert_reply(Reply::Read { data: b"hello\n" }, 1, &bytes);
    let mut lying = bytes;
    lying[7] = 7;
    assert_eq!(Reply::decode(&lying), Err(DecodeError::Truncated), "count beyond the message");
    let bytes = [23, 0, 0, 0, 118, 1, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0];
    assert_eq!(Request::decode(&bytes), Err(DecodeError::Truncated), "Twrite without its data");
}

#[test]
fn getattr_is_the_whole_stat() {
    let request = [19, 0, 0, 0, 24, 1, 0, 3, 0, 0, 0, 0xFF, 0x07, 0, 0, 0, 0, 0, 0];
    assert_request(Request::Getattr { fid: Fid(3), request_mask: GETATTR_BASIC }, 1, &request);
    let time = |seconds: u64, nanoseconds: u64| [seconds.to_le_bytes(), nanoseconds.to_le_bytes()].concat();
    let bytes = message(
        25,
        1,
        &[
            &0x7FFu64.to_le_bytes(),                              // valid
            &[0x00, 0, 0, 0, 0, 0xD1, 0x1B, 0x2C, 0, 0, 0, 0, 0], // qid
            &0o100644u32.to_le_bytes(),                           // mode
            &500u32.to_le_bytes(),                                // uid
            &501u32.to_le_bytes(),                                // gid
            &1u64.to_le_bytes(),                                  // nlink
            &0u64.to_le_bytes(),                                  // rdev
            &6u64.to_le_bytes(),                                  // size
            &4096u64.to_le_bytes(),                               // blksize
            &8u64.to_le_bytes(),                                  // blocks
            &time(1_297_069_115, 1),                              // atime
            &time(1_297_069_116, 2),                              // mtime
            &time(1_297_069_117, 3),                              // ctime
            &time(0, 0),                                          // btime
            &7u64.to_le_bytes(),                                  // gen
            &9u64.to_le_bytes(),                                  // data_version
        ],
    );
    assert_eq!(bytes.len(), 160);
    let attr = Attr {
        valid: GETATTR_BASIC,
        qid: Qid { kind: QID_FILE, version: 0, path: 0x2C_1BD1 },
        mode: 0o100644,
        uid: 500,
        gid: 501,
        nlink: 1,
        rdev: 0,
        size: 6,
        blksize: 4096,
        blocks: 8,
        atime: Timestamp { seconds: 1_297_069_115, nanoseconds: 1 },
        mtime: Timestamp { seconds: 1_297_069_116, nanoseconds: 2 },
        ctime: Timestamp { seconds: 1_297_069_117, nanoseconds: 3 },
        btime: Timestamp::default(),
        gen: 7,
        data_version: 9,
    };
    assert_reply(Reply::Getattr { attr }, 1, &bytes);
    assert_eq!(Reply::decode(&[&bytes[..], &[0]].concat()), Err(DecodeError::SizeMismatch));
    let mut trailing = [&bytes[..], &[0]].concat();
    trailing[0] += 1;
    assert_eq!(Reply::decode(&trailing), Err(DecodeError::TrailingBytes));
}

#[test]
fn readdir_entries_as_diod_sends_them() {
    let request = [23, 0, 0, 0, 40, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xD0, 0xFF, 0, 0];
    assert_request(Request::Readdir { fid: Fid(2), offset: 0, count: 65488 }, 1, &request);
    // The first two entries of diod's sample session: "." and "..".
    let data = [
        0x80, 0, 0, 0, 0, 0xAC, 0x1F, 0x2C, 0, 0, 0, 0, 0, // qid
        1, 0, 0, 0, 0, 0, 0, 0, // offset
        4, 1, 0, b'.', // DT_DIR, "."
        0x80, 0, 0, 0, 0, 0xFF, 0xFF, 0x25, 0, 0, 0, 0, 0, // qid
        0x26, 0x58, 0xEA, 0, 0, 0, 0, 0, // offset
        4, 2, 0, b'.', b'.', // DT_DIR, ".."
    ];
    let entries = DirEntry::decode_all(&data).unwrap();
    let dot = DirEntry {
        qid: Qid { kind: QID_DIRECTORY, version: 0, path: 0x2C_1FAC },
        offset: 1,
        kind: 4,
        name: b".".to_vec(),
    };
    let dot_dot = DirEntry {
        qid: Qid { kind: QID_DIRECTORY, version: 0, path: 0x25_FFFF },
        offset: 0xEA_5826,
        kind: 4,
        name: b"..".to_vec(),
    };
    assert_eq!(entries, [dot.clone(), dot_dot.clone()]);
    let mut encoded = Vec::new();
    dot.encode(&mut encoded).unwrap();
    dot_dot.encode(&mut encoded).unwrap();
    assert_eq!(encoded, data);
    assert_eq!(dot.encoded_len() + dot_dot.encoded_len(), data.len());
    assert_eq!(DirEntry::decode_all(&data[..data.len() - 1]), Err(DecodeError::Truncated), "half an entry");
    let bytes = message(41, 1, &[&(data.len() as u32).to_le_bytes(), &data]);
    assert_reply(Reply::Readdir { data: &data }, 1, &bytes);
}

#[test]
fn lerror_and_the_messages_without_a_body() {
    assert_reply(Reply::Lerror { ecode: 2 }, 1, &[11, 0, 0, 0, 7, 1, 0, 2, 0, 0, 0]);
    assert_reply(Reply::Clunk {}, 9, &[7, 0, 0, 0, 121, 9, 0]);
    assert_request(Request::Clunk { fid: Fid(2) }, 1, &[11, 0, 0, 0, 120, 1, 0, 2, 0, 0, 0]);
    assert_request(Request::Flush { old_tag: 3 }, 4, &[9, 0, 0, 0, 108, 4, 0, 3, 0]);
}

#[test]
fn the_framing_is_checked_before_anything_else() {
    assert_eq!(Request::decode(&[]), Err(DecodeError::Truncated));
    assert_eq!(Request::decode(&[4, 0, 0, 0]), Err(DecodeError::Truncated), "no type");
    assert_eq!(Request::decode(&[7, 0, 0, 0, 120, 1]), Err(DecodeError::SizeMismatch));
    assert_eq!(Request::decode(&[7, 0, 0, 0, 121, 1, 0]), Err(DecodeError::UnknownType(121)), "an R-type");
    assert_eq!(Reply::decode(&[7, 0, 0, 0, 6, 1, 0]), Err(DecodeError::UnknownType(6)), "Tlerror is no reply");
    assert_eq!(Reply::decode(&[7, 0, 0, 0, 7, 1, 0]), Err(DecodeError::Truncated), "Rlerror without its code");
    let long_name = vec![b'x'; 70_000];
    let request = Request::Mkdir { directory: Fid(1), name: &long_name, mode: 0, gid: 0 };
    assert_eq!(request.encode(1, &mut Vec::new()), Err(EncodeError::StringTooLong));
}

/// Numbers and a byte pool for [`Sample`].
fn sample_source() -> impl Strategy<Value = (Vec<u64>, Vec<u8>)> {
    (prop::collection::vec(any::<u64>(), 1..40), prop::collection::vec(any::<u8>(), 0..700))
}

/// Every message of both directions, encoded, with the fields drawn from the source.
fn encoded_samples(numbers: &[u64], pool: &[u8], tag: u16) -> Vec<Vec<u8>> {
    let mut source = Sample::new(numbers, pool);
    let requests = Request::samples(&mut source).into_iter().map(|request| {
        let mut out = Vec::new();
        request.encode(tag, &mut out).map(|()| out)
    });
    let replies = Reply::samples(&mut source).into_iter().map(|reply| {
        let mut out = Vec::new();
        reply.encode(tag, &mut out).map(|()| out)
    });
    requests.chain(replies).collect::<Result<_, _>>().unwrap()
}

/// Decodes `bytes` both ways; what decodes must encode back to the same bytes.
fn decode_both_ways(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok((tag, request)) = Request::decode(bytes) {
        let mut out = Vec::new();
        request.encode(tag, &mut out).unwrap();
        prop_assert_eq!(&out[..], bytes);
    }
    if let Ok((tag, reply)) = Reply::decode(bytes) {
        let mut out = Vec::new();
        reply.encode(tag, &mut out).unwrap();
        prop_assert_eq!(&out[..], bytes);
        if let Reply::Readdir { data } = reply {
            let _ = DirEntry::decode_all(data);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn every_request_round_trips((numbers, pool) in sample_source(), tag in any::<u16>()) {
        let mut source = Sample::new(&numbers, &pool);
        for request in Request::samples(&mut source) {
            let mut out = vec![0xAA];
            request.encode(tag, &mut out).unwrap();
            prop_assert_eq!(&out[1..5], &(out.len() as u32 - 1).to_le_bytes());
            prop_assert_eq!(out[5], request.message_type());
            prop_assert_eq!(Request::decode(&out[1..]), Ok((tag, request)));
        }
    }

    #[test]
    fn every_reply_round_trips((numbers, pool) in sample_source(), tag in any::<u16>()) {
        let mut source = Sample::new(&numbers, &pool);
        for reply in Reply::samples(&mut source) {
            let mut out = Vec::new();
            reply.encode(tag, &mut out).unwrap();
            prop_assert_eq!(Reply::decode(&out), Ok((tag, reply)));
        }
    }

    #[test]
    fn listings_round_trip((numbers, pool) in sample_source(), count in 0usize..20) {
        let mut source = Sample::new(&numbers, &pool);
        let entries: Vec<DirEntry> = (0..count).map(|_| DirEntry::sample(&mut source)).collect();
        let mut data = Vec::new();
        for entry in &entries {
            entry.encode(&mut data).unwrap();
        }
        prop_assert_eq!(data.len(), entries.iter().map(DirEntry::encoded_len).sum::<usize>());
        prop_assert_eq!(DirEntry::decode_all(&data), Ok(entries));
    }

    #[test]
    fn arbitrary_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        decode_both_ways(&bytes)?;
        let _ = DirEntry::decode_all(&bytes);
        // With a size field that matches, decoding gets past the framing.
        if bytes.len() >= 7 {
            let size = bytes.len() as u32;
            bytes[..4].copy_from_slice(&size.to_le_bytes());
            decode_both_ways(&bytes)?;
        }
    }

    #[test]
    fn damaged_messages_never_panic(
        (numbers, pool) in sample_source(),
        cut in any::<usize>(),
        flips in prop::collection::vec((any::<usize>(), 1u8..), 0..4),
        fix_size in any::<bool>(),
    ) {
        for mut bytes in encoded_samples(&numbers, &pool, 1) {
            bytes.truncate(cut % (bytes.len() + 1));
            for &(at, mask) in &flips {
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] ^= mask;
                }
            }
            if fix_size && bytes.len() >= 4 {
                let size = bytes.len() as u32;
                bytes[..4].copy_from_slice(&size.to_le_bytes());
            }
            decode_both_ways(&bytes)?;
        }
    }
}
