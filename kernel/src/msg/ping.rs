//! Round trips to another core (`msg ping`): the Ping and Pong kinds and their handlers.

use super::SEND_TIMEOUT_MS;
use super::{check_target, drain, line, register, send_blocking, Handler, HandlerResult, Patience, SendError};
use crate::arch::cpu;
use crate::core::shared;
use ::core::sync::atomic::{AtomicU64, Ordering};
use abi::message::{Kind, Ping};
use alloc::vec::Vec;
use channel::Message;

/// Pongs this instance received (private).
static PONGS: AtomicU64 = AtomicU64::new(0);

pub(super) fn register_handlers() {
    register(Kind::Ping, Handler { high_priority: false, on_line: Some(on_ping), on_large: None });
    register(Kind::Pong, Handler { high_priority: false, on_line: Some(on_pong), on_large: None });
}

/// Pings `target` `count` times (one outstanding); returns round-trip cycles. Fails at once
/// if the target stops running, and after [`SEND_TIMEOUT_MS`] without a pong.
pub fn ping(target: usize, count: usize) -> Result<Vec<u64>, SendError> {
    check_target(target)?;
    let me = shared::this_core() as u16;
    let mut samples = Vec::with_capacity(count);
    for sequence in 0..count as u64 {
        let before = PONGS.load(Ordering::Relaxed);
        let start = cpu::read_tsc();
        let ping = Ping { from: me, sequence, sent_tsc: start, tag: 0 };
        send_blocking(target, &line(Kind::Ping, |out| ping.encode(out)))?;
        let patience = Patience::new(target, SEND_TIMEOUT_MS);
        while PONGS.load(Ordering::Relaxed) == before {
            if drain() == 0 {
                patience.check()?;
            }
        }
        samples.push(cpu::read_tsc() - start);
    }
    Ok(samples)
}

/// Summary of cycle samples, as the Linux peer and the host compute theirs; all zero when
/// there are none.
pub fn summarize(samples: &mut [u64]) -> samples::Summary<u64> {
    samples::summarize(samples).unwrap_or_default()
}

fn on_ping(message: &Message) -> HandlerResult {
    let ping = Ping::decode(message.payload())?;
    let pong = Ping { from: shared::this_core() as u16, ..ping };
    if let Err(error) = send_blocking(ping.from as usize, &line(Kind::Pong, |out| pong.encode(out))) {
        log::debug!("pong to core {} not sent: {error}", ping.from);
    }
    Ok(())
}

fn on_pong(message: &Message) -> HandlerResult {
    Ping::decode(message.payload())?;
    PONGS.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
