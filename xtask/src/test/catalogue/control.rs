//! The kernel's control commands as programs (`user/reef`) and the views of `/proc/reef`.

use super::exec;
use crate::qemu::Machine;
use crate::test::runner::Integration;
use crate::test::serial::{
    all_tests_passed, nothing_leaked, printed, printed_in_order, program_and_kernel_tables, same_leading_words,
};

/// `user/reef`, the kernel's control commands as programs: each prints the text the kernel
/// formats, as `/proc/reef` serves it; `on` runs a program on a core and exits with its
/// status; `poweroff` ends the machine from a process, as busybox's `poweroff -f` does through
/// `reboot`; and the control interface the file service builds on (`test=control`).
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let digit_first = |line: &str| line.starts_with(|c: char| c.is_ascii_digit());
    list.push(Integration {
        name: "reef-cores-as-proc-reef".into(),
        machine: machine(2, &exec("cores; echo cores: status $?; cat /proc/reef/cores")),
        expected_status: 0,
        check: Box::new(move |serial| {
            let header = "core  apic  state         role  image    partition                      uptime";
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
    // fsbench reads the table above by its header's names: a change of its layout that
    // fsbench no longer understands fails here, not silently in `cargo xtask bench fs`.
    list.push(Integration {
        name: "fsbench-counts-from-proc-reef-msg".into(),
        machine: machine(2, &exec("on 1 /bin/fsbench --pin 1 --repeat 1 dd 1; /bin/fsbench --repeat 1 ls 10")),
        expected_status: 0,
        check: Box::new(|serial| {
            if let Some(line) = serial.lines().find(|line| line.starts_with("FSBENCH-NOTE")) {
                return Err(format!("fsbench could not count: {line}"));
            }
            let counts = |prefix: &str| {
                serial.lines().find_map(|line| line.strip_prefix(prefix)).ok_or(format!("no `{prefix}…` line"))
            };
            // Every block of dd on core 1 is a write forwarded to core 0's file service.
            let forwarded = counts("FSBENCH-COUNTS dd mib=1 core=1 n=1 ops=2048 lines=")?;
            let lines: u64 = forwarded.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_default();
            if lines < 2 * 2048 {
                return Err(format!("dd from core 1 counted {lines} message lines for 2048 forwarded writes"));
            }
            counts("FSBENCH-COUNTS ls files=10 core=0 n=1 ops=10 lines=").map(|_| ())
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
        // Programs that are not in the initramfs, started on other cores: core 1's and core 2's
        // new processes read them through the file service themselves before their first
        // instruction; those that cannot say why on their standard error and exit as a shell's
        // child would.
        name: "reef-on-programs-from-files-3-cores".into(),
        machine: machine(
            3,
            &exec(
                "cp /bin/busybox /tmp/echo; on 1 /tmp/echo hi from tmpfs; echo status $?; on 2 /tmp/missing; \
                 echo status $?; echo text > /tmp/t; chmod +x /tmp/t; on 1 /tmp/t; echo status $?; rm /tmp/echo /tmp/t; \
                 /bin/ps",
            ),
        ),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &[
                    "hi from tmpfs\nstatus 0",
                    "/tmp/missing: no such file (execve on core 2: errno 2)\nstatus 127",
                    "/tmp/t: not a program Reef runs (exec format error) (execve on core 1: errno 8)\nstatus 126",
                ],
            )?;
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
                "on: frobnicate: no such program in $PATH (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin): give its path, or see `ls /bin`\n",
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
