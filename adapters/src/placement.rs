//! Where a replicated system keeps and leads each of the cell's streams, as the
//! system itself answers ([`crate::Broker::placement`]): the leader and the replicas
//! of each physical stream or queue (a JetStream stream, a RabbitMQ quorum queue),
//! and the node each of the adapter's connections is on.
//!
//! Nodes are named as the system names them (NATS `server_name`, RabbitMQ's node
//! name `rabbit@host`); the scenario's `cluster.nodes[].id` maps them onto its test
//! hosts. The loader asks once a second during a cell with a `cluster:` section,
//! and once when a `kill-leader` fault strikes.

use std::collections::BTreeMap;

use serde::Serialize;

/// One answer of [`crate::Broker::placement`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// Physical stream (or queue) → the node that leads it now; a stream whose
    /// leader the system could not name (no quorum, an election under way) is
    /// absent here and named in `leaderless`.
    pub leaders: BTreeMap<String, String>,
    /// Streams the system answered for but named no leader of.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leaderless: Vec<String>,
    /// Physical stream → its replicas (leader included), as the system lists them.
    pub replicas: BTreeMap<String, Vec<String>>,
    /// The node each open connection of the adapter is on (one entry per
    /// connection, in the adapter's own order; empty when it cannot tell).
    pub connected: Vec<String>,
    /// Streams the system did not answer for (a timeout, an error), with why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unanswered: BTreeMap<String, String>,
}

impl Placement {
    /// The node leading the most streams (ties: the first by name), `None` when no
    /// stream has a leader.
    pub fn busiest_leader(&self) -> Option<&str> {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for l in self.leaders.values() {
            *count.entry(l.as_str()).or_default() += 1;
        }
        let top = count.values().copied().max()?;
        count.into_iter().find(|(_, n)| *n == top).map(|(l, _)| l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_leader_leads_the_most_streams_and_ties_go_by_name() {
        let mut p = Placement::default();
        assert_eq!(p.busiest_leader(), None);
        for (s, l) in [("a", "n2"), ("b", "n3"), ("c", "n2"), ("d", "n3")] {
            p.leaders.insert(s.into(), l.into());
        }
        assert_eq!(p.busiest_leader(), Some("n2"));
        p.leaders.insert("e".into(), "n3".into());
        assert_eq!(p.busiest_leader(), Some("n3"));
    }
}
