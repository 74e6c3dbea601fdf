//! The life of one cell, the same for every workload: validate, set up (or record a
//! refusal), start the consumers, prepare (hydrate), pace a warm-up and the rated
//! window, drain, verify, apply the VOID rule, finish sampling, write the record and
//! the summary. A [`workload::Workload`] supplies what is particular to it.
//!
//! The life is [`phases::CellRun`], one method per phase. One loader of several
//! ([`crate::fleet`]) lives the same life with four meetings at the rendezvous
//! ([`meeting::Meeting`]): it joins before anything; in a `shared` cell the others wait
//! for loader 0's topology and attach to it without a reset; every loader waits at
//! the start barrier and paces from the instant it gives; and a `shared` cell's
//! drain ends on the cell's global frontier. A loader that fails after joining tells
//! the others, and any loader's failure ends every loader's cell early
//! (`ABANDONED`).

pub mod budget;
pub mod consumers;
pub mod drain;
pub mod faults;
pub mod load_rule;
pub mod meeting;
pub mod merge;
pub mod phases;
pub mod rated;
pub mod setup;
pub mod void_rule;
pub mod workload;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

pub use cell_record::Outcome;

use crate::cell::phases::CellRun;
use crate::cell::workload::Workload;
use crate::fleet::FleetSpec;
use crate::pacing::pacer::Timing;
use crate::scenario::{Accept, Loaded};

/// How a cell is run, besides its scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The command line, for `invocation.txt`.
    pub argv: Vec<String>,
    pub scenario_path: PathBuf,
    /// The cell's directory (created and empty).
    pub out: PathBuf,
    /// No per-second console lines.
    pub quiet: bool,
    /// A remote `crossbench sample` endpoint whose samples are pulled into the cell.
    pub sampler_url: Option<String>,
    /// Real time, or the runtime's paused virtual time (deterministic tests).
    pub timing: Timing,
    /// After Ctrl-C or SIGTERM, the drain goes on for at most this long.
    pub interrupt_drain: Duration,
    /// This process is one loader of a cell of several (`--loader-index`, …).
    pub fleet: Option<FleetSpec>,
}

/// The drain after an interruption, unless told otherwise.
pub const INTERRUPT_DRAIN: Duration = Duration::from_secs(10);

/// What a finished cell returns.
#[derive(Debug)]
pub struct CellReport {
    pub outcome: Outcome,
    /// Whether it held its load (`None`: refused, nothing ran).
    pub load: Option<crate::record::result::LoadVerdict>,
    pub dir: PathBuf,
    /// The summary to print.
    pub summary: String,
    /// The record as written to `dir/result.json`, typed (read from the text written,
    /// never from disk): what a campaign judges the cell by.
    pub record: cell_record::CellResult,
}

/// Run one cell of `workload`. The caller has validated the scenario and created
/// `opts.out`; `interrupt` (Ctrl-C) ends the paced traffic early, after which the
/// cell still drains and is verified.
pub async fn run<W: Workload>(
    workload: W,
    loaded: &Loaded,
    opts: &RunOptions,
    interrupt: &CancellationToken,
) -> Result<CellReport> {
    CellRun::begin(workload, loaded, opts, interrupt)?
        .run()
        .await
}

/// `produced.meta` with the `# fleet` header line after its first line: which loader
/// of how many, the topology and the namespace (the checker keeps it as header keys;
/// `crossbench merge` reads it).
pub(crate) fn with_fleet_header(meta: &str, f: &FleetSpec) -> String {
    let line = format!(
        "# fleet loaders={} index={} topology={}{}\n",
        f.share.count,
        f.share.index,
        f.topology.name(),
        f.namespace()
            .map_or(String::new(), |n| format!(" namespace={n}"))
    );
    match meta.split_once('\n') {
        Some((first, rest)) => format!("{first}\n{line}{rest}"),
        None => format!("{meta}\n{line}"),
    }
}

/// The verdict of a loader of a `shared` cell: none of its own. Its logs hold
/// whichever keys the system handed it, so only the merge can judge the cell.
pub(crate) fn deferred_verdict(dir: &Path) -> checker::Verdict {
    checker::Verdict {
        schema_version: checker::SCHEMA_VERSION,
        pass: true,
        cut_short: false,
        dir: dir.display().to_string(),
        meta_format: checker::MetaFormat::CrossbenchV1,
        base: 0,
        drain: None,
        delivery: None,
        duplicates_allowed: false,
        total_ack_errors: 0,
        loss_allowed: None,
        reasons: vec![
            "note: one loader's share of a shared cell: its logs hold whichever keys the system handed it, so the verdict is `crossbench merge`'s over every loader's logs".into(),
        ],
        streams: Vec::new(),
        totals: Default::default(),
        malformed: Vec::new(),
        malformed_count: 0,
    }
}

/// The checker's verdict on the cell's logs and `produced.meta`, off the async
/// runtime; duplicates pass when the scenario accepts at-least-once delivery.
pub async fn verify(dir: &Path, accept: Accept) -> Result<checker::Verdict> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        checker::verify_dir(
            &dir,
            &checker::VerifyOptions {
                allow_duplicates: accept == Accept::AtLeastOnce,
                ..Default::default()
            },
        )
    })
    .await
    .context("the checker's thread")?
    .context("verifying the stream logs")
}

/// Where a cell goes when `--out` is not given: `runs/<name>-<UTC stamp>`.
pub fn default_out(name: &str) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now())
        .to_string()
        .replace([':', '-'], "")
        .replace('T', "-")
        .trim_end_matches('Z')
        .to_string();
    Path::new("runs").join(format!("{name}-{stamp}"))
}
