//! Atomics from `core`, or from loom when model checking (`tests/loom.rs`).

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

#[cfg(not(loom))]
pub use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
