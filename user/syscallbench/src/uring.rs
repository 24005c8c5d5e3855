//! io_uring `NOP`s in batches: Linux's own answer to the syspage, the floor it is compared with.

use io_uring::{opcode, IoUring};
use std::io;

/// Submission and completion queues deep enough for the largest batch.
const DEPTH: u32 = 64;
/// How long the SQPOLL thread spins idle before it sleeps: longer than any gap between two
/// batches here, so it is awake for every one (as a kernel core is in steady use).
const SQPOLL_IDLE_MS: u32 = 2000;

/// A ring that runs batches of `NOP`s.
pub struct Nops {
    ring: IoUring,
    sqpoll: bool,
}

impl Nops {
    /// A ring of [`DEPTH`] entries; with `sqpoll`, the kernel's polling thread takes the
    /// submissions (`IORING_SETUP_SQPOLL`) and completions are polled in user space: no
    /// system call at all while it is awake.
    /// `sqpoll_cpu` pins the polling thread (`IORING_SETUP_SQ_AFF`).
    pub fn new(sqpoll: bool, sqpoll_cpu: Option<u32>) -> io::Result<Self> {
        let ring = match (sqpoll, sqpoll_cpu) {
            (false, _) => IoUring::new(DEPTH)?,
            (true, None) => IoUring::builder().setup_sqpoll(SQPOLL_IDLE_MS).build(DEPTH)?,
            (true, Some(cpu)) => IoUring::builder().setup_sqpoll(SQPOLL_IDLE_MS).setup_sqpoll_cpu(cpu).build(DEPTH)?,
        };
        Ok(Nops { ring, sqpoll })
    }

    /// Submits `size` `NOP`s (at most [`DEPTH`]) and waits for all their completions: without
    /// SQPOLL one `io_uring_enter` that submits and waits; with it, completions are polled.
    pub fn batch(&mut self, size: usize) -> Result<(), String> {
        {
            let mut submission = self.ring.submission();
            // The SQPOLL thread moves the queue's head on only after it has submitted what it
            // took, which can be after the completions came: wait for the room.
            while submission.capacity() - submission.len() < size {
                std::hint::spin_loop();
                submission.sync();
            }
            for index in 0..size {
                let nop = opcode::Nop::new().build().user_data(index as u64);
                // SAFETY: a NOP names no buffer or descriptor, so nothing it refers to must
                // outlive its completion.
                unsafe { submission.push(&nop) }
                    .map_err(|_| format!("the submission queue is full at {index} of {size}"))?;
            }
        }
        let mut reaped = 0;
        if self.sqpoll {
            // Enters the kernel only when the polling thread fell asleep.
            self.ring.submit().map_err(|error| format!("io_uring_enter (SQ wakeup): {error}"))?;
        } else {
            self.ring.submit_and_wait(size).map_err(|error| format!("io_uring_enter: {error}"))?;
        }
        while reaped < size {
            for completion in self.ring.completion() {
                if completion.result() < 0 {
                    return Err(format!("a NOP completed with {}", io::Error::from_raw_os_error(-completion.result())));
                }
                reaped += 1;
            }
            std::hint::spin_loop();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_of_nops_complete() {
        let mut nops = match Nops::new(false, None) {
            Ok(nops) => nops,
            // A host whose kernel has io_uring off (a sandbox, kernel.io_uring_disabled).
            Err(error) => return eprintln!("no io_uring here: {error}"),
        };
        for size in [1, 3, 64] {
            nops.batch(size).unwrap();
        }
        if let Ok(mut polled) = Nops::new(true, None) {
            polled.batch(64).unwrap();
            polled.batch(1).unwrap();
        }
    }
}
