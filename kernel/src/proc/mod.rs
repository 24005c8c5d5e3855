//! Processes of one kernel instance: pids from the instance's own range, creation from a
//! program file, fork, threads, exit and the wait status that reaches the parent (by message
//! when the parent is homed on another instance), and spawning on another core. Signals are
//! in `signal`, process groups and sessions in `group`.
#![deny(unsafe_code)]

pub mod credentials;
pub mod elf;
pub mod group;
pub mod keep;
pub mod migrate;
pub mod remote;
pub mod signal;
pub mod thread;
pub mod timer;

pub use thread::{current_process, with_current_process, ThreadExt, ThreadPart};

use crate::arch::idt::InterruptFrame;
use crate::arch::user::{self, FpuState};
use crate::core::shared;
use crate::fs::FileTable;
use crate::mm::user::AddressSpace;
use crate::sched::{self, Thread, WaitToken, Wakeup};
use abi::message::Kind;
use abi::process::{ChildExited, CpuTimes, SpawnOrigin, SpawnReply, SpawnRequest};
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;

/// Pids (and tids) per instance: instance `c` hands out `c * PID_RANGE + 1 ..`, so a pid names
/// its home and no counter is shared between cores.
pub const PID_RANGE: u32 = 100_000;

/// The OSnode whose range `pid` is from (the kernel that handed it out).
pub fn range_of(pid: u32) -> usize {
    (pid / PID_RANGE) as usize
}

/// The home instance of `pid`: the OSnode of its range, unless the process moved to another
/// core since (its range's KCB says where, see `migrate`).
pub fn home_of(pid: u32) -> usize {
    let range = range_of(pid);
    migrate::moved_to(range, pid).unwrap_or(range)
}

impl Parent {
    /// Where the parent lives now: a process wherever it moved, a kernel on its core.
    pub fn home(self) -> usize {
        if self.pid == 0 {
            self.core as usize
        } else {
            home_of(self.pid)
        }
    }

    /// Whether `self` and `other` name the same parent (a process by its pid alone, wherever
    /// it lives; a kernel by its core).
    pub fn is(self, other: Parent) -> bool {
        self.pid == other.pid && (self.pid != 0 || self.core == other.core)
    }
}

/// What a new process starts with besides its program: descriptors, working directory, and
/// the signal it gets when its parent ends (`reef_spawn`'s request; 0: none).
pub struct Inherited {
    pub files: FileTable,
    pub working_directory: Option<Arc<crate::fs::Handle>>,
    /// The root directory (`chroot`; `None`: the file system's root).
    pub root_directory: Option<Arc<crate::fs::Handle>>,
    pub death_signal: u32,
    /// Its user and group ids: its parent's, root's for a kernel's child.
    pub credentials: credentials::Credentials,
}

impl Inherited {
    /// A kernel's child: the console on fds 0–2, the root as working directory, root's ids.
    pub fn console() -> Self {
        Self {
            files: FileTable::with_console(),
            working_directory: None,
            root_directory: None,
            death_signal: 0,
            credentials: credentials::Credentials::root(),
        }
    }

    /// What `process` hands on: its descriptors not marked `FD_CLOEXEC`, its directory.
    fn of(process: &Process) -> Self {
        let state = process.state.lock();
        let mut files = FileTable::empty();
        for (fd, handle) in state.files.inherited() {
            let _ = files.install_at(fd, handle.clone(), false);
        }
        Self {
            files,
            working_directory: state.cwd.clone(),
            root_directory: state.root_directory.clone(),
            death_signal: 0,
            credentials: process.credentials.lock().clone(),
        }
    }
}

/// Who reaps a process: a process, or (pid 0) the kernel of `core` (init's parent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parent {
    pub core: u32,
    pub pid: u32,
}

/// A child as its parent sees it.
#[derive(Clone, Copy, Debug)]
pub struct Child {
    pub pid: u32,
    /// Its process group as last known here: at its creation, after a `setpgid` made on this
    /// instance, and at its exit (a child homed elsewhere that changes its group is seen in
    /// the new one only when it exits).
    pub process_group: u32,
    /// Set when it exited: the `wait4` status word.
    pub wait_status: Option<u32>,
    /// Set when it exited: its CPU time and that of the children it reaped.
    pub times: CpuTimes,
    /// A stop or continue not yet reported by a `wait4` that asked (its wait status).
    pub change: Option<u32>,
}

/// What changes while a process runs.
pub struct ProcessState {
    pub memory: AddressSpace,
    pub files: FileTable,
    pub children: Vec<Child>,
    /// Its live threads.
    pub threads: Vec<u32>,
    /// Program name (last part of the path), for reports.
    pub name: String,
    /// The path it was loaded from (`/proc/self/exe`).
    pub path: String,
    /// The working directory (`None`: the root).
    pub cwd: Option<Arc<crate::fs::Handle>>,
    /// Where absolute paths start (`chroot`; `None`: the file system's root).
    pub root_directory: Option<Arc<crate::fs::Handle>>,
    /// Permission bits taken away from new files (`umask`).
    pub umask: u32,
    /// Its arguments, each NUL-ended (`/proc/<pid>/cmdline`).
    pub command_line: Vec<u8>,
}

/// One process homed on this instance.
pub struct Process {
    pub pid: u32,
    pub parent: Parent,
    killed: AtomicBool,
    /// The status the process ends with, once decided (exit_group, a fatal fault, a kill).
    exit_status: AtomicU32,
    root: AtomicU64,
    pub state: Mutex<ProcessState>,
    /// Console output after its last newline, not yet written (see `fs::console`).
    pub console_pending: Mutex<Vec<u8>>,
    /// Dispositions and signals sent to the process.
    pub signals: signal::ProcessSignals,
    /// Its process group and session: pids, possibly of processes homed elsewhere.
    process_group: AtomicU32,
    session: AtomicU32,
    /// Whether it called `execve` (its parent may no longer move it to another group).
    exec_done: AtomicBool,
    /// Whether it was asked to move to another core, and where (see `migrate`).
    moving: AtomicU32,
    /// The core it goes back to once a new kernel runs there, with that core's incarnation
    /// when it left (see `migrate`), or `migrate::NO_RETURN`.
    returns_to: AtomicU64,
    /// Exits of its children that came after its image for a move was made: they follow it
    /// to its destination, or are recorded here if it stays (see `migrate`).
    late_exits: Mutex<Vec<ChildExited>>,
    /// The signal it gets when its parent ends (`prctl(PR_SET_PDEATHSIG)`, `reef_spawn`), or 0.
    death_signal: AtomicU32,
    /// A `vfork` it takes part in (see [`Loan`]).
    loan: Mutex<Loan>,
    /// CPU time of its threads that ended, and of the children it reaped (`getrusage`).
    cpu: Mutex<ProcessCpu>,
    /// What `prctl` set.
    pub options: Mutex<Options>,
    /// The signal that stopped it, 0 while it runs.
    stopped: AtomicU32,
    /// Its real-time interval timer (see `timer`).
    real_timer: Mutex<timer::RealTimer>,
    /// Its user and group ids and supplementary groups (see `credentials`).
    pub credentials: Mutex<credentials::Credentials>,
}

/// Linux's default timer slack, 50 µs (`PR_GET_TIMERSLACK`).
pub const DEFAULT_TIMER_SLACK_NS: u64 = 50_000;

/// The `prctl` options Reef keeps and reports; their effect is already Reef's behaviour (no
/// core dumps, no set-user-id programs, no transparent huge pages, no timer coalescing). A
/// fork copies them; `execve` clears `keep_capabilities`, as Linux does; a move to another core
/// puts them back to their defaults.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub dumpable: bool,
    pub keep_capabilities: bool,
    pub no_new_privileges: bool,
    pub no_huge_pages: bool,
    pub timer_slack_ns: u64,
    /// Its nice value (`setpriority`), -20 to 19: kept and reported, not used by the scheduler.
    pub nice: i32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            dumpable: true,
            keep_capabilities: false,
            no_new_privileges: false,
            no_huge_pages: false,
            timer_slack_ns: DEFAULT_TIMER_SLACK_NS,
            nice: 0,
        }
    }
}

/// A process's CPU time besides its live threads' own.
#[derive(Clone, Copy, Default)]
pub struct ProcessCpu {
    /// Of its threads that ended.
    pub ended_threads: CpuTimes,
    /// Of the children it reaped, each with those it reaped (Linux's `RUSAGE_CHILDREN`).
    pub reaped_children: CpuTimes,
}

/// A `vfork` (Linux's `vfork`, or `clone(CLONE_VM | CLONE_VFORK)` as `posix_spawn`, `popen`
/// and `system` use it) between a parent and its child: the child runs in the parent's
/// address space, so what it writes there (glibc's `posix_spawn` writes its exec error) the
/// parent sees; the parent's calling thread waits until the child lets go by `execve` or by
/// its end. Its other threads run on. Neither moves to another core meanwhile.
#[derive(Clone, Default)]
pub enum Loan {
    #[default]
    None,
    /// Its address space runs child `pid`, which has not let go yet.
    LentTo(u32),
    /// It runs in this process's (its parent's) address space.
    BorrowedFrom(Arc<Process>),
}

const NO_STATUS: u32 = u32::MAX;

impl Process {
    /// Whether the process is being torn down; its threads end at their next return to ring 3.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// The root page table its threads run on.
    pub fn page_table_root(&self) -> u64 {
        self.root.load(Ordering::Relaxed)
    }

    /// The signal it gets when its parent ends, or 0.
    pub fn death_signal(&self) -> u32 {
        self.death_signal.load(Ordering::Relaxed)
    }

    /// `prctl(PR_SET_PDEATHSIG, signal)`: 0 clears it.
    pub fn set_death_signal(&self, signal: u32) {
        self.death_signal.store(signal, Ordering::Relaxed);
    }

    /// Its process group.
    pub fn process_group(&self) -> u32 {
        self.process_group.load(Ordering::Relaxed)
    }

    /// Its session.
    pub fn session(&self) -> u32 {
        self.session.load(Ordering::Relaxed)
    }

    /// Runs `work` on the address space the process runs in: its own, or its parent's
    /// during a `vfork` (page faults, `mmap`, `brk` of a vforked child change the parent's).
    pub fn with_memory<R>(&self, work: impl FnOnce(&mut AddressSpace) -> R) -> R {
        let lender = match &*self.loan.lock() {
            Loan::BorrowedFrom(lender) => Some(lender.clone()),
            _ => None,
        };
        match lender {
            Some(lender) => work(&mut lender.state.lock().memory),
            None => work(&mut self.state.lock().memory),
        }
    }

    /// Its CPU time: its threads' here, live (`live`, from `sched::threads_of`) and ended, and
    /// its reaped children's.
    pub fn cpu_times(&self, live: &[Arc<Thread>]) -> (CpuTimes, CpuTimes) {
        let cpu = *self.cpu.lock();
        let own = live.iter().fold(cpu.ended_threads, |sum, thread| sum.plus(thread.cpu.times()));
        (own, cpu.reaped_children)
    }

    /// Whether a stop signal stopped it (until a SIGCONT).
    pub fn is_stopped(&self) -> bool {
        self.stop_signal().is_some()
    }

    /// The signal that stopped it, if it is stopped.
    pub fn stop_signal(&self) -> Option<u32> {
        Some(self.stopped.load(Ordering::Relaxed)).filter(|&signal| signal != 0 && signal != CONTINUED_UNREPORTED)
    }

    /// Whether it runs in its parent's address space (a vforked child before its `execve`).
    pub fn borrows_memory(&self) -> bool {
        matches!(*self.loan.lock(), Loan::BorrowedFrom(_))
    }

    /// Whether it takes part in a `vfork` (as the parent or the child) that is not over.
    pub fn is_in_a_vfork(&self) -> bool {
        !matches!(*self.loan.lock(), Loan::None)
    }

    /// Decides the process's end (the first decision wins) and wakes its blocked threads.
    fn doom(&self, wait_status: u32) {
        let _ = self.exit_status.compare_exchange(NO_STATUS, wait_status, Ordering::Relaxed, Ordering::Relaxed);
        self.killed.store(true, Ordering::Relaxed);
        sched::wake_process(self.pid);
    }
}

struct PidAllocator {
    next: u32,
    used: BTreeSet<u32>,
}

static PIDS: Mutex<PidAllocator> = Mutex::new(PidAllocator { next: 0, used: BTreeSet::new() });
static PROCESSES: Mutex<BTreeMap<u32, Arc<Process>>> = Mutex::new(BTreeMap::new());
/// Children of this instance's kernel: init, which the kernel of core 0 starts.
static KERNEL_CHILDREN: Mutex<Vec<Child>> = Mutex::new(Vec::new());
/// A spawn request sent to another instance, waiting for its reply.
struct PendingSpawn {
    parent_pid: u32,
    /// The group the child joins (0: its own).
    process_group: u32,
    /// The reply: a pid, or a negative errno.
    result: Option<i64>,
}

/// A program a process spawned from another instance loads itself before its first
/// instruction (`create`): its path, arguments and environment, as the request gave them.
struct PendingExec {
    path: Vec<u8>,
    arguments: Vec<Vec<u8>>,
    environment: Vec<Vec<u8>>,
}

/// The pending programs of processes of this instance not yet started, by pid.
static PENDING_EXECS: Mutex<BTreeMap<u32, PendingExec>> = Mutex::new(BTreeMap::new());

/// The scheduler's thread-start hook's part: a process spawned from another instance whose
/// program is not in the initramfs loads it now, as `execve` does; if it cannot, it tells its
/// standard error why and exits with 127 (not found) or 126 (not runnable), as a shell does.
pub fn run_pending_exec(frame: &mut InterruptFrame) {
    let Some(process) = current_process() else { return };
    let Some(pending) = PENDING_EXECS.lock().remove(&process.pid) else { return };
    crate::arch::cpu::enable_interrupts();
    let arguments: Vec<&[u8]> = pending.arguments.iter().map(Vec::as_slice).collect();
    let environment: Vec<&[u8]> = pending.environment.iter().map(Vec::as_slice).collect();
    if let Err(error) = exec(&pending.path, &arguments, &environment, frame) {
        let why = match error {
            errno::ENOENT => "no such file",
            errno::EACCES => "permission denied: not an executable file",
            errno::ENOEXEC => "not a program Reef runs (exec format error)",
            errno::ENOMEM => "out of memory on this core",
            _ => "cannot run it",
        };
        let message = alloc::format!(
            "{}: {why} (execve on core {}: errno {error})\n",
            String::from_utf8_lossy(&pending.path),
            shared::this_core()
        );
        let standard_error = process.state.lock().files.get(2).ok();
        if let Some(handle) = standard_error {
            let mut words = [0u64; abi::file::REQUEST_WORDS];
            words[..2].copy_from_slice(&[handle.id, abi::file::NONE]);
            let _ = crate::fs::client::call(abi::file::FileOp::Write, words, message.as_bytes(), &[]);
        }
        drop(process);
        exit_process(exited_status(if error == errno::ENOENT { 127 } else { 126 }));
    }
    crate::arch::cpu::disable_interrupts();
}

/// Spawn requests sent to other instances, waiting for their reply, by request id.
static PENDING_SPAWNS: Mutex<BTreeMap<u64, PendingSpawn>> = Mutex::new(BTreeMap::new());
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

/// Records this instance's free frames as the leak check's baseline (at instance entry).
pub fn record_baseline() {
    let kcb = shared::this_kcb();
    kcb.processes.baseline_free_frames.store(crate::mm::frames::counts().0, Ordering::Relaxed);
    publish_counts();
}

/// Publishes this instance's process and resource counts in its KCB, where `ps` and the
/// leak check of any core read them: after every change of a process or thread.
pub fn publish_counts() {
    let counters = &shared::this_kcb().processes;
    let processes = all();
    let frames: u64 = processes.iter().map(|p| p.state.lock().memory.frames()).sum();
    let threads: usize = processes.iter().map(|p| p.state.lock().threads.len()).sum();
    let (stacks, cached) = crate::arch::stacks::thread_stack_usage();
    let free = crate::mm::frames::counts().0;
    let baseline = counters.baseline_free_frames.load(Ordering::Relaxed);
    counters.live.store(processes.len() as u32, Ordering::Relaxed);
    counters.threads.store(threads as u32, Ordering::Relaxed);
    counters.pids.store(pids_in_use() as u32, Ordering::Relaxed);
    counters.stacks.store(stacks.saturating_sub(sched::exiting_stacks()), Ordering::Relaxed);
    counters.frames.store(frames, Ordering::Relaxed);
    // The file page cache's frames are the processes' too (each maps them), counted once.
    let file_pages = crate::fs::mapped::counts().0 as u64;
    counters.frames_unaccounted.store(baseline.saturating_sub(free + frames + cached + file_pages), Ordering::Relaxed);
}

fn allocate_pid() -> Option<u32> {
    let base = shared::this_core() * PID_RANGE;
    let mut pids = PIDS.lock();
    for _ in 0..PID_RANGE - 1 {
        pids.next = if pids.next == 0 || pids.next >= PID_RANGE - 1 { 1 } else { pids.next + 1 };
        let pid = base + pids.next;
        // A pid of this range that lives on another core now is still taken.
        if migrate::moved_to(shared::this_core() as usize, pid).is_some() {
            continue;
        }
        if pids.used.insert(pid) {
            return Some(pid);
        }
    }
    None
}

fn release_pid(pid: u32) {
    PIDS.lock().used.remove(&pid);
}

/// Pids (and tids) in use on this instance.
pub fn pids_in_use() -> usize {
    PIDS.lock().used.len()
}

/// The process `pid` if it is homed here and alive.
pub fn find(pid: u32) -> Option<Arc<Process>> {
    PROCESSES.lock().get(&pid).cloned()
}

/// Every live process of this instance.
pub fn all() -> Vec<Arc<Process>> {
    PROCESSES.lock().values().cloned().collect()
}

/// The running thread's process id, 0 for a kernel thread (registered with the file service,
/// whose requests carry it: `fs::client::register_current_pid`).
pub fn current_pid() -> u32 {
    crate::proc::current_process().map_or(0, |process| process.pid)
}

/// The running process's pid and descriptors (descriptor, file service handle), if they
/// changed since last asked (registered with the file service, which reports them to
/// `/proc/<pid>/fd`: `fs::proc::register_descriptors`).
pub fn descriptor_changes() -> Option<(u32, Vec<(u32, u64)>)> {
    let process = crate::proc::current_process()?;
    // Never waits: a safe point may come while the process's state is held.
    let table = process.state.try_lock().and_then(|mut state| state.files.take_changes())?;
    Some((process.pid, table))
}

/// A Linux errno (declared in `abi`, so that the layers below processes, the file service
/// among them, name the same type).
pub use abi::Errno;

/// Reads a program (see `fs::find_program`: `working_directory` for a relative path, `may_ask`
/// the file service) and loads it into a fresh address space.
/// A program ready to run: its memory, the path it came from, and what `/proc` says of it.
struct Program {
    loaded: elf::Loaded,
    /// The mode and owner of the file it runs (the interpreter, for a script: Linux ignores
    /// a script's set-id bits), for its set-id bits.
    file: crate::fs::ProgramFile,
    /// The file the process runs (`/proc/<pid>/exe`): the interpreter, for a script.
    resolved: String,
    /// Its name (`comm`): the last part of `argv[0]`, or of the script's path.
    name: String,
    /// Its arguments (`/proc/<pid>/cmdline`), each NUL-ended: the interpreter's, for a script.
    command_line: Vec<u8>,
}

/// Loads the program at `path` with `arguments`; a `#!` script runs its interpreter with the
/// script's path among the arguments, as Linux's `binfmt_script` does.
fn load_program(
    path: &[u8],
    arguments: &[&[u8]],
    environment: &[&[u8]],
    (working_directory, root_directory): (u64, u64),
    may_ask: bool,
    as_user: bool,
) -> Result<Program, Errno> {
    let mut path = path.to_vec();
    let mut arguments: Vec<Vec<u8>> = arguments.iter().map(|a| a.to_vec()).collect();
    let mut script_name = None;
    for _ in 0..=abi::script::NESTING_LIMIT {
        let text = core::str::from_utf8(&path).map_err(|_| errno::ENOENT)?;
        let directories = (working_directory, root_directory);
        let (image, resolved, file) = crate::fs::find_program(text, directories, may_ask, as_user)?;
        let Some(interpreter) = abi::script::interpreter(&image) else {
            let argument_slices: Vec<&[u8]> = arguments.iter().map(Vec::as_slice).collect();
            // A dynamically linked program: its interpreter (ld.so) is read through the file
            // service by its path; a missing one is ENOENT, one that is not an ELF ENOEXEC.
            let interpreter_image = match elf::interpreter_of(&image) {
                None => None,
                Some(Err(_)) => return Err(errno::ENOEXEC),
                Some(Ok(interpreter_path)) => {
                    Some(crate::fs::find_program(interpreter_path, directories, may_ask, as_user)?.0)
                }
            };
            let program = (&image[..], image.version());
            let interpreter = interpreter_image.as_ref().map(|image| (&image[..], image.version()));
            let loaded =
                elf::load(program, interpreter, text, &argument_slices, environment).map_err(|error| match error {
                    elf::LoadError::NotExecutable(why) => {
                        // A text file without `#!` is not a program: its caller's shell runs it
                        // (ENOEXEC), so debug.
                        log::debug!("{text}: not a program Reef runs: {why}");
                        errno::ENOEXEC
                    }
                    elf::LoadError::OutOfMemory => errno::ENOMEM,
                    elf::LoadError::TooBig => errno::E2BIG,
                })?;
            let name = script_name.unwrap_or_else(|| {
                argument_slices
                    .first()
                    .and_then(|a| core::str::from_utf8(a).ok())
                    .map_or_else(|| name_of(&resolved), name_of)
            });
            let command_line = crate::fs::proc::command_line(&argument_slices);
            return Ok(Program { loaded, file, resolved, name, command_line });
        };
        let interpreter = interpreter.map_err(|_| errno::ENOEXEC)?;
        // The interpreter, its argument, the script as execve named it, then the script's
        // own arguments after its argv[0].
        let mut rewritten = alloc::vec![interpreter.path.to_vec()];
        rewritten.extend(interpreter.argument.map(<[u8]>::to_vec));
        rewritten.push(path.clone());
        rewritten.extend(arguments.drain(..).skip(1));
        script_name.get_or_insert_with(|| name_of(text));
        path = interpreter.path.to_vec();
        arguments = rewritten;
    }
    Err(errno::ELOOP)
}

fn name_of(path: &str) -> String {
    String::from(path.rsplit('/').next().unwrap_or(path))
}

/// Where a new process belongs: the group and session of the process that asked for it, or
/// (`None`) a new session and group it leads (children of a kernel).
type Membership = Option<(u32, u32)>;

/// Builds a process from the program at `path` on this instance and queues its thread.
fn create(
    path: &[u8],
    arguments: &[&[u8]],
    environment: &[&[u8]],
    parent: Parent,
    membership: Membership,
    inherited: Inherited,
) -> Result<u32, Errno> {
    let id = |handle: &Option<Arc<crate::fs::Handle>>| handle.as_ref().map_or(abi::file::NONE, |handle| handle.id);
    let directories = (id(&inherited.working_directory), id(&inherited.root_directory));
    // A request from another instance is built inside its message handler, which must not
    // wait for the file service: a program not in the initramfs (or any, in a changed root)
    // is loaded by the new process itself, first thing, where it may wait ([`PendingExec`]).
    let may_ask = parent.core == shared::this_core();
    let as_user = !inherited.credentials.ids.is_file_privileged();
    let (program, pending) = match load_program(path, arguments, environment, directories, may_ask, as_user) {
        Ok(program) => (program, None),
        Err(errno::ENOENT) if !may_ask => {
            let memory = AddressSpace::new().map_err(|_| errno::ENOMEM)?;
            let text = String::from_utf8_lossy(path).into_owned();
            let program = Program {
                loaded: elf::Loaded { memory, entry: 0, stack_pointer: 0 },
                // Not run yet: its own `execve` applies the file's set-id bits.
                file: crate::fs::ProgramFile::default(),
                name: name_of(&text),
                command_line: crate::fs::proc::command_line(arguments),
                resolved: text,
            };
            let owned = |strings: &[&[u8]]| strings.iter().map(|s| s.to_vec()).collect();
            (
                program,
                Some(PendingExec { path: path.to_vec(), arguments: owned(arguments), environment: owned(environment) }),
            )
        }
        Err(error) => return Err(error),
    };
    let Program { loaded, file, resolved, name, command_line } = program;
    let pid = allocate_pid().ok_or(errno::EAGAIN)?;
    if let Some(pending) = pending {
        PENDING_EXECS.lock().insert(pid, pending);
    }
    let (process_group, session) = membership.unwrap_or((pid, pid));
    let death_signal = inherited.death_signal;
    let mut credentials = inherited.credentials;
    credentials.ids = credentials.ids.after_exec(file.mode, file.uid, file.gid, true);
    let process = Arc::new(Process {
        pid,
        parent,
        killed: AtomicBool::new(false),
        exit_status: AtomicU32::new(NO_STATUS),
        root: AtomicU64::new(loaded.memory.root()),
        state: Mutex::new(ProcessState {
            memory: loaded.memory,
            files: inherited.files,
            children: Vec::new(),
            threads: alloc::vec![pid],
            name,
            path: resolved,
            cwd: inherited.working_directory,
            root_directory: inherited.root_directory,
            umask: 0o022,
            command_line,
        }),
        console_pending: Mutex::new(Vec::new()),
        signals: signal::ProcessSignals::new(),
        process_group: AtomicU32::new(process_group),
        session: AtomicU32::new(session),
        exec_done: AtomicBool::new(false),
        moving: AtomicU32::new(migrate::NOT_MOVING),
        returns_to: AtomicU64::new(migrate::NO_RETURN),
        late_exits: Mutex::new(Vec::new()),
        death_signal: AtomicU32::new(death_signal),
        loan: Mutex::new(Loan::None),
        cpu: Mutex::new(ProcessCpu::default()),
        options: Mutex::new(Options::default()),
        stopped: AtomicU32::new(0),
        real_timer: Mutex::new(timer::RealTimer::default()),
        credentials: Mutex::new(credentials),
    });
    let frame = user::initial_frame(loaded.entry, loaded.stack_pointer);
    let signals = signal::ThreadSignals::new(0);
    let thread = match thread::new_thread(pid, process.clone(), &frame, FpuState::initial(), 0, signals) {
        Ok(thread) => thread,
        Err(_) => {
            release_pid(pid);
            return Err(errno::EAGAIN);
        }
    };
    report_to_proc(&process);
    PROCESSES.lock().insert(pid, process);
    shared::this_kcb().processes.created.fetch_add(1, Ordering::Relaxed);
    publish_counts();
    sched::make_ready(thread);
    Ok(pid)
}

/// Tells `/proc` (the file service) what `process` runs now.
/// Tells `/proc` (the file service) the process's name, arguments and program.
pub fn report_to_proc(process: &Process) {
    let (name, command_line, program) = {
        let state = process.state.lock();
        (state.name.clone(), state.command_line.clone(), state.path.clone())
    };
    let parent = if process.parent.pid == 0 { 0 } else { process.parent.pid };
    let credentials = process.credentials.lock().clone();
    let membership = crate::fs::proc::Membership {
        process_group: process.process_group(),
        session: process.session(),
        stopped: process.is_stopped(),
        credentials: credentials.ids,
        groups: credentials.groups,
    };
    crate::fs::proc::report_with(process.pid, parent, true, &name, &command_line, &program, membership);
}

/// Replaces the calling process's program (`execve`); on success the caller's user frame
/// is `frame`, to be returned into.
pub fn exec(path: &[u8], arguments: &[&[u8]], environment: &[&[u8]], frame: &mut InterruptFrame) -> Result<(), Errno> {
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    if process.state.lock().threads.len() > 1 {
        // Linux kills the other threads first; Reef asks programs to exec from one thread.
        return Err(errno::EBUSY);
    }
    let (directories, own_path) = {
        let state = process.state.lock();
        let id = |handle: &Option<Arc<crate::fs::Handle>>| handle.as_ref().map_or(abi::file::NONE, |handle| handle.id);
        ((id(&state.cwd), id(&state.root_directory)), state.path.clone())
    };
    // `/proc/self/exe` is the program the process runs (busybox runs its scripts that way).
    let path = if path == b"/proc/self/exe" { own_path.as_bytes() } else { path };
    let as_user = !process.credentials.lock().ids.is_file_privileged();
    let Program { loaded, file, resolved, name, command_line } =
        load_program(path, arguments, environment, directories, true, as_user)?;
    // The old address space goes: so does the syspage in it.
    crate::syscall::syspage::forget_range(process.pid, 0, crate::arch::user::USER_END);
    let old_memory = {
        let mut state = process.state.lock();
        state.name = name;
        state.path = resolved;
        state.command_line = command_line;
        state.files.close_on_exec();
        process.signals.reset_for_exec();
        let honour_set_id_bits = {
            let mut options = process.options.lock();
            options.keep_capabilities = false;
            !options.no_new_privileges
        };
        // The file's set-user-id and set-group-id bits, then the saved ids (execve(2)).
        let mut credentials = process.credentials.lock();
        credentials.ids = credentials.ids.after_exec(file.mode, file.uid, file.gid, honour_set_id_bits);
        drop(credentials);
        process.exec_done.store(true, Ordering::Relaxed);
        process.root.store(loaded.memory.root(), Ordering::Relaxed);
        let old_memory = core::mem::replace(&mut state.memory, loaded.memory);
        state.memory.activate();
        old_memory
    };
    drop(old_memory);
    // A vforked child no longer needs its parent's address space.
    end_loan(&process);
    report_to_proc(&process);
    *frame = user::initial_frame(loaded.entry, loaded.stack_pointer);
    let me = sched::current();
    me.fs_base.store(0, Ordering::Relaxed);
    me.part().clear_child_tid.store(0, Ordering::Relaxed);
    // The alternate stack was memory of the old program.
    *me.part().signals.alternate_stack.lock() = crate::arch::signal::AlternateStack {
        flags: crate::arch::signal::AlternateStack::DISABLE,
        ..Default::default()
    };
    user::set_fs_base(0);
    FpuState::initial().restore();
    Ok(())
}

/// `fork`: a copy of the calling process on the same instance; returns the child's pid.
pub fn fork(frame: &InterruptFrame) -> Result<u32, Errno> {
    new_child(frame, false)
}

/// `vfork`: a child that runs in the calling process's address space (see [`Loan`]); returns
/// the child's pid once the child let go of it.
pub fn vfork(frame: &InterruptFrame) -> Result<u32, Errno> {
    let pid = new_child(frame, true)?;
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    // The child runs on this instance only (neither moves): its wake-up cannot come before
    // this wait, as the kernel is not preempted. Only the process's end cuts it short.
    while matches!(*process.loan.lock(), Loan::LentTo(_)) {
        if sched::block_uninterruptible(WaitToken::MemoryBack(process.pid), None) == Wakeup::Killed {
            break;
        }
    }
    Ok(pid)
}

/// The child's end of a `vfork`, at its `execve` or its end: the parent has its address
/// space to itself again and its waiting thread goes on.
fn end_loan(child: &Process) {
    let lender = match core::mem::take(&mut *child.loan.lock()) {
        Loan::BorrowedFrom(lender) => lender,
        _ => return,
    };
    *lender.loan.lock() = Loan::None;
    sched::wake(WaitToken::MemoryBack(lender.pid), usize::MAX);
}

/// A parent ending while its vforked child still runs in its address space: the address space
/// passes to the child (the two swap theirs, and the parent's end frees the child's unused
/// one), as on Linux, where the child holds a reference to it.
fn hand_memory_to_borrower(parent: &Process, state: &mut ProcessState) {
    let Loan::LentTo(child_pid) = core::mem::take(&mut *parent.loan.lock()) else { return };
    let Some(child) = find(child_pid) else { return };
    let mut loan = child.loan.lock();
    if !matches!(&*loan, Loan::BorrowedFrom(lender) if lender.pid == parent.pid) {
        return;
    }
    *loan = Loan::None;
    core::mem::swap(&mut state.memory, &mut child.state.lock().memory);
}

/// A child of the calling process: a copy of its memory, or (`vfork`) its memory lent.
fn new_child(frame: &InterruptFrame, vfork: bool) -> Result<u32, Errno> {
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let me = sched::current();
    // A vforked child that vforks again (POSIX leaves it undefined; busybox's `timeout` forks
    // there) gets a copy: a loan is from a parent that owns its address space.
    let vfork = vfork && !process.borrows_memory();
    let pid = allocate_pid().ok_or(errno::EAGAIN)?;
    // A vforked child's own address space stays empty until its `execve` replaces it; it runs
    // on its parent's root meanwhile. A fork copies the space the caller runs in, its
    // parent's if the caller is a vforked child.
    let memory = if vfork { AddressSpace::new() } else { process.with_memory(|memory| memory.duplicate()) };
    let memory = match memory {
        Ok(memory) => memory,
        Err(_) => {
            release_pid(pid);
            return Err(errno::ENOMEM);
        }
    };
    let child = {
        let mut state = process.state.lock();
        let root = if vfork { process.page_table_root() } else { memory.root() };
        let child = Arc::new(Process {
            pid,
            parent: Parent { core: shared::this_core(), pid: process.pid },
            killed: AtomicBool::new(false),
            exit_status: AtomicU32::new(NO_STATUS),
            root: AtomicU64::new(root),
            state: Mutex::new(ProcessState {
                memory,
                files: state.files.clone(),
                children: Vec::new(),
                threads: alloc::vec![pid],
                name: state.name.clone(),
                path: state.path.clone(),
                cwd: state.cwd.clone(),
                root_directory: state.root_directory.clone(),
                umask: state.umask,
                command_line: state.command_line.clone(),
            }),
            console_pending: Mutex::new(Vec::new()),
            signals: process.signals.copy_for_fork(),
            process_group: AtomicU32::new(process.process_group()),
            session: AtomicU32::new(process.session()),
            exec_done: AtomicBool::new(false),
            moving: AtomicU32::new(migrate::NOT_MOVING),
            returns_to: AtomicU64::new(migrate::NO_RETURN),
            late_exits: Mutex::new(Vec::new()),
            // Cleared for the child of a fork, as on Linux.
            death_signal: AtomicU32::new(0),
            loan: Mutex::new(if vfork { Loan::BorrowedFrom(process.clone()) } else { Loan::None }),
            cpu: Mutex::new(ProcessCpu::default()),
            options: Mutex::new(*process.options.lock()),
            stopped: AtomicU32::new(0),
            // Not inherited by a fork's child, as on Linux.
            real_timer: Mutex::new(timer::RealTimer::default()),
            credentials: Mutex::new(process.credentials.lock().clone()),
        });
        state.children.push(Child {
            pid,
            process_group: process.process_group(),
            wait_status: None,
            times: CpuTimes::default(),
            change: None,
        });
        child
    };
    if vfork {
        *process.loan.lock() = Loan::LentTo(pid);
    }
    let mut child_frame = *frame;
    child_frame.rax = 0;
    let fs_base = me.fs_base.load(Ordering::Relaxed);
    let signals = me.part().signals.copy_for_fork();
    let thread =
        thread::new_thread(pid, child.clone(), &child_frame, me.fpu_copy(), fs_base, signals).map_err(|_| {
            process.state.lock().children.retain(|c| c.pid != pid);
            end_loan(&child);
            release_pid(pid);
            errno::EAGAIN
        })?;
    report_to_proc(&child);
    PROCESSES.lock().insert(pid, child);
    shared::this_kcb().processes.created.fetch_add(1, Ordering::Relaxed);
    publish_counts();
    sched::make_ready(thread);
    sched::keep_slice();
    Ok(pid)
}

/// `clone` of a thread (`CLONE_VM | CLONE_THREAD`): same process, new stack and TLS.
pub fn clone_thread(
    frame: &InterruptFrame,
    stack: u64,
    tls: Option<u64>,
    parent_tid: u64,
    child_tid: u64,
    flags: u64,
) -> Result<u32, Errno> {
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let me = sched::current();
    let tid = allocate_pid().ok_or(errno::EAGAIN)?;
    let mut child_frame = *frame;
    child_frame.rax = 0;
    if stack != 0 {
        child_frame.rsp = stack;
    }
    let fs_base = tls.unwrap_or(me.fs_base.load(Ordering::Relaxed));
    let signals = me.part().signals.copy_for_thread();
    let thread =
        thread::new_thread(tid, process.clone(), &child_frame, me.fpu_copy(), fs_base, signals).map_err(|_| {
            release_pid(tid);
            errno::EAGAIN
        })?;
    let tid_bytes = tid.to_le_bytes();
    if flags & u64::from(linux_raw_sys::general::CLONE_PARENT_SETTID) != 0
        && user::copy_to_user(parent_tid, &tid_bytes).is_err()
    {
        release_pid(tid);
        return Err(errno::EFAULT);
    }
    if flags & u64::from(linux_raw_sys::general::CLONE_CHILD_SETTID) != 0 {
        let _ = user::copy_to_user(child_tid, &tid_bytes);
    }
    if flags & u64::from(linux_raw_sys::general::CLONE_CHILD_CLEARTID) != 0 {
        thread.part().clear_child_tid.store(child_tid, Ordering::Relaxed);
    }
    process.state.lock().threads.push(tid);
    publish_counts();
    sched::make_ready(thread);
    Ok(tid)
}

/// Wait status of a normal exit with `code`.
pub fn exited_status(code: u32) -> u32 {
    (code & 0xff) << 8
}

/// `exit_group` (and a fatal signal): the whole process ends with `wait_status`.
pub fn exit_process(wait_status: u32) -> ! {
    if let Some(process) = crate::proc::current_process() {
        process.doom(wait_status);
    }
    exit_thread()
}

/// `exit(code)` of one thread: when it is the last, the process ends with `code`.
pub fn exit_thread_with(code: u32) -> ! {
    if let Some(process) = crate::proc::current_process() {
        if process.state.lock().threads.len() == 1 {
            let status = exited_status(code);
            let _ = process.exit_status.compare_exchange(NO_STATUS, status, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
    exit_thread()
}

/// `exit` of one thread; the last thread out ends the process.
pub fn exit_thread() -> ! {
    let me = sched::current();
    let Some(process) = me.part().process.clone() else {
        panic!("the boot thread cannot exit");
    };
    // Away on an application core: it lets go of the thread (and this process's tables).
    remote::thread_leaves(&me);
    crate::syscall::syspage::thread_leaves(me.tid);
    // CLONE_CHILD_CLEARTID: zero the tid word and wake a joiner (pthread_join's futex).
    let clear = me.part().clear_child_tid.swap(0, Ordering::Relaxed);
    if clear != 0 && !process.is_killed() && user::copy_to_user(clear, &0u32.to_le_bytes()).is_ok() {
        sched::wake(WaitToken::Futex(process.pid, clear), usize::MAX);
    }
    sched::note_exiting();
    {
        let mut cpu = process.cpu.lock();
        cpu.ended_threads = cpu.ended_threads.plus(me.cpu.times());
    }
    let last = {
        let mut state = process.state.lock();
        state.threads.retain(|&t| t != me.tid);
        state.threads.is_empty()
    };
    if me.tid != process.pid {
        release_pid(me.tid);
        // A thread that moved here from another range gives its tid back there.
        migrate::forget_moved(me.tid);
    }
    if last {
        end_process(&process);
    }
    drop(process);
    drop(me);
    sched::exit_current()
}

/// `Process::stopped` of a process a SIGCONT continued whose parent is not told yet.
const CONTINUED_UNREPORTED: u32 = u32::MAX;

/// The calling thread takes stop signal `signal` (its default action): the process stops,
/// its parent learns it (`WIFSTOPPED`, SIGCHLD with `CLD_STOPPED`) once per stop, and the
/// thread waits until a SIGCONT continues the process or it is killed. Its other threads stop
/// as they next return to ring 3. The parent is told here, in the thread, not where the
/// signals were sent (a message handler may send them, and must not wait to send).
pub fn stop_here(signal: u32) {
    let previous = crate::proc::with_current_process(|p| p.stopped.swap(signal, Ordering::Relaxed));
    if matches!(previous, Some(0 | CONTINUED_UNREPORTED)) {
        if let Some(process) = crate::proc::current_process() {
            report_change(&process, (signal << 8) | 0x7f);
            report_to_proc(&process);
        }
    }
    loop {
        let state = crate::proc::with_current_process(|p| (p.is_killed(), p.pid, p.stopped.load(Ordering::Relaxed)));
        match state {
            Some((true, ..)) => exit_thread(),
            Some((false, pid, CONTINUED_UNREPORTED)) => {
                let first = crate::proc::with_current_process(|p| {
                    p.stopped.compare_exchange(CONTINUED_UNREPORTED, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok()
                });
                if first == Some(true) {
                    if let Some(process) = find(pid) {
                        report_change(&process, CONTINUED_STATUS);
                        report_to_proc(&process);
                    }
                }
                return;
            }
            Some((false, pid, stopped)) if stopped != 0 => {
                // Only the process's end cuts the stop short (SIGKILL): signals wait for it.
                let _ = sched::block_uninterruptible(WaitToken::Continued(pid), None);
            }
            _ => return,
        }
    }
}

/// SIGCONT reached `process`: if it was stopped it runs again; its thread that stopped tells
/// the parent (`WIFCONTINUED`, SIGCHLD with `CLD_CONTINUED`).
pub(super) fn continue_process(process: &Process) {
    let stopped = process.stopped.load(Ordering::Relaxed);
    if stopped != 0 && stopped != CONTINUED_UNREPORTED {
        process.stopped.store(CONTINUED_UNREPORTED, Ordering::Relaxed);
        sched::wake(WaitToken::Continued(process.pid), usize::MAX);
    }
}

/// Tells `process`'s parent, wherever it lives, that it stopped or continued (`status`), by
/// the message that carries exits.
fn report_change(process: &Process, status: u32) {
    if process.parent.pid == 0 {
        return;
    }
    let change = ChildExited {
        parent_pid: process.parent.pid,
        child_pid: process.pid,
        wait_status: status,
        process_group: process.process_group(),
        times: CpuTimes::default(),
    };
    report_exit(process.parent.home() as u32, change);
}

/// The last thread of `process` is leaving: free its memory and files, tell its parent.
fn end_process(process: &Arc<Process>) {
    let status = match process.exit_status.load(Ordering::Relaxed) {
        NO_STATUS => 0,
        status => status,
    };
    crate::fs::console::flush(&process.console_pending);
    // Orphans are reaped by nobody: forget them (their exits find no parent and are dropped).
    // Those still running get their parent-death signal, if they asked for one.
    let children = let_go(process);
    for child in children.iter().filter(|child| child.wait_status.is_none()) {
        signal::parent_died(child.pid, process.pid);
    }
    crate::fs::proc::report(process.pid, 0, false, "", &[], "");
    release_pid(process.pid);
    if status & 0x7f != 0 {
        shared::this_kcb().processes.killed.fetch_add(1, Ordering::Relaxed);
    }
    publish_counts();
    let cpu = *process.cpu.lock();
    let exited = ChildExited {
        parent_pid: process.parent.pid,
        child_pid: process.pid,
        wait_status: status,
        process_group: process.process_group(),
        times: cpu.ended_threads.plus(cpu.reaped_children),
    };
    migrate::forget_moved(process.pid);
    report_exit(process.parent.home() as u32, exited);
}

/// Lets go of what `process` holds on this instance, its last thread leaving (it ended, or
/// moved to another core): its page tables (left first), memory, descriptors and directory,
/// and its place in the process table; returns its children.
fn let_go(process: &Process) -> Vec<Child> {
    let kernel_root = shared::this_kcb().page_table_root.load(Ordering::Relaxed);
    crate::mm::address_space::load_instance_root();
    process.root.store(kernel_root, Ordering::Relaxed);
    end_loan(process);
    let (children, directories) = {
        let mut state = process.state.lock();
        state.threads.clear();
        hand_memory_to_borrower(process, &mut state);
        state.memory.destroy();
        state.files.close_all();
        (core::mem::take(&mut state.children), (state.cwd.take(), state.root_directory.take()))
    };
    drop(directories);
    crate::fs::client::flush_releases();
    PENDING_EXECS.lock().remove(&process.pid);
    PROCESSES.lock().remove(&process.pid);
    children
}

/// The message that tells a parent's core of its child's exit.
fn exit_line(exited: &ChildExited) -> channel::Message {
    crate::msg::line(Kind::ChildExited, |out| exited.encode(out))
}

fn report_exit(parent_core: u32, exited: ChildExited) {
    log::debug!(
        "process {} exited with {:#x}; parent {} on core {parent_core}",
        exited.child_pid,
        exited.wait_status,
        exited.parent_pid
    );
    if parent_core == shared::this_core() {
        record_exit(&exited);
        return;
    }
    // A parent kept on a stopped core (`core stop --keep`) finds the exit at the start.
    if let Err(error) = crate::msg::send_or_leave(parent_core as usize, &exit_line(&exited)) {
        log::warn!("process {} exited but its parent's core {parent_core} was not told: {error}", exited.child_pid);
    }
}

/// Records a child's exit for its parent here, wakes the parent's waiters and sends it
/// SIGCHLD. A parent that ignores SIGCHLD (`SIG_IGN`, or `SA_NOCLDWAIT`) has the child
/// reaped at once, as on Linux: its `wait4` then finds no such child.
///
/// The parent may be moving. One that left already (the exit was sent here before its range's
/// KCB named its new core) has the exit sent on there. One whose image is made keeps the exit
/// aside: it follows the image, or is recorded here if the move fails
/// (`migrate::move_current`). Else its parent would wait for that child forever.
pub(super) fn record_exit(exited: &ChildExited) {
    let (parent_pid, child_pid) = (exited.parent_pid, exited.child_pid);
    // A stop or a continue, not an end: the child stays a child.
    let change = is_stop_or_continue(exited.wait_status);
    if parent_pid == 0 && change {
        return;
    }
    if parent_pid == 0 {
        let mut children = KERNEL_CHILDREN.lock();
        if let Some(child) = children.iter_mut().find(|c| c.pid == child_pid) {
            child.wait_status = Some(exited.wait_status);
            child.times = exited.times;
            drop(children);
            sched::wake(WaitToken::Child(0), usize::MAX);
        }
        return;
    }
    let Some(parent) = find(parent_pid) else {
        let home = home_of(parent_pid);
        if home == shared::this_core() as usize {
            log::debug!("process {child_pid} exited, and its parent {parent_pid} is gone");
        } else if crate::msg::holds_kept_processes(home) {
            if let Err(error) = crate::msg::leave_for_next_kernel(home, &exit_line(exited)) {
                log::warn!("process {child_pid} exited but its parent's core {home} will not be told: {error}");
            }
        } else {
            migrate::send_or_hold(home, exit_line(exited));
        }
        return;
    };
    let action = parent.signals.action(signal::SIGCHLD);
    let reap_now = !change && (action.handler == signal::SIG_IGN || action.flags & signal::SA_NOCLDWAIT != 0);
    let recorded = {
        let mut state = parent.state.lock();
        // Under the lock its image reads the children with.
        if migrate::is_packed(&parent) {
            drop(state);
            parent.late_exits.lock().push(*exited);
            return;
        }
        match state.children.iter().position(|c| c.pid == child_pid) {
            Some(index) if reap_now => {
                state.children.remove(index);
                true
            }
            Some(index) if change => {
                state.children[index].change = Some(exited.wait_status);
                true
            }
            Some(index) => {
                let child = &mut state.children[index];
                child.wait_status = Some(exited.wait_status);
                child.change = None;
                child.times = exited.times;
                child.process_group = exited.process_group;
                true
            }
            None => false,
        }
    };
    if recorded {
        // Waiters first: a parent blocked in wait4 reaps the child rather than being
        // interrupted by the SIGCHLD that follows.
        sched::wake(WaitToken::Child(parent_pid), usize::MAX);
        // SA_NOCLDSTOP: no SIGCHLD for a child's stop or continue.
        if !(change && action.flags & signal::SA_NOCLDSTOP != 0) {
            signal::post_child_exit(&parent, child_pid, exited.wait_status);
        }
    }
}

/// `wait4` options Reef honours: `WNOHANG`, `WUNTRACED` (report a child's stop) and
/// `WCONTINUED` (its continue); `__WNOTHREAD`, `__WALL` and `__WCLONE` are accepted.
pub const WNOHANG: u64 = 1;
const WUNTRACED: u64 = 2;
const WCONTINUED: u64 = 8;
const WAIT_OPTIONS: u64 = WNOHANG | WUNTRACED | WCONTINUED | 0x2000_0000 | 0x4000_0000 | 0x8000_0000;

/// The wait status of a child that continued (`WIFCONTINUED`).
pub const CONTINUED_STATUS: u32 = 0xffff;

/// Whether `status` reports a stop (`WIFSTOPPED`: `0x7f` in the low byte) or a continue.
fn is_stop_or_continue(status: u32) -> bool {
    status == CONTINUED_STATUS || status & 0xff == 0x7f
}

/// Which children a wait takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitFor {
    Any,
    Process(u32),
    Group(u32),
}

/// Waits for a child of `parent_pid` (0: this kernel) that `which` names; returns (pid,
/// status), or `Ok(None)` with `WNOHANG` and nothing exited yet. A signal ends the wait with
/// `signal::interrupted_errno()` (restarted after a handler with `SA_RESTART`).
/// Returns the child reaped: its pid, wait status and CPU time (with its reaped children's),
/// which the parent's `RUSAGE_CHILDREN` now counts.
pub fn wait(parent_pid: u32, which: WaitFor, options: u64) -> Result<Option<(u32, u32, CpuTimes)>, Errno> {
    if options & !WAIT_OPTIONS != 0 {
        return Err(errno::EINVAL);
    }
    wait_for(parent_pid, which, options, Reap::Yes)
}

/// Whether a wait takes the ended child it reports (`wait4`, `waitid` with `WEXITED`), leaves
/// it to a later wait (`waitid` with `WNOWAIT`), or reports only stops and continues
/// (`waitid` without `WEXITED`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Reap {
    Yes,
    Keep,
    NoExits,
}

/// [`wait`] with the `wait4` options checked by the caller, and how ended children are taken.
pub fn wait_for(
    parent_pid: u32,
    which: WaitFor,
    options: u64,
    reap: Reap,
) -> Result<Option<(u32, u32, CpuTimes)>, Errno> {
    loop {
        let reaped = with_children(parent_pid, |children| {
            let matching = |c: &Child| match which {
                WaitFor::Any => true,
                WaitFor::Process(pid) => c.pid == pid,
                WaitFor::Group(group) => c.process_group == group,
            };
            if !children.iter().any(matching) {
                return Err(errno::ECHILD);
            }
            // A stop or continue the caller asks about is reported once, the child kept.
            let wanted_change = |status: u32| {
                if status == CONTINUED_STATUS {
                    options & WCONTINUED != 0
                } else {
                    options & WUNTRACED != 0
                }
            };
            let changed = children
                .iter_mut()
                .find(|c| matching(c) && c.wait_status.is_none() && c.change.is_some_and(wanted_change));
            if let Some(child) = changed {
                let status = child.change.take().unwrap_or(0);
                return Ok(Some((child.pid, status, CpuTimes::default(), false)));
            }
            let ended = children.iter().position(|c| matching(c) && c.wait_status.is_some());
            Ok(match (ended, reap) {
                (None, _) | (Some(_), Reap::NoExits) => None,
                (Some(at), Reap::Keep) => {
                    let c = &children[at];
                    Some((c.pid, c.wait_status.unwrap_or(0), c.times, false))
                }
                (Some(at), Reap::Yes) => {
                    let c = children.remove(at);
                    Some((c.pid, c.wait_status.unwrap_or(0), c.times, true))
                }
            })
        })??;
        if let Some((pid, status, times, ended)) = reaped {
            let found = (pid, status, times);
            if !ended {
                return Ok(Some(found));
            }
            if let Some(parent) = find(parent_pid) {
                let mut cpu = parent.cpu.lock();
                cpu.reaped_children = cpu.reaped_children.plus(found.2);
            }
            return Ok(Some(found));
        }
        if options & WNOHANG != 0 {
            return Ok(None);
        }
        if sched::block(WaitToken::Child(parent_pid), None).by_signal() {
            return Err(signal::interrupted_errno());
        }
    }
}

fn with_children<T>(parent_pid: u32, work: impl FnOnce(&mut Vec<Child>) -> T) -> Result<T, Errno> {
    if parent_pid == 0 {
        return Ok(work(&mut KERNEL_CHILDREN.lock()));
    }
    let parent = find(parent_pid).ok_or(errno::ECHILD)?;
    let mut state = parent.state.lock();
    Ok(work(&mut state.children))
}

/// A user-mode fault the process cannot survive: report it in one line and end the process
/// with the signal Linux would send (its handlers are not run for faults).
pub fn kill_for_fault(frame: &InterruptFrame, address: u64) -> ! {
    let (signal_number, signal_name) = match frame.vector {
        0 | 16 | 19 => (signal::SIGFPE, "SIGFPE"),
        6 => (signal::SIGILL, "SIGILL"),
        3 | 1 => (signal::SIGTRAP, "SIGTRAP"),
        17 => (signal::SIGBUS, "SIGBUS"),
        _ => (signal::SIGSEGV, "SIGSEGV"),
    };
    let (pid, name) = crate::proc::with_current_process(|p| (p.pid, p.state.lock().name.clone()))
        .expect("a user fault comes from a process");
    log::error!(
        "process {} ({}) killed by {}: {} at rip={:#x} address={:#x} error={:#x} on core {}",
        pid,
        name,
        signal_name,
        crate::interrupt::exception_name(frame.vector),
        frame.rip,
        address,
        frame.error_code,
        shared::this_core()
    );
    exit_process(signal_number)
}

/// Spawns a process on `core` for `parent` (a local process, or 0 for this kernel): locally
/// when `core` is this one, else by a message to that core's kernel; returns its pid. The
/// child joins its parent's process group and session (a kernel's child leads new ones), and
/// gets `death_signal` (0: none) when its parent ends.
pub fn spawn(
    core: usize,
    path: &[u8],
    arguments: &[&[u8]],
    environment: &[&[u8]],
    parent_pid: u32,
    death_signal: u32,
) -> Result<u32, Errno> {
    let me = shared::this_core();
    let parent = Parent { core: me, pid: parent_pid };
    // What the child gets from its parent: group and session, descriptors, directory (a
    // kernel's child: new ones, and the console).
    let (membership, mut inherited) = match parent_pid {
        0 => (None, Inherited::console()),
        pid => {
            let process = find(pid).ok_or(errno::ESRCH)?;
            (Some((process.process_group(), process.session())), Inherited::of(&process))
        }
    };
    if death_signal > abi::signal::MAX_SIGNAL {
        return Err(errno::EINVAL);
    }
    inherited.death_signal = death_signal;
    if core == me as usize {
        let pid = create(path, arguments, environment, parent, membership, inherited)?;
        let process_group = membership.map_or(pid, |(group, _)| group);
        let _ = with_children(parent_pid, |children| {
            children.push(Child { pid, process_group, wait_status: None, times: CpuTimes::default(), change: None })
        });
        return Ok(pid);
    }
    if core >= crate::msg::messaging_cores() {
        return Err(errno::EINVAL);
    }
    if !crate::msg::is_live(core) {
        return Err(errno::EAGAIN);
    }
    // The child's descriptors and directory: one reference each at the service, taken
    // before the request leaves (dropped again, and so released, if it never arrives).
    let mut handed: Vec<crate::fs::Handle> = Vec::new();
    let mut descriptors: Vec<abi::process::Descriptor> = Vec::new();
    let (mut working_directory, mut root_directory) = (abi::file::NONE, abi::file::NONE);
    for (fd, handle) in inherited.files.inherited() {
        let copy = crate::fs::client::retain(handle)?;
        descriptors.push(abi::process::Descriptor { fd: fd as u32, kind: copy.kind as u32, handle: copy.id });
        handed.push(copy);
    }
    for (directory, word) in
        [(&inherited.working_directory, &mut working_directory), (&inherited.root_directory, &mut root_directory)]
    {
        if let Some(directory) = directory {
            let copy = crate::fs::client::retain(directory)?;
            *word = copy.id;
            handed.push(copy);
        }
    }
    let groups = &inherited.credentials.groups;
    let size = SpawnRequest::encoded_size(path, arguments, environment, descriptors.len(), groups.len());
    if size > crate::msg::MAX_LARGE_MESSAGE {
        return Err(errno::E2BIG);
    }
    let mut request = alloc::vec![0u8; size];
    let request_id = (u64::from(me) << 48) | NEXT_REQUEST.fetch_add(1, Ordering::Relaxed);
    let (process_group, session) = membership.unwrap_or((0, 0));
    let origin = SpawnOrigin { request_id, parent_pid, parent_core: me, process_group, session, death_signal };
    let directories = (working_directory, root_directory);
    let credentials = (&inherited.credentials.ids, &groups[..]);
    SpawnRequest::encode(&mut request, &origin, directories, credentials, &descriptors, path, arguments, environment)
        .ok_or(errno::EINVAL)?;
    PENDING_SPAWNS.lock().insert(request_id, PendingSpawn { parent_pid, process_group, result: None });
    if let Err(error) = crate::msg::send_large(core, Kind::SpawnRequest, &request) {
        PENDING_SPAWNS.lock().remove(&request_id);
        log::warn!("spawn on core {core}: {error}");
        return Err(errno::EAGAIN);
    }
    // Sent: the references are the child's now (its instance releases them).
    for handle in handed {
        core::mem::forget(handle);
    }
    let deadline = crate::arch::cpu::read_tsc() + crate::time::ns_to_cycles(crate::msg::SEND_TIMEOUT_MS * 1_000_000);
    loop {
        let answered = PENDING_SPAWNS.lock().get(&request_id).and_then(|pending| pending.result);
        if let Some(result) = answered {
            PENDING_SPAWNS.lock().remove(&request_id);
            return if result > 0 { Ok(result as u32) } else { Err((-result) as u32) };
        }
        // Not interruptible: a signal must not leave a child built but not recorded.
        match sched::block_uninterruptible(WaitToken::Reply(request_id), Some(deadline)) {
            Wakeup::Woken | Wakeup::Interrupted | Wakeup::Moving => {}
            Wakeup::TimedOut if crate::arch::cpu::read_tsc() >= deadline => {
                PENDING_SPAWNS.lock().remove(&request_id);
                return Err(errno::ETIMEDOUT);
            }
            Wakeup::TimedOut => {}
            Wakeup::Killed => {
                PENDING_SPAWNS.lock().remove(&request_id);
                return Err(errno::EINTR);
            }
        }
    }
}

/// Message handler: another instance asks for a process here.
fn on_spawn_request(bytes: &[u8]) -> crate::msg::HandlerResult {
    let request = SpawnRequest::decode(bytes)?;
    let origin = request.origin;
    log::debug!("spawn request {:#x} from core {}", origin.request_id, origin.parent_core);
    let arguments: Vec<&[u8]> = request.arguments().collect();
    let environment: Vec<&[u8]> = request.environment().collect();
    let parent = Parent { core: origin.parent_core, pid: origin.parent_pid };
    let membership = (origin.session != 0).then_some((origin.process_group, origin.session));
    // The references the request carries are adopted here: dropped (released) if the
    // process is not built.
    let mut adopted = Vec::new();
    for descriptor in request.descriptors() {
        let Some(kind) = abi::file::HandleKind::from_u64(u64::from(descriptor.kind)) else { continue };
        adopted.push((descriptor.fd as usize, crate::fs::Handle::adopt(descriptor.handle, kind)));
    }
    let directory = |id: u64| {
        (id != abi::file::NONE).then(|| Arc::new(crate::fs::Handle::adopt(id, abi::file::HandleKind::Directory)))
    };
    let inherited = Inherited {
        files: FileTable::from_inherited(adopted),
        working_directory: directory(request.working_directory),
        root_directory: directory(request.root_directory),
        death_signal: origin.death_signal,
        credentials: credentials::Credentials { ids: request.credentials, groups: request.groups().collect() },
    };
    // Only a timesharing core runs processes (an AC runs one thread of another core's, a KC
    // none); the references adopted above are released with `inherited`.
    let timesharing = shared::this_kcb().role() == crate::core::kcb::Role::Timesharing;
    let created = if timesharing {
        create(request.path, &arguments, &environment, parent, membership, inherited)
    } else {
        Err(errno::EBUSY)
    };
    let result = match created {
        Ok(pid) => i64::from(pid),
        Err(error) => -i64::from(error),
    };
    let reply =
        crate::msg::line(Kind::SpawnReply, |out| SpawnReply { request_id: origin.request_id, result }.encode(out));
    if let Err(error) = crate::msg::send_blocking(origin.parent_core as usize, &reply) {
        log::warn!("spawn request from core {}: the reply was not sent: {error}", origin.parent_core);
    }
    Ok(())
}

/// Message handler: the answer to a spawn request of ours. The child is recorded for its
/// parent at once, so its exit (which may follow right behind) finds the record.
fn on_spawn_reply(message: &channel::Message) -> crate::msg::HandlerResult {
    let reply = SpawnReply::decode(message.payload())?;
    log::debug!("spawn reply {:#x}: {}", reply.request_id, reply.result);
    let mut pending = PENDING_SPAWNS.lock();
    let Some(slot) = pending.get_mut(&reply.request_id) else {
        // The requester gave up waiting: the process runs without a waiting parent.
        return Ok(());
    };
    slot.result = Some(reply.result);
    let (parent_pid, process_group) = (slot.parent_pid, slot.process_group);
    drop(pending);
    if reply.result > 0 {
        let pid = reply.result as u32;
        let process_group = if process_group == 0 { pid } else { process_group };
        let _ = with_children(parent_pid, |children| {
            children.push(Child { pid, process_group, wait_status: None, times: CpuTimes::default(), change: None })
        });
    }
    sched::wake(WaitToken::Reply(reply.request_id), usize::MAX);
    Ok(())
}

/// Message handler: a child homed elsewhere exited.
fn on_child_exited(message: &channel::Message) -> crate::msg::HandlerResult {
    let exited = ChildExited::decode(message.payload())?;
    record_exit(&exited);
    Ok(())
}

/// Registers this instance's process message handlers.
pub fn init() {
    use crate::msg::{register, Handler};
    register(Kind::SpawnRequest, Handler { high_priority: false, on_line: None, on_large: Some(on_spawn_request) });
    register(Kind::SpawnReply, Handler { high_priority: false, on_line: Some(on_spawn_reply), on_large: None });
    register(Kind::ChildExited, Handler { high_priority: false, on_line: Some(on_child_exited), on_large: None });
    signal::init();
    group::init();
    migrate::init();
    remote::init();
    crate::syscall::syspage::init();
}

/// A few words for a Linux errno, for the kernel's messages (init that did not start).
pub fn errno_text(error: Errno) -> &'static str {
    match error {
        errno::ENOENT => "no such file in the initramfs",
        errno::EACCES => "not an executable file",
        errno::ENOEXEC => "not an x86-64 ELF program",
        errno::ENOMEM => "out of memory on that core",
        errno::E2BIG => "arguments too long",
        errno::EINVAL => "no such core: see `cores`",
        errno::EAGAIN => "that core is not running: see `cores`, `start <core>`",
        errno::ETIMEDOUT => "that core did not answer in time",
        errno::ECHILD => "no such child",
        errno::ESRCH => "no such process",
        errno::EINTR => "interrupted",
        _ => "failed",
    }
}
