//! Asking processes to move: evacuating an OSnode, keeping, one move, the way back.

use super::policy::{why_it_cannot_go, why_it_cannot_move, CannotMove, Going};
use super::{NOT_MOVING, NO_RETURN};
use crate::core::kcb::Role;
use crate::core::shared;
use crate::proc::{find, home_of, Errno, Process};
use crate::sched;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use linux_raw_sys::errno;

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
    let processes = crate::proc::all();
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
    let processes = crate::proc::all();
    for process in &processes {
        let going = if until_start { Going::UntilStart } else { Going::ThroughRestart };
        if let Some(reason) = why_it_cannot_go(process, going) {
            return Err((process.pid, reason));
        }
    }
    processes.iter().for_each(crate::proc::keep::ask);
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
pub(super) fn on_move_process(arguments: &[u64; abi::message::ICC_ARGUMENTS]) -> Result<u64, abi::message::IccStatus> {
    let pid = u32::try_from(arguments[0]).map_err(|_| abi::message::IccStatus::BadArguments)?;
    let core = usize::try_from(arguments[1]).map_err(|_| abi::message::IccStatus::BadArguments)?;
    Ok(match find(pid) {
        None => u64::from(errno::ESRCH),
        Some(process) => ask_to_move(&process, core).err().map_or(0, u64::from),
    })
}

/// Whether a process of this instance may go back to a restarted core (looked at, at safe
/// points, only while set).
static RETURNING: AtomicBool = AtomicBool::new(false);

/// A process built here goes back to a restarted core once its next kernel runs
/// ([`send_back_returning`] looks for it from now on).
pub(super) fn expect_returning() {
    RETURNING.store(true, Ordering::Relaxed);
}

/// At a safe point: sends back the processes that left a core for its restart once its next
/// kernel runs there as a timesharing core (a core restarted as an AC keeps none).
pub(super) fn send_back_returning() {
    if !RETURNING.load(Ordering::Relaxed) {
        return;
    }
    let mut waiting = false;
    let region = shared::get();
    for process in crate::proc::all() {
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
