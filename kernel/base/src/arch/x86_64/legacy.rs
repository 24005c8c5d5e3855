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
    use core::sync::atomic::{AtomicBool, Ordering};
    const BASE: u16 = 0x3F8;
    /// COM1's ISA interrupt line.
    pub const ISA_IRQ: usize = 4;
    /// Line status: received data waits.
    const DATA_READY: u8 = 0x01;
    /// Line status: a break condition was received (the line held low for a whole character).
    const BREAK_INTERRUPT: u8 = 0x10;
    /// Line status: the transmitter holding register is empty.
    const TRANSMIT_EMPTY: u8 = 0x20;
    /// A break was received and not yet taken by [`take_break`]. Reading the line status
    /// clears its break bit [PC16550D datasheet, LSR bit 4], and every write polls that
    /// register, so every read goes through [`read_line_status`], which keeps the bit here
    /// until the console's input path asks. Each instance has its own copy: a break that
    /// another core's write reads first is lost to instance 0, which the harness's watchdog
    /// avoids by sending one only after seconds in which no core printed (docs/failures.md).
    static BREAK_SEEN: AtomicBool = AtomicBool::new(false);

    fn read_line_status() -> u8 {
        // SAFETY: reading COM1's line status register; its only side effect, clearing the
        // break and overrun bits, is why the break bit is kept in `BREAK_SEEN`.
        let status = unsafe { read_port_u8(BASE + 5) };
        if status & BREAK_INTERRUPT != 0 {
            BREAK_SEEN.store(true, Ordering::Relaxed);
        }
        status
    }

    /// Whether a break arrived since the last call (the 16550, and QEMU's model of it, also
    /// put a NUL byte in the receive FIFO for it).
    pub fn take_break() -> bool {
        BREAK_SEEN.swap(false, Ordering::Relaxed)
    }

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
        while read_line_status() & TRANSMIT_EMPTY == 0 {
            core::hint::spin_loop();
        }
        // SAFETY: writing COM1's data register once the transmitter holding register is empty.
        unsafe { write_port_u8(BASE, byte) }
    }

    /// Raises IRQ 4 whenever received data waits (IER bit 0; OUT2, which gates the line on
    /// PCs, is already set by [`init`]).
    pub fn enable_receive_interrupt() {
        // SAFETY: writing COM1's interrupt enable register.
        unsafe { write_port_u8(BASE + 1, 0x01) };
    }

    /// Whether a received byte waits.
    pub fn has_input() -> bool {
        read_line_status() & DATA_READY != 0
    }

    /// A received byte, if one is waiting.
    pub fn read_byte() -> Option<u8> {
        if read_line_status() & DATA_READY == 0 {
            return None;
        }
        // SAFETY: reading COM1's data register, which holds a received byte (the status said so).
        Some(unsafe { read_port_u8(BASE) })
    }
}
