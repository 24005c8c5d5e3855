//! The check-in at the origin: each thread of a moving process stops, the last one packs it.
//!
//! After the hand-over the threads end here ([`leave`]) or run on (the move failed).

use super::image::capture_thread;
use super::policy::{error_text, syspage_not_released, why_it_cannot_move};
use super::transport::hand_over;
use super::{is_kept_here, take_late_exits, NOT_MOVING, PACKING};
use crate::arch::idt::InterruptFrame;
use crate::core::shared;
use crate::proc::ThreadExt;
use crate::proc::{range_of, signal, Process, PIDS};
use crate::sched::{self, Thread, WaitToken};
use abi::migration::MovedThread;
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use linux_raw_sys::errno;
use spin::Mutex;

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
        return crate::proc::keep::stay_current(frame);
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
            crate::proc::record_exit(&exited);
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
        crate::proc::remote::moved_away_from_here(&me);
        drop(me);
        leave(process, &threads, sent)
    }
    crate::syscall::syspage::resume_after_move(&me);
}

/// A thread of a process that moved ends here without ending the process (its copy runs on
/// the destination); the last of them takes the process down ([`leave`]).
fn exit_moved_thread(me: Arc<Thread>) -> ! {
    crate::proc::remote::moved_away_from_here(&me);
    if let Some(process) = me.part().process.as_ref() {
        process.state.lock().threads.retain(|&tid| tid != me.tid);
    }
    drop(me);
    crate::proc::publish_counts();
    sched::note_exiting();
    sched::exit_current()
}

/// The moved process's thread ends here, and the process with it, without an exit: its
/// memory and descriptors here are let go (the destination has copies), its pid stays taken
/// (the range's KCB names its new home), its parent hears nothing.
fn leave(process: Arc<Process>, threads: &[MovedThread], sent: &[u32]) -> ! {
    // Its children are the new copy's now.
    drop(crate::proc::let_go(&process));
    // What reached this copy since its image was made follows it. After `let_go` no handler
    // finds the process here any more, so nothing can come later than this: `record_exit`
    // sends an exit on to where the process lives now (as it does for one that comes later),
    // and a signal's sender asks the new home (`signal::send`).
    for exited in take_late_exits(&process) {
        crate::proc::record_exit(&exited);
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
    crate::proc::publish_counts();
    sched::note_exiting();
    sched::exit_current()
}
