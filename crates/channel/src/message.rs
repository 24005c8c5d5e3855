//! The 64-byte message: owned copy, header checks, and the shared slot.

use crate::sync::{AtomicU32, UnsafeCell};
use crate::ChannelError;

/// Payload bytes in one message: a cache line less the 8-byte header.
pub const PAYLOAD_CAPACITY: usize = 56;

/// Flag bit: the message is one chunk of a large message.
pub const FLAG_CHUNK: u8 = 1 << 0;
/// Flag bit: the chunk is the first of its large message (needs [`FLAG_CHUNK`]).
pub const FLAG_FIRST: u8 = 1 << 1;
/// Flag bit: the chunk is the last of its large message (needs [`FLAG_CHUNK`]).
pub const FLAG_LAST: u8 = 1 << 2;
/// The flag bits this crate owns; the other five bits are left to the
/// message's user (the `abi` crate) and are not checked here.
pub const CHANNEL_FLAGS: u8 = FLAG_CHUNK | FLAG_FIRST | FLAG_LAST;

/// Kind 0 is reserved: it marks padding that fills an abandoned
/// [`Reservation`](crate::Reservation) and is never delivered, and it is what an
/// unwritten (zeroed) slot holds, so [`Message::validate`] rejects it.
pub const KIND_PADDING: u16 = 0;

/// An owned copy of one message, taken out of (or to be put into) a slot.
///
/// The layout is the slot's bytes 4..64: `kind`, `flags`, `len`, `payload`.
/// Fields are public because a received copy may be malformed; call
/// [`Message::validate`] before trusting `len` or the flags.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Message {
    /// Message type; the `abi` crate assigns them. 0 is reserved (padding).
    pub kind: u16,
    /// [`CHANNEL_FLAGS`] bits plus five bits free for the user.
    pub flags: u8,
    /// Number of valid payload bytes, at most [`PAYLOAD_CAPACITY`].
    pub len: u8,
    /// The payload; bytes past `len` are zero when sent by this crate but
    /// must not be relied on by a receiver.
    pub payload: [u8; PAYLOAD_CAPACITY],
}

#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::size_of::<Message>() == 60);
    assert!(core::mem::size_of::<Slot>() == 64);
    assert!(core::mem::align_of::<Slot>() == 64);
    assert!(core::mem::size_of::<CacheLine<crate::sync::AtomicU64>>() == 64);
};

impl Message {
    /// The all-zero message: what a fresh slot holds.
    pub(crate) const ZEROED: Message = Message { kind: 0, flags: 0, len: 0, payload: [0; PAYLOAD_CAPACITY] };

    /// The filler written into reserved slots that were never used.
    pub(crate) const PADDING: Message = Message::ZEROED;

    /// A message of `kind` carrying `payload` (flags 0).
    ///
    /// Fails with [`ChannelError::BadKind`] for kind 0 and
    /// [`ChannelError::TooLong`] for a payload over 56 bytes.
    pub fn new(kind: u16, payload: &[u8]) -> Result<Message, ChannelError> {
        Self::with_flags(kind, 0, payload)
    }

    /// A message with user flag bits set. The [`CHANNEL_FLAGS`] bits are the
    /// crate's own and are refused with [`ChannelError::BadFlags`].
    pub fn with_flags(kind: u16, flags: u8, payload: &[u8]) -> Result<Message, ChannelError> {
        if flags & CHANNEL_FLAGS != 0 {
            return Err(ChannelError::BadFlags);
        }
        Self::build(kind, flags, payload)
    }

    /// Builds any message, channel flags included (used for chunks).
    pub(crate) fn build(kind: u16, flags: u8, payload: &[u8]) -> Result<Message, ChannelError> {
        if kind == KIND_PADDING {
            return Err(ChannelError::BadKind);
        }
        if payload.len() > PAYLOAD_CAPACITY {
            return Err(ChannelError::TooLong);
        }
        let mut message = Message { kind, flags, len: payload.len() as u8, payload: [0; PAYLOAD_CAPACITY] };
        message.payload[..payload.len()].copy_from_slice(payload);
        Ok(message)
    }

    /// The valid payload bytes, `payload[..len]`. An out-of-range `len` is
    /// clamped to 56 here; [`Message::validate`] is what reports it.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let len = usize::from(self.len).min(PAYLOAD_CAPACITY);
        &self.payload[..len]
    }

    /// Whether [`FLAG_CHUNK`] is set: the message belongs to a large message
    /// and goes to a [`Reassembler`](crate::Reassembler).
    #[inline]
    pub fn is_chunk(&self) -> bool {
        self.flags & FLAG_CHUNK != 0
    }

    /// Checks the header of a received copy: `len` at most 56, kind not 0,
    /// FIRST/LAST only together with CHUNK.
    #[inline]
    pub fn validate(&self) -> Result<(), ChannelError> {
        if usize::from(self.len) > PAYLOAD_CAPACITY {
            return Err(ChannelError::BadLength);
        }
        if self.kind == KIND_PADDING {
            return Err(ChannelError::BadKind);
        }
        if self.flags & (FLAG_FIRST | FLAG_LAST) != 0 && self.flags & FLAG_CHUNK == 0 {
            return Err(ChannelError::BadFlags);
        }
        Ok(())
    }
}

/// One message slot in shared memory: exactly one cache line.
///
/// Bytes 0..4 are the sequence word, whose meaning each ring defines (it
/// encodes the lap, so all-zero means "empty, lap 0"); bytes 4..64 are the
/// [`Message`]. The message bytes are plain memory: only the side that owns
/// the slot (as the sequence word says) touches them.
#[repr(C, align(64))]
pub(crate) struct Slot {
    pub(crate) sequence: AtomicU32,
    message: UnsafeCell<Message>,
}

// SAFETY: the message cell is only accessed through `Slot::write` and
// `Slot::read`, whose contracts require the caller to own the slot through the
// ring protocol (writes exclusive, reads concurrent only with other reads);
// the sequence word is atomic.
unsafe impl Sync for Slot {}

impl Slot {
    const_unless_loom! {
        pub(crate) fn new() -> Slot {
            Slot {
                sequence: AtomicU32::new(0),
                message: UnsafeCell::new(Message::ZEROED),
            }
        }
    }

    /// Copies `message` into the slot with plain stores.
    ///
    /// # Safety
    ///
    /// The caller owns the slot for writing: by the ring protocol no other
    /// core reads or writes the message bytes until the caller publishes
    /// them with a Release store to the sequence word.
    #[inline]
    pub(crate) unsafe fn write(&self, message: &Message) {
        self.message.with_mut(|pointer| {
            // SAFETY: the caller guarantees exclusive access (see above);
            // the pointer comes from the cell, so it is aligned and valid.
            unsafe { pointer.write(*message) }
        })
    }

    /// Copies the whole message out with plain loads (read once, then
    /// validated by the caller on its private copy).
    ///
    /// # Safety
    ///
    /// The caller has seen, with an Acquire load of the sequence word, that
    /// the message is published for it, and no one may write the slot until
    /// the caller releases it.
    #[inline]
    pub(crate) unsafe fn read(&self) -> Message {
        self.message.with(|pointer| {
            // SAFETY: the caller guarantees no concurrent writer (see above);
            // the pointer comes from the cell, so it is aligned and valid, and
            // every bit pattern is a valid `Message`.
            unsafe { pointer.read() }
        })
    }
}

/// A value alone on its own 64-byte cache line, so that a counter written by
/// one core does not share a line with data written by another.
#[repr(C, align(64))]
pub(crate) struct CacheLine<T>(pub(crate) T);

impl<T> core::ops::Deref for CacheLine<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// The lap of a ticket on a ring of `capacity` slots: `ticket / capacity`,
/// by shift since `capacity` is a power of two. Truncated to the 32-bit
/// sequence word; sequence words are only compared for equality or by
/// wrapping distance, so the wrap after 2^31 laps is harmless.
#[inline(always)]
pub(crate) fn lap(ticket: u64, capacity: usize) -> u32 {
    (ticket >> capacity.trailing_zeros()) as u32
}

/// The slot index of a ticket: `ticket % capacity`, by mask.
#[inline(always)]
pub(crate) fn slot_index(ticket: u64, capacity: usize) -> usize {
    (ticket as usize) & (capacity - 1)
}

/// Ring structures whose all-zero bytes are a valid, empty, initialised
/// instance.
///
/// # Safety
///
/// An implementer must consist only of atomics, `UnsafeCell<Message>`
/// and arrays/`repr(C)` structs of those, with every protocol state defined
/// so that zero means empty.
#[cfg(not(loom))]
pub(crate) unsafe trait ZeroIsEmpty: Sized {}

/// Allocates a zeroed `T` on the heap: the host-side way to make a ring, and
/// it exercises the same all-zero start the kernel relies on.
#[cfg(not(loom))]
pub(crate) fn boxed_zeroed<T: ZeroIsEmpty>() -> alloc::boxed::Box<T> {
    let layout = core::alloc::Layout::new::<T>();
    assert!(layout.size() != 0);
    // SAFETY: the layout has a non-zero size (asserted above).
    let pointer = unsafe { alloc::alloc::alloc_zeroed(layout) }.cast::<T>();
    if pointer.is_null() {
        alloc::alloc::handle_alloc_error(layout);
    }
    // SAFETY: (1) the pointer was just allocated by the global allocator with
    // `T`'s layout and is owned by no one else; (2) all-zero bytes are a valid
    // `T` by the `ZeroIsEmpty` contract.
    unsafe { alloc::boxed::Box::from_raw(pointer) }
}

/// Reinterprets zeroed (or previously initialised) shared memory as a `T`.
///
/// # Safety
///
/// See the public `from_zeroed` constructors: `pointer` is non-null, aligned
/// to `align_of::<T>()`, valid for reads and writes of `size_of::<T>()` bytes
/// for `'a`, holds all-zero bytes or a `T` used only through this crate, and
/// for `'a` nobody writes it except through the returned reference.
#[cfg(not(loom))]
pub(crate) unsafe fn shared_from_zeroed<'a, T: ZeroIsEmpty>(pointer: *mut T) -> &'a T {
    debug_assert!(!pointer.is_null() && pointer.is_aligned());
    // SAFETY: the caller upholds the conditions above; zero bytes are a valid
    // `T` by `ZeroIsEmpty`, and all later mutation goes through atomics or
    // `UnsafeCell`, so a shared reference is sound.
    unsafe { &*pointer }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_kind_and_length() {
        assert_eq!(Message::new(0, b"x"), Err(ChannelError::BadKind));
        assert_eq!(Message::new(1, &[7; 57]), Err(ChannelError::TooLong));
        let message = Message::new(3, &[7; 56]).unwrap();
        assert_eq!(message.payload(), &[7; 56][..]);
        assert_eq!(message.len, 56);
        assert_eq!(Message::new(3, b"").unwrap().payload(), b"");
        assert_eq!(Message::with_flags(3, FLAG_CHUNK, b""), Err(ChannelError::BadFlags));
        assert_eq!(Message::with_flags(3, 0x80, b"ab").unwrap().flags, 0x80);
    }

    #[test]
    fn validate_rejects_malformed_headers() {
        let good = Message::new(9, b"hello").unwrap();
        assert_eq!(good.validate(), Ok(()));
        let long = Message { len: 57, ..good };
        assert_eq!(long.validate(), Err(ChannelError::BadLength));
        assert_eq!(long.payload().len(), 56);
        assert_eq!(Message { kind: 0, ..good }.validate(), Err(ChannelError::BadKind));
        for flags in [FLAG_FIRST, FLAG_LAST, FLAG_FIRST | FLAG_LAST] {
            assert_eq!(Message { flags, ..good }.validate(), Err(ChannelError::BadFlags));
            let chunk = Message { flags: flags | FLAG_CHUNK, ..good };
            assert_eq!(chunk.validate(), Ok(()));
            assert!(chunk.is_chunk());
        }
        assert_eq!(Message { flags: 0xf8, ..good }.validate(), Ok(()));
    }

    #[test]
    fn ring_sizes_match_the_documented_layout() {
        use core::mem::{align_of, size_of};
        assert_eq!(size_of::<crate::Urpc<8>>(), (8 + 2) * 64);
        assert_eq!(size_of::<crate::MpscQueue<256, 16>>(), (256 + 2 + 16) * 64);
        assert_eq!(size_of::<crate::MpscQueue<4, 1>>(), (4 + 2 + 1) * 64);
        assert_eq!(size_of::<crate::Multicast<16, 64>>(), (2 + 64 + 2 * 16) * 64);
        assert_eq!(size_of::<crate::Multicast<4, 3>>(), (2 + 3 + 2 * 4) * 64);
        assert_eq!(align_of::<crate::Urpc<8>>(), 64);
        assert_eq!(align_of::<crate::MpscQueue<2, 3>>(), 64);
        assert_eq!(align_of::<crate::Multicast<2, 1>>(), 64);
    }

    #[test]
    fn ring_arithmetic_uses_masks() {
        assert_eq!(lap(0, 8), 0);
        assert_eq!(lap(7, 8), 0);
        assert_eq!(lap(8, 8), 1);
        assert_eq!(lap(17, 8), 2);
        assert_eq!(slot_index(17, 8), 1);
        assert_eq!(slot_index(u64::MAX, 1), 0);
    }
}
