//! The console: every core writes COM1 under one shared lock, so lines never tear, and every
//! log line names its core.

use crate::arch::ioapic::{Polarity, Route, Trigger};
use crate::arch::{apic, cpu, idt, legacy::com1};
use crate::percore::shared::{self, BootFacts};
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use platform::cmdline::LogLevel;

/// Console input interrupts this instance took (instance 0 owns the console).
static INPUT_INTERRUPTS: AtomicU64 = AtomicU64::new(0);
/// Whether the first keystroke has said how input arrives.
static INPUT_ANNOUNCED: AtomicBool = AtomicBool::new(false);

/// Routes COM1's receive interrupt to this core through the I/O APIC, so a process reading
/// the console sleeps until a key arrives; without an I/O APIC (or a route), input is polled on timer ticks.
pub fn route_input(facts: &BootFacts) {
    let route = facts.com1_route;
    let Some(controllers) = crate::interrupt::io_apics().filter(|c| c.iter().next().is_some()) else {
        log::info!("console: the MADT lists no I/O APIC; COM1 input is polled on timer ticks");
        return;
    };
    let me = apic::local().id();
    let routed = controllers.route(Route {
        gsi: route.gsi,
        vector: idt::VECTOR_CONSOLE,
        destination: me,
        trigger: if route.level_triggered { Trigger::Level } else { Trigger::Edge },
        polarity: if route.active_low { Polarity::ActiveLow } else { Polarity::ActiveHigh },
    });
    match routed {
        Ok(()) => {
            com1::enable_receive_interrupt();
            log::info!(
                "console: COM1 input interrupts on GSI {} ({}, {}) to APIC id {me}",
                route.gsi,
                if route.active_low { "active low" } else { "active high" },
                if route.level_triggered { "level" } else { "edge" }
            );
        }
        Err(error) => log::warn!("console: COM1 input is polled on timer ticks: {error}"),
    }
}

/// Who reads the console's input (the file service), told on each input interrupt.
static INPUT_LISTENER: spin::Once<fn()> = spin::Once::new();

/// Registers the reader of console input (`boot`, once): told when an input interrupt came.
pub fn set_input_listener(listener: fn()) {
    INPUT_LISTENER.call_once(|| listener);
}

/// From the console vector: count it; the listener (the file service) reads the bytes in
/// thread context.
pub fn on_input_interrupt() {
    INPUT_INTERRUPTS.fetch_add(1, Ordering::Relaxed);
    if let Some(listener) = INPUT_LISTENER.get() {
        listener();
    }
    crate::sched::on_message_notification();
}

/// Called with each byte read from COM1: the first byte read after an input interrupt was
/// taken says so, once, at debug level. (A byte can also be found by a timer tick just before
/// its interrupt lands, so the first byte alone would not tell.)
pub fn note_input() {
    let interrupts = INPUT_INTERRUPTS.load(Ordering::Relaxed);
    if interrupts > 0 && !INPUT_ANNOUNCED.swap(true, Ordering::Relaxed) {
        log::debug!("console: input arrives by interrupt ({interrupts} taken)");
    }
}

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
    cpu::without_interrupts(|| {
        let region = shared::region();
        if let Some(region) = region {
            region.header.console_lock.lock(shared::this_core());
        }
        write(&mut Serial);
        if let Some(region) = region {
            region.header.console_lock.unlock();
        }
    })
}

/// Prints without a prefix (what the kernel says to the user: `powering off`, test lines).
pub fn print(arguments: fmt::Arguments) {
    with_console(|out| {
        let _ = out.write_fmt(arguments);
    });
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

/// Info lines held back for later (`defer_info`), and when the first was: a new kernel that
/// adopted kept processes prints its lines once they ran, since a line on the serial console
/// costs hundreds of microseconds under TCG, which the processes would wait through.
static DEFERRED: spin::Mutex<(alloc::vec::Vec<alloc::string::String>, u64)> =
    spin::Mutex::new((alloc::vec::Vec::new(), 0));
/// Whether [`DEFERRED`] holds a line: the idle loop looks here, not at the lock.
static HAS_DEFERRED: AtomicBool = AtomicBool::new(false);
/// How long a deferred line waits at most for this core to have nothing ready.
const DEFER_AT_MOST_MS: u64 = 20;

/// Logs `line` at info level at this core's next idle moment ([`print_deferred`]).
pub fn defer_info(line: alloc::string::String) {
    let mut deferred = DEFERRED.lock();
    if deferred.0.is_empty() {
        deferred.1 = crate::arch::cpu::read_tsc();
    }
    deferred.0.push(line);
    HAS_DEFERRED.store(true, Ordering::Relaxed);
}

/// Logs the deferred lines if this core has nothing else ready (`idle`), or once the oldest
/// waited [`DEFER_AT_MOST_MS`].
pub fn print_deferred(idle: bool) {
    if !HAS_DEFERRED.load(Ordering::Relaxed) {
        return;
    }
    let lines = {
        let mut deferred = DEFERRED.lock();
        let due = crate::time::ns_to_cycles(DEFER_AT_MOST_MS * 1_000_000);
        if deferred.0.is_empty() || !(idle || crate::arch::cpu::read_tsc().wrapping_sub(deferred.1) > due) {
            return;
        }
        HAS_DEFERRED.store(false, Ordering::Relaxed);
        core::mem::take(&mut deferred.0)
    };
    for line in lines {
        log::info!("{line}");
    }
}

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
