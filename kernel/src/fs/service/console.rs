//! The console's input on the service's instance: COM1 bytes through the magic key filter
//! and the line discipline, and the signals its keys send to the foreground group.

use super::{transport, SERVICE, SERVICE_CORE};
use crate::arch::legacy::com1;
use crate::core::shared;
use crate::fs::magic_key;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};
use spin::Once;

/// COM1 input arrived (set by the interrupt, consumed in thread context).
static CONSOLE_INPUT: AtomicBool = AtomicBool::new(false);

/// Sends a signal to a process group: the process layer's, registered at boot (the file
/// service sits below processes and names none of them).
static SIGNAL_GROUP: Once<fn(u32, u32)> = Once::new();

/// Registers how a key of the line discipline (Ctrl-C, Ctrl-\, Ctrl-Z) signals the
/// foreground process group: `signal_group(group, signal)`. Until then such keys do nothing.
pub fn register_signal_group(signal_group: fn(u32, u32)) {
    SIGNAL_GROUP.call_once(|| signal_group);
}

/// From the COM1 interrupt: input waits; the service takes it in thread context.
pub fn note_console_input() {
    CONSOLE_INPUT.store(true, Ordering::Relaxed);
}

/// Whether COM1 input waits for the service.
pub(super) fn input_waiting() -> bool {
    CONSOLE_INPUT.load(Ordering::Relaxed) || com1::has_input()
}

/// Thread context on the service's instance (idle loop, return to user): feeds waiting COM1
/// input to the line discipline (the service is COM1's only reader: every keystroke, Ctrl-C
/// included, goes through it) and completes what it unblocks.
pub fn poll_console() {
    if shared::this_core() as usize != SERVICE_CORE {
        return;
    }
    if !input_waiting() {
        return;
    }
    let mut later = Vec::new();
    {
        let mut guard = SERVICE.lock();
        let Some(service) = guard.as_mut() else { return };
        CONSOLE_INPUT.store(false, Ordering::Relaxed);
        let mut signals = Vec::new();
        let mut magic_keys = Vec::new();
        while let Some(byte) = com1::read_byte() {
            crate::console::note_input();
            // A BREAK and its key never reach the line discipline (`magic_key.rs`).
            let byte = match magic_key::filter(byte) {
                magic_key::Input::Byte(byte) => byte,
                magic_key::Input::Break => continue,
                magic_key::Input::Key(key) => {
                    magic_keys.push(key);
                    continue;
                }
            };
            if let Some(signal) = service.terminal.input(byte, &mut |echo| crate::fs::console::write_here(echo)) {
                signals.push(signal);
            }
        }
        if !magic_keys.is_empty() {
            // The dump shows `/proc/reef/files` as it is now, taken while the lock is held.
            service.snapshot_counts();
        }
        service.changed = true;
        service.terminal_generation += 1;
        service.retry_parked(&mut later);
        drop(guard);
        if let Some(signal_group) = SIGNAL_GROUP.get() {
            for (group, signal) in signals {
                if group != 0 {
                    signal_group(group, signal);
                }
            }
        }
        magic_keys.into_iter().for_each(magic_key::run);
    }
    transport::deliver(later);
}
