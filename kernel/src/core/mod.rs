//! Per-core OS structure: the shared region, KCBs, the boot driver that starts cores, and roles.

pub mod ac;
pub mod boot_driver;
pub mod kcb;
pub mod role;
pub mod shared;
