//! Where the linker put the kernel image's parts, as virtual and physical ranges.

use crate::arch::paging::{KERNEL_BASE, PAGE_SIZE};

extern "C" {
    static __image_start: u8;
    static __text_end: u8;
    static __shared_image_end: u8;
    static __data_start: u8;
    static __bss_start: u8;
    static __data_end: u8;
    static __pristine_start: u8;
    static __image_end: u8;
    static __build_id_note: u8;
    static __build_id_note_end: u8;
}

/// The image's sections, as virtual addresses in the high half.
#[derive(Clone, Copy, Debug)]
pub struct ImageLayout {
    /// Text: read-only, executable, one physical copy for every instance.
    pub text: (u64, u64),
    /// Read-only data: one physical copy for every instance.
    pub rodata: (u64, u64),
    /// `.data` then `.bss`: every instance maps its own private copy here.
    pub data: (u64, u64),
    /// Where `.bss` starts inside `data`.
    pub bss_start: u64,
    /// The pristine `.data` template saved at boot, read-only.
    pub pristine: (u64, u64),
}

impl ImageLayout {
    /// Reads the linker symbols.
    pub fn get() -> Self {
        let address = |symbol: *const u8| symbol as u64;
        Self {
            text: (address(&raw const __image_start), address(&raw const __text_end)),
            rodata: (address(&raw const __text_end), address(&raw const __shared_image_end)),
            data: (address(&raw const __data_start), address(&raw const __data_end)),
            bss_start: address(&raw const __bss_start),
            pristine: (address(&raw const __pristine_start), address(&raw const __image_end)),
        }
    }

    /// Bytes of the private part (`.data` + `.bss`), whole pages.
    pub fn private_size(&self) -> u64 {
        self.data.1 - self.data.0
    }

    /// Physical range the whole image was loaded at.
    pub fn physical_range(&self) -> (u64, u64) {
        (self.text.0 - KERNEL_BASE, self.pristine.1.next_multiple_of(PAGE_SIZE) - KERNEL_BASE)
    }

    /// The pristine `.data` bytes (the initial values every new instance starts from).
    pub fn pristine_data(&self) -> &'static [u8] {
        // SAFETY: the boot entry copied `.data` here before Rust ran; nothing writes it after,
        // and every instance maps it read-only for the image's lifetime.
        unsafe { core::slice::from_raw_parts(self.pristine.0 as *const u8, (self.bss_start - self.data.0) as usize) }
    }
}

pub use crate::arch::image_note::linked_bytes;

/// The linker's build id (SHA-1 of the image), as hex.
pub fn build_id() -> [u8; 40] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let start = &raw const __build_id_note;
    let end = &raw const __build_id_note_end;
    let mut hex = [b'-'; 40];
    // SAFETY: the symbols delimit the `.note.gnu.build-id` note in rodata: a 12-byte header
    // (namesz, descsz, type), the name "GNU\0", then `descsz` bytes of id.
    let note = unsafe { linked_bytes(start, end) };
    if note.len() >= 16 {
        let size = u32::from_le_bytes([note[4], note[5], note[6], note[7]]) as usize;
        let id = &note[16..(16 + size).min(note.len())];
        for (i, byte) in id.iter().take(20).enumerate() {
            hex[2 * i] = HEX[usize::from(byte >> 4)];
            hex[2 * i + 1] = HEX[usize::from(byte & 15)];
        }
    }
    hex
}

/// The name of this kernel image, from its `.note.reef` (`cargo xtask` writes it after
/// linking: one build is `full` and `full-v2`); `unnamed` in an image no tool named.
pub fn image_name() -> &'static str {
    let note = crate::arch::image_note::own_note();
    let name = note.get(20 + kcb::NAME_OFFSET..20 + kcb::NOTE_SIZE).unwrap_or_default();
    kcb::name_text(name).filter(|name| !name.is_empty()).unwrap_or("unnamed")
}
