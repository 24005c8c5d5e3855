//! `fork-copy-on-write`: a parent with 64 MiB touched forks; both sides write their own
//! patterns to every page (the first page through the kernel, by a `read` from a pipe) and
//! read back only their own; on Reef, the frames the fork shares are counted once.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

/// Bytes the parent touches before the fork.
const SIZE: usize = 64 << 20;
const PAGE: usize = 4096;
const PAGES: usize = SIZE / PAGE;
const WORDS_PER_PAGE: usize = PAGE / 8;
/// More frames than this taken by the fork itself (page tables, the child's stacks) means
/// the pages were copied, not shared.
const FORK_FRAMES_AT_MOST: u64 = (PAGES / 8) as u64;
/// The frames the parent may hold after the child's end beyond what it held before the fork
/// (its pipes, a page table): it holds one frame per page again, not two.
const SLACK_FRAMES: u64 = 256;

/// The pattern of `side` (a small number) for word `word` of page `page`.
fn pattern(side: u64, page: usize, word: usize) -> u64 {
    (side << 56) ^ ((page as u64) << 20) ^ word as u64 ^ 0x5a5a_0000
}

/// One memory reading of the core this process runs on (Reef only).
#[derive(Clone, Copy, Debug)]
struct Reading {
    free_frames: u64,
    fork_shares: u64,
    /// The `ps` table's frames column of this core (each process's mapped frames).
    mapped_frames: u64,
    leaked_frames: u64,
}

fn number_after(line: &str, label: &str) -> Option<u64> {
    let rest = &line[line.find(label)? + label.len()..];
    rest.trim_start().split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// This core's free frames and fork shares (`mem`) and its mapped and leaked frames (`ps`).
fn reading() -> Option<Reading> {
    let core = rt::current_core()?;
    let (mem, _) = rt::control(&["mem"]).ok()?;
    let line = mem.lines().find(|l| l.starts_with(&format!("core {core} ")) && l.contains("free frames"))?;
    let (ps, _) = rt::control(&["ps"]).ok()?;
    let row: Vec<u64> = ps
        .lines()
        .map(|l| l.split_whitespace().map_while(|w| w.parse().ok()).collect::<Vec<u64>>())
        .find(|numbers| numbers.len() == 9 && numbers[0] == core as u64)?;
    Some(Reading {
        free_frames: number_after(line, "free frames")?,
        fork_shares: number_after(line, "fork shares")?,
        mapped_frames: row[5],
        leaked_frames: row[8],
    })
}

fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        panic!("pipe: {}", std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned by nothing else.
    let [read, write] = fds.map(|fd| std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }));
    (read, write)
}

/// Writes `side`'s pattern into the region: page 0 through the kernel (a `read` from a pipe
/// into it: the kernel's own write to a copy-on-write page), the others directly; then
/// checks every page holds `side`'s pattern. `Err` names the first wrong word.
fn write_and_check(region: &mut [u64], side: u64) -> Result<(), String> {
    let first: Vec<u8> = (0..WORDS_PER_PAGE).flat_map(|word| pattern(side, 0, word).to_ne_bytes()).collect();
    let (mut from, mut to) = pipe();
    to.write_all(&first).map_err(|e| format!("pipe write: {e}"))?;
    // SAFETY: the first page of the region, PAGE bytes, owned by `region`'s borrow.
    let page = unsafe { std::slice::from_raw_parts_mut(region.as_mut_ptr().cast::<u8>(), PAGE) };
    from.read_exact(page).map_err(|e| format!("read into a shared page: {e}"))?;
    for page in 1..PAGES {
        for word in 0..WORDS_PER_PAGE {
            region[page * WORDS_PER_PAGE + word] = pattern(side, page, word);
        }
    }
    for page in 0..PAGES {
        for word in 0..WORDS_PER_PAGE {
            let found = region[page * WORDS_PER_PAGE + word];
            if found != pattern(side, page, word) {
                return Err(format!("page {page} word {word} holds {found:#x}, not side {side}'s pattern"));
            }
        }
    }
    Ok(())
}

/// The test; with `move_child`, the child moves to the next core before it writes (its
/// pages leave the fork's sharing), on Reef with more than one core.
pub fn run(move_child: bool) {
    let name = if move_child { "fork-cow-move" } else { "fork-cow" };
    match test(move_child) {
        Ok(detail) => println!("TEST {name} ok {detail}"),
        Err(detail) => {
            println!("TEST {name} fail {detail}");
            std::process::exit(1);
        }
    }
}

fn test(move_child: bool) -> Result<String, String> {
    // SAFETY: a fresh private anonymous mapping; the region is used only through `region`.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: SIZE bytes mapped above, aligned to a page, not aliased.
    let region = unsafe { std::slice::from_raw_parts_mut(base.cast::<u64>(), SIZE / 8) };
    for page in 0..PAGES {
        for word in 0..WORDS_PER_PAGE {
            region[page * WORDS_PER_PAGE + word] = pattern(1, page, word);
        }
    }
    let place = rt::current_core().map_or("linux".to_string(), |core| format!("core {core}"));
    let before = reading();
    let (mut ready_read, mut ready_write) = pipe();
    let (mut go_read, mut go_write) = pipe();
    // SAFETY: the program is single-threaded; the child uses only its own copies.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if child == 0 {
        let status = child_side(region, move_child, &mut ready_write, &mut go_read);
        std::process::exit(status);
    }
    let mut byte = [0u8];
    ready_read.read_exact(&mut byte).map_err(|e| format!("the child never said it was ready: {e}"))?;
    let moved = byte[0] == b'm';
    let sharing = reading();
    go_write.write_all(b"g").map_err(|e| format!("go: {e}"))?;
    let mine = write_and_check(region, 2);
    let mut status = 0;
    // SAFETY: waiting for the child just forked, with a valid status pointer.
    if unsafe { libc::waitpid(child, &mut status, 0) } != child {
        return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
    }
    mine.map_err(|e| format!("{place}: the parent's pages: {e}"))?;
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("{place}: the child ended with wait status {status:#x} (its line says why)"));
    }
    let after = reading();
    // SAFETY: the mapping made above, unused from here on.
    unsafe { libc::munmap(base, SIZE) };
    let mut detail = format!("{place} pages {PAGES} child moved {moved}");
    if let (Some(before), Some(sharing), Some(after)) = (before, sharing, after) {
        let fork_took = before.free_frames.saturating_sub(sharing.free_frames);
        detail += &format!(
            " fork took {fork_took} frames, shares {} -> {} -> {}, mapped {} -> {} -> {}, free {} -> {} -> {}, leaked {} {} {}",
            before.fork_shares,
            sharing.fork_shares,
            after.fork_shares,
            before.mapped_frames,
            sharing.mapped_frames,
            after.mapped_frames,
            before.free_frames,
            sharing.free_frames,
            after.free_frames,
            before.leaked_frames,
            sharing.leaked_frames,
            after.leaked_frames
        );
        let leaked = [before.leaked_frames, sharing.leaked_frames, after.leaked_frames];
        if leaked != [0; 3] {
            return Err(format!("frames unaccounted for: {detail}"));
        }
        if after.fork_shares != before.fork_shares {
            return Err(format!("references to shared frames left after the child's end: {detail}"));
        }
        if after.free_frames + SLACK_FRAMES < before.free_frames {
            return Err(format!("the parent holds more than its pages after the child's end: {detail}"));
        }
        if !moved {
            if fork_took > FORK_FRAMES_AT_MOST {
                return Err(format!("the fork copied the pages instead of sharing them: {detail}"));
            }
            if sharing.fork_shares < before.fork_shares + PAGES as u64 {
                return Err(format!("the fork did not share every touched page: {detail}"));
            }
            // Every process counts the frames it maps: the child adds the shared ones again,
            // and the leak check (leaked 0 above) subtracts them once.
            if sharing.mapped_frames < before.mapped_frames + PAGES as u64 {
                return Err(format!("the child does not count the frames it maps: {detail}"));
            }
        }
    }
    Ok(detail)
}

/// The child: says it is ready (after moving, if asked), waits for the parent's go, writes
/// and checks its own pattern. Its exit status is the parent's verdict.
fn child_side(region: &mut [u64], move_child: bool, ready: &mut std::fs::File, go: &mut std::fs::File) -> i32 {
    let mut moved = false;
    if move_child {
        if let (Some(core), Some(cores)) = (rt::current_core(), rt::instance_count()) {
            if cores > 1 {
                match rt::roles::move_process(None, (core + 1) % cores) {
                    Ok(_) => moved = true,
                    Err(error) => {
                        println!("TEST fork-cow-move fail the child could not move: {error}");
                        return 1;
                    }
                }
            }
        }
    }
    if ready.write_all(if moved { b"m" } else { b"r" }).is_err() {
        return 1;
    }
    let mut byte = [0u8];
    if go.read_exact(&mut byte).is_err() {
        return 1;
    }
    // What the parent wrote before the fork, read through the shared (or moved) pages.
    for page in 0..PAGES {
        let found = region[page * WORDS_PER_PAGE + page % WORDS_PER_PAGE];
        if found != pattern(1, page, page % WORDS_PER_PAGE) {
            println!("TEST fork-cow fail the child reads {found:#x} in page {page}, not what the parent wrote before the fork");
            return 1;
        }
    }
    match write_and_check(region, 3) {
        Ok(()) => 0,
        Err(error) => {
            println!("TEST fork-cow fail the child's pages: {error}");
            1
        }
    }
}
