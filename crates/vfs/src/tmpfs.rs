//! `/tmp`: writable files, directories and links, with contents in pages.
//!
//! Names here are already checked (not `.`, `..`, empty, or holding `/`) and both ends of an
//! operation are in this file system; the [`Vfs`](crate::Vfs) does that. The errors left are
//! the ones only the tree can tell: a name present or missing, a directory empty or not.

use crate::file_pages::FilePages;
use crate::pages::CountedPages;
use crate::{Errno, RENAME_EXCHANGE, RENAME_NOREPLACE};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use initramfs::mode;
use linux_raw_sys::errno::{EEXIST, EINVAL, EISDIR, ENOENT, ENOTDIR, ENOTEMPTY};

/// The inode number of the root of `/tmp`.
pub(crate) const ROOT_INODE: u64 = 1;

/// One file, directory or link.
#[derive(Debug)]
pub(crate) struct TmpNode {
    /// Type and permission bits, as `st_mode`.
    pub mode: u32,
    /// The owner and group: root's until the service gives it its maker's
    /// ([`Vfs::set_owner`](crate::Vfs::set_owner)).
    pub uid: u32,
    pub gid: u32,
    /// Names of the node; a directory also counts `.` and its subdirectories' `..`. 0 once
    /// unlinked: the node lives on only while open.
    pub links: u64,
    pub accessed: u64,
    pub modified: u64,
    pub changed: u64,
    pub content: Content,
}

#[derive(Debug)]
pub(crate) enum Content {
    Regular(FilePages),
    Directory(Directory),
    /// The link's target, as given.
    Symlink(Vec<u8>),
    /// A named pipe: the bytes live in the file service's pipe while it is open, never here.
    Fifo,
    /// A `AF_UNIX` socket's name (`bind`): the socket itself is the file service's.
    Socket,
}

/// A directory's entries, by name for lookups and by insertion sequence for listings. A
/// listing's cursor is a sequence number, so entries added or removed between two reads of
/// a listing move no other entry: none is listed twice, and each one present throughout is
/// listed once.
#[derive(Debug)]
pub(crate) struct Directory {
    /// The directory holding this one (the root's is the root): directories have one name.
    pub parent: u64,
    /// The name in `parent`, for [`Vfs::path_of`](crate::Vfs::path_of).
    pub name: Vec<u8>,
    entries: BTreeMap<Vec<u8>, Child>,
    /// Sequence → name, each entry of `entries` once.
    order: BTreeMap<u64, Vec<u8>>,
    next_sequence: u64,
}

#[derive(Clone, Copy, Debug)]
struct Child {
    inode: u64,
    sequence: u64,
}

impl Directory {
    fn new(parent: u64, name: Vec<u8>) -> Self {
        Self { parent, name, entries: BTreeMap::new(), order: BTreeMap::new(), next_sequence: 0 }
    }

    pub fn lookup(&self, name: &[u8]) -> Option<u64> {
        self.entries.get(name).map(|child| child.inode)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry listed first at or after `sequence`: its sequence, name and inode.
    pub fn entry_from(&self, sequence: u64) -> Option<(u64, &[u8], u64)> {
        let (&found, name) = self.order.range(sequence..).next()?;
        Some((found, name, self.entries[name].inode))
    }

    /// Adds an entry, listed after every entry present.
    fn insert(&mut self, name: Vec<u8>, inode: u64) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.order.insert(sequence, name.clone());
        self.entries.insert(name, Child { inode, sequence });
    }

    /// Points the existing entry `name` at `inode`, keeping its place in listings: a rename
    /// over a name lists that name once, whether the listing had passed it or not.
    fn replace(&mut self, name: &[u8], inode: u64) {
        if let Some(child) = self.entries.get_mut(name) {
            child.inode = inode;
        }
    }

    fn remove(&mut self, name: &[u8]) -> Option<u64> {
        let child = self.entries.remove(name)?;
        self.order.remove(&child.sequence);
        Some(child.inode)
    }
}

/// The tmpfs: its nodes by inode number. Inode numbers count up and are never reused, so a
/// stale [`NodeId`](crate::NodeId) finds nothing rather than another file.
#[derive(Debug)]
pub(crate) struct Tmpfs {
    nodes: BTreeMap<u64, TmpNode>,
    next_inode: u64,
}

impl Tmpfs {
    pub fn new(now: u64) -> Self {
        let root = TmpNode {
            // Sticky and writable by all, as `/tmp` is everywhere.
            mode: mode::DIRECTORY | 0o1777,
            uid: 0,
            gid: 0,
            links: 2,
            accessed: now,
            modified: now,
            changed: now,
            content: Content::Directory(Directory::new(ROOT_INODE, Vec::new())),
        };
        Self { nodes: BTreeMap::from([(ROOT_INODE, root)]), next_inode: ROOT_INODE + 1 }
    }

    pub fn get(&self, inode: u64) -> Result<&TmpNode, Errno> {
        self.nodes.get(&inode).ok_or(ENOENT)
    }

    pub fn get_mut(&mut self, inode: u64) -> Result<&mut TmpNode, Errno> {
        self.nodes.get_mut(&inode).ok_or(ENOENT)
    }

    /// Nodes other than the root.
    pub fn node_count(&self) -> usize {
        self.nodes.len() - 1
    }

    /// The directory `inode`: `ENOENT` if it is gone or was removed (nothing can be looked
    /// up or created in a removed directory), `ENOTDIR` if it is no directory.
    pub fn directory(&self, inode: u64) -> Result<&Directory, Errno> {
        let node = self.get(inode)?;
        match &node.content {
            Content::Directory(directory) if node.links > 0 => Ok(directory),
            Content::Directory(_) => Err(ENOENT),
            _ => Err(ENOTDIR),
        }
    }

    fn directory_mut(&mut self, inode: u64) -> Result<&mut Directory, Errno> {
        let node = self.get_mut(inode)?;
        match &mut node.content {
            Content::Directory(directory) if node.links > 0 => Ok(directory),
            Content::Directory(_) => Err(ENOENT),
            _ => Err(ENOTDIR),
        }
    }

    fn is_directory(&self, inode: u64) -> bool {
        self.nodes.get(&inode).is_some_and(|node| matches!(node.content, Content::Directory(_)))
    }

    /// Marks the contents of `directory` changed now.
    fn touch_directory(&mut self, directory: u64, now: u64) {
        if let Some(node) = self.nodes.get_mut(&directory) {
            node.modified = now;
            node.changed = now;
        }
    }

    /// Adjusts the link count of `inode` by `delta` (a directory gaining or losing a
    /// subdirectory's `..`, a file a name).
    fn add_links(&mut self, inode: u64, delta: i64) {
        if let Some(node) = self.nodes.get_mut(&inode) {
            node.links = node.links.saturating_add_signed(delta);
        }
    }

    /// A new node named `name` in `directory`, with mode `mode` (type and permissions) and
    /// `content` (for a directory, the kind only: its entries start empty).
    pub fn add(&mut self, directory: u64, name: &[u8], mode: u32, content: NewContent, now: u64) -> Result<u64, Errno> {
        if self.directory(directory)?.lookup(name).is_some() {
            return Err(EEXIST);
        }
        let inode = self.next_inode;
        self.next_inode += 1;
        let (content, links) = match content {
            NewContent::Regular => (Content::Regular(FilePages::default()), 1),
            NewContent::Directory => (Content::Directory(Directory::new(directory, name.to_vec())), 2),
            NewContent::Symlink(target) => (Content::Symlink(target), 1),
            NewContent::Fifo => (Content::Fifo, 1),
            NewContent::Socket => (Content::Socket, 1),
        };
        let is_directory = matches!(content, Content::Directory(_));
        self.nodes.insert(
            inode,
            TmpNode { mode, uid: 0, gid: 0, links, accessed: now, modified: now, changed: now, content },
        );
        self.directory_mut(directory)?.insert(name.to_vec(), inode);
        if is_directory {
            self.add_links(directory, 1);
        }
        self.touch_directory(directory, now);
        Ok(inode)
    }

    /// A second name for the file `inode` (not a directory: the caller checked).
    pub fn link(&mut self, inode: u64, directory: u64, name: &[u8], now: u64) -> Result<(), Errno> {
        if self.directory(directory)?.lookup(name).is_some() {
            return Err(EEXIST);
        }
        let node = self.get_mut(inode)?;
        if node.links == 0 {
            // Linux too refuses to give an unlinked file a name again (`linkat` without
            // `AT_EMPTY_PATH` on an `O_TMPFILE`).
            return Err(ENOENT);
        }
        node.links += 1;
        node.changed = now;
        self.directory_mut(directory)?.insert(name.to_vec(), inode);
        self.touch_directory(directory, now);
        Ok(())
    }

    /// Removes the name `name` of a non-directory (`unlink`). `must_be_directory` is a
    /// trailing `/` on the name, which makes a file `ENOTDIR`. Returns the node, whose link
    /// count dropped: the caller frees it if that reached 0 and nothing holds it open.
    pub fn unlink(&mut self, directory: u64, name: &[u8], must_be_directory: bool, now: u64) -> Result<u64, Errno> {
        let inode = self.directory(directory)?.lookup(name).ok_or(ENOENT)?;
        if self.is_directory(inode) {
            return Err(EISDIR);
        }
        if must_be_directory {
            return Err(ENOTDIR);
        }
        self.directory_mut(directory)?.remove(name);
        let node = self.get_mut(inode)?;
        node.links -= 1;
        node.changed = now;
        self.touch_directory(directory, now);
        Ok(inode)
    }

    /// Removes the empty directory `name` (`rmdir`). Returns it, now with 0 links: the
    /// caller frees it unless it is open.
    pub fn remove_directory(&mut self, directory: u64, name: &[u8], now: u64) -> Result<u64, Errno> {
        let inode = self.directory(directory)?.lookup(name).ok_or(ENOENT)?;
        if !self.directory(inode)?.is_empty() {
            return Err(ENOTEMPTY);
        }
        self.directory_mut(directory)?.remove(name);
        self.add_links(directory, -1);
        let node = self.get_mut(inode)?;
        node.links = 0;
        node.changed = now;
        self.touch_directory(directory, now);
        Ok(inode)
    }

    /// Whether `ancestor` is `node` or a directory above it.
    fn is_ancestor(&self, ancestor: u64, node: u64) -> bool {
        let mut current = node;
        loop {
            if current == ancestor {
                return true;
            }
            match self.nodes.get(&current).map(|n| &n.content) {
                Some(Content::Directory(directory)) if current != ROOT_INODE => current = directory.parent,
                _ => return false,
            }
        }
    }

    /// `renameat2` within tmpfs, with `flags` already checked to be `RENAME_NOREPLACE`,
    /// `RENAME_EXCHANGE` or neither. `slashes` says which names had a trailing `/`: the node
    /// under that name must then be a directory (in a plain rename, a trailing `/` on the new
    /// name asks it of the source).
    /// Returns the node a replaced name pointed to, whose link count dropped: the caller
    /// frees it unless it is still linked or open.
    // Two (directory, name) pairs, the flags, the slashes and the time: all needed, none
    // belonging together enough to make a type of.
    #[allow(clippy::too_many_arguments)]
    pub fn rename(
        &mut self,
        from_directory: u64,
        from_name: &[u8],
        to_directory: u64,
        to_name: &[u8],
        flags: u32,
        slashes: (bool, bool),
        now: u64,
    ) -> Result<Option<u64>, Errno> {
        // The checks in the order of Linux's `do_renameat2` and `vfs_rename`.
        let source = self.directory(from_directory)?.lookup(from_name).ok_or(ENOENT)?;
        let target = self.directory(to_directory)?.lookup(to_name);
        let source_is_directory = self.is_directory(source);
        let target_is_directory = target.is_some_and(|target| self.is_directory(target));
        let exchange = flags & RENAME_EXCHANGE != 0;
        if flags & RENAME_NOREPLACE != 0 && target.is_some() {
            return Err(EEXIST);
        }
        let (from_slash, to_slash) = slashes;
        if exchange && (target.is_none() || (to_slash && !target_is_directory)) {
            return Err(if target.is_none() { ENOENT } else { ENOTDIR });
        }
        if !source_is_directory && (from_slash || (to_slash && !exchange)) {
            return Err(ENOTDIR);
        }
        // A directory cannot go below itself, and a name cannot replace a directory above
        // it (which holds the source, so it is not empty).
        if source_is_directory && self.is_ancestor(source, to_directory) {
            return Err(EINVAL);
        }
        if target.is_some_and(|target| self.is_ancestor(target, from_directory)) {
            return Err(if exchange { EINVAL } else { ENOTEMPTY });
        }
        if target == Some(source) {
            // Two names of one node: POSIX says do nothing and succeed.
            return Ok(None);
        }
        if let (true, Some(target)) = (exchange, target) {
            self.directory_mut(from_directory)?.replace(from_name, target);
            self.directory_mut(to_directory)?.replace(to_name, source);
            self.moved(source, from_directory, to_directory, to_name, now);
            self.moved(target, to_directory, from_directory, from_name, now);
            self.touch_directory(from_directory, now);
            self.touch_directory(to_directory, now);
            return Ok(None);
        }
        if let Some(target) = target {
            if target_is_directory && !source_is_directory {
                return Err(EISDIR);
            }
            if source_is_directory && !target_is_directory {
                return Err(ENOTDIR);
            }
            if target_is_directory && !self.directory(target)?.is_empty() {
                return Err(ENOTEMPTY);
            }
        }
        self.directory_mut(from_directory)?.remove(from_name);
        match target {
            Some(target) => {
                self.directory_mut(to_directory)?.replace(to_name, source);
                let node = self.get_mut(target)?;
                node.changed = now;
                if target_is_directory {
                    node.links = 0;
                    self.add_links(to_directory, -1);
                } else {
                    node.links -= 1;
                }
            }
            None => self.directory_mut(to_directory)?.insert(to_name.to_vec(), source),
        }
        self.moved(source, from_directory, to_directory, to_name, now);
        self.touch_directory(from_directory, now);
        self.touch_directory(to_directory, now);
        Ok(target)
    }

    /// Bookkeeping for `node` now named `name` in `to` instead of in `from`: a directory's
    /// parent, name and `..` link.
    fn moved(&mut self, node: u64, from: u64, to: u64, name: &[u8], now: u64) {
        let Some(moved) = self.nodes.get_mut(&node) else { return };
        moved.changed = now;
        if let Content::Directory(directory) = &mut moved.content {
            directory.parent = to;
            directory.name = name.to_vec();
            self.add_links(from, -1);
            self.add_links(to, 1);
        }
    }

    /// Frees `inode`, its pages returned: its link count is 0 and nothing holds it open.
    pub fn free(&mut self, inode: u64, pages: &mut CountedPages) {
        if let Some(mut node) = self.nodes.remove(&inode) {
            if let Content::Regular(file) = &mut node.content {
                file.release(pages);
            }
        }
    }
}

/// What [`Tmpfs::add`] makes.
pub(crate) enum NewContent {
    Regular,
    Directory,
    Symlink(Vec<u8>),
    Fifo,
    Socket,
}
