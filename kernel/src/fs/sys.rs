//! What `/sys` shows: the cores the machine lists and whether each runs (from their KCBs);
//! a write to `cpu<K>/online` stops or starts core K through the core lifecycle.

use crate::core::kcb::CoreState;
use crate::core::shared;
use crate::proc::Errno;
use alloc::sync::Arc;
use vfs::SysSource;

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
        crate::core::lifecycle::set_online(core, online)
    }
}
