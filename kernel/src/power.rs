//! Ending the machine (power off, restart, halt) for the `CONTROL` call and `reboot`.
//!
//! Instance 0 owns the console, and other instances forward a process's output to it by
//! message. So another core does not end the machine itself: it asks instance 0 with a
//! [`Kind::Shutdown`] message on the same queue as that output, which instance 0 therefore
//! writes first. Only if instance 0 is gone, or has not acted within [`HAND_OVER_MS`], does the
//! asking core act alone.
#![deny(unsafe_code)]

use crate::arch::{cpu, legacy};
use crate::core::shared;
use crate::println;
use abi::message::{Kind, Shutdown, ShutdownAction};

/// How long another core waits for instance 0 to end the machine before it does so itself.
const HAND_OVER_MS: u64 = 2000;

/// The isa-debug-exit status of a power-off: 0, as `poweroff` has always exited with.
const POWER_OFF_STATUS: u32 = 0;

/// Ends the machine. The calling process's unfinished output line is written first.
pub fn end_machine(action: ShutdownAction) -> ! {
    if let Some(process) = crate::proc::current_process() {
        crate::fs::console::flush(&process.console_pending);
    }
    let me = shared::this_core();
    if me != 0 {
        let request = crate::msg::line(Kind::Shutdown, |out| Shutdown { from: me as u16, action }.encode(out));
        match crate::msg::send_blocking(0, &request) {
            Ok(()) => {
                let deadline = cpu::read_tsc() + crate::time::ns_to_cycles(HAND_OVER_MS * 1_000_000);
                while cpu::read_tsc() < deadline {
                    // Instance 0 may need this core meanwhile (a halt asks every core to stop).
                    crate::msg::drain();
                    cpu::relax();
                }
                log::warn!("core 0 did not end the machine within {HAND_OVER_MS} ms: core {me} does");
            }
            Err(error) => log::warn!("core 0 could not be asked to end the machine ({error}): core {me} does"),
        }
    }
    act(action)
}

/// Does `action` here, saying so on the console first.
fn act(action: ShutdownAction) -> ! {
    match action {
        ShutdownAction::PowerOff => {
            println!("powering off");
            legacy::qemu_exit(POWER_OFF_STATUS);
            cpu::halt_forever()
        }
        ShutdownAction::Restart => {
            println!("restarting");
            cpu::reset_machine()
        }
        ShutdownAction::Halt => {
            let me = shared::this_core();
            for core in 0..crate::msg::messaging_cores() {
                if core != me as usize && crate::msg::is_live(core) {
                    let request =
                        crate::msg::line(Kind::Shutdown, |out| Shutdown { from: me as u16, action }.encode(out));
                    if let Err(error) = crate::msg::try_send(core, &request) {
                        log::warn!("core {core} was not asked to halt: {error}");
                    }
                }
            }
            println!("halted: every core stops; Ctrl-A X leaves QEMU");
            cpu::halt_forever()
        }
    }
}

/// Message handler: another core asks to end the machine (instance 0), or instance 0 asks
/// this core to halt.
fn on_shutdown(message: &channel::Message) -> crate::msg::HandlerResult {
    let request = Shutdown::decode(message.payload())?;
    if shared::this_core() == 0 {
        log::debug!("core {} ends the machine: {:?}", request.from, request.action);
        act(request.action)
    }
    if request.action == ShutdownAction::Halt {
        cpu::halt_forever()
    }
    log::warn!("core {} asked core {} to end the machine: only core 0 does", request.from, shared::this_core());
    Ok(())
}

/// Registers the handler of shutdown requests (at normal priority: behind forwarded output).
pub fn init() {
    crate::msg::register(
        Kind::Shutdown,
        crate::msg::Handler { high_priority: false, on_line: Some(on_shutdown), on_large: None },
    );
}
