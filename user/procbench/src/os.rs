//! The system calls the benchmarks make, as safe functions: the only `unsafe` but the TSC read.

use std::io;
use std::sync::atomic::AtomicU32;

/// `getppid` through the bare `syscall` instruction.
#[inline(always)]
pub fn getppid() -> i64 {
    // SAFETY: getppid (110) takes no arguments and changes nothing.
    unsafe { rt::raw::syscall(110, [0; 6]) }.0
}

/// The program `tiny`, ready to `execve` in a child.
pub struct Program {
    arguments: rt::ProgramArguments,
}

impl Program {
    /// `path` with `argv = [path]` and an empty environment.
    pub fn new(path: &str) -> io::Result<Self> {
        Ok(Self { arguments: rt::ProgramArguments::new(path, &[], &[])? })
    }

    /// Forks; the child executes the program (or exits 127 if it cannot); waits for it.
    pub fn fork_exec_wait(&self) -> io::Result<std::process::ExitStatus> {
        // SAFETY: between `fork` and `execve` the child calls only `execve` and `_exit`, which
        // are async-signal-safe and take no lock, and reads only `self.arguments`, built before
        // the fork; so what other threads held at the fork does not matter.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: `path`, `argv` and `envp` are NUL-terminated, null-terminated arrays of
            // strings owned by `self.arguments`, alive in the child's copy of the memory.
            unsafe {
                libc::execve(self.arguments.path().as_ptr(), self.arguments.argv(), self.arguments.envp());
                libc::_exit(127);
            }
        }
        rt::wait(rt::Pid::from_raw(pid))
    }
}

/// Sleeps while `word` holds `expected`, until woken (`FUTEX_WAIT`); returns at once if it no
/// longer does. Callers re-check the word: a wake-up says nothing about its value.
pub fn futex_wait(word: &AtomicU32, expected: u32) -> io::Result<()> {
    // SAFETY: (1) `word` is a live, aligned 32-bit atomic for the whole call, all FUTEX_WAIT
    // reads; (2) a null timeout means none; (3) private: only threads of this process share it.
    let status = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        )
    };
    if status == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(()),
        _ => Err(error),
    }
}

/// Wakes one thread sleeping in [`futex_wait`] on `word` (`FUTEX_WAKE`).
pub fn futex_wake(word: &AtomicU32) -> io::Result<()> {
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE only uses its address to find
    // sleepers.
    let status =
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1) };
    if status < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A private anonymous mapping, read-write, not touched yet; unmapped when dropped.
pub struct Mapping {
    start: *mut u8,
    size: usize,
}

impl Mapping {
    /// Maps `size` bytes. On Linux, asks for 4 KiB pages only (`MADV_NOHUGEPAGE`), so the first
    /// touch of each page is one fault as on Reef, never a 2 MiB one; a kernel without
    /// `madvise` has no huge pages to avoid, so its error is ignored.
    pub fn new(size: usize) -> io::Result<Self> {
        // SAFETY: a fresh anonymous mapping where the kernel chooses: no existing memory changes.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the range is the mapping just made; MADV_NOHUGEPAGE changes no contents.
        unsafe { libc::madvise(start, size, libc::MADV_NOHUGEPAGE) };
        Ok(Self { start: start.cast(), size })
    }

    /// Writes one byte at `offset`: the first write to a page takes the page fault.
    #[inline(always)]
    pub fn touch(&mut self, offset: usize) {
        assert!(offset < self.size, "offset {offset} is beyond the mapping");
        // SAFETY: `offset` is inside the mapping, which is readable and writable and belongs
        // to this `Mapping` alone (`&mut self`). Volatile, so the write is not elided.
        unsafe { self.start.add(offset).write_volatile(1) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `new` made; nothing points into it any more.
        unsafe { libc::munmap(self.start.cast(), self.size) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getppid_is_the_parent() {
        assert_eq!(getppid(), i64::from(std::os::unix::process::parent_id()));
    }

    #[test]
    fn a_mapping_takes_writes() {
        let mut mapping = Mapping::new(4 * 4096).unwrap();
        for page in 0..4 {
            mapping.touch(page * 4096 + 7);
        }
    }

    #[test]
    fn futex_wait_returns_when_the_word_differs() {
        let word = AtomicU32::new(3);
        futex_wait(&word, 2).unwrap();
        futex_wake(&word).unwrap();
    }

    #[test]
    fn a_missing_program_exits_127() {
        let program = Program::new("/nonexistent/tiny").unwrap();
        assert_eq!(program.fork_exec_wait().unwrap().code(), Some(127));
    }
}
