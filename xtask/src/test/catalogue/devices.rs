//! Devices: the virtio-9p transport of a `--share`, found by instance 0 and driven through
//! its interrupt.

use super::exec;
use crate::qemu::{Machine, Share};
use crate::test::runner::Integration;
use crate::test::serial::{all_tests_passed, banners, printed};
use crate::tools;

/// The directory the device test shares (made here, with one file, when the list is built).
fn shared_directory() -> std::path::PathBuf {
    let directory = tools::root().join("target/test-share");
    // A failure shows as the run's: QEMU refuses a missing directory.
    let _ = std::fs::create_dir_all(&directory);
    let _ = std::fs::write(directory.join("hello.txt"), b"hello from the host\n");
    directory
}

/// Two cores with two shares of one directory: instance 0 logs each 9P device with its tag,
/// mount point and interrupt line (transport `i` raises GSI `24 + i`, on microvm's second I/O
/// APIC); the file service mounts `share0` at /host, which core 1 reads; `share1`, whose mount
/// point the kernel is not told, stays unmounted, and a raw `Tversion` goes through its
/// `NinePDevice::call` and comes back woken by its interrupt (a `Tversion` on a mounted share
/// would reset the file service's session).
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    list.push(Integration {
        name: "virtio-9p-2-cores".into(),
        machine: {
            let mut m = machine(2, &format!("test=virtio-9p-version,boot {}", exec("on 1 cat /host/hello.txt")));
            let directory = shared_directory();
            m.shares = vec![
                Share { directory: directory.clone(), mount_point: Some("/host".into()) },
                Share { directory, mount_point: None },
            ];
            m
        },
        expected_status: 0,
        check: Box::new(|serial| {
            banners(serial, 2)?;
            let line = serial
                .lines()
                .find(|l| l.starts_with("[c0 INFO ] devices: core 0 owns virtio-9p at ") && l.contains("tag `share0`"))
                .ok_or("instance 0 logged no virtio-9p device tagged share0")?;
            if !line.ends_with(": tag `share0`, mount point /host") {
                return Err(format!("share0's device line names another mount point: {line}"));
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
                .find(|l| l.starts_with("TEST virtio-9p-version ok core 0: tag share1 mount point none"))
                .ok_or("no `TEST virtio-9p-version ok` line for share1")?;
            if !test.contains("Rversion msize") {
                return Err(format!("no Rversion in `{test}`"));
            }
            printed(serial, "hello from the host", "core 1 did not read /host/hello.txt through the mounted share")
        }),
    });
}
