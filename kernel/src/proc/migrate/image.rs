//! Packing a stopped process into the image a move (or a restart) carries.

use super::NO_RETURN;
use crate::arch::idt::InterruptFrame;
use crate::arch::user::FpuState;
use crate::core::shared;
use crate::fs::Handle;
use crate::mm::user::AreaKind;
use crate::proc::ThreadExt;
use crate::proc::{signal, Errno, Process};
use crate::sched::{self, Thread};
use abi::migration::{
    MoveHeader, MoveParts, MovedAction, MovedArea, MovedChild, MovedDescriptor, MovedPage, MovedSignal, MovedThread,
    NOT_EXITED, NO_RESTART, SIGNALS,
};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use linux_raw_sys::errno;

/// The number in the next move id this instance hands out (see [`pack`]).
static NEXT_MOVE: AtomicU64 = AtomicU64::new(1);

/// The thread's state as the image carries it.
pub(in crate::proc) fn capture_thread(thread: &Thread, frame: &InterruptFrame) -> MovedThread {
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
pub(in crate::proc) struct Packed {
    pub bytes: Vec<u8>,
    pub(super) retained: Vec<Handle>,
    pub(super) pending: Vec<MovedSignal>,
    pub(super) move_id: u64,
}

/// Whether a packing takes one more reference at the file service for each open file: a
/// move does (the origin lets go of its own); a process kept through a restart does not
/// (the stopping kernel's references pass to the next kernel, as its memory does).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::proc) enum References {
    Retain,
    PassOn,
}

/// Packs `process`, its threads stopped as `threads` say, as an image; `packed_tsc` is when
/// it stopped.
pub(in crate::proc) fn pack(
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
    let (open_files, directories, children, areas, pages, heap, name, path, command_line, umask) = {
        let mut state = process.state.lock();
        // The other kernel knows nothing of this one's file page cache.
        state.memory.privatize_shared().map_err(|_| errno::ENOMEM)?;
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
            [state.cwd.clone(), state.root_directory.clone()],
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
    let mut directory_words = [abi::file::NONE; 2];
    for (directory, word) in directories.iter().zip(&mut directory_words) {
        *word = match directory {
            Some(directory) if references == References::PassOn => directory.id,
            Some(directory) => {
                let copy = crate::fs::client::retain(directory)?;
                let id = copy.id;
                retained.push(copy);
                id
            }
            None => abi::file::NONE,
        };
    }
    let [working_directory, root_directory] = directory_words;
    drop(open_files);
    let me = shared::this_core();
    let timer = crate::proc::timer::get(process);
    let credentials = process.credentials.lock().clone();
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
        root_directory,
        packed_tsc,
        return_core: match process.returns_to.load(Ordering::Relaxed) {
            NO_RETURN => abi::migration::NO_RETURN,
            returns_to => (returns_to >> 32) as u32,
        },
        return_incarnation: process.returns_to.load(Ordering::Relaxed) as u32,
        death_signal: process.death_signal(),
        timer_next_ns: timer.next_ns,
        timer_interval_ns: timer.interval_ns,
        credentials: credentials.ids,
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
        groups: &credentials.groups,
    };
    let mut bytes = alloc::vec![0u8; abi::migration::encoded_size(&parts)];
    abi::migration::encode(&mut bytes, &header, &parts).ok_or(errno::EINVAL)?;
    Ok(Packed { bytes, retained, pending, move_id })
}

/// The code of an area's kind in an image ([`area_kind`] reads it back).
fn area_kind_code(kind: AreaKind) -> u32 {
    match kind {
        AreaKind::Program => 0,
        AreaKind::Heap => 1,
        AreaKind::Stack => 2,
        AreaKind::Anonymous => 3,
    }
}

/// The kind of area an image's `code` names, if any.
pub(super) fn area_kind(code: u32) -> Option<AreaKind> {
    Some(match code {
        0 => AreaKind::Program,
        1 => AreaKind::Heap,
        2 => AreaKind::Stack,
        3 => AreaKind::Anonymous,
        _ => return None,
    })
}
