//! Per-core OS structure: the shared region, KCBs, the boot driver that starts, stops and
//! restarts cores with a kernel image, and roles.

pub use base::percore::{instance_cell, kcb, shared};

pub mod ac;
pub mod boot_driver;
pub mod idle;
pub mod kernel_core;
pub mod kernel_image;
pub mod lifecycle;
pub mod park;
pub mod role;
pub mod traps;
