//! A network partition between the `cluster:` nodes, made the way Jepsen makes one:
//! every packet between nodes on different sides is dropped (not refused), by an
//! nftables table of the harness's own (`inet crossbench`) in each node's network
//! namespace, on input and on output. A TCP connection across the cut hangs, as it
//! does when a link or a switch fails; the loader, in its own namespace, keeps
//! reaching every node.
//!
//! The cut is checked, not assumed: while it lasts, every node tries a TCP connection
//! to every other node's port from inside its own namespace ([`check`]). A pair across
//! the cut that still connects makes the fault ineffective (the cell is VOID: it did
//! not test what it says); a heal is checked the same way.
//!
//! Its one unsafe call is `setns(2)`, through libc, on a thread of its own.
#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use serde::Serialize;

use crate::cell::faults::command::{run_command, CommandOutcome};
use crate::scenario::cluster::{ClusterNode, ClusterSection};

/// The harness's nftables table in each node's namespace.
pub const TABLE: &str = "crossbench";

/// How long one connection attempt of the check may take: across a working link on
/// one machine a connection takes well under a millisecond.
pub const CHECK_TIMEOUT: Duration = Duration::from_millis(1000);

/// The rules that drop `node`'s traffic to and from `peers`.
fn ruleset(peers: &[IpAddr]) -> String {
    let set = |v6: bool| {
        peers
            .iter()
            .filter(|a| a.is_ipv6() == v6)
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
    };
    let mut input = String::new();
    let mut output = String::new();
    for (fam, addrs) in [("ip", set(false)), ("ip6", set(true))] {
        if addrs.is_empty() {
            continue;
        }
        let list = addrs.join(", ");
        input.push_str(&format!(" {fam} saddr {{ {list} }} drop;"));
        output.push_str(&format!(" {fam} daddr {{ {list} }} drop;"));
    }
    format!(
        "table inet {TABLE} {{\n  chain input {{ type filter hook input priority -10; policy accept;{input} }}\n  chain output {{ type filter hook output priority -10; policy accept;{output} }}\n}}\n"
    )
}

/// The command that adds the drop rules in `node`'s namespace.
pub fn cut_command(node: &ClusterNode, peers: &[IpAddr]) -> String {
    format!(
        "ip netns exec {} nft -f - <<'CROSSBENCH'\n{}CROSSBENCH",
        node.netns,
        ruleset(peers)
    )
}

/// The command that removes the harness's table from `node`'s namespace, whether or
/// not it is there.
pub fn heal_command(node: &ClusterNode) -> String {
    format!(
        "ip netns exec {} nft -f - <<'CROSSBENCH'\ntable inet {TABLE} {{}}\ndelete table inet {TABLE}\nCROSSBENCH",
        node.netns
    )
}

/// Who is cut from whom: for each node, the addresses of the nodes on other sides.
pub fn peers_across<'a>(
    cluster: &'a ClusterSection,
    sides: &[Vec<String>],
) -> Vec<(&'a ClusterNode, Vec<IpAddr>)> {
    let side_of = |name: &str| sides.iter().position(|s| s.iter().any(|n| n == name));
    cluster
        .nodes
        .iter()
        .map(|n| {
            let mine = side_of(&n.name);
            let peers = cluster
                .nodes
                .iter()
                .filter(|m| m.name != n.name && side_of(&m.name) != mine)
                .map(|m| m.address)
                .collect();
            (n, peers)
        })
        .collect()
}

/// Cut the cluster into `sides`: one command per node (those with no peer across
/// are left alone). Each command has `timeout`.
pub async fn cut(
    cluster: &ClusterSection,
    sides: &[Vec<String>],
    timeout: Duration,
) -> Vec<CommandOutcome> {
    let mut out = Vec::new();
    for (node, peers) in peers_across(cluster, sides) {
        if !peers.is_empty() {
            out.push(run_command(&cut_command(node, &peers), timeout).await);
        }
    }
    out
}

/// Remove every rule the harness added, in every node's namespace.
pub async fn heal(cluster: &ClusterSection, timeout: Duration) -> Vec<CommandOutcome> {
    let mut out = Vec::new();
    for node in &cluster.nodes {
        out.push(run_command(&heal_command(node), timeout).await);
    }
    out
}

/// The same, from a destructor: blocking, each command bounded by the shell's
/// `timeout`.
pub fn heal_blocking(cluster: &ClusterSection) {
    for node in &cluster.nodes {
        let _ = std::process::Command::new("timeout")
            .arg("10")
            .arg("sh")
            .arg("-c")
            .arg(heal_command(node))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Try a TCP connection to `to` from inside the network namespace `netns`: on a
/// thread of its own, which enters the namespace and ends (never a pooled thread,
/// which would carry the namespace into other work).
pub fn connects_from(netns: &str, to: SocketAddr, timeout: Duration) -> Result<bool, String> {
    let netns = netns.to_string();
    std::thread::Builder::new()
        .name("netns-check".into())
        .spawn(move || -> Result<bool, String> {
            let path = format!("/run/netns/{netns}");
            let f = std::fs::File::open(&path)
                .map_err(|e| format!("{path}: {e} (is {netns} a namespace `ip netns` made?)"))?;
            // SAFETY: setns on a valid descriptor of a network namespace, on this
            // thread only; the thread ends right after.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                return Err(format!(
                    "entering {netns}: {} (the harness needs CAP_SYS_ADMIN for cluster faults)",
                    std::io::Error::last_os_error()
                ));
            }
            Ok(TcpStream::connect_timeout(&to, timeout).is_ok())
        })
        .map_err(|e| format!("starting the check's thread: {e}"))?
        .join()
        .map_err(|_| "the check's thread panicked".to_string())?
}

/// What the check saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Connectivity {
    /// Ordered pairs across the cut tried (each should have failed).
    pub across_tried: usize,
    /// Pairs across the cut that connected all the same (`n1 -> n2 10.0.0.2:4222`).
    pub across_connected: Vec<String>,
    /// Ordered pairs on one side tried (each should have connected, unless a node is
    /// down).
    pub within_tried: usize,
    /// Pairs on one side that did not connect.
    pub within_refused: Vec<String>,
    /// Pairs the check could not try (a namespace it could not enter), with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl Connectivity {
    /// The cut drops what it should: nothing across it connected, and it could try.
    pub fn cut_holds(&self) -> bool {
        self.across_connected.is_empty() && self.errors.is_empty() && self.across_tried > 0
    }

    /// After a heal: every pair connects.
    pub fn all_connect(&self) -> bool {
        self.across_connected.len() == self.across_tried
            && self.within_refused.is_empty()
            && self.errors.is_empty()
    }
}

/// Every ordered pair of nodes tries a connection (all at once, each on its own
/// thread): those across `sides` should fail, those on one side connect. With no
/// sides (after a heal) every pair is "within".
pub async fn check(cluster: &ClusterSection, sides: &[Vec<String>]) -> Connectivity {
    let side_of = |name: &str| sides.iter().position(|s| s.iter().any(|n| n == name));
    let mut tries = Vec::new();
    for a in &cluster.nodes {
        for b in &cluster.nodes {
            if a.name == b.name {
                continue;
            }
            let across = !sides.is_empty() && side_of(&a.name) != side_of(&b.name);
            let to = SocketAddr::new(b.address, b.port);
            let label = format!("{} -> {} {to}", a.name, b.name);
            let netns = a.netns.clone();
            tries.push((
                across,
                label,
                tokio::task::spawn_blocking(move || connects_from(&netns, to, CHECK_TIMEOUT)),
            ));
        }
    }
    let mut c = Connectivity::default();
    for (across, label, t) in tries {
        let r = t.await.unwrap_or_else(|e| Err(e.to_string()));
        match r {
            Err(e) => c.errors.push(format!("{label}: {e}")),
            Ok(connected) if across => {
                c.across_tried += 1;
                if connected {
                    c.across_connected.push(label);
                }
            }
            Ok(connected) => {
                c.within_tried += 1;
                if !connected {
                    c.within_refused.push(label);
                }
            }
        }
    }
    c
}

/// The sides of `isolate: node`: it alone, and every other node.
pub fn isolate(cluster: &ClusterSection, node: &str) -> Vec<Vec<String>> {
    let rest: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.name != node)
        .map(|n| n.name.clone())
        .collect();
    vec![vec![node.to_string()], rest]
}

/// Nodes named on some side, for the record's wording.
pub fn describe(sides: &[Vec<String>]) -> String {
    sides
        .iter()
        .map(|s| {
            format!(
                "[{}]",
                s.iter()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> ClusterSection {
        serde_yaml::from_str(
            "nodes:\n  - {name: n1, netns: cb-n1, address: 10.77.1.1, port: 4222}\n  - {name: n2, netns: cb-n2, address: 10.77.1.2, port: 4222}\n  - {name: n3, netns: cb-n3, address: 10.77.1.3, port: 4222}\n",
        )
        .unwrap()
    }

    #[test]
    fn isolating_a_node_cuts_it_from_every_other_and_nothing_else() {
        let c = three();
        let sides = isolate(&c, "n2");
        assert_eq!(describe(&sides), "[n2] | [n1, n3]");
        let p = peers_across(&c, &sides);
        let addrs = |i: usize| p[i].1.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(addrs(0), ["10.77.1.2"]);
        assert_eq!(addrs(1), ["10.77.1.1", "10.77.1.3"]);
        assert_eq!(addrs(2), ["10.77.1.2"]);
    }

    #[test]
    fn the_rules_drop_both_ways_in_the_harnesss_own_table() {
        let r = ruleset(&["10.77.1.2".parse().unwrap(), "fd00::7".parse().unwrap()]);
        assert!(r.starts_with("table inet crossbench {"), "{r}");
        assert!(
            r.contains("hook input") && r.contains("ip saddr { 10.77.1.2 } drop;"),
            "{r}"
        );
        assert!(
            r.contains("hook output") && r.contains("ip daddr { 10.77.1.2 } drop;"),
            "{r}"
        );
        assert!(r.contains("ip6 saddr { fd00::7 } drop;"), "{r}");
        let c = three();
        let cmd = cut_command(&c.nodes[0], &["10.77.1.2".parse().unwrap()]);
        assert!(
            cmd.starts_with("ip netns exec cb-n1 nft -f - <<'CROSSBENCH'\n"),
            "{cmd}"
        );
        assert!(heal_command(&c.nodes[0]).contains("delete table inet crossbench"));
    }

    #[test]
    fn a_check_that_could_not_try_is_not_a_cut_that_holds() {
        let c = Connectivity {
            across_tried: 0,
            ..Default::default()
        };
        assert!(!c.cut_holds());
        let leak = Connectivity {
            across_tried: 4,
            across_connected: vec!["n1 -> n2 10.77.1.2:4222".into()],
            ..Default::default()
        };
        assert!(!leak.cut_holds());
    }

    #[tokio::test]
    async fn a_namespace_that_does_not_exist_is_an_error_not_a_cut() {
        let mut c = three();
        for n in &mut c.nodes {
            n.netns = format!("crossbench-absent-{}", n.name);
        }
        let seen = check(&c, &isolate(&c, "n1")).await;
        assert!(!seen.cut_holds());
        assert_eq!(seen.errors.len(), 6, "{seen:?}");
        assert!(seen.errors[0].contains("crossbench-absent-n1"), "{seen:?}");
    }
}
