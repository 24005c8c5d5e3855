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
