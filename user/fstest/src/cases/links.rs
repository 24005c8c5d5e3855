//! Hard links and symbolic links: shared data, link counts, readlink, lstat against stat, loops.

use super::{Case, Context};
use crate::expect::{expect, expect_bytes, expect_equal, expect_error, Outcome, Step};
use crate::sys;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

pub const CASES: [Case; 5] = [
    Case { name: "link", run: link },
    Case { name: "symlink-readlink", run: symlink_readlink },
    Case { name: "lstat-stat", run: lstat_stat },
    Case { name: "symlink-loop", run: symlink_loop },
    Case { name: "statx", run: statx },
];

fn link(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (first, second) = (directory.join("first"), directory.join("second"));
    fs::write(&first, "shared").step("writing the file")?;
    fs::hard_link(&first, &second).step("link")?;
    let (one, two) = (fs::metadata(&first).step("stat first")?, fs::metadata(&second).step("stat second")?);
    expect_equal("st_nlink", (one.nlink(), two.nlink()), (2, 2))?;
    expect_equal("st_ino of the two names", two.ino(), one.ino())?;
    OpenOptions::new()
        .append(true)
        .open(&second)
        .step("opening the second name")?
        .write_all(b"+more")
        .step("writing through the second name")?;
    expect_bytes(
        "the first name after a write through the second",
        &fs::read(&first).step("reading")?,
        b"shared+more",
    )?;
    fs::remove_file(&first).step("unlinking the first name")?;
    expect_equal("st_nlink after unlinking one name", fs::metadata(&second).step("stat")?.nlink(), 1)?;
    expect_bytes("the second name alone", &fs::read(&second).step("reading")?, b"shared+more")?;
    Ok("same inode, st_nlink 2 then 1, writes seen through both names".into())
}

fn symlink_readlink(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let dangling = directory.join("dangling");
    symlink("no/such/target", &dangling).step("symlink to nothing")?;
    expect_equal("readlink", fs::read_link(&dangling).step("readlink")?, "no/such/target".into())?;
    expect_error("open through a dangling link", fs::File::open(&dangling), libc::ENOENT)?;
    let file = directory.join("file");
    fs::write(&file, "through the link").step("writing the file")?;
    let link = directory.join("link");
    symlink("file", &link).step("symlink to a relative name")?;
    expect_bytes("reading through the link", &fs::read(&link).step("reading through the link")?, b"through the link")?;
    expect_error("readlink of a regular file", fs::read_link(&file), libc::EINVAL)?;
    Ok("readlink gives the target as written; dangling ENOENT; readlink of a file EINVAL".into())
}

fn lstat_stat(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (file, link) = (directory.join("file"), directory.join("link"));
    fs::write(&file, "12345").step("writing the file")?;
    symlink("file", &link).step("symlink")?;
    let of_link = fs::symlink_metadata(&link).step("lstat of the link")?;
    expect(of_link.file_type().is_symlink(), "lstat of the link: not a symlink")?;
    expect_equal("lstat's st_size (the target's length)", of_link.len(), 4)?;
    let followed = fs::metadata(&link).step("stat of the link")?;
    expect(followed.file_type().is_file(), "stat of the link: not a regular file")?;
    expect_equal("stat's st_size", followed.len(), 5)?;
    expect_equal("stat's st_ino", followed.ino(), fs::metadata(&file).step("stat of the file")?.ino())?;
    expect(of_link.ino() != followed.ino(), "lstat and stat give the same inode")?;
    Ok("lstat: symlink of 4 bytes; stat: the 5-byte file".into())
}

fn symlink_loop(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (a, b, own) = (directory.join("a"), directory.join("b"), directory.join("own"));
    symlink("b", &a).step("symlink a -> b")?;
    symlink("a", &b).step("symlink b -> a")?;
    symlink("own", &own).step("symlink own -> own")?;
    expect_error("open a (a -> b -> a)", fs::File::open(&a), libc::ELOOP)?;
    expect_error("stat a", fs::metadata(&a), libc::ELOOP)?;
    expect_error("open own (own -> own)", fs::File::open(&own), libc::ELOOP)?;
    expect_error("creating through the loop", fs::File::create(&own), libc::ELOOP)?;
    expect(fs::symlink_metadata(&a).step("lstat a")?.file_type().is_symlink(), "lstat a: not a symlink")?;
    Ok("ELOOP for open, stat and create; lstat still works".into())
}

fn statx(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (file, link) = (directory.join("file"), directory.join("link"));
    fs::write(&file, vec![b's'; 12_345]).step("writing 12345 bytes")?;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).step("chmod 0640")?;
    symlink("file", &link).step("symlink")?;
    let record = sys::statx(&file, 0).step("statx of the file")?;
    let metadata = fs::metadata(&file).step("stat of the file")?;
    expect_equal("stx_size", record.stx_size, 12_345)?;
    expect_equal("stx_mode", u32::from(record.stx_mode), libc::S_IFREG | 0o640)?;
    expect_equal("stx_nlink", record.stx_nlink, 1)?;
    expect_equal("stx_ino against stat's st_ino", record.stx_ino, metadata.ino())?;
    expect_equal("stx_mtime against stat's st_mtime", record.stx_mtime.tv_sec, metadata.mtime())?;
    let of_link = sys::statx(&link, libc::AT_SYMLINK_NOFOLLOW).step("statx AT_SYMLINK_NOFOLLOW of the link")?;
    expect_equal("the link's stx_mode type", u32::from(of_link.stx_mode) & libc::S_IFMT, libc::S_IFLNK)?;
    let followed = sys::statx(&link, 0).step("statx of the link")?;
    expect_equal("stx_ino through the link", followed.stx_ino, record.stx_ino)?;
    Ok("size, mode, nlink, inode and mtime agree with stat; AT_SYMLINK_NOFOLLOW sees the link".into())
}
