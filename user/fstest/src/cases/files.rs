//! Regular files: written and read back, the open flags, offsets and holes, truncation, fsync.

use super::{Case, Context};
use crate::expect::{expect_bytes, expect_equal, expect_error, expect_zeros, Outcome, Step};
use crate::pattern::pattern;
use std::fs::{self, File, OpenOptions};
use std::io::{IoSlice, IoSliceMut, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};

pub const CASES: [Case; 12] = [
    Case { name: "write-read-sizes", run: write_read_sizes },
    Case { name: "append", run: append },
    Case { name: "excl-existing", run: exclusive_on_existing },
    Case { name: "trunc", run: truncate_on_open },
    Case { name: "directory-flag-on-file", run: directory_flag_on_file },
    Case { name: "write-directory", run: write_directory },
    Case { name: "lseek", run: lseek },
    Case { name: "hole", run: hole },
    Case { name: "pread-pwrite", run: pread_pwrite },
    Case { name: "readv-writev", run: readv_writev },
    Case { name: "ftruncate", run: ftruncate },
    Case { name: "fsync", run: fsync },
];

/// Around the page size (4095, 4096, 4097), nothing, one byte, and 200 KiB (many pages).
const SIZES: [usize; 6] = [0, 1, 4095, 4096, 4097, 200 * 1024];

fn write_read_sizes(context: &Context) -> Outcome {
    let directory = context.directory()?;
    for size in SIZES {
        let path = directory.join(format!("size-{size}"));
        let data = pattern(size as u64, size);
        fs::write(&path, &data).step(format_args!("writing {size} bytes"))?;
        let back = fs::read(&path).step(format_args!("reading {size} bytes back"))?;
        expect_bytes(format_args!("{size} bytes read back"), &back, &data)?;
        let length = fs::metadata(&path).step(format_args!("stat of the {size}-byte file"))?.len();
        expect_equal(format_args!("st_size of the {size}-byte file"), length, size as u64)?;
    }
    Ok(format!("{SIZES:?} bytes read back"))
}

fn append(context: &Context) -> Outcome {
    let path = context.directory()?.join("log");
    fs::write(&path, "one\n").step("writing the first line")?;
    let mut file = OpenOptions::new().append(true).open(&path).step("open O_APPEND")?;
    file.write_all(b"two\n").step("writing with O_APPEND")?;
    // O_APPEND: every write goes to the end, wherever the offset was put.
    file.seek(SeekFrom::Start(0)).step("lseek to 0")?;
    file.write_all(b"three\n").step("writing with O_APPEND after lseek to 0")?;
    expect_bytes("the file", &fs::read(&path).step("reading back")?, b"one\ntwo\nthree\n")?;
    Ok("writes land at the end, also after lseek to 0".into())
}

fn exclusive_on_existing(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let existing = directory.join("existing");
    fs::write(&existing, "kept").step("creating the file")?;
    let exclusive = || OpenOptions::new().write(true).create_new(true).clone();
    expect_error("O_CREAT|O_EXCL on an existing file", exclusive().open(&existing), libc::EEXIST)?;
    expect_bytes("the existing file afterwards", &fs::read(&existing).step("reading it")?, b"kept")?;
    exclusive().open(directory.join("new")).step("O_CREAT|O_EXCL on a new name")?;
    Ok("EEXIST on an existing name, success on a new one".into())
}

fn truncate_on_open(context: &Context) -> Outcome {
    let path = context.directory()?.join("file");
    fs::write(&path, pattern(3, 1000)).step("writing 1000 bytes")?;
    let mut file = OpenOptions::new().write(true).truncate(true).open(&path).step("open O_TRUNC")?;
    expect_equal("st_size after O_TRUNC", fs::metadata(&path).step("stat")?.len(), 0)?;
    file.write_all(b"abc").step("writing after O_TRUNC")?;
    drop(file);
    expect_bytes("the file", &fs::read(&path).step("reading back")?, b"abc")?;
    Ok("1000 bytes cut to 0, then 3 written".into())
}

fn directory_flag_on_file(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let file = directory.join("file");
    fs::write(&file, "not a directory").step("creating the file")?;
    let open_directory = || OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY).clone();
    expect_error("open O_DIRECTORY of a file", open_directory().open(&file), libc::ENOTDIR)?;
    open_directory().open(&directory).step("open O_DIRECTORY of a directory")?;
    Ok("ENOTDIR".into())
}

fn write_directory(context: &Context) -> Outcome {
    let directory = context.directory()?;
    expect_error("open O_WRONLY of a directory", OpenOptions::new().write(true).open(&directory), libc::EISDIR)?;
    expect_error(
        "open O_RDWR of a directory",
        OpenOptions::new().read(true).write(true).open(&directory),
        libc::EISDIR,
    )?;
    Ok("EISDIR for O_WRONLY and O_RDWR".into())
}

fn lseek(context: &Context) -> Outcome {
    let path = context.directory()?.join("file");
    let data = pattern(4, 1000);
    fs::write(&path, &data).step("writing 1000 bytes")?;
    let mut file = File::open(&path).step("open")?;
    let mut ten = [0u8; 10];
    expect_equal("SEEK_SET 100", file.seek(SeekFrom::Start(100)).step("SEEK_SET 100")?, 100)?;
    file.read_exact(&mut ten).step("reading 10 bytes at 100")?;
    expect_bytes("10 bytes at 100", &ten, &data[100..110])?;
    expect_equal("SEEK_CUR -20 from 110", file.seek(SeekFrom::Current(-20)).step("SEEK_CUR -20")?, 90)?;
    file.read_exact(&mut ten).step("reading 10 bytes at 90")?;
    expect_bytes("10 bytes at 90", &ten, &data[90..100])?;
    expect_equal("SEEK_END -10", file.seek(SeekFrom::End(-10)).step("SEEK_END -10")?, 990)?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest).step("reading to the end")?;
    expect_bytes("the last 10 bytes", &rest, &data[990..])?;
    expect_equal("SEEK_CUR 0 at the end", file.stream_position().step("SEEK_CUR 0")?, 1000)?;
    expect_error("SEEK_CUR to before the start", file.seek(SeekFrom::Current(-2000)), libc::EINVAL)?;
    expect_equal("the offset after the refused seek", file.stream_position().step("SEEK_CUR 0")?, 1000)?;
    Ok("SET 100, CUR -20, END -10, CUR 0 = 1000, before the start EINVAL".into())
}

fn hole(context: &Context) -> Outcome {
    let path = context.directory()?.join("sparse");
    let mut file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).step("creating the file")?;
    file.write_all(b"head").step("writing the head")?;
    expect_equal("SEEK_SET past the end", file.seek(SeekFrom::Start(10_000)).step("SEEK_SET 10000")?, 10_000)?;
    expect_equal("st_size after a seek alone", file.metadata().step("fstat")?.len(), 4)?;
    file.write_all(b"tail").step("writing past the end")?;
    expect_equal("SEEK_END +5000", file.seek(SeekFrom::End(5000)).step("SEEK_END 5000")?, 15_004)?;
    file.write_all(b"end").step("writing after SEEK_END +5000")?;
    expect_equal("st_size", file.metadata().step("fstat")?.len(), 15_007)?;
    let bytes = fs::read(&path).step("reading back")?;
    expect_equal("bytes read back", bytes.len(), 15_007)?;
    expect_bytes("the head", &bytes[..4], b"head")?;
    expect_zeros("the first hole", &bytes[4..10_000])?;
    expect_bytes("the tail", &bytes[10_000..10_004], b"tail")?;
    expect_zeros("the second hole", &bytes[10_004..15_004])?;
    expect_bytes("the end", &bytes[15_004..], b"end")?;
    Ok("two holes (SEEK_SET and SEEK_END past the end) read back as zeros".into())
}

fn pread_pwrite(context: &Context) -> Outcome {
    let path = context.directory()?.join("file");
    let data = pattern(5, 8192);
    fs::write(&path, &data).step("writing 8192 bytes")?;
    let mut file = OpenOptions::new().read(true).write(true).open(&path).step("open O_RDWR")?;
    file.seek(SeekFrom::Start(100)).step("SEEK_SET 100")?;
    let mut piece = [0u8; 100];
    file.read_exact_at(&mut piece, 5000).step("pread 100 bytes at 5000")?;
    expect_bytes("pread at 5000", &piece, &data[5000..5100])?;
    expect_equal("the offset after pread", file.stream_position().step("SEEK_CUR 0")?, 100)?;
    file.write_all_at(b"XYZ", 6000).step("pwrite 3 bytes at 6000")?;
    expect_equal("the offset after pwrite", file.stream_position().step("SEEK_CUR 0")?, 100)?;
    let mut three = [0u8; 3];
    file.read_exact_at(&mut three, 6000).step("pread at 6000")?;
    expect_bytes("pread of what pwrite wrote", &three, b"XYZ")?;
    file.read_exact(&mut piece).step("read at the offset")?;
    expect_bytes("read after pread and pwrite", &piece, &data[100..200])?;
    let mut expected = data;
    expected[6000..6003].copy_from_slice(b"XYZ");
    expect_bytes("the file", &fs::read(&path).step("reading back")?, &expected)?;
    Ok("the offset stays at 100 through pread and pwrite".into())
}

fn readv_writev(context: &Context) -> Outcome {
    let path = context.directory()?.join("file");
    let mut file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).step("creating the file")?;
    let pieces = [IoSlice::new(b"alpha"), IoSlice::new(b""), IoSlice::new(b"beta-gamma")];
    let written = file.write_vectored(&pieces).step("writev of 5 + 0 + 10 bytes")?;
    expect_equal("bytes writev wrote", written, 15)?;
    file.seek(SeekFrom::Start(0)).step("SEEK_SET 0")?;
    let (mut first, mut second, mut third) = ([0u8; 5], [0u8; 4], [0u8; 10]);
    let read = file
        .read_vectored(&mut [IoSliceMut::new(&mut first), IoSliceMut::new(&mut second), IoSliceMut::new(&mut third)])
        .step("readv into 5 + 4 + 10 bytes")?;
    expect_equal("bytes readv read", read, 15)?;
    expect_bytes("readv's first buffer", &first, b"alpha")?;
    expect_bytes("readv's second buffer", &second, b"beta")?;
    expect_bytes("readv's third buffer", &third[..6], b"-gamma")?;
    expect_zeros("readv's third buffer past the data", &third[6..])?;
    Ok("writev 3 buffers (one empty), readv 3 buffers".into())
}

fn ftruncate(context: &Context) -> Outcome {
    let path = context.directory()?.join("file");
    let data = pattern(6, 8192);
    fs::write(&path, &data).step("writing 8192 bytes")?;
    let file = OpenOptions::new().write(true).open(&path).step("open O_WRONLY")?;
    file.set_len(100).step("ftruncate to 100")?;
    expect_bytes("the file cut to 100", &fs::read(&path).step("reading back")?, &data[..100])?;
    file.set_len(10_000).step("ftruncate to 10000")?;
    let grown = fs::read(&path).step("reading back")?;
    expect_equal("bytes after growing to 10000", grown.len(), 10_000)?;
    expect_bytes("the kept 100 bytes", &grown[..100], &data[..100])?;
    // Growing must not bring back the bytes the shrink cut off.
    expect_zeros("the grown part", &grown[100..])?;
    file.set_len(0).step("ftruncate to 0")?;
    expect_equal("st_size after ftruncate to 0", fs::metadata(&path).step("stat")?.len(), 0)?;
    Ok("8192 -> 100 (prefix kept) -> 10000 (zeros) -> 0".into())
}

fn fsync(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let mut file = File::create(directory.join("file")).step("creating the file")?;
    file.write_all(&pattern(7, 64 * 1024)).step("writing 64 KiB")?;
    file.sync_all().step("fsync of the file")?;
    // Programs fsync the directory after a rename to make the new name durable.
    File::open(&directory).step("opening the directory")?.sync_all().step("fsync of the directory")?;
    Ok("0 for a file and for its directory".into())
}
