//! Per-core OS structure: the shared region, KCBs, the boot driver that starts cores, and roles.

pub mod ac;
pub mod boot_driver;
pub mod kcb;
// Until the core lifecycle lands: its `set_online`, which `/sys` calls, answers ENOSYS.
#[path = "lifecycle_placeholder.rs"]
pub mod lifecycle;
pub mod role;
pub mod shared;
