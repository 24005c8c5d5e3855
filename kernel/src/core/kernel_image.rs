//! Kernel images a boot driver loads from the initramfs (`/boot/full`, `/boot/rt`, ...).
//!
//! Every image is linked at the same addresses; what tells a boot driver where its parts are
//! is its `.note.reef` (`kcb::ImageNote`). An image is checked whole before any of it is
//! copied: an ELF64 x86-64 executable, a note of a layout we know, built for our KCB version,
//! every loadable high-half segment inside the span the note names and inside the file, and
//! the checksum `cargo xtask` wrote. A checked image is kept in this instance's cache by path
//! (the initramfs is read-only for the system's life, so the bytes cannot change under it).
#![deny(unsafe_code)]

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use linux_raw_sys::errno;
use spin::Mutex;

/// Where the boot driver finds the image a core runs when none is named and this instance
/// was itself loaded from a file (so the booted image's text is not at hand).
pub const DEFAULT_IMAGE_PATH: &str = "/boot/full";

/// A loadable segment of the image's high half.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    /// Virtual address it is linked at.
    pub address: u64,
    /// Where its bytes are in the file, and how many (the rest of its memory is zero).
    pub file_offset: usize,
    pub file_size: usize,
}

/// A checked kernel image.
pub struct KernelImage {
    pub path: String,
    /// The file, inside the read-only initramfs mapping.
    pub bytes: &'static [u8],
    pub note: kcb::ImageNote,
    pub segments: Vec<Segment>,
}

impl KernelImage {
    /// The file bytes of `segment`.
    pub fn segment_bytes(&self, segment: &Segment) -> &'static [u8] {
        &self.bytes[segment.file_offset..segment.file_offset + segment.file_size]
    }
}

/// Why an image cannot be loaded; each names what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// The system booted without an initramfs.
    NoInitramfs,
    /// No file at that path.
    NotFound(String),
    /// Not an ELF64 x86-64 executable.
    NotElf(String),
    /// No `.note.reef`, or one that does not describe a loadable image.
    NoNote(String),
    /// Built for another KCB layout.
    WrongKcbVersion { path: String, image: u32 },
    /// A loadable segment outside the note's span or the file.
    BadSegment(String),
    /// The bytes do not match the checksum written at build time.
    BadChecksum(String),
}

impl ImageError {
    /// The errno `reef_core_operation` returns.
    pub fn errno(&self) -> u32 {
        match self {
            Self::NoInitramfs | Self::NotFound(_) => errno::ENOENT,
            Self::WrongKcbVersion { .. } => errno::EPROTO,
            Self::NotElf(_) | Self::NoNote(_) | Self::BadSegment(_) | Self::BadChecksum(_) => errno::ENOEXEC,
        }
    }
}

impl core::fmt::Display for ImageError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoInitramfs => write!(f, "no initramfs: boot with one to load kernel images"),
            Self::NotFound(path) => write!(f, "{path}: no such kernel image (ls /boot lists them)"),
            Self::NotElf(path) => write!(f, "{path}: not an x86-64 ELF executable"),
            Self::NoNote(path) => write!(f, "{path}: not a Reef kernel image (no usable .note.reef)"),
            Self::WrongKcbVersion { path, image } => write!(
                f,
                "{path}: built for KCB version {image}, this system's KCBs are version {}: rebuild it from this tree",
                kcb::VERSION
            ),
            Self::BadSegment(path) => write!(f, "{path}: a loadable segment lies outside the image or the file"),
            Self::BadChecksum(path) => write!(f, "{path}: corrupt (its checksum does not match its bytes)"),
        }
    }
}

/// The checksum in this image's own `.note.reef` (0 when the build tool did not write one):
/// a file with the same checksum is the image QEMU booted, whose text is at hand already.
pub fn booted_checksum() -> u64 {
    let note = crate::arch::image_note::own_note();
    let at = 20 + kcb::CHECKSUM_OFFSET;
    u64::from_le_bytes(note[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// Checked images by path.
static CACHE: Mutex<BTreeMap<String, Arc<KernelImage>>> = Mutex::new(BTreeMap::new());

/// The image at `path`, and whether it came from the cache; `uncached` reads and checks the
/// file afresh (and refreshes the cache).
pub fn load(path: &str, uncached: bool) -> Result<(Arc<KernelImage>, bool), ImageError> {
    if !uncached {
        if let Some(image) = CACHE.lock().get(path) {
            return Ok((image.clone(), true));
        }
    }
    let image = Arc::new(read(path)?);
    CACHE.lock().insert(String::from(path), image.clone());
    Ok((image, false))
}

fn read(path: &str) -> Result<KernelImage, ImageError> {
    let archive = initramfs::Archive::parse(crate::core::shared::initramfs().ok_or(ImageError::NoInitramfs)?)
        .map_err(|_| ImageError::NoInitramfs)?;
    let entry = archive.resolve(path, true).map_err(|_| ImageError::NotFound(String::from(path)))?;
    if !entry.is_file() {
        return Err(ImageError::NotFound(String::from(path)));
    }
    check(path, entry.data)
}

/// Checks `bytes` as a kernel image (see the module's head).
fn check(path: &str, bytes: &'static [u8]) -> Result<KernelImage, ImageError> {
    use goblin::elf::{header, program_header};
    let owned = || String::from(path);
    let elf = goblin::elf::Elf::parse(bytes).map_err(|_| ImageError::NotElf(owned()))?;
    if !elf.is_64 || elf.header.e_machine != header::EM_X86_64 || elf.header.e_type != header::ET_EXEC {
        return Err(ImageError::NotElf(owned()));
    }
    let mut found = None;
    for note in elf.iter_note_headers(bytes).into_iter().flatten() {
        let Ok(note) = note else { return Err(ImageError::NoNote(owned())) };
        if note.n_type == kcb::NOTE_TYPE && note.name == "Reef" {
            let offset = note.desc.as_ptr() as usize - bytes.as_ptr() as usize;
            found = Some((kcb::ImageNote::decode(note.desc).map_err(|_| ImageError::NoNote(owned()))?, offset));
        }
    }
    let (note, note_offset) = found.ok_or_else(|| ImageError::NoNote(owned()))?;
    if note.kcb_version != kcb::VERSION {
        return Err(ImageError::WrongKcbVersion { path: owned(), image: note.kcb_version });
    }
    let mut segments = Vec::new();
    for header in elf.program_headers.iter().filter(|h| h.p_type == program_header::PT_LOAD) {
        if header.p_vaddr < note.image_start && header.p_vaddr + header.p_memsz <= note.image_start {
            continue; // the PVH entry in the low half: only the bootstrap core runs it
        }
        let inside_span = header.p_vaddr >= note.image_start
            && header.p_vaddr.checked_add(header.p_memsz).is_some_and(|end| end <= note.image_end)
            && header.p_filesz <= header.p_memsz;
        let inside_file = header.p_offset.checked_add(header.p_filesz).is_some_and(|end| end <= bytes.len() as u64);
        if !inside_span || !inside_file {
            return Err(ImageError::BadSegment(owned()));
        }
        segments.push(Segment {
            address: header.p_vaddr,
            file_offset: header.p_offset as usize,
            file_size: header.p_filesz as usize,
        });
    }
    let parts: Vec<(usize, usize)> = segments.iter().map(|s| (s.file_offset, s.file_size)).collect();
    let slot = note_offset + kcb::CHECKSUM_OFFSET;
    let sum = kcb::image_checksum(bytes, &parts, slot..slot + 8);
    if note.checksum == 0 || sum != Some(note.checksum) {
        return Err(ImageError::BadChecksum(owned()));
    }
    Ok(KernelImage { path: owned(), bytes, note, segments })
}
