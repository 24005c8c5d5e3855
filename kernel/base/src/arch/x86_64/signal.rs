//! Linux x86-64 signal frames: built for a handler, read back at return.
//!
//! The layout is Linux's [Linux arch/x86/kernel/signal.c, arch/x86/include/asm/sigframe.h,
//! arch/x86/include/uapi/asm/sigcontext.h, include/uapi/asm-generic/ucontext.h], so musl's
//! and glibc's `__restore_rt` (which only calls `rt_sigreturn`) and programs that read the
//! `ucontext_t` a handler gets find every field where Linux puts it. The state is x87/SSE
//! only: an FXSAVE image, as Linux writes when the CPU has no XSAVE.

use super::gdt::{USER_CODE, USER_DATA};
use super::idt::InterruptFrame;
use super::user::{copy_from_user, copy_to_user, BadAddress, FpuState, USER_END};

/// Bytes Linux leaves below the interrupted stack pointer before the frame: the System V
/// red zone, which the interrupted function may be using.
const RED_ZONE: u64 = 128;
/// The FXSAVE image's size and the alignment Linux gives it.
const FPU_SIZE: u64 = 512;
const FPU_ALIGNMENT: u64 = 64;

/// `struct siginfo`: 128 bytes.
pub const SIGINFO_SIZE: usize = 128;
/// `struct sigcontext` (64-bit).
const SIGCONTEXT_SIZE: usize = 256;
/// `struct ucontext`: flags, link, `stack_t` (24 bytes), the sigcontext, the signal mask.
const UCONTEXT_SIZE: usize = 8 + 8 + 24 + SIGCONTEXT_SIZE + 8;
/// `struct rt_sigframe`: the return address (`pretcode`), the ucontext, the siginfo.
pub const FRAME_SIZE: usize = 8 + UCONTEXT_SIZE + SIGINFO_SIZE;

/// Offsets in the frame.
const UCONTEXT_AT: usize = 8;
const SIGINFO_AT: usize = UCONTEXT_AT + UCONTEXT_SIZE;
/// Offsets in the ucontext.
const UC_STACK_AT: usize = 16;
const UC_MCONTEXT_AT: usize = 40;
const UC_SIGMASK_AT: usize = UC_MCONTEXT_AT + SIGCONTEXT_SIZE;

/// `uc_flags`: `UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS` (the context holds SS, and it is
/// restored as it is), what Linux sets for a 64-bit task.
const UC_FLAGS: u64 = 0x2 | 0x4;

/// RFLAGS bits: TF, DF, RF.
const TRAP_FLAG: u64 = 1 << 8;
const DIRECTION_FLAG: u64 = 1 << 10;
const RESUME_FLAG: u64 = 1 << 16;
/// RFLAGS bits a frame may set on `rt_sigreturn` (`FIX_EFLAGS` of Linux): the arithmetic
/// flags, TF, DF, AC and RF. IOPL, NT, VM, VIF, VIP and IF are not the program's to choose.
const USER_FLAGS: u64 = 0x1 | 0x4 | 0x10 | 0x40 | 0x80 | TRAP_FLAG | DIRECTION_FLAG | 0x800 | RESUME_FLAG | 0x4_0000;
/// IF and the always-one bit 1.
const FIXED_FLAGS: u64 = 0x202;

/// `stack_t` (`sigaltstack`'s argument and `uc_stack`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlternateStack {
    pub base: u64,
    pub flags: u32,
    pub size: u64,
}

impl AlternateStack {
    /// `ss_flags` bits [Linux include/uapi/linux/signal.h].
    pub const ON_STACK: u32 = 1;
    pub const DISABLE: u32 = 2;
    pub const AUTO_DISARM: u32 = 1 << 31;
    /// Bytes of a `stack_t`.
    pub const SIZE: usize = 24;

    /// Reads a `stack_t`.
    pub fn from_bytes(bytes: &[u8; Self::SIZE]) -> Self {
        Self { base: word(bytes, 0), flags: u32_at(bytes, 8), size: word(bytes, 16) }
    }

    /// Writes a `stack_t`.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut bytes = [0; Self::SIZE];
        put(&mut bytes, 0, self.base);
        bytes[8..12].copy_from_slice(&self.flags.to_le_bytes());
        put(&mut bytes, 16, self.size);
        bytes
    }
}

/// The `siginfo` fields Reef fills (the `_kill` and `_sigchld` members of its union).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalInfo {
    pub signal: u32,
    /// `si_code`.
    pub code: i32,
    /// `si_pid`: the sender, or the child for SIGCHLD.
    pub pid: u32,
    pub uid: u32,
    /// `si_status` of SIGCHLD: the exit code or the signal.
    pub status: i32,
}

impl SignalInfo {
    /// The 128 bytes of `struct siginfo` (a handler's frame, `rt_sigtimedwait`).
    pub fn to_bytes(self) -> [u8; SIGINFO_SIZE] {
        let mut bytes = [0; SIGINFO_SIZE];
        bytes[0..4].copy_from_slice(&self.signal.to_le_bytes());
        bytes[8..12].copy_from_slice(&self.code.to_le_bytes());
        bytes[16..20].copy_from_slice(&self.pid.to_le_bytes());
        bytes[20..24].copy_from_slice(&self.uid.to_le_bytes());
        bytes[24..28].copy_from_slice(&self.status.to_le_bytes());
        bytes
    }
}

/// What a handler is entered with.
pub struct HandlerEntry<'a> {
    pub handler: u64,
    /// `sa_restorer`: the handler's return address.
    pub restorer: u64,
    pub info: SignalInfo,
    /// The mask `rt_sigreturn` puts back (the one before delivery).
    pub mask: u64,
    /// The thread's alternate stack as `uc_stack` shows it.
    pub alternate_stack: AlternateStack,
    /// Build the frame below this address (the alternate stack's top) instead of below the
    /// interrupted stack pointer's red zone.
    pub stack_top: Option<u64>,
    /// The interrupted x87/SSE state.
    pub fpu: &'a FpuState,
}

/// Builds the frame on the user stack and points `frame` at the handler: `rdi` the signal,
/// `rsi` the siginfo, `rdx` the ucontext, the stack pointer at the return address with
/// `(rsp + 8) % 16 == 0` as at any function's entry [Linux signal.c `get_sigframe`]. Fails,
/// leaving `frame` as it was, when the stack cannot take the frame.
pub fn enter_handler(frame: &mut InterruptFrame, entry: &HandlerEntry) -> Result<(), BadAddress> {
    let top = entry.stack_top.unwrap_or_else(|| frame.rsp.wrapping_sub(RED_ZONE));
    let fpu_address = top.checked_sub(FPU_SIZE).ok_or(BadAddress)? & !(FPU_ALIGNMENT - 1);
    let frame_address = (fpu_address.checked_sub(FRAME_SIZE as u64).ok_or(BadAddress)? & !15).wrapping_sub(8);
    let mut bytes = [0u8; FRAME_SIZE];
    put(&mut bytes, 0, entry.restorer);
    let ucontext = UCONTEXT_AT;
    put(&mut bytes, ucontext, UC_FLAGS);
    let stack_at = ucontext + UC_STACK_AT;
    bytes[stack_at..stack_at + AlternateStack::SIZE].copy_from_slice(&entry.alternate_stack.to_bytes());
    let context = ucontext + UC_MCONTEXT_AT;
    let registers = [
        frame.r8,
        frame.r9,
        frame.r10,
        frame.r11,
        frame.r12,
        frame.r13,
        frame.r14,
        frame.r15,
        frame.rdi,
        frame.rsi,
        frame.rbp,
        frame.rbx,
        frame.rdx,
        frame.rax,
        frame.rcx,
        frame.rsp,
        frame.rip,
        frame.rflags,
    ];
    for (index, value) in registers.into_iter().enumerate() {
        put(&mut bytes, context + index * 8, value);
    }
    // cs, gs, fs, ss as 16-bit fields, then err, trapno, oldmask, cr2, fpstate.
    bytes[context + 144..context + 146].copy_from_slice(&USER_CODE.to_le_bytes());
    bytes[context + 150..context + 152].copy_from_slice(&USER_DATA.to_le_bytes());
    let trap = if frame.vector < 32 { frame.vector } else { 0 };
    put(&mut bytes, context + 152, frame.error_code);
    put(&mut bytes, context + 160, trap);
    put(&mut bytes, context + 168, entry.mask);
    put(&mut bytes, context + 184, fpu_address);
    put(&mut bytes, ucontext + UC_SIGMASK_AT, entry.mask);
    bytes[SIGINFO_AT..].copy_from_slice(&entry.info.to_bytes());
    copy_to_user(fpu_address, &entry.fpu.0)?;
    copy_to_user(frame_address, &bytes)?;
    frame.rip = entry.handler;
    frame.rsp = frame_address;
    frame.rdi = u64::from(entry.info.signal);
    frame.rsi = frame_address + SIGINFO_AT as u64;
    frame.rdx = frame_address + UCONTEXT_AT as u64;
    frame.rax = 0;
    frame.rflags &= !(TRAP_FLAG | DIRECTION_FLAG | RESUME_FLAG);
    frame.cs = u64::from(USER_CODE);
    frame.ss = u64::from(USER_DATA);
    Ok(())
}

/// What `rt_sigreturn` found in the frame its stack pointer names.
pub struct SavedContext {
    registers: [u64; 18],
    pub mask: u64,
    pub alternate_stack: AlternateStack,
    /// The FXSAVE image, if the frame points at one that could be read.
    pub fpu: Option<FpuState>,
}

impl SavedContext {
    /// The instruction pointer the frame resumes at.
    pub fn rip(&self) -> u64 {
        self.registers[16]
    }
}

/// Reads the frame of `rt_sigreturn`: the handler's `ret` popped the return address, so the
/// frame starts 8 bytes below the stack pointer.
pub fn read_frame(stack_pointer: u64) -> Result<SavedContext, BadAddress> {
    let ucontext_address = stack_pointer.wrapping_sub(8).wrapping_add(UCONTEXT_AT as u64);
    let mut bytes = [0u8; UCONTEXT_SIZE];
    copy_from_user(&mut bytes, ucontext_address)?;
    let context = UC_MCONTEXT_AT;
    let mut registers = [0u64; 18];
    for (index, register) in registers.iter_mut().enumerate() {
        *register = word(&bytes, context + index * 8);
    }
    let stack: &[u8; AlternateStack::SIZE] =
        bytes[UC_STACK_AT..UC_STACK_AT + AlternateStack::SIZE].try_into().map_err(|_| BadAddress)?;
    let fpu_address = word(&bytes, context + 184);
    let fpu = if fpu_address == 0 {
        None
    } else {
        let mut image = FpuState::initial();
        copy_from_user(&mut image.0, fpu_address)?;
        image.sanitize();
        Some(image)
    };
    Ok(SavedContext {
        registers,
        mask: word(&bytes, UC_SIGMASK_AT),
        alternate_stack: AlternateStack::from_bytes(stack),
        fpu,
    })
}

/// Loads the saved registers into `frame`, sanitised: the user selectors, the flags a
/// program may set with IF on, and a user-space instruction pointer (else `Err`, `frame`
/// untouched). The return to ring 3 must then be IRETQ, so rcx and r11 come back too.
pub fn restore(frame: &mut InterruptFrame, saved: &SavedContext) -> Result<(), BadAddress> {
    if saved.rip() >= USER_END {
        return Err(BadAddress);
    }
    let r = &saved.registers;
    (frame.r8, frame.r9, frame.r10, frame.r11, frame.r12, frame.r13, frame.r14, frame.r15) =
        (r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    (frame.rdi, frame.rsi, frame.rbp, frame.rbx, frame.rdx, frame.rax, frame.rcx, frame.rsp) =
        (r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
    frame.rip = r[16];
    frame.rflags = (r[17] & USER_FLAGS) | FIXED_FLAGS;
    frame.cs = u64::from(USER_CODE);
    frame.ss = u64::from(USER_DATA);
    super::user::return_by_iret(frame);
    Ok(())
}

fn word(bytes: &[u8], at: usize) -> u64 {
    let mut value = [0u8; 8];
    value.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(value)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut value = [0u8; 4];
    value.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(value)
}

fn put(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

const _: () = assert!(FRAME_SIZE == 440 && UCONTEXT_SIZE == 304, "Linux's rt_sigframe and ucontext sizes");
