//! The format of the processes a restart keeps for the next kernel (`block::KeptProcesses`):
//! a stream of records, each a little-endian `u64` length then that many bytes, cut into a
//! chain of frames, each starting with a [`FrameHeader`]. The first record says how many
//! references the stopping kernel held at the file service for each handle the processes
//! name ([`encode_references`]); each further one is one process's image.
//!
//! The stopping kernel writes it, the next one reads it; the reader trusts nothing it finds
//! (a length past the end ends the stream, a frame's count is cut to its page).

/// Bytes of one chain frame (a page).
pub const FRAME_SIZE: usize = 4096;
/// Bytes of a chain frame before its stream bytes: the next frame's address and the count of
/// stream bytes in this one.
pub const FRAME_HEADER: usize = 16;
/// Stream bytes one chain frame holds.
pub const FRAME_ROOM: usize = FRAME_SIZE - FRAME_HEADER;

/// The head of a chain frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Physical address of the next frame of the chain; 0 for the last.
    pub next: u64,
    /// Stream bytes in this frame, at most [`FRAME_ROOM`].
    pub length: usize,
}

impl FrameHeader {
    /// The header's bytes.
    pub fn encode(self) -> [u8; FRAME_HEADER] {
        let mut bytes = [0u8; FRAME_HEADER];
        bytes[..8].copy_from_slice(&self.next.to_le_bytes());
        bytes[8..].copy_from_slice(&(self.length.min(FRAME_ROOM) as u64).to_le_bytes());
        bytes
    }

    /// The header at the start of `frame` (a frame's first bytes); the length is cut to
    /// [`FRAME_ROOM`] and to what `frame` holds after the header. `None` if `frame` is
    /// shorter than a header.
    pub fn decode(frame: &[u8]) -> Option<Self> {
        let word = |at: usize| u64::from_le_bytes(frame[at..at + 8].try_into().unwrap_or([0; 8]));
        if frame.len() < FRAME_HEADER {
            return None;
        }
        let room = (frame.len() - FRAME_HEADER).min(FRAME_ROOM);
        Some(Self { next: word(0), length: usize::try_from(word(8)).unwrap_or(usize::MAX).min(room) })
    }
}

/// A record's head in the stream: the image's length.
pub fn record_header(length: usize) -> [u8; 8] {
    (length as u64).to_le_bytes()
}

/// Bytes of the references record of `count` handles.
pub const fn references_size(count: usize) -> usize {
    8 + 16 * count
}

/// Writes the references record of `references` (handle id, references held) into `out`,
/// which is [`references_size`] of them long: the count, then the pairs, little-endian. `None`
/// when `out` has another length.
pub fn encode_references(references: &[(u64, u64)], out: &mut [u8]) -> Option<()> {
    if out.len() != references_size(references.len()) {
        return None;
    }
    out[..8].copy_from_slice(&(references.len() as u64).to_le_bytes());
    for (pair, &(id, count)) in out[8..].chunks_exact_mut(16).zip(references) {
        pair[..8].copy_from_slice(&id.to_le_bytes());
        pair[8..].copy_from_slice(&count.to_le_bytes());
    }
    Some(())
}

/// The (handle id, references held) pairs of a references record; a count larger than the
/// record gives the pairs it holds.
pub fn decode_references(record: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]));
    let count = record.get(..8).map_or(0, word);
    record
        .get(8..)
        .unwrap_or(&[])
        .chunks_exact(16)
        .take(usize::try_from(count).unwrap_or(usize::MAX))
        .map(move |pair| (word(&pair[..8]), word(&pair[8..])))
}

/// The records of a stream, in order; a record whose length runs past the end ends it.
pub fn records(stream: &[u8]) -> Records<'_> {
    Records { rest: stream }
}

/// Iterator of [`records`].
pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let head: [u8; 8] = self.rest.get(..8)?.try_into().ok()?;
        let length = usize::try_from(u64::from_le_bytes(head)).ok()?;
        let end = length.checked_add(8)?;
        let Some(record) = self.rest.get(8..end) else {
            self.rest = &[];
            return None;
        };
        self.rest = &self.rest[end..];
        Some(record)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn records_round_trip_and_a_short_one_ends_the_stream() {
        let mut stream = std::vec::Vec::new();
        for image in [&b"first"[..], b"", b"third image"] {
            stream.extend_from_slice(&record_header(image.len()));
            stream.extend_from_slice(image);
        }
        let all: std::vec::Vec<&[u8]> = records(&stream).collect();
        assert_eq!(all, [&b"first"[..], b"", b"third image"]);
        // Cut inside the last record: the two before it, then nothing.
        assert_eq!(records(&stream[..stream.len() - 1]).count(), 2);
        assert_eq!(records(&[0xFF; 8]).count(), 0, "a length past the end");
    }

    #[test]
    fn a_frame_header_is_cut_to_its_page() {
        let header = FrameHeader { next: 0x1234_5000, length: 100 };
        let mut frame = [0u8; FRAME_SIZE];
        frame[..FRAME_HEADER].copy_from_slice(&header.encode());
        assert_eq!(FrameHeader::decode(&frame), Some(header));
        frame[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(FrameHeader::decode(&frame).map(|h| h.length), Some(FRAME_ROOM));
        assert_eq!(FrameHeader::decode(&frame[..20]).map(|h| h.length), Some(4));
        assert_eq!(FrameHeader::decode(&frame[..15]), None);
    }

    #[test]
    fn the_references_round_trip_and_a_short_record_gives_what_it_holds() {
        let references = [(7u64, 2u64), (0x1_0000_0001, 1)];
        let mut record = [0u8; references_size(2)];
        assert_eq!(encode_references(&references, &mut record), Some(()));
        let back: std::vec::Vec<(u64, u64)> = decode_references(&record).collect();
        assert_eq!(back, references);
        assert_eq!(decode_references(&record[..24]).count(), 1, "the count says 2, one pair is there");
        assert_eq!(decode_references(&[]).count(), 0);
        assert_eq!(encode_references(&references, &mut [0u8; 9]), None);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(stream in proptest::collection::vec(any::<u8>(), 0..256)) {
            let total: usize = records(&stream).map(|record| record.len() + 8).sum();
            prop_assert!(total <= stream.len());
            prop_assert!(decode_references(&stream).count() * 16 + 8 <= stream.len().max(8));
            if let Some(header) = FrameHeader::decode(&stream) {
                prop_assert!(header.length <= stream.len() - FRAME_HEADER);
            }
        }
    }
}
