//! Reef's own system calls: numbers Linux does not use, so the same binary gets `ENOSYS` on
//! Linux and learns that it is not running on Reef.
//!
//! Linux x86-64 numbers stop below 1024, and numbers with bit 30 set are x32 calls; Reef's
//! start at 4096. Every call follows the Linux convention: arguments in `rdi, rsi, rdx, r10,
//! r8, r9`, the result in `rax`, an error as `-errno` (Linux errno values).

/// First number of Reef's own calls.
pub const FIRST: u64 = 4096;

/// `reef_core() -> core`: the logical core the calling thread runs on. On Linux: `-ENOSYS`,
/// which is how a program tells where it runs.
pub const CORE: u64 = FIRST;

/// `reef_spawn(core, path, argv, envp, death_signal) -> pid`: builds a new process on kernel
/// instance `core` from the program at `path` (a NUL-terminated string), with the
/// NUL-terminated arrays `argv` and `envp` of NUL-terminated strings, as `execve` takes them.
/// The new process is a child of the caller, which reaps it with `wait4` like any child; it
/// gets `death_signal` (0: none, else 1 to 64) when the caller ends, as if it had called
/// `prctl(PR_SET_PDEATHSIG)` first. Errors: `EINVAL` (no such core or signal), `EAGAIN` (the
/// core is not running), `ENOENT`, `ENOEXEC`, `EFAULT`, `E2BIG`, `ENOMEM`, `ETIMEDOUT` (the
/// core did not answer in time).
pub const SPAWN: u64 = FIRST + 1;

/// `reef_cores() -> count`: how many kernel instances are running.
pub const CORES: u64 = FIRST + 2;

/// `reef_control(argv, buffer, capacity, status) -> length`: runs one control command of the
/// kernel (`cores`, `mem`, `start`, `msg`, `syscalls`, `ps` or `poweroff`, which `/bin/cores`
/// and the other programs of `user/reef` print) on the instance the caller runs on, and hands
/// back its text.
///
/// - `argv`: a NULL-terminated array of pointers to NUL-terminated UTF-8 strings, the command
///   name first (`["msg", "stats", NULL]`), with the limits of `execve`'s.
/// - `buffer`, `capacity`: where the text goes. As much as fits is copied; text that did not
///   fit is replaced by a line saying so ([`control::fit`]), and the kernel keeps at most
///   [`control::MAX_OUTPUT`] bytes of one command's text. [`control::BUFFER_SIZE`] bytes are
///   always enough for what it keeps.
/// - `status`: a `u32` the kernel sets to [`control::OK`], [`control::FAILED`] (the command
///   failed, or no such command) or [`control::USAGE`] (wrong arguments). When it is not `OK`
///   the text ends with one line `error: …` saying what went wrong and what to do.
///
/// Returns the number of bytes written to `buffer`. Errors, before any command runs:
/// `EFAULT` (`argv`, a string, `status` or the first `capacity` bytes of `buffer` (at most
/// `BUFFER_SIZE`) not readable or writable as needed), `EINVAL` (no command name, or one that
/// is not UTF-8), `E2BIG`, `ENAMETOOLONG`. `poweroff` does not return: it writes
/// `powering off` to the console and the machine stops.
pub const CONTROL: u64 = FIRST + 3;

/// `reef_syspage_register(page, kc) -> 0`: registers the calling thread's syspage with the
/// kernel core `kc` (Memsc). `page` is the user address of one 4 KiB page (aligned, in a
/// private anonymous writable mapping of the caller, laid out as `syspage::Page`); from now on
/// the KC serves the entries the thread submits there, in ring order. One syspage per thread.
/// The layout and the protocol (free → submitted → done, the KC's copy of each entry before it
/// checks anything, Memsc 4.6) are the `syspage` crate's; `rt::syspage` is the user side.
/// Errors: `EINVAL` (`page` not aligned or not a private anonymous writable mapping, `kc` is
/// no core), `ENXIO` (`kc` is not a kernel core), `EBUSY` (the thread has a syspage already),
/// `EFAULT` (the page is not mapped), `ETIMEDOUT` (the KC did not answer in time).
pub const SYSPAGE_REGISTER: u64 = FIRST + 4;

/// `reef_syspage_unregister() -> 0`: the calling thread's syspage is served no more; entries
/// still submitted are released (never executed after the call returns). `ENOENT` without one.
pub const SYSPAGE_UNREGISTER: u64 = FIRST + 5;

/// `reef_syspage_kick() -> 0`: wakes the kernel core serving the calling thread's syspage if it
/// halted after spinning idle (it arms a doorbell first, see `docs/syscalls.md`); costs one
/// trap and nothing else when the KC is awake. `ENOENT` without a syspage. A waiter calls it
/// after spinning on its page for a while with nothing done (`rt::syspage` after 2000 polls).
pub const SYSPAGE_KICK: u64 = FIRST + 6;

/// `reef_role(core, role) -> 0`: makes `core` a timesharing (`role::TIMESHARING`),
/// application (`role::APPLICATION`) or kernel core (`role::KERNEL`) while the system runs.
/// Errors: `EINVAL` (no such core or role), `EAGAIN` (the core is not running), `EBUSY` (the
/// change would leave no timesharing core, a process homed on the core cannot move to another
/// TC (a core leaving timesharing hands its processes over first), or an application core runs
/// a thread), `EPERM` (core 0 owns the devices and the file service
/// and stays a TC), `EOPNOTSUPP` (the core runs the `rt` image, which is an application core
/// only).
pub const ROLE: u64 = FIRST + 7;

/// `reef_move_to_ac(core, flags) -> core`: moves the calling thread to application core `core`
/// (`-1`: any free AC) and returns the core it runs on; the process stays homed on its TC,
/// which serves the thread's traps (NIX). `flags`: [`MOVE_SYSPAGE`]. Errors: `EINVAL` (no such
/// core, it is not an AC, or an unknown flag), `EBUSY` (the AC runs a thread, or no AC is
/// free), `EAGAIN` (the core is not running), `EALREADY` (the thread runs on an AC already),
/// `ENXIO` (with [`MOVE_SYSPAGE`]: no kernel core runs), `ENOMEM`. The AC may still refuse when
/// the thread arrives (another thread took it meanwhile): the call then returns `EBUSY` and
/// the thread stays home. See `docs/roles.md`.
pub const MOVE_TO_AC: u64 = FIRST + 8;

/// `reef_return_from_ac() -> 0`: the calling thread leaves its AC and runs on its home TC
/// again (its syspage, if `MOVE_SYSPAGE` made one, is unregistered). `EALREADY` when it is
/// not on an AC.
pub const RETURN_FROM_AC: u64 = FIRST + 9;

/// Flag of [`MOVE_TO_AC`]: every trapping call of the thread becomes a syspage entry for a
/// kernel core instead of an ICC to the home TC (unmodified binaries use syspages too).
pub const MOVE_SYSPAGE: u64 = 1;

/// The roles [`ROLE`] takes.
pub mod role {
    /// Timesharing core: scheduler, timer, trapping system calls, device interrupts.
    pub const TIMESHARING: u64 = 0;
    /// Application core: one user thread, no timer, no device interrupts.
    pub const APPLICATION: u64 = 1;
    /// Kernel core: no user code; serves syspages and forwarded calls.
    pub const KERNEL: u64 = 2;
}

/// `reef_core_operation(operation, core, image, image_length, times) -> 0`: the boot driver's
/// operations
/// on a core (Barrelfish/DC §4.1), run by the calling thread's kernel instance with only it and
/// the target taking part. `operation` is one of [`core_operation`]; `image`/`image_length`
/// name a kernel image file (`/boot/full`, `/boot/rt`, ...; length 0: the image the system
/// booted) for `START` and `RESTART`, and carry the other core for `PARK` (the host) and
/// `UNPARK` (the destination); `times`, when not null, receives a [`CoreTimes`].
/// Errors: `EINVAL` (no such core or operation, a bad path, an unknown flag), `EPERM` (core 0
/// owns the devices and cannot stop), `EBUSY` (stopping it would leave no timesharing core, or
/// processes are homed there), `EALREADY` (it is already stopped, or already running),
/// `ENOENT` (no such image), `ENOEXEC` (the file is no kernel image, or is corrupt),
/// `EPROTO` (the image was built for another KCB version), `ETIMEDOUT` (the core did not
/// answer), `EFAULT` (a bad pointer), `EOPNOTSUPP` (parking onto a core whose image cannot
/// host); `EBUSY` also for a parked core (stop, start, role) and a host of one, and for a
/// start with an image that runs no timesharing of a core that keeps processes (a
/// `STOP | KEEP`), `EINVAL` for unparking a core that is not parked. A refused request
/// changes nothing.
pub const CORE_OPERATION: u64 = FIRST + 10;

/// The operations of [`CORE_OPERATION`], in its low byte; the flags above it.
pub mod core_operation {
    /// Save the core's KCB and halt it (with [`KEEP`], its processes in it).
    pub const STOP: u64 = 0;
    /// Boot a stopped (or never started) core on its KCB, with the given image.
    pub const START: u64 = 1;
    /// Stop, then start the same KCB on the same core with the given image.
    pub const RESTART: u64 = 2;
    /// Move the core's OSnode onto the kernel of the core named in `image` (which runs the
    /// `multi` image), which time-shares it; `image_length` is 0.
    pub const PARK: u64 = 3;
    /// Give a parked OSnode a processor again: the core named in `image`, or its own when
    /// that is [`OWN_CORE`]; `image_length` is 0.
    pub const UNPARK: u64 = 4;
    /// `UNPARK`'s destination: the OSnode's own core.
    pub const OWN_CORE: u64 = u64::MAX;
    /// Flag: load the image from the initramfs afresh instead of from the boot driver's cache.
    pub const UNCACHED: u64 = 1 << 8;
    /// [`STOP`]'s flag: a timesharing core's processes stay, frozen, in its KCB (Barrelfish/DC:
    /// the KCB holds the OSnode's state) until a [`START`] boots a kernel that takes them on;
    /// without it they move to the other TCs, as Linux moves a CPU's tasks off.
    pub const KEEP: u64 = 1 << 9;
    /// Every flag.
    pub const FLAGS: u64 = UNCACHED | KEEP;
}

/// What a [`CORE_OPERATION`] took, in nanoseconds of the TSC; a part that did not happen is 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreTimes {
    /// The whole operation, as the calling kernel saw it.
    pub total_ns: u64,
    /// Asking the core to stop until it reported itself stopped.
    pub stop_ns: u64,
    /// The boot driver's part of a start: image lookup and check (uncached) or cache look-up,
    /// partition, page tables, INIT-SIPI.
    pub driver_ns: u64,
    /// The target's part: from the STARTUP IPI until its kernel reported itself running.
    pub target_ns: u64,
    /// 1 when the image came from the boot driver's cache, 0 when it was read afresh.
    pub image_cached: u64,
}

/// `reef_move_process(pid, core) -> core`: moves process `pid` (0: the caller's) to
/// timesharing core `core`, with its pid, memory, descriptors and threads (Popcorn's
/// migration; what a TC leaving timesharing does to each of its processes). Returns once it
/// runs there; a process moving itself gets the answer there. Errors: `EINVAL` (no such
/// core), `ESRCH` (no such process), `EAGAIN` (the core is not running), `EBUSY` (the core is
/// no timesharing core or is parked, or the process cannot move: more threads than its pid
/// range's KCB can record living elsewhere (`kcb::block::MAX_MOVED_AWAY`, 512, for all its
/// moved processes together), a syspage its kernel core did not let go of, or it is ending),
/// `ETIMEDOUT` (it did not get there in 3 s).
pub const MOVE_PROCESS: u64 = FIRST + 11;

/// One past the last Reef call this ABI defines.
pub const END: u64 = FIRST + 12;

/// Whether `number` is one of Reef's own calls.
pub const fn is_reef_call(number: u64) -> bool {
    number >= FIRST && number < END
}

/// The [`CONTROL`] call's statuses, its output limit, and how text too long for the caller's
/// buffer is cut.
pub mod control {
    use core::fmt::Write;

    /// The command did what it was asked.
    pub const OK: u32 = 0;
    /// The command failed, or there is no such command; the text's last line says why.
    pub const FAILED: u32 = 1;
    /// The command's arguments are wrong; the text's last line gives its usage.
    pub const USAGE: u32 = 2;

    /// Most bytes of one command's text the kernel keeps (what it wrote after that is counted,
    /// and the text is cut).
    pub const MAX_OUTPUT: usize = 64 * 1024;

    /// A buffer that holds whatever the kernel hands back (the kept text, the note that it was
    /// cut, and a long error line).
    pub const BUFFER_SIZE: usize = MAX_OUTPUT + 4 * 1024;

    /// How the note that replaces cut text starts (on a line of its own).
    pub const CUT_NOTE: &str = "[output cut here: ";

    /// Fits a command's output into `out` and returns how many bytes it filled. The output is
    /// `text`, the first bytes of a text `full_length` long (the rest was not kept), then
    /// `ending` (an `error: …` line, or nothing). When all of it fits, it is copied whole;
    /// else `out` holds as much of `text` as fits, the note `[output cut here: it was N
    /// bytes]` on a line of its own, and then `ending`, which is kept first: the note and then
    /// the text give way to it when `out` is small. `text` is cut at a UTF-8 character
    /// boundary.
    pub fn fit(text: &[u8], full_length: usize, ending: &[u8], out: &mut [u8]) -> usize {
        let whole = text.len() >= full_length;
        if whole && text.len() + ending.len() <= out.len() {
            out[..text.len()].copy_from_slice(text);
            out[text.len()..text.len() + ending.len()].copy_from_slice(ending);
            return text.len() + ending.len();
        }
        let capacity = out.len();
        let ending_length = ending.len().min(capacity);
        let mut note = Note { bytes: [0; 80], length: 0 };
        // The note always starts a line: a newline ends a cut line first.
        let _ = write!(note, "\n{CUT_NOTE}it was {} bytes]\n", full_length.max(text.len()) + ending.len());
        let note_room = capacity - ending_length;
        let note_full = &note.bytes[..note.length];
        // With no room for text, the note needs no newline of its own in front.
        let mut text_length = text.len().min(note_room.saturating_sub(note_full.len()));
        while text_length > 0 && text_length < text.len() && text[text_length] & 0xC0 == 0x80 {
            text_length -= 1;
        }
        let note_bytes = if text_length == 0 || text[text_length - 1] == b'\n' { &note_full[1..] } else { note_full };
        let note_length = note_bytes.len().min(note_room - text_length);
        let mut at = 0;
        for piece in [&text[..text_length], &note_bytes[..note_length], &ending[..ending_length]] {
            out[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
        at
    }

    /// The cut note, formatted without an allocator.
    struct Note {
        bytes: [u8; 80],
        length: usize,
    }

    impl Write for Note {
        fn write_str(&mut self, text: &str) -> core::fmt::Result {
            let end = self.length + text.len();
            self.bytes.get_mut(self.length..end).ok_or(core::fmt::Error)?.copy_from_slice(text.as_bytes());
            self.length = end;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::control::*;
    use std::string::String;
    use std::vec;

    fn fitted(text: &str, full_length: usize, ending: &str, capacity: usize) -> String {
        let mut out = vec![0u8; capacity];
        let length = fit(text.as_bytes(), full_length, ending.as_bytes(), &mut out);
        assert!(length <= capacity);
        String::from_utf8(out[..length].to_vec()).unwrap()
    }

    #[test]
    fn whole_output_is_copied_as_it_is() {
        assert_eq!(fitted("a\nb\n", 4, "", 4), "a\nb\n");
        assert_eq!(fitted("a\n", 2, "error: no\n", 100), "a\nerror: no\n");
        assert_eq!(fitted("", 0, "", 0), "");
    }

    #[test]
    fn cut_output_says_so_and_keeps_the_error() {
        let text = "line one\nline two\nline three\nline four\nline five\nline six\n";
        assert_eq!(text.len() + "error: bad\n".len(), 69);
        let cut = fitted(text, text.len(), "error: bad\n", 60);
        // 11 bytes of the ending, 36 of the note, 13 of text: a cut in the middle of a line,
        // and the note starts a line of its own all the same.
        assert_eq!(cut, "line one\nline\n[output cut here: it was 69 bytes]\nerror: bad\n");
        // A cut at a line's end needs no newline in front of the note.
        let at_line_end = fitted(text, text.len(), "error: bad\n", 56);
        assert_eq!(at_line_end, "line one\n[output cut here: it was 69 bytes]\nerror: bad\n");
    }

    #[test]
    fn text_the_kernel_did_not_keep_is_reported_even_when_the_rest_fits() {
        let cut = fitted("kept\n", 100_000, "", 4096);
        assert_eq!(cut, "kept\n[output cut here: it was 100000 bytes]\n");
    }

    #[test]
    fn tiny_buffers_keep_the_ending_first() {
        assert_eq!(fitted("some text\n", 10, "error: x\n", 9), "error: x\n");
        assert_eq!(fitted("some text\n", 10, "error: x\n", 4), "erro");
        assert_eq!(fitted("some text\n", 10, "", 0), "");
        let note_only = fitted("some text that is long\n", 23, "", 18);
        assert_eq!(note_only, "[output cut here: ");
    }

    #[test]
    fn utf8_is_never_split() {
        let text = "ééééé\n";
        for capacity in 0..60 {
            let mut out = vec![0u8; capacity];
            let length = fit(text.as_bytes(), text.len() + 10, b"", &mut out);
            assert!(core::str::from_utf8(&out[..length]).is_ok(), "capacity {capacity}");
        }
    }
}
