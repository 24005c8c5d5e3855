//! Interrupt and exception dispatch for this instance; an exception stops only this core.
//!
//! The trap table is mechanism: it counts, acknowledges, and handles what the base owns (the
//! timer, the wake-up IPI, the console, kernel faults). What an exception from ring 3 means,
//! what a device vector does and what happens on the way back to ring 3 are [`TrapHooks`] and
//! vector handlers that `boot` registers; the table names no service.

use crate::arch::idt::InterruptFrame;
use crate::arch::{apic, cpu, idt};
use crate::percore::kcb::CoreState;
use crate::percore::shared;
use core::sync::atomic::Ordering;

/// What the layers above decide for the trap table; registered once by `boot`.
pub struct TrapHooks {
    /// An interrupt (vector 32 or above) arrived: a parked core notes it.
    pub on_interrupt: fn(),
    /// An exception from ring 3, before anything else: whether a layer took it (an
    /// application core's guest traps to its home).
    pub exception_from_user: fn(frame: &mut InterruptFrame, fault_address: u64) -> bool,
    /// A page fault at user address `address` (from ring 3, or from a copy to or from user
    /// memory): whether the running process's memory resolved it (write, execute).
    pub resolve_user_fault: fn(address: u64, write: bool, execute: bool) -> bool,
    /// An exception from ring 3 that nothing resolved: the process ends (it returns only if
    /// the thread has no process).
    pub kill_for_fault: fn(frame: &InterruptFrame, address: u64) -> !,
    /// On the way back to ring 3 after an interrupt or exception.
    pub return_to_user: fn(frame: &mut InterruptFrame),
    /// This core is ending after a fault or panic, before its KCB says so: count what it
    /// was handling as lost.
    pub core_ending: fn(),
    /// After its KCB says faulted: a parked core gives its host's processor back.
    pub core_ended: fn(),
}

static HOOKS: spin::Once<TrapHooks> = spin::Once::new();

/// Registers the trap table's hooks (`boot`, once, before interrupts are enabled).
pub fn register_hooks(hooks: TrapHooks) {
    HOOKS.call_once(|| hooks);
}

/// A handler of a device or IPI vector; it acknowledges the interrupt itself (some must
/// before they work, some after).
pub type VectorHandler = fn(frame: &mut InterruptFrame);

static VECTOR_HANDLERS: [spin::Once<VectorHandler>; 256] = [const { spin::Once::new() }; 256];

/// Registers `handler` for `vector` (`boot`, once per vector).
pub fn register_vector(vector: u8, handler: VectorHandler) {
    VECTOR_HANDLERS[usize::from(vector)].call_once(|| handler);
}

/// The instance that owns the devices: instance 0. It alone maps the I/O APICs and the
/// virtio-mmio window (`core::boot_driver`), and takes device interrupts (docs/devices.md).
pub const DEVICE_OWNER: u32 = 0;

/// The I/O APICs the MADT lists, with the inputs each has, on the instance that owns the
/// devices ([`DEVICE_OWNER`]); `None` on every other instance, which maps none of them.
pub fn io_apics() -> Option<&'static crate::arch::ioapic::InterruptControllers> {
    if shared::this_core() != DEVICE_OWNER {
        return None;
    }
    // SAFETY: the boot driver maps every I/O APIC page the MADT lists, uncached, in the
    // device owner's direct map and in no other instance's (`core::boot_driver`); this is the
    // device owner.
    Some(unsafe { crate::arch::ioapic::init(&shared::facts().io_apics) })
}

/// What `/proc/interrupts` calls `vector`.
pub fn vector_name(vector: u8) -> &'static str {
    match vector {
        0..=31 => exception_name(u64::from(vector)),
        v if v == idt::VECTOR_TIMER => "timer",
        v if v == idt::VECTOR_MESSAGE => "message IPI",
        v if v == idt::VECTOR_WAKE => "wake IPI",
        #[cfg(feature = "bench")]
        v if v == idt::VECTOR_BENCH => "benchmark IPI",
        v if v == idt::VECTOR_CONSOLE => "console",
        v if v == idt::VECTOR_SPURIOUS => "spurious",
        v if (idt::VECTOR_DEVICE_BASE..idt::VECTOR_DEVICE_BASE + idt::DEVICE_VECTORS).contains(&v) => "device",
        v if (idt::VECTOR_LEGACY_BASE..idt::VECTOR_LEGACY_BASE + 16).contains(&v) => "legacy PIC (stray)",
        _ => "unassigned",
    }
}

/// The name of exception `vector`.
pub fn exception_name(vector: u64) -> &'static str {
    match vector {
        0 => "divide error",
        1 => "debug",
        2 => "non-maskable interrupt",
        3 => "breakpoint",
        4 => "overflow",
        5 => "bound range",
        6 => "invalid opcode",
        7 => "device not available",
        8 => "double fault",
        10 => "invalid TSS",
        11 => "segment not present",
        12 => "stack fault",
        13 => "general protection",
        14 => "page fault",
        16 => "x87 floating point",
        17 => "alignment check",
        18 => "machine check",
        19 => "SIMD floating point",
        _ => "reserved exception",
    }
}

/// Called by every entry stub with the saved frame.
pub fn dispatch(frame: &mut InterruptFrame) {
    if let Some(region) = shared::region() {
        region.kcb(shared::this_core() as usize).interrupts.count(frame.vector);
    }
    let hooks = HOOKS.get();
    if frame.vector >= 32 {
        if let Some(hooks) = hooks {
            (hooks.on_interrupt)();
        }
    }
    if frame.vector < 32 && frame.came_from_user() {
        let fault_address = if frame.vector == 14 { cpu::read_cr2() } else { 0 };
        if hooks.is_some_and(|hooks| (hooks.exception_from_user)(frame, fault_address)) {
            return;
        }
    }
    match frame.vector {
        14 => page_fault(frame),
        0..=31 if frame.came_from_user() => match hooks {
            Some(hooks) => (hooks.kill_for_fault)(frame, 0),
            None => fault(frame),
        },
        0..=31 => fault(frame),
        v if v == u64::from(idt::VECTOR_TIMER) => {
            // The count lives in this core's KCB only; this core is its only writer.
            if let Some(region) = shared::region() {
                let ticks = &region.kcb(shared::this_core() as usize).ticks;
                ticks.store(ticks.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            apic::local().end_of_interrupt();
            crate::sched::on_tick();
        }
        v if v == u64::from(idt::VECTOR_WAKE) => apic::local().end_of_interrupt(),
        v if v == u64::from(idt::VECTOR_CONSOLE) => {
            // Wakes core 0, where the file service reads the bytes for a process waiting for them.
            crate::console::on_input_interrupt();
            apic::local().end_of_interrupt();
            crate::sched::wake(crate::sched::WaitToken::Console, usize::MAX);
        }
        v if v == u64::from(idt::VECTOR_SPURIOUS) => {}
        vector => match VECTOR_HANDLERS.get(vector as usize).and_then(spin::Once::get) {
            Some(handler) => handler(frame),
            // The 8259s are masked at boot: a legacy vector here means a device or the
            // firmware left something enabled, worth a line but no EOI (the LAPIC did not
            // deliver it).
            None => log::warn!("stray interrupt on vector {vector} ignored: a legacy PIC line is unmasked"),
        },
    }
    if frame.came_from_user() {
        if let Some(hooks) = hooks {
            (hooks.return_to_user)(frame);
        }
    }
}

/// A page fault: demand-zero memory of the running process (from ring 3, or from the kernel
/// copying to or from its memory), a bad user pointer in a copy (the copy fails), a bad
/// access of a process (it is killed), or a kernel fault (this core stops).
fn page_fault(frame: &mut InterruptFrame) {
    let address = cpu::read_cr2();
    #[cfg(feature = "test-hooks")]
    if let Some(fixup) = crate::arch::user::probe_fixup(frame.rip) {
        frame.rip = fixup;
        return;
    }
    let write = frame.error_code & 2 != 0;
    let execute = frame.error_code & 16 != 0;
    let user_copy = if frame.came_from_user() { None } else { crate::arch::user::fault_fixup(frame.rip) };
    if frame.came_from_user() || user_copy.is_some() {
        let hooks = HOOKS.get();
        let resolved = address < crate::arch::user::USER_END
            && hooks.is_some_and(|hooks| (hooks.resolve_user_fault)(address, write, execute));
        if resolved {
            return;
        }
        if let Some(fixup) = user_copy {
            frame.rip = fixup;
            return;
        }
        if let Some(hooks) = hooks {
            (hooks.kill_for_fault)(frame, address);
        }
    }
    fault(frame)
}

/// QEMU exit status when core 0 (init's home, the console's owner) faults or panics.
pub const CORE_0_FAILED_STATUS: u32 = 3;

/// Hive-style fault containment: report, mark this core faulted, stop it. Nothing here
/// touches another core's memory, so the others keep running.
fn fault(frame: &InterruptFrame) -> ! {
    let fault_address = if frame.vector == 14 { cpu::read_cr2() } else { 0 };
    release_shared_locks();
    let core = shared::this_core();
    // No allocation on this path: the fault may have struck inside the allocator.
    let overflow = match crate::arch::stacks::guard_hit(fault_address) {
        Some(stack) if frame.vector == 14 => stack.name(),
        _ => "",
    };
    log::error!(
        "FAULT core {core}: vector {} ({}){}{}{} rip={:#x} error={:#x} cr2={:#x} rsp={:#x}; core {core} stopped, {}",
        frame.vector,
        exception_name(frame.vector),
        if overflow.is_empty() { "" } else { " (kernel stack overflow: " },
        overflow,
        if overflow.is_empty() { "" } else { " stack)" },
        frame.rip,
        frame.error_code,
        fault_address,
        frame.rsp,
        if core == 0 { "core 0 ran init and the console: Reef exits" } else { "other cores continue" }
    );
    if let Some(region) = shared::region() {
        let kcb = region.kcb(core as usize);
        kcb.fault.vector.store(frame.vector, Ordering::Relaxed);
        kcb.fault.instruction_pointer.store(frame.rip, Ordering::Relaxed);
        kcb.fault.error_code.store(frame.error_code, Ordering::Relaxed);
        kcb.fault.fault_address.store(fault_address, Ordering::Relaxed);
    }
    stop_this_core()
}

/// Drops the shared locks this core holds (the console, the boot driver's trampoline), so a
/// core that dies inside a locked section takes no other core down with it.
pub fn release_shared_locks() {
    if let Some(region) = shared::region() {
        let me = shared::this_core();
        region.header.console_lock.release_if_held_by(me);
        region.header.boot_driver_lock.release_if_held_by(me);
        region.header.role_lock.release_if_held_by(me);
    }
}

/// The end of a core that faulted or panicked (its report printed): a message it was handling
/// is counted lost, its KCB says faulted (which every waiting sender and receiver checks), and
/// it halts. Core 0 runs init and owns the console, so its end is the end of the run:
/// QEMU exits with [`CORE_0_FAILED_STATUS`] instead of leaving a machine that says nothing.
pub fn stop_this_core() -> ! {
    let core = shared::this_core();
    if let Some(region) = shared::region() {
        let hooks = HOOKS.get();
        if let Some(hooks) = hooks {
            (hooks.core_ending)();
        }
        region.kcb(core as usize).set_state(CoreState::Faulted);
        // A parked core gives its host's processor back instead of halting it.
        if let Some(hooks) = hooks {
            (hooks.core_ended)();
        }
    }
    if core == 0 {
        crate::arch::legacy::qemu_exit(CORE_0_FAILED_STATUS);
    }
    cpu::halt_forever()
}
