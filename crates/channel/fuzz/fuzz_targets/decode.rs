//! Fuzz target: arbitrary bytes as 64-byte slot images into decode and reassembly.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Panics (including the invariants `fuzz_decode` asserts) are findings.
    let _ = channel::fuzz::fuzz_decode(data);
});
