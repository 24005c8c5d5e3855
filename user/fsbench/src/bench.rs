//! The benchmarks: each returns its samples in nanoseconds of `CLOCK_MONOTONIC`, one per run
//! of the timed work, or why it could not take them.

use crate::counts::Tally;
use crate::os::{self, Command};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

/// The program the file benchmarks run: Debian's static busybox, as on both systems.
pub const BUSYBOX: &str = "/bin/busybox";
/// The file `dd` writes.
pub const DD_FILE: &str = "/tmp/fsbench.dd";
/// The block size of `dd`, its default, as in Memsc §5.3.1: one read and one write per block.
pub const DD_BLOCK: u64 = 512;
/// The size of every `write` and `read` of the pipe benchmark.
pub const PIPE_CHUNK: usize = 64 << 10;
/// The environment of every child: the same on Reef and Linux, whoever started fsbench.
const ENVIRONMENT: [(&str, &str); 2] = [("PATH", "/bin:/sbin"), ("HOME", "/")];

/// `/dev/null`, open for writing: where the children's output goes.
pub fn open_null() -> Result<File, String> {
    File::options().write(true).open("/dev/null").map_err(|error| format!("opening /dev/null: {error}"))
}

/// Runs `command` to its end: the nanoseconds from before the fork to after the reap.
fn time_child(command: &Command, what: &str) -> Result<u64, String> {
    let start = os::monotonic_ns();
    let pid = command.start().map_err(|error| format!("fork: {error}"))?;
    let status = rt::wait(pid).map_err(|error| format!("wait4: {error}"))?;
    let elapsed = os::monotonic_ns() - start;
    match status.code() {
        Some(0) => Ok(elapsed),
        Some(127) => Err(format!("the child could not execute {what} (status 127)")),
        _ => Err(format!("{what} ended with {status}")),
    }
}

/// `repeat` runs of `busybox dd if=/dev/zero of=/tmp/fsbench.dd bs=512 count=<mib * 2048>`,
/// its summary on stderr sent to `/dev/null`; the file is removed after each (not timed).
/// `tally` counts each run's messages.
pub fn dd(mib: u64, repeat: usize, null: &File, tally: &mut Tally) -> Result<Vec<u64>, String> {
    File::open("/dev/zero").map_err(|error| format!("opening /dev/zero: {error}"))?;
    // Creating the file ourselves first names the error a failing dd would only exit with.
    let _ = std::fs::remove_file(DD_FILE);
    File::create(DD_FILE).map_err(|error| format!("creating {DD_FILE}: {error}"))?;
    std::fs::remove_file(DD_FILE).map_err(|error| format!("removing {DD_FILE}: {error}"))?;
    let bytes = mib << 20;
    let output = format!("of={DD_FILE}");
    let count = format!("count={}", bytes / DD_BLOCK);
    let block = format!("bs={DD_BLOCK}");
    let command = Command::new(BUSYBOX, &["dd", "if=/dev/zero", &output, &block, &count], &ENVIRONMENT)
        .map_err(|error| error.to_string())?
        .redirect(null, 2);
    let mut samples = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let sample = tally.around(|| time_child(&command, "busybox dd"));
        let written = std::fs::metadata(DD_FILE).map(|metadata| metadata.len());
        let removed = std::fs::remove_file(DD_FILE);
        samples.push(sample?);
        match written {
            Ok(length) if length == bytes => {}
            Ok(length) => return Err(format!("dd wrote {length} bytes, not {bytes}")),
            Err(error) => return Err(format!("{DD_FILE} after dd: {error}")),
        }
        removed.map_err(|error| format!("removing {DD_FILE}: {error}"))?;
    }
    Ok(samples)
}

/// The directory `ls` lists: `/tmp/fsbench.ls.<files>`.
pub fn ls_directory(files: u64) -> String {
    format!("/tmp/fsbench.ls.{files}")
}

/// Makes the directory of `files` empty files (not timed), then `repeat` runs of
/// `busybox ls -l <directory>` with stdout sent to `/dev/null`; removes the tree after.
/// `tally` counts each run's messages (not those of making the tree).
pub fn ls(files: u64, repeat: usize, null: &File, tally: &mut Tally) -> Result<Vec<u64>, String> {
    let directory = ls_directory(files);
    // A tree left by a run that stopped half-way would change the count.
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir(&directory).map_err(|error| format!("creating {directory}: {error}"))?;
    let timed = (|| {
        for index in 0..files {
            let path = format!("{directory}/file{index:06}");
            File::create(&path).map_err(|error| format!("creating {path}: {error}"))?;
        }
        let command = Command::new(BUSYBOX, &["ls", "-l", &directory], &ENVIRONMENT)
            .map_err(|error| error.to_string())?
            .redirect(null, 1);
        (0..repeat)
            .map(|_| tally.around(|| time_child(&command, "busybox ls -l")))
            .collect::<Result<Vec<u64>, String>>()
    })();
    let removed = std::fs::remove_dir_all(&directory).map_err(|error| format!("removing {directory}: {error}"));
    let samples = timed?;
    removed?;
    Ok(samples)
}

/// `1 + warm` runs of `command` (a path, then its arguments), each from `fork` to the reap,
/// with stdout and stderr sent to `null`: the first is the cold sample (the program's files
/// not yet read since boot, if nothing before read them), the others the warm ones. Stops at
/// the first run that fails, naming it. `tallies` count the cold run's messages and the warm
/// ones'.
pub fn run(command: &[String], warm: usize, null: &File, tallies: [&mut Tally; 2]) -> Result<Vec<u64>, String> {
    let (program, arguments) = command.split_first().ok_or("run: no program")?;
    let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
    let child = Command::new(program, &arguments, &ENVIRONMENT)
        .map_err(|error| format!("{program}: {error}"))?
        .redirect(null, 1)
        .redirect(null, 2);
    let what = command.join(" ");
    let mut samples = Vec::with_capacity(1 + warm);
    let [cold_tally, warm_tally] = tallies;
    for sample in 0..=warm {
        let tally = if sample == 0 { &mut *cold_tally } else { &mut *warm_tally };
        let ns = tally.around(|| time_child(&child, &what));
        samples.push(ns.map_err(|error| format!("sample {sample}: {error}"))?);
    }
    Ok(samples)
}

/// How the pipe benchmark starts its reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// `fork` + `execve`, pinned to a CPU on Linux (the child of a Reef process stays on its
    /// core, so there `pin` is `None`).
    Fork { pin: Option<usize> },
    /// `reef_spawn` on another Reef core.
    Spawn { core: usize },
}

/// `program pipe-reader <bytes>` started as `reader` says, with the read end of `data` as its
/// stdin and the write end of `ready` as its stdout.
fn start_reader(reader: Reader, program: &str, bytes: u64, data: &OwnedFd, ready: &OwnedFd) -> Result<rt::Pid, String> {
    let count = bytes.to_string();
    let arguments = ["pipe-reader", count.as_str()];
    match reader {
        Reader::Fork { pin } => {
            let mut command = Command::new(program, &arguments, &ENVIRONMENT)
                .map_err(|error| error.to_string())?
                .redirect(data, 0)
                .redirect(ready, 1);
            if let Some(cpu) = pin {
                command = command.pin(cpu).map_err(|error| format!("pinning the reader: {error}"))?;
            }
            command.start().map_err(|error| format!("fork: {error}"))
        }
        Reader::Spawn { core } => {
            // A spawned process inherits the descriptors without close-on-exec, at the same
            // numbers: ours become its stdin and stdout for the call, then are put back.
            let _ = std::io::stdout().flush();
            let saved_input = os::save(0).map_err(|error| format!("saving stdin: {error}"))?;
            let saved_output = os::save(1).map_err(|error| format!("saving stdout: {error}"))?;
            let spawned = os::replace(data, 0)
                .and_then(|()| os::replace(ready, 1))
                .map_err(|error| format!("dup2: {error}"))
                .and_then(|()| {
                    rt::spawn(core, program, &arguments, &ENVIRONMENT)
                        .map_err(|error| format!("reef_spawn on core {core}: {error}"))
                });
            os::replace(&saved_input, 0)
                .and_then(|()| os::replace(&saved_output, 1))
                .map_err(|error| format!("putting stdin and stdout back: {error}"))?;
            spawned
        }
    }
}

/// `repeat` transfers of `mib` MiB through a fresh pipe each, written in 64 KiB writes to a
/// reader started as `reader` (`program pipe-reader`), reading 64 KiB at a time until the end.
/// A sample runs from the first write (once the reader said it is ready) to the reader reaped;
/// `tally` counts its messages.
pub fn pipe(mib: u64, repeat: usize, reader: Reader, program: &str, tally: &mut Tally) -> Result<Vec<u64>, String> {
    let bytes = mib << 20;
    let chunk = vec![0x5a_u8; PIPE_CHUNK];
    let mut samples = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let (data_end, data_start) = os::pipe().map_err(|error| format!("pipe2: {error}"))?;
        let (ready_end, ready_start) = os::pipe().map_err(|error| format!("pipe2: {error}"))?;
        let pid = start_reader(reader, program, bytes, &data_end, &ready_start)?;
        // Only the reader holds these now: its end of file and ours come from the other side.
        drop((data_end, ready_start));
        let mut ready = [0u8; 1];
        if os::read(ready_end.as_raw_fd(), &mut ready).map_err(|error| format!("reading the ready pipe: {error}"))? == 0
        {
            drop(data_start);
            let status = rt::wait(pid).map_err(|error| format!("wait4: {error}"))?;
            return Err(match status.code() {
                Some(127) => format!("the reader could not start: {program} did not execute (status 127)"),
                _ => format!("the reader ended ({status}) before it was ready: see its message above"),
            });
        }
        let (written, status, elapsed) = tally.around(|| {
            let start = os::monotonic_ns();
            let written =
                (0..bytes / PIPE_CHUNK as u64).try_for_each(|_| os::write_all(data_start.as_raw_fd(), &chunk));
            drop(data_start);
            let status = rt::wait(pid);
            (written, status, os::monotonic_ns() - start)
        });
        let status = status.map_err(|error| format!("wait4: {error}"))?;
        written.map_err(|error| format!("writing the pipe: {error}"))?;
        if !status.success() {
            return Err(format!("the reader ended with {status}"));
        }
        samples.push(elapsed);
    }
    Ok(samples)
}

/// The reader end of [`pipe`]: says it is ready on stdout, reads stdin 64 KiB at a time to the
/// end, and checks it got `bytes` bytes.
pub fn pipe_reader(bytes: u64) -> Result<(), String> {
    if !os::is_pipe(0) || !os::is_pipe(1) {
        return Err("stdin and stdout are not the benchmark's pipes (were the descriptors not inherited?)".into());
    }
    os::write_all(1, b"R").map_err(|error| format!("saying ready: {error}"))?;
    let mut buffer = vec![0u8; PIPE_CHUNK];
    let mut total = 0u64;
    loop {
        match os::read(0, &mut buffer).map_err(|error| format!("reading stdin: {error}"))? {
            0 => break,
            count => total += count as u64,
        }
    }
    if total != bytes {
        return Err(format!("read {total} bytes, not {bytes}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dd_and_ls_commands_are_the_issues() {
        assert_eq!(DD_FILE, "/tmp/fsbench.dd");
        assert_eq!((64u64 << 20) / DD_BLOCK, 64 * 2048, "count = MiB * 2048 blocks of 512 bytes");
        assert_eq!(ls_directory(100), "/tmp/fsbench.ls.100");
    }

    /// `/bin/sh` and `/bin/false` are on every host fsbench's tests run on.
    #[test]
    fn run_takes_a_cold_and_warm_samples() {
        let null = open_null().unwrap();
        let command = ["/bin/sh", "-c", "echo out; echo err >&2"].map(String::from);
        let samples = run(&command, 3, &null, [&mut Tally::new(None), &mut Tally::new(None)]).unwrap();
        assert_eq!(samples.len(), 4, "the cold sample, then 3 warm ones");
        assert!(samples.iter().all(|&ns| ns > 0));
        let tallies = || [Tally::new(None), Tally::new(None)];
        let [mut cold, mut warm] = tallies();
        let failing = run(&["/bin/false".to_string()], 2, &null, [&mut cold, &mut warm]).unwrap_err();
        assert!(failing.starts_with("sample 0: /bin/false ended with"), "{failing}");
        let [mut cold, mut warm] = tallies();
        let missing = run(&["/nonexistent/program".to_string()], 1, &null, [&mut cold, &mut warm]).unwrap_err();
        assert!(missing.contains("status 127"), "{missing}");
    }

    /// The host has no `/bin/busybox`, so only what needs none runs here; a missing busybox is
    /// the child's status 127, named.
    #[test]
    fn a_missing_busybox_is_named() {
        let null = open_null().unwrap();
        if std::path::Path::new(BUSYBOX).exists() {
            return;
        }
        assert!(ls(3, 1, &null, &mut Tally::new(None)).unwrap_err().contains("status 127"));
        assert!(!std::path::Path::new(&ls_directory(3)).exists(), "the tree is removed");
    }
}
