//! crossbench resource sampler.
//!
//! A 1 Hz sampler that runs beside every `crossbench run` and writes
//! `samples.csv` (format: `sampler/FORMAT.md`) with one row per metric per
//! target per tick. Targets are cgroup v2 directories (by path, glob or
//! container id), process trees (by pid or command-line pattern), the host,
//! the loader itself and, with feature `postgres`, PostgreSQL internals.
//!
//! ```no_run
//! # fn main() -> Result<(), sampler::SamplerError> {
//! use sampler::{SamplerConfig, TargetSpec};
//! let cfg = SamplerConfig::new(vec![("broker".into(), "container:abc123".parse()?)]);
//! let h = sampler::start(cfg, std::path::Path::new("cell/samples.csv"))?;
//! // ... run the workload ...
//! let samples = h.stop()?;
//! # Ok(()) }
//! ```

mod cost;
mod parse;
#[cfg(feature = "postgres")]
mod pg;
mod probe;
mod remote;
mod runner;
mod samples;
mod spec;
mod sys;

use std::path::PathBuf;
use std::time::Duration;

pub use cost::{
    cost_summary, cost_summary_from_path, CostSummary, PostgresCost, RatedWindow, WorkloadFacts,
};
pub use remote::{pull, serve};
pub use runner::{start, SampleView, Sampler, SamplerHandle};
pub use samples::{parse_samples, read_samples, Sample, SampleSet, HEADER, VERSION_LINE};
pub use spec::{redact_dsn, TargetKind, TargetSpec, TARGET_FORMS};

/// The processes a process target names now, each with its descendants: `pid:<n>`
/// (when it exists), `pidfile:<path>` (the pid its first line names, when it exists),
/// `proc:<pattern>` (the matching processes, never the calling
/// one), `loader` (the calling process). `None` for a target that is not processes
/// (a cgroup, a container, the host, PostgreSQL internals). The loader's resource
/// budgets name the system's processes this way.
pub fn target_processes(spec: &TargetSpec) -> Option<Vec<u32>> {
    let needs_cmdlines = matches!(spec, TargetSpec::ProcessPattern(_));
    let table = probe::ProcTable::scan(needs_cmdlines);
    let alive = |p: u32| std::path::Path::new(&format!("/proc/{p}")).exists();
    let roots = match spec {
        TargetSpec::Pid(p) => Some(*p).filter(|p| alive(*p)).into_iter().collect(),
        TargetSpec::PidFile(f) => probe::pid_file(f)
            .filter(|p| alive(*p))
            .into_iter()
            .collect(),
        TargetSpec::ProcessPattern(p) => table.matching(p),
        TargetSpec::Loader => vec![std::process::id()],
        _ => return None,
    };
    Some(table.tree(&roots))
}

/// The host's CPU time so far, from `/proc/stat`'s aggregate line, in clock ticks:
/// `(steal, total)`, where steal is the time the hypervisor ran another guest while
/// this one wanted a CPU. Two readings give the steal fraction between them. `None`
/// where `/proc/stat` cannot be read.
pub fn host_cpu_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse::proc_stat(&text).0.map(|t| (t.steal, t.total))
}

/// What to sample and how often.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// (label, target). The label is the `target` column; labels must be unique.
    /// A `host` and a `loader` target are added when absent.
    pub targets: Vec<(String, TargetSpec)>,
    /// Sampling period; 1 s unless there is a reason.
    pub interval: Duration,
    /// Figures written beside a target's own on every tick, `(target label, metric,
    /// value)`: the resource budget its side was granted (`budget_cores`,
    /// `budget_memory_bytes`), so that every second's row compares with it.
    pub budgets: Vec<(String, String, f64)>,
}

impl SamplerConfig {
    /// The given targets at the default 1 s interval.
    pub fn new(targets: Vec<(String, TargetSpec)>) -> Self {
        SamplerConfig {
            targets,
            interval: Duration::from_secs(1),
            budgets: Vec::new(),
        }
    }
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig::new(Vec::new())
    }
}

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error("invalid sampler target '{spec}': {why}; accepted forms: {forms}", forms = TARGET_FORMS)]
    BadTarget { spec: String, why: String },
    #[error("duplicate sampler target label '{0}'")]
    DuplicateLabel(String),
    #[error("sampler target '{0}' needs crossbench-sampler built with feature `postgres`")]
    FeatureDisabled(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}:{line}: not a samples.csv v1 file: {why}")]
    Format {
        origin: String,
        line: usize,
        why: String,
    },
    #[error("sampler thread failed: {0}")]
    Thread(String),
    #[error("remote sampler {url}: {why}")]
    Http { url: String, why: String },
}

impl SamplerError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        SamplerError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
