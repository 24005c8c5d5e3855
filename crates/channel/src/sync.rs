//! Atomics and cells from `core`, or from loom when model checking.
//!
//! Every shared access in this crate goes through these names so that
//! `--cfg loom` swaps in loom's checked versions, including [`UnsafeCell`]
//! for the slot payloads: loom then reports any payload data race.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// `core::cell::UnsafeCell` with loom's closure-based access API, so the
/// same code compiles against both.
#[cfg(not(loom))]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a pointer for reading the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a pointer for writing the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// One iteration of a busy-wait loop.
///
/// On hardware this is `PAUSE`; under loom it yields so the model checker
/// can schedule the thread we are waiting for.
#[inline(always)]
pub(crate) fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// `[value; N]` for a non-`Copy` value: an inline-`const` array normally, so
/// constructors stay `const fn`; `from_fn` under loom, whose atomics are not
/// `const`.
#[cfg(not(loom))]
macro_rules! array_of {
    ($value:expr; $count:expr) => {
        [const { $value }; $count]
    };
}
#[cfg(loom)]
macro_rules! array_of {
    ($value:expr; $count:expr) => {
        core::array::from_fn(|_| $value)
    };
}

/// Declares a `const fn`, or a plain `fn` under loom (loom's atomics have no
/// `const` constructor).
#[cfg(not(loom))]
macro_rules! const_unless_loom {
    ($(#[$meta:meta])* $visibility:vis fn $($rest:tt)*) => {
        $(#[$meta])* $visibility const fn $($rest)*
    };
}
#[cfg(loom)]
macro_rules! const_unless_loom {
    ($(#[$meta:meta])* $visibility:vis fn $($rest:tt)*) => {
        $(#[$meta])* $visibility fn $($rest)*
    };
}
