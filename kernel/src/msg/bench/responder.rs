//! The responder's side of `msg bench`, on the target core: its ICC handler, probe echoes and receive loops.

use super::*;

pub(super) const RESPONDER_CACHELINE: u64 = 0;

pub(super) const RESPONDER_IPI_ECHO: u64 = 1;

pub(super) const RESPONDER_PAIR: u64 = 2;

pub(super) const RESPONDER_LARGE: u64 = 3;

pub(super) const RESPONDER_IPI_POLL_BACK: u64 = 4;

pub(super) const RESPONDER_DRAIN: u64 = 5;

/// Benchmark IPIs this instance took (private).
pub(super) static BENCH_IPIS: AtomicU64 = AtomicU64::new(0);

/// APIC id + 1 to echo each benchmark IPI to (0: no echo), set by this core's responder.
pub(super) static ECHO_TO: AtomicU32 = AtomicU32::new(0);

/// Probes this instance's handler accepted and did not echo: the replies an initiator waits
/// for, and the multicast probes a member receives. Only this core writes it.
pub(super) static PROBES_RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Core id + 1 whose probes the handler echoes (0: none), set by this core's responder.
pub(super) static ECHO_PROBES_TO: AtomicU32 = AtomicU32::new(0);

/// Probes the handler still echoes before it stops.
pub(super) static ECHO_REMAINING: AtomicU64 = AtomicU64::new(0);

/// From the benchmark IPI vector: count it and, when responding, send it straight back.
pub fn on_bench_interrupt() {
    BENCH_IPIS.fetch_add(1, Ordering::Release);
    let echo = ECHO_TO.load(Ordering::Relaxed);
    if echo != 0 {
        apic::local().send_ipi(echo - 1, idt::VECTOR_BENCH);
    }
}

pub(in crate::msg) fn register_handlers() {
    // Probes reaching the normal dispatch path (the real-path round trips, multicast members)
    // are validated, then echoed or counted.
    super::super::register(
        Kind::Probe,
        Handler { high_priority: false, on_line: Some(on_probe), on_large: Some(check_large_probe) },
    );
    icc::register(handler::BENCH_RESPONDER, respond);
}

/// The registered handler of probes: decode, then echo the probe to its sender with the
/// normal send function while this core's responder asks for it, else count it.
pub(super) fn on_probe(message: &Message) -> HandlerResult {
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

pub(super) fn check_large_probe(bytes: &[u8]) -> HandlerResult {
    let expected = bytes.iter().enumerate().all(|(i, b)| *b == (i as u8).wrapping_mul(7));
    if expected {
        Ok(())
    } else {
        Err(abi::message::DecodeError::BadField("large probe pattern"))
    }
}

pub(super) fn large_probe(length: usize) -> Vec<u8> {
    (0..length).map(|i| (i as u8).wrapping_mul(7)).collect()
}

/// The responder side, run on the other core as an ICC handler.
pub(super) fn respond(arguments: &[u64; 5]) -> Result<u64, IccStatus> {
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
pub(super) fn drain_responder(initiator: usize, iterations: u64, mode: NotifyMode) -> Result<u64, IccStatus> {
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
        super::super::drain();
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
pub(super) fn wait_pair_message(
    receiver: &mut UrpcReceiver<'static, { super::super::PAIR_SLOTS }>,
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
        if let Some(message) = super::super::wait::sleep_armed(line, false, || receiver.try_recv()) {
            let now = cpu::read_tsc();
            return Some((message, now, now));
        }
        spin_start = cpu::read_tsc();
    }
}

/// The sending side of a URPC pair held for a whole measurement: the endpoint, the counter and
/// the notification-mode word are resolved once, so each send costs what the channel costs
/// (what `try_send_pair` does, without its lock and lookups).
pub(super) struct HeldLink<'a> {
    sender: &'a mut UrpcSender<'static, { super::super::PAIR_SLOTS }>,
    to: usize,
    mode: &'static AtomicU32,
    sent: &'static AtomicU64,
}

impl<'a> HeldLink<'a> {
    pub(super) fn new(sender: &'a mut UrpcSender<'static, { super::super::PAIR_SLOTS }>, to: usize) -> Self {
        let me = shared::this_core() as usize;
        Self { sender, to, mode: &area().cores[to].pair_modes[me], sent: &shared::this_kcb().messages.sent }
    }

    pub(super) fn send(&mut self, message: &Message) {
        while self.sender.try_send(message).is_err() {
            cpu::relax();
        }
        // Only this core writes its counters.
        self.sent.store(self.sent.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let mode = NotifyMode::from_u32(self.mode.load(Ordering::Relaxed));
        if mode != NotifyMode::Poll {
            super::super::notify(self.to, mode);
        }
    }
}

/// Answers each probe on the URPC ring from `initiator`. With `timestamps`, also measures
/// the receive-side breakdown (which costs TSC reads, so round trips are measured without).
pub(super) fn pair_responder(
    initiator: usize,
    iterations: u64,
    mode: NotifyMode,
    timestamps: bool,
) -> Result<u64, IccStatus> {
    let me = shared::this_core() as u16;
    let failed = IccStatus::Failed;
    let mut senders = super::super::send::PAIR_SENDERS.lock();
    let mut receivers = super::super::receive::PAIR_RECEIVERS.lock();
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

pub(super) fn large_responder(initiator: usize, iterations: u64) -> Result<u64, IccStatus> {
    let me = shared::this_core() as u16;
    area().bench.ready.0.store(1, Ordering::Release);
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 20;
    let mut done = 0;
    while done < iterations {
        if cpu::read_tsc() > deadline {
            return Err(IccStatus::Failed);
        }
        let mut receivers = super::super::receive::RECEIVERS.lock();
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

pub(super) fn receive_pair_spin(from: usize) -> Option<Message> {
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 10;
    let mut receivers = super::super::receive::PAIR_RECEIVERS.lock();
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
