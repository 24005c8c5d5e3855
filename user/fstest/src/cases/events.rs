//! `epoll`: level- and edge-triggered interest, one-shot, a blocking wait woken by another
//! process, a timeout, interest that goes with its file, and the errors Linux gives.

use super::{wait_for_success, Case, Context};
use crate::expect::{expect, expect_equal, expect_error, Outcome, Step};
use crate::sys::{self, Fork};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

pub const CASES: [Case; 7] = [
    Case { name: "epoll-level", run: level },
    Case { name: "epoll-edge", run: edge },
    Case { name: "epoll-oneshot", run: one_shot },
    Case { name: "epoll-blocking-wait", run: blocking_wait },
    Case { name: "epoll-timeout", run: timeout },
    Case { name: "epoll-close-forgets", run: close_forgets },
    Case { name: "epoll-errors", run: errors },
];

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const HANG_UP: u32 = libc::EPOLLHUP as u32;
const EDGE: u32 = libc::EPOLLET as u32;
const ONE_SHOT: u32 = libc::EPOLLONESHOT as u32;
const WRITER_DELAY: Duration = Duration::from_millis(50);
const TIMEOUT: Duration = Duration::from_millis(100);

fn pipe() -> Result<(File, File), String> {
    let (read_end, write_end) = sys::pipe2(libc::O_CLOEXEC).step("pipe2(O_CLOEXEC)")?;
    Ok((File::from(read_end), File::from(write_end)))
}

fn epoll() -> Result<OwnedFd, String> {
    sys::epoll_create1(libc::EPOLL_CLOEXEC).step("epoll_create1(EPOLL_CLOEXEC)")
}

fn add(epoll: &OwnedFd, fd: BorrowedFd, events: u32, data: u64) -> Result<(), String> {
    sys::epoll_ctl(epoll.as_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), Some((events, data)))
        .step(format_args!("epoll_ctl ADD of descriptor {} for {events:#x}", fd.as_raw_fd()))
}

/// The (events, data) `epoll_wait` returns, in the order of their data (Linux returns them
/// in the order they became ready).
fn ready(epoll: &OwnedFd, timeout_milliseconds: libc::c_int) -> Result<Vec<(u32, u64)>, String> {
    let mut events = sys::epoll_wait(epoll.as_fd(), 8, timeout_milliseconds).step("epoll_wait")?;
    events.sort_by_key(|&(_, data)| data);
    Ok(events)
}

fn level(_: &Context) -> Outcome {
    let (mut reader, mut writer) = pipe()?;
    let epoll = epoll()?;
    add(&epoll, reader.as_fd(), IN, 42)?;
    add(&epoll, writer.as_fd(), OUT, 7)?;
    expect_equal("the events of an empty pipe", ready(&epoll, 0)?, vec![(OUT, 7)])?;
    writer.write_all(b"xy").step("write")?;
    expect_equal("the events with two bytes in", ready(&epoll, 0)?, vec![(OUT, 7), (IN, 42)])?;
    expect_equal("the events again (level-triggered)", ready(&epoll, 0)?, vec![(OUT, 7), (IN, 42)])?;
    let mut buffer = [0u8; 2];
    reader.read_exact(&mut buffer).step("read")?;
    expect_equal("the events once drained", ready(&epoll, 0)?, vec![(OUT, 7)])?;
    Ok("EPOLLIN with its data while bytes are there, every time; EPOLLOUT on the write end".into())
}

fn edge(_: &Context) -> Outcome {
    let (mut reader, mut writer) = pipe()?;
    let epoll = epoll()?;
    add(&epoll, reader.as_fd(), IN | EDGE, 1)?;
    writer.write_all(b"a").step("write")?;
    expect_equal("the first edge", ready(&epoll, 0)?, vec![(IN, 1)])?;
    expect_equal("no new edge", ready(&epoll, 0)?, vec![])?;
    writer.write_all(b"b").step("second write")?;
    expect_equal("the edge of more bytes", ready(&epoll, 0)?, vec![(IN, 1)])?;
    let mut buffer = [0u8; 2];
    reader.read_exact(&mut buffer).step("read")?;
    expect_equal("drained", ready(&epoll, 0)?, vec![])?;
    writer.write_all(b"c").step("third write")?;
    expect_equal("the edge after the drain", ready(&epoll, 0)?, vec![(IN, 1)])?;
    Ok("EPOLLET: reported once per arrival, not again for the same bytes".into())
}

fn one_shot(_: &Context) -> Outcome {
    let (_reader, writer) = pipe()?;
    let epoll = epoll()?;
    add(&epoll, writer.as_fd(), OUT | ONE_SHOT, 9)?;
    expect_equal("the one shot", ready(&epoll, 0)?, vec![(OUT, 9)])?;
    expect_equal("after the shot", ready(&epoll, 0)?, vec![])?;
    sys::epoll_ctl(epoll.as_fd(), libc::EPOLL_CTL_MOD, writer.as_raw_fd(), Some((OUT | ONE_SHOT, 10)))
        .step("epoll_ctl MOD")?;
    expect_equal("re-armed by MOD", ready(&epoll, 0)?, vec![(OUT, 10)])?;
    Ok("EPOLLONESHOT: one report, then silent until EPOLL_CTL_MOD".into())
}

fn blocking_wait(_: &Context) -> Outcome {
    let (reader, writer) = pipe()?;
    let epoll = epoll()?;
    add(&epoll, reader.as_fd(), IN, 5)?;
    let started = Instant::now();
    let pid = match sys::fork().step("fork")? {
        Fork::Child => sys::exit_child(move || {
            let mut writer = writer;
            std::thread::sleep(WRITER_DELAY);
            i32::from(writer.write_all(b"late").is_err())
        }),
        Fork::Parent(pid) => pid,
    };
    drop(writer);
    let events = ready(&epoll, 5000)?;
    let waited = started.elapsed();
    wait_for_success(pid, "the writing child")?;
    // The child may have ended (its write end closed: EPOLLHUP too) by the time the events
    // were taken.
    expect(
        events.len() == 1 && events[0].1 == 5 && events[0].0 & IN != 0,
        format_args!("the wait returned {events:?}, not EPOLLIN with data 5"),
    )?;
    expect(
        waited >= WRITER_DELAY,
        format_args!("epoll_wait returned after {waited:?}, before the child's {WRITER_DELAY:?} sleep ended"),
    )?;
    Ok(format!("epoll_wait returned the child's write after {:.1} ms", waited.as_secs_f64() * 1e3))
}

fn timeout(_: &Context) -> Outcome {
    let (reader, _writer) = pipe()?;
    let epoll = epoll()?;
    add(&epoll, reader.as_fd(), IN, 0)?;
    let started = Instant::now();
    let events = ready(&epoll, TIMEOUT.as_millis() as libc::c_int)?;
    let waited = started.elapsed();
    expect_equal("events of an empty pipe", events, vec![])?;
    expect(waited >= TIMEOUT, format_args!("the wait ended after {waited:?}, before its {TIMEOUT:?}"))?;
    Ok(format!("an empty pipe: 0 events after {:.1} ms of a {TIMEOUT:?} timeout", waited.as_secs_f64() * 1e3))
}

fn close_forgets(_: &Context) -> Outcome {
    let (reader, writer) = pipe()?;
    let epoll = epoll()?;
    add(&epoll, writer.as_fd(), OUT, 3)?;
    add(&epoll, reader.as_fd(), IN, 4)?;
    drop(writer);
    // The read end sees the last writer gone; the write end's interest went with it.
    expect_equal("after the write end closed", ready(&epoll, 0)?, vec![(HANG_UP, 4)])?;
    Ok("closing a watched file removes its interest; the other end reports EPOLLHUP".into())
}

fn errors(context: &Context) -> Outcome {
    let directory = context.directory()?;
    let file = File::create(directory.join("plain")).step("creating a file")?;
    let (reader, writer) = pipe()?;
    let epoll = epoll()?;
    let control = |operation, fd: libc::c_int, event| sys::epoll_ctl(epoll.as_fd(), operation, fd, event);
    expect_error("ADD of a regular file", control(libc::EPOLL_CTL_ADD, file.as_raw_fd(), Some((IN, 0))), libc::EPERM)?;
    expect_error("DEL of what is not watched", control(libc::EPOLL_CTL_DEL, reader.as_raw_fd(), None), libc::ENOENT)?;
    expect_error(
        "MOD of what is not watched",
        control(libc::EPOLL_CTL_MOD, reader.as_raw_fd(), Some((IN, 0))),
        libc::ENOENT,
    )?;
    control(libc::EPOLL_CTL_ADD, reader.as_raw_fd(), Some((IN, 0))).step("ADD")?;
    expect_error("a second ADD", control(libc::EPOLL_CTL_ADD, reader.as_raw_fd(), Some((IN, 0))), libc::EEXIST)?;
    expect_error(
        "ADD of the epoll itself",
        control(libc::EPOLL_CTL_ADD, epoll.as_raw_fd(), Some((IN, 0))),
        libc::EINVAL,
    )?;
    expect_error("ADD of a closed descriptor", control(libc::EPOLL_CTL_ADD, 999, Some((IN, 0))), libc::EBADF)?;
    expect_error("an unknown operation", control(77, reader.as_raw_fd(), Some((IN, 0))), libc::EINVAL)?;
    control(libc::EPOLL_CTL_DEL, reader.as_raw_fd(), None).step("DEL")?;
    expect_error(
        "epoll_ctl on a pipe",
        sys::epoll_ctl(reader.as_fd(), libc::EPOLL_CTL_ADD, writer.as_raw_fd(), Some((IN, 0))),
        libc::EINVAL,
    )?;
    expect_error("epoll_wait for 0 events", sys::epoll_wait(epoll.as_fd(), 0, 0), libc::EINVAL)?;
    expect_error("epoll_wait on a pipe", sys::epoll_wait(reader.as_fd(), 1, 0), libc::EINVAL)?;
    expect_error("epoll_create1 with a bad flag", sys::epoll_create1(0x4), libc::EINVAL)?;
    Ok("EPERM, ENOENT, EEXIST, EINVAL and EBADF where Linux gives them".into())
}
