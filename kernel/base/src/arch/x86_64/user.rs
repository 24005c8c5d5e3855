//! Ring 3: the SYSCALL entry and its return, the first entry of a new thread, the switch
//! between kernel stacks, FPU and TLS state, and copies to and from user memory that turn a
//! bad pointer into an error instead of a kernel fault.

use super::cpu::{cpuid, read_msr, write_msr};
use super::gdt::{KERNEL_CODE, SYSRET_BASE, USER_CODE, USER_DATA};
use super::idt::InterruptFrame;
use super::stacks::ThreadStack;
use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// What serves a system call: registered at instance entry by `boot` (private .data: every
/// instance registers its own), so this layer names no service.
static SYSTEM_CALL_HANDLER: spin::Once<fn(&mut InterruptFrame)> = spin::Once::new();

/// Registers what serves system calls on this instance; the first registration holds.
pub fn set_system_call_handler(handler: fn(&mut InterruptFrame)) {
    SYSTEM_CALL_HANDLER.call_once(|| handler);
}

/// Called by the SYSCALL entry with the thread's saved user frame: hands it to the handler
/// `boot` registered.
extern "C" fn system_call_entry(frame: &mut InterruptFrame) {
    match SYSTEM_CALL_HANDLER.get() {
        Some(handler) => handler(frame),
        None => panic!("a system call before its handler was registered"),
    }
}

/// Lowest address that is not user space: user pointers must end at or below it.
pub const USER_END: u64 = 0x0000_8000_0000_0000;

const MSR_EFER: u32 = 0xC000_0080;
const MSR_STAR: u32 = 0xC000_0081;
const MSR_LSTAR: u32 = 0xC000_0082;
const MSR_FMASK: u32 = 0xC000_0084;
const MSR_FS_BASE: u32 = 0xC000_0100;

/// RFLAGS bits the SYSCALL entry clears: IF, TF, DF, AC, NT [SDM vol3 §5.8.8].
const SYSCALL_MASKED_FLAGS: u64 = (1 << 9) | (1 << 8) | (1 << 10) | (1 << 18) | (1 << 14);

/// Kernel stack top of the thread running on this core: where SYSCALL switches to (the TSS
/// holds the same value for interrupts). Private .bss: every instance has its own.
pub static SYSCALL_STACK_TOP: AtomicU64 = AtomicU64::new(0);
/// Where the SYSCALL entry parks the user stack pointer for the few instructions before it
/// is pushed (interrupts are masked there).
static SYSCALL_USER_RSP: AtomicU64 = AtomicU64::new(0);
/// Whether this core runs with SMAP on (then STAC/CLAC exist and matter).
pub static SMAP_ENABLED: AtomicBool = AtomicBool::new(false);
/// The MXCSR bits this CPU supports (`MXCSR_MASK` of an FXSAVE image): setting any other
/// with FXRSTOR is a #GP [SDM vol1 §11.6.6].
static MXCSR_MASK: AtomicU32 = AtomicU32::new(0xFFBF);
/// The `vector` of a system call's frame that must return by IRETQ (see [`return_by_iret`]).
const VECTOR_RETURN_BY_IRET: u64 = super::idt::VECTOR_SYSCALL + 1;

// The SYSCALL entry builds the same frame as an interrupt from ring 3, so a system call, a
// fault and a preemption all leave a thread's user state in one shape, and fork, clone and
// exec can edit it. It returns with SYSRET when the saved RIP is canonical (the kernel
// checks; SYSRET to a non-canonical RIP would fault in ring 0), else with IRETQ.
global_asm!(
    r#"
    .section .text.syscall, "ax"
    .global syscall_entry
    syscall_entry:
        mov [rip + {user_rsp}], rsp
        mov rsp, [rip + {stack_top}]
        push {user_data}
        push qword ptr [rip + {user_rsp}]
        push r11
        push {user_code}
        push rcx
        push 0
        push {vector}
        push rax
        push rbx
        push rcx
        push rdx
        push rsi
        push rdi
        push rbp
        push r8
        push r9
        push r10
        push r11
        push r12
        push r13
        push r14
        push r15
        mov rdi, rsp
        call {dispatch}
        // A frame the kernel rewrote whole (rt_sigreturn) must come back with every register,
        // rcx and r11 included, which SYSRET would clobber.
        cmp qword ptr [rsp + 15 * 8], {vector}
        jne interrupt_return
        pop r15
        pop r14
        pop r13
        pop r12
        pop r11
        pop r10
        pop r9
        pop r8
        pop rbp
        pop rdi
        pop rsi
        pop rdx
        pop rcx
        pop rbx
        pop rax
        add rsp, 16
        // [rsp] rip, +8 cs, +16 rflags, +24 rsp, +32 ss
        cli
        mov rcx, [rsp]
        mov r11, rcx
        shl r11, 16
        sar r11, 16
        cmp r11, rcx
        jne 2f
        mov r11, [rsp + 16]
        mov rsp, [rsp + 24]
        sysretq
    2:
        iretq

    // A new thread's first switch returns here, with its user frame at the stack pointer.
    .global thread_first_entry
    thread_first_entry:
        mov rdi, rsp
        call {started}
        jmp interrupt_return

    // switch_stacks(save: *mut u64 [rdi], load: u64 [rsi]): saves the callee-saved registers
    // on the current stack and its pointer in *save, then resumes the stack at `load`.
    .global switch_stacks
    switch_stacks:
        push rbp
        push rbx
        push r12
        push r13
        push r14
        push r15
        mov [rdi], rsp
        mov rsp, rsi
        pop r15
        pop r14
        pop r13
        pop r12
        pop rbx
        pop rbp
        ret

    // copy_with_fixup(destination [rdi], source [rsi], length [rdx]) -> bytes not copied.
    // A page fault between copy_start and copy_end resumes at copy_fault (see
    // `fault_fixup`), with rcx holding what is left.
    .global copy_with_fixup
    copy_with_fixup:
        mov rcx, rdx
        test byte ptr [rip + {smap}], 1
        jz 1f
        stac
    1:
    .global user_copy_start
    user_copy_start:
        rep movsb
    .global user_copy_end
    user_copy_end:
    .global user_copy_fault
    user_copy_fault:
        test byte ptr [rip + {smap}], 1
        jz 3f
        clac
    3:
        mov rax, rcx
        ret
    "#,
    user_rsp = sym SYSCALL_USER_RSP,
    stack_top = sym SYSCALL_STACK_TOP,
    user_data = const USER_DATA as u64,
    user_code = const USER_CODE as u64,
    vector = const super::idt::VECTOR_SYSCALL,
    dispatch = sym system_call_entry,
    started = sym thread_start,
    smap = sym SMAP_ENABLED,
);

/// The scheduler's first code of a new thread (`sched::on_thread_start`), set by `sched::init`.
static THREAD_START: spin::Once<fn(&mut InterruptFrame)> = spin::Once::new();

/// Registers what a new thread runs first, on its own stack, before it enters ring 3.
pub fn register_thread_start(start: fn(&mut InterruptFrame)) {
    THREAD_START.call_once(|| start);
}

/// Called by `thread_first_entry` with the new thread's user frame.
extern "C" fn thread_start(frame: &mut InterruptFrame) {
    let start = THREAD_START.get().expect("sched::init registers the thread start before any thread is made");
    start(frame);
}

// kernel_load_probe(address [rdi]) -> 0 if a plain kernel load of the byte worked, 1 if it
// faulted: the SMAP test's access to a user page outside the copy routines, in test images only.
#[cfg(feature = "test-hooks")]
global_asm!(
    r#"
    .global kernel_load_probe
    kernel_load_probe:
        xor eax, eax
    .global kernel_load_probe_load
    kernel_load_probe_load:
        mov cl, byte ptr [rdi]
        ret
    .global kernel_load_probe_fault
    kernel_load_probe_fault:
        mov eax, 1
        ret
    "#
);

#[cfg(feature = "test-hooks")]
extern "C" {
    fn kernel_load_probe(address: u64) -> u64;
    static kernel_load_probe_load: u8;
    static kernel_load_probe_fault: u8;
}

extern "C" {
    fn syscall_entry();
    fn thread_first_entry();
    fn switch_stacks(save: *mut u64, load: u64);
    fn copy_with_fixup(destination: *mut u8, source: *const u8, length: usize) -> usize;
    static user_copy_start: u8;
    static user_copy_end: u8;
    static user_copy_fault: u8;
}

/// What this core's CPU offers for running user code safely.
#[derive(Clone, Copy, Debug)]
pub struct UserFeatures {
    pub smep: bool,
    pub smap: bool,
    pub rdrand: bool,
}

// What CPUID said at instance entry (private .bss): a world switch loads the processor state
// again without asking CPUID, which is a VM exit under a hypervisor.
static FEATURES: spin::Once<UserFeatures> = spin::Once::new();

/// Loads the control-register bits and system-call MSRs ring 3 needs into this processor
/// again, after a world switch brought this instance onto a processor another instance
/// (perhaps another image, with its `syscall_entry` elsewhere) ran.
pub fn reload_processor_state() {
    if let Some(features) = FEATURES.get() {
        load_processor_state(features);
    }
}

fn load_processor_state(features: &UserFeatures) {
    // SAFETY: CR0/CR4 bits set here only enable features CPUID reported: MP and no EM with
    // OSFXSR/OSXMMEXCPT for SSE [SDM vol3 §13.1], SMEP (bit 20) and SMAP (bit 21); the MSRs
    // exist on every x86-64 CPU; LSTAR points at this image's entry.
    unsafe {
        let mut cr0: u64;
        asm!("mov {}, cr0", out(reg) cr0, options(nomem, nostack, preserves_flags));
        cr0 = (cr0 & !(1 << 2)) | (1 << 1);
        asm!("mov cr0, {}", in(reg) cr0, options(nostack, preserves_flags));
        let mut cr4: u64;
        asm!("mov {}, cr4", out(reg) cr4, options(nomem, nostack, preserves_flags));
        cr4 |= (1 << 9) | (1 << 10);
        if features.smep {
            cr4 |= 1 << 20;
        }
        if features.smap {
            cr4 |= 1 << 21;
        }
        asm!("mov cr4, {}", in(reg) cr4, options(nostack, preserves_flags));
        write_msr(MSR_EFER, read_msr(MSR_EFER) | 1);
        write_msr(MSR_STAR, (u64::from(SYSRET_BASE) << 48) | (u64::from(KERNEL_CODE) << 32));
        write_msr(MSR_LSTAR, syscall_entry as *const () as u64);
        write_msr(MSR_FMASK, SYSCALL_MASKED_FLAGS);
    }
}

/// Sets up this core for ring 3: SSE state (user code uses XMM registers), SYSCALL, and SMEP
/// and SMAP where the CPU has them (the kernel never runs or reads user pages by accident).
pub fn init() -> UserFeatures {
    let leaf7 = cpuid(7, 0);
    let features = *FEATURES.call_once(|| UserFeatures {
        smep: leaf7.ebx & (1 << 7) != 0,
        smap: leaf7.ebx & (1 << 20) != 0,
        rdrand: cpuid(1, 0).ecx & (1 << 30) != 0,
    });
    load_processor_state(&features);
    // SAFETY: FNINIT only resets the x87 state, which no kernel code uses.
    unsafe { asm!("fninit", options(nomem, nostack)) };
    SMAP_ENABLED.store(features.smap, Ordering::Relaxed);
    // On the heap: FXSAVE needs 16-byte alignment, which an application core's boot stack
    // does not promise here.
    let mut probe = alloc::boxed::Box::new(FpuState::initial());
    probe.save();
    // A zero mask means the CPU predates the field: the default mask applies [SDM vol1 §11.6.6].
    let mask = u32::from_le_bytes([probe.0[28], probe.0[29], probe.0[30], probe.0[31]]);
    MXCSR_MASK.store(if mask == 0 { 0xFFBF } else { mask }, Ordering::Relaxed);
    features
}

/// Makes the system call whose saved frame this is return by IRETQ, restoring every register
/// of `frame` (SYSRET would load rcx and r11 with the return address and flags): for
/// `rt_sigreturn`, which reloads a whole interrupted context.
pub fn return_by_iret(frame: &mut InterruptFrame) {
    if frame.vector == super::idt::VECTOR_SYSCALL {
        frame.vector = VECTOR_RETURN_BY_IRET;
    }
}

/// The user frame a new thread starts from: at `entry` with stack `stack`, interrupts on.
pub fn initial_frame(entry: u64, stack: u64) -> InterruptFrame {
    InterruptFrame {
        rip: entry,
        cs: u64::from(USER_CODE),
        rflags: 1 << 9 | 1 << 1,
        rsp: stack,
        ss: u64::from(USER_DATA),
        ..InterruptFrame::default()
    }
}

/// Callee-saved registers `switch_stacks` pops, then its return address.
const SWITCH_WORDS: usize = 7;

/// Prepares a new thread's kernel stack (`top`, 16-byte aligned) so that the first switch to
/// it enters ring 3 with `frame`; returns the stack pointer to switch to.
///
/// # Safety
/// `[top - 4 KiB, top)` must be mapped, writable, and used by nothing else.
pub unsafe fn prepare_thread_stack(top: u64, frame: &InterruptFrame) -> u64 {
    let frame_address = top - core::mem::size_of::<InterruptFrame>() as u64;
    let switch_address = frame_address - (SWITCH_WORDS * 8) as u64;
    // SAFETY: both writes land inside the stack's top page, per the caller.
    unsafe {
        (frame_address as *mut InterruptFrame).write(*frame);
        let words = switch_address as *mut u64;
        for i in 0..SWITCH_WORDS - 1 {
            words.add(i).write(0);
        }
        words.add(SWITCH_WORDS - 1).write(thread_first_entry as *const () as u64);
    }
    switch_address
}

/// Switches from the current kernel stack to another thread's: saves this one's stack pointer
/// in `*save` and resumes the one at `load`; returns when some core switches back to `*save`.
///
/// # Safety
/// `load` must come from [`prepare_thread_stack`] or from an earlier `switch` of a thread that
/// is not running; interrupts must be masked.
pub unsafe fn switch(save: *mut u64, load: u64) {
    // SAFETY: guaranteed by the caller.
    unsafe { switch_stacks(save, load) }
}

// The stack pointer of the thread that runs a side stack, saved while the side stack runs
// (0: none runs). Private .data: every instance has its own.
static SIDE_RETURN: AtomicU64 = AtomicU64::new(0);

/// Runs ring 3 with `frame` on `stack` (an application core's guest thread: its own kernel
/// stack for its traps) until code on that stack calls [`leave_side_stack`]; then returns, on
/// the caller's stack. Interrupts must be masked (checked), and stay so until ring 3; one side
/// stack runs at a time (checked).
pub fn run_on_side_stack(stack: &mut ThreadStack, frame: &InterruptFrame) {
    assert!(!super::cpu::interrupts_enabled(), "a side stack is entered with interrupts masked");
    assert!(SIDE_RETURN.load(Ordering::Relaxed) == 0, "one side stack at a time");
    // SAFETY: a `ThreadStack` is its slot's alone (the slot table hands it out once) and its
    // pages are mapped writable; the `&mut` borrow keeps every other use off it until this
    // returns, which is after the side stack was left for good.
    let stack_pointer = unsafe { prepare_thread_stack(stack.top(), frame) };
    super::gdt::set_kernel_stack(stack.top());
    SYSCALL_STACK_TOP.store(stack.top(), Ordering::Relaxed);
    // SAFETY: interrupts are masked (checked); `stack_pointer` comes from
    // `prepare_thread_stack`; the caller's stack pointer is saved where `leave_side_stack`
    // finds it, and no other side stack runs (checked).
    unsafe { switch(SIDE_RETURN.as_ptr(), stack_pointer) };
    SIDE_RETURN.store(0, Ordering::Relaxed);
}

/// Leaves the side stack [`run_on_side_stack`] runs, for good: back to the thread that entered
/// it. Called from the side stack's own code (a trap of its ring-3 thread).
pub fn leave_side_stack() -> ! {
    super::cpu::disable_interrupts();
    let back = SIDE_RETURN.load(Ordering::Relaxed);
    assert!(back != 0, "no side stack runs");
    let mut abandoned = 0u64;
    // SAFETY: interrupts are masked; `back` was saved by the switch in `run_on_side_stack`,
    // whose thread waits there (a side stack runs, so its entering thread does not), and this
    // stack is never resumed (its owner drops or reuses it once the entering thread runs).
    unsafe { switch(&raw mut abandoned, back) };
    unreachable!("a side stack that was left was resumed")
}

/// 512-byte FXSAVE area [SDM vol1 §10.5.1].
#[repr(C, align(16))]
#[derive(Clone)]
pub struct FpuState(pub [u8; 512]);

impl FpuState {
    /// The state of a fresh thread: FNINIT defaults, MXCSR 0x1F80 (all exceptions masked).
    pub fn initial() -> Self {
        let mut state = Self([0; 512]);
        state.0[0..2].copy_from_slice(&0x037Fu16.to_le_bytes());
        state.0[24..28].copy_from_slice(&0x1F80u32.to_le_bytes());
        state.0[28..32].copy_from_slice(&0xFFFFu32.to_le_bytes());
        state
    }

    /// Saves this core's x87/SSE registers here.
    pub fn save(&mut self) {
        // SAFETY: FXSAVE64 writes 512 bytes at a 16-byte aligned address: `self`.
        unsafe { asm!("fxsave64 [{}]", in(reg) self.0.as_mut_ptr(), options(nostack, preserves_flags)) };
    }

    /// Clears the MXCSR bits this CPU does not support, so an image from user memory
    /// (a signal frame) cannot make FXRSTOR fault in the kernel.
    pub fn sanitize(&mut self) {
        let mxcsr = u32::from_le_bytes([self.0[24], self.0[25], self.0[26], self.0[27]]);
        let allowed = MXCSR_MASK.load(Ordering::Relaxed);
        self.0[24..28].copy_from_slice(&(mxcsr & allowed).to_le_bytes());
    }

    /// Loads this core's x87/SSE registers from here.
    pub fn restore(&self) {
        // SAFETY: FXRSTOR64 reads 512 aligned bytes; reserved MXCSR bits are never set
        // (`initial` and FXSAVE write valid images only).
        unsafe { asm!("fxrstor64 [{}]", in(reg) self.0.as_ptr(), options(nostack, preserves_flags)) };
    }
}

/// Sets the FS base (user TLS, from `arch_prctl(ARCH_SET_FS)`).
#[inline]
pub fn set_fs_base(value: u64) {
    // SAFETY: FS_BASE takes any canonical address; callers check canonicality.
    unsafe { write_msr(MSR_FS_BASE, value) };
}

/// Whether `[address, address + length)` lies wholly in user space.
#[inline]
pub fn is_user_range(address: u64, length: u64) -> bool {
    address.checked_add(length).is_some_and(|end| end <= USER_END)
}

/// A user access that touched an unmapped or forbidden page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadAddress;

/// Copies `destination.len()` bytes from user address `source`.
#[inline]
pub fn copy_from_user(destination: &mut [u8], source: u64) -> Result<(), BadAddress> {
    if !is_user_range(source, destination.len() as u64) {
        return Err(BadAddress);
    }
    // SAFETY: the source range is user space (checked); a fault inside the copy resumes at
    // its fixup and is reported as bytes left; the destination is a kernel buffer.
    let left = unsafe { copy_with_fixup(destination.as_mut_ptr(), source as *const u8, destination.len()) };
    if left == 0 {
        Ok(())
    } else {
        Err(BadAddress)
    }
}

/// Copies `source` to user address `destination`.
#[inline]
pub fn copy_to_user(destination: u64, source: &[u8]) -> Result<(), BadAddress> {
    if !is_user_range(destination, source.len() as u64) {
        return Err(BadAddress);
    }
    // SAFETY: as in `copy_from_user`, the other way round.
    let left = unsafe { copy_with_fixup(destination as *mut u8, source.as_ptr(), source.len()) };
    if left == 0 {
        Ok(())
    } else {
        Err(BadAddress)
    }
}

/// Where a fault at `rip` inside the user-copy routine resumes, or `None` if `rip` is not in it.
pub fn fault_fixup(rip: u64) -> Option<u64> {
    let start = &raw const user_copy_start as u64;
    let end = &raw const user_copy_end as u64;
    (start..=end).contains(&rip).then_some(&raw const user_copy_fault as u64)
}

/// Whether a plain kernel load (outside the copy routines) of `address` faults. With SMAP on
/// and `address` a present user page, it must.
#[cfg(feature = "test-hooks")]
pub fn kernel_load_faults(address: u64) -> bool {
    // SAFETY: the probe only reads one byte; a fault at its load resumes at its own fixup
    // (see `probe_fixup`), which returns 1.
    unsafe { kernel_load_probe(address) == 1 }
}

/// Where a fault of the load probe resumes, if `rip` is its load.
#[cfg(feature = "test-hooks")]
pub fn probe_fixup(rip: u64) -> Option<u64> {
    (rip == &raw const kernel_load_probe_load as u64).then_some(&raw const kernel_load_probe_fault as u64)
}
