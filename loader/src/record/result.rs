//! `result.json`: the envelope every cell's result has (its head and its tail),
//! with the workload's own figures in between. Versioned by `schema_version`;
//! documented in docs/record.md.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::host::Host;

pub const SCHEMA_VERSION: u32 = 1;

/// The fields every cell's `result.json` begins with, in both workloads.
#[derive(Debug, Serialize)]
pub struct CellHead {
    pub schema_version: u32,
    pub crossbench: BuildInfo,
    pub cell: String,
    /// How the cell ended ([`crate::cell::Outcome`], spelled by its name).
    pub outcome: crate::cell::Outcome,
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
        outcome: crate::cell::Outcome,
        d: &adapters::Description,
        time: Times,
        host: Host,
    ) -> Self {
        CellHead {
            schema_version: SCHEMA_VERSION,
            crossbench: BuildInfo::current(),
            cell: s.name.clone(),
            outcome,
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

/// A cell's `result.json`: the head, the workload's figures (`body`, whose fields
/// sit at the top level between the head's and the tail's), the tail.
#[derive(Debug, Serialize)]
pub struct CellResult<B> {
    #[serde(flatten)]
    pub head: CellHead,
    #[serde(flatten)]
    pub body: B,
    #[serde(flatten)]
    pub tail: CellTail,
}

/// The fields every cell's `result.json` ends with, in both workloads.
#[derive(Debug, Serialize)]
pub struct CellTail {
    pub loader: LoaderFigures,
    pub drain: DrainFigures,
    pub void: VoidFigures,
    /// Whether the load was held (added 2026-12, additive).
    pub load: LoadVerdict,
    pub verdict: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<serde_json::Value>,
    pub broker_stats: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
    /// The faults injected and what they did (cells with a `faults:` section or a
    /// proxy; added 2026-12, additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<crate::cell::faults::FaultRecord>,
    /// One loader of several (`--loader-index`, …): which, its share, the rendezvous,
    /// its host and clock bounds (docs/record.md; added 2026-12, additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaders: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize)]
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
    /// `normal` (no privilege: they competed with the stages as equals); `task` when
    /// the pacer was a task on the runtime's timer (`stream.push.pacer: runtime`).
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
            pacer_priority: crate::pacing::priority::pacer_priority().to_string(),
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

/// `load` in result.json.
#[derive(Debug, Clone, Serialize)]
pub struct LoadVerdict {
    /// `HELD` or `NOT-HELD`.
    pub verdict: &'static str,
    pub held: bool,
    /// Why not, one sentence each.
    pub reasons: Vec<String>,
    pub served_in_window: f64,
    pub served_min: f64,
    /// The scenario marked its load exploratory: NOT-HELD does not change the exit.
    pub exploratory: bool,
}
