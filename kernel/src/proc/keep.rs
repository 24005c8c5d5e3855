//! Processes kept in place through a restart of their OSnode's kernel (Barrelfish/DC §4.1:
//! the KCB holds the OSnode's state, so another kernel takes it over where it lies).
//!
//! A restart of a timesharing core with an image that runs timesharing keeps its processes:
//! 1. The boot driver asks the OSnode to keep them (`EVACUATE` with [`super::migrate::KEEP`]).
//!    Each process is marked and its threads are woken from interruptible waits, as for a
//!    move.
//! 2. Each thread, on its way back to ring 3, checks in with its state and waits
//!    ([`stay_current`]); when all of a process's threads did, the process is *frozen*
//!    (`Kcb::kept.frozen` counts them). The boot driver stops the core once every homed
//!    process is frozen.
//! 3. At its idle point the stopping kernel packs each frozen process as a move would (the
//!    same image: threads, signals, descriptors, children, areas, and the frames of its
//!    pages) into a chain of frames of its own partition, and names the chain in its KCB
//!    ([`keep_for_next_kernel`]). Nothing is copied and nothing is let go: the pages stay in
//!    their frames, the file service's references pass to the next kernel.
//! 4. The next kernel, before it takes any frame, keeps the chain's frames and every frame the
//!    images name out of its free frames ([`take_kept_frames`]); then, before it reports
//!    running, builds each process on those frames with the same pid and tids
//!    ([`install_kept`]). Its threads go on from where they checked in.
//!
//! If the stop does not happen (the restart is given up and `restart_pending` cleared), the
//! threads run on under the old kernel, untouched.

use super::migrate::{self, Arrival, References};
use super::{find, Process};
use crate::arch::idt::InterruptFrame;
use crate::core::shared;
use crate::fs::Handle;
use crate::mm::frames;
use crate::proc::ThreadExt;
use crate::sched::{self, WaitToken};
use abi::migration::{MoveImage, MovedThread};
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use kcb::kept::{self as format, FrameHeader, FRAME_HEADER, FRAME_ROOM};
use spin::Mutex;

/// The threads of a process frozen for a restart, by pid.
#[derive(Default)]
struct Frozen {
    threads: Vec<MovedThread>,
    /// Every thread of the process checked in: it is counted in `Kcb::kept.frozen`.
    complete: bool,
    /// When it was asked to stay (the image's `packed_tsc`: where its pause began).
    since: u64,
}

static FROZEN: Mutex<BTreeMap<u32, Frozen>> = Mutex::new(BTreeMap::new());

/// The wait token of a frozen process's threads: `Reply(FROZEN_TOKEN | pid)`.
const FROZEN_TOKEN: u64 = 1 << 61;
/// How often a frozen thread looks whether the restart was given up.
const POLL_MS: u64 = 10;
/// Chain frames at most (a bound on a garbled chain): 4 MiB of images.
const MAX_CHAIN_FRAMES: usize = 1024;

/// The images a restart kept, taken out of their chain at entry, waiting for the kernel to
/// be ready to build them; and the old kernel's references at the file service for each
/// handle they name.
static TAKEN: Mutex<Taken> = Mutex::new(Taken { images: Vec::new(), references: Vec::new() });

#[derive(Default)]
struct Taken {
    images: Vec<Vec<u8>>,
    /// (handle id, references the old kernel held).
    references: Vec<(u64, u64)>,
}

/// On the way back to ring 3 of a thread whose process is kept for a restart: checks in with
/// its state and waits. Never returns if the core stops (the next kernel runs the thread on
/// from this state); returns, the frame untouched, if the restart is given up.
pub fn stay_current(frame: &InterruptFrame) {
    let me = sched::current();
    let Some(process) = me.part().process.clone() else { return };
    let pid = process.pid;
    // Through a stop of unknown length its syspage is not served: its kernel core lets go of
    // it (the calls in flight done) and the kernel after the start registers it again. A
    // restart follows at once: the kernel core serves on meanwhile.
    let until_start = shared::this_kcb().restart_pending.load(Ordering::Acquire) == kcb::block::STOPPING_TO_KEEP;
    if until_start && !crate::syscall::syspage::release_for_move(&me) {
        log::warn!("thread {}'s syspage stays with its kernel core through the stop", me.tid);
    }
    FROZEN.lock().entry(pid).or_default().threads.push(migrate::capture_thread(&me, frame));
    let kcb = shared::this_kcb();
    loop {
        // Complete once every live thread checked in (one that exited meanwhile never will).
        let threads_now = process.state.lock().threads.len();
        let completed_now = {
            let mut frozen = FROZEN.lock();
            let Some(one) = frozen.get_mut(&pid) else { return };
            let now = !one.complete && one.threads.len() >= threads_now;
            if now {
                one.complete = true;
                // The pause began when the process was asked (its thread was interrupted
                // then, or was waiting), not when its last thread checked in.
                one.since = ASKED_TSC.load(Ordering::Relaxed).min(crate::arch::cpu::read_tsc());
                log::debug!(
                    "process {pid} frozen {} us after it was asked",
                    crate::time::cycles_to_ns(crate::arch::cpu::read_tsc().saturating_sub(one.since)) / 1000
                );
            }
            now
        };
        if completed_now {
            // The rest of a line it printed goes out now, before the next kernel prints more.
            crate::fs::console::flush(&process.console_pending);
            kcb.kept.frozen.fetch_add(1, Ordering::Release);
        }
        // Calls a kernel core handed back for this thread's syspage meanwhile run here, in its
        // context (the stop waits until none is left: `core::lifecycle::stop_if_asked`).
        crate::syscall::syspage::run_forwarded();
        // The restart was given up; or the process is being killed: it ends here, its exit
        // reported as usual, and the stop waits until it has.
        if kcb.restart_pending.load(Ordering::Acquire) == 0 || process.is_killed() {
            thaw(&process, me.tid);
            crate::syscall::syspage::resume_after_move(&me);
            return;
        }
        let deadline = crate::time::deadline_after_ms(POLL_MS);
        let _ = sched::block_uninterruptible(WaitToken::Reply(FROZEN_TOKEN | u64::from(pid)), Some(deadline));
    }
}

/// The restart was given up: thread `tid` of `process` runs on; the process is no longer
/// frozen, and once its last thread left, forgotten.
fn thaw(process: &Process, tid: u32) {
    process.moving.store(migrate::NOT_MOVING, Ordering::Relaxed);
    let mut frozen = FROZEN.lock();
    let Some(one) = frozen.get_mut(&process.pid) else { return };
    if one.complete {
        one.complete = false;
        shared::this_kcb().kept.frozen.fetch_sub(1, Ordering::Release);
    }
    one.threads.retain(|thread| thread.tid != tid);
    if one.threads.is_empty() {
        frozen.remove(&process.pid);
    }
}

/// Whether every process homed here is frozen for a restart (the core may stop).
pub fn all_frozen() -> bool {
    let kcb = shared::this_kcb();
    kcb.processes.live.load(Ordering::Relaxed) == kcb.kept.frozen.load(Ordering::Acquire)
}

/// At the stopping kernel's idle point, before it publishes `stopped`: packs every frozen
/// process into a chain of frames of this partition and names it in the KCB. No log line
/// (the console would be most of the stop's time); a process that cannot be packed, or all of
/// them if no frame is left for the chain, is lost with this kernel.
pub fn keep_for_next_kernel() {
    let kcb = shared::this_kcb();
    kcb.kept.frozen.store(0, Ordering::Relaxed);
    let frozen = core::mem::take(&mut *FROZEN.lock());
    let kept: Vec<(Arc<Process>, &Frozen)> =
        frozen.iter().filter(|(_, one)| one.complete).filter_map(|(pid, one)| Some((find(*pid)?, one))).collect();
    if kept.is_empty() {
        return;
    }
    // First record: how many references this kernel holds at the file service for each
    // handle the kept processes name (one per `Arc<Handle>`: a fork shares its parent's).
    let mut arcs: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (process, _) in &kept {
        let state = process.state.lock();
        let handles = state
            .files
            .all()
            .map(|(_, handle, _)| handle)
            .chain(state.cwd.as_ref())
            .chain(state.root_directory.as_ref());
        for handle in handles.filter(|handle| handle.id != abi::file::CONSOLE_HANDLE) {
            let holders = arcs.entry(handle.id).or_default();
            let holder = Arc::as_ptr(handle) as usize;
            if !holders.contains(&holder) {
                holders.push(holder);
            }
        }
    }
    let counts: Vec<(u64, u64)> = arcs.iter().map(|(id, holders)| (*id, holders.len() as u64)).collect();
    let mut references = alloc::vec![0u8; format::references_size(counts.len())];
    let _ = format::encode_references(&counts, &mut references);
    let mut stream = Vec::new();
    stream.extend_from_slice(&format::record_header(references.len()));
    stream.extend_from_slice(&references);
    let mut packed_any = false;
    for (process, one) in &kept {
        if let Ok(packed) = migrate::pack(process, &one.threads, References::PassOn, one.since) {
            stream.extend_from_slice(&format::record_header(packed.bytes.len()));
            stream.extend_from_slice(&packed.bytes);
            packed_any = true;
        }
    }
    if !packed_any {
        return;
    }
    if let Ok(first) = write_chain(&stream) {
        // Release: the next kernel that takes the chain reads what was written into it.
        kcb.kept.chain.store(first, Ordering::Release);
    }
}

/// Writes `stream` into a chain of fresh frames; returns the first's address.
fn write_chain(stream: &[u8]) -> Result<u64, ()> {
    let mut chain: Vec<u64> = Vec::new();
    for _ in stream.chunks(FRAME_ROOM) {
        match frames::allocate_zeroed() {
            Ok(frame) => chain.push(frame),
            Err(_) => {
                for frame in chain {
                    let _ = frames::free(frame);
                }
                return Err(());
            }
        }
    }
    for (index, (&frame, bytes)) in chain.iter().zip(stream.chunks(FRAME_ROOM)).enumerate() {
        let header = FrameHeader { next: chain.get(index + 1).copied().unwrap_or(0), length: bytes.len() };
        let written = frames::with_frame_bytes(frame, |page| {
            page[..FRAME_HEADER].copy_from_slice(&header.encode());
            page[FRAME_HEADER..FRAME_HEADER + bytes.len()].copy_from_slice(bytes);
        });
        if written.is_err() {
            for frame in chain {
                let _ = frames::free(frame);
            }
            return Err(());
        }
    }
    Ok(chain[0])
}

/// At entry, right after the frame allocator is set up and before anything takes a frame:
/// takes the chain a restart kept in the KCB, keeps its frames and the frames of every image
/// in it out of the free frames, and holds the images for [`install_kept`]. An image naming a
/// frame outside this allocator, or one taken already, is dropped (its process is lost, and
/// the log says so); the rest are kept.
pub fn take_kept_frames() {
    let kcb = shared::this_kcb();
    let first = kcb.kept.chain.swap(0, Ordering::Acquire);
    if first == 0 {
        return;
    }
    let mut guard = frames::FRAMES.lock();
    let Some(allocator) = guard.as_mut() else { return };
    let mut stream = Vec::new();
    let mut chain = Vec::new();
    let mut at = first;
    while at != 0 && chain.len() < MAX_CHAIN_FRAMES {
        if allocator.claim(at).is_err() {
            log::error!("a kept process chain names frame {at:#x}, not this kernel's to take: the rest is dropped");
            break;
        }
        chain.push(at);
        // The frame was just claimed for this, so the allocator lends its bytes.
        let Ok(page) = allocator.frame_bytes(at) else { break };
        let Some(header) = FrameHeader::decode(page) else { break };
        stream.extend_from_slice(&page[FRAME_HEADER..FRAME_HEADER + header.length]);
        at = header.next;
    }
    for &frame in &chain {
        let _ = allocator.free(frame);
    }
    let mut images = Vec::new();
    let mut records = format::records(&stream);
    let references = records.next().map(|record| format::decode_references(record).collect()).unwrap_or_default();
    for bytes in records {
        let Ok(image) = MoveImage::decode(bytes) else {
            log::error!("a kept process image is malformed: dropped");
            continue;
        };
        let mut claimed = Vec::new();
        for page in image.pages() {
            if allocator.claim(page.frame).is_err() {
                break;
            }
            claimed.push(page.frame);
        }
        if claimed.len() != image.header.pages as usize {
            log::error!("process {} kept through the restart names a frame not its own: lost", image.header.pid);
            for frame in claimed {
                let _ = allocator.free(frame);
            }
            continue;
        }
        images.push(bytes.to_vec());
    }
    *TAKEN.lock() = Taken { images, references };
}

/// Whether this kernel took kept processes to build ([`take_kept_frames`]).
pub fn adopts_any() -> bool {
    !TAKEN.lock().images.is_empty()
}

/// Before the kernel reports running: builds each process [`take_kept_frames`] held, on the
/// frames it kept, with the same pid and tids; their threads run on from where they stopped.
pub fn install_kept() {
    let Taken { images, references } = core::mem::take(&mut *TAKEN.lock());
    // One reference per handle, shared by every kept process that names it.
    let mut handles = BTreeMap::new();
    let kcb = shared::this_kcb();
    let (asked, stopped) = (kcb.stop_asked_tsc.load(Ordering::Relaxed), kcb.stopped_tsc.load(Ordering::Relaxed));
    // The asker of a restart waits for this kernel with the flag set; a start after a
    // `stop --keep` finds it clear.
    let through = if kcb.restart_pending.load(Ordering::Acquire) != 0 { "restart" } else { "stop" };
    for bytes in images {
        let Ok(image) = MoveImage::decode(&bytes) else { continue };
        let header = image.header;
        let us = |from: u64, to: u64| crate::time::cycles_to_ns(to.saturating_sub(from)) / 1000;
        match migrate::install(&image, Arrival::Kept, Some(&mut handles)) {
            // Printed once the processes ran (`console::defer_info`): the line would add to
            // their pause.
            Ok(()) => crate::console::defer_info(alloc::format!(
                "process {} ({}) kept through the {through}: {} threads, {} pages, {} us since it stopped \
                 ({} us to the stop's request, {} us to the stop, {} us for the next kernel)",
                header.pid,
                core::str::from_utf8(image.name).unwrap_or("?"),
                header.threads,
                header.pages,
                us(header.packed_tsc, crate::arch::cpu::read_tsc()),
                us(header.packed_tsc, asked),
                us(asked, stopped),
                us(stopped, crate::arch::cpu::read_tsc()),
            )),
            Err(error) => {
                // `install` freed what it built, the adopted frames with it.
                log::error!("process {} kept through the restart could not be built (errno {error}): lost", header.pid);
            }
        }
    }
    // The old kernel held `count` references where this one holds one: the rest go back
    // (a dropped handle queues its release).
    for (id, count) in references {
        for _ in 1..count.min(1 << 16) {
            drop(Handle::adopt(id, abi::file::HandleKind::Regular));
        }
    }
}

/// A kernel core handed back a call of a thread of process `pid`: if it is frozen, its
/// threads run the call where they wait ([`stay_current`]).
pub fn nudge(pid: u32) {
    if FROZEN.lock().contains_key(&pid) {
        sched::wake(WaitToken::Reply(FROZEN_TOKEN | u64::from(pid)), usize::MAX);
    }
}

/// Keeps `process` for the restart of this core (or a stop that keeps it until a start): marks
/// it and wakes its threads, as a move.
pub fn ask(process: &Arc<Process>) {
    ASKED_TSC.store(crate::arch::cpu::read_tsc(), Ordering::Relaxed);
    process.moving.store(shared::this_core() + 1, Ordering::Relaxed);
    sched::wake_for_move(process.pid);
}

/// When this core's processes were last asked to stay for a restart: where their pause
/// begins (a thread stops running its own code there, at the latest at its next tick).
static ASKED_TSC: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
