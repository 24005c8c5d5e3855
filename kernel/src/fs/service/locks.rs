//! `flock`: advisory whole-file locks, held by open files (their handles), on nodes.
//!
//! As Linux's: one exclusive holder or any number of shared ones; a second `flock` by the
//! same open file converts its lock; `LOCK_NB` makes a conflict `EWOULDBLOCK`, otherwise the
//! request parks until the conflicting locks go (an unlock, or the last close of their open
//! file), and a signal ends the wait with `EINTR` (the client's cancel). Descriptors that
//! share an open file (`dup`, `fork`, a spawn's inheritance) share its lock. Only files with
//! a node lock: a pipe or the console is `EINVAL`.

use super::{Errno, Outcome, Reply, Service};
use alloc::collections::BTreeSet;
use linux_raw_sys::errno;

const LOCK_SH: u64 = 1;
const LOCK_EX: u64 = 2;
const LOCK_NB: u64 = 4;
const LOCK_UN: u64 = 8;

/// The locks on one node: its exclusive holder, or its shared ones.
#[derive(Default)]
pub(super) struct NodeLocks {
    exclusive: Option<u64>,
    shared: BTreeSet<u64>,
}

impl NodeLocks {
    fn is_empty(&self) -> bool {
        self.exclusive.is_none() && self.shared.is_empty()
    }

    /// Whether `handle` may take the lock `exclusive` (or shared) now.
    fn allows(&self, handle: u64, exclusive: bool) -> bool {
        let others_exclusive = self.exclusive.is_some_and(|holder| holder != handle);
        let others_shared = self.shared.iter().any(|&holder| holder != handle);
        !others_exclusive && (!exclusive || !others_shared)
    }

    fn drop_holder(&mut self, handle: u64) {
        if self.exclusive == Some(handle) {
            self.exclusive = None;
        }
        self.shared.remove(&handle);
    }
}

impl Service {
    /// `flock(operation)` by the open file `handle`.
    pub(super) fn lock(&mut self, handle: u64, operation: u64) -> Result<Outcome, Errno> {
        let node = self.node_of(handle)?.ok_or(errno::EINVAL)?;
        let wait = operation & LOCK_NB == 0;
        let exclusive = match operation & !LOCK_NB {
            LOCK_SH => false,
            LOCK_EX => true,
            LOCK_UN => {
                self.unlock(node, handle);
                return Ok(Outcome::Done(Reply::value(0, 0)));
            }
            _ => return Err(errno::EINVAL),
        };
        let locks = self.locks.entry(node).or_default();
        if !locks.allows(handle, exclusive) {
            if locks.is_empty() {
                self.locks.remove(&node);
            }
            return if wait { Ok(Outcome::Park(0)) } else { Err(errno::EWOULDBLOCK) };
        }
        locks.drop_holder(handle);
        if exclusive {
            locks.exclusive = Some(handle);
        } else {
            locks.shared.insert(handle);
        }
        Ok(Outcome::Done(Reply::value(0, 0)))
    }

    /// Lets go of `handle`'s lock on `node`, if it holds one (`LOCK_UN`, or the last close of
    /// `handle`); waiting locks may go on.
    pub(super) fn unlock(&mut self, node: vfs::NodeId, handle: u64) {
        if let Some(locks) = self.locks.get_mut(&node) {
            locks.drop_holder(handle);
            if locks.is_empty() {
                self.locks.remove(&node);
            }
            self.changed = true;
        }
    }
}
