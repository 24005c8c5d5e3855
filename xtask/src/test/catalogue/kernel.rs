//! The kernel's own runs: boot, messages, faults, the console and the built-in commands.

use super::exec;
use crate::qemu::{Accel, Machine};
use crate::test::runner::{Integration, STALLS};
use crate::test::serial::{
    all_tests_passed, banners, core_states, every_bench_figure, mem_ranges, printed, printed_in_order,
};
use std::time::Duration;

/// Boot at every core count, the message channels under stress and restarts, faults and
/// their containment, the command line, the console and the shell's built-in commands.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine, accel: Accel) {
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
}
