//! Adapter counters (`broker_stats` in result.json, prefixed `queen_`).

use serde::Serialize;

use crate::counter::{Counter, CounterMap};
use crate::error::BrokerError;

#[derive(Debug, Default, Serialize)]
pub(crate) struct Stats {
    pub push_requests: Counter,
    pub push_retries: Counter,
    pub messages_pushed: Counter,
    /// Items the server answered `duplicate` (a retried push whose first try landed).
    pub push_duplicates: Counter,
    /// Items the server accepted into its file buffer (PostgreSQL unreachable).
    pub push_buffered: Counter,
    pub pops: Counter,
    pub empty_pops: Counter,
    pub messages_popped: Counter,
    pub partitions_claimed: Counter,
    pub ack_requests: Counter,
    pub ack_retries: Counter,
    pub acked: Counter,
    pub ack_errors: Counter,
    /// Partition batches given back with status `retry` (refused, or popped while the
    /// same partition was still in a handler of this stream, or popped at stop).
    pub released_batches: Counter,
    pub refused_messages: Counter,
    /// Auto-ack: refused messages the server had already committed (lost to the group).
    pub auto_ack_refused_lost: Counter,
    pub skipped_in_flight: Counter,
    pub redelivered: Counter,
    /// Targeted: sweeps of a slice.
    pub sweeps: Counter,
    /// Targeted: claim slots, summed over the streams (each stream's is
    /// `targeted::claim_limit` of its stage's lane budget).
    pub claim_slots: Counter,
    /// Targeted: pops that waited for a claim slot (the stage was the bottleneck).
    pub claim_waits: Counter,
    /// Pop workers started, summed over the streams.
    pub pop_workers_started: Counter,
    /// `<op>_<class>` → count (`queen_errors_<op>_<class>`).
    errors: CounterMap,
}

impl Stats {
    pub fn error(&self, op: &str, e: &BrokerError) {
        self.errors.inc(format!("{op}_{}", e.class()));
    }
}
