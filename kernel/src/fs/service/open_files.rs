//! The open file table: what a handle refers to, opening a path or a descriptor's link,
//! the names `/proc/<pid>/fd` shows, and releasing the last reference.

use super::pipes::Pipe;
use super::request::{flags, At};
use super::{Errno, Outcome, Reply, Service};
use abi::file::{HandleKind, Metadata, CONSOLE_HANDLE};
use alloc::vec::Vec;
use linux_raw_sys::errno;
use vfs::{Context, Device, NodeId, NodeKind};

/// What an open file refers to.
pub(super) enum Object {
    Regular(NodeId),
    Directory {
        node: NodeId,
        cursor: u64,
    },
    /// A `/proc` file: its text, taken when it was opened.
    Proc {
        node: NodeId,
        text: Vec<u8>,
    },
    /// A `/sys` file: its text, taken when it was opened; a write is a request to the
    /// [`vfs::SysSource`] (`cpu<K>/online` stops or starts core K).
    Sys {
        node: NodeId,
        text: Vec<u8>,
    },
    Device {
        node: Option<NodeId>,
        device: Device,
    },
    PipeReader(u64),
    PipeWriter(u64),
    /// Both ends of a pipe: a FIFO opened for reading and writing (`O_RDWR`), which Linux
    /// opens at once as a reader and a writer.
    PipeBoth(u64),
    /// An `epoll` instance (`epoll.rs`).
    Epoll(u64),
    /// An `AF_UNIX` socket (`sockets.rs`).
    Socket(u64),
}

/// One open file description: shared by every descriptor `dup` and `fork` made of it.
pub(super) struct OpenFile {
    pub(super) object: Object,
    /// Access mode and status flags (`O_APPEND`, `O_NONBLOCK`).
    pub(super) flags: u64,
    pub(super) offset: u64,
    /// Client instances' references (each instance holds one per handle it uses).
    pub(super) references: u32,
    /// What `/proc/<pid>/fd` links name it by: the path it was opened under (links followed),
    /// `pipe:[N]`, `/dev/console`.
    pub(super) name: Vec<u8>,
}

impl OpenFile {
    fn kind(&self) -> HandleKind {
        match self.object {
            Object::Regular(_) => HandleKind::Regular,
            Object::Directory { .. } => HandleKind::Directory,
            // Text made at open, read as a `/proc` file is: a read gives what is there.
            Object::Proc { .. } | Object::Sys { .. } => HandleKind::Proc,
            Object::Device { device: Device::Console | Device::Tty, .. } => HandleKind::Console,
            Object::Device { device: Device::Null, .. } => HandleKind::Null,
            Object::Device { device: Device::Zero, .. } => HandleKind::Zero,
            Object::Device { .. } => HandleKind::Device,
            Object::PipeReader(_) | Object::PipeWriter(_) | Object::PipeBoth(_) => HandleKind::Pipe,
            Object::Epoll(_) => HandleKind::Epoll,
            Object::Socket(_) => HandleKind::Socket,
        }
    }

    pub(super) fn readable(&self) -> bool {
        self.flags & flags::ACCESS_MODE != flags::WRITE_ONLY
    }

    pub(super) fn writable(&self) -> bool {
        matches!(self.flags & flags::ACCESS_MODE, flags::WRITE_ONLY | flags::READ_WRITE)
    }
}

/// What opening a descriptor's link gives: an open already made (a pipe's new end), or a
/// node to open as a path's would be.
enum Reopened {
    Done(Outcome),
    Node(NodeId, Vec<u8>),
}

/// The process and descriptor a path names through a descriptor link, as Linux's
/// `/proc/<pid>/fd/N` (and `/proc/self/fd/N`) and the `/dev` links to them: `/dev/fd/N`,
/// `/dev/stdin`, `/dev/stdout`, `/dev/stderr`. `pid` is the caller's. Only absolute paths.
pub(super) fn descriptor_link(pid: u32, path: &[u8]) -> Option<(u32, u32)> {
    let number = |text: &[u8]| core::str::from_utf8(text).ok()?.parse::<u32>().ok();
    match path {
        b"/dev/stdin" => return Some((pid, 0)),
        b"/dev/stdout" => return Some((pid, 1)),
        b"/dev/stderr" => return Some((pid, 2)),
        _ => {}
    }
    if let Some(fd) = path.strip_prefix(b"/dev/fd/") {
        return Some((pid, number(fd)?));
    }
    let rest = path.strip_prefix(b"/proc/")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    let owner = match &rest[..slash] {
        b"self" => pid,
        digits => number(digits)?,
    };
    Some((owner, number(rest[slash..].strip_prefix(b"/fd/")?)?))
}

/// The reply to an open: the new handle and its kind.
pub(super) fn opened(handle: u64, kind: HandleKind) -> Outcome {
    Outcome::Done(Reply { words: [handle, kind as u64], ..Reply::value(0, 0) })
}

impl Service {
    /// The context a path of process `pid` resolves in: `working_directory` and `root` are its
    /// handles of its working and root directories (`None`: the file system's root).
    pub(super) fn context(
        &self,
        pid: u32,
        working_directory: Option<u64>,
        root: Option<u64>,
    ) -> Result<Context, Errno> {
        let directory = |handle: Option<u64>| match handle {
            None => Ok(self.vfs.root()),
            Some(handle) => self.directory_node(handle),
        };
        Ok(Context {
            pid,
            cwd: directory(working_directory)?,
            root: directory(root)?,
            credentials: self.credentials().clone(),
        })
    }

    pub(super) fn directory_node(&self, handle: u64) -> Result<NodeId, Errno> {
        match self.open.get(&handle).map(|f| &f.object) {
            Some(Object::Directory { node, .. }) => Ok(*node),
            Some(_) => Err(errno::ENOTDIR),
            None => Err(errno::EBADF),
        }
    }

    /// The directory an `*at` call's path starts from, if it named one.
    pub(super) fn base(&self, directory: Option<u64>) -> Result<Option<NodeId>, Errno> {
        directory.map(|handle| self.directory_node(handle)).transpose()
    }

    /// The node an open file stands for (none for the console and `pipe()`'s pipes).
    pub(super) fn node_of(&self, handle: u64) -> Result<Option<NodeId>, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        Ok(match &file.object {
            Object::Regular(node)
            | Object::Directory { node, .. }
            | Object::Proc { node, .. }
            | Object::Sys { node, .. } => Some(*node),
            Object::Device { node, .. } => *node,
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => {
                self.pipes.get(pipe).and_then(|pipe| pipe.node)
            }
            Object::Epoll(_) | Object::Socket(_) => None,
        })
    }

    pub(super) fn new_handle(&mut self, file: OpenFile) -> u64 {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.open.insert(handle, file);
        handle
    }

    /// Opens `path` for process `pid`. `done` is 0 for a new open, else the handle of a FIFO
    /// open waiting for the other end.
    pub(super) fn open_path(
        &mut self,
        pid: u32,
        at: At,
        open_flags: u64,
        mode: u32,
        path: &[u8],
        done: u64,
    ) -> Result<Outcome, Errno> {
        if done != 0 {
            return self.fifo_open_waiting(done);
        }
        let context = self.context(pid, at.working_directory, at.root)?;
        let base = self.base(at.directory)?;
        let follow = open_flags & flags::NO_FOLLOW == 0;
        let magic = descriptor_link(pid, path).map(|(owner, fd)| self.reopen(&context, owner, fd, open_flags));
        let resolved = match magic {
            Some(Ok(Reopened::Done(outcome))) => return Ok(outcome),
            Some(Ok(Reopened::Node(node, name))) => Ok((node, name)),
            Some(Err(error)) => return Err(error),
            None => self.vfs.resolve_with_path(&context, base, path, follow),
        };
        let (node, name) = match resolved {
            Ok(_) if open_flags & flags::CREATE != 0 && open_flags & flags::EXCLUSIVE != 0 => {
                return Err(errno::EEXIST)
            }
            Ok(found) => {
                // A file made by this open is not checked against its own mode, as on Linux.
                self.check_open(found.0, open_flags)?;
                found
            }
            Err(errno::ENOENT) if open_flags & flags::CREATE != 0 => {
                let (directory, name) = self.vfs.resolve_parent(&context, base, path)?;
                let node = self.vfs.create(&context, directory, &name, mode, true)?.0;
                self.give_to_maker(directory, node)?;
                (node, self.vfs.path_in(directory, &name).unwrap_or_default())
            }
            Err(error) => return Err(error),
        };
        let access = open_flags & flags::ACCESS_MODE;
        let wants_write = access == flags::WRITE_ONLY || access == flags::READ_WRITE;
        let status = open_flags & (flags::ACCESS_MODE | flags::APPEND | flags::NONBLOCK);
        let object = match self.vfs.kind(node)? {
            NodeKind::Directory => {
                if wants_write {
                    return Err(errno::EISDIR);
                }
                Object::Directory { node, cursor: 0 }
            }
            _ if open_flags & flags::DIRECTORY != 0 => return Err(errno::ENOTDIR),
            NodeKind::Symlink => return Err(errno::ELOOP),
            NodeKind::Regular => {
                if wants_write {
                    self.vfs.check_writable(node)?;
                    if open_flags & flags::TRUNCATE != 0 {
                        self.vfs.truncate(node, 0)?;
                    }
                }
                Object::Regular(node)
            }
            NodeKind::Device(device) => Object::Device { node: Some(node), device },
            NodeKind::Fifo => return self.open_fifo(node, status, name),
            // Sockets (Linux: `connect` them, not open) and devices of the archive outside
            // `/dev`: nothing serves them.
            NodeKind::Socket | NodeKind::Special => return Err(errno::ENXIO),
            NodeKind::ProcFile(file) => {
                if wants_write {
                    return Err(errno::EACCES);
                }
                let text = if let vfs::ProcFile::Net(view) = file {
                    // The sockets are the service's own: written here.
                    self.net_text(view).into_bytes()
                } else if file == vfs::ProcFile::Reef(vfs::ReefView::Net) {
                    // So is the network stack.
                    self.network_text().into_bytes()
                } else {
                    // The counts `/proc` shows are the service's own, taken now, while it
                    // holds the lock the text's maker cannot take again.
                    self.snapshot_counts();
                    self.vfs.proc_contents(node)?
                };
                Object::Proc { node, text }
            }
            NodeKind::SysFile(file) => {
                // Linux refuses to open a read-only attribute for writing, root included
                // (`kernfs_fop_open`). `O_TRUNC`, which `echo 0 >` opens with, changes
                // nothing: each write is read whole.
                if wants_write && !file.is_writable() {
                    return Err(errno::EACCES);
                }
                Object::Sys { node, text: self.vfs.sys_contents(node)? }
            }
        };
        if !matches!(object, Object::Device { .. }) {
            self.vfs.open_node(node)?;
        }
        let file = OpenFile { object, flags: status, offset: 0, references: 1, name };
        let kind = file.kind();
        let handle = self.new_handle(file);
        Ok(opened(handle, kind))
    }

    /// Opens what descriptor `fd` of process `owner` names, as Linux opens a
    /// `/proc/<pid>/fd/N` link (a "magic" link, followed to the open file, not to a path): a
    /// pipe gives a new end of the same pipe for the access asked (`O_RDWR`: the end the
    /// descriptor is), a file or a device its node, opened anew (its own offset).
    fn reopen(&mut self, context: &Context, owner: u32, fd: u32, open_flags: u64) -> Result<Reopened, Errno> {
        let handle = crate::fs::proc::descriptor_handle(owner, fd).ok_or(errno::ENOENT)?;
        if handle == CONSOLE_HANDLE {
            let console = self.vfs.resolve_with_path(context, None, b"/dev/console", true)?;
            return Ok(Reopened::Node(console.0, console.1));
        }
        let file = self.open.get(&handle).ok_or(errno::ENOENT)?;
        let name = file.name.clone();
        let status = open_flags & (flags::ACCESS_MODE | flags::APPEND | flags::NONBLOCK);
        let (pipe, end) = match &file.object {
            Object::PipeReader(pipe) => (*pipe, (true, false)),
            Object::PipeWriter(pipe) => (*pipe, (false, true)),
            Object::PipeBoth(pipe) => (*pipe, (true, true)),
            Object::Regular(node) | Object::Directory { node, .. } => return Ok(Reopened::Node(*node, name)),
            Object::Device { node: Some(node), .. } => return Ok(Reopened::Node(*node, name)),
            _ => return Err(errno::ENXIO),
        };
        let (reading, writing) = match status & flags::ACCESS_MODE {
            flags::WRITE_ONLY => (false, true),
            flags::READ_WRITE => end,
            _ => (true, false),
        };
        self.pipes.get_mut(&pipe).ok_or(errno::ENOENT)?.add_ends(reading, writing);
        self.changed = true;
        let object = Pipe::end(pipe, reading, writing);
        let handle = self.new_handle(OpenFile { object, flags: status, offset: 0, references: 1, name });
        Ok(Reopened::Done(opened(handle, HandleKind::Pipe)))
    }

    /// What `/proc/<pid>/fd` shows for `handle`: a directory by its path now, a file by the
    /// path it was opened under, with Linux's ` (deleted)` once its last name is gone.
    pub(super) fn name_of(&self, handle: u64) -> Option<Vec<u8>> {
        let file = self.open.get(&handle)?;
        let node = match &file.object {
            Object::Directory { node, .. } => {
                if let Ok(path) = self.vfs.path_of(*node) {
                    return Some(path);
                }
                Some(*node)
            }
            Object::Regular(node) => Some(*node),
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => {
                self.pipes.get(pipe).and_then(|pipe| pipe.node)
            }
            _ => None,
        };
        let mut name = file.name.clone();
        if node.is_some_and(|node| self.vfs.stat(node).map_or(true, |metadata| metadata.links == 0)) {
            name.extend_from_slice(b" (deleted)");
        }
        Some(name)
    }

    /// One reference to `handle` fewer; the last closes the open file.
    pub(super) fn release(&mut self, handle: u64) {
        if handle == CONSOLE_HANDLE {
            return;
        }
        let Some(file) = self.open.get_mut(&handle) else { return };
        file.references = file.references.saturating_sub(1);
        if file.references > 0 {
            return;
        }
        let Some(file) = self.open.remove(&handle) else { return };
        self.forget_in_epolls(handle, &file.object);
        match file.object {
            Object::Regular(node)
            | Object::Directory { node, .. }
            | Object::Proc { node, .. }
            | Object::Sys { node, .. } => {
                self.unlock(node, handle);
                let _ = self.vfs.close_node(node);
            }
            Object::Device { .. } => {}
            Object::PipeReader(pipe) => self.close_pipe_end(handle, pipe, true, false),
            Object::PipeWriter(pipe) => self.close_pipe_end(handle, pipe, false, true),
            Object::PipeBoth(pipe) => self.close_pipe_end(handle, pipe, true, true),
            Object::Epoll(_) => {}
            Object::Socket(id) => self.close_socket(handle, id),
        }
    }

    /// A node's metadata as the wire carries it.
    pub(super) fn metadata(&self, node: NodeId) -> Result<Metadata, Errno> {
        Ok(crate::fs::wire_metadata(&self.vfs.stat(node)?))
    }

    /// `fstat` of an open file.
    pub(super) fn stat_handle(&self, handle: u64) -> Result<Metadata, Errno> {
        let file = self.open.get(&handle).ok_or(errno::EBADF)?;
        match &file.object {
            Object::Regular(node)
            | Object::Directory { node, .. }
            | Object::Proc { node, .. }
            | Object::Sys { node, .. } => self.metadata(*node),
            Object::Device { node: Some(node), .. } => self.metadata(*node),
            Object::Device { node: None, .. } => Ok(Metadata {
                device: 6,
                inode: 1,
                mode: initramfs::mode::CHARACTER_DEVICE | 0o620,
                links: 1,
                rdev: (5 << 8) | 1,
                ..Metadata::default()
            }),
            Object::PipeReader(pipe) | Object::PipeWriter(pipe) | Object::PipeBoth(pipe) => self.stat_pipe(*pipe),
            // An anonymous inode, as Linux's: no type bits, read and write for the owner.
            Object::Epoll(id) => Ok(Metadata { device: 14, inode: *id, mode: 0o600, links: 1, ..Metadata::default() }),
            Object::Socket(id) => Ok(self.stat_socket(*id)),
        }
    }
}
