//! Run-level and stage-level counters (lock-free atomics).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use serde::Serialize;

/// Shorthand for a relaxed add.
pub fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

pub fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Ingress counters of one flow. `offered = published + shed + failed` holds at the end.
#[derive(Debug, Default)]
pub struct FlowCounters {
    /// Events the schedule owed (every one counts, including catch-up skips).
    pub offered: AtomicU64,
    /// Ingress publishes the system acknowledged (paced traffic; hydration excluded).
    pub published: AtomicU64,
    /// Events dropped because their publisher's queue was full (the system did not
    /// absorb the offered rate through the harness's publishers).
    pub shed_backpressure: AtomicU64,
    /// Events skipped because the pacer itself fell more than the catch-up cap behind
    /// (the loader could not hold the schedule: the cell is VOID).
    pub shed_pacer: AtomicU64,
    /// Events whose publish was abandoned at stop after errors.
    pub failed: AtomicU64,
    /// Publish attempts that failed and were retried.
    pub publish_retries: AtomicU64,
    /// Hydration publishes (seq 0 of every property), outside the paced identity.
    pub hydration_published: AtomicU64,
    /// Paced events scheduled inside the rated window.
    pub offered_rated: AtomicU64,
    /// Of those, published.
    pub published_rated: AtomicU64,
}

impl FlowCounters {
    pub fn shed(&self) -> u64 {
        get(&self.shed_backpressure) + get(&self.shed_pacer)
    }

    pub fn snapshot(&self) -> FlowSnapshot {
        FlowSnapshot {
            offered: get(&self.offered),
            published: get(&self.published),
            shed: self.shed(),
            shed_backpressure: get(&self.shed_backpressure),
            shed_pacer: get(&self.shed_pacer),
            failed: get(&self.failed),
            publish_retries: get(&self.publish_retries),
            hydration_published: get(&self.hydration_published),
            offered_rated: get(&self.offered_rated),
            published_rated: get(&self.published_rated),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq, Eq)]
pub struct FlowSnapshot {
    pub offered: u64,
    pub published: u64,
    pub shed: u64,
    pub shed_backpressure: u64,
    pub shed_pacer: u64,
    pub failed: u64,
    pub publish_retries: u64,
    pub hydration_published: u64,
    pub offered_rated: u64,
    pub published_rated: u64,
}

impl FlowSnapshot {
    /// The accounting identity every run must satisfy.
    pub fn identity_holds(&self) -> bool {
        self.offered == self.published + self.shed + self.failed
    }
}

/// Per-stage counters.
#[derive(Debug, Default)]
pub struct StageCounters {
    /// Messages handed to the stage (redeliveries included).
    pub delivered: AtomicU64,
    /// Messages fully processed (logged) — acked or not.
    pub processed: AtomicU64,
    /// Of `processed`, those whose stamp was scheduled inside the rated window.
    pub processed_rated: AtomicU64,
    /// Derived messages re-published (intermediate stages).
    pub derived: AtomicU64,
    /// Messages of batches whose derived publish failed (batch refused).
    pub push_errors: AtomicU64,
    /// Batches aborted because the run was stopping.
    pub aborted: AtomicU64,
    /// Payloads that were not stamps (refused, counted).
    pub decode_errors: AtomicU64,
    /// Payloads that needed the slow JSON path.
    pub slow_decodes: AtomicU64,
    /// Messages the system flagged as redelivered.
    pub redelivered_flagged: AtomicU64,
}

/// Highest acknowledged seq per property of one flow (−1 = none).
#[derive(Debug)]
pub struct SeqTable {
    max: Vec<AtomicI64>,
}

impl SeqTable {
    pub fn new(props: u64) -> Self {
        SeqTable {
            max: (0..props).map(|_| AtomicI64::new(-1)).collect(),
        }
    }
    pub fn ack(&self, prop: u64, seq: i64) {
        if let Some(m) = self.max.get(prop as usize) {
            m.fetch_max(seq, Ordering::Relaxed);
        }
    }
    pub fn get(&self, prop: u64) -> i64 {
        self.max
            .get(prop as usize)
            .map_or(-1, |m| m.load(Ordering::Relaxed))
    }
    pub fn len(&self) -> usize {
        self.max.len()
    }
    pub fn is_empty(&self) -> bool {
        self.max.is_empty()
    }
}
