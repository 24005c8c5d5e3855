//! The Linux calls the benchmarks need, as safe functions: affinity, pipe, eventfd, futex.
//!
//! With `tsc::read_tsc`, the only `unsafe` of the crate: each block here is one system call whose
//! arguments are checked here, so the benchmarks themselves stay safe code.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;

/// Number of CPUs a [`CpuSet`] can name: glibc's `CPU_SETSIZE`.
pub const MAX_CPUS: usize = 1024;

/// A set of CPU numbers with the bit layout of the kernel's `cpu_set_t` (`MAX_CPUS` bits,
/// bit `n % 64` of word `n / 64` for CPU `n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct CpuSet {
    words: [u64; MAX_CPUS / 64],
}

// The cast to `libc::cpu_set_t` in the calls below relies on the two having one size.
const _: () = assert!(std::mem::size_of::<CpuSet>() == std::mem::size_of::<libc::cpu_set_t>());

impl CpuSet {
    /// The empty set.
    pub const fn new() -> Self {
        Self { words: [0; MAX_CPUS / 64] }
    }

    /// The set holding only `cpu`, or `None` if `cpu` is not below [`MAX_CPUS`].
    pub fn single(cpu: usize) -> Option<Self> {
        let mut set = Self::new();
        set.insert(cpu).then_some(set)
    }

    /// Adds `cpu`; false (and no change) if it is not below [`MAX_CPUS`].
    pub fn insert(&mut self, cpu: usize) -> bool {
        if cpu >= MAX_CPUS {
            return false;
        }
        self.words[cpu / 64] |= 1 << (cpu % 64);
        true
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: usize) -> bool {
        cpu < MAX_CPUS && self.words[cpu / 64] & (1 << (cpu % 64)) != 0
    }

    /// The CPU numbers in the set, lowest first.
    pub fn cpus(&self) -> Vec<usize> {
        (0..MAX_CPUS).filter(|&cpu| self.contains(cpu)).collect()
    }
}

impl Default for CpuSet {
    fn default() -> Self {
        Self::new()
    }
}

/// The CPUs this process may run on (`sched_getaffinity` of the calling thread).
pub fn allowed_cpus() -> io::Result<CpuSet> {
    let mut set = CpuSet::new();
    // SAFETY: `set` is a live, writable buffer of exactly `size_of::<CpuSet>()` bytes, which
    // is the size passed; the kernel writes at most that many bytes of mask into it.
    let status =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<CpuSet>(), (&raw mut set).cast::<libc::cpu_set_t>()) };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(set)
}

/// Pins the calling thread to `cpu` alone.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    let set = CpuSet::single(cpu)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is beyond {MAX_CPUS}")))?;
    // SAFETY: `set` is a live buffer of exactly the size passed; the kernel only reads it.
    // Thread id 0 means the calling thread, so no other thread's affinity changes.
    let status = unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<CpuSet>(), (&raw const set).cast::<libc::cpu_set_t>())
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Takes ownership of a descriptor a system call just returned, or of its error.
fn owned_file(descriptor: libc::c_int) -> io::Result<File> {
    if descriptor < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the caller passes a descriptor that a system call has just created and that
    // nothing else owns, so this `OwnedFd` is its only owner and closes it exactly once.
    let owned = unsafe { OwnedFd::from_raw_fd(descriptor) };
    Ok(File::from(owned))
}

/// A pipe: (read end, write end), both close-on-exec.
pub fn pipe() -> io::Result<(File, File)> {
    let mut descriptors: [libc::c_int; 2] = [-1; 2];
    // SAFETY: `descriptors` is a writable array of the two ints `pipe2` fills in.
    let status = unsafe { libc::pipe2(descriptors.as_mut_ptr(), libc::O_CLOEXEC) };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((owned_file(descriptors[0])?, owned_file(descriptors[1])?))
}

/// An eventfd counter starting at 0 (blocking reads, close-on-exec).
pub fn eventfd() -> io::Result<File> {
    // SAFETY: `eventfd` takes no pointers; it returns a new descriptor or -1.
    owned_file(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) })
}

/// Sleeps until `word` is woken by [`futex_wake`], unless it no longer holds `expected`.
/// Returns when woken, when the value differed, or on a signal: callers re-check the word.
pub fn futex_wait(word: &AtomicU32, expected: u32) -> io::Result<()> {
    // SAFETY: (1) `word` is a live, aligned 32-bit atomic for the whole call, which is all
    // FUTEX_WAIT reads; (2) a null timeout means "no timeout"; (3) the private flag is right
    // because the word is only shared between threads of this process.
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

/// Wakes at most `count` threads sleeping in [`futex_wait`] on `word`; returns how many woke.
pub fn futex_wake(word: &AtomicU32, count: u32) -> io::Result<usize> {
    let count = libc::c_int::try_from(count).unwrap_or(libc::c_int::MAX);
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE only uses its address to
    // find sleepers and does not dereference anything else.
    let woken =
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, count) };
    if woken < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(woken as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn cpu_set_bits_follow_the_kernel_layout() {
        let mut set = CpuSet::new();
        assert!(set.insert(0) && set.insert(65) && set.insert(MAX_CPUS - 1));
        assert!(!set.insert(MAX_CPUS));
        assert_eq!(set.words[0], 1);
        assert_eq!(set.words[1], 2);
        assert_eq!(set.words[15], 1 << 63);
        assert_eq!(set.cpus(), vec![0, 65, MAX_CPUS - 1]);
        assert!(!set.contains(1) && !set.contains(MAX_CPUS));
        assert_eq!(CpuSet::single(MAX_CPUS), None);
    }

    #[test]
    fn this_process_may_run_somewhere_and_can_pin_there() {
        let allowed = allowed_cpus().unwrap();
        let first = *allowed.cpus().first().expect("at least one CPU");
        std::thread::spawn(move || {
            pin_current_thread(first).unwrap();
            assert_eq!(allowed_cpus().unwrap().cpus(), vec![first]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pipe_and_eventfd_carry_data() {
        let (mut reader, mut writer) = pipe().unwrap();
        writer.write_all(b"x").unwrap();
        let mut byte = [0u8; 1];
        reader.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x");

        let mut counter = eventfd().unwrap();
        counter.write_all(&3u64.to_ne_bytes()).unwrap();
        counter.write_all(&4u64.to_ne_bytes()).unwrap();
        let mut value = [0u8; 8];
        counter.read_exact(&mut value).unwrap();
        assert_eq!(u64::from_ne_bytes(value), 7);
    }

    #[test]
    fn futex_wait_returns_at_once_when_the_word_changed() {
        let word = AtomicU32::new(5);
        futex_wait(&word, 4).unwrap();
        assert_eq!(futex_wake(&word, 1).unwrap(), 0);
    }
}
