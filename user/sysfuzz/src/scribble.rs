//! `--scribble`: a syspage served by a kernel core, with garbage written all over it while the
//! KC serves it (Memsc 4.6: the kernel must copy an entry before it trusts any of it). Every
//! kernel must stay alive; the fuzzer only reports what it saw.

use crate::random::Random;
use syspage::{status, Header, Page, Submitter, ARGUMENTS, ENTRIES};

/// How long a genuine call may stay unanswered before the fuzzer stops waiting for it (the
/// KC's head may sit on an entry the garbage made free: the ring is served in order).
const PATIENCE_POLLS: u32 = 20_000;

/// Numbers a forged entry may name: calls that read the caller's identity or fail harmlessly
/// (a closed descriptor), so garbage cannot make the home do damage in the fuzzer's name.
const HARMLESS: [u32; 6] = [
    libc::SYS_getppid as u32,
    libc::SYS_getpid as u32,
    libc::SYS_gettid as u32,
    libc::SYS_getuid as u32,
    libc::SYS_sched_yield as u32,
    libc::SYS_close as u32,
];

fn reef(number: u64, arguments: [u64; 2]) -> Result<u64, i32> {
    // SAFETY: the syspage calls take a page address and a core number (registration) or
    // nothing; the page is this program's own mapping, kept for the whole run.
    let result = unsafe { libc::syscall(number as libc::c_long, arguments[0], arguments[1]) };
    if result < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(result as u64)
    }
}

/// Registers a syspage with `kernel_core`, then for `calls` rounds writes garbage, forges
/// entries and makes genuine calls; unregisters and reports the counts.
pub fn run(kernel_core: usize, seed: u64, calls: u64) -> Result<String, String> {
    // SAFETY: a fresh private anonymous page; nothing else in the program uses it.
    let address = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err("mmap of the syspage failed".into());
    }
    let page_address = address as u64;
    reef(abi::call::SYSPAGE_REGISTER, [page_address, kernel_core as u64])
        .map_err(|errno| format!("reef_syspage_register refused: errno {errno}"))?;
    if reef(abi::call::SYSPAGE_REGISTER, [page_address, kernel_core as u64]) != Err(libc::EBUSY) {
        return Err("a second registration was not refused with EBUSY".into());
    }
    // SAFETY: the page is mapped, page-aligned and ours for the run; `Page` is only atomics,
    // so the kernel core writing it meanwhile is no data race.
    let page = unsafe { &*(address as *const Page) };
    let parent = std::os::unix::process::parent_id() as i64;
    let mut random = Random::new(seed);
    let mut submitter = Submitter::new();
    let (mut garbage, mut forged, mut answered, mut wrong, mut unanswered) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for _ in 0..calls {
        match random.below(4) {
            0 => {
                let entry = page.entry(random.below(ENTRIES as u64) as usize);
                let word = random.next();
                match random.below(ARGUMENTS as u64 + 2) as usize {
                    0 => entry.header.store(word, std::sync::atomic::Ordering::Release),
                    1 => entry.value.store(word, std::sync::atomic::Ordering::Release),
                    k => entry.arguments[k - 2].store(word, std::sync::atomic::Ordering::Release),
                }
                garbage += 1;
            }
            1 => {
                let entry = page.entry(random.below(ENTRIES as u64) as usize);
                for argument in &entry.arguments {
                    argument.store(random.next() | 0x8000_0000, std::sync::atomic::Ordering::Relaxed);
                }
                let number = HARMLESS[random.below(HARMLESS.len() as u64) as usize];
                let sequence = random.next() as u32 & Header::SEQUENCE_MASK;
                let header = Header { status: status::SUBMITTED, sequence, number };
                entry.header.store(header.pack(), std::sync::atomic::Ordering::Release);
                forged += 1;
            }
            2 => {
                let Ok(index) = submitter.add(page, libc::SYS_getppid as u32, [0; ARGUMENTS]) else {
                    // Full of our own calls the garbage made unanswerable: start over.
                    submitter = Submitter::new();
                    continue;
                };
                let _ = reef(abi::call::SYSPAGE_KICK, [0, 0]);
                let mut polls = 0;
                while !Submitter::is_done(page, index) && polls < PATIENCE_POLLS {
                    std::hint::spin_loop();
                    polls += 1;
                }
                match submitter.take_value(page, index) {
                    Some(value) if value == parent => answered += 1,
                    Some(_) => wrong += 1,
                    None => unanswered += 1,
                }
            }
            _ => {
                let _ = reef(abi::call::SYSPAGE_KICK, [0, 0]);
            }
        }
    }
    reef(abi::call::SYSPAGE_UNREGISTER, [0, 0]).map_err(|errno| format!("unregister refused: errno {errno}"))?;
    if reef(abi::call::SYSPAGE_UNREGISTER, [0, 0]) != Err(libc::ENOENT) {
        return Err("a second unregistration was not refused with ENOENT".into());
    }
    // SAFETY: the page is ours and no longer registered.
    unsafe { libc::munmap(address, 4096) };
    // SAFETY: getppid takes no arguments.
    if unsafe { libc::getppid() } as i64 != parent {
        return Err("getppid by trap is wrong after the run".into());
    }
    Ok(format!(
        "rounds={calls} garbage={garbage} forged={forged} answered={answered} wrong-values={wrong} unanswered={unanswered}"
    ))
}
