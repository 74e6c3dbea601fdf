//! What a workload gives the cell lifecycle, and what the lifecycle gives it.
//!
//! The lifecycle ([`crate::cell::run`]) owns everything every cell does: the record's
//! files, sampling, setup or refusal, the consumers and their logs, the live
//! progress, the phases, the rated window, the drain, the checker, the VOID rule and
//! the summary. A [`Workload`] says what is particular to it: its topology, its
//! consumers' handlers, its producers, what "caught up" means, its ground truth for
//! the checker and the figures it adds to `result.json`. Workloads depend on the
//! lifecycle, never the reverse.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use adapters::{BatchHandler, Broker, BuildContext, Description, StreamCounters, Topology};
use async_trait::async_trait;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cell::drain::DrainEnd;
use crate::console::progress::ProgressSource;
use crate::measure::clock::Clock;
use crate::measure::histograms::Summary;
use crate::measure::phase::Phase;
use crate::measure::window::RatedWindow;
use crate::pacing::pacer::{Paced, Timing};
use crate::record::result::CellResult;
use crate::record::stream_log::StreamLogs;

/// One consumer stream (a (topic, group) pair) the workload reads.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub topic: String,
    pub group: String,
    /// Messages per key-batch at most (also the pop / read / prefetch size).
    pub batch: usize,
    /// The concurrency the handler can take (the adapter sizes its pools from it).
    pub lanes: usize,
}

impl ConsumerSpec {
    /// `<topic>_<group>`: the stream's name and its log's stem.
    pub fn name(&self) -> String {
        format!("{}_{}", self.topic, self.group)
    }
}

/// What the lifecycle shares with a workload once the system is set up.
#[derive(Debug, Clone)]
pub struct CellEnv {
    pub broker: Arc<dyn Broker>,
    pub clock: Clock,
    pub window: Arc<RatedWindow>,
    /// Fires when the consumers must stop (in-flight work aborts and is refused).
    pub stop: CancellationToken,
    /// Fires when publishers must stop retrying (what they hold fails).
    pub abandon: CancellationToken,
    pub timing: Timing,
    pub dir: PathBuf,
    pub description: Description,
    /// This loader's part in a cell of several loaders (`None`: the ordinary cell).
    pub fleet: Option<FleetLink>,
}

/// What a workload needs to know when it is one loader of several.
#[derive(Debug, Clone)]
pub struct FleetLink {
    /// The keys this loader owns.
    pub share: crate::fleet::Share,
    /// Its rendezvous (absent with one loader).
    pub member: Option<Arc<crate::fleet::Member>>,
    /// The `shared` topology: this loader's consumers get other loaders' keys, and
    /// global progress is the rendezvous's.
    pub shared: bool,
    /// For each loader, whether it reads this loader's clock (same host); set at the
    /// start barrier, before any rated message.
    pub same_clock: Arc<std::sync::OnceLock<Vec<bool>>>,
}

impl FleetLink {
    /// The cell's global count of processed messages when the rendezvous knows it
    /// (`shared` cells), else `None`.
    pub fn global_processed(&self) -> Option<u64> {
        if !self.shared {
            return None;
        }
        self.member
            .as_ref()
            .and_then(|m| m.view())
            .map(|v| v.processed)
    }
}

/// When paced traffic runs: from `start` (`start_us` on the cell's clock) for
/// `run_for` (warm-up and rated window together).
#[derive(Debug, Clone, Copy)]
pub struct Traffic {
    pub start: Instant,
    pub start_us: i64,
    pub run_for: Duration,
}

/// What the rules shared by every workload read from it at the end of the cell.
#[derive(Debug, Clone)]
pub struct Load {
    /// Units the pacers skipped (they fell too far behind their schedule).
    pub shed_pacer: u64,
    /// What a unit is, for the VOID reason's wording (`events`, `messages`).
    pub unit: &'static str,
    /// Hand-over − scheduled instant, over every paced slot.
    pub schedule_lag: Summary,
    /// What the cost summary divides by: units published in the rated window,
    /// deliveries of rated units, and the partitions (lanes × topics) provisioned.
    pub published_rated: u64,
    pub deliveries_rated: u64,
    pub partitions: u64,
    /// Units given up and shed at the publishers' queues (all flows).
    pub failed: u64,
    pub shed_backpressure: u64,
    /// Of `failed`, the units whose fate is unknown (they may have landed).
    pub failed_indeterminate: u64,
    /// Failed publish attempts by error class (all flows).
    pub publish_errors: Vec<(adapters::ErrorClass, u64)>,
    /// The worst end-to-end latency of a rated unit, ms.
    pub e2e_max_ms: f64,
}

/// What the lifecycle knows when the workload makes its figures.
#[derive(Debug)]
pub struct Ending<'a> {
    pub env: &'a CellEnv,
    pub verdict: &'a checker::Verdict,
    /// The rated window's length for per-second figures (as planned, or as it ran
    /// when stopped early), and its wall time as it ran.
    pub rated_sec: f64,
    pub wall_rated_sec: f64,
    /// Deliveries made while the rated window ran (`Workload::deliveries` at its
    /// end minus at its start).
    pub deliveries_in_window: u64,
    /// Each consumer stream's adapter counters, in the order of `consumers()`.
    pub stream_counters: &'a [Arc<StreamCounters>],
}

/// The workload's part of the result.
#[derive(Debug)]
pub struct Figures<F> {
    /// The fields `result.json` holds between the head and the tail.
    pub body: F,
    /// `offered = published + shed + failed` held for every flow.
    pub identity_holds: bool,
    /// Warnings about the load (shedding), one sentence each.
    pub warnings: Vec<String>,
}

/// A workload, as the lifecycle drives it. Calls come in this order: `banner`,
/// `topology`, `consumers`, `attach`, `progress`, `prepare`, `start_traffic`,
/// `at_rated_start`, `at_rated_end`, `caught_up`/`deliveries` (the drain),
/// `produced_meta`, `load`, `figures`, `summary`.
#[async_trait]
pub trait Workload: Send + Sync {
    /// The fields this workload adds to `result.json`.
    type Body: Serialize + Send + Sync;

    /// `workload.kind` in the record.
    fn kind(&self) -> &'static str;
    /// The lines said when the cell starts.
    fn banner(&self) -> Vec<String>;
    /// The shape in the summary's first line (`R=…  P=…`).
    fn shape(&self) -> String;
    /// How the adapter will be driven.
    fn build_context(&self) -> BuildContext;
    /// What to set up on the system.
    fn topology(&self) -> Topology;
    /// The phase the live progress starts in.
    fn initial_phase(&self) -> Phase;
    /// The consumer streams, in the order of logs, counters and handlers.
    fn consumers(&self) -> Vec<ConsumerSpec>;
    /// Build the handler of every consumer stream, logging to `logs.log(i)`.
    fn attach(
        &mut self,
        env: &CellEnv,
        logs: &StreamLogs,
        counters: &[Arc<StreamCounters>],
    ) -> anyhow::Result<Vec<Arc<dyn BatchHandler>>>;
    /// The live progress: `report.csv`'s columns, interval logs and console line.
    fn progress(&self) -> Box<dyn ProgressSource>;
    /// Work before paced traffic (the pipeline's hydration), with `say` for the
    /// console; returns its duration in seconds (0 when there is none).
    async fn prepare(
        &self,
        env: &CellEnv,
        interrupt: &CancellationToken,
        say: &(dyn Fn(String) + Sync),
    ) -> anyhow::Result<f64>;
    /// Start the producers.
    fn start_traffic(&self, env: &CellEnv, traffic: Traffic) -> Vec<Paced>;
    /// The rated window's edges: snapshot whatever the figures need.
    fn at_rated_start(&self) {}
    fn at_rated_end(&self) {}
    /// Messages processed by the consumers so far (redeliveries included): the
    /// drain's sign of progress and what the loader's CPU is divided by.
    fn deliveries(&self) -> u64;
    /// Cumulative acknowledged publishes and deliveries, readable from another task
    /// (after `attach`): the fault timeline's 100 ms series.
    fn tally(&self) -> crate::cell::faults::timeline::Tally;
    /// Every consumer processed everything the system acknowledged to a producer.
    fn caught_up(&self) -> bool;
    /// `produced.meta`: the checker's ground truth.
    fn produced_meta(&self, drain: DrainEnd, delivery: &str) -> String;
    /// This loader's frontier, for the rendezvous of a `shared` cell of several
    /// loaders (its drain ends when every loader's streams have caught up).
    fn frontier_source(&self) -> Option<Arc<dyn crate::fleet::member::FrontierSource>> {
        None
    }
    /// Every whole-run histogram of `result.json`, each tagged with the dotted path of
    /// its summary there (`latency_ms.e2e_a`, `streams.3.entry_age_ms`): a loader of
    /// several writes them to `totals.hlog`, and `crossbench merge` adds them up.
    fn histograms(&self) -> Vec<(String, hdrhistogram::Histogram<u64>)> {
        Vec::new()
    }
    /// What the shared rules read.
    fn load(&self) -> Load;
    /// The workload's figures.
    fn figures(&self, end: &Ending<'_>) -> anyhow::Result<Figures<Self::Body>>;
    /// The share of the demand served while the rated window ran (after `figures`).
    fn served_in_window(&self, end: &Ending<'_>) -> f64;
    /// The summary's lines between its banner and its closing (verdict table,
    /// outcome).
    fn summary(&self, result: &CellResult<Self::Body>) -> String;
}
