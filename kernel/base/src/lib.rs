//! The base of a Reef kernel instance: the only kernel code with `unsafe`.
//!
//! It holds the machine (arch), per-core state (the shared region and KCB access), memory
//! (frames, heap, address spaces, the copy window), time, random numbers, the console sink,
//! the trap table and the scheduler's mechanism. It names no service: the layers above (the
//! `kernel` crate) register hooks with it at boot (`sched::register_hooks`,
//! `interrupt::register_hooks`, `interrupt::register_vector`,
//! `arch::user::register_system_call_handler`, `console::set_input_listener`) and enter it
//! through [`kernel_entry!`]. See `docs/architecture.md`.
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

/// Defines the two Rust entry points the base's assembly jumps to, so the kernel crate above
/// names them without an `unsafe` attribute of its own: `boot_main` (the bootstrap core, from
/// the PVH entry, with the physical address of PVH's start_info) and `reef_instance_entry`
/// (every kernel instance, from the boot driver or an image's note, with its KCB's address).
#[macro_export]
macro_rules! kernel_entry {
    (boot: $boot:path, instance: $instance:path $(,)?) => {
        /// The bootstrap core's Rust entry, from `_pvh_start` on the boot page tables.
        // SAFETY: the name is the one `arch::x86_64::boot` calls; no other item defines it.
        #[unsafe(no_mangle)]
        extern "C" fn boot_main(start_info_physical: u32) -> ! {
            $boot(start_info_physical)
        }

        /// Where every kernel instance starts, on its own page tables and stack, with its KCB.
        // SAFETY: the name is the one the image note (`arch::x86_64::image_note`) records; no
        // other item defines it.
        #[unsafe(no_mangle)]
        pub extern "C" fn reef_instance_entry(kcb_address: u64) -> ! {
            $instance(kcb_address)
        }
    };
}
