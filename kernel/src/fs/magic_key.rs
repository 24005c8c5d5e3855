//! The console's magic key: a BREAK then one key, taken before the line discipline.
//!
//! Linux's serial SysRq (Documentation/admin-guide/sysrq.rst) in Reef's one use of it: BREAK
//! then `t` prints the watchdog dump, what the QEMU harness asks for when a run stops making
//! progress (docs/failures.md, Watchdog). A BREAK cannot be typed as a byte, so no program's
//! input, raw or not, can ask by chance; the dump only reads, so the key widens nothing a
//! console user could already see with `ps` and `cat /proc/reef/files`.
//!
//! The service's instance reads COM1 at safe points ([`super::service::poll_console`]) and
//! runs the key there, after it let go of the service's lock: the dump takes that lock's
//! snapshot and the records' lock, and waits for no other core: every core's counts are in
//! its KCB and every process's record is kept here, so a wedged core cannot stop the dump.
//! The `ps` table of every core is the `/proc/reef/processes` view, which control (above the
//! file service) registers at boot (`fs::proc::register_views`).

use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering};

/// The key after a BREAK that prints the dump (Linux's `t`, "show tasks").
pub const DUMP_KEY: u8 = b't';

/// The last line of the dump, which the harness waits for before it ends QEMU.
pub const DUMP_END: &str = "end of the watchdog dump";

/// A BREAK came; the next byte is its key. (Only the service's instance reads COM1.)
static AWAITING_KEY: AtomicBool = AtomicBool::new(false);

/// What a byte read from COM1 is.
pub enum Input {
    /// A byte for the line discipline.
    Byte(u8),
    /// The NUL a BREAK puts in the receive FIFO: taken, the next byte is the key.
    Break,
    /// The key after a BREAK: run it with [`run`] once the service's lock is released.
    Key(u8),
}

/// Sorts one byte read from COM1 (before the line discipline sees it).
pub fn filter(byte: u8) -> Input {
    if AWAITING_KEY.swap(false, Ordering::Relaxed) {
        return Input::Key(byte);
    }
    // A 16550 marks a break with a NUL in the FIFO and the break bit in the line status; a
    // NUL typed as Ctrl-@ comes without the bit and goes on to the line discipline.
    if byte == 0 && crate::arch::legacy::com1::take_break() {
        AWAITING_KEY.store(true, Ordering::Relaxed);
        return Input::Break;
    }
    Input::Byte(byte)
}

/// Runs a magic key, in thread context at a safe point, holding no lock (the file service's
/// counts were refreshed for `/proc/reef/files` when the key was read).
pub fn run(key: u8) {
    let mut text = alloc::string::String::new();
    match key {
        DUMP_KEY => dump(&mut text),
        other => {
            let _ =
                writeln!(text, "BREAK then {other:#04x}: no such magic key; BREAK then `t` prints the watchdog dump");
        }
    }
    let core = crate::core::shared::this_core();
    let mut prefixed = alloc::string::String::with_capacity(text.len() * 2);
    for line in text.lines() {
        let _ = writeln!(prefixed, "[c{core} WATCHDOG] {line}");
    }
    // One write, so another core's line cannot land inside the dump.
    crate::print!("{prefixed}");
}

/// Every core's `ps` table, this instance's threads, every process known to `/proc`, and the
/// text of `/proc/reef/files`.
fn dump(text: &mut alloc::string::String) {
    let _ =
        writeln!(text, "dump asked on the console (BREAK then `t`): every core's processes, the file service's counts");
    super::proc::write_view(vfs::ReefView::Processes, text);
    let _ = writeln!(text, "processes of every core (as /proc knows them):");
    super::proc::write_records(text);
    let files = super::proc::source().generate(vfs::ProcFile::Reef(vfs::ReefView::Files));
    match files {
        Ok(bytes) => {
            let _ = write!(text, "/proc/reef/files: {}", alloc::string::String::from_utf8_lossy(&bytes));
        }
        Err(error) => {
            let _ = writeln!(text, "/proc/reef/files: unreadable (errno {error})");
        }
    }
    let _ = writeln!(text, "{DUMP_END}");
}
