//! Loading an ELF program (`ET_EXEC` or PIE `ET_DYN`, static or with its `PT_INTERP`
//! interpreter) into a fresh address space, and the initial stack Linux programs expect
//! (argc, argv, envp, auxv).

use crate::arch::paging::PAGE_SIZE;
use crate::mm::user::{AddressSpace, AreaKind, MemoryError, Protection, STACK_SIZE, STACK_TOP};
use alloc::vec::Vec;
use goblin::container::{Container, Ctx, Endian};
use goblin::elf::header::{EI_CLASS, ELFCLASS64, ELFMAG, EM_X86_64, ET_DYN, ET_EXEC, SELFMAG};
use goblin::elf::program_header::{ProgramHeader, PT_INTERP, PT_LOAD, PT_PHDR};
use goblin::elf64::header::Header;

/// Where a static-PIE program is placed (Linux uses a random base near here).
const PIE_BASE: u64 = 0x0000_5555_5555_0000;

/// Why a program could not be loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Not an ELF file Reef runs: bad header, not x86-64, not 64-bit, not executable,
    /// dynamically linked, or segments outside user space (`ENOEXEC`).
    NotExecutable(&'static str),
    /// The partition ran out of frames (`ENOMEM`).
    OutOfMemory,
    /// Arguments and environment do not fit the initial stack (`E2BIG`).
    TooBig,
}

impl From<MemoryError> for LoadError {
    fn from(error: MemoryError) -> Self {
        match error {
            MemoryError::OutOfMemory => Self::OutOfMemory,
            _ => Self::NotExecutable("segment outside user space or overlapping"),
        }
    }
}

/// A loaded program: its address space and where its first thread starts.
pub struct Loaded {
    pub memory: AddressSpace,
    pub entry: u64,
    pub stack_pointer: u64,
}

/// `AT_*` keys of the auxiliary vector [Linux include/uapi/linux/auxvec.h].
mod auxv {
    pub const NULL: u64 = 0;
    pub const PHDR: u64 = 3;
    pub const PHENT: u64 = 4;
    pub const PHNUM: u64 = 5;
    pub const PAGESZ: u64 = 6;
    pub const BASE: u64 = 7;
    pub const FLAGS: u64 = 8;
    pub const ENTRY: u64 = 9;
    pub const UID: u64 = 11;
    pub const EUID: u64 = 12;
    pub const GID: u64 = 13;
    pub const EGID: u64 = 14;
    pub const PLATFORM: u64 = 15;
    pub const HWCAP: u64 = 16;
    pub const CLKTCK: u64 = 17;
    pub const SECURE: u64 = 23;
    pub const RANDOM: u64 = 25;
    pub const EXECFN: u64 = 31;
}

/// Largest total of argument and environment bytes (Linux allows a quarter of the stack).
const MAX_ARGUMENT_BYTES: usize = 256 * 1024;

/// The path of the interpreter (`PT_INTERP`) a dynamically linked `image` names, if any.
/// A malformed file answers `None`: [`load`] then says what is wrong with it.
pub fn interpreter_of(image: &[u8]) -> Option<Result<&str, LoadError>> {
    let (_, program_headers) = parse(image).ok()?;
    let segment = program_headers.iter().find(|s| s.p_type == PT_INTERP)?;
    let start = usize::try_from(segment.p_offset).ok()?;
    let bytes = start.checked_add(usize::try_from(segment.p_filesz).ok()?).and_then(|end| image.get(start..end));
    let path = bytes
        .map(|b| b.split(|&c| c == 0).next().unwrap_or(b))
        .and_then(|b| core::str::from_utf8(b).ok())
        .filter(|p| !p.is_empty());
    Some(path.ok_or(LoadError::NotExecutable("malformed PT_INTERP")))
}

/// Checks the ELF header of `image` and reads its program headers.
fn parse(image: &[u8]) -> Result<(Header, Vec<ProgramHeader>), LoadError> {
    // goblin reads every field with bounds checks and no alignment demands: the initramfs
    // keeps files 4-byte aligned only, and a malformed file must be an error, never a fault.
    if image.len() < 64 || image[..SELFMAG] != ELFMAG[..] {
        return Err(LoadError::NotExecutable("not an ELF file"));
    }
    if image[EI_CLASS] != ELFCLASS64 {
        return Err(LoadError::NotExecutable("not a 64-bit ELF file"));
    }
    let header = Header::parse(image).map_err(|_| LoadError::NotExecutable("malformed ELF header"))?;
    if header.e_machine != EM_X86_64 {
        return Err(LoadError::NotExecutable("not an x86-64 program"));
    }
    if usize::from(header.e_phnum) > 64 {
        return Err(LoadError::NotExecutable("too many program headers"));
    }
    let context = Ctx::new(Container::Big, Endian::Little);
    let program_headers = ProgramHeader::parse(
        image,
        usize::try_from(header.e_phoff).unwrap_or(usize::MAX),
        usize::from(header.e_phnum),
        context,
    )
    .map_err(|_| LoadError::NotExecutable("program headers outside the file"))?;
    Ok((header, program_headers))
}

/// Where one ELF image landed.
struct Placed {
    /// What its addresses were moved by (0 for `ET_EXEC`).
    base: u64,
    entry: u64,
    program_headers: u64,
    program_header_count: u64,
    /// The end of its highest segment.
    highest: u64,
}

/// An image to load, and the version of the file it was read from when its pages may be
/// shared (see `fs::mapped`).
pub type Image<'a> = (&'a [u8], Option<crate::fs::mapped::FileVersion>);

/// Maps the `PT_LOAD` segments of `image` into `memory`: at their addresses for `ET_EXEC`,
/// at `base` (or, if `base` is `None`, wherever `mmap` would put them) for `ET_DYN`.
fn place(memory: &mut AddressSpace, (image, version): Image<'_>, base: Option<u64>) -> Result<Placed, LoadError> {
    let (header, program_headers) = parse(image)?;
    let loads = || program_headers.iter().filter(|s| s.p_type == PT_LOAD && s.p_memsz > 0);
    let base = match header.e_type {
        ET_EXEC => 0,
        ET_DYN => match base {
            Some(base) => base,
            None => {
                // An interpreter goes where the next mmap would: below the others, top-down.
                let low = loads().map(|s| s.p_vaddr & !(PAGE_SIZE - 1)).min().unwrap_or(0);
                let high = loads().map(|s| s.p_vaddr.saturating_add(s.p_memsz)).max().unwrap_or(0);
                let span = high.saturating_sub(low).next_multiple_of(PAGE_SIZE);
                memory.find_free(0, span).map_err(|_| LoadError::OutOfMemory)?.wrapping_sub(low)
            }
        },
        _ => return Err(LoadError::NotExecutable("neither an executable nor a shared object")),
    };
    let mut program_headers_address = None;
    let mut highest = 0u64;
    let mut segments = 0;
    for segment in &program_headers {
        match segment.p_type {
            PT_PHDR => program_headers_address = base.checked_add(segment.p_vaddr),
            PT_LOAD if segment.p_memsz > 0 => {
                let start = base.checked_add(segment.p_vaddr).ok_or(LoadError::NotExecutable("bad address"))?;
                let end = start.checked_add(segment.p_memsz).ok_or(LoadError::NotExecutable("bad size"))?;
                let file_end = segment.p_offset.checked_add(segment.p_filesz);
                if segment.p_filesz > segment.p_memsz || file_end.is_none_or(|e| e > image.len() as u64) {
                    return Err(LoadError::NotExecutable("segment larger than the file"));
                }
                if !crate::mm::user::is_user(start, end - start) || start < PAGE_SIZE {
                    return Err(LoadError::NotExecutable("segment outside user space"));
                }
                let protection =
                    Protection { read: segment.is_read(), write: segment.is_write(), execute: segment.is_executable() };
                let bytes = &image[segment.p_offset as usize..(segment.p_offset + segment.p_filesz) as usize];
                let shared = match version {
                    Some(version) if !protection.write => {
                        place_shared(memory, (start, end), (segment.p_offset, bytes), protection, version)?
                    }
                    _ => false,
                };
                if !shared {
                    memory.map_now(start, end, protection, AreaKind::Program)?;
                    memory.write(start, bytes)?;
                }
                if program_headers_address.is_none()
                    && segment.p_offset <= header.e_phoff
                    && header.e_phoff < segment.p_offset + segment.p_filesz
                {
                    program_headers_address = Some(start + header.e_phoff - segment.p_offset);
                }
                highest = highest.max(end);
                segments += 1;
            }
            _ => {}
        }
    }
    if segments == 0 {
        return Err(LoadError::NotExecutable("no loadable segment"));
    }
    let entry = base.wrapping_add(header.e_entry);
    if memory.area_of(entry).is_none_or(|a| !a.protection.execute) {
        return Err(LoadError::NotExecutable("entry point outside executable code"));
    }
    Ok(Placed {
        base,
        entry,
        program_headers: program_headers_address.unwrap_or(0),
        program_header_count: u64::from(header.e_phnum),
        highest,
    })
}

/// Places a read-only segment `[start, end)`, whose file bytes `bytes` begin at `offset` in
/// the file `version`, with its whole pages of file bytes from the file page cache (shared by
/// every process of this instance that runs the program) and its other pages private. Returns
/// false, having placed nothing, when it cannot: the segment shares a page with another one,
/// or its address and offset do not agree within a page.
fn place_shared(
    memory: &mut AddressSpace,
    (start, end): (u64, u64),
    (offset, bytes): (u64, &[u8]),
    protection: Protection,
    version: crate::fs::mapped::FileVersion,
) -> Result<bool, LoadError> {
    let (first, last) = (start & !(PAGE_SIZE - 1), end.next_multiple_of(PAGE_SIZE));
    if start % PAGE_SIZE != offset % PAGE_SIZE || memory.areas().iter().any(|a| a.start < last && first < a.end) {
        return Ok(false);
    }
    memory.reserve(first, last, protection, AreaKind::Program)?;
    let file_end = start + bytes.len() as u64;
    let mut page = first;
    while page < last {
        if page >= start && page + PAGE_SIZE <= file_end {
            let at = (page - start) as usize;
            let index = (offset + (page - start)) / PAGE_SIZE;
            let frame = match crate::fs::mapped::cached(version, index) {
                Some(frame) => frame,
                None => crate::fs::mapped::insert(version, index, &bytes[at..at + PAGE_SIZE as usize])
                    .map_err(|_| LoadError::OutOfMemory)?,
            };
            let mapped = memory.map_shared(page, frame, protection);
            crate::fs::mapped::release(frame);
            mapped?;
        } else {
            // A page the file fills in part (or not at: the segment's zeroed tail): its own.
            memory.map_now(page, page + PAGE_SIZE, protection, AreaKind::Program)?;
            let (from, to) = (page.max(start), (page + PAGE_SIZE).min(file_end));
            if from < to {
                memory.write(from, &bytes[(from - start) as usize..(to - start) as usize])?;
            }
        }
        page += PAGE_SIZE;
    }
    Ok(true)
}

/// Loads `image` and builds its initial stack with `arguments` and `environment`. A
/// dynamically linked program comes with its `interpreter`'s image (see [`interpreter_of`]):
/// the interpreter is placed too and runs first, told of the program by the auxiliary vector
/// (`AT_BASE`, `AT_PHDR`, `AT_ENTRY`), as Linux's `binfmt_elf` does.
pub fn load(
    image: Image<'_>,
    interpreter: Option<Image<'_>>,
    path: &str,
    arguments: &[&[u8]],
    environment: &[&[u8]],
) -> Result<Loaded, LoadError> {
    let mut memory = AddressSpace::new().map_err(|_| LoadError::OutOfMemory)?;
    let program = place(&mut memory, image, Some(PIE_BASE))?;
    let heap_start = program.highest.next_multiple_of(PAGE_SIZE);
    memory.heap_start = heap_start;
    memory.heap_end = heap_start;
    let stack_bottom = STACK_TOP - STACK_SIZE;
    memory.reserve(stack_bottom, STACK_TOP, Protection::READ_WRITE, AreaKind::Stack)?;
    let (entry, interpreter_base) = match interpreter {
        None => (program.entry, 0),
        Some(interpreter) => {
            if interpreter_of(interpreter.0).is_some() {
                return Err(LoadError::NotExecutable("the interpreter is itself dynamically linked"));
            }
            let placed = place(&mut memory, interpreter, None)?;
            (placed.entry, placed.base)
        }
    };
    let facts = InitialStack {
        path,
        arguments,
        environment,
        program_headers: program.program_headers,
        program_header_count: program.program_header_count,
        entry: program.entry,
        interpreter_base,
    };
    let stack_pointer = facts.build(&mut memory)?;
    Ok(Loaded { memory, entry, stack_pointer })
}

struct InitialStack<'a> {
    path: &'a str,
    arguments: &'a [&'a [u8]],
    environment: &'a [&'a [u8]],
    program_headers: u64,
    program_header_count: u64,
    entry: u64,
    /// Where the interpreter was placed, 0 for a static program (`AT_BASE`).
    interpreter_base: u64,
}

impl InitialStack<'_> {
    /// Writes strings, random bytes, then the argc/argv/envp/auxv block below them, the
    /// stack pointer 16-byte aligned at argc [System V x86-64 ABI §3.4.1].
    fn build(&self, memory: &mut AddressSpace) -> Result<u64, LoadError> {
        let string_bytes: usize =
            self.arguments.iter().chain(self.environment.iter()).map(|s| s.len() + 1).sum::<usize>()
                + self.path.len()
                + 1;
        if string_bytes > MAX_ARGUMENT_BYTES {
            return Err(LoadError::TooBig);
        }
        // Map the pages the initial block needs now (the rest of the stack is demand-zero).
        let needed = (string_bytes + 64 + (self.arguments.len() + self.environment.len() + 40) * 8) as u64;
        let pages = needed.div_ceil(PAGE_SIZE) + 1;
        memory.map_now(STACK_TOP - pages * PAGE_SIZE, STACK_TOP, Protection::READ_WRITE, AreaKind::Stack)?;

        let mut top = STACK_TOP;
        let mut push_bytes = |memory: &mut AddressSpace, bytes: &[u8], nul: bool| -> Result<u64, LoadError> {
            top -= bytes.len() as u64 + u64::from(nul);
            memory.write(top, bytes)?;
            if nul {
                memory.write(top + bytes.len() as u64, &[0])?;
            }
            Ok(top)
        };
        let execfn = push_bytes(memory, self.path.as_bytes(), true)?;
        let platform = push_bytes(memory, b"x86_64", true)?;
        let mut random = [0u8; 16];
        crate::random::fill(&mut random);
        let random_address = push_bytes(memory, &random, false)?;
        let mut argument_pointers = Vec::with_capacity(self.arguments.len());
        for argument in self.arguments {
            argument_pointers.push(push_bytes(memory, argument, true)?);
        }
        let mut environment_pointers = Vec::with_capacity(self.environment.len());
        for variable in self.environment {
            environment_pointers.push(push_bytes(memory, variable, true)?);
        }
        let hardware_capabilities = u64::from(crate::arch::cpu::cpuid(1, 0).edx);
        let auxiliary = [
            (auxv::PHDR, self.program_headers),
            (auxv::PHENT, 56),
            (auxv::PHNUM, self.program_header_count),
            (auxv::PAGESZ, PAGE_SIZE),
            (auxv::BASE, self.interpreter_base),
            (auxv::FLAGS, 0),
            (auxv::ENTRY, self.entry),
            (auxv::UID, 0),
            (auxv::EUID, 0),
            (auxv::GID, 0),
            (auxv::EGID, 0),
            (auxv::PLATFORM, platform),
            (auxv::HWCAP, hardware_capabilities),
            (auxv::CLKTCK, 100),
            (auxv::SECURE, 0),
            (auxv::RANDOM, random_address),
            (auxv::EXECFN, execfn),
            (auxv::NULL, 0),
        ];
        let words = 1 + argument_pointers.len() + 1 + environment_pointers.len() + 1 + auxiliary.len() * 2;
        let mut block: Vec<u64> = Vec::with_capacity(words);
        block.push(self.arguments.len() as u64);
        block.extend_from_slice(&argument_pointers);
        block.push(0);
        block.extend_from_slice(&environment_pointers);
        block.push(0);
        for (key, value) in auxiliary {
            block.push(key);
            block.push(value);
        }
        let stack_pointer = (top - (block.len() * 8) as u64) & !15;
        let bytes: Vec<u8> = block.iter().flat_map(|w| w.to_le_bytes()).collect();
        memory.write(stack_pointer, &bytes)?;
        Ok(stack_pointer)
    }
}
