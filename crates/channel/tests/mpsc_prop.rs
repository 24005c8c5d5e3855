//! Property test of the MPSC queue's sends, reservations, abandons, deaths
//! and skips on one thread, against a model of which messages must arrive.
#![cfg(not(loom))]

use channel::{ChannelError, Message, MpscQueue, MpscReceiver, Reservation};
use proptest::prelude::*;

const SLOTS: usize = 4;
const SENDERS: usize = 3;

type Queue = MpscQueue<SLOTS, SENDERS>;

/// One step of the test, by sender id where it has one.
#[derive(Clone, Debug)]
enum Step {
    TrySend(usize),
    /// `send_spin`, only taken when the model says it will not wait.
    SendSpin(usize),
    Reserve(usize, usize),
    /// `push_or_give_up` that never waits: gives up at once if not free.
    Push(usize),
    DropReservation(usize),
    /// The sender's core faults: its reservation is forgotten, not dropped.
    Die(usize),
    /// The core restarts: `reset_sender_record`, then it is live again.
    Restart(usize),
    Receive,
    Skip,
}

fn step() -> impl Strategy<Value = Step> {
    let sender = 0..SENDERS;
    prop_oneof![
        3 => sender.clone().prop_map(Step::TrySend),
        1 => sender.clone().prop_map(Step::SendSpin),
        2 => (sender.clone(), 0..7usize).prop_map(|(sender, nr_slots)| Step::Reserve(sender, nr_slots)),
        4 => sender.clone().prop_map(Step::Push),
        1 => sender.clone().prop_map(Step::DropReservation),
        1 => sender.clone().prop_map(Step::Die),
        1 => sender.prop_map(Step::Restart),
        4 => Just(Step::Receive),
        2 => Just(Step::Skip),
    ]
}

/// What the model knows of a ticket.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ticket {
    /// Reserved by this sender, not written yet.
    Held(usize),
    Published(u32),
    Padding,
    /// Given up or dropped unwritten: no one will ever publish it.
    Abandoned,
}

/// The model's view of one sender's open reservation.
#[derive(Debug)]
struct ModelReservation {
    first: u64,
    nr_slots: u64,
    nr_written: u64,
}

#[derive(Debug, Default)]
struct Model {
    tickets: Vec<Ticket>,
    position: u64,
    dead: [bool; SENDERS],
    /// The sender's record is not clear: an open reservation, or one its
    /// dead core left.
    busy: [bool; SENDERS],
    reservations: [Option<ModelReservation>; SENDERS],
    /// The sender's reservation object gave up (its pushes fail with GaveUp).
    gave_up: [bool; SENDERS],
    nr_padding_skipped: u64,
    nr_abandoned_skipped: u64,
}

impl Model {
    fn tail(&self) -> u64 {
        self.tickets.len() as u64
    }

    /// Whether the slot of `ticket` is free for its lap right now.
    fn is_free(&self, ticket: u64) -> bool {
        ticket < self.position + SLOTS as u64
    }

    fn ticket(&mut self, ticket: u64) -> &mut Ticket {
        &mut self.tickets[ticket as usize]
    }

    /// Marks the rest of `sender`'s reservation abandoned and clears it.
    fn abandon_rest(&mut self, sender: usize) {
        if let Some(reservation) = self.reservations[sender].take() {
            for ticket in reservation.first + reservation.nr_written..reservation.first + reservation.nr_slots {
                *self.ticket(ticket) = Ticket::Abandoned;
            }
        }
        self.busy[sender] = false;
    }

    /// A dropped reservation: pads the slots free right now, in order, and
    /// abandons the rest.
    fn drop_reservation(&mut self, sender: usize) {
        if let Some(open) = self.reservations[sender].as_mut() {
            while open.nr_written < open.nr_slots {
                let ticket = open.first + open.nr_written;
                if ticket >= self.position + SLOTS as u64 {
                    break;
                }
                self.tickets[ticket as usize] = Ticket::Padding;
                open.nr_written += 1;
            }
        }
        self.abandon_rest(sender);
    }

    fn receive(&mut self) -> Option<u32> {
        while self.position < self.tail() {
            match self.tickets[self.position as usize] {
                Ticket::Published(number) => {
                    self.position += 1;
                    return Some(number);
                }
                Ticket::Padding => {
                    self.position += 1;
                    self.nr_padding_skipped += 1;
                }
                Ticket::Held(_) | Ticket::Abandoned => return None,
            }
        }
        None
    }

    fn skip(&mut self) -> u64 {
        let mut nr_skipped = 0;
        while self.position < self.tail() {
            match self.tickets[self.position as usize] {
                Ticket::Abandoned => {}
                Ticket::Held(sender) if self.dead[sender] => {}
                _ => break,
            }
            self.position += 1;
            nr_skipped += 1;
        }
        self.nr_abandoned_skipped += nr_skipped;
        nr_skipped
    }
}

fn message(sender: usize, number: u32) -> Message {
    Message::new(1 + sender as u16, &number.to_le_bytes()).unwrap()
}

fn number_of(message: &Message) -> u32 {
    message.validate().unwrap();
    u32::from_le_bytes(message.payload().try_into().unwrap())
}

/// Runs `steps` on a real queue and the model side by side, checking every
/// result, then drains both.
fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let queue = Queue::new_boxed();
    let mut receiver = queue.receiver().unwrap();
    let mut reservations: [Option<Reservation<'_, SLOTS, SENDERS>>; SENDERS] = Default::default();
    let mut model = Model::default();
    let mut next_number = 0u32;
    for step in steps {
        match *step {
            Step::TrySend(sender) | Step::SendSpin(sender) => {
                if model.dead[sender] {
                    continue; // a dead core sends nothing
                }
                next_number += 1;
                let message = message(sender, next_number);
                let spin = matches!(step, Step::SendSpin(_));
                let expected = if model.busy[sender] {
                    Err(ChannelError::EndpointTaken)
                } else if !model.is_free(model.tail()) {
                    if spin {
                        continue; // it would wait for the receiver
                    }
                    Err(ChannelError::Full)
                } else {
                    model.tickets.push(Ticket::Published(next_number));
                    Ok(())
                };
                let result = if spin { queue.send_spin(sender, &message) } else { queue.try_send(sender, &message) };
                prop_assert_eq!(result, expected, "{:?}", step);
            }
            Step::Reserve(sender, nr_slots) => {
                if model.dead[sender] {
                    continue;
                }
                match queue.reserve(sender, nr_slots) {
                    Err(error) => {
                        prop_assert_eq!(error, ChannelError::EndpointTaken);
                        prop_assert!(model.busy[sender]);
                    }
                    Ok(reservation) => {
                        prop_assert!(!model.busy[sender]);
                        prop_assert_eq!(reservation.first_ticket(), model.tail());
                        // The previous reservation object of this id (done) goes.
                        reservations[sender] = None;
                        model.reservations[sender] = None;
                        model.gave_up[sender] = false;
                        let first = model.tail();
                        model.tickets.extend((0..nr_slots).map(|_| Ticket::Held(sender)));
                        if nr_slots > 0 {
                            model.busy[sender] = true;
                            model.reservations[sender] =
                                Some(ModelReservation { first, nr_slots: nr_slots as u64, nr_written: 0 });
                        }
                        reservations[sender] = Some(reservation);
                    }
                }
            }
            Step::Push(sender) => {
                let Some(reservation) = reservations[sender].as_mut() else { continue };
                next_number += 1;
                let result = reservation.push_or_give_up(&message(sender, next_number), || false);
                let expected = match model.reservations[sender].as_mut() {
                    None if model.gave_up[sender] => Err(ChannelError::GaveUp),
                    None => Err(ChannelError::ReservationExhausted),
                    Some(open) => {
                        let ticket = open.first + open.nr_written;
                        if ticket < model.position + SLOTS as u64 {
                            open.nr_written += 1;
                            let done = open.nr_written == open.nr_slots;
                            *model.ticket(ticket) = Ticket::Published(next_number);
                            if done {
                                model.reservations[sender] = None;
                                model.busy[sender] = false;
                            }
                            Ok(())
                        } else {
                            model.abandon_rest(sender);
                            model.gave_up[sender] = true;
                            Err(ChannelError::GaveUp)
                        }
                    }
                };
                prop_assert_eq!(result, expected, "{:?}", step);
                prop_assert_eq!(reservation.is_abandoned(), model.gave_up[sender]);
            }
            Step::DropReservation(sender) => {
                if reservations[sender].take().is_some() {
                    model.drop_reservation(sender);
                }
            }
            Step::Die(sender) => {
                if let Some(reservation) = reservations[sender].take() {
                    core::mem::forget(reservation);
                }
                model.dead[sender] = true;
                // Its record stays (busy) if it held an open reservation.
                model.reservations[sender] = None;
            }
            Step::Restart(sender) => {
                if !model.dead[sender] {
                    continue;
                }
                // SAFETY: the dead incarnation's reservation was forgotten and
                // never resumes; the new one has not started.
                unsafe { queue.reset_sender_record(sender) }.unwrap();
                model.dead[sender] = false;
                model.busy[sender] = false;
                for ticket in model.tickets.iter_mut() {
                    if *ticket == Ticket::Held(sender) {
                        *ticket = Ticket::Abandoned;
                    }
                }
            }
            Step::Receive => {
                let received = receiver.try_recv().map(|message| number_of(&message));
                prop_assert_eq!(received, model.receive());
            }
            Step::Skip => {
                let dead = model.dead;
                // SAFETY: a dead sender's reservation was forgotten: it never
                // writes again.
                let nr_skipped = unsafe { receiver.skip_abandoned(|sender| !dead[sender]) };
                prop_assert_eq!(nr_skipped, model.skip());
            }
        }
        prop_assert_eq!(receiver.position(), model.position);
    }
    // Everyone stops: live reservations are dropped (padded or abandoned),
    // then the receiver drains with skips until nothing is left.
    for (sender, reservation) in reservations.iter_mut().enumerate() {
        // Dead senders' reservations were forgotten already.
        if reservation.take().is_some() {
            model.drop_reservation(sender);
        }
    }
    drain(&mut receiver, &mut model)?;
    prop_assert_eq!(receiver.position(), model.tail(), "a ticket was never delivered or skipped");
    prop_assert_eq!(receiver.nr_padding_skipped(), model.nr_padding_skipped);
    prop_assert_eq!(receiver.nr_abandoned_skipped(), model.nr_abandoned_skipped);
    Ok(())
}

fn drain(receiver: &mut MpscReceiver<'_, SLOTS, SENDERS>, model: &mut Model) -> Result<(), TestCaseError> {
    loop {
        let position = receiver.position();
        let dead = model.dead;
        // SAFETY: dead senders' reservations were forgotten.
        let nr_skipped = unsafe { receiver.skip_abandoned(|sender| !dead[sender]) };
        prop_assert_eq!(nr_skipped, model.skip());
        let received = receiver.try_recv().map(|message| number_of(&message));
        prop_assert_eq!(received, model.receive());
        // Padding taken by `try_recv` may uncover more to skip.
        if receiver.position() == position {
            return Ok(());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn sends_abandons_deaths_and_skips_match_the_model(steps in prop::collection::vec(step(), 0..60)) {
        run(&steps)?;
    }
}
