//! The kernel images of `/boot`: `full` (the one QEMU boots), `rt`, `multi`, and `full-v2`
//! (the `full` build under another name and build id: a live kernel update), each with its
//! name and the checksum of its `.note.reef` written after linking; and two broken ones the
//! suite restarts cores with to see them refused: `corrupt` (a flipped byte in the text) and
//! `kcb-v0` (built, as far as its note says, for another KCB layout).
//!
//! An image's name is in its note, not in its code, so `full-v2` needs no build of its own:
//! it is `full`'s ELF renamed, with a build id derived from `full`'s and the name.
//!
//! Every image comes in three kinds ([`ImageKind`]): the production one `cargo xtask build` and
//! `run` boot, with no test or benchmark code; the suite's, with the kernel's `test-hooks` and
//! `bench` features; and the benchmarks', with `bench`. Every kernel build of every kind and
//! image shares one cargo target directory ([`SHARED_TARGET`]), so the kernel's dependencies
//! are built once for all of them (cargo keeps one artifact per feature set, so switching
//! between `run`, `test` and `bench` rebuilds nothing), and each build's ELF is copied to its
//! kind's directory, where it is named and sealed.

use crate::tools::{self, cargo, root, run_checked};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The cargo profile every kernel image is built with (`Cargo.toml`): `release` with thin
/// link-time optimisation, so that the base's small functions inline into the services
/// above across the crate boundary, as they did when the kernel was one crate.
pub const PROFILE: &str = "kernel";

/// Where cargo puts the kernel ELF under a target directory.
pub const ELF_PATH: &str = "x86_64-unknown-none/kernel/kernel";

/// The images built from this tree besides `full`: (name, and file name under `/boot`; cargo
/// features).
const IMAGES: [(&str, &str); 2] = [("rt", "rt"), ("multi", "multi")];

/// The `full` build again under this name: a kernel update with no change of source.
const RENAMED_FULL: &str = "full-v2";

/// What goes into every kernel image a command builds (the full kernel QEMU boots and those
/// of `/boot`), beyond the production kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Nothing: what `cargo xtask build` and `run` boot, and users get.
    Production,
    /// The in-guest tests and fault injection (`test-hooks`) and the benchmarks (`bench`),
    /// which the suite drives: `cargo xtask test`.
    Test,
    /// The benchmarks inside the kernel (`bench`: `msg bench` and its vector, `msg stress`):
    /// `cargo xtask bench`.
    Bench,
}

impl ImageKind {
    /// The kernel crate's cargo features of this kind.
    pub fn features(self) -> &'static [&'static str] {
        match self {
            Self::Production => &[],
            Self::Test => &["test-hooks", "bench"],
            Self::Bench => &["bench"],
        }
    }

    /// This kind's directory under `target/`, where its kernels and initramfs are built: the
    /// production kernel stays where cargo puts it by default.
    pub fn directory(self) -> PathBuf {
        match self {
            Self::Production => root().join("target"),
            Self::Test => root().join("target/kind-test"),
            Self::Bench => root().join("target/kind-bench"),
        }
    }

    /// `features` joined with this kind's, as `--features` takes them (empty: none).
    fn with_features(self, features: &str) -> String {
        let mut all: Vec<&str> = features.split(',').filter(|f| !f.is_empty()).collect();
        all.extend(self.features());
        all.join(",")
    }
}

/// The kind chosen for this run of `cargo xtask`.
static SELECTED: OnceLock<ImageKind> = OnceLock::new();

/// Chooses the kind of every image this run of `cargo xtask` builds: once, before the first
/// build (the command's entry does it). Without a choice, images are [`ImageKind::Production`].
pub fn select(kind: ImageKind) {
    let chosen = *SELECTED.get_or_init(|| kind);
    assert_eq!(chosen, kind, "one run of cargo xtask builds one kind of kernel image");
}

/// The kind of image this run builds.
pub fn selected() -> ImageKind {
    SELECTED.get().copied().unwrap_or(ImageKind::Production)
}

/// The cargo target directory of every kernel build (relative to the repository's root), and
/// of clippy on the kernel.
pub const SHARED_TARGET: &str = "target/kernel-build";

/// Builds the kernel crate for `kind` with `features` (on top of the kind's) in
/// [`SHARED_TARGET`] and copies the ELF to `elf` (a copy: naming and sealing it must not write
/// through cargo's hard link into its own artifact). `what` names the build in an error.
pub fn kernel_build(kind: ImageKind, features: &str, elf: &std::path::Path, what: &str) -> Result<(), String> {
    let mut command = cargo();
    command
        .args(["build", "--quiet", "--profile", PROFILE, "-p", "kernel", "--target", "x86_64-unknown-none"])
        .args(["--target-dir", SHARED_TARGET]);
    let features = kind.with_features(features);
    if !features.is_empty() {
        command.args(["--features", &features]);
    }
    run_checked(&mut command, what)?;
    let built = root().join(SHARED_TARGET).join(ELF_PATH);
    if let Some(directory) = elf.parent() {
        std::fs::create_dir_all(directory).map_err(|e| format!("creating {}: {e}", directory.display()))?;
    }
    // Removed first: an older copy may be a hard link into cargo's artifacts (before the
    // shared directory, cargo itself put the ELF here).
    let _ = std::fs::remove_file(elf);
    std::fs::copy(&built, elf).map_err(|e| format!("copying {} to {}: {e}", built.display(), elf.display()))?;
    Ok(())
}

/// Builds the kernel image `name` with `features` and returns the path of its ELF.
fn build(name: &str, features: &str) -> Result<PathBuf, String> {
    let kind = selected();
    let path = built_path(name);
    kernel_build(kind, features, &path, &format!("building the {name} kernel image ({kind:?})"))?;
    Ok(path)
}

/// Where the `/boot` images of `kind` are built, one target directory each.
fn images_directory(kind: ImageKind) -> PathBuf {
    kind.directory().join("images")
}

/// Where `cargo xtask` leaves the sealed ELF of image `name` of [`IMAGES`] (built with the
/// initramfs) of the kind this run builds, which QEMU can boot too.
pub fn built_path(name: &str) -> PathBuf {
    images_directory(selected()).join(name).join(ELF_PATH)
}

/// Where an image's note description is (file offset), the note, and the file ranges of its
/// high-half loadable segments, as the kernel's loader selects them.
type Layout = (usize, kcb::ImageNote, Vec<(usize, usize)>);

/// The [`Layout`] of `image`.
fn layout(image: &[u8]) -> Result<Layout, String> {
    use goblin::elf::{program_header::PT_LOAD, Elf};
    let elf = Elf::parse(image).map_err(|e| format!("not an ELF file: {e}"))?;
    let mut found = None;
    for note in elf.iter_note_headers(image).into_iter().flatten() {
        let note = note.map_err(|e| format!("bad note: {e}"))?;
        if note.n_type == kcb::NOTE_TYPE && note.name == "Reef" {
            let offset = note.desc.as_ptr() as usize - image.as_ptr() as usize;
            let decoded = kcb::ImageNote::decode(note.desc).map_err(|e| format!("bad .note.reef: {e:?}"))?;
            found = Some((offset, decoded));
        }
    }
    let (offset, note) = found.ok_or("no .note.reef: not a Reef kernel image")?;
    let parts = elf
        .program_headers
        .iter()
        .filter(|header| header.p_type == PT_LOAD && header.p_vaddr >= note.image_start)
        .map(|header| (header.p_offset as usize, header.p_filesz as usize))
        .collect();
    Ok((offset, note, parts))
}

/// Writes `name` into `image`'s note (before [`seal`], which covers it).
pub fn name(image: &mut [u8], name: &str) -> Result<(), String> {
    let (offset, mut note, _) = layout(image)?;
    note.set_name(name).ok_or_else(|| format!("`{name}` is no image name (1 to {} bytes)", kcb::NAME_SIZE))?;
    image[offset..offset + kcb::NOTE_SIZE].copy_from_slice(&note.encode());
    Ok(())
}

/// Gives `image` (a `full` build) the name `new_name` and another build id: the linker's id
/// (the `.note.gnu.build-id` description) with the name's FNV-1a hash folded into its first
/// eight bytes, so every banner and `cores` tell the two apart as two builds.
pub fn rename_build(image: &mut [u8], new_name: &str) -> Result<(), String> {
    name(image, new_name)?;
    let elf = goblin::elf::Elf::parse(image).map_err(|e| format!("not an ELF file: {e}"))?;
    let mut id_at = None;
    for note in elf.iter_note_headers(image).into_iter().flatten() {
        let note = note.map_err(|e| format!("bad note: {e}"))?;
        if note.n_type == goblin::elf::note::NT_GNU_BUILD_ID && note.name == "GNU" && note.desc.len() >= 8 {
            id_at = Some(note.desc.as_ptr() as usize - image.as_ptr() as usize);
        }
    }
    let at = id_at.ok_or("no .note.gnu.build-id to change")?;
    let hash = new_name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mut id = [0u8; 8];
    id.copy_from_slice(&image[at..at + 8]);
    image[at..at + 8].copy_from_slice(&(u64::from_le_bytes(id) ^ hash).to_le_bytes());
    Ok(())
}

/// Writes the checksum of `image`'s loadable bytes into its note.
pub fn seal(image: &mut [u8]) -> Result<(), String> {
    let (offset, _, parts) = layout(image)?;
    let slot = offset + kcb::CHECKSUM_OFFSET;
    let sum = kcb::image_checksum(image, &parts, slot..slot + 8).ok_or("a segment lies beyond the file")?;
    image[slot..slot + 8].copy_from_slice(&sum.to_le_bytes());
    Ok(())
}

/// Names and seals the ELF at `path` in place.
pub fn seal_file(path: &std::path::Path, image_name: &str) -> Result<(), String> {
    let mut image = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    name(&mut image, image_name).map_err(|e| format!("{}: {e}", path.display()))?;
    seal(&mut image).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(path, &image).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// `image` without its sections (symbols, debug information): the header, then the file up
/// to the end of the last segment. A boot driver reads only program headers and notes, and
/// the checksum covers only segments, so the loadable image is the same, in a tenth of the
/// bytes every instance keeps mapped.
pub fn loadable_only(image: &[u8]) -> Result<Vec<u8>, String> {
    let elf = goblin::elf::Elf::parse(image).map_err(|e| format!("not an ELF file: {e}"))?;
    let end = elf
        .program_headers
        .iter()
        .map(|header| header.p_offset + header.p_filesz)
        .chain([elf.header.e_phoff + u64::from(elf.header.e_phnum) * u64::from(elf.header.e_phentsize)])
        .max()
        .unwrap_or(0) as usize;
    let mut stripped = image.get(..end).ok_or("a segment lies beyond the file")?.to_vec();
    // e_shoff (8 bytes at 0x28), e_shnum (0x3c) and e_shstrndx (0x3e): no section table.
    stripped[0x28..0x30].fill(0);
    stripped[0x3c..0x40].fill(0);
    Ok(stripped)
}

/// The two broken images made from `full`: a flipped text byte; another KCB version (with a
/// checksum that matches, so the version is what refuses it).
pub fn broken(full: &[u8]) -> Result<[(String, Vec<u8>); 2], String> {
    let (offset, note, parts) = layout(full)?;
    let mut corrupt = full.to_vec();
    let (text, length) = parts.first().copied().ok_or("no loadable segment")?;
    corrupt[text + length / 2] ^= 0x40;
    let mut old = full.to_vec();
    let other = kcb::ImageNote { kcb_version: note.kcb_version.wrapping_sub(1), ..note };
    old[offset..offset + kcb::NOTE_SIZE].copy_from_slice(&other.encode());
    seal(&mut old)?;
    Ok([("corrupt".into(), corrupt), ("kcb-v0".into(), old)])
}

/// Every `/boot` file: `full` (the ELF at `full`, already sealed), the other images of
/// [`IMAGES`] built and sealed, and the broken ones.
pub fn boot_files(full_path: &std::path::Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let full = loadable_only(&std::fs::read(full_path).map_err(|e| format!("reading {}: {e}", full_path.display()))?)?;
    let mut files = vec![("full".to_string(), full.clone())];
    for (name, features) in IMAGES {
        let path = build(name, features)?;
        seal_file(&path, name)?;
        let image = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        files.push((name.to_string(), loadable_only(&image)?));
    }
    // Written whole (with symbols) where a build would be, for `run --image` to boot.
    let mut renamed = std::fs::read(full_path).map_err(|e| format!("reading {}: {e}", full_path.display()))?;
    rename_build(&mut renamed, RENAMED_FULL)?;
    seal(&mut renamed)?;
    let path = built_path(RENAMED_FULL);
    if let Some(directory) = path.parent() {
        std::fs::create_dir_all(directory).map_err(|e| format!("creating {}: {e}", directory.display()))?;
    }
    std::fs::write(&path, &renamed).map_err(|e| format!("writing {}: {e}", path.display()))?;
    files.push((RENAMED_FULL.to_string(), loadable_only(&renamed)?));
    files.extend(broken(&full)?);
    Ok(files)
}

/// Builds the kernel QEMU boots and seals it.
pub fn build_full() -> Result<PathBuf, String> {
    let path = tools::build_kernel_unsealed()?;
    seal_file(&path, "full")?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the fake image is linked, as the kernel is.
    const BASE: u64 = 0xffff_ffff_8020_0000;

    /// A minimal kernel image, so the test needs no kernel build: an ELF64 x86-64 executable
    /// with one loadable page of "text" holding a `.note.reef` (also named by a `PT_NOTE`),
    /// and a section table at the end that stripping must drop.
    fn fake_kernel() -> Vec<u8> {
        let note = kcb::ImageNote {
            kcb_version: kcb::VERSION,
            note_layout: kcb::NOTE_LAYOUT,
            checksum: 0,
            instance_entry: BASE + 0x10,
            image_start: BASE,
            text_end: BASE + 0x1000,
            shared_end: BASE + 0x1000,
            data_start: BASE + 0x1000,
            bss_start: BASE + 0x1000,
            data_end: BASE + 0x1000,
            pristine_start: BASE + 0x1000,
            image_end: BASE + 0x2000,
            flags: 0,
            name: [0; kcb::NAME_SIZE],
        };
        let mut image = vec![0u8; 0x2000 + 64];
        let put = |image: &mut [u8], at: usize, bytes: &[u8]| image[at..at + bytes.len()].copy_from_slice(bytes);
        put(&mut image, 0, b"\x7fELF\x02\x01\x01");
        put(&mut image, 16, &2u16.to_le_bytes()); // ET_EXEC
        put(&mut image, 18, &62u16.to_le_bytes()); // EM_X86_64
        put(&mut image, 20, &1u32.to_le_bytes());
        put(&mut image, 24, &(BASE + 0x10).to_le_bytes());
        put(&mut image, 32, &64u64.to_le_bytes()); // program headers
        put(&mut image, 40, &0x2000u64.to_le_bytes()); // a section table, for the strip
        put(&mut image, 52, &64u16.to_le_bytes());
        put(&mut image, 54, &56u16.to_le_bytes());
        put(&mut image, 56, &2u16.to_le_bytes());
        put(&mut image, 58, &64u16.to_le_bytes());
        put(&mut image, 60, &1u16.to_le_bytes());
        let note_size = 12 + 8 + kcb::NOTE_SIZE as u64;
        let headers = [(1u32, 5u32, 0x1000u64, BASE, 0x1000u64), (4, 4, 0x1100, BASE + 0x100, note_size)];
        for (i, (kind, flags, offset, address, size)) in headers.into_iter().enumerate() {
            let at = 64 + 56 * i;
            put(&mut image, at, &kind.to_le_bytes());
            put(&mut image, at + 4, &flags.to_le_bytes());
            put(&mut image, at + 8, &offset.to_le_bytes());
            put(&mut image, at + 16, &address.to_le_bytes());
            put(&mut image, at + 24, &(address - BASE + 0x20_0000).to_le_bytes());
            put(&mut image, at + 32, &size.to_le_bytes());
            put(&mut image, at + 40, &size.to_le_bytes());
            put(&mut image, at + 48, &4u64.to_le_bytes());
        }
        put(&mut image, 0x1100, &5u32.to_le_bytes());
        put(&mut image, 0x1104, &(kcb::NOTE_SIZE as u32).to_le_bytes());
        put(&mut image, 0x1108, &kcb::NOTE_TYPE.to_le_bytes());
        put(&mut image, 0x110c, b"Reef\0\0\0\0");
        put(&mut image, 0x1114, &note.encode());
        put(&mut image, 0x1400, b"some text the checksum covers");
        image
    }

    #[test]
    fn sealing_is_idempotent_and_breaking_is_detected() {
        let image = fake_kernel();
        let mut image = loadable_only(&image).unwrap();
        assert_eq!(image.len(), 0x2000, "stripped to the end of its last segment");
        assert_eq!(&image[40..48], &[0; 8], "no section table left");
        assert!(layout(&image).is_ok(), "stripped, the image still has its note and segments");
        seal(&mut image).unwrap();
        let once = image.clone();
        seal(&mut image).unwrap();
        assert_eq!(image, once);
        let (offset, note, parts) = layout(&image).unwrap();
        assert_eq!((offset, parts.as_slice()), (0x1114, &[(0x1000, 0x1000)][..]));
        assert_eq!(note.kcb_version, kcb::VERSION);
        assert_ne!(note.checksum, 0, "sealing wrote the checksum");
        let slot = offset + kcb::CHECKSUM_OFFSET;
        let [(_, corrupt), (_, old)] = broken(&image).unwrap();
        assert_ne!(kcb::image_checksum(&corrupt, &parts, slot..slot + 8), Some(note.checksum));
        let (_, old_note, old_parts) = layout(&old).unwrap();
        assert_eq!(old_note.kcb_version, kcb::VERSION - 1);
        assert_eq!(kcb::image_checksum(&old, &old_parts, slot..slot + 8), Some(old_note.checksum));
    }

    #[test]
    fn naming_writes_the_note_and_refuses_what_does_not_fit() {
        let mut image = loadable_only(&fake_kernel()).unwrap();
        name(&mut image, "full-v2").unwrap();
        let (_, note, _) = layout(&image).unwrap();
        assert_eq!(note.name_text(), Some("full-v2"));
        assert!(name(&mut image, "").is_err(), "an empty name is refused");
        assert!(name(&mut image, "a-name-longer-than-16").is_err(), "a name past the note's room is refused");
        assert_eq!(layout(&image).unwrap().1.name_text(), Some("full-v2"), "a refused name changes nothing");
        seal(&mut image).unwrap();
        let sealed = layout(&image).unwrap().1.checksum;
        name(&mut image, "full").unwrap();
        seal(&mut image).unwrap();
        assert_ne!(layout(&image).unwrap().1.checksum, sealed, "the checksum covers the name");
    }
}
