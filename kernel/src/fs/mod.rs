//! Files a process sees: the initramfs, read-only (every instance maps the one copy QEMU
//! loaded), and the console on fds 0–2. Per-process descriptor tables live here too.

pub mod console;

use crate::proc::Errno;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use initramfs::{Archive, Entry, LookupError};
use linux_raw_sys::errno;
use spin::{Mutex, Once};

static INITRAMFS: Once<Archive<'static>> = Once::new();

/// Takes the initramfs this instance maps (read-only, the same bytes on every instance).
pub fn init(bytes: &'static [u8]) {
    if bytes.is_empty() {
        return;
    }
    match Archive::parse(bytes) {
        Ok(archive) => {
            INITRAMFS.call_once(|| archive);
        }
        Err(error) => log::error!("the initramfs is not a cpio newc archive ({error:?}): no programs to run"),
    }
}

/// The initramfs, if QEMU was given one.
pub fn archive() -> Option<&'static Archive<'static>> {
    INITRAMFS.get()
}

fn lookup_errno(error: LookupError) -> Errno {
    match error {
        LookupError::NotFound => errno::ENOENT,
        LookupError::NotADirectory => errno::ENOTDIR,
        LookupError::TooManyLinks => errno::ELOOP,
    }
}

/// Looks up `path` (absolute, or relative to the root).
pub fn resolve(path: &str, follow_last: bool) -> Result<Entry<'static>, Errno> {
    if path.is_empty() {
        return Err(errno::ENOENT);
    }
    let archive = archive().ok_or(errno::ENOENT)?;
    archive.resolve(path, follow_last).map_err(lookup_errno)
}

/// The bytes of the program at `path`, and its resolved path.
pub fn read_program(path: &str) -> Result<(&'static [u8], String), Errno> {
    let entry = resolve(path, true)?;
    if entry.is_directory() {
        return Err(errno::EACCES);
    }
    if !entry.is_file() || entry.permissions() & 0o111 == 0 {
        return Err(errno::EACCES);
    }
    let mut resolved = String::from("/");
    resolved.push_str(entry.name);
    Ok((entry.data, resolved))
}

/// What an open descriptor refers to.
pub enum Open {
    /// COM1 through instance 0.
    Console,
    /// A regular file of the initramfs, read-only.
    File { entry: Entry<'static>, offset: Mutex<u64> },
    /// A directory of the initramfs, with where `getdents64` stands in its listing.
    Directory { entry: Entry<'static>, listing: Mutex<Listing> },
}

/// Where `getdents64` stands in a directory: `.` and `..` first, then the children, read
/// once each from the archive as the listing goes on (a listing is quadratic in the archive's
/// size, so it is never restarted except by `lseek(fd, 0, SEEK_SET)`).
pub struct Listing {
    /// Entries handed out so far, `.` and `..` included (the `d_off` of the last one).
    pub handed_out: usize,
    /// The children not handed out yet.
    pub children: core::iter::Peekable<initramfs::ReadDirectory<'static>>,
}

impl Listing {
    /// The listing of `directory` from its start.
    pub fn start(directory: &Entry<'static>) -> Result<Self, Errno> {
        let archive = archive().ok_or(errno::ENOENT)?;
        let children = archive.read_dir(&alloc::format!("/{}", directory.name)).map_err(lookup_errno)?;
        Ok(Self { handed_out: 0, children: children.peekable() })
    }
}

/// One descriptor slot: the open file (shared after `fork` and `dup`) and its `FD_CLOEXEC`.
#[derive(Clone)]
struct Slot {
    open: Arc<Open>,
    close_on_exec: bool,
}

/// Most descriptors a process holds (`RLIMIT_NOFILE`).
pub const MAX_FILES: usize = 1024;

/// A process's descriptors.
#[derive(Clone)]
pub struct FileTable {
    slots: Vec<Option<Slot>>,
}

impl FileTable {
    /// fds 0, 1 and 2 on the console.
    pub fn with_console() -> Self {
        let console = Arc::new(Open::Console);
        let slot = Some(Slot { open: console, close_on_exec: false });
        Self { slots: alloc::vec![slot.clone(), slot.clone(), slot] }
    }

    /// The open file behind `fd`.
    pub fn get(&self, fd: i64) -> Result<Arc<Open>, Errno> {
        usize::try_from(fd)
            .ok()
            .and_then(|fd| self.slots.get(fd))
            .and_then(|slot| slot.as_ref())
            .map(|slot| slot.open.clone())
            .ok_or(errno::EBADF)
    }

    /// Installs `open` at the lowest free descriptor at or above `lowest`.
    pub fn install(&mut self, open: Arc<Open>, close_on_exec: bool, lowest: usize) -> Result<usize, Errno> {
        let free =
            (lowest..MAX_FILES).find(|&fd| self.slots.get(fd).is_none_or(|s| s.is_none())).ok_or(errno::EMFILE)?;
        if free >= self.slots.len() {
            self.slots.resize(free + 1, None);
        }
        self.slots[free] = Some(Slot { open, close_on_exec });
        Ok(free)
    }

    /// Puts `open` at exactly `fd` (dup2), closing what was there.
    pub fn install_at(&mut self, fd: usize, open: Arc<Open>, close_on_exec: bool) -> Result<(), Errno> {
        if fd >= MAX_FILES {
            return Err(errno::EBADF);
        }
        if fd >= self.slots.len() {
            self.slots.resize(fd + 1, None);
        }
        self.slots[fd] = Some(Slot { open, close_on_exec });
        Ok(())
    }

    /// Closes `fd`.
    pub fn close(&mut self, fd: i64) -> Result<(), Errno> {
        let slot = usize::try_from(fd).ok().and_then(|fd| self.slots.get_mut(fd)).ok_or(errno::EBADF)?;
        slot.take().map(drop).ok_or(errno::EBADF)
    }

    /// `FD_CLOEXEC` of `fd`.
    pub fn close_on_exec_flag(&mut self, fd: i64) -> Result<&mut bool, Errno> {
        usize::try_from(fd)
            .ok()
            .and_then(|fd| self.slots.get_mut(fd))
            .and_then(|slot| slot.as_mut())
            .map(|slot| &mut slot.close_on_exec)
            .ok_or(errno::EBADF)
    }

    /// At `execve`: closes every descriptor marked `FD_CLOEXEC`.
    pub fn close_on_exec(&mut self) {
        for slot in &mut self.slots {
            if slot.as_ref().is_some_and(|s| s.close_on_exec) {
                *slot = None;
            }
        }
    }

    /// At exit.
    pub fn close_all(&mut self) {
        self.slots.clear();
    }
}

/// `struct stat` of an initramfs entry [Linux arch/x86/include/uapi/asm/stat.h].
pub fn stat_of(entry: &Entry<'_>) -> linux_raw_sys::general::stat {
    // SAFETY: `stat` is plain integers, for which all zeroes is a valid value.
    let mut stat: linux_raw_sys::general::stat = unsafe { core::mem::zeroed() };
    stat.st_dev = 1;
    stat.st_ino = u64::from(entry.inode).max(1);
    stat.st_nlink = u64::from(entry.nlink.max(1));
    stat.st_mode = entry.mode;
    stat.st_uid = entry.uid;
    stat.st_gid = entry.gid;
    stat.st_rdev = (u64::from(entry.node_major) << 8) | u64::from(entry.node_minor);
    stat.st_size = entry.data.len() as i64;
    stat.st_blksize = 4096;
    stat.st_blocks = entry.data.len().div_ceil(512) as i64;
    stat.st_mtime = u64::from(entry.mtime);
    stat.st_atime = u64::from(entry.mtime);
    stat.st_ctime = u64::from(entry.mtime);
    stat
}

/// `struct stat` of the console (a character device, like `/dev/ttyS0`: 4, 64).
pub fn console_stat() -> linux_raw_sys::general::stat {
    // SAFETY: as in `stat_of`.
    let mut stat: linux_raw_sys::general::stat = unsafe { core::mem::zeroed() };
    stat.st_dev = 5;
    stat.st_ino = 1;
    stat.st_nlink = 1;
    stat.st_mode = initramfs::mode::CHARACTER_DEVICE | 0o620;
    stat.st_rdev = (4 << 8) | 64;
    stat.st_blksize = 1024;
    stat
}

/// `d_type` of an entry (`DT_*`).
pub fn directory_entry_type(entry: &Entry<'_>) -> u8 {
    match entry.mode & initramfs::mode::TYPE_MASK {
        initramfs::mode::DIRECTORY => 4,
        initramfs::mode::REGULAR => 8,
        initramfs::mode::SYMLINK => 10,
        initramfs::mode::CHARACTER_DEVICE => 2,
        initramfs::mode::BLOCK_DEVICE => 6,
        initramfs::mode::FIFO => 1,
        initramfs::mode::SOCKET => 12,
        _ => 0,
    }
}

/// Joins a path given to `openat` with the directory it is relative to.
pub fn join(directory: &str, path: &str) -> String {
    if path.starts_with('/') || directory.is_empty() {
        return String::from(path);
    }
    let mut joined = String::from(directory);
    if !joined.ends_with('/') {
        joined.push('/');
    }
    joined.push_str(path);
    joined
}
