//! The benchmarks: each takes its samples, in TSC cycles, one per timed run.

use crate::options::{Mechanism, MAX_BATCH};
use crate::uring::Nops;
use rt::syspage::Syspage;
use rt::tsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

/// `getppid`'s number.
const GETPPID: u64 = libc::SYS_getppid as u64;

/// One way to make `getppid` calls, one at a time or in batches.
pub enum Caller {
    /// The bare `syscall` instruction.
    Trap,
    /// The thread's syspage; `expected` is what `getppid` gave by trap, which every value
    /// through the page must equal.
    Syspage { syspage: Syspage, expected: i64 },
    /// io_uring `NOP`s (no `getppid` there: a NOP is io_uring's call that does nothing).
    Uring(Box<Nops>),
}

/// `getppid` by trap.
fn trap_getppid() -> i64 {
    // SAFETY: getppid takes no arguments and changes nothing.
    unsafe { rt::raw::syscall(GETPPID, [0; 6]) }.0
}

impl Caller {
    /// A caller of `mechanism` for the calling thread: registers its syspage with `kc`, or
    /// sets up its io_uring.
    pub fn new(mechanism: Mechanism, kc: Option<usize>, sqpoll_cpu: Option<u32>) -> Result<Caller, String> {
        Ok(match mechanism {
            Mechanism::Trap => Caller::Trap,
            Mechanism::Syspage => {
                let kc = kc.ok_or("no --kc for the syspage")?;
                let syspage =
                    Syspage::register(kc).map_err(|error| format!("registering a syspage with core {kc}: {error}"))?;
                Caller::Syspage { syspage, expected: trap_getppid() }
            }
            Mechanism::Uring => {
                Caller::Uring(Box::new(Nops::new(false, None).map_err(|error| format!("io_uring_setup: {error}"))?))
            }
            Mechanism::UringSqpoll => Caller::Uring(Box::new(
                Nops::new(true, sqpoll_cpu).map_err(|error| format!("io_uring_setup with SQPOLL: {error}"))?,
            )),
        })
    }

    /// One blocking call.
    #[inline]
    pub fn one(&mut self) -> Result<(), String> {
        match self {
            Caller::Trap => {
                std::hint::black_box(trap_getppid());
                Ok(())
            }
            Caller::Syspage { syspage, expected } => {
                let value = syspage.call(GETPPID, [0; 6]).map_err(|error| format!("syspage: {error}"))?;
                check(value, *expected)
            }
            Caller::Uring(nops) => nops.batch(1),
        }
    }

    /// `size` calls posted together and waited for together (by trap: one after the other).
    #[inline]
    pub fn batch(&mut self, size: usize) -> Result<(), String> {
        match self {
            Caller::Trap => {
                for _ in 0..size {
                    std::hint::black_box(trap_getppid());
                }
                Ok(())
            }
            Caller::Syspage { syspage, expected } => {
                let mut indices = [0usize; MAX_BATCH];
                for index in &mut indices[..size] {
                    *index = syspage.add(GETPPID, [0; 6]).map_err(|error| format!("syspage add: {error}"))?;
                }
                syspage.wait_all().map_err(|error| format!("syspage wait: {error}"))?;
                for &index in &indices[..size] {
                    check(syspage.retval(index).ok_or("a waited-for entry has no value")?, *expected)?;
                }
                Ok(())
            }
            Caller::Uring(nops) => nops.batch(size),
        }
    }

    /// How many times the syspage's waits kicked the kernel core.
    pub fn nr_kicks(&self) -> u64 {
        match self {
            Caller::Syspage { syspage, .. } => syspage.nr_kicks(),
            _ => 0,
        }
    }
}

fn check(value: i64, expected: i64) -> Result<(), String> {
    if value == expected {
        Ok(())
    } else {
        Err(format!("getppid through the syspage gave {value}, by trap {expected}"))
    }
}

/// The timed runs of one figure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Runs {
    /// Cycles of each run.
    pub cycles: Vec<u64>,
    /// The TSC when the first run started and when the last ended: how a host lines up runs of
    /// several programs at once.
    pub first_tsc: u64,
    pub last_tsc: u64,
    pub nr_kicks: u64,
}

/// `--start-with`'s file and count, until the first timed figure met the others there.
static START_WITH: Mutex<Option<(String, usize)>> = Mutex::new(None);

/// Holds the first timed figure back until `count` programs given `path` are ready for theirs
/// (their syspages registered, their untimed calls made): programs measured together then time
/// overlapping windows, instead of starting one after the other as a shell starts them.
pub fn start_with(path: &str, count: usize) {
    *START_WITH.lock().unwrap() = Some((path.to_string(), count));
}

/// How long `--start-with` waits for the other programs.
const START_WITH_PATIENCE: Duration = Duration::from_secs(20);

/// Adds this program's byte to `path` and waits until `count` programs did.
fn meet(path: &str, count: usize) -> Result<(), String> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| format!("cannot open it: {error}"))?;
    file.write_all(b".").map_err(|error| format!("cannot write it: {error}"))?;
    let deadline = std::time::Instant::now() + START_WITH_PATIENCE;
    loop {
        let arrived = std::fs::metadata(path).map_err(|error| format!("cannot read it: {error}"))?.len();
        if arrived >= count as u64 {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "{arrived} of {count} programs came in {} s: start them together, with a fresh file",
                START_WITH_PATIENCE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Times `runs` runs of `run`.
fn timed(runs: usize, mut run: impl FnMut() -> Result<(), String>) -> Result<Runs, String> {
    if let Some((path, count)) = START_WITH.lock().unwrap().take() {
        meet(&path, count).map_err(|error| format!("--start-with {path} {count}: {error}"))?;
    }
    let mut cycles = Vec::with_capacity(runs);
    let first_tsc = tsc::read();
    for _ in 0..runs {
        let start = tsc::read();
        run()?;
        cycles.push(tsc::read().wrapping_sub(start));
    }
    Ok(Runs { cycles, first_tsc, last_tsc: tsc::read(), nr_kicks: 0 })
}

/// Memsc table 5.1: `runs` runs of `count` blocking calls, after `min(count, 100)` untimed.
pub fn blocking(caller: &mut Caller, count: usize, runs: usize) -> Result<Runs, String> {
    for _ in 0..count.min(100) {
        caller.one()?;
    }
    let kicks_before = caller.nr_kicks();
    let mut result = timed(runs, || (0..count).try_for_each(|_| caller.one()))?;
    result.nr_kicks = caller.nr_kicks() - kicks_before;
    Ok(result)
}

/// Memsc tables 5.2 and 5.5: `runs` runs of `calls` calls in batches of `size` (the last one
/// smaller when `size` does not divide `calls`), after one untimed batch.
pub fn batched(caller: &mut Caller, calls: usize, size: usize, runs: usize) -> Result<Runs, String> {
    caller.batch(size)?;
    let kicks_before = caller.nr_kicks();
    let mut result = timed(runs, || {
        let mut left = calls;
        while left > 0 {
            let now = left.min(size);
            caller.batch(now)?;
            left -= now;
        }
        Ok(())
    })?;
    result.nr_kicks = caller.nr_kicks() - kicks_before;
    Ok(result)
}

/// NIX table 1: `runs` runs of `threads` threads making `per_thread` blocking calls each by
/// `mechanism` (each thread registers its own syspage). A run is timed from the moment every
/// thread is ready (its syspage registered) to the last one joined.
pub fn threads(
    mechanism: Mechanism,
    kc: Option<usize>,
    threads: usize,
    per_thread: usize,
    runs: usize,
) -> Result<Runs, String> {
    let mut result = Runs::default();
    for run in 0..runs {
        let ready = Arc::new(Barrier::new(threads + 1));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let ready = ready.clone();
                std::thread::spawn(move || -> Result<u64, String> {
                    let caller = Caller::new(mechanism, kc, None);
                    // Everyone passes the barrier, ready or not, so no thread waits forever.
                    ready.wait();
                    let mut caller = caller?;
                    (0..per_thread).try_for_each(|_| caller.one())?;
                    Ok(caller.nr_kicks())
                })
            })
            .collect();
        ready.wait();
        let start = tsc::read();
        let mut failure = None;
        for worker in workers {
            match worker.join() {
                Ok(Ok(kicks)) => result.nr_kicks += kicks,
                Ok(Err(error)) => failure = failure.or(Some(error)),
                Err(_) => failure = failure.or(Some("a thread panicked".to_string())),
            }
        }
        let end = tsc::read();
        if let Some(error) = failure {
            return Err(error);
        }
        if run == 0 {
            result.first_tsc = start;
        }
        result.last_tsc = end;
        result.cycles.push(end.wrapping_sub(start));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_started_with_one_file_wait_for_each_other() {
        let path = std::env::temp_dir().join(format!("syscallbench-start-{}", std::process::id()));
        let path = path.to_str().unwrap().to_string();
        let _ = std::fs::remove_file(&path);
        let other = {
            let path = path.clone();
            std::thread::spawn(move || meet(&path, 2))
        };
        assert_eq!(meet(&path, 2), Ok(()));
        assert_eq!(other.join().unwrap(), Ok(()));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn trap_figures_on_the_host() {
        let mut trap = Caller::new(Mechanism::Trap, None, None).unwrap();
        let runs = blocking(&mut trap, 10, 7).unwrap();
        assert_eq!(runs.cycles.len(), 7);
        assert!(runs.first_tsc <= runs.last_tsc);
        assert_eq!(batched(&mut trap, 100, 8, 3).unwrap().cycles.len(), 3);
        assert_eq!(threads(Mechanism::Trap, None, 4, 50, 2).unwrap().cycles.len(), 2);
    }

    #[test]
    fn the_syspage_is_reef_only() {
        let error = Caller::new(Mechanism::Syspage, Some(2), None).err().unwrap();
        assert!(error.contains("core 2") && error.contains("os error 38"), "{error}");
        let error = threads(Mechanism::Syspage, Some(2), 3, 10, 1).unwrap_err();
        assert!(error.contains("registering"), "no thread waits forever: {error}");
    }
}
