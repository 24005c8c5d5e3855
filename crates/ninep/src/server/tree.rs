//! The test server's files: an in-memory tree with Linux's rules for names, links and sizes.

use crate::client::Errno;
use crate::wire::{
    Attr, DirEntry, Qid, SetAttr, StatFs, Timestamp, GETATTR_BASIC, QID_DIRECTORY, QID_FILE, QID_SYMLINK,
    SETATTR_ATIME, SETATTR_ATIME_SET, SETATTR_GID, SETATTR_MODE, SETATTR_MTIME, SETATTR_MTIME_SET, SETATTR_SIZE,
    SETATTR_UID,
};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;
use linux_raw_sys::errno::{
    EBUSY, EEXIST, EFBIG, EINVAL, EISDIR, ENAMETOOLONG, ENOENT, ENOSPC, ENOTDIR, ENOTEMPTY, EPERM,
};
use linux_raw_sys::general::{S_IFDIR, S_IFLNK, S_IFMT};

/// A file's number: its qid's `path`, its inode number.
pub(crate) type Inode = u64;

/// The share's root directory.
pub(crate) const ROOT: Inode = 1;

/// Longest name, as Linux's `NAME_MAX`.
const NAME_MAX: usize = 255;

/// Block size of `blksize` and statfs.
const BLOCK_SIZE: u64 = 4096;

/// The first listing cookie of a directory's own entries: 1 and 2 are `.` and `..`.
const FIRST_COOKIE: u64 = 3;

/// What a node holds.
pub(crate) enum Contents {
    File(Vec<u8>),
    Directory(Directory),
    Symlink(Vec<u8>),
    /// A device node, FIFO or socket: attributes only.
    Special,
}

impl Contents {
    /// A new directory's contents (`create` sets its parent).
    pub(crate) fn empty_directory() -> Self {
        Contents::Directory(Directory::new(ROOT))
    }
}

/// A directory's entries, listed in the order they were made so that a listing resumes at
/// its cookie whatever is added or removed meanwhile.
pub(crate) struct Directory {
    parent: Inode,
    cookies: BTreeMap<Vec<u8>, u64>,
    entries: BTreeMap<u64, (Vec<u8>, Inode)>,
    next_cookie: u64,
}

impl Directory {
    fn new(parent: Inode) -> Self {
        Self { parent, cookies: BTreeMap::new(), entries: BTreeMap::new(), next_cookie: FIRST_COOKIE }
    }

    fn get(&self, name: &[u8]) -> Option<Inode> {
        self.cookies.get(name).and_then(|cookie| self.entries.get(cookie)).map(|&(_, inode)| inode)
    }

    fn insert(&mut self, name: &[u8], inode: Inode) {
        self.cookies.insert(name.to_vec(), self.next_cookie);
        self.entries.insert(self.next_cookie, (name.to_vec(), inode));
        self.next_cookie += 1;
    }

    fn remove(&mut self, name: &[u8]) {
        if let Some(cookie) = self.cookies.remove(name) {
            self.entries.remove(&cookie);
        }
    }
}

pub(crate) struct Node {
    pub(crate) contents: Contents,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    rdev: u64,
    version: u32,
    atime: Timestamp,
    mtime: Timestamp,
    ctime: Timestamp,
}

impl Node {
    pub(crate) fn is_directory(&self) -> bool {
        matches!(self.contents, Contents::Directory(_))
    }

    fn directory(&self) -> Result<&Directory, Errno> {
        match &self.contents {
            Contents::Directory(directory) => Ok(directory),
            _ => Err(ENOTDIR),
        }
    }

    fn size(&self) -> u64 {
        match &self.contents {
            Contents::File(bytes) | Contents::Symlink(bytes) => bytes.len() as u64,
            Contents::Directory(_) | Contents::Special => 0,
        }
    }
}

/// The files of a share, by inode number.
pub(crate) struct Tree {
    nodes: BTreeMap<Inode, Node>,
    next_inode: Inode,
    /// Nodes no name leads to any more, kept while a fid holds them.
    orphans: BTreeSet<Inode>,
    /// Seconds since the clock's start: each change moves it one on.
    clock: u64,
    used_bytes: u64,
    capacity_bytes: u64,
}

impl Tree {
    pub(crate) fn new(capacity_bytes: u64) -> Self {
        let mut tree = Self {
            nodes: BTreeMap::new(),
            next_inode: ROOT,
            orphans: BTreeSet::new(),
            clock: 0,
            used_bytes: 0,
            capacity_bytes,
        };
        tree.add_node(Contents::Directory(Directory::new(ROOT)), S_IFDIR | 0o755, 0, 0, 0);
        tree
    }

    pub(crate) fn set_capacity(&mut self, bytes: u64) {
        self.capacity_bytes = bytes;
    }

    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    fn now(&mut self) -> Timestamp {
        self.clock += 1;
        Timestamp { seconds: 1_700_000_000 + self.clock, nanoseconds: 0 }
    }

    fn add_node(&mut self, contents: Contents, mode: u32, uid: u32, gid: u32, rdev: u64) -> Inode {
        let now = self.now();
        let nlink = if matches!(contents, Contents::Directory(_)) { 2 } else { 1 };
        let node = Node { contents, mode, uid, gid, nlink, rdev, version: 0, atime: now, mtime: now, ctime: now };
        let inode = self.next_inode;
        self.next_inode += 1;
        self.nodes.insert(inode, node);
        inode
    }

    pub(crate) fn node(&self, inode: Inode) -> Result<&Node, Errno> {
        self.nodes.get(&inode).ok_or(ENOENT)
    }

    fn node_mut(&mut self, inode: Inode) -> Result<&mut Node, Errno> {
        self.nodes.get_mut(&inode).ok_or(ENOENT)
    }

    fn directory_mut(&mut self, inode: Inode) -> Result<&mut Directory, Errno> {
        match &mut self.node_mut(inode)?.contents {
            Contents::Directory(directory) => Ok(directory),
            _ => Err(ENOTDIR),
        }
    }

    pub(crate) fn qid(&self, inode: Inode) -> Result<Qid, Errno> {
        let node = self.node(inode)?;
        let kind = match node.contents {
            Contents::Directory(_) => QID_DIRECTORY,
            Contents::Symlink(_) => QID_SYMLINK,
            Contents::File(_) | Contents::Special => QID_FILE,
        };
        Ok(Qid { kind, version: node.version, path: inode })
    }

    /// What `name` names in `directory`, `.` and `..` included.
    pub(crate) fn lookup(&self, directory: Inode, name: &[u8]) -> Result<Inode, Errno> {
        let entries = self.node(directory)?.directory()?;
        match name {
            b"." => Ok(directory),
            b".." => Ok(entries.parent),
            _ => entries.get(name).ok_or(ENOENT),
        }
    }

    /// Checks a name a new entry would take.
    fn check_new_name(&self, directory: Inode, name: &[u8]) -> Result<(), Errno> {
        if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
            return Err(EINVAL);
        }
        if name.len() > NAME_MAX {
            return Err(ENAMETOOLONG);
        }
        match self.lookup(directory, name) {
            Err(ENOENT) => Ok(()),
            Err(errno) => Err(errno),
            Ok(_) => Err(EEXIST),
        }
    }

    /// Makes `name` in `directory` with `mode` (type and permission bits).
    pub(crate) fn create(
        &mut self,
        directory: Inode,
        name: &[u8],
        contents: Contents,
        mode: u32,
        (uid, gid, rdev): (u32, u32, u64),
    ) -> Result<Inode, Errno> {
        self.check_new_name(directory, name)?;
        let is_directory = matches!(contents, Contents::Directory(_));
        let contents = match contents {
            Contents::Directory(_) => Contents::Directory(Directory::new(directory)),
            other => other,
        };
        let inode = self.add_node(contents, mode, uid, gid, rdev);
        self.directory_mut(directory)?.insert(name, inode);
        self.changed_directory(directory, if is_directory { 1 } else { 0 })?;
        Ok(inode)
    }

    /// A directory's entries changed: new times, `links` more (or fewer) subdirectories.
    fn changed_directory(&mut self, directory: Inode, links: i64) -> Result<(), Errno> {
        let now = self.now();
        let node = self.node_mut(directory)?;
        node.nlink = node.nlink.saturating_add_signed(links);
        node.mtime = now;
        node.ctime = now;
        Ok(())
    }

    /// Makes `name` in `directory` another name of `target`, which is not a directory.
    pub(crate) fn link(&mut self, directory: Inode, target: Inode, name: &[u8]) -> Result<(), Errno> {
        if self.node(target)?.is_directory() {
            return Err(EPERM);
        }
        self.check_new_name(directory, name)?;
        self.directory_mut(directory)?.insert(name, target);
        let now = self.now();
        let node = self.node_mut(target)?;
        node.nlink += 1;
        node.ctime = now;
        self.changed_directory(directory, 0)
    }

    /// Removes `name` from `directory`: a directory, empty, only with `remove_directory`,
    /// anything else only without.
    pub(crate) fn unlink(&mut self, directory: Inode, name: &[u8], remove_directory: bool) -> Result<(), Errno> {
        match name {
            b"." => return Err(EINVAL),
            b".." => return Err(ENOTEMPTY),
            _ => {}
        }
        let inode = self.lookup(directory, name)?;
        let node = self.node(inode)?;
        match (node.is_directory(), remove_directory) {
            (true, false) => return Err(EISDIR),
            (false, true) => return Err(ENOTDIR),
            (true, true) if !node.directory()?.entries.is_empty() => return Err(ENOTEMPTY),
            _ => {}
        }
        self.directory_mut(directory)?.remove(name);
        self.drop_link(directory, inode)
    }

    /// One name of `inode` in `directory` is gone.
    fn drop_link(&mut self, directory: Inode, inode: Inode) -> Result<(), Errno> {
        let now = self.now();
        let node = self.node_mut(inode)?;
        let is_directory = node.is_directory();
        node.nlink = if is_directory { 0 } else { node.nlink.saturating_sub(1) };
        node.ctime = now;
        if node.nlink == 0 {
            self.orphans.insert(inode);
        }
        self.changed_directory(directory, if is_directory { -1 } else { 0 })
    }

    /// Moves `old_name` of `old_directory` to `new_name` of `new_directory`, replacing what
    /// is there as Linux's `rename` does.
    pub(crate) fn rename(
        &mut self,
        (old_directory, old_name): (Inode, &[u8]),
        (new_directory, new_name): (Inode, &[u8]),
    ) -> Result<(), Errno> {
        if [old_name, new_name].iter().any(|name| matches!(*name, b"." | b"..")) {
            return Err(EBUSY);
        }
        let source = self.lookup(old_directory, old_name)?;
        let source_is_directory = self.node(source)?.is_directory();
        let target = match self.check_new_name(new_directory, new_name) {
            Ok(()) => None,
            Err(EEXIST) => Some(self.lookup(new_directory, new_name)?),
            Err(errno) => return Err(errno),
        };
        if target == Some(source) {
            return Ok(());
        }
        if let Some(target) = target {
            let target_node = self.node(target)?;
            match (source_is_directory, target_node.is_directory()) {
                (true, false) => return Err(ENOTDIR),
                (false, true) => return Err(EISDIR),
                (true, true) if !target_node.directory()?.entries.is_empty() => return Err(ENOTEMPTY),
                _ => {}
            }
        }
        if source_is_directory && self.is_within(new_directory, source)? {
            return Err(EINVAL);
        }
        if let Some(target) = target {
            self.directory_mut(new_directory)?.remove(new_name);
            self.drop_link(new_directory, target)?;
        }
        self.directory_mut(old_directory)?.remove(old_name);
        self.directory_mut(new_directory)?.insert(new_name, source);
        let links = if source_is_directory { 1 } else { 0 };
        if source_is_directory {
            self.directory_mut(source)?.parent = new_directory;
        }
        self.changed_directory(old_directory, -links)?;
        self.changed_directory(new_directory, links)
    }

    /// Whether `inode` is `ancestor` or below it.
    fn is_within(&self, mut inode: Inode, ancestor: Inode) -> Result<bool, Errno> {
        loop {
            if inode == ancestor {
                return Ok(true);
            }
            let parent = self.node(inode)?.directory()?.parent;
            if parent == inode {
                return Ok(false);
            }
            inode = parent;
        }
    }

    /// Frees the orphans `held` says no fid holds.
    pub(crate) fn collect_orphans(&mut self, held: impl Fn(Inode) -> bool) {
        let free: Vec<Inode> = self.orphans.iter().copied().filter(|&inode| !held(inode)).collect();
        for inode in free {
            self.orphans.remove(&inode);
            if let Some(Node { contents: Contents::File(bytes), .. }) = self.nodes.remove(&inode) {
                self.used_bytes -= bytes.len() as u64;
            }
        }
    }

    pub(crate) fn getattr(&self, inode: Inode) -> Result<Attr, Errno> {
        let node = self.node(inode)?;
        let size = node.size();
        Ok(Attr {
            valid: GETATTR_BASIC,
            qid: self.qid(inode)?,
            mode: node.mode,
            uid: node.uid,
            gid: node.gid,
            nlink: node.nlink,
            rdev: node.rdev,
            size,
            blksize: BLOCK_SIZE,
            blocks: size.div_ceil(512),
            atime: node.atime,
            mtime: node.mtime,
            ctime: node.ctime,
            ..Attr::default()
        })
    }

    pub(crate) fn setattr(&mut self, inode: Inode, attr: &SetAttr) -> Result<(), Errno> {
        if attr.valid & SETATTR_SIZE != 0 {
            self.set_length(inode, attr.size)?;
        }
        let now = self.now();
        let node = self.node_mut(inode)?;
        if attr.valid & SETATTR_MODE != 0 {
            node.mode = (node.mode & S_IFMT) | (attr.mode & 0o7777);
        }
        if attr.valid & SETATTR_UID != 0 {
            node.uid = attr.uid;
        }
        if attr.valid & SETATTR_GID != 0 {
            node.gid = attr.gid;
        }
        let given = |set_bit: u32, time: Timestamp| if attr.valid & set_bit != 0 { time } else { now };
        if attr.valid & SETATTR_ATIME != 0 {
            node.atime = given(SETATTR_ATIME_SET, attr.atime);
        }
        if attr.valid & SETATTR_MTIME != 0 {
            node.mtime = given(SETATTR_MTIME_SET, attr.mtime);
        }
        node.ctime = now;
        Ok(())
    }

    /// Truncates or extends (with zeros) a regular file.
    fn set_length(&mut self, inode: Inode, length: u64) -> Result<(), Errno> {
        let old_length = self.node(inode)?.size();
        let grows = length.saturating_sub(old_length);
        if self.used_bytes.saturating_add(grows) > self.capacity_bytes {
            return Err(if length > self.capacity_bytes { EFBIG } else { ENOSPC });
        }
        let new_length = usize::try_from(length).map_err(|_| EFBIG)?;
        let now = self.now();
        let node = self.node_mut(inode)?;
        match &mut node.contents {
            Contents::File(bytes) => bytes.resize(new_length, 0),
            Contents::Directory(_) => return Err(EISDIR),
            Contents::Symlink(_) | Contents::Special => return Err(EINVAL),
        }
        node.version = node.version.wrapping_add(1);
        node.mtime = now;
        node.ctime = now;
        self.used_bytes = self.used_bytes - old_length + length;
        Ok(())
    }

    fn file(&self, inode: Inode) -> Result<&[u8], Errno> {
        match &self.node(inode)?.contents {
            Contents::File(bytes) => Ok(bytes),
            Contents::Directory(_) => Err(EISDIR),
            Contents::Symlink(_) | Contents::Special => Err(EINVAL),
        }
    }

    /// At most `count` bytes from `offset`; none at or past the end.
    pub(crate) fn read(&self, inode: Inode, offset: u64, count: usize) -> Result<&[u8], Errno> {
        let bytes = self.file(inode)?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(bytes.len());
        Ok(&bytes[start..start + count.min(bytes.len() - start)])
    }

    /// Writes `data` at `offset` (the end when `append`), the file growing as needed.
    pub(crate) fn write(&mut self, inode: Inode, offset: u64, data: &[u8], append: bool) -> Result<usize, Errno> {
        let length = self.file(inode)?.len() as u64;
        if data.is_empty() {
            return Ok(0);
        }
        let offset = if append { length } else { offset };
        let end = offset.checked_add(data.len() as u64).ok_or(EFBIG)?;
        if end > length {
            self.set_length(inode, end)?;
        }
        let now = self.now();
        let node = self.node_mut(inode)?;
        if let Contents::File(bytes) = &mut node.contents {
            let start = offset as usize;
            bytes[start..start + data.len()].copy_from_slice(data);
        }
        node.version = node.version.wrapping_add(1);
        node.mtime = now;
        node.ctime = now;
        Ok(data.len())
    }

    pub(crate) fn readlink(&self, inode: Inode) -> Result<&[u8], Errno> {
        match &self.node(inode)?.contents {
            Contents::Symlink(target) => Ok(target),
            _ => Err(EINVAL),
        }
    }

    /// Appends to `out` the entries of `directory` after cookie `offset` (`.` and `..`
    /// first) that fit in `count` bytes; `EINVAL` when not even one fits.
    pub(crate) fn readdir(&self, directory: Inode, offset: u64, count: usize, out: &mut Vec<u8>) -> Result<(), Errno> {
        let entries = self.node(directory)?.directory()?;
        let dots = [(1, &b"."[..], directory), (2, &b".."[..], entries.parent)];
        let own = entries.entries.range(offset.saturating_add(1).max(FIRST_COOKIE)..);
        let listing = dots.into_iter().filter(|&(cookie, _, _)| cookie > offset);
        let listing = listing.chain(own.map(|(&cookie, (name, inode))| (cookie, name.as_slice(), *inode)));
        for (cookie, name, inode) in listing {
            let kind = ((self.node(inode)?.mode & S_IFMT) >> 12) as u8;
            let entry = DirEntry { qid: self.qid(inode)?, offset: cookie, kind, name: name.to_vec() };
            if out.len() + entry.encoded_len() > count {
                return if out.is_empty() { Err(EINVAL) } else { Ok(()) };
            }
            entry.encode(out).map_err(|_| EINVAL)?;
        }
        Ok(())
    }

    pub(crate) fn statfs(&self) -> StatFs {
        let blocks = self.capacity_bytes / BLOCK_SIZE;
        let free_blocks = blocks.saturating_sub(self.used_bytes.div_ceil(BLOCK_SIZE));
        let files = 1 << 20;
        StatFs {
            filesystem_type: 0x0102_1997, // V9FS_MAGIC
            block_size: BLOCK_SIZE as u32,
            blocks,
            free_blocks,
            available_blocks: free_blocks,
            files,
            free_files: files.saturating_sub(self.nodes.len() as u64),
            filesystem_id: 0x9_9999,
            name_length: NAME_MAX as u32,
        }
    }

    /// The node `path` (`/`-separated from the root, no links followed) names.
    pub(crate) fn resolve(&self, path: &[u8]) -> Result<Inode, Errno> {
        path.split(|&byte| byte == b'/')
            .filter(|part| !part.is_empty())
            .try_fold(ROOT, |at, name| self.lookup(at, name))
    }

    /// The directory `path`'s last name goes in, made with its parents as needed, and
    /// that name.
    pub(crate) fn make_parents<'p>(&mut self, path: &'p [u8], owner: (u32, u32)) -> Result<(Inode, &'p [u8]), Errno> {
        let mut names = path.split(|&byte| byte == b'/').filter(|part| !part.is_empty()).peekable();
        let mut directory = ROOT;
        while let Some(name) = names.next() {
            if names.peek().is_none() {
                return Ok((directory, name));
            }
            directory = match self.lookup(directory, name) {
                Err(ENOENT) => {
                    self.create(directory, name, Contents::empty_directory(), S_IFDIR | 0o755, (owner.0, owner.1, 0))?
                }
                other => other?,
            };
        }
        Err(EINVAL)
    }

    /// The mode a symbolic link gets.
    pub(crate) const SYMLINK_MODE: u32 = S_IFLNK | 0o777;
}
