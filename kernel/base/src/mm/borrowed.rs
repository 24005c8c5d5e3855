//! A root page table whose user half points at another instance's tables: how an
//! application core runs a thread, and a kernel core serves a syspage, of a process homed on
//! another core (DESIGN: the home stays the only writer of those tables).

use crate::arch::paging::{self, flags, physical_to_virtual};
use crate::mm::frames::{self, FrameError};
use core::sync::atomic::Ordering;

/// Top-level entries of the user half.
const USER_ROOT_ENTRIES: usize = 256;

/// This instance's PML4 with the user half borrowed from a process's home.
pub struct BorrowedRoot {
    root: u64,
}

fn entries(root: u64) -> *mut u64 {
    physical_to_virtual(root) as *mut u64
}

impl BorrowedRoot {
    /// A root with this instance's kernel half and an empty user half.
    pub fn new() -> Result<Self, FrameError> {
        let root = frames::allocate_zeroed()?;
        let kernel_root = crate::percore::shared::this_kcb().page_table_root.load(Ordering::Relaxed);
        // SAFETY: both are PML4 frames of this instance, covered by its direct map; the kernel
        // half's entries point at tables every root of this instance shares.
        unsafe {
            core::ptr::copy_nonoverlapping(
                entries(kernel_root).add(USER_ROOT_ENTRIES),
                entries(root).add(USER_ROOT_ENTRIES),
                512 - USER_ROOT_ENTRIES,
            )
        };
        Ok(Self { root })
    }

    /// Replaces the user half by `user_entries` ((index below 256, entry) pairs from the home).
    /// Entries are kept only if present, user-accessible and not huge at this level; the
    /// caller reloads the root afterwards.
    pub fn set_user_entries(&mut self, user_entries: &[(u16, u64)]) {
        let table = entries(self.root);
        // SAFETY: the PML4 frame is this instance's, covered by its direct map; only the user
        // half (indices below 256) is written.
        unsafe {
            for index in 0..USER_ROOT_ENTRIES {
                table.add(index).write(0);
            }
            for &(index, entry) in user_entries {
                let wanted = flags::PRESENT | flags::USER;
                if usize::from(index) < USER_ROOT_ENTRIES && entry & wanted == wanted && entry & flags::LARGE == 0 {
                    table.add(usize::from(index)).write(entry);
                }
            }
        }
    }

    /// Whether this root is the active one.
    pub fn is_loaded(&self) -> bool {
        paging::current_root() == self.root
    }

    /// Makes this root the active one (flushing the TLB's user translations).
    pub fn load(&self) {
        // SAFETY: the kernel half is this instance's own (a copy of its root's), so the running
        // code, its stack and statics stay mapped at the same addresses.
        unsafe { paging::load_root(self.root) };
    }
}

impl Drop for BorrowedRoot {
    fn drop(&mut self) {
        if paging::current_root() == self.root {
            let own = crate::percore::shared::this_kcb().page_table_root.load(Ordering::Relaxed);
            // SAFETY: the instance's own root maps the whole kernel half.
            unsafe { paging::load_root(own) };
        }
        // Only the PML4 is ours: the user half's tables belong to the home.
        if frames::free(self.root).is_err() {
            log::error!("borrowed root {:#x} was not allocated", self.root);
        }
    }
}
