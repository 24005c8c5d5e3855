//! In-guest tests: each prints `TEST <name> ok|fail <detail>`, then `N passed, M failed`.
//! The host harness (`cargo xtask test`) reads these lines and QEMU's exit status.
#![deny(unsafe_code)]

use crate::arch::cpu;
use crate::arch::paging::physical_to_virtual;
use crate::core::kcb::CoreState;
use crate::core::kcb::PartitionRange;
use crate::core::shared;
use crate::mm::address_space::translate;
use crate::println;
use ::core::sync::atomic::{AtomicU32, Ordering};
use alloc::format;
use alloc::string::String;

/// Each instance stores its own core id here at start; with private `.bss`, core 0 must
/// still read 0 after every other core wrote its id at the same virtual address.
static INSTANCE_MARK: AtomicU32 = AtomicU32::new(u32::MAX);

/// Runs on every instance right after it came up: the tests that make a core fail on purpose
/// do it here, in the core's first life only (a restarted core must come up clean).
pub fn on_instance_start(core: u32) {
    INSTANCE_MARK.store(core, Ordering::SeqCst);
    let options = shared::facts().options;
    let Some(tests) = options.test else { return };
    if shared::this_kcb().incarnation.load(Ordering::Relaxed) > 1 {
        return;
    }
    for test in tests.as_str().split(',') {
        let mut words = test.split(':');
        let (name, target, lock) = (words.next(), words.next().and_then(|w| w.parse::<u32>().ok()), words.next());
        if target != Some(core) {
            continue;
        }
        match (name, lock) {
            (Some("fault"), None) => {
                log::warn!("test fault: core {core} touches an unmapped address on purpose");
                cpu::store_to_unmapped_address(0xdead_b000);
            }
            (Some("stack-overflow"), None) => {
                log::warn!("test stack-overflow: core {core} recurses without end on purpose");
                overflow_stack(0);
            }
            (Some("fault-in-lock"), Some(lock)) => {
                let header = &shared::get().header;
                let lock_word = match lock {
                    "console" => &header.console_lock,
                    "bootdriver" => &header.boot_driver_lock,
                    _ => continue,
                };
                log::warn!("test fault-in-lock: core {core} faults holding the {lock} lock on purpose");
                lock_word.lock(core);
                cpu::store_to_unmapped_address(0xdead_b000);
            }
            _ => {}
        }
    }
}

/// Recurses with a 512-byte frame until the main stack's guard page stops it.
#[inline(never)]
fn overflow_stack(depth: u64) -> u64 {
    if depth == u64::MAX {
        return 0;
    }
    let mut frame = [0u8; 512];
    frame[depth as usize % 512] = depth as u8;
    let frame = ::core::hint::black_box(frame);
    overflow_stack(depth + 1).wrapping_add(u64::from(frame[depth as usize % 512]))
}

/// Whether the command line's `test=` list names `name` (alone or as `name:...`); test-only
/// hooks (an ICC handler that faults on purpose) are registered only then.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
pub fn requested(name: &str) -> bool {
    shared::facts()
        .options
        .test
        .is_some_and(|tests| tests.as_str().split(',').any(|t| t == name || t.split(':').next() == Some(name)))
}

type Outcome = Result<String, String>;

fn wait_until(milliseconds: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = cpu::read_tsc() + shared::facts().tsc_hz / 1000 * milliseconds;
    while cpu::read_tsc() < deadline {
        if done() {
            return true;
        }
        cpu::wait_for_interrupt();
    }
    done()
}

fn expected_cores() -> usize {
    let facts = shared::facts();
    facts.options.cores.unwrap_or(facts.core_count as usize).min(facts.core_count as usize)
}

fn boot() -> Outcome {
    let region = shared::get();
    let expected = expected_cores();
    let running = region.listed_kcbs().iter().filter(|k| k.state() == CoreState::Running).count();
    if running != expected {
        return Err(format!("{running} cores running, {expected} expected"));
    }
    let kcbs = region.listed_kcbs();
    for (i, a) in kcbs.iter().enumerate() {
        let pa = a.partition();
        if pa.overlaps(&shared::facts().shared) {
            return Err(format!("partition of core {i} overlaps the shared region"));
        }
        for (j, b) in kcbs.iter().enumerate().skip(i + 1) {
            if pa.overlaps(&b.partition()) {
                return Err(format!("partitions of cores {i} and {j} overlap"));
            }
        }
    }
    Ok(format!("{running} instances running, {} partitions disjoint", kcbs.len()))
}

fn isolation() -> Outcome {
    let region = shared::get();
    let me = shared::this_core() as usize;
    let mark = INSTANCE_MARK.load(Ordering::SeqCst);
    if mark != me as u32 {
        return Err(format!("private .bss of core {me} holds {mark}: another instance wrote it"));
    }
    let own = region.kcb(me).partition();
    let data = translate(&raw const INSTANCE_MARK as u64).ok_or("own .bss is not mapped")?;
    if !(own.start <= data && data < own.end) {
        return Err(format!(".bss of core {me} is at {data:#x}, outside its partition"));
    }
    for (core, kcb) in region.listed_kcbs().iter().enumerate() {
        if core != me && translate(physical_to_virtual(kcb.partition().start)).is_some() {
            return Err(format!("core {me} maps the partition of core {core}"));
        }
    }
    if translate(0x8000).is_some() {
        return Err(String::from("the identity map of low memory is still present"));
    }
    Ok(format!("core {me}: private .bss at {data:#x}, no other partition mapped"))
}

fn frames() -> Outcome {
    let (free_before, _) = crate::mm::frames::counts();
    let mut taken = alloc::vec::Vec::new();
    for _ in 0..256 {
        taken.push(crate::mm::frames::allocate_zeroed().map_err(|e| format!("allocation failed: {e:?}"))?);
    }
    let (free_during, _) = crate::mm::frames::counts();
    let own = shared::this_kcb().partition();
    if taken.iter().any(|f| *f < own.start || *f >= own.end) {
        return Err(String::from("a frame outside the own partition"));
    }
    for frame in &taken {
        crate::mm::frames::free(*frame).map_err(|e| format!("free failed: {e:?}"))?;
    }
    if crate::mm::frames::free(taken[0]).is_ok() {
        return Err(String::from("double free accepted"));
    }
    drop(taken);
    let (free_after, _) = crate::mm::frames::counts();
    if free_during + 256 != free_before || free_after != free_before {
        return Err(format!("free frames {free_before} -> {free_during} -> {free_after}"));
    }
    Ok(format!("256 frames taken and returned, {free_after} free"))
}

/// The core a `name:N[:...]` test names, once it has faulted (core 0 never gets here: its
/// fault ends the run).
fn faulted_core(target: &str) -> Result<usize, String> {
    let target: usize = target.parse().map_err(|_| format!("`{target}` is not a core number"))?;
    let region = shared::get();
    if target == 0 || target >= region.listed_kcbs().len() {
        return Err(format!("the test needs a core 1..{}", region.listed_kcbs().len() - 1));
    }
    let kcb = region.kcb(target);
    if !wait_until(2000, || kcb.state() == CoreState::Faulted) {
        return Err(format!("core {target} is {}, not faulted", kcb.state().name()));
    }
    Ok(target)
}

/// `stack-overflow:N`: core N's endless recursion hit its main stack's guard page, was
/// reported as a page fault there, and stopped only core N.
fn stack_overflow(target: &str) -> Outcome {
    let target = faulted_core(target)?;
    let kcb = shared::get().kcb(target);
    let vector = kcb.fault.vector.load(Ordering::Relaxed);
    let address = kcb.fault.fault_address.load(Ordering::Relaxed);
    let hit = crate::arch::stacks::guard_hit(address);
    if vector != 14 || hit != Some(crate::arch::stacks::KernelStack::Main) {
        return Err(format!(
            "core {target} faulted with vector {vector} at {address:#x}, not on the main stack's guard"
        ));
    }
    Ok(format!("core {target} overflowed into the guard page at {address:#x}; the others run"))
}

/// `fault-in-lock:N:console|bootdriver`: core N died holding a shared lock; the lock must be
/// free again (released by N's fault path, not taken over), and core N restartable.
fn fault_in_lock(arguments: &str) -> Outcome {
    let (target, lock) =
        arguments.split_once(':').ok_or("use fault-in-lock:N:console or fault-in-lock:N:bootdriver")?;
    let target = faulted_core(target)?;
    let header = &shared::get().header;
    let recovered = header.locks_recovered.0.load(Ordering::Relaxed);
    // Both locks are needed below: the console to print, the boot driver's to restart.
    crate::core::boot_driver::start_core(target).map_err(|e| format!("core {target} not restarted: {e}"))?;
    if !wait_until(2000, || shared::get().kcb(target).state() == CoreState::Running) {
        return Err(format!("core {target} did not come back"));
    }
    if recovered != 0 {
        return Err(format!("{recovered} locks had to be taken over: the fault path did not release them"));
    }
    Ok(format!("core {target} faulted holding the {lock} lock; it was released, core {target} restarted"))
}

/// `dead-target` (with `fault:N`): every way of sending to or calling the faulted core fails
/// at once with an error naming it, and is counted; nothing waits.
fn dead_target() -> Outcome {
    use crate::msg::{self, SendError};
    let region = shared::get();
    let dead = (0..msg::messaging_cores())
        .find(|&c| region.kcb(c).state() == CoreState::Faulted)
        .ok_or("no faulted core: run with fault:N before dead-target")?;
    let refused_before = shared::this_kcb().messages.send_refused.load(Ordering::Relaxed);
    let started = cpu::read_tsc();
    let probe = crate::msg::line(abi::message::Kind::Ping, |out| {
        abi::message::Ping { from: shared::this_core() as u16, sequence: 0, sent_tsc: 0, tag: 0 }.encode(out)
    });
    let is_refusal = |error: &SendError| matches!(error, SendError::TargetNotRunning { core, .. } if *core == dead);
    let mut attempts = 0;
    let mut check = |what: &str, result: Result<(), SendError>| -> Result<(), String> {
        attempts += 1;
        match result {
            Err(error) if is_refusal(&error) => Ok(()),
            other => Err(format!("{what} to faulted core {dead}: {other:?}")),
        }
    };
    check("send_blocking", msg::send_blocking(dead, &probe))?;
    check("try_send", msg::try_send(dead, &probe))?;
    check("try_send_pair", msg::try_send_pair(dead, &probe))?;
    check("send_large", msg::send_large(dead, abi::message::Kind::Probe, &[7u8; 4000]))?;
    check("ping", msg::ping(dead, 5).map(|_| ()))?;
    match msg::icc::call(dead, abi::message::handler::ECHO, [1, 0, 0, 0, 0], 1000) {
        Err(msg::icc::IccError::Send(error)) if is_refusal(&error) => attempts += 1,
        other => return Err(format!("icc::call to faulted core {dead}: {other:?}")),
    }
    #[cfg(feature = "bench")]
    let text = match msg::bench::run(dead, 10, &mut alloc::string::String::new()) {
        Err(error) => format!("{error}"),
        Ok(()) => return Err(format!("msg bench against faulted core {dead} ran")),
    };
    #[cfg(not(feature = "bench"))]
    let text = String::from("not in this image (built without the bench feature)");
    let elapsed_ms = (cpu::read_tsc() - started) / (shared::facts().tsc_hz / 1000).max(1);
    let refused = shared::this_kcb().messages.send_refused.load(Ordering::Relaxed) - refused_before;
    if refused < attempts {
        return Err(format!("{attempts} refusals but only {refused} counted in msg stats"));
    }
    if elapsed_ms > 500 {
        return Err(format!("refusing took {elapsed_ms} ms: something waited for the dead core"));
    }
    Ok(format!("{attempts} sends and calls to faulted core {dead} refused in {elapsed_ms} ms, counted; bench: {text}"))
}

fn fault(target: &str) -> Outcome {
    let target = faulted_core(target)?;
    let region = shared::get();
    let kcb = region.kcb(target);
    let vector = kcb.fault.vector.load(Ordering::Relaxed);
    let address = kcb.fault.fault_address.load(Ordering::Relaxed);
    if vector != 14 || address != 0xdead_b000 {
        return Err(format!("core {target} faulted with vector {vector} at {address:#x}"));
    }
    for (core, other) in region.listed_kcbs().iter().enumerate() {
        if core != target && core < expected_cores() && other.state() != CoreState::Running {
            return Err(format!("core {core} is {} after core {target} faulted", other.state().name()));
        }
    }
    // The others must still take timer interrupts: fault containment, not a global stop.
    let ticks: alloc::vec::Vec<u64> = region.listed_kcbs().iter().map(|k| k.ticks.load(Ordering::Relaxed)).collect();
    let advanced = wait_until(500, || {
        region.listed_kcbs().iter().enumerate().all(|(core, k)| {
            core == target || core >= expected_cores() || k.ticks.load(Ordering::Relaxed) > ticks[core]
        })
    });
    if !advanced {
        return Err(String::from("some surviving core stopped taking timer interrupts"));
    }
    Ok(format!("core {target} faulted (page fault at {address:#x}), the others keep running"))
}

fn boot_driver() -> Outcome {
    let region = shared::get();
    let kcbs = region.listed_kcbs();
    let target =
        kcbs.iter().position(|k| k.state() == CoreState::Offline).ok_or("no offline core: boot with cores=N")?;
    let helper = (1..kcbs.len())
        .find(|&c| kcbs[c].state() == CoreState::Running)
        .ok_or("no running core other than 0 to act as boot driver")?;
    // Core `helper` runs its boot driver, asked by an inter-core call.
    let call = crate::msg::icc::call(helper, abi::message::handler::START_CORE, [target as u64, 0, 0, 0, 0], 2000);
    if let Err(error) = call {
        return Err(format!("core {helper} could not start core {target}: {error}"));
    }
    if !wait_until(2000, || kcbs[target].state() == CoreState::Running) {
        return Err(format!(
            "core {target} is {} after core {helper} was asked to start it",
            kcbs[target].state().name()
        ));
    }
    if crate::core::boot_driver::start_core(target).is_ok() {
        return Err(format!("core {target} was started twice"));
    }
    Ok(format!("core {helper} started core {target}; a second start is refused"))
}

/// Inter-core calls to every running core (and to itself): results, unknown handler ids.
fn icc() -> Outcome {
    use crate::msg::icc::{call, IccError};
    use abi::message::{handler, IccStatus};
    let region = shared::get();
    let mut called = 0;
    for (core, kcb) in region.listed_kcbs().iter().enumerate().take(crate::msg::MESSAGING_CORES) {
        if kcb.state() != CoreState::Running {
            continue;
        }
        let sum = call(core, handler::ADD, [1, 2, 3, 4, core as u64], 1000).map_err(|e| format!("core {core}: {e}"))?;
        if sum != 10 + core as u64 {
            return Err(format!("core {core} added to {sum}"));
        }
        match call(core, 999, [0; 5], 1000) {
            Err(IccError::Refused(IccStatus::NoSuchHandler)) => {}
            other => return Err(format!("core {core} answered an unknown handler with {other:?}")),
        }
        called += 1;
    }
    Ok(format!("{called} cores answered ADD and refused an unknown handler id"))
}

/// SMAP: a kernel load from a present user page outside the copy routines faults, and the
/// copy routine reads the same byte. (The suite boots QEMU with `-cpu max`, which has SMAP.)
fn smap() -> Outcome {
    use crate::mm::user::{AddressSpace, AreaKind, Protection};
    const PAGE: u64 = 0x0000_0000_4000_0000;
    if crate::arch::cpu::cpuid(7, 0).ebx & (1 << 20) == 0 {
        return Err(String::from("this CPU has no SMAP (QEMU needs -cpu max)"));
    }
    let mut memory = AddressSpace::new().map_err(|e| format!("no address space: {e:?}"))?;
    memory.map_now(PAGE, PAGE + 4096, Protection::READ_WRITE, AreaKind::Anonymous).map_err(|e| format!("{e:?}"))?;
    memory.write(PAGE, &[0x5a]).map_err(|e| format!("{e:?}"))?;
    let (faulted, copied) = memory.while_active(|| {
        let faulted = crate::arch::user::kernel_load_faults(PAGE);
        let mut byte = [0u8];
        let copied = crate::arch::user::copy_from_user(&mut byte, PAGE).map(|()| byte[0]);
        (faulted, copied)
    });
    drop(memory);
    match (faulted, copied) {
        (true, Ok(0x5a)) => Ok(String::from("a plain kernel load of a user page faulted; the copy routine read it")),
        (false, _) => Err(String::from("the kernel read a user page outside the copy routines: SMAP is off")),
        (true, other) => Err(format!("the copy routine could not read the user page: {other:?}")),
    }
}

/// The control interface the file service and the `CONTROL` call build on: every view starts
/// with the line its command prints first, and `control::run` refuses what it must (no command,
/// an unknown one, one that is no control command, bad arguments) with an `error: …` line and
/// the statuses of `abi::call::control`.
fn control_interface() -> Outcome {
    use crate::control::{self, View};
    let first_line = |text: &str| String::from(text.lines().next().unwrap_or(""));
    let mut sizes = alloc::vec::Vec::new();
    for view in View::ALL {
        let mut text = String::new();
        control::view(view, &mut text);
        let command: &[&str] = match view {
            View::Cores => &["cores"],
            View::Mem => &["mem"],
            View::Msg => &["msg", "stats"],
            View::Syscalls => &["syscalls"],
            View::Processes => &["ps"],
        };
        let mut printed = String::new();
        control::run(command, &mut printed).map_err(|error| format!("{command:?}: {error}"))?;
        // Counters and clocks move between the two: the first lines are fixed text.
        if text.is_empty() || first_line(&text) != first_line(&printed) {
            return Err(format!(
                "view {} starts {:?}, `{}` {:?}",
                view.name(),
                first_line(&text),
                command.join(" "),
                first_line(&printed)
            ));
        }
        sizes.push(format!("{}={}B", view.name(), text.len()));
    }
    let refusals: [(&[&str], u32, &str); 5] = [
        (&[], abi::call::control::USAGE, "error: wrong arguments: usage: <command>"),
        (
            &["frobnicate"],
            abi::call::control::FAILED,
            "error: unknown command `frobnicate`: `reef help` lists the commands",
        ),
        (&["spawn", "0", "/bin/tiny"], abi::call::control::FAILED, "error: unknown command `spawn`"),
        (&["msg", "mode", "1", "warp"], abi::call::control::FAILED, "error: `warp` is not a notification mode"),
        (&["syscalls", "99"], abi::call::control::FAILED, "error: no core 99: see `cores`"),
    ];
    for (words, status, line) in refusals {
        let mut text = String::new();
        match control::run(words, &mut text) {
            Err(error) if error.control_status() == status && format!("{error}").starts_with(line) => {}
            Err(error) => {
                return Err(format!(
                    "{words:?}: status {} `{error}`, expected {status} `{line}…`",
                    error.control_status()
                ))
            }
            Ok(()) => return Err(format!("{words:?} ran: {text:?}")),
        }
    }
    // Every process is root today, so the refusal of a user other than root is checked at
    // the one place that decides it: each command that starts, stops or ends cores or the
    // machine, and no other, is refused to user 1000 before it runs.
    let user = 1000;
    let root_only: [&[&str]; 6] = [
        &["poweroff"],
        &["start", "1"],
        &["msg", "mode", "1", "poll"],
        &["msg", "bench", "1"],
        &["msg", "stress"],
        &["start", "1", "from", "0"],
    ];
    let open: [&[&str]; 6] = [&["cores"], &["mem"], &["ps"], &["syscalls"], &["msg", "stats"], &["msg", "ping", "1"]];
    for words in root_only.iter().chain(open.iter()) {
        let command = control::find(words[0]).ok_or_else(|| format!("no command {}", words[0]))?;
        let refused = control::permitted(command, &words[1..], user);
        let root = control::permitted(command, &words[1..], control::ROOT);
        let expected_refused = root_only.contains(words);
        match (refused, root) {
            (Err(error), Ok(())) if expected_refused && format!("{error}").contains("needs root") => {}
            (Ok(()), Ok(())) if !expected_refused => {}
            (refused, root) => {
                return Err(format!("{words:?}: user {user} got {refused:?}, root got {root:?}"));
            }
        }
    }
    Ok(format!("views {}; refusals ok; root-only commands refused to user {user}", sizes.join(" ")))
}

/// What a message test answers in an image without the `bench` feature, whose message
/// stress (`msg::stress`) it drives.
#[cfg(not(feature = "bench"))]
const WITHOUT_BENCH: &str =
    "this kernel image was built without the bench feature, which the message stress needs; `cargo xtask test` builds it with both";

/// `virtio-9p-version`: the first 9P share the device owner found that the file service did
/// not mount (a `Tversion` resets a 9P session) answers a raw `Tversion`
/// through `NinePDevice::call` with an `Rversion` of the same tag and version, an msize no
/// larger than proposed, and an interrupt to wake the wait; a reply buffer shorter than a 9P
/// header is refused with EINVAL before the device sees anything.
fn virtio_9p_version() -> Outcome {
    const TVERSION: u8 = 100;
    const RVERSION: u8 = 101;
    const NO_TAG: u16 = 0xffff;
    const VERSION: &[u8] = b"9P2000.L";
    if shared::this_core() != crate::interrupt::DEVICE_OWNER {
        return Err(String::from("runs on the device owner, core 0"));
    }
    let share = crate::dev::ninep::shares()
        .into_iter()
        .find(|share| share.available)
        .ok_or("no unmounted 9P share found (QEMU -device virtio-9p-device, with no share= for its tag)")?;
    let tag = crate::dev::ninep::with_device(&share.tag, |device| String::from(device.tag()));
    if tag.as_deref() != Some(share.tag.as_str()) {
        return Err(format!("the share's device says tag {tag:?}, the list {}", share.tag));
    }
    let interrupts_before = crate::dev::interrupts_of(share.slot);
    let proposed = crate::dev::ninep::with_device(&share.tag, |device| device.max_message_size())
        .ok_or("the share's device was taken")? as u32;
    let mut request = alloc::vec::Vec::new();
    let size = 4 + 1 + 2 + 4 + 2 + VERSION.len();
    request.extend_from_slice(&(size as u32).to_le_bytes());
    request.push(TVERSION);
    request.extend_from_slice(&NO_TAG.to_le_bytes());
    request.extend_from_slice(&proposed.to_le_bytes());
    request.extend_from_slice(&(VERSION.len() as u16).to_le_bytes());
    request.extend_from_slice(VERSION);
    let mut reply = [0u8; 256];
    let (short, answer, mount_point, cycles) = crate::dev::ninep::with_device(&share.tag, |device| {
        let short = device.call(&request, &mut [0u8; 4]);
        // Twenty round trips: the median is the figure docs/devices.md quotes.
        let mut cycles = alloc::vec::Vec::new();
        let mut answer = Err(0);
        for _ in 0..20 {
            let start = cpu::read_tsc();
            answer = device.call(&request, &mut reply);
            cycles.push(cpu::read_tsc() - start);
            if answer.is_err() {
                break;
            }
        }
        cycles.sort_unstable();
        (short, answer, device.mount_point().map(String::from), cycles[cycles.len() / 2])
    })
    .ok_or("the share's device was taken")?;
    if short != Err(linux_raw_sys::errno::EINVAL) {
        return Err(format!("a 4-byte reply buffer gave {short:?}, not EINVAL"));
    }
    let length = answer.map_err(|errno| format!("Tversion failed with errno {errno}"))?;
    let reply = &reply[..length];
    let msize = u32::from_le_bytes([reply[7], reply[8], reply[9], reply[10]]);
    let version_length = usize::from(u16::from_le_bytes([reply[11], reply[12]]));
    let version = reply.get(13..13 + version_length).ok_or("Rversion shorter than its version string")?;
    if reply[4] != RVERSION || u16::from_le_bytes([reply[5], reply[6]]) != NO_TAG || version != VERSION {
        return Err(format!("not the Rversion expected: {reply:02x?}"));
    }
    if msize == 0 || msize > proposed {
        return Err(format!("Rversion msize {msize}, proposed {proposed}"));
    }
    let interrupts = crate::dev::interrupts_of(share.slot) - interrupts_before;
    if interrupts == 0 {
        return Err(String::from("the reply came without the device's interrupt"));
    }
    Ok(format!(
        "core 0: tag {} mount point {} transport {}: Rversion msize {msize} {} in {length} bytes, {interrupts} interrupts, \
         round trips {} us median",
        share.tag,
        mount_point.as_deref().unwrap_or("none"),
        share.slot,
        ::core::str::from_utf8(version).unwrap_or("?"),
        crate::time::cycles_to_ns(cycles) / 1000,
    ))
}

/// Runs the comma-separated tests; returns the exit status (0 when all passed).
pub fn run(list: &str) -> u32 {
    // Tests look at every core: wait for the boot to settle first.
    wait_until(2000, || shared::get().header.boot_complete.0.load(Ordering::Acquire));
    let (mut passed, mut failed) = (0, 0);
    for name in list.split(',').filter(|n| !n.is_empty()) {
        let outcome = match name {
            "boot" => boot(),
            "isolation" => isolation(),
            "frames" => frames(),
            "bootdriver" => boot_driver(),
            "icc" => icc(),
            #[cfg(feature = "bench")]
            "msg-garbage" => crate::msg::stress::run_garbage(),
            #[cfg(feature = "bench")]
            "msg-stress" => crate::msg::stress::run_stress(1_000_000, u64::MAX),
            #[cfg(not(feature = "bench"))]
            "msg-garbage" | "msg-stress" => Err(String::from(WITHOUT_BENCH)),
            "dead-target" => dead_target(),
            "smap" => smap(),
            "control" => control_interface(),
            "virtio-9p-version" => virtio_9p_version(),
            _ => match name.split_once(':') {
                Some(("fault", target)) => fault(target),
                Some(("stack-overflow", target)) => stack_overflow(target),
                Some(("fault-in-lock", arguments)) => fault_in_lock(arguments),
                #[cfg(feature = "bench")]
                Some(("msg-restart", victim)) => victim
                    .parse()
                    .map_err(|_| format!("`{victim}` is not a core number"))
                    .and_then(|victim| crate::msg::stress::run_restart(victim, 20_000)),
                #[cfg(not(feature = "bench"))]
                Some(("msg-restart", _)) => Err(String::from(WITHOUT_BENCH)),
                _ => Err(String::from(
                    "unknown test: known are boot, isolation, frames, bootdriver, icc, msg-garbage, msg-stress, \
                     dead-target, smap, control, virtio-9p-version, fault:N, stack-overflow:N, fault-in-lock:N:console|bootdriver, msg-restart:N",
                )),
            },
        };
        match outcome {
            Ok(detail) => {
                passed += 1;
                println!("TEST {name} ok {detail}");
            }
            Err(detail) => {
                failed += 1;
                println!("TEST {name} fail {detail}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    u32::from(failed != 0)
}
