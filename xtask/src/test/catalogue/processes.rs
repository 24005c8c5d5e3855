//! User processes: the Rust `std` test program, busybox, isolation, signals, the fuzzer.

use super::{exec, shell_line};
use crate::qemu::Machine;
use crate::test::runner::{Integration, ANY_STATUS};
use crate::test::serial::{nothing_leaked, printed, printed_in_order, test_lines_ok};
use crate::tools;
use std::time::Duration;

/// Cases `user/sigtest` runs, each printing one `TEST sig-<case>` line.
pub(super) const SIGTEST_CASES: usize = 23;

/// User processes: the Rust `std` test program on every core, busybox, isolation, the
/// system-call fuzzer, a bad program; each run ends with the leak check.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
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
        // One more fuzzer on the last core works in a host share: its file calls are 9P's.
        let mut script: Vec<String> = vec!["mkdir -p /host/fuzz".into(), "cd /host/fuzz".into()];
        script.push(format!("spawn {} /bin/sysfuzz --seed 2000 --calls 20000 &", cores - 1));
        script.push("cd /tmp".into());
        script.extend(
            (0..cores).map(|core| format!("spawn {core} /bin/sysfuzz --seed {} --calls 100000 &", 1000 + core)),
        );
        script.push("wait".into());
        script.push("spawn 0 /bin/busybox echo kernels alive".into());
        script.push("/bin/ps".into());
        list.push(Integration {
            name: format!("sysfuzz-{cores}-cores"),
            machine: {
                let mut m = machine(cores, &exec(&shell_line(&script)));
                m.shares = vec![super::devices::scratch_share("sysfuzz")];
                m.timeout = Duration::from_secs(300);
                // Thousands of calls between two lines under TCG: quiet, not stuck.
                m.watchdog = Some(Duration::from_secs(120));
                m
            },
            // A fuzz process may be killed for a bad pointer; the run still ends.
            expected_status: ANY_STATUS,
            check: Box::new(move |serial| {
                // One fuzzer a core, and the one in the share.
                let fuzzers = cores + 1;
                let seeds = serial.lines().filter(|l| l.starts_with("sysfuzz: seed ")).count();
                if seeds != fuzzers {
                    return Err(format!("expected {fuzzers} `sysfuzz: seed` lines, got {seeds}"));
                }
                // Before fuzzing, each one's bad pointers to reef_control: EFAULT every time.
                let refused = serial
                    .lines()
                    .filter(|l| {
                        l.starts_with("sysfuzz: bad pointers: reef_control refused all ") && l.ends_with(" with EFAULT")
                    })
                    .count();
                if refused != fuzzers {
                    let problems: Vec<&str> =
                        serial.lines().filter(|l| l.starts_with("sysfuzz: bad pointers: ")).collect();
                    return Err(format!("expected {fuzzers} clean bad-pointer probes, got {problems:?}"));
                }
                let ended = serial
                    .lines()
                    .filter(|l| {
                        l.starts_with("pid ") && (l.contains(" exited with status ") || l.contains(" was killed by "))
                    })
                    .count();
                if ended != fuzzers + 1 {
                    return Err(format!("expected {} processes to end, got {ended}", fuzzers + 1));
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
