//! Core roles and application cores: `reef_role`, `reef_move_to_ac`, `reef_return_from_ac`;
//! moving a process to another timesharing core: `reef_move_process`.

use std::io;

/// A core's role, as `reef_role` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Timesharing core: scheduler, timer, trapping system calls, device interrupts.
    Timesharing,
    /// Application core: one user thread, no timer, no device interrupts.
    Application,
    /// Kernel core: no user code; serves syspages.
    Kernel,
}

impl Role {
    /// The role a word names: `tc`, `ac` or `kc` (any case).
    pub fn parse(word: &str) -> Option<Self> {
        match word.to_ascii_lowercase().as_str() {
            "tc" => Some(Self::Timesharing),
            "ac" => Some(Self::Application),
            "kc" => Some(Self::Kernel),
            _ => None,
        }
    }

    /// The short name (`TC`, `AC`, `KC`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Timesharing => "TC",
            Self::Application => "AC",
            Self::Kernel => "KC",
        }
    }

    fn number(self) -> u64 {
        match self {
            Self::Timesharing => abi::call::role::TIMESHARING,
            Self::Application => abi::call::role::APPLICATION,
            Self::Kernel => abi::call::role::KERNEL,
        }
    }
}

/// Makes `core` take `role` while the system runs.
pub fn set_role(core: usize, role: Role) -> io::Result<()> {
    // SAFETY: `reef_role` takes two numbers and reads no memory.
    unsafe { crate::reef_call(abi::call::ROLE, [core as u64, role.number(), 0, 0]) }.map(drop)
}

/// Moves the calling thread to application core `core` (`None`: any free AC), its system
/// calls served by its home TC or, with `syspage`, through a syspage by a kernel core; returns
/// the AC. The process stays homed where it is.
pub fn move_to_ac(core: Option<usize>, syspage: bool) -> io::Result<usize> {
    let core = core.map_or(u64::MAX, |core| core as u64);
    let flags = if syspage { abi::call::MOVE_SYSPAGE } else { 0 };
    // SAFETY: `reef_move_to_ac` takes two numbers and reads no memory.
    unsafe { crate::reef_call(abi::call::MOVE_TO_AC, [core, flags, 0, 0]) }.map(|core| core as usize)
}

/// Brings the calling thread back from its application core to its home TC.
pub fn return_from_ac() -> io::Result<()> {
    // SAFETY: `reef_return_from_ac` takes no arguments.
    unsafe { crate::reef_call(abi::call::RETURN_FROM_AC, [0; 4]) }.map(drop)
}

/// Moves process `pid` (`None`: this one) to timesharing core `core`, with its pid, memory,
/// descriptors and threads; returns once it runs there (this process: it returns there).
pub fn move_process(pid: Option<u32>, core: usize) -> io::Result<usize> {
    let pid = pid.map_or(0, u64::from);
    // SAFETY: `reef_move_process` takes two numbers and reads no memory.
    unsafe { crate::reef_call(abi::call::MOVE_PROCESS, [pid, core as u64, 0, 0]) }.map(|core| core as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_words() {
        assert_eq!(Role::parse("ac"), Some(Role::Application));
        assert_eq!(Role::parse("KC"), Some(Role::Kernel));
        assert_eq!(Role::parse("tc"), Some(Role::Timesharing));
        assert_eq!(Role::parse("xc"), None);
        assert_eq!(Role::Application.name(), "AC");
    }

    #[test]
    fn on_linux_the_calls_say_enosys() {
        assert_eq!(set_role(1, Role::Application).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
        assert_eq!(move_to_ac(None, false).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
        assert_eq!(return_from_ac().unwrap_err().raw_os_error(), Some(libc::ENOSYS));
    }
}
