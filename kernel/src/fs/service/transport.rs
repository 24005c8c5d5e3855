//! How requests reach the service from other instances and replies go back: the inbox a
//! message handler fills and a safe point empties, and the replies sent after the lock.

use super::{submit, Errno};
use crate::core::shared;
use crate::mm::grant::{Grant, GrantError};
use abi::file::{FileOp, FileReply, FileRequest, GRANT_LENGTH_WORD, GRANT_WORD};
use abi::message::Kind;
use alloc::collections::{BTreeMap, VecDeque};
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
    let mut bytes = &reply.bytes[..];
    let mut result = reply.result;
    // A read whose caller lent its buffer: the data goes there, the reply says how much.
    let lent = READ_GRANTS.lock().remove(&reply.request_id);
    if let Some(grant) = lent.filter(|_| !bytes.is_empty()) {
        match crate::mm::grant::copy_into(&grant, 0, bytes) {
            Ok(()) => bytes = &[],
            Err(GrantError::LenderGone) => {
                // Its kernel crashed or was replaced: nobody waits for this reply.
                log::debug!("file service: core {client} is gone; a read's {} bytes were dropped", bytes.len());
                return;
            }
            Err(error) => {
                log::warn!("file service: the buffer core {client} lent for a read is unusable ({error:?}): EFAULT");
                (bytes, result) = (&[], -i64::from(linux_raw_sys::errno::EFAULT));
            }
        }
    }
    let wire = FileReply { request_id: reply.request_id, result, words: reply.words, bytes };
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
/// The buffers callers on other instances lent for their reads, by request id, until the
/// reply (now, or when a parked read completes) is written into them.
static READ_GRANTS: Mutex<BTreeMap<u64, Grant>> = Mutex::new(BTreeMap::new());
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
        let Ok(mut request) = FileRequest::decode(&bytes) else { continue };
        let client = crate::fs::client::core_of_request(request.request_id);
        // Only a read or a write carries a grant; other requests use the word for themselves.
        let lent = if matches!(request.op, FileOp::Read | FileOp::Write) { request.words[GRANT_WORD] } else { 0 };
        let written;
        if lent != 0 {
            let length = request.words[GRANT_LENGTH_WORD];
            match request.op {
                FileOp::Read => {
                    let grant = Grant::from_word(client as u32, lent, request.words[1]);
                    READ_GRANTS.lock().insert(request.request_id, grant);
                }
                FileOp::Write if length as usize <= abi::file::MAX_TRANSFER => {
                    // The data, out of the caller's buffer, is the request's bytes.
                    let grant = Grant::from_word(client as u32, lent, length);
                    let mut data = alloc::vec![0u8; length as usize];
                    if let Err(error) = crate::mm::grant::copy_from(&grant, 0, &mut data) {
                        if error != GrantError::LenderGone {
                            let reply = Reply::error(request.request_id, linux_raw_sys::errno::EFAULT);
                            log::warn!(
                                "file service: the buffer core {client} lent for a write is unusable ({error:?})"
                            );
                            send_reply(client, &reply);
                        }
                        continue;
                    }
                    written = data;
                    request.first = &written;
                }
                _ => {
                    // A write longer than one request may carry.
                    send_reply(client, &Reply::error(request.request_id, linux_raw_sys::errno::EINVAL));
                    continue;
                }
            }
        }
        if let Some(reply) = submit(client, &request) {
            send_reply(client, &reply);
        }
    }
}
