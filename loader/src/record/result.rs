//! `result.json`: every counter, invariant, per-stream and per-flow figure, the
//! verdict and its reasons. Versioned by `schema_version`; documented in
//! docs/result-json.md.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::counters::FlowSnapshot;
use crate::histograms::Summary;
use crate::plan::Invariants;
use crate::record::host::Host;

pub const SCHEMA_VERSION: u32 = 1;

/// The fields every cell's `result.json` begins with, in both workloads.
#[derive(Debug, Serialize)]
pub struct CellHead {
    pub schema_version: u32,
    pub crossbench: BuildInfo,
    pub cell: String,
    /// PASS, FAIL (correctness) or VOID (the loader, not the system, was the limit).
    pub outcome: String,
    pub system: String,
    pub variant: String,
    pub durability: adapters::Durability,
    pub delivery: adapters::DeliveryGuarantee,
    pub accept: crate::scenario::Accept,
    pub time: Times,
    pub host: Host,
}

impl CellHead {
    /// The head of a cell of scenario `s` that the system described as `d`.
    pub fn new(
        s: &crate::scenario::Scenario,
        outcome: crate::run::Outcome,
        d: &adapters::Description,
        time: Times,
        host: Host,
    ) -> Self {
        CellHead {
            schema_version: SCHEMA_VERSION,
            crossbench: BuildInfo::current(),
            cell: s.name.clone(),
            outcome: outcome.name().into(),
            system: d.system.clone(),
            variant: d.variant.clone(),
            durability: d.durability,
            delivery: d.delivery,
            accept: s.accept,
            time,
            host,
        }
    }
}

/// The fields every cell's `result.json` ends with, in both workloads.
#[derive(Debug, Serialize)]
pub struct CellTail {
    pub loader: LoaderFigures,
    pub drain: DrainFigures,
    pub void: VoidFigures,
    pub verdict: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<serde_json::Value>,
    pub broker_stats: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CellResult {
    #[serde(flatten)]
    pub head: CellHead,
    pub workload: Workload,
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
    #[serde(flatten)]
    pub tail: CellTail,
}

#[derive(Debug, Serialize)]
pub struct BuildInfo {
    pub version: String,
    pub git_commit: String,
}

impl BuildInfo {
    /// This build's version and commit.
    pub fn current() -> Self {
        let (version, git_commit) = crate::record::invocation::build_id();
        BuildInfo {
            version,
            git_commit,
        }
    }
}

impl Times {
    /// The times of a cell that started at `started` (wall clock), whose rated window
    /// began at `rated_start_us` (µs since the epoch) and ran `rated_sec`.
    pub fn new(
        started: std::time::SystemTime,
        ended: std::time::SystemTime,
        rated_start_us: i64,
        rated_sec: f64,
        warmup_sec: f64,
        drain_sec: f64,
        hydration_sec: f64,
    ) -> Self {
        use crate::record::invocation::utc;
        let rated_start_unix_ms = rated_start_us / 1000;
        Times {
            started_utc: utc(started),
            ended_utc: utc(ended),
            started_unix_ms: started
                .duration_since(std::time::SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            rated_start_unix_ms,
            rated_end_unix_ms: rated_start_unix_ms + (rated_sec * 1000.0) as i64,
            rated_sec,
            warmup_sec,
            drain_sec,
            hydration_sec,
        }
    }
}

/// Write `result.json` (pretty, one trailing newline, secrets redacted).
pub fn write_result<T: Serialize>(dir: &std::path::Path, result: &T) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut json = serde_json::to_string_pretty(result).context("serialising result.json")?;
    json.push('\n');
    std::fs::write(
        dir.join("result.json"),
        crate::record::redact::redact(&json),
    )
    .context("writing result.json")
}

#[derive(Debug, Serialize)]
pub struct Times {
    pub started_utc: String,
    pub ended_utc: String,
    pub started_unix_ms: i64,
    pub rated_start_unix_ms: i64,
    pub rated_end_unix_ms: i64,
    /// Rated window as it actually ran (shorter when stopped early).
    pub rated_sec: f64,
    pub warmup_sec: f64,
    pub drain_sec: f64,
    pub hydration_sec: f64,
}

#[derive(Debug, Serialize)]
pub struct Workload {
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
    /// Deliveries of rated events to all twelve streams, per second of rated window.
    pub deliveries_per_sec: f64,
    /// deliveries_per_sec / (6R): the share of the demanded deliveries served.
    pub served_fraction: f64,
    /// The reference's figure: all deliveries (warm-up and drain included) / rated seconds.
    pub reference_deliveries_per_sec: f64,
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

#[derive(Debug, Serialize)]
pub struct LoaderFigures {
    /// Mean cores the crossbench process used over the rated window (the in-process
    /// control broker included when system = mem).
    pub cpu_cores_mean: f64,
    pub cores_available: f64,
    pub cpu_fraction_of_available: f64,
    /// Loader CPU per delivery over the rated window: its CPU in the window ÷ every
    /// delivery made while the window ran (whenever that event was scheduled).
    pub cpu_us_per_delivery: f64,
    pub peak_rss_bytes: u64,
    pub runtime_threads: usize,
    /// Scheduling the pacer threads got: `fifo` (real-time), `nice` (−10) or
    /// `normal` (no privilege: they competed with the stages as equals).
    pub pacer_priority: String,
}

impl LoaderFigures {
    /// The loader's figures over a rated window in which it used `cpu_seconds` of CPU
    /// in `wall_sec` and made `deliveries`.
    pub fn measure(cpu_seconds: f64, wall_sec: f64, deliveries: u64) -> Self {
        let cores = cpu_seconds / wall_sec.max(1e-9);
        let avail = crate::record::host::cores_available();
        LoaderFigures {
            cpu_cores_mean: cores,
            cores_available: avail,
            cpu_fraction_of_available: cores / avail,
            cpu_us_per_delivery: cpu_seconds * 1e6 / deliveries.max(1) as f64,
            peak_rss_bytes: crate::record::host::peak_rss_bytes(),
            runtime_threads: tokio::runtime::Handle::try_current()
                .map_or(0, |h| h.metrics().num_workers()),
            pacer_priority: crate::priority::pacer_priority().to_string(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct DrainFigures {
    /// caught-up, grace or cut-short.
    pub outcome: String,
    pub seconds: f64,
    pub grace_sec: f64,
    pub max_sec: f64,
}

#[derive(Debug, Serialize)]
pub struct VoidFigures {
    pub void: bool,
    pub reasons: Vec<String>,
}
