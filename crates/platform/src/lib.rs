//! Firmware facts (memory map, MADT, command line) and the partition plan, host-testable.
#![doc = include_str!("../README.md")]
#![no_std]
// Only the fixture tests build ACPI tables through raw pointers; the library itself is safe.
#![deny(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod cmdline;
pub mod madt;
pub mod memmap;
pub mod partition;
pub mod virtio;

/// 2 MiB: the alignment of partitions and of the shared region, so instances map them with large pages.
pub const LARGE_PAGE_SIZE: u64 = 2 * 1024 * 1024;

/// Rounds `value` up to a multiple of `align` (a power of two).
pub const fn align_up(value: u64, align: u64) -> u64 {
    (value + align - 1) & !(align - 1)
}

/// Rounds `value` down to a multiple of `align` (a power of two).
pub const fn align_down(value: u64, align: u64) -> u64 {
    value & !(align - 1)
}
