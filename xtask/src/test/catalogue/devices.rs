//! Devices: the virtio-9p transport of a `--share`, found by instance 0 and driven through
//! its interrupt.

use super::exec;
use crate::qemu::{HostAction, Machine, Share};
use crate::test::runner::Integration;
use crate::test::serial::{all_tests_passed, banners, printed_in_order};
use crate::tools;
use std::path::{Path, PathBuf};

/// The directory the device test shares (made here, with one file, when the list is built).
fn shared_directory() -> std::path::PathBuf {
    let directory = tools::root().join("target/test-share");
    // A failure shows as the run's: QEMU refuses a missing directory.
    let _ = std::fs::create_dir_all(&directory);
    let _ = std::fs::write(directory.join("hello.txt"), b"hello from the host\n");
    directory
}

/// Two cores with one share and no mount point: instance 0 logs the 9P device with its tag and
/// interrupt line (transport `i` raises GSI `24 + i`, on microvm's second I/O APIC), and a raw
/// `Tversion` goes through `NinePDevice::call` and comes back woken by that interrupt.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    host_files(list, machine);
    host_changes(list, machine);
    list.push(Integration {
        name: "virtio-9p-2-cores".into(),
        machine: {
            let mut m = machine(2, "test=virtio-9p-version,boot");
            // No mount point: the file service leaves the device to the test, whose Tversion
            // would end the session of a mounted share.
            m.shares = vec![Share { directory: shared_directory(), mount_point: String::new() }];
            m
        },
        expected_status: 0,
        check: Box::new(|serial| {
            banners(serial, 2)?;
            let line = serial
                .lines()
                .find(|l| l.starts_with("[c0 INFO ] devices: core 0 owns virtio-9p at "))
                .ok_or("instance 0 logged no virtio-9p device")?;
            if !line.ends_with(": tag `share0`, no mount point (the command line has no share=share0:/path)") {
                return Err(format!("the device line names another tag or mount point: {line}"));
            }
            let number_after = |word: &str| -> Option<u32> {
                let rest = &line[line.find(word)? + word.len()..];
                rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
            };
            let (slot, gsi) = (number_after("(transport "), number_after(", GSI "));
            match (slot, gsi) {
                (Some(slot), Some(gsi)) if gsi == 24 + slot => {}
                _ => return Err(format!("the device's GSI is not 24 + its transport: {line}")),
            }
            all_tests_passed(serial, 2)?;
            let test = serial
                .lines()
                .find(|l| l.starts_with("TEST virtio-9p-version ok core 0: tag share0 mount point none"))
                .ok_or("no `TEST virtio-9p-version ok` line for share0")?;
            test.contains("Rversion msize").then_some(()).ok_or(format!("no Rversion in `{test}`"))
        }),
    });
}

/// The tree the host-files test shares, made anew each time the list is built: a text file,
/// 1 MiB of varied bytes, and a directory of 300 files (more than one listing batch holds).
fn host_tree() -> PathBuf {
    let directory = tools::root().join("target/test-host-files");
    let _ = std::fs::remove_dir_all(&directory);
    // A failure shows as the run's: QEMU refuses a missing directory.
    let _ = std::fs::create_dir_all(directory.join("many"));
    let _ = std::fs::write(directory.join("hello.txt"), b"hello from the host\n");
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let _ = std::fs::write(directory.join("big"), big);
    for index in 0..300 {
        let _ = std::fs::write(directory.join(format!("many/f{index:03}")), index.to_string());
    }
    directory
}

/// An empty host directory `target/test-<name>-share`, shared at `/host`: a place for a test's
/// junk on the host side.
pub(super) fn scratch_share(name: &str) -> Share {
    let directory = tools::root().join(format!("target/test-{name}-share"));
    let _ = std::fs::remove_dir_all(&directory);
    // A failure shows as the run's: QEMU refuses a missing directory.
    let _ = std::fs::create_dir_all(&directory);
    Share { directory, mount_point: "/host".into() }
}

/// The host's `sha256sum` digest of `path`.
fn host_digest(path: &Path) -> Result<String, String> {
    let output = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(|e| format!("running sha256sum on the host: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace().next().map(str::to_string).ok_or(format!("no digest from the host for {}", path.display()))
}

/// A host directory at `/host` used as a user would, from three cores: read on core 1,
/// hashed on core 2 (the host's digest), written on core 1 and found on the host's disk byte
/// for byte; names made, moved, linked and removed; a large directory listed whole; no fid
/// of an open file left at the end.
fn host_files(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let tree = host_tree();
    let script = "set -e; cd /host; ls -l hello.txt; on 1 cat /host/hello.txt; on 2 sha256sum /host/big; \
                  mkdir -p made/d; echo written on core 1 | on 1 tee /host/made/from-core-1; \
                  mv made/from-core-1 made/moved; ln -s moved made/link; cat made/link; ln made/moved made/hard; \
                  stat -c '%h links' made/moved; dd if=/dev/zero of=made/z bs=4096 count=100; \
                  truncate -s 1000 made/z; wc -c made/z; rm made/z made/hard made/link; rmdir made/d; \
                  ls many | wc -l; on 2 find /host/many -type f | wc -l; cat /host/many/f299; echo; \
                  grep -c 9p /proc/mounts; cat /proc/reef/files; echo end";
    let mut m = machine(3, &exec(script));
    m.shares = vec![Share { directory: tree.clone(), mount_point: "/host".into() }];
    list.push(Integration {
        name: "host-files-3-cores".into(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            let digest = host_digest(&tree.join("big"))?;
            printed_in_order(
                serial,
                &[
                    " 20 ",
                    "hello.txt\n",
                    "hello from the host\n",
                    &format!("{digest}  /host/big"),
                    "written on core 1\n",
                    "written on core 1\n",
                    "2 links",
                    "100+0 records out",
                    "1000 made/z",
                    "\n300\n",
                    "300\n",
                    "299\n1\n",
                    "share fids opened 0",
                    "end",
                ],
            )?;
            let written = std::fs::read(tree.join("made/moved")).map_err(|e| format!("made/moved on the host: {e}"))?;
            if written != b"written on core 1\n" {
                return Err(format!("the host holds {:?} in made/moved", String::from_utf8_lossy(&written)));
            }
            let left: Vec<String> = std::fs::read_dir(tree.join("made"))
                .map_err(|e| format!("made on the host: {e}"))?
                .filter_map(|entry| entry.ok().map(|entry| entry.file_name().to_string_lossy().into_owned()))
                .collect();
            if left != ["moved"] {
                return Err(format!("the host's made/ should hold only `moved`, it holds {left:?}"));
            }
            Ok(())
        }),
    });
}

/// The host changes a share under a running guest: a file rewritten longer and a new file are
/// seen from core 1 once the cache rule's second has passed (docs/files.md, "The cache
/// rule"); then the shared directory is removed on the host: the guest's calls on it fail,
/// no fid stays open, and the kernel lives.
fn host_changes(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let share = tools::root().join("target/test-host-changes/share");
    let _ = std::fs::remove_dir_all(&share);
    let prepared = std::fs::create_dir_all(&share).and_then(|()| std::fs::write(share.join("note"), "first\n"));
    // The markers are printed by `echo` from arithmetic, so the command line never holds them.
    let script = "cat /host/note; stat -c %s /host/note; cat /host/later; echo ready-$((1)); read go; \
                  sleep 1.2; on 1 cat /host/note; stat -c 'size %s' /host/note; on 1 cat /host/later; \
                  echo gone-$((2)); read go; ls /host; on 1 cat /host/note; echo status $?; sleep 1.2; \
                  cat /host/note; echo status $?; cat /proc/reef/files; echo alive";
    let mut m = machine(2, &exec(script));
    m.shares = vec![Share { directory: share.clone(), mount_point: "/host".into() }];
    m.host_actions = vec![
        ("ready-1".into(), HostAction::Write(share.join("note"), b"second, longer\n".to_vec())),
        ("ready-1".into(), HostAction::Write(share.join("later"), b"made on the host\n".to_vec())),
        ("gone-2".into(), HostAction::RemoveDirectory(share.clone())),
    ];
    m.typed = vec![("ready-1".into(), "go\n".into()), ("gone-2".into(), "go\n".into())];
    list.push(Integration {
        name: "host-changes-2-cores".into(),
        machine: m,
        expected_status: 0,
        check: Box::new(move |serial| {
            prepared.as_ref().map_err(|e| format!("preparing {}: {e}", share.display()))?;
            printed_in_order(
                serial,
                &[
                    "first\n",
                    "6\n",
                    "can't open '/host/later': No such file or directory",
                    "ready-1",
                    "second, longer\n",
                    "size 15",
                    "made on the host\n",
                    "gone-2",
                    // Named a moment ago: opened from the cache, the read finds it gone.
                    "No such file or directory\nstatus 1",
                    "can't open '/host/note': No such file or directory",
                    "status 1",
                    "share fids opened 0",
                    "alive",
                ],
            )
        }),
    });
}
