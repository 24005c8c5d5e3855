//! Parking (Barrelfish/DC §4.4): an OSnode's kernel leaves its core and is time-shared by the
//! kernel of another core, its host, which runs the `multi` image; unparking gives it a core
//! of its own again. Its processes, channels and KCB go with it untouched: nothing is copied,
//! only the processor changes.
//!
//! - **Park** (asked by a boot driver on any core, [`park`]). The asker checks the rules that
//!   involve other cores and asks the OSnode by ICC; the OSnode checks its own state and, at
//!   its next idle point ([`park_if_asked`]), stops its timer, points the OSnode table at the
//!   host's APIC (so messages and IPIs follow it), saves its context in its KCB and halts its
//!   processor, publishing `Runnable` as the very last write.
//! - **Time-sharing** (the host, [`run_guests`]). At its idle points, at the end of a slice of
//!   its own threads and while it waits for another core, the host switches to each guest that
//!   is due: one that is runnable, or an idle one after an interrupt came (an IPI sent to the
//!   guest reaches the host's APIC). The guest runs its own kernel, its own threads and its
//!   own interrupt handlers on the host's processor, and gives the processor back
//!   ([`yield_to_host`]) when it would sleep, when its slice ends (the host's timer tick
//!   reached it), or while it waits for another core. A switch happens only where no lock is
//!   held.
//! - **Unpark** ([`unpark`]). The guest, asked by ICC, makes its page tables map the
//!   trampoline again and leaves its host one last time (`Leaving`); the host marks it `Away`.
//!   The asker claims it (`Away → Resuming`) and wakes the destination core with INIT-SIPI
//!   into the world-switch code, which resumes the saved context; the guest loads its
//!   processor state, enables the local APIC and its timer, and points the OSnode table at
//!   its new processor.
#![deny(unsafe_code)]

use super::kcb::{CoreState, Role};
use super::lifecycle::CoreError;
use super::role::RoleError;
use super::shared;
use crate::arch::{apic, cpu};
use crate::msg::icc;
use abi::call::CoreTimes;
use abi::message::{handler, ICC_ARGUMENTS};
use core::sync::atomic::{AtomicU64, Ordering};
use kcb::block::{GuestState, NOBODY};
use platform::partition::MAX_CORES;

/// How long an asker waits for each step of a park or an unpark.
const PARK_TIMEOUT_MS: u64 = 1000;

/// Whether this image can host parked OSnodes (the `multi` image).
pub const CAN_HOST: bool = cfg!(feature = "multi");

// Host only (private .bss): interrupts taken on this processor by this instance, and the
// count each guest last ran at. An idle guest is due once an interrupt came after it went
// idle: an IPI meant for it reaches the host's APIC.
static INTERRUPTS_TAKEN: AtomicU64 = AtomicU64::new(0);
static GUEST_RAN_AT: [AtomicU64; MAX_CORES] = [const { AtomicU64::new(u64::MAX) }; MAX_CORES];

/// Counts an interrupt this instance took (every vector but exceptions).
pub fn note_interrupt() {
    INTERRUPTS_TAKEN.store(INTERRUPTS_TAKEN.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// The OSnodes parked on this core.
pub fn guests() -> impl Iterator<Item = usize> {
    guests_of(shared::this_core() as usize)
}

/// The OSnodes parked on `host`'s core.
pub fn guests_of(host: usize) -> impl Iterator<Item = usize> {
    let region = shared::get();
    region.listed_kcbs().iter().enumerate().filter(move |(_, kcb)| kcb.parking.host() == Some(host)).map(|(id, _)| id)
}

/// Whether this instance runs as a guest on another core's kernel now.
pub fn is_guest() -> bool {
    shared::region().is_some_and(|_| shared::this_kcb().parking.host().is_some())
}

/// Whether this core holds a lock of the shared region: no switch may happen then, since the
/// other kernel could wait for it forever.
fn holds_shared_lock() -> bool {
    shared::holds_shared_lock()
}

// ----- The asking side -----

/// Parks `core` on `host`'s kernel; returns what it took (`stop_ns`: until the OSnode left
/// its core, `target_ns`: until the host first ran it).
pub fn park(core: usize, host: usize) -> Result<CoreTimes, CoreError> {
    let region = shared::get();
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    for id in [core, host] {
        if id >= count {
            return Err(CoreError::NoSuchCore(id));
        }
    }
    if core == 0 {
        return Err(CoreError::CoreZero { last_timesharing: false });
    }
    if core == host {
        return Err(CoreError::ParkOnItself(core));
    }
    if core == shared::this_core() as usize {
        return Err(CoreError::AskedByItself(core));
    }
    let (kcb, host_kcb) = (region.kcb(core), region.kcb(host));
    for (id, kcb) in [(core, kcb), (host, host_kcb)] {
        match kcb.state() {
            CoreState::Running => {}
            state => return Err(CoreError::NotRunning(id, state)),
        }
        if let Some(its_host) = kcb.parking.host() {
            return Err(CoreError::Busy(RoleError::Parked(id, its_host)));
        }
        // A KC parks too (it serves its syspages in its slices of the host); an AC's thread
        // runs with no interrupt, which time-sharing cannot give it; only a TC hosts.
        let allowed = if id == host { kcb.role() == Role::Timesharing } else { kcb.role() != Role::Application };
        if !allowed {
            return Err(CoreError::Busy(RoleError::NotTimesharing(id)));
        }
    }
    if host_kcb.parking.can_host.load(Ordering::Acquire) == 0 {
        return Err(CoreError::CannotHost(host));
    }
    let begun = cpu::read_tsc();
    kcb.parking.park_asked_tsc.store(begun, Ordering::Relaxed);
    let hosted_before = kcb.parking.resumes.load(Ordering::Acquire);
    let answer = icc::call_async(core, handler::PARK_CORE, [host as u64, 0, 0, 0, 0]).and_then(|call| {
        crate::msg::notify(core, crate::msg::NotifyMode::Ipi);
        icc::wait(call, PARK_TIMEOUT_MS)
    });
    match answer {
        Ok(0) => {}
        Ok(refusal) => return Err(CoreError::Busy(super::role::decode_refusal(core, refusal))),
        Err(_) => return Err(CoreError::NoAnswer(core)),
    }
    // The OSnode leaves its core at its next idle point.
    let left = wait_for(|| kcb.parking.host() == Some(host) && kcb.parking.guest() != GuestState::Parking);
    if !left {
        // Withdrawn, unless the OSnode took the request meanwhile (then it is on its way).
        let withdrawn =
            kcb.parking.park_to.compare_exchange(host as u32, NOBODY, Ordering::AcqRel, Ordering::Acquire).is_ok();
        if withdrawn || !wait_for(|| kcb.parking.guest() != GuestState::Parking) {
            return Err(CoreError::NoAnswer(core));
        }
    }
    crate::msg::notify(host, crate::msg::NotifyMode::Ipi);
    let hosted = wait_for(|| kcb.parking.resumes.load(Ordering::Acquire) != hosted_before);
    let ended = cpu::read_tsc();
    let parked = kcb.parking.parked_tsc.load(Ordering::Relaxed);
    let ns = crate::time::cycles_to_ns;
    log::debug!("core {core} parked on core {host}");
    Ok(CoreTimes {
        total_ns: ns(ended - begun),
        stop_ns: ns(parked.saturating_sub(begun)),
        driver_ns: 0,
        target_ns: if hosted { ns(kcb.parking.hosted_tsc.load(Ordering::Relaxed).saturating_sub(parked)) } else { 0 },
        image_cached: 1,
    })
}

/// Gives parked `core` a processor of its own again: `destination` (`None`: its own core's);
/// returns what it took (`stop_ns`: until it left its host, `driver_ns`: the INIT-SIPI,
/// `target_ns`: until it ran on the new processor).
pub fn unpark(core: usize, destination: Option<usize>) -> Result<CoreTimes, CoreError> {
    let region = shared::get();
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    let destination = destination.unwrap_or(core);
    for id in [core, destination] {
        if id >= count {
            return Err(CoreError::NoSuchCore(id));
        }
    }
    let kcb = region.kcb(core);
    if kcb.parking.host().is_none() {
        return Err(CoreError::NotParked(core));
    }
    if core == shared::this_core() as usize {
        return Err(CoreError::AskedByItself(core));
    }
    if destination != core && !matches!(region.kcb(destination).state(), CoreState::Stopped | CoreState::Offline) {
        return Err(CoreError::ProcessorBusy(destination, destination));
    }
    let processor = region.kcb(destination).apic_id.load(Ordering::Relaxed);
    if let Some(user) = super::boot_driver::osnode_on(processor, core) {
        return Err(CoreError::ProcessorBusy(destination, user));
    }
    let begun = cpu::read_tsc();
    kcb.parking.unpark_asked_tsc.store(begun, Ordering::Relaxed);
    let answer = icc::call_async(core, handler::UNPARK_CORE, [destination as u64, 0, 0, 0, 0]).and_then(|call| {
        crate::msg::notify(core, crate::msg::NotifyMode::Ipi);
        icc::wait(call, PARK_TIMEOUT_MS)
    });
    match answer {
        Ok(0) => {}
        Ok(_) => return Err(CoreError::NotParked(core)),
        Err(_) => return Err(CoreError::NoAnswer(core)),
    }
    if !wait_for(|| kcb.parking.guest() == GuestState::Away) {
        let withdrawn = kcb
            .parking
            .unpark_to
            .compare_exchange(destination as u32, NOBODY, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if withdrawn || !wait_for(|| kcb.parking.guest() == GuestState::Away) {
            return Err(CoreError::NoAnswer(core));
        }
    }
    let left = cpu::read_tsc();
    if !kcb.parking.advance(GuestState::Away, GuestState::Resuming) {
        return Err(CoreError::NotParked(core));
    }
    let woken = super::boot_driver::resume_on(destination, kcb);
    let ended = cpu::read_tsc();
    let ns = crate::time::cycles_to_ns;
    match woken {
        Ok(startup) => {
            log::debug!("core {core} unparked onto core {destination}'s processor");
            Ok(CoreTimes {
                total_ns: ns(ended - begun),
                stop_ns: ns(left - begun),
                driver_ns: ns(startup.saturating_sub(left)),
                target_ns: ns(kcb.parking.unparked_tsc.load(Ordering::Relaxed).saturating_sub(startup)),
                image_cached: 1,
            })
        }
        Err(error) => {
            // The processor did not take it: the host has it back, as it was.
            kcb.parking.resume_on.store(NOBODY, Ordering::Release);
            kcb.parking.advance(GuestState::Resuming, GuestState::Runnable);
            Err(CoreError::Boot(destination, error))
        }
    }
}

/// Waits up to [`PARK_TIMEOUT_MS`] for `done`, letting guests or the host run meanwhile.
fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let deadline = crate::time::deadline_after_ms(PARK_TIMEOUT_MS);
    while !done() {
        if cpu::read_tsc() > deadline {
            return false;
        }
        crate::msg::drain();
        while_waiting();
        cpu::relax();
    }
    true
}

// ----- The parked OSnode -----

/// At an idle point: leaves this core for the host a boot driver asked for (returns once a
/// processor runs this instance again: the host's, or after an unpark one of its own).
/// Whether a boot driver asked this instance to park or to unpark (a kernel core's scan goes
/// back to its idle point, where that happens).
pub fn is_asked() -> bool {
    let parking = &shared::this_kcb().parking;
    parking.park_to.load(Ordering::Relaxed) != NOBODY || parking.unpark_to.load(Ordering::Relaxed) != NOBODY
}

pub fn park_if_asked() {
    let kcb = shared::this_kcb();
    let host = kcb.parking.park_to.load(Ordering::Acquire);
    if host == NOBODY || crate::msg::is_collecting_large() {
        return;
    }
    let were_enabled = cpu::interrupts_enabled();
    cpu::disable_interrupts();
    if kcb.parking.park_to.compare_exchange(host, NOBODY, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // Withdrawn by the asker meanwhile.
        if were_enabled {
            cpu::enable_interrupts();
        }
        return;
    }
    let region = shared::get();
    let me = shared::this_core() as usize;
    apic::local().stop_timer();
    kcb.parking.guest.store(GuestState::Parking as u32, Ordering::Relaxed);
    kcb.parking.host.store(host, Ordering::Release);
    kcb.parking.parks.fetch_add(1, Ordering::Relaxed);
    // Messages follow the OSnode: from now on IPIs for it go to the host's processor.
    region.header.osnodes[me].store(shared::apic_of(host as usize), Ordering::Release);
    kcb.parking.hosted_tsc.store(0, Ordering::Relaxed);
    kcb.parking.parked_tsc.store(cpu::read_tsc(), Ordering::Relaxed);
    // Wake the host now: it waits the few microseconds until the context is saved (`Parking`
    // → `Runnable`) rather than for the asker's IPI.
    apic::local().send_ipi(shared::apic_of(host as usize), crate::arch::idt::VECTOR_WAKE);
    // No lock is held at an idle point, and interrupts are masked above.
    if let Err(refused) = super::kcb::park_this_instance(woken_on_own_core) {
        panic!("cannot park at this idle point: {refused:?}");
    }
    arrived();
    if were_enabled {
        cpu::enable_interrupts();
    }
}

fn woken_on_own_core() -> bool {
    shared::this_kcb().parking.resume_on.load(Ordering::Acquire) != NOBODY
}

/// After any switch into this instance: on the host (count it, look at what came meanwhile),
/// or on a processor of its own after an unpark (enable it and tell every core).
fn arrived() {
    let kcb = shared::this_kcb();
    let destination = kcb.parking.resume_on.load(Ordering::Acquire);
    let now = cpu::read_tsc();
    if destination == NOBODY {
        if kcb.parking.hosted_tsc.load(Ordering::Relaxed) == 0 {
            kcb.parking.hosted_tsc.store(now, Ordering::Relaxed);
        }
        // Release: the asker reads the first run's time once it sees the count move.
        kcb.parking.resumes.fetch_add(1, Ordering::Release);
        crate::sched::on_resume();
        return;
    }
    let region = shared::get();
    crate::mm::address_space::remove_identity_map();
    if kcb.role() == Role::Timesharing {
        super::role::start_timer();
    }
    let processor = region.kcb(destination as usize).apic_id.load(Ordering::Relaxed);
    region.header.osnodes[shared::this_core() as usize].store(processor, Ordering::Release);
    kcb.parking.host.store(NOBODY, Ordering::Release);
    kcb.parking.resume_on.store(NOBODY, Ordering::Release);
    kcb.parking.unparked_tsc.store(now, Ordering::Relaxed);
    kcb.parking.guest.store(GuestState::Home as u32, Ordering::Release);
    crate::sched::on_resume();
}

/// As a guest: gives the processor back to the host, `state` saying when it wants it again
/// (`Runnable`: at once; `Idle`: after an interrupt). Returns when a processor runs this
/// instance again. Nothing happens on an instance that is no guest, or holds a shared lock.
pub fn yield_to_host(state: GuestState) {
    if shared::this_kcb().parking.host().is_none() || holds_shared_lock() {
        return;
    }
    cpu::without_interrupts(|| {
        if super::kcb::switch_to_host(state, woken_on_own_core).is_ok() {
            arrived();
        }
    });
}

/// Where the instance would halt: a guest gives the processor to its host instead, a host
/// runs a due guest first. Interrupts are masked on entry (a sleep's last look was taken);
/// on return they are enabled (`mwait`: wait with MONITOR armed).
pub fn sleep(mwait: bool) {
    if is_guest() {
        yield_to_host(GuestState::Idle);
        cpu::enable_interrupts();
        return;
    }
    if CAN_HOST && run_guests() {
        cpu::enable_interrupts();
        return;
    }
    if mwait {
        // The caller armed MONITOR just before.
        cpu::enable_interrupts_and_mwait();
    } else {
        cpu::wait_for_interrupt();
    }
}

/// At the end of a slice (the timer tick reached this instance) or in a wait for another
/// core: a guest lets its host run, a host its guests.
pub fn while_waiting() {
    if is_guest() {
        yield_to_host(GuestState::Runnable);
    } else if CAN_HOST {
        run_guests();
    }
}

/// At this instance's end (a fault or a panic) while it is a guest: gives the processor back
/// to the host for good instead of halting it.
pub fn leave_for_good() {
    if is_guest() {
        crate::interrupt::release_shared_locks();
        yield_to_host(GuestState::Dead);
    }
}

// ----- The host -----

/// Runs each guest that is due until it gives the processor back; whether one ran.
pub fn run_guests() -> bool {
    if !CAN_HOST || holds_shared_lock() {
        return false;
    }
    let region = shared::get();
    let mut ran = false;
    for id in guests() {
        let guest = region.kcb(id);
        let taken = INTERRUPTS_TAKEN.load(Ordering::Relaxed);
        if guest.parking.guest() == GuestState::Parking {
            // Saving its context on its own core, microseconds from `Runnable`.
            let deadline = crate::time::deadline_after_ms(1);
            while guest.parking.guest() == GuestState::Parking && cpu::read_tsc() < deadline {
                cpu::relax();
            }
        }
        let due = match guest.parking.guest() {
            GuestState::Runnable => true,
            GuestState::Idle => GUEST_RAN_AT[id].load(Ordering::Relaxed) != taken,
            _ => false,
        };
        if !due {
            continue;
        }
        GUEST_RAN_AT[id].store(taken, Ordering::Relaxed);
        if cpu::without_interrupts(|| super::kcb::switch_to_guest(guest)).is_err() {
            continue;
        }
        ran = true;
        match guest.parking.guest() {
            GuestState::Leaving => {
                guest.parking.advance(GuestState::Leaving, GuestState::Away);
            }
            GuestState::Dead => {
                log::error!("core {id}, parked here, faulted; its kernel is gone");
                guest.parking.host.store(NOBODY, Ordering::Release);
            }
            _ => {}
        }
    }
    ran
}

/// Registers the park and unpark handlers of this instance, and says whether it can host.
pub fn init() {
    let kcb = shared::this_kcb();
    kcb.parking.can_host.store(u32::from(CAN_HOST), Ordering::Release);
    // A fresh kernel on this KCB is on its own core: what a parked predecessor left is gone.
    kcb.parking.clear();
    let processor = kcb.apic_id.load(Ordering::Relaxed);
    shared::get().header.osnodes[shared::this_core() as usize].store(processor, Ordering::Release);
    icc::register(handler::PARK_CORE, |arguments: &[u64; ICC_ARGUMENTS]| {
        if let Some(refusal) = super::role::what_keeps_this_core_parked() {
            return Ok(refusal);
        }
        shared::this_kcb().parking.park_to.store(arguments[0] as u32, Ordering::Release);
        Ok(0)
    });
    icc::register(handler::UNPARK_CORE, |arguments: &[u64; ICC_ARGUMENTS]| {
        let kcb = shared::this_kcb();
        if kcb.parking.host().is_none() {
            return Ok(1);
        }
        kcb.parking.unpark_to.store(arguments[0] as u32, Ordering::Release);
        Ok(0)
    });
}

/// As a guest at an idle point: leaves the host for the core a boot driver asked for, saving
/// this instance for it to resume (returns on that core).
pub fn unpark_if_asked() {
    let kcb = shared::this_kcb();
    let destination = kcb.parking.unpark_to.load(Ordering::Acquire);
    if destination == NOBODY || kcb.parking.host().is_none() || crate::msg::is_collecting_large() {
        return;
    }
    if kcb.parking.unpark_to.compare_exchange(destination, NOBODY, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    // The woken processor enters through the trampoline, which runs at its identity address
    // on this instance's page tables.
    crate::mm::address_space::restore_identity_map();
    kcb.parking.resume_on.store(destination, Ordering::Release);
    yield_to_host(GuestState::Leaving);
}
