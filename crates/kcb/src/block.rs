//! The Kernel Control Block: the per-core state that lives outside the kernel image.
//!
//! One KCB per core, in the shared region. Ownership: while a core is offline its boot driver
//! writes the placement fields; from `Booting` on, only the core itself writes its KCB
//! (state, ticks, fault record). Every field is atomic so other cores may read it at any time.
//! The layout is [`crate::VERSION`]'s: every kernel image built from this tree agrees on it.

use crate::sync::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// System-call numbers counted one by one (`syscalls`); higher ones only in the totals. (A
/// handful under loom, whose model builds a KCB of checked atomics on a small stack.)
#[cfg(not(loom))]
pub const COUNTED_SYSCALLS: usize = 512;
#[cfg(loom)]
pub const COUNTED_SYSCALLS: usize = 4;

/// Interrupt vectors counted (all of them; a handful under loom, as above).
#[cfg(not(loom))]
pub const COUNTED_VECTORS: usize = 256;
#[cfg(loom)]
pub const COUNTED_VECTORS: usize = 4;

/// Bytes of a kernel image name a KCB records.
pub const IMAGE_NAME_LENGTH: usize = 16;

/// Where a core is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CoreState {
    /// Not started (or not listed).
    Offline = 0,
    /// A boot driver claimed it and is starting it.
    Booting = 1,
    /// Its kernel instance runs.
    Running = 2,
    /// It took a CPU exception and stopped; the other cores go on.
    Faulted = 3,
    /// It was started but did not come up in time.
    Unresponsive = 4,
    /// A boot driver stopped it (`reef_core_operation`): its KCB is kept for a later start.
    Stopped = 5,
}

impl CoreState {
    fn from_u32(value: u32) -> Self {
        match value {
            1 => Self::Booting,
            2 => Self::Running,
            3 => Self::Faulted,
            4 => Self::Unresponsive,
            5 => Self::Stopped,
            _ => Self::Offline,
        }
    }

    /// Whether a kernel instance runs there and answers messages. Only a running core is sent
    /// to, and only a running core's half-done sends are waited for: a faulted, offline or
    /// unresponsive one will never finish what it started.
    pub fn is_live(self) -> bool {
        self == Self::Running
    }

    /// Lower-case name, as `cores` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Offline => "offline",
            Self::Booting => "booting",
            Self::Running => "running",
            Self::Faulted => "faulted",
            Self::Unresponsive => "unresponsive",
            Self::Stopped => "stopped",
        }
    }
}

/// What a core is for (NIX roles); every core is a TC until roles can change at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Role {
    /// Timesharing core: scheduler, timer, traps, device interrupts.
    Timesharing = 0,
    /// Application core: one user thread, no timer.
    Application = 1,
    /// Kernel core: serves channels and syspages for others.
    Kernel = 2,
}

impl Role {
    /// The role with number `value` (`abi::call::role`'s numbers), if any.
    pub fn from_u64(value: u64) -> Option<Self> {
        match value {
            0 => Some(Self::Timesharing),
            1 => Some(Self::Application),
            2 => Some(Self::Kernel),
            _ => None,
        }
    }

    /// Short name, as `cores` prints it.
    pub fn name(value: u32) -> &'static str {
        match value {
            0 => "TC",
            1 => "AC",
            2 => "KC",
            _ => "?",
        }
    }
}

/// The report a faulting core leaves before it stops.
#[repr(C)]
#[derive(Default)]
pub struct FaultRecord {
    pub vector: AtomicU64,
    pub instruction_pointer: AtomicU64,
    pub error_code: AtomicU64,
    pub fault_address: AtomicU64,
}

/// One core's KCB. Its first four words keep their place in every layout version, so a
/// kernel can read the version and, on a mismatch, still say so through `state`.
#[repr(C, align(4096))]
pub struct Kcb {
    /// `kcb::VERSION` of the kernel that laid the KCB out; an instance refuses another.
    pub version: AtomicU32,
    /// Logical core id (index in the MADT order).
    pub core_id: AtomicU32,
    /// Local APIC id.
    pub apic_id: AtomicU32,
    /// [`CoreState`] as a number.
    pub state: AtomicU32,
    /// [`Role`] as a number.
    pub role: AtomicU32,
    /// The private partition `[start, end)`.
    pub partition_start: AtomicU64,
    pub partition_end: AtomicU64,
    /// First partition address the instance's own allocators may use (below: tables, data, stack).
    pub reserved_end: AtomicU64,
    /// Physical address of the instance's PML4.
    pub page_table_root: AtomicU64,
    /// Virtual address of the shared region (same in every instance).
    pub shared_region: AtomicU64,
    /// TSC when the instance entered its kernel.
    pub started_tsc: AtomicU64,
    /// Timer interrupts taken.
    pub ticks: AtomicU64,
    /// Interrupts and exceptions taken, by vector (`/proc/interrupts`).
    pub interrupts: InterruptCounters,
    /// Why it stopped, when faulted.
    pub fault: FaultRecord,
    /// Name of the kernel image the instance runs (NUL-padded), written by the instance at entry.
    pub image_name: [AtomicU8; IMAGE_NAME_LENGTH],
    /// Times a boot driver claimed this core to start it (1 after boot; each restart adds one).
    pub incarnation: AtomicU64,
    /// Message counters (`msg stats`).
    pub messages: MessageCounters,
    /// System calls taken by trap (`syscalls`).
    pub syscalls: SyscallCounters,
    /// Processes homed here (`ps`, the leak check).
    pub processes: ProcessCounters,
    /// On an application core: the thread it runs (`pid << 32 | tid`), 0 when free. Written by
    /// the AC itself when it takes or drops a thread.
    pub application_thread: AtomicU64,
    /// On a kernel core: the syspages registered with it.
    pub syspages: AtomicU32,
    /// Set by a boot driver's stop request; the core stops at its next idle point.
    pub stop_requested: AtomicU32,
    /// Set by a boot driver for the whole of a restart ([`RESTARTING`]), or for a stop that
    /// keeps the core's processes for a later start ([`STOPPING_TO_KEEP`]): the homes of an
    /// application core's thread wait for the new kernel instead of taking the thread back
    /// for good, and messages for the core wait for its next kernel.
    pub restart_pending: AtomicU32,
    /// Times of the last stop and start (TSC): stop asked, stopped; STARTUP IPI sent, running.
    pub stop_asked_tsc: AtomicU64,
    pub stopped_tsc: AtomicU64,
    pub startup_tsc: AtomicU64,
    pub running_tsc: AtomicU64,
    /// Stops and starts through `reef_core_operation` (not counting the boot).
    pub stops: AtomicU64,
    /// Whether the instance's image was loaded from a file (its text is in its partition) or
    /// is the one QEMU booted (text shared by every instance that runs it).
    pub image_from_file: AtomicU32,
    /// Parking: where this OSnode's kernel runs when it is not on its own core, and its
    /// saved processor context while it is on none.
    pub parking: Parking,
    /// On a kernel core: the syspages it serves, one record per window slot, so that a
    /// restarted kernel serves them on from where its predecessor's rings stood.
    pub served_syspages: [ServedSyspage; MAX_SERVED_SYSPAGES],
    /// Processes whose pid is from this OSnode's range but which are homed elsewhere now
    /// (moved to another timesharing core): where each lives, for every core's routing.
    pub moved_away: MovedAway<MAX_MOVED_AWAY>,
    /// Moves of processes out of this OSnode in flight, each decided once: taken by the
    /// destination or abandoned by this OSnode ([`MoveFates`]).
    pub moves_out: [MoveFate; MAX_MOVES_OUT],
    /// Processes kept in place through a restart (Barrelfish/DC: the KCB holds the OSnode's
    /// processes): the stopping kernel writes their images into frames of its own partition,
    /// the next kernel adopts them with their memory where it is.
    pub kept: KeptProcesses,
}

/// The processes a restarting timesharing kernel keeps for the next kernel of its OSnode.
///
/// The images are one stream of records in a chain of frames of the OSnode's partition
/// ([`crate::kept`]). The frames the images name and
/// the chain's own lie above [`INSTANCE_RESERVE`] plus the heap, where every image's frame
/// allocator starts, so the next kernel can keep them out of its free frames before it takes
/// any.
#[repr(C)]
#[derive(Default)]
pub struct KeptProcesses {
    /// Physical address of the chain's first frame; 0: nothing kept. Written by the stopping
    /// kernel before it publishes `stopped`, taken (swapped to 0) by the next at entry.
    pub chain: AtomicU64,
    /// Processes of the running kernel stopped at their safe point, waiting for the stop that
    /// a restart asked (the asker waits until every homed process is).
    pub frozen: AtomicU32,
}

/// Bytes at the start of an OSnode's partition for its kernel's page tables, private data and
/// stacks: the same for every image, so the heap and the frame allocator start at the same
/// place whichever image runs, and a restart can keep frames above them.
pub const INSTANCE_RESERVE: u64 = 1 << 20;

/// Ids (pids and tids) of one OSnode's range that may live on other cores at once: a process
/// of more threads than this cannot move. 512 fit in the KCB's three pages. (A handful under loom,
/// whose model builds a KCB on a small stack.)
#[cfg(not(loom))]
pub const MAX_MOVED_AWAY: usize = 512;
#[cfg(loom)]
pub const MAX_MOVED_AWAY: usize = 4;

/// [`Kcb::restart_pending`]: a boot driver restarts the core.
pub const RESTARTING: u32 = 1;
/// [`Kcb::restart_pending`]: a boot driver stops the core, its processes kept in the KCB for a
/// later start.
pub const STOPPING_TO_KEEP: u32 = 2;

/// A process of an OSnode's pid range homed on another core: `pid` (0: the slot was never
/// used; [`FORGOTTEN`]: it was, and is free again) and the core it lives on. Whoever moves
/// the process writes `core`; a slot is taken by a compare-exchange of `pid` from 0 or
/// `FORGOTTEN`, and freed by storing `FORGOTTEN` when the process ends or comes back to its
/// range's OSnode. While a slot names a pid, the range's OSnode does not hand it out again.
#[repr(C)]
#[derive(Default)]
pub struct MovedProcess {
    pub pid: AtomicU32,
    pub core: AtomicU32,
}

/// A slot being filled: taken, its id not published yet (never an id: pids stay below it).
const CLAIMING: u32 = u32::MAX;
/// A slot whose id was forgotten: free, but a lookup goes on past it (see [`MovedTable`]).
pub const FORGOTTEN: u32 = u32::MAX - 1;

/// What [`Kcb::moved_away`] holds: the slots of the ids living elsewhere, and how many are
/// taken.
#[repr(C)]
pub struct MovedAway<const N: usize> {
    /// Slots taken or being taken: 0 lets a lookup answer at once (nothing of the range
    /// lives elsewhere, the usual case).
    pub live: AtomicU32,
    pub slots: [MovedProcess; N],
}

impl<const N: usize> Default for MovedAway<N> {
    fn default() -> Self {
        Self { live: AtomicU32::new(0), slots: core::array::from_fn(|_| MovedProcess::default()) }
    }
}

impl<const N: usize> MovedAway<N> {
    /// The table these slots make.
    pub fn table(&self) -> MovedTable<'_> {
        MovedTable { live: &self.live, slots: &self.slots }
    }
}

/// The table of an OSnode's ids (pids and tids of its range) that live on other cores: what
/// [`Kcb::moved_away`] holds. Any core writes it (the one a process moves to, the one it ends
/// on); each slot is claimed by one compare-exchange, and its core is written before its id
/// is published (Release), so whoever finds the id (Acquire) reads where it lives.
///
/// An open-addressing hash table: id `i` sits in the first free slot from `i % N` on, wrapping
/// around, and a lookup walks from there up to a slot never used (0). A forgotten id leaves
/// [`FORGOTTEN`], never 0, so no walk is cut short by a forget, and a later claim on the walk
/// takes the first `FORGOTTEN` or 0 it meets. Consecutive ids (a process's threads) fall in
/// consecutive slots. Once most slots were used, an absent id's walk is long (the whole table
/// at worst, the cost of the linear table this replaced); `live` lets a lookup skip the walk
/// when nothing of the range lives elsewhere.
pub struct MovedTable<'a> {
    live: &'a AtomicU32,
    slots: &'a [MovedProcess],
}

impl MovedTable<'_> {
    /// The slots in the order a walk for `id` visits them.
    fn walk(&self, id: u32) -> impl Iterator<Item = &MovedProcess> {
        let start = id as usize % self.slots.len().max(1);
        self.slots[start..].iter().chain(&self.slots[..start])
    }

    fn slot_of(&self, id: u32) -> Option<&MovedProcess> {
        if id == 0 || id == CLAIMING || id == FORGOTTEN || self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        for slot in self.walk(id) {
            match slot.pid.load(Ordering::Acquire) {
                0 => return None,
                found if found == id => return Some(slot),
                _ => {}
            }
        }
        None
    }

    /// The core `id` lives on, if it is recorded.
    pub fn core_of(&self, id: u32) -> Option<u32> {
        self.slot_of(id).map(|slot| slot.core.load(Ordering::Acquire))
    }

    /// Whether [`record`](Self::record) of `id` would find a slot now.
    pub fn has_room_for(&self, id: u32) -> bool {
        self.slot_of(id).is_some() || self.slots.iter().any(|slot| is_free(slot.pid.load(Ordering::Relaxed)))
    }

    /// Records that `id` lives on `core`: its slot's core changes, or a free slot is claimed.
    /// Returns false when every slot is taken (nothing changed).
    pub fn record(&self, id: u32, core: u32) -> bool {
        if id == 0 || id == CLAIMING || id == FORGOTTEN {
            return false;
        }
        if let Some(slot) = self.slot_of(id) {
            slot.core.store(core, Ordering::Release);
            return true;
        }
        // Counted before the claim: a lookup that reads 0 here finds nothing to find.
        self.live.fetch_add(1, Ordering::AcqRel);
        let claimed = self.walk(id).find(|slot| {
            let mut seen = slot.pid.load(Ordering::Relaxed);
            while is_free(seen) {
                match slot.pid.compare_exchange(seen, CLAIMING, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return true,
                    Err(now) => seen = now,
                }
            }
            false
        });
        let Some(slot) = claimed else {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return false;
        };
        slot.core.store(core, Ordering::Relaxed);
        // Release: a reader that finds the id reads the core written above.
        slot.pid.store(id, Ordering::Release);
        true
    }

    /// `id` is recorded no more (its process ended, or came back to its range's OSnode).
    pub fn forget(&self, id: u32) {
        // One compare-exchange: of two cores forgetting the same id, one counts it.
        let freed = self
            .slot_of(id)
            .is_some_and(|slot| slot.pid.compare_exchange(id, FORGOTTEN, Ordering::Release, Ordering::Relaxed).is_ok());
        if freed {
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Ids recorded (or being recorded) now.
    pub fn live(&self) -> u32 {
        self.live.load(Ordering::Relaxed)
    }
}

/// Whether a slot holding `pid` may be claimed.
fn is_free(pid: u32) -> bool {
    pid == 0 || pid == FORGOTTEN
}

/// Moves out of one OSnode that may be in flight at once (its processes move one by one
/// through a role change or a stop, but each has a packer of its own).
pub const MAX_MOVES_OUT: usize = 16;

/// The fate of one move of a process out of an OSnode: 0 when free, else the move's id
/// (its low 62 bits) shifted left by two, with the state in the two low bits ([`fate`]).
#[repr(C)]
#[derive(Default)]
pub struct MoveFate {
    pub word: AtomicU64,
}

/// The states of a [`MoveFate`].
pub mod fate {
    /// The origin sent the image and waits for the answer.
    pub const OPEN: u64 = 1;
    /// The destination builds the process: it will answer, and the origin waits for that.
    pub const TAKEN: u64 = 2;
    /// The origin gave up waiting and runs the process on: the destination must not build it.
    pub const ABANDONED: u64 = 3;
}

/// The moves out of an OSnode in flight: what [`Kcb::moves_out`] holds.
///
/// A move's outcome is decided by one compare-exchange of its word. The origin *opens* a word
/// before it sends the image; the destination *takes* it (`OPEN → TAKEN`) before it builds
/// anything; the origin, when it tires of waiting for the answer, *abandons* it (`OPEN →
/// ABANDONED`). Whichever comes first wins: a destination that finds the move abandoned (or
/// its word closed) refuses it, and an origin that finds it taken waits for the answer.
/// Without it, an origin that gave up and ran the process on, and a destination that built it
/// after all, both ran it.
pub struct MoveFates<'a>(pub &'a [MoveFate]);

impl MoveFates<'_> {
    fn word(id: u64, state: u64) -> u64 {
        (id & (u64::MAX >> 2)) << 2 | state
    }

    /// Opens the move `id` in a free word; `None` when every word is in use (nothing changed).
    pub fn open(&self, id: u64) -> Option<usize> {
        let open = Self::word(id, fate::OPEN);
        // Release: nothing to publish with it, but the destination's Acquire pairs with it.
        self.0.iter().position(|w| w.word.compare_exchange(0, open, Ordering::Release, Ordering::Relaxed).is_ok())
    }

    fn decide(&self, id: u64, to: u64) -> Result<(), u64> {
        let open = Self::word(id, fate::OPEN);
        let mut found = 0;
        for w in self.0 {
            match w.word.compare_exchange(open, Self::word(id, to), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(now) if now >> 2 == open >> 2 => found = now & 3,
                Err(_) => {}
            }
        }
        Err(found)
    }

    /// The destination takes the move `id`: true if it may build the process (it must then
    /// answer); false if the origin abandoned it or never opened it (build nothing).
    pub fn take(&self, id: u64) -> bool {
        self.decide(id, fate::TAKEN).is_ok()
    }

    /// The origin gives the move `id` up: true if the destination will not build the process;
    /// false if the destination took it already (wait for its answer).
    pub fn abandon(&self, id: u64) -> bool {
        match self.decide(id, fate::ABANDONED) {
            Ok(()) => true,
            Err(state) => state != fate::TAKEN,
        }
    }

    /// The origin is done with the move `id` (answered, or abandoned): its word is free.
    pub fn close(&self, id: u64) {
        let mine = Self::word(id, 0) >> 2;
        if let Some(w) = self.0.iter().find(|w| w.word.load(Ordering::Relaxed) >> 2 == mine) {
            w.word.store(0, Ordering::Relaxed);
        }
    }
}

/// Syspages one kernel core serves at most (its window slots).
pub const MAX_SERVED_SYSPAGES: usize = 64;

/// The values of [`ServedWord::state`].
pub mod served {
    /// The record is unused.
    pub const FREE: u8 = 0;
    /// Kept across a restart: no kernel serves the syspage now. The new kernel claims it
    /// (`KEPT → SERVED`), or the home takes it back meanwhile (`KEPT → FREE`), whichever
    /// compare-exchange comes first.
    pub const KEPT: u8 = 1;
    /// A running kernel serves it, and alone writes the record.
    pub const SERVED: u8 = 2;
}

/// The first word of a [`ServedSyspage`], unpacked: state (bits 0..8), the ring's head
/// (bits 8..16), the home core (bits 16..32). One word, so that one compare-exchange decides
/// who has the record and one store moves the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedWord {
    pub state: u8,
    pub head: u8,
    pub home: u16,
}

impl ServedWord {
    pub const fn pack(self) -> u32 {
        self.state as u32 | (self.head as u32) << 8 | (self.home as u32) << 16
    }

    pub const fn unpack(word: u32) -> Self {
        ServedWord { state: word as u8, head: (word >> 8) as u8, home: (word >> 16) as u16 }
    }
}

/// One syspage a kernel core serves, as its KCB keeps it (Barrelfish/DC: the KCB holds what a
/// restarted kernel needs). 20 bytes: the frame as a page number (below 16 TiB).
#[repr(C)]
#[derive(Default)]
pub struct ServedSyspage {
    /// A [`ServedWord`].
    pub word: AtomicU32,
    /// The process and thread that registered it, and the process's parent (the kernel core
    /// answers `getpid`, `gettid` and `getppid` itself).
    pub pid: AtomicU32,
    pub tid: AtomicU32,
    pub parent_pid: AtomicU32,
    /// Physical page number of the syspage's frame.
    pub frame: AtomicU32,
}

impl ServedSyspage {
    /// The record's word.
    pub fn read(&self) -> ServedWord {
        ServedWord::unpack(self.word.load(Ordering::Acquire))
    }

    /// Moves the record from state `from` to `to` (keeping head and home) if it is in `from`;
    /// returns whether it did. Acquire on success: the fields written before the state that
    /// was found are visible.
    pub fn change_state(&self, from: u8, to: u8) -> bool {
        let word = self.word.load(Ordering::Relaxed);
        let current = ServedWord::unpack(word);
        current.state == from
            && self
                .word
                .compare_exchange(word, ServedWord { state: to, ..current }.pack(), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

/// No OSnode / no core, in [`Parking`]'s fields.
pub const NOBODY: u32 = u32::MAX;

/// A kernel's saved processor context, as the world switch (`arch/x86_64/world_switch.rs`)
/// writes and reads it: the stack pointer (its stack holds the callee-saved registers, flags
/// and return address) and CR3. Read and written by whichever core switches.
#[repr(C)]
#[derive(Default)]
pub struct SwitchContext {
    pub stack_pointer: AtomicU64,
    pub page_table_root: AtomicU64,
}

/// Where a parked OSnode's kernel is (Barrelfish/DC §4.4: a KCB time-shared by another
/// core's kernel). `guest` is the hand-off word between the guest, its host and the boot
/// drivers that park and unpark it.
#[repr(C)]
pub struct Parking {
    /// The guest's context while a host runs something else, or while no core runs it; a
    /// host's own while it runs a guest.
    pub context: SwitchContext,
    /// The OSnode whose core time-shares this one ([`NOBODY`]: it is on its own core).
    pub host: AtomicU32,
    /// [`GuestState`] as a number.
    pub guest: AtomicU32,
    /// Asked by a boot driver: park onto this OSnode's core, or leave the host for this core
    /// ([`NOBODY`]: nothing asked). Written by the OSnode's own kernel (its ICC handler).
    pub park_to: AtomicU32,
    pub unpark_to: AtomicU32,
    /// The core whose processor a resumed guest wakes up on ([`NOBODY`]: it is resumed by
    /// its host, on the host's processor). Written by the unparking boot driver.
    pub resume_on: AtomicU32,
    /// 1 when the image can host parked OSnodes (the `multi` image).
    pub can_host: AtomicU32,
    /// Parks and unparks; times a host switched to this guest.
    pub parks: AtomicU64,
    pub resumes: AtomicU64,
    /// TSC of the last park asked, context saved, first run on the host; unpark asked,
    /// running on a core of its own again.
    pub park_asked_tsc: AtomicU64,
    pub parked_tsc: AtomicU64,
    pub hosted_tsc: AtomicU64,
    pub unpark_asked_tsc: AtomicU64,
    pub unparked_tsc: AtomicU64,
}

/// Where a parked OSnode's kernel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum GuestState {
    /// On its own core (or not parked at all).
    Home = 0,
    /// Parked and wants the processor: its host switches to it.
    Runnable = 1,
    /// Parked with nothing to do: its host switches to it after the next interrupt.
    Idle = 2,
    /// Leaving its host: it switched back one last time, its context is being saved.
    Leaving = 3,
    /// Its context is saved and no core runs it: a boot driver may resume it elsewhere.
    Away = 4,
    /// A boot driver claimed it and is waking a core with its context.
    Resuming = 5,
    /// It faulted while a host ran it; the host drops it.
    Dead = 6,
    /// Saving its context on its own core before a host may take it.
    Parking = 7,
}

impl GuestState {
    pub fn from_u32(value: u32) -> Self {
        match value {
            1 => Self::Runnable,
            2 => Self::Idle,
            3 => Self::Leaving,
            4 => Self::Away,
            5 => Self::Resuming,
            6 => Self::Dead,
            7 => Self::Parking,
            _ => Self::Home,
        }
    }
}

impl Parking {
    /// On its own core with nothing asked: what the bootstrap core writes into the zeroed
    /// shared region (where 0 would name OSnode 0).
    pub fn clear(&self) {
        for field in [&self.host, &self.park_to, &self.unpark_to, &self.resume_on] {
            field.store(NOBODY, Ordering::Relaxed);
        }
        self.guest.store(GuestState::Home as u32, Ordering::Release);
    }

    /// The OSnode hosting this one, if it is parked.
    pub fn host(&self) -> Option<usize> {
        match self.host.load(Ordering::Acquire) {
            NOBODY => None,
            host => Some(host as usize),
        }
    }

    /// The hand-off state.
    pub fn guest(&self) -> GuestState {
        GuestState::from_u32(self.guest.load(Ordering::Acquire))
    }

    /// Moves the hand-off state from `from` to `to` if it is `from` (a compare-exchange:
    /// of two boot drivers resuming one guest, one wins).
    pub fn advance(&self, from: GuestState, to: GuestState) -> bool {
        self.guest.compare_exchange(from as u32, to as u32, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

impl Default for Parking {
    fn default() -> Self {
        Self {
            context: SwitchContext::default(),
            host: AtomicU32::new(NOBODY),
            guest: AtomicU32::new(GuestState::Home as u32),
            park_to: AtomicU32::new(NOBODY),
            unpark_to: AtomicU32::new(NOBODY),
            resume_on: AtomicU32::new(NOBODY),
            can_host: AtomicU32::new(0),
            parks: AtomicU64::new(0),
            resumes: AtomicU64::new(0),
            park_asked_tsc: AtomicU64::new(0),
            parked_tsc: AtomicU64::new(0),
            hosted_tsc: AtomicU64::new(0),
            unpark_asked_tsc: AtomicU64::new(0),
            unparked_tsc: AtomicU64::new(0),
        }
    }
}

/// System-call counters of one instance, written by that instance only.
#[repr(C)]
pub struct SyscallCounters {
    pub total: AtomicU64,
    /// Reef's own calls (numbers from 4096).
    pub reef: AtomicU64,
    /// Calls answered `ENOSYS`.
    pub unimplemented: AtomicU64,
    /// Per Linux number below [`COUNTED_SYSCALLS`].
    pub by_number: [AtomicU32; COUNTED_SYSCALLS],
    /// Per number, the calls answered `ENOSYS`.
    pub unimplemented_by_number: [AtomicU32; COUNTED_SYSCALLS],
    /// On an AC: calls of its thread sent to the home by ICC, and those put in a syspage.
    pub sent_home: AtomicU64,
    pub sent_by_syspage: AtomicU64,
    /// On a KC: syspage entries it completed itself, handed to homes, and results it could
    /// not write back (the entry was rewritten, or the syspage unregistered meanwhile).
    pub syspage_served_here: AtomicU64,
    pub syspage_handed_home: AtomicU64,
    pub syspage_results_dropped: AtomicU64,
}

/// Process counters of one instance, written by that instance only.
#[repr(C)]
#[derive(Default)]
pub struct ProcessCounters {
    /// Processes homed here now.
    pub live: AtomicU32,
    /// Threads alive now.
    pub threads: AtomicU32,
    /// Processes created since boot.
    pub created: AtomicU64,
    /// Processes killed by a fault or a signal.
    pub killed: AtomicU64,
    /// Pids and tids in use.
    pub pids: AtomicU32,
    /// Thread kernel stacks in use.
    pub stacks: AtomicU32,
    /// Frames held by live processes (pages and page tables).
    pub frames: AtomicU64,
    /// Frames missing from the instance's free list beyond what live processes and the
    /// stack cache hold: 0 unless something leaked.
    pub frames_unaccounted: AtomicU64,
    /// Free frames right after the instance started, before any process.
    pub baseline_free_frames: AtomicU64,
}

impl Kcb {
    /// The current state.
    pub fn state(&self) -> CoreState {
        CoreState::from_u32(self.state.load(Ordering::Acquire))
    }

    /// Publishes a new state; Release so a reader seeing it also sees what came before.
    pub fn set_state(&self, state: CoreState) {
        self.state.store(state as u32, Ordering::Release);
    }

    /// Claims an offline, stopped, unresponsive or faulted core for booting (a faulted or
    /// stopped core is restarted: its halted CPU takes INIT like any other); false if it runs
    /// or boots, or another boot driver claimed it first (a compare-exchange, so only one wins).
    /// Returns the state it was claimed from.
    pub fn claim_for_boot(&self) -> Option<CoreState> {
        let startable = [CoreState::Offline, CoreState::Stopped, CoreState::Unresponsive, CoreState::Faulted];
        let claimed = startable.into_iter().find(|from| {
            self.state
                .compare_exchange(*from as u32, CoreState::Booting as u32, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        if claimed.is_some() {
            self.incarnation.fetch_add(1, Ordering::Relaxed);
        }
        claimed
    }

    /// Records the image this instance runs (its own KCB, at entry).
    pub fn set_image_name(&self, name: &str) {
        let bytes = name.as_bytes();
        for (i, byte) in self.image_name.iter().enumerate() {
            byte.store(bytes.get(i).copied().unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// The image name recorded at entry, `-` before any instance ran.
    pub fn image_name(&self) -> ([u8; IMAGE_NAME_LENGTH], usize) {
        let mut bytes = [0u8; IMAGE_NAME_LENGTH];
        for (out, byte) in bytes.iter_mut().zip(&self.image_name) {
            *out = byte.load(Ordering::Relaxed);
        }
        let length = bytes.iter().position(|b| *b == 0).unwrap_or(IMAGE_NAME_LENGTH);
        if length == 0 {
            bytes[0] = b'-';
            return (bytes, 1);
        }
        (bytes, length)
    }

    /// The current role.
    pub fn role(&self) -> Role {
        Role::from_u64(u64::from(self.role.load(Ordering::Acquire))).unwrap_or(Role::Timesharing)
    }

    /// The private partition `[start, end)`.
    pub fn partition_bounds(&self) -> (u64, u64) {
        (self.partition_start.load(Ordering::Relaxed), self.partition_end.load(Ordering::Relaxed))
    }
}

/// Per-core message counters, in the KCB; only the owning core writes them.
#[repr(C)]
#[derive(Default)]
pub struct MessageCounters {
    /// Lines this core published (a large message counts its chunks; a multicast its readers).
    pub sent: AtomicU64,
    /// Lines this core accepted.
    pub received: AtomicU64,
    /// Lines this core dropped, all reasons.
    pub dropped: AtomicU64,
    /// Dropped: no handler for the kind.
    pub dropped_unknown_kind: AtomicU64,
    /// Dropped: bad header, length or payload.
    pub dropped_malformed: AtomicU64,
    /// Dropped: large-message chunk out of order, missing, too many.
    pub dropped_chunk: AtomicU64,
    /// Dropped: a large message announced beyond the largest the kernel reassembles, or no heap left for it.
    pub dropped_too_large: AtomicU64,
    /// Notification IPIs sent.
    pub ipis_sent: AtomicU64,
    /// Notification IPIs taken.
    pub ipis_taken: AtomicU64,
    /// Polls of all channels that found nothing.
    pub empty_polls: AtomicU64,
    /// Stress traffic that arrived out of order or duplicated (must stay 0).
    pub order_errors: AtomicU64,
    /// Large stress messages whose checksum matched.
    pub large_ok: AtomicU64,
    /// Lines that will never arrive, counted by this receiver: slots it skipped because the
    /// sender that held them died (or gave up) before publishing, and the message it was
    /// handling when it faulted.
    pub lost: AtomicU64,
    /// Sends and calls this core refused because the target was not running.
    pub send_refused: AtomicU64,
    /// Sends and calls this core gave up after waiting their bounded time.
    pub send_timeouts: AtomicU64,
    /// Handlers running on this core right now (nested when a handler drains while it sends):
    /// what a fault on this core loses.
    pub handlers_running: AtomicU64,
}

/// Interrupts and exceptions one core took, by vector (`/proc/interrupts`), in its KCB.
/// Written by that core only, read by any.
#[repr(C)]
pub struct InterruptCounters {
    pub by_vector: [AtomicU64; COUNTED_VECTORS],
}

impl InterruptCounters {
    /// Counts one entry on `vector`. A load and a store, not a locked add: only this core
    /// writes, and the entry stub runs with interrupts off until `dispatch` says otherwise, so
    /// nothing on this core can come between the two (an NMI counts its own vector, and does
    /// not nest in itself).
    pub fn count(&self, vector: u64) {
        if let Some(counter) = self.by_vector.get(vector as usize) {
            counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }
}

#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::size_of::<Kcb>() == 4096 * 3, "a KCB is three pages; bump VERSION when it changes");
    assert!(core::mem::offset_of!(Kcb, version) == 0);
    assert!(core::mem::offset_of!(Kcb, core_id) == 4);
    assert!(core::mem::offset_of!(Kcb, apic_id) == 8);
    assert!(core::mem::offset_of!(Kcb, state) == 12);
};

/// A KCB as the shared region holds it before the bootstrap core fills it in: every field
/// zero, state `offline`. Kernels never build one (the region is zeroed memory); host tests
/// and the loom model do.
impl Default for Kcb {
    fn default() -> Self {
        Self {
            version: AtomicU32::new(0),
            core_id: AtomicU32::new(0),
            apic_id: AtomicU32::new(0),
            state: AtomicU32::new(0),
            role: AtomicU32::new(0),
            partition_start: AtomicU64::new(0),
            partition_end: AtomicU64::new(0),
            reserved_end: AtomicU64::new(0),
            page_table_root: AtomicU64::new(0),
            shared_region: AtomicU64::new(0),
            started_tsc: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            interrupts: InterruptCounters { by_vector: core::array::from_fn(|_| AtomicU64::new(0)) },
            fault: FaultRecord::default(),
            image_name: core::array::from_fn(|_| AtomicU8::new(0)),
            incarnation: AtomicU64::new(0),
            messages: MessageCounters::default(),
            syscalls: SyscallCounters {
                total: AtomicU64::new(0),
                reef: AtomicU64::new(0),
                unimplemented: AtomicU64::new(0),
                by_number: core::array::from_fn(|_| AtomicU32::new(0)),
                unimplemented_by_number: core::array::from_fn(|_| AtomicU32::new(0)),
                sent_home: AtomicU64::new(0),
                sent_by_syspage: AtomicU64::new(0),
                syspage_served_here: AtomicU64::new(0),
                syspage_handed_home: AtomicU64::new(0),
                syspage_results_dropped: AtomicU64::new(0),
            },
            processes: ProcessCounters::default(),
            application_thread: AtomicU64::new(0),
            syspages: AtomicU32::new(0),
            stop_requested: AtomicU32::new(0),
            restart_pending: AtomicU32::new(0),
            stop_asked_tsc: AtomicU64::new(0),
            stopped_tsc: AtomicU64::new(0),
            startup_tsc: AtomicU64::new(0),
            running_tsc: AtomicU64::new(0),
            stops: AtomicU64::new(0),
            image_from_file: AtomicU32::new(0),
            parking: Parking::default(),
            served_syspages: core::array::from_fn(|_| ServedSyspage::default()),
            moved_away: MovedAway::default(),
            moves_out: core::array::from_fn(|_| MoveFate::default()),
            kept: KeptProcesses::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_is_decided_once_and_its_word_reused() {
        let words: [MoveFate; 2] = core::array::from_fn(|_| MoveFate::default());
        let fates = MoveFates(&words);
        let (first, second, third) = ((1 << 63) | 1, (1 << 63) | (3 << 48) | 2, (1 << 63) | 3);
        assert_eq!(fates.open(first), Some(0));
        assert_eq!(fates.open(second), Some(1));
        assert_eq!(fates.open(third), None, "both words are in use");
        assert!(!fates.take(third), "a move never opened is refused");
        assert!(fates.take(first));
        assert!(!fates.take(first), "a move is taken once");
        assert!(!fates.abandon(first), "a taken move is waited for");
        assert!(fates.abandon(second));
        assert!(!fates.take(second), "an abandoned move is refused");
        fates.close(second);
        assert_eq!(fates.open(third), Some(1), "a closed word is free again");
        assert!(!fates.take(second), "a closed move stays refused");
        fates.close(first);
        assert!(fates.take(third));
        assert!(words[0].word.load(Ordering::Relaxed) == 0);
    }

    #[test]
    fn the_moved_table_records_updates_forgets_and_fills_up() {
        let slots = MovedAway::<3>::default();
        let table = slots.table();
        assert_eq!(table.core_of(200_001), None);
        assert!(table.record(200_001, 3));
        assert_eq!(table.core_of(200_001), Some(3));
        assert!(table.record(200_001, 1), "a second move updates the slot");
        assert_eq!(table.core_of(200_001), Some(1));
        assert!(table.record(200_002, 1) && table.record(200_003, 0));
        assert_eq!(table.live(), 3);
        assert!(!table.has_room_for(200_004) && !table.record(200_004, 1), "a full table refuses");
        assert_eq!(table.live(), 3, "a refused record counts nothing");
        assert!(table.has_room_for(200_002), "an id already recorded has its slot");
        table.forget(200_002);
        table.forget(200_002);
        assert_eq!(table.live(), 2, "a second forget of an id counts nothing");
        assert_eq!(table.core_of(200_002), None);
        assert!(table.record(200_004, 2));
        assert_eq!(table.core_of(200_004), Some(2));
        assert_eq!(table.core_of(0), None, "a free slot names no id");
        assert!(!table.record(0, 1) && !table.record(u32::MAX, 1) && !table.record(FORGOTTEN, 1));
    }

    #[test]
    fn a_forgotten_id_does_not_hide_the_ids_after_it() {
        let slots = MovedAway::<8>::default();
        let table = slots.table();
        // 3, 11 and 19 all start their walk at slot 3: they sit in slots 3, 4 and 5.
        for (id, core) in [(3, 1), (11, 2), (19, 3)] {
            assert!(table.record(id, core));
        }
        table.forget(3);
        table.forget(11);
        assert_eq!(table.core_of(19), Some(3), "found past two forgotten slots");
        assert!(table.record(27, 4), "a claim takes the first forgotten slot of its walk");
        assert_eq!(slots.slots[3].pid.load(Ordering::Relaxed), 27);
        assert_eq!((table.core_of(27), table.core_of(19), table.core_of(11)), (Some(4), Some(3), None));
        // 7 starts at the last slot and wraps around to the first.
        assert!(table.record(7, 5) && table.record(15, 6));
        assert_eq!(slots.slots[0].pid.load(Ordering::Relaxed), 15);
        assert_eq!(table.core_of(15), Some(6));
        for id in [27, 19, 7, 15] {
            table.forget(id);
        }
        assert_eq!(table.live(), 0);
        assert_eq!(table.core_of(19), None, "nothing lives elsewhere: answered without a walk");
    }

    #[test]
    fn the_moved_table_holds_as_many_ids_as_it_has_slots() {
        let slots = MovedAway::<MAX_MOVED_AWAY>::default();
        let table = slots.table();
        let ids = (0..MAX_MOVED_AWAY as u32).map(|n| 300_001 + n * 7);
        for id in ids.clone() {
            assert!(table.record(id, id % 4), "{id}");
        }
        assert!(!table.record(1, 1));
        for id in ids.clone() {
            assert_eq!(table.core_of(id), Some(id % 4), "{id}");
        }
        for id in ids.clone().step_by(2) {
            table.forget(id);
        }
        for id in ids.skip(1).step_by(2) {
            assert_eq!(table.core_of(id), Some(id % 4), "{id}");
        }
    }

    #[test]
    fn states_and_roles_read_back_and_unknown_numbers_are_safe() {
        for state in [
            CoreState::Offline,
            CoreState::Booting,
            CoreState::Running,
            CoreState::Faulted,
            CoreState::Unresponsive,
            CoreState::Stopped,
        ] {
            assert_eq!(CoreState::from_u32(state as u32), state);
            assert_eq!(state.is_live(), state == CoreState::Running, "{}", state.name());
        }
        assert_eq!(CoreState::from_u32(99), CoreState::Offline);
        assert_eq!(CoreState::Stopped.name(), "stopped");
        assert_eq!(Role::from_u64(1), Some(Role::Application));
        assert_eq!(Role::from_u64(3), None);
        assert_eq!(Role::name(2), "KC");
        assert_eq!(Role::name(7), "?");
    }

    #[test]
    fn a_stopped_kcb_is_claimed_once_and_counts_the_start() {
        let kcb = alloc_kcb();
        assert_eq!(kcb.state(), CoreState::Offline);
        kcb.set_state(CoreState::Running);
        assert_eq!(kcb.claim_for_boot(), None, "a running core is not claimed");
        kcb.set_state(CoreState::Stopped);
        assert_eq!(kcb.claim_for_boot(), Some(CoreState::Stopped));
        assert_eq!(kcb.claim_for_boot(), None, "a booting core is not claimed twice");
        assert_eq!(kcb.state(), CoreState::Booting);
        assert_eq!(kcb.incarnation.load(Ordering::Relaxed), 1);
        kcb.set_image_name("full-v2");
        let (name, length) = kcb.image_name();
        assert_eq!(&name[..length], b"full-v2");
    }

    extern crate std;

    fn alloc_kcb() -> std::boxed::Box<Kcb> {
        std::boxed::Box::default()
    }

    #[test]
    fn a_served_syspage_is_claimed_by_the_new_kernel_or_taken_back_by_its_home_never_both() {
        let word = ServedWord { state: served::SERVED, head: 63, home: 0xBEEF };
        assert_eq!(ServedWord::unpack(word.pack()), word);
        let kcb = alloc_kcb();
        assert!(kcb.served_syspages.iter().all(|record| record.read().state == served::FREE));
        let record = &kcb.served_syspages[5];
        record.word.store(word.pack(), Ordering::Release);
        // The stopping kernel keeps it; then the first of the two claims wins.
        assert!(record.change_state(served::SERVED, served::KEPT));
        assert_eq!(record.read(), ServedWord { state: served::KEPT, ..word }, "head and home kept");
        assert!(record.change_state(served::KEPT, served::SERVED), "the new kernel takes it over");
        assert!(!record.change_state(served::KEPT, served::FREE), "the home is too late: it asks the kernel");
        assert!(record.change_state(served::SERVED, served::KEPT));
        assert!(record.change_state(served::KEPT, served::FREE), "the home takes it back first");
        assert!(!record.change_state(served::KEPT, served::SERVED), "the new kernel finds nothing to serve");
        assert_eq!(record.read().state, served::FREE);
    }

    #[test]
    fn parking_starts_at_home_and_one_claim_wins() {
        let kcb = Kcb::default();
        assert_eq!((kcb.parking.host(), kcb.parking.guest()), (None, GuestState::Home));
        kcb.parking.host.store(2, Ordering::Relaxed);
        kcb.parking.guest.store(GuestState::Away as u32, Ordering::Relaxed);
        assert_eq!(kcb.parking.host(), Some(2));
        assert!(kcb.parking.advance(GuestState::Away, GuestState::Resuming));
        assert!(!kcb.parking.advance(GuestState::Away, GuestState::Resuming), "a second claim fails");
        assert!(!kcb.parking.advance(GuestState::Leaving, GuestState::Away), "only from the state named");
        // The zeroed shared region says host 0; `clear` makes it nobody.
        kcb.parking.host.store(0, Ordering::Relaxed);
        kcb.parking.clear();
        assert_eq!((kcb.parking.host(), kcb.parking.guest()), (None, GuestState::Home));
        assert_eq!(kcb.parking.park_to.load(Ordering::Relaxed), NOBODY);
        for value in 0..10 {
            let state = GuestState::from_u32(value);
            assert!(value > 7 || state as u32 == value, "{value} reads back");
        }
    }
}
