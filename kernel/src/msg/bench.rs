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

const RESPONDER_CACHELINE: u64 = 0;
const RESPONDER_IPI_ECHO: u64 = 1;
const RESPONDER_PAIR: u64 = 2;
const RESPONDER_LARGE: u64 = 3;
const RESPONDER_IPI_POLL_BACK: u64 = 4;
const RESPONDER_DRAIN: u64 = 5;

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

/// Benchmark IPIs this instance took (private).
static BENCH_IPIS: AtomicU64 = AtomicU64::new(0);
/// APIC id + 1 to echo each benchmark IPI to (0: no echo), set by this core's responder.
static ECHO_TO: AtomicU32 = AtomicU32::new(0);
/// Probes this instance's handler accepted and did not echo: the replies an initiator waits
/// for, and the multicast probes a member receives. Only this core writes it.
static PROBES_RECEIVED: AtomicU64 = AtomicU64::new(0);
/// Core id + 1 whose probes the handler echoes (0: none), set by this core's responder.
static ECHO_PROBES_TO: AtomicU32 = AtomicU32::new(0);
/// Probes the handler still echoes before it stops.
static ECHO_REMAINING: AtomicU64 = AtomicU64::new(0);

/// From the benchmark IPI vector: count it and, when responding, send it straight back.
pub fn on_bench_interrupt() {
    BENCH_IPIS.fetch_add(1, Ordering::Release);
    let echo = ECHO_TO.load(Ordering::Relaxed);
    if echo != 0 {
        apic::local().send_ipi(echo - 1, idt::VECTOR_BENCH);
    }
}

pub(super) fn register_handlers() {
    // Probes reaching the normal dispatch path (the real-path round trips, multicast members)
    // are validated, then echoed or counted.
    super::register(
        Kind::Probe,
        Handler { high_priority: false, on_line: Some(on_probe), on_large: Some(check_large_probe) },
    );
    icc::register(handler::BENCH_RESPONDER, respond);
}

/// The registered handler of probes: decode, then echo the probe to its sender with the
/// normal send function while this core's responder asks for it, else count it.
fn on_probe(message: &Message) -> HandlerResult {
    let probe = Probe::decode(message.payload())?;
    let echo_to = ECHO_PROBES_TO.load(Ordering::Relaxed);
    if echo_to == 0 || echo_to != u32::from(probe.from) + 1 {
        PROBES_RECEIVED.store(PROBES_RECEIVED.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        return Ok(());
    }
    let remaining = ECHO_REMAINING.load(Ordering::Relaxed).saturating_sub(1);
    ECHO_REMAINING.store(remaining, Ordering::Relaxed);
    if remaining == 0 {
        ECHO_PROBES_TO.store(0, Ordering::Relaxed);
    }
    let me = shared::this_core() as u16;
    let reply = line(Kind::Probe, |out| Probe { from: me, ..probe }.encode(out));
    let to = usize::from(probe.from);
    let mut result = try_send_pair(to, &reply);
    if result == Err(SendError::Channel(ChannelError::Full)) {
        // One probe is in flight at a time, so the ring back is never full unless the
        // initiator stopped reading: wait a bounded time for it.
        let deadline = cpu::read_tsc() + shared::facts().tsc_hz;
        while result == Err(SendError::Channel(ChannelError::Full)) && cpu::read_tsc() < deadline {
            cpu::relax();
            result = try_send_pair(to, &reply);
        }
    }
    if let Err(error) = result {
        log::warn!("benchmark probe {} from core {to} not echoed: {error}", probe.sequence);
    }
    Ok(())
}

fn check_large_probe(bytes: &[u8]) -> HandlerResult {
    let expected = bytes.iter().enumerate().all(|(i, b)| *b == (i as u8).wrapping_mul(7));
    if expected {
        Ok(())
    } else {
        Err(abi::message::DecodeError::BadField("large probe pattern"))
    }
}

fn large_probe(length: usize) -> Vec<u8> {
    (0..length).map(|i| (i as u8).wrapping_mul(7)).collect()
}

/// Prints one figure's `BENCH` line: its statistics only if it has samples.
fn report(out: &mut dyn Write, name: &str, parameter: &str, pair: (usize, usize), samples: &mut [u64]) {
    match samples::summarize(samples) {
        Some(s) => say!(
            out,
            "BENCH name={name} param={parameter} pair={}-{} unit=cycles n={} min={} p5={} median={} p95={} max={}",
            pair.0,
            pair.1,
            s.count,
            s.min,
            s.p5,
            s.median,
            s.p95,
            s.max
        ),
        None => say!(out, "BENCH name={name} param={parameter} pair={}-{} unit=cycles n=0", pair.0, pair.1),
    }
}

/// Prints the `BENCH` line of signed differences, with how many came out negative.
fn report_signed(
    out: &mut dyn Write,
    name: &str,
    parameter: &str,
    pair: (usize, usize),
    s: &samples::Summary<i64>,
    negative: u64,
) {
    if s.count == 0 {
        say!(out, "BENCH name={name} param={parameter} pair={}-{} unit=cycles n=0", pair.0, pair.1);
        return;
    }
    say!(
        out,
        "BENCH name={name} param={parameter} pair={}-{} unit=cycles n={} min={} p5={} median={} p95={} max={} negative={negative}",
        pair.0, pair.1, s.count, s.min, s.p5, s.median, s.p95, s.max
    );
}

/// `BENCH-PROGRESS` lines: which measurement starts, so a long run shows it is alive. The
/// host's parser reads only `BENCH name=` lines and ignores these.
struct Progress {
    step: u32,
    steps: u32,
    start: u64,
}

impl Progress {
    fn next(&mut self, out: &mut dyn Write, what: &str) {
        self.step += 1;
        let elapsed_ms = crate::time::cycles_to_ns(cpu::read_tsc() - self.start) / 1_000_000;
        say!(out, "BENCH-PROGRESS {}/{} {what} (after {elapsed_ms} ms)", self.step, self.steps);
    }
}

fn wait_ready() -> bool {
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz;
    while cpu::read_tsc() < deadline {
        if area().bench.ready.0.swap(0, Ordering::AcqRel) != 0 {
            return true;
        }
        cpu::relax();
    }
    false
}

/// Writes a line-sized message: seven data words, then the sequence word with Release.
fn write_line(line: &[AtomicU64; 8], sequence: u64) {
    for (i, word) in line.iter().take(7).enumerate() {
        word.store(sequence.wrapping_mul(i as u64 + 1), Ordering::Relaxed);
    }
    line[7].store(sequence, Ordering::Release);
}

/// Polls between deadline checks: a TSC read in every poll would slow the loop being timed.
const POLLS_PER_CHECK: u32 = 1024;

/// Waits until `done()`, relaxing between polls, or until the TSC passes `deadline`; returns
/// whether `done()` held.
#[inline(always)]
fn spin_until(deadline: u64, mut done: impl FnMut() -> bool) -> bool {
    let mut polls = 0u32;
    while !done() {
        polls += 1;
        if polls == POLLS_PER_CHECK {
            if cpu::read_tsc() > deadline {
                return false;
            }
            polls = 0;
        }
        cpu::relax();
    }
    true
}

/// Waits (until `deadline`) for sequence `sequence` on a line, then reads its seven data
/// words; `Some(true)` if they match it, `Some(false)` for a torn line, `None` if it never came.
fn read_line(line: &[AtomicU64; 8], sequence: u64, deadline: u64) -> Option<bool> {
    if !spin_until(deadline, || line[7].load(Ordering::Acquire) == sequence) {
        return None;
    }
    Some(line.iter().take(7).enumerate().all(|(i, w)| w.load(Ordering::Relaxed) == sequence.wrapping_mul(i as u64 + 1)))
}

/// The TSC `seconds` from now.
fn deadline_in(seconds: u64) -> u64 {
    cpu::read_tsc() + shared::facts().tsc_hz * seconds
}

fn spin_cycles(cycles: u64) {
    let start = cpu::read_tsc();
    while cpu::read_tsc() - start < cycles {
        cpu::relax();
    }
}

/// The responder side, run on the other core as an ICC handler.
fn respond(arguments: &[u64; 5]) -> Result<u64, IccStatus> {
    let bench = &area().bench;
    let iterations = arguments[1];
    match arguments[0] {
        RESPONDER_CACHELINE => {
            bench.ready.0.store(1, Ordering::Release);
            let mut torn = 0;
            for i in 1..=iterations {
                torn += u64::from(!read_line(&bench.ping.0, i, deadline_in(10)).ok_or(IccStatus::Failed)?);
                write_line(&bench.pong.0, i);
            }
            Ok(torn)
        }
        RESPONDER_IPI_POLL_BACK => {
            let start = BENCH_IPIS.load(Ordering::Acquire);
            bench.ready.0.store(1, Ordering::Release);
            let deadline = deadline_in(10);
            for i in 1..=iterations {
                // Sleep as an idle core does, and write the line once awake: the interrupt
                // handler only counts, as the message-notification handler does. Interrupts
                // are masked from the check to `sti; hlt`, so an IPI after the check still
                // ends the halt.
                loop {
                    cpu::disable_interrupts();
                    if BENCH_IPIS.load(Ordering::Acquire) - start >= i {
                        cpu::enable_interrupts();
                        break;
                    }
                    if cpu::read_tsc() > deadline {
                        cpu::enable_interrupts();
                        return Err(IccStatus::Failed);
                    }
                    cpu::wait_for_interrupt();
                }
                write_line(&bench.pong.0, i);
            }
            Ok(iterations)
        }
        RESPONDER_DRAIN => {
            drain_responder(arguments[2] as usize, iterations, NotifyMode::from_u32(arguments[3] as u32))
        }
        RESPONDER_IPI_ECHO => {
            let start = BENCH_IPIS.load(Ordering::Acquire);
            ECHO_TO.store(arguments[2] as u32 + 1, Ordering::Release);
            bench.ready.0.store(1, Ordering::Release);
            let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 10;
            // Sleep between IPIs: the echo happens in the interrupt handler.
            while BENCH_IPIS.load(Ordering::Acquire) - start < iterations && cpu::read_tsc() < deadline {
                cpu::wait_for_interrupt();
            }
            ECHO_TO.store(0, Ordering::Release);
            Ok(0)
        }
        RESPONDER_PAIR => pair_responder(
            arguments[2] as usize,
            iterations,
            NotifyMode::from_u32(arguments[3] as u32),
            arguments[4] != 0,
        ),
        RESPONDER_LARGE => large_responder(arguments[2] as usize, iterations),
        _ => Err(IccStatus::BadArguments),
    }
}

/// The real receive path's responder: probes from `initiator` reach [`on_probe`] through
/// `drain()` (receive_one, dispatch, the registered handler), which echoes them with
/// `try_send_pair`. Polled, this core spins on `drain()` here until all are echoed; notified,
/// it returns at once and its idle loop does the work (drain, then sleep until the IPI).
fn drain_responder(initiator: usize, iterations: u64, mode: NotifyMode) -> Result<u64, IccStatus> {
    ECHO_REMAINING.store(iterations, Ordering::Relaxed);
    ECHO_PROBES_TO.store(initiator as u32 + 1, Ordering::Relaxed);
    area().bench.ready.0.store(1, Ordering::Release);
    if mode != NotifyMode::Poll {
        return Ok(iterations);
    }
    // Give up after ten seconds without progress (the initiator stopped), checked between
    // batches of polls so that the loop is drain() and little else.
    let mut deadline = deadline_in(10);
    let mut remaining_at_check = iterations;
    let mut polls = 0u32;
    loop {
        let remaining = ECHO_REMAINING.load(Ordering::Relaxed);
        if remaining == 0 {
            break;
        }
        super::drain();
        polls += 1;
        if polls == POLLS_PER_CHECK {
            polls = 0;
            if remaining != remaining_at_check {
                remaining_at_check = remaining;
                deadline = deadline_in(10);
            } else if cpu::read_tsc() > deadline {
                ECHO_PROBES_TO.store(0, Ordering::Relaxed);
                return Err(IccStatus::Failed);
            }
        }
    }
    Ok(iterations)
}

/// Waits for the next message on `receiver`, sleeping as `mode` says; returns (message,
/// wake time, dequeue time).
fn wait_pair_message(
    receiver: &mut UrpcReceiver<'static, { super::PAIR_SLOTS }>,
    mode: NotifyMode,
    timestamps: bool,
) -> Option<(Message, u64, u64)> {
    let me = shared::this_core() as usize;
    let line = &area().cores[me].notify;
    let spin = line.spin_cycles.load(Ordering::Relaxed);
    let mut polls: u64 = 0;
    let mut spin_start = cpu::read_tsc();
    loop {
        if !timestamps && mode == NotifyMode::Poll {
            // The polled fast path: nothing but the slot check in the loop.
            if let Some(message) = receiver.recv_polling(4096, cpu::relax) {
                return Some((message, 0, 0));
            }
        }
        let woke = if timestamps { cpu::read_tsc() } else { 0 };
        if let Some(message) = receiver.try_recv() {
            return Some((message, woke, if timestamps { cpu::read_tsc() } else { 0 }));
        }
        polls += 1;
        // Give up after about ten seconds of nothing (the initiator died).
        if polls.is_multiple_of(256) && cpu::read_tsc() - spin_start > shared::facts().tsc_hz * 10 {
            return None;
        }
        let sleep = match mode {
            NotifyMode::Poll => false,
            NotifyMode::Ipi => true,
            NotifyMode::Hybrid | NotifyMode::Mwait => cpu::read_tsc() - spin_start > spin,
        };
        if !sleep {
            cpu::relax();
            continue;
        }
        if let Some(message) = super::wait::sleep_armed(line, false, || receiver.try_recv()) {
            let now = cpu::read_tsc();
            return Some((message, now, now));
        }
        spin_start = cpu::read_tsc();
    }
}

/// The sending side of a URPC pair held for a whole measurement: the endpoint, the counter and
/// the notification-mode word are resolved once, so each send costs what the channel costs
/// (what `try_send_pair` does, without its lock and lookups).
struct HeldLink<'a> {
    sender: &'a mut UrpcSender<'static, { super::PAIR_SLOTS }>,
    to: usize,
    mode: &'static AtomicU32,
    sent: &'static AtomicU64,
}

impl<'a> HeldLink<'a> {
    fn new(sender: &'a mut UrpcSender<'static, { super::PAIR_SLOTS }>, to: usize) -> Self {
        let me = shared::this_core() as usize;
        Self { sender, to, mode: &area().cores[to].pair_modes[me], sent: &shared::this_kcb().messages.sent }
    }

    fn send(&mut self, message: &Message) {
        while self.sender.try_send(message).is_err() {
            cpu::relax();
        }
        // Only this core writes its counters.
        self.sent.store(self.sent.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let mode = NotifyMode::from_u32(self.mode.load(Ordering::Relaxed));
        if mode != NotifyMode::Poll {
            super::notify(self.to, mode);
        }
    }
}

/// Answers each probe on the URPC ring from `initiator`. With `timestamps`, also measures
/// the receive-side breakdown (which costs TSC reads, so round trips are measured without).
fn pair_responder(initiator: usize, iterations: u64, mode: NotifyMode, timestamps: bool) -> Result<u64, IccStatus> {
    let me = shared::this_core() as u16;
    let failed = IccStatus::Failed;
    let mut senders = super::send::PAIR_SENDERS.lock();
    let mut receivers = super::receive::PAIR_RECEIVERS.lock();
    let (Some(sender), Some(receiver)) = (senders[initiator].as_mut(), receivers[initiator].as_mut()) else {
        return Err(failed);
    };
    let mut link = HeldLink::new(sender, initiator);
    let capacity = if timestamps { iterations as usize } else { 0 };
    let (mut to_wake, mut to_dequeue, mut to_handler) = (Vec::new(), Vec::new(), Vec::new());
    for buffer in [&mut to_wake, &mut to_dequeue, &mut to_handler] {
        if buffer.try_reserve_exact(capacity).is_err() {
            println!(
                "BENCH-ERROR responder on core {me}: no heap for {iterations} breakdown samples: give fewer iterations"
            );
            return Err(failed);
        }
    }
    area().bench.ready.0.store(1, Ordering::Release);
    for _ in 0..iterations {
        let (message, woke, dequeued) = wait_pair_message(receiver, mode, timestamps).ok_or(failed)?;
        // Decode, then invoke: the reply is the "handler".
        message.validate().map_err(|_| failed)?;
        if message.kind != Kind::Probe as u16 {
            return Err(failed);
        }
        let probe = Probe::decode(message.payload()).map_err(|_| failed)?;
        if timestamps {
            // Signed: `woke` is this core's TSC and `sent_tsc` the initiator's, and a polled
            // wake is stamped when the poll that finds the message starts, which can be
            // before the send; a negative difference is reported, not clamped.
            let handler_start = cpu::read_tsc();
            let difference = |later: u64, earlier: u64| later.wrapping_sub(earlier) as i64;
            to_wake.push(difference(woke, probe.sent_tsc));
            to_dequeue.push(difference(dequeued, woke));
            to_handler.push(difference(handler_start, dequeued));
        }
        // A fresh reply: built from constants and the decoded fields, so nothing of the
        // received copy is carried through memory.
        link.send(&line(Kind::Probe, |out| Probe { from: me, ..probe }.encode(out)));
    }
    if timestamps {
        let breakdown = &area().bench.breakdown.0;
        for (phase, samples) in breakdown.iter().zip([&mut to_wake, &mut to_dequeue, &mut to_handler]) {
            let negative = samples.iter().filter(|&&cycles| cycles < 0).count() as u64;
            phase.store(&samples::summarize(samples).unwrap_or_default(), negative);
        }
    }
    Ok(iterations)
}

fn large_responder(initiator: usize, iterations: u64) -> Result<u64, IccStatus> {
    let me = shared::this_core() as u16;
    area().bench.ready.0.store(1, Ordering::Release);
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 20;
    let mut done = 0;
    while done < iterations {
        if cpu::read_tsc() > deadline {
            return Err(IccStatus::Failed);
        }
        let mut receivers = super::receive::RECEIVERS.lock();
        let Some(receivers) = receivers.as_mut() else { return Err(IccStatus::Failed) };
        let Some(message) = receivers.normal.try_recv() else {
            cpu::relax();
            continue;
        };
        match receivers.normal_reassembler.push(&message) {
            Ok(None) => continue,
            Ok(Some((_, bytes))) if check_large_probe(&bytes).is_ok() => {
                done += 1;
                let ack = Probe { from: me, sequence: done, sent_tsc: bytes.len() as u64 };
                while try_send_pair(initiator, &line(Kind::Probe, |out| ack.encode(out))).is_err() {
                    cpu::relax();
                }
            }
            _ => return Err(IccStatus::Failed),
        }
    }
    Ok(done)
}

fn receive_pair_spin(from: usize) -> Option<Message> {
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 10;
    let mut receivers = super::receive::PAIR_RECEIVERS.lock();
    let receiver = receivers[from].as_mut()?;
    loop {
        if let Some(message) = receiver.recv_polling(256, cpu::relax) {
            return Some(message);
        }
        if cpu::read_tsc() > deadline {
            return None;
        }
    }
}

fn set_pair_modes(a: usize, b: usize, mode: NotifyMode) {
    let channels = &area().cores;
    channels[b].pair_modes[a].store(mode as u32, Ordering::Release);
    channels[a].pair_modes[b].store(mode as u32, Ordering::Release);
}

/// Each ratio's two sides are measured in this many alternating blocks.
const BLOCKS: u64 = 4;

fn finish_call(out: &mut dyn Write, call: Result<u32, icc::IccError>, what: &str) -> bool {
    match call.and_then(|id| icc::wait(id, 30_000)) {
        Ok(_) => true,
        Err(error) => {
            say!(out, "BENCH-ERROR {what}: responder failed: {error}");
            false
        }
    }
}

/// Table 6.1: `n` round trips of a line-sized message between two cache lines.
fn cacheline_block(out: &mut dyn Write, target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
    let bench = &area().bench;
    bench.ping.0[7].store(0, Ordering::Release);
    bench.pong.0[7].store(0, Ordering::Release);
    let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_CACHELINE, n, 0, 0, 0]);
    if wait_ready() {
        for i in 1..=n {
            let start = cpu::read_tsc();
            write_line(&bench.ping.0, i);
            match read_line(&bench.pong.0, i, start + shared::facts().tsc_hz * 5) {
                Some(true) => {}
                Some(false) => say!(out, "BENCH-ERROR cacheline: torn line {i}"),
                None => {
                    say!(out, "BENCH-ERROR cacheline: no answer to line {i}");
                    break;
                }
            }
            samples.push(cpu::read_tsc() - start);
        }
    }
    finish_call(out, call, "cacheline")
}

/// The floor of a notified round trip, what it does minus the channel: an IPI out to a
/// sleeping responder, which wakes, takes the interrupt, and writes a line that this core
/// polls (as the notified message's reply is seen by polling its slot). `n` round trips.
fn ipi_poll_back_block(out: &mut dyn Write, target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
    let bench = &area().bench;
    let target_apic = shared::apic_of(target);
    bench.pong.0[7].store(0, Ordering::Release);
    let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_IPI_POLL_BACK, n, 0, 0, 0]);
    if wait_ready() {
        for i in 1..=n {
            // Let the responder fall asleep, as in the notified-message measurement.
            spin_cycles(shared::facts().tsc_hz / 20_000);
            let start = cpu::read_tsc();
            apic::local().send_ipi(target_apic, idt::VECTOR_BENCH);
            if read_line(&bench.pong.0, i, start + shared::facts().tsc_hz * 5).is_none() {
                say!(out, "BENCH-ERROR ipi_out_poll_back: no answer to IPI {i}");
                break;
            }
            samples.push(cpu::read_tsc() - start);
        }
    }
    finish_call(out, call, "ipi_out_poll_back")
}

/// Table 6.3 as Popcorn measures it: `n` IPI ping-pongs, the responder asleep between them
/// and echoing from its interrupt handler, so a round trip takes two interrupt deliveries
/// (a notified message takes one: its reply is polled).
fn ipi_pingpong_block(out: &mut dyn Write, target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
    let target_apic = shared::apic_of(target);
    let my_apic = apic::local().id();
    let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_IPI_ECHO, n, u64::from(my_apic), 0, 0]);
    if wait_ready() {
        for i in 0..n {
            // Let the responder fall asleep, as in the notified-message measurement.
            spin_cycles(shared::facts().tsc_hz / 20_000);
            let before = BENCH_IPIS.load(Ordering::Acquire);
            let start = cpu::read_tsc();
            apic::local().send_ipi(target_apic, idt::VECTOR_BENCH);
            if !spin_until(start + shared::facts().tsc_hz * 5, || BENCH_IPIS.load(Ordering::Acquire) != before) {
                say!(out, "BENCH-ERROR ipi_pingpong_two_interrupts: no IPI back for IPI {i}");
                break;
            }
            samples.push(cpu::read_tsc() - start);
        }
    }
    finish_call(out, call, "ipi echo")
}

/// Tables 6.9–6.11 on the benchmark's own path: `n` one-line round trips over the URPC rings
/// with notification `mode`, both sides holding their endpoints for the whole block and
/// polling the reply slot (no registry, no dispatch). With `timestamps`, the initiator also
/// records send costs and the responder its breakdown.
fn pair_block(
    out: &mut dyn Write,
    target: usize,
    mode: NotifyMode,
    n: u64,
    timestamps: bool,
    round_trips: &mut Vec<u64>,
    send_costs: &mut Vec<u64>,
) -> bool {
    let me = shared::this_core() as usize;
    let facts = shared::facts();
    set_pair_modes(me, target, mode);
    // Only `ipi` lets the responder fall asleep between probes; `hybrid` is measured back to
    // back, inside its polling window, which is what it is for.
    let gap = if mode == NotifyMode::Ipi { facts.tsc_hz / 20_000 } else { 0 };
    let arguments = [RESPONDER_PAIR, n, me as u64, mode as u64, u64::from(timestamps)];
    let call = icc::call_async(target, handler::BENCH_RESPONDER, arguments);
    if wait_ready() {
        let mut senders = super::send::PAIR_SENDERS.lock();
        let mut receivers = super::receive::PAIR_RECEIVERS.lock();
        let (Some(sender), Some(receiver)) = (senders[target].as_mut(), receivers[target].as_mut()) else {
            say!(out, "BENCH-ERROR {}: URPC endpoints missing", mode.name());
            return false;
        };
        let mut link = HeldLink::new(sender, target);
        let mut message = line(Kind::Probe, |out| Probe { from: me as u16, sequence: 0, sent_tsc: 0 }.encode(out));
        for sequence in 0..n {
            spin_cycles(gap);
            let start = cpu::read_tsc();
            Probe { from: me as u16, sequence, sent_tsc: start }.encode(&mut message.payload);
            link.send(&message);
            if timestamps {
                send_costs.push(cpu::read_tsc() - start);
            }
            let replied = loop {
                if receiver.recv_polling(4096, cpu::relax).is_some() {
                    break true;
                }
                if cpu::read_tsc() - start > facts.tsc_hz * 5 {
                    break false;
                }
            };
            if !replied {
                say!(out, "BENCH-ERROR {}: no reply", mode.name());
                break;
            }
            round_trips.push(cpu::read_tsc() - start);
        }
    }
    finish_call(out, call, mode.name())
}

/// What the channel path costs on one core, with no cache line crossing: a send and receive
/// through this core's own URPC ring, the receiver's checks (copy, validate, decode), and a
/// plain 8-word line write. Per operation, from batches of 100.
fn local_path_costs(out: &mut dyn Write, pair: (usize, usize)) -> bool {
    let me = shared::this_core() as usize;
    let mut senders = super::send::PAIR_SENDERS.lock();
    let mut receivers = super::receive::PAIR_RECEIVERS.lock();
    let (Some(sender), Some(receiver)) = (senders[me].as_mut(), receivers[me].as_mut()) else {
        say!(out, "BENCH-ERROR local: this core's own URPC ring is missing");
        return false;
    };
    const BATCH: u64 = 100;
    let message = line(Kind::Probe, |out| Probe { from: me as u16, sequence: 1, sent_tsc: 2 }.encode(out));
    let (mut send_receive, mut checks, mut line_write) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures = 0;
    let mut scratch = [0u64; 8];
    for round in 0..100u64 {
        let start = cpu::read_tsc();
        for _ in 0..BATCH {
            failures += u64::from(sender.try_send(&message).is_err());
            failures += u64::from(receiver.try_recv().is_none());
        }
        send_receive.push((cpu::read_tsc() - start) / BATCH);
        let start = cpu::read_tsc();
        for _ in 0..BATCH {
            let copy = ::core::hint::black_box(message);
            let valid = copy.validate().is_ok() && copy.kind == Kind::Probe as u16;
            failures += u64::from(!valid || Probe::decode(copy.payload()).is_err());
        }
        checks.push((cpu::read_tsc() - start) / BATCH);
        let start = cpu::read_tsc();
        for i in 0..BATCH {
            for (j, word) in scratch.iter_mut().enumerate() {
                *word = (round + i).wrapping_mul(j as u64);
            }
            ::core::hint::black_box(&scratch);
        }
        line_write.push((cpu::read_tsc() - start) / BATCH);
    }
    if failures != 0 {
        say!(out, "BENCH-ERROR local: {failures} sends, receives or checks failed");
    }
    let pair = (pair.0, pair.0);
    report(out, "local_send_receive", "-", pair, &mut send_receive);
    report(out, "local_copy_validate_decode", "-", pair, &mut checks);
    report(out, "local_line_write", "-", pair, &mut line_write);
    failures == 0
}

/// How the initiator of a real-path round trip waits for the reply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// Spinning on `drain()`.
    Polling,
    /// In `wait_for_messages()`, asleep until the reply's IPI, then `drain()`.
    Sleeping,
}

/// `n` one-line round trips through the kernel's real path on both sides: the probe goes out
/// with `try_send_pair`, the responder's `drain()` hands it to the registered handler
/// ([`on_probe`]), which replies with `try_send_pair`, and this core's `drain()` hands the
/// reply to the same handler, which counts it. Polled, the responder spins on `drain()`;
/// notified, its idle loop sleeps between probes and the rings notify by IPI.
fn drain_block(
    out: &mut dyn Write,
    target: usize,
    mode: NotifyMode,
    waiting: Waiting,
    n: u64,
    samples: &mut Vec<u64>,
) -> bool {
    let me = shared::this_core() as usize;
    let facts = shared::facts();
    let what = match (mode, waiting) {
        (_, Waiting::Sleeping) => "message_roundtrip_sleeping",
        _ => "message_roundtrip_drain",
    };
    let modes = (super::queue_mode(me), super::queue_mode(target));
    set_pair_modes(me, target, mode);
    if mode != NotifyMode::Poll {
        // The responder's idle loop sleeps at once (its queue mode), and so does this core
        // when it waits sleeping.
        super::notify::set_mode(target, mode);
        if waiting == Waiting::Sleeping {
            super::notify::set_mode(me, mode);
        }
    }
    let gap = if mode == NotifyMode::Poll { 0 } else { facts.tsc_hz / 20_000 };
    let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_DRAIN, n, me as u64, mode as u64, 0]);
    if wait_ready() {
        for sequence in 0..n {
            spin_cycles(gap);
            let before = PROBES_RECEIVED.load(Ordering::Relaxed);
            let start = cpu::read_tsc();
            let probe = Probe { from: me as u16, sequence, sent_tsc: start };
            if let Err(error) = try_send_pair(target, &line(Kind::Probe, |out| probe.encode(out))) {
                say!(out, "BENCH-ERROR {what} {}: {error}", mode.name());
                break;
            }
            let deadline = start + facts.tsc_hz * 5;
            let replied = spin_until(deadline, || {
                if waiting == Waiting::Sleeping {
                    super::wait_for_messages();
                }
                super::drain();
                PROBES_RECEIVED.load(Ordering::Relaxed) != before
            });
            if !replied {
                say!(out, "BENCH-ERROR {what} {}: no reply to probe {sequence}", mode.name());
                break;
            }
            samples.push(cpu::read_tsc() - start);
        }
    }
    let finished = finish_call(out, call, what);
    super::notify::set_mode(me, modes.0);
    super::notify::set_mode(target, modes.1);
    finished
}

/// What the kernel's real receive path costs on one core, with no cache line crossing: a
/// `drain()` that finds nothing (one scan of every channel), and a probe sent to this core's
/// own URPC ring with `try_send_pair` and handled by `drain()` (receive_one, dispatch, the
/// registered handler, and the scan that finds nothing more). Per operation, batches of 100.
fn local_drain_costs(out: &mut dyn Write, pair: (usize, usize)) -> bool {
    let me = shared::this_core() as usize;
    const BATCH: u64 = 100;
    let message = line(Kind::Probe, |out| Probe { from: me as u16, sequence: 1, sent_tsc: 2 }.encode(out));
    let (mut empty, mut one) = (Vec::with_capacity(100), Vec::with_capacity(100));
    let mut failures = 0;
    for _ in 0..100 {
        let start = cpu::read_tsc();
        for _ in 0..BATCH {
            failures += super::drain() as u64;
        }
        empty.push((cpu::read_tsc() - start) / BATCH);
        let before = PROBES_RECEIVED.load(Ordering::Relaxed);
        let start = cpu::read_tsc();
        for _ in 0..BATCH {
            failures += u64::from(try_send_pair(me, &message).is_err());
            super::drain();
        }
        one.push((cpu::read_tsc() - start) / BATCH);
        failures += BATCH - (PROBES_RECEIVED.load(Ordering::Relaxed) - before).min(BATCH);
    }
    if failures != 0 {
        say!(out, "BENCH-ERROR local drain: {failures} sends or receives failed or found other messages");
    }
    let pair = (pair.0, pair.0);
    report(out, "local_drain_empty", "-", pair, &mut empty);
    report(out, "local_drain_one", "-", pair, &mut one);
    failures == 0
}

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

/// Figure 6.6: per group size, the sender's cost to insert a line into the group ring, to
/// notify the members, and the two together (what a sender pays), into `buffers`.
fn multicast(out: &mut dyn Write, iterations: u64, buffers: [&mut Vec<u64>; 3]) -> bool {
    let [insert_costs, notify_costs, send_costs] = buffers;
    let me = shared::this_core() as usize;
    let cores = super::messaging_cores();
    let group = &area().groups[0];
    group.reopen();
    let mut ok = true;
    let mut modes = [NotifyMode::Hybrid; MESSAGING_CORES];
    for (core, mode) in modes.iter_mut().enumerate().take(cores) {
        *mode = super::queue_mode(core);
    }
    let mut members = Vec::new();
    for size in 1..cores {
        let member = (1..cores).find(|c| *c != me && !members.contains(c));
        let Some(member) = member else { break };
        super::notify::set_mode(member, NotifyMode::Ipi);
        if icc::call(member, handler::GROUP_JOIN, [0; 5], 1000).is_err() {
            say!(out, "BENCH-ERROR multicast: core {member} did not join");
            ok = false;
            break;
        }
        members.push(member);
        insert_costs.clear();
        notify_costs.clear();
        send_costs.clear();
        for sequence in 0..iterations {
            let deadline = cpu::read_tsc() + shared::facts().tsc_hz;
            while group.nr_slots_in_use() != 0 && cpu::read_tsc() < deadline {
                cpu::relax();
            }
            // Let the members fall asleep again, so the next insertion is measured against
            // quiet members (Popcorn spaces its trials the same way).
            spin_cycles(shared::facts().tsc_hz / 20_000);
            let probe = Probe { from: me as u16, sequence, sent_tsc: cpu::read_tsc() };
            match super::group::send_group(0, &line(Kind::Probe, |out| probe.encode(out))) {
                Ok((insert, notify)) => {
                    insert_costs.push(insert);
                    notify_costs.push(notify);
                    send_costs.push(insert + notify);
                }
                Err(error) => {
                    say!(out, "BENCH-ERROR multicast: {error}");
                    ok = false;
                    break;
                }
            }
        }
        let parameter = alloc::format!("{size}");
        report(out, "multicast_insert_cost", &parameter, (me, member), insert_costs);
        report(out, "multicast_notify_cost", &parameter, (me, member), notify_costs);
        report(out, "multicast_send_cost", &parameter, (me, member), send_costs);
    }
    for member in members {
        let _ = icc::call(member, handler::GROUP_LEAVE, [0; 5], 1000);
    }
    for (core, mode) in modes.iter().enumerate().take(cores) {
        super::notify::set_mode(core, *mode);
    }
    ok
}
