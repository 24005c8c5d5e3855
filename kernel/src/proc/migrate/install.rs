//! Taking a process in from its image: check the image, then build the process and its threads.
//!
//! [`install`] follows STYLE.md's "decode, then invoke": [`check`] refuses an image this
//! kernel cannot take and changes nothing; the steps after it build the process, and fail only
//! for want of frames or of a KCB slot another move took meanwhile.

use super::evacuate::expect_returning;
use super::image::area_kind;
use super::routing::{can_record, give_back, record_here};
use super::{NOT_MOVING, NO_RETURN};
use crate::arch::idt::InterruptFrame;
use crate::arch::paging::PAGE_SIZE;
use crate::arch::user::{self, FpuState};
use crate::core::kcb::{Kcb, PartitionRange, Role};
use crate::core::shared;
use crate::fs::{FileTable, Handle};
use crate::mm::user::{AddressSpace, Area, MemoryError, PageSource, Protection};
use crate::proc::ThreadExt;
use crate::proc::{
    find, home_of, range_of, signal, Child, Errno, Loan, Options, Parent, Process, ProcessCpu, ProcessState, NO_STATUS,
    PROCESSES,
};
use crate::sched::{self, Thread};
use abi::migration::{MoveImage, NOT_EXITED, NO_RESTART, SIGNALS};
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;

/// How the process of an image comes to this kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::proc) enum Arrival {
    /// From another core: its pages are copied out of the sender's partition.
    Moved,
    /// From this OSnode's previous kernel, through a restart: its pages stay where they are
    /// (frames of this partition the instance took for them at entry).
    Kept,
}

/// An image [`check`] accepted, with what it decoded on the way.
struct Checked {
    /// The core the image comes from.
    origin: usize,
    /// That core's KCB, where the move's fate is decided.
    origin_kcb: &'static Kcb,
    /// The frame of each present page in the origin's partition, by its user address.
    frames: BTreeMap<u64, u64>,
    /// The process's areas, as this kernel's memory manager describes them.
    areas: Vec<Area>,
}

/// Builds the process of `image` here. Refuses (changing nothing) when this core is no
/// timesharing core, the pid lives here already, the image names frames outside its sender's
/// partition or memory outside user space, or frames run out.
pub(in crate::proc) fn install(
    image: &MoveImage<'_>,
    arrival: Arrival,
    handles: Option<&mut BTreeMap<u64, Arc<Handle>>>,
) -> Result<(), Errno> {
    let checked = check(image, arrival)?;
    // Decided here, before anything is built: an origin that gave up waiting for the answer
    // runs the process on, and it must not run here too. Once taken, the origin waits for
    // the answer, whatever it says.
    if arrival == Arrival::Moved && !kcb::block::MoveFates(&checked.origin_kcb.moves_out).take(image.header.move_id) {
        return Err(errno::ECANCELED);
    }
    let memory = build_memory(image, arrival, &checked.frames, checked.areas)?;
    // For kept processes, `handles` is every kept process's: they share one adopted reference
    // per handle.
    let mut own = BTreeMap::new();
    let handles = handles.unwrap_or(&mut own);
    let (files, directories) = adopt_files(image, arrival, handles);
    let process = build_process(image, memory, files, directories);
    if process.returns_to.load(Ordering::Relaxed) != NO_RETURN {
        expect_returning();
    }
    let threads = match build_threads(image, &process) {
        Ok(threads) => threads,
        Err(error) => return Err(failed_after_adoption(arrival, &process, handles, error)),
    };
    add_pending_signals(image, &process, &threads);
    if let Err(error) = record_ids(image.header.pid, &threads, checked.origin) {
        return Err(failed_after_adoption(arrival, &process, handles, error));
    }
    crate::proc::report_to_proc(&process);
    let timer = crate::proc::timer::RealTimer {
        next_ns: image.header.timer_next_ns,
        interval_ns: image.header.timer_interval_ns,
    };
    crate::proc::timer::install(&process, timer);
    PROCESSES.lock().insert(image.header.pid, process);
    crate::proc::publish_counts();
    adopt_syspages(image, arrival, &threads);
    for thread in threads {
        sched::make_ready(thread);
    }
    Ok(())
}

/// Whether this kernel can take the process of `image` as it comes (`arrival`), and its
/// frames and areas decoded. Changes nothing.
fn check(image: &MoveImage<'_>, arrival: Arrival) -> Result<Checked, Errno> {
    let header = &image.header;
    let origin = header.origin as usize;
    if crate::core::shared::this_kcb().role() != Role::Timesharing {
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
    for moved in image.threads() {
        // A moved thread's syspage was let go of for the move; a kept thread's too for a stop
        // until a start, and is served on through a restart.
        let released = moved.syspage_flags & abi::migration::SYSPAGE_RELEASED != 0;
        if moved.syspage_core != abi::migration::NO_SYSPAGE && arrival != Arrival::Kept && !released {
            return Err(errno::EINVAL);
        }
    }
    Ok(Checked { origin, origin_kcb, frames, areas })
}

/// The process's address space: each present page copied out of the origin's partition
/// through the copy window (a move), or the frame it names adopted where it is (kept).
fn build_memory(
    image: &MoveImage<'_>,
    arrival: Arrival,
    frames: &BTreeMap<u64, u64>,
    areas: Vec<Area>,
) -> Result<AddressSpace, Errno> {
    let header = &image.header;
    let mut copy = |address: u64, bytes: &mut [u8]| {
        let frame = frames.get(&address).copied().ok_or(MemoryError::BadRange)?;
        crate::mm::window::copy_from_frame(frame, bytes).map_err(|_| MemoryError::OutOfMemory)
    };
    let adopt = |address: u64| frames.get(&address).copied();
    let source = match arrival {
        Arrival::Moved => PageSource::Copy(&mut copy),
        Arrival::Kept => PageSource::Adopt(&adopt),
    };
    AddressSpace::rebuild(
        areas,
        (header.heap_start, header.heap_end),
        image.pages().map(|page| (page.address, page.flags)),
        source,
    )
    .map_err(|error| match error {
        MemoryError::OutOfMemory => errno::ENOMEM,
        _ => errno::EINVAL,
    })
}

/// The descriptors and the working directory: one adopted reference per handle, shared by the
/// descriptors naming it (and, for kept processes, by every kept process naming it: `handles`
/// is theirs).
fn adopt_files(
    image: &MoveImage<'_>,
    arrival: Arrival,
    handles: &mut BTreeMap<u64, Arc<Handle>>,
) -> (FileTable, Directories) {
    let mut files = FileTable::empty();
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
    // A moved process's directories are references of their own (`pack` took one each).
    let mut directory = |id: u64| match (id, arrival) {
        (abi::file::NONE, _) => None,
        (id, Arrival::Moved) => Some(Arc::new(Handle::adopt(id, abi::file::HandleKind::Directory))),
        (id, Arrival::Kept) => Some(adopt(id, abi::file::HandleKind::Directory)),
    };
    let directories = (directory(image.header.working_directory), directory(image.header.root_directory));
    (files, directories)
}

/// A process's working and root directories.
type Directories = (Option<Arc<Handle>>, Option<Arc<Handle>>);

/// The process of `image` with `memory` and its files, not yet known to anyone.
fn build_process(
    image: &MoveImage<'_>,
    memory: AddressSpace,
    files: FileTable,
    (cwd, root_directory): Directories,
) -> Arc<Process> {
    let header = &image.header;
    let mut actions = [signal::Action::default(); SIGNALS];
    for (action, moved) in actions.iter_mut().zip(image.actions.iter()) {
        *action =
            signal::Action { handler: moved.handler, flags: moved.flags, restorer: moved.restorer, mask: moved.mask };
    }
    let text = |bytes: &[u8]| String::from(core::str::from_utf8(bytes).unwrap_or("?"));
    let root = memory.root();
    Arc::new(Process {
        pid: header.pid,
        parent: Parent { core: header.parent_core, pid: header.parent_pid },
        killed: AtomicBool::new(false),
        exit_status: AtomicU32::new(NO_STATUS),
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
            root_directory,
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
        loan: Mutex::new(Loan::None),
        // Not carried by the image: a moved process counts its time from its arrival.
        cpu: Mutex::new(ProcessCpu::default()),
        options: Mutex::new(Options::default()),
        stopped: AtomicU32::new(0),
        real_timer: Mutex::new(crate::proc::timer::RealTimer::default()),
        // Its ids move with it: a process never changes user by changing core.
        credentials: Mutex::new(crate::proc::credentials::Credentials {
            ids: header.credentials,
            groups: image.groups().collect(),
        }),
    })
}

/// The threads of `image`, in `process`, with their registers, FPU image, TLS, signal state
/// and the application core they go back to; not running yet.
fn build_threads(image: &MoveImage<'_>, process: &Arc<Process>) -> Result<Vec<Arc<Thread>>, Errno> {
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
        )
        .map_err(|_| errno::ENOMEM)?;
        thread.part().clear_child_tid.store(moved.clear_child_tid, Ordering::Relaxed);
        if moved.application_core != abi::migration::AT_HOME {
            // It goes back to its AC from its first way to ring 3 (from this new home, for a
            // move: the AC checks that the pid's range names it).
            crate::proc::remote::adopt_away(
                &thread,
                moved.application_core as usize,
                u64::from(moved.application_flags),
            );
        }
        if moved.restart_until_ns != NO_RESTART {
            *thread.part().restart_sleep.lock() = Some((moved.restart_until_ns, moved.restart_remaining));
        }
        threads.push(thread);
    }
    Ok(threads)
}

/// The signals pending in `image`: each for its thread, or for the process (thread 0, or a
/// thread that is not there).
fn add_pending_signals(image: &MoveImage<'_>, process: &Process, threads: &[Arc<Thread>]) {
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
}

/// Where the pid and every tid live now, for every core's routing; from here on signals
/// come here. (Fails only if another move took the last free slots since [`check`]: the
/// process and threads are dropped, their memory with them, a moved process's file
/// references are left to the origin, and the ids recorded so far are given back.)
fn record_ids(pid: u32, threads: &[Arc<Thread>], origin: usize) -> Result<(), Errno> {
    let ids: Vec<u32> = core::iter::once(pid).chain(threads.iter().map(|t| t.tid)).collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    for (index, &id) in unique.iter().enumerate() {
        if let Err(error) = record_here(id) {
            unique[..index].iter().for_each(|&recorded| give_back(recorded, origin));
            return Err(error);
        }
    }
    Ok(())
}

/// Registers the threads' syspages here. A kept thread's: its kernel core serves it on; this
/// kernel takes over the registration (what the thread's end, an unmap over the page or a
/// kick need). A moved thread's: registered anew, its copy here served from where the ring
/// stood.
fn adopt_syspages(image: &MoveImage<'_>, arrival: Arrival, threads: &[Arc<Thread>]) {
    for (moved, thread) in image.threads().zip(threads) {
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
        let (files, directories) = {
            let mut state = process.state.lock();
            (core::mem::replace(&mut state.files, FileTable::empty()), (state.cwd.take(), state.root_directory.take()))
        };
        core::mem::forget(files);
        core::mem::forget(directories);
        for handle in core::mem::take(handles).into_values() {
            core::mem::forget(handle);
        }
    }
    error
}
