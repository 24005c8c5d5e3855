//! Readers of a run's serial output: the checks the catalogue's runs are made of.

/// Checks that a run's `TEST` lines all passed and the summary says so.
pub(crate) fn all_tests_passed(serial: &str, expected: usize) -> Result<(), String> {
    let failed: Vec<&str> = serial.lines().filter(|l| l.starts_with("TEST ") && l.contains(" fail ")).collect();
    if !failed.is_empty() {
        return Err(format!("in-guest failures: {}", failed.join(" | ")));
    }
    let passed = serial.lines().filter(|l| l.starts_with("TEST ") && l.split_whitespace().nth(2) == Some("ok")).count();
    let summary = format!("{expected} passed, 0 failed");
    if passed != expected || !serial.lines().any(|l| l.trim() == summary) {
        return Err(format!("expected {expected} TEST ok lines and `{summary}`, got {passed}"));
    }
    Ok(())
}

/// The run printed `text`; else the error says what that means.
pub(crate) fn printed(serial: &str, text: &str, missing: &str) -> Result<(), String> {
    serial.contains(text).then_some(()).ok_or_else(|| missing.to_string())
}

/// Every `needle` printed, in order, each after the one before.
pub(crate) fn printed_in_order(serial: &str, needles: &[&str]) -> Result<(), String> {
    let mut rest = serial;
    for needle in needles {
        match rest.find(needle) {
            Some(at) => rest = &rest[at + needle.len()..],
            None => return Err(format!("`{needle}` missing (or out of order) in the shell's output")),
        }
    }
    Ok(())
}

/// `count` lines `TEST <name> ok` (a `name` ending in `-` takes every name it begins), none
/// failed.
pub(crate) fn test_lines_ok(serial: &str, name: &str, count: usize) -> Result<(), String> {
    let prefix = if name.ends_with('-') { format!("TEST {name}") } else { format!("TEST {name} ") };
    let lines: Vec<&str> = serial.lines().filter(|l| l.starts_with(&prefix)).collect();
    let ok = lines.iter().filter(|l| l.split_whitespace().nth(2) == Some("ok")).count();
    if ok != count || lines.len() != count {
        return Err(format!("expected {count} `TEST {name} ok` lines, got {lines:?}"));
    }
    Ok(())
}

/// How many lines `pid <n> on core <core> <how>` `/bin/spawn` printed (`how`: `exited with
/// status 0`, `was killed by signal 9`): the pid of a process on core 0 depends on how many
/// the shell forked before it, so only the core and the end are checked.
pub(crate) fn spawn_lines(serial: &str, core: usize, how: &str) -> usize {
    let tail = format!(" on core {core} {how}");
    serial
        .lines()
        .filter(|line| {
            line.strip_prefix("pid ")
                .and_then(|rest| rest.strip_suffix(&tail))
                .is_some_and(|pid| pid.parse::<u32>().is_ok())
        })
        .count()
}

/// `msg bench` ran every measurement to the end: no `BENCH-ERROR`, a `BENCH-PROGRESS` line
/// per measurement, and each figure, with multicast up to `members` members, printed once with
/// samples and with only measured statistics: min <= p5 <= median <= p95 <= max, and on every
/// difference of two TSC readings a count of the negative ones. (Benchmarks never fail on a
/// number; this only checks that they run and report what they measured.)
pub(crate) fn every_bench_figure(serial: &str, members: usize) -> Result<(), String> {
    if let Some(error) = serial.lines().find(|l| l.starts_with("BENCH-ERROR")) {
        return Err(error.to_string());
    }
    let progress = serial.lines().filter(|l| l.starts_with("BENCH-PROGRESS ")).count();
    if progress < 10 {
        return Err(format!("expected a BENCH-PROGRESS line per measurement (10 or more), got {progress}"));
    }
    let mut wanted: Vec<(String, String)> = [
        "cacheline_roundtrip",
        "ipi_send_cost",
        "ipi_out_poll_back",
        "ipi_pingpong_two_interrupts",
        "local_drain_empty",
        "local_drain_one",
    ]
    .iter()
    .map(|name| (name.to_string(), "-".to_string()))
    .collect();
    for mode in ["poll", "ipi", "hybrid"] {
        for name in [
            "message_roundtrip",
            "message_send_cost",
            "message_send_to_wake",
            "message_wake_to_dequeue",
            "message_dequeue_to_handler",
        ] {
            wanted.push((name.into(), mode.into()));
        }
    }
    for (name, mode) in
        [("message_roundtrip_drain", "poll"), ("message_roundtrip_drain", "ipi"), ("message_roundtrip_sleeping", "ipi")]
    {
        wanted.push((name.into(), mode.into()));
    }
    for chunks in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] {
        wanted.push(("large_roundtrip".into(), chunks.to_string()));
    }
    for count in 1..=members {
        for name in ["multicast_insert_cost", "multicast_notify_cost", "multicast_send_cost"] {
            wanted.push((name.into(), count.to_string()));
        }
    }
    wanted.push(("icc_roundtrip".into(), "hybrid".into()));
    for (name, parameter) in wanted {
        let prefix = format!("BENCH name={name} param={parameter} ");
        let lines: Vec<&str> = serial.lines().filter(|l| l.starts_with(&prefix)).collect();
        let [line] = lines[..] else {
            return Err(format!("expected one `{prefix}` line, got {lines:?}"));
        };
        let field = |key: &str| {
            line.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse::<f64>().ok())
        };
        if !field("n").is_some_and(|n| n > 0.0) {
            return Err(format!("no samples: {line}"));
        }
        let statistics: Option<Vec<f64>> = ["min", "p5", "median", "p95", "max"].iter().map(|k| field(k)).collect();
        match statistics {
            Some(s) if s.windows(2).all(|pair| pair[0] <= pair[1]) => {}
            _ => return Err(format!("statistics missing or out of order: {line}")),
        }
        let difference = name.starts_with("message_") && name.contains("_to_");
        if difference && !field("negative").is_some_and(|n| n <= field("n").unwrap_or(0.0)) {
            return Err(format!("a difference of TSC readings without its count of negative ones: {line}"));
        }
    }
    Ok(())
}

/// Every started core printed its banner, once.
pub(crate) fn banners(serial: &str, cores: usize) -> Result<(), String> {
    for core in 0..cores {
        let prefix = format!("[c{core} INFO ] core {core} up: APIC id");
        let count = serial.lines().filter(|l| l.starts_with(&prefix)).count();
        if count != 1 {
            return Err(format!("core {core} printed its banner {count} times"));
        }
        let line = serial.lines().find(|l| l.starts_with(&prefix)).unwrap_or_default();
        if !(line.contains("partition 0x") && line.contains("image full build ")) {
            return Err(format!("banner of core {core} lacks partition or image: {line}"));
        }
    }
    Ok(())
}

/// Rows of the `cores` command: (id, state).
pub(crate) fn core_states(serial: &str) -> Vec<(usize, String)> {
    let Some(start) = serial.lines().position(|l| l.starts_with("core  apic  state")) else {
        return Vec::new();
    };
    serial
        .lines()
        .skip(start + 1)
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let id = words.next()?.parse().ok()?;
            let _apic = words.next()?;
            Some((id, words.next()?.to_string()))
        })
        .collect()
}

/// `[start, end)` of every `mem` line whose first word is `word`.
pub(crate) fn mem_ranges(serial: &str) -> Vec<(String, u64, u64)> {
    serial
        .lines()
        .filter_map(|l| {
            let range = l.split_whitespace().find(|w| w.starts_with("0x") && w.contains('-'))?;
            let (a, b) = range.split_once('-')?;
            let parse = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok();
            let kind = if l.starts_with("shared") {
                "shared"
            } else if l.starts_with("core") {
                "private"
            } else {
                return None;
            };
            Some((kind.to_string(), parse(a)?, parse(b)?))
        })
        .collect()
}

/// The `ps` table's rows: (core, processes, threads, pids, stacks, frames, leaked frames).
pub(crate) fn process_rows(serial: &str) -> Vec<[u64; 7]> {
    let lines: Vec<&str> = serial.lines().collect();
    let Some(start) = lines.iter().rposition(|l| l.starts_with("core  processes  threads")) else {
        return Vec::new();
    };
    lines
        .into_iter()
        .skip(start + 1)
        .map_while(|l| {
            let numbers: Vec<u64> = l.split_whitespace().map_while(|w| w.parse().ok()).collect();
            (numbers.len() == 9)
                .then(|| [numbers[0], numbers[1], numbers[2], numbers[3], numbers[4], numbers[5], numbers[8]])
        })
        .collect()
}

/// The processes the last `ps` table lists below it, those of the core `ps` ran on:
/// (pid, name, threads).
pub(crate) fn listed_processes(serial: &str) -> Vec<(u32, String, u64)> {
    let lines: Vec<&str> = serial.lines().collect();
    let Some(start) = lines.iter().rposition(|l| l.starts_with("core  processes  threads")) else {
        return Vec::new();
    };
    lines[start + 1..]
        .iter()
        .skip_while(|l| !l.starts_with("core "))
        .skip(1)
        .map_while(|l| {
            let (pid, rest) = l.strip_prefix("  pid ")?.split_once(" (")?;
            let (name, rest) = rest.split_once("): ")?;
            Some((pid.parse().ok()?, name.to_string(), rest.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// The leak check after a run whose last command is Reef's `/bin/ps` (`ps` alone is busybox's),
/// which the user shell runs on core 0. Every other core shows no process, thread, pid, thread
/// stack or frame left. Core 0 shows exactly the shell's own processes, which `ps` lists below
/// the table: init (pid 1), then `sh` unless ash ran `ps` in its own place (it does so for the
/// last command of a `-c` line), then `ps` itself; one thread, pid and stack each. No core
/// misses a frame from its free list. (Core 0's `frames` column is what those processes held at
/// its last fork or exit, so it is not compared with anything.)
pub(crate) fn nothing_leaked(serial: &str, cores: usize) -> Result<(), String> {
    let rows = process_rows(serial);
    if rows.len() != cores {
        return Err(format!("expected the `ps` table with {cores} rows, got {rows:?}"));
    }
    let listed = listed_processes(serial);
    let names: Vec<&str> = listed.iter().map(|(_, name, _)| name.as_str()).collect();
    let shell_only = matches!(names[..], ["init", "ps"] | ["init", "sh", "ps"])
        && listed[0].0 == 1
        && listed.iter().all(|(_, _, threads)| *threads == 1);
    if !shell_only {
        return Err(format!("core 0 should hold init, sh and ps only, one thread each: it lists {listed:?}"));
    }
    for [core, processes, threads, pids, stacks, frames, leaked] in rows {
        let alive = if core == 0 { listed.len() as u64 } else { 0 };
        let frames = if core == 0 { 0 } else { frames };
        if [processes, threads, pids, stacks] != [alive; 4] || frames != 0 || leaked != 0 {
            return Err(format!(
                "core {core} kept processes {processes}, threads {threads}, pids {pids}, stacks {stacks}, \
                 frames {frames}, leaked frames {leaked} (expected {alive} of each of the first four)"
            ));
        }
    }
    Ok(())
}

/// The rows under each header line: for every line equal to `header` (trailing blanks
/// ignored), the lines after it for which `is_row` holds.
pub(crate) fn tables<'a>(serial: &'a str, header: &str, is_row: impl Fn(&str) -> bool) -> Vec<Vec<&'a str>> {
    let lines: Vec<&str> = serial.lines().map(str::trim_end).collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, line)| **line == header)
        .map(|(at, _)| lines[at + 1..].iter().copied().take_while(|line| is_row(line)).collect())
        .collect()
}

/// The first two tables a run of `<command>; cat /proc/reef/<view>` printed: the program's
/// (the kernel's text through the `CONTROL` call), then the view the kernel formats for the
/// file service, each with `rows` rows.
pub(crate) fn program_and_kernel_tables<'a>(
    serial: &'a str,
    header: &str,
    rows: usize,
    is_row: impl Fn(&str) -> bool,
) -> Result<[Vec<&'a str>; 2], String> {
    let mut found = tables(serial, header, is_row);
    found.truncate(2);
    match <[Vec<&str>; 2]>::try_from(found) {
        Ok(pair) if pair.iter().all(|table| table.len() == rows) => Ok(pair),
        Ok(pair) => Err(format!("expected two `{header}` tables of {rows} rows, got {pair:?}")),
        Err(found) => Err(format!("expected `{header}` twice (program, then /proc/reef), got {} tables", found.len())),
    }
}

/// The first `count` words of every row, which must agree between the program's table and the
/// kernel's view (the rest are counters and clocks that moved in between).
pub(crate) fn same_leading_words(tables: &[Vec<&str>; 2], count: usize) -> Result<(), String> {
    let leading = |table: &Vec<&str>| -> Vec<Vec<String>> {
        table.iter().map(|row| row.split_whitespace().take(count).map(str::to_string).collect()).collect()
    };
    let (program, view) = (leading(&tables[0]), leading(&tables[1]));
    (program == view).then_some(()).ok_or(format!("the program printed {program:?}, /proc/reef {view:?}"))
}

/// fstest's lines in a run: no `TEST fs-*` line failed, and there are `runs` summaries
/// `fstest: N passed, 0 failed` whose counts add up to the `TEST fs-*` lines; the counts, in
/// order.
pub(crate) fn fstest_passed(serial: &str, runs: usize) -> Result<Vec<usize>, String> {
    let lines: Vec<&str> = serial.lines().filter(|l| l.starts_with("TEST fs-")).collect();
    let failed: Vec<&str> = lines.iter().copied().filter(|l| l.split_whitespace().nth(2) != Some("ok")).collect();
    if !failed.is_empty() {
        return Err(format!("fstest failures: {}", failed.join(" | ")));
    }
    let summaries: Vec<&str> = serial.lines().filter(|l| l.starts_with("fstest: ") && l.ends_with(" failed")).collect();
    let counts: Vec<usize> = summaries
        .iter()
        .map(|l| l.strip_prefix("fstest: ")?.strip_suffix(" passed, 0 failed")?.parse().ok())
        .collect::<Option<_>>()
        .ok_or_else(|| format!("a run of fstest did not pass: {summaries:?}"))?;
    if counts.len() != runs || counts.iter().sum::<usize>() != lines.len() {
        return Err(format!(
            "expected {runs} `fstest: N passed, 0 failed` lines covering the {} `TEST fs-` lines, got {summaries:?}",
            lines.len()
        ));
    }
    Ok(counts)
}

/// The first line of `/proc/reef/files` after `from`: (open files, pipes, pipe pages, parked).
pub(crate) fn file_counts(serial: &str) -> Vec<[u64; 4]> {
    serial
        .lines()
        .filter(|l| l.starts_with("open files "))
        .filter_map(|l| {
            let numbers: Vec<u64> = l
                .split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .filter_map(|w| w.parse().ok())
                .collect();
            Some([*numbers.first()?, *numbers.get(1)?, *numbers.get(2)?, *numbers.get(3)?])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fstest_runs_pass_only_when_every_line_and_summary_does() {
        let run = |core: usize| {
            format!(
                "fstest: pid 1 on core {core}, scratch directory /tmp/fstest-1\nTEST fs-scratch ok /tmp/fstest-1\n\
                 TEST fs-append ok writes land at the end\nfstest: 2 passed, 0 failed\n"
            )
        };
        let two = format!("{}{}", run(0), run(1));
        assert_eq!(fstest_passed(&two, 2), Ok(vec![2, 2]));
        assert!(fstest_passed(&run(0), 2).unwrap_err().contains("expected 2"));
        let failed = two.replacen("TEST fs-append ok", "TEST fs-append fail", 1);
        assert!(fstest_passed(&failed, 2).unwrap_err().contains("fstest failures: TEST fs-append fail"));
        let dropped = two.replacen("TEST fs-append ok writes land at the end\n", "", 1);
        assert!(fstest_passed(&dropped, 2).unwrap_err().contains("covering the 3"), "a line missing");
        let summary = two.replacen("2 passed, 0 failed", "1 passed, 1 failed", 1);
        assert!(fstest_passed(&summary, 2).unwrap_err().contains("did not pass"));
    }
}
