//! Per-partition dispatch, the Kafka idiom of SPEC §6 (the adapter contract).
//!
//! Every partition a member is assigned gets its own librdkafka queue
//! (`split_partition_queue`) and its own task here. The task reads the partition in
//! offset order into a local buffer and processes it as a sequence of *sets*: up to
//! `batch` consecutive records, grouped by record key into key-batches (first-seen
//! order, publish order within a key) that run concurrently. A key appears once per
//! set, and only this task ever handles this partition, so a key is never in two
//! handlers of one group at once.
//!
//! * **Back-pressure per partition.** While a set is processed the task keeps reading;
//!   when the buffer reaches `pause_at` records the partition alone is paused
//!   (`pause`), and resumed once the buffer is down to half. A slow key therefore holds
//!   back its own partition and nothing else.
//! * **Coalesced commits.** After a set, the offset after its last record is reported
//!   to the member's committer ([`super::commit`]), which commits all partitions that
//!   advanced in one call every `commit_interval` and counts the records it covered as
//!   acked or ack errors by the commit's result. The task goes on with the next set
//!   without waiting for the broker.
//! * **Refusal → replay.** When a key-batch is refused, the offsets below the first
//!   refused record are reported (never more), the partition is `seek`ed back to that record and the
//!   buffer dropped; records of accepted key-batches after it are remembered and
//!   skipped when the replay reaches them, so nothing accepted is handled twice.
//! * **Revocation.** A revoked partition's task finishes its current set (the member's
//!   rebalance callback waits for it, then commits the partition's processed offset,
//!   so the commit precedes the hand-over) and ends.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use parking_lot::{Condvar, Mutex};
use rdkafka::consumer::Consumer as _;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use super::commit::Committer;
use super::member::{Consumer, PartitionQueue};
use super::stats::Stats;
use crate::broker::{BatchHandler, Delivery, Disposition, KeyBatch, StreamCounters};

/// Shared between a partition's task and the member's rebalance callback.
#[derive(Debug, Default)]
pub(super) struct PartitionCtl {
    state: Mutex<CtlState>,
    idle: Condvar,
    /// Cancelled on revocation (and when the member stops).
    pub token: CancellationToken,
}

#[derive(Debug, Default)]
struct CtlState {
    busy: bool,
    revoked: bool,
}

impl PartitionCtl {
    pub fn new(parent: &CancellationToken) -> Arc<Self> {
        Arc::new(PartitionCtl {
            state: Mutex::new(CtlState::default()),
            idle: Condvar::new(),
            token: parent.child_token(),
        })
    }

    /// Start a set unless the partition was revoked.
    fn begin(&self) -> bool {
        let mut s = self.state.lock();
        if s.revoked {
            return false;
        }
        s.busy = true;
        true
    }

    fn end(&self) {
        self.state.lock().busy = false;
        self.idle.notify_all();
    }

    /// Mark revoked; true when a set is in progress.
    pub fn revoke(&self) -> bool {
        let busy = {
            let mut s = self.state.lock();
            s.revoked = true;
            s.busy
        };
        self.token.cancel();
        busy
    }

    /// Block until no set is in progress or `limit` passes; false on timeout.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        let mut s = self.state.lock();
        while s.busy {
            if self.idle.wait_until(&mut s, deadline).timed_out() {
                return !s.busy;
            }
        }
        true
    }
}

/// One fetched record, owned.
#[derive(Debug)]
struct Rec {
    offset: i64,
    key: Arc<str>,
    payload: Bytes,
}

/// What a partition task needs.
pub(super) struct PartitionJob {
    pub consumer: Arc<Consumer>,
    pub topic: Arc<str>,
    pub partition: i32,
    pub ctl: Arc<PartitionCtl>,
    pub committer: Arc<Committer>,
    pub handler: Arc<dyn BatchHandler>,
    pub counters: Arc<StreamCounters>,
    pub stats: Arc<Stats>,
    pub batch: usize,
    pub pause_at: usize,
}

impl std::fmt::Debug for PartitionJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PartitionJob({}[{}])", self.topic, self.partition)
    }
}

struct Run {
    job: PartitionJob,
    buf: VecDeque<Rec>,
    paused: bool,
    /// Highest offset handed to the stage by this task (replays are flagged redelivered).
    max_seen: i64,
    /// Offsets of accepted records beyond a replay point: skipped when replayed.
    skip: BTreeSet<i64>,
    /// Accepted (skipped) records whose offsets the next commit covers.
    skipped_uncommitted: u64,
}

impl Run {
    fn tpl(&self) -> TopicPartitionList {
        let mut t = TopicPartitionList::new();
        t.add_partition(&self.job.topic, self.job.partition);
        t
    }

    fn push(&mut self, m: rdkafka::error::KafkaResult<rdkafka::message::BorrowedMessage<'_>>) {
        match m {
            Ok(m) => {
                self.job.stats.records_fetched.inc();
                let key: Arc<str> = match m.key() {
                    Some(k) => Arc::from(String::from_utf8_lossy(k).as_ref()),
                    None => {
                        self.job.stats.unkeyed_records.inc();
                        Arc::from("")
                    }
                };
                let offset = m.offset();
                if self.skip.remove(&offset) {
                    self.job.stats.replay_skipped.inc();
                    self.skipped_uncommitted += 1;
                    return;
                }
                self.buf.push_back(Rec {
                    offset,
                    key,
                    payload: Bytes::copy_from_slice(m.payload().unwrap_or_default()),
                });
                if !self.paused && self.buf.len() >= self.job.pause_at {
                    match self.job.consumer.pause(&self.tpl()) {
                        Ok(()) => {
                            self.paused = true;
                            self.job.stats.pauses.inc();
                        }
                        Err(_) => self.job.stats.error_class("pause"),
                    }
                }
            }
            Err(_) => {
                self.job.stats.fetch_errors.inc();
                self.job.counters.receive_errors.inc();
            }
        }
    }

    fn maybe_resume(&mut self) {
        if self.paused && self.buf.len() <= self.job.pause_at / 2 {
            match self.job.consumer.resume(&self.tpl()) {
                Ok(()) => {
                    self.paused = false;
                    self.job.stats.resumes.inc();
                }
                Err(_) => self.job.stats.error_class("resume"),
            }
        }
    }

    /// Report `next` (the offset of the next record to read) for this partition,
    /// covering `n` records, to the member's committer.
    fn commit(&mut self, next: i64, n: u64) {
        let n = n + std::mem::take(&mut self.skipped_uncommitted);
        self.job.committer.report(self.job.partition, next, n);
    }

    async fn run(mut self, queue: &PartitionQueue) {
        let token = self.job.ctl.token.clone();
        loop {
            if self.buf.is_empty() {
                self.maybe_resume();
                tokio::select! {
                    biased;
                    _ = token.cancelled() => break,
                    m = queue.recv() => self.push(m),
                }
            }
            // Take what else is already here, without waiting, up to one set: reading
            // further ahead would fill the buffer to `pause_at` and pause a partition
            // that is not behind (a pause makes librdkafka drop its prefetched records
            // and fetch them again on resume). Records beyond the set stay in
            // librdkafka's own per-partition prefetch queue; the buffer grows only
            // while a set is in progress.
            while self.buf.len() < self.job.batch {
                match queue.recv().now_or_never() {
                    Some(m) => self.push(m),
                    None => break,
                }
            }
            if self.buf.is_empty() {
                continue;
            }
            if !self.job.ctl.begin() {
                break;
            }
            self.process_set(queue).await;
            self.job.ctl.end();
            self.maybe_resume();
        }
    }

    async fn process_set(&mut self, queue: &PartitionQueue) {
        let n = self.job.batch.min(self.buf.len());
        let set: Vec<Rec> = self.buf.drain(..n).collect();
        let first = set[0].offset;
        let last = set[set.len() - 1].offset;
        self.job.stats.partition_sets.inc();
        // Group by key: first-seen order, offset order within a key.
        let mut index: HashMap<Arc<str>, usize> = HashMap::new();
        let mut groups: Vec<(Arc<str>, Vec<i64>, Vec<Delivery>)> = Vec::new();
        let mut redelivered = 0u64;
        for r in set {
            let again = r.offset <= self.max_seen;
            if again {
                redelivered += 1;
            }
            let i = *index.entry(r.key.clone()).or_insert_with(|| {
                groups.push((r.key.clone(), Vec::new(), Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(r.offset);
            groups[i].2.push(Delivery {
                payload: r.payload,
                redelivered: again,
            });
        }
        self.max_seen = self.max_seen.max(last);
        if redelivered > 0 {
            self.job.stats.redelivered.add(redelivered);
            self.job.counters.redelivered.add(redelivered);
        }
        self.job.stats.key_batches.add(groups.len() as u64);
        let handler = self.job.handler.clone();
        let work = futures::future::join_all(groups.iter().map(|(k, _, msgs)| {
            handler.handle(KeyBatch {
                key: k.clone(),
                messages: msgs.clone(),
            })
        }));
        tokio::pin!(work);
        // Keep reading this partition while the set runs (pausing it when it backs up).
        let results = loop {
            tokio::select! {
                biased;
                r = &mut work => break r,
                m = queue.recv() => self.push(m),
            }
        };
        let refused: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| **r == Disposition::Refuse)
            .map(|(i, _)| i)
            .collect();
        let total: u64 = groups.iter().map(|g| g.1.len() as u64).sum();
        if refused.is_empty() {
            self.commit(last + 1, total);
            return;
        }
        // Replay from the first refused record.
        let replay_from = refused
            .iter()
            .map(|&i| groups[i].1[0])
            .min()
            .expect("non-empty");
        let refused_n: u64 = refused.iter().map(|&i| groups[i].1.len() as u64).sum();
        self.job.stats.refused.add(refused_n);
        self.job.counters.refused.add(refused_n);
        let mut below = 0u64;
        for (i, g) in groups.iter().enumerate() {
            if results[i] != Disposition::Ack {
                continue;
            }
            for &o in &g.1 {
                if o < replay_from {
                    below += 1;
                } else {
                    self.skip.insert(o);
                }
            }
        }
        if replay_from > first {
            self.commit(replay_from, below);
        }
        self.buf.clear();
        match self.job.consumer.seek(
            &self.job.topic,
            self.job.partition,
            Offset::Offset(replay_from),
            Duration::ZERO,
        ) {
            Ok(()) => self.job.stats.replay_seeks.inc(),
            Err(_) => self.job.stats.error_class("seek"),
        }
    }
}

/// Run one partition until it is revoked or the member stops.
pub(super) async fn run(job: PartitionJob, queue: PartitionQueue) {
    Run {
        job,
        buf: VecDeque::new(),
        paused: false,
        max_seen: -1,
        skip: BTreeSet::new(),
        skipped_uncommitted: 0,
    }
    .run(&queue)
    .await
}
