//! Each rule of the VFS, one test at a time: paths, mounts, errors, lifetimes, listings, /proc.

mod common;

use common::{archive_bytes, clock, fixture, Cores, Processes};
use initramfs::mode;
use linux_raw_sys::errno::*;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;
use vfs::{
    Context, Device, HeapPageStore, NodeKind, ProcFile, ReefView, Vfs, MAX_FILE_SIZE, MAX_SYMLINK_HOPS, NAME_MAX,
    PAGE_SIZE, PATH_MAX, RENAME_EXCHANGE, RENAME_NOREPLACE,
};

#[test]
fn dot_dot_never_leaves_the_root() {
    let fixture = fixture(16);
    let root = fixture.vfs.root();
    for path in ["/..", "/../../..", "..", "../../.", "/tmp/../..", "/dev/..", "/proc/1/../../..", "/proc/reef/../.."] {
        assert_eq!(fixture.resolve(path), Ok(root), "{path}");
    }
    assert_eq!(fixture.resolve("/../../etc/motd"), fixture.resolve("/etc/motd"));
    assert_eq!(fixture.resolve("/usr/bin/../../bin/busybox"), fixture.resolve("/bin/busybox"));
    // `..` of a mount's root is the directory holding the mount point, whatever the archive has
    // under the same name.
    assert_eq!(fixture.resolve("/tmp/.."), Ok(root));
    let tmp = fixture.resolve("/tmp").unwrap();
    let context = Context { pid: 1, cwd: tmp, root, credentials: vfs::Credentials::root() };
    assert_eq!(fixture.vfs.resolve(&context, None, b"../etc/motd", true), fixture.resolve("/etc/motd"));
    assert_eq!(fixture.vfs.resolve(&context, None, b".", true), Ok(tmp));
}

#[test]
fn a_changed_root_holds_absolute_paths_dot_dot_and_links_inside_it() {
    let mut fixture = fixture(16);
    let jail = fixture.make_directory("/tmp/jail").unwrap();
    fixture.make_directory("/tmp/jail/etc").unwrap();
    let motd = fixture.create("/tmp/jail/etc/motd").unwrap();
    fixture.symlink("/etc/motd", "/tmp/jail/absolute").unwrap();
    fixture.symlink("../../../../etc", "/tmp/jail/climbing").unwrap();
    let context = Context { pid: 1, cwd: jail, root: jail, credentials: vfs::Credentials::root() };
    let resolve = |path: &[u8]| fixture.vfs.resolve(&context, None, path, true);
    assert_eq!(resolve(b"/etc/motd"), Ok(motd), "an absolute path starts at the root");
    assert_eq!(resolve(b"/"), Ok(jail));
    assert_eq!(resolve(b"/../../.."), Ok(jail), "`..` stops at the root");
    assert_eq!(resolve(b"absolute"), Ok(motd), "an absolute link's target starts at the root");
    assert_eq!(resolve(b"climbing/motd"), Ok(motd), "a link's `..` stops at the root too");
    assert_eq!(resolve(b"/bin/busybox"), Err(ENOENT), "what is outside is out of reach");
    assert_eq!(resolve(b"/dev/null"), fixture.resolve("/dev/null"), "the kernel's file systems are seen");
    assert_eq!(resolve(b"/proc/../etc/motd"), Ok(motd), "and `..` of them is the changed root");
    let (directory, name) = fixture.vfs.resolve_parent(&context, None, b"/etc/new").unwrap();
    assert_eq!((fixture.vfs.path_of(directory).unwrap(), name), (b"/tmp/jail/etc".to_vec(), b"new".to_vec()));
    let (_, seen) = fixture.vfs.resolve_with_path(&context, None, b"/etc/motd", true).unwrap();
    assert_eq!(seen, b"/etc/motd", "paths are shown as the process sees them");
    assert_eq!(fixture.vfs.seen_from(jail, b"/tmp/jail".to_vec()).unwrap(), b"/");
    assert_eq!(fixture.vfs.seen_from(jail, b"/tmp/jailbreak".to_vec()).unwrap(), b"/tmp/jailbreak");
}

#[test]
fn path_errors_are_linuxs() {
    let fixture = fixture(16);
    assert_eq!(fixture.resolve(""), Err(ENOENT));
    assert_eq!(fixture.resolve("/etc/mo\0td"), Err(EINVAL));
    assert_eq!(fixture.resolve("/etc/missing"), Err(ENOENT));
    assert_eq!(fixture.resolve("/missing/motd"), Err(ENOENT));
    assert_eq!(fixture.resolve("/etc/motd/x"), Err(ENOTDIR));
    assert_eq!(fixture.resolve("/etc/motd/"), Err(ENOTDIR));
    assert_eq!(fixture.resolve("/etc/motd/."), Err(ENOTDIR));
    assert_eq!(fixture.resolve("/etc/motd/.."), Err(ENOTDIR));
    assert!(fixture.resolve("/etc/").is_ok());
    let long_name = "n".repeat(NAME_MAX + 1);
    assert_eq!(fixture.resolve(&format!("/tmp/{long_name}")), Err(ENAMETOOLONG));
    assert_eq!(fixture.resolve(&format!("/tmp/{}", &long_name[1..])), Err(ENOENT));
    // 4095 bytes still look up; 4096 do not.
    let slashes = "/".repeat(PATH_MAX - 1 - "etc/motd".len());
    assert!(fixture.resolve(&format!("{slashes}etc/motd")).is_ok());
    assert_eq!(fixture.resolve(&format!("/{slashes}etc/motd")), Err(ENAMETOOLONG));
    assert_eq!(fixture.parent(&format!("/{slashes}etc/motd")), Err(ENAMETOOLONG));
    assert_eq!(fixture.parent(&format!("/tmp/{long_name}")), Err(ENAMETOOLONG));
    assert_eq!(fixture.parent(""), Err(ENOENT));
    assert_eq!(fixture.parent("/etc/motd/x"), Err(ENOTDIR));
    // A base that is no directory is ENOTDIR for relative paths, ignored for absolute ones.
    let motd = fixture.resolve("/etc/motd").unwrap();
    assert_eq!(fixture.vfs.resolve(&fixture.context, Some(motd), b"x", true), Err(ENOTDIR));
    assert_eq!(fixture.vfs.resolve(&fixture.context, Some(motd), b"/etc/motd", true), Ok(motd));
}

#[test]
fn busybox_applet_links_resolve() {
    let fixture = fixture(16);
    let busybox = fixture.resolve("/bin/busybox").unwrap();
    for applet in ["/bin/ls", "/bin/sh", "/sbin/init", "/usr/bin/env", "/usr/bin/../../bin//ls"] {
        assert_eq!(fixture.resolve(applet), Ok(busybox), "{applet}");
        let link = fixture.lresolve(applet).unwrap();
        assert_eq!(fixture.vfs.kind(link), Ok(NodeKind::Symlink));
        assert_eq!(fixture.vfs.stat(link).unwrap().mode & mode::TYPE_MASK, mode::SYMLINK);
    }
    assert_eq!(fixture.vfs.read_link(fixture.lresolve("/sbin/init").unwrap()).unwrap(), b"../bin/busybox");
    assert_eq!(fixture.contents(busybox).unwrap(), b"\x7fELF busybox");
    assert_eq!(fixture.vfs.read_link(busybox), Err(EINVAL));
    // A link in the middle of a path is followed whatever `follow_last` says.
    let sbin = fixture.resolve("/sbin").unwrap();
    let context = fixture.context.clone();
    assert_eq!(fixture.vfs.resolve(&context, Some(sbin), b"init/../motd", false), Err(ENOTDIR));
}

#[test]
fn symlink_loops_and_long_chains_end_in_eloop() {
    let mut fixture = fixture(16);
    fixture.symlink("loop-b", "/tmp/loop-a").unwrap();
    fixture.symlink("loop-a", "/tmp/loop-b").unwrap();
    fixture.symlink("self", "/tmp/self").unwrap();
    assert_eq!(fixture.resolve("/tmp/loop-a"), Err(ELOOP));
    assert_eq!(fixture.resolve("/tmp/self/x"), Err(ELOOP));
    assert!(fixture.lresolve("/tmp/loop-a").is_ok(), "the link itself is there");
    assert_eq!(fixture.lresolve("/tmp/self/"), Err(ELOOP), "a trailing slash follows");
    // A chain of exactly MAX_SYMLINK_HOPS links resolves; one more does not.
    fixture.create("/tmp/end").unwrap();
    let mut previous = "end".to_string();
    for hop in 1..=MAX_SYMLINK_HOPS + 1 {
        let name = format!("chain{hop}");
        fixture.symlink(&previous, &format!("/tmp/{name}")).unwrap();
        previous = name;
    }
    let end = fixture.resolve("/tmp/end").unwrap();
    assert_eq!(fixture.resolve(&format!("/tmp/chain{MAX_SYMLINK_HOPS}")), Ok(end));
    assert_eq!(fixture.resolve(&format!("/tmp/chain{}", MAX_SYMLINK_HOPS + 1)), Err(ELOOP));
    // Dangling and empty targets.
    fixture.symlink("nowhere", "/tmp/dangling").unwrap();
    assert_eq!(fixture.resolve("/tmp/dangling"), Err(ENOENT));
    assert_eq!(fixture.symlink("", "/tmp/empty"), Err(ENOENT));
    let (tmp, _) = fixture.parent("/tmp/x").unwrap();
    assert_eq!(fixture.vfs.symlink(&vec![b'a'; PATH_MAX], tmp, b"long"), Err(ENAMETOOLONG));
}

#[test]
fn symlinks_are_relative_to_their_directory() {
    let mut fixture = fixture(16);
    fixture.make_directory("/tmp/d").unwrap();
    fixture.make_directory("/tmp/d/e").unwrap();
    let file = fixture.create("/tmp/d/e/file").unwrap();
    fixture.symlink("e/file", "/tmp/d/relative").unwrap();
    fixture.symlink("/tmp/d/e", "/tmp/absolute").unwrap();
    fixture.symlink("../../etc", "/tmp/d/up").unwrap();
    assert_eq!(fixture.resolve("/tmp/d/relative"), Ok(file));
    assert_eq!(fixture.resolve("/tmp/absolute/file"), Ok(file));
    assert_eq!(fixture.resolve("/tmp/absolute/../e/file"), Ok(file), "`..` after a link is the target's parent");
    assert_eq!(fixture.resolve("/tmp/d/up/motd"), fixture.resolve("/etc/motd"), "out of tmpfs through the mount");
    // The proc `self` link.
    assert_eq!(fixture.resolve("/proc/self"), fixture.resolve("/proc/1"));
    let context =
        Context { pid: 42, cwd: fixture.vfs.root(), root: fixture.vfs.root(), credentials: vfs::Credentials::root() };
    let own = fixture.vfs.resolve(&context, None, b"/proc/self/status", true).unwrap();
    assert_eq!(fixture.vfs.kind(own), Ok(NodeKind::ProcFile(ProcFile::Status(42))));
    let link = fixture.vfs.resolve(&context, None, b"/proc/self", false).unwrap();
    assert_eq!(fixture.vfs.read_link(link).unwrap(), b"42");
}

#[test]
fn a_tmpfs_file_is_writable() {
    let mut fixture = fixture(16);
    let file = fixture.create("/tmp/writable").unwrap();
    assert_eq!(fixture.vfs.check_writable(file), Ok(()));
}

#[test]
fn the_initramfs_is_read_only() {
    let mut fixture = fixture(16);
    let motd = fixture.resolve("/etc/motd").unwrap();
    assert_eq!(fixture.create("/etc/new"), Err(EROFS));
    assert_eq!(fixture.make_directory("/etc/new"), Err(EROFS));
    assert_eq!(fixture.symlink("x", "/etc/new"), Err(EROFS));
    assert_eq!(fixture.unlink("/etc/motd"), Err(EROFS));
    assert_eq!(fixture.unlink("/etc/missing"), Err(EROFS));
    assert_eq!(fixture.remove_directory("/usr/bin"), Err(EROFS));
    assert_eq!(fixture.rename("/etc/motd", "/etc/motd2", 0), Err(EROFS));
    assert_eq!(fixture.link("/etc/motd", "/etc/motd2"), Err(EROFS));
    assert_eq!(fixture.vfs.write(motd, 0, b"x"), Err(EROFS));
    assert_eq!(fixture.vfs.truncate(motd, 0), Err(EROFS));
    assert_eq!(fixture.vfs.check_writable(motd), Err(EROFS), "an open for writing is refused up front");
    assert_eq!(fixture.vfs.set_mode(motd, 0o777), Err(EROFS));
    assert_eq!(fixture.vfs.set_times(motd, Some(1), None), Err(EROFS));
    let etc = fixture.resolve("/etc").unwrap();
    assert_eq!(fixture.vfs.write(etc, 0, b"x"), Err(EISDIR));
    // What exists is reported before the read-only file system, as in Linux.
    assert_eq!(fixture.make_directory("/etc"), Err(EEXIST));
    assert_eq!(fixture.symlink("x", "/etc/motd"), Err(EEXIST));
    let (directory, name) = fixture.parent("/etc/motd").unwrap();
    let context = fixture.context.clone();
    assert_eq!(fixture.vfs.create(&context, directory, &name, 0o644, false), Ok((motd, false)));
    assert_eq!(fixture.vfs.create(&context, directory, &name, 0o644, true), Err(EEXIST));
    assert_eq!(fixture.contents(motd).unwrap(), b"hello\n");
    assert_eq!(fixture.vfs.counts().tmpfs_nodes, 0);
}

#[test]
fn dev_and_proc_refuse_changes_with_eperm() {
    let mut fixture = fixture(16);
    for path in ["/dev/new", "/proc/new", "/proc/1/new", "/proc/reef/new"] {
        assert_eq!(fixture.create(path), Err(EPERM), "{path}");
        assert_eq!(fixture.make_directory(path), Err(EPERM), "{path}");
        assert_eq!(fixture.symlink("x", path), Err(EPERM), "{path}");
    }
    assert_eq!(fixture.unlink("/dev/null"), Err(EPERM));
    assert_eq!(fixture.unlink("/proc/uptime"), Err(EPERM));
    assert_eq!(fixture.rename("/dev/null", "/dev/null2", 0), Err(EPERM));
    assert_eq!(fixture.remove_directory("/proc/reef"), Err(EPERM));
    let uptime = fixture.resolve("/proc/uptime").unwrap();
    assert_eq!(fixture.vfs.write(uptime, 0, b"1"), Err(EACCES));
    assert_eq!(fixture.vfs.set_mode(uptime, 0o666), Err(EPERM));
    // Opening an existing device with O_CREAT, as `> /dev/null` does, finds it.
    let null = fixture.resolve("/dev/null").unwrap();
    assert_eq!(fixture.create("/dev/null"), Ok(null));
    assert_eq!(fixture.vfs.write(null, 0, b"x"), Err(EINVAL), "the service drives devices");
    assert_eq!(fixture.vfs.truncate(null, 0), Err(EINVAL));
    // Their permissions and times do change, as on Linux's devtmpfs.
    fixture.vfs.set_mode(null, 0o600).unwrap();
    fixture.vfs.set_times(null, Some(5), Some(6)).unwrap();
    let stat = fixture.vfs.stat(null).unwrap();
    assert_eq!((stat.mode, stat.accessed, stat.modified), (mode::CHARACTER_DEVICE | 0o600, 5, 6));
}

#[test]
fn mount_points_are_busy_and_mounts_are_separate_devices() {
    let mut fixture = fixture(16);
    for mount in ["/tmp", "/dev", "/proc", "/sys"] {
        assert_eq!(fixture.remove_directory(mount), Err(EBUSY), "{mount}");
        assert_eq!(fixture.rename(mount, "/elsewhere", 0), Err(EBUSY), "{mount}");
        assert_eq!(fixture.unlink(mount), Err(EISDIR), "{mount}");
        assert_eq!(fixture.make_directory(mount), Err(EEXIST), "{mount}");
    }
    assert_eq!(fixture.remove_directory("/tmp/."), Err(EINVAL));
    assert_eq!(fixture.remove_directory("/tmp/.."), Err(ENOTEMPTY));
    assert_eq!(fixture.remove_directory("/"), Err(EINVAL));
    assert_eq!(fixture.unlink("/tmp/."), Err(EISDIR));
    assert_eq!(fixture.unlink("/tmp/.."), Err(EISDIR));
    assert_eq!(fixture.make_directory("/tmp/."), Err(EEXIST));
    assert_eq!(fixture.rename("/tmp/.", "/tmp/x", 0), Err(EBUSY));
    let devices: BTreeSet<u64> = ["/", "/tmp", "/dev", "/proc", "/sys"]
        .iter()
        .map(|path| fixture.vfs.stat(fixture.resolve(path).unwrap()).unwrap().device)
        .collect();
    assert_eq!(devices.len(), 5);
    // The mount points appear once in the root's listing, whether the archive has them or not.
    let listing = fixture.listing(fixture.vfs.root()).unwrap();
    assert_eq!(listing, [".", "..", "tmp", "dev", "proc", "sys", "bin", "etc", "sbin", "usr"]);
    // The archive's /dev/console is hidden by devfs's.
    let console = fixture.resolve("/dev/console").unwrap();
    assert_eq!(fixture.vfs.kind(console), Ok(NodeKind::Device(Device::Console)));
}

#[test]
fn renames_and_links_do_not_cross_mounts() {
    let mut fixture = fixture(16);
    fixture.create("/tmp/file").unwrap();
    assert_eq!(fixture.rename("/tmp/file", "/etc/file", 0), Err(EXDEV));
    assert_eq!(fixture.rename("/etc/motd", "/tmp/motd", 0), Err(EXDEV));
    assert_eq!(fixture.link("/etc/motd", "/tmp/motd"), Err(EXDEV));
    assert_eq!(fixture.link("/tmp/file", "/etc/file"), Err(EXDEV));
    assert_eq!(fixture.link("/dev/null", "/tmp/null"), Err(EXDEV));
}

#[test]
fn renames_follow_linuxs_rules() {
    let mut fixture = fixture(16);
    for directory in ["/tmp/a", "/tmp/a/b", "/tmp/empty", "/tmp/full", "/tmp/full/x"] {
        fixture.make_directory(directory).unwrap();
    }
    let file = fixture.create("/tmp/file").unwrap();
    fixture.create("/tmp/other").unwrap();
    assert_eq!(fixture.rename("/tmp/a", "/tmp/a/b/c", 0), Err(EINVAL), "into its own subtree");
    assert_eq!(fixture.rename("/tmp/a", "/tmp/a/c", 0), Err(EINVAL));
    assert_eq!(fixture.rename("/tmp/a/b", "/tmp/a", 0), Err(ENOTEMPTY), "over its own parent");
    assert_eq!(fixture.rename("/tmp/file", "/tmp/empty", 0), Err(EISDIR));
    assert_eq!(fixture.rename("/tmp/a", "/tmp/file", 0), Err(ENOTDIR));
    assert_eq!(fixture.rename("/tmp/a", "/tmp/full", 0), Err(ENOTEMPTY));
    assert_eq!(fixture.rename("/tmp/file", "/tmp/other", RENAME_NOREPLACE), Err(EEXIST));
    assert_eq!(fixture.rename("/tmp/file", "/tmp/missing", RENAME_EXCHANGE), Err(ENOENT));
    assert_eq!(fixture.rename("/tmp/file", "/tmp/x", RENAME_EXCHANGE | RENAME_NOREPLACE), Err(EINVAL));
    assert_eq!(fixture.rename("/tmp/file", "/tmp/x", 4), Err(EINVAL));
    assert_eq!(fixture.rename("/tmp/missing", "/tmp/x", 0), Err(ENOENT));
    assert_eq!(fixture.rename("/tmp/file/", "/tmp/x", 0), Err(ENOTDIR));
    assert_eq!(fixture.rename("/tmp/file", "/tmp/x/", 0), Err(ENOTDIR));
    fixture.rename("/tmp/file", "/tmp/file", 0).unwrap();
    // A directory replaces an empty one; its link counts follow.
    let a = fixture.resolve("/tmp/a").unwrap();
    let tmp = fixture.resolve("/tmp").unwrap();
    assert_eq!(fixture.vfs.stat(tmp).unwrap().links, 2 + 3);
    fixture.rename("/tmp/a/", "/tmp/empty/", 0).unwrap();
    assert_eq!(fixture.resolve("/tmp/empty"), Ok(a));
    assert_eq!(fixture.resolve("/tmp/a"), Err(ENOENT));
    assert_eq!(fixture.vfs.stat(tmp).unwrap().links, 2 + 2);
    assert_eq!(fixture.vfs.path_of(fixture.resolve("/tmp/empty/b").unwrap()).unwrap(), b"/tmp/empty/b");
    // A file replaces a file, which is freed.
    fixture.rename("/tmp/file", "/tmp/other", 0).unwrap();
    assert_eq!(fixture.resolve("/tmp/other"), Ok(file));
    assert_eq!(fixture.vfs.counts().tmpfs_nodes, 5, "empty, its b, full, its x, other");
    // Exchange swaps a file and a directory across directories.
    fixture.rename("/tmp/other", "/tmp/full/x", RENAME_EXCHANGE).unwrap();
    assert_eq!(fixture.resolve("/tmp/full/x"), Ok(file));
    assert_eq!(fixture.vfs.kind(fixture.resolve("/tmp/other").unwrap()), Ok(NodeKind::Directory));
    assert_eq!(fixture.vfs.stat(fixture.resolve("/tmp/full").unwrap()).unwrap().links, 2);
    assert_eq!(fixture.vfs.stat(tmp).unwrap().links, 2 + 3);
    assert_eq!(fixture.vfs.path_of(fixture.resolve("/tmp/other").unwrap()).unwrap(), b"/tmp/other");
    assert_eq!(fixture.rename("/tmp/empty", "/tmp/empty/b", RENAME_EXCHANGE), Err(EINVAL));
}

#[test]
fn names_with_trailing_slashes_mean_directories() {
    let mut fixture = fixture(16);
    let directory = fixture.make_directory("/tmp/a/").unwrap();
    assert_eq!(fixture.resolve("/tmp/a/"), Ok(directory));
    fixture.create("/tmp/file").unwrap();
    assert_eq!(fixture.resolve("/tmp/file/"), Err(ENOTDIR));
    assert_eq!(fixture.unlink("/tmp/file/"), Err(ENOTDIR));
    assert_eq!(fixture.unlink("/tmp/a/"), Err(EISDIR));
    assert_eq!(fixture.unlink("/tmp/missing/"), Err(ENOENT));
    assert_eq!(fixture.create("/tmp/new/"), Err(EISDIR));
    assert_eq!(fixture.create("/tmp/a"), Err(EISDIR));
    assert_eq!(fixture.symlink("x", "/tmp/new/"), Err(ENOENT));
    assert_eq!(fixture.remove_directory("/tmp/file/"), Err(ENOTDIR));
    fixture.symlink("a", "/tmp/link-to-a").unwrap();
    assert_eq!(fixture.resolve("/tmp/link-to-a/"), Ok(directory));
    assert_eq!(fixture.remove_directory("/tmp/link-to-a/"), Err(ENOTDIR), "rmdir does not follow the last link");
    fixture.remove_directory("/tmp/a//").unwrap();
    assert_eq!(fixture.resolve("/tmp/a"), Err(ENOENT));
}

#[test]
fn create_opens_existing_files_and_follows_dangling_links() {
    let mut fixture = fixture(16);
    let context = fixture.context.clone();
    let (tmp, name) = fixture.parent("/tmp/file").unwrap();
    let (file, created) = fixture.vfs.create(&context, tmp, &name, 0o640, false).unwrap();
    assert!(created);
    assert_eq!(fixture.vfs.stat(file).unwrap().mode, mode::REGULAR | 0o640);
    assert_eq!(fixture.vfs.create(&context, tmp, &name, 0o600, false), Ok((file, false)));
    assert_eq!(fixture.vfs.create(&context, tmp, &name, 0o600, true), Err(EEXIST));
    // Through a dangling link, the link's target is made.
    fixture.make_directory("/tmp/d").unwrap();
    fixture.symlink("d/target", "/tmp/link").unwrap();
    let (made, created) = fixture.vfs.create(&context, tmp, b"link", 0o600, false).unwrap();
    assert!(created);
    assert_eq!(fixture.resolve("/tmp/d/target"), Ok(made));
    assert_eq!(fixture.vfs.create(&context, tmp, b"link", 0o600, false), Ok((made, false)));
    assert_eq!(fixture.vfs.create(&context, tmp, b"link", 0o600, true), Err(EEXIST));
    fixture.symlink("loop", "/tmp/loop").unwrap();
    assert_eq!(fixture.vfs.create(&context, tmp, b"loop", 0o600, false), Err(ELOOP));
    // Nothing is made in a file.
    assert_eq!(fixture.vfs.create(&context, file, b"x", 0o600, false), Err(ENOTDIR));
}

#[test]
fn contents_have_holes_and_truncation_frees_pages() {
    let mut fixture = fixture(64);
    let file = fixture.create("/tmp/sparse").unwrap();
    assert_eq!(fixture.vfs.write(file, 10 * PAGE_SIZE as u64 + 1, b"end"), Ok(3));
    let stat = fixture.vfs.stat(file).unwrap();
    assert_eq!((stat.size, stat.blocks), (10 * PAGE_SIZE as u64 + 4, 8));
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 1);
    let contents = fixture.contents(file).unwrap();
    assert!(contents[..10 * PAGE_SIZE + 1].iter().all(|&byte| byte == 0));
    assert_eq!(&contents[10 * PAGE_SIZE + 1..], b"end");
    fixture.vfs.write(file, 0, &vec![0xaa; 3 * PAGE_SIZE]).unwrap();
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 4);
    fixture.vfs.truncate(file, 100).unwrap();
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 1);
    fixture.vfs.truncate(file, 200).unwrap();
    let contents = fixture.contents(file).unwrap();
    assert_eq!(contents.len(), 200);
    assert!(contents[..100].iter().all(|&byte| byte == 0xaa));
    assert!(contents[100..].iter().all(|&byte| byte == 0), "the tail was zeroed");
    let mut buffer = [1u8; 8];
    assert_eq!(fixture.vfs.read(file, 1 << 50, &mut buffer), Ok(0));
    assert_eq!(fixture.vfs.write(file, MAX_FILE_SIZE, b"x"), Err(EFBIG));
    assert_eq!(fixture.vfs.truncate(file, MAX_FILE_SIZE + 1), Err(EFBIG));
    let tmp = fixture.resolve("/tmp").unwrap();
    assert_eq!(fixture.vfs.read(tmp, 0, &mut buffer), Err(EISDIR));
    assert_eq!(fixture.vfs.truncate(tmp, 0), Err(EISDIR));
    let before = fixture.vfs.stat(file).unwrap();
    assert_eq!(fixture.vfs.write(file, 0, b""), Ok(0));
    assert_eq!(fixture.vfs.stat(file).unwrap().size, before.size);
    assert!(fixture.vfs.write(file, 0, b"x").is_ok());
    assert!(fixture.vfs.stat(file).unwrap().modified > before.modified);
}

#[test]
fn enospc_writes_what_fits_and_loses_nothing_else() {
    let mut fixture = fixture(4);
    let first = fixture.create("/tmp/first").unwrap();
    let first_data: Vec<u8> = (0..2 * PAGE_SIZE + 10).map(|index| index as u8).collect();
    assert_eq!(fixture.vfs.write(first, 0, &first_data), Ok(first_data.len()));
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 3);
    let second = fixture.create("/tmp/second").unwrap();
    // One page is left: a write over two pages from offset 100 writes the first page's rest.
    assert_eq!(fixture.vfs.write(second, 100, &vec![7; 2 * PAGE_SIZE]), Ok(PAGE_SIZE - 100));
    assert_eq!(fixture.vfs.stat(second).unwrap().size, PAGE_SIZE as u64);
    assert_eq!(fixture.vfs.write(second, PAGE_SIZE as u64, b"more"), Err(ENOSPC));
    assert_eq!(fixture.vfs.stat(second).unwrap().size, PAGE_SIZE as u64, "a failed write changes nothing");
    // Pages already held still take writes, and the first file is intact.
    assert_eq!(fixture.vfs.write(second, 0, b"head"), Ok(4));
    assert_eq!(fixture.contents(first).unwrap(), first_data);
    assert_eq!(fixture.vfs.write(first, 2 * PAGE_SIZE as u64 + 10, b"tail"), Ok(4), "the last page has room");
    let counts = fixture.vfs.counts();
    assert_eq!((counts.tmpfs_pages, counts.tmpfs_page_limit), (4, 4));
    // Freeing a file makes room again.
    fixture.unlink("/tmp/first").unwrap();
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 1);
    assert_eq!(fixture.vfs.write(second, PAGE_SIZE as u64, b"more"), Ok(4));
}

#[test]
fn a_store_out_of_memory_is_enospc_too() {
    let bytes: &'static [u8] = Box::leak(archive_bytes().into_boxed_slice());
    let archive = initramfs::Archive::parse(bytes).unwrap();
    let store = Box::new(HeapPageStore::with_limit(1));
    let mut vfs = Vfs::new(Some(archive), store, 1000, clock, Box::new(Processes::default()), Arc::new(Cores::new(1)));
    let context = Context { pid: 1, cwd: vfs.root(), root: vfs.root(), credentials: vfs::Credentials::root() };
    let (tmp, _) = vfs.resolve_parent(&context, None, b"/tmp/f").unwrap();
    let (file, _) = vfs.create(&context, tmp, b"f", 0o644, false).unwrap();
    assert_eq!(vfs.write(file, 0, &[1; 2 * PAGE_SIZE]), Ok(PAGE_SIZE));
    assert_eq!(vfs.write(file, PAGE_SIZE as u64, b"x"), Err(ENOSPC));
    // Pipes draw on the same store.
    assert_eq!(vfs.page_store().allocate(), None);
}

#[test]
fn unlinked_files_live_until_the_last_close() {
    let mut fixture = fixture(16);
    let file = fixture.create("/tmp/file").unwrap();
    fixture.vfs.write(file, 0, &vec![5; PAGE_SIZE + 1]).unwrap();
    fixture.vfs.open_node(file).unwrap();
    fixture.vfs.open_node(file).unwrap();
    assert_eq!(fixture.vfs.counts().open_nodes, 1, "one node, opened twice");
    fixture.unlink("/tmp/file").unwrap();
    assert_eq!(fixture.resolve("/tmp/file"), Err(ENOENT));
    assert_eq!(fixture.vfs.stat(file).unwrap().links, 0);
    assert_eq!(fixture.contents(file).unwrap(), vec![5; PAGE_SIZE + 1]);
    assert_eq!(fixture.vfs.write(file, 0, b"still"), Ok(5), "writable while open");
    assert_eq!(fixture.listing(fixture.resolve("/tmp").unwrap()).unwrap(), [".", ".."]);
    // It cannot be given a name again.
    let (tmp, _) = fixture.parent("/tmp/x").unwrap();
    assert_eq!(fixture.vfs.link(file, tmp, b"again"), Err(ENOENT));
    fixture.vfs.close_node(file).unwrap();
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 2);
    fixture.vfs.close_node(file).unwrap();
    let counts = fixture.vfs.counts();
    assert_eq!((counts.open_nodes, counts.tmpfs_nodes, counts.tmpfs_pages), (0, 0, 0));
    assert_eq!(fixture.vfs.stat(file), Err(ENOENT), "the id names nothing now");
    assert_eq!(fixture.vfs.close_node(file), Err(EBADF));
    // A new file never reuses the id.
    let new = fixture.create("/tmp/file").unwrap();
    assert_ne!(new, file);
}

#[test]
fn hard_links_share_a_node() {
    let mut fixture = fixture(16);
    let file = fixture.create("/tmp/one").unwrap();
    fixture.vfs.write(file, 0, b"shared").unwrap();
    fixture.make_directory("/tmp/d").unwrap();
    fixture.link("/tmp/one", "/tmp/d/two").unwrap();
    assert_eq!(fixture.resolve("/tmp/d/two"), Ok(file));
    assert_eq!(fixture.vfs.stat(file).unwrap().links, 2);
    assert_eq!(fixture.link("/tmp/one", "/tmp/d/two"), Err(EEXIST));
    assert_eq!(fixture.link("/tmp/d", "/tmp/d2"), Err(EPERM));
    assert_eq!(fixture.link("/tmp/one", "/tmp/d/."), Err(EEXIST));
    fixture.unlink("/tmp/one").unwrap();
    assert_eq!(fixture.contents(file).unwrap(), b"shared");
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 1);
    fixture.unlink("/tmp/d/two").unwrap();
    assert_eq!(fixture.vfs.counts().tmpfs_pages, 0);
    // Renaming one name onto another of the same node changes nothing.
    let file = fixture.create("/tmp/a").unwrap();
    fixture.link("/tmp/a", "/tmp/b").unwrap();
    fixture.rename("/tmp/a", "/tmp/b", 0).unwrap();
    assert_eq!((fixture.resolve("/tmp/a"), fixture.resolve("/tmp/b")), (Ok(file), Ok(file)));
}

#[test]
fn a_removed_directory_still_open_is_empty_and_closed_to_new_names() {
    let mut fixture = fixture(16);
    let directory = fixture.make_directory("/tmp/d").unwrap();
    fixture.make_directory("/tmp/d/sub").unwrap();
    assert_eq!(fixture.remove_directory("/tmp/d"), Err(ENOTEMPTY));
    fixture.remove_directory("/tmp/d/sub").unwrap();
    fixture.vfs.open_node(directory).unwrap();
    let inside = Context { pid: 1, cwd: directory, root: fixture.vfs.root(), credentials: vfs::Credentials::root() };
    assert_eq!(fixture.vfs.path_of(directory).unwrap(), b"/tmp/d");
    fixture.remove_directory("/tmp/d").unwrap();
    assert_eq!(fixture.vfs.read_directory(directory, 0), Ok(None));
    assert_eq!(fixture.vfs.create(&inside, directory, b"new", 0o644, false), Err(ENOENT));
    assert_eq!(fixture.vfs.make_directory(directory, b"new", 0o755), Err(ENOENT));
    assert_eq!(fixture.vfs.symlink(b"x", directory, b"new"), Err(ENOENT));
    assert_eq!(fixture.vfs.resolve(&inside, None, b"new", true), Err(ENOENT));
    assert_eq!(fixture.vfs.resolve(&inside, None, b"..", true), fixture.resolve("/tmp"));
    assert_eq!(fixture.vfs.path_of(directory), Err(ENOENT), "getcwd in a removed directory");
    assert_eq!(fixture.vfs.stat(directory).unwrap().links, 0);
    assert_eq!(fixture.vfs.stat(fixture.resolve("/tmp").unwrap()).unwrap().links, 2);
    assert_eq!(fixture.vfs.counts().tmpfs_nodes, 1);
    fixture.vfs.close_node(directory).unwrap();
    assert_eq!(fixture.vfs.counts().tmpfs_nodes, 0);
}

#[test]
fn listings_survive_entries_coming_and_going() {
    let mut fixture = fixture(16);
    let directory = fixture.make_directory("/tmp/d").unwrap();
    for index in 0..100 {
        fixture.create(&format!("/tmp/d/f{index}")).unwrap();
    }
    let mut listed = Vec::new();
    let mut cursor = 0;
    for _ in 0..52 {
        let (entry, next) = fixture.vfs.read_directory(directory, cursor).unwrap().unwrap();
        listed.push(String::from_utf8(entry.name).unwrap());
        cursor = next;
    }
    // Remove some already listed and some not, add new ones, replace one by a rename.
    for index in (0..100).step_by(3) {
        fixture.unlink(&format!("/tmp/d/f{index}")).unwrap();
    }
    for index in 0..20 {
        fixture.create(&format!("/tmp/d/g{index}")).unwrap();
    }
    fixture.rename("/tmp/d/g0", "/tmp/d/f1", 0).unwrap();
    fixture.rename("/tmp/d/f98", "/tmp/d/f2", RENAME_EXCHANGE).unwrap();
    while let Some((entry, next)) = fixture.vfs.read_directory(directory, cursor).unwrap() {
        listed.push(String::from_utf8(entry.name).unwrap());
        cursor = next;
    }
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "no name listed twice: {listed:?}");
    for index in (0..100).filter(|index| index % 3 != 0) {
        let name = format!("f{index}");
        assert!(unique.contains(&name), "{name}, present throughout, is listed");
    }
    assert_eq!(&listed[..2], [".", ".."]);
}

#[test]
fn ten_thousand_entries_list_in_well_under_a_second() {
    let mut fixture = fixture(16);
    let directory = fixture.make_directory("/tmp/many").unwrap();
    for index in 0..10_000 {
        fixture
            .vfs
            .create(&fixture.context.clone(), directory, format!("file-{index}").as_bytes(), 0o644, false)
            .unwrap();
    }
    let started = Instant::now();
    let listing = fixture.listing(directory).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(listing.len(), 10_002);
    assert!(elapsed.as_millis() < 250, "listing 10 000 entries took {elapsed:?}");
    let started = Instant::now();
    for index in (0..10_000).step_by(7) {
        fixture.resolve(&format!("/tmp/many/file-{index}")).unwrap();
    }
    assert!(started.elapsed().as_millis() < 250, "lookups took {:?}", started.elapsed());
}

#[test]
fn listings_have_kinds_and_the_inodes_stat_gives() {
    let mut fixture = fixture(16);
    fixture.make_directory("/tmp/d").unwrap();
    fixture.create("/tmp/f").unwrap();
    fixture.symlink("f", "/tmp/l").unwrap();
    for path in ["/", "/bin", "/tmp", "/dev", "/proc", "/proc/1", "/proc/reef"] {
        let directory = fixture.resolve(path).unwrap();
        let mut cursor = 0;
        while let Some((entry, next)) = fixture.vfs.read_directory(directory, cursor).unwrap() {
            let name = String::from_utf8(entry.name.clone()).unwrap();
            let node = fixture.vfs.lookup(&fixture.context, directory, &entry.name).unwrap();
            let stat = fixture.vfs.stat(node).unwrap();
            if name != "self" {
                assert_eq!(entry.inode, stat.inode, "{path}/{name}");
            }
            assert_eq!(u32::from(entry.kind_code), (stat.mode & mode::TYPE_MASK) >> 12, "{path}/{name}");
            cursor = next;
        }
    }
    assert_eq!(fixture.listing(fixture.resolve("/tmp").unwrap()).unwrap(), [".", "..", "d", "f", "l"]);
    assert_eq!(
        fixture.listing(fixture.resolve("/dev").unwrap()).unwrap(),
        [".", "..", "console", "null", "zero", "random", "urandom", "tty"]
    );
    assert_eq!(
        fixture.listing(fixture.resolve("/proc/42").unwrap()).unwrap(),
        [".", "..", "status", "cmdline", "stat", "comm", "fd", "exe"]
    );
    assert_eq!(
        fixture.listing(fixture.resolve("/proc/reef").unwrap()).unwrap(),
        [".", "..", "cores", "msg", "mem", "syscalls", "processes", "files", "devices", "net"]
    );
    let motd = fixture.resolve("/etc/motd").unwrap();
    assert_eq!(fixture.vfs.read_directory(motd, 0), Err(ENOTDIR));
}

#[test]
fn devices_have_linuxs_numbers() {
    let fixture = fixture(16);
    let expected = [
        ("console", Device::Console, 5, 1),
        ("null", Device::Null, 1, 3),
        ("zero", Device::Zero, 1, 5),
        ("random", Device::Random, 1, 8),
        ("urandom", Device::Random, 1, 9),
        ("tty", Device::Tty, 5, 0),
    ];
    for (name, device, major, minor) in expected {
        let node = fixture.resolve(&format!("/dev/{name}")).unwrap();
        assert_eq!(fixture.vfs.kind(node), Ok(NodeKind::Device(device)));
        let stat = fixture.vfs.stat(node).unwrap();
        assert_eq!(stat.rdev, major << 8 | minor, "{name}");
        assert_eq!(stat.mode & mode::TYPE_MASK, mode::CHARACTER_DEVICE);
        let mut buffer = [0u8; 4];
        assert_eq!(fixture.vfs.read(node, 0, &mut buffer), Err(EINVAL), "the service does device I/O");
    }
}

#[test]
fn metadata_is_what_stat_needs() {
    let mut fixture = fixture(16);
    let motd = fixture.vfs.stat(fixture.resolve("/etc/motd").unwrap()).unwrap();
    assert_eq!(
        (motd.mode, motd.size, motd.blocks, motd.links, motd.block_size),
        (mode::REGULAR | 0o644, 6, 1, 1, 4096)
    );
    // Directory link counts are counted: 2 + subdirectories (the root also counts the mounts,
    // the archive's own tmp, dev, proc and sys hidden under them).
    let root = fixture.vfs.stat(fixture.vfs.root()).unwrap();
    assert_eq!(root.links, 2 + 4 + 4);
    assert_eq!(fixture.vfs.stat(fixture.resolve("/usr").unwrap()).unwrap().links, 3);
    let proc = fixture.vfs.stat(fixture.resolve("/proc").unwrap()).unwrap();
    assert_eq!((proc.mode, proc.links), (mode::DIRECTORY | 0o555, 2 + 1 + 2));
    let status = fixture.vfs.stat(fixture.resolve("/proc/1/status").unwrap()).unwrap();
    assert_eq!((status.mode, status.size), (mode::REGULAR | 0o444, 0));
    let tmp = fixture.vfs.stat(fixture.resolve("/tmp").unwrap()).unwrap();
    assert_eq!(tmp.mode, mode::DIRECTORY | 0o1777);
    let file = fixture.create("/tmp/f").unwrap();
    fixture.vfs.set_mode(file, 0o100_4755).unwrap();
    assert_eq!(fixture.vfs.stat(file).unwrap().mode, mode::REGULAR | 0o4755, "the type stays");
    fixture.vfs.set_times(file, Some(11), None).unwrap();
    let stat = fixture.vfs.stat(file).unwrap();
    assert_eq!(stat.accessed, 11);
    assert!(stat.changed > stat.modified, "the change time moves on");
    fixture.vfs.set_times(file, None, Some(12)).unwrap();
    assert_eq!((fixture.vfs.stat(file).unwrap().accessed, fixture.vfs.stat(file).unwrap().modified), (11, 12));
    let link = fixture.symlink("0123456789", "/tmp/l").unwrap();
    assert_eq!(fixture.vfs.stat(link).unwrap().size, 10);
}

#[test]
fn proc_lists_processes_and_generates_text() {
    let fixture = fixture(16);
    let proc = fixture.resolve("/proc").unwrap();
    assert_eq!(
        fixture.listing(proc).unwrap(),
        [".", "..", "self", "cpuinfo", "interrupts", "meminfo", "mounts", "uptime", "reef", "net", "1", "42"]
    );
    let mounts = fixture.vfs.proc_contents(fixture.resolve("/proc/mounts").unwrap()).unwrap();
    assert_eq!(
        String::from_utf8(mounts).unwrap(),
        "rootfs / rootfs ro 0 0\n\
         tmpfs /tmp tmpfs rw,noatime 0 0\n\
         devtmpfs /dev devtmpfs rw,noatime 0 0\n\
         proc /proc proc rw,noatime 0 0\n\
         sysfs /sys sysfs rw,noatime 0 0\n"
    );
    let cores = fixture.resolve("/proc/reef/cores").unwrap();
    assert_eq!(fixture.vfs.kind(cores), Ok(NodeKind::ProcFile(ProcFile::Reef(ReefView::Cores))));
    assert_eq!(fixture.vfs.proc_contents(cores).unwrap(), b"Reef(Cores)\n");
    let status = fixture.resolve("/proc/42/status").unwrap();
    assert_eq!(fixture.vfs.proc_contents(status).unwrap(), b"Status(42)\n");
    assert_eq!(fixture.vfs.path_of(fixture.resolve("/proc/42").unwrap()).unwrap(), b"/proc/42");
    assert_eq!(fixture.vfs.path_of(fixture.resolve("/proc/reef").unwrap()).unwrap(), b"/proc/reef");
    let net = fixture.resolve("/proc/net").unwrap();
    assert_eq!(fixture.listing(net).unwrap(), [".", "..", "dev", "route", "tcp", "udp"]);
    assert_eq!(fixture.vfs.path_of(net).unwrap(), b"/proc/net");
    let tcp = fixture.resolve("/proc/net/tcp").unwrap();
    assert_eq!(fixture.vfs.proc_contents(tcp).unwrap(), b"Net(Tcp)\n");
    assert_eq!(fixture.resolve("/proc/7"), Err(ENOENT));
    assert_eq!(fixture.resolve("/proc/042"), Err(ENOENT));
    assert_eq!(fixture.vfs.proc_contents(proc), Err(EISDIR));
    assert_eq!(fixture.vfs.proc_contents(fixture.resolve("/etc/motd").unwrap()), Err(EINVAL));
    let mut buffer = [0u8; 4];
    assert_eq!(fixture.vfs.read(status, 0, &mut buffer), Err(EINVAL), "read proc_contents once instead");
    // A process that exits takes its nodes with it; a listing in progress goes on.
    let (entry, cursor) = fixture.vfs.read_directory(proc, 10).unwrap().unwrap();
    assert_eq!(entry.name, b"1");
    fixture.processes.0.lock().unwrap().retain(|&pid| pid != 42);
    fixture.processes.0.lock().unwrap().push(7);
    assert_eq!(fixture.vfs.stat(status), Err(ENOENT));
    assert_eq!(fixture.vfs.proc_contents(status), Err(ENOENT));
    let (entry, cursor) = fixture.vfs.read_directory(proc, cursor).unwrap().unwrap();
    assert_eq!(entry.name, b"7");
    assert_eq!(fixture.vfs.read_directory(proc, cursor), Ok(None));
}

#[test]
fn getcwd_paths() {
    let mut fixture = fixture(16);
    fixture.make_directory("/tmp/a").unwrap();
    let b = fixture.make_directory("/tmp/a/b").unwrap();
    for (path, expected) in
        [("/", "/"), ("/usr/bin", "/usr/bin"), ("/tmp", "/tmp"), ("/dev", "/dev"), ("/proc", "/proc")]
    {
        assert_eq!(fixture.vfs.path_of(fixture.resolve(path).unwrap()).unwrap(), expected.as_bytes());
    }
    assert_eq!(fixture.vfs.path_of(b).unwrap(), b"/tmp/a/b");
    fixture.rename("/tmp/a", "/tmp/c", 0).unwrap();
    assert_eq!(fixture.vfs.path_of(b).unwrap(), b"/tmp/c/b");
    assert_eq!(fixture.vfs.path_of(fixture.resolve("/etc/motd").unwrap()), Err(ENOTDIR));
    // Names are bytes: one that is not UTF-8 comes back as it went in.
    let (tmp, _) = fixture.parent("/tmp/x").unwrap();
    let odd = fixture.vfs.make_directory(tmp, b"\xff\xfe", 0o755).unwrap();
    assert_eq!(fixture.vfs.path_of(odd).unwrap(), b"/tmp/\xff\xfe");
}

#[test]
fn no_archive_gives_an_empty_root_with_the_mounts() {
    let processes = Box::new(Processes::default());
    let vfs = Vfs::new(None, Box::new(HeapPageStore::new()), 8, clock, processes, Arc::new(Cores::new(1)));
    let context = Context { pid: 1, cwd: vfs.root(), root: vfs.root(), credentials: vfs::Credentials::root() };
    let mut names = Vec::new();
    let mut cursor = 0;
    while let Some((entry, next)) = vfs.read_directory(vfs.root(), cursor).unwrap() {
        names.push(entry.name);
        cursor = next;
    }
    assert_eq!(names, [&b"."[..], b"..", b"tmp", b"dev", b"proc", b"sys"]);
    assert!(vfs.resolve(&context, None, b"/dev/null", true).is_ok());
    assert_eq!(vfs.resolve(&context, None, b"/bin/sh", true), Err(ENOENT));
    assert_eq!(vfs.stat(vfs.root()).unwrap().links, 2 + 4);
}

#[test]
fn a_walk_needs_search_permission_for_everyone_but_root() {
    let mut fixture = fixture(16);
    let private = fixture.make_directory("/tmp/private").unwrap();
    let inner = fixture.create("/tmp/private/file").unwrap();
    fixture.vfs.set_mode(private, 0o700).unwrap();
    fixture.vfs.set_owner(private, Some(1000), Some(1000)).unwrap();
    let as_user = |uid: u32, groups: Vec<u32>| Context {
        credentials: vfs::Credentials { uid, gid: uid, groups },
        ..fixture.context.clone()
    };
    let resolve = |vfs: &Vfs, context: &Context| vfs.resolve(context, None, b"/tmp/private/file", true);
    assert_eq!(resolve(&fixture.vfs, &as_user(1000, vec![])), Ok(inner), "the owner searches its directory");
    assert_eq!(resolve(&fixture.vfs, &as_user(1001, vec![1000])), Err(EACCES), "another user may not");
    assert_eq!(resolve(&fixture.vfs, &fixture.context), Ok(inner), "root may");
    let member = as_user(1001, vec![1000]);
    fixture.vfs.set_mode(private, 0o710).unwrap();
    assert_eq!(resolve(&fixture.vfs, &member), Ok(inner), "a member of its group may, with group x");
    assert_eq!(fixture.vfs.stat(private).unwrap().uid, 1000, "chown gives the owner");
    assert_eq!(fixture.vfs.set_owner(fixture.resolve("/etc/motd").unwrap(), Some(1), None), Err(EROFS));
    let motd = fixture.resolve("/etc/motd").unwrap();
    assert_eq!(fixture.vfs.set_owner(motd, Some(0), Some(0)), Ok(()), "a chown that changes nothing succeeds");
    let file = fixture.create("/tmp/setuid").unwrap();
    fixture.vfs.set_mode(file, 0o6755).unwrap();
    fixture.vfs.set_owner(file, Some(5), None).unwrap();
    assert_eq!(fixture.vfs.stat(file).unwrap().mode & 0o7777, 0o755, "a chown clears the set-id bits");
}
