//! The channel-manager pipeline (SPEC.md §1–§6): two flows, three hops, twelve
//! consumer streams, per-key ordering, simulated work in every stage.
//!
//! One concept per file: [`topology`] (the streams and flows), [`plan`] (rates, lane
//! budgets, invariants), [`selector`] (which property an event belongs to),
//! [`producer`] (a flow's emit closure and publisher shards), [`stage`] (the
//! application every system serves), [`seqs`] (highest seq per property),
//! [`metrics`] (its latencies), [`meta`] (`produced.meta`), [`progress`] (its live
//! columns), [`figures`] (its part of `result.json`) and [`summary`].

pub mod figures;
pub mod meta;
pub mod metrics;
pub mod plan;
pub mod producer;
pub mod progress;
pub mod selector;
pub mod seqs;
pub mod stage;
pub mod summary;
pub mod topology;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use adapters::{BatchHandler, BuildContext, StreamCounters, Topology};
use anyhow::Context;
use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cell::drain::DrainEnd;
use crate::cell::workload::{CellEnv, ConsumerSpec, Ending, Figures, Load, Traffic, Workload};
use crate::console::progress::ProgressSource;
use crate::measure::counters::FlowCounters;
use crate::measure::outcomes::Outcomes;
use crate::measure::phase::Phase;
use crate::pacing::pacer::Paced;
use crate::pacing::work_timer::{Drive, Lanes, WorkTimer};
use crate::record::result::CellResult;
use crate::record::stream_log::StreamLogs;
use crate::scenario::{ClockDrive, Scenario};
use crate::workload::stamp::rates_padding;

use figures::{Latency, PipelineBody, Shape, Skew, StreamFigures, Throughput};
use metrics::Metrics;
use plan::Plan;
use producer::{FlowSpec, ProducerEnv};
use selector::Selector;
use seqs::SeqTable;
use stage::{Stage, StageEnv};
use topology::{Flow, StreamDef};

/// Ideal end-to-end work time at the median, per flow (A: 15 + 30 ms, B: 10 + 30 ms).
const IDEAL_WORK_MS: [(Flow, f64); 2] = [(Flow::A, 45.0), (Flow::B, 40.0)];

/// A pipeline cell.
#[derive(Debug)]
pub struct Pipeline {
    s: Scenario,
    plan: Plan,
    defs: Vec<StreamDef>,
    metrics: Arc<Metrics>,
    flows: [Arc<FlowCounters>; 2],
    seqs: [Arc<SeqTable>; 2],
    /// Given-up events per flow (`# failed` / `# indeterminate` in produced.meta).
    outcomes: [Arc<Outcomes>; 2],
    skewed: Selector,
    stages: Vec<Arc<Stage>>,
    stream_counters: Vec<Arc<StreamCounters>>,
    /// Times the stages' work and, in real time, steps the pacers on the same thread.
    timer: Option<Arc<WorkTimer>>,
    /// The keys this loader owns (all of them in the ordinary cell) and its id when
    /// it is one of several.
    share: crate::fleet::Share,
    loader: Option<u32>,
}

impl Pipeline {
    pub fn new(s: &Scenario) -> Pipeline {
        let plan = Plan::new(s);
        let defs: Vec<StreamDef> = plan.stages.iter().map(|p| p.stream.clone()).collect();
        Pipeline {
            metrics: Arc::new(Metrics::new(&defs)),
            flows: [
                Arc::new(FlowCounters::default()),
                Arc::new(FlowCounters::default()),
            ],
            seqs: [
                Arc::new(SeqTable::new(s.properties)),
                Arc::new(SeqTable::new(s.properties)),
            ],
            outcomes: Default::default(),
            skewed: Selector::new(s.properties, s.hot.props, s.hot.factor),
            stages: Vec::new(),
            stream_counters: Vec::new(),
            timer: None,
            share: crate::fleet::Share::WHOLE,
            loader: None,
            s: s.clone(),
            plan,
            defs,
        }
    }

    /// This pipeline as loader `share.index` of `share.count`: it produces only its
    /// keys, at their part of the rate, and stamps them with its index.
    pub fn with_share(mut self, share: crate::fleet::Share) -> Pipeline {
        self.share = share;
        self.loader = (!share.is_whole()).then_some(share.index as u32);
        self
    }

    /// Deliveries per second this loader's share of the cell demands: the cell's
    /// (6R) in the ordinary cell, its part of it as one loader of several (whose
    /// served fractions are of its share; the merge's are of the cell's).
    fn demand(&self) -> f64 {
        let s = &self.s;
        self.plan.invariants.deliveries_per_sec as f64
            * self
                .share
                .rate_fraction(s.properties, s.hot.props, s.hot.factor)
    }

    fn processed_total(&self) -> u64 {
        self.stages
            .iter()
            .map(|st| st.counters.processed.get())
            .sum()
    }

    fn flow_specs(&self) -> [FlowSpec; 2] {
        let s = &self.s;
        let padding = Arc::new(rates_padding(s.payload_b as usize));
        let fraction = self
            .share
            .rate_fraction(s.properties, s.hot.props, s.hot.factor);
        let spec = |flow: Flow, padding: Option<Arc<Vec<u8>>>| FlowSpec {
            flow,
            topic: self.defs[flow.index()].topic.clone(),
            rate: self.plan.rate(flow) as f64 * fraction,
            ramp: s.ramp.secs_f64(),
            props: s.properties,
            hot_props: s.hot.props,
            hot_factor: s.hot.factor,
            shards: self.plan.shards,
            shard_queue: s.shard_queue as usize,
            padding,
            first_seq: 1,
            share: self.share,
            loader: self.loader,
        };
        // Flow B's ingress carries the `rates` padding; flow A's is the stamp alone.
        [spec(Flow::A, None), spec(Flow::B, Some(padding))]
    }

    fn producer_env(&self, env: &CellEnv, flow: Flow) -> ProducerEnv {
        ProducerEnv {
            broker: env.broker.clone(),
            counters: self.flows[flow.index()].clone(),
            seqs: self.seqs[flow.index()].clone(),
            metrics: self.metrics.clone(),
            window: env.window.clone(),
            clock: env.clock,
            abandon: env.abandon.clone(),
            deadline: self.s.publish_deadline.0,
            outcomes: self.outcomes[flow.index()].clone(),
        }
    }

    fn skew(&self) -> Option<Skew> {
        let s = &self.s;
        let m = &self.metrics;
        self.skewed.is_skewed().then(|| {
            let flow_rate = s.rate as f64 / 2.0;
            let ceiling = s.batch as f64 * 1000.0 / 30.0;
            let c = [
                [m.e2e_cohort[0][0].summary(), m.e2e_cohort[0][1].summary()],
                [m.e2e_cohort[1][0].summary(), m.e2e_cohort[1][1].summary()],
            ];
            let cold99 = c[0][0].p99_ms.max(c[1][0].p99_ms);
            let hot99 = c[0][1].p99_ms.max(c[1][1].p99_ms);
            let [[a_cold, a_hot], [b_cold, b_hot]] = c;
            Skew {
                hot_props: s.hot.props,
                hot_factor: s.hot.factor,
                hot_share_pct: self.skewed.hot_share_pct(),
                hot_lane_offered_per_sec: self.skewed.hot_rate(flow_rate),
                cold_lane_offered_per_sec: self.skewed.cold_rate(flow_rate),
                lane_ceiling_per_sec: ceiling,
                hot_saturated: self.skewed.hot_rate(flow_rate) > ceiling,
                e2e_a_cold: a_cold,
                e2e_a_hot: a_hot,
                e2e_b_cold: b_cold,
                e2e_b_hot: b_hot,
                hot_over_cold_p99: if cold99 > 0.0 { hot99 / cold99 } else { 0.0 },
            }
        })
    }
}

#[async_trait]
impl Workload for Pipeline {
    type Body = PipelineBody;

    fn kind(&self) -> &'static str {
        "pipeline"
    }

    fn banner(&self) -> Vec<String> {
        let s = &self.s;
        let i = &self.plan.invariants;
        vec![
            format!(
                "=== crossbench  system={}  R={} ev/s  P={}  duration={}  warmup={}  ramp={} ===",
                s.system, s.rate, s.properties, s.duration, s.warmup, s.ramp
            ),
            format!(
                "invariants: {} deliveries/s, {} ordered lanes, publishes/s native={} copied={}",
                i.deliveries_per_sec,
                i.ordered_lanes,
                i.publishes_per_sec_native,
                i.publishes_per_sec_copied
            ),
        ]
    }

    fn shape(&self) -> String {
        format!("R={}  P={}", self.s.rate, self.s.properties)
    }

    fn build_context(&self) -> BuildContext {
        crate::workload::build_context(&self.s)
    }

    fn topology(&self) -> Topology {
        let s = &self.s;
        topology::topology(
            &self.defs,
            s.properties,
            self.plan.lanes,
            s.durability,
            s.dedup_window_sec,
            !s.no_reset,
        )
    }

    fn initial_phase(&self) -> Phase {
        Phase::Hydrate
    }

    fn consumers(&self) -> Vec<ConsumerSpec> {
        self.plan
            .stages
            .iter()
            .map(|sp| ConsumerSpec {
                topic: sp.stream.topic.clone(),
                group: sp.stream.group.clone(),
                batch: self.s.batch as usize,
                lanes: sp.lane_budget as usize,
            })
            .collect()
    }

    fn attach(
        &mut self,
        env: &CellEnv,
        logs: &StreamLogs,
        counters: &[Arc<StreamCounters>],
    ) -> anyhow::Result<Vec<Arc<dyn BatchHandler>>> {
        // One timer for every stage's simulated work, each stage with its own lanes.
        let mut lanes = Lanes::default();
        let groups: Vec<usize> = self
            .plan
            .stages
            .iter()
            .map(|sp| lanes.add_group(sp.lane_budget as usize))
            .collect();
        let drive = match self.s.clock {
            ClockDrive::Thread => Drive::Thread,
            ClockDrive::Runtime => Drive::Runtime,
        };
        let timer =
            WorkTimer::start(lanes, env.timing, drive).context("starting the work timer")?;
        // The stages' stop ends the batches at work (they are refused and come back).
        timer.stop_on(env.stop.clone());
        self.timer = Some(timer.clone());
        let stage_env = StageEnv {
            broker: env.broker.clone(),
            metrics: self.metrics.clone(),
            window: env.window.clone(),
            clock: env.clock,
            cohorts: self.skewed.is_skewed().then_some(self.skewed.clone()),
            stop: env.stop.clone(),
            seed: self.s.seed,
            properties: self.s.properties,
            timer,
            fleet: env
                .fleet
                .as_ref()
                .filter(|_| self.loader.is_some())
                .map(|f| stage::StageFleet {
                    index: f.share.index,
                    same_clock: f.same_clock.clone(),
                }),
        };
        self.stages = self
            .plan
            .stages
            .iter()
            .enumerate()
            .map(|(i, sp)| {
                Arc::new(Stage::new(
                    i,
                    sp.stream.clone(),
                    groups[i],
                    logs.log(i),
                    &stage_env,
                ))
            })
            .collect();
        self.stream_counters = counters.to_vec();
        Ok(self
            .stages
            .iter()
            .map(|st| st.clone() as Arc<dyn BatchHandler>)
            .collect())
    }

    fn progress(&self) -> Box<dyn ProgressSource> {
        Box::new(progress::PipelineProgress::new(
            self.flows.clone(),
            self.stages.iter().map(|st| st.counters.clone()).collect(),
            self.stream_counters.clone(),
            self.defs.clone(),
            self.metrics.clone(),
            self.plan.streams_per_flow(),
        ))
    }

    /// Hydration: seq 0 of every property through the normal publish path, then wait
    /// until it has flowed through every stream.
    async fn prepare(
        &self,
        env: &CellEnv,
        interrupt: &CancellationToken,
        say: &(dyn Fn(String) + Sync),
    ) -> anyhow::Result<f64> {
        say(format!(
            "started {} stages, lane budget {} (headroom {}x)",
            self.stages.len(),
            self.plan.lane_budget_total(),
            self.s.lane_headroom
        ));
        let started = Instant::now();
        if !self.s.hydrate {
            return Ok(started.elapsed().as_secs_f64());
        }
        for (flow, spec) in Flow::ALL.into_iter().zip(self.flow_specs()) {
            let penv = self.producer_env(env, flow);
            let hydrate = producer::hydrate(&spec, &penv, 96);
            tokio::time::timeout(Duration::from_secs(600), hydrate)
                .await
                .map_err(|_| anyhow::anyhow!("no answer within 600 s"))
                .and_then(|r| r.map_err(anyhow::Error::new))
                .with_context(|| format!("hydrating flow {}", flow.name()))?;
        }
        // Every stream has processed seq 0 of every key: this loader's keys, or in a
        // shared cell of several loaders every loader's (the rendezvous's count: a
        // loader's consumers take whichever keys the system hands them).
        let global = env.fleet.as_ref().filter(|f| f.shared);
        let (want, done) = match global {
            Some(_) => (self.defs.len() as u64 * self.s.properties, "the cell's"),
            None => (
                self.defs.len() as u64 * self.share.owned(self.s.properties),
                "this loader's",
            ),
        };
        let processed = || match global {
            Some(f) => f.global_processed().unwrap_or(0),
            None => self.processed_total(),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while processed() < want && Instant::now() < deadline && !interrupt.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        say(format!(
            "hydration: {} properties x 2 flows in {:.1}s, drained={} ({}/{}, {done})",
            self.share.owned(self.s.properties),
            started.elapsed().as_secs_f64(),
            processed() >= want,
            processed(),
            want
        ));
        Ok(started.elapsed().as_secs_f64())
    }

    fn start_traffic(&self, env: &CellEnv, traffic: Traffic) -> Vec<Paced> {
        Flow::ALL
            .into_iter()
            .zip(self.flow_specs())
            .map(|(flow, spec)| {
                let env_f = self.producer_env(env, flow);
                producer::start(spec, env_f, traffic, env.timing, self.timer.as_deref())
            })
            .collect()
    }

    fn deliveries(&self) -> u64 {
        self.processed_total()
    }

    /// Counts first (cheap), then the exact test: every stream has processed the
    /// highest acknowledged seq of every property of its flow.
    fn caught_up(&self) -> bool {
        let expected = |flow: Flow| {
            let f = &self.flows[flow.index()];
            f.published.get() + f.hydration_published.get()
        };
        self.stages
            .iter()
            .all(|st| st.counters.processed.get() >= expected(st.def.flow))
            && self.stages.iter().all(|st| {
                let table = &self.seqs[st.def.flow.index()];
                (0..self.s.properties).all(|p| st.max_seen.get(p) >= table.get(p))
            })
    }

    fn produced_meta(&self, drain: DrainEnd, delivery: &str) -> String {
        meta::Meta {
            system: self.s.system.name(),
            properties: self.s.properties,
            rate: self.s.rate,
            base: if self.s.hydrate { 0 } else { 1 },
            drain: drain.meta_name(),
            delivery,
            invariants: &self.plan.invariants,
            streams: self
                .defs
                .iter()
                .zip(&self.stream_counters)
                .map(|(d, c)| meta::StreamHeader {
                    name: d.name(),
                    flow: d.flow.letter() as char,
                    ack_errors: c.ack_errors.get(),
                    reconnects: c.reconnects.get(),
                })
                .collect(),
            flows: Flow::ALL
                .iter()
                .map(|f| {
                    (
                        f.letter() as char,
                        &*self.seqs[f.index()],
                        &*self.outcomes[f.index()],
                    )
                })
                .collect(),
            loss_allowed: crate::cell::faults::loss_allowed(&self.s),
        }
        .render()
    }

    fn frontier_source(&self) -> Option<Arc<dyn crate::fleet::member::FrontierSource>> {
        Some(Arc::new(seqs::PipelineFrontier {
            keys: self.s.properties,
            produced: self.seqs.clone(),
            seen: self
                .stages
                .iter()
                .map(|st| (st.def.flow.index(), st.max_seen.clone()))
                .collect(),
        }))
    }

    fn histograms(&self) -> Vec<(String, hdrhistogram::Histogram<u64>)> {
        let m = &self.metrics;
        let mut v = vec![
            ("latency_ms.e2e_a".to_string(), m.e2e[0].total()),
            ("latency_ms.e2e_b".to_string(), m.e2e[1].total()),
            ("latency_ms.e2e_warmup".to_string(), m.e2e_warmup.total()),
            (
                "latency_ms.schedule_lag".to_string(),
                m.schedule_lag.total(),
            ),
            ("latency_ms.ingress_publish".to_string(), m.publish.total()),
        ];
        if self.loader.is_some() {
            for (f, flow) in ["a", "b"].iter().enumerate() {
                v.push((
                    format!("latency_ms.e2e_{flow}_same_host"),
                    m.e2e_hosts[f][0].total(),
                ));
                v.push((
                    format!("latency_ms.e2e_{flow}_cross_host"),
                    m.e2e_hosts[f][1].total(),
                ));
            }
        }
        if self.skewed.is_skewed() {
            for (f, flow) in ["a", "b"].iter().enumerate() {
                v.push((format!("skew.e2e_{flow}_cold"), m.e2e_cohort[f][0].total()));
                v.push((format!("skew.e2e_{flow}_hot"), m.e2e_cohort[f][1].total()));
            }
        }
        for st in &self.stages {
            let i = st.index;
            v.push((format!("streams.{i}.entry_age_ms"), m.age[i].total()));
            v.push((format!("streams.{i}.barrier_ms"), m.barrier[i].total()));
            if !st.def.is_terminal() {
                v.push((format!("streams.{i}.push_ms"), m.push[i].total()));
            }
        }
        v
    }

    fn load(&self) -> Load {
        Load {
            shed_pacer: self.flows.iter().map(|f| f.shed_pacer.get()).sum(),
            unit: "events",
            schedule_lag: self.metrics.schedule_lag.summary(),
            published_rated: self.flows.iter().map(|f| f.published_rated.get()).sum(),
            deliveries_rated: self
                .stages
                .iter()
                .map(|st| st.counters.processed_rated.get())
                .sum(),
            partitions: self.plan.lanes * self.topology().topics.len() as u64,
            failed: self.flows.iter().map(|f| f.failed.get()).sum(),
            shed_backpressure: self.flows.iter().map(|f| f.shed_backpressure.get()).sum(),
            failed_indeterminate: self
                .flows
                .iter()
                .map(|f| f.failed_indeterminate.get())
                .sum(),
            publish_errors: adapters::ErrorClass::ALL
                .iter()
                .map(|c| {
                    let n = self
                        .flows
                        .iter()
                        .map(|f| f.publish_errors[c.index()].get())
                        .sum();
                    (*c, n)
                })
                .collect(),
            e2e_max_ms: self
                .metrics
                .e2e
                .iter()
                .map(|m| m.summary().max_ms)
                .fold(0.0, f64::max),
        }
    }

    fn tally(&self) -> crate::cell::faults::timeline::Tally {
        let flows = self.flows.clone();
        let flows2 = self.flows.clone();
        let stages = self.stages.clone();
        crate::cell::faults::timeline::Tally {
            errors: std::sync::Arc::new(move || {
                flows2
                    .iter()
                    .flat_map(|f| f.publish_errors.iter().map(|c| c.get()))
                    .sum()
            }),
            published: std::sync::Arc::new(move || flows.iter().map(|f| f.published.get()).sum()),
            delivered: std::sync::Arc::new(move || {
                stages.iter().map(|st| st.counters.processed.get()).sum()
            }),
        }
    }

    fn served_in_window(&self, end: &Ending<'_>) -> f64 {
        end.deliveries_in_window as f64 / end.wall_rated_sec / self.demand()
    }

    fn figures(&self, end: &Ending<'_>) -> anyhow::Result<Figures<PipelineBody>> {
        let s = &self.s;
        let plan = &self.plan;
        let snaps: BTreeMap<String, _> = Flow::ALL
            .iter()
            .map(|f| (f.name().to_string(), self.flows[f.index()].snapshot()))
            .collect();
        let identity_holds = snaps.values().all(|f| f.identity_holds());
        let rated_sec = end.rated_sec;
        let offered_rated: u64 = snaps.values().map(|f| f.offered_rated).sum();
        let published_rated: u64 = snaps.values().map(|f| f.published_rated).sum();
        let deliveries_rated = self.load().deliveries_rated;
        let all_delivered: u64 = self
            .stages
            .iter()
            .map(|st| st.counters.delivered.get())
            .sum();
        let mut warnings = Vec::new();
        let shed_bp: u64 = snaps.values().map(|f| f.shed_backpressure).sum();
        if shed_bp > 0 {
            warnings.push(format!(
                "{shed_bp} events shed: publisher queues were full (the system did not absorb the offered rate through {} shards per flow)",
                plan.shards
            ));
        }
        let m = &self.metrics;
        let streams = self
            .stages
            .iter()
            .zip(end.stream_counters)
            .zip(&plan.stages)
            .map(|((st, sc), sp)| {
                let c = &st.counters;
                StreamFigures {
                    stream: st.def.name(),
                    flow: st.def.flow.name().to_string(),
                    delivered: c.delivered.get(),
                    processed: c.processed.get(),
                    processed_rated: c.processed_rated.get(),
                    derived: c.derived.get(),
                    push_errors: c.push_errors.get(),
                    aborted_batches: c.aborted.get(),
                    decode_errors: c.decode_errors.get(),
                    slow_decodes: c.slow_decodes.get(),
                    acked: sc.acked.get(),
                    ack_errors: sc.ack_errors.get(),
                    refused: sc.refused.get(),
                    redelivered: sc.redelivered.get(),
                    receive_errors: sc.receive_errors.get(),
                    reconnects: sc.reconnects.get(),
                    lane_budget: sp.lane_budget,
                    entry_age_ms: m.age[st.index].summary(),
                    barrier_ms: m.barrier[st.index].summary(),
                    push_ms: (!st.def.is_terminal()).then(|| m.push[st.index].summary()),
                }
            })
            .collect();
        let body = PipelineBody {
            workload: Shape {
                kind: self.kind().into(),
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
                base_seq: if s.hydrate { 0 } else { 1 },
                dedup_window_sec: s.dedup_window_sec,
            },
            invariants: plan.invariants.clone(),
            provisioned: end.env.description.clone(),
            flows: snaps,
            identity_holds,
            throughput: Throughput {
                offered_per_sec: offered_rated as f64 / rated_sec,
                published_per_sec: published_rated as f64 / rated_sec,
                deliveries_per_sec: deliveries_rated as f64 / rated_sec,
                served_fraction: deliveries_rated as f64 / rated_sec / self.demand(),
                reference_deliveries_per_sec: all_delivered as f64 / rated_sec,
                window_deliveries_per_sec: end.deliveries_in_window as f64 / end.wall_rated_sec,
                window_served_fraction: end.deliveries_in_window as f64
                    / end.wall_rated_sec
                    / self.demand(),
            },
            latency_ms: Latency {
                e2e_a: m.e2e[Flow::A.index()].summary(),
                e2e_b: m.e2e[Flow::B.index()].summary(),
                e2e_warmup: m.e2e_warmup.summary(),
                schedule_lag: m.schedule_lag.summary(),
                ingress_publish: m.publish.summary(),
                ideal_work_ms: IDEAL_WORK_MS
                    .iter()
                    .map(|(f, ms)| (f.name().to_string(), *ms))
                    .collect(),
                e2e_a_same_host: self.loader.map(|_| m.e2e_hosts[0][0].summary()),
                e2e_a_cross_host: self.loader.map(|_| m.e2e_hosts[0][1].summary()),
                e2e_b_same_host: self.loader.map(|_| m.e2e_hosts[1][0].summary()),
                e2e_b_cross_host: self.loader.map(|_| m.e2e_hosts[1][1].summary()),
            },
            skew: self.skew(),
            streams,
        };
        Ok(Figures {
            body,
            identity_holds,
            warnings,
        })
    }

    fn summary(&self, result: &CellResult<PipelineBody>) -> String {
        summary::middle(result)
    }
}
