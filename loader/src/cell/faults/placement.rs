//! Where the cluster's streams were led, second by second: the adapter's
//! [`adapters::Broker::placement`] asked once a second while a cell with a
//! `cluster:` section runs, its answers mapped onto the scenario's node names, and
//! the record's `faults.cluster` block built from them: each second's leaders and
//! connections per node beside what was published and delivered in it, every change
//! of a stream's leader, and per node how many stream-seconds it led.
//!
//! Publishes and deliveries are counted per second, not per message: the record says
//! which nodes the adapter's connections were on in each second, not which node
//! carried each message.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cell::faults::timeline::Tally;
use crate::measure::clock::Clock;
use crate::scenario::cluster::ClusterSection;

/// How often the adapter is asked.
pub const EVERY: Duration = Duration::from_secs(1);
/// How long one answer may take before the second is recorded as unanswered.
pub const ANSWER: Duration = Duration::from_secs(3);

/// One second of the timeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Second {
    /// From the start of the rated window (negative: the warm-up).
    pub at_ms: i64,
    /// Node → streams it led.
    pub leaders: BTreeMap<String, usize>,
    /// Streams with no leader the system would name.
    pub leaderless: usize,
    /// Streams the system did not answer for (or all, when the whole answer did not
    /// come within 3 s).
    pub unanswered: usize,
    /// Node → the adapter's connections on it.
    pub connected: BTreeMap<String, usize>,
    /// Acknowledged publishes and deliveries since the previous second.
    pub published: u64,
    pub delivered: u64,
}

/// A stream's leader changed between two seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaderChange {
    pub at_ms: i64,
    pub stream: String,
    /// `None`: no leader named.
    pub from: Option<String>,
    pub to: Option<String>,
}

/// Per node, over the whole timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeFigures {
    /// Σ over seconds of the streams it led.
    pub led_stream_seconds: u64,
    /// Σ over seconds of the adapter's connections on it.
    pub connection_seconds: u64,
}

/// The record's `faults.cluster` block.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClusterRecord {
    /// Node name → the system's name for it, as the scenario maps them.
    pub nodes: BTreeMap<String, String>,
    /// Stream → its replicas (node names), as first answered.
    pub replicas: BTreeMap<String, Vec<String>>,
    pub seconds: Vec<Second>,
    pub leader_changes: Vec<LeaderChange>,
    pub per_node: BTreeMap<String, NodeFigures>,
    /// Leaders or connections the scenario's nodes do not name, as the system named
    /// them (a misconfigured `cluster.nodes[].id`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_nodes: Vec<String>,
}

/// Read the placement every second until `stop`.
pub fn record(
    broker: Arc<dyn adapters::Broker>,
    cluster: Arc<ClusterSection>,
    tally: Tally,
    clock: Clock,
    rated_start_unix_ms: i64,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<ClusterRecord> {
    tokio::spawn(async move {
        let mut b = Builder::new(&cluster);
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = ((tally.published)(), (tally.delivered)());
        loop {
            tokio::select! {
                _ = stop.cancelled() => return b.done(),
                _ = tick.tick() => {}
            }
            let answer = tokio::select! {
                _ = stop.cancelled() => return b.done(),
                a = tokio::time::timeout(ANSWER, broker.placement()) => a.ok().flatten(),
            };
            let now = ((tally.published)(), (tally.delivered)());
            let at_ms = clock.now_us() / 1000 - rated_start_unix_ms;
            b.add(
                at_ms,
                answer.as_ref(),
                now.0.saturating_sub(last.0),
                now.1.saturating_sub(last.1),
            );
            last = now;
        }
    })
}

/// Builds the record from answers (pure: tested without a system).
#[derive(Debug)]
pub struct Builder<'a> {
    cluster: &'a ClusterSection,
    rec: ClusterRecord,
    leaders: BTreeMap<String, Option<String>>,
}

impl<'a> Builder<'a> {
    pub fn new(cluster: &'a ClusterSection) -> Self {
        Builder {
            cluster,
            rec: ClusterRecord {
                nodes: cluster
                    .nodes
                    .iter()
                    .map(|n| (n.name.clone(), n.system_id().to_string()))
                    .collect(),
                ..Default::default()
            },
            leaders: BTreeMap::new(),
        }
    }

    fn name(&mut self, id: &str) -> String {
        match self.cluster.node_of_system_id(id) {
            Some(n) => n.name.clone(),
            None => {
                if !self.rec.unknown_nodes.iter().any(|u| u == id) {
                    self.rec.unknown_nodes.push(id.to_string());
                }
                id.to_string()
            }
        }
    }

    pub fn add(
        &mut self,
        at_ms: i64,
        p: Option<&adapters::Placement>,
        published: u64,
        delivered: u64,
    ) {
        let mut sec = Second {
            at_ms,
            published,
            delivered,
            ..Default::default()
        };
        match p {
            None => sec.unanswered = self.leaders.len().max(1),
            Some(p) => {
                if self.rec.replicas.is_empty() {
                    let replicas: Vec<(String, Vec<String>)> = p
                        .replicas
                        .iter()
                        .map(|(s, r)| (s.clone(), r.clone()))
                        .collect();
                    for (s, r) in replicas {
                        let names = r.iter().map(|id| self.name(id)).collect();
                        self.rec.replicas.insert(s, names);
                    }
                }
                let mut now: BTreeMap<String, Option<String>> = BTreeMap::new();
                for (stream, id) in &p.leaders {
                    let n = self.name(id);
                    *sec.leaders.entry(n.clone()).or_default() += 1;
                    self.rec
                        .per_node
                        .entry(n.clone())
                        .or_default()
                        .led_stream_seconds += 1;
                    now.insert(stream.clone(), Some(n));
                }
                for stream in &p.leaderless {
                    now.insert(stream.clone(), None);
                }
                sec.leaderless = p.leaderless.len();
                sec.unanswered = p.unanswered.len();
                for id in &p.connected {
                    let n = self.name(id);
                    *sec.connected.entry(n.clone()).or_default() += 1;
                    self.rec.per_node.entry(n).or_default().connection_seconds += 1;
                }
                for (stream, to) in &now {
                    let from = self.leaders.get(stream);
                    if from.is_some_and(|f| f != to) {
                        self.rec.leader_changes.push(LeaderChange {
                            at_ms,
                            stream: stream.clone(),
                            from: from.cloned().flatten(),
                            to: to.clone(),
                        });
                    }
                }
                // A stream not answered for this second keeps its last leader.
                self.leaders.extend(now);
            }
        }
        self.rec.seconds.push(sec);
    }

    pub fn done(self) -> ClusterRecord {
        self.rec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> ClusterSection {
        serde_yaml::from_str(
            "nodes:\n  - {name: n1, id: 'cb@10.77.1.1', netns: a, address: 10.77.1.1, port: 1}\n  - {name: n2, netns: b, address: 10.77.1.2, port: 1}\n  - {name: n3, netns: c, address: 10.77.1.3, port: 1}\n",
        )
        .unwrap()
    }

    fn placement(
        leaders: &[(&str, &str)],
        leaderless: &[&str],
        connected: &[&str],
    ) -> adapters::Placement {
        adapters::Placement {
            leaders: leaders
                .iter()
                .map(|(s, l)| (s.to_string(), l.to_string()))
                .collect(),
            leaderless: leaderless.iter().map(|s| s.to_string()).collect(),
            replicas: leaders
                .iter()
                .map(|(s, _)| {
                    (
                        s.to_string(),
                        vec!["cb@10.77.1.1".into(), "n2".into(), "n3".into()],
                    )
                })
                .collect(),
            connected: connected.iter().map(|s| s.to_string()).collect(),
            unanswered: BTreeMap::new(),
        }
    }

    #[test]
    fn leaders_are_counted_per_node_and_every_change_is_kept() {
        let c = three();
        let mut b = Builder::new(&c);
        b.add(
            0,
            Some(&placement(
                &[("A", "cb@10.77.1.1"), ("B", "n2")],
                &[],
                &["n2", "n2"],
            )),
            10,
            9,
        );
        b.add(
            1000,
            Some(&placement(&[("B", "n2")], &["A"], &["n3"])),
            0,
            0,
        );
        b.add(2000, None, 0, 0);
        b.add(
            3000,
            Some(&placement(&[("A", "n3"), ("B", "n2")], &[], &["n3", "n9"])),
            5,
            5,
        );
        let r = b.done();
        assert_eq!(r.replicas["A"], ["n1", "n2", "n3"]);
        assert_eq!(
            r.seconds[0].leaders,
            BTreeMap::from([("n1".into(), 1), ("n2".into(), 1)])
        );
        assert_eq!(r.seconds[0].connected["n2"], 2);
        assert_eq!(r.seconds[1].leaderless, 1);
        assert!(r.seconds[2].unanswered > 0);
        let changes: Vec<(i64, &str, Option<&str>, Option<&str>)> = r
            .leader_changes
            .iter()
            .map(|c| {
                (
                    c.at_ms,
                    c.stream.as_str(),
                    c.from.as_deref(),
                    c.to.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            changes,
            [(1000, "A", Some("n1"), None), (3000, "A", None, Some("n3"))]
        );
        assert_eq!(r.per_node["n2"].led_stream_seconds, 3);
        assert_eq!(r.per_node["n2"].connection_seconds, 2);
        assert_eq!(r.unknown_nodes, ["n9"]);
    }
}
