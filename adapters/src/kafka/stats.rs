//! Adapter counters (`broker_stats`, every key prefixed `kafka_`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

#[derive(Debug, Default)]
pub(super) struct Stats {
    pub published: AtomicU64,
    pub publish_errors: AtomicU64,
    pub publish_queue_full_waits: AtomicU64,
    pub records_fetched: AtomicU64,
    pub fetch_errors: AtomicU64,
    pub key_batches: AtomicU64,
    pub partition_sets: AtomicU64,
    pub acked: AtomicU64,
    pub refused: AtomicU64,
    pub offset_commits: AtomicU64,
    pub offset_commit_errors: AtomicU64,
    pub committed_partitions: AtomicU64,
    pub commit_request_errors: AtomicU64,
    pub replay_seeks: AtomicU64,
    pub replay_skipped: AtomicU64,
    pub redelivered: AtomicU64,
    pub pauses: AtomicU64,
    pub resumes: AtomicU64,
    pub rebalances: AtomicU64,
    pub partitions_assigned: AtomicU64,
    pub partitions_revoked: AtomicU64,
    pub revoke_waits: AtomicU64,
    pub revoke_wait_timeouts: AtomicU64,
    pub stray_records: AtomicU64,
    pub unkeyed_records: AtomicU64,
    pub member_starts: AtomicU64,
    pub member_restarts: AtomicU64,
    pub client_errors: AtomicU64,
    pub topics_deleted: AtomicU64,
    pub topics_created: AtomicU64,
    pub log_dir_bytes_at_setup: AtomicU64,
    pub errors: Mutex<BTreeMap<&'static str, u64>>,
}

pub(super) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Stats {
    pub fn error_class(&self, class: &'static str) {
        *self.errors.lock().entry(class).or_default() += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: u64| {
            m.insert(format!("kafka_{k}"), v);
        };
        put("published", g(&self.published));
        put("publish_errors", g(&self.publish_errors));
        put(
            "publish_queue_full_waits",
            g(&self.publish_queue_full_waits),
        );
        put("records_fetched", g(&self.records_fetched));
        put("fetch_errors", g(&self.fetch_errors));
        put("key_batches", g(&self.key_batches));
        put("partition_sets", g(&self.partition_sets));
        put("acked", g(&self.acked));
        put("refused", g(&self.refused));
        put("offset_commits", g(&self.offset_commits));
        put("offset_commit_errors", g(&self.offset_commit_errors));
        put("committed_partitions", g(&self.committed_partitions));
        put("commit_request_errors", g(&self.commit_request_errors));
        put("replay_seeks", g(&self.replay_seeks));
        put("replay_skipped", g(&self.replay_skipped));
        put("redelivered", g(&self.redelivered));
        put("pauses", g(&self.pauses));
        put("resumes", g(&self.resumes));
        put("rebalances", g(&self.rebalances));
        put("partitions_assigned", g(&self.partitions_assigned));
        put("partitions_revoked", g(&self.partitions_revoked));
        put("revoke_waits", g(&self.revoke_waits));
        put("revoke_wait_timeouts", g(&self.revoke_wait_timeouts));
        put("stray_records", g(&self.stray_records));
        put("unkeyed_records", g(&self.unkeyed_records));
        put("member_starts", g(&self.member_starts));
        put("member_restarts", g(&self.member_restarts));
        put("client_errors", g(&self.client_errors));
        put("topics_deleted", g(&self.topics_deleted));
        put("topics_created", g(&self.topics_created));
        put("log_dir_bytes_at_setup", g(&self.log_dir_bytes_at_setup));
        for (class, n) in self.errors.lock().iter() {
            m.insert(format!("kafka_errors_{class}"), *n);
        }
        m
    }
}

/// Total bytes of the regular files under `dir` (0 when it cannot be read).
pub(super) fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}
