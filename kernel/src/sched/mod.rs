//! The scheduler of one kernel instance: its threads, a round-robin run queue preempted by
//! the LAPIC timer, and blocking with wake-up tokens and deadlines.
//!
//! Every structure here is private to the instance (its own `.bss`); a thread never runs on
//! another core. The boot thread (the idle loop; on core 0 it first waits for init) is a
//! thread too, with no process. The kernel is not preemptible: a thread leaves the CPU only when it blocks,
//! yields, exits, or is preempted on its way back to ring 3.

use crate::arch::cpu;
use crate::arch::gdt;
use crate::arch::idt::InterruptFrame;
use crate::arch::paging;
use crate::arch::stacks::{StackError, ThreadStack};
use crate::arch::user::{self, FpuState, SYSCALL_STACK_TOP};
use crate::proc::signal::{self, InterruptedCall, ThreadSignals};
use crate::proc::Process;
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use spin::Mutex;

/// What a blocked thread waits for; [`wake`] names the same token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitToken {
    /// A futex word: (process id, user address).
    Futex(u32, u64),
    /// A child of process `pid` (or of the kernel, pid 0) changed state.
    Child(u32),
    /// The reply to a request this instance sent (spawn on another core).
    Reply(u64),
    /// Console input.
    Console,
    /// Nothing but the deadline (`nanosleep`).
    Sleep,
    /// Nothing but a signal (`pause`, `rt_sigsuspend`).
    Signal,
    /// An event from the application core that runs thread `tid` (see `proc::remote`).
    Away(u32),
    /// Process `pid`'s vforked child let go of its address space (see `proc::Loan`).
    MemoryBack(u32),
    /// Process `pid`, stopped, was continued (SIGCONT).
    Continued(u32),
}

/// Why a blocked thread runs again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wakeup {
    /// [`wake`] named its token.
    Woken,
    /// Its deadline passed.
    TimedOut,
    /// Its process is being killed.
    Killed,
    /// A signal it does not block is pending for it (see `proc::signal`): the call fails with
    /// `EINTR` or `proc::signal::interrupted_errno()`.
    Interrupted,
    /// Its process is moving to another core's kernel (`proc::migrate`): the call gives up as
    /// for a signal, and runs again there (`interrupted_errno()`, or a sleep's restart).
    Moving,
}

impl Wakeup {
    /// Whether a signal cut the wait short (the process is ending, or a handler is to run):
    /// the blocking call should give up with `EINTR` or `proc::signal::interrupted_errno()`.
    pub fn by_signal(self) -> bool {
        matches!(self, Self::Killed | Self::Interrupted | Self::Moving)
    }
}

/// A blocked thread's wait.
#[derive(Clone, Copy, Debug)]
struct Wait {
    token: WaitToken,
    deadline_tsc: Option<u64>,
    /// Whether a signal ends it ([`block`]) or not ([`block_uninterruptible`]).
    interruptible: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum State {
    Running = 0,
    Ready = 1,
    Blocked = 2,
    Dead = 3,
}

/// Register state a thread keeps while it does not run.
struct Context {
    /// Kernel stack pointer saved by the switch.
    stack_pointer: u64,
    fpu: Box<FpuState>,
}

/// One thread of this instance.
pub struct Thread {
    /// Thread id (global: from this instance's pid range).
    pub tid: u32,
    /// The process it belongs to; `None` for the boot thread.
    pub process: Option<Arc<Process>>,
    context: UnsafeCell<Context>,
    /// Its kernel stack; `None` for the boot thread, which runs on the instance's main stack.
    stack: Option<ThreadStack>,
    state: AtomicU8,
    /// TLS base (FS), set by `arch_prctl` or `clone(CLONE_SETTLS)`.
    pub fs_base: AtomicU64,
    /// `set_tid_address`/`CLONE_CHILD_CLEARTID`: zeroed and futex-woken at exit.
    pub clear_child_tid: AtomicU64,
    /// Its blocked mask, signals sent to it alone, its alternate stack.
    pub signals: ThreadSignals,
    wait: Mutex<Option<Wait>>,
    wakeup: Mutex<Wakeup>,
    /// Where its user code runs when not here: an application core (NIX execac). Its home
    /// serves its traps, see `proc::remote`.
    pub away: Mutex<Option<crate::proc::remote::Away>>,
    /// A sleep cut short by a move of its process, which `restart_syscall` finishes: its end
    /// (monotonic ns) and where the time left goes if a signal ends it.
    pub restart_sleep: Mutex<Option<(u64, u64)>>,
    /// The CPU time it used here.
    pub cpu: CpuClock,
}

/// A thread's CPU time on its instance, in TSC cycles: what it ran before its current run,
/// when that run began (0: it is not running), and how much of all it spent in system calls.
/// The switch starts and stops it; only the thread's instance touches it. (A thread away on
/// an application core runs there unclocked: NIX's AC takes no tick.)
#[derive(Default)]
pub struct CpuClock {
    before: AtomicU64,
    since: AtomicU64,
    system: AtomicU64,
}

impl CpuClock {
    fn start(&self, now: u64) {
        self.since.store(now.max(1), Ordering::Relaxed);
    }

    fn stop(&self, now: u64) {
        let since = self.since.swap(0, Ordering::Relaxed);
        if since != 0 {
            self.before.fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        }
    }

    /// Cycles run so far, the current run included.
    pub fn cycles(&self) -> u64 {
        let since = self.since.load(Ordering::Relaxed);
        let running = if since == 0 { 0 } else { cpu::read_tsc().saturating_sub(since) };
        self.before.load(Ordering::Relaxed) + running
    }

    /// Counts `cycles` of its time as spent in the kernel on its behalf.
    pub fn charge_system(&self, cycles: u64) {
        self.system.fetch_add(cycles, Ordering::Relaxed);
    }

    /// Its CPU time so far.
    pub fn times(&self) -> abi::process::CpuTimes {
        let total = self.cycles();
        let system = self.system.load(Ordering::Relaxed).min(total);
        let micros = |cycles| crate::time::cycles_to_ns(cycles) / 1000;
        abi::process::CpuTimes { user_us: micros(total - system), system_us: micros(system) }
    }
}

// SAFETY: a thread is touched only by its own instance (one core); `context` is written only
// by the switch, with interrupts masked, while the thread is not running.
unsafe impl Sync for Thread {}
// SAFETY: as above: threads never move to another core.
unsafe impl Send for Thread {}

impl Thread {
    fn state(&self) -> State {
        match self.state.load(Ordering::Relaxed) {
            0 => State::Running,
            1 => State::Ready,
            2 => State::Blocked,
            _ => State::Dead,
        }
    }

    fn set_state(&self, state: State) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    /// A user thread ready to enter ring 3 with `frame`.
    pub fn new_user(
        tid: u32,
        process: Arc<Process>,
        frame: &InterruptFrame,
        fpu: FpuState,
        fs_base: u64,
        signals: ThreadSignals,
    ) -> Result<Arc<Self>, StackError> {
        let stack = ThreadStack::allocate(|page| crate::mm::window::map_kernel_page(page).map_err(drop))?;
        // SAFETY: the stack was just allocated for this thread and is mapped writable.
        let stack_pointer = unsafe { user::prepare_thread_stack(stack.top(), frame) };
        Ok(Arc::new(Self {
            tid,
            process: Some(process),
            context: UnsafeCell::new(Context { stack_pointer, fpu: Box::new(fpu) }),
            stack: Some(stack),
            state: AtomicU8::new(State::Ready as u8),
            fs_base: AtomicU64::new(fs_base),
            clear_child_tid: AtomicU64::new(0),
            signals,
            wait: Mutex::new(None),
            wakeup: Mutex::new(Wakeup::Woken),
            away: Mutex::new(None),
            restart_sleep: Mutex::new(None),
            cpu: CpuClock::default(),
        }))
    }

    /// A copy of its FPU state as last saved.
    pub fn fpu_copy(&self) -> FpuState {
        if is_current(self) {
            let mut state = FpuState::initial();
            state.save();
            return state;
        }
        // SAFETY: the thread is not running, so its saved state is stable.
        unsafe { (*self.context.get()).fpu.as_ref().clone() }
    }
}

struct Scheduler {
    current: Option<Arc<Thread>>,
    ready: VecDeque<Arc<Thread>>,
    blocked: Vec<Arc<Thread>>,
    /// Threads that died; their stacks are freed by the next thread that runs.
    dead: Vec<Arc<Thread>>,
    switches: u64,
}

static SCHEDULER: Mutex<Scheduler> =
    Mutex::new(Scheduler { current: None, ready: VecDeque::new(), blocked: Vec::new(), dead: Vec::new(), switches: 0 });
/// The process of the running thread (null for the boot thread), kept by the switch so the
/// system-call path reaches it without the scheduler's lock.
static CURRENT_PROCESS: core::sync::atomic::AtomicPtr<Process> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// Runs `work` with the running thread's process, if it has one, without taking the
/// scheduler's lock (the fast path of calls like `getppid`).
pub fn with_current_process<T>(work: impl FnOnce(&Process) -> T) -> Option<T> {
    let pointer = CURRENT_PROCESS.load(Ordering::Relaxed);
    // SAFETY: the switch stores the running thread's `Arc<Process>` pointer here; that thread
    // holds the `Arc` for as long as it exists, and it exists while it runs `work` (even if
    // `work` blocks, the thread stays in the scheduler's lists), so the process outlives the
    // reference. Only this core writes the pointer.
    unsafe { pointer.as_ref() }.map(work)
}

/// The running thread, kept by the switch like [`CURRENT_PROCESS`], for the signal check on
/// every return to ring 3.
static CURRENT_THREAD: core::sync::atomic::AtomicPtr<Thread> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// Runs `work` with the running thread, without the scheduler's lock; `None` before the
/// first switch (the boot thread never returns to ring 3).
pub fn with_current_thread<T>(work: impl FnOnce(&Thread) -> T) -> Option<T> {
    let pointer = CURRENT_THREAD.load(Ordering::Relaxed);
    // SAFETY: as for `with_current_process`: the switch stores the running thread's `Arc`
    // pointer here, and the scheduler's lists hold that `Arc` while the thread runs `work`.
    unsafe { pointer.as_ref() }.map(work)
}

/// Set by the timer: the running thread's slice is over.
static NEED_SWITCH: AtomicBool = AtomicBool::new(false);
/// Set by the message notification and the timer: look at the channels before returning to
/// ring 3 (a system call's return path stays free of channel polling otherwise).
static LOOK_AT_MESSAGES: AtomicBool = AtomicBool::new(false);

/// Threads that called [`exit_current`] (or are about to) whose stacks are not freed yet:
/// they are gone for every count but the stack slot's.
static EXITING: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// The running thread is on its way out: count its stack as released already (its exit
/// is reported to other cores before the stack can be freed).
pub fn note_exiting() {
    EXITING.fetch_add(1, Ordering::Relaxed);
}

/// Thread stacks still mapped for threads that already exited.
pub fn exiting_stacks() -> u32 {
    EXITING.load(Ordering::Relaxed)
}

/// From the message-notification interrupt: messages wait for this core.
pub fn on_message_notification() {
    LOOK_AT_MESSAGES.store(true, Ordering::Relaxed);
}

/// Whether a message notification came since the last look at them, clearing the note (an
/// application core about to resume its guest, which nothing else will interrupt).
pub fn take_message_notification() -> bool {
    LOOK_AT_MESSAGES.swap(false, Ordering::Relaxed)
}

fn with_scheduler<T>(work: impl FnOnce(&mut Scheduler) -> T) -> T {
    cpu::without_interrupts(|| work(&mut SCHEDULER.lock()))
}

/// Makes the code running now the boot thread of this instance.
pub fn init() {
    let boot = Arc::new(Thread {
        tid: 0,
        process: None,
        context: UnsafeCell::new(Context { stack_pointer: 0, fpu: Box::new(FpuState::initial()) }),
        stack: None,
        state: AtomicU8::new(State::Running as u8),
        fs_base: AtomicU64::new(0),
        clear_child_tid: AtomicU64::new(0),
        signals: ThreadSignals::new(0),
        wait: Mutex::new(None),
        wakeup: Mutex::new(Wakeup::Woken),
        away: Mutex::new(None),
        restart_sleep: Mutex::new(None),
        cpu: CpuClock::default(),
    });
    with_scheduler(|s| s.current = Some(boot));
}

/// The running thread.
pub fn current() -> Arc<Thread> {
    with_scheduler(|s| s.current.clone().expect("scheduler initialised at instance entry"))
}

fn is_current(thread: &Thread) -> bool {
    with_scheduler(|s| s.current.as_ref().is_some_and(|c| core::ptr::eq(c.as_ref(), thread)))
}

/// The process of the running thread, if it is a user thread.
pub fn current_process() -> Option<Arc<Process>> {
    current().process.clone()
}

/// Queues a new or woken thread.
pub fn make_ready(thread: Arc<Thread>) {
    thread.set_state(State::Ready);
    with_scheduler(|s| s.ready.push_back(thread));
}

/// Whether a thread other than the running one is ready to run.
pub fn others_ready() -> bool {
    with_scheduler(|s| !s.ready.is_empty())
}

/// Threads (ready or running, blocked) of this instance, the boot thread included, and the
/// switches so far.
pub fn counts() -> (usize, usize, u64) {
    with_scheduler(|s| (s.ready.len() + 1, s.blocked.len(), s.switches))
}

/// One round of the boot thread's idle loop: handle messages, run the ready threads (the
/// boot thread comes back when they block or their slice ends), else sleep until an
/// interrupt. (Processes run on every core, between keystrokes too.)
pub fn idle_once() {
    crate::msg::drain();
    crate::core::lifecycle::stop_if_asked();
    crate::core::park::park_if_asked();
    crate::core::park::unpark_if_asked();
    crate::fs::at_safe_point();
    crate::proc::migrate::at_safe_point();
    match crate::core::role::current() {
        crate::core::kcb::Role::Application => {
            crate::core::ac::run_pending();
            // The guest may have left because this core stops.
            crate::core::lifecycle::stop_if_asked();
        }
        crate::core::kcb::Role::Kernel => {
            crate::syscall::syspage::serve_as_kernel_core();
            return;
        }
        crate::core::kcb::Role::Timesharing => {}
    }
    let ready = with_scheduler(|s| !s.ready.is_empty());
    crate::console::print_deferred(!ready);
    if ready {
        yield_now();
    } else {
        crate::msg::wait_for_messages();
    }
}

/// Gives the CPU to the next ready thread, if any; the caller stays ready.
pub fn yield_now() {
    cpu::disable_interrupts();
    let me = current();
    let has_other = with_scheduler(|s| !s.ready.is_empty());
    if has_other {
        me.set_state(State::Ready);
        with_scheduler(|s| s.ready.push_back(me.clone()));
        drop(me);
        schedule();
    }
    cpu::enable_interrupts();
}

/// Blocks the running thread until [`wake`] names `token`, `deadline_tsc` passes, its
/// process is killed, or a signal it does not block becomes pending for it
/// ([`Wakeup::Interrupted`], at once if one is pending already). Interrupts are enabled on
/// return.
pub fn block(token: WaitToken, deadline_tsc: Option<u64>) -> Wakeup {
    block_as(Wait { token, deadline_tsc, interruptible: true })
}

/// Sleeps in steps of half a millisecond while `condition` holds, for `timeout_ms` at most (a
/// boot driver or a caller waiting for what other cores do, with nothing to be woken by);
/// whether it stopped holding.
///
/// A signal does not end the sleep. It used to: a caller with a signal pending (the shell
/// that wrote `cpuN/online`, a SIGCHLD from a job that just ended) woke at once, again and
/// again, and spun for the whole timeout without letting this core take its messages, among
/// them the moves and file requests that make the condition change. A stop through the online
/// file then stalled the moving processes 3 s and failed.
pub fn sleep_while(timeout_ms: u64, condition: impl Fn() -> bool) -> bool {
    let deadline = crate::time::deadline_after_ms(timeout_ms);
    while condition() {
        let now = cpu::read_tsc();
        if now >= deadline {
            return false;
        }
        if block_uninterruptible(WaitToken::Sleep, Some(now + crate::time::ns_to_cycles(500_000))) == Wakeup::Killed {
            // A killed caller's waits end at once: it looks at this core's work itself.
            crate::msg::drain();
            crate::fs::at_safe_point();
            cpu::relax();
        }
    }
    true
}

/// [`block`] that a signal does not end (only the process's end does): for waits the kernel
/// must see through, such as the reply to a spawn request.
pub fn block_uninterruptible(token: WaitToken, deadline_tsc: Option<u64>) -> Wakeup {
    block_as(Wait { token, deadline_tsc, interruptible: false })
}

fn block_as(wait: Wait) -> Wakeup {
    cpu::disable_interrupts();
    let me = current();
    if let Some(process) = me.process.as_ref() {
        let early = if process.is_killed() {
            Some(Wakeup::Killed)
        } else if wait.interruptible && signal::would_interrupt(&me, process) {
            Some(Wakeup::Interrupted)
        } else if wait.interruptible && crate::proc::migrate::is_asked(process) {
            // A thread away on an AC checks in at home like the others: its home-side self
            // recalls it from its AC, then waits uninterruptibly for its registers.
            Some(Wakeup::Moving)
        } else {
            None
        };
        if let Some(wakeup) = early {
            cpu::enable_interrupts();
            return wakeup;
        }
    }
    *me.wait.lock() = Some(wait);
    me.set_state(State::Blocked);
    with_scheduler(|s| s.blocked.push(me.clone()));
    drop(me);
    schedule();
    let result = *current().wakeup.lock();
    cpu::enable_interrupts();
    result
}

fn unblock(s: &mut Scheduler, index: usize, why: Wakeup) {
    let thread = s.blocked.swap_remove(index);
    *thread.wait.lock() = None;
    *thread.wakeup.lock() = why;
    thread.set_state(State::Ready);
    s.ready.push_back(thread);
}

/// Wakes up to `count` threads blocked on `token`; returns how many.
pub fn wake(token: WaitToken, count: usize) -> usize {
    with_scheduler(|s| {
        let mut woken = 0;
        let mut i = 0;
        while i < s.blocked.len() && woken < count {
            if s.blocked[i].wait.lock().is_some_and(|w| w.token == token) {
                unblock(s, i, Wakeup::Woken);
                woken += 1;
            } else {
                i += 1;
            }
        }
        woken
    })
}

/// Wakes every thread of process `pid` in an interruptible wait with [`Wakeup::Moving`].
pub fn wake_for_move(pid: u32) {
    with_scheduler(|s| {
        let mut i = 0;
        while i < s.blocked.len() {
            let thread = &s.blocked[i];
            let interruptible = thread.wait.lock().is_some_and(|w| w.interruptible);
            if interruptible && thread.process.as_ref().is_some_and(|p| p.pid == pid) {
                unblock(s, i, Wakeup::Moving);
            } else {
                i += 1;
            }
        }
    })
}

/// Wakes every blocked thread of process `pid` with [`Wakeup::Killed`].
pub fn wake_process(pid: u32) {
    with_scheduler(|s| {
        let mut i = 0;
        while i < s.blocked.len() {
            if s.blocked[i].process.as_ref().is_some_and(|p| p.pid == pid) {
                unblock(s, i, Wakeup::Killed);
            } else {
                i += 1;
            }
        }
    })
}

impl Scheduler {
    /// The running thread if it runs: a blocked or dead one idling on its own stack (see
    /// [`schedule`]) is in `blocked` or `dead`, not on its way to ring 3.
    fn running(&self) -> Option<&Arc<Thread>> {
        self.current.as_ref().filter(|t| t.state() == State::Running)
    }

    /// Every live thread, once: running, ready, blocked.
    fn live(&self) -> impl Iterator<Item = &Arc<Thread>> {
        self.running().into_iter().chain(self.ready.iter()).chain(self.blocked.iter())
    }
}

/// Threads of process `pid` on this instance (running, ready or blocked).
pub fn threads_of(pid: u32) -> Vec<Arc<Thread>> {
    with_scheduler(|s| s.live().filter(|t| t.process.as_ref().is_some_and(|p| p.pid == pid)).cloned().collect())
}

/// The live thread `tid` of this instance.
pub fn find_thread(tid: u32) -> Option<Arc<Thread>> {
    if tid == 0 {
        return None;
    }
    with_scheduler(|s| s.live().find(|t| t.tid == tid).cloned())
}

/// A signal that runs a handler became pending for these threads (those of its process that
/// do not block it): unless one of them is running or ready, and takes it on its way to ring
/// 3, wakes the first in an interruptible wait with [`Wakeup::Interrupted`].
pub fn interrupt_one(candidates: &[Arc<Thread>]) {
    with_scheduler(|s| {
        let on_the_way = |t: &Arc<Thread>| candidates.iter().any(|c| Arc::ptr_eq(c, t));
        if s.running().into_iter().chain(s.ready.iter()).any(on_the_way) {
            return;
        }
        let waiting = s.blocked.iter().position(|t| on_the_way(t) && t.wait.lock().is_some_and(|w| w.interruptible));
        if let Some(index) = waiting {
            unblock(s, index, Wakeup::Interrupted);
        }
    })
}

/// From the timer interrupt: wakes threads whose deadline passed and ends the slice.
/// Whether a tick ended this instance's slice since the last look (a parked kernel core's
/// scan gives its host the processor then).
pub fn slice_ended() -> bool {
    NEED_SWITCH.swap(false, Ordering::Relaxed)
}

/// The running thread keeps the CPU past a tick that came while it ran in the kernel, and
/// past the next one: a `fork` copies the parent's memory (milliseconds under TCG), and a
/// slice ending on its return, or just after, would run the child, or a job forked just
/// before, ahead of the parent. Linux places a forked child behind its parent
/// (`sched_child_runs_first` 0, CFS's start debit), and shells rely on it: `kill $$ & (sleep
/// 1; exit 42)` forks the subshell before the kill comes. The slice then ends at the tick
/// after next, unless the parent blocks first.
pub fn keep_slice() {
    NEED_SWITCH.store(false, Ordering::Relaxed);
    KEEP_NEXT_TICK.store(true, Ordering::Relaxed);
}

/// Set by [`keep_slice`]: the next tick does not end the slice.
static KEEP_NEXT_TICK: AtomicBool = AtomicBool::new(false);

pub fn on_tick() {
    wake_expired();
    if !KEEP_NEXT_TICK.swap(false, Ordering::Relaxed) {
        NEED_SWITCH.store(true, Ordering::Relaxed);
    }
    LOOK_AT_MESSAGES.store(true, Ordering::Relaxed);
}

/// After a world switch brought this instance back onto a processor (a parked core resumed by
/// its host): wakes threads whose deadline passed meanwhile and looks at messages, without
/// ending the slice that just began.
pub fn on_resume() {
    wake_expired();
    LOOK_AT_MESSAGES.store(true, Ordering::Relaxed);
}

fn wake_expired() {
    let now = cpu::read_tsc();
    with_scheduler(|s| {
        let mut i = 0;
        while i < s.blocked.len() {
            let expired = s.blocked[i].wait.lock().is_some_and(|w| w.deadline_tsc.is_some_and(|d| d <= now));
            if expired {
                unblock(s, i, Wakeup::TimedOut);
            } else {
                i += 1;
            }
        }
    })
}

/// On the way back to ring 3 with `frame` (after a system call or an interrupt from user
/// mode): handles this core's messages, ends a killed thread, switches if the slice is over,
/// and last delivers pending signals, settling `interrupted` (the system call a signal cut
/// short, if any: it fails with `EINTR` or runs again).
pub fn before_user_return(frame: &mut InterruptFrame, interrupted: Option<InterruptedCall>) {
    if LOOK_AT_MESSAGES.load(Ordering::Relaxed) {
        LOOK_AT_MESSAGES.store(false, Ordering::Relaxed);
        crate::msg::drain();
        crate::fs::at_safe_point();
        crate::proc::migrate::at_safe_point();
    }
    if with_current_process(|p| p.is_killed()) == Some(true) {
        crate::proc::exit_thread();
    }
    crate::syscall::syspage::run_forwarded();
    if NEED_SWITCH.load(Ordering::Relaxed) {
        NEED_SWITCH.store(false, Ordering::Relaxed);
        yield_now();
        // A parked core's slice ends for its host's sake; a host's for its guests'.
        crate::core::park::while_waiting();
        // Killed while it waited for the CPU.
        if with_current_process(|p| p.is_killed()) == Some(true) {
            crate::proc::exit_thread();
        }
    }
    if interrupted.is_some() || with_current_thread(signal::needs_delivery) == Some(true) {
        signal::deliver(frame, interrupted);
    }
    // Last: the frame is what ring 3 would get, a cut-short call rewound to run again.
    if with_current_process(crate::proc::migrate::is_asked) == Some(true) {
        crate::proc::migrate::move_current(frame);
    }
}

/// The running thread ends: it is never scheduled again; its stack is freed once another
/// thread runs. Called with its process's bookkeeping done.
pub fn exit_current() -> ! {
    cpu::disable_interrupts();
    let me = current();
    me.set_state(State::Dead);
    with_scheduler(|s| s.dead.push(me.clone()));
    drop(me);
    schedule();
    unreachable!("a dead thread was scheduled again");
}

/// Picks the next thread and switches to it. With nothing ready and the current thread not
/// runnable, idles here: handles messages and sleeps until an interrupt, on the current
/// thread's stack. Interrupts masked on entry and on return.
fn schedule() {
    loop {
        let next = with_scheduler(|s| s.ready.pop_front());
        let me = current();
        match next {
            Some(next) if Arc::ptr_eq(&next, &me) => {
                me.set_state(State::Running);
                return;
            }
            Some(next) => {
                drop(me);
                switch_to(next);
                return;
            }
            None if me.state() == State::Running || me.state() == State::Ready => {
                me.set_state(State::Running);
                return;
            }
            None => {
                drop(me);
                cpu::enable_interrupts();
                crate::msg::drain();
                crate::fs::at_safe_point();
                wake_expired();
                if with_scheduler(|s| s.ready.is_empty()) {
                    if crate::core::role::current() == crate::core::kcb::Role::Kernel {
                        // Core 0 as a KC, its boot thread waiting for init: serve syspages and
                        // files here until a thread is ready.
                        crate::syscall::syspage::serve_as_kernel_core();
                    } else {
                        crate::msg::wait_for_messages();
                    }
                }
                cpu::disable_interrupts();
            }
        }
    }
}

fn switch_to(next: Arc<Thread>) {
    let previous = with_scheduler(|s| {
        s.switches += 1;
        s.current.replace(next.clone()).expect("a thread runs")
    });
    next.set_state(State::Running);
    let now = cpu::read_tsc();
    previous.cpu.stop(now);
    next.cpu.start(now);
    // A forked parent's grace is its own: the thread after it gets a plain slice.
    KEEP_NEXT_TICK.store(false, Ordering::Relaxed);
    // SAFETY: interrupts are masked; `previous` is the running thread, so nothing else
    // touches its context; `next` is not running (it was in the ready queue).
    let (save, load) = unsafe {
        let previous_context = &mut *previous.context.get();
        previous_context.fpu.save();
        let next_context = &*next.context.get();
        next_context.fpu.restore();
        (&raw mut previous_context.stack_pointer, next_context.stack_pointer)
    };
    user::set_fs_base(next.fs_base.load(Ordering::Relaxed));
    CURRENT_PROCESS
        .store(next.process.as_ref().map_or(core::ptr::null_mut(), |p| Arc::as_ptr(p).cast_mut()), Ordering::Relaxed);
    CURRENT_THREAD.store(Arc::as_ptr(&next).cast_mut(), Ordering::Relaxed);
    let root = match &next.process {
        Some(process) => process.page_table_root(),
        None => crate::core::shared::this_kcb().page_table_root.load(Ordering::Relaxed),
    };
    if root != paging::current_root() {
        // SAFETY: every root of this instance maps the kernel half (text, data, stacks)
        // at the same addresses: it is a copy of the instance's.
        unsafe { paging::load_root(root) };
    }
    if let Some(stack) = &next.stack {
        gdt::set_kernel_stack(stack.top());
        SYSCALL_STACK_TOP.store(stack.top(), Ordering::Relaxed);
    }
    // Both threads stay alive: `previous` is queued, blocked or in `dead`, `next` is current.
    drop(previous);
    drop(next);
    // SAFETY: interrupts masked, `load` from a prepared or previously switched stack.
    unsafe { user::switch(save, load) };
    after_switch();
}

/// Work after any switch, on the new thread's stack: free the stacks of dead threads (none
/// of them is the running one).
fn after_switch() {
    let dead: Vec<Arc<Thread>> = with_scheduler(|s| {
        let current = s.current.clone();
        let (gone, keep): (Vec<_>, Vec<_>) =
            s.dead.drain(..).partition(|t| !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, t)));
        s.dead = keep;
        gone
    });
    if !dead.is_empty() {
        EXITING.fetch_sub(dead.len() as u32, Ordering::Relaxed);
        drop(dead);
        crate::proc::publish_counts();
    }
}

/// The first code of a new thread after its first switch, before it enters ring 3.
pub extern "C" fn on_thread_start(frame: &mut InterruptFrame) {
    after_switch();
    crate::syscall::syspage::serve_adopted();
    crate::proc::remote::serve_first(frame);
}
