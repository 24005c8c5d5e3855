//! Core roles that change while the system runs (NIX): timesharing, application, kernel.
//!
//! A change is asked of the core's own kernel by an ICC; the asking core checks the rules
//! that involve other cores (at least one timesharing core stays) under the shared role lock,
//! the target checks its own state (no processes, no thread, no syspage) and applies the
//! change: an AC and a KC stop their LAPIC timer, a TC starts it again. No other core pauses.
//! A TC that leaves timesharing first hands its processes to the other TCs (`proc::migrate`).
#![deny(unsafe_code)]

use super::kcb::{CoreState, Role};
use super::shared;
use crate::arch::{apic, idt};
use crate::msg::icc;
use abi::message::{handler, IccStatus, ICC_ARGUMENTS};
use core::sync::atomic::Ordering;
use linux_raw_sys::errno;

/// How long the asking core waits for the target's answer.
const ROLE_CHANGE_TIMEOUT_MS: u64 = 1000;
/// How long the asking core waits for a TC's processes to move to other TCs before its role
/// changes.
const HAND_OVER_TIMEOUT_MS: u64 = 3000;

/// Why a role change was refused; each maps to the errno of `abi::call::ROLE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleError {
    /// No such core.
    NoSuchCore(usize),
    /// The core is not running.
    NotRunning(usize, CoreState),
    /// The change would leave no timesharing core.
    LastTimesharingCore(usize),
    /// Core 0 owns the devices and the file service, which an application core (one user
    /// thread, no interrupts) could not serve.
    CoreZero,
    /// The core has processes homed on it (they did not all move to other TCs in time, or
    /// the core asked for itself).
    HasProcesses(usize, u32),
    /// A TC asked itself to leave timesharing while it is home to processes: the caller is one
    /// of them, and cannot move while it waits for the answer.
    AskedByItsOwnProcess(usize),
    /// A process of the core cannot move to another TC: its pid, and why.
    CannotMove(usize, u32, crate::proc::migrate::CannotMove),
    /// A process of the core cannot be kept through its restart: its pid, and why.
    CannotStay(usize, u32, crate::proc::migrate::CannotMove),
    /// The application core runs a thread.
    RunsThread(usize),
    /// The kernel core serves syspages.
    ServesSyspages(usize, u32),
    /// The core did not answer.
    NoAnswer(usize),
    /// The core runs the `rt` image, which has no scheduler and no timer: it stays the AC (or
    /// the KC) it came up as.
    RoleFixedByImage(usize),
    /// The core is parked on another core's kernel (`core park`).
    Parked(usize, usize),
    /// The core's kernel time-shares a parked core.
    HostsParked(usize, usize),
    /// Only a timesharing core parks or hosts a parked core.
    NotTimesharing(usize),
}

impl RoleError {
    /// The Linux errno `reef_role` returns.
    pub fn errno(self) -> u32 {
        match self {
            Self::NoSuchCore(_) => errno::EINVAL,
            Self::NotRunning(..) | Self::NoAnswer(_) => errno::EAGAIN,
            Self::CoreZero => errno::EPERM,
            // The asker would wait for itself to move.
            Self::AskedByItsOwnProcess(_) => errno::EDEADLK,
            Self::LastTimesharingCore(_)
            | Self::HasProcesses(..)
            | Self::CannotMove(..)
            | Self::CannotStay(..)
            | Self::RunsThread(_)
            | Self::ServesSyspages(..)
            | Self::Parked(..)
            | Self::HostsParked(..)
            | Self::NotTimesharing(_) => errno::EBUSY,
            Self::RoleFixedByImage(_) => errno::EOPNOTSUPP,
        }
    }
}

impl core::fmt::Display for RoleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoSuchCore(core) => write!(f, "there is no core {core}"),
            Self::NotRunning(core, state) => write!(f, "core {core} is {}, not running", state.name()),
            Self::LastTimesharingCore(core) => write!(f, "core {core} is the last timesharing core"),
            Self::CoreZero => write!(
                f,
                "core 0 owns the devices and the file service: it can be a TC or a KC (which serves them), not an AC"
            ),
            Self::HasProcesses(core, count) => write!(
                f,
                "core {core} is home to {count} processes that did not move to other TCs (or, for a restart, \
                 did not stop to be kept)"
            ),
            Self::AskedByItsOwnProcess(core) => write!(
                f,
                "core {core} is home to processes, among them the one asking, which cannot move while it \
                 waits: ask from another core"
            ),
            Self::CannotMove(core, pid, why) => {
                write!(f, "process {pid} of core {core} cannot move to another TC: {why}; end it first")
            }
            Self::CannotStay(core, pid, why) => {
                write!(f, "process {pid} of core {core} cannot be kept in its KCB: {why}; end it first")
            }
            Self::RunsThread(core) => write!(f, "application core {core} runs a thread"),
            Self::ServesSyspages(core, count) => write!(
                f,
                "kernel core {core} serves {count} syspages and no other kernel core could take them over: \
                 make another core a KC first (role <core> kc), or end the programs using them"
            ),
            Self::NoAnswer(core) => write!(f, "core {core} did not answer"),
            Self::RoleFixedByImage(core) => {
                write!(f, "core {core} runs the rt image, whose role cannot change: restart it with /boot/full")
            }
            Self::Parked(core, host) => {
                write!(f, "core {core} is parked on core {host}: unpark it first (core unpark {core})")
            }
            Self::HostsParked(core, guest) => {
                write!(f, "core {core} hosts parked core {guest}: unpark that first (core unpark {guest})")
            }
            Self::NotTimesharing(core) => {
                write!(
                    f,
                    "core {core} cannot take part: a TC or a KC parks, only a TC hosts, an AC does neither (role {core} tc)"
                )
            }
        }
    }
}

/// Makes `core` take `role`; returns once the core applied it (or refused).
pub fn change(core: usize, role: Role) -> Result<(), RoleError> {
    let region = shared::get();
    let count = shared::facts().core_count as usize;
    if core >= count.min(crate::msg::messaging_cores()) {
        return Err(RoleError::NoSuchCore(core));
    }
    let kcb = region.kcb(core);
    if !kcb.state().is_live() {
        return Err(RoleError::NotRunning(core, kcb.state()));
    }
    let me = shared::this_core();
    // Checked before any process moves, so that a refused change changes nothing (the last
    // TC is checked again under the lock).
    if role != Role::Timesharing && !other_timesharing(core, count) {
        return Err(RoleError::LastTimesharingCore(core));
    }
    if core == 0 && role == Role::Application {
        return Err(RoleError::CoreZero);
    }
    // NIX: a core that leaves timesharing hands its processes to the TCs first (core 0's too,
    // init among them, when it becomes the file service's KC).
    if role != Role::Timesharing {
        hand_processes_over(core, count, HandOver::Leave)?;
    }
    region.header.role_lock.lock(me);
    let result = change_locked(core, role, count);
    region.header.role_lock.unlock();
    if result.is_ok() {
        log::info!(
            "core {core} is now a{} {}",
            if role == Role::Application { "n" } else { "" },
            Role::name(role as u32)
        );
    }
    result
}

/// How long a restart's asker spins for the target's processes to freeze before it sleeps.
const FREEZE_SPIN_MS: u64 = 20;

/// What becomes of a timesharing core's processes before it stops or changes role.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum HandOver {
    /// They move to the other TCs for good (a stop, a role change).
    Leave,
    /// They wait a restart out on the other TCs and come back to the next kernel (a restart
    /// with an image that runs no timesharing never takes them back).
    ComeBack,
    /// They stay where they are, kept in the KCB for the next kernel (a restart with an
    /// image that runs timesharing: `proc::keep`).
    Keep,
    /// They stay, kept in the KCB, through a stop until a start (`core stop --keep`): as
    /// `Keep`, but a thread on an AC cannot wait that long.
    KeepUntilStart,
}

impl HandOver {
    fn keeps(self) -> bool {
        matches!(self, Self::Keep | Self::KeepUntilStart)
    }
}

/// What a stop may leave in the KCB for the next kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum StopKind {
    /// Nothing: processes, an AC's thread and a KC's syspages refuse it.
    Plain,
    /// The processes homed here, all frozen (`core stop --keep`).
    KeepProcesses,
    /// Frozen processes and served syspages (a restart: the next kernel follows at once).
    Restart,
}

impl StopKind {
    /// The stop a boot driver asked for, as its `restart_pending` says.
    pub(super) fn asked() -> Self {
        match shared::this_kcb().restart_pending.load(Ordering::Acquire) {
            0 => Self::Plain,
            ::kcb::block::STOPPING_TO_KEEP => Self::KeepProcesses,
            _ => Self::Restart,
        }
    }
}

/// Asks `core`, if it is a running timesharing core home to processes, to hand them all over
/// to the other TCs and waits until it is home to none, or (`HandOver::Keep`) to keep them
/// for its next kernel and waits until every one is frozen. A parked core and a host keep
/// theirs (their role change or stop is refused for other reasons); a core asking for itself
/// is refused (the asker is one of its processes, which cannot move or freeze while it waits
/// for the answer).
pub(super) fn hand_processes_over(core: usize, count: usize, how: HandOver) -> Result<(), RoleError> {
    let region = shared::get();
    let Some(kcb) = region.listed_kcbs().get(core).filter(|_| core < count) else { return Ok(()) };
    let parking = kcb.parking.host().is_some() || super::park::guests_of(core).next().is_some();
    let homed = kcb.processes.live.load(Ordering::Acquire) != 0;
    if !homed || parking || kcb.state() != CoreState::Running || kcb.role() != Role::Timesharing {
        return Ok(());
    }
    let destinations = (0..count)
        .filter(|&c| c != core && c < 64)
        .filter(|&c| {
            let other = region.kcb(c);
            other.state() == CoreState::Running && other.role() == Role::Timesharing && other.parking.host().is_none()
        })
        .fold(0u64, |set, c| set | 1 << c);
    if destinations == 0 && !how.keeps() {
        return Err(RoleError::LastTimesharingCore(core));
    }
    if core == shared::this_core() as usize {
        return Err(RoleError::AskedByItsOwnProcess(core));
    }
    let mode = match how {
        HandOver::Leave => 0,
        HandOver::ComeBack => 1,
        HandOver::Keep => crate::proc::migrate::KEEP,
        HandOver::KeepUntilStart => crate::proc::migrate::KEEP_UNTIL_START,
    };
    let arguments = [destinations, mode, 0, 0, 0];
    // An IPI after the call: a core running user code looks at its messages only when
    // something interrupts it, and its processes stop from the moment they are asked.
    let answer = icc::call_async(core, handler::EVACUATE, arguments)
        .and_then(|call| {
            crate::msg::notify(core, crate::msg::NotifyMode::Ipi);
            icc::wait(call, ROLE_CHANGE_TIMEOUT_MS)
        })
        .map_err(|_| RoleError::NoAnswer(core))?;
    if answer & REFUSED_MOVE != 0 {
        let why = crate::proc::migrate::CannotMove::from_code((answer >> 32) as u32 & 0x7FFF_FFFF);
        return Err(if how.keeps() {
            RoleError::CannotStay(core, answer as u32, why)
        } else {
            RoleError::CannotMove(core, answer as u32, why)
        });
    }
    let homed = || region.kcb(core).processes.live.load(Ordering::Acquire);
    let waiting = || {
        if how.keeps() {
            homed() != region.kcb(core).kept.frozen.load(Ordering::Acquire)
        } else {
            homed() != 0
        }
    };
    if how.keeps() {
        // A process freezes at its next kernel entry, which the ICC itself usually is: tens
        // of microseconds. A sleep, or a yield to a busy thread, would wait for this core's
        // next tick (10 ms), all of it a pause of the kept processes, so the asker spins a
        // little first.
        let quick = crate::time::SpinDeadline::after_ms(FREEZE_SPIN_MS);
        while waiting() && !quick.passed() {
            // This core's messages and file service go on meanwhile: a thread waiting for the
            // service (a pipe read) freezes once its cancelled request is answered, and the
            // asker may be the service's core.
            crate::msg::drain();
            crate::fs::at_safe_point();
            crate::arch::cpu::relax();
        }
    }
    if !crate::sched::sleep_while(HAND_OVER_TIMEOUT_MS, waiting) {
        return Err(RoleError::HasProcesses(core, homed()));
    }
    Ok(())
}

fn change_locked(core: usize, role: Role, count: usize) -> Result<(), RoleError> {
    if role != Role::Timesharing && !other_timesharing(core, count) {
        return Err(RoleError::LastTimesharingCore(core));
    }
    if core == shared::this_core() as usize {
        return apply(role).map_err(|status| decode_refusal(core, status));
    }
    match icc::call(core, handler::SET_ROLE, [role as u64, 0, 0, 0, 0], ROLE_CHANGE_TIMEOUT_MS) {
        Ok(0) => Ok(()),
        Ok(refusal) => Err(decode_refusal(core, refusal)),
        Err(_) => Err(RoleError::NoAnswer(core)),
    }
}

/// Whether a live core other than `core` is a timesharing core.
pub(super) fn other_timesharing(core: usize, count: usize) -> bool {
    let region = shared::get();
    (0..count)
        .filter(|&c| c != core)
        .any(|c| region.kcb(c).state().is_live() && region.kcb(c).role() == Role::Timesharing)
}

/// Refusals travel as small numbers in the ICC's value: which rule, and a count.
const REFUSED_PROCESSES: u64 = 1 << 32;
const REFUSED_THREAD: u64 = 2 << 32;
const REFUSED_SYSPAGES: u64 = 3 << 32;
const REFUSED_BY_IMAGE: u64 = 4 << 32;
const REFUSED_PARKED: u64 = 5 << 32;
const REFUSED_HOSTING: u64 = 6 << 32;
const REFUSED_ROLE: u64 = 7 << 32;
/// An evacuation's refusal: bit 63, the reason's code in bits 32..63, the pid below.
const REFUSED_MOVE: u64 = 1 << 63;

pub(super) fn decode_refusal(core: usize, value: u64) -> RoleError {
    let count = value as u32;
    match value & !0xFFFF_FFFF {
        REFUSED_PROCESSES => RoleError::HasProcesses(core, count),
        REFUSED_THREAD => RoleError::RunsThread(core),
        REFUSED_SYSPAGES => RoleError::ServesSyspages(core, count),
        REFUSED_BY_IMAGE => RoleError::RoleFixedByImage(core),
        REFUSED_PARKED => RoleError::Parked(core, count as usize),
        REFUSED_HOSTING => RoleError::HostsParked(core, count as usize),
        REFUSED_ROLE => RoleError::NotTimesharing(core),
        _ => RoleError::NoAnswer(core),
    }
}

/// On the target: checks what only it knows and takes the role; the refusal is encoded as
/// in [`decode_refusal`].
fn apply(role: Role) -> Result<(), u64> {
    let kcb = shared::this_kcb();
    let current = kcb.role();
    if current == role {
        return Ok(());
    }
    if cfg!(feature = "rt") {
        return Err(REFUSED_BY_IMAGE);
    }
    let processes = kcb.processes.live.load(Ordering::Relaxed);
    if role != Role::Timesharing && processes != 0 {
        return Err(REFUSED_PROCESSES | u64::from(processes));
    }
    // A kernel core's syspages go to another kernel core (if one runs) before it leaves.
    crate::syscall::syspage::hand_over();
    if let Some(refusal) =
        what_keeps_this_core(StopKind::Plain).filter(|refusal| refusal & !0xFFFF_FFFF != REFUSED_PROCESSES)
    {
        return Err(refusal);
    }
    kcb.role.store(role as u32, Ordering::Release);
    if role == Role::Timesharing {
        start_timer();
    } else {
        // NIX: an AC takes no timer interrupt; a KC wakes by its doorbell, not by a tick.
        apic::local().stop_timer();
    }
    Ok(())
}

/// What runs on this core that a role change or a stop would leave behind: it is parked or
/// hosts a parked core, processes homed here (but those a `stop` keeps frozen in the KCB for
/// the next kernel), an application thread, syspages served (but for a restart, which keeps
/// them too); encoded as in [`decode_refusal`].
pub(super) fn what_keeps_this_core(stop: StopKind) -> Option<u64> {
    let kcb = shared::this_kcb();
    if let Some(host) = kcb.parking.host() {
        return Some(REFUSED_PARKED | host as u64);
    }
    if let Some(guest) = super::park::guests().next() {
        return Some(REFUSED_HOSTING | guest as u64);
    }
    let processes = kcb.processes.live.load(Ordering::Relaxed);
    // A restart, or a stop that keeps them, may stop a core whose processes are all frozen
    // for the next kernel.
    if processes != 0 && !(stop != StopKind::Plain && crate::proc::keep::all_frozen()) {
        return Some(REFUSED_PROCESSES | u64::from(processes));
    }
    if kcb.application_thread.load(Ordering::Acquire) != 0 {
        return Some(REFUSED_THREAD);
    }
    let syspages = kcb.syspages.load(Ordering::Acquire);
    if syspages != 0 && stop != StopKind::Restart {
        return Some(REFUSED_SYSPAGES | u64::from(syspages));
    }
    None
}

/// What keeps this core from parking on another's kernel: it is parked already, hosts a
/// parked core, or is an application core (its thread runs with no interrupt, which a host's
/// time-sharing cannot give it); encoded as in [`decode_refusal`]. Processes go with it, and
/// so do a kernel core's syspages (it serves them in its slices of the host).
pub(super) fn what_keeps_this_core_parked() -> Option<u64> {
    let kcb = shared::this_kcb();
    if let Some(host) = kcb.parking.host() {
        return Some(REFUSED_PARKED | host as u64);
    }
    if let Some(guest) = super::park::guests().next() {
        return Some(REFUSED_HOSTING | guest as u64);
    }
    (kcb.role() == Role::Application).then_some(REFUSED_ROLE)
}

/// Starts this core's periodic LAPIC timer at the command line's `timer_hz`.
pub fn start_timer() {
    let facts = shared::facts();
    let count = (facts.apic_timer_hz / u64::from(facts.options.timer_hz)).clamp(1, u64::from(u32::MAX));
    apic::local().start_periodic_timer(count as u32, idt::VECTOR_TIMER);
}

/// A thread's time slice in ns: one period of the timer.
pub fn slice_ns() -> u64 {
    1_000_000_000 / u64::from(shared::facts().options.timer_hz).max(1)
}

/// This core's role.
pub fn current() -> Role {
    shared::this_kcb().role()
}

/// Registers the role ICC handlers of this instance.
pub fn init() {
    icc::register(handler::EVACUATE, |arguments: &[u64; ICC_ARGUMENTS]| {
        let asked = match arguments[1] {
            crate::proc::migrate::KEEP => crate::proc::migrate::keep_all(false),
            crate::proc::migrate::KEEP_UNTIL_START => crate::proc::migrate::keep_all(true),
            come_back => crate::proc::migrate::evacuate(arguments[0], come_back != 0),
        };
        Ok(match asked {
            Ok(count) => u64::from(count),
            Err((pid, why)) => REFUSED_MOVE | u64::from(why.code()) << 32 | u64::from(pid),
        })
    });
    icc::register(handler::SET_ROLE, |arguments: &[u64; ICC_ARGUMENTS]| {
        let role = Role::from_u64(arguments[0]).ok_or(IccStatus::BadArguments)?;
        Ok(match apply(role) {
            Ok(()) => 0,
            Err(refusal) => refusal,
        })
    });
}
