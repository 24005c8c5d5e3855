//! In-guest tests: each prints `TEST <name> ok|fail <detail>`, then `N passed, M failed`.
//! The host harness (`cargo xtask test`) reads these lines and QEMU's exit status.

use crate::arch::cpu;
use crate::arch::paging::physical_to_virtual;
use crate::core::kcb::CoreState;
use crate::core::shared;
use crate::mm::address_space::translate;
use crate::println;
use ::core::sync::atomic::{AtomicU32, Ordering};
use alloc::format;
use alloc::string::String;

/// Each instance stores its own core id here at start; with private `.bss`, core 0 must
/// still read 0 after every other core wrote its id at the same virtual address.
static INSTANCE_MARK: AtomicU32 = AtomicU32::new(u32::MAX);

/// Runs on every instance right after it came up.
pub fn on_instance_start(core: u32) {
    INSTANCE_MARK.store(core, Ordering::SeqCst);
    let options = shared::facts().options;
    let Some(tests) = options.test else { return };
    for test in tests.as_str().split(',') {
        if let Some(target) = test.strip_prefix("fault:") {
            if target.parse::<u32>() == Ok(core) && core != 0 {
                log::warn!("test fault: core {core} touches an unmapped address on purpose");
                cpu::store_to_unmapped_address(0xdead_b000);
            }
        }
    }
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

fn fault(target: &str) -> Outcome {
    let target: usize = target.parse().map_err(|_| format!("`{target}` is not a core number"))?;
    let region = shared::get();
    if target == 0 || target >= region.listed_kcbs().len() {
        return Err(format!("fault test needs a core 1..{}", region.listed_kcbs().len()));
    }
    let kcb = region.kcb(target);
    if !wait_until(2000, || kcb.state() == CoreState::Faulted) {
        return Err(format!("core {target} is {}, not faulted", kcb.state().name()));
    }
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
            "msg-garbage" => crate::msg::stress::run_garbage(),
            "msg-stress" => crate::msg::stress::run_stress(1_000_000),
            _ => match name.strip_prefix("fault:") {
                Some(target) => fault(target),
                None => Err(String::from("unknown test: known are boot, isolation, frames, bootdriver, icc, msg-garbage, msg-stress, fault:N")),
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
