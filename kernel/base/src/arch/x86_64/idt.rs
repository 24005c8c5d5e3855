//! Per-core IDT, the interrupt entry stubs and the frame they hand to the kernel.

use core::arch::{asm, global_asm};
use core::cell::UnsafeCell;

/// Vector of the LAPIC timer.
pub const VECTOR_TIMER: u8 = 32;
/// Vector of the channel notification IPI.
pub const VECTOR_MESSAGE: u8 = 33;
/// Vector of a plain wake-up IPI (used by benchmarks and the boot driver).
pub const VECTOR_WAKE: u8 = 34;
/// Vector of the benchmark IPI (raw IPI ping-pong): it has a gate only in images built with
/// the `bench` feature; in the others an IPI on it faults instead of being handled.
pub const VECTOR_BENCH: u8 = 35;
/// Vector of the console (COM1) receive interrupt, routed through the I/O APIC to core 0.
pub const VECTOR_CONSOLE: u8 = 36;
/// Vectors of device interrupts (virtio-mmio transports), routed through an I/O APIC to the
/// instance that owns the device: `VECTOR_DEVICE_BASE + n` for device slot `n`.
pub const VECTOR_DEVICE_BASE: u8 = 64;
/// How many device vectors have a gate (one per virtio-mmio transport microvm can have).
pub const DEVICE_VECTORS: u8 = 24;
/// The `vector` of a frame built by the SYSCALL entry (not an IDT vector).
pub const VECTOR_SYSCALL: u64 = 256;
/// Vector of the LAPIC spurious interrupt.
pub const VECTOR_SPURIOUS: u8 = 255;
/// The 8259 PICs are remapped here and masked, so a stray legacy IRQ is recognisable.
pub const VECTOR_LEGACY_BASE: u8 = 48;

/// The registers the entry stub saved, in stack order, then what the CPU pushed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct InterruptFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    pub vector: u64,
    pub error_code: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

impl InterruptFrame {
    /// Whether the frame was saved on an entry from ring 3.
    pub fn came_from_user(&self) -> bool {
        self.cs & 3 == 3
    }

    /// The frame as `abi::application`'s register array (the same order).
    pub fn registers(&self) -> [u64; abi::application::REGISTERS] {
        [
            self.r15,
            self.r14,
            self.r13,
            self.r12,
            self.r11,
            self.r10,
            self.r9,
            self.r8,
            self.rbp,
            self.rdi,
            self.rsi,
            self.rdx,
            self.rcx,
            self.rbx,
            self.rax,
            self.vector,
            self.error_code,
            self.rip,
            self.cs,
            self.rflags,
            self.rsp,
            self.ss,
        ]
    }

    /// A user frame from `abi::application`'s register array, made safe to return to: ring 3
    /// selectors, interrupts on, I/O privilege 0, no nested task or trap flag tricks.
    pub fn from_registers(registers: &[u64; abi::application::REGISTERS]) -> Self {
        let [r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax, vector, error_code, rip, _, rflags, rsp, _] =
            *registers;
        // IF (9) and the always-one bit 1 set; IOPL (12-13), NT (14), RF (16), VM (17) clear.
        let rflags = (rflags | (1 << 9) | (1 << 1)) & !((3 << 12) | (1 << 14) | (1 << 16) | (1 << 17));
        Self {
            r15,
            r14,
            r13,
            r12,
            r11,
            r10,
            r9,
            r8,
            rbp,
            rdi,
            rsi,
            rdx,
            rcx,
            rbx,
            rax,
            vector,
            error_code,
            rip,
            cs: u64::from(super::gdt::USER_CODE),
            rflags,
            rsp,
            ss: u64::from(super::gdt::USER_DATA),
        }
    }
}

// Stubs: exceptions with an error code push only the vector; the others push a zero first,
// so every frame has the same shape [SDM vol3 §6.13]. The stack is 16-byte aligned at the
// call: the CPU aligns before pushing its 5 words, and the stub adds 17 more.
global_asm!(
    r#"
    .macro STUB_NO_ERROR vector
    .p2align 4
    interrupt_stub_\vector:
        push 0
        push \vector
        jmp interrupt_common
    .endm
    .macro STUB_ERROR vector
    .p2align 4
    interrupt_stub_\vector:
        push \vector
        jmp interrupt_common
    .endm

    .section .text.interrupts, "ax"
    interrupt_common:
        // A user thread may have set RFLAGS.AC: with SMAP that would let the kernel touch
        // user pages anywhere, so clear it (CLAC only exists where SMAP does).
        test byte ptr [rip + {smap}], 1
        jz 1f
        clac
    1:
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
        cld
        call {dispatch}
    .global interrupt_return
    interrupt_return:
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
        iretq

    STUB_NO_ERROR 0
    STUB_NO_ERROR 1
    STUB_NO_ERROR 2
    STUB_NO_ERROR 3
    STUB_NO_ERROR 4
    STUB_NO_ERROR 5
    STUB_NO_ERROR 6
    STUB_NO_ERROR 7
    STUB_ERROR 8
    STUB_NO_ERROR 9
    STUB_ERROR 10
    STUB_ERROR 11
    STUB_ERROR 12
    STUB_ERROR 13
    STUB_NO_ERROR 15
    STUB_NO_ERROR 16
    STUB_ERROR 17
    STUB_NO_ERROR 18
    STUB_NO_ERROR 19
    STUB_NO_ERROR 20
    STUB_ERROR 21
    STUB_NO_ERROR 22
    STUB_NO_ERROR 23
    STUB_NO_ERROR 24
    STUB_NO_ERROR 25
    STUB_NO_ERROR 26
    STUB_NO_ERROR 27
    STUB_NO_ERROR 28
    STUB_ERROR 29
    STUB_ERROR 30
    STUB_NO_ERROR 31
    STUB_NO_ERROR 32
    STUB_NO_ERROR 33
    STUB_NO_ERROR 34
    STUB_NO_ERROR 35
    STUB_NO_ERROR 36
    STUB_NO_ERROR 48
    STUB_NO_ERROR 49
    STUB_NO_ERROR 50
    STUB_NO_ERROR 51
    STUB_NO_ERROR 52
    STUB_NO_ERROR 53
    STUB_NO_ERROR 54
    STUB_NO_ERROR 55
    STUB_NO_ERROR 56
    STUB_NO_ERROR 57
    STUB_NO_ERROR 58
    STUB_NO_ERROR 59
    STUB_NO_ERROR 60
    STUB_NO_ERROR 61
    STUB_NO_ERROR 62
    STUB_NO_ERROR 63
    STUB_NO_ERROR 64
    STUB_NO_ERROR 65
    STUB_NO_ERROR 66
    STUB_NO_ERROR 67
    STUB_NO_ERROR 68
    STUB_NO_ERROR 69
    STUB_NO_ERROR 70
    STUB_NO_ERROR 71
    STUB_NO_ERROR 72
    STUB_NO_ERROR 73
    STUB_NO_ERROR 74
    STUB_NO_ERROR 75
    STUB_NO_ERROR 76
    STUB_NO_ERROR 77
    STUB_NO_ERROR 78
    STUB_NO_ERROR 79
    STUB_NO_ERROR 80
    STUB_NO_ERROR 81
    STUB_NO_ERROR 82
    STUB_NO_ERROR 83
    STUB_NO_ERROR 84
    STUB_NO_ERROR 85
    STUB_NO_ERROR 86
    STUB_NO_ERROR 87
    STUB_NO_ERROR 255

    // Page faults arrive on their own IST stack, so a kernel stack overflow still gets its
    // report. A fault from ring 3 may end in a thread switch (preemption, a signal, the
    // process's end, a wait for the home), and a switched-out thread must not keep its frames
    // on the core's one IST stack, where the next page fault starts again from the top: the
    // stub moves the CPU's frame (error code to SS) to the thread's own kernel stack, whose
    // top `SYSCALL_STACK_TOP` holds, and goes on there.
    .p2align 4
    interrupt_stub_14:
        push rax
        push rcx
        // [rsp] rcx, +8 rax, +16 error, +24 RIP, +32 CS, +40 RFLAGS, +48 RSP, +56 SS
        test byte ptr [rsp + 32], 3
        jz 2f
        mov rax, qword ptr [rip + {thread_stack_top}]
        sub rax, 64
        .irp offset, 56, 48, 40, 32, 24, 16, 8, 0
            mov rcx, qword ptr [rsp + \offset]
            mov qword ptr [rax + \offset], rcx
        .endr
        mov rsp, rax
    2:
        pop rcx
        pop rax
        push 14
        jmp interrupt_common

    .section .rodata.interrupts, "a"
    .p2align 3
    .global interrupt_stub_table
    interrupt_stub_table:
    .irp vector, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,255
        .quad \vector
        .quad interrupt_stub_\vector
    .endr
    .quad 0xffffffffffffffff
    .quad 0
    "#,
    dispatch = sym dispatch,
    smap = sym super::user::SMAP_ENABLED,
    thread_stack_top = sym super::user::SYSCALL_STACK_TOP,
);

const _: () = assert!(VECTOR_DEVICE_BASE as usize + DEVICE_VECTORS as usize == 88, "a stub per device vector");

extern "C" {
    static interrupt_stub_table: [u64; 0];
}

/// The trap table's dispatch (`interrupt::dispatch`), given to [`load`].
static DISPATCH: spin::Once<fn(&mut InterruptFrame)> = spin::Once::new();

/// Called by every entry stub with the saved frame: hands it to the trap table.
extern "C" fn dispatch(frame: &mut InterruptFrame) {
    match DISPATCH.get() {
        Some(dispatch) => dispatch(frame),
        // `load` records the dispatch before the IDT exists: nothing can come here first.
        None => super::cpu::halt_forever(),
    }
}

/// One IDT gate [SDM vol3 §6.14.1, figure 6-8].
#[repr(C)]
#[derive(Clone, Copy)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    attributes: u8,
    offset_middle: u16,
    offset_high: u32,
    reserved: u32,
}

impl Gate {
    const MISSING: Self =
        Self { offset_low: 0, selector: 0, ist: 0, attributes: 0, offset_middle: 0, offset_high: 0, reserved: 0 };

    /// A present, DPL 0, 64-bit interrupt gate (IF cleared on entry).
    fn interrupt(handler: u64, ist: u8) -> Self {
        Self {
            offset_low: handler as u16,
            selector: 0x08,
            ist,
            attributes: 0x8E,
            offset_middle: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Table(UnsafeCell<[Gate; 256]>);

// SAFETY: each instance has its own copy (private .bss); it is written once by `load` before
// LIDT, with interrupts off, and afterwards only read by the CPU.
unsafe impl Sync for Table {}

static TABLE: Table = Table(UnsafeCell::new([Gate::MISSING; 256]));

/// Fills and loads this core's IDT, whose stubs hand every frame to `dispatch` (the trap
/// table). Double fault, NMI and machine check run on the critical IST stack, page faults on
/// their own.
pub fn load(dispatch: fn(&mut InterruptFrame)) {
    DISPATCH.call_once(|| dispatch);
    let table = TABLE.0.get();
    let mut entry = (&raw const interrupt_stub_table).cast::<u64>();
    loop {
        // SAFETY: the stub table is a run of (vector, address) pairs ended by a vector of !0.
        let (vector, handler) = unsafe { (*entry, *entry.add(1)) };
        if vector == u64::MAX {
            break;
        }
        if cfg!(not(feature = "bench")) && vector == u64::from(VECTOR_BENCH) {
            // SAFETY: still inside the terminated table.
            entry = unsafe { entry.add(2) };
            continue;
        }
        let ist = match vector {
            2 | 8 | 18 => super::gdt::IST_CRITICAL + 1,
            14 => super::gdt::IST_PAGE_FAULT + 1,
            _ => 0,
        };
        // SAFETY: only this core writes its own table, before loading it, interrupts off.
        unsafe { (*table)[vector as usize] = Gate::interrupt(handler, ist as u8) };
        // SAFETY: still inside the terminated table.
        entry = unsafe { entry.add(2) };
    }
    reload();
}

/// Loads this instance's (filled) IDT: at its first load, and after a world switch.
pub fn reload() {
    #[repr(C, packed)]
    struct Pointer {
        limit: u16,
        base: u64,
    }
    let pointer = Pointer { limit: (256 * 16 - 1) as u16, base: TABLE.0.get() as u64 };
    // SAFETY: the table is a static that lives as long as this instance.
    unsafe { asm!("lidt [{}]", in(reg) &pointer, options(readonly, nostack, preserves_flags)) };
}
