//! Memory calls: `brk`, anonymous and file-copy `mmap`, `munmap`, `mprotect`.

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
    // A file mapping is a private copy of the file's bytes, read through the file service.
    let file = flags & MAP_ANONYMOUS == 0;
    if file {
        process.state.lock().files.get(fd)?;
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
        if file {
            memory.map_now(start, start + length, protection, AreaKind::Anonymous).map_err(memory_errno)?;
        } else {
            memory.reserve(start, start + length, protection, AreaKind::Anonymous).map_err(memory_errno)?;
        }
        Ok(start)
    })?;
    if !file {
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
