//! `result.json`'s one reader (schema_version 1, docs/record.md). Lenient about fields
//! added later (additive changes keep schema_version 1), strict about the version
//! itself and about the outcome: a record of another version, or with an outcome this
//! build does not know, is an error naming the file.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::RecordError;
use crate::outcome::Outcome;

/// The `result.json` schema version this reader understands.
pub const RESULT_SCHEMA_VERSION: u64 = 1;

/// `result.json` as every reader sees it: the fields the readers use, typed.
#[derive(Debug, Clone, Deserialize)]
pub struct CellResult {
    /// Checked by [`CellResult::from_value`] before the rest is read.
    #[serde(default)]
    pub schema_version: u64,
    #[serde(default)]
    pub cell: String,
    /// How the cell ended; a name no crossbench wrote is an error, never a default.
    pub outcome: Outcome,
    #[serde(default)]
    pub system: String,
    #[serde(default)]
    pub variant: String,
    #[serde(default)]
    pub durability: String,
    #[serde(default)]
    pub delivery: String,
    /// `exactly-once` or `at-least-once` (duplicates allowed).
    #[serde(default)]
    pub accept: String,
    #[serde(default)]
    pub time: Times,
    #[serde(default)]
    pub host: Host,
    #[serde(default)]
    pub workload: Workload,
    #[serde(default)]
    pub provisioned: Provisioned,
    #[serde(default)]
    pub flows: std::collections::BTreeMap<String, Flow>,
    #[serde(default)]
    pub throughput: Throughput,
    #[serde(default)]
    pub latency_ms: Latency,
    #[serde(default)]
    pub loader: Loader,
    #[serde(default)]
    pub drain: Drain,
    #[serde(default)]
    pub void: Void,
    #[serde(default)]
    pub verdict: Verdict,
    #[serde(default)]
    pub cost: Option<Cost>,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Present when the system refused the topology (`outcome: REFUSED`).
    #[serde(default)]
    pub refused: Option<Refused>,
    /// The build that wrote the record.
    #[serde(default)]
    pub crossbench: Build,
    /// Whether the load was held (records since 2026-12; `None` before).
    #[serde(default)]
    pub load: Option<Load>,
    /// Stream cells: the partition space and what was created of it.
    #[serde(default)]
    pub partitions: Option<Partitions>,
    /// The system's own counters (`pgmq_rows_deferred`, …), by name.
    #[serde(default)]
    pub broker_stats: std::collections::BTreeMap<String, u64>,
    /// What the system under test said it is (records since 2026-12; `None` before).
    #[serde(default)]
    pub provenance: Option<Provenance>,
    /// The resource budget asked, enforced and used (records since issue 42;
    /// `None` before, read as "no budget": [`crate::resources::Resources::label_of`]).
    #[serde(default)]
    pub resources: Option<crate::resources::Resources>,
    /// A loader of several (docs/record.md, `loaders`): its place in the cell, its host
    /// and clocks; `None` in a cell of one loader recorded without `--loader-count`.
    #[serde(default)]
    pub loaders: Option<Loaders>,
    /// A loader's record of a cell given up before its traffic started: which loader
    /// failed, at which stage, why.
    #[serde(default)]
    pub abandoned: Option<Kept<Abandonment>>,
    /// Pipeline cells: the demand the scenario implies.
    #[serde(default)]
    pub invariants: Invariants,
    /// Pipeline cells: each stream's figures, in the order the topology names them.
    #[serde(default)]
    pub streams: Vec<StreamFigures>,
    /// Stream cells: what each consumer group popped and acknowledged.
    #[serde(default)]
    pub groups: Vec<Group>,
    /// Stream cells: failed push, pop and ack calls (each retried).
    #[serde(default)]
    pub errors: Option<Errors>,
    /// Cells with faults: what was injected and what it did (docs/record.md, `faults`).
    #[serde(default)]
    pub faults: Option<Faults>,
}

/// `faults` (cells with a `faults:` or `proxy:` section), as far as the reports read it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Faults {
    pub schedule: Vec<FaultSpec>,
    pub events: Vec<FaultEvent>,
    pub figures: FaultFigures,
    /// Cells with a `cluster:` section.
    pub cluster: Option<FaultCluster>,
}

/// One fault of `faults.schedule`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FaultSpec {
    pub kind: String,
    /// As written (`5s`).
    pub at: String,
    pub duration: String,
    pub params: serde_json::Value,
}

/// One of `faults.events`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FaultEvent {
    pub fault: usize,
    pub action: String,
    pub at_ms: i64,
    pub target: Option<String>,
    pub detail: Option<String>,
    pub ineffective: Option<String>,
}

/// `faults.figures`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FaultFigures {
    pub unavailability_ms: Unavailability,
    pub recovery: Vec<Recovery>,
    pub reconnects: u64,
}

/// `faults.figures.unavailability_ms`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Unavailability {
    pub publish_ms: i64,
    pub delivery_ms: i64,
}

/// One of `faults.figures.recovery`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Recovery {
    pub time_to_recover_ms: Option<i64>,
    pub note: Option<String>,
}

/// `faults.cluster`, as far as the reports read it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FaultCluster {
    pub leader_changes: Vec<serde_json::Value>,
}

/// A block read typed and kept as written: [`Kept::typed`] for reading it,
/// [`Kept::json`] to carry it whole into another record (a merge copies each loader's
/// host and clocks into its record, with any field this reader does not know).
/// Serialises as written.
#[derive(Debug, Clone, Default)]
pub struct Kept<T> {
    pub typed: T,
    pub json: serde_json::Value,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Kept<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = serde_json::Value::deserialize(d)?;
        let typed = T::deserialize(&json).map_err(serde::de::Error::custom)?;
        Ok(Kept { typed, json })
    }
}

impl<T> Serialize for Kept<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

/// `loaders` (docs/record.md): a loader's place in a cell run by several.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Loaders {
    /// N.
    pub count: Option<u64>,
    /// This loader's index; absent in a merged record.
    pub index: Option<u64>,
    /// `shared` or `partitioned`.
    pub topology: Option<String>,
    /// The rendezvous (empty with one loader).
    pub rendezvous: Option<String>,
    /// This loader's properties and its part of the rate, as written.
    pub share: Option<serde_json::Value>,
    /// The namespace prefix of a partitioned loader.
    pub namespace: Option<String>,
    /// The start instant every loader paced from, Unix µs.
    pub start_unix_us: Option<i64>,
    pub host: Option<Kept<LoaderHost>>,
    pub clock_start: Option<Kept<ClockBound>>,
    pub clock_end: Option<Kept<ClockBound>>,
    /// Why the cell was given up, when a loader abandoned it while it paced.
    pub abandoned: Option<Kept<Abandonment>>,
}

/// `loaders.host`: the host a loader ran on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LoaderHost {
    pub hostname: String,
    /// One per boot of a kernel: loaders with the same one share a clock.
    pub boot_id: Option<String>,
    pub pid: u64,
}

/// `loaders.clock_start`, `loaders.clock_end`: a bound on the loader's clock offset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ClockBound {
    /// `chrony`, `kernel` or `unknown`.
    pub source: String,
    /// `None` when unknown.
    pub offset_bound_us: Option<u64>,
    pub detail: String,
}

/// `abandoned`, `loaders.abandoned`: which loader gave the cell up, where and why.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Abandonment {
    pub loader: u64,
    pub stage: String,
    pub why: String,
}

/// Where a record sits among the loaders of one cell: its cell and its `loaders`
/// block, read without [`CellResult::from_value`]'s checks (a merge says a record is
/// not a loader's, or not of the same cell, before it judges the record's version or
/// outcome). A record whose cell or `loaders` is of another shape reads as none.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Placement {
    pub cell: Option<String>,
    pub loaders: Loaders,
}

impl Placement {
    pub fn of(value: &serde_json::Value) -> Placement {
        Placement::deserialize(value).unwrap_or_default()
    }
}

/// The blocks of a record that a merge carries into another as they were written,
/// never reading into them (docs/record.md, `loaders.loaders[]`, and the merged record
/// of an abandoned cell): each is `None` when the record has none.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Carried {
    pub workload: Option<serde_json::Value>,
    pub void: Option<serde_json::Value>,
    pub load: Option<serde_json::Value>,
    pub drain: Option<serde_json::Value>,
}

impl Carried {
    pub fn of(value: &serde_json::Value) -> Carried {
        Carried::deserialize(value).unwrap_or_default()
    }
}

/// `invariants` (pipeline cells).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Invariants {
    /// The deliveries per second the offered rate implies (6R).
    pub deliveries_per_sec: f64,
}

/// One entry of `streams` (pipeline cells).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamFigures {
    /// The stream's name (a partitioned loader's carries its namespace).
    pub stream: Option<String>,
}

/// A stream cell's consumer group (`groups[]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Group {
    pub group: String,
    pub popped: u64,
    pub acked: u64,
}

/// A stream cell's failed calls (`errors`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Errors {
    pub push: u64,
    pub pop: u64,
    pub ack: u64,
}

/// `provenance`: the system's product, version and settings as it reported them at
/// setup, and the build the scenario states (docs/record.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Provenance {
    pub schema: u32,
    pub product: String,
    /// As the server reports it; `None` when it reports none.
    pub version: Option<String>,
    pub build: Option<String>,
    pub source: String,
    pub reported: std::collections::BTreeMap<String, String>,
    pub settings: std::collections::BTreeMap<String, String>,
    /// Present when the server's version is known not to name the build measured.
    pub caveat: Option<String>,
    pub notes: Vec<String>,
    /// The scenario's `system_build`.
    pub stated_build: Option<String>,
}

impl Provenance {
    /// The product as a comparison names it: `Queen 1.0.0`, `PostgreSQL 15.19`; the
    /// stated build beside a version known not to name it (`Queen 1.0.0 (build
    /// ab23212)`), or `(build unstated)` when none was stated.
    pub fn label(&self) -> String {
        let mut s = match &self.version {
            Some(v) => format!("{} {v}", self.product),
            None => format!("{} (version not reported)", self.product),
        };
        match (&self.stated_build, &self.caveat) {
            (Some(b), _) => s.push_str(&format!(" (build {b})")),
            (None, Some(_)) => s.push_str(" (build unstated)"),
            (None, None) => {}
        }
        s
    }
}

/// The crossbench build that wrote a record.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Build {
    pub version: String,
    /// The commit, `-dirty` appended when the working tree had changes.
    pub git_commit: String,
    /// Records since 2026-12 say it in so many words.
    pub dirty: Option<bool>,
}

impl Build {
    /// Built from a working tree with uncommitted changes: no commit names what ran.
    pub fn is_dirty(&self) -> bool {
        self.dirty.unwrap_or(self.git_commit.ends_with("-dirty"))
    }
}

/// The load verdict (docs/record.md, `load`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Load {
    /// `HELD` or `NOT-HELD`.
    pub verdict: String,
    pub held: bool,
    pub reasons: Vec<String>,
    pub served_in_window: f64,
    pub served_min: f64,
    pub exploratory: bool,
}

/// A stream cell's partition space, and what was created of it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Partitions {
    pub space: u64,
    pub created: u64,
    /// Partitions created per second while the rated window ran (0: the space was
    /// complete before it).
    pub created_per_sec_rated: f64,
}

/// What a system refused at setup, in its own words (docs/record.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Refused {
    pub what: String,
    pub answer: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Times {
    pub started_utc: String,
    pub ended_utc: String,
    pub started_unix_ms: i64,
    pub rated_start_unix_ms: i64,
    pub rated_end_unix_ms: i64,
    pub rated_sec: f64,
    pub warmup_sec: f64,
    pub drain_sec: f64,
    pub hydration_sec: f64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Host {
    pub hostname: String,
    pub cpu_model: String,
    pub cores: u64,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Workload {
    /// `pipeline` (absent in older records) or `stream`.
    pub kind: String,
    pub rate_events_per_sec: u64,
    /// Stream cells: offered messages/s, and the partition space.
    pub rate_msgs_per_sec: u64,
    pub space: u64,
    pub properties: u64,
    pub lanes: u64,
    pub batch: u64,
    pub payload_b: u64,
    /// Stream cells: consumer groups, each consuming every message.
    pub groups: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Provisioned {
    pub ordered_lanes: u64,
    pub physical_queues: u64,
    pub consumer_members: u64,
    pub connections: u64,
    pub publishes_per_ingress_event: f64,
    pub semantics_built_in_app: Vec<String>,
    /// `None` when the record has no notes.
    pub notes: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Flow {
    pub offered: u64,
    pub published: u64,
    pub shed: u64,
    pub failed: u64,
    /// Of `shed`, the events the pacer shed because the system pushed back.
    pub shed_backpressure: u64,
    pub offered_rated: u64,
    pub published_rated: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Throughput {
    pub offered_per_sec: f64,
    pub published_per_sec: f64,
    /// Stream cells: messages consumed per second per group.
    pub popped_per_sec: f64,
    pub deliveries_per_sec: f64,
    pub served_fraction: f64,
    pub reference_deliveries_per_sec: f64,
    /// Pipeline cells since 2026-12: deliveries made while the rated window ran.
    pub window_served_fraction: Option<f64>,
    /// Pipeline cells since 2026-12: deliveries made while the rated window ran, per
    /// second.
    pub window_deliveries_per_sec: Option<f64>,
    /// Stream cells: served below the held rule's share, or an e2e p99 above 5 s.
    pub behind: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Latency {
    pub e2e_a: Summary,
    pub e2e_b: Summary,
    /// Stream cells: every delivery.
    pub e2e: Summary,
    /// Stream cells: one push request, sent to accepted.
    pub push: Summary,
    /// Several loaders: the end-to-end latencies measured between loaders on
    /// different hosts (in `e2e_a`, `e2e_b` too).
    pub e2e_a_cross_host: Summary,
    pub e2e_b_cross_host: Summary,
    /// How late the pacer ran its schedule; `None` when the record has none.
    pub schedule_lag: Option<Summary>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Summary {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Values above one hour, clamped.
    pub clamped: u64,
    /// Values below zero (a stamp from a clock ahead of the reader's), as 1 µs.
    pub negative: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Loader {
    pub cpu_cores_mean: f64,
    pub cores_available: f64,
    pub cpu_us_per_delivery: f64,
    pub peak_rss_bytes: u64,
    pub runtime_threads: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Drain {
    pub outcome: String,
    pub seconds: f64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Void {
    pub void: bool,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Verdict {
    pub pass: bool,
    pub reasons: Vec<String>,
    pub totals: VerdictTotals,
    pub streams: Vec<VerdictStream>,
}

impl Verdict {
    /// Lost messages counted once: the distinct (flow, key, seq) acknowledged and never
    /// delivered to at least one stream (checker/FORMAT.md, `lost_messages`). A record
    /// whose checker predates the count gives it when its gap examples name every gap
    /// and no stream lost a tail (then they are every lost seq); otherwise `None`.
    pub fn lost_messages(&self) -> Option<u64> {
        if let Some(n) = self.totals.lost_messages {
            return Some(n);
        }
        // Each stream's examples, as the checker's ranges; complete when they are as
        // many seqs as its gaps and it lost no tail.
        let examples = |s: &VerdictStream| -> Vec<checker::Range> {
            s.gap_examples
                .iter()
                .map(|g| (g.prop, g.from, g.to))
                .collect()
        };
        let complete = self
            .streams
            .iter()
            .all(|s| s.lost_tail == 0 && checker::union_len(&mut examples(s)) == s.gaps);
        if !complete {
            return None;
        }
        // A message keeps its (key, seq) on every hop of its flow: the union per flow.
        let mut flows: std::collections::BTreeMap<&str, Vec<checker::Range>> =
            std::collections::BTreeMap::new();
        for s in &self.streams {
            flows
                .entry(s.flow.as_str())
                .or_default()
                .extend(examples(s));
        }
        Some(flows.values_mut().map(|v| checker::union_len(v)).sum())
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct VerdictTotals {
    pub duplicates: u64,
    pub gaps: u64,
    pub order_violations: u64,
    pub in_flight: u64,
    /// Acknowledged and never delivered, counted once per stream that misses it.
    pub lost_acked: u64,
    /// The same counted once per message; absent before the checker counted it.
    pub lost_messages: Option<u64>,
}

/// One stream's verdict, as far as the reports read it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct VerdictStream {
    pub name: String,
    pub flow: String,
    pub gaps: u64,
    pub lost_tail: u64,
    /// The first gaps (at most 20 a stream).
    pub gap_examples: Vec<GapExample>,
}

/// Seqs `from..=to` of key `prop`, missing from a stream.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct GapExample {
    pub prop: u64,
    pub from: i64,
    pub to: i64,
}

/// The cost summary (sampler/FORMAT.md); `None` fields had no data.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Cost {
    pub system_targets: Vec<String>,
    pub system_cores_mean: Option<f64>,
    pub system_memory_peak_bytes: Option<f64>,
    pub system_disk_write_bytes_per_s_mean: Option<f64>,
    pub disk_write_bytes_per_ingress_event: Option<f64>,
    pub physical_publishes_per_ingress_event: Option<f64>,
    pub ingress_events_per_s: Option<f64>,
    pub loader_cores_mean: Option<f64>,
}

impl CellResult {
    /// Read `dir/result.json`.
    pub fn read_dir(dir: &Path) -> Result<CellResult, RecordError> {
        let path = dir.join("result.json");
        if !path.is_file() {
            return Err(RecordError::NotACell {
                path: dir.to_path_buf(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|source| RecordError::Io {
            path: path.clone(),
            source,
        })?;
        CellResult::parse(&path, &text)
    }

    /// Parse the text of a `result.json` read from `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<CellResult, RecordError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| RecordError::BadRecord {
                path: path.to_path_buf(),
                message: format!(
                    "not JSON ({e}); the run may have been interrupted: re-run the cell"
                ),
            })?;
        CellResult::from_value(path, value)
    }

    /// A `result.json` already parsed as JSON (a record held in memory).
    pub fn from_value(path: &Path, value: serde_json::Value) -> Result<CellResult, RecordError> {
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        if version != Some(RESULT_SCHEMA_VERSION) {
            return Err(RecordError::BadRecord {
                path: path.to_path_buf(),
                message: format!(
                    "schema_version {} is not {RESULT_SCHEMA_VERSION}; use the crossbench that wrote it",
                    version.map_or_else(|| "missing".to_string(), |v| v.to_string())
                ),
            });
        }
        serde_json::from_value(value).map_err(|e| RecordError::BadRecord {
            path: path.to_path_buf(),
            message: format!("unexpected shape: {e}"),
        })
    }

    /// Why the cell is not a PASS, in one line: a VOID's first reason, a FAIL's first
    /// failing stream (and how many more), a REFUSED's request and answer. `None` for
    /// a PASS.
    pub fn why_not_pass(&self) -> Option<String> {
        fn first_and_more<'a>(mut reasons: impl Iterator<Item = &'a String>) -> Option<String> {
            let first = reasons.next()?;
            Some(match reasons.count() {
                0 => first.clone(),
                n => format!("{first} (and {n} more)"),
            })
        }
        match self.outcome {
            Outcome::Pass => None,
            Outcome::Void => first_and_more(self.void.reasons.iter()),
            Outcome::Fail => first_and_more(
                self.verdict
                    .reasons
                    .iter()
                    .filter(|r| !r.starts_with("note:")),
            ),
            Outcome::Refused => self
                .refused
                .as_ref()
                .map(|r| format!("{} refused: {}", r.what, r.answer)),
            Outcome::Interrupted => Some("cut short by a signal".into()),
            o @ (Outcome::Share | Outcome::Abandoned) => Some(o.to_string()),
        }
    }

    /// Whether the checker allows duplicates (`accept: at-least-once`).
    pub fn accepts_duplicates(&self) -> bool {
        self.accept == "at-least-once"
    }

    /// Whether the cell is VOID: its outcome, or (older records) its void block.
    pub fn is_void(&self) -> bool {
        self.void.void || self.outcome == Outcome::Void
    }
}
