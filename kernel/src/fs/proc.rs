//! What `/proc` shows: the processes of every instance (each instance reports its processes'
//! births, programs and ends to the service), the cores, memory, and Reef's own views.
//!
//! The file service sits below processes, the cores layer and control: what it shows of them
//! is registered at boot, never named: the `/proc/reef` views control renders
//! ([`register_views`]), and the running process's descriptor table ([`register_descriptors`]).

use crate::core::kcb::CoreState;
use crate::core::kcb::PartitionRange;
use crate::core::shared;
use abi::file::ProcessRecord;
use abi::message::Kind;
use abi::Errno;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use core::sync::atomic::Ordering;
use linux_raw_sys::errno;
use spin::{Mutex, Once};
use vfs::{ProcFile, ProcSource, ReefView};

/// Writes a `/proc/reef` view the file service does not keep itself (all but `files`).
pub type ViewWriter = fn(ReefView, &mut dyn Write);

/// The running process's pid and its descriptors, (descriptor, handle) each, if they changed
/// since it was last asked.
pub type DescriptorChanges = fn() -> Option<(u32, Vec<(u32, u64)>)>;

static VIEWS: Once<ViewWriter> = Once::new();
static DESCRIPTOR_CHANGES: Once<DescriptorChanges> = Once::new();

/// Registers who writes the `/proc/reef` views of cores, memory, messages, system calls and
/// processes (control, at boot). Until then they are empty.
pub fn register_views(write: ViewWriter) {
    VIEWS.call_once(|| write);
}

/// Registers how the running process's descriptor changes are taken (the process layer, at
/// boot). Until then no table is reported.
pub fn register_descriptors(changes: DescriptorChanges) {
    DESCRIPTOR_CHANGES.call_once(|| changes);
}

/// Writes the registered `view` into `out` (nothing if none is registered).
pub fn write_view(view: ReefView, out: &mut dyn Write) {
    if let Some(write) = VIEWS.get() {
        write(view, out);
    }
}

/// A process as `/proc/<pid>` shows it.
struct Record {
    parent_pid: u32,
    core: u32,
    name: String,
    command_line: Vec<u8>,
    /// The program's path (`exe`).
    program: Vec<u8>,
    /// Its descriptors as last reported, each with what its link names (`fd/`).
    descriptors: Vec<(u32, Vec<u8>)>,
    /// The same descriptors with the service's handle each names (opening `fd/N` reopens it).
    handles: Vec<(u32, u64)>,
    process_group: u32,
    session: u32,
    stopped: bool,
    credentials: abi::credentials::Ids,
    groups: Vec<u32>,
}

/// Every instance's processes, kept by the service's instance.
static RECORDS: Mutex<BTreeMap<u32, Record>> = Mutex::new(BTreeMap::new());

fn apply(record: &ProcessRecord<'_>) {
    let mut records = RECORDS.lock();
    if !record.alive {
        records.remove(&record.pid);
        return;
    }
    // A new program keeps the descriptors (its own report says which `execve` closed); a
    // new process starts with its parent's, as a fork's copy does, until it reports its own
    // at the end of its first system call.
    let (descriptors, handles) = match records.get(&record.pid).or_else(|| records.get(&record.parent_pid)) {
        Some(known) => (known.descriptors.clone(), known.handles.clone()),
        None => Default::default(),
    };
    records.insert(
        record.pid,
        Record {
            parent_pid: record.parent_pid,
            core: record.core,
            name: String::from_utf8_lossy(record.name).into_owned(),
            command_line: record.command_line.to_vec(),
            program: record.program.to_vec(),
            descriptors,
            handles,
            process_group: record.process_group,
            session: record.session,
            stopped: record.stopped,
            credentials: record.credentials,
            groups: record.groups().collect(),
        },
    );
}

/// The service's side of a descriptor report: process `pid`'s descriptors now, each with the
/// name of its open file. A report from a process the service no longer lists is dropped.
pub fn set_descriptors(pid: u32, descriptors: Vec<(u32, Vec<u8>)>, handles: Vec<(u32, u64)>) {
    if let Some(record) = RECORDS.lock().get_mut(&pid) {
        record.descriptors = descriptors;
        record.handles = handles;
    }
}

/// The service's handle that descriptor `fd` of process `pid` named when it last reported.
pub fn descriptor_handle(pid: u32, fd: u32) -> Option<u64> {
    let records = RECORDS.lock();
    records.get(&pid)?.handles.iter().find(|(number, _)| *number == fd).map(|(_, handle)| *handle)
}

/// After each system call (and at safe points): if the running process's descriptors changed,
/// tells the service which handles they name now, so that `/proc/<pid>/fd` lists them
/// (docs/files.md, "`/proc/<pid>/fd`": why the tables are reported rather than asked for).
/// Its own record goes first, so the service knows the pid the report is for.
pub fn report_descriptors() {
    let Some(changes) = DESCRIPTOR_CHANGES.get() else { return };
    let Some((pid, table)) = changes() else { return };
    flush_reports();
    let mut table_bytes = Vec::with_capacity(table.len() * 12);
    for (fd, handle) in &table {
        table_bytes.extend_from_slice(&fd.to_le_bytes());
        table_bytes.extend_from_slice(&handle.to_le_bytes());
    }
    super::client::report_descriptors(pid, table.len(), &table_bytes);
}

fn on_record(bytes: &[u8]) -> crate::msg::HandlerResult {
    apply(&ProcessRecord::decode(bytes)?);
    Ok(())
}

/// Registers the record handler (on the service's instance).
pub fn init() {
    crate::msg::register(
        Kind::ProcessRecord,
        crate::msg::Handler { high_priority: false, on_line: None, on_large: Some(on_record) },
    );
}

/// Tells the service a process of this instance appeared, changed program (`alive`) or
/// ended; `command_line` is its argv, `program` the path of the file it runs.
pub fn report(pid: u32, parent_pid: u32, alive: bool, name: &str, command_line: &[u8], program: &str) {
    report_with(
        pid,
        parent_pid,
        alive,
        name,
        command_line,
        program,
        Membership {
            process_group: pid,
            session: pid,
            stopped: false,
            credentials: abi::credentials::Ids::ROOT,
            groups: Vec::new(),
        },
    );
}

/// A process's group, session and stop state, as `/proc/<pid>/stat` shows them, and its ids
/// and groups, as `/proc/<pid>/status` does (its `/proc` files are its effective user's).
#[derive(Clone)]
pub struct Membership {
    pub process_group: u32,
    pub session: u32,
    pub stopped: bool,
    pub credentials: abi::credentials::Ids,
    pub groups: Vec<u32>,
}

/// [`report`], with the process's group, session and stop state.
pub fn report_with(
    pid: u32,
    parent_pid: u32,
    alive: bool,
    name: &str,
    command_line: &[u8],
    program: &str,
    membership: Membership,
) {
    let record = ProcessRecord {
        pid,
        parent_pid,
        core: shared::this_core(),
        alive,
        name: name.as_bytes(),
        command_line: &command_line[..command_line.len().min(4096)],
        program: &program.as_bytes()[..program.len().min(4096)],
        process_group: membership.process_group,
        session: membership.session,
        stopped: membership.stopped,
        credentials: membership.credentials,
        group_bytes: &membership.groups.iter().flat_map(|group| group.to_le_bytes()).collect::<Vec<u8>>(),
    };
    if shared::this_core() as usize == super::service::SERVICE_CORE {
        return apply(&record);
    }
    let mut bytes = alloc::vec![0u8; record.encoded_size()];
    if record.encode(&mut bytes).is_some() {
        // Sent at the next safe point: a report may come from a message handler (a spawn).
        OUTBOX.lock().push(bytes);
    }
}

/// One line per process of every instance, as the service knows them (the watchdog dump,
/// `fs/magic_key.rs`: no other core need answer, so a wedged one cannot stop it).
pub fn write_records(out: &mut dyn Write) {
    for (pid, record) in RECORDS.lock().iter() {
        let arguments: Vec<&str> = record
            .command_line
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .filter_map(|a| core::str::from_utf8(a).ok())
            .collect();
        let _ = writeln!(
            out,
            "  pid {pid} ({}) on core {}, parent {}: {}",
            record.name,
            record.core,
            record.parent_pid,
            arguments.join(" ")
        );
    }
}

/// Reports not yet sent to the service's instance.
static OUTBOX: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// Sends the reports waiting (at safe points).
pub fn flush_reports() {
    if OUTBOX.lock().is_empty() {
        return;
    }
    let reports = core::mem::take(&mut *OUTBOX.lock());
    for bytes in reports {
        if let Err(error) = crate::msg::send_large_draining(super::service::SERVICE_CORE, Kind::ProcessRecord, &bytes) {
            log::debug!("a process record was not sent to /proc: {error}");
        }
    }
}

/// argv as `/proc/<pid>/cmdline` holds it: each argument NUL-ended.
pub fn command_line(arguments: &[&[u8]]) -> Vec<u8> {
    let mut line = Vec::new();
    for argument in arguments {
        line.extend_from_slice(argument);
        line.push(0);
    }
    line
}

struct Source;

/// The source the VFS's `/proc` reads.
pub fn source() -> Box<dyn ProcSource> {
    Box::new(Source)
}

impl ProcSource for Source {
    fn pids(&self) -> Vec<u32> {
        RECORDS.lock().keys().copied().collect()
    }

    fn descriptors(&self, pid: u32) -> Result<Vec<(u32, Vec<u8>)>, Errno> {
        Ok(RECORDS.lock().get(&pid).ok_or(errno::ENOENT)?.descriptors.clone())
    }

    fn program(&self, pid: u32) -> Result<Vec<u8>, Errno> {
        Ok(RECORDS.lock().get(&pid).ok_or(errno::ENOENT)?.program.clone())
    }

    fn owner(&self, pid: u32) -> (u32, u32) {
        RECORDS
            .lock()
            .get(&pid)
            .map_or((0, 0), |record| (record.credentials.effective_uid, record.credentials.effective_gid))
    }

    fn generate(&self, file: ProcFile) -> Result<Vec<u8>, Errno> {
        let mut text = String::new();
        match file {
            ProcFile::Status(pid) | ProcFile::Cmdline(pid) | ProcFile::Stat(pid) | ProcFile::Comm(pid) => {
                let records = RECORDS.lock();
                let record = records.get(&pid).ok_or(errno::ENOENT)?;
                match file {
                    ProcFile::Cmdline(_) => return Ok(record.command_line.clone()),
                    ProcFile::Comm(_) => {
                        // Linux keeps 15 bytes of a name (`TASK_COMM_LEN` with its NUL).
                        let mut name = record.name.as_bytes()[..record.name.len().min(15)].to_vec();
                        name.push(b'\n');
                        return Ok(name);
                    }
                    ProcFile::Status(_) => {
                        use abi::credentials::Family;
                        let _ = write!(
                            text,
                            "Name:\t{}\nUmask:\t0022\nState:\t{}\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{}\n",
                            record.name,
                            if record.stopped { "T (stopped)" } else { "R (running)" },
                            record.parent_pid,
                        );
                        // Real, effective, saved and file-system ids; then the groups, each
                        // followed by a space, as Linux writes them.
                        for (label, family) in [("Uid", Family::User), ("Gid", Family::Group)] {
                            let [real, effective, saved, filesystem] = record.credentials.status_line(family);
                            let _ = writeln!(text, "{label}:\t{real}\t{effective}\t{saved}\t{filesystem}");
                        }
                        text.push_str("Groups:\t");
                        for group in &record.groups {
                            let _ = write!(text, "{group} ");
                        }
                        let _ = writeln!(text, "\nCpus_allowed_list:\t{}", record.core);
                    }
                    _ => {
                        // Linux's 52 fields; Reef fills the identity ones and the core (39th).
                        let state = if record.stopped { 'T' } else { 'R' };
                        let _ = write!(
                            text,
                            "{pid} ({}) {state} {} {} {} 0 -1 0",
                            record.name, record.parent_pid, record.process_group, record.session
                        );
                        for field in 10..=52 {
                            let value = if field == 39 { record.core } else { 0 };
                            let _ = write!(text, " {value}");
                        }
                        text.push('\n');
                    }
                }
            }
            ProcFile::CpuInfo => cpu_info(&mut text),
            ProcFile::Interrupts => interrupts(&mut text),
            ProcFile::MemInfo => memory_info(&mut text),
            ProcFile::Uptime => {
                let ns = crate::time::now_ns();
                let _ = writeln!(text, "{}.{:02} 0.00", ns / 1_000_000_000, ns / 10_000_000 % 100);
            }
            // The VFS writes the mounts, the file service `/proc/net` (its sockets).
            ProcFile::Mounts | ProcFile::Net(_) => return Err(errno::ENOENT),
            ProcFile::Reef(view) => reef_view(view, &mut text)?,
        }
        Ok(text.into_bytes())
    }
}

fn cpu_info(text: &mut String) {
    use crate::arch::cpu::cpuid;
    let vendor = cpuid(0, 0);
    let mut vendor_name = [0u8; 12];
    vendor_name[0..4].copy_from_slice(&vendor.ebx.to_le_bytes());
    vendor_name[4..8].copy_from_slice(&vendor.edx.to_le_bytes());
    vendor_name[8..12].copy_from_slice(&vendor.ecx.to_le_bytes());
    let signature = cpuid(1, 0).eax;
    let family = ((signature >> 8) & 0xf) + if (signature >> 8) & 0xf == 0xf { (signature >> 20) & 0xff } else { 0 };
    let model = ((signature >> 4) & 0xf) | (((signature >> 16) & 0xf) << 4);
    let mut brand = [0u8; 48];
    if cpuid(0x8000_0000, 0).eax >= 0x8000_0004 {
        for (index, leaf) in (0x8000_0002u32..=0x8000_0004).enumerate() {
            let registers = cpuid(leaf, 0);
            for (word, value) in [registers.eax, registers.ebx, registers.ecx, registers.edx].iter().enumerate() {
                let at = index * 16 + word * 4;
                brand[at..at + 4].copy_from_slice(&value.to_le_bytes());
            }
        }
    }
    let brand = core::str::from_utf8(&brand).unwrap_or("").trim_matches(char::from(0)).trim();
    let megahertz = shared::facts().tsc_hz / 1_000_000;
    for kcb in shared::get().listed_kcbs() {
        if kcb.state() != CoreState::Running {
            continue;
        }
        let _ = write!(
            text,
            "processor\t: {}\nvendor_id\t: {}\ncpu family\t: {family}\nmodel\t\t: {model}\nmodel name\t: {}\n\
             stepping\t: {}\ncpu MHz\t\t: {megahertz}.000\napicid\t\t: {}\nreef role\t: {}\n\n",
            kcb.core_id.load(Ordering::Relaxed),
            core::str::from_utf8(&vendor_name).unwrap_or("?"),
            if brand.is_empty() { "unknown" } else { brand },
            signature & 0xf,
            kcb.apic_id.load(Ordering::Relaxed),
            crate::core::kcb::Role::name(kcb.role.load(Ordering::Relaxed)),
        );
    }
}

/// `/proc/interrupts` as Linux lays it out (`arch/x86/kernel/irq.c`): a header of `CPUn`
/// columns over the running cores, then a line per vector some core took, its counts right
/// under the headers, then its name.
fn interrupts(text: &mut String) {
    let cores: Vec<&crate::core::kcb::Kcb> =
        shared::get().listed_kcbs().iter().filter(|kcb| kcb.state() == CoreState::Running).collect();
    // Linux's `prec`: the width of the label column, at least 3.
    const LABEL: usize = 3;
    let _ = write!(text, "{:width$}", "", width = LABEL + 8);
    for kcb in &cores {
        let _ = write!(text, "CPU{:<8}", kcb.core_id.load(Ordering::Relaxed));
    }
    text.push('\n');
    for vector in 0..=u8::MAX {
        let counts: Vec<u64> =
            cores.iter().map(|kcb| kcb.interrupts.by_vector[usize::from(vector)].load(Ordering::Relaxed)).collect();
        if counts.iter().all(|count| *count == 0) {
            continue;
        }
        let _ = write!(text, "{vector:>LABEL$}: ");
        for count in counts {
            let _ = write!(text, "{count:>10} ");
        }
        let _ = writeln!(text, "  {}", crate::interrupt::vector_name(vector));
    }
}

fn memory_info(text: &mut String) {
    let mut total = 0u64;
    let mut free = 0u64;
    for kcb in shared::get().listed_kcbs() {
        let partition = kcb.partition();
        total += partition.end - partition.start;
        if kcb.state() == CoreState::Running {
            let baseline = kcb.processes.baseline_free_frames.load(Ordering::Relaxed);
            let held = kcb.processes.frames.load(Ordering::Relaxed);
            free += baseline.saturating_sub(held) * 4096;
        }
    }
    let tmpfs = super::service::counts().map_or(0, |c| c.tmpfs_pages as u64 * 4096);
    let _ = write!(
        text,
        "MemTotal:       {:>8} kB\nMemFree:        {:>8} kB\nMemAvailable:   {:>8} kB\nShmem:          {:>8} kB\n",
        total >> 10,
        free.saturating_sub(tmpfs) >> 10,
        free.saturating_sub(tmpfs) >> 10,
        tmpfs >> 10
    );
}

fn reef_view(view: ReefView, text: &mut String) -> Result<(), Errno> {
    match view {
        ReefView::Files => {
            let counts = super::service::counts().ok_or(errno::ENOENT)?;
            let _ = writeln!(
                text,
                "open files {}, pipes {}, pipe pages {}, parked requests {}, tmpfs nodes {}, tmpfs pages {}/{}, \
                 requests {} ({} from other cores, {} served as a kernel core), refused {}, share fids opened {}, \
                 sockets {}, epolls {}",
                counts.open_files,
                counts.pipes,
                counts.pipe_pages,
                counts.parked,
                counts.tmpfs_nodes,
                counts.tmpfs_pages,
                counts.tmpfs_page_limit,
                counts.requests,
                counts.remote_requests,
                counts.kernel_core_requests,
                counts.refused,
                counts.share_opened_fids,
                counts.sockets,
                counts.epolls
            );
            Ok(())
        }
        // The devices are the file service's instance's own (it owns them): no view to ask.
        ReefView::Devices => {
            let _ = crate::dev::write_view(text);
            Ok(())
        }
        // The file service writes it: the stack is its own.
        ReefView::Net => Err(errno::ENOENT),
        ReefView::Cores | ReefView::Mem | ReefView::Msg | ReefView::Syscalls | ReefView::Processes => {
            write_view(view, text);
            Ok(())
        }
    }
}
