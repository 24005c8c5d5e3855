//! `cargo xtask test`: check, host tests, loom models, then QEMU integration runs.

mod bash_suite;
mod chaos;
mod cores;
mod foreign_crates;
mod roles;
mod unix_files;
mod unix_semantics;

use crate::qemu::{self, Accel, Machine};
use crate::tools::{self, cargo, run_checked};
use std::path::Path;
use std::time::{Duration, Instant};

/// What a run must have printed; the error says what was missing.
type SerialCheck = Box<dyn Fn(&str) -> Result<(), String>>;

/// `expected_status` of a run whose guest may exit with any status (through isa-debug-exit).
const ANY_STATUS: u32 = u32::MAX;

/// `expected_status` of a run that must hang: the watchdog ends it, well before its timeout,
/// and its check reads the kernel's dump.
const STALLS: u32 = u32::MAX - 1;

/// One QEMU integration run: a machine, what the guest must exit with, and what it must print.
struct Integration {
    name: String,
    machine: Machine,
    expected_status: u32,
    check: SerialCheck,
}

/// Checks that a run's `TEST` lines all passed and the summary says so.
fn all_tests_passed(serial: &str, expected: usize) -> Result<(), String> {
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

/// Whether a run named `name` is selected by `cargo xtask test`'s `--only`, read from the
/// command line before the runs are listed: suites whose inputs are costly to prepare (the
/// foreign suites' builds and reference runs) prepare them only when one of their runs is.
fn is_selected(name: &str) -> bool {
    let arguments: Vec<String> = std::env::args().collect();
    let only = arguments.iter().position(|a| a == "--only").and_then(|at| arguments.get(at + 1));
    only.is_none_or(|only| name.contains(only.as_str()))
}

/// A run that fails at once, after a boot that costs seconds, with why its suite could not be
/// prepared (a fetch or a build that failed): the failure is reported as that run's.
fn unprepared(name: String, why: &str, machine: &dyn Fn(usize, &str) -> Machine) -> Integration {
    let why = format!("the suite could not be prepared: {why}");
    Integration {
        name,
        machine: machine(1, &exec("true")),
        expected_status: 0,
        check: Box::new(move |_| Err(why.clone())),
    }
}

/// The run printed `text`; else the error says what that means.
fn printed(serial: &str, text: &str, missing: &str) -> Result<(), String> {
    serial.contains(text).then_some(()).ok_or_else(|| missing.to_string())
}

/// `exec="<line>"` for the kernel command line: the user shell (`sh -c`) runs the line and the
/// machine powers off with its status. The lines are this file's own: one that the kernel
/// command line cannot carry is a mistake here, so it panics.
fn exec(line: &str) -> String {
    qemu::exec_argument(line).unwrap_or_else(|why| panic!("{why}"))
}

/// One shell line of `commands`, each ended by `;`, or by nothing after a `&` (`a &; b` is
/// a syntax error in sh).
fn shell_line(commands: &[impl AsRef<str>]) -> String {
    let mut line = String::new();
    for command in commands {
        if !line.is_empty() {
            line.push_str(if line.ends_with('&') { " " } else { "; " });
        }
        line.push_str(command.as_ref());
    }
    line
}

/// How many lines `pid <n> on core <core> <how>` `/bin/spawn` printed (`how`: `exited with
/// status 0`, `was killed by signal 9`): the pid of a process on core 0 depends on how many
/// the shell forked before it, so only the core and the end are checked.
fn spawn_lines(serial: &str, core: usize, how: &str) -> usize {
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
fn every_bench_figure(serial: &str, members: usize) -> Result<(), String> {
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
fn banners(serial: &str, cores: usize) -> Result<(), String> {
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
fn core_states(serial: &str) -> Vec<(usize, String)> {
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
fn mem_ranges(serial: &str) -> Vec<(String, u64, u64)> {
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

fn integrations(accel: Accel, initrd: &Path) -> Vec<Integration> {
    let mut list = Vec::new();
    let machine = |cores: usize, args: &str| {
        let mut m = Machine::new(cores);
        m.accel = accel;
        m.kernel_args = args.to_string();
        m.timeout = Duration::from_secs(60);
        m.watchdog = Some(qemu::TEST_WATCHDOG);
        m.initrd = Some(initrd.to_path_buf());
        m
    };
    let mut core_counts = vec![1, 2, 3, 4];
    if accel == Accel::Tcg {
        core_counts.push(8);
    }
    for cores in core_counts {
        list.push(Integration {
            name: format!("boot-{cores}-cores"),
            machine: machine(cores, "test=boot,isolation,frames,smap"),
            expected_status: 0,
            check: Box::new(move |serial| {
                banners(serial, cores)?;
                all_tests_passed(serial, 4)?;
                let up = format!("{cores} kernel instances up of {cores} cores");
                serial.contains(&up).then_some(()).ok_or(format!("missing `{up}`"))
            }),
        });
    }
    for cores in [2usize, 4] {
        list.push(Integration {
            name: format!("msg-stress-{cores}-cores"),
            machine: {
                let mut m = machine(cores, "test=icc,msg-garbage,msg-stress,boot");
                m.timeout = Duration::from_secs(240);
                // A stress test prints its line at its end, minutes in under a loaded TCG.
                m.watchdog = Some(Duration::from_secs(120));
                m
            },
            expected_status: 0,
            check: Box::new(|serial| all_tests_passed(serial, 4)),
        });
    }
    for cores in [3usize, 4] {
        list.push(Integration {
            name: format!("msg-restart-{cores}-cores"),
            machine: {
                let mut m = machine(cores, "test=msg-restart:2,icc,boot");
                m.timeout = Duration::from_secs(240);
                m.watchdog = Some(Duration::from_secs(120));
                m
            },
            expected_status: 0,
            check: Box::new(|serial| all_tests_passed(serial, 3)),
        });
    }
    list.push(Integration {
        name: "msg-garbage-1-core".into(),
        machine: machine(1, "test=icc,msg-garbage"),
        expected_status: 0,
        check: Box::new(|serial| all_tests_passed(serial, 2)),
    });
    list.push(Integration {
        name: "msg-ping".into(),
        machine: machine(2, &exec("msg ping 1 50")),
        expected_status: 0,
        check: Box::new(|serial| printed(serial, "50 pings to core 1", "no ping summary")),
    });
    list.push(Integration {
        name: "msg-bench-runs".into(),
        machine: machine(4, &exec("msg bench 1 40")),
        expected_status: 0,
        check: Box::new(|serial| every_bench_figure(serial, 3)),
    });
    list.push(Integration {
        name: "msg-bench-bounded".into(),
        machine: {
            // Before the bound, 100000 iterations ran out of heap: a panic, then silence.
            let mut m = machine(2, &exec("msg bench 1 100000"));
            m.timeout = Duration::from_secs(30);
            m
        },
        expected_status: 1,
        check: Box::new(|serial| {
            let wanted = "error: `100000` is not a number of iterations: give 10 to 50000";
            serial.contains(wanted).then_some(()).ok_or(format!("no one-line refusal `{wanted}…`"))
        }),
    });
    list.push(Integration {
        name: "fault-containment".into(),
        machine: machine(4, &format!("test=fault:2 {}", exec("cores"))),
        expected_status: 0,
        check: Box::new(|serial| {
            all_tests_passed(serial, 1)?;
            if !serial.contains("FAULT core 2: vector 14 (page fault)") {
                return Err("no fault report from core 2".into());
            }
            let states = core_states(serial);
            let expected = [(0, "running"), (1, "running"), (2, "faulted"), (3, "running")];
            for (core, state) in expected {
                if !states.iter().any(|(c, s)| *c == core && s == state) {
                    return Err(format!("`cores` does not show core {core} {state}: {states:?}"));
                }
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "cores-shows-each-image".into(),
        machine: machine(4, &format!("cores=2 {}", exec("cores"))),
        expected_status: 0,
        check: Box::new(|serial| {
            let images: Vec<(usize, String)> = serial
                .lines()
                .skip_while(|l| !l.starts_with("core  apic  state"))
                .skip(1)
                .filter_map(|l| {
                    let words: Vec<&str> = l.split_whitespace().collect();
                    Some((words.first()?.parse().ok()?, words.get(4)?.to_string()))
                })
                .collect();
            let expected: Vec<(usize, String)> =
                [(0, "full"), (1, "full"), (2, "-"), (3, "-")].iter().map(|(c, i)| (*c, i.to_string())).collect();
            (images == expected).then_some(()).ok_or(format!("images per core {images:?}, expected {expected:?}"))
        }),
    });
    list.push(Integration {
        name: "msg-mode-asks-the-owner".into(),
        machine: machine(4, &format!("test=fault:2 {}", exec("msg mode 2 poll"))),
        expected_status: 1,
        check: Box::new(|serial| {
            printed(
                serial,
                "error: core 2 kept its mode: core 2 is faulted",
                "a faulted core's notification mode was changed behind its back",
            )
        }),
    });
    list.push(Integration {
        name: "dead-target".into(),
        machine: machine(4, "test=fault:2,dead-target"),
        expected_status: 0,
        check: Box::new(|serial| all_tests_passed(serial, 2)),
    });
    list.push(Integration {
        name: "msg-bench-to-faulted-core".into(),
        machine: machine(4, &format!("test=fault:2 {}", exec("msg bench 2 10"))),
        expected_status: 1,
        check: Box::new(|serial| {
            printed(
                serial,
                "error: core 2 is faulted and takes no messages: `start 2` restarts it",
                "no error naming the faulted core",
            )
        }),
    });
    list.push(Integration {
        name: "stack-overflow-guard".into(),
        machine: machine(2, "test=stack-overflow:1,boot"),
        expected_status: 1,
        check: Box::new(|serial| {
            // `boot` fails on purpose (core 1 is down); the overflow test must pass.
            if !serial.lines().any(|l| l.starts_with("TEST stack-overflow:1 ok")) {
                return Err("no passing stack-overflow test".into());
            }
            printed(serial, "(kernel stack overflow: main stack)", "the fault report does not name the stack overflow")
        }),
    });
    for lock in ["console", "bootdriver"] {
        list.push(Integration {
            name: format!("fault-in-{lock}-lock"),
            machine: machine(4, &format!("test=fault-in-lock:1:{lock}")),
            expected_status: 0,
            check: Box::new(|serial| all_tests_passed(serial, 1)),
        });
    }
    list.push(Integration {
        name: "core-0-fault-exits".into(),
        machine: machine(2, "test=fault:0"),
        expected_status: 3,
        check: Box::new(|serial| {
            printed(serial, "FAULT core 0: vector 14 (page fault)", "no fault report from core 0")
        }),
    });
    list.push(Integration {
        name: "garbage-command-line".into(),
        machine: machine(2, "test=boot cores=lots timer_hz=0 frobnicate=1 log=loud \"unterminated"),
        expected_status: 0,
        check: Box::new(|serial| {
            banners(serial, 2)?;
            all_tests_passed(serial, 1)?;
            let diagnostics = serial.lines().filter(|l| l.starts_with("[c0 WARN ]") && l.contains("ignored")).count();
            (diagnostics == 5).then_some(()).ok_or(format!("expected 5 one-line diagnostics, got {diagnostics}"))
        }),
    });
    list.push(Integration {
        name: "boot-driver-from-core-1".into(),
        machine: machine(4, "cores=2 log=debug test=boot,bootdriver,icc"),
        expected_status: 0,
        check: Box::new(|serial| {
            all_tests_passed(serial, 3)?;
            banners(serial, 3)?;
            printed(
                serial,
                "[c1 DEBUG] boot driver: core 2 started",
                "core 1's boot driver did not report starting core 2",
            )
        }),
    });
    list.push(Integration {
        name: "syscallbench-trap".into(),
        machine: machine(
            3,
            &exec(
                "/bin/syscallbench --trap --uring --counts 1,100 --calls 1000 --batch 1,8 --threads 4 \
                 --per-thread 50 --repeat 2 --label t",
            ),
        ),
        expected_status: 0,
        check: Box::new(|serial| {
            for figure in ["bench=blocking mechanism=trap calls=100 ", "bench=batch mechanism=trap calls=1000 batch=1 "]
            {
                printed(serial, &format!("SYSCALLBENCH label=t {figure}"), &format!("no figure `{figure}`"))?;
            }
            printed(
                serial,
                "SYSCALLBENCH label=t bench=threads mechanism=trap calls=200 threads=4",
                "no threads figure",
            )?;
            printed(
                serial,
                "SYSCALLBENCH-SKIP label=t bench=batch mechanism=uring reason=no-io-uring",
                "no io_uring skip",
            )?;
            printed(serial, "SYSCALLBENCH-DONE label=t", "syscallbench did not finish")
        }),
    });
    list.push(Integration {
        name: "mem-3-cores".into(),
        machine: machine(3, &exec("mem")),
        expected_status: 0,
        check: Box::new(|serial| {
            let ranges = mem_ranges(serial);
            let private: Vec<_> = ranges.iter().filter(|r| r.0 == "private").collect();
            let shared: Vec<_> = ranges.iter().filter(|r| r.0 == "shared").collect();
            if private.len() != 3 || shared.len() != 1 {
                return Err(format!("expected 3 private partitions and 1 shared region: {ranges:?}"));
            }
            for (i, a) in ranges.iter().enumerate() {
                for b in &ranges[i + 1..] {
                    if a.1 < b.2 && b.1 < a.2 {
                        return Err(format!("{a:?} overlaps {b:?}"));
                    }
                }
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "unknown-command-status".into(),
        machine: machine(1, &exec("frobnicate")),
        // What a shell gives for a command it cannot find.
        expected_status: 127,
        check: Box::new(|serial| printed(serial, "sh: frobnicate: not found\n", "no error message")),
    });
    list.push(Integration {
        name: "typed-at-the-prompt".into(),
        machine: {
            let mut m = machine(2, "log=debug");
            // Typed into ash, one line per prompt; the first is edited with three DELs.
            m.typed = vec![
                ("reef:/tmp# ".into(), "msg stpts\x7f\x7f\x7fats\r".into()),
                ("reef:/tmp# ".into(), "frobnicate\r".into()),
                ("reef:/tmp# ".into(), "poweroff\r".into()),
            ];
            m
        },
        expected_status: 0,
        check: Box::new(|serial| {
            for wanted in [
                "console: COM1 input interrupts on GSI",
                "console: input arrives by interrupt",
                "ipis sent",
                "sh: frobnicate: not found",
                "powering off",
            ] {
                if !serial.contains(wanted) {
                    return Err(format!("the typed commands did not run: no `{wanted}`"));
                }
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "msg-bad-arguments-status".into(),
        machine: machine(2, &exec("msg mode 1 warp")),
        expected_status: 1,
        check: Box::new(|serial| {
            printed(
                serial,
                "error: `warp` is not a notification mode: use poll, ipi, hybrid or mwait",
                "no error naming the bad mode",
            )
        }),
    });
    list.push(Integration {
        name: "help-lists-every-command".into(),
        // `help` alone is ash's builtin (its own commands): Reef's list is `/bin/help`.
        machine: machine(2, &exec("/bin/help")),
        expected_status: 0,
        check: Box::new(|serial| {
            for (command, usage) in [
                ("help", "help"),
                ("cores", "cores"),
                ("mem", "mem"),
                ("start", "start <core>"),
                ("msg", "msg stats"),
                ("syscalls", "syscalls [core]"),
                ("ps", "ps"),
                ("poweroff", "poweroff"),
                ("on", "on <core> <program>"),
                ("spawn", "spawn [--no-wait] <core> <program>"),
            ] {
                let listed = serial.lines().any(|l| {
                    l.trim_start().strip_prefix(command).is_some_and(|rest| rest.trim_start().starts_with(usage))
                });
                if !listed {
                    return Err(format!("help does not list `{command}` with its usage `{usage}…`"));
                }
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "no-initramfs-powers-off".into(),
        machine: {
            // No programs, so no init and no shell: the kernel has none of its own to fall back on.
            let mut m = machine(2, "");
            m.initrd = None;
            m
        },
        expected_status: 127,
        check: Box::new(|serial| {
            let line = "/sbin/init did not start (no such file in the initramfs): nothing to run, powering off";
            printed(serial, line, "no one-line reason for ending the machine without init")
        }),
    });
    list.push(Integration {
        name: "poweroff".into(),
        machine: machine(4, &exec("poweroff")),
        expected_status: 0,
        check: Box::new(|serial| printed(serial, "powering off", "no poweroff message")),
    });
    list.push(Integration {
        // Hangs on purpose, a sleeper on each core: the watchdog asks for the kernel's dump.
        name: "watchdog-dump-2-cores".into(),
        machine: Machine {
            watchdog: Some(Duration::from_secs(8)),
            ..machine(2, &exec("on 1 sleep 1000 & sleep 1000"))
        },
        expected_status: STALLS,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &["[c0 WATCHDOG] dump asked", "[c0 WATCHDOG] core  processes  threads", "[c0 WATCHDOG] 1     "],
            )?;
            printed(serial, ") on core 1, parent ", "the dump lists no process of core 1")?;
            printed(serial, "[c0 WATCHDOG] /proc/reef/files: open files ", "the dump lacks /proc/reef/files")?;
            printed(serial, "[c0 WATCHDOG] end of the watchdog dump", "the dump did not end")
        }),
    });
    process_integrations(&mut list, &machine);
    file_integrations(&mut list, &machine);
    user_shell_integrations(&mut list, &machine);
    control_integrations(&mut list, &machine);
    roles::integrations(&mut list, &machine);
    cores::integrations(&mut list, &machine);
    chaos::integrations(&mut list, &machine);
    unix_semantics::integrations(&mut list, &machine);
    unix_files::integrations(&mut list, &machine);
    bash_suite::integrations(&mut list, &machine);
    foreign_crates::integrations(&mut list, &machine);
    list
}

/// The initramfs the QEMU runs boot, read back with the kernel's reader: `/etc/hello.txt`
/// holds [`tools::HELLO_TEXT`], every user program of this tree is in place, busybox is static
/// and every link in `/bin` leads to it or to a program.
fn initramfs_image_checks(initrd: &Path) -> Result<(), String> {
    let bytes = std::fs::read(initrd).map_err(|e| format!("reading {}: {e}", initrd.display()))?;
    let archive = initramfs::Archive::parse(&bytes).map_err(|e| format!("{}: {e}", initrd.display()))?;
    let file = |path: &str| -> Result<&[u8], String> {
        let entry = archive.resolve(path, true).map_err(|e| format!("{path}: {e}"))?;
        entry.is_file().then_some(entry.data).ok_or_else(|| format!("{path} is not a regular file"))
    };
    if file("/etc/hello.txt")? != tools::HELLO_TEXT.as_bytes() {
        return Err("/etc/hello.txt does not hold the known text".into());
    }
    for name in tools::USER_PROGRAMS {
        if tools::root().join("user").join(name).join("Cargo.toml").is_file() {
            let path = if name == "init" { "/sbin/init".to_string() } else { format!("/bin/{name}") };
            if tools::has_program_interpreter(file(&path)?) {
                return Err(format!("{path} needs a dynamic loader"));
            }
        }
    }
    if tools::has_program_interpreter(file("/bin/busybox")?) {
        return Err("/bin/busybox needs a dynamic loader".into());
    }
    let mut applets = 0;
    for entry in archive.read_dir("/bin").map_err(|e| format!("/bin: {e}"))? {
        if entry.is_symlink() {
            applets += 1;
            let target = archive.resolve(entry.name, true).map_err(|e| format!("{}: {e}", entry.name))?;
            if !target.is_file() {
                return Err(format!("/{} leads to no program", entry.name));
            }
        }
    }
    // Debian's busybox-static has some 270 applets; a handful means `--list` went wrong.
    if applets < 100 {
        return Err(format!("only {applets} busybox applet links in /bin"));
    }
    Ok(())
}

/// `cargo xtask run -- <command>` as a user meets it, against a stand-in emulator (a script
/// named by `REEF_QEMU` that prints its arguments and then never exits): what the guest prints
/// must reach the terminal as it comes, even when the run is killed at its timeout, and
/// `--gdb` must reach the emulator.
fn run_command_checks() -> Result<(), String> {
    let script = tools::root().join("target/stand-in-qemu.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo stand-in; exit 0; }\necho \"stand-in serial: $*\"\nexec sleep 60\n",
    )
    .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    run_checked(std::process::Command::new("chmod").arg("+x").arg(&script), "chmod the stand-in emulator")?;
    let xtask = std::env::current_exe().map_err(|e| format!("cannot find the xtask binary: {e}"))?;
    let run = |extra: &[&str]| -> Result<(String, String), String> {
        let output = std::process::Command::new(&xtask)
            .args(["run", "--cores", "1", "--timeout", "2"])
            .args(extra)
            .args(["--", "help"])
            .env("REEF_QEMU", &script)
            .output()
            .map_err(|e| format!("cannot run xtask: {e}"))?;
        if output.status.success() {
            return Err("`run` succeeded although the emulator never finished".into());
        }
        Ok((String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned()))
    };
    let (stdout, stderr) = run(&[])?;
    if !stdout.contains("stand-in serial:") {
        return Err(format!("the serial output of a run killed at its timeout was not printed: stdout {stdout:?}"));
    }
    if !stderr.contains("did not finish") {
        return Err(format!("no timeout message: stderr {stderr:?}"));
    }
    let (stdout, stderr) = run(&["--gdb"])?;
    if !stdout.contains("-s -S") || !stderr.contains("waits for gdb") {
        return Err(format!("--gdb with a command did not reach the emulator: {stdout:?} {stderr:?}"));
    }
    Ok(())
}

fn run_integration(test: &Integration, kernel: &Path) -> Result<Duration, String> {
    let (outcome, _) = qemu::boot(&test.machine, kernel, None)?;
    let verdict = if test.expected_status == STALLS {
        match outcome.stalled {
            Some(_) if outcome.elapsed < test.machine.timeout / 2 => (test.check)(&outcome.serial),
            Some(_) => Err(format!("the watchdog ended the run only after {:?}", outcome.elapsed)),
            None => Err(format!("expected the watchdog to end the run; timed out: {}", outcome.timed_out)),
        }
    } else if let Some(quiet) = outcome.stalled {
        Err(format!("watchdog: no output for {} s (the kernel's dump, if it came, is in the log)", quiet.as_secs()))
    } else if outcome.timed_out {
        Err(format!("timed out after {:?}", test.machine.timeout))
    } else if outcome.guest_status.is_none()
        || (test.expected_status != ANY_STATUS && outcome.guest_status != Some(test.expected_status))
    {
        Err(format!("guest exit status {:?}, expected {}", outcome.guest_status, test.expected_status))
    } else {
        (test.check)(&outcome.serial)
    };
    verdict
        .map(|()| outcome.elapsed)
        .map_err(|why| format!("{why}\n----- serial log -----\n{}----------------------", outcome.serial))
}

/// `cargo xtask test [--accel kvm|tcg] [--only NAME]`.
pub fn run(arguments: &[String]) -> Result<u8, String> {
    let mut accel = Accel::detect();
    let mut only: Option<String> = None;
    let mut i = 0;
    while i < arguments.len() {
        match arguments[i].as_str() {
            "--accel" => {
                accel = Accel::parse(arguments.get(i + 1).ok_or("--accel needs kvm or tcg")?)?;
                i += 1;
            }
            "--only" => {
                only = Some(arguments.get(i + 1).ok_or("--only needs a name")?.clone());
                i += 1;
            }
            other => return Err(format!("unknown option `{other}` for test: see `cargo xtask help`")),
        }
        i += 1;
    }
    let started = Instant::now();
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut record = |name: &str, result: Result<Duration, String>| match result {
        Ok(elapsed) => {
            passed += 1;
            println!("PASS {name} ({:.2} s)", elapsed.as_secs_f64());
        }
        Err(why) => {
            failed += 1;
            println!("FAIL {name}: {why}");
        }
    };
    let timed = |f: &dyn Fn() -> Result<(), String>| {
        let t = Instant::now();
        f().map(|()| t.elapsed())
    };

    if only.is_none() {
        record("check", timed(&crate::check::run_all));
        record(
            "host-unit-tests",
            timed(&|| {
                run_checked(cargo().args(["test", "--quiet", "--workspace", "--exclude", "kernel"]), "cargo test")
            }),
        );
        record(
            "loom-models",
            timed(&|| {
                ["channel", "syspage", "kcb"].into_iter().try_for_each(|package| {
                    run_checked(
                        cargo()
                            .args([
                                "test",
                                "--quiet",
                                "--release",
                                "-p",
                                package,
                                "--features",
                                "loom",
                                "--test",
                                "loom",
                            ])
                            .env("RUSTFLAGS", "--cfg loom")
                            .env("CARGO_TARGET_DIR", tools::root().join("target/loom")),
                        &format!("loom models of {package}"),
                    )
                })
            }),
        );
    }
    tools::ensure_qemu()?;
    let kernel = tools::build_kernel()?;
    // Built once: every QEMU run of the suite boots the same image.
    let initrd = tools::build_initramfs()?;
    if only.as_deref().is_none_or(|o| "initramfs-image".contains(o)) {
        record("initramfs-image", timed(&|| initramfs_image_checks(&initrd)));
    }
    if only.as_deref().is_none_or(|o| "run-command".contains(o)) {
        record("run-command", timed(&run_command_checks));
    }
    println!("xtask: QEMU integration runs with {}", accel.name());
    for test in integrations(accel, &initrd) {
        if only.as_deref().is_some_and(|o| !test.name.contains(o)) {
            continue;
        }
        let result = run_integration(&test, &kernel);
        record(&test.name, result);
    }
    println!("xtask: suite took {:.1} s", started.elapsed().as_secs_f64());
    println!("summary: {passed} passed, {failed} failed");
    Ok(u8::from(failed != 0))
}

/// The `ps` table's rows: (core, processes, threads, pids, stacks, frames, leaked frames).
fn process_rows(serial: &str) -> Vec<[u64; 7]> {
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
fn listed_processes(serial: &str) -> Vec<(u32, String, u64)> {
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
fn nothing_leaked(serial: &str, cores: usize) -> Result<(), String> {
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

/// Cases `user/sigtest` runs, each printing one `TEST sig-<case>` line.
const SIGTEST_CASES: usize = 21;

/// `count` lines `TEST <name> ok` (a `name` ending in `-` takes every name it begins), none
/// failed.
fn test_lines_ok(serial: &str, name: &str, count: usize) -> Result<(), String> {
    let prefix = if name.ends_with('-') { format!("TEST {name}") } else { format!("TEST {name} ") };
    let lines: Vec<&str> = serial.lines().filter(|l| l.starts_with(&prefix)).collect();
    let ok = lines.iter().filter(|l| l.split_whitespace().nth(2) == Some("ok")).count();
    if ok != count || lines.len() != count {
        return Err(format!("expected {count} `TEST {name} ok` lines, got {lines:?}"));
    }
    Ok(())
}

/// User processes: the Rust `std` test program on every core, busybox, isolation, the
/// system-call fuzzer, a bad program; each run ends with the leak check.
fn process_integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    for cores in [1usize, 2, 4] {
        // `set -e`: a failing run ends the line with its status.
        let mut script: Vec<String> = vec!["set -e".into()];
        script.extend((0..cores).map(|core| format!("on {core} /bin/proctest")));
        script.push("/bin/ps".into());
        list.push(Integration {
            name: format!("proc-std-{cores}-cores"),
            machine: machine(cores, &exec(&shell_line(&script))),
            expected_status: 0,
            check: Box::new(move |serial| {
                test_lines_ok(serial, "proc-std", cores)?;
                for core in 0..cores {
                    printed(
                        serial,
                        &format!("TEST proc-std ok core {core} "),
                        &format!("no proc-std line from core {core}"),
                    )?;
                }
                nothing_leaked(serial, cores)
            }),
        });
    }
    // The shell kills a group on another core, then every case of user/sigtest runs on every
    // core (its kill-group case spawns on the next core); leak check.
    for cores in [2usize, 4] {
        // The sleeper comes first, so it is core 1's first process: pid 100001, and with
        // `setsid` the leader of group 100001; the kill waits until that group exists.
        let mut script: Vec<String> = [
            "spawn 1 setsid sleep 100 &",
            "until kill -0 -100001 2>/dev/null; do sleep 0.1; done",
            "kill -s TERM -100001",
            "echo group kill: status $?",
            "wait",
        ]
        .map(String::from)
        .to_vec();
        // sigtest signals its own group (kill(0)): under `setsid` that group is its own, not
        // the shell's, and it leads a session, as a process the kernel started did.
        script.extend((0..cores).map(|core| format!("spawn {core} setsid /bin/sigtest")));
        script.push("/bin/ps".into());
        list.push(Integration {
            name: format!("signals-{cores}-cores"),
            machine: {
                let mut m = machine(cores, &exec(&shell_line(&script)));
                m.timeout = Duration::from_secs(120);
                m
            },
            // `/bin/ps`'s; sigtest's own statuses are checked below.
            expected_status: 0,
            check: Box::new(move |serial| {
                test_lines_ok(serial, "sig-", SIGTEST_CASES * cores)?;
                let passed =
                    serial.lines().filter(|l| l.starts_with("pid ") && l.ends_with("exited with status 0")).count();
                if passed != cores {
                    return Err(format!("expected {cores} sigtest runs to exit with status 0, got {passed}"));
                }
                for core in 0..cores {
                    printed(
                        serial,
                        &format!("TEST sig-kill-group ok core {core} cores={core},{}", (core + 1) % cores),
                        &format!("no kill-group line from core {core}"),
                    )?;
                }
                let reports = serial.lines().filter(|l| l.contains("(sigtest) killed by SIGSEGV")).count();
                // Per run: two bad frames and a missing SA_RESTORER report themselves, the
                // non-canonical stack pointer faults in ring 3, and death-statuses faults once.
                if reports != 5 * cores {
                    return Err(format!("expected {} one-line reports of bad signal frames, got {reports}", 5 * cores));
                }
                printed(serial, "group kill: status 0", "the shell's group kill reached nobody")?;
                printed(serial, "pid 100001 on core 1 was killed by signal 15", "the group's sleeper survived")?;
                if serial.contains("FAULT core") || serial.contains("PANIC core") {
                    return Err("a kernel faulted".into());
                }
                nothing_leaked(serial, cores)
            }),
        });
    }
    let hello = tools::HELLO_TEXT;
    let digest: String = {
        use sha2::Digest;
        sha2::Sha256::digest(hello.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    };
    let (lines, words, bytes) = (hello.lines().count(), hello.split_whitespace().count(), hello.len());
    let script = [
        "spawn 1 /bin/busybox echo hello from busybox",
        "spawn 1 /bin/busybox cat /etc/hello.txt",
        "spawn 0 /bin/busybox ls -l /bin",
        "spawn 1 /bin/busybox wc /etc/hello.txt",
        "spawn 1 /bin/busybox sha256sum /etc/hello.txt",
        "spawn 0 /bin/busybox uname -a",
        "/bin/ps",
    ];
    list.push(Integration {
        name: "busybox-2-cores".into(),
        machine: machine(2, &exec(&shell_line(&script))),
        expected_status: 0,
        check: Box::new(move |serial| {
            printed(serial, "hello from busybox\n", "busybox echo printed nothing")?;
            for line in hello.lines() {
                printed(serial, line, "busybox cat did not print /etc/hello.txt")?;
            }
            let listing = serial.lines().filter(|l| l.starts_with("lrwxrwxrwx") && l.ends_with("-> busybox")).count();
            if listing < 100 {
                return Err(format!("ls -l /bin listed {listing} applet links"));
            }
            printed(serial, " busybox\n", "ls -l /bin did not list busybox")?;
            let wc = serial.lines().any(|l| {
                l.split_whitespace().collect::<Vec<_>>()
                    == [lines.to_string(), words.to_string(), bytes.to_string(), "/etc/hello.txt".into()]
            });
            if !wc {
                return Err(format!("busybox wc did not print {lines} {words} {bytes} /etc/hello.txt"));
            }
            printed(
                serial,
                &format!("{digest}  /etc/hello.txt"),
                "busybox sha256sum disagrees with the host's digest",
            )?;
            printed(serial, "Reef reef ", "uname -a did not name Reef")?;
            let exits = serial.lines().filter(|l| l.starts_with("pid ") && l.ends_with("exited with status 0")).count();
            if exits != 6 {
                return Err(format!("expected 6 programs to exit with status 0, got {exits}"));
            }
            nothing_leaked(serial, 2)
        }),
    });
    list.push(Integration {
        name: "spawn-ls-on-core-2".into(),
        machine: machine(4, &exec("spawn 2 /bin/busybox ls -l /bin")),
        expected_status: 0,
        check: Box::new(|serial| {
            printed(serial, "pid 200001 on core 2 exited with status 0", "ls did not run as pid 200001 on core 2")?;
            printed(serial, "-> busybox", "no applet link listed")
        }),
    });
    let attempts = [
        ("read-kernel", 11),
        ("write-kernel", 11),
        ("jump-kernel", 11),
        ("null", 11),
        ("privileged", 11),
        ("undefined", 4),
        ("divide", 8),
    ];
    let mut script: Vec<String> = attempts
        .iter()
        .enumerate()
        .map(|(i, (attempt, _))| format!("spawn {} /bin/isolation {attempt}", i % 2))
        .collect();
    script.push("spawn 1 /bin/isolation other-process".into());
    script.push("spawn 0 /bin/bad-elf".into());
    script.push("echo bad-elf: status $?".into());
    script.push("spawn 1 /bin/busybox echo still alive".into());
    script.push("/bin/ps".into());
    list.push(Integration {
        name: "isolation-2-cores".into(),
        machine: machine(2, &exec(&shell_line(&script))),
        // `/bin/ps`'s; the bad program's refusal is its `spawn`'s status, checked below.
        expected_status: 0,
        check: Box::new(move |serial| {
            if let Some(line) = serial.lines().find(|l| l.contains("fail survived")) {
                return Err(format!("a forbidden access went unpunished: {line}"));
            }
            let killed = serial.lines().filter(|l| l.contains(" was killed by signal ")).count();
            if killed != attempts.len() {
                return Err(format!("expected {} processes killed, got {killed}", attempts.len()));
            }
            for (attempt, signal) in attempts {
                let _ = attempt;
                printed(
                    serial,
                    &format!("was killed by signal {signal}"),
                    &format!("no process killed by signal {signal}"),
                )?;
            }
            let reports =
                serial.lines().filter(|l| l.contains("(isolation) killed by SIG") && l.contains(" on core ")).count();
            if reports != attempts.len() {
                return Err(format!("expected {} one-line fault reports, got {reports}", attempts.len()));
            }
            test_lines_ok(serial, "isolation-other-process", 1)?;
            printed(
                serial,
                "error: /bin/bad-elf on core 0: not a static x86-64 ELF program\nbad-elf: status 1\n",
                "the bad program was not refused with status 1",
            )?;
            printed(serial, "still alive\n", "a kernel did not survive")?;
            nothing_leaked(serial, 2)
        }),
    });
    list.push(Integration {
        name: "kill-2-cores".into(),
        machine: machine(
            2,
            &exec(
                // busybox `kill`: SIGKILL to the sleeper on core 1 (core 1's first process),
                // once it is there; SIGTERM to the one on core 0.
                "spawn 1 /bin/busybox sleep 100 & sleep 100 & sleeper=$!; \
                 until kill -0 100001 2>/dev/null; do sleep 0.1; done; \
                 kill -s KILL 100001; kill -s TERM $sleeper; wait $sleeper; echo core 0 sleeper: status $?; \
                 wait; /bin/ps; kill 77",
            ),
        ),
        // `kill 77` names no process: the line's status is that failure.
        expected_status: 1,
        check: Box::new(|serial| {
            printed(serial, "pid 100001 on core 1 was killed by signal 9", "the sleeper on core 1 was not killed")?;
            printed(serial, "core 0 sleeper: status 143", "the sleeper on core 0 was not ended by SIGTERM")?;
            printed(serial, "sh: can't kill pid 77: No such process", "a kill of no process was not refused")?;
            nothing_leaked(serial, 2)
        }),
    });
    for cores in [2usize, 4] {
        let mut script: Vec<String> = (0..cores)
            .map(|core| format!("spawn {core} /bin/sysfuzz --seed {} --calls 100000 &", 1000 + core))
            .collect();
        script.push("wait".into());
        script.push("spawn 0 /bin/busybox echo kernels alive".into());
        script.push("/bin/ps".into());
        list.push(Integration {
            name: format!("sysfuzz-{cores}-cores"),
            machine: {
                let mut m = machine(cores, &exec(&shell_line(&script)));
                m.timeout = Duration::from_secs(300);
                // Thousands of calls between two lines under TCG: quiet, not stuck.
                m.watchdog = Some(Duration::from_secs(120));
                m
            },
            // A fuzz process may be killed for a bad pointer; the run still ends.
            expected_status: ANY_STATUS,
            check: Box::new(move |serial| {
                let seeds = serial.lines().filter(|l| l.starts_with("sysfuzz: seed ")).count();
                if seeds != cores {
                    return Err(format!("expected {cores} `sysfuzz: seed` lines, got {seeds}"));
                }
                // Before fuzzing, each one's bad pointers to reef_control: EFAULT every time.
                let refused = serial
                    .lines()
                    .filter(|l| {
                        l.starts_with("sysfuzz: bad pointers: reef_control refused all ") && l.ends_with(" with EFAULT")
                    })
                    .count();
                if refused != cores {
                    let problems: Vec<&str> =
                        serial.lines().filter(|l| l.starts_with("sysfuzz: bad pointers: ")).collect();
                    return Err(format!("expected {cores} clean bad-pointer probes, got {problems:?}"));
                }
                let ended = serial
                    .lines()
                    .filter(|l| {
                        l.starts_with("pid ") && (l.contains(" exited with status ") || l.contains(" was killed by "))
                    })
                    .count();
                if ended != cores + 1 {
                    return Err(format!("expected {} processes to end, got {ended}", cores + 1));
                }
                printed(serial, "kernels alive\n", "a kernel did not survive the fuzzing")?;
                if serial.contains("FAULT core") || serial.contains("PANIC core") {
                    return Err("a kernel faulted".into());
                }
                nothing_leaked(serial, cores)
            }),
        });
    }
    // `kill` of a launcher reaches the program it started on another core (as srun passes
    // signals to its tasks): `spawn` reports the program killed, `on` exits 128 + the signal.
    // A launcher killed by SIGKILL, which it cannot pass on, takes its program with it: the
    // program has SIGKILL as its parent-death signal from the start (`reef_spawn`). Before,
    // the `sleep 30` on core 1 ran on, and the leak check found it. `spawn --no-wait`, which
    // ends at once, leaves its program running.
    let script = "spawn 2 /bin/sleep 30 & sleep 0.3; kill $!; wait $!; echo spawn-status $?; \
                  on 3 /bin/sleep 30 & sleep 0.3; kill -USR1 $!; wait $!; echo on-status $?; \
                  spawn 1 /bin/sleep 30 & sleep 0.3; kill -9 $!; wait $!; echo killed-status $?; sleep 0.3; \
                  spawn --no-wait 1 /bin/busybox sh -c 'sleep 0.3; echo unwaited-ran-on'; sleep 0.8; /bin/ps";
    list.push(Integration {
        name: "launchers-pass-signals-on-4-cores".into(),
        machine: machine(4, &exec(script)),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &[
                    "pid 200001 on core 2 was killed by signal 15",
                    "spawn-status 143",
                    "on-status 138",
                    "killed-status 137",
                    "unwaited-ran-on",
                ],
            )?;
            nothing_leaked(serial, 4)
        }),
    });
}

/// The rows under each header line: for every line equal to `header` (trailing blanks
/// ignored), the lines after it for which `is_row` holds.
fn tables<'a>(serial: &'a str, header: &str, is_row: impl Fn(&str) -> bool) -> Vec<Vec<&'a str>> {
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
fn program_and_kernel_tables<'a>(
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
fn same_leading_words(tables: &[Vec<&str>; 2], count: usize) -> Result<(), String> {
    let leading = |table: &Vec<&str>| -> Vec<Vec<String>> {
        table.iter().map(|row| row.split_whitespace().take(count).map(str::to_string).collect()).collect()
    };
    let (program, view) = (leading(&tables[0]), leading(&tables[1]));
    (program == view).then_some(()).ok_or(format!("the program printed {program:?}, /proc/reef {view:?}"))
}

/// `user/reef`, the kernel's control commands as programs: each prints the text the kernel
/// formats, as `/proc/reef` serves it; `on` runs a program on a core and exits with its
/// status; `poweroff` ends the machine from a process, as busybox's `poweroff -f` does through
/// `reboot`; and the control interface the file service builds on (`test=control`).
fn control_integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let digit_first = |line: &str| line.starts_with(|c: char| c.is_ascii_digit());
    list.push(Integration {
        name: "reef-cores-as-proc-reef".into(),
        machine: machine(2, &exec("cores; echo cores: status $?; cat /proc/reef/cores")),
        expected_status: 0,
        check: Box::new(move |serial| {
            let header = "core  apic  state         role  image  partition                      uptime";
            // Two cores, and the line under core 0 that says it serves the files.
            let core_or_detail = |line: &str| digit_first(line) || line.starts_with("      ");
            let tables = program_and_kernel_tables(serial, header, 3, core_or_detail)?;
            // Everything but the uptime: id, APIC id, state, role, image, partition, its size.
            same_leading_words(&tables, 8)?;
            printed(serial, "cores: status 0", "/bin/cores did not exit with status 0")
        }),
    });
    list.push(Integration {
        name: "reef-mem-as-proc-reef".into(),
        machine: machine(2, &exec("mem; cat /proc/reef/mem")),
        expected_status: 0,
        check: Box::new(|serial| {
            let lines: Vec<&str> = serial
                .lines()
                .filter(|line| {
                    line.starts_with("shared   0x") || (line.starts_with("core ") && line.contains(" private "))
                })
                .collect();
            let [program @ .., _, _, _] = &lines[..] else {
                return Err(format!("expected two `mem` listings of 3 lines, got {lines:?}"));
            };
            let (program, view) = lines.split_at(program.len());
            // Frames and heap of the instance the command ran on move while a process runs.
            let fixed = |line: &&str| line.split(", free frames ").next().unwrap_or_default().to_string();
            let (program_fixed, view_fixed): (Vec<String>, Vec<String>) =
                (program.iter().map(fixed).collect(), view.iter().map(fixed).collect());
            if program_fixed != view_fixed {
                return Err(format!("the program printed {program:?}, /proc/reef {view:?}"));
            }
            // Both ran on core 0: the program, and the file service that formats the view.
            for listing in [program, view] {
                if !listing[1].starts_with("core 0 ") || !listing[1].contains(", free frames ") {
                    return Err(format!("core 0's line lacks its frames and heap: {listing:?}"));
                }
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "reef-msg-stats-as-proc-reef".into(),
        machine: machine(2, &exec("msg stats; cat /proc/reef/msg")),
        expected_status: 0,
        check: Box::new(move |serial| {
            let header = "core  mode    sent        received    dropped  (kind/bad/chunk/large)  lost    refused  \
                          timeouts  ipis sent  ipis taken  empty polls";
            let tables = program_and_kernel_tables(serial, header, 2, digit_first)?;
            // Core and mode; the counters moved.
            same_leading_words(&tables, 2)
        }),
    });
    list.push(Integration {
        name: "reef-syscalls-as-proc-reef".into(),
        machine: machine(2, &exec("on 1 syscalls; cat /proc/reef/syscalls")),
        expected_status: 0,
        check: Box::new(|serial| {
            let summaries: Vec<(usize, u64)> = serial
                .lines()
                .filter_map(|line| {
                    let (core, rest) = line.strip_prefix("core ")?.split_once(": ")?;
                    let words: Vec<&str> = rest.split_whitespace().collect();
                    let [_, "system", "calls,", reef, "Reef", "calls,", _, "unimplemented", "(ENOSYS)"] = words[..]
                    else {
                        return None;
                    };
                    Some((core.parse().ok()?, reef.parse().ok()?))
                })
                .collect();
            let cores: Vec<usize> = summaries.iter().map(|(core, _)| *core).collect();
            if cores != [0, 1, 0, 1] {
                return Err(format!("expected the per-core lines of cores 0 and 1 twice, got {summaries:?}"));
            }
            // The program's own call is counted before the command reads the counters.
            if summaries[1].1 == 0 {
                return Err(format!("core 1 counted no Reef call while /bin/syscalls made one: {summaries:?}"));
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "reef-ps-as-proc-reef".into(),
        // `ps` alone is busybox's (ash runs its applets first): Reef's is `/bin/ps`.
        machine: machine(2, &exec("on 1 /bin/ps; cat /proc/reef/processes; /bin/ps")),
        expected_status: 0,
        check: Box::new(move |serial| {
            let header = "core  processes  threads  pids  stacks  frames  created  killed  leaked frames";
            let tables = program_and_kernel_tables(serial, header, 2, digit_first)?;
            let processes = |table: &Vec<&str>| -> Vec<String> {
                table.iter().map(|row| row.split_whitespace().take(2).collect::<Vec<_>>().join(" ")).collect()
            };
            // Core 0 holds init, sh and the one command it runs (`on`, then `cat`); core 1 holds
            // /bin/ps while it runs, then nothing.
            if processes(&tables[0]) != ["0 3", "1 1"] || processes(&tables[1]) != ["0 3", "1 0"] {
                return Err(format!("expected /bin/ps itself on core 1, then nothing there: {tables:?}"));
            }
            printed(serial, "  pid 100001 (ps): 1 threads, ", "/bin/ps did not list itself")?;
            nothing_leaked(serial, 2)
        }),
    });
    list.push(Integration {
        name: "reef-on-core-2".into(),
        machine: machine(3, &exec("on 2 /bin/busybox echo hi; echo on: status $?; syscalls 2; /bin/ps")),
        expected_status: 0,
        check: Box::new(|serial| {
            printed(serial, "\nhi\n", "busybox echo printed no `hi` line")?;
            printed(serial, "on: status 0", "/bin/on did not exit with status 0")?;
            // Only the echo ran on core 2: its calls (write is 1) are counted there.
            let core_2 = serial.lines().find(|line| line.starts_with("core 2: ")).unwrap_or_default();
            let calls: u64 = core_2.split_whitespace().nth(2).and_then(|word| word.parse().ok()).unwrap_or(0);
            if calls == 0 {
                return Err(format!("core 2 made no system call, so echo did not run there: {core_2:?}"));
            }
            nothing_leaked(serial, 3)
        }),
    });
    list.push(Integration {
        name: "reef-on-refusals".into(),
        machine: machine(2, &exec("on 0 frobnicate; echo on: status $?; on 9 /bin/busybox echo hi")),
        // The line's status is its last command's: `on 9`.
        expected_status: 1,
        check: Box::new(|serial| {
            printed(
                serial,
                "on: frobnicate: no such program in $PATH (/bin:/sbin): give its path, or see `ls /bin`\n",
                "no one-line error for a program that is not there",
            )?;
            printed(serial, "on: status 127", "a missing program did not give status 127")?;
            printed(
                serial,
                "on: /bin/busybox on core 9: no such core: see `cores`\n",
                "no one-line error for a core the machine does not have",
            )?;
            if serial.contains("\nhi\n") {
                return Err("echo ran although its core does not exist".into());
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "reef-statuses".into(),
        machine: machine(
            2,
            &exec(
                "on 1 /bin/tiny 7; echo on: status $?; on 1 on 0 /bin/isolation null; echo on: status $?; \
                 spawn 1 /bin/tiny 3; echo spawn: status $?; on 1 /bin/tiny 3",
            ),
        ),
        // The line's status is its last command's: tiny's 3, through `on`.
        expected_status: 3,
        check: Box::new(|serial| {
            printed(serial, "on: status 7", "`on` did not exit with its program's status")?;
            printed(serial, "on: status 139", "`on` did not exit with 128 + the signal that killed its program")?;
            // /bin/spawn's line for its child (core 1's third process: tiny, then `on`).
            printed(serial, "pid 100003 on core 1 exited with status 3\n", "/bin/spawn did not say how tiny ended")?;
            printed(serial, "spawn: status 3", "/bin/spawn did not exit with its child's status")
        }),
    });
    list.push(Integration {
        name: "reef-msg-bad-arguments".into(),
        machine: machine(2, &exec("spawn 1 /bin/msg mode 1 warp; msg mode 1 warp")),
        expected_status: 1,
        check: Box::new(|serial| {
            let error = "error: `warp` is not a notification mode: use poll, ipi, hybrid or mwait";
            let count = serial.lines().filter(|line| *line == error).count();
            if count != 2 {
                return Err(format!(
                    "expected `{error}` from the program on core 1 and on core 0, got it {count} times"
                ));
            }
            printed(serial, "pid 100001 on core 1 exited with status 1", "/bin/msg did not exit with status 1")
        }),
    });
    list.push(Integration {
        name: "reef-poweroff".into(),
        // `poweroff` alone is busybox's: Reef's program is `/bin/poweroff`.
        machine: machine(2, &exec("/bin/poweroff; echo still here")),
        // What the kernel's `poweroff` exits with.
        expected_status: 0,
        check: Box::new(|serial| {
            printed(serial, "powering off\n", "no `powering off` line")?;
            if serial.contains("still here") {
                return Err("the machine went on after /bin/poweroff".into());
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "busybox-poweroff-from-core-1".into(),
        machine: machine(2, &exec("on 1 /bin/busybox echo last words; on 1 /bin/busybox poweroff -f; echo still here")),
        expected_status: 0,
        check: Box::new(|serial| {
            // Core 1's output reaches the console through core 0, and so does its request to
            // power off: the line comes out first.
            let last_words = serial.find("last words\n").ok_or("core 1's last line was lost")?;
            let powering_off = serial.find("powering off\n").ok_or("no `powering off` line")?;
            if powering_off < last_words {
                return Err("the machine powered off before core 1's output was written".into());
            }
            if serial.contains("still here") {
                return Err("the machine went on after `poweroff -f`".into());
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "control-interface".into(),
        machine: machine(2, "test=control"),
        expected_status: 0,
        check: Box::new(|serial| all_tests_passed(serial, 1)),
    });
}

/// fstest's lines in a run: no `TEST fs-*` line failed, and there are `runs` summaries
/// `fstest: N passed, 0 failed` whose counts add up to the `TEST fs-*` lines; the counts, in
/// order.
fn fstest_passed(serial: &str, runs: usize) -> Result<Vec<usize>, String> {
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

/// The file calls: `user/fstest` on two cores one after the other (each in its own scratch
/// directory under /tmp), and one file written on core 1 and read back on core 3; each run
/// ends with the leak check.
fn file_integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    list.push(Integration {
        name: "fs-calls-2-cores".into(),
        machine: {
            let mut m = machine(2, &exec("spawn 0 /bin/fstest; spawn 1 /bin/fstest; /bin/ps"));
            // Some 65 cases per run, with forks, an exec and a 1 MiB pipe transfer each.
            m.timeout = Duration::from_secs(180);
            m
        },
        expected_status: 0,
        check: Box::new(|serial| {
            let counts = fstest_passed(serial, 2)?;
            if counts[0] != counts[1] {
                return Err(format!("the two runs passed different numbers of cases: {counts:?}"));
            }
            for core in [0, 1] {
                if spawn_lines(serial, core, "exited with status 0") != 1 {
                    return Err(format!("fstest on core {core} did not exit with status 0"));
                }
            }
            nothing_leaked(serial, 2)
        }),
    });
    list.push(Integration {
        name: "fs-same-file-4-cores".into(),
        machine: machine(
            4,
            &exec(
                // The file is removed at the end, so the leak check counts what the processes
                // left, not the file kept on purpose between the two.
                "spawn 1 /bin/fstest --write /tmp/shared 100000 7; \
                 spawn 3 /bin/fstest --check /tmp/shared 100000 7; \
                 spawn 3 /bin/busybox rm /tmp/shared; /bin/ps",
            ),
        ),
        expected_status: 0,
        check: Box::new(|serial| {
            fstest_passed(serial, 2)?;
            printed(
                serial,
                "TEST fs-written ok core 1: 100000 bytes of seed 7 written to /tmp/shared",
                "core 1 did not write /tmp/shared",
            )?;
            printed(
                serial,
                "TEST fs-same-bytes ok core 3: 100000 bytes of seed 7 in /tmp/shared",
                "core 3 did not read back the bytes core 1 wrote",
            )?;
            nothing_leaked(serial, 4)
        }),
    });
    // Processes killed (`kill -9`) while their open of a file on core 1 is on its way to the
    // file service on core 0: the reply, which nobody waits for any more, must release the
    // open file it gave (it was dropped, and the service kept 4 to 9 files open, unlinked, with
    // their pages, for the system's life). Twenty kills at different moments of the loop.
    list.push(Integration {
        name: "killed-while-opening-2-cores".into(),
        machine: machine(
            2,
            &exec(
                "for k in 1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8 9 3 5; do \
                 spawn 1 /bin/sh -c 'while :; do echo x > /tmp/k$$; /bin/cat /tmp/k$$; done' > /dev/null & \
                 sleep 0.0$k; kill -9 -1 2>/dev/null; wait; done; rm -f /tmp/k*; cat /proc/reef/files; /bin/ps",
            ),
        ),
        expected_status: 0,
        check: Box::new(|serial| {
            printed(
                serial,
                "tmpfs nodes 0, tmpfs pages 0/",
                "files opened by killed processes stayed open at the file service (see `open files`)",
            )?;
            nothing_leaked(serial, 2)
        }),
    });
}
/// Every `needle` printed, in order, each after the one before.
fn printed_in_order(serial: &str, needles: &[&str]) -> Result<(), String> {
    let mut rest = serial;
    for needle in needles {
        match rest.find(needle) {
            Some(at) => rest = &rest[at + needle.len()..],
            None => return Err(format!("`{needle}` missing (or out of order) in the shell's output")),
        }
    }
    Ok(())
}

/// The first line of `/proc/reef/files` after `from`: (open files, pipes, pipe pages, parked).
fn file_counts(serial: &str) -> Vec<[u64; 4]> {
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

/// The user shell: busybox `sh` started by `/sbin/init`, as a user meets it.
fn user_shell_integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let user = |cores: usize, line: &str| machine(cores, &exec(line));
    list.push(Integration {
        name: "user-shell-acceptance-3-cores".into(),
        machine: user(3, "ls -l /bin | wc -l; on 2 cat /proc/cpuinfo | head -3; cores"),
        expected_status: 0,
        check: Box::new(|serial| {
            let count = serial
                .lines()
                .filter_map(|l| l.trim().parse::<usize>().ok())
                .next()
                .ok_or("no line count from `ls -l /bin | wc -l`")?;
            if count < 250 {
                return Err(format!("`ls -l /bin` listed {count} lines, expected busybox's applets"));
            }
            printed_in_order(serial, &["processor\t: 0", "vendor_id\t: ", "cpu family\t: ", "core  apic  state"])?;
            if serial.lines().filter(|l| l.contains(" running ")).count() < 3 {
                return Err("`cores` does not list 3 running cores".into());
            }
            Ok(())
        }),
    });
    // Issue 10's session, scripted: every command a user would type, and a pipeline that
    // crosses two cores (each `on` runs its program on that core; the pipe is the service's).
    let script = "set -e; mkdir -p /tmp/w/d; cd /tmp/w; echo hello reef > f; cat f; cp f g; mv g d/h; ls d; \
                  rm d/h; ls -l f; find /tmp/w | sort; printf 'b\\na\\nb\\n' | sort | uniq -c; grep -c reef f; \
                  wc -c f; sha256sum f; dd if=/dev/zero of=z bs=512 count=2048; ls -l z; tar cf /tmp/a.tar d f; \
                  mkdir x; cd x; tar xf /tmp/a.tar; ls; cd ..; for i in 1 2 3; do echo n$i; done; \
                  set +e; false; echo status $?; on 1 cat f | on 2 wc -c; \
                  on 1 cat /tmp/w/z | on 2 sha256sum; echo end";
    list.push(Integration {
        name: "busybox-as-a-user-3-cores".into(),
        machine: user(3, script),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &[
                    "hello reef",
                    "\nh\n",
                    " 11 ",
                    "/tmp/w\n/tmp/w/d\n/tmp/w/f",
                    "1 a",
                    "2 b",
                    "\n1\n",
                    "11 f",
                    "6e97d7a954aa0676d3aa3ad1d00fa3dddc91a7948ff34577531b6ec49bc8f60d  f",
                    "2048+0 records in",
                    "2048+0 records out",
                    "1048576 ",
                    "d  f\n",
                    "n1\nn2\nn3",
                    "status 1",
                    "\n11\n",
                    // sha256 of 1 MiB of zeros, read on core 1 and hashed on core 2.
                    "30e14955ebf1352266dc2ff8067e68104607e750abb9d3b36582b8af909fcb58",
                    "end",
                ],
            )
        }),
    });
    list.push(Integration {
        name: "busybox-typed-2-cores".into(),
        machine: {
            let mut m = machine(2, "");
            m.typed = vec![
                ("reef:/tmp# ".into(), "echo typed $((6*7))\r".into()),
                // The job says when it runs (the echo of the typed line shows `$((50+50))`, not
                // 100): a Ctrl-C typed before ash made the job the console's foreground would
                // go to ash, and sleep would run on.
                ("typed 42".into(), "sh -c 'echo now sleep $((50+50)); exec sleep 100'\r".into()),
                // Ctrl-C once sleep runs: it, not the shell, ends.
                ("now sleep 100".into(), "\x03".into()),
                ("reef:/tmp# ".into(), "echo after $?\r".into()),
                ("after 130".into(), "exit 3\r".into()),
            ];
            m
        },
        expected_status: 3,
        check: Box::new(|serial| {
            printed_in_order(serial, &["Reef: 2 kernel instances up", "typed 42", "^C", "after 130"])
        }),
    });
    // Open files and pipes of killed processes go back to the service: its counts return to
    // what the shell itself holds.
    list.push(Integration {
        name: "files-released-on-kill-3-cores".into(),
        machine: user(
            3,
            "cat /proc/reef/files; on 1 sleep 100 < /etc/motd > /tmp/held & on 2 sleep 100 | on 1 cat > /tmp/o & \
             sleep 1; cat /proc/reef/files; killall -9 sleep; wait; sleep 1; cat /proc/reef/files",
        ),
        expected_status: 0,
        check: Box::new(|serial| {
            let counts = file_counts(serial);
            let [before, during, after] = counts[..] else {
                return Err(format!("expected three /proc/reef/files lines, got {counts:?}"));
            };
            if during[1] == 0 || during[0] <= before[0] {
                return Err(format!("the sleeping processes held no files or pipes: {during:?}"));
            }
            if after != before || after[1] != 0 || after[3] != 0 {
                return Err(format!("after the kill the service holds {after:?}, before {before:?}"));
            }
            Ok(())
        }),
    });
    // Each core counts the interrupts it takes in its KCB; core 0 reads both cores' counts.
    list.push(Integration {
        name: "proc-interrupts-2-cores".into(),
        machine: user(2, "cat /proc/interrupts; sleep 1; cat /proc/interrupts"),
        expected_status: 0,
        check: Box::new(|serial| {
            let tables = crate::interrupts::tables(serial);
            let [before, after] = &tables[..] else {
                return Err(format!("expected two /proc/interrupts tables, got {}", tables.len()));
            };
            if after.cpus != [0, 1] {
                return Err(format!("expected columns CPU0 and CPU1, got {:?}", after.cpus));
            }
            if let Some(line) = after.lines.iter().find(|line| line.name.is_empty() || line.counts.len() != 2) {
                return Err(format!("a line without a name or a count per core: {line:?}"));
            }
            let timer = |table: &crate::interrupts::Table| {
                table.line("32").filter(|line| line.name == "timer").map(|line| line.counts.clone())
            };
            let (Some(first), Some(second)) = (timer(before), timer(after)) else {
                return Err("no `32: ... timer` line".into());
            };
            // 100 Hz for a second; far fewer would mean a core's ticks were not counted.
            if first.iter().zip(&second).any(|(a, b)| b < &(a + 20)) {
                return Err(format!("timer counts did not grow on every core over `sleep 1`: {first:?} -> {second:?}"));
            }
            Ok(())
        }),
    });
    list.push(Integration {
        name: "tmpfs-full-2-cores".into(),
        machine: {
            let mut m = machine(2, &exec("spawn 1 /bin/fstest --fill; /bin/ps"));
            m.memory_mib = 256;
            m.timeout = Duration::from_secs(180);
            m
        },
        expected_status: 0,
        check: Box::new(|serial| {
            fstest_passed(serial, 1)?;
            printed(serial, "TEST fs-enospc ok", "no ENOSPC case")?;
            nothing_leaked(serial, 2)
        }),
    });
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
