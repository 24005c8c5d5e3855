//! The kernel core's side: take the head entry, execute it elsewhere, complete it.

use crate::page::{status, Header, Page, ARGUMENTS, ENTRIES};
use crate::sync::Ordering;

/// A system call taken from a syspage: the kernel core's own copy, the only thing it checks and
/// uses afterwards (Memsc 4.6: the process can rewrite the entry at any moment, so a check made
/// on the shared entry says nothing about what a later read of it would find).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Request {
    /// The entry it came from, below [`ENTRIES`].
    pub index: usize,
    /// The header's sequence (24 bits): [`complete`] finds the entry holding the same call.
    pub sequence: u32,
    /// The system call's number, as the process wrote it (unchecked).
    pub number: u32,
    /// The arguments, as the process wrote them (unchecked).
    pub arguments: [u64; ARGUMENTS],
}

/// What [`Ring::answer_or_take`] did with the head entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Nothing: the head is not submitted, or the process rewrote it while it was looked at.
    Empty,
    /// Completed in place (*submitted* → *done*) with the kernel core's own answer.
    Answered,
    /// Taken (*submitted* → *taken*): to execute elsewhere and finish with [`complete`].
    Taken(Request),
}

/// The kernel core's private state for one syspage: the index of the head entry, the next one
/// to execute. It lives in the kernel's memory, never in the page, so nothing the process
/// writes can move it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ring {
    head: usize,
}

impl Ring {
    /// A ring whose head is entry 0, as for a fresh page.
    pub const fn new() -> Self {
        Ring { head: 0 }
    }

    /// A ring whose head is entry `head` (modulo [`ENTRIES`]): for a kernel core taking over a
    /// syspage another one served.
    pub const fn starting_at(head: usize) -> Self {
        Ring { head: head % ENTRIES }
    }

    /// The index of the head entry.
    pub fn head(&self) -> usize {
        self.head
    }

    /// Whether the head entry is submitted, without taking it: the scanner's look (Memsc 3.3),
    /// one load of one word.
    #[inline]
    pub fn is_pending(&self, page: &Page) -> bool {
        Header::unpack(page.entries[self.head].header.load(Ordering::Relaxed)).status == status::SUBMITTED
    }

    /// If the head entry is submitted: copies it (the only read of the entry), claims it
    /// (*submitted* → *taken*, one compare-exchange of the header word it copied), moves the
    /// head on and returns the copy. Else `None`, and the head stays. Only the head is looked
    /// at (Memsc 3.3): the ring is processed in order, so a submitted entry elsewhere waits
    /// for the ones before it. A claimed entry is never taken again, however long its
    /// completion takes and however often the head wraps meanwhile.
    ///
    /// `None` too when the process rewrote the header while it was being copied (the claim
    /// fails): the copy may mix two calls, so it is dropped, and the next look at the head
    /// sees what the process left there.
    #[inline]
    pub fn take(&mut self, page: &Page) -> Option<Request> {
        match self.answer_or_take(page, |_| None) {
            Head::Taken(request) => Some(request),
            Head::Empty | Head::Answered => None,
        }
    }

    /// The kernel core's look at the head entry, for a kernel core that holds the answer of
    /// some calls itself. If the head is submitted and `answer` gives its call number a value,
    /// the entry is completed in place: the value is written and the header goes *submitted*
    /// → *done* in one compare-exchange of the word read, with no copy and no claim (nothing
    /// of the entry but its number is used, and nothing of it is left to run). Else the call
    /// is taken as by [`take`](Self::take). The head moves on past an entry answered or taken.
    ///
    /// [`Head::Empty`] when the head is not submitted, or when the process rewrote its header
    /// in the meantime (the head stays, as for a failed claim). In that last case the value
    /// may have been written into the process's entry: its own page, and a value word the
    /// process reads only once a later completion marks the entry done, with a new value.
    #[inline]
    pub fn answer_or_take(&mut self, page: &Page, answer: impl FnOnce(u32) -> Option<i64>) -> Head {
        let entry = &page.entries[self.head];
        // Acquire: pairs with the submitter's Release store of the header, so the arguments
        // it wrote before are the ones read below.
        let word = entry.header.load(Ordering::Acquire);
        let header = Header::unpack(word);
        if header.status != status::SUBMITTED {
            return Head::Empty;
        }
        let (next, head) = match answer(header.number) {
            Some(value) => {
                entry.value.store(value as u64, Ordering::Relaxed);
                (Header { status: status::DONE, ..header }.pack(), Head::Answered)
            }
            None => {
                let arguments = core::array::from_fn(|i| entry.arguments[i].load(Ordering::Relaxed));
                let request = Request { index: self.head, sequence: header.sequence, number: header.number, arguments };
                (Header { status: status::TAKEN, ..header }.pack(), Head::Taken(request))
            }
        };
        // On success, Acquire: the argument loads above stay before the claim; Release: the
        // value stored above is visible to a submitter that sees `done` with Acquire. Relaxed
        // on failure: nothing is used.
        if entry.header.compare_exchange(word, next, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return Head::Empty;
        }
        self.head = (self.head + 1) % ENTRIES;
        head
    }

    /// Takes everything pending from the head on, in order, at most `out.len()` entries, into
    /// `out`; returns how many (Memsc 3.4: a worker runs every pending call it finds, not just
    /// the first).
    pub fn take_batch(&mut self, page: &Page, out: &mut [Request]) -> usize {
        let mut taken = 0;
        for slot in out.iter_mut() {
            match self.take(page) {
                Some(request) => *slot = request,
                None => break,
            }
            taken += 1;
        }
        taken
    }
}

/// Writes `value` as the result of `request` and marks its entry done, if the entry still holds
/// `request` (same index, sequence and number, status taken). Returns whether it did.
///
/// `false`: the process rewrote the entry since it was taken; the header is left as the
/// process made it. The value word is written only after that check passed, so a `false`
/// leaves it untouched unless the process rewrote the header in the instant between the check
/// and the final compare-exchange; either way nothing but the process's own page is touched.
#[inline]
pub fn complete(page: &Page, request: &Request, value: i64) -> bool {
    let entry = page.entry(request.index);
    let taken = Header { status: status::TAKEN, sequence: request.sequence, number: request.number }.pack();
    let done = Header { status: status::DONE, sequence: request.sequence, number: request.number }.pack();
    // Relaxed: a first look only, to leave the value alone when the entry changed; the
    // compare-exchange below is what decides.
    if entry.header.load(Ordering::Relaxed) != taken {
        return false;
    }
    entry.value.store(value as u64, Ordering::Relaxed);
    // Release: the value stored above is visible to a submitter that sees `done` with Acquire.
    entry.header.compare_exchange(taken, done, Ordering::Release, Ordering::Relaxed).is_ok()
}
