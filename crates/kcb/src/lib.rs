//! The layout contract between kernel images and tools: KCB version and image note.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]

pub mod block;
pub mod kept;
mod sync;

/// The KCB and shared-region layout this source tree defines. Bump it with every change of
/// either layout: a kernel refuses a KCB of another version, a boot driver an image of one.
pub const VERSION: u32 = 11;

/// The note's owner name, NUL-terminated as ELF notes store it.
pub const NOTE_NAME: &[u8; 5] = b"Reef\0";
/// The note's type: "REEF" read as a little-endian number.
pub const NOTE_TYPE: u32 = u32::from_le_bytes(*b"REEF");
/// The version of [`ImageNote`]'s own layout.
pub const NOTE_LAYOUT: u32 = 2;
/// Bytes of the note's description.
pub const NOTE_SIZE: usize = 112;
/// Bytes of the image's name, at the description's end: UTF-8, NUL-padded.
pub const NAME_SIZE: usize = 16;
/// Where the name sits inside the description.
pub const NAME_OFFSET: usize = NOTE_SIZE - NAME_SIZE;
/// Where the checksum sits inside the description.
pub const CHECKSUM_OFFSET: usize = 8;

/// The description of an image's `.note.reef`: little-endian, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ImageNote {
    /// [`VERSION`] of the source the image was built from.
    pub kcb_version: u32,
    /// [`NOTE_LAYOUT`].
    pub note_layout: u32,
    /// [`image_checksum`] of the loadable bytes, the checksum itself read as zero; 0 until
    /// the build tool wrote it.
    pub checksum: u64,
    /// The address every new instance of the image starts at, with its KCB's address.
    pub instance_entry: u64,
    /// Text: `[image_start, text_end)`, read and execute.
    pub image_start: u64,
    pub text_end: u64,
    /// Read-only data: `[text_end, shared_end)`.
    pub shared_end: u64,
    /// `.data` then `.bss`: `[data_start, data_end)`, private to each instance.
    pub data_start: u64,
    pub bss_start: u64,
    pub data_end: u64,
    /// The pristine `.data` template: `[pristine_start, image_end)`.
    pub pristine_start: u64,
    pub image_end: u64,
    /// What the image can be: [`APPLICATION_ONLY`] or 0.
    pub flags: u64,
    /// The image's name (`full`, `rt`, `full-v2`…), NUL-padded: zeros until the build tool
    /// wrote it after linking, so one build gives several named images.
    pub name: [u8; NAME_SIZE],
}

/// [`ImageNote::flags`]: the image runs no timesharing (`rt`: an application core, or a kernel
/// core that keeps serving its syspages). A boot driver restarting a timesharing core with it
/// hands the core's processes to other TCs instead of keeping them for the new kernel.
pub const APPLICATION_ONLY: u64 = 1;

/// Why a note does not describe a loadable image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteError {
    /// Shorter than [`NOTE_SIZE`].
    Truncated,
    /// A note layout this code does not know.
    UnknownLayout(u32),
    /// The parts are not in order, not page-aligned, or the entry is not in the text.
    BadLayout,
}

const PAGE: u64 = 4096;

impl ImageNote {
    /// Decodes a note description and checks that its parts are ordered, page-aligned where
    /// the linker script aligns them, and that the entry lies in the text.
    pub fn decode(bytes: &[u8]) -> Result<Self, NoteError> {
        if bytes.len() < NOTE_SIZE {
            return Err(NoteError::Truncated);
        }
        let word = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        let quad = |at: usize| u64::from(word(at)) | u64::from(word(at + 4)) << 32;
        let note = Self {
            kcb_version: word(0),
            note_layout: word(4),
            checksum: quad(8),
            instance_entry: quad(16),
            image_start: quad(24),
            text_end: quad(32),
            shared_end: quad(40),
            data_start: quad(48),
            bss_start: quad(56),
            data_end: quad(64),
            pristine_start: quad(72),
            image_end: quad(80),
            flags: quad(88),
            name: bytes[NAME_OFFSET..NOTE_SIZE].try_into().unwrap_or_default(),
        };
        if note.note_layout != NOTE_LAYOUT {
            return Err(NoteError::UnknownLayout(note.note_layout));
        }
        let ordered = note.bounds().windows(2).all(|pair| pair[0] <= pair[1]);
        let aligned =
            [note.image_start, note.text_end, note.shared_end, note.data_start, note.data_end, note.image_end]
                .iter()
                .all(|address| address % PAGE == 0);
        let template_fits = ordered && note.bss_start - note.data_start <= note.image_end - note.pristine_start;
        let entry_in_text = (note.image_start..note.text_end).contains(&note.instance_entry);
        if !(ordered && aligned && template_fits && entry_in_text && note.image_start < note.image_end) {
            return Err(NoteError::BadLayout);
        }
        Ok(note)
    }

    /// The parts' bounds in address order: text, rodata, `.data`, `.bss`, pristine template.
    fn bounds(&self) -> [u64; 8] {
        [
            self.image_start,
            self.text_end,
            self.shared_end,
            self.data_start,
            self.bss_start,
            self.data_end,
            self.pristine_start,
            self.image_end,
        ]
    }

    /// The description's bytes, as [`Self::decode`] reads them.
    pub fn encode(&self) -> [u8; NOTE_SIZE] {
        let mut bytes = [0u8; NOTE_SIZE];
        bytes[0..4].copy_from_slice(&self.kcb_version.to_le_bytes());
        bytes[4..8].copy_from_slice(&self.note_layout.to_le_bytes());
        let quads = [self.checksum, self.instance_entry].into_iter().chain(self.bounds()).chain([self.flags]);
        for (i, quad) in quads.enumerate() {
            bytes[8 + 8 * i..16 + 8 * i].copy_from_slice(&quad.to_le_bytes());
        }
        bytes[NAME_OFFSET..].copy_from_slice(&self.name);
        bytes
    }

    /// The name as text: up to its first NUL; `None` when it is not UTF-8.
    pub fn name_text(&self) -> Option<&str> {
        name_text(&self.name)
    }

    /// `name` as this note's name; `None` (nothing changed) when it does not fit or is empty.
    pub fn set_name(&mut self, name: &str) -> Option<()> {
        if name.is_empty() || name.len() > NAME_SIZE || name.contains('\0') {
            return None;
        }
        self.name = [0; NAME_SIZE];
        self.name[..name.len()].copy_from_slice(name.as_bytes());
        Some(())
    }

    /// Bytes from the image's start to its end: what a boot driver copies for a new instance.
    pub fn span(&self) -> u64 {
        self.image_end - self.image_start
    }
}

/// A NUL-padded name as text, up to its first NUL; `None` when it is not UTF-8.
pub fn name_text(bytes: &[u8]) -> Option<&str> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    core::str::from_utf8(&bytes[..end]).ok()
}

/// The checksum of an image's loadable bytes: FNV-1a over 8-byte little-endian words (a
/// short tail zero-padded) of each of `parts` in turn, the bytes of `hole` (file offsets, the
/// checksum's own slot) read as zero. `parts` are `(file offset, length)` of the loadable
/// segments, in program-header order. A part beyond `image` is an error (`None`).
pub fn image_checksum(image: &[u8], parts: &[(usize, usize)], hole: core::ops::Range<usize>) -> Option<u64> {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &(offset, length) in parts {
        let bytes = image.get(offset..offset.checked_add(length)?)?;
        for (index, chunk) in bytes.chunks(8).enumerate() {
            let start = offset + index * 8;
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            // Only the one or two words that overlap the hole need a byte-by-byte look.
            if start < hole.end && hole.start < start + 8 {
                for (i, byte) in word.iter_mut().enumerate() {
                    if hole.contains(&(start + i)) {
                        *byte = 0;
                    }
                }
            }
            hash = (hash ^ u64::from_le_bytes(word)).wrapping_mul(PRIME);
        }
    }
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ImageNote {
        let base = 0xffff_ffff_8020_0000;
        ImageNote {
            kcb_version: VERSION,
            note_layout: NOTE_LAYOUT,
            checksum: 7,
            instance_entry: base + 0x100,
            image_start: base,
            text_end: base + 0x10_000,
            shared_end: base + 0x20_000,
            data_start: base + 0x20_000,
            bss_start: base + 0x21_030,
            data_end: base + 0x23_000,
            pristine_start: base + 0x23_000,
            image_end: base + 0x25_000,
            flags: APPLICATION_ONLY,
            name: *b"rt\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        }
    }

    #[test]
    fn a_note_round_trips() {
        let note = sample();
        assert_eq!(ImageNote::decode(&note.encode()), Ok(note));
        assert_eq!(note.span(), 0x25_000);
        assert_eq!(note.name_text(), Some("rt"));
        let mut renamed = note;
        assert_eq!(renamed.set_name("full-v2"), Some(()));
        assert_eq!(ImageNote::decode(&renamed.encode()).map(|n| n.name), Ok(renamed.name));
        assert_eq!(renamed.name_text(), Some("full-v2"));
        assert_eq!(renamed.set_name("a-name-longer-than-16"), None);
        assert_eq!(renamed.set_name(""), None);
        assert_eq!(renamed.name_text(), Some("full-v2"));
    }

    #[test]
    fn bad_notes_are_refused() {
        assert_eq!(ImageNote::decode(&sample().encode()[..NOTE_SIZE - 1]), Err(NoteError::Truncated));
        let mut note = sample();
        note.note_layout = 9;
        assert_eq!(ImageNote::decode(&note.encode()), Err(NoteError::UnknownLayout(9)));
        let mut note = sample();
        note.instance_entry = note.text_end;
        assert_eq!(ImageNote::decode(&note.encode()), Err(NoteError::BadLayout));
        let mut note = sample();
        note.text_end += 1;
        assert_eq!(ImageNote::decode(&note.encode()), Err(NoteError::BadLayout));
        let mut note = sample();
        note.image_end = note.pristine_start;
        assert_eq!(ImageNote::decode(&note.encode()), Err(NoteError::BadLayout));
    }

    #[test]
    fn the_checksum_sees_every_byte_but_its_own_slot() {
        let image: [u8; 64] = core::array::from_fn(|i| i as u8);
        let parts = [(0, 20), (30, 21)];
        let sum = image_checksum(&image, &parts, 8..16).unwrap();
        let mut slot_changed = image;
        slot_changed[9] ^= 0xff;
        assert_eq!(image_checksum(&slot_changed, &parts, 8..16), Some(sum));
        for at in [0, 19, 30, 50] {
            let mut flipped = image;
            flipped[at] ^= 1;
            assert_ne!(image_checksum(&flipped, &parts, 8..16), Some(sum), "byte {at}");
        }
        let mut outside = image;
        outside[25] ^= 1;
        assert_eq!(image_checksum(&outside, &parts, 8..16), Some(sum));
        assert_eq!(image_checksum(&image, &[(60, 5)], 0..0), None);
    }

    proptest::proptest! {
        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120)) {
            let _ = ImageNote::decode(&bytes);
        }
    }
}
