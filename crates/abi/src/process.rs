//! Messages between kernel instances about processes: spawn a process on another core, its
//! answer, and a child's exit travelling to its parent's home.

use crate::message::{exact, u32_at, u64_at, DecodeError, PAYLOAD_SIZE};

/// Longest path a spawn request carries (Linux `PATH_MAX`).
pub const MAX_PATH: usize = 4096;

/// Who asks for a process, and the group and session the new process joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpawnOrigin {
    /// Chosen by the sender; echoed in the reply.
    pub request_id: u64,
    /// The process that asked (0: the kernel of `parent_core`).
    pub parent_pid: u32,
    /// The parent's home instance.
    pub parent_core: u32,
    /// The process group the child joins (the parent's), or 0 with `session` 0: the child
    /// leads a new session and group of its own (children of a kernel).
    pub process_group: u32,
    /// The session the child joins (the parent's), or 0 as above.
    pub session: u32,
    /// The signal the child gets when its parent ends (Linux's `PR_SET_PDEATHSIG`), or 0.
    pub death_signal: u32,
}

/// A request to build a process on the receiving instance: the program, its arguments and
/// environment, who waits for it, and the group and session it joins. Travels as a large
/// message; decoding checks every count and terminator, so a malformed request is refused,
/// never trusted.
///
/// Layout: request id (u64), parent pid (u32), parent core (u32), process group (u32),
/// session (u32), argument count (u32), environment count (u32), descriptor count (u32),
/// working directory (u64, a file-service handle or `u64::MAX` for the root), the signal the
/// child gets when its parent ends (u32, 0 for none, at most [`crate::signal::MAX_SIGNAL`]), the
/// root directory (u64, a handle or `u64::MAX` as the working directory is), the parent's
/// ids (eight u32, `Ids::encode`), its supplementary group count (u32), then the
/// descriptors ([`Descriptor::SIZE`] bytes each), then `path\0`, the arguments, the
/// environment, each NUL-ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpawnRequest<'a> {
    pub origin: SpawnOrigin,
    /// The parent's working directory: a handle of the file service (one reference is the
    /// child's), or `u64::MAX` for the root.
    pub working_directory: u64,
    /// The parent's root directory (`chroot`), as `working_directory` is.
    pub root_directory: u64,
    /// The descriptors the child starts with.
    descriptors: &'a [u8],
    /// The parent's user and group ids, which the child starts with.
    pub credentials: crate::credentials::Ids,
    /// The parent's supplementary groups, each a little-endian `u32` (see [`SpawnRequest::groups`]).
    group_bytes: &'a [u8],
    /// The program's path.
    pub path: &'a [u8],
    argument_count: u32,
    environment_count: u32,
    /// The NUL-ended arguments, then the NUL-ended environment.
    strings: &'a [u8],
}

const HEADER: usize = 8 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 8 + 4 + 8 + crate::credentials::Ids::SIZE + 4;
/// Where the credentials start in the header, and the group count after them.
const CREDENTIALS_AT: usize = 56;
const GROUP_COUNT_AT: usize = CREDENTIALS_AT + crate::credentials::Ids::SIZE;

/// Most descriptors a spawned process inherits (Reef's `RLIMIT_NOFILE`).
pub const MAX_DESCRIPTORS: usize = 1024;

/// A descriptor handed to a spawned process: its number, and the file-service handle it
/// names (of which one reference is the child's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub fd: u32,
    /// `abi::file::HandleKind` as a number.
    pub kind: u32,
    pub handle: u64,
}

impl Descriptor {
    pub const SIZE: usize = 16;
}

impl<'a> SpawnRequest<'a> {
    /// Bytes [`encode`](Self::encode) writes for these strings and descriptors.
    pub fn encoded_size(
        path: &[u8],
        arguments: &[&[u8]],
        environment: &[&[u8]],
        descriptors: usize,
        groups: usize,
    ) -> usize {
        HEADER
            + descriptors * Descriptor::SIZE
            + groups * 4
            + path.len()
            + 1
            + arguments.iter().chain(environment).map(|s| s.len() + 1).sum::<usize>()
    }

    /// Writes the request into `out` (at least `encoded_size` long); returns the length, or
    /// `None` if a string holds a NUL, `out` is too short, or only one of group and session
    /// is 0.
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        out: &mut [u8],
        origin: &SpawnOrigin,
        (working_directory, root_directory): (u64, u64),
        (credentials, groups): (&crate::credentials::Ids, &[u32]),
        descriptors: &[Descriptor],
        path: &[u8],
        arguments: &[&[u8]],
        environment: &[&[u8]],
    ) -> Option<usize> {
        let size = Self::encoded_size(path, arguments, environment, descriptors.len(), groups.len());
        if out.len() < size
            || path.is_empty()
            || path.len() > MAX_PATH
            || descriptors.len() > MAX_DESCRIPTORS
            || groups.len() > crate::credentials::MAX_GROUPS
        {
            return None;
        }
        if (origin.process_group == 0) != (origin.session == 0) || origin.death_signal > crate::signal::MAX_SIGNAL {
            return None;
        }
        out[0..8].copy_from_slice(&origin.request_id.to_le_bytes());
        out[8..12].copy_from_slice(&origin.parent_pid.to_le_bytes());
        out[12..16].copy_from_slice(&origin.parent_core.to_le_bytes());
        out[16..20].copy_from_slice(&origin.process_group.to_le_bytes());
        out[20..24].copy_from_slice(&origin.session.to_le_bytes());
        out[24..28].copy_from_slice(&u32::try_from(arguments.len()).ok()?.to_le_bytes());
        out[28..32].copy_from_slice(&u32::try_from(environment.len()).ok()?.to_le_bytes());
        out[32..36].copy_from_slice(&(descriptors.len() as u32).to_le_bytes());
        out[36..44].copy_from_slice(&working_directory.to_le_bytes());
        out[44..48].copy_from_slice(&origin.death_signal.to_le_bytes());
        out[48..56].copy_from_slice(&root_directory.to_le_bytes());
        out[CREDENTIALS_AT..GROUP_COUNT_AT].copy_from_slice(&credentials.encode());
        out[GROUP_COUNT_AT..GROUP_COUNT_AT + 4].copy_from_slice(&(groups.len() as u32).to_le_bytes());
        let mut at = HEADER;
        for descriptor in descriptors {
            out[at..at + 4].copy_from_slice(&descriptor.fd.to_le_bytes());
            out[at + 4..at + 8].copy_from_slice(&descriptor.kind.to_le_bytes());
            out[at + 8..at + 16].copy_from_slice(&descriptor.handle.to_le_bytes());
            at += Descriptor::SIZE;
        }
        for group in groups {
            out[at..at + 4].copy_from_slice(&group.to_le_bytes());
            at += 4;
        }
        for string in core::iter::once(&path).chain(arguments.iter()).chain(environment.iter()) {
            if string.contains(&0) {
                return None;
            }
            out[at..at + string.len()].copy_from_slice(string);
            out[at + string.len()] = 0;
            at += string.len() + 1;
        }
        Some(at)
    }

    /// Reads a request from untrusted bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        if bytes.len() < HEADER {
            return Err(DecodeError::BadLength { expected: HEADER, found: bytes.len() });
        }
        let header: &[u8; HEADER] = exact(&bytes[..HEADER])?;
        let (process_group, session) = (u32_at(header, 16), u32_at(header, 20));
        if (process_group == 0) != (session == 0) {
            return Err(DecodeError::BadField("process group and session"));
        }
        let death_signal = u32_at(header, 44);
        if death_signal > crate::signal::MAX_SIGNAL {
            return Err(DecodeError::BadField("death signal"));
        }
        let argument_count = u32_at(header, 24);
        let environment_count = u32_at(header, 28);
        let descriptor_count = u32_at(header, 32) as usize;
        if descriptor_count > MAX_DESCRIPTORS || bytes.len() < HEADER + descriptor_count * Descriptor::SIZE {
            return Err(DecodeError::BadField("descriptor count"));
        }
        let descriptors = &bytes[HEADER..HEADER + descriptor_count * Descriptor::SIZE];
        let credentials = crate::credentials::Ids::decode(&header[CREDENTIALS_AT..GROUP_COUNT_AT])
            .ok_or(DecodeError::BadField("credentials"))?;
        let group_count = u32_at(header, GROUP_COUNT_AT) as usize;
        let groups_at = HEADER + descriptors.len();
        if group_count > crate::credentials::MAX_GROUPS || bytes.len() < groups_at + group_count * 4 {
            return Err(DecodeError::BadField("group count"));
        }
        let group_bytes = &bytes[groups_at..groups_at + group_count * 4];
        let rest = &bytes[groups_at + group_bytes.len()..];
        let path_end = rest.iter().position(|&b| b == 0).ok_or(DecodeError::BadField("path"))?;
        if path_end == 0 || path_end > MAX_PATH {
            return Err(DecodeError::BadField("path"));
        }
        let strings = &rest[path_end + 1..];
        let terminators = strings.iter().filter(|&&b| b == 0).count() as u64;
        let wanted = u64::from(argument_count) + u64::from(environment_count);
        if terminators != wanted || strings.last().is_some_and(|&b| b != 0) {
            return Err(DecodeError::BadField("string counts"));
        }
        Ok(Self {
            origin: SpawnOrigin {
                request_id: u64_at(header, 0),
                parent_pid: u32_at(header, 8),
                parent_core: u32_at(header, 12),
                process_group,
                session,
                death_signal,
            },
            working_directory: u64_at(header, 36),
            root_directory: u64_at(header, 48),
            descriptors,
            credentials,
            group_bytes,
            path: &rest[..path_end],
            argument_count,
            environment_count,
            strings,
        })
    }

    /// The descriptors the child starts with.
    pub fn descriptors(&self) -> impl Iterator<Item = Descriptor> + 'a {
        self.descriptors.chunks_exact(Descriptor::SIZE).map(|record| Descriptor {
            fd: u32::from_le_bytes([record[0], record[1], record[2], record[3]]),
            kind: u32::from_le_bytes([record[4], record[5], record[6], record[7]]),
            handle: u64::from_le_bytes([
                record[8], record[9], record[10], record[11], record[12], record[13], record[14], record[15],
            ]),
        })
    }

    /// The parent's supplementary groups.
    pub fn groups(&self) -> impl Iterator<Item = u32> + 'a {
        self.group_bytes.chunks_exact(4).map(|bytes| u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// The arguments.
    pub fn arguments(&self) -> impl Iterator<Item = &'a [u8]> {
        self.strings.split(|&b| b == 0).take(self.argument_count as usize)
    }

    /// The environment.
    pub fn environment(&self) -> impl Iterator<Item = &'a [u8]> {
        self.strings.split(|&b| b == 0).skip(self.argument_count as usize).take(self.environment_count as usize)
    }
}

/// The answer to a [`SpawnRequest`]: the new pid, or a negative Linux errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpawnReply {
    pub request_id: u64,
    pub result: i64,
}

impl SpawnReply {
    pub const SIZE: usize = 16;

    pub fn encode(&self, out: &mut [u8; PAYLOAD_SIZE]) -> usize {
        out[0..8].copy_from_slice(&self.request_id.to_le_bytes());
        out[8..16].copy_from_slice(&self.result.to_le_bytes());
        Self::SIZE
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let result = u64_at(bytes, 8) as i64;
        if result == 0 || result < -4095 {
            return Err(DecodeError::BadField("result"));
        }
        Ok(Self { request_id: u64_at(bytes, 0), result })
    }
}

/// CPU time a process used, in microseconds: in ring 3 (`user_us`) and in the kernel on its
/// behalf (`system_us`); what `wait4`'s rusage, `getrusage` and `times` report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user_us: u64,
    pub system_us: u64,
}

impl CpuTimes {
    /// Both sums.
    pub fn plus(self, other: Self) -> Self {
        Self {
            user_us: self.user_us.saturating_add(other.user_us),
            system_us: self.system_us.saturating_add(other.system_us),
        }
    }
}

/// A child exited: its parent (homed on the receiver) may reap it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildExited {
    /// The parent (0: the receiving kernel itself, e.g. its shell).
    pub parent_pid: u32,
    pub child_pid: u32,
    /// The `wait4` status word (Linux encoding).
    pub wait_status: u32,
    /// The child's process group when it ended (`wait4` of a group matches on it).
    pub process_group: u32,
    /// The CPU time of the child and of the children it reaped (Linux's `RUSAGE_CHILDREN` of
    /// the parent grows by it when the parent reaps this child).
    pub times: CpuTimes,
}

impl ChildExited {
    pub const SIZE: usize = 32;

    pub fn encode(&self, out: &mut [u8; PAYLOAD_SIZE]) -> usize {
        out[0..4].copy_from_slice(&self.parent_pid.to_le_bytes());
        out[4..8].copy_from_slice(&self.child_pid.to_le_bytes());
        out[8..12].copy_from_slice(&self.wait_status.to_le_bytes());
        out[12..16].copy_from_slice(&self.process_group.to_le_bytes());
        out[16..24].copy_from_slice(&self.times.user_us.to_le_bytes());
        out[24..32].copy_from_slice(&self.times.system_us.to_le_bytes());
        Self::SIZE
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let child_pid = u32_at(bytes, 4);
        if child_pid == 0 {
            return Err(DecodeError::BadField("child pid"));
        }
        let process_group = u32_at(bytes, 12);
        if process_group == 0 {
            return Err(DecodeError::BadField("process group"));
        }
        let times = CpuTimes { user_us: u64_at(bytes, 16), system_us: u64_at(bytes, 24) };
        Ok(Self { parent_pid: u32_at(bytes, 0), child_pid, wait_status: u32_at(bytes, 8), process_group, times })
    }
}

const _: () = assert!(SpawnReply::SIZE <= PAYLOAD_SIZE && ChildExited::SIZE <= PAYLOAD_SIZE);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    const ROOT: (&crate::credentials::Ids, &[u32]) = (&crate::credentials::Ids::ROOT, &[]);

    #[test]
    fn spawn_request_round_trip() {
        let mut out = [0u8; 256];
        let arguments: [&[u8]; 3] = [b"/bin/busybox", b"ls", b"-l"];
        let environment: [&[u8]; 1] = [b"HOME=/"];
        let origin =
            SpawnOrigin { request_id: 7, parent_pid: 3, parent_core: 1, process_group: 2, session: 1, death_signal: 9 };
        let descriptors = [Descriptor { fd: 0, kind: 3, handle: 1 }, Descriptor { fd: 1, kind: 5, handle: 42 }];
        let ids = crate::credentials::Ids { effective_uid: 0, ..crate::credentials::Ids::of(1000, 100) };
        let credentials = (&ids, &[27u32, 100][..]);
        let n = SpawnRequest::encode(
            &mut out,
            &origin,
            (9, 12),
            credentials,
            &descriptors,
            b"/bin/busybox",
            &arguments,
            &environment,
        )
        .unwrap();
        let request = SpawnRequest::decode(&out[..n]).unwrap();
        assert_eq!(request.origin, origin);
        assert_eq!(request.credentials, ids);
        assert_eq!(request.groups().collect::<Vec<_>>(), [27, 100]);
        assert_eq!((request.working_directory, request.root_directory), (9, 12));
        assert_eq!(request.descriptors().collect::<Vec<_>>(), descriptors);
        assert_eq!(request.path, b"/bin/busybox");
        assert_eq!(request.arguments().collect::<Vec<_>>(), arguments);
        assert_eq!(request.environment().collect::<Vec<_>>(), environment);
    }

    #[test]
    fn malformed_spawn_requests_are_refused() {
        let mut out = [0u8; 128];
        let origin =
            SpawnOrigin { request_id: 1, parent_pid: 1, parent_core: 0, process_group: 0, session: 0, death_signal: 0 };
        let n = SpawnRequest::encode(&mut out, &origin, (u64::MAX, u64::MAX), ROOT, &[], b"/x", &[b"a"], &[]).unwrap();
        assert!(SpawnRequest::decode(&out[..n]).is_ok(), "a new session and group");
        assert!(SpawnRequest::decode(&out[..n - 1]).is_err(), "missing terminator");
        out[16] = 5;
        assert_eq!(
            SpawnRequest::decode(&out[..n]),
            Err(DecodeError::BadField("process group and session")),
            "a group without a session"
        );
        out[20] = 5;
        assert!(SpawnRequest::decode(&out[..n]).is_ok(), "both given");
        out[24] = 5;
        assert!(SpawnRequest::decode(&out[..n]).is_err(), "wrong count");
        out[24] = 1;
        out[32] = 200;
        assert_eq!(SpawnRequest::decode(&out[..n]), Err(DecodeError::BadField("descriptor count")), "too many");
        out[32] = 0;
        out[44] = 65;
        assert_eq!(SpawnRequest::decode(&out[..n]), Err(DecodeError::BadField("death signal")), "no signal 65");
        out[44] = 0;
        let unknown = SpawnOrigin { death_signal: 65, ..origin };
        assert_eq!(
            SpawnRequest::encode(&mut out, &unknown, (u64::MAX, u64::MAX), ROOT, &[], b"/x", &[], &[]),
            None,
            "no signal 65"
        );
        let half = SpawnOrigin { session: 1, ..origin };
        assert_eq!(
            SpawnRequest::encode(&mut out, &half, (u64::MAX, u64::MAX), ROOT, &[], b"/x", &[], &[]),
            None,
            "a session without a group"
        );
        assert!(SpawnRequest::decode(&[0; 10]).is_err());
        for cut in 0..n {
            let _ = SpawnRequest::decode(&out[..cut]);
        }
    }

    #[test]
    fn replies_and_exits_round_trip() {
        let mut out = [0u8; PAYLOAD_SIZE];
        let reply = SpawnReply { request_id: 9, result: -2 };
        let n = reply.encode(&mut out);
        assert_eq!(SpawnReply::decode(&out[..n]), Ok(reply));
        let times = CpuTimes { user_us: 12, system_us: 1 << 40 };
        let exit = ChildExited { parent_pid: 1, child_pid: 200001, wait_status: 7 << 8, process_group: 1, times };
        let n = exit.encode(&mut out);
        assert_eq!(ChildExited::decode(&out[..n]), Ok(exit));
        out[12..16].fill(0);
        assert_eq!(ChildExited::decode(&out[..n]), Err(DecodeError::BadField("process group")));
    }
}
