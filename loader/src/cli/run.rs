//! `crossbench run`: load and check the scenario, take the run lock, create the
//! record's directory, and run the cell (or one cell per rate of a stream ladder,
//! then `ladder.csv`), all through the runner ([`crate::workload::runner`]). Also the
//! in-process entry point tests use ([`execute`]).

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cell::{default_out, Outcome};
use crate::pacing::pacer::Timing;
use crate::scenario::{self, Loaded, WorkloadKind};
use crate::workload::runner::{
    prepare_out, CellJob, Exit, RunLock, Runner, RunnerSettings, Signals,
};

/// One `run` request.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub scenario: PathBuf,
    /// `--set key=value` overrides.
    pub sets: Vec<String>,
    /// The record's directory (`runs/<name>-<UTC time>` when absent).
    pub out: Option<PathBuf>,
    pub quiet: bool,
    /// A remote `crossbench sample` endpoint.
    pub sampler: Option<String>,
    /// Real or virtual time (tests).
    pub timing: Timing,
    /// The command line recorded in `invocation.txt`.
    pub argv: Vec<String>,
    /// After Ctrl-C or SIGTERM, the drain goes on for at most this long.
    pub interrupt_drain: std::time::Duration,
    /// Several loaders, one cell: this loader's flags.
    pub loaders: crate::fleet::LoaderFlags,
}

impl RunRequest {
    /// A request for `scenario` with nothing else set (tests add what they need).
    pub fn new(scenario: impl Into<PathBuf>) -> RunRequest {
        RunRequest {
            scenario: scenario.into(),
            sets: Vec::new(),
            out: None,
            quiet: true,
            sampler: None,
            timing: Timing::Real,
            argv: std::env::args().collect(),
            interrupt_drain: crate::cell::INTERRUPT_DRAIN,
            loaders: Default::default(),
        }
    }
}

/// What a run did.
#[derive(Debug)]
pub struct RunDone {
    /// The worst outcome of its cells.
    pub exit: Exit,
    /// Each cell's directory and summary, in the order they ran.
    pub cells: Vec<(PathBuf, Outcome, String)>,
    /// The directory given (or made up): the cell's, or the ladder's parent.
    pub out: PathBuf,
}

/// Run a `run` request in-process: the same path as the command, summaries printed
/// to stdout as each cell ends.
pub fn execute(req: &RunRequest) -> anyhow::Result<RunDone> {
    // The loader flags that are the cell's (count, rendezvous) join the scenario, so
    // every loader's resolved scenario, and its digest, is the same.
    let mut sets = req.sets.clone();
    sets.extend(req.loaders.sets());
    let mut loaded = scenario::load(&req.scenario, &sets)?;
    let fleet = if req.loaders.any(&loaded.scenario) {
        let job = std::env::var("JOB_COMPLETION_INDEX").ok();
        Some(crate::fleet::FleetSpec::resolve(
            &loaded.scenario,
            &req.loaders,
            job.as_deref(),
        )?)
    } else {
        None
    };
    // A partitioned loader's topics and queues live in a namespace of its own.
    if let Some(ns) = fleet.as_ref().and_then(|f| f.namespace()) {
        loaded.scenario.prefix = format!("{}{ns}", loaded.scenario.prefix);
    }
    // Fail on a system this build lacks, or on bad options, before creating anything.
    let s = &loaded.scenario;
    crate::cell::setup::build(s, &crate::workload::build_context(s))?;
    let out = req.out.clone().unwrap_or_else(|| default_out(&s.name));
    // The loaders of one cell on one machine share the run lock; any other run waits.
    let mut runner = Runner::start(RunnerSettings {
        lock: match fleet.as_ref().filter(|f| !f.alone()) {
            Some(_) => RunLock::Shared,
            None => RunLock::Exclusive,
        },
        threads: s.threads,
        timing: req.timing,
        quiet: req.quiet,
        argv: req.argv.clone(),
    })?;
    // A budget naming no running process is bad input before anything is written.
    crate::cell::budget::preflight(s)?;
    prepare_out(&out)?;
    runner.listen(Signals::CutShort);
    let done = run_cells(&runner, &loaded, req, &out, &fleet)?;
    runner.shut_down();
    Ok(done)
}

/// The cells of the scenario, one after the other; Ctrl-C ends the current cell's
/// traffic early and skips the cells after it.
fn run_cells(
    runner: &Runner,
    loaded: &Loaded,
    req: &RunRequest,
    out: &Path,
    fleet: &Option<crate::fleet::FleetSpec>,
) -> anyhow::Result<RunDone> {
    let s = &loaded.scenario;
    let ladder = s
        .stream
        .as_ref()
        .map(|st| st.ladder.clone())
        .unwrap_or_default();
    let cells = match s.workload {
        WorkloadKind::Stream => crate::workload::stream::ladder::cells(loaded, out)
            .into_iter()
            .map(|c| (c.loaded, c.out))
            .collect(),
        WorkloadKind::Pipeline => vec![(loaded.clone(), out.to_path_buf())],
    };
    let mut worst = Outcome::Pass;
    let mut single = None;
    let mut done = Vec::new();
    for (cell, dir) in &cells {
        if runner.stopped() {
            break;
        }
        if dir != out {
            prepare_out(dir)?;
        }
        let report = runner.run(&CellJob {
            quiet: req.quiet,
            sampler_url: req.sampler.clone(),
            interrupt_drain: req.interrupt_drain,
            fleet: fleet.clone(),
            ladder: &ladder,
            ..CellJob::new(cell, req.scenario.clone(), dir.clone())
        })?;
        print!("{}", report.summary);
        worst = worst.worst(report.outcome);
        single = Some(Exit::of_cell(&report));
        done.push((report.dir, report.outcome, report.summary));
    }
    if !ladder.is_empty() {
        let dirs: Vec<PathBuf> = done.iter().map(|d| d.0.clone()).collect();
        let table = crate::workload::stream::ladder::ladder_table(&dirs)?;
        std::fs::write(out.join("ladder.csv"), &table)
            .with_context(|| format!("writing {}", out.join("ladder.csv").display()))?;
        print!("\n=== LADDER {} ===\n{table}", out.display());
    }
    // One cell: its outcome, and whether it held its load. A ladder: the worst
    // outcome of its rungs (a rung past the ceiling is what a ladder is for).
    let exit = match (ladder.is_empty(), single) {
        (true, Some(e)) => e,
        _ => Exit::of(worst),
    };
    Ok(RunDone {
        exit,
        cells: done,
        out: out.to_path_buf(),
    })
}
