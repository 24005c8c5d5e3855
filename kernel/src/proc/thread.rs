//! What a process keeps per thread, in the scheduler's extension slot, and the thread's way
//! back to ring 3.

use super::signal::{self, InterruptedCall, ThreadSignals};
use super::Process;
use crate::arch::idt::InterruptFrame;
use crate::sched::{self, Owner, Thread, Wakeup};
use alloc::boxed::Box;
use alloc::sync::Arc;
use core::sync::atomic::AtomicU64;
use spin::Mutex;

/// The process layer's part of a thread (the scheduler holds it as its extension).
pub struct ThreadPart {
    /// The process it belongs to; `None` for the boot thread.
    pub process: Option<Arc<Process>>,
    /// `set_tid_address`/`CLONE_CHILD_CLEARTID`: zeroed and futex-woken at exit.
    pub clear_child_tid: AtomicU64,
    /// Its blocked mask, signals sent to it alone, its alternate stack.
    pub signals: ThreadSignals,
    /// Where its user code runs when not here: an application core (NIX execac). Its home
    /// serves its traps, see `proc::remote`.
    pub away: Mutex<Option<super::remote::Away>>,
    /// A sleep cut short by a move of its process, which `restart_syscall` finishes: its end
    /// (monotonic ns) and where the time left goes if a signal ends it.
    pub restart_sleep: Mutex<Option<(u64, u64)>>,
}

impl ThreadPart {
    /// The part of a thread of `process` (or of the boot thread, `None`) blocking `signals`.
    pub fn new(process: Option<Arc<Process>>, signals: ThreadSignals) -> Box<Self> {
        Box::new(Self {
            process,
            clear_child_tid: AtomicU64::new(0),
            signals,
            away: Mutex::new(None),
            restart_sleep: Mutex::new(None),
        })
    }

    /// The boot thread's part: no process, nothing blocked.
    pub fn boot() -> Box<Self> {
        Self::new(None, ThreadSignals::new(0))
    }
}

/// The process layer's view of a scheduler thread.
pub trait ThreadExt {
    /// Its [`ThreadPart`].
    fn part(&self) -> &ThreadPart;
}

impl ThreadExt for Thread {
    fn part(&self) -> &ThreadPart {
        // Every thread is made by this layer (`new_thread`, or the boot thread's part from
        // `boot`), so the extension is always a `ThreadPart`.
        self.extension::<ThreadPart>().expect("every thread carries a ThreadPart")
    }
}

impl Owner for Process {
    fn id(&self) -> u32 {
        self.pid
    }

    fn page_table_root(&self) -> u64 {
        Process::page_table_root(self)
    }

    fn parent_id(&self) -> u32 {
        self.parent.pid
    }

    fn with_address_space(&self, work: &mut dyn FnMut(&mut crate::mm::user::AddressSpace)) {
        self.with_memory(|memory| work(memory));
    }
}

/// A user thread `tid` of `process`, ready to enter ring 3 with `frame`.
pub fn new_thread(
    tid: u32,
    process: Arc<Process>,
    frame: &InterruptFrame,
    fpu: crate::arch::user::FpuState,
    fs_base: u64,
    signals: ThreadSignals,
) -> Result<Arc<Thread>, crate::arch::stacks::StackError> {
    let owner: Arc<dyn Owner> = process.clone();
    Thread::new_user(tid, owner, frame, fpu, fs_base, ThreadPart::new(Some(process), signals))
}

/// Runs `work` with the running thread's process, if it has one, without taking the
/// scheduler's lock (the fast path of calls like `getppid`).
pub fn with_current_process<T>(work: impl FnOnce(&Process) -> T) -> Option<T> {
    sched::with_current_thread(|thread| thread.part().process.as_deref().map(work)).flatten()
}

/// The process of the running thread, if it is a user thread.
pub fn current_process() -> Option<Arc<Process>> {
    sched::current().part().process.clone()
}

/// The scheduler's `wakeup_before_block` hook: a thread of a killed process does not block; an
/// interruptible wait ends at once for a pending signal or a move of its process.
pub fn wakeup_before_block(thread: &Thread, interruptible: bool) -> Option<Wakeup> {
    let process = thread.part().process.as_ref()?;
    if process.is_killed() {
        Some(Wakeup::Killed)
    } else if interruptible && signal::would_interrupt(thread, process) {
        Some(Wakeup::Interrupted)
    } else if interruptible && super::migrate::is_asked(process) {
        // A thread away on an AC checks in at home like the others: its home-side self
        // recalls it from its AC, then waits uninterruptibly for its registers.
        Some(Wakeup::Moving)
    } else {
        None
    }
}

/// On the way back to ring 3 with `frame` (after a system call or an interrupt from user
/// mode): handles this core's messages, ends a killed thread, switches if the slice is over,
/// and last delivers pending signals, settling `interrupted` (the system call a signal cut
/// short, if any: it fails with `EINTR` or runs again).
pub fn before_user_return(frame: &mut InterruptFrame, interrupted: Option<InterruptedCall>) {
    if sched::take_look_at_messages() {
        crate::msg::drain();
        crate::fs::at_safe_point();
        super::migrate::at_safe_point();
        super::timer::fire_due();
    }
    if with_current_process(|p| p.is_killed()) == Some(true) {
        super::exit_thread();
    }
    crate::syscall::syspage::run_forwarded();
    // Killed while it waited for the CPU.
    if sched::end_slice_if_due() && with_current_process(|p| p.is_killed()) == Some(true) {
        super::exit_thread();
    }
    if interrupted.is_some() || sched::with_current_thread(signal::needs_delivery) == Some(true) {
        signal::deliver(frame, interrupted);
    }
    // Last: the frame is what ring 3 would get, a cut-short call rewound to run again.
    if with_current_process(super::migrate::is_asked) == Some(true) {
        super::migrate::move_current(frame);
    }
}

/// The trap table's `resolve_user_fault` hook: demand-zero memory (or another resolvable
/// fault) of the running process at `address`; whether its memory resolved it.
pub fn resolve_user_fault(address: u64, write: bool, execute: bool) -> bool {
    // A copy never runs with the process's state locked (see `syscall`), so this lock cannot
    // be held by the code that faulted.
    current_process().is_some_and(|process| process.with_memory(|memory| memory.handle_fault(address, write, execute)))
}

/// The scheduler's `thread_start` hook: a new thread's first code before ring 3 (a thread
/// adopted with its syspage, one that arrived to serve a visitor, or the first of a process
/// spawned from another instance that loads its program itself).
pub fn on_thread_start(frame: &mut InterruptFrame) {
    crate::syscall::syspage::serve_adopted();
    super::remote::serve_first(frame);
    super::run_pending_exec(frame);
}
