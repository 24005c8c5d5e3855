//! The file service: one VFS, the open files, pipes and the console's line discipline, kept by
//! instance 0 alone; processes of every instance reach it by request (`fs::client`).
//!
//! A request is decoded once into a typed [`Request`] (`request.rs`; a malformed one is
//! refused and counted), then invoked (`invoke.rs`). It either completes at once or, when it
//! must wait (an empty pipe, a full pipe, no console input, a `poll` with nothing ready), is
//! parked with its bytes and completed when what it waits for changes. The service never
//! blocks and never sends a message while it holds its lock: replies are collected and
//! delivered after (`transport.rs`), and a write to `/sys` that stops or starts a core (an
//! inter-core call that waits for the core) is decoded under the lock and carried out after it.
//!
//! The rooms: `request` (decoding), `invoke` (dispatch), `open_files` (the open file table:
//! open, reopen, release, names), `io` (read, write, seek, directories, terminal requests),
//! `paths` (operations on names), `permissions` (mode and owner checks), `pipes` (pipes and FIFOs), `poll` (readiness), `pages`
//! (where tmpfs and pipes keep their bytes), `console` (COM1 input and the line discipline),
//! `transport` (requests from other instances and replies to them).

mod console;
mod epoll;
mod invoke;
mod io;
mod locks;
mod open_files;
mod pages;
mod paths;
mod permissions;
mod pipes;
mod poll;
pub mod request;
mod shares;
mod sockets;
mod transport;

pub use console::{note_console_input, poll_console, register_signal_group};
pub use request::{events, flags, Request};
pub use sockets::poll_network;
pub use transport::{handle_inbox, Reply};

use super::terminal::Terminal;
use abi::file::{FileRequest, CONSOLE_HANDLE};
use abi::message::Kind;
use abi::Errno;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use open_files::{Object, OpenFile};
use pipes::Pipe;
use spin::Mutex;
use vfs::{Device, NodeId, SysRequest, SysSource, Vfs};

/// The instance that runs the service (it owns the console).
pub const SERVICE_CORE: usize = 0;

/// Who made a request: its process and the ids the service checks it with, which the
/// request carried (`abi::file::Caller`).
#[derive(Clone, Debug)]
struct Caller {
    pid: u32,
    /// Its effective user id: 0 is privileged ([`Service::caller_is_privileged`]).
    effective_uid: u32,
    /// Its file-system ids and groups: what modes and owners are checked against.
    credentials: vfs::Credentials,
}

impl Caller {
    fn of(request: &FileRequest<'_>) -> Self {
        Self {
            pid: request.pid,
            effective_uid: request.caller.effective_uid,
            credentials: vfs::Credentials {
                uid: request.caller.filesystem_uid,
                gid: request.caller.filesystem_gid,
                groups: request.caller.groups().collect(),
            },
        }
    }

    /// The kernel, before any request: root.
    const KERNEL: Self = Self { pid: 0, effective_uid: 0, credentials: vfs::Credentials::root() };
}

/// A request kept until it can complete.
struct Parked {
    client: usize,
    request_id: u64,
    /// Who asked: a retried request is checked with the ids it came with.
    caller: Caller,
    request: Request<'static>,
    /// Progress so far: bytes of a pipe write already written, or the handle of a FIFO open
    /// waiting for the other end.
    done: u64,
}

enum Outcome {
    Done(Reply),
    /// Wait for a change; `done` is the progress so far (pipe writes).
    Park(u64),
    /// No answer (a release, a cancel).
    Silent,
    /// A decoded `/sys` write, carried out once the service has let go of its lock (it may
    /// wait a second for a core); the reply is then `length` bytes written, or the refusal.
    Sys {
        request: SysRequest,
        length: u64,
    },
}

/// The service's counts, for `/proc/reef/files` and the leak checks.
#[derive(Clone, Copy, Default)]
pub struct Counts {
    pub open_files: usize,
    pub pipes: usize,
    pub pipe_pages: usize,
    pub parked: usize,
    pub tmpfs_nodes: usize,
    pub tmpfs_pages: usize,
    pub tmpfs_page_limit: usize,
    /// Fids of host shares opened for reading or writing (0 when no share file is open).
    pub share_opened_fids: usize,
    pub requests: u64,
    pub remote_requests: u64,
    /// Requests served while the service's core was a kernel core (`role 0 kc`).
    pub kernel_core_requests: u64,
    /// Requests refused: malformed ones, and those that failed.
    pub refused: u64,
    /// `AF_UNIX` sockets (each also an open file; a connected one's two pipes are counted in
    /// `pipes`) and `epoll` instances.
    pub sockets: usize,
    pub epolls: usize,
}

struct Service {
    vfs: Vfs,
    open: BTreeMap<u64, OpenFile>,
    next_handle: u64,
    pipes: BTreeMap<u64, Pipe>,
    next_pipe: u64,
    /// The pipe of each FIFO some end of which is open.
    fifos: BTreeMap<NodeId, u64>,
    /// FIFO opens waiting for the other end: handle → the other end's open count then.
    fifo_waits: BTreeMap<u64, u64>,
    parked: Vec<Parked>,
    /// `flock` locks, by node.
    locks: BTreeMap<NodeId, locks::NodeLocks>,
    epolls: BTreeMap<u64, epoll::Epoll>,
    next_epoll: u64,
    sockets: BTreeMap<u64, sockets::Socket>,
    next_socket: u64,
    socket_names: sockets::Names,
    /// The network stack, when the machine has a network device.
    net: Option<sockets::Stack>,
    terminal: Terminal,
    /// Moves when the terminal's input does (what an edge-triggered `epoll` looks at).
    terminal_generation: u64,
    /// Something parked requests wait for changed.
    changed: bool,
    /// Something the network stack carries moved (a linked pipe's bytes or ends, a listener's
    /// queue): the stack runs once the request is done.
    network_due: bool,
    requests: u64,
    remote_requests: u64,
    kernel_core_requests: u64,
    refused: u64,
    /// Who made the request being carried out (see [`Service::caller_is_privileged`]).
    caller: Caller,
}

static SERVICE: Mutex<Option<Service>> = Mutex::new(None);

/// Starts the service on this instance with the initramfs as its root.
pub fn start(archive: Option<initramfs::Archive<'static>>) {
    let free = crate::mm::frames::counts().0 as usize;
    // tmpfs may take half of the service instance's free memory, as Linux's default.
    let limit = free / 2;
    let pages = alloc::boxed::Box::new(pages::FramePages::new());
    let mut vfs = Vfs::new(archive, pages, limit, realtime_ns, super::proc::source(), super::sys::source());
    shares::mount_all(&mut vfs);
    let mut service = Service {
        vfs,
        open: BTreeMap::new(),
        next_handle: CONSOLE_HANDLE + 1,
        pipes: BTreeMap::new(),
        next_pipe: 1,
        fifos: BTreeMap::new(),
        fifo_waits: BTreeMap::new(),
        parked: Vec::new(),
        locks: BTreeMap::new(),
        epolls: BTreeMap::new(),
        next_epoll: 1,
        sockets: BTreeMap::new(),
        next_socket: 1,
        socket_names: sockets::Names::default(),
        net: sockets::Stack::start(),
        terminal: Terminal::new(),
        terminal_generation: 0,
        changed: false,
        network_due: false,
        requests: 0,
        remote_requests: 0,
        kernel_core_requests: 0,
        refused: 0,
        caller: Caller::KERNEL,
    };
    service.open.insert(
        CONSOLE_HANDLE,
        OpenFile {
            object: Object::Device { node: None, device: Device::Console },
            flags: flags::READ_WRITE,
            offset: 0,
            references: 1,
            name: b"/dev/console".to_vec(),
        },
    );
    *SERVICE.lock() = Some(service);
    crate::msg::register(
        Kind::FileRequest,
        crate::msg::Handler { high_priority: false, on_line: None, on_large: Some(transport::on_remote_request) },
    );
    log::info!("file service: / initramfs (read-only), /tmp tmpfs ({} MiB at most), /dev, /proc, /sys", limit >> 8);
}

fn realtime_ns() -> u64 {
    crate::time::realtime_ns()
}

/// Handles `request` from `client`: `Some(reply)` now, or `None` when it was parked (its reply
/// comes later through `client::complete`) or needs no answer.
pub fn submit(client: usize, request: &FileRequest<'_>) -> Option<Reply> {
    let mut later = Vec::new();
    let mut sys_request: Option<(SysRequest, u64, alloc::sync::Arc<dyn SysSource>)> = None;
    let now = {
        let mut guard = SERVICE.lock();
        let Some(service) = guard.as_mut() else {
            return Some(Reply::error(request.request_id, errno::ENOSYS));
        };
        service.requests += 1;
        if client != SERVICE_CORE {
            service.remote_requests += 1;
        }
        if crate::core::shared::this_kcb().role() == crate::core::kcb::Role::Kernel {
            service.kernel_core_requests += 1;
        }
        let decoded = Request::decode(request);
        let caller = Caller::of(request);
        let outcome = match &decoded {
            Ok(decoded) => service.handle(&caller, decoded, 0),
            Err(error) => {
                service.refused += 1;
                Outcome::Done(Reply::error(0, error.errno()))
            }
        };
        let now = match outcome {
            Outcome::Done(mut reply) => {
                reply.request_id = request.request_id;
                Some(reply)
            }
            Outcome::Silent => None,
            Outcome::Sys { request, length } => {
                sys_request = Some((request, length, service.vfs.sys_source()));
                None
            }
            Outcome::Park(done) => match decoded.as_ref().ok().and_then(Request::to_parked) {
                Some(parked) => {
                    service.parked.push(Parked {
                        client,
                        request_id: request.request_id,
                        caller,
                        request: parked,
                        done,
                    });
                    None
                }
                // Only an open, a read, a write and a poll wait; were another to, it is
                // refused rather than lost.
                None => Some(Reply::error(request.request_id, errno::EIO)),
            },
        };
        if let Ok(Request::Cancel { request_id }) = decoded {
            service.cancel(client, request_id, &mut later);
        }
        if service.network_due {
            // Bytes a process wrote to a connection or read from one (room for more), an end
            // it closed, a connection it accepted.
            service.run_network();
        }
        service.retry_parked(&mut later);
        now
    };
    transport::deliver(later);
    let now = match sys_request {
        Some((sys_request, length, source)) => Some(carry_out(request.request_id, sys_request, length, &*source)),
        None => now,
    };
    now.filter(|reply| super::client::wants_reply(reply.request_id))
}

/// Carries out a decoded `/sys` write, with the service's lock let go: stopping or starting a
/// core sends it an inter-core call and waits for it, during which this instance must go on
/// taking messages, and the other cores' file requests must not find the service locked.
fn carry_out(request_id: u64, request: SysRequest, length: u64, source: &dyn SysSource) -> Reply {
    match request.invoke(source) {
        Ok(()) => Reply::value(request_id, length),
        Err(error) => {
            if let Some(service) = SERVICE.lock().as_mut() {
                service.refused += 1;
            }
            log::debug!("file service: {request:?} refused: errno {error}");
            Reply::error(request_id, error)
        }
    }
}

/// Whether the service has work that came outside a message look: requests in its inbox,
/// console input, frames or a timer of the network stack. A kernel core, which takes no tick, looks before it halts.
pub fn has_work() -> bool {
    super::serves_files_here()
        && (transport::inbox_waiting() || console::input_waiting() || sockets::network_has_work())
}

/// The service's counts.
pub fn counts() -> Option<Counts> {
    // A snapshot: `/proc` text is made while the service holds its own lock.
    *COUNTS.lock()
}

/// The counts when the last `/proc` file was opened (see [`counts`]).
static COUNTS: Mutex<Option<Counts>> = Mutex::new(None);

impl Service {
    fn counts(&self) -> Counts {
        let vfs = self.vfs.counts();
        Counts {
            open_files: self.open.len() - 1,
            pipes: self.pipes.len(),
            pipe_pages: self.pipes.values().map(|p| p.buffer.pages_held()).sum(),
            parked: self.parked.len(),
            tmpfs_nodes: vfs.tmpfs_nodes,
            tmpfs_pages: vfs.tmpfs_pages,
            tmpfs_page_limit: vfs.tmpfs_page_limit,
            share_opened_fids: vfs.share_opened_fids,
            requests: self.requests,
            remote_requests: self.remote_requests,
            kernel_core_requests: self.kernel_core_requests,
            refused: self.refused,
            sockets: self.sockets.len(),
            epolls: self.epolls.len(),
        }
    }

    /// Takes the counts `/proc/reef/files` shows now (the text's maker cannot take the
    /// service's lock, which its caller holds).
    fn snapshot_counts(&self) {
        *COUNTS.lock() = Some(self.counts());
    }

    /// Whether the process behind the request being carried out is privileged: its effective
    /// user id is 0 (Linux's `CAP_NET_BIND_SERVICE`, `CAP_SYS_ADMIN`...). The kernel's own
    /// requests are. Any room of the service may ask while it serves a request, e.g. `bind`
    /// to a port below 1024: `if !self.caller_is_privileged() { return Err(errno::EACCES) }`.
    pub(super) fn caller_is_privileged(&self) -> bool {
        self.caller.effective_uid == 0
    }

    /// The ids the request being carried out is checked with (file-system user and group,
    /// supplementary groups).
    pub(super) fn credentials(&self) -> &vfs::Credentials {
        &self.caller.credentials
    }

    /// Runs one decoded request of `caller`, counting a refusal; the reply carries request
    /// id 0, which `submit` and the retries replace with the request's.
    fn handle(&mut self, caller: &Caller, request: &Request<'_>, done: u64) -> Outcome {
        self.caller = caller.clone();
        let pid = caller.pid;
        match self.invoke(pid, request, done) {
            Ok(outcome) => outcome,
            Err(error) => {
                self.refused += 1;
                Outcome::Done(Reply::error(0, error))
            }
        }
    }

    /// Retries every parked request after a change; completed ones go to `later`.
    fn retry_parked(&mut self, later: &mut Vec<(usize, Reply)>) {
        while self.changed {
            self.changed = false;
            let parked = core::mem::take(&mut self.parked);
            for mut parked in parked {
                match self.handle(&parked.caller.clone(), &parked.request, parked.done) {
                    Outcome::Done(mut reply) => {
                        reply.request_id = parked.request_id;
                        later.push((parked.client, reply));
                    }
                    Outcome::Park(done) => {
                        parked.done = done;
                        self.parked.push(parked);
                    }
                    Outcome::Silent => {}
                    // Only a first try makes one (a write to `/sys` never parks); were one to
                    // come here, it is refused rather than carried out under the lock.
                    Outcome::Sys { .. } => later.push((parked.client, Reply::error(parked.request_id, errno::EIO))),
                }
            }
        }
    }

    /// Finishes the parked request `request_id` of `client` with what it has: the bytes a
    /// pipe write got out, else EINTR.
    fn cancel(&mut self, client: usize, request_id: u64, later: &mut Vec<(usize, Reply)>) {
        if let Some(index) = self.parked.iter().position(|p| p.client == client && p.request_id == request_id) {
            let parked = self.parked.swap_remove(index);
            if matches!(parked.request, Request::Open { .. }) {
                // A FIFO open waiting for the other end: its handle goes with it.
                self.release(parked.done);
                later.push((client, Reply::error(request_id, errno::EINTR)));
                return;
            }
            let reply = if parked.done > 0 {
                Reply::value(request_id, parked.done)
            } else {
                Reply::error(request_id, errno::EINTR)
            };
            later.push((client, reply));
        }
    }
}
