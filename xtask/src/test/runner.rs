//! One QEMU integration run: its machine, the status it must end with, and its verdict.

use crate::qemu::{self, Machine};
use std::path::Path;
use std::time::Duration;

/// What a run must have printed; the error says what was missing.
pub(crate) type SerialCheck = Box<dyn Fn(&str) -> Result<(), String>>;

/// `expected_status` of a run whose guest may exit with any status (through isa-debug-exit).
pub(crate) const ANY_STATUS: u32 = u32::MAX;

/// `expected_status` of a run that must hang: the watchdog ends it, well before its timeout,
/// and its check reads the kernel's dump.
pub(crate) const STALLS: u32 = u32::MAX - 1;

/// One QEMU integration run: a machine, what the guest must exit with, and what it must print.
pub(crate) struct Integration {
    pub(crate) name: String,
    pub(crate) machine: Machine,
    pub(crate) expected_status: u32,
    pub(crate) check: SerialCheck,
}

pub(crate) fn run_integration(test: &Integration, kernel: &Path) -> Result<Duration, String> {
    let (outcome, _) = qemu::boot(&test.machine, kernel, None)?;
    let verdict = if test.expected_status == STALLS {
        match outcome.stalled {
            Some(_) if outcome.elapsed < test.machine.timeout / 2 => (test.check)(&outcome.serial),
            Some(_) => Err(format!("the watchdog ended the run only after {:?}", outcome.elapsed)),
            None => Err(format!("expected the watchdog to end the run; timed out: {}", outcome.timed_out)),
        }
    } else if let Some(quiet) = outcome.stalled {
        Err(format!("watchdog: no output for {} s (the kernel's dump, if it came, is in the log)", quiet.as_secs()))
    } else if outcome.timed_out {
        Err(format!("timed out after {:?}", test.machine.timeout))
    } else if outcome.guest_status.is_none()
        || (test.expected_status != ANY_STATUS && outcome.guest_status != Some(test.expected_status))
    {
        Err(format!("guest exit status {:?}, expected {}", outcome.guest_status, test.expected_status))
    } else {
        (test.check)(&outcome.serial)
    };
    verdict
        .map(|()| outcome.elapsed)
        .map_err(|why| format!("{why}\n----- serial log -----\n{}----------------------", outcome.serial))
}
