//! 9P2000.L on the wire: messages both ways, their encoding and checked decoding.
//!
//! A message is `size[4] type[1] tag[2]` and its fields, integers little-endian, strings
//! `length[2]` and bytes, a qid `type[1] version[4] path[8]` (diod's `protocol.md`, the
//! 9P2000.L description Linux's v9fs and QEMU's 9pfs follow). Decoding borrows strings and
//! data from the bytes it reads and checks every length: the size field must be the length
//! of the bytes, every field must fit what is left, and nothing may be left over.

pub(crate) mod codec;
mod message;
#[cfg(test)]
mod tests;
mod types;

pub use message::{Reply, Request};
pub use types::{Attr, DirEntry, Fid, Qid, SetAttr, StatFs, Timestamp};

/// The protocol string of Tversion and Rversion.
pub const VERSION_9P2000_L: &[u8] = b"9P2000.L";

/// The tag of Tversion, which comes before any other.
pub const NO_TAG: u16 = 0xFFFF;

/// "No fid": Tattach's `afid` without authentication.
pub const NO_FID: Fid = Fid(0xFFFF_FFFF);

/// "No uid": Tattach's `n_uname` when `uname` names the user.
pub const NO_UID: u32 = 0xFFFF_FFFF;

/// The most names one Twalk takes and the most qids one Rwalk gives.
pub const MAX_WALK_ELEMENTS: usize = 16;

/// Room for the header of a Tread or Twrite and its reply (Plan 9's `IOHDRSZ`): one read or
/// write moves at most `msize - IOHDRSZ` bytes.
pub const IOHDRSZ: u32 = 24;

/// Qid type of a directory.
pub const QID_DIRECTORY: u8 = 0x80;
/// Qid type of a symbolic link.
pub const QID_SYMLINK: u8 = 0x02;
/// Qid type of a regular file (and anything else).
pub const QID_FILE: u8 = 0x00;

/// Tgetattr's `request_mask` and Rgetattr's `valid`: `mode`.
pub const GETATTR_MODE: u64 = 0x0001;
/// `nlink`.
pub const GETATTR_NLINK: u64 = 0x0002;
/// `uid`.
pub const GETATTR_UID: u64 = 0x0004;
/// `gid`.
pub const GETATTR_GID: u64 = 0x0008;
/// `rdev`.
pub const GETATTR_RDEV: u64 = 0x0010;
/// `atime`.
pub const GETATTR_ATIME: u64 = 0x0020;
/// `mtime`.
pub const GETATTR_MTIME: u64 = 0x0040;
/// `ctime`.
pub const GETATTR_CTIME: u64 = 0x0080;
/// The qid's `path` as the inode number.
pub const GETATTR_INO: u64 = 0x0100;
/// `size`.
pub const GETATTR_SIZE: u64 = 0x0200;
/// `blocks`.
pub const GETATTR_BLOCKS: u64 = 0x0400;
/// Everything `stat` needs: the bits above.
pub const GETATTR_BASIC: u64 = 0x07FF;
/// `btime`, `gen` and `data_version` too.
pub const GETATTR_ALL: u64 = 0x3FFF;

/// Tsetattr's `valid`: set `mode`.
pub const SETATTR_MODE: u32 = 0x0001;
/// Set `uid`.
pub const SETATTR_UID: u32 = 0x0002;
/// Set `gid`.
pub const SETATTR_GID: u32 = 0x0004;
/// Set `size` (truncate or extend).
pub const SETATTR_SIZE: u32 = 0x0008;
/// Set the access time (to the server's clock without `SETATTR_ATIME_SET`).
pub const SETATTR_ATIME: u32 = 0x0010;
/// Set the modification time (to the server's clock without `SETATTR_MTIME_SET`).
pub const SETATTR_MTIME: u32 = 0x0020;
/// Set the change time to the server's clock.
pub const SETATTR_CTIME: u32 = 0x0040;
/// The access time is `atime`, not the server's clock.
pub const SETATTR_ATIME_SET: u32 = 0x0080;
/// The modification time is `mtime`, not the server's clock.
pub const SETATTR_MTIME_SET: u32 = 0x0100;

/// Why bytes are not a message. Decoding never panics; it answers one of these.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DecodeError {
    /// A field, or the count of bytes a field announces, runs past the end of the message.
    Truncated,
    /// The size field is not the number of bytes given.
    SizeMismatch,
    /// The type number is no message of this direction.
    UnknownType(u8),
    /// A walk names more than [`MAX_WALK_ELEMENTS`] names or qids.
    TooManyElements,
    /// Bytes are left after the message's last field.
    TrailingBytes,
}

/// Why a message cannot be encoded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EncodeError {
    /// A string is longer than a `length[2]` can say (65535 bytes).
    StringTooLong,
    /// A walk has more than [`MAX_WALK_ELEMENTS`] names or qids.
    TooManyElements,
    /// The message or its data is longer than a `size[4]` can say.
    MessageTooLong,
}
