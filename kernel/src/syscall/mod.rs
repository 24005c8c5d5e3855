//! The trap path of system calls: Linux x86-64 numbers and conventions (arguments in `rdi,
//! rsi, rdx, r10, r8, r9`, `-errno` in `rax`), plus Reef's own calls from 4096. Each call
//! decodes its arguments (user pointers checked and copied) before it acts; an unknown number
//! is `ENOSYS`, counted, and named once in the log with the program that made it.
#![deny(unsafe_code)]

mod events;
mod files;
mod machine;
mod memory;
mod process;
mod signal;
mod sockets;
pub mod syspage;
mod time;

use crate::arch::cpu;
use crate::arch::idt::InterruptFrame;
use crate::arch::user::{self, copy_from_user};
use crate::core::shared;
use crate::mm::plain::Plain;
use crate::proc::signal::InterruptedCall;
use crate::proc::Errno;
use crate::sched;
use abi::credentials::Family;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use linux_raw_sys::errno;
use linux_raw_sys::general as nr;

/// `AT_FDCWD` as the descriptor argument of a `*at` call.
const AT_FDCWD: i64 = nr::AT_FDCWD as i64;

/// Numbers counted one by one (Linux's go up to about 460).
pub const COUNTED_NUMBERS: usize = kcb::block::COUNTED_SYSCALLS;

/// A system call's outcome: a value, or an errno.
pub type SyscallResult = Result<u64, Errno>;

/// The six argument registers.
#[derive(Clone, Copy, Debug)]
pub struct Arguments(pub [u64; 6]);

impl Arguments {
    fn fd(&self, index: usize) -> i64 {
        self.0[index] as i32 as i64
    }
}

/// Serves a system call trapped on this instance (registered with the SYSCALL entry by
/// `boot`), with the thread's saved user frame.
pub fn dispatch(frame: &mut InterruptFrame) {
    // The entry masked interrupts; a system call may take long (exec) or block.
    cpu::enable_interrupts();
    if crate::core::ac::runs_thread() {
        // An application core: the thread's home (or a kernel core) serves the call.
        crate::core::ac::on_system_call(frame);
    } else {
        execute(frame);
        crate::proc::remote::serve(frame);
    }
    cpu::disable_interrupts();
}

/// The syspage service's executor: runs a call a kernel core handed back, in the running
/// thread's context; its value, or the negative errno (a call a signal cut short fails with
/// `EINTR`: a handed-back call is not restarted).
pub fn execute_for_syspage(number: u64, arguments: [u64; 6]) -> i64 {
    count(number);
    let mut frame = InterruptFrame::default();
    match handle(number, Arguments(arguments), &mut frame) {
        Ok(value) => value as i64,
        Err(error) if crate::proc::signal::is_restart(error) => -i64::from(errno::EINTR),
        Err(error) => -i64::from(error),
    }
}

/// Runs the system call whose saved frame this is, on the thread's home, and prepares its
/// return to ring 3 (messages, preemption, signals).
pub fn execute(frame: &mut InterruptFrame) {
    let number = frame.rax;
    let arguments = Arguments([frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8, frame.r9]);
    count(number);
    let started = sched::current().cpu.cycles();
    let result = handle(number, arguments, frame);
    // A call a signal cut short fails with EINTR unless the signal's delivery restarts it.
    let interrupted = match result {
        Err(rule) if crate::proc::signal::is_restart(rule) => Some(InterruptedCall { number, rule }),
        _ => None,
    };
    frame.rax = match result {
        Ok(value) => value,
        Err(_) if interrupted.is_some() => (-i64::from(errno::EINTR)) as u64,
        Err(error) => (-i64::from(error)) as u64,
    };
    crate::fs::client::flush_releases();
    crate::proc::thread::before_user_return(frame, interrupted);
    // The kernel's part of the thread's time (its runs only: a wait is no one's time).
    let me = sched::current();
    me.cpu.charge_system(me.cpu.cycles().saturating_sub(started));
}

fn count(number: u64) {
    let counters = &shared::this_kcb().syscalls;
    counters.total.fetch_add(1, Ordering::Relaxed);
    if let Some(slot) = counters.by_number.get(number as usize) {
        slot.fetch_add(1, Ordering::Relaxed);
    } else if abi::call::is_reef_call(number) {
        counters.reef.fetch_add(1, Ordering::Relaxed);
    }
}

/// Numbers already named in the log as unimplemented (private to the instance).
static NAMED_UNKNOWN: [AtomicU64; COUNTED_NUMBERS / 64] = [const { AtomicU64::new(0) }; COUNTED_NUMBERS / 64];

fn unimplemented(number: u64) -> SyscallResult {
    let counters = &shared::this_kcb().syscalls;
    counters.unimplemented.fetch_add(1, Ordering::Relaxed);
    if let Some(slot) = counters.unimplemented_by_number.get(number as usize) {
        slot.fetch_add(1, Ordering::Relaxed);
    }
    let first = match NAMED_UNKNOWN.get(number as usize / 64) {
        Some(word) => word.fetch_or(1 << (number % 64), Ordering::Relaxed) & (1 << (number % 64)) == 0,
        None => false,
    };
    if first {
        let (pid, name) = match crate::proc::current_process() {
            Some(process) => (process.pid, process.state.lock().name.clone()),
            None => (0, alloc::string::String::from("kernel")),
        };
        log::info!("system call {number} is not implemented: ENOSYS to {name} (pid {pid}); `syscalls` counts them");
    }
    Err(errno::ENOSYS)
}

fn handle(number: u64, a: Arguments, frame: &mut InterruptFrame) -> SyscallResult {
    let Ok(call) = u32::try_from(number) else { return unimplemented(number) };
    match call {
        nr::__NR_read => files::read(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_write => files::write(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_readv => files::readv(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_writev => files::writev(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_pread64 => files::pread(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_pwrite64 => files::pwrite(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_preadv => files::preadv(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_pwritev => files::pwritev(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_open => files::openat(AT_FDCWD, a.0[0], a.0[1], a.0[2]),
        nr::__NR_creat => files::openat(AT_FDCWD, a.0[0], 0o1101, a.0[1]),
        nr::__NR_openat => files::openat(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_close => files::close(a.fd(0)),
        nr::__NR_lseek => files::lseek(a.fd(0), a.0[1] as i64, a.0[2]),
        nr::__NR_fstat => files::fstat(a.fd(0), a.0[1]),
        nr::__NR_stat => files::fstatat(AT_FDCWD, a.0[0], a.0[1], 0),
        nr::__NR_lstat => files::fstatat(AT_FDCWD, a.0[0], a.0[1], u64::from(nr::AT_SYMLINK_NOFOLLOW)),
        nr::__NR_newfstatat => files::fstatat(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_statx => files::statx(a.fd(0), a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_getdents64 => files::getdents64(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_readlink => files::readlinkat(AT_FDCWD, a.0[0], a.0[1], a.0[2]),
        nr::__NR_readlinkat => files::readlinkat(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_access => files::faccessat(AT_FDCWD, a.0[0], a.0[1], 0),
        nr::__NR_faccessat => files::faccessat(a.fd(0), a.0[1], a.0[2], 0),
        nr::__NR_faccessat2 => files::faccessat(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_mkdir => files::mkdirat(AT_FDCWD, a.0[0], a.0[1]),
        nr::__NR_mkdirat => files::mkdirat(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_mknod => files::mknodat(AT_FDCWD, a.0[0], a.0[1], a.0[2]),
        nr::__NR_mknodat => files::mknodat(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_rmdir => files::unlinkat(AT_FDCWD, a.0[0], u64::from(nr::AT_REMOVEDIR)),
        nr::__NR_unlink => files::unlinkat(AT_FDCWD, a.0[0], 0),
        nr::__NR_unlinkat => files::unlinkat(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_rename => files::renameat2(AT_FDCWD, a.0[0], AT_FDCWD, a.0[1], 0),
        nr::__NR_renameat => files::renameat2(a.fd(0), a.0[1], a.fd(2), a.0[3], 0),
        nr::__NR_renameat2 => files::renameat2(a.fd(0), a.0[1], a.fd(2), a.0[3], a.0[4]),
        nr::__NR_link => files::linkat(AT_FDCWD, a.0[0], AT_FDCWD, a.0[1], 0),
        nr::__NR_linkat => files::linkat(a.fd(0), a.0[1], a.fd(2), a.0[3], a.0[4]),
        nr::__NR_symlink => files::symlinkat(a.0[0], AT_FDCWD, a.0[1]),
        nr::__NR_symlinkat => files::symlinkat(a.0[0], a.fd(1), a.0[2]),
        nr::__NR_truncate => files::truncate(a.0[0], a.0[1]),
        nr::__NR_ftruncate => files::ftruncate(a.fd(0), a.0[1]),
        nr::__NR_fsync | nr::__NR_fdatasync => files::fsync(a.fd(0)),
        nr::__NR_fallocate => files::fallocate(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_sync => Ok(0),
        nr::__NR_utimensat => files::utimensat(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_chmod => files::fchmodat(AT_FDCWD, a.0[0], a.0[1]),
        nr::__NR_fchmodat => files::fchmodat(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_fchmod => files::fchmod(a.fd(0), a.0[1]),
        nr::__NR_chown => files::fchownat(AT_FDCWD, a.0[0], a.0[1], a.0[2], 0),
        nr::__NR_lchown => files::fchownat(AT_FDCWD, a.0[0], a.0[1], a.0[2], u64::from(nr::AT_SYMLINK_NOFOLLOW)),
        nr::__NR_fchown => files::fchownat(a.fd(0), 0, a.0[1], a.0[2], u64::from(nr::AT_EMPTY_PATH)),
        nr::__NR_fchownat => files::fchownat(a.fd(0), a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_dup => files::dup(a.fd(0)),
        nr::__NR_dup2 => files::dup3(a.fd(0), a.fd(1), 0, true),
        nr::__NR_dup3 => files::dup3(a.fd(0), a.fd(1), a.0[2], false),
        nr::__NR_fcntl => files::fcntl(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_ioctl => files::ioctl(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_sendfile => files::sendfile(a.fd(0), a.fd(1), a.0[2], a.0[3]),
        nr::__NR_pipe => files::pipe2(a.0[0], 0),
        nr::__NR_pipe2 => files::pipe2(a.0[0], a.0[1]),
        nr::__NR_poll => files::poll(a.0[0], a.0[1], a.0[2] as i32 as i64),
        nr::__NR_ppoll => files::ppoll(a.0[0], a.0[1], a.0[2]),
        nr::__NR_close_range => files::close_range(a.0[0], a.0[1], a.0[2]),
        nr::__NR_socket => sockets::socket(a.0[0], a.0[1], a.0[2]),
        nr::__NR_socketpair => sockets::socketpair(a.0[0], a.0[1], a.0[2], a.0[3]),
        nr::__NR_bind => sockets::bind(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_listen => sockets::listen(a.fd(0), a.0[1]),
        nr::__NR_connect => sockets::connect(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_accept => sockets::accept(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_accept4 => sockets::accept4(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_shutdown => sockets::shutdown(a.fd(0), a.0[1]),
        nr::__NR_getsockname => sockets::getsockname(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_getpeername => sockets::getpeername(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_sendto => sockets::sendto(a.fd(0), a.0[1], a.0[2], a.0[3], a.0[4], a.0[5]),
        nr::__NR_recvfrom => sockets::recvfrom(a.fd(0), a.0[1], a.0[2], a.0[3], a.0[4], a.0[5]),
        nr::__NR_sendmsg => sockets::sendmsg(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_recvmsg => sockets::recvmsg(a.fd(0), a.0[1], a.0[2]),
        nr::__NR_getsockopt => sockets::getsockopt(a.fd(0), a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_setsockopt => sockets::setsockopt(a.fd(0), a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_epoll_create => events::epoll_create(a.0[0]),
        nr::__NR_epoll_create1 => events::epoll_create1(a.0[0]),
        nr::__NR_epoll_ctl => events::epoll_ctl(a.fd(0), a.0[1], a.fd(2), a.0[3]),
        nr::__NR_epoll_wait => events::epoll_wait(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_epoll_pwait => events::epoll_pwait(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_epoll_pwait2 => events::epoll_pwait2(a.fd(0), a.0[1], a.0[2], a.0[3]),
        nr::__NR_select => files::select_call(a.0[0], a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_pselect6 => files::pselect6(a.0[0], a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_getcwd => files::getcwd(a.0[0], a.0[1]),
        nr::__NR_chdir => files::chdir(a.0[0]),
        nr::__NR_fchdir => files::fchdir(a.fd(0)),
        nr::__NR_chroot => files::chroot(a.0[0]),
        nr::__NR_flock => files::flock(a.fd(0), a.0[1]),
        nr::__NR_umask => files::umask(a.0[0]),

        nr::__NR_brk => memory::brk(a.0[0]),
        nr::__NR_mmap => memory::mmap(a.0[0], a.0[1], a.0[2], a.0[3], a.fd(4), a.0[5]),
        nr::__NR_munmap => memory::munmap(a.0[0], a.0[1]),
        nr::__NR_mprotect => memory::mprotect(a.0[0], a.0[1], a.0[2]),
        nr::__NR_madvise => Ok(0),
        nr::__NR_mincore => memory::mincore(a.0[0], a.0[1], a.0[2]),
        nr::__NR_mremap => memory::mremap(a.0[0], a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_fadvise64 => files::fadvise(a.fd(0), a.0[3]),
        nr::__NR_statfs => files::statfs(a.0[0], a.0[1]),
        nr::__NR_fstatfs => files::fstatfs(a.fd(0), a.0[1]),
        nr::__NR_getxattr => files::xattr_at(a.0[0], true, files::XattrRead::Get),
        nr::__NR_lgetxattr => files::xattr_at(a.0[0], false, files::XattrRead::Get),
        nr::__NR_fgetxattr => files::xattr_of(a.fd(0), files::XattrRead::Get),
        nr::__NR_listxattr => files::xattr_at(a.0[0], true, files::XattrRead::List),
        nr::__NR_llistxattr => files::xattr_at(a.0[0], false, files::XattrRead::List),
        nr::__NR_flistxattr => files::xattr_of(a.fd(0), files::XattrRead::List),

        nr::__NR_getpid => process::getpid(),
        nr::__NR_getppid => process::getppid(),
        nr::__NR_gettid => Ok(u64::from(sched::current().tid)),
        nr::__NR_fork => process::fork(frame),
        nr::__NR_vfork => process::vfork(frame),
        nr::__NR_clone => process::clone(frame, a.0[0], a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_execve => process::execve(a.0[0], a.0[1], a.0[2], frame),
        nr::__NR_exit => crate::proc::exit_thread_with(a.0[0] as u32),
        nr::__NR_exit_group => crate::proc::exit_process(crate::proc::exited_status(a.0[0] as u32)),
        nr::__NR_wait4 => process::wait4(a.0[0] as i32 as i64, a.0[1], a.0[2], a.0[3]),
        nr::__NR_waitid => process::waitid(a.0[0], a.0[1], a.0[2], a.0[3], a.0[4]),
        nr::__NR_getrusage => process::getrusage(a.0[0], a.0[1]),
        nr::__NR_times => process::times(a.0[0]),
        // Restartable sequences need the kernel to note preemptions in a user page; Reef
        // does not, and says so as a kernel built without CONFIG_RSEQ does (glibc and
        // musl then use their fallbacks). Not counted as unknown.
        nr::__NR_rseq => Err(errno::ENOSYS),
        nr::__NR_kill => signal::kill(a.0[0], a.0[1]),
        nr::__NR_tkill => signal::tkill(a.0[0], a.0[1]),
        nr::__NR_tgkill => signal::tgkill(a.0[0], a.0[1], a.0[2]),
        nr::__NR_futex => process::futex(a.0[0], a.0[1], a.0[2], a.0[3], a.0[5]),
        nr::__NR_set_tid_address => process::set_tid_address(a.0[0]),
        nr::__NR_set_robust_list => Ok(0),
        nr::__NR_arch_prctl => process::arch_prctl(a.0[0], a.0[1]),
        nr::__NR_rt_sigaction => signal::rt_sigaction(a.0[0], a.0[1], a.0[2], a.0[3]),
        nr::__NR_rt_sigprocmask => signal::rt_sigprocmask(a.0[0], a.0[1], a.0[2], a.0[3]),
        nr::__NR_rt_sigpending => signal::rt_sigpending(a.0[0], a.0[1]),
        nr::__NR_rt_sigsuspend => signal::rt_sigsuspend(a.0[0], a.0[1]),
        nr::__NR_rt_sigreturn => signal::rt_sigreturn(frame),
        nr::__NR_pause => signal::pause(),
        nr::__NR_rt_sigtimedwait => signal::rt_sigtimedwait(a.0[0], a.0[1], a.0[2], a.0[3]),
        nr::__NR_sigaltstack => signal::sigaltstack(a.0[0], a.0[1], frame),
        nr::__NR_sched_yield => {
            sched::yield_now();
            Ok(0)
        }
        nr::__NR_sched_getaffinity => process::sched_getaffinity(a.0[0], a.0[1], a.0[2]),
        nr::__NR_sched_setaffinity => process::sched_setaffinity(a.0[0], a.0[1], a.0[2]),
        nr::__NR_prlimit64 => process::prlimit64(a.0[0], a.0[1], a.0[2], a.0[3]),
        nr::__NR_getrlimit => process::prlimit64(0, a.0[0], 0, a.0[1]),
        nr::__NR_uname => process::uname(a.0[0]),
        nr::__NR_getuid => process::get_id(Family::User, false),
        nr::__NR_geteuid => process::get_id(Family::User, true),
        nr::__NR_getgid => process::get_id(Family::Group, false),
        nr::__NR_getegid => process::get_id(Family::Group, true),
        nr::__NR_getresuid => process::get_real_effective_saved(Family::User, [a.0[0], a.0[1], a.0[2]]),
        nr::__NR_getresgid => process::get_real_effective_saved(Family::Group, [a.0[0], a.0[1], a.0[2]]),
        nr::__NR_getgroups => process::getgroups(a.0[0], a.0[1]),
        nr::__NR_setuid => process::set_id(Family::User, a.0[0]),
        nr::__NR_setgid => process::set_id(Family::Group, a.0[0]),
        nr::__NR_setreuid => process::set_real_effective(Family::User, a.0[0], a.0[1]),
        nr::__NR_setregid => process::set_real_effective(Family::Group, a.0[0], a.0[1]),
        nr::__NR_setresuid => process::set_real_effective_saved(Family::User, a.0[0], a.0[1], a.0[2]),
        nr::__NR_setresgid => process::set_real_effective_saved(Family::Group, a.0[0], a.0[1], a.0[2]),
        nr::__NR_setfsuid => process::set_filesystem_id(Family::User, a.0[0]),
        nr::__NR_setfsgid => process::set_filesystem_id(Family::Group, a.0[0]),
        nr::__NR_setgroups => process::setgroups(a.0[0], a.0[1]),
        nr::__NR_getpriority => process::getpriority(a.0[0], a.0[1]),
        nr::__NR_setpriority => process::setpriority(a.0[0], a.0[1], a.0[2]),
        nr::__NR_sched_setscheduler => process::sched_setscheduler(a.0[0], a.0[1], a.0[2]),
        nr::__NR_sched_setparam => process::sched_setparam(a.0[0], a.0[1]),
        nr::__NR_sched_get_priority_max => process::sched_priority_bound(a.0[0], true),
        nr::__NR_sched_get_priority_min => process::sched_priority_bound(a.0[0], false),
        nr::__NR_sched_getscheduler => process::sched_getscheduler(a.0[0]),
        nr::__NR_sched_getparam => process::sched_getparam(a.0[0], a.0[1]),
        nr::__NR_sched_rr_get_interval => process::sched_rr_get_interval(a.0[0], a.0[1]),
        nr::__NR_getpgrp => signal::getpgid(0),
        nr::__NR_getpgid => signal::getpgid(a.0[0]),
        nr::__NR_getsid => signal::getsid(a.0[0]),
        nr::__NR_setpgid => signal::setpgid(a.0[0], a.0[1]),
        nr::__NR_setsid => signal::setsid(),
        nr::__NR_prctl => process::prctl(a.0[0], a.0[1]),
        nr::__NR_getrandom => process::getrandom(a.0[0], a.0[1]),
        nr::__NR_getcpu => process::getcpu(a.0[0], a.0[1]),
        nr::__NR_sysinfo => process::sysinfo(a.0[0]),
        nr::__NR_reboot => machine::reboot(a.0[0], a.0[1], a.0[2], a.0[3]),
        // Nothing waits to be written back: the initramfs is read-only, the console unbuffered.
        nr::__NR_clock_gettime => time::clock_gettime(a.0[0], a.0[1]),
        nr::__NR_clock_getres => time::clock_getres(a.0[1]),
        nr::__NR_gettimeofday => time::gettimeofday(a.0[0]),
        nr::__NR_time => time::time(a.0[0]),
        nr::__NR_nanosleep => time::nanosleep(a.0[0], a.0[1]),
        nr::__NR_setitimer => time::setitimer(a.0[0], a.0[1], a.0[2]),
        nr::__NR_getitimer => time::getitimer(a.0[0], a.0[1]),
        nr::__NR_alarm => time::alarm(a.0[0]),
        nr::__NR_restart_syscall => time::restart_syscall(),
        nr::__NR_clock_nanosleep => time::clock_nanosleep(a.0[0], a.0[1], a.0[2], a.0[3]),

        _ if number == abi::call::CORE => Ok(crate::proc::remote::current_core() as u64),
        _ if number == abi::call::CORES => Ok(crate::msg::live_instances() as u64),
        _ if number == abi::call::SPAWN => process::reef_spawn(a.0[0], a.0[1], a.0[2], a.0[3], a.0[4]),
        _ if number == abi::call::CONTROL => machine::control(a.0[0], a.0[1], a.0[2], a.0[3]),
        _ if number == abi::call::ROLE => machine::role(a.0[0], a.0[1]),
        _ if number == abi::call::MOVE_PROCESS => {
            let pid = u32::try_from(a.0[0]).map_err(|_| errno::ESRCH)?;
            // A process may move itself; moving another is root's, as Linux asks
            // `CAP_SYS_NICE` to set another user's affinity.
            if pid != 0 && pid != crate::proc::current_pid() {
                machine::require_root("reef_move_process of another process")?;
            }
            crate::proc::migrate::move_process(pid, usize::try_from(a.0[1]).map_err(|_| errno::EINVAL)?)
        }
        _ if number == abi::call::CORE_OPERATION => machine::core_operation(a.0[0], a.0[1], a.0[2], a.0[3], a.0[4]),
        _ if number == abi::call::MOVE_TO_AC => crate::proc::remote::move_to_ac(a.0[0], a.0[1]),
        _ if number == abi::call::RETURN_FROM_AC => crate::proc::remote::return_from_ac(),
        _ if number == abi::call::SYSPAGE_REGISTER => syspage::register(a.0[0], a.0[1]),
        _ if number == abi::call::SYSPAGE_UNREGISTER => syspage::unregister(),
        _ if number == abi::call::SYSPAGE_KICK => syspage::kick(),
        _ => unimplemented(number),
    }
}

/// Reads a plain-data value from user memory.
pub fn read_user<T: Plain>(address: u64) -> Result<T, Errno> {
    crate::mm::plain::read_user(address).map_err(|_| errno::EFAULT)
}

/// Writes a plain-data value to user memory.
pub fn write_user<T: Plain>(address: u64, value: &T) -> Result<(), Errno> {
    crate::mm::plain::write_user(address, value).map_err(|_| errno::EFAULT)
}

/// Reads a NUL-terminated string of at most `max` bytes (without the NUL).
pub fn read_string(address: u64, max: usize) -> Result<Vec<u8>, Errno> {
    let mut result = Vec::new();
    let mut at = address;
    loop {
        // Up to the end of the page, so a string that ends before an unmapped page is fine.
        let chunk = (4096 - (at % 4096)) as usize;
        let mut buffer = [0u8; 256];
        let length = chunk.min(buffer.len());
        copy_from_user(&mut buffer[..length], at).map_err(|_| errno::EFAULT)?;
        if let Some(end) = buffer[..length].iter().position(|&b| b == 0) {
            result.extend_from_slice(&buffer[..end]);
            return Ok(result);
        }
        result.extend_from_slice(&buffer[..length]);
        if result.len() > max {
            return Err(errno::ENAMETOOLONG);
        }
        at += length as u64;
    }
}

/// Reads a NULL-terminated array of string pointers (argv, envp).
pub fn read_string_array(address: u64) -> Result<Vec<Vec<u8>>, Errno> {
    let mut strings = Vec::new();
    if address == 0 {
        return Ok(strings);
    }
    let mut total = 0;
    for index in 0.. {
        let pointer: u64 = read_user(address + index * 8)?;
        if pointer == 0 {
            break;
        }
        let string = read_string(pointer, 128 * 1024)?;
        total += string.len() + 1;
        if total > 256 * 1024 || index > 32_768 {
            return Err(errno::E2BIG);
        }
        strings.push(string);
    }
    Ok(strings)
}

/// Whether the address is canonical and in user space (for TLS bases and jump targets).
pub fn is_user_address(address: u64) -> bool {
    address < user::USER_END
}
