//! The VFS itself: the mount table, and what each node is, holds and says about itself.

use crate::archive_index::{ArchiveIndex, IndexNode, ROOT as ARCHIVE_ROOT};
use crate::devfs::{self, Devfs, DeviceNode};
use crate::hostfs::{self, Share};
use crate::node::{
    device_number, kind_code_of_mode, Counts, DirectoryEntry, Filesystem, Metadata, NodeId, NodeKind, Space,
    CHARACTER_DEVICE_CODE, DIRECTORY_CODE, PROC_SUPER_MAGIC, RAMFS_MAGIC, REGULAR_CODE, SYMLINK_CODE, SYSFS_MAGIC,
    TMPFS_MAGIC,
};
use crate::pages::{CountedPages, PageStore, PAGE_SIZE};
use crate::permission::{self, Credentials};
use crate::procfs::{self, ProcFile, ProcNode, ProcSource};
use crate::sysfs::{self, SysNode, SysRequest, SysSource};
use crate::tmpfs::{self, Content, TmpNode, Tmpfs};
use crate::Errno;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use initramfs::{mode, Archive};
use linux_raw_sys::errno::{EACCES, EBADF, EBUSY, EINVAL, EISDIR, ENOENT, ENOSPC, ENOTDIR, EPERM, EROFS};

/// Who asks, and from where: what a path lookup needs beyond the path.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Context {
    /// The calling process, whose pid `/proc/self` links to.
    pub pid: u32,
    /// Where relative paths start ([`Vfs::root`] for a process that never changed it).
    pub cwd: NodeId,
    /// Where absolute paths start, and above which `..` does not climb: [`Vfs::root`], or the
    /// directory the process `chroot`ed to.
    pub root: NodeId,
    /// The caller's ids: a lookup needs search permission on every directory it passes.
    pub credentials: Credentials,
}

/// One entry of the mount table. Every mount point is a name in the root directory: the
/// mounts exist whether or not the archive has a directory there, and hide it if it has.
pub(crate) struct Mount {
    pub filesystem: Filesystem,
    /// Where it is mounted.
    pub path: &'static str,
    /// The first field of `/proc/mounts`: what is mounted.
    source: &'static str,
    /// The file system type, as Linux names its counterpart.
    type_name: &'static str,
    options: &'static str,
}

/// The mount table: `/` first, in [`Filesystem`] order.
pub(crate) const MOUNTS: [Mount; 5] = [
    Mount { filesystem: Filesystem::Archive, path: "/", source: "rootfs", type_name: "rootfs", options: "ro" },
    // Reads do not update access times anywhere (`read` takes `&self`): `noatime` says so.
    Mount { filesystem: Filesystem::Tmpfs, path: "/tmp", source: "tmpfs", type_name: "tmpfs", options: "rw,noatime" },
    Mount {
        filesystem: Filesystem::Devfs,
        path: "/dev",
        source: "devtmpfs",
        type_name: "devtmpfs",
        options: "rw,noatime",
    },
    Mount { filesystem: Filesystem::Procfs, path: "/proc", source: "proc", type_name: "proc", options: "rw,noatime" },
    Mount { filesystem: Filesystem::Sysfs, path: "/sys", source: "sysfs", type_name: "sysfs", options: "rw,noatime" },
];

impl Mount {
    /// The mount point's name in the root directory (`tmp`).
    pub fn name(&self) -> &'static [u8] {
        &self.path.as_bytes()[1..]
    }

    pub fn root(&self) -> NodeId {
        NodeId::new(self.filesystem, ROOT_INODE)
    }
}

// The service keeps the VFS behind a lock in a static, which needs it to be `Send`.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Vfs>();
    assert_send::<crate::PipeBuffer>();
};

/// The inode number of every file system's root (the archive's root is index 0, inode 1).
const ROOT_INODE: u64 = 1;

/// The first listing cursor after `.` and `..`.
const FIRST_ENTRY: u64 = 2;

/// A node, found: what each file system keeps of it.
pub(crate) enum Found<'a> {
    Archive(u32, &'a IndexNode),
    Tmpfs(u64, &'a TmpNode),
    /// The root of `/dev` (`None`) or a device.
    Devfs(Option<&'static DeviceNode>),
    Procfs(ProcNode),
    Sysfs(SysNode),
    /// A node of share number `.0`, inode `.1` there.
    Host(u8, u64),
}

/// The file tree Reef's file service serves: the initramfs at `/` (read-only), a tmpfs at
/// `/tmp`, the devices at `/dev`, the processes at `/proc`, the cores at `/sys`. It knows
/// nothing of descriptors, processes or devices' I/O: the service keeps those and calls it
/// with [`NodeId`]s.
pub struct Vfs {
    archive: ArchiveIndex,
    pub(crate) tmpfs: Tmpfs,
    pub(crate) pages: CountedPages,
    devfs: Devfs,
    proc: Box<dyn ProcSource>,
    /// Shared with whoever carries out a [`SysRequest`] once the lock on the VFS is let go.
    sys: Arc<dyn SysSource>,
    clock: fn() -> u64,
    /// When the VFS was made: the times of `/proc` and `/sys`, which have no others to give.
    made_at: u64,
    /// Nodes held open, with how many times each.
    open: BTreeMap<NodeId, usize>,
    /// Host directories mounted over 9P, by [`Filesystem::Host`] index.
    shares: Vec<Share>,
}

impl Vfs {
    /// A VFS over `archive` (the initramfs, indexed now; `None` gives an empty `/`), whose
    /// tmpfs takes at most `tmpfs_page_limit` pages from `pages`, whose clock gives the real
    /// time in nanoseconds since 1970, whose `/proc` shows what `proc` says and whose `/sys`
    /// the cores `sys` lists.
    pub fn new(
        archive: Option<Archive<'static>>,
        pages: Box<dyn PageStore>,
        tmpfs_page_limit: usize,
        clock: fn() -> u64,
        proc: Box<dyn ProcSource>,
        sys: Arc<dyn SysSource>,
    ) -> Self {
        let now = clock();
        Self {
            archive: ArchiveIndex::new(archive),
            tmpfs: Tmpfs::new(now),
            pages: CountedPages { store: pages, used: 0, limit: tmpfs_page_limit },
            devfs: Devfs::new(now),
            proc,
            sys,
            clock,
            made_at: now,
            open: BTreeMap::new(),
            shares: Vec::new(),
        }
    }

    /// Mounts the host directory a 9P server shares through `transport` at `mount_point`,
    /// a name in the root (`/host`), with mount tag `tag`: connects (version, attach as
    /// root) now, with messages of at most `message_size` bytes (what the transport
    /// carries) and at most [`SHARE_MESSAGE_SIZE`](crate::SHARE_MESSAGE_SIZE). `EINVAL` for a mount point that is not one name under `/`, `EBUSY` for
    /// one already mounted, `ENOSPC` past 250 shares; the server's error if it refuses.
    pub fn mount_share(
        &mut self,
        mount_point: &[u8],
        tag: &[u8],
        transport: Box<dyn ninep::Transport + Send>,
        message_size: u32,
    ) -> Result<(), Errno> {
        let name = mount_point.strip_prefix(b"/").ok_or(EINVAL)?;
        if name.is_empty() || name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
            return Err(EINVAL);
        }
        if self.mount_at(self.root(), name).is_some() {
            return Err(EBUSY);
        }
        let index = u8::try_from(self.shares.len()).ok().filter(|&index| index < 250).ok_or(ENOSPC)?;
        let share = Share::connect(name, tag, transport, message_size, 0)?;
        self.shares.push(share);
        debug_assert_eq!(usize::from(index) + 1, self.shares.len());
        Ok(())
    }

    /// The share of index `share`.
    pub(crate) fn share(&self, share: u8) -> Result<&Share, Errno> {
        self.shares.get(usize::from(share)).ok_or(ENOENT)
    }

    /// What each mounted share's cache and client hold, by mount point.
    pub fn share_counts(&self) -> Vec<(Vec<u8>, hostfs::ShareCounts)> {
        self.shares.iter().map(|share| (share.name.clone(), share.counts())).collect()
    }

    /// `/`.
    pub fn root(&self) -> NodeId {
        MOUNTS[0].root()
    }

    pub(crate) fn now(&self) -> u64 {
        (self.clock)()
    }

    /// The store tmpfs takes its pages from, for the pipes' [`PipeBuffer`](crate::PipeBuffer)s,
    /// so that files and pipes draw on the same memory. Pipe pages do not count against the
    /// tmpfs limit.
    pub fn page_store(&mut self) -> &mut dyn PageStore {
        &mut *self.pages.store
    }

    /// Every mount point but `/`: its name in the root and the root of what is mounted there,
    /// the fixed mounts first, then the shares in the order they were mounted.
    fn mount_points(&self) -> impl Iterator<Item = (&[u8], NodeId)> {
        let fixed = MOUNTS[1..].iter().map(|mount| (mount.name(), mount.root()));
        let shares = (0..=u8::MAX)
            .zip(&self.shares)
            .map(|(index, share)| (&share.name[..], NodeId::new(Filesystem::Host(index), hostfs::ROOT_INODE)));
        fixed.chain(shares)
    }

    /// The root of the mount whose mount point is `name` in `directory`.
    pub(crate) fn mount_at(&self, directory: NodeId, name: &[u8]) -> Option<NodeId> {
        if directory != self.root() {
            return None;
        }
        self.mount_points().find(|(mount, _)| *mount == name).map(|(_, root)| root)
    }

    /// The root of the kernel's file system mounted at `/name` (`/tmp`, `/dev`, `/proc`,
    /// `/sys`), which a process with a changed root still sees there, as `arch-chroot` binds
    /// them. Shares are not among them: they are what a root is changed to.
    pub(crate) fn kernel_mount_named(&self, name: &[u8]) -> Option<NodeId> {
        MOUNTS[1..].iter().find(|mount| mount.name() == name).map(Mount::root)
    }

    /// Whether `node` is the root of one of the kernel's file systems (`/tmp`, `/dev`...).
    pub(crate) fn kernel_mount(&self, node: NodeId) -> bool {
        MOUNTS[1..].iter().any(|mount| mount.root() == node)
    }

    /// Whether `node` is the root of a mount other than `/`.
    fn is_mount_root(&self, node: NodeId) -> bool {
        self.mount_points().any(|(_, root)| root == node)
    }

    /// What `node` is in its file system: `ENOENT` for a node that is gone (a freed tmpfs
    /// node, a `/proc` node of an exited process) or never was.
    pub(crate) fn found(&self, node: NodeId) -> Result<Found<'_>, Errno> {
        let inode = node.inode();
        match node.filesystem().ok_or(ENOENT)? {
            Filesystem::Archive => {
                let index = u32::try_from(inode.checked_sub(1).ok_or(ENOENT)?).map_err(|_| ENOENT)?;
                Ok(Found::Archive(index, self.archive.node(index).ok_or(ENOENT)?))
            }
            Filesystem::Tmpfs => Ok(Found::Tmpfs(inode, self.tmpfs.get(inode)?)),
            Filesystem::Devfs if inode == devfs::ROOT_INODE => Ok(Found::Devfs(None)),
            Filesystem::Devfs => Ok(Found::Devfs(Some(devfs::device(inode).ok_or(ENOENT)?))),
            Filesystem::Procfs => {
                let proc_node = ProcNode::from_inode(inode).ok_or(ENOENT)?;
                if let Some(pid) = proc_node.process() {
                    if !self.proc.pids().contains(&pid) {
                        return Err(ENOENT);
                    }
                }
                if let ProcNode::DescriptorLink(pid, fd) = proc_node {
                    // Gone once the descriptor is closed, as on Linux.
                    if !self.proc.descriptors(pid)?.iter().any(|(open, _)| *open == fd) {
                        return Err(ENOENT);
                    }
                }
                Ok(Found::Procfs(proc_node))
            }
            Filesystem::Sysfs => {
                let sys_node = SysNode::from_inode(inode).ok_or(ENOENT)?;
                if sys_node.core().is_some_and(|core| core >= self.sys.core_count()) {
                    return Err(ENOENT);
                }
                Ok(Found::Sysfs(sys_node))
            }
            Filesystem::Host(share) if self.share(share)?.has(inode) => Ok(Found::Host(share, inode)),
            Filesystem::Host(_) => Err(ENOENT),
        }
    }

    /// What `node` is: `ENOENT` when it is gone.
    pub fn kind(&self, node: NodeId) -> Result<NodeKind, Errno> {
        Ok(match self.found(node)? {
            Found::Archive(_, indexed) => match indexed.mode() & mode::TYPE_MASK {
                mode::DIRECTORY => NodeKind::Directory,
                mode::REGULAR => NodeKind::Regular,
                mode::SYMLINK => NodeKind::Symlink,
                mode::FIFO => NodeKind::Fifo,
                _ => NodeKind::Special,
            },
            Found::Tmpfs(_, tmp) => match tmp.content {
                Content::Regular(_) => NodeKind::Regular,
                Content::Directory(_) => NodeKind::Directory,
                Content::Symlink(_) => NodeKind::Symlink,
                Content::Fifo => NodeKind::Fifo,
                Content::Socket => NodeKind::Socket,
            },
            Found::Devfs(None) => NodeKind::Directory,
            Found::Devfs(Some(device)) => NodeKind::Device(device.device),
            Found::Procfs(proc_node) => match proc_node {
                _ if proc_node.is_link() => NodeKind::Symlink,
                ProcNode::File(file) => NodeKind::ProcFile(file),
                _ => NodeKind::Directory,
            },
            Found::Sysfs(SysNode::File(file)) => NodeKind::SysFile(file),
            Found::Sysfs(_) => NodeKind::Directory,
            Found::Host(share, inode) => match self.share(share)?.attributes(inode, self.now())?.mode & mode::TYPE_MASK
            {
                mode::DIRECTORY => NodeKind::Directory,
                mode::REGULAR => NodeKind::Regular,
                mode::SYMLINK => NodeKind::Symlink,
                mode::FIFO => NodeKind::Fifo,
                _ => NodeKind::Special,
            },
        })
    }

    pub(crate) fn is_directory(&self, node: NodeId) -> Result<bool, Errno> {
        Ok(self.kind(node)? == NodeKind::Directory)
    }

    /// `node`'s metadata, as `stat` reports it.
    pub fn stat(&self, node: NodeId) -> Result<Metadata, Errno> {
        let device = node.filesystem().ok_or(ENOENT)?.device();
        let mut metadata = Metadata::blank(device, node.inode(), self.made_at);
        match self.found(node)? {
            Found::Archive(index, indexed) => {
                metadata = indexed.metadata(index);
                if index == ARCHIVE_ROOT {
                    // The mounts are directories in the root too, and hide any of the
                    // archive's they are mounted over.
                    metadata.links = metadata.links - self.hidden_by_mounts() + self.mount_points().count() as u64;
                }
            }
            Found::Tmpfs(_, tmp) => {
                metadata.mode = tmp.mode;
                (metadata.uid, metadata.gid) = (tmp.uid, tmp.gid);
                metadata.links = tmp.links;
                (metadata.accessed, metadata.modified, metadata.changed) = (tmp.accessed, tmp.modified, tmp.changed);
                match &tmp.content {
                    Content::Regular(file) => {
                        metadata.size = file.size();
                        metadata.blocks = file.page_count() as u64 * (PAGE_SIZE as u64 / 512);
                    }
                    Content::Symlink(target) => metadata.size = target.len() as u64,
                    Content::Directory(_) | Content::Fifo | Content::Socket => {}
                }
            }
            Found::Devfs(device) => {
                let state = self.devfs.state(node.inode()).ok_or(ENOENT)?;
                (metadata.accessed, metadata.modified, metadata.changed) =
                    (state.accessed, state.modified, state.changed);
                match device {
                    None => {
                        metadata.mode = mode::DIRECTORY | state.permissions;
                        metadata.links = 2;
                    }
                    Some(device) => {
                        metadata.mode = mode::CHARACTER_DEVICE | state.permissions;
                        metadata.rdev = device_number(device.major, device.minor);
                    }
                }
            }
            Found::Procfs(proc_node) => {
                // Linux's modes: a descriptor's link and its directory are the owner's alone
                // (`lrwx------` for every descriptor here: the access mode is the service's).
                metadata.mode = match proc_node {
                    ProcNode::DescriptorLink(..) => mode::SYMLINK | 0o700,
                    _ if proc_node.is_link() => mode::SYMLINK | 0o777,
                    ProcNode::File(_) => mode::REGULAR | 0o444,
                    ProcNode::DescriptorDirectory(_) => mode::DIRECTORY | 0o500,
                    _ => mode::DIRECTORY | 0o555,
                };
                match proc_node {
                    // `.`, `..`, `reef`'s `..`, each process's `..`.
                    ProcNode::Root => metadata.links = 3 + self.proc.pids().len() as u64,
                    // `.`, `..`, `fd`'s `..`.
                    ProcNode::ProcessDirectory(_) => metadata.links = 3,
                    _ if proc_node.is_directory() => metadata.links = 2,
                    _ => {}
                }
                if proc_node.is_link() {
                    metadata.size = self.read_link(node).map_or(0, |target| target.len() as u64);
                }
                // A process's files are its own, as Linux gives them its effective ids.
                if let Some(pid) = proc_node.process() {
                    (metadata.uid, metadata.gid) = self.proc.owner(pid);
                }
            }
            Found::Sysfs(SysNode::File(file)) => {
                metadata.mode = mode::REGULAR | if file.is_writable() { 0o644 } else { 0o444 };
                metadata.size = PAGE_SIZE as u64;
            }
            Found::Sysfs(directory) => {
                // Linux's sysfs root is `dr-xr-xr-x`, its directories `drwxr-xr-x`.
                let permissions = if directory == SysNode::Root { 0o555 } else { 0o755 };
                metadata.mode = mode::DIRECTORY | permissions;
                metadata.links = 2 + directory.subdirectories(self.sys.core_count());
            }
            Found::Host(share, inode) => return self.share(share)?.metadata(inode, device, self.now()),
        }
        Ok(metadata)
    }

    /// How many of the root's archive subdirectories a mount hides.
    fn hidden_by_mounts(&self) -> u64 {
        self.mount_points()
            .filter_map(|(name, _)| self.archive.lookup(ARCHIVE_ROOT, name))
            .filter(|&index| self.archive.nodes[index as usize].is_directory())
            .count() as u64
    }

    /// Sets the access and modification times of `node` (nanoseconds since 1970; `None`
    /// leaves one as it is), and its change time to now: `utimensat`. `EROFS` in the
    /// initramfs, `EPERM` in `/proc` and `/sys`.
    pub fn set_times(&mut self, node: NodeId, accessed: Option<u64>, modified: Option<u64>) -> Result<(), Errno> {
        if let Found::Host(share, inode) = self.found(node)? {
            return self.share(share)?.set_times(inode, accessed, modified);
        }
        let now = self.now();
        let (old_accessed, old_modified, changed) = self.times_mut(node)?;
        if let Some(accessed) = accessed {
            *old_accessed = accessed;
        }
        if let Some(modified) = modified {
            *old_modified = modified;
        }
        *changed = now;
        Ok(())
    }

    /// Sets the permission bits of `node` (`permissions & 0o7777`; the type stays): `chmod`.
    /// `EROFS` in the initramfs, `EPERM` in `/proc` and `/sys`.
    pub fn set_mode(&mut self, node: NodeId, permissions: u32) -> Result<(), Errno> {
        let now = self.now();
        match node.filesystem().ok_or(ENOENT)? {
            Filesystem::Tmpfs => {
                let tmp = self.tmpfs.get_mut(node.inode())?;
                tmp.mode = tmp.mode & mode::TYPE_MASK | permissions & 0o7777;
                tmp.changed = now;
            }
            Filesystem::Devfs => {
                let state = self.devfs.state_mut(node.inode()).ok_or(ENOENT)?;
                state.permissions = permissions & 0o7777;
                state.changed = now;
            }
            Filesystem::Archive | Filesystem::Procfs | Filesystem::Sysfs => {
                self.found(node)?;
                return Err(Self::refusal(node.filesystem().ok_or(ENOENT)?));
            }
            Filesystem::Host(share) => {
                self.found(node)?;
                self.share(share)?.set_mode(node.inode(), permissions)?;
            }
        }
        Ok(())
    }

    /// Gives `node` the owner `uid` and group `gid` (`None` leaves one): `chown`, and the
    /// service making a node its maker's. A change clears the set-user-id and set-group-id
    /// bits of anything but a directory, as Linux's `chown` does. A call that changes
    /// nothing succeeds anywhere; a change is `EROFS` in the initramfs and `EPERM` in `/dev`,
    /// `/proc`, `/sys` and the host shares (which keep the host's owners:
    /// `security_model=none`). Whether the caller may is [`Credentials::may_change_owner`].
    pub fn set_owner(&mut self, node: NodeId, uid: Option<u32>, gid: Option<u32>) -> Result<(), Errno> {
        let metadata = self.stat(node)?;
        let uid = uid.unwrap_or(metadata.uid);
        let gid = gid.unwrap_or(metadata.gid);
        if (uid, gid) == (metadata.uid, metadata.gid) {
            return Ok(());
        }
        let now = self.now();
        match node.filesystem().ok_or(ENOENT)? {
            Filesystem::Tmpfs => {
                let tmp = self.tmpfs.get_mut(node.inode())?;
                (tmp.uid, tmp.gid) = (uid, gid);
                tmp.mode = tmp.mode & mode::TYPE_MASK | permission::mode_after_chown(tmp.mode);
                tmp.changed = now;
                Ok(())
            }
            filesystem => Err(Self::refusal(filesystem)),
        }
    }

    /// Gives a node the service just made its maker's owner and group, leaving its
    /// permission bits as they were made (a new node has no set-id bits to clear that its
    /// maker did not ask for). tmpfs only: the other file systems keep their own owners.
    pub fn set_new_owner(&mut self, node: NodeId, uid: u32, gid: u32) -> Result<(), Errno> {
        if node.filesystem() == Some(Filesystem::Tmpfs) {
            let tmp = self.tmpfs.get_mut(node.inode())?;
            (tmp.uid, tmp.gid) = (uid, gid);
        }
        Ok(())
    }

    /// The access, modification and change times of a node that can change.
    fn times_mut(&mut self, node: NodeId) -> Result<(&mut u64, &mut u64, &mut u64), Errno> {
        match node.filesystem().ok_or(ENOENT)? {
            Filesystem::Tmpfs => {
                let tmp = self.tmpfs.get_mut(node.inode())?;
                Ok((&mut tmp.accessed, &mut tmp.modified, &mut tmp.changed))
            }
            Filesystem::Devfs => {
                let state = self.devfs.state_mut(node.inode()).ok_or(ENOENT)?;
                Ok((&mut state.accessed, &mut state.modified, &mut state.changed))
            }
            filesystem @ (Filesystem::Archive | Filesystem::Procfs | Filesystem::Sysfs | Filesystem::Host(_)) => {
                self.found(node)?;
                Err(Self::refusal(filesystem))
            }
        }
    }

    /// Why a file system refuses a change: the initramfs is read-only (`EROFS`); `/dev`,
    /// `/proc` and `/sys` have a fixed set of nodes and answer `EPERM`, as Linux's procfs
    /// does to `chmod` and `mknod` and its sysfs to `mkdir` and `unlink` (but see
    /// [`Vfs::create`] for `/sys`).
    pub(crate) fn refusal(filesystem: Filesystem) -> Errno {
        match filesystem {
            Filesystem::Archive => EROFS,
            _ => EPERM,
        }
    }

    /// Copies the bytes of the regular file `node` from `offset` into `buffer`: how many, 0
    /// at or past the end. Files of the initramfs and tmpfs only: `EISDIR` for a directory,
    /// `EINVAL` for a device (the service drives it), a `/proc` or `/sys` file (read
    /// [`Vfs::proc_contents`] or [`Vfs::sys_contents`] once at open) or a link.
    pub fn read(&self, node: NodeId, offset: u64, buffer: &mut [u8]) -> Result<usize, Errno> {
        match self.found(node)? {
            Found::Archive(_, indexed) if indexed.is_directory() => Err(EISDIR),
            Found::Archive(_, IndexNode { entry: Some(entry), .. }) if entry.is_file() => {
                let data = usize::try_from(offset).ok().and_then(|offset| entry.data.get(offset..)).unwrap_or(&[]);
                let length = data.len().min(buffer.len());
                buffer[..length].copy_from_slice(&data[..length]);
                Ok(length)
            }
            Found::Tmpfs(_, TmpNode { content: Content::Regular(file), .. }) => {
                Ok(file.read(&*self.pages.store, offset, buffer))
            }
            Found::Host(share, inode) if self.kind(node)? == NodeKind::Regular => {
                self.share(share)?.read(inode, offset, buffer)
            }
            found => Err(if self.found_is_directory(&found) { EISDIR } else { EINVAL }),
        }
    }

    fn found_is_directory(&self, found: &Found<'_>) -> bool {
        match found {
            Found::Host(share, inode) => self
                .share(*share)
                .and_then(|s| s.attributes(*inode, self.now()))
                .is_ok_and(|attributes| attributes.mode & mode::TYPE_MASK == mode::DIRECTORY),
            Found::Archive(_, indexed) => indexed.is_directory(),
            Found::Tmpfs(_, tmp) => matches!(tmp.content, Content::Directory(_)),
            Found::Devfs(device) => device.is_none(),
            Found::Procfs(proc_node) => proc_node.is_directory(),
            Found::Sysfs(sys_node) => sys_node.is_directory(),
        }
    }

    /// Writes `data` into the tmpfs file `node` at `offset`, growing it as needed (a hole
    /// before `offset` reads as zeros): how many bytes were written. When the tmpfs page
    /// limit or the memory is reached, what fits is written and counted; `ENOSPC` only when
    /// nothing fits. Past [`MAX_FILE_SIZE`](crate::MAX_FILE_SIZE), `EFBIG`. `EROFS` in the
    /// initramfs, `EISDIR` for a directory, `EACCES` for a `/proc` file (none is writable),
    /// `EINVAL` for a device (the service drives it), a `/sys` file
    /// ([`Vfs::decode_sys_write`]) or a link.
    pub fn write(&mut self, node: NodeId, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        let now = self.now();
        if node.filesystem() == Some(Filesystem::Tmpfs) {
            let tmp = self.tmpfs.get_mut(node.inode())?;
            let Content::Regular(file) = &mut tmp.content else {
                return Err(if matches!(tmp.content, Content::Directory(_)) { EISDIR } else { EINVAL });
            };
            let written = file.write(&mut self.pages, offset, data)?;
            if written > 0 {
                tmp.modified = now;
                tmp.changed = now;
            }
            return Ok(written);
        }
        if let Found::Host(share, inode) = self.found(node)? {
            if self.kind(node)? == NodeKind::Regular {
                return self.share(share)?.write(inode, offset, data);
            }
        }
        Err(self.refuse_contents_change(node)?)
    }

    /// Sets the size of the tmpfs file `node`: shrinking frees the pages past the end,
    /// growing leaves a hole that reads as zeros (`ftruncate`). The errors of
    /// [`Vfs::write`], `EINVAL` for a device (the service ignores `O_TRUNC` on one, as Linux
    /// does).
    pub fn truncate(&mut self, node: NodeId, size: u64) -> Result<(), Errno> {
        let now = self.now();
        if node.filesystem() == Some(Filesystem::Tmpfs) {
            let tmp = self.tmpfs.get_mut(node.inode())?;
            let Content::Regular(file) = &mut tmp.content else {
                return Err(if matches!(tmp.content, Content::Directory(_)) { EISDIR } else { EINVAL });
            };
            file.truncate(&mut self.pages, size)?;
            tmp.modified = now;
            tmp.changed = now;
            return Ok(());
        }
        if let Found::Host(share, inode) = self.found(node)? {
            if self.kind(node)? == NodeKind::Regular {
                return self.share(share)?.truncate(inode, size);
            }
        }
        Err(self.refuse_contents_change(node)?)
    }

    /// Why the contents of `node`, outside tmpfs, cannot change.
    fn refuse_contents_change(&self, node: NodeId) -> Result<Errno, Errno> {
        let found = self.found(node)?;
        Ok(match found {
            _ if self.found_is_directory(&found) => EISDIR,
            Found::Archive(_, indexed) if indexed.entry.is_some_and(|entry| entry.is_file()) => EROFS,
            Found::Procfs(ProcNode::File(_)) => EACCES,
            _ => EINVAL,
        })
    }

    /// Whether `node` is on a read-only mount (the initramfs), where every change is `EROFS`
    /// whoever asks, which Linux answers before any permission check.
    pub fn is_read_only(&self, node: NodeId) -> bool {
        node.filesystem() == Some(Filesystem::Archive)
    }

    /// Whether the contents of `node` may be written (an open for writing, `access(W_OK)`):
    /// `EROFS` for a file of the initramfs; tmpfs files, devices, `/proc` and `/sys` files
    /// and anything that is not a file's contents are the caller's to judge.
    pub fn check_writable(&self, node: NodeId) -> Result<(), Errno> {
        match self.found(node)? {
            Found::Archive(_, indexed) if indexed.entry.is_some_and(|entry| entry.is_file()) => Err(EROFS),
            _ => Ok(()),
        }
    }

    /// The target of the symbolic link `node`, as given when it was made (`readlink`);
    /// `EINVAL` for anything else. `/proc/self` links to the pid that looked it up.
    pub fn read_link(&self, node: NodeId) -> Result<Vec<u8>, Errno> {
        match self.found(node)? {
            Found::Archive(_, IndexNode { entry: Some(entry), .. }) if entry.is_symlink() => Ok(entry.data.to_vec()),
            Found::Tmpfs(_, TmpNode { content: Content::Symlink(target), .. }) => Ok(target.clone()),
            // Not looked up by a process: no pid to link to.
            Found::Procfs(ProcNode::SelfLink) => Err(ENOENT),
            Found::Procfs(ProcNode::SelfLinkOf(pid)) => Ok(procfs::decimal(u64::from(pid))),
            Found::Procfs(ProcNode::DescriptorLink(pid, fd)) => {
                let descriptors = self.proc.descriptors(pid)?;
                let (_, target) = descriptors.into_iter().find(|(open, _)| *open == fd).ok_or(ENOENT)?;
                Ok(target)
            }
            Found::Procfs(ProcNode::ProgramLink(pid)) => self.proc.program(pid),
            Found::Host(share, inode) if self.kind(node)? == NodeKind::Symlink => self.share(share)?.read_link(inode),
            _ => Err(EINVAL),
        }
    }

    /// The text of the `/proc` file `node`, whole: the service takes it once at open and
    /// serves reads from that copy, as Linux's seq files do, so a reader sees one consistent
    /// state. `ENOENT` once the process is gone, `EISDIR` for a directory, `EINVAL` for a
    /// node outside `/proc`.
    pub fn proc_contents(&self, node: NodeId) -> Result<Vec<u8>, Errno> {
        match self.found(node)? {
            Found::Procfs(ProcNode::File(ProcFile::Mounts)) => Ok(self.mounts_text()),
            Found::Procfs(ProcNode::File(file)) => self.proc.generate(file),
            found => Err(if self.found_is_directory(&found) { EISDIR } else { EINVAL }),
        }
    }

    /// The text of the `/sys` file `node`, whole, made now from what the [`SysSource`] says:
    /// the service takes it once at open, as for [`Vfs::proc_contents`] (and as Linux's
    /// sysfs, which fills a page at the first read). `EISDIR` for a directory, `EINVAL` for
    /// a node outside `/sys`.
    pub fn sys_contents(&self, node: NodeId) -> Result<Vec<u8>, Errno> {
        match self.found(node)? {
            Found::Sysfs(SysNode::File(file)) => Ok(sysfs::contents(file, &*self.sys)),
            found => Err(if self.found_is_directory(&found) { EISDIR } else { EINVAL }),
        }
    }

    /// Decodes one `write` of `data` to the `/sys` file `node`: the request it makes, which
    /// the caller carries out with [`SysRequest::invoke`] on [`Vfs::sys_source`] after it
    /// let go of any lock (switching a core waits for it). `Ok(None)` for an empty write,
    /// which asks nothing. `EACCES` for a read-only file, `EINVAL` for text the file does
    /// not take (`cpu<K>/online` takes `0` or `1`, a newline after it allowed), `EISDIR`
    /// for a directory, `EINVAL` for a node outside `/sys`.
    pub fn decode_sys_write(&self, node: NodeId, data: &[u8]) -> Result<Option<SysRequest>, Errno> {
        match self.found(node)? {
            Found::Sysfs(SysNode::File(file)) => sysfs::decode_write(file, data),
            found => Err(if self.found_is_directory(&found) { EISDIR } else { EINVAL }),
        }
    }

    /// The source `/sys` reads, to invoke a [`SysRequest`] with outside the VFS's lock.
    pub fn sys_source(&self) -> Arc<dyn SysSource> {
        Arc::clone(&self.sys)
    }

    /// `/proc/mounts`, Linux's format: source, mount point, type, options, then two zeros
    /// (dump frequency and fsck pass), one mount a line.
    fn mounts_text(&self) -> Vec<u8> {
        let mut text = Vec::new();
        for mount in &MOUNTS {
            for field in [mount.source, " ", mount.path, " ", mount.type_name, " ", mount.options, " 0 0\n"] {
                text.extend_from_slice(field.as_bytes());
            }
        }
        // Linux's line for a virtio-9p mount, the tag first.
        for share in &self.shares {
            for field in [&share.tag[..], b" /", &share.name, b" 9p rw,trans=virtio,version=9p2000.L 0 0\n"] {
                text.extend_from_slice(field);
            }
        }
        text
    }

    /// Takes a reference to `node` for an open descriptor (or a working directory): a
    /// tmpfs node unlinked while referenced keeps its contents until the last
    /// [`Vfs::close_node`]. `ENOENT` for a node that is gone.
    pub fn open_node(&mut self, node: NodeId) -> Result<(), Errno> {
        self.found(node)?;
        *self.open.entry(node).or_insert(0) += 1;
        Ok(())
    }

    /// Gives back a reference [`Vfs::open_node`] took; at the last one, an unlinked tmpfs
    /// node is freed, its pages returned to the store. `EBADF` if `node` is not open.
    pub fn close_node(&mut self, node: NodeId) -> Result<(), Errno> {
        let count = self.open.get_mut(&node).ok_or(EBADF)?;
        *count -= 1;
        if *count == 0 {
            self.open.remove(&node);
            if let Some(Filesystem::Host(share)) = node.filesystem() {
                if let Ok(share) = self.share(share) {
                    share.close(node.inode());
                }
            }
            self.free_if_unused(node);
        }
        Ok(())
    }

    /// Frees the tmpfs node `node` if no name and no reference is left to it; forgets a
    /// share's node removed through this mount once nothing holds it open.
    pub(crate) fn free_if_unused(&mut self, node: NodeId) {
        if let Some(Filesystem::Host(share)) = node.filesystem() {
            if let (Ok(share), false) = (self.share(share), self.open.contains_key(&node)) {
                share.forget_if_removed(node.inode());
            }
            return;
        }
        if node.filesystem() != Some(Filesystem::Tmpfs) || self.open.contains_key(&node) {
            return;
        }
        if self.tmpfs.get(node.inode()).is_ok_and(|tmp| tmp.links == 0) {
            self.tmpfs.free(node.inode(), &mut self.pages);
        }
    }

    /// What `statfs` says of the file system whose nodes `stat` shows with device number
    /// `device`: its Linux type, whether it is read-only, and its pages and nodes (tmpfs
    /// counts its pages against its limit and offers as many nodes; the others hold none).
    /// `ENOENT` for a number no mount has.
    pub fn space(&self, device: u64) -> Result<Space, Errno> {
        let shares = (0..=u8::MAX).take(self.shares.len()).map(Filesystem::Host);
        let filesystem = Filesystem::FIXED
            .into_iter()
            .chain(shares)
            .find(|filesystem| filesystem.device() == device)
            .ok_or(ENOENT)?;
        let (magic, read_only) = match filesystem {
            Filesystem::Host(share) => return self.share(share)?.space(),
            // Linux's initramfs root is a ramfs (here read-only), /dev a devtmpfs.
            Filesystem::Archive => (RAMFS_MAGIC, true),
            Filesystem::Tmpfs | Filesystem::Devfs => (TMPFS_MAGIC, false),
            Filesystem::Procfs => (PROC_SUPER_MAGIC, false),
            Filesystem::Sysfs => (SYSFS_MAGIC, false),
        };
        let mut space = Space { magic, read_only, pages: 0, free_pages: 0, nodes: 0, free_nodes: 0 };
        if filesystem == Filesystem::Tmpfs {
            let limit = self.pages.limit as u64;
            space.pages = limit;
            space.free_pages = limit.saturating_sub(self.pages.used as u64);
            space.nodes = limit;
            space.free_nodes = limit.saturating_sub(self.tmpfs.node_count() as u64);
        }
        Ok(space)
    }

    /// Totals for leak checks.
    pub fn counts(&self) -> Counts {
        Counts {
            open_nodes: self.open.len(),
            tmpfs_nodes: self.tmpfs.node_count(),
            tmpfs_pages: self.pages.used,
            tmpfs_page_limit: self.pages.limit,
            share_opened_fids: self.shares.iter().map(|share| share.counts().opened_fids).sum(),
        }
    }

    /// The entry of directory `node` at `cursor` and the cursor of the next one, or `None`
    /// at the end (`getdents64`). Start at 0: `.` and `..` come first. A cursor stays valid
    /// while entries come and go: no entry is listed twice, and every entry present
    /// throughout is listed once. Each call costs a lookup, never a walk of the directory.
    /// A removed directory lists nothing, not even `.`. `ENOTDIR` for a non-directory.
    pub fn read_directory(&self, node: NodeId, cursor: u64) -> Result<Option<(DirectoryEntry, u64)>, Errno> {
        let found = self.found(node)?;
        if !self.found_is_directory(&found) {
            return Err(ENOTDIR);
        }
        if let Found::Tmpfs(_, tmp) = found {
            if tmp.links == 0 {
                return Ok(None);
            }
        }
        let entry = |name: &[u8], inode: u64, kind_code: u8| DirectoryEntry { name: name.to_vec(), inode, kind_code };
        if cursor == 0 {
            return Ok(Some((entry(b".", node.inode(), DIRECTORY_CODE), 1)));
        }
        if cursor == 1 {
            let parent = self.parent(node)?;
            return Ok(Some((entry(b"..", parent.inode(), DIRECTORY_CODE), FIRST_ENTRY)));
        }
        let position = cursor - FIRST_ENTRY;
        let listed = match found {
            Found::Archive(index, indexed) => {
                // The root lists the mount points first, then the archive's entries they do
                // not hide.
                let mounts = if index == ARCHIVE_ROOT { self.mount_points().count() as u64 } else { 0 };
                if position < mounts {
                    let (name, _) = self.mount_points().nth(position as usize).ok_or(ENOENT)?;
                    Some((entry(name, ROOT_INODE, DIRECTORY_CODE), cursor + 1))
                } else {
                    let first = usize::try_from(position - mounts).unwrap_or(usize::MAX);
                    indexed.children.iter().enumerate().skip(first).find_map(|(offset, &child)| {
                        let child_node = &self.archive.nodes[child as usize];
                        let hidden = index == ARCHIVE_ROOT && self.mount_at(self.root(), child_node.name).is_some();
                        (!hidden).then(|| {
                            let next = FIRST_ENTRY + mounts + offset as u64 + 1;
                            (entry(child_node.name, u64::from(child) + 1, kind_code_of_mode(child_node.mode())), next)
                        })
                    })
                }
            }
            Found::Tmpfs(_, tmp) => {
                let Content::Directory(directory) = &tmp.content else { return Err(ENOTDIR) };
                directory.entry_from(position).map(|(sequence, name, inode)| {
                    let kind_code = self.tmpfs.get(inode).map_or(0, |child| kind_code_of_mode(child.mode));
                    (entry(name, inode, kind_code), FIRST_ENTRY + sequence + 1)
                })
            }
            Found::Devfs(_) => usize::try_from(position)
                .ok()
                .and_then(|index| devfs::DEVICES.get(index))
                .map(|device| (entry(device.name, position + 2, CHARACTER_DEVICE_CODE), cursor + 1)),
            Found::Procfs(directory) => {
                if let Some((name, child)) = procfs::fixed_entry(directory, position) {
                    Some((entry(name, child.inode(), child.kind_code()), cursor + 1))
                } else if let ProcNode::DescriptorDirectory(pid) = directory {
                    // The cursor is the next descriptor to list, as for the pids below.
                    let first = u32::try_from(position).unwrap_or(u32::MAX);
                    let descriptors = self.proc.descriptors(pid)?;
                    descriptors.iter().map(|(fd, _)| *fd).filter(|&fd| fd >= first).min().map(|fd| {
                        let child = ProcNode::DescriptorLink(pid, fd);
                        let next = FIRST_ENTRY + u64::from(fd) + 1;
                        (entry(&procfs::decimal(u64::from(fd)), child.inode(), SYMLINK_CODE), next)
                    })
                } else if directory == ProcNode::Root {
                    // After the fixed entries, the cursor is the next pid to list, so
                    // processes that come and go do not shift the others.
                    let first_pid = position - procfs::FIXED_ENTRIES;
                    let pid = self.proc.pids().into_iter().filter(|&pid| u64::from(pid) >= first_pid).min();
                    pid.map(|pid| {
                        let child = ProcNode::ProcessDirectory(pid);
                        let next = FIRST_ENTRY + procfs::FIXED_ENTRIES + u64::from(pid) + 1;
                        (entry(&procfs::decimal(u64::from(pid)), child.inode(), DIRECTORY_CODE), next)
                    })
                } else {
                    None
                }
            }
            Found::Sysfs(directory) => sysfs::entry(directory, position, self.sys.core_count()).map(|(name, child)| {
                let kind_code = if child.is_directory() { DIRECTORY_CODE } else { REGULAR_CODE };
                (entry(&name, child.inode(), kind_code), cursor + 1)
            }),
            // The cursor past `.` and `..` is the server's offset of the entry, plus 2.
            Found::Host(share, inode) => self.share(share)?.entry_at(inode, position)?.and_then(|listed| {
                let next = listed.next.checked_add(FIRST_ENTRY)?;
                Some((entry(&listed.name, listed.identity, listed.kind_code), next))
            }),
        };
        Ok(listed)
    }

    /// The absolute path of directory `node`, for `getcwd`. `ENOENT` for a removed
    /// directory (as Linux), `ENOTDIR` for anything else. Names are bytes, not necessarily
    /// UTF-8, hence no `String`.
    pub fn path_of(&self, node: NodeId) -> Result<Vec<u8>, Errno> {
        if !self.is_directory(node)? {
            return Err(ENOTDIR);
        }
        // Names from `node` up to its mount's root, last first.
        let mut names: Vec<Vec<u8>> = Vec::new();
        let mount_path = match node.filesystem().ok_or(ENOENT)? {
            Filesystem::Host(share) => [b"/", &self.share(share)?.name[..]].concat(),
            fixed => MOUNTS[fixed.index() as usize].path.as_bytes().to_vec(),
        };
        match self.found(node)? {
            Found::Archive(mut index, _) => {
                while index != ARCHIVE_ROOT {
                    let indexed = &self.archive.nodes[index as usize];
                    names.push(indexed.name.to_vec());
                    index = indexed.parent;
                }
            }
            Found::Tmpfs(mut inode, _) => {
                while inode != tmpfs::ROOT_INODE {
                    let tmp = self.tmpfs.get(inode)?;
                    let Content::Directory(directory) = &tmp.content else { return Err(ENOTDIR) };
                    if tmp.links == 0 {
                        return Err(ENOENT);
                    }
                    names.push(directory.name.clone());
                    inode = directory.parent;
                }
            }
            Found::Devfs(_) => {}
            Found::Procfs(directory) => names.extend(procfs::names_of_directory(directory).into_iter().rev()),
            Found::Sysfs(mut directory) => {
                while directory != SysNode::Root {
                    names.push(directory.name());
                    directory = directory.parent();
                }
            }
            Found::Host(share, inode) => names.extend(self.share(share)?.names_up(inode)?),
        }
        let mut path = mount_path;
        for name in names.iter().rev() {
            if path.last() != Some(&b'/') {
                path.push(b'/');
            }
            path.extend_from_slice(name);
        }
        Ok(path)
    }

    /// The child `name` (a plain name: not `.` or `..`) of directory `directory`, `Ok(None)`
    /// if there is none. `caller` is the pid `/proc/self` links to. `ENOTDIR` when
    /// `directory` is not one, `ENOENT` when it is gone or removed.
    pub(crate) fn find(&self, caller: u32, directory: NodeId, name: &[u8]) -> Result<Option<NodeId>, Errno> {
        if let Some(root) = self.mount_at(directory, name) {
            return Ok(Some(root));
        }
        let found = self.found(directory)?;
        if !self.found_is_directory(&found) {
            return Err(ENOTDIR);
        }
        Ok(match found {
            Found::Archive(index, _) => {
                self.archive.lookup(index, name).map(|child| NodeId::new(Filesystem::Archive, u64::from(child) + 1))
            }
            Found::Tmpfs(inode, _) => {
                self.tmpfs.directory(inode)?.lookup(name).map(|child| NodeId::new(Filesystem::Tmpfs, child))
            }
            Found::Devfs(_) => devfs::lookup(name).map(|inode| NodeId::new(Filesystem::Devfs, inode)),
            Found::Procfs(proc_node) => {
                let descriptors = |pid| {
                    self.proc
                        .descriptors(pid)
                        .map_or_else(|_| Vec::new(), |list| list.iter().map(|(fd, _)| *fd).collect())
                };
                procfs::lookup(proc_node, name, caller, || self.proc.pids(), descriptors)
                    .map(|child| NodeId::new(Filesystem::Procfs, child.inode()))
            }
            Found::Sysfs(sys_node) => sysfs::lookup(sys_node, name, self.sys.core_count())
                .map(|child| NodeId::new(Filesystem::Sysfs, child.inode())),
            Found::Host(share, inode) => self
                .share(share)?
                .lookup(inode, name, self.now())?
                .map(|child| NodeId::new(Filesystem::Host(share), child)),
        })
    }

    /// The directory `..` of directory `node` leads to: the root's is the root, a mount
    /// root's is the directory holding the mount point. `ENOENT` when it is gone.
    pub(crate) fn parent(&self, node: NodeId) -> Result<NodeId, Errno> {
        if node == self.root() || self.is_mount_root(node) {
            return Ok(self.root());
        }
        Ok(match self.found(node)? {
            Found::Archive(_, indexed) => NodeId::new(Filesystem::Archive, u64::from(indexed.parent) + 1),
            Found::Tmpfs(_, TmpNode { content: Content::Directory(directory), .. }) => {
                self.tmpfs.get(directory.parent)?;
                NodeId::new(Filesystem::Tmpfs, directory.parent)
            }
            Found::Procfs(proc_node) => NodeId::new(Filesystem::Procfs, procfs::parent_of_directory(proc_node).inode()),
            Found::Sysfs(sys_node) => NodeId::new(Filesystem::Sysfs, sys_node.parent().inode()),
            found @ Found::Host(share, inode) if self.found_is_directory(&found) => {
                NodeId::new(Filesystem::Host(share), self.share(share)?.parent(inode)?)
            }
            _ => return Err(ENOTDIR),
        })
    }
}
