//! Legacy PC devices: the 8259 PICs (remapped and masked) and the 8254 PIT (TSC calibration).

use super::cpu::{read_port_u8, read_tsc, write_port_u8};

const PIC_MASTER_COMMAND: u16 = 0x20;
const PIC_MASTER_DATA: u16 = 0x21;
const PIC_SLAVE_COMMAND: u16 = 0xA0;
const PIC_SLAVE_DATA: u16 = 0xA1;
const PIT_CHANNEL0: u16 = 0x40;
const PIT_COMMAND: u16 = 0x43;
/// The PIT input clock [8254 datasheet; PC/AT].
pub const PIT_HZ: u64 = 1_193_182;

/// Remaps both 8259s above the exceptions and masks every line: the firmware leaves them
/// delivering on vector 8, which would look like a double fault once interrupts are on.
pub fn disable_pic(vector_base: u8) {
    // SAFETY: ports 0x20/0x21/0xA0/0xA1 are the 8259s; ICW1..ICW4 then OCW1 is their init sequence.
    unsafe {
        write_port_u8(PIC_MASTER_COMMAND, 0x11);
        write_port_u8(PIC_SLAVE_COMMAND, 0x11);
        write_port_u8(PIC_MASTER_DATA, vector_base);
        write_port_u8(PIC_SLAVE_DATA, vector_base + 8);
        write_port_u8(PIC_MASTER_DATA, 4);
        write_port_u8(PIC_SLAVE_DATA, 2);
        write_port_u8(PIC_MASTER_DATA, 1);
        write_port_u8(PIC_SLAVE_DATA, 1);
        write_port_u8(PIC_MASTER_DATA, 0xFF);
        write_port_u8(PIC_SLAVE_DATA, 0xFF);
    }
}

fn read_pit_count() -> u16 {
    // SAFETY: latch command for channel 0, then two reads of its count (low, high byte).
    unsafe {
        write_port_u8(PIT_COMMAND, 0x00);
        let low = read_port_u8(PIT_CHANNEL0);
        let high = read_port_u8(PIT_CHANNEL0);
        u16::from_le_bytes([low, high])
    }
}

/// Measures the TSC rate against PIT channel 0 over `pit_ticks` (< 60000) PIT ticks.
/// Returns `None` when the PIT does not count (no PIT on this machine).
pub fn measure_tsc_hz(pit_ticks: u16) -> Option<u64> {
    // SAFETY: channel 0, low/high access, mode 2 (rate generator), reload 0 (= 65536).
    unsafe {
        write_port_u8(PIT_COMMAND, 0x34);
        write_port_u8(PIT_CHANNEL0, 0);
        write_port_u8(PIT_CHANNEL0, 0);
    }
    let first = read_pit_count();
    let deadline = read_tsc() + 2_000_000_000;
    // Wait for the next count change so the measurement starts on a tick edge.
    let mut start_count = first;
    while start_count == first {
        if read_tsc() > deadline {
            return None;
        }
        start_count = read_pit_count();
    }
    let start_tsc = read_tsc();
    loop {
        let count = read_pit_count();
        let elapsed = start_count.wrapping_sub(count);
        if elapsed >= pit_ticks {
            let cycles = read_tsc() - start_tsc;
            return Some(cycles * PIT_HZ / u64::from(elapsed));
        }
        if read_tsc() > deadline {
            return None;
        }
    }
}

/// Exits QEMU through the `isa-debug-exit` device: QEMU's status becomes `(code << 1) | 1`.
/// On hardware without the device this does nothing and the caller halts.
pub fn qemu_exit(code: u32) {
    // SAFETY: port 0xf4 is the isa-debug-exit device Reef's QEMU command line adds.
    unsafe { super::cpu::write_port_u32(0xf4, code) };
}

/// COM1's registers, base 0x3F8 [PC16550D datasheet].
pub mod com1 {
    use super::super::cpu::{read_port_u8, write_port_u8};
    const BASE: u16 = 0x3F8;
    /// COM1's ISA interrupt line.
    pub const ISA_IRQ: usize = 4;

    /// 115200 baud, 8N1, FIFOs on, interrupts off (see [`enable_receive_interrupt`]).
    pub fn init() {
        // SAFETY: COM1's eight ports; the writes are the standard 16550 init sequence.
        unsafe {
            write_port_u8(BASE + 1, 0x00);
            write_port_u8(BASE + 3, 0x80);
            write_port_u8(BASE, 0x01);
            write_port_u8(BASE + 1, 0x00);
            write_port_u8(BASE + 3, 0x03);
            // FIFOs on and cleared, receive interrupt at 1 byte (a keystroke wakes at once).
            write_port_u8(BASE + 2, 0x07);
            write_port_u8(BASE + 4, 0x0B);
        }
    }

    /// Sends one byte, waiting for the transmitter holding register.
    pub fn write_byte(byte: u8) {
        // SAFETY: reading the line status and writing the data register of COM1.
        unsafe {
            while read_port_u8(BASE + 5) & 0x20 == 0 {
                core::hint::spin_loop();
            }
            write_port_u8(BASE, byte);
        }
    }

    /// Raises IRQ 4 whenever received data waits (IER bit 0; OUT2, which gates the line on
    /// PCs, is already set by [`init`]).
    pub fn enable_receive_interrupt() {
        // SAFETY: writing COM1's interrupt enable register.
        unsafe { write_port_u8(BASE + 1, 0x01) };
    }

    /// Whether a received byte waits.
    pub fn has_input() -> bool {
        // SAFETY: reading the line status register of COM1 has no side effect.
        unsafe { read_port_u8(BASE + 5) & 1 != 0 }
    }

    /// A received byte, if one is waiting.
    pub fn read_byte() -> Option<u8> {
        // SAFETY: reading the line status and data registers of COM1.
        unsafe { (read_port_u8(BASE + 5) & 1 != 0).then(|| read_port_u8(BASE)) }
    }
}
