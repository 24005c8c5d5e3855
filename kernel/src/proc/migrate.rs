//! Moving a process to another timesharing core's kernel: NIX's "a core whose role changes to
//! AC hands its processes to its TCs first", done the multikernel way (Popcorn's migration).
//!
//! The process keeps its pid and tids (so its parent, its group and whoever signals it still
//! name it), its memory (copied page by page into the receiver's partition), its descriptors
//! (one more reference each at the file service), its signal state, children and registers.
//! Where each id lives is written in the KCB of the OSnode whose range it is from
//! (`moved_away`), which every core reads to route by pid or tid ([`super::home_of`]).
//!
//! The steps:
//! 1. The OSnode that gives its processes up ([`evacuate`], asked by ICC) marks each with a
//!    destination and wakes its threads from interruptible waits (`Wakeup::Moving`): a call
//!    gives up as a signal would make it, to run again on the destination.
//! 2. Each thread, on its way back to ring 3 (`sched::before_user_return`, after signal
//!    delivery settled a restart), checks in with its registers, FPU image, TLS and signal
//!    state ([`move_current`]); the last to do so packs the process: those, its dispositions,
//!    pending signals, descriptors, children, areas, and the frames of its present pages, and
//!    sends it as one large message. The others wait for the outcome.
//! 3. The destination ([`on_move`]) checks the image, copies every page into frames of its
//!    own through its copy window, adopts the descriptors, builds the process and its threads
//!    with the same pid and tids, records where they live, and answers.
//! 4. On a yes, the threads at the origin end there and the process is taken down without an
//!    exit (no status to the parent: the process goes on); signals that reached the origin
//!    while it packed are sent on. On a no or no answer, every thread runs on where it was.
//!
//! A process with more threads than a KCB records (64) stays; the refusal says so. A thread's
//! syspage goes with it: its kernel core lets go of the page as the thread checks in, and
//! the destination registers its copy (`syscall::syspage::release_for_move`, `adopt_released`).

use super::{find, home_of, range_of, signal, Child, Errno, Parent, Process, ProcessState, PIDS, PROCESSES};
use crate::arch::idt::InterruptFrame;
use crate::arch::paging::PAGE_SIZE;
use crate::arch::user::{self, FpuState};
use crate::core::kcb::{PartitionRange, Role};
use crate::core::shared;
use crate::fs::{FileTable, Handle};
use crate::mm::user::{AddressSpace, Area, AreaKind, MemoryError, PageSource, Protection};
use crate::proc::ThreadExt;
use crate::sched::{self, Thread, WaitToken, Wakeup};
use abi::message::Kind;
use abi::migration::{
    MoveHeader, MoveImage, MoveParts, MoveReply, MovedAction, MovedArea, MovedChild, MovedDescriptor, MovedPage,
    MovedSignal, MovedThread, NOT_EXITED, NO_RESTART, SIGNALS,
};
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;

/// `Process::moving` when no move is asked; else the destination core plus one, with
/// [`PACKING`] once its thread packs it.
pub const NOT_MOVING: u32 = 0;
const PACKING: u32 = 1 << 31;
/// `Process::returns_to` when it goes back nowhere.
pub const NO_RETURN: u64 = u64::MAX;
/// Whether a process of this instance may go back to a restarted core (looked at, at safe
/// points, only while set).
static RETURNING: AtomicBool = AtomicBool::new(false);
/// Whether a line waits in [`UNSENT`] (sent at the next safe point).
static LINES_HELD: AtomicBool = AtomicBool::new(false);

/// How long a packed process waits for the destination's answer.
const MOVE_TIMEOUT_MS: u64 = 2000;

/// Whether `process` was asked to move and its thread has not started packing: its waits end
/// at once ([`Wakeup::Moving`]) so that it reaches its way back to ring 3.
pub fn is_asked(process: &Process) -> bool {
    let moving = process.moving.load(Ordering::Relaxed);
    moving != NOT_MOVING && moving & PACKING == 0
}

/// Whether `process`'s image for a move is made (or being made, under its state lock): what
/// it learns now does not go with the image.
pub(super) fn is_packed(process: &Process) -> bool {
    process.moving.load(Ordering::Relaxed) & PACKING != 0
}

/// Its children's exits that came after its image was made, taken: they are recorded here
/// (the move failed: the process stays) or sent after it.
fn take_late_exits(process: &Process) -> Vec<abi::process::ChildExited> {
    core::mem::take(&mut *process.late_exits.lock())
}

/// The table of ids of OSnode `range` that live elsewhere.
fn table_of(range: usize) -> Option<kcb::block::MovedTable<'static>> {
    shared::get().listed_kcbs().get(range).map(|kcb| kcb.moved_away.table())
}

/// Where process `pid`, of OSnode `range`'s pid range, lives if it moved away from there.
pub fn moved_to(range: usize, pid: u32) -> Option<usize> {
    table_of(range)?.core_of(pid).map(|core| core as usize)
}

/// Records that `id` (a pid or tid) lives on this core now, in its range's KCB; one back in its
/// own range needs no record.
fn record_here(id: u32) -> Result<(), Errno> {
    let me = shared::this_core();
    let range = range_of(id);
    let table = table_of(range).ok_or(errno::EINVAL)?;
    if range == me as usize {
        PIDS.lock().used.insert(id);
        table.forget(id);
        return Ok(());
    }
    if table.record(id, me) {
        Ok(())
    } else {
        Err(errno::ENOSPC)
    }
}

/// Undoes [`record_here`] of `id` when the move fails after it: the id lives on `origin`
/// again.
fn give_back(id: u32, origin: usize) {
    let Some(table) = table_of(range_of(id)) else { return };
    if range_of(id) == shared::this_core() as usize {
        PIDS.lock().used.remove(&id);
    }
    if range_of(id) == origin {
        table.forget(id);
    } else {
        table.record(id, origin as u32);
    }
}

/// Whether [`record_here`] would find a slot for `id`.
fn can_record(id: u32) -> bool {
    range_of(id) == shared::this_core() as usize || table_of(range_of(id)).is_some_and(|t| t.has_room_for(id))
}

/// The process or thread `id` ended (or came back to its range's OSnode): its range may hand
/// the id out again.
pub fn forget_moved(id: u32) {
    if let Some(table) = table_of(range_of(id)) {
        table.forget(id);
    }
}

/// Why a process cannot move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CannotMove {
    /// It has this many threads, more than its range's KCB records.
    Threads(usize),
    /// The kernel core of a thread's syspage did not let go of it.
    HasSyspage,
    /// It is ending.
    Ending,
    /// It takes part in a `vfork` that is not over (one address space, two processes).
    InAVfork,
    /// A stop signal stopped it (its threads wait for a SIGCONT, not for a move).
    Stopped,
}

impl CannotMove {
    /// As a small number for an ICC's answer (see `core::role`).
    pub fn code(self) -> u32 {
        match self {
            Self::Threads(count) => count.min(0xFFFF) as u32,
            Self::HasSyspage => 0x2_0000,
            Self::Ending => 0x3_0000,
            Self::InAVfork => 0x4_0000,
            Self::Stopped => 0x5_0000,
        }
    }

    pub fn from_code(code: u32) -> Self {
        match code {
            0x2_0000 => Self::HasSyspage,
            0x3_0000 => Self::Ending,
            0x4_0000 => Self::InAVfork,
            0x5_0000 => Self::Stopped,
            count => Self::Threads(count as usize),
        }
    }
}

impl core::fmt::Display for CannotMove {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Threads(count) => {
                write!(f, "it has {count} threads, more than a KCB records ({})", kcb::block::MAX_MOVED_AWAY)
            }
            Self::HasSyspage => write!(f, "the kernel core of a thread's syspage did not let go of it"),
            Self::Ending => write!(f, "it is ending"),
            Self::InAVfork => write!(f, "it shares its address space with a vforked child or parent until an exec"),
            Self::Stopped => write!(f, "it is stopped: continue it first (kill -s CONT)"),
        }
    }
}

fn why_it_cannot_move(process: &Process) -> Option<CannotMove> {
    why_it_cannot_go(process, Going::Elsewhere)
}

/// Where a process is asked to go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Going {
    /// To another core.
    Elsewhere,
    /// Nowhere: kept for this OSnode's next kernel, which follows at once (a restart).
    ThroughRestart,
    /// Nowhere: kept in the KCB until a start, however long the core stays stopped.
    UntilStart,
}

/// Why `process` cannot go as asked.
fn why_it_cannot_go(process: &Process, going: Going) -> Option<CannotMove> {
    if process.is_killed() {
        return Some(CannotMove::Ending);
    }
    if process.is_in_a_vfork() {
        return Some(CannotMove::InAVfork);
    }
    if process.is_stopped() {
        return Some(CannotMove::Stopped);
    }
    let threads = process.state.lock().threads.len();
    // Each thread's tid is recorded in its range's KCB while it lives elsewhere.
    if going == Going::Elsewhere && threads > kcb::block::MAX_MOVED_AWAY {
        return Some(CannotMove::Threads(threads));
    }
    // A thread on an AC is recalled and goes with its process: its new home ships it back to
    // the AC, which takes it from the home the pid's range names (NIX's execac, with a home
    // that changes). Through a stop until a start the AC holds it (halted), as through a
    // restart, and the kernel after the start ships it back. A syspage goes along too: its
    // KC serves it on through a restart of its home (the next kernel is the same home); for
    // a move, or a stop that keeps the process until a start, the KC lets go of it as the
    // thread checks in, and the destination (or the kernel after the start) registers it
    // again.
    None
}

/// On the OSnode giving its processes up: asks each to move to one of `destinations` (a bit
/// set of cores), each to the one with the fewest processes then (core 0, which runs the
/// shell and the devices, last among equals); returns how many, or the first that cannot
/// move (then none is asked). With `come_back` (a restart) each goes back to this OSnode once
/// its next kernel runs as a TC.
pub fn evacuate(destinations: u64, come_back: bool) -> Result<u32, (u32, CannotMove)> {
    let me = shared::this_core();
    let region = shared::get();
    let mut loads: Vec<(u32, u32)> = (0..region.listed_kcbs().len().min(64) as u32)
        .filter(|&c| c != me && destinations & (1 << c) != 0)
        .map(|c| (c, region.kcb(c as usize).processes.live.load(Ordering::Relaxed)))
        .collect();
    let processes = super::all();
    for process in &processes {
        if let Some(reason) = why_it_cannot_move(process) {
            return Err((process.pid, reason));
        }
    }
    for process in &processes {
        let Some(least) = loads.iter_mut().min_by_key(|(core, load)| (*load, core::cmp::Reverse(*core))) else {
            return Ok(0);
        };
        least.1 += 1;
        if come_back {
            // This OSnode restarts: the process comes back to its next kernel.
            let incarnation = shared::this_kcb().incarnation.load(Ordering::Relaxed) as u32;
            process.returns_to.store(u64::from(me) << 32 | u64::from(incarnation), Ordering::Relaxed);
        }
        process.moving.store(least.0 + 1, Ordering::Relaxed);
        sched::wake_for_move(process.pid);
    }
    // Threads preempted on their way to ring 3 get there when they run; one computing in ring
    // 3 at its next kernel entry (the next tick at the latest).
    Ok(processes.len() as u32)
}

/// `EVACUATE`'s second argument when the OSnode restarts with an image that runs
/// timesharing: its processes stay, kept for the next kernel (`proc::keep`).
pub const KEEP: u64 = 2;

/// `EVACUATE`'s second argument for a stop that keeps the OSnode's processes in its KCB until
/// a start (`core stop --keep`).
pub const KEEP_UNTIL_START: u64 = 3;

/// On the OSnode about to restart (or to stop, `until_start`): asks every process to stay for
/// the next kernel; returns how many, or the first that cannot (then none is asked). A
/// thread on an AC waits out a restart there, but not a stop of unknown length.
pub fn keep_all(until_start: bool) -> Result<u32, (u32, CannotMove)> {
    let processes = super::all();
    for process in &processes {
        let going = if until_start { Going::UntilStart } else { Going::ThroughRestart };
        if let Some(reason) = why_it_cannot_go(process, going) {
            return Err((process.pid, reason));
        }
    }
    processes.iter().for_each(super::keep::ask);
    Ok(processes.len() as u32)
}

/// How long `reef_move_process` waits for a process to get where it was sent.
const MOVE_PROCESS_TIMEOUT_MS: u64 = 3000;

/// `reef_move_process(pid, core)`: moves process `pid` (0: the caller's) to timesharing core
/// `core`; returns once it lives there (the caller's own process: once it is asked to, the
/// call's answer reaching it there).
pub fn move_process(pid: u32, core: usize) -> Result<u64, Errno> {
    let region = shared::get();
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    let kcb = region.listed_kcbs().get(core).filter(|_| core < count).ok_or(errno::EINVAL)?;
    if kcb.state() != crate::core::kcb::CoreState::Running {
        return Err(errno::EAGAIN);
    }
    if kcb.role() != Role::Timesharing || kcb.parking.host().is_some() {
        return Err(errno::EBUSY);
    }
    let caller = crate::proc::current_process().ok_or(errno::ESRCH)?;
    let pid = if pid == 0 { caller.pid } else { pid };
    let home = home_of(pid);
    if home == core {
        // There already (whether it lives is its home's to know: a kill would tell).
        if core == shared::this_core() as usize && find(pid).is_none() {
            return Err(errno::ESRCH);
        }
        return Ok(core as u64);
    }
    if pid == caller.pid {
        // It moves on its way back to ring 3, this call's answer with it.
        ask_to_move(&caller, core)?;
        return Ok(core as u64);
    }
    if home == shared::this_core() as usize {
        ask_to_move(&*find(pid).ok_or(errno::ESRCH)?, core)?;
    } else {
        let answer = crate::msg::icc::call(
            home,
            abi::message::handler::MOVE_PROCESS,
            [u64::from(pid), core as u64, 0, 0, 0],
            crate::msg::SEND_TIMEOUT_MS,
        )
        .map_err(|_| errno::ESRCH)?;
        if answer != 0 {
            return Err(answer as Errno);
        }
    }
    if !sched::sleep_while(MOVE_PROCESS_TIMEOUT_MS, || home_of(pid) != core) {
        return Err(errno::ETIMEDOUT);
    }
    Ok(core as u64)
}

/// Marks `process` (homed here) to move to `core`, unless it cannot.
fn ask_to_move(process: &Process, core: usize) -> Result<(), Errno> {
    if let Some(reason) = why_it_cannot_move(process) {
        log::info!("process {} cannot move to core {core}: {reason}", process.pid);
        return Err(errno::EBUSY);
    }
    process.moving.store(core as u32 + 1, Ordering::Relaxed);
    sched::wake_for_move(process.pid);
    Ok(())
}

/// ICC handler: move process `arguments[0]`, homed here, to core `arguments[1]` (0, or an
/// errno).
fn on_move_process(arguments: &[u64; abi::message::ICC_ARGUMENTS]) -> Result<u64, abi::message::IccStatus> {
    let pid = u32::try_from(arguments[0]).map_err(|_| abi::message::IccStatus::BadArguments)?;
    let core = usize::try_from(arguments[1]).map_err(|_| abi::message::IccStatus::BadArguments)?;
    Ok(match find(pid) {
        None => u64::from(errno::ESRCH),
        Some(process) => ask_to_move(&process, core).err().map_or(0, u64::from),
    })
}

/// Answers to moves this instance sent, by move id: `None` until the destination answers.
static ANSWERS: Mutex<BTreeMap<u64, Option<u32>>> = Mutex::new(BTreeMap::new());
static NEXT_MOVE: AtomicU64 = AtomicU64::new(1);

/// The threads of a process being moved that reached their way back to ring 3, by pid: their
/// states, whether one of them packs, and how the move ended once it did.
#[derive(Default)]
struct Gathering {
    threads: Vec<MovedThread>,
    packing: bool,
    outcome: Option<bool>,
    /// Threads that saw the outcome (the last one out removes the gathering).
    done: usize,
}

static GATHERINGS: Mutex<BTreeMap<u32, Gathering>> = Mutex::new(BTreeMap::new());
/// The wait token of a process's gathering: `Reply(GATHERING | pid)`.
const GATHERING: u64 = 1 << 62;
/// How often a thread waiting in a gathering looks whether it is complete (a thread that
/// exited meanwhile makes it so without checking in).
const GATHERING_POLL_MS: u64 = 10;

/// Whether `process` is asked to stay for this core's next kernel (`proc::keep`).
pub fn is_kept_here(process: &Process) -> bool {
    process.moving.load(Ordering::Relaxed) & !PACKING == shared::this_core() + 1
}

/// On the way back to ring 3 of the running thread, whose process was asked to move: the
/// thread checks in with its state; the last of the process's threads to do so packs the
/// process and hands it over, the others wait for the outcome. Returns only if the move
/// failed (every thread runs on here, its frame untouched); on success the threads end here,
/// their process going on elsewhere.
pub fn move_current(frame: &mut InterruptFrame) {
    let me = sched::current();
    let Some(process) = me.part().process.clone() else { return };
    if is_kept_here(&process) {
        // Kept here for this core's next kernel.
        drop((me, process));
        return super::keep::stay_current(frame);
    }
    let pid = process.pid;
    // Its syspage's kernel core lets go of it (its calls in flight done), so the image
    // carries the page as it stands; should the move not happen, it is served again.
    crate::syscall::syspage::release_for_move(&me);
    let mine = capture_thread(&me, frame);
    let live = || process.state.lock().threads.len();
    let threads_now = live();
    let mut packer = {
        let mut gatherings = GATHERINGS.lock();
        let gathering = gatherings.entry(pid).or_default();
        gathering.threads.push(mine);
        let complete = !gathering.packing && gathering.threads.len() >= threads_now;
        gathering.packing |= complete;
        complete
    };
    while !packer {
        let deadline = crate::time::deadline_after_ms(GATHERING_POLL_MS);
        let _ = sched::block_uninterruptible(WaitToken::Reply(GATHERING | u64::from(pid)), Some(deadline));
        let threads_now = live();
        let mut gatherings = GATHERINGS.lock();
        let Some(gathering) = gatherings.get_mut(&pid) else {
            drop(gatherings);
            return crate::syscall::syspage::resume_after_move(&me);
        };
        match gathering.outcome {
            Some(moved) => {
                gathering.done += 1;
                if gathering.done >= gathering.threads.len() {
                    gatherings.remove(&pid);
                }
                drop(gatherings);
                if moved {
                    drop(process);
                    exit_moved_thread(me)
                }
                return crate::syscall::syspage::resume_after_move(&me);
            }
            None if !gathering.packing && gathering.threads.len() >= threads_now => {
                gathering.packing = true;
                packer = true;
            }
            None => {}
        }
    }
    let asked = process.moving.fetch_or(PACKING, Ordering::Relaxed);
    let destination = (asked & !PACKING).wrapping_sub(1) as usize;
    let threads = GATHERINGS.lock().get(&pid).map(|g| g.threads.clone()).unwrap_or_default();
    let result = match why_it_cannot_move(&process).or_else(|| syspage_not_released(&threads)) {
        Some(reason) => {
            log::info!("process {pid} stays on core {}: {reason}", shared::this_core());
            Err(errno::EBUSY)
        }
        None => hand_over(&process, &threads, destination),
    };
    if let Err(error) = result {
        log::warn!("process {pid} could not move to core {destination}: {}; it runs on here", error_text(error));
        process.moving.store(NOT_MOVING, Ordering::Relaxed);
        for exited in take_late_exits(&process) {
            super::record_exit(&exited);
        }
    }
    {
        let mut gatherings = GATHERINGS.lock();
        if let Some(gathering) = gatherings.get_mut(&pid) {
            gathering.outcome = Some(result.is_ok());
            gathering.done += 1;
            if gathering.done >= gathering.threads.len() {
                gatherings.remove(&pid);
            }
        }
    }
    sched::wake(WaitToken::Reply(GATHERING | u64::from(pid)), usize::MAX);
    if let Ok(sent) = &result {
        super::remote::moved_away_from_here(&me);
        drop(me);
        leave(process, &threads, sent)
    }
    crate::syscall::syspage::resume_after_move(&me);
}

/// A syspage among `threads`' that its kernel core still serves: it did not let go of it for
/// the move (a restart of it, say), so the process stays.
fn syspage_not_released(threads: &[MovedThread]) -> Option<CannotMove> {
    threads.iter().any(|thread| crate::syscall::syspage::is_served(thread.tid)).then_some(CannotMove::HasSyspage)
}

/// A thread of a process that moved ends here without ending the process (its copy runs on
/// the destination); the last of them takes the process down ([`leave`]).
fn exit_moved_thread(me: Arc<Thread>) -> ! {
    super::remote::moved_away_from_here(&me);
    if let Some(process) = me.part().process.as_ref() {
        process.state.lock().threads.retain(|&tid| tid != me.tid);
    }
    drop(me);
    super::publish_counts();
    sched::note_exiting();
    sched::exit_current()
}

/// Why a move failed, for the kernel log.
fn error_text(error: Errno) -> &'static str {
    match error {
        errno::EBUSY => "the destination is no timesharing core, or the process cannot move now",
        errno::EEXIST => "the destination has that pid already",
        errno::EINVAL => "its image was malformed (a frame outside the sender's partition, memory outside user space)",
        errno::ENOMEM => "the destination ran out of frames",
        errno::ENOSPC => "its pid range's KCB has no free slot for a process living elsewhere",
        errno::E2BIG => "its image is larger than a message",
        errno::ETIMEDOUT => "the destination did not answer",
        errno::ECANCELED => "its origin gave up waiting for the answer and runs it on",
        errno::EAGAIN => "the image could not be sent, or too many moves out of the core are in flight",
        _ => "failed",
    }
}

/// The thread's state as the image carries it.
pub(super) fn capture_thread(thread: &Thread, frame: &InterruptFrame) -> MovedThread {
    let mut fpu = FpuState::initial();
    fpu.save();
    let stack = *thread.part().signals.alternate_stack.lock();
    let restart = *thread.part().restart_sleep.lock();
    let away = *thread.part().away.lock();
    let syspage = crate::syscall::syspage::kept_registration(thread.tid);
    MovedThread {
        tid: thread.tid,
        alternate_stack_flags: stack.flags,
        application_core: away.map_or(abi::migration::AT_HOME, |away| away.core as u32),
        application_flags: away.map_or(0, |away| away.flags as u32),
        syspage_core: syspage.map_or(abi::migration::NO_SYSPAGE, |(core, _, _)| core as u32),
        syspage_flags: syspage.map_or(0, |(_, _, made)| {
            let made = if made { abi::migration::SYSPAGE_KERNEL_MADE } else { 0 };
            let released = crate::syscall::syspage::released_head(thread.tid).map_or(0, |head| {
                abi::migration::SYSPAGE_RELEASED | (head as u32) << abi::migration::SYSPAGE_HEAD_SHIFT
            });
            made | released
        }),
        syspage_page: syspage.map_or(0, |(_, page, _)| page),
        fs_base: thread.fs_base.load(Ordering::Relaxed),
        clear_child_tid: thread.part().clear_child_tid.load(Ordering::Relaxed),
        blocked: thread.part().signals.blocked.load(Ordering::Relaxed),
        alternate_stack_base: stack.base,
        alternate_stack_size: stack.size,
        restart_until_ns: restart.map_or(NO_RESTART, |(until, _)| until),
        restart_remaining: restart.map_or(0, |(_, remaining)| remaining),
        registers: frame.registers(),
        fpu: fpu.0,
    }
}

/// The signals pending for `process` (thread 0) and for each of `threads` alone.
fn moved_signals(process: &Process, threads: &[MovedThread]) -> Vec<MovedSignal> {
    let record = |on_thread: u32| {
        move |info: crate::arch::signal::SignalInfo| MovedSignal {
            thread: on_thread,
            signal: info.signal,
            code: info.code,
            pid: info.pid,
            uid: info.uid,
            status: info.status,
        }
    };
    let mut pending: Vec<MovedSignal> = process.signals.pending.entries().into_iter().map(record(0)).collect();
    for thread in threads.iter().filter_map(|t| sched::find_thread(t.tid)) {
        pending.extend(thread.part().signals.pending.entries().into_iter().map(record(thread.tid)));
    }
    pending
}

/// A packed process: its image, and the references taken at the file service for the
/// destination (none for a process kept through a restart: the old kernel's go to the next).
pub(super) struct Packed {
    pub bytes: Vec<u8>,
    retained: Vec<Handle>,
    pending: Vec<MovedSignal>,
    move_id: u64,
}

/// Whether a packing takes one more reference at the file service for each open file: a
/// move does (the origin lets go of its own); a process kept through a restart does not
/// (the stopping kernel's references pass to the next kernel, as its memory does).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum References {
    Retain,
    PassOn,
}

/// Packs `process`, its threads stopped as `threads` say, as an image; `packed_tsc` is when
/// it stopped.
pub(super) fn pack(
    process: &Process,
    threads: &[MovedThread],
    references: References,
    packed_tsc: u64,
) -> Result<Packed, Errno> {
    let mut pending = moved_signals(process, threads);
    if process.is_killed() && !pending.iter().any(|s| s.signal == signal::SIGKILL && s.thread == 0) {
        // A kill that ended this copy after it stopped ends the next one.
        pending.push(MovedSignal { thread: 0, signal: signal::SIGKILL, ..MovedSignal::default() });
    }
    let actions: [MovedAction; SIGNALS] = process.signals.actions().map(|action| MovedAction {
        handler: action.handler,
        flags: action.flags,
        restorer: action.restorer,
        mask: action.mask,
    });
    let (open_files, cwd, children, areas, pages, heap, name, path, command_line, umask) = {
        let state = process.state.lock();
        let files: Vec<(usize, Arc<Handle>, bool)> =
            state.files.all().map(|(fd, handle, cloexec)| (fd, handle.clone(), cloexec)).collect();
        let children: Vec<MovedChild> = state
            .children
            .iter()
            .map(|c| MovedChild {
                pid: c.pid,
                process_group: c.process_group,
                wait_status: c.wait_status.unwrap_or(NOT_EXITED),
            })
            .collect();
        let areas: Vec<MovedArea> = state
            .memory
            .areas()
            .iter()
            .map(|area| MovedArea {
                start: area.start,
                end: area.end,
                protection: u32::from(area.protection.read)
                    | u32::from(area.protection.write) << 1
                    | u32::from(area.protection.execute) << 2,
                kind: area_kind_code(area.kind),
            })
            .collect();
        let pages: Vec<MovedPage> = state
            .memory
            .present_pages()
            .into_iter()
            .map(|(address, frame, flags)| MovedPage { address, frame, flags })
            .collect();
        (
            files,
            state.cwd.clone(),
            children,
            areas,
            pages,
            (state.memory.heap_start, state.memory.heap_end),
            state.name.clone(),
            state.path.clone(),
            state.command_line.clone(),
            state.umask,
        )
    };
    // One more reference at the service for each open file (one per handle, however many
    // descriptors share it): the destination's. Dropped, and so released, if the move fails.
    let mut retained: Vec<Handle> = Vec::new();
    let mut descriptors = Vec::with_capacity(open_files.len());
    for (fd, handle, cloexec) in &open_files {
        if references == References::Retain && !retained.iter().any(|r| r.id == handle.id) {
            retained.push(crate::fs::client::retain(handle)?);
        }
        descriptors.push(MovedDescriptor {
            fd: *fd as u32,
            kind: handle.kind as u32,
            handle: handle.id,
            close_on_exec: u32::from(*cloexec),
        });
    }
    let working_directory = match &cwd {
        Some(directory) if references == References::PassOn => directory.id,
        Some(directory) => {
            let copy = crate::fs::client::retain(directory)?;
            let id = copy.id;
            retained.push(copy);
            id
        }
        None => abi::file::NONE,
    };
    drop(open_files);
    let me = shared::this_core();
    let move_id = (1 << 63) | (u64::from(me) << 48) | NEXT_MOVE.fetch_add(1, Ordering::Relaxed);
    let header = MoveHeader {
        move_id,
        origin: me,
        pid: process.pid,
        parent_pid: process.parent.pid,
        parent_core: process.parent.core,
        process_group: process.process_group(),
        session: process.session(),
        umask,
        exec_done: u32::from(process.exec_done.load(Ordering::Relaxed)),
        heap_start: heap.0,
        heap_end: heap.1,
        working_directory,
        packed_tsc,
        return_core: match process.returns_to.load(Ordering::Relaxed) {
            NO_RETURN => abi::migration::NO_RETURN,
            returns_to => (returns_to >> 32) as u32,
        },
        return_incarnation: process.returns_to.load(Ordering::Relaxed) as u32,
        death_signal: process.death_signal(),
        ..MoveHeader::default()
    };
    let parts = MoveParts {
        actions: &actions,
        threads,
        descriptors: &descriptors,
        children: &children,
        areas: &areas,
        pages: &pages,
        pending: &pending,
        name: name.as_bytes(),
        path: path.as_bytes(),
        command_line: &command_line,
    };
    let mut bytes = alloc::vec![0u8; abi::migration::encoded_size(&parts)];
    abi::migration::encode(&mut bytes, &header, &parts).ok_or(errno::EINVAL)?;
    Ok(Packed { bytes, retained, pending, move_id })
}

/// Packs `process` (its threads stopped as `threads` say) and sends it to `destination`;
/// `Ok` once the destination runs it.
/// Returns the signals the image carried pending.
fn hand_over(process: &Arc<Process>, threads: &[MovedThread], destination: usize) -> Result<Vec<u32>, Errno> {
    let packed_tsc = crate::arch::cpu::read_tsc();
    // The rest of a line it printed goes out from here, before the destination prints more.
    crate::fs::console::flush(&process.console_pending);
    let Packed { bytes, retained, pending, move_id } = pack(process, threads, References::Retain, packed_tsc)?;
    if bytes.len() > crate::msg::MAX_LARGE_MESSAGE {
        return Err(errno::E2BIG);
    }
    // The move's fate: taken by the destination before it builds anything, or abandoned here
    // if its answer is late; never both (`kcb::block::MoveFates`).
    let fates = kcb::block::MoveFates(&shared::this_kcb().moves_out);
    if fates.open(move_id).is_none() {
        return Err(errno::EAGAIN);
    }
    ANSWERS.lock().insert(move_id, None);
    // Not the draining send: a handler run while it waits could send to the same queue, whose
    // sender record this send holds (the nested send would fail).
    if let Err(error) = crate::msg::send_large(destination, Kind::ProcessMove, &bytes) {
        ANSWERS.lock().remove(&move_id);
        fates.close(move_id);
        log::debug!("process {}: the move to core {destination} was not sent: {error}", process.pid);
        return Err(errno::EAGAIN);
    }
    let mut deadline = crate::time::deadline_after_ms(MOVE_TIMEOUT_MS);
    let answer = loop {
        if let Some(answer) = ANSWERS.lock().get(&move_id).copied().flatten() {
            break Some(answer);
        }
        if crate::arch::cpu::read_tsc() >= deadline {
            if fates.abandon(move_id) || !crate::msg::is_live(destination) {
                break None;
            }
            // The destination took it and builds it: its answer comes.
            deadline = crate::time::deadline_after_ms(MOVE_TIMEOUT_MS);
        }
        // Not interruptible: the answer decides where the process lives. A kill ends every
        // wait of the process at once, so a killed packer looks at its messages itself (the
        // answer comes as one): else it spun until the deadline, gave up while the destination
        // ran the process, and both copies let go of the same file references.
        if sched::block_uninterruptible(WaitToken::Reply(move_id), Some(deadline)) == Wakeup::Killed {
            crate::msg::drain();
            crate::arch::cpu::relax();
        }
    };
    ANSWERS.lock().remove(&move_id);
    fates.close(move_id);
    match answer {
        Some(0) => {
            // The references are the destination's now.
            for handle in retained {
                core::mem::forget(handle);
            }
            log::debug!("process {} moved to core {destination}", process.pid);
            // Signals that reach this copy from now on follow it ([`leave`]).
            Ok(pending.iter().map(|s| s.signal).collect())
        }
        Some(error) => Err(error),
        None => Err(errno::ETIMEDOUT),
    }
}

fn area_kind_code(kind: AreaKind) -> u32 {
    match kind {
        AreaKind::Program => 0,
        AreaKind::Heap => 1,
        AreaKind::Stack => 2,
        AreaKind::Anonymous => 3,
    }
}

fn area_kind(code: u32) -> Option<AreaKind> {
    Some(match code {
        0 => AreaKind::Program,
        1 => AreaKind::Heap,
        2 => AreaKind::Stack,
        3 => AreaKind::Anonymous,
        _ => return None,
    })
}

/// The moved process's thread ends here, and the process with it, without an exit: its
/// memory and descriptors here are let go (the destination has copies), its pid stays taken
/// (the range's KCB names its new home), its parent hears nothing.
fn leave(process: Arc<Process>, threads: &[MovedThread], sent: &[u32]) -> ! {
    // Its children are the new copy's now.
    drop(super::let_go(&process));
    // What reached this copy since its image was made follows it. After `let_go` no handler
    // finds the process here any more, so nothing can come later than this: `record_exit`
    // sends an exit on to where the process lives now (as it does for one that comes later),
    // and a signal's sender asks the new home (`signal::send`).
    for exited in take_late_exits(&process) {
        super::record_exit(&exited);
    }
    let late = process.signals.pending.entries().into_iter().filter(|s| !sent.contains(&s.signal));
    for late in late {
        let _ = signal::kill(process.pid as i32, late.signal);
    }
    // So does a kill that ended this copy meanwhile (it is pending nowhere).
    if process.is_killed() {
        let _ = signal::kill(process.pid as i32, signal::SIGKILL);
    }
    // Its syspages are the destination's now: this home forgets them (their kernel cores let
    // go of them already).
    for thread in threads {
        crate::syscall::syspage::thread_leaves(thread.tid);
    }
    // Their ranges' KCBs keep the pid and tids taken while they live elsewhere.
    let me = shared::this_core() as usize;
    let ids = core::iter::once(process.pid).chain(threads.iter().map(|t| t.tid));
    for id in ids.filter(|&id| range_of(id) == me) {
        PIDS.lock().used.remove(&id);
    }
    drop(process);
    super::publish_counts();
    sched::note_exiting();
    sched::exit_current()
}

/// Message handler: a process moves here.
fn on_move(bytes: &[u8]) -> crate::msg::HandlerResult {
    let image = MoveImage::decode(bytes)?;
    let header = image.header;
    let arrived = crate::arch::cpu::read_tsc();
    let result = match install(&image, Arrival::Moved, None) {
        Ok(()) => {
            let us = |cycles: u64| crate::time::cycles_to_ns(cycles) / 1000;
            let now = crate::arch::cpu::read_tsc();
            log::info!(
                "process {} ({}) moved here from core {}: {} threads, {} pages, built in {} us, {} us after its packing began",
                header.pid,
                core::str::from_utf8(image.name).unwrap_or("?"),
                header.origin,
                header.threads,
                header.pages,
                us(now.saturating_sub(arrived)),
                us(now.saturating_sub(header.packed_tsc)),
            );
            0
        }
        Err(error) => {
            log::warn!("process {} from core {} not taken: {}", header.pid, header.origin, error_text(error));
            error
        }
    };
    answer(header.origin as usize, MoveReply { move_id: header.move_id, result });
    Ok(())
}

/// Lines not sent yet (answers to moves, children's exits sent on after their parent): the
/// target's queue was full. A handler must not wait for a queue to drain (the target may be
/// waiting for ours: both would stall until the send timeout), so they go at the next safe
/// point.
static UNSENT: Mutex<Vec<(usize, channel::Message)>> = Mutex::new(Vec::new());

fn answer(origin: usize, reply: MoveReply) {
    send_or_hold(origin, crate::msg::line(Kind::ProcessMoveReply, |out| reply.encode(out)));
}

/// Sends `message` to `target` now, or at the next safe point if its queue is full (from a
/// handler too).
pub(super) fn send_or_hold(target: usize, message: channel::Message) {
    match crate::msg::try_send(target, &message) {
        Ok(()) => {}
        Err(crate::msg::SendError::Channel(channel::ChannelError::Full)) => {
            UNSENT.lock().push((target, message));
            LINES_HELD.store(true, Ordering::Relaxed);
        }
        Err(error) => log::warn!("a line of kind {} for core {target} was not sent: {error}", message.kind),
    }
}

/// Sends the lines a full queue held back (at a safe point, never in a handler).
fn send_held_lines() {
    if !LINES_HELD.swap(false, Ordering::Relaxed) {
        return;
    }
    let held = core::mem::take(&mut *UNSENT.lock());
    for (target, message) in held {
        if let Err(error) = crate::msg::send_blocking(target, &message) {
            log::warn!("a line of kind {} for core {target} was not sent: {error}", message.kind);
        }
    }
}

/// How the process of an image comes to this kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Arrival {
    /// From another core: its pages are copied out of the sender's partition.
    Moved,
    /// From this OSnode's previous kernel, through a restart: its pages stay where they are
    /// (frames of this partition the instance took for them at entry).
    Kept,
}

/// Builds the process of `image` here. Refuses (changing nothing) when this core is no
/// timesharing core, the pid lives here already, the image names frames outside its sender's
/// partition or memory outside user space, or frames run out.
pub(super) fn install(
    image: &MoveImage<'_>,
    arrival: Arrival,
    handles: Option<&mut BTreeMap<u64, Arc<Handle>>>,
) -> Result<(), Errno> {
    let header = &image.header;
    let origin = header.origin as usize;
    if crate::core::role::current() != Role::Timesharing {
        return Err(errno::EBUSY);
    }
    let from_here = origin == shared::this_core() as usize;
    if from_here != (arrival == Arrival::Kept) || find(header.pid).is_some() || header.pid == 0 {
        return Err(errno::EEXIST);
    }
    if arrival == Arrival::Moved
        && range_of(header.pid) != shared::this_core() as usize
        && home_of(header.pid) != origin
    {
        // Its range's KCB must name the sender as its home, or the sender is its range.
        if range_of(header.pid) != origin {
            return Err(errno::EINVAL);
        }
    }
    if image.threads().any(|t| t.tid == 0 || (t.tid != header.pid && sched::find_thread(t.tid).is_some()))
        || !can_record(header.pid)
        || !image.threads().all(|t| can_record(t.tid))
    {
        return Err(if image.threads().any(|t| t.tid == 0) { errno::EINVAL } else { errno::ENOSPC });
    }
    let origin_kcb = shared::get().listed_kcbs().get(origin).ok_or(errno::EINVAL)?;
    // Decided here, before anything is built: an origin that gave up waiting for the answer
    // runs the process on, and it must not run here too. Once taken, the origin waits for
    // the answer, whatever it says.
    if arrival == Arrival::Moved && !kcb::block::MoveFates(&origin_kcb.moves_out).take(header.move_id) {
        return Err(errno::ECANCELED);
    }
    let partition = origin_kcb.partition();
    let frames: BTreeMap<u64, u64> = image.pages().map(|page| (page.address, page.frame)).collect();
    let inside =
        |frame: u64| frame.is_multiple_of(PAGE_SIZE) && frame >= partition.start && frame + PAGE_SIZE <= partition.end;
    if frames.values().any(|&frame| !inside(frame)) {
        return Err(errno::EINVAL);
    }
    let mut areas = Vec::new();
    for area in image.areas() {
        let bits = u64::from(area.protection);
        areas.push(Area {
            start: area.start,
            end: area.end,
            protection: Protection::from_linux(bits),
            kind: area_kind(area.kind).ok_or(errno::EINVAL)?,
        });
    }
    let mut copy = |address: u64, bytes: &mut [u8]| {
        let frame = frames.get(&address).copied().ok_or(MemoryError::BadRange)?;
        copy_frame(frame, bytes)
    };
    let adopt = |address: u64| frames.get(&address).copied();
    let source = match arrival {
        Arrival::Moved => PageSource::Copy(&mut copy),
        Arrival::Kept => PageSource::Adopt(&adopt),
    };
    let memory = AddressSpace::rebuild(
        areas,
        (header.heap_start, header.heap_end),
        image.pages().map(|page| (page.address, page.flags)),
        source,
    )
    .map_err(|error| match error {
        MemoryError::OutOfMemory => errno::ENOMEM,
        _ => errno::EINVAL,
    })?;
    // The descriptors: one adopted reference per handle, shared by the descriptors naming it
    // (and, for kept processes, by every kept process naming it: `handles` is theirs).
    let mut files = FileTable::empty();
    let mut own = BTreeMap::new();
    let handles = handles.unwrap_or(&mut own);
    let mut adopt = |id: u64, kind| {
        handles
            .entry(id)
            .or_insert_with(|| {
                Arc::new(if id == abi::file::CONSOLE_HANDLE { Handle::console() } else { Handle::adopt(id, kind) })
            })
            .clone()
    };
    for descriptor in image.descriptors() {
        let Some(kind) = abi::file::HandleKind::from_u64(u64::from(descriptor.kind)) else { continue };
        let _ = files.install_at(descriptor.fd as usize, adopt(descriptor.handle, kind), descriptor.close_on_exec != 0);
    }
    // A moved process's directory is a reference of its own (`pack` took one for it).
    let cwd = match (header.working_directory, arrival) {
        (abi::file::NONE, _) => None,
        (id, Arrival::Moved) => Some(Arc::new(Handle::adopt(id, abi::file::HandleKind::Directory))),
        (id, Arrival::Kept) => Some(adopt(id, abi::file::HandleKind::Directory)),
    };
    let mut actions = [signal::Action::default(); SIGNALS];
    for (action, moved) in actions.iter_mut().zip(image.actions.iter()) {
        *action =
            signal::Action { handler: moved.handler, flags: moved.flags, restorer: moved.restorer, mask: moved.mask };
    }
    let text = |bytes: &[u8]| String::from(core::str::from_utf8(bytes).unwrap_or("?"));
    let root = memory.root();
    let process = Arc::new(Process {
        pid: header.pid,
        parent: Parent { core: header.parent_core, pid: header.parent_pid },
        killed: AtomicBool::new(false),
        exit_status: AtomicU32::new(super::NO_STATUS),
        root: AtomicU64::new(root),
        state: Mutex::new(ProcessState {
            memory,
            files,
            children: image
                .children()
                .map(|c| Child {
                    pid: c.pid,
                    process_group: c.process_group,
                    wait_status: (c.wait_status != NOT_EXITED).then_some(c.wait_status),
                    times: abi::process::CpuTimes::default(),
                    change: None,
                })
                .collect(),
            threads: image.threads().map(|t| t.tid).collect(),
            name: text(image.name),
            path: text(image.path),
            cwd,
            umask: header.umask & 0o777,
            command_line: image.command_line.to_vec(),
        }),
        console_pending: Mutex::new(Vec::new()),
        signals: signal::ProcessSignals::with_actions(actions),
        process_group: AtomicU32::new(header.process_group),
        session: AtomicU32::new(header.session),
        exec_done: AtomicBool::new(header.exec_done != 0),
        moving: AtomicU32::new(NOT_MOVING),
        returns_to: AtomicU64::new(match header.return_core {
            core if core == shared::this_core() || core == abi::migration::NO_RETURN => NO_RETURN,
            core => u64::from(core) << 32 | u64::from(header.return_incarnation),
        }),
        late_exits: Mutex::new(Vec::new()),
        death_signal: AtomicU32::new(header.death_signal),
        loan: Mutex::new(super::Loan::None),
        // Not carried by the image: a moved process counts its time from its arrival.
        cpu: Mutex::new(super::ProcessCpu::default()),
        options: Mutex::new(super::Options::default()),
        stopped: AtomicU32::new(0),
    });
    if process.returns_to.load(Ordering::Relaxed) != NO_RETURN {
        RETURNING.store(true, Ordering::Relaxed);
    }
    let mut threads = Vec::new();
    for moved in image.threads() {
        let stack = crate::arch::signal::AlternateStack {
            base: moved.alternate_stack_base,
            size: moved.alternate_stack_size,
            flags: moved.alternate_stack_flags,
        };
        let frame = InterruptFrame::from_registers(&moved.registers);
        let mut fpu = FpuState(moved.fpu);
        fpu.sanitize();
        let fs_base = if user::is_user_range(moved.fs_base, 0) { moved.fs_base } else { 0 };
        let thread = crate::proc::thread::new_thread(
            moved.tid,
            process.clone(),
            &frame,
            fpu,
            fs_base,
            signal::ThreadSignals::with_stack(moved.blocked, stack),
        );
        let Ok(thread) = thread else {
            return Err(failed_after_adoption(arrival, &process, handles, errno::ENOMEM));
        };
        thread.part().clear_child_tid.store(moved.clear_child_tid, Ordering::Relaxed);
        // A moved thread's syspage was let go of for the move; a kept thread's too for a stop
        // until a start, and is served on through a restart.
        let released = moved.syspage_flags & abi::migration::SYSPAGE_RELEASED != 0;
        if moved.syspage_core != abi::migration::NO_SYSPAGE && arrival != Arrival::Kept && !released {
            return Err(failed_after_adoption(arrival, &process, handles, errno::EINVAL));
        }
        if moved.application_core != abi::migration::AT_HOME {
            // It goes back to its AC from its first way to ring 3 (from this new home, for a
            // move: the AC checks that the pid's range names it).
            super::remote::adopt_away(&thread, moved.application_core as usize, u64::from(moved.application_flags));
        }
        if moved.restart_until_ns != NO_RESTART {
            *thread.part().restart_sleep.lock() = Some((moved.restart_until_ns, moved.restart_remaining));
        }
        threads.push(thread);
    }
    for pending in image.pending() {
        if !(1..=abi::signal::MAX_SIGNAL).contains(&pending.signal) {
            continue;
        }
        let info = crate::arch::signal::SignalInfo {
            signal: pending.signal,
            code: pending.code,
            pid: pending.pid,
            uid: pending.uid,
            status: pending.status,
        };
        match threads.iter().find(|t| t.tid == pending.thread) {
            Some(thread) => thread.part().signals.pending.add(info),
            None => process.signals.pending.add(info),
        }
    }
    // Where the pid and every tid live now, for every core's routing; from here on signals
    // come here. (Fails only if another move took the last free slots since the check above:
    // the process and threads are dropped, their memory with them, a moved process's file
    // references are left to the origin, and the ids recorded so far are given back.)
    let ids: Vec<u32> = core::iter::once(header.pid).chain(threads.iter().map(|t| t.tid)).collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    for (index, &id) in unique.iter().enumerate() {
        if let Err(error) = record_here(id) {
            unique[..index].iter().for_each(|&recorded| give_back(recorded, origin));
            return Err(failed_after_adoption(arrival, &process, handles, error));
        }
    }
    super::report_to_proc(&process);
    PROCESSES.lock().insert(header.pid, process);
    super::publish_counts();
    // A kept thread's syspage: its kernel core serves it on; this kernel takes over the
    // registration (what the thread's end, an unmap over the page or a kick need). A moved
    // thread's: registered anew, its copy here served from where the ring stood.
    for (moved, thread) in image.threads().zip(&threads) {
        if moved.syspage_core == abi::migration::NO_SYSPAGE {
            continue;
        }
        let made = moved.syspage_flags & abi::migration::SYSPAGE_KERNEL_MADE != 0;
        if moved.syspage_flags & abi::migration::SYSPAGE_RELEASED != 0 {
            // A page the kernel made for `execac --syspage` that moved starts again from entry
            // 0: its AC waits for each call it posts, so nothing in it is pending, and the AC,
            // finding a frame it has not seen, posts from entry 0. Kept, it is the same frame,
            // and the AC posts on from where it was.
            let head = if made && arrival != Arrival::Kept {
                0
            } else {
                (moved.syspage_flags >> abi::migration::SYSPAGE_HEAD_SHIFT) as usize % syspage::ENTRIES
            };
            let core = moved.syspage_core as usize;
            if let Err(error) = crate::syscall::syspage::adopt_released(thread, core, moved.syspage_page, made, head) {
                log::warn!(
                    "thread {}'s syspage at {:#x} could not be registered with a kernel core here (errno {error}): \
                     its calls go on without it",
                    thread.tid,
                    moved.syspage_page
                );
            }
            continue;
        }
        if let Err(error) =
            crate::syscall::syspage::adopt_registration(thread, moved.syspage_core as usize, moved.syspage_page, made)
        {
            log::warn!(
                "thread {}'s syspage at {:#x} is not served by core {} as kept (errno {error}): its calls go on \
                 without it",
                thread.tid,
                moved.syspage_page,
                moved.syspage_core
            );
        }
    }
    for thread in threads {
        sched::make_ready(thread);
    }
    Ok(())
}

/// At a safe point: sends the answers to moves a full queue held back, and sends back the
/// processes that left a core for its restart once its next kernel runs there as a
/// timesharing core (a core restarted as an AC keeps none).
pub fn at_safe_point() {
    send_held_lines();
    if !RETURNING.load(Ordering::Relaxed) {
        return;
    }
    let mut waiting = false;
    let region = shared::get();
    for process in super::all() {
        let returns_to = process.returns_to.load(Ordering::Relaxed);
        if returns_to == NO_RETURN {
            continue;
        }
        let (core, incarnation) = ((returns_to >> 32) as usize, returns_to as u32);
        let Some(kcb) = region.listed_kcbs().get(core) else {
            process.returns_to.store(NO_RETURN, Ordering::Relaxed);
            continue;
        };
        // A new kernel runs there; or the restart was given up before the stop (the old one
        // runs on, and no restart is pending any more).
        let new_kernel = kcb.incarnation.load(Ordering::Acquire) as u32 != incarnation;
        let given_up = kcb.restart_pending.load(Ordering::Acquire) == 0;
        let back = kcb.state() == crate::core::kcb::CoreState::Running
            && (new_kernel || given_up)
            && kcb.parking.host().is_none();
        if !back {
            waiting = true;
            continue;
        }
        process.returns_to.store(NO_RETURN, Ordering::Relaxed);
        if kcb.role() == Role::Timesharing && process.moving.load(Ordering::Relaxed) == NOT_MOVING {
            process.moving.store(core as u32 + 1, Ordering::Relaxed);
            sched::wake_for_move(process.pid);
        }
    }
    if !waiting {
        RETURNING.store(false, Ordering::Relaxed);
    }
}

/// A moved process whose build fails after its file references were adopted here: the
/// origin, told no, releases them itself (it drops what it retained for this copy), so this
/// copy forgets its handles instead of releasing them a second time (which would close a file
/// another holder still uses). Their few bytes of heap are the price. Returns `error`.
fn failed_after_adoption(
    arrival: Arrival,
    process: &Process,
    handles: &mut BTreeMap<u64, Arc<Handle>>,
    error: Errno,
) -> Errno {
    if arrival == Arrival::Moved {
        let (files, cwd) = {
            let mut state = process.state.lock();
            (core::mem::replace(&mut state.files, FileTable::empty()), state.cwd.take())
        };
        core::mem::forget(files);
        core::mem::forget(cwd);
        for handle in core::mem::take(handles).into_values() {
            core::mem::forget(handle);
        }
    }
    error
}

/// Copies the frame `physical` of another partition into `out` (one page) through this
/// instance's copy window.
fn copy_frame(physical: u64, out: &mut [u8]) -> Result<(), MemoryError> {
    let window = crate::mm::window::COPY_WINDOW;
    crate::mm::window::map_frame(window, physical).map_err(|_| MemoryError::OutOfMemory)?;
    // SAFETY: the window maps that one frame, readable, for the length of one page; nothing
    // else uses the copy window (message handlers do not nest on one core).
    unsafe { core::ptr::copy_nonoverlapping(window as *const u8, out.as_mut_ptr(), PAGE_SIZE as usize) };
    crate::mm::window::unmap_frame(window);
    Ok(())
}

/// Message handler: the destination's answer to a move of ours.
fn on_reply(message: &channel::Message) -> crate::msg::HandlerResult {
    let reply = MoveReply::decode(message.payload())?;
    if let Some(slot) = ANSWERS.lock().get_mut(&reply.move_id) {
        *slot = Some(reply.result);
    }
    sched::wake(WaitToken::Reply(reply.move_id), usize::MAX);
    Ok(())
}

/// Registers this instance's move handlers.
pub fn init() {
    use crate::msg::{register, Handler};
    register(Kind::ProcessMove, Handler { high_priority: false, on_line: None, on_large: Some(on_move) });
    register(Kind::ProcessMoveReply, Handler { high_priority: false, on_line: Some(on_reply), on_large: None });
    crate::msg::icc::register(abi::message::handler::MOVE_PROCESS, on_move_process);
}
