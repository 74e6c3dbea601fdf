//! The stream workload (`workload: stream`, SPEC.md §9): one topic, a partition
//! space with a rotating active window (or a fixed set), open-loop pushes, G
//! consumer groups (one consumer stream each), per-partition sequence checks, and a
//! rate ladder of one cell per rate.
//!
//! One concept per file: [`rotation`] (which partitions a push goes to), [`complete`]
//! (the space completed before the warm-up, when asked), [`payload`]
//! (message bodies), [`push`] (the emit closure and push workers), [`sink`] (a
//! group's handler), [`ledger`] (per-partition state), [`meta`] (`produced.meta`),
//! [`progress`] (its live columns), [`figures`] (its part of `result.json`) and
//! [`ladder`]. Its scenario section is `crate::scenario::stream`.

pub mod complete;
pub mod figures;
pub mod ladder;
pub mod ledger;
pub mod meta;
pub mod payload;
pub mod progress;
pub mod push;
pub mod rotation;
pub mod sink;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use adapters::{BatchHandler, BuildContext, ErrorClass, StreamCounters, TopicSpec, Topology};
use async_trait::async_trait;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::cell::drain::DrainEnd;
use crate::cell::workload::{CellEnv, ConsumerSpec, Ending, Figures, Load, Traffic, Workload};
use crate::console::progress::ProgressSource;
use crate::measure::counters::FlowCounters;
use crate::measure::phase::Phase;
use crate::pacing::pacer::Paced;
use crate::record::result::CellResult;
use crate::record::stream_log::StreamLogs;
use crate::scenario::stream::{workers_for, AckMode, Shape, StreamSection};
use crate::scenario::Scenario;

use figures::*;
use ledger::Ledger;
use payload::Body;
use push::{PushCounters, PushEnv, PushMetrics, PushPlan};
use rotation::Picker;
use sink::{Sink, SinkMetrics};

/// The topic name before the prefix.
pub const TOPIC: &str = "stream";

/// Group names `g1`, `g2`, ….
pub fn group_names(groups: u64) -> Vec<String> {
    (1..=groups).map(|i| format!("g{i}")).collect()
}

/// Counters snapshotted at the rated window's edges.
#[derive(Debug, Default, Clone, Copy)]
struct Edges {
    created_at_start: u64,
    acked_at_start: u64,
    popped_at_start: u64,
    created_at_end: u64,
    popped_rated_at_end: u64,
    acked_at_end: u64,
    popped_at_end: u64,
}

/// A stream cell (one rate of a ladder).
#[derive(Debug)]
pub struct Stream {
    s: Scenario,
    st: StreamSection,
    /// The ladder this cell belongs to (empty for a single rate), for the record.
    ladder: Vec<u64>,
    shape: Shape,
    workers: u64,
    picker: Picker,
    topic: String,
    groups: Vec<String>,
    flow: Arc<FlowCounters>,
    push_counters: Arc<PushCounters>,
    push_metrics: Arc<PushMetrics>,
    ledger: Arc<Ledger>,
    /// Given-up pushes (`# failed` / `# indeterminate` in produced.meta).
    outcomes: Arc<crate::measure::outcomes::Outcomes>,
    sink_metrics: Arc<SinkMetrics>,
    sinks: Vec<Arc<Sink>>,
    stream_counters: Vec<Arc<StreamCounters>>,
    edges: Mutex<Edges>,
}

impl Stream {
    /// The cell of `s` (one rate: `rate` set, the ladder resolved by the caller).
    pub fn new(s: &Scenario, ladder: &[u64]) -> anyhow::Result<Stream> {
        let st = s
            .stream
            .clone()
            .ok_or_else(|| anyhow::anyhow!("stream section missing"))?;
        let shape = st.shape();
        let workers = workers_for(st.push.workers, shape.window, shape.space);
        let groups = group_names(st.consume.groups);
        Ok(Stream {
            picker: Picker::new(shape, workers, st.push.partitions_per_request),
            topic: format!("{}{TOPIC}", s.prefix),
            flow: Arc::new(FlowCounters::default()),
            push_counters: Arc::new(PushCounters::default()),
            push_metrics: Arc::new(PushMetrics::default()),
            ledger: Arc::new(Ledger::new(shape.space, groups.len())),
            outcomes: Default::default(),
            sink_metrics: Arc::new(SinkMetrics::default()),
            sinks: Vec::new(),
            stream_counters: Vec::new(),
            edges: Mutex::new(Edges::default()),
            ladder: ladder.to_vec(),
            s: s.clone(),
            st,
            shape,
            workers,
            groups,
        })
    }

    /// The message bodies of this cell.
    fn body(&self) -> Body {
        Body::new(
            self.st.payload.bytes,
            self.st.payload.compressible,
            self.s.seed,
        )
    }

    fn acked_now(&self) -> u64 {
        self.stream_counters.iter().map(|c| c.acked.get()).sum()
    }

    fn popped_now(&self) -> u64 {
        self.sinks.iter().map(|s| s.counters.popped.get()).sum()
    }

    fn popped_rated(&self) -> u64 {
        self.sinks
            .iter()
            .map(|s| s.counters.popped_rated.get())
            .sum()
    }
}

#[async_trait]
impl Workload for Stream {
    type Body = StreamBody;

    fn kind(&self) -> &'static str {
        "stream"
    }

    fn banner(&self) -> Vec<String> {
        let (s, st, shape) = (&self.s, &self.st, &self.shape);
        vec![format!(
            "=== crossbench stream  cell={}  system={}  rate={} msg/s  space={} window={} ({:.0} partitions/s enter)  push {}x{}  groups={}x{}  duration={} warmup={} ===",
            s.name,
            s.system,
            s.rate,
            shape.space,
            shape.window,
            self.picker.partitions_per_sec(),
            st.push.batch,
            st.push.partitions_per_request,
            st.consume.groups,
            st.consume.consumers,
            s.duration,
            s.warmup
        )]
    }

    fn shape(&self) -> String {
        format!(
            "stream  rate={} msg/s  space={} window={}",
            self.s.rate, self.shape.space, self.shape.window
        )
    }

    fn build_context(&self) -> BuildContext {
        crate::workload::build_context(&self.s)
    }

    fn topology(&self) -> Topology {
        Topology {
            topics: vec![TopicSpec {
                name: self.topic.clone(),
                groups: self.groups.clone(),
            }],
            keys: self.shape.space,
            lanes: self.st.lanes(),
            durability: self.s.durability,
            dedup_window_sec: self.s.dedup_window_sec,
            reset: !self.s.no_reset,
            sharing: adapters::Sharing::ALONE,
        }
    }

    fn initial_phase(&self) -> Phase {
        Phase::Warmup
    }

    fn consumers(&self) -> Vec<ConsumerSpec> {
        self.groups
            .iter()
            .map(|g| ConsumerSpec {
                topic: self.topic.clone(),
                group: g.clone(),
                batch: self.st.consume.pop_batch as usize,
                lanes: self.st.consume_lanes() as usize,
            })
            .collect()
    }

    fn attach(
        &mut self,
        env: &CellEnv,
        logs: &StreamLogs,
        counters: &[Arc<StreamCounters>],
    ) -> anyhow::Result<Vec<Arc<dyn BatchHandler>>> {
        self.sinks = (0..self.groups.len())
            .map(|gi| {
                Arc::new(Sink::new(
                    logs.log(gi),
                    self.ledger.clone(),
                    gi,
                    self.sink_metrics.clone(),
                    env.window.clone(),
                    env.clock,
                ))
            })
            .collect();
        self.stream_counters = counters.to_vec();
        Ok(self
            .sinks
            .iter()
            .map(|s| s.clone() as Arc<dyn BatchHandler>)
            .collect())
    }

    fn progress(&self) -> Box<dyn ProgressSource> {
        Box::new(progress::StreamProgress::new(
            self.flow.clone(),
            self.push_counters.clone(),
            self.push_metrics.clone(),
            self.sinks.iter().map(|s| s.counters.clone()).collect(),
            self.stream_counters.clone(),
            self.sink_metrics.clone(),
            self.ledger.clone(),
        ))
    }

    async fn prepare(
        &self,
        env: &CellEnv,
        interrupt: &CancellationToken,
        say: &(dyn Fn(String) + Sync),
    ) -> anyhow::Result<f64> {
        if !self.st.partitions.complete {
            // Partitions come into existence on their first push: nothing to hydrate.
            return Ok(0.0);
        }
        complete::Completion {
            broker: env.broker.clone(),
            topic: self.topic.clone(),
            body: self.body(),
            ledger: self.ledger.clone(),
            clock: env.clock,
            space: self.shape.space,
            concurrency: self.workers,
            drain_max: self.s.drain.max.0,
            interrupt,
            say,
        }
        .run()
        .await
    }

    fn start_traffic(&self, env: &CellEnv, traffic: Traffic) -> Vec<Paced> {
        let (s, st) = (&self.s, &self.st);
        let plan = PushPlan {
            rate: s.rate as f64,
            ramp: s.ramp.secs_f64(),
            batch: st.push.batch,
            picker: self.picker.clone(),
            workers: self.workers,
            queue: st.push.in_flight.div_ceil(self.workers) as usize,
            space: self.shape.space,
            drive: st.push.pacer,
            first_seq: if st.partitions.complete {
                complete::AFTER_COMPLETION
            } else {
                1
            },
        };
        let penv = PushEnv {
            broker: env.broker.clone(),
            topic: self.topic.clone(),
            flow: self.flow.clone(),
            counters: self.push_counters.clone(),
            metrics: self.push_metrics.clone(),
            ledger: self.ledger.clone(),
            window: env.window.clone(),
            clock: env.clock,
            body: self.body(),
            abandon: env.abandon.clone(),
            deadline: s.publish_deadline.0,
            outcomes: self.outcomes.clone(),
        };
        vec![push::start(plan, penv, traffic, env.timing)]
    }

    fn at_rated_start(&self) {
        let mut e = self.edges.lock();
        e.created_at_start = self.ledger.created.count();
        e.acked_at_start = self.acked_now();
        e.popped_at_start = self.popped_now();
    }

    fn at_rated_end(&self) {
        let mut e = self.edges.lock();
        e.created_at_end = self.ledger.created.count();
        e.popped_rated_at_end = self.popped_rated();
        e.acked_at_end = self.acked_now();
        e.popped_at_end = self.popped_now();
    }

    fn deliveries(&self) -> u64 {
        self.popped_now()
    }

    fn tally(&self) -> crate::cell::faults::timeline::Tally {
        let flow = self.flow.clone();
        let flow2 = self.flow.clone();
        let counters: Vec<_> = self.sinks.iter().map(|s| s.counters.clone()).collect();
        crate::cell::faults::timeline::Tally {
            errors: Arc::new(move || flow2.publish_errors.iter().map(|c| c.get()).sum()),
            published: Arc::new(move || flow.published.get()),
            delivered: Arc::new(move || counters.iter().map(|c| c.popped.get()).sum()),
        }
    }

    /// Cheap count test first, then the exact per-partition one.
    fn caught_up(&self) -> bool {
        self.popped_now() >= self.flow.published.get() * self.groups.len() as u64
            && self.ledger.caught_up()
    }

    fn produced_meta(&self, drain: DrainEnd, delivery: &str) -> String {
        meta::PartitionMeta {
            system: self.s.system.name(),
            partitions: self.shape.space,
            rate: self.s.rate,
            drain: drain.meta_name(),
            delivery,
            streams: self
                .groups
                .iter()
                .zip(&self.stream_counters)
                .map(|(g, c)| {
                    (
                        format!("{}_{g}", self.topic),
                        c.ack_errors.get(),
                        c.reconnects.get(),
                    )
                })
                .collect(),
            acked: &self.ledger.acked,
            outcomes: &self.outcomes,
            loss_allowed: crate::cell::faults::loss_allowed(&self.s),
        }
        .render()
    }

    fn load(&self) -> Load {
        Load {
            shed_pacer: self.flow.shed_pacer.get(),
            unit: "messages",
            schedule_lag: self.push_metrics.schedule_lag.summary(),
            published_rated: self.flow.published_rated.get(),
            deliveries_rated: self.edges.lock().popped_rated_at_end,
            partitions: self.st.lanes(),
            failed: self.flow.failed.get(),
            shed_backpressure: self.flow.shed_backpressure.get(),
            failed_indeterminate: self.flow.failed_indeterminate.get(),
            publish_errors: adapters::ErrorClass::ALL
                .iter()
                .map(|c| (*c, self.flow.publish_errors[c.index()].get()))
                .collect(),
            e2e_max_ms: self.sink_metrics.e2e.summary().max_ms,
        }
    }

    /// Messages consumed per group while the rated window ran ÷ offered.
    fn served_in_window(&self, end: &Ending<'_>) -> f64 {
        let e = *self.edges.lock();
        let offered = self.flow.offered_rated.get() as f64 / end.rated_sec;
        let popped = e.popped_at_end.saturating_sub(e.popped_at_start) as f64
            / self.groups.len().max(1) as f64
            / end.wall_rated_sec;
        if offered > 0.0 {
            popped / offered
        } else {
            0.0
        }
    }

    fn figures(&self, end: &Ending<'_>) -> anyhow::Result<Figures<StreamBody>> {
        let (s, st, shape) = (&self.s, &self.st, &self.shape);
        let e = *self.edges.lock();
        let groups_n = self.groups.len() as u64;
        let rated_sec = end.rated_sec;
        let wall_rated = end.wall_rated_sec;
        let snap = self.flow.snapshot();
        let identity_holds = snap.identity_holds();
        let published_rated = snap.published_rated;
        let popped_rated = self.popped_rated();
        let e2e = self.sink_metrics.e2e.summary();
        let offered_per_sec = snap.offered_rated as f64 / rated_sec;
        // What the consumers took while the rated window ran (any message), per group:
        // the consumption rate the seed's "behind" rule compares with the offered rate.
        let popped_per_sec =
            e.popped_at_end.saturating_sub(e.popped_at_start) as f64 / groups_n as f64 / wall_rated;
        let served_fraction = if offered_per_sec > 0.0 {
            popped_per_sec / offered_per_sec
        } else {
            0.0
        };
        let mut warnings = Vec::new();
        if snap.shed_backpressure > 0 {
            warnings.push(format!(
                "{} messages shed: the push queues ({} requests over {} workers) were full, the system did not absorb the offered rate",
                snap.shed_backpressure, st.push.in_flight, self.workers
            ));
        }
        let counters = end.stream_counters;
        let ack_calls: u64 = counters.iter().map(|c| c.ack_calls.get()).sum();
        let ack_micros: u64 = counters.iter().map(|c| c.ack_micros.get()).sum();
        let push_by_class: BTreeMap<String, u64> = ErrorClass::ALL
            .iter()
            .zip(&self.push_counters.errors)
            .map(|(c, n)| (c.name().to_string(), n.get()))
            .collect();
        let body = StreamBody {
            workload: StreamShape {
                kind: self.kind().into(),
                rate_msgs_per_sec: s.rate,
                ladder: self.ladder.clone(),
                space: shape.space,
                window: shape.window,
                rotate_every_sec: shape.rotate_every_us as f64 / 1e6,
                rotate_step: shape.rotate_step,
                window_partitions_per_sec: self.picker.partitions_per_sec(),
                lanes: st.lanes(),
                push_batch: st.push.batch,
                partitions_per_request: st.push.partitions_per_request,
                push_workers: self.workers,
                push_in_flight: st.push.in_flight,
                push_requests_per_sec: s.rate as f64 / st.push.batch as f64,
                payload_b: st.payload.bytes,
                compressible: st.payload.compressible,
                groups: st.consume.groups,
                consumers_per_group: st.consume.consumers,
                pop_batch: st.consume.pop_batch,
                pop_partitions: st.consume.pop_partitions,
                ack_mode: match st.consume.ack {
                    AckMode::Async => "async".into(),
                    AckMode::Sync => "sync".into(),
                },
                ack_in_flight: st.consume.ack_in_flight,
                consume_lanes: st.consume_lanes(),
                base_seq: 1,
                dedup_window_sec: s.dedup_window_sec,
            },
            provisioned: end.env.description.clone(),
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
                acked_per_sec: e.acked_at_end.saturating_sub(e.acked_at_start) as f64
                    / groups_n as f64
                    / wall_rated,
                served_fraction,
                behind: cell_record::held::behind(served_fraction, e2e.p99_ms),
            },
            latency_ms: StreamLatency {
                e2e,
                e2e_warmup: self.sink_metrics.e2e_warmup.summary(),
                push: self.push_metrics.push.summary(),
                publish_rtt: self.push_metrics.publish_rtt.summary(),
                schedule_lag: self.push_metrics.schedule_lag.summary(),
                ack_round_trip_mean_ms: (ack_calls > 0)
                    .then(|| ack_micros as f64 / ack_calls as f64 / 1000.0),
            },
            partitions: PartitionFigures {
                space: shape.space,
                created: self.ledger.created.count(),
                created_per_sec_rated: (e.created_at_end - e.created_at_start) as f64 / rated_sec,
                completed: if self.st.partitions.complete {
                    self.shape.space
                } else {
                    0
                },
                seen_by_group: end
                    .verdict
                    .streams
                    .iter()
                    .map(|v| v.properties_seen)
                    .collect(),
            },
            groups: self
                .groups
                .iter()
                .zip(&self.sinks)
                .zip(counters)
                .map(|((g, sk), sc)| GroupFigures {
                    group: g.clone(),
                    popped: sk.counters.popped.get(),
                    popped_rated: sk.counters.popped_rated.get(),
                    batches: sk.counters.batches.get(),
                    acked: sc.acked.get(),
                    ack_errors: sc.ack_errors.get(),
                    receive_errors: sc.receive_errors.get(),
                    refused: sc.refused.get(),
                    redelivered: sc.redelivered.get(),
                    reconnects: sc.reconnects.get(),
                    decode_errors: sk.counters.decode_errors.get(),
                })
                .collect(),
            errors: ErrorFigures {
                push: self.push_counters.error_total(),
                push_by_class,
                pop: counters.iter().map(|c| c.receive_errors.get()).sum(),
                ack: counters.iter().map(|c| c.ack_errors.get()).sum(),
            },
        };
        Ok(Figures {
            body,
            identity_holds,
            warnings,
        })
    }

    fn summary(&self, r: &CellResult<StreamBody>) -> String {
        let mut o = String::new();
        let b = &r.body;
        let l = &b.latency_ms;
        for (name, f) in &b.flows {
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
                if b.identity_holds { "holds" } else { "BROKEN" }
            );
        }
        let t = &b.throughput;
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
            b.partitions.created,
            b.partitions.space,
            b.partitions.created_per_sec_rated,
            b.errors.push,
            b.errors.pop,
            b.errors.ack
        );
        let _ = writeln!(
            o,
            "loader:   {:.2} cores  peak RSS {:.1} MB",
            r.tail.loader.cpu_cores_mean,
            r.tail.loader.peak_rss_bytes as f64 / 1e6
        );
        o
    }
}
