//! Host directories shared over 9P: every name and contents operation of tmpfs on a share,
//! the cache rule, and a server that misbehaves, against ninep's in-memory server.

mod common;

use common::{archive_bytes, Cores, Processes};
use initramfs::Archive;
use linux_raw_sys::errno::{EEXIST, EIO, ENOENT, ENOTEMPTY};
use ninep::server::Server;
use ninep::Transport;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use vfs::{Context, Errno, HeapPageStore, NodeId, ProcFile, Vfs, CACHE_LIFETIME, RENAME_NOREPLACE};

/// The clock of these tests: still unless a test moves it, so that the cache's lifetime is
/// the test's to cross.
static NOW: AtomicU64 = AtomicU64::new(1_700_000_000_000_000_000);

fn clock() -> u64 {
    NOW.load(Ordering::Relaxed)
}

/// The server, reachable by the test while the VFS holds it.
#[derive(Clone)]
struct Shared(Arc<Mutex<Server>>);

impl Transport for Shared {
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, Errno> {
        self.0.lock().unwrap().call(request, reply)
    }
}

struct Mounted {
    vfs: Vfs,
    server: Shared,
    context: Context,
}

/// A VFS with a share of `server` at `/host`.
fn mounted(server: Server) -> Mounted {
    let bytes: &'static [u8] = Box::leak(archive_bytes().into_boxed_slice());
    let archive = Archive::parse(bytes).unwrap();
    let processes = Processes(Arc::new(Mutex::new(vec![1])), Arc::default());
    let pages = Box::new(HeapPageStore::new());
    let mut vfs = Vfs::new(Some(archive), pages, 64, clock, Box::new(processes), Arc::new(Cores::new(2)));
    let server = Shared(Arc::new(Mutex::new(server)));
    vfs.mount_share(b"/host", b"share0", Box::new(server.clone()), 8192).unwrap();
    let context = Context { pid: 1, cwd: vfs.root(), root: vfs.root(), credentials: vfs::Credentials::root() };
    Mounted { vfs, server, context }
}

fn populated() -> Server {
    let mut server = Server::new();
    server.insert_directory(b"/dir").unwrap();
    server.insert_file(b"/dir/b.txt", b"bee\n").unwrap();
    server.insert_file(b"/a.txt", b"hello from the host\n").unwrap();
    server.insert_symlink(b"/link", b"dir/b.txt").unwrap();
    server
}

impl Mounted {
    fn resolve(&self, path: &str) -> Result<NodeId, Errno> {
        self.vfs.resolve(&self.context, None, path.as_bytes(), true)
    }

    fn parent(&self, path: &str) -> (NodeId, Vec<u8>) {
        self.vfs.resolve_parent(&self.context, None, path.as_bytes()).unwrap()
    }

    fn contents(&self, path: &str) -> Result<Vec<u8>, Errno> {
        let node = self.resolve(path)?;
        let mut buffer = vec![0; self.vfs.stat(node)?.size as usize + 1];
        let read = self.vfs.read(node, 0, &mut buffer)?;
        buffer.truncate(read);
        Ok(buffer)
    }

    fn names(&self, path: &str) -> Vec<Vec<u8>> {
        let node = self.resolve(path).unwrap();
        let mut names = Vec::new();
        let mut cursor = 0;
        while let Some((entry, next)) = self.vfs.read_directory(node, cursor).unwrap() {
            names.push(entry.name);
            cursor = next;
        }
        names
    }

    fn host(&self) -> std::sync::MutexGuard<'_, Server> {
        self.server.0.lock().unwrap()
    }
}

#[test]
fn a_share_is_read_listed_and_named_in_proc_mounts() {
    let share = mounted(populated());
    assert_eq!(share.contents("/host/a.txt").unwrap(), b"hello from the host\n");
    assert_eq!(share.contents("/host/link").unwrap(), b"bee\n");
    assert_eq!(share.contents("/host/dir/../a.txt").unwrap(), b"hello from the host\n");
    assert_eq!(share.resolve("/host/missing"), Err(ENOENT));
    let mut names = share.names("/host");
    names.sort();
    assert_eq!(names, [&b"."[..], b"..", b"a.txt", b"dir", b"link"]);
    assert!(share.names("/").contains(&b"host".to_vec()));
    // `..` of the share's root climbs out of the mount.
    assert_eq!(share.resolve("/host/.."), Ok(share.vfs.root()));
    assert_eq!(share.vfs.path_of(share.resolve("/host/dir").unwrap()).unwrap(), b"/host/dir");
    let mounts = share.vfs.proc_contents(share.resolve("/proc/mounts").unwrap()).unwrap();
    let mounts = String::from_utf8(mounts).unwrap();
    assert!(mounts.contains("share0 /host 9p rw,trans=virtio,version=9p2000.L 0 0\n"), "{mounts}");
    let _ = ProcFile::Mounts;
}

#[test]
fn names_and_contents_change_on_the_host() {
    let mut share = mounted(populated());
    let (directory, name) = share.parent("/host/dir/new.txt");
    let (node, made) = share.vfs.create(&share.context, directory, &name, 0o640, false).unwrap();
    assert!(made);
    assert_eq!(share.vfs.write(node, 0, b"written in Reef").unwrap(), 15);
    assert_eq!(share.host().file_contents(b"/dir/new.txt").unwrap(), b"written in Reef");
    share.vfs.truncate(node, 7).unwrap();
    assert_eq!(share.vfs.stat(node).unwrap().size, 7);
    assert_eq!(share.host().file_contents(b"/dir/new.txt").unwrap(), b"written");

    let (directory, name) = share.parent("/host/sub");
    share.vfs.make_directory(directory, &name, 0o755).unwrap();
    let (directory, name) = share.parent("/host/sub/to-new");
    share.vfs.symlink(b"../dir/new.txt", directory, &name).unwrap();
    assert_eq!(share.contents("/host/sub/to-new").unwrap(), b"written");

    let original = share.resolve("/host/a.txt").unwrap();
    let (directory, name) = share.parent("/host/sub/hard");
    share.vfs.link(original, directory, &name).unwrap();
    assert_eq!(share.resolve("/host/sub/hard"), Ok(original), "two names of one file are one node");

    let (from, from_name) = share.parent("/host/dir/new.txt");
    let (to, to_name) = share.parent("/host/renamed.txt");
    share.vfs.rename(from, &from_name, to, &to_name, 0).unwrap();
    assert!(share.host().exists(b"/renamed.txt") && !share.host().exists(b"/dir/new.txt"));
    assert_eq!(share.resolve("/host/dir/new.txt"), Err(ENOENT));
    assert_eq!(share.vfs.path_of(share.resolve("/host/sub").unwrap()).unwrap(), b"/host/sub");
    let (from, from_name) = share.parent("/host/renamed.txt");
    let (to, to_name) = share.parent("/host/a.txt");
    assert_eq!(share.vfs.rename(from, &from_name, to, &to_name, RENAME_NOREPLACE), Err(EEXIST));

    let (directory, name) = share.parent("/host/sub");
    assert_eq!(share.vfs.remove_directory(directory, &name), Err(ENOTEMPTY));
    for path in ["/host/sub/to-new", "/host/sub/hard"] {
        let (directory, name) = share.parent(path);
        share.vfs.unlink(directory, &name).unwrap();
    }
    let (directory, name) = share.parent("/host/sub");
    share.vfs.remove_directory(directory, &name).unwrap();
    assert!(!share.host().exists(b"/sub"));
    assert_eq!(share.contents("/host/a.txt").unwrap(), b"hello from the host\n");
}

#[test]
fn large_directories_list_every_entry_once_and_large_files_come_in_pieces() {
    let mut server = Server::new();
    server.insert_directory(b"/many").unwrap();
    for index in 0..1000 {
        server.insert_file(format!("/many/file-{index:04}").as_bytes(), b"x").unwrap();
    }
    let big: Vec<u8> = (0..3 * 1024 * 1024u32).map(|byte| (byte % 251) as u8).collect();
    server.insert_file(b"/big", &big).unwrap();
    let share = mounted(server);
    let mut names = share.names("/host/many");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 1002, "each of 1000 entries once, with . and ..");
    let node = share.resolve("/host/big").unwrap();
    let mut piece = vec![0; 100_000];
    let mut offset = 0;
    while offset < big.len() {
        let read = share.vfs.read(node, offset as u64, &mut piece).unwrap();
        assert!(read > 0);
        assert_eq!(piece[..read], big[offset..offset + read]);
        offset += read;
    }
}

#[test]
fn the_cache_answers_until_its_lifetime_ends() {
    let share = mounted(populated());
    assert_eq!(share.resolve("/host/later.txt"), Err(ENOENT));
    let node = share.resolve("/host/a.txt").unwrap();
    share.vfs.stat(node).unwrap();
    let (_, before) = share.vfs.share_counts().remove(0);
    for _ in 0..10 {
        share.vfs.stat(node).unwrap();
        assert_eq!(share.resolve("/host/later.txt"), Err(ENOENT));
    }
    let (_, after) = share.vfs.share_counts().remove(0);
    assert_eq!(after.cache_misses, before.cache_misses, "fresh names, failed lookups and attributes are kept");
    assert!(after.cache_hits >= before.cache_hits + 20);

    share.host().insert_file(b"/later.txt", b"made on the host").unwrap();
    assert_eq!(share.resolve("/host/later.txt"), Err(ENOENT), "a failed lookup is believed while fresh");
    NOW.fetch_add(CACHE_LIFETIME, Ordering::Relaxed);
    assert_eq!(share.contents("/host/later.txt").unwrap(), b"made on the host");
}

#[test]
fn a_misbehaving_server_gives_errors_and_nothing_is_kept_open() {
    let mut share = mounted(populated());
    let node = share.resolve("/host/a.txt").unwrap();
    share.vfs.open_node(node).unwrap();
    let mut buffer = [0; 64];
    share.host().malformed_next();
    assert_eq!(share.vfs.read(node, 0, &mut buffer), Err(EIO));
    share.host().too_long_next();
    assert_eq!(share.vfs.read(node, 0, &mut buffer), Err(EIO));
    share.host().wrong_tag_next();
    assert_eq!(share.vfs.read(node, 0, &mut buffer), Err(EIO));
    assert_eq!(share.vfs.read(node, 0, &mut buffer), Ok(20), "the client stays usable");
    let (_, counts) = share.vfs.share_counts().remove(0);
    assert!(counts.malformed_replies >= 3);
    assert_eq!(share.vfs.counts().share_opened_fids, 1);
    share.vfs.close_node(node).unwrap();
    assert_eq!(share.vfs.counts().share_opened_fids, 0, "the last close gives the opened fid back");

    // An unlinked file still open is readable, and forgotten at its last close.
    share.resolve("/host/dir").unwrap();
    let fids_before = share.host().fids_in_use();
    let node = share.resolve("/host/dir/b.txt").unwrap();
    share.vfs.open_node(node).unwrap();
    assert_eq!(share.vfs.read(node, 0, &mut buffer), Ok(4));
    let (directory, name) = share.parent("/host/dir/b.txt");
    share.vfs.unlink(directory, &name).unwrap();
    share.vfs.close_node(node).unwrap();
    assert_eq!(share.vfs.stat(node), Err(ENOENT));
    assert_eq!(share.host().fids_in_use(), fids_before, "the removed node's fids went back");

    // The share disappears: every call fails, the VFS goes on.
    share.host().fail_all(EIO);
    NOW.fetch_add(CACHE_LIFETIME, Ordering::Relaxed);
    assert_eq!(share.vfs.stat(node), Err(ENOENT));
    assert_eq!(share.contents("/host/a.txt"), Err(EIO));
    assert_eq!(share.contents("/etc/motd").unwrap(), b"hello\n");
}
