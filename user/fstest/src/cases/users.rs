//! Users and permissions: the set*id rules, and what a non-root process may not do to root's
//! files. Each case drops to user 1000 in a forked child (a process never gets root back),
//! so the cases need root to start: not root (a Linux host's ordinary user), they say they
//! were skipped and why.

use super::{wait_for_success, Case, Context};
use crate::expect::{expect, expect_equal, expect_error, Outcome, Step};
use crate::sys::{self, Fork};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

pub const CASES: [Case; 3] = [
    Case { name: "users-set-ids", run: set_ids },
    Case { name: "users-file-modes", run: file_modes },
    Case { name: "users-exec-needs-x", run: exec_needs_execute },
];

const SKIPPED: &str = "skipped: needs root (effective user id 0) to drop to user 1000, and this run is not root";

/// The non-root user the cases become, and a group it is given.
const USER: u32 = 1000;
const OTHER_GROUP: u32 = 27;
/// `-1`: leave the id.
const KEEP: u32 = u32::MAX;

/// Runs `body` in a forked child, which must exit 0; its error, if any, is its last words.
fn in_child(what: &str, body: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(|| match body() {
            Ok(()) => 0,
            Err(error) => {
                eprintln!("fstest: {what}: {error}");
                1
            }
        }),
        Fork::Parent(pid) => wait_for_success(pid, what),
    }
}

/// Becomes user 1000 for good: groups first, while still privileged.
fn drop_to_user() -> Result<(), String> {
    sys::setgroups(0, &[]).step("setgroups(0)")?;
    sys::setresgid(USER, USER, USER).step("setresgid(1000, 1000, 1000)")?;
    sys::setresuid(USER, USER, USER).step("setresuid(1000, 1000, 1000)")
}

/// The `Uid:` line of `/proc/self/status`, its four ids.
fn status_uids() -> Result<Vec<u32>, String> {
    let status = fs::read_to_string("/proc/self/status").step("reading /proc/self/status")?;
    let line = status.lines().find(|line| line.starts_with("Uid:")).ok_or("no Uid: line in /proc/self/status")?;
    Ok(line.split_whitespace().skip(1).filter_map(|id| id.parse().ok()).collect())
}

fn set_ids(_: &Context) -> Outcome {
    if sys::geteuid() != 0 {
        return Ok(SKIPPED.into());
    }
    in_child("the set*id child", || {
        // Groups: kept sorted, counted with size 0, EINVAL when they do not fit.
        sys::setgroups(2, &[USER, OTHER_GROUP]).step("setgroups([1000, 27])")?;
        let mut groups = [0u32; 4];
        let count = sys::getgroups(&mut groups).step("getgroups")?;
        expect_equal("getgroups after setgroups([1000, 27])", &groups[..count], &[OTHER_GROUP, USER][..])?;
        expect_equal("getgroups(0, NULL): the count", sys::getgroups(&mut []).step("getgroups(0)")?, 2)?;
        expect_error("getgroups with room for one", sys::getgroups(&mut groups[..1]), libc::EINVAL)?;
        expect_error("setgroups of 65537 groups", sys::setgroups(65537, &[]), libc::EINVAL)?;
        expect_error("setgroups from an unmapped address", sys::setgroups_at(2, 8), libc::EFAULT)?;
        // A temporary drop keeps root in the saved id, and comes back.
        sys::setresgid(USER, USER, USER).step("setresgid(1000, 1000, 1000)")?;
        expect_equal("getresgid", sys::getresgid().step("getresgid")?, [USER; 3])?;
        sys::setresuid(USER, USER, 0).step("setresuid(1000, 1000, 0)")?;
        expect_equal("getresuid", sys::getresuid().step("getresuid")?, [USER, USER, 0])?;
        expect_equal("/proc/self/status Uid:", status_uids()?, vec![USER, USER, 0, USER])?;
        sys::setuid(0).step("setuid(0) back to the saved root")?;
        expect_equal("getresuid after setuid(0) unprivileged", sys::getresuid().step("getresuid")?, [USER, 0, 0])?;
        expect_equal("setfsuid(1000) gives the old fsuid", sys::setfsuid(USER), 0)?;
        expect_equal("setfsuid(-1) only says the fsuid", sys::setfsuid(KEEP), USER)?;
        // For good: nothing brings root back.
        sys::setresuid(USER, USER, USER).step("setresuid(1000, 1000, 1000)")?;
        expect_error("setuid(0) as user 1000", sys::setuid(0), libc::EPERM)?;
        expect_error("setreuid(-1, 0) as user 1000", sys::setreuid(KEEP, 0), libc::EPERM)?;
        expect_error("setresuid(0, -1, -1) as user 1000", sys::setresuid(0, KEEP, KEEP), libc::EPERM)?;
        expect_error("setgid(0) as user 1000", sys::setgid(0), libc::EPERM)?;
        expect_error("setgroups(0) as user 1000 (EPERM before anything)", sys::setgroups(65537, &[]), libc::EPERM)?;
        expect_equal("setfsuid(0) as user 1000 changes nothing", sys::setfsuid(0), USER)?;
        expect_equal("and the fsuid stays", sys::setfsuid(KEEP), USER)?;
        sys::setuid(USER).step("setuid(1000) as user 1000: its own id")?;
        expect_error("kill(1, 0): init is root's", sys::kill(rt::Pid::from_raw(1), 0), libc::EPERM)?;
        Ok(())
    })?;
    Ok("setgroups/getgroups, setresuid and back through the saved id, setfsuid, then EPERM for root's ids and init"
        .into())
}

fn file_modes(context: &Context) -> Outcome {
    if sys::geteuid() != 0 {
        return Ok(SKIPPED.into());
    }
    let directory = context.directory()?;
    fs::set_permissions(&directory, fs::Permissions::from_mode(0o755)).step("chmod 755 the case directory")?;
    // Root's: a read-only file in a directory others may not write, a private directory,
    // and a sticky directory every user writes in, with a file of root's.
    let owned = directory.join("owned");
    fs::create_dir(&owned).step("mkdir owned")?;
    fs::set_permissions(&owned, fs::Permissions::from_mode(0o755)).step("chmod 755 owned")?;
    let roots = owned.join("roots");
    fs::write(&roots, b"root's\n").step("writing owned/roots")?;
    fs::set_permissions(&roots, fs::Permissions::from_mode(0o644)).step("chmod 644 owned/roots")?;
    let private = directory.join("private");
    fs::create_dir(&private).step("mkdir private")?;
    fs::write(private.join("inside"), b"").step("writing private/inside")?;
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).step("chmod 700 private")?;
    let sticky = directory.join("sticky");
    fs::create_dir(&sticky).step("mkdir sticky")?;
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).step("chmod 1777 sticky")?;
    fs::write(sticky.join("roots"), b"").step("writing sticky/roots")?;
    fs::set_permissions(sticky.join("roots"), fs::Permissions::from_mode(0o666)).step("chmod 666 sticky/roots")?;
    in_child("the user 1000 child", || {
        drop_to_user()?;
        expect_error("open O_WRONLY of root's 0644 file", OpenOptions::new().write(true).open(&roots), libc::EACCES)?;
        expect(fs::read(&roots).is_ok_and(|bytes| bytes == b"root's\n"), "reading root's 0644 file")?;
        expect_error("access(W_OK) of root's 0644 file", sys::access(&roots, libc::W_OK), libc::EACCES)?;
        expect_error("creating a name in root's 0755 directory", fs::write(owned.join("new"), b""), libc::EACCES)?;
        expect_error("unlinking root's file from root's 0755 directory", fs::remove_file(&roots), libc::EACCES)?;
        expect_error("stat through root's 0700 directory", fs::metadata(private.join("inside")), libc::EACCES)?;
        expect_error(
            "chmod of root's file",
            fs::set_permissions(&roots, fs::Permissions::from_mode(0o666)),
            libc::EPERM,
        )?;
        let explicit = [libc::timespec { tv_sec: 1, tv_nsec: 0 }; 2];
        expect_error("utimensat of root's file to a given time", sys::set_times(&roots, Some(explicit)), libc::EPERM)?;
        expect_error("utimensat of root's 0644 file to now", sys::set_times(&roots, None), libc::EACCES)?;
        sys::set_times(&sticky.join("roots"), None).step("utimensat to now of root's 0666 file (writable)")?;
        // In the sticky directory: its own file comes and goes, root's stays.
        let mine = sticky.join("mine");
        fs::write(&mine, b"mine\n").step("creating sticky/mine")?;
        let metadata = fs::metadata(&mine).step("stat sticky/mine")?;
        expect_equal("the new file's owner and group", (metadata.uid(), metadata.gid()), (USER, USER))?;
        expect_error(
            "unlinking root's file from the sticky directory",
            fs::remove_file(sticky.join("roots")),
            libc::EPERM,
        )?;
        expect_error(
            "renaming root's file in the sticky directory",
            fs::rename(sticky.join("roots"), sticky.join("taken")),
            libc::EPERM,
        )?;
        expect_error("chown of its file to root", sys::chown(&mine, 0, KEEP), libc::EPERM)?;
        expect_error("chgrp of its file to a group it is not in", sys::chown(&mine, KEEP, 0), libc::EPERM)?;
        sys::chown(&mine, USER, USER).step("chown of its file to itself (no change)")?;
        fs::set_permissions(&mine, fs::Permissions::from_mode(0o600)).step("chmod of its own file")?;
        sys::set_times(&mine, Some(explicit)).step("utimensat of its own file to a given time")?;
        fs::remove_file(&mine).step("unlinking its own file from the sticky directory")?;
        Ok(())
    })?;
    expect(fs::metadata(sticky.join("roots")).is_ok(), "root's file in the sticky directory is still there")?;
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).step("chmod 700 private")?;
    Ok("EACCES for root's files and directories, EPERM for chmod/chown/utimes and the sticky bit, its own file made, changed and removed".into())
}

fn exec_needs_execute(context: &Context) -> Outcome {
    if sys::geteuid() != 0 {
        return Ok(SKIPPED.into());
    }
    let directory = context.directory()?;
    fs::set_permissions(&directory, fs::Permissions::from_mode(0o755)).step("chmod 755 the case directory")?;
    let copy = directory.join("program");
    fs::copy(context.program, &copy).step("copying fstest")?;
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o644)).step("chmod 644 the copy")?;
    // Root too needs one execute bit to run a file.
    expect_error("execve of a 0644 file as root", Err::<(), _>(sys::execve(&copy)), libc::EACCES)?;
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o700)).step("chmod 700 the copy")?;
    let only_root = copy.clone();
    in_child("the user 1000 child", move || {
        drop_to_user()?;
        expect_error(
            "execve of root's 0700 program as user 1000",
            Err::<(), _>(sys::execve(&only_root)),
            libc::EACCES,
        )?;
        Ok(())
    })?;
    let path: &Path = &copy;
    fs::remove_file(path).step("removing the copy")?;
    Ok("EACCES for a file without execute bits (root too) and for root's 0700 program as user 1000".into())
}
