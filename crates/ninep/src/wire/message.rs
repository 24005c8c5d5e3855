//! Every 9P2000.L message the client uses, declared once each: number, fields, layout.

use super::codec::{begin_message, codec_of, end_message, open_message, Codec, Data};
use super::types::{Attr, Fid, Qid, SetAttr, StatFs};
use super::{DecodeError, EncodeError};
use alloc::vec::Vec;

/// Declares one direction's messages as an enum, with its encoder and decoder. Each field is
/// written in the order given, by its type's codec or the one named after `as`.
macro_rules! messages {
    ($(#[$meta:meta])* pub enum $name:ident<'a> {
        $($(#[$variant_meta:meta])* $variant:ident = $number:literal {
            $($(#[$field_meta:meta])* $field:ident: $type:ty $(as $codec:ty)?),* $(,)?
        },)*
    }) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Debug)]
        pub enum $name<'a> {
            // The fields carry the protocol's names (diod's `protocol.md`); each variant's
            // line says what they mean, which a line per field would only repeat.
            $($(#[$variant_meta])* $variant { $($(#[$field_meta])* #[allow(missing_docs)] $field: $type,)* },)*
        }

        impl<'a> $name<'a> {
            /// The message's type number on the wire.
            pub fn message_type(&self) -> u8 {
                match self {
                    $(Self::$variant { .. } => $number,)*
                }
            }

            /// Appends the message, `size[4] type[1] tag[2]` and its fields, to `out`; on an
            /// error `out` is left as it was.
            pub fn encode(&self, tag: u16, out: &mut Vec<u8>) -> Result<(), EncodeError> {
                let start = begin_message(out, self.message_type(), tag);
                let mut put_fields = || -> Result<(), EncodeError> {
                    match self {
                        $(Self::$variant { $($field),* } => {
                            $(<codec_of!($type $(, $codec)?) as Codec<'a>>::put($field, out)?;)*
                        })*
                    }
                    Ok(())
                };
                let fields = put_fields();
                end_message(out, start, fields)
            }

            /// Reads one whole message, exactly `bytes`: its tag and the message.
            pub fn decode(bytes: &'a [u8]) -> Result<(u16, Self), DecodeError> {
                let (message_type, tag, mut reader) = open_message(bytes)?;
                let message = match message_type {
                    $($number => Self::$variant {
                        $($field: <codec_of!($type $(, $codec)?) as Codec<'a>>::take(&mut reader)?,)*
                    },)*
                    unknown => return Err(DecodeError::UnknownType(unknown)),
                };
                reader.finish()?;
                Ok((tag, message))
            }

            /// One message of every type, its fields drawn from `source`.
            #[cfg(test)]
            pub(crate) fn samples(source: &mut super::codec::Sample<'a>) -> Vec<Self> {
                alloc::vec![$(Self::$variant {
                    $($field: <codec_of!($type $(, $codec)?) as Codec<'a>>::sample(source),)*
                },)*]
            }
        }
    };
}

messages! {
    /// A T-message: what a client asks. Fields are named as in the 9P2000.L description
    /// (diod's `protocol.md`, Linux's `net/9p`).
    pub enum Request<'a> {
        /// Tstatfs: the file system holding `fid`.
        Statfs = 8 { fid: Fid },
        /// Tlopen: prepares `fid` for I/O with Linux `open` flags.
        Lopen = 12 { fid: Fid, flags: u32 },
        /// Tlcreate: creates regular file `name` in directory `fid`, which becomes the new
        /// file, open with `flags`.
        Lcreate = 14 { fid: Fid, name: &'a [u8], flags: u32, mode: u32, gid: u32 },
        /// Tsymlink: creates link `name` to `target` in directory `fid`.
        Symlink = 16 { fid: Fid, name: &'a [u8], target: &'a [u8], gid: u32 },
        /// Tmknod: creates device node, FIFO or socket `name` in `directory`.
        Mknod = 18 { directory: Fid, name: &'a [u8], mode: u32, major: u32, minor: u32, gid: u32 },
        /// Treadlink: the target of link `fid`.
        Readlink = 22 { fid: Fid },
        /// Tgetattr: the attributes `request_mask` (`GETATTR_*`) asks for.
        Getattr = 24 { fid: Fid, request_mask: u64 },
        /// Tsetattr: changes what `attr.valid` says.
        Setattr = 26 { fid: Fid, attr: SetAttr },
        /// Treaddir: entries of open directory `fid` after cookie `offset`, in `count` bytes.
        Readdir = 40 { fid: Fid, offset: u64, count: u32 },
        /// Tfsync: flushes `fid` to stable storage (only its data when `datasync` is not 0).
        Fsync = 50 { fid: Fid, datasync: u32 },
        /// Tlink: hard link `name` in `directory` to file `fid`.
        Link = 70 { directory: Fid, fid: Fid, name: &'a [u8] },
        /// Tmkdir: creates directory `name` in `directory`.
        Mkdir = 72 { directory: Fid, name: &'a [u8], mode: u32, gid: u32 },
        /// Trenameat: moves `old_name` of `old_directory` to `new_name` of `new_directory`.
        Renameat = 74 { old_directory: Fid, old_name: &'a [u8], new_directory: Fid, new_name: &'a [u8] },
        /// Tunlinkat: removes `name` from `directory` (`AT_REMOVEDIR` in `flags` for a
        /// directory).
        Unlinkat = 76 { directory: Fid, name: &'a [u8], flags: u32 },
        /// Tversion: the largest message the client takes and the protocol it speaks.
        Version = 100 { msize: u32, version: &'a [u8] },
        /// Tattach: `fid` becomes the root of tree `aname` for user `n_uname` (`uname` when
        /// that is [`NO_UID`](super::NO_UID)); `afid` is [`NO_FID`](super::NO_FID) without
        /// authentication.
        Attach = 104 { fid: Fid, afid: Fid, uname: &'a [u8], aname: &'a [u8], n_uname: u32 },
        /// Tflush: abandons the request tagged `old_tag`.
        Flush = 108 { old_tag: u16 },
        /// Twalk: `new_fid` names what `names` lead to from `fid` (a clone when there are
        /// none); at most 16 names.
        Walk = 110 { fid: Fid, new_fid: Fid, names: Vec<&'a [u8]> },
        /// Tread: at most `count` bytes of `fid` from `offset`.
        Read = 116 { fid: Fid, offset: u64, count: u32 },
        /// Twrite: `data` into `fid` at `offset`.
        Write = 118 { fid: Fid, offset: u64, data: &'a [u8] as Data },
        /// Tclunk: the client is done with `fid`.
        Clunk = 120 { fid: Fid },
        /// Tremove: removes the file of `fid` and clunks `fid`, even when that fails.
        Remove = 122 { fid: Fid },
    }
}

messages! {
    /// An R-message: the server's answer, of the request's number plus one, or Rlerror.
    pub enum Reply<'a> {
        /// Rlerror: the request failed with Linux errno `ecode`.
        Lerror = 7 { ecode: u32 },
        /// Rstatfs.
        Statfs = 9 { statfs: StatFs },
        /// Rlopen: the file, and the most bytes one I/O moves atomically (0: no promise).
        Lopen = 13 { qid: Qid, iounit: u32 },
        /// Rlcreate: as Rlopen, for the new file.
        Lcreate = 15 { qid: Qid, iounit: u32 },
        /// Rsymlink: the new link.
        Symlink = 17 { qid: Qid },
        /// Rmknod: the new node.
        Mknod = 19 { qid: Qid },
        /// Rreadlink.
        Readlink = 23 { target: &'a [u8] },
        /// Rgetattr.
        Getattr = 25 { attr: Attr },
        /// Rsetattr.
        Setattr = 27 {},
        /// Rreaddir: whole [`DirEntry`](super::DirEntry) records; none at the end.
        Readdir = 41 { data: &'a [u8] as Data },
        /// Rfsync.
        Fsync = 51 {},
        /// Rlink.
        Link = 71 {},
        /// Rmkdir: the new directory.
        Mkdir = 73 { qid: Qid },
        /// Rrenameat.
        Renameat = 75 {},
        /// Runlinkat.
        Unlinkat = 77 {},
        /// Rversion: the server's largest message (at most the client's) and its protocol, or
        /// `unknown`.
        Version = 101 { msize: u32, version: &'a [u8] },
        /// Rattach: the root's qid.
        Attach = 105 { qid: Qid },
        /// Rflush.
        Flush = 109 {},
        /// Rwalk: a qid per name walked; fewer than asked means the walk stopped there and
        /// `new_fid` was not made.
        Walk = 111 { qids: Vec<Qid> },
        /// Rread: the bytes read; fewer than asked at the end of the file.
        Read = 117 { data: &'a [u8] as Data },
        /// Rwrite: the bytes written.
        Write = 119 { count: u32 },
        /// Rclunk.
        Clunk = 121 {},
        /// Rremove.
        Remove = 123 {},
    }
}
