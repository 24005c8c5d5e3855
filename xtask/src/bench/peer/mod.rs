//! The Linux peer: Debian's Linux in Reef's QEMU setup, for the Linux half of a benchmark.
//!
//! [`crate::linux_guest`] boots it and runs a program there ([`run_program`],
//! [`run_program_on`], and [`run_program_with`] with more files in its initramfs; the test
//! suite uses it too); [`msg`] is `cargo xtask peer msg`, the messaging benchmarks of
//! `linux-bench`.

pub mod msg;

pub use crate::linux_guest::{run_program, run_program_on, run_program_with};
