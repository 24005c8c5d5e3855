//! Fault injection for `test=msg-restart` (feature `test-hooks`): a core told to fault inside a
//! message handler, optionally holding tickets it will never publish.

use super::{add, area, counters, icc, line, notify, queue_mode};
use crate::arch::cpu;
use crate::core::shared;
use abi::message::{handler, Kind, Probe};

/// `test=msg-restart` only: takes four tickets in `target`'s normal queue with one
/// reservation, publishes the first and keeps the other three, so that the fault that follows
/// leaves `target`'s receiver behind tickets their holder will never publish.
pub fn hold_tickets_for_fault(target: usize) {
    let me = shared::this_core() as usize;
    let Some(channels) = area().cores.get(target) else { return };
    let Ok(mut reservation) = channels.normal.reserve(me, 4) else { return };
    add(&counters().sent, 4);
    let probe = Probe { from: me as u16, sequence: 0, sent_tsc: cpu::read_tsc() };
    let _ = reservation.push(&line(Kind::Probe, |out| probe.encode(out)));
    notify(target, queue_mode(target));
    log::warn!("test msg-restart: core {me} holds 3 unpublished tickets in core {target}'s queue");
    // Never dropped: dropping would pad the slots, and the point is to die holding them.
    ::core::mem::forget(reservation);
}

/// Registers the `FAULT_NOW` handler on this instance (`boot` does, when `test=msg-restart`
/// is asked for): the core faults inside it, after taking tickets in core `arguments[1]`'s
/// queue if `arguments[0]` is 1.
pub fn register_fault_now() {
    icc::register(handler::FAULT_NOW, |arguments| {
        if arguments[0] == 1 {
            hold_tickets_for_fault(arguments[1] as usize);
        }
        log::warn!("test msg-restart: core {} faults inside a handler on purpose", shared::this_core());
        cpu::store_to_unmapped_address(0xdead_b000);
        Ok(0)
    });
}
