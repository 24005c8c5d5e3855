//! The wire's building blocks: integers, strings, counted lists, data, framing.

use super::{DecodeError, EncodeError, MAX_WALK_ELEMENTS};
use alloc::vec::Vec;

/// Reads fields off the front of a message and never past its end.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// The next `length` bytes, or `Truncated` when fewer are left.
    pub(crate) fn take_bytes(&mut self, length: usize) -> Result<&'a [u8], DecodeError> {
        let (head, rest) = self.rest.split_at_checked(length).ok_or(DecodeError::Truncated)?;
        self.rest = rest;
        Ok(head)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.take_bytes(N)?.try_into().map_err(|_| DecodeError::Truncated)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Ends a message: every byte must have been read.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes)
        }
    }
}

/// How one field goes on the wire and comes off it. Most field types are their own codec;
/// [`Data`] says a byte slice is counted by a `u32` rather than a string's `u16`.
pub(crate) trait Codec<'a> {
    /// What the field holds once decoded.
    type Value;
    fn put(value: &Self::Value, out: &mut Vec<u8>) -> Result<(), EncodeError>;
    fn take(reader: &mut Reader<'a>) -> Result<Self::Value, DecodeError>;
    /// An arbitrary value drawn from the test's numbers and bytes (the round-trip properties).
    #[cfg(test)]
    fn sample(source: &mut Sample<'a>) -> Self::Value;
}

/// `name[1]`, `name[2]`, `name[4]`, `name[8]`: little-endian integers.
macro_rules! integer_codecs {
    ($($integer:ty),*) => {$(
        impl<'a> Codec<'a> for $integer {
            type Value = Self;
            fn put(value: &Self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
                out.extend_from_slice(&value.to_le_bytes());
                Ok(())
            }
            fn take(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
                reader.take_array().map(<$integer>::from_le_bytes)
            }
            #[cfg(test)]
            fn sample(source: &mut Sample<'a>) -> Self {
                source.number() as $integer
            }
        }
    )*};
}
integer_codecs!(u8, u16, u32, u64);

/// `name[s]`: `length[2]` then the bytes, no NUL. Names are bytes, as on Linux, not UTF-8.
impl<'a> Codec<'a> for &'a [u8] {
    type Value = Self;
    fn put(value: &Self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let length = u16::try_from(value.len()).map_err(|_| EncodeError::StringTooLong)?;
        u16::put(&length, out)?;
        out.extend_from_slice(value);
        Ok(())
    }
    fn take(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let length = u16::take(reader)?;
        reader.take_bytes(usize::from(length))
    }
    #[cfg(test)]
    fn sample(source: &mut Sample<'a>) -> Self {
        source.bytes(300)
    }
}

/// A string the value owns (a listing's names outlive the reply buffer).
impl<'a> Codec<'a> for Vec<u8> {
    type Value = Self;
    fn put(value: &Self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        <&[u8]>::put(&value.as_slice(), out)
    }
    fn take(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        <&[u8]>::take(reader).map(<[u8]>::to_vec)
    }
    #[cfg(test)]
    fn sample(source: &mut Sample<'a>) -> Self {
        source.bytes(300).to_vec()
    }
}

/// What a walk counts: Twalk's names and Rwalk's qids.
pub(crate) trait WalkElement {}

/// `count[2] count*(element)`, at most [`MAX_WALK_ELEMENTS`]: Twalk's names, Rwalk's qids.
impl<'a, T: Codec<'a, Value = T> + WalkElement> Codec<'a> for Vec<T> {
    type Value = Self;
    fn put(value: &Self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let count = u16::try_from(value.len()).ok().filter(|&count| usize::from(count) <= MAX_WALK_ELEMENTS);
        u16::put(&count.ok_or(EncodeError::TooManyElements)?, out)?;
        value.iter().try_for_each(|element| T::put(element, out))
    }
    fn take(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let count = usize::from(u16::take(reader)?);
        if count > MAX_WALK_ELEMENTS {
            return Err(DecodeError::TooManyElements);
        }
        (0..count).map(|_| T::take(reader)).collect()
    }
    #[cfg(test)]
    fn sample(source: &mut Sample<'a>) -> Self {
        let count = source.number() as usize % (MAX_WALK_ELEMENTS + 1);
        (0..count).map(|_| T::sample(source)).collect()
    }
}

/// `count[4] data[count]`: the bytes of Twrite, Rread and Rreaddir.
pub(crate) struct Data;

impl<'a> Codec<'a> for Data {
    type Value = &'a [u8];
    fn put(value: &&'a [u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let count = u32::try_from(value.len()).map_err(|_| EncodeError::MessageTooLong)?;
        u32::put(&count, out)?;
        out.extend_from_slice(value);
        Ok(())
    }
    fn take(reader: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
        let count = u32::take(reader)?;
        reader.take_bytes(usize::try_from(count).map_err(|_| DecodeError::Truncated)?)
    }
    #[cfg(test)]
    fn sample(source: &mut Sample<'a>) -> &'a [u8] {
        source.bytes(usize::MAX)
    }
}

/// The field type's own codec, or the one named after `as`.
macro_rules! codec_of {
    ($type:ty) => {
        $type
    };
    ($type:ty, $codec:ty) => {
        $codec
    };
}
pub(crate) use codec_of;

/// Declares a structure that travels as its fields in order, and its [`Codec`].
macro_rules! wire_struct {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$field_meta:meta])* pub $field:ident: $type:ty,)*
    }) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $type,)*
        }

        impl<'a> $crate::wire::codec::Codec<'a> for $name {
            type Value = Self;
            fn put(value: &Self, out: &mut alloc::vec::Vec<u8>) -> Result<(), $crate::wire::EncodeError> {
                $(<$type as $crate::wire::codec::Codec<'a>>::put(&value.$field, out)?;)*
                Ok(())
            }
            fn take(reader: &mut $crate::wire::codec::Reader<'a>) -> Result<Self, $crate::wire::DecodeError> {
                Ok(Self { $($field: <$type as $crate::wire::codec::Codec<'a>>::take(reader)?,)* })
            }
            #[cfg(test)]
            fn sample(source: &mut $crate::wire::codec::Sample<'a>) -> Self {
                Self { $($field: <$type as $crate::wire::codec::Codec<'a>>::sample(source),)* }
            }
        }
    };
}
pub(crate) use wire_struct;

/// Starts a message at the end of `out`, its size to be filled in by [`end_message`].
pub(crate) fn begin_message(out: &mut Vec<u8>, message_type: u8, tag: u16) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(message_type);
    out.extend_from_slice(&tag.to_le_bytes());
    start
}

/// Ends the message begun at `start`: writes its size, or on an error takes it back out.
pub(crate) fn end_message(out: &mut Vec<u8>, start: usize, fields: Result<(), EncodeError>) -> Result<(), EncodeError> {
    let size = fields.and_then(|()| u32::try_from(out.len() - start).map_err(|_| EncodeError::MessageTooLong));
    match (size, out.get_mut(start..start + 4)) {
        (Ok(size), Some(slot)) => {
            slot.copy_from_slice(&size.to_le_bytes());
            Ok(())
        }
        (size, _) => {
            out.truncate(start);
            size.and(Err(EncodeError::MessageTooLong))
        }
    }
}

/// Opens a message: its size field must be the length of `bytes`. Gives its type, its tag
/// and a reader at its first field.
pub(crate) fn open_message(bytes: &[u8]) -> Result<(u8, u16, Reader<'_>), DecodeError> {
    let mut reader = Reader::new(bytes);
    let size = u32::take(&mut reader)?;
    if usize::try_from(size) != Ok(bytes.len()) {
        return Err(DecodeError::SizeMismatch);
    }
    let message_type = u8::take(&mut reader)?;
    let tag = u16::take(&mut reader)?;
    Ok((message_type, tag, reader))
}

/// Where the round-trip properties draw arbitrary field values from: a list of numbers and
/// a pool of bytes that strings and data borrow from, both chosen by proptest.
#[cfg(test)]
pub(crate) struct Sample<'a> {
    numbers: &'a [u64],
    pool: &'a [u8],
    drawn: usize,
}

#[cfg(test)]
impl<'a> Sample<'a> {
    pub(crate) fn new(numbers: &'a [u64], pool: &'a [u8]) -> Self {
        Self { numbers, pool, drawn: 0 }
    }

    /// The next number, round the list again when it runs out.
    pub(crate) fn number(&mut self) -> u64 {
        let number = self.numbers.get(self.drawn % self.numbers.len().max(1)).copied().unwrap_or(0);
        self.drawn += 1;
        number.rotate_left(self.drawn as u32 / self.numbers.len().max(1) as u32)
    }

    /// A slice of the pool, at most `most` bytes long.
    pub(crate) fn bytes(&mut self, most: usize) -> &'a [u8] {
        let start = self.number() as usize % (self.pool.len() + 1);
        let length = self.number() as usize % ((self.pool.len() - start).min(most) + 1);
        &self.pool[start..start + length]
    }
}
