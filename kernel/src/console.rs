//! The console: every core writes COM1 under one shared lock, so lines never tear, and every
//! log line names its core.

use crate::arch::{cpu, legacy::com1};
use crate::core::shared;
use core::fmt::{self, Write};
use platform::cmdline::LogLevel;

struct Serial;

impl Write for Serial {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for byte in text.bytes() {
            if byte == b'\n' {
                com1::write_byte(b'\r');
            }
            com1::write_byte(byte);
        }
        Ok(())
    }
}

/// Runs `write` holding the console: the shared lock when the shared region exists (early
/// boot runs on one core and needs none), interrupts masked so a handler on this core
/// cannot wait for a lock its own core holds.
pub fn with_console(write: impl FnOnce(&mut dyn Write)) {
    let interrupts = cpu::interrupts_enabled();
    cpu::disable_interrupts();
    let region = shared::region();
    let core = shared::this_core();
    if let Some(region) = region {
        region.header.console_lock.lock(core);
    }
    write(&mut Serial);
    if let Some(region) = region {
        region.header.console_lock.unlock();
    }
    if interrupts {
        cpu::enable_interrupts();
    }
}

/// Prints without a prefix (shell output).
pub fn print(arguments: fmt::Arguments) {
    with_console(|out| {
        let _ = out.write_fmt(arguments);
    });
}

/// Drops the console lock if this core holds it: a faulting core must not take it down with it.
pub fn release_after_fault() {
    if let Some(region) = shared::region() {
        region.header.console_lock.release_if_held_by(shared::this_core());
    }
}

/// Prints a line without a prefix.
#[macro_export]
macro_rules! println {
    () => { $crate::console::print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Prints without a newline or prefix.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::print(format_args!($($arg)*)) };
}

/// The `log` facade's sink: `[c<core> <LEVEL>] message`, one whole line.
struct Logger;

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let core = shared::this_core();
            with_console(|out| {
                let _ = writeln!(out, "[c{core} {:<5}] {}", record.level(), record.args());
            });
        }
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Installs the logger of this instance (its own copy of the `log` crate's statics).
pub fn init_logging(level: LogLevel) {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(match level {
        LogLevel::Error => log::LevelFilter::Error,
        LogLevel::Warn => log::LevelFilter::Warn,
        LogLevel::Info => log::LevelFilter::Info,
        LogLevel::Debug => log::LevelFilter::Debug,
        LogLevel::Trace => log::LevelFilter::Trace,
    });
}
