//! The runner: what every command that runs cells shares (`crossbench run`, a
//! campaign, a ceiling search, the gate, the tax selftest), below the command line
//! and the campaigns. A [`Runner`] holds the machine-wide run lock ([`lock`]) and the
//! runtime ([`runtime`], real or virtual), listens for Ctrl-C and SIGTERM when told to
//! ([`signals`]), and runs one cell at a time ([`Runner::run`], a [`CellJob`])
//! through [`crate::workload::run_cell`], returning its [`CellReport`] with the record
//! as written, typed. [`prepare_out`] creates a record's directory; [`exit`] holds the
//! exit codes and [`BadInput`].
//!
//! It lives under `workload` because the loader's top level is kept to a dozen
//! concepts: running a workload's cell as a command does is the runner's whole job.

pub mod exit;
pub mod lock;
pub mod out;
pub mod runtime;
pub mod signals;

use std::path::PathBuf;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

pub use exit::{BadInput, Exit};
pub use out::prepare_out;

use crate::cell::{CellReport, RunOptions};
use crate::fleet::FleetSpec;
use crate::pacing::pacer::Timing;
use crate::scenario::Loaded;

/// How a runner holds the run lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunLock {
    /// Alone: any other run waits for it, and it for them.
    Exclusive,
    /// Shared with the other loaders of one cell on this machine.
    Shared,
    /// Already held by the caller (the tax selftest runs both its sides under one).
    Held,
}

/// How Ctrl-C and SIGTERM stop a runner's cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signals {
    /// The first stops the running cell's traffic (it drains briefly, is verified and
    /// recorded INTERRUPTED) and no other cell starts; a second exits at once
    /// ([`signals::install`]).
    CutShort,
    /// A matrix campaign's: a first SIGINT lets the running cell go on to its end and
    /// no other starts; the next signal cuts the running cell short, one more exits
    /// ([`signals::install_after_cell`]).
    AfterCell,
}

/// What a [`Runner`] starts with.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    pub lock: RunLock,
    /// The runtime's workers (0: one per core).
    pub threads: u64,
    /// Real or virtual time (tests).
    pub timing: Timing,
    /// No line while waiting for the run lock.
    pub quiet: bool,
    /// The command line each cell records in `invocation.txt`.
    pub argv: Vec<String>,
}

impl RunnerSettings {
    /// A campaign's, a ceiling search's or the gate's: the machine to itself (the
    /// exclusive lock), one runtime worker per core.
    pub fn exclusive(timing: Timing, quiet: bool, argv: &[String]) -> Self {
        RunnerSettings {
            lock: RunLock::Exclusive,
            threads: 0,
            timing,
            quiet,
            argv: argv.to_vec(),
        }
    }
}

/// One cell for [`Runner::run`]: its scenario and its record's directory, and how it
/// runs besides the runner's settings.
#[derive(Debug, Clone)]
pub struct CellJob<'a> {
    pub loaded: &'a Loaded,
    /// The scenario file, as the record names it.
    pub scenario_path: PathBuf,
    /// The record's directory (the caller creates it).
    pub out: PathBuf,
    /// No per-second lines.
    pub quiet: bool,
    /// A remote `crossbench sample` endpoint.
    pub sampler_url: Option<String>,
    /// After a signal, the drain goes on for at most this long.
    pub interrupt_drain: Duration,
    /// Several loaders, one cell: this loader's part.
    pub fleet: Option<FleetSpec>,
    /// The stream ladder the cell is a rung of (for its record; empty otherwise).
    pub ladder: &'a [u64],
}

impl<'a> CellJob<'a> {
    /// A cell of `loaded` recorded in `out`: quiet, one loader, no remote sampler, the
    /// usual drain after a signal, no ladder.
    pub fn new(
        loaded: &'a Loaded,
        scenario_path: impl Into<PathBuf>,
        out: impl Into<PathBuf>,
    ) -> CellJob<'a> {
        CellJob {
            loaded,
            scenario_path: scenario_path.into(),
            out: out.into(),
            quiet: true,
            sampler_url: None,
            interrupt_drain: crate::cell::INTERRUPT_DRAIN,
            fleet: None,
            ladder: &[],
        }
    }
}

/// The run lock held and a runtime started, for cells run one after the other. The
/// lock is released when the runner is dropped.
#[derive(Debug)]
pub struct Runner {
    rt: Option<Runtime>,
    timing: Timing,
    argv: Vec<String>,
    /// No further cell starts.
    stop: CancellationToken,
    /// The running cell's traffic stops.
    cut: CancellationToken,
    _lock: Option<std::fs::File>,
}

impl Runner {
    /// Take the run lock (waiting for a run in progress), then start the runtime.
    pub fn start(s: RunnerSettings) -> anyhow::Result<Runner> {
        let lock = match s.lock {
            RunLock::Exclusive => Some(lock::acquire(s.quiet)?),
            RunLock::Shared => Some(lock::acquire_shared(s.quiet)?),
            RunLock::Held => None,
        };
        let rt = runtime::runtime(s.threads, s.timing)?;
        Ok(Runner {
            rt: Some(rt),
            timing: s.timing,
            argv: s.argv,
            stop: CancellationToken::new(),
            cut: CancellationToken::new(),
            _lock: lock,
        })
    }

    /// From now on, Ctrl-C and SIGTERM stop the cells as `signals` says (without this,
    /// they end the process as they would any other).
    pub fn listen(&self, signals: Signals) {
        let _in_runtime = self.runtime().enter();
        match signals {
            Signals::CutShort => signals::install(self.cut.clone()),
            Signals::AfterCell => signals::install_after_cell(self.stop.clone(), self.cut.clone()),
        }
    }

    /// A signal said no further cell starts.
    pub fn stopped(&self) -> bool {
        self.stop.is_cancelled() || self.cut.is_cancelled()
    }

    /// A signal stopped the running cell's traffic (the cell did not run its course).
    pub fn cut_short(&self) -> bool {
        self.cut.is_cancelled()
    }

    /// Run one cell to its end; its directory exists. The report carries the record
    /// as written.
    pub fn run(&self, cell: &CellJob<'_>) -> anyhow::Result<CellReport> {
        let opts = RunOptions {
            argv: self.argv.clone(),
            scenario_path: cell.scenario_path.clone(),
            out: cell.out.clone(),
            quiet: cell.quiet,
            sampler_url: cell.sampler_url.clone(),
            timing: self.timing,
            interrupt_drain: cell.interrupt_drain,
            fleet: cell.fleet.clone(),
        };
        self.runtime().block_on(crate::workload::run_cell(
            cell.loaded,
            &opts,
            cell.ladder,
            &self.cut,
        ))
    }

    /// Stop the runtime (waiting up to 2 s for its tasks); the lock stays held until
    /// the runner is dropped.
    pub fn shut_down(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }

    fn runtime(&self) -> &Runtime {
        self.rt
            .as_ref()
            .expect("a runner runs no cell after it is shut down")
    }
}
