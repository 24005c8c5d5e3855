//! The cpio `newc` archives Reef boots with: a reader for the kernel, a writer for the host.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]

#[cfg(any(feature = "alloc", test))]
extern crate alloc;

mod archive;
mod format;
mod lookup;
mod path;
#[cfg(any(feature = "alloc", test))]
mod writer;

pub use archive::{Archive, Entries, Entry};
pub use format::{FormatError, HEADER_LENGTH, MAGIC, MAGIC_WITH_CHECKSUM, TRAILER_NAME};
pub use lookup::{LookupError, ReadDirectory, MAX_SYMLINK_HOPS};
#[cfg(any(feature = "alloc", test))]
pub use writer::Writer;

/// The file-type bits of [`Entry::mode`], as in `st_mode` (`S_IFMT` and its values).
pub mod mode {
    /// The bits that hold the file type.
    pub const TYPE_MASK: u32 = 0o170_000;
    pub const SOCKET: u32 = 0o140_000;
    pub const SYMLINK: u32 = 0o120_000;
    pub const REGULAR: u32 = 0o100_000;
    pub const BLOCK_DEVICE: u32 = 0o060_000;
    pub const DIRECTORY: u32 = 0o040_000;
    pub const CHARACTER_DEVICE: u32 = 0o020_000;
    pub const FIFO: u32 = 0o010_000;
}
