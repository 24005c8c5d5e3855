//! Named pipes and the `/proc` links of issue 27: `mknod`'s rules, a FIFO's node, the
//! descriptor links of `/proc/<pid>/fd`, `exe`, `comm`, and the names open files go by.

mod common;

use common::fixture;
use initramfs::mode;
use linux_raw_sys::errno::{EEXIST, EINVAL, ENOENT, ENOTDIR, EPERM, EROFS};
use vfs::NodeKind;

#[test]
fn mknod_makes_fifos_and_files_and_refuses_the_rest_as_linux_does() {
    let mut fixture = fixture(64);
    let (tmp, _) = fixture.parent("/tmp/x").unwrap();
    let fifo = fixture.vfs.make_node(tmp, b"f", mode::FIFO | 0o644).unwrap();
    assert_eq!(fixture.vfs.kind(fifo), Ok(NodeKind::Fifo));
    let stat = fixture.vfs.stat(fifo).unwrap();
    assert_eq!((stat.mode, stat.size, stat.links), (mode::FIFO | 0o644, 0, 1));
    // No type bits is a regular file, as `S_IFREG`.
    let plain = fixture.vfs.make_node(tmp, b"plain", 0o600).unwrap();
    assert_eq!(fixture.vfs.stat(plain).unwrap().mode, mode::REGULAR | 0o600);
    let regular = fixture.vfs.make_node(tmp, b"regular", mode::REGULAR | 0o640).unwrap();
    assert_eq!(fixture.vfs.kind(regular), Ok(NodeKind::Regular));
    // Linux's `may_mknod` comes first: a directory is EPERM, bits of no type EINVAL, even
    // where the name exists; devices and sockets EPERM.
    assert_eq!(fixture.vfs.make_node(tmp, b"f", mode::DIRECTORY | 0o755), Err(EPERM));
    assert_eq!(fixture.vfs.make_node(tmp, b"f", 0o170_000 | 0o644), Err(EINVAL));
    assert_eq!(fixture.vfs.make_node(tmp, b"c", mode::CHARACTER_DEVICE | 0o644), Err(EPERM));
    assert_eq!(fixture.vfs.make_node(tmp, b"b", mode::BLOCK_DEVICE | 0o644), Err(EPERM));
    assert_eq!(fixture.vfs.make_node(tmp, b"s", mode::SOCKET | 0o644), Err(EPERM));
    assert_eq!(fixture.vfs.make_node(tmp, b"f", mode::FIFO | 0o644), Err(EEXIST));
    assert_eq!(fixture.vfs.make_node(tmp, b".", mode::FIFO | 0o644), Err(EEXIST));
    assert_eq!(fixture.vfs.make_node(tmp, b"g/", mode::FIFO | 0o644), Err(ENOENT));
    // Elsewhere: the initramfs is read-only, /dev and /proc fixed.
    let (etc, _) = fixture.parent("/etc/x").unwrap();
    assert_eq!(fixture.vfs.make_node(etc, b"f", mode::FIFO | 0o644), Err(EROFS));
    let (dev, _) = fixture.parent("/dev/x").unwrap();
    assert_eq!(fixture.vfs.make_node(dev, b"f", mode::FIFO | 0o644), Err(EPERM));
    let motd = fixture.resolve("/etc/motd").unwrap();
    assert_eq!(fixture.vfs.make_node(motd, b"f", mode::FIFO | 0o644), Err(ENOTDIR));
}

#[test]
fn a_fifo_is_listed_as_one_holds_no_bytes_and_goes_like_a_file() {
    let mut fixture = fixture(64);
    let (tmp, _) = fixture.parent("/tmp/x").unwrap();
    let fifo = fixture.vfs.make_node(tmp, b"f", mode::FIFO | 0o600).unwrap();
    let (entry, _) = fixture.vfs.read_directory(tmp, 2).unwrap().unwrap();
    assert_eq!((entry.name.as_slice(), entry.kind_code), (&b"f"[..], linux_raw_sys::general::DT_FIFO as u8));
    // Its bytes are the service's pipe's: the VFS neither reads nor writes them.
    assert_eq!(fixture.vfs.read(fifo, 0, &mut [0; 4]), Err(EINVAL));
    assert_eq!(fixture.vfs.write(fifo, 0, b"x"), Err(EINVAL));
    // An open FIFO outlives its name, as any node.
    fixture.vfs.open_node(fifo).unwrap();
    fixture.unlink("/tmp/f").unwrap();
    assert_eq!(fixture.vfs.stat(fifo).unwrap().links, 0);
    assert_eq!(fixture.vfs.counts().tmpfs_nodes, 1);
    fixture.vfs.close_node(fifo).unwrap();
    assert_eq!(fixture.vfs.counts().tmpfs_nodes, 0);
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 0);
}

#[test]
fn proc_fd_lists_the_descriptors_the_source_gives_as_links() {
    let fixture = fixture(64);
    fixture
        .processes
        .1
        .lock()
        .unwrap()
        .insert(42, vec![(0, b"/dev/console".to_vec()), (1, b"pipe:[3]".to_vec()), (7, b"/etc/motd".to_vec())]);
    let directory = fixture.resolve("/proc/42/fd").unwrap();
    assert_eq!(fixture.listing(directory).unwrap(), [".", "..", "0", "1", "7"]);
    assert_eq!(fixture.vfs.path_of(directory).unwrap(), b"/proc/42/fd");
    let stat = fixture.vfs.stat(directory).unwrap();
    assert_eq!(stat.mode, mode::DIRECTORY | 0o500);
    let (entry, _) = fixture.vfs.read_directory(directory, 2).unwrap().unwrap();
    assert_eq!(entry.kind_code, linux_raw_sys::general::DT_LNK as u8);
    let link = fixture.lresolve("/proc/42/fd/1").unwrap();
    assert_eq!(fixture.vfs.kind(link), Ok(NodeKind::Symlink));
    assert_eq!(fixture.vfs.read_link(link).unwrap(), b"pipe:[3]");
    assert_eq!(fixture.vfs.stat(link).unwrap().mode, mode::SYMLINK | 0o700);
    // Followed, a path leads to the file; `..` of the directory is the process's.
    assert_eq!(fixture.resolve("/proc/42/fd/7"), fixture.resolve("/etc/motd"));
    assert_eq!(fixture.resolve("/proc/42/fd/.."), fixture.resolve("/proc/42"));
    assert_eq!(fixture.resolve("/proc/42/fd/2"), Err(ENOENT));
    assert_eq!(fixture.resolve("/proc/42/fd/07"), Err(ENOENT));
    // A closed descriptor's link is gone, even to a node looked up before.
    fixture.processes.1.lock().unwrap().get_mut(&42).unwrap().retain(|(fd, _)| *fd != 1);
    assert_eq!(fixture.vfs.read_link(link), Err(ENOENT));
    assert_eq!(fixture.listing(directory).unwrap(), [".", "..", "0", "7"]);
    // So is everything of a process that ended.
    fixture.processes.0.lock().unwrap().retain(|&pid| pid != 42);
    assert_eq!(fixture.vfs.read_directory(directory, 0), Err(ENOENT));
    assert_eq!(fixture.resolve("/proc/42/fd"), Err(ENOENT));
}

#[test]
fn proc_self_fd_exe_and_comm_are_the_callers() {
    let fixture = fixture(64);
    fixture.processes.1.lock().unwrap().insert(1, vec![(0, b"/dev/console".to_vec())]);
    assert_eq!(fixture.resolve("/proc/self/fd"), fixture.resolve("/proc/1/fd"));
    let exe = fixture.lresolve("/proc/self/exe").unwrap();
    assert_eq!(fixture.vfs.read_link(exe).unwrap(), b"/bin/busybox");
    assert_eq!(fixture.vfs.stat(exe).unwrap().mode, mode::SYMLINK | 0o777);
    assert_eq!(fixture.resolve("/proc/self/exe"), fixture.resolve("/bin/busybox"));
    let comm = fixture.resolve("/proc/1/comm").unwrap();
    assert_eq!(fixture.vfs.kind(comm), Ok(NodeKind::ProcFile(vfs::ProcFile::Comm(1))));
    assert_eq!(fixture.vfs.proc_contents(comm).unwrap(), b"Comm(1)\n");
    let process = fixture.vfs.stat(fixture.resolve("/proc/1").unwrap()).unwrap();
    assert_eq!(process.links, 3);
}

#[test]
fn open_files_are_named_by_where_the_walk_found_them() {
    let mut fixture = fixture(64);
    fixture.make_directory("/tmp/d").unwrap();
    fixture.create("/tmp/d/file").unwrap();
    fixture.symlink("d/file", "/tmp/link").unwrap();
    let context = fixture.context.clone();
    let named = |path: &str, follow: bool| {
        let (_, name) = fixture.vfs.resolve_with_path(&context, None, path.as_bytes(), follow).unwrap();
        String::from_utf8(name).unwrap()
    };
    assert_eq!(named("/bin/ls", true), "/bin/busybox");
    assert_eq!(named("/bin/ls", false), "/bin/ls");
    assert_eq!(named("/tmp/link", true), "/tmp/d/file");
    assert_eq!(named("/tmp//d/./file", true), "/tmp/d/file");
    assert_eq!(named("/tmp/d/..", true), "/tmp");
    assert_eq!(named("/dev/null", true), "/dev/null");
    assert_eq!(named("/proc/self/", true), "/proc/1");
    assert_eq!(named("/", true), "/");
    let (tmp, _) = fixture.parent("/tmp/x").unwrap();
    assert_eq!(fixture.vfs.path_in(tmp, b"x").unwrap(), b"/tmp/x");
    let d = fixture.resolve("/tmp/d").unwrap();
    let relative = vfs::Context { pid: 1, cwd: d, root: fixture.vfs.root(), credentials: vfs::Credentials::root() };
    let (_, name) = fixture.vfs.resolve_with_path(&relative, None, b"file", true).unwrap();
    assert_eq!(name, b"/tmp/d/file");
}

#[test]
fn statfs_names_each_mount_and_counts_tmpfs_pages() {
    let mut fixture = fixture(64);
    let space_of = |fixture: &common::Fixture, path: &str| {
        let node = fixture.resolve(path).unwrap();
        fixture.vfs.space(fixture.vfs.stat(node).unwrap().device).unwrap()
    };
    let root = space_of(&fixture, "/etc/motd");
    assert_eq!((root.magic, root.read_only, root.pages), (0x8584_58f6, true, 0));
    assert_eq!(space_of(&fixture, "/proc").magic, 0x9fa0);
    assert_eq!(space_of(&fixture, "/dev/null").magic, 0x0102_1994);
    let before = space_of(&fixture, "/tmp");
    assert_eq!((before.magic, before.pages, before.free_pages), (0x0102_1994, 64, 64));
    let (tmp, _) = fixture.parent("/tmp/x").unwrap();
    let file = fixture.vfs.make_node(tmp, b"data", 0o600).unwrap();
    fixture.vfs.write(file, 0, &[7u8; 3 * 4096]).unwrap();
    let after = space_of(&fixture, "/tmp");
    assert_eq!((after.free_pages, after.free_nodes), (61, before.free_nodes - 1));
    assert_eq!(fixture.vfs.space(999), Err(ENOENT));
}
