//! The Queen adapter (Queen's HTTP API through reqwest; plain HTTP, one keep-alive pool).
//!
//! Topology: one Queen queue per topic, configured at setup (lease time, retention) and
//! deleted at reset together with the stages' consumer groups; one consumer group per
//! stage (`consumerGroup=<group>` on every pop and ack); one partition per ordering key
//! (`p<N>`), or hashed lane partitions (`l<N>`, `lanes::lane_key`) when lanes < keys.
//! Queen fans out natively: one push serves every group of a topic.
//!
//! Publish: one push request per key-batch, every message with a client-made
//! transaction id; Queen keeps (partition, transactionId) unique, so a push retried
//! after a lost answer cannot duplicate (the server answers `duplicate`).
//!
//! Consume: see `wildcard.rs` (modes `wildcard`, `auto-ack`), `targeted.rs` and
//! `stream.rs` (claims, in-flight guard, bulk ack, refusal by `retry`). Queen answers
//! failures with HTTP 200 and an error in the body; every answer is checked, failures
//! are counted by operation and class (`queen_errors_<op>_<class>`), backed off and
//! retried: a failed pop or ack never ends a worker.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use reqwest::Method;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::client::{encode, Client, Failure};
use super::options::PopMode;
use super::stats::Stats;
use super::stream::Stream;
use super::wire::{push_item, Configured, Health, PushAnswer};
use super::{targeted, wildcard, QueenOptions};
use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, DeliveryGuarantee, Description, Durability, FanOut,
    Topology,
};
use crate::counter;
use crate::error::BrokerError;
use crate::lanes::lane_key;

/// Queen's `delete_queue_v1` deletes the queue's partitions while other work on the
/// server may lock the same rows in the other order (most likely a pop of the previous
/// cell, still running after its client hung up: docs/perf-queen.md). PostgreSQL breaks
/// the deadlock by failing one side, and Queen answers the delete with the error (seen
/// in the ceiling campaign of 2026-12-05, after a cell that left a backlog). A deadlock
/// victim may be retried by PostgreSQL's own definition (SQLSTATE 40P01), so the
/// reset tries again, a few times, before it gives up.
const DELETE_ATTEMPTS: u32 = 5;
const DELETE_BACKOFF: Duration = Duration::from_millis(250);

/// Whether Queen's answer to a delete is PostgreSQL's deadlock error.
fn is_deadlock(answer: &str) -> bool {
    answer.contains("deadlock detected")
}

/// What setup learned.
#[derive(Debug, Default)]
struct Setup {
    /// topic → its groups.
    topics: HashMap<String, Vec<String>>,
    keys: u64,
    lanes: u64,
    server_version: String,
    dedup: DedupSupport,
}

/// Whether the server kept the dedup window the scenario asked for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum DedupSupport {
    #[default]
    NotRequested,
    Configured,
    NotSupported,
}

/// What the snapshot adds to the counters: the configuration and what setup learned.
#[derive(Serialize)]
struct Gauges {
    pop_workers_per_stream: u64,
    lease_seconds: u64,
    partitions_per_queue: u64,
    dedup_window_supported: u64,
}

/// The Queen broker.
#[derive(Debug)]
pub struct QueenBroker {
    options: QueenOptions,
    client: Client,
    setup: RwLock<Setup>,
    stats: Arc<Stats>,
    /// Transaction ids: `<nonce>-<seq>`, unique per broker instance and process.
    tx_nonce: String,
    tx_seq: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl QueenBroker {
    pub fn new(options: QueenOptions) -> Result<Self, BrokerError> {
        crate::options::Section::validate(&options)?;
        let client = Client::new(&options)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        let tx_nonce = format!("{:x}{:x}", now, std::process::id());
        Ok(QueenBroker {
            options,
            client,
            setup: RwLock::new(Setup::default()),
            stats: Arc::new(Stats::default()),
            tx_nonce,
            tx_seq: AtomicU64::new(0),
            last_error: Mutex::new(None),
        })
    }

    pub fn options(&self) -> &QueenOptions {
        &self.options
    }

    /// The server version `/health` reported at setup (empty before setup).
    pub fn server_version(&self) -> String {
        self.setup.read().server_version.clone()
    }

    /// The server's `/health`: its version string.
    pub async fn health(&self) -> Result<String, BrokerError> {
        let h: Health = self
            .client
            .call("health", Method::GET, "/health", None, Duration::ZERO)
            .await
            .map_err(|f| match f.error {
                // A certificate or a token the scenario must fix, said as it is.
                e @ BrokerError::Config { .. } => e,
                e => BrokerError::Connection(format!(
                    "cannot reach Queen at {}: {e} (start a server: compose/queen/README.md)",
                    self.client.base(),
                )),
            })?;
        if h.status != "healthy" {
            return Err(BrokerError::Connection(format!(
                "Queen at {} is not healthy: status {:?}, database {:?}",
                self.client.base(),
                h.status,
                h.database
            )));
        }
        Ok(h.version.unwrap_or_else(|| "unknown".into()))
    }

    async fn delete(&self, op: &str, path: &str) -> Result<serde_json::Value, BrokerError> {
        self.client
            .call::<serde_json::Value>(op, Method::DELETE, path, None, Duration::ZERO)
            .await
            .map_err(|f: Failure| f.error)
    }

    /// Drop a topic's queue and its groups' cursors; returns how many times the queue's
    /// delete was tried again after PostgreSQL chose it as a deadlock victim.
    async fn reset_topic(&self, topic: &str, groups: &[String]) -> Result<u32, BrokerError> {
        for g in groups {
            // This queue's share of the group only: `DELETE /consumer-groups/<g>` drops
            // the group's cursors on every queue of the server, so a reset of one cell
            // rewound any other queue read by a group of the same name (another cell,
            // another test, someone else's consumers) and replayed it whole. A group or
            // queue that never existed answers success too.
            if let Err(e) = self
                .delete(
                    "reset",
                    &format!(
                        "/api/v1/consumer-groups/{}/queues/{}?deleteMetadata=true",
                        encode(g),
                        encode(topic)
                    ),
                )
                .await
            {
                self.stats.error("reset", &e);
            }
        }
        let mut attempt = 1;
        loop {
            let v = self
                .delete(
                    "reset",
                    &format!("/api/v1/resources/queues/{}", encode(topic)),
                )
                .await?;
            let Some(e) = v.get("error").and_then(|e| e.as_str()) else {
                return Ok(attempt - 1);
            };
            if is_deadlock(e) && attempt < DELETE_ATTEMPTS {
                self.stats.error(
                    "reset",
                    &BrokerError::Refused(format!("deleting queue {topic:?}: {e}")),
                );
                tokio::time::sleep(DELETE_BACKOFF * attempt).await;
                attempt += 1;
                continue;
            }
            let tries = if attempt > 1 {
                format!(" (attempt {attempt} of {DELETE_ATTEMPTS})")
            } else {
                String::new()
            };
            return Err(BrokerError::Refused(format!(
                "deleting queue {topic:?}{tries}: {e}"
            )));
        }
    }

    async fn configure(&self, topic: &str, dedup_window_sec: u64) -> Result<bool, BrokerError> {
        // Configure replaces every option (reference pitfall P9): send all we rely on.
        let mut options = serde_json::json!({
            "leaseTime": self.options.lease_secs(),
            "retentionEnabled": true,
            "completedRetentionSeconds": self.options.completed_retention_sec,
            "retentionSeconds": 0,
            "delayedProcessing": self.options.delayed_processing.as_secs(),
        });
        if dedup_window_sec > 0 {
            options["dedupWindowSeconds"] = dedup_window_sec.into();
        }
        let body = serde_json::to_vec(&serde_json::json!({"queue": topic, "options": options}))
            .expect("configure body");
        let c: Configured = self
            .client
            .call(
                "configure",
                Method::POST,
                "/api/v1/configure",
                Some(body),
                Duration::ZERO,
            )
            .await
            .map_err(|f| f.error)?;
        if !c.configured {
            return Err(BrokerError::Refused(format!(
                "configure {topic:?}: {}",
                c.error.unwrap_or_else(|| "configured:false".into())
            )));
        }
        let lease = c.options.get("leaseTime").and_then(|v| v.as_u64());
        if lease.is_some_and(|l| l != self.options.lease_secs()) {
            return Err(BrokerError::Refused(format!(
                "configure {topic:?}: asked leaseTime {} s, the server kept {lease:?}",
                self.options.lease_secs()
            )));
        }
        let delay = c.options.get("delayedProcessing").and_then(|v| v.as_u64());
        if delay.unwrap_or(0) != self.options.delayed_processing.as_secs() {
            return Err(BrokerError::Refused(format!(
                "configure {topic:?}: asked delayedProcessing {} s, the server kept {delay:?}",
                self.options.delayed_processing.as_secs()
            )));
        }
        // Unknown option keys are dropped silently (P9): the echo tells.
        Ok(c.options.contains_key("dedupWindowSeconds"))
    }

    fn next_tx(&self, n: usize) -> u64 {
        self.tx_seq.fetch_add(n as u64, Ordering::Relaxed)
    }
}

/// What `/health` answers that is known not to name the build: Queen 0.15.1 (commit
/// ab23212, `server/server.json`) answers "1.0.0", as the 1.0.0 release does.
const UNRELIABLE_VERSIONS: [&str; 1] = ["1.0.0"];

/// The server's provenance from `/health`'s version (`unknown` when it gave none).
pub fn health_provenance(version: &str) -> crate::Provenance {
    let mut p = crate::Provenance::new("Queen", "GET /health (version)");
    if version == "unknown" || version.trim().is_empty() {
        p.not_reported("version", "/health answered without a version");
        return p;
    }
    p = p.with_version(version);
    if UNRELIABLE_VERSIONS.contains(&version) {
        p.caveat = Some(format!(
            "Queen's /health answers {version} whatever the build: 0.15.1 (commit ab23212) answers it too, so it does not name the build measured; state the build (a commit or image digest) with the scenario's system_build"
        ));
    }
    p
}

#[async_trait]
impl Broker for QueenBroker {
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        let o = &self.options;
        match topology.durability {
            Durability::Default => {}
            Durability::Memory | Durability::None => {
                return Err(BrokerError::Config {
                    field: "durability".into(),
                    message: "Queen stores messages in PostgreSQL; use durability: default".into(),
                })
            }
            Durability::Fsync => {
                return Err(BrokerError::Config {
                    field: "durability".into(),
                    message: "Queen's durability is its PostgreSQL's, which crossbench cannot check over Queen's HTTP API; use durability: default and state the server's fsync setting".into(),
                })
            }
        }
        let version = self.health().await?;
        let mut dedup = DedupSupport::NotRequested;
        let mut topics = HashMap::new();
        let mut delete_retries = 0;
        for t in &topology.topics {
            if topology.reset {
                delete_retries += self.reset_topic(&t.name, &t.groups).await?;
            }
            let kept = self.configure(&t.name, topology.dedup_window_sec).await?;
            if topology.dedup_window_sec > 0 {
                dedup = match (kept, dedup) {
                    (_, DedupSupport::NotSupported) | (false, _) => DedupSupport::NotSupported,
                    (true, _) => DedupSupport::Configured,
                };
            }
            topics.insert(t.name.clone(), t.groups.clone());
        }
        // After the reset, before any traffic: the cell starts on a vacuumed store.
        let mut provenance = health_provenance(&version);
        let store_notes = match &o.store_dsn {
            Some(dsn) => {
                let v = super::store::vacuum(dsn, super::store::VACUUM_LIMIT).await?;
                v.settings.settings_into(&mut provenance, "store.");
                provenance.report("store_postgresql", v.settings.server_version.clone());
                v.notes()
            }
            None => {
                provenance.not_reported(
                    "the store's PostgreSQL version and settings",
                    "no queen.store_dsn (Queen's HTTP API does not say them)",
                );
                vec![super::store::NOT_VACUUMED.to_string()]
            }
        };
        let keys = topology.keys.max(1);
        let lanes = topology.lanes.clamp(1, keys);
        let streams = topology.stream_count() as u64;
        let workers = o.workers_for(lanes) as u64;
        *self.setup.write() = Setup {
            topics,
            keys,
            lanes,
            server_version: version.clone(),
            dedup,
        };

        let mode = o.mode;
        let mut notes = vec![
            match &provenance.caveat {
                Some(_) => format!(
                    "Queen server at {}; /health says version {version}, which does not name the build (provenance.caveat; the build measured is provenance.stated_build)",
                    self.client.base()
                ),
                None => format!(
                    "Queen server at {}; /health says version {version}",
                    self.client.base()
                ),
            },
            format!(
                "pop mode {}: {} pop workers per stream, batch up to the scenario's batch, lease {} s",
                mode.name(),
                workers,
                o.lease_secs()
            ),
            "refused batches are given back by acking their first message `retry` (lease released, cursor kept, no retry count): the whole batch comes back at once".into(),
            "every ack carries the pop's lease id (fencing)".into(),
        ];
        match mode {
            PopMode::Wildcard | PopMode::AutoAck => notes.push(format!(
                "wildcard pops: up to {} partitions per pop, long poll {} ms",
                o.partitions_per_pop,
                o.long_poll.as_millis()
            )),
            PopMode::Targeted => notes.push(format!(
                "targeted pops: non-waiting pops per partition, sweep floor {} ms, at most {} claims per lane of the stage",
                o.sweep_floor.as_millis(),
                o.claims_per_lane
            )),
        }
        if !o.delayed_processing.is_zero() {
            notes.push(format!(
                "delayedProcessing {} s on every queue: a message is visible to pops only that long after it was stamped (adds that much to e2e)",
                o.delayed_processing.as_secs()
            ));
        }
        if delete_retries > 0 {
            notes.push(format!(
                "the reset's queue deletes were tried again {delete_retries} time(s): PostgreSQL chose them as deadlock victims"
            ));
        }
        notes.extend(store_notes);
        if mode == PopMode::AutoAck {
            notes.push("auto-ack: the server commits at pop; a refused batch or a crash loses its messages (at-most-once)".into());
        }
        match dedup {
            DedupSupport::NotRequested => notes.push(
                "no dedup window requested; the server still rejects a repeated (partition, transactionId), so retried pushes cannot duplicate".into(),
            ),
            DedupSupport::Configured => notes.push(format!(
                "dedup window {} s configured on every queue",
                topology.dedup_window_sec
            )),
            DedupSupport::NotSupported => notes.push(format!(
                "dedup window {} s requested: not supported by this server (configure dropped dedupWindowSeconds); (partition, transactionId) stays unique permanently",
                topology.dedup_window_sec
            )),
        }
        if lanes < keys {
            notes.push(format!(
                "{keys} keys hashed onto {lanes} partitions per queue (l<fnv1a32(key) mod {lanes}>): head-of-line blocking between keys of one partition"
            ));
        }
        let mut built = vec![
            "per-stream in-flight partition set (a lease that expired under a slow handler is given back, not handled twice)".into(),
            "redelivery flag from the adapter's memory of refused and unacked transaction ids (Queen's pops carry none)".into(),
        ];
        match mode {
            PopMode::Wildcard | PopMode::AutoAck => built.push(
                "broker assigns partitions dynamically (wildcard pop, pays the server's candidate scan)".into(),
            ),
            PopMode::Targeted => {
                built.push("static partition → pop worker map owned by the application (not elastic)".into());
                built.push("sweep pacing: polling of every partition, empty pops included".into());
            }
        }
        Ok(Description {
            system: "queen".into(),
            variant: mode.name().into(),
            durability: topology.durability,
            fan_out: FanOut::Native,
            delivery: if mode == PopMode::AutoAck {
                DeliveryGuarantee::AtMostOnce
            } else {
                DeliveryGuarantee::AtLeastOnce
            },
            ordered_lanes: lanes * topology.topics.len() as u64,
            physical_queues: topology.topics.len() as u64,
            consumer_members: workers * streams,
            // One keep-alive connection per concurrent request: a pop loop each, plus
            // publishers (the pool grows with concurrent pushes).
            connections: workers * streams,
            publishes_per_ingress_event: topology.native_publishes_per_ingress_event(),
            semantics_built_in_app: built,
            notes,
            lease_ms: Some(o.lease_secs() * 1000),
            provenance,
        })
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let lane = {
            let s = self.setup.read();
            if !s.topics.contains_key(topic) {
                return Err(BrokerError::UnknownTopic(topic.to_string()));
            }
            lane_key(key, s.lanes, s.keys)
        };
        let first = self.next_tx(payloads.len());
        let size: usize = payloads.iter().map(|p| p.len() + 96).sum::<usize>() + 16;
        let mut body = Vec::with_capacity(size + topic.len() * payloads.len());
        body.extend_from_slice(b"{\"items\":[");
        for (i, p) in payloads.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            let tx = format!("{}-{:x}", self.tx_nonce, first + i as u64);
            push_item(&mut body, topic, &lane, &tx, p);
        }
        body.extend_from_slice(b"]}");
        self.stats.push_requests.inc();
        let stats = &self.stats;
        let r: Result<PushAnswer, Failure> = self
            .client
            .call_retrying(
                "push",
                Method::POST,
                "/api/v1/push",
                body,
                self.options.retries,
                |e, again| {
                    stats.error("push", e);
                    if again {
                        stats.push_retries.inc();
                    }
                },
            )
            .await;
        let items = match r {
            Ok(PushAnswer::Items(v)) => v,
            Ok(PushAnswer::Error(e)) => {
                let e = BrokerError::Refused(format!("push: {}", e.error));
                self.stats.error("push", &e);
                return Err(e);
            }
            Err(f) => {
                *self.last_error.lock() = Some(f.error.to_string());
                return Err(f.error);
            }
        };
        if items.len() != payloads.len() {
            let e = BrokerError::Other(format!(
                "push: {} results for {} messages",
                items.len(),
                payloads.len()
            ));
            self.stats.error("push", &e);
            return Err(e);
        }
        let (mut dups, mut buffered) = (0u64, 0u64);
        for it in &items {
            match it.status.as_str() {
                "queued" | "" => {}
                "duplicate" => dups += 1,
                // The server could not reach PostgreSQL and wrote the item to its file
                // buffer, replayed later: accepted, but counted.
                "buffered" => buffered += 1,
                other => {
                    let e = BrokerError::Refused(format!(
                        "push: item {other}: {}",
                        it.error.as_deref().unwrap_or("no reason given")
                    ));
                    self.stats.error("push", &e);
                    return Err(e);
                }
            }
        }
        self.stats.push_duplicates.add(dups);
        self.stats.push_buffered.add(buffered);
        self.stats.messages_pushed.add(payloads.len() as u64);
        Ok(())
    }

    async fn consume(
        &self,
        topic: &str,
        group: &str,
        options: ConsumeOptions,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
    ) -> Result<(), BrokerError> {
        let (keys, lanes) = {
            let s = self.setup.read();
            let groups = s
                .topics
                .get(topic)
                .ok_or_else(|| BrokerError::UnknownTopic(topic.to_string()))?;
            if !groups.iter().any(|g| g == group) {
                return Err(BrokerError::Other(format!(
                    "unknown group {group:?} on {topic:?}"
                )));
            }
            (s.keys, s.lanes)
        };
        let o = &self.options;
        let stream = Arc::new(Stream::new(
            self.client.clone(),
            topic.to_string(),
            group.to_string(),
            options.batch.max(1),
            o.mode == PopMode::AutoAck,
            o.retries,
            options.counters.clone(),
            handler,
            stop,
            self.stats.clone(),
        ));
        let workers = o.workers_for(lanes);
        let mut tasks = Vec::with_capacity(workers);
        match o.mode {
            PopMode::Wildcard | PopMode::AutoAck => {
                for _ in 0..workers {
                    tasks.push(tokio::spawn(wildcard::pop_loop(
                        stream.clone(),
                        o.partitions_per_pop,
                        o.long_poll,
                    )));
                }
            }
            PopMode::Targeted => {
                let limit = targeted::claim_limit(options.lanes, o.claims_per_lane);
                self.stats.claim_slots.add(limit as u64);
                let slots = Arc::new(tokio::sync::Semaphore::new(limit));
                let names = targeted::partition_names(keys, lanes);
                for i in 0..workers {
                    let owned = targeted::slice(&names, i, workers);
                    if owned.is_empty() {
                        continue;
                    }
                    tasks.push(tokio::spawn(targeted::sweep_loop(
                        stream.clone(),
                        owned,
                        o.sweep_floor,
                        slots.clone(),
                    )));
                }
            }
        }
        self.stats.pop_workers_started.add(tasks.len() as u64);
        for t in tasks {
            if let Err(e) = t.await {
                // A panicking handler: report it, the other workers went on.
                let e = BrokerError::Other(format!("a pop worker ended abnormally: {e}"));
                self.stats.error("worker", &e);
            }
        }
        Ok(())
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = counter::snapshot("queen_", &*self.stats);
        let s = self.setup.read();
        let gauges = Gauges {
            pop_workers_per_stream: self.options.workers_for(s.lanes) as u64,
            lease_seconds: self.options.lease_secs(),
            partitions_per_queue: s.lanes,
            dedup_window_supported: u64::from(s.dedup == DedupSupport::Configured),
        };
        m.extend(counter::snapshot("queen_", &gauges));
        m
    }

    async fn close(&self) -> Result<(), BrokerError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_version_1_0_0_carries_the_caveat_and_no_version_is_a_note() {
        let p = health_provenance("1.0.0");
        assert_eq!(p.version.as_deref(), Some("1.0.0"));
        let c = p.caveat.expect("a caveat on 1.0.0");
        assert!(c.contains("0.15.1") && c.contains("system_build"), "{c}");
        assert_eq!(health_provenance("0.16.0").caveat, None);
        let none = health_provenance("unknown");
        assert_eq!(none.version, None);
        assert_eq!(
            none.notes,
            vec!["version not reported: /health answered without a version"]
        );
    }

    /// The answer Queen gave a reset's delete in the ceiling campaign of 2026-12-05
    /// (abridged): a deadlock is tried again, any other refusal is not.
    #[test]
    fn only_a_deadlock_victim_is_deleted_again() {
        let seen = "ERROR:  deadlock detected\nDETAIL:  Process 20680 waits for ShareLock on transaction 958156; blocked by process 20678.\nCONTEXT:  while deleting tuple (0,82) in relation \"partitions\"";
        assert!(is_deadlock(seen));
        assert!(!is_deadlock("queue not found"));
        assert!(!is_deadlock(
            "ERROR:  insert or update on table \"partition_consumers\" violates foreign key constraint"
        ));
        // Five tries, backing off 0.25 s, 0.5 s, 0.75 s, 1 s between them: 2.5 s at
        // most before the cell's setup reports the refusal.
        let waited: Duration = (1..DELETE_ATTEMPTS).map(|a| DELETE_BACKOFF * a).sum();
        assert_eq!(waited, Duration::from_millis(2500));
    }

    #[test]
    fn bad_options_fail_at_construction() {
        let e = QueenBroker::new(QueenOptions {
            url: "ftp://example.invalid".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(e, BrokerError::Config { ref field, .. } if field == "queen.url"));
        // TLS is asked for by an https:// URL only.
        let e = QueenBroker::new(QueenOptions {
            tls: crate::tls::TlsOptions {
                enabled: true,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(e, BrokerError::Config { ref field, .. } if field == "queen.url"));
        // A token in two places is ambiguous.
        let e = QueenBroker::new(QueenOptions {
            token: Some("t".into()),
            token_env: "CROSSBENCH_SURELY_UNSET".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(matches!(e, BrokerError::Config { ref field, .. } if field == "queen.token"));
        assert!(QueenBroker::new(QueenOptions {
            url: "https://example.invalid".into(),
            ..Default::default()
        })
        .is_ok());
    }

    /// `broker_stats` keys as they were hand-listed before the snapshot was derived:
    /// the counters and the configuration always, one `queen_errors_<op>_<class>` per
    /// failure seen.
    #[test]
    fn snapshot_keys_are_unchanged() {
        let always = [
            "queen_ack_errors",
            "queen_ack_requests",
            "queen_ack_retries",
            "queen_acked",
            "queen_auto_ack_refused_lost",
            "queen_claim_slots",
            "queen_claim_waits",
            "queen_dedup_window_supported",
            "queen_empty_pops",
            "queen_lease_seconds",
            "queen_messages_popped",
            "queen_messages_pushed",
            "queen_partitions_claimed",
            "queen_partitions_per_queue",
            "queen_pop_workers_per_stream",
            "queen_pop_workers_started",
            "queen_pops",
            "queen_push_buffered",
            "queen_push_duplicates",
            "queen_push_requests",
            "queen_push_retries",
            "queen_redelivered",
            "queen_refused_messages",
            "queen_released_batches",
            "queen_skipped_in_flight",
            "queen_sweeps",
        ];
        let b = QueenBroker::new(QueenOptions::default()).unwrap();
        let keys = |b: &QueenBroker| b.counters().into_keys().collect::<Vec<_>>();
        assert_eq!(keys(&b), always);
        b.stats
            .error("push", &BrokerError::Timeout("no answer".into()));
        let mut want: Vec<&str> = always.to_vec();
        want.push("queen_errors_push_timeout");
        want.sort_unstable();
        assert_eq!(keys(&b), want);
        assert_eq!(b.counters()["queen_errors_push_timeout"], 1);
    }

    #[test]
    fn transaction_ids_are_unique_and_sequential() {
        let b = QueenBroker::new(QueenOptions::default()).unwrap();
        assert_eq!(b.next_tx(3), 0);
        assert_eq!(b.next_tx(1), 3);
    }

    #[tokio::test]
    async fn unreachable_server_is_a_clear_error() {
        let b = QueenBroker::new(QueenOptions {
            url: "http://127.0.0.1:1".into(),
            token: Some("hush-hush".into()),
            ..Default::default()
        })
        .unwrap();
        let t = Topology {
            topics: vec![],
            keys: 1,
            lanes: 1,
            durability: Durability::Default,
            dedup_window_sec: 0,
            reset: false,
            sharing: crate::broker::Sharing::ALONE,
        };
        let e = b.setup(&t).await.unwrap_err().to_string();
        assert!(e.contains("compose/queen/README.md"), "{e}");
        assert!(!e.contains("hush-hush"), "{e}");
    }
}
