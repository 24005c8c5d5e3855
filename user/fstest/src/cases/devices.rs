//! The files the kernel makes up: `/dev/null`, `/dev/zero`, `/dev/urandom`, `/proc`.

use super::{Case, Context};
use crate::expect::{expect, expect_equal, expect_zeros, Outcome, Step};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

pub const CASES: [Case; 6] = [
    Case { name: "dev-null", run: dev_null },
    Case { name: "dev-zero", run: dev_zero },
    Case { name: "dev-urandom", run: dev_urandom },
    Case { name: "proc-self-status", run: proc_self_status },
    Case { name: "proc-cpuinfo", run: proc_cpuinfo },
    Case { name: "proc-mounts", run: proc_mounts },
];

fn dev_null(_: &Context) -> Outcome {
    let mut null = OpenOptions::new().read(true).write(true).open("/dev/null").step("open /dev/null")?;
    let mut buffer = [0u8; 64];
    expect_equal("read of /dev/null", null.read(&mut buffer).step("read")?, 0)?;
    expect_equal("write of 1000 bytes to /dev/null", null.write(&[b'v'; 1000]).step("write")?, 1000)?;
    expect_equal("read after the write", null.read(&mut buffer).step("read")?, 0)?;
    Ok("reads 0 (EOF), takes 1000 bytes, still reads 0".into())
}

fn dev_zero(_: &Context) -> Outcome {
    let mut zero = File::open("/dev/zero").step("open /dev/zero")?;
    // Filled first, so a read that writes nothing cannot pass for zeros.
    let mut buffer = vec![0xa5u8; 10_000];
    zero.read_exact(&mut buffer).step("read 10000 bytes")?;
    expect_zeros("/dev/zero", &buffer)?;
    Ok("10000 zero bytes".into())
}

fn dev_urandom(_: &Context) -> Outcome {
    let mut random = File::open("/dev/urandom").step("open /dev/urandom")?;
    let (mut first, mut second) = ([0u8; 16], [0u8; 16]);
    random.read_exact(&mut first).step("read 16 bytes")?;
    random.read_exact(&mut second).step("read 16 more")?;
    expect(first != [0; 16], "16 bytes of /dev/urandom are all zero")?;
    expect(first != second, "two reads of /dev/urandom gave the same 16 bytes")?;
    Ok("16 bytes, not all zero, then 16 others".into())
}

fn proc_self_status(_: &Context) -> Outcome {
    let status = fs::read_to_string("/proc/self/status").step("reading /proc/self/status")?;
    let pid = status
        .lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .ok_or_else(|| format!("no `Pid:` line in /proc/self/status ({} lines)", status.lines().count()))?
        .trim();
    expect_equal("the `Pid:` line", pid, std::process::id().to_string().as_str())?;
    Ok(format!("Pid: {pid}, as getpid says"))
}

fn proc_cpuinfo(_: &Context) -> Outcome {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").step("reading /proc/cpuinfo")?;
    let processors =
        cpuinfo.lines().filter(|line| line.split(':').next().is_some_and(|key| key.trim() == "processor")).count();
    expect(processors >= 1, "no `processor` line in /proc/cpuinfo")?;
    Ok(format!("{processors} `processor` lines"))
}

/// The mount point of each line of `/proc/mounts` (`device mountpoint type options 0 0`).
fn mount_points(mounts: &str) -> Vec<&str> {
    mounts.lines().filter_map(|line| line.split_whitespace().nth(1)).collect()
}

fn proc_mounts(context: &Context) -> Outcome {
    let mounts = fs::read_to_string("/proc/mounts").step("reading /proc/mounts")?;
    let points = mount_points(&mounts);
    expect(points.contains(&"/"), format_args!("/proc/mounts lists no `/`: {points:?}"))?;
    if points.contains(&"/tmp") {
        return Ok(format!("{} mounts, /tmp among them", points.len()));
    }
    // On Reef /tmp is the tmpfs; a Linux host may keep /tmp on its root file system.
    expect(!context.reef, format_args!("/proc/mounts does not mention /tmp: {points:?}"))?;
    expect(Path::new("/tmp").is_dir(), "/tmp is neither mounted nor a directory of a mounted file system")?;
    Ok(format!("{} mounts; this Linux host keeps /tmp on `/`, which is listed", points.len()))
}
