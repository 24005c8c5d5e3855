//! The boot driver's operations on a core (`reef_core_operation`), and Linux's CPU hotplug switch.

use std::io;

pub use abi::call::CoreTimes;

/// Stops `core`: its kernel saves its KCB and halts; a timesharing core's processes move to
/// the other TCs first.
pub fn stop(core: usize) -> io::Result<CoreTimes> {
    operation(abi::call::core_operation::STOP, core, None, false)
}

/// Stops `core` with its processes frozen in its KCB: they go on where they stopped once a
/// [`start`] boots a kernel there (Barrelfish/DC).
pub fn stop_keeping(core: usize) -> io::Result<CoreTimes> {
    operation(abi::call::core_operation::STOP | abi::call::core_operation::KEEP, core, None, false)
}

/// Starts a stopped (or never started) `core` with the kernel image at `image` (`None`: the
/// image the system booted); `uncached` reads the image afresh instead of from the boot
/// driver's cache.
pub fn start(core: usize, image: Option<&str>, uncached: bool) -> io::Result<CoreTimes> {
    operation(abi::call::core_operation::START, core, image, uncached)
}

/// Stops `core`, then starts the same KCB there with the kernel image at `image`.
pub fn restart(core: usize, image: Option<&str>, uncached: bool) -> io::Result<CoreTimes> {
    operation(abi::call::core_operation::RESTART, core, image, uncached)
}

/// Parks `core` on `host`'s kernel (which must run the `multi` image): `core`'s processor
/// halts and `host` time-shares its KCB, processes and channels included.
pub fn park(core: usize, host: usize) -> io::Result<CoreTimes> {
    between(abi::call::core_operation::PARK, core, host as u64)
}

/// Gives parked `core` a processor of its own again: `destination`'s (a stopped core), or
/// its own (`None`).
pub fn unpark(core: usize, destination: Option<usize>) -> io::Result<CoreTimes> {
    let other = destination.map_or(abi::call::core_operation::OWN_CORE, |core| core as u64);
    between(abi::call::core_operation::UNPARK, core, other)
}

fn between(kind: u64, core: usize, other: u64) -> io::Result<CoreTimes> {
    let mut times = CoreTimes::default();
    let arguments = [kind, core as u64, other, 0, &mut times as *mut CoreTimes as u64];
    // SAFETY: `times` is writable for a `CoreTimes` for the whole call, which is all
    // `reef_core_operation` touches (the third argument is a core number here).
    unsafe { crate::reef_call5(abi::call::CORE_OPERATION, arguments) }.map(|_| times)
}

fn operation(kind: u64, core: usize, image: Option<&str>, uncached: bool) -> io::Result<CoreTimes> {
    let mut times = CoreTimes::default();
    let path = image.unwrap_or("");
    let flags = if uncached { abi::call::core_operation::UNCACHED } else { 0 };
    let arguments =
        [kind | flags, core as u64, path.as_ptr() as u64, path.len() as u64, &mut times as *mut CoreTimes as u64];
    // SAFETY: `path` is readable for its length and `times` writable for a `CoreTimes` for the
    // whole call, which is all `reef_core_operation` touches.
    unsafe { crate::reef_call5(abi::call::CORE_OPERATION, arguments) }.map(|_| times)
}

/// The path of Linux's switch for `core`, which Reef offers too.
pub fn online_path(core: usize) -> String {
    format!("/sys/devices/system/cpu/cpu{core}/online")
}

/// Takes `core` offline or brings it back the Linux way, by writing `0` or `1` to its
/// `online` file; works on Linux (as root) and on Reef alike.
pub fn set_online(core: usize, online: bool) -> io::Result<()> {
    std::fs::write(online_path(core), if online { "1" } else { "0" })
}

/// Whether `core` is online, from its `online` file.
pub fn is_online(core: usize) -> io::Result<bool> {
    let text = std::fs::read_to_string(online_path(core))?;
    match text.trim() {
        "1" => Ok(true),
        "0" => Ok(false),
        other => Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} says {other:?}", online_path(core)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_operations_say_enosys_off_reef() {
        if crate::on_reef() {
            return;
        }
        assert_eq!(stop(1).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
        assert_eq!(restart(1, Some("/boot/rt"), true).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
        assert_eq!(park(1, 2).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
        assert_eq!(unpark(1, None).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
    }

    #[test]
    fn the_online_file_is_linuxs() {
        assert_eq!(online_path(3), "/sys/devices/system/cpu/cpu3/online");
    }
}
