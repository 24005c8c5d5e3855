//! The system calls the benchmarks make as safe functions: the only `unsafe` of fsbench.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `CLOCK_MONOTONIC` now, in nanoseconds: what every sample is timed with.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a live, writable timespec for the whole call, all the kernel writes.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_MONOTONIC) failed: {}", io::Error::last_os_error());
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// TSC cycles per second, counted against `CLOCK_MONOTONIC` over at least 20 ms, spinning:
/// the rate the figures' clock runs at where the kernel derives it from the TSC (Reef, and
/// Linux with the `tsc` clocksource). Reported, not used: samples are read off the clock.
pub fn tsc_hz() -> u64 {
    rt::tsc::calibrate(std::time::Duration::from_millis(20))
}

/// The CPU set holding `cpu` alone.
fn cpu_set(cpu: usize) -> io::Result<libc::cpu_set_t> {
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is beyond cpu_set_t")));
    }
    // SAFETY: an all-zero `cpu_set_t` is the empty set, a valid value of this plain bit array.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below the number of bits of `set` (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    Ok(set)
}

/// A program to start in a forked child: its arguments, which descriptors to move where
/// first, and the CPU to pin it to.
pub struct Command {
    arguments: rt::ProgramArguments,
    /// `(from, to)`: the child's `to` becomes a copy of `from` (`dup2`), without close-on-exec.
    redirects: Vec<(RawFd, RawFd)>,
    pin: Option<libc::cpu_set_t>,
}

impl Command {
    /// `path` with `argv = [path, args...]` and the environment `env`.
    pub fn new(path: &str, args: &[&str], env: &[(&str, &str)]) -> io::Result<Self> {
        Ok(Self { arguments: rt::ProgramArguments::new(path, args, env)?, redirects: Vec::new(), pin: None })
    }

    /// The child's descriptor `to` is `from`; `from` must stay open until [`Command::start`].
    pub fn redirect(mut self, from: &impl AsRawFd, to: RawFd) -> Self {
        self.redirects.push((from.as_raw_fd(), to));
        self
    }

    /// The child runs on `cpu` alone (Linux only: on Reef a process stays on its home core).
    pub fn pin(mut self, cpu: usize) -> io::Result<Self> {
        self.pin = Some(cpu_set(cpu)?);
        Ok(self)
    }

    /// Forks; the child moves its descriptors, pins itself and executes the program, or exits
    /// 127 if any of that fails. Returns the child's pid; reap it with `rt::wait`.
    pub fn start(&self) -> io::Result<rt::Pid> {
        // SAFETY: between `fork` and `execve` the child calls only `dup2`, `fcntl`,
        // `sched_setaffinity`, `execve` and `_exit`, which are async-signal-safe and take no
        // lock, and reads only `self`, built before the fork; so what other threads held at
        // the fork does not matter.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: (1) every `from` is an open descriptor of the parent, copied into the
            // child by the fork; (2) `pin` is a live `cpu_set_t` of the size passed; (3)
            // `path`, `argv` and `envp` are NUL-terminated, null-terminated arrays of strings
            // owned by `self.arguments`, alive in the child's copy of the memory.
            unsafe {
                for &(from, to) in &self.redirects {
                    // `dup2` onto itself keeps close-on-exec: clear the flag instead.
                    let moved = if from == to { libc::fcntl(to, libc::F_SETFD, 0) } else { libc::dup2(from, to) };
                    if moved < 0 {
                        libc::_exit(127);
                    }
                }
                if let Some(set) = &self.pin {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                        libc::_exit(127);
                    }
                }
                libc::execve(self.arguments.path().as_ptr(), self.arguments.argv(), self.arguments.envp());
                libc::_exit(127);
            }
        }
        Ok(rt::Pid::from_raw(pid))
    }
}

pub use rt::pipe;

/// A close-on-exec copy of `fd` numbered 10 or above (`F_DUPFD_CLOEXEC`), to put it back later.
pub fn save(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes an int and reads no memory; a bad `fd` is an error.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fcntl` just made `copy`, an open descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Makes descriptor `to` of this process a copy of `from` (`dup2`), without close-on-exec.
pub fn replace(from: &impl AsRawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: `dup2` takes two ints and reads no memory. `to` (0 or 1 here) is a standard
    // descriptor, which no `OwnedFd` of this program owns, so none is closed behind its back.
    if unsafe { libc::dup2(from.as_raw_fd(), to) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether descriptor `fd` is open and a pipe.
pub fn is_pipe(fd: RawFd) -> bool {
    // SAFETY: an all-zero `stat` is a valid value of this plain struct.
    let mut status: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `status` is a live, writable `stat` for the whole call, all `fstat` writes.
    let found = unsafe { libc::fstat(fd, &mut status) } == 0;
    found && status.st_mode & libc::S_IFMT == libc::S_IFIFO
}

/// `read(fd, buffer)`, retried on `EINTR`: the bytes read, 0 at end of file.
pub fn read(fd: RawFd, buffer: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buffer` is live and writable for its whole length during the call.
        let count = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        if count >= 0 {
            return Ok(count as usize);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Writes all of `bytes` to `fd`, however many `write` calls it takes (retried on `EINTR`).
pub fn write_all(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is live and readable for its whole length during the call.
        let count = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if count < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if count == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "write took no bytes"));
        }
        bytes = &bytes[count as usize..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward() {
        let before = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ns() - before >= 2_000_000);
    }

    #[test]
    fn a_pipe_carries_bytes_and_ends() {
        let (reader, writer) = pipe().unwrap();
        assert!(is_pipe(reader.as_raw_fd()) && is_pipe(writer.as_raw_fd()));
        write_all(writer.as_raw_fd(), b"reef").unwrap();
        drop(writer);
        let mut buffer = [0u8; 16];
        assert_eq!(read(reader.as_raw_fd(), &mut buffer).unwrap(), 4);
        assert_eq!(&buffer[..4], b"reef");
        assert_eq!(read(reader.as_raw_fd(), &mut buffer).unwrap(), 0, "end of file once the writer is gone");
    }

    #[test]
    fn a_child_gets_its_redirected_descriptor() {
        let (reader, writer) = pipe().unwrap();
        let child = Command::new("/bin/sh", &["-c", "echo redirected"], &[]).unwrap().redirect(&writer, 1);
        let pid = child.start().unwrap();
        drop(writer);
        let mut buffer = [0u8; 64];
        let count = read(reader.as_raw_fd(), &mut buffer).unwrap();
        assert_eq!(&buffer[..count], b"redirected\n");
        assert!(rt::wait(pid).unwrap().success());
    }

    #[test]
    fn a_missing_program_exits_127() {
        let pid = Command::new("/nonexistent/program", &[], &[]).unwrap().start().unwrap();
        assert_eq!(rt::wait(pid).unwrap().code(), Some(127));
    }
}
