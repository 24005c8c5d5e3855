//! Kernel side of channels: the handler registry, sending, receiving, notification, ICC.
//!
//! Every core owns two many-to-one receive queues (high and normal priority, Popcorn fig. 5.1)
//! and one URPC ring from every other core, all in the shared region's channel area
//! (`core::shared::message_area`, in the base). A receiver copies each message out, validates
//! it and only then dispatches it to the handler registered for its kind; anything malformed
//! or unknown is dropped and counted (`msg stats`). Handlers run in the core's idle loop, never
//! in interrupt context: a notification IPI only wakes the core.
//!
//! `msg` names nothing above it. Services register handlers by kind ([`register`]) and by ICC
//! handler id ([`icc::register`]); how a core waits (parking) is given to it at boot
//! ([`set_wait_strategy`]). Its rooms:
//! - [`area`]: the limits, the channel area and the notification modes;
//! - [`send`]: every way of sending, with the errors and the bounded wait;
//! - [`receive`]: taking lines off the channels, decode then dispatch, `drain`;
//! - [`notify`]: waking a receiver, and setting how it wants to be woken;
//! - [`wait`]: a receiver's sleep, with the wait strategy injected;
//! - [`takeover`]: a restarted kernel's endpoints, and senders waiting out a restart;
//! - [`group`]: multicast groups; [`ping`]: round trips; [`nested`]: sends inside sends;
//! - `bench` and `stress` (feature `bench`), `test_hooks` (feature `test-hooks`).

#![deny(unsafe_code)]

pub mod area;
#[cfg(feature = "bench")]
pub mod bench;
pub mod group;
pub mod icc;
pub mod nested;
pub mod notify;
pub mod ping;
pub mod receive;
pub mod send;
#[cfg(feature = "bench")]
pub mod stress;
pub mod takeover;
#[cfg(feature = "test-hooks")]
pub mod test_hooks;
pub mod wait;

// What other rooms use, at `crate::msg::...`; the rest is reached through its room.
pub use area::{
    area, is_live, messaging_cores, Group, NotifyLine, NotifyMode, ReceiveQueue, DEFAULT_HYBRID_SPIN_NS, GROUPS,
    GROUP_SLOTS, MAX_LARGE_MESSAGE, MESSAGING_CORES, PAIR_SLOTS,
};
pub use group::{join_group, leave_group};
pub use kcb::block::MessageCounters;
pub use notify::{configure_notification, notify, queue_mode, set_own_mode};
pub use ping::{ping, summarize};
pub use receive::{drain, is_collecting_large};
#[cfg(feature = "bench")]
pub use send::try_send_pair;
pub use send::{
    leave_for_next_kernel, line, send_blocking, send_large, send_large_draining, send_or_leave, try_send, Patience,
    SendError, SEND_TIMEOUT_MS,
};
pub use takeover::{count_lost_in_fault, holds_kept_processes, is_reachable, live_instances, wait_out_restart};
pub use wait::{on_notification, poll_briefly, set_wait_strategy, sleep_unless, wait_for_messages, WaitStrategy};

// For the rooms of `msg`.
use send::{check_target, counted};

use crate::core::shared;
use ::core::sync::atomic::{AtomicU64, Ordering};
use abi::message::{DecodeError, Kind, MAX_KIND};
use channel::Message;

/// Why a handler refused a message.
pub type HandlerResult = Result<(), DecodeError>;

/// What a kind's handler does, and with which priority it is drained.
#[derive(Clone, Copy)]
pub struct Handler {
    /// High-priority kinds go to the high queue, drained before the normal one (Popcorn 5.3.2).
    pub high_priority: bool,
    /// For one-line messages.
    pub on_line: Option<fn(&Message) -> HandlerResult>,
    /// For reassembled large messages.
    pub on_large: Option<fn(&[u8]) -> HandlerResult>,
}

// Private per-instance state (each core has its own copy of these statics). Set once per
// kind at the instance's start and read on every received message: a `Once` is read with one
// load, where the lock it replaces was a locked compare-exchange and a store per message.
static HANDLERS: [spin::Once<Handler>; MAX_KIND as usize + 1] = [const { spin::Once::new() }; MAX_KIND as usize + 1];

/// The handler registered for `kind` on this instance, if any.
#[inline(always)]
fn handler_of(kind: u16) -> Option<Handler> {
    HANDLERS.get(kind as usize).and_then(spin::Once::get).copied()
}

fn counters() -> &'static MessageCounters {
    &shared::this_kcb().messages
}

fn bump(counter: &AtomicU64) {
    // Only the owning core writes its counters: a load and store is enough, no locked add.
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

fn add(counter: &AtomicU64, amount: u64) {
    counter.store(counter.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
}

/// Registers the handler of `kind` on this instance and publishes its priority.
pub fn register(kind: Kind, handler: Handler) {
    if HANDLERS[kind as usize].is_completed() {
        log::warn!("a second handler for message kind {} was refused: the first stays", kind as u16);
        return;
    }
    HANDLERS[kind as usize].call_once(|| handler);
    let me = shared::this_core() as usize;
    if me < MESSAGING_CORES {
        let line = &area().cores[me].notify;
        let bit = 1u64 << (kind as u16);
        if handler.high_priority {
            line.high_priority_kinds.fetch_or(bit, Ordering::Release);
        } else {
            line.high_priority_kinds.fetch_and(!bit, Ordering::Release);
        }
    }
}

/// Sets up this instance's endpoints: its receive queues, the URPC rings from and to every
/// other core (including cores started later: rings exist for all), and the handlers of
/// messaging itself. A restarted instance takes over what its predecessor held ([`takeover`]).
pub fn init() {
    let me = shared::this_core() as usize;
    if me >= MESSAGING_CORES {
        log::warn!("core {me} has no channels: only the first {MESSAGING_CORES} cores do");
        return;
    }
    takeover::claim_or_take_over(me);
    notify::init_own_modes(me);
    ping::register_handlers();
    icc::register_handlers();
    #[cfg(feature = "bench")]
    stress::register_handlers();
    #[cfg(feature = "bench")]
    bench::register_handlers();
}
