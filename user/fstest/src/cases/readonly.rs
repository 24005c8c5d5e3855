//! Reef only: the initramfs at `/` is read-only, so changing it fails with EROFS.
//!
//! On Linux `/` is writable (and fstest may run as root), so these cases only say they were
//! skipped there rather than try.

use super::{Case, Context};
use crate::expect::{expect_error, Outcome};
use std::fs::{self, OpenOptions};

pub const CASES: [Case; 3] = [
    Case { name: "erofs-write-etc", run: write_etc },
    Case { name: "erofs-mkdir-root", run: mkdir_root },
    Case { name: "erofs-create-bin", run: create_in_bin },
];

const SKIPPED: &str = "skipped: not on Reef, whose initramfs at / is read-only; Linux's / is writable";

fn write_etc(context: &Context) -> Outcome {
    if !context.reef {
        return Ok(SKIPPED.into());
    }
    let path = "/etc/hello.txt";
    expect_error("open O_WRONLY of /etc/hello.txt", OpenOptions::new().write(true).open(path), libc::EROFS)?;
    expect_error(
        "open O_TRUNC of /etc/hello.txt",
        OpenOptions::new().write(true).truncate(true).open(path),
        libc::EROFS,
    )?;
    let contents = fs::read(path).map_err(|error| format!("reading /etc/hello.txt afterwards: {error}"))?;
    if contents.is_empty() {
        return Err("/etc/hello.txt is empty after the refused O_TRUNC".into());
    }
    Ok("EROFS for O_WRONLY and O_TRUNC; the file still reads".into())
}

fn mkdir_root(context: &Context) -> Outcome {
    if !context.reef {
        return Ok(SKIPPED.into());
    }
    expect_error("mkdir /newdir", fs::create_dir("/newdir"), libc::EROFS)?;
    Ok("EROFS".into())
}

fn create_in_bin(context: &Context) -> Outcome {
    if !context.reef {
        return Ok(SKIPPED.into());
    }
    expect_error("creating /bin/fstest-new", fs::File::create("/bin/fstest-new"), libc::EROFS)?;
    Ok("EROFS".into())
}
