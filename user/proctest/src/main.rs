//! proctest: checks that Rust's std works (threads, locks, time, files, fork, heap); one line.
#![doc = include_str!("../README.md")]

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The file the initramfs holds for the `hello` check.
const HELLO_PATH: &str = "/etc/hello.txt";

const THREADS: u64 = 4;
const INCREMENTS_PER_THREAD: u64 = 10_000;
const MAP_ENTRIES: u64 = 1_000;
const SLEEP: Duration = Duration::from_millis(10);
/// A sleep this long means the timer or the clock is broken, not merely slow.
const SLEEP_LIMIT: Duration = Duration::from_secs(1);
/// The status the forked child exits with; any other value would do, but not 0 or 1.
const CHILD_STATUS: i32 = 7;
const HEAP_BYTES: usize = 1 << 20;

/// What one check found: the `name=value` detail, or what went wrong.
type Outcome = Result<String, String>;

/// A check, run once.
type Check = Box<dyn FnOnce() -> Outcome>;

fn main() -> ExitCode {
    let place = match rt::current_core() {
        Some(core) => format!("core {core}"),
        None => "linux".to_string(),
    };
    let mut arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.first().is_some_and(|a| a == "--threads-for") {
        return threads_for(&place, arguments.get(1).map(String::as_str), arguments.get(2).map(String::as_str));
    }
    let application_core = match take_ac_option(&mut arguments) {
        Ok(core) => core,
        Err(message) => {
            println!("TEST proc-std fail {place} usage: {message}");
            return ExitCode::FAILURE;
        }
    };
    let hello = match hello_path(arguments) {
        Ok(path) => path,
        Err(message) => {
            println!("TEST proc-std fail {place} usage: {message}");
            return ExitCode::FAILURE;
        }
    };
    let checks: [(&str, Check); 12] = [
        ("mutex", Box::new(mutex)),
        ("atomic", Box::new(atomic)),
        ("map", Box::new(map)),
        ("sleep", Box::new(sleep)),
        ("hello", Box::new(move || read_hello(hello.as_deref()))),
        ("fork-exit", Box::new(fork_exit)),
        ("command", Box::new(command)),
        ("args", Box::new(args)),
        ("home", Box::new(home)),
        ("bin", Box::new(bin)),
        ("heap", Box::new(heap)),
        ("ac-trip", Box::new(move || ac_trip(application_core))),
    ];
    // A failing check is reported in the one line, not by the default panic message.
    panic::set_hook(Box::new(|_| {}));
    let mut passed = Vec::new();
    let mut failed = Vec::new();
    for (name, check) in checks {
        match panic::catch_unwind(AssertUnwindSafe(check)) {
            Ok(Ok(detail)) => passed.push(format!("{name}={detail}")),
            Ok(Err(problem)) => failed.push(format!("{name}: {problem}")),
            Err(payload) => failed.push(format!("{name}: panicked: {}", rt::panic_message(payload.as_ref()))),
        }
    }
    let (verdict, detail, code) = if failed.is_empty() {
        ("ok", passed.join(" "), ExitCode::SUCCESS)
    } else {
        ("fail", failed.join("; "), ExitCode::FAILURE)
    };
    println!("TEST proc-std {verdict} {place} {}", one_line(&detail));
    code
}

/// The most threads `--threads-for` starts.
const MAX_THREADS_FOR: u64 = 1000;

/// `--threads-for MS [THREADS]`: THREADS threads (four by default) share a lock-protected
/// counter for MS milliseconds (each one round of 100 at least), sleeping a little now and
/// then, and are joined: a process with
/// several threads, long enough to be moved to another core meanwhile. One line: the cores it
/// started and ended on, and whether the count is every thread's increments.
fn threads_for(place: &str, milliseconds: Option<&str>, threads: Option<&str>) -> ExitCode {
    let usage = || {
        println!("TEST proc-threads fail {place} usage: proctest --threads-for MILLISECONDS [THREADS, 1 to {MAX_THREADS_FOR}]");
        ExitCode::FAILURE
    };
    let Some(length) = milliseconds.and_then(|ms| ms.parse().ok()).map(Duration::from_millis) else {
        return usage();
    };
    let threads = match threads.map(str::parse::<u64>) {
        None => THREADS,
        Some(Ok(count)) if (1..=MAX_THREADS_FOR).contains(&count) => count,
        Some(_) => return usage(),
    };
    let start_core = rt::current_core();
    let deadline = Instant::now() + length;
    let total = Arc::new(Mutex::new(0u64));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let total = Arc::clone(&total);
            thread::spawn(move || {
                // One round at least: a process frozen past its deadline before its threads
                // ran (a `core stop --keep` longer than MS) still counts something.
                let mut mine = 0u64;
                loop {
                    for _ in 0..100 {
                        *total.lock().expect("no thread panics holding the lock") += 1;
                        mine += 1;
                    }
                    if Instant::now() >= deadline {
                        break mine;
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    let mut counted = 0;
    for worker in workers {
        match worker.join() {
            Ok(mine) => counted += mine,
            Err(_) => {
                println!("TEST proc-threads fail {place} a thread panicked");
                return ExitCode::FAILURE;
            }
        }
    }
    let total = *total.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let cores = format!(
        "start-core={} end-core={}",
        start_core.map_or("-".to_string(), |c| c.to_string()),
        rt::current_core().map_or("-".to_string(), |c| c.to_string())
    );
    if total == counted && total > 0 {
        println!("TEST proc-threads ok {cores} threads={threads} total={total}");
        ExitCode::SUCCESS
    } else {
        println!("TEST proc-threads fail {cores} the lock counted {total}, the threads {counted}");
        ExitCode::FAILURE
    }
}

/// The file the `hello` check reads: `--hello PATH`, else the initramfs's on Reef; `None` means
/// skip it (on Linux with no `--hello`).
fn hello_path(arguments: Vec<String>) -> Result<Option<String>, String> {
    match &arguments[..] {
        [] => Ok(rt::on_reef().then(|| HELLO_PATH.to_string())),
        [flag, path] if flag == "--hello" => Ok(Some(path.clone())),
        _ => Err(format!("proctest [--hello PATH], not {arguments:?}")),
    }
}

/// Removes `--ac CORE` from the arguments and returns the core.
fn take_ac_option(arguments: &mut Vec<String>) -> Result<Option<usize>, String> {
    let Some(at) = arguments.iter().position(|a| a == "--ac") else { return Ok(None) };
    let core = arguments.get(at + 1).and_then(|c| c.parse().ok()).ok_or("--ac takes a core number")?;
    arguments.drain(at..at + 2);
    Ok(Some(core))
}

/// With `--ac CORE` (on Reef): the thread moves itself to that application core, works there
/// (system calls served by its home, a file read, a thread started), and comes back.
fn ac_trip(core: Option<usize>) -> Outcome {
    let Some(core) = core else { return Ok("skipped".to_string()) };
    let home = rt::current_core().ok_or("not on Reef")?;
    let moved = rt::roles::move_to_ac(Some(core), false).map_err(|e| format!("move to core {core}: {e}"))?;
    let there = rt::current_core();
    let again = rt::roles::move_to_ac(Some(core), false).err().and_then(|e| e.raw_os_error());
    let text = std::fs::read_to_string("/etc/hello.txt").map(|t| t.len()).unwrap_or(0);
    let helper = thread::spawn(|| 6 * 7).join().unwrap_or(0);
    let remapped = remapped_page_reads_fresh();
    rt::roles::return_from_ac().map_err(|e| format!("return: {e}"))?;
    remapped.map_err(|e| format!("on the AC: {e}"))?;
    let back = rt::current_core();
    let twice = rt::roles::return_from_ac().err().and_then(|e| e.raw_os_error());
    if moved != core || there != Some(core) || back != Some(home) {
        return Err(format!("moved to {moved}, ran on {there:?}, came back to {back:?} (home {home})"));
    }
    if again != Some(libc::EALREADY) || twice != Some(libc::EALREADY) {
        return Err(format!("a second move gave {again:?}, a second return {twice:?}: expected EALREADY"));
    }
    if text == 0 || helper != 42 {
        return Err(format!("on the AC: read {text} bytes, the thread answered {helper}"));
    }
    Ok(format!("{home}->{core}->{home}"))
}

/// Maps a page, fills it, reads it (so the core caches its translation), unmaps it, maps and
/// fills another page (which may take the freed frame), then maps a page at the first address
/// again: it must read zero. A core that kept the first translation would read the old frame
/// (0xA5, or the other page's 0x5A): on an AC, whose calls the home runs, that is what the
/// home's mapping generation is for.
fn remapped_page_reads_fresh() -> Result<(), String> {
    const PAGE: usize = 4096;
    let map = |address: *mut libc::c_void, flags: i32| {
        // SAFETY: an anonymous private mapping, at a free address or (MAP_FIXED) over a page
        // this function unmapped itself; nothing else points there.
        unsafe { libc::mmap(address, PAGE, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) }
    };
    let anonymous = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let first = map(std::ptr::null_mut(), anonymous);
    if first == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    let bytes = first.cast::<u8>();
    // SAFETY: `first` is PAGE writable bytes of ours.
    let seen = unsafe {
        bytes.write_bytes(0xA5, PAGE);
        std::ptr::read_volatile(bytes.add(100))
    };
    // SAFETY: the mapping made above; nothing refers to it after this.
    unsafe { libc::munmap(first, PAGE) };
    let other = map(std::ptr::null_mut(), anonymous);
    if other == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `other` is PAGE writable bytes of ours.
    unsafe { other.cast::<u8>().write_bytes(0x5A, PAGE) };
    let again = map(first, anonymous | libc::MAP_FIXED);
    // SAFETY: `again`, if mapped, is PAGE readable bytes of ours.
    let fresh = (again == first).then(|| unsafe { std::ptr::read_volatile(again.cast::<u8>().add(100)) });
    // SAFETY: both mappings made above (a failed one is not unmapped).
    unsafe {
        libc::munmap(other, PAGE);
        if again != libc::MAP_FAILED {
            libc::munmap(again, PAGE);
        }
    }
    match (seen, fresh) {
        (0xA5, Some(0)) => Ok(()),
        (_, None) => Err(format!("mmap MAP_FIXED at {first:p} gave {again:p}")),
        (seen, Some(fresh)) => {
            Err(format!("a page mapped again read {fresh:#x} (first read {seen:#x}): a stale translation"))
        }
    }
}

/// `text` with line breaks turned into spaces: the result must stay on one line.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

fn expect_equal(what: &str, got: u64, wanted: u64) -> Outcome {
    if got == wanted {
        Ok(got.to_string())
    } else {
        Err(format!("{what} {got} instead of {wanted}"))
    }
}

fn mutex() -> Outcome {
    let total = Arc::new(Mutex::new(0u64));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let total = Arc::clone(&total);
            thread::spawn(move || {
                for _ in 0..INCREMENTS_PER_THREAD {
                    *total.lock().expect("no thread panics holding the lock") += 1;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| "a thread panicked".to_string())?;
    }
    let total = *total.lock().map_err(|_| "the lock is poisoned".to_string())?;
    expect_equal("total", total, THREADS * INCREMENTS_PER_THREAD)
}

fn atomic() -> Outcome {
    let total = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let total = Arc::clone(&total);
            thread::spawn(move || {
                for _ in 0..INCREMENTS_PER_THREAD {
                    // Relaxed: only the count matters, and `join` orders it before the read.
                    total.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| "a thread panicked".to_string())?;
    }
    expect_equal("total", total.load(Ordering::Relaxed), THREADS * INCREMENTS_PER_THREAD)
}

fn map() -> Outcome {
    // `HashMap::new` seeds `RandomState` from the kernel (`getrandom`).
    let mut squares = HashMap::new();
    for key in 0..MAP_ENTRIES {
        squares.insert(key, key * key);
    }
    if let Some(key) = (0..MAP_ENTRIES).find(|key| squares.get(key) != Some(&(key * key))) {
        return Err(format!("entry {key} reads back wrong"));
    }
    expect_equal("entries", squares.len() as u64, MAP_ENTRIES)
}

fn sleep() -> Outcome {
    let start = Instant::now();
    thread::sleep(SLEEP);
    let slept = start.elapsed();
    let shown = format!("{:.1}ms", slept.as_secs_f64() * 1e3);
    if slept < SLEEP {
        Err(format!("{shown} is under {} ms", SLEEP.as_millis()))
    } else if slept >= SLEEP_LIMIT {
        Err(format!("{shown} is not under {} s", SLEEP_LIMIT.as_secs()))
    } else {
        Ok(shown)
    }
}

fn read_hello(path: Option<&str>) -> Outcome {
    let Some(path) = path else {
        return Ok("skipped".to_string());
    };
    let bytes = std::fs::read(path).map_err(|error| format!("{path}: {error}"))?;
    if bytes.is_empty() {
        return Err(format!("{path} is empty"));
    }
    std::str::from_utf8(&bytes).map_err(|error| format!("{path} is not UTF-8: {error}"))?;
    Ok(format!("{}B", bytes.len()))
}

fn fork_exit() -> Outcome {
    use std::io::Write;
    // The child's `exit` flushes stdout; flushing first keeps it from printing our output twice.
    std::io::stdout().flush().map_err(|error| format!("flushing stdout: {error}"))?;
    // SAFETY: the other threads of this process have all been joined (each check joins its
    // own), so the child, a copy of this one thread, finds no lock held by a thread that does
    // not exist in it; it only calls `exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        std::process::exit(CHILD_STATUS);
    }
    let status = rt::wait(rt::Pid::from_raw(pid)).map_err(|error| format!("wait4: {error}"))?;
    match status.code() {
        Some(CHILD_STATUS) => Ok(CHILD_STATUS.to_string()),
        _ => Err(format!("the child ended with {status}, not exit status {CHILD_STATUS}")),
    }
}

/// `std::process::Command`, as programs start others: musl's `posix_spawn` (a
/// `clone(CLONE_VM | CLONE_VFORK)`) runs a shell whose output and status come back, and a
/// program that does not exist is `NotFound` at `spawn`, reported by the child through a
/// pipe before its parent goes on.
fn command() -> Outcome {
    let output = std::process::Command::new("/bin/sh")
        .args(["-c", "echo spawned; exit 3"])
        .output()
        .map_err(|error| format!("spawning /bin/sh: {error}"))?;
    if output.stdout != b"spawned\n" || output.status.code() != Some(3) {
        return Err(format!("/bin/sh -c printed {:?} and ended with {}", output.stdout, output.status));
    }
    match std::process::Command::new("/nonexistent-program").spawn() {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok("status-3,not-found".to_string()),
        Err(error) => Err(format!("spawning a missing program: {error}, not NotFound")),
        Ok(mut child) => {
            let status = child.wait();
            Err(format!("a missing program was spawned, and ended with {status:?}"))
        }
    }
}

fn args() -> Outcome {
    let arguments: Vec<String> = std::env::args().collect();
    if arguments.is_empty() {
        return Err("no arguments, not even the program name".to_string());
    }
    Ok(arguments.len().to_string())
}

fn home() -> Outcome {
    Ok(match std::env::var("HOME") {
        Ok(_) => "set",
        Err(std::env::VarError::NotPresent) => "unset",
        Err(std::env::VarError::NotUnicode(_)) => "not-unicode",
    }
    .to_string())
}

fn bin() -> Outcome {
    let entries: Vec<_> = std::fs::read_dir("/bin")
        .and_then(|entries| entries.collect::<Result<_, _>>())
        .map_err(|error| format!("/bin: {error}"))?;
    let count = entries.len();
    if count == 0 {
        return Err("/bin lists no entry".to_string());
    }
    Ok(count.to_string())
}

fn heap() -> Outcome {
    let mut bytes = vec![0u8; HEAP_BYTES];
    // `black_box`: the sums must read the memory, not be folded away.
    let zeros: u64 = std::hint::black_box(&bytes).iter().map(|&byte| u64::from(byte)).sum();
    if zeros != 0 {
        return Err(format!("a fresh zeroed 1 MiB sums to {zeros}"));
    }
    bytes.fill(1);
    let ones: u64 = std::hint::black_box(&bytes).iter().map(|&byte| u64::from(byte)).sum();
    expect_equal("1 MiB of ones sums to", ones, HEAP_BYTES as u64)?;
    Ok("1MiB".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_passes_on_the_host() {
        // Not `fork_exit`: the test harness runs other tests on other threads, which breaks
        // the condition its `fork` relies on; running the binary covers it.
        for check in [mutex, atomic, map, sleep, args, home, bin, heap] {
            check().unwrap();
        }
        assert_eq!(mutex(), Ok("40000".to_string()));
    }

    #[test]
    fn hello_is_read_skipped_or_reported() {
        assert_eq!(read_hello(None), Ok("skipped".to_string()));
        let directory = std::env::temp_dir().join(format!("proctest-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let good = directory.join("hello.txt");
        std::fs::write(&good, "hello\n").unwrap();
        assert_eq!(read_hello(good.to_str()), Ok("6B".to_string()));
        let empty = directory.join("empty.txt");
        std::fs::write(&empty, "").unwrap();
        assert!(read_hello(empty.to_str()).unwrap_err().contains("empty"));
        let binary = directory.join("binary");
        std::fs::write(&binary, [0xff, 0xfe]).unwrap();
        assert!(read_hello(binary.to_str()).unwrap_err().contains("UTF-8"));
        assert!(read_hello(directory.join("missing").to_str()).is_err());
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn the_hello_path_comes_from_the_command_line() {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(hello_path(vec![]), Ok(None), "on Linux with no --hello: skipped");
        assert_eq!(hello_path(strings(&["--hello", "/x"])), Ok(Some("/x".to_string())));
        assert!(hello_path(strings(&["--hello"])).is_err());
        assert!(hello_path(strings(&["-x", "y"])).is_err());
    }

    #[test]
    fn details_stay_on_one_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
        assert_eq!(expect_equal("total", 3, 4), Err("total 3 instead of 4".to_string()));
    }
}
