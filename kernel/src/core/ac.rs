//! An application core running one user thread of a process homed elsewhere (NIX execac).
//!
//! The AC takes no timer and no device interrupt. It enters the thread's user code under a
//! root whose user half is the home's (see `mm::borrowed`), on a kernel stack of its own.
//! Every system call and every exception of the thread goes to the home as an
//! [`AcEvent`]; the thread resumes with the registers of the home's next [`AcCommand`].
//! With the syspage flag, calls that need no change of the thread's registers become
//! syspage entries for a kernel core instead (see `syscall::syspage`).
//!
//! All state here is the instance's own (`.bss`); the boot thread is the only thread of an
//! AC and runs the guest on a stack switch, so the scheduler never sees it.
#![deny(unsafe_code)]

use crate::arch::cpu;
use crate::arch::idt::InterruptFrame;
use crate::arch::stacks::ThreadStack;
use crate::arch::user::{self, FpuState};
use crate::core::kcb::Role;
use crate::core::shared;
use crate::mm::borrowed::BorrowedRoot;
use crate::syscall::syspage::AcSubmit;
use abi::application::{AcCommand, AcEvent, CommandKind, EventKind};
use abi::message::Kind;
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use linux_raw_sys::errno;
use spin::Mutex;

/// The thread this AC holds.
#[derive(Clone, Copy, Debug)]
struct Guest {
    home: usize,
    pid: u32,
    tid: u32,
    flags: u8,
    kernel_core: u16,
    syspage: u64,
}

/// How long an AC polls for its home's answer before it halts until an IPI brings it.
const ANSWER_POLL_NS: u64 = 50_000_000;

/// The thread taken (from its first run command to its end).
static GUEST: Mutex<Option<Guest>> = Mutex::new(None);
/// Commands for the guest not yet acted on.
static INBOX: Mutex<VecDeque<Box<AcCommand>>> = Mutex::new(VecDeque::new());
/// The guest's user code is this core's: traps and interrupts from ring 3 are the guest's.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// The home asked for the guest's registers back.
static RECALLED: AtomicBool = AtomicBool::new(false);
/// The home ended the guest here.
static ENDED: AtomicBool = AtomicBool::new(false);
/// The guest left because this core stops: its home keeps it, so no `Ended` is sent.
static SUSPENDED: AtomicBool = AtomicBool::new(false);
/// The guest's root while it runs, and what it was last loaded with. A run that brings the
/// same leaves the translations this core cached of the guest's memory alone: reloading the
/// root on every forwarded call cost a quarter of it under TCG, which drops its whole
/// software TLB.
struct GuestRoot {
    root: BorrowedRoot,
    loaded: Option<Loaded>,
}

/// What a root was loaded with: the home (a process that moved has its tables built anew by
/// another) and its kernel's incarnation (a restarted home builds the tables anew, perhaps in
/// the same frames with the same generation), its mapping generation and its top-level
/// entries.
struct Loaded {
    home: u16,
    home_incarnation: u64,
    mappings: u64,
    entries: Vec<(u16, u64)>,
}

static ROOT: Mutex<Option<GuestRoot>> = Mutex::new(None);

/// Whether this core runs a guest thread (every trap from ring 3 is the guest's).
pub fn runs_thread() -> bool {
    RUNNING.load(Ordering::Relaxed)
}

/// From the idle loop of an AC: starts the guest whose first run command arrived, or drops
/// one that ended before it started.
pub fn run_pending() {
    if RUNNING.load(Ordering::Relaxed) {
        return;
    }
    if ENDED.swap(false, Ordering::AcqRel) {
        INBOX.lock().clear();
        release(true);
        return;
    }
    let command = INBOX.lock().pop_front();
    if let Some(command) = command {
        if command.kind == CommandKind::Run {
            enter(&command);
        }
    }
}

/// Runs the guest until it ends, on its own kernel stack; back on the boot thread's stack,
/// cleans up and tells the home.
fn enter(command: &AcCommand) {
    let Ok(mut stack) = ThreadStack::allocate(|page| crate::mm::window::map_kernel_page(page).map_err(drop)) else {
        refuse_current(errno::ENOMEM);
        return;
    };
    let Ok(root) = BorrowedRoot::new() else {
        refuse_current(errno::ENOMEM);
        return;
    };
    *ROOT.lock() = Some(GuestRoot { root, loaded: None });
    let frame = InterruptFrame::from_registers(&command.registers);
    cpu::disable_interrupts();
    load_state(command);
    interrupt_guest_if_notified();
    RUNNING.store(true, Ordering::Relaxed);
    user::run_on_side_stack(&mut stack, &frame);
    // The guest ended (see `leave`): this is the boot thread again.
    cpu::enable_interrupts();
    RUNNING.store(false, Ordering::Relaxed);
    drop(ROOT.lock().take());
    drop(stack);
    user::set_fs_base(0);
    INBOX.lock().clear();
    release(!SUSPENDED.swap(false, Ordering::AcqRel));
}

/// Loads what a run command carries: FPU image, TLS base, the home's top-level entries
/// (reloading the root, which also drops stale user translations, when they or the home's
/// mapping generation changed since the last run, or another root is active).
fn load_state(command: &AcCommand) {
    // On the heap: FXRSTOR needs 16-byte alignment, which an AP's boot stack does not promise.
    let mut fpu = Box::new(FpuState(command.fpu));
    fpu.sanitize();
    fpu.restore();
    user::set_fs_base(command.fs_base);
    if let Some(guest) = ROOT.lock().as_mut() {
        let home_incarnation =
            shared::get().kcbs.get(usize::from(command.home)).map_or(0, |kcb| kcb.incarnation.load(Ordering::Acquire));
        let same = guest.loaded.as_ref().is_some_and(|loaded| {
            loaded.home == command.home
                && loaded.home_incarnation == home_incarnation
                && loaded.mappings == command.mappings
                && loaded.entries == command.root_entries()
        });
        if !same || !guest.root.is_loaded() {
            guest.root.set_user_entries(command.root_entries());
            guest.root.load();
            guest.loaded = Some(Loaded {
                home: command.home,
                home_incarnation,
                mappings: command.mappings,
                entries: command.root_entries().to_vec(),
            });
        }
    }
}

/// Drops every cached translation of the guest's memory (reloads its root).
pub fn flush_translations() {
    if let Some(guest) = ROOT.lock().as_ref() {
        guest.root.load();
    }
}

/// Whether the home ended the guest (a kill while it waits on its syspage).
pub fn is_ended() -> bool {
    ENDED.load(Ordering::Acquire)
}

/// Ends the guest from inside one of its traps: back to the boot thread's stack for good.
pub fn leave() -> ! {
    user::leave_side_stack()
}

/// Drops the guest: the KCB says the AC is free, the home (if `tell_home`) learns it ended.
fn release(tell_home: bool) {
    crate::syscall::syspage::release_own();
    let guest = GUEST.lock().take();
    shared::this_kcb().application_thread.store(0, Ordering::Release);
    if let (Some(guest), true) = (guest, tell_home) {
        let event = AcEvent::bare(EventKind::Ended, shared::this_core() as u16, guest.pid, guest.tid, 0);
        let _ = send(guest.home, &event);
    }
}

fn send(home: usize, event: &AcEvent) -> bool {
    let mut bytes = alloc::vec![0u8; AcEvent::SIZE];
    event.encode(&mut bytes);
    crate::msg::send_large_draining(home, Kind::AcEvent, &bytes).is_ok()
}

fn refuse_current(errno: u32) {
    let guest = GUEST.lock().take();
    shared::this_kcb().application_thread.store(0, Ordering::Release);
    if let Some(guest) = guest {
        let event = AcEvent::bare(EventKind::Refused, shared::this_core() as u16, guest.pid, guest.tid, errno);
        let _ = send(guest.home, &event);
    }
}

/// A system call of the guest: through its kernel core's syspage when it may, else to its
/// home; the thread resumes with what comes back.
pub fn on_system_call(frame: &mut InterruptFrame) {
    let Some(guest) = *GUEST.lock() else { leave() };
    // A recalled thread's call goes home with its registers (the home wants the thread
    // there), not through the syspage.
    let submitted = if guest.flags & abi::call::MOVE_SYSPAGE as u8 != 0 && !RECALLED.load(Ordering::Acquire) {
        crate::syscall::syspage::submit_for_ac(frame, guest.kernel_core as usize, guest.syspage, is_ended)
    } else {
        AcSubmit::NotTaken
    };
    let served = match submitted {
        AcSubmit::Done { stale_translations } => {
            if stale_translations {
                flush_translations();
            }
            true
        }
        AcSubmit::NotTaken => false,
        AcSubmit::Ended => leave(),
    };
    if served {
        // A signal for the thread meanwhile: the home delivers it.
        after_interrupt(frame);
        cpu::disable_interrupts();
        interrupt_guest_if_notified();
        return;
    }
    shared::this_kcb().syscalls.sent_home.fetch_add(1, Ordering::Relaxed);
    exchange(frame, EventKind::Syscall, 0);
}

/// An exception of the guest (from ring 3): its home decides.
pub fn on_exception(frame: &mut InterruptFrame, fault_address: u64) {
    exchange(frame, EventKind::Fault, fault_address);
}

/// With interrupts masked until the guest runs: if a message notification came while this
/// core was in the kernel since it last looked (an end or a recall, which interrupts the
/// guest to be seen), interrupts the guest again as soon as it runs, so that it looks. An AC
/// takes no tick: without this, the message waited for the guest's next system call (a
/// kill of a thread computing on an AC waited seconds).
fn interrupt_guest_if_notified() {
    if crate::sched::take_message_notification() {
        crate::msg::notify(shared::this_core() as usize, crate::msg::NotifyMode::Ipi);
    }
}

/// After an interrupt that stopped the guest's user code: obeys a recall, an end, or a boot
/// driver's stop.
pub fn after_interrupt(frame: &mut InterruptFrame) {
    if ENDED.load(Ordering::Acquire) {
        leave();
    }
    if stopping() {
        suspend(&frame.registers(), None);
    }
    if RECALLED.load(Ordering::Acquire) {
        exchange(frame, EventKind::Recalled, 0);
    }
}

/// Whether this core's thread (if any) can be handed back to its home for a stop: it holds
/// one, and its calls do not go through a syspage.
pub fn can_suspend() -> bool {
    GUEST.lock().is_some_and(|guest| guest.flags & abi::call::MOVE_SYSPAGE as u8 == 0)
}

/// Whether a boot driver asked this core to stop.
fn stopping() -> bool {
    shared::this_kcb().stop_requested.load(Ordering::Acquire) != 0
}

/// This core stops: the guest's registers (and FPU image: `fpu`, or this core's) go home in
/// a `Suspended` event, and the guest leaves without an `Ended`; its home keeps the thread
/// and runs it again on this core's next kernel, or itself.
fn suspend(registers: &[u64; abi::application::REGISTERS], fpu: Option<&[u8; abi::application::FPU_STATE_SIZE]>) -> ! {
    if let Some(guest) = *GUEST.lock() {
        let mut event =
            Box::new(AcEvent::bare(EventKind::Suspended, shared::this_core() as u16, guest.pid, guest.tid, 0));
        event.registers = *registers;
        match fpu {
            Some(fpu) => event.fpu = *fpu,
            None => {
                let mut state = Box::new(FpuState::initial());
                state.save();
                event.fpu = state.0;
            }
        }
        let _ = send(guest.home, &event);
    }
    SUSPENDED.store(true, Ordering::Release);
    leave()
}

/// Sends the guest's registers to its home as `kind` and waits for the next run command
/// (or the end). Interrupts are on while it waits: the answer comes by message.
fn exchange(frame: &mut InterruptFrame, kind: EventKind, fault_address: u64) {
    let Some(guest) = *GUEST.lock() else { leave() };
    let mut event = Box::new(AcEvent::bare(kind, shared::this_core() as u16, guest.pid, guest.tid, 0));
    event.registers = frame.registers();
    event.fault_address = fault_address;
    let mut fpu = Box::new(FpuState::initial());
    fpu.save();
    event.fpu = fpu.0;
    // The home sees these registers after any recall it sent: that recall is answered.
    RECALLED.store(false, Ordering::Release);
    cpu::enable_interrupts();
    if !send(guest.home, &event) {
        leave();
    }
    // An AC has nothing else to do: it polls for the answer (no interrupt, the NIX way) for a
    // while, and only a long wait (a read of the console, a sleep) halts until an IPI.
    let polling = crate::time::SpinDeadline::after_cycles(crate::time::ns_to_cycles(ANSWER_POLL_NS));
    let mut halt = false;
    loop {
        if ENDED.load(Ordering::Acquire) {
            leave();
        }
        let command = INBOX.lock().pop_front();
        if stopping() {
            match command {
                // The home's answer came: those registers go back with the suspension.
                Some(command) if command.kind == CommandKind::Run => suspend(&command.registers, Some(&command.fpu)),
                // The thread is at home: its home ships it again once this core runs again.
                _ => {
                    SUSPENDED.store(true, Ordering::Release);
                    leave()
                }
            }
        }
        if let Some(command) = command {
            if command.kind == CommandKind::Run {
                *frame = InterruptFrame::from_registers(&command.registers);
                load_state(&command);
                if let Some(guest) = GUEST.lock().as_mut() {
                    // The syspage changes with `execve` (a new address space).
                    guest.kernel_core = command.kernel_core;
                    guest.syspage = command.syspage;
                }
                cpu::disable_interrupts();
                interrupt_guest_if_notified();
                return;
            }
            continue;
        }
        // A home between two kernels of a restart keeps the thread: its next kernel sends it
        // on. A process that moved to another TC meanwhile is that TC's, which ships it on
        // (its old home may stop once it let go of it).
        let home_now = crate::proc::home_of(guest.pid);
        if !crate::msg::is_reachable(home_now) {
            log::warn!("home core {home_now} of thread {} stopped: the thread ends here", guest.tid);
            leave();
        }
        // A home asked to restart answers from its next kernel, milliseconds away: halt until
        // it sends (a polling core would take a host CPU from the booting one under TCG). That
        // kernel builds the tables anew, and the run it sends reloads them (`load_state`).
        let home = shared::get().kcb(home_now);
        if !home.state().is_live() || home.restart_pending.load(Ordering::Acquire) != 0 {
            halt = true;
        }
        if !halt && !polling.passed() {
            crate::msg::drain();
            cpu::relax();
        } else {
            crate::msg::wait_for_messages();
        }
    }
}

fn on_command(bytes: &[u8]) -> crate::msg::HandlerResult {
    let command = Box::new(AcCommand::decode(bytes)?);
    let me = shared::this_core() as u16;
    let home = usize::from(command.home);
    if command.kind == CommandKind::Run
        && command.incarnation != shared::this_kcb().incarnation.load(Ordering::Acquire) as u32
    {
        // Sent to this core's previous kernel, which stopped before taking it: the home
        // learns of the restart and sends the thread again.
        return Ok(());
    }
    let mut guest = GUEST.lock();
    // The guest's process moved to another TC (a role change or a stop of its home): its new
    // home ships it, and the pid's range names that home (written before the process ran
    // there, so before anything was sent). Or it ends it: a process killed before its new home
    // shipped the thread may be gone from the range's records by the time its end comes, so
    // an end is taken from whichever kernel sends it (only a kernel that holds the process
    // sends one: the old home forgets a thread that moved without ending it).
    if let Some(moved) = guest
        .as_mut()
        .filter(|g| g.tid == command.tid && g.pid == command.pid && g.home != home)
        .filter(|g| command.kind == CommandKind::End || crate::proc::home_of(g.pid) == home)
    {
        log::debug!("thread {} of process {} now homed on core {home}", moved.tid, moved.pid);
        moved.home = home;
    }
    let ours = guest.is_some_and(|g| g.tid == command.tid && g.home == home && g.pid == command.pid);
    match command.kind {
        CommandKind::Run if ours => INBOX.lock().push_back(command),
        CommandKind::Run => {
            let refusal = if guest.is_some() {
                Some(errno::EBUSY)
            } else if shared::this_kcb().role() != Role::Application {
                Some(errno::EINVAL)
            } else {
                None
            };
            if let Some(errno) = refusal {
                drop(guest);
                let _ = send(home, &AcEvent::bare(EventKind::Refused, me, command.pid, command.tid, errno));
                return Ok(());
            }
            *guest = Some(Guest {
                home,
                pid: command.pid,
                tid: command.tid,
                flags: command.flags,
                kernel_core: command.kernel_core,
                syspage: command.syspage,
            });
            shared::this_kcb()
                .application_thread
                .store(u64::from(command.pid) << 32 | u64::from(command.tid), Ordering::Release);
            ENDED.store(false, Ordering::Release);
            RECALLED.store(false, Ordering::Release);
            INBOX.lock().push_back(command);
        }
        CommandKind::Recall if ours => RECALLED.store(true, Ordering::Release),
        CommandKind::End if ours => ENDED.store(true, Ordering::Release),
        CommandKind::Flush if ours => {
            drop(guest);
            flush_translations();
            let _ = send(home, &AcEvent::bare(EventKind::Flushed, me, command.pid, command.tid, 0));
        }
        // For a thread this AC does not hold: already gone; nothing to do (a flush is answered:
        // this core holds no translation of that process).
        CommandKind::Flush => {
            drop(guest);
            let _ = send(home, &AcEvent::bare(EventKind::Flushed, me, command.pid, command.tid, 0));
        }
        CommandKind::Recall | CommandKind::End => {}
    }
    Ok(())
}

/// Registers the AC side's message handler.
pub fn init() {
    use crate::msg::{register, Handler};
    register(Kind::AcCommand, Handler { high_priority: true, on_line: None, on_large: Some(on_command) });
}
