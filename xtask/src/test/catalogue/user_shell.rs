//! The user shell: busybox `sh` started by `/sbin/init`, as a user meets it.

use super::exec;
use crate::qemu::Machine;
use crate::test::runner::Integration;
use crate::test::serial::{file_counts, fstest_passed, nothing_leaked, printed, printed_in_order};
use std::time::Duration;

/// The user shell: busybox `sh` started by `/sbin/init`, as a user meets it.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let user = |cores: usize, line: &str| machine(cores, &exec(line));
    list.push(Integration {
        name: "user-shell-acceptance-3-cores".into(),
        // A path that fails inside the initramfs is answered by the core that asks (no
        // message): `reef syscalls 1` on core 1 counts it.
        machine: user(
            3,
            "ls -l /bin | wc -l; on 2 cat /proc/cpuinfo | head -3; cores; on 1 cat /etc/absent; on 1 reef syscalls 1",
        ),
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
            printed(serial, "can't open '/etc/absent': No such file or directory", "`cat /etc/absent` did not fail")?;
            let local = serial
                .lines()
                .find_map(|l| {
                    l.trim().strip_suffix(
                        " lookups answered here from the initramfs, without a message to the file service",
                    )
                })
                .and_then(|count| count.parse::<u64>().ok())
                .ok_or("`reef syscalls 1` did not say how many lookups core 1 answered itself")?;
            if local == 0 {
                return Err("core 1 asked the file service for a path missing from the initramfs".into());
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
