//! `/proc`: a tree computed from the process list, whose files' text a [`ProcSource`] writes.
//!
//! No node is stored: a node's inode number says what it is, `(pid + 1) << 8 | code` for the
//! nodes of one process and `code` for the others.

use crate::Errno;
use alloc::vec::Vec;

/// A text file of `/proc`, and what it is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProcFile {
    /// `/proc/<pid>/status`: name, state, pids, memory, as `Name:\tvalue` lines.
    Status(u32),
    /// `/proc/<pid>/cmdline`: the arguments, each ending in a NUL.
    Cmdline(u32),
    /// `/proc/<pid>/stat`: the one-line, space-separated form `ps` reads.
    Stat(u32),
    /// `/proc/cpuinfo`.
    CpuInfo,
    /// `/proc/interrupts`: interrupts and exceptions taken, per core and vector.
    Interrupts,
    /// `/proc/meminfo`.
    MemInfo,
    /// `/proc/mounts`: written by the VFS from its mount table, never asked of the source.
    Mounts,
    /// `/proc/uptime`: seconds since boot and seconds idle.
    Uptime,
    /// A file of `/proc/reef`, Reef's own views.
    Reef(ReefView),
}

/// The files of `/proc/reef`: what Reef's shell commands show, as files.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReefView {
    /// `cores`: each core, its role and kernel instance.
    Cores,
    /// `msg`: channel statistics.
    Msg,
    /// `mem`: frames and partitions.
    Mem,
    /// `syscalls`: system-call counts.
    Syscalls,
    /// `processes`: every process and where it runs.
    Processes,
    /// The file service's own counts (open files, pipes, tmpfs pages, parked requests).
    Files,
}

/// Where `/proc` gets its process list and its files' text: the kernel implements it.
pub trait ProcSource: Send {
    /// The pids of the processes alive now, in any order.
    fn pids(&self) -> Vec<u32>;

    /// The text of a proc file (not called for [`ProcFile::Mounts`]); `Err(ENOENT)` when the
    /// process is gone.
    fn generate(&self, file: ProcFile) -> Result<Vec<u8>, Errno>;
}

/// The inode of `/proc` itself.
pub(crate) const ROOT_INODE: u64 = 1;

/// What an inode number of `/proc` names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ProcNode {
    Root,
    /// `/proc/self` as a listing shows it, for no process in particular.
    SelfLink,
    /// `/proc/self` as process `pid` looked it up: a link to `pid`.
    SelfLinkOf(u32),
    /// `/proc/reef`.
    ReefDirectory,
    /// `/proc/<pid>`.
    ProcessDirectory(u32),
    File(ProcFile),
}

/// The codes of the nodes that belong to no process.
const ROOT_CODE: u64 = 1;
const SELF_CODE: u64 = 2;
const REEF_CODE: u64 = 7;
/// The codes of a process's nodes.
const PROCESS_DIRECTORY_CODE: u64 = 1;
const SELF_OF_PROCESS_CODE: u64 = 5;

/// The top-level files and their codes, in listing order after `self`.
const TOP_FILES: [(&[u8], ProcFile, u64); 5] = [
    (b"cpuinfo", ProcFile::CpuInfo, 3),
    (b"interrupts", ProcFile::Interrupts, 14),
    (b"meminfo", ProcFile::MemInfo, 4),
    (b"mounts", ProcFile::Mounts, 5),
    (b"uptime", ProcFile::Uptime, 6),
];

/// The files of `/proc/reef` and their codes, in listing order.
const REEF_FILES: [(&[u8], ReefView, u64); 6] = [
    (b"cores", ReefView::Cores, 8),
    (b"msg", ReefView::Msg, 9),
    (b"mem", ReefView::Mem, 10),
    (b"syscalls", ReefView::Syscalls, 11),
    (b"processes", ReefView::Processes, 12),
    (b"files", ReefView::Files, 13),
];

/// A file of `/proc/<pid>`: its name, the [`ProcFile`] of a pid, its code.
type ProcessFile = (&'static [u8], fn(u32) -> ProcFile, u64);

/// The files of `/proc/<pid>`, in listing order.
const PROCESS_FILES: [ProcessFile; 3] =
    [(b"status", ProcFile::Status, 2), (b"cmdline", ProcFile::Cmdline, 3), (b"stat", ProcFile::Stat, 4)];

/// The entries of `/proc` that are not processes, in listing order: `self`, the top files,
/// `reef`. Processes follow them.
pub(crate) const FIXED_ENTRIES: u64 = 1 + TOP_FILES.len() as u64 + 1;

impl ProcNode {
    pub fn inode(self) -> u64 {
        let of_process = |pid: u32, code: u64| (u64::from(pid) + 1) << 8 | code;
        match self {
            Self::Root => ROOT_CODE,
            Self::SelfLink => SELF_CODE,
            Self::SelfLinkOf(pid) => of_process(pid, SELF_OF_PROCESS_CODE),
            Self::ReefDirectory => REEF_CODE,
            Self::ProcessDirectory(pid) => of_process(pid, PROCESS_DIRECTORY_CODE),
            Self::File(file) => match file {
                ProcFile::Status(pid) | ProcFile::Cmdline(pid) | ProcFile::Stat(pid) => {
                    let (_, _, code) = PROCESS_FILES.iter().find(|(_, make, _)| make(pid) == file).expect("listed");
                    of_process(pid, *code)
                }
                ProcFile::Reef(view) => REEF_FILES.iter().find(|(_, v, _)| *v == view).expect("listed").2,
                other => TOP_FILES.iter().find(|(_, f, _)| *f == other).expect("listed").2,
            },
        }
    }

    /// The node of inode number `inode`, `None` for a number no node has. Whether its process
    /// is alive is not checked here.
    pub fn from_inode(inode: u64) -> Option<Self> {
        let code = inode & 0xff;
        match inode >> 8 {
            0 => match code {
                ROOT_CODE => Some(Self::Root),
                SELF_CODE => Some(Self::SelfLink),
                REEF_CODE => Some(Self::ReefDirectory),
                _ => TOP_FILES
                    .iter()
                    .map(|&(_, file, code)| (file, code))
                    .chain(REEF_FILES.iter().map(|&(_, view, code)| (ProcFile::Reef(view), code)))
                    .find(|&(_, candidate)| candidate == code)
                    .map(|(file, _)| Self::File(file)),
            },
            pid_plus_one => {
                let pid = u32::try_from(pid_plus_one - 1).ok()?;
                match code {
                    PROCESS_DIRECTORY_CODE => Some(Self::ProcessDirectory(pid)),
                    SELF_OF_PROCESS_CODE => Some(Self::SelfLinkOf(pid)),
                    _ => PROCESS_FILES.iter().find(|(_, _, c)| *c == code).map(|(_, make, _)| Self::File(make(pid))),
                }
            }
        }
    }

    /// The process this node belongs to, whose death makes it disappear.
    pub fn process(self) -> Option<u32> {
        match self {
            Self::ProcessDirectory(pid)
            | Self::File(ProcFile::Status(pid) | ProcFile::Cmdline(pid) | ProcFile::Stat(pid)) => Some(pid),
            _ => None,
        }
    }

    pub fn is_directory(self) -> bool {
        matches!(self, Self::Root | Self::ReefDirectory | Self::ProcessDirectory(_))
    }
}

/// The child `name` of the directory `directory`, for process `caller` (whose `self` it is).
/// `pids` is asked only when the name could be a process's.
pub(crate) fn lookup(
    directory: ProcNode,
    name: &[u8],
    caller: u32,
    pids: impl FnOnce() -> Vec<u32>,
) -> Option<ProcNode> {
    match directory {
        ProcNode::Root => {
            if name == b"self" {
                return Some(ProcNode::SelfLinkOf(caller));
            }
            if name == b"reef" {
                return Some(ProcNode::ReefDirectory);
            }
            if let Some((_, file, _)) = TOP_FILES.iter().find(|(candidate, _, _)| *candidate == name) {
                return Some(ProcNode::File(*file));
            }
            let pid = parse_decimal(name)?;
            pids().contains(&pid).then_some(ProcNode::ProcessDirectory(pid))
        }
        ProcNode::ReefDirectory => REEF_FILES
            .iter()
            .find(|(candidate, _, _)| *candidate == name)
            .map(|(_, view, _)| ProcNode::File(ProcFile::Reef(*view))),
        ProcNode::ProcessDirectory(pid) => PROCESS_FILES
            .iter()
            .find(|(candidate, _, _)| *candidate == name)
            .map(|(_, make, _)| ProcNode::File(make(pid))),
        _ => None,
    }
}

/// A number as `/proc` names a pid and `/sys` a core: decimal, no sign, no leading zero
/// (Linux's `name_to_int`).
pub(crate) fn parse_decimal(name: &[u8]) -> Option<u32> {
    if name.is_empty() || (name.len() > 1 && name[0] == b'0') {
        return None;
    }
    name.iter().try_fold(0u32, |pid, &digit| {
        let digit = char::from(digit).to_digit(10)?;
        pid.checked_mul(10)?.checked_add(digit)
    })
}

/// The entry of a fixed directory (not the root's processes) at `position`, counted from 0
/// after `.` and `..`: its name and node.
pub(crate) fn fixed_entry(directory: ProcNode, position: u64) -> Option<(&'static [u8], ProcNode)> {
    let position = usize::try_from(position).ok()?;
    match directory {
        ProcNode::Root => match position {
            0 => Some((b"self", ProcNode::SelfLink)),
            position if position <= TOP_FILES.len() => {
                let (name, file, _) = TOP_FILES[position - 1];
                Some((name, ProcNode::File(file)))
            }
            position if position == TOP_FILES.len() + 1 => Some((b"reef", ProcNode::ReefDirectory)),
            _ => None,
        },
        ProcNode::ReefDirectory => {
            REEF_FILES.get(position).map(|&(name, view, _)| (name, ProcNode::File(ProcFile::Reef(view))))
        }
        ProcNode::ProcessDirectory(pid) => {
            PROCESS_FILES.get(position).map(|&(name, make, _)| (name, ProcNode::File(make(pid))))
        }
        _ => None,
    }
}

/// The name of a node in its directory, for paths.
pub(crate) fn name_of_directory(directory: ProcNode) -> Option<Vec<u8>> {
    match directory {
        ProcNode::ReefDirectory => Some(b"reef".to_vec()),
        ProcNode::ProcessDirectory(pid) => Some(decimal(u64::from(pid))),
        _ => None,
    }
}

/// `value` in decimal ASCII.
pub(crate) fn decimal(value: u64) -> Vec<u8> {
    let mut digits = Vec::new();
    let mut rest = value;
    loop {
        digits.push(b'0' + (rest % 10) as u8);
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    digits.reverse();
    digits
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn every_node_survives_its_inode_number() {
        let mut nodes = vec![ProcNode::Root, ProcNode::SelfLink, ProcNode::ReefDirectory];
        for pid in [0, 1, 42, u32::MAX] {
            nodes.extend([ProcNode::SelfLinkOf(pid), ProcNode::ProcessDirectory(pid)]);
            nodes.extend([ProcFile::Status(pid), ProcFile::Cmdline(pid), ProcFile::Stat(pid)].map(ProcNode::File));
        }
        nodes.extend(
            [ProcFile::CpuInfo, ProcFile::Interrupts, ProcFile::MemInfo, ProcFile::Mounts, ProcFile::Uptime]
                .map(ProcNode::File),
        );
        let views =
            [ReefView::Cores, ReefView::Msg, ReefView::Mem, ReefView::Syscalls, ReefView::Processes, ReefView::Files];
        nodes.extend(views.map(|view| ProcNode::File(ProcFile::Reef(view))));
        let mut inodes: Vec<u64> = nodes.iter().map(|node| node.inode()).collect();
        for (node, inode) in nodes.iter().zip(&inodes) {
            assert_eq!(ProcNode::from_inode(*inode), Some(*node));
            assert!(*inode < 1 << 56);
        }
        inodes.sort_unstable();
        inodes.dedup();
        assert_eq!(inodes.len(), nodes.len(), "inode numbers are distinct");
        assert_eq!(ProcNode::from_inode(0), None);
        assert_eq!(ProcNode::from_inode(99), None);
        assert_eq!(ProcNode::from_inode(1 << 8 | 99), None);
    }

    #[test]
    fn pids_are_plain_decimal() {
        assert_eq!(parse_decimal(b"42"), Some(42));
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"042"), None);
        assert_eq!(parse_decimal(b"+4"), None);
        assert_eq!(parse_decimal(b"4294967296"), None);
        assert_eq!(decimal(0), b"0");
        assert_eq!(decimal(4_294_967_295), b"4294967295");
    }
}
