//! Processor instructions the rest of the kernel calls by name: TSC, CPUID, MSRs, port I/O, halt.

use core::arch::asm;
use core::sync::atomic::{compiler_fence, Ordering};

/// Reads the time-stamp counter [SDM vol3 §17.17]. Not serialising: fine for interval timing.
#[inline(always)]
pub fn read_tsc() -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: RDTSC only reads a counter; CR4.TSD is clear in ring 0.
    unsafe { asm!("rdtsc", out("eax") low, out("edx") high, options(nomem, nostack, preserves_flags)) };
    (u64::from(high) << 32) | u64::from(low)
}

/// The four registers CPUID returns.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // every leaf defines its own registers; callers read the ones they need
pub struct Cpuid {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
}

/// Executes CPUID for `leaf`/`subleaf`.
pub fn cpuid(leaf: u32, subleaf: u32) -> Cpuid {
    let (eax, ebx, ecx, edx): (u32, u32, u32, u32);
    // SAFETY: CPUID has no side effects; RBX is reserved by LLVM, so it is saved in a scratch register.
    unsafe {
        asm!(
            "mov {scratch:r}, rbx",
            "cpuid",
            "xchg {scratch:r}, rbx",
            scratch = out(reg) ebx,
            inout("eax") leaf => eax,
            inout("ecx") subleaf => ecx,
            out("edx") edx,
            options(nomem, nostack, preserves_flags),
        )
    };
    Cpuid { eax, ebx, ecx, edx }
}

/// Reads a model-specific register.
///
/// # Safety
/// `msr` must exist on this processor; reading some MSRs has side effects.
pub unsafe fn read_msr(msr: u32) -> u64 {
    let (low, high): (u32, u32);
    // SAFETY: the caller guarantees the MSR exists.
    unsafe { asm!("rdmsr", in("ecx") msr, out("eax") low, out("edx") high, options(nomem, nostack, preserves_flags)) };
    (u64::from(high) << 32) | u64::from(low)
}

/// Writes a model-specific register.
///
/// # Safety
/// `msr` must exist and `value` must be valid for it; MSR writes change processor behaviour.
pub unsafe fn write_msr(msr: u32, value: u64) {
    // SAFETY: the caller guarantees the MSR and value are valid.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32, options(nostack, preserves_flags))
    };
}

/// Writes a byte to an I/O port.
///
/// # Safety
/// The port must belong to a device this code drives; writes have device side effects.
pub unsafe fn write_port_u8(port: u16, value: u8) {
    // SAFETY: the caller owns the port.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags)) };
}

/// Reads a byte from an I/O port.
///
/// # Safety
/// The port must belong to a device this code drives; reads can have device side effects.
pub unsafe fn read_port_u8(port: u16) -> u8 {
    let value: u8;
    // SAFETY: the caller owns the port.
    unsafe { asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack, preserves_flags)) };
    value
}

/// Writes a 32-bit value to an I/O port.
///
/// # Safety
/// The port must belong to a device this code drives.
pub unsafe fn write_port_u32(port: u16, value: u32) {
    // SAFETY: the caller owns the port.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack, preserves_flags)) };
}

/// Enables interrupts and halts until the next one, with no window between the two
/// (STI's one-instruction shadow covers HLT [SDM vol2 STI]).
#[inline(always)]
pub fn wait_for_interrupt() {
    // SAFETY: the IDT of this core is loaded before interrupts are first enabled.
    unsafe { asm!("sti; hlt", options(nomem, nostack)) };
}

/// Disables interrupts on this core.
#[inline(always)]
pub fn disable_interrupts() {
    // SAFETY: masking interrupts cannot break memory safety.
    unsafe { asm!("cli", options(nomem, nostack)) };
}

/// Enables interrupts on this core.
#[inline(always)]
pub fn enable_interrupts() {
    // SAFETY: the IDT of this core is loaded before interrupts are first enabled.
    unsafe { asm!("sti", options(nomem, nostack)) };
}

/// Whether interrupts are enabled (RFLAGS.IF).
#[inline]
pub fn interrupts_enabled() -> bool {
    let flags: u64;
    // SAFETY: reading RFLAGS through the stack has no other effect.
    unsafe { asm!("pushfq; pop {}", out(reg) flags, options(nomem, preserves_flags)) };
    flags & (1 << 9) != 0
}

/// Runs `work` with interrupts masked on this core, then restores them as they were. The
/// compiler fences keep `work`'s memory and device accesses between `cli` and the restore
/// (`cli`/`sti` are `nomem` asm, which the compiler may otherwise move accesses across).
#[inline]
pub fn without_interrupts<T>(work: impl FnOnce() -> T) -> T {
    let were_enabled = interrupts_enabled();
    disable_interrupts();
    compiler_fence(Ordering::SeqCst);
    let result = work();
    compiler_fence(Ordering::SeqCst);
    if were_enabled {
        enable_interrupts();
    }
    result
}

/// Whether INIT must be followed by the 10 ms wait of the MultiProcessor Specification before
/// the STARTUP IPI. Processors since Intel's family 6 and AMD's family 15 need none, and
/// Linux skips it for them too (`smp_quirk_init_udelay`); the wait would be most of a core
/// start.
pub fn needs_init_delay() -> bool {
    let vendor = cpuid(0, 0);
    let family = {
        let signature = cpuid(1, 0).eax;
        let base = (signature >> 8) & 0xF;
        if base == 0xF {
            base + ((signature >> 20) & 0xFF)
        } else {
            base
        }
    };
    let intel = (vendor.ebx, vendor.edx, vendor.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e);
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    let hygon = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6f67_7948, 0x6e65_476e, 0x656e_6975);
    !((intel && family == 6) || (amd && family >= 0xF) || (hygon && family >= 0x18))
}

/// Stops this core for good: interrupts off, halt forever.
pub fn halt_forever() -> ! {
    loop {
        // SAFETY: with interrupts masked the core sleeps until INIT or NMI.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) };
    }
}

/// Resets the whole machine by a triple fault: with an empty IDT, the breakpoint exception
/// cannot be delivered, nor can the double fault that follows, and the CPU shuts down, which
/// the platform turns into a reset of every core [SDM vol3 §6.15, "Interrupt 8—Double Fault
/// Exception"]. QEMU boots the kernel again unless it was started with `-no-reboot`.
pub fn reset_machine() -> ! {
    #[repr(C, packed)]
    struct Pointer {
        limit: u16,
        base: u64,
    }
    let empty = Pointer { limit: 0, base: 0 };
    // SAFETY: nothing of this kernel runs after the reset; the IDT is only made unusable so
    // that the `int3` that follows ends in a triple fault, which is the point.
    unsafe { asm!("cli", "lidt [{}]", "int3", in(reg) &empty, options(readonly, nostack)) };
    halt_forever()
}

/// Reads CR2, the faulting linear address of the last page fault.
pub fn read_cr2() -> u64 {
    let value: u64;
    // SAFETY: reading CR2 has no side effect.
    unsafe { asm!("mov {}, cr2", out(reg) value, options(nomem, nostack, preserves_flags)) };
    value
}

/// The CPU's MONITOR/MWAIT support (CPUID.1:ECX[3]).
pub fn has_monitor_mwait() -> bool {
    cpuid(1, 0).ecx & (1 << 3) != 0
}

// Whether `relax` executes PAUSE on this core (private .data: set at instance entry).
static PAUSE_IN_SPINS: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(true);

/// Chooses whether spin loops on this core execute PAUSE.
pub fn set_pause_in_spins(pause: bool) {
    PAUSE_IN_SPINS.store(pause, Ordering::Relaxed);
}

/// Spin-loop hint: PAUSE on hardware and KVM; nothing under TCG, which emulates PAUSE by
/// leaving translated code for its main loop, a microsecond-scale detour that would dominate
/// every polled channel.
#[inline(always)]
pub fn relax() {
    if PAUSE_IN_SPINS.load(Ordering::Relaxed) {
        core::hint::spin_loop();
    }
}

/// The hypervisor's CPUID signature (leaf 0x4000_0000), if CPUID says there is one.
pub fn hypervisor_signature() -> Option<[u8; 12]> {
    if cpuid(1, 0).ecx & (1 << 31) == 0 {
        return None;
    }
    let leaf = cpuid(0x4000_0000, 0);
    let mut signature = [0u8; 12];
    signature[0..4].copy_from_slice(&leaf.ebx.to_le_bytes());
    signature[4..8].copy_from_slice(&leaf.ecx.to_le_bytes());
    signature[8..12].copy_from_slice(&leaf.edx.to_le_bytes());
    Some(signature)
}

/// Whether this is QEMU's binary translator (signature "TCGTCGTCGTCG").
pub fn running_under_tcg() -> bool {
    hypervisor_signature() == Some(*b"TCGTCGTCGTCG")
}

/// Writes a zero to `address` with a plain store, outside Rust's memory model: the fault
/// test uses it to take a real page fault on an unmapped address. Fault injection: only
/// images built with `test-hooks` call it (`cargo xtask check` finds it in no other).
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code, reason = "fault injection, in test images only"))]
pub fn store_to_unmapped_address(address: u64) {
    // SAFETY: the store is expected to fault; the fault handler stops this core and never
    // returns here, so no Rust invariant can observe the write.
    unsafe { asm!("mov qword ptr [{}], 0", in(reg) address, options(nostack)) };
}

/// Arms MONITOR on the cache line holding `address` [SDM vol2 MONITOR].
///
/// # Safety
/// MONITOR/MWAIT must be offered (CPUID.1:ECX[3]) and `address` mapped.
pub unsafe fn monitor(address: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { asm!("monitor", in("rax") address, in("ecx") 0u32, in("edx") 0u32, options(nostack, preserves_flags)) };
}

// Whether this processor offers MONITOR/MWAIT: 0 not asked yet, 1 yes, 2 no (private .data;
// a parked OSnode's instance runs on another processor of the same model).
static MWAIT_OFFERED: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);

/// Waits until the monitored line is written or an interrupt arrives; interrupts are
/// enabled first so one that arrives also wakes it. Without MONITOR armed just before, MWAIT
/// returns at once [SDM vol2 MWAIT]; on a processor without MWAIT this halts instead.
pub fn enable_interrupts_and_mwait() {
    let offered = match MWAIT_OFFERED.load(Ordering::Relaxed) {
        0 => {
            let offered = has_monitor_mwait();
            MWAIT_OFFERED.store(if offered { 1 } else { 2 }, Ordering::Relaxed);
            offered
        }
        known => known == 1,
    };
    if !offered {
        wait_for_interrupt();
        return;
    }
    // SAFETY: MWAIT is offered (checked). ECX is 0: no extensions (bit 0, "interrupts break
    // MWAIT even when masked", is a #GP where CPUID.5:ECX[1] lacks it, as under QEMU's
    // `-cpu max`); STI's shadow covers MWAIT, so interrupts are on while it waits and wake it.
    unsafe { asm!("sti", "mwait", in("eax") 0u32, in("ecx") 0u32, options(nostack)) };
}

/// A hardware random number (RDRAND), if the CPU offers it and delivers within 10 tries.
pub fn rdrand() -> Option<u64> {
    static CHECKED: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);
    let offered = match CHECKED.load(Ordering::Relaxed) {
        0 => {
            let has = cpuid(1, 0).ecx & (1 << 30) != 0;
            CHECKED.store(if has { 1 } else { 2 }, Ordering::Relaxed);
            has
        }
        value => value == 1,
    };
    if !offered {
        return None;
    }
    for _ in 0..10 {
        let (value, ok): (u64, u8);
        // SAFETY: RDRAND exists (CPUID.1:ECX[30]); it only writes the register and CF.
        unsafe { asm!("rdrand {}", "setc {}", out(reg) value, out(reg_byte) ok, options(nomem, nostack)) };
        if ok != 0 {
            return Some(value);
        }
    }
    None
}
