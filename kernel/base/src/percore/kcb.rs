//! The Kernel Control Block (`kcb::block`, shared by every kernel image), and what the kernel
//! adds to it: the partition as a memory range, and the world switches between OSnodes'
//! saved contexts, checked against their parking states (the park policy is `core::park`'s).

use core::sync::atomic::Ordering;
pub use kcb::block::*;

/// The KCB's partition as a range of the memory map.
pub trait PartitionRange {
    /// The private partition `[start, end)`.
    fn partition(&self) -> platform::memmap::Range;
}

impl PartitionRange for Kcb {
    fn partition(&self) -> platform::memmap::Range {
        let (start, end) = self.partition_bounds();
        platform::memmap::Range { start, end }
    }
}

/// Why a world switch was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchRefused {
    /// This core holds a shared lock the other kernel could wait for.
    HoldsSharedLock,
    /// Interrupts are enabled (a switch is made with them masked).
    InterruptsEnabled,
    /// This instance is not parked on a host (no host context to switch to).
    NoHost,
    /// The guest is not one of this instance's, or its context is not saved (it runs, or
    /// never parked).
    GuestNotSaved,
}

fn may_switch() -> Result<(), SwitchRefused> {
    if super::shared::holds_shared_lock() {
        return Err(SwitchRefused::HoldsSharedLock);
    }
    if crate::arch::cpu::interrupts_enabled() {
        return Err(SwitchRefused::InterruptsEnabled);
    }
    Ok(())
}

/// Parks this instance: saves its context in its KCB, publishes `Runnable` as the last thing
/// it writes (from then on its host may resume it), and halts this processor; returns when a
/// processor resumes it (`fresh`, asked then, says whether that is a newly woken one). The
/// caller set the guest state to `Parking` and named the host.
pub fn park_this_instance(fresh: impl FnOnce() -> bool) -> Result<(), SwitchRefused> {
    let kcb = super::shared::this_kcb();
    may_switch()?;
    if kcb.parking.guest() != GuestState::Parking || kcb.parking.host().is_none() {
        return Err(SwitchRefused::NoHost);
    }
    // SAFETY: `save` is the running instance's own context slot; no shared lock is held and
    // interrupts are masked (checked); the host resumes the context only once `Runnable` is
    // published, which the park routine writes after the save.
    unsafe {
        crate::arch::world_switch::park(&kcb.parking.context, &kcb.parking.guest, GuestState::Runnable as u32, fresh)
    };
    Ok(())
}

/// As a guest running on its host's processor: publishes `state` and switches to the host's
/// saved context; returns when a processor runs this instance again.
pub fn switch_to_host(state: GuestState, fresh: impl FnOnce() -> bool) -> Result<(), SwitchRefused> {
    let region = super::shared::get();
    let kcb = super::shared::this_kcb();
    may_switch()?;
    let Some(host) = kcb.parking.host() else { return Err(SwitchRefused::NoHost) };
    if kcb.parking.guest() == GuestState::Parking {
        // Still on its own processor, before the park: the host runs its own context.
        return Err(SwitchRefused::NoHost);
    }
    let host_kcb = region.kcb(host);
    kcb.parking.guest.store(state as u32, Ordering::Release);
    // SAFETY: this instance is a guest that runs (its host named, its park done), so it runs
    // on the host's processor, which the host's switch to it left: the host's context is saved
    // and runs nowhere; `save` is this instance's own slot; no shared lock is held and
    // interrupts are masked (checked).
    unsafe { crate::arch::world_switch::switch(&kcb.parking.context, &host_kcb.parking.context, fresh) };
    Ok(())
}

/// As a host: switches to `guest`, an OSnode parked on this instance whose context is saved;
/// returns when the guest gives the processor back.
pub fn switch_to_guest(guest: &Kcb) -> Result<(), SwitchRefused> {
    let host = super::shared::this_kcb();
    may_switch()?;
    let saved = matches!(guest.parking.guest(), GuestState::Runnable | GuestState::Idle);
    if !saved || guest.parking.host() != Some(super::shared::this_core() as usize) {
        return Err(SwitchRefused::GuestNotSaved);
    }
    // SAFETY: the guest's context was saved by its park or its last yield and no processor
    // runs it (its state says runnable or idle, which only a saved guest publishes, and it is
    // this instance's guest, which runs only on this processor); `save` is this instance's
    // own slot; no shared lock is held and interrupts are masked (checked).
    unsafe { crate::arch::world_switch::switch(&host.parking.context, &guest.parking.context, || false) };
    Ok(())
}
