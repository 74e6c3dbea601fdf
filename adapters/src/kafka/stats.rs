//! Adapter counters (`broker_stats`, every key prefixed `kafka_`).

use serde::Serialize;

use crate::counter::{Counter, CounterMap};

#[derive(Debug, Default, Serialize)]
pub(super) struct Stats {
    pub published: Counter,
    pub publish_errors: Counter,
    pub publish_queue_full_waits: Counter,
    pub records_fetched: Counter,
    pub fetch_errors: Counter,
    pub key_batches: Counter,
    pub partition_sets: Counter,
    pub acked: Counter,
    pub refused: Counter,
    pub offset_commits: Counter,
    pub offset_commit_errors: Counter,
    pub committed_partitions: Counter,
    pub commit_request_errors: Counter,
    pub replay_seeks: Counter,
    pub replay_skipped: Counter,
    pub redelivered: Counter,
    pub pauses: Counter,
    pub resumes: Counter,
    pub rebalances: Counter,
    pub partitions_assigned: Counter,
    pub partitions_revoked: Counter,
    pub revoke_waits: Counter,
    pub revoke_wait_timeouts: Counter,
    /// Partitions assigned to a member while another member of the group still held
    /// them ([`super::holders`]).
    pub assignment_overlaps: Counter,
    pub stray_records: Counter,
    pub unkeyed_records: Counter,
    pub member_starts: Counter,
    pub member_restarts: Counter,
    pub client_errors: Counter,
    pub topics_deleted: Counter,
    pub topics_created: Counter,
    pub log_dir_bytes_at_setup: Counter,
    /// Class or failing operation → count (`kafka_errors_<class>`).
    pub errors: CounterMap,
}

impl Stats {
    pub fn error_class(&self, class: &'static str) {
        self.errors.inc(class);
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
