//! The consumer side of one group: every key-batch the adapter pops is decoded,
//! logged (`<partition>,<seq>` for the checker), timed end to end from its
//! scheduled instant, and acknowledged (the adapter sends the ack when the handler
//! says so). There is no simulated work: the stream workload measures the broker.

use std::sync::Arc;

use adapters::{BatchHandler, Counter, Disposition, KeyBatch};
use async_trait::async_trait;

use crate::measure::clock::Clock;
use crate::measure::histograms::Metric;
use crate::measure::window::RatedWindow;
use crate::record::stream_log::StreamLog;
use crate::workload::stamp::Stamp;
use crate::workload::stream::ledger::Ledger;

/// Counters of one group.
#[derive(Debug, Default)]
pub struct SinkCounters {
    /// Messages handed to the group (redeliveries included).
    pub popped: Counter,
    /// Of those, scheduled inside the rated window.
    pub popped_rated: Counter,
    /// Key-batches handed over.
    pub batches: Counter,
    /// Payloads that were not stamps (acked and counted, never logged).
    pub decode_errors: Counter,
    /// Batches refused because the log was already closed (run over).
    pub aborted: Counter,
}

/// End-to-end latencies shared by every group.
#[derive(Debug)]
pub struct SinkMetrics {
    /// Pop − scheduled instant, rated window.
    pub e2e: Metric,
    /// The same for warm-up traffic.
    pub e2e_warmup: Metric,
    /// Every delivery, for the per-second report.
    pub e2e_interval: Metric,
}

impl Default for SinkMetrics {
    fn default() -> Self {
        SinkMetrics {
            e2e: Metric::new("e2e"),
            e2e_warmup: Metric::new("e2e-warmup"),
            e2e_interval: Metric::new("e2e-all"),
        }
    }
}

#[derive(Debug)]
pub struct Sink {
    pub counters: Arc<SinkCounters>,
    log: StreamLog,
    ledger: Arc<Ledger>,
    group: usize,
    metrics: Arc<SinkMetrics>,
    window: Arc<RatedWindow>,
    clock: Clock,
}

impl Sink {
    pub fn new(
        log: StreamLog,
        ledger: Arc<Ledger>,
        group: usize,
        metrics: Arc<SinkMetrics>,
        window: Arc<RatedWindow>,
        clock: Clock,
    ) -> Sink {
        Sink {
            counters: Arc::new(SinkCounters::default()),
            log,
            ledger,
            group,
            metrics,
            window,
            clock,
        }
    }
}

#[async_trait]
impl BatchHandler for Sink {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        if batch.messages.is_empty() {
            return Disposition::Ack;
        }
        let now = self.clock.now_us();
        let mut stamps = Vec::with_capacity(batch.messages.len());
        for m in &batch.messages {
            match Stamp::decode(&m.payload) {
                Ok((s, _)) => stamps.push(s),
                Err(_) => self.counters.decode_errors.inc(),
            }
        }
        if self
            .log
            .append(stamps.iter().map(|s| (s.prop, s.seq)))
            .await
            .is_err()
        {
            self.counters.aborted.inc();
            return Disposition::Refuse;
        }
        let (start, end) = (self.window.start_us(), self.window.end_us());
        let mut rated = Vec::with_capacity(stamps.len());
        let mut warm = Vec::new();
        let mut all = Vec::with_capacity(stamps.len());
        let seen = &self.ledger.seen[self.group];
        for s in &stamps {
            seen.raise(s.prop, s.seq.clamp(0, i64::from(u32::MAX)) as u32);
            // A foreign message may carry any ts: saturate, never overflow.
            let lat = now.saturating_sub(s.ts);
            all.push(lat);
            if s.ts >= start && s.ts < end {
                rated.push(lat);
            } else if s.ts < start {
                warm.push(lat);
            }
        }
        self.metrics.e2e.record_many(&rated);
        self.metrics.e2e_warmup.record_many(&warm);
        self.metrics.e2e_interval.record_many(&all);
        self.counters.popped.add(batch.messages.len() as u64);
        self.counters.popped_rated.add(rated.len() as u64);
        self.counters.batches.inc();
        Disposition::Ack
    }
}
