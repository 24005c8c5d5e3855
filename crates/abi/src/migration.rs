//! A process handed from one timesharing core's kernel to another's (Popcorn's migration, NIX's
//! "a core that becomes an AC hands its processes to its TCs"): everything the receiving kernel
//! needs to rebuild the process with the same pid, as one large message, and the answer.
//!
//! The pages themselves do not travel in the message: it names the frames of the sending
//! kernel's partition that hold them, and the receiver copies each into a frame of its own
//! before it answers (the sender keeps them until then). Decoding checks every count against
//! the length, so a malformed image is refused, never trusted; the receiver checks on its side
//! that every frame lies in the sender's partition.
//!
//! Layout: [`MoveHeader`] ([`MoveHeader::SIZE`] bytes), the 64 signal actions
//! ([`ACTION_SIZE`] each), then the threads ([`MovedThread::SIZE`] each, the first the one
//! that packed the image), descriptors, children, areas, pages and pending signals (their
//! records' sizes times the header's counts), then the name, path and command line (the
//! header's lengths).

use crate::application::{FPU_STATE_SIZE, REGISTERS};
use crate::message::DecodeError;

/// Signals with an action, as Linux numbers them (1 to 64).
pub const SIGNALS: usize = 64;
/// Bytes of one signal action: handler, flags, restorer, mask.
pub const ACTION_SIZE: usize = 32;
/// Most descriptors, children, areas, pages or pending signals one image carries (the
/// message's size limit is the real bound; this keeps counts sane before multiplying).
pub const MAX_RECORDS: u32 = 1 << 20;

/// Writes little-endian fields one after another into a slice; `None` once it runs out.
struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.at.checked_add(bytes.len())?;
        self.out.get_mut(self.at..end)?.copy_from_slice(bytes);
        self.at = end;
        Some(())
    }

    fn u32(&mut self, value: u32) -> Option<()> {
        self.bytes(&value.to_le_bytes())
    }

    fn u64(&mut self, value: u64) -> Option<()> {
        self.bytes(&value.to_le_bytes())
    }
}

/// Reads what [`Writer`] wrote; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, length: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(length)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(DecodeError::BadLength { expected: self.at.saturating_add(length), found: self.bytes.len() })?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from(self.u32()?) | u64::from(self.u32()?) << 32)
    }
}

/// What describes the process as a whole, and how many records of each kind follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveHeader {
    /// Chosen by the sender; echoed in [`MoveReply`].
    pub move_id: u64,
    /// The sending core.
    pub origin: u32,
    pub pid: u32,
    /// The parent (0: the kernel of `parent_core`).
    pub parent_pid: u32,
    pub parent_core: u32,
    pub process_group: u32,
    pub session: u32,
    pub umask: u32,
    /// Whether it called `execve` (1) or not (0).
    pub exec_done: u32,
    pub heap_start: u64,
    pub heap_end: u64,
    /// The working directory: a file-service handle of which one reference is the image's,
    /// or `u64::MAX` for the root.
    pub working_directory: u64,
    /// The root directory (`chroot`): a handle as `working_directory` is, or `u64::MAX` for
    /// the file system's root.
    pub root_directory: u64,
    /// When the sender began to pack it (TSC, the same clock on every core): for the
    /// receiver's report of what a move costs.
    pub packed_tsc: u64,
    /// The core the process goes back to once a new kernel runs there (its OSnode is being
    /// restarted), or [`NO_RETURN`]; and the low half of that core's KCB incarnation when it
    /// left (a kernel of another incarnation is the new one).
    pub return_core: u32,
    pub return_incarnation: u32,
    pub threads: u32,
    pub descriptors: u32,
    pub children: u32,
    pub areas: u32,
    pub pages: u32,
    pub pending: u32,
    pub name_length: u32,
    pub path_length: u32,
    pub command_line_length: u32,
    /// The signal it gets when its parent ends (`PR_SET_PDEATHSIG`), or 0.
    pub death_signal: u32,
    /// Its real-time interval timer (`setitimer(ITIMER_REAL)`, `alarm`): when it next expires
    /// on the monotonic clock (ns, the same on every core; 0: disarmed), and its interval.
    pub timer_next_ns: u64,
    pub timer_interval_ns: u64,
    /// Its user and group ids: they move with it.
    pub credentials: crate::credentials::Ids,
    /// How many supplementary groups follow the command line.
    pub groups: u32,
}

impl MoveHeader {
    pub const SIZE: usize = 8 + 8 * 4 + 5 * 8 + 3 * 4 + 9 * 4 + 2 * 8 + crate::credentials::Ids::SIZE + 4;

    fn write(&self, out: &mut Writer<'_>) -> Option<()> {
        out.u64(self.move_id)?;
        for value in [
            self.origin,
            self.pid,
            self.parent_pid,
            self.parent_core,
            self.process_group,
            self.session,
            self.umask,
            self.exec_done,
        ] {
            out.u32(value)?;
        }
        for value in [self.heap_start, self.heap_end, self.working_directory, self.root_directory, self.packed_tsc] {
            out.u64(value)?;
        }
        for value in [
            self.return_core,
            self.return_incarnation,
            self.threads,
            self.descriptors,
            self.children,
            self.areas,
            self.pages,
            self.pending,
            self.name_length,
            self.path_length,
            self.command_line_length,
            self.death_signal,
        ] {
            out.u32(value)?;
        }
        out.u64(self.timer_next_ns)?;
        out.u64(self.timer_interval_ns)?;
        out.bytes(&self.credentials.encode())?;
        out.u32(self.groups)?;
        Some(())
    }

    fn read(input: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            move_id: input.u64()?,
            origin: input.u32()?,
            pid: input.u32()?,
            parent_pid: input.u32()?,
            parent_core: input.u32()?,
            process_group: input.u32()?,
            session: input.u32()?,
            umask: input.u32()?,
            exec_done: input.u32()?,
            heap_start: input.u64()?,
            heap_end: input.u64()?,
            working_directory: input.u64()?,
            root_directory: input.u64()?,
            packed_tsc: input.u64()?,
            return_core: input.u32()?,
            return_incarnation: input.u32()?,
            threads: input.u32()?,
            descriptors: input.u32()?,
            children: input.u32()?,
            areas: input.u32()?,
            pages: input.u32()?,
            pending: input.u32()?,
            name_length: input.u32()?,
            path_length: input.u32()?,
            command_line_length: input.u32()?,
            death_signal: match input.u32()? {
                signal if signal <= crate::signal::MAX_SIGNAL => signal,
                _ => return Err(DecodeError::BadField("death signal")),
            },
            timer_next_ns: input.u64()?,
            timer_interval_ns: input.u64()?,
            credentials: crate::credentials::Ids::decode(input.take(crate::credentials::Ids::SIZE)?)
                .ok_or(DecodeError::BadField("credentials"))?,
            groups: input.u32()?,
        })
    }
}

/// No core to go back to, in [`MoveHeader::return_core`].
pub const NO_RETURN: u32 = u32::MAX;

/// A signal's disposition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovedAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

/// No sleep to finish, in [`MovedThread::restart_until_ns`].
pub const NO_RESTART: u64 = u64::MAX;
/// The thread's user code runs at home, in [`MovedThread::application_core`].
pub const AT_HOME: u32 = u32::MAX;
/// The thread has no syspage, in [`MovedThread::syspage_core`].
pub const NO_SYSPAGE: u32 = u32::MAX;
/// [`MovedThread::syspage_flags`]: the kernel made the page (`execac --syspage`), not the
/// program.
pub const SYSPAGE_KERNEL_MADE: u32 = 1;
/// [`MovedThread::syspage_flags`]: the page's kernel core let go of it for the move (nothing
/// of it is in flight); the receiver registers it anew, served from the ring's head in bits
/// [`SYSPAGE_HEAD_SHIFT`]`..+8`.
pub const SYSPAGE_RELEASED: u32 = 2;
/// Where [`MovedThread::syspage_flags`] holds the ring's head of a released page.
pub const SYSPAGE_HEAD_SHIFT: u32 = 8;

/// A thread of the process, stopped on its way back to ring 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MovedThread {
    pub tid: u32,
    pub alternate_stack_flags: u32,
    /// The application core its user code runs on (NIX execac), or [`AT_HOME`]; only a
    /// process kept through its home's restart has one (`call::MOVE_*` flags in
    /// `application_flags`): the next kernel sends the thread back there.
    pub application_core: u32,
    pub application_flags: u32,
    /// The kernel core serving the thread's syspage, or [`NO_SYSPAGE`]. For a process kept
    /// through its home's restart the KC serves the page on, and the next kernel takes the
    /// registration over (`syspage_page`, its user address; `syspage_flags`). For a process
    /// moving elsewhere the KC let go of it ([`SYSPAGE_RELEASED`]), and the receiver
    /// registers its copy of the page with it.
    pub syspage_core: u32,
    pub syspage_flags: u32,
    pub syspage_page: u64,
    pub fs_base: u64,
    pub clear_child_tid: u64,
    pub blocked: u64,
    pub alternate_stack_base: u64,
    pub alternate_stack_size: u64,
    /// A `nanosleep` the move cut short, which `restart_syscall` finishes on the receiver:
    /// its end (monotonic ns, the same clock on every core) or [`NO_RESTART`], and where the
    /// time left goes if a signal ends it (0: nowhere).
    pub restart_until_ns: u64,
    pub restart_remaining: u64,
    /// The user registers, in the kernel's saved-frame order (`application::REGISTERS`).
    pub registers: [u64; REGISTERS],
    pub fpu: [u8; FPU_STATE_SIZE],
}

impl Default for MovedThread {
    fn default() -> Self {
        Self {
            tid: 0,
            alternate_stack_flags: 0,
            application_core: AT_HOME,
            application_flags: 0,
            syspage_core: NO_SYSPAGE,
            syspage_flags: 0,
            syspage_page: 0,
            fs_base: 0,
            clear_child_tid: 0,
            blocked: 0,
            alternate_stack_base: 0,
            alternate_stack_size: 0,
            restart_until_ns: NO_RESTART,
            restart_remaining: 0,
            registers: [0; REGISTERS],
            fpu: [0; FPU_STATE_SIZE],
        }
    }
}

impl MovedThread {
    pub const SIZE: usize = 24 + 8 * 8 + REGISTERS * 8 + FPU_STATE_SIZE;

    fn write(&self, out: &mut Writer<'_>) -> Option<()> {
        out.u32(self.tid)?;
        out.u32(self.alternate_stack_flags)?;
        out.u32(self.application_core)?;
        out.u32(self.application_flags)?;
        out.u32(self.syspage_core)?;
        out.u32(self.syspage_flags)?;
        for value in [
            self.syspage_page,
            self.fs_base,
            self.clear_child_tid,
            self.blocked,
            self.alternate_stack_base,
            self.alternate_stack_size,
            self.restart_until_ns,
            self.restart_remaining,
        ] {
            out.u64(value)?;
        }
        for value in self.registers {
            out.u64(value)?;
        }
        out.bytes(&self.fpu)
    }

    fn read(input: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut thread = Self {
            tid: input.u32()?,
            alternate_stack_flags: input.u32()?,
            application_core: input.u32()?,
            application_flags: input.u32()?,
            syspage_core: input.u32()?,
            syspage_flags: input.u32()?,
            syspage_page: input.u64()?,
            fs_base: input.u64()?,
            clear_child_tid: input.u64()?,
            blocked: input.u64()?,
            alternate_stack_base: input.u64()?,
            alternate_stack_size: input.u64()?,
            restart_until_ns: input.u64()?,
            restart_remaining: input.u64()?,
            ..Self::default()
        };
        for register in &mut thread.registers {
            *register = input.u64()?;
        }
        thread.fpu.copy_from_slice(input.take(FPU_STATE_SIZE)?);
        Ok(thread)
    }
}

/// One descriptor: its number, the open file (a file-service handle of which one reference is
/// the image's, shared by every descriptor of the image naming the same handle), `FD_CLOEXEC`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovedDescriptor {
    pub fd: u32,
    /// `file::HandleKind` as a number.
    pub kind: u32,
    pub handle: u64,
    pub close_on_exec: u32,
}

impl MovedDescriptor {
    pub const SIZE: usize = 4 + 4 + 8 + 4;
}

/// A child as the parent knows it; `wait_status` is [`NOT_EXITED`] while it runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovedChild {
    pub pid: u32,
    pub process_group: u32,
    pub wait_status: u32,
}

/// A child that has not exited, in [`MovedChild::wait_status`].
pub const NOT_EXITED: u32 = u32::MAX;

impl MovedChild {
    pub const SIZE: usize = 12;
}

/// An area of the address space: `[start, end)`, `PROT_*` bits, its kind (the kernel's
/// numbering: program, heap, stack, anonymous).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovedArea {
    pub start: u64,
    pub end: u64,
    pub protection: u32,
    pub kind: u32,
}

impl MovedArea {
    pub const SIZE: usize = 24;
}

/// A present page: its user address, the sender's frame that holds it, the page-table
/// entry's flag bits (the frame address masked out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovedPage {
    pub address: u64,
    pub frame: u64,
    pub flags: u64,
}

impl MovedPage {
    pub const SIZE: usize = 24;
}

/// A pending signal with its `siginfo`; `thread` the tid it was sent to alone, or 0 (sent to
/// the process).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MovedSignal {
    pub thread: u32,
    pub signal: u32,
    pub code: i32,
    pub pid: u32,
    pub uid: u32,
    pub status: i32,
}

impl MovedSignal {
    pub const SIZE: usize = 24;
}

/// The variable parts of an image, as the sender has them.
pub struct MoveParts<'a> {
    pub actions: &'a [MovedAction; SIGNALS],
    pub threads: &'a [MovedThread],
    pub descriptors: &'a [MovedDescriptor],
    pub children: &'a [MovedChild],
    pub areas: &'a [MovedArea],
    pub pages: &'a [MovedPage],
    pub pending: &'a [MovedSignal],
    pub name: &'a [u8],
    pub path: &'a [u8],
    pub command_line: &'a [u8],
    /// The supplementary groups.
    pub groups: &'a [u32],
}

/// Bytes an image of these parts takes.
pub fn encoded_size(parts: &MoveParts<'_>) -> usize {
    MoveHeader::SIZE
        + SIGNALS * ACTION_SIZE
        + parts.threads.len() * MovedThread::SIZE
        + parts.descriptors.len() * MovedDescriptor::SIZE
        + parts.children.len() * MovedChild::SIZE
        + parts.areas.len() * MovedArea::SIZE
        + parts.pages.len() * MovedPage::SIZE
        + parts.pending.len() * MovedSignal::SIZE
        + parts.name.len()
        + parts.path.len()
        + parts.command_line.len()
        + parts.groups.len() * 4
}

/// Writes an image: `header`'s counts and lengths are taken from `parts`. Returns the length,
/// or `None` if `out` is too short or a count does not fit.
pub fn encode(out: &mut [u8], header: &MoveHeader, parts: &MoveParts<'_>) -> Option<usize> {
    let count = |n: usize| u32::try_from(n).ok().filter(|&n| n <= MAX_RECORDS);
    let header = MoveHeader {
        threads: count(parts.threads.len())?,
        descriptors: count(parts.descriptors.len())?,
        children: count(parts.children.len())?,
        areas: count(parts.areas.len())?,
        pages: count(parts.pages.len())?,
        pending: count(parts.pending.len())?,
        name_length: count(parts.name.len())?,
        path_length: count(parts.path.len())?,
        command_line_length: count(parts.command_line.len())?,
        groups: u32::try_from(parts.groups.len()).ok().filter(|&n| n as usize <= crate::credentials::MAX_GROUPS)?,
        ..*header
    };
    let mut writer = Writer { out, at: 0 };
    header.write(&mut writer)?;
    for action in parts.actions {
        for value in [action.handler, action.flags, action.restorer, action.mask] {
            writer.u64(value)?;
        }
    }
    for thread in parts.threads {
        thread.write(&mut writer)?;
    }
    for descriptor in parts.descriptors {
        writer.u32(descriptor.fd)?;
        writer.u32(descriptor.kind)?;
        writer.u64(descriptor.handle)?;
        writer.u32(descriptor.close_on_exec)?;
    }
    for child in parts.children {
        for value in [child.pid, child.process_group, child.wait_status] {
            writer.u32(value)?;
        }
    }
    for area in parts.areas {
        writer.u64(area.start)?;
        writer.u64(area.end)?;
        writer.u32(area.protection)?;
        writer.u32(area.kind)?;
    }
    for page in parts.pages {
        for value in [page.address, page.frame, page.flags] {
            writer.u64(value)?;
        }
    }
    for signal in parts.pending {
        writer.u32(signal.thread)?;
        writer.u32(signal.signal)?;
        writer.u32(signal.code as u32)?;
        writer.u32(signal.pid)?;
        writer.u32(signal.uid)?;
        writer.u32(signal.status as u32)?;
    }
    writer.bytes(parts.name)?;
    writer.bytes(parts.path)?;
    writer.bytes(parts.command_line)?;
    for group in parts.groups {
        writer.u32(*group)?;
    }
    Some(writer.at)
}

/// An image read from untrusted bytes: the header, actions and thread decoded, the record
/// sections checked for length and read through the iterators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveImage<'a> {
    pub header: MoveHeader,
    pub actions: [MovedAction; SIGNALS],
    threads: &'a [u8],
    descriptors: &'a [u8],
    children: &'a [u8],
    areas: &'a [u8],
    pages: &'a [u8],
    pending: &'a [u8],
    pub name: &'a [u8],
    pub path: &'a [u8],
    pub command_line: &'a [u8],
    group_bytes: &'a [u8],
}

fn records(count: u32, size: usize) -> Result<usize, DecodeError> {
    if count > MAX_RECORDS {
        return Err(DecodeError::BadField("record count"));
    }
    Ok(count as usize * size)
}

impl<'a> MoveImage<'a> {
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut input = Reader { bytes, at: 0 };
        let header = MoveHeader::read(&mut input)?;
        let mut actions = [MovedAction::default(); SIGNALS];
        for action in &mut actions {
            *action =
                MovedAction { handler: input.u64()?, flags: input.u64()?, restorer: input.u64()?, mask: input.u64()? };
        }
        if header.threads == 0 {
            return Err(DecodeError::BadField("no thread"));
        }
        let threads = input.take(records(header.threads, MovedThread::SIZE)?)?;
        let descriptors = input.take(records(header.descriptors, MovedDescriptor::SIZE)?)?;
        let children = input.take(records(header.children, MovedChild::SIZE)?)?;
        let areas = input.take(records(header.areas, MovedArea::SIZE)?)?;
        let pages = input.take(records(header.pages, MovedPage::SIZE)?)?;
        let pending = input.take(records(header.pending, MovedSignal::SIZE)?)?;
        let name = input.take(records(header.name_length, 1)?)?;
        let path = input.take(records(header.path_length, 1)?)?;
        let command_line = input.take(records(header.command_line_length, 1)?)?;
        if header.groups as usize > crate::credentials::MAX_GROUPS {
            return Err(DecodeError::BadField("group count"));
        }
        let group_bytes = input.take(header.groups as usize * 4)?;
        if input.at != bytes.len() {
            return Err(DecodeError::BadLength { expected: input.at, found: bytes.len() });
        }
        Ok(Self {
            header,
            actions,
            threads,
            descriptors,
            children,
            areas,
            pages,
            pending,
            name,
            path,
            command_line,
            group_bytes,
        })
    }

    /// The supplementary groups.
    pub fn groups(&self) -> impl Iterator<Item = u32> + 'a {
        self.group_bytes.chunks_exact(4).map(|bytes| u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// The threads, the one that packed the image first.
    pub fn threads(&self) -> impl Iterator<Item = MovedThread> + 'a {
        each(self.threads, MovedThread::SIZE, MovedThread::read)
    }

    pub fn descriptors(&self) -> impl Iterator<Item = MovedDescriptor> + 'a {
        each(self.descriptors, MovedDescriptor::SIZE, |input| {
            Ok(MovedDescriptor {
                fd: input.u32()?,
                kind: input.u32()?,
                handle: input.u64()?,
                close_on_exec: input.u32()?,
            })
        })
    }

    pub fn children(&self) -> impl Iterator<Item = MovedChild> + 'a {
        each(self.children, MovedChild::SIZE, |input| {
            Ok(MovedChild { pid: input.u32()?, process_group: input.u32()?, wait_status: input.u32()? })
        })
    }

    pub fn areas(&self) -> impl Iterator<Item = MovedArea> + 'a {
        each(self.areas, MovedArea::SIZE, |input| {
            Ok(MovedArea { start: input.u64()?, end: input.u64()?, protection: input.u32()?, kind: input.u32()? })
        })
    }

    pub fn pages(&self) -> impl Iterator<Item = MovedPage> + 'a {
        each(self.pages, MovedPage::SIZE, |input| {
            Ok(MovedPage { address: input.u64()?, frame: input.u64()?, flags: input.u64()? })
        })
    }

    pub fn pending(&self) -> impl Iterator<Item = MovedSignal> + 'a {
        each(self.pending, MovedSignal::SIZE, |input| {
            Ok(MovedSignal {
                thread: input.u32()?,
                signal: input.u32()?,
                code: input.u32()? as i32,
                pid: input.u32()?,
                uid: input.u32()?,
                status: input.u32()? as i32,
            })
        })
    }
}

/// The records of a section `decode` checked for length, each read by `read` (whole records:
/// a read never runs out, so the default stands for nothing).
fn each<'a, T: Default>(
    section: &'a [u8],
    size: usize,
    read: impl Fn(&mut Reader<'a>) -> Result<T, DecodeError> + 'a,
) -> impl Iterator<Item = T> + 'a {
    section.chunks_exact(size).map(move |record| read(&mut Reader { bytes: record, at: 0 }).unwrap_or_default())
}

/// The receiver's answer to a move: 0 when the process runs there now (the sender lets go of
/// it), else a Linux errno (the sender keeps it, as it was).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveReply {
    pub move_id: u64,
    pub result: u32,
}

impl MoveReply {
    pub const SIZE: usize = 12;

    pub fn encode(&self, out: &mut [u8; crate::message::PAYLOAD_SIZE]) -> usize {
        out[0..8].copy_from_slice(&self.move_id.to_le_bytes());
        out[8..12].copy_from_slice(&self.result.to_le_bytes());
        Self::SIZE
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut input = Reader { bytes, at: 0 };
        let reply = Self { move_id: input.u64()?, result: input.u32()? };
        if bytes.len() != Self::SIZE {
            return Err(DecodeError::BadLength { expected: Self::SIZE, found: bytes.len() });
        }
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_thread() -> MovedThread {
        let mut thread = MovedThread {
            tid: 200_007,
            application_core: 3,
            application_flags: 1,
            syspage_core: 2,
            syspage_flags: SYSPAGE_KERNEL_MADE,
            syspage_page: 0x7000_5000,
            fs_base: 0x7000_1000,
            blocked: 1 << 9,
            ..MovedThread::default()
        };
        thread.registers[17] = 0x40_1000;
        thread.fpu[0] = 0x7f;
        thread
    }

    #[test]
    fn an_image_reads_back_as_written() {
        let mut actions = [MovedAction::default(); SIGNALS];
        actions[1] = MovedAction { handler: 0x40_2000, flags: 0x0400_0000, restorer: 0x40_3000, mask: 4 };
        let thread = sample_thread();
        let descriptors = [
            MovedDescriptor { fd: 0, kind: 1, handle: u64::MAX - 1, close_on_exec: 0 },
            MovedDescriptor { fd: 5, kind: 2, handle: 42, close_on_exec: 1 },
        ];
        let children = [MovedChild { pid: 200_010, process_group: 200_007, wait_status: NOT_EXITED }];
        let areas = [MovedArea { start: 0x40_0000, end: 0x40_2000, protection: 5, kind: 0 }];
        let pages = [MovedPage { address: 0x40_0000, frame: 0x1234_5000, flags: 0x8000_0000_0000_0007 }];
        let pending = [MovedSignal { thread: 1, signal: 10, code: -6, pid: 1, uid: 0, status: 0 }];
        let parts = MoveParts {
            actions: &actions,
            threads: &[thread, MovedThread { tid: 200_008, ..thread }],
            descriptors: &descriptors,
            children: &children,
            areas: &areas,
            pages: &pages,
            pending: &pending,
            name: b"ftq",
            path: b"/bin/ftq",
            command_line: b"ftq\x00100\x00",
            groups: &[27, 1000],
        };
        let credentials = crate::credentials::Ids { saved_uid: 0, ..crate::credentials::Ids::of(1000, 1000) };
        let header = MoveHeader {
            credentials,
            move_id: 9,
            origin: 2,
            pid: 200_007,
            heap_start: 0x50_0000,
            return_core: 2,
            return_incarnation: 3,
            death_signal: 9,
            timer_next_ns: 5_000_000_000,
            timer_interval_ns: 250_000_000,
            root_directory: 77,
            ..MoveHeader::default()
        };
        let mut out = [0u8; 4096];
        let length = encode(&mut out, &header, &parts).expect("fits");
        assert_eq!(length, encoded_size(&parts));
        let image = MoveImage::decode(&out[..length]).expect("decodes");
        assert_eq!(image.header.pid, 200_007);
        assert_eq!(image.header.death_signal, 9);
        assert_eq!(image.header.root_directory, 77);
        assert_eq!(image.header.credentials, credentials, "the ids move with the process");
        assert!(image.groups().eq([27, 1000]));
        assert_eq!((image.header.timer_next_ns, image.header.timer_interval_ns), (5_000_000_000, 250_000_000));
        let mut bad = out;
        // The death signal, before the two timer words that end the header.
        let at = MoveHeader::SIZE - crate::credentials::Ids::SIZE - 4 - 2 * 8 - 4;
        bad[at..at + 4].copy_from_slice(&65u32.to_le_bytes());
        assert_eq!(MoveImage::decode(&bad[..length]).err(), Some(DecodeError::BadField("death signal")));
        assert_eq!((image.header.return_core, image.header.return_incarnation), (2, 3));
        assert_eq!(image.header.pages, 1);
        assert_eq!(image.actions, actions);
        assert!(image.threads().eq([thread, MovedThread { tid: 200_008, ..thread }]));
        assert!(image.descriptors().eq(descriptors.iter().copied()));
        assert!(image.children().eq(children.iter().copied()));
        assert!(image.areas().eq(areas.iter().copied()));
        assert!(image.pages().eq(pages.iter().copied()));
        assert!(image.pending().eq(pending.iter().copied()));
        assert_eq!(
            (image.name, image.path, image.command_line),
            (&b"ftq"[..], &b"/bin/ftq"[..], &b"ftq\x00100\x00"[..])
        );
        assert!(MoveImage::decode(&out[..length - 1]).is_err(), "a short image is refused");
        assert!(encode(&mut out[..length - 1], &header, &parts).is_none(), "a short buffer is refused");
    }

    #[test]
    fn a_reply_reads_back() {
        let mut out = [0u8; crate::message::PAYLOAD_SIZE];
        let reply = MoveReply { move_id: 77, result: 16 };
        let length = reply.encode(&mut out);
        assert_eq!(MoveReply::decode(&out[..length]), Ok(reply));
        assert!(MoveReply::decode(&out[..length - 1]).is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            if let Ok(image) = MoveImage::decode(&bytes) {
                let _ = image.descriptors().count() + image.children().count() + image.areas().count()
                    + image.pages().count() + image.pending().count();
            }
        }

        #[test]
        fn counts_that_do_not_match_the_length_are_refused(pages in 0u32..64, cut in 1usize..64) {
            let thread = sample_thread();
            let actions = [MovedAction::default(); SIGNALS];
            let page_list: [MovedPage; 64] = [MovedPage::default(); 64];
            let parts = MoveParts {
                actions: &actions, threads: core::slice::from_ref(&thread), descriptors: &[], children: &[], areas: &[],
                pages: &page_list[..pages as usize], pending: &[], name: b"", path: b"", command_line: b"",
                groups: &[],
            };
            let mut out = [0u8; 8192];
            let length = encode(&mut out, &MoveHeader::default(), &parts).expect("fits");
            prop_assert!(MoveImage::decode(&out[..length]).is_ok());
            prop_assert!(MoveImage::decode(&out[..length.saturating_sub(cut)]).is_err());
        }
    }
}
