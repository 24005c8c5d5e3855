//! The client against the in-memory server: sessions, walks, I/O in chunks, listings, names.

mod common;

use common::{connect, connect_to, create_file, open, pattern, read_all};
use linux_raw_sys::errno::{
    EBADF, EEXIST, EINVAL, EISDIR, ENAMETOOLONG, ENOENT, ENOTDIR, ENOTEMPTY, EPERM, EPROTONOSUPPORT,
};
use linux_raw_sys::general::{AT_REMOVEDIR, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY, S_IFCHR, S_IFDIR, S_IFLNK, S_IFREG};
use ninep::client::{MAX_MSIZE, MIN_MSIZE};
use ninep::server::Server;
use ninep::wire::{GETATTR_BASIC, QID_DIRECTORY, QID_SYMLINK, SETATTR_MODE, SETATTR_SIZE};
use ninep::{Client, SetAttr};
use std::collections::BTreeSet;

#[test]
fn connect_settles_on_the_smaller_msize_and_attaches_the_root() {
    let mut server = Server::new();
    server.set_max_msize(4096);
    let (client, root) = Client::connect(server, 65536, b"tester", b"", 1000).unwrap();
    assert_eq!(client.msize(), 4096);
    assert_eq!(client.io_size(), 4096 - 24);
    assert_eq!(root.kind, QID_DIRECTORY);
    assert_eq!(client.fids_in_use(), 1, "the root");
    assert_eq!(client.transport().fids_in_use(), 1);
    assert_eq!(client.counters().calls_sent, 2, "Tversion, Tattach");

    let client = connect(8192);
    assert_eq!(client.msize(), 8192, "the server takes more");
}

#[test]
fn a_server_that_does_not_speak_9p2000_l_is_refused() {
    let mut server = Server::new();
    server.set_version(b"9P2000.u");
    assert_eq!(Client::connect(server, 8192, b"", b"", 0).err(), Some(EPROTONOSUPPORT));
    let mut server = Server::new();
    server.set_max_msize(100);
    assert_eq!(Client::connect(server, 8192, b"", b"", 0).err(), Some(EPROTONOSUPPORT), "msize too small to work");
    assert_eq!(Client::connect(Server::new(), MIN_MSIZE - 1, b"", b"", 0).err(), Some(EINVAL));
    assert_eq!(Client::connect(Server::new(), MAX_MSIZE + 1, b"", b"", 0).err(), Some(EINVAL));
}

#[test]
fn large_files_move_in_chunks_of_msize() {
    let mut client = connect(1024);
    let data = pattern(50_000);
    let before = client.counters().calls_sent;
    let fid = create_file(&mut client, &[], b"big", &data);
    // Twalk, Tlcreate, then 50 Twrites of 1000 bytes.
    assert_eq!(client.counters().calls_sent - before, 2 + 50);
    client.clunk(fid).unwrap();
    assert_eq!(client.transport().file_contents(b"/big").unwrap(), data);

    let fid = open(&mut client, &[b"big"], O_RDONLY).unwrap();
    let mut buffer = vec![0; 60_000];
    let before = client.counters().calls_sent;
    assert_eq!(client.read(fid, 0, &mut buffer), Ok(50_000));
    assert_eq!(&buffer[..50_000], &data[..]);
    // 50 full Treads, then one that comes back empty at the end.
    assert_eq!(client.counters().calls_sent - before, 51);
    let before = client.counters().calls_sent;
    assert_eq!(client.read(fid, 48_500, &mut buffer), Ok(1500), "a short read stops the loop");
    assert_eq!(client.counters().calls_sent - before, 2);
    assert_eq!(&buffer[..1500], &data[48_500..]);
    assert_eq!(client.read(fid, 70_000, &mut buffer), Ok(0), "past the end");
    assert_eq!(client.read(fid, u64::MAX, &mut buffer[..10]), Ok(0));
    assert_eq!(client.write(fid, 0, b"x"), Err(EBADF), "open read-only");
    client.clunk(fid).unwrap();
    assert_eq!(client.fids_in_use(), 1);
}

#[test]
fn writes_land_where_they_are_asked_to() {
    let mut client = connect(512);
    let fid = create_file(&mut client, &[], b"file", b"0123456789");
    assert_eq!(client.write(fid, 5, b"abc"), Ok(3));
    assert_eq!(client.write(fid, 15, b"end"), Ok(3), "past the end leaves a hole of zeros");
    client.clunk(fid).unwrap();
    assert_eq!(read_all(&mut client, &[b"file"]), b"01234abc89\0\0\0\0\0end");
    let fid = open(&mut client, &[b"file"], O_WRONLY | O_TRUNC).unwrap();
    assert_eq!(client.getattr(fid, GETATTR_BASIC).unwrap().size, 0, "O_TRUNC");
    client.clunk(fid).unwrap();
}

#[test]
fn a_directory_of_a_thousand_entries_lists_across_calls() {
    let mut client = connect(8192);
    let (directory, _) = client.walk(client.root(), &[]).unwrap();
    client.mkdir(directory, b"many", 0o755, 1000).unwrap();
    client.clunk(directory).unwrap();
    let mut expected = BTreeSet::new();
    for index in 0..1000 {
        let name = format!("entry-{index:04}").into_bytes();
        let fid = create_file(&mut client, &[b"many"], &name, b"");
        client.clunk(fid).unwrap();
        expected.insert(name);
    }
    let listing = open(&mut client, &[b"many"], O_RDONLY).unwrap();
    let mut names = Vec::new();
    let (mut offset, mut calls) = (0, 0);
    loop {
        let entries = client.readdir(listing, offset, 2048).unwrap();
        calls += 1;
        let Some(last) = entries.last() else { break };
        offset = last.offset;
        names.extend(entries.into_iter().map(|entry| entry.name));
    }
    assert!(calls > 10, "2 KiB holds about 60 entries: {calls} calls");
    assert_eq!(&names[..2], [b".".to_vec(), b"..".to_vec()]);
    let listed: BTreeSet<Vec<u8>> = names[2..].iter().cloned().collect();
    assert_eq!(listed.len(), names.len() - 2, "no entry twice");
    assert_eq!(listed, expected);
    client.clunk(listing).unwrap();
    assert_eq!(client.fids_in_use(), 1);
}

#[test]
fn a_listing_resumes_where_it_stopped_whatever_changes_meanwhile() {
    let mut server = Server::new();
    for name in ["a", "b", "c", "d"] {
        server.insert_file(format!("/dir/{name}").as_bytes(), b"").unwrap();
    }
    let mut client = connect_to(server, 8192);
    let listing = open(&mut client, &[b"dir"], O_RDONLY).unwrap();
    let first = client.readdir(listing, 0, 60).unwrap();
    let names: Vec<&[u8]> = first.iter().map(|entry| &entry.name[..]).collect();
    assert_eq!(names, [&b"."[..], b".."], "60 bytes hold two short entries");
    let (directory, _) = client.walk(client.root(), &[b"dir"]).unwrap();
    client.unlink_at(directory, b"a", 0).unwrap();
    let rest = client.readdir(listing, first[1].offset, 4096).unwrap();
    let names: Vec<&[u8]> = rest.iter().map(|entry| &entry.name[..]).collect();
    assert_eq!(names, [&b"b"[..], b"c", b"d"]);
    assert_eq!(client.readdir(listing, rest[2].offset, 4096), Ok(vec![]), "the end");
    assert_eq!(client.readdir(listing, 0, 10), Err(EINVAL), "no room for one entry");
    for fid in [listing, directory] {
        client.clunk(fid).unwrap();
    }
}

#[test]
fn long_walks_take_several_twalks_and_partial_ones_leave_nothing_behind() {
    let names: Vec<Vec<u8>> = (0..40).map(|depth| format!("d{depth}").into_bytes()).collect();
    let mut server = Server::new();
    server.insert_directory(&names.join(&b'/')).unwrap();
    let mut client = connect_to(server, 8192);
    let path: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let before = client.counters().calls_sent;
    let (fid, qids) = client.walk(client.root(), &path).unwrap();
    assert_eq!(client.counters().calls_sent - before, 3, "16 + 16 + 8 names");
    assert_eq!(qids.len(), 40);
    assert!(qids.iter().all(|qid| qid.kind == QID_DIRECTORY));
    assert_eq!(client.getattr(fid, GETATTR_BASIC).unwrap().qid, qids[39]);
    client.clunk(fid).unwrap();

    let mut wrong = path.clone();
    wrong[30] = b"missing";
    assert_eq!(client.walk(client.root(), &wrong), Err(ENOENT), "stops in the second Twalk");
    wrong[3] = b"missing";
    assert_eq!(client.walk(client.root(), &wrong), Err(ENOENT), "stops in the first Twalk");
    assert_eq!(client.walk(client.root(), &[b"missing"]), Err(ENOENT), "Rlerror");
    assert_eq!(client.fids_in_use(), 1);
    assert_eq!(client.transport().fids_in_use(), 1, "the partly walked fid was clunked");
}

#[test]
fn names_too_long_for_one_message_split_the_walk_or_are_refused() {
    let names: Vec<Vec<u8>> = (0..5).map(|index| vec![b'a' + index; 100]).collect();
    let mut server = Server::new();
    server.insert_directory(&names.join(&b'/')).unwrap();
    let mut client = connect_to(server, MIN_MSIZE);
    let path: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let before = client.counters().calls_sent;
    let (fid, qids) = client.walk(client.root(), &path).unwrap();
    assert_eq!((qids.len(), client.counters().calls_sent - before), (5, 3), "two names of 100 bytes a message");
    client.clunk(fid).unwrap();
    let long = [b'x'; 250];
    assert_eq!(client.walk(client.root(), &[&long]), Err(ENAMETOOLONG));
    assert_eq!(client.walk(client.root(), &[path[0], &long]), Err(ENAMETOOLONG), "after a first Twalk");
    let (directory, _) = client.walk(client.root(), &[]).unwrap();
    assert_eq!(client.mkdir(directory, &long, 0o755, 0), Err(ENAMETOOLONG));
    client.clunk(directory).unwrap();
    assert_eq!((client.fids_in_use(), client.transport().fids_in_use()), (1, 1));
}

#[test]
fn names_are_made_moved_linked_and_removed() {
    let mut client = connect(8192);
    let (root, _) = client.walk(client.root(), &[]).unwrap();
    let qid = client.mkdir(root, b"dir", 0o750, 1000).unwrap();
    assert_eq!(qid.kind, QID_DIRECTORY);
    assert_eq!(client.mkdir(root, b"dir", 0o750, 1000), Err(EEXIST));
    let file = create_file(&mut client, &[b"dir"], b"file", b"contents");
    let (directory, _) = client.walk(client.root(), &[b"dir"]).unwrap();
    let attr = client.getattr(directory, GETATTR_BASIC).unwrap();
    assert_eq!((attr.mode, attr.uid, attr.gid, attr.nlink), (S_IFDIR | 0o750, 1000, 1000, 2));

    // Hard links: the same file under two names.
    client.link(root, file, b"hard").unwrap();
    assert_eq!(client.getattr(file, GETATTR_BASIC).unwrap().nlink, 2);
    assert_eq!(read_all(&mut client, &[b"hard"]), b"contents");
    assert_eq!(client.link(root, directory, b"directory-link"), Err(EPERM));

    // Symbolic links.
    let qid = client.symlink(root, b"soft", b"dir/file", 1000).unwrap();
    assert_eq!(qid.kind, QID_SYMLINK);
    let (link, _) = client.walk(client.root(), &[b"soft"]).unwrap();
    assert_eq!(client.readlink(link).unwrap(), b"dir/file");
    assert_eq!(client.getattr(link, GETATTR_BASIC).unwrap().mode, S_IFLNK | 0o777);
    assert_eq!(client.readlink(file), Err(EINVAL), "not a link");

    // Renames: into another directory, over an existing file, not into itself.
    client.rename_at(root, b"hard", directory, b"moved").unwrap();
    assert_eq!(client.walk(client.root(), &[b"hard"]), Err(ENOENT));
    assert_eq!(read_all(&mut client, &[b"dir", b"moved"]), b"contents");
    let other = create_file(&mut client, &[], b"other", b"other");
    client.rename_at(root, b"other", directory, b"moved").unwrap();
    assert_eq!(read_all(&mut client, &[b"dir", b"moved"]), b"other", "replaced");
    assert_eq!(client.getattr(file, GETATTR_BASIC).unwrap().nlink, 1, "one name of the first file left");
    assert_eq!(client.rename_at(root, b"dir", directory, b"inside"), Err(EINVAL));
    assert_eq!(client.rename_at(root, b"soft", root, b"dir"), Err(EISDIR));
    client.mkdir(root, b"empty", 0o755, 0).unwrap();
    client.rename_at(root, b"empty", root, b"renamed").unwrap();
    assert_eq!(client.rename_at(root, b"renamed", root, b"dir"), Err(ENOTEMPTY));

    // Removal.
    assert_eq!(client.unlink_at(root, b"dir", 0), Err(EISDIR));
    assert_eq!(client.unlink_at(root, b"dir", AT_REMOVEDIR), Err(ENOTEMPTY));
    assert_eq!(client.unlink_at(root, b"soft", AT_REMOVEDIR), Err(ENOTDIR));
    client.unlink_at(directory, b"file", 0).unwrap();
    client.unlink_at(directory, b"moved", 0).unwrap();
    assert_eq!(client.getattr(file, GETATTR_BASIC).unwrap().nlink, 0, "unlinked, still open");
    assert_eq!(client.read(file, 0, &mut [0; 8]), Ok(8), "an open file outlives its names");
    client.unlink_at(root, b"dir", AT_REMOVEDIR).unwrap();
    client.unlink_at(root, b"renamed", AT_REMOVEDIR).unwrap();
    client.unlink_at(root, b"soft", 0).unwrap();
    assert_eq!(client.unlink_at(root, b"soft", 0), Err(ENOENT));
    for fid in [file, other, directory, link, root] {
        client.clunk(fid).unwrap();
    }
    assert_eq!(client.transport().node_count(), 1, "only the root is left");
}

#[test]
fn mknod_makes_a_device_node() {
    let mut client = connect(8192);
    let qid = client.mknod(client.root(), b"tty", S_IFCHR | 0o620, 4, 1, 5).unwrap();
    let (fid, qids) = client.walk(client.root(), &[b"tty"]).unwrap();
    assert_eq!(qids, [qid]);
    let attr = client.getattr(fid, GETATTR_BASIC).unwrap();
    assert_eq!((attr.mode, attr.rdev, attr.gid), (S_IFCHR | 0o620, (4 << 8) | 1, 5));
    client.clunk(fid).unwrap();
}

#[test]
fn setattr_truncates_extends_and_changes_the_mode() {
    let mut client = connect(4096);
    let fid = create_file(&mut client, &[], b"file", &pattern(10_000));
    client.setattr(fid, &SetAttr { valid: SETATTR_SIZE, size: 100, ..SetAttr::default() }).unwrap();
    let attr = client.getattr(fid, GETATTR_BASIC).unwrap();
    assert_eq!((attr.size, attr.blocks), (100, 1));
    client
        .setattr(fid, &SetAttr { valid: SETATTR_SIZE | SETATTR_MODE, size: 200, mode: 0o600, ..SetAttr::default() })
        .unwrap();
    assert_eq!(client.getattr(fid, GETATTR_BASIC).unwrap().mode, S_IFREG | 0o600);
    client.clunk(fid).unwrap();
    let contents = read_all(&mut client, &[b"file"]);
    assert_eq!(&contents[..100], &pattern(100)[..]);
    assert_eq!(&contents[100..], &[0; 100][..], "extended with zeros");
    let (root, _) = client.walk(client.root(), &[]).unwrap();
    assert_eq!(client.setattr(root, &SetAttr { valid: SETATTR_SIZE, ..SetAttr::default() }), Err(EISDIR));
    client.clunk(root).unwrap();
}

#[test]
fn statfs_and_fsync() {
    let mut client = connect(8192);
    let free = client.statfs(client.root()).unwrap().free_blocks;
    let fid = create_file(&mut client, &[], b"file", &pattern(40_960));
    client.fsync(fid).unwrap();
    let statfs = client.statfs(fid).unwrap();
    assert_eq!((statfs.block_size, statfs.name_length), (4096, 255));
    assert_eq!(free - statfs.free_blocks, 10);
    client.clunk(fid).unwrap();
}

#[test]
fn fids_are_reused_and_all_come_back() {
    let mut client = connect(8192);
    let fid = create_file(&mut client, &[], b"file", b"x");
    let (a, _) = client.walk(client.root(), &[b"file"]).unwrap();
    let (b, _) = client.walk(client.root(), &[]).unwrap();
    assert_eq!(client.fids_in_use(), 4);
    client.clunk(a).unwrap();
    client.clunk(fid).unwrap();
    let (c, _) = client.walk(client.root(), &[]).unwrap();
    let (d, _) = client.walk(client.root(), &[]).unwrap();
    assert_eq!(BTreeSet::from([c, d]), BTreeSet::from([a, fid]), "freed numbers come back first");
    for fid in [b, c, d] {
        client.clunk(fid).unwrap();
    }
    assert_eq!(client.clunk(d), Err(EBADF), "already clunked");
    assert_eq!((client.fids_in_use(), client.transport().fids_in_use()), (1, 1));
    assert!(client.open(client.root(), O_RDWR).is_err(), "a directory cannot be opened for writing");
}
