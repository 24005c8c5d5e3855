//! What `stat` shows besides the data: modes under a umask, times set by `utimensat`, `access`.

use super::{Case, Context};
use crate::expect::{expect_equal, expect_error, Outcome, Step};
use crate::sys;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};

pub const CASES: [Case; 3] = [
    Case { name: "umask", run: umask },
    Case { name: "utimensat", run: utimensat },
    Case { name: "access", run: access },
];

/// The umask while made, the previous one back when dropped (also when a case fails).
struct Umask(libc::mode_t);

impl Umask {
    fn set(mask: libc::mode_t) -> Self {
        Self(sys::umask(mask))
    }
}

impl Drop for Umask {
    fn drop(&mut self) {
        sys::umask(self.0);
    }
}

fn permissions(path: &std::path::Path) -> Result<u32, String> {
    Ok(fs::metadata(path).step(format_args!("stat {}", path.display()))?.mode() & 0o7777)
}

fn umask(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let _previous = Umask::set(0o077);
    expect_equal("umask's answer: the mask just set", sys::umask(0o077), 0o077)?;
    let (file, explicit, subdirectory) =
        (directory.join("default"), directory.join("explicit"), directory.join("subdirectory"));
    fs::File::create(&file).step("creating a file with mode 0666")?;
    OpenOptions::new().write(true).create_new(true).mode(0o644).open(&explicit).step("creating with mode 0644")?;
    fs::create_dir(&subdirectory).step("mkdir with mode 0777")?;
    expect_equal("the mode of a file created 0666", permissions(&file)?, 0o600)?;
    expect_equal("the mode of a file created 0644", permissions(&explicit)?, 0o600)?;
    expect_equal("the mode of a directory made 0777", permissions(&subdirectory)?, 0o700)?;
    Ok("0666 -> 0600, 0644 -> 0600, directory 0777 -> 0700".into())
}

fn utimensat(context: &Context) -> Outcome {
    let file = context.directory()?.join("file");
    fs::write(&file, "timed").step("writing the file")?;
    // A time in 2001, and one past 2038, which needs 64 bits.
    for (seconds, nanoseconds) in [(1_000_000_000, 123_456_789), (4_000_000_000, 999_999_999)] {
        sys::set_modification_time(&file, seconds, nanoseconds)
            .step(format_args!("utimensat mtime {seconds}.{nanoseconds:09}"))?;
        let metadata = fs::metadata(&file).step("stat")?;
        expect_equal("(st_mtime, st_mtime_nsec)", (metadata.mtime(), metadata.mtime_nsec()), (seconds, nanoseconds))?;
    }
    Ok("mtime 1000000000.123456789 and 4000000000.999999999 read back".into())
}

fn access(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let file = directory.join("file");
    fs::write(&file, "x").step("writing the file")?;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).step("chmod 0600")?;
    sys::access(&file, libc::F_OK).step("access F_OK")?;
    sys::access(&file, libc::R_OK | libc::W_OK).step("access R_OK|W_OK of a 0600 file")?;
    // Not even root may execute a file with no execute bit.
    expect_error("access X_OK of a 0600 file", sys::access(&file, libc::X_OK), libc::EACCES)?;
    expect_error("access F_OK of a missing name", sys::access(&directory.join("missing"), libc::F_OK), libc::ENOENT)?;
    sys::access(&directory, libc::X_OK).step("access X_OK of a directory")?;
    Ok("F_OK, R_OK|W_OK of 0600; X_OK of 0600 EACCES; missing ENOENT".into())
}
