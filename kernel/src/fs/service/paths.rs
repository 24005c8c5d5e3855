//! Operations on names: `stat` of a path, making and removing directories, links and nodes,
//! renaming, times and modes, `access`, a directory's path, and a file system's space.

use super::open_files::descriptor_link;
use super::request::{At, Target};
use super::{Errno, Outcome, Reply, Service};
use abi::file::{Metadata, CONSOLE_HANDLE};
use linux_raw_sys::errno;
use vfs::NodeId;

/// A reply of `metadata` in the bytes.
fn metadata_reply(metadata: Metadata) -> Outcome {
    Outcome::Done(Reply { bytes: metadata.encode().to_vec(), ..Reply::value(0, 0) })
}

/// The reply of an operation that gives nothing back.
fn done() -> Result<Outcome, Errno> {
    Ok(Outcome::Done(Reply::value(0, 0)))
}

impl Service {
    /// `stat` of `path`. A descriptor link, followed, gives what the descriptor has open
    /// (`stat` of `/dev/fd/63` is the pipe's, as bash's `<(…)` needs).
    pub(super) fn stat_path(&self, pid: u32, at: At, follow: bool, path: &[u8]) -> Result<Outcome, Errno> {
        let context = self.context(pid, at.working_directory, at.root)?;
        let followed = descriptor_link(pid, path).filter(|_| follow);
        let handle = followed.map(|(owner, fd)| crate::fs::proc::descriptor_handle(owner, fd).ok_or(errno::ENOENT));
        let metadata = match handle {
            Some(Ok(handle)) if handle == CONSOLE_HANDLE => {
                let console = self.vfs.resolve(&context, None, b"/dev/console", true)?;
                self.metadata(console)?
            }
            Some(Ok(handle)) => self.stat_handle(handle)?,
            Some(Err(error)) => return Err(error),
            None => self.metadata(self.vfs.resolve(&context, self.base(at.directory)?, path, follow)?)?,
        };
        Ok(metadata_reply(metadata))
    }

    pub(super) fn make_directory(&mut self, pid: u32, at: At, mode: u32, path: &[u8]) -> Result<Outcome, Errno> {
        let context = self.context(pid, at.working_directory, at.root)?;
        let (directory, name) = self.vfs.resolve_parent(&context, self.base(at.directory)?, path)?;
        self.check_create(&context, directory, &name)?;
        let node = self.vfs.make_directory(directory, &name, mode)?;
        self.give_to_maker(directory, node)?;
        done()
    }

    pub(super) fn unlink(&mut self, pid: u32, at: At, remove_directory: bool, path: &[u8]) -> Result<Outcome, Errno> {
        let context = self.context(pid, at.working_directory, at.root)?;
        let (directory, name) = self.vfs.resolve_parent(&context, self.base(at.directory)?, path)?;
        self.check_delete(&context, directory, &name)?;
        if remove_directory {
            self.vfs.remove_directory(directory, &name)?;
        } else {
            self.vfs.unlink(directory, &name)?;
        }
        done()
    }

    /// `renameat2` of `from_path` (from directory `from`) to `to_path` (from `to`).
    pub(super) fn rename(
        &mut self,
        pid: u32,
        (from, from_path): (Option<u64>, &[u8]),
        (to, to_path): (Option<u64>, &[u8]),
        (working_directory, root): (Option<u64>, Option<u64>),
        rename_flags: u32,
    ) -> Result<Outcome, Errno> {
        let context = self.context(pid, working_directory, root)?;
        let (from, from_name) = self.vfs.resolve_parent(&context, self.base(from)?, from_path)?;
        let (to, to_name) = self.vfs.resolve_parent(&context, self.base(to)?, to_path)?;
        self.check_delete(&context, from, &from_name)?;
        self.check_create(&context, to, &to_name)?;
        self.check_delete(&context, to, &to_name)?;
        // A directory moved to another parent has its `..` rewritten: it must be writable.
        if from != to && !self.credentials().is_root() {
            if let Ok(moved) = self.vfs.lookup(&context, from, &from_name) {
                if self.vfs.kind(moved)? == vfs::NodeKind::Directory && !self.vfs.is_read_only(moved) {
                    self.credentials().check(&self.vfs.stat(moved)?, vfs::permission::WRITE)?;
                }
            }
        }
        self.vfs.rename(from, &from_name, to, &to_name, rename_flags)?;
        done()
    }

    /// `linkat`: a new name `to_path` (from `to`) for what `from_path` (from `from`) names.
    pub(super) fn link(
        &mut self,
        pid: u32,
        (from, from_path): (Option<u64>, &[u8]),
        (to, to_path): (Option<u64>, &[u8]),
        (working_directory, root): (Option<u64>, Option<u64>),
        follow: bool,
    ) -> Result<Outcome, Errno> {
        let context = self.context(pid, working_directory, root)?;
        let node = self.vfs.resolve(&context, self.base(from)?, from_path, follow)?;
        let (to, to_name) = self.vfs.resolve_parent(&context, self.base(to)?, to_path)?;
        self.check_create(&context, to, &to_name)?;
        self.vfs.link(node, to, &to_name)?;
        done()
    }

    pub(super) fn symlink(&mut self, pid: u32, at: At, target: &[u8], path: &[u8]) -> Result<Outcome, Errno> {
        let context = self.context(pid, at.working_directory, at.root)?;
        let (directory, name) = self.vfs.resolve_parent(&context, self.base(at.directory)?, path)?;
        self.check_create(&context, directory, &name)?;
        let node = self.vfs.symlink(target, directory, &name)?;
        self.give_to_maker(directory, node)?;
        done()
    }

    pub(super) fn read_link(&self, pid: u32, at: At, path: &[u8]) -> Result<Outcome, Errno> {
        let context = self.context(pid, at.working_directory, at.root)?;
        let node = self.vfs.resolve(&context, self.base(at.directory)?, path, false)?;
        let target = self.vfs.read_link(node)?;
        Ok(Outcome::Done(Reply { bytes: target, ..Reply::value(0, 0) }))
    }

    /// The node `target` names: an open file's (which must have one), or a path's.
    fn target_node(&self, pid: u32, target: &Target<'_>) -> Result<NodeId, Errno> {
        match target {
            Target::Handle(handle) => self.node_of(*handle)?.ok_or(errno::EINVAL),
            Target::Path { at, path, follow } => {
                let context = self.context(pid, at.working_directory, at.root)?;
                self.vfs.resolve(&context, self.base(at.directory)?, path, *follow)
            }
        }
    }

    /// `utimensat`: `None` leaves that time as it is; `explicit` when a time was given
    /// rather than "now", which only the owner (or root) may set.
    pub(super) fn set_times(
        &mut self,
        pid: u32,
        target: &Target<'_>,
        (accessed_ns, modified_ns): (Option<u64>, Option<u64>),
        explicit: bool,
    ) -> Result<Outcome, Errno> {
        let node = self.target_node(pid, target)?;
        if !self.vfs.is_read_only(node) {
            self.credentials().may_set_times(&self.vfs.stat(node)?, explicit)?;
        }
        self.vfs.set_times(node, accessed_ns, modified_ns)?;
        done()
    }

    /// `chmod`: the owner's or root's (`EPERM`); a non-root caller outside the file's group
    /// loses the set-group-id bit it asked for.
    pub(super) fn change_mode(&mut self, pid: u32, target: &Target<'_>, mode: u32) -> Result<Outcome, Errno> {
        let node = self.target_node(pid, target)?;
        let mode = if self.vfs.is_read_only(node) {
            mode
        } else {
            self.credentials().change_mode(&self.vfs.stat(node)?, mode)?
        };
        self.vfs.set_mode(node, mode)?;
        done()
    }

    /// `chown`: root gives any owner and group; another caller, on its own file, only the
    /// no-op and a group of its own (`EPERM`). `None` leaves an id as it is.
    pub(super) fn change_owner(
        &mut self,
        pid: u32,
        target: &Target<'_>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> Result<Outcome, Errno> {
        let node = self.target_node(pid, target)?;
        self.credentials().may_change_owner(&self.vfs.stat(node)?, uid, gid)?;
        self.vfs.set_owner(node, uid, gid)?;
        done()
    }

    /// `faccessat` of `mode` with the ids the request came with: `W_OK` on a read-only file
    /// system is `EROFS` first; root reads and writes anything and executes what has an
    /// execute bit (directories are searched) [access(2)].
    pub(super) fn access(&self, pid: u32, target: &Target<'_>, mode: u64) -> Result<Outcome, Errno> {
        const WRITE: u64 = 2;
        let node = self.target_node(pid, target)?;
        if mode & WRITE != 0 {
            self.vfs.check_writable(node)?;
        }
        self.check_access(node, mode)?;
        done()
    }

    /// Gives `node`, just made in `directory`, its maker's owner and group (the directory's
    /// group when it is set-group-id, and a new directory there is set-group-id too).
    pub(super) fn give_to_maker(&mut self, directory: NodeId, node: NodeId) -> Result<(), Errno> {
        let (uid, gid, inherit) = self.credentials().new_owner(&self.vfs.stat(directory)?);
        if (uid, gid) != (0, 0) {
            self.vfs.set_new_owner(node, uid, gid)?;
        }
        if inherit && self.vfs.kind(node)? == vfs::NodeKind::Directory {
            let permissions = self.vfs.stat(node)?.mode & 0o7777;
            self.vfs.set_mode(node, permissions | 0o2000)?;
        }
        Ok(())
    }

    /// `mknodat` of a FIFO or a regular file: `mode` is its type and permissions.
    pub(super) fn make_node(&mut self, pid: u32, at: At, mode: u32, path: &[u8]) -> Result<Outcome, Errno> {
        let context = self.context(pid, at.working_directory, at.root)?;
        let (directory, name) = self.vfs.resolve_parent(&context, self.base(at.directory)?, path)?;
        self.check_create(&context, directory, &name)?;
        let node = self.vfs.make_node(directory, &name, mode)?;
        self.give_to_maker(directory, node)?;
        done()
    }

    /// The path of an open directory (`getcwd`), as a caller whose root is `root` sees it.
    pub(super) fn path_of(&self, handle: u64, root: Option<u64>) -> Result<Outcome, Errno> {
        let node = self.directory_node(handle)?;
        let root = root.map_or(Ok(self.vfs.root()), |root| self.directory_node(root))?;
        let path = self.vfs.seen_from(root, self.vfs.path_of(node)?)?;
        Ok(Outcome::Done(Reply { bytes: path, ..Reply::value(0, 0) }))
    }

    /// `statfs` of the file system whose `st_dev` is `device`: its magic, whether read-only,
    /// its pages and nodes, and how many of each are free.
    pub(super) fn filesystem_space(&self, device: u64) -> Result<Outcome, Errno> {
        let space = self.vfs.space(device)?;
        let fields =
            [space.magic, u64::from(space.read_only), space.pages, space.free_pages, space.nodes, space.free_nodes];
        let bytes = fields.iter().flat_map(|field| field.to_le_bytes()).collect();
        Ok(Outcome::Done(Reply { bytes, ..Reply::value(0, 0) }))
    }
}
