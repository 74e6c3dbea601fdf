//! `result.json` of a pipeline cell: the workload's shape, its invariants, what the
//! system provisioned, the flows, throughput, latency, skew and every stream's
//! figures (docs/record.md).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::measure::counters::FlowSnapshot;
use crate::measure::histograms::Summary;
use crate::workload::pipeline::plan::Invariants;

/// A pipeline cell's figures: the fields of `result.json` between its head and its
/// tail (docs/record.md).
#[derive(Debug, Serialize)]
pub struct PipelineBody {
    pub workload: Shape,
    pub invariants: Invariants,
    pub provisioned: adapters::Description,
    pub flows: BTreeMap<String, FlowSnapshot>,
    /// `offered = published + shed + failed`, per flow, at the end of the run.
    pub identity_holds: bool,
    pub throughput: Throughput,
    pub latency_ms: Latency,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skew: Option<Skew>,
    pub streams: Vec<StreamFigures>,
}

/// `workload`: the shape the cell ran.
#[derive(Debug, Serialize)]
pub struct Shape {
    pub kind: String,
    pub rate_events_per_sec: u64,
    pub rate_a: u64,
    pub rate_b: u64,
    pub properties: u64,
    pub lanes: u64,
    pub batch: u64,
    pub payload_b: u64,
    pub lane_headroom: f64,
    pub lane_budget_total: u64,
    pub shards_per_flow: u64,
    pub base_seq: i64,
    pub dedup_window_sec: u64,
}

#[derive(Debug, Serialize)]
pub struct Throughput {
    /// Paced events scheduled inside the rated window, per second.
    pub offered_per_sec: f64,
    /// Of those, published, per second (shed and failed ones excluded).
    pub published_per_sec: f64,
    /// Deliveries of rated events to all twelve streams, per second of rated window
    /// (wherever they happened: a backlog drained after the window counts).
    pub deliveries_per_sec: f64,
    /// deliveries_per_sec / (6R): the share of the demanded deliveries served.
    pub served_fraction: f64,
    /// The reference's figure: all deliveries (warm-up and drain included) / rated seconds.
    pub reference_deliveries_per_sec: f64,
    /// Deliveries made while the rated window ran (of any event), per second of it:
    /// what the system kept up with in real time.
    pub window_deliveries_per_sec: f64,
    /// window_deliveries_per_sec / (6R): the share of the demand served as it came
    /// (a system that only caught up in the drain falls short here).
    pub window_served_fraction: f64,
}

#[derive(Debug, Serialize)]
pub struct Latency {
    pub e2e_a: Summary,
    pub e2e_b: Summary,
    pub e2e_warmup: Summary,
    pub schedule_lag: Summary,
    pub ingress_publish: Summary,
    /// `ideal` end-to-end work time at the median per flow (A: 15 + 30 ms, B: 10 + 30 ms).
    pub ideal_work_ms: BTreeMap<String, f64>,
    /// Several loaders: `e2e_a` / `e2e_b` split by whether the event's producer and
    /// the loader that finished it share a host (one clock: exact) or not (as good as
    /// the two clocks; see `loaders`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_a_same_host: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_a_cross_host: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_b_same_host: Option<Summary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2e_b_cross_host: Option<Summary>,
}

#[derive(Debug, Serialize)]
pub struct Skew {
    pub hot_props: u64,
    pub hot_factor: u64,
    pub hot_share_pct: f64,
    pub hot_lane_offered_per_sec: f64,
    pub cold_lane_offered_per_sec: f64,
    pub lane_ceiling_per_sec: f64,
    pub hot_saturated: bool,
    pub e2e_a_cold: Summary,
    pub e2e_a_hot: Summary,
    pub e2e_b_cold: Summary,
    pub e2e_b_hot: Summary,
    pub hot_over_cold_p99: f64,
}

#[derive(Debug, Serialize)]
pub struct StreamFigures {
    pub stream: String,
    pub flow: String,
    pub delivered: u64,
    pub processed: u64,
    pub processed_rated: u64,
    pub derived: u64,
    pub push_errors: u64,
    pub aborted_batches: u64,
    pub decode_errors: u64,
    pub slow_decodes: u64,
    pub acked: u64,
    pub ack_errors: u64,
    pub refused: u64,
    pub redelivered: u64,
    pub receive_errors: u64,
    pub reconnects: u64,
    pub lane_budget: u64,
    pub entry_age_ms: Summary,
    pub barrier_ms: Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_ms: Option<Summary>,
}
