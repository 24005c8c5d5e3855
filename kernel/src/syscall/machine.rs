//! Calls that act on the whole machine: Linux's `reboot`, and Reef's `CONTROL`, which runs the
//! kernel's control commands (`control.rs`) for a process and hands it their text.

use super::{read_string, read_string_array, write_user, SyscallResult};
use crate::arch::user::{copy_from_user, copy_to_user};
use crate::control::{self, CommandError};
use crate::proc::Errno;
use abi::call::control::{self as control_abi, BUFFER_SIZE, MAX_OUTPUT};
use abi::message::ShutdownAction;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use linux_raw_sys::errno;
use linux_raw_sys::general as linux;

/// What a `reboot` call asks for, once its magic numbers are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RebootRequest {
    /// Power off, restart or halt the machine.
    End(ShutdownAction),
    /// Turn Ctrl-Alt-Del on or off: there is no keyboard to press it on, so nothing changes.
    CtrlAltDelete,
}

/// The second magic numbers Linux accepts (Linus's birthday and his daughters').
const SECOND_MAGIC: [u32; 4] =
    [linux::LINUX_REBOOT_MAGIC2, linux::LINUX_REBOOT_MAGIC2A, linux::LINUX_REBOOT_MAGIC2B, linux::LINUX_REBOOT_MAGIC2C];

fn decode_reboot(magic: u64, second_magic: u64, command: u64, argument: u64) -> Result<RebootRequest, Errno> {
    // Linux reads the magic numbers and the command as 32-bit integers.
    if magic as u32 != linux::LINUX_REBOOT_MAGIC1 || !SECOND_MAGIC.contains(&(second_magic as u32)) {
        return Err(errno::EINVAL);
    }
    Ok(match command as u32 {
        linux::LINUX_REBOOT_CMD_POWER_OFF => RebootRequest::End(ShutdownAction::PowerOff),
        linux::LINUX_REBOOT_CMD_RESTART => RebootRequest::End(ShutdownAction::Restart),
        linux::LINUX_REBOOT_CMD_RESTART2 => {
            // The command string for the firmware: read as Linux does, then unused.
            read_string(argument, 256)?;
            RebootRequest::End(ShutdownAction::Restart)
        }
        linux::LINUX_REBOOT_CMD_HALT => RebootRequest::End(ShutdownAction::Halt),
        linux::LINUX_REBOOT_CMD_CAD_ON | linux::LINUX_REBOOT_CMD_CAD_OFF => RebootRequest::CtrlAltDelete,
        // Suspend and kexec are not offered, as on a Linux built without them.
        _ => return Err(errno::EINVAL),
    })
}

/// `reboot(magic, second_magic, command, argument)`: `LINUX_REBOOT_CMD_POWER_OFF` does what
/// the `poweroff` control command does, `RESTART` resets the machine, `HALT` stops every core and
/// leaves QEMU running. Wrong magic numbers or another command: `EINVAL`.
pub fn reboot(magic: u64, second_magic: u64, command: u64, argument: u64) -> SyscallResult {
    // Linux asks `CAP_SYS_BOOT` before it reads the magic numbers.
    require_root("reboot")?;
    match decode_reboot(magic, second_magic, command, argument)? {
        RebootRequest::CtrlAltDelete => Ok(0),
        RebootRequest::End(action) => {
            if let Some(process) = crate::proc::current_process() {
                let name = process.state.lock().name.clone();
                log::info!("{name} (pid {}) ends the machine: {action:?}", process.pid);
            }
            crate::power::end_machine(action)
        }
    }
}

/// Refuses `call` (one that starts, stops or changes cores, or ends the machine) to a process
/// that is not root (effective user id 0), with `EPERM` and one line in the kernel's log
/// saying who was refused what, as `control::permitted` does for the control commands.
pub fn require_root(call: &str) -> Result<(), Errno> {
    if crate::proc::credentials::current_is_privileged() {
        return Ok(());
    }
    let (pid, name) = crate::proc::current_process()
        .map_or((0, String::new()), |process| (process.pid, process.state.lock().name.clone()));
    let user = crate::proc::credentials::current_effective_uid();
    log::warn!("{name} (pid {pid}, user {user}): `{call}` needs root (effective user id 0): operation not permitted");
    Err(errno::EPERM)
}

/// A decoded `CONTROL` call: the command's words, and where its text and status go (both
/// checked writable).
struct ControlRequest {
    words: Vec<String>,
    buffer: u64,
    capacity: usize,
    status: u64,
}

fn decode_control(argv: u64, buffer: u64, capacity: u64, status: u64) -> Result<ControlRequest, Errno> {
    if argv == 0 {
        return Err(errno::EFAULT);
    }
    let words = read_string_array(argv)?
        .into_iter()
        .map(|word| String::from_utf8(word).map_err(|_| errno::EINVAL))
        .collect::<Result<Vec<String>, Errno>>()?;
    if words.is_empty() {
        return Err(errno::EINVAL);
    }
    // More than a buffer of `BUFFER_SIZE` never fills: the rest is neither checked nor written.
    let capacity = usize::try_from(capacity).unwrap_or(usize::MAX).min(BUFFER_SIZE);
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let state = process.state.lock();
    let status_size = core::mem::size_of::<u32>() as u64;
    // Checked before the command runs, so a bad pointer never leaves a command done and its
    // answer lost.
    if !state.memory.allows_write(buffer, capacity as u64) || !state.memory.allows_write(status, status_size) {
        return Err(errno::EFAULT);
    }
    Ok(ControlRequest { words, buffer, capacity, status })
}

/// A command's text as it is written: kept up to [`MAX_OUTPUT`] bytes, counted beyond.
struct Captured {
    text: String,
    full_length: usize,
}

impl Write for Captured {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        let cut_already = self.text.len() < self.full_length;
        self.full_length += piece.len();
        if cut_already {
            return Ok(());
        }
        let mut room = piece.len().min(MAX_OUTPUT - self.text.len());
        while !piece.is_char_boundary(room) {
            room -= 1;
        }
        self.text.push_str(&piece[..room]);
        Ok(())
    }
}

/// `reef_control(argv, buffer, capacity, status) -> length` (`abi::call::CONTROL`): runs the
/// control command `argv` names on this instance, copies its text (cut to fit, and saying
/// so) and its status out, and returns the text's length. An unknown command is status 1
/// with an `error: unknown command` line.
pub fn control(argv: u64, buffer: u64, capacity: u64, status: u64) -> SyscallResult {
    let request = decode_control(argv, buffer, capacity, status)?;
    let words: Vec<&str> = request.words.iter().map(String::as_str).collect();
    let mut captured = Captured { text: String::new(), full_length: 0 };
    let result = control::run(&words, &mut captured);
    let (code, ending) = match result {
        Ok(()) => (control_abi::OK, String::new()),
        Err(error) => (error.control_status(), error_line(&error)),
    };
    let mut staging = alloc::vec![0u8; request.capacity];
    let length = control_abi::fit(captured.text.as_bytes(), captured.full_length, ending.as_bytes(), &mut staging);
    copy_to_user(request.buffer, &staging[..length]).map_err(|_| errno::EFAULT)?;
    write_user(request.status, &code)?;
    Ok(length as u64)
}

/// The `error: …` line that ends a failed command's text, newline included.
fn error_line(error: &CommandError) -> String {
    alloc::format!("{error}\n")
}

/// A decoded `reef_core_operation` request.
struct CoreRequest {
    operation: u64,
    core: usize,
    image: Option<String>,
    /// `PARK`'s host, `UNPARK`'s destination (`None`: the OSnode's own core).
    other_core: Option<usize>,
    uncached: bool,
    /// `STOP`'s `KEEP`: the processes stay in the KCB.
    keep: bool,
    times: u64,
}

/// The longest image path `reef_core_operation` takes.
const MAX_IMAGE_PATH: usize = 256;

fn decode_core_request(
    operation: u64,
    core: u64,
    image: u64,
    image_length: u64,
    times: u64,
) -> Result<CoreRequest, Errno> {
    use abi::call::core_operation as op;
    let flags = operation & !0xFF;
    let kind = operation & 0xFF;
    if flags & !op::FLAGS != 0 || ![op::STOP, op::START, op::RESTART, op::PARK, op::UNPARK].contains(&kind) {
        return Err(errno::EINVAL);
    }
    let core = usize::try_from(core).map_err(|_| errno::EINVAL)?;
    if kind == op::PARK || kind == op::UNPARK {
        if image_length != 0 || flags != 0 || (kind == op::PARK && image == op::OWN_CORE) {
            return Err(errno::EINVAL);
        }
        if times != 0 {
            write_user(times, &abi::call::CoreTimes::default())?;
        }
        let other_core = match image {
            op::OWN_CORE => None,
            other => Some(usize::try_from(other).map_err(|_| errno::EINVAL)?),
        };
        return Ok(CoreRequest { operation: kind, core, image: None, other_core, uncached: false, keep: false, times });
    }
    let image = match image_length {
        0 => None,
        length if length as usize > MAX_IMAGE_PATH => return Err(errno::ENAMETOOLONG),
        length => {
            let mut bytes = alloc::vec![0u8; length as usize];
            copy_from_user(&mut bytes, image).map_err(|_| errno::EFAULT)?;
            let path = String::from_utf8(bytes).map_err(|_| errno::EINVAL)?;
            if !path.starts_with('/') || path.contains('\0') {
                return Err(errno::EINVAL);
            }
            Some(path)
        }
    };
    if (image.is_some() && kind == op::STOP) || (flags & op::KEEP != 0 && kind != op::STOP) {
        return Err(errno::EINVAL);
    }
    if times != 0 {
        // Checked before anything happens, so a bad pointer changes nothing.
        write_user(times, &abi::call::CoreTimes::default())?;
    }
    Ok(CoreRequest {
        operation: kind,
        core,
        image,
        other_core: None,
        uncached: flags & op::UNCACHED != 0,
        keep: flags & op::KEEP != 0,
        times,
    })
}

/// `reef_core_operation(operation, core, image, image_length, times)`: stops, starts or restarts a
/// core (see `core::lifecycle`), parks or unparks one (`core::park`).
pub fn core_operation(operation: u64, core: u64, image: u64, image_length: u64, times: u64) -> SyscallResult {
    use crate::core::lifecycle;
    require_root("reef_core_operation")?;
    use abi::call::core_operation as op;
    let request = decode_core_request(operation, core, image, image_length, times)?;
    let image = request.image.as_deref();
    let stopped = |cycles| {
        let ns = crate::time::cycles_to_ns(cycles);
        abi::call::CoreTimes { total_ns: ns, stop_ns: ns, ..Default::default() }
    };
    let result = match request.operation {
        op::STOP if request.keep => lifecycle::stop_keeping(request.core).map(stopped),
        op::STOP => lifecycle::stop(request.core).map(stopped),
        op::START => lifecycle::start(request.core, image, request.uncached),
        op::PARK => crate::core::park::park(request.core, request.other_core.unwrap_or(usize::MAX)),
        op::UNPARK => crate::core::park::unpark(request.core, request.other_core),
        _ => lifecycle::restart(request.core, image, request.uncached),
    };
    match result {
        Ok(times) => {
            if request.times != 0 {
                write_user(request.times, &times)?;
            }
            Ok(0)
        }
        Err(error) => {
            log::info!("core operation on core {} refused: {error}", request.core);
            Err(error.errno())
        }
    }
}

/// `reef_role(core, role)`: changes a core's role while the system runs (see `core::role`).
pub fn role(core: u64, role: u64) -> SyscallResult {
    require_root("reef_role")?;
    let role = crate::core::kcb::Role::from_u64(role).ok_or(errno::EINVAL)?;
    let core = usize::try_from(core).map_err(|_| errno::EINVAL)?;
    match crate::core::role::change(core, role) {
        Ok(()) => Ok(0),
        Err(error) => {
            log::info!("role change of core {core} refused: {error}");
            Err(error.errno())
        }
    }
}
