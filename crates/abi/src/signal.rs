//! Inter-core calls about signals, process groups and sessions.
//!
//! Each request travels as the five `u64` arguments of an ICC request (`message::IccRequest`)
//! to one of the handler ids of `message::handler`; `decode` checks every field, so a
//! malformed call is refused before the callee acts.

use crate::message::{DecodeError, ICC_ARGUMENTS};

/// Highest Linux signal number (realtime signals included).
pub const MAX_SIGNAL: u32 = 64;

/// Which processes of the callee a signal reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalTarget {
    /// The process with this pid.
    Process(u32),
    /// The thread with id `thread`; with `process` nonzero, only if it belongs to that
    /// process (`tgkill`).
    Thread { thread: u32, process: u32 },
    /// Every process of this process group.
    Group(u32),
    /// Every process but init (pid 1) and the sender (`kill(-1, …)`).
    AllButInitAndSender,
    /// Process `child`, whose parent (the sender) ended: it gets its parent-death signal
    /// (`PR_SET_PDEATHSIG`), if it asked for one; the request's own signal is 0.
    ParentDied(u32),
}

/// `si_code` values a sender may give [Linux include/uapi/asm-generic/siginfo.h].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalCode {
    /// `SI_USER` (0): `kill`.
    User,
    /// `SI_TKILL` (-6): `tkill`, `tgkill`.
    Thread,
    /// `SI_KERNEL` (0x80): the kernel (its shell, the console).
    Kernel,
}

impl SignalCode {
    /// The `si_code` number.
    pub const fn number(self) -> i32 {
        match self {
            Self::User => 0,
            Self::Thread => -6,
            Self::Kernel => 0x80,
        }
    }

    /// The code with `si_code` number `value`, if a sender may use it.
    pub const fn from_number(value: i32) -> Option<Self> {
        match value {
            0 => Some(Self::User),
            -6 => Some(Self::Thread),
            0x80 => Some(Self::Kernel),
            _ => None,
        }
    }
}

/// A signal for processes homed on the callee (handler `SIGNAL`); the callee answers with how
/// many processes it reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalRequest {
    pub target: SignalTarget,
    /// 0 (only checks that a target exists) to [`MAX_SIGNAL`].
    pub signal: u32,
    /// The sending process (0: a kernel).
    pub sender: u32,
    pub code: SignalCode,
    /// The sender's real and effective user ids, which a signal from a process is checked
    /// against (kill(2)); root's for a kernel.
    pub sender_ids: SenderIds,
}

/// The user ids of a signal's sender: it may signal a process whose real or saved user id is
/// its real or effective one, or any process if its effective id is 0 (Linux's
/// `kill_ok_by_cred`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderIds {
    pub real_uid: u32,
    pub effective_uid: u32,
}

impl SenderIds {
    /// A kernel's (root's).
    pub const KERNEL: Self = Self { real_uid: 0, effective_uid: 0 };

    /// Whether it may signal a process with real user id `real_uid` and saved `saved_uid`.
    pub fn may_signal(&self, real_uid: u32, saved_uid: u32) -> bool {
        self.effective_uid == 0
            || [real_uid, saved_uid].contains(&self.effective_uid)
            || [real_uid, saved_uid].contains(&self.real_uid)
    }
}

const TARGET_PROCESS: u64 = 1;
const TARGET_THREAD: u64 = 2;
const TARGET_GROUP: u64 = 3;
const TARGET_ALL: u64 = 4;
const TARGET_PARENT_DIED: u64 = 5;

impl SignalRequest {
    /// The ICC arguments: target kind | signal << 8, target id, thread's process, sender, code.
    pub fn encode(&self) -> [u64; ICC_ARGUMENTS] {
        let (kind, id, process) = match self.target {
            SignalTarget::Process(pid) => (TARGET_PROCESS, pid, 0),
            SignalTarget::Thread { thread, process } => (TARGET_THREAD, thread, process),
            SignalTarget::Group(pgid) => (TARGET_GROUP, pgid, 0),
            SignalTarget::AllButInitAndSender => (TARGET_ALL, 0, 0),
            SignalTarget::ParentDied(child) => (TARGET_PARENT_DIED, child, 0),
        };
        [
            kind | u64::from(self.signal) << 8,
            u64::from(id),
            u64::from(process),
            u64::from(self.sender) | u64::from(self.sender_ids.real_uid) << 32,
            u64::from(self.code.number() as u32) | u64::from(self.sender_ids.effective_uid) << 32,
        ]
    }

    /// Reads a request from untrusted ICC arguments.
    pub fn decode(arguments: &[u64; ICC_ARGUMENTS]) -> Result<Self, DecodeError> {
        let signal = arguments[0] >> 8;
        if signal > u64::from(MAX_SIGNAL) {
            return Err(DecodeError::BadField("signal"));
        }
        let id = pid(arguments[1], "target")?;
        let process = u32::try_from(arguments[2]).map_err(|_| DecodeError::BadField("thread's process"))?;
        let target = match arguments[0] & 0xff {
            TARGET_PROCESS if process == 0 => SignalTarget::Process(nonzero(id, "target")?),
            TARGET_THREAD => SignalTarget::Thread { thread: nonzero(id, "target")?, process },
            TARGET_GROUP if process == 0 => SignalTarget::Group(nonzero(id, "target")?),
            TARGET_ALL if id == 0 && process == 0 => SignalTarget::AllButInitAndSender,
            TARGET_PARENT_DIED if process == 0 && signal == 0 => SignalTarget::ParentDied(nonzero(id, "target")?),
            _ => return Err(DecodeError::BadField("target")),
        };
        let code = SignalCode::from_number(arguments[4] as u32 as i32).ok_or(DecodeError::BadField("code"))?;
        let sender_ids =
            SenderIds { real_uid: (arguments[3] >> 32) as u32, effective_uid: (arguments[4] >> 32) as u32 };
        Ok(Self { target, signal: signal as u32, sender: arguments[3] as u32, code, sender_ids })
    }
}

fn pid(value: u64, field: &'static str) -> Result<u32, DecodeError> {
    u32::try_from(value).map_err(|_| DecodeError::BadField(field))
}

fn nonzero(value: u32, field: &'static str) -> Result<u32, DecodeError> {
    if value == 0 {
        Err(DecodeError::BadField(field))
    } else {
        Ok(value)
    }
}

/// How many processes of the callee are in process group `group`, and, with `session`
/// nonzero, in that session too (handler `GROUP_MEMBERS`): whether a group exists for
/// `setpgid`, whether a pid names a group for `setsid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupMembers {
    pub group: u32,
    /// 0: any session.
    pub session: u32,
}

impl GroupMembers {
    /// The ICC arguments: group, session.
    pub fn encode(&self) -> [u64; ICC_ARGUMENTS] {
        [u64::from(self.group), u64::from(self.session), 0, 0, 0]
    }

    /// Reads a query from untrusted ICC arguments.
    pub fn decode(arguments: &[u64; ICC_ARGUMENTS]) -> Result<Self, DecodeError> {
        if arguments[2..] != [0; 3] {
            return Err(DecodeError::BadField("unused arguments"));
        }
        Ok(Self { group: nonzero(pid(arguments[0], "group")?, "group")?, session: pid(arguments[1], "session")? })
    }
}

/// The process group and session of a process homed on the callee (handler `PROCESS_IDS`),
/// answered as [`ProcessIds::pack`]; the callee refuses the call when no such process lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessIds {
    pub group: u32,
    pub session: u32,
}

impl ProcessIds {
    /// The answer's value: group in the low half, session in the high half.
    pub fn pack(&self) -> u64 {
        u64::from(self.group) | u64::from(self.session) << 32
    }

    /// The ids from an answer.
    pub fn unpack(value: u64) -> Self {
        Self { group: value as u32, session: (value >> 32) as u32 }
    }
}

/// `setpgid` of a child homed on the callee by its parent (handler `SET_PROCESS_GROUP`); the
/// callee checks the parent, the session and the exec rule, and answers 0 or a Linux errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetProcessGroup {
    /// The child.
    pub pid: u32,
    /// Its new group (already checked by the caller to exist in the caller's session, or to
    /// be `pid`).
    pub group: u32,
    /// The calling parent, and its home and session.
    pub parent: u32,
    pub parent_core: u32,
    pub parent_session: u32,
}

impl SetProcessGroup {
    /// The ICC arguments, one field each.
    pub fn encode(&self) -> [u64; ICC_ARGUMENTS] {
        [self.pid, self.group, self.parent, self.parent_core, self.parent_session].map(u64::from)
    }

    /// Reads a request from untrusted ICC arguments.
    pub fn decode(arguments: &[u64; ICC_ARGUMENTS]) -> Result<Self, DecodeError> {
        Ok(Self {
            pid: nonzero(pid(arguments[0], "pid")?, "pid")?,
            group: nonzero(pid(arguments[1], "group")?, "group")?,
            parent: nonzero(pid(arguments[2], "parent")?, "parent")?,
            parent_core: pid(arguments[3], "parent core")?,
            parent_session: nonzero(pid(arguments[4], "parent session")?, "parent session")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_requests_round_trip() {
        let targets = [
            SignalTarget::Process(200_001),
            SignalTarget::Thread { thread: 100_004, process: 100_001 },
            SignalTarget::Thread { thread: 7, process: 0 },
            SignalTarget::Group(1),
            SignalTarget::AllButInitAndSender,
        ];
        for target in targets {
            for (signal, code) in [(0, SignalCode::User), (15, SignalCode::Thread), (64, SignalCode::Kernel)] {
                let request = SignalRequest {
                    target,
                    signal,
                    sender: 300_002,
                    code,
                    sender_ids: SenderIds { real_uid: 1000, effective_uid: 7 },
                };
                assert_eq!(SignalRequest::decode(&request.encode()), Ok(request));
            }
        }
        let orphan = SignalRequest {
            target: SignalTarget::ParentDied(200_003),
            signal: 0,
            sender: 100_001,
            code: SignalCode::Kernel,
            sender_ids: SenderIds::KERNEL,
        };
        assert_eq!(SignalRequest::decode(&orphan.encode()), Ok(orphan));
        for bad in
            [SignalRequest { signal: 9, ..orphan }, SignalRequest { target: SignalTarget::ParentDied(0), ..orphan }]
        {
            assert_eq!(SignalRequest::decode(&bad.encode()), Err(DecodeError::BadField("target")), "{bad:?}");
        }
    }

    #[test]
    fn malformed_signal_requests_are_refused() {
        let good = SignalRequest {
            target: SignalTarget::Group(5),
            signal: 2,
            sender: 1,
            code: SignalCode::User,
            sender_ids: SenderIds::KERNEL,
        }
        .encode();
        let mut bad = good;
        bad[0] = 3 | 65 << 8;
        assert_eq!(SignalRequest::decode(&bad), Err(DecodeError::BadField("signal")));
        bad = good;
        bad[0] = 9 | 2 << 8;
        assert_eq!(SignalRequest::decode(&bad), Err(DecodeError::BadField("target")));
        bad = good;
        bad[1] = 0;
        assert_eq!(SignalRequest::decode(&bad), Err(DecodeError::BadField("target")));
        bad = good;
        bad[1] = 1 << 32;
        assert_eq!(SignalRequest::decode(&bad), Err(DecodeError::BadField("target")));
        bad = good;
        bad[2] = 3;
        assert_eq!(SignalRequest::decode(&bad), Err(DecodeError::BadField("target")), "a group has no thread");
        bad = good;
        bad[4] = 5;
        assert_eq!(SignalRequest::decode(&bad), Err(DecodeError::BadField("code")));
        bad = good;
        bad[3] = 1000 << 32 | 1;
        bad[4] |= 1001 << 32;
        let ids = SignalRequest::decode(&bad).unwrap().sender_ids;
        assert_eq!(ids, SenderIds { real_uid: 1000, effective_uid: 1001 }, "the high halves carry the sender's ids");
        assert!(ids.may_signal(1000, 5) && ids.may_signal(5, 1001) && !ids.may_signal(0, 0));
        assert!(SenderIds::KERNEL.may_signal(1000, 1000), "root signals anyone");
        let all = SignalRequest {
            target: SignalTarget::AllButInitAndSender,
            signal: 9,
            sender: 3,
            code: SignalCode::User,
            sender_ids: SenderIds::KERNEL,
        };
        bad = all.encode();
        bad[1] = 4;
        assert!(SignalRequest::decode(&bad).is_err(), "everyone names no id");
        for value in [0, 1, u64::MAX, 0x1_0000_0001] {
            for index in 0..ICC_ARGUMENTS {
                let mut arguments = good;
                arguments[index] = value;
                let _ = SignalRequest::decode(&arguments);
            }
        }
    }

    #[test]
    fn signal_codes_are_linux_numbers() {
        for code in [SignalCode::User, SignalCode::Thread, SignalCode::Kernel] {
            assert_eq!(SignalCode::from_number(code.number()), Some(code));
        }
        assert_eq!((SignalCode::User.number(), SignalCode::Thread.number(), SignalCode::Kernel.number()), (0, -6, 128));
        assert_eq!(SignalCode::from_number(1), None);
    }

    #[test]
    fn group_queries_and_ids_round_trip() {
        let query = GroupMembers { group: 100_001, session: 1 };
        assert_eq!(GroupMembers::decode(&query.encode()), Ok(query));
        assert_eq!(GroupMembers::decode(&[0, 1, 0, 0, 0]), Err(DecodeError::BadField("group")));
        assert_eq!(GroupMembers::decode(&[1, 1, 0, 0, 9]), Err(DecodeError::BadField("unused arguments")));
        let ids = ProcessIds { group: 200_003, session: 4_294_967_295 };
        assert_eq!(ProcessIds::unpack(ids.pack()), ids);
    }

    #[test]
    fn set_process_group_round_trips_and_refuses_zeros() {
        let request = SetProcessGroup { pid: 100_002, group: 1, parent: 1, parent_core: 0, parent_session: 1 };
        assert_eq!(SetProcessGroup::decode(&request.encode()), Ok(request));
        for index in [0, 1, 2, 4] {
            let mut arguments = request.encode();
            arguments[index] = 0;
            assert!(SetProcessGroup::decode(&arguments).is_err(), "argument {index} may not be 0");
            arguments[index] = u64::MAX;
            assert!(SetProcessGroup::decode(&arguments).is_err(), "argument {index} is a pid");
        }
    }
}
