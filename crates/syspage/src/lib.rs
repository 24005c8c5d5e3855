//! The syspage: a page of system-call entries shared by a process and a kernel core (Memsc).
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[macro_use]
mod sync;

mod page;
mod ring;
mod submitter;

pub use page::{status, Entry, Header, Page, ARGUMENTS, ENTRIES, ENTRY_SIZE, PAGE_SIZE};
pub use ring::{complete, Head, Request, Ring};
pub use submitter::{Full, Submitter};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn header_bits_are_where_the_docs_say() {
        let header = Header { status: status::DONE, sequence: 0xAB_CDEF, number: 0x1234_5678 };
        assert_eq!(header.pack(), 0x1234_5678_ABCD_EF02);
        assert_eq!(Header::unpack(header.pack()), header);
        let long = Header { status: status::SUBMITTED, sequence: 0x1FF_FFFF, number: 1 };
        assert_eq!(Header::unpack(long.pack()).sequence, 0xFF_FFFF, "24 bits kept");
        assert_eq!(Header::unpack(0), Header { status: status::FREE, sequence: 0, number: 0 });
    }

    #[test]
    fn the_ring_fills_wraps_and_reports_full() {
        let page = Page::new();
        let mut submitter = Submitter::new();
        let mut ring = Ring::new();
        for call in 0..ENTRIES {
            assert_eq!(submitter.add(&page, call as u32, [call as u64; 6]), Ok(call));
        }
        assert_eq!(submitter.add(&page, 0, [0; 6]), Err(Full));
        assert_eq!(submitter.pending(), ENTRIES);
        assert_eq!(submitter.oldest_pending(), Some(0));
        // Entry 0 served and collected: one free entry, where the ring goes on.
        let request = ring.take(&page).unwrap();
        assert_eq!((request.index, request.number, request.sequence, request.arguments), (0, 0, 0, [0; 6]));
        assert!(!Submitter::is_done(&page, 0));
        assert_eq!(submitter.take_value(&page, 0), None, "not done yet");
        assert!(complete(&page, &request, -38));
        assert!(!complete(&page, &request, 5), "completed once");
        assert_eq!(submitter.take_value(&page, 0), Some(-38));
        assert_eq!(submitter.add(&page, 99, [9; 6]), Ok(0));
        assert_eq!(submitter.add(&page, 99, [9; 6]), Err(Full), "entry 1 is still outstanding");
        // The rest in order, then the wrapped call with the next sequence.
        for call in 1..ENTRIES {
            let request = ring.take(&page).unwrap();
            assert_eq!((request.index, request.number), (call, call as u32));
            assert!(complete(&page, &request, call as i64));
        }
        let wrapped = ring.take(&page).unwrap();
        assert_eq!((wrapped.index, wrapped.number, wrapped.sequence), (0, 99, ENTRIES as u32));
        assert_eq!(ring.take(&page), None);
        assert_eq!(submitter.oldest_pending(), Some(1));
        assert!(complete(&page, &wrapped, 7));
        for index in 1..ENTRIES {
            assert_eq!(submitter.take_value(&page, index), Some(index as i64));
        }
        assert_eq!(submitter.take_value(&page, 0), Some(7));
        assert_eq!((submitter.pending(), page.nr_in_use()), (0, 0));
    }

    #[test]
    fn a_rewritten_entry_is_not_completed() {
        let page = Page::new();
        let mut submitter = Submitter::new();
        let mut ring = Ring::new();
        submitter.add(&page, 39, [1, 2, 3, 4, 5, 6]).unwrap();
        let request = ring.take(&page).unwrap();
        assert_eq!(request.arguments, [1, 2, 3, 4, 5, 6]);
        // The process writes another number into the entry after the kernel took it.
        let other = Header { status: status::SUBMITTED, sequence: 0, number: 40 }.pack();
        page.entries[0].header.store(other, core::sync::atomic::Ordering::Relaxed);
        assert!(!complete(&page, &request, 1));
        assert_eq!(page.entries[0].header.load(core::sync::atomic::Ordering::Relaxed), other, "left as it was");
        assert_eq!(page.entries[0].value.load(core::sync::atomic::Ordering::Relaxed), 0, "no value written");
        // A request from nowhere (index out of range) is taken modulo the ring, never a panic.
        let stray = Request { index: usize::MAX, ..request };
        assert!(!complete(&page, &stray, 1));
    }

    #[test]
    fn a_taken_entry_is_not_taken_again_when_the_head_wraps() {
        // The kernel core takes a full ring and completes none yet (the calls went to the
        // process's home): coming round to entry 0 again, it must find nothing to take.
        let page = Page::new();
        let mut submitter = Submitter::new();
        let mut ring = Ring::new();
        for call in 0..ENTRIES {
            submitter.add(&page, call as u32, [0; 6]).unwrap();
        }
        let mut batch = [Request::default(); ENTRIES + 8];
        assert_eq!(ring.take_batch(&page, &mut batch), ENTRIES, "one full ring, not more");
        assert_eq!(ring.head(), 0);
        assert!(!ring.is_pending(&page));
        assert_eq!(ring.take(&page), None);
        assert_eq!(page.entries[0].header().status, status::TAKEN);
        assert!(complete(&page, &batch[0], 5));
        assert_eq!(submitter.take_value(&page, 0), Some(5));
        assert_eq!(submitter.add(&page, 7, [0; 6]), Ok(0));
        assert_eq!(ring.take(&page).map(|request| request.number), Some(7), "the new call, once");
        assert_eq!(ring.take(&page), None, "entry 1 is still taken");
    }

    #[test]
    fn a_header_rewritten_during_the_copy_is_not_claimed() {
        // The claim compares the whole header word it read: a submitted header of another
        // call stays as the process wrote it, and is taken (once) on a later look.
        let page = Page::new();
        let mut ring = Ring::new();
        let first = Header { status: status::SUBMITTED, sequence: 4, number: 1 }.pack();
        page.entries[0].header.store(first, core::sync::atomic::Ordering::Relaxed);
        let request = ring.take(&page).unwrap();
        assert_eq!((request.sequence, request.number), (4, 1));
        assert_eq!(
            Header::unpack(page.entries[0].header.load(core::sync::atomic::Ordering::Relaxed)).status,
            status::TAKEN
        );
        assert!(!complete(&Page::new(), &request, 1), "a free entry is not completed");
    }

    #[test]
    fn a_call_answered_in_place_goes_straight_to_done() {
        let page = Page::new();
        let mut submitter = Submitter::new();
        let mut ring = Ring::new();
        submitter.add(&page, 110, [1; 6]).unwrap();
        submitter.add(&page, 0, [2; 6]).unwrap();
        let answer = |number: u32| (number == 110).then_some(7);
        // Entry 0: answered, no claim, and the head moves on.
        assert_eq!(ring.answer_or_take(&page, answer), Head::Answered);
        assert_eq!(page.entries[0].header().status, status::DONE);
        assert_eq!(ring.head(), 1);
        // Entry 1: no answer here, so it is taken as `take` would.
        let Head::Taken(request) = ring.answer_or_take(&page, answer) else { panic!("entry 1 is taken") };
        assert_eq!((request.index, request.number, request.arguments), (1, 0, [2; 6]));
        assert_eq!(page.entries[1].header().status, status::TAKEN);
        assert_eq!(ring.answer_or_take(&page, answer), Head::Empty);
        assert_eq!(submitter.take_value(&page, 0), Some(7));
        assert!(complete(&page, &request, -9));
        assert_eq!(submitter.take_value(&page, 1), Some(-9));
        assert_eq!(page.nr_in_use(), 0);
    }

    #[test]
    fn a_header_rewritten_during_an_answer_is_left_as_written() {
        // The process rewrites the header between the look and the completion: the
        // completion fails, the head stays, and the next look sees the new call.
        let page = Page::new();
        let mut ring = Ring::new();
        let first = Header { status: status::SUBMITTED, sequence: 0, number: 110 }.pack();
        let second = Header { status: status::SUBMITTED, sequence: 1, number: 39 }.pack();
        page.entries[0].header.store(first, core::sync::atomic::Ordering::Relaxed);
        let rewrite = |number: u32| {
            page.entries[0].header.store(second, core::sync::atomic::Ordering::Relaxed);
            Some(i64::from(number))
        };
        assert_eq!(ring.answer_or_take(&page, rewrite), Head::Empty);
        assert_eq!(page.entries[0].header.load(core::sync::atomic::Ordering::Relaxed), second);
        assert_eq!(ring.head(), 0);
        let Head::Taken(request) = ring.answer_or_take(&page, |_| None) else { panic!("the new call is taken") };
        assert_eq!((request.sequence, request.number), (1, 39));
    }

    #[test]
    fn only_the_head_is_looked_at() {
        let page = Page::new();
        let mut ring = Ring::starting_at(ENTRIES + 3);
        assert_eq!(ring.head(), 3);
        // Entry 5 submitted, but the head (3) is free: nothing to take.
        page.entries[5].header.store(
            Header { status: status::SUBMITTED, sequence: 0, number: 1 }.pack(),
            core::sync::atomic::Ordering::Relaxed,
        );
        assert!(!ring.is_pending(&page));
        assert_eq!(ring.take(&page), None);
        let mut out = [Request::default(); 4];
        assert_eq!(ring.take_batch(&page, &mut out), 0);
        assert_eq!(ring.head(), 3);
    }
}
