//! Shared-memory message channels between Reef kernel instances.
#![doc = include_str!("../README.md")]
#![no_std]
#![deny(missing_docs)]

extern crate alloc;

#[macro_use]
mod sync;

mod error;
pub mod fuzz;
mod large;
mod message;
mod mpsc;
mod multicast;
mod urpc;

pub use error::ChannelError;
pub use large::{
    chunk_count, send_large, send_large_within, LargeMessageChunks, Reassembler, CHUNK_DATA_LEN, CHUNK_HEADER_LEN,
    FIRST_CHUNK_DATA_LEN, FIRST_CHUNK_HEADER_LEN,
};
pub use message::{Message, CHANNEL_FLAGS, FLAG_CHUNK, FLAG_FIRST, FLAG_LAST, KIND_PADDING, PAYLOAD_CAPACITY};
pub use mpsc::{MpscQueue, MpscReceiver, Reservation};
pub use multicast::{Multicast, MulticastReader};
pub use urpc::{Urpc, UrpcReceiver, UrpcSender};
