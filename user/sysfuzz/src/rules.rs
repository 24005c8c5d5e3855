//! The calls the fuzzer never makes, or never makes with some arguments, and why.
//!
//! The fuzzer must survive its own calls and leave the machine as it found it, on Reef and on
//! a Linux host where it may run as root. A call is kept out when it would end, stop, block or
//! corrupt the fuzzer (its memory, its signal handling, its thread-local storage, its standard
//! descriptors), or change something outside it: other processes, the machine's clock, mounts,
//! modules, system-wide objects that outlive it. Path arguments cannot escape the current
//! directory (see `scratch`), so calls on paths stay in.

/// What the fuzzer does with one system-call number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Never issued.
    Skip,
    /// Issued, but for each `(argument, values)` the argument at that position (0-based) never
    /// takes any of `values`, compared as the 32-bit integers the kernel reads (descriptors,
    /// commands, `prctl` options): a value is redrawn until it is not one of them.
    Avoid(&'static [(usize, &'static [u32])]),
    /// Issued, but for each `(argument, value)` the argument at that position is always
    /// `value`: the form of a call that only reads or checks (a null new action, signal 0).
    Pin(&'static [(usize, u64)]),
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub number: u64,
    /// The Linux x86-64 name, for the reader and the trace.
    pub name: &'static str,
    pub action: Action,
    pub reason: &'static str,
}

const fn skip(number: u64, name: &'static str, reason: &'static str) -> Rule {
    Rule { number, name, action: Action::Skip, reason }
}

const fn avoid(
    number: u64,
    name: &'static str,
    constraints: &'static [(usize, &'static [u32])],
    reason: &'static str,
) -> Rule {
    Rule { number, name, action: Action::Avoid(constraints), reason }
}

const fn pin(number: u64, name: &'static str, pins: &'static [(usize, u64)], reason: &'static str) -> Rule {
    Rule { number, name, action: Action::Pin(pins), reason }
}

/// Standard input, output and error: the terminal, a console or a log file the fuzzer shares
/// with whoever started it, and where its report goes.
const STANDARD_DESCRIPTORS: &[u32] = &[0, 1, 2];
/// The first argument is never a standard descriptor.
const NOT_STANDARD: &[(usize, &[u32])] = &[(0, STANDARD_DESCRIPTORS)];

/// The user-id calls keep the effective (or file-system) user id 0: a fuzzer run as root that
/// became another user could not remove its scratch files, and a Reef run's leak check would
/// find them. Their other ids, the group calls and `setgroups` run freely (and the getters,
/// with random pointers).
const KEEPS_ROOT: &str = "would make a root fuzzer another user for the rest of the run: its effective (or \
                          file-system) user id stays 0, its other ids are random";

const READS_BLOCK: &str = "blocks: on the terminal (fd 0) and on the empty pipes, eventfds and timerfds the fuzzer \
                           creates itself";
const WRITES: &str = "writes random bytes to standard output or error (the console, or a log file), and fills the \
                      fuzzer's own pipes so that later calls block";
const WAITS: &str = "blocks: waits for descriptors, with random and possibly infinite timeouts";
const OWN_MEMORY: &str = "unmaps, remaps or changes the protection of the fuzzer's own memory (code, stack, heap, \
                          its guard pages)";
const SLEEPS: &str = "sleeps for a random, possibly huge, time";
const SOCKETS: &str = "sockets: connect, accept, send and receive block on the fuzzer's own sockets, and on Linux \
                       connect and send reach random network addresses";
const SOCKET_NAMES: &str = "binds to a random address: a socket file at a random absolute path (outside the \
                            scratch directory), or a network port";
const SYSTEM_V: &str = "System V IPC: objects are machine-wide and outlive the fuzzer; random ids reach other \
                        processes' objects; shmat maps and shmdt unmaps memory; semop, msgsnd and msgrcv block";
const NEW_PROCESS: &str = "creates a process or thread that would run the fuzzer's loop (or jump to a random stack)";
const SIGNALS_OTHERS: &str = "sends a signal, to another process or to the fuzzer itself";
const SIGNAL_ZERO: &str = "signal 0 only checks that the process, thread or group exists; any other signal reaches \
                           other processes or the fuzzer itself";
const READS_ONLY: &str = "with a null new value it only reports the current one: installing handlers at random \
                          addresses, ignoring or catching the fatal signals, blocking the signals the fuzzer and \
                          its threads rely on, or a random alternate stack would end it";
const TIMER_SIGNAL: &str = "arms a timer whose signal (SIGALRM, SIGVTALRM, SIGPROF) ends the fuzzer by default";
const CLOCK: &str = "changes the machine's clock";
const REAL_TIME: &str = "real-time scheduling of the fuzzer or another process can starve the machine";
const MOUNTS: &str = "mounts and unmounts: changes what every process of the machine sees";
const MODULES: &str = "loads or unloads kernel code";
const STANDARD_FILE: &str = "on descriptors 0-2 it changes the terminal or the log file the report goes to";
const MESSAGE_QUEUES: &str = "POSIX message queues are machine-wide and outlive the fuzzer; send and receive block";
const KEYS: &str = "keyrings outlive the fuzzer and can replace the parent shell's (KEYCTL_SESSION_TO_PARENT); \
                    request_key runs /sbin/request-key";
const IO_URING: &str = "io_uring runs reads and writes on the fuzzer's descriptors later, where no rule sees them; \
                        io_uring_enter blocks";
const FUTEX_WAITS: &str = "waits on a futex word: blocks";
const PROCESS_GROUP: &str = "leaving the terminal's foreground process group makes the next output stop the fuzzer \
                             (SIGTTOU)";

/// The table, by number. Every number not in it is issued with any arguments.
pub const RULES: &[Rule] = &[
    skip(0, "read", READS_BLOCK),
    skip(1, "write", WRITES),
    skip(3, "close", "would close standard input, output or error (the brief keeps it out entirely)"),
    skip(7, "poll", WAITS),
    avoid(8, "lseek", NOT_STANDARD, "moves the offset of a redirected log, so the report overwrites it"),
    skip(9, "mmap", "MAP_FIXED replaces the fuzzer's own memory"),
    skip(10, "mprotect", OWN_MEMORY),
    skip(11, "munmap", OWN_MEMORY),
    skip(12, "brk", "moves or shrinks the heap the allocator uses"),
    pin(13, "rt_sigaction", &[(1, 0)], READS_ONLY),
    pin(14, "rt_sigprocmask", &[(1, 0)], READS_ONLY),
    skip(15, "rt_sigreturn", "loads every register from a random frame: the fuzzer would jump anywhere"),
    avoid(
        16,
        "ioctl",
        NOT_STANDARD,
        "terminal ioctls change the user's terminal: modes, process \
                                                      group, FIONBIO on a shared description, TIOCSTI",
    ),
    avoid(
        17,
        "pread64",
        NOT_STANDARD,
        "a terminal answers ESPIPE, but a console that reads \
                                                        instead would block (pipes answer ESPIPE)",
    ),
    skip(18, "pwrite64", WRITES),
    skip(19, "readv", READS_BLOCK),
    skip(20, "writev", WRITES),
    skip(23, "select", WAITS),
    skip(25, "mremap", OWN_MEMORY),
    skip(28, "madvise", "MADV_DONTNEED and MADV_FREE drop the fuzzer's own memory"),
    skip(29, "shmget", SYSTEM_V),
    skip(30, "shmat", SYSTEM_V),
    skip(31, "shmctl", SYSTEM_V),
    skip(33, "dup2", "would replace standard input, output or error"),
    skip(34, "pause", "blocks until a signal"),
    skip(35, "nanosleep", SLEEPS),
    skip(37, "alarm", TIMER_SIGNAL),
    skip(38, "setitimer", TIMER_SIGNAL),
    skip(40, "sendfile", "blocks on a full pipe, and copies into standard output"),
    skip(42, "connect", SOCKETS),
    skip(43, "accept", SOCKETS),
    skip(44, "sendto", SOCKETS),
    skip(45, "recvfrom", SOCKETS),
    skip(46, "sendmsg", SOCKETS),
    skip(47, "recvmsg", SOCKETS),
    avoid(48, "shutdown", NOT_STANDARD, "shuts down a standard descriptor that is a socket"),
    skip(49, "bind", SOCKET_NAMES),
    avoid(54, "setsockopt", NOT_STANDARD, "changes a standard descriptor that is a socket"),
    skip(56, "clone", NEW_PROCESS),
    skip(57, "fork", NEW_PROCESS),
    skip(58, "vfork", NEW_PROCESS),
    skip(59, "execve", "replaces the fuzzer"),
    skip(60, "exit", "ends the calling thread"),
    skip(61, "wait4", "blocks while a child lives (reef_spawn may have started some)"),
    pin(62, "kill", &[(1, 0)], SIGNAL_ZERO),
    skip(64, "semget", SYSTEM_V),
    skip(65, "semop", SYSTEM_V),
    skip(66, "semctl", SYSTEM_V),
    skip(67, "shmdt", SYSTEM_V),
    skip(68, "msgget", SYSTEM_V),
    skip(69, "msgsnd", SYSTEM_V),
    skip(70, "msgrcv", SYSTEM_V),
    skip(71, "msgctl", SYSTEM_V),
    avoid(
        72,
        "fcntl",
        &[(0, STANDARD_DESCRIPTORS), (1, &[38])],
        "on descriptors 0-2, O_NONBLOCK or O_ASYNC on \
           the terminal's shared description breaks the shell and the report (SIGIO ends the fuzzer); F_OFD_SETLKW \
           (38) blocks on a lock another of the fuzzer's descriptors holds on the same inode",
    ),
    skip(
        73,
        "flock",
        "locks belong to the inode: two of the fuzzer's own descriptors block each other (all the \
                       eventfds, epoll and inotify descriptors share one anonymous inode on Linux)",
    ),
    avoid(77, "ftruncate", NOT_STANDARD, "truncates a redirected log"),
    avoid(91, "fchmod", NOT_STANDARD, STANDARD_FILE),
    avoid(93, "fchown", NOT_STANDARD, STANDARD_FILE),
    skip(101, "ptrace", "stops or changes other processes"),
    skip(103, "syslog", "clears the kernel log or turns the console off"),
    pin(105, "setuid", &[(0, 0)], KEEPS_ROOT),
    skip(109, "setpgid", PROCESS_GROUP),
    skip(112, "setsid", PROCESS_GROUP),
    pin(113, "setreuid", &[(1, 0)], KEEPS_ROOT),
    pin(117, "setresuid", &[(1, 0)], KEEPS_ROOT),
    pin(122, "setfsuid", &[(0, 0)], KEEPS_ROOT),
    skip(128, "rt_sigtimedwait", "blocks until a signal, possibly forever"),
    skip(129, "rt_sigqueueinfo", SIGNALS_OTHERS),
    skip(130, "rt_sigsuspend", "blocks until a signal"),
    pin(131, "sigaltstack", &[(0, 0)], READS_ONLY),
    skip(135, "personality", "changes how the kernel treats the fuzzer (READ_IMPLIES_EXEC, ADDR_LIMIT_32BIT, ...)"),
    skip(141, "setpriority", "changes other processes' priority (PRIO_USER, PRIO_PGRP, random pids)"),
    skip(142, "sched_setparam", REAL_TIME),
    skip(144, "sched_setscheduler", REAL_TIME),
    skip(153, "vhangup", "hangs up the terminal"),
    skip(155, "pivot_root", MOUNTS),
    avoid(
        157,
        "prctl",
        &[(0, &[22, 26, 35, 59])],
        "PR_SET_SECCOMP (strict mode kills at the next call), PR_SET_TSC \
                                                    (RDTSC would fault), PR_SET_MM (rewrites the memory layout the \
                                                    kernel records), PR_SET_SYSCALL_USER_DISPATCH (every call raises \
                                                    SIGSYS)",
    ),
    skip(158, "arch_prctl", "ARCH_SET_FS and ARCH_SET_GS clobber thread-local storage"),
    skip(159, "adjtimex", CLOCK),
    skip(
        160,
        "setrlimit",
        "lower limits end or cripple the fuzzer (RLIMIT_CPU, RLIMIT_FSIZE signals, RLIMIT_AS, \
                            RLIMIT_NOFILE)",
    ),
    skip(161, "chroot", "changes the fuzzer's root: every later absolute path would name another file"),
    skip(163, "acct", "turns on machine-wide process accounting into a random file"),
    skip(164, "settimeofday", CLOCK),
    skip(165, "mount", MOUNTS),
    skip(166, "umount2", MOUNTS),
    skip(167, "swapon", "changes the machine's swap"),
    skip(168, "swapoff", "changes the machine's swap"),
    skip(169, "reboot", "reboots or halts the machine"),
    skip(170, "sethostname", "renames the machine"),
    skip(171, "setdomainname", "renames the machine"),
    skip(175, "init_module", MODULES),
    skip(176, "delete_module", MODULES),
    skip(179, "quotactl", "changes the machine's disk quotas"),
    avoid(190, "fsetxattr", NOT_STANDARD, STANDARD_FILE),
    avoid(199, "fremovexattr", NOT_STANDARD, STANDARD_FILE),
    pin(200, "tkill", &[(1, 0)], SIGNAL_ZERO),
    skip(202, "futex", FUTEX_WAITS),
    skip(203, "sched_setaffinity", "can confine the fuzzer or other processes to one CPU"),
    skip(216, "remap_file_pages", OWN_MEMORY),
    skip(218, "set_tid_address", "the kernel writes 0 there when the thread exits, wherever it points"),
    skip(220, "semtimedop", SYSTEM_V),
    skip(222, "timer_create", TIMER_SIGNAL),
    skip(227, "clock_settime", CLOCK),
    skip(230, "clock_nanosleep", SLEEPS),
    skip(231, "exit_group", "ends the fuzzer"),
    skip(232, "epoll_wait", WAITS),
    pin(234, "tgkill", &[(2, 0)], SIGNAL_ZERO),
    skip(240, "mq_open", MESSAGE_QUEUES),
    skip(241, "mq_unlink", MESSAGE_QUEUES),
    skip(242, "mq_timedsend", MESSAGE_QUEUES),
    skip(243, "mq_timedreceive", MESSAGE_QUEUES),
    skip(246, "kexec_load", "replaces the running kernel"),
    skip(247, "waitid", "blocks while a child lives (reef_spawn may have started some)"),
    skip(248, "add_key", KEYS),
    skip(249, "request_key", KEYS),
    skip(250, "keyctl", KEYS),
    skip(251, "ioprio_set", "changes other processes' I/O priority"),
    avoid(
        260,
        "fchownat",
        NOT_STANDARD,
        "with AT_EMPTY_PATH: on descriptors 0-2 it changes the \
                                                          terminal or the log file",
    ),
    skip(270, "pselect6", WAITS),
    skip(271, "ppoll", WAITS),
    skip(273, "set_robust_list", "the kernel walks that list, wherever it points, when the thread exits"),
    skip(275, "splice", "blocks on an empty or full pipe, and copies into standard output"),
    skip(276, "tee", "blocks on an empty or full pipe"),
    skip(278, "vmsplice", "blocks on a full pipe, and copies into standard output if it is a pipe"),
    skip(281, "epoll_pwait", WAITS),
    skip(285, "fallocate", "a huge length allocates real disk or, on a memfd, memory until the machine runs out"),
    skip(288, "accept4", SOCKETS),
    skip(292, "dup3", "would replace standard input, output or error"),
    avoid(295, "preadv", NOT_STANDARD, "as pread64"),
    skip(296, "pwritev", WRITES),
    skip(297, "rt_tgsigqueueinfo", SIGNALS_OTHERS),
    skip(298, "perf_event_open", "events can send signals (sigtrap) and hold the machine's counters"),
    skip(299, "recvmmsg", SOCKETS),
    skip(300, "fanotify_init", "as root, permission events can block every open on the machine"),
    skip(301, "fanotify_mark", "as root, permission events can block every open on the machine"),
    skip(302, "prlimit64", "lowers limits of the fuzzer (see setrlimit) or of other processes"),
    skip(305, "clock_adjtime", CLOCK),
    skip(307, "sendmmsg", SOCKETS),
    skip(311, "process_vm_writev", "writes into other processes' memory"),
    skip(313, "finit_module", MODULES),
    skip(314, "sched_setattr", REAL_TIME),
    skip(317, "seccomp", "a filter or strict mode kills the fuzzer at its next call"),
    skip(320, "kexec_file_load", "replaces the running kernel"),
    skip(321, "bpf", "as root, loads and attaches programs to the machine's kernel"),
    skip(322, "execveat", "replaces the fuzzer"),
    skip(323, "userfaultfd", "a registered range makes the fuzzer's own accesses block"),
    skip(
        326,
        "copy_file_range",
        "copies up to 2 GiB a call: a scratch file truncated to a huge size fills memory or \
                                  disk",
    ),
    skip(327, "preadv2", "offset -1 reads at the file position, so it blocks as readv does"),
    skip(328, "pwritev2", WRITES),
    skip(329, "pkey_mprotect", OWN_MEMORY),
    avoid(
        331,
        "pkey_free",
        &[(0, &[0])],
        "key 0 guards all of the fuzzer's memory: freed, pkey_alloc hands it \
                                           out again, with access disabled",
    ),
    skip(334, "rseq", "the kernel writes the registered area and aborts into a random critical-section handler"),
    skip(335, "uretprobe", "only for the uprobe trampoline: from anywhere else Linux (6.11+) raises SIGILL"),
    skip(336, "uprobe", "only for the uprobe trampoline: from anywhere else Linux (6.16+) raises SIGILL"),
    skip(424, "pidfd_send_signal", SIGNALS_OTHERS),
    skip(425, "io_uring_setup", IO_URING),
    skip(426, "io_uring_enter", IO_URING),
    skip(427, "io_uring_register", IO_URING),
    skip(428, "open_tree", MOUNTS),
    skip(429, "move_mount", MOUNTS),
    skip(430, "fsopen", MOUNTS),
    skip(431, "fsconfig", MOUNTS),
    skip(432, "fsmount", MOUNTS),
    skip(433, "fspick", MOUNTS),
    skip(435, "clone3", NEW_PROCESS),
    avoid(436, "close_range", NOT_STANDARD, "would close standard input, output or error"),
    skip(438, "pidfd_getfd", "as root, takes another process's descriptors, which later calls would change"),
    skip(441, "epoll_pwait2", WAITS),
    skip(442, "mount_setattr", MOUNTS),
    skip(443, "quotactl_fd", "changes the machine's disk quotas"),
    skip(449, "futex_waitv", FUTEX_WAITS),
    avoid(
        452,
        "fchmodat2",
        NOT_STANDARD,
        "with AT_EMPTY_PATH: on descriptors 0-2 it changes the \
                                                           terminal or the log file",
    ),
    skip(455, "futex_wait", FUTEX_WAITS),
    skip(abi::call::ROLE, "reef_role", "changes another core's role: outside the fuzzer"),
    skip(
        abi::call::RETURN_FROM_AC,
        "reef_return_from_ac",
        "brings the fuzzer home from the application core `execac` put it on, so the rest of a run would test the trap path",
    ),
    skip(abi::call::MOVE_PROCESS, "reef_move_process", "moves the fuzzer, or another process, to another core"),
];

/// Highest Linux number the fuzzer draws.
pub const LAST_LINUX_NUMBER: u64 = 460;

/// The rule for `number`, if there is one.
pub fn rule(number: u64) -> Option<&'static Rule> {
    RULES.binary_search_by_key(&number, |rule| rule.number).ok().map(|index| &RULES[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_unique_and_explained() {
        assert!(RULES.windows(2).all(|pair| pair[0].number < pair[1].number), "sorted, no number twice");
        for rule in RULES {
            let known = rule.number <= LAST_LINUX_NUMBER || abi::call::is_reef_call(rule.number);
            assert!(known, "{} is a Linux or Reef number", rule.name);
            assert!(!rule.reason.is_empty() && !rule.name.is_empty());
            if let Action::Avoid(constraints) = rule.action {
                assert!(!constraints.is_empty());
                for (position, values) in constraints {
                    assert!(*position < 6 && !values.is_empty(), "{}", rule.name);
                }
            }
            if let Action::Pin(pins) = rule.action {
                assert!(!pins.is_empty() && pins.iter().all(|(position, _)| *position < 6), "{}", rule.name);
            }
        }
    }

    #[test]
    fn every_call_the_brief_names_is_kept_out() {
        let skipped = [
            60, 231, 15, 58, 57, 56, 435, 59, 322, 34, 11, 25, 10, 12, 28, 35, 230, 0, 19, 61, 247, 202, 23, 7, 232,
            271, 270, 281, 441, 169, 101, 317, 135, 158, 218, 273, 334, 30, 67, 9, 425, 426, 427, 323, 203, 160, 302,
            3, 33, 292, 1, 18, 20, 296, 129, 297, 424, 288, 299, 307,
        ];
        // Of the socket calls, those that block, reach the network or make names; `socket`,
        // `socketpair`, `listen`, `shutdown`, `get*name` and `*sockopt` are issued (issue 30).
        for number in skipped.into_iter().chain(42..=47).chain([49]) {
            assert_eq!(rule(number).map(|rule| rule.action), Some(Action::Skip), "{number}");
        }
        // The signal calls the brief also kept out run only in forms that change nothing:
        // signal 0, a null new action, mask or alternate stack.
        let harmless = [(62, (1, 0)), (200, (1, 0)), (234, (2, 0)), (13, (1, 0)), (14, (1, 0)), (131, (0, 0))];
        for (number, pinned) in harmless {
            let action = rule(number).map(|rule| rule.action);
            assert!(matches!(action, Some(Action::Pin(pins)) if pins == [pinned]), "{number}: {action:?}");
        }
        // The brief's "skip fd 0 for pread and preadv": kept to descriptors above 2.
        for number in [17, 295] {
            assert_eq!(rule(number).unwrap().action, Action::Avoid(&[(0, &[0, 1, 2])]));
        }
        assert!(rule(157).is_some_and(|rule| matches!(rule.action, Action::Avoid(_))), "prctl runs");
        // The user-id calls run with the effective (file-system) id pinned to root's; the
        // group calls, setgroups and every getter run freely.
        for (number, pinned) in [(105, (0, 0)), (113, (1, 0)), (117, (1, 0)), (122, (0, 0))] {
            let action = rule(number).map(|rule| rule.action);
            assert!(matches!(action, Some(Action::Pin(pins)) if pins == [pinned]), "{number}: {action:?}");
        }
        for free in [102, 104, 106, 107, 108, 114, 115, 116, 118, 119, 120, 123] {
            assert_eq!(rule(free), None, "{free} runs with any arguments");
        }
        assert_eq!(rule(39), None, "getpid runs freely");
    }
}
