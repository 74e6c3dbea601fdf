//! Kafka's bare loop (crate::bare): rdkafka alone, on the topic the adapter's setup
//! built (`lanes` partitions). Publish: the adapter's idempotent producer settings
//! (`acks=all`, `linger`, murmur2 partitioner); a key's records are enqueued in
//! order, then every delivery report is awaited. Consume: `members` plain
//! `StreamConsumer`s of one group (`cb.<topic>.<group>`, the adapter's consumer
//! settings but offsets stored as records are handed out, the way librdkafka's
//! examples consume), each receiving record by record; every `commit_interval` each
//! member commits its stored offsets in one synchronous call, which acks what it had
//! received by then.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use tokio_util::sync::CancellationToken;

use super::adapter::group_id;
use super::member::consumer_config;
use super::producer::{classify, config};
use super::{KafkaBroker, KafkaOptions};
use crate::bare::{BareClient, BareCounters, BarePlan};
use crate::broker::Broker;
use crate::error::BrokerError;

pub struct KafkaBare {
    o: KafkaOptions,
    producer: FutureProducer,
    topic: String,
    group: String,
}

impl std::fmt::Debug for KafkaBare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBare")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .finish()
    }
}

impl KafkaBare {
    pub async fn start(o: &KafkaOptions, plan: &BarePlan) -> Result<KafkaBare, BrokerError> {
        let (topic, group) = plan.stream()?;
        let adapter = KafkaBroker::new(o.clone())?;
        adapter.setup(&plan.topology).await?;
        adapter.close().await?;
        let producer: FutureProducer = config(o).create().map_err(|e| BrokerError::Config {
            field: "kafka".into(),
            message: format!("producer: {e}"),
        })?;
        Ok(KafkaBare {
            o: o.clone(),
            producer,
            topic: topic.to_string(),
            group: group_id(topic, group),
        })
    }

    async fn member(&self, i: usize, c: &BareCounters, stop: &CancellationToken) {
        let mut cfg = consumer_config(&self.o, &self.group, &format!("crossbench-bare-{i}"));
        cfg.set("enable.auto.offset.store", "true");
        let consumer: Arc<StreamConsumer> = match cfg.create() {
            Ok(k) => Arc::new(k),
            Err(_) => {
                c.errors.inc();
                return;
            }
        };
        if consumer.subscribe(&[&self.topic]).is_err() {
            c.errors.inc();
            return;
        }
        // Received by this member, and of those, covered by a commit.
        let mut received = 0u64;
        let mut committed = 0u64;
        let mut tick = tokio::time::interval(self.o.commit_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                m = consumer.recv() => match m {
                    Ok(_) => {
                        received += 1;
                        c.consumed.inc();
                    }
                    Err(_) => {
                        c.errors.inc();
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                _ = tick.tick() => {
                    let upto = received;
                    if upto > committed {
                        let k = consumer.clone();
                        let r = tokio::task::spawn_blocking(move || {
                            k.commit_consumer_state(CommitMode::Sync)
                        })
                        .await;
                        match r {
                            Ok(Ok(())) => {
                                c.acked.add(upto - committed);
                                committed = upto;
                            }
                            _ => c.errors.inc(),
                        }
                    }
                }
            }
        }
        let k = consumer.clone();
        let upto = received;
        let r = tokio::task::spawn_blocking(move || {
            let r = k.commit_consumer_state(CommitMode::Sync);
            k.unsubscribe();
            r
        })
        .await;
        match r {
            Ok(Ok(())) => c.acked.add(upto - committed),
            // Nothing left to commit is not a failure.
            Ok(Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset))) => {}
            _ => c.errors.inc(),
        }
    }
}

#[async_trait]
impl BareClient for KafkaBare {
    async fn publish(&self, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        let mut pending = Vec::with_capacity(payloads.len());
        for p in payloads {
            let mut record = FutureRecord::to(&self.topic).key(key).payload(p.as_ref());
            loop {
                match self.producer.send_result(record) {
                    Ok(f) => {
                        pending.push(f);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        record = r;
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    Err((e, _)) => return Err(classify("produce", &e)),
                }
            }
        }
        for f in pending {
            match f.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => return Err(classify("delivery", &e)),
                Err(_) => return Err(BrokerError::Other("producer dropped".into())),
            }
        }
        Ok(())
    }

    async fn consume(&self, c: &BareCounters, stop: CancellationToken) {
        futures::future::join_all((0..self.o.members.max(1)).map(|i| self.member(i, c, &stop)))
            .await;
    }

    async fn close(&self) {
        let p = self.producer.clone();
        let _ = tokio::task::spawn_blocking(move || p.flush(Duration::from_secs(10))).await;
    }
}
