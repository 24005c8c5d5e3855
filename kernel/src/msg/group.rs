//! Multicast groups: joining, leaving, and sending one line to every member.

use super::receive::GROUP_READERS;
use super::{add, area, counters, messaging_cores, notify, Group, SendError};
use crate::arch::cpu;
use crate::core::shared;
use crate::core::shared::message_area;
use channel::{ChannelError, Message};

/// This core joins multicast group `group` as member `core id`.
pub fn join_group(group: usize) -> Result<(), ChannelError> {
    let reader = area().groups.get(group).ok_or(ChannelError::NotMember)?.join(shared::this_core() as usize)?;
    GROUP_READERS.lock()[group] = Some(reader);
    Ok(())
}

/// This core leaves `group` (its unread messages are released, so slots are freed once, and
/// counted lost: they were sent to it). A sender that died holding the group is relieved.
pub fn leave_group(group: usize) {
    if let Some(reader) = GROUP_READERS.lock().get_mut(group).and_then(Option::take) {
        let unread = message_area::leave_group(reader);
        add(&counters().lost, unread);
    }
}

/// Inserts one line into `group` and returns (insert cycles, notify cycles); members are
/// notified each with its queue's mode. A full or busy group is first cleared of what dead
/// cores left: a member that will never read (evicted, its unread messages counted lost) or
/// a sender that died holding the tail.
// Part of the channels' interface; without the `bench` feature nothing calls it.
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub fn send_group(group: usize, message: &Message) -> Result<(u64, u64), SendError> {
    let ring = area().groups.get(group).ok_or(SendError::Channel(ChannelError::NotMember))?;
    let members = ring.members();
    let start = cpu::read_tsc();
    if let Err(error) = ring.try_send(shared::this_core() as usize, message) {
        if matches!(error, ChannelError::Full | ChannelError::Busy) {
            clear_dead_from_group(ring);
        }
        return Err(SendError::Channel(error));
    }
    let inserted = cpu::read_tsc();
    add(&counters().sent, u64::from(members.count_ones()));
    let reachable = if messaging_cores() >= 64 { u64::MAX } else { (1 << messaging_cores()) - 1 };
    notify::notify_many(members & reachable);
    Ok((inserted - start, cpu::read_tsc() - inserted))
}

#[cfg_attr(not(feature = "bench"), allow(dead_code))]
fn clear_dead_from_group(ring: &Group) {
    message_area::break_dead_holder(ring);
    let members = ring.members();
    for member in (0..messaging_cores()).filter(|m| members & (1 << m) != 0) {
        if let Some(unread) = message_area::evict_dead_member(ring, member) {
            log::debug!("core {member} left group traffic unread ({unread} lines): evicted");
            add(&counters().lost, unread);
        }
    }
}
