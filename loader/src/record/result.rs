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
    /// What the system under test said it is, and how it is set (added 2026-12,
    /// additive; versioned by its own `schema`).
    pub provenance: ProvenanceRecord,
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
            provenance: ProvenanceRecord::new(s, d),
        }
    }
}

/// The version of the `provenance` block's own format.
pub const PROVENANCE_SCHEMA: u32 = 1;

/// `provenance` in result.json: the server's own answers about itself (read by the
/// adapter at setup, `adapters::Provenance`), and the build the scenario states.
#[derive(Debug, Clone, Serialize)]
pub struct ProvenanceRecord {
    pub schema: u32,
    #[serde(flatten)]
    pub server: adapters::Provenance,
    /// The scenario's `system_build`: the build of the system as the user states it
    /// (a commit, an image digest), beside the server's own answer. None: not stated.
    pub stated_build: Option<String>,
}

impl ProvenanceRecord {
    /// The block of a cell of scenario `s` whose system described itself as `d`.
    pub fn new(s: &crate::scenario::Scenario, d: &adapters::Description) -> Self {
        ProvenanceRecord {
            schema: PROVENANCE_SCHEMA,
            server: d.provenance.clone(),
            stated_build: s.system_build.clone(),
        }
    }

    /// invocation.txt's lines: `system_product:`, `system_version:` (with the
    /// caveat), `system_build:`, `system_build_stated:`, `system_reported:`,
    /// `system_settings:`, one `system_note:` each.
    pub fn lines(&self) -> Vec<String> {
        let p = &self.server;
        let mut out = vec![
            format!("system_product: {}", p.product),
            format!(
                "system_version: {}{}",
                p.version_or_not_reported(),
                if p.caveat.is_some() {
                    " (as the server reports it; NOT the build: see system_caveat)"
                } else {
                    " (as the server reports it)"
                }
            ),
        ];
        if let Some(b) = &p.build {
            out.push(format!("system_build_reported: {b}"));
        }
        out.push(format!(
            "system_build_stated: {}",
            self.stated_build
                .as_deref()
                .unwrap_or("(not stated: system_build)")
        ));
        if let Some(c) = &p.caveat {
            out.push(format!("system_caveat: {c}"));
        }
        if !p.reported.is_empty() {
            out.push(format!(
                "system_reported: {}",
                adapters::Provenance::joined(&p.reported)
            ));
        }
        if !p.settings.is_empty() {
            out.push(format!(
                "system_settings: {}",
                adapters::Provenance::joined(&p.settings)
            ));
        }
        out.push(format!("system_source: {}", p.source));
        out.extend(p.notes.iter().map(|n| format!("system_note: {n}")));
        out
    }
}

/// The record's warnings about provenance: a loader built from a modified tree
/// (`-dirty`: no commit in the history is this build), and a server whose version is
/// known not to name its build when the scenario states none.
pub fn provenance_warnings(
    s: &crate::scenario::Scenario,
    d: &adapters::Description,
) -> Vec<String> {
    let mut w = Vec::new();
    let b = BuildInfo::current();
    if b.dirty() {
        w.push(format!(
            "DIRTY BUILD: crossbench {} was built from a modified tree (git {}): no commit in the history is this build, so the record cannot be reproduced from one",
            b.version, b.git_commit
        ));
    }
    if let (Some(c), None) = (&d.provenance.caveat, &s.system_build) {
        w.push(format!(
            "BUILD UNSTATED: {} reports version {}, which does not name the build measured ({c})",
            d.provenance.product,
            d.provenance.version_or_not_reported()
        ));
    }
    // The section's own: TLS that does not verify, a password in the scenario's text.
    w.extend(s.options.warnings());
    w
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
    /// The checker's verdict (its keys sorted, as records have always had them).
    #[serde(serialize_with = "sorted")]
    pub verdict: checker::Verdict,
    /// The sampler's summary of the rated window (sampler/FORMAT.md; keys sorted).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "sorted")]
    pub cost: Option<sampler::CostSummary>,
    pub broker_stats: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
    /// The faults injected and what they did (cells with a `faults:` section or a
    /// proxy; added 2026-12, additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<crate::cell::faults::FaultRecord>,
    /// The resource budget asked, enforced and used (`resources`, schema 1; issue 42,
    /// additive; docs/record.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<cell_record::resources::Resources>,
    /// One loader of several (`--loader-index`, …): which, its share, the rendezvous,
    /// its host and clock bounds (docs/record.md; added 2026-12, additive).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "sorted")]
    pub loaders: Option<crate::fleet::LoadersRecord>,
}

/// Serialise `v` with every object's keys in sorted order (through a JSON value,
/// whose maps are sorted): the order these blocks have had since the first record.
fn sorted<T: Serialize, S: serde::Serializer>(v: &T, ser: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(v)
        .map_err(serde::ser::Error::custom)?
        .serialize(ser)
}

/// `crossbench` in every record: `version`, `git_commit` (`-dirty` when built from a
/// modified tree) and `dirty` (added 2026-12: the same, as a flag readers need not
/// parse).
#[derive(Debug, Clone)]
pub struct BuildInfo {
    pub version: String,
    pub git_commit: String,
}

impl Serialize for BuildInfo {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut st = ser.serialize_struct("BuildInfo", 3)?;
        st.serialize_field("version", &self.version)?;
        st.serialize_field("git_commit", &self.git_commit)?;
        st.serialize_field("dirty", &self.dirty())?;
        st.end()
    }
}

impl BuildInfo {
    /// Built from a tree with changes no commit holds (`git_commit` ends `-dirty`).
    pub fn dirty(&self) -> bool {
        self.git_commit.ends_with("-dirty")
    }

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
    write_record(dir, result).map(|_| ())
}

/// Write `result.json` as [`write_result`] does, and return it as every reader sees
/// it: the text written, read by the record's one reader in memory (a record the
/// reader refuses is an error here, at its writing).
pub fn write_record<T: Serialize>(
    dir: &std::path::Path,
    result: &T,
) -> anyhow::Result<cell_record::CellResult> {
    use anyhow::Context as _;
    let mut json = serde_json::to_string_pretty(result).context("serialising result.json")?;
    json.push('\n');
    let path = dir.join("result.json");
    let text = crate::record::redact::redact(&json);
    std::fs::write(&path, &text).context("writing result.json")?;
    Ok(cell_record::CellResult::parse(&path, &text)?)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_says_dirty_as_a_flag() {
        let b = BuildInfo {
            version: "0.1.0".into(),
            git_commit: "2c6d437abcde-dirty".into(),
        };
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["dirty"], true, "{v}");
        assert_eq!(v["git_commit"], "2c6d437abcde-dirty");
        let clean = BuildInfo {
            git_commit: "2c6d437abcde".into(),
            ..b
        };
        assert_eq!(serde_json::to_value(&clean).unwrap()["dirty"], false);
    }
}
