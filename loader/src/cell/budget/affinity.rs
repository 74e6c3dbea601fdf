//! Threads' CPU affinity: read and set one thread's mask (`sched_getaffinity` /
//! `sched_setaffinity` on a thread id), list a process's threads
//! (`/proc/<pid>/task`), and the host's online CPUs. The one file of the budget
//! module that calls libc.

#![allow(unsafe_code)]

use std::io;

/// The threads of process `pid` (empty when it is gone).
pub fn threads(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect();
    out.sort_unstable();
    out
}

/// The CPUs thread `tid` may run on.
pub fn get(tid: u32) -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel writes at most
    // size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Let thread `tid` run on `cpus` only.
pub fn set(tid: u32, cpus: &[usize]) -> io::Result<()> {
    // SAFETY: the set is initialised by CPU_ZERO and CPU_SET with CPU numbers below
    // CPU_SETSIZE; the kernel only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The host's online CPUs (`/sys/devices/system/cpu/online`; this thread's mask
/// when it cannot be read).
pub fn online() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| crate::scenario::resources::parse_cpus(s.trim()).ok())
        .unwrap_or_else(|| get(0).unwrap_or_default())
}
