//! Roles, application cores and syspages (issue 11): `role`, `execac`, `execac --syspage`, the
//! refusals, the fuzzers on an AC and on a syspage, a role change under the message stress.

use super::exec;
use crate::qemu::Machine;
use crate::test::runner::{Integration, ANY_STATUS};
use crate::test::serial::{nothing_leaked, printed, printed_in_order, process_rows, test_lines_ok};
use crate::tools;

/// The host's SHA-256 of `/etc/hello.txt`, which busybox on an AC must print too.
pub(super) fn hello_digest() -> String {
    use sha2::Digest;
    sha2::Sha256::digest(tools::HELLO_TEXT.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The message stress's line says it balanced.
fn stress_ok(serial: &str) -> Result<(), String> {
    let stress =
        serial.lines().find(|l| l.contains("stress: ") || l.starts_with("error: sent ")).ok_or("no stress result")?;
    if !stress.contains("order/checksum errors 0") || !stress.starts_with("stress: ") {
        return Err(format!("the stress failed: {stress}"));
    }
    Ok(())
}

/// Counts the lines holding `text`.
fn count(serial: &str, text: &str) -> usize {
    serial.lines().filter(|line| line.contains(text)).count()
}

/// The QEMU runs of this issue.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let digest = hello_digest();
    // Two cores: an AC, busybox on it, and every refusal that needs no third core.
    let script = "role 1 ac; /bin/cores; execac 1 /bin/busybox sha256sum /etc/hello.txt; /bin/proctest --ac 1; \
                  execac 1 /bin/reef cores | grep -c AC; \
                  role 0 ac; role 0 kc; role 7 ac; role 1 xc; execac 0 /bin/busybox true; \
                  execac --syspage 1 /bin/busybox true; execac 1 /bin/nothing-here; \
                  execac 1 /bin/busybox sleep 2 & sleep 1; /bin/cores | grep 'runs thread'; \
                  execac 1 /bin/busybox true; role 1 tc; wait; \
                  execac -1 /bin/busybox echo any-ac-done; \
                  execac 1 /bin/ftq 2000000 50 & sleep 1; kill $!; wait; \
                  echo compute-killed $(/bin/cores | grep -c 'runs thread'); role 1 tc; /bin/cores; /bin/ps";
    let expected_digest = digest.clone();
    list.push(Integration {
        name: "roles-2-cores".into(),
        machine: machine(2, &exec(script)),
        expected_status: 0,
        check: Box::new(move |serial| {
            printed_in_order(serial, &["core 1 is now an AC", "1     1     running       AC"])?;
            printed(
                serial,
                &format!("{expected_digest}  /etc/hello.txt"),
                "busybox sha256sum on the AC did not print the host's digest",
            )?;
            // A thread's round trip to the AC, with a page unmapped and mapped again there.
            let trip =
                serial.lines().find(|l| l.starts_with("TEST proc-std ")).ok_or("proctest --ac 1 printed nothing")?;
            if !trip.starts_with("TEST proc-std ok") || !trip.contains("ac-trip=0->1->0") {
                return Err(format!("proctest --ac 1: {trip}"));
            }
            printed(
                serial,
                "role: core 0 to AC: the change would leave no timesharing core",
                "making the last TC an AC was not refused",
            )?;
            printed(
                serial,
                "role: core 0 to KC: the change would leave no timesharing core",
                "a KC with no TC left was not refused",
            )?;
            printed(serial, "role: core 7 to AC: no such core", "a role for no core was not refused")?;
            printed(serial, "role: `xc` is no role", "a bad role word was not refused")?;
            printed(serial, "execac: core 0: not an application core", "execac to a TC was not refused")?;
            printed(
                serial,
                "execac: core 1: no kernel core to serve the syspage",
                "execac --syspage with no KC was not refused",
            )?;
            printed(serial, "execac: /bin/nothing-here: no such program", "execac of no program was not refused")?;
            printed(
                serial,
                "execac: core 1: that application core runs a thread already",
                "execac to a busy AC was not refused",
            )?;
            printed(
                serial,
                "role: core 1 to TC: the change would leave no timesharing core, or a process there",
                "a role change of a busy AC was not refused",
            )?;
            printed(serial, "any-ac-done", "execac -1 found no free AC")?;
            printed(serial, "compute-killed 0", "a thread computing on an AC was not ended by its kill")?;
            printed(serial, "      runs thread ", "`cores` did not show the thread the AC runs")?;
            printed_in_order(serial, &["core 1 is now a TC", "1     1     running       TC"])?;
            nothing_leaked(serial, 2)
        }),
    });
    // Four cores: a KC and two ACs; busybox through the syspage, the fuzzer on an AC by trap
    // and by syspage, the scribbler on its own syspage, a spawn refused by the KC.
    let script = "role 3 kc; role 1 ac; role 2 ac; /bin/cores; \
                  execac --syspage 1 /bin/busybox sha256sum /etc/hello.txt; \
                  execac 1 /bin/sysfuzz --seed 11 --calls 3000; \
                  execac --syspage 2 /bin/sysfuzz --seed 12 --calls 3000; \
                  execac 1 /bin/sysfuzz --scribble 3 --seed 13 --calls 1500; \
                  on 0 /bin/sysfuzz --scribble 3 --seed 14 --calls 3000; \
                  on 0 /bin/sysfuzz --full-ring 3; \
                  spawn 3 /bin/busybox true; /bin/syscalls 1; /bin/syscalls 2; /bin/syscalls 3; \
                  execac --syspage 2 /bin/busybox sleep 5 & sleep 1; kill $!; wait; \
                  echo syspage-killed $(/bin/cores | grep -c 'runs thread'); \
                  role 1 tc; role 2 tc; role 3 tc; spawn 0 /bin/busybox echo kernels alive; /bin/cores; /bin/ps";
    list.push(Integration {
        name: "syspages-4-cores".into(),
        machine: machine(4, &exec(script)).with_timeout(300),
        expected_status: ANY_STATUS,
        check: Box::new(move |serial| {
            printed_in_order(serial, &["3     3     running       KC"])?;
            printed(
                serial,
                &format!("{digest}  /etc/hello.txt"),
                "busybox sha256sum through the syspage did not print the host's digest",
            )?;
            test_lines_ok(serial, "sysfuzz", 2)?;
            test_lines_ok(serial, "sysfuzz-scribble", 2)?;
            test_lines_ok(serial, "sysfuzz-full-ring", 1)?;
            printed(
                serial,
                "/bin/busybox on core 3: that core runs no processes",
                "a spawn on the KC was not refused",
            )?;
            if count(serial, "as an application core: ") < 2 {
                return Err("`syscalls` shows no forwarded calls on the ACs".into());
            }
            let kc_line = serial
                .lines()
                .find(|l| l.contains("as a kernel core: "))
                .ok_or("`syscalls 3` shows no syspage entries on the KC")?;
            if kc_line.contains(" 0 syspage entries served here") {
                return Err(format!("the KC served nothing itself: {kc_line}"));
            }
            printed(serial, "syspage-killed 0", "a thread waiting on its syspage was not ended by its kill")?;
            printed(serial, "kernels alive", "a kernel did not survive")?;
            if serial.contains("FAULT core") {
                return Err("a kernel faulted".into());
            }
            if count(serial, "running       TC") < 4 {
                return Err("not every core is a running TC at the end".into());
            }
            nothing_leaked(serial, 4)
        }),
    });
    // Four cores: a KC leaving its role, or stopping, hands its syspages to another KC through
    // their homes, while they are in use: a full-ring fuzzer from TC 0 (calls handed home,
    // each run once and in order) and busybox on AC 1 through `execac --syspage`. With no
    // other KC the role change is refused.
    let script = "role 2 kc; role 1 ac; spawn 0 /bin/sysfuzz --full-ring 2 --rounds 600 > /tmp/ring.txt & \
                  execac --syspage 1 /bin/busybox sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 0.1; \
                  /bin/busybox sha256sum /etc/hello.txt; done; echo ac-done' & sleep 0.3; \
                  role 2 tc; role 3 kc; role 2 tc; sleep 0.2; role 2 kc; core stop 3; wait; \
                  cat /tmp/ring.txt; rm /tmp/ring.txt; syscalls 2; core start 3; role 3 tc; role 2 tc; role 1 tc; \
                  /bin/cores; /bin/ps";
    let digest = hello_digest();
    list.push(Integration {
        name: "kernel-core-hands-syspages-over-4-cores".into(),
        machine: machine(4, &exec(script)).with_timeout(240),
        expected_status: 0,
        check: Box::new(move |serial| {
            printed_in_order(
                serial,
                &[
                    "kernel core 2 serves 2 syspages and no other kernel core could take them over",
                    "kernel core 2 handed its syspages to kernel core 3",
                    "kernel core 3 handed its syspages to kernel core 2",
                    "core 3 stopped in ",
                ],
            )?;
            if count(serial, &format!("{digest}  /etc/hello.txt")) != 12 || !serial.contains("ac-done") {
                return Err("busybox on the AC did not print its twelve digests through the moves".into());
            }
            test_lines_ok(serial, "sysfuzz-full-ring", 1)?;
            printed(serial, "handed to their home, 0 results dropped", "a syspage result was dropped")?;
            if serial.contains("FAULT core") || count(serial, "running       TC") < 4 {
                return Err("a kernel faulted, or not every core is a running TC at the end".into());
            }
            nothing_leaked(serial, 4)
        }),
    });
    // A TC that becomes an AC hands its processes to the other TCs (NIX), while the message
    // stress runs: FTQ writing to a file, a shell sleeping in its child's wait, that child
    // sleeping, and a process of five threads sharing a lock, all on core 2, go on elsewhere
    // with their pids, files and clocks; a core asked by one of its own processes refuses.
    // (Core 0 takes part: a move asks the file service there for the descriptors' references,
    // and what a handler sends to core 0 inside that request's wait for queue space waits
    // behind it, `msg::nested`; the stress sender itself runs outside such waits.)
    let script = "on 1 /bin/msg stress 200000 0,1,2,3 & spawn 2 /bin/ftq 40000 50 > /tmp/ftq.txt & \
                  spawn 2 /bin/busybox sh -c 'sleep 1; echo slept-after-move; /bin/busybox sha256sum /etc/hello.txt' & \
                  spawn 2 /bin/proctest --threads-for 1500 & \
                  sleep 0.4; role 2 ac; /bin/cores; wait; cat /tmp/ftq.txt; rm /tmp/ftq.txt; \
                  execac 2 /bin/busybox echo ac-after-handover; role 2 tc; \
                  spawn 3 /bin/busybox sleep 1 & sleep 0.2; on 3 /bin/role 3 kc; wait; \
                  role 3 kc; role 3 tc; /bin/cores; /bin/ps";
    let expected_digest = hello_digest();
    list.push(Integration {
        name: "role-hands-processes-over-4-cores".into(),
        machine: machine(4, &exec(script)),
        expected_status: 0,
        check: Box::new(move |serial| {
            printed_in_order(serial, &["core 2 is now an AC", "2     2     running       AC"])?;
            // FTQ and the shell; the shell's sleep too when it was forked before the change.
            for name in ["(ftq) moved here from core 2", "(busybox) moved here from core 2"] {
                printed(serial, name, "a process of core 2 did not move to another TC")?;
            }
            let ftq = serial.lines().find(|l| l.starts_with("FTQ ")).ok_or("FTQ wrote no summary to its file")?;
            // It ended on another core (it says `core_end=` when it began measuring on core 2,
            // and only `core=` when its start-up took until after the move).
            let last =
                ftq.split(' ').filter_map(|f| f.strip_prefix("core_end=").or(f.strip_prefix("core="))).next_back();
            if last.is_none_or(|core| core == "2") {
                return Err(format!("FTQ did not end on another core than 2: {ftq}"));
            }
            printed(serial, "slept-after-move", "the shell that moved did not go on after its child's sleep")?;
            // The threads' process moved off core 2 and finished elsewhere, the lock's count
            // every thread's and the joins working. (On a slow host the move can come before
            // it started its threads, and so before it noted its first core: the kernel's line
            // says it moved.)
            printed(serial, "(proctest) moved here from core 2", "the multi-threaded process did not leave core 2")?;
            let threads = serial
                .lines()
                .find(|l| l.starts_with("TEST proc-threads "))
                .ok_or("proctest --threads-for said nothing")?;
            if !threads.starts_with("TEST proc-threads ok ") || threads.contains("end-core=2 ") {
                return Err(format!("the multi-threaded process did not move on and finish: {threads}"));
            }
            printed(
                serial,
                &format!("{expected_digest}  /etc/hello.txt"),
                "the moved shell's busybox did not print the host's digest",
            )?;
            printed(serial, "ac-after-handover", "the new AC did not run a program")?;
            printed(
                serial,
                "role change of core 3 refused: core 3 is home to processes, among them the one asking",
                "a core asked by its own process was not refused",
            )?;
            printed(
                serial,
                "role: core 3 to KC: this program runs on that core, whose processes move first",
                "the refusal of a core asked by its own process did not say to ask from another",
            )?;
            printed_in_order(serial, &["core 3 is now a KC", "core 3 is now a TC"])?;
            stress_ok(serial)?;
            nothing_leaked(serial, 4)
        }),
    });
    // Two cores: core 1's processes (five threads under a lock, a shell and its sleep) go to
    // core 0, the only other TC, and core 1 then runs a program as an AC.
    let script = "spawn 1 /bin/proctest --threads-for 800 & \
                  spawn 1 /bin/busybox sh -c 'sleep 0.5; echo slept-on-core-0' & sleep 0.3; role 1 ac; wait; \
                  execac 1 /bin/busybox echo ac-after-handover; role 1 tc; /bin/cores; /bin/ps";
    list.push(Integration {
        name: "role-hands-processes-over-2-cores".into(),
        machine: machine(2, &exec(script)),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(serial, &["(proctest) moved here from core 1: ", "core 1 is now an AC"])?;
            printed(serial, "TEST proc-threads ok start-core=1 end-core=0 ", "the threads did not finish on core 0")?;
            printed(serial, "slept-on-core-0", "the shell did not go on after the move")?;
            printed(serial, "ac-after-handover", "core 1 did not run a program as an AC")?;
            nothing_leaked(serial, 2)
        }),
    });
    // `move`: a process of five threads sent from core 2 to 3, again to 3 (nothing to do),
    // then to 0; the refusals (no such core, no such process, a KC); a process moving itself.
    let script = "spawn 2 /bin/proctest --threads-for 1200 & sleep 0.3; move 200001 3; move 200001 3; \
                  move 200001 0; move 200001 9; move 424242 1; role 1 kc; move 200001 1; role 1 tc; \
                  on 2 /bin/move self 1; wait; /bin/cores; /bin/ps";
    list.push(Integration {
        name: "move-process-4-cores".into(),
        machine: machine(4, &exec(script)),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &[
                    "process 200001 runs on core 3",
                    "process 200001 runs on core 3",
                    "process 200001 runs on core 0",
                    "move: process 200001 to core 9: no such core",
                    "move: process 424242 to core 1: no such process",
                    "move: process 200001 to core 1: that core is no timesharing core",
                    "(move) moved here from core 2",
                    "this process runs on core 1",
                ],
            )?;
            // (Its first core is what it noted when its threads started, which a slow host may
            // delay past the first move: the kernel's line says where it came from.)
            printed(serial, "(proctest) moved here from core 2", "the threads' process did not leave core 2")?;
            let threads = serial
                .lines()
                .find(|l| l.starts_with("TEST proc-threads "))
                .ok_or("proctest --threads-for said nothing")?;
            if !threads.starts_with("TEST proc-threads ok ") || !threads.contains(" end-core=0 ") {
                return Err(format!("the moved threads did not finish on core 0: {threads}"));
            }
            nothing_leaked(serial, 4)
        }),
    });
    // Roles change while the message stress runs between all four cores (led by core 1); an
    // AC runs a program meanwhile. The stress's counters must still balance.
    let script = "on 1 /bin/msg stress 200000 & sleep 0.3; role 2 ac; role 3 kc; role 2 kc; role 3 ac; \
                  execac 3 /bin/busybox echo on-ac; role 2 tc; role 3 tc; wait; /bin/cores; /bin/ps";
    list.push(Integration {
        name: "roles-under-msg-stress-4-cores".into(),
        machine: machine(4, &exec(script)),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &["core 2 is now an AC", "core 3 is now a KC", "core 2 is now a KC", "core 3 is now an AC"],
            )?;
            printed(serial, "on-ac", "the program on the AC did not run")?;
            stress_ok(serial)?;
            nothing_leaked(serial, 4)
        }),
    });
    file_service_on_a_kernel_core(list, machine);
    syspage_process_moves(list, machine);
    many_threads_move(list, machine);
    children_exit_while_the_parent_moves(list, machine);
    signals_while_moving(list, machine);
    // A kill that reaches a process while it moves (its packer waits for the destination's
    // answer): the process lives in one place only and dies there, its files are released
    // once (a second release closed the shell's console: `Bad file descriptor`), and nothing
    // leaks. Four rounds, the kill a few milliseconds after the role change is asked. Before
    // the packer looked at its messages when killed, three runs in four went wrong. Then three
    // rounds with the process's thread on AC 3 (`execac`): the AC must be free after each
    // (an end from the new home, sent before it shipped the thread, was once ignored).
    let script = "p=200001; for d in 0.005 0.003 0.007 0.005; do spawn 2 /bin/ftq 100000 20 > /dev/null & \
                  sleep 0.5; role 2 kc & sleep $d; kill -9 $p; wait; role 2 tc; p=$((p+1)); done; \
                  role 3 ac; for d in 0.005 0.003 0.007; do spawn 2 /bin/execac 3 /bin/ftq 100000 20 > /dev/null & \
                  sleep 0.5; role 2 kc & sleep $d; kill -9 $p; wait; echo ac-threads $(/bin/cores | grep -c 'runs thread'); \
                  role 2 tc; p=$((p+1)); done; role 3 tc; echo shell-ok; /bin/cores; /bin/ps";
    list.push(Integration {
        name: "kill-during-a-move-4-cores".into(),
        machine: machine(4, &exec(script)),
        expected_status: 0,
        check: Box::new(|serial| {
            printed(serial, "shell-ok", "the shell did not go on after the kills")?;
            for wrong in ["Bad file descriptor", "the destination did not answer"] {
                if serial.contains(wrong) {
                    return Err(format!("a kill during a move: `{wrong}`"));
                }
            }
            if serial.lines().filter(|l| l.starts_with("ac-threads 0")).count() != 3 {
                return Err("an AC still held the thread of a process killed as it moved".into());
            }
            for pid in 200001..=200007 {
                let moved = serial.contains(&format!("process {pid} (ftq) moved here"))
                    || serial.contains(&format!("process {pid} (execac) moved here"));
                let stayed = serial.contains(&format!("process {pid} could not move"));
                if moved && stayed {
                    return Err(format!("process {pid} both moved and stayed: two copies"));
                }
            }
            nothing_leaked(serial, 4)
        }),
    });
    // A process whose thread runs on an AC moves with its home's role change, and with a
    // plain stop of its home: the home recalls the thread, the process moves, the new home
    // ships the thread back to the AC. FTQ under `execac` on AC 3 (homed on TC 2) while the
    // message stress runs between cores 0 and 1; then a busybox shell under `execac` whose
    // `sleep` child waits at home when core 2 stops.
    let script = "role 3 ac; spawn 2 /bin/execac 3 /bin/ftq 150000 20 > /tmp/ftq.txt & sleep 0.4; \
                  on 1 /bin/msg stress 200000 0,1 & sleep 0.1; role 2 kc; /bin/cores; wait; \
                  cat /tmp/ftq.txt; rm /tmp/ftq.txt; role 2 tc; \
                  spawn 2 /bin/execac 3 /bin/busybox sh -c 'sleep 0.6; /bin/busybox sha256sum /etc/hello.txt' & \
                  sleep 0.3; core stop 2; wait; core start 2; role 3 tc; /bin/cores; /bin/ps";
    let digest = hello_digest();
    list.push(Integration {
        name: "execac-process-moves-with-its-home-4-cores".into(),
        machine: machine(4, &exec(script)),
        expected_status: 0,
        check: Box::new(move |serial| {
            printed_in_order(
                serial,
                &["(ftq) moved here from core 2", "core 2 is now a KC", "      runs thread 200001 of process 200001"],
            )?;
            let ftq = serial.lines().filter(|l| l.starts_with("FTQ quanta=150000 ")).collect::<Vec<_>>();
            if ftq.len() != 1 || !ftq[0].ends_with(" core=3") {
                return Err(format!("FTQ on AC 3 did not end there with one summary: {ftq:?}"));
            }
            stress_ok(serial)?;
            printed_in_order(serial, &["(busybox) moved here from core 2", "core 2 stopped in "])?;
            printed(
                serial,
                &format!("{digest}  /etc/hello.txt"),
                "the shell on the AC did not go on after its home stopped",
            )?;
            nothing_leaked(serial, 4)
        }),
    });
}

/// A process with a syspage moves with a role change or a plain stop of its home: its kernel
/// core lets go of the page as the thread checks in (its calls in flight done), the image
/// carries the page, and the destination registers its copy with the same kernel core, served
/// from where the ring stood. A full-ring fuzzer (each handed write once, in order) moves from
/// TC 2 under the message stress; then `execac --syspage` (every trap of the program an entry)
/// goes on on AC 1 while its home TC 2 stops, then while it stops keeping its processes until a
/// start. Before, all three were refused ("a thread of it has a syspage").
fn syspage_process_moves(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let script = "role 3 kc; on 1 /bin/msg stress 150000 0,1 & \
                  spawn 2 /bin/sysfuzz --full-ring 3 --rounds 1500 > /tmp/ring.txt & sleep 0.3; \
                  role 2 kc; sleep 0.2; role 2 tc; wait; cat /tmp/ring.txt; rm /tmp/ring.txt; \
                  role 1 ac; spawn 2 /bin/execac --syspage 1 /bin/syscallbench --only blocking --repeat 60 \
                  > /tmp/sb.txt & sleep 0.5; core stop 2; wait; core start 2; grep DONE /tmp/sb.txt; \
                  spawn 2 /bin/execac --syspage 1 /bin/syscallbench --only blocking --repeat 80 \
                  > /tmp/sb.txt & sleep 0.5; core stop 2 --keep; sleep 0.2; core start 2; wait; \
                  grep DONE /tmp/sb.txt; rm /tmp/sb.txt; syscalls 3; role 1 tc; /bin/cores; /bin/ps";
    list.push(Integration {
        name: "syspage-process-moves-4-cores".into(),
        machine: machine(4, &exec(script)).with_timeout(240),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &["(sysfuzz) moved here from core 2", "core 2 is now a KC", "TEST sysfuzz-full-ring ok rounds=1500 "],
            )?;
            stress_ok(serial)?;
            printed_in_order(
                serial,
                &["(syscallbench) moved here from core 2", "core 2 stopped in ", "SYSCALLBENCH-DONE label=-"],
            )?;
            // Then kept through a stop until a start: the AC holds the thread, the KC lets go of
            // the page, and the kernel after the start registers it again from where it stood.
            printed_in_order(
                serial,
                &["core 2 stopped, its processes kept", "(syscallbench) kept through the stop", "SYSCALLBENCH-DONE"],
            )?;
            if serial.matches("SYSCALLBENCH-DONE label=-").count() != 2 {
                return Err("the benchmark under execac --syspage did not finish through the stop --keep".into());
            }
            printed(serial, "handed to their home, 0 results dropped", "a syspage result was dropped in a move")?;
            if serial.contains("did not let go of thread")
                || serial.contains("could not be registered with a kernel core")
                || serial.contains("is served no more")
            {
                return Err("a syspage did not follow its process".into());
            }
            nothing_leaked(serial, 4)
        }),
    });
}

/// A process of many threads moves: each of its ids is recorded in its range's KCB while it
/// lives elsewhere, 512 at most. 40 threads under a lock move off TC 2 when it becomes a KC,
/// under the message stress; 520 are refused with the reason, and finish where they are.
fn many_threads_move(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let script = "on 1 /bin/msg stress 150000 0,1 & spawn 2 /bin/proctest --threads-for 1500 40 & sleep 0.5; \
                  role 2 kc; wait; role 2 tc; spawn 2 /bin/proctest --threads-for 4000 520 & sleep 2.5; \
                  role 2 kc; wait; /bin/ps";
    list.push(Integration {
        name: "many-threads-move-4-cores".into(),
        machine: machine(4, &exec(script)).with_timeout(240),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(serial, &["(proctest) moved here from core 2: 41 threads", "core 2 is now a KC"])?;
            let lines: Vec<&str> = serial.lines().filter(|l| l.starts_with("TEST proc-threads ")).collect();
            let moved = lines.iter().find(|l| l.contains(" threads=40 ")).ok_or("the 40 threads said nothing")?;
            if !moved.starts_with("TEST proc-threads ok start-core=2 ") || moved.contains("end-core=2 ") {
                return Err(format!("the 40 threads did not finish whole on another core: {moved}"));
            }
            printed(
                serial,
                "it has 521 threads, more than a KCB records (512)",
                "a process of 521 threads was not refused with its reason",
            )?;
            printed(
                serial,
                "TEST proc-threads ok start-core=2 end-core=2 threads=520 ",
                "the 520 threads did not finish where they were",
            )?;
            stress_ok(serial)?;
            nothing_leaked(serial, 4)
        }),
    });
}

/// A shell forks and waits for 300 short children while it is moved between TC 2 and TC 3
/// eighty times: a child's exit that reaches the old core after the parent's image was made,
/// or after it left, follows the parent (it was lost, and the shell waited forever).
fn children_exit_while_the_parent_moves(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let script = "spawn 1 /bin/sh -c 'for i in $(seq 300); do /bin/true; done; echo loop-done' & sleep 0.05; \
                  for j in $(seq 40); do move 100001 2 >/dev/null; move 100001 3 >/dev/null; done; \
                  echo moves-done; wait; /bin/ps";
    list.push(Integration {
        name: "children-exit-while-the-parent-moves-4-cores".into(),
        machine: machine(4, &exec(script)).with_timeout(120),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(serial, &["moves-done", "loop-done", "pid 100001 on core 1 exited with status 0"])?;
            let moves = count(serial, "process 100001 (sh) moved here from core");
            if moves < 40 {
                return Err(format!("the shell moved {moves} times, expected at least 40 of the 80 asked"));
            }
            nothing_leaked(serial, 4)
        }),
    });
}

/// A process moved between TC 2 and TC 3 eighty times while a shell on core 0 probes it 600
/// times with signal 0: every probe finds it (a sender that looked its home up just before a
/// move asks the new home when the old one let go; no run of the old kernel hit that window
/// either, so this guards more than it proves), and a SIGTERM after the moves ends it.
fn signals_while_moving(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let script = "spawn 1 /bin/sleep 30 & sleep 0.2; \
                  (for i in $(seq 600); do kill -0 100001 2>/dev/null || echo signal-lost; done; echo probes-done) & \
                  for j in $(seq 40); do move 100001 2 >/dev/null; move 100001 3 >/dev/null; done; \
                  echo moves-done; wait $!; kill 100001; wait; /bin/ps";
    list.push(Integration {
        name: "signals-while-moving-4-cores".into(),
        machine: machine(4, &exec(script)).with_timeout(120),
        expected_status: 0,
        check: Box::new(|serial| {
            printed(serial, "probes-done", "the probes did not finish")?;
            printed(serial, "moves-done", "the moves did not finish")?;
            let lost = count(serial, "signal-lost");
            if lost != 0 {
                return Err(format!("{lost} of 600 probes did not find the moving process"));
            }
            let moves = count(serial, "process 100001 (sleep) moved here from core");
            if moves < 40 {
                return Err(format!("the process moved {moves} times, expected at least 40 of the 80 asked"));
            }
            printed(
                serial,
                "pid 100001 on core 1 was killed by signal 15",
                "the SIGTERM after the moves did not end it",
            )?;
            nothing_leaked(serial, 4)
        }),
    });
}

/// The requests `/proc/reef/files` says the file service served as a kernel core.
fn served_as_kernel_core(serial: &str) -> Result<u64, String> {
    let line = serial.lines().find(|l| l.starts_with("open files ")).ok_or("/proc/reef/files was not printed")?;
    let (before, _) = line.split_once(" served as a kernel core").ok_or(format!("no kernel-core count in: {line}"))?;
    before.rsplit(' ').next().and_then(|n| n.parse().ok()).ok_or(format!("no kernel-core count in: {line}"))
}

/// Core 0 becomes a KC that serves the files and the console (Corey's kernel cores): its
/// processes, init among them, move to the TCs first; the refusals; files, busybox, syspages
/// and the fuzzers served by it; init's exit from another core still ends the machine.
fn file_service_on_a_kernel_core(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    // Two cores, there and back: init and the shell come home to core 0 for the leak check.
    let script = "role 0 ac; role 0 kc; on 1 role 0 ac; on 1 role 0 kc; /bin/cores; \
                  echo written-on-a-kc > /tmp/kc.txt; cat /tmp/kc.txt; rm /tmp/kc.txt; \
                  /bin/busybox sha256sum /etc/hello.txt; on 1 role 1 kc; cat /proc/reef/files; \
                  on 1 role 0 tc; move 1 0; move $$ 0; /bin/cores; /bin/ps";
    let digest = hello_digest();
    list.push(Integration {
        name: "file-service-on-a-kernel-core-2-cores".into(),
        machine: machine(2, &exec(script)),
        expected_status: 0,
        check: Box::new(move |serial| {
            printed_in_order(
                serial,
                &[
                    "role: core 0 to AC: core 0 owns the devices and the file service: it can be a TC or a KC",
                    "core 0 is home to processes, among them the one asking",
                    "role: core 0 to KC: this program runs on that core, whose processes move first",
                    "role: core 0 to AC: core 0 owns the devices",
                    "(init) moved here from core 0",
                    "core 0 is now a KC",
                    "0     0     running       KC",
                    "      serves the files and the console",
                    "written-on-a-kc",
                    &format!("{digest}  /etc/hello.txt"),
                    "role change of core 1 refused: core 1 is the last timesharing core",
                    "core 0 is now a TC",
                    "process 1 runs on core 0",
                    "process 2 runs on core 0",
                ],
            )?;
            if served_as_kernel_core(serial)? == 0 {
                return Err("the file service served nothing as a kernel core".into());
            }
            nothing_leaked(serial, 2)
        }),
    });
    // Four cores: core 0 becomes a KC while the message stress runs between all four (led by
    // core 1, asked from core 3), then serves busybox's syspage from AC 2, a fuzzer scribbling
    // on its own syspage and full rings handed home, and the files; the shell's `exit 5`
    // travels from init, now on another core, to the kernel on KC 0, which ends the machine.
    let script = "on 1 /bin/msg stress 600000 0,1,2,3 & sleep 0.2; on 3 role 0 kc; on 3 role 2 ac; wait; \
                  execac --syspage 2 /bin/busybox sha256sum /etc/hello.txt; \
                  on 1 /bin/sysfuzz --scribble 0 --seed 21 --calls 1500; \
                  on 3 /bin/sysfuzz --full-ring 0 --rounds 200; \
                  echo kc-file > /tmp/kc.txt; on 3 cat /tmp/kc.txt; rm /tmp/kc.txt; \
                  syscalls 0; cat /proc/reef/files; /bin/cores; on 1 /bin/ps; exit 5";
    let digest = hello_digest();
    list.push(Integration {
        name: "file-service-on-a-kernel-core-4-cores".into(),
        machine: machine(4, &exec(script)).with_timeout(300),
        expected_status: 5,
        check: Box::new(move |serial| {
            printed_in_order(serial, &["(init) moved here from core 0", "core 0 is now a KC", "core 2 is now an AC"])?;
            stress_ok(serial)?;
            printed(
                serial,
                &format!("{digest}  /etc/hello.txt"),
                "busybox through a syspage of KC 0 did not print the host's digest",
            )?;
            test_lines_ok(serial, "sysfuzz-scribble", 1)?;
            test_lines_ok(serial, "sysfuzz-full-ring", 1)?;
            printed(serial, "kc-file", "a file written with core 0 a KC did not read back")?;
            let kc_line = serial
                .lines()
                .find(|l| l.contains("as a kernel core: "))
                .ok_or("`syscalls 0` shows no syspage entries on KC 0")?;
            if kc_line.contains(" 0 syspage entries served here") {
                return Err(format!("KC 0 served no syspage entry itself: {kc_line}"));
            }
            if served_as_kernel_core(serial)? == 0 {
                return Err("the file service served nothing as a kernel core".into());
            }
            printed_in_order(serial, &["0     0     running       KC", "      serves the files and the console"])?;
            if serial.contains("FAULT core") {
                return Err("a kernel faulted".into());
            }
            let rows = process_rows(serial);
            if rows.len() != 4 || rows.iter().any(|row| row[6] != 0) {
                return Err(format!("expected four `ps` rows with no leaked frame, got {rows:?}"));
            }
            Ok(())
        }),
    });
}
