//! The kernel's control commands and read-only views, written into any `fmt::Write`.
//!
//! `cores`, `mem`, `start`, `msg`, `syscalls`, `ps` and `poweroff` run here for the `CONTROL`
//! system call, which hands their text to a process (`/bin/cores` and the other programs of
//! `user/reef` print it); the views are what `cores`, `mem`, `msg stats`, `syscalls` and `ps`
//! print, for the file service to serve as `/proc/reef/{cores,mem,msg,syscalls,processes}`.
//! A command reads and acts on the instance it runs on: `mem` details that instance's frames
//! and heap, `ps` its processes, `msg ping` and `msg bench` measure from it, `start` uses its
//! boot driver. None needs COM1, so every command works from any core; `poweroff` writes its
//! line to the console, not to `out`, since no caller lives on to read a buffer.
//!
//! A command that starts, stops or changes cores or the machine runs for root only: its
//! [`Access`] says so, and [`run`] checks it in one place. `msg bench` and `msg stress` exist
//! only in images built with the `bench` feature; in the others they say so.
#![deny(unsafe_code)]

use crate::arch::cpu;
use crate::core::boot_driver;
use crate::core::kcb::PartitionRange;
use crate::core::kcb::{CoreState, Role};
use crate::core::shared;
use ::core::fmt::{self, Write};
use ::core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use alloc::string::String;
use alloc::vec::Vec;

/// Why a command failed; its text (`Display`) is the `error: …` line that ends the command's
/// output, saying what to do.
#[derive(Debug)]
pub enum CommandError {
    /// The command name is not known.
    Unknown(String),
    /// The arguments are wrong; the text is the usage line.
    Usage(&'static str),
    /// The command ran and failed; the text says why.
    Failed(String),
    /// The command (its name, and its subcommand if that is what needs root) runs for root
    /// only, and the caller runs as the user given.
    NotPermitted { command: String, user: u32 },
}

impl CommandError {
    /// The status the `CONTROL` call reports (`abi::call::control`).
    pub fn control_status(&self) -> u32 {
        match self {
            Self::Unknown(_) | Self::Failed(_) | Self::NotPermitted { .. } => abi::call::control::FAILED,
            Self::Usage(_) => abi::call::control::USAGE,
        }
    }
}

/// The line that ends a failed command's output (without its newline).
impl fmt::Display for CommandError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(name) => {
                write!(formatter, "error: unknown command `{name}`: `reef help` lists the commands")
            }
            Self::Usage(usage) => write!(formatter, "error: wrong arguments: usage: {usage}"),
            Self::Failed(why) => write!(formatter, "error: {why}"),
            Self::NotPermitted { command, user } => write!(
                formatter,
                "error: `{command}` needs root (effective user id 0), and this process runs as user {user}: \
                 operation not permitted (EPERM)"
            ),
        }
    }
}

/// A command's output could not be written: only a writer that refuses text says so.
impl From<fmt::Error> for CommandError {
    fn from(_: fmt::Error) -> Self {
        Self::Failed(String::from("the output could not be written: the writer refused it"))
    }
}

/// What a command does with its arguments (those after its name) and where it writes.
pub type CommandBody = fn(&[&str], &mut dyn Write) -> Result<(), CommandError>;

/// Who may run a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Every process: the command only reads, or measures without changing any core.
    Anyone,
    /// Root only: the command starts, stops or ends cores or the machine.
    Root,
    /// Root only for the subcommands named (the first argument), every process for the rest.
    RootFor(&'static [&'static str]),
}

/// A command: its name, who may run it, and its body. (What each does for a user, and its
/// usage, is `reef help`'s text, `user/reef`.)
pub struct Command {
    pub name: &'static str,
    pub access: Access,
    pub run: CommandBody,
}

/// Every core: id, APIC id, state, role, kernel image, partition, uptime.
pub static CORES: Command = Command { name: "cores", access: Access::Anyone, run: |_, out| Ok(cores(out)?) };

/// The shared region and every core's private partition; this instance's free frames and heap.
pub static MEM: Command = Command { name: "mem", access: Access::Anyone, run: |_, out| Ok(mem(out)?) };

/// `start <core> [from <core>]`: starts an offline core with this instance's boot driver, or
/// with another running core's.
pub static START: Command = Command { name: "start", access: Access::Root, run: start };

/// Channels: `msg stats`, `msg ping <core> [n]`, `msg mode <core> <poll|ipi|hybrid|mwait>
/// [spin ns]`, and in images built with `bench`, `msg bench [core] [n]` and `msg stress`. A
/// mode changes how a core receives, and the benchmarks take cores over: root only.
pub static MSG: Command = Command { name: "msg", access: Access::RootFor(&["mode", "bench", "stress"]), run: msg };

/// This instance's processes and every instance's counts (the leak check).
pub static PS: Command = Command { name: "ps", access: Access::Anyone, run: |_, out| Ok(ps(out)?) };

/// `syscalls [core]`: system calls per core by number, the unimplemented ones (ENOSYS), paths this core answered itself.
pub static SYSCALLS: Command = Command { name: "syscalls", access: Access::Anyone, run: syscalls };

/// Stops every core and leaves QEMU.
pub static POWEROFF: Command = Command { name: "poweroff", access: Access::Root, run: poweroff };

/// The control commands: what the `CONTROL` call runs.
pub static COMMANDS: [&Command; 7] = [&CORES, &MEM, &START, &MSG, &SYSCALLS, &PS, &POWEROFF];

/// The control command called `name`.
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().copied().find(|command| command.name == name)
}

/// Runs a whole command, `arguments[0]` being its name, writing its text into `out`.
pub fn run(arguments: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
    let Some((name, rest)) = arguments.split_first() else {
        return Err(CommandError::Usage("<command> [arguments]: `reef help` lists the commands"));
    };
    let command = find(name).ok_or_else(|| CommandError::Unknown(String::from(*name)))?;
    permitted(command, rest, caller_user_id())?;
    (command.run)(rest, out)
}

/// The effective user id of the caller of a command: the process making the `CONTROL` call,
/// or the kernel itself (root) for its own callers (the file service's views, the in-guest
/// tests).
fn caller_user_id() -> u32 {
    crate::proc::credentials::current_effective_uid()
}

/// The user id of root.
pub const ROOT: u32 = 0;

/// Whether `user` may run `command` with `arguments` (those after its name): the one place
/// that decides, so every command that stops, starts or ends cores or the machine is refused
/// to a user other than root before it does anything.
pub fn permitted(command: &Command, arguments: &[&str], user: u32) -> Result<(), CommandError> {
    let refused = |what: String| Err(CommandError::NotPermitted { command: what, user });
    match command.access {
        _ if user == ROOT => Ok(()),
        Access::Anyone => Ok(()),
        Access::Root => refused(String::from(command.name)),
        Access::RootFor(subcommands) => match arguments.first() {
            Some(sub) if subcommands.contains(sub) => refused(alloc::format!("{} {sub}", command.name)),
            _ => Ok(()),
        },
    }
}

/// A read-only view of the machine, as a command prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// What `cores` prints.
    Cores,
    /// What `mem` prints.
    Mem,
    /// What `msg stats` prints.
    Msg,
    /// What `syscalls` prints: every core.
    Syscalls,
    /// What `ps` prints.
    Processes,
}

impl View {
    /// Every view.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code, reason = "only the control test lists them"))]
    pub const ALL: [Self; 5] = [Self::Cores, Self::Mem, Self::Msg, Self::Syscalls, Self::Processes];

    /// Its file name under `/proc/reef`.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code, reason = "only the control test names them"))]
    pub fn name(self) -> &'static str {
        match self {
            Self::Cores => "cores",
            Self::Mem => "mem",
            Self::Msg => "msg",
            Self::Syscalls => "syscalls",
            Self::Processes => "processes",
        }
    }
}

/// Writes the `/proc/reef` file of `view` into `out` (registered with the file service, which
/// sits below control: `fs::proc::register_views`).
pub fn write_reef_view(view: vfs::ReefView, out: &mut dyn Write) {
    let view = match view {
        vfs::ReefView::Cores => View::Cores,
        vfs::ReefView::Mem => View::Mem,
        vfs::ReefView::Msg => View::Msg,
        vfs::ReefView::Syscalls => View::Syscalls,
        // `files`, `devices` and `net` are the file service's own; it never asks for them.
        vfs::ReefView::Processes | vfs::ReefView::Files | vfs::ReefView::Devices | vfs::ReefView::Net => {
            View::Processes
        }
    };
    self::view(view, out);
}

/// Writes `view` into `out`; stops early only if `out` refuses text.
pub fn view(view: View, out: &mut dyn Write) {
    let _ = match view {
        View::Cores => cores(out),
        View::Mem => mem(out),
        View::Msg => message_stats(out),
        View::Syscalls => (0..shared::get().listed_kcbs().len()).try_for_each(|core| core_syscalls(core, out)),
        View::Processes => ps(out),
    };
}

fn cores(out: &mut dyn Write) -> fmt::Result {
    let region = shared::get();
    let tsc_hz = region.header.facts.tsc_hz.max(1);
    writeln!(out, "core  apic  state         role  image    partition                      uptime")?;
    for kcb in region.listed_kcbs() {
        let state = kcb.state();
        let started = kcb.started_tsc.load(Ordering::Relaxed);
        let uptime_ms = if started != 0 && state != CoreState::Offline {
            cpu::read_tsc().saturating_sub(started) * 1000 / tsc_hz
        } else {
            0
        };
        let partition = kcb.partition();
        let (image, image_length) = kcb.image_name();
        writeln!(
            out,
            "{:<5} {:<5} {:<13} {:<5} {:<8} {:#011x}-{:#011x} {:>5} MiB {:>7}.{:03} s",
            kcb.core_id.load(Ordering::Relaxed),
            kcb.apic_id.load(Ordering::Relaxed),
            state.name(),
            Role::name(kcb.role.load(Ordering::Relaxed)),
            ::core::str::from_utf8(&image[..image_length]).unwrap_or("?"),
            partition.start,
            partition.end,
            (partition.end - partition.start) >> 20,
            uptime_ms / 1000,
            uptime_ms % 1000,
        )?;
        let thread = kcb.application_thread.load(Ordering::Acquire);
        if thread != 0 {
            writeln!(out, "      runs thread {} of process {}", thread as u32, thread >> 32)?;
        }
        let syspages = kcb.syspages.load(Ordering::Acquire);
        if syspages != 0 {
            writeln!(out, "      serves {syspages} syspages")?;
        }
        if kcb.core_id.load(Ordering::Relaxed) as usize == crate::fs::service::SERVICE_CORE {
            writeln!(out, "      serves the files and the console")?;
        }
        if state != CoreState::Running && kcb.kept.chain.load(Ordering::Acquire) != 0 {
            writeln!(
                out,
                "      keeps its processes in its KCB until it starts (core start {})",
                kcb.core_id.load(Ordering::Relaxed)
            )?;
        }
        let id = kcb.core_id.load(Ordering::Relaxed) as usize;
        let processor = region.header.osnodes[id].load(Ordering::Acquire);
        if let Some(host) = kcb.parking.host() {
            writeln!(
                out,
                "      parked on core {host} ({} switches to it); its processor halts",
                kcb.parking.resumes.load(Ordering::Relaxed)
            )?;
        } else if state == CoreState::Running && processor != kcb.apic_id.load(Ordering::Relaxed) {
            writeln!(out, "      runs on the processor of APIC id {processor} (unparked there)")?;
        }
        if kcb.parking.can_host.load(Ordering::Relaxed) != 0 && state == CoreState::Running {
            let guests: Vec<usize> = crate::core::park::guests_of(id).collect();
            writeln!(out, "      can host parked cores; hosts {guests:?}")?;
        }
        if state == CoreState::Faulted {
            writeln!(
                out,
                "      fault: vector {} rip={:#x} error={:#x} cr2={:#x}",
                kcb.fault.vector.load(Ordering::Relaxed),
                kcb.fault.instruction_pointer.load(Ordering::Relaxed),
                kcb.fault.error_code.load(Ordering::Relaxed),
                kcb.fault.fault_address.load(Ordering::Relaxed),
            )?;
        }
    }
    Ok(())
}

/// A comma-separated list of cores (`0,1,2`), as a bit per core.
#[cfg(feature = "bench")]
fn parse_core_list(word: &str) -> Result<u64, CommandError> {
    word.split(',').try_fold(0u64, |mask, core| Ok(mask | 1 << parse_core(core)?))
}

fn mem(out: &mut dyn Write) -> fmt::Result {
    let region = shared::get();
    let facts = &region.header.facts;
    let slots = &region.header.image_slots;
    let loaded = slots.iter().filter(|slot| slot.checksum.load(Ordering::Acquire) != 0).count();
    let stored: u64 = slots.iter().map(|slot| slot.span.load(Ordering::Relaxed)).sum();
    writeln!(
        out,
        "images   {loaded} kernel images loaded from files, {} KiB of the {} KiB image store",
        stored >> 10,
        (facts.shared.end - facts.shared.start - crate::core::shared::IMAGE_STORE_OFFSET) >> 10
    )?;
    writeln!(
        out,
        "shared   {:#011x}-{:#011x} {:>5} MiB  (KCBs, console lock, channel windows)",
        facts.shared.start,
        facts.shared.end,
        (facts.shared.end - facts.shared.start) >> 20
    )?;
    let (free, total) = crate::mm::frames::counts();
    let (heap_used, heap_free) = crate::mm::heap::usage();
    for kcb in region.listed_kcbs() {
        let core = kcb.core_id.load(Ordering::Relaxed);
        let partition = kcb.partition();
        let reserved = kcb.reserved_end.load(Ordering::Relaxed).saturating_sub(partition.start);
        write!(
            out,
            "core {:<3} {:#011x}-{:#011x} {:>5} MiB  private  {:<8} instance image+tables {} KiB",
            core,
            partition.start,
            partition.end,
            (partition.end - partition.start) >> 20,
            kcb.state().name(),
            reserved >> 10,
        )?;
        if core == shared::this_core() {
            let (file_pages, mappings) = crate::fs::mapped::counts();
            writeln!(
                out,
                ", free frames {free}/{total}, heap {heap_used} B used {heap_free} B free, \
                 file pages shared {file_pages} ({mappings} mappings)"
            )?;
        } else {
            writeln!(out)?;
        }
    }
    Ok(())
}

/// A core number, or an error that says where to find one.
pub fn parse_core(text: &str) -> Result<usize, CommandError> {
    text.parse().map_err(|_| CommandError::Failed(alloc::format!("`{text}` is not a core number: see `cores`")))
}

fn start(arguments: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
    const USAGE: &str = "start <core> [from <core>]";
    let region = shared::get();
    match arguments {
        [target] => {
            let target = parse_core(target)?;
            boot_driver::start_core(target).map_err(|e| CommandError::Failed(alloc::format!("core {target}: {e}")))?;
            writeln!(out, "core {target} started")?;
            Ok(())
        }
        [target, "from", helper] => {
            let (target, helper) = (parse_core(target)?, parse_core(helper)?);
            if helper >= region.listed_kcbs().len() || region.kcb(helper).state() != CoreState::Running {
                return Err(CommandError::Failed(alloc::format!("core {helper} is not running: pick a running core")));
            }
            // An inter-core call: core `helper` runs its own boot driver.
            crate::msg::icc::call(helper, abi::message::handler::START_CORE, [target as u64, 0, 0, 0, 0], 2000)
                .map_err(|e| {
                    CommandError::Failed(alloc::format!("core {helper} could not start core {target}: {e}"))
                })?;
            writeln!(out, "core {target} started by core {helper}")?;
            Ok(())
        }
        _ => Err(CommandError::Usage(USAGE)),
    }
}

/// Most pings one command takes (each keeps a sample: 800 KB of the 16 MiB kernel heap).
const MAX_PINGS: u64 = 100_000;

/// A number of `what` from `least` to `most`, or an error that says so.
fn parse_count(text: &str, what: &str, least: u64, most: u64) -> Result<u64, CommandError> {
    text.parse().ok().filter(|n| (least..=most).contains(n)).ok_or_else(|| {
        CommandError::Failed(alloc::format!(
            "`{text}` is not a number of {what}: give {least} to {most} (every sample is kept in the kernel heap)"
        ))
    })
}

fn message_stats(out: &mut dyn Write) -> fmt::Result {
    let region = shared::get();
    writeln!(
        out,
        "core  mode    sent        received    dropped  (kind/bad/chunk/large)  lost    refused  timeouts  ipis sent  ipis taken  empty polls"
    )?;
    for (core, kcb) in region.listed_kcbs().iter().enumerate().take(crate::msg::MESSAGING_CORES) {
        let c = &kcb.messages;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let reasons = alloc::format!(
            "({}/{}/{}/{})",
            l(&c.dropped_unknown_kind),
            l(&c.dropped_malformed),
            l(&c.dropped_chunk),
            l(&c.dropped_too_large)
        );
        writeln!(
            out,
            "{core:<5} {:<7} {:<11} {:<11} {:<8} {reasons:<22} {:<7} {:<8} {:<9} {:>9} {:>11} {:>12}",
            crate::msg::queue_mode(core).name(),
            l(&c.sent),
            l(&c.received),
            l(&c.dropped),
            l(&c.lost),
            l(&c.send_refused),
            l(&c.send_timeouts),
            l(&c.ipis_sent),
            l(&c.ipis_taken),
            l(&c.empty_polls),
        )?;
    }
    Ok(())
}

/// `msg`'s usage: `bench` and `stress` only where the image has them.
#[cfg(feature = "bench")]
const MSG_USAGE: &str = "msg stats | msg ping <core> [n] | msg mode <core> <poll|ipi|hybrid|mwait> [spin ns] | \
                         msg bench [core] [n] | msg stress [lines] [cores, e.g. 0,1,2]";
#[cfg(not(feature = "bench"))]
const MSG_USAGE: &str = "msg stats | msg ping <core> [n] | msg mode <core> <poll|ipi|hybrid|mwait> [spin ns] \
                         (msg bench and msg stress: images built with the bench feature, `cargo xtask bench`)";

fn msg(arguments: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
    const USAGE: &str = MSG_USAGE;
    match arguments {
        ["stats"] => Ok(message_stats(out)?),
        ["ping", target, rest @ ..] => {
            let target = parse_core(target)?;
            let count = match rest {
                [] => 10,
                [n] => parse_count(n, "pings", 1, MAX_PINGS)? as usize,
                _ => return Err(CommandError::Usage(USAGE)),
            };
            let mut samples =
                crate::msg::ping(target, count).map_err(|e| CommandError::Failed(alloc::format!("ping: {e}")))?;
            let s = crate::msg::summarize(&mut samples);
            let ns = crate::time::cycles_to_ns;
            writeln!(
                out,
                "{count} pings to core {target} ({}): round trip median {} ns, p5 {} ns, p95 {} ns, min {} ns",
                crate::msg::queue_mode(target).name(),
                ns(s.median as u64),
                ns(s.p5),
                ns(s.p95),
                ns(s.min)
            )?;
            Ok(())
        }
        ["mode", target, mode, rest @ ..] => {
            let target = parse_core(target)?;
            let spin_ns: Option<u64> = match rest {
                [] => None,
                [ns] => Some(ns.parse().ok().filter(|&ns| ns <= 1_000_000_000).ok_or_else(|| {
                    CommandError::Failed(alloc::format!(
                        "`{ns}` is not a spin time: give nanoseconds up to 1000000000 (1 s), e.g. 20000"
                    ))
                })?),
                _ => return Err(CommandError::Usage(USAGE)),
            };
            if target >= crate::msg::messaging_cores() {
                return Err(CommandError::Failed(alloc::format!("core {target} has no channels: see `cores`")));
            }
            let mode = crate::msg::NotifyMode::parse(mode).ok_or_else(|| {
                CommandError::Failed(alloc::format!(
                    "`{mode}` is not a notification mode: use poll, ipi, hybrid or mwait"
                ))
            })?;
            if mode == crate::msg::NotifyMode::Mwait && !shared::facts().has_mwait {
                writeln!(out, "note: this CPU offers no MONITOR/MWAIT; core {target} will use hybrid instead")?;
            }
            let spin_cycles = spin_ns.map_or(0, |ns| crate::time::ns_to_cycles(ns).max(1));
            crate::msg::configure_notification(target, mode, spin_cycles)
                .map_err(|e| CommandError::Failed(alloc::format!("core {target} kept its mode: {e}")))?;
            let spin = spin_ns.unwrap_or_else(|| {
                crate::time::cycles_to_ns(crate::msg::area().cores[target].notify.spin_cycles.load(Ordering::Relaxed))
            });
            writeln!(out, "core {target} now receives with {} (hybrid polls {spin} ns before sleeping)", mode.name())?;
            Ok(())
        }
        #[cfg(feature = "bench")]
        ["bench", rest @ ..] => {
            let (target, iterations) = match rest {
                [] => (1, 2000),
                [t] => (parse_core(t)?, 2000),
                [t, n] => {
                    let (least, most) = (crate::msg::bench::MIN_ITERATIONS, crate::msg::bench::MAX_ITERATIONS);
                    (parse_core(t)?, parse_count(n, "iterations", least, most)?)
                }
                _ => return Err(CommandError::Usage(USAGE)),
            };
            crate::msg::bench::run(target, iterations, out).map_err(|e| CommandError::Failed(alloc::format!("{e}")))
        }
        #[cfg(feature = "bench")]
        ["stress", rest @ ..] => {
            let (lines, participants) = match rest {
                [] => (100_000, u64::MAX),
                [n] => (parse_count(n, "lines", 1000, 10_000_000)?, u64::MAX),
                [n, cores] => (parse_count(n, "lines", 1000, 10_000_000)?, parse_core_list(cores)?),
                _ => return Err(CommandError::Usage(USAGE)),
            };
            let detail = crate::msg::stress::run_stress(lines, participants).map_err(CommandError::Failed)?;
            writeln!(out, "stress: {detail}")?;
            Ok(())
        }
        #[cfg(not(feature = "bench"))]
        [name @ ("bench" | "stress"), ..] => Err(CommandError::Failed(alloc::format!(
            "msg {name}: this kernel image was built without the bench feature; use `cargo xtask bench msg` \
             (or `cargo xtask test`), whose images have it"
        ))),
        _ => Err(CommandError::Usage(USAGE)),
    }
}

fn ps(out: &mut dyn Write) -> fmt::Result {
    let region = shared::get();
    writeln!(out, "core  processes  threads  pids  stacks  frames  created  killed  leaked frames")?;
    for kcb in region.listed_kcbs() {
        let p = &kcb.processes;
        let small = |a: &AtomicU32| a.load(Ordering::Relaxed);
        let large = |a: &AtomicU64| a.load(Ordering::Relaxed);
        writeln!(
            out,
            "{:<5} {:<10} {:<8} {:<5} {:<7} {:<7} {:<8} {:<7} {}",
            kcb.core_id.load(Ordering::Relaxed),
            small(&p.live),
            small(&p.threads),
            small(&p.pids),
            small(&p.stacks),
            large(&p.frames),
            large(&p.created),
            large(&p.killed),
            large(&p.frames_unaccounted),
        )?;
    }
    let (running, blocked, switches) = crate::sched::counts();
    writeln!(
        out,
        "core {}: {running} threads ready or running, {blocked} blocked, {switches} switches",
        shared::this_core()
    )?;
    for process in crate::proc::all() {
        let state = process.state.lock();
        writeln!(
            out,
            "  pid {} ({}): {} threads, {} frames",
            process.pid,
            state.name,
            state.threads.len(),
            state.memory.frames()
        )?;
    }
    Ok(())
}

fn syscalls(arguments: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
    let region = shared::get();
    let cores: Vec<usize> = match arguments {
        [] => (0..region.listed_kcbs().len()).collect(),
        [core] => alloc::vec![parse_core(core)?],
        _ => return Err(CommandError::Usage("syscalls [core]")),
    };
    for core in cores {
        if core >= region.listed_kcbs().len() {
            return Err(CommandError::Failed(alloc::format!("no core {core}: see `cores`")));
        }
        core_syscalls(core, out)?;
    }
    Ok(())
}

/// The `syscalls` lines of one listed core.
fn core_syscalls(core: usize, out: &mut dyn Write) -> fmt::Result {
    let Some(kcb) = shared::get().listed_kcbs().get(core) else { return Ok(()) };
    let c = &kcb.syscalls;
    writeln!(
        out,
        "core {core}: {} system calls, {} Reef calls, {} unimplemented (ENOSYS)",
        c.total.load(Ordering::Relaxed),
        c.reef.load(Ordering::Relaxed),
        c.unimplemented.load(Ordering::Relaxed)
    )?;
    let (home, syspage) = (c.sent_home.load(Ordering::Relaxed), c.sent_by_syspage.load(Ordering::Relaxed));
    if home + syspage > 0 {
        writeln!(out, "  as an application core: {home} calls sent to the home by ICC, {syspage} through a syspage")?;
    }
    let served = c.syspage_served_here.load(Ordering::Relaxed);
    let handed = c.syspage_handed_home.load(Ordering::Relaxed);
    let dropped = c.syspage_results_dropped.load(Ordering::Relaxed);
    if served + handed + dropped > 0 {
        writeln!(
            out,
            "  as a kernel core: {served} syspage entries served here, {handed} handed to their home, {dropped} results dropped (entry rewritten or unregistered)"
        )?;
    }
    // Kept by the instance itself: only the core this runs on can say.
    if core == shared::this_core() as usize {
        let local = crate::fs::local::answered();
        writeln!(out, "  {local} lookups answered here from the initramfs, without a message to the file service")?;
    }
    let mut line = String::new();
    for (number, count) in c.by_number.iter().enumerate() {
        let count = count.load(Ordering::Relaxed);
        if count == 0 {
            continue;
        }
        let missing = c.unimplemented_by_number[number].load(Ordering::Relaxed);
        let entry =
            if missing > 0 { alloc::format!(" {number}:{count}(ENOSYS)") } else { alloc::format!(" {number}:{count}") };
        if line.len() + entry.len() > 96 {
            writeln!(out, "  {}", line.trim_start())?;
            line.clear();
        }
        line.push_str(&entry);
    }
    if !line.is_empty() {
        writeln!(out, "  {}", line.trim_start())?;
    }
    Ok(())
}

fn poweroff(_: &[&str], _: &mut dyn Write) -> Result<(), CommandError> {
    crate::power::end_machine(abi::message::ShutdownAction::PowerOff)
}
