//! Loom model of the syspage protocol (compiled only with `--cfg loom`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p syspage --release --features loom --test loom`
//!
//! One submitter thread (the process) and one kernel-core thread over a ring of two entries
//! (`ENTRIES` is 2 under loom), three calls, so the ring wraps and the submitter finds it full.
//! The two threads only ever wait for each other, never for a third, so both may spin
//! (yielding) without bound. Checked: every call is executed once, its value read once, in
//! ring order, with the arguments it was posted with, and every entry ends free.
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use syspage::{complete, Full, Head, Page, Request, Ring, Submitter, ENTRIES};

const CALLS: u32 = 3;

fn check(preemption_bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemption_bound);
    builder.check(model);
}

/// The value the kernel core gives call `number` with first argument `argument`.
fn value_of(number: u32, argument: u64) -> i64 {
    i64::from(number) * 1000 + argument as i64
}

/// How the kernel core takes.
#[derive(Clone, Copy)]
enum Taking {
    /// One entry at a time, completed before the next take.
    One,
    /// A batch, completed before the next take.
    Batch,
    /// A batch, then another before any is completed, as when the calls went to the process's
    /// home and the kernel core scans on: the second must not take an entry of the first.
    Deferred,
    /// One look at a time with `answer_or_take`: calls of even number answered in place
    /// (*submitted* → *done*), the others taken and completed only after the next look, as a
    /// call sent to the process's home is while the kernel core answers the next ones.
    Answering,
}

/// The kernel core: serves `CALLS` calls in order.
fn kernel_core(page: &Page, executed: &AtomicUsize, taking: Taking) {
    if let Taking::Answering = taking {
        return kernel_core_answering(page, executed);
    }
    let mut ring = Ring::new();
    let mut served = 0;
    while served < CALLS {
        let mut batch = [syspage::Request::default(); 2 * ENTRIES];
        let count = match taking {
            Taking::One => ring.take(page).map(|request| batch[0] = request).map_or(0, |()| 1),
            Taking::Batch => ring.take_batch(page, &mut batch[..ENTRIES]),
            Taking::Answering => unreachable!("served by kernel_core_answering"),
            Taking::Deferred => {
                let first = ring.take_batch(page, &mut batch[..ENTRIES]);
                if first == 0 {
                    0
                } else {
                    first + ring.take_batch(page, &mut batch[first..first + ENTRIES])
                }
            }
        };
        if count == 0 {
            thread::yield_now();
            continue;
        }
        for request in &batch[..count] {
            assert_eq!(request.number, served, "taken in ring order");
            assert_eq!(request.arguments, [u64::from(served) + 7; 6], "the arguments as posted");
            assert_eq!(request.index, served as usize % ENTRIES);
            executed.fetch_add(1, Ordering::Relaxed);
            assert!(complete(page, request, value_of(request.number, request.arguments[0])));
            served += 1;
        }
    }
}

/// The kernel core of [`Taking::Answering`].
fn kernel_core_answering(page: &Page, executed: &AtomicUsize) {
    let mut ring = Ring::new();
    let mut next = 0;
    let mut held: Option<Request> = None;
    while next < CALLS || held.is_some() {
        let outcome = if next < CALLS {
            ring.answer_or_take(page, |number| {
                assert_eq!(number, next, "looked at in ring order");
                number.is_multiple_of(2).then(|| value_of(number, u64::from(number) + 7))
            })
        } else {
            Head::Empty
        };
        let completed = held.take().map(|request| {
            executed.fetch_add(1, Ordering::Relaxed);
            assert!(complete(page, &request, value_of(request.number, request.arguments[0])));
        });
        match outcome {
            Head::Empty if completed.is_none() => thread::yield_now(),
            Head::Empty => {}
            Head::Answered => {
                executed.fetch_add(1, Ordering::Relaxed);
                next += 1;
            }
            Head::Taken(request) => {
                assert_eq!((request.number, request.index), (next, next as usize % ENTRIES), "taken in ring order");
                assert_eq!(request.arguments, [u64::from(next) + 7; 6], "the arguments as posted");
                held = Some(request);
                next += 1;
            }
        }
    }
}

/// The process: posts the calls in order, collecting the oldest value when the ring is full,
/// then the rest; returns the values in the order read.
fn process(page: &Page) -> Vec<i64> {
    let mut submitter = Submitter::new();
    let mut values = Vec::new();
    let collect_oldest = |submitter: &mut Submitter| loop {
        let oldest = submitter.oldest_pending().expect("something is pending");
        if let Some(value) = submitter.take_value(page, oldest) {
            assert_eq!(submitter.take_value(page, oldest), None, "read once");
            return value;
        }
        thread::yield_now();
    };
    for number in 0..CALLS {
        loop {
            match submitter.add(page, number, [u64::from(number) + 7; 6]) {
                Ok(_) => break,
                Err(Full) => values.push(collect_oldest(&mut submitter)),
            }
        }
    }
    while submitter.pending() > 0 {
        values.push(collect_oldest(&mut submitter));
    }
    values
}

/// A loom thread with a stack large enough for a failed assertion's message: with loom's
/// default the message overflows the stack and the model hangs instead of failing. (The
/// model's own thread cannot be given one, so the checks run in threads of these.)
fn spawn_checked<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> thread::JoinHandle<T> {
    thread::Builder::new().stack_size(1 << 20).spawn(f).unwrap()
}

fn model(taking: Taking) {
    check(3, move || {
        let page = Arc::new(Page::new());
        let executed = Arc::new(AtomicUsize::new(0));
        let server = {
            let (page, executed) = (page.clone(), executed.clone());
            spawn_checked(move || kernel_core(&page, &executed, taking))
        };
        let client = spawn_checked(move || {
            let values = process(&page);
            server.join().unwrap();
            let expected: Vec<i64> = (0..CALLS).map(|number| value_of(number, u64::from(number) + 7)).collect();
            assert_eq!(values, expected, "each value read once, in ring order");
            assert_eq!(executed.load(Ordering::Relaxed), CALLS as usize, "each call executed once");
            assert_eq!(page.nr_in_use(), 0, "every entry free again");
        });
        client.join().unwrap();
    });
}

#[test]
fn one_submitter_one_kernel_core_across_a_wrap() {
    model(Taking::One);
}

#[test]
fn one_submitter_one_kernel_core_in_batches() {
    model(Taking::Batch);
}

#[test]
fn a_kernel_core_taking_again_before_completing_never_takes_twice() {
    model(Taking::Deferred);
}

#[test]
fn a_kernel_core_answering_some_calls_in_place_and_completing_others_later() {
    model(Taking::Answering);
}
