//! A thread whose user code runs on an application core, seen from its home TC (NIX execac).
//!
//! The thread stays a thread of its home: its process, address space, descriptors and
//! signals live here. While it is away its home-side self waits in the kernel, at the point
//! where it would return to ring 3, for the AC's events: a system call runs here as if it had
//! trapped here, a page fault is resolved (or kills) here, a recall lets a signal be delivered
//! here; then the registers go back to the AC and the thread resumes there (NIX figs. 5, 6).

use crate::arch::idt::InterruptFrame;
use crate::arch::user::FpuState;
use crate::core::kcb::Role;
use crate::core::shared;
use crate::proc::Errno;
use crate::proc::ThreadExt;
use crate::sched::{self, WaitToken, Wakeup};
use abi::application::{AcCommand, AcEvent, CommandKind, EventKind, MAX_ROOT_ENTRIES};
use abi::message::Kind;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;

/// The system-call layer's executor (`syscall::execute`), which serves a visitor's trap here:
/// registered by `boot`.
static SYSTEM_CALL_EXECUTOR: spin::Once<fn(&mut InterruptFrame)> = spin::Once::new();

/// Registers what runs a system call a visiting thread brought home (`boot`, once).
pub fn register_system_call_executor(execute: fn(&mut InterruptFrame)) {
    SYSTEM_CALL_EXECUTOR.call_once(|| execute);
}

fn execute_system_call(frame: &mut InterruptFrame) {
    let execute = SYSTEM_CALL_EXECUTOR.get().expect("boot registers the system-call executor before any process runs");
    execute(frame);
}

/// How long a killed thread's home waits for its AC to let go before freeing its memory.
const END_ACK_TIMEOUT_MS: u64 = 200;
/// How often a waiting home looks whether its AC still runs.
const LIVENESS_CHECK_MS: u64 = 100;
/// How long the home polls for its AC's next event before it blocks, when no other thread of
/// the home is ready: the answer to a short call comes back without a halted core's wake-up.
const EVENT_POLL_NS: u64 = 300_000;

/// Where a thread's user code runs while it is away.
#[derive(Clone, Copy, Debug)]
pub struct Away {
    /// The application core.
    pub core: usize,
    /// `abi::call::MOVE_*` flags.
    pub flags: u64,
    /// Whether the AC took it already (a refusal of the first run fails the move).
    pub started: bool,
    /// Its AC is being stopped or restarted: the thread runs at home meanwhile and goes back
    /// at its next kernel entry once the AC runs again.
    pub visiting: bool,
}

/// Events from ACs not yet taken by their thread (private to the instance).
static EVENTS: Mutex<Vec<AcEvent>> = Mutex::new(Vec::new());
/// Threads whose home waits for their AC's acknowledgement of an end; other
/// acknowledgements are dropped on arrival.
static END_WAITERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Shootdown answers not yet counted: (AC, thread).
static FLUSHED: Mutex<Vec<(usize, u32)>> = Mutex::new(Vec::new());
/// How long a shootdown waits for each AC's answer.
const FLUSH_TIMEOUT_MS: u64 = 100;

/// A change of a process's mappings (`munmap`, `mprotect`, `brk`, `mmap`) made while another
/// of its threads runs on an AC: the frames it unmaps are kept until every such AC dropped its
/// cached translations (a TLB shootdown, DESIGN: the home is the only writer, it sends the
/// shootdown and waits for the answer), then freed. Made before the change, finished when
/// dropped (after the caller let go of the process's state).
pub struct MappingChange<'a> {
    process: &'a super::Process,
    /// The other threads away, and their ACs.
    away: Vec<(usize, u32)>,
}

impl<'a> MappingChange<'a> {
    /// Starts a change of `process`'s mappings by the running thread.
    pub fn begin(process: &'a super::Process) -> Self {
        // A single-threaded process has no other thread to be away: no scheduler walk (this
        // runs on every mmap, munmap, mprotect and brk).
        if process.state.lock().threads.len() < 2 {
            return Self { process, away: Vec::new() };
        }
        let me = sched::with_current_thread(|t| t.tid).unwrap_or(0);
        let away: Vec<(usize, u32)> = sched::threads_of(process.pid)
            .iter()
            .filter(|t| t.tid != me)
            .filter_map(|t| t.part().away.lock().map(|away| (away.core, t.tid)))
            .collect();
        if !away.is_empty() {
            process.state.lock().memory.defer_frees();
        }
        Self { process, away }
    }
}

impl Drop for MappingChange<'_> {
    fn drop(&mut self) {
        if self.away.is_empty() {
            return;
        }
        let frames = self.process.state.lock().memory.take_deferred_frees();
        let home = shared::this_core() as u16;
        for &(core, tid) in &self.away {
            send(core, &AcCommand::bare(CommandKind::Flush, home, self.process.pid, tid));
        }
        let deadline = crate::time::deadline_after_ms(FLUSH_TIMEOUT_MS);
        let answered = |flushed: &mut Vec<(usize, u32)>, target: &(usize, u32)| {
            flushed.iter().position(|f| f == target).map(|i| flushed.swap_remove(i)).is_some()
        };
        let mut waiting = self.away.clone();
        while !waiting.is_empty() && crate::arch::cpu::read_tsc() < deadline {
            crate::msg::drain();
            waiting.retain(|target| !answered(&mut FLUSHED.lock(), target) && crate::msg::is_live(target.0));
            crate::arch::cpu::relax();
        }
        if !waiting.is_empty() {
            log::warn!(
                "application cores {waiting:?} did not answer a TLB shootdown in time; their frames are freed anyway"
            );
        }
        crate::mm::user::free_unmapped(frames);
    }
}

/// `reef_move_to_ac(core, flags)`: marks the calling thread to leave for an AC; the move
/// happens on its way back to ring 3 ([`serve`]).
pub fn move_to_ac(core: u64, flags: u64) -> Result<u64, Errno> {
    let thread = sched::current();
    if thread.part().process.is_none() {
        return Err(errno::EPERM);
    }
    if thread.part().away.lock().is_some() {
        return Err(errno::EALREADY);
    }
    if flags & !abi::call::MOVE_SYSPAGE != 0 {
        return Err(errno::EINVAL);
    }
    let core = if core as i64 == -1 { free_application_core().ok_or(errno::EBUSY)? } else { core as usize };
    check_application_core(core)?;
    if flags & abi::call::MOVE_SYSPAGE != 0 {
        crate::syscall::syspage::prepare_for_ac(&thread)?;
    }
    *thread.part().away.lock() = Some(Away { core, flags, started: false, visiting: false });
    Ok(core as u64)
}

/// `reef_return_from_ac()`: the thread (whose call this is, served here) comes home.
pub fn return_from_ac() -> Result<u64, Errno> {
    let thread = sched::current();
    let away = take_away(&thread).ok_or(errno::EALREADY)?;
    end_on(&thread, away.core, false);
    if away.flags & abi::call::MOVE_SYSPAGE != 0 {
        crate::syscall::syspage::thread_leaves(thread.tid);
    }
    Ok(0)
}

fn check_application_core(core: usize) -> Result<(), Errno> {
    let region = shared::get();
    if core >= shared::facts().core_count as usize || core >= crate::msg::messaging_cores() {
        return Err(errno::EINVAL);
    }
    let kcb = region.kcb(core);
    if !kcb.state().is_live() {
        return Err(errno::EAGAIN);
    }
    if kcb.role() != Role::Application {
        return Err(errno::EINVAL);
    }
    if kcb.application_thread.load(Ordering::Acquire) != 0 {
        return Err(errno::EBUSY);
    }
    Ok(())
}

fn free_application_core() -> Option<usize> {
    (0..(shared::facts().core_count as usize).min(crate::msg::messaging_cores()))
        .find(|&core| check_application_core(core).is_ok())
}

/// The core the calling thread's user code runs on (`reef_core`): its AC while away (home
/// while it visits during its AC's restart).
pub fn current_core() -> usize {
    match *sched::current().part().away.lock() {
        Some(away) if !away.visiting => away.core,
        _ => shared::this_core() as usize,
    }
}

/// A thread of a process kept through this home's restart, whose user code ran on `core`:
/// it is away again, and goes back there from its first way to ring 3 ([`serve_first`]).
pub fn adopt_away(thread: &sched::Thread, core: usize, flags: u64) {
    *thread.part().away.lock() = Some(Away { core, flags, started: true, visiting: false });
}

/// At a thread's first entry to ring 3: a thread adopted away ([`adopt_away`]) goes to its AC
/// instead.
pub fn serve_first(frame: &mut InterruptFrame) {
    if current_away().is_some() {
        crate::arch::cpu::enable_interrupts();
        serve(frame);
        crate::arch::cpu::disable_interrupts();
    }
}

/// Whether the running thread is away (a cheap test on every system call's way out).
fn current_away() -> Option<Away> {
    sched::with_current_thread(|thread| *thread.part().away.lock()).flatten()
}

/// What came of one trip of a thread to its AC.
enum Trip {
    /// The thread is home again (or never left): it returns to ring 3 here.
    Home,
    /// Its process is being killed: it ends here.
    Killed,
    /// The AC sent this event; the frame and FPU hold the thread's registers.
    Event(EventKind, u64),
}

/// Where application core `core` is in a stop or restart, as a home sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AcState {
    /// It runs and is not asked to stop: threads go there.
    Ready,
    /// It is asked to stop, stopped with a restart to follow, or booting: threads wait at home.
    Changing,
    /// It stopped for good (or died): threads stay home.
    Gone,
}

fn application_core_state(core: usize) -> AcState {
    let kcb = shared::get().kcb(core);
    let state = kcb.state();
    if state.is_live() && kcb.stop_requested.load(Ordering::Acquire) == 0 {
        AcState::Ready
    } else if kcb.stop_requested.load(Ordering::Acquire) != 0
        || kcb.restart_pending.load(Ordering::Acquire) != 0
        || state == crate::core::kcb::CoreState::Booting
    {
        AcState::Changing
    } else {
        AcState::Gone
    }
}

/// On the way back to ring 3 after a system call (and, for a thread visiting home, after an
/// interrupt): while the thread is away, ships it to its AC and serves what comes back;
/// returns when it is home again, for good or for a visit while its AC restarts.
pub fn serve(frame: &mut InterruptFrame) {
    while let Some(away) = current_away() {
        match application_core_state(away.core) {
            AcState::Ready => set_visiting(false),
            // BF/DC's "no pause": the thread goes on here while its AC restarts.
            AcState::Changing => return set_visiting(true),
            AcState::Gone => {
                log::info!("application core {} stopped: its thread runs at home", away.core);
                sched::with_current_thread(leave);
                return;
            }
        }
        // The thread's and process's references live only for the trip: what runs after it
        // (an exit, a fatal fault) may never return here to drop them.
        let trip = {
            let thread = sched::current();
            let process = thread.part().process.clone().expect("only user threads move");
            travel(frame, &thread, &process, away)
        };
        match trip {
            Trip::Home => return,
            Trip::Killed => super::exit_thread(),
            Trip::Event(EventKind::Syscall, _) => execute_system_call(frame),
            Trip::Event(EventKind::Fault, address) => fault(frame, address),
            Trip::Event(..) => super::thread::before_user_return(frame, None),
        }
    }
}

/// Threads of this instance visiting home while their AC restarts: every interrupt from
/// ring 3 asks, so the usual answer (none) costs no lock.
static VISITORS: AtomicU32 = AtomicU32::new(0);

/// After an interrupt of a thread visiting home: back to its AC if that runs again.
pub fn return_visitor(frame: &mut InterruptFrame) {
    if VISITORS.load(Ordering::Relaxed) != 0 && current_away().is_some_and(|away| away.visiting) {
        serve(frame);
    }
}

fn set_visiting(visiting: bool) {
    sched::with_current_thread(|thread| {
        if let Some(away) = thread.part().away.lock().as_mut() {
            if away.visiting != visiting {
                count_visitor(visiting);
            }
            away.visiting = visiting;
        }
    });
}

fn count_visitor(arrives: bool) {
    if arrives {
        VISITORS.fetch_add(1, Ordering::Relaxed);
    } else {
        VISITORS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The thread is no longer away (home for good, or ending): its record, taken.
fn take_away(thread: &sched::Thread) -> Option<Away> {
    let away = thread.part().away.lock().take();
    if away.is_some_and(|away| away.visiting) {
        count_visitor(false);
    }
    away
}

fn travel(frame: &mut InterruptFrame, thread: &sched::Thread, process: &super::Process, away: Away) -> Trip {
    let Some(incarnation) = ship(frame, thread, process, away) else {
        // The AC began to stop meanwhile: `serve` decides between a visit and a move home.
        return Trip::Event(EventKind::Suspended, 0);
    };
    let event = match wait_event(thread, away.core, incarnation) {
        Waited::Event(event) => event,
        Waited::Killed => return Trip::Killed,
        // The AC was restarted before it took the run: it goes again once the new kernel runs
        // (the loop in `serve` sees the AC changing or ready).
        Waited::Lost => return Trip::Event(EventKind::Suspended, 0),
        Waited::Gone => {
            log::warn!("application core {} stopped answering: thread {} runs at home", away.core, thread.tid);
            leave(thread);
            return Trip::Home;
        }
    };
    match event.kind {
        EventKind::Refused => {
            leave(thread);
            if !away.started {
                frame.rax = (-i64::from(event.errno)) as u64;
            }
            return Trip::Home;
        }
        EventKind::Ended => {
            leave(thread);
            return Trip::Home;
        }
        _ => {}
    }
    if let Some(current) = thread.part().away.lock().as_mut() {
        current.started = true;
    }
    *frame = InterruptFrame::from_registers(&event.registers);
    let mut fpu = Box::new(FpuState(event.fpu));
    fpu.sanitize();
    // The thread runs here now: its FPU registers are this core's.
    fpu.restore();
    Trip::Event(event.kind, event.fault_address)
}

/// What waiting for an AC's event came to.
enum Waited {
    Event(Box<AcEvent>),
    /// The thread's process is being killed.
    Killed,
    /// The AC stopped and is not coming back (or stopped answering).
    Gone,
    /// The AC was restarted and its new kernel never saw the run.
    Lost,
}

/// Sends the thread's registers, FPU image, TLS base and page-table roots to its AC; the
/// AC's incarnation it went to, `None` if the AC is not ready.
fn ship(frame: &InterruptFrame, thread: &sched::Thread, process: &super::Process, away: Away) -> Option<u32> {
    if application_core_state(away.core) != AcState::Ready {
        return None;
    }
    let mut command = Box::new(AcCommand::bare(CommandKind::Run, shared::this_core() as u16, process.pid, thread.tid));
    command.flags = away.flags as u8;
    command.incarnation = shared::get().kcb(away.core).incarnation.load(Ordering::Acquire) as u32;
    command.registers = frame.registers();
    let mut fpu = Box::new(FpuState::initial());
    fpu.save();
    command.fpu = fpu.0;
    command.fs_base = thread.fs_base.load(Ordering::Relaxed);
    if away.flags & abi::call::MOVE_SYSPAGE != 0 && crate::syscall::syspage::of_thread(thread.tid).is_none() {
        // `execve` dropped the old address space and the syspage in it: a new one (or, with
        // no kernel core left, traps go to the home).
        let _ = crate::syscall::syspage::prepare_for_ac(thread);
    }
    if let Some((kernel_core, page)) = crate::syscall::syspage::of_thread(thread.tid) {
        command.kernel_core = kernel_core as u16;
        command.syspage = page;
    }
    let mut entries = [(0u16, 0u64); MAX_ROOT_ENTRIES];
    let (count, mappings) = {
        let state = process.state.lock();
        (state.memory.top_level_entries(&mut entries), state.memory.mapping_generation())
    };
    command.root_entries = entries;
    command.root_entry_count = count as u8;
    command.mappings = mappings;
    send(away.core, &command).then_some(command.incarnation)
}

fn send(core: usize, command: &AcCommand) -> bool {
    let mut bytes = alloc::vec![0u8; AcCommand::SIZE];
    command.encode(&mut bytes);
    let sent = crate::msg::send_large_draining(core, Kind::AcCommand, &bytes).is_ok();
    if sent && command.kind != CommandKind::Run {
        // A recall, an end or a shootdown must reach a thread that computes without a system
        // call: its AC looks at messages only when it enters the kernel, and a core running
        // user code is not armed for the usual notification. A run answers an AC that waits
        // for it, and needs no interrupt.
        crate::msg::notify(core, crate::msg::NotifyMode::Ipi);
    }
    sent
}

fn take_event(tid: u32) -> Option<AcEvent> {
    let mut events = EVENTS.lock();
    let index = events.iter().position(|event| event.tid == tid)?;
    Some(events.swap_remove(index))
}

/// Waits for the AC's next event. A signal for the thread recalls it (the AC answers with
/// its registers); a kill ends it there at once. When the AC stops (a boot driver's stop or
/// restart), the old kernel handed the registers back (a `Suspended` event), or never took
/// the run ([`Waited::Lost`]): either way the thread visits home until the AC runs again.
fn wait_event(thread: &sched::Thread, core: usize, incarnation: u32) -> Waited {
    let mut recalled = false;
    let kcb = shared::get().kcb(core);
    loop {
        if let Some(event) = take_event(thread.tid) {
            return Waited::Event(Box::new(event));
        }
        // (A process kept here is asked too: `is_asked` covers both.)
        if !recalled && thread.part().process.as_ref().is_some_and(|process| super::migrate::is_asked(process)) {
            // This home restarts and keeps the process, or it moves to another TC: the thread
            // checks in at home with its registers, as for a signal (the AC holds it until
            // the home it then has ships it back).
            recalled = true;
            let pid = thread.part().process.as_ref().map_or(0, |p| p.pid);
            send(core, &AcCommand::bare(CommandKind::Recall, shared::this_core() as u16, pid, thread.tid));
        }
        // Calls of its syspage a kernel core handed back (`execac --syspage`).
        crate::syscall::syspage::run_forwarded();
        if !crate::msg::is_live(core) {
            // It stopped: what it sent before is in our queue by now (its stores precede the
            // state's Release); without a `Suspended`, it never took the run.
            crate::msg::drain();
            if let Some(event) = take_event(thread.tid) {
                return Waited::Event(Box::new(event));
            }
            return if application_core_state(core) == AcState::Gone { Waited::Gone } else { Waited::Lost };
        }
        if kcb.incarnation.load(Ordering::Acquire) as u32 != incarnation {
            // Whatever the old kernel sent before it stopped is in our queue by now.
            crate::msg::drain();
            return take_event(thread.tid).map_or(Waited::Lost, |event| Waited::Event(Box::new(event)));
        }
        if !recalled && !sched::others_ready() {
            let polling = crate::time::SpinDeadline::after_cycles(crate::time::ns_to_cycles(EVENT_POLL_NS));
            while !polling.passed() && !sched::others_ready() {
                crate::msg::drain();
                if let Some(event) = take_event(thread.tid) {
                    return Waited::Event(Box::new(event));
                }
                if crate::syscall::syspage::has_forwarded() {
                    break;
                }
                crate::arch::cpu::relax();
            }
        }
        let deadline = Some(crate::time::deadline_after_ms(LIVENESS_CHECK_MS));
        let wakeup = if recalled {
            sched::block_uninterruptible(WaitToken::Away(thread.tid), deadline)
        } else {
            sched::block(WaitToken::Away(thread.tid), deadline)
        };
        match wakeup {
            // A move waits until the thread is home (`block` does not end an away thread's
            // wait for it).
            Wakeup::Woken | Wakeup::TimedOut | Wakeup::Moving => {}
            Wakeup::Killed => {
                let away = take_away(thread);
                if let Some(away) = away {
                    end_on(thread, away.core, true);
                }
                return Waited::Killed;
            }
            Wakeup::Interrupted => {
                if !recalled {
                    recalled = true;
                    let pid = thread.part().process.as_ref().map_or(0, |p| p.pid);
                    send(core, &AcCommand::bare(CommandKind::Recall, shared::this_core() as u16, pid, thread.tid));
                }
            }
        }
    }
}

/// A fault of the thread on its AC: resolved here (the AC retries with fresh tables) or the
/// process dies of it, as it would at home.
fn fault(frame: &mut InterruptFrame, address: u64) {
    if frame.vector == 14 {
        let write = frame.error_code & 2 != 0;
        let execute = frame.error_code & 16 != 0;
        let resolved = address < crate::arch::user::USER_END
            && crate::proc::current_process()
                .is_some_and(|p| p.with_memory(|memory| memory.handle_fault(address, write, execute)));
        if resolved {
            super::thread::before_user_return(frame, None);
            return;
        }
    }
    super::kill_for_fault(frame, address)
}

/// Tells the AC the thread is over there; with `wait`, until it let go of the process's
/// tables (a killed thread's AC may still be running its code).
fn end_on(thread: &sched::Thread, core: usize, wait: bool) {
    let pid = thread.part().process.as_ref().map_or(0, |p| p.pid);
    if wait {
        END_WAITERS.lock().push(thread.tid);
    }
    let sent = send(core, &AcCommand::bare(CommandKind::End, shared::this_core() as u16, pid, thread.tid));
    if sent && wait {
        let deadline = crate::time::deadline_after_ms(END_ACK_TIMEOUT_MS);
        while crate::arch::cpu::read_tsc() < deadline && crate::msg::is_live(core) {
            crate::msg::drain();
            if let Some(event) = take_event(thread.tid) {
                if event.kind == EventKind::Ended {
                    break;
                }
            }
            crate::arch::cpu::relax();
        }
    }
    END_WAITERS.lock().retain(|&tid| tid != thread.tid);
    EVENTS.lock().retain(|event| event.tid != thread.tid);
}

fn leave(thread: &sched::Thread) {
    take_away(thread);
    EVENTS.lock().retain(|event| event.tid != thread.tid);
}

/// The thread's process moved to another TC, whose copy of the thread ships it back to its
/// AC: this home forgets it there without ending it.
pub fn moved_away_from_here(thread: &sched::Thread) {
    leave(thread);
}

/// The thread is ending (exit, kill): its AC drops it.
pub fn thread_leaves(thread: &sched::Thread) {
    let away = take_away(thread);
    if let Some(away) = away {
        end_on(thread, away.core, false);
    }
}

fn on_event(bytes: &[u8]) -> crate::msg::HandlerResult {
    let event = AcEvent::decode(bytes)?;
    let tid = event.tid;
    if event.kind == EventKind::Flushed {
        FLUSHED.lock().push((usize::from(event.core), tid));
        return Ok(());
    }
    if event.kind == EventKind::Ended && !END_WAITERS.lock().contains(&tid) {
        return Ok(());
    }
    {
        let mut events = EVENTS.lock();
        // One event per thread at a time; a late acknowledgement no thread waits for is dropped
        // when its thread leaves.
        events.retain(|old| old.tid != tid);
        events.push(event);
    }
    sched::wake(WaitToken::Away(tid), 1);
    Ok(())
}

/// Registers the home side's message handler.
pub fn init() {
    use crate::msg::{register, Handler};
    register(Kind::AcEvent, Handler { high_priority: true, on_line: None, on_large: Some(on_event) });
}
