//! fsbench's `FSBENCH-COUNTS` lines: the message lines and the wake-ups of a halted core that
//! a figure's operations took on Reef, read back and added up over runs.
//!
//! Counts carry a figure from one platform to another where times do not: under QEMU's TCG a
//! wake-up costs tens of microseconds, on hardware about one.

use serde_json::{json, Value};

/// What a figure's samples took: from one line, or the sum of several runs' lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    pub samples: u64,
    pub ops: u64,
    /// Lines sent, over every core: a large message counts one per chunk.
    pub lines: u64,
    /// Notification interrupts taken, over every core: each woke a halted core.
    pub wakeups: u64,
}

impl OpCounts {
    /// The counts of a line's words after `FSBENCH-COUNTS` (the figure's words and
    /// `n= ops= lines= wakeups=`); `None` if one of those is missing.
    pub fn from_words(text: &str) -> Option<OpCounts> {
        let fields: std::collections::BTreeMap<&str, &str> =
            text.split_whitespace().filter_map(|word| word.split_once('=')).collect();
        let number = |name: &str| fields.get(name)?.parse::<u64>().ok();
        Some(OpCounts {
            samples: number("n")?,
            ops: number("ops")?,
            lines: number("lines")?,
            wakeups: number("wakeups")?,
        })
    }

    /// The sum of `counts`; `None` if there are none.
    pub fn sum<'a>(counts: impl IntoIterator<Item = &'a OpCounts>) -> Option<OpCounts> {
        counts.into_iter().copied().reduce(|a, b| a.plus(b))
    }

    pub fn plus(self, other: OpCounts) -> OpCounts {
        OpCounts {
            samples: self.samples + other.samples,
            ops: self.ops + other.ops,
            lines: self.lines + other.lines,
            wakeups: self.wakeups + other.wakeups,
        }
    }

    fn per_op(self, count: u64) -> Option<f64> {
        (self.ops > 0).then(|| count as f64 / self.ops as f64)
    }

    pub fn lines_per_op(self) -> Option<f64> {
        self.per_op(self.lines)
    }

    pub fn wakeups_per_op(self) -> Option<f64> {
        self.per_op(self.wakeups)
    }

    /// The table's line: `per <operation>: 14.03 message lines, 1.195 wake-ups (4096 ops)`.
    pub fn text(self, operation: &str) -> String {
        let number = |value: Option<f64>| match value {
            Some(value) if value == 0.0 || value >= 100.0 => format!("{value:.0}"),
            Some(value) if value >= 1.0 => format!("{value:.2}"),
            Some(value) => format!("{value:.3}"),
            None => "-".into(),
        };
        format!(
            "per {operation}: {} message lines, {} wake-ups of a halted core ({} ops)",
            number(self.lines_per_op()),
            number(self.wakeups_per_op()),
            self.ops
        )
    }

    fn json(self) -> Value {
        json!({
            "samples": self.samples,
            "ops": self.ops,
            "message_lines": self.lines,
            "wakeups": self.wakeups,
            "message_lines_per_op": self.lines_per_op(),
            "wakeups_per_op": self.wakeups_per_op(),
        })
    }
}

/// A figure's counts for the results: what one operation is, the sum over runs, and each run's
/// (`null` for a run that printed none).
pub fn json(operation: &str, runs: &[Option<OpCounts>]) -> Value {
    json!({
        "operation": operation,
        "meaning": {
            "message_lines": "lines sent over every core (a large message counts one per chunk), less the counter reads' own",
            "wakeups": "notification interrupts taken over every core: each woke a halted core",
        },
        "total": OpCounts::sum(runs.iter().flatten()).map(OpCounts::json),
        "runs": runs.iter().map(|run| run.map(OpCounts::json)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_read_and_runs_are_added() {
        let line = "dd mib=1 core=1 n=2 ops=4096 lines=57476 wakeups=4893 lines_per_op=14.0322 \
                    wakeups_per_op=1.1946 reading_lines=54 reading_wakeups=5";
        let one = OpCounts::from_words(line).unwrap();
        assert_eq!(one, OpCounts { samples: 2, ops: 4096, lines: 57476, wakeups: 4893 });
        assert!(OpCounts::from_words("dd mib=1 core=1 n=2 ops=4096 lines=5").is_none(), "no wakeups=");
        assert!(OpCounts::from_words("dd n=2 ops=x lines=5 wakeups=1").is_none());
        let both = OpCounts::sum([&one, &OpCounts { samples: 1, ops: 2048, lines: 28_000, wakeups: 1 }]).unwrap();
        assert_eq!(both.ops, 6144);
        assert_eq!(
            both.text("dd block"),
            "per dd block: 13.91 message lines, 0.797 wake-ups of a halted core (6144 ops)"
        );
        assert_eq!(OpCounts::sum([]), None);
        let service = OpCounts { samples: 1, ops: 2048, lines: 0, wakeups: 0 };
        assert_eq!(service.text("block"), "per block: 0 message lines, 0 wake-ups of a halted core (2048 ops)");
        let none = OpCounts::default();
        assert_eq!((none.lines_per_op(), none.wakeups_per_op()), (None, None), "no operation, no rate");
        let results = json("a run", &[Some(one), None]);
        assert_eq!(results["total"]["ops"], 4096);
        assert_eq!(results["runs"][1], Value::Null);
    }
}
