//! The cases, in the order they run, and what each is given: its own directory, where it runs.

mod attributes;
mod descriptors;
mod devices;
mod directories;
mod events;
mod files;
mod inet;
mod links;
mod paths;
mod pipes;
mod readonly;
mod scratch;
mod sockets;
mod users;

pub use descriptors::{check_descriptors, CHECK_CLOSED, CHECK_OPEN};

use crate::expect::{Outcome, Step};
use crate::sys;
use std::fs::{self, File};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

/// One case: `TEST fs-<name> ok|fail <detail>`.
pub struct Case {
    pub name: &'static str,
    pub run: fn(&Context) -> Outcome,
}

/// What a case runs with.
pub struct Context<'a> {
    /// This run's scratch directory (`<base>/fstest-<pid>`), absolute; `scratch` creates it.
    pub scratch: &'a Path,
    /// The case's name, which is also its directory's name under `scratch`.
    pub name: &'static str,
    /// Whether this is Reef (`reef_core` answered), for the cases only Reef can check.
    pub reef: bool,
    /// This program, for the cases that `execve` it again.
    pub program: &'a Path,
}

impl Context<'_> {
    /// The case's own empty directory, `<scratch>/<name>`, created now.
    pub fn directory(&self) -> Result<PathBuf, String> {
        let directory = self.scratch.join(self.name);
        fs::create_dir(&directory).step(format_args!("creating the case directory {}", directory.display()))?;
        Ok(directory)
    }
}

/// Every case in order: the scratch directory first, `--fill`'s `enospc` when asked for, its
/// removal last.
pub fn all(fill: bool) -> Vec<Case> {
    let mut cases = vec![Case { name: "scratch", run: scratch::create }];
    cases.extend(files::CASES);
    cases.extend(directories::CASES);
    cases.extend(links::CASES);
    cases.extend(paths::CASES);
    cases.extend(attributes::CASES);
    cases.extend(descriptors::CASES);
    cases.extend(pipes::CASES);
    cases.extend(events::CASES);
    cases.extend(sockets::CASES);
    cases.extend(inet::CASES);
    cases.extend(devices::CASES);
    cases.extend(readonly::CASES);
    cases.extend(users::CASES);
    if fill {
        cases.push(Case { name: "enospc", run: scratch::fill });
    }
    cases.push(Case { name: "cleanup", run: scratch::remove });
    cases
}

/// The working directory when made, restored when dropped (also when a case fails or panics
/// half-way), so a case that moves it leaves the next one where it found it.
struct WorkingDirectory(File);

impl WorkingDirectory {
    fn remember() -> Result<Self, String> {
        File::open(".").map(Self).step("opening the working directory")
    }
}

impl Drop for WorkingDirectory {
    fn drop(&mut self) {
        // Nothing more can be done if this fails; the next case's own checks will show it.
        let _ = sys::fchdir(self.0.as_fd());
    }
}

/// Waits for child `pid` (`wait4`), which must exit with status 0.
fn wait_for_success(pid: rt::Pid, child: &str) -> Result<(), String> {
    let status = rt::wait(pid).step(format_args!("waiting for {child}"))?;
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(()),
        (Some(sys::CHILD_PANICKED), _) => Err(format!("{child} panicked")),
        (Some(code), _) => Err(format!("{child}: expected exit status 0, got {code}")),
        (None, Some(signal)) => Err(format!("{child}: expected exit status 0, got killed by signal {signal}")),
        (None, None) => Err(format!("{child}: expected exit status 0, got {status}")),
    }
}
