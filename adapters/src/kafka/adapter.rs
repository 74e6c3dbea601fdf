//! The Kafka adapter: the [`Broker`] implementation that ties topics, producer and
//! consumer-group members together.
//!
//! Layout: one topic per logical topic (the name as given, prefix included) with
//! `lanes` partitions, replication `replication_factor`, `retention.ms`; the `fsync`
//! tier adds `flush.messages=1` and `flush.ms=0`. One consumer group per stream,
//! `cb.<topic>.<group>`, with `members` members (separate clients). One producer for
//! every publish.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::RwLock;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, Producer as _};
use rdkafka::ClientConfig;
use serde::Serialize;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::holders::Holders;
use super::member::{self, MemberSpec};
use super::options::KafkaOptions;
use super::producer;
use super::stats::{dir_bytes, Stats};
use super::topics::Admin;
use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, DeliveryGuarantee, Description, Durability, FanOut,
    Topology,
};
use crate::counter;
use crate::error::BrokerError;

/// What setup built.
#[derive(Debug, Clone)]
struct Layout {
    partitions: i32,
    topics: HashMap<String, Vec<String>>,
    durability: Durability,
}

/// What the snapshot adds to the counters: the configuration, what setup built
/// (absent before setup) and what is measured when asked.
#[derive(Serialize)]
struct Gauges {
    members_per_group: u64,
    partitions_per_topic: Option<u64>,
    fsync_tier: Option<u64>,
    producer_in_flight: u64,
    /// The broker's data directory now (absent when `log_dir` is not set).
    log_dir_bytes_end: Option<u64>,
}

/// The Kafka broker adapter.
pub struct KafkaBroker {
    opts: KafkaOptions,
    stats: Arc<Stats>,
    /// Replaced by a fresh one when a reset deletes topics: an idempotent producer
    /// keeps per-partition sequence numbers, and a recreated topic's partitions expect
    /// a producer that starts from 0 (tansu answers OutOfOrderSequenceNumber).
    producer: RwLock<FutureProducer>,
    layout: RwLock<Option<Layout>>,
}

impl std::fmt::Debug for KafkaBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBroker")
            .field("bootstrap_servers", &self.opts.bootstrap_servers)
            .finish()
    }
}

/// The consumer group of one stream.
pub fn group_id(topic: &str, group: &str) -> String {
    format!("cb.{topic}.{group}")
}

impl KafkaBroker {
    /// Validate the options and create the producer (librdkafka connects lazily).
    pub fn new(options: KafkaOptions) -> Result<Self, BrokerError> {
        crate::options::Section::validate(&options)?;
        let producer = Self::new_producer(&options)?;
        Ok(KafkaBroker {
            opts: options,
            stats: Arc::new(Stats::default()),
            producer: RwLock::new(producer),
            layout: RwLock::new(None),
        })
    }

    fn new_producer(options: &KafkaOptions) -> Result<FutureProducer, BrokerError> {
        producer::config(options)
            .create()
            .map_err(|e| BrokerError::Config {
                field: "kafka".into(),
                message: format!("producer configuration refused by librdkafka: {e}"),
            })
    }

    /// The producer, for one call.
    fn producer(&self) -> FutureProducer {
        self.producer.read().clone()
    }

    fn admin(&self) -> Result<Admin, BrokerError> {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.opts.bootstrap_servers)
            .set("client.id", "crossbench-admin")
            .set("allow.auto.create.topics", "false")
            .set("log_level", "3");
        super::security::apply(&self.opts, &mut c);
        let client: AdminClient<DefaultClientContext> =
            c.create().map_err(|e| BrokerError::Config {
                field: "kafka.bootstrap_servers".into(),
                message: format!("admin client: {e}"),
            })?;
        Ok(Admin::new(client, self.opts.setup_timeout))
    }

    fn layout(&self) -> Result<Layout, BrokerError> {
        self.layout
            .read()
            .clone()
            .ok_or_else(|| BrokerError::Other("kafka: setup has not run".into()))
    }

    fn topic_configs(&self, durability: Durability) -> Vec<(&'static str, String)> {
        let mut c = vec![("retention.ms", self.opts.retention.as_millis().to_string())];
        if durability == Durability::Fsync {
            for (k, v) in super::durability::FSYNC_CONFIGS {
                c.push((k, v.into()));
            }
        }
        c
    }

    async fn do_setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        if topology.durability.keeps_nothing() {
            return Err(BrokerError::Config {
                field: "durability".into(),
                message: "the kafka adapter provides default or fsync (flush.messages=1, flush.ms=0), not memory".into(),
            });
        }
        let partitions = i32::try_from(topology.lanes.max(1)).map_err(|_| BrokerError::Config {
            field: "lanes".into(),
            message: format!(
                "{} partitions per topic exceeds Kafka's limit of {}",
                topology.lanes,
                i32::MAX
            ),
        })?;
        if !self.opts.log_dir.is_empty() {
            let dir = std::path::PathBuf::from(&self.opts.log_dir);
            let b = tokio::task::spawn_blocking(move || dir_bytes(&dir))
                .await
                .unwrap_or(0);
            self.stats.log_dir_bytes_at_setup.set(b);
        }
        let admin = self.admin()?;
        let names: Vec<String> = topology.topics.iter().map(|t| t.name.clone()).collect();
        let mut notes = Vec::new();
        // Fail fast with a clear message when nothing answers.
        // A certificate or a login refused ends setup here, naming the field.
        super::security::probe(&self.opts).await?;
        let (existing, advertised) = admin.cluster().await.map_err(|e| {
            BrokerError::Connection(format!(
                "{e}; is a Kafka-protocol broker listening on {}? (scripts/provision/tansu.sh)",
                self.opts.bootstrap_servers
            ))
        })?;
        let recreated = topology.reset && names.iter().any(|n| existing.contains_key(n));
        if recreated {
            // Nothing may reach the old partitions once they are deleted: what the
            // producer still holds is sent to them now, not after, then the wait until
            // the broker has finished every request of the connections closed to it (the
            // last cell's consumers and producer): tansu 0.6.0 dies on a request that
            // reaches a deleted partition (`quiesce`).
            let p = self.producer();
            let unsent = tokio::task::spawn_blocking(move || {
                let _ = p.flush(std::time::Duration::from_secs(10));
                p.in_flight_count()
            })
            .await
            .unwrap_or(0);
            if unsent > 0 {
                notes.push(format!(
                    "before deleting the topics: the producer still held {unsent} message(s) after a 10 s flush; given up"
                ));
            }
            let mut endpoints: Vec<String> = self
                .opts
                .bootstrap_servers
                .split(',')
                .map(str::to_string)
                .collect();
            endpoints.extend(advertised.iter().map(|(_, a)| a.clone()));
            let brokers = super::quiesce::addresses(&endpoints);
            let quiet = super::quiesce::wait(&brokers, self.opts.setup_timeout).await;
            notes.push(quiet.note(brokers.len()));
            let n = admin.delete(&names).await?;
            self.stats.topics_deleted.add(n);
        }
        let configs = self.topic_configs(topology.durability);
        let created = admin
            .create(&names, partitions, self.opts.replication_factor, &configs)
            .await?;
        if recreated {
            // A producer made before the topics were recreated may know their old
            // partition count (librdkafka fetches it early) and publish to partitions
            // that no longer exist: tansu 0.6.0 died on a Produce to partition 60 of a
            // topic recreated with 20 (compose/kafka/README.md). Its sequence numbers
            // belong to the old partitions too. The producer made now knows only the
            // new topics; the old one is dropped (librdkafka purges what it still held).
            let fresh = Self::new_producer(&self.opts)?;
            let old = std::mem::replace(&mut *self.producer.write(), fresh);
            let _ = tokio::task::spawn_blocking(move || drop(old)).await;
        }
        self.stats.topics_created.add(created);
        notes.push(super::durability::tier_note(&admin, &names, topology.durability).await);
        let provenance = super::provenance::read(&admin, &advertised, names.first()).await;
        let topics: HashMap<String, Vec<String>> = topology
            .topics
            .iter()
            .map(|t| (t.name.clone(), t.groups.clone()))
            .collect();
        *self.layout.write() = Some(Layout {
            partitions,
            topics,
            durability: topology.durability,
        });
        let streams = topology.stream_count() as u64;
        let members = self.opts.members as u64;
        notes.push(format!(
            "{} topics x {partitions} partitions (lanes = partitions per topic; keys placed by librdkafka's murmur2_random partitioner, Java-compatible); {} keys",
            names.len(),
            topology.keys
        ));
        let buffer = match self.opts.partition_buffer {
            0 => "4 x batch".to_string(),
            n => n.to_string(),
        };
        notes.push(format!(
            "consume: {members} members per stream ({}, subscribed together), per-partition dispatch: one queue and task per assigned partition, sets of up to batch records grouped by key, the partition paused at {buffer} buffered records and resumed at half, processed offsets of all advanced partitions committed in one synchronous call every {:?} (and on revocation / shutdown), acked when that commit succeeds, a refused key-batch replayed by seek",
            self.opts.assignment.name(),
            self.opts.commit_interval
        ));
        notes.push(format!(
            "producer: idempotent, acks=all, linger {:?}, batch.num.messages {}, batch.size {}",
            self.opts.linger, self.opts.batch_messages, self.opts.batch_bytes
        ));
        if (partitions as u64) < topology.keys {
            notes.push(format!(
                "{} keys share {partitions} partitions: a slow key holds back the other keys of its partition (head-of-line)",
                topology.keys
            ));
        }
        if topology.dedup_window_sec > 0 {
            notes.push(format!(
                "dedup window {} s requested: Kafka has no broker-side dedup window (the idempotent producer only removes its own retries); not honoured",
                topology.dedup_window_sec
            ));
        }
        Ok(Description {
            system: "kafka".into(),
            variant: "partition-dispatch".into(),
            durability: topology.durability,
            fan_out: FanOut::Native,
            delivery: DeliveryGuarantee::AtLeastOnce,
            ordered_lanes: partitions as u64 * names.len() as u64,
            physical_queues: names.len() as u64,
            consumer_members: members * streams,
            connections: members * streams + 2,
            publishes_per_ingress_event: topology.native_publishes_per_ingress_event(),
            semantics_built_in_app: vec![
                "per-key batching inside a partition (records grouped by key in the client)".into(),
                "per-partition dispatch with pause/resume back-pressure (librdkafka gives the queues, the adapter the scheduling)".into(),
                "partial acknowledgement: commit below the first refused record, seek back, skip the accepted records on replay".into(),
                "revocation waits for the partition's set in progress and commits its processed offset, so the next owner starts after that commit".into(),
                "a partition assigned to one member while another member of its group still holds it is counted (kafka_assignment_overlaps): a coordinator that answers each JoinGroup at once (tansu 0.6) hands a partition to two members, and records the first handled may be handled again".into(),
                "member recovery (a failed consumer instance is rebuilt)".into(),
            ],
            notes,
            lease_ms: None,
            provenance,
        })
    }
}

#[async_trait]
impl Broker for KafkaBroker {
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        let r = self.do_setup(topology).await;
        if let Err(e) = &r {
            self.stats.error_class(e.class().name());
        }
        r
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if payloads.is_empty() {
            return Ok(());
        }
        {
            let l = self.layout.read();
            match &*l {
                Some(l) if l.topics.contains_key(topic) => {}
                Some(_) => return Err(BrokerError::UnknownTopic(topic.to_string())),
                None => return Err(BrokerError::Other("kafka: setup has not run".into())),
            }
        }
        let r = producer::publish(&self.producer(), &self.stats, topic, key, payloads).await;
        if let Err(e) = &r {
            self.stats.error_class(e.class().name());
        }
        r
    }

    async fn consume(
        &self,
        topic: &str,
        group: &str,
        options: ConsumeOptions,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
    ) -> Result<(), BrokerError> {
        let layout = self.layout()?;
        let groups = layout
            .topics
            .get(topic)
            .ok_or_else(|| BrokerError::UnknownTopic(topic.to_string()))?;
        if !groups.iter().any(|g| g == group) {
            return Err(BrokerError::Other(format!(
                "unknown group {group:?} on {topic:?}"
            )));
        }
        let n = self.opts.members;
        let start = Arc::new(tokio::sync::Barrier::new(n));
        let holders = Arc::new(Holders::default());
        let topic: Arc<str> = Arc::from(topic);
        let mut tasks = JoinSet::new();
        for index in 0..n {
            let spec = MemberSpec {
                opts: self.opts.clone(),
                topic: topic.clone(),
                group_id: group_id(&topic, group),
                index,
                handler: handler.clone(),
                counters: options.counters.clone(),
                stats: self.stats.clone(),
                batch: options.batch,
                start: start.clone(),
                holders: holders.clone(),
            };
            tasks.spawn(member::run(spec, stop.clone()));
        }
        while let Some(r) = tasks.join_next().await {
            if let Err(e) = r {
                return Err(BrokerError::Other(format!("kafka member panicked: {e}")));
            }
        }
        Ok(())
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = counter::snapshot("kafka_", &*self.stats);
        let layout = self.layout.read().clone();
        let gauges = Gauges {
            members_per_group: self.opts.members as u64,
            partitions_per_topic: layout.as_ref().map(|l| l.partitions as u64),
            fsync_tier: layout
                .as_ref()
                .map(|l| u64::from(l.durability == Durability::Fsync)),
            producer_in_flight: self.producer().in_flight_count().max(0) as u64,
            log_dir_bytes_end: (!self.opts.log_dir.is_empty())
                .then(|| dir_bytes(std::path::Path::new(&self.opts.log_dir))),
        };
        m.extend(counter::snapshot("kafka_", &gauges));
        m
    }

    async fn close(&self) -> Result<(), BrokerError> {
        let p = self.producer();
        let _ =
            tokio::task::spawn_blocking(move || p.flush(std::time::Duration::from_secs(10))).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `broker_stats` keys as they were hand-listed before the snapshot was derived:
    /// the counters and the configuration always, the layout's once setup ran, the data
    /// directory's size when `log_dir` is set, one `kafka_errors_<class>` per class seen.
    #[test]
    fn snapshot_keys_are_unchanged() {
        let always = [
            "kafka_acked",
            "kafka_assignment_overlaps",
            "kafka_client_errors",
            "kafka_commit_request_errors",
            "kafka_committed_partitions",
            "kafka_fetch_errors",
            "kafka_key_batches",
            "kafka_log_dir_bytes_at_setup",
            "kafka_member_restarts",
            "kafka_member_starts",
            "kafka_members_per_group",
            "kafka_offset_commit_errors",
            "kafka_offset_commits",
            "kafka_partition_sets",
            "kafka_partitions_assigned",
            "kafka_partitions_revoked",
            "kafka_pauses",
            "kafka_producer_in_flight",
            "kafka_publish_errors",
            "kafka_publish_queue_full_waits",
            "kafka_published",
            "kafka_rebalances",
            "kafka_records_fetched",
            "kafka_redelivered",
            "kafka_refused",
            "kafka_replay_seeks",
            "kafka_replay_skipped",
            "kafka_resumes",
            "kafka_revoke_wait_timeouts",
            "kafka_revoke_waits",
            "kafka_stray_records",
            "kafka_topics_created",
            "kafka_topics_deleted",
            "kafka_unkeyed_records",
        ];
        let keys = |b: &KafkaBroker| b.counters().into_keys().collect::<Vec<_>>();
        // librdkafka connects lazily: nothing needs to listen on the address.
        let b = KafkaBroker::new(KafkaOptions {
            log_dir: String::new(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(keys(&b), always);
        *b.layout.write() = Some(Layout {
            partitions: 8,
            topics: HashMap::new(),
            durability: Durability::Fsync,
        });
        b.stats.error_class("seek");
        let mut want: Vec<&str> = always.to_vec();
        want.extend([
            "kafka_partitions_per_topic",
            "kafka_fsync_tier",
            "kafka_errors_seek",
        ]);
        want.sort_unstable();
        assert_eq!(keys(&b), want);
        assert_eq!(b.counters()["kafka_fsync_tier"], 1);
        assert_eq!(b.counters()["kafka_partitions_per_topic"], 8);

        let b = KafkaBroker::new(KafkaOptions {
            log_dir: "/nonexistent/crossbench".into(),
            ..Default::default()
        })
        .unwrap();
        let mut want: Vec<&str> = always.to_vec();
        want.push("kafka_log_dir_bytes_end");
        want.sort_unstable();
        assert_eq!(keys(&b), want);
        assert_eq!(b.counters()["kafka_log_dir_bytes_end"], 0);
    }
}
