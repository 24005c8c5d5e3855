//! The cases, each checking one of Linux's signal or group rules.

use crate::os::{self, bit};
use libc::{c_int, c_void};
use std::hint::black_box;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What one case found: a `detail` for the `ok` line, or what went wrong.
pub type Outcome = Result<String, String>;

/// The signals the cases use, put back to `SIG_DFL` and unblocked before each case.
const USED: [c_int; 5] = [libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM, libc::SIGCHLD, libc::SIGTERM];

/// Forgets what earlier cases left: dispositions, mask, handler records.
pub fn reset() {
    for signal in USED {
        let _ = os::set_disposition(signal, libc::SIG_DFL);
    }
    let _ = os::change_mask(libc::SIG_SETMASK, 0);
    for count in &COUNT {
        count.store(0, Ordering::Relaxed);
    }
    for record in [&LAST_CODE, &LAST_PID, &LAST_STATUS, &HANDLER_TID, &HANDLER_ALTERNATE_FLAGS] {
        record.store(0, Ordering::Relaxed);
    }
    for record in [&HANDLER_MASK, &HANDLER_STACK] {
        record.store(0, Ordering::Relaxed);
    }
    DEPTH.store(0, Ordering::Relaxed);
    MAXIMUM_DEPTH.store(0, Ordering::Relaxed);
    os::SPIN_FLAG.store(0, Ordering::Relaxed);
}

// What handlers saw. Handlers only store to atomics: nothing else is async-signal-safe.
static COUNT: [AtomicU32; 65] = [const { AtomicU32::new(0) }; 65];
static LAST_CODE: AtomicI32 = AtomicI32::new(0);
static LAST_PID: AtomicI32 = AtomicI32::new(0);
static LAST_STATUS: AtomicI32 = AtomicI32::new(0);
static HANDLER_TID: AtomicI32 = AtomicI32::new(0);
static HANDLER_MASK: AtomicU64 = AtomicU64::new(0);
static HANDLER_STACK: AtomicU64 = AtomicU64::new(0);
static HANDLER_ALTERNATE_FLAGS: AtomicI32 = AtomicI32::new(0);
static DEPTH: AtomicU32 = AtomicU32::new(0);
static MAXIMUM_DEPTH: AtomicU32 = AtomicU32::new(0);
static FLOAT_SINK: AtomicU64 = AtomicU64::new(0);

/// `siginfo_t` offsets [Linux include/uapi/asm-generic/siginfo.h].
const SI_CODE: usize = 8;
const SI_PID: usize = 16;
const SI_STATUS: usize = 24;
/// `ucontext_t` offsets on x86-64: the general registers (musl's `gregs`, `REG_*` order), the
/// pointer to the FXSAVE image after them, the signal mask.
const UC_GREGS: usize = 40;
const UC_FPREGS: usize = UC_GREGS + 23 * 8;
const UC_SIGMASK: usize = UC_GREGS + 256;
/// In the FXSAVE image: MXCSR, and xmm6's low half.
const FX_MXCSR: usize = 24;
const FX_XMM6: usize = 160 + 6 * 16;

fn count(signal: c_int) -> u32 {
    COUNT[signal as usize].load(Ordering::Relaxed)
}

/// Floating-point work in a handler, so that an interrupted computation whose x87/SSE state
/// the kernel did not save shows it.
fn float_work() {
    let x = black_box(1.5f64);
    let y = (x * 3.25).sqrt() + x.powi(3) / 7.0;
    FLOAT_SINK.store(y.to_bits(), Ordering::Relaxed);
}

/// The handler most cases use: counts, and records the siginfo, the thread, the mask, where
/// its stack is and what `sigaltstack` says there.
extern "C" fn counting_handler(signal: c_int, info: *mut libc::siginfo_t, _context: *mut c_void) {
    COUNT[signal as usize].fetch_add(1, Ordering::Relaxed);
    // SAFETY: the kernel passed a siginfo of 128 bytes.
    let (code, pid, status) = unsafe {
        let info = info as *const c_void;
        (os::read_at::<i32>(info, SI_CODE), os::read_at::<i32>(info, SI_PID), os::read_at::<i32>(info, SI_STATUS))
    };
    LAST_CODE.store(code, Ordering::Relaxed);
    LAST_PID.store(pid, Ordering::Relaxed);
    LAST_STATUS.store(status, Ordering::Relaxed);
    HANDLER_TID.store(os::gettid(), Ordering::Relaxed);
    HANDLER_MASK.store(os::mask(), Ordering::Relaxed);
    let local = 0u8;
    HANDLER_STACK.store(black_box(&local) as *const u8 as u64, Ordering::Relaxed);
    if let Ok((_, _, flags)) = os::alternate_stack(None) {
        HANDLER_ALTERNATE_FLAGS.store(flags, Ordering::Relaxed);
    }
    float_work();
}

/// Raises its own signal once from inside: nested at once with `SA_NODEFER`, after the first
/// returns without.
extern "C" fn nesting_handler(signal: c_int, _info: *mut libc::siginfo_t, _context: *mut c_void) {
    let seen = COUNT[signal as usize].fetch_add(1, Ordering::Relaxed) + 1;
    let depth = DEPTH.fetch_add(1, Ordering::Relaxed) + 1;
    MAXIMUM_DEPTH.fetch_max(depth, Ordering::Relaxed);
    if seen == 1 {
        os::raise(signal);
    }
    DEPTH.fetch_sub(1, Ordering::Relaxed);
}

/// Points the saved instruction pointer at kernel text: the return must kill the process.
extern "C" fn corrupting_handler(_signal: c_int, _info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passed a ucontext; gregs[REG_RIP] lies inside it.
    unsafe { os::write_at::<u64>(context, UC_GREGS + libc::REG_RIP as usize * 8, 0xffff_ffff_8000_0000) };
}

/// Makes the saved stack pointer non-canonical: the return lands in code that uses the
/// stack, which must fault in ring 3, never in the kernel.
extern "C" fn stack_corrupting_handler(_signal: c_int, _info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passed a ucontext; gregs[REG_RSP] lies inside it.
    unsafe { os::write_at::<u64>(context, UC_GREGS + libc::REG_RSP as usize * 8, 0x8000_0000_0000_0000) };
}

// What `register_handler` found in its frame.
static SEEN_R8: AtomicU64 = AtomicU64::new(0);
static SEEN_XMM6: AtomicU64 = AtomicU64::new(0);
static SEEN_SAVED_MXCSR: AtomicU32 = AtomicU32::new(0);
static SEEN_FPREGS: AtomicU64 = AtomicU64::new(0);
static SEEN_MXCSR: AtomicU32 = AtomicU32::new(0);
static SEEN_SIGMASK: AtomicU64 = AtomicU64::new(0);
static SEEN_PID: AtomicI32 = AtomicI32::new(0);

/// The handler behind `os::entry_stub`: reads the interrupted registers from its ucontext,
/// dirties the SSE state, and ends the spin.
pub extern "C" fn register_handler(_signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    SEEN_MXCSR.store(os::mxcsr(), Ordering::Relaxed);
    // SAFETY: the kernel passed a siginfo and a ucontext; the FXSAVE pointer in it is read
    // only when it is not null, and the image is 512 bytes.
    unsafe {
        SEEN_PID.store(os::read_at::<i32>(info as *const c_void, SI_PID), Ordering::Relaxed);
        SEEN_R8.store(os::read_at::<u64>(context, UC_GREGS + libc::REG_R8 as usize * 8), Ordering::Relaxed);
        SEEN_SIGMASK.store(os::read_at::<u64>(context, UC_SIGMASK), Ordering::Relaxed);
        let fpregs = os::read_at::<u64>(context, UC_FPREGS);
        SEEN_FPREGS.store(fpregs, Ordering::Relaxed);
        if fpregs != 0 {
            let image = fpregs as *const c_void;
            SEEN_XMM6.store(os::read_at::<u64>(image, FX_XMM6), Ordering::Relaxed);
            SEEN_SAVED_MXCSR.store(os::read_at::<u32>(image, FX_MXCSR), Ordering::Relaxed);
        }
    }
    float_work();
    os::set_mxcsr(0x1F80);
    os::SPIN_FLAG.store(1, Ordering::Relaxed);
}

/// How a wait status reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ended {
    Exited(i32),
    Signaled(i32),
    Other(i32),
}

fn ended(status: i32) -> Ended {
    match status & 0x7f {
        0 => Ended::Exited((status >> 8) & 0xff),
        0x7f => Ended::Other(status),
        signal => Ended::Signaled(signal),
    }
}

fn expect<T: PartialEq + std::fmt::Debug>(what: &str, got: T, wanted: T) -> Result<(), String> {
    if got == wanted {
        Ok(())
    } else {
        Err(format!("{what}: {got:?}, not {wanted:?}"))
    }
}

fn errno_text(error: i32) -> String {
    std::io::Error::from_raw_os_error(error).to_string()
}

fn fork(child: impl FnOnce() -> i32) -> Result<i32, String> {
    os::fork(child).map_err(|e| format!("fork: {}", errno_text(e)))
}

fn reap(pid: i32) -> Result<Ended, String> {
    os::reap(pid).map(ended).map_err(|e| format!("wait4({pid}): {}", errno_text(e)))
}

fn install(signal: c_int, handler: os::Handler, flags: c_int) -> Result<(), String> {
    os::set_handler(signal, handler, flags, &[]).map_err(|e| format!("sigaction({signal}): {}", errno_text(e)))
}

/// A child that sends `signal` to its parent after `delay_ms`, then exits with `code`
/// after `linger_ms` more.
fn signal_parent_later(signal: c_int, delay_ms: u64, linger_ms: u64, code: i32) -> Result<i32, String> {
    fork(move || {
        os::sleep_ms(delay_ms);
        if os::kill(os::getppid(), signal).is_err() {
            return 100;
        }
        os::sleep_ms(linger_ms);
        code
    })
}

/// A handler interrupts a spin in ring 3 and returns into it: every general register the
/// spin set (rcx and r11 too, which only an IRET-style return brings back), xmm6 and a
/// non-default MXCSR are intact; the handler started with rsp + 8 aligned to 16, the signal in
/// rdi, a clean MXCSR, and a frame whose sigcontext and FXSAVE image hold the spin's values.
pub fn registers() -> Outcome {
    os::set_handler_address(libc::SIGUSR1, os::entry_stub(), 0, &[]).map_err(errno_text)?;
    let child = signal_parent_later(libc::SIGUSR1, 30, 0, 0)?;
    let values: [u64; 13] = std::array::from_fn(|i| 0x0101_0101_0101_0101u64.wrapping_mul(i as u64 + 1) ^ 0x5a);
    let xmm6 = black_box(-1234.5678f64);
    let (after, signalled, spun) = os::spin_with_known_registers(values, xmm6, 4_000_000_000);
    expect("child", reap(child)?, Ended::Exited(0))?;
    if !signalled {
        return Err("no signal ended the spin".into());
    }
    if spun == 0 {
        return Err("the signal came before the spin began".into());
    }
    let names = ["rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"];
    for (index, name) in names.iter().enumerate() {
        if after.general[index] != values[index] {
            return Err(format!("{name} came back {:#x}, not {:#x}", after.general[index], values[index]));
        }
    }
    expect("xmm6 after", f64::from_bits(after.xmm6), xmm6)?;
    expect("MXCSR after", after.mxcsr, os::SPIN_MXCSR)?;
    expect("handler's MXCSR", SEEN_MXCSR.load(Ordering::Relaxed), 0x1F80)?;
    expect("entry rsp % 16", (os::ENTRY_RSP.load(Ordering::Relaxed) + 8) % 16, 0)?;
    expect("entry rdi", os::ENTRY_RDI.load(Ordering::Relaxed), libc::SIGUSR1 as u64)?;
    let (info, context) = (os::ENTRY_RSI.load(Ordering::Relaxed), os::ENTRY_RDX.load(Ordering::Relaxed));
    if info == 0 || context == 0 {
        return Err("no siginfo or ucontext pointer".into());
    }
    expect("siginfo si_pid", SEEN_PID.load(Ordering::Relaxed), child)?;
    expect("ucontext r8", SEEN_R8.load(Ordering::Relaxed), values[5])?;
    expect("ucontext sigmask", SEEN_SIGMASK.load(Ordering::Relaxed), 0)?;
    let fpregs = SEEN_FPREGS.load(Ordering::Relaxed);
    if fpregs == 0 || !fpregs.is_multiple_of(16) {
        return Err(format!("fpstate pointer {fpregs:#x} is not a 16-byte aligned image"));
    }
    expect("fpstate xmm6", f64::from_bits(SEEN_XMM6.load(Ordering::Relaxed)), xmm6)?;
    expect("fpstate MXCSR", SEEN_SAVED_MXCSR.load(Ordering::Relaxed), os::SPIN_MXCSR)?;
    Ok(format!("spun={spun} 13-registers xmm6 mxcsr frame"))
}

/// An f64 series summed while a signal arrives gives the same bits as the same series summed
/// undisturbed.
pub fn fpu() -> Outcome {
    fn term(k: u64) -> f64 {
        1.0 / ((k * k) as f64) + (k as f64).sqrt() * 1e-9
    }
    os::set_handler_address(libc::SIGUSR1, os::entry_stub(), 0, &[]).map_err(errno_text)?;
    let child = signal_parent_later(libc::SIGUSR1, 30, 0, 0)?;
    let started = Instant::now();
    let (mut sum, mut k) = (0.0f64, 1u64);
    while os::SPIN_FLAG.load(Ordering::Relaxed) == 0 && started.elapsed() < Duration::from_secs(10) {
        sum += term(black_box(k));
        k += 1;
    }
    expect("child", reap(child)?, Ended::Exited(0))?;
    if os::SPIN_FLAG.load(Ordering::Relaxed) == 0 {
        return Err("no signal arrived".into());
    }
    let reference: f64 = (1..k).map(|k| term(black_box(k))).fold(0.0, |sum, term| sum + term);
    expect("sum", sum.to_bits(), reference.to_bits())?;
    Ok(format!("terms={}", k - 1))
}

/// `prctl(PR_SET_PDEATHSIG)`: a grandchild that asked for SIGUSR1 when its parent ends gets it
/// (its handler runs) once that parent exits, from the parent (`SI_USER`); `PR_GET_PDEATHSIG`
/// reads the signal back; a fork clears it for the child; signal 65 is `EINVAL`.
pub fn parent_death_signal() -> Outcome {
    expect("PR_SET_PDEATHSIG 65", os::set_death_signal(65), Err(libc::EINVAL))?;
    let (report_read, report_write) = os::pipe().map_err(errno_text)?;
    let (ready_read, ready_write) = os::pipe().map_err(errno_text)?;
    let middle = fork(move || {
        let grandchild = os::fork(move || {
            if os::set_death_signal(libc::SIGUSR1).is_err() || os::death_signal() != Ok(libc::SIGUSR1) {
                return 10;
            }
            // A fork's child starts without it.
            match os::fork(|| os::death_signal().unwrap_or(-1)).map(os::reap) {
                Ok(Ok(0)) => {}
                _ => return 11,
            }
            if install(libc::SIGUSR1, counting_handler, 0).is_err() || os::write_byte(ready_write, b'r').is_err() {
                return 12;
            }
            for _ in 0..300 {
                if count(libc::SIGUSR1) > 0 {
                    let from_parent = LAST_CODE.load(Ordering::Relaxed) == 0 && LAST_PID.load(Ordering::Relaxed) != 0;
                    let _ = os::write_byte(report_write, if from_parent { b'D' } else { b'C' });
                    return 0;
                }
                os::sleep_ms(10);
            }
            let _ = os::write_byte(report_write, b'N');
            13
        });
        // The grandchild asked for its signal before this process ends.
        match (grandchild, os::read_byte_within(ready_read, 5000)) {
            (Ok(_), Ok(Some(b'r'))) => 0,
            _ => 20,
        }
    })?;
    for fd in [report_write, ready_write, ready_read] {
        os::close(fd);
    }
    expect("the parent", reap(middle)?, Ended::Exited(0))?;
    let report = os::read_byte_within(report_read, 5000);
    os::close(report_read);
    match report {
        Ok(Some(b'D')) => Ok("signal=SIGUSR1 on-parent-exit fork-clears einval".into()),
        Ok(Some(b'C')) => Err("the signal came, but not from the parent (si_code or si_pid)".into()),
        Ok(Some(b'N')) => Err("the grandchild got no signal within 3 s of its parent's exit".into()),
        Ok(other) => Err(format!("the grandchild ended without saying (read {other:?})")),
        Err(error) => Err(format!("nothing from the grandchild: {}", errno_text(error))),
    }
}

/// A blocked signal sent to oneself stays pending (`rt_sigpending`) and runs its handler once
/// when unblocked, before `rt_sigprocmask` returns.
pub fn pending_until_unblocked() -> Outcome {
    install(libc::SIGUSR2, counting_handler, 0)?;
    os::change_mask(libc::SIG_BLOCK, bit(libc::SIGUSR2)).map_err(errno_text)?;
    os::kill(os::getpid(), libc::SIGUSR2).map_err(errno_text)?;
    os::kill(os::getpid(), libc::SIGUSR2).map_err(errno_text)?;
    expect("handler runs while blocked", count(libc::SIGUSR2), 0)?;
    expect("pending", os::pending().map_err(errno_text)?, bit(libc::SIGUSR2))?;
    os::change_mask(libc::SIG_UNBLOCK, bit(libc::SIGUSR2)).map_err(errno_text)?;
    expect("handler runs after unblocking (one instance)", count(libc::SIGUSR2), 1)?;
    expect("pending after", os::pending().map_err(errno_text)?, 0)?;
    expect("si_code (SI_USER)", LAST_CODE.load(Ordering::Relaxed), 0)?;
    expect("si_pid", LAST_PID.load(Ordering::Relaxed), os::getpid())?;
    Ok("pending=SIGUSR2 delivered=1".into())
}

/// `SA_RESETHAND`: the handler runs once, the disposition is `SIG_DFL` afterwards, and the
/// next signal ends the process (in a child).
pub fn reset_handler() -> Outcome {
    install(libc::SIGUSR1, counting_handler, libc::SA_RESETHAND as c_int)?;
    os::raise(libc::SIGUSR1);
    expect("handler runs", count(libc::SIGUSR1), 1)?;
    expect("disposition after", os::handler_of(libc::SIGUSR1).map_err(errno_text)?, libc::SIG_DFL)?;
    install(libc::SIGUSR1, counting_handler, libc::SA_RESETHAND as c_int)?;
    let child = fork(|| {
        os::raise(libc::SIGUSR1);
        os::raise(libc::SIGUSR1);
        0
    })?;
    expect("child", reap(child)?, Ended::Signaled(libc::SIGUSR1))?;
    Ok("once-then-default".into())
}

/// The handler's own signal is blocked while it runs (so a second one waits for its
/// return) unless `SA_NODEFER`, and `sa_mask` is blocked too.
pub fn nested_blocking() -> Outcome {
    os::set_handler(libc::SIGUSR1, nesting_handler, 0, &[]).map_err(errno_text)?;
    os::raise(libc::SIGUSR1);
    expect("runs (deferred)", count(libc::SIGUSR1), 2)?;
    expect("depth (deferred)", MAXIMUM_DEPTH.load(Ordering::Relaxed), 1)?;
    reset();
    os::set_handler(libc::SIGUSR1, nesting_handler, libc::SA_NODEFER as c_int, &[]).map_err(errno_text)?;
    os::raise(libc::SIGUSR1);
    expect("runs (SA_NODEFER)", count(libc::SIGUSR1), 2)?;
    expect("depth (SA_NODEFER)", MAXIMUM_DEPTH.load(Ordering::Relaxed), 2)?;
    reset();
    os::set_handler(libc::SIGUSR1, counting_handler, 0, &[libc::SIGUSR2]).map_err(errno_text)?;
    os::raise(libc::SIGUSR1);
    let inside = HANDLER_MASK.load(Ordering::Relaxed);
    expect(
        "mask in the handler",
        inside & (bit(libc::SIGUSR1) | bit(libc::SIGUSR2)),
        bit(libc::SIGUSR1) | bit(libc::SIGUSR2),
    )?;
    expect("mask after", os::mask() & (bit(libc::SIGUSR1) | bit(libc::SIGUSR2)), 0)?;
    Ok("deferred-depth=1 nodefer-depth=2 sa_mask".into())
}

/// `nanosleep` interrupted by a handled signal a child sends fails with `EINTR` and reports
/// the time left.
pub fn nanosleep_interrupted() -> Outcome {
    install(libc::SIGALRM, counting_handler, libc::SA_RESTART)?;
    let child = signal_parent_later(libc::SIGALRM, 100, 0, 0)?;
    let asked = Duration::from_secs(3);
    let started = Instant::now();
    let result = os::nanosleep(asked);
    let slept = started.elapsed();
    expect("child", reap(child)?, Ended::Exited(0))?;
    let Err((error, left)) = result else {
        return Err(format!("nanosleep slept the whole {asked:?}"));
    };
    expect("errno", errno_text(error), errno_text(libc::EINTR))?;
    expect("handler runs", count(libc::SIGALRM), 1)?;
    if left.is_zero() || left >= asked || slept >= Duration::from_secs(2) {
        return Err(format!("slept {slept:?}, {left:?} left"));
    }
    Ok(format!("slept={}ms", slept.as_millis()))
}

/// `wait4` blocked in the parent while the child signals it: with `SA_RESTART` the wait runs
/// again after the handler and returns the child; without, it fails with `EINTR`.
pub fn wait_restart() -> Outcome {
    install(libc::SIGUSR1, counting_handler, libc::SA_RESTART)?;
    let child = signal_parent_later(libc::SIGUSR1, 100, 100, 3)?;
    let result = os::wait_once(child, 0);
    expect("handler runs", count(libc::SIGUSR1), 1)?;
    match result {
        Ok((pid, status)) => {
            expect("pid", pid, child)?;
            expect("status", ended(status), Ended::Exited(3))?;
        }
        Err(error) => {
            let _ = reap(child);
            return Err(format!("wait4 failed: {}", errno_text(error)));
        }
    }
    reset();
    install(libc::SIGUSR1, counting_handler, 0)?;
    let child = signal_parent_later(libc::SIGUSR1, 100, 100, 3)?;
    let result = os::wait_once(child, 0);
    expect("handler runs (no SA_RESTART)", count(libc::SIGUSR1), 1)?;
    let status = reap(child);
    expect("wait4 without SA_RESTART", result.map(drop), Err(libc::EINTR))?;
    expect("status", status?, Ended::Exited(3))?;
    Ok("restarted eintr".into())
}

/// A child's exit runs the parent's SIGCHLD handler with `si_pid`, `CLD_EXITED` and the code.
pub fn child_handler() -> Outcome {
    install(libc::SIGCHLD, counting_handler, libc::SA_RESTART)?;
    let child = fork(|| 5)?;
    let started = Instant::now();
    while count(libc::SIGCHLD) == 0 && started.elapsed() < Duration::from_secs(5) {
        os::sleep_ms(5);
    }
    expect("SIGCHLD handled", count(libc::SIGCHLD), 1)?;
    expect("si_pid", LAST_PID.load(Ordering::Relaxed), child)?;
    expect("si_code (CLD_EXITED)", LAST_CODE.load(Ordering::Relaxed), 1)?;
    expect("si_status", LAST_STATUS.load(Ordering::Relaxed), 5)?;
    expect("child", reap(child)?, Ended::Exited(5))?;
    Ok("CLD_EXITED status=5".into())
}

/// SIGCHLD set to `SIG_IGN`: children are reaped as they end, so `wait4` ends with `ECHILD`.
pub fn child_ignored() -> Outcome {
    os::set_disposition(libc::SIGCHLD, libc::SIG_IGN).map_err(errno_text)?;
    let child = fork(|| {
        os::sleep_ms(50);
        0
    })?;
    let result = os::wait_once(-1, 0);
    let _ = os::set_disposition(libc::SIGCHLD, libc::SIG_DFL);
    expect("wait4", result, Err(libc::ECHILD))?;
    expect("child gone", os::kill(child, 0), Err(libc::ESRCH))?;
    Ok("ECHILD".into())
}

/// SIGTERM with the default action ends a child: wait status "signaled 15".
pub fn terminate_default() -> Outcome {
    let child = fork(|| loop {
        os::pause();
    })?;
    os::sleep_ms(20);
    os::kill(child, libc::SIGTERM).map_err(errno_text)?;
    expect("child", reap(child)?, Ended::Signaled(libc::SIGTERM))?;
    Ok("signaled=15".into())
}

/// SIGKILL and SIGSTOP take no handler and no `SIG_IGN` (`EINVAL`), cannot be blocked, and
/// SIGKILL ends a child that blocks everything.
pub fn kill_uncatchable() -> Outcome {
    for signal in [libc::SIGKILL, libc::SIGSTOP] {
        expect("handler", os::set_handler(signal, counting_handler, 0, &[]), Err(libc::EINVAL))?;
        expect("SIG_IGN", os::raw_sigaction(signal, 1, 0x0400_0000, 0), Err(libc::EINVAL))?;
    }
    os::change_mask(libc::SIG_BLOCK, u64::MAX).map_err(errno_text)?;
    let mask = os::mask();
    os::change_mask(libc::SIG_SETMASK, 0).map_err(errno_text)?;
    expect("blocked SIGKILL or SIGSTOP", mask & (bit(libc::SIGKILL) | bit(libc::SIGSTOP)), 0)?;
    let child = fork(|| {
        let _ = os::change_mask(libc::SIG_BLOCK, u64::MAX);
        loop {
            os::pause();
        }
    })?;
    os::sleep_ms(20);
    os::kill(child, libc::SIGKILL).map_err(errno_text)?;
    expect("child", reap(child)?, Ended::Signaled(libc::SIGKILL))?;
    Ok("EINVAL unblockable signaled=9".into())
}

/// `rt_sigsuspend` with an empty mask takes a blocked signal: the handler runs, the call
/// fails with `EINTR`, and the old mask (still blocking it) is back.
pub fn suspend() -> Outcome {
    install(libc::SIGUSR1, counting_handler, libc::SA_RESTART)?;
    os::change_mask(libc::SIG_BLOCK, bit(libc::SIGUSR1)).map_err(errno_text)?;
    let child = signal_parent_later(libc::SIGUSR1, 50, 0, 0)?;
    let error = os::suspend(0);
    let mask = os::mask();
    expect("child", reap(child)?, Ended::Exited(0))?;
    expect("errno", errno_text(error), errno_text(libc::EINTR))?;
    expect("handler runs", count(libc::SIGUSR1), 1)?;
    expect(
        "mask in the handler has SIGUSR1",
        HANDLER_MASK.load(Ordering::Relaxed) & bit(libc::SIGUSR1),
        bit(libc::SIGUSR1),
    )?;
    expect("mask after", mask & bit(libc::SIGUSR1), bit(libc::SIGUSR1))?;
    Ok("EINTR mask-restored".into())
}

/// `pause` in a child returns `EINTR` once a handled signal arrives.
pub fn pause() -> Outcome {
    install(libc::SIGUSR1, counting_handler, 0)?;
    let child = fork(|| if os::pause() == libc::EINTR && count(libc::SIGUSR1) >= 1 { 0 } else { 1 })?;
    let started = Instant::now();
    loop {
        os::kill(child, libc::SIGUSR1).map_err(errno_text)?;
        os::sleep_ms(30);
        match os::wait_once(child, libc::WNOHANG) {
            Ok((0, _)) if started.elapsed() < Duration::from_secs(5) => continue,
            Ok((0, _)) => {
                let _ = os::kill(child, libc::SIGKILL);
                let _ = reap(child);
                return Err("pause did not return".into());
            }
            Ok((_, status)) => {
                expect("child", ended(status), Ended::Exited(0))?;
                return Ok("EINTR".into());
            }
            Err(error) => return Err(format!("wait4: {}", errno_text(error))),
        }
    }
}

/// `tgkill` reaches the thread it names: the handler runs on it (and cuts its sleep short).
pub fn thread_kill() -> Outcome {
    static TARGET: AtomicI32 = AtomicI32::new(0);
    install(libc::SIGUSR1, counting_handler, 0)?;
    TARGET.store(0, Ordering::Relaxed);
    let worker = std::thread::spawn(|| {
        TARGET.store(os::gettid(), Ordering::Relaxed);
        let started = Instant::now();
        while count(libc::SIGUSR1) == 0 && started.elapsed() < Duration::from_secs(5) {
            let _ = os::nanosleep(Duration::from_millis(20));
        }
    });
    let started = Instant::now();
    while TARGET.load(Ordering::Relaxed) == 0 && started.elapsed() < Duration::from_secs(5) {
        os::sleep_ms(1);
    }
    let target = TARGET.load(Ordering::Relaxed);
    let sent = os::thread_kill(os::getpid(), target, libc::SIGUSR1);
    let bad_process = os::thread_kill(os::getpid() + 1_000_000, target, libc::SIGUSR1);
    worker.join().map_err(|_| "the thread panicked".to_string())?;
    sent.map_err(|e| format!("tgkill: {}", errno_text(e)))?;
    expect("tgkill with another process", bad_process, Err(libc::ESRCH))?;
    expect("handler runs", count(libc::SIGUSR1), 1)?;
    expect("on the thread", HANDLER_TID.load(Ordering::Relaxed), target)?;
    expect("si_code (SI_TKILL)", LAST_CODE.load(Ordering::Relaxed), -6)?;
    Ok("on-target-thread".into())
}

/// A handler with `SA_ONSTACK` runs on the alternate stack, where `sigaltstack` says
/// `SS_ONSTACK`.
pub fn alternate_stack() -> Outcome {
    const SIZE: usize = 64 * 1024;
    let stack = vec![0u8; SIZE];
    let base = stack.as_ptr() as usize;
    let previous = os::alternate_stack(Some((base, SIZE, 0))).map_err(errno_text)?;
    install(libc::SIGUSR1, counting_handler, libc::SA_ONSTACK)?;
    os::raise(libc::SIGUSR1);
    let now = os::alternate_stack(None).map_err(errno_text);
    let (old_base, old_size, old_flags) = previous;
    let restored = if old_flags & libc::SS_DISABLE != 0 { (0, 0, libc::SS_DISABLE) } else { (old_base, old_size, 0) };
    let _ = os::alternate_stack(Some(restored));
    drop(stack);
    expect("handler runs", count(libc::SIGUSR1), 1)?;
    let address = HANDLER_STACK.load(Ordering::Relaxed) as usize;
    if !(base..base + SIZE).contains(&address) {
        return Err(format!("handler's stack at {address:#x}, outside {base:#x}+{SIZE:#x}"));
    }
    expect("flags in the handler", HANDLER_ALTERNATE_FLAGS.load(Ordering::Relaxed), libc::SS_ONSTACK)?;
    expect("flags after", now?.2, 0)?;
    Ok(format!("at-offset={:#x}", address - base))
}

/// Unusable signal frames end the process with SIGSEGV and nothing else: a handler that
/// points its saved rip at kernel text, one that makes its saved rsp non-canonical (SIGBUS on
/// Linux), `rt_sigreturn` with no frame at the stack pointer, a handler installed without
/// `SA_RESTORER`.
pub fn bad_frames() -> Outcome {
    /// A child's body: its exit status, if it survives.
    type Attempt = fn() -> i32;
    let attempts: [(&str, Attempt); 4] = [
        ("rip-in-kernel", || {
            let _ = os::set_disposition(libc::SIGSEGV, libc::SIG_DFL);
            if os::set_handler(libc::SIGUSR1, corrupting_handler, 0, &[]).is_err() {
                return 100;
            }
            os::raise(libc::SIGUSR1);
            101
        }),
        ("rsp-non-canonical", || {
            let _ = os::set_disposition(libc::SIGSEGV, libc::SIG_DFL);
            let _ = os::set_disposition(libc::SIGBUS, libc::SIG_DFL);
            if os::set_handler(libc::SIGUSR1, stack_corrupting_handler, 0, &[]).is_err() {
                return 100;
            }
            os::raise(libc::SIGUSR1);
            101
        }),
        ("no-frame", || {
            let _ = os::set_disposition(libc::SIGSEGV, libc::SIG_DFL);
            os::sigreturn_from(16)
        }),
        ("no-restorer", || {
            let _ = os::set_disposition(libc::SIGSEGV, libc::SIG_DFL);
            if os::raw_sigaction(libc::SIGUSR1, counting_handler as *const () as usize, libc::SA_SIGINFO as u64, 0)
                .is_err()
            {
                return 100;
            }
            os::raise(libc::SIGUSR1);
            101
        }),
    ];
    for (name, attempt) in attempts {
        let child = fork(attempt)?;
        let ended = reap(child)?;
        // A stack fault on a non-canonical stack pointer is SIGBUS on Linux (#SS).
        if name == "rsp-non-canonical" && ended == Ended::Signaled(libc::SIGBUS) {
            continue;
        }
        expect(name, ended, Ended::Signaled(libc::SIGSEGV))?;
    }
    Ok("rip-in-kernel rsp-non-canonical no-frame no-restorer: SIGSEGV".into())
}

/// `setpgid`, `getpgid`, `setsid`, `getsid` under Linux's rules.
pub fn groups() -> Outcome {
    let me = os::getpid();
    let leads_session = os::getsid(0).map_err(errno_text)? == me;
    // A session leader cannot move; anyone else becomes a group leader.
    expect("setpgid(0, 0)", os::setpgid(0, 0), if leads_session { Err(libc::EPERM) } else { Ok(()) })?;
    expect("getpgrp", os::getpgrp(), me)?;
    expect("getpgid(0)", os::getpgid(0), Ok(me))?;
    expect("getpgid(me)", os::getpgid(me), Ok(me))?;
    expect("setsid as group leader", os::setsid(), Err(libc::EPERM))?;
    let session = os::getsid(0).map_err(errno_text)?;
    let member = fork(move || {
        let checks = [
            os::getpgrp() == me,
            os::getsid(0) == Ok(session),
            os::setpgid(0, 0).is_ok(),
            os::getpgrp() == os::getpid(),
            os::setsid() == Err(libc::EPERM),
        ];
        checks.iter().position(|ok| !ok).map_or(0, |index| 10 + index as i32)
    })?;
    expect("child leaving the group (exit = 10 + failed check)", reap(member)?, Ended::Exited(0))?;
    let leader = fork(|| {
        let pid = os::getpid();
        let checks = [
            os::setsid() == Ok(pid),
            os::getsid(0) == Ok(pid),
            os::getpgrp() == pid,
            os::setpgid(0, 0) == Err(libc::EPERM),
        ];
        checks.iter().position(|ok| !ok).map_or(0, |index| 10 + index as i32)
    })?;
    expect("child's setsid (exit = 10 + failed check)", reap(leader)?, Ended::Exited(0))?;
    let sleeper = fork(|| {
        os::sleep_ms(5000);
        0
    })?;
    let moved = [
        ("setpgid(child, child)", os::setpgid(sleeper, sleeper), Ok(())),
        ("getpgid(child)", os::getpgid(sleeper).map(drop), Ok(())),
        ("setpgid(child, me)", os::setpgid(sleeper, me), Ok(())),
        ("setpgid(child, no such group)", os::setpgid(sleeper, 0x7fff_fff0), Err(libc::EPERM)),
        ("setpgid(not a child)", os::setpgid(0x7fff_fff0, 0), Err(libc::ESRCH)),
        ("setpgid(-1, 0)", os::setpgid(-1, 0), Err(libc::EINVAL)),
        ("setpgid(-1, 5)", os::setpgid(-1, 5), Err(libc::ESRCH)),
        ("setpgid(0, -1)", os::setpgid(0, -1), Err(libc::EINVAL)),
    ];
    let _ = os::kill(sleeper, libc::SIGKILL);
    let _ = reap(sleeper);
    for (what, got, wanted) in moved {
        expect(what, got, wanted)?;
    }
    let (program, arguments): (&str, &[&str]) =
        if rt::on_reef() { ("/bin/busybox", &["sleep", "5"]) } else { ("/bin/sleep", &["5"]) };
    let execed = fork(|| os::exec(program, arguments))?;
    let started = Instant::now();
    let mut answer = Ok(());
    while started.elapsed() < Duration::from_secs(5) {
        answer = os::setpgid(execed, execed);
        if answer != Ok(()) {
            break;
        }
        os::sleep_ms(10);
    }
    let _ = os::kill(execed, libc::SIGKILL);
    let status = reap(execed)?;
    expect("setpgid after the child's execve", answer, Err(libc::EACCES))?;
    expect("execed child", status, Ended::Signaled(libc::SIGKILL))?;
    Ok(format!("pgid={me} session-leader={leads_session}"))
}

/// `kill(-group)` (or `kill(0)`) reaches a child `reef_spawn` started on another core and
/// one on this core (both joined the caller's group), and the caller; `wait4` by group reaps
/// them. Before that, the same across cores for a group of their own: the parent moves the
/// remote child into a new group (its home does it) and the local child into that group,
/// which only the other core knows.
pub fn kill_group() -> Outcome {
    let (Some(here), Some(cores)) = (rt::current_core(), rt::instance_count()) else {
        return Ok("skipped (needs reef_spawn)".into());
    };
    let there = (here + 1) % cores.max(1);
    install(libc::SIGUSR2, counting_handler, 0)?;
    let spawn = |core| {
        rt::spawn(core, "/bin/busybox", &["sleep", "30"], &[])
            .map(|pid| pid.as_raw())
            .map_err(|e| format!("spawn on {core}: {e}"))
    };
    let group = os::getpgrp();
    // A group of their own, spread over two cores.
    let (remote, local) = (spawn(there)?, spawn(here)?);
    let moves = [
        ("remote child's group", os::getpgid(remote), Ok(group)),
        ("local child's group", os::getpgid(local), Ok(group)),
        ("remote child's session", os::getsid(remote), os::getsid(0)),
        ("setpgid(remote, remote)", os::setpgid(remote, remote).map(|()| 0), Ok(0)),
        ("remote child's new group", os::getpgid(remote), Ok(remote)),
        ("setpgid(local, remote's group)", os::setpgid(local, remote).map(|()| 0), Ok(0)),
        ("local child's new group", os::getpgid(local), Ok(remote)),
    ];
    let sent = os::kill(-remote, libc::SIGUSR2);
    let reaped = [os::wait_once(-remote, 0), os::wait_once(-remote, 0)];
    for (what, got, wanted) in moves {
        expect(what, got, wanted)?;
    }
    sent.map_err(|e| format!("kill(-{remote}): {}", errno_text(e)))?;
    let mut reaped = reaped.map(|result| result.map(|(pid, status)| (pid, ended(status))));
    reaped.sort();
    let mut wanted = [Ok((remote, Ended::Signaled(libc::SIGUSR2))), Ok((local, Ended::Signaled(libc::SIGUSR2)))];
    wanted.sort();
    expect("children of the moved group", reaped, wanted)?;
    expect("the caller's handler (not in that group)", count(libc::SIGUSR2), 0)?;
    // The caller's own group.
    let (remote, local) = (spawn(there)?, spawn(here)?);
    // Group 1 (the first process of core 0 leads it) cannot be named as -1, which means
    // every process: kill(0) names the caller's group.
    let sent = os::kill(if group == 1 { 0 } else { -group }, libc::SIGUSR2);
    let first = os::wait_once(0, 0);
    let second = os::wait_once(-group, 0);
    sent.map_err(|e| format!("kill(-{group}): {}", errno_text(e)))?;
    let mut reaped = [first, second].map(|result| result.map(|(pid, status)| (pid, ended(status))));
    reaped.sort();
    let mut wanted = [Ok((remote, Ended::Signaled(libc::SIGUSR2))), Ok((local, Ended::Signaled(libc::SIGUSR2)))];
    wanted.sort();
    expect("children", reaped, wanted)?;
    expect("the caller's handler", count(libc::SIGUSR2), 1)?;
    expect("nobody in a dead group", os::kill(-remote, libc::SIGUSR2), Err(libc::ESRCH))?;
    Ok(format!("cores={here},{there}"))
}

/// Every way a process can die of a signal reports that signal in its wait status, as Linux
/// does (issue 27: a shell killed by its own SIGPIPE reported 0). Each child dies one way:
/// a write to a pipe nobody reads, while running and while parked on a full pipe when the
/// last reader goes; its own `kill`; a `kill` from a thread of its own; a signal taken when a
/// handler returns (blocked by the handler's `sa_mask` until then); a SIGTERM while parked in
/// a pipe read (the file service's wait); `abort`; a fault.
pub fn death_statuses() -> Outcome {
    /// Runs in a child: SIGPIPE back to its default (Rust's runtime ignores it), and the
    /// signal the child dies of must come before `ALIVE`.
    const ALIVE: i32 = 99;
    fn pipe_default() {
        let _ = os::set_disposition(libc::SIGPIPE, libc::SIG_DFL);
    }
    extern "C" fn raise_second(_: c_int, _: *mut libc::siginfo_t, _: *mut c_void) {
        // Blocked by the handler's sa_mask: pending until the handler returns.
        os::raise(libc::SIGUSR2);
    }
    let mut seen = Vec::new();
    let mut check = |what: &str, child: i32, wanted: c_int| -> Result<(), String> {
        expect(what, reap(child)?, Ended::Signaled(wanted))?;
        seen.push(wanted.to_string());
        Ok(())
    };
    let running = fork(|| {
        pipe_default();
        let Ok((reader, writer)) = os::pipe() else { return 100 };
        os::close(reader);
        let _ = os::write_byte(writer, b'x');
        ALIVE
    })?;
    check("write to a pipe nobody reads", running, libc::SIGPIPE)?;

    let (reader, writer) = os::pipe().map_err(errno_text)?;
    let parked = fork(move || {
        pipe_default();
        os::close(reader);
        let block = [b'y'; 4096];
        loop {
            // SAFETY: `block` is live for the call.
            if unsafe { libc::write(writer, block.as_ptr().cast(), block.len()) } < 0 {
                return ALIVE;
            }
        }
    })?;
    os::close(writer);
    // The writer has begun; it fills the pipe and parks.
    let first = os::read_byte_within(reader, 5000);
    os::sleep_ms(200);
    os::close(reader);
    expect("first byte from the writer", first, Ok(Some(b'y')))?;
    check("writer parked on a full pipe when the reader goes", parked, libc::SIGPIPE)?;

    let own = fork(|| {
        let _ = os::kill(os::getpid(), libc::SIGTERM);
        ALIVE
    })?;
    check("kill of itself", own, libc::SIGTERM)?;

    let by_thread = fork(|| {
        let pid = os::getpid();
        let killer = std::thread::spawn(move || os::kill(pid, libc::SIGUSR1));
        let _ = killer.join();
        loop {
            os::pause();
        }
    })?;
    check("kill from a thread of its own", by_thread, libc::SIGUSR1)?;

    let at_return = fork(|| {
        if os::set_handler(libc::SIGUSR1, raise_second, 0, &[libc::SIGUSR2]).is_err() {
            return 100;
        }
        os::raise(libc::SIGUSR1);
        ALIVE
    })?;
    check("signal taken as a handler returns", at_return, libc::SIGUSR2)?;

    let (reader, writer) = os::pipe().map_err(errno_text)?;
    let reading = fork(move || {
        let mut byte = 0u8;
        // SAFETY: one byte into `byte`, live for the call.
        unsafe { libc::read(reader, (&raw mut byte).cast(), 1) };
        ALIVE
    })?;
    os::sleep_ms(100);
    let sent = os::kill(reading, libc::SIGTERM);
    let outcome = check("SIGTERM while parked in a pipe read", reading, libc::SIGTERM);
    os::close(reader);
    os::close(writer);
    sent.map_err(errno_text)?;
    outcome?;

    let aborted = fork(|| {
        // SAFETY: abort ends the process; nothing of ours runs after it.
        unsafe { libc::abort() }
    })?;
    check("abort", aborted, libc::SIGABRT)?;

    let faulted = fork(|| {
        // An address in page 0, which no process maps: the write faults on purpose.
        let unmapped = std::ptr::without_provenance_mut::<u64>(8);
        // SAFETY: none: the write faults, which is the case; it never completes.
        unsafe { std::ptr::write_volatile(unmapped, 1) };
        ALIVE
    })?;
    check("a fault", faulted, libc::SIGSEGV)?;
    Ok(format!("signaled={}", seen.join(",")))
}

/// `si_code` of a signal the kernel sent (an expired timer) [Linux include/uapi/asm-generic/siginfo.h].
const SI_KERNEL: i32 = 0x80;

/// `alarm` and `setitimer(ITIMER_REAL)`: `alarm` returns the seconds the last timer had left;
/// a one-shot timer's SIGALRM (`SI_KERNEL`) cuts a sleep short; a periodic one fires again and
/// again, `getitimer` reads it running, and once disarmed nothing more comes.
pub fn real_timer() -> Outcome {
    let ms = Duration::from_millis;
    install(libc::SIGALRM, counting_handler, libc::SA_RESTART)?;
    expect("alarm with none armed", os::alarm(5), 0)?;
    expect("alarm(0) after alarm(5)", os::alarm(0), 5)?;
    os::set_real_timer(ms(50), Duration::ZERO).map_err(errno_text)?;
    let slept = os::nanosleep(Duration::from_secs(5)).map_err(|(error, _)| error);
    expect("sleep cut short", slept.map_err(errno_text), Err(errno_text(libc::EINTR)))?;
    expect("one SIGALRM", count(libc::SIGALRM), 1)?;
    expect("si_code", LAST_CODE.load(Ordering::Relaxed), SI_KERNEL)?;
    expect(
        "one-shot timer disarmed",
        os::timer(libc::ITIMER_REAL).map_err(errno_text)?,
        (Duration::ZERO, Duration::ZERO),
    )?;
    os::set_real_timer(ms(30), ms(30)).map_err(errno_text)?;
    let started = Instant::now();
    while count(libc::SIGALRM) < 5 && started.elapsed() < Duration::from_secs(5) {
        os::sleep_ms(10);
    }
    let (value, interval) = os::timer(libc::ITIMER_REAL).map_err(errno_text)?;
    let (old_value, old_interval) = os::set_real_timer(Duration::ZERO, Duration::ZERO).map_err(errno_text)?;
    let fired = count(libc::SIGALRM);
    if fired < 5 {
        return Err(format!("the periodic timer fired {} times in 5 s", fired - 1));
    }
    expect("interval read back", interval, ms(30))?;
    if value.is_zero() || value > ms(30) || old_value.is_zero() || old_value > ms(30) {
        return Err(format!("a running timer reads {value:?}, then {old_value:?} (0 < value <= 30 ms)"));
    }
    expect("previous interval", old_interval, ms(30))?;
    os::sleep_ms(100);
    expect("no SIGALRM once disarmed", count(libc::SIGALRM), fired)?;
    Ok(format!("alarm-left=5 eintr periodic={} disarmed", fired - 1))
}

/// `rt_sigtimedwait` takes a blocked signal without running its handler: `EAGAIN` when none
/// comes in time, a child's SIGUSR1 (`SI_USER`, its pid) with the mask unchanged, and a
/// SIGALRM whose default action would end the process (as CPython's `test_sigtimedwait` does).
pub fn timed_wait() -> Outcome {
    let ms = Duration::from_millis;
    install(libc::SIGUSR1, counting_handler, 0)?;
    let waited = bit(libc::SIGUSR1) | bit(libc::SIGALRM);
    os::change_mask(libc::SIG_BLOCK, waited).map_err(errno_text)?;
    let started = Instant::now();
    let nothing = os::timed_wait(bit(libc::SIGUSR1), Some(ms(50))).map_err(errno_text);
    expect("nothing pending", nothing, Err(errno_text(libc::EAGAIN)))?;
    if started.elapsed() < ms(45) {
        return Err(format!("EAGAIN after {:?}, before the 50 ms timeout", started.elapsed()));
    }
    let child = signal_parent_later(libc::SIGUSR1, 50, 0, 0)?;
    let taken = os::timed_wait(bit(libc::SIGUSR1), Some(Duration::from_secs(5))).map_err(errno_text);
    expect("child", reap(child)?, Ended::Exited(0))?;
    expect("taken", taken, Ok((libc::SIGUSR1, 0, child)))?;
    expect("handler not run", count(libc::SIGUSR1), 0)?;
    expect("mask unchanged", os::mask() & waited, waited)?;
    os::set_real_timer(ms(30), Duration::ZERO).map_err(errno_text)?;
    let alarm = os::timed_wait(bit(libc::SIGALRM), Some(Duration::from_secs(5))).map_err(errno_text);
    expect("SIGALRM taken", alarm, Ok((libc::SIGALRM, SI_KERNEL, 0)))?;
    Ok("EAGAIN taken-from-child default-action-alarm".into())
}
