//! Adapter counters (`broker_stats` in result.json, prefixed `queen_`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::BrokerError;

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub push_requests: AtomicU64,
    pub push_retries: AtomicU64,
    pub messages_pushed: AtomicU64,
    /// Items the server answered `duplicate` (a retried push whose first try landed).
    pub push_duplicates: AtomicU64,
    /// Items the server accepted into its file buffer (PostgreSQL unreachable).
    pub push_buffered: AtomicU64,
    pub pops: AtomicU64,
    pub empty_pops: AtomicU64,
    pub messages_popped: AtomicU64,
    pub partitions_claimed: AtomicU64,
    pub ack_requests: AtomicU64,
    pub ack_retries: AtomicU64,
    pub acked: AtomicU64,
    pub ack_errors: AtomicU64,
    /// Partition batches given back with status `retry` (refused, or popped while the
    /// same partition was still in a handler of this stream, or popped at stop).
    pub released_batches: AtomicU64,
    pub refused_messages: AtomicU64,
    /// Auto-ack: refused messages the server had already committed (lost to the group).
    pub auto_ack_refused_lost: AtomicU64,
    pub skipped_in_flight: AtomicU64,
    pub redelivered: AtomicU64,
    /// Targeted: sweeps of a slice.
    pub sweeps: AtomicU64,
    /// Targeted: claim slots, summed over the streams (each stream's is
    /// `targeted::claim_limit` of its stage's lane budget).
    pub claim_slots: AtomicU64,
    /// Targeted: pops that waited for a claim slot (the stage was the bottleneck).
    pub claim_waits: AtomicU64,
    /// `queen_errors_<op>_<class>` → count.
    errors: Mutex<BTreeMap<String, u64>>,
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Stats {
    pub fn error(&self, op: &str, e: &BrokerError) {
        *self
            .errors
            .lock()
            .entry(format!("queen_errors_{op}_{}", e.class()))
            .or_default() += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut m: BTreeMap<String, u64> = [
            ("queen_push_requests", g(&self.push_requests)),
            ("queen_push_retries", g(&self.push_retries)),
            ("queen_messages_pushed", g(&self.messages_pushed)),
            ("queen_push_duplicates", g(&self.push_duplicates)),
            ("queen_push_buffered", g(&self.push_buffered)),
            ("queen_pops", g(&self.pops)),
            ("queen_empty_pops", g(&self.empty_pops)),
            ("queen_messages_popped", g(&self.messages_popped)),
            ("queen_partitions_claimed", g(&self.partitions_claimed)),
            ("queen_ack_requests", g(&self.ack_requests)),
            ("queen_ack_retries", g(&self.ack_retries)),
            ("queen_acked", g(&self.acked)),
            ("queen_ack_errors", g(&self.ack_errors)),
            ("queen_released_batches", g(&self.released_batches)),
            ("queen_refused_messages", g(&self.refused_messages)),
            (
                "queen_auto_ack_refused_lost",
                g(&self.auto_ack_refused_lost),
            ),
            ("queen_skipped_in_flight", g(&self.skipped_in_flight)),
            ("queen_redelivered", g(&self.redelivered)),
            ("queen_sweeps", g(&self.sweeps)),
            ("queen_claim_slots", g(&self.claim_slots)),
            ("queen_claim_waits", g(&self.claim_waits)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in self.errors.lock().iter() {
            m.insert(k.clone(), *v);
        }
        m
    }
}
