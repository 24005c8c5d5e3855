//! Message lines and wake-ups around each sample's timed work, from Reef's `/proc/reef/msg`.
//!
//! A figure measured under QEMU's TCG, where waking a halted vCPU costs tens of microseconds,
//! is carried to hardware, where it costs about one, by these counts: each is a cost that
//! differs by platform, counted instead of timed. On Linux the file is absent and nothing is
//! counted.

use std::ops::Sub;

/// Reef's per-core messaging counters: one header line, then one row per core.
pub const MSG_FILE: &str = "/proc/reef/msg";
/// The header's names of more than one word (the others are one word each).
const TWO_WORD_COLUMNS: [&str; 3] = ["ipis sent", "ipis taken", "empty polls"];
/// The columns summed: lines put in a receive queue (a large message adds one per chunk,
/// `kernel/src/msg/send.rs`), and notification interrupts taken (in the default hybrid mode
/// only a halted or armed receiver is sent one, so each is a wake-up of a halted core).
const LINES_COLUMN: &str = "sent";
const WAKEUPS_COLUMN: &str = "ipis taken";
/// Counter reads, back to back, that find what one read costs (the least of them: another
/// core's stray message must not be charged to every sample).
const CALIBRATION_READS: usize = 4;

/// Message lines sent and wake-ups taken, summed over every core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub lines: u64,
    pub wakeups: u64,
}

impl Sub for Counts {
    type Output = Counts;

    /// What happened between two readings (never below zero: a failed send takes its count
    /// back, so a counter may step down by what another core just added).
    fn sub(self, earlier: Counts) -> Counts {
        Counts {
            lines: self.lines.saturating_sub(earlier.lines),
            wakeups: self.wakeups.saturating_sub(earlier.wakeups),
        }
    }
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.lines += other.lines;
        self.wakeups += other.wakeups;
    }

    fn least(self, other: Counts) -> Counts {
        Counts { lines: self.lines.min(other.lines), wakeups: self.wakeups.min(other.wakeups) }
    }
}

/// The header's column names, a name of two words ([`TWO_WORD_COLUMNS`]) as one.
fn columns(header: &str) -> Vec<String> {
    let mut words = header.split_whitespace().peekable();
    let mut columns = Vec::new();
    while let Some(word) = words.next() {
        let joined = words.peek().map(|next| format!("{word} {next}"));
        match joined {
            Some(joined) if TWO_WORD_COLUMNS.contains(&joined.as_str()) => {
                words.next();
                columns.push(joined);
            }
            _ => columns.push(word.to_string()),
        }
    }
    columns
}

/// The sums of the `sent` and `ipis taken` columns of `/proc/reef/msg`'s text, found by the
/// header's names; every row must have one field per column.
pub fn parse(text: &str) -> Result<Counts, String> {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let header = columns(lines.next().ok_or("it is empty")?);
    let position = |name: &str| {
        header.iter().position(|column| column == name).ok_or_else(|| format!("no `{name}` column in its header"))
    };
    let (sent, taken) = (position(LINES_COLUMN)?, position(WAKEUPS_COLUMN)?);
    let mut counts = Counts::default();
    let mut rows = 0;
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() != header.len() {
            return Err(format!("a row of {} fields under {} columns: `{line}`", fields.len(), header.len()));
        }
        let number = |index: usize| {
            fields[index].parse::<u64>().map_err(|_| format!("`{}` is not a count in `{line}`", fields[index]))
        };
        counts.add(Counts { lines: number(sent)?, wakeups: number(taken)? });
        rows += 1;
    }
    if rows == 0 {
        return Err("no core's row".into());
    }
    Ok(counts)
}

/// Reads the counters now; `None` where there are none (Linux).
fn read() -> Option<Result<Counts, String>> {
    match std::fs::read_to_string(MSG_FILE) {
        Ok(text) => Some(parse(&text).map_err(|why| format!("{MSG_FILE}: {why}"))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => Some(Err(format!("reading {MSG_FILE}: {error}"))),
    }
}

/// Reads the counters, knowing what a pair of readings adds by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meter {
    /// What a reading before the work and one after add to the difference between them: the
    /// tail of the first and the head of the second, one reading's worth (a read from a core
    /// other than the file service's is a forwarded call).
    pub reading: Counts,
}

impl Meter {
    /// Finds the cost of a reading (the least of a few back to back); `None` on Linux, or why
    /// the counters cannot be read.
    pub fn calibrate() -> Option<Result<Meter, String>> {
        let mut before = match read()? {
            Ok(counts) => counts,
            Err(why) => return Some(Err(why)),
        };
        let mut reading: Option<Counts> = None;
        for _ in 0..CALIBRATION_READS {
            let after = match read()? {
                Ok(counts) => counts,
                Err(why) => return Some(Err(why)),
            };
            let cost = after - before;
            reading = Some(reading.map_or(cost, |least| least.least(cost)));
            before = after;
        }
        Some(Ok(Meter { reading: reading.unwrap_or_default() }))
    }
}

/// The counts of a figure's samples: each sample's timed work between two readings.
#[derive(Debug)]
pub struct Tally {
    meter: Option<Meter>,
    /// What every sample's work added, less each pair of readings' own cost.
    total: Counts,
    samples: u64,
    /// The first reading that failed; nothing is counted after it.
    failure: Option<String>,
}

impl Tally {
    /// A tally that counts with `meter`, or counts nothing without one.
    pub fn new(meter: Option<Meter>) -> Self {
        Tally { meter, total: Counts::default(), samples: 0, failure: None }
    }

    /// Runs `work` (one sample's timed work) between two readings of the counters, outside
    /// its clock, and adds what it did to the tally.
    pub fn around<T>(&mut self, work: impl FnOnce() -> T) -> T {
        let Some(meter) = self.meter.filter(|_| self.failure.is_none()) else { return work() };
        let before = read();
        let result = work();
        match (before, read()) {
            (Some(Ok(before)), Some(Ok(after))) => {
                self.total.add((after - before) - meter.reading);
                self.samples += 1;
            }
            (Some(Err(why)), _) | (_, Some(Err(why))) => self.failure = Some(why),
            _ => self.failure = Some(format!("{MSG_FILE} went away")),
        }
        result
    }

    /// The `FSBENCH-COUNTS` line of the figure (`figure`, its words as in its other lines),
    /// each sample being `ops_per_sample` operations; `Err` with why there are no counts
    /// where some were expected; `Ok(None)` where none are (Linux, or no sample taken).
    pub fn line(&self, figure: &str, ops_per_sample: u64) -> Result<Option<String>, String> {
        if let Some(why) = &self.failure {
            return Err(why.clone());
        }
        let Some(meter) = self.meter.filter(|_| self.samples > 0) else { return Ok(None) };
        Ok(Some(counts_line(figure, self.samples, self.samples * ops_per_sample, self.total, meter.reading)))
    }
}

/// `FSBENCH-COUNTS <figure> n=<samples> ops=<n> lines=<n> wakeups=<n> lines_per_op=<x>
/// wakeups_per_op=<x> reading_lines=<n> reading_wakeups=<n>`: the totals are what the
/// samples' work added, each pair of readings' own cost (`reading_…`) taken off.
fn counts_line(figure: &str, samples: u64, ops: u64, total: Counts, reading: Counts) -> String {
    let per_op = |count: u64| count as f64 / ops.max(1) as f64;
    format!(
        "FSBENCH-COUNTS {figure} n={samples} ops={ops} lines={} wakeups={} lines_per_op={:.4} \
         wakeups_per_op={:.4} reading_lines={} reading_wakeups={}",
        total.lines,
        total.wakeups,
        per_op(total.lines),
        per_op(total.wakeups),
        reading.lines,
        reading.wakeups
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `cat /proc/reef/msg` printed on 2 cores.
    const TWO_CORES: &str = "\
core  mode    sent        received    dropped  (kind/bad/chunk/large)  lost    refused  timeouts  ipis sent  ipis taken  empty polls
0     hybrid  1           1           0        (0/0/0/0)              0       0        0                 1           0           16
1     hybrid  1207        1           0        (0/0/0/0)              0       0        0                 0           9           26
";

    #[test]
    fn the_sent_and_ipis_taken_columns_are_summed() {
        assert_eq!(parse(TWO_CORES), Ok(Counts { lines: 1208, wakeups: 9 }));
        assert_eq!(
            columns(TWO_CORES.lines().next().unwrap())[8..],
            ["timeouts", "ipis sent", "ipis taken", "empty polls"],
            "two-word names are one column"
        );
    }

    #[test]
    fn a_table_of_another_shape_is_named() {
        assert_eq!(parse(""), Err("it is empty".into()));
        assert_eq!(parse("core mode sent\n"), Err("no `ipis taken` column in its header".into()));
        let header = TWO_CORES.lines().next().unwrap();
        assert_eq!(parse(header), Err("no core's row".into()));
        let short = format!("{header}\n0 hybrid 1 1 0 (0/0/0/0) 0 0 0 1 0\n");
        assert!(parse(&short).unwrap_err().starts_with("a row of 11 fields under 12 columns"));
        let word = format!("{header}\n0 hybrid many 1 0 (0/0/0/0) 0 0 0 1 0 16\n");
        assert!(parse(&word).unwrap_err().starts_with("`many` is not a count"));
    }

    #[test]
    fn counts_never_go_below_zero() {
        let earlier = Counts { lines: 10, wakeups: 3 };
        assert_eq!(Counts { lines: 15, wakeups: 3 } - earlier, Counts { lines: 5, wakeups: 0 });
        assert_eq!(Counts { lines: 9, wakeups: 4 } - earlier, Counts { lines: 0, wakeups: 1 });
    }

    #[test]
    fn the_counts_line() {
        let total = Counts { lines: 24_600, wakeups: 12 };
        assert_eq!(
            counts_line("dd mib=1 core=1", 3, 6144, total, Counts { lines: 4, wakeups: 0 }),
            "FSBENCH-COUNTS dd mib=1 core=1 n=3 ops=6144 lines=24600 wakeups=12 lines_per_op=4.0039 \
             wakeups_per_op=0.0020 reading_lines=4 reading_wakeups=0"
        );
    }

    /// On the host (Linux) there is no `/proc/reef/msg`: nothing is counted or printed.
    #[test]
    fn linux_has_no_counts() {
        assert!(Meter::calibrate().is_none());
        let mut tally = Tally::new(None);
        assert_eq!(tally.around(|| 7), 7);
        assert_eq!(tally.line("dd mib=1 core=0", 2048), Ok(None));
    }
}
