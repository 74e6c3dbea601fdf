//! Kafka adapter (rdkafka over the bundled librdkafka), for Apache Kafka, Redpanda and
//! Kafka-protocol brokers such as tansu. Options are always compiled so scenario
//! files parse in every build; the adapter itself needs the `kafka` feature.
//!
//! One concept per file: [`options`] (scenario section), `topics` (admin: create,
//! delete, wait by metadata), `producer` (keyed idempotent publish), `member` (one
//! consumer-group member: rebalances, partition queues, recovery), `partition` (the
//! per-partition dispatch: ordered key-batches, pause/resume, replay), `commit` (the
//! member's coalesced offset commits), `holders` (which member of a group holds each
//! partition: overlaps a coordinator allows are counted), `quiesce` (before a reset
//! deletes topics, wait until the broker has finished with closed connections),
//! `provenance` (what the protocol says about the broker), `security` (TLS and SASL for
//! every client, and what a refused handshake or login says), `stats` (counters), `adapter` (the [`crate::Broker`] implementation).

#[cfg(feature = "kafka")]
mod durability;
pub mod options;
pub mod system;
pub use options::{Assignment, KafkaOptions};

#[cfg(feature = "kafka")]
mod adapter;
#[cfg(feature = "kafka")]
pub mod bare;
#[cfg(feature = "kafka")]
mod commit;
#[cfg(feature = "kafka")]
mod holders;
#[cfg(feature = "kafka")]
mod member;
#[cfg(feature = "kafka")]
mod partition;
#[cfg(feature = "kafka")]
mod producer;
#[cfg(feature = "kafka")]
mod provenance;
#[cfg(feature = "kafka")]
mod quiesce;
#[cfg(feature = "kafka")]
mod security;
#[cfg(feature = "kafka")]
mod stats;
#[cfg(feature = "kafka")]
mod topics;
#[cfg(feature = "kafka")]
pub use adapter::KafkaBroker;
