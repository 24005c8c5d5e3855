//! `/sys`: Linux's CPU hotplug files over a machine of four fake cores the tests stop and start.

mod common;

use common::{fixture, Fixture};
use initramfs::mode;
use linux_raw_sys::errno::*;
use linux_raw_sys::general::{DT_DIR, DT_REG};
use vfs::{NodeKind, SysFile, SysRequest};

const CPU: &str = "/sys/devices/system/cpu";

/// The text of the `/sys` file at `path`, as a string.
fn text(fixture: &Fixture, path: &str) -> String {
    let node = fixture.resolve(path).unwrap();
    String::from_utf8(fixture.vfs.sys_contents(node).unwrap()).unwrap()
}

/// What writing `data` to the `/sys` file at `path` does, as the service does it: decode,
/// then invoke.
fn write(fixture: &Fixture, path: &str, data: &[u8]) -> Result<(), Errno> {
    let node = fixture.resolve(path)?;
    match fixture.vfs.decode_sys_write(node, data)? {
        Some(request) => request.invoke(&*fixture.vfs.sys_source()),
        None => Ok(()),
    }
}

type Errno = vfs::Errno;

#[test]
fn sys_lists_the_cores_and_their_files() {
    let fixture = fixture(16);
    let listing = |path: &str| fixture.listing(fixture.resolve(path).unwrap()).unwrap();
    assert_eq!(listing("/sys"), [".", "..", "devices"]);
    assert_eq!(listing("/sys/devices"), [".", "..", "system"]);
    assert_eq!(listing("/sys/devices/system"), [".", "..", "cpu"]);
    assert_eq!(listing(CPU), [".", "..", "cpu0", "cpu1", "cpu2", "cpu3", "offline", "online", "possible", "present"]);
    assert_eq!(listing(&format!("{CPU}/cpu3")), [".", "..", "online"]);
    // Every entry is what a lookup of its name finds, with its type.
    let cpu = fixture.resolve(CPU).unwrap();
    let mut cursor = 2;
    while let Some((entry, next)) = fixture.vfs.read_directory(cpu, cursor).unwrap() {
        let name = String::from_utf8(entry.name).unwrap();
        let node = fixture.resolve(&format!("{CPU}/{name}")).unwrap();
        assert_eq!(entry.inode, fixture.vfs.stat(node).unwrap().inode, "{name}");
        let directory = fixture.vfs.kind(node) == Ok(NodeKind::Directory);
        assert_eq!(u32::from(entry.kind_code), if directory { DT_DIR } else { DT_REG }, "{name}");
        cursor = next;
    }
    // Paths climb back out: `..`, getcwd, and `..` of /sys is /.
    let core_two = fixture.resolve(&format!("{CPU}/cpu2")).unwrap();
    assert_eq!(fixture.vfs.path_of(core_two).unwrap(), format!("{CPU}/cpu2").as_bytes());
    assert_eq!(fixture.resolve(&format!("{CPU}/cpu2/../../..")), fixture.resolve("/sys/devices"));
    assert_eq!(fixture.resolve("/sys/.."), Ok(fixture.vfs.root()));
    assert_eq!(fixture.vfs.path_of(fixture.resolve("/sys").unwrap()).unwrap(), b"/sys");
    // Only the listed cores, named as Linux names them.
    for missing in ["cpu4", "cpu01", "cpu", "cpu-1", "cpu1x", "cpu99999999999999999999"] {
        assert_eq!(fixture.resolve(&format!("{CPU}/{missing}")), Err(ENOENT), "{missing}");
    }
    assert_eq!(fixture.resolve("/sys/system"), Err(ENOENT));
    assert_eq!(fixture.resolve(&format!("{CPU}/online/x")), Err(ENOTDIR));
}

#[test]
fn cpu0_has_no_online_file() {
    let fixture = fixture(16);
    assert_eq!(fixture.resolve(&format!("{CPU}/cpu0/online")), Err(ENOENT));
    assert_eq!(fixture.listing(fixture.resolve(&format!("{CPU}/cpu0")).unwrap()).unwrap(), [".", ".."]);
    assert_eq!(write(&fixture, &format!("{CPU}/cpu0/online"), b"0\n"), Err(ENOENT));
    assert!(fixture.cores.switches().is_empty());
    let one = fixture.resolve(&format!("{CPU}/cpu1/online")).unwrap();
    assert_eq!(fixture.vfs.kind(one), Ok(NodeKind::SysFile(SysFile::CoreOnline(1))));
}

#[test]
fn sys_text_follows_the_cores() {
    let fixture = fixture(16);
    assert_eq!(text(&fixture, &format!("{CPU}/online")), "0-3\n");
    assert_eq!(text(&fixture, &format!("{CPU}/offline")), "\n");
    fixture.cores.set(2, false);
    assert_eq!(text(&fixture, &format!("{CPU}/online")), "0-1,3\n");
    assert_eq!(text(&fixture, &format!("{CPU}/offline")), "2\n");
    assert_eq!(text(&fixture, &format!("{CPU}/possible")), "0-3\n");
    assert_eq!(text(&fixture, &format!("{CPU}/present")), "0-3\n");
    assert_eq!(text(&fixture, &format!("{CPU}/cpu1/online")), "1\n");
    assert_eq!(text(&fixture, &format!("{CPU}/cpu2/online")), "0\n");
    fixture.cores.set(1, false);
    assert_eq!(text(&fixture, &format!("{CPU}/online")), "0,3\n");
    assert_eq!(text(&fixture, &format!("{CPU}/offline")), "1-2\n");
    // Directories and files of other mounts have no such text.
    assert_eq!(fixture.vfs.sys_contents(fixture.resolve(CPU).unwrap()), Err(EISDIR));
    assert_eq!(fixture.vfs.sys_contents(fixture.resolve("/proc/uptime").unwrap()), Err(EINVAL));
    // Read once at open, through sys_contents, as /proc files are.
    let online = fixture.resolve(&format!("{CPU}/online")).unwrap();
    assert_eq!(fixture.vfs.read(online, 0, &mut [0; 8]), Err(EINVAL));
}

#[test]
fn writing_zero_or_one_stops_or_starts_a_core() {
    let fixture = fixture(16);
    let switch = format!("{CPU}/cpu1/online");
    assert_eq!(write(&fixture, &switch, b"0\n"), Ok(()));
    assert_eq!(fixture.cores.switches(), [(1, false)]);
    assert_eq!(text(&fixture, &switch), "0\n");
    assert_eq!(text(&fixture, &format!("{CPU}/online")), "0,2-3\n");
    // The state a core is in already: success, and the core is not asked.
    assert_eq!(write(&fixture, &switch, b"0"), Ok(()));
    assert_eq!(fixture.cores.switches(), [(1, false)]);
    assert_eq!(write(&fixture, &switch, b"1"), Ok(()));
    assert_eq!(write(&fixture, &switch, b"1\n"), Ok(()));
    assert_eq!(fixture.cores.switches(), [(1, false), (1, true)]);
    assert_eq!(text(&fixture, &switch), "1\n");
    // An empty write asks nothing.
    let node = fixture.resolve(&switch).unwrap();
    assert_eq!(fixture.vfs.decode_sys_write(node, b""), Ok(None));
    assert_eq!(
        fixture.vfs.decode_sys_write(fixture.resolve(&format!("{CPU}/cpu3/online")).unwrap(), b"0"),
        Ok(Some(SysRequest::SetOnline { core: 3, online: false }))
    );
    // Anything else is EINVAL, and the core is not asked.
    for garbage in [&b"2"[..], b"00", b"1\n\n", b" 1", b"on", b"\n", b"1 ", b"yes", &[0xff]] {
        assert_eq!(write(&fixture, &switch, garbage), Err(EINVAL), "{garbage:?}");
    }
    assert_eq!(fixture.cores.switches().len(), 2);
    // A refusal from the kernel is the write's error; the state stays.
    *fixture.cores.refusal.lock().unwrap() = Some(EBUSY);
    assert_eq!(write(&fixture, &switch, b"0\n"), Err(EBUSY));
    assert_eq!(text(&fixture, &switch), "1\n");
}

#[test]
fn only_a_cores_online_file_takes_writes() {
    let mut fixture = fixture(16);
    for path in ["online", "offline", "possible", "present"] {
        let node = fixture.resolve(&format!("{CPU}/{path}")).unwrap();
        assert_eq!(fixture.vfs.decode_sys_write(node, b"1\n"), Err(EACCES), "{path}");
    }
    assert_eq!(fixture.vfs.decode_sys_write(fixture.resolve(CPU).unwrap(), b"1"), Err(EISDIR));
    assert_eq!(fixture.vfs.decode_sys_write(fixture.resolve("/etc/motd").unwrap(), b"1"), Err(EINVAL));
    // The VFS's own write and truncate are not the way in.
    let switch = fixture.resolve(&format!("{CPU}/cpu1/online")).unwrap();
    assert_eq!(fixture.vfs.write(switch, 0, b"0"), Err(EINVAL));
    assert_eq!(fixture.vfs.truncate(switch, 0), Err(EINVAL));
    assert!(fixture.cores.switches().is_empty());
}

#[test]
fn sys_takes_no_new_names_and_no_changes() {
    let mut fixture = fixture(16);
    // An open with O_CREAT of a new name: EACCES, as Linux's sysfs (no `create`).
    for path in ["/sys/new", "/sys/devices/new", &format!("{CPU}/new"), &format!("{CPU}/cpu0/online")] {
        assert_eq!(fixture.create(path), Err(EACCES), "{path}");
        assert_eq!(fixture.make_directory(path), Err(EPERM), "{path}");
        assert_eq!(fixture.symlink("x", path), Err(EPERM), "{path}");
    }
    // O_CREAT of an existing file, as `echo 0 > .../online` opens it, finds it.
    let switch = fixture.resolve(&format!("{CPU}/cpu1/online")).unwrap();
    assert_eq!(fixture.create(&format!("{CPU}/cpu1/online")), Ok(switch));
    assert_eq!(fixture.unlink(&format!("{CPU}/cpu1/online")), Err(EPERM));
    assert_eq!(fixture.remove_directory(&format!("{CPU}/cpu1")), Err(EPERM));
    assert_eq!(fixture.rename(&format!("{CPU}/online"), &format!("{CPU}/up"), 0), Err(EPERM));
    assert_eq!(fixture.rename(&format!("{CPU}/online"), "/tmp/up", 0), Err(EXDEV));
    assert_eq!(fixture.link(&format!("{CPU}/online"), &format!("{CPU}/up")), Err(EPERM));
    assert_eq!(fixture.vfs.set_mode(switch, 0o600), Err(EPERM));
    assert_eq!(fixture.vfs.set_times(switch, Some(1), Some(2)), Err(EPERM));
    assert_eq!(fixture.remove_directory("/sys"), Err(EBUSY));
    assert_eq!(fixture.vfs.counts().tmpfs_nodes, 0);
}

#[test]
fn sys_modes_and_links_are_linuxs() {
    let fixture = fixture(16);
    let stat = |path: &str| fixture.vfs.stat(fixture.resolve(path).unwrap()).unwrap();
    // Linux: `dr-xr-xr-x` /sys, `drwxr-xr-x` below, `-rw-r--r--` cpuN/online, `-r--r--r--`
    // the rest; every attribute says it is a page long.
    assert_eq!((stat("/sys").mode, stat("/sys").links), (mode::DIRECTORY | 0o555, 3));
    assert_eq!((stat("/sys/devices").mode, stat("/sys/devices").links), (mode::DIRECTORY | 0o755, 3));
    assert_eq!(stat(CPU).links, 2 + 4);
    assert_eq!((stat(&format!("{CPU}/cpu1")).mode, stat(&format!("{CPU}/cpu1")).links), (mode::DIRECTORY | 0o755, 2));
    let switch = stat(&format!("{CPU}/cpu1/online"));
    assert_eq!((switch.mode, switch.size, switch.links), (mode::REGULAR | 0o644, 4096, 1));
    for file in ["online", "offline", "possible", "present"] {
        assert_eq!(stat(&format!("{CPU}/{file}")).mode, mode::REGULAR | 0o444, "{file}");
    }
    assert_ne!(stat("/sys").device, stat("/proc").device);
    assert!(SysFile::CoreOnline(1).is_writable());
    assert!(!SysFile::Online.is_writable());
}
