//! RabbitMQ's bare loop (crate::bare): lapin alone, on the exchange and queues the
//! adapter's setup built, in either idiom (`rabbitmq.idiom`). Publish: one connection
//! with `publish_channels` confirm-mode channels (a key always on the same one, as
//! the adapter picks it); a key's payloads are published back to back, persistent,
//! with the key as `message_id`, routed as the adapter routes them (`l<lane>` on the
//! lane-queues' direct exchange, the key itself on the hash idiom's fanout), then
//! every confirm is awaited. Consume: the adapter's number of consumer connections,
//! one channel and one consumer per queue, `basic.qos` at the adapter's prefetch;
//! each consumer takes what has arrived (up to the plan's batch) and acks it with one
//! multiple-ack.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection};
use tokio_util::sync::CancellationToken;

use super::adapter::Built;
use super::options::Idiom;
use super::{RabbitBroker, RabbitOptions};
use crate::bare::{BareClient, BareCounters, BarePlan};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::lanes::{fnv1a32, lane_of};

#[derive(Debug)]
pub struct RabbitBare {
    o: RabbitOptions,
    built: Built,
    publish: Connection,
    channels: Vec<Channel>,
    consumers: Vec<Connection>,
    batch: usize,
}

fn err(what: &str, e: impl std::fmt::Display) -> BrokerError {
    // lapin's errors never carry the URL's password.
    BrokerError::Connection(format!("{what}: {e}"))
}

/// A connection to node `node` (see `rabbitmq.nodes`), as the adapter dials it.
async fn connect(o: &RabbitOptions, node: usize, name: &str) -> Result<Connection, BrokerError> {
    super::dial::open(o, node, &format!("bare-{name}"))
        .await
        .map_err(|e| err("connect", e))
}

impl RabbitBare {
    pub async fn start(o: &RabbitOptions, plan: &BarePlan) -> Result<RabbitBare, BrokerError> {
        let (topic, group) = plan.stream()?;
        let adapter = RabbitBroker::new(o.clone())?;
        adapter.setup(&plan.topology).await?;
        let built = adapter
            .built(topic, group)
            .ok_or_else(|| BrokerError::Other("setup built no queues".into()))?;
        adapter.close().await?;
        let publish = connect(o, 0, "publish").await?;
        let mut channels = Vec::with_capacity(o.publish_channels);
        for _ in 0..o.publish_channels.max(1) {
            let ch = publish
                .create_channel()
                .await
                .map_err(|e| err("channel", e))?;
            ch.confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| err("confirm.select", e))?;
            channels.push(ch);
        }
        let mut consumers = Vec::with_capacity(built.consumer_connections);
        for i in 0..built.consumer_connections.max(1) {
            consumers.push(connect(o, i, &format!("consume-{i}")).await?);
        }
        Ok(RabbitBare {
            o: o.clone(),
            built,
            publish,
            channels,
            consumers,
            batch: plan.batch.max(1),
        })
    }

    async fn queue(
        &self,
        conn: &Connection,
        queue: &str,
        c: &BareCounters,
        stop: &CancellationToken,
    ) {
        let prefetch = if self.o.prefetch == 0 {
            self.batch.min(u16::MAX as usize) as u16
        } else {
            self.o.prefetch
        };
        let opened = async {
            let ch = conn.create_channel().await.map_err(|e| err("channel", e))?;
            ch.basic_qos(prefetch, BasicQosOptions::default())
                .await
                .map_err(|e| err("basic.qos", e))?;
            let consumer = ch
                .basic_consume(
                    ShortString::from(queue),
                    ShortString::from(""),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(|e| err("basic.consume", e))?;
            Ok::<_, BrokerError>((ch, consumer))
        }
        .await;
        let Ok((ch, mut consumer)) = opened else {
            c.errors.inc();
            return;
        };
        loop {
            let first = tokio::select! {
                _ = stop.cancelled() => break,
                d = consumer.next() => d,
            };
            let Some(Ok(first)) = first else {
                c.errors.inc();
                break;
            };
            let mut last = first.delivery_tag;
            let mut n = 1u64;
            while (n as usize) < self.batch {
                match consumer.next().now_or_never() {
                    Some(Some(Ok(d))) => {
                        last = d.delivery_tag;
                        n += 1;
                    }
                    _ => break,
                }
            }
            c.consumed.add(n);
            match ch.basic_ack(last, BasicAckOptions { multiple: true }).await {
                Ok(()) => c.acked.add(n),
                Err(_) => {
                    c.errors.inc();
                    break;
                }
            }
        }
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            ch.close(200, ShortString::from("bye")),
        )
        .await;
    }
}

#[async_trait]
impl BareClient for RabbitBare {
    async fn publish(&self, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        let routing = match self.built.idiom {
            Idiom::LaneQueues => format!("l{}", lane_of(key, self.built.queues_per_group)),
            Idiom::HashExchange => key.to_string(),
        };
        let ch = &self.channels[fnv1a32(key.as_bytes()) as usize % self.channels.len()];
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(ShortString::from(key));
        let exchange = ShortString::from(self.built.exchange.as_str());
        let rk = ShortString::from(routing);
        let mut confirms = Vec::with_capacity(payloads.len());
        for p in payloads {
            confirms.push(
                ch.basic_publish(
                    exchange.clone(),
                    rk.clone(),
                    // Mandatory, as the adapter publishes.
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    p,
                    props.clone(),
                )
                .await
                .map_err(|e| err("basic.publish", e))?,
            );
        }
        for c in confirms {
            match c.await.map_err(|e| err("confirm", e))? {
                Confirmation::Ack(None) => {}
                Confirmation::Ack(Some(_)) => {
                    return Err(BrokerError::Refused("publish returned unroutable".into()))
                }
                _ => return Err(BrokerError::Refused("publish not confirmed".into())),
            }
        }
        Ok(())
    }

    async fn consume(&self, c: &BareCounters, stop: CancellationToken) {
        let n = self.consumers.len();
        futures::future::join_all(
            self.built
                .queues
                .iter()
                .enumerate()
                .map(|(i, q)| self.queue(&self.consumers[i % n], q, c, &stop)),
        )
        .await;
    }

    async fn close(&self) {
        for conn in self.consumers.iter().chain([&self.publish]) {
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                conn.close(200, ShortString::from("bye")),
            )
            .await;
        }
    }
}
