//! Keyed publish: one idempotent producer (`acks=all`), the record key is the ordering
//! key and librdkafka's Java-compatible murmur2 partitioner places it (no hashing in
//! the adapter). A call's records are enqueued in order before any delivery report is
//! awaited; the idempotent producer keeps them in that order on the partition.

use std::time::Duration;

use bytes::Bytes;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

use super::options::KafkaOptions;
use super::stats::Stats;
use crate::error::BrokerError;

/// librdkafka's delivery timeout: an undeliverable record fails after this.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn config(o: &KafkaOptions) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &o.bootstrap_servers)
        .set("client.id", "crossbench-producer")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("partitioner", "murmur2_random")
        .set("linger.ms", o.linger.as_millis().to_string())
        .set("batch.num.messages", o.batch_messages.to_string())
        .set("batch.size", o.batch_bytes.to_string())
        .set("compression.type", "none")
        .set(
            "message.timeout.ms",
            DELIVERY_TIMEOUT.as_millis().to_string(),
        )
        .set("queue.buffering.max.messages", "1000000");
    super::security::apply(o, &mut c);
    c
}

pub(super) fn classify(what: &str, e: &KafkaError) -> BrokerError {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageTimedOut) | Some(RDKafkaErrorCode::RequestTimedOut) => {
            BrokerError::Timeout(format!("{what}: {e}"))
        }
        Some(RDKafkaErrorCode::UnknownTopicOrPartition) | Some(RDKafkaErrorCode::UnknownTopic) => {
            BrokerError::Refused(format!(
                "{what}: {e} (topics are created by setup; auto-create is off)"
            ))
        }
        Some(RDKafkaErrorCode::BrokerTransportFailure)
        | Some(RDKafkaErrorCode::AllBrokersDown)
        | Some(RDKafkaErrorCode::Resolve) => BrokerError::Connection(format!("{what}: {e}")),
        // The broker said no before appending: the write certainly did not land.
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::InvalidRequiredAcks
            | RDKafkaErrorCode::NotEnoughReplicas
            | RDKafkaErrorCode::PolicyViolation,
        ) => BrokerError::Refused(format!("{what}: {e}")),
        // Anything else (a lost request, a leader change mid-append, an error this list
        // does not know) leaves the write's fate unknown: indeterminate, not refused.
        _ => BrokerError::Other(format!("{what}: {e}")),
    }
}

/// Publish `payloads` under `key`, in order; returns when every record is acknowledged
/// by all in-sync replicas.
pub(super) async fn publish(
    producer: &FutureProducer,
    stats: &Stats,
    topic: &str,
    key: &str,
    payloads: &[Bytes],
) -> Result<(), BrokerError> {
    let mut pending = Vec::with_capacity(payloads.len());
    for p in payloads {
        let mut record = FutureRecord::to(topic).key(key).payload(p.as_ref());
        loop {
            match producer.send_result(record) {
                Ok(f) => {
                    pending.push(f);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    // The local queue is full: wait for deliveries to drain it. The
                    // same caller retries the same record, so order is kept.
                    stats.publish_queue_full_waits.inc();
                    record = r;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Err((e, _)) => {
                    stats.publish_errors.add(payloads.len() as u64);
                    return Err(classify(&format!("produce to {topic}"), &e));
                }
            }
        }
    }
    let mut first_err: Option<BrokerError> = None;
    let mut ok = 0u64;
    for f in pending {
        match f.await {
            Ok(Ok(_)) => ok += 1,
            Ok(Err((e, _))) => {
                first_err.get_or_insert_with(|| classify(&format!("delivery to {topic}"), &e));
            }
            Err(_) => {
                first_err.get_or_insert_with(|| {
                    BrokerError::Other(format!("delivery to {topic}: producer dropped"))
                });
            }
        }
    }
    stats.published.add(ok);
    match first_err {
        None => Ok(()),
        Some(e) => {
            stats.publish_errors.add(payloads.len() as u64 - ok);
            Err(e)
        }
    }
}
