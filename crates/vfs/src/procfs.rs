//! `/proc`: a tree computed from the process list, whose files' text a [`ProcSource`] writes.
//!
//! No node is stored: a node's inode number says what it is, `(pid + 1) << 20 | code` for
//! the nodes of one process (a descriptor's link is `FD_LINK_BASE + fd`) and `code` for the
//! others.

use crate::node::{DIRECTORY_CODE, REGULAR_CODE, SYMLINK_CODE};
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
    /// `/proc/<pid>/comm`: the name, at most 15 bytes, and a newline.
    Comm(u32),
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
    /// A file of `/proc/net`, as Linux writes it.
    Net(NetView),
}

/// The files of `/proc/net`, in Linux's layout, so that tools that read them (`netstat`) work.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NetView {
    /// `tcp`: every TCP socket, its addresses, state and queues.
    Tcp,
    /// `udp`: every UDP socket.
    Udp,
    /// `dev`: each interface's bytes and packets.
    Dev,
    /// `route`: the IPv4 routes (`route`, `netstat -r`).
    Route,
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
    /// `devices`: the I/O APICs and the devices the owning instance found, with their
    /// interrupts and, for a 9P share, its tag and mount point.
    Devices,
    /// `net`: the network stack (its interface, frames, interrupts and frames per interrupt,
    /// connections), written by the file service that runs it.
    Net,
}

/// Where `/proc` gets its process list and its files' text: the kernel implements it.
pub trait ProcSource: Send {
    /// The pids of the processes alive now, in any order.
    fn pids(&self) -> Vec<u32>;

    /// The text of a proc file (not called for [`ProcFile::Mounts`]); `Err(ENOENT)` when the
    /// process is gone.
    fn generate(&self, file: ProcFile) -> Result<Vec<u8>, Errno>;

    /// The open descriptors of process `pid` (`/proc/<pid>/fd`): each number, in increasing
    /// order, with what its link names (a path, `pipe:[N]`, `/dev/console`), as Linux shows
    /// them. `Err(ENOENT)` when the process is gone.
    fn descriptors(&self, pid: u32) -> Result<Vec<(u32, Vec<u8>)>, Errno>;

    /// The absolute path of the program process `pid` runs (`/proc/<pid>/exe`).
    /// `Err(ENOENT)` when the process is gone.
    fn program(&self, pid: u32) -> Result<Vec<u8>, Errno>;

    /// The effective user and group ids of process `pid`, which own its `/proc/<pid>` files
    /// as on Linux; root's when the source keeps none.
    fn owner(&self, pid: u32) -> (u32, u32) {
        let _ = pid;
        (0, 0)
    }
}

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
    /// `/proc/net`.
    NetDirectory,
    /// `/proc/<pid>`.
    ProcessDirectory(u32),
    /// `/proc/<pid>/fd`: a link per open descriptor.
    DescriptorDirectory(u32),
    /// `/proc/<pid>/fd/<fd>`: a link to what the descriptor is open on.
    DescriptorLink(u32, u32),
    /// `/proc/<pid>/exe`: a link to the program.
    ProgramLink(u32),
    File(ProcFile),
}

/// The codes of the nodes that belong to no process.
const ROOT_CODE: u64 = 1;
const SELF_CODE: u64 = 2;
const REEF_CODE: u64 = 7;
const NET_CODE: u64 = 16;
/// The codes of a process's nodes.
const PROCESS_DIRECTORY_CODE: u64 = 1;
const SELF_OF_PROCESS_CODE: u64 = 5;
const DESCRIPTOR_DIRECTORY_CODE: u64 = 6;
const PROGRAM_LINK_CODE: u64 = 7;
/// A descriptor's link is this plus the descriptor (below [`MAX_DESCRIPTOR`]).
const FD_LINK_BASE: u64 = 1 << 16;
/// Bits of a process node's inode number below the pid.
const PID_SHIFT: u32 = 20;
/// Descriptors `/proc/<pid>/fd` can name: far above the 1024 a process may hold.
pub(crate) const MAX_DESCRIPTOR: u32 = (1 << PID_SHIFT) - FD_LINK_BASE as u32;

/// The top-level files and their codes, in listing order after `self`.
const TOP_FILES: [(&[u8], ProcFile, u64); 5] = [
    (b"cpuinfo", ProcFile::CpuInfo, 3),
    (b"interrupts", ProcFile::Interrupts, 14),
    (b"meminfo", ProcFile::MemInfo, 4),
    (b"mounts", ProcFile::Mounts, 5),
    (b"uptime", ProcFile::Uptime, 6),
];

/// The files of `/proc/reef` and their codes, in listing order.
const REEF_FILES: [(&[u8], ReefView, u64); 8] = [
    (b"cores", ReefView::Cores, 8),
    (b"msg", ReefView::Msg, 9),
    (b"mem", ReefView::Mem, 10),
    (b"syscalls", ReefView::Syscalls, 11),
    (b"processes", ReefView::Processes, 12),
    (b"files", ReefView::Files, 13),
    (b"devices", ReefView::Devices, 15),
    (b"net", ReefView::Net, 20),
];

/// The files of `/proc/net` and their codes, in listing order.
const NET_FILES: [(&[u8], NetView, u64); 4] = [
    (b"dev", NetView::Dev, 17),
    (b"route", NetView::Route, 21),
    (b"tcp", NetView::Tcp, 18),
    (b"udp", NetView::Udp, 19),
];

/// A file of `/proc/<pid>`: its name, the [`ProcFile`] of a pid, its code.
type ProcessFile = (&'static [u8], fn(u32) -> ProcFile, u64);

/// The files of `/proc/<pid>`, in listing order; `fd` and `exe` follow them.
const PROCESS_FILES: [ProcessFile; 4] = [
    (b"status", ProcFile::Status, 2),
    (b"cmdline", ProcFile::Cmdline, 3),
    (b"stat", ProcFile::Stat, 4),
    (b"comm", ProcFile::Comm, 8),
];

/// Entries of `/proc/<pid>`: its files, `fd`, `exe`.
const PROCESS_ENTRIES: usize = PROCESS_FILES.len() + 2;

/// The entries of `/proc` that are not processes, in listing order: `self`, the top files,
/// `reef`, `net`. Processes follow them.
pub(crate) const FIXED_ENTRIES: u64 = 1 + TOP_FILES.len() as u64 + 2;

impl ProcNode {
    pub fn inode(self) -> u64 {
        let of_process = |pid: u32, code: u64| (u64::from(pid) + 1) << PID_SHIFT | code;
        match self {
            Self::Root => ROOT_CODE,
            Self::SelfLink => SELF_CODE,
            Self::SelfLinkOf(pid) => of_process(pid, SELF_OF_PROCESS_CODE),
            Self::ReefDirectory => REEF_CODE,
            Self::NetDirectory => NET_CODE,
            Self::ProcessDirectory(pid) => of_process(pid, PROCESS_DIRECTORY_CODE),
            Self::DescriptorDirectory(pid) => of_process(pid, DESCRIPTOR_DIRECTORY_CODE),
            Self::DescriptorLink(pid, fd) => of_process(pid, FD_LINK_BASE + u64::from(fd)),
            Self::ProgramLink(pid) => of_process(pid, PROGRAM_LINK_CODE),
            Self::File(file) => match file {
                ProcFile::Status(pid) | ProcFile::Cmdline(pid) | ProcFile::Stat(pid) | ProcFile::Comm(pid) => {
                    let (_, _, code) = PROCESS_FILES.iter().find(|(_, make, _)| make(pid) == file).expect("listed");
                    of_process(pid, *code)
                }
                ProcFile::Reef(view) => REEF_FILES.iter().find(|(_, v, _)| *v == view).expect("listed").2,
                ProcFile::Net(view) => NET_FILES.iter().find(|(_, v, _)| *v == view).expect("listed").2,
                other => TOP_FILES.iter().find(|(_, f, _)| *f == other).expect("listed").2,
            },
        }
    }

    /// The node of inode number `inode`, `None` for a number no node has. Whether its process
    /// is alive is not checked here.
    pub fn from_inode(inode: u64) -> Option<Self> {
        let code = inode & ((1 << PID_SHIFT) - 1);
        match inode >> PID_SHIFT {
            0 => match code {
                ROOT_CODE => Some(Self::Root),
                SELF_CODE => Some(Self::SelfLink),
                REEF_CODE => Some(Self::ReefDirectory),
                NET_CODE => Some(Self::NetDirectory),
                _ => TOP_FILES
                    .iter()
                    .map(|&(_, file, code)| (file, code))
                    .chain(REEF_FILES.iter().map(|&(_, view, code)| (ProcFile::Reef(view), code)))
                    .chain(NET_FILES.iter().map(|&(_, view, code)| (ProcFile::Net(view), code)))
                    .find(|&(_, candidate)| candidate == code)
                    .map(|(file, _)| Self::File(file)),
            },
            pid_plus_one => {
                let pid = u32::try_from(pid_plus_one - 1).ok()?;
                match code {
                    PROCESS_DIRECTORY_CODE => Some(Self::ProcessDirectory(pid)),
                    SELF_OF_PROCESS_CODE => Some(Self::SelfLinkOf(pid)),
                    DESCRIPTOR_DIRECTORY_CODE => Some(Self::DescriptorDirectory(pid)),
                    PROGRAM_LINK_CODE => Some(Self::ProgramLink(pid)),
                    FD_LINK_BASE.. => Some(Self::DescriptorLink(pid, u32::try_from(code - FD_LINK_BASE).ok()?)),
                    _ => PROCESS_FILES.iter().find(|(_, _, c)| *c == code).map(|(_, make, _)| Self::File(make(pid))),
                }
            }
        }
    }

    /// The process this node belongs to, whose death makes it disappear.
    pub fn process(self) -> Option<u32> {
        match self {
            Self::ProcessDirectory(pid)
            | Self::DescriptorDirectory(pid)
            | Self::DescriptorLink(pid, _)
            | Self::ProgramLink(pid)
            | Self::File(ProcFile::Status(pid) | ProcFile::Cmdline(pid) | ProcFile::Stat(pid) | ProcFile::Comm(pid)) => {
                Some(pid)
            }
            _ => None,
        }
    }

    pub fn is_directory(self) -> bool {
        matches!(
            self,
            Self::Root
                | Self::ReefDirectory
                | Self::NetDirectory
                | Self::ProcessDirectory(_)
                | Self::DescriptorDirectory(_)
        )
    }

    pub fn is_link(self) -> bool {
        matches!(self, Self::SelfLink | Self::SelfLinkOf(_) | Self::DescriptorLink(..) | Self::ProgramLink(_))
    }

    /// The `d_type` code a listing gives this node.
    pub fn kind_code(self) -> u8 {
        if self.is_link() {
            SYMLINK_CODE
        } else if self.is_directory() {
            DIRECTORY_CODE
        } else {
            REGULAR_CODE
        }
    }
}

/// The child `name` of the directory `directory`, for process `caller` (whose `self` it is).
/// `pids` is asked only when the name could be a process's, `descriptors` only when it could
/// be a descriptor of the process.
pub(crate) fn lookup(
    directory: ProcNode,
    name: &[u8],
    caller: u32,
    pids: impl FnOnce() -> Vec<u32>,
    descriptors: impl FnOnce(u32) -> Vec<u32>,
) -> Option<ProcNode> {
    match directory {
        ProcNode::Root => {
            if name == b"self" {
                return Some(ProcNode::SelfLinkOf(caller));
            }
            if name == b"reef" {
                return Some(ProcNode::ReefDirectory);
            }
            if name == b"net" {
                return Some(ProcNode::NetDirectory);
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
        ProcNode::NetDirectory => NET_FILES
            .iter()
            .find(|(candidate, _, _)| *candidate == name)
            .map(|(_, view, _)| ProcNode::File(ProcFile::Net(*view))),
        ProcNode::ProcessDirectory(pid) => match name {
            b"fd" => Some(ProcNode::DescriptorDirectory(pid)),
            b"exe" => Some(ProcNode::ProgramLink(pid)),
            _ => PROCESS_FILES
                .iter()
                .find(|(candidate, _, _)| *candidate == name)
                .map(|(_, make, _)| ProcNode::File(make(pid))),
        },
        ProcNode::DescriptorDirectory(pid) => {
            let fd = parse_decimal(name).filter(|&fd| fd < MAX_DESCRIPTOR)?;
            descriptors(pid).contains(&fd).then_some(ProcNode::DescriptorLink(pid, fd))
        }
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
            position if position == TOP_FILES.len() + 2 => Some((b"net", ProcNode::NetDirectory)),
            _ => None,
        },
        ProcNode::ReefDirectory => {
            REEF_FILES.get(position).map(|&(name, view, _)| (name, ProcNode::File(ProcFile::Reef(view))))
        }
        ProcNode::NetDirectory => {
            NET_FILES.get(position).map(|&(name, view, _)| (name, ProcNode::File(ProcFile::Net(view))))
        }
        ProcNode::ProcessDirectory(pid) => match position {
            position if position < PROCESS_FILES.len() => {
                let (name, make, _) = PROCESS_FILES[position];
                Some((name, ProcNode::File(make(pid))))
            }
            position if position == PROCESS_FILES.len() => Some((b"fd", ProcNode::DescriptorDirectory(pid))),
            position if position + 1 == PROCESS_ENTRIES => Some((b"exe", ProcNode::ProgramLink(pid))),
            _ => None,
        },
        _ => None,
    }
}

/// The directory holding the directory `directory`.
pub(crate) fn parent_of_directory(directory: ProcNode) -> ProcNode {
    match directory {
        ProcNode::DescriptorDirectory(pid) => ProcNode::ProcessDirectory(pid),
        _ => ProcNode::Root,
    }
}

/// The names from `/proc` down to the directory `directory`, for paths: none for `/proc`
/// itself.
pub(crate) fn names_of_directory(directory: ProcNode) -> Vec<Vec<u8>> {
    match directory {
        ProcNode::ReefDirectory => alloc::vec![b"reef".to_vec()],
        ProcNode::NetDirectory => alloc::vec![b"net".to_vec()],
        ProcNode::ProcessDirectory(pid) => alloc::vec![decimal(u64::from(pid))],
        ProcNode::DescriptorDirectory(pid) => alloc::vec![decimal(u64::from(pid)), b"fd".to_vec()],
        _ => Vec::new(),
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
        let mut nodes = vec![ProcNode::Root, ProcNode::SelfLink, ProcNode::ReefDirectory, ProcNode::NetDirectory];
        for pid in [0, 1, 42, u32::MAX] {
            nodes.extend([ProcNode::SelfLinkOf(pid), ProcNode::ProcessDirectory(pid)]);
            nodes.extend([ProcNode::DescriptorDirectory(pid), ProcNode::ProgramLink(pid)]);
            nodes.extend([0, 1, 1023, MAX_DESCRIPTOR - 1].map(|fd| ProcNode::DescriptorLink(pid, fd)));
            nodes.extend(
                [ProcFile::Status(pid), ProcFile::Cmdline(pid), ProcFile::Stat(pid), ProcFile::Comm(pid)]
                    .map(ProcNode::File),
            );
        }
        nodes.extend(
            [ProcFile::CpuInfo, ProcFile::Interrupts, ProcFile::MemInfo, ProcFile::Mounts, ProcFile::Uptime]
                .map(ProcNode::File),
        );
        let views = [
            ReefView::Cores,
            ReefView::Msg,
            ReefView::Mem,
            ReefView::Syscalls,
            ReefView::Processes,
            ReefView::Files,
            ReefView::Devices,
            ReefView::Net,
        ];
        nodes.extend(views.map(|view| ProcNode::File(ProcFile::Reef(view))));
        nodes.extend(
            [NetView::Tcp, NetView::Udp, NetView::Dev, NetView::Route].map(|view| ProcNode::File(ProcFile::Net(view))),
        );
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
        assert_eq!(ProcNode::from_inode(1 << PID_SHIFT | 99), None);
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
