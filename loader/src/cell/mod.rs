//! The life of one cell, the same for every workload: validate, set up (or record a
//! refusal), start the consumers, prepare (hydrate), pace a warm-up and the rated
//! window, drain, verify, apply the VOID rule, finish sampling, write the record and
//! the summary. A [`workload::Workload`] supplies what is particular to it.
//!
//! One loader of several ([`crate::fleet`]) lives the same life with four meetings
//! at the rendezvous: it joins before anything; in a `shared` cell the others wait
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
pub mod merge;
pub mod rated;
pub mod setup;
pub mod void_rule;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use adapters::StreamCounters;
use anyhow::{Context, Result};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use cell_record::Outcome;

use crate::cell::drain::{abandon_at_deadline, drain};
use crate::cell::faults::Faults;
use crate::cell::workload::{CellEnv, Ending, FleetLink, Traffic, Workload};
use crate::fleet::clock::ClockBound;
use crate::fleet::rendezvous::{Fail, Stage};
use crate::fleet::{FleetSpec, LoadersRecord, Member};
use crate::measure::clock::Clock;
use crate::measure::phase::{Phase, PhaseCell};
use crate::measure::window::RatedWindow;
use crate::pacing::pacer::Timing;
use crate::record::invocation::InvocationFile;
use crate::record::result::{
    write_result, CellHead, CellResult, CellTail, DrainFigures, LoaderFigures, Times, VoidFigures,
};
use crate::record::stream_log::StreamLogs;
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
}

/// Run one cell of `workload`. The caller has validated the scenario and created
/// `opts.out`; `interrupt` (Ctrl-C) ends the paced traffic early, after which the
/// cell still drains and is verified.
pub async fn run<W: Workload>(
    mut workload: W,
    loaded: &Loaded,
    opts: &RunOptions,
    interrupt: &CancellationToken,
) -> Result<CellReport> {
    let s = &loaded.scenario;
    let dir = opts.out.clone();
    // --- budget (issue 42): enforced before anything is written or started; restored
    // by `finish`, or on drop on any other way out.
    let budget = crate::cell::budget::Session::apply(s)?;
    // --- end budget
    let clock = Clock::anchor();
    crate::pacing::priority::forget();
    let mut inv = InvocationFile::begin(loaded, &opts.argv, &opts.scenario_path, &dir)?;
    crate::record::incomplete::begin(&dir);
    let sampling = crate::measure::sampling::start(s, &dir)?;
    let quiet = opts.quiet;
    let say = move |m: String| {
        if !quiet {
            eprintln!("{m}");
        }
    };
    for line in workload.banner() {
        say(line);
    }
    say(budget.headline());
    for w in budget.warnings() {
        say(format!("warning: {w}"));
    }

    // One loader of several: join the rendezvous first (loader 0 serves it).
    let fleet = opts.fleet.clone();
    let clock_start = match fleet {
        Some(_) => Some(ClockBound::read_off_runtime().await),
        None => None,
    };
    let member: Option<Arc<Member>> = match fleet.as_ref().filter(|f| !f.alone()) {
        None => None,
        Some(f) => {
            say(format!(
                "loader {} of {} ({} topology): joining the rendezvous {}",
                f.share.index,
                f.share.count,
                f.topology.name(),
                f.rendezvous
            ));
            match Member::start(f.clone(), f.digest.clone()).await {
                Ok(m) => Some(m),
                Err(why) => {
                    return abandoned_early(
                        s,
                        &dir,
                        &mut inv,
                        sampling,
                        f,
                        None,
                        &why,
                        &clock_start,
                    )
                    .await
                }
            }
        }
    };
    match run_joined(
        &mut workload,
        loaded,
        opts,
        interrupt,
        clock,
        &mut inv,
        sampling,
        &member,
        &clock_start,
        &say,
        budget,
    )
    .await
    {
        Ok(r) => Ok(r),
        Err(JoinedError::Abandoned(report)) => Ok(report),
        Err(JoinedError::Other(e)) => Err(e),
    }
}

/// How a joined loader's cell can end besides a report: given up (its record is
/// written), or an error that is not the system's (no record claims success).
enum JoinedError {
    Abandoned(CellReport),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for JoinedError {
    fn from(e: anyhow::Error) -> Self {
        JoinedError::Other(e)
    }
}

/// Record a loader that gave the cell up before pacing it, and end.
#[allow(clippy::too_many_arguments)]
async fn abandoned_early(
    s: &crate::scenario::Scenario,
    dir: &Path,
    inv: &mut InvocationFile,
    sampling: crate::measure::sampling::Sampling,
    f: &FleetSpec,
    member: Option<&Member>,
    why: &Fail,
    clock_start: &Option<ClockBound>,
) -> Result<CellReport> {
    let clock_end = ClockBound::read_off_runtime().await;
    let record = loaders_record(
        f,
        member,
        None,
        clock_start.clone(),
        clock_end,
        Some(why.clone()),
    );
    let summary = crate::fleet::abandoned::record(dir, s, &inv.host, inv.started, why, &record)?;
    inv.write(Some(SystemTime::now()), Some(Outcome::Abandoned.name()))?;
    crate::record::incomplete::end();
    sampling.stop();
    Ok(CellReport {
        outcome: Outcome::Abandoned,
        load: None,
        dir: dir.to_path_buf(),
        summary,
    })
}

/// The `loaders` section of this loader's record.
fn loaders_record(
    f: &FleetSpec,
    member: Option<&Member>,
    start_unix_us: Option<i64>,
    clock_start: Option<ClockBound>,
    clock_end: ClockBound,
    abandoned: Option<Fail>,
) -> LoadersRecord {
    LoadersRecord {
        count: f.share.count,
        index: Some(f.share.index),
        topology: f.topology.name().into(),
        rendezvous: f.rendezvous.clone(),
        share: Some(crate::fleet::ShareRecord {
            properties_owned: f.share.owned(f.properties),
            rate_fraction: f.rate_fraction,
            rule: format!("p mod {} = {}", f.share.count, f.share.index),
        }),
        namespace: f.namespace(),
        verified_alone: f.verifies_alone(),
        start_unix_us,
        host: Some(crate::fleet::clock::LoaderHost::this()),
        clock_start,
        clock_end: Some(clock_end),
        hosts: member
            .map(|m| m.hosts().into_iter().map(|h| h.map(|(h, _)| h)).collect())
            .unwrap_or_default(),
        abandoned,
        loaders: Vec::new(),
    }
}

/// The cell from the moment this loader is in it (alone, or joined to the others).
#[allow(clippy::too_many_arguments)]
async fn run_joined<W: Workload>(
    workload: &mut W,
    loaded: &Loaded,
    opts: &RunOptions,
    interrupt: &CancellationToken,
    clock: Clock,
    inv: &mut InvocationFile,
    sampling: crate::measure::sampling::Sampling,
    member: &Option<Arc<Member>>,
    clock_start: &Option<ClockBound>,
    say: &(dyn Fn(String) + Sync),
    budget: crate::cell::budget::Session,
) -> std::result::Result<CellReport, JoinedError> {
    let s = &loaded.scenario;
    let dir = opts.out.clone();
    let started = inv.started;
    let quiet = opts.quiet;
    let fleet = opts.fleet.clone();
    // Any failure from here on is told to the other loaders, and recorded.
    macro_rules! or_abandon {
        ($stage:expr, $e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => {
                    let e: anyhow::Error = e.into();
                    match (member, fleet.as_ref()) {
                        (Some(m), Some(f)) => {
                            m.fail($stage, format!("{e:#}")).await;
                            let why = m.abandoned().expect("just failed");
                            return Err(JoinedError::Abandoned(
                                abandoned_early(
                                    s,
                                    &dir,
                                    inv,
                                    sampling,
                                    f,
                                    Some(m),
                                    &why,
                                    clock_start,
                                )
                                .await?,
                            ));
                        }
                        _ => return Err(JoinedError::Other(e)),
                    }
                }
            }
        };
    }
    // Waiting at a barrier: an abandoned cell is recorded as such.
    macro_rules! barrier {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(why) => {
                    let f = fleet.as_ref().expect("a barrier has a fleet");
                    return Err(JoinedError::Abandoned(
                        abandoned_early(
                            s,
                            &dir,
                            inv,
                            sampling,
                            f,
                            member.as_deref(),
                            &why,
                            clock_start,
                        )
                        .await?,
                    ));
                }
            }
        };
    }

    // The system (through the harness's proxy when the scenario asks for one), and the
    // topology on it (or its refusal, which is the result).
    let proxy = or_abandon!("setup", Faults::start_proxy(s).await);
    // Several loaders drive the system at once: each takes its share of what the
    // system has free.
    let mut ctx = workload.build_context();
    ctx.clients = fleet.as_ref().map_or(1, |f| f.share.count);
    let broker = match &proxy {
        None => or_abandon!("setup", crate::cell::setup::build(s, &ctx)),
        Some(p) => or_abandon!("setup", crate::cell::setup::build_via(s, &ctx, p.listen())),
    };
    let mut topo = workload.topology();
    if let Some(f) = &fleet {
        topo.sharing = f.sharing();
        if !f.sets_up() {
            // Loader 0 sets the shared topology up (and resets it); the others attach.
            topo.reset = false;
        }
    }
    if let (Some(m), Some(f)) = (member, &fleet) {
        if !f.sets_up() {
            say("waiting for loader 0's topology".into());
            barrier!(m.wait("topology", |v| v.topology_ready, |_| vec![0]).await);
        }
    }
    let description =
        match or_abandon!("setup", crate::cell::setup::setup(&*broker, s, &topo).await) {
            Ok(d) => d,
            Err(refusal) => {
                if let Some(m) = member {
                    m.fail(
                        "setup",
                        format!(
                            "the system refused the topology: {} ({})",
                            refusal.what, refusal.answer
                        ),
                    )
                    .await;
                }
                let summary = crate::record::refused::record(
                    &dir,
                    s,
                    &inv.host,
                    inv.started,
                    topo.lanes,
                    refusal,
                )?;
                inv.write(Some(SystemTime::now()), Some(Outcome::Refused.name()))?;
                crate::record::incomplete::end();
                sampling.stop();
                return Ok(CellReport {
                    outcome: Outcome::Refused,
                    load: None,
                    dir,
                    summary,
                });
            }
        };

    // What the system said it is: invocation.txt's lines, the console, the warnings.
    let provenance_warnings = crate::record::result::provenance_warnings(s, &description);
    inv.provenance_lines = crate::record::result::ProvenanceRecord::new(s, &description).lines();
    inv.provenance_lines.extend(budget.lines()); // budget (issue 42)
    say(format!("system: {}", description.provenance.headline()));
    for w in &provenance_warnings {
        say(format!("warning: {w}"));
    }

    if let Some(m) = member {
        m.set_stage(Stage::TopologyReady);
    }

    // Consumers, each with its log and counters.
    let env = CellEnv {
        broker: broker.clone(),
        clock,
        window: Arc::new(RatedWindow::default()),
        stop: CancellationToken::new(),
        abandon: CancellationToken::new(),
        timing: opts.timing,
        dir: dir.clone(),
        description: description.clone(),
        fleet: fleet.as_ref().map(|f| FleetLink {
            share: f.share,
            member: member.clone(),
            shared: f.topology == crate::scenario::FleetTopology::Shared && !f.alone(),
            same_clock: Arc::new(std::sync::OnceLock::new()),
        }),
    };
    // A loader of several: an abort by any loader ends this one's traffic early,
    // as Ctrl-C does.
    // A signal to this loader ends the cell for every loader: it tells the others.
    let halt = CancellationToken::new();
    let signalled = interrupt.clone();
    {
        let (halt, interrupt) = (halt.clone(), interrupt.clone());
        let member = member.clone();
        tokio::spawn(async move {
            match &member {
                Some(m) => {
                    let lost = m.lost();
                    tokio::select! {
                        _ = interrupt.cancelled() => {
                            m.fail("running", "stopped by Ctrl-C or SIGTERM".into()).await;
                        }
                        _ = lost.cancelled() => {}
                    }
                }
                None => interrupt.cancelled().await,
            }
            halt.cancel();
        });
    }
    let interrupt = &halt;
    if let (Some(_), Ok(at)) = (member, std::env::var("CROSSBENCH_FLEET_FAILPOINT")) {
        if at == "setup" {
            // A test of the rendezvous (loader/tests/fleet.rs): this loader fails its
            // setup on purpose.
            or_abandon!(
                "setup",
                Err::<(), _>(anyhow::anyhow!(
                    "CROSSBENCH_FLEET_FAILPOINT=setup: this loader failed its setup on purpose"
                ))
            );
        }
    }
    let specs = workload.consumers();
    let names: Vec<String> = specs.iter().map(|c| c.name()).collect();
    let tagged = fleet
        .as_ref()
        .filter(|f| !f.alone())
        .map(|f| f.share.index as u32);
    let logs = or_abandon!(
        "setup",
        StreamLogs::create_for(&dir, &names, tagged).context("creating the stream logs")
    );
    let counters: Vec<Arc<StreamCounters>> = specs
        .iter()
        .map(|_| Arc::new(StreamCounters::default()))
        .collect();
    let handlers = or_abandon!("setup", workload.attach(&env, &logs, &counters));
    let tally = workload.tally();
    let consumers = crate::cell::consumers::start(&broker, &specs, handlers, &counters, &env.stop);
    // What this loader has done, for the cell's global progress at the rendezvous.
    let producers_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Some(m) = member {
        let (m, tally, done) = (m.clone(), tally.clone(), producers_done.clone());
        tokio::spawn(async move {
            loop {
                let d = (tally.delivered)();
                m.set_progress(
                    d,
                    d + (tally.published)(),
                    done.load(std::sync::atomic::Ordering::Acquire),
                );
                if m.lost().is_cancelled() {
                    break;
                }
                tokio::time::sleep(crate::fleet::member::BEAT).await;
            }
        });
    }

    // Live progress.
    let phase = Arc::new(PhaseCell::new(workload.initial_phase()));
    let progress_stop = CancellationToken::new();
    let progress = {
        let (source, dir, phase, stop) = (
            workload.progress(),
            dir.clone(),
            phase.clone(),
            progress_stop.clone(),
        );
        tokio::spawn(async move {
            crate::console::progress::run(source, &dir, clock, quiet, phase, stop).await
        })
    };

    let hydration_sec = or_abandon!("hydration", workload.prepare(&env, interrupt, say).await);

    // Paced traffic: warm-up, then the rated window; several loaders from the start
    // instant the rendezvous gives once every loader is ready.
    let (start, start_us) = match member {
        None => {
            let start = Instant::now() + Duration::from_millis(50);
            (start, clock.us_at(start))
        }
        Some(m) => {
            m.set_stage(Stage::Ready);
            say("ready: waiting at the start barrier".into());
            let v = barrier!(
                m.wait(
                    "start",
                    |v| v.start_unix_us.is_some(),
                    |v| v.not_at(Stage::Ready)
                )
                .await
            );
            let us = v.start_unix_us.expect("the barrier waited for it");
            if let Some(link) = &env.fleet {
                let me = m.hosts().get(m.index() as usize).cloned().flatten();
                let same: Vec<bool> = m
                    .hosts()
                    .iter()
                    .map(|h| match (&me, h) {
                        (Some((a, _)), Some((b, _))) => a.same_clock(b),
                        _ => false,
                    })
                    .collect();
                let _ = link.same_clock.set(same);
            }
            m.set_stage(Stage::Running);
            say(format!(
                "start barrier passed: pacing from {} (in {:.0} ms)",
                crate::record::invocation::utc(
                    std::time::UNIX_EPOCH + Duration::from_micros(us.max(0) as u64)
                ),
                (us - clock.now_us()) as f64 / 1000.0
            ));
            (clock.instant_of(us), us)
        }
    };
    let (warm, rated) = (s.warmup.0, s.duration.0);
    let rated_start_us = start_us + warm.as_micros() as i64;
    env.window
        .set(rated_start_us, rated_start_us + rated.as_micros() as i64);
    let producers = workload.start_traffic(
        &env,
        Traffic {
            start,
            start_us,
            run_for: warm + rated,
        },
    );
    phase.set(Phase::Warmup);
    // Faults, timed from the rated window's start, and the 100 ms timeline that
    // measures what they did.
    let faults = (!s.faults.is_empty() || proxy.is_some())
        .then(|| Faults::start(s, proxy.clone(), clock, start + warm));
    let timeline_stop = CancellationToken::new();
    let timeline = (!s.faults.is_empty()).then(|| {
        crate::cell::faults::timeline::record(tally.clone(), clock, timeline_stop.clone())
    });
    let mut deliveries_at_start = 0;
    let edges = crate::cell::rated::run_window(start, warm, rated, interrupt, || {
        deliveries_at_start = workload.deliveries();
        workload.at_rated_start();
        phase.set(Phase::Rated);
    })
    .await;
    // Every delivery made while the window ran (whenever its unit was scheduled):
    // what the loader's CPU in the window was spent on.
    let deliveries_in_window = workload.deliveries().saturating_sub(deliveries_at_start);
    workload.at_rated_end();
    let stopped_early = edges.stopped_early;
    if stopped_early {
        say("interrupted: stopping the producers; drain and verification still run".into());
        for p in &producers {
            p.stop_early();
        }
    }

    // Drain: until the producers are done and every consumer has processed what was
    // acknowledged, or nothing moved (no publish, no delivery) for the grace, or the
    // deadline. Publishers retry meanwhile, and give up when the drain ends (counted
    // failed or indeterminate).
    phase.set(Phase::Drain);
    let shared_member = member
        .as_ref()
        .filter(|_| env.fleet.as_ref().is_some_and(|f| f.shared));
    if let Some(m) = member {
        m.set_stage(Stage::Draining);
    }
    if let (Some(m), Some(src)) = (shared_member, workload.frontier_source()) {
        m.send_frontier(src);
    }
    let drain_start = Instant::now();
    let drain_max = s.drain.max.0;
    abandon_at_deadline(&env.abandon, drain_max, interrupt, opts.interrupt_drain);
    let finishing = {
        let done = producers_done.clone();
        tokio::spawn(async move {
            for p in producers {
                p.finish().await;
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        })
    };
    let grace = crate::cell::drain::grace(s.drain.grace.map(|d| d.0), description.lease_ms);
    let drain_end = drain(
        drain_start,
        grace,
        drain_max,
        interrupt,
        opts.interrupt_drain,
        || {
            let mine = producers_done.load(std::sync::atomic::Ordering::Acquire);
            match shared_member {
                // Shared: every loader's producers done and every stream caught up
                // with every key, as the rendezvous merges them.
                Some(m) => mine && m.view().is_some_and(|v| v.producers_done && v.caught_up),
                None => mine && workload.caught_up(),
            }
        },
        || match shared_member {
            Some(m) => m.view().map_or(0, |v| v.moved),
            None => workload.deliveries() + (tally.published)(),
        },
        || {
            // The system's failed answers: the consumers' and the publishers'.
            let consume: u64 = counters
                .iter()
                .map(|c| c.receive_errors.get() + c.ack_errors.get() + c.reconnects.get())
                .sum();
            consume + (tally.errors)()
        },
    )
    .await;
    // Nothing moved for the grace: ask the system what it still holds, before the
    // consumers wind down (closing them gives back what they hold). Messages it still
    // holds are not lost: the consumers stalled.
    let (drain_end, stalled) = if drain_end == crate::cell::drain::DrainEnd::Grace {
        let held = tokio::time::timeout(std::time::Duration::from_secs(15), broker.held())
            .await
            .ok()
            .flatten();
        crate::cell::drain::judge_grace(drain_end, held.as_ref(), &description.system)
    } else {
        (drain_end, None)
    };
    if let Some(w) = &stalled {
        say(w.clone());
    }
    // Whatever a producer still holds is given up now (attempts in flight are cut
    // off and counted indeterminate).
    env.abandon.cancel();
    // Cut-off attempts end at once; a deadline all the same, so no adapter can hang
    // the cell here.
    match tokio::time::timeout(std::time::Duration::from_secs(30), finishing).await {
        Ok(r) => r.context("the producers' task")?,
        Err(_) => {
            say("warning: the producers did not finish 30 s after the drain; left behind".into())
        }
    }
    let drain_sec = drain_start.elapsed().as_secs_f64();
    say(format!(
        "drain: {} after {:.1}s",
        drain_end.name(),
        drain_sec
    ));
    // Every fault ends here: the paused are continued, toxics switched off, the
    // killed restarted (each command has its own deadline).
    let fault_run = match faults {
        Some(f) => Some(f.finish().await),
        None => None,
    };
    timeline_stop.cancel();
    let readings = match timeline {
        Some(t) => t.await.unwrap_or_default(),
        None => Vec::new(),
    };

    // Stop the consumers, close the logs, stop the progress.
    let consume_errors =
        crate::cell::consumers::wind_down(&env.stop, consumers, &logs, &progress_stop, progress)
            .await?;
    // An adapter's counters may ask the system (a shell-out): off the runtime.
    let broker_stats = {
        let b = broker.clone();
        let read = tokio::task::spawn_blocking(move || b.counters());
        match tokio::time::timeout(std::time::Duration::from_secs(30), read).await {
            Ok(r) => r.context("reading the adapter's counters")?,
            Err(_) => {
                say("warning: the adapter's counters did not answer in 30 s; none recorded".into());
                Default::default()
            }
        }
    };
    if tokio::time::timeout(std::time::Duration::from_secs(15), broker.close())
        .await
        .is_err()
    {
        say("warning: closing the adapter took over 15 s; left behind".into());
    }
    if let Some(p) = &proxy {
        p.close();
    }

    if let Some(m) = member {
        m.set_stage(Stage::Drained);
    }

    // produced.meta, then the checker's verdict (a loader of a shared cell leaves it
    // to the merge: its logs hold whichever keys the system handed it).
    let mut meta = workload.produced_meta(drain_end, s.accept.name());
    if let Some(f) = fleet.as_ref().filter(|f| !f.alone()) {
        meta = with_fleet_header(&meta, f);
    }
    std::fs::write(dir.join("produced.meta"), meta).context("writing produced.meta")?;
    let verifies = fleet.as_ref().is_none_or(|f| f.verifies_alone());
    let verdict = if verifies {
        verify(&dir, s.accept).await?
    } else {
        deferred_verdict(&dir)
    };
    if let Some(f) = fleet.as_ref() {
        let hists = workload.histograms();
        crate::fleet::totals::write(&dir.join("totals.hlog"), &hists, f.share.index)
            .context("writing totals.hlog")?;
    }

    // The cost of serving the cell, over the rated window.
    let load = workload.load();
    let rated_sec = edges.rated_sec();
    let cost = sampling
        .finish_cell(
            rated_start_us,
            rated_sec,
            crate::measure::sampling::workload_facts(
                &description,
                load.published_rated,
                load.deliveries_rated,
                load.partitions,
            ),
            opts.sampler_url.as_deref(),
            inv.started_unix_ms(),
            say,
        )
        .await?;

    // Figures, the VOID rule, the outcome.
    let ending = Ending {
        env: &env,
        verdict: &verdict,
        rated_sec,
        wall_rated_sec: edges.wall_sec,
        deliveries_in_window,
        stream_counters: &counters,
    };
    let figures = workload.figures(&ending)?;
    let loader = LoaderFigures::measure(edges.cpu_seconds, edges.wall_sec, deliveries_in_window);
    let void_reasons = crate::cell::void_rule::reasons(
        &s.void,
        &crate::cell::void_rule::LoaderLoad {
            shed_pacer: load.shed_pacer,
            unit: load.unit,
            cores: loader.cpu_cores_mean,
            cores_available: loader.cores_available,
            schedule_lag_p99_ms: load.schedule_lag.p99_ms,
            host_steal_frac: cost.host_steal_frac_mean,
        },
    );
    let mut warnings = consume_errors;
    warnings.extend(provenance_warnings);
    warnings.extend(budget.warnings()); // budget (issue 42)
    warnings.extend(stalled);
    warnings.extend(figures.warnings);
    if let Some(f) = crate::cell::void_rule::notable_steal(cost.host_steal_frac_mean) {
        warnings.push(format!(
            "CPU steal: the hypervisor took {:.1} % of the host's CPU time in the rated window (worst second {:.1} %); the loader and the system had that much less, and a schedule lag may be the host's",
            100.0 * f,
            100.0 * cost.host_steal_frac_peak.unwrap_or(f)
        ));
    }
    // What the faults did: figures, the record's tags, invocation.txt's lines.
    let fault_record = match fault_run {
        Some((events, spans, proxy_figures)) => {
            let rec = crate::cell::faults::report::build(&crate::cell::faults::report::Inputs {
                scenario: s,
                dir: &dir,
                events,
                spans,
                proxy: proxy_figures,
                readings: &readings,
                traffic_start_unix_ms: start_us / 1000,
                rated_start_unix_ms: rated_start_us / 1000,
                rated_end_unix_ms: rated_start_us / 1000 + (rated_sec * 1000.0) as i64,
                load: &load,
                stream_counters: &counters,
            });
            warnings.extend(rec.1);
            inv.fault_lines = rec.2;
            Some(rec.0)
        }
        None => None,
    };
    for t in &cost.missing_system_targets {
        warnings.push(format!(
            "sample target {t} was absent (no value in any sample): the system's cost figures leave it out; check sample.targets (or the system's process name)"
        ));
    }
    if !figures.identity_holds {
        warnings
            .push("accounting identity offered = published + shed + failed does not hold".into());
    }
    if description.durability == adapters::Durability::None {
        // A tier the adapter found on the server, never a durable one in disguise.
        warnings.push(format!(
            "NOT DURABLE: {} persists nothing here (durability none, as found at setup): every acknowledged message is lost on a restart",
            description.system
        ));
    }
    let load_verdict = crate::cell::load_rule::verdict(
        &s.held,
        &crate::cell::load_rule::LoadFacts {
            served_in_window: workload.served_in_window(&ending),
            failed: load.failed,
            shed: load.shed_backpressure,
            unit: load.unit,
            drain: drain_end,
        },
    );
    let abandoned = member.as_ref().and_then(|m| m.abandoned());
    if let Some(a) = &abandoned {
        warnings.push(format!(
            "ABANDONED: loader {} failed at {}: {}; every loader stopped its traffic early",
            a.loader, a.stage, a.why
        ));
    }
    let me = member.as_ref().map(|m| m.index());
    let outcome = if signalled.is_cancelled()
        && abandoned.as_ref().is_none_or(|a| Some(a.loader) == me)
    {
        // Stopped by Ctrl-C or SIGTERM (this loader's own signal): the record is
        // complete, over the window as it ran; the verdict on what was delivered is
        // in it.
        Outcome::Interrupted
    } else if abandoned.is_some() {
        Outcome::Abandoned
    } else if interrupt.is_cancelled() {
        // Stopped by Ctrl-C or SIGTERM: the record is complete, over the window as it
        // ran; the verdict on what was delivered is in it.
        Outcome::Interrupted
    } else {
        match crate::cell::void_rule::outcome(verdict.pass, figures.identity_holds, &void_reasons) {
            Outcome::Pass if !verifies => Outcome::Share,
            o => o,
        }
    };
    // Budget (issue 42): restored here, its block with each side's use.
    let resources = budget.finish(&cost, &dir.join("samples.csv"));
    let ended = SystemTime::now();
    // The clock's bound at the end, for one loader of several (off the runtime: it
    // may run chronyc).
    let clock_end = match fleet {
        Some(_) => Some(ClockBound::read_off_runtime().await),
        None => None,
    };
    let result = CellResult {
        head: CellHead::new(
            s,
            outcome,
            &description,
            Times::new(
                started,
                ended,
                rated_start_us,
                rated_sec,
                warm.as_secs_f64(),
                drain_sec,
                hydration_sec,
            ),
            inv.host.clone(),
        ),
        body: figures.body,
        tail: CellTail {
            loader,
            drain: DrainFigures {
                outcome: drain_end.name().into(),
                seconds: drain_sec,
                grace_sec: grace.as_secs_f64(),
                max_sec: drain_max.as_secs_f64(),
            },
            void: VoidFigures {
                void: !void_reasons.is_empty(),
                reasons: void_reasons,
            },
            load: load_verdict.clone(),
            verdict: serde_json::to_value(&verdict).context("serialising the verdict")?,
            cost: Some(serde_json::to_value(&cost).context("serialising the cost summary")?),
            broker_stats,
            warnings,
            faults: fault_record,
            resources: Some(resources),
            loaders: fleet
                .as_ref()
                .map(|f| {
                    serde_json::to_value(loaders_record(
                        f,
                        member.as_deref(),
                        Some(start_us),
                        clock_start.clone(),
                        clock_end
                            .clone()
                            .unwrap_or_else(|| ClockBound::unknown("not read")),
                        abandoned.clone(),
                    ))
                })
                .transpose()
                .context("serialising the loaders section")?,
        },
    };
    write_result(&dir, &result)?;
    inv.write(Some(ended), Some(outcome.name()))?;
    crate::record::incomplete::end();
    if let Some(m) = member {
        // Loader 0 keeps the rendezvous up until every loader is done.
        m.finish().await;
    }

    let summary = crate::console::summary::render(
        &result.head,
        &result.tail,
        &workload.shape(),
        &workload.summary(&result),
        &verdict.render_table(),
        &dir,
    );
    Ok(CellReport {
        outcome,
        load: Some(load_verdict),
        dir,
        summary,
    })
}

/// `produced.meta` with the `# fleet` header line after its first line: which loader
/// of how many, the topology and the namespace (the checker keeps it as header keys;
/// `crossbench merge` reads it).
fn with_fleet_header(meta: &str, f: &FleetSpec) -> String {
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
fn deferred_verdict(dir: &Path) -> checker::Verdict {
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
