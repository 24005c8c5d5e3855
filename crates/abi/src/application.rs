//! Messages between a thread's home TC and the application core that runs it (NIX execac).
//!
//! The home sends an [`AcCommand`] (run the thread with these registers, recall it, end it);
//! the AC answers with an [`AcEvent`] (the thread made a system call, took a fault, was
//! recalled, or is gone). Both are large messages of one fixed layout: the user registers,
//! the x87/SSE image, and, from the home, the user half of the process's top-level page table
//! (the AC builds its own root whose user half points at the home's tables).

use crate::message::{exact, u16_at, u32_at, u64_at, DecodeError};

/// Registers of a user frame, in the kernel's saved-frame order: r15, r14, r13, r12, r11,
/// r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax, vector, error code, rip, cs, rflags, rsp, ss.
pub const REGISTERS: usize = 22;
/// Bytes of an FXSAVE image.
pub const FPU_STATE_SIZE: usize = 512;
/// Most top-level user entries one command carries (a process uses a handful: its program,
/// heap, mmap area and stack).
pub const MAX_ROOT_ENTRIES: usize = 32;

/// What the home asks of the AC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CommandKind {
    /// Run (or resume) the thread in ring 3 with these registers.
    Run = 1,
    /// Stop the thread at its next kernel entry and send its registers back
    /// ([`EventKind::Recalled`]): a signal or a kill needs the home, or the home restarts.
    Recall = 2,
    /// The thread is over here (it exited, was killed, or went home): drop it.
    End = 3,
    /// Another thread of the process unmapped or protected memory: drop every cached
    /// translation of the process's memory, then answer [`EventKind::Flushed`] (a TLB
    /// shootdown; the home frees the frames only after the answer).
    Flush = 4,
}

/// What the AC tells the home.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EventKind {
    /// The thread made a system call; the registers hold it.
    Syscall = 1,
    /// The thread took an exception; `vector`, `error code` in the registers, the address in
    /// `fault_address`.
    Fault = 2,
    /// The thread stopped because the home recalled it.
    Recalled = 3,
    /// The AC cannot take the thread: `errno` says why (`EBUSY`, `EINVAL`).
    Refused = 4,
    /// The thread left the AC (after an [`CommandKind::End`]).
    Ended = 5,
    /// The AC dropped its cached translations (after a [`CommandKind::Flush`]).
    Flushed = 6,
    /// The AC is stopping (a boot driver's stop or restart): the registers are the thread's,
    /// which the home keeps until the AC runs again (or runs the thread itself).
    Suspended = 7,
}

/// A command from the home TC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcCommand {
    pub kind: CommandKind,
    /// Flags of the move (`call::MOVE_SYSPAGE`).
    pub flags: u8,
    /// The home's logical core.
    pub home: u16,
    pub pid: u32,
    pub tid: u32,
    /// The KC serving the thread's syspage (`u16::MAX`: none).
    pub kernel_core: u16,
    /// Physical address of the thread's syspage frame, 0 without one (the AC maps it to write
    /// the thread's calls there).
    pub syspage: u64,
    pub fs_base: u64,
    pub registers: [u64; REGISTERS],
    pub fpu: [u8; FPU_STATE_SIZE],
    /// Non-empty top-level entries of the user half: (index below 256, entry).
    pub root_entries: [(u16, u64); MAX_ROOT_ENTRIES],
    pub root_entry_count: u8,
    /// The low 32 bits of the AC's KCB incarnation the home sent a run to: a kernel of
    /// another incarnation (the AC was restarted since) drops the run as stale.
    pub incarnation: u32,
    /// The home's mapping generation of the process's address space: a run with the
    /// generation and top-level entries of the AC's last run leaves the AC's cached
    /// translations alone (no page was unmapped or changed rights in between); any other
    /// drops them.
    pub mappings: u64,
}

/// An event from the AC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcEvent {
    pub kind: EventKind,
    /// The AC's logical core.
    pub core: u16,
    pub pid: u32,
    pub tid: u32,
    /// With [`EventKind::Refused`]: a Linux errno.
    pub errno: u32,
    pub fault_address: u64,
    pub registers: [u64; REGISTERS],
    pub fpu: [u8; FPU_STATE_SIZE],
}

const COMMAND_HEADER: usize = 1 + 1 + 2 + 4 + 4 + 2 + 8 + 8 + 1 + 4 + 8;
const EVENT_HEADER: usize = 1 + 2 + 4 + 4 + 4 + 8;
const REGISTER_BYTES: usize = REGISTERS * 8;

impl AcCommand {
    /// Encoded size (fixed).
    pub const SIZE: usize = COMMAND_HEADER + REGISTER_BYTES + FPU_STATE_SIZE + MAX_ROOT_ENTRIES * 10;

    /// A command with no registers: [`CommandKind::Recall`], [`CommandKind::End`] or
    /// [`CommandKind::Flush`].
    pub fn bare(kind: CommandKind, home: u16, pid: u32, tid: u32) -> Self {
        Self {
            kind,
            flags: 0,
            home,
            pid,
            tid,
            kernel_core: u16::MAX,
            syspage: 0,
            fs_base: 0,
            registers: [0; REGISTERS],
            fpu: [0; FPU_STATE_SIZE],
            root_entries: [(0, 0); MAX_ROOT_ENTRIES],
            root_entry_count: 0,
            incarnation: 0,
            mappings: 0,
        }
    }

    /// The top-level entries it carries.
    pub fn root_entries(&self) -> &[(u16, u64)] {
        &self.root_entries[..usize::from(self.root_entry_count).min(MAX_ROOT_ENTRIES)]
    }

    /// Writes the command into `out` (at least [`Self::SIZE`] bytes); returns its length.
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let out = &mut out[..Self::SIZE];
        out[0] = self.kind as u8;
        out[1] = self.flags;
        out[2..4].copy_from_slice(&self.home.to_le_bytes());
        out[4..8].copy_from_slice(&self.pid.to_le_bytes());
        out[8..12].copy_from_slice(&self.tid.to_le_bytes());
        out[12..14].copy_from_slice(&self.kernel_core.to_le_bytes());
        out[14..22].copy_from_slice(&self.syspage.to_le_bytes());
        out[22..30].copy_from_slice(&self.fs_base.to_le_bytes());
        out[30] = self.root_entry_count;
        out[31..35].copy_from_slice(&self.incarnation.to_le_bytes());
        out[35..43].copy_from_slice(&self.mappings.to_le_bytes());
        let mut at = COMMAND_HEADER;
        at = put_registers(out, at, &self.registers);
        out[at..at + FPU_STATE_SIZE].copy_from_slice(&self.fpu);
        at += FPU_STATE_SIZE;
        for (index, entry) in &self.root_entries {
            out[at..at + 2].copy_from_slice(&index.to_le_bytes());
            out[at + 2..at + 10].copy_from_slice(&entry.to_le_bytes());
            at += 10;
        }
        Self::SIZE
    }

    /// Reads a command, checking its length, kind, entry count and entry indices.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let kind = match bytes[0] {
            1 => CommandKind::Run,
            2 => CommandKind::Recall,
            3 => CommandKind::End,
            4 => CommandKind::Flush,
            _ => return Err(DecodeError::BadField("command kind")),
        };
        let root_entry_count = bytes[30];
        if usize::from(root_entry_count) > MAX_ROOT_ENTRIES {
            return Err(DecodeError::BadField("root entry count"));
        }
        let mut at = COMMAND_HEADER;
        let registers = get_registers(bytes, &mut at);
        let mut fpu = [0; FPU_STATE_SIZE];
        fpu.copy_from_slice(&bytes[at..at + FPU_STATE_SIZE]);
        at += FPU_STATE_SIZE;
        let mut root_entries = [(0, 0); MAX_ROOT_ENTRIES];
        for slot in &mut root_entries {
            *slot = (u16_at(bytes, at), u64_at(bytes, at + 2));
            at += 10;
        }
        if root_entries[..usize::from(root_entry_count)].iter().any(|(index, _)| *index >= 256) {
            return Err(DecodeError::BadField("root entry index"));
        }
        Ok(Self {
            kind,
            flags: bytes[1],
            home: u16_at(bytes, 2),
            pid: u32_at(bytes, 4),
            tid: u32_at(bytes, 8),
            kernel_core: u16_at(bytes, 12),
            syspage: u64_at(bytes, 14),
            fs_base: u64_at(bytes, 22),
            registers,
            fpu,
            root_entries,
            root_entry_count,
            incarnation: u32_at(bytes, 31),
            mappings: u64_at(bytes, 35),
        })
    }
}

impl AcEvent {
    /// Encoded size (fixed).
    pub const SIZE: usize = EVENT_HEADER + REGISTER_BYTES + FPU_STATE_SIZE;

    /// An event with no registers: [`EventKind::Refused`] or [`EventKind::Ended`].
    pub fn bare(kind: EventKind, core: u16, pid: u32, tid: u32, errno: u32) -> Self {
        Self { kind, core, pid, tid, errno, fault_address: 0, registers: [0; REGISTERS], fpu: [0; FPU_STATE_SIZE] }
    }

    /// Writes the event into `out` (at least [`Self::SIZE`] bytes); returns its length.
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let out = &mut out[..Self::SIZE];
        out[0] = self.kind as u8;
        out[1..3].copy_from_slice(&self.core.to_le_bytes());
        out[3..7].copy_from_slice(&self.pid.to_le_bytes());
        out[7..11].copy_from_slice(&self.tid.to_le_bytes());
        out[11..15].copy_from_slice(&self.errno.to_le_bytes());
        out[15..23].copy_from_slice(&self.fault_address.to_le_bytes());
        let at = put_registers(out, EVENT_HEADER, &self.registers);
        out[at..at + FPU_STATE_SIZE].copy_from_slice(&self.fpu);
        Self::SIZE
    }

    /// Reads an event, checking its length and kind.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let kind = match bytes[0] {
            1 => EventKind::Syscall,
            2 => EventKind::Fault,
            3 => EventKind::Recalled,
            4 => EventKind::Refused,
            5 => EventKind::Ended,
            6 => EventKind::Flushed,
            7 => EventKind::Suspended,
            _ => return Err(DecodeError::BadField("event kind")),
        };
        let mut at = EVENT_HEADER;
        let registers = get_registers(bytes, &mut at);
        let mut fpu = [0; FPU_STATE_SIZE];
        fpu.copy_from_slice(&bytes[at..at + FPU_STATE_SIZE]);
        Ok(Self {
            kind,
            core: u16_at(bytes, 1),
            pid: u32_at(bytes, 3),
            tid: u32_at(bytes, 7),
            errno: u32_at(bytes, 11),
            fault_address: u64_at(bytes, 15),
            registers,
            fpu,
        })
    }
}

/// A syspage entry a kernel core cannot run itself, for the home of its process (kernel core
/// to home, a large message); the answer is a [`SyspageResult`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyspageCall {
    /// The kernel core that took it.
    pub kernel_core: u16,
    pub pid: u32,
    pub tid: u32,
    /// Entry index, sequence and number, as the KC's copy of the entry holds them.
    pub index: u8,
    pub sequence: u32,
    pub number: u32,
    pub arguments: [u64; 6],
}

impl SyspageCall {
    /// Encoded size.
    pub const SIZE: usize = 2 + 4 + 4 + 1 + 4 + 4 + 48;

    /// Writes the call into `out` (at least [`Self::SIZE`] bytes); returns its length.
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let out = &mut out[..Self::SIZE];
        out[0..2].copy_from_slice(&self.kernel_core.to_le_bytes());
        out[2..6].copy_from_slice(&self.pid.to_le_bytes());
        out[6..10].copy_from_slice(&self.tid.to_le_bytes());
        out[10] = self.index;
        out[11..15].copy_from_slice(&self.sequence.to_le_bytes());
        out[15..19].copy_from_slice(&self.number.to_le_bytes());
        put_registers_of(out, 19, &self.arguments);
        Self::SIZE
    }

    /// Reads a call, checking its length.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        let mut arguments = [0; 6];
        for (i, argument) in arguments.iter_mut().enumerate() {
            *argument = u64_at(bytes, 19 + 8 * i);
        }
        Ok(Self {
            kernel_core: u16_at(bytes, 0),
            pid: u32_at(bytes, 2),
            tid: u32_at(bytes, 6),
            index: bytes[10],
            sequence: u32_at(bytes, 11),
            number: u32_at(bytes, 15),
            arguments,
        })
    }
}

/// The home's answer to a [`SyspageCall`] (one line, home to kernel core).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyspageResult {
    pub pid: u32,
    pub tid: u32,
    pub index: u8,
    pub sequence: u32,
    pub number: u32,
    /// The call's return value (`-errno` on error).
    pub value: i64,
}

impl SyspageResult {
    /// Encoded size.
    pub const SIZE: usize = 4 + 4 + 1 + 4 + 4 + 8;

    /// Writes the payload; returns its length.
    pub fn encode(&self, out: &mut [u8; crate::message::PAYLOAD_SIZE]) -> usize {
        out[0..4].copy_from_slice(&self.pid.to_le_bytes());
        out[4..8].copy_from_slice(&self.tid.to_le_bytes());
        out[8] = self.index;
        out[9..13].copy_from_slice(&self.sequence.to_le_bytes());
        out[13..17].copy_from_slice(&self.number.to_le_bytes());
        out[17..25].copy_from_slice(&self.value.to_le_bytes());
        Self::SIZE
    }

    /// Reads a payload, checking its length.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: &[u8; Self::SIZE] = exact(bytes)?;
        Ok(Self {
            pid: u32_at(bytes, 0),
            tid: u32_at(bytes, 4),
            index: bytes[8],
            sequence: u32_at(bytes, 9),
            number: u32_at(bytes, 13),
            value: u64_at(bytes, 17) as i64,
        })
    }
}

fn put_registers_of(out: &mut [u8], mut at: usize, values: &[u64]) {
    for value in values {
        out[at..at + 8].copy_from_slice(&value.to_le_bytes());
        at += 8;
    }
}

fn put_registers(out: &mut [u8], mut at: usize, registers: &[u64; REGISTERS]) -> usize {
    for value in registers {
        out[at..at + 8].copy_from_slice(&value.to_le_bytes());
        at += 8;
    }
    at
}

fn get_registers<const N: usize>(bytes: &[u8; N], at: &mut usize) -> [u64; REGISTERS] {
    let mut registers = [0; REGISTERS];
    for value in &mut registers {
        *value = u64_at(bytes, *at);
        *at += 8;
    }
    registers
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    fn command(seed: u64) -> AcCommand {
        let mut command = AcCommand::bare(CommandKind::Run, 3, 300_001, 300_002);
        command.flags = 1;
        command.kernel_core = 2;
        command.syspage = 0x7000_0000;
        command.fs_base = seed;
        for (i, register) in command.registers.iter_mut().enumerate() {
            *register = seed.wrapping_mul(i as u64 + 1);
        }
        command.fpu[7] = seed as u8;
        command.root_entries[0] = (0, 0x1234_5007);
        command.root_entries[1] = (255, 0x9999_0007);
        command.root_entry_count = 2;
        command.incarnation = 0x0102_0304;
        command.mappings = 0x0A0B_0C0D_0E0F_1011 ^ seed;
        command
    }

    #[test]
    fn a_command_round_trips() {
        let original = command(77);
        let mut bytes = vec![0; AcCommand::SIZE];
        assert_eq!(original.encode(&mut bytes), AcCommand::SIZE);
        let decoded = AcCommand::decode(&bytes).unwrap();
        assert_eq!(decoded, original);
        assert_eq!(decoded.root_entries(), &[(0, 0x1234_5007), (255, 0x9999_0007)]);
    }

    #[test]
    fn an_event_round_trips() {
        for kind in [EventKind::Fault, EventKind::Suspended] {
            let mut original = AcEvent::bare(kind, 1, 5, 6, 0);
            original.fault_address = 0xdead_0000;
            original.registers[15] = 14;
            original.fpu[511] = 9;
            let mut bytes = vec![0; AcEvent::SIZE];
            original.encode(&mut bytes);
            assert_eq!(AcEvent::decode(&bytes).unwrap(), original);
        }
    }

    #[test]
    fn bad_kinds_counts_and_indices_are_refused() {
        let mut bytes = vec![0; AcCommand::SIZE];
        command(1).encode(&mut bytes);
        let mut wrong = bytes.clone();
        wrong[0] = 9;
        assert_eq!(AcCommand::decode(&wrong), Err(DecodeError::BadField("command kind")));
        let mut wrong = bytes.clone();
        wrong[30] = MAX_ROOT_ENTRIES as u8 + 1;
        assert_eq!(AcCommand::decode(&wrong), Err(DecodeError::BadField("root entry count")));
        let mut wrong = bytes.clone();
        let first_index = COMMAND_HEADER + REGISTER_BYTES + FPU_STATE_SIZE;
        wrong[first_index..first_index + 2].copy_from_slice(&300u16.to_le_bytes());
        assert_eq!(AcCommand::decode(&wrong), Err(DecodeError::BadField("root entry index")));
        assert!(matches!(AcCommand::decode(&bytes[1..]), Err(DecodeError::BadLength { .. })));
        assert!(matches!(AcEvent::decode(&[0; 3]), Err(DecodeError::BadLength { .. })));
    }

    #[test]
    fn syspage_messages_round_trip() {
        let call = SyspageCall {
            kernel_core: 2,
            pid: 7,
            tid: 8,
            index: 63,
            sequence: 0xFF_FFFF,
            number: 39,
            arguments: [1, 2, 3, 4, 5, u64::MAX],
        };
        let mut bytes = vec![0; SyspageCall::SIZE];
        call.encode(&mut bytes);
        assert_eq!(SyspageCall::decode(&bytes), Ok(call));
        let result = SyspageResult { pid: 7, tid: 8, index: 3, sequence: 9, number: 39, value: -14 };
        let mut line = [0u8; crate::message::PAYLOAD_SIZE];
        let length = result.encode(&mut line);
        assert_eq!(SyspageResult::decode(&line[..length]), Ok(result));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1400)) {
            let _ = AcCommand::decode(&bytes);
            let _ = AcEvent::decode(&bytes);
            let _ = SyspageCall::decode(&bytes);
            let _ = SyspageResult::decode(&bytes);
        }

        #[test]
        fn garbage_of_the_right_length_never_panics(seed in any::<u8>()) {
            let bytes = vec![seed; AcCommand::SIZE];
            let _ = AcCommand::decode(&bytes);
            let bytes = vec![seed; AcEvent::SIZE];
            let _ = AcEvent::decode(&bytes);
        }
    }
}
