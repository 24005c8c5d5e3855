//! Requests to the file service and its replies, as they travel between kernel instances.
//!
//! Every file call of a process homed away from the service's instance becomes one
//! [`FileRequest`] (a large message) and comes back as one [`FileReply`]. Both have one
//! shape whatever the operation: a few words, then up to two byte strings (a path, data).
//! Decoding checks the lengths and the operation code; what the words mean is checked by
//! the service, per operation, before it acts.

use crate::message::DecodeError;

/// Words of arguments a request carries.
pub const REQUEST_WORDS: usize = 6;
/// Words of results a reply carries besides its result.
pub const REPLY_WORDS: usize = 2;
/// Most bytes one request or reply carries (a large message is at most 256 KiB).
pub const MAX_BYTES: usize = 128 * 1024;
/// Most data one read or write moves per request; longer calls take several.
pub const MAX_TRANSFER: usize = 64 * 1024;
/// "No handle": the word given for an absent directory handle or the current position.
pub const NONE: u64 = u64::MAX;
/// The console's handle, open for the service's lifetime: every process starts with it on
/// fds 0–2 without a round trip.
pub const CONSOLE_HANDLE: u64 = 1;

/// The word of every request on paths (and of `PathOf`) that holds the caller's root
/// directory (`chroot`): its handle, or [`NONE`] for the file system's root. Absolute paths
/// start there and `..` stops there.
pub const ROOT_WORD: usize = REQUEST_WORDS - 1;

/// The word of a `Read` or a `Write` from another instance that names the caller's buffer
/// lent for the request (a grant: physical address and the lender's incarnation, as the
/// kernel's `base::mm::grant::Grant::to_word` packs them); 0: none, the data is in the
/// messages. With a grant, a `Write` carries no data bytes and a `Read`'s reply none.
pub const GRANT_WORD: usize = 4;

/// The word of a `Write` with a grant that says how many bytes the grant holds.
pub const GRANT_LENGTH_WORD: usize = 3;

/// What a request asks. The words each operation reads are listed on its variant; `path`
/// is the first byte string unless said otherwise. Operations on paths also read the root
/// in [`ROOT_WORD`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum FileOp {
    /// (directory handle, cwd handle, flags, mode) + path → (handle, kind).
    Open = 1,
    /// (handle, length, offset or NONE, don't wait) → data.
    Read = 2,
    /// (handle, offset or NONE, don't wait) + data → count.
    Write = 3,
    /// (handle, offset as i64, whence) → new offset.
    Seek = 4,
    /// (handle) → a [`Metadata`] in the bytes.
    Stat = 5,
    /// (directory handle, cwd handle, follow last) + path → a [`Metadata`].
    StatPath = 6,
    /// (handle, capacity) → `linux_dirent64` records.
    ReadDirectory = 7,
    /// (directory handle, cwd handle, mode) + path.
    MakeDirectory = 8,
    /// (directory handle, cwd handle, remove directory) + path.
    Unlink = 9,
    /// (from directory, to directory, cwd, flags) + from path, to path.
    Rename = 10,
    /// (from directory, to directory, cwd, follow) + from path, to path.
    Link = 11,
    /// (directory handle, cwd handle) + target, path.
    Symlink = 12,
    /// (directory handle, cwd handle) + path → the target.
    ReadLink = 13,
    /// (handle, size).
    Truncate = 14,
    /// (directory handle or the handle itself with an empty path, cwd, accessed ns or NONE,
    /// modified ns or NONE, follow) + path.
    SetTimes = 15,
    /// (directory handle, cwd handle, mode, follow) + path.
    Access = 16,
    /// (directory handle or handle with an empty path, cwd, permissions, follow) + path.
    ChangeMode = 17,
    /// (flags) → (read handle, write handle).
    Pipe = 18,
    /// (handle): one more reference (a descriptor passed to a process on another instance).
    Retain = 19,
    /// (handle): one reference fewer; the last closes the open file.
    Release = 20,
    /// (handle) → status flags.
    GetFlags = 21,
    /// (handle, flags).
    SetFlags = 22,
    /// (entry count, wait) + `entry count` × (handle u64, events u16) → `revents` u16 each.
    Poll = 23,
    /// (handle, request, argument) + argument bytes in → bytes out (terminal requests).
    Control = 24,
    /// (handle) → the path of a directory (`getcwd`), as the caller's root sees it.
    PathOf = 25,
    /// (request id): finish that parked request now with what it has.
    Cancel = 26,
    /// (directory handle, cwd handle, mode: type and permissions) + path: `mknodat` of a FIFO
    /// or a regular file.
    MakeNode = 27,
    /// (count) + `count` × (descriptor u32, handle u64): the calling process's descriptors
    /// now, for `/proc/<pid>/fd`. No reply.
    Descriptors = 28,
    /// (device) → (magic, read-only, pages, free pages, nodes, free nodes) as bytes, of the file system a `stat` named
    /// with that `st_dev` (`statfs`).
    FilesystemSpace = 29,
    /// (handle, operation: `LOCK_SH` 1, `LOCK_EX` 2, `LOCK_UN` 8, with `LOCK_NB` 4): `flock`
    /// of the open file's node, held by the open file (its handle) until unlocked or closed.
    Lock = 30,
    /// () → (handle, kind): a new `epoll` instance, an open file of its own.
    EpollCreate = 31,
    /// (epoll handle, operation: `EPOLL_CTL_ADD` 1, `DEL` 2, `MOD` 3, target handle, target
    /// descriptor, events, data): a change of the interest list.
    EpollControl = 32,
    /// (epoll handle, most events, wait) → `epoll_event`s (12 bytes each, as x86-64 packs
    /// them); parked when none is ready and the caller `wait`s.
    EpollWait = 33,
    /// (type with `SOCK_NONBLOCK`, family) → (handle, kind): a new `AF_UNIX` or `AF_INET`
    /// socket.
    SocketCreate = 34,
    /// (type with `SOCK_NONBLOCK`) → (handle, handle): two connected sockets.
    SocketPair = 35,
    /// (handle, cwd handle, mode, the address's family) + its name: `sun_path` bytes, or an
    /// inet address and port (network order, six bytes).
    SocketBind = 36,
    /// (handle, backlog).
    SocketListen = 37,
    /// (handle, cwd handle, the address's family) + its name (as for `SocketBind`); parked
    /// while the listener's queue is full.
    SocketConnect = 38,
    /// (handle, `SOCK_NONBLOCK`) → (handle, kind); parked while no connection is queued.
    SocketAccept = 39,
    /// (handle, how).
    SocketShutdown = 40,
    /// (handle, peer) → the socket's family, and its name as for `SocketBind` (`getsockname`,
    /// `getpeername`).
    SocketName = 41,
    /// (handle, option, level (`SOL_SOCKET` or `IPPROTO_TCP`), set?, value) → its value
    /// (`getsockopt`; `setsockopt` when set is not 0).
    SocketOption = 42,
    /// (handle, don't wait, the address's family) + the datagram + the name it goes to (none:
    /// the connected peer's) → its length: a UDP `sendto`.
    SocketSendTo = 43,
    /// (handle, most bytes, don't wait) → the datagram, and its sender (family, then the
    /// address and port as `address << 16 | port`): a UDP `recvfrom`; parked while none came.
    SocketReceiveFrom = 44,
    /// (directory handle or handle with an empty path, cwd, owner or NONE, group or NONE,
    /// follow) + path: `chown`.
    ChangeOwner = 45,
    /// () → the machine's network interfaces, each [`crate::net::Interface::BYTES`] bytes
    /// ([`crate::net::Interface::encode`]): what `ifconfig`'s ioctls read.
    NetInterfaces = 46,
}

impl FileOp {
    /// The operation with this code, if any.
    pub fn from_u16(code: u16) -> Option<Self> {
        use FileOp::*;
        const ALL: [FileOp; 46] = [
            Open,
            Read,
            Write,
            Seek,
            Stat,
            StatPath,
            ReadDirectory,
            MakeDirectory,
            Unlink,
            Rename,
            Link,
            Symlink,
            ReadLink,
            Truncate,
            SetTimes,
            Access,
            ChangeMode,
            Pipe,
            Retain,
            Release,
            GetFlags,
            SetFlags,
            Poll,
            Control,
            PathOf,
            Cancel,
            MakeNode,
            Descriptors,
            FilesystemSpace,
            Lock,
            EpollCreate,
            EpollControl,
            EpollWait,
            SocketCreate,
            SocketPair,
            SocketBind,
            SocketListen,
            SocketConnect,
            SocketAccept,
            SocketShutdown,
            SocketName,
            SocketOption,
            SocketSendTo,
            SocketReceiveFrom,
            ChangeOwner,
            NetInterfaces,
        ];
        ALL.into_iter().find(|op| *op as u16 == code)
    }
}

/// What a handle refers to, so the client knows how to treat it without asking (the console
/// is written without a round trip; a read of a regular file may take several requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum HandleKind {
    Regular = 1,
    Directory = 2,
    Console = 3,
    Device = 4,
    Pipe = 5,
    Proc = 6,
    /// `/dev/null`: the client answers reads (end of file) and writes (all taken) itself.
    Null = 7,
    /// `/dev/zero`: the client answers reads (zeros) and writes (all taken) itself.
    Zero = 8,
    /// An `epoll` instance: its interest list is at the service.
    Epoll = 9,
    /// An `AF_UNIX` socket.
    Socket = 10,
}

impl HandleKind {
    /// The kind with this code, if any.
    pub fn from_u64(code: u64) -> Option<Self> {
        Some(match code {
            1 => Self::Regular,
            2 => Self::Directory,
            3 => Self::Console,
            4 => Self::Device,
            5 => Self::Pipe,
            6 => Self::Proc,
            7 => Self::Null,
            8 => Self::Zero,
            9 => Self::Epoll,
            10 => Self::Socket,
            _ => return None,
        })
    }
}

/// One request to the file service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRequest<'a> {
    /// Chosen by the client; echoed in the reply.
    pub request_id: u64,
    /// The calling process (for `/proc/self` and reports).
    pub pid: u32,
    pub op: FileOp,
    pub words: [u64; REQUEST_WORDS],
    /// A path, or the data of a write.
    pub first: &'a [u8],
    /// A second path (rename, link, symlink).
    pub second: &'a [u8],
    /// Who asks: the ids the service checks modes and owners against.
    pub caller: Caller<'a>,
}

/// The credentials of the process behind a request, carried in every request so the service
/// decides with the ids the caller has at that call, whatever instance it runs on and
/// however recently it changed them (docs/files.md, "Users and permissions").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller<'a> {
    /// The effective user id: 0 is privileged (`bind` below port 1024, `/sys` switches).
    pub effective_uid: u32,
    /// The ids files are checked and made as (`setfsuid`, `setfsgid`).
    pub filesystem_uid: u32,
    pub filesystem_gid: u32,
    /// The supplementary groups, each a little-endian `u32` (see [`Caller::groups`]).
    pub group_bytes: &'a [u8],
}

impl<'a> Caller<'a> {
    /// The kernel's own requests (releases, cancels, reports) and root's: every id 0, no
    /// supplementary groups.
    pub const ROOT: Caller<'static> =
        Caller { effective_uid: 0, filesystem_uid: 0, filesystem_gid: 0, group_bytes: &[] };

    /// The supplementary groups.
    pub fn groups(&self) -> impl Iterator<Item = u32> + 'a {
        self.group_bytes.chunks_exact(4).map(|bytes| u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

/// Most bytes of supplementary groups a request carries: `NGROUPS_MAX` of them.
pub const MAX_GROUP_BYTES: usize = crate::credentials::MAX_GROUPS * 4;

const REQUEST_HEADER: usize = 8 + 4 + 2 + 2 + 8 * REQUEST_WORDS + 4 + 4 + 4 * 4;

fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    out[at..at + bytes.len()].copy_from_slice(bytes);
}

fn u16_in(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_in(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_in(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

impl<'a> FileRequest<'a> {
    /// Bytes [`encode`](Self::encode) writes.
    pub fn encoded_size(&self) -> usize {
        REQUEST_HEADER + self.first.len() + self.second.len() + self.caller.group_bytes.len()
    }

    /// Writes the request into `out`; returns the length, or `None` when the strings are
    /// longer than [`MAX_BYTES`], the groups more than [`MAX_GROUP_BYTES`] or not whole
    /// `u32`s, or `out` is too short.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let size = self.encoded_size();
        let groups = self.caller.group_bytes;
        if self.first.len() + self.second.len() > MAX_BYTES
            || groups.len() > MAX_GROUP_BYTES
            || !groups.len().is_multiple_of(4)
            || out.len() < size
        {
            return None;
        }
        put(out, 0, &self.request_id.to_le_bytes());
        put(out, 8, &self.pid.to_le_bytes());
        put(out, 12, &(self.op as u16).to_le_bytes());
        put(out, 14, &[0, 0]);
        for (index, word) in self.words.iter().enumerate() {
            put(out, 16 + 8 * index, &word.to_le_bytes());
        }
        let lengths = 16 + 8 * REQUEST_WORDS;
        put(out, lengths, &(self.first.len() as u32).to_le_bytes());
        put(out, lengths + 4, &(self.second.len() as u32).to_le_bytes());
        let caller = lengths + 8;
        put(out, caller, &self.caller.effective_uid.to_le_bytes());
        put(out, caller + 4, &self.caller.filesystem_uid.to_le_bytes());
        put(out, caller + 8, &self.caller.filesystem_gid.to_le_bytes());
        put(out, caller + 12, &((groups.len() / 4) as u32).to_le_bytes());
        put(out, REQUEST_HEADER, self.first);
        put(out, REQUEST_HEADER + self.first.len(), self.second);
        put(out, REQUEST_HEADER + self.first.len() + self.second.len(), groups);
        Some(size)
    }

    /// Reads a request from untrusted bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        if bytes.len() < REQUEST_HEADER {
            return Err(DecodeError::BadLength { expected: REQUEST_HEADER, found: bytes.len() });
        }
        let op = FileOp::from_u16(u16_in(bytes, 12)).ok_or(DecodeError::BadField("file operation"))?;
        let mut words = [0u64; REQUEST_WORDS];
        for (index, word) in words.iter_mut().enumerate() {
            *word = u64_in(bytes, 16 + 8 * index);
        }
        let lengths = 16 + 8 * REQUEST_WORDS;
        let first = u32_in(bytes, lengths) as usize;
        let second = u32_in(bytes, lengths + 4) as usize;
        let caller = lengths + 8;
        let group_bytes = (u32_in(bytes, caller + 12) as usize).saturating_mul(4);
        let expected = REQUEST_HEADER.saturating_add(first).saturating_add(second).saturating_add(group_bytes);
        if first.saturating_add(second) > MAX_BYTES || group_bytes > MAX_GROUP_BYTES || expected != bytes.len() {
            return Err(DecodeError::BadLength { expected, found: bytes.len() });
        }
        let groups_at = REQUEST_HEADER + first + second;
        Ok(Self {
            request_id: u64_in(bytes, 0),
            pid: u32_in(bytes, 8),
            op,
            words,
            first: &bytes[REQUEST_HEADER..REQUEST_HEADER + first],
            second: &bytes[REQUEST_HEADER + first..groups_at],
            caller: Caller {
                effective_uid: u32_in(bytes, caller),
                filesystem_uid: u32_in(bytes, caller + 4),
                filesystem_gid: u32_in(bytes, caller + 8),
                group_bytes: &bytes[groups_at..],
            },
        })
    }
}

/// The service's answer to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileReply<'a> {
    pub request_id: u64,
    /// A count or value, or a negative Linux errno.
    pub result: i64,
    pub words: [u64; REPLY_WORDS],
    /// Data read, a path, a stat record.
    pub bytes: &'a [u8],
}

const REPLY_HEADER: usize = 8 + 8 + 8 * REPLY_WORDS + 4;

impl<'a> FileReply<'a> {
    /// Bytes [`encode`](Self::encode) writes.
    pub fn encoded_size(&self) -> usize {
        REPLY_HEADER + self.bytes.len()
    }

    /// Writes the reply into `out`; returns the length, or `None` when the bytes are longer
    /// than [`MAX_BYTES`] or `out` is too short.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let size = self.encoded_size();
        if self.bytes.len() > MAX_BYTES || out.len() < size {
            return None;
        }
        put(out, 0, &self.request_id.to_le_bytes());
        put(out, 8, &self.result.to_le_bytes());
        for (index, word) in self.words.iter().enumerate() {
            put(out, 16 + 8 * index, &word.to_le_bytes());
        }
        put(out, 16 + 8 * REPLY_WORDS, &(self.bytes.len() as u32).to_le_bytes());
        put(out, REPLY_HEADER, self.bytes);
        Some(size)
    }

    /// Reads a reply from untrusted bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        if bytes.len() < REPLY_HEADER {
            return Err(DecodeError::BadLength { expected: REPLY_HEADER, found: bytes.len() });
        }
        let length = u32_in(bytes, 16 + 8 * REPLY_WORDS) as usize;
        let expected = REPLY_HEADER.saturating_add(length);
        if length > MAX_BYTES || expected != bytes.len() {
            return Err(DecodeError::BadLength { expected, found: bytes.len() });
        }
        let mut words = [0u64; REPLY_WORDS];
        for (index, word) in words.iter_mut().enumerate() {
            *word = u64_in(bytes, 16 + 8 * index);
        }
        Ok(Self { request_id: u64_in(bytes, 0), result: u64_in(bytes, 8) as i64, words, bytes: &bytes[REPLY_HEADER..] })
    }
}

/// A file's attributes as the service reports them (the fields of Linux `struct stat` that
/// Reef fills), in the bytes of a `Stat` or `StatPath` reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    pub device: u64,
    pub inode: u64,
    pub mode: u32,
    pub links: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    pub blocks: u64,
    pub accessed_ns: u64,
    pub modified_ns: u64,
    pub changed_ns: u64,
}

impl Metadata {
    pub const SIZE: usize = 8 * 2 + 4 * 4 + 8 * 6;

    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut out = [0u8; Self::SIZE];
        put(&mut out, 0, &self.device.to_le_bytes());
        put(&mut out, 8, &self.inode.to_le_bytes());
        put(&mut out, 16, &self.mode.to_le_bytes());
        put(&mut out, 20, &self.links.to_le_bytes());
        put(&mut out, 24, &self.uid.to_le_bytes());
        put(&mut out, 28, &self.gid.to_le_bytes());
        for (index, word) in
            [self.rdev, self.size, self.blocks, self.accessed_ns, self.modified_ns, self.changed_ns].iter().enumerate()
        {
            put(&mut out, 32 + 8 * index, &word.to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() != Self::SIZE {
            return Err(DecodeError::BadLength { expected: Self::SIZE, found: bytes.len() });
        }
        Ok(Self {
            device: u64_in(bytes, 0),
            inode: u64_in(bytes, 8),
            mode: u32_in(bytes, 16),
            links: u32_in(bytes, 20),
            uid: u32_in(bytes, 24),
            gid: u32_in(bytes, 28),
            rdev: u64_in(bytes, 32),
            size: u64_in(bytes, 40),
            blocks: u64_in(bytes, 48),
            accessed_ns: u64_in(bytes, 56),
            modified_ns: u64_in(bytes, 64),
            changed_ns: u64_in(bytes, 72),
        })
    }
}

/// What happened to a process, for the service's `/proc` (which lists the processes of every
/// instance without asking each at every `ls /proc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessRecord<'a> {
    pub pid: u32,
    pub parent_pid: u32,
    /// Its home instance.
    pub core: u32,
    /// False: the process ended and its record goes.
    pub alive: bool,
    /// Its program's name.
    pub name: &'a [u8],
    /// Its arguments, each NUL-ended (Linux's `/proc/<pid>/cmdline`).
    pub command_line: &'a [u8],
    /// The file it runs, an absolute path (Linux's `/proc/<pid>/exe`).
    pub program: &'a [u8],
    /// Its process group and session (`/proc/<pid>/stat` fields 5 and 6).
    pub process_group: u32,
    pub session: u32,
    /// Whether a stop signal stopped it (state `T`).
    pub stopped: bool,
    /// Its user and group ids (`Uid:` and `Gid:` of `/proc/<pid>/status`; its files' owner).
    pub credentials: crate::credentials::Ids,
    /// Its supplementary groups, each a little-endian `u32` (`Groups:`).
    pub group_bytes: &'a [u8],
}

const RECORD_HEADER: usize = 4 * 10 + crate::credentials::Ids::SIZE + 4;

impl<'a> ProcessRecord<'a> {
    /// Bytes [`encode`](Self::encode) writes.
    pub fn encoded_size(&self) -> usize {
        RECORD_HEADER + self.name.len() + self.command_line.len() + self.program.len() + self.group_bytes.len()
    }

    /// The supplementary groups.
    pub fn groups(&self) -> impl Iterator<Item = u32> + 'a {
        self.group_bytes.chunks_exact(4).map(|bytes| u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// Writes the record into `out`; `None` when `out` is too short or the strings too long.
    pub fn encode(&self, out: &mut [u8]) -> Option<usize> {
        let size = self.encoded_size();
        if out.len() < size
            || self.name.len() + self.command_line.len() + self.program.len() > MAX_BYTES
            || self.group_bytes.len() > MAX_GROUP_BYTES
            || !self.group_bytes.len().is_multiple_of(4)
        {
            return None;
        }
        put(out, 0, &self.pid.to_le_bytes());
        put(out, 4, &self.parent_pid.to_le_bytes());
        put(out, 8, &self.core.to_le_bytes());
        put(out, 12, &u32::from(self.alive).to_le_bytes());
        put(out, 16, &(self.name.len() as u32).to_le_bytes());
        put(out, 20, &(self.command_line.len() as u32).to_le_bytes());
        put(out, 24, &(self.program.len() as u32).to_le_bytes());
        put(out, 28, &self.process_group.to_le_bytes());
        put(out, 32, &self.session.to_le_bytes());
        put(out, 36, &u32::from(self.stopped).to_le_bytes());
        put(out, 40, &self.credentials.encode());
        put(out, 40 + crate::credentials::Ids::SIZE, &((self.group_bytes.len() / 4) as u32).to_le_bytes());
        put(out, RECORD_HEADER, self.name);
        put(out, RECORD_HEADER + self.name.len(), self.command_line);
        put(out, RECORD_HEADER + self.name.len() + self.command_line.len(), self.program);
        put(out, RECORD_HEADER + self.name.len() + self.command_line.len() + self.program.len(), self.group_bytes);
        Some(size)
    }

    /// Reads a record from untrusted bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        if bytes.len() < RECORD_HEADER {
            return Err(DecodeError::BadLength { expected: RECORD_HEADER, found: bytes.len() });
        }
        let name = u32_in(bytes, 16) as usize;
        let command_line = u32_in(bytes, 20) as usize;
        let program = u32_in(bytes, 24) as usize;
        let group_bytes = (u32_in(bytes, 40 + crate::credentials::Ids::SIZE) as usize).saturating_mul(4);
        let expected = RECORD_HEADER
            .saturating_add(name)
            .saturating_add(command_line)
            .saturating_add(program)
            .saturating_add(group_bytes);
        if expected != bytes.len()
            || name.saturating_add(command_line).saturating_add(program) > MAX_BYTES
            || group_bytes > MAX_GROUP_BYTES
        {
            return Err(DecodeError::BadLength { expected, found: bytes.len() });
        }
        let credentials = crate::credentials::Ids::decode(&bytes[40..40 + crate::credentials::Ids::SIZE])
            .ok_or(DecodeError::BadField("credentials"))?;
        let strings_end = RECORD_HEADER + name + command_line + program;
        let alive = match u32_in(bytes, 12) {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::BadField("alive")),
        };
        let stopped = match u32_in(bytes, 36) {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::BadField("stopped")),
        };
        Ok(Self {
            pid: u32_in(bytes, 0),
            parent_pid: u32_in(bytes, 4),
            core: u32_in(bytes, 8),
            alive,
            name: &bytes[RECORD_HEADER..RECORD_HEADER + name],
            command_line: &bytes[RECORD_HEADER + name..RECORD_HEADER + name + command_line],
            program: &bytes[RECORD_HEADER + name + command_line..strings_end],
            process_group: u32_in(bytes, 28),
            session: u32_in(bytes, 32),
            stopped,
            credentials,
            group_bytes: &bytes[strings_end..],
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    #[test]
    fn a_request_survives_the_trip() {
        let request = FileRequest {
            request_id: 7,
            pid: 100_001,
            op: FileOp::Rename,
            words: [1, 2, 3, 4, 5, 6],
            first: b"/tmp/a",
            second: b"/tmp/b",
            caller: Caller {
                effective_uid: 0,
                filesystem_uid: 1000,
                filesystem_gid: 100,
                group_bytes: &[4, 0, 0, 0, 27, 0, 0, 0],
            },
        };
        let mut out = vec![0u8; request.encoded_size()];
        assert_eq!(request.encode(&mut out), Some(out.len()));
        let decoded = FileRequest::decode(&out).unwrap();
        assert_eq!(decoded, request);
        assert_eq!(decoded.caller.groups().collect::<std::vec::Vec<_>>(), [4, 27]);
    }

    #[test]
    fn a_reply_survives_the_trip() {
        let reply = FileReply { request_id: 9, result: -2, words: [3, 4], bytes: b"data" };
        let mut out = vec![0u8; reply.encoded_size()];
        reply.encode(&mut out);
        assert_eq!(FileReply::decode(&out), Ok(reply));
    }

    #[test]
    fn lengths_that_lie_are_refused() {
        let request = FileRequest {
            request_id: 1,
            pid: 1,
            op: FileOp::Open,
            words: [0; 6],
            first: b"/x",
            second: b"",
            caller: Caller::ROOT,
        };
        let mut out = vec![0u8; request.encoded_size()];
        request.encode(&mut out);
        assert!(FileRequest::decode(&out[..out.len() - 1]).is_err());
        out[12] = 99;
        assert!(FileRequest::decode(&out).is_err());
    }

    #[test]
    fn metadata_survives_the_trip() {
        let metadata = Metadata { device: 1, inode: 2, mode: 0o100644, links: 1, size: 5, ..Metadata::default() };
        assert_eq!(Metadata::decode(&metadata.encode()), Ok(metadata));
    }

    #[test]
    fn a_process_record_survives_the_trip() {
        let record = ProcessRecord {
            pid: 200_003,
            parent_pid: 1,
            core: 2,
            alive: true,
            name: b"sh",
            command_line: b"sh\0-c\0ls\0",
            program: b"/bin/busybox",
            process_group: 7,
            session: 5,
            stopped: true,
            credentials: crate::credentials::Ids::of(1000, 100),
            group_bytes: &[27, 0, 0, 0],
        };
        let mut out = vec![0u8; record.encoded_size()];
        record.encode(&mut out);
        assert_eq!(ProcessRecord::decode(&out), Ok(record));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = FileRequest::decode(&bytes);
            let _ = FileReply::decode(&bytes);
            let _ = Metadata::decode(&bytes);
            let _ = ProcessRecord::decode(&bytes);
        }

        #[test]
        fn any_request_round_trips(
            id in any::<u64>(), pid in any::<u32>(), code in 1u16..=45, words in any::<[u64; 6]>(),
            first in proptest::collection::vec(any::<u8>(), 0..300),
            second in proptest::collection::vec(any::<u8>(), 0..300),
            ids in any::<[u32; 3]>(), groups in proptest::collection::vec(any::<u32>(), 0..20),
        ) {
            let group_bytes: std::vec::Vec<u8> = groups.iter().flat_map(|group| group.to_le_bytes()).collect();
            let caller = Caller { effective_uid: ids[0], filesystem_uid: ids[1], filesystem_gid: ids[2], group_bytes: &group_bytes };
            let request = FileRequest {
                request_id: id, pid, op: FileOp::from_u16(code).unwrap(), words, first: &first, second: &second, caller,
            };
            let mut out = vec![0u8; request.encoded_size()];
            request.encode(&mut out);
            prop_assert_eq!(FileRequest::decode(&out), Ok(request));
            prop_assert_eq!(request.caller.groups().collect::<std::vec::Vec<_>>(), groups);
        }
    }
}
