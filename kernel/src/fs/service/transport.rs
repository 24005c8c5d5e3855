//! How requests reach the service from other instances and replies go back: the inbox a
//! message handler fills and a safe point empties, and the replies sent after the lock.

use super::{submit, Errno};
use crate::core::shared;
use abi::file::{FileReply, FileRequest};
use abi::message::Kind;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use spin::Mutex;

/// A reply on its way to the client instance that asked.
pub struct Reply {
    pub request_id: u64,
    pub result: i64,
    pub words: [u64; abi::file::REPLY_WORDS],
    pub bytes: Vec<u8>,
}

impl Reply {
    pub(super) fn value(request_id: u64, value: u64) -> Self {
        Self { request_id, result: value as i64, words: [0; 2], bytes: Vec::new() }
    }

    pub(super) fn error(request_id: u64, error: Errno) -> Self {
        Self { request_id, result: -i64::from(error), words: [0; 2], bytes: Vec::new() }
    }
}

/// Sends completed parked replies to their clients (outside the service lock).
pub(super) fn deliver(replies: Vec<(usize, Reply)>) {
    for (client, reply) in replies {
        if !crate::fs::client::wants_reply(reply.request_id) {
            continue;
        }
        if client == shared::this_core() as usize {
            crate::fs::client::complete(reply);
        } else {
            send_reply(client, &reply);
        }
    }
}

fn send_reply(client: usize, reply: &Reply) {
    let wire =
        FileReply { request_id: reply.request_id, result: reply.result, words: reply.words, bytes: &reply.bytes };
    let mut out = alloc::vec![0u8; wire.encoded_size()];
    if wire.encode(&mut out).is_none() {
        log::warn!("file service: a reply of {} bytes does not fit a message", reply.bytes.len());
        return;
    }
    if let Err(error) = crate::msg::send_large_draining(client, Kind::FileReply, &out) {
        log::warn!("file service: the reply to core {client} was not sent: {error}");
    }
}

/// Requests from other instances, kept by the message handler until a safe point handles
/// them: a handler must not send (the reply to a client that is itself sending to this
/// instance would wait for it forever), so handling and replying happen outside.
static INBOX: Mutex<VecDeque<Vec<u8>>> = Mutex::new(VecDeque::new());
static INBOX_WAITING: AtomicBool = AtomicBool::new(false);

/// Message handler: a request from another instance; checked now, handled at a safe point.
pub(super) fn on_remote_request(bytes: &[u8]) -> crate::msg::HandlerResult {
    let request = FileRequest::decode(bytes)?;
    if crate::fs::client::core_of_request(request.request_id) >= crate::msg::messaging_cores() {
        return Err(abi::message::DecodeError::BadField("request id"));
    }
    INBOX.lock().push_back(bytes.to_vec());
    INBOX_WAITING.store(true, Ordering::Relaxed);
    Ok(())
}

/// Whether requests of other instances wait in the inbox.
pub(super) fn inbox_waiting() -> bool {
    INBOX_WAITING.load(Ordering::Relaxed)
}

/// At a safe point of the service's instance: handles the requests other instances sent.
pub fn handle_inbox() {
    if !INBOX_WAITING.swap(false, Ordering::Relaxed) {
        return;
    }
    loop {
        let Some(bytes) = INBOX.lock().pop_front() else { break };
        let Ok(request) = FileRequest::decode(&bytes) else { continue };
        let client = crate::fs::client::core_of_request(request.request_id);
        if let Some(reply) = submit(client, &request) {
            send_reply(client, &reply);
        }
    }
}
