//! The base of a Reef kernel instance: the only kernel code with `unsafe`.
//!
//! It holds the machine (arch), per-core state (the shared region and KCB access), memory
//! (frames, heap, address spaces, the copy window), time, random numbers, the console sink,
//! the trap table, the scheduler's mechanism, and what drivers need of the machine (virtio's
//! `Hal`, the transports, DMA request queues). It names no service: the layers above (the
//! `kernel` crate) register hooks with it at boot (`sched::register_hooks`,
//! `interrupt::register_hooks`, `interrupt::register_vector`,
//! `arch::user::register_system_call_handler`, `console::set_input_listener`) and enter it
//! through [`kernel_entries!`]. See `docs/architecture.md`.
//!
//! The multikernel invariant: a kernel instance shares no mutable state with another core
//! except through channels and the KCB it owns, both in the shared region. Every writable
//! static of this crate lives in `.data`/`.bss`, which each instance maps to its own private
//! copy, so a `static` here is per core by construction.
#![no_std]

extern crate alloc;

pub mod arch;
pub mod console;
pub mod interrupt;
pub mod mm;
pub mod percore;
pub mod random;
pub mod sched;
pub mod time;
pub mod virtio;
