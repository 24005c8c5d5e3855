//! The QEMU integration runs of `cargo xtask test`, one file per area, in the suite's order.

mod bash_suite;
mod chaos;
mod control;
mod cores;
pub(crate) mod cpython;
mod devices;
mod dynamic;
mod files;
mod foreign_crates;
mod kernel;
mod malformed_frames;
pub(crate) mod network;
mod processes;
mod roles;
mod unix_files;
mod unix_semantics;
mod user_shell;
mod users;

use crate::qemu::{self, Accel, Machine};
use crate::test::runner::Integration;
use std::path::Path;
use std::time::Duration;

/// Runs whose inputs are prepared meanwhile (in a thread): listed when the runs before them
/// are done, and waiting for the preparation then if it is not finished.
pub(crate) type Deferred = Box<dyn FnOnce() -> Vec<Integration>>;

/// The suite's machine of `cores` cores whose kernel command line is `args`.
fn machine_of(accel: Accel, initrd: &Path) -> impl Fn(usize, &str) -> Machine + Clone + 'static {
    let initrd = initrd.to_path_buf();
    move |cores: usize, args: &str| {
        let mut m = Machine::new(cores);
        m.accel = accel;
        m.kernel_args = args.to_string();
        m.timeout = Duration::from_secs(60);
        m.watchdog = Some(qemu::TEST_WATCHDOG);
        m.initrd = Some(initrd.clone());
        m
    }
}

/// Every run, in the order the suite runs them: those listed now, then the deferred ones.
pub(crate) fn integrations(accel: Accel, initrd: &Path) -> (Vec<Integration>, Vec<Deferred>) {
    let mut list = Vec::new();
    let machine = machine_of(accel, initrd);
    kernel::integrations(&mut list, &machine, accel);
    processes::integrations(&mut list, &machine);
    files::integrations(&mut list, &machine);
    devices::integrations(&mut list, &machine);
    dynamic::integrations(&mut list, &machine);
    user_shell::integrations(&mut list, &machine);
    control::integrations(&mut list, &machine);
    roles::integrations(&mut list, &machine);
    cores::integrations(&mut list, &machine);
    chaos::integrations(&mut list, &machine);
    unix_semantics::integrations(&mut list, &machine);
    unix_files::integrations(&mut list, &machine);
    bash_suite::integrations(&mut list, &machine);
    users::integrations(&mut list, &machine);
    let mut deferred = cpython::deferred(machine_of(accel, initrd));
    deferred.extend(foreign_crates::integrations(machine_of(accel, initrd)));
    deferred.extend(network::deferred(machine_of(accel, initrd)));
    if is_selected(malformed_frames::NAME) {
        deferred.push(malformed_frames::deferred(machine_of(accel, initrd)));
    }
    (list, deferred)
}

/// Whether a run named `name` is selected by `cargo xtask test`'s `--only`, read from the
/// command line before the runs are listed: suites whose inputs are costly to prepare (the
/// foreign suites' builds and reference runs) prepare them only when one of their runs is.
fn is_selected(name: &str) -> bool {
    let arguments: Vec<String> = std::env::args().collect();
    let only = arguments.iter().position(|a| a == "--only").and_then(|at| arguments.get(at + 1));
    only.is_none_or(|only| name.contains(only.as_str()))
}

/// A run that fails at once, after a boot that costs seconds, with why its suite could not be
/// prepared (a fetch or a build that failed): the failure is reported as that run's.
fn unprepared(name: String, why: &str, machine: &dyn Fn(usize, &str) -> Machine) -> Integration {
    let why = format!("the suite could not be prepared: {why}");
    Integration {
        name,
        machine: machine(1, &exec("true")),
        expected_status: 0,
        check: Box::new(move |_| Err(why.clone())),
    }
}

/// `exec="<line>"` for the kernel command line: the user shell (`sh -c`) runs the line and the
/// machine powers off with its status. The lines are this file's own: one that the kernel
/// command line cannot carry is a mistake here, so it panics.
fn exec(line: &str) -> String {
    qemu::exec_argument(line).unwrap_or_else(|why| panic!("{why}"))
}

/// One shell line of `commands`, each ended by `;`, or by nothing after a `&` (`a &; b` is
/// a syntax error in sh).
fn shell_line(commands: &[impl AsRef<str>]) -> String {
    let mut line = String::new();
    for command in commands {
        if !line.is_empty() {
            line.push_str(if line.ends_with('&') { " " } else { "; " });
        }
        line.push_str(command.as_ref());
    }
    line
}
