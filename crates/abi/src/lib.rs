//! Message types, handler ids and errors shared by every Reef kernel image and user space.
#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]

pub mod application;
pub mod call;
pub mod file;
pub mod message;
pub mod migration;
pub mod process;
pub mod script;
pub mod signal;
