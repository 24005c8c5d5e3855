//! Stopping, starting and restarting cores while the others run (Barrelfish/DC §4.1).
//!
//! Only the asking core and the target take part: no global lock, no other core pauses.
//! - **Stop.** The asking core checks the system-wide rule (core 0 stays: it owns the devices,
//!   the file service and init), then asks the target by ICC. The target checks what only it
//!   knows (no processes homed here, no application thread, no syspages), answers, and at its
//!   next idle point masks its timer, drops the shared locks, marks its KCB `stopped` and
//!   halts. Its channels stay where they stood in the shared region: messages sent meanwhile
//!   are refused with a named error, and those already queued wait for the next kernel.
//! - **Start.** A boot driver claims the KCB (`stopped -> booting`), loads the image (checked
//!   whole before anything is written, `kernel_image`), prepares the partition and sends
//!   INIT-SIPI; the new kernel takes its channels over where they stood (`docs/failures.md`).
//! - **Restart** is a stop, then a start of the same KCB on the same core with another image.
//!   The image is checked before the stop, so a bad image changes nothing.
#![deny(unsafe_code)]

use super::boot_driver::{self, BootError, StartCycles};
use super::kcb::CoreState;
use super::kernel_image::{self, ImageError, KernelImage};
use super::role::{HandOver, RoleError, StopKind};
use super::shared;
use crate::arch::{apic, cpu};
use crate::msg::icc;
use abi::call::CoreTimes;
use abi::message::{handler, ICC_ARGUMENTS};
use alloc::sync::Arc;
use core::sync::atomic::Ordering;
use linux_raw_sys::errno;

/// How long the asking core waits for the target to answer and to stop.
const STOP_TIMEOUT_MS: u64 = 1000;

/// Why a core operation was refused; each maps to an errno of `abi::call::CORE_OPERATION`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreError {
    /// No such core.
    NoSuchCore(usize),
    /// Core 0 owns the devices and the file service: it never stops.
    CoreZero { last_timesharing: bool },
    /// The core is stopped (or was never started) already.
    AlreadyStopped(usize, CoreState),
    /// The core is neither running nor startable (it is booting).
    NotRunning(usize, CoreState),
    /// What runs on the core cannot be left behind; the reason as `role::RoleError` says it.
    Busy(super::role::RoleError),
    /// The core did not answer or did not stop in time.
    NoAnswer(usize),
    /// The image cannot be loaded.
    Image(ImageError),
    /// The boot driver could not start the core.
    Boot(usize, BootError),
    /// A core asked to park on itself.
    ParkOnItself(usize),
    /// A core's own kernel was asked to park or unpark it: it moves only at an idle point,
    /// which the asking thread keeps it from.
    AskedByItself(usize),
    /// The would-be host's image cannot time-share parked cores.
    CannotHost(usize),
    /// The core is not parked.
    NotParked(usize),
    /// The destination core's processor is in use (by that OSnode, or by another one).
    ProcessorBusy(usize, usize),
    /// Another boot driver is restarting the core.
    RestartUnderWay(usize),
    /// The stopped core's KCB holds processes a `stop --keep` kept, which this image cannot
    /// take on (it runs no timesharing).
    KeepsProcesses(usize),
}

impl CoreError {
    /// The Linux errno `reef_core_operation` returns.
    pub fn errno(&self) -> u32 {
        match self {
            Self::NoSuchCore(_) => errno::EINVAL,
            Self::CoreZero { .. } => errno::EPERM,
            Self::AlreadyStopped(..) => errno::EALREADY,
            Self::NotRunning(_, CoreState::Stopped | CoreState::Offline) => errno::ENODEV,
            Self::NotRunning(..) => errno::EAGAIN,
            Self::Busy(refusal @ super::role::RoleError::AskedByItsOwnProcess(_)) => refusal.errno(),
            Self::Busy(_) => errno::EBUSY,
            Self::NoAnswer(_) => errno::ETIMEDOUT,
            Self::Image(error) => error.errno(),
            Self::Boot(_, BootError::NoResponse) => errno::ETIMEDOUT,
            Self::Boot(_, BootError::RefusedKcb) => errno::EPROTO,
            Self::Boot(_, BootError::NoSuchCore(_)) => errno::EINVAL,
            Self::Boot(_, BootError::NotOffline(_)) => errno::EALREADY,
            Self::Boot(_, BootError::ProcessorTaken(_)) => errno::EBUSY,
            Self::Boot(..) => errno::ENOMEM,
            Self::ParkOnItself(_) | Self::NotParked(_) | Self::AskedByItself(_) => errno::EINVAL,
            Self::CannotHost(_) => errno::EOPNOTSUPP,
            Self::ProcessorBusy(..) => errno::EBUSY,
            Self::RestartUnderWay(_) => errno::EAGAIN,
            Self::KeepsProcesses(_) => errno::EBUSY,
        }
    }
}

impl core::fmt::Display for CoreError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoSuchCore(core) => write!(f, "there is no core {core} (see `cores`)"),
            Self::CoreZero { last_timesharing } => write!(
                f,
                "core 0 owns the devices and the file service, and never stops{}",
                if *last_timesharing { "; it is also the last timesharing core" } else { "" }
            ),
            Self::AlreadyStopped(core, state) => write!(f, "core {core} is {} already", state.name()),
            Self::NotRunning(core, state @ (CoreState::Stopped | CoreState::Offline)) => {
                write!(f, "core {core} is {}: start it first (core start {core})", state.name())
            }
            Self::NotRunning(core, state) => write!(f, "core {core} is {}: wait until it runs", state.name()),
            Self::Busy(
                reason @ (RoleError::Parked(..)
                | RoleError::HostsParked(..)
                | RoleError::NotTimesharing(_)
                | RoleError::CannotMove(..)
                | RoleError::CannotStay(..)
                | RoleError::ServesSyspages(..)
                | RoleError::AskedByItsOwnProcess(_)),
            ) => {
                write!(f, "{reason}")
            }
            Self::Busy(reason @ RoleError::HasProcesses(core, _)) => write!(
                f,
                "{reason}: end them first, or park the core on a multi core (core park {core} <host>), \
                 which frees its processor and keeps them running"
            ),
            Self::Busy(reason) => write!(f, "{reason}: end or move that first"),
            Self::NoAnswer(core) => write!(f, "core {core} did not stop in {STOP_TIMEOUT_MS} ms"),
            Self::Image(error) => write!(f, "{error}"),
            Self::Boot(core, error) => write!(f, "core {core} not started: {error}"),
            Self::ParkOnItself(core) => write!(f, "core {core} cannot park on itself: name another core as host"),
            Self::CannotHost(host) => {
                let (name, length) = shared::get().kcb(*host).image_name();
                write!(
                    f,
                    "core {host} runs image {}, which cannot host parked cores: core restart {host} /boot/multi",
                    core::str::from_utf8(&name[..length]).unwrap_or("?")
                )
            }
            Self::NotParked(core) => write!(f, "core {core} is not parked (see `cores`)"),
            Self::AskedByItself(core) => {
                write!(f, "core {core} cannot move itself: ask from another core (on 0 /bin/core ...)")
            }
            Self::ProcessorBusy(core, user) if core == user => {
                write!(f, "core {core} runs: only a stopped core's processor can take a parked core")
            }
            Self::ProcessorBusy(core, user) => write!(f, "core {core}'s processor runs core {user} now"),
            Self::RestartUnderWay(core) => write!(f, "core {core} is being restarted already: wait for it, then ask"),
            Self::KeepsProcesses(core) => write!(
                f,
                "core {core} keeps the processes it had when it stopped, and this image runs no timesharing: \
                 start it with one that does (core start {core} /boot/full)"
            ),
        }
    }
}

/// Stops `core`; returns the cycles from the request until the core reported itself stopped.
/// A timesharing core hands its processes to the other TCs first, as Linux moves a CPU's
/// tasks off before it goes offline.
pub fn stop(core: usize) -> Result<u64, CoreError> {
    refuse_core_zero(core)?;
    hand_processes_over(core, HandOver::Leave)?;
    stop_now(core)
}

/// Stops `core` with its processes frozen in its KCB (Barrelfish/DC: the KCB holds the
/// OSnode's state while no kernel runs it); a later [`start`] boots a kernel that takes them
/// on where they stopped, as a restart does. Meanwhile they run nowhere: signals for them
/// fail, and their parents' waits wait. Their children's exits wait in the core's receive
/// queue for the next kernel (`msg::send_or_leave`).
pub fn stop_keeping(core: usize) -> Result<u64, CoreError> {
    refuse_core_zero(core)?;
    let kcb = shared::get().listed_kcbs().get(core).ok_or(CoreError::NoSuchCore(core))?;
    let keeping = ::kcb::block::STOPPING_TO_KEEP;
    if kcb.restart_pending.compare_exchange(0, keeping, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Err(CoreError::RestartUnderWay(core));
    }
    let result = hand_processes_over(core, HandOver::KeepUntilStart).and_then(|()| stop_now(core));
    // Stopped, the frozen threads are gone with their kernel; given up, they thaw and run on.
    kcb.restart_pending.store(0, Ordering::Release);
    result
}

/// Core 0 owns the devices and the file service and never stops: refused before anything
/// moves or is laid out, so the refusal changes nothing.
fn refuse_core_zero(core: usize) -> Result<(), CoreError> {
    if core != 0 {
        return Ok(());
    }
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    Err(CoreError::CoreZero { last_timesharing: !super::role::other_timesharing(0, count) })
}

/// Before a stop: the processes of timesharing core `core` move to the other TCs, or stay
/// for its next kernel; see `role::hand_processes_over`.
fn hand_processes_over(core: usize, how: HandOver) -> Result<(), CoreError> {
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    super::role::hand_processes_over(core, count, how).map_err(CoreError::Busy)
}

fn stop_now(core: usize) -> Result<u64, CoreError> {
    let region = shared::get();
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    if core >= count {
        return Err(CoreError::NoSuchCore(core));
    }
    let kcb = region.kcb(core);
    match kcb.state() {
        CoreState::Running => {}
        state @ (CoreState::Stopped | CoreState::Offline) => return Err(CoreError::AlreadyStopped(core, state)),
        state => return Err(CoreError::NotRunning(core, state)),
    }
    let begun = cpu::read_tsc();
    let deadline = crate::time::SpinDeadline::after_ms(STOP_TIMEOUT_MS);
    kcb.stop_asked_tsc.store(begun, Ordering::Relaxed);
    // An IPI after the call: an application core running user code looks at its messages
    // only when something interrupts it.
    let answer = icc::call_async(core, handler::STOP_CORE, [0; ICC_ARGUMENTS]).and_then(|call| {
        crate::msg::notify(core, crate::msg::NotifyMode::Ipi);
        icc::wait(call, STOP_TIMEOUT_MS)
    });
    match answer {
        Ok(0) => {}
        Ok(refusal) => return Err(CoreError::Busy(super::role::decode_refusal(core, refusal))),
        Err(_) => return Err(give_up_stop(core)),
    }
    while kcb.state() != CoreState::Stopped {
        if deadline.passed() {
            return Err(give_up_stop(core));
        }
        cpu::relax();
    }
    let cycles = kcb.stopped_tsc.load(Ordering::Relaxed).saturating_sub(begun);
    // Debug level: a console line would cost more than the stop (the caller prints its own).
    log::debug!("core {core} stopped in {} us", crate::time::cycles_to_ns(cycles) / 1000);
    Ok(cycles)
}

/// A stop that did not happen in time is withdrawn, so the core goes on as it was.
fn give_up_stop(core: usize) -> CoreError {
    shared::get().kcb(core).stop_requested.store(0, Ordering::Release);
    CoreError::NoAnswer(core)
}

/// The image at `path` (`None`: the one the system booted), checked; and whether it came
/// from the cache.
fn image(path: Option<&str>, uncached: bool) -> Result<(Option<Arc<KernelImage>>, bool), CoreError> {
    let from_file = shared::this_kcb().image_from_file.load(Ordering::Relaxed) != 0;
    let path = match path {
        Some(path) => path,
        // This instance runs a file image, so the booted one's template is not at hand; or
        // the caller wants the image read afresh: the booted image's file.
        None if from_file || uncached => kernel_image::DEFAULT_IMAGE_PATH,
        None => return Ok((None, true)),
    };
    let (image, cached) = kernel_image::load(path, uncached).map_err(CoreError::Image)?;
    Ok((Some(image), cached))
}

/// Starts a stopped (or never started) `core` with the image at `path`.
pub fn start(core: usize, path: Option<&str>, uncached: bool) -> Result<CoreTimes, CoreError> {
    let begun = cpu::read_tsc();
    if let Some(host) = shared::get().listed_kcbs().get(core).and_then(|kcb| kcb.parking.host()) {
        return Err(CoreError::Busy(RoleError::Parked(core, host)));
    }
    let (image, cached) = image(path, uncached)?;
    let keeps = shared::get().listed_kcbs().get(core).is_some_and(|kcb| kcb.kept.chain.load(Ordering::Acquire) != 0);
    if keeps && image.as_ref().is_some_and(|image| image.note.flags & ::kcb::APPLICATION_ONLY != 0) {
        return Err(CoreError::KeepsProcesses(core));
    }
    let loaded = cpu::read_tsc() - begun;
    let (mut cycles, ended) = boot(core, image.as_deref(), None)?;
    cycles.driver += loaded;
    Ok(times(begun, ended, 0, cycles, cached))
}

/// Stops `core`, then starts its KCB there again with the image at `path`; the image is
/// checked first, so a bad one leaves the core running as it was.
pub fn restart(core: usize, path: Option<&str>, uncached: bool) -> Result<CoreTimes, CoreError> {
    let begun = cpu::read_tsc();
    let (image, cached) = image(path, uncached)?;
    let loaded = cpu::read_tsc() - begun;
    refuse_core_zero(core)?;
    let kcb = shared::get().listed_kcbs().get(core).ok_or(CoreError::NoSuchCore(core))?;
    // One restart of a core at a time: the next kernel is laid out before the stop, in the
    // half of the reserve the running one does not use, which a second would write too.
    let restarting = ::kcb::block::RESTARTING;
    if kcb.restart_pending.compare_exchange(0, restarting, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Err(CoreError::RestartUnderWay(core));
    }
    // The next kernel is laid out while the old one runs (nothing stops if that fails), so
    // after the stop only the wake-up is left: the pause of what the core keeps is shorter.
    let prepared = match kcb.state() {
        CoreState::Running => boot_driver::prepare_next(core, image.as_deref()).map(Some),
        _ => Ok(None),
    }
    .map_err(|error| CoreError::Boot(core, error));
    // A TC's processes stay, kept in its KCB for the new kernel; if that image runs no
    // timesharing, they go to the other TCs instead (and come back if the old kernel runs
    // on). If the stop does not happen they run on under the old kernel (`restart_pending`
    // is cleared below).
    let application_only = image.as_ref().is_some_and(|image| image.note.flags & ::kcb::APPLICATION_ONLY != 0);
    let how = if application_only { HandOver::ComeBack } else { HandOver::Keep };
    let result = prepared.and_then(|prepared| {
        hand_processes_over(core, how)?;
        let stop_cycles = stop_now(core)?;
        Ok((stop_cycles, boot(core, image.as_deref(), prepared)?))
    });
    kcb.restart_pending.store(0, Ordering::Release);
    let (stop_cycles, (mut cycles, ended)) = result?;
    cycles.driver += loaded;
    Ok(times(begun, ended, stop_cycles, cycles, cached))
}

/// Linux's `cpuN/online` switch: `false` stops the core, `true` starts it with the booted
/// image; asking for the state it is in already changes nothing and succeeds, as on Linux.
pub fn set_online(core: usize, online: bool) -> Result<(), u32> {
    let state = shared::get().listed_kcbs().get(core).map(|kcb| kcb.state());
    let result = match (online, state) {
        (_, None) => Err(CoreError::NoSuchCore(core)),
        (true, Some(CoreState::Running)) | (false, Some(CoreState::Stopped | CoreState::Offline)) => Ok(()),
        (true, Some(_)) => start(core, None, false).map(drop),
        (false, Some(_)) => stop(core).map(drop),
    };
    result.map_err(|error| {
        log::info!("cpu{core}/online := {}: {error}", u8::from(online));
        error.errno()
    })
}

/// Boots `core`; returns the boot's parts and the TSC when it ended (before the log line).
fn boot(
    core: usize,
    image: Option<&KernelImage>,
    prepared: Option<boot_driver::Prepared>,
) -> Result<(StartCycles, u64), CoreError> {
    let cycles = match prepared {
        Some(prepared) => boot_driver::start_prepared(core, image, prepared),
        None => boot_driver::start_core_with(core, image),
    }
    .map_err(|error| CoreError::Boot(core, error))?;
    let ended = cpu::read_tsc();
    log::debug!(
        "core {core} started with {}: boot driver {} us, target {} us",
        image.map_or("the booted image", |image| image.path.as_str()),
        crate::time::cycles_to_ns(cycles.driver) / 1000,
        crate::time::cycles_to_ns(cycles.target) / 1000
    );
    Ok((cycles, ended))
}

fn times(begun: u64, ended: u64, stop: u64, start: StartCycles, cached: bool) -> CoreTimes {
    let ns = crate::time::cycles_to_ns;
    CoreTimes {
        total_ns: ns(ended - begun),
        stop_ns: ns(stop),
        driver_ns: ns(start.driver),
        target_ns: ns(start.target),
        image_cached: u64::from(cached),
    }
}

/// On the target, at an idle point: stops the core if a boot driver asked (never returns
/// then). Nothing runs here by the time it is asked: the ICC handler refused otherwise.
pub fn stop_if_asked() {
    let kcb = shared::this_kcb();
    // Not in the middle of a large message: its sender is publishing the rest, and nothing
    // may be lost to the stop (the stop waits for the rest, a few microseconds).
    if kcb.stop_requested.load(Ordering::Acquire) == 0 || crate::msg::is_collecting_large() {
        return;
    }
    // Processes homed here stop it only if a restart keeps them all: one that came since the
    // stop was asked keeps the core running (the asker gives the stop up).
    if kcb.processes.live.load(Ordering::Relaxed) != 0 && !crate::proc::keep::all_frozen() {
        return;
    }
    // Calls kernel cores handed back for a kept thread's syspage run first, in that thread
    // (woken for them): none may be left in this kernel's memory. (Nothing takes a message
    // between this look and the stop.)
    if crate::syscall::syspage::has_forwarded() {
        return;
    }
    // Lines this kernel held back are printed before it goes (a restart soon after another
    // would lose them with it).
    crate::console::print_deferred(true);
    cpu::disable_interrupts();
    apic::local().stop_timer();
    kcb.stop_requested.store(0, Ordering::Relaxed);
    kcb.stops.fetch_add(1, Ordering::Relaxed);
    // No log line: the console would be most of the stop's time.
    crate::interrupt::release_shared_locks();
    // A kernel core's syspages outlive its kernel (only a restart stops one that has any).
    crate::syscall::syspage::keep_for_next_kernel();
    // So are a timesharing core's processes a restart kept (`proc::keep`).
    crate::proc::keep::keep_for_next_kernel();
    kcb.stopped_tsc.store(cpu::read_tsc(), Ordering::Relaxed);
    // Release: a boot driver that sees `stopped` also sees every write before it, and the
    // receivers of this core's channels may treat what it half-sent as abandoned.
    kcb.set_state(CoreState::Stopped);
    cpu::halt_forever()
}

/// Registers the start and stop handlers of this instance.
pub fn init() {
    icc::register(handler::START_CORE, |arguments: &[u64; ICC_ARGUMENTS]| {
        super::boot_driver::start_core(arguments[0] as usize).map(|()| 0).map_err(|error| {
            log::error!("core {} not started: {error}", arguments[0]);
            abi::message::IccStatus::Failed
        })
    });
    icc::register(handler::STOP_CORE, |_arguments: &[u64; ICC_ARGUMENTS]| {
        // An application thread is handed back to its home (`ac::suspend`), unless it waits
        // on a syspage: its call is in a kernel core's hands.
        let hands_back = super::ac::can_suspend();
        // A kernel core's syspages stay in its KCB for the next kernel of a restart; before
        // another stop they go to another kernel core, if one runs (else they would strand
        // their calls, and the stop is refused). Processes stay if the stop keeps them.
        let stop = StopKind::asked();
        if stop != StopKind::Restart {
            crate::syscall::syspage::hand_over();
        }
        if let Some(refusal) = super::role::what_keeps_this_core(stop).filter(|_| !hands_back) {
            return Ok(refusal);
        }
        shared::this_kcb().stop_requested.store(1, Ordering::Release);
        Ok(0)
    });
}
