//! What machine a cell ran on.

use std::path::Path;

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
            cores: online_cpus(),
            memory_bytes,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            os,
        }
    }
}

/// The machine's CPUs online (`/sys/devices/system/cpu/online`, a list such as
/// `0-1`): the machine's, not this process's CPU set, which a loader budget narrows
/// ([`cores_available`] is that one).
pub fn online_cpus() -> usize {
    cpu_list_len(&read("/sys/devices/system/cpu/online"))
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How many CPUs a kernel CPU list names (`0-3,6`: 5); `None` when it does not parse.
fn cpu_list_len(list: &str) -> Option<usize> {
    let list = list.trim();
    if list.is_empty() {
        return None;
    }
    let mut n = 0;
    for part in list.split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                b.checked_sub(a)? + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    Some(n)
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

/// Cores this process may use: the CPU count (or its affinity mask), lowered by the
/// tightest CPU quota of its own cgroup and every cgroup above it (cgroup v2
/// `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), as a loader pod with a CPU
/// limit, or a loader placed in a CPU-limited cgroup, has.
pub fn cores_available() -> f64 {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let own = read("/proc/self/cgroup");
    cgroup_quota(Path::new("/sys/fs/cgroup"), &own).map_or(n, |q| q.min(n))
}

/// The tightest CPU quota (in cores) on the way from the cgroups `proc_cgroup` (the
/// text of `/proc/<pid>/cgroup`) names up to the root, under the cgroup mount `root`.
pub fn cgroup_quota(root: &Path, proc_cgroup: &str) -> Option<f64> {
    let mut best: Option<f64> = None;
    let mut take = |q: f64| best = Some(best.map_or(q, |b: f64| b.min(q)));
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = match (f.next(), f.next(), f.next()) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => continue,
        };
        let rel = path.trim_start_matches('/');
        if controllers.is_empty() {
            // v2: `cpu.max` = "<quota|max> <period>" in each directory up to the root.
            for base in [root.to_path_buf(), root.join("unified")] {
                for dir in ancestors(&base, rel) {
                    let text = read_path(&dir.join("cpu.max"));
                    let mut it = text.split_whitespace();
                    if let (Some(q), Some(p)) = (it.next(), it.next()) {
                        if let (Ok(q), Ok(p)) = (q.parse::<f64>(), p.parse::<f64>()) {
                            if p > 0.0 {
                                take(q / p);
                            }
                        }
                    }
                }
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            // v1: the cpu controller's quota and period (-1: none).
            for mount in [
                root.join("cpu"),
                root.join("cpu,cpuacct"),
                root.join("cpuacct,cpu"),
            ] {
                for dir in ancestors(&mount, rel) {
                    let q = read_path(&dir.join("cpu.cfs_quota_us"))
                        .trim()
                        .parse::<f64>();
                    let p = read_path(&dir.join("cpu.cfs_period_us"))
                        .trim()
                        .parse::<f64>();
                    if let (Ok(q), Ok(p)) = (q, p) {
                        if q > 0.0 && p > 0.0 {
                            take(q / p);
                        }
                    }
                }
            }
        }
    }
    best
}

/// `base/rel`, then each of its parents down to `base` itself.
fn ancestors(base: &Path, rel: &str) -> Vec<std::path::PathBuf> {
    let mut out = vec![base.to_path_buf()];
    let mut cur = base.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        cur = cur.join(part);
        out.push(cur.clone());
    }
    out
}

fn read_path(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_list_counts_its_cpus() {
        assert_eq!(cpu_list_len("0-1\n"), Some(2));
        assert_eq!(cpu_list_len("0-3,6"), Some(5));
        assert_eq!(cpu_list_len("7"), Some(1));
        assert_eq!(cpu_list_len(""), None);
        assert_eq!(cpu_list_len("3-1"), None);
    }

    #[test]
    fn the_tightest_quota_on_the_way_up_counts_v1_and_v2() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        // v1: cpu controller, the loader's cgroup limited to 0.3 cores, its parent to 1.
        std::fs::create_dir_all(r.join("cpu/fleet/l0")).unwrap();
        std::fs::write(r.join("cpu/fleet/cpu.cfs_quota_us"), "100000\n").unwrap();
        std::fs::write(r.join("cpu/fleet/cpu.cfs_period_us"), "100000\n").unwrap();
        std::fs::write(r.join("cpu/fleet/l0/cpu.cfs_quota_us"), "30000\n").unwrap();
        std::fs::write(r.join("cpu/fleet/l0/cpu.cfs_period_us"), "100000\n").unwrap();
        std::fs::write(r.join("cpu/cpu.cfs_quota_us"), "-1\n").unwrap();
        std::fs::write(r.join("cpu/cpu.cfs_period_us"), "100000\n").unwrap();
        let v1 = "4:memory:/x\n1:cpu:/fleet/l0\n0::/\n";
        assert_eq!(cgroup_quota(r, v1), Some(0.3));
        // v2: a pod's cgroup with cpu.max 2 cores, its parent unlimited.
        std::fs::create_dir_all(r.join("kubepods/pod1")).unwrap();
        std::fs::write(r.join("kubepods/pod1/cpu.max"), "200000 100000\n").unwrap();
        std::fs::write(r.join("kubepods/cpu.max"), "max 100000\n").unwrap();
        assert_eq!(cgroup_quota(r, "0::/kubepods/pod1\n"), Some(2.0));
        // No quota anywhere.
        assert_eq!(cgroup_quota(r, "0::/elsewhere\n1:cpu:/\n"), None);
        assert!(cores_available() >= 0.01);
    }
}
