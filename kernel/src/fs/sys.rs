//! What `/sys` shows: the cores the machine lists and whether each runs (from their KCBs);
//! a write to `cpu<K>/online` stops or starts core K through the core lifecycle, which the
//! cores layer (above the file service) registers at boot.

use crate::core::kcb::CoreState;
use crate::core::shared;
use abi::Errno;
use alloc::sync::Arc;
use linux_raw_sys::errno;
use spin::Once;
use vfs::SysSource;

/// Starts (`true`) or stops core K, and says why it could not.
pub type CoreSwitch = fn(usize, bool) -> Result<(), Errno>;

/// The core lifecycle's switch, registered at boot.
static SET_ONLINE: Once<CoreSwitch> = Once::new();

/// Registers how a write to `cpu<K>/online` starts or stops core K (until then it is
/// refused with ENOSYS).
pub fn register_core_switch(set_online: CoreSwitch) {
    SET_ONLINE.call_once(|| set_online);
}

struct Source;

/// The source the VFS's `/sys` reads and switches cores through.
pub fn source() -> Arc<dyn SysSource> {
    Arc::new(Source)
}

impl SysSource for Source {
    fn core_count(&self) -> usize {
        shared::get().listed_kcbs().len()
    }

    fn is_online(&self, core: usize) -> bool {
        // Booting, faulted and unresponsive cores run no kernel instance one could use: Linux's
        // `online` says 0 for a CPU that is not up.
        shared::get().listed_kcbs().get(core).is_some_and(|kcb| kcb.state() == CoreState::Running)
    }

    fn set_online(&self, core: usize, online: bool) -> Result<(), Errno> {
        // Sends an inter-core call and waits for the core: the file service calls it with no
        // lock held (`service::submit`).
        let set_online = SET_ONLINE.get().ok_or(errno::ENOSYS)?;
        set_online(core, online)
    }
}
