//! A stage: the application every system serves, identical for all of them.
//!
//! For each key-batch: (1) concurrent simulated work, each message on one of the
//! stage's lanes (its lane budget) for its drawn time, then a barrier: the cell's
//! [`WorkTimer`] times the whole batch and wakes the handler once; (2) the ordered
//! commit: the derived publish for intermediate stages, one log line per message,
//! end-to-end latency for terminal stages; then the adapter acks. A batch aborted by shutdown, or whose
//! derived publish failed, is refused and comes back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use adapters::{BatchHandler, Broker, Counter, Disposition, KeyBatch};
use async_trait::async_trait;
use bytes::Bytes;
use smallvec::SmallVec;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::measure::clock::Clock;
use crate::measure::window::RatedWindow;
use crate::pacing::work_timer::WorkTimer;
use crate::record::stream_log::StreamLog;
use crate::workload::pipeline::metrics::Metrics;
use crate::workload::pipeline::selector::Selector;
use crate::workload::pipeline::seqs::SeqTable;
use crate::workload::pipeline::topology::StreamDef;
use crate::workload::stamp::Stamp;

/// Per-stage counters.
#[derive(Debug, Default)]
pub struct StageCounters {
    /// Messages handed to the stage (redeliveries included).
    pub delivered: Counter,
    /// Messages fully processed (logged) — acked or not.
    pub processed: Counter,
    /// Of `processed`, those whose stamp was scheduled inside the rated window.
    pub processed_rated: Counter,
    /// Derived messages re-published (intermediate stages).
    pub derived: Counter,
    /// Messages of batches whose derived publish failed (batch refused).
    pub push_errors: Counter,
    /// Batches aborted because the run was stopping.
    pub aborted: Counter,
    /// Payloads that were not stamps (acked, counted, never logged).
    pub decode_errors: Counter,
    /// Payloads that needed the slow JSON path.
    pub slow_decodes: Counter,
    /// Messages the system flagged as redelivered.
    pub redelivered_flagged: Counter,
}

#[derive(Debug)]
pub struct Stage {
    pub index: usize,
    pub def: StreamDef,
    broker: Arc<dyn Broker>,
    /// The cell's work timer, and this stage's lanes in it.
    timer: Arc<WorkTimer>,
    lanes: usize,
    log: StreamLog,
    metrics: Arc<Metrics>,
    pub counters: Arc<StageCounters>,
    window: Arc<RatedWindow>,
    clock: Clock,
    cohorts: Option<Selector>,
    stop: CancellationToken,
    rng: AtomicU64,
    /// Highest seq processed per property: the drain's exact "caught up" test
    /// (counts alone are fooled by duplicates).
    pub max_seen: Arc<SeqTable>,
    /// Several loaders: which loader this is, and which loaders share its clock.
    fleet: Option<StageFleet>,
}

/// A stage's part in a cell of several loaders.
#[derive(Debug, Clone)]
pub struct StageFleet {
    /// This loader's index: its log lines carry it, its derived publishes keep the
    /// event's producer.
    pub index: u64,
    /// Per loader, whether it reads this loader's clock (set at the start barrier).
    pub same_clock: Arc<std::sync::OnceLock<Vec<bool>>>,
}

/// Everything a stage needs besides its definition.
#[derive(Debug, Clone)]
pub struct StageEnv {
    pub broker: Arc<dyn Broker>,
    pub metrics: Arc<Metrics>,
    pub window: Arc<RatedWindow>,
    pub clock: Clock,
    /// Set when the run is skewed: tells hot from cold properties.
    pub cohorts: Option<Selector>,
    /// Fires when stages must stop (in-flight work aborts and is refused).
    pub stop: CancellationToken,
    pub seed: u64,
    /// Number of properties (sizes the per-property progress table).
    pub properties: u64,
    /// Times every stage's simulated work.
    pub timer: Arc<WorkTimer>,
    /// Several loaders (`None`: the ordinary cell).
    pub fleet: Option<StageFleet>,
}

impl Stage {
    /// Stage `index`, its work on the timer's lane group `lanes`.
    pub fn new(index: usize, def: StreamDef, lanes: usize, log: StreamLog, env: &StageEnv) -> Self {
        Stage {
            index,
            def,
            broker: env.broker.clone(),
            timer: env.timer.clone(),
            lanes,
            log,
            metrics: env.metrics.clone(),
            counters: Arc::new(StageCounters::default()),
            window: env.window.clone(),
            clock: env.clock,
            cohorts: env.cohorts.clone(),
            stop: env.stop.clone(),
            rng: AtomicU64::new(env.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            max_seen: Arc::new(SeqTable::new(env.properties)),
            fleet: env.fleet.clone(),
        }
    }

    /// One work duration, uniform integer ms in [min, max].
    fn draw_work(&self) -> Duration {
        let span = self.def.work_max_ms - self.def.work_min_ms;
        let ms = if span == 0 {
            self.def.work_min_ms
        } else {
            // SplitMix64 step on a shared counter: cheap and deterministic per run.
            let mut z = self
                .rng
                .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
                .wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            self.def.work_min_ms + z % (span + 1)
        };
        Duration::from_millis(ms)
    }

    /// The batch's simulated work from `at` (its arrival): one draw per message, all
    /// on the stage's lanes, done when the last is. False when the run stopped first.
    async fn work(&self, at: Instant, n: usize) -> bool {
        if self.stop.is_cancelled() {
            return false;
        }
        let mut works = [Duration::ZERO; 16];
        let mut more = Vec::new();
        let works: &[Duration] = if n <= works.len() {
            for w in &mut works[..n] {
                *w = self.draw_work();
            }
            &works[..n]
        } else {
            more.extend((0..n).map(|_| self.draw_work()));
            &more
        };
        // The cell's stop ends it unfinished: the timer watches the stop once for every
        // batch (`WorkTimer::stop_on`), where a cancellation future here cost each
        // batch a registration with the token.
        self.timer.work_from(self.lanes, at, works).await
    }
}

#[async_trait]
impl BatchHandler for Stage {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        let n = batch.messages.len() as u64;
        if n == 0 {
            return Disposition::Ack;
        }
        self.counters.delivered.add(n);
        // Three clock reads a batch (two on a terminal stage), where it took seven:
        // its arrival, which is also when its work starts; the work's end; the end of
        // the derived publish. Reads in one poll are one instant in virtual time, so
        // the snapshot tests' figures do not move.
        let t0 = Instant::now();
        let arrived = self.clock.us_at(t0);
        // A key-batch is one or two messages on the seed's shapes: on the stack.
        let mut stamps: SmallVec<[Stamp; 2]> = SmallVec::with_capacity(batch.messages.len());
        let mut redelivered = 0;
        for m in &batch.messages {
            match Stamp::decode(&m.payload) {
                Ok((s, slow)) => {
                    if slow {
                        self.counters.slow_decodes.inc();
                    }
                    stamps.push(s);
                }
                Err(_) => {
                    // Not ours: count it and log nothing for it. Acking would hide a
                    // foreign message; refusing would loop forever. We ack and count.
                    self.counters.decode_errors.inc();
                }
            }
            if m.redelivered {
                redelivered += 1;
            }
        }
        if redelivered > 0 {
            self.counters.redelivered_flagged.add(redelivered);
        }
        let age = &self.metrics.age[self.index];
        for s in &stamps {
            if self.window.is_rated(s.ts) {
                age.record(arrived - s.ts);
            }
        }

        // Phase 1: concurrent work, bounded by the stage's lane budget, then a barrier.
        if !self.work(t0, stamps.len()).await {
            self.counters.aborted.inc();
            return Disposition::Refuse;
        }
        let mut t = Instant::now();
        self.metrics.barrier[self.index].record((t - t0).as_micros() as i64);

        // Phase 2: the ordered commit.
        if let Some(out) = &self.def.out_topic {
            let payloads: SmallVec<[Bytes; 2]> = stamps
                .iter()
                .map(|s| {
                    Bytes::from(
                        Stamp {
                            prop: s.prop,
                            flow: s.flow,
                            seq: s.seq,
                            ts: s.ts,
                            loader: s.loader,
                        }
                        .encode(None),
                    )
                })
                .collect();
            let t1 = t;
            if let Err(_e) = self.broker.publish(out, &batch.key, &payloads).await {
                self.counters.push_errors.add(n);
                return Disposition::Refuse;
            }
            t = Instant::now();
            self.metrics.push[self.index].record((t - t1).as_micros() as i64);
            self.counters.derived.add(payloads.len() as u64);
        }
        let now = self.clock.us_at(t);
        if self
            .log
            .append_at(stamps.iter().map(|s| (s.prop, s.seq)), now)
            .await
            .is_err()
        {
            // The log is closed: the run is over; do not ack what was not recorded.
            self.counters.aborted.inc();
            return Disposition::Refuse;
        }
        for st in &stamps {
            self.max_seen.ack(st.prop, st.seq);
        }
        let mut rated = 0;
        if self.def.is_terminal() {
            for s in &stamps {
                // A foreign message may carry any ts: saturate, never overflow.
                let lat = now.saturating_sub(s.ts);
                if self.window.is_rated(s.ts) {
                    rated += 1;
                    let f = self.def.flow.index();
                    self.metrics.e2e[f].record(lat);
                    if let Some(fl) = &self.fleet {
                        // Same host as the event's producer: one clock. Unknown
                        // (no producer id, no host list): counted as another host.
                        let same = fl.same_clock.get().is_some_and(|v| {
                            v.get(s.loader.unwrap_or(u32::MAX) as usize) == Some(&true)
                        });
                        self.metrics.e2e_hosts[f][usize::from(!same)].record(lat);
                    }
                    if let Some(c) = &self.cohorts {
                        self.metrics.e2e_cohort[f][usize::from(c.is_hot(s.prop))].record(lat);
                    }
                } else if s.ts < self.window.start_us() {
                    self.metrics.e2e_warmup.record(lat);
                }
            }
        } else {
            rated = stamps.iter().filter(|s| self.window.is_rated(s.ts)).count() as u64;
        }
        self.counters.processed.add(stamps.len() as u64);
        self.counters.processed_rated.add(rated);
        Disposition::Ack
    }
}
