//! Property tests: whatever a process writes into its syspage, whenever it writes it, the kernel
//! side (`Ring::take`, `take_batch`, `answer_or_take`, `is_pending`, `complete`) never panics,
//! only ever takes the head, hands over exactly what the entry held at the take, never takes an
//! entry twice, and writes only headers it claims (*submitted* → *taken*) or answers in place
//! (*submitted* → *done*, with the value), and a value and a header into an entry that still
//! holds the request it completes.
#![cfg(not(loom))]

use proptest::prelude::*;
use std::sync::atomic::Ordering::Relaxed;
use syspage::{complete, status, Head, Header, Page, Request, Ring, ENTRIES};

/// Words of a page: 8 per entry.
const WORDS: usize = ENTRIES * 8;

fn word(page: &Page, index: usize) -> &std::sync::atomic::AtomicU64 {
    let entry = &page.entries[index / 8];
    match index % 8 {
        0 => &entry.header,
        7 => &entry.value,
        argument => &entry.arguments[argument - 1],
    }
}

fn snapshot(page: &Page) -> Vec<u64> {
    (0..WORDS).map(|index| word(page, index).load(Relaxed)).collect()
}

/// A word the process writes: often a header of some status, sometimes anything.
fn scribble_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        (0u8..5, any::<u32>(), any::<u32>())
            .prop_map(|(status, sequence, number)| Header { status, sequence, number }.pack()),
    ]
}

#[derive(Clone, Debug)]
enum Step {
    Take,
    TakeBatch(usize),
    /// `answer_or_take`, answering in place the calls whose number is below this one.
    AnswerOrTake(u32),
    IsPending,
    /// Completes one of the requests taken so far (by position, wrapping), with a value.
    CompleteTaken(usize, i64),
    /// Completes a request made up from nothing.
    CompleteForged(usize, u32, u32, i64),
    /// The process writes a word of its page.
    Scribble(usize, u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Take),
        2 => (0..80usize).prop_map(Step::TakeBatch),
        3 => any::<u32>().prop_map(Step::AnswerOrTake),
        1 => Just(Step::IsPending),
        3 => (any::<usize>(), any::<i64>()).prop_map(|(which, value)| Step::CompleteTaken(which, value)),
        1 => (any::<usize>(), any::<u32>(), any::<u32>(), any::<i64>())
            .prop_map(|(index, sequence, number, value)| Step::CompleteForged(index, sequence, number, value)),
        6 => (0..WORDS, scribble_value()).prop_map(|(index, value)| Step::Scribble(index, value)),
    ]
}

/// Checks `taken`, what a batch (or a single take) starting at `head` returned, against the page
/// as it was just before (`before`) and after (`after`) it: every entry taken was submitted,
/// in ring order from the head, is handed over as it was and is now claimed (*taken*, same
/// sequence and number); nothing else in the page changed; the ring's head moved past them.
fn check_takes(
    before: &[u64],
    after: &[u64],
    head: usize,
    limit: usize,
    taken: &[Request],
    ring: &Ring,
) -> Result<(), TestCaseError> {
    let mut expected = before.to_vec();
    let mut count = 0;
    while count < limit.min(ENTRIES) {
        let index = (head + count) % ENTRIES;
        let header = Header::unpack(before[index * 8]);
        if header.status != status::SUBMITTED {
            break;
        }
        let request = taken.get(count).copied().expect("a submitted head is taken");
        prop_assert_eq!(request.index, index);
        prop_assert_eq!((request.sequence, request.number), (header.sequence, header.number));
        prop_assert_eq!(request.arguments.to_vec(), before[index * 8 + 1..index * 8 + 7].to_vec());
        expected[index * 8] = Header { status: status::TAKEN, ..header }.pack();
        count += 1;
    }
    prop_assert_eq!(taken.len(), count, "a batch stops at the first entry not submitted");
    prop_assert_eq!(ring.head(), (head + count) % ENTRIES);
    prop_assert_eq!(after.to_vec(), expected, "taking only claims the entries it takes");
    Ok(())
}

/// The value the kernel side answers call `number` with in place, if it answers it (the
/// numbers below `below`).
fn answer_below(below: u32) -> impl Fn(u32) -> Option<i64> {
    move |number| (number < below).then_some(i64::from(number) * 3 - 1)
}

/// Checks what `answer_or_take` did with the head entry, given the page before and after: a
/// submitted head it answers is *done* with the answer as its value; one it does not is taken
/// as by `take`; anything else is left alone; nothing else in the page changed.
fn check_answer_or_take(
    before: &[u64],
    after: &[u64],
    head: usize,
    below: u32,
    outcome: Head,
    ring: &Ring,
) -> Result<(), TestCaseError> {
    let header = Header::unpack(before[head * 8]);
    if header.status != status::SUBMITTED {
        prop_assert_eq!(outcome, Head::Empty);
        prop_assert_eq!(ring.head(), head);
        prop_assert_eq!(after.to_vec(), before.to_vec(), "a head not submitted is left alone");
        return Ok(());
    }
    match (outcome, answer_below(below)(header.number)) {
        (Head::Answered, Some(value)) => {
            let mut expected = before.to_vec();
            expected[head * 8] = Header { status: status::DONE, ..header }.pack();
            expected[head * 8 + 7] = value as u64;
            prop_assert_eq!(ring.head(), (head + 1) % ENTRIES);
            prop_assert_eq!(after.to_vec(), expected, "an answer writes its entry's value and header only");
        }
        (Head::Taken(request), None) => check_takes(before, after, head, 1, &[request], ring)?,
        (outcome, _) => prop_assert!(false, "call {} at the head: {:?}", header.number, outcome),
    }
    Ok(())
}

fn check_complete(page: &Page, request: &Request, value: i64) -> Result<(), TestCaseError> {
    let before = snapshot(page);
    let index = request.index % ENTRIES;
    let holds = before[index * 8]
        == Header { status: status::TAKEN, sequence: request.sequence, number: request.number }.pack();
    let completed = complete(page, request, value);
    prop_assert_eq!(completed, holds);
    let mut expected = before.clone();
    if holds {
        expected[index * 8] =
            Header { status: status::DONE, sequence: request.sequence, number: request.number }.pack();
        expected[index * 8 + 7] = value as u64;
    }
    prop_assert_eq!(snapshot(page), expected, "only the completed entry's header and value change");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn any_page_and_any_scribbling_leave_the_kernel_side_sound(
        initial in proptest::collection::vec(scribble_value(), WORDS),
        head in any::<usize>(),
        steps in proptest::collection::vec(step(), 1..200),
    ) {
        let page = Page::new();
        for (index, value) in initial.iter().enumerate() {
            word(&page, index).store(*value, Relaxed);
        }
        let mut ring = Ring::starting_at(head);
        prop_assert!(ring.head() < ENTRIES);
        let mut taken: Vec<Request> = Vec::new();
        for step in steps {
            match step {
                Step::Take => {
                    let before = snapshot(&page);
                    let head = ring.head();
                    let request = ring.take(&page);
                    let requests: Vec<Request> = request.into_iter().collect();
                    check_takes(&before, &snapshot(&page), head, 1, &requests, &ring)?;
                    taken.extend(request);
                }
                Step::TakeBatch(limit) => {
                    let before = snapshot(&page);
                    let head = ring.head();
                    let mut out = vec![Request::default(); limit];
                    let count = ring.take_batch(&page, &mut out);
                    prop_assert!(count <= limit);
                    check_takes(&before, &snapshot(&page), head, limit, &out[..count], &ring)?;
                    taken.extend_from_slice(&out[..count]);
                }
                Step::AnswerOrTake(below) => {
                    let before = snapshot(&page);
                    let head = ring.head();
                    let outcome = ring.answer_or_take(&page, answer_below(below));
                    check_answer_or_take(&before, &snapshot(&page), head, below, outcome, &ring)?;
                    if let Head::Taken(request) = outcome {
                        taken.push(request);
                    }
                }
                Step::IsPending => {
                    let head = Header::unpack(word(&page, ring.head() * 8).load(Relaxed));
                    prop_assert_eq!(ring.is_pending(&page), head.status == status::SUBMITTED);
                }
                Step::CompleteTaken(which, value) => {
                    if !taken.is_empty() {
                        let request = taken[which % taken.len()];
                        check_complete(&page, &request, value)?;
                    }
                }
                Step::CompleteForged(index, sequence, number, value) => {
                    let request = Request { index, sequence: sequence & Header::SEQUENCE_MASK, number, arguments: [0; 6] };
                    check_complete(&page, &request, value)?;
                }
                Step::Scribble(index, value) => word(&page, index).store(value, Relaxed),
            }
        }
    }
}

/// The same with real concurrency: a thread scribbling random words as fast as it can while
/// the kernel side takes and completes; the checks are that nothing panics and every request
/// names the entry that was the head.
#[test]
fn a_scribbling_thread_never_upsets_the_kernel_side() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let page = Box::new(Page::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut state = 0x9E37_79B9_7F4A_7C15u64;
            while !stop.load(Ordering::Relaxed) {
                // xorshift: cheap, deterministic noise.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Half the writes are a submitted header into some entry, so the kernel side
                // finds work at its head now and then; the rest are any word anywhere.
                let (index, value) = if state & 1 == 0 {
                    ((state >> 20) as usize % WORDS, state)
                } else {
                    ((state >> 20) as usize % ENTRIES * 8, state & !0xFF | u64::from(status::SUBMITTED))
                };
                word(&page, index).store(value, Relaxed);
            }
        });
        let mut ring = Ring::new();
        let mut batch = [Request::default(); ENTRIES];
        let mut taken = 0usize;
        let start = std::time::Instant::now();
        let mut round = 0usize;
        while taken < 10_000 && start.elapsed() < std::time::Duration::from_secs(2) {
            round += 1;
            let head = ring.head();
            if round.is_multiple_of(3) {
                match ring.answer_or_take(&page, |number| number.is_multiple_of(2).then_some(5)) {
                    Head::Empty => {}
                    Head::Answered => taken += 1,
                    Head::Taken(request) => {
                        assert_eq!(request.index, head);
                        complete(&page, &request, round as i64);
                        taken += 1;
                    }
                }
            } else if round.is_multiple_of(2) {
                if let Some(request) = ring.take(&page) {
                    assert_eq!(request.index, head);
                    complete(&page, &request, round as i64);
                    taken += 1;
                }
            } else {
                let count = ring.take_batch(&page, &mut batch);
                for (offset, request) in batch[..count].iter().enumerate() {
                    assert_eq!(request.index, (head + offset) % ENTRIES);
                    complete(&page, request, -1);
                }
                taken += count;
            }
        }
        stop.store(true, Ordering::Relaxed);
        eprintln!("took {taken} scribbled requests in {round} rounds");
    });
}
