//! The end of boot on core 0: the in-guest tests `test=` asks for, then `/sbin/init`.
//!
//! `/sbin/init` (pid 1, on this core) starts busybox `sh` on the console, or runs `exec=`'s
//! line through `sh -c`; when it ends, the machine powers off with its exit status. The kernel
//! has no shell of its own: without an initramfs (QEMU `-initrd`) nothing can run, so it says
//! so and powers off.
#![deny(unsafe_code)]

use crate::arch::{cpu, legacy};
use crate::core::shared;
use alloc::vec;
use alloc::vec::Vec;

/// Where init is.
const INIT_PATH: &[u8] = b"/sbin/init";

/// What QEMU exits with when `/sbin/init` cannot start: 127, as a shell gives for a program it
/// cannot find (3 is a faulted core 0: `interrupt::CORE_0_FAILED_STATUS`).
pub const NO_INIT_STATUS: u32 = 127;

/// Runs the tests of `test=`, then init (with `exec=`'s line if there is one); ends the
/// machine with init's status. Tests without `exec=` end it with the tests' status instead.
pub fn run() -> ! {
    let options = shared::facts().options;
    if let Some(tests) = options.test {
        let status = run_tests(tests.as_str());
        if options.exec.is_none() {
            end(status);
        }
    }
    let arguments: Vec<&[u8]> = match &options.exec {
        Some(line) => vec![INIT_PATH, b"-c", line.as_str().as_bytes()],
        None => vec![INIT_PATH, b"--shell"],
    };
    let pid = match crate::proc::spawn(0, INIT_PATH, &arguments, &[], 0, 0) {
        Ok(pid) => pid,
        Err(error) => {
            log::error!(
                "/sbin/init did not start ({}): nothing to run, powering off; boot Reef with an initramfs (QEMU -initrd)",
                crate::proc::errno_text(error)
            );
            end(NO_INIT_STATUS);
        }
    };
    // The kernel is init's parent (pid 0), as the shell's parent is init.
    let code = match crate::proc::wait(0, crate::proc::WaitFor::Process(pid), 0) {
        Ok(Some((_, status, _))) if status & 0x7f == 0 => (status >> 8) & 0xff,
        Ok(Some((_, status, _))) => 128 + (status & 0x7f),
        _ => 1,
    };
    end(code)
}

/// Runs the in-guest tests `list` names; returns the exit status (0 when all passed).
#[cfg(feature = "test-hooks")]
fn run_tests(list: &str) -> u32 {
    crate::selftest::run(list)
}

/// An image without `test-hooks` has no in-guest tests: `test=` fails, saying where they are.
#[cfg(not(feature = "test-hooks"))]
fn run_tests(list: &str) -> u32 {
    log::error!(
        "test={list}: this kernel image was built without the test-hooks feature; `cargo xtask test` builds one with it"
    );
    1
}

/// Exits QEMU with `status` (isa-debug-exit); on a machine without that device, halts.
fn end(status: u32) -> ! {
    legacy::qemu_exit(status);
    cpu::halt_forever()
}
