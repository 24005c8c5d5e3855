//! The fuzzer's own buffers: where pointer arguments may point, fenced by guard pages.
//!
//! Calls get pointers into this buffer so that their copy-in and copy-out paths run. Nothing
//! else of the fuzzer lives there, and a guard page on each side stops a kernel that writes (or
//! reads) further than the buffer with `EFAULT`, instead of letting it corrupt the fuzzer.
//!
//! The bytes are random, but never `/` or `.`: a string the kernel reads from here is a single
//! file name, never `.`, `..` or an absolute path, so calls on paths cannot reach beyond the
//! current directory (run the fuzzer in a scratch directory; it leaves junk files there).
//! The buffer is refilled after any call that was given a pointer into it, so that what a call
//! wrote (`getcwd`, `readlink`) never becomes the path of the next.

use crate::random::Random;
use std::io;

/// The size of a page on x86-64.
pub const PAGE_SIZE: usize = 4096;
/// Pages a pointer argument may point into.
pub const BUFFER_PAGES: usize = 4;
pub const BUFFER_SIZE: usize = BUFFER_PAGES * PAGE_SIZE;

/// The buffer between its two guard pages; unmapped when dropped.
#[derive(Debug)]
pub struct Scratch {
    /// The start of the mapping: the first guard page.
    mapping: *mut u8,
}

impl Scratch {
    const MAPPING_SIZE: usize = BUFFER_SIZE + 2 * PAGE_SIZE;

    /// Maps the buffer and its guard pages (`mmap`, then `mprotect` of the inside).
    pub fn new() -> io::Result<Self> {
        // SAFETY: a fresh anonymous mapping at an address the kernel picks: no existing memory
        // is touched. It starts inaccessible; the inside is opened below.
        let mapping = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::MAPPING_SIZE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapping == libc::MAP_FAILED {
            return Err(io::Error::other(format!("mmap: {}", io::Error::last_os_error())));
        }
        let scratch = Self { mapping: mapping.cast() };
        // SAFETY: the range is the inside of the mapping just made, which nothing else uses;
        // the guard pages on both sides stay inaccessible.
        let status = unsafe { libc::mprotect(scratch.base().cast(), BUFFER_SIZE, libc::PROT_READ | libc::PROT_WRITE) };
        if status != 0 {
            return Err(io::Error::other(format!("mprotect: {}", io::Error::last_os_error())));
        }
        Ok(scratch)
    }

    /// The first byte of the buffer, past the first guard page.
    pub fn base(&self) -> *mut u8 {
        self.mapping.wrapping_add(PAGE_SIZE)
    }

    /// The buffer as bytes.
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `base()` starts `BUFFER_SIZE` readable and writable bytes that only this
        // `Scratch` hands out; `&mut self` makes this the only reference for its lifetime.
        // The kernel writes there only during a call, when no such reference is alive.
        unsafe { std::slice::from_raw_parts_mut(self.base(), BUFFER_SIZE) }
    }

    /// Refills the buffer with random bytes that are never `/` or `.`.
    pub fn refill(&mut self, random: &mut Random) {
        for chunk in self.bytes().chunks_exact_mut(8) {
            let mut word = random.next().to_le_bytes();
            for byte in &mut word {
                if *byte == b'/' || *byte == b'.' {
                    // Any byte but those two and NUL, so the string lengths stay as drawn.
                    *byte ^= 0x40;
                }
            }
            chunk.copy_from_slice(&word);
        }
    }

    /// The buffer's bytes, for the tests.
    #[cfg(test)]
    pub fn contents(&mut self) -> Vec<u8> {
        self.bytes().to_vec()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: the whole mapping `new` made, which nothing refers to any more (this is the
        // last use of `self`).
        unsafe { libc::munmap(self.mapping.cast(), Self::MAPPING_SIZE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refilled_bytes_never_form_a_path_separator_or_a_dot() {
        let mut scratch = Scratch::new().unwrap();
        let mut random = Random::new(1);
        scratch.refill(&mut random);
        let bytes = scratch.contents();
        assert_eq!(bytes.len(), BUFFER_SIZE);
        assert!(!bytes.contains(&b'/') && !bytes.contains(&b'.'));
        assert!(bytes.contains(&0), "strings end somewhere");
        assert!(bytes.iter().filter(|&&byte| byte == 0).count() < BUFFER_SIZE / 64, "but not everywhere");
    }

    #[test]
    fn the_guard_pages_stop_the_kernel() {
        let scratch = Scratch::new().unwrap();
        // SAFETY: getcwd writes at most its size argument, here into the first guard page,
        // which is inaccessible: the kernel must answer EFAULT and write nothing.
        let result = unsafe { rt::raw::syscall(79, [scratch.mapping as u64, 4096, 0, 0, 0, 0]) };
        assert_eq!(result.errno(), Some(libc::EFAULT));
        // SAFETY: as above, but into the buffer itself, which is writable.
        let result = unsafe { rt::raw::syscall(79, [scratch.base() as u64, 4096, 0, 0, 0, 0]) };
        assert_eq!(result.errno(), None);
        // SAFETY: getrandom fills its length, here the buffer and one byte of the guard page
        // after it: the kernel stops at the guard page and returns how much it wrote.
        let result = unsafe { rt::raw::syscall(318, [scratch.base() as u64, BUFFER_SIZE as u64 + 1, 0, 0, 0, 0]) };
        assert!(result.0 == BUFFER_SIZE as i64 || result.errno() == Some(libc::EFAULT), "{result:?}");
    }
}
