//! Bad pointers, one of each kind, in each pointer argument of `reef_control`: every call must
//! fail with `EFAULT` before the command runs, and the kernel must live on.

use crate::random::USER_END;

/// A pointer of each kind the fuzzer draws at random (`random.rs`), here on purpose: null,
/// below 64 KiB, the top page of user space, the kernel half, non-canonical.
const BAD_POINTERS: [u64; 5] = [0, 0x1000, USER_END - 4096, 0xffff_8000_0010_0000, 0x0000_8000_0010_0000];

/// Read-only memory of this program: mapped and readable, so only a check that the kernel
/// will be allowed to write there refuses it.
static READ_ONLY: [u8; 64] = [0; 64];

/// What the probes found: the number of calls refused with `EFAULT`, or what went wrong.
pub type Outcome = Result<u64, String>;

/// `reef_control(argv, buffer, capacity, status)` with raw values.
fn control(argv: u64, buffer: u64, capacity: u64, status: u64) -> rt::raw::Return {
    // SAFETY: `reef_control` only reads `argv` and the strings it points to, and writes at most
    // `capacity` bytes at `buffer` and 4 at `status`; every probe passes either the live,
    // writable buffers of `probe_control` or addresses this program cannot use (unmapped,
    // kernel, non-canonical, read-only), which the kernel must refuse, and would fault on if it
    // tried (it writes user memory only through its checked copy).
    unsafe { rt::raw::syscall(abi::call::CONTROL, [argv, buffer, capacity, status, 0, 0]) }
}

/// Runs the probes on Reef; `None` elsewhere (`reef_control` is `ENOSYS` there).
pub fn probe_control() -> Option<Outcome> {
    let command = c"cores";
    let good_argv: [u64; 2] = [command.as_ptr() as u64, 0];
    let mut buffer = vec![0u8; 4096];
    let mut status: u32 = u32::MAX;
    let (argv, output, capacity, status_at) =
        (good_argv.as_ptr() as u64, buffer.as_mut_ptr() as u64, buffer.len() as u64, &raw mut status as u64);
    let first = control(argv, output, capacity, status_at);
    if first.errno() == Some(libc::ENOSYS) {
        return None;
    }
    let text = String::from_utf8_lossy(&buffer[..first.0.clamp(0, 4096) as usize]).into_owned();
    if first.errno().is_some() || status != abi::call::control::OK || !text.starts_with("core  apic  state") {
        return Some(Err(format!("a good reef_control(cores) returned {} with status {status}: {text:?}", first.0)));
    }
    let read_only = READ_ONLY.as_ptr() as u64;
    let mut cases: Vec<(String, [u64; 4])> = Vec::new();
    let mut string_probes = 0;
    // A null first string ends an empty argv (`EINVAL`): every other bad kind is a bad string.
    for bad in BAD_POINTERS {
        cases.push((format!("argv = {bad:#x}"), [bad, output, capacity, status_at]));
        cases.push((format!("buffer = {bad:#x}"), [argv, bad, capacity, status_at]));
        cases.push((format!("status = {bad:#x}"), [argv, output, capacity, bad]));
        if bad == 0 {
            continue;
        }
        let bad_string: [u64; 2] = [bad, 0];
        // A bad string pointer inside a good array is read only through the array: the array
        // must stay alive for the call, so the case is made here, not stored.
        let result = control(bad_string.as_ptr() as u64, output, capacity, status_at);
        if result.errno() != Some(libc::EFAULT) {
            return Some(Err(format!("argv[0] = {bad:#x}: {} instead of -EFAULT", result.0)));
        }
        string_probes += 1;
    }
    cases.push(("buffer read-only".to_string(), [argv, read_only, READ_ONLY.len() as u64, status_at]));
    cases.push(("status read-only".to_string(), [argv, output, capacity, read_only]));
    for (what, [argv, output, capacity, status_at]) in &cases {
        let result = control(*argv, *output, *capacity, *status_at);
        if result.errno() != Some(libc::EFAULT) {
            return Some(Err(format!("{what}: {} instead of -EFAULT", result.0)));
        }
    }
    if READ_ONLY.iter().any(|&byte| byte != 0) {
        return Some(Err("the kernel wrote into read-only memory".to_string()));
    }
    Some(Ok((cases.len() + string_probes) as u64))
}
