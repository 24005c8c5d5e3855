//! Where moved ids live: the `moved_away` table in the KCB of each id's range.
//!
//! Every core reads these tables to route a pid or tid to its home ([`crate::proc::home_of`]);
//! the destination of a move writes them as it takes a process in.

use crate::core::shared;
use crate::proc::{range_of, Errno, PIDS};
use linux_raw_sys::errno;

/// The table of ids of OSnode `range` that live elsewhere.
fn table_of(range: usize) -> Option<kcb::block::MovedTable<'static>> {
    shared::get().listed_kcbs().get(range).map(|kcb| kcb.moved_away.table())
}

/// Where process `pid`, of OSnode `range`'s pid range, lives if it moved away from there.
pub fn moved_to(range: usize, pid: u32) -> Option<usize> {
    table_of(range)?.core_of(pid).map(|core| core as usize)
}

/// Records that `id` (a pid or tid) lives on this core now, in its range's KCB; one back in its
/// own range needs no record.
pub(super) fn record_here(id: u32) -> Result<(), Errno> {
    let me = shared::this_core();
    let range = range_of(id);
    let table = table_of(range).ok_or(errno::EINVAL)?;
    if range == me as usize {
        PIDS.lock().used.insert(id);
        table.forget(id);
        return Ok(());
    }
    if table.record(id, me) {
        Ok(())
    } else {
        Err(errno::ENOSPC)
    }
}

/// Undoes [`record_here`] of `id` when the move fails after it: the id lives on `origin`
/// again.
pub(super) fn give_back(id: u32, origin: usize) {
    let Some(table) = table_of(range_of(id)) else { return };
    if range_of(id) == shared::this_core() as usize {
        PIDS.lock().used.remove(&id);
    }
    if range_of(id) == origin {
        table.forget(id);
    } else {
        table.record(id, origin as u32);
    }
}

/// Whether [`record_here`] would find a slot for `id`.
pub(super) fn can_record(id: u32) -> bool {
    range_of(id) == shared::this_core() as usize || table_of(range_of(id)).is_some_and(|t| t.has_room_for(id))
}

/// The process or thread `id` ended (or came back to its range's OSnode): its range may hand
/// the id out again.
pub fn forget_moved(id: u32) {
    if let Some(table) = table_of(range_of(id)) {
        table.forget(id);
    }
}
