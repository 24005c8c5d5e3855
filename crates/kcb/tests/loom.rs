//! Loom models of the KCB hand-offs (compiled only with `--cfg loom`): between a stopping
//! kernel and the boot drivers that start the core again, between a parking kernel, its
//! host and the boot drivers that unpark it, of a kernel core's kept syspage between its
//! new kernel and the syspage's home, and of the table of ids living on other cores. The second catches a park that publishes
//! `Runnable` without Release (the host resumes a context not yet saved).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p kcb --release --features loom --test loom`
//!
//! The stopping core writes its last record (here `stopped_tsc`, a counter and the chain of the
//! processes a restart keeps) and publishes
//! `stopped` with Release; two boot drivers race to claim the KCB. Checked: at most one claim
//! succeeds, and only once the core is stopped; the winner sees everything the stopped kernel
//! wrote before it said so; the incarnation goes up exactly once per claim.
#![cfg(loom)]

use kcb::block::{CoreState, Kcb};
use loom::sync::atomic::Ordering;
use loom::sync::Arc;
use loom::thread;
use std::sync::Mutex;

/// The first violation any execution found. Kept outside the model and checked after it: a
/// panic inside an execution would unwind on loom's small coroutine stack, which the KCB
/// (over a hundred checked atomics) already fills.
static VIOLATION: Mutex<Option<String>> = Mutex::new(None);

fn violated(what: String) {
    VIOLATION.lock().unwrap().get_or_insert(what);
}

/// Checks `body` as a loom model, run in a thread whose stack a KCB fits on: a KCB of
/// checked atomics (three pages of plain ones) overflows loom's default coroutine stack, and
/// the model's own thread cannot be given another. The thread counts against loom's five.
fn model_with_a_kcb(body: fn()) {
    loom::model(move || thread::Builder::new().stack_size(1 << 23).spawn(body).unwrap().join().unwrap());
}

/// What a boot driver saw when its claim succeeded: the stop time, the stop count and the
/// kept processes' chain (what the next kernel adopts).
type Seen = Option<(u64, u64, u64)>;

fn driver(kcb: &Kcb) -> Seen {
    // A boot driver claims only what it saw stopped (the stop's own wait), then reads what
    // the stopped kernel left, as `lifecycle::start` does.
    if kcb.state() != CoreState::Stopped {
        return None;
    }
    kcb.claim_for_boot()?;
    Some((
        kcb.stopped_tsc.load(Ordering::Relaxed),
        kcb.stops.load(Ordering::Relaxed),
        kcb.kept.chain.load(Ordering::Acquire),
    ))
}

#[test]
fn one_driver_claims_a_stopped_core_and_sees_its_last_writes() {
    model_with_a_kcb(|| {
        let kcb = Arc::new(Kcb::default());
        kcb.set_state(CoreState::Running);
        let stopping = {
            let kcb = kcb.clone();
            thread::spawn(move || {
                // `lifecycle::stop_if_asked`: the record, the kept processes
                // (`proc::keep::keep_for_next_kernel`), then the state (Release).
                kcb.stops.fetch_add(1, Ordering::Relaxed);
                kcb.kept.chain.store(0x5000, Ordering::Release);
                kcb.stopped_tsc.store(77, Ordering::Relaxed);
                kcb.set_state(CoreState::Stopped);
            })
        };
        let drivers: Vec<_> = (0..2)
            .map(|_| {
                let kcb = kcb.clone();
                thread::spawn(move || driver(&kcb))
            })
            .collect();
        stopping.join().unwrap();
        let seen: Vec<Seen> = drivers.into_iter().map(|driver| driver.join().unwrap()).collect();
        let winners: Vec<(u64, u64, u64)> = seen.into_iter().flatten().collect();
        if winners.len() > 1 {
            violated(format!("two boot drivers claimed one KCB: {winners:?}"));
        }
        if winners.iter().any(|winner| *winner != (77, 1, 0x5000)) {
            violated(format!("the claimer missed the stopped kernel's last writes: {winners:?}"));
        }
        if kcb.incarnation.load(Ordering::Relaxed) != winners.len() as u64 {
            violated(String::from("the incarnation did not count the claims"));
        }
        let expected = if winners.is_empty() { CoreState::Stopped } else { CoreState::Booting };
        if kcb.state() != expected {
            violated(format!("the KCB ended {:?}, not {expected:?}", kcb.state()));
        }
    });
    assert_eq!(VIOLATION.lock().unwrap().take(), None);
}

/// What a parked kernel's context holds at its park, and at its last yield before an unpark.
const PARKED: (u64, u64) = (0x1000, 0x2000);
const LEAVING: (u64, u64) = (0x3000, 0x2000);

fn context(kcb: &Kcb) -> (u64, u64) {
    let context = &kcb.parking.context;
    (context.stack_pointer.load(Ordering::Relaxed), context.page_table_root.load(Ordering::Relaxed))
}

fn save(kcb: &Kcb, (stack_pointer, root): (u64, u64)) {
    kcb.parking.context.stack_pointer.store(stack_pointer, Ordering::Relaxed);
    kcb.parking.context.page_table_root.store(root, Ordering::Relaxed);
}

/// An unparking boot driver (`park::unpark`): it resumes only a guest its host marked `Away`,
/// after claiming it, and wakes a processor with the context it reads then.
fn unparker(kcb: &Kcb) -> Option<(u64, u64)> {
    use kcb::block::GuestState;
    (kcb.parking.guest() == GuestState::Away && kcb.parking.advance(GuestState::Away, GuestState::Resuming))
        .then(|| context(kcb))
}

#[test]
fn a_host_runs_a_parked_kernel_only_once_saved_and_one_driver_resumes_it() {
    use kcb::block::GuestState;
    model_with_a_kcb(|| {
        let kcb = Arc::new(Kcb::default());
        let parking = {
            let kcb = kcb.clone();
            thread::spawn(move || {
                // The park routine: the context, then `Runnable` as the last write (a plain
                // store on x86, which orders like Release).
                save(&kcb, PARKED);
                kcb.parking.guest.store(GuestState::Runnable as u32, Ordering::Release);
            })
        };
        let host = {
            let kcb = kcb.clone();
            thread::spawn(move || {
                // `park::run_guests`: a guest is resumed only when it says runnable.
                if kcb.parking.guest() != GuestState::Runnable {
                    return None;
                }
                let resumed = context(&kcb);
                // The guest runs here, is asked to unpark, saves itself and says `Leaving`
                // (`yield_to_host`); back on the host, which marks it `Away`.
                save(&kcb, LEAVING);
                kcb.parking.guest.store(GuestState::Leaving as u32, Ordering::Release);
                kcb.parking.advance(GuestState::Leaving, GuestState::Away);
                Some(resumed)
            })
        };
        let other_driver = {
            let kcb = kcb.clone();
            thread::spawn(move || unparker(&kcb))
        };
        let this_driver = unparker(&kcb);
        parking.join().unwrap();
        if let Some(resumed) = host.join().unwrap() {
            if resumed != PARKED {
                violated(format!("the host resumed a context not yet saved: {resumed:?}"));
            }
        }
        let winners: Vec<(u64, u64)> = [this_driver, other_driver.join().unwrap()].into_iter().flatten().collect();
        if winners.len() > 1 {
            violated(format!("two boot drivers resumed one parked kernel: {winners:?}"));
        }
        if winners.iter().any(|winner| *winner != LEAVING) {
            violated(format!("a boot driver woke a processor with a stale context: {winners:?}"));
        }
    });
    assert_eq!(VIOLATION.lock().unwrap().take(), None);
}

/// A kernel core's syspage record across a restart: the stopping kernel keeps it
/// (`served → kept`, after writing the frame); once it stopped, the new kernel claims it
/// (`kept → served`) while the home, whose thread lets go of the syspage meanwhile, takes it
/// back (`kept → free`). Checked: exactly one of the two has it (the home taking back a
/// syspage that a kernel serves would let the kernel write a frame the process gave back),
/// and a claiming kernel reads the frame the old one wrote. The stop comes first (the home
/// and the boot driver both wait for the KCB to say `stopped`), so it runs before the race.
#[test]
fn a_kept_syspage_is_served_by_the_new_kernel_or_taken_back_by_its_home_never_both() {
    use kcb::block::{served, ServedSyspage, ServedWord};
    loom::model(|| {
        let record = Arc::new(ServedSyspage::default());
        record.word.store(ServedWord { state: served::SERVED, head: 3, home: 1 }.pack(), Ordering::Release);
        // `syspage::keep_for_next_kernel` on the stopping kernel.
        record.frame.store(42, Ordering::Relaxed);
        assert!(record.change_state(served::SERVED, served::KEPT));
        let new_kernel = {
            let record = record.clone();
            thread::spawn(move || {
                record.change_state(served::KEPT, served::SERVED).then(|| record.frame.load(Ordering::Relaxed))
            })
        };
        // `syspage::detach` finding the KC not running.
        let home = {
            let record = record.clone();
            thread::spawn(move || record.change_state(served::KEPT, served::FREE))
        };
        let served_frame = new_kernel.join().unwrap();
        let home_took_it = home.join().unwrap();
        if home_took_it == served_frame.is_some() {
            violated(format!("home took it back: {home_took_it}, new kernel serves it: {served_frame:?}"));
        }
        if served_frame.is_some_and(|frame| frame != 42) {
            violated(format!("the new kernel read frame {served_frame:?}, not the one kept"));
        }
    });
    assert_eq!(*VIOLATION.lock().unwrap(), None);
}

/// The table of an OSnode's ids living elsewhere (`Kcb::moved_away`), first: two cores a
/// process moves to record two ids at once in a table with two free slots. Checked: both find
/// a slot and neither overwrites the other's (a claim by load and store fails this).
#[test]
fn two_moves_record_their_ids_in_separate_slots() {
    use kcb::block::MovedAway;
    loom::model(|| {
        let slots: Arc<MovedAway<2>> = Arc::new(MovedAway::default());
        let recorders: Vec<_> = [(200_001, 3), (200_002, 1)]
            .into_iter()
            .map(|(id, core)| {
                let slots = slots.clone();
                thread::spawn(move || slots.table().record(id, core))
            })
            .collect();
        let recorded: Vec<bool> = recorders.into_iter().map(|r| r.join().unwrap()).collect();
        let table = slots.table();
        if recorded != [true, true] || table.core_of(200_001) != Some(3) || table.core_of(200_002) != Some(1) {
            violated(format!(
                "recorded {recorded:?}, then 200001 on {:?} and 200002 on {:?}",
                table.core_of(200_001),
                table.core_of(200_002)
            ));
        }
    });
    assert_eq!(*VIOLATION.lock().unwrap(), None);
}

/// Then: a core records an id in a slot an earlier move left another core in, while another
/// core routes a signal by that id. Checked: a reader that finds the id reads the core
/// recorded with it, never the slot's earlier one (a claim that published the id before the
/// core, or without Release, fails this).
#[test]
fn a_reader_that_finds_a_moved_id_reads_its_new_core() {
    use kcb::block::MovedAway;
    loom::model(|| {
        let slots: Arc<MovedAway<1>> = Arc::new(MovedAway::default());
        slots.slots[0].core.store(9, Ordering::Relaxed);
        let recorder = {
            let slots = slots.clone();
            thread::spawn(move || slots.table().record(200_001, 3))
        };
        let reader = {
            let slots = slots.clone();
            thread::spawn(move || slots.table().core_of(200_001))
        };
        let recorded = recorder.join().unwrap();
        let seen = reader.join().unwrap();
        if !recorded || seen.is_some_and(|core| core != 3) {
            violated(format!("recorded {recorded}, a reader found 200001 on core {seen:?}, not 3"));
        }
    });
    assert_eq!(*VIOLATION.lock().unwrap(), None);
}

/// Then: an id sits past another on its walk (both start at slot 0 of two); one core forgets
/// the first and records a third id, which takes the freed slot, while another core looks the
/// second up. Checked: the lookup always finds the second id on its core (a forget that
/// stored 0, cutting the walk short, fails this), and the third is found where it went.
#[test]
fn a_lookup_walks_past_a_slot_forgotten_and_taken_again() {
    use kcb::block::MovedAway;
    loom::model(|| {
        let slots: Arc<MovedAway<2>> = Arc::new(MovedAway::default());
        assert!(slots.table().record(2, 1) && slots.table().record(4, 3));
        let mover = {
            let slots = slots.clone();
            thread::spawn(move || {
                slots.table().forget(2);
                slots.table().record(6, 5)
            })
        };
        let reader = {
            let slots = slots.clone();
            thread::spawn(move || slots.table().core_of(4))
        };
        let recorded = mover.join().unwrap();
        let seen = reader.join().unwrap();
        let table = slots.table();
        if !recorded || seen != Some(3) || table.core_of(6) != Some(5) || table.core_of(2).is_some() {
            violated(format!(
                "recorded 6: {recorded}; a reader found 4 on {seen:?}, not 3; then 6 on {:?}, 2 on {:?}",
                table.core_of(6),
                table.core_of(2)
            ));
        }
    });
    assert_eq!(*VIOLATION.lock().unwrap(), None);
}

/// The fate of a move out of an OSnode (`Kcb::moves_out`): the destination takes the move
/// while the origin, tired of waiting, abandons it. Checked: exactly one of them wins, and they
/// agree (the process is built by the destination, or run on by the origin, never both and
/// never neither); a decision by load and store instead of one compare-exchange fails this.
#[test]
fn a_move_is_taken_by_its_destination_or_abandoned_by_its_origin_never_both() {
    use kcb::block::{MoveFate, MoveFates};
    loom::model(|| {
        let words: Arc<[MoveFate; 2]> = Arc::new(core::array::from_fn(|_| MoveFate::default()));
        let id = (1 << 63) | (2 << 48) | 7;
        let Some(_) = MoveFates(&words[..]).open(id) else {
            return violated("a free word could not be opened".into());
        };
        let destination = {
            let words = words.clone();
            thread::spawn(move || MoveFates(&words[..]).take(id))
        };
        let origin = {
            let words = words.clone();
            thread::spawn(move || MoveFates(&words[..]).abandon(id))
        };
        let (built, ran_on) = (destination.join().unwrap(), origin.join().unwrap());
        if built == ran_on {
            violated(format!("the destination built it: {built}; the origin ran it on: {ran_on}"));
        }
        MoveFates(&words[..]).close(id);
        if MoveFates(&words[..]).take(id) {
            violated("a closed move was taken".into());
        }
    });
    assert_eq!(*VIOLATION.lock().unwrap(), None);
}
