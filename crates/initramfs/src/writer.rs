//! Writing `newc` archives, deterministically: the same calls give the same bytes.

use crate::format::{HEADER_LENGTH, MAGIC, TRAILER_NAME};
use crate::mode;
use alloc::vec::Vec;

/// Builds a `newc` archive in memory, entry by entry, in the order of the calls. Nothing
/// depends on the host: the modification time is 0, owners are root (unless said), inode numbers count up
/// from 1 in call order, directories have two links and everything else one, so the same
/// calls give the same bytes.
#[derive(Debug, Default)]
pub struct Writer {
    bytes: Vec<u8>,
    next_inode: u32,
    /// The owner and group of the entry being written: root's but for `owned_directory`.
    owner: (u32, u32),
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A directory. Its parents need no entry of their own for the reader, but Linux creates
    /// only what the archive names, so write them first for an archive Linux unpacks too.
    pub fn directory(&mut self, name: &str, permissions: u32) {
        self.entry(name, mode::DIRECTORY | permissions & 0o7777, (0, 0), &[]);
    }

    /// A directory owned by user `uid` and group `gid` (a home directory).
    pub fn owned_directory(&mut self, name: &str, permissions: u32, (uid, gid): (u32, u32)) {
        self.owner = (uid, gid);
        self.entry(name, mode::DIRECTORY | permissions & 0o7777, (0, 0), &[]);
        self.owner = (0, 0);
    }

    /// A regular file.
    pub fn file(&mut self, name: &str, permissions: u32, data: &[u8]) {
        self.entry(name, mode::REGULAR | permissions & 0o7777, (0, 0), data);
    }

    /// A symbolic link to `target`, relative to the link's directory unless it starts with `/`.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, mode::SYMLINK | 0o777, (0, 0), target.as_bytes());
    }

    /// A character device node for the device `major`:`minor`.
    pub fn character_device(&mut self, name: &str, permissions: u32, major: u32, minor: u32) {
        self.entry(name, mode::CHARACTER_DEVICE | permissions & 0o7777, (major, minor), &[]);
    }

    /// The archive: the entries, then the trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry(TRAILER_NAME, 0, (0, 0), &[]);
        self.bytes
    }

    /// # Panics
    /// If `name` holds a NUL, or `name` or `data` is 4 GiB or longer: the format cannot
    /// represent them. The trailer's name is refused too, except from `finish`: a reader
    /// would stop there.
    fn entry(&mut self, name: &str, mode: u32, node: (u32, u32), data: &[u8]) {
        assert!(!name.contains('\0'), "an archive name cannot hold a NUL: {name:?}");
        assert!(name != TRAILER_NAME || mode == 0, "{TRAILER_NAME} would end the archive");
        let too_long = "the newc format holds names and files below 4 GiB";
        self.next_inode += 1;
        let is_directory = mode & mode::TYPE_MASK == mode::DIRECTORY;
        let fields = [
            self.next_inode,
            mode,
            self.owner.0,
            self.owner.1,
            if is_directory { 2 } else { 1 },
            0, // mtime: fixed, so the same inputs give the same image
            u32::try_from(data.len()).expect(too_long),
            0, // major and minor of the device holding the file: none
            0,
            node.0, // major and minor of a device node
            node.1,
            u32::try_from(name.len() + 1).expect(too_long),
            0, // checksum: only in the `070702` variant
        ];
        self.bytes.reserve(HEADER_LENGTH + name.len() + data.len() + 8);
        self.bytes.extend_from_slice(MAGIC);
        for field in fields {
            for shift in (0..8).rev().map(|digit| digit * 4) {
                self.bytes.push(b"0123456789abcdef"[(field >> shift & 0xf) as usize]);
            }
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Archive;

    #[test]
    fn headers_and_padding() {
        let mut writer = Writer::new();
        writer.directory("bin", 0o755);
        writer.file("bin/x", 0o644, b"hello");
        writer.symlink("bin/sh", "busybox");
        writer.character_device("dev/console", 0o600, 5, 1);
        let bytes = writer.finish();
        assert_eq!(bytes.len() % 4, 0);
        // The first header: magic, inode 1, a directory 0755, two links, name size 4.
        let header = core::str::from_utf8(&bytes[..HEADER_LENGTH]).unwrap();
        assert_eq!(&header[..22], "07070100000001000041ed");
        assert_eq!(&header[30..46], "0000000000000002");
        assert_eq!(&header[94..102], "00000004");
        let archive = Archive::parse(&bytes).unwrap();
        let entries: Vec<_> =
            archive.entries().map(|e| (e.name, e.mode, e.inode, (e.node_major, e.node_minor), e.data)).collect();
        assert_eq!(
            entries,
            [
                ("bin", 0o040_755, 1, (0, 0), &b""[..]),
                ("bin/x", 0o100_644, 2, (0, 0), b"hello"),
                ("bin/sh", 0o120_777, 3, (0, 0), b"busybox"),
                ("dev/console", 0o020_600, 4, (5, 1), b""),
            ]
        );
        assert!(bytes.ends_with(b"TRAILER!!!\0\0\0\0"));
    }

    #[test]
    fn same_calls_same_bytes() {
        let build = || {
            let mut writer = Writer::new();
            writer.file("a", 0o644, b"1");
            writer.symlink("b", "a");
            writer.finish()
        };
        assert_eq!(build(), build());
    }

    #[test]
    #[should_panic(expected = "NUL")]
    fn a_nul_in_a_name_is_refused() {
        Writer::new().file("a\0b", 0o644, b"");
    }
}
