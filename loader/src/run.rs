//! One cell, end to end: set up, hydrate, pace, drain, verify, record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use adapters::{ConsumeOptions, StreamCounters};
use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::counters::{get, FlowCounters, SeqTable};
use crate::drain::{abandon_at_deadline, drain};
use crate::metrics::{Metrics, Window};
use crate::plan::Plan;
use crate::producer::{hydrate, FlowSpec, Producer, ProducerEnv};
use crate::record::invocation::InvocationFile;
use crate::record::meta::{Meta, StreamMeta};
use crate::record::result::*;
use crate::scenario::{Accept, Loaded, Scenario};
use crate::selector::Selector;
use crate::stage::{now_us, Stage, StageEnv};
use crate::stamp::rates_padding;
use crate::streamlog::StreamLog;
use crate::topology::topology;

/// How a run ended, mapped to the documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    Void,
    /// The system refused the cell's topology at setup; recorded, no figures.
    Refused,
}

impl Outcome {
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Void => "VOID",
            Outcome::Refused => "REFUSED",
        }
    }
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Pass => 0,
            Outcome::Fail => 3,
            Outcome::Void => 4,
            Outcome::Refused => 5,
        }
    }
}

/// Options from the command line that are not part of the scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub argv: Vec<String>,
    pub scenario_path: PathBuf,
    pub out: PathBuf,
    pub quiet: bool,
    /// A remote `crossbench sample` endpoint whose samples are pulled into the cell.
    pub sampler_url: Option<String>,
}

/// What a finished run returns.
#[derive(Debug)]
pub struct RunReport {
    pub outcome: Outcome,
    pub dir: PathBuf,
    pub summary: String,
}

/// The cell's end when the system refused its topology at setup: the refusal is the
/// result (`record::refused`), the invocation says so, sampling stops.
pub(crate) fn refused_cell(
    inv: &InvocationFile,
    s: &Scenario,
    lanes: u64,
    refusal: crate::record::refused::Refusal,
    sampling: crate::sampling::Sampling,
    dir: PathBuf,
) -> Result<RunReport> {
    let summary = crate::record::refused::record(&dir, s, &inv.host, inv.started, lanes, refusal)?;
    inv.write(Some(SystemTime::now()), Some(Outcome::Refused.name()))?;
    sampling.stop();
    Ok(RunReport {
        outcome: Outcome::Refused,
        dir,
        summary,
    })
}

/// Run one cell. The caller has validated the scenario and created `opts.out`.
pub async fn run_cell(loaded: &Loaded, opts: &RunOptions) -> Result<RunReport> {
    let s = &loaded.scenario;
    let dir = opts.out.clone();
    let plan = Plan::new(s);
    let inv = InvocationFile::begin(loaded, opts)?;
    let started = inv.started;
    let sampling = crate::sampling::start(s, &dir)?;
    let say = |m: String| {
        if !opts.quiet {
            eprintln!("{m}");
        }
    };
    say(format!(
        "=== crossbench  system={}  R={} ev/s  P={}  duration={}  warmup={}  ramp={} ===",
        s.system.name(),
        s.rate,
        s.properties,
        s.duration,
        s.warmup,
        s.ramp
    ));
    say(format!(
        "invariants: {} deliveries/s, {} ordered lanes, publishes/s native={} copied={}",
        plan.invariants.deliveries_per_sec,
        plan.invariants.ordered_lanes,
        plan.invariants.publishes_per_sec_native,
        plan.invariants.publishes_per_sec_copied
    ));

    // Set up the system.
    let broker = crate::systems::build(s)?;
    let defs: Vec<_> = plan.stages.iter().map(|p| p.stream.clone()).collect();
    let topo = topology(
        &defs,
        s.properties,
        plan.lanes,
        s.durability,
        s.dedup_window_sec,
        !s.no_reset,
    );
    let description = match crate::systems::setup(&*broker, s, &topo).await? {
        Ok(d) => d,
        Err(refusal) => return refused_cell(&inv, s, plan.lanes, refusal, sampling, dir),
    };

    // Stages.
    let metrics = Arc::new(Metrics::new(&defs));
    let window = Arc::new(Window::default());
    let stage_stop = CancellationToken::new();
    let skewed = Selector::new(s.properties, s.hot.props, s.hot.factor);
    let env = StageEnv {
        broker: broker.clone(),
        metrics: metrics.clone(),
        window: window.clone(),
        cohorts: skewed.is_skewed().then_some(skewed.clone()),
        stop: stage_stop.clone(),
        seed: s.seed,
        properties: s.properties,
    };
    let mut logs = Vec::new();
    let mut stages = Vec::new();
    let mut stream_counters = Vec::new();
    let mut consumers = tokio::task::JoinSet::new();
    for (i, sp) in plan.stages.iter().enumerate() {
        let log = Arc::new(
            StreamLog::create(&dir.join(format!("{}.log", sp.stream.name())))
                .with_context(|| format!("creating the log of {}", sp.stream.name()))?,
        );
        let stage = Arc::new(Stage::new(
            i,
            sp.stream.clone(),
            sp.lane_budget,
            log.clone(),
            &env,
        ));
        let counters = Arc::new(StreamCounters::default());
        let options = ConsumeOptions {
            batch: s.batch as usize,
            lanes: sp.lane_budget as usize,
            counters: counters.clone(),
        };
        let b = broker.clone();
        let (topic, group) = (sp.stream.topic.clone(), sp.stream.group.clone());
        let h: Arc<dyn adapters::BatchHandler> = stage.clone();
        let stop = stage_stop.clone();
        consumers.spawn(async move {
            let r = b.consume(&topic, &group, options, h, stop).await;
            (format!("{topic}_{group}"), r)
        });
        logs.push(log);
        stages.push(stage);
        stream_counters.push(counters);
    }
    say(format!(
        "started {} stages, lane budget {} (headroom {}x)",
        stages.len(),
        plan.lane_budget_total(),
        s.lane_headroom
    ));

    // Reporter.
    let flows = [
        Arc::new(FlowCounters::default()),
        Arc::new(FlowCounters::default()),
    ];
    let phase = Arc::new(parking_lot::Mutex::new("hydrate"));
    let report_stop = CancellationToken::new();
    let watch = crate::report::Watch {
        flows: flows.clone(),
        stages: stages.iter().map(|st| st.counters.clone()).collect(),
        streams: stream_counters.clone(),
        defs: defs.clone(),
        metrics: metrics.clone(),
        phase: phase.clone(),
    };
    let reporter = {
        let dir = dir.clone();
        let stop = report_stop.clone();
        let quiet = opts.quiet;
        tokio::spawn(async move { crate::report::run(watch, &dir, started, quiet, stop).await })
    };

    // Ctrl-C stops the paced traffic early; drain and verification still run.
    let interrupt = CancellationToken::new();
    {
        let interrupt = interrupt.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupt.cancel();
            }
        });
    }

    let seqs = [
        Arc::new(SeqTable::new(s.properties)),
        Arc::new(SeqTable::new(s.properties)),
    ];
    let abandon = CancellationToken::new();
    let padding = Arc::new(rates_padding(s.payload_b as usize));
    let flow_spec = |flow: u8, topic: &str, rate: u64, padding: Option<Arc<Vec<u8>>>| FlowSpec {
        flow,
        topic: topic.to_string(),
        rate: rate as f64,
        ramp: s.ramp.secs_f64(),
        props: s.properties,
        hot_props: s.hot.props,
        hot_factor: s.hot.factor,
        shards: plan.shards,
        shard_queue: s.shard_queue as usize,
        padding,
        first_seq: 1,
    };
    // Flow B's ingress carries the `rates` padding; flow A's is the stamp alone.
    let specs = [
        flow_spec(b'A', &defs[0].topic, plan.rate_a, None),
        flow_spec(b'B', &defs[1].topic, plan.rate_b, Some(padding)),
    ];
    let penv = |i: usize| ProducerEnv {
        broker: broker.clone(),
        counters: flows[i].clone(),
        seqs: seqs[i].clone(),
        metrics: metrics.clone(),
        window: window.clone(),
        abandon: abandon.clone(),
    };

    // Hydration: seq 0 of every property through the normal publish path, then wait
    // until it has flowed through all twelve streams.
    let processed_total = || {
        stages
            .iter()
            .map(|st| get(&st.counters.processed))
            .sum::<u64>()
    };
    let hydration_start = Instant::now();
    let base: i64 = if s.hydrate { 0 } else { 1 };
    if s.hydrate {
        for (i, spec) in specs.iter().enumerate() {
            hydrate(spec, &penv(i), 96)
                .await
                .with_context(|| format!("hydrating flow {}", spec.flow as char))?;
        }
        let want = 12 * s.properties;
        let deadline = Instant::now() + Duration::from_secs(120);
        while processed_total() < want && Instant::now() < deadline && !interrupt.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        say(format!(
            "hydration: {} properties x 2 flows in {:.1}s, drained={} ({}/{})",
            s.properties,
            hydration_start.elapsed().as_secs_f64(),
            processed_total() >= want,
            processed_total(),
            want
        ));
    }
    let hydration_sec = hydration_start.elapsed().as_secs_f64();

    // Paced traffic: warm-up then the rated window.
    let lead = Duration::from_millis(50);
    let start = Instant::now() + lead;
    let start_us = now_us() + lead.as_micros() as i64;
    let warm = s.warmup.0;
    let rated = s.duration.0;
    let rated_start_us = start_us + warm.as_micros() as i64;
    let rated_end_us = rated_start_us + rated.as_micros() as i64;
    window.set(rated_start_us, rated_end_us);
    let rt = tokio::runtime::Handle::current();
    let producers: Vec<Producer> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            crate::producer::start(spec.clone(), penv(i), start, start_us, warm + rated, &rt)
        })
        .collect();
    *phase.lock() = "warmup";

    // Loader CPU and deliveries at the rated window's edges.
    let rated_processed = || {
        stages
            .iter()
            .map(|st| get(&st.counters.processed_rated))
            .sum::<u64>()
    };
    // Every delivery made while the window ran (whenever its event was scheduled):
    // what the loader's CPU in the window was spent on.
    let mut processed_at_start = 0;
    let edges = crate::rated::run_window(start, warm, rated, &interrupt, || {
        processed_at_start = processed_total();
        *phase.lock() = "rated";
    })
    .await;
    let processed_in_window = processed_total().saturating_sub(processed_at_start);
    let stopped_early = edges.stopped_early;
    if stopped_early {
        say("interrupted: stopping the producers; drain and verification still run".into());
        for p in &producers {
            p.stop_early();
        }
    }
    *phase.lock() = "drain";
    let drain_start = Instant::now();
    let drain_max = s.drain.max.0;
    // Publishers may retry until the drain's deadline, then give up (counted failed).
    abandon_at_deadline(&abandon, drain_max, &interrupt);
    for p in producers {
        p.finish().await;
    }

    // Drain: until every stream has processed what its flow published, or nothing
    // moved for the grace, or the deadline.
    let grace = crate::drain::grace(s.drain.grace.map(|d| d.0), description.lease_ms);
    let expected = |flow: u8| -> u64 {
        let f = &flows[usize::from(flow != b'A')];
        get(&f.published) + get(&f.hydration_published)
    };
    // Counts first (cheap), then the exact test: every stream has processed the
    // highest acknowledged seq of every property of its flow.
    let caught_up = || {
        stages
            .iter()
            .all(|st| get(&st.counters.processed) >= expected(st.def.flow))
            && stages.iter().all(|st| {
                let table = &seqs[usize::from(st.def.flow != b'A')];
                (0..s.properties).all(|p| st.max_seen.get(p) >= table.get(p))
            })
    };
    let drain_end = drain(
        drain_start,
        grace,
        drain_max,
        &interrupt,
        stopped_early,
        caught_up,
        processed_total,
    )
    .await;
    let drain_sec = drain_start.elapsed().as_secs_f64();
    say(format!(
        "drain: {} after {:.1}s",
        drain_end.name(),
        drain_sec
    ));

    // Stop the stages; close the logs.
    let consume_errors =
        crate::wind_down::wind_down(&stage_stop, consumers, &logs, &report_stop, reporter).await?;
    let broker_stats = broker.counters();
    let _ = broker.close().await;

    // produced.meta, then the checker's verdict.
    let meta = Meta {
        system: s.system.name(),
        properties: s.properties,
        rate: s.rate,
        base,
        drain: drain_end.name(),
        delivery: s.accept.name(),
        invariants: &plan.invariants,
        streams: defs
            .iter()
            .zip(&stream_counters)
            .map(|(d, c)| StreamMeta {
                name: d.name(),
                flow: d.flow as char,
                ack_errors: StreamCounters::get(&c.ack_errors),
            })
            .collect(),
        flows: vec![('A', &*seqs[0]), ('B', &*seqs[1])],
    };
    std::fs::write(dir.join("produced.meta"), meta.render()).context("writing produced.meta")?;
    let verdict = verify(&dir, s.accept)?;

    // The cost of serving the cell, over the rated window.
    let published_rated: u64 = [&flows[0], &flows[1]]
        .iter()
        .map(|f| get(&f.published_rated))
        .sum();
    let rated_sec = edges.rated_sec();
    let cost = sampling
        .finish_cell(
            rated_start_us,
            rated_sec,
            crate::sampling::workload_facts(
                &description,
                published_rated,
                rated_processed(),
                plan.lanes * topo.topics.len() as u64,
            ),
            opts.sampler_url.as_deref(),
            inv.started_unix_ms(),
            say,
        )
        .await?;

    // Figures.
    let snaps: BTreeMap<String, _> = [
        ("A".to_string(), flows[0].snapshot()),
        ("B".to_string(), flows[1].snapshot()),
    ]
    .into_iter()
    .collect();
    let identity_holds = snaps.values().all(|f| f.identity_holds());
    let offered_rated: u64 = snaps.values().map(|f| f.offered_rated).sum();
    let deliveries_rated = rated_processed();
    let all_delivered: u64 = stages.iter().map(|st| get(&st.counters.delivered)).sum();
    let loader = LoaderFigures::measure(edges.cpu_seconds, edges.wall_sec, processed_in_window);
    let lag = metrics.schedule_lag.summary();

    // VOID: the loader, not the system, was the limit.
    let void_reasons = crate::void_rule::reasons(
        &s.void,
        &crate::void_rule::LoaderLoad {
            shed_pacer: snaps.values().map(|f| f.shed_pacer).sum(),
            unit: "events",
            cores: loader.cpu_cores_mean,
            cores_available: loader.cores_available,
            schedule_lag_p99_ms: lag.p99_ms,
        },
    );
    let mut warnings = consume_errors.clone();
    let shed_bp: u64 = snaps.values().map(|f| f.shed_backpressure).sum();
    if shed_bp > 0 {
        warnings.push(format!(
            "{shed_bp} events shed: publisher queues were full (the system did not absorb the offered rate through {} shards per flow)",
            plan.shards
        ));
    }
    if !identity_holds {
        warnings
            .push("accounting identity offered = published + shed + failed does not hold".into());
    }
    let outcome = crate::void_rule::outcome(verdict.pass, identity_holds, &void_reasons);
    let ended = SystemTime::now();
    let summ = |m: &crate::histograms::Metric| m.summary();
    let streams_fig: Vec<StreamFigures> = stages
        .iter()
        .zip(&stream_counters)
        .zip(&plan.stages)
        .map(|((st, sc), sp)| StreamFigures {
            stream: st.def.name(),
            flow: (st.def.flow as char).to_string(),
            delivered: get(&st.counters.delivered),
            processed: get(&st.counters.processed),
            processed_rated: get(&st.counters.processed_rated),
            derived: get(&st.counters.derived),
            push_errors: get(&st.counters.push_errors),
            aborted_batches: get(&st.counters.aborted),
            decode_errors: get(&st.counters.decode_errors),
            slow_decodes: get(&st.counters.slow_decodes),
            acked: StreamCounters::get(&sc.acked),
            ack_errors: StreamCounters::get(&sc.ack_errors),
            refused: StreamCounters::get(&sc.refused),
            redelivered: StreamCounters::get(&sc.redelivered),
            receive_errors: StreamCounters::get(&sc.receive_errors),
            reconnects: StreamCounters::get(&sc.reconnects),
            lane_budget: sp.lane_budget,
            entry_age_ms: summ(&metrics.age[st.index]),
            barrier_ms: summ(&metrics.barrier[st.index]),
            push_ms: (!st.def.is_terminal()).then(|| summ(&metrics.push[st.index])),
        })
        .collect();
    let skew = skewed.is_skewed().then(|| {
        let flow_rate = s.rate as f64 / 2.0;
        let ceiling = s.batch as f64 * 1000.0 / 30.0;
        let c = [
            [
                summ(&metrics.e2e_cohort[0][0]),
                summ(&metrics.e2e_cohort[0][1]),
            ],
            [
                summ(&metrics.e2e_cohort[1][0]),
                summ(&metrics.e2e_cohort[1][1]),
            ],
        ];
        let cold99 = c[0][0].p99_ms.max(c[1][0].p99_ms);
        let hot99 = c[0][1].p99_ms.max(c[1][1].p99_ms);
        let [[a_cold, a_hot], [b_cold, b_hot]] = c;
        Skew {
            hot_props: s.hot.props,
            hot_factor: s.hot.factor,
            hot_share_pct: skewed.hot_share_pct(),
            hot_lane_offered_per_sec: skewed.hot_rate(flow_rate),
            cold_lane_offered_per_sec: skewed.cold_rate(flow_rate),
            lane_ceiling_per_sec: ceiling,
            hot_saturated: skewed.hot_rate(flow_rate) > ceiling,
            e2e_a_cold: a_cold,
            e2e_a_hot: a_hot,
            e2e_b_cold: b_cold,
            e2e_b_hot: b_hot,
            hot_over_cold_p99: if cold99 > 0.0 { hot99 / cold99 } else { 0.0 },
        }
    });
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
        workload: Workload {
            kind: "pipeline".into(),
            rate_events_per_sec: s.rate,
            rate_a: plan.rate_a,
            rate_b: plan.rate_b,
            properties: s.properties,
            lanes: plan.lanes,
            batch: s.batch,
            payload_b: s.payload_b,
            lane_headroom: s.lane_headroom,
            lane_budget_total: plan.lane_budget_total(),
            shards_per_flow: plan.shards,
            base_seq: base,
            dedup_window_sec: s.dedup_window_sec,
        },
        invariants: plan.invariants.clone(),
        provisioned: description.clone(),
        flows: snaps.clone(),
        identity_holds,
        throughput: Throughput {
            offered_per_sec: offered_rated as f64 / rated_sec,
            published_per_sec: published_rated as f64 / rated_sec,
            deliveries_per_sec: deliveries_rated as f64 / rated_sec,
            served_fraction: deliveries_rated as f64
                / rated_sec
                / plan.invariants.deliveries_per_sec as f64,
            reference_deliveries_per_sec: all_delivered as f64 / rated_sec,
        },
        latency_ms: Latency {
            e2e_a: summ(&metrics.e2e[0]),
            e2e_b: summ(&metrics.e2e[1]),
            e2e_warmup: summ(&metrics.e2e_warmup),
            schedule_lag: lag.clone(),
            ingress_publish: summ(&metrics.publish),
            ideal_work_ms: [("A".to_string(), 45.0), ("B".to_string(), 40.0)]
                .into_iter()
                .collect(),
        },
        skew,
        streams: streams_fig,
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
                reasons: void_reasons.clone(),
            },
            verdict: serde_json::to_value(&verdict).context("serialising the verdict")?,
            cost: Some(serde_json::to_value(&cost).context("serialising the cost summary")?),
            broker_stats,
            warnings: warnings.clone(),
        },
    };
    write_result(&dir, &result)?;
    inv.write(Some(ended), Some(outcome.name()))?;

    let summary = crate::summary::render(&result, &verdict.render_table(), &dir);
    Ok(RunReport {
        outcome,
        dir,
        summary,
    })
}

/// The checker's verdict on the cell's logs and `produced.meta`; duplicates pass
/// when the scenario accepts at-least-once delivery.
pub(crate) fn verify(dir: &Path, accept: Accept) -> Result<checker::Verdict> {
    checker::verify_dir(
        dir,
        &checker::VerifyOptions {
            allow_duplicates: accept == Accept::AtLeastOnce,
            ..Default::default()
        },
    )
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
