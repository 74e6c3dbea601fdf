//! What machine a cell ran on.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub hostname: String,
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    pub kernel: String,
    pub os: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Host {
    pub fn probe() -> Host {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        let os = read("/etc/os-release")
            .lines()
            .find(|l| l.starts_with("PRETTY_NAME="))
            .map(|l| {
                l.trim_start_matches("PRETTY_NAME=")
                    .trim_matches('"')
                    .to_string()
            })
            .unwrap_or_default();
        Host {
            hostname: hostname(),
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            os,
        }
    }
}

/// This machine's host name.
pub fn hostname() -> String {
    read("/proc/sys/kernel/hostname").trim().to_string()
}

/// CPU seconds this process has used (user + system), from /proc/self/stat.
pub fn process_cpu_seconds() -> f64 {
    let stat = read("/proc/self/stat");
    // Fields after the parenthesised command name; utime and stime are fields 14, 15.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // USER_HZ is 100 on every Linux architecture crossbench targets.
    (ticks(11) + ticks(12)) / 100.0
}

/// Peak resident set size of this process in bytes (VmHWM).
pub fn peak_rss_bytes() -> u64 {
    read("/proc/self/status")
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Cores this process may use: the cgroup CPU quota if one is set, else the CPU count.
pub fn cores_available() -> f64 {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let quota = read("/sys/fs/cgroup/cpu.max");
    let mut it = quota.split_whitespace();
    if let (Some(q), Some(p)) = (it.next(), it.next()) {
        if let (Ok(q), Ok(p)) = (q.parse::<f64>(), p.parse::<f64>()) {
            if p > 0.0 {
                return (q / p).min(n);
            }
        }
    }
    n
}
