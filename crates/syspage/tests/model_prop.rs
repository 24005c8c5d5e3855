//! Property test: random add / take / answer / complete / collect sequences on one thread, against a
//! model of which calls are where (a `VecDeque` of submitted calls in ring order).
#![cfg(not(loom))]

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use syspage::{complete, Full, Head, Page, Request, Ring, Submitter, ENTRIES};

#[derive(Clone, Debug)]
enum Step {
    Add(u32, u64),
    /// `take_batch` of at most this many.
    Take(usize),
    /// `take` of one.
    TakeOne,
    /// `answer_or_take` of one, answering in place the calls of even number.
    AnswerOrTake,
    /// Completes the oldest taken request.
    Complete,
    /// `take_value` of this entry.
    Collect(usize),
    /// `take_value` of the oldest pending entry.
    CollectOldest,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (any::<u32>(), any::<u64>()).prop_map(|(number, argument)| Step::Add(number, argument)),
        2 => (0..10usize).prop_map(Step::Take),
        1 => Just(Step::TakeOne),
        2 => Just(Step::AnswerOrTake),
        4 => Just(Step::Complete),
        2 => (0..ENTRIES + 2).prop_map(Step::Collect),
        3 => Just(Step::CollectOldest),
    ]
}

/// The value the kernel side holds for a call it answers in place: the even numbers'.
fn answer(number: u32) -> Option<i64> {
    number.is_multiple_of(2).then_some(-i64::from(number))
}

/// The value the kernel side gives a call: anything that depends on all of it.
fn value_of(request: &Request) -> i64 {
    (request.number as i64)
        .wrapping_mul(31)
        .wrapping_add(request.arguments.iter().fold(0u64, |sum, a| sum.wrapping_add(*a)) as i64)
}

#[derive(Default)]
struct Model {
    /// Submitted, not taken, in ring order: (index, number, arguments).
    submitted: VecDeque<(usize, u32, [u64; 6])>,
    /// Taken, not completed, in order.
    taken: VecDeque<Request>,
    /// Done: entry → value.
    done: BTreeMap<usize, i64>,
    /// Posted and value not collected, whatever their state.
    outstanding: BTreeSet<usize>,
    next: usize,
}

fn arguments_of(argument: u64) -> [u64; 6] {
    core::array::from_fn(|i| argument.rotate_left(i as u32 * 7))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn the_ring_behaves_like_its_model(steps in proptest::collection::vec(step(), 1..300)) {
        let page = Page::new();
        let mut submitter = Submitter::new();
        let mut ring = Ring::new();
        let mut model = Model::default();
        for step in steps {
            match step {
                Step::Add(number, argument) => {
                    let arguments = arguments_of(argument);
                    let result = submitter.add(&page, number, arguments);
                    if model.outstanding.contains(&model.next) {
                        prop_assert_eq!(result, Err(Full));
                    } else {
                        prop_assert_eq!(result, Ok(model.next));
                        model.submitted.push_back((model.next, number, arguments));
                        model.outstanding.insert(model.next);
                        model.next = (model.next + 1) % ENTRIES;
                    }
                }
                Step::Take(limit) => {
                    let mut out = vec![Request::default(); limit];
                    let count = ring.take_batch(&page, &mut out);
                    prop_assert_eq!(count, limit.min(model.submitted.len()));
                    for request in &out[..count] {
                        let (index, number, arguments) = model.submitted.pop_front().unwrap();
                        prop_assert_eq!((request.index, request.number, request.arguments), (index, number, arguments));
                        model.taken.push_back(*request);
                    }
                }
                Step::TakeOne => {
                    let request = ring.take(&page);
                    match model.submitted.pop_front() {
                        None => prop_assert_eq!(request, None),
                        Some((index, number, arguments)) => {
                            let request = request.unwrap();
                            prop_assert_eq!((request.index, request.number, request.arguments), (index, number, arguments));
                            model.taken.push_back(request);
                        }
                    }
                }
                Step::AnswerOrTake => {
                    let head = ring.answer_or_take(&page, answer);
                    match model.submitted.pop_front() {
                        None => prop_assert_eq!(head, Head::Empty),
                        Some((index, number, arguments)) => match (head, answer(number)) {
                            (Head::Answered, Some(value)) => {
                                model.done.insert(index, value);
                            }
                            (Head::Taken(request), None) => {
                                prop_assert_eq!((request.index, request.number, request.arguments), (index, number, arguments));
                                model.taken.push_back(request);
                            }
                            (head, _) => prop_assert!(false, "call {} in entry {}: {:?}", number, index, head),
                        },
                    }
                }
                Step::Complete => {
                    if let Some(request) = model.taken.pop_front() {
                        prop_assert!(complete(&page, &request, value_of(&request)));
                        model.done.insert(request.index, value_of(&request));
                    }
                }
                Step::Collect(index) => {
                    let expected = model.done.remove(&index);
                    prop_assert_eq!(submitter.take_value(&page, index), expected);
                    if expected.is_some() {
                        model.outstanding.remove(&index);
                    }
                }
                Step::CollectOldest => {
                    // The oldest outstanding entry is the first after `next`, in ring order.
                    let oldest = (0..ENTRIES).map(|k| (model.next + k) % ENTRIES).find(|i| model.outstanding.contains(i));
                    prop_assert_eq!(submitter.oldest_pending(), oldest);
                    let newest = (1..=ENTRIES).map(|k| (model.next + ENTRIES - k) % ENTRIES).find(|i| model.outstanding.contains(i));
                    prop_assert_eq!(submitter.newest_pending(), newest);
                    if let Some(index) = oldest {
                        let expected = model.done.remove(&index);
                        prop_assert_eq!(Submitter::is_done(&page, index), expected.is_some());
                        prop_assert_eq!(submitter.take_value(&page, index), expected);
                        if expected.is_some() {
                            model.outstanding.remove(&index);
                        }
                    }
                }
            }
            prop_assert_eq!(submitter.pending(), model.outstanding.len());
            prop_assert_eq!(page.nr_in_use(), model.outstanding.len());
            prop_assert_eq!(submitter.next_index(), model.next);
        }
    }
}
