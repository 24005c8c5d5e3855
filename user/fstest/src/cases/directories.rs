//! Directories and names: mkdir, rmdir, unlink, rename, listing, a file unlinked while open.

use super::{Case, Context};
use crate::expect::{expect, expect_bytes, expect_equal, expect_error, Outcome, Step};
use crate::sys;
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

pub const CASES: [Case; 10] = [
    Case { name: "mkdir-rmdir", run: mkdir_rmdir },
    Case { name: "rmdir-not-empty", run: rmdir_not_empty },
    Case { name: "unlink-directory", run: unlink_directory },
    Case { name: "mkdir-existing", run: mkdir_existing },
    Case { name: "rename-replace", run: rename_replace },
    Case { name: "rename-noreplace", run: rename_noreplace },
    Case { name: "rename-into-itself", run: rename_into_itself },
    Case { name: "rename-over-not-empty", run: rename_over_not_empty },
    Case { name: "read-dir", run: read_dir },
    Case { name: "unlink-open", run: unlink_open },
];

fn mkdir_rmdir(context: &Context) -> Outcome {
    let directory = context.directory()?.join("new");
    fs::create_dir(&directory).step("mkdir")?;
    expect(fs::metadata(&directory).step("stat after mkdir")?.is_dir(), "stat after mkdir: not a directory")?;
    fs::remove_dir(&directory).step("rmdir")?;
    expect_error("stat after rmdir", fs::metadata(&directory), libc::ENOENT)?;
    Ok("made, seen as a directory, removed, gone".into())
}

fn rmdir_not_empty(context: &Context) -> Outcome {
    let directory = context.directory()?.join("full");
    fs::create_dir(&directory).step("mkdir")?;
    fs::write(directory.join("file"), "x").step("creating a file in it")?;
    expect_error("rmdir of a non-empty directory", fs::remove_dir(&directory), libc::ENOTEMPTY)?;
    expect(directory.join("file").exists(), "the file in it is gone after the refused rmdir")?;
    Ok("ENOTEMPTY, the file still there".into())
}

fn unlink_directory(context: &Context) -> Outcome {
    let directory = context.directory()?.join("sub");
    fs::create_dir(&directory).step("mkdir")?;
    expect_error("unlink of a directory", fs::remove_file(&directory), libc::EISDIR)?;
    expect(directory.is_dir(), "the directory is gone after the refused unlink")?;
    Ok("EISDIR".into())
}

fn mkdir_existing(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let sub = directory.join("sub");
    fs::create_dir(&sub).step("mkdir")?;
    expect_error("mkdir of an existing directory", fs::create_dir(&sub), libc::EEXIST)?;
    let file = directory.join("file");
    fs::write(&file, "x").step("creating a file")?;
    expect_error("mkdir over an existing file", fs::create_dir(&file), libc::EEXIST)?;
    Ok("EEXIST over a directory and over a file".into())
}

fn rename_replace(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (from, to) = (directory.join("from"), directory.join("to"));
    fs::write(&from, "new contents").step("writing the source")?;
    fs::write(&to, "old contents").step("writing the target")?;
    let mut replaced = File::open(&to).step("opening the target")?;
    fs::rename(&from, &to).step("rename over an existing file")?;
    expect_error("stat of the old name", fs::metadata(&from), libc::ENOENT)?;
    expect_bytes("the target after rename", &fs::read(&to).step("reading the target")?, b"new contents")?;
    // The replaced file lives on for whoever has it open.
    let mut old = Vec::new();
    replaced.read_to_end(&mut old).step("reading the replaced file through its descriptor")?;
    expect_bytes("the replaced file through its open descriptor", &old, b"old contents")?;
    Ok("the target holds the source, the replaced file stays readable while open".into())
}

fn rename_noreplace(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (from, to, free) = (directory.join("from"), directory.join("to"), directory.join("free"));
    fs::write(&from, "from").step("writing the source")?;
    fs::write(&to, "to").step("writing the target")?;
    expect_error(
        "renameat2(RENAME_NOREPLACE) onto an existing file",
        sys::renameat2(&from, &to, libc::RENAME_NOREPLACE),
        libc::EEXIST,
    )?;
    expect_bytes("the source after the refusal", &fs::read(&from).step("reading the source")?, b"from")?;
    expect_bytes("the target after the refusal", &fs::read(&to).step("reading the target")?, b"to")?;
    sys::renameat2(&from, &free, libc::RENAME_NOREPLACE).step("renameat2(RENAME_NOREPLACE) onto a free name")?;
    expect_bytes("the renamed file", &fs::read(&free).step("reading the new name")?, b"from")?;
    Ok("EEXIST onto an existing name, both files unchanged; a free name works".into())
}

fn rename_into_itself(context: &Context) -> Outcome {
    let directory = context.directory()?.join("parent");
    let inside = directory.join("child");
    fs::create_dir_all(&inside).step("mkdir parent/child")?;
    expect_error(
        "rename of a directory into its own subdirectory",
        fs::rename(&directory, inside.join("moved")),
        libc::EINVAL,
    )?;
    expect(inside.is_dir(), "parent/child is gone after the refused rename")?;
    Ok("EINVAL".into())
}

fn rename_over_not_empty(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let (moving, full, empty) = (directory.join("moving"), directory.join("full"), directory.join("empty"));
    for each in [&moving, &full, &empty] {
        fs::create_dir(each).step(format_args!("mkdir {}", each.display()))?;
    }
    fs::write(moving.join("mark"), "moved").step("marking the moving directory")?;
    fs::write(full.join("file"), "x").step("filling the target directory")?;
    expect_error("rename of a directory over a non-empty one", fs::rename(&moving, &full), libc::ENOTEMPTY)?;
    fs::rename(&moving, &empty).step("rename of a directory over an empty one")?;
    expect_bytes("the moved directory's file", &fs::read(empty.join("mark")).step("reading it")?, b"moved")?;
    expect_error("stat of the old name", fs::metadata(&moving), libc::ENOENT)?;
    Ok("ENOTEMPTY over a non-empty directory; over an empty one it replaces it".into())
}

/// The names `directory` lists (`read_dir` leaves out `.` and `..`).
fn names(directory: &Path) -> Result<BTreeSet<String>, String> {
    let mut names = BTreeSet::new();
    for entry in fs::read_dir(directory).step("opening the directory")? {
        let entry = entry.step("reading the directory")?;
        names.insert(entry.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

/// `got` must be exactly `wanted`; else the names missing and those too many, a few of each.
fn expect_names(what: &str, got: &BTreeSet<String>, wanted: &BTreeSet<String>) -> Result<(), String> {
    if got == wanted {
        return Ok(());
    }
    let missing: Vec<&String> = wanted.difference(got).take(5).collect();
    let extra: Vec<&String> = got.difference(wanted).take(5).collect();
    Err(format!("{what}: {} names instead of {}; missing {missing:?}, extra {extra:?}", got.len(), wanted.len()))
}

fn read_dir(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let all: BTreeSet<String> = (0..100).map(|index| format!("file-{index:03}")).collect();
    for name in &all {
        fs::write(directory.join(name), name).step(format_args!("creating {name}"))?;
    }
    expect_names("the listing of 100 files", &names(&directory)?, &all)?;
    let (even, odd): (BTreeSet<String>, BTreeSet<String>) =
        all.iter().cloned().partition(|name| name.ends_with(['0', '2', '4', '6', '8']));
    for name in &even {
        fs::remove_file(directory.join(name)).step(format_args!("deleting {name}"))?;
    }
    expect_names("the listing after deleting 50", &names(&directory)?, &odd)?;
    Ok("100 listed, 50 deleted, the other 50 listed".into())
}

fn unlink_open(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let path = directory.join("doomed");
    fs::write(&path, "still here").step("writing the file")?;
    let mut file = fs::OpenOptions::new().read(true).write(true).open(&path).step("opening it")?;
    fs::remove_file(&path).step("unlink while open")?;
    expect_error("stat of the unlinked name", fs::metadata(&path), libc::ENOENT)?;
    expect(!names(&directory)?.contains("doomed"), "the directory still lists the unlinked name")?;
    let mut contents = Vec::new();
    file.read_to_end(&mut contents).step("reading through the open descriptor")?;
    expect_bytes("the unlinked file through its descriptor", &contents, b"still here")?;
    expect_equal("st_nlink of the unlinked file", file.metadata().step("fstat")?.nlink(), 0)?;
    file.write_all(b", and more").step("writing through the open descriptor")?;
    file.seek(SeekFrom::Start(0)).step("SEEK_SET 0")?;
    contents.clear();
    file.read_to_end(&mut contents).step("reading again")?;
    expect_bytes("the unlinked file after a write", &contents, b"still here, and more")?;
    Ok("the name is gone, the data readable and writable through the descriptor, st_nlink 0".into())
}
