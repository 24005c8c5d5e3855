//! `cargo xtask`: Reef's one entry point for building, running, testing and measuring.
#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod bench;
mod check;
mod debian;
mod interrupts;
mod kernel_images;
mod linux_guest;
mod net;
mod qemu;
mod rootfs;
mod test;
mod tools;

use std::process::ExitCode;

const HELP: &str = "\
cargo xtask <command>

  run [--cores N] [--accel kvm|tcg] [--memory MiB] [--kernel-args \"...\"] [--gdb] [--timeout S]
      [--image full|multi|rt|full-v2] [--share DIR[:/mountpoint]]... [--debian]
      [--net] [--forward HOSTPORT:GUESTPORT]... [--guest-forward GUESTPORT:127.0.0.1:HOSTPORT]...
      [-- <shell command>]
        build Reef (kernel and initramfs) and boot it in QEMU (4 cores) into its shell (--image:
        boot that kernel image of /boot instead of full, e.g. multi so core 0 can host); with a
        shell command after `--`, run just that command, print its output as it comes and exit
        with its status (killed after --timeout seconds, default 600); --gdb starts QEMU paused
        for gdb on :1234; REEF_QEMU=path runs another QEMU binary. Its kernel images (and those
        of /boot) are production ones: no in-guest tests, fault injection or benchmarks.
        --share DIR[:/mountpoint] (several allowed, up to 8) gives the guest the host directory
        DIR over virtio-9p (QEMU -fsdev local, security_model=none; mount tag shareN) and tells
        the kernel its mount point (default /host) with share=shareN:/mountpoint; a DIR that is
        missing or not a directory is refused before QEMU starts; cat /proc/reef/devices shows
        the devices Reef found; --debian makes the Debian tree (as `rootfs`) and shares it at
        /debian
        --net gives the guest a virtio-net card on QEMU's user network, closed to everything
        outside QEMU (-netdev user,id=net0,restrict=on -device virtio-net-device,netdev=net0;
        the guest is 10.0.2.15/24, gateway 10.0.2.2); --forward HOSTPORT:GUESTPORT (several
        allowed; implies --net) makes the host's 127.0.0.1:HOSTPORT reach the guest's TCP port
        (hostfwd=tcp:127.0.0.1:HOSTPORT-:GUESTPORT), e.g. --forward 8080:80; --guest-forward
        GUESTPORT:127.0.0.1:HOSTPORT (implies --net) makes the guest's connections to
        10.0.2.100:GUESTPORT reach a server on the host's loopback, which must listen before
        QEMU starts (guestfwd=tcp:10.0.2.100:GUESTPORT-tcp:127.0.0.1:HOSTPORT); no other
        target than 127.0.0.1 is taken
  rootfs
        make target/debian-root, a Debian tree of libc6, bash, coreutils, grep, sed, findutils and
        python3 with their dependencies (apt-get download and dpkg-deb -x: nothing installed, only
        the package registry reached; /etc/ld.so.cache by ldconfig -r), kept while
        apt names the same versions; prints its path
  test [--accel kvm|tcg] [--only NAME]
        the whole suite: check, host unit tests, loom models, the initramfs read back, QEMU
        integration runs (each boots the kernel with the initramfs as -initrd); every kernel image
        it boots (full and those of /boot) is built with the kernel's test-hooks and bench
        features, in target/kind-test
  check [layers | lists]
        rustfmt, clippy with the workspace lints as errors (the kernel also with its test-hooks
        and bench features), the dependency-direction rule, no kernel room naming a higher one
        (xtask/src/check/layers.rs), `unsafe` only where allowed, and that the production kernel's
        symbol table holds no test or benchmark code (kernel::selftest, kernel::msg::bench,
        kernel::msg::stress, kernel::msg::test_hooks, the fault-injection items): check builds
        that image as `cargo xtask build` does, and the suite runs check first, whose own images
        have that code, and that every module of test or bench code is declared behind its
        feature; `layers`: the source checks only (rooms, unsafe, feature gates); `lists`:
        print what their allow-lists would hold today
  bench ...
        every benchmark boots kernel images built with the kernel's bench feature (msg bench,
        msg stress), in target/kind-bench
  bench boot [--runs N] [--accel kvm|tcg]
        time from QEMU start to the shell prompt with 1 and 4 cores; writes results/boot.json and boot.png
  bench msg [--cores N] [--iterations N] [--runs N] [--accel kvm|tcg] [--vs-linux]
        channel measurements (cache line, IPI, one-line messages per notification mode on the
        benchmark's held endpoints and through msg::drain, large messages, multicast, ICC) in
        N guest runs (default 3) of N iterations (10 to 50000, default 2000), with each run's
        ratios and their median, like-for-like ratios apart from information-only ones;
        writes results/msg.json and results/msg_*.png; with --vs-linux a Linux guest boot
        after each run, a side-by-side table (like for like: polled ring against polled ring,
        both sides asleep against futex) and the ratios to Linux run by run
  bench proc [--runs N] [--accel kvm|tcg] [--vs-linux]
        the process benchmarks (user/procbench: getppid, fork+exec+wait, thread create+join,
        futex ping-pong, first touch of a page, spawn on another core) on Reef core 1 of 2,
        and boot to /sbin/init on every core of 4; with --vs-linux the same binary in the
        Linux guest after each run, and the ratios; writes results/proc.json and proc.png
  bench fs [--runs N] [--repeat K] [--accel kvm|tcg] [--vs-linux]
        the file benchmarks (user/fsbench: busybox dd bs=512 of 1-64 MiB to /tmp, busybox ls -l
        of 100-10000 files, pipe throughput in 64 KiB writes) on Reef core 0 (the file
        service's) and core 1 (calls forwarded to core 0) of 4, K samples each per run (default
        3), and boot to the shell banner; with --vs-linux the same binary in the Linux guest
        after each run, and the ratios inside each run; figures the kernel cannot run yet are
        reported as not measured, with why; writes results/fs-bench.json and fs-bench*.png
  bench host-files [--runs N] [--repeat K] [--accel kvm|tcg] [--no-linux]
        Debian's programs and files on the host share (issue 29; user/fsbench run, fork to
        reap, 1 cold then K warm samples, default 5): python3 -c pass, bash -c true and ls -l
        /usr/bin under chroot /debian, busybox dd bs=64k of a 64 MiB file of the share
        (target/debian-root/srv/reef-bench/big64, written once) on Reef core 0 (the file
        service's) and core 1 (forwarded to it) of 2, busybox find -type f and ls -lR of the
        tree; then the same binaries in the Linux guest with the same -fsdev share, mounted by
        Debian's 9P modules (msize 128 KiB), after each of N runs (default 3); prints cold and
        warm medians, the ratios inside each run and the goals; writes
        results/host-files.json, host-files.png and host-files-ratios.png
  bench syscall [--runs N] [--accel kvm|tcg] [--no-linux] [--quick]
        system calls (user/syscallbench): N blocking getppid, 100000 calls in batches of 1-64
        and 50 threads x 500 calls, by trap on the TC (core 0), by trap from an AC (core 1,
        forwarded to the TC) and through a syspage from the AC served by a KC (core 2), and
        batch-64 syspages from two ACs sharing one KC (4 cores), one boot each; then the same
        binary in the Linux guest (trap, io_uring NOP with and without SQPOLL); prints the
        goal ratios; writes results/syscall.json, syscall-blocking.png and syscall-batch.png
  bench ftq [--quanta N] [--quantum-us U] [--accel kvm|tcg] [--no-linux] [--only RUN[,RUN]]
        fixed time quantum (user/ftq, default 100000 quanta of 50 us) on Reef core 1 as a TC
        (on 1), as an AC (role 1 ac; execac 1), as an AC on the rt image, as a TC parked and
        unparked, as a TC restarted under it (runs reef-tc, reef-ac, reef-rt, reef-parked,
        reef-restarted), in the Linux guest pinned to CPU 1 without and with nohz_full=1
        isolcpus=1 (linux, linux-nohz), and on the host itself (host, the floor under the guests):
        loss fractions, the interrupts core 1 took (/proc/interrupts), a Welch spectrum and
        whether it peaks at the timer's rate; writes results/ftq.json and results/ftq-*.png
  bench cores [--runs N] [--core N] [--image PATH]... [--park HOST | --no-park] [--accel kvm|tcg]
        stopping and starting a core (user/corebench, Barrelfish/DC table 2) on Reef core 1 of 4:
        0 and 1 written to /sys/devices/system/cpu/cpu1/online, and the boot driver's stop and
        start (reef_core; image cached and not, with the driver's and the target's part), park
        and unpark on a core restarted with /boot/multi (default: the next core but 0), N runs
        each (default 20), idle then with every other core busy; with results/linux-cores.json
        (peer cores) also Reef / Linux for stop and start against the goals; writes
        results/cores.json, cores.png (and cores-vs-linux.png)
  bench pingpong [--rounds N] [--interval-us U] [--accel kvm|tcg]
        Barrelfish/DC figure 4's service: a ping-pong through two pipes (user/pingpong), its
        server on core 3, its client on core 1 timing one round trip every U us (default
        10000 every 250), while core 3 is restarted twice with /boot/full-v2 (its KCB keeps the
        server), parked on core 2 (/boot/multi) and unparked; the undisturbed round trips and
        the longest through each operation; writes results/pingpong.json and pingpong.png
  bench net [--accel kvm|tcg] [--quick] [--no-linux] [--round-trips-only]
        a web server (user/webd) through --forward, measured by the host's load generator
        (127.0.0.1 only, bounded in requests and time): requests/s of 1 KiB answers with 4
        keep-alive connections and with a connection per request, latency median [p5, p95],
        MB/s of a 64 MiB GET and POST; webd on Reef's network core (0) and on core 2, then the
        same binary in the Linux guest (taskset); the goal ratios, Reef's frames per interrupt
        (/proc/reef/net); --quick: fewer requests, 8 MiB; writes results/net.json, net.png and
        net-transfer.png. Then user/pingpong's round trips (1 and 64 bytes, cores 1 and 3) over
        TCP on 127.0.0.1, a unix socket pair and two pipes, median [p5, p95], Reef / Linux
        against at most 1.0 (2000 each, 200 with --quick); writes results/net-round-trip.json
        and net-round-trip.png; --round-trips-only: just those, without the network device
  peer cores [--runs N] [--core N] [--accel kvm|tcg]
        corebench in the Linux guest (4 CPUs, as root): CPU 1 offline and online by its online
        file, idle and loaded; writes results/linux-cores.json and linux-cores.png
  peer ftq [--quanta N] [--quantum-us U] [--accel kvm|tcg] [--only RUN[,RUN]]
        the Linux half of bench ftq alone; writes results/ftq-linux.json and its plots
  peer cpython [--accel kvm|tcg]
        CPython's regression tests of the suite's cpython run in the Linux guest (the Debian
        tree over 9P, about thirteen minutes under TCG); writes xtask/cpython/linux-guest-verdicts.txt,
        the reference the suite compares Reef with
  peer net [--accel kvm|tcg]
        the network test net-httpd-forward in the Linux guest (4 CPUs, virtio-net, 10.0.2.15/24):
        busybox httpd's 1 MiB file fetched by the host through --forward, 1 MiB of a host server
        fetched by the guest's wget through guestfwd, both by sha256, and the gateway closed by
        restrict=on; writes the serial log to target/test-net/peer-net.log
  peer proc [--accel kvm|tcg]
        procbench in the Linux guest alone, printed
  peer syscall [--accel kvm|tcg] [--quick]
        syscallbench in the Linux guest alone, printed
  peer msg [--cores N] [--runs-per-bench N] [--accel kvm|tcg] [--reuse]
        the messaging benchmarks on a Debian Linux guest in the same QEMU setup; writes
        results/linux-msg.json
  build build the kernel image and the initramfs (user programs, busybox, /etc) and print
        their paths, one a line: production images, as `run` boots
  help  this text
";

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let wants_help = matches!(arguments.first().map(String::as_str), Some("help" | "--help" | "-h") | None);
    if !wants_help {
        if let Err(message) = tools::ensure_toolchain() {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    }
    // The suite's own check of `run` (test/host_checks.rs) boots the images the suite built
    // rather than building production ones too.
    if std::env::var("REEF_XTASK_IMAGES").as_deref() == Ok("test") {
        kernel_images::select(kernel_images::ImageKind::Test);
    }
    let result = match arguments.first().map(String::as_str) {
        Some("run") => qemu::run_command(&arguments[1..]),
        // The suite drives the in-guest tests and the benchmarks: its images have both; a
        // benchmark's have the benchmarks only; every other command builds production images.
        Some("test") => {
            kernel_images::select(kernel_images::ImageKind::Test);
            test::run(&arguments[1..])
        }
        Some("check") => check::run(&arguments[1..]),
        Some("bench") => {
            kernel_images::select(kernel_images::ImageKind::Bench);
            bench::run(&arguments[1..])
        }
        Some("peer") => bench::run_peer(&arguments[1..]),
        Some("rootfs") => rootfs::run(&arguments[1..]),
        Some("build") => tools::build_kernel().and_then(|kernel| {
            let initramfs = tools::build_initramfs()?;
            println!("{}\n{}", kernel.display(), initramfs.display());
            Ok(0)
        }),
        Some("help") | Some("--help") | Some("-h") | None => {
            print!("{HELP}");
            Ok(0)
        }
        Some(other) => Err(format!("unknown command `{other}`: run `cargo xtask help` for the list")),
    };
    match result {
        Ok(status) => ExitCode::from(status),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
