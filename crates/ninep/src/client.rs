//! The 9P2000.L client: fids, one call at a time over any transport, checked replies.

use crate::wire::{
    Attr, DecodeError, DirEntry, EncodeError, Qid, Reply, Request, SetAttr, StatFs, IOHDRSZ, MAX_WALK_ELEMENTS, NO_FID,
    NO_TAG, VERSION_9P2000_L,
};
use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;
use linux_raw_sys::errno::{EINVAL, EIO, EMFILE, ENAMETOOLONG, ENOENT, EPROTONOSUPPORT};

pub use crate::wire::Fid;

/// A Linux error number (`ENOENT` is 2), as Rlerror carries it and `linux_raw_sys::errno`
/// spells it.
pub type Errno = u32;

/// What carries a request to the server and its reply back (virtio-9p's queue in the kernel,
/// the in-memory `server::Server` in tests).
pub trait Transport {
    /// Sends `request`, one whole message, and writes the reply into `reply`; returns the
    /// reply's length. A length beyond `reply` says the reply did not fit (the client takes
    /// it as a malformed reply); an error says the transport failed, and the client returns
    /// it as it is.
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, Errno>;
}

impl<T: Transport + ?Sized> Transport for &mut T {
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, Errno> {
        (**self).call(request, reply)
    }
}

/// The smallest `msize` the client works with: Rgetattr and an Rwalk of 16 qids fit.
pub const MIN_MSIZE: u32 = 256;

/// The largest `msize` the client asks for (it keeps two buffers of that size).
pub const MAX_MSIZE: u32 = 16 << 20;

/// What the client has seen, for the file service's statistics and the tests.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Counters {
    /// Requests handed to the transport.
    pub calls_sent: u64,
    /// Rlerror replies.
    pub errors_from_server: u64,
    /// Replies that did not decode, were longer than the buffer, carried another tag or
    /// another type than the request's, or broke a promise of the protocol (more bytes read
    /// than asked for, more qids than names): each is `EIO`.
    pub malformed_replies: u64,
}

/// How a call failed, which a walk needs to know (did the server see the new fid?).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CallError {
    /// Rlerror: the server refused, and changed nothing.
    Server(Errno),
    /// The reply was malformed: what the server did is unknown.
    Malformed,
    /// The transport failed, or the request could not be encoded.
    Local(Errno),
}

impl From<CallError> for Errno {
    fn from(error: CallError) -> Errno {
        match error {
            CallError::Server(errno) | CallError::Local(errno) => errno,
            CallError::Malformed => EIO,
        }
    }
}

/// The fid numbers in use: freed numbers are reused, lowest first.
struct FidPool {
    next: u32,
    free: BTreeSet<u32>,
    /// Numbers given back whose Tclunk may not have reached the server: never reused, as the
    /// server may still hold them.
    retired: BTreeSet<u32>,
}

impl FidPool {
    fn allocate(&mut self) -> Result<Fid, Errno> {
        if let Some(number) = self.free.pop_first() {
            return Ok(Fid(number));
        }
        if self.next == NO_FID.0 {
            return Err(EMFILE);
        }
        self.next += 1;
        Ok(Fid(self.next - 1))
    }

    /// Whether `fid` is held: handed out and not given back.
    fn holds(&self, fid: Fid) -> bool {
        fid.0 < self.next && !self.free.contains(&fid.0) && !self.retired.contains(&fid.0)
    }

    /// Frees `fid` for reuse; a number not held changes nothing.
    fn release(&mut self, fid: Fid) {
        if self.holds(fid) {
            self.free.insert(fid.0);
        }
    }

    /// Gives `fid` back without reusing its number.
    fn retire(&mut self, fid: Fid) {
        if self.holds(fid) {
            self.retired.insert(fid.0);
        }
    }

    fn in_use(&self) -> usize {
        self.next as usize - self.free.len() - self.retired.len()
    }
}

/// Makes a call and takes the fields of the one reply type its request can have (`call`
/// checked the type already, so the other arm is never taken).
macro_rules! call_expecting {
    ($client:expr, $request:expr, $pattern:pat => $value:expr) => {
        match $client.call(&$request)? {
            $pattern => Ok($value),
            _ => Err(EIO),
        }
    };
}

/// A 9P2000.L session: the negotiated `msize`, the fids, one request buffer and one reply
/// buffer of `msize` bytes, reused by every call.
pub struct Client<T: Transport> {
    transport: T,
    msize: u32,
    request: Vec<u8>,
    reply: Vec<u8>,
    last_tag: u16,
    fids: FidPool,
    root: Fid,
    counters: Counters,
}

impl<T: Transport> Client<T> {
    /// Opens a session: Tversion `9P2000.L` with `msize` (the session's is the smaller of
    /// ours and the server's; a server that does not speak 9P2000.L is `EPROTONOSUPPORT`),
    /// then Tattach of the root fid for `uname`/`uid` to tree `aname`. `EINVAL` for an
    /// `msize` outside [`MIN_MSIZE`]..=[`MAX_MSIZE`].
    pub fn connect(transport: T, msize: u32, uname: &[u8], aname: &[u8], uid: u32) -> Result<(Self, Qid), Errno> {
        if !(MIN_MSIZE..=MAX_MSIZE).contains(&msize) {
            return Err(EINVAL);
        }
        let mut client = Client {
            transport,
            msize,
            request: Vec::with_capacity(msize as usize),
            reply: vec![0; msize as usize],
            last_tag: 0,
            fids: FidPool { next: 0, free: BTreeSet::new(), retired: BTreeSet::new() },
            root: NO_FID,
            counters: Counters::default(),
        };
        let version = Request::Version { msize, version: VERSION_9P2000_L };
        let (server_msize, speaks_9p2000_l) = call_expecting!(client, version,
            Reply::Version { msize, version } => (msize, version == VERSION_9P2000_L))?;
        if !speaks_9p2000_l || server_msize < MIN_MSIZE {
            return Err(EPROTONOSUPPORT);
        }
        client.msize = msize.min(server_msize);
        client.reply.truncate(client.msize as usize);
        let root = client.fids.allocate()?;
        let attach = Request::Attach { fid: root, afid: NO_FID, uname, aname, n_uname: uid };
        let qid = call_expecting!(client, attach, Reply::Attach { qid } => qid)?;
        client.root = root;
        Ok((client, qid))
    }

    /// The fid of the share's root, attached by [`connect`](Self::connect).
    pub fn root(&self) -> Fid {
        self.root
    }

    /// The negotiated largest message.
    pub fn msize(&self) -> u32 {
        self.msize
    }

    /// The most bytes one Tread or Twrite moves: `msize - IOHDRSZ`.
    pub fn io_size(&self) -> usize {
        (self.msize - IOHDRSZ) as usize
    }

    /// Fids held, the root included: the leak check.
    pub fn fids_in_use(&self) -> usize {
        self.fids.in_use()
    }

    /// Calls sent, errors from the server, malformed replies.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// The transport (to reach a device, or a test server's fault injection).
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, to change it.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// A new fid for what `names` lead to from `from` (a clone of `from` when there are
    /// none), and a qid per name. More than 16 names, or more than one message holds, take
    /// several Twalks. A walk that stops part way clunks what it made and is `ENOENT`; a
    /// name too long for one message is `ENAMETOOLONG`.
    pub fn walk(&mut self, from: Fid, names: &[&[u8]]) -> Result<(Fid, Vec<Qid>), Errno> {
        let new_fid = self.fids.allocate()?;
        let mut qids = Vec::with_capacity(names.len());
        let mut source = from;
        loop {
            let walked = qids.len();
            let step = names.get(walked..).unwrap_or_default();
            let step = &step[..self.names_per_walk(step)];
            if step.is_empty() && walked < names.len() {
                self.abandon_walk(new_fid, source == new_fid);
                return Err(ENAMETOOLONG);
            }
            let request = Request::Walk { fid: source, new_fid, names: step.to_vec() };
            let result = match self.call(&request) {
                Ok(Reply::Walk { qids }) => Ok(qids),
                Ok(_) => Err(CallError::Malformed),
                Err(error) => Err(error),
            };
            match result {
                Ok(step_qids) if step_qids.len() == step.len() => qids.extend(step_qids),
                Ok(step_qids) if step_qids.len() < step.len() => {
                    // A walk that stops part way leaves `new_fid` as it was (Plan 9 walk(5)).
                    self.abandon_walk(new_fid, source == new_fid);
                    return Err(ENOENT);
                }
                Ok(_) => {
                    self.counters.malformed_replies += 1;
                    self.abandon_walk(new_fid, true);
                    return Err(EIO);
                }
                Err(error) => {
                    // Rlerror made nothing; after anything else the server may hold the fid.
                    let made = source == new_fid || !matches!(error, CallError::Server(_));
                    self.abandon_walk(new_fid, made);
                    return Err(error.into());
                }
            }
            source = new_fid;
            if qids.len() == names.len() {
                return Ok((new_fid, qids));
            }
        }
    }

    /// How many of `names` the next Twalk takes: at most 16, and no more than fit a message.
    fn names_per_walk(&self, names: &[&[u8]]) -> usize {
        // size type tag fid newfid nwname, then length[2] and the bytes of each name.
        let mut length = 4 + 1 + 2 + 4 + 4 + 2;
        let fits = names.iter().take(MAX_WALK_ELEMENTS).take_while(|name| {
            length += 2 + name.len();
            length <= self.msize as usize
        });
        fits.count()
    }

    /// Gives up a walk's new fid, clunking it first when the server may hold it.
    fn abandon_walk(&mut self, new_fid: Fid, made: bool) {
        if made {
            // The walk's own error is what the caller hears about.
            let _ = self.clunk(new_fid);
        } else {
            self.fids.release(new_fid);
        }
    }

    /// The attributes `mask` (`GETATTR_*`) asks for; `valid` says which the server gave.
    pub fn getattr(&mut self, fid: Fid, mask: u64) -> Result<Attr, Errno> {
        call_expecting!(self, Request::Getattr { fid, request_mask: mask }, Reply::Getattr { attr } => attr)
    }

    /// Changes the attributes `attr.valid` (`SETATTR_*`) names; `SETATTR_SIZE` truncates.
    pub fn setattr(&mut self, fid: Fid, attr: &SetAttr) -> Result<(), Errno> {
        self.call_for_nothing(&Request::Setattr { fid, attr: *attr })
    }

    /// Opens `fid` with Linux `open` flags: its qid and the server's iounit.
    pub fn open(&mut self, fid: Fid, flags: u32) -> Result<(Qid, u32), Errno> {
        call_expecting!(self, Request::Lopen { fid, flags }, Reply::Lopen { qid, iounit } => (qid, iounit))
    }

    /// Creates regular file `name` in `directory` and opens it with `flags`; as 9P says,
    /// `directory`'s fid then stands for the new, open file.
    pub fn create(
        &mut self,
        directory: Fid,
        name: &[u8],
        flags: u32,
        mode: u32,
        gid: u32,
    ) -> Result<(Qid, u32), Errno> {
        let request = Request::Lcreate { fid: directory, name, flags, mode, gid };
        call_expecting!(self, request, Reply::Lcreate { qid, iounit } => (qid, iounit))
    }

    /// Reads into `buffer` from `offset`, in Treads of at most [`io_size`](Self::io_size)
    /// bytes, until the buffer is full or a read comes back short (the end of the file).
    /// An error after some bytes came gives those bytes; the next read meets it again.
    pub fn read(&mut self, fid: Fid, offset: u64, buffer: &mut [u8]) -> Result<usize, Errno> {
        self.in_chunks(offset, buffer.len(), |client, position, range| {
            let chunk = buffer.get_mut(range).unwrap_or_default();
            let request = Request::Read { fid, offset: position, count: chunk.len() as u32 };
            let copied = call_expecting!(client, request, Reply::Read { data } => {
                let destination = chunk.get_mut(..data.len());
                destination.map(|destination| destination.copy_from_slice(data)).map(|()| data.len())
            })?;
            copied.ok_or_else(|| client.malformed())
        })
    }

    /// Writes `data` at `offset` in Twrites of at most [`io_size`](Self::io_size) bytes,
    /// until all is written or the server takes less than it was given. An error after some
    /// bytes went gives their count; the next write meets it again.
    pub fn write(&mut self, fid: Fid, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        self.in_chunks(offset, data.len(), |client, position, range| {
            let chunk = data.get(range).unwrap_or_default();
            let request = Request::Write { fid, offset: position, data: chunk };
            let count = call_expecting!(client, request, Reply::Write { count } => count as usize)?;
            if count > chunk.len() {
                return Err(client.malformed());
            }
            Ok(count)
        })
    }

    /// Moves `length` bytes from `offset` in steps of at most `io_size`: `step` gets the file
    /// offset and the range of the caller's bytes, and says how many it moved.
    fn in_chunks(
        &mut self,
        offset: u64,
        length: usize,
        mut step: impl FnMut(&mut Self, u64, core::ops::Range<usize>) -> Result<usize, Errno>,
    ) -> Result<usize, Errno> {
        let mut done = 0;
        while done < length {
            let wanted = (length - done).min(self.io_size());
            let position = offset.checked_add(done as u64).ok_or(EINVAL)?;
            match step(self, position, done..done + wanted) {
                Ok(moved) => {
                    done += moved;
                    if moved < wanted {
                        break;
                    }
                }
                Err(errno) if done == 0 => return Err(errno),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    /// The entries of open directory `fid` after cookie `offset` (0: from the start) that
    /// fit `count` bytes (at most [`io_size`](Self::io_size)); none at the end. The next
    /// call passes the last entry's `offset`.
    pub fn readdir(&mut self, fid: Fid, offset: u64, count: u32) -> Result<Vec<DirEntry>, Errno> {
        let count = count.min(self.io_size() as u32);
        let entries = call_expecting!(self, Request::Readdir { fid, offset, count }, Reply::Readdir { data } => {
            if data.len() > count as usize { Err(DecodeError::Truncated) } else { DirEntry::decode_all(data) }
        })?;
        entries.map_err(|_| self.malformed())
    }

    /// Creates directory `name` in `directory`.
    pub fn mkdir(&mut self, directory: Fid, name: &[u8], mode: u32, gid: u32) -> Result<Qid, Errno> {
        call_expecting!(self, Request::Mkdir { directory, name, mode, gid }, Reply::Mkdir { qid } => qid)
    }

    /// Creates symbolic link `name` in `directory`, pointing at `target`.
    pub fn symlink(&mut self, directory: Fid, name: &[u8], target: &[u8], gid: u32) -> Result<Qid, Errno> {
        let request = Request::Symlink { fid: directory, name, target, gid };
        call_expecting!(self, request, Reply::Symlink { qid } => qid)
    }

    /// The target of symbolic link `fid`.
    pub fn readlink(&mut self, fid: Fid) -> Result<Vec<u8>, Errno> {
        call_expecting!(self, Request::Readlink { fid }, Reply::Readlink { target } => target.to_vec())
    }

    /// Makes `name` in `directory` a hard link to the file of `target`.
    pub fn link(&mut self, directory: Fid, target: Fid, name: &[u8]) -> Result<(), Errno> {
        self.call_for_nothing(&Request::Link { directory, fid: target, name })
    }

    /// Moves `old_name` of `old_directory` to `new_name` of `new_directory`, replacing what
    /// was there as Linux's `renameat` does.
    pub fn rename_at(
        &mut self,
        old_directory: Fid,
        old_name: &[u8],
        new_directory: Fid,
        new_name: &[u8],
    ) -> Result<(), Errno> {
        self.call_for_nothing(&Request::Renameat { old_directory, old_name, new_directory, new_name })
    }

    /// Removes `name` from `directory`; `flags` is `AT_REMOVEDIR` (0x200) for a directory.
    pub fn unlink_at(&mut self, directory: Fid, name: &[u8], flags: u32) -> Result<(), Errno> {
        self.call_for_nothing(&Request::Unlinkat { directory, name, flags })
    }

    /// Creates device node, FIFO or socket `name` in `directory` (`mode` holds the type).
    pub fn mknod(
        &mut self,
        directory: Fid,
        name: &[u8],
        mode: u32,
        major: u32,
        minor: u32,
        gid: u32,
    ) -> Result<Qid, Errno> {
        let request = Request::Mknod { directory, name, mode, major, minor, gid };
        call_expecting!(self, request, Reply::Mknod { qid } => qid)
    }

    /// The statistics of the file system holding `fid`.
    pub fn statfs(&mut self, fid: Fid) -> Result<StatFs, Errno> {
        call_expecting!(self, Request::Statfs { fid }, Reply::Statfs { statfs } => statfs)
    }

    /// Flushes the file of `fid`, data and attributes, to the host's storage.
    pub fn fsync(&mut self, fid: Fid) -> Result<(), Errno> {
        self.call_for_nothing(&Request::Fsync { fid, datasync: 0 })
    }

    /// Gives `fid` back. The fid is free again even when the server errs: after Rclunk or
    /// Rlerror its number is reused by a later walk; after a transport error or a malformed
    /// reply the server may still hold it, so the number is retired instead.
    pub fn clunk(&mut self, fid: Fid) -> Result<(), Errno> {
        let result = self.call(&Request::Clunk { fid }).map(drop);
        match result {
            Ok(()) | Err(CallError::Server(_)) => self.fids.release(fid),
            Err(CallError::Malformed | CallError::Local(_)) => self.fids.retire(fid),
        }
        Ok(result?)
    }

    /// A call whose reply carries nothing but success.
    fn call_for_nothing(&mut self, request: &Request<'_>) -> Result<(), Errno> {
        // The reply's type was checked by `call`: the request's plus one.
        self.call(request)?;
        Ok(())
    }

    /// Counts a reply that broke the protocol: `EIO`.
    fn malformed(&mut self) -> Errno {
        self.counters.malformed_replies += 1;
        EIO
    }

    /// Sends `request` and checks the reply: a whole message within the buffer, of the
    /// request's tag and of its type plus one (or Rlerror, whose errno it gives).
    fn call(&mut self, request: &Request<'_>) -> Result<Reply<'_>, CallError> {
        let tag = match request {
            Request::Version { .. } => NO_TAG,
            _ => {
                // Any tag but NO_TAG: one call is outstanding at a time.
                self.last_tag = (self.last_tag + 1) % NO_TAG;
                self.last_tag
            }
        };
        self.request.clear();
        request.encode(tag, &mut self.request).map_err(|error| match error {
            EncodeError::StringTooLong => CallError::Local(ENAMETOOLONG),
            EncodeError::TooManyElements | EncodeError::MessageTooLong => CallError::Local(EINVAL),
        })?;
        if self.request.len() > self.msize as usize {
            // Reads and writes are cut to fit; only long names make a request too long.
            return Err(CallError::Local(ENAMETOOLONG));
        }
        self.counters.calls_sent += 1;
        let length = self.transport.call(&self.request, &mut self.reply).map_err(CallError::Local)?;
        let expected_type = request.message_type() + 1;
        let decoded = self.reply.get(..length).map(Reply::decode);
        match decoded {
            Some(Ok((reply_tag, Reply::Lerror { ecode }))) if reply_tag == tag && ecode != 0 => {
                self.counters.errors_from_server += 1;
                Err(CallError::Server(ecode))
            }
            Some(Ok((reply_tag, reply))) if reply_tag == tag && reply.message_type() == expected_type => Ok(reply),
            _ => {
                self.counters.malformed_replies += 1;
                Err(CallError::Malformed)
            }
        }
    }
}
