//! Loom models of every ring protocol (compiled only with `--cfg loom`).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p channel --release --features loom --test loom`
//!
//! Each model is small (capacity 2 and a few messages, so every ring wraps)
//! and bounded to 2 or 3 preemptions. Loom explores unfair schedules: two
//! threads that both spin-wait (yielding) can hand the processor back and
//! forth forever while the thread they wait for never runs. So in every
//! model at most one thread spins without bound at a time; the other loops
//! give up after a few attempts, and a sequential phase after the threads
//! have joined finishes the work. The final checks are exact either way.
#![cfg(loom)]

use channel::{
    send_large, ChannelError, Message, MpscQueue, Multicast, MulticastReader, Reassembler, Urpc, UrpcReceiver,
};
use loom::sync::Arc;
use loom::thread;

/// Attempts a bounded loop makes before giving up to the sequential phase.
const ATTEMPTS: usize = 2;

/// Runs `model` under loom with a preemption bound.
fn check(preemption_bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemption_bound);
    builder.check(model);
}

fn numbered(kind: u16, number: u8) -> Message {
    Message::new(kind, &[number, number ^ 0x5a, number.wrapping_mul(3)]).unwrap()
}

/// Decodes a model message, checking it is not torn.
fn number_of(message: &Message) -> (u16, u8) {
    message.validate().unwrap();
    let payload = message.payload();
    assert_eq!(payload.len(), 3);
    assert_eq!(payload[1], payload[0] ^ 0x5a, "torn message");
    assert_eq!(payload[2], payload[0].wrapping_mul(3), "torn message");
    (message.kind, payload[0])
}

/// Three messages through a 2-slot URPC ring, received with `receive` (which may miss).
fn urpc_model(receive: fn(&mut UrpcReceiver<'_, 2>) -> Option<Message>) {
    check(3, move || {
        let ring = Arc::new(Urpc::<2>::new());
        let producer = {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut sender = ring.sender().unwrap();
                for number in 0..3 {
                    sender.send_spin(&numbered(1, number));
                }
            })
        };
        let mut receiver = ring.receiver().unwrap();
        for expected in 0..3 {
            let message = loop {
                if let Some(message) = receive(&mut receiver) {
                    break message;
                }
                thread::yield_now();
            };
            assert_eq!(number_of(&message), (1, expected));
        }
        producer.join().unwrap();
        assert_eq!(receiver.try_recv(), None);
    });
}

#[test]
fn urpc_producer_consumer_across_a_wrap() {
    urpc_model(|receiver| receiver.try_recv());
}

/// The same protocol through `recv_polling`, whose slot address and expected sequence are
/// worked out before it polls.
#[test]
fn urpc_recv_polling_across_a_wrap() {
    urpc_model(|receiver| receiver.recv_polling(2, thread::yield_now));
}

#[test]
fn mpsc_two_producers_race_for_tickets_across_a_wrap() {
    check(3, || {
        let queue = Arc::new(MpscQueue::<2, 3>::new());
        // Ticket 0 is published but not consumed: whichever producer gets
        // ticket 2 (slot 0, lap 1) must wait for the consumer to free it.
        queue.send_spin(0, &numbered(3, 0)).unwrap();
        let producers: Vec<_> = (1..=2u16)
            .map(|kind| {
                let queue = queue.clone();
                thread::spawn(move || queue.send_spin(kind.into(), &numbered(kind, kind as u8)).unwrap())
            })
            .collect();
        let mut receiver = queue.receiver().unwrap();
        let mut received = Vec::new();
        while received.len() < 3 {
            match receiver.try_recv() {
                Some(message) => received.push(number_of(&message)),
                None => thread::yield_now(),
            }
        }
        for producer in producers {
            producer.join().unwrap();
        }
        assert_eq!(received[0], (3, 0));
        received.sort();
        assert_eq!(received, [(1, 1), (2, 2), (3, 0)]);
        assert_eq!(receiver.try_recv(), None);
    });
}

#[test]
fn mpsc_try_send_never_overwrites() {
    check(3, || {
        let queue = Arc::new(MpscQueue::<2, 1>::new());
        let producer = {
            let queue = queue.clone();
            thread::spawn(move || {
                let mut nr_sent = 0u8;
                while nr_sent < 3 {
                    match queue.try_send(0, &numbered(4, nr_sent)) {
                        Ok(()) => nr_sent += 1,
                        Err(ChannelError::Full) => thread::yield_now(),
                        Err(error) => panic!("{error}"),
                    }
                }
            })
        };
        let mut receiver = queue.receiver().unwrap();
        for expected in 0..3 {
            let message = loop {
                if let Some(message) = receiver.try_recv() {
                    break message;
                }
                thread::yield_now();
            };
            assert_eq!(number_of(&message), (4, expected));
        }
        producer.join().unwrap();
    });
}

/// Sender 1 is dead: it reserved one ticket (at any point of the race with
/// sender 0) and never writes it; `forget` stands for the fault (no drop
/// runs, its record stays). Its steps after the receiver declares it dead
/// touch only its own record, which the receiver then ignores. Live sender 0
/// sends two messages through two slots, so its second may need slot 0
/// freed by the skip. Every live message must arrive once, in order, and
/// exactly the one dead ticket be skipped.
#[test]
fn mpsc_dead_ticket_holder_is_skipped_live_messages_arrive_once_in_order() {
    check(2, || {
        let queue = Arc::new(MpscQueue::<2, 2>::new());
        let dead = {
            let queue = queue.clone();
            thread::spawn(move || core::mem::forget(queue.reserve(1, 1).unwrap()))
        };
        let live = {
            let queue = queue.clone();
            thread::spawn(move || {
                for number in 0..2 {
                    queue.send_spin(0, &numbered(1, number)).unwrap();
                }
            })
        };
        let mut receiver = queue.receiver().unwrap();
        let mut received = Vec::new();
        let mut nr_skipped = 0;
        while received.len() < 2 {
            // SAFETY: sender 1 never writes a slot (it only reserves).
            nr_skipped += unsafe { receiver.skip_abandoned(|sender| sender == 0) };
            match receiver.try_recv() {
                Some(message) => received.push(number_of(&message)),
                None => thread::yield_now(),
            }
        }
        live.join().unwrap();
        dead.join().unwrap();
        // SAFETY: as above.
        nr_skipped += unsafe { receiver.skip_abandoned(|sender| sender == 0) };
        assert_eq!(received, [(1, 0), (1, 1)]);
        assert_eq!(nr_skipped, 1, "the dead ticket is skipped exactly once");
        assert_eq!(receiver.nr_abandoned_skipped(), 1);
        assert_eq!(receiver.try_recv(), None);
        assert_eq!(receiver.position(), 3);
    });
}

/// A live sender takes tickets and publishes them (once through
/// `send_spin`'s `fetch_add`, once through `try_send`'s compare-exchange)
/// while the receiver keeps trying to skip, every sender reported live: the
/// receiver must never skip. The argument (module doc of `mpsc`) needs the
/// Release on the tail RMW: with `send_spin`'s `fetch_add` weakened to
/// Relaxed this model fails (tried: the receiver reads the sender's idle
/// record, skips the ticket and the message is lost), and so it does with
/// `try_send`'s compare-exchange weakened to Relaxed. It does not catch
/// Relaxed record loads in `skip_abandoned` (tried: it passes): loom never
/// lets a compare-exchange read a value older than a store it has already
/// executed, which is the reordering those Acquires exclude in C11 (and which
/// x86 TSO cannot produce either).
#[test]
fn mpsc_skip_never_skips_a_live_ticket() {
    check(3, || {
        let queue = Arc::new(MpscQueue::<2, 1>::new());
        let live = {
            let queue = queue.clone();
            thread::spawn(move || {
                queue.send_spin(0, &numbered(1, 7)).unwrap();
                queue.try_send(0, &numbered(1, 8)).unwrap();
            })
        };
        let mut receiver = queue.receiver().unwrap();
        let mut received = Vec::new();
        while received.len() < 2 {
            // SAFETY: the only sender is live and reported live.
            assert_eq!(unsafe { receiver.skip_abandoned(|_| true) }, 0, "skipped a live ticket");
            match receiver.try_recv() {
                Some(message) => received.push(number_of(&message)),
                None => thread::yield_now(),
            }
        }
        assert_eq!(received, [(1, 7), (1, 8)]);
        live.join().unwrap();
    });
}

#[test]
fn large_message_of_three_chunks_through_two_slots() {
    // 36 + 48 + 10 bytes: exactly three chunks, one more than the ring
    // holds, so the reservation outruns the ring and waits per slot.
    const LEN: usize = 94;
    check(2, || {
        let queue = Arc::new(MpscQueue::<2, 1>::new());
        let bytes: Vec<u8> = (0..LEN as u8).collect();
        let sender = {
            let queue = queue.clone();
            let bytes = bytes.clone();
            thread::spawn(move || send_large(&queue, 0, 9, &bytes).unwrap())
        };
        let mut receiver = queue.receiver().unwrap();
        let mut reassembler = Reassembler::new(LEN);
        let mut nr_chunks = 0;
        let large = loop {
            let Some(message) = receiver.try_recv() else {
                thread::yield_now();
                continue;
            };
            assert!(message.is_chunk());
            nr_chunks += 1;
            if let Some(done) = reassembler.push(&message).unwrap() {
                break done;
            }
        };
        sender.join().unwrap();
        assert_eq!(nr_chunks, 3);
        assert_eq!(large, (9, bytes));
        // Then the queue is usable by an ordinary message.
        queue.send_spin(0, &numbered(5, 1)).unwrap();
        assert_eq!(receiver.try_recv().map(|m| number_of(&m)), Some((5, 1)));
    });
}

type Group = Multicast<2, 2>;
type Reader = MulticastReader<'static, 2, 2>;

/// A group that outlives the model's threads, so readers (which borrow it)
/// can move into them and back.
fn leaked_group() -> &'static Group {
    Box::leak(Box::new(Group::new()))
}

/// Sends `numbers` in order with a few attempts each; returns how many went.
fn send_bounded(group: &Group, numbers: core::ops::Range<u8>) -> u8 {
    let mut nr_sent = 0;
    'messages: for number in numbers {
        for _ in 0..ATTEMPTS {
            match group.try_send(0, &numbered(2, number)) {
                Ok(()) => {
                    nr_sent += 1;
                    continue 'messages;
                }
                Err(ChannelError::Full | ChannelError::Busy) => thread::yield_now(),
                Err(error) => panic!("{error}"),
            }
        }
        break;
    }
    nr_sent
}

/// Receives with a few attempts in total, appending to `received`.
fn receive_bounded(reader: &mut Reader, received: &mut Vec<u8>, wanted: usize) {
    for _ in 0..ATTEMPTS {
        if received.len() == wanted {
            return;
        }
        match reader.try_recv().unwrap() {
            Some(message) => received.push(number_of(&message).1),
            None => thread::yield_now(),
        }
    }
}

/// Sequential phase: drain every reader, then send the rest, until all
/// `COUNT` messages are sent. Each round frees every slot unless one is
/// stuck, so a few rounds suffice; more means a slot was never freed.
fn finish_sequentially(group: &Group, mut nr_sent: u8, count: u8, readers: &mut [(Reader, Vec<u8>)]) {
    for _ in 0..=count {
        for (reader, received) in readers.iter_mut() {
            drain(reader, received);
        }
        if nr_sent == count {
            return;
        }
        nr_sent += send_bounded(group, nr_sent..count);
    }
    panic!("sender stuck after {nr_sent} messages: a slot was never freed");
}

/// Everything left in `reader`, single-threaded.
fn drain(reader: &mut Reader, received: &mut Vec<u8>) {
    while let Some(message) = reader.try_recv().unwrap() {
        received.push(number_of(&message).1);
    }
}

/// The group is quiescent and every slot was freed exactly once per use:
/// no reader set is left, and with a fresh member the sender fills exactly
/// N slots before `Full`. A slot never freed, or freed twice (its sequence
/// then runs ahead of the lap), makes one of those sends fail.
fn assert_quiescent_and_freed_exactly_once(group: &'static Group) {
    assert_eq!(group.nr_slots_in_use(), 0, "a slot was never freed");
    assert_eq!(group.members(), 0);
    let mut reader = group.join(0).unwrap();
    for number in 0..2 {
        assert_eq!(group.try_send(0, &numbered(2, number)), Ok(()), "slot freed twice or never");
    }
    assert_eq!(group.try_send(0, &numbered(2, 2)), Err(ChannelError::Full));
    let mut received = Vec::new();
    drain(&mut reader, &mut received);
    assert_eq!(received, [0, 1]);
}

#[test]
fn multicast_two_members_last_reader_frees_exactly_once() {
    const COUNT: u8 = 3;
    check(2, || {
        let group = leaked_group();
        let readers: Vec<_> = (0..2)
            .map(|member| {
                let mut reader = group.join(member).unwrap();
                thread::spawn(move || {
                    let mut received = Vec::new();
                    receive_bounded(&mut reader, &mut received, COUNT.into());
                    (reader, received)
                })
            })
            .collect();
        let nr_sent = send_bounded(group, 0..COUNT);
        let mut readers: Vec<(Reader, Vec<u8>)> = readers.into_iter().map(|handle| handle.join().unwrap()).collect();
        finish_sequentially(group, nr_sent, COUNT, &mut readers);
        for (reader, received) in readers {
            assert_eq!(received, [0, 1, 2], "member {}", reader.member());
        }
        assert_quiescent_and_freed_exactly_once(group);
    });
}

#[test]
fn multicast_leave_during_traffic_frees_unread_slots() {
    const COUNT: u8 = 3;
    check(2, || {
        let group = leaked_group();
        let mut steady = group.join(0).unwrap();
        let leaving = group.join(1).unwrap();
        // Message 0 names both members; the leaver never reads it, so its
        // slot is freed either by the leave or by the steady member, whichever
        // comes last, and message 2 (same slot, next lap) needs that.
        assert_eq!(send_bounded(group, 0..1), 1);
        let steady_thread = thread::spawn(move || {
            let mut received = Vec::new();
            receive_bounded(&mut steady, &mut received, COUNT.into());
            (steady, received)
        });
        let leaving_thread = thread::spawn(move || leaving.leave());
        let nr_sent = 1 + send_bounded(group, 1..COUNT);
        let steady = steady_thread.join().unwrap();
        leaving_thread.join().unwrap();
        // Only the steady member remains: the sender must be able to finish.
        let mut readers = [steady];
        finish_sequentially(group, nr_sent, COUNT, &mut readers);
        let [(steady, received)] = readers;
        assert_eq!(received, [0, 1, 2]);
        drop(steady);
        assert_quiescent_and_freed_exactly_once(group);
    });
}

#[test]
fn multicast_join_during_send_sees_a_consistent_suffix() {
    const COUNT: u8 = 2;
    check(2, || {
        let group = leaked_group();
        let mut steady = group.join(0).unwrap();
        let joiner = thread::spawn(move || group.join(1).unwrap());
        let steady_thread = thread::spawn(move || {
            let mut received = Vec::new();
            receive_bounded(&mut steady, &mut received, COUNT.into());
            (steady, received)
        });
        // Two messages fit in two slots: the sender never has to wait.
        assert_eq!(send_bounded(group, 0..COUNT), COUNT);
        let mut readers = [steady_thread.join().unwrap(), (joiner.join().unwrap(), Vec::new())];
        finish_sequentially(group, COUNT, COUNT, &mut readers);
        let [(steady, received), (joined, joined_received)] = readers;
        assert_eq!(received, [0, 1]);
        // The joiner was named from some message on, and by every later
        // one: what it reads is a suffix of what was sent.
        let first = COUNT - joined_received.len() as u8;
        assert_eq!(joined_received, (first..COUNT).collect::<Vec<_>>());
        drop((steady, joined));
        assert_quiescent_and_freed_exactly_once(group);
    });
}

#[test]
fn multicast_lagging_joiner_skips_a_reused_slot() {
    const COUNT: u8 = 3;
    // Preemption bound 1 keeps this three-thread, three-message model fast; the
    // interleaving it targets needs only one preemption.
    check(1, || {
        let group = leaked_group();
        let mut steady = group.join(0).unwrap();
        // The joiner races the first send and reads at once: if message 0
        // does not name it but message 1 does, it may look at slot 0 while
        // the steady member frees it and the sender reuses it for message
        // 2, and must still read 1 before 2.
        let joiner = thread::spawn(move || {
            let mut joined = group.join(1).unwrap();
            let mut received = Vec::new();
            receive_bounded(&mut joined, &mut received, COUNT.into());
            (joined, received)
        });
        let steady_thread = thread::spawn(move || {
            let mut received = Vec::new();
            receive_bounded(&mut steady, &mut received, COUNT.into());
            (steady, received)
        });
        let nr_sent = send_bounded(group, 0..COUNT);
        let mut readers = [steady_thread.join().unwrap(), joiner.join().unwrap()];
        finish_sequentially(group, nr_sent, COUNT, &mut readers);
        let [(steady, received), (joined, joined_received)] = readers;
        assert_eq!(received, [0, 1, 2]);
        let first = COUNT - joined_received.len() as u8;
        assert_eq!(joined_received, (first..COUNT).collect::<Vec<_>>());
        drop((steady, joined));
        assert_quiescent_and_freed_exactly_once(group);
    });
}

#[test]
fn multicast_close_lets_members_drain() {
    check(3, || {
        let group = leaked_group();
        let mut reader = group.join(0).unwrap();
        let sender = thread::spawn(move || {
            group.send_spin(0, &numbered(2, 0)).unwrap();
            group.close();
            assert_eq!(group.try_send(0, &numbered(2, 1)), Err(ChannelError::Closed));
        });
        // The message sent before the close always arrives, then Closed.
        let message = loop {
            match reader.try_recv().unwrap() {
                Some(message) => break message,
                None => thread::yield_now(),
            }
        };
        assert_eq!(number_of(&message), (2, 0));
        loop {
            match reader.try_recv() {
                Ok(None) => thread::yield_now(),
                Err(ChannelError::Closed) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        sender.join().unwrap();
        drop(reader);
        group.reopen();
        assert_quiescent_and_freed_exactly_once(group);
    });
}
