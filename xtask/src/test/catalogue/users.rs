//! Users and permissions: a process that drops to user 1000 (`reef`) is refused root's files,
//! another user's file in the sticky `/tmp`, the switches of cores, signals to root's
//! processes, ports below 1024 and raw sockets, and keeps its own files; its ids follow it to another core.

use super::exec;
use crate::qemu::Machine;
use crate::test::runner::Integration;
use crate::test::serial::{nothing_leaked, printed_in_order};

/// What user 1000 runs, through busybox `sh`: each refusal prints busybox's own message, then
/// its status, so a command that was let through shows as `status 0`.
const AS_USER: &str = "id; whoami; \
    echo changed > /tmp/etc/config; echo write-config status $?; \
    rm -f /tmp/etc/config; echo rm-config status $?; \
    rm -f /tmp/rootfile; echo rm-rootfile status $?; \
    echo 0 > /sys/devices/system/cpu/cpu1/online; echo offline status $?; \
    core stop 1; echo core-stop status $?; \
    kill -0 1; echo kill-init status $?; \
    nc -l -p 80; echo bind-80 status $?; \
    ping -c 1 127.0.0.1; echo ping status $?; \
    echo mine > /tmp/mine; chmod 600 /tmp/mine; cat /tmp/mine; ls -ln /tmp/mine; rm /tmp/mine; echo own-file status $?; \
    on 1 id; grep -E ^Uid /proc/self/status";

/// The run: root makes `/tmp/etc/config` (0644 in a 0755 directory) and `/tmp/rootfile`
/// (0666 in the sticky `/tmp`), runs [`AS_USER`] as `reef` with `setuidgid`, then moves a
/// process of `reef`'s to core 1 and reads its ids there; root's files are still whole.
pub(super) fn integrations(list: &mut Vec<Integration>, machine: &dyn Fn(usize, &str) -> Machine) {
    let line = format!(
        "mkdir /tmp/etc; echo root > /tmp/etc/config; echo root > /tmp/rootfile; chmod 666 /tmp/rootfile; \
         setuidgid reef sh -c '{AS_USER}'; \
         setuidgid reef sleep 30 & sleep 0.5; move $! 1; grep -E '^(Uid|Cpus_allowed_list)' /proc/$!/status; \
         kill $!; wait; echo files: $(cat /tmp/etc/config /tmp/rootfile); rm -r /tmp/etc /tmp/rootfile; /bin/ps"
    );
    list.push(Integration {
        name: "users-and-permissions-2-cores".into(),
        machine: machine(2, &exec(&line)),
        expected_status: 0,
        check: Box::new(|serial| {
            printed_in_order(
                serial,
                &[
                    "uid=1000(reef) gid=1000(reef)",
                    "reef",
                    "can't create /tmp/etc/config: Permission denied",
                    "write-config status 1",
                    "rm: can't remove '/tmp/etc/config': Permission denied",
                    "rm-config status 1",
                    "rm: can't remove '/tmp/rootfile': Operation not permitted",
                    "rm-rootfile status 1",
                    "can't create /sys/devices/system/cpu/cpu1/online: Permission denied",
                    "offline status 1",
                    "`reef_core_operation` needs root (effective user id 0): operation not permitted",
                    "core: stop core 1: only root (effective user id 0) changes cores: operation not permitted",
                    "core-stop status 1",
                    "can't kill pid 1: Operation not permitted",
                    "kill-init status 1",
                    // Ports below 1024 are root's.
                    "nc: bind: Permission denied",
                    "bind-80 status 1",
                    // So are raw sockets.
                    "ping: permission denied (are you root?)",
                    "ping status 1",
                    "mine",
                    "-rw-------    1 1000     1000",
                    "own-file status 0",
                    "uid=1000(reef) gid=1000(reef)",
                    "Uid:\t1000\t1000\t1000\t1000",
                    // The process moved to core 1 keeps its user.
                    "Uid:\t1000\t1000\t1000\t1000",
                    "Cpus_allowed_list:\t1",
                    "files: root root",
                ],
            )?;
            nothing_leaked(serial, 2)
        }),
    });
}
