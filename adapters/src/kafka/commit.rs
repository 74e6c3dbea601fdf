//! Coalesced offset commits: one committer per consumer instance (member).
//!
//! Partition tasks never commit themselves. After a set they *report* "processed up
//! to offset X (n records)" for their partition ([`Committer::report`]); the member's
//! commit loop takes every partition that advanced and commits the highest reported
//! offset of each in **one** synchronous `OffsetCommit` ([`Committer::flush`], on a
//! blocking thread) at most every `commit_interval`. The records a commit covers are
//! counted acked when it succeeds and ack errors when it fails, so the accounting stays
//! exact per record, as with a commit per set.
//!
//! A partition task never reports past a refused record (it reports the offset of the
//! first refused record, then seeks back), so no commit ever passes a refused batch.
//!
//! On revocation the rebalance callback flushes the revoked partitions synchronously
//! before it returns, and the member flushes everything before it closes. Flushes are
//! serialised by a lock held across the commit call, so a revocation also waits for a
//! periodic commit that is already in flight.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

use super::stats::Stats;
use crate::broker::StreamCounters;

/// Processed but not yet committed progress of one partition.
#[derive(Debug, Clone, Copy)]
struct Progress {
    /// Offset of the next record to read (what a commit stores).
    next: i64,
    /// Records covered by `next` and not yet counted.
    records: u64,
}

#[derive(Debug)]
pub(super) struct Committer {
    topic: String,
    pending: Mutex<HashMap<i32, Progress>>,
    /// Held across a commit call: flushes happen one at a time.
    in_flight: Mutex<()>,
    counters: Arc<StreamCounters>,
    stats: Arc<Stats>,
}

impl Committer {
    pub fn new(topic: &str, counters: Arc<StreamCounters>, stats: Arc<Stats>) -> Arc<Self> {
        Arc::new(Committer {
            topic: topic.to_string(),
            pending: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(()),
            counters,
            stats,
        })
    }

    /// `records` more records of `partition` are processed; everything below `next`
    /// may be committed.
    pub fn report(&self, partition: i32, next: i64, records: u64) {
        let mut p = self.pending.lock();
        let e = p.entry(partition).or_insert(Progress { next, records: 0 });
        e.next = e.next.max(next);
        e.records += records;
    }

    /// Commit the pending progress of `only` these partitions (all when `None`) in one
    /// synchronous call, and count what it covered. Blocking: call it off the runtime
    /// threads (or from the rebalance callback).
    pub fn flush<C, K>(&self, consumer: &K, only: Option<&[i32]>)
    where
        C: ConsumerContext,
        K: Consumer<C>,
    {
        let _one = self.in_flight.lock();
        let taken: Vec<(i32, Progress)> = {
            let mut p = self.pending.lock();
            match only {
                None => p.drain().collect(),
                Some(parts) => parts
                    .iter()
                    .filter_map(|q| p.remove(q).map(|v| (*q, v)))
                    .collect(),
            }
        };
        if taken.is_empty() {
            return;
        }
        let records: u64 = taken.iter().map(|(_, v)| v.records).sum();
        let mut tpl = TopicPartitionList::new();
        for (q, v) in &taken {
            if tpl
                .add_partition_offset(&self.topic, *q, Offset::Offset(v.next))
                .is_err()
            {
                self.stats.error_class("commit_offset");
            }
        }
        match consumer.commit(&tpl, CommitMode::Sync) {
            Ok(()) => {
                self.stats.offset_commits.inc();
                self.stats.committed_partitions.add(taken.len() as u64);
                self.stats.acked.add(records);
                self.counters.acked.add(records);
            }
            Err(_) => {
                self.stats.offset_commit_errors.inc();
                self.counters.ack_errors.add(records);
            }
        }
    }
}
