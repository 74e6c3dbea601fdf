//! The phases that make the cell ready to pace: set up (the system, through the
//! harness's proxy when the scenario asks for one, and the topology on it, or its
//! refusal, which is the cell's result) and start the consumers (each with its log
//! and counters, and the live progress).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::SystemTime;

use adapters::{Broker, Description, StreamCounters};
use anyhow::Context as _;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::cell::consumers::ConsumerEnd;
use crate::cell::faults::proxy::Proxy;
use crate::cell::faults::timeline::Tally;
use crate::cell::faults::Faults;
use crate::cell::phases::{several, CellRun, Ended};
use crate::cell::workload::{CellEnv, FleetLink, Workload};
use crate::cell::{CellReport, Outcome};
use crate::fleet::rendezvous::Stage;
use crate::measure::phase::PhaseCell;
use crate::measure::window::RatedWindow;
use crate::record::refused::Refusal;
use crate::record::stream_log::StreamLogs;

/// The system under test, set up.
pub(crate) struct System {
    pub proxy: Option<Arc<Proxy>>,
    pub broker: Arc<dyn Broker>,
    pub description: Description,
    /// What the system said of itself that a reader must be told.
    pub provenance_warnings: Vec<String>,
}

/// The consumers running, and what the later phases share with them.
pub(crate) struct Running {
    pub env: CellEnv,
    pub logs: StreamLogs,
    pub counters: Vec<Arc<StreamCounters>>,
    /// Taken when they wind down.
    pub consumers: Option<JoinSet<ConsumerEnd>>,
    pub tally: Tally,
    /// This loader's producers are done (for the cell's progress at the rendezvous).
    pub producers_done: Arc<AtomicBool>,
    pub phase: Arc<PhaseCell>,
    /// The live progress, and what stops it (taken when the consumers wind down).
    pub progress: Option<JoinHandle<std::io::Result<()>>>,
    pub progress_stop: CancellationToken,
    /// What ends the paced traffic early: this loader's signal, or any loader's
    /// abort.
    pub halt: CancellationToken,
}

impl<W: Workload> CellRun<'_, W> {
    /// Set the system and its topology up (a loader that attaches waits for loader
    /// 0's); a refusal is recorded and ends the cell.
    pub(super) async fn set_up(&mut self) -> Result<System, Ended> {
        let s = self.s();
        let proxy = Faults::start_proxy(s).await;
        let proxy = self.or_abandon("setup", proxy).await?;
        // Several loaders drive the system at once: each takes its share of what the
        // system has free.
        let mut ctx = self.workload.build_context();
        ctx.clients = self.opts.fleet.as_ref().map_or(1, |f| f.share.count);
        let broker = match &proxy {
            None => crate::cell::setup::build(s, &ctx).map_err(anyhow::Error::from),
            Some(p) => crate::cell::setup::build_via(s, &ctx, p.listen()),
        };
        let broker = self.or_abandon("setup", broker).await?;
        let mut topo = self.workload.topology();
        let sets_up = self.opts.fleet.as_ref().is_none_or(|f| f.sets_up());
        if let Some(f) = &self.opts.fleet {
            topo.sharing = f.sharing();
            // Loader 0 sets the shared topology up (and resets it); the others attach.
            topo.reset &= sets_up;
        }
        let waited = self.meeting.topology(sets_up, &self.say_fn()).await;
        self.barrier(waited).await?;
        let set = crate::cell::setup::setup(&*broker, s, &topo).await;
        let description = match self.or_abandon("setup", set).await? {
            Ok(d) => d,
            Err(refusal) => {
                let report = self.refused(refusal, topo.lanes).await?;
                return Err(Ended::Report(Box::new(report)));
            }
        };
        // What the system said it is: invocation.txt's lines, the console, the warnings.
        if let Some(live) = crate::console::live::hub() {
            live.set_variant(&description.variant);
        }
        let provenance_warnings = crate::record::result::provenance_warnings(s, &description);
        self.inv.provenance_lines =
            crate::record::result::ProvenanceRecord::new(s, &description).lines();
        if let Some(b) = &self.budget {
            self.inv.provenance_lines.extend(b.lines());
        }
        self.say
            .line(format!("system: {}", description.provenance.headline()));
        for w in &provenance_warnings {
            self.say.line(format!("warning: {w}"));
        }
        self.meeting.set_stage(Stage::TopologyReady);
        Ok(System {
            proxy,
            broker,
            description,
            provenance_warnings,
        })
    }

    /// The system refused the topology: the others are told, and the refusal is the
    /// cell's record.
    async fn refused(&mut self, refusal: Refusal, lanes: u64) -> anyhow::Result<CellReport> {
        let why = format!(
            "the system refused the topology: {} ({})",
            refusal.what, refusal.answer
        );
        let _ = self.meeting.fail("setup", why).await;
        let (summary, record) = crate::record::refused::record(
            &self.opts.out,
            self.s(),
            &self.inv.host,
            self.inv.started,
            lanes,
            refusal,
        )?;
        self.close(Outcome::Refused, SystemTime::now())?;
        Ok(CellReport {
            outcome: Outcome::Refused,
            load: None,
            dir: self.opts.out.clone(),
            summary,
            record,
        })
    }

    /// Start the consumers, each with its log and counters, and the live progress.
    pub(super) async fn start_consumers(&mut self, sys: &System) -> Result<Running, Ended> {
        let fleet = self.opts.fleet.as_ref();
        let env = CellEnv {
            broker: sys.broker.clone(),
            clock: self.clock,
            window: Arc::new(RatedWindow::default()),
            stop: CancellationToken::new(),
            abandon: CancellationToken::new(),
            timing: self.opts.timing,
            dir: self.opts.out.clone(),
            description: sys.description.clone(),
            fleet: fleet.map(|f| FleetLink {
                share: f.share,
                member: self.meeting.member(),
                shared: f.topology == crate::scenario::FleetTopology::Shared && !f.alone(),
                same_clock: Arc::new(std::sync::OnceLock::new()),
            }),
        };
        // A signal to this loader ends the cell for every loader (it tells the others);
        // an abort by any loader ends this one's traffic early, as Ctrl-C does.
        let halt = self.meeting.halt_on(self.signal);
        self.failpoint().await?;
        let specs = self.workload.consumers();
        let names: Vec<String> = specs.iter().map(|c| c.name()).collect();
        let tagged = several(self.opts).map(|f| f.share.index as u32);
        let logs = StreamLogs::create_for(&self.opts.out, &names, tagged)
            .context("creating the stream logs");
        let logs = self.or_abandon("setup", logs).await?;
        let counters: Vec<Arc<StreamCounters>> = specs
            .iter()
            .map(|_| Arc::new(StreamCounters::default()))
            .collect();
        let handlers = self.workload.attach(&env, &logs, &counters);
        let handlers = self.or_abandon("setup", handlers).await?;
        let tally = self.workload.tally();
        let consumers =
            crate::cell::consumers::start(&sys.broker, &specs, handlers, &counters, &env.stop);
        // What this loader has done, for the cell's global progress at the rendezvous.
        let producers_done = Arc::new(AtomicBool::new(false));
        self.meeting.beat(tally.clone(), producers_done.clone());
        // Live progress.
        let phase = Arc::new(PhaseCell::new(self.workload.initial_phase()));
        let progress_stop = CancellationToken::new();
        let progress = {
            let (source, dir, phase, stop) = (
                self.workload.progress(),
                self.opts.out.clone(),
                phase.clone(),
                progress_stop.clone(),
            );
            let (clock, quiet) = (self.clock, self.opts.quiet);
            tokio::spawn(async move {
                crate::console::progress::run(source, &dir, clock, quiet, phase, stop).await
            })
        };
        Ok(Running {
            env,
            logs,
            counters,
            consumers: Some(consumers),
            tally,
            producers_done,
            phase,
            progress: Some(progress),
            progress_stop,
            halt,
        })
    }

    /// A test of the rendezvous (loader/tests/fleet.rs): with
    /// `CROSSBENCH_FLEET_FAILPOINT=setup`, a loader of several fails its setup on
    /// purpose.
    async fn failpoint(&mut self) -> Result<(), Ended> {
        if self.meeting.index().is_none()
            || std::env::var("CROSSBENCH_FLEET_FAILPOINT").as_deref() != Ok("setup")
        {
            return Ok(());
        }
        let failed = Err::<(), _>(anyhow::anyhow!(
            "CROSSBENCH_FLEET_FAILPOINT=setup: this loader failed its setup on purpose"
        ));
        self.or_abandon("setup", failed).await
    }
}
