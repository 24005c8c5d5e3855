//! Architecture support; Reef runs on x86-64 only for now.

pub mod x86_64;
pub use self::x86_64::*;
