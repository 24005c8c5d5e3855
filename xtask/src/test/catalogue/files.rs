//! The file calls: `user/fstest` on two cores, and a file written on one core read on another.

use super::exec;
use crate::qemu::Machine;
use crate::test::runner::Integration;
use crate::test::serial::{fstest_passed, nothing_leaked, printed, spawn_lines};
use std::time::Duration;

/// The file calls: `user/fstest` on two cores one after the other (each in its own scratch
/// directory under /tmp), and one file written on core 1 and read back on core 3; each run
/// ends with the leak check.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
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
                // left, not the file kept on purpose between the two. Then the coherence loop
                // (issue 31): a writer on core 1, readers on cores 2, 3 and 0 (the service's).
                "spawn 1 /bin/fstest --write /tmp/shared 100000 7; \
                 spawn 3 /bin/fstest --check /tmp/shared 100000 7; \
                 spawn 3 /bin/busybox rm /tmp/shared; \
                 on 1 /bin/fstest --coherence-write /tmp/coherent 10000 & \
                 on 2 /bin/fstest --coherence-read /tmp/coherent 10000 & \
                 on 3 /bin/fstest --coherence-read /tmp/coherent 10000 & \
                 /bin/fstest --coherence-read /tmp/coherent 10000; wait; \
                 /bin/busybox rm -r /tmp/coherent; /bin/ps",
            ),
        ),
        expected_status: 0,
        check: Box::new(|serial| {
            fstest_passed(serial, 6)?;
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
            printed(
                serial,
                "TEST fs-coherence-written ok core 1: 10000 rounds written",
                "core 1 did not write the coherence loop's 10000 rounds",
            )?;
            for core in [0, 2, 3] {
                let reader = serial.lines().any(|line| {
                    line.starts_with(&format!("TEST fs-coherence-read ok core {core}: "))
                        && line.ends_with("rounds were written, none stale")
                });
                if !reader {
                    return Err(format!("the coherence reader on core {core} did not see every round unstale"));
                }
            }
            nothing_leaked(serial, 4)
        }),
    });
    // An echo between cores, over an `AF_UNIX` socket and then over TCP on 127.0.0.1: the
    // server on core 1, a client on core 2 (300000 bytes, a step at a time) and one on core 0;
    // then busybox's `nc` listening on core 1 (which `netstat` lists, from /proc/net/tcp) takes
    // a file from `nc` on core 2. The sockets, their pipes, the name and the ports go.
    let digest = super::roles::hello_digest();
    list.push(Integration {
        name: "socket-echo-between-cores-3-cores".into(),
        machine: machine(
            3,
            &exec(
                "spawn 1 /bin/fstest --echo-serve /tmp/echo 2 & \
                 spawn 2 /bin/fstest --echo /tmp/echo 300000 3; /bin/fstest --echo /tmp/echo 5000 4; wait; \
                 spawn 1 /bin/fstest --echo-serve 127.0.0.1:7000 2 & \
                 spawn 2 /bin/fstest --echo 127.0.0.1:7000 300000 5; /bin/fstest --echo 127.0.0.1:7000 5000 6; wait; \
                 spawn 1 /bin/sh -c '/bin/nc -l -p 7001 > /tmp/nc.txt' & sleep 0.3; netstat -tln; \
                 spawn 2 /bin/sh -c '/bin/nc 127.0.0.1 7001 < /etc/hello.txt'; wait; \
                 sha256sum /tmp/nc.txt; rm /tmp/nc.txt; cat /proc/reef/files; /bin/ps",
            ),
        ),
        expected_status: 0,
        check: Box::new(move |serial| {
            for (place, bytes, seed, at) in [
                ("core 2", 300000, 3, "/tmp/echo"),
                ("core 0", 5000, 4, "/tmp/echo"),
                ("core 2", 300000, 5, "127.0.0.1:7000"),
                ("core 0", 5000, 6, "127.0.0.1:7000"),
            ] {
                printed(
                    serial,
                    &format!("TEST fs-echoed ok {place}: {bytes} bytes of seed {seed} echoed by {at}"),
                    &format!("the client on {place} did not get its {bytes} bytes back from {at}"),
                )?;
            }
            for at in ["/tmp/echo", "127.0.0.1:7000"] {
                printed(
                    serial,
                    &format!("TEST fs-echo-served ok core 1: 2 connections at {at}, 305000 bytes echoed"),
                    &format!("the server on core 1 did not serve both connections at {at}"),
                )?;
            }
            if !serial.lines().any(|line| {
                line.split_whitespace().collect::<Vec<_>>() == ["tcp", "0", "0", "0.0.0.0:7001", "0.0.0.0:*", "LISTEN"]
            }) {
                return Err(
                    "busybox netstat -tln (which reads /proc/net/tcp) does not list nc listening on 7001".into()
                );
            }
            printed(
                serial,
                &format!("{digest}  /tmp/nc.txt"),
                "busybox nc on core 1 did not receive /etc/hello.txt whole from nc on core 2 over 127.0.0.1",
            )?;
            printed(
                serial,
                "pipes 0, pipe pages 0, parked requests 0, tmpfs nodes 0",
                "a socket's pipe or name was left",
            )?;
            printed(serial, "sockets 0, epolls 0", "a socket was left open at the file service")?;
            nothing_leaked(serial, 3)
        }),
    });
    // Processes killed (`kill -9`) while their open of a file on core 1 is on its way to the
    // file service on core 0: the open file the answer gives must be released (it was once
    // dropped, and the service kept 4 to 9 files open, unlinked, with their pages, for the
    // system's life), and no open may create its file after the `wait` that saw its process
    // end (the `rm` after the loop would miss it). Twenty kills at different moments. The
    // `wait` sees the launchers on core 0 end; the shells they started on core 1 (pids from
    // 100000) die by a message of the same kill, a moment later, as on Linux a killed process
    // ends after `kill` returns: the script waits (5 s at most) until /proc lists none.
    list.push(Integration {
        name: "killed-while-opening-2-cores".into(),
        machine: machine(
            2,
            &exec(
                "for k in 1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8 9 3 5; do \
                 spawn 1 /bin/sh -c 'while :; do echo x > /tmp/k$$; /bin/cat /tmp/k$$; done' > /dev/null & \
                 sleep 0.0$k; kill -9 -1 2>/dev/null; wait; done; \
                 n=0; while ls /proc | grep -q '^1[0-9][0-9][0-9][0-9][0-9]$' && [ $n -lt 100 ]; do n=$((n+1)); sleep 0.05; done; \
                 rm -f /tmp/k*; cat /proc/reef/files; /bin/ps",
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
