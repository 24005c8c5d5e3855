//! Sending an image and waiting for the answer; the handlers that take one in and answer.

use super::image::{pack, Packed, References};
use super::install::{install, Arrival};
use super::policy::error_text;
use crate::core::shared;
use crate::proc::{Errno, Process};
use crate::sched::{self, WaitToken, Wakeup};
use abi::message::Kind;
use abi::migration::{MoveImage, MoveReply, MovedThread};
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;

/// How long a packed process waits for the destination's answer.
const MOVE_TIMEOUT_MS: u64 = 2000;

/// Answers to moves this instance sent, by move id: `None` until the destination answers.
static ANSWERS: Mutex<BTreeMap<u64, Option<u32>>> = Mutex::new(BTreeMap::new());

/// Packs `process` (its threads stopped as `threads` say) and sends it to `destination`;
/// `Ok` once the destination runs it.
/// Returns the signals the image carried pending.
pub(super) fn hand_over(
    process: &Arc<Process>,
    threads: &[MovedThread],
    destination: usize,
) -> Result<Vec<u32>, Errno> {
    let packed_tsc = crate::arch::cpu::read_tsc();
    // The rest of a line it printed goes out from here, before the destination prints more.
    crate::fs::console::flush(&process.console_pending);
    let Packed { bytes, retained, pending, move_id } = pack(process, threads, References::Retain, packed_tsc)?;
    if bytes.len() > crate::msg::MAX_LARGE_MESSAGE {
        return Err(errno::E2BIG);
    }
    // The move's fate: taken by the destination before it builds anything, or abandoned here
    // if its answer is late; never both (`kcb::block::MoveFates`).
    let fates = kcb::block::MoveFates(&shared::this_kcb().moves_out);
    if fates.open(move_id).is_none() {
        return Err(errno::EAGAIN);
    }
    ANSWERS.lock().insert(move_id, None);
    // Not the draining send: a handler run while it waits could send to the same queue, whose
    // sender record this send holds (the nested send would fail).
    if let Err(error) = crate::msg::send_large(destination, Kind::ProcessMove, &bytes) {
        ANSWERS.lock().remove(&move_id);
        fates.close(move_id);
        log::debug!("process {}: the move to core {destination} was not sent: {error}", process.pid);
        return Err(errno::EAGAIN);
    }
    let mut deadline = crate::time::deadline_after_ms(MOVE_TIMEOUT_MS);
    let answer = loop {
        if let Some(answer) = ANSWERS.lock().get(&move_id).copied().flatten() {
            break Some(answer);
        }
        if crate::arch::cpu::read_tsc() >= deadline {
            if fates.abandon(move_id) || !crate::msg::is_live(destination) {
                break None;
            }
            // The destination took it and builds it: its answer comes.
            deadline = crate::time::deadline_after_ms(MOVE_TIMEOUT_MS);
        }
        // Not interruptible: the answer decides where the process lives. A kill ends every
        // wait of the process at once, so a killed packer looks at its messages itself (the
        // answer comes as one): else it spun until the deadline, gave up while the destination
        // ran the process, and both copies let go of the same file references.
        if sched::block_uninterruptible(WaitToken::Reply(move_id), Some(deadline)) == Wakeup::Killed {
            crate::msg::drain();
            crate::arch::cpu::relax();
        }
    };
    ANSWERS.lock().remove(&move_id);
    fates.close(move_id);
    match answer {
        Some(0) => {
            // The references are the destination's now.
            for handle in retained {
                core::mem::forget(handle);
            }
            log::debug!("process {} moved to core {destination}", process.pid);
            // Signals that reach this copy from now on follow it ([`leave`]).
            Ok(pending.iter().map(|s| s.signal).collect())
        }
        Some(error) => Err(error),
        None => Err(errno::ETIMEDOUT),
    }
}

/// Message handler: the destination's answer to a move of ours.
pub(super) fn on_reply(message: &channel::Message) -> crate::msg::HandlerResult {
    let reply = MoveReply::decode(message.payload())?;
    if let Some(slot) = ANSWERS.lock().get_mut(&reply.move_id) {
        *slot = Some(reply.result);
    }
    sched::wake(WaitToken::Reply(reply.move_id), usize::MAX);
    Ok(())
}

/// Message handler: a process moves here.
pub(super) fn on_move(bytes: &[u8]) -> crate::msg::HandlerResult {
    let image = MoveImage::decode(bytes)?;
    let header = image.header;
    let arrived = crate::arch::cpu::read_tsc();
    let result = match install(&image, Arrival::Moved, None) {
        Ok(()) => {
            let us = |cycles: u64| crate::time::cycles_to_ns(cycles) / 1000;
            let now = crate::arch::cpu::read_tsc();
            log::info!(
                "process {} ({}) moved here from core {}: {} threads, {} pages, built in {} us, {} us after its packing began",
                header.pid,
                core::str::from_utf8(image.name).unwrap_or("?"),
                header.origin,
                header.threads,
                header.pages,
                us(now.saturating_sub(arrived)),
                us(now.saturating_sub(header.packed_tsc)),
            );
            0
        }
        Err(error) => {
            log::warn!("process {} from core {} not taken: {}", header.pid, header.origin, error_text(error));
            error
        }
    };
    answer(header.origin as usize, MoveReply { move_id: header.move_id, result });
    Ok(())
}

/// Lines not sent yet (answers to moves, children's exits sent on after their parent): the
/// target's queue was full. A handler must not wait for a queue to drain (the target may be
/// waiting for ours: both would stall until the send timeout), so they go at the next safe
/// point.
static UNSENT: Mutex<Vec<(usize, channel::Message)>> = Mutex::new(Vec::new());
/// Whether a line waits in [`UNSENT`] (sent at the next safe point).
static LINES_HELD: AtomicBool = AtomicBool::new(false);

/// Sends the destination's answer to the move `reply` names back to its origin.
fn answer(origin: usize, reply: MoveReply) {
    send_or_hold(origin, crate::msg::line(Kind::ProcessMoveReply, |out| reply.encode(out)));
}

/// Sends `message` to `target` now, or at the next safe point if its queue is full (from a
/// handler too).
pub(in crate::proc) fn send_or_hold(target: usize, message: channel::Message) {
    match crate::msg::try_send(target, &message) {
        Ok(()) => {}
        Err(crate::msg::SendError::Channel(channel::ChannelError::Full)) => {
            UNSENT.lock().push((target, message));
            LINES_HELD.store(true, Ordering::Relaxed);
        }
        Err(error) => log::warn!("a line of kind {} for core {target} was not sent: {error}", message.kind),
    }
}

/// Sends the lines a full queue held back (at a safe point, never in a handler).
pub(super) fn send_held_lines() {
    if !LINES_HELD.swap(false, Ordering::Relaxed) {
        return;
    }
    let held = core::mem::take(&mut *UNSENT.lock());
    for (target, message) in held {
        if let Err(error) = crate::msg::send_blocking(target, &message) {
            log::warn!("a line of kind {} for core {target} was not sent: {error}", message.kind);
        }
    }
}
