//! The kernel's rooms and their layers: the one table `cargo xtask check` reads (edit here).
//!
//! A room is what sits right under a kernel crate's `src/` (a file's stem or a directory),
//! or a longer path prefix given its own row (`syscall/syspage`): the longest prefix wins.
//! A room may name rooms of a lower or its own rank, never a higher one. Ranks below
//! [`BASE_RANKS_BELOW`] are the base, the only kernel code allowed `unsafe`. Rows of a crate
//! whose directory does not exist yet are skipped; every file of a crate that exists must
//! fall in a row, and every row must hold a file.

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Room {
    /// The crate's directory, from the workspace root.
    pub crate_dir: &'static str,
    /// The room: a path under `src/` without `.rs`, `/` between parts.
    pub room: &'static str,
    pub rank: u8,
    /// Why it sits there, in a line.
    pub why: &'static str,
}

pub const fn room(crate_dir: &'static str, room: &'static str, rank: u8, why: &'static str) -> Room {
    Room { crate_dir, room, rank, why }
}

/// Ranks below this are the base (the crate `base`): `unsafe` is allowed there.
pub const BASE_RANKS_BELOW: u8 = 10;

/// The kernel crates: their directory and the name other crates' paths start with.
pub const KERNEL_CRATES: [(&str, &str); 2] = [("kernel/base", "base"), ("kernel", "kernel")];

#[rustfmt::skip]
pub const ROOMS: &[Room] = &[
    // crate `base` (kernel/base): holds the unsafe, names no service.
    room("kernel/base", "arch",      0, "x86-64: entry, trampoline, descriptor tables, APIC, paging, context switch"),
    room("kernel/base", "percore",   1, "the shared region and KCB access every room reads"),
    room("kernel/base", "mm",        2, "frames, heap, address spaces, the copy window"),
    room("kernel/base", "time",      2, "TSC time"),
    room("kernel/base", "random",    2, "random bytes"),
    room("kernel/base", "sched",     3, "the scheduler's mechanism, hooks, per-thread extension slot"),
    room("kernel/base", "console",   4, "the console sink (its input wakes the scheduler)"),
    room("kernel/base", "interrupt", 4, "the trap table higher rooms register with (it drives the tick)"),
    room("kernel/base", "virtio",    5, "what drivers need: virtio's Hal, the transports, DMA request queues"),
    room("kernel/base", "lib",       9, "the crate root: declares the rooms"),

    // crate `kernel`: the services, each #![deny(unsafe_code)], and boot.
    room("kernel", "msg",            10, "channels' kernel side: registry, ICC, notification"),
    room("kernel", "syscall/syspage", 11, "the syspage service (Memsc)"),
    room("kernel", "dev",            12, "devices: virtio-mmio transports, their interrupts, the 9P transport"),
    room("kernel", "fs",             13, "files: VFS, 9P client, tmpfs, /proc, /sys, the file service"),
    room("kernel", "proc",           14, "processes: creation, fork, threads, signals, migration"),
    room("kernel", "core",           15, "the cores orchestrator: roles, lifecycle, park, boot driver, AC, images, idle loop"),
    room("kernel", "control",        16, "control commands and read-only views (a system call runs them)"),
    room("kernel", "power",          16, "power off, restart, halt"),
    room("kernel", "syscall",        17, "system calls: decode, then invoke any service below"),
    room("kernel", "selftest",       18, "in-guest tests and fault injection (the test-hooks feature)"),
    room("kernel", "init_process",   19, "the end of boot: tests asked for, then /sbin/init"),
    room("kernel", "boot",           20, "wires hooks and handlers in one order"),
    room("kernel", "main",           21, "the crate root: declares the rooms, the panic handler"),
];
