//! The life of one cell, the same for every workload: validate, set up (or record a
//! refusal), start the consumers, prepare (hydrate), pace a warm-up and the rated
//! window, drain, verify, apply the VOID rule, finish sampling, write the record and
//! the summary. A [`workload::Workload`] supplies what is particular to it.

pub mod consumers;
pub mod drain;
pub mod faults;
pub mod load_rule;
pub mod outcome;
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

pub use outcome::Outcome;

use crate::cell::drain::{abandon_at_deadline, drain};
use crate::cell::faults::Faults;
use crate::cell::workload::{CellEnv, Ending, Traffic, Workload};
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
    let clock = Clock::anchor();
    let mut inv = InvocationFile::begin(loaded, &opts.argv, &opts.scenario_path, &dir)?;
    crate::record::incomplete::begin(&dir);
    let started = inv.started;
    let sampling = crate::sampling::start(s, &dir)?;
    let quiet = opts.quiet;
    let say = move |m: String| {
        if !quiet {
            eprintln!("{m}");
        }
    };
    for line in workload.banner() {
        say(line);
    }

    // The system (through the harness's proxy when the scenario asks for one), and the
    // topology on it (or its refusal, which is the result).
    let proxy = Faults::start_proxy(s).await?;
    let broker = match &proxy {
        None => crate::cell::setup::build(s, &workload.build_context())?,
        Some(p) => crate::cell::setup::build_via(s, &workload.build_context(), p.listen())?,
    };
    let topo = workload.topology();
    let description = match crate::cell::setup::setup(&*broker, s, &topo).await? {
        Ok(d) => d,
        Err(refusal) => {
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
    };
    let specs = workload.consumers();
    let names: Vec<String> = specs.iter().map(|c| c.name()).collect();
    let logs = StreamLogs::create(&dir, &names).context("creating the stream logs")?;
    let counters: Vec<Arc<StreamCounters>> = specs
        .iter()
        .map(|_| Arc::new(StreamCounters::default()))
        .collect();
    let handlers = workload.attach(&env, &logs, &counters)?;
    let tally = workload.tally();
    let consumers = crate::cell::consumers::start(&broker, &specs, handlers, &counters, &env.stop);

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

    let hydration_sec = workload.prepare(&env, interrupt, &say).await?;

    // Paced traffic: warm-up, then the rated window.
    let lead = Duration::from_millis(50);
    let start = Instant::now() + lead;
    let start_us = clock.us_at(start);
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
    let drain_start = Instant::now();
    let drain_max = s.drain.max.0;
    abandon_at_deadline(&env.abandon, drain_max, interrupt, opts.interrupt_drain);
    let producers_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
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
        || producers_done.load(std::sync::atomic::Ordering::Acquire) && workload.caught_up(),
        || workload.deliveries() + (tally.published)(),
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

    // produced.meta, then the checker's verdict.
    let meta = workload.produced_meta(drain_end, s.accept.name());
    std::fs::write(dir.join("produced.meta"), meta).context("writing produced.meta")?;
    let verdict = verify(&dir, s.accept).await?;

    // The cost of serving the cell, over the rated window.
    let load = workload.load();
    let rated_sec = edges.rated_sec();
    let cost = sampling
        .finish_cell(
            rated_start_us,
            rated_sec,
            crate::sampling::workload_facts(
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
            drain_cut_short: drain_end.cut_short(),
            drain_unreachable: drain_end == crate::cell::drain::DrainEnd::Unreachable,
        },
    );
    let outcome = if interrupt.is_cancelled() {
        // Stopped by Ctrl-C or SIGTERM: the record is complete, over the window as it
        // ran; the verdict on what was delivered is in it.
        Outcome::Interrupted
    } else {
        crate::cell::void_rule::outcome(verdict.pass, figures.identity_holds, &void_reasons)
    };
    let ended = SystemTime::now();
    let result = CellResult {
        head: CellHead::new(
            s,
            outcome.name(),
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
        },
    };
    write_result(&dir, &result)?;
    inv.write(Some(ended), Some(outcome.name()))?;
    crate::record::incomplete::end();

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
