//! Unix signals: dispositions, masks, pending sets, sending, delivery.
//!
//! A process holds 64 dispositions and a pending set for signals sent to it; each thread holds
//! its blocked mask, a pending set for signals sent to it alone (`tkill`), and its alternate
//! stack. One instance of each signal can be pending (a second `kill` of a pending signal is
//! lost, as for Linux's standard signals; realtime signals are not queued beyond that).
//!
//! Sending (`post`) decides at once what can be decided: SIGKILL, and a signal whose action
//! is to end the process, end it (every thread leaves at its next return to ring 3); an
//! ignored signal is dropped; a caught one becomes pending and wakes a thread that can take it
//! from an interruptible wait (`sched::Wakeup::Interrupted`). Delivery (`deliver`) runs on
//! every return to ring 3 that finds a pending, unblocked signal: it builds Linux's signal
//! frame on the user stack (`arch::signal`) and enters the handler. A system call the signal
//! interrupted returns `EINTR`, or runs again after the handler when it may be restarted
//! (`RESTART_SYSCALL` and `SA_RESTART`).

use super::{Errno, Process};
use crate::arch::idt::InterruptFrame;
use crate::arch::signal::{AlternateStack, HandlerEntry, SignalInfo};
use crate::arch::user::FpuState;
use crate::core::shared;
use crate::proc::ThreadExt;
use crate::sched::{self, Thread};
use abi::message::{handler, IccStatus, ICC_ARGUMENTS};
use abi::signal::{SignalCode, SignalRequest, SignalTarget, MAX_SIGNAL};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;

/// Linux signal numbers [Linux arch/x86/include/uapi/asm/signal.h] (those the kernel names).
pub const SIGQUIT: u32 = 3;
pub const SIGILL: u32 = 4;
pub const SIGTRAP: u32 = 5;
pub const SIGABRT: u32 = 6;
pub const SIGBUS: u32 = 7;
pub const SIGFPE: u32 = 8;
pub const SIGKILL: u32 = 9;
pub const SIGSEGV: u32 = 11;
pub const SIGALRM: u32 = 14;
pub const SIGCHLD: u32 = 17;
pub const SIGCONT: u32 = 18;
pub const SIGSTOP: u32 = 19;
pub const SIGTSTP: u32 = 20;
pub const SIGTTIN: u32 = 21;
pub const SIGTTOU: u32 = 22;
pub const SIGURG: u32 = 23;
pub const SIGXCPU: u32 = 24;
pub const SIGXFSZ: u32 = 25;
pub const SIGWINCH: u32 = 28;
pub const SIGSYS: u32 = 31;

/// A set of signals: bit `n - 1` is signal `n`, as in Linux's `sigset_t`.
pub type SignalSet = u64;

/// The set holding only `signal` (1 to 64).
pub const fn bit(signal: u32) -> SignalSet {
    1 << (signal - 1)
}

/// Signals no mask blocks and no handler catches.
pub const UNBLOCKABLE: SignalSet = bit(SIGKILL) | bit(SIGSTOP);

/// `sa_handler` values.
pub const SIG_DFL: u64 = 0;
pub const SIG_IGN: u64 = 1;

/// `sa_flags` bits [Linux arch/x86/include/uapi/asm/signal.h].
pub const SA_NOCLDSTOP: u64 = 0x1;
pub const SA_NOCLDWAIT: u64 = 0x2;
pub const SA_RESTORER: u64 = 0x0400_0000;
pub const SA_ONSTACK: u64 = 0x0800_0000;
pub const SA_RESTART: u64 = 0x1000_0000;
pub const SA_NODEFER: u64 = 0x4000_0000;
pub const SA_RESETHAND: u64 = 0x8000_0000;

/// The wait-status bit of a process that "dumped core" (Reef writes no core file).
pub const CORE_DUMPED: u32 = 0x80;

/// Internal errnos of an interrupted system call, never seen by a program: the system-call
/// return turns them into `EINTR` or a restart [Linux include/linux/errno.h].
/// `ERESTARTSYS`: run the call again after a handler with `SA_RESTART`, or when no handler ran.
pub const RESTART_SYSCALL: Errno = 512;
/// `ERESTARTNOHAND`: run the call again only when no handler ran (`pause`, `rt_sigsuspend`).
pub const RESTART_NO_HANDLER: Errno = 514;
/// `ERESTART_RESTARTBLOCK`: when no handler ran, run `restart_syscall` instead, which
/// finishes what the thread's restart record says (a sleep a move cut short).
pub const RESTART_BLOCK: Errno = 516;
/// Linux's `restart_syscall`.
const SYS_RESTART_SYSCALL: u64 = 219;

/// What a blocking call that may run again (`read`, `write`, `wait4`, `futex` without a
/// timeout) returns when `sched::block` answered `Wakeup::Interrupted` (or `Killed`): the
/// call then fails with `EINTR`, or is restarted after the handler when it has `SA_RESTART`.
/// A call that must not restart (`poll`, `nanosleep`) returns plain `EINTR` instead.
pub fn interrupted_errno() -> Errno {
    RESTART_SYSCALL
}

/// Whether `error` is one of the internal restart errnos.
pub fn is_restart(error: Errno) -> bool {
    error == RESTART_SYSCALL || error == RESTART_NO_HANDLER || error == RESTART_BLOCK
}

/// A disposition, as `rt_sigaction` reads and writes it (`struct kernel_sigaction` of x86-64:
/// handler, flags, restorer, mask).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Action {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: SignalSet,
}

/// What a signal does to a process whose disposition is `SIG_DFL` [Linux signal(7)].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DefaultAction {
    Terminate,
    /// Terminate with the core-dump bit in the wait status.
    Core,
    /// Stop the process until a SIGCONT.
    Stop,
    /// Nothing (SIGCONT's continuing is done when it is sent, whatever its disposition).
    Ignore,
}

/// The signals that stop a process by default.
pub const STOP_SIGNALS: SignalSet = bit(SIGSTOP) | bit(SIGTSTP) | bit(SIGTTIN) | bit(SIGTTOU);

fn default_action(signal: u32) -> DefaultAction {
    if STOP_SIGNALS & bit(signal) != 0 {
        return DefaultAction::Stop;
    }
    if IGNORED_BY_DEFAULT & bit(signal) != 0 {
        return DefaultAction::Ignore;
    }
    match signal {
        SIGQUIT | SIGILL | SIGTRAP | SIGABRT | SIGBUS | SIGFPE | SIGSEGV | SIGXCPU | SIGXFSZ | SIGSYS => {
            DefaultAction::Core
        }
        _ => DefaultAction::Terminate,
    }
}

/// Signals whose default action is to do nothing.
const IGNORED_BY_DEFAULT: SignalSet = bit(SIGCHLD) | bit(SIGCONT) | bit(SIGURG) | bit(SIGWINCH);

/// What taking a signal with `action` comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ignore,
    /// The process ends with this wait status.
    End(u32),
    /// The process stops until a SIGCONT.
    Stop,
    Handler,
}

fn outcome(signal: u32, action: &Action) -> Outcome {
    match action.handler {
        SIG_IGN => Outcome::Ignore,
        SIG_DFL => match default_action(signal) {
            DefaultAction::Terminate => Outcome::End(signal),
            DefaultAction::Core => Outcome::End(signal | CORE_DUMPED),
            DefaultAction::Stop => Outcome::Stop,
            DefaultAction::Ignore => Outcome::Ignore,
        },
        _ => Outcome::Handler,
    }
}

/// Signals pending for a process or a thread, with the `siginfo` each was sent with.
pub struct Pending {
    /// The set, readable without the lock (the return to ring 3 looks at it every time);
    /// changed only with `info` locked.
    bits: AtomicU64,
    info: Mutex<[SignalInfo; MAX_SIGNAL as usize]>,
}

impl Pending {
    fn new() -> Self {
        Self { bits: AtomicU64::new(0), info: Mutex::new([SignalInfo::default(); MAX_SIGNAL as usize]) }
    }

    /// The pending set.
    pub fn set(&self) -> SignalSet {
        self.bits.load(Ordering::Relaxed)
    }

    /// Every pending signal with its `siginfo` (a process moving to another core takes them).
    pub(super) fn entries(&self) -> Vec<SignalInfo> {
        let table = self.info.lock();
        let bits = self.bits.load(Ordering::Relaxed);
        (1..=MAX_SIGNAL).filter(|&signal| bits & bit(signal) != 0).map(|signal| table[signal as usize - 1]).collect()
    }

    /// Marks `info.signal` pending; a signal already pending keeps its first `siginfo`.
    pub(super) fn add(&self, info: SignalInfo) {
        let mut table = self.info.lock();
        let bit = bit(info.signal);
        if self.bits.load(Ordering::Relaxed) & bit == 0 {
            table[info.signal as usize - 1] = info;
            self.bits.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Takes `signal` out of the set, with its `siginfo`, if it was pending.
    fn take(&self, signal: u32) -> Option<SignalInfo> {
        let table = self.info.lock();
        let bit = bit(signal);
        (self.bits.fetch_and(!bit, Ordering::Relaxed) & bit != 0).then(|| table[signal as usize - 1])
    }

    /// Drops every signal of `set`.
    fn discard(&self, set: SignalSet) {
        let _table = self.info.lock();
        self.bits.fetch_and(!set, Ordering::Relaxed);
    }
}

/// A process's signal state.
pub struct ProcessSignals {
    actions: Mutex<[Action; MAX_SIGNAL as usize]>,
    /// Signals whose disposition is now to do nothing (`SIG_IGN`, or `SIG_DFL` of a signal
    /// ignored by default), kept with `actions` for the lock-free checks of `sched::block`.
    ignored: AtomicU64,
    /// Signals sent to the process (any of its threads may take them).
    pub pending: Pending,
}

impl ProcessSignals {
    /// Every signal at its default action, nothing pending.
    pub fn new() -> Self {
        Self::with_actions([Action::default(); MAX_SIGNAL as usize])
    }

    /// Dispositions `actions`, nothing pending (a fork, or a process moving in).
    pub(super) fn with_actions(actions: [Action; MAX_SIGNAL as usize]) -> Self {
        let ignored = ignored_set(&actions);
        Self { actions: Mutex::new(actions), ignored: AtomicU64::new(ignored), pending: Pending::new() }
    }

    /// A forked child's: the same dispositions, nothing pending.
    pub fn copy_for_fork(&self) -> Self {
        Self::with_actions(*self.actions.lock())
    }

    /// At `execve`: caught signals go back to their default action (the handlers are gone
    /// with the old program); ignored ones stay ignored; pending ones stay pending.
    pub fn reset_for_exec(&self) {
        let mut actions = self.actions.lock();
        for action in actions.iter_mut() {
            *action = if action.handler == SIG_IGN {
                Action { handler: SIG_IGN, ..Action::default() }
            } else {
                Action::default()
            };
        }
        self.ignored.store(ignored_set(&actions), Ordering::Relaxed);
    }

    /// Every disposition, signal 1 first.
    pub(super) fn actions(&self) -> [Action; MAX_SIGNAL as usize] {
        *self.actions.lock()
    }

    /// The disposition of `signal` (1 to 64).
    pub fn action(&self, signal: u32) -> Action {
        self.actions.lock()[signal as usize - 1]
    }

    /// Sets the disposition of `signal` (not SIGKILL or SIGSTOP); returns the previous one.
    /// A signal now ignored is dropped from every pending set of the process, as on Linux.
    fn set_action(&self, signal: u32, action: Action, threads: &[Arc<Thread>]) -> Action {
        let previous = {
            let mut actions = self.actions.lock();
            let previous = core::mem::replace(&mut actions[signal as usize - 1], action);
            self.ignored.store(ignored_set(&actions), Ordering::Relaxed);
            previous
        };
        if outcome(signal, &action) == Outcome::Ignore {
            self.pending.discard(bit(signal));
            for thread in threads {
                thread.part().signals.pending.discard(bit(signal));
            }
        }
        previous
    }

    /// Signals now ignored.
    pub fn ignored(&self) -> SignalSet {
        self.ignored.load(Ordering::Relaxed)
    }
}

impl Default for ProcessSignals {
    fn default() -> Self {
        Self::new()
    }
}

fn ignored_set(actions: &[Action; MAX_SIGNAL as usize]) -> SignalSet {
    (1..=MAX_SIGNAL)
        .filter(|&signal| outcome(signal, &actions[signal as usize - 1]) == Outcome::Ignore)
        .fold(0, |set, signal| set | bit(signal))
}

/// `saved_mask` when no mask waits to be put back.
const NO_SAVED_MASK: SignalSet = u64::MAX;

/// A thread's signal state.
pub struct ThreadSignals {
    /// The blocked mask (never holds SIGKILL or SIGSTOP).
    pub blocked: AtomicU64,
    /// Signals sent to this thread alone (`tkill`, `tgkill`, SIGPIPE).
    pub pending: Pending,
    /// The mask `rt_sigsuspend` replaced, put back when a handler's frame saved it (or when
    /// none ran); [`NO_SAVED_MASK`] when none. (u64::MAX is never a mask: SIGKILL is unblockable.)
    saved_mask: AtomicU64,
    /// `sigaltstack`.
    pub alternate_stack: Mutex<AlternateStack>,
    /// The signals `rt_sigtimedwait` waits for (0: none): one of them wakes the thread
    /// instead of running its action, even while blocked (Linux's `real_blocked`).
    waiting_for: AtomicU64,
}

impl ThreadSignals {
    /// A thread with `blocked` and no alternate stack.
    pub fn new(blocked: SignalSet) -> Self {
        Self::with_stack(blocked, AlternateStack { flags: AlternateStack::DISABLE, ..AlternateStack::default() })
    }

    /// A thread with `blocked` and `alternate_stack`, nothing pending.
    pub(super) fn with_stack(blocked: SignalSet, alternate_stack: AlternateStack) -> Self {
        Self {
            blocked: AtomicU64::new(blocked & !UNBLOCKABLE),
            pending: Pending::new(),
            saved_mask: AtomicU64::new(NO_SAVED_MASK),
            alternate_stack: Mutex::new(alternate_stack),
            waiting_for: AtomicU64::new(0),
        }
    }

    /// The forked copy of this thread's: the same mask and alternate stack, nothing pending.
    pub fn copy_for_fork(&self) -> Self {
        Self::with_stack(self.blocked.load(Ordering::Relaxed), *self.alternate_stack.lock())
    }

    /// A new thread's (`clone`): the creator's mask, no alternate stack, nothing pending.
    pub fn copy_for_thread(&self) -> Self {
        Self::new(self.blocked.load(Ordering::Relaxed))
    }

    fn take_saved_mask(&self) -> Option<SignalSet> {
        Some(self.saved_mask.swap(NO_SAVED_MASK, Ordering::Relaxed)).filter(|&mask| mask != NO_SAVED_MASK)
    }
}

/// Whether `thread` of `process` has a pending signal it does not block and that would do
/// something (run a handler or end the process): what interrupts its waits.
pub fn would_interrupt(thread: &Thread, process: &Process) -> bool {
    let signals = &thread.part().signals;
    let pending = signals.pending.set() | process.signals.pending.set();
    let acted_on = !signals.blocked.load(Ordering::Relaxed) & !process.signals.ignored();
    pending & (acted_on | signals.waiting_for.load(Ordering::Relaxed)) != 0
}

/// Whether the return to ring 3 of `thread` has signal work: a pending signal it does not
/// block, or a mask to put back.
pub fn needs_delivery(thread: &Thread) -> bool {
    let Some(process) = thread.part().process.as_ref() else { return false };
    let pending = thread.part().signals.pending.set() | process.signals.pending.set();
    pending & !thread.part().signals.blocked.load(Ordering::Relaxed) != 0
        || thread.part().signals.saved_mask.load(Ordering::Relaxed) != NO_SAVED_MASK
        || process.is_stopped()
}

/// Makes `info.signal` pending for `process` (or only its `thread`), or acts at once: SIGKILL
/// and a signal whose action is to end the process end it; an ignored signal that no thread
/// blocks is dropped. A signal that will run a handler wakes a thread that can take it.
fn post(process: &Process, thread: Option<&Arc<Thread>>, info: SignalInfo) {
    let signal = info.signal;
    if signal == 0 || process.is_killed() {
        return;
    }
    if signal == SIGKILL {
        process.doom(SIGKILL);
        return;
    }
    let bit = bit(signal);
    // A stop and a continue cancel each other's pending signals; SIGCONT continues the
    // process whatever its disposition, before any handler runs [Linux kernel/signal.c
    // prepare_signal].
    let cancelled = if signal == SIGCONT {
        STOP_SIGNALS
    } else if STOP_SIGNALS & bit != 0 {
        self::bit(SIGCONT)
    } else {
        0
    };
    if cancelled != 0 {
        process.signals.pending.discard(cancelled);
        for thread in sched::threads_of(process.pid) {
            thread.part().signals.pending.discard(cancelled);
        }
    }
    if signal == SIGCONT {
        super::continue_process(process);
    }
    let threads = match thread {
        Some(thread) => alloc::vec![thread.clone()],
        None => sched::threads_of(process.pid),
    };
    // A thread in `rt_sigtimedwait` for it takes it as it is, whatever its action.
    let waiters: Vec<Arc<Thread>> =
        threads.iter().filter(|t| t.part().signals.waiting_for.load(Ordering::Relaxed) & bit != 0).cloned().collect();
    if !waiters.is_empty() {
        match thread {
            Some(thread) => thread.part().signals.pending.add(info),
            None => process.signals.pending.add(info),
        }
        sched::interrupt_one(&waiters);
        return;
    }
    let takers: Vec<Arc<Thread>> =
        threads.iter().filter(|t| t.part().signals.blocked.load(Ordering::Relaxed) & bit == 0).cloned().collect();
    // Blocked everywhere, a signal waits even if ignored: the disposition may change before
    // it is unblocked [Linux kernel/signal.c sig_ignored].
    let blocked = takers.is_empty() && !threads.is_empty();
    let action = process.signals.action(signal);
    let outcome = outcome(signal, &action);
    if outcome == Outcome::Ignore && !blocked {
        return;
    }
    match thread {
        Some(thread) => thread.part().signals.pending.add(info),
        None => process.signals.pending.add(info),
    }
    if blocked {
        return;
    }
    match outcome {
        Outcome::End(status) => process.doom(status),
        // A thread that takes it stops the process as it returns to ring 3.
        Outcome::Handler | Outcome::Stop => sched::interrupt_one(&takers),
        Outcome::Ignore => {}
    }
}

/// SIGCHLD for `parent`: its child `child` ended with `wait_status`.
pub(super) fn post_child_exit(parent: &Process, child: u32, wait_status: u32) {
    // CLD_EXITED, CLD_KILLED, CLD_DUMPED, CLD_STOPPED, CLD_CONTINUED
    // [Linux include/uapi/asm-generic/siginfo.h].
    let (code, status) = match wait_status & 0x7f {
        _ if wait_status == super::CONTINUED_STATUS => (6, SIGCONT),
        0x7f => (5, (wait_status >> 8) & 0xff),
        0 => (1, (wait_status >> 8) & 0xff),
        signal if wait_status & CORE_DUMPED != 0 => (3, signal),
        signal => (2, signal),
    };
    post(parent, None, SignalInfo { signal: SIGCHLD, code, pid: child, uid: 0, status: status as i32 });
}

/// The `siginfo` of a signal sent by `sender` with `code`.
fn sent_info(signal: u32, sender: u32, code: SignalCode) -> SignalInfo {
    SignalInfo { signal, code: code.number(), pid: sender, uid: 0, status: 0 }
}

/// What a signal did on one instance: the processes it reached, and those it was not
/// allowed to (kill(2)'s `EPERM`).
#[derive(Clone, Copy, Default)]
struct Delivery {
    reached: usize,
    refused: usize,
}

impl Delivery {
    /// As an ICC result: reached in the low half, refused in the high half.
    fn to_word(self) -> u64 {
        (self.reached as u64 & 0xffff_ffff) | (self.refused as u64) << 32
    }

    fn from_word(word: u64) -> Self {
        Self { reached: (word & 0xffff_ffff) as usize, refused: (word >> 32) as usize }
    }

    fn plus(self, other: Self) -> Self {
        Self { reached: self.reached + other.reached, refused: self.refused + other.refused }
    }
}

/// Whether `request`'s sender may signal `process`: a kernel's signals always go; a
/// process's need its real or effective user id to be the target's real or saved one, or
/// its effective id 0, except SIGCONT within its session (Linux's `check_kill_permission`).
fn may_signal(request: &SignalRequest, process: &Process) -> bool {
    if request.code == SignalCode::Kernel {
        return true;
    }
    let ids = process.credentials.lock().ids;
    request.sender_ids.may_signal(ids.real_uid, ids.saved_uid)
        || (request.signal == SIGCONT
            && super::find(request.sender).is_some_and(|sender| sender.session() == process.session()))
}

/// Posts `info` to `process` (its thread `thread`) if `request`'s sender may signal it.
fn post_checked(
    request: &SignalRequest,
    process: &Process,
    thread: Option<&Arc<Thread>>,
    info: SignalInfo,
) -> Delivery {
    if may_signal(request, process) {
        post(process, thread, info);
        Delivery { reached: 1, refused: 0 }
    } else {
        Delivery { reached: 0, refused: 1 }
    }
}

/// Sends the signal of `request` to the processes of this instance it names, those its sender
/// may signal; says how many it reached and refused (signal 0 sends nothing: the count says
/// who exists).
fn send_here(request: &SignalRequest) -> Delivery {
    let info = sent_info(request.signal, request.sender, request.code);
    match request.target {
        // A thread id names its process too, as on Linux.
        SignalTarget::Process(pid) => {
            let process = super::find(pid).or_else(|| sched::find_thread(pid).and_then(|t| t.part().process.clone()));
            process.map_or(Delivery::default(), |process| post_checked(request, &process, None, info))
        }
        SignalTarget::Thread { thread, process } => {
            let found = sched::find_thread(thread)
                .filter(|t| t.part().process.as_ref().is_some_and(|p| process == 0 || p.pid == process));
            match found.and_then(|thread| Some((thread.part().process.clone()?, thread))) {
                Some((owner, thread)) => post_checked(request, &owner, Some(&thread), info),
                None => Delivery::default(),
            }
        }
        SignalTarget::Group(group) => each_local(request, |p| p.process_group() == group, info),
        SignalTarget::AllButInitAndSender => each_local(request, |p| p.pid != 1 && p.pid != request.sender, info),
        SignalTarget::ParentDied(child) => {
            let orphan = super::find(child).filter(|p| p.parent.pid == request.sender);
            match orphan.map(|p| (p.death_signal(), p)) {
                Some((signal, orphan)) if signal != 0 => {
                    post(&orphan, None, sent_info(signal, request.sender, SignalCode::User));
                    Delivery { reached: 1, refused: 0 }
                }
                _ => Delivery::default(),
            }
        }
    }
}

fn each_local(request: &SignalRequest, chosen: impl Fn(&Process) -> bool, info: SignalInfo) -> Delivery {
    let targets: Vec<Arc<Process>> = super::all().into_iter().filter(|p| chosen(p)).collect();
    let mut delivery = Delivery::default();
    for process in &targets {
        // `kill(-1)` skips, rather than counts, the processes it may not signal (Linux).
        if request.target == SignalTarget::AllButInitAndSender && !may_signal(request, process) {
            continue;
        }
        delivery = delivery.plus(post_checked(request, process, None, info));
    }
    delivery
}

/// How many times a signal for one process follows it when it moved meanwhile.
const MOVED_RETRIES: usize = 3;

/// Sends `request` where it must go: the home of a process or thread, or every live instance
/// for a group or everyone (this one first, then one inter-core call to each other); says
/// how many processes it reached and how many its sender may not signal.
fn send(request: SignalRequest) -> Result<Delivery, Errno> {
    if request.signal > MAX_SIGNAL {
        return Err(errno::EINVAL);
    }
    let here = shared::this_core() as usize;
    let home = || match request.target {
        SignalTarget::Process(pid) => Some(super::home_of(pid)),
        SignalTarget::Thread { thread, .. } => Some(super::home_of(thread)),
        SignalTarget::ParentDied(child) => Some(super::home_of(child)),
        SignalTarget::Group(_) | SignalTarget::AllButInitAndSender => None,
    };
    let to_one = |core: usize| match core {
        core if core == here => send_here(&request),
        core if core >= crate::msg::messaging_cores() => Delivery::default(),
        core => call_signal(core, &request),
    };
    match home() {
        // A process that moved between the look and the call is found no more where it was,
        // after it let go there: ask where it lives now (a few times, should it move on).
        Some(mut core) => {
            let mut delivery = to_one(core);
            for _ in 0..MOVED_RETRIES {
                match home() {
                    Some(now) if delivery.reached + delivery.refused == 0 && now != core => core = now,
                    _ => break,
                }
                delivery = to_one(core);
            }
            Ok(delivery)
        }
        None => {
            let mut delivery = send_here(&request);
            for core in (0..crate::msg::messaging_cores()).filter(|&c| c != here && crate::msg::is_reachable(c)) {
                delivery = delivery.plus(call_signal(core, &request));
            }
            Ok(delivery)
        }
    }
}

/// One `SIGNAL` call to `core`; a core that does not answer reached nobody.
fn call_signal(core: usize, request: &SignalRequest) -> Delivery {
    match crate::msg::icc::call(core, handler::SIGNAL, request.encode(), crate::msg::SEND_TIMEOUT_MS) {
        Ok(word) => Delivery::from_word(word),
        Err(error) => {
            log::debug!("signal {} for core {core} not delivered: {error}", request.signal);
            Delivery::default()
        }
    }
}

/// ICC handler `SIGNAL`: a signal from another instance for processes homed here.
pub fn signal_handler(arguments: &[u64; ICC_ARGUMENTS]) -> Result<u64, IccStatus> {
    let request = SignalRequest::decode(arguments).map_err(|_| IccStatus::BadArguments)?;
    Ok(send_here(&request).to_word())
}

/// The caller of a system call, as a sender of signals.
fn calling_process() -> u32 {
    crate::proc::with_current_process(|p| p.pid).unwrap_or(0)
}

/// The caller's real and effective user ids, which its signals are checked with.
fn calling_ids() -> abi::signal::SenderIds {
    crate::proc::with_current_process(|p| {
        let ids = p.credentials.lock().ids;
        abi::signal::SenderIds { real_uid: ids.real_uid, effective_uid: ids.effective_uid }
    })
    .unwrap_or(abi::signal::SenderIds::KERNEL)
}

/// kill(2)'s answer for a delivery: `ESRCH` when it found nobody, `EPERM` when it found only
/// processes its sender may not signal.
fn answer(delivery: Delivery) -> Result<(), Errno> {
    match delivery {
        Delivery { reached: 0, refused: 0 } => Err(errno::ESRCH),
        Delivery { reached: 0, .. } => Err(errno::EPERM),
        _ => Ok(()),
    }
}

/// `kill(pid, signal)` from a process: `pid` > 0 is that process, 0 the caller's group,
/// -1 every process but init and the caller, < -1 the group `-pid`. `ESRCH` when it
/// reached nobody.
pub fn kill(pid: i32, signal: u32) -> Result<(), Errno> {
    let sender = calling_process();
    let target = match pid {
        0 => SignalTarget::Group(crate::proc::with_current_process(Process::process_group).ok_or(errno::ESRCH)?),
        -1 => SignalTarget::AllButInitAndSender,
        i32::MIN => return Err(errno::ESRCH),
        p if p < 0 => SignalTarget::Group(p.unsigned_abs()),
        p => SignalTarget::Process(p as u32),
    };
    answer(send(SignalRequest { target, signal, sender, code: SignalCode::User, sender_ids: calling_ids() })?)
}

/// Process `parent` ended while its child `child` runs: the child gets its parent-death
/// signal (`PR_SET_PDEATHSIG`), if it asked for one, wherever it lives. As on Linux the signal
/// comes from the parent (`SI_USER`, its pid); unlike Linux it follows the end of the parent
/// process, not of the thread that created the child.
pub fn parent_died(child: u32, parent: u32) {
    let request = SignalRequest {
        target: SignalTarget::ParentDied(child),
        signal: 0,
        sender: parent,
        code: SignalCode::Kernel,
        sender_ids: abi::signal::SenderIds::KERNEL,
    };
    let _ = send(request);
}

/// `tgkill(process, thread, signal)` (`process` 0: `tkill`).
pub fn kill_thread(process: u32, thread: u32, signal: u32) -> Result<(), Errno> {
    let sender = calling_process();
    let target = SignalTarget::Thread { thread, process };
    answer(send(SignalRequest { target, signal, sender, code: SignalCode::Thread, sender_ids: calling_ids() })?)
}

/// Sends `signal` from the kernel (`SI_KERNEL`) to every process of group `group`, on every
/// instance (the console's SIGINT for its foreground group); returns how many it reached,
/// `ESRCH` for none. Call it from a thread, not an interrupt handler: it waits for the other
/// instances' answers.
pub fn signal_group(group: u32, signal: u32) -> Result<usize, Errno> {
    if group == 0 {
        return Err(errno::ESRCH);
    }
    let target = SignalTarget::Group(group);
    let sender_ids = abi::signal::SenderIds::KERNEL;
    match send(SignalRequest { target, signal, sender: 0, code: SignalCode::Kernel, sender_ids })?.reached {
        0 => Err(errno::ESRCH),
        reached => Ok(reached),
    }
}

/// Sends `signal` (`SI_KERNEL`) to the calling thread alone, as the kernel does with SIGPIPE
/// for a write to a pipe nobody reads; it is delivered on the call's return to ring 3.
#[allow(dead_code)] // for the pipes of the file service, which raise SIGPIPE with it
pub fn send_to_current(signal: u32) {
    if !(1..=MAX_SIGNAL).contains(&signal) {
        return;
    }
    let thread = sched::current();
    if let Some(process) = thread.part().process.clone() {
        post(&process, Some(&thread), SignalInfo { signal, code: SignalCode::Kernel.number(), ..Default::default() });
    }
}

/// SIGALRM for `process`: its real-time timer expired (`timer`).
pub(super) fn post_timer_expiry(process: &Process) {
    post(process, None, SignalInfo { signal: SIGALRM, code: SignalCode::Kernel.number(), ..Default::default() });
}

/// `rt_sigtimedwait`: waits until a signal of `set` is pending for the calling thread or its
/// process, takes it (the lowest number; the thread's own before its process's) and returns
/// its `siginfo`; `deadline_tsc` `None` waits as long as it takes. `EAGAIN` when the deadline
/// passes first. Another signal that runs a handler ends the wait with `EINTR`; one that
/// runs none, or a move of the process, restarts it (with its whole timeout, there).
pub fn timed_wait(set: SignalSet, deadline_tsc: Option<u64>) -> Result<SignalInfo, Errno> {
    let set = set & !UNBLOCKABLE;
    let thread = sched::current();
    let process = thread.part().process.clone().ok_or(errno::EPERM)?;
    let signals = &thread.part().signals;
    let take = || {
        let own = signals.pending.set() & set;
        let shared = process.signals.pending.set() & set;
        let lowest = |bits: SignalSet| (bits != 0).then(|| bits.trailing_zeros() + 1);
        match (lowest(own), lowest(shared)) {
            (Some(a), Some(b)) if b < a => process.signals.pending.take(b),
            (Some(a), _) => signals.pending.take(a),
            (None, Some(b)) => process.signals.pending.take(b),
            (None, None) => None,
        }
    };
    loop {
        if let Some(info) = take() {
            return Ok(info);
        }
        signals.waiting_for.store(set, Ordering::Relaxed);
        let wakeup = sched::block(sched::WaitToken::Signal, deadline_tsc);
        signals.waiting_for.store(0, Ordering::Relaxed);
        if let Some(info) = take() {
            return Ok(info);
        }
        match wakeup {
            sched::Wakeup::TimedOut => return Err(errno::EAGAIN),
            sched::Wakeup::Woken => {}
            sched::Wakeup::Killed | sched::Wakeup::Interrupted | sched::Wakeup::Moving => {
                return Err(RESTART_NO_HANDLER)
            }
        }
    }
}

/// `rt_sigaction` on the calling process: sets `new` (if any) for `signal` and returns the
/// previous action. SIGKILL and SIGSTOP keep their action (`EINVAL`).
pub fn set_action(signal: u32, new: Option<Action>) -> Result<Action, Errno> {
    if !(1..=MAX_SIGNAL).contains(&signal) || (new.is_some() && UNBLOCKABLE & bit(signal) != 0) {
        return Err(errno::EINVAL);
    }
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    Ok(match new {
        Some(action) => {
            let action = Action { mask: action.mask & !UNBLOCKABLE, ..action };
            process.signals.set_action(signal, action, &sched::threads_of(process.pid))
        }
        None => process.signals.action(signal),
    })
}

/// How `rt_sigprocmask` changes the mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskChange {
    Block(SignalSet),
    Unblock(SignalSet),
    Set(SignalSet),
}

/// `rt_sigprocmask` on the calling thread; returns the previous mask.
pub fn change_mask(change: Option<MaskChange>) -> SignalSet {
    let thread = sched::current();
    let blocked = &thread.part().signals.blocked;
    let previous = blocked.load(Ordering::Relaxed);
    let mask = match change {
        None => return previous,
        Some(MaskChange::Block(set)) => previous | set,
        Some(MaskChange::Unblock(set)) => previous & !set,
        Some(MaskChange::Set(set)) => set,
    };
    blocked.store(mask & !UNBLOCKABLE, Ordering::Relaxed);
    previous
}

/// `rt_sigpending`: signals pending for the calling thread or its process that it blocks.
pub fn pending() -> SignalSet {
    let thread = sched::current();
    let process = thread.part().process.as_ref().map_or(0, |p| p.signals.pending.set());
    (thread.part().signals.pending.set() | process) & thread.part().signals.blocked.load(Ordering::Relaxed)
}

/// `rt_sigsuspend` (with a mask) and `pause` (without): waits, with `mask` blocked instead of
/// the thread's mask, until a signal runs a handler or ends the process. The mask comes back
/// when the handler returns (its frame holds it).
pub fn suspend(mask: Option<SignalSet>) -> Errno {
    let thread = sched::current();
    if let Some(mask) = mask {
        let previous = thread.part().signals.blocked.swap(mask & !UNBLOCKABLE, Ordering::Relaxed);
        thread.part().signals.saved_mask.store(previous, Ordering::Relaxed);
    }
    drop(thread);
    while sched::block(sched::WaitToken::Signal, None) == sched::Wakeup::Woken {}
    RESTART_NO_HANDLER
}

/// `sigaltstack`: the calling thread's alternate stack, replaced by `new` when given; the
/// thread's user stack pointer `stack_pointer` says whether it runs on it now.
pub fn alternate_stack(new: Option<AlternateStack>, stack_pointer: u64) -> Result<AlternateStack, Errno> {
    /// `MINSIGSTKSZ` of x86-64.
    const MINIMUM_SIZE: u64 = 2048;
    let thread = sched::current();
    let mut current = thread.part().signals.alternate_stack.lock();
    let on_it = on_stack(&current, stack_pointer);
    let mut shown = *current;
    shown.flags = if on_it { AlternateStack::ON_STACK } else { current.flags };
    if let Some(new) = new {
        if on_it {
            return Err(errno::EPERM);
        }
        let mode = new.flags & !AlternateStack::AUTO_DISARM;
        *current = match mode {
            AlternateStack::DISABLE => AlternateStack { base: 0, size: 0, flags: AlternateStack::DISABLE },
            0 | AlternateStack::ON_STACK => {
                if new.size < MINIMUM_SIZE {
                    return Err(errno::ENOMEM);
                }
                if !crate::arch::user::is_user_range(new.base, new.size) {
                    return Err(errno::EFAULT);
                }
                AlternateStack { base: new.base, size: new.size, flags: new.flags & AlternateStack::AUTO_DISARM }
            }
            _ => return Err(errno::EINVAL),
        };
    }
    Ok(shown)
}

/// Whether `stack_pointer` lies on the alternate stack `stack` [Linux `on_sig_stack`].
fn on_stack(stack: &AlternateStack, stack_pointer: u64) -> bool {
    stack.flags & AlternateStack::DISABLE == 0
        && stack.flags & AlternateStack::AUTO_DISARM == 0
        && stack_pointer > stack.base
        && stack_pointer - stack.base <= stack.size
}

/// A system call a signal interrupted, waiting to learn whether it runs again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterruptedCall {
    /// Its number (`rax` at entry).
    pub number: u64,
    /// [`RESTART_SYSCALL`] or [`RESTART_NO_HANDLER`].
    pub rule: Errno,
}

/// Applies the restart rule of `call` to its frame (which holds `-EINTR`): run it again (back
/// over the 2-byte SYSCALL, the number in rax) unless a handler ran that forbids it.
fn settle(frame: &mut InterruptFrame, call: InterruptedCall, handler_flags: Option<u64>) {
    let restart = match handler_flags {
        None => true,
        Some(flags) => call.rule == RESTART_SYSCALL && flags & SA_RESTART != 0,
    };
    if restart {
        frame.rip -= 2;
        frame.rax = if call.rule == RESTART_BLOCK { SYS_RESTART_SYSCALL } else { call.number };
    } else if call.rule == RESTART_BLOCK {
        // A handler ran: the sleep ends with EINTR, as it would have without the move.
        crate::sched::current().part().restart_sleep.lock().take();
    }
}

/// Why delivery ends the process.
enum Fate {
    /// The signal's action ends it with this wait status.
    End(u32),
    /// The signal's action stops it.
    Stop(u32),
    /// The handler cannot be entered: SIGSEGV, with this report.
    BadHandler(&'static str, u64),
}

/// On the way back to ring 3 (the last step, after any switch): takes the pending signals
/// the thread does not block, lowest number first, and acts on each: ignores it, ends the
/// process, or enters its handler (one frame per signal, each on top of the last, as Linux
/// does). Settles `interrupted`, the system call a signal cut short.
pub fn deliver(frame: &mut InterruptFrame, interrupted: Option<InterruptedCall>) {
    let fate = {
        let thread = sched::current();
        match thread.part().process.clone() {
            Some(process) => deliver_to(frame, &thread, &process, interrupted),
            None => Ok(()),
        }
    };
    // The thread and process references are dropped: the thread may end here for good.
    match fate {
        Ok(()) => {}
        Err(Fate::End(status)) => super::exit_process(status),
        Err(Fate::Stop(signal)) => {
            super::stop_here(signal);
            // Continued: the signals that came meanwhile.
            deliver(frame, None);
        }
        Err(Fate::BadHandler(why, address)) => kill_for_bad_frame(why, address),
    }
}

fn deliver_to(
    frame: &mut InterruptFrame,
    thread: &Arc<Thread>,
    process: &Arc<Process>,
    mut interrupted: Option<InterruptedCall>,
) -> Result<(), Fate> {
    // Another thread stopped the process: this one stops too on its way out.
    if let Some(signal) = process.stop_signal() {
        if let Some(call) = interrupted.take() {
            settle(frame, call, None);
        }
        return Err(Fate::Stop(signal));
    }
    loop {
        let ready = (thread.part().signals.pending.set() | process.signals.pending.set())
            & !thread.part().signals.blocked.load(Ordering::Relaxed);
        if ready == 0 {
            break;
        }
        let signal = ready.trailing_zeros() + 1;
        let Some(info) = thread.part().signals.pending.take(signal).or_else(|| process.signals.pending.take(signal))
        else {
            continue;
        };
        let action = process.signals.action(signal);
        match outcome(signal, &action) {
            Outcome::Ignore => {}
            Outcome::End(status) => return Err(Fate::End(status)),
            Outcome::Stop => {
                // A call the stop cut short runs again once the process continues.
                if let Some(call) = interrupted.take() {
                    settle(frame, call, None);
                }
                return Err(Fate::Stop(signal));
            }
            Outcome::Handler => {
                if let Some(call) = interrupted.take() {
                    settle(frame, call, Some(action.flags));
                }
                enter_handler(frame, thread, process, info, &action)?;
            }
        }
    }
    if let Some(call) = interrupted {
        settle(frame, call, None);
    }
    if let Some(mask) = thread.part().signals.take_saved_mask() {
        thread.part().signals.blocked.store(mask, Ordering::Relaxed);
    }
    Ok(())
}

fn enter_handler(
    frame: &mut InterruptFrame,
    thread: &Thread,
    process: &Process,
    info: SignalInfo,
    action: &Action,
) -> Result<(), Fate> {
    let user = |address: u64| address < crate::arch::user::USER_END;
    if action.flags & SA_RESTORER == 0 || !user(action.restorer) {
        return Err(Fate::BadHandler("a handler without a user-space SA_RESTORER return", action.restorer));
    }
    if !user(action.handler) {
        return Err(Fate::BadHandler("a handler outside user space", action.handler));
    }
    let blocked = thread.part().signals.blocked.load(Ordering::Relaxed);
    let mask = thread.part().signals.take_saved_mask().unwrap_or(blocked);
    let (alternate_stack, stack_top) = {
        let mut stack = thread.part().signals.alternate_stack.lock();
        let on_it = on_stack(&stack, frame.rsp);
        let enabled = stack.flags & AlternateStack::DISABLE == 0;
        let top = (action.flags & SA_ONSTACK != 0 && enabled && !on_it).then(|| stack.base + stack.size);
        let shown = AlternateStack {
            flags: if on_it { AlternateStack::ON_STACK } else { stack.flags & !AlternateStack::AUTO_DISARM }
                | (stack.flags & AlternateStack::AUTO_DISARM),
            ..*stack
        };
        if stack.flags & AlternateStack::AUTO_DISARM != 0 {
            *stack = AlternateStack { base: 0, size: 0, flags: AlternateStack::DISABLE };
        }
        (shown, top)
    };
    let mut fpu = FpuState::initial();
    fpu.save();
    let entry = HandlerEntry {
        handler: action.handler,
        restorer: action.restorer,
        info,
        mask,
        alternate_stack,
        stack_top,
        fpu: &fpu,
    };
    let stack_pointer = frame.rsp;
    crate::arch::signal::enter_handler(frame, &entry)
        .map_err(|_| Fate::BadHandler("no room for the signal frame below the stack pointer", stack_pointer))?;
    // The handler starts with a clean x87/SSE state, as on Linux; its frame holds the old one.
    FpuState::initial().restore();
    let signal = info.signal;
    let deferred = if action.flags & SA_NODEFER != 0 { 0 } else { bit(signal) };
    thread.part().signals.blocked.store((blocked | action.mask | deferred) & !UNBLOCKABLE, Ordering::Relaxed);
    if action.flags & SA_RESETHAND != 0 {
        process.signals.set_action(signal, Action::default(), &[]);
    }
    Ok(())
}

/// `rt_sigreturn`: puts back the registers, x87/SSE state, mask and alternate stack saved in
/// the frame the user stack pointer names (the handler returned into `sa_restorer`). Returns
/// rax as saved; the system-call return then restores every register by IRETQ. A frame that
/// cannot be read or resumes outside user space ends the process with SIGSEGV.
pub fn sigreturn(frame: &mut InterruptFrame) -> Result<u64, Errno> {
    let stack_pointer = frame.rsp;
    let Ok(saved) = crate::arch::signal::read_frame(stack_pointer) else {
        kill_for_bad_frame("rt_sigreturn finds no signal frame at the stack pointer", stack_pointer)
    };
    if crate::arch::signal::restore(frame, &saved).is_err() {
        kill_for_bad_frame("rt_sigreturn to an address outside user space", saved.rip());
    }
    match &saved.fpu {
        Some(image) => image.restore(),
        None => FpuState::initial().restore(),
    }
    {
        let thread = sched::current();
        thread.part().signals.blocked.store(saved.mask & !UNBLOCKABLE, Ordering::Relaxed);
    }
    // As Linux's `restore_altstack`: like a `sigaltstack` call, whose failure is ignored.
    let _ = alternate_stack(Some(saved.alternate_stack), frame.rsp);
    Ok(frame.rax)
}

/// A signal frame the process gave (or left no room for) is unusable: one line naming it, as
/// for a fault, and the process ends with SIGSEGV.
fn kill_for_bad_frame(why: &str, address: u64) -> ! {
    let (pid, name) = crate::proc::with_current_process(|p| (p.pid, p.state.lock().name.clone())).unwrap_or_default();
    log::error!(
        "process {pid} ({name}) killed by SIGSEGV: {why} (address={address:#x}) on core {}",
        shared::this_core()
    );
    super::exit_process(SIGSEGV)
}

/// Registers the signal ICC handlers of this instance.
pub fn init() {
    crate::msg::icc::register(handler::SIGNAL, signal_handler);
    crate::msg::icc::register(handler::KILL_PROCESS, |arguments| {
        let pid = u32::try_from(arguments[0]).map_err(|_| IccStatus::BadArguments)?;
        let signal = u32::try_from(arguments[1]).ok().filter(|&s| s <= MAX_SIGNAL).ok_or(IccStatus::BadArguments)?;
        let sender_ids = abi::signal::SenderIds::KERNEL;
        let target = SignalTarget::Process(pid);
        let request = SignalRequest { target, signal, sender: 0, code: SignalCode::Kernel, sender_ids };
        Ok(if send_here(&request).reached == 0 { u64::from(errno::ESRCH) } else { 0 })
    });
}
