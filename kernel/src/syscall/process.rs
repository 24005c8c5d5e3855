//! Process and thread calls: ids, fork, clone, execve, wait4, futex, TLS, limits, and Reef's
//! spawn on another core.

use super::{read_string, read_string_array, read_user, write_user, SyscallResult};
use crate::arch::idt::InterruptFrame;
use crate::core::shared;
use crate::proc;
use crate::proc::ThreadExt;
use crate::sched::{self, WaitToken, Wakeup};
use abi::credentials::{Family, Ids};
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use linux_raw_sys::errno;
use linux_raw_sys::general as linux;

fn current() -> Result<alloc::sync::Arc<proc::Process>, u32> {
    crate::proc::current_process().ok_or(errno::EPERM)
}

pub fn getpid() -> SyscallResult {
    crate::proc::with_current_process(|p| u64::from(p.pid)).ok_or(errno::EPERM)
}

pub fn getppid() -> SyscallResult {
    crate::proc::with_current_process(|p| u64::from(p.parent.pid)).ok_or(errno::EPERM)
}

pub fn fork(frame: &InterruptFrame) -> SyscallResult {
    proc::fork(frame).map(u64::from)
}

pub fn vfork(frame: &InterruptFrame) -> SyscallResult {
    proc::vfork(frame).map(u64::from)
}

/// `clone(flags, stack, parent_tid, child_tid, tls)`: threads (`CLONE_VM | CLONE_THREAD`), a
/// vfork (`CLONE_VM | CLONE_VFORK`) or, with neither, a fork. Sharing an address space between
/// processes for longer than a vfork is not offered.
pub fn clone(
    frame: &InterruptFrame,
    flags: u64,
    stack: u64,
    parent_tid: u64,
    child_tid: u64,
    tls: u64,
) -> SyscallResult {
    let vm = flags & u64::from(linux::CLONE_VM) != 0;
    let thread = flags & u64::from(linux::CLONE_THREAD) != 0;
    match (vm, thread) {
        (true, true) => {
            let tls = (flags & u64::from(linux::CLONE_SETTLS) != 0).then_some(tls);
            if tls.is_some_and(|t| !super::is_user_address(t)) {
                return Err(errno::EPERM);
            }
            proc::clone_thread(frame, stack, tls, parent_tid, child_tid, flags).map(u64::from)
        }
        (false, false) => {
            let mut child_frame = *frame;
            if stack != 0 {
                child_frame.rsp = stack;
            }
            proc::fork(&child_frame).map(u64::from)
        }
        // posix_spawn, popen and system: a child in the caller's address space, the caller
        // waiting until it execs or ends.
        (true, false) if flags & u64::from(linux::CLONE_VFORK) != 0 => {
            let mut child_frame = *frame;
            if stack != 0 {
                child_frame.rsp = stack;
            }
            proc::vfork(&child_frame).map(u64::from)
        }
        // A process sharing memory with another for its whole life (CLONE_VM alone) needs
        // one address space for two processes, which Reef does not offer yet.
        _ => Err(errno::EINVAL),
    }
}

pub fn execve(path: u64, arguments: u64, environment: u64, frame: &mut InterruptFrame) -> SyscallResult {
    let path = read_string(path, 4096)?;
    let arguments = read_string_array(arguments)?;
    let environment = read_string_array(environment)?;
    let arguments: Vec<&[u8]> = arguments.iter().map(Vec::as_slice).collect();
    let environment: Vec<&[u8]> = environment.iter().map(Vec::as_slice).collect();
    proc::exec(&path, &arguments, &environment, frame)?;
    Ok(0)
}

/// `wait4(pid, status, options, rusage)`: `pid` > 0 that child, -1 any, 0 the caller's group,
/// < -1 the group `-pid`; `rusage`, when given, gets the child's CPU time.
pub fn wait4(which: i64, status: u64, options: u64, usage: u64) -> SyscallResult {
    let process = current()?;
    let (pid, group) = (process.pid, process.process_group());
    drop(process);
    let which = match which {
        -1 => proc::WaitFor::Any,
        0 => proc::WaitFor::Group(group),
        p if p < 0 => proc::WaitFor::Group(p.unsigned_abs() as u32),
        p => proc::WaitFor::Process(p as u32),
    };
    match proc::wait(pid, which, options)? {
        None => Ok(0),
        Some((child, wait_status, times)) => {
            if status != 0 {
                write_user(status, &wait_status)?;
            }
            if usage != 0 {
                write_user(usage, &rusage(times, 0))?;
            }
            Ok(u64::from(child))
        }
    }
}

/// `waitid(idtype, id, info, options, usage)`: as `wait4`, for `P_ALL`, `P_PID` and `P_PGID`,
/// with the child's state written as a `siginfo_t` (`SIGCHLD`, `CLD_EXITED`, `CLD_KILLED`,
/// `CLD_DUMPED`, `CLD_STOPPED` or `CLD_CONTINUED`); `WNOWAIT` leaves the child to a later
/// wait. With `WNOHANG` and nothing to report, the `siginfo_t` is zeroed, as Linux does.
pub fn waitid(idtype: u64, id: u64, info: u64, options: u64, usage: u64) -> SyscallResult {
    const P_ALL: u64 = 0;
    const P_PID: u64 = 1;
    const P_PGID: u64 = 2;
    const WSTOPPED: u64 = 2;
    const WEXITED: u64 = 4;
    const WCONTINUED: u64 = 8;
    const WNOWAIT: u64 = 0x0100_0000;
    const KNOWN: u64 = proc::WNOHANG | WSTOPPED | WEXITED | WCONTINUED | WNOWAIT | 0xe000_0000;
    if options & !KNOWN != 0 || options & (WSTOPPED | WEXITED | WCONTINUED) == 0 {
        return Err(errno::EINVAL);
    }
    let process = current()?;
    let (pid, group) = (process.pid, process.process_group());
    drop(process);
    let id = u32::try_from(id).map_err(|_| errno::EINVAL)?;
    let which = match idtype {
        P_ALL => proc::WaitFor::Any,
        P_PID if id > 0 => proc::WaitFor::Process(id),
        P_PGID if id == 0 => proc::WaitFor::Group(group),
        P_PGID => proc::WaitFor::Group(id),
        _ => return Err(errno::EINVAL),
    };
    let reap = match (options & WEXITED != 0, options & WNOWAIT != 0) {
        (false, _) => proc::Reap::NoExits,
        (true, true) => proc::Reap::Keep,
        (true, false) => proc::Reap::Yes,
    };
    let wait4_options = options & (proc::WNOHANG | WSTOPPED | WCONTINUED);
    let found = proc::wait_for(pid, which, wait4_options, reap)?;
    let mut siginfo = [0u32; 32];
    if let Some((child, status, times)) = found {
        let (code, value) = match status {
            proc::CONTINUED_STATUS => (6, linux::SIGCONT),
            s if s & 0xff == 0x7f => (5, (s >> 8) & 0xff),
            s if s & 0x7f == 0 => (1, (s >> 8) & 0xff),
            s if s & 0x80 != 0 => (3, s & 0x7f),
            s => (2, s & 0x7f),
        };
        siginfo[0] = linux::SIGCHLD;
        siginfo[2] = code;
        siginfo[4] = child;
        siginfo[6] = value;
        if usage != 0 {
            write_user(usage, &rusage(times, 0))?;
        }
    }
    if info != 0 {
        write_user(info, &siginfo)?;
    }
    Ok(0)
}

/// `sched_get_priority_max` and `_min` for `policy`: 0 for the timesharing policies (`SCHED_OTHER`,
/// `SCHED_BATCH`, `SCHED_IDLE`), 1 to 99 for the real-time ones, as Linux; Reef's scheduler
/// runs every thread as `SCHED_OTHER`.
pub fn sched_priority_bound(policy: u64, highest: bool) -> SyscallResult {
    match policy {
        0 | 3 | 5 => Ok(0),
        1 | 2 => Ok(if highest { 99 } else { 1 }),
        _ => Err(errno::EINVAL),
    }
}

/// `sched_getscheduler(pid)`: `SCHED_OTHER`, the only policy Reef runs, for a process that exists.
pub fn sched_getscheduler(pid: u64) -> SyscallResult {
    existing_process(pid)?;
    Ok(0)
}

/// `sched_getparam(pid, param)`: priority 0 (`SCHED_OTHER`'s).
pub fn sched_getparam(pid: u64, param: u64) -> SyscallResult {
    existing_process(pid)?;
    write_user(param, &0u32)?;
    Ok(0)
}

/// `sched_rr_get_interval(pid, interval)`: the time slice, one period of the core's timer.
pub fn sched_rr_get_interval(pid: u64, interval: u64) -> SyscallResult {
    existing_process(pid)?;
    let nanoseconds = crate::core::role::slice_ns();
    write_user(interval, &[nanoseconds / 1_000_000_000, nanoseconds % 1_000_000_000])?;
    Ok(0)
}

/// `PRIO_PROCESS`, `PRIO_PGRP`, `PRIO_USER`.
const PRIO_PROCESS: u64 = 0;
const PRIO_PGRP: u64 = 1;
const PRIO_USER: u64 = 2;

/// Whether `who` of `which` names the caller itself (for `PRIO_PROCESS`: 0 or its pid; for a
/// group or a user: 0), after checking that it names someone (`ESRCH`, `EINVAL`).
fn priority_target_is_caller(which: u64, who: u64) -> Result<bool, u32> {
    match which {
        PRIO_PROCESS => {
            existing_process(who)?;
            Ok(who == 0 || who == u64::from(proc::current_pid()))
        }
        // A group is found by its leader (one whose leader has exited is not).
        PRIO_PGRP if who == 0 || super::signal::getpgid(who) == Ok(who) => Ok(who == 0),
        PRIO_PGRP => Err(errno::ESRCH),
        // Every process is root's.
        PRIO_USER if who == 0 => Ok(true),
        PRIO_USER => Err(errno::ESRCH),
        _ => Err(errno::EINVAL),
    }
}

/// `getpriority(which, who)`: `20 - nice` as the system call returns it. A process keeps the
/// nice value it set itself (a fork's child inherits it); Reef's scheduler gives every thread
/// the same slices whatever it is, and another process reads as nice 0.
pub fn getpriority(which: u64, who: u64) -> SyscallResult {
    let nice = match priority_target_is_caller(which, who)? {
        true => proc::current_process().map_or(0, |process| process.options.lock().nice),
        false => 0,
    };
    Ok((20 - nice) as u64)
}

/// `setpriority(which, who, nice)`: the caller's own nice value (clamped to -20..19, as Linux);
/// another process's is `EPERM`, as for a user without `CAP_SYS_NICE` (Reef keeps no nice value
/// across kernels, and its scheduler does not use it).
pub fn setpriority(which: u64, who: u64, nice: u64) -> SyscallResult {
    if !priority_target_is_caller(which, who)? {
        return Err(errno::EPERM);
    }
    let process = proc::current_process().ok_or(errno::ESRCH)?;
    process.options.lock().nice = (nice as i32).clamp(-20, 19);
    Ok(0)
}

/// `sched_setscheduler(pid, policy, param)`: `SCHED_OTHER` at priority 0, the only policy Reef
/// runs, is accepted; another real one is `EPERM` (as without `CAP_SYS_NICE`), an unknown one
/// or a priority out of its range `EINVAL`.
pub fn sched_setscheduler(pid: u64, policy: u64, param: u64) -> SyscallResult {
    const SCHED_RESET_ON_FORK: u64 = 0x4000_0000;
    if (pid as i64) < 0 || param == 0 {
        return Err(errno::EINVAL);
    }
    let priority: i32 = read_user(param)?;
    existing_process(pid)?;
    let policy = policy & !SCHED_RESET_ON_FORK;
    let (lowest, highest) = (sched_priority_bound(policy, false)?, sched_priority_bound(policy, true)?);
    if priority < lowest as i32 || priority > highest as i32 {
        return Err(errno::EINVAL);
    }
    if policy == 0 {
        Ok(0)
    } else {
        Err(errno::EPERM)
    }
}

/// `sched_setparam(pid, param)`: priority 0, `SCHED_OTHER`'s only one; another is `EINVAL`.
pub fn sched_setparam(pid: u64, param: u64) -> SyscallResult {
    if (pid as i64) < 0 || param == 0 {
        return Err(errno::EINVAL);
    }
    let priority: i32 = read_user(param)?;
    existing_process(pid)?;
    if priority == 0 {
        Ok(0)
    } else {
        Err(errno::EINVAL)
    }
}

/// Whether `pid` (0: the caller) names a process of this instance or another.
fn existing_process(pid: u64) -> Result<(), u32> {
    match pid as i64 {
        0 => Ok(()),
        p if p < 0 || p > i64::from(i32::MAX) => Err(errno::EINVAL),
        _ => super::signal::getpgid(pid).map(|_| ()),
    }
}

/// Changes the calling process's ids by `change` (a rule of `abi::credentials`), and tells
/// `/proc` (`Uid:`, `Gid:`, its files' owner).
fn change_ids(change: impl FnOnce(&Ids) -> Result<Ids, u32>) -> SyscallResult {
    let process = current()?;
    {
        let mut credentials = process.credentials.lock();
        credentials.ids = change(&credentials.ids)?;
    }
    proc::report_to_proc(&process);
    Ok(0)
}

/// The id in a system call's argument: `uid_t` and `gid_t` are 32 bits.
fn id_argument(word: u64) -> u32 {
    word as u32
}

/// `getuid`, `geteuid`, `getgid`, `getegid`.
pub fn get_id(family: Family, effective: bool) -> SyscallResult {
    let process = current()?;
    let [real, effective_id, _, _] = process.credentials.lock().ids.status_line(family);
    Ok(u64::from(if effective { effective_id } else { real }))
}

/// `getresuid(real, effective, saved)` / `getresgid`: each id to its pointer (`EFAULT`).
pub fn get_real_effective_saved(family: Family, pointers: [u64; 3]) -> SyscallResult {
    let process = current()?;
    let [real, effective, saved, _] = process.credentials.lock().ids.status_line(family);
    for (pointer, id) in pointers.into_iter().zip([real, effective, saved]) {
        write_user(pointer, &id)?;
    }
    Ok(0)
}

/// `setuid(id)` / `setgid(id)`: Linux's rules (`abi::credentials::Ids::set_id`).
pub fn set_id(family: Family, id: u64) -> SyscallResult {
    change_ids(|ids| ids.set_id(family, id_argument(id)))
}

/// `setreuid(real, effective)` / `setregid`.
pub fn set_real_effective(family: Family, real: u64, effective: u64) -> SyscallResult {
    change_ids(|ids| ids.set_real_effective(family, id_argument(real), id_argument(effective)))
}

/// `setresuid(real, effective, saved)` / `setresgid`.
pub fn set_real_effective_saved(family: Family, real: u64, effective: u64, saved: u64) -> SyscallResult {
    change_ids(|ids| {
        ids.set_real_effective_saved(family, id_argument(real), id_argument(effective), id_argument(saved))
    })
}

/// `setfsuid(id)` / `setfsgid`: returns the old file-system id, whether it changed or not.
pub fn set_filesystem_id(family: Family, id: u64) -> SyscallResult {
    let process = current()?;
    let old = {
        let mut credentials = process.credentials.lock();
        let (after, old) = credentials.ids.set_filesystem_id(family, id_argument(id));
        credentials.ids = after;
        old
    };
    proc::report_to_proc(&process);
    Ok(u64::from(old))
}

/// `getgroups(size, list)`: with `size` 0 the count; else the groups, `EINVAL` if they do not
/// fit (or `size` is negative as an `int`).
pub fn getgroups(size: u64, list: u64) -> SyscallResult {
    let size = size as i32;
    if size < 0 {
        return Err(errno::EINVAL);
    }
    let groups = current()?.credentials.lock().groups.clone();
    if size == 0 {
        return Ok(groups.len() as u64);
    }
    if (size as usize) < groups.len() {
        return Err(errno::EINVAL);
    }
    let bytes: Vec<u8> = groups.iter().flat_map(|group| group.to_le_bytes()).collect();
    crate::arch::user::copy_to_user(list, &bytes).map_err(|_| errno::EFAULT)?;
    Ok(groups.len() as u64)
}

/// `setgroups(size, list)`: root's (`EPERM`, asked first, as Linux); more than `NGROUPS_MAX`
/// is `EINVAL`; the list is kept sorted, as Linux keeps it.
pub fn setgroups(size: u64, list: u64) -> SyscallResult {
    let process = current()?;
    if !process.credentials.lock().ids.may_set_groups() {
        return Err(errno::EPERM);
    }
    let size = size as i32;
    if size < 0 || size as usize > abi::credentials::MAX_GROUPS {
        return Err(errno::EINVAL);
    }
    let mut bytes = alloc::vec![0u8; size as usize * 4];
    if !bytes.is_empty() {
        crate::arch::user::copy_from_user(&mut bytes, list).map_err(|_| errno::EFAULT)?;
    }
    let mut groups: Vec<u32> =
        bytes.chunks_exact(4).map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]])).collect();
    groups.sort_unstable();
    process.credentials.lock().groups = groups;
    proc::report_to_proc(&process);
    Ok(0)
}

/// Linux's `struct rusage` for CPU time `times`: the two times, the resident size in KiB, and
/// zeros for what Reef does not count (faults, context switches, blocks).
fn rusage(times: abi::process::CpuTimes, max_resident_kib: u64) -> [u64; 18] {
    let mut usage = [0u64; 18];
    usage[0] = times.user_us / 1_000_000;
    usage[1] = times.user_us % 1_000_000;
    usage[2] = times.system_us / 1_000_000;
    usage[3] = times.system_us % 1_000_000;
    usage[4] = max_resident_kib;
    usage
}

/// `getrusage(who, usage)`: `RUSAGE_SELF` (the process's threads, ended ones too),
/// `RUSAGE_CHILDREN` (the children it reaped, with theirs), `RUSAGE_THREAD` (the caller).
pub fn getrusage(who: u64, usage: u64) -> SyscallResult {
    const RUSAGE_SELF: i32 = 0;
    const RUSAGE_CHILDREN: i32 = -1;
    const RUSAGE_THREAD: i32 = 1;
    let process = current()?;
    let (own, children) = process.cpu_times(&sched::threads_of(process.pid));
    // The resident size: the frames its address space holds now (Reef keeps no peak).
    let resident_kib = process.with_memory(|memory| memory.frames()) * 4;
    let value = match who as i32 {
        RUSAGE_SELF => rusage(own, resident_kib),
        RUSAGE_CHILDREN => rusage(children, 0),
        RUSAGE_THREAD => rusage(sched::current().cpu.times(), resident_kib),
        _ => return Err(errno::EINVAL),
    };
    write_user(usage, &value)?;
    Ok(0)
}

/// `times(buffer)`: the process's and its reaped children's CPU time in clock ticks
/// (`USER_HZ`, 100 a second); returns the ticks since boot.
pub fn times(buffer: u64) -> SyscallResult {
    const MICROSECONDS_PER_TICK: u64 = 10_000;
    let process = current()?;
    let (own, children) = process.cpu_times(&sched::threads_of(process.pid));
    if buffer != 0 {
        let ticks = [own.user_us, own.system_us, children.user_us, children.system_us]
            .map(|microseconds| microseconds / MICROSECONDS_PER_TICK);
        write_user(buffer, &ticks)?;
    }
    Ok(crate::time::now_ns() / 1000 / MICROSECONDS_PER_TICK)
}

const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_COMMAND_MASK: u64 = 0x7f;
const FUTEX_CLOCK_REALTIME: u64 = 256;

/// `futex(address, op, value, timeout, _, bitset)`: WAIT and WAKE (and their bitset forms,
/// the bitset taken as "all"). Every thread of a process runs on its home core and the
/// kernel is not preempted, so the compare and the sleep are atomic with respect to them.
pub fn futex(address: u64, operation: u64, value: u64, timeout: u64, _bitset: u64) -> SyscallResult {
    let process = current()?;
    let key = WaitToken::Futex(process.pid, address);
    drop(process);
    if !address.is_multiple_of(4) {
        return Err(errno::EINVAL);
    }
    match operation & FUTEX_COMMAND_MASK {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let current_value: u32 = read_user(address)?;
            if current_value != value as u32 {
                return Err(errno::EAGAIN);
            }
            let deadline = if timeout == 0 {
                None
            } else {
                let spec: linux::timespec = read_user(timeout)?;
                if spec.tv_sec < 0 || !(0..1_000_000_000).contains(&spec.tv_nsec) {
                    return Err(errno::EINVAL);
                }
                let ns = (spec.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(spec.tv_nsec as u64);
                // WAIT is relative; WAIT_BITSET is absolute (monotonic, or realtime with the flag).
                let absolute = operation & FUTEX_COMMAND_MASK == FUTEX_WAIT_BITSET;
                let relative = if absolute {
                    let base = if operation & FUTEX_CLOCK_REALTIME != 0 {
                        crate::time::now_ns() + 1_767_225_600_000_000_000
                    } else {
                        crate::time::now_ns()
                    };
                    ns.saturating_sub(base)
                } else {
                    ns
                };
                Some(crate::arch::cpu::read_tsc() + crate::time::ns_to_cycles(relative))
            };
            match sched::block(key, deadline) {
                Wakeup::Woken => Ok(0),
                Wakeup::TimedOut => Err(errno::ETIMEDOUT),
                // Linux restarts an interrupted wait without a timeout after an SA_RESTART
                // handler; one with a timeout fails (it would restart with the full time).
                Wakeup::Killed | Wakeup::Interrupted if deadline.is_none() => Err(proc::signal::interrupted_errno()),
                Wakeup::Killed | Wakeup::Interrupted => Err(errno::EINTR),
                // Runs again on the core the process moves to, with its whole timeout.
                Wakeup::Moving => Err(proc::signal::interrupted_errno()),
            }
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => Ok(sched::wake(key, value as u32 as usize) as u64),
        _ => Err(errno::ENOSYS),
    }
}

pub fn set_tid_address(address: u64) -> SyscallResult {
    let me = sched::current();
    me.part().clear_child_tid.store(address, Ordering::Relaxed);
    Ok(u64::from(me.tid))
}

/// `ARCH_GET_FS` [Linux arch/x86/include/uapi/asm/prctl.h].
const ARCH_GET_FS: u32 = 0x1003;

pub fn arch_prctl(code: u64, address: u64) -> SyscallResult {
    match code as u32 {
        linux::ARCH_SET_FS => {
            if !super::is_user_address(address) {
                return Err(errno::EPERM);
            }
            sched::current().fs_base.store(address, Ordering::Relaxed);
            crate::arch::user::set_fs_base(address);
            Ok(0)
        }
        ARCH_GET_FS => {
            write_user(address, &sched::current().fs_base.load(Ordering::Relaxed))?;
            Ok(0)
        }
        _ => Err(errno::EINVAL),
    }
}

/// `prctl` options Reef knows [Linux include/uapi/linux/prctl.h].
const PR_SET_PDEATHSIG: u64 = 1;
const PR_GET_PDEATHSIG: u64 = 2;
const PR_GET_DUMPABLE: u64 = 3;
const PR_SET_DUMPABLE: u64 = 4;
const PR_GET_KEEPCAPS: u64 = 7;
const PR_SET_KEEPCAPS: u64 = 8;
const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;
const PR_SET_TIMERSLACK: u64 = 29;
const PR_GET_TIMERSLACK: u64 = 30;
const PR_TASK_PERF_EVENTS_DISABLE: u64 = 31;
const PR_TASK_PERF_EVENTS_ENABLE: u64 = 32;
const PR_SET_NO_NEW_PRIVS: u64 = 38;
const PR_GET_NO_NEW_PRIVS: u64 = 39;
const PR_SET_THP_DISABLE: u64 = 41;
const PR_GET_THP_DISABLE: u64 = 42;
/// `TASK_COMM_LEN`: a name with its NUL.
const COMM_LENGTH: usize = 16;

/// `prctl(option, argument)`: the parent-death signal (`PR_SET_PDEATHSIG`, `PR_GET_PDEATHSIG`,
/// which stores an `int` at `argument`). Other options: `EINVAL`, as Linux answers one it
/// does not know.
pub fn prctl(option: u64, argument: u64) -> SyscallResult {
    let process = current()?;
    match option {
        PR_SET_PDEATHSIG => {
            let signal = u32::try_from(argument).ok().filter(|&s| s <= abi::signal::MAX_SIGNAL).ok_or(errno::EINVAL)?;
            process.set_death_signal(signal);
            Ok(0)
        }
        PR_GET_PDEATHSIG => {
            write_user(argument, &(process.death_signal() as i32))?;
            Ok(0)
        }
        PR_SET_NAME => {
            // The name of the calling thread in Linux; Reef keeps one name per process.
            let mut name = super::read_string(argument, 4096)?;
            name.truncate(COMM_LENGTH - 1);
            let name = String::from_utf8_lossy(&name).into_owned();
            process.state.lock().name = name;
            proc::report_to_proc(&process);
            Ok(0)
        }
        PR_GET_NAME => {
            let mut name = [0u8; COMM_LENGTH];
            let own = process.state.lock().name.clone();
            let length = own.len().min(COMM_LENGTH - 1);
            name[..length].copy_from_slice(&own.as_bytes()[..length]);
            write_user(argument, &name)?;
            Ok(0)
        }
        // Options Reef keeps and reports, whose effect is already Reef's behaviour: no core
        // dumps, no set-user-id programs (so no privileges to keep or gain), no transparent
        // huge pages, timers that do not coalesce.
        PR_SET_DUMPABLE | PR_SET_KEEPCAPS | PR_SET_THP_DISABLE if argument > 1 => Err(errno::EINVAL),
        PR_SET_DUMPABLE => {
            process.options.lock().dumpable = argument == 1;
            Ok(0)
        }
        PR_SET_KEEPCAPS => {
            process.options.lock().keep_capabilities = argument == 1;
            Ok(0)
        }
        PR_SET_THP_DISABLE => {
            process.options.lock().no_huge_pages = argument == 1;
            Ok(0)
        }
        // One way: it cannot be cleared.
        PR_SET_NO_NEW_PRIVS if argument != 1 => Err(errno::EINVAL),
        PR_SET_NO_NEW_PRIVS => {
            process.options.lock().no_new_privileges = true;
            Ok(0)
        }
        PR_SET_TIMERSLACK => {
            process.options.lock().timer_slack_ns = if argument == 0 { proc::DEFAULT_TIMER_SLACK_NS } else { argument };
            Ok(0)
        }
        PR_GET_DUMPABLE => Ok(u64::from(process.options.lock().dumpable)),
        PR_GET_KEEPCAPS => Ok(u64::from(process.options.lock().keep_capabilities)),
        PR_GET_THP_DISABLE => Ok(u64::from(process.options.lock().no_huge_pages)),
        PR_GET_NO_NEW_PRIVS => Ok(u64::from(process.options.lock().no_new_privileges)),
        PR_GET_TIMERSLACK => Ok(process.options.lock().timer_slack_ns),
        PR_TASK_PERF_EVENTS_DISABLE | PR_TASK_PERF_EVENTS_ENABLE => Ok(0),
        _ => Err(errno::EINVAL),
    }
}

/// Bytes of a CPU mask as Linux's affinity calls see it: `nr_cpu_ids` bits rounded up to
/// longs (Reef has at most 64 cores: one long).
const AFFINITY_MASK_BYTES: u64 = 8;

/// The process `pid` names for the affinity calls (0: the caller's; a thread id names its
/// process, whose threads all run on its home) and the core it lives on. A pid that names no
/// process anywhere is `ESRCH`.
fn affinity_target(pid: u64) -> Result<(u32, usize), u32> {
    let caller = current()?;
    let pid = u32::try_from(pid).ok().filter(|&p| p as i32 >= 0).ok_or(errno::ESRCH)?;
    let own = pid == 0 || pid == caller.pid || caller.state.lock().threads.contains(&pid);
    if own {
        return Ok((caller.pid, shared::this_core() as usize));
    }
    // Signal 0 asks every instance whether the process exists, checking nothing else.
    proc::signal::kill(pid as i32, 0)?;
    Ok((pid, proc::home_of(pid)))
}

/// `sched_getaffinity(pid, size, mask)`: a process runs on its home core, so its mask names
/// that core alone; returns the mask's size, as Linux does.
pub fn sched_getaffinity(pid: u64, size: u64, mask: u64) -> SyscallResult {
    if size < AFFINITY_MASK_BYTES || !size.is_multiple_of(8) {
        return Err(errno::EINVAL);
    }
    let (_, core) = affinity_target(pid)?;
    write_user(mask, &(1u64 << (core % 64)))?;
    Ok(AFFINITY_MASK_BYTES)
}

/// `sched_setaffinity(pid, size, mask)` (so `taskset`): a mask that holds the process's home
/// core leaves it there; one that does not moves the process, every thread with it, to the
/// first timesharing core of the mask that takes it (`reef_move_process`), as Linux migrates
/// a thread whose mask no longer holds its CPU. A mask naming no core is `EINVAL`.
pub fn sched_setaffinity(pid: u64, size: u64, mask: u64) -> SyscallResult {
    let length = size.min(AFFINITY_MASK_BYTES) as usize;
    let mut bytes = [0u8; AFFINITY_MASK_BYTES as usize];
    crate::arch::user::copy_from_user(&mut bytes[..length], mask).map_err(|_| errno::EFAULT)?;
    let cores = (shared::facts().core_count as usize).min(64);
    let wanted = u64::from_le_bytes(bytes) & if cores == 64 { u64::MAX } else { (1u64 << cores) - 1 };
    if wanted == 0 {
        return Err(errno::EINVAL);
    }
    let (pid, home) = affinity_target(pid)?;
    if wanted & (1 << home) != 0 {
        return Ok(0);
    }
    let caller = current()?.pid;
    // Moving another process is root's (Linux: `CAP_SYS_NICE` for another user's).
    if pid != caller {
        super::machine::require_root("sched_setaffinity of another process")?;
    }
    let mut refused = errno::EINVAL;
    for core in (0..cores).filter(|core| wanted & (1 << core) != 0) {
        match proc::migrate::move_process(if pid == caller { 0 } else { pid }, core) {
            Ok(_) => return Ok(0),
            // Not a running timesharing core: the next one may be.
            Err(error) => refused = error,
        }
    }
    Err(refused)
}

pub fn prlimit64(pid: u64, resource: u64, new_limit: u64, old_limit: u64) -> SyscallResult {
    if pid != 0 && pid != u64::from(current()?.pid) {
        return Err(errno::ESRCH);
    }
    let _ = new_limit;
    const INFINITY: u64 = u64::MAX;
    let (soft, hard) = match resource as u32 {
        linux::RLIMIT_STACK => (crate::mm::user::STACK_SIZE, INFINITY),
        linux::RLIMIT_NOFILE => (crate::fs::MAX_FILES as u64, crate::fs::MAX_FILES as u64),
        linux::RLIMIT_NPROC => (u64::from(proc::PID_RANGE), u64::from(proc::PID_RANGE)),
        r if r < 16 => (INFINITY, INFINITY),
        _ => return Err(errno::EINVAL),
    };
    if old_limit != 0 {
        write_user(old_limit, &linux::rlimit64 { rlim_cur: soft, rlim_max: hard })?;
    }
    Ok(0)
}

fn field<const N: usize>(text: &str) -> [core::ffi::c_char; N] {
    let mut out = [0 as core::ffi::c_char; N];
    for (slot, byte) in out.iter_mut().zip(text.bytes().take(N - 1)) {
        *slot = byte as core::ffi::c_char;
    }
    out
}

pub fn uname(out: u64) -> SyscallResult {
    let build = crate::mm::image::build_id();
    let version = alloc::format!(
        "#1 Reef {} build {}",
        crate::mm::image::image_name(),
        core::str::from_utf8(&build[..12]).unwrap_or("?")
    );
    let name = linux_raw_sys::system::new_utsname {
        sysname: field("Reef"),
        nodename: field("reef"),
        release: field(env!("CARGO_PKG_VERSION")),
        version: field(&version),
        machine: field("x86_64"),
        domainname: field("(none)"),
    };
    write_user(out, &name)?;
    Ok(0)
}

pub fn getrandom(buffer: u64, length: u64) -> SyscallResult {
    let length = length.min(1 << 20) as usize;
    let mut chunk = [0u8; 256];
    let mut done = 0;
    while done < length {
        let n = (length - done).min(chunk.len());
        crate::random::fill(&mut chunk[..n]);
        crate::arch::user::copy_to_user(buffer + done as u64, &chunk[..n]).map_err(|_| errno::EFAULT)?;
        done += n;
    }
    Ok(length as u64)
}

pub fn getcpu(cpu: u64, node: u64) -> SyscallResult {
    if cpu != 0 {
        write_user(cpu, &shared::this_core())?;
    }
    if node != 0 {
        write_user(node, &0u32)?;
    }
    Ok(0)
}

pub fn sysinfo(out: u64) -> SyscallResult {
    let (free, total) = crate::mm::frames::counts();
    // `struct sysinfo` as words: it has gaps (after `pad`, and at its end), so it is written
    // as the 14 words it spans, the gaps zero.
    use linux_raw_sys::system::sysinfo;
    const _: () = assert!(core::mem::size_of::<sysinfo>() == 14 * 8);
    const _: () = assert!(core::mem::offset_of!(sysinfo, totalram) == 4 * 8);
    const _: () = assert!(core::mem::offset_of!(sysinfo, freeram) == 5 * 8);
    const _: () = assert!(core::mem::offset_of!(sysinfo, procs) == 10 * 8);
    const _: () = assert!(core::mem::offset_of!(sysinfo, mem_unit) == 13 * 8);
    let mut info = [0u64; 14];
    info[0] = crate::time::now_ns() / 1_000_000_000; // uptime
    info[4] = total * 4096; // totalram
    info[5] = free * 4096; // freeram
    info[10] = u64::from(proc::all().len() as u16); // procs (a u16 at the word's start)
    info[13] = 1; // mem_unit (a u32 at the word's start)
    write_user(out, &info)?;
    Ok(0)
}

/// `reef_spawn(core, path, argv, envp)`.
pub fn reef_spawn(core: u64, path: u64, arguments: u64, environment: u64, death_signal: u64) -> SyscallResult {
    let process = current()?;
    let path = read_string(path, 4096)?;
    let arguments = read_string_array(arguments)?;
    let environment = read_string_array(environment)?;
    let arguments: Vec<&[u8]> = arguments.iter().map(Vec::as_slice).collect();
    let environment: Vec<&[u8]> = environment.iter().map(Vec::as_slice).collect();
    let core = usize::try_from(core).map_err(|_| errno::EINVAL)?;
    let death_signal = u32::try_from(death_signal).map_err(|_| errno::EINVAL)?;
    proc::spawn(core, &path, &arguments, &environment, process.pid, death_signal).map(u64::from)
}
