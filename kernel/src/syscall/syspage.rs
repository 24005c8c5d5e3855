//! System calls through syspages (Memsc): registration at the home, the kernel core's scan.

use super::SyscallResult;
use crate::arch::idt::InterruptFrame;
use crate::proc::Errno;
use crate::sched::Thread;
use linux_raw_sys::errno;

/// `reef_syspage_register(page, kc)`.
pub fn register(_page: u64, _kernel_core: u64) -> SyscallResult {
    Err(errno::ENOSYS)
}

/// `reef_syspage_unregister()`.
pub fn unregister() -> SyscallResult {
    Err(errno::ENOSYS)
}

/// `reef_syspage_kick()`.
pub fn kick() -> SyscallResult {
    Err(errno::ENOSYS)
}

/// A syspage for a thread moving to an AC with the syspage flag.
pub fn prepare_for_ac(_thread: &Thread) -> Result<(), Errno> {
    Err(errno::ENOSYS)
}

/// The kernel core and user address of thread `tid`'s syspage.
pub fn of_thread(_tid: u32) -> Option<(usize, u64)> {
    None
}

/// On an AC: submits the guest's call to its syspage; false if it must go to the home.
pub fn submit_for_ac(_frame: &mut InterruptFrame, _kernel_core: usize, _page: u64) -> bool {
    false
}
