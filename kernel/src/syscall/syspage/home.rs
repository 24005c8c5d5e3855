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

pub(super) fn ring_doorbell(kernel_core: usize) {
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
            crate::syscall::count(number);
            let mut frame = InterruptFrame::default();
            match crate::syscall::handle(number, crate::syscall::Arguments(call.arguments), &mut frame) {
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
