//! The faults' signals, their only unsafe code beside `network`'s `setns(2)`:
//! `kill(2)` and `killpg(2)`, through libc.
#![allow(unsafe_code)]
//!
//! Finding a fault's victim and signalling it: processes by command-line pattern or
//! pid (with their descendants), a systemd unit, or a container. The loader itself
//! and its ancestors are never a victim, whatever the pattern matches (the pattern
//! is often in the loader's own command line, or in the test that started it).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use crate::cell::faults::command::{run_command, CommandOutcome};
use crate::scenario::faults::Victim;

/// A signal a fault sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Kill,
    Stop,
    Cont,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Kill => libc::SIGKILL,
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Signal::Kill => "SIGKILL",
            Signal::Stop => "SIGSTOP",
            Signal::Cont => "SIGCONT",
        }
    }
}

/// What one signalling did.
#[derive(Debug, Clone, Default)]
pub struct Signalled {
    /// The processes signalled (empty for units and containers).
    pub pids: Vec<u32>,
    /// The command run instead (units, containers).
    pub command: Option<CommandOutcome>,
    /// Why nothing was signalled, when nothing was.
    pub error: Option<String>,
}

/// Every process of the machine: pid → (parent, command line).
fn process_table() -> HashMap<u32, (u32, String)> {
    let mut t = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return t;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .replace('\0', " ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        t.insert(pid, (ppid, cmdline));
    }
    t
}

/// The loader and its ancestors: never victims.
fn protected(table: &HashMap<u32, (u32, String)>) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut p = std::process::id();
    while p > 1 && out.insert(p) {
        match table.get(&p) {
            Some(&(pp, _)) => p = pp,
            None => break,
        }
    }
    out.insert(1);
    out
}

/// The pids `victim` names now, descendants included, the loader's line excluded.
pub fn resolve(victim: &Victim) -> Vec<u32> {
    let table = process_table();
    let safe = protected(&table);
    let roots: Vec<u32> = match victim {
        Victim::Pid(p) => vec![*p],
        Victim::PidFile(path) => std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            .filter(|p| *p > 1)
            .into_iter()
            .collect(),
        Victim::Process(pattern) => table
            .iter()
            .filter(|(pid, (_, cmd))| {
                !safe.contains(pid) && !cmd.is_empty() && cmd.contains(pattern.as_str())
            })
            .map(|(pid, _)| *pid)
            .collect(),
        Victim::Unit(_) | Victim::Container(_) => return Vec::new(),
    };
    let mut out: BTreeSet<u32> = roots
        .iter()
        .copied()
        .filter(|p| !safe.contains(p))
        .collect();
    // Descendants, breadth first.
    let mut frontier: Vec<u32> = out.iter().copied().collect();
    while let Some(parent) = frontier.pop() {
        for (pid, (pp, _)) in &table {
            if *pp == parent && !safe.contains(pid) && out.insert(*pid) {
                frontier.push(*pid);
            }
        }
    }
    out.into_iter().collect()
}

/// Signal `victim` (a unit or container through its manager's command).
pub async fn signal(victim: &Victim, sig: Signal, timeout: Duration) -> Signalled {
    match victim {
        Victim::Unit(u) => {
            let cmd = format!("systemctl kill --signal={} {u}", sig.name());
            Signalled {
                command: Some(run_command(&cmd, timeout).await),
                ..Default::default()
            }
        }
        Victim::Container(c) => {
            let cmd = match sig {
                Signal::Kill => format!("docker kill --signal=KILL {c}"),
                Signal::Stop => format!("docker pause {c}"),
                Signal::Cont => format!("docker unpause {c}"),
            };
            Signalled {
                command: Some(run_command(&cmd, timeout).await),
                ..Default::default()
            }
        }
        Victim::Pid(_) | Victim::PidFile(_) | Victim::Process(_) => {
            let pids = resolve(victim);
            signal_pids(&pids, sig)
        }
    }
}

/// SIGKILL the process group `pgid` (a command's own group).
pub fn kill_group(pgid: u32) {
    // SAFETY: killpg(2) on a process group we created; no memory is involved.
    unsafe {
        libc::killpg(pgid as libc::pid_t, libc::SIGKILL);
    }
}

/// Signal exactly `pids` (a pause's SIGCONT goes to the processes it stopped).
pub fn signal_pids(pids: &[u32], sig: Signal) -> Signalled {
    if pids.is_empty() {
        return Signalled {
            error: Some("no process matched the target".into()),
            ..Default::default()
        };
    }
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for &p in pids {
        // SAFETY: kill(2) with a pid we resolved and a valid signal number.
        let r = unsafe { libc::kill(p as libc::pid_t, sig.raw()) };
        if r == 0 {
            done.push(p);
        } else {
            errors.push(format!("{p}: {}", std::io::Error::last_os_error()));
        }
    }
    Signalled {
        pids: done,
        command: None,
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loader_and_its_ancestors_are_never_victims() {
        // Our own command line contains the test binary's name: a pattern matching
        // it must not resolve to us, nor to the shell or cargo above us.
        let me = std::fs::read(format!("/proc/{}/cmdline", std::process::id())).unwrap();
        let me = String::from_utf8_lossy(&me).replace('\0', " ");
        let word = me.split_whitespace().next().unwrap().to_string();
        let pids = resolve(&Victim::Process(word));
        assert!(!pids.contains(&std::process::id()), "{pids:?}");
        assert!(!pids.contains(&1));
    }

    #[test]
    fn a_child_is_found_by_pattern_and_signalled() {
        let mut child = std::process::Command::new("sleep")
            .arg("987654")
            .spawn()
            .unwrap();
        let pids = resolve(&Victim::Process("sleep 987654".into()));
        assert_eq!(pids, vec![child.id()]);
        let s = signal_pids(&pids, Signal::Kill);
        assert_eq!(s.pids, vec![child.id()]);
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert!(resolve(&Victim::Process("sleep 987654".into())).is_empty());
        assert!(signal_pids(&[], Signal::Kill).error.is_some());
    }
}
