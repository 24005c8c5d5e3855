//! An application core's side of syspages: its guest's calls as entries for a kernel core.

use super::home::{is_restarting, ring_doorbell, travels_by_syspage};
use super::*;

use crate::mm::window::LentPage;

/// The AC's view of its guest's syspage: where it mapped the frame, and its submit state.
struct OwnPage {
    physical: u64,
    /// The page, mapped at the window slot `OWN_SLOT`.
    page: LentPage,
    submitter: Submitter,
}

static OWN: Mutex<Option<OwnPage>> = Mutex::new(None);

/// The AC's window slot (an AC serves no syspage, so slot 0 is free).
const OWN_SLOT: usize = 0;

/// What became of a guest's call offered to its kernel core's syspage.
pub enum AcSubmit {
    /// Served: the result is in the frame. With `stale_translations`, the home changed the
    /// tables this AC walks (they are the home's): translations it cached of them may be stale
    /// (a page unmapped and mapped again elsewhere), and the AC must flush them.
    Done { stale_translations: bool },
    /// It must go to the home instead (a call that changes the thread's registers, a full
    /// ring, a KC that stopped).
    NotTaken,
    /// The guest was ended meanwhile (`is_ended` said so): the home waits for this core to
    /// let go of the thread.
    Ended,
}

/// On an AC: the guest's call as a syspage entry for `kernel_core`, waited for while
/// `is_ended` (the AC side's word that its guest is ending) says no.
pub fn submit_for_ac(
    frame: &mut InterruptFrame,
    kernel_core: usize,
    physical: u64,
    is_ended: fn() -> bool,
) -> AcSubmit {
    let number = frame.rax;
    // The KC the home named at the last run, unless it left its role since (its syspages went
    // to another KC, which the KCBs name).
    let kernel_core = if is_running_kernel_core(kernel_core) { kernel_core } else { server_of(physical, kernel_core) };
    if physical == 0 || !travels_by_syspage(number) || !crate::msg::is_live(kernel_core) {
        return AcSubmit::NotTaken;
    }
    match submit_and_wait(frame, kernel_core, physical, is_ended) {
        Submitted::Done(value) => {
            counters().sent_by_syspage.fetch_add(1, Ordering::Relaxed);
            frame.rax = value as u64;
            AcSubmit::Done { stale_translations: changes_mappings(number) }
        }
        Submitted::NotTaken => AcSubmit::NotTaken,
        // Killed meanwhile: the home waits for this core to let go of the thread.
        Submitted::Ended => AcSubmit::Ended,
    }
}

/// The kernel core whose KCB says it serves the syspage in frame `physical` (`hint` if it
/// does, or if none does): after a KC handed its syspages to another, an AC's guest learns
/// the new one only at its next run from home.
fn server_of(physical: u64, hint: usize) -> usize {
    let region = shared::get();
    let serves = |core: usize| {
        region.kcbs.get(core).is_some_and(|kcb| {
            kcb.role() == Role::Kernel
                && kcb.served_syspages.iter().any(|record| {
                    record.read().state != served::FREE
                        && u64::from(record.frame.load(Ordering::Relaxed)) == physical / PAGE_SIZE
                })
        })
    };
    if serves(hint) {
        return hint;
    }
    let count = (shared::facts().core_count as usize).min(crate::msg::messaging_cores());
    (0..count).find(|&core| serves(core)).unwrap_or(hint)
}

/// Polls of an AC's syspage entry between two looks at which KC serves the page.
const SERVER_LOOK_EVERY: u32 = 4096;

/// What came of an AC's syspage entry.
enum Submitted {
    /// The KC completed it with this value.
    Done(i64),
    /// It could not be submitted (full ring, unmappable frame) or its KC stopped: the call
    /// goes to the home instead.
    NotTaken,
    /// The home ended the thread while it waited.
    Ended,
}

/// Puts the call of `frame` in the syspage at `physical` and waits for it; the page's lock is
/// let go before the caller acts on the outcome (leaving the guest never returns).
fn submit_and_wait(frame: &InterruptFrame, kernel_core: usize, physical: u64, is_ended: fn() -> bool) -> Submitted {
    let mut guard = OWN.lock();
    if guard.as_ref().is_none_or(|page| page.physical != physical) {
        // The slot's old mapping goes first (dropped), then the new page takes it.
        *guard = None;
        let Ok(page) = LentPage::map(OWN_SLOT, physical) else { return Submitted::NotTaken };
        *guard = Some(OwnPage { physical, page, submitter: Submitter::new() });
    }
    let Some(own) = guard.as_mut() else { return Submitted::NotTaken };
    let page = own.page.get::<Page>();
    let arguments = [frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8, frame.r9];
    let Ok(index) = own.submitter.add(page, frame.rax as u32, arguments) else { return Submitted::NotTaken };
    ring_doorbell(kernel_core);
    let mut kernel_core = kernel_core;
    let mut polls = 0u32;
    while !Submitter::is_done(page, index) {
        if is_ended() {
            return Submitted::Ended;
        }
        if polls.is_multiple_of(SERVER_LOOK_EVERY) && polls != 0 {
            // Its KC may have handed the page to another meanwhile, which may be halted.
            kernel_core = server_of(physical, kernel_core);
            ring_doorbell(kernel_core);
        }
        if !crate::msg::is_live(kernel_core) && !is_restarting(kernel_core) {
            log::warn!("kernel core {kernel_core} stopped with a call of this AC's thread in its syspage");
            return Submitted::NotTaken;
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(MESSAGE_LOOK_EVERY) {
            // A shootdown, a recall or an end from the home must not wait for the call (which
            // may wait for the home).
            crate::msg::drain();
        }
        cpu::relax();
    }
    Submitted::Done(own.submitter.take_value(page, index).unwrap_or(-i64::from(errno::EIO)))
}

/// Calls after which an AC's cached translations of the process's memory may be stale.
fn changes_mappings(number: u64) -> bool {
    const MAPPING_CALLS: [u32; 6] =
        [nr::__NR_mmap, nr::__NR_munmap, nr::__NR_mprotect, nr::__NR_mremap, nr::__NR_brk, nr::__NR_madvise];
    MAPPING_CALLS.iter().any(|&n| u64::from(n) == number)
}

/// On an AC whose guest ended: unmaps its syspage frame.
pub fn release_own() {
    // Dropping the page unmaps it.
    drop(OWN.lock().take());
}
