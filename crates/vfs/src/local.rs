//! What an instance may answer without asking the file service: a lookup that stays inside the
//! initramfs. The archive is the same read-only bytes on every instance and no call changes
//! it, so `stat("/etc/localtime")` (absent) or `stat("/bin/ls")` gives the same answer
//! everywhere, for good; only the mounts (`/tmp`, `/dev`, `/proc`, `/sys`, the host shares)
//! hold state the service keeps, and a walk that reaches one of their names asks the service.
//!
//! The walk is [`Vfs::resolve`](crate::Vfs::resolve)'s for a process whose root was never
//! changed, on the archive alone: the same components, `.` and `..`, links, errors and
//! permission checks, in the same order, and the metadata the service would report
//! ([`IndexNode::metadata`]). A test compares the two on every path of a sample archive.

use crate::archive_index::{ArchiveIndex, ROOT};
use crate::node::{Metadata, NodeKind};
use crate::path::{check_path, Walk};
use crate::permission::{self, Credentials};
use crate::vfs::MOUNTS;
use crate::Errno;
use alloc::vec::Vec;
use initramfs::{mode, Archive};
use linux_raw_sys::errno::{ENOENT, ENOTDIR};

/// The answer of a local lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Local {
    /// The path names this node of the initramfs.
    Found(Metadata),
    /// The lookup fails with this error, wherever it is asked.
    Failed(Errno),
    /// The walk reaches a mount, the root itself, or starts elsewhere than `/`: only the
    /// service knows.
    Ask,
}

/// The initramfs as one instance sees it, with the names of the root that are mount points.
pub struct ArchiveView {
    index: ArchiveIndex,
    /// Names in `/` that the service mounts something at (`tmp`, `dev`, `proc`, `sys`, and
    /// every share's).
    mount_points: Vec<Vec<u8>>,
}

impl ArchiveView {
    /// The view of `archive`, with `shares` the mount points of the host shares (`/host`, as
    /// the kernel command line names them: whether or not one was mounted, a walk that
    /// reaches its name asks).
    pub fn new(archive: Option<Archive<'static>>, shares: &[&[u8]]) -> Self {
        let fixed = MOUNTS[1..].iter().map(|mount| mount.name().to_vec());
        let shares = shares.iter().map(|share| share.strip_prefix(b"/").unwrap_or(share).to_vec());
        Self { index: ArchiveIndex::new(archive), mount_points: fixed.chain(shares).collect() }
    }

    /// About how many bytes of heap the view of an archive of `entries` names takes while it
    /// is built (its nodes, and the map of names that builds them): a caller with a small
    /// heap checks this before [`ArchiveView::new`] (a 23 MiB archive of 48 000 names takes
    /// some 13 MiB).
    pub fn heap_estimate(entries: usize) -> usize {
        entries.saturating_mul(core::mem::size_of::<crate::archive_index::IndexNode>() * 2 + 64)
    }

    /// What `stat` (`follow_last`) or `lstat` of the absolute `path` gives a process whose
    /// root is the file system's root and whose file-system ids are `credentials`.
    pub fn stat(&self, path: &[u8], follow_last: bool, credentials: &Credentials) -> Local {
        if let Err(error) = check_path(path) {
            return Local::Failed(error);
        }
        if path[0] != b'/' {
            return Local::Ask;
        }
        match self.walk(path, follow_last, credentials) {
            Ok(Some(ROOT)) | Ok(None) => Local::Ask,
            Ok(Some(index)) => Local::Found(self.metadata(index)),
            Err(error) => Local::Failed(error),
        }
    }

    fn metadata(&self, index: u32) -> Metadata {
        self.index.node(index).map(|node| node.metadata(index)).expect("an index the walk found")
    }

    fn kind(&self, index: u32) -> NodeKind {
        match self.metadata(index).mode & mode::TYPE_MASK {
            mode::DIRECTORY => NodeKind::Directory,
            mode::SYMLINK => NodeKind::Symlink,
            _ => NodeKind::Regular,
        }
    }

    /// [`Vfs::walk`](crate::Vfs)'s steps from the root: the node found, or `None` when the
    /// walk reaches a mount point's name in the root.
    fn walk(&self, path: &[u8], follow_last: bool, credentials: &Credentials) -> Result<Option<u32>, Errno> {
        let mut current = ROOT;
        let mut walk = Walk::new(path);
        let mut hops = 0;
        while let Some(component) = walk.next_name()? {
            let name = walk.name(&component);
            if self.kind(current) != NodeKind::Directory {
                return Err(ENOTDIR);
            }
            if !credentials.is_root() {
                credentials.check(&self.metadata(current), permission::EXECUTE)?;
            }
            let child = match name {
                b"." => current,
                b".." if current == ROOT => current,
                b".." => self.index.node(current).map_or(ROOT, |node| node.parent),
                _ if current == ROOT && self.mount_points.iter().any(|mount| mount == name) => return Ok(None),
                _ => self.index.lookup(current, name).ok_or(ENOENT)?,
            };
            let kind = self.kind(child);
            if kind == NodeKind::Symlink && (!component.last || follow_last || component.trailing_slash) {
                let target = || {
                    Ok(self
                        .index
                        .node(child)
                        .and_then(|node| node.entry)
                        .map_or_else(Vec::new, |entry| entry.data.to_vec()))
                };
                if walk.follow_link(&mut hops, target)? {
                    current = ROOT;
                }
                continue;
            }
            if component.trailing_slash && kind != NodeKind::Directory {
                return Err(ENOTDIR);
            }
            current = child;
        }
        Ok(Some(current))
    }
}
