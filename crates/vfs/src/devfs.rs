//! `/dev`: the character devices the file service drives, with Linux's names and numbers.

use crate::node::Device;

/// The inode number of `/dev` itself; device `i` of [`DEVICES`] is inode `i + 2`.
pub(crate) const ROOT_INODE: u64 = 1;

/// One device node of `/dev`.
pub(crate) struct DeviceNode {
    pub name: &'static [u8],
    pub device: Device,
    /// The device number, Linux's for the same device (`Documentation/admin-guide/devices.txt`).
    pub major: u32,
    pub minor: u32,
    /// Permissions when the VFS is made, Linux's defaults.
    pub permissions: u32,
}

/// The nodes of `/dev`, in listing order.
pub(crate) const DEVICES: [DeviceNode; 6] = [
    DeviceNode { name: b"console", device: Device::Console, major: 5, minor: 1, permissions: 0o600 },
    DeviceNode { name: b"null", device: Device::Null, major: 1, minor: 3, permissions: 0o666 },
    DeviceNode { name: b"zero", device: Device::Zero, major: 1, minor: 5, permissions: 0o666 },
    DeviceNode { name: b"random", device: Device::Random, major: 1, minor: 8, permissions: 0o666 },
    DeviceNode { name: b"urandom", device: Device::Random, major: 1, minor: 9, permissions: 0o666 },
    DeviceNode { name: b"tty", device: Device::Tty, major: 5, minor: 0, permissions: 0o666 },
];

/// The device of inode `inode`, `None` for the root and numbers no device has.
pub(crate) fn device(inode: u64) -> Option<&'static DeviceNode> {
    DEVICES.get(usize::try_from(inode.checked_sub(2)?).ok()?)
}

/// The inode of the device named `name`.
pub(crate) fn lookup(name: &[u8]) -> Option<u64> {
    DEVICES.iter().position(|node| node.name == name).map(|index| index as u64 + 2)
}

/// What can change of a `/dev` node: its permissions and times (`chmod` and `touch` work, as
/// on Linux's devtmpfs); the set of nodes is fixed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceState {
    pub permissions: u32,
    pub accessed: u64,
    pub modified: u64,
    pub changed: u64,
}

/// The state of `/dev` and of each device, by inode number minus 1.
pub(crate) struct Devfs {
    pub states: [DeviceState; DEVICES.len() + 1],
}

impl Devfs {
    pub fn new(now: u64) -> Self {
        let state = |permissions| DeviceState { permissions, accessed: now, modified: now, changed: now };
        let mut states = [state(0o755); DEVICES.len() + 1];
        for (state_of_device, device) in states[1..].iter_mut().zip(&DEVICES) {
            *state_of_device = state(device.permissions);
        }
        Self { states }
    }

    /// The state of inode `inode`, `None` for a number no node has.
    pub fn state_mut(&mut self, inode: u64) -> Option<&mut DeviceState> {
        self.states.get_mut(usize::try_from(inode.checked_sub(1)?).ok()?)
    }

    pub fn state(&self, inode: u64) -> Option<&DeviceState> {
        self.states.get(usize::try_from(inode.checked_sub(1)?).ok()?)
    }
}
