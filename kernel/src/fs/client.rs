//! How a process's file calls reach the file service: a function call on the service's own
//! instance, a request and a reply by large message from any other; the calling thread
//! blocks until its reply comes (a read of an empty pipe may wait long).

use super::service::{self, Reply, SERVICE_CORE};
use crate::core::shared;
use crate::sched::{self, WaitToken, Wakeup};
use abi::file::{Caller, FileOp, FileReply, FileRequest, HandleKind, CONSOLE_HANDLE, REQUEST_WORDS};
use abi::message::Kind;
use abi::Errno;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use linux_raw_sys::errno;
use spin::{Mutex, Once};

/// The running thread's process id (0 for a kernel thread), which each request carries: the
/// process layer's, registered at boot.
static CURRENT_PID: Once<fn() -> u32> = Once::new();

/// Registers how a request learns the calling process's pid (until then it says 0).
pub fn register_current_pid(current_pid: fn() -> u32) {
    CURRENT_PID.call_once(|| current_pid);
}

/// The ids a request carries for the service to check it with (`abi::file::Caller`, owned).
#[derive(Clone, Debug, Default)]
pub struct CallerIds {
    pub effective_uid: u32,
    pub filesystem_uid: u32,
    pub filesystem_gid: u32,
    /// The supplementary groups, little-endian `u32`s.
    pub group_bytes: Vec<u8>,
}

/// Which of the caller's ids a request is checked with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckAs {
    /// The file-system ids: every call but `access`.
    FileSystem,
    /// The real ids, as `access` and `faccessat` without `AT_EACCESS` check.
    Real,
}

/// The running thread's ids (root's for a kernel thread): the process layer's, registered at
/// boot, since the file service sits below processes.
static CURRENT_CALLER: Once<fn(CheckAs) -> CallerIds> = Once::new();

/// Registers how a request learns the calling process's ids (until then every request is
/// root's).
pub fn register_current_caller(current_caller: fn(CheckAs) -> CallerIds) {
    CURRENT_CALLER.call_once(|| current_caller);
}

/// The running thread's ids, as a request carries them.
pub fn current_caller(check_as: CheckAs) -> CallerIds {
    CURRENT_CALLER.get().map_or_else(CallerIds::default, |current| current(check_as))
}

/// One reference to an open file of the service. Descriptors that share an open file
/// (`dup`, `fork`) share one `Handle`; the last to go releases it at the service.
#[derive(Debug)]
pub struct Handle {
    pub id: u64,
    pub kind: HandleKind,
}

impl Handle {
    /// The console, open for the service's lifetime.
    pub fn console() -> Self {
        Self { id: CONSOLE_HANDLE, kind: HandleKind::Console }
    }

    /// Adopts a reference the service already counted (an open, a retain).
    pub fn adopt(id: u64, kind: HandleKind) -> Self {
        Self { id, kind }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.id != CONSOLE_HANDLE {
            // Not sent from here: a handle is dropped under locks (a process's state) that a
            // message handler may need, and sending may have to handle messages.
            RELEASES.lock().push(self.id);
            HAS_RELEASES.store(true, Ordering::Relaxed);
        }
    }
}

static RELEASES: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static HAS_RELEASES: AtomicBool = AtomicBool::new(false);
/// Replies not yet collected by the thread that asked: id → reply (None: not arrived).
static PENDING: Mutex<BTreeMap<u64, Option<Reply>>> = Mutex::new(BTreeMap::new());

/// What a request gives its caller at the service when it succeeds, which a caller killed
/// while it waited releases once the answer is in.
#[derive(Clone, Copy)]
enum Given {
    /// An open or a pipe: the handles in the reply's words (a pipe has two).
    Opened { handles: usize },
    /// A retain of this handle.
    Retained(u64),
}

impl Given {
    /// What a request of `op` with `words` gives, if it gives references.
    fn of(op: FileOp, words: &[u64; REQUEST_WORDS]) -> Option<Self> {
        match op {
            FileOp::Open => Some(Self::Opened { handles: 1 }),
            FileOp::Pipe => Some(Self::Opened { handles: 2 }),
            FileOp::Retain => Some(Self::Retained(words[0])),
            _ => None,
        }
    }

    /// Releases, at the next safe point, the references `reply` gave.
    fn release(self, reply: &Reply) {
        if reply.result < 0 {
            return;
        }
        let ids = match self {
            Self::Opened { handles } => &reply.words[..handles.min(2)],
            Self::Retained(ref id) => core::slice::from_ref(id),
        };
        for &id in ids {
            drop(Handle::adopt(id, HandleKind::Regular));
        }
    }
}

/// How long a caller polls for its reply before it blocks.
const REPLY_POLL_NS: u64 = 50_000;

static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

/// File request ids have the top bit set (spawn ids do not) and name the client's core.
fn new_request_id() -> u64 {
    (1 << 63) | (u64::from(shared::this_core()) << 48) | NEXT_REQUEST.fetch_add(1, Ordering::Relaxed)
}

/// The id of a request that wants no reply (a release, a cancel): it still names the core.
fn no_reply_id() -> u64 {
    (1 << 63) | (u64::from(shared::this_core()) << 48)
}

/// The client core a request id names.
pub fn core_of_request(request_id: u64) -> usize {
    ((request_id >> 48) & 0x7fff) as usize
}

/// Whether the sender of `request_id` waits for a reply.
pub fn wants_reply(request_id: u64) -> bool {
    request_id & ((1 << 48) - 1) != 0
}

/// Sends the releases dropped handles left (at safe points: after a system call, idle, exit).
/// The running process's descriptor changes go first, so the service never lists a
/// descriptor on a handle it was told to release.
pub fn flush_releases() {
    super::proc::report_descriptors();
    // Sending may take messages in (a full channel is drained while it waits), and what they
    // bring may drop one more handle: this takes it too, where it would otherwise wait for
    // the core's next safe point, which an idle core with nothing to run may not reach soon.
    while HAS_RELEASES.swap(false, Ordering::Relaxed) {
        let releases = core::mem::take(&mut *RELEASES.lock());
        for id in releases {
            let mut words = [0u64; REQUEST_WORDS];
            words[0] = id;
            let request = FileRequest {
                request_id: no_reply_id(),
                pid: 0,
                op: FileOp::Release,
                words,
                first: &[],
                second: &[],
                caller: Caller::ROOT,
            };
            if let Err(error) = send(&request) {
                log::warn!("a file handle was not released at the service: {error}");
            }
        }
    }
}

/// Tells the service process `pid`'s descriptors: `count` × (descriptor u32, handle u64) in
/// `table`. No reply: the request goes in order with this instance's other requests, so the
/// service has it before any request the process makes after it.
pub fn report_descriptors(pid: u32, count: usize, table: &[u8]) {
    let mut words = [0u64; REQUEST_WORDS];
    words[0] = count as u64;
    let request = FileRequest {
        request_id: no_reply_id(),
        pid,
        op: FileOp::Descriptors,
        words,
        first: table,
        second: &[],
        caller: Caller::ROOT,
    };
    if let Err(error) = send(&request) {
        log::debug!("the descriptors of pid {pid} were not reported to /proc: {error}");
    }
}

fn send(request: &FileRequest<'_>) -> Result<Option<Reply>, Errno> {
    if shared::this_core() as usize == SERVICE_CORE {
        return Ok(service::submit(SERVICE_CORE, request));
    }
    let mut bytes = alloc::vec![0u8; request.encoded_size()];
    request.encode(&mut bytes).ok_or(errno::E2BIG)?;
    crate::msg::send_large_draining(SERVICE_CORE, Kind::FileRequest, &bytes).map_err(|error| {
        log::warn!("file request not sent to core {SERVICE_CORE}: {error}");
        errno::EIO
    })?;
    Ok(None)
}

/// A reply the service (here) or a message (from it) brings: hands it to its waiting thread.
pub fn complete(reply: Reply) {
    let id = reply.request_id;
    let mut pending = PENDING.lock();
    let Some(slot) = pending.get_mut(&id) else {
        // Nobody waits any more: the caller gave up on a service core that was not running.
        log::debug!("a file reply came for request {id:#x}, which nobody waits for");
        return;
    };
    *slot = Some(reply);
    drop(pending);
    sched::wake(WaitToken::Reply(id), usize::MAX);
}

fn on_reply(bytes: &[u8]) -> crate::msg::HandlerResult {
    let reply = FileReply::decode(bytes)?;
    complete(Reply {
        request_id: reply.request_id,
        result: reply.result,
        words: reply.words,
        bytes: reply.bytes.to_vec(),
    });
    Ok(())
}

/// Registers the reply handler of this instance.
pub fn init() {
    crate::msg::register(
        Kind::FileReply,
        crate::msg::Handler { high_priority: false, on_line: None, on_large: Some(on_reply) },
    );
}

/// What a call to the service returned.
pub struct Answer {
    pub value: u64,
    pub words: [u64; 2],
    pub bytes: Vec<u8>,
}

fn answer(reply: Reply) -> Result<Answer, Errno> {
    if reply.result < 0 {
        return Err((-reply.result) as Errno);
    }
    Ok(Answer { value: reply.result as u64, words: reply.words, bytes: reply.bytes })
}

/// Asks the service `op` and waits for its answer. A signal or a kill while it waits cancels
/// the request (the service finishes it with what it has: a pipe write's count, or EINTR).
pub fn call(op: FileOp, words: [u64; REQUEST_WORDS], first: &[u8], second: &[u8]) -> Result<Answer, Errno> {
    call_with(op, words, (first, second), None, CheckAs::FileSystem)
}

/// As [`call`], checked with the caller's real ids (`access`).
pub fn call_as_real(op: FileOp, words: [u64; REQUEST_WORDS], first: &[u8]) -> Result<Answer, Errno> {
    call_with(op, words, (first, &[]), None, CheckAs::Real)
}

/// As [`call`], for a request that may wait (a `poll`): at `deadline_ns` (uptime) it is
/// cancelled, and an answer of "interrupted" then means ETIMEDOUT.
pub fn call_until(
    op: FileOp,
    words: [u64; REQUEST_WORDS],
    first: &[u8],
    deadline_ns: Option<u64>,
) -> Result<Answer, Errno> {
    call_with(op, words, (first, &[]), deadline_ns, CheckAs::FileSystem)
}

/// Bytes from which a read or a write from another instance lends its buffer to the service
/// (a grant, `base::mm::grant`) instead of carrying the data in the messages: a 64 KiB pipe
/// read took 1370 chunk lines through a 256-slot queue; a grant is one copy at the service,
/// a page mapped at a time. Below this, the chunks cost less than the mappings.
const GRANT_MIN: usize = 2048;

/// A read's or a write's buffer lent to the service for one request, when the request goes
/// to another instance and is large enough: its word goes in `abi::file::GRANT_WORD`.
enum Lent {
    None,
    /// The read's data comes back here: the reply carries only the count.
    ReadInto(Vec<u8>),
    /// The write's data stays here; the request carries its length.
    WriteFrom,
}

fn lend_for(op: FileOp, words: &mut [u64; REQUEST_WORDS], first: &mut &[u8]) -> Lent {
    if shared::this_core() as usize == SERVICE_CORE {
        return Lent::None;
    }
    match op {
        FileOp::Read if words[1] as usize >= GRANT_MIN => {
            let buffer = alloc::vec![0u8; (words[1] as usize).min(abi::file::MAX_TRANSFER)];
            match crate::mm::grant::lend(&buffer) {
                Some(grant) => {
                    words[abi::file::GRANT_WORD] = grant.to_word();
                    Lent::ReadInto(buffer)
                }
                None => Lent::None,
            }
        }
        FileOp::Write if first.len() >= GRANT_MIN => match crate::mm::grant::lend(first) {
            Some(grant) => {
                words[abi::file::GRANT_WORD] = grant.to_word();
                words[abi::file::GRANT_LENGTH_WORD] = first.len() as u64;
                *first = &[];
                Lent::WriteFrom
            }
            None => Lent::None,
        },
        _ => Lent::None,
    }
}

fn call_with(
    op: FileOp,
    mut words: [u64; REQUEST_WORDS],
    (mut first, second): (&[u8], &[u8]),
    deadline_ns: Option<u64>,
    check_as: CheckAs,
) -> Result<Answer, Errno> {
    // The lent buffer lives until the reply is in: every way out below waits for it, but a
    // service that stopped running (it writes nothing any more).
    let lent = lend_for(op, &mut words, &mut first);
    let mut answer = call_lent(op, words, (first, second), deadline_ns, check_as)?;
    if let Lent::ReadInto(mut buffer) = lent {
        if answer.bytes.is_empty() {
            buffer.truncate((answer.value as usize).min(buffer.len()));
            answer.bytes = buffer;
        }
    }
    Ok(answer)
}

fn call_lent(
    op: FileOp,
    words: [u64; REQUEST_WORDS],
    (first, second): (&[u8], &[u8]),
    deadline_ns: Option<u64>,
    check_as: CheckAs,
) -> Result<Answer, Errno> {
    // What this instance told /proc of its processes goes first (a changed id, a new
    // program): the request may read it, and the service takes both in order.
    super::proc::flush_reports();
    let request_id = new_request_id();
    let pid = CURRENT_PID.get().map_or(0, |current_pid| current_pid());
    let ids = current_caller(check_as);
    let caller = Caller {
        effective_uid: ids.effective_uid,
        filesystem_uid: ids.filesystem_uid,
        filesystem_gid: ids.filesystem_gid,
        group_bytes: &ids.group_bytes,
    };
    let request = FileRequest { request_id, pid, op, words, first, second, caller };
    PENDING.lock().insert(request_id, None);
    match send(&request) {
        Ok(Some(reply)) => {
            PENDING.lock().remove(&request_id);
            return answer(reply);
        }
        Ok(None) => {}
        Err(error) => {
            PENDING.lock().remove(&request_id);
            return Err(error);
        }
    }
    // The reply of most requests comes within microseconds: wait for it on this core
    // before blocking (`REPLY_POLL_NS`).
    crate::msg::poll_briefly(REPLY_POLL_NS, || PENDING.lock().get(&request_id).is_some_and(Option::is_none));
    let mut cancelled = false;
    let mut timed_out = false;
    loop {
        let arrived = PENDING.lock().get_mut(&request_id).and_then(Option::take);
        if let Some(reply) = arrived {
            PENDING.lock().remove(&request_id);
            if timed_out && reply.result == -i64::from(errno::EINTR) {
                return Err(errno::ETIMEDOUT);
            }
            return answer(reply);
        }
        let now = crate::time::now_ns();
        if let Some(deadline) = deadline_ns.filter(|&d| now >= d && !cancelled) {
            let _ = deadline;
            cancelled = true;
            timed_out = true;
            let _ = cancel(request_id);
            continue;
        }
        let wake_ns = deadline_ns.filter(|_| !cancelled).unwrap_or(now + 1_000_000_000).min(now + 1_000_000_000);
        let wake = crate::arch::cpu::read_tsc() + crate::time::ns_to_cycles(wake_ns.saturating_sub(now));
        // Once cancelled, the answer is on its way: the wait is no longer one a signal or a
        // move ends (it would end at once, again and again, and the thread would spin without
        // letting this core take the message that brings the answer).
        let wakeup = if cancelled {
            sched::block_uninterruptible(WaitToken::Reply(request_id), Some(wake))
        } else {
            sched::block(WaitToken::Reply(request_id), Some(wake))
        };
        match wakeup {
            Wakeup::Woken => {}
            Wakeup::TimedOut => {
                if !crate::msg::is_live(SERVICE_CORE) {
                    PENDING.lock().remove(&request_id);
                    log::warn!("the file service's core {SERVICE_CORE} is not running: I/O error");
                    return Err(errno::EIO);
                }
            }
            Wakeup::Killed => {
                if !cancelled {
                    let _ = cancel(request_id);
                }
                return answer_of_killed(op, &words, request_id);
            }
            Wakeup::Interrupted | Wakeup::Moving => {
                // A signal, or a move: the service answers at once with what the request has.
                if !cancelled {
                    cancelled = true;
                    let _ = cancel(request_id);
                }
            }
        }
    }
}

/// The end of a request whose caller was killed: the process ends, but only once the service
/// has answered, so that a request it has not carried out yet (an open that creates a file)
/// cannot take effect after the parent has seen the exit, as Linux finishes a call before the
/// exit. The cancel (sent) makes a waiting request answer at once; what the answer gives (an
/// open file, a pipe, a reference) is released. A killed thread's waits end at once, so it
/// waits by looking, taking this core's messages meanwhile (`sleep_while`).
fn answer_of_killed(op: FileOp, words: &[u64; REQUEST_WORDS], request_id: u64) -> Result<Answer, Errno> {
    let waiting = || PENDING.lock().get(&request_id).is_some_and(Option::is_none);
    while !sched::sleep_while(1000, waiting) {
        if !crate::msg::is_live(SERVICE_CORE) {
            log::warn!("the file service's core {SERVICE_CORE} is not running: a killed caller stops waiting");
            break;
        }
    }
    if let Some(Some(reply)) = PENDING.lock().remove(&request_id) {
        if let Some(given) = Given::of(op, words) {
            given.release(&reply);
        }
    }
    Err(errno::EINTR)
}

fn cancel(request_id: u64) -> Result<(), Errno> {
    let mut words = [0u64; REQUEST_WORDS];
    words[0] = request_id;
    let request = FileRequest {
        request_id: no_reply_id(),
        pid: 0,
        op: FileOp::Cancel,
        words,
        first: &[],
        second: &[],
        caller: Caller::ROOT,
    };
    send(&request).map(drop)
}

/// One more reference to `handle` at the service (a descriptor handed to a process on
/// another instance); the returned `Handle` owns it.
pub fn retain(handle: &Handle) -> Result<Handle, Errno> {
    if handle.id == CONSOLE_HANDLE {
        return Ok(Handle::console());
    }
    let mut words = [0u64; REQUEST_WORDS];
    words[0] = handle.id;
    // Answered before it returns: the new holder's release must never overtake it.
    call(FileOp::Retain, words, &[], &[])?;
    Ok(Handle::adopt(handle.id, handle.kind))
}
