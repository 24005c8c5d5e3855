//! Per-core OS structure: the shared region, KCBs, and the boot driver that starts cores.

pub mod boot_driver;
pub mod kcb;
pub mod shared;
