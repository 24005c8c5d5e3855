//! A file request decoded once from its words and bytes, before the service acts on it.
//!
//! `abi::file::FileRequest` checks the message's lengths and its operation code; what the six
//! words mean is each operation's (listed on `abi::file::FileOp`). [`Request::decode`] reads
//! them into one typed variant per operation and refuses, with a named [`DecodeError`], a
//! request whose shape is wrong whatever the service's state (seL4's decode-then-invoke:
//! `invoke.rs` then carries the request out). Checks that depend on the open files (a
//! handle that is not open, a `whence` an open file refuses) stay with the invocation, in
//! the order the service always made them, so every reply is what it was.

use abi::file::{FileOp, FileRequest, NONE};
use abi::Errno;
use alloc::borrow::Cow;
use alloc::vec::Vec;
use linux_raw_sys::errno;

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

/// Bytes a request carries (a path, a write's data): borrowed from the message, or owned
/// by a request parked until it can complete.
pub type Bytes<'a> = Cow<'a, [u8]>;

/// `SetTimes`'s last word: bit 0 follows the last link, bit 1 says a time was given rather
/// than "now".
pub const SET_TIMES_FOLLOW: u64 = 1;
pub const SET_TIMES_EXPLICIT: u64 = 2;

/// Bytes of one `poll` entry on the wire: the handle (u64), then the events wanted (u16).
const POLL_ENTRY_BYTES: usize = 10;
/// Bytes of one descriptor of a report on the wire: the descriptor (u32), then its handle (u64).
const DESCRIPTOR_BYTES: usize = 12;

/// Why a request was refused before the service looked at its open files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A `Poll`'s bytes are not its entry count times 10 (a handle and the events wanted).
    PollEntries,
    /// A `Descriptors` report's bytes are not its count times 12 (a descriptor and a handle).
    DescriptorTable,
}

impl DecodeError {
    /// The errno the caller gets.
    pub fn errno(self) -> Errno {
        match self {
            Self::PollEntries | Self::DescriptorTable => errno::EINVAL,
        }
    }
}

/// Where a path starts: from the open directory `directory` (an `*at` call's), else from
/// the working directory `working_directory`, else from the root; an absolute path from
/// `root`, the caller's root directory (`chroot`), else the file system's root. `None` is the
/// wire's `NONE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub directory: Option<u64>,
    pub working_directory: Option<u64>,
    pub root: Option<u64>,
}

/// What `utimensat`, `fchmodat` and `faccessat` act on: an open file (an empty path), or a
/// path, its last link followed or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    Handle(u64),
    Path { at: At, path: Bytes<'a>, follow: bool },
}

/// One `poll` entry: the handle and the events it waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollEntry {
    pub handle: u64,
    pub events: u16,
}

/// A file request, decoded: one variant per `abi::file::FileOp`, its words named and typed.
/// `offset: None` is the wire's `NONE`: the open file's own position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// Opens `path` with Linux open `flags`, creating it with `mode` under `O_CREAT`.
    Open {
        at: At,
        flags: u64,
        mode: u32,
        path: Bytes<'a>,
    },
    /// `dont_wait`: as if `O_NONBLOCK` for this call (`MSG_DONTWAIT`).
    Read {
        handle: u64,
        length: usize,
        offset: Option<u64>,
        dont_wait: bool,
    },
    Write {
        handle: u64,
        offset: Option<u64>,
        data: Bytes<'a>,
        dont_wait: bool,
    },
    Seek {
        handle: u64,
        offset: i64,
        whence: u64,
    },
    Stat {
        handle: u64,
    },
    StatPath {
        at: At,
        follow: bool,
        path: Bytes<'a>,
    },
    ReadDirectory {
        handle: u64,
        capacity: usize,
    },
    MakeDirectory {
        at: At,
        mode: u32,
        path: Bytes<'a>,
    },
    /// `unlinkat`, or `rmdir` with `remove_directory`.
    Unlink {
        at: At,
        remove_directory: bool,
        path: Bytes<'a>,
    },
    /// `renameat2`: `from` and `to` are the two paths' directories; `flags` its own.
    Rename {
        from: Option<u64>,
        to: Option<u64>,
        working_directory: Option<u64>,
        root: Option<u64>,
        flags: u32,
        from_path: Bytes<'a>,
        to_path: Bytes<'a>,
    },
    /// `linkat`: `follow` the last link of `from_path`.
    Link {
        from: Option<u64>,
        to: Option<u64>,
        working_directory: Option<u64>,
        root: Option<u64>,
        follow: bool,
        from_path: Bytes<'a>,
        to_path: Bytes<'a>,
    },
    /// `symlinkat`: a link at `path` that says `target`.
    Symlink {
        at: At,
        target: Bytes<'a>,
        path: Bytes<'a>,
    },
    ReadLink {
        at: At,
        path: Bytes<'a>,
    },
    Truncate {
        handle: u64,
        size: u64,
    },
    /// `None` leaves that time as it is.
    /// `explicit`: a time was given (not `UTIME_NOW` or `UTIME_OMIT`), which only the
    /// owner may set; times set to now need ownership or write permission.
    SetTimes {
        target: Target<'a>,
        accessed_ns: Option<u64>,
        modified_ns: Option<u64>,
        explicit: bool,
    },
    ChangeMode {
        target: Target<'a>,
        mode: u32,
    },
    /// `None`: that id is left as it is.
    ChangeOwner {
        target: Target<'a>,
        uid: Option<u32>,
        gid: Option<u32>,
    },
    /// `faccessat`'s `mode`: `W_OK` (2) and `X_OK` (1) bits.
    Access {
        target: Target<'a>,
        mode: u64,
    },
    /// A pipe; `flags` may hold `O_NONBLOCK`.
    Pipe {
        flags: u64,
    },
    Retain {
        handle: u64,
    },
    Release {
        handle: u64,
    },
    GetFlags {
        handle: u64,
    },
    SetFlags {
        handle: u64,
        flags: u64,
    },
    /// Waits for one entry to be ready if `wait` and none is.
    Poll {
        entries: Vec<PollEntry>,
        wait: bool,
    },
    /// A terminal request (`ioctl` number) with its argument's bytes.
    Control {
        handle: u64,
        request: u32,
        argument: Bytes<'a>,
    },
    /// The path of the open directory `handle` as a caller whose root is `root` sees it.
    PathOf {
        handle: u64,
        root: Option<u64>,
    },
    /// Finishes the caller's parked request `request_id` with what it has.
    Cancel {
        request_id: u64,
    },
    /// `mknodat` of a FIFO or a regular file: `mode` is its type and permissions.
    MakeNode {
        at: At,
        mode: u32,
        path: Bytes<'a>,
    },
    /// The calling process's descriptors now: (descriptor, handle) each.
    Descriptors {
        table: Vec<(u32, u64)>,
    },
    FilesystemSpace {
        device: u64,
    },
    /// `flock`'s `operation` on the node the open file `handle` stands for.
    Lock {
        handle: u64,
        operation: u64,
    },
    EpollCreate,
    /// `epoll_ctl`'s `operation` on `epoll`'s interest in the open file `target`, which the
    /// caller names by `descriptor`.
    EpollControl {
        epoll: u64,
        operation: u64,
        target: u64,
        descriptor: u32,
        events: u32,
        data: u64,
    },
    EpollWait {
        epoll: u64,
        most: usize,
        wait: bool,
    },
    SocketCreate {
        kind: u64,
        family: u16,
    },
    SocketPair {
        kind: u64,
    },
    SocketBind {
        handle: u64,
        at: At,
        mode: u32,
        family: u16,
        name: Bytes<'a>,
    },
    SocketListen {
        handle: u64,
        backlog: u64,
    },
    SocketConnect {
        handle: u64,
        at: At,
        family: u16,
        name: Bytes<'a>,
    },
    SocketAccept {
        handle: u64,
        flags: u64,
    },
    SocketShutdown {
        handle: u64,
        how: u64,
    },
    SocketName {
        handle: u64,
        peer: bool,
    },
    /// `getsockopt`, or `setsockopt` with `set`'s value, of `option` at `level` (`SOL_SOCKET`
    /// or `IPPROTO_TCP`).
    SocketOption {
        handle: u64,
        level: u64,
        option: u64,
        set: Option<u64>,
    },
    SocketSendTo {
        handle: u64,
        dont_wait: bool,
        family: u16,
        data: Bytes<'a>,
        name: Bytes<'a>,
    },
    SocketReceiveFrom {
        handle: u64,
        length: usize,
        dont_wait: bool,
    },
    /// The network interfaces (`ifconfig`).
    NetInterfaces,
}

/// `NONE` as `None`.
fn given(word: u64) -> Option<u64> {
    (word != NONE).then_some(word)
}

impl<'a> Request<'a> {
    /// Reads `request`'s words (each operation's, as `abi::file::FileOp` lists them) and bytes.
    pub fn decode(request: &FileRequest<'a>) -> Result<Self, DecodeError> {
        let w = &request.words;
        let first = Cow::Borrowed(request.first);
        let second = Cow::Borrowed(request.second);
        // Every operation on paths has the caller's root in its last word.
        let root = given(w[abi::file::ROOT_WORD]);
        let at = At { directory: given(w[0]), working_directory: given(w[1]), root };
        // An empty path names the open file `w[0]` itself.
        let target = |follow: u64| {
            if request.first.is_empty() {
                Target::Handle(w[0])
            } else {
                Target::Path { at, path: Cow::Borrowed(request.first), follow: follow != 0 }
            }
        };
        Ok(match request.op {
            FileOp::Open => Self::Open { at, flags: w[2], mode: w[3] as u32, path: first },
            FileOp::Read => {
                Self::Read { handle: w[0], length: w[1] as usize, offset: given(w[2]), dont_wait: w[3] != 0 }
            }
            FileOp::Write => Self::Write { handle: w[0], offset: given(w[1]), data: first, dont_wait: w[2] != 0 },
            FileOp::Seek => Self::Seek { handle: w[0], offset: w[1] as i64, whence: w[2] },
            FileOp::Stat => Self::Stat { handle: w[0] },
            FileOp::StatPath => Self::StatPath { at, follow: w[2] != 0, path: first },
            FileOp::ReadDirectory => Self::ReadDirectory { handle: w[0], capacity: w[1] as usize },
            FileOp::MakeDirectory => Self::MakeDirectory { at, mode: w[2] as u32, path: first },
            FileOp::Unlink => Self::Unlink { at, remove_directory: w[2] != 0, path: first },
            FileOp::Rename => Self::Rename {
                from: given(w[0]),
                to: given(w[1]),
                working_directory: given(w[2]),
                root,
                flags: w[3] as u32,
                from_path: first,
                to_path: second,
            },
            FileOp::Link => Self::Link {
                from: given(w[0]),
                to: given(w[1]),
                working_directory: given(w[2]),
                root,
                follow: w[3] != 0,
                from_path: first,
                to_path: second,
            },
            FileOp::Symlink => Self::Symlink { at, target: first, path: second },
            FileOp::ReadLink => Self::ReadLink { at, path: first },
            FileOp::Truncate => Self::Truncate { handle: w[0], size: w[1] },
            FileOp::SetTimes => Self::SetTimes {
                target: target(w[4] & SET_TIMES_FOLLOW),
                accessed_ns: given(w[2]),
                modified_ns: given(w[3]),
                explicit: w[4] & SET_TIMES_EXPLICIT != 0,
            },
            FileOp::ChangeMode => Self::ChangeMode { target: target(w[3]), mode: w[2] as u32 },
            FileOp::ChangeOwner => {
                let id = |word: u64| given(word).map(|id| id as u32).filter(|&id| id != u32::MAX);
                Self::ChangeOwner { target: target(w[4]), uid: id(w[2]), gid: id(w[3]) }
            }
            FileOp::Access => Self::Access { target: target(w[3]), mode: w[2] },
            FileOp::Pipe => Self::Pipe { flags: w[0] },
            FileOp::Retain => Self::Retain { handle: w[0] },
            FileOp::Release => Self::Release { handle: w[0] },
            FileOp::GetFlags => Self::GetFlags { handle: w[0] },
            FileOp::SetFlags => Self::SetFlags { handle: w[0], flags: w[1] },
            FileOp::Poll => {
                let count = w[0] as usize;
                if count.checked_mul(POLL_ENTRY_BYTES) != Some(request.first.len()) {
                    return Err(DecodeError::PollEntries);
                }
                let entries = request
                    .first
                    .chunks_exact(POLL_ENTRY_BYTES)
                    .map(|entry| PollEntry {
                        handle: u64::from_le_bytes(entry[..8].try_into().unwrap_or([0; 8])),
                        events: u16::from_le_bytes([entry[8], entry[9]]),
                    })
                    .collect();
                Self::Poll { entries, wait: w[1] != 0 }
            }
            FileOp::Control => Self::Control { handle: w[0], request: w[1] as u32, argument: first },
            FileOp::PathOf => Self::PathOf { handle: w[0], root },
            FileOp::Cancel => Self::Cancel { request_id: w[0] },
            FileOp::MakeNode => Self::MakeNode { at, mode: w[2] as u32, path: first },
            FileOp::Descriptors => {
                let count = w[0] as usize;
                if request.first.len() != count.saturating_mul(DESCRIPTOR_BYTES) {
                    return Err(DecodeError::DescriptorTable);
                }
                let table = request
                    .first
                    .chunks_exact(DESCRIPTOR_BYTES)
                    .filter_map(|entry| {
                        let fd = u32::from_le_bytes(entry[..4].try_into().ok()?);
                        Some((fd, u64::from_le_bytes(entry[4..].try_into().ok()?)))
                    })
                    .collect();
                Self::Descriptors { table }
            }
            FileOp::FilesystemSpace => Self::FilesystemSpace { device: w[0] },
            FileOp::Lock => Self::Lock { handle: w[0], operation: w[1] },
            FileOp::EpollCreate => Self::EpollCreate,
            FileOp::EpollControl => Self::EpollControl {
                epoll: w[0],
                operation: w[1],
                target: w[2],
                descriptor: w[3] as u32,
                events: w[4] as u32,
                data: w[5],
            },
            FileOp::EpollWait => Self::EpollWait { epoll: w[0], most: w[1] as usize, wait: w[2] != 0 },
            FileOp::SocketCreate => Self::SocketCreate { kind: w[0], family: w[1] as u16 },
            FileOp::SocketPair => Self::SocketPair { kind: w[0] },
            FileOp::SocketBind => Self::SocketBind {
                handle: w[0],
                at: At { directory: None, working_directory: given(w[1]), root },
                mode: w[2] as u32,
                family: w[3] as u16,
                name: first,
            },
            FileOp::SocketListen => Self::SocketListen { handle: w[0], backlog: w[1] },
            FileOp::SocketConnect => Self::SocketConnect {
                handle: w[0],
                at: At { directory: None, working_directory: given(w[1]), root },
                family: w[2] as u16,
                name: first,
            },
            FileOp::SocketAccept => Self::SocketAccept { handle: w[0], flags: w[1] },
            FileOp::SocketShutdown => Self::SocketShutdown { handle: w[0], how: w[1] },
            FileOp::SocketName => Self::SocketName { handle: w[0], peer: w[1] != 0 },
            FileOp::SocketOption => {
                Self::SocketOption { handle: w[0], option: w[1], level: w[2], set: (w[3] != 0).then_some(w[4]) }
            }
            FileOp::SocketSendTo => Self::SocketSendTo {
                handle: w[0],
                dont_wait: w[1] != 0,
                family: w[2] as u16,
                data: first,
                name: second,
            },
            FileOp::SocketReceiveFrom => {
                Self::SocketReceiveFrom { handle: w[0], length: w[1] as usize, dont_wait: w[2] != 0 }
            }
            FileOp::NetInterfaces => Self::NetInterfaces,
        })
    }

    /// The request with its bytes its own, to be kept while it waits (parked): only an open
    /// (a FIFO's, for the other end), a read, a write, a poll, a lock, an `epoll_wait`, a
    /// `connect`, an `accept` and a UDP receive ever wait.
    pub fn to_parked(&self) -> Option<Request<'static>> {
        let owned = |bytes: &Bytes<'_>| Cow::Owned(bytes.to_vec());
        Some(match self {
            Self::Open { at, flags, mode, path } => {
                Request::Open { at: *at, flags: *flags, mode: *mode, path: owned(path) }
            }
            Self::Read { handle, length, offset, dont_wait } => {
                Request::Read { handle: *handle, length: *length, offset: *offset, dont_wait: *dont_wait }
            }
            Self::Write { handle, offset, data, dont_wait } => {
                Request::Write { handle: *handle, offset: *offset, data: owned(data), dont_wait: *dont_wait }
            }
            Self::SocketConnect { handle, at, family, name } => {
                Request::SocketConnect { handle: *handle, at: *at, family: *family, name: owned(name) }
            }
            Self::SocketAccept { handle, flags } => Request::SocketAccept { handle: *handle, flags: *flags },
            Self::SocketReceiveFrom { handle, length, dont_wait } => {
                Request::SocketReceiveFrom { handle: *handle, length: *length, dont_wait: *dont_wait }
            }
            Self::Poll { entries, wait } => Request::Poll { entries: entries.clone(), wait: *wait },
            Self::Lock { handle, operation } => Request::Lock { handle: *handle, operation: *operation },
            Self::EpollWait { epoll, most, wait } => Request::EpollWait { epoll: *epoll, most: *most, wait: *wait },
            _ => return None,
        })
    }
}
