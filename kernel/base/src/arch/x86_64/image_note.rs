//! The `.note.reef` of this kernel image: how a boot driver finds its parts and entry.
//!
//! The layout is `kcb::ImageNote`'s; the addresses are link-time constants, the checksum and
//! the image's name zeros that `cargo xtask` overwrites after linking (`kcb::image_checksum`).

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
    .quad {entry}
    .quad __image_start
    .quad __text_end
    .quad __shared_image_end
    .quad __data_start
    .quad __bss_start
    .quad __data_end
    .quad __pristine_start
    .quad __image_end
    .quad {flags}
    .zero {name_size}
    "#,
    size = const kcb::NOTE_SIZE,
    kind = const kcb::NOTE_TYPE,
    version = const kcb::VERSION,
    layout = const kcb::NOTE_LAYOUT,
    flags = const if cfg!(feature = "rt") { kcb::APPLICATION_ONLY } else { 0 },
    name_size = const kcb::NAME_SIZE,
    entry = sym super::boot::instance_entry,
);

extern "C" {
    static __reef_note: u8;
}

/// This image's own `.note.reef` as bytes: the 12-byte note header, the name "Reef\0"
/// padded to 8 bytes, then the `kcb::NOTE_SIZE`-byte description.
pub fn own_note() -> &'static [u8] {
    // SAFETY: the linker script puts `__reef_note` at the start of `.note.reef`, the note this
    // file's `global_asm!` emits (20 bytes of header and name, then the description), in
    // read-only memory for the image's life.
    unsafe { core::slice::from_raw_parts(&raw const __reef_note, 20 + kcb::NOTE_SIZE) }
}

/// The bytes from `start` to `end`, two linker symbols of this image.
///
/// # Safety
/// The symbols must delimit one contiguous run of read-only bytes of the image, `start` first.
pub unsafe fn linked_bytes(start: *const u8, end: *const u8) -> &'static [u8] {
    // SAFETY: guaranteed by the caller; the image lives as long as the instance.
    unsafe { core::slice::from_raw_parts(start, end as usize - start as usize) }
}
