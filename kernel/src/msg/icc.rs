//! Inter-core calls (NIX active messages): run a registered handler on another core.
//!
//! A request names a handler id from `abi::message::handler`, never a function pointer, so
//! cores running different kernel images can call each other. Requests and replies are
//! high-priority messages on the receive queues.

use super::{line, send_blocking, try_send, Handler, HandlerResult, Patience, SendError};
use crate::arch::cpu;
use crate::core::shared;
use ::core::sync::atomic::{AtomicU32, Ordering};
use abi::message::{handler, IccReply, IccRequest, IccStatus, Kind, ICC_ARGUMENTS};
use alloc::vec::Vec;
use channel::Message;
use spin::Mutex;

/// An ICC handler: arguments in, a value or a status out.
pub type IccHandler = fn(&[u64; ICC_ARGUMENTS]) -> Result<u64, IccStatus>;

static HANDLERS: Mutex<[Option<Registered>; handler::MAX as usize + 1]> = Mutex::new([None; handler::MAX as usize + 1]);

#[derive(Clone, Copy)]
struct Registered {
    function: IccHandler,
    /// It runs only where this core holds no reservation ([`register_outside_sends`]).
    outside_sends: bool,
}

/// Requests for handlers that run outside sends, received inside one: run once it is done.
static POSTPONED: Mutex<Vec<IccRequest>> = Mutex::new(Vec::new());
static POSTPONED_COUNT: AtomicU32 = AtomicU32::new(0);
static COMPLETED: Mutex<Vec<IccReply>> = Mutex::new(Vec::new());
/// Calls sent and not yet answered: (call id, callee). A reply to anything else (a call given
/// up on) is dropped, so `COMPLETED` cannot grow without bound.
static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

/// A call waiting for its reply.
#[derive(Clone, Copy)]
struct Pending {
    call_id: u32,
    callee: usize,
    /// The callee's incarnation when the call was sent: a restarted callee never answers.
    incarnation: u64,
}

fn incarnation(core: usize) -> u64 {
    shared::get().kcb(core).incarnation.load(Ordering::Relaxed)
}
static NEXT_CALL_ID: AtomicU32 = AtomicU32::new(1);

/// Why a call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IccError {
    /// The request could not be sent.
    Send(SendError),
    /// The callee runs but did not answer within the timeout.
    Timeout { core: usize, waited_ms: u64 },
    /// No call with this id is waiting for a reply (never sent, or already waited for).
    UnknownCall(u32),
    /// The callee was restarted after the call was sent: the request died with its old kernel.
    CalleeRestarted(usize),
    /// The callee answered with a failure status.
    Refused(IccStatus),
}

impl ::core::fmt::Display for IccError {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        match self {
            Self::Send(error) => write!(f, "{error}"),
            Self::Timeout { core, waited_ms } => {
                write!(
                    f,
                    "core {core} did not answer within {waited_ms} ms: it runs but is busy or stuck (see `cores`)"
                )
            }
            Self::UnknownCall(id) => write!(f, "no call {id} waits for a reply: it was never sent or already answered"),
            Self::CalleeRestarted(core) => {
                write!(
                    f,
                    "core {core} was restarted before it answered: the call was lost with its old kernel; call again"
                )
            }
            Self::Refused(status) => write!(f, "the callee refused the call: {status:?}"),
        }
    }
}

/// Registers an ICC handler on this instance.
pub fn register(id: u16, function: IccHandler) {
    HANDLERS.lock()[id as usize] = Some(Registered { function, outside_sends: false });
}

/// Registers an ICC handler that sends much, and so must not run inside this core's own
/// large send (its sends to that send's target would all wait behind it, `super::nested`): a
/// request received there waits until the send is done.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn register_outside_sends(id: u16, function: IccHandler) {
    HANDLERS.lock()[id as usize] = Some(Registered { function, outside_sends: true });
}

/// Runs the requests postponed until this core held no reservation (from `drain`).
pub(super) fn run_postponed() {
    if POSTPONED_COUNT.load(Ordering::Relaxed) == 0 || super::nested::any_held() {
        return;
    }
    let requests = core::mem::take(&mut *POSTPONED.lock());
    POSTPONED_COUNT.store(0, Ordering::Relaxed);
    for request in requests {
        answer(&request, registered(request.handler));
    }
}

/// The handlers of messaging itself; the layers above register theirs (`START_CORE` by the
/// cores layer, `FAULT_NOW` by `boot` for `test=msg-restart`).
pub(super) fn register_handlers() {
    super::register(Kind::IccRequest, Handler { high_priority: true, on_line: Some(serve), on_large: None });
    super::register(Kind::IccReply, Handler { high_priority: true, on_line: Some(complete), on_large: None });
    register(handler::ECHO, |arguments| Ok(arguments[0]));
    register(handler::ADD, |arguments| Ok(arguments.iter().fold(0u64, |sum, a| sum.wrapping_add(*a))));
    register(handler::GROUP_JOIN, |arguments| {
        super::join_group(arguments[0] as usize).map(|()| 0).map_err(|_| IccStatus::Failed)
    });
    register(handler::GROUP_LEAVE, |arguments| {
        super::leave_group(arguments[0] as usize);
        Ok(0)
    });
    register(handler::SET_NOTIFY_MODE, |arguments| {
        let mode = u32::try_from(arguments[0]).map_err(|_| IccStatus::BadArguments)?;
        if mode as usize >= super::NotifyMode::ALL.len() {
            return Err(IccStatus::BadArguments);
        }
        super::set_own_mode(super::NotifyMode::from_u32(mode), arguments[1]);
        Ok(0)
    });
    register(handler::MESSAGE_COUNTS, |_| {
        let counters = &shared::this_kcb().messages;
        Ok((counters.received.load(Ordering::Relaxed) << 32) | (counters.dropped.load(Ordering::Relaxed) & 0xffff_ffff))
    });
}

fn serve(message: &Message) -> HandlerResult {
    let request = IccRequest::decode(message.payload())?;
    if request.from as usize >= super::messaging_cores() {
        return Err(abi::message::DecodeError::BadField("from"));
    }
    let registered = registered(request.handler);
    if registered.is_some_and(|r| r.outside_sends) && super::nested::any_held() {
        let mut postponed = POSTPONED.lock();
        postponed.push(request);
        POSTPONED_COUNT.store(postponed.len() as u32, Ordering::Relaxed);
        return Ok(());
    }
    answer(&request, registered);
    Ok(())
}

/// Runs the handler registered for `handler` on this core, as a call from another core would.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn run_here(handler: u16, arguments: [u64; ICC_ARGUMENTS]) -> Result<u64, IccError> {
    match registered(handler).map(|r| (r.function)(&arguments)) {
        None => Err(IccError::Refused(IccStatus::NoSuchHandler)),
        Some(result) => result.map_err(IccError::Refused),
    }
}

fn registered(handler: u16) -> Option<Registered> {
    HANDLERS.lock().get(handler as usize).copied().flatten()
}

/// Runs `request`'s handler (`registered`, if any) and sends its reply.
fn answer(request: &IccRequest, registered: Option<Registered>) {
    let (status, value) = match registered.map(|r| (r.function)(&request.arguments)) {
        None => (IccStatus::NoSuchHandler, 0),
        Some(Ok(value)) => (IccStatus::Done, value),
        Some(Err(status)) => (status, 0),
    };
    let reply = IccReply { from: shared::this_core() as u16, call_id: request.call_id, status, value };
    if let Err(error) = send_blocking(request.from as usize, &line(Kind::IccReply, |out| reply.encode(out))) {
        log::debug!("reply to call {} of core {} not sent: {error}", request.call_id, request.from);
    }
}

fn complete(message: &Message) -> HandlerResult {
    let reply = IccReply::decode(message.payload())?;
    let mut pending = PENDING.lock();
    match pending.iter().position(|p| p.call_id == reply.call_id && p.callee == usize::from(reply.from)) {
        Some(index) => {
            pending.swap_remove(index);
            drop(pending);
            COMPLETED.lock().push(reply);
        }
        None => log::debug!("reply {} from core {} matches no waiting call: dropped", reply.call_id, reply.from),
    }
    Ok(())
}

/// Sends a call and returns its id without waiting.
pub fn call_async(target: usize, handler: u16, arguments: [u64; ICC_ARGUMENTS]) -> Result<u32, IccError> {
    if super::nested::must_wait(target) {
        // Inside this core's own large send to `target`: the request would wait behind that
        // send, which cannot go on before this call returns.
        return Err(IccError::Send(super::counted(SendError::Channel(channel::ChannelError::EndpointTaken))));
    }
    let call_id = NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed);
    let request = IccRequest { from: shared::this_core() as u16, handler, call_id, arguments };
    let message = line(Kind::IccRequest, |out| request.encode(out));
    // A call to a core between two kernels of a restart goes to the next kernel.
    super::wait_out_restart(target);
    // Registered before sending: the reply may come back before `try_send` returns.
    if target < super::messaging_cores() {
        PENDING.lock().push(Pending { call_id, callee: target, incarnation: incarnation(target) });
    }
    let patience = Patience::new(target, super::SEND_TIMEOUT_MS);
    let sent = loop {
        match try_send(target, &message) {
            Err(SendError::Channel(channel::ChannelError::Full)) => {
                if let Err(error) = patience.check() {
                    break Err(error);
                }
                super::drain();
            }
            result => break result,
        }
    };
    match sent {
        Ok(()) => Ok(call_id),
        Err(error) => {
            forget(call_id);
            Err(IccError::Send(error))
        }
    }
}

fn forget(call_id: u32) {
    PENDING.lock().retain(|p| p.call_id != call_id);
}

/// Waits for the reply to `call_id`, handling other messages meanwhile. Fails as soon as the
/// callee stops running (a faulted core never answers), or after `timeout_ms`.
pub fn wait(call_id: u32, timeout_ms: u64) -> Result<u64, IccError> {
    let waiting = PENDING.lock().iter().find(|p| p.call_id == call_id).copied();
    if waiting.is_none() && !COMPLETED.lock().iter().any(|r| r.call_id == call_id) {
        return Err(IccError::UnknownCall(call_id));
    }
    // None: answered already, only to be collected.
    let patience = waiting.map(|p| Patience::new(p.callee, timeout_ms));
    loop {
        if let Some(reply) = take_completed(call_id) {
            return reply;
        }
        if super::drain() == 0 {
            if let Some(call) = waiting.filter(|p| incarnation(p.callee) != p.incarnation) {
                forget(call_id);
                return Err(IccError::CalleeRestarted(call.callee));
            }
            if let Some(Err(error)) = patience.as_ref().map(Patience::check) {
                // A callee that answered and then stopped (or died) published its reply before
                // its state said so: one more look takes the answer it gave.
                super::drain();
                if let Some(reply) = take_completed(call_id) {
                    return reply;
                }
                forget(call_id);
                return Err(match error {
                    SendError::Timeout { core, waited_ms } => IccError::Timeout { core, waited_ms },
                    other => IccError::Send(other),
                });
            }
            cpu::relax();
        }
    }
}

/// The result of call `call_id` if its reply came.
fn take_completed(call_id: u32) -> Option<Result<u64, IccError>> {
    let mut completed = COMPLETED.lock();
    let index = completed.iter().position(|r| r.call_id == call_id)?;
    let reply = completed.swap_remove(index);
    Some(match reply.status {
        IccStatus::Done => Ok(reply.value),
        status => Err(IccError::Refused(status)),
    })
}

/// Calls `handler` on `target` and waits up to `timeout_ms` for its result.
pub fn call(target: usize, handler: u16, arguments: [u64; ICC_ARGUMENTS], timeout_ms: u64) -> Result<u64, IccError> {
    let id = call_async(target, handler, arguments)?;
    wait(id, timeout_ms)
}
