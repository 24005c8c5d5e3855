//! A process's credentials: its user and group ids and its supplementary groups, kept per
//! process (POSIX's rule, which Linux's libc emulates across threads), inherited by `fork`,
//! `clone` and `reef_spawn`, kept by `execve` (set-user-id and set-group-id bits honoured),
//! carried by a move to another core, and sent with every file request.

use abi::credentials::Ids;
use alloc::vec::Vec;

/// The ids and groups of one process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    pub ids: Ids,
    /// Sorted, as Linux keeps them (`groups_sort`); duplicates kept, as Linux does.
    pub groups: Vec<u32>,
}

impl Credentials {
    /// Root's, with no supplementary groups: what the kernel's first process starts with.
    pub fn root() -> Self {
        Self { ids: Ids::ROOT, groups: Vec::new() }
    }

    /// The groups as a file request carries them: little-endian `u32`s.
    pub fn group_bytes(&self) -> Vec<u8> {
        self.groups.iter().flat_map(|group| group.to_le_bytes()).collect()
    }
}

/// Whether the running process may do what Linux asks a capability for (`CAP_SETUID`,
/// `CAP_SYS_ADMIN`, `CAP_NET_BIND_SERVICE`...): its effective user id is 0. A kernel thread
/// may.
pub fn current_is_privileged() -> bool {
    super::current_process().is_none_or(|process| process.credentials.lock().ids.is_privileged())
}

/// The running process's effective user id (0 for a kernel thread).
pub fn current_effective_uid() -> u32 {
    super::current_process().map_or(0, |process| process.credentials.lock().ids.effective_uid)
}

/// The running thread's ids for a file request (registered with the file service:
/// `fs::client::register_current_caller`): its file-system ids, or for `access` its real
/// ones, as Linux's `access_override_creds` checks.
pub fn current_caller(check_as: crate::fs::client::CheckAs) -> crate::fs::client::CallerIds {
    let Some(process) = super::current_process() else { return crate::fs::client::CallerIds::default() };
    let credentials = process.credentials.lock();
    let ids = credentials.ids;
    let (filesystem_uid, filesystem_gid) = match check_as {
        crate::fs::client::CheckAs::FileSystem => (ids.filesystem_uid, ids.filesystem_gid),
        crate::fs::client::CheckAs::Real => (ids.real_uid, ids.real_gid),
    };
    // Root's groups decide nothing (it passes every mode check): its requests stay small.
    let group_bytes = if filesystem_uid == abi::credentials::ROOT { Vec::new() } else { credentials.group_bytes() };
    crate::fs::client::CallerIds { effective_uid: ids.effective_uid, filesystem_uid, filesystem_gid, group_bytes }
}
