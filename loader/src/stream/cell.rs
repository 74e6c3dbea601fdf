//! One stream cell, end to end: set up one topic with G groups, pace pushes over the
//! partition window, consume, drain, verify per-partition sequences, record.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use adapters::{ConsumeOptions, StreamCounters, TopicSpec, Topology};
use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::counters::{get, FlowCounters};
use crate::drain::{abandon_at_deadline, drain};
use crate::metrics::Window;
use crate::record::invocation::InvocationFile;
use crate::record::result::{
    write_result, CellHead, CellTail, DrainFigures, LoaderFigures, Times, VoidFigures,
};
use crate::run::{refused_cell, verify, RunOptions, RunReport};
use crate::scenario::Loaded;
use crate::stage::now_us;
use crate::stream::config::{workers_for, StreamSection};
use crate::stream::ledger::Ledger;
use crate::stream::meta::StreamMeta;
use crate::stream::payload::Body;
use crate::stream::push::{PushCounters, PushEnv, PushMetrics, PushPlan, ERROR_CLASSES};
use crate::stream::record::*;
use crate::stream::sink::{Sink, SinkMetrics};
use crate::stream::window::Picker;
use crate::streamlog::StreamLog;

/// The topic name before the prefix.
pub const TOPIC: &str = "stream";

/// Group names `g1`, `g2`, ….
pub fn group_names(groups: u64) -> Vec<String> {
    (1..=groups).map(|i| format!("g{i}")).collect()
}

/// Run one stream cell. `loaded.scenario` has one rate (`rate` set, ladder resolved
/// by the caller); `ladder` is the ladder it came from, for the record.
pub async fn run_stream_cell(
    loaded: &Loaded,
    opts: &RunOptions,
    ladder: &[u64],
    interrupt: &CancellationToken,
) -> Result<RunReport> {
    let s = &loaded.scenario;
    let st: &StreamSection = s.stream.as_ref().context("stream section missing")?;
    let dir = opts.out.clone();
    let inv = InvocationFile::begin(loaded, opts)?;
    let started = inv.started;
    let sampling = crate::sampling::start(s, &dir)?;
    let say = |m: String| {
        if !opts.quiet {
            eprintln!("{m}");
        }
    };
    let shape = st.shape();
    let workers = workers_for(st.push.workers, shape.window, shape.space);
    let picker = Picker::new(shape, workers, st.push.partitions_per_request);
    let groups = group_names(st.consume.groups);
    let topic = format!("{}{TOPIC}", s.prefix);
    say(format!(
        "=== crossbench stream  cell={}  system={}  rate={} msg/s  space={} window={} ({:.0} partitions/s enter)  push {}x{}  groups={}x{}  duration={} warmup={} ===",
        s.name,
        s.system.name(),
        s.rate,
        shape.space,
        shape.window,
        picker.partitions_per_sec(),
        st.push.batch,
        st.push.partitions_per_request,
        st.consume.groups,
        st.consume.consumers,
        s.duration,
        s.warmup
    ));

    let broker = crate::systems::build(s)?;
    let topo = Topology {
        topics: vec![TopicSpec {
            name: topic.clone(),
            groups: groups.clone(),
        }],
        keys: shape.space,
        lanes: st.lanes(),
        durability: s.durability,
        dedup_window_sec: s.dedup_window_sec,
        reset: !s.no_reset,
    };
    let description = match crate::systems::setup(&*broker, s, &topo).await? {
        Ok(d) => d,
        Err(refusal) => return refused_cell(&inv, s, topo.lanes, refusal, sampling, dir),
    };

    // Consumers: one sink per group.
    let window = Arc::new(Window::default());
    let ledger = Arc::new(Ledger::new(shape.space, groups.len()));
    let sink_metrics = Arc::new(SinkMetrics::default());
    let stage_stop = CancellationToken::new();
    let mut logs = Vec::new();
    let mut sinks = Vec::new();
    let mut stream_counters = Vec::new();
    let mut consumers = tokio::task::JoinSet::new();
    for (gi, g) in groups.iter().enumerate() {
        let name = format!("{topic}_{g}");
        let log = Arc::new(
            StreamLog::create(&dir.join(format!("{name}.log")))
                .with_context(|| format!("creating the log of {name}"))?,
        );
        let sink = Arc::new(Sink::new(
            log.clone(),
            ledger.clone(),
            gi,
            sink_metrics.clone(),
            window.clone(),
        ));
        let counters = Arc::new(StreamCounters::default());
        let options = ConsumeOptions {
            batch: st.consume.pop_batch as usize,
            lanes: st.consume_lanes() as usize,
            counters: counters.clone(),
        };
        let b = broker.clone();
        let (t, gname) = (topic.clone(), g.clone());
        let h: Arc<dyn adapters::BatchHandler> = sink.clone();
        let stop = stage_stop.clone();
        consumers.spawn(async move {
            let r = b.consume(&t, &gname, options, h, stop).await;
            (format!("{t}_{gname}"), r)
        });
        logs.push(log);
        sinks.push(sink);
        stream_counters.push(counters);
    }

    // Reporter.
    let flow = Arc::new(FlowCounters::default());
    let push_counters = Arc::new(PushCounters::default());
    let push_metrics = Arc::new(PushMetrics::default());
    let phase = Arc::new(parking_lot::Mutex::new("warmup"));
    let report_stop = CancellationToken::new();
    let watch = crate::stream::report::Watch {
        flow: flow.clone(),
        push: push_counters.clone(),
        push_metrics: push_metrics.clone(),
        sinks: sinks.iter().map(|s| s.counters.clone()).collect(),
        streams: stream_counters.clone(),
        sink_metrics: sink_metrics.clone(),
        ledger: ledger.clone(),
        phase: phase.clone(),
    };
    let reporter = {
        let dir = dir.clone();
        let stop = report_stop.clone();
        let quiet = opts.quiet;
        tokio::spawn(
            async move { crate::stream::report::run(watch, &dir, started, quiet, stop).await },
        )
    };

    // Paced traffic: warm-up then the rated window.
    let abandon = CancellationToken::new();
    let lead = Duration::from_millis(50);
    let start = Instant::now() + lead;
    let start_us = now_us() + lead.as_micros() as i64;
    let warm = s.warmup.0;
    let rated = s.duration.0;
    let rated_start_us = start_us + warm.as_micros() as i64;
    window.set(rated_start_us, rated_start_us + rated.as_micros() as i64);
    let plan = PushPlan {
        rate: s.rate as f64,
        ramp: s.ramp.secs_f64(),
        batch: st.push.batch,
        picker: picker.clone(),
        workers,
        queue: st.push.in_flight.div_ceil(workers) as usize,
        space: shape.space,
    };
    let env = PushEnv {
        broker: broker.clone(),
        topic: topic.clone(),
        flow: flow.clone(),
        counters: push_counters.clone(),
        metrics: push_metrics.clone(),
        ledger: ledger.clone(),
        window: window.clone(),
        body: Body::new(st.payload.bytes, st.payload.compressible, s.seed),
        abandon: abandon.clone(),
    };
    let rt = tokio::runtime::Handle::current();
    let pusher = crate::stream::push::start(plan, env, start, start_us, warm + rated, &rt);

    let acked_now = || {
        stream_counters
            .iter()
            .map(|c| StreamCounters::get(&c.acked))
            .sum::<u64>()
    };
    let popped_now = || sinks.iter().map(|s| get(&s.counters.popped)).sum::<u64>();
    let (mut created_at_start, mut acked_at_start, mut popped_at_start) = (0, 0, 0);
    let edges = crate::rated::run_window(start, warm, rated, interrupt, || {
        created_at_start = ledger.created.count();
        acked_at_start = acked_now();
        popped_at_start = popped_now();
        *phase.lock() = "rated";
    })
    .await;
    let stopped_early = edges.stopped_early;
    let wall_rated = edges.wall_sec;
    let created_at_end = ledger.created.count();
    let popped_rated_at_end: u64 = sinks.iter().map(|s| get(&s.counters.popped_rated)).sum();
    let acked_at_end = acked_now();
    let popped_at_end = popped_now();
    if stopped_early {
        say("interrupted: stopping the producer; drain and verification still run".into());
        pusher.stop_early();
    }
    *phase.lock() = "drain";
    let drain_start = Instant::now();
    let drain_max = s.drain.max.0;
    abandon_at_deadline(&abandon, drain_max, interrupt);
    pusher.finish().await;

    let grace = crate::drain::grace(s.drain.grace.map(|d| d.0), description.lease_ms);
    let groups_n = groups.len() as u64;
    // Cheap count test first, then the exact per-partition one.
    let caught_up = || popped_now() >= get(&flow.published) * groups_n && ledger.caught_up();
    let drain_end = drain(
        drain_start,
        grace,
        drain_max,
        interrupt,
        stopped_early,
        caught_up,
        popped_now,
    )
    .await;
    let drain_sec = drain_start.elapsed().as_secs_f64();
    say(format!(
        "drain: {} after {:.1}s",
        drain_end.name(),
        drain_sec
    ));

    let mut warnings =
        crate::wind_down::wind_down(&stage_stop, consumers, &logs, &report_stop, reporter).await?;
    let broker_stats = broker.counters();
    let _ = broker.close().await;

    // produced.meta, then the checker.
    let meta = StreamMeta {
        system: s.system.name(),
        partitions: shape.space,
        rate: s.rate,
        drain: drain_end.name(),
        delivery: s.accept.name(),
        streams: groups
            .iter()
            .zip(&stream_counters)
            .map(|(g, c)| (format!("{topic}_{g}"), StreamCounters::get(&c.ack_errors)))
            .collect(),
        acked: &ledger.acked,
    };
    std::fs::write(dir.join("produced.meta"), meta.render()).context("writing produced.meta")?;
    let verdict = verify(&dir, s.accept)?;

    let published_rated = get(&flow.published_rated);
    let rated_sec = edges.rated_sec();
    let cost = sampling
        .finish_cell(
            rated_start_us,
            rated_sec,
            crate::sampling::workload_facts(
                &description,
                published_rated,
                popped_rated_at_end,
                st.lanes(),
            ),
            opts.sampler_url.as_deref(),
            inv.started_unix_ms(),
            say,
        )
        .await?;

    // Figures.
    let snap = flow.snapshot();
    let identity_holds = snap.identity_holds();
    let loader = LoaderFigures::measure(
        edges.cpu_seconds,
        edges.wall_sec,
        popped_at_end.saturating_sub(popped_at_start),
    );
    let lag = push_metrics.schedule_lag.summary();
    let popped_rated: u64 = sinks.iter().map(|s| get(&s.counters.popped_rated)).sum();
    let e2e = sink_metrics.e2e.summary();
    let offered_per_sec = snap.offered_rated as f64 / rated_sec;
    // What the consumers took while the rated window ran (any message), per group:
    // the consumption rate the seed's "behind" rule compares with the offered rate.
    let popped_per_sec =
        popped_at_end.saturating_sub(popped_at_start) as f64 / groups_n as f64 / wall_rated;
    let served_fraction = if offered_per_sec > 0.0 {
        popped_per_sec / offered_per_sec
    } else {
        0.0
    };
    let void_reasons = crate::void_rule::reasons(
        &s.void,
        &crate::void_rule::LoaderLoad {
            shed_pacer: snap.shed_pacer,
            unit: "messages",
            cores: loader.cpu_cores_mean,
            cores_available: loader.cores_available,
            schedule_lag_p99_ms: lag.p99_ms,
        },
    );
    if snap.shed_backpressure > 0 {
        warnings.push(format!(
            "{} messages shed: the push queues ({} requests over {} workers) were full, the system did not absorb the offered rate",
            snap.shed_backpressure, st.push.in_flight, workers
        ));
    }
    if !identity_holds {
        warnings
            .push("accounting identity offered = published + shed + failed does not hold".into());
    }
    let outcome = crate::void_rule::outcome(verdict.pass, identity_holds, &void_reasons);
    let ended = SystemTime::now();
    let ack_calls: u64 = stream_counters
        .iter()
        .map(|c| StreamCounters::get(&c.ack_calls))
        .sum();
    let ack_micros: u64 = stream_counters
        .iter()
        .map(|c| StreamCounters::get(&c.ack_micros))
        .sum();
    let seen_by_group: Vec<u64> = verdict.streams.iter().map(|v| v.properties_seen).collect();
    let push_by_class: BTreeMap<String, u64> = ERROR_CLASSES
        .iter()
        .zip(&push_counters.errors)
        .map(|(c, n)| (c.to_string(), get(n)))
        .collect();
    let result = StreamCellResult {
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
                0.0,
            ),
            inv.host.clone(),
        ),
        workload: StreamWorkload {
            kind: "stream".into(),
            rate_msgs_per_sec: s.rate,
            ladder: ladder.to_vec(),
            space: shape.space,
            window: shape.window,
            rotate_every_sec: shape.rotate_every_us as f64 / 1e6,
            rotate_step: shape.rotate_step,
            window_partitions_per_sec: picker.partitions_per_sec(),
            lanes: st.lanes(),
            push_batch: st.push.batch,
            partitions_per_request: st.push.partitions_per_request,
            push_workers: workers,
            push_in_flight: st.push.in_flight,
            push_requests_per_sec: s.rate as f64 / st.push.batch as f64,
            payload_b: st.payload.bytes,
            compressible: st.payload.compressible,
            groups: st.consume.groups,
            consumers_per_group: st.consume.consumers,
            pop_batch: st.consume.pop_batch,
            pop_partitions: st.consume.pop_partitions,
            ack_mode: match st.consume.ack {
                crate::stream::config::AckMode::Async => "async".into(),
                crate::stream::config::AckMode::Sync => "sync".into(),
            },
            ack_in_flight: st.consume.ack_in_flight,
            consume_lanes: st.consume_lanes(),
            base_seq: 1,
            dedup_window_sec: s.dedup_window_sec,
        },
        provisioned: description.clone(),
        flows: [("S".to_string(), snap)].into_iter().collect(),
        identity_holds,
        throughput: StreamThroughput {
            offered_per_sec,
            published_per_sec: published_rated as f64 / rated_sec,
            popped_per_sec,
            eventually_popped_fraction: if published_rated == 0 {
                0.0
            } else {
                popped_rated as f64 / groups_n as f64 / published_rated as f64
            },
            acked_per_sec: acked_at_end.saturating_sub(acked_at_start) as f64
                / groups_n as f64
                / wall_rated,
            served_fraction,
            behind: served_fraction < 0.97 || e2e.p99_ms > 5000.0,
        },
        latency_ms: StreamLatency {
            e2e,
            e2e_warmup: sink_metrics.e2e_warmup.summary(),
            push: push_metrics.push.summary(),
            publish_rtt: push_metrics.publish_rtt.summary(),
            schedule_lag: lag,
            ack_round_trip_mean_ms: (ack_calls > 0)
                .then(|| ack_micros as f64 / ack_calls as f64 / 1000.0),
        },
        partitions: PartitionFigures {
            space: shape.space,
            created: ledger.created.count(),
            created_per_sec_rated: (created_at_end - created_at_start) as f64 / rated_sec,
            seen_by_group,
        },
        groups: groups
            .iter()
            .zip(&sinks)
            .zip(&stream_counters)
            .map(|((g, sk), sc)| GroupFigures {
                group: g.clone(),
                popped: get(&sk.counters.popped),
                popped_rated: get(&sk.counters.popped_rated),
                batches: get(&sk.counters.batches),
                acked: StreamCounters::get(&sc.acked),
                ack_errors: StreamCounters::get(&sc.ack_errors),
                receive_errors: StreamCounters::get(&sc.receive_errors),
                refused: StreamCounters::get(&sc.refused),
                redelivered: StreamCounters::get(&sc.redelivered),
                reconnects: StreamCounters::get(&sc.reconnects),
                decode_errors: get(&sk.counters.decode_errors),
            })
            .collect(),
        errors: ErrorFigures {
            push: push_counters.error_total(),
            push_by_class,
            pop: stream_counters
                .iter()
                .map(|c| StreamCounters::get(&c.receive_errors))
                .sum(),
            ack: stream_counters
                .iter()
                .map(|c| StreamCounters::get(&c.ack_errors))
                .sum(),
        },
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
            verdict: serde_json::to_value(&verdict).context("serialising the verdict")?,
            cost: Some(serde_json::to_value(&cost).context("serialising the cost summary")?),
            broker_stats,
            warnings,
        },
    };
    write_result(&dir, &result)?;
    inv.write(Some(ended), Some(outcome.name()))?;
    let summary = render_summary(&result, &verdict.render_table(), &dir);
    Ok(RunReport {
        outcome,
        dir,
        summary,
    })
}

fn render_summary(r: &StreamCellResult, verdict_table: &str, dir: &std::path::Path) -> String {
    let mut o = String::new();
    let l = &r.latency_ms;
    crate::summary::banner(
        &mut o,
        &r.head,
        &format!(
            "stream  rate={} msg/s  space={} window={}",
            r.workload.rate_msgs_per_sec, r.workload.space, r.workload.window
        ),
    );
    for (name, f) in &r.flows {
        let _ = writeln!(
            o,
            "flow {name}:   offered {}  accepted {}  shed {} (queues {}, pacer {})  failed {}  retries {}  identity {}",
            f.offered,
            f.published,
            f.shed,
            f.shed_backpressure,
            f.shed_pacer,
            f.failed,
            f.publish_retries,
            if r.identity_holds { "holds" } else { "BROKEN" }
        );
    }
    let t = &r.throughput;
    let _ = writeln!(
        o,
        "rated:    offered {:.0}/s  accepted {:.0}/s  popped {:.0}/s per group  served {:.1}%{}",
        t.offered_per_sec,
        t.published_per_sec,
        t.popped_per_sec,
        100.0 * t.served_fraction,
        if t.behind { "  BEHIND" } else { "" }
    );
    let _ = writeln!(
        o,
        "e2e:      p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1} ms (n={})   push p99 {:.1} ms   ack rtt {}",
        l.e2e.p50_ms,
        l.e2e.p99_ms,
        l.e2e.p999_ms,
        l.e2e.max_ms,
        l.e2e.count,
        l.push.p99_ms,
        l.ack_round_trip_mean_ms
            .map_or("n/a".to_string(), |m| format!("{m:.2} ms"))
    );
    let _ = writeln!(
        o,
        "partitions: created {} of {} ({:.0}/s rated)   errors push {} pop {} ack {}",
        r.partitions.created,
        r.partitions.space,
        r.partitions.created_per_sec_rated,
        r.errors.push,
        r.errors.pop,
        r.errors.ack
    );
    let _ = writeln!(
        o,
        "loader:   {:.2} cores  peak RSS {:.1} MB",
        r.tail.loader.cpu_cores_mean,
        r.tail.loader.peak_rss_bytes as f64 / 1e6
    );
    crate::summary::closing(&mut o, &r.head, &r.tail, verdict_table, dir);
    o
}
