//! Process groups and sessions across instances: `setpgid`, `setsid`.
//!
//! A group or session id is the pid of its first leader, which may be homed on any instance,
//! and its members may live on several (a `reef_spawn` child joins its parent's group on
//! its own core). So a question about a group that this instance cannot answer alone (does
//! the group exist in this session?) is asked of every live instance by an inter-core call.

use super::{find, home_of, Errno, Parent, Process};
use crate::core::shared;
use abi::message::{handler, IccStatus, ICC_ARGUMENTS};
use abi::signal::{GroupMembers, ProcessIds, SetProcessGroup};
use core::sync::atomic::Ordering;
use linux_raw_sys::errno;

fn caller() -> Result<alloc::sync::Arc<Process>, Errno> {
    crate::proc::current_process().ok_or(errno::EPERM)
}

fn ids_of(process: &Process) -> ProcessIds {
    ProcessIds { group: process.process_group(), session: process.session() }
}

/// The group and session of process `pid` (0: the caller), homed on any instance.
pub fn ids(pid: u32) -> Result<ProcessIds, Errno> {
    if pid == 0 {
        return Ok(ids_of(caller()?.as_ref()));
    }
    let home = home_of(pid);
    if home == shared::this_core() as usize {
        return find(pid).map(|p| ids_of(&p)).ok_or(errno::ESRCH);
    }
    if home >= crate::msg::messaging_cores() || !crate::msg::is_reachable(home) {
        return Err(errno::ESRCH);
    }
    crate::msg::icc::call(home, handler::PROCESS_IDS, [u64::from(pid), 0, 0, 0, 0], crate::msg::SEND_TIMEOUT_MS)
        .map(ProcessIds::unpack)
        .map_err(|_| errno::ESRCH)
}

/// Whether any process, on any live instance, is in group `group` (and in `session`, unless
/// it is 0).
fn group_exists(group: u32, session: u32) -> bool {
    let query = GroupMembers { group, session };
    if members_here(&query) > 0 {
        return true;
    }
    let here = shared::this_core() as usize;
    (0..crate::msg::messaging_cores()).filter(|&c| c != here && crate::msg::is_reachable(c)).any(|core| {
        crate::msg::icc::call(core, handler::GROUP_MEMBERS, query.encode(), crate::msg::SEND_TIMEOUT_MS)
            .is_ok_and(|count| count > 0)
    })
}

fn members_here(query: &GroupMembers) -> usize {
    super::all()
        .iter()
        .filter(|p| p.process_group() == query.group && (query.session == 0 || p.session() == query.session))
        .count()
}

/// Keeps the parent's record of `process` in step with its new group, when the parent is
/// homed here (one homed elsewhere learns the group at the child's exit).
fn tell_parent_here(process: &Process) {
    if process.parent.pid == 0 || process.parent.home() != shared::this_core() as usize {
        return;
    }
    if let Some(parent) = find(process.parent.pid) {
        let group = process.process_group();
        if let Some(child) = parent.state.lock().children.iter_mut().find(|c| c.pid == process.pid) {
            child.process_group = group;
        }
    }
}

/// `setpgid(pid, group)` with Linux's rules: `pid` (0: the caller) is the caller or a child
/// of it (`ESRCH`); a child in another session is `EPERM`, one that called `execve` is
/// `EACCES`; a session leader is `EPERM`; `group` (0: `pid`) must be `pid` or an existing
/// group of the caller's session (`EPERM`).
pub fn set_group(pid: u32, group: u32) -> Result<(), Errno> {
    let me = caller()?;
    let target = if pid == 0 { me.pid } else { pid };
    let group = if group == 0 { target } else { group };
    let session = me.session();
    if target == me.pid {
        if me.pid == session {
            return Err(errno::EPERM);
        }
        if group != target && !group_exists(group, session) {
            return Err(errno::EPERM);
        }
        me.process_group.store(group, Ordering::Relaxed);
        tell_parent_here(&me);
        super::report_to_proc(&me);
        return Ok(());
    }
    if !me.state.lock().children.iter().any(|c| c.pid == target) {
        return Err(errno::ESRCH);
    }
    if group != target && !group_exists(group, session) {
        return Err(errno::EPERM);
    }
    let request = SetProcessGroup {
        pid: target,
        group,
        parent: me.pid,
        parent_core: shared::this_core(),
        parent_session: session,
    };
    let home = home_of(target);
    let result = if home == shared::this_core() as usize {
        set_child_group_here(&request)
    } else {
        match crate::msg::icc::call(home, handler::SET_PROCESS_GROUP, request.encode(), crate::msg::SEND_TIMEOUT_MS) {
            Ok(0) => Ok(()),
            Ok(error) => Err(error as Errno),
            Err(_) => Err(errno::ESRCH),
        }
    };
    if result.is_ok() {
        if let Some(child) = me.state.lock().children.iter_mut().find(|c| c.pid == target) {
            child.process_group = group;
        }
    }
    result
}

/// The child's half of `setpgid` by its parent, on the child's home.
fn set_child_group_here(request: &SetProcessGroup) -> Result<(), Errno> {
    let child = find(request.pid).ok_or(errno::ESRCH)?;
    if !child.parent.is(Parent { core: request.parent_core, pid: request.parent }) {
        return Err(errno::ESRCH);
    }
    if child.session() != request.parent_session {
        return Err(errno::EPERM);
    }
    if child.exec_done.load(Ordering::Relaxed) {
        return Err(errno::EACCES);
    }
    if child.pid == child.session() {
        return Err(errno::EPERM);
    }
    child.process_group.store(request.group, Ordering::Relaxed);
    super::report_to_proc(&child);
    Ok(())
}

/// `setsid`: the caller leads a new session and group, named by its pid, and returns it.
/// `EPERM` if it leads a group already (some group, on any instance, bears its pid).
pub fn new_session() -> Result<u32, Errno> {
    let me = caller()?;
    if me.process_group() == me.pid || group_exists(me.pid, 0) {
        return Err(errno::EPERM);
    }
    me.session.store(me.pid, Ordering::Relaxed);
    me.process_group.store(me.pid, Ordering::Relaxed);
    tell_parent_here(&me);
    super::report_to_proc(&me);
    Ok(me.pid)
}

/// Registers the ICC handlers other instances ask about groups and sessions.
pub fn init() {
    crate::msg::icc::register(handler::GROUP_MEMBERS, |arguments: &[u64; ICC_ARGUMENTS]| {
        let query = GroupMembers::decode(arguments).map_err(|_| IccStatus::BadArguments)?;
        Ok(members_here(&query) as u64)
    });
    crate::msg::icc::register(handler::PROCESS_IDS, |arguments: &[u64; ICC_ARGUMENTS]| {
        let pid = u32::try_from(arguments[0]).map_err(|_| IccStatus::BadArguments)?;
        find(pid).map(|p| ids_of(&p).pack()).ok_or(IccStatus::Failed)
    });
    crate::msg::icc::register(handler::SET_PROCESS_GROUP, |arguments: &[u64; ICC_ARGUMENTS]| {
        let request = SetProcessGroup::decode(arguments).map_err(|_| IccStatus::BadArguments)?;
        Ok(match set_child_group_here(&request) {
            Ok(()) => 0,
            Err(error) => u64::from(error),
        })
    });
}
