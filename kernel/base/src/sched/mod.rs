//! The scheduler of one kernel instance: its threads, a round-robin run queue preempted by
//! the LAPIC timer, and blocking with wake-up tokens and deadlines.
//!
//! Every structure here is private to the instance (its own `.bss`); a thread never runs on
//! another core. The boot thread (the idle loop; on core 0 it first waits for init) is a
//! thread too, with no process. The kernel is not preemptible: a thread leaves the CPU only when it blocks,
//! yields, exits, or is preempted on its way back to ring 3.
//!
//! This is the mechanism only. What a thread belongs to (a process) is an [`Owner`] and an
//! extension the process layer sets when it makes the thread; what runs at the points the
//! mechanism cannot decide alone (before a thread blocks, when nothing is ready, a new
//! thread's first run) are [`Hooks`] that `boot` registers. The scheduler names no service.

use crate::arch::cpu;
use crate::arch::gdt;
use crate::arch::idt::InterruptFrame;
use crate::arch::paging;
use crate::arch::stacks::{StackError, ThreadStack};
use crate::arch::user::{self, FpuState, SYSCALL_STACK_TOP};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::{Any, TypeId};
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

/// What the scheduler needs of the owner of a user thread (a process, in `proc`).
pub trait Owner: Any + Send + Sync {
    /// Its id (the pid): [`threads_of`], [`wake_process`] and [`wake_for_move`] name it.
    fn id(&self) -> u32;
    /// The root of its address space, loaded when one of its threads runs.
    fn page_table_root(&self) -> u64;
    /// Its parent's id (0: a kernel's child).
    fn parent_id(&self) -> u32;
    /// Runs `work` on the address space its threads run on (the services below the process
    /// layer that map or pin its pages: syspages).
    fn with_address_space(&self, work: &mut dyn FnMut(&mut crate::mm::user::AddressSpace));
}

/// What the layers above the scheduler do at the points where the mechanism needs them;
/// registered once by `boot` ([`register_hooks`]).
pub struct Hooks {
    /// Before the running thread blocks: whether its wait ends at once, and why (its process
    /// is killed, a signal is pending, it moves). `interruptible` is false for
    /// [`block_uninterruptible`].
    pub wakeup_before_block: fn(thread: &Thread, interruptible: bool) -> Option<Wakeup>,
    /// This core's work that any waiting thread may do: messages and deferred service work.
    pub serve: fn(),
    /// Nothing is ready and the running thread waits: sleep until an interrupt (or do a
    /// kernel core's work until a thread is ready).
    pub idle: fn(),
    /// After a slice ended and the thread got the CPU back (a parked core gives its host's
    /// processor back here).
    pub after_slice: fn(),
    /// A new thread's first code, before it enters ring 3 with `frame`.
    pub thread_start: fn(frame: &mut InterruptFrame),
    /// The stacks of dead threads were freed.
    pub threads_freed: fn(),
}

static HOOKS: spin::Once<Hooks> = spin::Once::new();

/// Registers the hooks (`boot`, once, before the first thread is made).
pub fn register_hooks(hooks: Hooks) {
    HOOKS.call_once(|| hooks);
}

fn hooks() -> &'static Hooks {
    HOOKS.get().expect("boot registers the scheduler's hooks before any thread runs")
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
    pub owner: Option<Arc<dyn Owner>>,
    context: UnsafeCell<Context>,
    /// Its kernel stack; `None` for the boot thread, which runs on the instance's main stack.
    stack: Option<ThreadStack>,
    state: AtomicU8,
    /// TLS base (FS), set by `arch_prctl` or `clone(CLONE_SETTLS)`.
    pub fs_base: AtomicU64,
    wait: Mutex<Option<Wait>>,
    wakeup: Mutex<Wakeup>,
    /// The CPU time it used here.
    pub cpu: CpuClock,
    /// What the layer that made it keeps per thread (`proc::ThreadPart`: signals, where it
    /// runs when away...), set when it is made; read with [`Thread::extension`].
    extension: Box<dyn Any + Send + Sync>,
    /// The type of `extension`, recorded once: [`Thread::extension`] compares it instead of
    /// asking the box (a call through its vtable on every look, which the return path to
    /// ring 3 makes several times).
    extension_type: TypeId,
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

    /// A user thread of `owner`, ready to enter ring 3 with `frame`.
    pub fn new_user(
        tid: u32,
        owner: Arc<dyn Owner>,
        frame: &InterruptFrame,
        fpu: FpuState,
        fs_base: u64,
        extension: Box<dyn Any + Send + Sync>,
    ) -> Result<Arc<Self>, StackError> {
        let stack = ThreadStack::allocate(|page| crate::mm::window::map_kernel_page(page).map_err(drop))?;
        // SAFETY: the stack was just allocated for this thread and is mapped writable.
        let stack_pointer = unsafe { user::prepare_thread_stack(stack.top(), frame) };
        Ok(Arc::new(Self {
            tid,
            owner: Some(owner),
            context: UnsafeCell::new(Context { stack_pointer, fpu: Box::new(fpu) }),
            stack: Some(stack),
            state: AtomicU8::new(State::Ready as u8),
            fs_base: AtomicU64::new(fs_base),
            wait: Mutex::new(None),
            wakeup: Mutex::new(Wakeup::Woken),
            cpu: CpuClock::default(),
            extension_type: (*extension).type_id(),
            extension,
        }))
    }

    /// What the layer that made it keeps for it, if that is a `T`.
    #[inline]
    pub fn extension<T: Any>(&self) -> Option<&T> {
        if self.extension_type != TypeId::of::<T>() {
            return None;
        }
        let extension: *const (dyn Any + Send + Sync) = &*self.extension;
        // SAFETY: `extension_type` is the type of the boxed value, recorded when the thread
        // was made from it, and the box is never replaced: it holds a `T`, which lives as
        // long as the thread.
        Some(unsafe { &*extension.cast::<T>() })
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
/// The running thread, kept by the switch so the system-call path (and the signal check on
/// every return to ring 3) reaches it without the scheduler's lock.
static CURRENT_THREAD: core::sync::atomic::AtomicPtr<Thread> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// Runs `work` with the running thread, without the scheduler's lock; `None` before the
/// first switch (the boot thread never returns to ring 3).
pub fn with_current_thread<T>(work: impl FnOnce(&Thread) -> T) -> Option<T> {
    let pointer = CURRENT_THREAD.load(Ordering::Relaxed);
    // SAFETY: the switch stores the running thread's `Arc` pointer here, and the scheduler's
    // lists hold that `Arc` while the thread runs `work` (even if `work` blocks, the thread
    // stays in the lists), so the thread outlives the reference. Only this core writes it.
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
#[inline]
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

/// Makes the code running now the boot thread of this instance, with `extension` as what
/// the layers above keep for it.
pub fn init(extension: Box<dyn Any + Send + Sync>) {
    user::register_thread_start(on_thread_start);
    let boot = Arc::new(Thread {
        tid: 0,
        owner: None,
        context: UnsafeCell::new(Context { stack_pointer: 0, fpu: Box::new(FpuState::initial()) }),
        stack: None,
        state: AtomicU8::new(State::Running as u8),
        fs_base: AtomicU64::new(0),
        wait: Mutex::new(None),
        wakeup: Mutex::new(Wakeup::Woken),
        cpu: CpuClock::default(),
        extension_type: (*extension).type_id(),
        extension,
    });
    CURRENT_THREAD.store(Arc::as_ptr(&boot).cast_mut(), Ordering::Relaxed);
    with_scheduler(|s| s.current = Some(boot));
}

/// The running thread.
#[inline]
pub fn current() -> Arc<Thread> {
    let pointer = CURRENT_THREAD.load(Ordering::Relaxed);
    assert!(!pointer.is_null(), "scheduler initialised at instance entry");
    // SAFETY: `init` and the switch store here the pointer of the `Arc` that the scheduler
    // holds as `current` (the switch replaces `current` first, with interrupts masked, and
    // nothing on this core asks before the pointer follows), so it points at a live thread of
    // an `Arc`; one more strong count is taken for the copy returned.
    unsafe {
        Arc::increment_strong_count(pointer.cast_const());
        Arc::from_raw(pointer.cast_const())
    }
}

fn is_current(thread: &Thread) -> bool {
    with_scheduler(|s| s.current.as_ref().is_some_and(|c| core::ptr::eq(c.as_ref(), thread)))
}

/// Queues a new or woken thread.
#[inline]
pub fn make_ready(thread: Arc<Thread>) {
    thread.set_state(State::Ready);
    with_scheduler(|s| s.ready.push_back(thread));
}

/// Whether a thread other than the running one is ready to run.
#[inline]
pub fn others_ready() -> bool {
    with_scheduler(|s| !s.ready.is_empty())
}

/// Whether a thread other than the running one and the boot thread (the idle loop, which is
/// ready whenever another thread runs) is ready to run.
pub fn others_than_idle_ready() -> bool {
    with_scheduler(|s| s.ready.iter().any(|thread| thread.tid != 0))
}

/// Threads (ready or running, blocked) of this instance, the boot thread included, and the
/// switches so far.
pub fn counts() -> (usize, usize, u64) {
    with_scheduler(|s| (s.ready.len() + 1, s.blocked.len(), s.switches))
}

/// Gives the CPU to the next ready thread, if any; the caller stays ready.
pub fn yield_now() {
    cpu::disable_interrupts();
    schedule(|s| {
        if !s.ready.is_empty() {
            let me = s.current.clone().expect("a thread runs");
            me.set_state(State::Ready);
            s.ready.push_back(me);
        }
    });
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
            (hooks().serve)();
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
    if let Some(wakeup) = (hooks().wakeup_before_block)(&me, wait.interruptible) {
        cpu::enable_interrupts();
        return wakeup;
    }
    *me.wait.lock() = Some(wait);
    me.set_state(State::Blocked);
    schedule(|s| s.blocked.push(me));
    let result = with_current_thread(|thread| *thread.wakeup.lock()).unwrap_or(Wakeup::Woken);
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
            if interruptible && thread.owner.as_ref().is_some_and(|p| p.id() == pid) {
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
            if s.blocked[i].owner.as_ref().is_some_and(|p| p.id() == pid) {
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
    with_scheduler(|s| s.live().filter(|t| t.owner.as_ref().is_some_and(|p| p.id() == pid)).cloned().collect())
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
#[inline]
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

/// Whether a message notification or a tick asked for a look at the channels since the last
/// one, clearing the note: the return path to ring 3 then serves this core's work (a system
/// call's return stays free of channel polling otherwise).
#[inline]
pub fn take_look_at_messages() -> bool {
    if LOOK_AT_MESSAGES.load(Ordering::Relaxed) {
        LOOK_AT_MESSAGES.store(false, Ordering::Relaxed);
        return true;
    }
    false
}

/// On the way back to ring 3: if the running thread's slice is over, gives the CPU to the
/// next ready thread and, once it runs again, the `after_slice` hook; whether it did.
#[inline]
pub fn end_slice_if_due() -> bool {
    if !NEED_SWITCH.load(Ordering::Relaxed) {
        return false;
    }
    NEED_SWITCH.store(false, Ordering::Relaxed);
    yield_now();
    (hooks().after_slice)();
    true
}

/// The running thread ends: it is never scheduled again; its stack is freed once another
/// thread runs. Called with its process's bookkeeping done.
pub fn exit_current() -> ! {
    cpu::disable_interrupts();
    let me = current();
    me.set_state(State::Dead);
    DEAD_WAITING.store(true, Ordering::Relaxed);
    schedule(|s| s.dead.push(me));
    unreachable!("a dead thread was scheduled again");
}

/// What [`schedule`] found under the scheduler's lock.
enum Pick {
    /// The running thread goes on.
    Stay,
    /// Switch from the first thread to the second (already `current`).
    Switch(Arc<Thread>, Arc<Thread>),
    /// Nothing is ready and the running thread waits.
    Idle,
}

/// Set by [`exit_current`]: `dead` holds a thread whose stack the next switch frees, so
/// [`after_switch`] takes the scheduler's lock only then.
static DEAD_WAITING: AtomicBool = AtomicBool::new(false);

/// Runs `prepare` (queue, block or bury the running thread), then picks the next thread and
/// switches to it, all under one taking of the scheduler's lock. With nothing ready and the
/// current thread not runnable, idles here: handles messages and sleeps until an interrupt, on
/// the current thread's stack. Interrupts masked on entry and on return.
///
/// A thread that blocks or ends hands the processor straight to the next *user* thread when
/// one is ready, passing over the boot thread (the idle loop, which is ready whenever another
/// thread runs). Before, a futex hand-off between two threads went through the idle loop: two
/// switches and a scan of every channel for one wake-up. The boot thread still runs when no
/// user thread is ready, when a slice ends ([`yield_now`] queues the yielding thread behind
/// it), and a message notification or a tick makes the return to ring 3 serve this core's
/// messages meanwhile (`take_look_at_messages`).
fn schedule(prepare: impl FnOnce(&mut Scheduler)) {
    let mut prepare = Some(prepare);
    loop {
        let pick = with_scheduler(|s| {
            if let Some(prepare) = prepare.take() {
                prepare(s);
            }
            let me = s.current.as_ref().expect("a thread runs");
            let runnable = matches!(me.state(), State::Running | State::Ready);
            let index = if runnable { 0 } else { s.ready.iter().position(|t| t.tid != 0).unwrap_or(0) };
            match s.ready.remove(index) {
                Some(next) if Arc::ptr_eq(&next, me) => {
                    me.set_state(State::Running);
                    Pick::Stay
                }
                Some(next) => {
                    s.switches += 1;
                    let previous = s.current.replace(next.clone()).expect("a thread runs");
                    Pick::Switch(previous, next)
                }
                None if runnable => {
                    me.set_state(State::Running);
                    Pick::Stay
                }
                None => Pick::Idle,
            }
        });
        match pick {
            Pick::Stay => return,
            Pick::Switch(previous, next) => {
                switch_to(previous, next);
                return;
            }
            Pick::Idle => {
                cpu::enable_interrupts();
                (hooks().serve)();
                wake_expired();
                if with_scheduler(|s| s.ready.is_empty()) {
                    (hooks().idle)();
                }
                cpu::disable_interrupts();
            }
        }
    }
}

/// Switches from `previous` to `next`, which the scheduler already made `current`.
fn switch_to(previous: Arc<Thread>, next: Arc<Thread>) {
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
    CURRENT_THREAD.store(Arc::as_ptr(&next).cast_mut(), Ordering::Relaxed);
    let root = match &next.owner {
        Some(process) => process.page_table_root(),
        None => crate::percore::shared::this_kcb().page_table_root.load(Ordering::Relaxed),
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
    if !DEAD_WAITING.load(Ordering::Relaxed) {
        return;
    }
    let dead: Vec<Arc<Thread>> = with_scheduler(|s| {
        let current = s.current.clone();
        let (gone, keep): (Vec<_>, Vec<_>) =
            s.dead.drain(..).partition(|t| !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, t)));
        s.dead = keep;
        DEAD_WAITING.store(!s.dead.is_empty(), Ordering::Relaxed);
        gone
    });
    if !dead.is_empty() {
        EXITING.fetch_sub(dead.len() as u32, Ordering::Relaxed);
        drop(dead);
        (hooks().threads_freed)();
    }
}

/// The first code of a new thread after its first switch, before it enters ring 3.
fn on_thread_start(frame: &mut InterruptFrame) {
    after_switch();
    (hooks().thread_start)(frame);
}
