//! `/proc/interrupts` read back from a serial log, Reef's and Linux's alike, and compared.

use serde_json::{json, Map, Value};

/// One line of `/proc/interrupts`: its label (a vector number on Reef, an IRQ number or a
/// name such as `LOC` on Linux), the count of each CPU column, and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub label: String,
    /// In the order of [`Table::cpus`]; Linux's `ERR:` and `MIS:` lines have one count only.
    pub counts: Vec<u64>,
    pub name: String,
}

/// One `/proc/interrupts` as printed: the CPU of each column and the lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub cpus: Vec<usize>,
    pub lines: Vec<Line>,
}

/// The CPU numbers of a header line (`CPU0 CPU1 ...` and nothing else), if it is one.
fn header(line: &str) -> Option<Vec<usize>> {
    let cpus: Option<Vec<usize>> =
        line.split_whitespace().map(|word| word.strip_prefix("CPU").and_then(|n| n.parse().ok())).collect();
    cpus.filter(|cpus| !cpus.is_empty())
}

/// A line of counts under a header of `columns` CPUs.
fn counts_line(line: &str, columns: usize) -> Option<Line> {
    let (label, rest) = line.trim_start().split_once(':')?;
    if label.is_empty() || label.contains(char::is_whitespace) {
        return None;
    }
    let mut words = rest.split_whitespace().peekable();
    let mut counts = Vec::new();
    while counts.len() < columns {
        match words.peek().and_then(|word| word.parse::<u64>().ok()) {
            Some(count) => {
                counts.push(count);
                words.next();
            }
            None => break,
        }
    }
    if counts.is_empty() {
        return None;
    }
    Some(Line { label: label.to_string(), counts, name: words.collect::<Vec<_>>().join(" ") })
}

/// Every `/proc/interrupts` table in `serial`, in order. A table ends at the first line that is
/// neither one of its lines nor a kernel log line (`[c1 INFO ] ...`), which may come between.
pub fn tables(serial: &str) -> Vec<Table> {
    let mut found = Vec::new();
    let mut current: Option<Table> = None;
    for line in serial.lines() {
        if let Some(cpus) = header(line) {
            found.extend(current.take());
            current = Some(Table { cpus, lines: Vec::new() });
            continue;
        }
        let Some(table) = current.as_mut() else { continue };
        match counts_line(line, table.cpus.len()) {
            Some(parsed) => table.lines.push(parsed),
            None if line.starts_with("[c") => {}
            None => found.extend(current.take()),
        }
    }
    found.extend(current);
    found
}

impl Table {
    /// The counts of the line labelled `label` per CPU, if there is one.
    pub fn line(&self, label: &str) -> Option<&Line> {
        self.lines.iter().find(|line| line.label == label)
    }

    /// What each line counted from `before` to `self`, per CPU (a line `before` lacked started
    /// at zero); lines that did not move are left out.
    pub fn since(&self, before: &Table) -> Table {
        let mut lines = Vec::new();
        for line in &self.lines {
            let earlier = before.line(&line.label);
            let counts: Vec<u64> = line
                .counts
                .iter()
                .enumerate()
                .map(|(column, &count)| {
                    let cpu = self.cpus.get(column).copied();
                    let old = earlier
                        .and_then(|e| before.cpus.iter().position(|&c| Some(c) == cpu).and_then(|at| e.counts.get(at)))
                        .copied()
                        .unwrap_or(0);
                    count.saturating_sub(old)
                })
                .collect();
            if counts.iter().any(|&count| count > 0) {
                lines.push(Line { label: line.label.clone(), counts, name: line.name.clone() });
            }
        }
        Table { cpus: self.cpus.clone(), lines }
    }

    /// The sum of each CPU's column.
    pub fn totals(&self) -> Vec<(usize, u64)> {
        self.cpus
            .iter()
            .enumerate()
            .map(|(column, &cpu)| (cpu, self.lines.iter().filter_map(|line| line.counts.get(column)).sum()))
            .collect()
    }

    /// As JSON: `{"cpu1": {"total": n, "lines": {"32 timer": n, ...}}, ...}`, only lines with a
    /// count on that CPU.
    pub fn to_json(&self) -> Value {
        let mut cpus = Map::new();
        for (column, (cpu, total)) in self.totals().into_iter().enumerate() {
            let mut lines = Map::new();
            for line in &self.lines {
                if let Some(&count) = line.counts.get(column).filter(|&&count| count > 0) {
                    let key =
                        if line.name.is_empty() { line.label.clone() } else { format!("{} {}", line.label, line.name) };
                    lines.insert(key, json!(count));
                }
            }
            cpus.insert(format!("cpu{cpu}"), json!({ "total": total, "lines": lines }));
        }
        Value::Object(cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REEF: &str = "\
           CPU0       CPU1       
 14:          8          0   page fault
 32:          9          7   timer
[c1 INFO ] a log line in between
 33:          0          1   message IPI
after
           CPU0       CPU1       
 14:         14          2   page fault
 32:        116        113   timer
 33:          2          2   message IPI
 36:          1          0   console
";

    const LINUX: &str = "\
            CPU0       CPU1       
   0:         36          0   IO-APIC   2-edge      timer
   4:          0        310   IO-APIC   4-edge      ttyS0
 NMI:          0          0   Non-maskable interrupts
 LOC:      10471       9320   Local timer interrupts
 ERR:          0
 MIS:          0
PEER exit status=0
";

    #[test]
    fn reef_tables_and_their_difference() {
        let found = tables(REEF);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].cpus, [0, 1]);
        assert_eq!(found[0].lines.len(), 3, "the log line does not end the table");
        assert_eq!(found[0].line("32").unwrap().counts, [9, 7]);
        assert_eq!(found[0].line("33").unwrap().name, "message IPI");
        let during = found[1].since(&found[0]);
        assert_eq!(during.line("32").unwrap().counts, [107, 106]);
        assert_eq!(during.line("36").unwrap().counts, [1, 0], "a new line counts from zero");
        assert_eq!(during.totals(), [(0, 116), (1, 109)]);
        let json = during.to_json();
        assert_eq!(json["cpu1"]["total"], 109);
        assert_eq!(json["cpu1"]["lines"]["32 timer"], 106);
        assert!(json["cpu1"]["lines"].get("36 console").is_none(), "no count on that CPU");
    }

    #[test]
    fn linux_table() {
        let [table] = &tables(LINUX)[..] else { panic!("one table") };
        assert_eq!(table.cpus, [0, 1]);
        assert_eq!(table.lines.len(), 6);
        assert_eq!(table.line("LOC").unwrap().counts, [10471, 9320]);
        assert_eq!(table.line("0").unwrap().name, "IO-APIC 2-edge timer");
        assert_eq!(table.line("ERR").unwrap().counts, [0]);
        assert_eq!(table.totals(), [(0, 10507), (1, 9630)]);
    }

    #[test]
    fn no_table_no_header() {
        assert!(tables("CPU\nnothing here\n 32: 1 2 timer\n").is_empty());
        assert!(header("CPU0 x").is_none());
    }
}
