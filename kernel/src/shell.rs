//! The kernel shell on core 0: reads COM1, runs one command per line.

use crate::arch::{cpu, legacy};
use crate::core::boot_driver;
use crate::core::kcb::{CoreState, Role};
use crate::core::shared;
use crate::{print, println};
use ::core::sync::atomic::Ordering;
use alloc::string::String;

/// Why a command failed; the shell prints it and what to do.
#[derive(Debug)]
pub enum CommandError {
    /// The command name is not known.
    Unknown(String),
    /// The arguments are wrong; the text is the usage line.
    Usage(&'static str),
    /// The command ran and failed; the text says why.
    Failed(String),
}

struct Command {
    name: &'static str,
    usage: &'static str,
    help: &'static str,
    run: fn(&[&str]) -> Result<(), CommandError>,
}

const COMMANDS: &[Command] = &[
    Command { name: "help", usage: "help", help: "list the commands", run: help },
    Command {
        name: "cores",
        usage: "cores",
        help: "every core: id, APIC id, state, role, kernel image, partition, uptime",
        run: cores,
    },
    Command {
        name: "mem",
        usage: "mem",
        help: "the shared region and every core's private partition and free frames",
        run: mem,
    },
    Command {
        name: "start",
        usage: "start <core> [from <core>]",
        help: "start an offline core with the boot driver (of core 0, or of another running core)",
        run: start,
    },
    Command {
        name: "msg",
        usage: "msg stats|ping|mode|bench",
        help: "channels: counters; ping <core> [n]; mode <core> <poll|ipi|hybrid|mwait> [spin ns]; bench [core] [n]",
        run: msg,
    },
    Command {
        name: "spawn",
        usage: "spawn [--no-wait] <core> <program> [args]",
        help: "run a program of the initramfs as a process on a core; wait for it and give its status",
        run: spawn,
    },
    Command {
        name: "wait",
        usage: "wait",
        help: "wait for every process started with `spawn --no-wait`, giving each status",
        run: wait_all,
    },
    Command {
        name: "kill",
        usage: "kill <pid>|-<group> [signal]",
        help: "send a signal (default 9, SIGKILL) to a process, or to a process group, on any core",
        run: kill,
    },
    Command { name: "ps", usage: "ps", help: "this instance's processes and every instance's counts", run: ps },
    Command {
        name: "syscalls",
        usage: "syscalls [core]",
        help: "system calls per core by number, and the unimplemented ones (ENOSYS)",
        run: syscalls,
    },
    Command { name: "poweroff", usage: "poweroff", help: "stop every core and exit QEMU", run: poweroff },
];

fn help(_: &[&str]) -> Result<(), CommandError> {
    for command in COMMANDS {
        println!("  {:<28} {}", command.usage, command.help);
    }
    Ok(())
}

fn cores(_: &[&str]) -> Result<(), CommandError> {
    let region = shared::get();
    let tsc_hz = region.header.facts.tsc_hz.max(1);
    println!("core  apic  state         role  image  partition                      uptime");
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
        println!(
            "{:<5} {:<5} {:<13} {:<5} {:<6} {:#011x}-{:#011x} {:>5} MiB {:>7}.{:03} s",
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
        );
        if state == CoreState::Faulted {
            println!(
                "      fault: vector {} rip={:#x} error={:#x} cr2={:#x}",
                kcb.fault.vector.load(Ordering::Relaxed),
                kcb.fault.instruction_pointer.load(Ordering::Relaxed),
                kcb.fault.error_code.load(Ordering::Relaxed),
                kcb.fault.fault_address.load(Ordering::Relaxed),
            );
        }
    }
    Ok(())
}

fn mem(_: &[&str]) -> Result<(), CommandError> {
    let region = shared::get();
    let facts = &region.header.facts;
    println!(
        "shared   {:#011x}-{:#011x} {:>5} MiB  (KCBs, console lock, channel windows)",
        facts.shared.start,
        facts.shared.end,
        (facts.shared.end - facts.shared.start) >> 20
    );
    let (free, total) = crate::mm::frames::counts();
    let (heap_used, heap_free) = crate::mm::heap::usage();
    for kcb in region.listed_kcbs() {
        let core = kcb.core_id.load(Ordering::Relaxed);
        let partition = kcb.partition();
        let reserved = kcb.reserved_end.load(Ordering::Relaxed).saturating_sub(partition.start);
        print!(
            "core {:<3} {:#011x}-{:#011x} {:>5} MiB  private  {:<8} instance image+tables {} KiB",
            core,
            partition.start,
            partition.end,
            (partition.end - partition.start) >> 20,
            kcb.state().name(),
            reserved >> 10,
        );
        if core == shared::this_core() {
            println!(", free frames {free}/{total}, heap {heap_used} B used {heap_free} B free");
        } else {
            println!();
        }
    }
    Ok(())
}

fn parse_core(text: &str) -> Result<usize, CommandError> {
    text.parse().map_err(|_| CommandError::Failed(alloc::format!("`{text}` is not a core number: see `cores`")))
}

fn start(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "start <core> [from <core>]";
    let region = shared::get();
    match arguments {
        [target] => {
            let target = parse_core(target)?;
            boot_driver::start_core(target).map_err(|e| CommandError::Failed(alloc::format!("core {target}: {e}")))?;
            println!("core {target} started");
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
            println!("core {target} started by core {helper}");
            Ok(())
        }
        _ => Err(CommandError::Usage(USAGE)),
    }
}

/// Most pings one command takes (each keeps a sample: 800 KB of the 4 MiB kernel heap).
const MAX_PINGS: u64 = 100_000;

/// A number of `what` from `least` to `most`, or an error that says so.
fn parse_count(text: &str, what: &str, least: u64, most: u64) -> Result<u64, CommandError> {
    text.parse().ok().filter(|n| (least..=most).contains(n)).ok_or_else(|| {
        CommandError::Failed(alloc::format!(
            "`{text}` is not a number of {what}: give {least} to {most} (every sample is kept in the kernel heap)"
        ))
    })
}

fn msg(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "msg stats | msg ping <core> [n] | msg mode <core> <poll|ipi|hybrid|mwait> [spin ns] | \
                         msg bench [core] [n]";
    let region = shared::get();
    match arguments {
        ["stats"] => {
            println!(
                "core  mode    sent        received    dropped  (kind/bad/chunk/large)  lost    refused  timeouts  ipis sent  ipis taken  empty polls"
            );
            for (core, kcb) in region.listed_kcbs().iter().enumerate().take(crate::msg::MESSAGING_CORES) {
                let c = &kcb.messages;
                let l = |a: &::core::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                let reasons = alloc::format!(
                    "({}/{}/{}/{})",
                    l(&c.dropped_unknown_kind),
                    l(&c.dropped_malformed),
                    l(&c.dropped_chunk),
                    l(&c.dropped_too_large)
                );
                println!(
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
                );
            }
            Ok(())
        }
        ["ping", target, rest @ ..] => {
            let target = parse_core(target)?;
            let count = match rest {
                [] => 10,
                [n] => parse_count(n, "pings", 1, MAX_PINGS)? as usize,
                _ => return Err(CommandError::Usage(USAGE)),
            };
            let mut samples =
                crate::msg::ping(target, count).map_err(|e| CommandError::Failed(alloc::format!("ping: {e}")))?;
            let s = crate::msg::bench::summarize(&mut samples);
            let ns = crate::time::cycles_to_ns;
            println!(
                "{count} pings to core {target} ({}): round trip median {} ns, p5 {} ns, p95 {} ns, min {} ns",
                crate::msg::queue_mode(target).name(),
                ns(s.median as u64),
                ns(s.p5),
                ns(s.p95),
                ns(s.min)
            );
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
                println!("note: this CPU offers no MONITOR/MWAIT; core {target} will use hybrid instead");
            }
            let spin_cycles = spin_ns.map_or(0, |ns| crate::time::ns_to_cycles(ns).max(1));
            crate::msg::configure_notification(target, mode, spin_cycles)
                .map_err(|e| CommandError::Failed(alloc::format!("core {target} kept its mode: {e}")))?;
            let spin = spin_ns.unwrap_or_else(|| {
                crate::time::cycles_to_ns(crate::msg::area().cores[target].notify.spin_cycles.load(Ordering::Relaxed))
            });
            println!("core {target} now receives with {} (hybrid polls {spin} ns before sleeping)", mode.name());
            Ok(())
        }
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
            crate::msg::bench::run(target, iterations).map_err(|e| CommandError::Failed(alloc::format!("{e}")))
        }
        _ => Err(CommandError::Usage(USAGE)),
    }
}

/// The environment of programs the shell starts.
const ENVIRONMENT: [&[u8]; 4] = [b"PATH=/bin:/sbin", b"HOME=/", b"TERM=vt100", b"USER=root"];

/// Status of the last `spawn`, which `run_line` returns (so `xtask run -- 'spawn …'` exits
/// with the program's status).
static LAST_STATUS: ::core::sync::atomic::AtomicU32 = ::core::sync::atomic::AtomicU32::new(0);

fn spawn(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "spawn [--no-wait] <core> <program> [args]";
    let (wait, arguments) = match arguments {
        ["--no-wait", rest @ ..] => (false, rest),
        rest => (true, rest),
    };
    let [core, program, ..] = arguments else { return Err(CommandError::Usage(USAGE)) };
    let core = parse_core(core)?;
    let mut argv: alloc::vec::Vec<&[u8]> = alloc::vec![program.as_bytes()];
    argv.extend(arguments[2..].iter().map(|a| a.as_bytes()));
    // The program's own name is its first argument, as a shell gives it.
    let pid = crate::proc::spawn(core, program.as_bytes(), &argv, &ENVIRONMENT, 0).map_err(|error| {
        CommandError::Failed(alloc::format!("{program} on core {core}: {}", crate::proc::errno_text(error)))
    })?;
    if !wait {
        println!("pid {pid} started on core {core}");
        return Ok(());
    }
    reap(crate::proc::WaitFor::Process(pid))
}

/// Waits for the shell's child `which` and reports how it ended.
fn reap(which: crate::proc::WaitFor) -> Result<(), CommandError> {
    let (pid, status) = crate::proc::wait(0, which, 0)
        .map_err(|error| CommandError::Failed(alloc::format!("waiting: {}", crate::proc::errno_text(error))))?
        .ok_or_else(|| CommandError::Failed(String::from("no child ended")))?;
    let core = crate::proc::home_of(pid);
    let code = if status & 0x7f == 0 { (status >> 8) & 0xff } else { 128 + (status & 0x7f) };
    if code != 0 {
        LAST_STATUS.store(code, Ordering::Relaxed);
    }
    if status & 0x7f == 0 {
        println!("pid {pid} on core {core} exited with status {code}");
    } else {
        println!("pid {pid} on core {core} was killed by signal {}", status & 0x7f);
    }
    Ok(())
}

fn kill(arguments: &[&str]) -> Result<(), CommandError> {
    const USAGE: &str = "kill <pid>|-<group> [signal]";
    let (target, signal) = match arguments {
        [target] => (*target, "9"),
        [target, signal] => (*target, *signal),
        _ => return Err(CommandError::Usage(USAGE)),
    };
    let (group, number) = match target.strip_prefix('-') {
        Some(group) => (true, group),
        None => (false, target),
    };
    let id: u32 = number
        .parse()
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| CommandError::Failed(alloc::format!("`{target}` is not a pid or -group: see `ps`")))?;
    let signal: u32 = signal
        .parse()
        .ok()
        .filter(|&s| (1..=64).contains(&s))
        .ok_or_else(|| CommandError::Failed(alloc::format!("`{signal}` is not a signal number: give 1 to 64")))?;
    if group {
        let reached = crate::proc::signal::signal_group(id, signal)
            .map_err(|error| CommandError::Failed(alloc::format!("group {id}: {}", crate::proc::errno_text(error))))?;
        println!("signal {signal} sent to {reached} processes of group {id}");
        return Ok(());
    }
    crate::proc::signal::signal_process(id, signal)
        .map_err(|error| CommandError::Failed(alloc::format!("pid {id}: {}", crate::proc::errno_text(error))))
}

fn wait_all(_: &[&str]) -> Result<(), CommandError> {
    while crate::proc::has_children(0) {
        reap(crate::proc::WaitFor::Any)?;
    }
    Ok(())
}

fn ps(_: &[&str]) -> Result<(), CommandError> {
    let region = shared::get();
    println!("core  processes  threads  pids  stacks  frames  created  killed  leaked frames");
    for kcb in region.listed_kcbs() {
        let p = &kcb.processes;
        let small = |a: &::core::sync::atomic::AtomicU32| a.load(Ordering::Relaxed);
        let large = |a: &::core::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        println!(
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
        );
    }
    let (running, blocked, switches) = crate::sched::counts();
    println!(
        "core {}: {running} threads ready or running, {blocked} blocked, {switches} switches",
        shared::this_core()
    );
    for process in crate::proc::all() {
        let state = process.state.lock();
        println!(
            "  pid {} ({}): {} threads, {} frames",
            process.pid,
            state.name,
            state.threads.len(),
            state.memory.frames()
        );
    }
    Ok(())
}

fn syscalls(arguments: &[&str]) -> Result<(), CommandError> {
    let region = shared::get();
    let cores: alloc::vec::Vec<usize> = match arguments {
        [] => (0..region.listed_kcbs().len()).collect(),
        [core] => alloc::vec![parse_core(core)?],
        _ => return Err(CommandError::Usage("syscalls [core]")),
    };
    for core in cores {
        let Some(kcb) = region.listed_kcbs().get(core) else {
            return Err(CommandError::Failed(alloc::format!("no core {core}: see `cores`")));
        };
        let c = &kcb.syscalls;
        println!(
            "core {core}: {} system calls, {} Reef calls, {} unimplemented (ENOSYS)",
            c.total.load(Ordering::Relaxed),
            c.reef.load(Ordering::Relaxed),
            c.unimplemented.load(Ordering::Relaxed)
        );
        let mut line = String::new();
        for (number, count) in c.by_number.iter().enumerate() {
            let count = count.load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            let missing = c.unimplemented_by_number[number].load(Ordering::Relaxed);
            let entry = if missing > 0 {
                alloc::format!(" {number}:{count}(ENOSYS)")
            } else {
                alloc::format!(" {number}:{count}")
            };
            if line.len() + entry.len() > 96 {
                println!("  {}", line.trim_start());
                line.clear();
            }
            line.push_str(&entry);
        }
        if !line.is_empty() {
            println!("  {}", line.trim_start());
        }
    }
    Ok(())
}

fn poweroff(_: &[&str]) -> Result<(), CommandError> {
    println!("powering off");
    legacy::qemu_exit(0);
    cpu::halt_forever()
}

/// Runs a line of commands separated by `;`; returns the last failing status (0 if none).
pub fn run_line(line: &str) -> u32 {
    let mut status = 0;
    for command in line.split(';') {
        let result = run_command(command);
        if result != 0 {
            status = result;
        }
    }
    status
}

/// Runs one command; returns its exit status (0 success).
fn run_command(line: &str) -> u32 {
    let words: alloc::vec::Vec<&str> = line.split_whitespace().collect();
    let Some((name, arguments)) = words.split_first() else {
        return 0;
    };
    LAST_STATUS.store(0, Ordering::Relaxed);
    let result = match COMMANDS.iter().find(|c| c.name == *name) {
        Some(command) => (command.run)(arguments),
        None => Err(CommandError::Unknown(String::from(*name))),
    };
    match result {
        Ok(()) => LAST_STATUS.load(Ordering::Relaxed),
        Err(CommandError::Unknown(name)) => {
            println!("error: unknown command `{name}`: type `help` for the list");
            127
        }
        Err(CommandError::Usage(usage)) => {
            println!("error: wrong arguments: usage: {usage}");
            2
        }
        Err(CommandError::Failed(why)) => {
            println!("error: {why}");
            1
        }
    }
}

fn read_line(buffer: &mut String) {
    buffer.clear();
    loop {
        let Some(byte) = legacy::com1::read_byte() else {
            // Between keystrokes core 0 is idle: it answers its messages like any idle core,
            // then sleeps until a message, a key (COM1's interrupt) or the next timer tick.
            crate::sched::idle_once();
            continue;
        };
        crate::console::note_input();
        match byte {
            b'\r' | b'\n' => {
                println!();
                return;
            }
            0x08 | 0x7f if buffer.pop().is_some() => print!("\x08 \x08"),
            0x20..=0x7e if buffer.len() < 256 => {
                buffer.push(byte as char);
                print!("{}", byte as char);
            }
            _ => {}
        }
    }
}

/// The shell: runs the tests and the `exec=` command if the command line asks, else reads
/// commands forever.
pub fn main() -> ! {
    let options = shared::facts().options;
    if let Some(tests) = options.test {
        let status = crate::selftest::run(tests.as_str());
        if options.exec.is_none() {
            legacy::qemu_exit(status);
            cpu::halt_forever();
        }
    }
    if let Some(exec) = options.exec {
        let status = run_line(exec.as_str());
        legacy::qemu_exit(status);
        cpu::halt_forever();
    }
    let running = shared::get().listed_kcbs().iter().filter(|k| k.state() == CoreState::Running).count();
    println!("Reef shell on core 0, {running} kernel instances up: type `help` for the commands.");
    let mut line = String::new();
    loop {
        print!("reef> ");
        read_line(&mut line);
        run_line(&line);
    }
}
