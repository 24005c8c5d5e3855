//! Where the program runs, from Linux's side: the CPU, and pinning to one.

use std::io;

/// The CPU the calling thread runs on (Linux `getcpu`).
pub fn current_cpu() -> io::Result<usize> {
    // SAFETY: `sched_getcpu` takes no pointer and only reads the CPU number.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).map_err(|_| io::Error::last_os_error())
}

/// Pins the calling thread to `cpu` alone (Linux `sched_setaffinity`).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: an all-zero `cpu_set_t` is the empty set, a valid value of this plain bit array.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is beyond cpu_set_t")));
    }
    // SAFETY: `cpu` is below the number of bits of `set` (checked above), so the bit it sets
    // is inside the array.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live `cpu_set_t` of the size passed; the kernel only reads it, and
    // thread id 0 means the calling thread.
    let status = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_where_asked() {
        let cpu = current_cpu().unwrap();
        pin_current_thread(cpu).unwrap();
        assert_eq!(current_cpu().unwrap(), cpu);
        assert!(pin_current_thread(1 << 20).is_err());
    }
}
