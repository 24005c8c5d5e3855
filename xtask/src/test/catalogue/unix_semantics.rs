//! Unix semantics a shell relies on, as issue 27 found them broken (SIGPIPE, signal statuses,
//! traps, vfork, taskset, CPU time, `#!`): busybox's answers must be Linux's.

use super::{exec, shell_line};
use crate::qemu::Machine;
use crate::test::runner::Integration;
use crate::test::serial::{nothing_leaked, printed};

/// Runs of the trap race (`kill $$ &` before a subshell): Linux's answer each time.
const TRAP_RUNS: usize = 5;

/// The findings as shell lines, with `cores` cores: those that cross cores need two.
fn findings_script(cores: usize) -> String {
    let mut lines = vec![
        // The first find: the writer must die of SIGPIPE once head has gone.
        "(yes hello | head -c 5 >/dev/null; echo yes-head=$?)".to_string(),
        "sh -c 'kill -s PIPE $$'; echo own-pipe=$?".into(),
        "sh -c 'yes; echo yes-status=$? >&2' | head -c 1 >/dev/null; echo yes-quiet".into(),
        // A TERM trap that exits: the kill comes while the subshell runs (the parent runs on
        // after forking), so $? in the trap is the subshell's 42.
        "printf 'trap \\047false;exit\\047 TERM; kill $$ & (sleep 1; exit 42)\\n' > /tmp/trap.sh".into(),
        format!("for i in $(seq {TRAP_RUNS}); do sh /tmp/trap.sh; echo trap=$?; done"),
        // popen and system: clone(CLONE_VM | CLONE_VFORK) from glibc's posix_spawn.
        "printf 'BEGIN { while ((\\042echo hi; echo there\\042 | getline l) > 0) print \\042got \\042 l; \
         r = system(\\042exit 5\\042); print \\042system=\\042 r }\\n' > /tmp/p.awk; awk -f /tmp/p.awk"
            .into(),
        // busybox's spawn sees its vforked child's exec error in the memory they share.
        "echo a | xargs /nonexistent 2>/dev/null; echo xargs=$?".into(),
    ];
    if cores > 1 {
        lines.extend([
            "on 1 yes | head -c 5 >/dev/null; echo on-yes=$?".to_string(),
            "on 1 sh -c 'kill -s PIPE $$'; echo on-pipe=$?".into(),
        ]);
    }
    lines.extend(["rm -f /tmp/trap.sh /tmp/p.awk".to_string(), "/bin/ps".into()]);
    shell_line(&lines)
}

/// The calls the issue found missing or wrong, as shell lines.
fn calls_script(cores: usize) -> String {
    let mut lines = vec![
        // CPU time reaches wait4's rusage: `time` printed zeros.
        "time sh -c 'i=0; while [ $i -lt 6000 ]; do i=$((i+1)); done' 2>/tmp/time.txt; grep user /tmp/time.txt"
            .to_string(),
        // statfs names each mount's type (it was ENOSYS).
        "stat -f -c fs=%T /tmp /proc /etc".into(),
        // The kernel runs #! scripts: the process is named after the script.
        "printf '#!/bin/sh\\necho script-comm $(cut -d\\\\  -f2 /proc/$$/stat) $0 $1\\n' > /tmp/s.sh; \
         chmod +x /tmp/s.sh; /tmp/s.sh one"
            .into(),
    ];
    if cores > 1 {
        // taskset moves the program to core 1 before it runs there.
        lines.push("taskset -c 1 cut -d\\  -f39 /proc/self/stat | sed s/^/taskset-core=/".into());
    } else {
        lines.push("taskset -c 1 true 2>/dev/null; echo taskset-refused=$?".into());
    }
    lines.extend(["rm -f /tmp/time.txt /tmp/s.sh".to_string(), "/bin/ps".into()]);
    shell_line(&lines)
}

/// The `user` line of busybox `time` shows some CPU time (it printed `0m 0.00s` before).
fn user_time_counted(serial: &str) -> Result<(), String> {
    let line = serial.lines().find(|l| l.starts_with("user")).ok_or("`time` printed no user line")?;
    if line.trim_end().ends_with("0m 0.00s") {
        return Err(format!("a 6000-round shell loop used no user time: {line}"));
    }
    Ok(())
}

fn check_findings(serial: &str, cores: usize) -> Result<(), String> {
    printed(serial, "yes-head=0", "`yes hello | head -c 5` did not end with head's status")?;
    printed(serial, "own-pipe=141", "a shell killed by its own SIGPIPE did not report 141")?;
    printed(serial, "yes-quiet", "the pipeline with `yes` on its left did not end")?;
    printed(serial, "yes-status=141", "yes in `sh -c` did not die of SIGPIPE (status 141)")?;
    if serial.contains("Broken pipe") {
        return Err("yes saw EPIPE and lived to print it: no SIGPIPE".into());
    }
    let traps = serial.lines().filter(|l| *l == "trap=42").count();
    if traps != TRAP_RUNS {
        let all: Vec<&str> = serial.lines().filter(|l| l.starts_with("trap=")).collect();
        return Err(format!("the TERM trap's status should be 42 in {TRAP_RUNS} runs: {all:?}"));
    }
    printed(serial, "got hi\ngot there\nsystem=5", "awk's getline from a command or system() failed")?;
    printed(serial, "xargs=127", "xargs did not see its child's exec error (vfork shares memory)")?;
    if cores > 1 {
        printed(serial, "on-yes=0", "yes on core 1 did not end when head did")?;
        printed(serial, "on-pipe=141", "a program on core 1 killed by SIGPIPE did not report 141")?;
    }
    nothing_leaked(serial, cores)
}

fn check_calls(serial: &str, cores: usize) -> Result<(), String> {
    user_time_counted(serial)?;
    printed(serial, "fs=tmpfs\nfs=proc\nfs=ramfs", "statfs did not name tmpfs, proc and the initramfs's ramfs")?;
    printed(serial, "script-comm (s.sh) /tmp/s.sh one", "the kernel did not run the #! script under its name")?;
    if cores > 1 {
        printed(serial, "taskset-core=1", "taskset -c 1 did not move the program to core 1")?;
    } else {
        printed(serial, "taskset-refused=1", "taskset to a core that does not exist was not refused")?;
    }
    nothing_leaked(serial, cores)
}

/// The runs: one, two and four cores, each script.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    for cores in [1usize, 2, 4] {
        list.push(Integration {
            name: format!("unix-semantics-{cores}-cores"),
            machine: machine(cores, &exec(&findings_script(cores))),
            expected_status: 0,
            check: Box::new(move |serial| check_findings(serial, cores)),
        });
        list.push(Integration {
            name: format!("unix-calls-{cores}-cores"),
            machine: machine(cores, &exec(&calls_script(cores))),
            expected_status: 0,
            check: Box::new(move |serial| check_calls(serial, cores)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_fits_the_kernel_command_line() {
        for cores in [1, 2, 4] {
            assert!(crate::qemu::exec_argument(&findings_script(cores)).is_ok());
            assert!(crate::qemu::exec_argument(&calls_script(cores)).is_ok());
        }
    }

    #[test]
    fn time_without_user_time_fails() {
        assert!(user_time_counted("real\t0m 1.00s\nuser\t0m 0.00s\nsys\t0m 0.00s\n").is_err());
        assert!(user_time_counted("real\t0m 1.00s\nuser\t0m 0.31s\n").is_ok());
        assert!(user_time_counted("nothing").is_err());
    }
}
