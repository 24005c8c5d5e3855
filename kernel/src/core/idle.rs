//! The idle loop of a kernel instance, and the scheduler's hooks that depend on the core's
//! role: what a core does when nothing is ready.

use super::kcb::Role;

/// One round of the boot thread's idle loop: handle messages and the lifecycle's requests,
/// run the ready threads (the boot thread comes back when they block or their slice ends),
/// else sleep until an interrupt. (Processes run on every core, between keystrokes too.)
pub fn idle_once() {
    crate::msg::drain();
    super::lifecycle::stop_if_asked();
    super::park::park_if_asked();
    super::park::unpark_if_asked();
    crate::fs::at_safe_point();
    crate::proc::migrate::at_safe_point();
    crate::proc::timer::fire_due();
    match super::role::current() {
        Role::Application => {
            super::ac::run_pending();
            // The guest may have left because this core stops.
            super::lifecycle::stop_if_asked();
        }
        Role::Kernel => {
            super::kernel_core::serve_as_kernel_core();
            return;
        }
        Role::Timesharing => {}
    }
    let ready = crate::sched::others_ready();
    crate::console::print_deferred(!ready);
    if ready {
        crate::sched::yield_now();
    } else {
        crate::msg::wait_for_messages();
    }
}

/// The scheduler's `serve` hook: this core's messages, the file service's deferred work and
/// its processes' expired timers, which any waiting thread may do.
pub fn serve() {
    crate::msg::drain();
    crate::fs::at_safe_point();
    crate::proc::timer::fire_due();
}

/// The scheduler's `idle` hook, on a waiting thread's stack with nothing ready: a kernel core
/// serves syspages and files (core 0 as a KC, its boot thread waiting for init); any other
/// sleeps until a message or an interrupt.
pub fn idle_while_waiting() {
    if super::role::current() == Role::Kernel {
        super::kernel_core::serve_as_kernel_core();
    } else {
        crate::msg::wait_for_messages();
    }
}
