//! The published cells as data (`results/published/*.yaml`, schema_version 1,
//! described in results/published/README.md): one file per cell of the reference
//! pages, with the shape it ran, the hardware, its figures, where each came from,
//! and where two sources disagree, both values.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ReportError;

pub const PUBLISHED_SCHEMA_VERSION: u32 = 1;

/// Systems the published pages measured that crossbench has no adapter for.
pub const PUBLISHED_ONLY_SYSTEMS: &[&str] = &["redpanda", "pulsar"];

/// Systems a published cell may name: crossbench's (the adapters' registry, the
/// control broker aside) and the published-only ones.
pub fn systems() -> Vec<&'static str> {
    adapters::System::all()
        .filter(|s| !s.capabilities().in_process)
        .map(|s| s.name())
        .chain(PUBLISHED_ONLY_SYSTEMS.iter().copied())
        .collect()
}
/// Durability tiers: those of docs/record.md plus `unknown` for pages that do not say.
pub const TIERS: &[&str] = &["default", "fsync", "memory", "none", "unknown"];
/// Verdicts: the cell's correctness verdict, `NONE` when no result was produced
/// (e.g. a refused topic creation), `NOT-CHECKED` when the page ran no checker,
/// `UNSTATED` when the page gives figures but no verdict.
pub const VERDICTS: &[&str] = &["PASS", "FAIL", "NONE", "NOT-CHECKED", "UNSTATED"];
/// Workload shapes.
pub const WORKLOADS: &[&str] = &["channel-manager", "single-queue", "raw-ordered-consume"];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedCell {
    pub schema_version: u32,
    /// Equals the file name without `.yaml`.
    pub id: String,
    /// Group of cells published together (e.g. `cross-broker-matrix`).
    pub group: String,
    pub system: String,
    #[serde(default)]
    pub variant: String,
    pub shape: Shape,
    pub hardware: Hardware,
    /// The product and version the published page names, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product: Option<Product>,
    pub figures: Figures,
    /// Where the figures come from: at least one.
    pub sources: Vec<Source>,
    /// Figures two sources give differently, every value with its source.
    #[serde(default)]
    pub disagreements: Vec<Disagreement>,
    #[serde(default)]
    pub notes: Vec<String>,
    pub reproduce: Reproduce,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub workload: String,
    /// R: ingress events/s (channel-manager) or messages/s offered (single-queue).
    pub rate_per_sec: Option<f64>,
    /// P: ordering keys.
    pub properties: Option<u64>,
    /// Lanes per topic (partitions per topic, groups, queues per stage).
    pub lanes: Option<u64>,
    /// Ordered lanes provisioned in total.
    pub ordered_lanes: Option<u64>,
    pub duration_s: Option<f64>,
    pub ramp_s: Option<f64>,
    pub drain_s: Option<f64>,
    pub durability: String,
}

/// The product a published cell measured, as its page names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Product {
    /// As a server names itself (`Queen`, `Apache Kafka`, `Redpanda`).
    pub name: String,
    pub version: String,
    /// What else sets it apart (`3-node raft cluster`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Product {
    /// `Queen 2.0.0-beta.2 (3-node raft cluster)`.
    pub fn label(&self) -> String {
        match self.note.is_empty() {
            true => format!("{} {}", self.name, self.version),
            false => format!("{} {} ({})", self.name, self.version, self.note),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    pub description: String,
    /// vCPUs of the machine that ran the system under test.
    pub cores: Option<u32>,
    pub memory_gb: Option<f64>,
    /// Machines running the system (a 3-node cluster is 3).
    pub machines: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub deliveries_per_sec: Option<f64>,
    /// Messages per second through a single-queue shape (pushed and consumed).
    pub messages_per_sec: Option<f64>,
    /// Share of demanded deliveries served, in percent as published.
    pub served_pct: Option<f64>,
    pub cores: Option<f64>,
    pub ram_gb: Option<f64>,
    pub disk_mb_per_s: Option<f64>,
    pub queues: Option<u64>,
    pub consumers: Option<u64>,
    pub shed: Option<u64>,
    pub verdict: String,
    pub verdict_note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// `seeds/<file>` or `crossbench-go-digest.md` (under /work/shared/reference).
    pub file: String,
    /// Section or heading inside it, e.g. `§7.1` or `Dense: 12 000 ev/s over 1 000 lanes`.
    pub section: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disagreement {
    /// The figure, as a field name of `figures` (e.g. `p95_ms`).
    pub figure: String,
    pub values: Vec<SourcedValue>,
    /// Which value `figures` holds and why.
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcedValue {
    pub value: f64,
    pub source: Source,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reproduce {
    /// Scenario file (repository-relative) whose shape matches, scaled to this machine.
    pub scenario: Option<String>,
    /// `--set` overrides, as given to `crossbench run`.
    #[serde(default)]
    pub sets: Vec<String>,
    /// What was scaled and how (rate, lanes, duration, machine).
    #[serde(default)]
    pub scaled: Vec<String>,
    /// Why it cannot be run here (yet), when it cannot.
    pub not_here: Option<String>,
}

impl Reproduce {
    /// The `crossbench run` command line, when there is a scenario.
    pub fn command(&self) -> Option<String> {
        let s = self.scenario.as_ref()?;
        let mut c = format!("crossbench run {s}");
        for set in &self.sets {
            c.push_str(" --set ");
            // Quoted when a shell would read it otherwise (`stream.ladder=[]`).
            if set
                .chars()
                .any(|ch| ch.is_whitespace() || "[]{}*?'\"$`\\;&|<>()".contains(ch))
            {
                c.push('\'');
                c.push_str(&set.replace('\'', "'\\''"));
                c.push('\'');
            } else {
                c.push_str(set);
            }
        }
        Some(c)
    }
}

/// Load one published cell and validate it.
pub fn load(path: &Path) -> Result<PublishedCell, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    let cell: PublishedCell =
        serde_yaml::from_str(&text).map_err(|e| ReportError::BadPublished {
            path: path.to_path_buf(),
            field: "(file)".into(),
            message: format!("{e}; see results/published/README.md for the fields"),
        })?;
    validate(path, &cell)?;
    Ok(cell)
}

/// Load every `*.yaml` in `dir`, sorted by id.
pub fn load_dir(dir: &Path) -> Result<Vec<PublishedCell>, ReportError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ReportError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let cells: Vec<PublishedCell> = files.iter().map(|f| load(f)).collect::<Result<_, _>>()?;
    Ok(cells)
}

/// Find a published cell by id.
pub fn find(dir: &Path, id: &str) -> Result<PublishedCell, ReportError> {
    let path = dir.join(format!("{id}.yaml"));
    if !path.is_file() {
        return Err(ReportError::UnknownPublished {
            id: id.to_string(),
            dir: dir.to_path_buf(),
        });
    }
    load(&path)
}

fn bad(path: &Path, field: &str, message: impl Into<String>) -> ReportError {
    ReportError::BadPublished {
        path: path.to_path_buf(),
        field: field.to_string(),
        message: message.into(),
    }
}

fn one_of(path: &Path, field: &str, v: &str, allowed: &[&str]) -> Result<(), ReportError> {
    if allowed.contains(&v) {
        Ok(())
    } else {
        Err(bad(
            path,
            field,
            format!("`{v}` is not one of {}", allowed.join(", ")),
        ))
    }
}

fn check_source(path: &Path, field: &str, s: &Source) -> Result<(), ReportError> {
    let ok = s.file == "crossbench-go-digest.md"
        || (s.file.starts_with("seeds/") && s.file.ends_with(".txt"));
    if !ok {
        return Err(bad(
            path,
            field,
            format!(
                "`{}`: name `crossbench-go-digest.md` or `seeds/<file>.txt`",
                s.file
            ),
        ));
    }
    if s.section.trim().is_empty() {
        return Err(bad(
            path,
            field,
            "section is empty: name the section the figures are in",
        ));
    }
    Ok(())
}

/// Check a published cell's fields for consistency.
pub fn validate(path: &Path, c: &PublishedCell) -> Result<(), ReportError> {
    if c.schema_version != PUBLISHED_SCHEMA_VERSION {
        return Err(bad(
            path,
            "schema_version",
            format!("{} is not {PUBLISHED_SCHEMA_VERSION}", c.schema_version),
        ));
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    if stem.as_deref() != Some(c.id.as_str()) {
        return Err(bad(
            path,
            "id",
            format!("`{}` must equal the file name without .yaml", c.id),
        ));
    }
    one_of(path, "system", &c.system, &systems())?;
    one_of(path, "shape.durability", &c.shape.durability, TIERS)?;
    one_of(path, "shape.workload", &c.shape.workload, WORKLOADS)?;
    one_of(path, "figures.verdict", &c.figures.verdict, VERDICTS)?;
    let f = &c.figures;
    let order = [
        ("p50_ms", f.p50_ms),
        ("p95_ms", f.p95_ms),
        ("p99_ms", f.p99_ms),
        ("p999_ms", f.p999_ms),
    ];
    let present: Vec<(&str, f64)> = order
        .iter()
        .filter_map(|(n, v)| v.map(|v| (*n, v)))
        .collect();
    for w in present.windows(2) {
        if w[0].1 > w[1].1 {
            return Err(bad(
                path,
                &format!("figures.{}", w[1].0),
                format!(
                    "{} is below {} = {}: percentiles must not decrease",
                    w[1].1, w[0].0, w[0].1
                ),
            ));
        }
    }
    for (name, v) in [
        ("figures.p50_ms", f.p50_ms),
        ("figures.deliveries_per_sec", f.deliveries_per_sec),
        ("figures.messages_per_sec", f.messages_per_sec),
        ("figures.cores", f.cores),
        ("figures.ram_gb", f.ram_gb),
        ("figures.disk_mb_per_s", f.disk_mb_per_s),
        ("shape.rate_per_sec", c.shape.rate_per_sec),
    ] {
        if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
            return Err(bad(path, name, "must be a non-negative number"));
        }
    }
    if let Some(p) = f.served_pct {
        if !(0.0..=400.0).contains(&p) {
            return Err(bad(
                path,
                "figures.served_pct",
                format!("{p} is not a percentage (0–400)"),
            ));
        }
    }
    if c.sources.is_empty() {
        return Err(bad(
            path,
            "sources",
            "empty: every cell names where its figures come from",
        ));
    }
    for (i, s) in c.sources.iter().enumerate() {
        check_source(path, &format!("sources[{i}]"), s)?;
    }
    for (i, d) in c.disagreements.iter().enumerate() {
        let field = format!("disagreements[{i}]");
        if d.values.len() < 2 {
            return Err(bad(
                path,
                &field,
                "a disagreement needs two values or more, each with its source",
            ));
        }
        let first = &d.values[0];
        if d.values.iter().all(|v| v.value == first.value) {
            return Err(bad(
                path,
                &field,
                "all values are equal: that is not a disagreement",
            ));
        }
        for (j, v) in d.values.iter().enumerate() {
            check_source(path, &format!("{field}.values[{j}].source"), &v.source)?;
        }
        if d.note.trim().is_empty() {
            return Err(bad(
                path,
                &format!("{field}.note"),
                "say which value `figures` holds and why",
            ));
        }
    }
    let r = &c.reproduce;
    if r.scenario.is_none() && r.not_here.is_none() {
        return Err(bad(
            path,
            "reproduce",
            "give `scenario` (and `sets`, `scaled`) or say in `not_here` why it cannot be run here",
        ));
    }
    if r.scenario.is_some() && r.scaled.is_empty() {
        return Err(bad(
            path,
            "reproduce.scaled",
            "say what was scaled to run here (rate, lanes, duration, machine)",
        ));
    }
    Ok(())
}
