//! Live sampling of real processes (and of a cgroup where the kernel lets us
//! create one).

#[path = "../../adapters/tests/support/services.rs"]
#[allow(dead_code)]
mod services;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sampler::{SampleSet, SamplerConfig, TargetSpec};

/// Kills and reaps its children on drop, even when a test panics.
struct Kids(Vec<Child>);
impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // Descendants first: a killed `sh` leaves its background job running.
            for d in children_of(c.id()) {
                let _ = Command::new("kill").arg("-9").arg(d.to_string()).status();
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// `sh` whose background child busy-loops: one core, in a two-process tree.
fn spawn_burner_tree() -> Child {
    Command::new("sh")
        .args(["-c", "sh -c 'while :; do :; done' & wait"])
        .spawn()
        .expect("spawn sh")
}

/// python3 that allocates and touches 200 MiB, then sleeps. `marker` ends up
/// in its command line so a `proc:` pattern can find it.
fn spawn_mem(marker: &str) -> Child {
    let script = format!(
        "# {marker}\nimport sys, time\nb = bytearray(b'\\x01') * (200 << 20)\nprint('ready', flush=True)\ntime.sleep(300)\n"
    );
    let mut c = Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    let mut line = String::new();
    BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    c
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(s) = std::fs::read_to_string(e.path().join("stat")) {
            let rest = &s[s.rfind(')').unwrap() + 1..];
            if rest.split_whitespace().nth(1) == Some(&pid.to_string()) {
                v.push(p);
            }
        }
    }
    v
}

/// Independent ground truth: CPU time from /proc/<pid>/schedstat (ns on
/// CPU), summed over a process and its children.
fn tree_cpu_ns(pid: u32) -> u64 {
    std::iter::once(pid)
        .chain(children_of(pid))
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn values(set: &SampleSet, target: &str, metric: &str) -> Vec<f64> {
    set.series(target, metric)
        .into_iter()
        .filter_map(|(_, v)| v)
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty());
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A cgroup v2 directory this test may create, and whether it mounted a
/// hierarchy itself. `Err` says why not.
struct TestCgroup {
    dir: PathBuf,
    mounted: Option<tempfile::TempDir>,
}

impl TestCgroup {
    fn create() -> Result<TestCgroup, String> {
        let mounts = std::fs::read_to_string("/proc/mounts").map_err(|e| e.to_string())?;
        let mut roots: Vec<PathBuf> = mounts
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
            })
            .collect();
        let mut mounted = None;
        if roots.is_empty() {
            let t = tempfile::tempdir().map_err(|e| e.to_string())?;
            let ok = Command::new("mount")
                .args(["-t", "cgroup2", "none"])
                .arg(t.path())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err("no cgroup2 mounted and mounting one failed (not root?)".into());
            }
            roots.push(t.path().to_path_buf());
            mounted = Some(t);
        }
        let mut why = String::new();
        for r in roots {
            let dir = r.join(format!("crossbench-sampler-test-{}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(TestCgroup { dir, mounted }),
                Err(e) => why = format!("mkdir {}: {e}", dir.display()),
            }
        }
        if let Some(t) = &mounted {
            let _ = Command::new("umount").arg(t.path()).status();
        }
        Err(why)
    }

    fn add(&self, pid: u32) -> Result<(), String> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .map_err(|e| format!("move {pid} into {}: {e}", self.dir.display()))
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // The processes are killed first; wait for the cgroup to empty.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(t) = &self.mounted {
            let _ = Command::new("umount").arg(t.path()).status();
        }
    }
}

/// The machine mounts a cgroup v2 hierarchy (this project's CI machines mount it at
/// `/sys/fs/cgroup/unified`, beside v1), or its kernel can mount one, which
/// [`TestCgroup::create`] then does.
fn has_cgroup2() -> bool {
    let mounted = std::fs::read_to_string("/proc/mounts").is_ok_and(|m| {
        m.lines()
            .any(|l| l.split_whitespace().nth(2) == Some("cgroup2"))
    });
    let kernel = std::fs::read_to_string("/proc/filesystems").is_ok_and(|f| {
        f.lines()
            .any(|l| l.split_whitespace().last() == Some("cgroup2"))
    });
    mounted || kernel
}

/// The cgroup part cannot run: fail under `CI` on a machine with cgroup v2 (the
/// test command runs as root there, so it must work), skip with a message otherwise.
fn cgroup_unavailable(why: &str) {
    if std::env::var_os("CI").is_some() && has_cgroup2() {
        panic!("cgroup part: {why}, on a machine with cgroup v2 and CI set");
    }
    services::skipped(&format!("cgroup part: {why}"));
}

fn no_negatives(set: &SampleSet) {
    for r in &set.rows {
        if let Some(v) = r.value {
            assert!(v >= 0.0 && v.is_finite(), "negative or non-finite: {r:?}");
        }
    }
}

#[test]
fn burner_and_allocation_by_pid_pattern_and_cgroup() {
    let marker = format!("crossbench-mem-marker-{}", std::process::id());
    let kids = Kids(vec![spawn_burner_tree(), spawn_mem(&marker)]);
    let burner = kids.0[0].id();
    let mem = kids.0[1].id();
    // Let the background burner start.
    std::thread::sleep(Duration::from_millis(200));

    let cg = match TestCgroup::create() {
        Ok(cg) => {
            let mut moved = cg.add(burner);
            for c in children_of(burner) {
                moved = moved.and_then(|_| cg.add(c));
            }
            moved = moved.and_then(|_| cg.add(mem));
            match moved {
                Ok(()) => Some(cg),
                Err(e) => {
                    cgroup_unavailable(&e);
                    None
                }
            }
        }
        Err(e) => {
            cgroup_unavailable(&format!("cannot create a cgroup v2 here: {e}"));
            None
        }
    };

    let mut targets = vec![
        ("burner".to_string(), TargetSpec::Pid(burner)),
        ("mem".to_string(), TargetSpec::Pid(mem)),
        (
            "mem-pattern".to_string(),
            TargetSpec::ProcessPattern(marker.clone()),
        ),
    ];
    if let Some(cg) = &cg {
        targets.push(("cg".to_string(), TargetSpec::CgroupPath(cg.dir.clone())));
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("samples.csv");
    let (t0, cpu0) = (std::time::Instant::now(), tree_cpu_ns(burner));
    let h = sampler::start(SamplerConfig::new(targets), &out).unwrap();
    // 5.3 s: at least 3 rates after the baseline even when a loaded machine makes a
    // tick late (4.3 s left one tick of slack).
    std::thread::sleep(Duration::from_millis(5_300));
    let set = h.stop().unwrap();
    let truth = (tree_cpu_ns(burner) - cpu0) as f64 / 1e9 / t0.elapsed().as_secs_f64();
    drop(kids);

    // The file holds exactly what was returned.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.starts_with("# crossbench samples v1\nunix_ms,elapsed_s,target,kind,metric,value\n")
    );
    let from_file = sampler::read_samples(&out).unwrap();
    assert_eq!(from_file.rows.len(), set.rows.len());
    assert_eq!(
        from_file.targets(),
        vec!["burner", "mem", "mem-pattern"]
            .into_iter()
            .chain(cg.as_ref().map(|_| "cg"))
            .chain(["host", "loader"])
            .collect::<Vec<_>>()
    );
    no_negatives(&set);

    // 5-6 ticks: a baseline with empty rates, then 4-5 rates.
    let cores = values(&set, "burner", "cpu_cores");
    assert!(cores.len() >= 3, "{cores:?}");
    let c = median(cores.clone());
    // The tolerance is measured in this run: the former fixed 0.15 core plus how far
    // this run's own samples spread (a machine loaded by other work makes the
    // burner's share move between ticks, and the median then moves with it).
    let spread = cores.iter().cloned().fold(f64::MIN, f64::max)
        - cores.iter().cloned().fold(f64::MAX, f64::min);
    let tol = 0.15 + spread;
    println!("burner: sampled median {c:.3} cores, schedstat ground truth {truth:.3} cores, tolerance {tol:.3}");
    // The sampler must agree with the kernel's own accounting ...
    assert!(
        (c - truth).abs() <= tol,
        "burner tree cores {c} vs truth {truth}, tolerance {tol:.3} measured in this run ({cores:?})"
    );
    // ... and, unless other work on this machine starved the burner, be ~1 core.
    if truth >= 0.7 {
        assert!((c - 1.0).abs() <= 0.3, "burner tree cores {c} ({cores:?})");
    } else {
        println!("note: machine contended (burner got {truth:.2} cores); 1.0 +- 0.3 check relaxed to agreement with schedstat");
    }
    assert_eq!(median(values(&set, "burner", "processes")), 2.0);

    for t in ["mem", "mem-pattern"] {
        let rss = median(values(&set, t, "rss_bytes")) / MIB;
        assert!((rss - 200.0).abs() <= 40.0, "{t} rss {rss} MiB");
        let anon = median(values(&set, t, "anon_bytes")) / MIB;
        assert!((anon - 200.0).abs() <= 40.0, "{t} anon {anon} MiB");
        let cpu = median(values(&set, t, "cpu_cores"));
        assert!(cpu < 0.2, "{t} sleeping but {cpu} cores");
    }

    if cg.is_some() {
        let cores = values(&set, "cg", "cpu_cores");
        let c = median(cores.clone());
        let spread = cores.iter().cloned().fold(f64::MIN, f64::max)
            - cores.iter().cloned().fold(f64::MAX, f64::min);
        let tol = 0.15 + spread;
        println!("cgroup: sampled median {c:.3} cores, tolerance {tol:.3}");
        assert!(
            (c - truth).abs() <= tol,
            "cgroup cores {c} vs truth {truth}, tolerance {tol:.3} measured in this run ({cores:?})"
        );
        let mem_cur = values(&set, "cg", "memory_current_bytes");
        if mem_cur.is_empty() {
            println!(
                "note: memory controller not enabled in the test cgroup; memory checks skipped"
            );
        } else {
            let anon = median(values(&set, "cg", "anon_bytes")) / MIB;
            assert!((anon - 200.0).abs() <= 40.0, "cgroup anon {anon} MiB");
        }
    }

    // Host and loader are always there.
    assert!(median(values(&set, "host", "cpu_cores")) >= 0.7);
    assert!(!values(&set, "host", "memory_used_bytes").is_empty());
    assert!(!values(&set, "loader", "rss_bytes").is_empty());
    let own = median(values(&set, "loader", "sampler_cpu_cores"));
    assert!(own < 0.1, "sampler thread uses {own} cores");
}

#[test]
fn vanished_target_gives_empty_fields() {
    let kids = Kids(vec![Command::new("sleep").arg("30").spawn().unwrap()]);
    let pid = kids.0[0].id();
    let cfg = SamplerConfig {
        targets: vec![("sleeper".into(), TargetSpec::Pid(pid))],
        interval: Duration::from_millis(200),
        ..Default::default()
    };
    let tmp = tempfile::tempdir().unwrap();
    let h = sampler::start(cfg, &tmp.path().join("s.csv")).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    drop(kids); // kill + reap
    std::thread::sleep(Duration::from_millis(700));
    let set = h.stop().unwrap();
    no_negatives(&set);
    let rss = set.series("sleeper", "rss_bytes");
    assert!(rss.first().unwrap().1.is_some(), "{rss:?}");
    assert!(rss.last().unwrap().1.is_none(), "{rss:?}");
    let cpu = set.series("sleeper", "cpu_cores");
    assert!(cpu.last().unwrap().1.is_none());
    let procs = set.series("sleeper", "processes");
    assert_eq!(procs.last().unwrap().1, Some(0.0));
}

#[test]
fn bad_configs_are_clear_errors_and_never_leak_passwords() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s.csv");
    let dup = SamplerConfig::new(vec![
        ("x".into(), TargetSpec::Pid(1)),
        ("x".into(), TargetSpec::Pid(2)),
    ]);
    let e = sampler::start(dup, &out).unwrap_err().to_string();
    assert!(e.contains("duplicate") && e.contains("'x'"), "{e}");

    let secret = "pw-very-secret-42";
    let spec: TargetSpec = format!("postgres:postgres://u:{secret}@127.0.0.1:1/db")
        .parse()
        .unwrap();
    let cfg = SamplerConfig {
        targets: vec![(String::new(), spec)],
        interval: Duration::from_millis(200),
        ..Default::default()
    };
    match sampler::start(cfg, &out) {
        Err(e) => {
            // Built without feature `postgres`.
            let e = e.to_string();
            assert!(e.contains("postgres") && !e.contains(secret), "{e}");
        }
        Ok(h) => {
            std::thread::sleep(Duration::from_millis(500));
            let set = h.stop().unwrap();
            let text = std::fs::read_to_string(&out).unwrap();
            assert!(!text.contains(secret));
            assert!(text.contains("postgres://u:***@127.0.0.1:1/db"));
            // Unreachable server: empty values, no crash.
            assert!(set
                .rows
                .iter()
                .filter(|r| r.kind == sampler::TargetKind::Postgres)
                .all(|r| r.value.is_none()));
        }
    }
    assert!(!Path::new(&out).exists() || !std::fs::read_to_string(&out).unwrap().contains(secret));
}
