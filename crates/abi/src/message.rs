//! Kernel message kinds and payload layouts: each declared once, each fits one 64-byte message.

/// Bytes of payload in one message (64-byte line minus the 4-byte sequence and 4-byte header).
pub const PAYLOAD_SIZE: usize = 56;

/// The kind of a kernel message (the `kind` field of the channel header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Kind {
    /// A ping; the receiver answers with [`Kind::Pong`] carrying the same payload.
    Ping = 1,
    /// The answer to a ping.
    Pong = 2,
    /// An inter-core call: run a registered handler, answer with [`Kind::IccReply`].
    IccRequest = 3,
    /// The result of an inter-core call.
    IccReply = 4,
    /// Stress traffic: counted and checksummed by the receiver.
    Stress = 5,
    /// A large stress message (chunked), checksummed by the receiver.
    StressLarge = 6,
    /// A benchmark probe, answered at once by the benchmark responder.
    Probe = 7,
    /// A large message: build a process on the receiving instance ([`crate::process::SpawnRequest`]).
    SpawnRequest = 8,
    /// The answer to a spawn request ([`crate::process::SpawnReply`]).
    SpawnReply = 9,
    /// A child homed on the sender exited; to its parent's home ([`crate::process::ChildExited`]).
    ChildExited = 10,
    /// A large message: whole lines a process printed, for instance 0 (which owns the
    /// console) to write as they are.
    ConsoleOutput = 11,
    /// End the machine ([`Shutdown`]): to instance 0, which owns the console, so that what
    /// the sender forwarded before (a process's last lines) is written first.
    Shutdown = 12,
    /// A large message: a request to the file service ([`crate::file::FileRequest`]).
    FileRequest = 13,
    /// A large message: the file service's answer ([`crate::file::FileReply`]).
    FileReply = 14,
    /// A large message: a process appeared, changed program or ended, for the file
    /// service's `/proc` ([`crate::file::ProcessRecord`]).
    ProcessRecord = 15,
    /// A large message: home TC to application core ([`crate::application::AcCommand`]).
    AcCommand = 16,
    /// A large message: application core to home TC ([`crate::application::AcEvent`]).
    AcEvent = 17,
    /// A large message: a syspage entry a kernel core hands to the process's home
    /// ([`crate::application::SyspageCall`]).
    SyspageCall = 18,
    /// The home's answer to a syspage call ([`crate::application::SyspageResult`]).
    SyspageResult = 19,
    /// A process handed to the receiving kernel ([`crate::migration::MoveImage`]), large.
    ProcessMove = 20,
    /// The answer to a move ([`crate::migration::MoveReply`]).
    ProcessMoveReply = 21,
}

/// Highest kind number in use.
pub const MAX_KIND: u16 = 21;

impl Kind {
    /// The kind with number `value`, if any.
    #[inline]
    pub fn from_u16(value: u16) -> Option<Self> {
        Some(match value {
            1 => Self::Ping,
            2 => Self::Pong,
            3 => Self::IccRequest,
            4 => Self::IccReply,
            5 => Self::Stress,
            6 => Self::StressLarge,
            7 => Self::Probe,
            8 => Self::SpawnRequest,
            9 => Self::SpawnReply,
            10 => Self::ChildExited,
            11 => Self::ConsoleOutput,
            12 => Self::Shutdown,
            13 => Self::FileRequest,
            14 => Self::FileReply,
            15 => Self::ProcessRecord,
            16 => Self::AcCommand,
            17 => Self::AcEvent,
            18 => Self::SyspageCall,
            19 => Self::SyspageResult,
            20 => Self::ProcessMove,
            21 => Self::ProcessMoveReply,
            _ => return None,
        })
    }
}

/// Why a payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The payload length does not match the kind's layout.
    BadLength { expected: usize, found: usize },
    /// A field holds a value the layout forbids (e.g. an unknown handler id).
    BadField(&'static str),
}

// Decoders first turn the payload into a fixed-size array (one length check), so the field
// reads below compile to plain loads with no further bounds checks.
#[inline]
pub(crate) fn u16_at<const N: usize>(bytes: &[u8; N], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

#[inline]
pub(crate) fn u32_at<const N: usize>(bytes: &[u8; N], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[inline]
pub(crate) fn u64_at<const N: usize>(bytes: &[u8; N], at: usize) -> u64 {
    let b = |i: usize| bytes[at + i];
    u64::from_le_bytes([b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7)])
}

/// The payload as an array of exactly `N` bytes, or the length error.
#[inline]
pub(crate) fn exact<const N: usize>(bytes: &[u8]) -> Result<&[u8; N], DecodeError> {
    bytes.try_into().map_err(|_| DecodeError::BadLength { expected: N, found: bytes.len() })
}

/// Ping, pong, stress and probe payload: who sent it, a sequence number, a send timestamp and
/// a checksum over the rest, so a receiver can detect a torn or forged message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ping {
    /// Logical id of the sending core.
    pub from: u16,
    /// Sender's sequence number.
    pub sequence: u64,
    /// Sender's TSC at send.
    pub sent_tsc: u64,
    /// Free word (a benchmark's mode, a stress round).
    pub tag: u64,
}

impl Ping {
    /// Encoded size.
    pub const SIZE: usize = 2 + 8 + 8 + 8 + 8;

    #[inline]
    fn checksum(&self) -> u64 {
        (u64::from(self.from)
            ^ self.sequence.rotate_left(17)
            ^ self.sent_tsc.rotate_left(31)
            ^ self.tag.rotate_left(47))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// Writes the payload; returns its length.
    #[inline]
    pub fn encode(&self, out: &mut [u8; PAYLOAD_SIZE]) -> usize {
        out[0..2].copy_from_slice(&self.from.to_le_bytes());
        out[2..10].copy_from_slice(&self.sequence.to_le_bytes());
        out[10..18].copy_from_slice(&self.sent_tsc.to_le_bytes());
        out[18..26].copy_from_slice(&self.tag.to_le_bytes());
        out[26..34].copy_from_slice(&self.checksum().to_le_bytes());
        Self::SIZE
    }

    /// Reads and verifies a payload.
    #[inline]
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let ping = Self {
            from: u16_at(bytes, 0),
            sequence: u64_at(bytes, 2),
            sent_tsc: u64_at(bytes, 10),
            tag: u64_at(bytes, 18),
        };
        if ping.checksum() != u64_at(bytes, 26) {
            return Err(DecodeError::BadField("checksum"));
        }
        Ok(ping)
    }
}

/// A benchmark probe: no checksum, so the measured path is only what a channel costs; the
/// receiver still validates kind and length before using it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Logical id of the sending core.
    pub from: u16,
    /// Sender's sequence number.
    pub sequence: u64,
    /// Sender's TSC at send.
    pub sent_tsc: u64,
}

impl Probe {
    /// Encoded size.
    pub const SIZE: usize = 2 + 8 + 8;

    /// Writes the payload; returns its length.
    #[inline]
    pub fn encode(&self, out: &mut [u8; PAYLOAD_SIZE]) -> usize {
        out[0..2].copy_from_slice(&self.from.to_le_bytes());
        out[2..10].copy_from_slice(&self.sequence.to_le_bytes());
        out[10..18].copy_from_slice(&self.sent_tsc.to_le_bytes());
        Self::SIZE
    }

    /// Reads a payload.
    #[inline]
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        Ok(Self { from: u16_at(bytes, 0), sequence: u64_at(bytes, 2), sent_tsc: u64_at(bytes, 10) })
    }
}

/// Arguments an ICC carries.
pub const ICC_ARGUMENTS: usize = 5;

/// An inter-core call: a handler id (never a function pointer) and its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IccRequest {
    /// Core that waits for the reply.
    pub from: u16,
    /// Which registered handler to run.
    pub handler: u16,
    /// Matches the reply to the call.
    pub call_id: u32,
    /// The handler's arguments.
    pub arguments: [u64; ICC_ARGUMENTS],
}

impl IccRequest {
    /// Encoded size.
    pub const SIZE: usize = 2 + 2 + 4 + 8 * ICC_ARGUMENTS;

    /// Writes the payload; returns its length.
    #[inline]
    pub fn encode(&self, out: &mut [u8; PAYLOAD_SIZE]) -> usize {
        out[0..2].copy_from_slice(&self.from.to_le_bytes());
        out[2..4].copy_from_slice(&self.handler.to_le_bytes());
        out[4..8].copy_from_slice(&self.call_id.to_le_bytes());
        for (i, argument) in self.arguments.iter().enumerate() {
            out[8 + 8 * i..16 + 8 * i].copy_from_slice(&argument.to_le_bytes());
        }
        Self::SIZE
    }

    /// Reads a payload.
    #[inline]
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let mut arguments = [0; ICC_ARGUMENTS];
        for (i, argument) in arguments.iter_mut().enumerate() {
            *argument = u64_at(bytes, 8 + 8 * i);
        }
        Ok(Self { from: u16_at(bytes, 0), handler: u16_at(bytes, 2), call_id: u32_at(bytes, 4), arguments })
    }
}

/// How an ICC ended, as carried in the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IccStatus {
    /// The handler ran and returned a value.
    Done = 0,
    /// The callee has no handler with that id.
    NoSuchHandler = 1,
    /// The handler refused its arguments.
    BadArguments = 2,
    /// The handler ran and failed.
    Failed = 3,
}

/// The reply to an ICC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IccReply {
    /// Core that ran the handler.
    pub from: u16,
    /// The call this answers.
    pub call_id: u32,
    /// How it ended.
    pub status: IccStatus,
    /// The handler's result.
    pub value: u64,
}

impl IccReply {
    /// Encoded size.
    pub const SIZE: usize = 2 + 4 + 1 + 8;

    /// Writes the payload; returns its length.
    #[inline]
    pub fn encode(&self, out: &mut [u8; PAYLOAD_SIZE]) -> usize {
        out[0..2].copy_from_slice(&self.from.to_le_bytes());
        out[2..6].copy_from_slice(&self.call_id.to_le_bytes());
        out[6] = self.status as u8;
        out[7..15].copy_from_slice(&self.value.to_le_bytes());
        Self::SIZE
    }

    /// Reads a payload.
    #[inline]
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let status = match bytes[6] {
            0 => IccStatus::Done,
            1 => IccStatus::NoSuchHandler,
            2 => IccStatus::BadArguments,
            3 => IccStatus::Failed,
            _ => return Err(DecodeError::BadField("status")),
        };
        Ok(Self { from: u16_at(bytes, 0), call_id: u32_at(bytes, 2), status, value: u64_at(bytes, 7) })
    }
}

/// How the machine ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownAction {
    /// Every core stops and QEMU exits (isa-debug-exit, status 0).
    PowerOff = 0,
    /// The machine resets and boots again.
    Restart = 1,
    /// Every core stops; the machine stays on.
    Halt = 2,
}

/// A request to end the machine, and which core asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shutdown {
    /// Logical id of the core that asked.
    pub from: u16,
    /// What to do.
    pub action: ShutdownAction,
}

impl Shutdown {
    /// Encoded size.
    pub const SIZE: usize = 2 + 1;

    /// Writes the payload; returns its length.
    #[inline]
    pub fn encode(&self, out: &mut [u8; PAYLOAD_SIZE]) -> usize {
        out[0..2].copy_from_slice(&self.from.to_le_bytes());
        out[2] = self.action as u8;
        Self::SIZE
    }

    /// Reads a payload.
    #[inline]
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let action = match bytes[2] {
            0 => ShutdownAction::PowerOff,
            1 => ShutdownAction::Restart,
            2 => ShutdownAction::Halt,
            _ => return Err(DecodeError::BadField("shutdown action")),
        };
        Ok(Self { from: u16_at(bytes, 0), action })
    }
}

/// ICC handler ids every kernel image understands.
pub mod handler {
    /// Returns its first argument.
    pub const ECHO: u16 = 1;
    /// Returns the sum of its arguments (wrapping).
    pub const ADD: u16 = 2;
    /// Starts logical core `arguments[0]` with the callee's boot driver.
    pub const START_CORE: u16 = 3;
    /// Runs a benchmark responder: `arguments[0]` = benchmark, the rest its parameters.
    pub const BENCH_RESPONDER: u16 = 4;
    /// Runs the stress sender: `arguments` = (messages, large messages, multicast messages, mode).
    pub const STRESS_SENDER: u16 = 5;
    /// Joins multicast group `arguments[0]`.
    pub const GROUP_JOIN: u16 = 6;
    /// Leaves multicast group `arguments[0]`.
    pub const GROUP_LEAVE: u16 = 7;
    /// Returns the callee's (received, dropped) message counters packed as `received << 32 | dropped`.
    pub const MESSAGE_COUNTS: u16 = 8;
    /// Sets the callee's notification mode: `arguments` = (mode number, hybrid spin in TSC
    /// cycles, 0 for unchanged). The callee owns its notification line, so others ask it.
    pub const SET_NOTIFY_MODE: u16 = 9;
    /// Test images only: the callee faults on purpose inside the handler (restart tests).
    pub const FAULT_NOW: u16 = 10;
    /// Sends signal `arguments[1]` to process `arguments[0]` homed on the callee; returns 0
    /// or a Linux errno (`ESRCH`, `EINVAL`).
    pub const KILL_PROCESS: u16 = 11;
    /// Sends a signal to the callee's processes named by a `signal::SignalRequest` (a
    /// process, a thread, a process group, everyone); returns how many processes it reached.
    pub const SIGNAL: u16 = 12;
    /// Counts the callee's processes in a group (and session): `signal::GroupMembers`.
    pub const GROUP_MEMBERS: u16 = 13;
    /// Returns the group and session of process `arguments[0]` homed on the callee, packed as
    /// `signal::ProcessIds`; fails when it does not live there.
    pub const PROCESS_IDS: u16 = 14;
    /// `setpgid` of a child homed on the callee by its parent: `signal::SetProcessGroup`;
    /// returns 0 or a Linux errno.
    pub const SET_PROCESS_GROUP: u16 = 15;
    /// Changes the callee's role to `arguments[0]` (`call::role`); returns 0 or a Linux errno
    /// (`EBUSY`: it runs processes, a thread, or serves syspages).
    pub const SET_ROLE: u16 = 16;
    /// Asks a kernel core to serve a syspage: `arguments` = (physical frame, `pid << 32 |
    /// tid`, `home << 32 | ppid`, and [`SYSPAGE_HEAD_GIVEN`] `|` the ring's head, or 0 for
    /// the page's first submitted entry); returns 0 or a Linux errno (`ENXIO`: not a KC,
    /// `EBUSY`, `ENOMEM`).
    pub const SYSPAGE_ATTACH: u16 = 17;
    /// [`SYSPAGE_ATTACH`]'s fourth argument names the head in its low byte.
    pub const SYSPAGE_HEAD_GIVEN: u64 = 1 << 8;
    /// A kernel core stops serving thread `arguments[0]` (`pid << 32 | tid`) of home
    /// `arguments[1]`: its untaken entries are dropped, results in flight are discarded.
    /// With [`SYSPAGE_DETACH_FOR_MOVE`] in `arguments[2]` (the thread's process moves to
    /// another core) the untaken entries stay for the next kernel core and the answer is
    /// [`SYSPAGE_HEAD_GIVEN`] `|` the ring's head, or a Linux errno.
    pub const SYSPAGE_DETACH: u16 = 18;
    /// [`SYSPAGE_DETACH`]'s third argument: report the ring's head.
    pub const SYSPAGE_DETACH_FOR_MOVE: u64 = 1;
    /// Asks the callee to stop (a boot driver's `core stop`): returns 0, after which it stops
    /// at its next idle point, or the refusal `SET_ROLE` gives when something runs there.
    pub const STOP_CORE: u16 = 19;
    /// Asks the callee to park on the core of OSnode `arguments[0]` (a boot driver's `core
    /// park`): returns 0, after which it leaves its core at its next idle point, or a refusal.
    pub const PARK_CORE: u16 = 20;
    /// Asks a parked callee to leave its host for core `arguments[0]` (`core unpark`): returns
    /// 0, after which it saves itself at its next idle point for a boot driver to resume.
    pub const UNPARK_CORE: u16 = 21;
    /// Hand every process of the callee to timesharing cores (argument 0: a bit set of the
    /// cores that may take them), before its role changes; answers how many it started to
    /// move, or a refusal (see `kernel::core::role`).
    pub const EVACUATE: u16 = 22;
    /// Move process `arguments[0]`, homed on the callee, to core `arguments[1]`: answers 0
    /// once it is asked to, or a refusal (as [`EVACUATE`]'s).
    pub const MOVE_PROCESS: u16 = 23;
    /// A kernel core leaving its role asks the home of thread `arguments[0]` (`pid << 32 |
    /// tid`) to move its syspage to kernel core `arguments[1]`, its ring's head being
    /// `arguments[2]` and `arguments[3]` = `leaving core << 32 | ppid`: the home attaches it
    /// there and answers 0, or a Linux errno (`ENOENT`: the thread let go of it meanwhile).
    pub const SYSPAGE_MOVE: u16 = 24;
    /// Highest id in use.
    pub const MAX: u16 = 24;
}

const _: () = assert!(Ping::SIZE <= PAYLOAD_SIZE);
const _: () = assert!(Probe::SIZE <= PAYLOAD_SIZE);
const _: () = assert!(IccRequest::SIZE <= PAYLOAD_SIZE);
const _: () = assert!(IccReply::SIZE <= PAYLOAD_SIZE);
const _: () = assert!(Shutdown::SIZE <= PAYLOAD_SIZE);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_round_trip_and_checksum() {
        let ping = Ping { from: 3, sequence: 42, sent_tsc: 123_456, tag: 7 };
        let mut out = [0; PAYLOAD_SIZE];
        let n = ping.encode(&mut out);
        assert_eq!(Ping::decode(&out[..n]), Ok(ping));
        out[5] ^= 1;
        assert_eq!(Ping::decode(&out[..n]), Err(DecodeError::BadField("checksum")));
        assert!(matches!(Ping::decode(&out[..n - 1]), Err(DecodeError::BadLength { .. })));
    }

    #[test]
    fn icc_round_trip() {
        let request = IccRequest { from: 1, handler: handler::ADD, call_id: 9, arguments: [1, 2, 3, 4, 5] };
        let mut out = [0; PAYLOAD_SIZE];
        let n = request.encode(&mut out);
        assert_eq!(IccRequest::decode(&out[..n]), Ok(request));
        let reply = IccReply { from: 2, call_id: 9, status: IccStatus::Failed, value: u64::MAX };
        let n = reply.encode(&mut out);
        assert_eq!(IccReply::decode(&out[..n]), Ok(reply));
        out[6] = 9;
        assert_eq!(IccReply::decode(&out[..n]), Err(DecodeError::BadField("status")));
    }

    #[test]
    fn shutdown_round_trip() {
        let mut out = [0; PAYLOAD_SIZE];
        for action in [ShutdownAction::PowerOff, ShutdownAction::Restart, ShutdownAction::Halt] {
            let request = Shutdown { from: 3, action };
            let n = request.encode(&mut out);
            assert_eq!(Shutdown::decode(&out[..n]), Ok(request));
        }
        out[2] = 3;
        assert_eq!(Shutdown::decode(&out[..Shutdown::SIZE]), Err(DecodeError::BadField("shutdown action")));
        assert!(matches!(Shutdown::decode(&out[..2]), Err(DecodeError::BadLength { .. })));
    }

    #[test]
    fn kinds_are_dense() {
        for value in 0..=MAX_KIND + 1 {
            let kind = Kind::from_u16(value);
            assert_eq!(kind.is_some(), (1..=MAX_KIND).contains(&value));
            if let Some(kind) = kind {
                assert_eq!(kind as u16, value);
            }
        }
    }
}
