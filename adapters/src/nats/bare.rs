//! NATS JetStream's bare loop (crate::bare): async-nats alone, on the stream and the
//! lane consumers the adapter's setup built (`CB_<topic>`, one durable pull consumer
//! `<group>_l<n>` per lane subject `cb.<topic>.l<n>.*`). Publish: every payload of a
//! key to the key's subject `cb.<topic>.l<lane>.<key>` at once, then every `PubAck`
//! awaited, as the adapter does. Consume: one pull stream per lane consumer
//! (`messages()` with the plan's batch as its batch size, the adapter's heartbeat and
//! expiry), every message acked as it comes.

use std::future::IntoFuture;
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::adapter::{key_token, token};
use super::{NatsBroker, NatsOptions};
use crate::bare::{BareClient, BareCounters, BarePlan};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::lanes::lane_of;
use crate::redact::redact_url_passwords;

#[derive(Debug)]
pub struct NatsBare {
    client: async_nats::Client,
    js: jetstream::Context,
    token: String,
    lanes: u64,
    consumers: Vec<consumer::PullConsumer>,
    batch: usize,
}

fn err(what: &str, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::Other(redact_url_passwords(&format!("{what}: {e}")))
}

impl NatsBare {
    pub async fn start(o: &NatsOptions, plan: &BarePlan) -> Result<NatsBare, BrokerError> {
        let (topic, group) = plan.stream()?;
        let adapter = NatsBroker::new(o.clone())?;
        adapter.setup(&plan.topology).await?;
        adapter.close().await?;
        let lanes = plan.topology.physical_lanes(o.max_lanes);
        let client = super::dial::open(o, "crossbench-bare", "scripts/provision/nats.sh").await?;
        let mut js = jetstream::new(client.clone());
        js.set_timeout(o.request_timeout);
        let tok = token(topic);
        let stream = js
            .get_stream(format!("CB_{tok}"))
            .await
            .map_err(|e| err("stream", e))?;
        let mut consumers = Vec::with_capacity(lanes as usize);
        for l in 0..lanes {
            let name = format!("{}_l{l}", token(group));
            consumers.push(
                stream
                    .get_consumer::<consumer::pull::Config>(&name)
                    .await
                    .map_err(|e| err(&name, e))?,
            );
        }
        Ok(NatsBare {
            client,
            js,
            token: tok,
            lanes,
            consumers,
            batch: plan.batch.max(1),
        })
    }

    async fn lane(&self, c: &consumer::PullConsumer, k: &BareCounters, stop: &CancellationToken) {
        while !stop.is_cancelled() {
            let messages = c
                .stream()
                .max_messages_per_batch(self.batch)
                .heartbeat(Duration::from_secs(5))
                .expires(Duration::from_secs(30))
                .messages()
                .await;
            let mut messages = match messages {
                Ok(m) => m,
                Err(_) => {
                    k.errors.inc();
                    nap(Duration::from_millis(50), stop).await;
                    continue;
                }
            };
            loop {
                let m = tokio::select! {
                    _ = stop.cancelled() => return,
                    m = messages.next() => m,
                };
                match m {
                    Some(Ok(m)) => {
                        k.consumed.inc();
                        match m.ack().await {
                            Ok(()) => k.acked.inc(),
                            Err(_) => k.errors.inc(),
                        }
                    }
                    Some(Err(_)) => k.errors.inc(),
                    None => break,
                }
            }
        }
    }
}

use crate::nap::nap;

#[async_trait]
impl BareClient for NatsBare {
    async fn publish(&self, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        let lane = lane_of(key, self.lanes);
        let subject = format!("cb.{}.l{lane}.{}", self.token, key_token(key));
        let mut acks = Vec::with_capacity(payloads.len());
        for p in payloads {
            let a = self
                .js
                .publish(subject.clone(), p.clone())
                .await
                .map_err(|e| err("publish", e))?;
            acks.push(a.into_future());
        }
        for r in futures::future::join_all(acks).await {
            r.map_err(|e| err("publish ack", e))?;
        }
        Ok(())
    }

    async fn consume(&self, k: &BareCounters, stop: CancellationToken) {
        futures::future::join_all(self.consumers.iter().map(|c| self.lane(c, k, &stop))).await;
    }

    async fn close(&self) {
        let _ = self.client.flush().await;
    }
}
