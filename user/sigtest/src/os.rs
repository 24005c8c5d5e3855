//! The system calls and machine code sigtest needs, as safe functions.

use libc::{c_int, c_long, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// A handler with `SA_SIGINFO`'s three arguments.
pub type Handler = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);

/// The calling thread's errno.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A libc result: `-1` becomes the errno.
fn check(result: c_long) -> Result<c_long, i32> {
    if result == -1 {
        Err(errno())
    } else {
        Ok(result)
    }
}

/// The one bit of `signal` in a kernel signal set.
pub const fn bit(signal: c_int) -> u64 {
    1 << (signal - 1)
}

/// Installs `address` as the `SA_SIGINFO` handler of `signal` with `flags` and `mask` blocked
/// during it (through libc, which adds `SA_RESTORER` and its restorer).
pub fn set_handler_address(signal: c_int, address: usize, flags: c_int, mask: &[c_int]) -> Result<(), i32> {
    // SAFETY: `sigaction` is plain data: all zeroes is a valid (empty) value.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = address;
    action.sa_flags = libc::SA_SIGINFO | flags;
    // SAFETY: `sa_mask` is a valid `sigset_t` owned by `action`.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    for &blocked in mask {
        // SAFETY: as above; `blocked` is a signal number (an invalid one only fails).
        unsafe { libc::sigaddset(&mut action.sa_mask, blocked) };
    }
    // SAFETY: `action` is initialised; a null old action is allowed.
    check(c_long::from(unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) })).map(drop)
}

/// Installs `handler` for `signal` (see [`set_handler_address`]).
pub fn set_handler(signal: c_int, handler: Handler, flags: c_int, mask: &[c_int]) -> Result<(), i32> {
    set_handler_address(signal, handler as usize, flags, mask)
}

/// Sets `signal` to `SIG_DFL` or `SIG_IGN`.
pub fn set_disposition(signal: c_int, disposition: libc::sighandler_t) -> Result<(), i32> {
    // SAFETY: `signal` installs no function of ours, only a disposition constant.
    check(if unsafe { libc::signal(signal, disposition) } == libc::SIG_ERR { -1 } else { 0 }).map(drop)
}

/// The handler field of `signal`'s action now.
pub fn handler_of(signal: c_int) -> Result<usize, i32> {
    // SAFETY: as in `set_handler_address`.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the old one into `old`.
    check(c_long::from(unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) }))?;
    Ok(old.sa_sigaction)
}

/// `rt_sigaction` straight to the kernel, with the kernel's layout (handler, flags, restorer,
/// mask): lets a test leave out `SA_RESTORER`, which libc always adds.
pub fn raw_sigaction(signal: c_int, handler: usize, flags: u64, restorer: usize) -> Result<(), i32> {
    let action: [u64; 4] = [handler as u64, flags, restorer as u64, 0];
    // SAFETY: the kernel reads 32 bytes of `action`; no old action is written.
    check(unsafe { libc::syscall(libc::SYS_rt_sigaction, signal, action.as_ptr(), 0usize, 8usize) }).map(drop)
}

/// `rt_sigprocmask(how, set)` on the kernel's 8-byte set; returns the previous mask.
pub fn change_mask(how: c_int, set: u64) -> Result<u64, i32> {
    let mut old = 0u64;
    // SAFETY: both pointers are live 8-byte sets for the call.
    check(unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, &set, &mut old, 8usize) })?;
    Ok(old)
}

/// The calling thread's mask.
pub fn mask() -> u64 {
    let mut old = 0u64;
    // SAFETY: a null new set only reads the mask into `old`.
    let _ = unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, 0usize, &mut old, 8usize) };
    old
}

/// `rt_sigpending`.
pub fn pending() -> Result<u64, i32> {
    let mut set = 0u64;
    // SAFETY: the kernel writes 8 bytes into `set`.
    check(unsafe { libc::syscall(libc::SYS_rt_sigpending, &mut set, 8usize) })?;
    Ok(set)
}

/// `rt_sigsuspend(mask)`: the errno it ends with (`EINTR` when a handler ran).
pub fn suspend(mask: u64) -> i32 {
    // SAFETY: the kernel reads 8 bytes of `mask`.
    let _ = unsafe { libc::syscall(libc::SYS_rt_sigsuspend, &mask, 8usize) };
    errno()
}

/// `pause`: the errno it ends with.
pub fn pause() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::pause() };
    errno()
}

pub fn kill(pid: i32, signal: c_int) -> Result<(), i32> {
    // SAFETY: no pointers.
    check(c_long::from(unsafe { libc::kill(pid, signal) })).map(drop)
}

/// `prctl(PR_SET_PDEATHSIG, signal)`: the signal this process gets when its parent ends.
pub fn set_death_signal(signal: c_int) -> Result<(), i32> {
    // SAFETY: PR_SET_PDEATHSIG takes a number, no pointer.
    check(c_long::from(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) })).map(drop)
}

/// `prctl(PR_GET_PDEATHSIG)`: the signal set by [`set_death_signal`] (0: none).
pub fn death_signal() -> Result<c_int, i32> {
    let mut signal: c_int = -1;
    // SAFETY: PR_GET_PDEATHSIG stores one int at the pointer, `signal`, live for the call.
    check(c_long::from(unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut signal as *mut c_int) })).map(|_| signal)
}

/// `pipe`: (read end, write end).
pub fn pipe() -> Result<(c_int, c_int), i32> {
    let mut ends = [0 as c_int; 2];
    // SAFETY: `pipe` writes two ints into `ends`, live for the call.
    check(c_long::from(unsafe { libc::pipe(ends.as_mut_ptr()) })).map(|_| (ends[0], ends[1]))
}

/// Writes one byte to `fd`.
pub fn write_byte(fd: c_int, byte: u8) -> Result<(), i32> {
    // SAFETY: one byte read from `byte`, live for the call.
    check(unsafe { libc::write(fd, (&raw const byte).cast(), 1) } as c_long).map(drop)
}

/// Reads one byte from `fd`, waiting at most `timeout_ms` for it: `None` at end of file,
/// `Err(ETIMEDOUT)` when nothing came.
pub fn read_byte_within(fd: c_int, timeout_ms: c_int) -> Result<Option<u8>, i32> {
    let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one `pollfd`, live for the call.
    if check(c_long::from(unsafe { libc::poll(&mut poll, 1, timeout_ms) }))? == 0 {
        return Err(libc::ETIMEDOUT);
    }
    let mut byte = 0u8;
    // SAFETY: one byte written into `byte`, live for the call.
    match check(unsafe { libc::read(fd, (&raw mut byte).cast(), 1) } as c_long)? {
        0 => Ok(None),
        _ => Ok(Some(byte)),
    }
}

/// Closes `fd`.
pub fn close(fd: c_int) {
    // SAFETY: `fd` is one of this process's descriptors that nothing else uses.
    unsafe { libc::close(fd) };
}

/// `tgkill` (`process` 0: `tkill`).
pub fn thread_kill(process: i32, thread: i32, signal: c_int) -> Result<(), i32> {
    // SAFETY: no pointers.
    let result = unsafe {
        if process == 0 {
            libc::syscall(libc::SYS_tkill, thread, signal)
        } else {
            libc::syscall(libc::SYS_tgkill, process, thread, signal)
        }
    };
    check(result).map(drop)
}

/// `raise`: the signal to the calling thread, delivered before it returns.
pub fn raise(signal: c_int) {
    // SAFETY: no pointers.
    unsafe { libc::raise(signal) };
}

pub fn getpid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::getpid() }
}

pub fn getppid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::getppid() }
}

pub fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

pub fn getpgrp() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::getpgrp() }
}

pub fn getpgid(pid: i32) -> Result<i32, i32> {
    // SAFETY: no pointers.
    check(c_long::from(unsafe { libc::getpgid(pid) })).map(|group| group as i32)
}

pub fn getsid(pid: i32) -> Result<i32, i32> {
    // SAFETY: no pointers.
    check(c_long::from(unsafe { libc::getsid(pid) })).map(|session| session as i32)
}

pub fn setpgid(pid: i32, group: i32) -> Result<(), i32> {
    // SAFETY: no pointers.
    check(c_long::from(unsafe { libc::setpgid(pid, group) })).map(drop)
}

pub fn setsid() -> Result<i32, i32> {
    // SAFETY: no arguments.
    check(c_long::from(unsafe { libc::setsid() })).map(|session| session as i32)
}

/// Forks; the child runs `child` and leaves with its result as exit status, without
/// unwinding or flushing anything of the parent's. Returns the child's pid.
///
/// Call it with no other thread running: the child is a copy of the calling thread only.
pub fn fork(child: impl FnOnce() -> i32) -> Result<i32, i32> {
    // SAFETY: sigtest forks only while it runs one thread (every case joins its threads),
    // so the child finds no lock held by a thread it lacks; it runs `child` and `_exit`s.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(errno()),
        0 => exit_now(child()),
        pid => Ok(pid),
    }
}

/// `_exit`: ends the process now.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` ends the process; nothing runs after it.
    unsafe { libc::_exit(code) }
}

/// One `wait4(pid, options)`: (pid, status), or the errno (`EINTR` is not retried).
pub fn wait_once(pid: i32, options: c_int) -> Result<(i32, i32), i32> {
    let mut status = 0;
    // SAFETY: `status` is a live int the kernel writes; no rusage.
    let result = unsafe { libc::wait4(pid, &mut status, options, std::ptr::null_mut()) };
    check(c_long::from(result)).map(|pid| (pid as i32, status))
}

/// Waits for `pid` to end, retrying when a signal interrupts; its wait status.
pub fn reap(pid: i32) -> Result<i32, i32> {
    loop {
        match wait_once(pid, 0) {
            Err(libc::EINTR) => continue,
            result => return result.map(|(_, status)| status),
        }
    }
}

/// `nanosleep(duration)`: `Ok` when it slept the whole time, else the errno and the time it
/// reported left.
pub fn nanosleep(duration: std::time::Duration) -> Result<(), (i32, std::time::Duration)> {
    let request = libc::timespec { tv_sec: duration.as_secs() as _, tv_nsec: duration.subsec_nanos() as _ };
    let mut left = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: both timespecs are live for the call.
    if unsafe { libc::nanosleep(&request, &mut left) } == 0 {
        return Ok(());
    }
    let error = errno();
    Err((error, std::time::Duration::new(left.tv_sec as u64, left.tv_nsec as u32)))
}

/// Sleeps `milliseconds`, however often a signal interrupts.
pub fn sleep_ms(milliseconds: u64) {
    std::thread::sleep(std::time::Duration::from_millis(milliseconds));
}

/// `sigaltstack`: installs `new` (base, size, flags) if given; returns the previous one as
/// (base, size, flags).
pub fn alternate_stack(new: Option<(usize, usize, c_int)>) -> Result<(usize, usize, c_int), i32> {
    let stack =
        new.map(|(base, size, flags)| libc::stack_t { ss_sp: base as *mut c_void, ss_flags: flags, ss_size: size });
    let mut old = libc::stack_t { ss_sp: std::ptr::null_mut(), ss_flags: 0, ss_size: 0 };
    let new_pointer = stack.as_ref().map_or(std::ptr::null(), |s| s as *const libc::stack_t);
    // SAFETY: both stack_t are live for the call; a given new stack's memory is the caller's
    // (tests keep it alive while it is installed).
    check(c_long::from(unsafe { libc::sigaltstack(new_pointer, &mut old) }))?;
    Ok((old.ss_sp as usize, old.ss_size, old.ss_flags))
}

/// `execv(path, [path, args...])`: returns (with the errno) only when it failed.
pub fn exec(path: &str, args: &[&str]) -> i32 {
    let program = match rt::ProgramArguments::new(path, args, &[]) {
        Ok(program) => program,
        Err(_) => return libc::EINVAL,
    };
    // SAFETY: `program` owns the NUL-terminated path and the null-terminated argv.
    unsafe { libc::execv(program.path().as_ptr(), program.argv()) };
    errno()
}

/// `rt_sigreturn` with the stack pointer at `stack`, where no signal frame lies: the kernel
/// must end the process.
pub fn sigreturn_from(stack: u64) -> ! {
    // SAFETY: the call never returns into this code: the kernel ends the process (or, if it
    // wrongly resumed, `ud2` ends it).
    unsafe {
        std::arch::asm!("mov rsp, {stack}", "mov eax, 15", "syscall", "ud2", stack = in(reg) stack, options(noreturn))
    }
}

/// The MXCSR register.
pub fn mxcsr() -> u32 {
    let mut value = 0u32;
    // SAFETY: STMXCSR stores 4 bytes into `value`.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut value, options(nostack, preserves_flags)) };
    value
}

/// Sets MXCSR (a valid value: reserved bits clear).
pub fn set_mxcsr(value: u32) {
    // SAFETY: LDMXCSR loads 4 bytes from `value`; callers pass the default or a rounding mode.
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &value, options(nostack, preserves_flags)) };
}

/// Set by a handler to end [`spin_with_known_registers`].
pub static SPIN_FLAG: AtomicU8 = AtomicU8::new(0);
/// Iterations [`spin_with_known_registers`] may take before it gives up.
static SPIN_BUDGET: AtomicU64 = AtomicU64::new(0);
/// MXCSR while spinning: rounding toward zero, so a handler that left MXCSR changed (or a
/// kernel that did not restore it) shows.
pub const SPIN_MXCSR: u32 = 0x7F80;
static SPIN_MXCSR_IN: AtomicU32 = AtomicU32::new(SPIN_MXCSR);
static SPIN_MXCSR_OUT: AtomicU32 = AtomicU32::new(0);

/// The general registers (rax, rcx, rdx, rsi, rdi, r8 to r15), xmm6 and MXCSR, as loaded
/// before the spin and as found after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registers {
    pub general: [u64; 13],
    pub xmm6: u64,
    pub mxcsr: u32,
}

/// Loads `registers` (and [`SPIN_MXCSR`]) and spins in ring 3 until [`SPIN_FLAG`] is set
/// (by a handler a signal runs in the middle of the loop) or `budget` iterations pass;
/// returns what the registers hold after, whether the flag ended the spin, and how many
/// iterations it spun (0: the flag was set before it began).
pub fn spin_with_known_registers(registers: [u64; 13], xmm6: f64, budget: u64) -> (Registers, bool, u64) {
    SPIN_BUDGET.store(budget, Ordering::Relaxed);
    let [mut rax, mut rcx, mut rdx, mut rsi, mut rdi, mut r8, mut r9, mut r10, mut r11, mut r12, mut r13, mut r14, mut r15] =
        registers;
    let mut xmm = xmm6;
    // SAFETY: the loop touches only the registers declared here and three statics of this
    // module through `sym`; it restores nothing else because it changes nothing else (MXCSR
    // is saved out and put back to the default by the caller below).
    unsafe {
        std::arch::asm!(
            "ldmxcsr [rip + {mxcsr_in}]",
            "2:",
            "cmp byte ptr [rip + {flag}], 0",
            "jne 3f",
            "dec qword ptr [rip + {budget}]",
            "jnz 2b",
            "3:",
            "stmxcsr [rip + {mxcsr_out}]",
            flag = sym SPIN_FLAG,
            budget = sym SPIN_BUDGET,
            mxcsr_in = sym SPIN_MXCSR_IN,
            mxcsr_out = sym SPIN_MXCSR_OUT,
            inout("rax") rax, inout("rcx") rcx, inout("rdx") rdx, inout("rsi") rsi, inout("rdi") rdi,
            inout("r8") r8, inout("r9") r9, inout("r10") r10, inout("r11") r11, inout("r12") r12,
            inout("r13") r13, inout("r14") r14, inout("r15") r15, inout("xmm6") xmm,
            options(nostack),
        );
    }
    set_mxcsr(0x1F80);
    let after = Registers {
        general: [rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11, r12, r13, r14, r15],
        xmm6: xmm.to_bits(),
        mxcsr: SPIN_MXCSR_OUT.load(Ordering::Relaxed),
    };
    let spun = budget - SPIN_BUDGET.load(Ordering::Relaxed);
    (after, SPIN_FLAG.load(Ordering::Relaxed) != 0, spun)
}

/// What the handler entry stub saw: rsp, rdi, rsi, rdx at the handler's first instruction.
pub static ENTRY_RSP: AtomicU64 = AtomicU64::new(0);
pub static ENTRY_RDI: AtomicU64 = AtomicU64::new(0);
pub static ENTRY_RSI: AtomicU64 = AtomicU64::new(0);
pub static ENTRY_RDX: AtomicU64 = AtomicU64::new(0);

std::arch::global_asm!(
    ".globl sigtest_entry_stub",
    "sigtest_entry_stub:",
    "mov [rip + {rsp}], rsp",
    "mov [rip + {rdi}], rdi",
    "mov [rip + {rsi}], rsi",
    "mov [rip + {rdx}], rdx",
    "jmp {handler}",
    rsp = sym ENTRY_RSP,
    rdi = sym ENTRY_RDI,
    rsi = sym ENTRY_RSI,
    rdx = sym ENTRY_RDX,
    handler = sym crate::cases::register_handler,
);

extern "C" {
    fn sigtest_entry_stub();
}

/// The address of the handler entry stub, which records the entry registers and jumps to
/// `cases::register_handler` (the stack as the kernel left it).
pub fn entry_stub() -> usize {
    sigtest_entry_stub as *const () as usize
}

/// Reads a `T` at `offset` bytes into the structure at `base` (a siginfo or ucontext the
/// kernel passed a handler).
///
/// # Safety
/// `base + offset` must be readable for `size_of::<T>()` bytes.
pub unsafe fn read_at<T: Copy>(base: *const c_void, offset: usize) -> T {
    // SAFETY: the caller vouches for the range; the read is unaligned-safe.
    unsafe { base.cast::<u8>().add(offset).cast::<T>().read_unaligned() }
}

/// Writes a `T` at `offset` bytes into the structure at `base`.
///
/// # Safety
/// `base + offset` must be writable for `size_of::<T>()` bytes.
pub unsafe fn write_at<T: Copy>(base: *mut c_void, offset: usize, value: T) {
    // SAFETY: as above.
    unsafe { base.cast::<u8>().add(offset).cast::<T>().write_unaligned(value) }
}

/// `alarm(seconds)`: the seconds the previous timer had left.
pub fn alarm(seconds: u32) -> u32 {
    // SAFETY: no memory is passed.
    unsafe { libc::alarm(seconds) }
}

/// `setitimer(ITIMER_REAL)` with `value` and `interval`: the previous (value, interval).
pub fn set_real_timer(
    value: std::time::Duration,
    interval: std::time::Duration,
) -> Result<(std::time::Duration, std::time::Duration), i32> {
    let timeval = |d: std::time::Duration| libc::timeval { tv_sec: d.as_secs() as _, tv_usec: d.subsec_micros() as _ };
    let new = libc::itimerval { it_interval: timeval(interval), it_value: timeval(value) };
    let mut old = libc::itimerval { it_interval: timeval(Default::default()), it_value: timeval(Default::default()) };
    // SAFETY: both itimervals are live for the call.
    if unsafe { libc::setitimer(libc::ITIMER_REAL, &new, &mut old) } != 0 {
        return Err(errno());
    }
    Ok((duration_of(old.it_value), duration_of(old.it_interval)))
}

/// `getitimer(which)`: (value, interval).
pub fn timer(which: c_int) -> Result<(std::time::Duration, std::time::Duration), i32> {
    let zero = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let mut now = libc::itimerval { it_interval: zero, it_value: zero };
    // SAFETY: the itimerval is live for the call.
    if unsafe { libc::getitimer(which, &mut now) } != 0 {
        return Err(errno());
    }
    Ok((duration_of(now.it_value), duration_of(now.it_interval)))
}

fn duration_of(value: libc::timeval) -> std::time::Duration {
    std::time::Duration::new(value.tv_sec as u64, value.tv_usec as u32 * 1000)
}

/// `sigtimedwait(set, info, timeout)`: the signal taken and its siginfo's (code, pid).
pub fn timed_wait(set: u64, timeout: Option<std::time::Duration>) -> Result<(c_int, i32, i32), i32> {
    // SAFETY: an all-zero sigset_t and siginfo_t are valid values.
    let (mut signals, mut info): (libc::sigset_t, libc::siginfo_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    // SAFETY: `signals` is a live sigset_t; only the first 8 bytes (the kernel's set) are used.
    unsafe { std::ptr::write_unaligned(&mut signals as *mut libc::sigset_t as *mut u64, set) };
    let timeout = timeout.map(|d| libc::timespec { tv_sec: d.as_secs() as _, tv_nsec: d.subsec_nanos() as _ });
    let timeout_pointer = timeout.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: the set, the siginfo and the timeout (if any) are live for the call.
    let signal = unsafe { libc::sigtimedwait(&signals, &mut info, timeout_pointer) };
    if signal < 0 {
        return Err(errno());
    }
    let base = &info as *const libc::siginfo_t as *const c_void;
    // SAFETY: the siginfo is 128 bytes; the offsets are Linux's.
    Ok(unsafe { (signal, read_at::<i32>(base, 8), read_at::<i32>(base, 16)) })
}
