//! In-guest messaging measurements (Popcorn tables 6.1–6.3, 6.9–6.11, figures 6.3–6.6).
//!
//! `msg bench [core] [iterations]` on core 0 drives each measurement against a responder on
//! the other core: an ICC handler, or for the notified messages through the kernel's real
//! receive path, that core's idle loop. Every figure is printed as one line,
//! `BENCH name=… param=… pair=a-b unit=cycles n=… min=… p5=… median=… p95=… max=…`, with
//! `negative=…` added where a figure is a difference of two TSC readings that can come out
//! negative; `cargo xtask bench msg` turns them into JSON and plots. Only measured values are
//! printed (a figure without samples has `n=0` and no statistics). A `BENCH-PROGRESS` line
//! names each measurement as it starts. Benchmarks never fail on a number.
//!
//! Memory is bounded: the initiator keeps [`SAMPLE_BUFFERS`] buffers of one sample per
//! iteration, allocated once up front, and at most [`MAX_ITERATIONS`] iterations, so that they
//! fit the kernel heap with room to spare.

use super::{area, icc, line, try_send_pair, Handler, HandlerResult, NotifyMode, SendError, MESSAGING_CORES};
use crate::arch::{apic, cpu, idt};
use crate::core::shared;
use crate::println;
use ::core::fmt::Write;
use ::core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use abi::message::{handler, IccStatus, Kind, Probe};
use alloc::vec::Vec;
use channel::{ChannelError, Message};
use channel::{UrpcReceiver, UrpcSender};

/// Writes one line of the benchmark's output; a writer that refuses text only loses lines,
/// which the host's parser reports as missing figures.
macro_rules! say {
    ($out:expr, $($argument:tt)*) => {{
        let _ = writeln!($out, $($argument)*);
    }};
}

mod blocks;
mod line;
mod report;
mod responder;

use blocks::*;
use line::*;
use report::*;
use responder::*;

pub use responder::on_bench_interrupt;
pub(in crate::msg) use responder::register_handlers;

/// Sample buffers the initiator holds at once: the five IPI round trips, measured in
/// alternating blocks.
pub const SAMPLE_BUFFERS: usize = 5;

/// Most iterations `msg bench` takes. The initiator's buffers (`SAMPLE_BUFFERS` × 8 bytes per
/// iteration) then fill at most half of its kernel heap and the responder's breakdown (3 × 8
/// bytes per iteration) less, which leaves room for the large messages (57 KiB) and the rest.
pub const MAX_ITERATIONS: u64 = 50_000;

/// Fewest iterations: every ratio is measured in [`BLOCKS`] blocks of at least two.
pub const MIN_ITERATIONS: u64 = 10;

const _: () = assert!(SAMPLE_BUFFERS as u64 * 8 * MAX_ITERATIONS <= crate::mm::heap::HEAP_SIZE / 2);

/// Why [`run`] did not give every figure.
#[derive(Debug)]
pub enum RunError {
    /// The target is this core: every measurement needs two.
    ThisCore(usize),
    /// Another core runs a benchmark now (its id).
    Busy(usize),
    /// The target has no channels.
    Target(super::SendError),
    /// The iteration count is outside [`MIN_ITERATIONS`]..=[`MAX_ITERATIONS`].
    Iterations(u64),
    /// The sample buffers did not fit this core's heap: (bytes wanted, bytes free).
    Memory(usize, usize),
    /// Some measurements could not run; each printed a `BENCH-ERROR` line.
    Incomplete,
}

impl ::core::fmt::Display for RunError {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        match self {
            Self::ThisCore(core) => write!(f, "core {core} is this core: pick another one, see `cores`"),
            Self::Busy(core) => {
                write!(f, "core {core} is running a benchmark: wait until it is done, then run it again")
            }
            Self::Target(error) => write!(f, "{error}"),
            Self::Iterations(n) => write!(
                f,
                "{n} iterations: give {MIN_ITERATIONS} to {MAX_ITERATIONS} (every sample is kept in the kernel heap)"
            ),
            Self::Memory(wanted, free) => write!(
                f,
                "the sample buffers need {} KiB but this core's heap has {} KiB free: give fewer iterations",
                wanted / 1024,
                free / 1024
            ),
            Self::Incomplete => write!(f, "some measurements could not run: the BENCH-ERROR lines above say which"),
        }
    }
}

/// The initiator's sample buffers, allocated once for the whole run.
fn sample_buffers(iterations: u64) -> Result<[Vec<u64>; SAMPLE_BUFFERS], RunError> {
    // The large-message figures take at least 20 rounds however few the iterations.
    let capacity = iterations.max(20) as usize;
    let mut buffers: [Vec<u64>; SAMPLE_BUFFERS] = Default::default();
    for buffer in &mut buffers {
        if buffer.try_reserve_exact(capacity).is_err() {
            let wanted = SAMPLE_BUFFERS * capacity * ::core::mem::size_of::<u64>();
            return Err(RunError::Memory(wanted, crate::mm::heap::usage().1));
        }
    }
    Ok(buffers)
}

/// Runs every measurement between this core and `target`.
/// One run at a time on the whole machine: another gets [`RunError::Busy`].
pub fn run(target: usize, iterations: u64, out: &mut dyn Write) -> Result<(), RunError> {
    let me = shared::this_core() as usize;
    super::check_target(target).map_err(RunError::Target)?;
    if target == me {
        return Err(RunError::ThisCore(target));
    }
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(RunError::Iterations(iterations));
    }
    let lock = &area().bench.initiator;
    lock.try_lock(me as u32).map_err(|holder| RunError::Busy(holder as usize))?;
    let result = measure(target, iterations, out);
    lock.unlock();
    result
}

/// Every measurement of [`run`], its checks passed and the benchmark's lock held.
fn measure(target: usize, iterations: u64, out: &mut dyn Write) -> Result<(), RunError> {
    let me = shared::this_core() as usize;
    let facts = shared::facts();
    let [mut a, mut b, mut c, mut d, mut e] = sample_buffers(iterations)?;
    let target_apic = shared::apic_of(target);
    let pair = (me, target);
    let bench = &area().bench;
    say!(
        out,
        "BENCH-INFO tsc_hz={} pair={me}-{target} iterations={iterations} mwait={} apic={} cores={}",
        facts.tsc_hz,
        if facts.has_mwait { "yes" } else { "no" },
        if facts.has_x2apic { "x2apic" } else { "xapic" },
        facts.core_count
    );
    if !facts.has_mwait {
        say!(out, "BENCH-NOTE mwait: CPUID.1:ECX.MONITOR is 0 on this CPU, the mwait mode falls back to hybrid");
    }
    let modes = (super::queue_mode(me), super::queue_mode(target));
    let mut progress = Progress { step: 0, steps: 10 + u32::from(facts.has_mwait), start: cpu::read_tsc() };
    let mut ok = true;

    progress.next(out, "one core: channel path, checks, line write, drain()");
    ok &= local_path_costs(out, pair);
    ok &= local_drain_costs(out, pair);

    // Tables 6.1 and 6.3 against 6.9: the raw mechanisms and the channels that use them are
    // measured in alternating blocks, so each ratio compares runs that saw the same host.
    let block = iterations / BLOCKS;
    progress.next(out, "cache line and polled message round trips");
    for buffer in [&mut a, &mut b, &mut c] {
        buffer.clear();
    }
    for _ in 0..BLOCKS {
        ok &= cacheline_block(out, target, block, &mut a);
        ok &= pair_block(out, target, NotifyMode::Poll, block, false, &mut b, &mut e);
        ok &= drain_block(out, target, NotifyMode::Poll, Waiting::Polling, block, &mut c);
    }
    report(out, "cacheline_roundtrip", "-", pair, &mut a);
    report(out, "message_roundtrip", NotifyMode::Poll.name(), pair, &mut b);
    report(out, "message_roundtrip_drain", NotifyMode::Poll.name(), pair, &mut c);

    // Table 6.2: cost to send one IPI.
    progress.next(out, "IPI send cost");
    a.clear();
    for _ in 0..iterations {
        let start = cpu::read_tsc();
        apic::local().send_ipi(target_apic, idt::VECTOR_WAKE);
        a.push(cpu::read_tsc() - start);
        spin_cycles(facts.tsc_hz / 50_000);
    }
    report(out, "ipi_send_cost", "-", pair, &mut a);

    progress.next(out, "IPI and notified message round trips");
    for buffer in [&mut a, &mut b, &mut c, &mut d, &mut e] {
        buffer.clear();
    }
    let mut unused = Vec::new();
    for _ in 0..BLOCKS {
        ok &= ipi_poll_back_block(out, target, block, &mut a);
        ok &= ipi_pingpong_block(out, target, block, &mut b);
        ok &= pair_block(out, target, NotifyMode::Ipi, block, false, &mut c, &mut unused);
        ok &= drain_block(out, target, NotifyMode::Ipi, Waiting::Polling, block, &mut d);
        ok &= drain_block(out, target, NotifyMode::Ipi, Waiting::Sleeping, block, &mut e);
    }
    report(out, "ipi_out_poll_back", "-", pair, &mut a);
    report(out, "ipi_pingpong_two_interrupts", "-", pair, &mut b);
    report(out, "message_roundtrip", NotifyMode::Ipi.name(), pair, &mut c);
    report(out, "message_roundtrip_drain", NotifyMode::Ipi.name(), pair, &mut d);
    report(out, "message_roundtrip_sleeping", NotifyMode::Ipi.name(), pair, &mut e);

    // The other modes' round trips, then for every mode the send cost and the receive-side
    // breakdown (a separate pass: its TSC reads would inflate the round trips).
    for mode in NotifyMode::ALL {
        if mode == NotifyMode::Mwait && !facts.has_mwait {
            continue;
        }
        progress.next(out, mode.name());
        if matches!(mode, NotifyMode::Hybrid | NotifyMode::Mwait) {
            a.clear();
            ok &= pair_block(out, target, mode, iterations, false, &mut a, &mut unused);
            report(out, "message_roundtrip", mode.name(), pair, &mut a);
        }
        a.clear();
        b.clear();
        if pair_block(out, target, mode, iterations, true, &mut a, &mut b) {
            report(out, "message_send_cost", mode.name(), pair, &mut b);
            for (phase, name) in bench.breakdown.0.iter().zip(["send_to_wake", "wake_to_dequeue", "dequeue_to_handler"])
            {
                let (summary, negative) = phase.load();
                report_signed(out, &alloc::format!("message_{name}"), mode.name(), pair, &summary, negative);
            }
        } else {
            ok = false;
        }
    }
    set_pair_modes(me, target, modes.1);

    // Figures 6.3–6.5: large messages, 1 to 1024 chunks, over the target's receive queue.
    progress.next(out, "large messages");
    let target_mode = super::queue_mode(target);
    super::notify::set_mode(target, NotifyMode::Poll);
    for shift in 0..=10 {
        let chunks = 1usize << shift;
        let length = channel::FIRST_CHUNK_DATA_LEN + (chunks - 1) * channel::CHUNK_DATA_LEN;
        let bytes = large_probe(length);
        let rounds = (iterations / chunks as u64).clamp(20, 1000);
        let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_LARGE, rounds, me as u64, 0, 0]);
        if !wait_ready() {
            ok &= finish_call(out, call, "large");
            continue;
        }
        a.clear();
        b.clear();
        for _ in 0..rounds {
            let start = cpu::read_tsc();
            if super::send_large(target, Kind::Probe, &bytes).is_err() {
                break;
            }
            a.push(cpu::read_tsc() - start);
            if receive_pair_spin(target).is_none() {
                say!(out, "BENCH-ERROR large {chunks}: no acknowledgement");
                break;
            }
            b.push(cpu::read_tsc() - start);
        }
        let parameter = alloc::format!("{chunks}");
        report(out, "large_send_cost", &parameter, pair, &mut a);
        report(out, "large_roundtrip", &parameter, pair, &mut b);
        ok &= finish_call(out, call, "large");
    }
    super::notify::set_mode(target, target_mode);

    // Figure 6.6: multicast sender costs versus group size (members notified by IPI).
    progress.next(out, "multicast");
    ok &= multicast(out, iterations, [&mut a, &mut b, &mut c]);

    // Inter-core call round trip.
    progress.next(out, "inter-core calls");
    a.clear();
    for i in 0..iterations {
        let start = cpu::read_tsc();
        if icc::call(target, handler::ECHO, [i, 0, 0, 0, 0], 1000) != Ok(i) {
            say!(out, "BENCH-ERROR icc: wrong or no reply");
            ok = false;
            break;
        }
        a.push(cpu::read_tsc() - start);
    }
    report(out, "icc_roundtrip", super::queue_mode(target).name(), pair, &mut a);
    super::notify::set_mode(me, modes.0);
    super::notify::set_mode(target, modes.1);
    if ok {
        Ok(())
    } else {
        Err(RunError::Incomplete)
    }
}
