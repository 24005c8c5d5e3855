//! Message types, handler ids and errors shared by every Reef kernel image and user space.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]

pub mod application;
pub mod call;
pub mod credentials;
pub mod file;
pub mod message;
pub mod migration;
pub mod net;
pub mod process;
pub mod script;
pub mod signal;

/// A Linux errno (the values are `linux_raw_sys::errno`'s; a system call returns it negated):
/// the one error type every layer of the kernel, and the file service's replies, agree on.
pub type Errno = u32;
