//! A cell for state private to one kernel instance, borrowed without a locked instruction.
//!
//! Every instance runs its own copy of the kernel's `.data` and `.bss` (DESIGN: state is
//! replicated, not shared), so a `static` of the kernel image is reached by one core only.
//! Such state still has to be `Sync` to be a `static`; a spin lock made it so, at the price
//! of a locked compare-exchange and a store per use. Under multi-threaded TCG a locked
//! instruction costs far more than a plain one while another vCPU runs, and the receive path
//! took three such locks per empty `drain()`. This cell checks for re-entry with a plain load
//! and store instead: it catches what a spin lock would have turned into a deadlock (a second
//! borrow on the same core, from a nested call or an interrupt handler) as a panic.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{compiler_fence, AtomicBool, Ordering};

/// State of one kernel instance, in a `static` of the kernel image (never in the shared
/// region, which every core maps).
pub struct InstanceCell<T> {
    borrowed: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: an `InstanceCell` lives in a `static` of the kernel image, whose `.data` and `.bss`
// each instance has a private copy of: only the instance's own core reaches it, so no two
// cores ever borrow it. On that core, `borrowed` excludes a second borrow (an interrupt
// handler that borrows it between the check and the mark finishes before the interrupted
// borrow goes on). `T: Send`: the value may be made on one core and used by that instance.
unsafe impl<T: Send> Sync for InstanceCell<T> {}

impl<T> InstanceCell<T> {
    /// A cell holding `value`.
    pub const fn new(value: T) -> Self {
        Self { borrowed: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Borrows the value until the guard drops. Panics if it is borrowed already on this core
    /// (a nested borrow, which a spin lock would have deadlocked on).
    #[inline(always)]
    #[track_caller]
    pub fn lock(&self) -> InstanceGuard<'_, T> {
        // Relaxed load and store: only this core touches the flag (see the `Sync` impl).
        assert!(!self.borrowed.load(Ordering::Relaxed), "instance cell borrowed twice on one core");
        self.borrowed.store(true, Ordering::Relaxed);
        // Keeps the compiler from moving the value's accesses above the mark (an interrupt
        // handler must see the borrow before any access).
        compiler_fence(Ordering::SeqCst);
        InstanceGuard { cell: self }
    }
}

/// A borrow of an [`InstanceCell`].
pub struct InstanceGuard<'a, T> {
    cell: &'a InstanceCell<T>,
}

impl<T> Deref for InstanceGuard<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the guard is the only borrow of the value on the only core that reaches it.
        unsafe { &*self.cell.value.get() }
    }
}

impl<T> DerefMut for InstanceGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.cell.value.get() }
    }
}

impl<T> Drop for InstanceGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // The value's accesses stay before the release of the mark.
        compiler_fence(Ordering::SeqCst);
        self.cell.borrowed.store(false, Ordering::Relaxed);
    }
}
