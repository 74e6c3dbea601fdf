//! Resource budgets for the cell (the scenario's `resources:` section, issue 42): the
//! loader's and the system's threads pinned to their CPU sets, and a cgroup of the
//! cell's own for a CPU quota or a memory limit where the host has a controller it
//! may write; everything put back when the cell ends.
//!
//! - [`preflight`], before the cell's directory exists: every system target names a
//!   running process, and (strict) every CPU is online and every controller present;
//!   bad input names the field.
//! - [`Session::apply`], first thing in the cell: enforces what it can. What it cannot
//!   is bad input when the section is `strict` (what was done is undone), a warning
//!   otherwise.
//! - [`Session::finish`], at the cell's end: restores, and gives the record's
//!   `resources` block with each side's use over the rated window. A `Session`
//!   dropped on an error path restores too, and [`restore_running`] is the signal
//!   path's (a second Ctrl-C exits the process at once).
//!
//! Affinity ([`affinity`]) is per thread: every task of every process on the side,
//! and threads started later inherit it. The restore gives each thread its own mask
//! back, and threads or processes started during the cell their process's (or root
//! process's) original mask. Cgroups: [`cgroup`].

pub mod affinity;
pub mod cgroup;
pub mod usage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cell_record::resources::{Enforced, Resources, RESOURCES_SCHEMA};

use crate::scenario::resources::{label, parse_cpus, ResourcesSection, SideSection};
use crate::scenario::{invalid, Scenario, ScenarioError};

/// The processes a system budget's targets name now, per target.
fn system_processes(side: &SideSection) -> Vec<(usize, String, Vec<u32>)> {
    side.targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let pids = t
                .parse::<sampler::TargetSpec>()
                .ok()
                .and_then(|s| sampler::target_processes(&s))
                .unwrap_or_default();
            (i, t.clone(), pids)
        })
        .collect()
}

/// Checks made before the cell's directory is created: a system target that names
/// no running process is bad input; with `strict`, so is a CPU that is not online or
/// a limit without a controller to write it.
pub fn preflight(s: &Scenario) -> Result<(), ScenarioError> {
    let Some(r) = &s.resources else { return Ok(()) };
    if let Some(sys) = &r.system {
        for (i, t, pids) in system_processes(sys) {
            if pids.is_empty() {
                return Err(invalid(
                    &format!("resources.system.targets[{i}]"),
                    format!("{t} names no running process: a budget must name the system's processes as they run now"),
                ));
            }
        }
    }
    if r.strict {
        for (name, side) in [("loader", &r.loader), ("system", &r.system)] {
            let Some(side) = side else { continue };
            if let Some(why) = cpus_not_online(side) {
                return Err(invalid(&format!("resources.{name}.cpus"), why));
            }
            for (field, asked, c) in [
                (
                    "cpu_quota",
                    side.cpu_quota.is_some(),
                    cgroup::Controller::Cpu,
                ),
                ("memory", side.memory.is_some(), cgroup::Controller::Memory),
            ] {
                if asked {
                    cgroup::detect(c).map_err(|why| {
                        invalid(
                            &format!("resources.{name}.{field}"),
                            format!("cannot be enforced here: {why}"),
                        )
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Why a side's CPU set cannot be granted here, if it cannot.
fn cpus_not_online(side: &SideSection) -> Option<String> {
    let cpus = parse_cpus(side.cpus.as_deref()?).ok()?;
    let online = affinity::online();
    let missing: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| !online.contains(c))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "CPU {} is not online here (online: {})",
            crate::scenario::resources::format_cpus(&missing),
            crate::scenario::resources::format_cpus(&online)
        )
    })
}

/// What the cell changed, to be put back.
#[derive(Debug, Default)]
struct Undo {
    /// Each thread pinned, its process, and its original mask.
    threads: Vec<(u32, u32, Vec<usize>)>,
    /// Each process pinned, with its root process (the target it was found under).
    processes: Vec<(u32, u32)>,
    cgroups: Vec<cgroup::Created>,
    done: Option<Vec<String>>,
}

impl Undo {
    /// Put every thread's mask back, and every process's cgroup; idempotent.
    fn restore(&mut self) -> Vec<String> {
        if let Some(d) = &self.done {
            return d.clone();
        }
        let mut out = Vec::new();
        if !self.threads.is_empty() {
            let mut by_pid: HashMap<u32, Vec<usize>> = HashMap::new();
            let mut mine: HashMap<u32, &Vec<usize>> = HashMap::new();
            for (tid, pid, mask) in &self.threads {
                mine.insert(*tid, mask);
                if tid == pid {
                    by_pid.insert(*pid, mask.clone());
                }
            }
            let root_of: HashMap<u32, u32> = self.processes.iter().copied().collect();
            let (mut back, mut failed) = (0usize, Vec::new());
            // Every process of each root now (children forked during the cell too).
            let mut roots: Vec<u32> = self.processes.iter().map(|p| p.1).collect();
            roots.sort_unstable();
            roots.dedup();
            let mut pids: Vec<(u32, u32)> = self.processes.clone();
            for r in &roots {
                for p in
                    sampler::target_processes(&sampler::TargetSpec::Pid(*r)).unwrap_or_default()
                {
                    if !root_of.contains_key(&p) {
                        pids.push((p, *r));
                    }
                }
            }
            for (pid, root) in pids {
                let fallback = by_pid.get(&pid).or_else(|| by_pid.get(&root)).cloned();
                for tid in affinity::threads(pid) {
                    let Some(mask) = mine.get(&tid).map(|m| (*m).clone()).or(fallback.clone())
                    else {
                        continue;
                    };
                    match affinity::set(tid, &mask) {
                        Ok(()) => back += 1,
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(e) => failed.push(format!("thread {tid} of process {pid}: {e}")),
                    }
                }
            }
            out.push(format!("affinity: {back} threads given their masks back"));
            if !failed.is_empty() {
                out.push(format!("NOT RESTORED: affinity of {}", failed.join("; ")));
            }
        }
        for c in &mut self.cgroups {
            out.extend(c.undo());
        }
        self.done = Some(out.clone());
        out
    }
}

/// One cgroup to create: the field it enforces, the controller whose hierarchy it is
/// in (or why there is none), and the quota (cores) and memory (bytes) it writes.
type LimitJob = (
    &'static str,
    cgroup::Controller,
    Result<cgroup::Hierarchy, String>,
    Option<f64>,
    Option<u64>,
);

/// The budget being enforced, while the cell runs.
static RUNNING: Mutex<Option<Arc<Mutex<Undo>>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Restore the running cell's budget now (a second signal exits the process without
/// unwinding). Returns what was done.
pub fn restore_running() -> Vec<String> {
    let running = lock(&RUNNING).take();
    running.map(|u| lock(&u).restore()).unwrap_or_default()
}

/// One cell's budget: asked, enforced, to be restored.
#[derive(Debug)]
pub struct Session {
    section: Option<ResourcesSection>,
    enforced: Vec<Enforced>,
    undo: Arc<Mutex<Undo>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // An error path: the cell did not reach `finish`.
        let _ = lock(&self.undo).restore();
        let mut r = lock(&RUNNING);
        if r.as_ref().is_some_and(|u| Arc::ptr_eq(u, &self.undo)) {
            *r = None;
        }
    }
}

fn ok(side: &str, what: &str, how: String) -> Enforced {
    Enforced {
        side: side.into(),
        what: what.into(),
        ok: true,
        how,
    }
}

fn not(side: &str, what: &str, why: String) -> Enforced {
    Enforced {
        side: side.into(),
        what: what.into(),
        ok: false,
        how: why,
    }
}

impl Session {
    /// Enforce the scenario's budgets (nothing without a `resources:` section). With
    /// `strict`, a budget that cannot be enforced is bad input naming its field, and
    /// what was already done is undone.
    pub fn apply(s: &Scenario) -> Result<Session, ScenarioError> {
        let mut session = Session {
            section: s.resources.clone(),
            enforced: Vec::new(),
            undo: Arc::new(Mutex::new(Undo::default())),
        };
        let Some(r) = s.resources.clone() else {
            return Ok(session);
        };
        *lock(&RUNNING) = Some(session.undo.clone());
        let me = std::process::id();
        for (name, side) in [("loader", &r.loader), ("system", &r.system)] {
            let Some(side) = side else { continue };
            // Each process of the side, with the root it was found under.
            let procs: Vec<(u32, u32)> = if name == "loader" {
                vec![(me, me)]
            } else {
                let mut v = Vec::new();
                for (i, t, pids) in system_processes(side) {
                    if pids.is_empty() {
                        session.fail(
                            r.strict,
                            name,
                            "targets",
                            &format!("resources.system.targets[{i}]"),
                            format!("{t} names no running process"),
                        )?;
                    }
                    let root = pids.first().copied().unwrap_or(0);
                    v.extend(pids.into_iter().filter(|p| *p != me).map(|p| (p, root)));
                }
                v.sort_unstable();
                v.dedup_by_key(|p| p.0);
                v
            };
            if let Some(c) = &side.cpus {
                let field = format!("resources.{name}.cpus");
                match cpus_not_online(side) {
                    Some(why) => session.fail(r.strict, name, "affinity", &field, why)?,
                    None => {
                        let cpus = parse_cpus(c).unwrap_or_default();
                        match session.pin(&procs, &cpus) {
                            Ok(how) => session.enforced.push(ok(name, "affinity", how)),
                            Err(why) => session.fail(r.strict, name, "affinity", &field, why)?,
                        }
                    }
                }
            }
            session.limits(r.strict, name, side, &procs)?;
        }
        Ok(session)
    }

    /// Record a budget that could not be enforced: bad input when strict (after
    /// undoing what was done), a warning otherwise.
    fn fail(
        &mut self,
        strict: bool,
        side: &str,
        what: &str,
        field: &str,
        why: String,
    ) -> Result<(), ScenarioError> {
        if strict {
            let _ = lock(&self.undo).restore();
            return Err(invalid(
                field,
                format!("cannot be enforced (strict): {why}"),
            ));
        }
        self.enforced
            .push(not(side, what, format!("{field}: {why}")));
        Ok(())
    }

    /// Pin every thread of `procs` to `cpus`; threads started while it runs are
    /// caught by a second pass. Returns how, in one line.
    fn pin(&mut self, procs: &[(u32, u32)], cpus: &[usize]) -> Result<String, String> {
        let mut undo = lock(&self.undo);
        let mut seen: std::collections::HashSet<u32> = std::collections::HashSet::new();
        let mut touched = std::collections::HashSet::new();
        for _pass in 0..3 {
            let mut new = 0;
            for &(pid, root) in procs {
                for tid in affinity::threads(pid) {
                    if !seen.insert(tid) {
                        continue;
                    }
                    new += 1;
                    let orig = match affinity::get(tid) {
                        Ok(m) => m,
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                        Err(e) => {
                            return Err(format!(
                                "cannot read thread {tid}'s affinity (process {pid}): {e}"
                            ))
                        }
                    };
                    match affinity::set(tid, cpus) {
                        Ok(()) => {
                            undo.threads.push((tid, pid, orig));
                            if touched.insert(pid) {
                                undo.processes.push((pid, root));
                            }
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(e) => {
                            return Err(format!(
                                "cannot set thread {tid}'s affinity (process {pid}): {e}"
                            ))
                        }
                    }
                }
            }
            if new == 0 {
                break;
            }
        }
        let threads = undo
            .threads
            .iter()
            .filter(|t| touched.contains(&t.1))
            .count();
        if threads == 0 {
            return Err("no thread of the side's processes could be found".into());
        }
        Ok(format!(
            "affinity cpus {} on {threads} threads of {} processes (sched_setaffinity)",
            crate::scenario::resources::format_cpus(cpus),
            touched.len()
        ))
    }

    /// The side's CPU quota and memory limit, in cgroups of the cell's own.
    fn limits(
        &mut self,
        strict: bool,
        name: &str,
        side: &SideSection,
        procs: &[(u32, u32)],
    ) -> Result<(), ScenarioError> {
        let quota = side.cpu_quota;
        let memory = side
            .memory
            .as_deref()
            .and_then(|m| crate::scenario::resources::parse_memory(m).ok());
        let pids: Vec<u32> = procs.iter().map(|p| p.0).collect();
        let cpu_h = quota.map(|_| cgroup::detect(cgroup::Controller::Cpu));
        let mem_h = memory.map(|_| cgroup::detect(cgroup::Controller::Memory));
        // v2: one cgroup holds both limits.
        let mut jobs: Vec<LimitJob> = Vec::new();
        match (cpu_h, mem_h) {
            (Some(Ok(a)), Some(Ok(b))) if a.version == 2 && a == b => {
                jobs.push(("cpu_quota", cgroup::Controller::Cpu, Ok(a), quota, memory));
            }
            (c, m) => {
                if let Some(h) = c {
                    jobs.push(("cpu_quota", cgroup::Controller::Cpu, h, quota, None));
                }
                if let Some(h) = m {
                    jobs.push(("memory", cgroup::Controller::Memory, h, None, memory));
                }
            }
        }
        for (field, c, h, q, m) in jobs {
            let what = if q.is_some() && m.is_some() {
                "cpu_quota+memory"
            } else {
                field
            };
            let field = format!("resources.{name}.{field}");
            let done = h.and_then(|h| cgroup::limit(&h, c, name, q, m, &pids));
            match done {
                Ok((created, how)) => {
                    lock(&self.undo).cgroups.push(created);
                    self.enforced.push(ok(name, what, how));
                }
                Err(why) => self.fail(strict, name, what, &field, why)?,
            }
        }
        Ok(())
    }

    /// The record's warnings: every budget that could not be enforced.
    pub fn warnings(&self) -> Vec<String> {
        self.enforced
            .iter()
            .filter(|e| !e.ok)
            .map(|e| format!("BUDGET NOT ENFORCED: {} {}: {}", e.side, e.what, e.how))
            .collect()
    }

    /// invocation.txt's lines: the budget asked and what was enforced.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![format!("resources: {}", label(self.section.as_ref()))];
        for e in &self.enforced {
            v.push(format!(
                "resources_{}: {} {}: {}",
                if e.ok { "enforced" } else { "not_enforced" },
                e.side,
                e.what,
                e.how
            ));
        }
        v
    }

    /// The console's line for the budget ("no budget" without one).
    pub fn headline(&self) -> String {
        format!("resources: {}", label(self.section.as_ref()))
    }

    /// Restore what was changed, and the record's `resources` block with each side's
    /// use over the rated window (`cost`: the sampler's summary of it; `samples`: the
    /// cell's samples.csv, where the system budget's own processes are targets of
    /// their own).
    pub fn finish(self, cost: &sampler::CostSummary, samples: &std::path::Path) -> Resources {
        let restored = restore_running_of(&self.undo);
        let asked = self.section.as_ref().map(ResourcesSection::asked);
        Resources {
            schema: RESOURCES_SCHEMA,
            label: label(self.section.as_ref()),
            strict: self.section.as_ref().is_some_and(|r| r.strict),
            usage: usage::sides(asked.as_ref(), cost, samples),
            asked,
            enforced: self.enforced.clone(),
            restored,
        }
    }
}

/// Restore `undo` and forget it as the running budget.
fn restore_running_of(undo: &Arc<Mutex<Undo>>) -> Vec<String> {
    let out = lock(undo).restore();
    let mut r = lock(&RUNNING);
    if r.as_ref().is_some_and(|u| Arc::ptr_eq(u, undo)) {
        *r = None;
    }
    out
}
