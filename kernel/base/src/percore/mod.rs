//! Per-core state every layer reads: the shared region (boot facts, KCBs, the channel area)
//! and this instance's KCB.

pub mod instance_cell;
pub mod kcb;
pub mod shared;
