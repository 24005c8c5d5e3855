//! The host directories shared over virtio-9p: each 9P device this instance owns is mounted
//! where the kernel command line says (`share=TAG:/mountpoint`, which `cargo xtask run
//! --share` writes), with the VFS as its 9P2000.L client.

use crate::dev::ninep::{self as devices, NinePDevice};
use vfs::Vfs;

impl ::ninep::Transport for NinePDevice {
    fn call(&mut self, request: &[u8], reply: &mut [u8]) -> Result<usize, u32> {
        NinePDevice::call(self, request, reply)
    }
}

/// Mounts every share with a mount point; one that cannot be mounted is reported and left
/// out, the others go on.
pub fn mount_all(vfs: &mut Vfs) {
    for share in devices::shares() {
        let Some(mount_point) = share.mount_point else {
            log::warn!(
                "file service: host share `{}` has no mount point (give the kernel share={}:/path); left unmounted",
                share.tag,
                share.tag
            );
            continue;
        };
        let Some(device) = devices::take_for(&mount_point) else { continue };
        let size = u32::try_from(device.max_message_size()).unwrap_or(u32::MAX);
        match vfs.mount_share(mount_point.as_bytes(), share.tag.as_bytes(), alloc::boxed::Box::new(device), size) {
            Ok(()) => log::info!("file service: {mount_point} is the host share `{}` (9P2000.L)", share.tag),
            Err(errno) => log::error!(
                "file service: cannot mount host share `{}` at {mount_point}: errno {errno} (a mount point is one \
                 name under /, not /tmp, /dev, /proc or /sys, and the host directory must exist)",
                share.tag
            ),
        }
    }
}
