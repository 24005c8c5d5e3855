//! Tries one forbidden thing and expects to be killed for it (see README.md).
#![doc = include_str!("../README.md")]

use std::hint::black_box;

/// Where Reef's direct map starts (Linux's too): kernel memory.
const KERNEL_DIRECT_MAP: usize = 0xffff_8000_0010_0000;
/// Where Reef's kernel image is linked (Linux's too).
const KERNEL_IMAGE: usize = 0xffff_ffff_8010_0000;

fn survived(attempt: &str) -> ! {
    println!("TEST isolation-{attempt} fail survived");
    std::process::exit(1)
}

fn other_process() {
    let value = Box::new(std::sync::atomic::AtomicU64::new(1));
    // SAFETY: fork in a single-threaded program; the child only stores and exits.
    let child = unsafe { libc::fork() };
    if child == 0 {
        value.store(2, std::sync::atomic::Ordering::SeqCst);
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: waiting for the child just forked, with a valid status pointer.
    unsafe { libc::waitpid(child, &mut status, 0) };
    match value.load(std::sync::atomic::Ordering::SeqCst) {
        1 => println!("TEST isolation-other-process ok the child's write stayed in the child"),
        other => println!("TEST isolation-other-process fail the parent reads {other}"),
    }
}

fn main() {
    let attempt = std::env::args().nth(1).unwrap_or_default();
    match attempt.as_str() {
        "read-kernel" => {
            // SAFETY: none: the read is meant to fault and end the process.
            let byte = unsafe { std::ptr::read_volatile(black_box(KERNEL_DIRECT_MAP) as *const u8) };
            black_box(byte);
        }
        "write-kernel" => {
            // SAFETY: none: the write is meant to fault and end the process.
            unsafe { std::ptr::write_volatile(black_box(KERNEL_IMAGE) as *mut u8, 0) };
        }
        "jump-kernel" => {
            // SAFETY: none: the call is meant to fault and end the process.
            let function: extern "C" fn() = unsafe { std::mem::transmute(black_box(KERNEL_IMAGE)) };
            function();
        }
        "null" => {
            // SAFETY: none: the write is meant to fault and end the process.
            unsafe { std::ptr::write_volatile(black_box(0usize) as *mut u8, 1) };
        }
        // SAFETY: none: privileged in ring 3, meant to fault (#GP) and end the process.
        "privileged" => unsafe { std::arch::asm!("hlt") },
        // SAFETY: none: meant to fault (#UD) and end the process.
        "undefined" => unsafe { std::arch::asm!("ud2") },
        "divide" => {
            let (numerator, denominator): (u64, u64) = (black_box(1), black_box(0));
            // SAFETY: none: a divide by zero, meant to fault (#DE) and end the process.
            unsafe {
                std::arch::asm!("div {d}", d = in(reg) denominator, inout("rax") numerator => _, inout("rdx") 0u64 => _)
            };
        }
        "other-process" => return other_process(),
        _ => {
            eprintln!(
                "usage: isolation read-kernel|write-kernel|jump-kernel|null|privileged|undefined|divide|other-process"
            );
            std::process::exit(2);
        }
    }
    survived(&attempt)
}
