//! Resource budgets (the scenario's `resources:` section, issue 42), through the real
//! binary on the control broker: a victim process of the test's own (a shell busy
//! loop) budgeted to CPU 1 and the loader to CPU 0. What is checked is read from
//! `/proc/<pid>/task/*/status` (`Cpus_allowed_list`) and `/proc/<pid>/cgroup` while the
//! cell runs as a child process, not from what was asked; after the cell (ended,
//! SIGINT, SIGTERM, a second SIGINT) the victim's affinity and cgroups are as before.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A process of the test's own: a shell busy loop, killed when dropped.
struct Victim(Child);

impl Victim {
    fn start() -> Victim {
        Victim(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Each thread's `Cpus_allowed_list` of process `pid` (empty when it is gone).
fn allowed(pid: u32) -> Threads {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let st = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        if let Some(l) = st.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
            out.push((
                e.file_name().to_string_lossy().to_string(),
                l["Cpus_allowed_list:".len()..].trim().to_string(),
            ));
        }
    }
    out.sort();
    out
}

/// `root` and its descendants now (from each process's parent in `/proc/<pid>/stat`).
fn tree(root: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // The field after the command's closing parenthesis: state, then ppid.
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        {
            parent.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out.sort_unstable();
    out
}

/// Each thread of a process and its `Cpus_allowed_list`.
type Threads = Vec<(String, String)>;

/// Every thread of every process of `root`'s tree, with its CPU list and its
/// process's cgroups.
fn tree_state(root: u32) -> Vec<(u32, Threads, String)> {
    tree(root)
        .into_iter()
        .map(|p| (p, allowed(p), cgroups(p)))
        .filter(|(_, a, _)| !a.is_empty())
        .collect()
}

/// `/proc/<pid>/cgroup`: the process's cgroup in every hierarchy.
fn cgroups(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

/// The machine has the two CPUs these tests split (else the test is skipped, or
/// fails under CI: the test machines have them).
fn two_cpus() -> bool {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let ok = online.trim() != "0" && !online.trim().is_empty();
    if !ok {
        support::unavailable(
            &format!(
                "one CPU online ({:?}): a budget of CPU 0 and CPU 1 needs two",
                online.trim()
            ),
            "run on a machine with two CPUs or more",
        );
    }
    ok
}

/// A smoke cell through the binary, `-q`, into `out`, with `sets`.
fn spawn(out: &Path, duration: &str, sets: &[String]) -> Child {
    spawn_scenario("smoke.yaml", out, duration, sets)
}

/// [`spawn`] of another scenario.
fn spawn_scenario(scenario: &str, out: &Path, duration: &str, sets: &[String]) -> Child {
    let mut c = support::binary();
    c.arg("run").arg(support::scenario(scenario));
    let mut all: Vec<String> = support::RELAX_VOID.iter().map(|s| s.to_string()).collect();
    all.push(format!("duration={duration}"));
    all.push("warmup=1s".into());
    all.extend(sets.iter().cloned());
    for s in &all {
        c.args(["--set", s]);
    }
    c.args(["--interrupt-drain", "5s", "-q", "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The budget sets: the loader on CPU 0, the victim on CPU 1, and `extra`.
fn budget(victim: u32, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        "resources.loader.cpus=\"0\"".to_string(),
        format!("resources.system.targets=[\"pid:{victim}\"]"),
        "resources.system.cpus=\"1\"".to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// What was read while the cell ran: each reading of the victim's and the loader's
/// threads' CPU lists in the rated window, and the victim's cgroups.
#[derive(Default)]
struct Seen {
    victim: Vec<Vec<(String, String)>>,
    loader: Vec<Vec<(String, String)>>,
    victim_cgroups: Vec<String>,
}

/// Poll the victim's and the child's threads every 50 ms from the rated window's
/// start until `until` (or the child exits).
fn watch(child: &mut Child, out: &Path, victim: Option<u32>, until: Duration) -> Seen {
    support::wait_rated(out);
    let mut seen = Seen::default();
    let t0 = Instant::now();
    while t0.elapsed() < until && child.try_wait().unwrap().is_none() {
        if let Some(v) = victim {
            seen.victim.push(allowed(v));
            seen.victim_cgroups.push(cgroups(v));
        }
        let l = allowed(child.id());
        if !l.is_empty() {
            seen.loader.push(l);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

/// Every reading's every thread on exactly `cpus`, and at least `min` readings.
fn assert_only_on(readings: &[Vec<(String, String)>], cpus: &str, min: usize, who: &str) {
    assert!(
        readings.len() >= min,
        "{who}: {} readings during the cell (at least {min} expected)",
        readings.len()
    );
    for r in readings {
        assert!(!r.is_empty(), "{who}: no thread read");
        for (tid, list) in r {
            assert_eq!(
                list, cpus,
                "{who}: thread {tid} may run on CPUs {list} during the cell, not only on {cpus} (all: {r:?})"
            );
        }
    }
}

fn output(child: Child) -> (i32, String) {
    let o = child.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn resources(r: &Value) -> &Value {
    &r["resources"]
}

fn enforced<'a>(r: &'a Value, side: &str, what: &str) -> &'a Value {
    resources(r)["enforced"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["side"] == side && e["what"] == what)
        .unwrap_or_else(|| panic!("no {side} {what} in {}", resources(r)))
}

#[test]
fn the_victim_runs_only_on_cpu_1_and_the_loader_on_cpu_0_and_both_are_restored() {
    if !two_cpus() {
        return;
    }
    let victim = Victim::start();
    let before = (allowed(victim.pid()), cgroups(victim.pid()));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut child = spawn(&out, "5s", &budget(victim.pid(), &[]));
    // Inside the rated window (the budget is restored when the cell ends, before
    // the process exits).
    let seen = watch(&mut child, &out, Some(victim.pid()), Duration::from_secs(3));
    let (code, text) = output(child);
    assert_eq!(code, 0, "{text}");
    assert_only_on(&seen.victim, "1", 20, "the victim");
    assert_only_on(&seen.loader, "0", 20, "the loader");
    let r = support::result(&out);
    support::assert_clean_pass(&r);
    assert_eq!(resources(&r)["schema"], 1);
    assert_eq!(resources(&r)["label"], "loader cpus 0 | system cpus 1");
    let sys = enforced(&r, "system", "affinity");
    assert_eq!(sys["ok"], true, "{sys}");
    assert!(
        sys["how"]
            .as_str()
            .unwrap()
            .starts_with("affinity cpus 1 on 1 threads of 1 processes"),
        "{sys}"
    );
    assert_eq!(enforced(&r, "loader", "affinity")["ok"], true);
    // The victim's use, read from its own samples: a busy loop, about one core of
    // the one granted.
    let usage = resources(&r)["use"].as_array().unwrap();
    let sys = usage.iter().find(|u| u["side"] == "system").unwrap();
    assert_eq!(sys["cores_granted"], 1.0);
    let used = sys["cores_mean"].as_f64().unwrap();
    assert!((0.5..1.1).contains(&used), "{sys}");
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert!(
        samples.contains(",budget-system-0,process,budget_cores,1\n"),
        "the victim's budget in its per-second rows"
    );
    let inv = std::fs::read_to_string(out.join("invocation.txt")).unwrap();
    assert!(
        inv.contains("resources: loader cpus 0 | system cpus 1"),
        "{inv}"
    );
    // After the cell: as before.
    assert_eq!((allowed(victim.pid()), cgroups(victim.pid())), before);
}

#[test]
fn without_a_section_the_record_says_no_budget_and_nothing_is_pinned() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut child = spawn(&out, "2s", &[]);
    let seen = watch(&mut child, &out, None, Duration::from_secs(60));
    let (code, text) = output(child);
    assert_eq!(code, 0, "{text}");
    let all = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mine = allowed(std::process::id());
    assert_only_on(&seen.loader, &mine[0].1, 5, "the unbudgeted loader");
    let r = support::result(&out);
    assert_eq!(resources(&r)["label"], "no budget", "{}", all.trim());
    assert_eq!(resources(&r)["asked"], Value::Null);
    assert_eq!(resources(&r)["enforced"], serde_json::json!([]));
}

#[test]
fn the_loader_alone_budgeted_runs_only_on_its_cpu() {
    if !two_cpus() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut child = spawn(&out, "5s", &["resources.loader.cpus=\"1\"".to_string()]);
    let pid = child.id();
    let seen = watch(&mut child, &out, None, Duration::from_secs(3));
    let (code, text) = output(child);
    assert_eq!(code, 0, "{text}");
    // Every thread of the loader, the runtime's workers, the pacer's and the
    // sampler's included (several threads, not the main one alone).
    assert_only_on(&seen.loader, "1", 20, &format!("the loader (pid {pid})"));
    assert!(
        seen.loader.iter().map(Vec::len).max().unwrap() >= 3,
        "{:?}",
        seen.loader.last()
    );
    // Every second's samples carry the loader's budget beside its use.
    let samples = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    let budget_rows = samples
        .lines()
        .filter(|l| l.ends_with(",loader,loader,budget_cores,1"))
        .count();
    let use_rows = samples
        .lines()
        .filter(|l| l.contains(",loader,loader,cpu_cores,"))
        .count();
    assert!(
        budget_rows >= 5 && budget_rows == use_rows,
        "{budget_rows} budget rows, {use_rows} cpu rows"
    );
    let r = support::result(&out);
    assert_eq!(resources(&r)["label"], "loader cpus 1 | system unbudgeted");
    // The machine is named by its CPUs, not by the loader's narrowed set: a budgeted
    // cell and an unbudgeted one on this machine name the same machine.
    let online = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(
        r["host"]["cores"], online,
        "host.cores under a loader budget"
    );
    let e = enforced(&r, "loader", "affinity");
    assert_eq!(e["ok"], true, "{e}");
    let usage = resources(&r)["use"].as_array().unwrap();
    let loader = usage.iter().find(|u| u["side"] == "loader").unwrap();
    assert_eq!(loader["cores_granted"], 1.0);
    assert!(loader["cores_mean"].as_f64().unwrap() > 0.0, "{loader}");
}

/// Start a 30 s budgeted cell, check the victim pinned in the rated window, send
/// `sig` (`times` times, 20 ms apart), and check the exit and the victim restored.
fn interrupted(sig: i32, times: usize, code: i32) -> (Value, String) {
    let victim = Victim::start();
    let before = (allowed(victim.pid()), cgroups(victim.pid()));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut child = spawn(&out, "30s", &budget(victim.pid(), &[]));
    let seen = watch(&mut child, &out, Some(victim.pid()), Duration::from_secs(2));
    assert_only_on(&seen.victim, "1", 10, "the victim");
    for i in 0..times {
        if i > 0 {
            // Before the short drain of the control broker ends.
            std::thread::sleep(Duration::from_millis(20));
        }
        support::signal(&child, sig);
    }
    let (got, text) = output(child);
    assert_eq!(got, code, "{text}");
    assert_eq!(
        (allowed(victim.pid()), cgroups(victim.pid())),
        before,
        "the victim's affinity and cgroups after the signal"
    );
    let r: Value = std::fs::read_to_string(out.join("result.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (r, text)
}

#[test]
fn a_sigint_mid_cell_restores_the_victim() {
    if !two_cpus() {
        return;
    }
    let (r, _) = interrupted(2, 1, 130);
    assert_eq!(r["outcome"], "INTERRUPTED");
    let restored = resources(&r)["restored"].to_string();
    assert!(
        restored.contains("threads given their masks back"),
        "{restored}"
    );
}

#[test]
fn a_sigterm_mid_cell_restores_the_victim() {
    if !two_cpus() {
        return;
    }
    let (r, _) = interrupted(15, 1, 143);
    assert_eq!(r["outcome"], "INTERRUPTED");
}

#[test]
fn a_second_sigint_exits_at_once_and_still_restores_the_victim() {
    if !two_cpus() {
        return;
    }
    let (r, text) = interrupted(2, 2, 130);
    assert_eq!(r, Value::Null, "no record after a second Ctrl-C: {text}");
    assert!(text.contains("SIGINT: exiting now"), "{text}");
    assert!(text.contains("threads given their masks back"), "{text}");
}

#[test]
fn a_budget_naming_no_running_process_is_exit_2_naming_the_field_with_nothing_written() {
    // A pid that was a process a moment ago.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let child = spawn(
        &out,
        "2s",
        &[
            format!("resources.system.targets=[\"pid:{pid}\"]"),
            "resources.system.cpus=\"0\"".into(),
        ],
    );
    let (code, text) = output(child);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("resources.system.targets[0]") && text.contains(&format!("pid:{pid}")),
        "{text}"
    );
    assert!(!out.exists(), "nothing written: {}", out.display());
    // A pid file that names no process (or does not exist) is the same.
    let child = spawn(
        &out,
        "2s",
        &[
            "resources.system.targets=[\"proc:no-such-process-anywhere-42\", \"pidfile:/nonexistent/x.pid\"]".into(),
            "resources.system.cpus=\"0\"".into(),
        ],
    );
    let (code, text) = output(child);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("resources.system.targets[0]"), "{text}");
    assert!(!out.exists(), "nothing written: {}", out.display());
}

#[test]
fn a_strict_budget_that_cannot_be_enforced_is_exit_2_and_a_lax_one_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let child = spawn(
        &out,
        "2s",
        &[
            "resources.strict=true".into(),
            "resources.loader.cpus=\"4000\"".into(),
        ],
    );
    let (code, text) = output(child);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("resources.loader.cpus") && text.contains("not online"),
        "{text}"
    );
    assert!(!out.exists(), "nothing written: {}", out.display());
    // Not strict: the cell runs, and says so on the console and in the record.
    let out = tmp.path().join("lax");
    let child = spawn(&out, "2s", &["resources.loader.cpus=\"4000\"".into()]);
    let (code, text) = output(child);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("BUDGET NOT ENFORCED: loader affinity"),
        "{text}"
    );
    let r = support::result(&out);
    let w = r["warnings"].to_string();
    assert!(
        w.contains(
            "BUDGET NOT ENFORCED: loader affinity: resources.loader.cpus: CPU 4000 is not online"
        ),
        "{w}"
    );
    assert_eq!(enforced(&r, "loader", "affinity")["ok"], false);
}

/// The directory of the victim's cgroup in the v1 hierarchy of `controller`, from
/// one `/proc/<pid>/cgroup` text.
fn v1_dir(cgroup_text: &str, controller: &str) -> Option<std::path::PathBuf> {
    cgroup_text.lines().find_map(|l| {
        let mut p = l.splitn(3, ':');
        let (_, ctrls, path) = (p.next()?, p.next()?, p.next()?);
        ctrls.split(',').any(|c| c == controller).then(|| {
            Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(path.trim_start_matches('/'))
        })
    })
}

#[test]
fn cgroup_v1_limits_exist_during_the_cell_with_the_limit_written_and_are_gone_after() {
    let v1 = std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            l.contains(" /sys/fs/cgroup/cpu cgroup ")
                || l.contains(" /sys/fs/cgroup/cpu,cpuacct cgroup ")
        });
    if !v1 {
        support::skipped(
            "no cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu (a cgroup v2 host: see the v2 test)",
        );
        return;
    }
    if !two_cpus() {
        return;
    }
    let victim = Victim::start();
    let before = (allowed(victim.pid()), cgroups(victim.pid()));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut child = spawn(
        &out,
        "5s",
        &budget(
            victim.pid(),
            &[
                "resources.system.cpu_quota=0.5",
                "resources.system.memory=64MiB",
            ],
        ),
    );
    let child_pid = child.id();
    support::wait_rated(&out);
    // During the cell: the victim in a cgroup of the cell's own, with the limit.
    let during = cgroups(victim.pid());
    let cpu_dir = v1_dir(&during, "cpu").unwrap();
    let mem_dir = v1_dir(&during, "memory").unwrap();
    let mine = format!("crossbench-{child_pid}-system-");
    let quota = std::fs::read_to_string(cpu_dir.join("cpu.cfs_quota_us")).unwrap_or_default();
    let limit = std::fs::read_to_string(mem_dir.join("memory.limit_in_bytes")).unwrap_or_default();
    let procs = std::fs::read_to_string(cpu_dir.join("cgroup.procs")).unwrap_or_default();
    let seen = watch(&mut child, &out, Some(victim.pid()), Duration::from_secs(2));
    let (code, text) = output(child);
    assert_eq!(code, 0, "{text}");
    assert!(
        cpu_dir.to_string_lossy().contains(&mine) && mem_dir.to_string_lossy().contains(&mine),
        "the victim's cgroups during the cell: {during}"
    );
    assert_eq!(quota.trim(), "50000", "{}", cpu_dir.display());
    assert_eq!(
        limit.trim(),
        (64u64 << 20).to_string(),
        "{}",
        mem_dir.display()
    );
    assert!(
        procs
            .split_whitespace()
            .any(|p| p == victim.pid().to_string()),
        "{procs}"
    );
    assert!(
        seen.victim_cgroups.iter().all(|c| c == &during),
        "moved once, for the whole cell"
    );
    // After: gone, and the victim back where it was.
    assert!(!cpu_dir.exists(), "{} left behind", cpu_dir.display());
    assert!(!mem_dir.exists(), "{} left behind", mem_dir.display());
    assert_eq!((allowed(victim.pid()), cgroups(victim.pid())), before);
    let r = support::result(&out);
    let how = enforced(&r, "system", "cpu_quota")["how"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        how.starts_with(
            "cgroup v1 cpu cpu.cfs_period_us=100000 cpu.cfs_quota_us=50000 on 1 processes at "
        ),
        "{how}"
    );
    assert_eq!(
        resources(&r)["label"],
        "loader cpus 0 | system cpus 1, quota 0.50 cores, memory 64 MiB"
    );
    let usage = resources(&r)["use"].as_array().unwrap();
    let sys = usage.iter().find(|u| u["side"] == "system").unwrap();
    assert_eq!(sys["cores_granted"], 0.5);
    // The busy loop wants a whole core; the quota held it to about half of one, as
    // the sampler read the victim itself (its own target, every second).
    assert_eq!(
        sys["sampled_as"],
        serde_json::json!([format!("pid:{}", victim.pid())])
    );
    let used = sys["cores_mean"].as_f64().unwrap();
    assert!((0.3..0.6).contains(&used), "{sys}");
    assert_eq!(sys["memory_limit_bytes"], 64u64 << 20);
}

#[test]
fn cgroup_v2_limits_where_the_host_has_them() {
    // v2 with the cpu controller given to the root's children: a current host.
    let root = Path::new("/sys/fs/cgroup");
    let ctl = std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
    if !root.join("cgroup.controllers").exists() || !ctl.split_whitespace().any(|c| c == "cpu") {
        support::skipped(
            "no cgroup v2 hierarchy with the cpu controller at /sys/fs/cgroup (this host mounts cgroup v1; the v2 files are checked by the unit test cell::budget::cgroup::tests)",
        );
        return;
    }
    if !two_cpus() {
        return;
    }
    let victim = Victim::start();
    let before = cgroups(victim.pid());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut child = spawn(
        &out,
        "3s",
        &budget(victim.pid(), &["resources.system.cpu_quota=0.5"]),
    );
    let child_pid = child.id();
    support::wait_rated(&out);
    let during = cgroups(victim.pid());
    let path = during
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("")
        .to_string();
    let dir = root.join(path.trim_start_matches('/'));
    let max = std::fs::read_to_string(dir.join("cpu.max")).unwrap_or_default();
    let _ = watch(
        &mut child,
        &out,
        Some(victim.pid()),
        Duration::from_secs(60),
    );
    let (code, text) = output(child);
    assert_eq!(code, 0, "{text}");
    assert!(
        path.contains(&format!("crossbench-{child_pid}-system-")),
        "{during}"
    );
    assert_eq!(max.trim(), "50000 100000");
    assert!(!dir.exists());
    assert_eq!(cgroups(victim.pid()), before);
}

/// The issue's own case: a PostgreSQL cluster with pgmq of the test's own, the loader
/// on CPU 0 and the cluster (postmaster and every backend, those forked during the
/// cell included) on CPU 1; PASS; as before afterwards; the same after Ctrl-C.
#[test]
fn a_pgmq_cell_on_a_victim_postgresql_runs_the_cluster_on_cpu_1_and_restores_it() {
    if !two_cpus() {
        return;
    }
    let Some(pg) = support::victims::need(
        "a PostgreSQL cluster of the test's own",
        support::victims::PgCluster::start_named(5441, "cbbudget"),
    ) else {
        return;
    };
    let root = pg.postmaster_pid().expect("the cluster's pid file");
    for (sig, code) in [(None, 0), (Some(2), 130)] {
        let before = tree_state(root);
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("cell");
        // Named by its pid file, as a server is named in a scenario.
        let pidfile = format!("/var/run/postgresql/{}-{}.pid", pg.version, pg.name);
        let mut sets = budget(root, &[]);
        sets[1] = format!("resources.system.targets=[\"pidfile:{pidfile}\"]");
        sets.push(format!("pgmq.dsn={}", pg.dsn()));
        let mut child = spawn_scenario(
            "pgmq-smoke.yaml",
            &out,
            if sig.is_some() { "30s" } else { "6s" },
            &sets,
        );
        support::wait_rated(&out);
        let mut readings = Vec::new();
        let mut loader = Vec::new();
        let mut pids_seen = std::collections::BTreeSet::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3) && child.try_wait().unwrap().is_none() {
            let now = tree_state(root);
            pids_seen.extend(now.iter().map(|p| p.0));
            for (_, threads, _) in now {
                readings.push(threads);
            }
            loader.push(allowed(child.id()));
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(s) = sig {
            support::signal(&child, s);
        }
        let (got, text) = output(child);
        assert_eq!(got, code, "{text}");
        // The cell's own backends were forked during it, from the pinned postmaster.
        let forked: Vec<&u32> = pids_seen
            .iter()
            .filter(|p| !before.iter().any(|b| b.0 == **p))
            .collect();
        assert!(
            !forked.is_empty(),
            "no process of the cluster was forked during the cell: {pids_seen:?}"
        );
        assert_only_on(&readings, "1", 20, "the victim cluster's processes");
        assert_only_on(&loader, "0", 20, "the loader");
        let r = support::result(&out);
        assert_eq!(
            r["outcome"],
            if sig.is_some() { "INTERRUPTED" } else { "PASS" },
            "{}",
            support::summary(&r)
        );
        assert_eq!(resources(&r)["label"], "loader cpus 0 | system cpus 1");
        assert_eq!(
            resources(&r)["asked"]["system"]["targets"][0],
            format!("pidfile:{pidfile}")
        );
        let how = enforced(&r, "system", "affinity")["how"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(how.starts_with("affinity cpus 1 on "), "{how}");
        // After: every process there before has its threads' masks and cgroups back.
        let after = tree_state(root);
        for (pid, threads, cg) in &before {
            if let Some((_, t2, c2)) = after.iter().find(|(p, _, _)| p == pid) {
                assert_eq!((t2, c2), (threads, cg), "process {pid} after the cell");
            }
        }
        assert!(
            after
                .iter()
                .all(|(_, t, _)| t.iter().all(|(_, l)| *l == before[0].1[0].1)),
            "a process of the cluster left on another mask: {after:?}"
        );
    }
}
