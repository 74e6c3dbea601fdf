//! Redis Streams' bare loop (crate::bare): the `redis` crate alone, on the lane
//! streams the adapter's setup built (`cb:<topic>:l<n>`, one consumer group).
//! Publish: one pipeline of `XADD … * k <key> p <payload>` per key's payloads on a
//! connection manager, as the adapter sends them. Consume: `readers` tasks, each with
//! its own multiplexed connection and its share of the lanes (`l ≡ r mod readers`):
//! `XREADGROUP GROUP g c<r> COUNT <batch> BLOCK <block> STREAMS <its lanes> > …`; the
//! entries it returns are acked with one `XACK` per lane in one pipeline with the next
//! read, ahead of it (as the adapter acks), and the last ones before it stops.

use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::streams::StreamReadReply;
use ::redis::{AsyncConnectionConfig, Client, FromRedisValue, Value};
use async_trait::async_trait;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::adapter::{classify, token};
use super::{RedisBroker, RedisOptions};
use crate::bare::{BareClient, BareCounters, BarePlan};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::lanes::lane_of;

#[derive(Debug)]
pub struct RedisBare {
    o: RedisOptions,
    client: Client,
    manager: ConnectionManager,
    streams: Vec<String>,
    group: String,
    batch: usize,
}

impl RedisBare {
    pub async fn start(o: &RedisOptions, plan: &BarePlan) -> Result<RedisBare, BrokerError> {
        let (topic, group) = plan.stream()?;
        let adapter = RedisBroker::new(o.clone())?;
        adapter.setup(&plan.topology).await?;
        adapter.close().await?;
        let lanes = plan.topology.physical_lanes(o.max_lanes);
        let client = super::dial::client(o)?;
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(o.response_timeout))
            .set_number_of_retries(3);
        let manager = client
            .get_connection_manager_with_config(cfg)
            .await
            .map_err(classify)?;
        let tok = token(topic);
        Ok(RedisBare {
            streams: (0..lanes).map(|l| format!("cb:{tok}:l{l}")).collect(),
            group: group.to_string(),
            batch: plan.batch.max(1),
            o: o.clone(),
            client,
            manager,
        })
    }

    async fn reader(&self, r: usize, readers: usize, c: &BareCounters, stop: &CancellationToken) {
        let consumer = format!("c{r}");
        let mine: Vec<&String> = self
            .streams
            .iter()
            .enumerate()
            .filter(|(l, _)| l % readers == r)
            .map(|(_, s)| s)
            .collect();
        let cfg = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(self.o.block + self.o.response_timeout));
        let mut conn = loop {
            match self
                .client
                .get_multiplexed_async_connection_with_config(&cfg)
                .await
            {
                Ok(conn) => break conn,
                Err(_) => {
                    c.errors.inc();
                    if nap(Duration::from_millis(50), stop).await {
                        return;
                    }
                }
            }
        };
        let block_ms = (self.o.block.as_millis() as u64).max(1);
        // The last read's entries, acked ahead of the next read.
        let mut unacked: Vec<(String, Vec<String>)> = Vec::new();
        while !stop.is_cancelled() {
            let mut pipe = ::redis::pipe();
            pipe.ignore_errors();
            for (stream, ids) in &unacked {
                pipe.cmd("XACK").arg(stream).arg(&self.group).arg(ids);
            }
            let cmd = pipe
                .cmd("XREADGROUP")
                .arg("GROUP")
                .arg(&self.group)
                .arg(&consumer)
                .arg("COUNT")
                .arg(self.batch)
                .arg("BLOCK")
                .arg(block_ms)
                .arg("STREAMS");
            for s in &mine {
                cmd.arg(s.as_str());
            }
            for _ in &mine {
                cmd.arg(">");
            }
            let replies = tokio::select! {
                _ = stop.cancelled() => break,
                r = pipe.query_async::<Vec<Value>>(&mut conn) => r,
            };
            let Ok(replies) = replies else {
                c.errors.inc();
                nap(Duration::from_millis(50), stop).await;
                continue;
            };
            let mut replies = replies.into_iter();
            for (_, ids) in unacked.drain(..) {
                match replies.next() {
                    Some(Value::ServerError(_)) | None => c.errors.inc(),
                    Some(_) => c.acked.add(ids.len() as u64),
                }
            }
            match replies
                .next()
                .map(Option::<StreamReadReply>::from_redis_value)
            {
                Some(Ok(Some(reply))) => {
                    for k in reply.keys.into_iter().filter(|k| !k.ids.is_empty()) {
                        c.consumed.add(k.ids.len() as u64);
                        unacked.push((k.key, k.ids.into_iter().map(|e| e.id).collect()));
                    }
                }
                Some(Ok(None)) => {}
                _ => c.errors.inc(),
            }
        }
        // What the last read returned: acked before leaving.
        if !unacked.is_empty() {
            let mut pipe = ::redis::pipe();
            for (stream, ids) in &unacked {
                pipe.cmd("XACK").arg(stream).arg(&self.group).arg(ids);
            }
            match pipe.query_async::<Vec<u64>>(&mut conn).await {
                Ok(_) => c
                    .acked
                    .add(unacked.iter().map(|(_, ids)| ids.len() as u64).sum()),
                Err(_) => c.errors.inc(),
            }
        }
    }
}

use crate::nap::nap;

#[async_trait]
impl BareClient for RedisBare {
    async fn publish(&self, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        let lane = lane_of(key, self.streams.len() as u64) as usize;
        let stream = &self.streams[lane];
        let mut pipe = ::redis::pipe();
        for p in payloads {
            pipe.cmd("XADD")
                .arg(stream)
                .arg("*")
                .arg("k")
                .arg(key)
                .arg("p")
                .arg(p.as_ref());
        }
        let mut m = self.manager.clone();
        pipe.query_async::<Vec<String>>(&mut m)
            .await
            .map(|_| ())
            .map_err(classify)
    }

    async fn consume(&self, c: &BareCounters, stop: CancellationToken) {
        let readers = self.o.readers.min(self.streams.len()).max(1);
        futures::future::join_all((0..readers).map(|r| self.reader(r, readers, c, &stop))).await;
    }

    async fn close(&self) {}
}
