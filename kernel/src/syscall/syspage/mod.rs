//! System calls through syspages (Memsc): registration at the home, the kernel core's scan,
//! and the home's part in calls a kernel core hands back.
//!
//! A thread registers one page of its own memory with a kernel core (KC). The home pins the
//! page (it stays mapped while registered: `munmap`, `mprotect`, `exec` and the thread's end
//! unregister it first) and lends its frame to the KC by an ICC. The KC maps the frame in its
//! kernel half and scans only the head entry of each ring, round-robin (Memsc 3.3); at a
//! submitted head it takes every pending entry (3.4), each copied to its own stack before
//! anything looks at it (4.6, `syspage::Ring::take`). Calls whose answer it holds (the
//! process's identity: `getpid`, `getppid`, `gettid`, the ids, `sched_yield`) it completes in
//! place, reading nothing of the entry but the number (`syspage::Ring::answer_or_take`); every
//! other call goes to the home as a [`SyspageCall`], which the thread itself runs
//! at its next way back to ring 3 (or, away on an AC, at once), and the answer completes the
//! entry. With nothing to do for `kc_spin_us` (a kernel command-line option, 2 ms by
//! default: io_uring's SQPOLL thread idles a whole second) the KC arms its notification line
//! and halts; `reef_syspage_kick` (or an AC's submit) rings it. The syspages a KC serves are
//! recorded in its KCB, so a restarted KC serves them on (`docs/dynamic-cores.md`).
//!
//! The three sides live in their own files: [`home`] (registration, and the calls a KC hands
//! back), [`kernel_core`] (the scan, and the syspages a KC keeps through a restart or hands to
//! another KC) and [`application`] (an AC turning its guest's calls into entries).

mod application;
mod home;
mod kernel_core;

pub use application::{release_own, submit_for_ac, AcSubmit};
pub use home::{
    adopt_registration, adopt_released, forget_range, has_forwarded, holds_kernel_page, is_served, kept_registration,
    kick, of_thread, prepare_for_ac, register, release_for_move, released_head, resume_after_move, run_forwarded,
    serve_adopted, thread_leaves, unregister,
};
pub use kernel_core::{any_pending, hand_over, keep_for_next_kernel, scan};

use crate::arch::idt::InterruptFrame;
use crate::arch::{cpu, paging::PAGE_SIZE};
use crate::core::kcb::{served, Role, ServedWord};
use crate::core::shared;
use crate::msg::icc;
use crate::sched::{self, Thread};
use abi::application::{SyspageCall, SyspageResult};
use abi::message::{handler, Kind, ICC_ARGUMENTS};
use abi::Errno;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use linux_raw_sys::errno;
use linux_raw_sys::general as nr;
use spin::Mutex;
use syspage::{Head, Page, Request, Ring, Submitter, ENTRIES};

/// What a system call returns here: a value, or the errno it fails with.
pub type SyscallResult = Result<u64, Errno>;

/// What the syspage service needs of the layers above it; registered once by `boot`.
pub struct SyspageHooks {
    /// Runs a call a kernel core handed back, in the running thread's context, and gives
    /// its value (a negative errno on failure): the system-call layer's executor.
    pub execute: fn(number: u64, arguments: [u64; 6]) -> i64,
    /// A call of a thread of process `pid` was handed back here: a frozen (kept) process's
    /// threads run it where they wait.
    pub forwarded: fn(pid: u32),
}

static HOOKS: spin::Once<SyspageHooks> = spin::Once::new();

/// Registers the syspage service's hooks (`boot`, once).
pub fn register_hooks(hooks: SyspageHooks) {
    HOOKS.call_once(|| hooks);
}

/// Whether `core` runs as a kernel core (a cheap look at its KCB).
fn is_running_kernel_core(core: usize) -> bool {
    shared::get().kcbs.get(core).is_some_and(|kcb| kcb.state().is_live() && kcb.role() == Role::Kernel)
}

/// The lowest-numbered core that runs as a kernel core.
fn first_running_kernel_core() -> Option<usize> {
    (0..(shared::facts().core_count as usize).min(crate::msg::messaging_cores()))
        .find(|&core| is_running_kernel_core(core))
}

/// How long registration waits for the KC.
const ATTACH_TIMEOUT_MS: u64 = 1000;
/// Syspages one KC serves at most (window slots, and records in its KCB).
const MAX_SERVED: usize = crate::core::kcb::MAX_SERVED_SYSPAGES;
/// How long a home waits for a restarting KC to come back: to hand it a result, or to ask it
/// to let go of a syspage.
const RESTART_PATIENCE_MS: u64 = 2000;
/// Passes over the ring heads between two looks at the KC's message channels.
pub const MESSAGE_LOOK_EVERY: u32 = 16;

fn counters() -> &'static crate::core::kcb::SyscallCounters {
    &shared::this_kcb().syscalls
}

/// Registers the handlers of both sides.
pub fn init() {
    if shared::this_kcb().role() == Role::Kernel {
        kernel_core::serve_kept_syspages();
    }
    use crate::msg::{register, Handler};
    register(Kind::SyspageCall, Handler { high_priority: false, on_line: None, on_large: Some(home::on_call) });
    register(
        Kind::SyspageResult,
        Handler { high_priority: false, on_line: Some(kernel_core::on_result), on_large: None },
    );
    icc::register(handler::SYSPAGE_ATTACH, |arguments| Ok(kernel_core::attach_here(arguments)));
    icc::register(handler::SYSPAGE_DETACH, |arguments| Ok(kernel_core::detach_here(arguments)));
    icc::register(handler::SYSPAGE_MOVE, |arguments| Ok(home::move_here(arguments)));
}
