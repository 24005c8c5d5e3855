//! 9P2000.L: the protocol of QEMU's virtio-9p shares, and a client for it.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;

pub mod client;
#[cfg(feature = "server")]
pub mod server;
pub mod wire;

pub use client::{Client, Counters, Errno, Transport};
pub use wire::{Attr, DecodeError, DirEntry, EncodeError, Fid, Qid, Reply, Request, SetAttr, StatFs, Timestamp};
