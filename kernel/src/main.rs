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
#![deny(unsafe_code)]

extern crate alloc;

mod boot;
mod control;
mod core;
mod dev;
mod fs;
mod init_process;
mod msg;
mod power;
mod proc;
#[cfg(feature = "test-hooks")]
mod selftest;
mod syscall;

// The base's rooms, under their own names: `crate::sched` is `base::sched`.
use base::{arch, console, interrupt, mm, print, println, random, sched, time, virtio};

base::kernel_entries!(bootstrap: boot::bootstrap, instance: boot::instance);

#[panic_handler]
fn panic(info: &::core::panic::PanicInfo) -> ! {
    interrupt::release_shared_locks();
    log::error!("PANIC core {}: {}", crate::core::shared::this_core(), info);
    interrupt::stop_this_core()
}
