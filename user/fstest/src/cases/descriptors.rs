//! Descriptors: dup, dup2, dup3, fcntl, a description shared across fork, close-on-exec.

use super::{wait_for_success, Case, Context};
use crate::expect::{expect, expect_bytes, expect_equal, expect_error, Outcome, Step};
use crate::sys::{self, Fork};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

pub const CASES: [Case; 10] = [
    Case { name: "dup", run: dup },
    Case { name: "dup2", run: dup2 },
    Case { name: "dup3", run: dup3 },
    Case { name: "fcntl-fd-flags", run: fcntl_descriptor_flags },
    Case { name: "fcntl-status-flags", run: fcntl_status_flags },
    Case { name: "fcntl-dupfd-cloexec", run: fcntl_dupfd_cloexec },
    Case { name: "fork-shared-offset", run: fork_shared_offset },
    Case { name: "exec-cloexec", run: exec_cloexec },
    Case { name: "flock", run: flock },
    Case { name: "close-range", run: close_range },
];

/// `close_range`: closes a range (and only it), or marks it `FD_CLOEXEC`; bad ranges and
/// flags are `EINVAL`.
fn close_range(context: &Context) -> Outcome {
    let path = context.directory()?.join("ranged");
    fs::write(&path, "r").step("writing ranged")?;
    let file = File::open(&path).step("opening it")?;
    let dup_at = |fd: RawFd| -> Result<RawFd, String> {
        let copy = sys::duplicate_close_on_exec(file.as_fd(), fd).step(format_args!("F_DUPFD_CLOEXEC at {fd}"))?;
        sys::set_descriptor_flags(copy.as_fd(), 0).step("clearing FD_CLOEXEC")?;
        Ok(std::os::fd::IntoRawFd::into_raw_fd(copy))
    };
    let (low, middle, high) = (dup_at(200)?, dup_at(201)?, dup_at(210)?);
    sys::close_range(low as u32, middle as u32, 0).step("close_range of the first two")?;
    for fd in [low, middle] {
        expect_error(
            format_args!("descriptor {fd} after close_range"),
            sys::descriptor_flags_of_number(fd),
            libc::EBADF,
        )?;
    }
    expect_equal("the descriptor past the range", sys::descriptor_flags_of_number(high).step("F_GETFD")?, 0)?;
    sys::close_range(high as u32, high as u32, libc::CLOSE_RANGE_CLOEXEC).step("close_range CLOEXEC")?;
    expect_equal(
        "marked by CLOSE_RANGE_CLOEXEC",
        sys::descriptor_flags_of_number(high).step("F_GETFD")?,
        libc::FD_CLOEXEC,
    )?;
    sys::close_range(high as u32, high as u32 + 5, 0).step("close_range of 210-215")?;
    expect_error("the marked one after the second close_range", sys::descriptor_flags_of_number(high), libc::EBADF)?;
    expect_error("a range that ends before it starts", sys::close_range(9, 8, 0), libc::EINVAL)?;
    expect_error("an unknown flag", sys::close_range(300, 301, 1 << 7), libc::EINVAL)?;
    Ok("closes 200-201 and not 210; CLOSE_RANGE_CLOEXEC marks; EINVAL for a bad range or flag".into())
}

/// `flock` locks belong to open files: a second open of the file conflicts, a `dup` shares
/// the lock, shared locks coexist, and the last close lets go.
fn flock(context: &Context) -> Outcome {
    let path = context.directory()?.join("locked");
    fs::write(&path, "locked").step("writing locked")?;
    let first = File::open(&path).step("opening it")?;
    let second = File::open(&path).step("opening it again")?;
    sys::flock(first.as_fd(), libc::LOCK_EX).step("LOCK_EX by the first open file")?;
    expect_error(
        "LOCK_EX | LOCK_NB by the second",
        sys::flock(second.as_fd(), libc::LOCK_EX | libc::LOCK_NB),
        libc::EWOULDBLOCK,
    )?;
    let shared_with_first = first.try_clone().step("dup of the first")?;
    sys::flock(shared_with_first.as_fd(), libc::LOCK_EX | libc::LOCK_NB).step("LOCK_EX again through a dup")?;
    sys::flock(first.as_fd(), libc::LOCK_SH).step("converting to LOCK_SH")?;
    sys::flock(second.as_fd(), libc::LOCK_SH | libc::LOCK_NB).step("LOCK_SH by the second beside it")?;
    expect_error(
        "LOCK_EX | LOCK_NB by the second while the first shares",
        sys::flock(second.as_fd(), libc::LOCK_EX | libc::LOCK_NB),
        libc::EWOULDBLOCK,
    )?;
    drop(first);
    drop(shared_with_first);
    sys::flock(second.as_fd(), libc::LOCK_EX | libc::LOCK_NB).step("LOCK_EX once the first is closed")?;
    sys::flock(second.as_fd(), libc::LOCK_UN).step("LOCK_UN")?;
    expect_error("an unknown operation", sys::flock(second.as_fd(), 64), libc::EINVAL)?;
    Ok("LOCK_EX, a conflict refused (EWOULDBLOCK), a dup sharing, LOCK_SH beside LOCK_SH, the last close unlocking"
        .into())
}

/// The argument `exec-cloexec` re-executes fstest with: `--check-closed <fd> --check-open <fd>`.
pub const CHECK_CLOSED: &str = "--check-closed";
pub const CHECK_OPEN: &str = "--check-open";

fn file_with(directory: &Path, name: &str, contents: &str) -> Result<File, String> {
    let path = directory.join(name);
    fs::write(&path, contents).step(format_args!("writing {name}"))?;
    OpenOptions::new().read(true).write(true).open(&path).step(format_args!("opening {name}"))
}

fn read_string(file: &mut File, count: usize, what: &str) -> Result<String, String> {
    let mut bytes = vec![0u8; count];
    file.read_exact(&mut bytes).step(what)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn close_on_exec(fd: BorrowedFd, what: &str) -> Result<bool, String> {
    Ok(sys::descriptor_flags(fd).step(format_args!("F_GETFD of {what}"))? & libc::FD_CLOEXEC != 0)
}

fn dup(context: &Context) -> Outcome {
    let mut original = file_with(&context.directory()?, "file", "0123456789")?;
    let mut copy = File::from(sys::dup(original.as_fd()).step("dup")?);
    expect(copy.as_raw_fd() != original.as_raw_fd(), "dup returned the same number")?;
    expect_equal("read through the original", read_string(&mut original, 3, "read 3")?, "012".into())?;
    // One open file description, one offset: the copy reads on from where the original stopped.
    expect_equal("read through the copy", read_string(&mut copy, 3, "read 3 through the copy")?, "345".into())?;
    expect(!close_on_exec(copy.as_fd(), "the copy")?, "dup's copy is close-on-exec")?;
    drop(original);
    expect_equal("read after closing the original", read_string(&mut copy, 4, "read 4")?, "6789".into())?;
    Ok("a new number, one offset for both, no FD_CLOEXEC, outlives the original".into())
}

fn dup2(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let mut a = file_with(&directory, "a", "AAAA")?;
    // `b` keeps owning its number; after dup2 that number names a's description.
    let b = OwnedFd::from(file_with(&directory, "b", "BBBB")?);
    sys::dup2(a.as_fd(), &b).step("dup2(a, b)")?;
    expect(!close_on_exec(b.as_fd(), "b after dup2")?, "dup2 kept b's FD_CLOEXEC (std opened b with O_CLOEXEC)")?;
    let mut b = File::from(b);
    expect_equal("read through b's number", read_string(&mut b, 4, "read 4 through b")?, "AAAA".into())?;
    expect_equal("a's offset after reading through b", a.stream_position().step("SEEK_CUR 0 of a")?, 4)?;
    let a = OwnedFd::from(a);
    sys::dup2(a.as_fd(), &a).step("dup2(a, a)")?;
    let mut a = File::from(a);
    a.seek(SeekFrom::Start(0)).step("SEEK_SET 0 of a")?;
    expect_equal("read through a after dup2(a, a)", read_string(&mut a, 4, "read 4 through a")?, "AAAA".into())?;
    Ok("b's number reads a's file at a's offset, FD_CLOEXEC cleared; dup2(a, a) changes nothing".into())
}

fn dup3(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let a = OwnedFd::from(file_with(&directory, "a", "AAAA")?);
    let b = OwnedFd::from(file_with(&directory, "b", "BBBB")?);
    sys::dup3(a.as_fd(), &b, libc::O_CLOEXEC).step("dup3(a, b, O_CLOEXEC)")?;
    expect(close_on_exec(b.as_fd(), "b after dup3 O_CLOEXEC")?, "dup3 with O_CLOEXEC left FD_CLOEXEC clear")?;
    sys::dup3(a.as_fd(), &b, 0).step("dup3(a, b, 0)")?;
    expect(!close_on_exec(b.as_fd(), "b after dup3 0")?, "dup3 with no flag left FD_CLOEXEC set")?;
    expect_error("dup3(a, a, 0)", sys::dup3(a.as_fd(), &a, 0), libc::EINVAL)?;
    expect_error("dup3 with a flag other than O_CLOEXEC", sys::dup3(a.as_fd(), &b, libc::O_APPEND), libc::EINVAL)?;
    let mut b = File::from(b);
    expect_equal("read through b", read_string(&mut b, 4, "read 4 through b")?, "AAAA".into())?;
    Ok("O_CLOEXEC sets FD_CLOEXEC, 0 clears it; dup3(fd, fd) and another flag EINVAL".into())
}

fn fcntl_descriptor_flags(context: &Context) -> Outcome {
    let file = file_with(&context.directory()?, "file", "x")?;
    // std opens everything with O_CLOEXEC.
    expect(close_on_exec(file.as_fd(), "a file std opened")?, "std's O_CLOEXEC not seen by F_GETFD")?;
    sys::set_descriptor_flags(file.as_fd(), 0).step("F_SETFD 0")?;
    expect(!close_on_exec(file.as_fd(), "after F_SETFD 0")?, "F_SETFD 0 left FD_CLOEXEC set")?;
    sys::set_descriptor_flags(file.as_fd(), libc::FD_CLOEXEC).step("F_SETFD FD_CLOEXEC")?;
    expect(close_on_exec(file.as_fd(), "after F_SETFD FD_CLOEXEC")?, "F_SETFD FD_CLOEXEC left it clear")?;
    let closed: RawFd = File::from(sys::dup(file.as_fd()).step("dup")?).as_raw_fd();
    expect_error("F_GETFD of a closed number", sys::descriptor_flags_of_number(closed), libc::EBADF)?;
    Ok("FD_CLOEXEC from O_CLOEXEC, cleared and set by F_SETFD; a closed number EBADF".into())
}

fn fcntl_status_flags(context: &Context) -> Outcome {
    let mut file = file_with(&context.directory()?, "file", "0123456789")?;
    let flags = sys::status_flags(file.as_fd()).step("F_GETFL")?;
    expect_equal("F_GETFL's access mode", flags & libc::O_ACCMODE, libc::O_RDWR)?;
    expect(
        flags & (libc::O_APPEND | libc::O_NONBLOCK) == 0,
        format_args!("F_GETFL {flags:#o} has O_APPEND or O_NONBLOCK"),
    )?;
    sys::set_status_flags(file.as_fd(), flags | libc::O_APPEND | libc::O_NONBLOCK)
        .step("F_SETFL O_APPEND|O_NONBLOCK")?;
    let copy = File::from(sys::dup(file.as_fd()).step("dup")?);
    for (what, fd) in [("the descriptor", file.as_fd()), ("a dup of it (the same description)", copy.as_fd())] {
        let now = sys::status_flags(fd).step(format_args!("F_GETFL of {what}"))?;
        expect(
            now & libc::O_APPEND != 0 && now & libc::O_NONBLOCK != 0,
            format_args!("F_GETFL of {what} after F_SETFL: {now:#o}, without O_APPEND or O_NONBLOCK"),
        )?;
        expect_equal(format_args!("F_GETFL's access mode of {what}"), now & libc::O_ACCMODE, libc::O_RDWR)?;
    }
    file.seek(SeekFrom::Start(0)).step("SEEK_SET 0")?;
    file.write_all(b"+").step("writing with O_APPEND set by F_SETFL")?;
    sys::set_status_flags(file.as_fd(), flags).step("F_SETFL back")?;
    let cleared = sys::status_flags(file.as_fd()).step("F_GETFL")?;
    expect(cleared & (libc::O_APPEND | libc::O_NONBLOCK) == 0, format_args!("F_SETFL did not clear: {cleared:#o}"))?;
    file.seek(SeekFrom::Start(0)).step("SEEK_SET 0")?;
    let mut contents = Vec::new();
    file.read_to_end(&mut contents).step("reading back")?;
    expect_bytes("the file", &contents, b"0123456789+")?;
    Ok("O_RDWR; F_SETFL O_APPEND|O_NONBLOCK seen through a dup, the write appended; cleared again".into())
}

fn fcntl_dupfd_cloexec(context: &Context) -> Outcome {
    let mut file = file_with(&context.directory()?, "file", "0123456789")?;
    sys::set_descriptor_flags(file.as_fd(), 0).step("F_SETFD 0")?;
    let mut copy = File::from(sys::duplicate_close_on_exec(file.as_fd(), 100).step("F_DUPFD_CLOEXEC 100")?);
    expect(copy.as_raw_fd() >= 100, format_args!("F_DUPFD_CLOEXEC 100 gave {}", copy.as_raw_fd()))?;
    expect(close_on_exec(copy.as_fd(), "the copy")?, "the F_DUPFD_CLOEXEC copy lacks FD_CLOEXEC")?;
    expect(!close_on_exec(file.as_fd(), "the original")?, "F_DUPFD_CLOEXEC set FD_CLOEXEC on the original")?;
    expect_equal("read through the original", read_string(&mut file, 2, "read 2")?, "01".into())?;
    expect_equal("read through the copy", read_string(&mut copy, 2, "read 2 through the copy")?, "23".into())?;
    Ok(format!("number {} (>= 100), FD_CLOEXEC on the copy only, one offset", copy.as_raw_fd()))
}

fn fork_shared_offset(context: &Context) -> Outcome {
    let path = context.directory()?.join("shared");
    let mut file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).step("creating")?;
    file.write_all(b"parent-before|").step("the parent's first write")?;
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(|| match file.write_all(b"child|") {
            Ok(()) => 0,
            Err(_) => 1,
        }),
        Fork::Parent(pid) => pid,
    };
    wait_for_success(pid, "the child writing through the shared descriptor")?;
    // The child's write moved the offset the parent sees: one open file description.
    expect_equal("the parent's offset after the child wrote", file.stream_position().step("SEEK_CUR 0")?, 20)?;
    file.write_all(b"parent-after").step("the parent's second write")?;
    expect_bytes("the file", &fs::read(&path).step("reading back")?, b"parent-before|child|parent-after")?;
    Ok("parent, child, parent wrote one after another through one offset".into())
}

fn exec_cloexec(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let closed = file_with(&directory, "closed", "closed on exec")?;
    expect(close_on_exec(closed.as_fd(), "the O_CLOEXEC file")?, "std's file lacks FD_CLOEXEC")?;
    let kept = sys::open(&directory.join("closed"), libc::O_RDONLY, 0).step("open without O_CLOEXEC")?;
    let (closed_number, kept_number) = (closed.as_raw_fd().to_string(), kept.as_raw_fd().to_string());
    let program = context.program;
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(|| {
            let error = Command::new(program).args([CHECK_CLOSED, &closed_number, CHECK_OPEN, &kept_number]).exec();
            eprintln!("fstest: execve {}: {error}", program.display());
            2
        }),
        Fork::Parent(pid) => pid,
    };
    let status = rt::wait(pid).step("waiting for the exec'd fstest")?;
    match status.code() {
        Some(0) => Ok(format!(
            "{} {CHECK_CLOSED} {closed_number} {CHECK_OPEN} {kept_number}: the O_CLOEXEC one closed, the other open",
            program.display()
        )),
        Some(1) => Err(format!("the exec'd fstest found fd {closed_number} open or fd {kept_number} closed")),
        Some(2) => Err(format!("execve {} failed", program.display())),
        _ => Err(format!("the exec'd fstest ended with {status}")),
    }
}

/// `fstest --check-closed <fd> --check-open <fd>`, run by `exec-cloexec` through `execve`:
/// whether the first number names no descriptor (EBADF) and the second one does.
pub fn check_descriptors(closed: RawFd, open: RawFd) -> Result<(), String> {
    let mut problems = Vec::new();
    match sys::descriptor_flags_of_number(closed) {
        Err(error) if error.raw_os_error() == Some(libc::EBADF) => {}
        Err(error) => problems.push(format!("F_GETFD of fd {closed}: expected EBADF, got {error}")),
        Ok(_) => problems.push(format!("fd {closed} (O_CLOEXEC) survived execve")),
    }
    if let Err(error) = sys::descriptor_flags_of_number(open) {
        problems.push(format!("fd {open} (no O_CLOEXEC) did not survive execve: {error}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
