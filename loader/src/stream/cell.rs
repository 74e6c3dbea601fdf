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
use crate::metrics::Window;
use crate::record::host::{cores_available, peak_rss_bytes, process_cpu_seconds, Host};
use crate::record::invocation::{build_id, utc, Invocation};
use crate::record::result::{BuildInfo, DrainFigures, LoaderFigures, Times, VoidFigures};
use crate::run::{Outcome, RunOptions, RunReport};
use crate::scenario::{Accept, Loaded};
use crate::stage::now_us;
use crate::stream::config::{workers_for, StreamSection};
use crate::stream::ledger::Ledger;
use crate::stream::meta::StreamMeta;
use crate::stream::payload::Body;
use crate::stream::push::{PushCounters, PushEnv, PushMetrics, PushPlan, Pusher, ERROR_CLASSES};
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DrainEnd {
    CaughtUp,
    Grace,
    CutShort,
}

impl DrainEnd {
    fn name(&self) -> &'static str {
        match self {
            DrainEnd::CaughtUp => "caught-up",
            DrainEnd::Grace => "grace",
            DrainEnd::CutShort => "cut-short",
        }
    }
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
    let host = Host::probe();
    let started = SystemTime::now();
    let resolved_yaml = serde_yaml::to_string(s).context("serialising the resolved scenario")?;
    let write_invocation = |ended: Option<SystemTime>, outcome: Option<&str>| -> Result<()> {
        let inv = Invocation {
            argv: &opts.argv,
            scenario_path: &opts.scenario_path,
            scenario_text: &loaded.source_text,
            resolved_yaml: &resolved_yaml,
            host: &host,
            started,
            ended,
            outcome,
        };
        std::fs::write(dir.join("invocation.txt"), inv.render())
            .with_context(|| format!("writing {}", dir.join("invocation.txt").display()))
    };
    write_invocation(None, None)?;
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
        Err(refusal) => {
            let summary =
                crate::record::refused::record(&dir, s, &host, started, topo.lanes, refusal)?;
            write_invocation(Some(SystemTime::now()), Some(Outcome::Refused.name()))?;
            sampling.stop();
            return Ok(RunReport {
                outcome: Outcome::Refused,
                dir,
                summary,
            });
        }
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
    let pusher = Pusher::start(plan, env, start, start_us, warm + rated, &rt);

    let sleep_until = |at: Instant| tokio::time::sleep_until(tokio::time::Instant::from_std(at));
    let mut stopped_early = false;
    let mut cpu_at_start = process_cpu_seconds();
    let mut wall_at_start = Instant::now();
    let mut created_at_start = 0;
    let acked_now = || {
        stream_counters
            .iter()
            .map(|c| StreamCounters::get(&c.acked))
            .sum::<u64>()
    };
    let mut acked_at_start = 0;
    let popped_now = || sinks.iter().map(|s| get(&s.counters.popped)).sum::<u64>();
    let mut popped_at_start = 0;
    tokio::select! {
        _ = sleep_until(start + warm) => {
            cpu_at_start = process_cpu_seconds();
            wall_at_start = Instant::now();
            created_at_start = ledger.created.count();
            acked_at_start = acked_now();
            popped_at_start = popped_now();
            *phase.lock() = "rated";
        }
        _ = interrupt.cancelled() => { stopped_early = true; }
    }
    if !stopped_early {
        tokio::select! {
            _ = sleep_until(start + warm + rated) => {}
            _ = interrupt.cancelled() => { stopped_early = true; }
        }
    }
    let cpu_at_end = process_cpu_seconds();
    let wall_rated = wall_at_start.elapsed().as_secs_f64().max(1e-9);
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
    {
        let abandon = abandon.clone();
        tokio::spawn(async move {
            tokio::time::sleep(drain_max).await;
            abandon.cancel();
        });
    }
    pusher.finish().await;

    let grace = s.drain.grace.map(|d| d.0).unwrap_or_else(|| {
        Duration::from_millis(description.lease_ms.unwrap_or(0) + 5000).max(Duration::from_secs(5))
    });
    let popped_total = || sinks.iter().map(|s| get(&s.counters.popped)).sum::<u64>();
    let mut last_total = popped_total();
    let mut last_move = Instant::now();
    let groups_n = groups.len() as u64;
    let drain_end = loop {
        // Cheap count test first, then the exact per-partition one.
        if popped_total() >= get(&flow.published) * groups_n && ledger.caught_up() {
            break DrainEnd::CaughtUp;
        }
        let total = popped_total();
        if total != last_total {
            last_total = total;
            last_move = Instant::now();
        }
        if last_move.elapsed() >= grace {
            break DrainEnd::Grace;
        }
        if drain_start.elapsed() >= drain_max {
            break DrainEnd::CutShort;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = async { if stopped_early { std::future::pending::<()>().await } else { interrupt.cancelled().await } } => {
                break DrainEnd::CutShort;
            }
        }
    };
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
        delivery: match s.accept {
            Accept::ExactlyOnce => "exactly-once",
            Accept::AtLeastOnce => "at-least-once",
        },
        streams: groups
            .iter()
            .zip(&stream_counters)
            .map(|(g, c)| (format!("{topic}_{g}"), StreamCounters::get(&c.ack_errors)))
            .collect(),
        acked: &ledger.acked,
    };
    std::fs::write(dir.join("produced.meta"), meta.render()).context("writing produced.meta")?;
    let verdict = checker::verify_dir(
        &dir,
        &checker::VerifyOptions {
            allow_duplicates: s.accept == Accept::AtLeastOnce,
            ..Default::default()
        },
    )
    .context("verifying the stream logs")?;

    let published_rated = get(&flow.published_rated);
    let cost = sampling.finish(
        sampler::RatedWindow {
            start_unix_ms: (rated_start_us / 1000) as u64,
            end_unix_ms: (rated_start_us / 1000) as u64
                + (if stopped_early {
                    wall_rated
                } else {
                    rated.as_secs_f64()
                } * 1000.0) as u64,
        },
        sampler::WorkloadFacts {
            ingress_events: published_rated,
            deliveries: popped_rated_at_end,
            physical_publishes: (published_rated as f64 * description.publishes_per_ingress_event)
                .round() as u64,
            ordered_lanes: description.ordered_lanes,
            connections: description.connections,
            consumers: description.consumer_members,
            queues: description.physical_queues,
            partitions: st.lanes(),
            loader_cores_available: cores_available(),
        },
    )?;
    if let Some(url) = &opts.sampler_url {
        let since = started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        match sampler::pull(url, since, &dir.join("samples-remote.csv")).await {
            Ok(rows) => say(format!("pulled {rows} remote samples from {url}")),
            Err(e) => say(format!(
                "warning: could not pull remote samples from {url}: {e}"
            )),
        }
    }

    // Figures.
    let snap = flow.snapshot();
    let identity_holds = snap.identity_holds();
    let rated_sec = if stopped_early {
        wall_rated
    } else {
        rated.as_secs_f64()
    };
    let loader_cores = (cpu_at_end - cpu_at_start) / wall_rated;
    let avail = cores_available();
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
    let mut void_reasons = Vec::new();
    if snap.shed_pacer > 0 {
        void_reasons.push(format!(
            "the pacer fell more than {} requests behind and skipped {} messages (loader could not hold the schedule)",
            crate::producer::CATCH_UP_CAP,
            snap.shed_pacer
        ));
    }
    if loader_cores / avail > s.void.loader_cpu_max {
        void_reasons.push(format!(
            "loader used {:.2} of {:.0} cores ({:.0}% > {:.0}% allowed)",
            loader_cores,
            avail,
            100.0 * loader_cores / avail,
            100.0 * s.void.loader_cpu_max
        ));
    }
    let lag_max_ms = s.void.schedule_lag_p99_max.secs_f64() * 1000.0;
    if lag.p99_ms > lag_max_ms {
        void_reasons.push(format!(
            "schedule lag p99 {:.2} ms > {:.2} ms allowed (void.schedule_lag_p99_max)",
            lag.p99_ms, lag_max_ms
        ));
    }
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
    let outcome = if !verdict.pass || !identity_holds {
        Outcome::Fail
    } else if !void_reasons.is_empty() {
        Outcome::Void
    } else {
        Outcome::Pass
    };
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
    let (version, commit) = build_id();
    let ms = |us: i64| us / 1000;
    let result = StreamCellResult {
        schema_version: crate::record::result::SCHEMA_VERSION,
        crossbench: BuildInfo {
            version,
            git_commit: commit,
        },
        cell: s.name.clone(),
        outcome: outcome.name().into(),
        system: description.system.clone(),
        variant: description.variant.clone(),
        durability: description.durability,
        delivery: description.delivery,
        accept: s.accept,
        time: Times {
            started_utc: utc(started),
            ended_utc: utc(ended),
            started_unix_ms: started
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            rated_start_unix_ms: ms(rated_start_us),
            rated_end_unix_ms: ms(rated_start_us) + (rated_sec * 1000.0) as i64,
            rated_sec,
            warmup_sec: warm.as_secs_f64(),
            drain_sec,
            hydration_sec: 0.0,
        },
        host: host.clone(),
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
        loader: LoaderFigures {
            cpu_cores_mean: loader_cores,
            cores_available: avail,
            cpu_fraction_of_available: loader_cores / avail,
            cpu_us_per_delivery: (cpu_at_end - cpu_at_start) * 1e6
                / popped_rated_at_end.max(1) as f64,
            peak_rss_bytes: peak_rss_bytes(),
            runtime_threads: tokio::runtime::Handle::current().metrics().num_workers(),
            pacer_priority: crate::priority::pacer_priority().to_string(),
        },
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
    };
    let mut json = serde_json::to_string_pretty(&result).context("serialising result.json")?;
    json.push('\n');
    std::fs::write(
        dir.join("result.json"),
        crate::record::redact::redact(&json),
    )
    .context("writing result.json")?;
    write_invocation(Some(ended), Some(outcome.name()))?;
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
    let _ = writeln!(
        o,
        "\n=== SUMMARY  cell={}  system={}{}  stream  rate={} msg/s  space={} window={}  rated={:.1}s ===",
        r.cell,
        r.system,
        if r.variant.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.variant)
        },
        r.workload.rate_msgs_per_sec,
        r.workload.space,
        r.workload.window,
        r.time.rated_sec
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
        r.loader.cpu_cores_mean,
        r.loader.peak_rss_bytes as f64 / 1e6
    );
    o.push_str(verdict_table);
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    for v in &r.void.reasons {
        let _ = writeln!(o, "VOID: {v}");
    }
    let _ = writeln!(o, "outcome: {}   record: {}", r.outcome, dir.display());
    o
}
