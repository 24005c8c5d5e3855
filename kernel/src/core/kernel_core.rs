//! A kernel core's loop (Corey's kernel cores, NIX's KC): it serves the syspages of other
//! cores' processes and, on the file service's core, the file requests, and halts when
//! nothing comes.

use super::kcb::Role;
use super::shared;
use crate::arch::cpu;
use crate::syscall::syspage;
use crate::time::SpinDeadline;
use core::sync::atomic::Ordering;

/// A kernel core's idle work: scan the syspages until nothing came for `kc_spin_us`, then
/// halt with the doorbell armed (a message, a kick, an AC's submit or, on the file service's
/// core, console input wakes it). The file service's core serves its requests here too
/// (Corey's kernel cores: a KC runs the kernel's services for the others); its boot thread,
/// which waits for init, runs again as soon as init ends.
pub fn serve_as_kernel_core() {
    let spin = crate::time::ns_to_cycles(u64::from(shared::facts().options.kc_spin_us) * 1000);
    // An empty pass reads the clock at one in `POLLS_PER_READ` (see `SpinDeadline`: under
    // TCG every read takes a lock all vCPUs share).
    let mut idle = SpinDeadline::after_cycles(spin);
    let mut passes = 0u32;
    let serves_files = crate::fs::serves_files_here();
    while shared::this_kcb().role() == Role::Kernel {
        // Messages (registrations, results from homes, file requests) are looked at every
        // few passes: a look at every channel costs more than a pass over the ring heads.
        if passes.is_multiple_of(syspage::MESSAGE_LOOK_EVERY) {
            crate::msg::drain();
            if serves_files {
                crate::fs::at_safe_point();
            }
            if shared::this_kcb().stop_requested.load(Ordering::Relaxed) != 0
                || super::park::is_asked()
                || crate::sched::others_ready()
            {
                // A boot driver asked (the idle point is where the core stops, parks or
                // unparks), or a kernel thread is ready.
                return;
            }
            // Parked: the host's tick ends this slice, and the host (and its other guests)
            // run before this scan goes on.
            if super::park::is_guest() && crate::sched::slice_ended() {
                super::park::while_waiting();
            }
        }
        passes = passes.wrapping_add(1);
        if syspage::scan() {
            idle = SpinDeadline::after_cycles(spin);
            continue;
        }
        if idle.passed() {
            crate::msg::sleep_unless(|| {
                syspage::any_pending() || crate::fs::service::has_work() || crate::sched::others_ready()
            });
            return;
        }
        cpu::relax();
    }
}
