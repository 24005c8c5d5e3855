//! The spin-loop hint of the polling benchmarks: PAUSE, except under QEMU's TCG.

use std::hint::spin_loop;
use std::sync::OnceLock;

/// Whether spin loops execute PAUSE: decided once, on first use.
static PAUSE: OnceLock<bool> = OnceLock::new();

/// Whether the CPU is QEMU's TCG: the hypervisor bit (CPUID.1:ECX[31]) is set and leaf
/// 0x4000_0000 names "TCGTCGTCGTCG", as Reef's `cpu::running_under_tcg` checks.
pub fn running_under_tcg() -> bool {
    use std::arch::x86_64::__cpuid;
    if __cpuid(1).ecx & (1 << 31) == 0 {
        return false;
    }
    let leaf = __cpuid(0x4000_0000);
    let mut signature = [0u8; 12];
    for (chunk, register) in signature.chunks_exact_mut(4).zip([leaf.ebx, leaf.ecx, leaf.edx]) {
        chunk.copy_from_slice(&register.to_le_bytes());
    }
    &signature == b"TCGTCGTCGTCG"
}

/// The spin-loop hint, as Reef's kernels spin: PAUSE on hardware and KVM, nothing under
/// TCG, which emulates PAUSE by leaving translated code for its main loop (a detour of about
/// a microsecond that would dominate every polled round trip, on one side of the comparison
/// only).
#[inline(always)]
pub fn relax() {
    if *PAUSE.get_or_init(|| !running_under_tcg()) {
        spin_loop();
    }
}
