//! `--full-ring`: whole rings of calls that the kernel core hands to the process's home (one
//! byte `write`s into a pipe) mixed with calls it answers itself (`getppid`), posted without
//! waiting, then collected. Each call must run exactly once and in ring order: the pipe then
//! holds each round's bytes once, in the order posted, and every value is right. (A kernel core
//! that took a call still in flight at the home again when its head wrapped round would write
//! a byte twice, or never stop taking.)

use rt::syspage::Syspage;
use std::os::fd::AsRawFd;
use syspage::ENTRIES;

/// Rounds of a full ring each, without `--rounds`.
pub const DEFAULT_ROUNDS: usize = 8;
/// The most `--rounds` takes.
pub const MAX_ROUNDS: usize = 1_000_000;

pub fn run(kernel_core: usize, rounds: usize) -> Result<String, String> {
    let mut syspage =
        Syspage::register(kernel_core).map_err(|error| format!("reef_syspage_register refused: {error}"))?;
    // Closed when they go out of scope.
    let pipe = rt::pipe().map_err(|error| format!("pipe2: {error}"))?;
    let ends = [pipe.0.as_raw_fd(), pipe.1.as_raw_fd()];
    let parent = i64::from(std::os::unix::process::parent_id());
    // One byte per entry, each its own: the pipe's contents say which write ran when.
    let bytes: Vec<u8> = (0..ENTRIES as u8).collect();
    let (mut writes, mut answered_here) = (0usize, 0usize);
    for round in 0..rounds {
        let mut posted = Vec::with_capacity(ENTRIES);
        for slot in 0..ENTRIES {
            // Every third call is one the KC answers itself, the rest go home.
            let call = if (slot + round) % 3 == 0 {
                (libc::SYS_getppid as u64, [0; 6])
            } else {
                (libc::SYS_write as u64, [ends[1] as u64, bytes[slot..].as_ptr() as u64, 1, 0, 0, 0])
            };
            let index = syspage.add(call.0, call.1).map_err(|error| format!("round {round} entry {slot}: {error}"))?;
            posted.push((index, call.0, slot));
        }
        if syspage.add(libc::SYS_getppid as u64, [0; 6]).is_ok() {
            return Err(format!("round {round}: a 65th call fitted in a ring of {ENTRIES}"));
        }
        syspage.wait_all().map_err(|error| format!("round {round}: wait: {error}"))?;
        let mut expected = Vec::new();
        for (index, number, slot) in posted {
            let value = syspage.retval(index).ok_or(format!("round {round}: entry {index} not done after wait_all"))?;
            let right = if number == libc::SYS_write as u64 { 1 } else { parent };
            if value != right {
                return Err(format!("round {round}: entry {index} (call {number}) gave {value}, not {right}"));
            }
            if number == libc::SYS_write as u64 {
                expected.push(bytes[slot]);
                writes += 1;
            } else {
                answered_here += 1;
            }
        }
        // More room than the round wrote: a call run twice shows as a longer read.
        let mut got = vec![0u8; 2 * ENTRIES];
        // SAFETY: `got` is writable for its length; the pipe holds at least one byte.
        let count = unsafe { libc::read(ends[0], got.as_mut_ptr().cast(), got.len()) };
        if count < 0 {
            return Err(format!("round {round}: read: {}", std::io::Error::last_os_error()));
        }
        got.truncate(count as usize);
        if got != expected {
            return Err(format!(
                "round {round}: the pipe holds {got:?}, not the {} bytes written once each {expected:?}",
                expected.len()
            ));
        }
    }
    Ok(format!("rounds={rounds} writes={writes} answered-by-kc={answered_here} each-once-in-order"))
}
