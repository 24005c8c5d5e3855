//! The pipe buffer against a queue: bytes in order, PIPE_BUF atomicity, pages given back.

use proptest::prelude::*;
use std::collections::VecDeque;
use vfs::{HeapPageStore, PipeBuffer, PAGE_SIZE, PIPE_BUF, PIPE_CAPACITY};

#[derive(Clone, Debug)]
enum Operation {
    Write { length: usize, seed: u8 },
    Read(usize),
}

fn operation() -> impl Strategy<Value = Operation> {
    // Lengths around the atomic limit and the capacity are the interesting ones.
    let length = prop_oneof![0..64usize, PIPE_BUF - 2..PIPE_BUF + 2, 0..PIPE_CAPACITY + 100];
    prop_oneof![
        (length.clone(), any::<u8>()).prop_map(|(length, seed)| Operation::Write { length, seed }),
        length.prop_map(Operation::Read),
    ]
}

/// Pages the `length` unread bytes from ring offset `start` lie in.
fn pages_spanned(start: usize, length: usize) -> usize {
    if length == 0 {
        return 0;
    }
    let first = start / PAGE_SIZE;
    let last = (start + length - 1) / PAGE_SIZE;
    (last - first + 1).min(PIPE_CAPACITY / PAGE_SIZE)
}

proptest! {
    #[test]
    fn the_pipe_is_a_queue_with_atomic_small_writes(operations in prop::collection::vec(operation(), 1..60)) {
        let mut store = HeapPageStore::new();
        let mut pipe = PipeBuffer::new();
        let mut model = VecDeque::new();
        // Where the model's first byte sits in the ring, to know which pages should be held.
        let mut start = 0usize;
        for operation in operations {
            match operation {
                Operation::Write { length, seed } => {
                    let data: Vec<u8> = (0..length).map(|index| seed.wrapping_add(index as u8)).collect();
                    let space = PIPE_CAPACITY - model.len();
                    let expected = if length <= PIPE_BUF && length > space { 0 } else { length.min(space) };
                    prop_assert_eq!(pipe.write(&mut store, &data), expected, "write of {} with {} free", length, space);
                    model.extend(&data[..expected]);
                }
                Operation::Read(length) => {
                    let mut buffer = vec![0; length];
                    let read = pipe.read(&mut store, &mut buffer);
                    let expected = length.min(model.len());
                    prop_assert_eq!(read, expected);
                    let taken: Vec<u8> = model.drain(..expected).collect();
                    prop_assert!(buffer[..read] == taken[..]);
                    start = if model.is_empty() { 0 } else { (start + read) % PIPE_CAPACITY };
                }
            }
            prop_assert_eq!(pipe.len(), model.len());
            prop_assert_eq!(pipe.space(), PIPE_CAPACITY - model.len());
            prop_assert_eq!(pipe.pages_held(), store.allocated());
            prop_assert_eq!(pipe.pages_held(), pages_spanned(start, model.len()));
        }
        pipe.release(&mut store);
        prop_assert_eq!((pipe.len(), pipe.pages_held(), store.allocated()), (0, 0, 0));
    }
}

#[test]
fn an_atomic_write_without_pages_changes_nothing() {
    let mut store = HeapPageStore::with_limit(1);
    let mut pipe = PipeBuffer::new();
    assert_eq!(pipe.write(&mut store, &[1; PAGE_SIZE - 10]), PAGE_SIZE - 10);
    // 20 bytes straddle into a second page the store cannot give: all or nothing.
    assert_eq!(pipe.write(&mut store, &[2; 20]), 0);
    assert_eq!((pipe.len(), pipe.pages_held(), store.allocated()), (PAGE_SIZE - 10, 1, 1));
    assert!(pipe.space() >= 20, "the caller tells this from a full pipe by the space left");
    // A large write is not atomic: it takes what the pages held give.
    assert_eq!(pipe.write(&mut store, &[3; PIPE_BUF + 1]), 10);
    let mut buffer = vec![0; PAGE_SIZE];
    assert_eq!(pipe.read(&mut store, &mut buffer), PAGE_SIZE);
    assert!(buffer[..PAGE_SIZE - 10].iter().all(|&byte| byte == 1));
    assert!(buffer[PAGE_SIZE - 10..].iter().all(|&byte| byte == 3));
    assert_eq!((pipe.pages_held(), store.allocated()), (0, 0), "an empty pipe holds no page");
}

#[test]
fn a_full_pipe_holds_sixteen_pages_and_refuses_small_writes() {
    let mut store = HeapPageStore::new();
    let mut pipe = PipeBuffer::new();
    assert_eq!(pipe.write(&mut store, &vec![9; PIPE_CAPACITY + 5]), PIPE_CAPACITY);
    assert_eq!(pipe.pages_held(), 16);
    assert_eq!(pipe.write(&mut store, b"x"), 0);
    let mut buffer = vec![0; PAGE_SIZE + 1];
    assert_eq!(pipe.read(&mut store, &mut buffer), PAGE_SIZE + 1);
    assert_eq!(pipe.pages_held(), 15, "the first page is empty and given back");
    // Now the write wraps around the ring into the page the reader left.
    assert_eq!(pipe.write(&mut store, &[7; PAGE_SIZE]), PAGE_SIZE);
    assert_eq!(pipe.pages_held(), 16);
    assert_eq!(pipe.write(&mut store, &[7; 2]), 0, "one byte of room is not enough for two, atomically");
    assert_eq!(pipe.write(&mut store, &[6; 1]), 1);
    assert_eq!(pipe.space(), 0);
}
