//! Which processes may move, or stay through a restart or a stop, and why one may not.

use crate::proc::{Errno, Process};
use abi::migration::MovedThread;
use linux_raw_sys::errno;

/// Why a process cannot move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CannotMove {
    /// It has this many threads, more than its range's KCB records.
    Threads(usize),
    /// The kernel core of a thread's syspage did not let go of it.
    HasSyspage,
    /// It is ending.
    Ending,
    /// It takes part in a `vfork` that is not over (one address space, two processes).
    InAVfork,
    /// A stop signal stopped it (its threads wait for a SIGCONT, not for a move).
    Stopped,
}

impl CannotMove {
    /// As a small number for an ICC's answer (see `core::role`).
    pub fn code(self) -> u32 {
        match self {
            Self::Threads(count) => count.min(0xFFFF) as u32,
            Self::HasSyspage => 0x2_0000,
            Self::Ending => 0x3_0000,
            Self::InAVfork => 0x4_0000,
            Self::Stopped => 0x5_0000,
        }
    }

    pub fn from_code(code: u32) -> Self {
        match code {
            0x2_0000 => Self::HasSyspage,
            0x3_0000 => Self::Ending,
            0x4_0000 => Self::InAVfork,
            0x5_0000 => Self::Stopped,
            count => Self::Threads(count as usize),
        }
    }
}

impl core::fmt::Display for CannotMove {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Threads(count) => {
                write!(f, "it has {count} threads, more than a KCB records ({})", kcb::block::MAX_MOVED_AWAY)
            }
            Self::HasSyspage => write!(f, "the kernel core of a thread's syspage did not let go of it"),
            Self::Ending => write!(f, "it is ending"),
            Self::InAVfork => write!(f, "it shares its address space with a vforked child or parent until an exec"),
            Self::Stopped => write!(f, "it is stopped: continue it first (kill -s CONT)"),
        }
    }
}

/// Why `process` cannot move to another core.
pub(super) fn why_it_cannot_move(process: &Process) -> Option<CannotMove> {
    why_it_cannot_go(process, Going::Elsewhere)
}

/// Where a process is asked to go.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Going {
    /// To another core.
    Elsewhere,
    /// Nowhere: kept for this OSnode's next kernel, which follows at once (a restart).
    ThroughRestart,
    /// Nowhere: kept in the KCB until a start, however long the core stays stopped.
    UntilStart,
}

/// Why `process` cannot go as asked.
pub(super) fn why_it_cannot_go(process: &Process, going: Going) -> Option<CannotMove> {
    if process.is_killed() {
        return Some(CannotMove::Ending);
    }
    if process.is_in_a_vfork() {
        return Some(CannotMove::InAVfork);
    }
    if process.is_stopped() {
        return Some(CannotMove::Stopped);
    }
    let threads = process.state.lock().threads.len();
    // Each thread's tid is recorded in its range's KCB while it lives elsewhere.
    if going == Going::Elsewhere && threads > kcb::block::MAX_MOVED_AWAY {
        return Some(CannotMove::Threads(threads));
    }
    // A thread on an AC is recalled and goes with its process: its new home ships it back to
    // the AC, which takes it from the home the pid's range names (NIX's execac, with a home
    // that changes). Through a stop until a start the AC holds it (halted), as through a
    // restart, and the kernel after the start ships it back. A syspage goes along too: its
    // KC serves it on through a restart of its home (the next kernel is the same home); for
    // a move, or a stop that keeps the process until a start, the KC lets go of it as the
    // thread checks in, and the destination (or the kernel after the start) registers it
    // again.
    None
}

/// A syspage among `threads`' that its kernel core still serves: it did not let go of it for
/// the move (a restart of it, say), so the process stays.
pub(super) fn syspage_not_released(threads: &[MovedThread]) -> Option<CannotMove> {
    threads.iter().any(|thread| crate::syscall::syspage::is_served(thread.tid)).then_some(CannotMove::HasSyspage)
}

/// Why a move failed, for the kernel log.
pub(super) fn error_text(error: Errno) -> &'static str {
    match error {
        errno::EBUSY => "the destination is no timesharing core, or the process cannot move now",
        errno::EEXIST => "the destination has that pid already",
        errno::EINVAL => "its image was malformed (a frame outside the sender's partition, memory outside user space)",
        errno::ENOMEM => "the destination ran out of frames",
        errno::ENOSPC => "its pid range's KCB has no free slot for a process living elsewhere",
        errno::E2BIG => "its image is larger than a message",
        errno::ETIMEDOUT => "the destination did not answer",
        errno::ECANCELED => "its origin gave up waiting for the answer and runs it on",
        errno::EAGAIN => "the image could not be sent, or too many moves out of the core are in flight",
        _ => "failed",
    }
}
