//! The mode and owner checks of requests from non-root callers, in Linux's order: what the
//! VFS refuses whoever asks (a name that exists, a read-only mount) is left to it, so a
//! caller gets the error Linux gives first (`EEXIST`, `EROFS`), and `EACCES` or `EPERM` after.
//! The rules themselves are `vfs::permission`'s; the caller's ids came with the request.

use super::{Errno, Service};
use vfs::permission::{EXECUTE, READ, WRITE};
use vfs::{Context, NodeId, NodeKind};

impl Service {
    /// Before a new name `name` is made in `directory` (`mkdir`, `mknod`, `symlink`, `link`,
    /// the target of a `rename`): write and search permission there (Linux's `may_create`).
    pub(super) fn check_create(&self, context: &Context, directory: NodeId, name: &[u8]) -> Result<(), Errno> {
        let credentials = self.credentials();
        if credentials.is_root()
            || self.vfs.is_read_only(directory)
            || self.vfs.lookup(context, directory, name).is_ok()
        {
            return Ok(());
        }
        credentials.may_create_in(&self.vfs.stat(directory)?)
    }

    /// Before the name `name` of `directory` is removed (`unlink`, `rmdir`, the source of a
    /// `rename`): write and search permission there, and the sticky rule (Linux's
    /// `may_delete`). A name that is not there is left to the VFS (`ENOENT`).
    pub(super) fn check_delete(&self, context: &Context, directory: NodeId, name: &[u8]) -> Result<(), Errno> {
        let credentials = self.credentials();
        if credentials.is_root() || self.vfs.is_read_only(directory) {
            return Ok(());
        }
        let Ok(victim) = self.vfs.lookup(context, directory, name) else { return Ok(()) };
        credentials.may_delete(&self.vfs.stat(directory)?, &self.vfs.stat(victim)?)
    }

    /// Before an existing `node` is opened with Linux open flags `open_flags`: read permission
    /// for `O_RDONLY` and `O_RDWR`, write permission for `O_WRONLY`, `O_RDWR` and `O_TRUNC`
    /// (Linux's `may_open`). A directory opened for writing is `EISDIR`, a file of the
    /// initramfs `EROFS`, before any permission check, as on Linux.
    pub(super) fn check_open(&self, node: NodeId, open_flags: u64) -> Result<(), Errno> {
        use super::request::flags;
        let credentials = self.credentials();
        if credentials.is_root() {
            return Ok(());
        }
        let access = open_flags & flags::ACCESS_MODE;
        let wants_write = access == flags::WRITE_ONLY || access == flags::READ_WRITE;
        let kind = self.vfs.kind(node)?;
        match kind {
            NodeKind::Directory if wants_write => return Err(linux_raw_sys::errno::EISDIR),
            NodeKind::Regular if wants_write => self.vfs.check_writable(node)?,
            // Followed or refused (`ELOOP`) by the open itself.
            NodeKind::Symlink => return Ok(()),
            _ => {}
        }
        let mut want = 0;
        if access != flags::WRITE_ONLY {
            want |= READ;
        }
        if wants_write || open_flags & flags::TRUNCATE != 0 {
            want |= WRITE;
        }
        credentials.check(&self.vfs.stat(node)?, want)
    }

    /// `faccessat`'s check of `mode` (`R_OK` 4, `W_OK` 2, `X_OK` 1) on `node`, with the ids the
    /// request came with (the real ones, unless `AT_EACCESS`).
    pub(super) fn check_access(&self, node: NodeId, mode: u64) -> Result<(), Errno> {
        self.credentials().check(&self.vfs.stat(node)?, mode as u32 & (READ | WRITE | EXECUTE))
    }
}
