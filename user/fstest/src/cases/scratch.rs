//! The run's scratch directory: made first, removed last; and `--fill`, which fills its file system.

use super::Context;
use crate::expect::{errno_name, expect, expect_bytes, expect_error, Outcome, Step};
use crate::pattern::pattern;
use std::fs::{self, File};
use std::io::Write;

const MIB: usize = 1 << 20;

/// Makes `<base>/fstest-<pid>`: a directory of its own, so two runs at once (one per core) never
/// meet; a leftover of an earlier run with the same pid is removed first.
pub fn create(context: &Context) -> Outcome {
    let scratch = context.scratch;
    let mut detail = scratch.display().to_string();
    if fs::symlink_metadata(scratch).is_ok() {
        fs::remove_dir_all(scratch).step(format_args!("removing the leftover {}", scratch.display()))?;
        detail.push_str(" (a leftover removed first)");
    }
    fs::create_dir(scratch).step(format_args!("mkdir {}", scratch.display()))?;
    Ok(detail)
}

/// Removes the scratch directory and all the cases left in it (`unlink`, `rmdir`, `getdents64`
/// as `remove_dir_all` does them); afterwards it must be gone.
pub fn remove(context: &Context) -> Outcome {
    let scratch = context.scratch;
    fs::remove_dir_all(scratch).step(format_args!("removing {}", scratch.display()))?;
    expect_error(format_args!("stat {} after removing it", scratch.display()), fs::metadata(scratch), libc::ENOENT)?;
    Ok(format!("{} removed", scratch.display()))
}

/// `--fill`: writes 1 MiB pieces until a write fails, which must be for ENOSPC (a short write
/// before it is fine); a small file written before must still read back whole, and once the
/// big file is gone a new 1 MiB file must fit.
pub fn fill(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let small_path = directory.join("small");
    let small = pattern(11, 64 * 1024);
    fs::write(&small_path, &small).step("writing the small file")?;
    let big_path = directory.join("big");
    let mut big = File::create(&big_path).step("creating the big file")?;
    let piece = pattern(12, MIB);
    let mut written = 0usize;
    let error = loop {
        // One `write` per call (not `write_all`), to see the short write and the error apart.
        match big.write(&piece) {
            Ok(0) => return Err(format!("a write returned 0 after {written} bytes, not ENOSPC")),
            Ok(count) => written += count,
            Err(error) => break error,
        }
    };
    expect(
        error.raw_os_error() == Some(libc::ENOSPC),
        format_args!("the write after {written} bytes: expected ENOSPC, got {}", crate::expect::describe(&error)),
    )?;
    drop(big);
    let back = fs::read(&small_path).step("reading the small file back on a full file system")?;
    expect_bytes("the small file on a full file system", &back, &small)?;
    fs::remove_file(&big_path).step("deleting the big file")?;
    let again = directory.join("again");
    fs::write(&again, &piece).step("writing 1 MiB after deleting the big file")?;
    expect_bytes("the new 1 MiB file", &fs::read(&again).step("reading the new file")?, &piece)?;
    fs::remove_file(&again).step("deleting the new file")?;
    Ok(format!(
        "{} MiB fit (+{} bytes), then {}; the small file intact, 1 MiB fits again after the delete",
        written / MIB,
        written % MIB,
        errno_name(libc::ENOSPC)
    ))
}
