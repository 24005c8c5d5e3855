//! The round trips: two threads, one per CPU, bounce a token; the initiator times each
//! round trip with the TSC.

use crate::options::Benchmark;
use crate::os;
use crate::spin::relax;
use crate::stats::CpuPair;
use crate::tsc::read_tsc;
use channel::{Message, Urpc};
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Barrier, OnceLock};
use std::thread;

/// How many round trips to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Untimed round trips first.
    pub warmup: usize,
    /// Timed round trips after them: the number of samples.
    pub rounds: usize,
}

impl Plan {
    fn total(self) -> u64 {
        (self.warmup + self.rounds) as u64
    }
}

/// Runs `benchmark` between the two CPUs of `cpus` and returns one TSC cycle count per timed
/// round trip, in the order they happened.
pub fn run(benchmark: Benchmark, plan: Plan, cpus: CpuPair) -> io::Result<Vec<u64>> {
    match benchmark {
        Benchmark::Cacheline => cacheline(plan, cpus),
        Benchmark::Urpc => urpc(plan, cpus),
        Benchmark::Pipe => pipe(plan, cpus),
        Benchmark::Eventfd => eventfd(plan, cpus),
        Benchmark::Futex => futex(plan, cpus),
    }
}

/// Starts `initiate` on the initiator's CPU and `respond` on the responder's, each in a thread
/// of its own pinned there, and returns the initiator's samples. Neither side starts its
/// protocol until both are pinned, so a failed pin cannot leave the other side waiting.
fn on_two_cpus<I, R>(cpus: CpuPair, initiate: I, respond: R) -> io::Result<Vec<u64>>
where
    I: FnOnce() -> io::Result<Vec<u64>> + Send,
    R: FnOnce() -> io::Result<()> + Send,
{
    // The first pin failure, reported instead of whatever the other side then says.
    let pin_error = OnceLock::new();
    let both_pinned = Barrier::new(2);
    let pin = |cpu: usize| -> io::Result<()> {
        if let Err(error) = os::pin_current_thread(cpu) {
            let _ = pin_error.set(format!("pinning a thread to CPU {cpu}: {error}"));
        }
        both_pinned.wait();
        match pin_error.get() {
            Some(message) => Err(io::Error::other(message.clone())),
            None => Ok(()),
        }
    };
    thread::scope(|scope| {
        let responder = scope.spawn(|| {
            pin(cpus.responder)?;
            respond()
        });
        let initiator = scope.spawn(|| {
            pin(cpus.initiator)?;
            initiate()
        });
        let samples = initiator.join().map_err(|_| io::Error::other("the initiator thread panicked"))?;
        let answered = responder.join().map_err(|_| io::Error::other("the responder thread panicked"))?;
        answered.and(samples)
    })
}

/// Makes `plan.total()` round trips with `round_trip(round)`, timing each, and keeps the
/// cycle counts of those after the warm-up.
#[inline(always)]
fn timed_rounds(plan: Plan, mut round_trip: impl FnMut(u64) -> io::Result<()>) -> io::Result<Vec<u64>> {
    let mut samples = Vec::with_capacity(plan.rounds);
    for round in 0..plan.total() {
        let start = read_tsc();
        round_trip(round)?;
        let end = read_tsc();
        if round >= plan.warmup as u64 {
            samples.push(end.wrapping_sub(start));
        }
    }
    Ok(samples)
}

/// A word alone on its cache line, so the line moves only for the ping-pong.
#[repr(C, align(64))]
struct LineWord(AtomicU64);

/// Popcorn thesis table 6.1 (the FOS/Barrelfish cache-line ping-pong): one shared line holds
/// a turn counter. Round `r`: the initiator stores `2r + 1` and spins until it reads
/// `2r + 2`, which the responder stores once it has read `2r + 1`. A round trip is two
/// transfers of the line, one each way.
fn cacheline(plan: Plan, cpus: CpuPair) -> io::Result<Vec<u64>> {
    let line = LineWord(AtomicU64::new(0));
    let turn = &line.0;
    on_two_cpus(
        cpus,
        || {
            timed_rounds(plan, |round| {
                // Release/Acquire cost nothing extra on x86 (plain moves); they make the
                // handshake correct on its own terms, not only by x86's ordering.
                turn.store(2 * round + 1, Ordering::Release);
                while turn.load(Ordering::Acquire) != 2 * round + 2 {
                    relax();
                }
                Ok(())
            })
        },
        || {
            for round in 0..plan.total() {
                while turn.load(Ordering::Acquire) != 2 * round + 1 {
                    relax();
                }
                turn.store(2 * round + 2, Ordering::Release);
            }
            Ok(())
        },
    )
}

/// Slots per URPC ring: one message is in flight at a time, so a few suffice.
const URPC_SLOTS: usize = 8;
/// The message kind of the benchmark's messages (any non-zero kind does).
const URPC_KIND: u16 = 1;

fn channel_error(error: channel::ChannelError) -> io::Error {
    io::Error::other(format!("channel: {error}"))
}

/// Receives the next message from `receiver`, polling its slot.
fn receive_polling<const N: usize>(receiver: &mut channel::UrpcReceiver<'_, N>) -> Message {
    loop {
        if let Some(message) = receiver.recv_polling(4096, relax) {
            return message;
        }
    }
}

/// A one-line message each way over two URPC rings of the `channel` crate (the same code the
/// Reef kernels use): the initiator sends the round number on `ping` and polls `pong` for the
/// echo; the responder polls `ping`, checks the message and sends it back on `pong`.
fn urpc(plan: Plan, cpus: CpuPair) -> io::Result<Vec<u64>> {
    let ping_ring = Urpc::<URPC_SLOTS>::new_boxed();
    let pong_ring = Urpc::<URPC_SLOTS>::new_boxed();
    let (ping_ring, pong_ring) = (&*ping_ring, &*pong_ring);
    on_two_cpus(
        cpus,
        || {
            let mut ping = ping_ring.sender().map_err(channel_error)?;
            let mut pong = pong_ring.receiver().map_err(channel_error)?;
            let mut message = Message::new(URPC_KIND, &0u64.to_le_bytes()).map_err(channel_error)?;
            timed_rounds(plan, |round| {
                message.payload[..8].copy_from_slice(&round.to_le_bytes());
                ping.send_spin(&message);
                let echo = receive_polling(&mut pong);
                if echo != message {
                    return Err(io::Error::other(format!("urpc: round {round} came back as {echo:?}")));
                }
                Ok(())
            })
        },
        || {
            let mut ping = ping_ring.receiver().map_err(channel_error)?;
            let mut pong = pong_ring.sender().map_err(channel_error)?;
            for _ in 0..plan.total() {
                let message = receive_polling(&mut ping);
                message.validate().map_err(channel_error)?;
                pong.send_spin(&message);
            }
            Ok(())
        },
    )
}

/// Sends `bytes` through `to`, then blocks until as many bytes arrive on `from`.
fn write_then_read(to: &File, from: &File, bytes: &[u8; 8], length: usize) -> io::Result<()> {
    let mut sink = to;
    sink.write_all(&bytes[..length])?;
    let mut buffer = [0u8; 8];
    let mut source = from;
    source.read_exact(&mut buffer[..length])
}

/// Blocks until `length` bytes arrive on `from`, then sends them back through `to`.
fn read_then_write(from: &File, to: &File, length: usize) -> io::Result<()> {
    let mut buffer = [0u8; 8];
    let mut source = from;
    source.read_exact(&mut buffer[..length])?;
    let mut sink = to;
    sink.write_all(&buffer[..length])
}

/// A blocking round trip over two one-way file descriptors pairs: `(ping_read, ping_write)`
/// and `(pong_read, pong_write)`, `length` bytes at a time.
fn file_ping_pong(
    plan: Plan,
    cpus: CpuPair,
    ping: (&File, &File),
    pong: (&File, &File),
    token: [u8; 8],
    length: usize,
) -> io::Result<Vec<u64>> {
    on_two_cpus(
        cpus,
        || timed_rounds(plan, |_| write_then_read(ping.1, pong.0, &token, length)),
        || (0..plan.total()).try_for_each(|_| read_then_write(ping.0, pong.1, length)),
    )
}

/// One byte each way through two pipes; both sides block in `read`.
fn pipe(plan: Plan, cpus: CpuPair) -> io::Result<Vec<u64>> {
    let (ping_read, ping_write) = os::pipe()?;
    let (pong_read, pong_write) = os::pipe()?;
    file_ping_pong(plan, cpus, (&ping_read, &ping_write), (&pong_read, &pong_write), [b'p'; 8], 1)
}

/// An eventfd per direction: write adds 1 to the counter, read blocks until it is non-zero
/// and takes it back to 0 (the 8-byte count is what eventfd reads and writes).
fn eventfd(plan: Plan, cpus: CpuPair) -> io::Result<Vec<u64>> {
    let ping = os::eventfd()?;
    let pong = os::eventfd()?;
    file_ping_pong(plan, cpus, (&ping, &ping), (&pong, &pong), 1u64.to_ne_bytes(), 8)
}

/// Waits on `word` until it holds `wanted`, sleeping in the kernel meanwhile.
fn futex_wait_for(word: &AtomicU32, wanted: u32) -> io::Result<()> {
    loop {
        let seen = word.load(Ordering::Acquire);
        if seen == wanted {
            return Ok(());
        }
        // Sleeps only if the word still holds `seen`: a store and wake in between make the
        // call return at once, so no wake-up is lost.
        os::futex_wait(word, seen)?;
    }
}

/// One shared word, as a turn counter like the cache-line test, but each side sleeps in
/// FUTEX_WAIT until the other stores its turn and calls FUTEX_WAKE. The wake is issued every
/// time (no "are there sleepers" flag), so a round trip is two wakes and up to two waits.
fn futex(plan: Plan, cpus: CpuPair) -> io::Result<Vec<u64>> {
    let word = AtomicU32::new(0);
    let word = &word;
    // The turn counter is 32 bits (a futex word); it wraps after 2^31 rounds, and the two sides
    // compare only for equality with the current round's values, so wrapping is harmless.
    let ask = |round: u64| (2 * round + 1) as u32;
    on_two_cpus(
        cpus,
        || {
            timed_rounds(plan, |round| {
                word.store(ask(round), Ordering::Release);
                os::futex_wake(word, 1)?;
                futex_wait_for(word, ask(round).wrapping_add(1))
            })
        },
        || {
            for round in 0..plan.total() {
                futex_wait_for(word, ask(round))?;
                word.store(ask(round).wrapping_add(1), Ordering::Release);
                os::futex_wake(word, 1)?;
            }
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Smoke test on the host: every benchmark makes its round trips and every sample is a
    /// positive cycle count. One test, so the spinning benchmarks never run concurrently.
    #[test]
    fn every_benchmark_runs_on_the_host() {
        let allowed = os::allowed_cpus().unwrap().cpus();
        let cpus = match allowed.as_slice() {
            [first, second, ..] => CpuPair { initiator: *first, responder: *second },
            [only] => CpuPair { initiator: *only, responder: *only },
            [] => panic!("no CPU allowed"),
        };
        let plan = Plan { warmup: 10, rounds: 100 };
        for benchmark in Benchmark::ALL {
            if benchmark.polls() && cpus.initiator == cpus.responder {
                continue;
            }
            let samples = run(benchmark, plan, cpus).unwrap();
            assert_eq!(samples.len(), 100, "{}", benchmark.name());
            assert!(samples.iter().all(|&cycles| cycles > 0), "{}: {samples:?}", benchmark.name());
        }
    }

    #[test]
    fn a_bad_cpu_is_an_error_not_a_hang() {
        let cpus = CpuPair { initiator: 0, responder: os::MAX_CPUS + 1 };
        let error = run(Benchmark::Cacheline, Plan { warmup: 0, rounds: 1 }, cpus).unwrap_err();
        assert!(error.to_string().contains("pinning"), "{error}");
    }
}
