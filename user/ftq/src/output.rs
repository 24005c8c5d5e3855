//! The counts and times files (HARE's FTQ layout), and the compact dump the benchmark reads
//! from the serial console.

use crate::quanta::Quanta;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Numbers per dump line: short enough for any console path, long enough that the line
/// prefixes cost little.
pub const DUMP_LINE: usize = 500;

/// `<prefix>.counts`: one count a line. `<prefix>.times`: the TSC at the start of each
/// quantum, one a line.
pub fn write_files(prefix: &str, run: &Quanta) -> io::Result<()> {
    let mut counts = String::with_capacity(run.counts.len() * 6);
    for count in &run.counts {
        let _ = writeln!(counts, "{count}");
    }
    std::fs::write(format!("{prefix}.counts"), counts)?;
    let mut times = String::with_capacity(run.starts.len() * 16);
    for start in &run.starts {
        let _ = writeln!(times, "{start}");
    }
    std::fs::write(format!("{prefix}.times"), times)
}

/// The run as text for a console, about 8 bytes a quantum:
///
/// ```text
/// FTQ-DATA begin quanta=<n> scheduled_start=<tsc> quantum_cycles=<q>
/// FTQ-COUNTS <first index> <count>,<count>,...
/// FTQ-LATE <first index> <cycles>,<cycles>,...
/// FTQ-DATA end
/// ```
///
/// `FTQ-LATE` gives how long after its scheduled start each quantum began, in cycles: the
/// start TSC is `scheduled_start + i * quantum_cycles + late`, and `late` is small.
pub fn dump(out: &mut impl Write, run: &Quanta) -> io::Result<()> {
    writeln!(
        out,
        "FTQ-DATA begin quanta={} scheduled_start={} quantum_cycles={}",
        run.counts.len(),
        run.scheduled_start,
        run.quantum_cycles
    )?;
    let late: Vec<u64> = run
        .starts
        .iter()
        .enumerate()
        .map(|(index, &start)| start.saturating_sub(run.scheduled_start + index as u64 * run.quantum_cycles))
        .collect();
    for (first, chunk) in run.counts.chunks(DUMP_LINE).enumerate() {
        writeln!(out, "FTQ-COUNTS {} {}", first * DUMP_LINE, joined(chunk))?;
    }
    for (first, chunk) in late.chunks(DUMP_LINE).enumerate() {
        writeln!(out, "FTQ-LATE {} {}", first * DUMP_LINE, joined(chunk))?;
    }
    writeln!(out, "FTQ-DATA end")
}

fn joined<T: std::fmt::Display>(values: &[T]) -> String {
    let mut text = String::with_capacity(values.len() * 6);
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        let _ = write!(text, "{value}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Quanta {
        Quanta { counts: vec![7, 0, 5], starts: vec![1000, 1150, 1205], scheduled_start: 1000, quantum_cycles: 100 }
    }

    #[test]
    fn the_dump() {
        let mut text = Vec::new();
        dump(&mut text, &run()).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "FTQ-DATA begin quanta=3 scheduled_start=1000 quantum_cycles=100\n\
             FTQ-COUNTS 0 7,0,5\n\
             FTQ-LATE 0 0,50,5\n\
             FTQ-DATA end\n"
        );
    }

    #[test]
    fn long_runs_are_cut_into_lines() {
        let many = Quanta {
            counts: vec![1; DUMP_LINE + 1],
            starts: vec![0; DUMP_LINE + 1],
            scheduled_start: 0,
            quantum_cycles: 0,
        };
        let mut text = Vec::new();
        dump(&mut text, &many).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains(&format!("\nFTQ-COUNTS {DUMP_LINE} 1\n")), "{text}");
        assert_eq!(text.lines().count(), 6);
    }

    #[test]
    fn the_files() {
        let prefix = std::env::temp_dir().join(format!("ftq-test-{}", std::process::id()));
        let prefix = prefix.to_str().unwrap();
        write_files(prefix, &run()).unwrap();
        assert_eq!(std::fs::read_to_string(format!("{prefix}.counts")).unwrap(), "7\n0\n5\n");
        assert_eq!(std::fs::read_to_string(format!("{prefix}.times")).unwrap(), "1000\n1150\n1205\n");
        let _ = std::fs::remove_file(format!("{prefix}.counts"));
        let _ = std::fs::remove_file(format!("{prefix}.times"));
    }
}
