//! The structures messages carry: fids, qids, attributes, file-system statistics, listings.

use super::codec::{wire_struct, Codec, Reader, WalkElement};
use super::{DecodeError, EncodeError};
use alloc::vec::Vec;

/// A client's handle on a file of the server: a number the client picks (Tattach, Twalk)
/// and gives back with Tclunk.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub struct Fid(pub u32);

impl<'a> Codec<'a> for Fid {
    type Value = Self;
    fn put(value: &Self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        u32::put(&value.0, out)
    }
    fn take(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        u32::take(reader).map(Fid)
    }
    #[cfg(test)]
    fn sample(source: &mut super::codec::Sample<'a>) -> Self {
        Fid(u32::sample(source))
    }
}

wire_struct! {
    /// The server's identity of a file: the same file always has the same `path`.
    #[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
    pub struct Qid {
        /// What the file is: [`QID_DIRECTORY`](super::QID_DIRECTORY),
        /// [`QID_SYMLINK`](super::QID_SYMLINK) or [`QID_FILE`](super::QID_FILE) (the high byte
        /// of Plan 9's mode word).
        pub kind: u8,
        /// A number the server changes when the file's contents change (0 when it does not).
        pub version: u32,
        /// Unique among the files of the share: the inode number on a Linux host.
        pub path: u64,
    }
}

impl WalkElement for Qid {}
impl WalkElement for &[u8] {}

wire_struct! {
    /// A time as Linux keeps it: seconds and nanoseconds since the epoch.
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default, Hash)]
    pub struct Timestamp {
        /// Whole seconds since 1970-01-01 UTC.
        pub seconds: u64,
        /// Nanoseconds within the second.
        pub nanoseconds: u64,
    }
}

wire_struct! {
    /// Rgetattr's body, close to Linux's `struct stat`.
    #[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
    pub struct Attr {
        /// Which fields hold values: the `GETATTR_*` bits.
        pub valid: u64,
        /// The file's qid (its `path` is the inode number).
        pub qid: Qid,
        /// File type and permission bits, as `st_mode`.
        pub mode: u32,
        /// Owner.
        pub uid: u32,
        /// Group.
        pub gid: u32,
        /// Hard links.
        pub nlink: u64,
        /// Device number of a device node.
        pub rdev: u64,
        /// Length in bytes.
        pub size: u64,
        /// The block size the server prefers for I/O.
        pub blksize: u64,
        /// 512-byte blocks held.
        pub blocks: u64,
        /// Last access.
        pub atime: Timestamp,
        /// Last change of contents.
        pub mtime: Timestamp,
        /// Last change of attributes.
        pub ctime: Timestamp,
        /// Creation (reserved by the protocol, seldom valid).
        pub btime: Timestamp,
        /// Generation number (reserved).
        pub gen: u64,
        /// Data version (reserved).
        pub data_version: u64,
    }
}

wire_struct! {
    /// Tsetattr's body: what to change, as the `SETATTR_*` bits of `valid` say.
    #[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
    pub struct SetAttr {
        /// Which fields to apply: the `SETATTR_*` bits.
        pub valid: u32,
        /// New permission bits (`chmod`).
        pub mode: u32,
        /// New owner (`chown`).
        pub uid: u32,
        /// New group (`chown`).
        pub gid: u32,
        /// New length (`truncate`).
        pub size: u64,
        /// New access time, when `SETATTR_ATIME_SET` is given (else the server's clock).
        pub atime: Timestamp,
        /// New modification time, when `SETATTR_MTIME_SET` is given (else the server's clock).
        pub mtime: Timestamp,
    }
}

wire_struct! {
    /// Rstatfs's body, as Linux's `struct statfs`.
    #[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
    pub struct StatFs {
        /// The file system's magic number.
        pub filesystem_type: u32,
        /// Block size the counts are in.
        pub block_size: u32,
        /// Blocks in all.
        pub blocks: u64,
        /// Free blocks.
        pub free_blocks: u64,
        /// Free blocks an unprivileged user may take.
        pub available_blocks: u64,
        /// Inodes in all.
        pub files: u64,
        /// Free inodes.
        pub free_files: u64,
        /// The file system's id.
        pub filesystem_id: u64,
        /// Longest name.
        pub name_length: u32,
    }
}

wire_struct! {
    /// One entry of an Rreaddir listing: `qid[13] offset[8] type[1] name[s]`.
    #[derive(Clone, PartialEq, Eq, Debug, Default, Hash)]
    pub struct DirEntry {
        /// The entry's file.
        pub qid: Qid,
        /// Where the next Treaddir continues after this entry (a cookie, not a byte count).
        pub offset: u64,
        /// The file type as `d_type` (`DT_DIR`, `DT_REG`...).
        pub kind: u8,
        /// The name, without a NUL.
        pub name: Vec<u8>,
    }
}

impl DirEntry {
    /// Appends the entry to an Rreaddir's data.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        Self::put(self, out)
    }

    /// Bytes the entry takes in an Rreaddir's data.
    pub fn encoded_len(&self) -> usize {
        13 + 8 + 1 + 2 + self.name.len()
    }

    /// The entries of an Rreaddir's data: whole entries only, up to its last byte.
    pub fn decode_all(data: &[u8]) -> Result<Vec<DirEntry>, DecodeError> {
        let mut reader = Reader::new(data);
        let mut entries = Vec::new();
        while !reader.is_empty() {
            entries.push(Self::take(&mut reader)?);
        }
        Ok(entries)
    }
}
