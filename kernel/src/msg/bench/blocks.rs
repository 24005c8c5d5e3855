//! The initiator's measurement blocks: cache line, IPIs, pair messages, the receive path, multicast.

use super::*;

pub(super) fn set_pair_modes(a: usize, b: usize, mode: NotifyMode) {
    let channels = &area().cores;
    channels[b].pair_modes[a].store(mode as u32, Ordering::Release);
    channels[a].pair_modes[b].store(mode as u32, Ordering::Release);
}

/// Each ratio's two sides are measured in this many alternating blocks.
pub(super) const BLOCKS: u64 = 4;

/// Table 6.1: `n` round trips of a line-sized message between two cache lines.
pub(super) fn cacheline_block(out: &mut dyn Write, target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
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
pub(super) fn ipi_poll_back_block(out: &mut dyn Write, target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
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
pub(super) fn ipi_pingpong_block(out: &mut dyn Write, target: usize, n: u64, samples: &mut Vec<u64>) -> bool {
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
pub(super) fn pair_block(
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
        let mut senders = super::super::send::PAIR_SENDERS.lock();
        let mut receivers = super::super::receive::PAIR_RECEIVERS.lock();
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
pub(super) fn local_path_costs(out: &mut dyn Write, pair: (usize, usize)) -> bool {
    let me = shared::this_core() as usize;
    let mut senders = super::super::send::PAIR_SENDERS.lock();
    let mut receivers = super::super::receive::PAIR_RECEIVERS.lock();
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
pub(super) enum Waiting {
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
pub(super) fn drain_block(
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
    let modes = (super::super::queue_mode(me), super::super::queue_mode(target));
    set_pair_modes(me, target, mode);
    if mode != NotifyMode::Poll {
        // The responder's idle loop sleeps at once (its queue mode), and so does this core
        // when it waits sleeping.
        super::super::notify::set_mode(target, mode);
        if waiting == Waiting::Sleeping {
            super::super::notify::set_mode(me, mode);
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
                    super::super::wait_for_messages();
                }
                super::super::drain();
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
    super::super::notify::set_mode(me, modes.0);
    super::super::notify::set_mode(target, modes.1);
    finished
}

/// What the kernel's real receive path costs on one core, with no cache line crossing: a
/// `drain()` that finds nothing (one scan of every channel), and a probe sent to this core's
/// own URPC ring with `try_send_pair` and handled by `drain()` (receive_one, dispatch, the
/// registered handler, and the scan that finds nothing more). Per operation, batches of 100.
pub(super) fn local_drain_costs(out: &mut dyn Write, pair: (usize, usize)) -> bool {
    let me = shared::this_core() as usize;
    const BATCH: u64 = 100;
    let message = line(Kind::Probe, |out| Probe { from: me as u16, sequence: 1, sent_tsc: 2 }.encode(out));
    let (mut empty, mut one) = (Vec::with_capacity(100), Vec::with_capacity(100));
    let mut failures = 0;
    for _ in 0..100 {
        let start = cpu::read_tsc();
        for _ in 0..BATCH {
            failures += super::super::drain() as u64;
        }
        empty.push((cpu::read_tsc() - start) / BATCH);
        let before = PROBES_RECEIVED.load(Ordering::Relaxed);
        let start = cpu::read_tsc();
        for _ in 0..BATCH {
            failures += u64::from(try_send_pair(me, &message).is_err());
            super::super::drain();
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

/// Figure 6.6: per group size, the sender's cost to insert a line into the group ring, to
/// notify the members, and the two together (what a sender pays), into `buffers`.
pub(super) fn multicast(out: &mut dyn Write, iterations: u64, buffers: [&mut Vec<u64>; 3]) -> bool {
    let [insert_costs, notify_costs, send_costs] = buffers;
    let me = shared::this_core() as usize;
    let cores = super::super::messaging_cores();
    let group = &area().groups[0];
    group.reopen();
    let mut ok = true;
    let mut modes = [NotifyMode::Hybrid; MESSAGING_CORES];
    for (core, mode) in modes.iter_mut().enumerate().take(cores) {
        *mode = super::super::queue_mode(core);
    }
    let mut members = Vec::new();
    for size in 1..cores {
        let member = (1..cores).find(|c| *c != me && !members.contains(c));
        let Some(member) = member else { break };
        super::super::notify::set_mode(member, NotifyMode::Ipi);
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
            match super::super::group::send_group(0, &line(Kind::Probe, |out| probe.encode(out))) {
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
        super::super::notify::set_mode(core, *mode);
    }
    ok
}
