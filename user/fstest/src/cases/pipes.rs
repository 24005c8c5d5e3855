//! Pipes: data, end of file, blocking and waking, poll, a large transfer, EAGAIN, EPIPE, SIGPIPE.

use super::{wait_for_success, Case, Context};
use crate::expect::{expect, expect_bytes, expect_equal, expect_error, Outcome, Step};
use crate::pattern::{checksum, pattern, CHECKSUM_START};
use crate::sys::{self, Fork, SigPipe};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

pub const CASES: [Case; 11] = [
    Case { name: "pipe-write-read", run: write_read },
    Case { name: "pipe-eof", run: end_of_file },
    Case { name: "pipe-blocking-read", run: blocking_read },
    Case { name: "pipe-kill-blocked-reader", run: kill_blocked_reader },
    Case { name: "poll-in", run: poll_in },
    Case { name: "poll-hup", run: poll_hup },
    Case { name: "poll-timeout", run: poll_timeout },
    Case { name: "pipe-1mib", run: one_mebibyte },
    Case { name: "pipe-nonblock-empty", run: nonblocking_empty },
    Case { name: "pipe-epipe", run: broken_pipe_error },
    Case { name: "pipe-sigpipe", run: broken_pipe_signal },
];

/// How long the writing child sleeps before it writes, and the least the reader must wait.
const WRITER_DELAY: Duration = Duration::from_millis(50);
const POLL_TIMEOUT: Duration = Duration::from_millis(100);
const TRANSFER: usize = 1 << 20;

fn pipe() -> Result<(File, File), String> {
    let (read_end, write_end) = sys::pipe2(libc::O_CLOEXEC).step("pipe2(O_CLOEXEC)")?;
    Ok((File::from(read_end), File::from(write_end)))
}

/// `poll` of one descriptor for `events`: the `revents` it reports (0: the timeout passed).
fn poll_one(fd: BorrowedFd, events: libc::c_short, timeout_milliseconds: libc::c_int) -> Result<libc::c_short, String> {
    let mut descriptors = [libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 }];
    let ready = sys::poll(&mut descriptors, timeout_milliseconds).step("poll")?;
    expect(ready <= 1, format_args!("poll of one descriptor says {ready} are ready"))?;
    expect(
        (ready == 0) == (descriptors[0].revents == 0),
        format_args!("poll returned {ready} with revents {:#x}", descriptors[0].revents),
    )?;
    Ok(descriptors[0].revents)
}

fn write_read(_: &Context) -> Outcome {
    let (mut reader, mut writer) = pipe()?;
    writer.write_all(b"through the pipe").step("write")?;
    let mut buffer = [0u8; 64];
    // A pipe's read returns what is there, not the whole buffer.
    let count = reader.read(&mut buffer).step("read")?;
    expect_bytes("read", &buffer[..count], b"through the pipe")?;
    Ok("16 bytes written, one read of 64 returns the 16".into())
}

fn end_of_file(_: &Context) -> Outcome {
    let (mut reader, mut writer) = pipe()?;
    let second_writer = File::from(sys::dup(writer.as_fd()).step("dup of the write end")?);
    writer.write_all(b"last words").step("write")?;
    drop(writer);
    let mut buffer = [0u8; 64];
    let count = reader.read(&mut buffer).step("read")?;
    expect_bytes("read with one writer left", &buffer[..count], b"last words")?;
    // Drained, but a writer is still open: nothing to read, and no end of file yet.
    expect_equal("poll revents with a writer open and no data", poll_one(reader.as_fd(), libc::POLLIN, 0)?, 0)?;
    drop(second_writer);
    expect_equal("read after the last writer closed", reader.read(&mut buffer).step("read at the end")?, 0)?;
    expect_equal("read again", reader.read(&mut buffer).step("read again")?, 0)?;
    Ok("data, then nothing while a writer is open, then 0 (EOF) once the last writer closed".into())
}

fn blocking_read(_: &Context) -> Outcome {
    let (mut reader, writer) = pipe()?;
    let started = Instant::now();
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(move || {
            drop(reader);
            let mut writer = writer;
            std::thread::sleep(WRITER_DELAY);
            i32::from(writer.write_all(b"late").is_err())
        }),
        Fork::Parent(pid) => pid,
    };
    // The parent's write end closed: if the child dies without writing, read sees EOF, not a hang.
    drop(writer);
    let mut buffer = [0u8; 16];
    let count = reader.read(&mut buffer).step("the blocking read")?;
    let waited = started.elapsed();
    wait_for_success(pid, "the writing child")?;
    expect_bytes("the blocking read", &buffer[..count], b"late")?;
    expect(
        waited >= WRITER_DELAY,
        format_args!("the read returned after {waited:?}, before the child's {WRITER_DELAY:?} sleep ended"),
    )?;
    Ok(format!("read returned the child's write after {:.1} ms", waited.as_secs_f64() * 1e3))
}

fn kill_blocked_reader(_: &Context) -> Outcome {
    let (reader, writer) = pipe()?;
    let pid = match sys::fork().step("fork")? {
        // The child keeps its write end open, so the read never ends by itself.
        Fork::Child => sys::exit_child(move || {
            let _writer = writer;
            let mut reader = reader;
            let mut buffer = [0u8; 1];
            match reader.read_exact(&mut buffer) {
                Ok(()) => 3,
                Err(_) => 4,
            }
        }),
        Fork::Parent(pid) => pid,
    };
    std::thread::sleep(Duration::from_millis(30));
    sys::kill(pid, libc::SIGKILL).step("kill SIGKILL")?;
    let status = rt::wait(pid).step("waiting for the killed child")?;
    expect_equal(format_args!("how the child blocked in read ended ({status})"), status.signal(), Some(libc::SIGKILL))?;
    Ok("a child blocked reading an empty pipe is ended by SIGKILL".into())
}

fn poll_in(_: &Context) -> Outcome {
    let (reader, mut writer) = pipe()?;
    expect_equal("revents of an empty pipe's read end", poll_one(reader.as_fd(), libc::POLLIN, 0)?, 0)?;
    let writable = poll_one(writer.as_fd(), libc::POLLOUT, 0)?;
    expect(writable & libc::POLLOUT != 0, format_args!("the write end's revents {writable:#x} lack POLLOUT"))?;
    writer.write_all(b"x").step("write")?;
    let readable = poll_one(reader.as_fd(), libc::POLLIN, 0)?;
    expect_equal("revents with data", readable, libc::POLLIN)?;
    let waited = poll_one(reader.as_fd(), libc::POLLIN, 1000)?;
    expect_equal("revents with data and a timeout", waited, libc::POLLIN)?;
    Ok("POLLIN once a byte is there (not before); POLLOUT on the write end".into())
}

fn poll_hup(_: &Context) -> Outcome {
    let (mut reader, mut writer) = pipe()?;
    writer.write_all(b"x").step("write")?;
    drop(writer);
    let with_data = poll_one(reader.as_fd(), libc::POLLIN, 0)?;
    expect(with_data & libc::POLLIN != 0, format_args!("revents {with_data:#x} with data and no writer lack POLLIN"))?;
    reader.read_exact(&mut [0u8; 1]).step("read")?;
    let drained = poll_one(reader.as_fd(), libc::POLLIN, 0)?;
    expect(drained & libc::POLLHUP != 0, format_args!("revents {drained:#x} with no writer lack POLLHUP"))?;
    expect(drained & libc::POLLIN == 0, format_args!("revents {drained:#x} with no data have POLLIN"))?;
    Ok(format!("POLLIN with data after the writer closed, then POLLHUP alone ({drained:#x})"))
}

fn poll_timeout(_: &Context) -> Outcome {
    let (reader, _writer) = pipe()?;
    let started = Instant::now();
    let timeout = POLL_TIMEOUT.as_millis() as libc::c_int;
    let revents = poll_one(reader.as_fd(), libc::POLLIN, timeout)?;
    let waited = started.elapsed();
    expect_equal("revents after a timeout with nothing to read", revents, 0)?;
    expect(waited >= POLL_TIMEOUT, format_args!("poll({timeout} ms) returned 0 after only {waited:?}"))?;
    Ok(format!("0 after {:.1} ms", waited.as_secs_f64() * 1e3))
}

fn one_mebibyte(_: &Context) -> Outcome {
    let (reader, writer) = pipe()?;
    let (answer_reader, answer_writer) = pipe()?;
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(move || {
            // Its own copy of the write end closed, or the read would never see the end.
            drop((writer, answer_reader));
            let (mut reader, mut answer_writer) = (reader, answer_writer);
            let (mut count, mut hash) = (0u64, CHECKSUM_START);
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(read) => {
                        count += read as u64;
                        hash = checksum(hash, &buffer[..read]);
                    }
                    Err(_) => return 1,
                }
            }
            let mut answer = count.to_le_bytes().to_vec();
            answer.extend_from_slice(&hash.to_le_bytes());
            i32::from(answer_writer.write_all(&answer).is_err())
        }),
        Fork::Parent(pid) => pid,
    };
    drop((reader, answer_writer));
    let data = pattern(13, TRANSFER);
    let mut writer = writer;
    let sent = writer.write_all(&data).step("writing 1 MiB into the pipe");
    drop(writer);
    let mut answer = Vec::new();
    let received = answer_reader.take(16).read_to_end(&mut answer).step("reading the child's answer");
    wait_for_success(pid, "the reading child")?;
    sent?;
    received?;
    expect_equal("the child's answer's length", answer.len(), 16)?;
    let count = u64::from_le_bytes(answer[..8].try_into().expect("8 bytes"));
    let hash = u64::from_le_bytes(answer[8..].try_into().expect("8 bytes"));
    expect_equal("bytes the child read", count, TRANSFER as u64)?;
    expect_equal("the FNV-1a of what the child read", hash, checksum(CHECKSUM_START, &data))?;
    Ok(format!("{TRANSFER} bytes, FNV-1a {hash:#018x} on both sides"))
}

fn nonblocking_empty(_: &Context) -> Outcome {
    let (reader, writer): (OwnedFd, OwnedFd) =
        sys::pipe2(libc::O_CLOEXEC | libc::O_NONBLOCK).step("pipe2(O_NONBLOCK)")?;
    let (mut reader, mut writer) = (File::from(reader), File::from(writer));
    expect_error("read of an empty O_NONBLOCK pipe", reader.read(&mut [0u8; 8]), libc::EAGAIN)?;
    writer.write_all(b"now").step("write")?;
    let mut buffer = [0u8; 8];
    let count = reader.read(&mut buffer).step("read with data")?;
    expect_bytes("read with data", &buffer[..count], b"now")?;
    expect_error("read once drained", reader.read(&mut buffer), libc::EAGAIN)?;
    Ok("EAGAIN when empty, data when there".into())
}

fn broken_pipe_error(_: &Context) -> Outcome {
    // Rust's start-up ignores SIGPIPE already; saying so here keeps the case honest alone.
    sys::set_sigpipe(SigPipe::Ignore).step("signal(SIGPIPE, SIG_IGN)")?;
    let (reader, mut writer) = pipe()?;
    drop(reader);
    expect_error("write with the reader closed and SIGPIPE ignored", writer.write(b"x"), libc::EPIPE)?;
    Ok("EPIPE".into())
}

fn broken_pipe_signal(_: &Context) -> Outcome {
    let (reader, writer) = pipe()?;
    drop(reader);
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(move || {
            if sys::set_sigpipe(SigPipe::Default).is_err() {
                return 3;
            }
            let mut writer = writer;
            match writer.write_all(b"x") {
                Ok(()) => 4,
                Err(_) => 5,
            }
        }),
        Fork::Parent(pid) => pid,
    };
    drop(writer);
    let status = rt::wait(pid).step("waiting for the writing child")?;
    let outcome = match (status.signal(), status.code()) {
        (Some(signal), _) => format!("killed by signal {signal}"),
        (None, Some(3)) => "could not set SIG_DFL".into(),
        (None, Some(4)) => "the write succeeded".into(),
        (None, Some(5)) => "the write failed without a signal".into(),
        _ => status.to_string(),
    };
    expect_equal("how the writer with default SIGPIPE ended", outcome.as_str(), "killed by signal 13")?;
    Ok("the writer was killed by signal 13".into())
}
