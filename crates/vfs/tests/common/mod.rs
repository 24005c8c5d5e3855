//! What the tests share: a VFS over a small archive, a process list and cores they can change,
//! a clock.
#![allow(dead_code)] // Each test file uses its own part.

use initramfs::{Archive, Writer};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use vfs::{Context, Errno, HeapPageStore, NodeId, ProcFile, ProcSource, SysSource, Vfs};

/// A clock that moves one nanosecond per reading, from a fixed date, so that every change
/// gets a later time than the one before.
pub fn clock() -> u64 {
    static NOW: AtomicU64 = AtomicU64::new(1_700_000_000_000_000_000);
    NOW.fetch_add(1, Ordering::Relaxed)
}

/// A process list the test changes while the VFS holds it, and the descriptors of some of
/// them (by pid: number and link target); each file's text names the file, every program is
/// `/bin/busybox`.
#[derive(Clone, Default)]
pub struct Processes(pub Arc<Mutex<Vec<u32>>>, pub Arc<Mutex<Descriptors>>);

/// Each process's descriptors: number and link target.
pub type Descriptors = BTreeMap<u32, Vec<(u32, Vec<u8>)>>;

impl ProcSource for Processes {
    fn pids(&self) -> Vec<u32> {
        self.0.lock().unwrap().clone()
    }

    fn generate(&self, file: ProcFile) -> Result<Vec<u8>, Errno> {
        let pid = match file {
            ProcFile::Status(pid) | ProcFile::Cmdline(pid) | ProcFile::Stat(pid) | ProcFile::Comm(pid) => Some(pid),
            _ => None,
        };
        if pid.is_some_and(|pid| !self.pids().contains(&pid)) {
            return Err(linux_raw_sys::errno::ENOENT);
        }
        Ok(format!("{file:?}\n").into_bytes())
    }

    fn descriptors(&self, pid: u32) -> Result<Vec<(u32, Vec<u8>)>, Errno> {
        if !self.pids().contains(&pid) {
            return Err(linux_raw_sys::errno::ENOENT);
        }
        Ok(self.1.lock().unwrap().get(&pid).cloned().unwrap_or_default())
    }

    fn program(&self, pid: u32) -> Result<Vec<u8>, Errno> {
        if !self.pids().contains(&pid) {
            return Err(linux_raw_sys::errno::ENOENT);
        }
        Ok(b"/bin/busybox".to_vec())
    }
}

/// A machine's cores, which the test stops and starts behind the VFS's back, and which
/// records every switch `/sys` asks of it.
#[derive(Clone)]
pub struct Cores {
    /// Whether each core runs.
    pub online: Arc<Mutex<Vec<bool>>>,
    /// Every [`SysSource::set_online`] call, in order.
    pub switches: Arc<Mutex<Vec<(usize, bool)>>>,
    /// What the next switches answer instead of switching (the kernel's `EBUSY`, `EPERM`...).
    pub refusal: Arc<Mutex<Option<Errno>>>,
}

impl Cores {
    /// `count` cores, all running.
    pub fn new(count: usize) -> Self {
        Self { online: Arc::new(Mutex::new(vec![true; count])), switches: Arc::default(), refusal: Arc::default() }
    }

    pub fn set(&self, core: usize, online: bool) {
        self.online.lock().unwrap()[core] = online;
    }

    pub fn switches(&self) -> Vec<(usize, bool)> {
        self.switches.lock().unwrap().clone()
    }
}

impl SysSource for Cores {
    fn core_count(&self) -> usize {
        self.online.lock().unwrap().len()
    }

    fn is_online(&self, core: usize) -> bool {
        self.online.lock().unwrap()[core]
    }

    fn set_online(&self, core: usize, online: bool) -> Result<(), Errno> {
        self.switches.lock().unwrap().push((core, online));
        if let Some(refusal) = *self.refusal.lock().unwrap() {
            return Err(refusal);
        }
        self.set(core, online);
        Ok(())
    }
}

/// Reef's image in small: busybox with applet links of every kind, a few files, and the
/// directories the real image has where the mounts go.
pub fn archive_bytes() -> Vec<u8> {
    let mut writer = Writer::new();
    for directory in ["bin", "sbin", "etc", "usr", "usr/bin", "dev", "proc", "tmp"] {
        writer.directory(directory, 0o755);
    }
    writer.file("bin/busybox", 0o755, b"\x7fELF busybox");
    writer.symlink("bin/ls", "busybox");
    writer.symlink("bin/sh", "./busybox");
    writer.symlink("sbin/init", "../bin/busybox");
    writer.symlink("usr/bin/env", "/bin/busybox");
    writer.file("etc/motd", 0o644, b"hello\n");
    writer.file("etc/hello.txt", 0o644, b"one\ntwo\nthree\n");
    writer.character_device("dev/console", 0o600, 5, 1);
    writer.directory("sys", 0o555);
    writer.finish()
}

pub struct Fixture {
    pub vfs: Vfs,
    pub processes: Processes,
    /// Four cores, all running.
    pub cores: Cores,
    /// Process 1 in `/`.
    pub context: Context,
}

/// A VFS over [`archive_bytes`] with processes 1 and 42 and four running cores, tmpfs limited
/// to `page_limit`.
pub fn fixture(page_limit: usize) -> Fixture {
    let bytes: &'static [u8] = Box::leak(archive_bytes().into_boxed_slice());
    let archive = Archive::parse(bytes).unwrap();
    let processes = Processes(Arc::new(Mutex::new(vec![1, 42])), Arc::default());
    let cores = Cores::new(4);
    let pages = Box::new(HeapPageStore::new());
    let vfs = Vfs::new(Some(archive), pages, page_limit, clock, Box::new(processes.clone()), Arc::new(cores.clone()));
    let context = Context { pid: 1, cwd: vfs.root(), root: vfs.root(), credentials: vfs::Credentials::root() };
    Fixture { vfs, processes, cores, context }
}

impl Fixture {
    pub fn resolve(&self, path: &str) -> Result<NodeId, Errno> {
        self.vfs.resolve(&self.context, None, path.as_bytes(), true)
    }

    pub fn lresolve(&self, path: &str) -> Result<NodeId, Errno> {
        self.vfs.resolve(&self.context, None, path.as_bytes(), false)
    }

    pub fn parent(&self, path: &str) -> Result<(NodeId, Vec<u8>), Errno> {
        self.vfs.resolve_parent(&self.context, None, path.as_bytes())
    }

    pub fn create(&mut self, path: &str) -> Result<NodeId, Errno> {
        let (directory, name) = self.parent(path)?;
        self.vfs.create(&self.context, directory, &name, 0o644, false).map(|(node, _)| node)
    }

    pub fn make_directory(&mut self, path: &str) -> Result<NodeId, Errno> {
        let (directory, name) = self.parent(path)?;
        self.vfs.make_directory(directory, &name, 0o755)
    }

    pub fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        let (directory, name) = self.parent(path)?;
        self.vfs.unlink(directory, &name)
    }

    pub fn remove_directory(&mut self, path: &str) -> Result<(), Errno> {
        let (directory, name) = self.parent(path)?;
        self.vfs.remove_directory(directory, &name)
    }

    pub fn rename(&mut self, from: &str, to: &str, flags: u32) -> Result<(), Errno> {
        let (from_directory, from_name) = self.parent(from)?;
        let (to_directory, to_name) = self.parent(to)?;
        self.vfs.rename(from_directory, &from_name, to_directory, &to_name, flags)
    }

    pub fn symlink(&mut self, target: &str, path: &str) -> Result<NodeId, Errno> {
        let (directory, name) = self.parent(path)?;
        self.vfs.symlink(target.as_bytes(), directory, &name)
    }

    pub fn link(&mut self, existing: &str, path: &str) -> Result<(), Errno> {
        let node = self.lresolve(existing)?;
        let (directory, name) = self.parent(path)?;
        self.vfs.link(node, directory, &name)
    }

    /// The whole contents of a regular file.
    pub fn contents(&self, node: NodeId) -> Result<Vec<u8>, Errno> {
        let size = self.vfs.stat(node)?.size as usize;
        let mut buffer = vec![0; size + 1];
        let read = self.vfs.read(node, 0, &mut buffer)?;
        buffer.truncate(read);
        Ok(buffer)
    }

    /// The names a full listing of `node` gives, `.` and `..` included, in order.
    pub fn listing(&self, node: NodeId) -> Result<Vec<String>, Errno> {
        let mut names = Vec::new();
        let mut cursor = 0;
        while let Some((entry, next)) = self.vfs.read_directory(node, cursor)? {
            names.push(String::from_utf8(entry.name).unwrap());
            cursor = next;
        }
        Ok(names)
    }
}
