//! Reef's own system calls: numbers Linux does not use, so the same binary gets `ENOSYS` on
//! Linux and learns that it is not running on Reef.
//!
//! Linux x86-64 numbers stop below 1024, and numbers with bit 30 set are x32 calls; Reef's
//! start at 4096. Every call follows the Linux convention: arguments in `rdi, rsi, rdx, r10,
//! r8, r9`, the result in `rax`, an error as `-errno` (Linux errno values).

/// First number of Reef's own calls.
pub const FIRST: u64 = 4096;

/// `reef_core() -> core`: the logical core the calling thread runs on. On Linux: `-ENOSYS`,
/// which is how a program tells where it runs.
pub const CORE: u64 = FIRST;

/// `reef_spawn(core, path, argv, envp) -> pid`: builds a new process on kernel instance
/// `core` from the program at `path` (a NUL-terminated string), with the NUL-terminated
/// arrays `argv` and `envp` of NUL-terminated strings, as `execve` takes them. The new process
/// is a child of the caller, which reaps it with `wait4` like any child. Errors: `EINVAL` (no
/// such core), `EAGAIN` (the core is not running), `ENOENT`, `ENOEXEC`, `EFAULT`, `E2BIG`,
/// `ENOMEM`, `ETIMEDOUT` (the core did not answer in time).
pub const SPAWN: u64 = FIRST + 1;

/// `reef_cores() -> count`: how many kernel instances are running.
pub const CORES: u64 = FIRST + 2;

/// One past the last Reef call this ABI defines.
pub const END: u64 = FIRST + 3;

/// Whether `number` is one of Reef's own calls.
pub const fn is_reef_call(number: u64) -> bool {
    number >= FIRST && number < END
}
