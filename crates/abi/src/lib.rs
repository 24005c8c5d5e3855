//! Message types, handler ids and errors shared by every Reef kernel image and user space.
#![no_std]
#![forbid(unsafe_code)]
