//! The benchmarks: each takes its samples, in TSC cycles, one per timed operation.

use crate::os;
use rt::tsc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Untimed rounds before the timed ones (caches, TLB, branch predictors, the allocator),
/// a tenth of them, at most 100.
fn warmup(iterations: usize) -> usize {
    (iterations / 10).min(100)
}

/// Times `operation` `iterations` times after the warm-up; stops at the first error.
fn sample<E>(iterations: usize, mut operation: impl FnMut() -> Result<(), E>) -> Result<Vec<u64>, E> {
    for _ in 0..warmup(iterations) {
        operation()?;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = tsc::read();
        operation()?;
        samples.push(tsc::read().wrapping_sub(start));
    }
    Ok(samples)
}

/// One `getppid` per sample: the cost of entering and leaving the kernel, plus one TSC read.
pub fn getppid(iterations: usize) -> Result<Vec<u64>, String> {
    sample(iterations, || {
        std::hint::black_box(os::getppid());
        Ok(())
    })
}

/// One `fork`, `execve` of `tiny` in the child, its exit and the parent's `wait4` per sample.
pub fn fork_exec_wait(iterations: usize, tiny: &str) -> Result<Vec<u64>, String> {
    let program = os::Program::new(tiny).map_err(|error| format!("{tiny}: {error}"))?;
    sample(iterations, || match program.fork_exec_wait() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) if status.code() == Some(127) => Err(format!("the child could not execute {tiny} (status 127)")),
        Ok(status) => Err(format!("{tiny} ended with {status}")),
        Err(error) => Err(format!("fork or wait4: {error}")),
    })
}

/// One `std::thread::spawn(|| {}).join()` per sample.
pub fn thread_spawn_join(iterations: usize) -> Result<Vec<u64>, String> {
    sample(iterations, || {
        std::thread::spawn(|| {}).join().map_err(|_| "an empty thread panicked".to_string())?;
        Ok(())
    })
}

/// The futex word: whose turn it is.
const PING_TURN: u32 = 0;
const PONG_TURN: u32 = 1;
const STOP: u32 = 2;

/// A futex word handed back and forth by two threads on `cpu` (pinned there on Linux; on Reef
/// a process's threads run on its home core): one sample per round trip, two context switches.
pub fn futex_pingpong(iterations: usize, cpu: Option<usize>) -> Result<Vec<u64>, String> {
    let word = Arc::new(AtomicU32::new(PING_TURN));
    let pin = move || cpu.map_or(Ok(()), |cpu| rt::pin_current_thread(cpu).map_err(|e| format!("pinning: {e}")));
    let pong = {
        let word = Arc::clone(&word);
        std::thread::spawn(move || -> Result<(), String> {
            pin()?;
            loop {
                // Acquire pairs with the ping side's Release store: what it did before handing
                // the turn over is visible here.
                match word.load(Ordering::Acquire) {
                    STOP => return Ok(()),
                    PONG_TURN => {
                        word.store(PING_TURN, Ordering::Release);
                        os::futex_wake(&word).map_err(|e| format!("FUTEX_WAKE: {e}"))?;
                    }
                    _ => os::futex_wait(&word, PING_TURN).map_err(|e| format!("FUTEX_WAIT: {e}"))?,
                }
            }
        })
    };
    let ping = {
        let word = Arc::clone(&word);
        std::thread::spawn(move || -> Result<Vec<u64>, String> {
            let result = pin().and_then(|()| {
                sample(iterations, || {
                    word.store(PONG_TURN, Ordering::Release);
                    os::futex_wake(&word).map_err(|e| format!("FUTEX_WAKE: {e}"))?;
                    while word.load(Ordering::Acquire) == PONG_TURN {
                        os::futex_wait(&word, PONG_TURN).map_err(|e| format!("FUTEX_WAIT: {e}"))?;
                    }
                    Ok(())
                })
            });
            // However the rounds ended, let the other side go.
            word.store(STOP, Ordering::Release);
            let _ = os::futex_wake(&word);
            result
        })
    };
    let samples = ping.join().map_err(|_| "the ping thread panicked".to_string())?;
    pong.join().map_err(|_| "the pong thread panicked".to_string())??;
    samples
}

/// The anonymous mapping `page_first_touch` writes into: 64 MiB.
pub const MAPPING_BYTES: usize = 64 << 20;
pub const PAGE_SIZE: usize = 4096;
pub const MAPPING_PAGES: usize = MAPPING_BYTES / PAGE_SIZE;

/// The first write to each of the first `pages` pages of a fresh 64 MiB anonymous mapping, one
/// sample per page: the page fault, the zeroed frame and the page-table update. No warm-up:
/// a page is first touched only once.
pub fn page_first_touch(pages: usize) -> Result<Vec<u64>, String> {
    let mut mapping = os::Mapping::new(MAPPING_BYTES).map_err(|error| format!("mmap: {error}"))?;
    let mut samples = Vec::with_capacity(pages);
    for page in 0..pages.min(MAPPING_PAGES) {
        let start = tsc::read();
        mapping.touch(page * PAGE_SIZE);
        samples.push(tsc::read().wrapping_sub(start));
    }
    Ok(samples)
}

/// `reef_spawn` of `tiny` on `core`, then `wait4`, one sample per child.
pub fn spawn_on(iterations: usize, core: usize, tiny: &str) -> Result<Vec<u64>, String> {
    sample(iterations, || {
        let pid = rt::spawn(core, tiny, &[], &[]).map_err(|error| format!("reef_spawn on core {core}: {error}"))?;
        match rt::wait(pid) {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(format!("{tiny} on core {core} ended with {status}")),
            Err(error) => Err(format!("wait4: {error}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_is_a_tenth_at_most_100() {
        assert_eq!((warmup(5), warmup(200), warmup(100_000)), (0, 20, 100));
    }

    #[test]
    fn each_benchmark_takes_its_samples_on_the_host() {
        assert_eq!(getppid(50).unwrap().len(), 50);
        assert_eq!(thread_spawn_join(5).unwrap().len(), 5);
        let cpu = rt::current_cpu();
        assert_eq!(futex_pingpong(50, cpu).unwrap().len(), 50);
        assert_eq!(page_first_touch(64).unwrap().len(), 64);
        assert_eq!(fork_exec_wait(3, "/bin/true").unwrap().len(), 3);
        assert!(fork_exec_wait(1, "/nonexistent").unwrap_err().contains("status 127"));
        assert!(spawn_on(1, 0, "/bin/true").unwrap_err().contains("reef_spawn"), "not on Reef");
    }
}
