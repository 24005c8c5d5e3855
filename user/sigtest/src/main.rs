//! sigtest: signals, process groups and sessions; a `TEST` line per case.
#![doc = include_str!("../README.md")]

mod cases;
mod os;

use cases::Outcome;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

/// One case: its detail, or what went wrong.
type Case = fn() -> Outcome;

/// The cases, in the order they run (`tgkill` starts a thread: the cases after it fork, and
/// it joins its thread first).
const CASES: [(&str, Case); 23] = [
    ("registers", cases::registers),
    ("fpu", cases::fpu),
    ("pending-unblock", cases::pending_until_unblocked),
    ("resethand", cases::reset_handler),
    ("nodefer", cases::nested_blocking),
    ("nanosleep-eintr", cases::nanosleep_interrupted),
    ("wait-restart", cases::wait_restart),
    ("sigchld-handler", cases::child_handler),
    ("sigchld-ignore", cases::child_ignored),
    ("sigterm-default", cases::terminate_default),
    ("sigkill-uncatchable", cases::kill_uncatchable),
    ("sigsuspend", cases::suspend),
    ("pause", cases::pause),
    ("tgkill", cases::thread_kill),
    ("altstack", cases::alternate_stack),
    ("bad-frames", cases::bad_frames),
    ("groups", cases::groups),
    ("kill-group", cases::kill_group),
    ("pdeathsig", cases::parent_death_signal),
    ("kill-errors", kill_errors),
    ("death-statuses", cases::death_statuses),
    ("itimer", cases::real_timer),
    ("sigtimedwait", cases::timed_wait),
];

/// `kill` refuses a signal above 64 and names no process that does not exist.
fn kill_errors() -> Outcome {
    let refused = [
        (os::kill(os::getpid(), 65), Err(libc::EINVAL)),
        (os::kill(0x7fff_fff0, 0), Err(libc::ESRCH)),
        (os::kill(-0x7fff_fff0, 0), Err(libc::ESRCH)),
        (os::kill(os::getpid(), 0), Ok(())),
    ];
    for (index, (got, wanted)) in refused.into_iter().enumerate() {
        if got != wanted {
            return Err(format!("check {index}: {got:?}, not {wanted:?}"));
        }
    }
    Ok("EINVAL ESRCH".into())
}

fn main() -> ExitCode {
    let place = match rt::current_core() {
        Some(core) => format!("core {core}"),
        None => "linux".to_string(),
    };
    let only: Vec<String> = std::env::args().skip(1).collect();
    // A failing case is reported in its line, not by the default panic message.
    panic::set_hook(Box::new(|_| {}));
    let mut failed = 0;
    for (name, case) in CASES {
        if !only.is_empty() && !only.iter().any(|wanted| wanted == name) {
            continue;
        }
        cases::reset();
        let outcome = match panic::catch_unwind(AssertUnwindSafe(case)) {
            Ok(outcome) => outcome,
            Err(_) => Err("panicked".to_string()),
        };
        cases::reset();
        let (verdict, detail) = match outcome {
            Ok(detail) => ("ok", detail),
            Err(problem) => {
                failed += 1;
                ("fail", problem)
            }
        };
        println!("TEST sig-{name} {verdict} {place} {}", detail.replace(['\n', '\r'], " "));
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
