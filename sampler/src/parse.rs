//! Pure parsers for the kernel text files the sampler reads. Every function
//! takes the file contents and returns `None` (or skips a line) on anything it
//! does not understand, so a format change degrades to empty fields.

use std::collections::BTreeMap;

/// `key value` lines (cgroup `cpu.stat`, `memory.stat`).
pub(crate) fn flat_keyed(text: &str) -> BTreeMap<&str, u64> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if let (Some(k), Some(v)) = (it.next(), it.next()) {
            if let Ok(v) = v.parse::<u64>() {
                m.insert(k, v);
            }
        }
    }
    m
}

/// A single unsigned integer (`memory.current`, `memory.peak`). `max` is `None`.
pub(crate) fn single_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// cgroup `io.stat`: sum of `rbytes` and `wbytes` over all devices.
pub(crate) fn io_stat_totals(text: &str) -> (u64, u64) {
    let (mut r, mut w) = (0u64, 0u64);
    for line in text.lines() {
        for field in line.split_whitespace().skip(1) {
            if let Some((k, v)) = field.split_once('=') {
                let v: u64 = v.parse().unwrap_or(0);
                match k {
                    "rbytes" => r = r.saturating_add(v),
                    "wbytes" => w = w.saturating_add(v),
                    _ => {}
                }
            }
        }
    }
    (r, w)
}

/// PSI file (`cpu.pressure`, ...): the `avg10` of the `some` line, in percent.
pub(crate) fn pressure_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))
        .and_then(|v| v.parse().ok())
}

/// The fields of `/proc/<pid>/stat` the sampler uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PidStat {
    pub ppid: u32,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, in clock ticks; tells a reused pid apart.
    pub starttime: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) may contain spaces
/// and parentheses, so fields are counted from the last `)`.
pub(crate) fn pid_stat(text: &str) -> Option<PidStat> {
    let rest = &text[text.rfind(')')? + 1..];
    // rest starts at field 3 (state): index 0 = state, 1 = ppid, ... 11 = utime,
    // 12 = stime, 19 = starttime.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
    Some(PidStat {
        ppid: num(1)? as u32,
        cpu_ticks: num(11)?.saturating_add(num(12)?),
        starttime: num(19)?,
    })
}

/// `/proc/<pid>/statm`: (resident pages, shared pages).
pub(crate) fn statm(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace().skip(1);
    let resident = it.next()?.parse().ok()?;
    let shared = it.next()?.parse().ok()?;
    Some((resident, shared))
}

/// `/proc/<pid>/io`: (read_bytes, write_bytes) at the storage layer.
pub(crate) fn pid_io(text: &str) -> Option<(u64, u64)> {
    let m = colon_keyed(text);
    Some((*m.get("read_bytes")?, *m.get("write_bytes")?))
}

/// `key: value [kB]` lines (`/proc/<pid>/io`, `/proc/meminfo`). Values with a
/// `kB` suffix are converted to bytes.
pub(crate) fn colon_keyed(text: &str) -> BTreeMap<&str, u64> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let mut it = v.split_whitespace();
            if let Some(Ok(n)) = it.next().map(str::parse::<u64>) {
                let n = if it.next() == Some("kB") { n * 1024 } else { n };
                m.insert(k.trim(), n);
            }
        }
    }
    m
}

/// One `cpu` line of `/proc/stat`: (busy ticks, total ticks). Busy excludes
/// idle and iowait; guest time is already inside user/nice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CpuTicks {
    pub busy: u64,
    pub total: u64,
    /// Ticks the hypervisor ran another guest while this one wanted the CPU (part
    /// of `busy`).
    pub steal: u64,
}

/// `/proc/stat`: the aggregate line and each `cpuN` line, in order of N.
pub(crate) fn proc_stat(text: &str) -> (Option<CpuTicks>, Vec<(u32, CpuTicks)>) {
    let mut agg = None;
    let mut cores = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let Some(first) = it.next() else { continue };
        let (id, nums): (Option<u32>, Vec<u64>) = if rest.starts_with(' ') {
            (
                None,
                std::iter::once(first)
                    .chain(it)
                    .filter_map(|s| s.parse().ok())
                    .collect(),
            )
        } else {
            let Ok(id) = first.parse::<u32>() else {
                continue;
            };
            (Some(id), it.filter_map(|s| s.parse().ok()).collect())
        };
        if nums.len() < 4 {
            continue;
        }
        // user nice system idle iowait irq softirq steal guest guest_nice
        let get = |i: usize| nums.get(i).copied().unwrap_or(0);
        let idle = get(3) + get(4);
        let total: u64 = (0..8).map(get).sum();
        let t = CpuTicks {
            busy: total.saturating_sub(idle),
            total,
            steal: get(7),
        };
        match id {
            None => agg = Some(t),
            Some(id) => cores.push((id, t)),
        }
    }
    (agg, cores)
}

/// `/proc/diskstats`: (device name, sectors read, sectors written). Sectors
/// are always 512 bytes in this file regardless of the device.
pub(crate) fn diskstats(text: &str) -> Vec<(String, u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = f.get(2)?;
            let rd = f.get(5)?.parse().ok()?;
            let wr = f.get(9)?.parse().ok()?;
            Some((name.to_string(), rd, wr))
        })
        .collect()
}

/// `/proc/net/dev`: (interface, rx bytes, tx bytes).
pub(crate) fn net_dev(text: &str) -> Vec<(String, u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let rx = f.first()?.parse().ok()?;
            let tx = f.get(8)?.parse().ok()?;
            Some((name.trim().to_string(), rx, tx))
        })
        .collect()
}

/// `/proc/mounts`: mount points of type `cgroup2`.
pub(crate) fn cgroup2_mounts(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| unescape_mount(f.get(1)?))?
        })
        .collect()
}

fn unescape_mount(s: &str) -> Option<String> {
    // /proc/mounts escapes space, tab, newline and backslash as \ooo.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Some(v) = s
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Simple glob: `*` (any run, possibly empty) and `?` (one char); everything
/// else literal.
pub(crate) fn glob_match(pat: &str, s: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pat.chars().collect(), s.chars().collect());
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(sp) = star {
            pi = sp + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stat_and_memory_stat() {
        let m = flat_keyed(
            "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 10\nnr_throttled 3\nthrottled_usec 777\n",
        );
        assert_eq!(m["usage_usec"], 123456);
        assert_eq!(m["nr_throttled"], 3);
        assert_eq!(m["throttled_usec"], 777);
        let m = flat_keyed("anon 1048576\nfile 2097152\nkernel 4096\n");
        assert_eq!((m["anon"], m["file"]), (1048576, 2097152));
        assert_eq!(single_u64("12345\n"), Some(12345));
        assert_eq!(single_u64("max\n"), None);
    }

    #[test]
    fn io_stat_sums_devices() {
        let t = "8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n\
                 253:0 rbytes=100 wbytes=200 rios=1 wios=2 dbytes=0 dios=0\n";
        assert_eq!(io_stat_totals(t), (1459300, 314773704));
        assert_eq!(io_stat_totals(""), (0, 0));
    }

    #[test]
    fn pressure() {
        let t = "some avg10=1.53 avg60=0.20 avg300=0.05 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(pressure_some_avg10(t), Some(1.53));
        assert_eq!(pressure_some_avg10("garbage"), None);
    }

    #[test]
    fn pid_stat_with_awkward_comm() {
        let t = "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 98765 1000000 500 18446744073709551615";
        let s = pid_stat(t).unwrap();
        assert_eq!(s.ppid, 17);
        assert_eq!(s.cpu_ticks, 300);
        assert_eq!(s.starttime, 98765);
        assert_eq!(pid_stat("garbage"), None);
        assert_eq!(statm("1000 200 50 10 0 300 0\n"), Some((200, 50)));
        let io = "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(pid_io(io), Some((4096, 8192)));
    }

    #[test]
    fn meminfo_in_bytes() {
        let m =
            colon_keyed("MemTotal:       16384 kB\nMemAvailable:    8192 kB\nHugePages_Total: 0\n");
        assert_eq!(m["MemTotal"], 16384 * 1024);
        assert_eq!(m["HugePages_Total"], 0);
    }

    #[test]
    fn proc_stat_lines() {
        let t = "cpu  100 0 50 800 50 0 0 7 0 0\ncpu0 60 0 20 400 20 0 0 0 0 0\ncpu1 40 0 30 400 30 0 0 7 0 0\nintr 1 2 3\nctxt 5\n";
        let (agg, cores) = proc_stat(t);
        // Steal (the 8th field) is busy time: the guest wanted the CPU.
        assert_eq!(
            agg,
            Some(CpuTicks {
                busy: 157,
                total: 1007,
                steal: 7
            })
        );
        assert_eq!(cores.len(), 2);
        assert_eq!(
            cores[1],
            (
                1,
                CpuTicks {
                    busy: 77,
                    total: 507,
                    steal: 7
                }
            )
        );
    }

    #[test]
    fn diskstats_and_netdev() {
        let d = " 254       0 vda 1000 0 2048 0 500 0 4096 0 0 0 0 0 0 0 0 0 0\n 254       1 vda1 10 0 20 0 5 0 40 0 0 0 0\n";
        let v = diskstats(d);
        assert_eq!(v[0], ("vda".to_string(), 2048, 4096));
        assert_eq!(v.len(), 2);
        let n = "Inter-|   Receive |  Transmit\n face |bytes packets|bytes\n    lo:   47475     600    0    0    0     0          0         0    47400     600    0    0    0     0       0          0\n  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n";
        let v = net_dev(n);
        assert_eq!(v[0], ("lo".to_string(), 47475, 47400));
        assert_eq!(v[1], ("eth0".to_string(), 1, 9));
    }

    #[test]
    fn mounts() {
        let t = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\ncgroup2 /tmp/a\\040b cgroup2 rw 0 0\n";
        assert_eq!(
            cgroup2_mounts(t),
            vec!["/sys/fs/cgroup/unified".to_string(), "/tmp/a b".to_string()]
        );
    }

    #[test]
    fn globs() {
        assert!(glob_match("docker-*.scope", "docker-abc123.scope"));
        assert!(glob_match("*postgres*", "postgres: writer"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("x*", "yx"));
        assert!(glob_match("*a*b", "xxaxxb"));
    }
}
