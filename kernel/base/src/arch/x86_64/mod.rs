//! x86-64: the only place with inline assembly, port I/O, MSRs and descriptor tables.

pub mod apic;
pub mod boot;
pub mod cpu;
pub mod gdt;
pub mod idt;
pub mod image_note;
pub mod ioapic;
pub mod legacy;
pub mod paging;
pub mod signal;
pub mod stacks;
pub mod trampoline;
pub mod user;
pub mod world_switch;
