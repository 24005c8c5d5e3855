//! `/sys`: Linux's CPU hotplug files, computed from the cores a [`SysSource`] lists.
//!
//! Only the part of Linux's sysfs that says which cores exist and run, and switches them:
//!
//! ```text
//! /sys/devices/system/cpu/{offline,online,possible,present}   range lists, `0-1,3\n`
//! /sys/devices/system/cpu/cpu<K>/online                       `1\n` or `0\n`; write 0 or 1 (K > 0)
//! ```
//!
//! No node is stored: a node's inode number says what it is, `(core + 1) << 8 | code` for
//! the nodes of one core and `code` for the others.

use crate::procfs::{decimal, parse_decimal};
use crate::Errno;
use alloc::vec::Vec;
use linux_raw_sys::errno::{EACCES, EINVAL};

/// A text file of `/sys`, and what it is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SysFile {
    /// `devices/system/cpu/online`: the cores that run, as a range list.
    Online,
    /// `devices/system/cpu/offline`: the listed cores that do not run, as a range list.
    Offline,
    /// `devices/system/cpu/possible`: every core the machine lists.
    Possible,
    /// `devices/system/cpu/present`: every core the machine lists, as `possible`: no core of
    /// Reef's machines is added or removed physically.
    Present,
    /// `devices/system/cpu/cpu<K>/online`: `1` when core K runs, `0` otherwise; writing `0`
    /// stops the core and `1` starts it. Core 0 has none, as on Linux when the boot core
    /// cannot go offline.
    CoreOnline(usize),
}

impl SysFile {
    /// Whether the file takes writes: mode 0644 rather than 0444, and open for writing allowed.
    pub fn is_writable(self) -> bool {
        matches!(self, Self::CoreOnline(_))
    }
}

/// Where `/sys` learns which cores there are and which run, and how it switches one: the
/// kernel implements it. `Sync`, because a switch is carried out after the lock that guards
/// the [`Vfs`](crate::Vfs) is let go ([`SysRequest::invoke`]).
pub trait SysSource: Send + Sync {
    /// How many cores the machine lists: `cpu0` to `cpu<N-1>`. The same for the life of the
    /// VFS (listings resume by position).
    fn core_count(&self) -> usize;

    /// Whether core `core` (below [`SysSource::core_count`]) runs its kernel instance now.
    fn is_online(&self, core: usize) -> bool;

    /// Starts (`online`) or stops core `core`; Linux's errno when it is refused. It may wait
    /// for the core: its caller holds no lock. Called only to change the core's state.
    fn set_online(&self, core: usize, online: bool) -> Result<(), Errno>;
}

/// A write to a `/sys` file, decoded and checked by
/// [`Vfs::decode_sys_write`](crate::Vfs::decode_sys_write): what it asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SysRequest {
    /// Bring core `core` online (`true`) or take it offline (`false`): `cpu<K>/online`.
    SetOnline {
        /// The core the written file belongs to.
        core: usize,
        /// `1` was written.
        online: bool,
    },
}

impl SysRequest {
    /// Carries the request out through `source`. A core already in the asked state is left
    /// alone and the write succeeds, as Linux's `device_online` and `device_offline` do.
    pub fn invoke(self, source: &dyn SysSource) -> Result<(), Errno> {
        match self {
            Self::SetOnline { core, online } => {
                if source.is_online(core) == online {
                    return Ok(());
                }
                source.set_online(core, online)
            }
        }
    }
}

/// What an inode number of `/sys` names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SysNode {
    Root,
    /// `/sys/devices`.
    Devices,
    /// `/sys/devices/system`.
    System,
    /// `/sys/devices/system/cpu`.
    Cpu,
    /// `/sys/devices/system/cpu/cpu<K>`.
    CoreDirectory(usize),
    File(SysFile),
}

/// The codes of the nodes that belong to no core.
const ROOT_CODE: u64 = 1;
const DEVICES_CODE: u64 = 2;
const SYSTEM_CODE: u64 = 3;
const CPU_CODE: u64 = 4;
/// The codes of a core's nodes.
const CORE_DIRECTORY_CODE: u64 = 1;
const CORE_ONLINE_CODE: u64 = 2;

/// The files of `/sys/devices/system/cpu` and their codes, in listing order after the cores.
const CPU_FILES: [(&[u8], SysFile, u64); 4] = [
    (b"offline", SysFile::Offline, 6),
    (b"online", SysFile::Online, 5),
    (b"possible", SysFile::Possible, 7),
    (b"present", SysFile::Present, 8),
];

impl SysNode {
    pub fn inode(self) -> u64 {
        let of_core = |core: usize, code: u64| (core as u64 + 1) << 8 | code;
        match self {
            Self::Root => ROOT_CODE,
            Self::Devices => DEVICES_CODE,
            Self::System => SYSTEM_CODE,
            Self::Cpu => CPU_CODE,
            Self::CoreDirectory(core) => of_core(core, CORE_DIRECTORY_CODE),
            Self::File(SysFile::CoreOnline(core)) => of_core(core, CORE_ONLINE_CODE),
            Self::File(file) => CPU_FILES.iter().find(|(_, f, _)| *f == file).expect("listed").2,
        }
    }

    /// The node of inode number `inode`, `None` for a number no node has (`cpu0/online`
    /// among them). Whether its core is listed is not checked here.
    pub fn from_inode(inode: u64) -> Option<Self> {
        let code = inode & 0xff;
        match inode >> 8 {
            0 => match code {
                ROOT_CODE => Some(Self::Root),
                DEVICES_CODE => Some(Self::Devices),
                SYSTEM_CODE => Some(Self::System),
                CPU_CODE => Some(Self::Cpu),
                _ => CPU_FILES.iter().find(|&&(_, _, c)| c == code).map(|&(_, file, _)| Self::File(file)),
            },
            core_plus_one => {
                let core = usize::try_from(core_plus_one - 1).ok()?;
                match code {
                    CORE_DIRECTORY_CODE => Some(Self::CoreDirectory(core)),
                    CORE_ONLINE_CODE if core != 0 => Some(Self::File(SysFile::CoreOnline(core))),
                    _ => None,
                }
            }
        }
    }

    /// The core this node belongs to: it exists only while the core is listed.
    pub fn core(self) -> Option<usize> {
        match self {
            Self::CoreDirectory(core) | Self::File(SysFile::CoreOnline(core)) => Some(core),
            _ => None,
        }
    }

    pub fn is_directory(self) -> bool {
        !matches!(self, Self::File(_))
    }

    /// The directory holding this node (the root's is the root: the VFS climbs out of the
    /// mount itself).
    pub fn parent(self) -> Self {
        match self {
            Self::Root | Self::Devices => Self::Root,
            Self::System => Self::Devices,
            Self::Cpu => Self::System,
            Self::File(SysFile::CoreOnline(core)) => Self::CoreDirectory(core),
            Self::CoreDirectory(_) | Self::File(_) => Self::Cpu,
        }
    }

    /// The node's name in its directory; the root's is empty.
    pub fn name(self) -> Vec<u8> {
        match self {
            Self::Root => Vec::new(),
            Self::Devices => b"devices".to_vec(),
            Self::System => b"system".to_vec(),
            Self::Cpu => b"cpu".to_vec(),
            Self::CoreDirectory(core) => core_directory_name(core),
            Self::File(SysFile::CoreOnline(_)) => b"online".to_vec(),
            Self::File(file) => CPU_FILES.iter().find(|(_, f, _)| *f == file).expect("listed").0.to_vec(),
        }
    }

    /// The one directory each directory above `cpu` holds: `/sys` is only the way to it.
    fn only_child(self) -> Option<Self> {
        match self {
            Self::Root => Some(Self::Devices),
            Self::Devices => Some(Self::System),
            Self::System => Some(Self::Cpu),
            _ => None,
        }
    }

    /// How many directories this directory holds (whose `..` are links to it), for its link
    /// count.
    pub fn subdirectories(self, core_count: usize) -> u64 {
        match self {
            Self::Root | Self::Devices | Self::System => 1,
            Self::Cpu => core_count as u64,
            _ => 0,
        }
    }
}

/// `cpu<K>`.
fn core_directory_name(core: usize) -> Vec<u8> {
    let mut name = b"cpu".to_vec();
    name.extend(decimal(core as u64));
    name
}

/// The child `name` of the directory `directory`, in a machine of `core_count` cores.
pub(crate) fn lookup(directory: SysNode, name: &[u8], core_count: usize) -> Option<SysNode> {
    match directory {
        SysNode::Root | SysNode::Devices | SysNode::System => {
            directory.only_child().filter(|child| child.name() == name)
        }
        SysNode::Cpu => {
            if let Some(&(_, file, _)) = CPU_FILES.iter().find(|(candidate, ..)| *candidate == name) {
                return Some(SysNode::File(file));
            }
            // `cpu<K>`, K as Linux prints it: decimal, no leading zero.
            let core = usize::try_from(parse_decimal(name.strip_prefix(b"cpu")?)?).ok()?;
            (core < core_count).then_some(SysNode::CoreDirectory(core))
        }
        SysNode::CoreDirectory(core) if core != 0 && name == b"online" => {
            Some(SysNode::File(SysFile::CoreOnline(core)))
        }
        _ => None,
    }
}

/// The entry of `directory` at `position`, counted from 0 after `.` and `..`, in a machine of
/// `core_count` cores: its name and node. `cpu` lists its cores first, then its files.
pub(crate) fn entry(directory: SysNode, position: u64, core_count: usize) -> Option<(Vec<u8>, SysNode)> {
    let position = usize::try_from(position).ok()?;
    match directory {
        SysNode::Root | SysNode::Devices | SysNode::System => {
            let child = directory.only_child().filter(|_| position == 0)?;
            Some((child.name(), child))
        }
        SysNode::Cpu if position < core_count => {
            Some((core_directory_name(position), SysNode::CoreDirectory(position)))
        }
        SysNode::Cpu => {
            CPU_FILES.get(position - core_count).map(|&(name, file, _)| (name.to_vec(), SysNode::File(file)))
        }
        SysNode::CoreDirectory(core) if core != 0 && position == 0 => {
            Some((b"online".to_vec(), SysNode::File(SysFile::CoreOnline(core))))
        }
        _ => None,
    }
}

/// The text of `file`, as Linux prints it: a range list (`0-1,3\n`, or `\n` for none) or a
/// `0`/`1` line.
pub(crate) fn contents(file: SysFile, source: &dyn SysSource) -> Vec<u8> {
    let cores = 0..source.core_count();
    let mut text = match file {
        SysFile::Online => range_list(cores.filter(|&core| source.is_online(core))),
        SysFile::Offline => range_list(cores.filter(|&core| !source.is_online(core))),
        SysFile::Possible | SysFile::Present => range_list(cores),
        SysFile::CoreOnline(core) => alloc::vec![if source.is_online(core) { b'1' } else { b'0' }],
    };
    text.push(b'\n');
    text
}

/// Increasing core numbers as Linux's `%*pbl` prints a CPU mask: runs of two or more as
/// `first-last`, the rest alone, separated by commas (`0-2,5,7-8`).
fn range_list(cores: impl Iterator<Item = usize>) -> Vec<u8> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for core in cores {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == core => *last = core,
            _ => runs.push((core, core)),
        }
    }
    let mut text = Vec::new();
    for (index, (first, last)) in runs.into_iter().enumerate() {
        if index > 0 {
            text.push(b',');
        }
        text.extend(decimal(first as u64));
        if last != first {
            text.push(b'-');
            text.extend(decimal(last as u64));
        }
    }
    text
}

/// What writing `data` to `file` asks for: `None` for an empty write, which Linux's sysfs
/// takes without asking the file (`sysfs_kf_write`). `EACCES` for a read-only file (Linux
/// refuses it at open); `EINVAL` for anything but `0` or `1`, with or without one trailing
/// newline (Linux's `kstrtobool` also reads `y`, `n`, `on`, `off` and ignores what follows
/// the first character or two; Reef takes only what `echo 0 >` and `echo 1 >` write).
pub(crate) fn decode_write(file: SysFile, data: &[u8]) -> Result<Option<SysRequest>, Errno> {
    let SysFile::CoreOnline(core) = file else { return Err(EACCES) };
    if data.is_empty() {
        return Ok(None);
    }
    let online = match data.strip_suffix(b"\n").unwrap_or(data) {
        b"0" => false,
        b"1" => true,
        _ => return Err(EINVAL),
    };
    Ok(Some(SysRequest::SetOnline { core, online }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn every_node_survives_its_inode_number() {
        let mut nodes = vec![SysNode::Root, SysNode::Devices, SysNode::System, SysNode::Cpu];
        nodes.extend(CPU_FILES.map(|(_, file, _)| SysNode::File(file)));
        for core in [0, 1, 7, 255, 1 << 20] {
            nodes.push(SysNode::CoreDirectory(core));
            if core != 0 {
                nodes.push(SysNode::File(SysFile::CoreOnline(core)));
            }
        }
        let mut inodes: Vec<u64> = nodes.iter().map(|node| node.inode()).collect();
        for (node, inode) in nodes.iter().zip(&inodes) {
            assert_eq!(SysNode::from_inode(*inode), Some(*node));
            assert!(*inode < 1 << 56);
        }
        inodes.sort_unstable();
        inodes.dedup();
        assert_eq!(inodes.len(), nodes.len(), "inode numbers are distinct");
        assert_eq!(SysNode::from_inode(0), None);
        assert_eq!(SysNode::from_inode(99), None);
        assert_eq!(SysNode::from_inode(1 << 8 | CORE_ONLINE_CODE), None, "cpu0 has no online file");
        assert_eq!(SysNode::from_inode(2 << 8 | 99), None);
    }

    #[test]
    fn every_node_is_found_under_its_name_in_its_parent() {
        let mut nodes = vec![SysNode::Devices, SysNode::System, SysNode::Cpu];
        nodes.extend(CPU_FILES.map(|(_, file, _)| SysNode::File(file)));
        nodes.extend([SysNode::CoreDirectory(0), SysNode::CoreDirectory(3), SysNode::File(SysFile::CoreOnline(3))]);
        for node in nodes {
            assert_eq!(lookup(node.parent(), &node.name(), 4), Some(node), "{node:?}");
        }
        assert_eq!(lookup(SysNode::Cpu, b"cpu4", 4), None);
        assert_eq!(lookup(SysNode::Cpu, b"cpu01", 4), None);
        assert_eq!(lookup(SysNode::Cpu, b"cpu", 4), None);
        assert_eq!(lookup(SysNode::CoreDirectory(0), b"online", 4), None);
        assert_eq!(lookup(SysNode::Root, b"system", 4), None);
    }

    #[test]
    fn range_lists_are_linuxs() {
        assert_eq!(range_list([0, 1, 3].into_iter()), b"0-1,3");
        assert_eq!(range_list([0, 1, 2, 5, 7, 8].into_iter()), b"0-2,5,7-8");
        assert_eq!(range_list([4].into_iter()), b"4");
        assert_eq!(range_list(core::iter::empty()), b"");
        assert_eq!(range_list(0..12), b"0-11");
    }

    #[test]
    fn only_zero_and_one_switch_a_core() {
        let core_online = SysFile::CoreOnline(2);
        let request = |online| Ok(Some(SysRequest::SetOnline { core: 2, online }));
        assert_eq!(decode_write(core_online, b"0"), request(false));
        assert_eq!(decode_write(core_online, b"1\n"), request(true));
        assert_eq!(decode_write(core_online, b""), Ok(None));
        for garbage in [&b"2"[..], b"01", b"1\n\n", b" 1", b"on", b"\n", b"true", b"1\0"] {
            assert_eq!(decode_write(core_online, garbage), Err(EINVAL), "{garbage:?}");
        }
        assert_eq!(decode_write(SysFile::Online, b"1"), Err(EACCES));
    }
}
