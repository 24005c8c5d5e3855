//! Named pipes and the `/proc` files programs read about processes (issue 27): busybox's
//! `mkfifo`, `mknod`, `diff` against a FIFO, `/proc/<pid>/fd`, `comm`, `exe` and `pidof`, with
//! the answers the same busybox gives on Linux.

use super::{exec, shell_line};
use crate::qemu::Machine;
use crate::test::runner::Integration;
use crate::test::serial::{nothing_leaked, printed};

/// The FIFO lines, with `cores` cores: the FIFO across cores needs three.
fn fifo_script(cores: usize) -> String {
    let mut lines: Vec<String> = [
        "cd /tmp",
        "mkfifo f; mknod p p; ls -l f p | cut -c1-10 | sed s/^/mode=/; stat -c type=%F f",
        // Linux as root makes the device: Reef refuses as Linux does without CAP_MKNOD.
        "mknod c c 1 3 2>/dev/null; echo mknod-char=$?",
        // The cases, each checked with the same busybox on Linux: a file against the
        // FIFO being written, a directory against it (diff compares d/f), a difference.
        "echo hello > a; (echo hello > f &); diff a f; echo diff-file=$?",
        "mkdir d; echo hello > d/f; (echo hello > f &); diff d f; echo diff-directory=$?",
        "(printf 'hello\\nx\\n' > f &); diff a f; echo diff-changed=$?",
        // O_RDWR opens at once as both ends.
        "exec 3<>f; echo both >&3; read line <&3; echo rdwr=$line; exec 3>&-",
        // The reader goes: the writer's next write is EPIPE and SIGPIPE kills it (141).
        "(sleep 1; echo a; sleep 1; echo b; echo writer-lived >&2) > f & head -c 2 < f >/dev/null; wait $!; \
         echo fifo-sigpipe=$?",
    ]
    .map(String::from)
    .to_vec();
    if cores > 2 {
        lines.extend([
            // Reader on core 1, writer on core 2, and the other way round (the writer waits).
            "on 1 cat f & on 2 sh -c 'echo cross-core-fifo > /tmp/f'; wait".to_string(),
            "on 2 sh -c 'echo writer-first > /tmp/f' & sleep 1; on 1 cat f; wait".into(),
        ]);
    }
    lines.extend(["rm f p a; rm -r d; ls".to_string(), "cat /proc/reef/files".into(), "/bin/ps".into()]);
    shell_line(&lines)
}

/// The `/proc` lines: descriptors, `comm`, `exe`, `pidof`.
fn proc_script() -> String {
    shell_line(&[
        // Its own (ls's fd 3 is the listing), another process's, a pipe's name, /dev/null.
        "echo fds=$(ls /proc/self/fd)",
        "exec 7< /etc/hello.txt; echo fd7=$(readlink /proc/$$/fd/7); exec 7<&-",
        "echo | readlink /proc/self/fd/0 | cut -c1-6 | sed s/^/stdin=/",
        "readlink /proc/self/fd/0 < /dev/null | sed s/^/null=/",
        // A process on core 1 reports its descriptors too.
        "on 1 sh -c 'exec 6</etc/hello.txt; readlink /proc/self/fd/6' | sed s/^/core1-fd6=/",
        // comm, exe, and pidof, which reads stat, cmdline and exe.
        "echo comm=$(cat /proc/$$/comm) exe=$(readlink /proc/$$/exe)",
        "sleep 3 & test $(pidof sleep) = $! && echo pidof-sleep-found; cat /proc/$!/comm",
        "pidof sh | grep -qw $$ && echo pidof-sh-found; pidof busybox | grep -qw $$ && echo pidof-busybox-found",
        "kill $!; wait",
        "cat /proc/reef/files",
        "/bin/ps",
    ])
}

fn check_fifos(serial: &str, cores: usize) -> Result<(), String> {
    let modes = serial.lines().filter(|l| *l == "mode=prw-r--r--").count();
    if modes != 2 {
        return Err(format!("mkfifo and mknod p should make two prw-r--r-- nodes, `ls -l` showed {modes}"));
    }
    printed(serial, "type=fifo", "stat did not say the FIFO is one")?;
    printed(serial, "mknod-char=1", "mknod of a character device was not refused")?;
    printed(serial, "diff-file=0", "diff of a file against a FIFO holding the same did not say so")?;
    printed(serial, "diff-directory=0", "diff of a directory against a FIFO did not compare d/f")?;
    printed(serial, "+x\ndiff-changed=1", "diff of a file against a FIFO holding more missed the line")?;
    printed(serial, "rdwr=both", "a FIFO opened O_RDWR did not give back what it was given")?;
    printed(serial, "fifo-sigpipe=141", "a FIFO writer whose reader went was not killed by SIGPIPE")?;
    if serial.contains("writer-lived") {
        return Err("the FIFO writer outlived its EPIPE".into());
    }
    if cores > 2 {
        printed(serial, "cross-core-fifo", "a FIFO between cores 1 and 2 lost its line")?;
        printed(serial, "writer-first", "a FIFO writer that opened first on core 2 lost its line")?;
    }
    printed(serial, "pipes 0, pipe pages 0, parked requests 0", "a FIFO's pipe or a parked open was left")?;
    nothing_leaked(serial, cores)
}

fn check_proc(serial: &str, cores: usize) -> Result<(), String> {
    printed(serial, "fds=0 1 2 3\n", "ls /proc/self/fd did not list 0 to 3")?;
    printed(serial, "fd7=/etc/hello.txt\n", "/proc/<pid>/fd/7 did not link to the file the shell opened")?;
    printed(serial, "stdin=pipe:[", "a pipe's descriptor link is not pipe:[N]")?;
    printed(serial, "null=/dev/null", "a descriptor on /dev/null does not link to it")?;
    printed(serial, "core1-fd6=/etc/hello.txt", "a process on core 1 did not show its descriptor")?;
    printed(serial, "comm=sh exe=/bin/busybox", "/proc/<pid>/comm or exe is not the shell's")?;
    printed(serial, "pidof-sleep-found\nsleep\n", "pidof sleep did not find the one sleep, or comm is wrong")?;
    printed(serial, "pidof-sh-found\npidof-busybox-found", "pidof did not find its own shell")?;
    printed(serial, "pipes 0, pipe pages 0, parked requests 0", "a pipe or a parked request was left")?;
    nothing_leaked(serial, cores)
}

/// The runs: FIFOs on two cores and on four (across cores), `/proc` on two.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    for cores in [2usize, 4] {
        list.push(Integration {
            name: format!("unix-files-fifo-{cores}-cores"),
            machine: machine(cores, &exec(&fifo_script(cores))),
            expected_status: 0,
            check: Box::new(move |serial| check_fifos(serial, cores)),
        });
    }
    list.push(Integration {
        name: "unix-files-proc-2-cores".into(),
        machine: machine(2, &exec(&proc_script())),
        expected_status: 0,
        check: Box::new(|serial| check_proc(serial, 2)),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_fits_the_kernel_command_line() {
        for cores in [2, 4] {
            assert!(crate::qemu::exec_argument(&fifo_script(cores)).is_ok());
        }
        assert!(crate::qemu::exec_argument(&proc_script()).is_ok());
    }
}
