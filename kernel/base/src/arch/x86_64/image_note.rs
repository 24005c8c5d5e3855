//! The `.note.reef` of this kernel image: how a boot driver finds its parts and entry.
//!
//! The layout is `kcb::ImageNote`'s; the addresses are link-time constants, the checksum a
//! zero that `cargo xtask` overwrites after linking (`kcb::image_checksum`).

use core::arch::global_asm;

global_asm!(
    r#"
    .section .note.reef, "a"
    .p2align 2
    .long 5
    .long {size}
    .long {kind}
    .asciz "Reef"
    .p2align 2
    .long {version}
    .long {layout}
    .quad 0
    .quad reef_instance_entry
    .quad __image_start
    .quad __text_end
    .quad __shared_image_end
    .quad __data_start
    .quad __bss_start
    .quad __data_end
    .quad __pristine_start
    .quad __image_end
    .quad {flags}
    "#,
    size = const kcb::NOTE_SIZE,
    kind = const kcb::NOTE_TYPE,
    version = const kcb::VERSION,
    layout = const kcb::NOTE_LAYOUT,
    flags = const if cfg!(feature = "rt") { kcb::APPLICATION_ONLY } else { 0 },
);

/// The bytes from `start` to `end`, two linker symbols of this image.
///
/// # Safety
/// The symbols must delimit one contiguous run of read-only bytes of the image, `start` first.
pub unsafe fn linked_bytes(start: *const u8, end: *const u8) -> &'static [u8] {
    // SAFETY: guaranteed by the caller; the image lives as long as the instance.
    unsafe { core::slice::from_raw_parts(start, end as usize - start as usize) }
}

extern "C" {
    /// Where every kernel instance starts: defined in the kernel crate by `kernel_entry!`.
    fn reef_instance_entry(kcb_address: u64) -> !;
}

/// This image's instance entry (what its note records), for a boot driver that starts a core
/// on the image it runs itself.
pub fn instance_entry() -> extern "C" fn(u64) -> ! {
    // SAFETY: `kernel_entry!` defines `reef_instance_entry` as a plain (safe) `extern "C" fn(u64)
    // -> !`; the declaration above is only how this crate names it, so dropping the `unsafe`
    // from the pointer's type changes nothing about the call.
    unsafe { core::mem::transmute::<unsafe extern "C" fn(u64) -> !, extern "C" fn(u64) -> !>(reef_instance_entry) }
}
