//! A host directory shared over 9P2000.L, mounted as a name in the root (`/host`): its nodes,
//! the client that reaches them, and the cache of names and attributes that keeps a program
//! from paying a round trip per `stat` (HARE's fscfs).
//!
//! Every node the VFS has named holds one walked (unopened) fid; a node being read or
//! written also holds an opened one for each direction, clunked at its last close. Node
//! numbers are local and never reused, so a forgotten node's [`NodeId`](crate::NodeId) names
//! nothing (`ENOENT`); two names of one host file (a hard link) are one node, found by the
//! server's `qid.path`.
//!
//! **The cache rule.** Attributes, positive lookups and failed lookups (a dynamic loader
//! probes many paths that do not exist) are kept for [`CACHE_LIFETIME`] from when the server
//! said them, by the VFS clock; changes made through this mount update or drop what they
//! touch at once. So a change made on the host side is seen here at most
//! [`CACHE_LIFETIME`] later; one made here is seen here at once.

use crate::node::{Metadata, Space};
use crate::{Errno, RENAME_EXCHANGE, RENAME_NOREPLACE};
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::cell::RefCell;
use linux_raw_sys::errno::{EEXIST, EINVAL, ENOENT, ENOTDIR};
use linux_raw_sys::general::{AT_REMOVEDIR, O_RDONLY, O_RDWR, O_WRONLY};
use ninep::{Attr, Client, Fid, SetAttr, Timestamp, Transport};

/// How long what the server said of a name or a node's attributes is believed: 1 s, as
/// Linux's 9P client with `cache=loose` keeps names and NFS keeps attributes at least.
pub const CACHE_LIFETIME: u64 = 1_000_000_000;

/// The inode (local node number) of a share's root.
pub(crate) const ROOT_INODE: u64 = 1;

/// The size of the 9P messages asked for: 128 KiB of data per read or write and header.
pub const MESSAGE_SIZE: u32 = 128 * 1024 + 24;

/// The attributes `Tgetattr` asks for: `P9_GETATTR_BASIC` (mode through blocks).
const BASIC_ATTRIBUTES: u64 = 0x7ff;

/// `Tsetattr` valid bits.
const SET_MODE: u32 = 0x1;
const SET_SIZE: u32 = 0x8;
const SET_ATIME: u32 = 0x10;
const SET_MTIME: u32 = 0x20;
const SET_ATIME_TO: u32 = 0x80;
const SET_MTIME_TO: u32 = 0x100;

/// The file-system type Linux's `statfs` reports for 9P (`V9FS_MAGIC`).
pub const V9FS_MAGIC: u64 = 0x0102_1997;

/// Something the server said, and when.
#[derive(Clone, Debug)]
struct Said<T> {
    value: T,
    at: u64,
}

impl<T> Said<T> {
    fn fresh(&self, now: u64) -> bool {
        now.saturating_sub(self.at) < CACHE_LIFETIME
    }
}

/// One host file, directory or link the VFS has named.
struct HostNode {
    /// Walked to the node, never opened: walks, attributes, links.
    fid: Fid,
    /// The server's identity of the file (`qid.path`): its inode number on the host.
    identity: u64,
    /// The directory it was found in (the root's is the root), for `..` and paths.
    parent: u64,
    /// Its name there.
    name: Vec<u8>,
    attributes: Option<Said<Attr>>,
    /// Names looked up in this directory: the node, or `None` for a name that is not there.
    names: BTreeMap<Vec<u8>, Said<Option<u64>>>,
    /// Opened for reading (files and directories), while the node is open.
    reader: Option<Fid>,
    /// Opened for writing, while the node is open.
    writer: Option<Fid>,
    /// The last batch of a directory listing: the 9P offset it started at and its entries.
    listing: Option<(u64, Vec<ninep::DirEntry>)>,
    /// Its last name was removed through this mount: forgotten at its last close.
    removed: bool,
}

impl HostNode {
    fn new(fid: Fid, identity: u64, parent: u64, name: &[u8]) -> Self {
        Self {
            fid,
            identity,
            parent,
            name: name.to_vec(),
            attributes: None,
            names: BTreeMap::new(),
            reader: None,
            writer: None,
            listing: None,
            removed: false,
        }
    }
}

/// What the cache saved and what it cost, for `/proc/reef` and the benchmarks.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct ShareCounts {
    /// Nodes named (each holding a fid).
    pub nodes: usize,
    /// Fids the client holds, the root's and opened ones included.
    pub fids: usize,
    /// Fids opened for reading or writing: 0 when no file of the share is open.
    pub opened_fids: usize,
    /// Lookups and attribute reads answered from the cache.
    pub cache_hits: u64,
    /// Those that went to the server.
    pub cache_misses: u64,
    /// Replies that did not decode (each an `EIO` to the caller).
    pub malformed_replies: u64,
}

/// The transport a share was mounted with.
pub(crate) struct Boxed(pub Box<dyn Transport + Send>);

impl Transport for Boxed {
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, Errno> {
        self.0.call(request, reply)
    }
}

/// The share's state, behind a `RefCell`: reads (`&Vfs`) fill the cache too.
struct State {
    client: Client<Boxed>,
    nodes: BTreeMap<u64, HostNode>,
    by_identity: BTreeMap<u64, u64>,
    next_inode: u64,
    hits: u64,
    misses: u64,
}

/// One mounted share.
pub(crate) struct Share {
    /// The mount point's name in the root directory (`host`).
    pub name: Vec<u8>,
    /// The virtio-9p mount tag, the first field of its `/proc/mounts` line.
    pub tag: Vec<u8>,
    state: RefCell<State>,
}

/// A directory entry of a share: name, host inode number, `d_type`, and the 9P offset of
/// the entry after it.
pub(crate) struct Listed {
    pub name: Vec<u8>,
    pub identity: u64,
    pub kind_code: u8,
    pub next: u64,
}

impl Share {
    /// Connects to the server behind `transport` (version with messages of at most
    /// `message_size` bytes, attach as `uid`) and mounts it at `/name`.
    pub fn connect(
        name: &[u8],
        tag: &[u8],
        transport: Box<dyn Transport + Send>,
        message_size: u32,
        uid: u32,
    ) -> Result<Self, Errno> {
        let message_size = message_size.min(MESSAGE_SIZE);
        let (client, root) = Client::connect(Boxed(transport), message_size, b"root", b"", uid)?;
        let root_fid = client.root();
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT_INODE, HostNode::new(root_fid, root.path, ROOT_INODE, b""));
        let mut by_identity = BTreeMap::new();
        by_identity.insert(root.path, ROOT_INODE);
        let state = State { client, nodes, by_identity, next_inode: ROOT_INODE + 1, hits: 0, misses: 0 };
        Ok(Self { name: name.to_vec(), tag: tag.to_vec(), state: RefCell::new(state) })
    }

    /// Whether `inode` names a node of this share.
    pub fn has(&self, inode: u64) -> bool {
        self.state.borrow().nodes.contains_key(&inode)
    }

    /// The attributes of `inode`, from the cache while fresh.
    pub fn attributes(&self, inode: u64, now: u64) -> Result<Attr, Errno> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let node = state.nodes.get_mut(&inode).ok_or(ENOENT)?;
        if let Some(said) = node.attributes.as_ref().filter(|said| said.fresh(now)) {
            state.hits += 1;
            return Ok(said.value);
        }
        state.misses += 1;
        let attributes = state.client.getattr(node.fid, BASIC_ATTRIBUTES)?;
        node.attributes = Some(Said { value: attributes, at: now });
        Ok(attributes)
    }

    /// `stat` of `inode`, with `device` the mount's number.
    pub fn metadata(&self, inode: u64, device: u64, now: u64) -> Result<Metadata, Errno> {
        let attributes = self.attributes(inode, now)?;
        let nanoseconds = |time: Timestamp| time.seconds.saturating_mul(1_000_000_000).saturating_add(time.nanoseconds);
        Ok(Metadata {
            device,
            inode: attributes.qid.path,
            mode: attributes.mode,
            links: attributes.nlink,
            uid: attributes.uid,
            gid: attributes.gid,
            rdev: attributes.rdev,
            size: attributes.size,
            block_size: u32::try_from(attributes.blksize).unwrap_or(4096),
            blocks: attributes.blocks,
            accessed: nanoseconds(attributes.atime),
            modified: nanoseconds(attributes.mtime),
            changed: nanoseconds(attributes.ctime),
        })
    }

    /// The node `name` of directory `directory`, `None` if the host has none (remembered
    /// too). Links are not followed: the VFS follows them.
    pub fn lookup(&self, directory: u64, name: &[u8], now: u64) -> Result<Option<u64>, Errno> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let parent = state.nodes.get(&directory).ok_or(ENOENT)?;
        if let Some(said) = parent.names.get(name).filter(|said| said.fresh(now)) {
            if said.value.is_none_or(|inode| state.nodes.contains_key(&inode)) {
                state.hits += 1;
                return Ok(said.value);
            }
        }
        state.misses += 1;
        let parent_fid = parent.fid;
        let found = match state.client.walk(parent_fid, &[name]) {
            Ok((fid, qids)) => {
                let identity = qids.last().map_or(0, |qid| qid.path);
                Some(state.adopt(fid, identity, directory, name))
            }
            Err(ENOENT) => None,
            Err(error) => return Err(error),
        };
        if let Some(parent) = state.nodes.get_mut(&directory) {
            parent.names.insert(name.to_vec(), Said { value: found, at: now });
        }
        Ok(found)
    }

    /// The directory holding `inode` (the root's is the root).
    pub fn parent(&self, inode: u64) -> Result<u64, Errno> {
        Ok(self.state.borrow().nodes.get(&inode).ok_or(ENOENT)?.parent)
    }

    /// The names from `inode` up to the share's root, `inode`'s first.
    pub fn names_up(&self, mut inode: u64) -> Result<Vec<Vec<u8>>, Errno> {
        let state = self.state.borrow();
        let mut names = Vec::new();
        while inode != ROOT_INODE {
            let node = state.nodes.get(&inode).ok_or(ENOENT)?;
            names.push(node.name.clone());
            inode = node.parent;
        }
        Ok(names)
    }

    /// Reads from `offset` of the file `inode` into `buffer`.
    pub fn read(&self, inode: u64, offset: u64, buffer: &mut [u8]) -> Result<usize, Errno> {
        let mut state = self.state.borrow_mut();
        let fid = state.opened(inode, false)?;
        state.client.read(fid, offset, buffer)
    }

    /// Writes `data` at `offset` of the file `inode`.
    pub fn write(&self, inode: u64, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        let mut state = self.state.borrow_mut();
        let fid = state.opened(inode, true)?;
        let written = state.client.write(fid, offset, data)?;
        state.forget_attributes(inode);
        Ok(written)
    }

    /// Changes what `set` says of `inode` (`truncate`, `chmod`, `utimensat`).
    fn set(&self, inode: u64, set: &SetAttr) -> Result<(), Errno> {
        let mut state = self.state.borrow_mut();
        let fid = state.nodes.get(&inode).ok_or(ENOENT)?.fid;
        let result = state.client.setattr(fid, set);
        state.forget_attributes(inode);
        result
    }

    /// Sets the size of the file `inode`.
    pub fn truncate(&self, inode: u64, size: u64) -> Result<(), Errno> {
        self.set(inode, &SetAttr { valid: SET_SIZE, size, ..SetAttr::default() })
    }

    /// Sets the permission bits of `inode`.
    pub fn set_mode(&self, inode: u64, permissions: u32) -> Result<(), Errno> {
        self.set(inode, &SetAttr { valid: SET_MODE, mode: permissions & 0o7777, ..SetAttr::default() })
    }

    /// Sets the access and modification times of `inode` (nanoseconds since 1970; `None`
    /// leaves one as it is).
    pub fn set_times(&self, inode: u64, accessed: Option<u64>, modified: Option<u64>) -> Result<(), Errno> {
        let mut set = SetAttr::default();
        if let Some(accessed) = accessed {
            set.valid |= SET_ATIME | SET_ATIME_TO;
            set.atime = timestamp(accessed);
        }
        if let Some(modified) = modified {
            set.valid |= SET_MTIME | SET_MTIME_TO;
            set.mtime = timestamp(modified);
        }
        self.set(inode, &set)
    }

    /// The target of the link `inode`.
    pub fn read_link(&self, inode: u64) -> Result<Vec<u8>, Errno> {
        let mut state = self.state.borrow_mut();
        let fid = state.nodes.get(&inode).ok_or(ENOENT)?.fid;
        state.client.readlink(fid)
    }

    /// The entry of directory `inode` at 9P offset `offset` (0: the first), `None` at the
    /// end. The host's `.` and `..` are skipped: the VFS lists its own. A listing is read
    /// from the server a batch at a time and served from the batch.
    pub fn entry_at(&self, inode: u64, offset: u64) -> Result<Option<Listed>, Errno> {
        let mut state = self.state.borrow_mut();
        let mut offset = offset;
        loop {
            // `Some(entry)` when the last batch says what comes at `offset`; an empty batch
            // read at `offset` says the listing ends there.
            let cached = state.nodes.get(&inode).ok_or(ENOENT)?.listing.as_ref().and_then(|(start, entries)| {
                if *start == offset {
                    return Some(entries.first().cloned());
                }
                let at = entries.iter().position(|entry| entry.offset == offset)?;
                entries.get(at + 1).cloned().map(Some)
            });
            let entry = match cached {
                Some(entry) => entry,
                None => {
                    let fid = state.opened(inode, false)?;
                    let count = state.client.msize() - 24;
                    let entries = state.client.readdir(fid, offset, count)?;
                    let first = entries.first().cloned();
                    if let Some(node) = state.nodes.get_mut(&inode) {
                        node.listing = Some((offset, entries));
                    }
                    first
                }
            };
            let Some(entry) = entry else { return Ok(None) };
            if entry.offset == offset {
                // A server that does not move on: the end, rather than a loop.
                return Ok(None);
            }
            if entry.name == b"." || entry.name == b".." {
                offset = entry.offset;
                continue;
            }
            return Ok(Some(Listed {
                name: entry.name,
                identity: entry.qid.path,
                kind_code: entry.kind,
                next: entry.offset,
            }));
        }
    }

    /// Makes the regular file `name` in `directory` with `mode` (type and permissions).
    pub fn create(&self, directory: u64, name: &[u8], mode: u32, now: u64) -> Result<u64, Errno> {
        self.change(directory, name, now, |client, fid| {
            let (opened, _) = client.walk(fid, &[])?;
            let created = client.create(opened, name, O_RDWR, mode & 0o7777, 0);
            let closed = client.clunk(opened);
            created.and(closed)
        })
    }

    /// Makes the directory `name` in `directory`.
    pub fn make_directory(&self, directory: u64, name: &[u8], permissions: u32, now: u64) -> Result<u64, Errno> {
        self.change(directory, name, now, |client, fid| client.mkdir(fid, name, permissions & 0o7777, 0).map(|_| ()))
    }

    /// Makes the node `name` in `directory` with `mode` (a FIFO or a regular file).
    pub fn make_node(&self, directory: u64, name: &[u8], mode: u32, now: u64) -> Result<u64, Errno> {
        self.change(directory, name, now, |client, fid| client.mknod(fid, name, mode, 0, 0, 0).map(|_| ()))
    }

    /// Makes the link `name` in `directory` to `target`.
    pub fn symlink(&self, target: &[u8], directory: u64, name: &[u8], now: u64) -> Result<u64, Errno> {
        self.change(directory, name, now, |client, fid| client.symlink(fid, name, target, 0).map(|_| ()))
    }

    /// Gives `inode` the further name `name` in `directory`.
    pub fn link(&self, inode: u64, directory: u64, name: &[u8], now: u64) -> Result<(), Errno> {
        let target = self.state.borrow().nodes.get(&inode).ok_or(ENOENT)?.fid;
        self.change(directory, name, now, |client, fid| client.link(fid, target, name))?;
        self.state.borrow_mut().forget_attributes(inode);
        Ok(())
    }

    /// Runs `work` with the fid of `directory` to make `name` there, then looks the new
    /// node up; the cached name and the directory's attributes are dropped first.
    fn change(
        &self,
        directory: u64,
        name: &[u8],
        now: u64,
        work: impl FnOnce(&mut Client<Boxed>, Fid) -> Result<(), Errno>,
    ) -> Result<u64, Errno> {
        {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let node = state.nodes.get_mut(&directory).ok_or(ENOENT)?;
            node.names.remove(name);
            node.listing = None;
            let fid = node.fid;
            state.forget_attributes(directory);
            work(&mut state.client, fid)?;
        }
        self.lookup(directory, name, now)?.ok_or(ENOENT)
    }

    /// Removes `name` from `directory`: a directory if `directory_wanted`, else anything
    /// else.
    pub fn remove(&self, directory: u64, name: &[u8], directory_wanted: bool, now: u64) -> Result<(), Errno> {
        let is_directory = match self.lookup(directory, name, now)? {
            Some(inode) => self.attributes(inode, now)?.mode & initramfs::mode::TYPE_MASK == initramfs::mode::DIRECTORY,
            None => return Err(ENOENT),
        };
        if is_directory != directory_wanted {
            return Err(if directory_wanted { ENOTDIR } else { linux_raw_sys::errno::EISDIR });
        }
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let node = state.nodes.get_mut(&directory).ok_or(ENOENT)?;
        let fid = node.fid;
        let removed = node.names.remove(name).and_then(|said| said.value);
        node.listing = None;
        state.forget_attributes(directory);
        let flags = if directory_wanted { AT_REMOVEDIR } else { 0 };
        state.client.unlink_at(fid, name, flags)?;
        if let Some(removed) = removed {
            state.forget_attributes(removed);
            // The host may give its inode number to a new file: this node no longer stands
            // for that number.
            if let Some(node) = state.nodes.get_mut(&removed) {
                node.removed = true;
                if state.by_identity.get(&node.identity) == Some(&removed) {
                    state.by_identity.remove(&node.identity);
                }
            }
        }
        Ok(())
    }

    /// Forgets `inode` (its fids go back) if its name was removed: the VFS calls it when
    /// nothing holds the node open any more.
    pub fn forget_if_removed(&self, inode: u64) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        if !state.nodes.get(&inode).is_some_and(|node| node.removed) {
            return;
        }
        let Some(node) = state.nodes.remove(&inode) else { return };
        for fid in [Some(node.fid), node.reader, node.writer].into_iter().flatten() {
            let _ = state.client.clunk(fid);
        }
    }

    /// Moves `from_name` of `from` to `to_name` of `to`, with `RENAME_NOREPLACE` checked
    /// here (9P has no flags for it); `RENAME_EXCHANGE` is `EINVAL`, as on Linux's 9P.
    pub fn rename(
        &self,
        from: u64,
        from_name: &[u8],
        to: u64,
        to_name: &[u8],
        flags: u32,
        now: u64,
    ) -> Result<(), Errno> {
        if flags & RENAME_EXCHANGE != 0 {
            return Err(EINVAL);
        }
        let moved = self.lookup(from, from_name, now)?.ok_or(ENOENT)?;
        if flags & RENAME_NOREPLACE != 0 && self.lookup(to, to_name, now)?.is_some() {
            return Err(EEXIST);
        }
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let mut fids = [Fid(0); 2];
        for (slot, directory, name) in [(0, from, from_name), (1, to, to_name)] {
            let node = state.nodes.get_mut(&directory).ok_or(ENOENT)?;
            node.names.remove(name);
            node.listing = None;
            fids[slot] = node.fid;
        }
        state.forget_attributes(from);
        state.forget_attributes(to);
        state.forget_attributes(moved);
        state.client.rename_at(fids[0], from_name, fids[1], to_name)?;
        if let Some(node) = state.nodes.get_mut(&moved) {
            node.parent = to;
            node.name = to_name.to_vec();
        }
        Ok(())
    }

    /// `statfs` of the share.
    pub fn space(&self) -> Result<Space, Errno> {
        let mut state = self.state.borrow_mut();
        let root = state.client.root();
        let statfs = state.client.statfs(root)?;
        let page = u64::from(statfs.block_size).max(1);
        let pages = |blocks: u64| blocks.saturating_mul(page) / 4096;
        Ok(Space {
            magic: V9FS_MAGIC,
            read_only: false,
            pages: pages(statfs.blocks),
            free_pages: pages(statfs.available_blocks),
            nodes: statfs.files,
            free_nodes: statfs.free_files,
        })
    }

    /// The last close of `inode`: its opened fids go back to the server.
    pub fn close(&self, inode: u64) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let Some(node) = state.nodes.get_mut(&inode) else { return };
        let opened = [node.reader.take(), node.writer.take()];
        node.listing = None;
        for fid in opened.into_iter().flatten() {
            let _ = state.client.clunk(fid);
        }
    }

    /// Totals for leak checks and `/proc`.
    pub fn counts(&self) -> ShareCounts {
        let state = self.state.borrow();
        ShareCounts {
            nodes: state.nodes.len(),
            fids: state.client.fids_in_use(),
            opened_fids: state
                .nodes
                .values()
                .map(|node| usize::from(node.reader.is_some()) + usize::from(node.writer.is_some()))
                .sum(),
            cache_hits: state.hits,
            cache_misses: state.misses,
            malformed_replies: state.client.counters().malformed_replies,
        }
    }
}

/// Nanoseconds since 1970 as 9P's seconds and nanoseconds.
fn timestamp(nanoseconds: u64) -> Timestamp {
    Timestamp { seconds: nanoseconds / 1_000_000_000, nanoseconds: nanoseconds % 1_000_000_000 }
}

impl State {
    /// The node for a fid just walked to a file with server identity `identity`: the node
    /// already known for that file (the new fid is clunked), or a new one.
    fn adopt(&mut self, fid: Fid, identity: u64, parent: u64, name: &[u8]) -> u64 {
        if let Some(&known) = self.by_identity.get(&identity) {
            if self.nodes.contains_key(&known) {
                let _ = self.client.clunk(fid);
                return known;
            }
        }
        let inode = self.next_inode;
        self.next_inode += 1;
        self.nodes.insert(inode, HostNode::new(fid, identity, parent, name));
        self.by_identity.insert(identity, inode);
        inode
    }

    fn forget_attributes(&mut self, inode: u64) {
        if let Some(node) = self.nodes.get_mut(&inode) {
            node.attributes = None;
        }
    }

    /// The fid of `inode` opened for reading or writing, opened now if it is not yet.
    fn opened(&mut self, inode: u64, write: bool) -> Result<Fid, Errno> {
        let node = self.nodes.get(&inode).ok_or(ENOENT)?;
        if let Some(fid) = if write { node.writer } else { node.reader } {
            return Ok(fid);
        }
        let base = node.fid;
        let (fid, _) = self.client.walk(base, &[])?;
        // The server opens a directory as one whatever the flags say (it stats the fid).
        let mut opened = self.client.open(fid, if write { O_RDWR } else { O_RDONLY });
        if write && opened.is_err() {
            // A file its owner may write but not read: open it for writing alone.
            opened = self.client.open(fid, O_WRONLY);
        }
        if let Err(error) = opened {
            let _ = self.client.clunk(fid);
            return Err(error);
        }
        let node = self.nodes.get_mut(&inode).ok_or(ENOENT)?;
        if write {
            node.writer = Some(fid);
        } else {
            node.reader = Some(fid);
        }
        Ok(fid)
    }
}
