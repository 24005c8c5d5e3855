//! The kernel core's side of syspages: the scan, and what outlives its kernel or its role.

use super::*;
use crate::mm::window::LentPage;

/// A syspage this KC serves.
struct Served {
    home: usize,
    pid: u32,
    tid: u32,
    ppid: u32,
    slot: usize,
    /// The page, mapped at the window slot `slot` while this is served here.
    page: LentPage,
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

pub(super) fn attach_here(arguments: &[u64; ICC_ARGUMENTS]) -> u64 {
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
    if physical / PAGE_SIZE > u64::from(u32::MAX) {
        return u64::from(errno::ENOMEM);
    }
    let Ok(mapped) = LentPage::map(slot, physical) else { return u64::from(errno::ENOMEM) };
    // A page another KC served comes with its ring's head; a page registered again may hold
    // entries of before: serve from its first submitted one.
    let page = mapped.get::<Page>();
    let head = if arguments[3] & handler::SYSPAGE_HEAD_GIVEN != 0 {
        (arguments[3] & 0xFF) as usize % ENTRIES
    } else {
        (0..ENTRIES).find(|&i| page.entry(i).header().status == syspage::status::SUBMITTED).unwrap_or(0)
    };
    let one = Served { home, pid, tid, ppid, slot, page: mapped, ring: Ring::starting_at(head) };
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

pub(super) fn detach_here(arguments: &[u64; ICC_ARGUMENTS]) -> u64 {
    let tid = arguments[0] as u32;
    let home = arguments[1] as usize;
    let for_move = arguments[2] & handler::SYSPAGE_DETACH_FOR_MOVE != 0;
    if for_move {
        // Results the home sent before it asked are in this core's queue (a request travels
        // ahead of them, in the high-priority queue): they complete their entries first, so
        // the page goes with nothing in flight.
        crate::msg::drain();
    }
    match forget_here(tid, home) {
        Some(head) if for_move => handler::SYSPAGE_HEAD_GIVEN | head as u64,
        Some(_) => 0,
        None => u64::from(errno::ENOENT),
    }
}

/// Stops serving thread `tid`'s syspage of `home`: unmaps it and frees its KCB record; the
/// ring's head, if it was served here.
fn forget_here(tid: u32, home: usize) -> Option<usize> {
    let mut served = SERVED.lock();
    let index = served.iter().position(|s| s.tid == tid && s.home == home)?;
    let gone = served.swap_remove(index);
    drop(gone.page);
    shared::this_kcb().served_syspages[gone.slot].word.store(0, Ordering::Release);
    shared::this_kcb().syspages.store(served.len() as u32, Ordering::Release);
    Some(gone.ring.head())
}

/// On a kernel core leaving its role, or stopping for good: hands every syspage it serves to
/// another running kernel core, through each page's home (the home owns the registration, so
/// a thread letting go meanwhile never leaves a kernel core serving a frame it gave back).
/// The scan takes no entry meanwhile, so the other core serves on from the same head. Calls
/// this core handed home and not yet answered are not waited for: the home sends each result
/// to whichever kernel core its registration names when the call is done, the new one once
/// the page moved, and results it sent before that are in this core's queue by the time the
/// home answers the move (and are handled before the page is let go here). Nothing happens on
/// a core that serves none; with no other kernel core running, they all stay (and the caller's
/// check of what keeps the core refuses the change).
pub fn hand_over() {
    if SERVED.lock().is_empty() {
        return;
    }
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
    let Some(to) = to else { return };
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
    if SERVED.lock().is_empty() {
        log::info!("kernel core {me} handed its syspages to kernel core {to}");
    }
}

/// The answer this KC holds for call `number` of thread `tid` of process `pid` (whose parent
/// is `ppid`), if it holds one: the process's identity, fixed for its life (Reef does not
/// re-parent), and calls with nothing to do.
fn answer_here(number: u32, pid: u32, tid: u32, ppid: u32) -> Option<i64> {
    match number {
        nr::__NR_getpid => Some(i64::from(pid)),
        nr::__NR_getppid => Some(i64::from(ppid)),
        nr::__NR_gettid => Some(i64::from(tid)),
        nr::__NR_getuid | nr::__NR_geteuid | nr::__NR_getgid | nr::__NR_getegid => Some(0),
        nr::__NR_sched_yield => Some(0),
        _ => None,
    }
}

/// One pass over every ring's head; returns whether any entry was taken.
pub fn scan() -> bool {
    if HANDING_OVER.load(Ordering::Relaxed) {
        return false;
    }
    let mut handed: Vec<SyspageCall> = Vec::new();
    let mut worked = false;
    // Counted here and added once a pass: an atomic add per entry would cost more than the
    // entry's own work under TCG.
    let mut served_here = 0u64;
    {
        let mut served = SERVED.lock();
        for one in served.iter_mut() {
            let page = one.page.get::<Page>();
            // Memsc 3.3: one load of the head's header per ring and pass.
            if !one.ring.is_pending(page) {
                continue;
            }
            worked = true;
            // Memsc 3.4: every pending entry from the head on. A call answered here is
            // completed in place; any other is copied as it is taken, and goes home.
            let (pid, tid, ppid) = (one.pid, one.tid, one.ppid);
            loop {
                match one.ring.answer_or_take(page, |number| answer_here(number, pid, tid, ppid)) {
                    Head::Empty => break,
                    Head::Answered => served_here += 1,
                    Head::Taken(request) => handed.push(SyspageCall {
                        kernel_core: shared::this_core() as u16,
                        pid,
                        tid,
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

pub(super) fn on_result(message: &channel::Message) -> crate::msg::HandlerResult {
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
    if !syspage::complete(one.page.get::<Page>(), &request, result.value) {
        counters().syspage_results_dropped.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Whether an entry waits on a ring this kernel core serves.
pub fn any_pending() -> bool {
    SERVED.lock().iter().any(|one| one.ring.is_pending(one.page.get::<Page>()))
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
pub(super) fn serve_kept_syspages() {
    let kcb = shared::this_kcb();
    let mut served = SERVED.lock();
    for (slot, record) in kcb.served_syspages.iter().enumerate() {
        if !record.change_state(served::KEPT, served::SERVED) {
            continue;
        }
        // Head and home as the old kernel kept them (a claim changes only the state).
        let word = record.read();
        let physical = u64::from(record.frame.load(Ordering::Relaxed)) * PAGE_SIZE;
        let Ok(page) = LentPage::map(slot, physical) else {
            log::warn!("a kept syspage could not be mapped again: its entries stay unserved");
            record.word.store(0, Ordering::Release);
            continue;
        };
        served.push(Served {
            home: usize::from(word.home),
            pid: record.pid.load(Ordering::Relaxed),
            tid: record.tid.load(Ordering::Relaxed),
            ppid: record.parent_pid.load(Ordering::Relaxed),
            slot,
            page,
            ring: Ring::starting_at(usize::from(word.head)),
        });
    }
    kcb.syspages.store(served.len() as u32, Ordering::Release);
    if !served.is_empty() {
        log::info!("serving {} syspages kept by the previous kernel", served.len());
    }
}
