//! Placeholder for `lifecycle.rs` (written in parallel): the one call `/sys` needs, refused.

/// Stops (`online == false`) or starts core `core` as Linux's cpuN/online switch does; the
/// errno on refusal (EINVAL no such core, EPERM core 0, EBUSY in use, ...).
pub fn set_online(core: usize, online: bool) -> Result<(), u32> {
    let _ = (core, online);
    Err(linux_raw_sys::errno::ENOSYS)
}
