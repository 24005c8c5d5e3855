//! One writer and several readers on other cores, in a loop: every read sees what the POSIX
//! rules say it must (issue 31's coherence test, the guard of any cache of file state kept
//! away from the file service).
//!
//! The writer, each round `r`: `pwrite`s `r` at offset 0 of `data` (kept open), every
//! [`RENAME_EVERY`]th round writes `r` into a new file and renames it over `named`, then
//! `pwrite`s `r` into `announce` (kept open). A reader loops: reads `announce` (`a`), then
//! `data` (`d`), then opens, reads and closes `named` (`n`). Each read starts after the read
//! before it returned, and each of the writer's writes returned before `announce` said its
//! round, so `d ≥ a` (a `write` seen after it returned), `n ≥ a` rounded down to the last
//! rename (a `rename` seen by the next `open`), and none of the three goes back in time.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often the writer renames a new `named` over the old one.
pub const RENAME_EVERY: u64 = 16;
/// A reader's pause between two looks: the readers check, the writer's rounds are the load
/// (three readers looking as fast as they can made 10 000 rounds take minutes under TCG, the
/// service busy with their reads).
const READER_PAUSE: Duration = Duration::from_millis(1);
/// A reader gives up when the writer has not finished after this long.
const READER_PATIENCE: Duration = Duration::from_secs(300);
/// A record: the round, and the round xor this, so a torn or zeroed record shows.
const CHECK: u64 = 0x5eef_c0de_0000_5eef;

fn record(round: u64) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&round.to_le_bytes());
    bytes[8..].copy_from_slice(&(round ^ CHECK).to_le_bytes());
    bytes
}

/// The round a record holds; an error names what is wrong with it.
fn round_of(what: &str, bytes: &[u8]) -> Result<u64, String> {
    let (Some(round), Some(check)) = (bytes.get(..8), bytes.get(8..16)) else {
        return Err(format!("{what}: {} bytes, not a 16-byte record", bytes.len()));
    };
    let round = u64::from_le_bytes(round.try_into().expect("8 bytes"));
    let check = u64::from_le_bytes(check.try_into().expect("8 bytes"));
    if round ^ CHECK != check {
        return Err(format!("{what}: a torn or foreign record {bytes:02x?}"));
    }
    Ok(round)
}

/// The last round at or before `round` whose `named` was renamed into place.
fn last_rename(round: u64) -> u64 {
    round - round % RENAME_EVERY
}

/// `--coherence-write DIR ROUNDS`.
pub fn write(directory: &Path, rounds: u64, place: &str) -> Result<String, String> {
    match fs::create_dir(directory) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
        Err(error) => return Err(format!("mkdir {}: {error}", directory.display())),
    }
    let create = |name: &str| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(directory.join(name))
            .map_err(|error| format!("creating {name}: {error}"))
    };
    let data = create("data")?;
    let announce = create("announce")?;
    let (named, next) = (directory.join("named"), directory.join("named.next"));
    for round in 1..=rounds {
        data.write_at(&record(round), 0).map_err(|error| format!("round {round}: pwrite of data: {error}"))?;
        if round % RENAME_EVERY == 0 {
            let mut file =
                File::create(&next).map_err(|error| format!("round {round}: creating named.next: {error}"))?;
            file.write_all(&record(round)).map_err(|error| format!("round {round}: writing named.next: {error}"))?;
            drop(file);
            fs::rename(&next, &named).map_err(|error| format!("round {round}: rename over named: {error}"))?;
        }
        announce.write_at(&record(round), 0).map_err(|error| format!("round {round}: pwrite of announce: {error}"))?;
    }
    Ok(format!("{place}: {rounds} rounds written (pwrite, a rename every {RENAME_EVERY}, announced)"))
}

/// What one reader saw last, to check that nothing goes back in time.
#[derive(Default)]
struct Seen {
    announced: u64,
    data: u64,
    named: u64,
}

impl Seen {
    /// Checks one look (`announced`, then `data`, then `named`, each read after the last
    /// returned) against the rules and against the look before; keeps it.
    fn look(&mut self, announced: u64, data: u64, named: u64) -> Result<(), String> {
        let looked = format!("announce {announced}, data {data}, named {named}");
        if data < announced {
            return Err(format!("stale data: {looked}, read after announce said its write had returned"));
        }
        if named < last_rename(announced) {
            return Err(format!("stale name: {looked}, opened after the rename of round {}", last_rename(announced)));
        }
        if announced < self.announced || data < self.data || named < self.named {
            return Err(format!(
                "back in time: {looked} after announce {}, data {}, named {}",
                self.announced, self.data, self.named
            ));
        }
        *self = Self { announced, data, named };
        Ok(())
    }
}

/// `--coherence-read DIR ROUNDS`: loops until `announce` says the last round.
pub fn read(directory: &Path, rounds: u64, place: &str) -> Result<String, String> {
    let started = Instant::now();
    let open = |name: &str| loop {
        match File::open(directory.join(name)) {
            Ok(file) => return Ok(file),
            Err(error) if error.kind() == ErrorKind::NotFound && started.elapsed() < READER_PATIENCE => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(error) => return Err(format!("opening {name}: {error}")),
        }
    };
    let announce = open("announce")?;
    let data = open("data")?;
    let named = directory.join("named");
    let mut seen = Seen::default();
    let mut looks = 0u64;
    let mut record_bytes = [0u8; 16];
    loop {
        let read_at = |file: &File, what: &str, bytes: &mut [u8; 16]| -> Result<u64, String> {
            let length = file.read_at(bytes, 0).map_err(|error| format!("pread of {what}: {error}"))?;
            // The writer's first `pwrite` may not have come yet: an empty file is round 0.
            if length == 0 {
                return Ok(0);
            }
            round_of(what, &bytes[..length])
        };
        let announced = read_at(&announce, "announce", &mut record_bytes)?;
        let data_round = read_at(&data, "data", &mut record_bytes)?;
        let named_round = match fs::read(&named) {
            Ok(bytes) => round_of("named", &bytes)?,
            Err(error) if error.kind() == ErrorKind::NotFound && seen.named == 0 => 0,
            Err(error) => return Err(format!("reading named: {error}")),
        };
        seen.look(announced, data_round, named_round)?;
        looks += 1;
        if announced == rounds {
            return Ok(format!("{place}: {looks} looks while {rounds} rounds were written, none stale"));
        }
        if started.elapsed() > READER_PATIENCE {
            return Err(format!("the writer stopped at round {announced} of {rounds}"));
        }
        std::thread::sleep(READER_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_torn_ones_are_refused() {
        assert_eq!(round_of("x", &record(12345)), Ok(12345));
        assert!(round_of("x", &[0; 16]).unwrap_err().contains("torn"));
        assert!(round_of("x", &record(7)[..9]).unwrap_err().contains("9 bytes"));
        let mut torn = record(9);
        torn[0] = 8;
        assert!(round_of("x", &torn).is_err());
    }

    #[test]
    fn a_look_follows_the_rules() {
        let mut seen = Seen::default();
        assert!(seen.look(0, 0, 0).is_ok());
        assert!(seen.look(17, 18, 16).is_ok(), "named renamed at 16");
        assert!(seen.look(17, 18, 16).is_ok(), "the same look again");
        assert!(seen.look(20, 19, 16).unwrap_err().starts_with("stale data"));
        assert!(seen.look(32, 32, 16).unwrap_err().starts_with("stale name"));
        assert!(seen.look(16, 18, 16).unwrap_err().starts_with("back in time"));
        assert!(seen.look(17, 18, 0).unwrap_err().starts_with("stale name"));
        assert!(seen.look(40, 41, 32).is_ok());
    }

    #[test]
    fn a_writer_and_a_reader_on_the_host() {
        let directory = std::env::temp_dir().join(format!("fstest-coherence-{}", std::process::id()));
        let _ = fs::remove_dir_all(&directory);
        let writer = {
            let directory = directory.clone();
            std::thread::spawn(move || write(&directory, 200, "host"))
        };
        let reader = read(&directory, 200, "host");
        assert!(writer.join().unwrap().is_ok());
        assert!(reader.unwrap().contains("none stale"));
        fs::remove_dir_all(&directory).unwrap();
    }
}
