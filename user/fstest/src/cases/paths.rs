//! Paths: the working directory, a removed directory still in use, `..` at the root, lengths.

use super::{Case, Context, WorkingDirectory};
use crate::dirent;
use crate::expect::{describe, expect, expect_bytes, expect_equal, expect_error, Outcome, Step};
use crate::sys;
use std::env;
use std::fs::{self, File};
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub const CASES: [Case; 5] = [
    Case { name: "removed-directory", run: removed_directory },
    Case { name: "cwd", run: working_directory },
    Case { name: "dotdot-at-root", run: dotdot_at_root },
    Case { name: "path-too-long", run: path_too_long },
    Case { name: "name-too-long", run: name_too_long },
];

/// PATH_MAX is 4096 bytes with the NUL: a path of this many is refused before any lookup.
const LONG_PATH: usize = 5000;
/// NAME_MAX is 255: a component of this many is refused.
const LONG_NAME: usize = 300;

fn current_directory() -> Result<PathBuf, String> {
    env::current_dir().step("getcwd")
}

fn removed_directory(context: &Context) -> Outcome {
    let doomed = context.directory()?.join("doomed");
    fs::create_dir(&doomed).step("mkdir")?;
    let handle = File::open(&doomed).step("opening the directory")?;
    let _back = WorkingDirectory::remember()?;
    env::set_current_dir(&doomed).step("chdir into it")?;
    fs::remove_dir(&doomed).step("rmdir of the open working directory")?;
    // Linux refuses to list a removed directory (ENOENT); listing nothing, or `.` and `..`
    // only, says the same: nothing is in it.
    let mut buffer = vec![0u8; 4096];
    let listing = match sys::getdents64(handle.as_fd(), &mut buffer) {
        Ok(count) => {
            let names = dirent::names(&buffer[..count])?;
            let others: Vec<String> = names
                .iter()
                .filter(|name| !matches!(name.as_slice(), b"." | b".."))
                .map(|name| String::from_utf8_lossy(name).into_owned())
                .collect();
            expect(others.is_empty(), format_args!("getdents64 of the removed directory lists {others:?}"))?;
            format!("getdents64 lists {} entries (only . and ..)", names.len())
        }
        Err(error) if error.raw_os_error() == Some(libc::ENOENT) => "getdents64 ENOENT".to_string(),
        Err(error) => {
            return Err(format!(
                "getdents64 of the removed directory: expected no entries or ENOENT, got {}",
                describe(&error)
            ))
        }
    };
    let create = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
    expect_error(
        "openat(removed directory, \"x\", O_CREAT)",
        sys::openat(handle.as_fd(), Path::new("x"), create, 0o644),
        libc::ENOENT,
    )?;
    expect_error("open(\"x\", O_CREAT) in the removed working directory", File::create("x"), libc::ENOENT)?;
    expect_error("mkdir(\"sub\") in the removed working directory", fs::create_dir("sub"), libc::ENOENT)?;
    Ok(format!("{listing}; creating in it ENOENT through the descriptor and as the working directory"))
}

fn working_directory(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (a, b) = (directory.join("a"), directory.join("b"));
    fs::create_dir(&a).step("mkdir a")?;
    fs::create_dir(&b).step("mkdir b")?;
    let _back = WorkingDirectory::remember()?;
    env::set_current_dir(&a).step("chdir a")?;
    expect_equal("getcwd after chdir", current_directory()?, a.clone())?;
    fs::write("relative.txt", "relative").step("writing relative.txt by a relative path")?;
    expect_bytes(
        "a/relative.txt by its absolute path",
        &fs::read(a.join("relative.txt")).step("reading")?,
        b"relative",
    )?;
    let b_handle = File::open(&b).step("opening b")?;
    sys::fchdir(b_handle.as_fd()).step("fchdir b")?;
    expect_equal("getcwd after fchdir", current_directory()?, b)?;
    expect_bytes(
        "../a/relative.txt from b",
        &fs::read("../a/relative.txt").step("reading ../a/relative.txt")?,
        b"relative",
    )?;
    env::set_current_dir("..").step("chdir ..")?;
    expect_equal("getcwd after chdir ..", current_directory()?, directory)?;
    expect(Path::new("a/relative.txt").is_file(), "a/relative.txt not found from the case directory")?;
    Ok("chdir, fchdir, chdir .., getcwd and relative names agree".into())
}

fn dotdot_at_root(_: &Context) -> Outcome {
    let identity = |path: &str| -> Result<(u64, u64), String> {
        let metadata = fs::metadata(path).step(format_args!("stat {path}"))?;
        Ok((metadata.dev(), metadata.ino()))
    };
    let root = identity("/")?;
    for path in ["/..", "/../../..", "/tmp/../../.."] {
        if path.starts_with("/tmp") && !Path::new("/tmp").is_dir() {
            continue;
        }
        expect_equal(format_args!("(st_dev, st_ino) of {path} against /"), identity(path)?, root)?;
    }
    let _back = WorkingDirectory::remember()?;
    env::set_current_dir("/").step("chdir /")?;
    env::set_current_dir("..").step("chdir .. at /")?;
    expect_equal("getcwd after chdir / then ..", current_directory()?, PathBuf::from("/"))?;
    env::set_current_dir("../../..").step("chdir ../../.. at /")?;
    expect_equal("getcwd after chdir ../../..", current_directory()?, PathBuf::from("/"))?;
    Ok("/.., /../../.. and /tmp/../../.. are /; chdir .. at / stays at /".into())
}

fn path_too_long(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let mut text = directory.display().to_string();
    while text.len() < LONG_PATH {
        text.push_str("/d");
    }
    text.truncate(LONG_PATH);
    let path = Path::new(&text);
    expect_error(format_args!("open O_CREAT of a {LONG_PATH}-byte path"), File::create(path), libc::ENAMETOOLONG)?;
    expect_error(format_args!("stat of a {LONG_PATH}-byte path"), fs::metadata(path), libc::ENAMETOOLONG)?;
    expect_error(format_args!("mkdir of a {LONG_PATH}-byte path"), fs::create_dir(path), libc::ENAMETOOLONG)?;
    Ok(format!("{LONG_PATH}-byte path: ENAMETOOLONG for open, stat and mkdir"))
}

fn name_too_long(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let long = directory.join("n".repeat(LONG_NAME));
    expect_error(format_args!("open O_CREAT of a {LONG_NAME}-byte name"), File::create(&long), libc::ENAMETOOLONG)?;
    expect_error(format_args!("mkdir of a {LONG_NAME}-byte name"), fs::create_dir(&long), libc::ENAMETOOLONG)?;
    expect_error(format_args!("stat of a {LONG_NAME}-byte name"), fs::metadata(&long), libc::ENAMETOOLONG)?;
    expect_error("open O_CREAT of a 256-byte name", File::create(directory.join("n".repeat(256))), libc::ENAMETOOLONG)?;
    let longest = directory.join("n".repeat(255));
    fs::write(&longest, "fits").step("creating a 255-byte name")?;
    expect_bytes("the file with a 255-byte name", &fs::read(&longest).step("reading it")?, b"fits")?;
    Ok(format!("ENAMETOOLONG for {LONG_NAME} and 256 bytes; 255 bytes work"))
}
