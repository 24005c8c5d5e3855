//! A validated archive and its entries, borrowed from the bytes they were read from.

use crate::format::{self, FormatError};
use crate::{mode, path};

/// A `newc` archive whose every header was checked by [`Archive::parse`], so reading it again
/// cannot fail. It borrows the bytes (the kernel keeps the initramfs where the loader put it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Archive<'a> {
    /// The archive up to the end of the trailer entry (its zero padding excluded).
    bytes: &'a [u8],
    /// Entries before the trailer.
    entry_count: usize,
}

/// One file, directory, symbolic link or device node of an archive, as its header describes
/// it. A directory that only exists as a prefix of other names is reported with the same
/// fields, made up: mode `040755`, inode 0, `nlink` 2, everything else 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The path, without the leading `/` or `./` some archivers write; `""` is the root.
    pub name: &'a str,
    /// File type and permissions, as in `st_mode`: see [`mode`].
    pub mode: u32,
    pub inode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Number of hard links.
    pub nlink: u32,
    /// Modification time, in seconds since 1970.
    pub mtime: u32,
    /// The device that held the file where the archive was made (`st_dev`).
    pub device_major: u32,
    pub device_minor: u32,
    /// For a character or block device node, the device it stands for (`st_rdev`).
    pub node_major: u32,
    pub node_minor: u32,
    /// The file's contents, or a symbolic link's target; empty for anything else.
    pub data: &'a [u8],
}

impl<'a> Entry<'a> {
    /// The entry that stands for a directory no header names, only other names' prefixes.
    pub(crate) fn implicit_directory(name: &'a str) -> Self {
        Self {
            name,
            mode: mode::DIRECTORY | 0o755,
            inode: 0,
            uid: 0,
            gid: 0,
            nlink: 2,
            mtime: 0,
            device_major: 0,
            device_minor: 0,
            node_major: 0,
            node_minor: 0,
            data: &[],
        }
    }

    fn file_type(&self) -> u32 {
        self.mode & mode::TYPE_MASK
    }

    pub fn is_directory(&self) -> bool {
        self.file_type() == mode::DIRECTORY
    }

    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.file_type() == mode::REGULAR
    }

    pub fn is_symlink(&self) -> bool {
        self.file_type() == mode::SYMLINK
    }

    pub fn is_character_device(&self) -> bool {
        self.file_type() == mode::CHARACTER_DEVICE
    }

    /// The target of a symbolic link (checked to be UTF-8 when the archive was parsed); `None`
    /// for anything else.
    pub fn symlink_target(&self) -> Option<&'a str> {
        if self.is_symlink() {
            core::str::from_utf8(self.data).ok()
        } else {
            None
        }
    }

    /// The last component of the name (`sh` for `bin/sh`); `""` for the root.
    pub fn file_name(&self) -> &'a str {
        path::components(self.name).next_back().unwrap_or("")
    }

    /// The permission bits, set-user-id, set-group-id and sticky included.
    pub fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }
}

impl<'a> Archive<'a> {
    /// Checks every header of `bytes` (magic, fields, name, lengths, checksums of `070702`
    /// files) up to the `TRAILER!!!` entry, after which only zero padding may follow. Never
    /// panics, whatever the bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, FormatError> {
        let mut offset = 0;
        let mut entry_count = 0usize;
        loop {
            if offset >= bytes.len() {
                return Err(FormatError::MissingTrailer { offset });
            }
            let record = format::read_record(bytes, offset)?;
            if record.is_trailer {
                let (archive, padding) = bytes.split_at(record.next);
                if let Some(position) = padding.iter().position(|&byte| byte != 0) {
                    return Err(FormatError::DataAfterTrailer { offset: record.next + position });
                }
                return Ok(Self { bytes: archive, entry_count });
            }
            // Each header is at least 112 bytes long with its name and padding, so the loop
            // ends, and the count stays far below the number of bytes.
            entry_count += 1;
            offset = record.next;
        }
    }

    /// The entries in archive order, the trailer excluded.
    pub fn entries(&self) -> Entries<'a> {
        Entries { bytes: self.bytes, offset: 0, remaining: self.entry_count }
    }

    /// How many entries there are, the trailer excluded.
    pub fn len(&self) -> usize {
        self.entry_count
    }

    pub fn is_empty(&self) -> bool {
        self.entry_count == 0
    }

    /// The archive's bytes, from the first header to the end of the trailer.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<'a> Archive<'a> {
    /// The names of the entries with the offsets of their headers, for the lookups' scans.
    pub(crate) fn names(&self) -> Names<'a> {
        Names { bytes: self.bytes, offset: 0, remaining: self.entry_count }
    }

    /// The whole entry whose header is at `offset`, one [`Archive::names`] gave.
    pub(crate) fn entry_at(&self, offset: usize) -> Option<Entry<'a>> {
        format::read_record(self.bytes, offset).ok().map(|record| record.entry)
    }
}

/// The names of an archive's entries and where their headers start, in order.
#[derive(Clone, Debug)]
pub(crate) struct Names<'a> {
    bytes: &'a [u8],
    offset: usize,
    remaining: usize,
}

impl<'a> Iterator for Names<'a> {
    type Item = (&'a str, usize);

    fn next(&mut self) -> Option<(&'a str, usize)> {
        if self.remaining == 0 {
            return None;
        }
        let (name, next) = format::read_name(self.bytes, self.offset)?;
        let offset = self.offset;
        self.remaining -= 1;
        self.offset = next;
        Some((name, offset))
    }
}

/// The entries of an [`Archive`], in order.
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    bytes: &'a [u8],
    offset: usize,
    remaining: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        if self.remaining == 0 {
            return None;
        }
        // `Archive::parse` decoded these same bytes, so this cannot fail; if it somehow did,
        // ending the iteration is the answer that cannot panic.
        let record = format::read_record(self.bytes, self.offset).ok()?;
        self.remaining -= 1;
        self.offset = record.next;
        Some(record.entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{MAGIC, MAGIC_WITH_CHECKSUM, TRAILER_NAME};
    use crate::Writer;
    use alloc::vec::Vec;

    /// One raw entry: `magic`, the 13 fields (the name size among them as given), `name` as
    /// given (NUL included or not), `data`, each padded to 4 bytes.
    fn raw_entry(magic: &[u8], fields: [u32; 13], name: &[u8], data: &[u8]) -> Vec<u8> {
        let mut bytes = magic.to_vec();
        for field in fields {
            bytes.extend_from_slice(alloc::format!("{field:08X}").as_bytes());
        }
        bytes.extend_from_slice(name);
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        bytes.extend_from_slice(data);
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        bytes
    }

    /// The fields of an entry with this mode, data and name (NUL counted).
    fn fields(mode: u32, data: &[u8], name: &str) -> [u32; 13] {
        [1, mode, 0, 0, 1, 0, data.len() as u32, 0, 0, 0, 0, name.len() as u32 + 1, 0]
    }

    fn trailer() -> Vec<u8> {
        raw_entry(MAGIC, fields(0, b"", TRAILER_NAME), b"TRAILER!!!\0", b"")
    }

    fn with_trailer(mut entry: Vec<u8>) -> Vec<u8> {
        entry.extend_from_slice(&trailer());
        entry
    }

    #[test]
    fn names_lose_their_leading_root() {
        let mut writer = Writer::new();
        for name in [".", "./bin", "/etc", "//./usr/bin/"] {
            writer.directory(name, 0o755);
        }
        let bytes = writer.finish();
        let archive = Archive::parse(&bytes).unwrap();
        let names: Vec<&str> = archive.entries().map(|entry| entry.name).collect();
        assert_eq!(names, ["", "bin", "etc", "usr/bin/"]);
        assert_eq!(archive.len(), 4);
        assert_eq!(archive.entries().last().unwrap().file_name(), "bin");
    }

    #[test]
    fn upper_case_hex_and_checksums_are_read() {
        let data = b"checked";
        let sum = data.iter().map(|&byte| u32::from(byte)).sum();
        let mut good = fields(mode::REGULAR | 0o644, data, "f");
        good[12] = sum;
        let bytes = with_trailer(raw_entry(MAGIC_WITH_CHECKSUM, good, b"f\0", data));
        assert_eq!(Archive::parse(&bytes).unwrap().entries().next().unwrap().data, data);
        let mut bad = good;
        bad[12] = sum + 1;
        let bytes = with_trailer(raw_entry(MAGIC_WITH_CHECKSUM, bad, b"f\0", data));
        assert_eq!(
            Archive::parse(&bytes),
            Err(FormatError::ChecksumMismatch { offset: 0, expected: sum + 1, computed: sum })
        );
        // `070701` has no checksum to check.
        assert!(Archive::parse(&with_trailer(raw_entry(MAGIC, bad, b"f\0", data))).is_ok());
    }

    #[test]
    fn every_format_error() {
        let file = |name: &[u8], name_size: u32, data: &[u8], mode: u32| {
            let mut header = fields(mode, data, "");
            header[11] = name_size;
            with_trailer(raw_entry(MAGIC, header, name, data))
        };
        let regular = mode::REGULAR | 0o644;
        let valid = file(b"abc\0", 4, b"12345", regular);
        assert!(Archive::parse(&valid).is_ok());

        assert_eq!(Archive::parse(&[]), Err(FormatError::MissingTrailer { offset: 0 }));
        let no_trailer = &valid[..valid.len() - trailer().len()];
        assert_eq!(Archive::parse(no_trailer), Err(FormatError::MissingTrailer { offset: no_trailer.len() }));
        for cut in [1, 109, 112, 115, 117] {
            assert_eq!(Archive::parse(&valid[..cut]), Err(FormatError::Truncated { offset: 0 }), "cut at {cut}");
        }
        let mut magic = valid.clone();
        magic[..6].copy_from_slice(b"070707");
        assert_eq!(Archive::parse(&magic), Err(FormatError::BadMagic { offset: 0 }));
        let mut field = valid.clone();
        field[6 + 8 * 5 + 3] = b'x';
        assert_eq!(Archive::parse(&field), Err(FormatError::BadField { offset: 0, field: "mtime" }));
        assert_eq!(Archive::parse(&file(b"", 0, b"", regular)), Err(FormatError::EmptyName { offset: 0 }));
        assert_eq!(Archive::parse(&file(b"abcd", 4, b"", regular)), Err(FormatError::NameNotTerminated { offset: 0 }));
        assert_eq!(Archive::parse(&file(b"a\0c\0", 4, b"", regular)), Err(FormatError::NameContainsNul { offset: 0 }));
        assert_eq!(Archive::parse(&file(b"a\xffc\0", 4, b"", regular)), Err(FormatError::NameNotUtf8 { offset: 0 }));
        assert_eq!(
            Archive::parse(&file(b"abc\0", 4, b"\xfe", mode::SYMLINK | 0o777)),
            Err(FormatError::SymlinkTargetNotUtf8 { offset: 0 })
        );
        let mut huge = fields(regular, b"", "abc");
        huge[6] = u32::MAX;
        assert_eq!(
            Archive::parse(&with_trailer(raw_entry(MAGIC, huge, b"abc\0", b""))),
            Err(FormatError::Truncated { offset: 0 })
        );
        huge = fields(regular, b"", "abc");
        huge[11] = u32::MAX;
        assert_eq!(
            Archive::parse(&with_trailer(raw_entry(MAGIC, huge, b"abc\0", b""))),
            Err(FormatError::Truncated { offset: 0 })
        );

        let mut padded = valid.clone();
        padded.resize(512, 0);
        assert_eq!(Archive::parse(&padded).unwrap().as_bytes(), &valid[..]);
        padded[300] = 1;
        assert_eq!(Archive::parse(&padded), Err(FormatError::DataAfterTrailer { offset: 300 }));
        // The padding after the trailer's name may be missing: the archive just ends there.
        let short = &valid[..valid.len() - 3];
        assert_eq!(Archive::parse(short).unwrap().len(), 1);
    }
}
