//! Memory calls: `brk`, anonymous and file `mmap` (file pages shared through `fs::mapped`),
//! `munmap`, `mprotect`.

use super::SyscallResult;
use crate::arch::paging::PAGE_SIZE;
use crate::mm::user::{AreaKind, MemoryError, Protection};
use crate::proc::remote::MappingChange;
use crate::proc::{Errno, Process};
use linux_raw_sys::errno;

const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;

fn memory_errno(error: MemoryError) -> u32 {
    match error {
        MemoryError::OutOfMemory | MemoryError::NoSpace => errno::ENOMEM,
        MemoryError::BadRange => errno::EINVAL,
    }
}

/// Prepares a change of `[start, end)` of `process`'s mappings, before its state is locked:
/// refused over the syspage `execac --syspage` made (the call removing it may be travelling
/// through it); syspages in the range are unregistered first (their KC lets go of the frames);
/// threads of the process away on application cores are shot down when the guard drops.
fn change_mappings(process: &Process, start: u64, end: u64) -> Result<MappingChange<'_>, Errno> {
    if super::syspage::holds_kernel_page(process.pid, start, end) {
        return Err(errno::EINVAL);
    }
    super::syspage::forget_range(process.pid, start, end);
    Ok(MappingChange::begin(process))
}

pub fn brk(wanted: u64) -> SyscallResult {
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let _change = MappingChange::begin(&process);
    Ok(process.with_memory(|memory| if wanted == 0 { memory.heap_end } else { memory.set_break(wanted) }))
}

pub fn mmap(hint: u64, length: u64, protection: u64, flags: u64, fd: i64, offset: u64) -> SyscallResult {
    if length == 0 || !offset.is_multiple_of(PAGE_SIZE) || flags & (MAP_SHARED | MAP_PRIVATE) == 0 {
        return Err(errno::EINVAL);
    }
    let length = length.checked_add(PAGE_SIZE - 1).ok_or(errno::ENOMEM)? & !(PAGE_SIZE - 1);
    let protection = Protection::from_linux(protection);
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0;
    let replacing = fixed
        && flags & MAP_FIXED_NOREPLACE == 0
        && hint.is_multiple_of(PAGE_SIZE)
        && crate::mm::user::is_user(hint, length);
    let _change =
        if replacing { change_mappings(&process, hint, hint + length)? } else { MappingChange::begin(&process) };
    // A file mapping: the pages of the instance's file page cache, shared read-only with
    // every process mapping them (a write gets a private copy), where the file and the
    // mapping allow it; else a private copy of the file's bytes, read through the file service.
    let file = flags & MAP_ANONYMOUS == 0;
    let mut version = None;
    if file {
        process.state.lock().files.get(fd)?;
        if flags & MAP_SHARED == 0 || !protection.write {
            version = super::files::mapping_version(fd)?;
        }
    }
    let start = process.with_memory(|memory| {
        let start = if fixed {
            if !hint.is_multiple_of(PAGE_SIZE) || !crate::mm::user::is_user(hint, length) {
                return Err(errno::EINVAL);
            }
            if flags & MAP_FIXED_NOREPLACE != 0 {
                if memory.areas().iter().any(|a| a.start < hint + length && hint < a.end) {
                    return Err(errno::EEXIST);
                }
            } else {
                memory.unmap(hint, hint + length).map_err(memory_errno)?;
            }
            hint
        } else {
            memory.find_free(hint & !(PAGE_SIZE - 1), length).map_err(memory_errno)?
        };
        if file && version.is_none() {
            memory.map_now(start, start + length, protection, AreaKind::Anonymous).map_err(memory_errno)?;
        } else {
            memory.reserve(start, start + length, protection, AreaKind::Anonymous).map_err(memory_errno)?;
        }
        Ok(start)
    })?;
    if !file {
        return Ok(start);
    }
    if let Some(version) = version {
        if let Err(error) = map_file_pages(&process, (start, length), (fd, offset), version, protection) {
            let _ = process.with_memory(|memory| memory.unmap(start, start + length));
            return Err(error);
        }
        return Ok(start);
    }
    let copied = super::files::read_for_mapping(fd, offset, length, &mut |at, bytes| {
        process.with_memory(|memory| memory.write(start + at, bytes)).map_err(memory_errno)
    });
    if let Err(error) = copied {
        let _ = process.with_memory(|memory| memory.unmap(start, start + length));
        return Err(error);
    }
    Ok(start)
}

/// Pages read from the file service at once when a mapping misses the cache (32: the
/// service's largest transfer).
const READ_AHEAD_PAGES: u64 = abi::file::MAX_TRANSFER as u64 / PAGE_SIZE;

/// Maps the pages of `fd` from `offset` that hold file bytes into `[start, start + length)`
/// (an area reserved already) from the file page cache, reading those it lacks 128 KiB at a
/// time; pages past the file's end stay demand-zero.
fn map_file_pages(
    process: &Process,
    (start, length): (u64, u64),
    (fd, offset): (i64, u64),
    version: crate::fs::mapped::FileVersion,
    protection: Protection,
) -> Result<(), Errno> {
    let first = offset / PAGE_SIZE;
    let with_bytes = version.size.saturating_sub(offset).div_ceil(PAGE_SIZE).min(length / PAGE_SIZE);
    // What the last read brought: its first page's index in the mapping, and its bytes.
    let mut read: (u64, alloc::vec::Vec<u8>) = (0, alloc::vec::Vec::new());
    for index in 0..with_bytes {
        let frame = match crate::fs::mapped::cached(version, first + index) {
            Some(frame) => frame,
            None => {
                let covered = index >= read.0 && (index - read.0) * PAGE_SIZE < read.1.len() as u64;
                if !covered {
                    let pages = (with_bytes - index).min(READ_AHEAD_PAGES);
                    let mut data = alloc::vec::Vec::with_capacity((pages * PAGE_SIZE) as usize);
                    let at = offset + index * PAGE_SIZE;
                    super::files::read_for_mapping(fd, at, pages * PAGE_SIZE, &mut |_, chunk| {
                        data.extend_from_slice(chunk);
                        Ok(())
                    })?;
                    read = (index, data);
                }
                let from = (((index - read.0) * PAGE_SIZE) as usize).min(read.1.len());
                let to = (from + PAGE_SIZE as usize).min(read.1.len());
                crate::fs::mapped::insert(version, first + index, &read.1[from..to])?
            }
        };
        let mapped = process.with_memory(|memory| memory.map_shared(start + index * PAGE_SIZE, frame, protection));
        // The mapping holds the page now (or, if it failed, no one does).
        crate::fs::mapped::release(frame);
        mapped.map_err(memory_errno)?;
    }
    Ok(())
}

/// `mremap`: a mapping shrinks in place, grows in place when nothing follows it, or (with
/// `MREMAP_MAYMOVE`) moves with its pages to where it fits, or to `new_address` with
/// `MREMAP_FIXED` (what is there is unmapped first). glibc's `realloc` of a large block asks
/// for it.
pub fn mremap(old: u64, old_length: u64, new_length: u64, flags: u64, new_address: u64) -> SyscallResult {
    const MAY_MOVE: u64 = 1;
    const FIXED: u64 = 2;
    let round = |length: u64| length.checked_add(PAGE_SIZE - 1).map(|l| l & !(PAGE_SIZE - 1)).ok_or(errno::EINVAL);
    let (old_length, new_length) = (round(old_length)?, round(new_length)?);
    if !old.is_multiple_of(PAGE_SIZE)
        || old_length == 0
        || new_length == 0
        || flags & !(MAY_MOVE | FIXED) != 0
        || (flags & FIXED != 0 && flags & MAY_MOVE == 0)
        || !crate::mm::user::is_user(old, old_length)
    {
        return Err(errno::EINVAL);
    }
    let fixed = flags & FIXED != 0;
    if fixed
        && (!new_address.is_multiple_of(PAGE_SIZE)
            || !crate::mm::user::is_user(new_address, new_length)
            || (new_address < old + old_length && old < new_address + new_length))
    {
        return Err(errno::EINVAL);
    }
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let _change = change_mappings(&process, old, old + old_length.max(new_length))?;
    if fixed {
        super::syspage::forget_range(process.pid, new_address, new_address + new_length);
    }
    process.with_memory(|memory| {
        let area = memory.area_of(old).copied().ok_or(errno::EFAULT)?;
        if area.end < old + old_length {
            return Err(errno::EFAULT);
        }
        if !fixed && new_length <= old_length {
            if new_length < old_length {
                memory.unmap(old + new_length, old + old_length).map_err(memory_errno)?;
            }
            return Ok(old);
        }
        if !fixed && memory.grow_area(old + old_length, old + new_length).is_ok() {
            return Ok(old);
        }
        if flags & MAY_MOVE == 0 {
            return Err(errno::ENOMEM);
        }
        let to = if fixed {
            memory.unmap(new_address, new_address + new_length).map_err(memory_errno)?;
            new_address
        } else {
            memory.find_free(0, new_length).map_err(memory_errno)?
        };
        let moved = old_length.min(new_length);
        memory.move_area(old, moved, to, new_length).map_err(memory_errno)?;
        if moved < old_length {
            memory.unmap(old + moved, old + old_length).map_err(memory_errno)?;
        }
        Ok(to)
    })
}

pub fn munmap(start: u64, length: u64) -> SyscallResult {
    if length == 0 {
        return Err(errno::EINVAL);
    }
    let end =
        start.checked_add(length).and_then(|e| e.checked_add(PAGE_SIZE - 1)).ok_or(errno::EINVAL)? & !(PAGE_SIZE - 1);
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let _change = change_mappings(&process, start & !(PAGE_SIZE - 1), end)?;
    process.with_memory(|memory| memory.unmap(start, end)).map_err(memory_errno)?;
    Ok(0)
}

pub fn mprotect(start: u64, length: u64, protection: u64) -> SyscallResult {
    if length == 0 {
        return Ok(0);
    }
    let end =
        start.checked_add(length).and_then(|e| e.checked_add(PAGE_SIZE - 1)).ok_or(errno::EINVAL)? & !(PAGE_SIZE - 1);
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let _change = change_mappings(&process, start & !(PAGE_SIZE - 1), end)?;
    process
        .with_memory(|memory| memory.protect(start, end, Protection::from_linux(protection)))
        .map_err(memory_errno)?;
    Ok(0)
}

/// `mincore`: one byte per page of `[start, start + length)` into `vector`, 1 where the page
/// is in memory now. `start` must be page aligned (`EINVAL`); a page outside every mapping is
/// `ENOMEM`, as on Linux. Asked a page table at a time, so a long range needs no large buffer.
pub fn mincore(start: u64, length: u64, vector: u64) -> SyscallResult {
    const PAGES_PER_STEP: u64 = 512;
    if !start.is_multiple_of(PAGE_SIZE) {
        return Err(errno::EINVAL);
    }
    let pages = length.div_ceil(PAGE_SIZE);
    start.checked_add(pages.checked_mul(PAGE_SIZE).ok_or(errno::ENOMEM)?).ok_or(errno::ENOMEM)?;
    let process = crate::proc::current_process().ok_or(errno::EPERM)?;
    let mut done = 0;
    while done < pages {
        let step = (pages - done).min(PAGES_PER_STEP);
        let first = start + done * PAGE_SIZE;
        let resident = process.with_memory(|memory| {
            (0..step)
                .map(|page| {
                    let address = first + page * PAGE_SIZE;
                    memory.area_of(address).ok_or(errno::ENOMEM)?;
                    Ok(u8::from(memory.translate(address).is_some()))
                })
                .collect::<Result<alloc::vec::Vec<u8>, Errno>>()
        })?;
        crate::arch::user::copy_to_user(vector + done, &resident).map_err(|_| errno::EFAULT)?;
        done += step;
    }
    Ok(0)
}
