//! System calls through syspages (Memsc): registration at the home, the kernel core's scan,
//! and the home's part in calls a kernel core hands back.
//!
//! A thread registers one page of its own memory with a kernel core (KC). The home pins the
//! page (it stays mapped while registered: `munmap`, `mprotect`, `exec` and the thread's end
//! unregister it first) and lends its frame to the KC by an ICC. The KC maps the frame in its
//! kernel half and scans only the head entry of each ring, round-robin (Memsc 3.3); at a
//! submitted head it takes every pending entry (3.4), each copied to its own stack before
//! anything looks at it (4.6, `syspage::Ring::take`). Calls whose answer it holds (the
//! process's identity: `getpid`, `getppid`, `gettid`, the ids, `sched_yield`) it completes at
//! once; every other call goes to the home as a [`SyspageCall`], which the thread itself runs
//! at its next way back to ring 3 (or, away on an AC, at once), and the answer completes the
//! entry. With nothing to do for `kc_spin_us` (a kernel command-line option, 2 ms by
//! default: io_uring's SQPOLL thread idles a whole second) the KC arms its notification line
//! and halts; `reef_syspage_kick` (or an AC's submit) rings it. The syspages a KC serves are
//! recorded in its KCB, so a restarted KC serves them on (`docs/dynamic-cores.md`).

use super::SyscallResult;
use crate::arch::idt::InterruptFrame;
use crate::arch::{cpu, paging::PAGE_SIZE};
use crate::core::kcb::{served, Role, ServedWord};
use crate::core::shared;
use crate::msg::icc;
use crate::proc::Errno;
use crate::sched::{self, Thread};
use abi::application::{SyspageCall, SyspageResult};
use abi::message::{handler, Kind, ICC_ARGUMENTS};
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use linux_raw_sys::errno;
use linux_raw_sys::general as nr;
use spin::Mutex;
use syspage::{Page, Request, Ring, Submitter, ENTRIES};

/// How long registration waits for the KC.
const ATTACH_TIMEOUT_MS: u64 = 1000;
/// Syspages one KC serves at most (window slots, and records in its KCB).
const MAX_SERVED: usize = crate::core::kcb::MAX_SERVED_SYSPAGES;
/// How long a home waits for a restarting KC to come back: to hand it a result, or to ask it
/// to let go of a syspage.
const RESTART_PATIENCE_MS: u64 = 2000;
/// Passes over the ring heads between two looks at the KC's message channels.
const MESSAGE_LOOK_EVERY: u32 = 16;

fn counters() -> &'static crate::core::kcb::SyscallCounters {
    &shared::this_kcb().syscalls
}

// ---------------------------------------------------------------- home side

/// A thread's registered syspage, as its home keeps it.
#[derive(Clone, Copy, Debug)]
struct Registration {
    pid: u32,
    tid: u32,
    kernel_core: usize,
    user_page: u64,
    physical: u64,
    /// Made by the kernel for `execac --syspage`, not by the program.
    kernel_made: bool,
}

static REGISTRATIONS: Mutex<Vec<Registration>> = Mutex::new(Vec::new());
/// Calls KCs handed back, for their threads to run.
static FORWARDED: Mutex<VecDeque<SyspageCall>> = Mutex::new(VecDeque::new());
static FORWARDED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// `reef_syspage_register(page, kc)`.
pub fn register(page: u64, kernel_core: u64) -> SyscallResult {
    let thread = sched::current();
    let kernel_core = usize::try_from(kernel_core).map_err(|_| errno::EINVAL)?;
    register_for(&thread, page, kernel_core, false).map(|()| 0)
}

fn register_for(thread: &Thread, page: u64, kernel_core: usize, kernel_made: bool) -> Result<(), Errno> {
    let process = thread.process.as_ref().ok_or(errno::EPERM)?;
    if page == 0 || !page.is_multiple_of(PAGE_SIZE) {
        return Err(errno::EINVAL);
    }
    if kernel_core >= (shared::facts().core_count as usize).min(crate::msg::messaging_cores()) {
        return Err(errno::EINVAL);
    }
    if REGISTRATIONS.lock().iter().any(|r| r.tid == thread.tid) {
        return Err(errno::EBUSY);
    }
    let physical = {
        let mut state = process.state.lock();
        let memory = &mut state.memory;
        let area = memory.area_of(page).copied().ok_or(errno::EFAULT)?;
        if area.kind != crate::mm::user::AreaKind::Anonymous || !area.protection.write {
            return Err(errno::EINVAL);
        }
        if memory.translate(page).is_none() && !memory.handle_fault(page, true, false) {
            return Err(errno::EFAULT);
        }
        memory.translate(page).ok_or(errno::EFAULT)?
    };
    let kcb = shared::get().kcb(kernel_core);
    if !kcb.state().is_live() {
        return Err(errno::EAGAIN);
    }
    if kcb.role() != Role::Kernel {
        return Err(errno::ENXIO);
    }
    let home = shared::this_core() as u64;
    let arguments = [
        physical,
        u64::from(process.pid) << 32 | u64::from(thread.tid),
        home << 32 | u64::from(process.parent.pid),
        0,
        0,
    ];
    match icc::call(kernel_core, handler::SYSPAGE_ATTACH, arguments, ATTACH_TIMEOUT_MS) {
        Ok(0) => {}
        Ok(refusal) => return Err(refusal as u32),
        Err(icc::IccError::Timeout { .. }) => return Err(errno::ETIMEDOUT),
        Err(_) => return Err(errno::EAGAIN),
    }
    REGISTRATIONS.lock().push(Registration {
        pid: process.pid,
        tid: thread.tid,
        kernel_core,
        user_page: page,
        physical,
        kernel_made,
    });
    Ok(())
}

/// `reef_syspage_unregister()`.
pub fn unregister() -> SyscallResult {
    let tid = sched::current().tid;
    let registration = take_registrations(|r| r.tid == tid).pop().ok_or(errno::ENOENT)?;
    detach(&registration);
    Ok(0)
}

fn take_registrations(which: impl Fn(&Registration) -> bool) -> Vec<Registration> {
    let mut registrations = REGISTRATIONS.lock();
    let taken = registrations.iter().filter(|r| which(r)).copied().collect();
    registrations.retain(|r| !which(r));
    taken
}

/// Tells the KC to stop serving a syspage (and to unmap its frame) and waits for it, so the
/// frame can go back to the process (or be freed) afterwards.
fn detach(registration: &Registration) {
    let thread = u64::from(registration.pid) << 32 | u64::from(registration.tid);
    let home = shared::this_core() as usize;
    let kernel_core = registration.kernel_core;
    let deadline = crate::time::deadline_after_ms(RESTART_PATIENCE_MS);
    loop {
        if crate::msg::is_live(kernel_core) {
            match icc::call(kernel_core, handler::SYSPAGE_DETACH, [thread, home as u64, 0, 0, 0], ATTACH_TIMEOUT_MS) {
                Ok(_) => break,
                // It stopped for a restart before it answered: its next kernel may serve the
                // page on, so ask that one (or take the record back while none runs).
                Err(_) if is_restarting(kernel_core) && cpu::read_tsc() < deadline => {
                    cpu::relax();
                    continue;
                }
                Err(error) => {
                    log::warn!("kernel core {kernel_core} did not confirm it let go of a syspage: {error}");
                    break;
                }
            }
        }
        // No kernel runs there: the syspage is kept in its KCB (a restart) or was never
        // claimed. Take it back there, unless a new kernel took it over already and is about
        // to run: then it is that kernel's to let go of.
        let record = shared::get().kcb(kernel_core).served_syspages.iter().find(|record| {
            let word = record.read();
            word.state != served::FREE
                && usize::from(word.home) == home
                && record.tid.load(Ordering::Relaxed) == registration.tid
        });
        match record {
            None => break,
            Some(record) if record.change_state(served::KEPT, served::FREE) => break,
            Some(_) if cpu::read_tsc() > deadline => {
                log::warn!("kernel core {kernel_core} still holds a syspage of thread {}", registration.tid);
                break;
            }
            Some(_) => cpu::relax(),
        }
    }
    let tid = registration.tid;
    let mut forwarded = FORWARDED.lock();
    forwarded.retain(|call| call.tid != tid);
    FORWARDED_COUNT.store(forwarded.len(), Ordering::Relaxed);
}

/// `reef_syspage_kick()`: rings the KC's doorbell (an IPI only if it halted).
pub fn kick() -> SyscallResult {
    let tid = sched::current().tid;
    let kernel_core = REGISTRATIONS.lock().iter().find(|r| r.tid == tid).map(|r| r.kernel_core).ok_or(errno::ENOENT)?;
    ring_doorbell(kernel_core);
    Ok(0)
}

fn ring_doorbell(kernel_core: usize) {
    if crate::msg::is_live(kernel_core) {
        crate::msg::notify(kernel_core, crate::msg::NotifyMode::Hybrid);
    }
}

/// Thread `tid` ends (or execs): its syspage is served no more.
pub fn thread_leaves(tid: u32) {
    for registration in take_registrations(|r| r.tid == tid) {
        detach(&registration);
    }
}

/// `[start, end)` of process `pid` is being unmapped or changed: syspages in it are served no
/// more (the KC must not write into a frame the process gave back).
pub fn forget_range(pid: u32, start: u64, end: u64) {
    for registration in take_registrations(|r| r.pid == pid && r.user_page >= start && r.user_page < end) {
        detach(&registration);
    }
}

/// For `execac --syspage`: a fresh page in the thread's process, registered with the first
/// kernel core.
pub fn prepare_for_ac(thread: &Thread) -> Result<(), Errno> {
    if REGISTRATIONS.lock().iter().any(|r| r.tid == thread.tid) {
        return Ok(());
    }
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    let region = shared::get();
    let kernel_core = (0..count)
        .find(|&core| region.kcb(core).state().is_live() && region.kcb(core).role() == Role::Kernel)
        .ok_or(errno::ENXIO)?;
    let process = thread.process.as_ref().ok_or(errno::EPERM)?;
    let page = {
        let mut state = process.state.lock();
        let start = state.memory.find_free(0, PAGE_SIZE).map_err(|_| errno::ENOMEM)?;
        state
            .memory
            .map_now(
                start,
                start + PAGE_SIZE,
                crate::mm::user::Protection::READ_WRITE,
                crate::mm::user::AreaKind::Anonymous,
            )
            .map_err(|_| errno::ENOMEM)?;
        start
    };
    register_for(thread, page, kernel_core, true)
}

/// Whether `[start, end)` of process `pid` holds a syspage the kernel made for `execac
/// --syspage`: `munmap`, `mprotect` and `MAP_FIXED` over it fail with `EINVAL` (the page is
/// the kernel's; the call that would remove it may itself be travelling through it).
pub fn holds_kernel_page(pid: u32, start: u64, end: u64) -> bool {
    REGISTRATIONS.lock().iter().any(|r| r.pid == pid && r.kernel_made && r.user_page >= start && r.user_page < end)
}

/// The kernel core and physical frame of thread `tid`'s syspage.
pub fn of_thread(tid: u32) -> Option<(usize, u64)> {
    REGISTRATIONS.lock().iter().find(|r| r.tid == tid).map(|r| (r.kernel_core, r.physical))
}

/// Thread `tid`'s syspage as a restart keeps it: its kernel core, its user address, and
/// whether the kernel made it.
pub fn kept_registration(tid: u32) -> Option<(usize, u64, bool)> {
    REGISTRATIONS.lock().iter().find(|r| r.tid == tid).map(|r| (r.kernel_core, r.user_page, r.kernel_made))
}

/// In the next kernel of a restart that kept `thread`'s process: takes its syspage's
/// registration over. The kernel core serves the page on (its KCB says whose it is); the page
/// lies in the frame it had, so the kernel core's mapping of it stays good. Fails if the
/// page is not where the kept process's memory has it.
pub fn adopt_registration(thread: &Thread, kernel_core: usize, user_page: u64, kernel_made: bool) -> Result<(), Errno> {
    let process = thread.process.as_ref().ok_or(errno::EPERM)?;
    let physical = process.state.lock().memory.translate(user_page).ok_or(errno::EFAULT)?;
    let served = shared::get().kcbs.get(kernel_core).is_some_and(|kcb| {
        kcb.served_syspages.iter().any(|record| {
            let word = record.read();
            word.state != served::FREE
                && usize::from(word.home) == shared::this_core() as usize
                && record.tid.load(Ordering::Relaxed) == thread.tid
                && u64::from(record.frame.load(Ordering::Relaxed)) == physical / PAGE_SIZE
        })
    });
    if !served {
        return Err(errno::ENOENT);
    }
    REGISTRATIONS.lock().push(Registration {
        pid: process.pid,
        tid: thread.tid,
        kernel_core,
        user_page,
        physical,
        kernel_made,
    });
    Ok(())
}

/// Calls that change the calling thread's registers or where it runs cannot travel by
/// syspage: the home has no trap frame of the thread to change.
fn travels_by_syspage(number: u64) -> bool {
    const FRAME_CALLS: [u32; 11] = [
        nr::__NR_rt_sigreturn,
        nr::__NR_fork,
        nr::__NR_vfork,
        nr::__NR_clone,
        nr::__NR_clone3,
        nr::__NR_execve,
        nr::__NR_execveat,
        nr::__NR_exit,
        nr::__NR_exit_group,
        nr::__NR_sigaltstack,
        nr::__NR_arch_prctl,
    ];
    !abi::call::is_reef_call(number) && !FRAME_CALLS.iter().any(|&n| u64::from(n) == number)
}

fn on_call(bytes: &[u8]) -> crate::msg::HandlerResult {
    let call = SyspageCall::decode(bytes)?;
    let tid = call.tid;
    {
        let mut forwarded = FORWARDED.lock();
        forwarded.push_back(call);
        FORWARDED_COUNT.store(forwarded.len(), Ordering::Relaxed);
    }
    // Away on an AC, the thread waits here; at home it takes them on its way to ring 3, or
    // where it waits, frozen, for a restart.
    sched::wake(sched::WaitToken::Away(tid), 1);
    crate::proc::keep::nudge(call.pid);
    Ok(())
}

/// Whether calls handed back by KCs wait to be run here.
pub fn has_forwarded() -> bool {
    FORWARDED_COUNT.load(Ordering::Relaxed) != 0
}

/// Runs the calls KCs handed back for the running thread (on its way to ring 3, or while it
/// waits for its AC) and answers them.
pub fn run_forwarded() {
    if FORWARDED_COUNT.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Some(tid) = sched::with_current_thread(|t| t.tid) else { return };
    loop {
        let call = {
            let mut forwarded = FORWARDED.lock();
            let Some(index) = forwarded.iter().position(|c| c.tid == tid) else { return };
            let call = forwarded.remove(index);
            FORWARDED_COUNT.store(forwarded.len(), Ordering::Relaxed);
            call
        };
        let Some(call) = call else { return };
        let number = u64::from(call.number);
        let value = if travels_by_syspage(number) {
            super::count(number);
            let mut frame = InterruptFrame::default();
            match super::handle(number, super::Arguments(call.arguments), &mut frame) {
                Ok(value) => value as i64,
                Err(error) if crate::proc::signal::is_restart(error) => -i64::from(errno::EINTR),
                Err(error) => -i64::from(error),
            }
        } else {
            -i64::from(errno::EINVAL)
        };
        let result = SyspageResult {
            pid: call.pid,
            tid: call.tid,
            index: call.index,
            sequence: call.sequence,
            number: call.number,
            value,
        };
        let line = crate::msg::line(Kind::SyspageResult, |out| result.encode(out));
        // The KC serving the page now: it may have moved since it handed the call here.
        let kernel_core = of_thread(tid).map_or(usize::from(call.kernel_core), |(core, _)| core);
        if let Err(error) = send_to_kernel_core(kernel_core, &line) {
            log::warn!("a syspage result for thread {tid} was not sent: {error}");
        }
    }
}

/// Whether a boot driver is restarting `kernel_core`: its syspages outlive its kernel.
fn is_restarting(kernel_core: usize) -> bool {
    shared::get().kcb(kernel_core).restart_pending.load(Ordering::Acquire) == ::kcb::block::RESTARTING
}

/// Sends `line` to `kernel_core`, waiting out a restart of it: the entry it completes is
/// still in the syspage, which the new kernel serves on.
fn send_to_kernel_core(kernel_core: usize, line: &channel::Message) -> Result<(), crate::msg::SendError> {
    let deadline = crate::time::deadline_after_ms(RESTART_PATIENCE_MS);
    loop {
        match crate::msg::send_blocking(kernel_core, line) {
            Err(_) if is_restarting(kernel_core) && cpu::read_tsc() < deadline => {
                crate::msg::drain();
                cpu::relax();
            }
            result => return result,
        }
    }
}

// ---------------------------------------------------------------- kernel core side

/// A syspage this KC serves.
struct Served {
    home: usize,
    pid: u32,
    tid: u32,
    ppid: u32,
    slot: usize,
    ring: Ring,
}

impl Served {
    /// Its KCB record's word in `state`, with the ring's head where it stands.
    fn word(&self, state: u8) -> u32 {
        ServedWord { state, head: self.ring.head() as u8, home: self.home as u16 }.pack()
    }
}

static SERVED: Mutex<Vec<Served>> = Mutex::new(Vec::new());
/// This KC hands its syspages to another: its scan takes nothing meanwhile.
static HANDING_OVER: AtomicBool = AtomicBool::new(false);

fn window(slot: usize) -> u64 {
    crate::mm::window::SYSPAGE_WINDOW_BASE + (slot as u64) * PAGE_SIZE
}

fn page_at(address: u64) -> &'static Page {
    // SAFETY: `address` is a window slot mapped (by `attach_here` or the AC's `map_own`) to a
    // syspage frame the home lent and keeps pinned until this core unmapped it; `Page` is
    // only atomics, so the process writing it meanwhile is no data race, and any bit
    // pattern is a valid `Page`.
    unsafe { &*(address as *const Page) }
}

fn attach_here(arguments: &[u64; ICC_ARGUMENTS]) -> u64 {
    let physical = arguments[0];
    let (pid, tid) = ((arguments[1] >> 32) as u32, arguments[1] as u32);
    let (home, ppid) = ((arguments[2] >> 32) as usize, arguments[2] as u32);
    if shared::this_kcb().role() != Role::Kernel {
        return u64::from(errno::ENXIO);
    }
    let mut served = SERVED.lock();
    if served.iter().any(|s| s.tid == tid && s.home == home) {
        return u64::from(errno::EBUSY);
    }
    let Some(slot) = (0..MAX_SERVED).find(|slot| served.iter().all(|s| s.slot != *slot)) else {
        return u64::from(errno::ENOMEM);
    };
    // The KCB keeps the frame as a 32-bit page number.
    if physical / PAGE_SIZE > u64::from(u32::MAX) || crate::mm::window::map_frame(window(slot), physical).is_err() {
        return u64::from(errno::ENOMEM);
    }
    // A page another KC served comes with its ring's head; a page registered again may hold
    // entries of before: serve from its first submitted one.
    let page = page_at(window(slot));
    let head = if arguments[3] & handler::SYSPAGE_HEAD_GIVEN != 0 {
        (arguments[3] & 0xFF) as usize % ENTRIES
    } else {
        (0..ENTRIES).find(|&i| page.entry(i).header().status == syspage::status::SUBMITTED).unwrap_or(0)
    };
    let one = Served { home, pid, tid, ppid, slot, ring: Ring::starting_at(head) };
    let record = &shared::this_kcb().served_syspages[slot];
    record.pid.store(pid, Ordering::Relaxed);
    record.tid.store(tid, Ordering::Relaxed);
    record.parent_pid.store(ppid, Ordering::Relaxed);
    record.frame.store((physical / PAGE_SIZE) as u32, Ordering::Relaxed);
    // Release: a home that finds the record (a restart) reads the fields above.
    record.word.store(one.word(served::SERVED), Ordering::Release);
    served.push(one);
    shared::this_kcb().syspages.store(served.len() as u32, Ordering::Release);
    0
}

fn detach_here(arguments: &[u64; ICC_ARGUMENTS]) -> u64 {
    let tid = arguments[0] as u32;
    let home = arguments[1] as usize;
    if forget_here(tid, home) {
        0
    } else {
        u64::from(errno::ENOENT)
    }
}

/// Stops serving thread `tid`'s syspage of `home`: unmaps it and frees its KCB record;
/// whether it was served here.
fn forget_here(tid: u32, home: usize) -> bool {
    let mut served = SERVED.lock();
    let Some(index) = served.iter().position(|s| s.tid == tid && s.home == home) else {
        return false;
    };
    let gone = served.swap_remove(index);
    crate::mm::window::unmap_frame(window(gone.slot));
    shared::this_kcb().served_syspages[gone.slot].word.store(0, Ordering::Release);
    shared::this_kcb().syspages.store(served.len() as u32, Ordering::Release);
    true
}

/// On a kernel core leaving its role, or stopping for good: hands every syspage it serves to
/// another running kernel core, through each page's home (the home owns the registration, so
/// a thread letting go meanwhile never leaves a kernel core serving a frame it gave back).
/// The scan takes no entry meanwhile, so the other core serves on from the same head. Calls
/// this core handed home and not yet answered are not waited for: the home sends each result
/// to whichever kernel core its registration names when the call is done, the new one once
/// the page moved, and results it sent before that are in this core's queue by the time the
/// home answers the move (and are handled before the page is let go here). Returns how many
/// syspages are left here: all of them when no other kernel core runs.
pub fn hand_over() -> usize {
    let me = shared::this_core() as usize;
    let region = shared::get();
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    let to = (0..count).find(|&core| {
        let kcb = region.kcb(core);
        core != me
            && kcb.state() == crate::core::kcb::CoreState::Running
            && kcb.role() == Role::Kernel
            && kcb.stop_requested.load(Ordering::Acquire) == 0
    });
    let Some(to) = to else { return SERVED.lock().len() };
    HANDING_OVER.store(true, Ordering::Relaxed);
    let pages: Vec<(usize, u32, u32, u32, usize)> =
        SERVED.lock().iter().map(|one| (one.home, one.pid, one.tid, one.ppid, one.ring.head())).collect();
    for (home, pid, tid, ppid, head) in pages {
        let arguments =
            [u64::from(pid) << 32 | u64::from(tid), to as u64, head as u64, (me as u64) << 32 | u64::from(ppid), 0];
        match icc::call(home, handler::SYSPAGE_MOVE, arguments, ATTACH_TIMEOUT_MS) {
            // The home moved it (core `to` serves it now), or its thread let go of it meanwhile
            // (its detach came here, or comes: nothing is left to serve either way). Results
            // the home sent here before it answered complete their entries first.
            Ok(0) => {
                crate::msg::drain();
                forget_here(tid, home);
            }
            Ok(refusal) if refusal == u64::from(errno::ENOENT) => {}
            Ok(refusal) => log::warn!("home {home} kept thread {tid}'s syspage here (errno {refusal})"),
            Err(error) => log::warn!("home {home} did not move thread {tid}'s syspage: {error}"),
        }
    }
    HANDING_OVER.store(false, Ordering::Relaxed);
    let left = SERVED.lock().len();
    if left == 0 {
        log::info!("kernel core {me} handed its syspages to kernel core {to}");
    }
    left
}

/// On a home, asked by a kernel core leaving its role (`SYSPAGE_MOVE`): moves the thread's
/// registration to the kernel core named, which maps the page and serves on from the head
/// given. The registration decides: a thread that let go of its page meanwhile gets `ENOENT`.
fn move_here(arguments: &[u64; ICC_ARGUMENTS]) -> u64 {
    let (pid, tid) = ((arguments[0] >> 32) as u32, arguments[0] as u32);
    let to = arguments[1] as usize;
    let head = arguments[2] & 0xFF;
    let (from, ppid) = ((arguments[3] >> 32) as usize, arguments[3] as u32);
    let mine = |r: &Registration| r.pid == pid && r.tid == tid && r.kernel_core == from;
    let Some(physical) = REGISTRATIONS.lock().iter().find(|r| mine(r)).map(|r| r.physical) else {
        return u64::from(errno::ENOENT);
    };
    let home = shared::this_core() as u64;
    let attach = [physical, arguments[0], home << 32 | u64::from(ppid), handler::SYSPAGE_HEAD_GIVEN | head, 0];
    match icc::call(to, handler::SYSPAGE_ATTACH, attach, ATTACH_TIMEOUT_MS) {
        Ok(0) => {}
        Ok(refusal) => return refusal,
        Err(_) => return u64::from(errno::EAGAIN),
    }
    // No thread of this core ran meanwhile (a handler runs to its end), so the registration is
    // still there: it names the new kernel core from now on. Should it be gone all the same,
    // the new kernel core lets go of the frame again.
    let moved = REGISTRATIONS.lock().iter_mut().find(|r| mine(r)).map(|registration| registration.kernel_core = to);
    if moved.is_none() {
        let _ = icc::call(to, handler::SYSPAGE_DETACH, [arguments[0], home, 0, 0, 0], ATTACH_TIMEOUT_MS);
        return u64::from(errno::ENOENT);
    }
    0
}

/// The answer this KC holds for a call, if it holds one: the process's identity, fixed for
/// its life (Reef does not re-parent), and calls with nothing to do.
fn answer_here(served: &Served, number: u32) -> Option<i64> {
    match number {
        nr::__NR_getpid => Some(i64::from(served.pid)),
        nr::__NR_getppid => Some(i64::from(served.ppid)),
        nr::__NR_gettid => Some(i64::from(served.tid)),
        nr::__NR_getuid | nr::__NR_geteuid | nr::__NR_getgid | nr::__NR_getegid => Some(0),
        nr::__NR_sched_yield => Some(0),
        _ => None,
    }
}

/// One pass over every ring's head; returns whether any entry was taken.
fn scan() -> bool {
    if HANDING_OVER.load(Ordering::Relaxed) {
        return false;
    }
    let mut handed: Vec<SyspageCall> = Vec::new();
    let mut worked = false;
    // Counted here and added once a pass: an atomic add per entry would cost more than the
    // entry's own work under TCG.
    let (mut served_here, mut dropped) = (0u64, 0u64);
    {
        let mut served = SERVED.lock();
        for one in served.iter_mut() {
            let page = page_at(window(one.slot));
            // Memsc 3.3: one load of the head's header per ring and pass.
            if !one.ring.is_pending(page) {
                continue;
            }
            worked = true;
            // Memsc 3.4: every pending entry from the head on, each copied as it is taken.
            while let Some(taken) = one.ring.take(page) {
                let request = &taken;
                match answer_here(one, request.number) {
                    Some(value) => {
                        served_here += 1;
                        dropped += u64::from(!syspage::complete(page, request, value));
                    }
                    None => handed.push(SyspageCall {
                        kernel_core: shared::this_core() as u16,
                        pid: one.pid,
                        tid: one.tid,
                        index: request.index as u8,
                        sequence: request.sequence,
                        number: request.number,
                        arguments: request.arguments,
                    }),
                }
            }
        }
    }
    if worked {
        counters().syspage_served_here.fetch_add(served_here, Ordering::Relaxed);
        counters().syspage_results_dropped.fetch_add(dropped, Ordering::Relaxed);
    }
    if handed.is_empty() {
        return worked;
    }
    let homes: Vec<usize> = {
        let served = SERVED.lock();
        handed.iter().map(|call| served.iter().find(|s| s.tid == call.tid).map_or(usize::MAX, |s| s.home)).collect()
    };
    for (call, home) in handed.iter().zip(homes) {
        let mut bytes = [0u8; SyspageCall::SIZE];
        call.encode(&mut bytes);
        counters().syspage_handed_home.fetch_add(1, Ordering::Relaxed);
        if home == usize::MAX || crate::msg::send_large(home, Kind::SyspageCall, &bytes).is_err() {
            counters().syspage_results_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    worked
}

fn on_result(message: &channel::Message) -> crate::msg::HandlerResult {
    let result = SyspageResult::decode(message.payload())?;
    let served = SERVED.lock();
    let Some(one) = served.iter().find(|s| s.tid == result.tid && s.pid == result.pid) else {
        // Unregistered meanwhile: the entry's frame is no longer ours to write.
        counters().syspage_results_dropped.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    };
    let request = Request {
        index: usize::from(result.index) % ENTRIES,
        sequence: result.sequence,
        number: result.number,
        arguments: [0; 6],
    };
    if !syspage::complete(page_at(window(one.slot)), &request, result.value) {
        counters().syspage_results_dropped.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn any_pending() -> bool {
    SERVED.lock().iter().any(|one| one.ring.is_pending(page_at(window(one.slot))))
}

/// A kernel core's idle work: scan the syspages until nothing came for `kc_spin_us`, then
/// halt with the doorbell armed (a message, a kick or an AC's submit wakes it).
pub fn serve_as_kernel_core() {
    let spin = crate::time::ns_to_cycles(u64::from(shared::facts().options.kc_spin_us) * 1000);
    let mut idle_since = cpu::read_tsc();
    let mut passes = 0u32;
    while shared::this_kcb().role() == Role::Kernel {
        // Messages (registrations, results from homes) are looked at every few passes: a
        // look at every channel costs more than a pass over the ring heads.
        if passes.is_multiple_of(MESSAGE_LOOK_EVERY) {
            crate::msg::drain();
            if shared::this_kcb().stop_requested.load(Ordering::Relaxed) != 0 || crate::core::park::is_asked() {
                // A boot driver asked: the idle point is where the core stops, parks or
                // unparks.
                return;
            }
            // Parked: the host's tick ends this slice, and the host (and its other guests)
            // run before this scan goes on.
            if crate::core::park::is_guest() && crate::sched::slice_ended() {
                crate::core::park::while_waiting();
            }
        }
        passes = passes.wrapping_add(1);
        if scan() {
            idle_since = cpu::read_tsc();
            continue;
        }
        if cpu::read_tsc() - idle_since > spin {
            crate::msg::sleep_unless(any_pending);
            return;
        }
        cpu::relax();
    }
}

// ---------------------------------------------------------------- application core side

/// The AC's view of its guest's syspage: where it mapped the frame, and its submit state.
struct OwnPage {
    physical: u64,
    submitter: Submitter,
}

static OWN: Mutex<Option<OwnPage>> = Mutex::new(None);

/// The AC's window slot (an AC serves no syspage, so slot 0 is free).
const OWN_SLOT: usize = 0;

/// On an AC: the guest's call as a syspage entry for `kernel_core`, waited for; false when it
/// must go to the home instead (a call that changes the thread's registers, a full ring, a
/// KC that stopped).
pub fn submit_for_ac(frame: &mut InterruptFrame, kernel_core: usize, physical: u64) -> bool {
    let number = frame.rax;
    // The KC the home named at the last run, unless it left its role since (its syspages went
    // to another KC, which the KCBs name).
    let kernel_core = if is_running_kernel_core(kernel_core) { kernel_core } else { server_of(physical, kernel_core) };
    if physical == 0 || !travels_by_syspage(number) || !crate::msg::is_live(kernel_core) {
        return false;
    }
    match submit_and_wait(frame, kernel_core, physical) {
        Submitted::Done(value) => {
            counters().sent_by_syspage.fetch_add(1, Ordering::Relaxed);
            frame.rax = value as u64;
            if changes_mappings(number) {
                // The home changed the tables this AC walks (they are the home's):
                // translations this core cached of them may be stale (a page unmapped and
                // mapped again elsewhere).
                crate::core::ac::flush_translations();
            }
            true
        }
        Submitted::NotTaken => false,
        // Killed meanwhile: the home waits for this core to let go of the thread.
        Submitted::Ended => crate::core::ac::leave(),
    }
}

/// Whether `core` runs as a kernel core (a cheap look: no record is read).
fn is_running_kernel_core(core: usize) -> bool {
    shared::get().kcbs.get(core).is_some_and(|kcb| kcb.state().is_live() && kcb.role() == Role::Kernel)
}

/// The kernel core whose KCB says it serves the syspage in frame `physical` (`hint` if it
/// does, or if none does): after a KC handed its syspages to another, an AC's guest learns
/// the new one only at its next run from home.
fn server_of(physical: u64, hint: usize) -> usize {
    let region = shared::get();
    let serves = |core: usize| {
        region.kcbs.get(core).is_some_and(|kcb| {
            kcb.role() == Role::Kernel
                && kcb.served_syspages.iter().any(|record| {
                    record.read().state != served::FREE
                        && u64::from(record.frame.load(Ordering::Relaxed)) == physical / PAGE_SIZE
                })
        })
    };
    if serves(hint) {
        return hint;
    }
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    (0..count).find(|&core| serves(core)).unwrap_or(hint)
}

/// Polls of an AC's syspage entry between two looks at which KC serves the page.
const SERVER_LOOK_EVERY: u32 = 4096;

/// What came of an AC's syspage entry.
enum Submitted {
    /// The KC completed it with this value.
    Done(i64),
    /// It could not be submitted (full ring, unmappable frame) or its KC stopped: the call
    /// goes to the home instead.
    NotTaken,
    /// The home ended the thread while it waited.
    Ended,
}

/// Puts the call of `frame` in the syspage at `physical` and waits for it; the page's lock is
/// let go before the caller acts on the outcome (leaving the guest never returns).
fn submit_and_wait(frame: &InterruptFrame, kernel_core: usize, physical: u64) -> Submitted {
    let mut guard = OWN.lock();
    if guard.as_ref().is_none_or(|page| page.physical != physical) {
        if crate::mm::window::map_frame(window(OWN_SLOT), physical).is_err() {
            return Submitted::NotTaken;
        }
        *guard = Some(OwnPage { physical, submitter: Submitter::new() });
    }
    let Some(own) = guard.as_mut() else { return Submitted::NotTaken };
    let page = page_at(window(OWN_SLOT));
    let arguments = [frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8, frame.r9];
    let Ok(index) = own.submitter.add(page, frame.rax as u32, arguments) else { return Submitted::NotTaken };
    ring_doorbell(kernel_core);
    let mut kernel_core = kernel_core;
    let mut polls = 0u32;
    while !Submitter::is_done(page, index) {
        if crate::core::ac::is_ended() {
            return Submitted::Ended;
        }
        if polls.is_multiple_of(SERVER_LOOK_EVERY) && polls != 0 {
            // Its KC may have handed the page to another meanwhile, which may be halted.
            kernel_core = server_of(physical, kernel_core);
            ring_doorbell(kernel_core);
        }
        if !crate::msg::is_live(kernel_core) && !is_restarting(kernel_core) {
            log::warn!("kernel core {kernel_core} stopped with a call of this AC's thread in its syspage");
            return Submitted::NotTaken;
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(MESSAGE_LOOK_EVERY) {
            // A shootdown, a recall or an end from the home must not wait for the call (which
            // may wait for the home).
            crate::msg::drain();
        }
        cpu::relax();
    }
    Submitted::Done(own.submitter.take_value(page, index).unwrap_or(-i64::from(errno::EIO)))
}

/// Calls after which an AC's cached translations of the process's memory may be stale.
fn changes_mappings(number: u64) -> bool {
    const MAPPING_CALLS: [u32; 6] =
        [nr::__NR_mmap, nr::__NR_munmap, nr::__NR_mprotect, nr::__NR_mremap, nr::__NR_brk, nr::__NR_madvise];
    MAPPING_CALLS.iter().any(|&n| u64::from(n) == number)
}

/// On an AC whose guest ended: unmaps its syspage frame.
pub fn release_own() {
    if OWN.lock().take().is_some() {
        crate::mm::window::unmap_frame(window(OWN_SLOT));
    }
}

/// On a kernel core about to stop (at its idle point, so no scan holds the list): its
/// syspages stay in its KCB, each with its ring's head as it stands now, for the next kernel,
/// which claims them, unless their homes take them back first. While this kernel served them
/// it alone wrote their records, so plain stores do; the stop publishes them with Release.
pub fn keep_for_next_kernel() {
    let records = &shared::this_kcb().served_syspages;
    for one in SERVED.lock().iter() {
        records[one.slot].word.store(one.word(served::KEPT), Ordering::Relaxed);
    }
}

/// On a kernel core's new kernel, before it handles a message: serves on the syspages its
/// predecessor kept, from where their rings stood (Barrelfish/DC: the state is the KCB's).
fn serve_kept_syspages() {
    let kcb = shared::this_kcb();
    let mut served = SERVED.lock();
    for (slot, record) in kcb.served_syspages.iter().enumerate() {
        if !record.change_state(served::KEPT, served::SERVED) {
            continue;
        }
        // Head and home as the old kernel kept them (a claim changes only the state).
        let word = record.read();
        let physical = u64::from(record.frame.load(Ordering::Relaxed)) * PAGE_SIZE;
        if crate::mm::window::map_frame(window(slot), physical).is_err() {
            log::warn!("a kept syspage could not be mapped again: its entries stay unserved");
            record.word.store(0, Ordering::Release);
            continue;
        }
        served.push(Served {
            home: usize::from(word.home),
            pid: record.pid.load(Ordering::Relaxed),
            tid: record.tid.load(Ordering::Relaxed),
            ppid: record.parent_pid.load(Ordering::Relaxed),
            slot,
            ring: Ring::starting_at(usize::from(word.head)),
        });
    }
    kcb.syspages.store(served.len() as u32, Ordering::Release);
    if !served.is_empty() {
        log::info!("serving {} syspages kept by the previous kernel", served.len());
    }
}

/// Registers the handlers of both sides.
pub fn init() {
    if shared::this_kcb().role() == Role::Kernel {
        serve_kept_syspages();
    }
    use crate::msg::{register, Handler};
    register(Kind::SyspageCall, Handler { high_priority: false, on_line: None, on_large: Some(on_call) });
    register(Kind::SyspageResult, Handler { high_priority: false, on_line: Some(on_result), on_large: None });
    icc::register(handler::SYSPAGE_ATTACH, |arguments| Ok(attach_here(arguments)));
    icc::register(handler::SYSPAGE_DETACH, |arguments| Ok(detach_here(arguments)));
    icc::register(handler::SYSPAGE_MOVE, |arguments| Ok(move_here(arguments)));
}
