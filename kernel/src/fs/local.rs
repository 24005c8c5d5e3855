//! Lookups this instance answers itself: those that stay inside the initramfs, which every
//! instance maps read-only and no call changes (`vfs::ArchiveView`, docs/files.md "Answered
//! where they are asked"). A `stat` of `/bin/ls` or of a missing `/etc/localtime` costs no
//! message; a walk that reaches a mount point (`/tmp`, `/dev`, `/proc`, `/sys`, a share) is
//! the service's.

use super::client::{self, CheckAs};
use core::sync::atomic::{AtomicU64, Ordering};
use spin::Once;
use vfs::{ArchiveView, Local};

// Private per instance: built at the first lookup (`None`: every lookup asks).
static VIEW: Once<Option<ArchiveView>> = Once::new();
/// The most heap the view may take while it is built: a sixteenth of an instance's heap. A
/// larger archive (a test image with CPython's library) is left to the service, whose own
/// index of it already takes as much on its instance.
const MOST_HEAP: usize = crate::mm::heap::HEAP_SIZE as usize / 16;
/// Lookups answered here, on this instance.
static ANSWERED: AtomicU64 = AtomicU64::new(0);

fn view() -> Option<&'static ArchiveView> {
    VIEW.call_once(|| {
        // The service's own instance calls the service directly: no second index there.
        if crate::core::shared::this_core() as usize == super::service::SERVICE_CORE {
            return None;
        }
        let archive = super::archive().copied();
        let entries = archive.as_ref().map_or(0, |archive| archive.entries().count());
        if ArchiveView::heap_estimate(entries) > MOST_HEAP {
            log::info!("the initramfs has {entries} names: this core asks the file service for every lookup");
            return None;
        }
        let shares = crate::core::shared::facts().options.shares;
        let mount_points: alloc::vec::Vec<&[u8]> =
            shares.entries().iter().map(|share| share.mount_point().as_bytes()).collect();
        Some(ArchiveView::new(archive, &mount_points))
    })
    .as_ref()
}

/// What `stat` (`follow_last`) or `lstat` of the absolute `path` gives the running process,
/// whose root must be the file system's: `Local::Ask` when the service must answer.
pub fn stat(path: &[u8], follow_last: bool) -> Local {
    let Some(view) = view() else { return Local::Ask };
    let ids = client::current_caller(CheckAs::FileSystem);
    let credentials = vfs::Credentials {
        uid: ids.filesystem_uid,
        gid: ids.filesystem_gid,
        groups: ids.group_bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
    };
    let answer = view.stat(path, follow_last, &credentials);
    if answer != Local::Ask {
        ANSWERED.fetch_add(1, Ordering::Relaxed);
    }
    answer
}

/// Lookups this instance answered without a message.
pub fn answered() -> u64 {
    ANSWERED.load(Ordering::Relaxed)
}
