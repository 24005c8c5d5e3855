//! The local view of the initramfs (`ArchiveView`) answers exactly what the service's walk
//! answers, or asks.

mod common;

use common::{clock, Cores, Processes};
use initramfs::{Archive, Writer};
use std::sync::Arc;
use vfs::{ArchiveView, Context, Credentials, Errno, HeapPageStore, Local, Metadata, Vfs};

/// Directories, files, a private directory, links (relative, absolute, into a mount,
/// dangling, empty, a loop), and a directory a share will be mounted over.
fn archive_bytes() -> &'static [u8] {
    let mut writer = Writer::new();
    writer.directory("bin", 0o755);
    writer.file("bin/busybox", 0o755, b"\x7fELF");
    writer.symlink("bin/sh", "busybox");
    writer.symlink("bin/abs", "/bin/busybox");
    writer.directory("etc", 0o755);
    writer.file("etc/passwd", 0o644, b"root:x:0:0::/root:/bin/sh\n");
    writer.symlink("etc/tmp-link", "/tmp/x");
    writer.symlink("etc/dangling", "nowhere");
    writer.symlink("etc/loop", "loop");
    writer.directory("etc/private", 0o700);
    writer.file("etc/private/key", 0o600, b"k");
    writer.directory("tmp", 0o1777);
    writer.directory("www", 0o755);
    writer.file("www/index.html", 0o644, b"<p>");
    Box::leak(writer.finish().into_boxed_slice())
}

fn service_stat(vfs: &Vfs, path: &[u8], follow: bool, credentials: &Credentials) -> Result<Metadata, Errno> {
    let context = Context { pid: 1, cwd: vfs.root(), root: vfs.root(), credentials: credentials.clone() };
    vfs.stat(vfs.resolve(&context, None, path, follow)?)
}

#[test]
fn local_answers_are_the_services() {
    let vfs = Vfs::new(
        Archive::parse(archive_bytes()).ok(),
        Box::new(HeapPageStore::new()),
        64,
        clock,
        Box::new(Processes::default()),
        Arc::new(Cores::new(2)),
    );
    let view = ArchiveView::new(Archive::parse(archive_bytes()).ok(), &[b"/www"]);
    let user = Credentials { uid: 1000, gid: 1000, groups: Vec::new() };
    let paths: [&[u8]; 23] = [
        b"/bin",
        b"/bin/",
        b"/bin/busybox",
        b"/bin/busybox/",
        b"/bin/sh",
        b"/bin/abs",
        b"//bin//./sh",
        b"/bin/../etc/passwd",
        b"/../../etc/passwd",
        b"/etc/passwd/x",
        b"/etc/missing",
        b"/missing/x",
        b"/etc/dangling",
        b"/etc/loop",
        b"/etc/private/key",
        b"/etc/private",
        b"/etc/tmp-link",
        b"/tmp/x",
        b"/proc/self",
        b"/www/index.html",
        b"/",
        b"/etc/\0",
        b"",
    ];
    let mut answered = 0;
    for path in paths {
        for follow in [true, false] {
            for credentials in [Credentials::root(), user.clone()] {
                let service = service_stat(&vfs, path, follow, &credentials);
                let what = format!("{:?} follow {follow} uid {}", String::from_utf8_lossy(path), credentials.uid);
                match view.stat(path, follow, &credentials) {
                    Local::Found(metadata) => {
                        assert_eq!(service, Ok(metadata), "{what}");
                        answered += 1;
                    }
                    Local::Failed(error) => {
                        assert_eq!(service, Err(error), "{what}");
                        answered += 1;
                    }
                    Local::Ask => {}
                }
            }
        }
    }
    assert!(answered >= 60, "most of the sample is answered locally: {answered}");
    let root = Credentials::root();
    assert_eq!(view.stat(b"/tmp/x", true, &root), Local::Ask, "a mount point");
    assert_eq!(view.stat(b"/etc/tmp-link", true, &root), Local::Ask, "a link into a mount");
    assert!(matches!(view.stat(b"/etc/tmp-link", false, &root), Local::Found(_)), "the link itself is local");
    assert_eq!(view.stat(b"/www/index.html", true, &root), Local::Ask, "a share's mount point");
    assert_eq!(view.stat(b"/", true, &root), Local::Ask, "the root's links count the mounts");
    assert_eq!(view.stat(b"relative", true, &root), Local::Ask);
    assert_eq!(view.stat(b"/etc/private/key", true, &user), Local::Failed(linux_raw_sys::errno::EACCES));
    assert_eq!(view.stat(b"/etc/loop", true, &root), Local::Failed(linux_raw_sys::errno::ELOOP));
    assert_eq!(view.stat(b"/etc/missing", true, &user), Local::Failed(linux_raw_sys::errno::ENOENT));
}
