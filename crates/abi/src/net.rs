//! A network interface as the file service describes it to the system-call layer, which
//! answers `ifconfig`'s ioctls (`SIOCGIFCONF`, `SIOCGIFADDR`, `SIOCGIFFLAGS`…) from it.

/// `IFF_UP`, `IFF_BROADCAST`, `IFF_LOOPBACK`, `IFF_RUNNING`, `IFF_MULTICAST` (`linux/if.h`).
pub mod flags {
    pub const UP: u16 = 0x1;
    pub const BROADCAST: u16 = 0x2;
    pub const LOOPBACK: u16 = 0x8;
    pub const RUNNING: u16 = 0x40;
    pub const MULTICAST: u16 = 0x1000;
}

/// `ARPHRD_ETHER` and `ARPHRD_LOOPBACK`: the hardware an interface's address belongs to.
pub const HARDWARE_ETHERNET: u16 = 1;
pub const HARDWARE_LOOPBACK: u16 = 772;

/// The longest interface name, its NUL included (`IFNAMSIZ`).
pub const NAME_BYTES: usize = 16;

/// One interface: its name, IPv4 address and mask, flags, MTU, hardware address and kind,
/// transmit queue length and index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interface {
    pub name: [u8; NAME_BYTES],
    pub address: [u8; 4],
    pub netmask: [u8; 4],
    pub flags: u16,
    pub mtu: u32,
    pub hardware: [u8; 6],
    pub hardware_kind: u16,
    pub transmit_queue: u32,
    pub index: u32,
}

impl Interface {
    /// Bytes of an encoded interface.
    pub const BYTES: usize = NAME_BYTES + 4 + 4 + 2 + 4 + 6 + 2 + 4 + 4;

    /// The interface named `name` (cut to 15 bytes).
    pub fn named(name: &str) -> Self {
        let mut bytes = [0; NAME_BYTES];
        let length = name.len().min(NAME_BYTES - 1);
        bytes[..length].copy_from_slice(&name.as_bytes()[..length]);
        Self { name: bytes, ..Self::default() }
    }

    /// Its name's bytes, without the NULs after them.
    pub fn name(&self) -> &[u8] {
        let end = self.name.iter().position(|&byte| byte == 0).unwrap_or(NAME_BYTES);
        &self.name[..end]
    }

    /// The broadcast address of its network.
    pub fn broadcast(&self) -> [u8; 4] {
        core::array::from_fn(|i| self.address[i] | !self.netmask[i])
    }

    pub fn encode(&self) -> [u8; Self::BYTES] {
        let mut out = [0; Self::BYTES];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(&self.name);
        put(&self.address);
        put(&self.netmask);
        put(&self.flags.to_le_bytes());
        put(&self.mtu.to_le_bytes());
        put(&self.hardware);
        put(&self.hardware_kind.to_le_bytes());
        put(&self.transmit_queue.to_le_bytes());
        put(&self.index.to_le_bytes());
        out
    }

    /// The interfaces of `bytes`, each [`Self::BYTES`] long; `None` for another length.
    pub fn decode_all(bytes: &[u8]) -> Option<impl Iterator<Item = Self> + '_> {
        if !bytes.len().is_multiple_of(Self::BYTES) {
            return None;
        }
        Some(bytes.chunks_exact(Self::BYTES).map(|chunk| {
            let field = |at: usize, length: usize| &chunk[at..at + length];
            let u16_at = |at: usize| u16::from_le_bytes([chunk[at], chunk[at + 1]]);
            let u32_at = |at: usize| u32::from_le_bytes([chunk[at], chunk[at + 1], chunk[at + 2], chunk[at + 3]]);
            let mut interface = Self::default();
            interface.name.copy_from_slice(field(0, NAME_BYTES));
            interface.address.copy_from_slice(field(16, 4));
            interface.netmask.copy_from_slice(field(20, 4));
            interface.flags = u16_at(24);
            interface.mtu = u32_at(26);
            interface.hardware.copy_from_slice(field(30, 6));
            interface.hardware_kind = u16_at(36);
            interface.transmit_queue = u32_at(38);
            interface.index = u32_at(42);
            interface
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_come_back_as_they_went() {
        let mut eth0 = Interface::named("eth0");
        eth0.address = [10, 0, 2, 15];
        eth0.netmask = [255, 255, 255, 0];
        eth0.flags = flags::UP | flags::BROADCAST | flags::RUNNING | flags::MULTICAST;
        eth0.mtu = 1500;
        eth0.hardware = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
        eth0.hardware_kind = HARDWARE_ETHERNET;
        eth0.transmit_queue = 1000;
        eth0.index = 2;
        let lo = Interface { address: [127, 0, 0, 1], index: 1, ..Interface::named("lo") };
        let mut bytes = [0u8; 2 * Interface::BYTES];
        bytes[..Interface::BYTES].copy_from_slice(&lo.encode());
        bytes[Interface::BYTES..].copy_from_slice(&eth0.encode());
        let mut back = Interface::decode_all(&bytes).unwrap();
        assert_eq!(back.next(), Some(lo));
        let second = back.next().unwrap();
        assert_eq!(second, eth0);
        assert_eq!(back.next(), None);
        assert_eq!(second.name(), b"eth0");
        assert_eq!(second.broadcast(), [10, 0, 2, 255]);
        assert!(Interface::decode_all(&bytes[1..]).is_none());
    }

    #[test]
    fn a_long_name_is_cut_before_its_nul() {
        let interface = Interface::named("a-name-longer-than-fifteen");
        assert_eq!(interface.name().len(), NAME_BYTES - 1);
        assert_eq!(interface.name[NAME_BYTES - 1], 0);
    }
}
