//! Chaos runs: a seeded random sequence of core operations (roles, stop, start and restart
//! with each image, park and unpark, moves, Linux's online files, kills) thrown at a 4-core
//! machine while workloads run on it (processes, threads, the message stress, the fuzzer on
//! an AC through a syspage, FTQ). Most operations meet a core in the wrong state and are
//! refused; the point is that every kernel stays alive, nothing is lost, and once every core
//! is brought back to a running `full` TC, nothing has leaked.
//!
//! The suite runs the seeds of [`SEEDS`]; `REEF_CHAOS_SEEDS=5,6,7 cargo xtask test --only
//! chaos` runs others. A failing seed's script is in the test's serial log (its `exec=`).

use super::exec;
use crate::qemu::Machine;
use crate::test::runner::Integration;
use crate::test::serial::nothing_leaked;

/// The seeds the suite runs: among the first 130, which all pass, the four that found bugs
/// (14, 25, 42, 67: `docs/dynamic-cores.md`, "Tests") and eight whose scripts hold much
/// (roles, parks, restarts, stops, syspages, the stress). `REEF_CHAOS_SEEDS` runs any seed.
const SEEDS: [u64; 12] = [14, 15, 18, 25, 40, 42, 63, 67, 71, 74, 80, 95];

/// The seeds of the wide runs the suite runs (`REEF_CHAOS_WIDE_SEEDS` runs others).
const WIDE_SEEDS: [u64; 6] = [1, 2, 3, 4, 5, 6];

/// The kernel command line's `exec=` value holds at most this many characters.
const SCRIPT_LIMIT: usize = 1024;

/// Workloads started in the background; `{seed}` becomes a number drawn for it.
const WORKLOADS: &[&str] = &[
    "spawn 1 /bin/proctest &",
    "spawn 2 /bin/proctest --threads-for 400 8 &",
    "spawn 2 /bin/ftq --quiet 30000 20 >/dev/null &",
    "spawn 3 /bin/sysfuzz --seed {seed} --calls 5000 >/dev/null &",
    "msg stress 2000 &",
    "execac -1 /bin/ftq --quiet 20000 20 >/dev/null &",
    "execac --syspage -1 /bin/sysfuzz --seed {seed} --calls 3000 >/dev/null &",
    "spawn 1 /bin/sh -c 'for i in $(seq 200); do echo $i>/tmp/c$$; cat /tmp/c$$; done>/dev/null' &",
];

/// The wide runs' further workloads: a pipeline across two cores (through the file
/// service), a process of 100 threads, launchers in a loop, a program not waited for.
const WIDE_WORKLOADS: &[&str] = &[
    "spawn 1 /bin/sh -c '/bin/sh /tmp/w.sh | on 2 /bin/sh /tmp/r.sh' >/dev/null &",
    "spawn 3 /bin/proctest --threads-for 600 100 &",
    "spawn 2 /bin/sh -c 'for i in 1 2 3 4 5 6; do on 3 /bin/true; spawn 1 /bin/true; done' >/dev/null &",
    "spawn --no-wait 3 /bin/sleep 0.3 >/dev/null;",
];

/// The wide runs' further operations: a kill of everything but init and the shell, and a
/// move of the last job to a core that may not take it.
const WIDE_OPERATIONS: &[&str] = &["kill -9 -1 2>/dev/null;", "move $! {core};"];

/// What the wide runs' pipeline runs, written before anything else.
const WIDE_HEAD: &str = "printf 'for i in $(seq 300); do echo abc; done\\n' >/tmp/w.sh; \
                         printf 'while read x; do echo $x >/tmp/p$$; cat /tmp/p$$; done\\n' >/tmp/r.sh;";

/// Operations run in the foreground; `{core}` becomes core 1, 2 or 3 and `{other}` another
/// core (0 included). `$!` is the last workload's pid (its `spawn` or `execac` on core 0).
const OPERATIONS: &[&str] = &[
    "role {core} tc;",
    "role {core} ac;",
    "role {core} kc;",
    "core stop {core};",
    "core stop {core} --keep;",
    "core start {core};",
    "core start {core} /boot/full-v2;",
    "core restart {core} /boot/full;",
    "core restart {core} /boot/full-v2;",
    "core restart {core} /boot/rt;",
    "core restart {core} /boot/multi;",
    "core park {core} {other};",
    "core unpark {core};",
    "core unpark {core} {other};",
    "echo 0 >/sys/devices/system/cpu/cpu{core}/online;",
    "echo 1 >/sys/devices/system/cpu/cpu{core}/online;",
    "move $! {other};",
    "move 1 {other};",
    "kill $!;",
    "kill -9 $!;",
    "execac --syspage {core} /bin/syscallbench --syspage --only batch >/dev/null &",
    "sleep 0.1;",
    "sleep 0.2;",
    "/bin/cores >/dev/null;",
    "syscalls >/dev/null;",
];

/// Brings every core back (unparked, started, on the booted image, a TC), waits for the
/// workloads, ends what still runs (a `spawn --no-wait`'s program, a job the script left),
/// brings init home, removes `files` (what file loops cut short left), then prints the tables
/// the checks read.
fn tail(files: &str) -> String {
    format!(
        "for c in 1 2 3; do core unpark $c; core start $c; done>/dev/null 2>&1; wait; \
         kill -9 -1 2>/dev/null; sleep 0.3; for c in 1 2 3; do core start $c; core restart $c /boot/full; role $c tc; done>/dev/null 2>&1; \
         move 1 0; rm -f {files}; echo CHAOS-DONE; /bin/cores; /bin/ps"
    )
}

/// The plain runs' files: the shell loop's.
const PLAIN_FILES: &str = "/tmp/c*";
/// The wide runs' files: the shell loop's and the pipeline's.
const WIDE_FILES: &str = "/tmp/c* /tmp/p* /tmp/w.sh /tmp/r.sh";

/// What a family of chaos runs draws from.
struct Flavor {
    workloads: Vec<&'static str>,
    operations: Vec<&'static str>,
    head: &'static str,
    tail: String,
}

impl Flavor {
    /// The first chaos runs' (their seeds keep their scripts).
    fn plain() -> Self {
        Self { workloads: WORKLOADS.to_vec(), operations: OPERATIONS.to_vec(), head: "", tail: tail(PLAIN_FILES) }
    }

    /// The wide runs': the plain draws and more.
    fn wide() -> Self {
        Self {
            workloads: [WORKLOADS, WIDE_WORKLOADS].concat(),
            operations: [OPERATIONS, WIDE_OPERATIONS].concat(),
            head: WIDE_HEAD,
            tail: tail(WIDE_FILES),
        }
    }
}

/// SplitMix64: a small generator whose sequence is the same on every host.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `bound` (not 0).
    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

/// The script of `seed`: as many random steps as fit the command line, then the tail.
pub(super) fn script(seed: u64) -> String {
    script_of(&Flavor::plain(), seed)
}

/// The script of `seed` drawn from `flavor`: its head, as many random steps as fit the
/// command line, its tail.
fn script_of(flavor: &Flavor, seed: u64) -> String {
    let mut random = SplitMix(seed);
    let mut steps: Vec<String> = if flavor.head.is_empty() { Vec::new() } else { vec![flavor.head.to_string()] };
    loop {
        let step = if random.below(10) < 3 {
            let seed = random.below(1000).to_string();
            flavor.workloads[random.below(flavor.workloads.len())].replace("{seed}", &seed)
        } else {
            let core = 1 + random.below(3);
            let other = (core + 1 + random.below(3)) % 4;
            flavor.operations[random.below(flavor.operations.len())]
                .replace("{core}", &core.to_string())
                .replace("{other}", &other.to_string())
        };
        let length = steps.iter().map(|s| s.len() + 1).sum::<usize>() + step.len() + 1 + flavor.tail.len();
        if length > SCRIPT_LIMIT {
            break;
        }
        steps.push(step);
    }
    format!("{} {}", steps.join(" "), flavor.tail)
}

/// The seeds to run: those of the variable `name` (comma-separated) or `default`.
fn seeds(name: &str, default: &[u64]) -> Vec<u64> {
    match std::env::var(name) {
        Ok(list) => list
            .split(',')
            .filter_map(|seed| {
                let parsed = seed.trim().parse().ok();
                if parsed.is_none() {
                    eprintln!("xtask: {name}: `{seed}` is not a seed, skipped: give numbers, e.g. 1,2,3");
                }
                parsed
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

/// What a chaos run must show: it finished, no kernel faulted, no workload failed, every
/// stress balanced, every core back as a running `full` TC, and nothing leaked.
fn check(serial: &str) -> Result<(), String> {
    if !serial.lines().any(|line| line.trim() == "CHAOS-DONE") {
        return Err("the script did not reach its end".into());
    }
    if let Some(line) = serial.lines().find(|line| line.contains("FAULT core") || line.contains("panicked")) {
        return Err(format!("a kernel faulted: {line}"));
    }
    let failed: Vec<&str> = serial.lines().filter(|l| l.starts_with("TEST ") && l.contains(" fail")).collect();
    if !failed.is_empty() {
        return Err(format!("a workload failed: {}", failed.join(" | ")));
    }
    for stress in serial.lines().filter(|line| line.starts_with("stress: ")) {
        if !stress.contains("order/checksum errors 0") || !stress.contains(" dropped 0 ") {
            return Err(format!("a message stress lost or disordered messages: {stress}"));
        }
    }
    for core in 1..4 {
        let row = format!("{core}     {core}     running       TC    full ");
        if !serial.lines().any(|line| line.starts_with(&row)) {
            return Err(format!("core {core} is not a running TC on full at the end"));
        }
    }
    nothing_leaked(serial, 4)
}

/// The chaos runs, one per seed and family.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    for seed in seeds("REEF_CHAOS_SEEDS", &SEEDS) {
        list.push(Integration {
            name: format!("chaos-seed-{seed}-4-cores"),
            machine: machine(4, &exec(&script(seed))).with_timeout(240),
            expected_status: 0,
            check: Box::new(check),
        });
    }
    let wide = Flavor::wide();
    for seed in seeds("REEF_CHAOS_WIDE_SEEDS", &WIDE_SEEDS) {
        list.push(Integration {
            name: format!("chaos-wide-seed-{seed}-4-cores"),
            machine: machine(4, &exec(&script_of(&wide, seed))).with_timeout(240),
            expected_status: 0,
            check: Box::new(check),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_script_that_fits_the_command_line() {
        for seed in 0..200 {
            let script = script(seed);
            assert_eq!(script, super::script(seed));
            assert!(script.len() <= SCRIPT_LIMIT, "seed {seed}: {} characters", script.len());
            assert!(script.ends_with(&tail(PLAIN_FILES)));
            assert!(!script.contains('"') && !script.contains('{'), "seed {seed}: {script}");
            assert!(script.split(';').count() > 8, "seed {seed} has few steps: {script}");
        }
        assert_ne!(script(1), script(2));
    }

    #[test]
    fn the_plain_scripts_stay_what_they_were() {
        // Seed 373's script, which found a leak, as it was drawn before the wide runs came.
        assert!(script(373)
            .starts_with("sleep 0.1; core stop 2; core start 2 /boot/full-v2; spawn 3 /bin/sysfuzz --seed 372"));
    }

    #[test]
    fn a_wide_seed_gives_a_script_with_its_head_and_tail() {
        let wide = Flavor::wide();
        let mut drew_a_wide_step = false;
        for seed in 0..200 {
            let script = script_of(&wide, seed);
            assert!(script.len() <= SCRIPT_LIMIT, "seed {seed}: {} characters", script.len());
            assert!(script.starts_with(WIDE_HEAD) && script.ends_with(&tail(WIDE_FILES)));
            assert!(!script.contains('"') && !script.contains('{'), "seed {seed}: {script}");
            let own = |step: &&str| script.contains(step.split(' ').take(3).collect::<Vec<_>>().join(" ").as_str());
            drew_a_wide_step |= WIDE_WORKLOADS.iter().any(own);
        }
        assert!(drew_a_wide_step);
    }
}
