//! Reef's own system calls for Rust programs with `std`, and what tells Reef from Linux.
#![doc = include_str!("../README.md")]

pub mod cli;
pub mod cores;
pub mod place;
pub mod raw;
pub mod roles;
pub mod syspage;
pub mod tsc;

use std::ffi::CString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

/// A process id, as `getpid`, `wait4` and `reef_spawn` use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid(i32);

impl Pid {
    /// The pid of a process; no call checks that it exists.
    pub const fn from_raw(pid: i32) -> Self {
        Self(pid)
    }

    /// The number the system calls take.
    pub const fn as_raw(self) -> i32 {
        self.0
    }
}

impl std::fmt::Display for Pid {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(formatter)
    }
}

/// Issues Reef call `number` with up to four integer arguments; its result, or the error the
/// kernel returned (`ENOSYS` on Linux).
///
/// # Safety
///
/// Every argument the call treats as a pointer must point to memory that is valid, for the
/// whole call, for what the call reads or writes there (`abi::call` says which).
pub(crate) unsafe fn reef_call(number: u64, arguments: [u64; 4]) -> io::Result<u64> {
    let [a, b, c, d] = arguments;
    // SAFETY: the caller's contract, passed on; the fifth argument is an unused zero.
    unsafe { reef_call5(number, [a, b, c, d, 0]) }
}

/// [`reef_call`] with five arguments.
///
/// # Safety
///
/// As for [`reef_call`].
pub(crate) unsafe fn reef_call5(number: u64, arguments: [u64; 5]) -> io::Result<u64> {
    let number = libc::c_long::try_from(number).expect("Reef call numbers fit a C long");
    // SAFETY: the caller vouches for the pointer arguments (this function's contract);
    // `syscall` itself only moves the values into registers and returns the result.
    let result = unsafe { libc::syscall(number, arguments[0], arguments[1], arguments[2], arguments[3], arguments[4]) };
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result as u64)
    }
}

/// The logical core the calling thread runs on, or `None` when not on Reef.
pub fn current_core() -> Option<usize> {
    // SAFETY: `reef_core` takes no arguments, so none is read as a pointer.
    let core = unsafe { reef_call(abi::call::CORE, [0; 4]) }.ok()? as usize;
    remember(true);
    Some(core)
}

/// The core the calling thread runs on: Reef's logical core, or on Linux the CPU `getcpu`
/// reports; `None` when neither answers.
pub fn current_cpu() -> Option<usize> {
    current_core().or_else(|| {
        // SAFETY: `sched_getcpu` takes no pointer and only reads the CPU number.
        usize::try_from(unsafe { libc::sched_getcpu() }).ok()
    })
}

/// Pins the calling thread, and the threads it starts from now on, to `cpu` alone (Linux
/// `sched_setaffinity`; on Reef a thread runs where its process or `execac` put it).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: an all-zero `cpu_set_t` is the empty set, a valid value of this plain bit array.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is beyond cpu_set_t")));
    }
    // SAFETY: `cpu` is below the number of bits of `set` (checked above), so the bit it sets
    // is inside the array.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live `cpu_set_t` of the size passed; the kernel only reads it, and
    // thread id 0 means the calling thread.
    let status = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How many kernel instances are running, or `None` when not on Reef.
pub fn instance_count() -> Option<usize> {
    // SAFETY: `reef_cores` takes no arguments, so none is read as a pointer.
    unsafe { reef_call(abi::call::CORES, [0; 4]) }.ok().map(|count| count as usize)
}

/// What `on_reef` found: not asked yet, Linux (or any kernel without Reef's calls), Reef.
const UNKNOWN: u8 = 0;
const ELSEWHERE: u8 = 1;
const REEF: u8 = 2;
static WHERE: AtomicU8 = AtomicU8::new(UNKNOWN);

fn remember(reef: bool) {
    // Relaxed: every thread that asks finds the same answer; a race only repeats the call.
    WHERE.store(if reef { REEF } else { ELSEWHERE }, Ordering::Relaxed);
}

/// A pipe, `(read end, write end)`, both close-on-exec: a child gets an end only by a redirect.
pub fn pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut ends = [0 as libc::c_int; 2];
    // SAFETY: `ends` is a live array of two ints, where `pipe2` stores the two descriptors.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `pipe2` succeeded, so both are fresh open descriptors that nothing else owns.
    Ok(unsafe { (std::os::fd::OwnedFd::from_raw_fd(ends[0]), std::os::fd::OwnedFd::from_raw_fd(ends[1])) })
}

/// Whether this program runs on Reef: asks once (`reef_core`), then remembers.
pub fn on_reef() -> bool {
    match WHERE.load(Ordering::Relaxed) {
        REEF => true,
        ELSEWHERE => false,
        _ => {
            let reef = current_core().is_some();
            remember(reef);
            reef
        }
    }
}

/// `text` as a C string, or `InvalidInput` naming what held a NUL byte.
fn c_string(text: &str, what: &str) -> io::Result<CString> {
    CString::new(text)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} holds a NUL byte: {text:?}")))
}

/// The strings of an `argv` and an `envp`, owned, and the pointer arrays `execve` and
/// `reef_spawn` take, which point into them: keep this alive as long as the arrays are used.
#[derive(Debug)]
pub struct ProgramArguments {
    path: CString,
    strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl ProgramArguments {
    /// `argv = [path, args...]` and `envp = ["KEY=VALUE", ...]`, each ending with a null.
    pub fn new(path: &str, args: &[&str], env: &[(&str, &str)]) -> io::Result<Self> {
        let path_string = c_string(path, "the path")?;
        let mut strings = vec![path_string.clone()];
        for argument in args {
            strings.push(c_string(argument, "an argument")?);
        }
        for (key, value) in env {
            if key.contains('=') {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("an environment variable name holds `=`: {key:?}"),
                ));
            }
            strings.push(c_string(&format!("{key}={value}"), "an environment variable")?);
        }
        // A CString's buffer lives on the heap, so these pointers stay valid when `strings`
        // (the Vec of CStrings) moves into the struct below.
        let pointers: Vec<*const libc::c_char> = strings.iter().map(|string| string.as_ptr()).collect();
        let (arguments, variables) = pointers.split_at(1 + args.len());
        let argv = arguments.iter().copied().chain([std::ptr::null()]).collect();
        let envp = variables.iter().copied().chain([std::ptr::null()]).collect();
        Ok(Self { path: path_string, strings, argv, envp })
    }

    /// The program's path, NUL-terminated.
    pub fn path(&self) -> &std::ffi::CStr {
        &self.path
    }

    /// The null-terminated `argv` array.
    pub fn argv(&self) -> *const *const libc::c_char {
        self.argv.as_ptr()
    }

    /// The null-terminated `envp` array.
    pub fn envp(&self) -> *const *const libc::c_char {
        self.envp.as_ptr()
    }

    /// The strings of `argv` then `envp`, in order, for checking what was built.
    pub fn strings(&self) -> impl Iterator<Item = &std::ffi::CStr> {
        self.strings.iter().map(CString::as_c_str)
    }
}

/// Starts the program at `path` on kernel instance `core`, with `argv = [path, args...]` and
/// the environment `env`; the new process is a child of the caller (reap it with [`wait`]).
/// On Linux: `Unsupported` (`ENOSYS`).
pub fn spawn(core: usize, path: &str, args: &[&str], env: &[(&str, &str)]) -> io::Result<Pid> {
    spawn_with_death_signal(core, path, args, env, 0)
}

/// As [`spawn`], and the program gets `signal` when the caller ends, from its first
/// instruction (Linux's `PR_SET_PDEATHSIG`, which a program spawned on another core could not
/// set before it runs). A launcher ended by SIGKILL, which it cannot pass on
/// ([`forward_signals`]), still takes its program with it. `signal` 0: none, as `spawn`.
pub fn spawn_with_death_signal(
    core: usize,
    path: &str,
    args: &[&str],
    env: &[(&str, &str)],
    signal: libc::c_int,
) -> io::Result<Pid> {
    let program = ProgramArguments::new(path, args, env)?;
    let signal = u64::try_from(signal).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: (1) `program.path()` is a NUL-terminated string; (2) `argv` and `envp` are
    // null-terminated arrays of pointers to NUL-terminated strings, all owned by `program`,
    // which lives until the call returns; (3) `reef_spawn` only reads them; the signal is a
    // number.
    let pid = unsafe {
        reef_call5(
            abi::call::SPAWN,
            [core as u64, program.path().as_ptr() as u64, program.argv() as u64, program.envp() as u64, signal],
        )
    }?;
    Ok(Pid(pid as i32))
}

/// Runs one of the kernel's control commands (`reef_control`, see `abi::call::CONTROL`) on the
/// kernel instance the caller runs on: `arguments` is the command's name and its arguments
/// (`["msg", "stats"]`). Returns its text and its status: [`abi::call::control::OK`],
/// [`FAILED`](abi::call::control::FAILED) or [`USAGE`](abi::call::control::USAGE); when it
/// is not `OK`, the text's last line is `error: …`, saying what went wrong and what to do.
/// `poweroff` does not return. On Linux: `Unsupported` (`ENOSYS`); no arguments, or one with
/// a NUL byte: `InvalidInput`, before any call is made.
pub fn control(arguments: &[&str]) -> io::Result<(String, u32)> {
    if arguments.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no command to run: give its name first"));
    }
    let strings = arguments.iter().map(|argument| c_string(argument, "an argument")).collect::<io::Result<Vec<_>>>()?;
    let argv: Vec<*const libc::c_char> =
        strings.iter().map(|string| string.as_ptr()).chain([std::ptr::null()]).collect();
    let mut buffer = vec![0u8; abi::call::control::BUFFER_SIZE];
    let mut status: u32 = abi::call::control::FAILED;
    // SAFETY: (1) `argv` is a null-terminated array of pointers to NUL-terminated strings owned
    // by `strings`, alive until the call returns; (2) `buffer` is writable for its whole
    // length, which is the capacity passed; (3) `status` is a live, writable u32. The kernel
    // reads (1) and writes only inside (2) and (3).
    let length = unsafe {
        reef_call(
            abi::call::CONTROL,
            [argv.as_ptr() as u64, buffer.as_mut_ptr() as u64, buffer.len() as u64, &raw mut status as u64],
        )
    }?;
    buffer.truncate((length as usize).min(buffer.len()));
    let text = String::from_utf8(buffer).unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned());
    Ok((text, status))
}

/// The child [`forward_signals`] passes signals on to (0: none yet).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

/// The signals [`forward_signals`] passes on: those one sends to a pid. SIGINT and SIGQUIT from
/// the terminal reach the child through its process group already; SIGKILL and SIGSTOP cannot
/// be caught.
pub const FORWARDED_SIGNALS: [libc::c_int; 4] = [libc::SIGHUP, libc::SIGTERM, libc::SIGUSR1, libc::SIGUSR2];

extern "C" fn pass_on(signal: libc::c_int) {
    let pid = FORWARD_TO.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: `kill` takes no pointer and is async-signal-safe.
        unsafe { libc::kill(pid, signal) };
    }
}

/// From now on the [`FORWARDED_SIGNALS`] sent to this process are passed on to `child`
/// instead of ending it, as Slurm's `srun` passes them to its tasks: `kill <launcher>` reaches
/// the program it started on another core, whose end the launcher then reports. A signal that
/// came before this call acted as usual.
pub fn forward_signals(child: Pid) -> io::Result<()> {
    FORWARD_TO.store(child.0, Ordering::Relaxed);
    for signal in FORWARDED_SIGNALS {
        // SAFETY: an all-zero `sigaction` is a valid one (empty mask, no flags), filled in below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = pass_on as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action` is a live `sigaction` for the call; its handler does only
        // async-signal-safe work; the old action is not asked for (null).
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Waits for child `pid` to end and reaps it (`wait4`); retried when a signal interrupts it.
pub fn wait(pid: Pid) -> io::Result<ExitStatus> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a live, writable int for the whole call, where `wait4` stores the
        // wait status; a null `rusage` asks for no resource usage.
        let result = unsafe { libc::wait4(pid.0, &mut status, 0, std::ptr::null_mut()) };
        if result >= 0 {
            return Ok(ExitStatus::from_raw(status));
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// The message of a caught panic (`std::panic::catch_unwind`'s payload), for the test
/// programs that report a panicking case as one failed line instead of dying.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reef_calls_say_enosys_on_linux() {
        assert_eq!(current_core(), None);
        assert_eq!(instance_count(), None);
        assert!(current_cpu().is_some(), "getcpu answers on Linux");
        let cpu = current_cpu().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(current_cpu(), Some(cpu));
            assert_eq!(pin_current_thread(1 << 20).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        })
        .join()
        .unwrap();
        assert!(!on_reef());
        assert!(!on_reef(), "remembered");
        let error = spawn(0, "/bin/true", &[], &[]).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOSYS));
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
        let error = control(&["cores"]).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOSYS));
    }

    #[test]
    fn arguments_are_built_as_execve_takes_them() {
        let program = ProgramArguments::new("/bin/tiny", &["3", "x"], &[("HOME", "/"), ("A", "b=c")]).unwrap();
        let strings: Vec<&str> = program.strings().map(|string| string.to_str().unwrap()).collect();
        assert_eq!(strings, ["/bin/tiny", "3", "x", "HOME=/", "A=b=c"]);
        assert_eq!(program.path().to_str().unwrap(), "/bin/tiny");
        // SAFETY: both arrays are null-terminated and owned by `program`, alive here.
        let (argv, envp) =
            unsafe { (std::slice::from_raw_parts(program.argv(), 4), std::slice::from_raw_parts(program.envp(), 3)) };
        assert!(argv[3].is_null() && envp[2].is_null());
        // SAFETY: the first pointers of each array point to NUL-terminated strings of `program`.
        let (first_argument, first_variable) =
            unsafe { (std::ffi::CStr::from_ptr(argv[0]), std::ffi::CStr::from_ptr(envp[0])) };
        assert_eq!(first_argument.to_str().unwrap(), "/bin/tiny");
        assert_eq!(first_variable.to_str().unwrap(), "HOME=/");
    }

    #[test]
    fn no_arguments_no_environment() {
        let program = ProgramArguments::new("/sbin/init", &[], &[]).unwrap();
        // SAFETY: `argv` holds the path and the null, `envp` only the null, owned by `program`.
        let (argv, envp) =
            unsafe { (std::slice::from_raw_parts(program.argv(), 2), std::slice::from_raw_parts(program.envp(), 1)) };
        assert!(!argv[0].is_null() && argv[1].is_null() && envp[0].is_null());
    }

    #[test]
    fn nul_bytes_and_bad_names_are_refused_before_any_call() {
        for error in [
            ProgramArguments::new("/bin/a\0b", &[], &[]).unwrap_err(),
            ProgramArguments::new("/bin/a", &["x\0"], &[]).unwrap_err(),
            ProgramArguments::new("/bin/a", &[], &[("K", "v\0")]).unwrap_err(),
            ProgramArguments::new("/bin/a", &[], &[("K=", "v")]).unwrap_err(),
            spawn(0, "/bin/a\0", &[], &[]).unwrap_err(),
            control(&["msg", "st\0ats"]).unwrap_err(),
            control(&[]).unwrap_err(),
        ] {
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    // The child is reaped, by `wait` itself: that is what this test checks.
    #[allow(clippy::zombie_processes)]
    fn wait_reaps_a_child_and_reads_its_status() {
        let child = std::process::Command::new("/bin/sh").args(["-c", "exit 7"]).spawn().unwrap();
        let status = wait(Pid::from_raw(child.id() as i32)).unwrap();
        assert_eq!(status.code(), Some(7));
        let error = wait(Pid::from_raw(child.id() as i32)).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ECHILD), "reaped once only");
    }
}
