//! The console as processes see it: instance 0 owns COM1; other instances forward whole
//! lines to it by message, so a program's lines never interleave mid-line with another's or
//! with the kernel's, and nothing is added to what the program printed.

use crate::arch::legacy::com1;
use crate::core::shared;
use abi::message::Kind;
use alloc::vec::Vec;
use spin::Mutex;

/// Longest piece of output one message carries.
const PIECE: usize = 16 * 1024;
/// A line longer than this is written in pieces anyway.
const MAX_PENDING: usize = 4096;

/// Writes bytes to COM1 under the console lock (on instance 0).
pub fn write_here(bytes: &[u8]) {
    crate::console::with_console(|_| {
        for &byte in bytes {
            if byte == b'\n' {
                com1::write_byte(b'\r');
            }
            com1::write_byte(byte);
        }
    });
}

/// Hands complete output to the console's owner.
fn emit(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    if shared::this_core() == 0 {
        return write_here(bytes);
    }
    for piece in bytes.chunks(PIECE) {
        if let Err(error) = crate::msg::send_large(0, Kind::ConsoleOutput, piece) {
            // Instance 0 is gone or not answering: write it ourselves rather than lose it.
            log::debug!("console output not forwarded ({error}): written directly");
            write_here(piece);
        }
    }
}

/// A process writes `bytes` to its console: complete lines go out now, a partial last line
/// waits in `pending`, the process's own, for its end (or for the process to read input or
/// exit).
pub fn write(pending: &Mutex<Vec<u8>>, bytes: &[u8]) {
    let mut pending = pending.lock();
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(last) => {
            let mut out: Vec<u8> = core::mem::take(&mut *pending);
            out.extend_from_slice(&bytes[..=last]);
            pending.extend_from_slice(&bytes[last + 1..]);
            drop(pending);
            emit(&out);
        }
        None => {
            pending.extend_from_slice(bytes);
            if pending.len() >= MAX_PENDING {
                let out = core::mem::take(&mut *pending);
                drop(pending);
                emit(&out);
            }
        }
    }
}

/// Writes what a process left without a newline in `pending` (before it reads input, and at
/// exit).
pub fn flush(pending: &Mutex<Vec<u8>>) {
    let out = core::mem::take(&mut *pending.lock());
    emit(&out);
}

fn on_console_output(bytes: &[u8]) -> crate::msg::HandlerResult {
    write_here(bytes);
    Ok(())
}

/// Registers the console's message handler (instance 0 writes what others forward).
pub fn init() {
    crate::msg::register(
        Kind::ConsoleOutput,
        crate::msg::Handler { high_priority: false, on_line: None, on_large: Some(on_console_output) },
    );
}
