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

/// The constructors every ring shares, written inside its `impl`: `new_boxed`
/// (zeroed heap memory, or `new()` under loom), `from_zeroed` (shared memory)
/// and `capacity`. `$check` names the associated const that checks the
/// ring's geometry at compile time; `$what` names the ring in the docs.
macro_rules! ring_constructors {
    ($what:literal, $check:ident) => {
        #[doc = concat!("An empty ", $what, " on the heap, made from zeroed memory: the same")]
        /// all-zero start the kernel relies on (host tests and tools).
        #[cfg(not(loom))]
        pub fn new_boxed() -> alloc::boxed::Box<Self> {
            let () = Self::$check;
            crate::message::boxed_zeroed()
        }

        #[doc = concat!("An empty ", $what, " on the heap (loom models: loom atomics cannot")]
        /// start from zeroed memory).
        #[cfg(loom)]
        pub fn new_boxed() -> alloc::boxed::Box<Self> {
            alloc::boxed::Box::new(Self::new())
        }

        #[doc = concat!("Uses shared memory as a ", $what, ": all-zero bytes are an empty one, and")]
        /// one already in use there is taken as it is.
        ///
        /// # Safety
        ///
        /// 1. `pointer` is non-null, aligned to 64 and valid for reads and writes
        ///    of `size_of::<Self>()` bytes for `'a`;
        /// 2. those bytes are all zero, or hold a value of this type (the same
        ///    geometry) that has only been used through this crate;
        /// 3. for `'a`, nothing writes that memory except through this crate
        ///    (every core that maps it uses `from_zeroed` with the same type).
        #[cfg(not(loom))]
        pub unsafe fn from_zeroed<'a>(pointer: *mut Self) -> &'a Self {
            let () = Self::$check;
            // SAFETY: the caller upholds the same conditions (see above).
            unsafe { crate::message::shared_from_zeroed(pointer) }
        }

        /// Number of slots.
        pub const fn capacity(&self) -> usize {
            N
        }
    };
}
