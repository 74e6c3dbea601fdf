//! One cell record as the report reads it: the figures of `result.json`, read by the
//! record's one reader ([`cell_record::result`], re-exported here), the command line
//! from `invocation.txt`, and where the raw files are.

use std::path::{Path, PathBuf};

use crate::error::ReportError;

pub use cell_record::result::*;
pub use cell_record::Outcome;

/// Raw files a cell may hold, in the order the report links them.
pub const RAW_FILES: &[&str] = &[
    "result.json",
    "invocation.txt",
    "report.csv",
    "samples.csv",
    "e2e.hlog",
    "entry-age.hlog",
    "schedule-lag.hlog",
    "produced.meta",
];

#[derive(Debug, Clone)]
pub struct CellRecord {
    /// The directory it was read from.
    pub dir: PathBuf,
    pub result: CellResult,
    /// `command:` line of invocation.txt (already redacted by the harness).
    pub command: Option<String>,
}

impl CellRecord {
    /// Read the cell in `dir`.
    pub fn load(dir: &Path) -> Result<CellRecord, ReportError> {
        let path = dir.join("result.json");
        if !path.is_file() {
            return Err(ReportError::NotACell {
                path: dir.to_path_buf(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ReportError::io(&path, e))?;
        let result = CellResult::parse(&path, &text)?;
        Ok(CellRecord::from_result(dir, result))
    }

    /// A cell whose record is already in memory (the one a run just wrote, as
    /// `write_record` returned it), with `invocation.txt`'s command line.
    pub fn from_result(dir: &Path, result: CellResult) -> CellRecord {
        CellRecord {
            dir: dir.to_path_buf(),
            result,
            command: command_line(dir),
        }
    }

    /// The cell's name, or its directory's name when the record has none.
    pub fn name(&self) -> String {
        if self.result.cell.is_empty() {
            self.dir.file_name().map_or_else(
                || self.dir.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        } else {
            self.result.cell.clone()
        }
    }

    /// The system refused the cell's topology: a result without figures.
    pub fn is_refused(&self) -> bool {
        self.result.outcome == cell_record::Outcome::Refused
    }

    /// A cell of the stream workload, whose figures the pipeline tables do not read.
    pub fn is_stream(&self) -> bool {
        self.result.workload.kind == "stream"
    }

    /// The offered rate: ingress events/s (pipeline) or messages/s (stream).
    pub fn offered_rate(&self) -> u64 {
        if self.is_stream() {
            self.result.workload.rate_msgs_per_sec
        } else {
            self.result.workload.rate_events_per_sec
        }
    }

    /// The end-to-end latency the reference's tables quote: flow A (pipeline), every
    /// delivery (stream).
    pub fn headline_e2e(&self) -> &Summary {
        if self.is_stream() {
            &self.result.latency_ms.e2e
        } else {
            &self.result.latency_ms.e2e_a
        }
    }

    pub fn is_void(&self) -> bool {
        self.result.is_void()
    }

    /// `system/variant` (just the system when there is no variant).
    pub fn system_label(&self) -> String {
        if self.result.variant.is_empty() {
            self.result.system.clone()
        } else {
            format!("{}/{}", self.result.system, self.result.variant)
        }
    }

    /// Whether the system ran inside the crossbench process (the control broker):
    /// its CPU and memory are the loader's.
    pub fn in_process(&self) -> bool {
        adapters::System::from_name(&self.result.system)
            .is_some_and(|s| s.capabilities().in_process)
    }

    /// Mean cores of the system under test over the rated window. For the
    /// in-process control broker the system is the crossbench process itself.
    pub fn system_cores(&self) -> Option<f64> {
        let cost = self.result.cost.as_ref();
        match cost.and_then(|c| c.system_cores_mean) {
            Some(c) => Some(c),
            None if self.in_process() => cost
                .and_then(|c| c.loader_cores_mean)
                .or(Some(self.result.loader.cpu_cores_mean)),
            None => None,
        }
    }

    /// Peak resident memory of the system under test in bytes (the crossbench
    /// process for `mem`).
    pub fn system_peak_rss(&self) -> Option<f64> {
        match self
            .result
            .cost
            .as_ref()
            .and_then(|c| c.system_memory_peak_bytes)
        {
            Some(b) => Some(b),
            None if self.in_process() => Some(self.result.loader.peak_rss_bytes as f64),
            None => None,
        }
    }

    pub fn disk_bytes_per_event(&self) -> Option<f64> {
        self.result
            .cost
            .as_ref()
            .and_then(|c| c.disk_write_bytes_per_ingress_event)
    }

    pub fn publishes_per_event(&self) -> Option<f64> {
        self.result
            .cost
            .as_ref()
            .and_then(|c| c.physical_publishes_per_ingress_event)
            .or(Some(self.result.provisioned.publishes_per_ingress_event))
    }

    /// Events shed or failed at publish over both flows.
    pub fn shed(&self) -> u64 {
        self.result.flows.values().map(|f| f.shed + f.failed).sum()
    }

    /// **Served**, the one definition every table uses (docs/record.md): the share of
    /// the rated demand delivered within the rated window, at most 100 %. A pipeline
    /// cell's `window_served_fraction` (older records: its `served_fraction`), a stream
    /// cell's `served_fraction` (consumed in the window ÷ offered). Deliveries of
    /// warm-up events that land in the window can lift the raw figure a little above
    /// 1; the demand cannot be served more than once, so it is capped.
    pub fn served_in_window(&self) -> f64 {
        let t = &self.result.throughput;
        t.window_served_fraction
            .unwrap_or(t.served_fraction)
            .min(1.0)
    }

    /// Deliveries made while the rated window ran, per second: a pipeline cell's
    /// `window_deliveries_per_sec` (older records: its `deliveries_per_sec`), a stream
    /// cell's messages consumed per second per group times its groups.
    pub fn window_deliveries_per_sec(&self) -> f64 {
        let t = &self.result.throughput;
        if self.is_stream() {
            t.popped_per_sec * self.result.workload.groups.max(1) as f64
        } else {
            t.window_deliveries_per_sec.unwrap_or(t.deliveries_per_sec)
        }
    }

    /// Whether the cell held its load: its record's `load.held`; for records before
    /// the load verdict, served at least [`cell_record::held::SERVED_MIN`] with
    /// nothing shed or failed. A cell without a measurement (REFUSED, ABANDONED) did
    /// not.
    pub fn held(&self) -> bool {
        match &self.result.load {
            Some(l) => l.held,
            None => {
                !self.is_refused()
                    && self.served_in_window() >= cell_record::held::SERVED_MIN
                    && self.shed() == 0
            }
        }
    }

    /// The worse of the two flows' end-to-end percentile (`q` = 50, 95, 99); a
    /// stream cell's end-to-end percentile over every delivery.
    pub fn e2e(&self, q: u32) -> Option<f64> {
        let l = &self.result.latency_ms;
        let pick = |s: &Summary| match q {
            50 => s.p50_ms,
            90 => s.p90_ms,
            95 => s.p95_ms,
            99 => s.p99_ms,
            _ => s.p999_ms,
        };
        if self.is_stream() {
            return (l.e2e.count > 0).then(|| pick(&l.e2e));
        }
        if l.e2e_a.count + l.e2e_b.count == 0 {
            return None;
        }
        Some(pick(&l.e2e_a).max(pick(&l.e2e_b)))
    }

    /// Ordered lanes provisioned (falls back to the workload's lanes).
    pub fn ordered_lanes(&self) -> u64 {
        match self.result.provisioned.ordered_lanes {
            0 => self.result.workload.lanes,
            n => n,
        }
    }

    /// Raw files present in the directory, in [`RAW_FILES`] order.
    pub fn raw_files(&self) -> Vec<&'static str> {
        RAW_FILES
            .iter()
            .copied()
            .filter(|f| self.dir.join(f).is_file())
            .collect()
    }
}

/// Expand cell arguments: directories as given, or glob patterns (`runs/pgmq-*`).
/// A campaign's directory (campaign.json), a gate's (gate.json) or a ceiling
/// search's (ceiling.json) is expanded to its cells; a directory that holds no result.json but whose children
/// do is expanded to those children, so `crossbench table runs/` works. Order: as
/// given, then sorted.
pub fn expand(args: &[String]) -> Result<Vec<PathBuf>, ReportError> {
    let mut out = Vec::new();
    for a in args {
        let before = out.len();
        if a.contains(['*', '?', '[']) {
            let paths = glob::glob(a).map_err(|e| ReportError::BadPattern {
                pattern: a.clone(),
                message: e.to_string(),
            })?;
            let mut found: Vec<PathBuf> = paths
                .filter_map(Result::ok)
                .filter(|p| p.join("result.json").is_file())
                .collect();
            found.sort();
            out.extend(found);
        } else {
            let p = PathBuf::from(a);
            if p.join("result.json").is_file() {
                out.push(p);
            } else if crate::campaign::is_campaign(&p) {
                // A campaign: every cell of it that ran to its end.
                out.extend(crate::campaign::CampaignView::load(&p)?.cell_dirs());
            } else if crate::gate::is_gate(&p) {
                // A gate: the legs that left a cell record.
                out.extend(crate::gate::GateRecord::read(&p)?.leg_dirs(&p));
            } else if crate::ceiling::is_search(&p) {
                out.extend(crate::ceiling::search_cells(&p)?);
            } else if crate::ceiling::is_campaign(&p) {
                for d in crate::ceiling::campaign_searches(&p)? {
                    out.extend(crate::ceiling::search_cells(&d)?);
                }
            } else if p.is_dir() {
                let mut kids: Vec<PathBuf> = std::fs::read_dir(&p)
                    .map_err(|e| ReportError::io(&p, e))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|k| k.join("result.json").is_file())
                    .collect();
                kids.sort();
                if kids.is_empty() {
                    return Err(ReportError::NotACell { path: p });
                }
                out.extend(kids);
            } else {
                return Err(ReportError::NotACell { path: p });
            }
        }
        if out.len() == before {
            return Err(ReportError::NoMatch { pattern: a.clone() });
        }
    }
    Ok(out)
}

/// Load every cell the arguments name.
pub fn load_all(args: &[String]) -> Result<Vec<CellRecord>, ReportError> {
    expand(args)?.iter().map(|d| CellRecord::load(d)).collect()
}

/// The `command:` line of `dir/invocation.txt` (already redacted by the harness).
fn command_line(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join("invocation.txt"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("command: ").map(str::to_string))
        })
}
