//! The calls that make, remove and move names, with Linux's errors in Linux's order.
//!
//! Each takes a directory and a name as [`Vfs::resolve_parent`] gives them: the name may be
//! `.` or `..`, or end in one `/` meaning "must be a directory". Only tmpfs changes: the
//! initramfs answers `EROFS`, `/dev`, `/proc` and `/sys` `EPERM` (see [`Vfs::refusal`]). A
//! name that exists is reported (`EEXIST`) before a read-only file system is, as in Linux,
//! where the lookup comes first.

use crate::node::{Filesystem, NodeId, NodeKind};
use crate::tmpfs::NewContent;
use crate::vfs::{Context, Vfs};
use crate::{Errno, MAX_SYMLINK_HOPS, NAME_MAX, RENAME_EXCHANGE, RENAME_NOREPLACE};
use initramfs::mode;
use linux_raw_sys::errno::{
    EACCES, EADDRINUSE, EBUSY, EEXIST, EINVAL, EISDIR, ELOOP, ENAMETOOLONG, ENOENT, ENOTDIR, ENOTEMPTY, EPERM, EXDEV,
};

/// The last component of a path, as a namespace call reads it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Name<'a> {
    Dot,
    DotDot,
    Plain(&'a [u8]),
}

/// A name and whether a `/` followed it.
#[derive(Clone, Copy, Debug)]
struct LastName<'a> {
    name: Name<'a>,
    must_be_directory: bool,
}

/// Reads a name [`Vfs::resolve_parent`] gave (or a caller built): `ENOENT` if empty,
/// `EINVAL` if it holds a `/` before its trailing ones or a NUL, `ENAMETOOLONG` past
/// [`NAME_MAX`].
fn parse_name(name: &[u8]) -> Result<LastName<'_>, Errno> {
    let trimmed = name.iter().rposition(|&byte| byte != b'/').map_or(0, |last| last + 1);
    let must_be_directory = trimmed < name.len();
    let name = &name[..trimmed];
    if name.is_empty() {
        return Err(ENOENT);
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(EINVAL);
    }
    if name.len() > NAME_MAX {
        return Err(ENAMETOOLONG);
    }
    let name = match name {
        b"." => Name::Dot,
        b".." => Name::DotDot,
        plain => Name::Plain(plain),
    };
    Ok(LastName { name, must_be_directory })
}

impl Vfs {
    /// `directory`'s file system, after checking that it is a directory (`ENOTDIR`) that
    /// exists (`ENOENT`).
    fn directory_filesystem(&self, directory: NodeId) -> Result<Filesystem, Errno> {
        if !self.is_directory(directory)? {
            return Err(ENOTDIR);
        }
        directory.filesystem().ok_or(ENOENT)
    }

    /// `Ok` for tmpfs, the refusal of any other file system.
    fn writable(filesystem: Filesystem) -> Result<(), Errno> {
        match filesystem {
            Filesystem::Tmpfs | Filesystem::Host(_) => Ok(()),
            other => Err(Self::refusal(other)),
        }
    }

    /// Opens or makes the regular file `name` in `directory` (`openat` with `O_CREAT`;
    /// `permissions` with the umask applied): the node and whether it was made. An existing
    /// file is returned as it is, unless `exclusive` (`O_EXCL`), which makes any existing
    /// name `EEXIST`. A symbolic link there is followed, and a dangling one makes its target,
    /// as Linux does; `EISDIR` for a directory or a name ending in `/`; `ENOENT` in a removed
    /// directory; a new name in `/sys` is `EACCES`, as on Linux.
    pub fn create(
        &mut self,
        context: &Context,
        directory: NodeId,
        name: &[u8],
        permissions: u32,
        exclusive: bool,
    ) -> Result<(NodeId, bool), Errno> {
        let mut directory = directory;
        let mut name = name.to_vec();
        let mut hops = 0;
        loop {
            let last = parse_name(&name)?;
            let filesystem = self.directory_filesystem(directory)?;
            let Name::Plain(plain) = last.name else { return Err(EISDIR) };
            if last.must_be_directory {
                return Err(EISDIR);
            }
            let Some(existing) = self.find(context.pid, directory, plain)? else {
                if filesystem == Filesystem::Sysfs {
                    // Linux's sysfs directories have no `create`: `lookup_open` says EACCES.
                    return Err(EACCES);
                }
                Self::writable(filesystem)?;
                // Write and search permission in the directory, after `EROFS` as Linux.
                if !context.credentials.is_root() {
                    context.credentials.may_create_in(&self.stat(directory)?)?;
                }
                let now = self.now();
                let mode = mode::REGULAR | permissions & 0o7777;
                if let Filesystem::Host(share) = filesystem {
                    let inode = self.share(share)?.create(directory.inode(), plain, mode, now)?;
                    return Ok((NodeId::new(filesystem, inode), true));
                }
                let inode = self.tmpfs.add(directory.inode(), plain, mode, NewContent::Regular, now)?;
                return Ok((NodeId::new(Filesystem::Tmpfs, inode), true));
            };
            if exclusive {
                return Err(EEXIST);
            }
            match self.kind(existing)? {
                NodeKind::Directory => return Err(EISDIR),
                NodeKind::Symlink => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(ELOOP);
                    }
                    let target = self.read_link(existing)?;
                    (directory, name) = self.resolve_parent(context, Some(directory), &target)?;
                }
                _ => return Ok((existing, false)),
            }
        }
    }

    /// Makes the directory `name` in `directory` (`mkdirat`). `EEXIST` for any existing
    /// name, `.` and `..` included.
    pub fn make_directory(&mut self, directory: NodeId, name: &[u8], permissions: u32) -> Result<NodeId, Errno> {
        let last = parse_name(name)?;
        let filesystem = self.directory_filesystem(directory)?;
        let Name::Plain(plain) = last.name else { return Err(EEXIST) };
        if self.find(0, directory, plain)?.is_some() {
            return Err(EEXIST);
        }
        Self::writable(filesystem)?;
        let now = self.now();
        if let Filesystem::Host(share) = filesystem {
            let inode = self.share(share)?.make_directory(directory.inode(), plain, permissions, now)?;
            return Ok(NodeId::new(filesystem, inode));
        }
        let mode = mode::DIRECTORY | permissions & 0o7777;
        let inode = self.tmpfs.add(directory.inode(), plain, mode, NewContent::Directory, now)?;
        Ok(NodeId::new(Filesystem::Tmpfs, inode))
    }

    /// Makes the node `name` in `directory` with `mode`'s type and permissions (`mknodat`;
    /// the umask already applied): a FIFO (`S_IFIFO`) or an empty regular file (`S_IFREG`,
    /// or no type bits, as Linux reads them). Linux's checks in its order (`may_mknod`, then
    /// `vfs_mknod`): `EPERM` for a directory (`mkdir` makes those), `EINVAL` for bits that
    /// name no type, `EEXIST` for an existing name. Device nodes (`S_IFCHR`, `S_IFBLK`) are
    /// `EPERM`, Linux's answer without `CAP_MKNOD`: Reef's devices are the fixed set of
    /// `/dev`, and a node elsewhere would name nothing a driver serves. Sockets are `EPERM`
    /// too (Linux makes the node): Reef has no sockets for one to name.
    pub fn make_node(&mut self, directory: NodeId, name: &[u8], mode: u32) -> Result<NodeId, Errno> {
        let content = match mode & mode::TYPE_MASK {
            0 | mode::REGULAR => NewContent::Regular,
            mode::FIFO => NewContent::Fifo,
            mode::DIRECTORY | mode::CHARACTER_DEVICE | mode::BLOCK_DEVICE | mode::SOCKET => return Err(EPERM),
            _ => return Err(EINVAL),
        };
        self.make_typed_node(directory, name, mode, content)
    }

    /// `bind` of an `AF_UNIX` socket to a path: a socket node in tmpfs (`EADDRINUSE` where a
    /// name is already, as Linux says for a socket's address; `EPERM` outside tmpfs).
    pub fn make_socket_node(&mut self, directory: NodeId, name: &[u8], mode: u32) -> Result<NodeId, Errno> {
        if matches!(self.directory_filesystem(directory)?, Filesystem::Host(_)) {
            return Err(EPERM);
        }
        match self.make_typed_node(directory, name, mode::SOCKET | (mode & 0o7777), NewContent::Socket) {
            Err(EEXIST) => Err(EADDRINUSE),
            other => other,
        }
    }

    fn make_typed_node(
        &mut self,
        directory: NodeId,
        name: &[u8],
        mode: u32,
        content: NewContent,
    ) -> Result<NodeId, Errno> {
        let type_bits = match content {
            NewContent::Fifo => mode::FIFO,
            NewContent::Socket => mode::SOCKET,
            _ => mode::REGULAR,
        };
        let last = parse_name(name)?;
        let filesystem = self.directory_filesystem(directory)?;
        let plain = self.new_name(directory, last)?;
        Self::writable(filesystem)?;
        let now = self.now();
        if let Filesystem::Host(share) = filesystem {
            let inode = self.share(share)?.make_node(directory.inode(), plain, type_bits | mode & 0o7777, now)?;
            return Ok(NodeId::new(filesystem, inode));
        }
        let inode = self.tmpfs.add(directory.inode(), plain, type_bits | mode & 0o7777, content, now)?;
        Ok(NodeId::new(Filesystem::Tmpfs, inode))
    }

    /// Makes the symbolic link `name` in `directory`, pointing at `target` (`symlinkat`);
    /// the target is not checked, only kept. `ENOENT` for an empty target, `ENAMETOOLONG`
    /// for one of [`PATH_MAX`](crate::PATH_MAX) bytes or more, `EEXIST` for an existing name.
    pub fn symlink(&mut self, target: &[u8], directory: NodeId, name: &[u8]) -> Result<NodeId, Errno> {
        crate::path::check_path(target)?;
        let last = parse_name(name)?;
        let filesystem = self.directory_filesystem(directory)?;
        let plain = self.new_name(directory, last)?;
        Self::writable(filesystem)?;
        let now = self.now();
        if let Filesystem::Host(share) = filesystem {
            let inode = self.share(share)?.symlink(target, directory.inode(), plain, now)?;
            return Ok(NodeId::new(filesystem, inode));
        }
        let content = NewContent::Symlink(target.to_vec());
        let inode = self.tmpfs.add(directory.inode(), plain, mode::SYMLINK | 0o777, content, now)?;
        Ok(NodeId::new(Filesystem::Tmpfs, inode))
    }

    /// The name a `link` or `symlink` is to make: `EEXIST` when it exists (`.` and `..`
    /// always do), `ENOENT` for a missing one ending in `/` (only directories end so).
    fn new_name<'a>(&self, directory: NodeId, last: LastName<'a>) -> Result<&'a [u8], Errno> {
        let Name::Plain(plain) = last.name else { return Err(EEXIST) };
        if self.find(0, directory, plain)?.is_some() {
            return Err(EEXIST);
        }
        if last.must_be_directory {
            return Err(ENOENT);
        }
        Ok(plain)
    }

    /// Gives the file `node` the further name `name` in `directory` (`linkat`). `EEXIST`
    /// for an existing name, `EXDEV` across mounts, `EPERM` for a directory, `ENOENT` for a
    /// file already unlinked.
    pub fn link(&mut self, node: NodeId, directory: NodeId, name: &[u8]) -> Result<(), Errno> {
        let kind = self.kind(node)?;
        let last = parse_name(name)?;
        let filesystem = self.directory_filesystem(directory)?;
        let plain = self.new_name(directory, last)?;
        if node.filesystem() != Some(filesystem) {
            return Err(EXDEV);
        }
        if kind == NodeKind::Directory {
            return Err(EPERM);
        }
        Self::writable(filesystem)?;
        let now = self.now();
        if let Filesystem::Host(share) = filesystem {
            return self.share(share)?.link(node.inode(), directory.inode(), plain, now);
        }
        self.tmpfs.link(node.inode(), directory.inode(), plain, now)
    }

    /// Removes the name `name` of a non-directory in `directory` (`unlinkat` without
    /// `AT_REMOVEDIR`); the node is freed once no name and no open reference is left.
    /// `EISDIR` for a directory, `.` and `..`; `ENOTDIR` for a file named with a trailing
    /// `/`.
    pub fn unlink(&mut self, directory: NodeId, name: &[u8]) -> Result<(), Errno> {
        let last = parse_name(name)?;
        let filesystem = self.directory_filesystem(directory)?;
        let Name::Plain(plain) = last.name else { return Err(EISDIR) };
        if self.mount_at(directory, plain).is_some() {
            return Err(EISDIR);
        }
        Self::writable(filesystem)?;
        let now = self.now();
        if let Filesystem::Host(share) = filesystem {
            if last.must_be_directory {
                // Only a directory ends in `/`, and this call never removes one.
                let found = self.find(0, directory, plain)?.ok_or(ENOENT)?;
                return Err(if self.is_directory(found)? { EISDIR } else { ENOTDIR });
            }
            let removed = self.find(0, directory, plain)?;
            self.share(share)?.remove(directory.inode(), plain, false, now)?;
            if let Some(removed) = removed {
                self.free_if_unused(removed);
            }
            return Ok(());
        }
        let inode = self.tmpfs.unlink(directory.inode(), plain, last.must_be_directory, now)?;
        self.free_if_unused(NodeId::new(Filesystem::Tmpfs, inode));
        Ok(())
    }

    /// Removes the empty directory `name` of `directory` (`unlinkat` with `AT_REMOVEDIR`).
    /// `EINVAL` for `.`, `ENOTEMPTY` for `..` and a directory with entries, `EBUSY` for a
    /// mount point (before `EROFS`, though the mount points are in the read-only root),
    /// `ENOTDIR` for a non-directory. A removed directory still open lists nothing and takes
    /// no new names.
    pub fn remove_directory(&mut self, directory: NodeId, name: &[u8]) -> Result<(), Errno> {
        let last = parse_name(name)?;
        let filesystem = self.directory_filesystem(directory)?;
        let plain = match last.name {
            Name::Dot => return Err(EINVAL),
            Name::DotDot => return Err(ENOTEMPTY),
            Name::Plain(plain) => plain,
        };
        if self.mount_at(directory, plain).is_some() {
            return Err(EBUSY);
        }
        Self::writable(filesystem)?;
        let now = self.now();
        if let Filesystem::Host(share) = filesystem {
            let removed = self.find(0, directory, plain)?;
            self.share(share)?.remove(directory.inode(), plain, true, now)?;
            if let Some(removed) = removed {
                self.free_if_unused(removed);
            }
            return Ok(());
        }
        let inode = self.tmpfs.remove_directory(directory.inode(), plain, now)?;
        self.free_if_unused(NodeId::new(Filesystem::Tmpfs, inode));
        Ok(())
    }

    /// Moves the name `from_name` of `from_directory` to `to_name` of `to_directory`
    /// (`renameat2`), replacing what was there, with `flags` [`RENAME_NOREPLACE`] (`EEXIST`
    /// instead of replacing) or [`RENAME_EXCHANGE`] (swap two existing names). Linux's rules:
    /// `EXDEV` across mounts; `EBUSY` for `.`, `..` and mount points; `EINVAL` for a
    /// directory moved into its own subtree or unknown flags; a directory may replace an
    /// empty directory (`ENOTEMPTY` otherwise) and a non-directory a non-directory; a file
    /// over a directory is `EISDIR`, a directory over a file `ENOTDIR`. Renaming a name onto
    /// another name of the same node does nothing. A replaced node is freed once no name and
    /// no open reference is left.
    pub fn rename(
        &mut self,
        from_directory: NodeId,
        from_name: &[u8],
        to_directory: NodeId,
        to_name: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        let both = RENAME_NOREPLACE | RENAME_EXCHANGE;
        if flags & !both != 0 || flags == both {
            return Err(EINVAL);
        }
        let from = parse_name(from_name)?;
        let to = parse_name(to_name)?;
        let from_filesystem = self.directory_filesystem(from_directory)?;
        let to_filesystem = self.directory_filesystem(to_directory)?;
        if from_filesystem != to_filesystem {
            return Err(EXDEV);
        }
        let (Name::Plain(from_plain), Name::Plain(to_plain)) = (from.name, to.name) else { return Err(EBUSY) };
        if self.mount_at(from_directory, from_plain).is_some() || self.mount_at(to_directory, to_plain).is_some() {
            return Err(EBUSY);
        }
        Self::writable(from_filesystem)?;
        let now = self.now();
        if let Filesystem::Host(share) = from_filesystem {
            let (from_inode, to_inode) = (from_directory.inode(), to_directory.inode());
            return self.share(share)?.rename(from_inode, from_plain, to_inode, to_plain, flags, now);
        }
        let slashes = (from.must_be_directory, to.must_be_directory);
        let (from_inode, to_inode) = (from_directory.inode(), to_directory.inode());
        let replaced = self.tmpfs.rename(from_inode, from_plain, to_inode, to_plain, flags, slashes, now)?;
        if let Some(replaced) = replaced {
            self.free_if_unused(NodeId::new(Filesystem::Tmpfs, replaced));
        }
        Ok(())
    }

    /// The node `name` of `directory`, for a caller that has a directory and a name (one
    /// component: `..` and `.` work, links in it are not followed). `ENOENT` if there is
    /// none.
    pub fn lookup(&self, context: &Context, directory: NodeId, name: &[u8]) -> Result<NodeId, Errno> {
        let last = parse_name(name)?;
        if !self.is_directory(directory)? {
            return Err(ENOTDIR);
        }
        let node = match last.name {
            Name::Dot => directory,
            Name::DotDot => self.parent(directory)?,
            Name::Plain(plain) => self.find(context.pid, directory, plain)?.ok_or(ENOENT)?,
        };
        if last.must_be_directory && !self.is_directory(node)? {
            return Err(ENOTDIR);
        }
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_as_linux_reads_the_last_component() {
        let plain = |name: &'static [u8], must_be_directory| Ok((Name::Plain(name), must_be_directory));
        fn read(name: &[u8]) -> Result<(Name<'_>, bool), Errno> {
            parse_name(name).map(|last| (last.name, last.must_be_directory))
        }
        assert_eq!(read(b"a"), plain(b"a", false));
        assert_eq!(read(b"a//"), plain(b"a", true));
        assert_eq!(read(b"./"), Ok((Name::Dot, true)));
        assert_eq!(read(b".."), Ok((Name::DotDot, false)));
        assert_eq!(read(b""), Err(ENOENT));
        assert_eq!(read(b"/"), Err(ENOENT));
        assert_eq!(read(b"a/b"), Err(EINVAL));
        assert_eq!(read(b"a\0"), Err(EINVAL));
        assert_eq!(read(&[b'n'; NAME_MAX]).map(|(_, slash)| slash), Ok(false));
        assert_eq!(read(&[b'n'; NAME_MAX + 1]), Err(ENAMETOOLONG));
    }
}
