//! Syspages from user space (Memsc's memsclib): register, add, ready, retval, wait, and a
//! transparent mode that sends a thread's plain calls through its syspage.
//!
//! A [`Syspage`] is one private anonymous page of the calling thread, registered with a kernel
//! core (KC) that polls it and executes the calls posted there (`abi::call::SYSPAGE_REGISTER`,
//! the layout and protocol of the `syspage` crate). Posting costs a few stores and no trap;
//! waiting spins on the page. A KC that found nothing to do for a while may halt: after
//! [`SPINS_BEFORE_KICK`] polls with nothing done, a waiter traps once with
//! `abi::call::SYSPAGE_KICK` to wake it, and spins on.
//!
//! On Linux, registration fails with `ENOSYS` (kind `Unsupported`), as every Reef call does.

use std::io;
use std::ptr::NonNull;
use syspage::{Full, Page, Submitter, ARGUMENTS, PAGE_SIZE};

/// Polls of the page with nothing done before a waiter kicks the kernel core
/// (`SYSPAGE_KICK`), and again after each further such run: at a few ns a poll, some µs, far
/// below the KC's own idle spin before it halts, so an awake KC is never kicked in a steady
/// stream of calls, and a halted one waits for no more than that.
pub const SPINS_BEFORE_KICK: u32 = 2000;

/// Where the page came from.
#[derive(Debug)]
enum Backing {
    /// `mmap`ed here and registered with a kernel core: unregistered and unmapped on drop.
    Registered,
    /// Host tests: a leaked page served by a thread of the test, nothing to undo.
    #[cfg(test)]
    Borrowed,
}

/// The calling thread's syspage, registered with a kernel core. Not `Send`: the kernel serves
/// a syspage for the thread that registered it. Dropping it unregisters it (entries still
/// submitted are never executed after that) and unmaps the page.
#[derive(Debug)]
pub struct Syspage {
    page: NonNull<Page>,
    submitter: Submitter,
    backing: Backing,
    nr_kicks: u64,
}

impl Syspage {
    /// Maps a private anonymous page and registers it with kernel core `kc` as the calling
    /// thread's syspage. Errors: those of `SYSPAGE_REGISTER` (`EINVAL`, `ENXIO` when `kc` is
    /// not a kernel core, `EBUSY` when the thread has a syspage already, `ETIMEDOUT`), `mmap`'s,
    /// and on Linux `ENOSYS`.
    pub fn register(kc: usize) -> io::Result<Syspage> {
        // SAFETY: a fresh anonymous mapping where the kernel chooses: no existing memory
        // changes. It is page-aligned and zero-filled.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let page = NonNull::new(start.cast::<Page>()).expect("mmap returned a mapping, not null");
        // SAFETY: `reef_syspage_register(page, kc)` reads nothing through its arguments; the
        // kernel maps the page for the KC, which only ever writes entries the protocol hands
        // it, all atomics of a `Page` (which every bit pattern is).
        if let Err(error) = unsafe { crate::reef_call(abi::call::SYSPAGE_REGISTER, [start as u64, kc as u64, 0, 0]) } {
            // SAFETY: exactly the mapping made above; nothing points into it.
            unsafe { libc::munmap(start, PAGE_SIZE) };
            return Err(error);
        }
        Ok(Syspage { page, submitter: Submitter::new(), backing: Backing::Registered, nr_kicks: 0 })
    }

    /// The page.
    fn page(&self) -> &Page {
        // SAFETY: (1) `page` is the start of a page-aligned, readable and writable mapping of
        // PAGE_SIZE bytes (or a leaked `Page` in tests) that lives as long as `self`; (2) it
        // started zero-filled, a valid `Page`, and `Page` is atomics only, so whatever the
        // kernel core or anyone writes there is still one; (3) it is only ever accessed
        // through those atomics.
        unsafe { self.page.as_ref() }
    }

    /// The page and the submitter together, for the submitter's calls that take the page.
    fn parts(&mut self) -> (&Page, &mut Submitter) {
        // SAFETY: as in `page()`; the reference borrows `self.page`, a field apart from
        // `self.submitter`.
        (unsafe { self.page.as_ref() }, &mut self.submitter)
    }

    /// Posts system call `number` with `arguments` and returns its entry's index, without
    /// waiting (Memsc's `memsc_add`). `WouldBlock` when every entry holds a call whose value
    /// was not taken; `InvalidInput` for a number above `u32::MAX`.
    #[inline]
    pub fn add(&mut self, number: u64, arguments: [u64; ARGUMENTS]) -> io::Result<usize> {
        let number = u32::try_from(number).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("system call number {number} does not fit a syspage entry"),
            )
        })?;
        let (page, submitter) = self.parts();
        submitter
            .add(page, number, arguments)
            .map_err(|Full| io::Error::new(io::ErrorKind::WouldBlock, Full.to_string()))
    }

    /// Whether the call in entry `index` is done and its value not taken yet (Memsc's
    /// `memsc_ready`).
    #[inline]
    pub fn ready(&self, index: usize) -> bool {
        self.submitter.is_pending(index) && Submitter::is_done(self.page(), index)
    }

    /// The value of the call in entry `index` if it is done, which frees the entry: once per
    /// call (Memsc's `memsc_retval`). Linux's convention: `-errno` for an error.
    #[inline]
    pub fn retval(&mut self, index: usize) -> Option<i64> {
        let (page, submitter) = self.parts();
        submitter.take_value(page, index)
    }

    /// How many calls were posted whose values were not taken.
    pub fn pending(&self) -> usize {
        self.submitter.pending()
    }

    /// How many times a wait kicked the kernel core so far.
    pub fn nr_kicks(&self) -> u64 {
        self.nr_kicks
    }

    /// Spins until every call posted so far is done (Memsc's `memsc_wait_all`); their values
    /// stay to be taken with [`retval`](Self::retval). The error is the kick's, if the kernel
    /// no longer serves the page.
    #[inline]
    pub fn wait_all(&mut self) -> io::Result<()> {
        // The newest first: the kernel core takes calls in ring order, so while this spins
        // on the newest entry's line it leaves the lines of the entries being served alone (a
        // load of a line the kernel core is about to complete pulls it back to this core, and
        // under TCG each such transfer costs more than the call). Then every other one: the
        // KC completes the calls it answers itself at once and the ones it hands to the home
        // later, so completion is not in ring order.
        let submitter = self.submitter;
        if let Some(newest) = submitter.newest_pending() {
            self.wait_for(newest)?;
        }
        for index in submitter.pending_entries() {
            self.wait_for(index)?;
        }
        Ok(())
    }

    /// Spins until a call is done and returns its index (Memsc's `memsc_wait_any`): the oldest
    /// of those done. `InvalidInput` when no call is pending.
    pub fn wait_any(&mut self) -> io::Result<usize> {
        if self.submitter.pending() == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no call is pending on this syspage"));
        }
        self.wait_until(|syspage| {
            syspage.submitter.pending_entries().find(|&index| Submitter::is_done(syspage.page(), index))
        })
    }

    /// Posts one call, waits for it and returns its value: a blocking call through the
    /// syspage. `WouldBlock` when the ring is full.
    pub fn call(&mut self, number: u64, arguments: [u64; ARGUMENTS]) -> io::Result<i64> {
        let index = self.add(number, arguments)?;
        self.wait_for(index)?;
        Ok(self.retval(index).expect("a done entry posted here has its value"))
    }

    /// Spins until entry `index` is done.
    #[inline]
    fn wait_for(&mut self, index: usize) -> io::Result<()> {
        self.wait_until(|syspage| Submitter::is_done(syspage.page(), index).then_some(index)).map(drop)
    }

    /// Spins until `done` finds an entry, kicking the kernel core after every
    /// [`SPINS_BEFORE_KICK`] polls that found none.
    #[inline]
    fn wait_until(&mut self, done: impl Fn(&Self) -> Option<usize>) -> io::Result<usize> {
        let mut polls = 0;
        loop {
            if let Some(index) = done(self) {
                return Ok(index);
            }
            polls += 1;
            if polls == SPINS_BEFORE_KICK {
                polls = 0;
                self.kick()?;
            }
            std::hint::spin_loop();
        }
    }

    /// Wakes the kernel core in case it halted (`SYSPAGE_KICK`).
    fn kick(&mut self) -> io::Result<()> {
        self.nr_kicks += 1;
        match self.backing {
            // SAFETY: `reef_syspage_kick` takes no arguments, so none is read as a pointer.
            Backing::Registered => unsafe { crate::reef_call(abi::call::SYSPAGE_KICK, [0; 4]) }.map(drop),
            #[cfg(test)]
            Backing::Borrowed => Ok(()),
        }
    }

    /// A syspage on a leaked page, served by whoever the test gives the page to.
    #[cfg(test)]
    fn borrowed(page: &'static Page) -> Syspage {
        Syspage { page: NonNull::from(page), submitter: Submitter::new(), backing: Backing::Borrowed, nr_kicks: 0 }
    }
}

impl Drop for Syspage {
    fn drop(&mut self) {
        match self.backing {
            Backing::Registered => {
                // SAFETY: `reef_syspage_unregister` takes no arguments. After it returns the
                // kernel core no longer touches the page, so it can be unmapped.
                let _ = unsafe { crate::reef_call(abi::call::SYSPAGE_UNREGISTER, [0; 4]) };
                // SAFETY: exactly the mapping `register` made; `self` is going away, and with
                // it every reference into the page.
                unsafe { libc::munmap(self.page.as_ptr().cast(), PAGE_SIZE) };
            }
            #[cfg(test)]
            Backing::Borrowed => {}
        }
    }
}

pub mod transparent {
    //! The thread's plain system calls through its syspage, when it registered one (Memsc
    //! 3.7: what the modified C library does), else by trap. Each call posts one entry and
    //! waits for it, so these are blocking calls that take no trap on the way.
    //!
    //! The thread's syspage lives in a thread-local; [`with`] lends it for asynchronous use
    //! too. When it is full (calls posted through [`with`] and not collected) or lent out at
    //! that moment, a call traps instead: it never waits for room.

    use super::Syspage;
    use crate::raw::{self, Return};
    use std::cell::RefCell;
    use std::io;
    use std::os::fd::RawFd;

    thread_local! {
        static SYSPAGE: RefCell<Option<Syspage>> = const { RefCell::new(None) };
    }

    /// Registers a syspage for the calling thread with kernel core `kc`; from now on this
    /// module's calls on this thread go through it. `AlreadyExists` when the thread has one
    /// here already; else [`Syspage::register`]'s errors (`ENOSYS` on Linux).
    pub fn register(kc: usize) -> io::Result<()> {
        if is_registered() {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "this thread has a transparent syspage already"));
        }
        let syspage = Syspage::register(kc)?;
        install(syspage);
        Ok(())
    }

    /// Makes `syspage` the thread's transparent one (dropping the one before, if any).
    fn install(syspage: Syspage) {
        SYSPAGE.with(|cell| *cell.borrow_mut() = Some(syspage));
    }

    /// Unregisters the thread's syspage; calls trap again. Whether there was one.
    pub fn unregister() -> bool {
        SYSPAGE.with(|cell| cell.borrow_mut().take()).is_some()
    }

    /// Whether the calling thread's calls here go through a syspage.
    pub fn is_registered() -> bool {
        SYSPAGE.with(|cell| cell.try_borrow().map(|syspage| syspage.is_some()).unwrap_or(true))
    }

    /// Runs `f` with the thread's syspage (to post calls asynchronously, or in batches), or
    /// returns `None` when it has none. Calls of this module made inside `f` trap.
    pub fn with<R>(f: impl FnOnce(&mut Syspage) -> R) -> Option<R> {
        SYSPAGE.with(|cell| cell.borrow_mut().as_mut().map(f))
    }

    /// System call `number` with `arguments`: through the thread's syspage when it has one
    /// and it has room, else by trap. The value is the kernel's, `-errno` for an error; a
    /// syspage the kernel stopped serving gives `-errno` of the kick that found out.
    ///
    /// # Safety
    ///
    /// As [`raw::syscall`]: whatever the call does with its arguments (pointers it reads or
    /// writes, the memory map, signal handling, the thread) leaves the program sound.
    pub unsafe fn syscall(number: u64, arguments: [u64; 6]) -> Return {
        let through_syspage = SYSPAGE.with(|cell| {
            let mut borrowed = cell.try_borrow_mut().ok()?;
            let syspage = borrowed.as_mut()?;
            match syspage.call(number, arguments) {
                Ok(value) => Some(Return(value)),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => None,
                Err(error) => Some(Return(-i64::from(error.raw_os_error().unwrap_or(libc::EIO)))),
            }
        });
        match through_syspage {
            Some(value) => value,
            // SAFETY: the caller's contract is `raw::syscall`'s.
            None => unsafe { raw::syscall(number, arguments) },
        }
    }

    /// A result as `io::Result`: the errno of `-4095..=-1`, else the value.
    fn checked(result: Return) -> io::Result<u64> {
        match result.errno() {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(result.0 as u64),
        }
    }

    /// `getpid`.
    pub fn getpid() -> i32 {
        // SAFETY: getpid takes no arguments and changes nothing.
        unsafe { syscall(libc::SYS_getpid as u64, [0; 6]) }.0 as i32
    }

    /// `getppid`.
    pub fn getppid() -> i32 {
        // SAFETY: getppid takes no arguments and changes nothing.
        unsafe { syscall(libc::SYS_getppid as u64, [0; 6]) }.0 as i32
    }

    /// `gettid`.
    pub fn gettid() -> i32 {
        // SAFETY: gettid takes no arguments and changes nothing.
        unsafe { syscall(libc::SYS_gettid as u64, [0; 6]) }.0 as i32
    }

    /// `read(fd, buffer)`: the bytes read.
    pub fn read(fd: RawFd, buffer: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buffer` is writable for its whole length, the count passed, and stays
        // borrowed until the call returns (the call waits for its value).
        let result = unsafe {
            syscall(libc::SYS_read as u64, [fd as u64, buffer.as_mut_ptr() as u64, buffer.len() as u64, 0, 0, 0])
        };
        checked(result).map(|count| count as usize)
    }

    /// `write(fd, bytes)`: the bytes written.
    pub fn write(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
        // SAFETY: `bytes` is readable for its whole length, the count passed, and stays
        // borrowed until the call returns.
        let result =
            unsafe { syscall(libc::SYS_write as u64, [fd as u64, bytes.as_ptr() as u64, bytes.len() as u64, 0, 0, 0]) };
        checked(result).map(|count| count as usize)
    }

    /// `close(fd)`. The caller owns `fd` and uses it no more (an `OwnedFd` would close it
    /// again: use `into_raw_fd` first).
    pub fn close(fd: RawFd) -> io::Result<()> {
        // SAFETY: closing a descriptor touches no memory of the program; the caller owns it.
        checked(unsafe { syscall(libc::SYS_close as u64, [fd as u64, 0, 0, 0, 0, 0]) }).map(drop)
    }

    /// Host tests: make `syspage` the thread's transparent syspage.
    #[cfg(test)]
    pub(super) fn install_for_test(syspage: Syspage) {
        install(syspage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use syspage::{complete, Request, Ring, ENTRIES};

    /// A kernel core on the host: a thread serving `page` by executing each call with the
    /// bare `syscall` instruction, in this process (whose address space it shares, as a KC
    /// shares the process's user half). It starts after `delay`, so waiters have to kick.
    fn serve(page: &'static Page, stop: Arc<AtomicBool>, delay: std::time::Duration) -> std::thread::JoinHandle<usize> {
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let mut ring = Ring::new();
            let mut batch = [Request::default(); ENTRIES];
            let mut served = 0;
            while !stop.load(Ordering::Relaxed) {
                let count = ring.take_batch(page, &mut batch);
                for request in &batch[..count] {
                    // SAFETY: the tests post only getpid, getppid, gettid, read and write with
                    // buffers that stay borrowed until their values are taken.
                    let value = unsafe { crate::raw::syscall(u64::from(request.number), request.arguments) };
                    assert!(complete(page, request, value.0));
                }
                served += count;
                std::hint::spin_loop();
            }
            served
        })
    }

    fn served_syspage(delay_ms: u64) -> (Syspage, Arc<AtomicBool>, std::thread::JoinHandle<usize>) {
        let page: &'static Page = Box::leak(Box::new(Page::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let server = serve(page, stop.clone(), std::time::Duration::from_millis(delay_ms));
        (Syspage::borrowed(page), stop, server)
    }

    #[test]
    fn registering_says_enosys_on_linux() {
        let error = Syspage::register(2).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOSYS));
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
        assert_eq!(transparent::register(2).unwrap_err().raw_os_error(), Some(libc::ENOSYS));
        assert!(!transparent::is_registered());
        assert_eq!(transparent::getppid(), std::os::unix::process::parent_id() as i32, "by trap");
    }

    #[test]
    fn add_ready_retval_and_the_waits() {
        let (mut syspage, stop, server) = served_syspage(20);
        let getppid = libc::SYS_getppid as u64;
        let first = syspage.add(getppid, [0; 6]).unwrap();
        let second = syspage.add(libc::SYS_getpid as u64, [0; 6]).unwrap();
        assert_eq!(syspage.pending(), 2);
        assert!(!syspage.ready(first), "the server starts 20 ms late");
        syspage.wait_all().unwrap();
        assert!(syspage.nr_kicks() > 0, "a late kernel core is kicked");
        assert!(syspage.ready(first) && syspage.ready(second));
        assert_eq!(syspage.retval(second), Some(i64::from(std::process::id())));
        assert_eq!(syspage.retval(second), None, "once");
        assert!(!syspage.ready(second));
        assert_eq!(syspage.wait_any().unwrap(), first);
        assert_eq!(syspage.retval(first), Some(i64::from(std::os::unix::process::parent_id())));
        assert_eq!(syspage.wait_any().unwrap_err().kind(), io::ErrorKind::InvalidInput);
        syspage.wait_all().unwrap();
        // A full ring says WouldBlock; an error comes back as -errno.
        for _ in 0..ENTRIES {
            syspage.add(getppid, [0; 6]).unwrap();
        }
        assert_eq!(syspage.add(getppid, [0; 6]).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        syspage.wait_all().unwrap();
        for index in 0..ENTRIES {
            assert!(syspage.retval(index).is_some());
        }
        assert_eq!(syspage.call(libc::SYS_close as u64, [u64::MAX, 0, 0, 0, 0, 0]).unwrap(), -i64::from(libc::EBADF));
        assert_eq!(syspage.add(1 << 40, [0; 6]).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(server.join().unwrap(), 2 + ENTRIES + 1);
    }

    #[test]
    fn the_waits_do_not_take_completion_in_ring_order_for_granted() {
        // Reef's KC answers some calls at once and hands the others home: here the newest is
        // done first, and the oldest only 20 ms later.
        let page: &'static Page = Box::leak(Box::new(Page::new()));
        let mut syspage = Syspage::borrowed(page);
        let slow = syspage.add(libc::SYS_write as u64, [1, 0, 0, 0, 0, 0]).unwrap();
        let fast = syspage.add(libc::SYS_getpid as u64, [0; 6]).unwrap();
        let mut ring = Ring::new();
        let mut taken = [Request::default(); 2];
        assert_eq!(ring.take_batch(page, &mut taken), 2);
        assert!(complete(page, &taken[1], 42));
        // The oldest is completed late, so a wait that took ring order for granted returns the
        // wrong entry (or too early) instead of hanging.
        let late = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(complete(page, &taken[0], 0));
        });
        assert_eq!(syspage.wait_any().unwrap(), fast, "the one done, not the oldest");
        syspage.wait_all().unwrap();
        assert!(syspage.ready(slow), "wait_all waited for the oldest too");
        assert_eq!((syspage.retval(fast), syspage.retval(slow)), (Some(42), Some(0)));
        late.join().unwrap();
    }

    #[test]
    fn transparent_calls_go_through_the_syspage() {
        let (syspage, stop, server) = served_syspage(0);
        transparent::install_for_test(syspage);
        assert!(transparent::is_registered());
        assert_eq!(transparent::getpid(), std::process::id() as i32);
        assert_eq!(transparent::getppid(), std::os::unix::process::parent_id() as i32);
        assert!(transparent::gettid() > 0);
        let mut ends = [0; 2];
        // SAFETY: `ends` is two writable ints, all pipe2 writes.
        assert_eq!(unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        assert_eq!(transparent::write(ends[1], b"through the page").unwrap(), 16);
        let mut buffer = [0u8; 32];
        assert_eq!(transparent::read(ends[0], &mut buffer).unwrap(), 16);
        assert_eq!(&buffer[..16], b"through the page");
        transparent::close(ends[0]).unwrap();
        transparent::close(ends[1]).unwrap();
        assert_eq!(transparent::close(ends[1]).unwrap_err().raw_os_error(), Some(libc::EBADF));
        // Lent out, the page is busy: a call made inside traps, and still works.
        let inside = transparent::with(|syspage| {
            let index = syspage.add(libc::SYS_getppid as u64, [0; 6]).unwrap();
            (transparent::getpid(), index)
        });
        assert_eq!(inside.unwrap().0, std::process::id() as i32);
        transparent::with(|syspage| {
            syspage.wait_all().unwrap();
            syspage.retval(inside.unwrap().1).unwrap()
        });
        assert!(transparent::unregister());
        assert!(!transparent::unregister());
        assert_eq!(transparent::with(|_| ()), None);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(server.join().unwrap(), 3 + 5 + 1, "the pid inside `with` trapped");
    }
}
