//! The kernel shell on core 0: reads COM1, runs one command per line.

use crate::arch::{cpu, legacy};
use crate::control::{self, parse_core, CommandError};
use crate::core::kcb::CoreState;
use crate::core::shared;
use crate::{print, println};
use ::core::fmt::{self, Write};
use ::core::sync::atomic::Ordering;
use alloc::string::String;

/// A shell command: a control command (`control.rs`), or one of the shell's own.
type Command = control::Command;

static HELP: Command = Command { name: "help", usage: "help", help: "list the commands", run: help };

static SPAWN: Command = Command {
    name: "spawn",
    usage: "spawn [--no-wait] <core> <program> [args]",
    help: "run a program of the initramfs as a process on a core; wait for it and give its status",
    run: spawn,
};

static WAIT: Command = Command {
    name: "wait",
    usage: "wait",
    help: "wait for every process started with `spawn --no-wait`, giving each status",
    run: wait_all,
};

static KILL: Command = Command {
    name: "kill",
    usage: "kill <pid>|-<group> [signal]",
    help: "send a signal (default 9, SIGKILL) to a process, or to a process group, on any core",
    run: kill,
};

/// The commands in the order `help` lists them.
static COMMANDS: [&Command; 11] = [
    &HELP,
    &control::CORES,
    &control::MEM,
    &control::START,
    &control::MSG,
    &SPAWN,
    &WAIT,
    &KILL,
    &control::PS,
    &control::SYSCALLS,
    &control::POWEROFF,
];

fn help(_: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
    for command in COMMANDS {
        writeln!(out, "  {:<28} {}", command.usage, command.help)?;
    }
    writeln!(
        out,
        "Processes have them too: /bin/cores, mem, start, msg, syscalls, ps, poweroff, and /bin/on <core> \
         <program> [args]; `spawn 0 /bin/help` lists them."
    )?;
    Ok(())
}

/// The environment of programs the shell starts.
const ENVIRONMENT: [&[u8]; 4] = [b"PATH=/bin:/sbin", b"HOME=/", b"TERM=vt100", b"USER=root"];

/// Status of the last `spawn`, which `run_line` returns (so `xtask run -- 'spawn …'` exits
/// with the program's status).
static LAST_STATUS: ::core::sync::atomic::AtomicU32 = ::core::sync::atomic::AtomicU32::new(0);

fn spawn(arguments: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
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
        writeln!(out, "pid {pid} started on core {core}")?;
        return Ok(());
    }
    reap(crate::proc::WaitFor::Process(pid), out)
}

/// Waits for the shell's child `which` (-1: any) and reports how it ended.
fn reap(which: crate::proc::WaitFor, out: &mut dyn Write) -> Result<(), CommandError> {
    let (pid, status) = crate::proc::wait(0, which, 0)
        .map_err(|error| CommandError::Failed(alloc::format!("waiting: {}", crate::proc::errno_text(error))))?
        .ok_or_else(|| CommandError::Failed(String::from("no child ended")))?;
    let core = crate::proc::home_of(pid);
    let code = if status & 0x7f == 0 { (status >> 8) & 0xff } else { 128 + (status & 0x7f) };
    if code != 0 {
        LAST_STATUS.store(code, Ordering::Relaxed);
    }
    if status & 0x7f == 0 {
        writeln!(out, "pid {pid} on core {core} exited with status {code}")?;
    } else {
        writeln!(out, "pid {pid} on core {core} was killed by signal {}", status & 0x7f)?;
    }
    Ok(())
}

fn kill(arguments: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
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
        let _ = writeln!(out, "signal {signal} sent to {reached} processes of group {id}");
        return Ok(());
    }
    crate::proc::signal::signal_process(id, signal)
        .map_err(|error| CommandError::Failed(alloc::format!("pid {id}: {}", crate::proc::errno_text(error))))
}

fn wait_all(_: &[&str], out: &mut dyn Write) -> Result<(), CommandError> {
    while crate::proc::has_children(0) {
        reap(crate::proc::WaitFor::Any, out)?;
    }
    Ok(())
}

/// The shell's output: whole lines to the console, each under one hold of the console lock
/// (as `println!` writes them, so a line never tears with another core's), as soon as the
/// command ends them; what is left without a newline goes out when the command ends.
struct ConsoleLines {
    pending: String,
}

impl Write for ConsoleLines {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.pending.push_str(text);
        if let Some(last_newline) = self.pending.rfind('\n') {
            let rest = self.pending.split_off(last_newline + 1);
            print!("{}", self.pending);
            self.pending = rest;
        }
        Ok(())
    }
}

impl Drop for ConsoleLines {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            print!("{}", self.pending);
        }
    }
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
    let mut out = ConsoleLines { pending: String::new() };
    let result = match COMMANDS.iter().find(|c| c.name == *name) {
        Some(command) => (command.run)(arguments, &mut out),
        None => Err(CommandError::Unknown(String::from(*name))),
    };
    drop(out);
    match result {
        Ok(()) => LAST_STATUS.load(Ordering::Relaxed),
        Err(error) => {
            println!("{error}");
            error.shell_status()
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
    if !options.kernel_shell {
        user_shell(options.exec.as_ref().map(|line| line.as_str()));
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

/// The user shell: `/sbin/init` (pid 1, on this core) starts busybox `sh` on the console, or
/// runs `line` through `sh -c`; the machine powers off with its exit status when it ends.
/// Returns only when init cannot start (no initramfs): the kernel shell takes over.
fn user_shell(line: Option<&str>) {
    let arguments: alloc::vec::Vec<&[u8]> = match line {
        Some(line) => alloc::vec![b"/sbin/init".as_slice(), b"-c", line.as_bytes()],
        None => alloc::vec![b"/sbin/init".as_slice(), b"--shell"],
    };
    crate::fs::service::take_console_input();
    let pid = match crate::proc::spawn(0, b"/sbin/init", &arguments, &[], 0) {
        Ok(pid) => pid,
        Err(error) => {
            println!(
                "no user shell: /sbin/init did not start ({}); the kernel shell takes over (boot with an initramfs)",
                crate::proc::errno_text(error)
            );
            return;
        }
    };
    let code = match crate::proc::wait(0, crate::proc::WaitFor::Process(pid), 0) {
        Ok(Some((_, status))) if status & 0x7f == 0 => (status >> 8) & 0xff,
        Ok(Some((_, status))) => 128 + (status & 0x7f),
        _ => 1,
    };
    legacy::qemu_exit(code);
    cpu::halt_forever();
}
