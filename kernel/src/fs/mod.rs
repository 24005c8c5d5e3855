//! Files a process sees: descriptors that name open files of the one file service (on
//! instance 0: the initramfs at `/`, tmpfs at `/tmp`, `/dev`, `/proc`, `/sys`, pipes, the
//! console).
//! Every instance also maps the initramfs read-only, to load programs without a round trip.
//!
//! Files sit below processes, the cores layer and control, and name none of them: what they
//! need of those (the running process, signals from the terminal's keys, starting and
//! stopping a core, the `/proc/reef` views) is registered at boot (`boot.rs`). No `unsafe`:
//! raw memory is the memory manager's (`mm::held_frames` holds tmpfs's and pipes' pages).
#![deny(unsafe_code)]

pub mod client;
pub mod console;
pub mod local;
pub mod magic_key;
pub mod mapped;
pub mod proc;
pub mod service;
pub mod sys;
pub mod terminal;

pub use client::Handle;

use abi::Errno;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use initramfs::{Archive, Entry, LookupError};
use linux_raw_sys::errno;
use spin::Once;

/// The initramfs this instance maps, and its archive once read.
static INITRAMFS_BYTES: Once<&'static [u8]> = Once::new();
static INITRAMFS: Once<Option<Archive<'static>>> = Once::new();

/// Takes the initramfs this instance maps (read-only, the same bytes on every instance). It is
/// read as an archive at its first use: walking its records takes some 200 µs under TCG,
/// which a restarted kernel would add to the pause of the processes it keeps.
pub fn init(bytes: &'static [u8]) {
    if !bytes.is_empty() {
        INITRAMFS_BYTES.call_once(|| bytes);
    }
}

/// Starts this instance's side of the file service: the reply handler everywhere; the
/// service itself (and `/proc`'s process records) on the service's instance.
pub fn start() {
    client::init();
    if serves_files_here() {
        proc::init();
        service::start(archive().copied());
    }
}

/// Whether this instance runs the file service (and owns the console).
pub fn serves_files_here() -> bool {
    crate::core::shared::this_core() as usize == service::SERVICE_CORE
}

/// Work at safe points (idle, return to user): releases dropped handles left, console input,
/// the network stack.
pub fn at_safe_point() {
    client::flush_releases();
    proc::flush_reports();
    service::handle_inbox();
    service::poll_console();
    service::poll_network();
}

/// A node's metadata as the wire (and `stat`) carries it.
pub fn wire_metadata(stat: &vfs::Metadata) -> abi::file::Metadata {
    abi::file::Metadata {
        device: stat.device,
        inode: stat.inode,
        mode: stat.mode,
        links: stat.links.min(u64::from(u32::MAX)) as u32,
        uid: stat.uid,
        gid: stat.gid,
        rdev: stat.rdev,
        size: stat.size,
        blocks: stat.blocks,
        accessed_ns: stat.accessed,
        modified_ns: stat.modified,
        changed_ns: stat.changed,
    }
}

/// The initramfs, if QEMU was given one (read as an archive at the first call).
pub fn archive() -> Option<&'static Archive<'static>> {
    if let Some(archive) = INITRAMFS.get() {
        return archive.as_ref();
    }
    // The first read with interrupts off: a handler that wanted the archive meanwhile would
    // otherwise wait on this core for a read it interrupted.
    crate::arch::cpu::without_interrupts(|| {
        INITRAMFS.call_once(|| match Archive::parse(INITRAMFS_BYTES.get()?) {
            Ok(archive) => Some(archive),
            Err(error) => {
                log::error!("the initramfs is not a cpio newc archive ({error:?}): no programs to run");
                None
            }
        })
    })
    .as_ref()
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
pub fn read_program(path: &str) -> Result<(&'static [u8], String, ProgramFile), Errno> {
    let entry = resolve(path, true)?;
    if entry.is_directory() {
        return Err(errno::EACCES);
    }
    if !entry.is_file() || entry.permissions() & 0o111 == 0 {
        return Err(errno::EACCES);
    }
    let mut resolved = String::from("/");
    resolved.push_str(entry.name);
    Ok((entry.data, resolved, ProgramFile { mode: entry.mode, uid: entry.uid, gid: entry.gid }))
}

/// The mode and owner of a program's file: its set-user-id and set-group-id bits say whose
/// ids it runs with.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProgramFile {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// A program's bytes: the initramfs's own (mapped by every instance), or a copy read
/// through the file service.
pub enum ProgramImage {
    Mapped(&'static [u8]),
    /// Read through the file service; with the file's version when its pages may be shared
    /// (`mapped`): the program's read-only pages then come from the file page cache.
    Read(Vec<u8>, Option<mapped::FileVersion>),
}

impl ProgramImage {
    /// The file's version, for a program whose read-only pages may be shared.
    pub fn version(&self) -> Option<mapped::FileVersion> {
        match self {
            Self::Mapped(_) => None,
            Self::Read(_, version) => *version,
        }
    }
}

impl core::ops::Deref for ProgramImage {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped(bytes) => bytes,
            Self::Read(bytes, _) => bytes,
        }
    }
}

/// Largest program read through the file service (busybox is 2 MiB).
const MAX_READ_PROGRAM: u64 = 32 << 20;

/// The program at `path` for `execve` and spawn: an absolute path of the initramfs without a
/// round trip; anything else (a program written to `/tmp`, a path relative to `working
/// directory`, a path of a process with a changed root: handles or `abi::file::NONE`) read
/// whole through the file service, when the caller may wait for it (`may_ask`: not inside a
/// message handler).
pub fn find_program(
    path: &str,
    (working_directory, root_directory): (u64, u64),
    may_ask: bool,
    as_user: bool,
) -> Result<(ProgramImage, String, ProgramFile), Errno> {
    use abi::file::{FileOp, HandleKind, Metadata, MAX_TRANSFER, NONE};
    let mut words = [0u64; abi::file::REQUEST_WORDS];
    // A caller other than root needs search permission on every directory of the path and
    // execute permission on the file for its class, which the service decides (`access(X_OK)`
    // with the caller's file-system ids), even for a program of the initramfs read in place.
    // A message handler cannot wait for the service: the new process loads it itself.
    if as_user {
        if !may_ask {
            return Err(errno::ENOENT);
        }
        const EXECUTE: u64 = 1;
        words[..4].copy_from_slice(&[NONE, working_directory, EXECUTE, 1]);
        words[abi::file::ROOT_WORD] = root_directory;
        client::call(FileOp::Access, words, path.as_bytes(), &[])?;
    }
    if path.starts_with('/') && root_directory == abi::file::NONE {
        match read_program(path) {
            Ok((bytes, resolved, file)) => return Ok((ProgramImage::Mapped(bytes), resolved, file)),
            Err(errno::ENOENT) if may_ask => {}
            Err(error) => return Err(error),
        }
    } else if !may_ask {
        return Err(errno::ENOENT);
    }
    words = [0u64; abi::file::REQUEST_WORDS];
    words[..4].copy_from_slice(&[NONE, working_directory, 0, 0]);
    words[abi::file::ROOT_WORD] = root_directory;
    let opened = client::call(FileOp::Open, words, path.as_bytes(), &[])?;
    let kind = HandleKind::from_u64(opened.words[1]).ok_or(errno::EIO)?;
    let handle = Handle::adopt(opened.words[0], kind);
    if kind != HandleKind::Regular {
        return Err(errno::EACCES);
    }
    words = [0; abi::file::REQUEST_WORDS];
    words[0] = handle.id;
    let metadata = Metadata::decode(&client::call(FileOp::Stat, words, &[], &[])?.bytes).map_err(|_| errno::EIO)?;
    if metadata.mode & 0o111 == 0 {
        return Err(errno::EACCES);
    }
    if metadata.size > MAX_READ_PROGRAM {
        return Err(errno::E2BIG);
    }
    let mut image = Vec::with_capacity(metadata.size as usize);
    while (image.len() as u64) < metadata.size {
        words[..3].copy_from_slice(&[handle.id, MAX_TRANSFER as u64, image.len() as u64]);
        let chunk = client::call(FileOp::Read, words, &[], &[])?.bytes;
        if chunk.is_empty() {
            break;
        }
        image.extend_from_slice(&chunk);
    }
    // Its absolute name (`/proc/self/exe`: static glibc programs insist on a leading `/`).
    let resolved = if path.starts_with('/') {
        String::from(path)
    } else {
        let mut directory = if working_directory == NONE {
            b"/".to_vec()
        } else {
            words = [0; abi::file::REQUEST_WORDS];
            words[0] = working_directory;
            words[abi::file::ROOT_WORD] = root_directory;
            client::call(FileOp::PathOf, words, &[], &[])?.bytes
        };
        if directory.last() != Some(&b'/') {
            directory.push(b'/');
        }
        let mut joined = String::from_utf8_lossy(&directory).into_owned();
        joined.push_str(path.trim_start_matches("./"));
        joined
    };
    let file = ProgramFile { mode: metadata.mode, uid: metadata.uid, gid: metadata.gid };
    Ok((ProgramImage::Read(image, mapped::FileVersion::of(&metadata)), resolved, file))
}

/// One descriptor slot: the open file (shared after `fork` and `dup`) and its `FD_CLOEXEC`.
#[derive(Clone)]
struct Slot {
    open: Arc<Handle>,
    close_on_exec: bool,
}

/// Most descriptors a process holds (`RLIMIT_NOFILE`).
pub const MAX_FILES: usize = 1024;

/// A process's descriptors.
pub struct FileTable {
    slots: Vec<Option<Slot>>,
    /// Descriptors came or went since the service was last told (`/proc/<pid>/fd`,
    /// [`proc::report_descriptors`]). A new table, a fork's copy included, is unreported.
    unreported: bool,
}

impl Clone for FileTable {
    fn clone(&self) -> Self {
        Self { slots: self.slots.clone(), unreported: true }
    }
}

impl FileTable {
    /// No descriptors.
    pub fn empty() -> Self {
        Self { slots: Vec::new(), unreported: true }
    }

    /// fds 0, 1 and 2 on the console.
    pub fn with_console() -> Self {
        let console = Arc::new(Handle::console());
        let slot = Some(Slot { open: console, close_on_exec: false });
        Self { slots: alloc::vec![slot.clone(), slot.clone(), slot], unreported: true }
    }

    /// The descriptors and the handles they name, if they changed since the last call.
    pub fn take_changes(&mut self) -> Option<Vec<(u32, u64)>> {
        if !core::mem::take(&mut self.unreported) {
            return None;
        }
        Some(self.all().map(|(fd, handle, _)| (fd as u32, handle.id)).collect())
    }

    /// The open file behind `fd`.
    pub fn get(&self, fd: i64) -> Result<Arc<Handle>, Errno> {
        usize::try_from(fd)
            .ok()
            .and_then(|fd| self.slots.get(fd))
            .and_then(|slot| slot.as_ref())
            .map(|slot| slot.open.clone())
            .ok_or(errno::EBADF)
    }

    /// Installs `open` at the lowest free descriptor at or above `lowest`.
    pub fn install(&mut self, open: Arc<Handle>, close_on_exec: bool, lowest: usize) -> Result<usize, Errno> {
        let free =
            (lowest..MAX_FILES).find(|&fd| self.slots.get(fd).is_none_or(|s| s.is_none())).ok_or(errno::EMFILE)?;
        if free >= self.slots.len() {
            self.slots.resize(free + 1, None);
        }
        self.slots[free] = Some(Slot { open, close_on_exec });
        self.unreported = true;
        Ok(free)
    }

    /// Puts `open` at exactly `fd` (dup2), closing what was there.
    pub fn install_at(&mut self, fd: usize, open: Arc<Handle>, close_on_exec: bool) -> Result<(), Errno> {
        if fd >= MAX_FILES {
            return Err(errno::EBADF);
        }
        if fd >= self.slots.len() {
            self.slots.resize(fd + 1, None);
        }
        self.slots[fd] = Some(Slot { open, close_on_exec });
        self.unreported = true;
        Ok(())
    }

    /// Closes `fd`.
    pub fn close(&mut self, fd: i64) -> Result<(), Errno> {
        let slot = usize::try_from(fd).ok().and_then(|fd| self.slots.get_mut(fd)).ok_or(errno::EBADF)?;
        slot.take().map(drop).ok_or(errno::EBADF)?;
        self.unreported = true;
        Ok(())
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
                self.unreported = true;
            }
        }
    }

    /// `close_range`: closes the descriptors from `first` to `last` (inclusive), or only marks
    /// them `FD_CLOEXEC` when `mark_only`.
    pub fn close_range(&mut self, first: usize, last: usize, mark_only: bool) {
        let end = last.saturating_add(1).min(self.slots.len());
        for slot in self.slots.iter_mut().take(end).skip(first) {
            if mark_only {
                if let Some(slot) = slot.as_mut() {
                    slot.close_on_exec = true;
                }
            } else if slot.take().is_some() {
                self.unreported = true;
            }
        }
    }

    /// At exit.
    pub fn close_all(&mut self) {
        self.slots.clear();
        self.unreported = true;
    }

    /// The open descriptors not marked `FD_CLOEXEC`, for a process started elsewhere.
    pub fn inherited(&self) -> impl Iterator<Item = (usize, &Arc<Handle>)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(fd, slot)| slot.as_ref().filter(|slot| !slot.close_on_exec).map(|slot| (fd, &slot.open)))
    }

    /// Every open descriptor: its number, open file and `FD_CLOEXEC` (a process moving to
    /// another core takes them all).
    pub fn all(&self) -> impl Iterator<Item = (usize, &Arc<Handle>, bool)> {
        self.slots.iter().enumerate().filter_map(|(fd, slot)| slot.as_ref().map(|s| (fd, &s.open, s.close_on_exec)))
    }

    /// A table of `descriptors` (fd, handle), none of them `FD_CLOEXEC`.
    pub fn from_inherited(descriptors: Vec<(usize, Handle)>) -> Self {
        let mut table = Self::empty();
        for (fd, handle) in descriptors {
            let _ = table.install_at(fd, Arc::new(handle), false);
        }
        table
    }
}

/// `struct stat` of what the service reports [Linux arch/x86/include/uapi/asm/stat.h].
pub fn linux_stat(metadata: &abi::file::Metadata) -> linux_raw_sys::general::stat {
    let split = |ns: u64| (ns / 1_000_000_000, ns % 1_000_000_000);
    let (accessed, accessed_ns) = split(metadata.accessed_ns);
    let (modified, modified_ns) = split(metadata.modified_ns);
    let (changed, changed_ns) = split(metadata.changed_ns);
    // Every field named (padding zero), so no field is left unset without `unsafe`.
    linux_raw_sys::general::stat {
        st_dev: metadata.device,
        st_ino: metadata.inode,
        st_nlink: u64::from(metadata.links),
        st_mode: metadata.mode,
        st_uid: metadata.uid,
        st_gid: metadata.gid,
        __pad0: 0,
        st_rdev: metadata.rdev,
        st_size: metadata.size as i64,
        st_blksize: 4096,
        st_blocks: metadata.blocks as i64,
        st_atime: accessed,
        st_atime_nsec: accessed_ns,
        st_mtime: modified,
        st_mtime_nsec: modified_ns,
        st_ctime: changed,
        st_ctime_nsec: changed_ns,
        __unused: [0; 3],
    }
}
