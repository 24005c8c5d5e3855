//! The trap table's hooks that depend on the core's role: an application core's guest
//! traps to its home, a timesharing core's threads are served here.

use crate::arch::idt::InterruptFrame;

/// An exception from ring 3: on an application core its home decides what it means (true:
/// taken); elsewhere the trap table goes on (a page fault may be resolved, else the process
/// is killed).
pub fn exception_from_user(frame: &mut InterruptFrame, fault_address: u64) -> bool {
    if !super::ac::runs_thread() {
        return false;
    }
    super::ac::on_exception(frame, fault_address);
    true
}

/// After an interrupt from ring 3, on the way back: the process's return path, then the
/// application core's guest resumes, or a visiting thread goes back to its AC.
pub fn return_to_user(frame: &mut InterruptFrame) {
    crate::proc::thread::before_user_return(frame, None);
    if super::ac::runs_thread() {
        super::ac::after_interrupt(frame);
    } else {
        crate::proc::remote::return_visitor(frame);
    }
}
