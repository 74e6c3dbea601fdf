//! The scenario's `cluster:` section: the nodes of a replicated system, each on a
//! test host of its own (a network namespace with an address of its own), as the
//! faults `partition`, `heal` and `kill-leader` name them (docs/reliability.md,
//! "Clusters").
//!
//! The harness never makes or removes these hosts: the namespaces and the servers in
//! them are the user's (or a test's, which makes and removes them). It only adds and
//! deletes its own nftables table inside them, and only ever connects to the
//! addresses listed here.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::scenario::{invalid, ScenarioError};

/// Section `cluster`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    pub nodes: Vec<ClusterNode>,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterNode {
    /// How the scenario's faults name it (`n1`).
    pub name: String,
    /// How the system names it (NATS `server_name`, RabbitMQ's `rabbit@host`), as
    /// the adapter's placement reports leaders; empty: the same as `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The network namespace the node runs in (`ip netns` lists it).
    pub netns: String,
    /// The node's address inside its namespace.
    pub address: IpAddr,
    /// A port the node's server listens on at `address` (its client port): the
    /// connectivity check of a partition connects to it from the other nodes.
    pub port: u16,
    /// The file holding the server's pid (read when `kill-leader` strikes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pidfile: String,
    /// The command that starts the node again after `kill-leader` (run by `sh -c`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub restart: String,
}

impl ClusterNode {
    /// The node's name as the system gives it.
    pub fn system_id(&self) -> &str {
        if self.id.is_empty() {
            &self.name
        } else {
            &self.id
        }
    }
}

impl ClusterSection {
    /// The node of this name.
    pub fn node(&self, name: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The node the system calls `id` (its `id`, or its name when it has none; the
    /// address also matches, as `rabbit@10.0.0.1` names the host by it).
    pub fn node_of_system_id(&self, id: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|n| n.system_id() == id).or_else(|| {
            self.nodes.iter().find(|n| {
                id.rsplit_once('@')
                    .is_some_and(|(_, host)| host == n.address.to_string())
            })
        })
    }

    pub fn names(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.name.as_str()).collect()
    }
}

/// A name `ip netns` accepts and a shell command can carry unquoted.
fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s != "."
        && s != ".."
}

/// Check the section on its own (the faults that name its nodes are checked in
/// [`crate::scenario::faults::validate`]).
pub fn validate(c: &ClusterSection) -> Result<(), ScenarioError> {
    if !(2..=9).contains(&c.nodes.len()) {
        return Err(invalid(
            "cluster.nodes",
            format!(
                "lists {} nodes; a cluster has 2 to 9 (three is the usual)",
                c.nodes.len()
            ),
        ));
    }
    for (i, n) in c.nodes.iter().enumerate() {
        let field = |k: &str| format!("cluster.nodes[{i}].{k}");
        if !plain_name(&n.name) || n.name == "leader" {
            return Err(invalid(
                &field("name"),
                format!(
                    "{:?}: give a short name of letters, digits, '-', '_' or '.' (not `leader`, which faults use for the leader's node)",
                    n.name
                ),
            ));
        }
        if !plain_name(&n.netns) {
            return Err(invalid(
                &field("netns"),
                format!(
                    "{:?}: give the name of the node's network namespace, as `ip netns list` shows it",
                    n.netns
                ),
            ));
        }
        if n.address.is_loopback() || n.address.is_unspecified() || n.address.is_multicast() {
            return Err(invalid(
                &field("address"),
                format!(
                    "{} cannot tell the nodes apart: give the node's own address in its namespace",
                    n.address
                ),
            ));
        }
        if n.port == 0 {
            return Err(invalid(
                &field("port"),
                "give a port the node's server listens on (its client port)",
            ));
        }
        if !n.pidfile.is_empty() && !n.pidfile.starts_with('/') {
            return Err(invalid(
                &field("pidfile"),
                format!("{:?}: give an absolute path", n.pidfile),
            ));
        }
        for (j, m) in c.nodes[..i].iter().enumerate() {
            let clash = if m.name == n.name {
                Some("name")
            } else if m.netns == n.netns {
                Some("netns")
            } else if m.address == n.address {
                Some("address")
            } else if m.system_id() == n.system_id() {
                Some("id")
            } else {
                None
            };
            if let Some(k) = clash {
                return Err(invalid(
                    &field(k),
                    format!("is the same as cluster.nodes[{j}].{k}: every node has its own"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(yaml: &str) -> ClusterSection {
        serde_yaml::from_str(yaml).unwrap()
    }

    const THREE: &str = "nodes:\n  - {name: n1, netns: cb-n1, address: 10.77.1.1, port: 4222}\n  - {name: n2, netns: cb-n2, address: 10.77.1.2, port: 4222}\n  - {name: n3, id: 'rabbit@10.77.1.3', netns: cb-n3, address: 10.77.1.3, port: 4222, pidfile: /tmp/n3.pid}\n";

    #[test]
    fn three_nodes_pass_and_map_the_systems_names() {
        let c = section(THREE);
        validate(&c).unwrap();
        assert_eq!(c.node_of_system_id("n2").unwrap().name, "n2");
        assert_eq!(c.node_of_system_id("rabbit@10.77.1.3").unwrap().name, "n3");
        assert_eq!(c.node_of_system_id("rabbit@10.77.1.1").unwrap().name, "n1");
        assert!(c.node_of_system_id("n9").is_none());
    }

    #[test]
    fn every_rule_names_its_field() {
        for (from, to, field) in [
            ("name: n2,", "name: n1,", "cluster.nodes[1].name"),
            ("name: n2,", "name: leader,", "cluster.nodes[1].name"),
            ("netns: cb-n2", "netns: cb-n1", "cluster.nodes[1].netns"),
            ("netns: cb-n2", "netns: 'a b'", "cluster.nodes[1].netns"),
            (
                "address: 10.77.1.2",
                "address: 10.77.1.1",
                "cluster.nodes[1].address",
            ),
            (
                "address: 10.77.1.2",
                "address: 127.0.0.2",
                "cluster.nodes[1].address",
            ),
            (
                "port: 4222}\n  - {name: n3",
                "port: 0}\n  - {name: n3",
                "cluster.nodes[1].port",
            ),
            (
                "pidfile: /tmp/n3.pid",
                "pidfile: n3.pid",
                "cluster.nodes[2].pidfile",
            ),
        ] {
            let yaml = THREE.replacen(from, to, 1);
            assert_ne!(yaml, THREE, "{from}");
            let e = validate(&section(&yaml)).unwrap_err().to_string();
            assert!(e.contains(field), "{to}: {e}");
        }
        let one = "nodes:\n  - {name: n1, netns: cb-n1, address: 10.77.1.1, port: 4222}\n";
        let e = validate(&section(one)).unwrap_err().to_string();
        assert!(e.contains("cluster.nodes"), "{e}");
    }
}
