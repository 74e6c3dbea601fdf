//! `result.json` of a stream cell. The envelope (schema_version, crossbench, cell,
//! outcome, system, variant, durability, delivery, accept, time, host, workload,
//! provisioned, flows, identity_holds, throughput, latency_ms, loader, drain, void,
//! verdict, cost, broker_stats, warnings) has the pipeline's field names and
//! meanings; `workload.kind` is `"stream"` and the stream-only figures are in
//! `partitions`, `groups` and `errors` (docs/record.md).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::measure::counters::FlowSnapshot;
use crate::measure::histograms::Summary;

/// A stream cell's figures: the fields of `result.json` between its head and its
/// tail.
#[derive(Debug, Serialize)]
pub struct StreamBody {
    pub workload: StreamShape,
    pub provisioned: adapters::Description,
    /// One flow, `S`, counted in messages.
    pub flows: BTreeMap<String, FlowSnapshot>,
    pub identity_holds: bool,
    pub throughput: StreamThroughput,
    pub latency_ms: StreamLatency,
    pub partitions: PartitionFigures,
    pub groups: Vec<GroupFigures>,
    pub errors: ErrorFigures,
}

#[derive(Debug, Serialize)]
pub struct StreamShape {
    pub kind: String,
    /// Offered messages per second of this cell.
    pub rate_msgs_per_sec: u64,
    /// The ladder this cell belongs to (empty for a single-rate scenario).
    pub ladder: Vec<u64>,
    pub space: u64,
    pub window: u64,
    pub rotate_every_sec: f64,
    pub rotate_step: u64,
    /// Partitions entering the window per second (0 = static window).
    pub window_partitions_per_sec: f64,
    pub lanes: u64,
    pub push_batch: u64,
    pub partitions_per_request: u64,
    pub push_workers: u64,
    pub push_in_flight: u64,
    pub push_requests_per_sec: f64,
    pub payload_b: u64,
    pub compressible: bool,
    pub groups: u64,
    pub consumers_per_group: u64,
    pub pop_batch: u64,
    pub pop_partitions: u64,
    pub ack_mode: String,
    pub ack_in_flight: u64,
    /// What each group's adapter was given as `ConsumeOptions::lanes`.
    pub consume_lanes: u64,
    pub base_seq: i64,
    pub dedup_window_sec: u64,
}

#[derive(Debug, Serialize)]
pub struct StreamThroughput {
    /// Messages scheduled inside the rated window, per second.
    pub offered_per_sec: f64,
    /// Of those, accepted by the system (shed and failed excluded), per second.
    pub published_per_sec: f64,
    /// Messages popped while the rated window ran, per group, per second.
    pub popped_per_sec: f64,
    /// Rated messages popped by the end of the drain, per group, ÷ rated messages
    /// accepted: 1.0 when everything was eventually consumed.
    pub eventually_popped_fraction: f64,
    /// Acks per second over the rated window (all groups / groups).
    pub acked_per_sec: f64,
    /// popped_per_sec / offered_per_sec.
    pub served_fraction: f64,
    /// Whether the system kept up: served ≥ 97 % and e2e p99 ≤ 5 s (seed 002's rule).
    pub behind: bool,
}

#[derive(Debug, Serialize)]
pub struct StreamLatency {
    /// Pop − scheduled instant, rated messages, all groups.
    pub e2e: Summary,
    pub e2e_warmup: Summary,
    /// Push request completion − scheduled instant (rated requests).
    pub push: Summary,
    /// One publish call's round trip.
    pub publish_rtt: Summary,
    pub schedule_lag: Summary,
    /// Mean ack call duration where the adapter times its acks (null otherwise).
    pub ack_round_trip_mean_ms: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct PartitionFigures {
    pub space: u64,
    /// Partitions with at least one acknowledged push.
    pub created: u64,
    /// Created in the rated window, per second.
    pub created_per_sec_rated: f64,
    /// Partitions completed before the warm-up (`stream.partitions.complete`): one
    /// message each, which every group popped besides the published ones. Absent
    /// when the space was not completed.
    #[serde(skip_serializing_if = "is_zero")]
    pub completed: u64,
    /// Partitions the checker saw, per group (from the verdict).
    pub seen_by_group: Vec<u64>,
}

#[derive(Debug, Serialize)]
pub struct GroupFigures {
    pub group: String,
    pub popped: u64,
    pub popped_rated: u64,
    pub batches: u64,
    pub acked: u64,
    pub ack_errors: u64,
    pub receive_errors: u64,
    pub refused: u64,
    pub redelivered: u64,
    pub reconnects: u64,
    pub decode_errors: u64,
}

#[derive(Debug, Serialize)]
pub struct ErrorFigures {
    /// Failed publish attempts by `BrokerError` class (each retried).
    pub push_by_class: BTreeMap<String, u64>,
    pub push: u64,
    /// Failed pop / fetch / read calls (retried by the adapter).
    pub pop: u64,
    pub ack: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
