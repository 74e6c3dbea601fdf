//! A cgroup of the cell's own for one side's CPU quota and memory limit, on cgroup v1
//! (a hierarchy per controller: `/sys/fs/cgroup/cpu/…/cpu.cfs_quota_us`,
//! `/sys/fs/cgroup/memory/…/memory.limit_in_bytes`) or v2 (one unified hierarchy:
//! `cpu.max`, `memory.max`), whichever the host mounts ([`detect`]).
//!
//! [`limit`] creates `crossbench-<pid>-<side>-<n>` (v1: inside the first process's own
//! cgroup, so the limits it already lives under still hold; v2: under the root), writes
//! the limit, and moves the side's processes in (`cgroup.procs`: every thread of each);
//! [`Created::undo`] moves them (and anything they forked meanwhile) back to the
//! cgroups they came from and removes the directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The controllers a budget writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Cpu,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Memory => "memory",
        }
    }
}

/// Where a controller can be written: its hierarchy's root and the cgroup version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: u8,
    pub root: PathBuf,
}

/// The hierarchy `c` is mounted in, or why there is none to write.
pub fn detect(c: Controller) -> Result<Hierarchy, String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| format!("cannot read /proc/self/mounts: {e}"))?;
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        match f[2] {
            "cgroup" if f[3].split(',').any(|o| o == c.name()) => {
                return Ok(Hierarchy {
                    version: 1,
                    root: PathBuf::from(f[1]),
                })
            }
            "cgroup2" => v2 = Some(PathBuf::from(f[1])),
            _ => {}
        }
    }
    let Some(root) = v2 else {
        return Err(format!(
            "no cgroup hierarchy has the {} controller (neither a v1 mount nor cgroup2)",
            c.name()
        ));
    };
    let enabled = std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
    if !enabled.split_whitespace().any(|x| x == c.name()) {
        return Err(format!(
            "cgroup v2 at {}: the {} controller is not enabled for its children (cgroup.subtree_control: {:?})",
            root.display(),
            c.name(),
            enabled.trim()
        ));
    }
    Ok(Hierarchy { version: 2, root })
}

/// A cgroup this cell created, and the processes it moved into it.
#[derive(Debug)]
pub struct Created {
    pub dir: PathBuf,
    pub version: u8,
    /// Each process moved, and the cgroup directory it came from.
    moved: Vec<(u32, PathBuf)>,
    undone: bool,
}

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// The files and values a limit is written as, per version.
fn writes(version: u8, quota: Option<f64>, memory: Option<u64>) -> Vec<(&'static str, String)> {
    const PERIOD: u64 = 100_000;
    let mut w = Vec::new();
    if let Some(q) = quota {
        let us = ((q * PERIOD as f64).round() as u64).max(1000);
        match version {
            1 => {
                w.push(("cpu.cfs_period_us", PERIOD.to_string()));
                w.push(("cpu.cfs_quota_us", us.to_string()));
            }
            _ => w.push(("cpu.max", format!("{us} {PERIOD}"))),
        }
    }
    if let Some(m) = memory {
        match version {
            1 => w.push(("memory.limit_in_bytes", m.to_string())),
            _ => w.push(("memory.max", m.to_string())),
        }
    }
    w
}

/// The directory of process `pid`'s cgroup in hierarchy `h` (`/proc/<pid>/cgroup`).
pub fn cgroup_of(pid: u32, h: &Hierarchy, c: Controller) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match h.version {
            1 => ctrls.split(',').any(|x| x == c.name()),
            _ => ctrls.is_empty(),
        };
        if hit {
            return Some(h.root.join(path.trim_start_matches('/')));
        }
    }
    None
}

fn write(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
}

/// Create a cgroup for `side` in `h`, write `quota` (cores) and `memory` (bytes) as
/// its limits, and move `pids` into it. On failure nothing is left behind.
/// Returns the cgroup and how it was enforced, in one line.
pub fn limit(
    h: &Hierarchy,
    c: Controller,
    side: &str,
    quota: Option<f64>,
    memory: Option<u64>,
    pids: &[u32],
) -> Result<(Created, String), String> {
    let name = format!(
        "crossbench-{}-{side}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    );
    // v1: nested in the first process's own cgroup, so whatever limits it lives
    // under still hold; v2: under the root (a populated cgroup cannot give its
    // children controllers).
    let parent = match h.version {
        1 => pids
            .first()
            .and_then(|p| cgroup_of(*p, h, c))
            .filter(|d| d.is_dir())
            .unwrap_or_else(|| h.root.clone()),
        _ => h.root.clone(),
    };
    let dir = parent.join(&name);
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut created = Created {
        dir: dir.clone(),
        version: h.version,
        moved: Vec::new(),
        undone: false,
    };
    let w = writes(h.version, quota, memory);
    for (file, value) in &w {
        if let Err(e) = write(&dir, file, value) {
            created.undo();
            return Err(format!(
                "cannot write {value} to {}: {e}",
                dir.join(file).display()
            ));
        }
    }
    for &pid in pids {
        let Some(orig) = cgroup_of(pid, h, c) else {
            continue; // gone since it was found
        };
        match write(&dir, "cgroup.procs", &pid.to_string()) {
            Ok(()) => created.moved.push((pid, orig)),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => {
                created.undo();
                return Err(format!(
                    "cannot move process {pid} into {}: {e}",
                    dir.display()
                ));
            }
        }
    }
    let limits: Vec<String> = w.iter().map(|(f, v)| format!("{f}={v}")).collect();
    let how = format!(
        "cgroup v{} {} {} on {} processes at {}",
        h.version,
        c.name(),
        limits.join(" "),
        created.moved.len(),
        dir.display()
    );
    Ok((created, how))
}

impl Created {
    /// Move every process back where it came from (what was forked inside goes where
    /// its first process came from) and remove the cgroup. Returns what was done and
    /// what could not be.
    pub fn undo(&mut self) -> Vec<String> {
        if self.undone {
            return Vec::new();
        }
        self.undone = true;
        let mut out = Vec::new();
        let mut back = 0;
        for (pid, orig) in &self.moved {
            match write(orig, "cgroup.procs", &pid.to_string()) {
                Ok(()) => back += 1,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => out.push(format!(
                    "NOT RESTORED: process {pid} could not be moved back to {}: {e}",
                    orig.display()
                )),
            }
        }
        // Processes forked inside the cgroup during the cell.
        let home = self.moved.first().map(|(_, o)| o.clone());
        for _ in 0..3 {
            let inside = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<&str> = inside.split_whitespace().collect();
            if pids.is_empty() {
                break;
            }
            if let Some(h) = &home {
                for p in pids {
                    if write(h, "cgroup.procs", p).is_ok() {
                        back += 1;
                    }
                }
            }
        }
        let mut removed = Err(std::io::Error::other("not tried"));
        for _ in 0..20 {
            removed = std::fs::remove_dir(&self.dir);
            if removed.is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        match removed {
            Ok(()) => out.push(format!(
                "cgroup v{}: {back} processes moved back to their cgroups, {} removed",
                self.version,
                self.dir.display()
            )),
            Err(e) => out.push(format!(
                "NOT RESTORED: cgroup {} could not be removed: {e}",
                self.dir.display()
            )),
        }
        out
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        let _ = self.undo();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_writes_its_own_files() {
        assert_eq!(
            writes(1, Some(1.5), Some(1 << 30)),
            vec![
                ("cpu.cfs_period_us", "100000".to_string()),
                ("cpu.cfs_quota_us", "150000".to_string()),
                ("memory.limit_in_bytes", (1u64 << 30).to_string()),
            ]
        );
        assert_eq!(
            writes(2, Some(1.0), Some(1 << 30)),
            vec![
                ("cpu.max", "100000 100000".to_string()),
                ("memory.max", (1u64 << 30).to_string()),
            ]
        );
    }
}
