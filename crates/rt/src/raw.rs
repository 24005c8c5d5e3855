//! The bare `syscall` instruction: what the kernel returns, with nothing in between.

/// The result of a raw system call as the kernel returned it: a value, or `-errno` for the
/// errors `-4095..=-1` (Linux x86-64 convention, which Reef follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Return(pub i64);

impl Return {
    /// The errno of a failed call, or `None` for a success.
    pub fn errno(self) -> Option<i32> {
        (-4095..=-1).contains(&self.0).then(|| -self.0 as i32)
    }
}

/// Issues system call `number` with six arguments in `rdi, rsi, rdx, r10, r8, r9` and returns
/// `rax` untouched.
///
/// # Safety
///
/// The call may read or write memory through any argument it takes as a pointer, and may change
/// the process (its memory map, signal handling, thread state, whether it keeps running). The
/// caller must make sure that whatever the call does with these arguments leaves the program
/// sound: pointers it writes through point to memory nothing else uses, and calls that unmap,
/// remap or protect memory, change signal handling or thread-local storage, or end the process
/// are not made with arguments that would break the program.
#[inline(always)]
pub unsafe fn syscall(number: u64, arguments: [u64; 6]) -> Return {
    let result: i64;
    // SAFETY: the `syscall` instruction itself only clobbers rcx (return address) and r11
    // (flags), which are declared, and rax (the result); the stack is not touched (the kernel
    // switches stacks), so `nostack` holds. What the call does to memory is the caller's
    // contract above, hence no `nomem`/`readonly`.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") number as i64 => result,
            in("rdi") arguments[0],
            in("rsi") arguments[1],
            in("rdx") arguments[2],
            in("r10") arguments[3],
            in("r8") arguments[4],
            in("r9") arguments[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    Return(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getpid_and_an_unknown_number() {
        // SAFETY: getpid (39) takes no arguments.
        let pid = unsafe { syscall(39, [0; 6]) };
        assert_eq!(pid.0, i64::from(std::process::id()));
        assert_eq!(pid.errno(), None);
        // SAFETY: Reef's `reef_cores` takes no arguments; Linux answers ENOSYS to any number
        // it does not know without looking at them.
        let reef = unsafe { syscall(abi::call::CORES, [0; 6]) };
        assert_eq!(reef.errno(), Some(libc::ENOSYS));
    }

    #[test]
    fn errno_range() {
        assert_eq!(Return(-1).errno(), Some(1));
        assert_eq!(Return(-4095).errno(), Some(4095));
        assert_eq!(Return(-4096).errno(), None, "an address, not an error");
        assert_eq!(Return(0).errno(), None);
    }
}
