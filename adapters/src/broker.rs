//! The one broker trait every adapter implements, and the types it speaks.
//!
//! The contract (SPEC.md §6) in one paragraph: `setup` builds (or rebuilds) the
//! topology; `publish` appends a batch of payloads for one ordering key, in order;
//! `consume` runs until its stop token fires, handing the stage *key-batches* (one
//! key, in publish order, never the same key in flight twice within one group) and
//! acking a batch iff the handler says [`Disposition::Ack`]. A refused batch must come
//! back (redelivery). Adapters count what they do in the [`StreamCounters`] they are
//! given and in their own [`Broker::counters`].

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::counter::Counter;
use crate::error::BrokerError;

/// One logical topic and the consumer groups that read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicSpec {
    /// Full topic name (prefix already applied).
    pub name: String,
    /// Consumer groups reading this topic, in stream order.
    pub groups: Vec<String>,
}

/// What `setup` builds.
#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    pub topics: Vec<TopicSpec>,
    /// Number of distinct ordering keys the workload will use (P). Adapters that
    /// clamp physical lanes to the key count use it.
    pub keys: u64,
    /// Physical ordered lanes per topic (partitions, lane queues, hashed groups).
    /// Equal to `keys` unless the scenario lowers it to measure head-of-line blocking.
    pub lanes: u64,
    /// Durability tier requested by the scenario.
    pub durability: Durability,
    /// Broker-side dedup window in seconds (0 = off). Adapters that cannot honour
    /// it say so in [`Description::notes`].
    pub dedup_window_sec: u64,
    /// Drop and recreate everything first.
    pub reset: bool,
    /// The consumer processes that read every stream of this topology together
    /// (several loaders in the `shared` topology), and which one this is.
    pub sharing: Sharing,
}

/// How many loader processes consume every stream of a topology together, and which
/// one this process is (SPEC.md §10). An adapter whose system keeps a key at one
/// consumer at a time only when told (RabbitMQ's single active consumer) sets that up
/// when `processes > 1`; one whose consumers can balance across processes may let
/// process `index` go first on its share of the lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sharing {
    pub processes: u64,
    pub index: u64,
}

impl Sharing {
    /// One process: the ordinary cell.
    pub const ALONE: Sharing = Sharing {
        processes: 1,
        index: 0,
    };

    pub fn is_shared(&self) -> bool {
        self.processes > 1
    }
}

impl Topology {
    /// Physical lanes for an adapter with one physical stream per lane: the
    /// topology's lanes, at least 1, at most its keys and (when not 0) `max_lanes`.
    pub fn physical_lanes(&self, max_lanes: u64) -> u64 {
        let l = self.lanes.clamp(1, self.keys.max(1));
        if max_lanes > 0 {
            l.min(max_lanes)
        } else {
            l
        }
    }

    /// Number of (topic, group) consumer streams.
    pub fn stream_count(&self) -> usize {
        self.topics.iter().map(|t| t.groups.len()).sum()
    }

    /// Flows through the topology: the pipeline's topics come in (ingress, derived)
    /// pairs, one pair per flow; a single-topic workload has one flow.
    pub fn flow_count(&self) -> usize {
        (self.topics.len() / 2).max(1)
    }

    /// Physical writes per ingress event when the system writes one copy per
    /// consuming group (materialised fan-out): 6 in the pipeline (1 + 5).
    pub fn materialised_publishes_per_ingress_event(&self) -> f64 {
        self.stream_count() as f64 / self.flow_count() as f64
    }

    /// Physical writes per ingress event with native fan-out (one write per topic an
    /// event passes through): 2 in the pipeline.
    pub fn native_publishes_per_ingress_event(&self) -> f64 {
        self.topics.len() as f64 / self.flow_count() as f64
    }
}

/// Durability tier. A cell's tier is always named next to its figures; cells of
/// different tiers are never compared without saying so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// The system as people deploy it by default.
    #[default]
    Default,
    /// Every acknowledged write is fsynced before the ack.
    Fsync,
    /// In-memory only: nothing survives a restart (the control broker).
    Memory,
    /// The server persists nothing at all (a Redis with neither AOF nor snapshots): a
    /// tier an adapter *finds*, recorded as it is and flagged, never blurred into a
    /// durable one. As a request it means the same as `memory`: nothing is promised.
    None,
}

impl Durability {
    /// True for the tiers that promise nothing across a restart (`memory`, `none`).
    pub fn keeps_nothing(self) -> bool {
        matches!(self, Durability::Memory | Durability::None)
    }
}

/// How a publish reaches several consumer groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FanOut {
    /// One physical write serves every group (Kafka, Queen, the control broker).
    Native,
    /// One physical write per group (pgmq, RabbitMQ queue per group).
    Materialised,
}

/// The delivery guarantee an adapter provides in the configuration it runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryGuarantee {
    /// Each message is processed exactly once per group (dedup or transactional).
    ExactlyOnce,
    /// A message may be processed more than once (redelivery after a lost ack).
    AtLeastOnce,
    /// The broker commits at delivery (auto-ack): a crash loses messages.
    AtMostOnce,
}

/// What an adapter is, declared once after setup and recorded in result.json.
#[derive(Debug, Clone, Serialize)]
pub struct Description {
    /// System name (`mem`, `pgmq`, `rabbitmq`, `kafka`, `queen`).
    pub system: String,
    /// Variant inside the system (idiom, queue type, pop mode), `""` when none.
    pub variant: String,
    pub durability: Durability,
    pub fan_out: FanOut,
    pub delivery: DeliveryGuarantee,
    /// Ordered lanes provisioned in total (all topics, and all groups where lanes are per group).
    pub ordered_lanes: u64,
    /// Physical queues / topics / tables created.
    pub physical_queues: u64,
    /// Consumer members (clients) provisioned, summed over streams.
    pub consumer_members: u64,
    /// Network connections opened to the system.
    pub connections: u64,
    /// Physical writes the system performs per ingress event over the whole topology:
    /// every ingress publish and every derived publish, times the copies the system
    /// makes. The channel-manager pipeline gives 2 with native fan-out (the ingress
    /// write and one derived write serve all groups) and 6 when every consuming group
    /// gets its own copy (1 ingress row + 5 derived rows).
    pub publishes_per_ingress_event: f64,
    /// Semantics the application had to build because the system lacks them.
    pub semantics_built_in_app: Vec<String>,
    /// Free-text facts a reader needs (e.g. "dedup window not supported by this server").
    pub notes: Vec<String>,
    /// After how long an unacknowledged delivery is handed out again (lease,
    /// visibility timeout), when the system works that way. The drain's grace must
    /// exceed it so a lost tail is told apart from one still leased.
    pub lease_ms: Option<u64>,
    /// What the server said it is and how it is set, read at setup. Written by the
    /// loader as `result.json`'s own `provenance` block, not under `provisioned`.
    #[serde(skip)]
    pub provenance: crate::provenance::Provenance,
}

/// One message handed to a stage.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub payload: Bytes,
    /// The broker says this message was delivered before (informational).
    pub redelivered: bool,
}

/// One key's messages, in publish order.
#[derive(Debug, Clone)]
pub struct KeyBatch {
    /// The ordering key the batch belongs to (`p<N>` or a lane name when lanes < keys).
    pub key: Arc<str>,
    pub messages: Vec<Delivery>,
}

/// What the stage decided about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Processed: ack the whole batch.
    Ack,
    /// Not processed: do not ack; the system must deliver the whole batch again.
    Refuse,
}

/// The stage side of `consume`.
#[async_trait]
pub trait BatchHandler: Send + Sync {
    async fn handle(&self, batch: KeyBatch) -> Disposition;
}

/// Per-stream counters the adapter bumps while consuming. Shared with the stage, the
/// reporter and the checker (a stream whose own acks failed may legitimately reorder).
#[derive(Debug, Default, Serialize)]
pub struct StreamCounters {
    /// Messages acked successfully.
    pub acked: Counter,
    /// Messages whose ack (or commit / delete) failed.
    pub ack_errors: Counter,
    /// Messages in refused batches.
    pub refused: Counter,
    /// Messages the system flagged as redelivered.
    pub redelivered: Counter,
    /// Failed receive calls (pop, fetch, read), retried.
    pub receive_errors: Counter,
    /// Reconnects performed after a lost connection or channel.
    pub reconnects: Counter,
    /// Ack (or commit / delete) calls the adapter timed, and their summed duration in
    /// µs: the mean ack round trip. Optional: adapters that do not time acks leave 0.
    pub ack_calls: Counter,
    pub ack_micros: Counter,
}

impl StreamCounters {
    pub fn add(counter: &Counter, n: u64) {
        counter.add(n);
    }
    pub fn get(counter: &Counter) -> u64 {
        counter.get()
    }
}

/// Options for one consumer stream.
#[derive(Debug, Clone)]
pub struct ConsumeOptions {
    /// Maximum messages per key-batch (also the pop / read / prefetch size).
    pub batch: usize,
    /// The stage's lane budget: how many messages the stage can work on at once.
    /// Adapters size their worker pools from it.
    pub lanes: usize,
    /// Counters for this stream.
    pub counters: Arc<StreamCounters>,
}

/// Messages a system still holds for its consumers ([`Broker::held`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Messages waiting for a consumer, every place together.
    pub messages: u64,
    /// Places (queues, streams) holding any.
    pub places: u64,
    /// The fullest places, fullest first, at most [`Held::SHOWN`]: (name, messages).
    pub fullest: Vec<(String, u64)>,
}

impl Held {
    /// How many places [`Held::fullest`] names.
    pub const SHOWN: usize = 5;

    /// From (place, messages) pairs; places holding nothing are left out.
    pub fn from_places(places: impl IntoIterator<Item = (String, u64)>) -> Held {
        let mut holding: Vec<(String, u64)> = places.into_iter().filter(|(_, n)| *n > 0).collect();
        holding.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Held {
            messages: holding.iter().map(|(_, n)| n).sum(),
            places: holding.len() as u64,
            fullest: holding.into_iter().take(Held::SHOWN).collect(),
        }
    }

    /// "12 in q1, 3 in q2" (and how many more places).
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .fullest
            .iter()
            .map(|(name, n)| format!("{n} in {name}"))
            .collect();
        let more = self.places.saturating_sub(self.fullest.len() as u64);
        if more > 0 {
            parts.push(format!("{more} more places"));
        }
        parts.join(", ")
    }
}

/// The broker trait. Object safe: the loader holds an `Arc<dyn Broker>`.
#[async_trait]
pub trait Broker: Send + Sync {
    /// Build the topology (drop and recreate first when `topology.reset`). Idempotent.
    /// Returns what was provisioned.
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError>;

    /// Publish `payloads` for one ordering key, in order. Returns only when the system
    /// has accepted all of them at the adapter's durability tier. On error, none, some
    /// or all may have been accepted (an indeterminate publish).
    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError>;

    /// Consume one (topic, group) until `stop` fires, handing key-batches to `handler`.
    /// Must never hand the same key to two concurrent handler calls of one group.
    /// Failures of individual receive/ack calls are counted and retried, never fatal;
    /// only a broken setup returns an error.
    async fn consume(
        &self,
        topic: &str,
        group: &str,
        options: ConsumeOptions,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
    ) -> Result<(), BrokerError>;

    /// Adapter-level counters (copied into result.json under `broker_stats`).
    fn counters(&self) -> BTreeMap<String, u64>;

    /// What the system still holds for the consumers of the last setup's topology
    /// (messages waiting that no consumer took), as the system itself counts them,
    /// when the adapter can ask; `None` when it cannot. The loader asks when a drain
    /// gave up because nothing moved for its grace: a tail the system still holds was
    /// not lost, its consumers stalled.
    async fn held(&self) -> Option<Held> {
        None
    }

    /// The system's bare read path without this adapter's guard, driven by
    /// concurrent readers to count exclusivity breaches ([`crate::race`]), when the
    /// adapter guards a race of the system's own; `None` otherwise.
    fn exclusivity_probe(&self) -> Option<Box<dyn crate::race::ExclusivityProbe>> {
        None
    }

    /// Where the system keeps and leads the streams of the last setup's topology, and
    /// which node each connection is on, as the system answers now
    /// ([`crate::placement`]); `None` when the adapter cannot ask (a system with no
    /// replicated streams, or one the adapter does not ask). Never waits longer than
    /// the adapter's request timeout per question.
    async fn placement(&self) -> Option<crate::placement::Placement> {
        None
    }

    /// Release connections.
    async fn close(&self) -> Result<(), BrokerError>;
}

impl std::fmt::Debug for dyn Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn Broker")
    }
}

impl std::fmt::Debug for dyn BatchHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn BatchHandler")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_keeps_the_fullest_places_and_counts_every_one() {
        let h = Held::from_places(
            (0..8u64)
                .map(|i| (format!("q{i}"), i * 10))
                .chain([("empty".to_string(), 0)]),
        );
        assert_eq!(h.messages, 280);
        assert_eq!(h.places, 7, "places holding nothing are left out");
        assert_eq!(h.fullest.len(), Held::SHOWN);
        assert_eq!(h.fullest[0], ("q7".to_string(), 70));
        assert_eq!(
            h.describe(),
            "70 in q7, 60 in q6, 50 in q5, 40 in q4, 30 in q3, 2 more places"
        );
        assert_eq!(Held::from_places([]), Held::default());
    }
}
