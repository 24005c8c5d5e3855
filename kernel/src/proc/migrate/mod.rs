//! Moving a process to another timesharing core's kernel: NIX's "a core whose role changes to
//! AC hands its processes to its TCs first", done the multikernel way (Popcorn's migration).
//!
//! The process keeps its pid and tids (so its parent, its group and whoever signals it still
//! name it), its memory (copied page by page into the receiver's partition), its descriptors
//! (one more reference each at the file service), its signal state, children and registers.
//! Where each id lives is written in the KCB of the OSnode whose range it is from
//! (`moved_away`), which every core reads to route by pid or tid ([`super::home_of`]).
//!
//! The steps:
//! 1. The OSnode that gives its processes up ([`evacuate()`], asked by ICC) marks each with a
//!    destination and wakes its threads from interruptible waits (`Wakeup::Moving`): a call
//!    gives up as a signal would make it, to run again on the destination.
//! 2. Each thread, on its way back to ring 3 (`proc::thread::before_user_return`, after signal
//!    delivery settled a restart), checks in with its registers, FPU image, TLS and signal
//!    state ([`move_current`]); the last to do so packs the process: those, its dispositions,
//!    pending signals, descriptors, children, areas, and the frames of its present pages, and
//!    sends it as one large message. The others wait for the outcome.
//! 3. The destination (`on_move`) checks the image, copies every page into frames of its
//!    own through its copy window, adopts the descriptors, builds the process and its threads
//!    with the same pid and tids, records where they live, and answers.
//! 4. On a yes, the threads at the origin end there and the process is taken down without an
//!    exit (no status to the parent: the process goes on); signals that reached the origin
//!    while it packed are sent on. On a no or no answer, every thread runs on where it was.
//!
//! A process with more threads than a KCB records (64) stays; the refusal says so. A thread's
//! syspage goes with it: its kernel core lets go of the page as the thread checks in, and
//! the destination registers its copy (`syscall::syspage::release_for_move`, `adopt_released`).
//!
//! The rooms, one concern each:
//! - `evacuate`: asking processes to move (an OSnode's evacuation, keeping them through a
//!   restart, `reef_move_process`) and sending them back to a restarted core;
//! - `policy`: which processes may move or stay, and why one may not ([`CannotMove`]);
//! - `checkin`: step 2 at the origin, the threads checking in and the end of their copy;
//! - `image`: packing a stopped process into the image;
//! - `transport`: sending the image and waiting for the answer; receiving one and answering;
//! - `install`: step 3, checking an image and then building the process from it;
//! - `routing`: where moved ids live (the `moved_away` tables of the KCBs).

mod checkin;
mod evacuate;
mod image;
mod install;
mod policy;
mod routing;
mod transport;

pub use checkin::move_current;
pub use evacuate::{evacuate, keep_all, move_process, KEEP, KEEP_UNTIL_START};
pub(super) use image::{capture_thread, pack, References};
pub(super) use install::{install, Arrival};
pub use policy::CannotMove;
pub use routing::{forget_moved, moved_to};
pub(super) use transport::send_or_hold;

use super::Process;
use crate::core::shared;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// `Process::moving` when no move is asked; else the destination core plus one, with
/// [`PACKING`] once its thread packs it.
pub const NOT_MOVING: u32 = 0;
const PACKING: u32 = 1 << 31;
/// `Process::returns_to` when it goes back nowhere.
pub const NO_RETURN: u64 = u64::MAX;

/// Whether `process` was asked to move and its thread has not started packing: its waits end
/// at once ([`crate::sched::Wakeup::Moving`]) so that it reaches its way back to ring 3.
pub fn is_asked(process: &Process) -> bool {
    let moving = process.moving.load(Ordering::Relaxed);
    moving != NOT_MOVING && moving & PACKING == 0
}

/// Whether `process`'s image for a move is made (or being made, under its state lock): what
/// it learns now does not go with the image.
pub(super) fn is_packed(process: &Process) -> bool {
    process.moving.load(Ordering::Relaxed) & PACKING != 0
}

/// Its children's exits that came after its image was made, taken: they are recorded here
/// (the move failed: the process stays) or sent after it.
fn take_late_exits(process: &Process) -> Vec<abi::process::ChildExited> {
    core::mem::take(&mut *process.late_exits.lock())
}

/// Whether `process` is asked to stay for this core's next kernel (`proc::keep`).
pub fn is_kept_here(process: &Process) -> bool {
    process.moving.load(Ordering::Relaxed) & !PACKING == shared::this_core() + 1
}

/// At a safe point: sends the answers to moves a full queue held back, and sends back the
/// processes that left a core for its restart once its next kernel runs there as a
/// timesharing core (a core restarted as an AC keeps none).
pub fn at_safe_point() {
    transport::send_held_lines();
    evacuate::send_back_returning();
}

/// Registers this instance's move handlers.
pub fn init() {
    use crate::msg::{register, Handler};
    use abi::message::Kind;
    register(Kind::ProcessMove, Handler { high_priority: false, on_line: None, on_large: Some(transport::on_move) });
    register(
        Kind::ProcessMoveReply,
        Handler { high_priority: false, on_line: Some(transport::on_reply), on_large: None },
    );
    crate::msg::icc::register(abi::message::handler::MOVE_PROCESS, evacuate::on_move_process);
}
