//! What callers hold and get back: node ids, kinds, metadata, listing entries, counts.

use crate::procfs::ProcFile;
use crate::sysfs::SysFile;
use alloc::vec::Vec;
use linux_raw_sys::general::{DT_CHR, DT_DIR, DT_LNK, DT_REG, DT_UNKNOWN};

/// One file, directory, link or device of a [`Vfs`](crate::Vfs), unique within it for as long
/// as the node exists: the mount's index in the top byte, the node's inode number within its
/// file system below. tmpfs never reuses an inode number, so a stale id names nothing
/// (`ENOENT`) rather than another node.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct NodeId(pub u64);

/// Bits of a [`NodeId`] below the mount index.
const INODE_BITS: u32 = 56;

impl NodeId {
    pub(crate) fn new(filesystem: Filesystem, inode: u64) -> Self {
        debug_assert!(inode < 1 << INODE_BITS, "inode {inode} does not fit below the mount index");
        Self(filesystem.index() << INODE_BITS | inode)
    }

    /// The file system the node belongs to, `None` for an id no [`Vfs`](crate::Vfs) gave.
    pub(crate) fn filesystem(self) -> Option<Filesystem> {
        Filesystem::from_index(self.0 >> INODE_BITS)
    }

    /// The inode number within the node's file system.
    pub(crate) fn inode(self) -> u64 {
        self.0 & ((1 << INODE_BITS) - 1)
    }
}

/// The file systems of the mount table, by their index there (the top byte of a [`NodeId`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Filesystem {
    /// `/`: the initramfs, read-only.
    Archive,
    /// `/tmp`: files in pages, writable.
    Tmpfs,
    /// `/dev`: the devices.
    Devfs,
    /// `/proc`: text generated at open.
    Procfs,
    /// `/sys`: the cores, text generated at open, writes that switch a core.
    Sysfs,
    /// A host directory shared over 9P: the share's index among the mounted shares.
    Host(u8),
}

impl Filesystem {
    /// The file systems every VFS mounts, by index.
    pub(crate) const FIXED: [Filesystem; 5] = [Self::Archive, Self::Tmpfs, Self::Devfs, Self::Procfs, Self::Sysfs];

    /// The index in the mount table: the fixed ones first, then the shares.
    pub(crate) fn index(self) -> u64 {
        match self {
            Self::Archive => 0,
            Self::Tmpfs => 1,
            Self::Devfs => 2,
            Self::Procfs => 3,
            Self::Sysfs => 4,
            Self::Host(share) => Self::FIXED.len() as u64 + u64::from(share),
        }
    }

    /// The file system of mount-table index `index` (a share's may not be mounted).
    pub(crate) fn from_index(index: u64) -> Option<Self> {
        match Self::FIXED.get(usize::try_from(index).ok()?) {
            Some(&fixed) => Some(fixed),
            None => u8::try_from(index - Self::FIXED.len() as u64).ok().map(Self::Host),
        }
    }

    /// `st_dev` of its nodes: one minor number per mount, as Linux gives anonymous devices.
    pub(crate) fn device(self) -> u64 {
        device_number(0, u32::try_from(self.index() + 1).unwrap_or(u32::MAX))
    }
}

/// What a node is, which says what the file service does with it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NodeKind {
    /// A directory: [`Vfs::read_directory`](crate::Vfs::read_directory).
    Directory,
    /// A regular file of the initramfs or tmpfs: [`Vfs::read`](crate::Vfs::read) and, in tmpfs,
    /// [`Vfs::write`](crate::Vfs::write).
    Regular,
    /// A symbolic link: [`Vfs::read_link`](crate::Vfs::read_link).
    Symlink,
    /// A character device of `/dev`; the service does its I/O, the VFS only names it.
    Device(Device),
    /// A text file of `/proc`, read from [`Vfs::proc_contents`](crate::Vfs::proc_contents).
    ProcFile(ProcFile),
    /// A text file of `/sys`, read from [`Vfs::sys_contents`](crate::Vfs::sys_contents) and,
    /// when [`SysFile::is_writable`], written through
    /// [`Vfs::decode_sys_write`](crate::Vfs::decode_sys_write).
    SysFile(SysFile),
    /// A named pipe (FIFO) of tmpfs or the initramfs: the file service opens it as one end of
    /// a pipe it keeps for the node while any end is open.
    Fifo,
    /// A bound `AF_UNIX` socket's name in tmpfs: the file service knows the socket.
    Socket,
    /// A socket, block device or character device with no Reef driver that the initramfs
    /// holds outside `/dev`: it can be listed and stat'ed, not opened.
    Special,
}

/// The devices of `/dev`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Device {
    /// `/dev/console` (5, 1): the serial console.
    Console,
    /// `/dev/null` (1, 3): reads end at once, writes vanish.
    Null,
    /// `/dev/zero` (1, 5): reads give zeros, writes vanish.
    Zero,
    /// `/dev/random` (1, 8) and `/dev/urandom` (1, 9): random bytes.
    Random,
    /// `/dev/tty` (5, 0): the calling process's controlling terminal, the console in Reef.
    Tty,
}

/// A node's metadata, with what Linux's `struct stat` needs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Metadata {
    /// The file system holding the node (`st_dev`): one number per mount, `makedev(0, n)`.
    pub device: u64,
    /// The inode number, unique within [`Metadata::device`] (`st_ino`).
    pub inode: u64,
    /// File type and permissions (`st_mode`): the type bits of [`initramfs::mode`] and the
    /// permission bits `0o7777`.
    pub mode: u32,
    /// Names the node has (`st_nlink`); a directory counts `.` and its subdirectories' `..`.
    /// An unlinked node still open has 0.
    pub links: u64,
    /// The owner (`st_uid`): root for everything but what the initramfs says otherwise.
    pub uid: u32,
    /// The group (`st_gid`).
    pub gid: u32,
    /// For a device node, the device it stands for (`st_rdev`, as `makedev` encodes it).
    pub rdev: u64,
    /// Bytes of a regular file, of a symbolic link's target; 0 for directories, devices and
    /// `/proc` files (whose text only exists once opened, as in Linux); a page for `/sys`
    /// files, the most their text may hold, as Linux's sysfs says.
    pub size: u64,
    /// The preferred I/O size (`st_blksize`): one page.
    pub block_size: u32,
    /// 512-byte units of memory the contents occupy (`st_blocks`): whole pages in tmpfs, so a
    /// file with holes counts only the pages written.
    pub blocks: u64,
    /// Last access, in nanoseconds since 1970 (`st_atim`). Reads do not update it (the mounts
    /// are `noatime`); [`Vfs::set_times`](crate::Vfs::set_times) does.
    pub accessed: u64,
    /// Last change of the contents, in nanoseconds since 1970 (`st_mtim`).
    pub modified: u64,
    /// Last change of the contents or the metadata, in nanoseconds since 1970 (`st_ctim`).
    pub changed: u64,
}

impl Metadata {
    /// A node of `device` numbered `inode`, with one link, owned by root, empty, its three
    /// times `time`: what each file system then fills in.
    pub(crate) fn blank(device: u64, inode: u64, time: u64) -> Self {
        Self {
            device,
            inode,
            mode: 0,
            links: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            block_size: crate::PAGE_SIZE as u32,
            blocks: 0,
            accessed: time,
            modified: time,
            changed: time,
        }
    }
}

/// One entry of a directory listing, as `getdents64` reports it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DirectoryEntry {
    /// The name, without a `/` or a NUL (`d_name`).
    pub name: Vec<u8>,
    /// The inode number [`Metadata::inode`] of the node reports (`d_ino`).
    pub inode: u64,
    /// The node's type as `d_type`: `DT_DIR`, `DT_REG`, `DT_LNK`, `DT_CHR`...
    pub kind_code: u8,
}

/// Totals for leak checks: after every process has exited and every temporary file is gone,
/// `open_nodes`, `tmpfs_nodes` and `tmpfs_pages` are back at 0.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Counts {
    /// Distinct nodes held by [`Vfs::open_node`](crate::Vfs::open_node) and not yet closed.
    pub open_nodes: usize,
    /// tmpfs files, directories and links, the root of `/tmp` not counted, unlinked ones still
    /// open counted.
    pub tmpfs_nodes: usize,
    /// Pages of the [`PageStore`](crate::PageStore) tmpfs holds file contents in.
    pub tmpfs_pages: usize,
    /// The most pages tmpfs may hold: writes past it are `ENOSPC`.
    pub tmpfs_page_limit: usize,
    /// Fids of the 9P shares opened for reading or writing: 0 when no file of a share is
    /// open (named nodes keep an unopened fid each while cached).
    pub share_opened_fids: usize,
}

/// A file system's type and room, as `statfs` reports them ([`Vfs::space`](crate::Vfs::space)).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Space {
    /// Linux's magic number for the type (`f_type`).
    pub magic: u64,
    /// Mounted read-only (`ST_RDONLY`).
    pub read_only: bool,
    /// Pages it may hold (`f_blocks`, 4 KiB each).
    pub pages: u64,
    /// Of those, the free ones (`f_bfree`, `f_bavail`).
    pub free_pages: u64,
    /// Nodes it may hold (`f_files`).
    pub nodes: u64,
    /// Of those, the free ones (`f_ffree`).
    pub free_nodes: u64,
}

/// `statfs` types [Linux include/uapi/linux/magic.h].
pub const RAMFS_MAGIC: u64 = 0x8584_58f6;
pub const TMPFS_MAGIC: u64 = 0x0102_1994;
pub const PROC_SUPER_MAGIC: u64 = 0x9fa0;
pub const SYSFS_MAGIC: u64 = 0x6265_6572;

/// The `d_type` code for a node with this `st_mode`.
pub(crate) fn kind_code_of_mode(mode: u32) -> u8 {
    // `S_IFMT >> 12` is `DT_*` for every type: Linux's `fs_umode_to_dtype` does the same.
    u8::try_from((mode & initramfs::mode::TYPE_MASK) >> 12).unwrap_or(DT_UNKNOWN as u8)
}

/// The `d_type` code of a directory, used where the listing names one without its metadata.
pub(crate) const DIRECTORY_CODE: u8 = DT_DIR as u8;
/// The `d_type` code of a regular file.
pub(crate) const REGULAR_CODE: u8 = DT_REG as u8;
/// The `d_type` code of a symbolic link.
pub(crate) const SYMLINK_CODE: u8 = DT_LNK as u8;
/// The `d_type` code of a character device.
pub(crate) const CHARACTER_DEVICE_CODE: u8 = DT_CHR as u8;

/// A device number as glibc's `makedev` encodes it, the form of `st_dev` and `st_rdev`.
pub(crate) fn device_number(major: u32, minor: u32) -> u64 {
    let (major, minor) = (u64::from(major), u64::from(minor));
    (major & 0xffff_f000) << 32 | (major & 0xfff) << 8 | (minor & 0xffff_ff00) << 12 | (minor & 0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_the_mount_and_the_inode_apart() {
        let id = NodeId::new(Filesystem::Procfs, 0x00ab_cdef_0123_4567);
        assert_eq!(id.filesystem(), Some(Filesystem::Procfs));
        assert_eq!(id.inode(), 0x00ab_cdef_0123_4567);
        assert_eq!(NodeId(0xff << 56).filesystem(), Some(Filesystem::Host(250)));
        let share = NodeId::new(Filesystem::Host(3), 7);
        assert_eq!((share.filesystem(), share.inode()), (Some(Filesystem::Host(3)), 7));
    }

    #[test]
    fn type_codes_and_device_numbers_are_linuxs() {
        use initramfs::mode;
        assert_eq!(kind_code_of_mode(mode::DIRECTORY | 0o755), DIRECTORY_CODE);
        assert_eq!(kind_code_of_mode(mode::REGULAR), REGULAR_CODE);
        assert_eq!(kind_code_of_mode(mode::SYMLINK), SYMLINK_CODE);
        assert_eq!(kind_code_of_mode(mode::CHARACTER_DEVICE), CHARACTER_DEVICE_CODE);
        assert_eq!(kind_code_of_mode(mode::FIFO), 1);
        assert_eq!(device_number(5, 1), 0x501);
        assert_eq!(device_number(1, 3), 0x103);
        assert_eq!(device_number(0x1234, 0x56789), 0x0000_1000_5672_3489);
    }
}
