//! Kernel side of channels: notification entry point and per-core counters.

use core::sync::atomic::{AtomicU64, Ordering};

/// Notification IPIs this instance took (private .bss).
pub static NOTIFICATIONS_TAKEN: AtomicU64 = AtomicU64::new(0);

/// Called from the message-notification interrupt.
pub fn on_notification() {
    NOTIFICATIONS_TAKEN.fetch_add(1, Ordering::Relaxed);
}
