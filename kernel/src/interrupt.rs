//! Interrupt and exception dispatch for this instance; an exception stops only this core.

use crate::arch::idt::InterruptFrame;
use crate::arch::{apic, cpu, idt};
use crate::core::kcb::CoreState;
use crate::core::shared;
use core::sync::atomic::Ordering;

fn exception_name(vector: u64) -> &'static str {
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
pub extern "C" fn dispatch(frame: &mut InterruptFrame) {
    match frame.vector {
        0..=31 => fault(frame),
        v if v == u64::from(idt::VECTOR_TIMER) => {
            // The count lives in this core's KCB only; this core is its only writer.
            if let Some(region) = shared::region() {
                let ticks = &region.kcb(shared::this_core() as usize).ticks;
                ticks.store(ticks.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            apic::local().end_of_interrupt();
        }
        v if v == u64::from(idt::VECTOR_MESSAGE) => {
            crate::msg::on_notification();
            apic::local().end_of_interrupt();
        }
        v if v == u64::from(idt::VECTOR_WAKE) => apic::local().end_of_interrupt(),
        v if v == u64::from(idt::VECTOR_CONSOLE) => {
            // Only wakes core 0: the shell reads the bytes once it runs again.
            crate::console::on_input_interrupt();
            apic::local().end_of_interrupt();
        }
        v if v == u64::from(idt::VECTOR_BENCH) => {
            apic::local().end_of_interrupt();
            crate::msg::bench::on_bench_interrupt();
        }
        v if v == u64::from(idt::VECTOR_SPURIOUS) => {}
        // The 8259s are masked at boot: a legacy vector here means a device or the firmware
        // left something enabled, worth a line but no EOI (the LAPIC did not deliver it).
        vector => log::warn!("stray interrupt on vector {vector} ignored: a legacy PIC line is unmasked"),
    }
}

/// Hive-style fault containment: report, mark this core faulted, stop it. Nothing here
/// touches another core's memory, so the others keep running.
fn fault(frame: &InterruptFrame) -> ! {
    let fault_address = if frame.vector == 14 { cpu::read_cr2() } else { 0 };
    crate::console::release_after_fault();
    let core = shared::this_core();
    log::error!(
        "FAULT core {core}: vector {} ({}) rip={:#x} error={:#x} cr2={:#x} rsp={:#x}; core {core} stopped, other cores continue",
        frame.vector,
        exception_name(frame.vector),
        frame.rip,
        frame.error_code,
        fault_address,
        frame.rsp,
    );
    if let Some(region) = shared::region() {
        let kcb = region.kcb(core as usize);
        kcb.fault.vector.store(frame.vector, Ordering::Relaxed);
        kcb.fault.instruction_pointer.store(frame.rip, Ordering::Relaxed);
        kcb.fault.error_code.store(frame.error_code, Ordering::Relaxed);
        kcb.fault.fault_address.store(fault_address, Ordering::Relaxed);
        kcb.set_state(CoreState::Faulted);
    }
    cpu::halt_forever()
}
