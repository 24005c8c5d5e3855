//! virtio-mmio on QEMU's microvm: where the transports are, which GSI each raises, and the
//! checks on what a 9P device says (its mount tag, the lengths of its replies).
//!
//! QEMU 7.2 `hw/i386/microvm.c` (`microvm_devices_init`) creates the transports whether or not
//! a device sits behind them, 512 bytes apart from `0xFEB00000`: with ACPI and the second I/O
//! APIC (`ioapic2`, on by default) 24 of them, transport `i` on GSI `24 + i` (the second I/O
//! APIC's pins); with ACPI and `ioapic2=off`, 8 on GSIs 16 to 23; without ACPI (Reef needs
//! it for the MADT), 8 from GSI 5. An empty transport reads device id 0.

use crate::madt::IoApics;
use crate::memmap::Range;

/// Where the first transport's registers are.
pub const MMIO_BASE: u64 = 0xFEB0_0000;
/// Bytes between two transports (the register block and the device's configuration).
pub const TRANSPORT_SIZE: u64 = 512;
/// Most transports microvm creates (with the second I/O APIC: one per pin of it).
pub const MAX_TRANSPORTS: usize = 24;
/// GSI base of microvm's second I/O APIC (`IO_APIC_SECONDARY_IRQBASE`).
const SECOND_IO_APIC_GSI_BASE: u32 = 24;

/// The transports of this machine and their interrupt lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transports {
    /// How many there are.
    pub count: usize,
    /// The GSI of transport 0; transport `i` raises `first_gsi + i`.
    pub first_gsi: u32,
}

impl Transports {
    /// microvm's layout, told apart by the I/O APICs the MADT lists: with one whose pin 0 is
    /// GSI 24, the 24 transports are on it; else the 8 transports are on GSIs 16 to 23.
    pub fn of_microvm(io_apics: &IoApics) -> Self {
        if io_apics.has_gsi_base(SECOND_IO_APIC_GSI_BASE) {
            Self { count: MAX_TRANSPORTS, first_gsi: SECOND_IO_APIC_GSI_BASE }
        } else {
            Self { count: 8, first_gsi: 16 }
        }
    }

    /// Physical address of transport `index`'s registers.
    pub fn address(&self, index: usize) -> u64 {
        MMIO_BASE + index as u64 * TRANSPORT_SIZE
    }

    /// The GSI transport `index` raises.
    pub fn gsi(&self, index: usize) -> u32 {
        self.first_gsi + index as u32
    }

    /// The 4 KiB pages that hold every transport (what the owning instance maps uncached).
    pub fn window(&self) -> Range {
        let end = MMIO_BASE + self.count as u64 * TRANSPORT_SIZE;
        Range { start: MMIO_BASE, end: crate::align_up(end, 4096) }
    }
}

/// The 9P transport's facts (virtio 1.2 §5.11 is reserved; the layout is QEMU's and Linux's
/// `include/uapi/linux/virtio_9p.h`).
pub mod nine_p {
    use core::fmt;

    /// The virtio device id of a 9P transport.
    pub const DEVICE_ID: u32 = 9;
    /// Feature bit 0, `VIRTIO_9P_MOUNT_TAG`: the configuration holds the mount tag.
    pub const FEATURE_MOUNT_TAG: u64 = 1 << 0;
    /// The longest mount tag Reef reads; QEMU refuses a `mount_tag` longer than 255 bytes, and a
    /// tag names a share, so a short one is plenty.
    pub const MAX_TAG: usize = 64;
    /// size[4] type[1] tag[2]: the header of every 9P message.
    pub const HEADER_SIZE: usize = 7;

    /// Why a mount tag from the device's configuration space was refused.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum TagError {
        /// `tag_len` is 0.
        Empty,
        /// `tag_len` is above [`MAX_TAG`].
        TooLong(u16),
        /// The tag is not UTF-8.
        NotText,
    }

    impl fmt::Display for TagError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Self::Empty => write!(f, "the device names no mount tag"),
                Self::TooLong(length) => write!(f, "its mount tag is {length} bytes, Reef reads {MAX_TAG} at most"),
                Self::NotText => write!(f, "its mount tag is not UTF-8"),
            }
        }
    }

    /// The tag length the configuration starts with (`le16 tag_len`), checked against
    /// [`MAX_TAG`]; the bytes follow it at offset 2.
    pub fn tag_length(tag_len: u16) -> Result<usize, TagError> {
        match usize::from(tag_len) {
            0 => Err(TagError::Empty),
            length if length > MAX_TAG => Err(TagError::TooLong(tag_len)),
            length => Ok(length),
        }
    }

    /// The tag, from the `tag_len` bytes that follow the length.
    pub fn tag(bytes: &[u8]) -> Result<&str, TagError> {
        core::str::from_utf8(bytes).map_err(|_| TagError::NotText)
    }

    /// Why a reply the device gave back is not used: the call fails with `EIO`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ReplyError {
        /// The device says it wrote more bytes than the buffer it was given holds.
        UsedPastBuffer { used: u32, capacity: usize },
        /// Fewer bytes than a 9P header.
        TooShort { used: u32 },
        /// The reply's size field is larger than the buffer: it was cut.
        TooLong { size: u32, capacity: usize },
        /// The reply's size field and the length the device wrote differ.
        SizeMismatch { size: u32, used: u32 },
    }

    impl fmt::Display for ReplyError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Self::UsedPastBuffer { used, capacity } => {
                    write!(f, "the device says it wrote {used} bytes into a buffer of {capacity}")
                }
                Self::TooShort { used } => write!(f, "a reply of {used} bytes is shorter than a 9P header"),
                Self::TooLong { size, capacity } => {
                    write!(f, "a reply of {size} bytes does not fit the buffer of {capacity}")
                }
                Self::SizeMismatch { size, used } => {
                    write!(f, "the reply says it has {size} bytes, the device wrote {used}")
                }
            }
        }
    }

    /// Checks a completed request: `used` is the length the device reported in the used ring,
    /// `capacity` the device-writable bytes it was given, `reply` what it wrote (read up to
    /// `capacity`). The reply's length on success.
    pub fn check_reply(used: u32, capacity: usize, reply: &[u8]) -> Result<usize, ReplyError> {
        let used_length = usize::try_from(used).unwrap_or(usize::MAX);
        if used_length > capacity || used_length > reply.len() {
            return Err(ReplyError::UsedPastBuffer { used, capacity });
        }
        if used_length < HEADER_SIZE {
            return Err(ReplyError::TooShort { used });
        }
        let size = u32::from_le_bytes([reply[0], reply[1], reply[2], reply[3]]);
        if usize::try_from(size).unwrap_or(usize::MAX) > capacity {
            return Err(ReplyError::TooLong { size, capacity });
        }
        if size != used {
            return Err(ReplyError::SizeMismatch { size, used });
        }
        Ok(used_length)
    }
}

#[cfg(test)]
mod tests {
    use super::nine_p::{self, ReplyError, TagError};
    use super::*;
    use crate::madt::IoApic;

    fn io_apics(bases: &[u32]) -> IoApics {
        let mut list = IoApics::EMPTY;
        for (n, base) in bases.iter().enumerate() {
            list.insert(IoApic { id: n as u8, address: 0xfec0_0000 + n as u64 * 0x1_0000, gsi_base: *base });
        }
        list
    }

    #[test]
    fn with_the_second_io_apic_there_are_24_transports_from_gsi_24() {
        let transports = Transports::of_microvm(&io_apics(&[0, 24]));
        assert_eq!(transports, Transports { count: 24, first_gsi: 24 });
        assert_eq!(transports.address(0), 0xfeb0_0000);
        assert_eq!(transports.address(23), 0xfeb0_2e00);
        assert_eq!(transports.gsi(0), 24);
        assert_eq!(transports.gsi(23), 47);
        assert_eq!(transports.window(), Range { start: 0xfeb0_0000, end: 0xfeb0_3000 });
    }

    #[test]
    fn with_ioapic2_off_there_are_8_transports_from_gsi_16() {
        let transports = Transports::of_microvm(&io_apics(&[0]));
        assert_eq!(transports, Transports { count: 8, first_gsi: 16 });
        assert_eq!(transports.gsi(7), 23);
        assert_eq!(transports.window(), Range { start: 0xfeb0_0000, end: 0xfeb0_1000 });
    }

    #[test]
    fn mount_tags_are_checked() {
        assert_eq!(nine_p::tag_length(0), Err(TagError::Empty));
        assert_eq!(nine_p::tag_length(6), Ok(6));
        assert_eq!(nine_p::tag_length(64), Ok(64));
        assert_eq!(nine_p::tag_length(65), Err(TagError::TooLong(65)));
        assert_eq!(nine_p::tag(b"share0"), Ok("share0"));
        assert_eq!(nine_p::tag(&[0xff, 0xfe]), Err(TagError::NotText));
    }

    fn reply(size: u32, length: usize) -> std::vec::Vec<u8> {
        let mut bytes = std::vec![0u8; length];
        bytes[..4].copy_from_slice(&size.to_le_bytes());
        bytes[4] = 101; // Rversion
        bytes
    }

    #[test]
    fn a_reply_that_fits_is_its_length() {
        let bytes = reply(19, 8192);
        assert_eq!(nine_p::check_reply(19, 8192, &bytes), Ok(19));
        // Exactly the buffer.
        let full = reply(64, 64);
        assert_eq!(nine_p::check_reply(64, 64, &full), Ok(64));
    }

    #[test]
    fn a_used_length_past_the_buffer_is_refused() {
        let bytes = reply(19, 64);
        assert_eq!(nine_p::check_reply(65, 64, &bytes), Err(ReplyError::UsedPastBuffer { used: 65, capacity: 64 }));
        assert_eq!(
            nine_p::check_reply(u32::MAX, 64, &bytes),
            Err(ReplyError::UsedPastBuffer { used: u32::MAX, capacity: 64 })
        );
    }

    #[test]
    fn a_reply_longer_than_the_buffer_is_refused() {
        let bytes = reply(100_000, 64);
        assert_eq!(nine_p::check_reply(64, 64, &bytes), Err(ReplyError::TooLong { size: 100_000, capacity: 64 }));
    }

    #[test]
    fn short_or_inconsistent_replies_are_refused() {
        let bytes = reply(19, 64);
        assert_eq!(nine_p::check_reply(6, 64, &bytes), Err(ReplyError::TooShort { used: 6 }));
        assert_eq!(nine_p::check_reply(0, 64, &bytes), Err(ReplyError::TooShort { used: 0 }));
        assert_eq!(nine_p::check_reply(20, 64, &bytes), Err(ReplyError::SizeMismatch { size: 19, used: 20 }));
    }

    proptest::proptest! {
        /// Whatever the device reports and writes, the check never panics, and what it accepts
        /// lies inside the buffer and agrees with the reply's own size.
        #[test]
        fn any_reply_is_checked_without_panic(
            used in proptest::prelude::any::<u32>(),
            capacity in 0usize..300,
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            if let Ok(length) = nine_p::check_reply(used, capacity, &bytes) {
                proptest::prop_assert!(length <= capacity && length <= bytes.len() && length >= nine_p::HEADER_SIZE);
                proptest::prop_assert_eq!(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize, length);
            }
        }
    }
}
