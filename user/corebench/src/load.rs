//! `--load`: a busy loop on every other online core, as threads pinned there on Linux and as
//! processes spawned there on Reef (a Reef thread runs on its process's core).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// Where Linux lists its online CPUs (`0-3,5`), and Reef too where it offers the file.
const ONLINE_LIST: &str = "/sys/devices/system/cpu/online";

/// The CPUs of a Linux CPU list (`0-3,8,10-11`, as in `cpuN/online`'s directory), sorted and
/// each once; `None` when the text is not one.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for range in text.trim().split(',') {
        let (first, last): (usize, usize) = match range.split_once('-') {
            Some((first, last)) => (first.parse().ok()?, last.parse().ok()?),
            None => {
                let cpu = range.parse().ok()?;
                (cpu, cpu)
            }
        };
        if first > last || last - first > 4096 {
            return None;
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The online cores: Linux's list, else on Reef cores `0..` the running kernel instances
/// (every core of the machine runs one until a core is stopped, and none is yet when this is
/// asked).
pub fn online_cores() -> Result<Vec<usize>, String> {
    if let Some(cpus) = std::fs::read_to_string(ONLINE_LIST).ok().and_then(|text| parse_cpu_list(&text)) {
        return Ok(cpus);
    }
    match rt::instance_count() {
        Some(count) => Ok((0..count).collect()),
        None => Err(format!("{ONLINE_LIST} cannot be read, and this is not Reef")),
    }
}

/// Spins until killed; checks every few million turns whether its parent is gone (it was
/// reparented), so a load outlives no crashed corebench by more than a moment.
pub fn spin() -> ! {
    let parent = std::os::unix::process::parent_id();
    loop {
        for _ in 0..(1 << 22) {
            std::hint::spin_loop();
        }
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
    }
}

/// The busy loops running.
pub enum Load {
    /// Linux: one thread pinned to each core; they stop when `stop` is set.
    Threads { stop: Arc<AtomicBool>, threads: Vec<JoinHandle<()>> },
    /// Reef: one `corebench --spin` process spawned on each core.
    Processes(Vec<rt::Pid>),
}

impl Load {
    /// A busy loop on each of `cores`, running when this returns (on Linux each thread has
    /// pinned itself first). On failure the loops already started are stopped again.
    pub fn start(cores: &[usize], reef: bool) -> Result<Load, String> {
        if reef {
            Self::processes(cores)
        } else {
            Self::threads(cores)
        }
    }

    fn threads(cores: &[usize]) -> Result<Load, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (pinned, reports) = mpsc::channel();
        let threads = cores
            .iter()
            .map(|&cpu| {
                let (stop, pinned) = (stop.clone(), pinned.clone());
                std::thread::spawn(move || {
                    let result = rt::pin_current_thread(cpu).map_err(|error| format!("pinning to CPU {cpu}: {error}"));
                    let failed = result.is_err();
                    let _ = pinned.send(result);
                    // Relaxed: the flag carries no data, and the loop sees the store soon.
                    while !failed && !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let load = Load::Threads { stop, threads };
        let failure = (0..cores.len()).find_map(|_| match reports.recv() {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error),
            Err(_) => Some("a load thread ended before it pinned itself".to_string()),
        });
        match failure {
            None => Ok(load),
            Some(error) => Err(load.stop_after(error)),
        }
    }

    /// Stops the loops after `error` kept the load from starting; the error, and what went
    /// wrong stopping them.
    fn stop_after(self, error: String) -> String {
        match self.stop() {
            Ok(()) => error,
            Err(more) => format!("{error}; {more}"),
        }
    }

    fn processes(cores: &[usize]) -> Result<Load, String> {
        let program = std::env::current_exe().map_err(|error| format!("finding corebench's own path: {error}"))?;
        let program = program.to_str().ok_or("corebench's own path is not UTF-8")?.to_string();
        let mut pids = Vec::new();
        for &core in cores {
            match rt::spawn(core, &program, &["--spin"], &[]) {
                Ok(pid) => pids.push(pid),
                Err(error) => {
                    return Err(
                        Load::Processes(pids).stop_after(format!("spawning {program} --spin on core {core}: {error}"))
                    )
                }
            }
        }
        Ok(Load::Processes(pids))
    }

    /// Stops every loop and waits for it to end.
    pub fn stop(self) -> Result<(), String> {
        match self {
            Load::Threads { stop, threads } => {
                stop.store(true, Ordering::Relaxed);
                let panicked = threads.into_iter().map(JoinHandle::join).filter(Result::is_err).count();
                match panicked {
                    0 => Ok(()),
                    count => Err(format!("{count} load thread(s) panicked")),
                }
            }
            Load::Processes(pids) => {
                let mut errors = Vec::new();
                for pid in pids {
                    // SAFETY: `kill` takes no pointer; it only sends SIGKILL to our own child
                    // `pid`, which is not reaped yet, so the pid names no other process.
                    if unsafe { libc::kill(pid.as_raw(), libc::SIGKILL) } != 0 {
                        errors.push(format!("killing load process {pid}: {}", std::io::Error::last_os_error()));
                        continue;
                    }
                    if let Err(error) = rt::wait(pid) {
                        errors.push(format!("waiting for load process {pid}: {error}"));
                    }
                }
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(errors.join("; "))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3\n"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list("0,2-3,8"), Some(vec![0, 2, 3, 8]));
        assert_eq!(parse_cpu_list("5,0-1,1"), Some(vec![0, 1, 5]), "sorted, each once");
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        for bad in ["", "x", "3-1", "0-", "1,,2", "0-99999"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn threads_spin_where_pinned_and_stop() {
        let cpu = rt::current_cpu().unwrap();
        let load = Load::start(&[cpu, cpu], false).unwrap();
        assert!(matches!(&load, Load::Threads { threads, .. } if threads.len() == 2));
        load.stop().unwrap();
        let error = Load::start(&[cpu, 1 << 20], false).err().unwrap();
        assert!(error.contains("pinning to CPU 1048576"), "{error}");
    }

    #[test]
    fn the_online_cores_of_the_host() {
        let cores = online_cores().unwrap();
        assert!(cores.contains(&rt::current_cpu().unwrap()), "{cores:?}");
    }
}
