//! Reef kernel instance.
//!
//! The multikernel invariant: a kernel instance shares no mutable state with another core
//! except through channels and the KCB it owns, both in the shared region. Every writable
//! static of this crate lives in `.data`/`.bss`, which each instance maps to its own private
//! copy, so a `static` here is per core by construction; the text is one read-only copy.
//! See `docs/boot.md`.
#![doc = include_str!("../README.md")]
#![no_std]
#![no_main]

extern crate alloc;

mod arch;
mod boot;
mod console;
mod control;
mod core;
mod fs;
mod init_process;
mod interrupt;
mod mm;
mod msg;
mod power;
mod proc;
mod random;
mod sched;
mod selftest;
mod syscall;
mod time;

arch::boot::kernel_entries!(bootstrap: boot::bootstrap, instance: boot::instance);

#[panic_handler]
fn panic(info: &::core::panic::PanicInfo) -> ! {
    interrupt::release_shared_locks();
    log::error!("PANIC core {}: {}", crate::core::shared::this_core(), info);
    interrupt::stop_this_core()
}
