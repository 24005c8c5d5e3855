//! In-guest messaging measurements (Popcorn tables 6.1–6.3, 6.9–6.11, figures 6.3–6.6).
//!
//! `msg bench [core] [iterations]` on core 0 drives each measurement against a responder
//! running on the other core as an ICC handler. Every figure is printed as one line,
//! `BENCH name=… param=… pair=a-b unit=cycles n=… min=… p5=… median=… p95=… max=…`, which
//! `cargo xtask bench msg` turns into JSON and plots. Benchmarks never fail on a number.

use super::{area, icc, line, try_send_pair, Handler, HandlerResult, NotifyMode, MESSAGING_CORES};
use crate::arch::{apic, cpu, idt};
use crate::core::shared::{self, CacheLine};
use crate::println;
use ::core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use abi::message::{handler, Kind, Probe};
use alloc::vec::Vec;
use channel::Message;
use channel::{UrpcReceiver, UrpcSender};

/// Cache lines and result slots shared by the initiator and the responder of a benchmark.
#[repr(C)]
pub struct BenchArea {
    /// Raw ping-pong: a whole line written by the initiator (7 data words, then word 7 the
    /// sequence), as the FOS/Barrelfish cache-line benchmark sends a line-sized message.
    pub ping: CacheLine<[AtomicU64; 8]>,
    /// Raw ping-pong: the responder's line.
    pub pong: CacheLine<[AtomicU64; 8]>,
    /// The responder is set up and waits for the first probe.
    pub ready: CacheLine<AtomicU32>,
    /// Responder-side latency breakdown: (send→wake, wake→dequeued, dequeued→handler) medians
    /// then p5 and p95, in cycles.
    pub breakdown: CacheLine<[AtomicU64; 9]>,
}

const RESPONDER_CACHELINE: u64 = 0;
const RESPONDER_IPI_ECHO: u64 = 1;
const RESPONDER_PAIR: u64 = 2;
const RESPONDER_LARGE: u64 = 3;

/// Benchmark IPIs this instance took (private).
static BENCH_IPIS: AtomicU64 = AtomicU64::new(0);
/// APIC id + 1 to echo each benchmark IPI to (0: no echo), set by this core's responder.
static ECHO_TO: AtomicU32 = AtomicU32::new(0);

/// From the benchmark IPI vector: count it and, when responding, send it straight back.
pub fn on_bench_interrupt() {
    BENCH_IPIS.fetch_add(1, Ordering::Release);
    let echo = ECHO_TO.load(Ordering::Relaxed);
    if echo != 0 {
        apic::local().send_ipi(echo - 1, idt::VECTOR_BENCH);
    }
}

pub(super) fn register_handlers() {
    // Probes reaching the normal dispatch path (multicast members) are validated and counted.
    super::register(
        Kind::Probe,
        Handler {
            high_priority: false,
            on_line: Some(|message| Probe::decode(message.payload()).map(|_| ())),
            on_large: Some(check_large_probe),
        },
    );
    icc::register(handler::BENCH_RESPONDER, respond);
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

/// Summary of cycle samples, as the Linux peer and the host compute theirs; all zero when
/// there are none.
pub fn summarize(samples: &mut [u64]) -> samples::Summary<u64> {
    samples::summarize(samples).unwrap_or_default()
}

fn report(name: &str, parameter: &str, pair: (usize, usize), samples: &mut [u64]) -> samples::Summary<u64> {
    let s = summarize(samples);
    println!(
        "BENCH name={name} param={parameter} pair={}-{} unit=cycles n={} min={} p5={} median={} p95={} max={}",
        pair.0, pair.1, s.count, s.min, s.p5, s.median, s.p95, s.max
    );
    s
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

/// Waits for sequence `sequence` on a line, then reads its seven data words; returns the
/// sequence if the words match it (a torn line returns something else).
fn read_line(line: &[AtomicU64; 8], sequence: u64) -> u64 {
    while line[7].load(Ordering::Acquire) != sequence {
        cpu::relax();
    }
    let intact =
        line.iter().take(7).enumerate().all(|(i, w)| w.load(Ordering::Relaxed) == sequence.wrapping_mul(i as u64 + 1));
    if intact {
        sequence
    } else {
        !sequence
    }
}

fn spin_cycles(cycles: u64) {
    let start = cpu::read_tsc();
    while cpu::read_tsc() - start < cycles {
        cpu::relax();
    }
}

/// The responder side, run on the other core as an ICC handler.
fn respond(arguments: &[u64; 5]) -> Result<u64, abi::message::IccStatus> {
    let bench = &area().bench;
    let iterations = arguments[1];
    match arguments[0] {
        RESPONDER_CACHELINE => {
            bench.ready.0.store(1, Ordering::Release);
            let mut torn = 0;
            for i in 1..=iterations {
                torn += u64::from(read_line(&bench.ping.0, i) != i);
                write_line(&bench.pong.0, i);
            }
            Ok(torn)
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
        _ => Err(abi::message::IccStatus::BadArguments),
    }
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
        if let Some(message) = super::sleep_armed(line, false, || receiver.try_recv()) {
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
fn pair_responder(
    initiator: usize,
    iterations: u64,
    mode: NotifyMode,
    timestamps: bool,
) -> Result<u64, abi::message::IccStatus> {
    let me = shared::this_core() as u16;
    let failed = abi::message::IccStatus::Failed;
    let mut senders = super::PAIR_SENDERS.lock();
    let mut receivers = super::PAIR_RECEIVERS.lock();
    let (Some(sender), Some(receiver)) = (senders[initiator].as_mut(), receivers[initiator].as_mut()) else {
        return Err(failed);
    };
    let mut link = HeldLink::new(sender, initiator);
    let capacity = if timestamps { iterations as usize } else { 0 };
    let mut to_wake = Vec::with_capacity(capacity);
    let mut to_dequeue = Vec::with_capacity(capacity);
    let mut to_handler = Vec::with_capacity(capacity);
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
            let handler_start = cpu::read_tsc();
            to_wake.push(woke.saturating_sub(probe.sent_tsc));
            to_dequeue.push(dequeued.saturating_sub(woke));
            to_handler.push(handler_start.saturating_sub(dequeued));
        }
        // A fresh reply: built from constants and the decoded fields, so nothing of the
        // received copy is carried through memory.
        link.send(&line(Kind::Probe, |out| Probe { from: me, ..probe }.encode(out)));
    }
    if timestamps {
        let breakdown = &area().bench.breakdown.0;
        for (i, samples) in [&mut to_wake, &mut to_dequeue, &mut to_handler].into_iter().enumerate() {
            let s = summarize(samples);
            breakdown[i].store(s.median as u64, Ordering::Relaxed);
            breakdown[3 + i].store(s.p5, Ordering::Relaxed);
            breakdown[6 + i].store(s.p95, Ordering::Relaxed);
        }
    }
    Ok(iterations)
}

fn large_responder(initiator: usize, iterations: u64) -> Result<u64, abi::message::IccStatus> {
    let me = shared::this_core() as u16;
    area().bench.ready.0.store(1, Ordering::Release);
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 20;
    let mut done = 0;
    while done < iterations {
        if cpu::read_tsc() > deadline {
            return Err(abi::message::IccStatus::Failed);
        }
        let mut receivers = super::RECEIVERS.lock();
        let Some(receivers) = receivers.as_mut() else { return Err(abi::message::IccStatus::Failed) };
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
            _ => return Err(abi::message::IccStatus::Failed),
        }
    }
    Ok(done)
}

fn receive_pair_spin(from: usize) -> Option<Message> {
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 10;
    let mut receivers = super::PAIR_RECEIVERS.lock();
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

fn finish_call(call: Result<u32, icc::IccError>, what: &str) -> bool {
    match call.and_then(|id| icc::wait(id, 30_000)) {
        Ok(_) => true,
        Err(error) => {
            println!("BENCH-ERROR {what}: responder failed: {error}");
            false
        }
    }
}

/// Table 6.1: `n` round trips of a line-sized message between two cache lines.
fn cacheline_block(target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
    let bench = &area().bench;
    bench.ping.0[7].store(0, Ordering::Release);
    bench.pong.0[7].store(0, Ordering::Release);
    let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_CACHELINE, n, 0, 0, 0]);
    if wait_ready() {
        for i in 1..=n {
            let start = cpu::read_tsc();
            write_line(&bench.ping.0, i);
            if read_line(&bench.pong.0, i) != i {
                println!("BENCH-ERROR cacheline: torn line {i}");
            }
            samples.push(cpu::read_tsc() - start);
        }
    }
    finish_call(call, "cacheline")
}

/// Table 6.3: `n` IPI round trips, the responder asleep between them and echoing from its
/// interrupt handler.
fn ipi_block(target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
    let target_apic = shared::get().kcb(target).apic_id.load(Ordering::Relaxed);
    let my_apic = apic::local().id();
    let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_IPI_ECHO, n, u64::from(my_apic), 0, 0]);
    if wait_ready() {
        for _ in 0..n {
            // Let the responder fall asleep, as in the notified-message measurement.
            spin_cycles(shared::facts().tsc_hz / 20_000);
            let before = BENCH_IPIS.load(Ordering::Acquire);
            let start = cpu::read_tsc();
            apic::local().send_ipi(target_apic, idt::VECTOR_BENCH);
            while BENCH_IPIS.load(Ordering::Acquire) == before {
                cpu::relax();
            }
            samples.push(cpu::read_tsc() - start);
        }
    }
    finish_call(call, "ipi echo")
}

/// Tables 6.9–6.11: `n` one-line round trips over the URPC rings with notification `mode`.
/// With `timestamps`, the initiator also records send costs and the responder its breakdown.
fn pair_block(
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
        let mut senders = super::PAIR_SENDERS.lock();
        let mut receivers = super::PAIR_RECEIVERS.lock();
        let (Some(sender), Some(receiver)) = (senders[target].as_mut(), receivers[target].as_mut()) else {
            println!("BENCH-ERROR {}: URPC endpoints missing", mode.name());
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
                println!("BENCH-ERROR {}: no reply", mode.name());
                break;
            }
            round_trips.push(cpu::read_tsc() - start);
        }
    }
    finish_call(call, mode.name())
}

/// What the channel path costs on one core, with no cache line crossing: a send and receive
/// through this core's own URPC ring, the receiver's checks (copy, validate, decode), and a
/// plain 8-word line write. Per operation, from batches of 100.
fn local_path_costs(pair: (usize, usize)) -> bool {
    let me = shared::this_core() as usize;
    let mut senders = super::PAIR_SENDERS.lock();
    let mut receivers = super::PAIR_RECEIVERS.lock();
    let (Some(sender), Some(receiver)) = (senders[me].as_mut(), receivers[me].as_mut()) else {
        println!("BENCH-ERROR local: this core's own URPC ring is missing");
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
        println!("BENCH-ERROR local: {failures} sends, receives or checks failed");
    }
    let pair = (pair.0, pair.0);
    report("local_send_receive", "-", pair, &mut send_receive);
    report("local_copy_validate_decode", "-", pair, &mut checks);
    report("local_line_write", "-", pair, &mut line_write);
    failures == 0
}

/// Why [`run`] did not give every figure.
#[derive(Debug)]
pub enum RunError {
    /// The target is this core: every measurement needs two.
    ThisCore(usize),
    /// The target has no channels.
    Target(super::SendError),
    /// Some measurements could not run; each printed a `BENCH-ERROR` line.
    Incomplete,
}

impl ::core::fmt::Display for RunError {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        match self {
            Self::ThisCore(core) => write!(f, "core {core} is this core: pick another one, see `cores`"),
            Self::Target(error) => write!(f, "{error}"),
            Self::Incomplete => write!(f, "some measurements could not run: the BENCH-ERROR lines above say which"),
        }
    }
}

/// Runs every measurement between this core and `target`.
pub fn run(target: usize, iterations: u64) -> Result<(), RunError> {
    let me = shared::this_core() as usize;
    let facts = shared::facts();
    super::check_target(target).map_err(RunError::Target)?;
    if target == me {
        return Err(RunError::ThisCore(target));
    }
    let target_apic = shared::get().kcb(target).apic_id.load(Ordering::Relaxed);
    let pair = (me, target);
    let bench = &area().bench;
    println!(
        "BENCH-INFO tsc_hz={} pair={me}-{target} iterations={iterations} mwait={} apic={} cores={}",
        facts.tsc_hz,
        if facts.has_mwait { "yes" } else { "no" },
        if facts.has_x2apic { "x2apic" } else { "xapic" },
        facts.core_count
    );
    if !facts.has_mwait {
        println!("BENCH-NOTE mwait: CPUID.1:ECX.MONITOR is 0 on this CPU, the mwait mode falls back to hybrid");
    }
    let mut ok = true;
    let mut samples = Vec::with_capacity(iterations as usize);

    ok &= local_path_costs(pair);

    // Tables 6.1 and 6.3 against 6.9: the raw mechanisms and the channels that use them are
    // measured in alternating blocks, so each ratio compares runs that saw the same host.
    let block = (iterations / BLOCKS).max(1);
    let (mut raw_line, mut polled, mut raw_ipi, mut notified) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut unused = Vec::new();
    for _ in 0..BLOCKS {
        ok &= cacheline_block(target, block, &mut raw_line);
        ok &= pair_block(target, NotifyMode::Poll, block, false, &mut polled, &mut unused);
    }
    report("cacheline_roundtrip", "-", pair, &mut raw_line);
    report("message_roundtrip", NotifyMode::Poll.name(), pair, &mut polled);

    // Table 6.2: cost to send one IPI.
    samples.clear();
    for _ in 0..iterations {
        let start = cpu::read_tsc();
        apic::local().send_ipi(target_apic, idt::VECTOR_WAKE);
        samples.push(cpu::read_tsc() - start);
        spin_cycles(facts.tsc_hz / 50_000);
    }
    report("ipi_send_cost", "-", pair, &mut samples);

    for _ in 0..BLOCKS {
        ok &= ipi_block(target, block, &mut raw_ipi);
        ok &= pair_block(target, NotifyMode::Ipi, block, false, &mut notified, &mut unused);
    }
    report("ipi_roundtrip", "-", pair, &mut raw_ipi);
    report("message_roundtrip", NotifyMode::Ipi.name(), pair, &mut notified);

    // The other modes' round trips, then for every mode the send cost and the receive-side
    // breakdown (a separate pass: its TSC reads would inflate the round trips).
    for mode in NotifyMode::ALL {
        if mode == NotifyMode::Mwait && !facts.has_mwait {
            continue;
        }
        if matches!(mode, NotifyMode::Hybrid | NotifyMode::Mwait) {
            samples.clear();
            ok &= pair_block(target, mode, iterations, false, &mut samples, &mut unused);
            report("message_roundtrip", mode.name(), pair, &mut samples);
        }
        let mut send_costs = Vec::new();
        samples.clear();
        if pair_block(target, mode, iterations, true, &mut samples, &mut send_costs) {
            report("message_send_cost", mode.name(), pair, &mut send_costs);
            let b = &bench.breakdown.0;
            for (i, phase) in ["send_to_wake", "wake_to_dequeue", "dequeue_to_handler"].iter().enumerate() {
                println!(
                    "BENCH name=message_{phase} param={} pair={me}-{target} unit=cycles n={iterations} min={} p5={} median={} p95={} max={}",
                    mode.name(),
                    b[3 + i].load(Ordering::Relaxed),
                    b[3 + i].load(Ordering::Relaxed),
                    b[i].load(Ordering::Relaxed),
                    b[6 + i].load(Ordering::Relaxed),
                    b[6 + i].load(Ordering::Relaxed)
                );
            }
        } else {
            ok = false;
        }
    }
    set_pair_modes(me, target, NotifyMode::Hybrid);

    // Figures 6.3–6.5: large messages, 1 to 1024 chunks, over the target's receive queue.
    let target_mode = super::queue_mode(target);
    super::set_mode(target, NotifyMode::Poll);
    for shift in 0..=10 {
        let chunks = 1usize << shift;
        let length = channel::FIRST_CHUNK_DATA_LEN + (chunks - 1) * channel::CHUNK_DATA_LEN;
        let bytes = large_probe(length);
        let rounds = (iterations / chunks as u64).clamp(20, 1000);
        let call = icc::call_async(target, handler::BENCH_RESPONDER, [RESPONDER_LARGE, rounds, me as u64, 0, 0]);
        if !wait_ready() {
            ok &= finish_call(call, "large");
            continue;
        }
        let mut send_costs = Vec::new();
        samples.clear();
        for _ in 0..rounds {
            let start = cpu::read_tsc();
            if super::send_large(target, Kind::Probe, &bytes).is_err() {
                break;
            }
            send_costs.push(cpu::read_tsc() - start);
            if receive_pair_spin(target).is_none() {
                println!("BENCH-ERROR large {chunks}: no acknowledgement");
                break;
            }
            samples.push(cpu::read_tsc() - start);
        }
        let parameter = alloc::format!("{chunks}");
        report("large_send_cost", &parameter, pair, &mut send_costs);
        report("large_roundtrip", &parameter, pair, &mut samples);
        ok &= finish_call(call, "large");
    }
    super::set_mode(target, target_mode);

    // Figure 6.6: multicast sender costs versus group size (members notified by IPI).
    ok &= multicast(iterations, &mut samples);

    // Inter-core call round trip.
    samples.clear();
    for i in 0..iterations {
        let start = cpu::read_tsc();
        if icc::call(target, handler::ECHO, [i, 0, 0, 0, 0], 1000) != Ok(i) {
            println!("BENCH-ERROR icc: wrong or no reply");
            ok = false;
            break;
        }
        samples.push(cpu::read_tsc() - start);
    }
    report("icc_roundtrip", super::queue_mode(target).name(), pair, &mut samples);
    if ok {
        Ok(())
    } else {
        Err(RunError::Incomplete)
    }
}

fn multicast(iterations: u64, samples: &mut Vec<u64>) -> bool {
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
        super::set_mode(member, NotifyMode::Ipi);
        if icc::call(member, handler::GROUP_JOIN, [0; 5], 1000).is_err() {
            println!("BENCH-ERROR multicast: core {member} did not join");
            ok = false;
            break;
        }
        members.push(member);
        let mut notify_costs = Vec::with_capacity(iterations as usize);
        samples.clear();
        for sequence in 0..iterations {
            let deadline = cpu::read_tsc() + shared::facts().tsc_hz;
            while group.nr_slots_in_use() != 0 && cpu::read_tsc() < deadline {
                cpu::relax();
            }
            // Let the members fall asleep again, so the next insertion is measured against
            // quiet members (Popcorn spaces its trials the same way).
            spin_cycles(shared::facts().tsc_hz / 20_000);
            let probe = Probe { from: me as u16, sequence, sent_tsc: cpu::read_tsc() };
            match super::send_group(0, &line(Kind::Probe, |out| probe.encode(out))) {
                Ok((insert, notify_cycles)) => {
                    samples.push(insert);
                    notify_costs.push(notify_cycles);
                }
                Err(error) => {
                    println!("BENCH-ERROR multicast: {error}");
                    ok = false;
                    break;
                }
            }
        }
        let parameter = alloc::format!("{size}");
        report("multicast_insert_cost", &parameter, (me, member), samples);
        report("multicast_notify_cost", &parameter, (me, member), &mut notify_costs);
    }
    for member in members {
        let _ = icc::call(member, handler::GROUP_LEAVE, [0; 5], 1000);
    }
    for (core, mode) in modes.iter().enumerate().take(cores) {
        super::set_mode(core, *mode);
    }
    ok
}
