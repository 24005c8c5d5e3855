//! The `newc` header: decoding one entry, and what can be wrong with it.
//!
//! Layout (Linux `Documentation/driver-api/early-userspace/buffer-format.rst`): per entry a
//! 110-byte ASCII header, the magic `070701` (or `070702`, whose checksum field holds the sum
//! of a regular file's data bytes) then 13 fields of eight hexadecimal digits; the name with
//! its NUL, padded to a multiple of 4 bytes from the archive's start; the data, padded the
//! same way. An entry named `TRAILER!!!` ends the archive.

use crate::archive::Entry;
use crate::mode;
use crate::path;
use core::fmt;

/// Bytes in a header: the 6-byte magic and 13 fields of 8 hexadecimal digits.
pub const HEADER_LENGTH: usize = 6 + 13 * 8;
/// The magic of the `newc` format.
pub const MAGIC: &[u8; 6] = b"070701";
/// The magic of `newc` with checksums (`cpio -H crc`).
pub const MAGIC_WITH_CHECKSUM: &[u8; 6] = b"070702";
/// The name of the entry that ends an archive.
pub const TRAILER_NAME: &str = "TRAILER!!!";

/// The header fields after the magic, in order, as [`FormatError::BadField`] names them.
const FIELD_NAMES: [&str; 13] = [
    "inode",
    "mode",
    "uid",
    "gid",
    "nlink",
    "mtime",
    "file size",
    "device major",
    "device minor",
    "node major",
    "node minor",
    "name size",
    "checksum",
];

/// Why bytes are not a `newc` archive. `offset` is where the entry at fault starts, counted
/// from the start of the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// The bytes end inside the header, the name or the data of the entry at `offset`.
    Truncated { offset: usize },
    /// The header at `offset` does not start with `070701` or `070702`, the magics of `newc`
    /// (`070707` is the older portable format, which Reef does not read).
    BadMagic { offset: usize },
    /// A field of the header at `offset` is not eight hexadecimal digits.
    BadField { offset: usize, field: &'static str },
    /// The name size of the entry at `offset` is 0, but it counts the name's NUL, so it is at
    /// least 1.
    EmptyName { offset: usize },
    /// The last byte the name size covers is not NUL: the size or the name is wrong.
    NameNotTerminated { offset: usize },
    /// The name holds a NUL before its end, which no path can contain.
    NameContainsNul { offset: usize },
    /// The name is not UTF-8.
    NameNotUtf8 { offset: usize },
    /// The entry is a symbolic link whose target is not UTF-8.
    SymlinkTargetNotUtf8 { offset: usize },
    /// The entry is a regular file in a `070702` archive whose data bytes do not add up to its
    /// checksum field: the data was damaged.
    ChecksumMismatch { offset: usize, expected: u32, computed: u32 },
    /// The bytes end where the header at `offset` should start, with no `TRAILER!!!` entry
    /// before: the archive was cut short.
    MissingTrailer { offset: usize },
    /// A byte other than the zero padding follows the trailer, at `offset`: a second archive
    /// appended, which Reef does not read, or garbage.
    DataAfterTrailer { offset: usize },
}

impl fmt::Display for FormatError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { offset } => write!(formatter, "the archive ends inside the entry at byte {offset}"),
            Self::BadMagic { offset } => write!(formatter, "no newc magic (070701 or 070702) at byte {offset}"),
            Self::BadField { offset, field } => {
                write!(formatter, "the {field} field of the header at byte {offset} is not 8 hex digits")
            }
            Self::EmptyName { offset } => write!(formatter, "the entry at byte {offset} has a name size of 0"),
            Self::NameNotTerminated { offset } => {
                write!(formatter, "the name of the entry at byte {offset} does not end in NUL")
            }
            Self::NameContainsNul { offset } => write!(formatter, "the name of the entry at byte {offset} holds a NUL"),
            Self::NameNotUtf8 { offset } => write!(formatter, "the name of the entry at byte {offset} is not UTF-8"),
            Self::SymlinkTargetNotUtf8 { offset } => {
                write!(formatter, "the symlink target of the entry at byte {offset} is not UTF-8")
            }
            Self::ChecksumMismatch { offset, expected, computed } => write!(
                formatter,
                "the data of the entry at byte {offset} sums to {computed:#x}, its header says {expected:#x}"
            ),
            Self::MissingTrailer { offset } => {
                write!(formatter, "the archive ends at byte {offset} without TRAILER!!!")
            }
            Self::DataAfterTrailer { offset } => write!(formatter, "data after the trailer, at byte {offset}"),
        }
    }
}

impl core::error::Error for FormatError {}

/// One decoded entry and where the next one starts.
pub(crate) struct Record<'a> {
    pub entry: Entry<'a>,
    /// The offset of the next header (see [`next_offset`]).
    pub next: usize,
    pub is_trailer: bool,
}

/// `value` rounded up to a multiple of 4, or `None` if that overflows.
fn align_to_4(value: usize) -> Option<usize> {
    Some(value.checked_add(3)? & !3)
}

/// Eight ASCII hexadecimal digits (either case) as a number. `u32::from_str_radix` would also
/// take a leading `+`, which is not a digit.
fn hexadecimal(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |value, &digit| {
        let nibble = char::from(digit).to_digit(16)?;
        // Eight digits fit a u32 exactly, so the shift never loses a digit.
        Some(value << 4 | nibble)
    })
}

/// Decodes the entry whose header starts at `offset`, checking every length against the end
/// of `bytes`. Never panics: every offset is computed with checked arithmetic and every slice
/// taken with `get`.
pub(crate) fn read_record(bytes: &[u8], offset: usize) -> Result<Record<'_>, FormatError> {
    let truncated = FormatError::Truncated { offset };
    let header_end = offset.checked_add(HEADER_LENGTH).ok_or(truncated)?;
    let header = bytes.get(offset..header_end).ok_or(truncated)?;
    let (magic, fields) = header.split_at(MAGIC.len());
    let with_checksum = if magic == MAGIC {
        false
    } else if magic == MAGIC_WITH_CHECKSUM {
        true
    } else {
        return Err(FormatError::BadMagic { offset });
    };
    let mut values = [0u32; 13];
    for ((value, digits), field) in values.iter_mut().zip(fields.chunks_exact(8)).zip(FIELD_NAMES) {
        *value = hexadecimal(digits).ok_or(FormatError::BadField { offset, field })?;
    }
    let [inode, mode, uid, gid, nlink, mtime, file_size, devices_and_name @ ..] = values;
    let [device_major, device_minor, node_major, node_minor, name_size, checksum] = devices_and_name;

    let name_size = usize::try_from(name_size).map_err(|_| truncated)?;
    let name_end = header_end.checked_add(name_size).ok_or(truncated)?;
    let name_with_nul = bytes.get(header_end..name_end).ok_or(truncated)?;
    let Some((&last, name)) = name_with_nul.split_last() else {
        return Err(FormatError::EmptyName { offset });
    };
    if last != 0 {
        return Err(FormatError::NameNotTerminated { offset });
    }
    if name.contains(&0) {
        return Err(FormatError::NameContainsNul { offset });
    }
    let name = core::str::from_utf8(name).map_err(|_| FormatError::NameNotUtf8 { offset })?;

    let file_size = usize::try_from(file_size).map_err(|_| truncated)?;
    let data_start = align_to_4(name_end).ok_or(truncated)?;
    let data_end = data_start.checked_add(file_size).ok_or(truncated)?;
    let data: &[u8] = if file_size == 0 { &[] } else { bytes.get(data_start..data_end).ok_or(truncated)? };
    let file_type = mode & mode::TYPE_MASK;
    if with_checksum && file_type == mode::REGULAR {
        let computed = data.iter().fold(0u32, |sum, &byte| sum.wrapping_add(u32::from(byte)));
        if computed != checksum {
            return Err(FormatError::ChecksumMismatch { offset, expected: checksum, computed });
        }
    }
    if file_type == mode::SYMLINK && core::str::from_utf8(data).is_err() {
        return Err(FormatError::SymlinkTargetNotUtf8 { offset });
    }
    let next = next_offset(bytes, data_end);
    let entry = Entry {
        name: path::without_leading_root(name),
        mode,
        inode,
        uid,
        gid,
        nlink,
        mtime,
        device_major,
        device_minor,
        node_major,
        node_minor,
        data,
    };
    Ok(Record { entry, next, is_trailer: name == TRAILER_NAME })
}

/// The name of the entry at `offset` (its leading root removed) and where the next entry
/// starts, decoding only the two sizes: the lookups' scans of an archive [`read_record`]
/// already checked, several times faster than decoding every field. `None` where
/// `read_record` would fail.
pub(crate) fn read_name(bytes: &[u8], offset: usize) -> Option<(&str, usize)> {
    let field = |index: usize| -> Option<usize> {
        let start = offset.checked_add(MAGIC.len() + 8 * index)?;
        usize::try_from(hexadecimal(bytes.get(start..start.checked_add(8)?)?)?).ok()
    };
    let (file_size, name_size) = (field(6)?, field(11)?);
    let header_end = offset.checked_add(HEADER_LENGTH)?;
    let name_end = header_end.checked_add(name_size)?;
    let name = core::str::from_utf8(bytes.get(header_end..name_end.checked_sub(1)?)?).ok()?;
    let data_end = align_to_4(name_end)?.checked_add(file_size)?;
    Some((path::without_leading_root(name), next_offset(bytes, data_end)))
}

/// Where the entry after data ending at `data_end` starts: after the padding, but never past
/// the end of the bytes (the padding after the last entry may be missing).
fn next_offset(bytes: &[u8], data_end: usize) -> usize {
    align_to_4(data_end).map_or(bytes.len(), |next| next.min(bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hexadecimal_takes_exactly_digits() {
        assert_eq!(hexadecimal(b"000041ED"), Some(0o40755));
        assert_eq!(hexadecimal(b"ffffffff"), Some(u32::MAX));
        assert_eq!(hexadecimal(b"+0000001"), None);
        assert_eq!(hexadecimal(b"0000000g"), None);
        assert_eq!(hexadecimal(b" 0000001"), None);
    }

    #[test]
    fn alignment_saturates_to_none() {
        assert_eq!(align_to_4(0), Some(0));
        assert_eq!(align_to_4(5), Some(8));
        assert_eq!(align_to_4(usize::MAX), None);
    }
}
