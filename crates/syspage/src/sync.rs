//! Atomics from `core`, or from loom when model checking.
//!
//! Every shared access in this crate goes through these names, so `--cfg loom` swaps in loom's
//! checked atomics for the model in `tests/loom.rs`. The two macros are `channel`'s (its
//! `sync.rs`) written again: the crates both sides share depend on no Reef crate, not even
//! each other (`xtask check`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU64, Ordering};

/// `[value; N]` for a non-`Copy` value: an inline-`const` array normally, so constructors stay
/// `const fn`; `from_fn` under loom, whose atomics are not `const`.
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

/// Declares a `const fn`, or a plain `fn` under loom (loom's atomics have no `const`
/// constructor).
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
