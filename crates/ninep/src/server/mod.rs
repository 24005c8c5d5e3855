//! An in-memory 9P2000.L server, a [`Transport`] for tests, with fault injection.
//!
//! It answers every request the [`Client`](crate::Client) sends over an in-memory tree of
//! directories, files, symbolic links and device nodes with Linux's errors, and can be told
//! to fail: [`Server::fail_all`] (the share is gone), [`Server::malformed_next`],
//! [`Server::too_long_next`], [`Server::wrong_tag_next`]. A faulted request is still carried
//! out; only its reply is lost or damaged, as when a reply is garbled on its way back.
//!
//! ```
//! use ninep::server::Server;
//! use ninep::Client;
//! let mut server = Server::new();
//! server.insert_file(b"/etc/motd", b"hello").unwrap();
//! let (mut client, _) = Client::connect(server, 8192, b"root", b"", 0).unwrap();
//! let (fid, _) = client.walk(client.root(), &[b"etc", b"motd"]).unwrap();
//! client.open(fid, 0).unwrap();
//! let mut buffer = [0; 16];
//! assert_eq!(client.read(fid, 0, &mut buffer), Ok(5));
//! ```

mod tree;

use crate::client::{Errno, Transport};
use crate::wire::{Fid, Reply, Request, SetAttr, NO_FID, NO_TAG, NO_UID, SETATTR_SIZE, VERSION_9P2000_L};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use linux_raw_sys::errno::{EBADF, EINVAL, EISDIR, EMSGSIZE, EOPNOTSUPP};
use linux_raw_sys::general::{
    AT_REMOVEDIR, O_ACCMODE, O_APPEND, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFMT,
    S_IFREG, S_IFSOCK,
};
use tree::{Contents, Inode, Tree};

/// The largest message the server takes unless told otherwise.
pub const DEFAULT_MAX_MSIZE: u32 = 1 << 20;

/// Bytes of file contents the server holds unless told otherwise (`ENOSPC` beyond).
pub const DEFAULT_CAPACITY: u64 = 256 << 20;

/// Room for the header of an Rread or Rreaddir: `size type tag count`.
const DATA_REPLY_HEADER: u32 = 11;

/// A fid of the client's, as the server holds it.
struct FidState {
    inode: Inode,
    /// The `open` flags once Tlopen or Tlcreate opened it.
    open: Option<u32>,
}

/// What the next reply suffers.
#[derive(Clone, Copy)]
enum Fault {
    Malformed,
    TooLong,
    WrongTag,
}

/// The in-memory server: one share, one session at a time.
pub struct Server {
    tree: Tree,
    fids: BTreeMap<u32, FidState>,
    max_msize: u32,
    msize: u32,
    version: Vec<u8>,
    /// The uid of the attached user, who owns what is created.
    uid: u32,
    failing: Option<Errno>,
    next_fault: Option<Fault>,
    /// An Rreaddir's entries, which the reply borrows.
    listing: Vec<u8>,
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}

impl Server {
    /// An empty share (a root directory, mode 0755, owned by root) that speaks 9P2000.L with
    /// messages up to [`DEFAULT_MAX_MSIZE`].
    pub fn new() -> Self {
        Self {
            tree: Tree::new(DEFAULT_CAPACITY),
            fids: BTreeMap::new(),
            max_msize: DEFAULT_MAX_MSIZE,
            msize: DEFAULT_MAX_MSIZE,
            version: VERSION_9P2000_L.to_vec(),
            uid: 0,
            failing: None,
            next_fault: None,
            listing: Vec::new(),
        }
    }

    /// The largest message the server takes: Tversion settles on the smaller of this and
    /// the client's.
    pub fn set_max_msize(&mut self, msize: u32) {
        self.max_msize = msize;
    }

    /// The one protocol the server speaks (9P2000.L unless told otherwise); Tversion for
    /// another gets `unknown`.
    pub fn set_version(&mut self, version: &[u8]) {
        self.version = version.to_vec();
    }

    /// Bytes of file contents the share holds: writes and truncations beyond are `ENOSPC`.
    pub fn set_capacity(&mut self, bytes: u64) {
        self.tree.set_capacity(bytes);
    }

    /// The share is gone: every call fails with `errno` (`EIO` as a vanished virtio device
    /// would) until [`restore`](Self::restore).
    pub fn fail_all(&mut self, errno: Errno) {
        self.failing = Some(errno);
    }

    /// The share is back: calls are answered again, the files as they were.
    pub fn restore(&mut self) {
        self.failing = None;
    }

    /// The next reply is garbage (a message of no known type): the client sees `EIO`.
    pub fn malformed_next(&mut self) {
        self.next_fault = Some(Fault::Malformed);
    }

    /// The next reply's size field is larger than the client's buffer, and the transport says
    /// so: the client sees `EIO`.
    pub fn too_long_next(&mut self) {
        self.next_fault = Some(Fault::TooLong);
    }

    /// The next reply carries another tag than its request's: the client sees `EIO`.
    pub fn wrong_tag_next(&mut self) {
        self.next_fault = Some(Fault::WrongTag);
    }

    /// Fids the client holds, as the server counts them: the server's leak check.
    pub fn fids_in_use(&self) -> usize {
        self.fids.len()
    }

    /// Files, directories and links the share holds, the root included.
    pub fn node_count(&self) -> usize {
        self.tree.node_count()
    }

    /// Puts a regular file (mode 0644) at `path`, making its directories as needed.
    pub fn insert_file(&mut self, path: &[u8], contents: &[u8]) -> Result<(), Errno> {
        let inode = self.insert(path, Contents::File(Vec::new()), S_IFREG | 0o644)?;
        self.tree.write(inode, 0, contents, false).map(drop)
    }

    /// Puts a directory (mode 0755) at `path`, making its parents as needed.
    pub fn insert_directory(&mut self, path: &[u8]) -> Result<(), Errno> {
        self.insert(path, Contents::empty_directory(), S_IFDIR | 0o755).map(drop)
    }

    /// Puts a symbolic link to `target` at `path`, making its directories as needed.
    pub fn insert_symlink(&mut self, path: &[u8], target: &[u8]) -> Result<(), Errno> {
        self.insert(path, Contents::Symlink(target.to_vec()), Tree::SYMLINK_MODE).map(drop)
    }

    fn insert(&mut self, path: &[u8], contents: Contents, mode: u32) -> Result<Inode, Errno> {
        let (directory, name) = self.tree.make_parents(path, (self.uid, 0))?;
        self.tree.create(directory, name, contents, mode, (self.uid, 0, 0))
    }

    /// The contents of the regular file at `path` (no links followed).
    pub fn file_contents(&self, path: &[u8]) -> Result<Vec<u8>, Errno> {
        let inode = self.tree.resolve(path)?;
        self.tree.read(inode, 0, usize::MAX).map(<[u8]>::to_vec)
    }

    /// Whether `path` names anything (no links followed).
    pub fn exists(&self, path: &[u8]) -> bool {
        self.tree.resolve(path).is_ok()
    }

    fn fid(&self, fid: Fid) -> Result<&FidState, Errno> {
        self.fids.get(&fid.0).ok_or(EBADF)
    }

    fn inode(&self, fid: Fid) -> Result<Inode, Errno> {
        self.fid(fid).map(|state| state.inode)
    }

    /// The inode of `fid` once open, with its flags, for reads (`writing` false) or writes.
    fn opened(&self, fid: Fid, writing: bool) -> Result<(Inode, u32), Errno> {
        let state = self.fid(fid)?;
        let flags = state.open.ok_or(EBADF)?;
        let allowed = match flags & O_ACCMODE {
            O_RDWR => true,
            O_WRONLY => writing,
            _ => !writing,
        };
        if allowed {
            Ok((state.inode, flags))
        } else {
            Err(EBADF)
        }
    }

    /// A fid number the client may make a new fid with.
    fn unused(&self, fid: Fid) -> Result<(), Errno> {
        if fid == NO_FID || self.fids.contains_key(&fid.0) {
            Err(EBADF)
        } else {
            Ok(())
        }
    }

    /// The owner of what the client creates with group `gid`.
    fn owner(&self, gid: u32) -> (u32, u32, u64) {
        (self.uid, gid, 0)
    }

    /// Carries out one request.
    fn serve(&mut self, request: &Request<'_>) -> Result<Reply<'_>, Errno> {
        Ok(match *request {
            Request::Version { msize, version } => {
                // Tversion starts a new session: every fid of the old one is gone.
                self.fids.clear();
                self.msize = msize.min(self.max_msize);
                let version = if version == self.version.as_slice() { self.version.as_slice() } else { b"unknown" };
                Reply::Version { msize: self.msize, version }
            }
            Request::Attach { fid, afid, n_uname, .. } => {
                if afid != NO_FID {
                    return Err(EINVAL);
                }
                self.unused(fid)?;
                self.uid = if n_uname == NO_UID { 0 } else { n_uname };
                self.fids.insert(fid.0, FidState { inode: tree::ROOT, open: None });
                Reply::Attach { qid: self.tree.qid(tree::ROOT)? }
            }
            Request::Flush { .. } => Reply::Flush {},
            Request::Walk { fid, new_fid, ref names } => {
                let mut inode = self.inode(fid)?;
                if new_fid != fid {
                    self.unused(new_fid)?;
                }
                let mut qids = Vec::new();
                for name in names {
                    match self.tree.lookup(inode, name) {
                        Ok(next) => inode = next,
                        Err(errno) if qids.is_empty() => return Err(errno),
                        Err(_) => break,
                    }
                    qids.push(self.tree.qid(inode)?);
                }
                if qids.len() == names.len() {
                    self.fids.insert(new_fid.0, FidState { inode, open: None });
                }
                Reply::Walk { qids }
            }
            Request::Lopen { fid, flags } => {
                let state = self.fid(fid)?;
                let inode = state.inode;
                if state.open.is_some() {
                    return Err(EBADF);
                }
                let writing = flags & O_ACCMODE != O_RDONLY;
                if self.tree.node(inode)?.is_directory() && (writing || flags & O_TRUNC != 0) {
                    return Err(EISDIR);
                }
                if writing && flags & O_TRUNC != 0 {
                    self.tree.setattr(inode, &truncation())?;
                }
                self.fids.insert(fid.0, FidState { inode, open: Some(flags) });
                Reply::Lopen { qid: self.tree.qid(inode)?, iounit: 0 }
            }
            Request::Lcreate { fid, name, flags, mode, gid } => {
                let state = self.fid(fid)?;
                if state.open.is_some() {
                    return Err(EBADF);
                }
                let directory = state.inode;
                let owner = self.owner(gid);
                let inode =
                    self.tree.create(directory, name, Contents::File(Vec::new()), S_IFREG | (mode & 0o7777), owner)?;
                self.fids.insert(fid.0, FidState { inode, open: Some(flags & !O_TRUNC) });
                Reply::Lcreate { qid: self.tree.qid(inode)?, iounit: 0 }
            }
            Request::Read { fid, offset, count } => {
                let (inode, _) = self.opened(fid, false)?;
                let most = count.min(self.msize.saturating_sub(DATA_REPLY_HEADER));
                Reply::Read { data: self.tree.read(inode, offset, most as usize)? }
            }
            Request::Write { fid, offset, data } => {
                let (inode, flags) = self.opened(fid, true)?;
                let count = self.tree.write(inode, offset, data, flags & O_APPEND != 0)?;
                Reply::Write { count: count as u32 }
            }
            Request::Clunk { fid } => {
                self.fids.remove(&fid.0).ok_or(EBADF)?;
                Reply::Clunk {}
            }
            Request::Remove { fid } => {
                // Tremove clunks the fid whatever happens; unlinkat is how names go here.
                self.fids.remove(&fid.0).ok_or(EBADF)?;
                return Err(EOPNOTSUPP);
            }
            Request::Getattr { fid, .. } => Reply::Getattr { attr: self.tree.getattr(self.inode(fid)?)? },
            Request::Setattr { fid, ref attr } => {
                self.tree.setattr(self.inode(fid)?, attr)?;
                Reply::Setattr {}
            }
            Request::Readdir { fid, offset, count } => {
                let (inode, _) = self.opened(fid, false)?;
                let most = count.min(self.msize.saturating_sub(DATA_REPLY_HEADER));
                self.listing.clear();
                self.tree.readdir(inode, offset, most as usize, &mut self.listing)?;
                Reply::Readdir { data: &self.listing }
            }
            Request::Mkdir { directory, name, mode, gid } => {
                let (directory, owner) = (self.inode(directory)?, self.owner(gid));
                let mode = S_IFDIR | (mode & 0o7777);
                let inode = self.tree.create(directory, name, Contents::empty_directory(), mode, owner)?;
                Reply::Mkdir { qid: self.tree.qid(inode)? }
            }
            Request::Symlink { fid, name, target, gid } => {
                let (directory, owner) = (self.inode(fid)?, self.owner(gid));
                let contents = Contents::Symlink(target.to_vec());
                let inode = self.tree.create(directory, name, contents, Tree::SYMLINK_MODE, owner)?;
                Reply::Symlink { qid: self.tree.qid(inode)? }
            }
            Request::Mknod { directory, name, mode, major, minor, gid } => {
                let (directory, (uid, gid, _)) = (self.inode(directory)?, self.owner(gid));
                let contents = match mode & S_IFMT {
                    S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK => Contents::Special,
                    0 | S_IFREG => Contents::File(Vec::new()),
                    _ => return Err(EINVAL),
                };
                let mode = if mode & S_IFMT == 0 { mode | S_IFREG } else { mode };
                let inode =
                    self.tree.create(directory, name, contents, mode, (uid, gid, device_number(major, minor)))?;
                Reply::Mknod { qid: self.tree.qid(inode)? }
            }
            Request::Readlink { fid } => Reply::Readlink { target: self.tree.readlink(self.inode(fid)?)? },
            Request::Link { directory, fid, name } => {
                self.tree.link(self.inode(directory)?, self.inode(fid)?, name)?;
                Reply::Link {}
            }
            Request::Renameat { old_directory, old_name, new_directory, new_name } => {
                let (old_directory, new_directory) = (self.inode(old_directory)?, self.inode(new_directory)?);
                self.tree.rename((old_directory, old_name), (new_directory, new_name))?;
                Reply::Renameat {}
            }
            Request::Unlinkat { directory, name, flags } => {
                if flags & !AT_REMOVEDIR != 0 {
                    return Err(EINVAL);
                }
                self.tree.unlink(self.inode(directory)?, name, flags & AT_REMOVEDIR != 0)?;
                Reply::Unlinkat {}
            }
            Request::Statfs { fid } => {
                self.inode(fid)?;
                Reply::Statfs { statfs: self.tree.statfs() }
            }
            Request::Fsync { fid, .. } => {
                self.inode(fid)?;
                Reply::Fsync {}
            }
        })
    }

    /// The reply to the request in `bytes`, encoded: Rlerror `EINVAL` when they are no
    /// request, `EMSGSIZE` when the reply would not fit the session's `msize`.
    fn answer(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let (tag, result) = match Request::decode(bytes) {
            Ok((tag, request)) => (tag, self.serve(&request)),
            Err(_) => (bytes.get(5..7).map_or(NO_TAG, |tag| u16::from_le_bytes([tag[0], tag[1]])), Err(EINVAL)),
        };
        let encoded = result.and_then(|reply| reply.encode(tag, &mut out).map_err(|_| EMSGSIZE));
        if encoded.is_err() || out.len() > self.msize as usize {
            out.clear();
            let ecode = encoded.err().unwrap_or(EMSGSIZE);
            // An Rlerror is 11 bytes: it always encodes.
            let _ = Reply::Lerror { ecode }.encode(tag, &mut out);
        }
        out
    }
}

/// The Tsetattr of `open(O_TRUNC)`.
fn truncation() -> SetAttr {
    SetAttr { valid: SETATTR_SIZE, ..SetAttr::default() }
}

/// Linux's `makedev`: the 12 low bits of the major and 8 of the minor in the low 20.
fn device_number(major: u32, minor: u32) -> u64 {
    let (major, minor) = (u64::from(major), u64::from(minor));
    ((major & 0xFFFF_F000) << 32) | ((major & 0xFFF) << 8) | ((minor & 0xFFFF_FF00) << 12) | (minor & 0xFF)
}

impl Transport for Server {
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, Errno> {
        if let Some(errno) = self.failing {
            return Err(errno);
        }
        let mut out = self.answer(request);
        let fids = &self.fids;
        self.tree.collect_orphans(|inode| fids.values().any(|state| state.inode == inode));
        let mut length = out.len();
        match self.next_fault.take() {
            None => {}
            Some(Fault::Malformed) => {
                // A header of type 0, which no message has, and a few stray bytes.
                out.truncate(7);
                out.extend_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
                out[4] = 0;
                length = out.len();
                out[..4].copy_from_slice(&(length as u32).to_le_bytes());
            }
            Some(Fault::TooLong) => {
                length = reply.len() + 1;
                out[..4].copy_from_slice(&(length as u32).to_le_bytes());
            }
            Some(Fault::WrongTag) => out[5] ^= 1,
        }
        let fits = out.len().min(reply.len());
        reply[..fits].copy_from_slice(&out[..fits]);
        Ok(length)
    }
}
