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
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::member::{self, MemberSpec};
use super::options::KafkaOptions;
use super::producer;
use super::stats::{add, dir_bytes, Stats};
use super::topics::Admin;
use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, DeliveryGuarantee, Description, Durability, FanOut,
    Topology,
};
use crate::error::BrokerError;

/// What setup built.
#[derive(Debug, Clone)]
struct Layout {
    partitions: i32,
    topics: HashMap<String, Vec<String>>,
    durability: Durability,
}

/// The Kafka broker adapter.
pub struct KafkaBroker {
    opts: KafkaOptions,
    stats: Arc<Stats>,
    producer: FutureProducer,
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
        let producer: FutureProducer =
            producer::config(&options)
                .create()
                .map_err(|e| BrokerError::Config {
                    field: "kafka".into(),
                    message: format!("producer configuration refused by librdkafka: {e}"),
                })?;
        Ok(KafkaBroker {
            opts: options,
            stats: Arc::new(Stats::default()),
            producer,
            layout: RwLock::new(None),
        })
    }

    fn admin(&self) -> Result<Admin, BrokerError> {
        let client: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.opts.bootstrap_servers)
            .set("client.id", "crossbench-admin")
            .set("allow.auto.create.topics", "false")
            .set("log_level", "3")
            .create()
            .map_err(|e| BrokerError::Config {
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
        if topology.durability == Durability::Memory {
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
            self.stats
                .log_dir_bytes_at_setup
                .store(b, std::sync::atomic::Ordering::Relaxed);
        }
        let admin = self.admin()?;
        let names: Vec<String> = topology.topics.iter().map(|t| t.name.clone()).collect();
        let mut notes = Vec::new();
        // Fail fast with a clear message when nothing answers.
        admin.topics().await.map_err(|e| {
            BrokerError::Connection(format!(
                "{e}; is a Kafka-protocol broker listening on {}? (scripts/provision/tansu.sh)",
                self.opts.bootstrap_servers
            ))
        })?;
        if topology.reset {
            let n = admin.delete(&names).await?;
            add(&self.stats.topics_deleted, n);
        }
        let configs = self.topic_configs(topology.durability);
        let created = admin
            .create(&names, partitions, self.opts.replication_factor, &configs)
            .await?;
        add(&self.stats.topics_created, created);
        notes.push(super::durability::tier_note(&admin, &names, topology.durability).await);
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
                "member recovery (a failed consumer instance is rebuilt)".into(),
            ],
            notes,
            lease_ms: None,
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
        let r = producer::publish(&self.producer, &self.stats, topic, key, payloads).await;
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
        let mut m = self.stats.snapshot();
        m.insert("kafka_members_per_group".into(), self.opts.members as u64);
        if let Some(l) = &*self.layout.read() {
            m.insert("kafka_partitions_per_topic".into(), l.partitions as u64);
            m.insert(
                "kafka_fsync_tier".into(),
                u64::from(l.durability == Durability::Fsync),
            );
        }
        m.insert(
            "kafka_producer_in_flight".into(),
            self.producer.in_flight_count().max(0) as u64,
        );
        if !self.opts.log_dir.is_empty() {
            m.insert(
                "kafka_log_dir_bytes_end".into(),
                dir_bytes(std::path::Path::new(&self.opts.log_dir)),
            );
        }
        m
    }

    async fn close(&self) -> Result<(), BrokerError> {
        let p = self.producer.clone();
        let _ =
            tokio::task::spawn_blocking(move || p.flush(std::time::Duration::from_secs(10))).await;
        Ok(())
    }
}
