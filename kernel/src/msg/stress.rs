//! Message stress and garbage tests: nothing lost, nothing duplicated, every bad line dropped
//! and counted, no kernel panics.

use super::{area, icc, line, send_blocking, try_send_pair, Handler, HandlerResult, NotifyMode, MESSAGING_CORES};
use crate::arch::cpu;
use crate::core::kcb::CoreState;
use crate::core::shared;
use ::core::sync::atomic::{AtomicU64, Ordering};
use abi::message::{handler, DecodeError, Kind, Ping, PAYLOAD_SIZE};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use channel::{LargeMessageChunks, Message};
use spin::Mutex;

/// Tags of stress traffic: which channel a sequence number belongs to.
const TAG_QUEUE: u64 = 1;
const TAG_PAIR: u64 = 2;
const TAG_GROUP: u64 = 3;
/// Multicast group the stress test uses.
const STRESS_GROUP: usize = 1;
/// Bytes of each large stress message (24 chunks).
const LARGE_LENGTH: usize = 1100;

/// Next expected sequence per (sender, channel tag) on this receiver (private).
static EXPECTED: Mutex<[[u64; 4]; MESSAGING_CORES]> = Mutex::new([[0; 4]; MESSAGING_CORES]);
/// Next sequence per (target, channel tag) on this sender (private).
static NEXT: Mutex<[[u64; 4]; MESSAGING_CORES]> = Mutex::new([[0; 4]; MESSAGING_CORES]);

/// `EXPECTED` value meaning "take the next sequence as it comes".
const UNKNOWN: u64 = u64::MAX;

pub(super) fn register_handlers() {
    // A restarted instance starts with no record of what its previous life received: the
    // senders go on numbering, so the first line from each is its baseline.
    if shared::this_kcb().incarnation.load(Ordering::Relaxed) > 1 {
        *EXPECTED.lock() = [[UNKNOWN; 4]; MESSAGING_CORES];
    }
    super::register(Kind::Stress, Handler { high_priority: false, on_line: Some(on_stress), on_large: None });
    super::register(Kind::StressLarge, Handler { high_priority: false, on_line: None, on_large: Some(on_large) });
    icc::register_outside_sends(handler::STRESS_SENDER, |arguments| {
        send_share(arguments[0], arguments[1] != 0, arguments[2]);
        Ok(0)
    });
}

fn counters() -> &'static super::MessageCounters {
    &shared::this_kcb().messages
}

fn on_stress(message: &Message) -> HandlerResult {
    let ping = Ping::decode(message.payload())?;
    let (from, tag) = (ping.from as usize, ping.tag as usize);
    if from >= MESSAGING_CORES || !(1..=3).contains(&tag) {
        return Err(DecodeError::BadField("stress sender or tag"));
    }
    let mut expected = EXPECTED.lock();
    if ping.sequence != expected[from][tag] && expected[from][tag] != UNKNOWN {
        counters().order_errors.fetch_add(1, Ordering::Relaxed);
    }
    expected[from][tag] = ping.sequence + 1;
    Ok(())
}

fn large_body(from: u16, sequence: u64) -> Vec<u8> {
    let mut body = Vec::with_capacity(LARGE_LENGTH);
    body.extend_from_slice(&from.to_le_bytes());
    body.extend_from_slice(&sequence.to_le_bytes());
    let seed = sequence.wrapping_mul(0x9E37_79B9) ^ u64::from(from);
    body.extend((0..LARGE_LENGTH - 18).map(|i| (seed as usize).wrapping_add(i * 31) as u8));
    let sum = fnv(&body);
    body.extend_from_slice(&sum.to_le_bytes());
    body
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, b| (hash ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

fn on_large(bytes: &[u8]) -> HandlerResult {
    if bytes.len() != LARGE_LENGTH {
        return Err(DecodeError::BadLength { expected: LARGE_LENGTH, found: bytes.len() });
    }
    let (body, sum) = bytes.split_at(LARGE_LENGTH - 8);
    if fnv(body).to_le_bytes() != sum {
        return Err(DecodeError::BadField("large checksum"));
    }
    counters().large_ok.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The next stress line to `to` on channel `tag`; its sequence number is taken only by
/// [`sent`], once the line is in the channel, so a refused send leaves no gap.
fn stress_line(to: usize, tag: u64) -> Message {
    let sequence = NEXT.lock()[to][tag as usize];
    let ping = Ping { from: shared::this_core() as u16, sequence, sent_tsc: cpu::read_tsc(), tag };
    line(Kind::Stress, |out| ping.encode(out))
}

fn sent(to: usize, tag: u64) {
    NEXT.lock()[to][tag as usize] += 1;
}

/// Sends with `send` until it succeeds, draining meanwhile; false (and `to` is given up on
/// for the rest of the share) once the target stopped running or stayed stuck.
fn deliver(to: usize, tag: u64, mut send: impl FnMut() -> Result<(), super::SendError>) -> bool {
    let patience = super::Patience::new(to, super::SEND_TIMEOUT_MS);
    loop {
        match send() {
            Ok(()) => {
                sent(to, tag);
                return true;
            }
            Err(super::SendError::Channel(channel::ChannelError::Full)) if patience.check().is_ok() => {
                super::drain();
            }
            Err(error) => {
                log::debug!("stress traffic to core {to} stops: {error}");
                return false;
            }
        }
    }
}

/// This core's share: `per_target` lines to every other core of `participants` (a bit per
/// core) on its receive queue, a quarter as many on the URPC ring, and (the leader only) large
/// and multicast messages. A target that stops running is left out from then on (the restart
/// test kills one).
fn send_share(per_target: u64, with_large: bool, participants: u64) {
    let me = shared::this_core() as usize;
    let cores = super::messaging_cores();
    let mut given_up = [false; MESSAGING_CORES];
    for i in 0..per_target {
        for to in (0..cores).filter(|t| *t != me && participants & (1 << t) != 0) {
            if given_up[to] {
                continue;
            }
            let message = stress_line(to, TAG_QUEUE);
            let mut delivered = deliver(to, TAG_QUEUE, || send_blocking(to, &message));
            if delivered && i.is_multiple_of(4) {
                let message = stress_line(to, TAG_PAIR);
                delivered = deliver(to, TAG_PAIR, || try_send_pair(to, &message));
            }
            if delivered && with_large && i.is_multiple_of(512) {
                let sequence = NEXT.lock()[to][0];
                let body = large_body(me as u16, sequence);
                delivered = deliver(to, 0, || super::send_large(to, Kind::StressLarge, &body));
            }
            given_up[to] = !delivered;
        }
        if with_large && i.is_multiple_of(64) {
            let message = stress_line(0, TAG_GROUP);
            while super::group::send_group(STRESS_GROUP, &message).is_err() {
                super::drain();
            }
            sent(0, TAG_GROUP);
        }
        if i.is_multiple_of(64) {
            super::drain();
        }
    }
}

/// Opens the stress group and has every participant but this one (the leader) join it;
/// returns the members.
fn join_stress_group(participants: &[usize]) -> Result<Vec<usize>, String> {
    let me = shared::this_core() as usize;
    let members: Vec<usize> = participants.iter().copied().filter(|&core| core != me).collect();
    area().groups[STRESS_GROUP].reopen();
    for member in &members {
        icc::call(*member, handler::GROUP_JOIN, [STRESS_GROUP as u64, 0, 0, 0, 0], 2000)
            .map_err(|e| format!("core {member} did not join the stress group: {e}"))?;
    }
    Ok(members)
}

fn sum(field: impl Fn(&super::MessageCounters) -> &AtomicU64) -> u64 {
    let region = shared::get();
    (0..super::messaging_cores()).map(|c| field(&region.kcb(c).messages).load(Ordering::Relaxed)).sum()
}

/// How long the stress waits for a moment with nothing in flight before it starts.
const QUIET_WAIT_MS: u64 = 200;

/// The sent, received and dropped counts of every core, taken when nothing is in flight if
/// such a moment comes within [`QUIET_WAIT_MS`]. The balance at the end compares what was
/// sent and what was handled since this snapshot: a line of other traffic (a file call of a
/// program starting beside the stress, a park's ICC) sent before it and handled after would
/// count as one handled too many, and the balance could never be reached.
fn quiet_snapshot() -> (u64, u64, u64) {
    let deadline = crate::time::deadline_after_ms(QUIET_WAIT_MS);
    loop {
        // Handled first, then sent: every line handled was sent before.
        let received = sum(|c| &c.received);
        let dropped = sum(|c| &c.dropped);
        let sent = sum(|c| &c.sent);
        if sent == received + dropped || cpu::read_tsc() > deadline {
            return (sent, received, dropped);
        }
        super::drain();
        cpu::relax();
    }
}

/// `test=msg-stress`: at least `total` lines among the cores of `participants` (a bit per
/// core; `u64::MAX`: all), in every notification mode and every kind (unicast queue, URPC,
/// large, multicast); then the counters must balance. The cores left out may stop, restart or
/// do anything else meanwhile.
pub fn run_stress(total: u64, participants: u64) -> Result<String, String> {
    let me = shared::this_core() as usize;
    let chosen: Vec<usize> =
        (0..super::messaging_cores()).filter(|&core| participants & (1 << core) != 0 || core == me).collect();
    let participants = chosen.iter().fold(0u64, |mask, core| mask | 1 << core);
    let cores = chosen.len();
    if cores < 2 {
        return Err(String::from("needs at least 2 cores"));
    }
    if let Some(core) = chosen.iter().find(|&&core| !super::is_live(core)) {
        return Err(alloc::format!("core {core} is not running: leave it out of the stress"));
    }
    let facts = shared::facts();
    let modes: Vec<NotifyMode> =
        NotifyMode::ALL.iter().copied().filter(|m| *m != NotifyMode::Mwait || facts.has_mwait).collect();
    let per_mode = total.div_ceil(modes.len() as u64);
    // Each core sends 1.25 lines per iteration to each other core.
    let per_target = (per_mode * 4).div_ceil(5 * (cores * (cores - 1)) as u64);
    let members = join_stress_group(&chosen)?;
    let (start_sent, start_received, start_dropped) = quiet_snapshot();
    let start_large = sum(|c| &c.large_ok);
    let start_order = sum(|c| &c.order_errors);
    let started = cpu::read_tsc();
    for mode in &modes {
        for &core in &chosen {
            super::notify::set_mode(core, *mode);
        }
        // Every core but the leader (the core running this: core 0 for `test=`, any core
        // for `msg stress`) sends its share when asked; the leader sends its own.
        let calls: Vec<(usize, u32)> = chosen
            .iter()
            .filter(|&&core| core != me)
            .map(|&core| {
                icc::call_async(core, handler::STRESS_SENDER, [per_target, 0, participants, 0, 0]).map(|id| (core, id))
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("stress senders not started: {e}"))?;
        send_share(per_target, true, participants);
        for (core, id) in calls {
            icc::wait(id, 120_000)
                .map_err(|e| format!("core {core} did not finish its share in {}: {e}", mode.name()))?;
        }
    }
    for &core in &chosen {
        super::notify::set_mode(core, NotifyMode::Hybrid);
    }
    // Quiescence: every published line received or dropped.
    let deadline = cpu::read_tsc() + facts.tsc_hz * 10;
    // One snapshot: what was handled first, then what was sent (every handled line was sent
    // before), so equal counts mean nothing was in flight at that moment, even with other
    // traffic going on (a shell, a role change, a program on an AC).
    let balance = || {
        let done = sum(|c| &c.received) - start_received + sum(|c| &c.dropped) - start_dropped;
        let sent = sum(|c| &c.sent) - start_sent;
        (sent, done)
    };
    let (mut sent, mut done) = balance();
    while sent != done && cpu::read_tsc() < deadline {
        super::drain();
        (sent, done) = balance();
    }
    for member in &members {
        let _ = icc::call(*member, handler::GROUP_LEAVE, [STRESS_GROUP as u64, 0, 0, 0, 0], 2000);
    }
    let dropped = sum(|c| &c.dropped) - start_dropped;
    let large = sum(|c| &c.large_ok) - start_large;
    let order_errors = sum(|c| &c.order_errors) - start_order;
    let large_expected = (cores as u64 - 1) * per_target.div_ceil(512) * modes.len() as u64;
    let seconds = (cpu::read_tsc() - started) as f64 / facts.tsc_hz as f64;
    let mode_names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
    let detail = format!(
        "sent {sent} received+dropped {done} dropped {dropped} order/checksum errors {order_errors} large {large}/{large_expected} \
         modes {} {}in {seconds:.1} s",
        mode_names.join(","),
        if facts.has_mwait { "" } else { "(mwait not offered by the CPU) " }
    );
    // Leak check: every multicast slot was freed by its last reader.
    let group_slots = area().groups[STRESS_GROUP].nr_slots_in_use();
    if group_slots != 0 {
        return Err(format!("{detail}; {group_slots} multicast slots still in use"));
    }
    if sent < total || sent != done || dropped != 0 || order_errors != 0 || large != large_expected {
        return Err(detail);
    }
    Ok(detail)
}

/// Sum over the messaging cores of every line's fate: (sent, received + dropped + lost).
fn fates() -> (u64, u64) {
    (sum(|c| &c.sent), sum(|c| &c.received) + sum(|c| &c.dropped) + sum(|c| &c.lost))
}

/// Waits (draining) until `done`, at most `milliseconds`.
// In-guest tests (`test-hooks`) drive it; a benchmark image (`bench` alone) does not.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
fn drain_until(milliseconds: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz / 1000 * milliseconds;
    while !done() {
        if cpu::read_tsc() > deadline {
            return false;
        }
        super::drain();
    }
    true
}

/// `test=msg-restart:N`: every core but 0 sends its stress share (core 1 also large and
/// multicast messages) while core 0 makes core N fault inside a handler midway, restarts it,
/// and then checks: the others finished their shares; core N answers pings and inter-core
/// calls again; every line ever sent was received, dropped or counted lost (sent = received +
/// dropped + lost, summed over all cores), none out of order or duplicated, none dropped.
// In-guest tests (`test-hooks`) drive it; a benchmark image (`bench` alone) does not.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
pub fn run_restart(victim: usize, per_target: u64) -> Result<String, String> {
    let cores = super::messaging_cores();
    if cores < 3 || victim == 0 || victim >= cores {
        return Err(format!("needs 3 or more cores and a victim from 1 to {}", cores.saturating_sub(1)));
    }
    let region = shared::get();
    let everyone: Vec<usize> = (0..cores).collect();
    let members = join_stress_group(&everyone)?;
    let order_before = sum(|c| &c.order_errors);
    let dropped_before = sum(|c| &c.dropped);
    let lost_before = sum(|c| &c.lost);
    let victim_kcb = region.kcb(victim);
    let received_before = victim_kcb.messages.received.load(Ordering::Relaxed);
    let calls: Vec<(usize, u32)> = (1..cores)
        .map(|core| {
            icc::call_async(core, handler::STRESS_SENDER, [per_target, u64::from(core == 1), u64::MAX, 0, 0])
                .map(|id| (core, id))
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("stress senders not started: {e}"))?;
    // Midway: once the victim has taken a good share of its traffic.
    let midway = per_target * (cores as u64 - 2) / 2;
    if !drain_until(30_000, || victim_kcb.messages.received.load(Ordering::Relaxed) - received_before >= midway) {
        return Err(format!("core {victim} did not receive {midway} lines in 30 s"));
    }
    // The victim dies holding tickets in a witness's queue: that receiver must skip them.
    let witness = (1..cores).find(|c| *c != victim).expect("3 or more cores");
    let witness_lost = region.kcb(witness).messages.lost.load(Ordering::Relaxed);
    let fault_call = icc::call_async(victim, handler::FAULT_NOW, [1, witness as u64, 0, 0, 0])
        .map_err(|e| format!("fault request: {e}"))?;
    if !drain_until(10_000, || victim_kcb.state() == CoreState::Faulted) {
        return Err(format!("core {victim} is {} after it was told to fault", victim_kcb.state().name()));
    }
    let incarnation = victim_kcb.incarnation.load(Ordering::Relaxed);
    // The cores layer's own START_CORE handler, run here: messaging names no layer above it.
    icc::run_here(handler::START_CORE, [victim as u64, 0, 0, 0, 0])
        .map_err(|e| format!("core {victim} not restarted: {e}"))?;
    if !drain_until(5_000, || victim_kcb.state() == CoreState::Running) {
        return Err(format!("core {victim} is {} after the restart", victim_kcb.state().name()));
    }
    for (core, id) in calls {
        let result = icc::wait(id, 120_000);
        match (core == victim, result) {
            (false, Err(e)) => return Err(format!("core {core} did not finish its share: {e}")),
            (true, Ok(_)) => return Err(format!("core {victim} finished its share although it faulted")),
            _ => {}
        }
    }
    if icc::wait(fault_call, 1000).is_ok() {
        return Err(format!("core {victim} answered the call it faulted in"));
    }
    // The new kernel on the victim answers like any other.
    let echo = icc::call(victim, handler::ECHO, [77, 0, 0, 0, 0], 2000);
    if echo != Ok(77) {
        return Err(format!("restarted core {victim} answered ECHO with {echo:?}"));
    }
    super::ping(victim, 20).map_err(|e| format!("restarted core {victim} does not answer pings: {e}"))?;
    // Quiescence: every line has met its fate.
    drain_until(10_000, || fates().0 == fates().1);
    for member in &members {
        let _ = icc::call(*member, handler::GROUP_LEAVE, [STRESS_GROUP as u64, 0, 0, 0, 0], 2000);
    }
    drain_until(2_000, || fates().0 == fates().1);
    let (sent, fated) = fates();
    let witness_skipped = region.kcb(witness).messages.lost.load(Ordering::Relaxed) - witness_lost;
    let order_errors = sum(|c| &c.order_errors) - order_before;
    let dropped = sum(|c| &c.dropped) - dropped_before;
    let lost = sum(|c| &c.lost) - lost_before;
    let group_slots = area().groups[STRESS_GROUP].nr_slots_in_use();
    let detail = format!(
        "core {victim} faulted mid-stream and came back as incarnation {}; sent {sent} received+dropped+lost {fated} \
         lost {lost} (core {witness} skipped {witness_skipped} tickets core {victim} died holding) dropped {dropped} \
         order errors {order_errors}, group slots in use {group_slots}",
        incarnation + 1
    );
    if sent != fated || dropped != 0 || order_errors != 0 || witness_skipped < 3 || group_slots != 0 {
        return Err(detail);
    }
    Ok(detail)
}

/// Lines that must be dropped, and lines around them that must be accepted.
// In-guest tests (`test-hooks`) drive it; a benchmark image (`bench` alone) does not.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
fn garbage() -> (Vec<Message>, u64, u64) {
    let mut lines = Vec::new();
    let mut payload = [0u8; PAYLOAD_SIZE];
    let ping = Ping { from: 0, sequence: 1, sent_tsc: 2, tag: 9 };
    let length = ping.encode(&mut payload);
    let good = Message::new(Kind::Ping as u16, &payload[..length]).expect("fits");
    // Unknown kind.
    lines.push(Message { kind: 4000, ..good });
    // Header length beyond the payload, twice.
    lines.push(Message { len: 57, ..good });
    lines.push(Message { len: 255, ..good });
    // Payload shorter than the kind's layout.
    lines.push(Message { len: 10, ..good });
    // Torn/forged payload: checksum mismatch.
    let mut torn = good;
    torn.payload[3] ^= 0x40;
    lines.push(torn);
    let mut dropped = 5;
    let mut accepted = 0;
    let chunks = |id: u32, length: usize| -> Vec<Message> {
        let bytes = alloc::vec![0x5a; length];
        LargeMessageChunks::new(Kind::StressLarge as u16, id, &bytes).expect("valid").collect()
    };
    let three = channel::FIRST_CHUNK_DATA_LEN + channel::CHUNK_DATA_LEN + 10;
    // Chunk overrun: the last chunk claims more data than the announced total.
    let c = chunks(100, three);
    lines.extend_from_slice(&c[..2]);
    lines.push(Message { len: PAYLOAD_SIZE as u8, ..c[2] });
    accepted += 2;
    dropped += 1;
    // Chunk gap: 0 then 2.
    let c = chunks(101, three);
    lines.push(c[0]);
    lines.push(c[2]);
    accepted += 1;
    dropped += 1;
    // Duplicate chunk.
    let c = chunks(102, three);
    lines.extend_from_slice(&[c[0], c[1], c[1]]);
    accepted += 2;
    dropped += 1;
    // A chunk with no first chunk before it.
    lines.push(chunks(103, three)[1]);
    dropped += 1;
    // A first chunk announcing 3 MiB: over the reassembly budget, refused before any
    // allocation (the budget once let one message claim most of the (then 4 MiB) heap).
    let mut announcement = chunks(104, three)[0];
    let total: u64 = 3 << 20;
    announcement.payload[8..16].copy_from_slice(&total.to_le_bytes());
    announcement.payload[16..20].copy_from_slice(&(channel::chunk_count(total) as u32).to_le_bytes());
    lines.push(announcement);
    dropped += 1;
    (lines, dropped, accepted)
}

/// `test=msg-garbage`: inject malformed lines into a core's queue (another core's, and this
/// core's own); every one must be dropped and counted, the good ones accepted, and the
/// receiver must still answer.
// In-guest tests (`test-hooks`) drive it; a benchmark image (`bench` alone) does not.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
pub fn run_garbage() -> Result<String, String> {
    let me = shared::this_core() as usize;
    let cores = super::messaging_cores();
    let mut targets = alloc::vec![me];
    if cores > 1 {
        targets.insert(0, (me + 1) % cores);
    }
    let mut report = Vec::new();
    for target in targets {
        let kcb = shared::get().kcb(target);
        let received_before = kcb.messages.received.load(Ordering::Relaxed);
        let dropped_before = kcb.messages.dropped.load(Ordering::Relaxed);
        let (lines, dropped, accepted) = garbage();
        for message in &lines {
            // Raw injection, bypassing the typed senders, as a buggy or hostile kernel would.
            while area().cores[target].normal.try_send(me, message).is_err() {
                super::drain();
            }
            counters().sent.fetch_add(1, Ordering::Relaxed);
        }
        super::notify(target, NotifyMode::Ipi);
        let deadline = cpu::read_tsc() + shared::facts().tsc_hz * 2;
        let seen = || {
            (
                kcb.messages.received.load(Ordering::Relaxed) - received_before,
                kcb.messages.dropped.load(Ordering::Relaxed) - dropped_before,
            )
        };
        while seen().0 + seen().1 < lines.len() as u64 && cpu::read_tsc() < deadline {
            if target == me {
                super::drain();
            }
            cpu::relax();
        }
        let (got_received, got_dropped) = seen();
        if got_dropped != dropped || got_received != accepted {
            return Err(format!(
                "core {target}: dropped {got_dropped} (expected {dropped}), accepted {got_received} (expected {accepted})"
            ));
        }
        let alive = icc::call(target, handler::ECHO, [77, 0, 0, 0, 0], 1000);
        if alive != Ok(77) {
            return Err(format!("core {target} does not answer after the garbage: {alive:?}"));
        }
        report.push(format!("core {target}: {dropped} dropped, {accepted} accepted"));
    }
    Ok(report.join("; "))
}
