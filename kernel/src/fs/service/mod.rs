//! The file service: one VFS, the open files, pipes and the console's line discipline, kept by
//! instance 0 alone; processes of every instance reach it by request (`fs::client`).
//!
//! A request either completes at once or, when it must wait (an empty pipe, a full pipe, no
//! console input, a `poll` with nothing ready), is parked with its bytes and completed when
//! what it waits for changes. The service never blocks and never sends a message while it
//! holds its lock: replies are collected and delivered after, and a write to `/sys` that
//! stops or starts a core (an inter-core call that waits for the core) is decoded under the
//! lock and carried out after it.

use super::terminal::Terminal;
use crate::core::shared;
use crate::proc::Errno;
use abi::file::{FileOp, FileReply, FileRequest, HandleKind, Metadata, CONSOLE_HANDLE, MAX_TRANSFER, NONE};
use abi::message::Kind;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;
use vfs::{Context, Device, NodeId, NodeKind, PipeBuffer, SysRequest, SysSource, Vfs};

/// The instance that runs the service (it owns the console).
pub const SERVICE_CORE: usize = 0;

/// Linux open flags the service reads.
pub mod flags {
    pub const ACCESS_MODE: u64 = 3;
    pub const WRITE_ONLY: u64 = 1;
    pub const READ_WRITE: u64 = 2;
    pub const CREATE: u64 = 0o100;
    pub const EXCLUSIVE: u64 = 0o200;
    pub const TRUNCATE: u64 = 0o1000;
    pub const APPEND: u64 = 0o2000;
    pub const NONBLOCK: u64 = 0o4000;
    pub const DIRECTORY: u64 = 0o200000;
    pub const NO_FOLLOW: u64 = 0o400000;
    pub const CLOSE_ON_EXEC: u64 = 0o2000000;
    /// Flags `F_SETFL` may change.
    pub const CHANGEABLE: u64 = APPEND | NONBLOCK;
}

/// `poll` event bits.
pub mod events {
    pub const IN: u16 = 0x1;
    pub const OUT: u16 = 0x4;
    pub const ERROR: u16 = 0x8;
    pub const HANG_UP: u16 = 0x10;
    pub const INVALID: u16 = 0x20;
}

/// What an open file refers to.
enum Object {
    Regular(NodeId),
    Directory {
        node: NodeId,
        cursor: u64,
    },
    /// A `/proc` file: its text, taken when it was opened.
    Proc {
        node: NodeId,
        text: Vec<u8>,
    },
    /// A `/sys` file: its text, taken when it was opened; a write is a request to the
    /// [`SysSource`] (`cpu<K>/online` stops or starts core K).
    Sys {
        node: NodeId,
        text: Vec<u8>,
    },
    Device {
        node: Option<NodeId>,
        device: Device,
    },
    PipeReader(u64),
    PipeWriter(u64),
    /// Both ends of a pipe: a FIFO opened for reading and writing (`O_RDWR`), which Linux
    /// opens at once as a reader and a writer.
    PipeBoth(u64),
}

/// One open file description: shared by every descriptor `dup` and `fork` made of it.
struct OpenFile {
    object: Object,
    /// Access mode and status flags (`O_APPEND`, `O_NONBLOCK`).
    flags: u64,
    offset: u64,
    /// Client instances' references (each instance holds one per handle it uses).
    references: u32,
    /// What `/proc/<pid>/fd` links name it by: the path it was opened under (links followed),
    /// `pipe:[N]`, `/dev/console`.
    name: Vec<u8>,
}

impl OpenFile {
    fn kind(&self) -> HandleKind {
        match self.object {
            Object::Regular(_) => HandleKind::Regular,
            Object::Directory { .. } => HandleKind::Directory,
            // Text made at open, read as a `/proc` file is: a read gives what is there.
            Object::Proc { .. } | Object::Sys { .. } => HandleKind::Proc,
            Object::Device { device: Device::Console | Device::Tty, .. } => HandleKind::Console,
            Object::Device { device: Device::Null, .. } => HandleKind::Null,
            Object::Device { device: Device::Zero, .. } => HandleKind::Zero,
            Object::Device { .. } => HandleKind::Device,
            Object::PipeReader(_) | Object::PipeWriter(_) | Object::PipeBoth(_) => HandleKind::Pipe,
        }
    }

    fn readable(&self) -> bool {
        self.flags & flags::ACCESS_MODE != flags::WRITE_ONLY
    }

    fn writable(&self) -> bool {
        matches!(self.flags & flags::ACCESS_MODE, flags::WRITE_ONLY | flags::READ_WRITE)
    }
}

struct Pipe {
    buffer: PipeBuffer,
    readers: u32,
    writers: u32,
    /// The FIFO this pipe serves while any end of it is open; `None` for `pipe()`'s.
    node: Option<NodeId>,
    /// Opens of each end so far: an `open` that waits for the other end waits for its count
    /// to change, so a writer that opened and closed meanwhile still lets a reader's open
    /// finish, as Linux's `r_counter` and `w_counter` do.
    reader_opens: u64,
    writer_opens: u64,
}

impl Pipe {
    fn new(node: Option<NodeId>) -> Self {
        Self { buffer: PipeBuffer::new(), readers: 0, writers: 0, node, reader_opens: 0, writer_opens: 0 }
    }

    /// One more open end: for reading, writing or both.
    fn add_ends(&mut self, reading: bool, writing: bool) {
        if reading {
            self.readers += 1;
            self.reader_opens += 1;
        }
        if writing {
            self.writers += 1;
            self.writer_opens += 1;
        }
    }
}

/// What opening a descriptor's link gives: an open already made (a pipe's new end), or a
/// node to open as a path's would be.
enum Reopened {
    Done(Outcome),
    Node(NodeId, Vec<u8>),
}

/// The process and descriptor a path names through a descriptor link, as Linux's
/// `/proc/<pid>/fd/N` (and `/proc/self/fd/N`) and the `/dev` links to them: `/dev/fd/N`,
/// `/dev/stdin`, `/dev/stdout`, `/dev/stderr`. `pid` is the caller's. Only absolute paths.
fn descriptor_link(pid: u32, path: &[u8]) -> Option<(u32, u32)> {
    let number = |text: &[u8]| core::str::from_utf8(text).ok()?.parse::<u32>().ok();
    match path {
        b"/dev/stdin" => return Some((pid, 0)),
        b"/dev/stdout" => return Some((pid, 1)),
        b"/dev/stderr" => return Some((pid, 2)),
        _ => {}
    }
    if let Some(fd) = path.strip_prefix(b"/dev/fd/") {
        return Some((pid, number(fd)?));
    }
    let rest = path.strip_prefix(b"/proc/")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    let owner = match &rest[..slash] {
        b"self" => pid,
        digits => number(digits)?,
    };
    Some((owner, number(rest[slash..].strip_prefix(b"/fd/")?)?))
}

/// A request kept until it can complete.
struct Parked {
    client: usize,
    request_id: u64,
    pid: u32,
    op: FileOp,
    words: [u64; abi::file::REQUEST_WORDS],
    data: Vec<u8>,
    /// Bytes of a pipe write already written.
    done: u64,
}

/// A reply on its way to the client instance that asked.
pub struct Reply {
    pub request_id: u64,
    pub result: i64,
    pub words: [u64; abi::file::REPLY_WORDS],
    pub bytes: Vec<u8>,
}

impl Reply {
    fn value(request_id: u64, value: u64) -> Self {
        Self { request_id, result: value as i64, words: [0; 2], bytes: Vec::new() }
    }

    fn error(request_id: u64, error: Errno) -> Self {
        Self { request_id, result: -i64::from(error), words: [0; 2], bytes: Vec::new() }
    }
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
    pub requests: u64,
    pub remote_requests: u64,
    /// Requests served while the service's core was a kernel core (`role 0 kc`).
    pub kernel_core_requests: u64,
    pub refused: u64,
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
    terminal: Terminal,
    /// Something parked requests wait for changed.
    changed: bool,
    requests: u64,
    remote_requests: u64,
    kernel_core_requests: u64,
    refused: u64,
}

static SERVICE: Mutex<Option<Service>> = Mutex::new(None);
/// COM1 input arrived (set by the interrupt, consumed in thread context).
static CONSOLE_INPUT: AtomicBool = AtomicBool::new(false);

/// Frames of this instance as tmpfs pages.
struct FramePages;

impl vfs::PageStore for FramePages {
    fn allocate(&mut self) -> Option<vfs::PageHandle> {
        crate::mm::frames::allocate_zeroed().ok().map(vfs::PageHandle)
    }

    fn free(&mut self, page: vfs::PageHandle) {
        let _ = crate::mm::frames::free(page.0);
    }

    fn bytes(&self, page: vfs::PageHandle) -> &[u8; 4096] {
        // SAFETY: the handle is a frame this store allocated and has not freed; the direct
        // map covers it; tmpfs, under the service lock, is its only user.
        unsafe { &*(crate::arch::paging::physical_to_virtual(page.0) as *const [u8; 4096]) }
    }

    fn bytes_mut(&mut self, page: vfs::PageHandle) -> &mut [u8; 4096] {
        // SAFETY: as in `bytes`; `&mut self` is the service's exclusive access.
        unsafe { &mut *(crate::arch::paging::physical_to_virtual(page.0) as *mut [u8; 4096]) }
    }
}

/// Starts the service on this instance with the initramfs as its root.
pub fn start(archive: Option<initramfs::Archive<'static>>) {
    let free = crate::mm::frames::counts().0 as usize;
    // tmpfs may take half of the service instance's free memory, as Linux's default.
    let limit = free / 2;
    let pages = alloc::boxed::Box::new(FramePages);
    let vfs = Vfs::new(archive, pages, limit, realtime_ns, super::proc::source(), super::sys::source());
    let mut service = Service {
        vfs,
        open: BTreeMap::new(),
        next_handle: CONSOLE_HANDLE + 1,
        pipes: BTreeMap::new(),
        next_pipe: 1,
        fifos: BTreeMap::new(),
        fifo_waits: BTreeMap::new(),
        parked: Vec::new(),
        terminal: Terminal::new(),
        changed: false,
        requests: 0,
        remote_requests: 0,
        kernel_core_requests: 0,
        refused: 0,
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
        crate::msg::Handler { high_priority: false, on_line: None, on_large: Some(on_remote_request) },
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
        if crate::core::role::current() == crate::core::kcb::Role::Kernel {
            service.kernel_core_requests += 1;
        }
        let outcome = service.handle(request.pid, request.op, &request.words, request.first, request.second, 0);
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
            Outcome::Park(done) => {
                service.parked.push(Parked {
                    client,
                    request_id: request.request_id,
                    pid: request.pid,
                    op: request.op,
                    words: request.words,
                    data: [request.first, request.second].concat(),
                    done,
                });
                None
            }
        };
        if request.op == FileOp::Cancel {
            service.cancel(client, request.words[0], &mut later);
        }
        service.retry_parked(&mut later);
        now
    };
    deliver(later);
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

/// Sends completed parked replies to their clients (outside the service lock).
fn deliver(replies: Vec<(usize, Reply)>) {
    for (client, reply) in replies {
        if !super::client::wants_reply(reply.request_id) {
            continue;
        }
        if client == shared::this_core() as usize {
            super::client::complete(reply);
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
static INBOX: Mutex<alloc::collections::VecDeque<Vec<u8>>> = Mutex::new(alloc::collections::VecDeque::new());
static INBOX_WAITING: AtomicBool = AtomicBool::new(false);

/// Message handler: a request from another instance; checked now, handled at a safe point.
fn on_remote_request(bytes: &[u8]) -> crate::msg::HandlerResult {
    let request = FileRequest::decode(bytes)?;
    if super::client::core_of_request(request.request_id) >= crate::msg::messaging_cores() {
        return Err(abi::message::DecodeError::BadField("request id"));
    }
    INBOX.lock().push_back(bytes.to_vec());
    INBOX_WAITING.store(true, Ordering::Relaxed);
    Ok(())
}

/// At a safe point of the service's instance: handles the requests other instances sent.
pub fn handle_inbox() {
    if !INBOX_WAITING.swap(false, Ordering::Relaxed) {
        return;
    }
    loop {
        let Some(bytes) = INBOX.lock().pop_front() else { break };
        let Ok(request) = FileRequest::decode(&bytes) else { continue };
        let client = super::client::core_of_request(request.request_id);
        if let Some(reply) = submit(client, &request) {
            send_reply(client, &reply);
        }
    }
}

/// Whether the service has work that came outside a message look: requests in its inbox, or
/// console input. A kernel core, which takes no tick, looks before it halts.
pub fn has_work() -> bool {
    super::serves_files_here()
        && (INBOX_WAITING.load(Ordering::Relaxed)
            || CONSOLE_INPUT.load(Ordering::Relaxed)
            || crate::arch::legacy::com1::has_input())
}

/// From the COM1 interrupt: input waits; the service takes it in thread context.
pub fn note_console_input() {
    CONSOLE_INPUT.store(true, Ordering::Relaxed);
}

/// Thread context on the service's instance (idle loop, return to user): feeds waiting COM1
/// input to the line discipline (the service is COM1's only reader: every keystroke, Ctrl-C
/// included, goes through it) and completes what it unblocks.
pub fn poll_console() {
    if shared::this_core() as usize != SERVICE_CORE {
        return;
    }
    let input_waiting = CONSOLE_INPUT.load(Ordering::Relaxed) || crate::arch::legacy::com1::has_input();
    if !input_waiting {
        return;
    }
    let mut later = Vec::new();
    {
        let mut guard = SERVICE.lock();
        let Some(service) = guard.as_mut() else { return };
        CONSOLE_INPUT.store(false, Ordering::Relaxed);
        let mut signals = Vec::new();
        let mut magic_keys = Vec::new();
        while let Some(byte) = crate::arch::legacy::com1::read_byte() {
            crate::console::note_input();
            // A BREAK and its key never reach the line discipline (`magic_key.rs`).
            let byte = match super::magic_key::filter(byte) {
                super::magic_key::Input::Byte(byte) => byte,
                super::magic_key::Input::Break => continue,
                super::magic_key::Input::Key(key) => {
                    magic_keys.push(key);
                    continue;
                }
            };
            if let Some(signal) = service.terminal.input(byte, &mut |echo| super::console::write_here(echo)) {
                signals.push(signal);
            }
        }
        if !magic_keys.is_empty() {
            // The dump shows `/proc/reef/files` as it is now, taken while the lock is held.
            *COUNTS.lock() = Some(service.counts());
        }
        service.changed = true;
        service.retry_parked(&mut later);
        drop(guard);
        for (group, signal) in signals {
            if group != 0 {
                let _ = crate::proc::signal::signal_group(group, signal);
            }
        }
        magic_keys.into_iter().for_each(super::magic_key::run);
    }
    deliver(later);
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
            requests: self.requests,
            remote_requests: self.remote_requests,
            kernel_core_requests: self.kernel_core_requests,
            refused: self.refused,
        }
    }

    /// Decodes and runs one request; the reply carries request id 0, which `submit` and the
    /// retries replace with the request's.
    fn handle(&mut self, pid: u32, op: FileOp, w: &[u64; 6], first: &[u8], second: &[u8], done: u64) -> Outcome {
        match self.invoke(pid, op, w, first, second, done) {
            Ok(outcome) => outcome,
            Err(error) => {
                self.refused += 1;
                Outcome::Done(Reply::error(0, error))
            }
        }
    }

    fn context(&self, pid: u32, cwd: u64) -> Result<Context, Errno> {
        let cwd = if cwd == NONE { self.vfs.root() } else { self.directory_node(cwd)? };
        Ok(Context { pid, cwd })
    }

    fn directory_node(&self, handle: u64) -> Result<NodeId, Errno> {
        match self.open.get(&handle).map(|f| &f.object) {
            Some(Object::Directory { node, .. }) => Ok(*node),
            Some(_) => Err(errno::ENOTDIR),
            None => Err(errno::EBADF),
        }
    }

    fn base(&self, handle: u64) -> Result<Option<NodeId>, Errno> {
        if handle == NONE {
            Ok(None)
        } else {
            self.directory_node(handle).map(Some)
        }
    }

    fn node_of(&self, handle: u64) -> Result<Option<NodeId>, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        Ok(match &file.object {
            Object::Regular(node)
            | Object::Directory { node, .. }
            | Object::Proc { node, .. }
            | Object::Sys { node, .. } => Some(*node),
            Object::Device { node, .. } => *node,
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => {
                self.pipes.get(pipe).and_then(|pipe| pipe.node)
            }
        })
    }

    fn new_handle(&mut self, file: OpenFile) -> u64 {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.open.insert(handle, file);
        handle
    }

    fn invoke(
        &mut self,
        pid: u32,
        op: FileOp,
        w: &[u64; 6],
        first: &[u8],
        second: &[u8],
        done: u64,
    ) -> Result<Outcome, Errno> {
        let done_value = |value: u64| Ok(Outcome::Done(Reply::value(0, value)));
        match op {
            FileOp::Open => self.open_path(pid, w, first, done),
            FileOp::Read => self.read(w[0], w[1] as usize, w[2]),
            FileOp::Write => self.write(pid, w[0], w[1], first, done),
            FileOp::Seek => self.seek(w[0], w[1] as i64, w[2]),
            FileOp::Stat => {
                let metadata = self.stat_handle(w[0])?;
                Ok(Outcome::Done(Reply { bytes: metadata.encode().to_vec(), ..Reply::value(0, 0) }))
            }
            FileOp::StatPath => {
                let context = self.context(pid, w[1])?;
                let followed = descriptor_link(pid, first).filter(|_| w[2] != 0);
                // A descriptor link, followed: what the descriptor has open (`stat` of
                // `/dev/fd/63` is the pipe's, as bash's `<(…)` needs).
                let handle = followed.map(|(owner, fd)| super::proc::descriptor_handle(owner, fd).ok_or(errno::ENOENT));
                let metadata = match handle {
                    Some(Ok(handle)) if handle == CONSOLE_HANDLE => {
                        let console = self.vfs.resolve(&context, None, b"/dev/console", true)?;
                        self.metadata(console)?
                    }
                    Some(Ok(handle)) => self.stat_handle(handle)?,
                    Some(Err(error)) => return Err(error),
                    None => self.metadata(self.vfs.resolve(&context, self.base(w[0])?, first, w[2] != 0)?)?,
                };
                Ok(Outcome::Done(Reply { bytes: metadata.encode().to_vec(), ..Reply::value(0, 0) }))
            }
            FileOp::ReadDirectory => self.read_directory(w[0], w[1] as usize),
            FileOp::MakeDirectory => {
                let context = self.context(pid, w[1])?;
                let (directory, name) = self.vfs.resolve_parent(&context, self.base(w[0])?, first)?;
                self.vfs.make_directory(directory, &name, w[2] as u32)?;
                done_value(0)
            }
            FileOp::Unlink => {
                let context = self.context(pid, w[1])?;
                let (directory, name) = self.vfs.resolve_parent(&context, self.base(w[0])?, first)?;
                if w[2] != 0 {
                    self.vfs.remove_directory(directory, &name)?;
                } else {
                    self.vfs.unlink(directory, &name)?;
                }
                done_value(0)
            }
            FileOp::Rename => {
                let context = self.context(pid, w[2])?;
                let (from, from_name) = self.vfs.resolve_parent(&context, self.base(w[0])?, first)?;
                let (to, to_name) = self.vfs.resolve_parent(&context, self.base(w[1])?, second)?;
                self.vfs.rename(from, &from_name, to, &to_name, w[3] as u32)?;
                done_value(0)
            }
            FileOp::Link => {
                let context = self.context(pid, w[2])?;
                let node = self.vfs.resolve(&context, self.base(w[0])?, first, w[3] != 0)?;
                let (to, to_name) = self.vfs.resolve_parent(&context, self.base(w[1])?, second)?;
                self.vfs.link(node, to, &to_name)?;
                done_value(0)
            }
            FileOp::Symlink => {
                let context = self.context(pid, w[1])?;
                let (directory, name) = self.vfs.resolve_parent(&context, self.base(w[0])?, second)?;
                self.vfs.symlink(first, directory, &name)?;
                done_value(0)
            }
            FileOp::ReadLink => {
                let context = self.context(pid, w[1])?;
                let node = self.vfs.resolve(&context, self.base(w[0])?, first, false)?;
                let target = self.vfs.read_link(node)?;
                Ok(Outcome::Done(Reply { bytes: target, ..Reply::value(0, 0) }))
            }
            FileOp::Truncate => {
                let file = self.open.get(&w[0]).ok_or(errno::EBADF)?;
                let Object::Regular(node) = file.object else { return Err(errno::EINVAL) };
                if !file.writable() {
                    return Err(errno::EINVAL);
                }
                self.vfs.truncate(node, w[1])?;
                done_value(0)
            }
            FileOp::SetTimes | FileOp::ChangeMode | FileOp::Access => {
                let node = if first.is_empty() {
                    self.node_of(w[0])?.ok_or(errno::EINVAL)?
                } else {
                    let context = self.context(pid, w[1])?;
                    let follow = if op == FileOp::SetTimes { w[4] } else { w[3] };
                    self.vfs.resolve(&context, self.base(w[0])?, first, follow != 0)?
                };
                match op {
                    FileOp::SetTimes => {
                        let time = |word: u64| (word != NONE).then_some(word);
                        self.vfs.set_times(node, time(w[2]), time(w[3]))?;
                    }
                    FileOp::ChangeMode => self.vfs.set_mode(node, w[2] as u32)?,
                    _ => {
                        // Every caller is root: reading and writing are allowed (but W_OK on a
                        // read-only file system is EROFS), executing needs an execute bit
                        // (directories are searched) [access(2)].
                        if w[2] & 2 != 0 {
                            self.vfs.check_writable(node)?;
                        }
                        let metadata = self.vfs.stat(node)?;
                        let directory = metadata.mode & initramfs::mode::TYPE_MASK == initramfs::mode::DIRECTORY;
                        if w[2] & 1 != 0 && !directory && metadata.mode & 0o111 == 0 {
                            return Err(errno::EACCES);
                        }
                    }
                }
                done_value(0)
            }
            FileOp::Pipe => {
                let pipe = self.next_pipe;
                self.next_pipe += 1;
                let mut state = Pipe::new(None);
                state.add_ends(true, true);
                self.pipes.insert(pipe, state);
                let status = w[0] & flags::NONBLOCK;
                // Linux's name for a pipe: its inode number, which `fstat` gives too.
                let name = alloc::format!("pipe:[{pipe}]").into_bytes();
                let reader = self.new_handle(OpenFile {
                    object: Object::PipeReader(pipe),
                    flags: status,
                    offset: 0,
                    references: 1,
                    name: name.clone(),
                });
                let writer = self.new_handle(OpenFile {
                    object: Object::PipeWriter(pipe),
                    flags: status | flags::WRITE_ONLY,
                    offset: 0,
                    references: 1,
                    name,
                });
                Ok(Outcome::Done(Reply { words: [reader, writer], ..Reply::value(0, 0) }))
            }
            FileOp::MakeNode => {
                let context = self.context(pid, w[1])?;
                let (directory, name) = self.vfs.resolve_parent(&context, self.base(w[0])?, first)?;
                self.vfs.make_node(directory, &name, w[2] as u32)?;
                done_value(0)
            }
            FileOp::Descriptors => {
                let count = w[0] as usize;
                if first.len() != count.saturating_mul(12) {
                    return Err(errno::EINVAL);
                }
                let handles: Vec<(u32, u64)> = first
                    .chunks_exact(12)
                    .filter_map(|entry| {
                        let fd = u32::from_le_bytes(entry[..4].try_into().ok()?);
                        Some((fd, u64::from_le_bytes(entry[4..].try_into().ok()?)))
                    })
                    .collect();
                let descriptors =
                    handles.iter().filter_map(|&(fd, handle)| Some((fd, self.name_of(handle)?))).collect();
                super::proc::set_descriptors(pid, descriptors, handles);
                Ok(Outcome::Silent)
            }
            FileOp::Retain => {
                let file = self.open.get_mut(&w[0]).ok_or(errno::EBADF)?;
                file.references += 1;
                done_value(0)
            }
            FileOp::Release => {
                self.release(w[0]);
                Ok(Outcome::Silent)
            }
            FileOp::GetFlags => {
                let file = self.open.get(&w[0]).ok_or(errno::EBADF)?;
                let directory = if matches!(file.object, Object::Directory { .. }) { flags::DIRECTORY } else { 0 };
                done_value(file.flags | directory)
            }
            FileOp::SetFlags => {
                let file = self.open.get_mut(&w[0]).ok_or(errno::EBADF)?;
                file.flags = (file.flags & !flags::CHANGEABLE) | (w[1] & flags::CHANGEABLE);
                self.changed = true;
                done_value(0)
            }
            FileOp::Poll => self.poll(w[0] as usize, w[1] != 0, first),
            FileOp::Control => self.control(w[0], w[1] as u32, first),
            FileOp::PathOf => {
                let node = self.directory_node(w[0])?;
                let path = self.vfs.path_of(node)?;
                Ok(Outcome::Done(Reply { bytes: path, ..Reply::value(0, 0) }))
            }
            FileOp::Cancel => Ok(Outcome::Silent),
            FileOp::FilesystemSpace => {
                let space = self.vfs.space(w[0])?;
                let fields = [
                    space.magic,
                    u64::from(space.read_only),
                    space.pages,
                    space.free_pages,
                    space.nodes,
                    space.free_nodes,
                ];
                let bytes = fields.iter().flat_map(|field| field.to_le_bytes()).collect();
                Ok(Outcome::Done(Reply { bytes, ..Reply::value(0, 0) }))
            }
        }
    }

    /// `done` is 0 for a new open, else the handle of a FIFO open waiting for the other end.
    fn open_path(&mut self, pid: u32, w: &[u64; 6], path: &[u8], done: u64) -> Result<Outcome, Errno> {
        if done != 0 {
            return self.fifo_open_waiting(done);
        }
        let open_flags = w[2];
        let context = self.context(pid, w[1])?;
        let base = self.base(w[0])?;
        let follow = open_flags & flags::NO_FOLLOW == 0;
        let magic = descriptor_link(pid, path).map(|(owner, fd)| self.reopen(&context, owner, fd, open_flags));
        let resolved = match magic {
            Some(Ok(Reopened::Done(outcome))) => return Ok(outcome),
            Some(Ok(Reopened::Node(node, name))) => Ok((node, name)),
            Some(Err(error)) => return Err(error),
            None => self.vfs.resolve_with_path(&context, base, path, follow),
        };
        let (node, name) = match resolved {
            Ok(_) if open_flags & flags::CREATE != 0 && open_flags & flags::EXCLUSIVE != 0 => {
                return Err(errno::EEXIST)
            }
            Ok(found) => found,
            Err(errno::ENOENT) if open_flags & flags::CREATE != 0 => {
                let (directory, name) = self.vfs.resolve_parent(&context, base, path)?;
                let node = self.vfs.create(&context, directory, &name, w[3] as u32, true)?.0;
                (node, self.vfs.path_in(directory, &name).unwrap_or_default())
            }
            Err(error) => return Err(error),
        };
        let access = open_flags & flags::ACCESS_MODE;
        let wants_write = access == flags::WRITE_ONLY || access == flags::READ_WRITE;
        let status = open_flags & (flags::ACCESS_MODE | flags::APPEND | flags::NONBLOCK);
        let object = match self.vfs.kind(node)? {
            NodeKind::Directory => {
                if wants_write {
                    return Err(errno::EISDIR);
                }
                Object::Directory { node, cursor: 0 }
            }
            _ if open_flags & flags::DIRECTORY != 0 => return Err(errno::ENOTDIR),
            NodeKind::Symlink => return Err(errno::ELOOP),
            NodeKind::Regular => {
                if wants_write {
                    self.vfs.check_writable(node)?;
                    if open_flags & flags::TRUNCATE != 0 {
                        self.vfs.truncate(node, 0)?;
                    }
                }
                Object::Regular(node)
            }
            NodeKind::Device(device) => Object::Device { node: Some(node), device },
            NodeKind::Fifo => return self.open_fifo(node, status, name),
            // Sockets and devices of the archive outside `/dev`: nothing serves them.
            NodeKind::Special => return Err(errno::ENXIO),
            NodeKind::ProcFile(_) => {
                if wants_write {
                    return Err(errno::EACCES);
                }
                // The counts `/proc` shows are the service's own, taken now, while it holds
                // the lock the text's maker cannot take again.
                *COUNTS.lock() = Some(self.counts());
                Object::Proc { node, text: self.vfs.proc_contents(node)? }
            }
            NodeKind::SysFile(file) => {
                // Linux refuses to open a read-only attribute for writing, root included
                // (`kernfs_fop_open`). `O_TRUNC`, which `echo 0 >` opens with, changes
                // nothing: each write is read whole.
                if wants_write && !file.is_writable() {
                    return Err(errno::EACCES);
                }
                Object::Sys { node, text: self.vfs.sys_contents(node)? }
            }
        };
        if !matches!(object, Object::Device { .. }) {
            self.vfs.open_node(node)?;
        }
        let file = OpenFile { object, flags: status, offset: 0, references: 1, name };
        let kind = file.kind();
        let handle = self.new_handle(file);
        Ok(Outcome::Done(Reply { words: [handle, kind as u64], ..Reply::value(0, 0) }))
    }

    /// Opens what descriptor `fd` of process `owner` names, as Linux opens a
    /// `/proc/<pid>/fd/N` link (a "magic" link, followed to the open file, not to a path): a
    /// pipe gives a new end of the same pipe for the access asked (`O_RDWR`: the end the
    /// descriptor is), a file or a device its node, opened anew (its own offset).
    fn reopen(&mut self, context: &Context, owner: u32, fd: u32, open_flags: u64) -> Result<Reopened, Errno> {
        let handle = super::proc::descriptor_handle(owner, fd).ok_or(errno::ENOENT)?;
        if handle == CONSOLE_HANDLE {
            let console = self.vfs.resolve_with_path(context, None, b"/dev/console", true)?;
            return Ok(Reopened::Node(console.0, console.1));
        }
        let file = self.open.get(&handle).ok_or(errno::ENOENT)?;
        let name = file.name.clone();
        let status = open_flags & (flags::ACCESS_MODE | flags::APPEND | flags::NONBLOCK);
        let (pipe, end) = match &file.object {
            Object::PipeReader(pipe) => (*pipe, (true, false)),
            Object::PipeWriter(pipe) => (*pipe, (false, true)),
            Object::PipeBoth(pipe) => (*pipe, (true, true)),
            Object::Regular(node) | Object::Directory { node, .. } => return Ok(Reopened::Node(*node, name)),
            Object::Device { node: Some(node), .. } => return Ok(Reopened::Node(*node, name)),
            _ => return Err(errno::ENXIO),
        };
        let (reading, writing) = match status & flags::ACCESS_MODE {
            flags::WRITE_ONLY => (false, true),
            flags::READ_WRITE => end,
            _ => (true, false),
        };
        self.pipes.get_mut(&pipe).ok_or(errno::ENOENT)?.add_ends(reading, writing);
        self.changed = true;
        let object = match (reading, writing) {
            (true, true) => Object::PipeBoth(pipe),
            (true, false) => Object::PipeReader(pipe),
            _ => Object::PipeWriter(pipe),
        };
        let handle = self.new_handle(OpenFile { object, flags: status, offset: 0, references: 1, name });
        Ok(Reopened::Done(Outcome::Done(Reply { words: [handle, HandleKind::Pipe as u64], ..Reply::value(0, 0) })))
    }

    /// Opens the FIFO `node` as an end of the pipe the service keeps for it (made now if no
    /// end is open), with Linux's rules [fifo(7), Linux `fifo_open`]: for reading, or for
    /// writing, the open waits (parked, the handle its progress) until the other end is
    /// opened, unless `O_NONBLOCK`; a reader with `O_NONBLOCK` opens at once, a writer with
    /// `O_NONBLOCK` and no reader is `ENXIO`; `O_RDWR` opens at once as both ends.
    fn open_fifo(&mut self, node: NodeId, status: u64, name: Vec<u8>) -> Result<Outcome, Errno> {
        let (reading, writing) = match status & flags::ACCESS_MODE {
            flags::WRITE_ONLY => (false, true),
            flags::READ_WRITE => (true, true),
            _ => (true, false),
        };
        let nonblocking = status & flags::NONBLOCK != 0;
        let existing = self.fifos.get(&node).copied();
        let readers = existing.and_then(|pipe| self.pipes.get(&pipe)).map_or(0, |pipe| pipe.readers);
        if writing && !reading && nonblocking && readers == 0 {
            return Err(errno::ENXIO);
        }
        self.vfs.open_node(node)?;
        let pipe = existing.unwrap_or_else(|| {
            let pipe = self.next_pipe;
            self.next_pipe += 1;
            self.pipes.insert(pipe, Pipe::new(Some(node)));
            self.fifos.insert(node, pipe);
            pipe
        });
        let Some(state) = self.pipes.get_mut(&pipe) else { return Err(errno::EIO) };
        state.add_ends(reading, writing);
        let waits_for = match (reading, writing) {
            _ if nonblocking => None,
            (true, false) => (state.writers == 0).then_some(state.writer_opens),
            (false, true) => (state.readers == 0).then_some(state.reader_opens),
            _ => None,
        };
        // An end opened: opens of the other end waiting for one go on.
        self.changed = true;
        let object = match (reading, writing) {
            (true, true) => Object::PipeBoth(pipe),
            (true, false) => Object::PipeReader(pipe),
            _ => Object::PipeWriter(pipe),
        };
        let handle = self.new_handle(OpenFile { object, flags: status, offset: 0, references: 1, name });
        if let Some(seen) = waits_for {
            self.fifo_waits.insert(handle, seen);
            return Ok(Outcome::Park(handle));
        }
        Ok(Outcome::Done(Reply { words: [handle, HandleKind::Pipe as u64], ..Reply::value(0, 0) }))
    }

    /// A FIFO open parked until the other end opens: done once that end's open count moved.
    fn fifo_open_waiting(&mut self, handle: u64) -> Result<Outcome, Errno> {
        let seen = *self.fifo_waits.get(&handle).ok_or(errno::EBADF)?;
        let (pipe, reading) = match self.open.get(&handle).map(|file| &file.object) {
            Some(Object::PipeReader(pipe)) => (*pipe, true),
            Some(Object::PipeWriter(pipe)) => (*pipe, false),
            _ => return Err(errno::EBADF),
        };
        let state = self.pipes.get(&pipe).ok_or(errno::EBADF)?;
        let opens = if reading { state.writer_opens } else { state.reader_opens };
        if opens == seen {
            return Ok(Outcome::Park(handle));
        }
        self.fifo_waits.remove(&handle);
        Ok(Outcome::Done(Reply { words: [handle, HandleKind::Pipe as u64], ..Reply::value(0, 0) }))
    }

    /// What `/proc/<pid>/fd` shows for `handle`: a directory by its path now, a file by the
    /// path it was opened under, with Linux's ` (deleted)` once its last name is gone.
    fn name_of(&self, handle: u64) -> Option<Vec<u8>> {
        let file = self.open.get(&handle)?;
        let node = match &file.object {
            Object::Directory { node, .. } => {
                if let Ok(path) = self.vfs.path_of(*node) {
                    return Some(path);
                }
                Some(*node)
            }
            Object::Regular(node) => Some(*node),
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => {
                self.pipes.get(pipe).and_then(|pipe| pipe.node)
            }
            _ => None,
        };
        let mut name = file.name.clone();
        if node.is_some_and(|node| self.vfs.stat(node).map_or(true, |metadata| metadata.links == 0)) {
            name.extend_from_slice(b" (deleted)");
        }
        Some(name)
    }

    fn release(&mut self, handle: u64) {
        if handle == CONSOLE_HANDLE {
            return;
        }
        let Some(file) = self.open.get_mut(&handle) else { return };
        file.references = file.references.saturating_sub(1);
        if file.references > 0 {
            return;
        }
        let Some(file) = self.open.remove(&handle) else { return };
        match file.object {
            Object::Regular(node)
            | Object::Directory { node, .. }
            | Object::Proc { node, .. }
            | Object::Sys { node, .. } => {
                let _ = self.vfs.close_node(node);
            }
            Object::Device { .. } => {}
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => {
                let reader = matches!(file.object, Object::PipeReader(_) | Object::PipeBoth(_));
                let writer = matches!(file.object, Object::PipeWriter(_) | Object::PipeBoth(_));
                self.fifo_waits.remove(&handle);
                if let Some(state) = self.pipes.get_mut(&pipe) {
                    state.readers -= u32::from(reader);
                    state.writers -= u32::from(writer);
                    let node = state.node;
                    // The last end of a FIFO drops its bytes, as Linux's `free_pipe_info`.
                    if state.readers == 0 && state.writers == 0 {
                        if let Some(mut state) = self.pipes.remove(&pipe) {
                            state.buffer.release(self.vfs.page_store());
                        }
                        if let Some(node) = node {
                            self.fifos.remove(&node);
                        }
                    }
                    if let Some(node) = node {
                        let _ = self.vfs.close_node(node);
                    }
                }
                self.changed = true;
            }
        }
    }

    fn read(&mut self, handle: u64, length: usize, at: u64) -> Result<Outcome, Errno> {
        let length = length.min(MAX_TRANSFER);
        let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
        if !file.readable() {
            return Err(errno::EBADF);
        }
        let nonblocking = file.flags & flags::NONBLOCK != 0;
        let position = if at == NONE { file.offset } else { at };
        let data = match &mut file.object {
            Object::Regular(node) => {
                let node = *node;
                let mut data = alloc::vec![0u8; length];
                let count = self.vfs.read(node, position, &mut data)?;
                data.truncate(count);
                data
            }
            Object::Directory { .. } => return Err(errno::EISDIR),
            Object::Proc { text, .. } | Object::Sys { text, .. } => {
                let start = (position as usize).min(text.len());
                text[start..(start + length).min(text.len())].to_vec()
            }
            Object::Device { device, .. } => match device {
                Device::Null => Vec::new(),
                Device::Zero => alloc::vec![0u8; length],
                Device::Random => {
                    let mut data = alloc::vec![0u8; length];
                    crate::random::fill(&mut data);
                    data
                }
                Device::Console | Device::Tty => match self.terminal.read(length) {
                    Some(data) => {
                        self.changed = true;
                        data
                    }
                    None if nonblocking => return Err(errno::EAGAIN),
                    None => return Ok(Outcome::Park(0)),
                },
            },
            Object::PipeReader(pipe) | Object::PipeBoth(pipe) => {
                let pipe = self.pipes.get_mut(pipe).ok_or(errno::EBADF)?;
                if pipe.buffer.is_empty() {
                    if pipe.writers == 0 {
                        return Ok(Outcome::Done(Reply::value(0, 0)));
                    }
                    if nonblocking {
                        return Err(errno::EAGAIN);
                    }
                    return Ok(Outcome::Park(0));
                }
                let mut data = alloc::vec![0u8; length.min(pipe.buffer.len())];
                let count = pipe.buffer.read(self.vfs.page_store(), &mut data);
                data.truncate(count);
                self.changed = true;
                data
            }
            Object::PipeWriter(_) => return Err(errno::EBADF),
        };
        let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
        if at == NONE && matches!(file.object, Object::Regular(_) | Object::Proc { .. } | Object::Sys { .. }) {
            file.offset = position + data.len() as u64;
        }
        Ok(Outcome::Done(Reply { result: data.len() as i64, words: [0; 2], bytes: data, request_id: 0 }))
    }

    fn write(&mut self, pid: u32, handle: u64, at: u64, data: &[u8], done: u64) -> Result<Outcome, Errno> {
        let _ = pid;
        let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
        if !file.writable() && !matches!(file.object, Object::Device { .. }) {
            return Err(errno::EBADF);
        }
        let nonblocking = file.flags & flags::NONBLOCK != 0;
        match &file.object {
            Object::Regular(node) => {
                let node = *node;
                let position = if at != NONE {
                    at
                } else if file.flags & flags::APPEND != 0 {
                    self.vfs.stat(node)?.size
                } else {
                    file.offset
                };
                let count = self.vfs.write(node, position, data)?;
                let file = self.open.get_mut(&handle).ok_or(errno::EBADF)?;
                if at == NONE {
                    file.offset = position + count as u64;
                }
                Ok(Outcome::Done(Reply::value(0, count as u64)))
            }
            Object::Directory { .. } => Err(errno::EISDIR),
            Object::Proc { .. } | Object::PipeReader(_) => Err(errno::EBADF),
            // Decoded now, carried out by `submit` once the lock is let go. An empty write
            // asks nothing and takes nothing.
            Object::Sys { node, .. } => match self.vfs.decode_sys_write(*node, data)? {
                Some(request) => Ok(Outcome::Sys { request, length: data.len() as u64 }),
                None => Ok(Outcome::Done(Reply::value(0, 0))),
            },
            Object::Device { device, .. } => match device {
                Device::Console | Device::Tty => {
                    super::console::write_here(data);
                    Ok(Outcome::Done(Reply::value(0, data.len() as u64)))
                }
                _ => Ok(Outcome::Done(Reply::value(0, data.len() as u64))),
            },
            Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => {
                let pipe = self.pipes.get_mut(pipe).ok_or(errno::EBADF)?;
                if pipe.readers == 0 {
                    return if done > 0 { Ok(Outcome::Done(Reply::value(0, done))) } else { Err(errno::EPIPE) };
                }
                let rest = &data[done as usize..];
                let written = pipe.buffer.write(self.vfs.page_store(), rest) as u64;
                if written > 0 {
                    self.changed = true;
                }
                let done = done + written;
                if done == data.len() as u64 {
                    Ok(Outcome::Done(Reply::value(0, done)))
                } else if nonblocking {
                    if done == 0 {
                        Err(errno::EAGAIN)
                    } else {
                        Ok(Outcome::Done(Reply::value(0, done)))
                    }
                } else {
                    Ok(Outcome::Park(done))
                }
            }
        }
    }

    fn seek(&mut self, handle: u64, offset: i64, whence: u64) -> Result<Outcome, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        let end = match &file.object {
            Object::Regular(node) => self.vfs.stat(*node)?.size as i64,
            Object::Proc { text, .. } | Object::Sys { text, .. } => text.len() as i64,
            Object::Directory { .. } => {
                if offset != 0 || whence != 0 {
                    return Err(errno::EINVAL);
                }
                if let Some(OpenFile { object: Object::Directory { cursor, .. }, .. }) = self.open.get_mut(&handle) {
                    *cursor = 0;
                }
                return Ok(Outcome::Done(Reply::value(0, 0)));
            }
            Object::Device { device: Device::Null | Device::Zero | Device::Random, .. } => {
                return Ok(Outcome::Done(Reply::value(0, 0)))
            }
            _ => return Err(errno::ESPIPE),
        };
        let base = match whence {
            0 => 0,
            1 => file.offset as i64,
            2 => end,
            _ => return Err(errno::EINVAL),
        };
        let position = base.checked_add(offset).filter(|&p| p >= 0).ok_or(errno::EINVAL)?;
        if let Some(file) = self.open.get_mut(&handle) {
            file.offset = position as u64;
        }
        Ok(Outcome::Done(Reply::value(0, position as u64)))
    }

    fn metadata(&self, node: NodeId) -> Result<Metadata, Errno> {
        let stat = self.vfs.stat(node)?;
        Ok(Metadata {
            device: stat.device,
            inode: stat.inode,
            mode: stat.mode,
            links: stat.links.min(u64::from(u32::MAX)) as u32,
            uid: stat.uid,
            gid: stat.gid,
            rdev: stat.rdev,
            size: stat.size,
            blocks: stat.blocks,
            accessed_ns: stat.accessed,
            modified_ns: stat.modified,
            changed_ns: stat.changed,
        })
    }

    fn stat_handle(&self, handle: u64) -> Result<Metadata, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        match &file.object {
            Object::Regular(node)
            | Object::Directory { node, .. }
            | Object::Proc { node, .. }
            | Object::Sys { node, .. } => self.metadata(*node),
            Object::Device { node: Some(node), .. } => self.metadata(*node),
            Object::Device { node: None, .. } => Ok(Metadata {
                device: 6,
                inode: 1,
                mode: initramfs::mode::CHARACTER_DEVICE | 0o620,
                links: 1,
                rdev: (5 << 8) | 1,
                ..Metadata::default()
            }),
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe)
                if self.pipes.get(pipe).is_some_and(|p| p.node.is_some()) =>
            {
                self.metadata(self.pipes.get(pipe).and_then(|p| p.node).ok_or(errno::EBADF)?)
            }
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => Ok(Metadata {
                device: 12,
                inode: *pipe,
                mode: initramfs::mode::FIFO | 0o600,
                links: 1,
                size: self.pipes.get(pipe).map_or(0, |p| p.buffer.len() as u64),
                ..Metadata::default()
            }),
        }
    }

    fn read_directory(&mut self, handle: u64, capacity: usize) -> Result<Outcome, Errno> {
        let capacity = capacity.min(MAX_TRANSFER);
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        let Object::Directory { node, mut cursor } = file.object else { return Err(errno::ENOTDIR) };
        let mut out: Vec<u8> = Vec::new();
        while let Some((entry, next)) = self.vfs.read_directory(node, cursor)? {
            let name = entry.name.as_slice();
            let record = (19 + name.len() + 1).next_multiple_of(8);
            if out.len() + record > capacity {
                if out.is_empty() {
                    return Err(errno::EINVAL);
                }
                break;
            }
            out.extend_from_slice(&entry.inode.to_le_bytes());
            out.extend_from_slice(&next.to_le_bytes());
            out.extend_from_slice(&(record as u16).to_le_bytes());
            out.push(entry.kind_code);
            out.extend_from_slice(name);
            out.resize(out.len() + record - 19 - name.len(), 0);
            cursor = next;
        }
        if let Some(OpenFile { object: Object::Directory { cursor: saved, .. }, .. }) = self.open.get_mut(&handle) {
            *saved = cursor;
        }
        Ok(Outcome::Done(Reply { result: out.len() as i64, words: [0; 2], bytes: out, request_id: 0 }))
    }

    fn readiness(&self, handle: u64) -> u16 {
        let Some(file) = self.open.get(&handle) else { return events::INVALID };
        match &file.object {
            Object::Device { device: Device::Console | Device::Tty, .. } => {
                events::OUT | if self.terminal.readable() { events::IN } else { 0 }
            }
            Object::PipeReader(pipe) => match self.pipes.get(pipe) {
                Some(pipe) => {
                    (if pipe.buffer.is_empty() { 0 } else { events::IN })
                        | if pipe.writers == 0 { events::HANG_UP } else { 0 }
                }
                None => events::INVALID,
            },
            Object::PipeBoth(pipe) => match self.pipes.get(pipe) {
                Some(pipe) => {
                    (if pipe.buffer.is_empty() { 0 } else { events::IN })
                        | if pipe.buffer.space() > 0 { events::OUT } else { 0 }
                }
                None => events::INVALID,
            },
            Object::PipeWriter(pipe) => match self.pipes.get(pipe) {
                Some(pipe) if pipe.readers == 0 => events::ERROR,
                Some(pipe) => {
                    if pipe.buffer.space() > 0 {
                        events::OUT
                    } else {
                        0
                    }
                }
                None => events::INVALID,
            },
            _ => events::IN | events::OUT,
        }
    }

    fn poll(&mut self, count: usize, wait: bool, entries: &[u8]) -> Result<Outcome, Errno> {
        if entries.len() != count * 10 {
            return Err(errno::EINVAL);
        }
        let mut ready = 0;
        let mut revents = Vec::with_capacity(count * 2);
        for entry in entries.chunks_exact(10) {
            let handle = u64::from_le_bytes(entry[..8].try_into().unwrap_or([0; 8]));
            let wanted = u16::from_le_bytes([entry[8], entry[9]]);
            let got = self.readiness(handle) & (wanted | events::ERROR | events::HANG_UP | events::INVALID);
            if got != 0 {
                ready += 1;
            }
            revents.extend_from_slice(&got.to_le_bytes());
        }
        if ready == 0 && wait {
            return Ok(Outcome::Park(0));
        }
        Ok(Outcome::Done(Reply { result: ready, words: [0; 2], bytes: revents, request_id: 0 }))
    }

    fn control(&mut self, handle: u64, request: u32, argument: &[u8]) -> Result<Outcome, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        const FIONREAD: u32 = 0x541b;
        match &file.object {
            Object::Device { device: Device::Console | Device::Tty, .. } => {
                let out = self.terminal.control(request, argument)?;
                self.changed = true;
                Ok(Outcome::Done(Reply { bytes: out, ..Reply::value(0, 0) }))
            }
            Object::PipeReader(pipe) | Object::PipeBoth(pipe) if request == FIONREAD => {
                let length = self.pipes.get(pipe).map_or(0, |p| p.buffer.len() as u32);
                Ok(Outcome::Done(Reply { bytes: length.to_le_bytes().to_vec(), ..Reply::value(0, 0) }))
            }
            _ => Err(errno::ENOTTY),
        }
    }

    /// Retries every parked request after a change; completed ones go to `later`.
    fn retry_parked(&mut self, later: &mut Vec<(usize, Reply)>) {
        while self.changed {
            self.changed = false;
            let parked = core::mem::take(&mut self.parked);
            for mut request in parked {
                let (first, second) = (request.data.as_slice(), &[][..]);
                match self.handle(request.pid, request.op, &request.words, first, second, request.done) {
                    Outcome::Done(mut reply) => {
                        reply.request_id = request.request_id;
                        later.push((request.client, reply));
                    }
                    Outcome::Park(done) => {
                        request.done = done;
                        self.parked.push(request);
                    }
                    Outcome::Silent => {}
                    // Only a first try makes one (a write to `/sys` never parks); were one to
                    // come here, it is refused rather than carried out under the lock.
                    Outcome::Sys { .. } => later.push((request.client, Reply::error(request.request_id, errno::EIO))),
                }
            }
        }
    }

    /// Finishes the parked request `request_id` of `client` with what it has: the bytes a
    /// pipe write got out, else EINTR.
    fn cancel(&mut self, client: usize, request_id: u64, later: &mut Vec<(usize, Reply)>) {
        if let Some(index) = self.parked.iter().position(|p| p.client == client && p.request_id == request_id) {
            let parked = self.parked.swap_remove(index);
            if parked.op == FileOp::Open {
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
