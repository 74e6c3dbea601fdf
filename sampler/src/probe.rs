//! Probes: one per target, each keeping the previous counters it needs to turn
//! cumulative kernel counters into rates. A probe never returns a negative
//! rate: a missing counter, a counter that went backwards (a recreated cgroup,
//! a reused pid) or the first reading all yield `None`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::parse;
use crate::sys;

/// (metric name, value) pairs produced by one probe at one tick.
pub(crate) type Metrics = Vec<(String, Option<f64>)>;

/// How often sets of pids and cgroups (globs, containers, process trees) are
/// re-resolved.
pub(crate) const RESOLVE_EVERY: Duration = Duration::from_secs(3);

/// Previous value of one cumulative counter.
#[derive(Debug, Default, Clone)]
pub(crate) struct Counter {
    prev: Option<u64>,
}

impl Counter {
    /// Returns the increase since the last call, or `None` on the first
    /// reading, a missing value, or a counter that went backwards.
    pub(crate) fn delta(&mut self, cur: Option<u64>) -> Option<u64> {
        let prev = std::mem::replace(&mut self.prev, cur);
        match (prev, cur) {
            (Some(p), Some(c)) if c >= p => Some(c - p),
            _ => None,
        }
    }
}

fn add(acc: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *acc = Some(acc.unwrap_or(0.0) + v);
    }
}

fn max(acc: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *acc = Some(acc.map_or(v, |a: f64| a.max(v)));
    }
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

// ---------------------------------------------------------------- cgroups

/// Mount points of cgroup v2 hierarchies on this host.
pub(crate) fn cgroup2_roots() -> Vec<PathBuf> {
    read(Path::new("/proc/mounts"))
        .map(|t| {
            parse::cgroup2_mounts(&t)
                .into_iter()
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Clone)]
pub(crate) enum CgroupSource {
    Path(PathBuf),
    Glob(String),
    Container(String),
}

#[derive(Debug, Default)]
struct CgCounters {
    usage: Counter,
    nr_throttled: Counter,
    throttled_usec: Counter,
    rbytes: Counter,
    wbytes: Counter,
}

#[derive(Debug)]
pub(crate) struct CgroupProbe {
    source: CgroupSource,
    roots: Vec<PathBuf>,
    paths: Vec<PathBuf>,
    resolved_at: Option<Instant>,
    counters: HashMap<PathBuf, CgCounters>,
    last: Option<Instant>,
    docker_id: Option<Option<String>>,
}

pub(crate) const CGROUP_METRICS: &[&str] = &[
    "cpu_cores",
    "cpu_throttled_periods_per_s",
    "cpu_throttled_s_per_s",
    "memory_current_bytes",
    "anon_bytes",
    "file_bytes",
    "memory_peak_bytes",
    "read_bytes_per_s",
    "write_bytes_per_s",
    "cpu_pressure_some_avg10",
    "memory_pressure_some_avg10",
    "io_pressure_some_avg10",
    "cgroups",
];

impl CgroupProbe {
    pub(crate) fn new(source: CgroupSource, roots: Vec<PathBuf>) -> Self {
        CgroupProbe {
            source,
            roots,
            paths: Vec::new(),
            resolved_at: None,
            counters: HashMap::new(),
            last: None,
            docker_id: None,
        }
    }

    /// The cgroup directories currently summed.
    #[cfg(test)]
    pub(crate) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn resolve(&mut self) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = match &self.source {
            CgroupSource::Path(p) if p.is_absolute() => vec![p.clone()],
            CgroupSource::Path(p) => self.roots.iter().map(|r| r.join(p)).collect(),
            CgroupSource::Glob(g) => {
                let mut v = Vec::new();
                if g.starts_with('/') {
                    glob_dirs(Path::new("/"), g.trim_start_matches('/'), &mut v);
                } else {
                    for r in &self.roots {
                        glob_dirs(r, g, &mut v);
                    }
                }
                v
            }
            CgroupSource::Container(id) => {
                let mut v = container_dirs(&self.roots, id);
                if v.is_empty() {
                    // Perhaps a name rather than an id: ask docker once.
                    let full = self
                        .docker_id
                        .get_or_insert_with(|| docker_inspect_id(id))
                        .clone();
                    if let Some(full) = full {
                        v = container_dirs(&self.roots, &full);
                    }
                }
                v
            }
        };
        found.retain(|p| p.join("cgroup.procs").exists() || p.join("cpu.stat").exists());
        found.sort();
        found.dedup();
        // A glob may match a cgroup and its children; count each subtree once.
        let all = found.clone();
        found.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
        found
    }

    pub(crate) fn sample(&mut self, now: Instant) -> Metrics {
        let stale = self
            .resolved_at
            .is_none_or(|t| now.saturating_duration_since(t) >= RESOLVE_EVERY);
        if stale && (self.paths.is_empty() || !matches!(self.source, CgroupSource::Path(_))) {
            self.paths = self.resolve();
            self.resolved_at = Some(now);
        }
        let dt = self
            .last
            .map(|l| now.saturating_duration_since(l).as_secs_f64())
            .filter(|d| *d > 0.0);
        self.last = Some(now);

        let mut v = [None::<f64>; 13];
        let mut alive = 0usize;
        let mut seen = HashSet::new();
        for p in &self.paths {
            let Some(cpu) = read(&p.join("cpu.stat")) else {
                continue; // vanished
            };
            alive += 1;
            seen.insert(p.clone());
            let c = self.counters.entry(p.clone()).or_default();
            let cpu = parse::flat_keyed(&cpu);
            let rate =
                |d: Option<u64>, scale: f64| dt.and_then(|dt| d.map(|d| d as f64 / scale / dt));
            add(
                &mut v[0],
                rate(c.usage.delta(cpu.get("usage_usec").copied()), 1e6),
            );
            add(
                &mut v[1],
                rate(c.nr_throttled.delta(cpu.get("nr_throttled").copied()), 1.0),
            );
            add(
                &mut v[2],
                rate(
                    c.throttled_usec.delta(cpu.get("throttled_usec").copied()),
                    1e6,
                ),
            );
            let f = |name: &str| read(&p.join(name));
            add(
                &mut v[3],
                f("memory.current")
                    .and_then(|t| parse::single_u64(&t))
                    .map(|x| x as f64),
            );
            if let Some(ms) = f("memory.stat") {
                let ms = parse::flat_keyed(&ms);
                add(&mut v[4], ms.get("anon").map(|x| *x as f64));
                add(&mut v[5], ms.get("file").map(|x| *x as f64));
            }
            add(
                &mut v[6],
                f("memory.peak")
                    .and_then(|t| parse::single_u64(&t))
                    .map(|x| x as f64),
            );
            let io = f("io.stat").map(|t| parse::io_stat_totals(&t));
            add(&mut v[7], rate(c.rbytes.delta(io.map(|x| x.0)), 1.0));
            add(&mut v[8], rate(c.wbytes.delta(io.map(|x| x.1)), 1.0));
            max(
                &mut v[9],
                f("cpu.pressure").and_then(|t| parse::pressure_some_avg10(&t)),
            );
            max(
                &mut v[10],
                f("memory.pressure").and_then(|t| parse::pressure_some_avg10(&t)),
            );
            max(
                &mut v[11],
                f("io.pressure").and_then(|t| parse::pressure_some_avg10(&t)),
            );
        }
        self.counters.retain(|k, _| seen.contains(k));
        if alive > 0 {
            v[12] = Some(alive as f64);
        } else {
            // Vanished or not there yet: try again at the next tick.
            self.resolved_at = None;
        }
        CGROUP_METRICS
            .iter()
            .zip(v)
            .map(|(m, v)| (m.to_string(), v))
            .collect()
    }
}

/// Candidate cgroup directories of a container id (full or prefix).
fn container_dirs(roots: &[PathBuf], id: &str) -> Vec<PathBuf> {
    if id.is_empty() || id.contains('/') {
        return Vec::new();
    }
    let mut v = Vec::new();
    for r in roots {
        for pat in [
            format!("system.slice/docker-{id}*.scope"),
            format!("docker/{id}*"),
            format!("machine.slice/libpod-{id}*.scope"),
            format!("kubepods.slice/*/*/cri-containerd-{id}*.scope"),
        ] {
            glob_dirs(r, &pat, &mut v);
        }
    }
    // Prefer an exact dir over its `init` child when both exist.
    v
}

fn docker_inspect_id(name: &str) -> Option<String> {
    let out = std::process::Command::new("docker")
        .args(["inspect", "--format", "{{.Id}}", name])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let id = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !id.is_empty() && !id.contains('/')).then_some(id)
}

/// Appends every directory below `base` matching the `/`-separated glob.
fn glob_dirs(base: &Path, pattern: &str, out: &mut Vec<PathBuf>) {
    let mut parts = pattern.split('/').filter(|s| !s.is_empty());
    let Some(first) = parts.next() else {
        out.push(base.to_path_buf());
        return;
    };
    let rest: Vec<&str> = parts.collect();
    let rest = rest.join("/");
    if !first.contains(['*', '?']) {
        let p = base.join(first);
        if p.is_dir() {
            glob_dirs(&p, &rest, out);
        }
        return;
    }
    let Ok(rd) = std::fs::read_dir(base) else {
        return;
    };
    for e in rd.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Some(name) = e.file_name().to_str() {
            if parse::glob_match(first, name) {
                glob_dirs(&e.path(), &rest, out);
            }
        }
    }
}

// ---------------------------------------------------------------- processes

/// A snapshot of the process table: parent links and (when needed) command lines.
#[derive(Debug, Default)]
pub(crate) struct ProcTable {
    children: HashMap<u32, Vec<u32>>,
    cmdlines: Vec<(u32, String)>,
}

impl ProcTable {
    pub(crate) fn scan(with_cmdlines: bool) -> ProcTable {
        let mut t = ProcTable::default();
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return t;
        };
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Some(st) = read(&e.path().join("stat")).and_then(|s| parse::pid_stat(&s)) else {
                continue;
            };
            t.children.entry(st.ppid).or_default().push(pid);
            if with_cmdlines {
                if let Ok(b) = std::fs::read(e.path().join("cmdline")) {
                    let s: String = String::from_utf8_lossy(&b)
                        .trim_end_matches('\0')
                        .replace('\0', " ");
                    t.cmdlines.push((pid, s));
                }
            }
        }
        t
    }

    /// `roots` and all their descendants, each once.
    pub(crate) fn tree(&self, roots: &[u32]) -> Vec<u32> {
        let mut seen: HashSet<u32> = HashSet::new();
        let mut stack: Vec<u32> = roots.to_vec();
        let mut out = Vec::new();
        while let Some(p) = stack.pop() {
            if !seen.insert(p) {
                continue;
            }
            out.push(p);
            if let Some(c) = self.children.get(&p) {
                stack.extend(c);
            }
        }
        out.sort_unstable();
        out
    }

    /// Pids whose command line contains `pattern`, or matches it as a glob
    /// when it contains `*` or `?`. The sampling process itself is excluded
    /// (its own command line often names the targets).
    pub(crate) fn matching(&self, pattern: &str) -> Vec<u32> {
        let me = std::process::id();
        let glob = pattern.contains(['*', '?']);
        self.cmdlines
            .iter()
            .filter(|(pid, cmd)| {
                *pid != me
                    && !cmd.is_empty()
                    && if glob {
                        parse::glob_match(pattern, cmd)
                    } else {
                        cmd.contains(pattern)
                    }
            })
            .map(|(p, _)| *p)
            .collect()
    }
}

/// The pid a pid file names (its first line), if it can be read.
pub(crate) fn pid_file(path: &Path) -> Option<u32> {
    read(path)?.lines().next()?.trim().parse().ok()
}

#[derive(Debug, Clone)]
pub(crate) enum ProcSource {
    Pid(u32),
    PidFile(PathBuf),
    Pattern(String),
    Loader,
}

#[derive(Debug)]
struct PidCounters {
    starttime: u64,
    ticks: u64,
    io: Option<(u64, u64)>,
}

#[derive(Debug)]
pub(crate) struct ProcProbe {
    source: ProcSource,
    pids: Vec<u32>,
    state: HashMap<u32, PidCounters>,
    last: Option<Instant>,
    thread_ticks: Counter,
}

pub(crate) const PROC_METRICS: &[&str] = &[
    "cpu_cores",
    "rss_bytes",
    "anon_bytes",
    "read_bytes_per_s",
    "write_bytes_per_s",
    "processes",
];

impl ProcProbe {
    pub(crate) fn new(source: ProcSource) -> Self {
        let pids = match source {
            ProcSource::Pid(p) => vec![p],
            ProcSource::PidFile(ref f) => pid_file(f).into_iter().collect(),
            ProcSource::Loader => vec![std::process::id()],
            ProcSource::Pattern(_) => Vec::new(),
        };
        ProcProbe {
            source,
            pids,
            state: HashMap::new(),
            last: None,
            thread_ticks: Counter::default(),
        }
    }

    pub(crate) fn needs_cmdlines(&self) -> bool {
        matches!(self.source, ProcSource::Pattern(_))
    }

    /// Re-resolves the pid set from a fresh process table.
    pub(crate) fn resolve(&mut self, table: &ProcTable) {
        let roots = match &self.source {
            ProcSource::Pid(p) => vec![*p],
            ProcSource::PidFile(f) => pid_file(f).into_iter().collect(),
            ProcSource::Loader => vec![std::process::id()],
            ProcSource::Pattern(pat) => table.matching(pat),
        };
        self.pids = table.tree(&roots);
        // A root that is not in the table (vanished) is still tried, so that
        // the probe reports it as gone rather than silently empty.
        for r in roots {
            if !self.pids.contains(&r) {
                self.pids.push(r);
            }
        }
    }

    pub(crate) fn sample(&mut self, now: Instant) -> Metrics {
        let dt = self
            .last
            .map(|l| now.saturating_duration_since(l).as_secs_f64())
            .filter(|d| *d > 0.0);
        self.last = Some(now);
        let page = sys::page_size() as f64;
        let tck = sys::clk_tck();

        let (mut cpu, mut rss, mut anon, mut rd, mut wr) = (None, None, None, None, None);
        let mut alive = 0usize;
        let mut root_alive = true;
        let root = match &self.source {
            ProcSource::Pid(p) => Some(*p),
            ProcSource::PidFile(_) => self.pids.first().copied(),
            ProcSource::Loader => Some(std::process::id()),
            ProcSource::Pattern(_) => None,
        };
        let mut next_state = HashMap::with_capacity(self.pids.len());
        for &pid in &self.pids {
            let dir = PathBuf::from(format!("/proc/{pid}"));
            let Some(st) = read(&dir.join("stat")).and_then(|s| parse::pid_stat(&s)) else {
                if Some(pid) == root {
                    root_alive = false;
                }
                continue;
            };
            alive += 1;
            let io = read(&dir.join("io")).and_then(|s| parse::pid_io(&s));
            if let Some((res, shared)) = read(&dir.join("statm")).and_then(|s| parse::statm(&s)) {
                add(&mut rss, Some(res as f64 * page));
                add(&mut anon, Some(res.saturating_sub(shared) as f64 * page));
            }
            if let (Some(dt), Some(prev)) = (dt, self.state.get(&pid)) {
                if prev.starttime == st.starttime {
                    if st.cpu_ticks >= prev.ticks {
                        add(
                            &mut cpu,
                            Some((st.cpu_ticks - prev.ticks) as f64 / tck / dt),
                        );
                    }
                    if let (Some(a), Some(b)) = (io, prev.io) {
                        if a.0 >= b.0 && a.1 >= b.1 {
                            add(&mut rd, Some((a.0 - b.0) as f64 / dt));
                            add(&mut wr, Some((a.1 - b.1) as f64 / dt));
                        }
                    }
                }
            }
            next_state.insert(
                pid,
                PidCounters {
                    starttime: st.starttime,
                    ticks: st.cpu_ticks,
                    io,
                },
            );
        }
        self.state = next_state;
        let mut out: Metrics = if alive == 0 || !root_alive {
            self.state.clear();
            PROC_METRICS.iter().map(|m| (m.to_string(), None)).collect()
        } else {
            PROC_METRICS
                .iter()
                .zip([cpu, rss, anon, rd, wr, None])
                .map(|(m, v)| (m.to_string(), v))
                .collect()
        };
        out[5].1 = Some(if root_alive { alive as f64 } else { 0.0 });
        if matches!(self.source, ProcSource::Loader) {
            // CPU of the sampling thread itself (this function runs on it).
            let t = read(Path::new("/proc/thread-self/stat")).and_then(|s| parse::pid_stat(&s));
            let d = self.thread_ticks.delta(t.map(|t| t.cpu_ticks));
            out.push((
                "sampler_cpu_cores".to_string(),
                dt.and_then(|dt| d.map(|d| d as f64 / tck / dt)),
            ));
        }
        out
    }
}

// ---------------------------------------------------------------- host

#[derive(Debug, Default)]
pub(crate) struct HostProbe {
    last: Option<Instant>,
    cpu: Option<parse::CpuTicks>,
    cores: BTreeMap<u32, parse::CpuTicks>,
    whole_disks: HashSet<String>,
    disks_listed_at: Option<Instant>,
    disks: BTreeMap<String, (Counter, Counter)>,
    nets: BTreeMap<String, (Counter, Counter)>,
}

/// Whole block devices that stack on others (or live in RAM) and would count
/// the same bytes twice in the host total.
fn virtual_disk(name: &str) -> bool {
    ["loop", "ram", "zram", "dm-", "md", "sr"]
        .iter()
        .any(|p| name.starts_with(p))
}

impl HostProbe {
    pub(crate) fn sample(&mut self, now: Instant) -> Metrics {
        let dt = self
            .last
            .map(|l| now.saturating_duration_since(l).as_secs_f64())
            .filter(|d| *d > 0.0);
        self.last = Some(now);
        let tck = sys::clk_tck();
        let mut out: Metrics = Vec::with_capacity(32);

        // CPU
        let (agg, cores) = read(Path::new("/proc/stat"))
            .map(|t| parse::proc_stat(&t))
            .unwrap_or_default();
        let prev = std::mem::replace(&mut self.cpu, agg);
        let (busy, frac) = match (prev, agg, dt) {
            (Some(p), Some(c), Some(dt)) if c.busy >= p.busy && c.total > p.total => (
                Some((c.busy - p.busy) as f64 / tck / dt),
                Some((c.busy - p.busy) as f64 / (c.total - p.total) as f64),
            ),
            _ => (None, None),
        };
        out.push(("cpu_cores".into(), busy));
        out.push(("cpu_busy_frac".into(), frac));
        // CPU time the hypervisor took from this machine: a VOID cell's schedule lag
        // may be the host's, not the loader's (a descheduled vCPU runs no pacer).
        let steal = match (prev, agg, dt) {
            (Some(p), Some(c), Some(_)) if c.steal >= p.steal && c.total > p.total => {
                Some((c.steal - p.steal) as f64 / (c.total - p.total) as f64)
            }
            _ => None,
        };
        out.push(("cpu_steal_frac".into(), steal));
        out.push((
            "cpu_count".into(),
            (!cores.is_empty()).then_some(cores.len() as f64),
        ));
        for (id, c) in &cores {
            let v = self.cores.insert(*id, *c).and_then(|p| {
                (c.busy >= p.busy && c.total > p.total)
                    .then(|| (c.busy - p.busy) as f64 / (c.total - p.total) as f64)
            });
            out.push((
                format!("cpu.core{id}.busy_frac"),
                v.filter(|_| dt.is_some()),
            ));
        }

        // Memory and load
        let mem = read(Path::new("/proc/meminfo")).map(|t| {
            let m = parse::colon_keyed(&t);
            (m.get("MemTotal").copied(), m.get("MemAvailable").copied())
        });
        let (total, avail) = mem.unwrap_or((None, None));
        out.push((
            "memory_used_bytes".into(),
            total.zip(avail).map(|(t, a)| t.saturating_sub(a) as f64),
        ));
        out.push(("memory_total_bytes".into(), total.map(|t| t as f64)));
        out.push((
            "load1".into(),
            read(Path::new("/proc/loadavg"))
                .and_then(|t| t.split_whitespace().next().and_then(|s| s.parse().ok())),
        ));

        // Disks: whole devices only (those listed in /sys/block).
        if self
            .disks_listed_at
            .is_none_or(|t| now.saturating_duration_since(t) >= Duration::from_secs(10))
        {
            self.whole_disks = std::fs::read_dir("/sys/block")
                .map(|rd| {
                    rd.flatten()
                        .filter_map(|e| e.file_name().to_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            self.disks_listed_at = Some(now);
        }
        let mut cur: HashMap<String, (u64, u64)> = HashMap::new();
        for (name, rs, ws) in read(Path::new("/proc/diskstats"))
            .map(|t| parse::diskstats(&t))
            .unwrap_or_default()
        {
            if self.whole_disks.contains(&name)
                && (rs > 0 || ws > 0 || self.disks.contains_key(&name))
            {
                self.disks.entry(name.clone()).or_default();
                cur.insert(name, (rs * 512, ws * 512));
            }
        }
        let (mut tr, mut tw) = (None, None);
        let mut per_disk = Vec::new();
        for (name, (cr, cw)) in self.disks.iter_mut() {
            let c = cur.get(name);
            let r = cr
                .delta(c.map(|c| c.0))
                .and_then(|d| dt.map(|dt| d as f64 / dt));
            let w = cw
                .delta(c.map(|c| c.1))
                .and_then(|d| dt.map(|dt| d as f64 / dt));
            if !virtual_disk(name) {
                add(&mut tr, r);
                add(&mut tw, w);
            }
            let n = crate::samples::sanitize(name);
            per_disk.push((format!("disk.{n}.read_bytes_per_s"), r));
            per_disk.push((format!("disk.{n}.write_bytes_per_s"), w));
        }
        out.push(("disk_read_bytes_per_s".into(), tr));
        out.push(("disk_write_bytes_per_s".into(), tw));
        out.extend(per_disk);

        // Network: every interface that has carried traffic, loopback included.
        let mut cur: HashMap<String, (u64, u64)> = HashMap::new();
        for (name, rx, tx) in read(Path::new("/proc/net/dev"))
            .map(|t| parse::net_dev(&t))
            .unwrap_or_default()
        {
            if rx > 0 || tx > 0 || self.nets.contains_key(&name) {
                self.nets.entry(name.clone()).or_default();
                cur.insert(name, (rx, tx));
            }
        }
        for (name, (cr, ct)) in self.nets.iter_mut() {
            let c = cur.get(name);
            let r = cr
                .delta(c.map(|c| c.0))
                .and_then(|d| dt.map(|dt| d as f64 / dt));
            let t = ct
                .delta(c.map(|c| c.1))
                .and_then(|d| dt.map(|dt| d as f64 / dt));
            let n = crate::samples::sanitize(name);
            out.push((format!("net.{n}.rx_bytes_per_s"), r));
            out.push((format!("net.{n}.tx_bytes_per_s"), t));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write_cg(dir: &Path, usage: u64, thr: u64, anon: u64, file: u64, wbytes: u64) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("cgroup.procs"), "").unwrap();
        fs::write(
            dir.join("cpu.stat"),
            format!("usage_usec {usage}\nuser_usec 1\nsystem_usec 1\nnr_periods 100\nnr_throttled {thr}\nthrottled_usec {}\n", thr * 1000),
        )
        .unwrap();
        fs::write(dir.join("memory.current"), format!("{}\n", anon + file)).unwrap();
        fs::write(
            dir.join("memory.stat"),
            format!("anon {anon}\nfile {file}\nkernel 0\n"),
        )
        .unwrap();
        fs::write(dir.join("memory.peak"), "999999999\n").unwrap();
        fs::write(
            dir.join("io.stat"),
            format!("8:0 rbytes=100 wbytes={wbytes} rios=1 wios=1 dbytes=0 dios=0\n8:16 rbytes=0 wbytes=1 rios=0 wios=1 dbytes=0 dios=0\n"),
        )
        .unwrap();
        fs::write(dir.join("cpu.pressure"), "some avg10=2.50 avg60=1.00 avg300=0.10 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").unwrap();
        fs::write(
            dir.join("memory.pressure"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
    }

    fn get(m: &Metrics, k: &str) -> Option<f64> {
        m.iter()
            .find(|(n, _)| n == k)
            .unwrap_or_else(|| panic!("no {k}"))
            .1
    }

    #[test]
    fn counter_never_goes_negative() {
        let mut c = Counter::default();
        assert_eq!(c.delta(Some(10)), None);
        assert_eq!(c.delta(Some(15)), Some(5));
        assert_eq!(c.delta(Some(3)), None); // reset
        assert_eq!(c.delta(Some(4)), Some(1));
        assert_eq!(c.delta(None), None);
        assert_eq!(c.delta(Some(9)), None);
    }

    #[test]
    fn cgroup_fixture_rates_levels_and_vanishing() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("system.slice/docker-abc123.scope");
        write_cg(&cg, 1_000_000, 1, 100 << 20, 50 << 20, 4096);
        let mut p = CgroupProbe::new(CgroupSource::Path(cg.clone()), vec![]);
        let t0 = Instant::now();
        let m = p.sample(t0);
        assert_eq!(get(&m, "cpu_cores"), None, "baseline has no rate");
        assert_eq!(get(&m, "memory_current_bytes"), Some((150u64 << 20) as f64));
        assert_eq!(get(&m, "anon_bytes"), Some((100u64 << 20) as f64));
        assert_eq!(get(&m, "file_bytes"), Some((50u64 << 20) as f64));
        assert_eq!(get(&m, "memory_peak_bytes"), Some(999999999.0));
        assert_eq!(get(&m, "cpu_pressure_some_avg10"), Some(2.5));
        assert_eq!(get(&m, "io_pressure_some_avg10"), None, "file absent");
        assert_eq!(get(&m, "cgroups"), Some(1.0));

        // 2 s later: 3 s of CPU => 1.5 cores; 4 throttles => 2/s; 2 MiB written => 1 MiB/s.
        write_cg(&cg, 4_000_000, 5, 100 << 20, 50 << 20, 4096 + (2 << 20));
        let m = p.sample(t0 + Duration::from_secs(2));
        assert!((get(&m, "cpu_cores").unwrap() - 1.5).abs() < 1e-9);
        assert!((get(&m, "cpu_throttled_periods_per_s").unwrap() - 2.0).abs() < 1e-9);
        assert!((get(&m, "cpu_throttled_s_per_s").unwrap() - 0.002).abs() < 1e-9);
        assert!((get(&m, "write_bytes_per_s").unwrap() - (1u64 << 20) as f64).abs() < 1e-6);
        assert_eq!(get(&m, "read_bytes_per_s"), Some(0.0));

        // Counter reset (cgroup recreated under the same path): empty, not negative.
        write_cg(&cg, 10, 0, 1, 1, 0);
        let m = p.sample(t0 + Duration::from_secs(3));
        assert_eq!(get(&m, "cpu_cores"), None);
        assert_eq!(get(&m, "write_bytes_per_s"), None);

        // Vanished: every field empty, no panic.
        fs::remove_dir_all(&cg).unwrap();
        let m = p.sample(t0 + Duration::from_secs(4));
        assert_eq!(m.len(), CGROUP_METRICS.len());
        assert!(m.iter().all(|(_, v)| v.is_none()), "{m:?}");
    }

    #[test]
    fn cgroup_container_and_glob_resolution() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        write_cg(
            &root.join("system.slice/docker-abc123def.scope"),
            1,
            0,
            1,
            1,
            0,
        );
        write_cg(&root.join("docker/fff999"), 1, 0, 1, 1, 0);
        write_cg(&root.join("docker/fff999/init"), 1, 0, 1, 1, 0);
        let mut p = CgroupProbe::new(CgroupSource::Container("abc123".into()), vec![root.clone()]);
        p.sample(Instant::now());
        assert_eq!(
            p.paths(),
            [root.join("system.slice/docker-abc123def.scope")]
        );
        let mut p = CgroupProbe::new(CgroupSource::Container("fff999".into()), vec![root.clone()]);
        p.sample(Instant::now());
        assert_eq!(p.paths(), [root.join("docker/fff999")]);
        // A glob matching a cgroup and its child counts the subtree once.
        let mut p = CgroupProbe::new(
            CgroupSource::Glob("docker/**".replace("**", "*")),
            vec![root.clone()],
        );
        let m = p.sample(Instant::now());
        assert_eq!(p.paths().len(), 1);
        assert_eq!(get(&m, "cgroups"), Some(1.0));
        let mut p = CgroupProbe::new(CgroupSource::Glob("*/*".into()), vec![root.clone()]);
        let m = p.sample(Instant::now());
        assert_eq!(get(&m, "cgroups"), Some(2.0));
        assert_eq!(get(&m, "memory_current_bytes"), Some(4.0));
        let mut p = CgroupProbe::new(CgroupSource::Container("nope-not-there".into()), vec![root]);
        let m = p.sample(Instant::now());
        assert!(m.iter().all(|(_, v)| v.is_none()));
    }

    #[test]
    fn own_process_and_host_are_readable() {
        let mut p = ProcProbe::new(ProcSource::Loader);
        p.resolve(&ProcTable::scan(false));
        let t0 = Instant::now();
        p.sample(t0);
        let m = p.sample(t0 + Duration::from_millis(100));
        assert!(get(&m, "rss_bytes").unwrap() > 1e6);
        assert!(get(&m, "cpu_cores").unwrap() >= 0.0);
        assert!(get(&m, "sampler_cpu_cores").unwrap() >= 0.0);
        assert!(get(&m, "processes").unwrap() >= 1.0);

        let mut h = HostProbe::default();
        h.sample(t0);
        std::thread::sleep(Duration::from_millis(50));
        let m = h.sample(Instant::now());
        assert!(get(&m, "memory_used_bytes").unwrap() > 0.0);
        assert!(get(&m, "cpu_cores").unwrap() >= 0.0);
        assert!(get(&m, "cpu_count").unwrap() >= 1.0);
        assert!(
            m.iter().any(|(n, _)| n == "net.lo.rx_bytes_per_s")
                || !Path::new("/sys/class/net/lo").exists()
        );
        assert!(m.iter().all(|(_, v)| v.is_none_or(|v| v >= 0.0)));

        let mut gone = ProcProbe::new(ProcSource::Pid(u32::MAX - 7));
        let m = gone.sample(t0);
        assert!(m[..5].iter().all(|(_, v)| v.is_none()));
        assert_eq!(get(&m, "processes"), Some(0.0));
    }
}
