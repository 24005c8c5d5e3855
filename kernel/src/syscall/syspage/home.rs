//! The home's side of syspages: registration, and running the calls a kernel core hands back.

use super::*;

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
    /// No kernel core serves the page: its process is moving to another core, and this is
    /// the ring's head where the last one let go of it ([`release_for_move`]).
    released: Option<usize>,
}

static REGISTRATIONS: Mutex<Vec<Registration>> = Mutex::new(Vec::new());
/// Calls KCs handed back, for their threads to run.
static FORWARDED: Mutex<VecDeque<SyspageCall>> = Mutex::new(VecDeque::new());
static FORWARDED_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Registrations adopted here with their page released ([`adopt_released`]) whose threads have
/// not run yet: a cheap test on each new thread's way to ring 3.
static RELEASED_HERE: AtomicUsize = AtomicUsize::new(0);

/// `reef_syspage_register(page, kc)`.
pub fn register(page: u64, kernel_core: u64) -> SyscallResult {
    let thread = sched::current();
    let kernel_core = usize::try_from(kernel_core).map_err(|_| errno::EINVAL)?;
    register_for(&thread, page, kernel_core, false).map(|()| 0)
}

fn register_for(thread: &Thread, page: u64, kernel_core: usize, kernel_made: bool) -> Result<(), Errno> {
    let process = thread.owner.as_ref().ok_or(errno::EPERM)?;
    if page == 0 || !page.is_multiple_of(PAGE_SIZE) {
        return Err(errno::EINVAL);
    }
    if kernel_core >= (shared::facts().core_count as usize).min(crate::msg::messaging_cores()) {
        return Err(errno::EINVAL);
    }
    if REGISTRATIONS.lock().iter().any(|r| r.tid == thread.tid) {
        return Err(errno::EBUSY);
    }
    let mut physical = Err(errno::EFAULT);
    process.with_address_space(&mut |memory| {
        physical = (|| {
            let area = memory.area_of(page).copied().ok_or(errno::EFAULT)?;
            if area.kind != crate::mm::user::AreaKind::Anonymous || !area.protection.write {
                return Err(errno::EINVAL);
            }
            if memory.translate(page).is_none() && !memory.handle_fault(page, true, false) {
                return Err(errno::EFAULT);
            }
            memory.translate(page).ok_or(errno::EFAULT)
        })();
    });
    let physical = physical?;
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
        u64::from(process.id()) << 32 | u64::from(thread.tid),
        home << 32 | u64::from(process.parent_id()),
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
        pid: process.id(),
        tid: thread.tid,
        kernel_core,
        user_page: page,
        physical,
        kernel_made,
        released: None,
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
    if registration.released.is_some() {
        // Released for a move: no kernel core serves it.
        return drop_forwarded(registration.tid);
    }
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
    drop_forwarded(registration.tid);
}

/// Forgets the calls handed back for thread `tid` that it has not run.
fn drop_forwarded(tid: u32) {
    let mut forwarded = FORWARDED.lock();
    forwarded.retain(|call| call.tid != tid);
    FORWARDED_COUNT.store(forwarded.len(), Ordering::Relaxed);
}

/// On a thread whose process moves to another core, in its own context as it checks in: its
/// kernel core lets go of its syspage and says where the ring's head stood; the calls it
/// had handed here (all in this core's queue by the time it answers: they travel ahead of the
/// answer) run now, and this core completes them in the page itself (its frame is this
/// core's, and no kernel core writes it any more). The image then carries a page with no
/// call in flight; entries not taken yet stay submitted for the kernel core the destination
/// registers the page with ([`adopt_released`]), from the same head. Whether the page is free
/// to move: false when the kernel core did not let go (it may be restarting), and then the
/// move is refused.
pub fn release_for_move(thread: &Thread) -> bool {
    let Some(registration) = REGISTRATIONS.lock().iter().find(|r| r.tid == thread.tid).copied() else {
        return true;
    };
    if registration.released.is_some() {
        return true;
    }
    let id = u64::from(registration.pid) << 32 | u64::from(registration.tid);
    let arguments = [id, u64::from(shared::this_core()), handler::SYSPAGE_DETACH_FOR_MOVE, 0, 0];
    let head = match icc::call(registration.kernel_core, handler::SYSPAGE_DETACH, arguments, ATTACH_TIMEOUT_MS) {
        Ok(answer) if answer & handler::SYSPAGE_HEAD_GIVEN != 0 => (answer & 0xFF) as usize % ENTRIES,
        outcome => {
            log::warn!(
                "kernel core {} did not let go of thread {}'s syspage for a move ({outcome:?})",
                registration.kernel_core,
                registration.tid
            );
            return false;
        }
    };
    if let Some(mine) = REGISTRATIONS.lock().iter_mut().find(|r| r.tid == thread.tid) {
        mine.released = Some(head);
    }
    crate::msg::drain();
    while let Some(call) = next_forwarded(thread.tid) {
        let value = execute_forwarded(&call);
        // The call may have unmapped the page (a `munmap` over it unregisters it, and frees
        // the frame): complete only into a page still registered, checked after the call and
        // with no switch before the write.
        let still_registered = REGISTRATIONS
            .lock()
            .iter()
            .any(|r| r.tid == thread.tid && r.physical == registration.physical && r.released.is_some());
        if !still_registered {
            counters().syspage_results_dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        // The frame is this core's, still pinned by the registration just found (nothing on
        // this core runs between that look and this write); the allocator lends it.
        let request = Request {
            index: usize::from(call.index) % ENTRIES,
            sequence: call.sequence,
            number: call.number,
            arguments: call.arguments,
        };
        let completed = crate::mm::frames::with_frame_shared(registration.physical, |page: &Page| {
            syspage::complete(page, &request, value)
        });
        if completed != Ok(true) {
            counters().syspage_results_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    true
}

/// Whether thread `tid` has a syspage that its kernel core serves (registered here, and not
/// released for a move).
pub fn is_served(tid: u32) -> bool {
    REGISTRATIONS.lock().iter().any(|r| r.tid == tid && r.released.is_none())
}

/// The head of thread `tid`'s syspage as [`release_for_move`] left it, if it did.
pub fn released_head(tid: u32) -> Option<usize> {
    REGISTRATIONS.lock().iter().find(|r| r.tid == tid).and_then(|r| r.released)
}

/// On a thread whose process did not move after all: its syspage is served again, by the
/// kernel core that let go of it (or another, should that one be a KC no more), from where
/// its ring stood.
pub fn resume_after_move(thread: &Thread) {
    let Some(registration) = REGISTRATIONS.lock().iter().find(|r| r.tid == thread.tid).copied() else { return };
    let Some(head) = registration.released else { return };
    let parent = thread.owner.as_ref().map_or(0, |process| process.parent_id());
    match attach_from(&registration, parent, head) {
        Ok(kernel_core) => {
            if let Some(mine) = REGISTRATIONS.lock().iter_mut().find(|r| r.tid == thread.tid) {
                mine.released = None;
                mine.kernel_core = kernel_core;
            }
        }
        Err(error) => log::warn!("thread {}'s syspage is served no more (errno {error})", thread.tid),
    }
    recount_released();
}

/// Counts again the registrations here that wait to be served ([`RELEASED_HERE`]).
fn recount_released() {
    let waiting = REGISTRATIONS.lock().iter().filter(|r| r.released.is_some()).count();
    RELEASED_HERE.store(waiting, Ordering::Relaxed);
}

/// Has `registration`'s page (of a process whose parent is `parent`) served from `head` by its kernel core, or by the first running
/// kernel core if that one is no longer one; which core took it.
fn attach_from(registration: &Registration, parent: u32, head: usize) -> Result<usize, Errno> {
    let kernel_core = if is_running_kernel_core(registration.kernel_core) {
        registration.kernel_core
    } else {
        first_running_kernel_core().ok_or(errno::ENXIO)?
    };
    let arguments = [
        registration.physical,
        u64::from(registration.pid) << 32 | u64::from(registration.tid),
        u64::from(shared::this_core()) << 32 | u64::from(parent),
        handler::SYSPAGE_HEAD_GIVEN | head as u64,
        0,
    ];
    match icc::call(kernel_core, handler::SYSPAGE_ATTACH, arguments, ATTACH_TIMEOUT_MS) {
        Ok(0) => Ok(kernel_core),
        Ok(refusal) => Err(refusal as u32),
        Err(_) => Err(errno::EAGAIN),
    }
}

/// On the destination of a move (or the kernel after a start that kept the process), for a
/// thread whose syspage its old kernel released: records the page (in this core's memory of
/// the process) as waiting for kernel core `kernel_core`, to be served from `head` once the
/// thread first runs here ([`resume_after_move`], from `sched::on_thread_start`: a kernel
/// still building what it adopts, or a message handler, should not wait for another core).
pub fn adopt_released(
    thread: &Thread,
    kernel_core: usize,
    user_page: u64,
    kernel_made: bool,
    head: usize,
) -> Result<(), Errno> {
    adopt(thread, kernel_core, user_page, kernel_made, Some(head))?;
    recount_released();
    Ok(())
}

/// Records `thread`'s syspage at `user_page` (its frame where this core's memory of the
/// process has it) as this home's, served by `kernel_core` (`released: None`) or waiting to be
/// served from a head.
fn adopt(
    thread: &Thread,
    kernel_core: usize,
    user_page: u64,
    kernel_made: bool,
    released: Option<usize>,
) -> Result<(), Errno> {
    let process = thread.owner.as_ref().ok_or(errno::EPERM)?;
    let mut physical = None;
    process.with_address_space(&mut |memory| physical = memory.translate(user_page));
    let physical = physical.ok_or(errno::EFAULT)?;
    let registration =
        Registration { pid: process.id(), tid: thread.tid, kernel_core, user_page, physical, kernel_made, released };
    if released.is_none() && !is_served_as_kept(&registration) {
        return Err(errno::ENOENT);
    }
    REGISTRATIONS.lock().push(registration);
    Ok(())
}

/// On a new thread's first way to ring 3: its syspage, if one waits to be served again
/// ([`adopt_released`]), is registered with its kernel core before the thread runs (or goes
/// to its AC).
pub fn serve_adopted() {
    if RELEASED_HERE.load(Ordering::Relaxed) != 0 {
        resume_after_move(&sched::current());
    }
}

/// `reef_syspage_kick()`: rings the KC's doorbell (an IPI only if it halted).
pub fn kick() -> SyscallResult {
    let tid = sched::current().tid;
    let kernel_core = REGISTRATIONS.lock().iter().find(|r| r.tid == tid).map(|r| r.kernel_core).ok_or(errno::ENOENT)?;
    ring_doorbell(kernel_core);
    Ok(0)
}

pub(super) fn ring_doorbell(kernel_core: usize) {
    if crate::msg::is_live(kernel_core) {
        crate::msg::notify(kernel_core, crate::msg::NotifyMode::Hybrid);
    }
}

/// Thread `tid` ends, execs or moved away: its syspage is served no more from here.
pub fn thread_leaves(tid: u32) {
    for registration in take_registrations(|r| r.tid == tid) {
        detach(&registration);
    }
    recount_released();
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
    let kernel_core = first_running_kernel_core().ok_or(errno::ENXIO)?;
    let process = thread.owner.as_ref().ok_or(errno::EPERM)?;
    let mut page = Err(errno::ENOMEM);
    process.with_address_space(&mut |memory| {
        page = (|| {
            let start = memory.find_free(0, PAGE_SIZE).map_err(|_| errno::ENOMEM)?;
            memory
                .map_now(
                    start,
                    start + PAGE_SIZE,
                    crate::mm::user::Protection::READ_WRITE,
                    crate::mm::user::AreaKind::Anonymous,
                )
                .map_err(|_| errno::ENOMEM)?;
            Ok(start)
        })();
    });
    let page = page?;
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
    adopt(thread, kernel_core, user_page, kernel_made, None)
}

/// Whether `registration`'s kernel core's KCB names its page as this home's, in its frame.
fn is_served_as_kept(registration: &Registration) -> bool {
    shared::get().kcbs.get(registration.kernel_core).is_some_and(|kcb| {
        kcb.served_syspages.iter().any(|record| {
            let word = record.read();
            word.state != served::FREE
                && usize::from(word.home) == shared::this_core() as usize
                && record.tid.load(Ordering::Relaxed) == registration.tid
                && u64::from(record.frame.load(Ordering::Relaxed)) == registration.physical / PAGE_SIZE
        })
    })
}

/// Calls that change the calling thread's registers or where it runs cannot travel by
/// syspage: the home has no trap frame of the thread to change.
pub(super) fn travels_by_syspage(number: u64) -> bool {
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

pub(super) fn on_call(bytes: &[u8]) -> crate::msg::HandlerResult {
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
    if let Some(hooks) = HOOKS.get() {
        (hooks.forwarded)(call.pid);
    }
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
    while let Some(call) = next_forwarded(tid) {
        let value = execute_forwarded(&call);
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

/// The oldest call handed back for thread `tid`, taken from the queue.
fn next_forwarded(tid: u32) -> Option<SyspageCall> {
    let mut forwarded = FORWARDED.lock();
    let index = forwarded.iter().position(|c| c.tid == tid)?;
    let call = forwarded.remove(index);
    FORWARDED_COUNT.store(forwarded.len(), Ordering::Relaxed);
    call
}

/// Runs a handed-back call in the running thread's context; its value.
fn execute_forwarded(call: &SyspageCall) -> i64 {
    let number = u64::from(call.number);
    if !travels_by_syspage(number) {
        return -i64::from(errno::EINVAL);
    }
    let hooks = HOOKS.get().expect("boot registers the syspage hooks before any process runs");
    (hooks.execute)(number, call.arguments)
}

/// Whether a boot driver is restarting `kernel_core`: its syspages outlive its kernel.
pub(super) fn is_restarting(kernel_core: usize) -> bool {
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

/// On a home, asked by a kernel core leaving its role (`SYSPAGE_MOVE`): moves the thread's
/// registration to the kernel core named, which maps the page and serves on from the head
/// given. The registration decides: a thread that let go of its page meanwhile gets `ENOENT`.
pub(super) fn move_here(arguments: &[u64; ICC_ARGUMENTS]) -> u64 {
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
