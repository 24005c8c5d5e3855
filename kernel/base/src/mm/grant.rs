//! Grants (DESIGN "Grants"): bytes of one instance's partition lent to another for one request,
//! named in the message by their physical address, so that bulk data crosses cores by one copy
//! on the side that serves instead of travelling through the channel's slots in 48-byte chunks.
//!
//! The lender names a buffer of its heap (which its direct map shows at one physical run); the
//! borrower copies into or out of it page by page through its grant window, a page-table slot
//! of its own mapped for the copy alone. The borrower checks, at every copy, that the run lies
//! inside the lender's partition and that the lender still runs the kernel that lent it (its
//! KCB's incarnation): a request parked while its lender crashed or was restarted finds the
//! grant void, and no byte reaches memory another kernel now owns.

use super::frames::FrameError;
use super::window::{map_frame, unmap_frame, GRANT_WINDOW};
use crate::arch::paging::{DIRECT_MAP_BASE, PAGE_SIZE};
use crate::percore::kcb::PartitionRange;
use crate::percore::shared;
use core::sync::atomic::Ordering;

/// A run of another instance's memory lent for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The lender's core.
    pub core: u32,
    /// The lender's KCB incarnation when it lent the run.
    pub incarnation: u64,
    pub physical: u64,
    pub length: u64,
}

/// Bits of a grant's word that hold the physical address (every partition lies below 2^48).
const ADDRESS_BITS: u32 = 48;

impl Grant {
    /// The one word a request carries for it: the physical address, and the low 16 bits of
    /// the incarnation above it (the lender's core is the request's; the length, the
    /// request's own). A kernel restarted a multiple of 65 536 times between the lending and
    /// the copy would pass the check: its predecessor's request would have had to stay parked
    /// through all of them.
    pub fn to_word(&self) -> u64 {
        (self.incarnation & 0xffff) << ADDRESS_BITS | self.physical
    }

    /// The grant `word` names, lent by `core` for `length` bytes.
    pub fn from_word(core: u32, word: u64, length: u64) -> Self {
        Self { core, incarnation: word >> ADDRESS_BITS, physical: word & ((1 << ADDRESS_BITS) - 1), length }
    }
}

/// Why a grant could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantError {
    /// The run is not inside the lender's partition, or the lender is no core.
    OutsideLender,
    /// The lender stopped, crashed or runs another kernel since it lent the run.
    LenderGone,
    /// The copy would run past the end of the grant.
    PastEnd,
    /// No frame was left for the window's page table.
    NoMemory,
}

/// Lends `buffer` (this instance's heap memory, seen through its direct map): the grant a
/// request carries. `None` for memory the direct map does not show (a stack, a user page).
pub fn lend(buffer: &[u8]) -> Option<Grant> {
    let start = buffer.as_ptr() as u64;
    let physical = start.checked_sub(DIRECT_MAP_BASE)?;
    let kcb = shared::this_kcb();
    let partition = kcb.partition();
    if physical < partition.start || physical + buffer.len() as u64 > partition.end {
        return None;
    }
    Some(Grant {
        core: shared::this_core(),
        incarnation: kcb.incarnation.load(Ordering::Acquire),
        physical,
        length: buffer.len() as u64,
    })
}

/// Checks that `grant` may still be used for `length` bytes at `offset`.
fn check(grant: &Grant, offset: u64, length: usize) -> Result<(), GrantError> {
    let region = shared::get();
    let core = grant.core as usize;
    if core >= region.listed_kcbs().len() {
        return Err(GrantError::OutsideLender);
    }
    let kcb = region.kcb(core);
    let partition = kcb.partition();
    let end = grant.physical.checked_add(grant.length).ok_or(GrantError::OutsideLender)?;
    if grant.physical < partition.start || end > partition.end {
        return Err(GrantError::OutsideLender);
    }
    if offset.checked_add(length as u64).is_none_or(|last| last > grant.length) {
        return Err(GrantError::PastEnd);
    }
    let incarnation = kcb.incarnation.load(Ordering::Acquire);
    if !kcb.state().is_live() || incarnation & 0xffff != grant.incarnation & 0xffff {
        return Err(GrantError::LenderGone);
    }
    Ok(())
}

/// Checks the grant, then calls `each(window, done, step)` for every page-sized step of the
/// `length` bytes at `offset`, with the step's bytes mapped at `window` for the call only.
fn copy(
    grant: &Grant,
    offset: u64,
    length: usize,
    mut each: impl FnMut(*mut u8, usize, usize),
) -> Result<(), GrantError> {
    check(grant, offset, length)?;
    let mut done = 0usize;
    while done < length {
        let physical = grant.physical + offset + done as u64;
        let in_page = (physical % PAGE_SIZE) as usize;
        let step = (PAGE_SIZE as usize - in_page).min(length - done);
        map_frame(GRANT_WINDOW, physical - in_page as u64).map_err(|_: FrameError| GrantError::NoMemory)?;
        each((GRANT_WINDOW + in_page as u64) as *mut u8, done, step);
        unmap_frame(GRANT_WINDOW);
        done += step;
    }
    Ok(())
}

/// Copies `bytes` into the grant at `offset`.
pub fn copy_into(grant: &Grant, offset: u64, bytes: &[u8]) -> Result<(), GrantError> {
    copy(grant, offset, bytes.len(), |window, done, step| {
        // SAFETY: the window maps the grant's page writable for this step, which stays inside
        // that page; the grant lies in the lender's partition, which no structure of this
        // instance overlaps; `done + step <= bytes.len()`.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr().add(done), window, step) }
    })
}

/// Copies `out.len()` bytes of the grant at `offset` into `out`.
pub fn copy_from(grant: &Grant, offset: u64, out: &mut [u8]) -> Result<(), GrantError> {
    let length = out.len();
    let target = out.as_mut_ptr();
    copy(grant, offset, length, |window, done, step| {
        // SAFETY: as in `copy_into`, reading; `done + step <= out.len()`.
        unsafe { core::ptr::copy_nonoverlapping(window as *const u8, target.add(done), step) }
    })
}
