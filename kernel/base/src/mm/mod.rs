//! Memory of one kernel instance: its partition's frames, its heap, its address space.

pub mod address_space;
pub mod borrowed;
pub mod frames;
pub mod heap;
pub mod held_frames;
pub mod image;
pub mod user;
pub mod window;
