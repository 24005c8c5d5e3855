//! tiny: exits 0, or with the status its one argument names; the exec target of benchmarks.
#![doc = include_str!("../README.md")]
// musl's start-up calls `main` below directly: no Rust runtime set-up (see the README). The
// test build keeps the harness's own `main`.
#![cfg_attr(not(test), no_main)]

use std::ffi::c_int;
#[cfg(not(test))]
use std::ffi::{c_char, CStr};
#[cfg(not(test))]
use std::io::Write;

/// The status for an argument that is not a number 0..=255 (the usual "bad usage" status).
#[cfg(not(test))]
const BAD_USAGE: c_int = 2;

/// The exit status `argument` asks for, if it is a number 0..=255.
fn status_from(argument: &[u8]) -> Option<c_int> {
    std::str::from_utf8(argument).ok()?.parse::<u8>().ok().map(c_int::from)
}

/// The C entry point musl's `__libc_start_main` calls; its return value is the exit status.
///
/// # Safety
///
/// Called by musl's start-up only, with the `argc` and `argv` of the initial stack: `argv` holds
/// `argc` pointers to NUL-terminated strings, then a null.
#[cfg(not(test))]
#[no_mangle]
unsafe extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    if argc < 2 {
        return 0;
    }
    // SAFETY: `argc >= 2`, so `argv[1]` is one of the `argc` valid string pointers the kernel
    // put on the initial stack (this function's contract), alive for the whole program.
    let argument = unsafe { CStr::from_ptr(*argv.add(1)) }.to_bytes();
    status_from(argument).unwrap_or_else(|| {
        let shown = String::from_utf8_lossy(argument);
        let _ = writeln!(std::io::stderr(), "tiny: the argument must be a number 0..=255, not `{shown}`");
        BAD_USAGE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(status_from(b"0"), Some(0));
        assert_eq!(status_from(b"7"), Some(7));
        assert_eq!(status_from(b"255"), Some(255));
        assert_eq!(status_from(b"256"), None);
        assert_eq!(status_from(b"-1"), None);
        assert_eq!(status_from(b"x"), None);
        assert_eq!(status_from(b"\xff"), None);
    }
}
