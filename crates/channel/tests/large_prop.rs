//! Property tests of large-message chunking and reassembly.
#![cfg(not(loom))]

use channel::{chunk_count, ChannelError, LargeMessageChunks, Message, Reassembler, FLAG_CHUNK, FLAG_FIRST, FLAG_LAST};
use proptest::prelude::*;

const MAX_LEN: usize = 70_000;

/// What `Reassembler::push` returns.
type PushResult = Result<Option<(u16, Vec<u8>)>, ChannelError>;

/// Feeds `messages` in order; returns each push result.
fn feed(reassembler: &mut Reassembler, messages: &[Message]) -> Vec<PushResult> {
    messages.iter().map(|message| reassembler.push(message)).collect()
}

fn chunks(kind: u16, id: u32, bytes: &[u8]) -> Vec<Message> {
    LargeMessageChunks::new(kind, id, bytes).unwrap().collect()
}

/// A corruption of a chunk sequence that a correct receiver must notice.
#[derive(Clone, Debug)]
enum Corruption {
    /// Remove one chunk that is not the last (a dropped last chunk is only
    /// noticed when the next message starts: see `Truncate`).
    Drop(prop::sample::Index),
    /// Deliver one chunk twice in a row.
    Duplicate(prop::sample::Index),
    /// Exchange two different chunks.
    Swap(prop::sample::Index, prop::sample::Index),
    /// Announce another total length in the first chunk.
    WrongTotal(u64),
    /// Change one data byte's chunk header: the message id of a later chunk.
    ForeignId(prop::sample::Index, u32),
    /// Change the kind of a later chunk.
    WrongKind(prop::sample::Index),
    /// Shorten one chunk's payload by some bytes.
    ShortChunk(prop::sample::Index, u8),
    /// Lengthen the last chunk's payload (when it has room).
    LongLastChunk(u8),
    /// Announce another chunk count in the first chunk.
    WrongCount(u32),
    /// Move bytes from the end of an earlier chunk to the last chunk, so the
    /// total still adds up but the chunking is not the canonical one.
    ShiftIntoLast(prop::sample::Index, u8),
}

fn corruption() -> impl Strategy<Value = Corruption> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Corruption::Drop),
        any::<prop::sample::Index>().prop_map(Corruption::Duplicate),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(|(a, b)| Corruption::Swap(a, b)),
        any::<u64>().prop_map(Corruption::WrongTotal),
        (any::<prop::sample::Index>(), any::<u32>()).prop_map(|(index, id)| Corruption::ForeignId(index, id)),
        any::<prop::sample::Index>().prop_map(Corruption::WrongKind),
        (any::<prop::sample::Index>(), 1..=56u8).prop_map(|(index, by)| Corruption::ShortChunk(index, by)),
        (1..=48u8).prop_map(Corruption::LongLastChunk),
        any::<u32>().prop_map(Corruption::WrongCount),
        (any::<prop::sample::Index>(), 1..=47u8).prop_map(|(index, by)| Corruption::ShiftIntoLast(index, by)),
    ]
}

/// Applies `corruption`; `None` when it does not apply to this sequence
/// (e.g. swapping in a one-chunk message).
fn corrupt(mut messages: Vec<Message>, corruption: &Corruption) -> Option<Vec<Message>> {
    let count = messages.len();
    match corruption {
        Corruption::Drop(index) => {
            if count < 2 {
                return None;
            }
            messages.remove(index.index(count - 1));
        }
        Corruption::Duplicate(index) => {
            if count < 2 {
                return None; // a repeated one-chunk message is two valid messages
            }
            let index = index.index(count);
            messages.insert(index, messages[index]);
        }
        Corruption::Swap(first, second) => {
            let (first, second) = (first.index(count), second.index(count));
            if first == second {
                return None;
            }
            messages.swap(first, second);
        }
        Corruption::WrongTotal(total) => {
            let actual = u64::from_le_bytes(messages[0].payload[8..16].try_into().unwrap());
            if *total == actual {
                return None;
            }
            messages[0].payload[8..16].copy_from_slice(&total.to_le_bytes());
        }
        Corruption::ForeignId(index, id) => {
            if count < 2 {
                return None;
            }
            let index = 1 + index.index(count - 1);
            if messages[index].payload[..4] == id.to_le_bytes() {
                return None;
            }
            messages[index].payload[..4].copy_from_slice(&id.to_le_bytes());
        }
        Corruption::WrongKind(index) => {
            if count < 2 {
                return None;
            }
            let index = 1 + index.index(count - 1);
            messages[index].kind ^= 0x100;
        }
        Corruption::ShortChunk(index, by) => {
            let index = index.index(count);
            let header = if index == 0 { 20 } else { 8 };
            let data = messages[index].len - header;
            if data == 0 {
                return None;
            }
            messages[index].len -= (*by).min(data);
        }
        Corruption::LongLastChunk(by) => {
            let last = messages.last_mut().unwrap();
            let room = 56 - last.len;
            if room == 0 {
                return None;
            }
            last.len += (*by).min(room);
        }
        Corruption::WrongCount(announced) => {
            if *announced as usize == count {
                return None;
            }
            messages[0].payload[16..20].copy_from_slice(&announced.to_le_bytes());
        }
        Corruption::ShiftIntoLast(index, by) => {
            if count < 2 {
                return None;
            }
            let index = index.index(count - 1);
            let room = 56 - messages[count - 1].len;
            let by = (*by).min(room);
            if by == 0 {
                return None;
            }
            let end = usize::from(messages[index].len);
            let moved: Vec<u8> = messages[index].payload[end - usize::from(by)..end].to_vec();
            messages[index].len -= by;
            let last = &mut messages[count - 1];
            let start = usize::from(last.len);
            last.payload[start..start + usize::from(by)].copy_from_slice(&moved);
            last.len += by;
        }
    }
    Some(messages)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_length_round_trips(len in 0..=MAX_LEN, seed in any::<u8>(), kind in 1..=u16::MAX, id in any::<u32>()) {
        let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        let messages = chunks(kind, id, &bytes);
        prop_assert_eq!(messages.len() as u64, chunk_count(len as u64));
        for (index, message) in messages.iter().enumerate() {
            prop_assert_eq!(message.validate(), Ok(()));
            prop_assert!(message.flags & FLAG_CHUNK != 0);
            prop_assert_eq!(message.flags & FLAG_FIRST != 0, index == 0);
            prop_assert_eq!(message.flags & FLAG_LAST != 0, index + 1 == messages.len());
        }
        let mut reassembler = Reassembler::new(MAX_LEN);
        let results = feed(&mut reassembler, &messages);
        let (last, rest) = results.split_last().unwrap();
        for result in rest {
            prop_assert_eq!(result, &Ok(None));
        }
        prop_assert_eq!(last, &Ok(Some((kind, bytes))));
        prop_assert!(!reassembler.is_collecting());
    }

    #[test]
    fn corruptions_are_rejected_and_the_next_message_still_works(
        len in 0..=4_000usize,
        corruption in corruption(),
        next_len in 0..=300usize,
    ) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let Some(corrupted) = corrupt(chunks(5, 77, &bytes), &corruption) else {
            return Ok(());
        };
        let mut reassembler = Reassembler::new(MAX_LEN);
        let results = feed(&mut reassembler, &corrupted);
        // Never a wrong message: whatever completes is the original.
        for result in &results {
            if let Ok(Some((kind, data))) = result {
                prop_assert_eq!(*kind, 5);
                prop_assert!(data == &bytes, "delivered a wrong message");
            }
        }
        // The damage is reported. (A duplicated last chunk arrives after a
        // correct completion and is then the reported error.)
        prop_assert!(results.iter().any(Result::is_err), "corruption {:?} not reported", corruption);
        // And the reassembler recovers: after flushing a possible partial
        // message with the error it causes, a fresh message goes through.
        let next: Vec<u8> = (0..next_len).map(|i| i as u8 ^ 0xa5).collect();
        let next_messages = chunks(6, 78, &next);
        if reassembler.is_collecting() {
            prop_assert_eq!(reassembler.push(&next_messages[0]), Err(ChannelError::ChunkGap));
        }
        let results = feed(&mut reassembler, &next_messages);
        prop_assert_eq!(results.last().unwrap(), &Ok(Some((6, next))));
    }

    #[test]
    fn truncated_message_never_completes_and_is_reported_by_the_next(
        len in 37..=4_000usize,
        keep in any::<prop::sample::Index>(),
    ) {
        let bytes = vec![0x11u8; len];
        let messages = chunks(5, 1, &bytes);
        let kept = &messages[..keep.index(messages.len() - 1) + 1];
        prop_assert!(kept.len() < messages.len());
        let mut reassembler = Reassembler::new(MAX_LEN);
        for result in feed(&mut reassembler, kept) {
            prop_assert_eq!(result, Ok(None));
        }
        prop_assert!(reassembler.is_collecting());
        let next = chunks(6, 2, b"next");
        prop_assert_eq!(reassembler.push(&next[0]), Err(ChannelError::ChunkGap));
        prop_assert_eq!(reassembler.push(&next[0]), Ok(Some((6, b"next".to_vec()))));
    }

    #[test]
    fn arbitrary_chunk_messages_never_panic(
        messages in prop::collection::vec(
            (any::<u16>(), any::<u8>(), any::<u8>(), prop::array::uniform32(any::<u8>())),
            0..40,
        ),
        max_len in 0..=10_000usize,
    ) {
        let mut reassembler = Reassembler::new(max_len);
        for (kind, flags, len, head) in messages {
            let mut payload = [0u8; 56];
            payload[..32].copy_from_slice(&head);
            let message = Message { kind, flags, len, payload };
            if let Ok(Some((_, data))) = reassembler.push(&message) {
                prop_assert!(data.len() <= max_len);
            }
        }
    }
}
