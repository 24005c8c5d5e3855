//! The file tree Reef's file service serves: initramfs, tmpfs, /dev, /proc and /sys, by path.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;

mod archive_index;
mod devfs;
mod file_pages;
mod hostfs;
mod local;
mod namespace;
mod node;
mod pages;
mod path;
pub mod permission;
mod pipe;
mod procfs;
mod sysfs;
mod tmpfs;
mod vfs;

pub use hostfs::{ShareCounts, CACHE_LIFETIME, MESSAGE_SIZE as SHARE_MESSAGE_SIZE};
pub use local::{ArchiveView, Local};
pub use node::{Counts, Device, DirectoryEntry, Metadata, NodeId, NodeKind, Space};
pub use pages::{HeapPageStore, PageHandle, PageStore, PAGE_SIZE};
pub use permission::Credentials;
pub use pipe::{PipeBuffer, PIPE_BUF, PIPE_CAPACITY};
pub use procfs::{NetView, ProcFile, ProcSource, ReefView};
pub use sysfs::{SysFile, SysRequest, SysSource};
pub use vfs::{Context, Vfs};

/// Whether the bytes of a regular file of the file system whose `st_dev` is `device` change
/// only when it is written (so a page read once may be shared by every process that maps it,
/// as long as the file's size and modification time stay): the initramfs, tmpfs and shares;
/// not `/proc` or `/sys`, whose files are made anew at each open.
pub fn pages_may_be_shared(device: u64) -> bool {
    use node::Filesystem;
    [Filesystem::Archive, Filesystem::Tmpfs].iter().any(|fixed| fixed.device() == device)
        || (0..=u8::MAX).any(|share| Filesystem::Host(share).device() == device)
}

/// A Linux error number (`ENOENT` is 2), as `linux_raw_sys::errno` spells them; system calls
/// return its negation.
pub type Errno = u32;

/// Longest path, its terminating NUL included, as Linux's `PATH_MAX`: a path of 4096 bytes or
/// more is `ENAMETOOLONG`.
pub const PATH_MAX: usize = 4096;

/// Longest name of one path component (`NAME_MAX`): a longer one is `ENAMETOOLONG`.
pub const NAME_MAX: usize = 255;

/// The most symbolic links one path lookup follows, in all its components together, before it
/// fails with `ELOOP` (Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// The largest size a tmpfs file may reach: writes and truncations past it are `EFBIG`. Far
/// above what the memory holds, far below what `u64` offsets overflow at.
pub const MAX_FILE_SIZE: u64 = 1 << 40;

/// [`Vfs::rename`] flag: fail with `EEXIST` rather than replace the target (`renameat2`).
pub const RENAME_NOREPLACE: u32 = linux_raw_sys::general::RENAME_NOREPLACE;

/// [`Vfs::rename`] flag: swap the two names, both of which must exist (`renameat2`).
pub const RENAME_EXCHANGE: u32 = linux_raw_sys::general::RENAME_EXCHANGE;
