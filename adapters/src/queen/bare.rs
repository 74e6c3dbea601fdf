//! Queen's bare loop (crate::bare): reqwest and serde_json alone, against the queue the
//! adapter's setup configured. What a careful programmer would write with an HTTP
//! client and Queen's API page (compose/queen/README.md), doing the requests the
//! adapter does and nothing else:
//! - publish: one `POST /api/v1/push` of every payload of a key, to the key's
//!   partition (the key itself, or `l<fnv1a32(key) mod lanes>` when keys outnumber the
//!   partitions, as the adapter maps them), each item with a transaction id of its own;
//!   every item's status checked;
//! - consume: the adapter's pop loops per stream (`queen.pop_workers`, 4 by default),
//!   each a wildcard long-poll pop (`batch`, `partitions`, `wait`, `timeout` as the
//!   adapter asks), then one `POST /api/v1/ack/batch` of every message popped,
//!   `completed`, with the pop's lease id and the consumer group; every ack's success
//!   counted. An early empty answer naps as the adapter's loop does (5 ms doubling to
//!   100 ms).
//!
//! No key-batches, in-flight partition set, redelivery memory, retries or per-error
//! statistics: those are the adapter's, and what the tax measures. Targeted pops
//! (one sweep per partition) have no bare loop: run the tax with `queen.mode=wildcard`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::client::encode;
use super::{PopMode, QueenBroker, QueenOptions};
use crate::bare::{BareClient, BareCounters, BarePlan};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::lanes::lane_key;
use crate::nap::nap;
use crate::redact::redact_url_passwords;

#[derive(Debug)]
pub struct QueenBare {
    http: reqwest::Client,
    base: String,
    queue: String,
    group: String,
    keys: u64,
    lanes: u64,
    workers: usize,
    pop_path: String,
    long_poll: Duration,
    timeout: Duration,
    tx_nonce: String,
    tx_seq: AtomicU64,
}

#[derive(Deserialize)]
struct Pushed {
    #[serde(default)]
    status: String,
}

#[derive(Deserialize)]
struct Popped {
    #[serde(default, rename = "leaseId")]
    lease_id: Option<String>,
    #[serde(default)]
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(rename = "transactionId")]
    transaction_id: String,
    #[serde(rename = "partitionId")]
    partition_id: String,
    #[serde(default, rename = "leaseId")]
    lease_id: Option<String>,
    /// Read as a consumer would (its bytes are looked at), not decoded.
    data: Box<RawValue>,
}

#[derive(Serialize)]
struct Ack<'a> {
    #[serde(rename = "consumerGroup")]
    consumer_group: &'a str,
    acknowledgments: Vec<AckItem<'a>>,
}

#[derive(Serialize)]
struct AckItem<'a> {
    #[serde(rename = "transactionId")]
    transaction_id: &'a str,
    #[serde(rename = "partitionId")]
    partition_id: &'a str,
    #[serde(rename = "leaseId")]
    lease_id: &'a str,
    status: &'static str,
    #[serde(rename = "consumerGroup")]
    consumer_group: &'a str,
}

#[derive(Deserialize)]
struct Acked {
    #[serde(default)]
    success: bool,
}

fn err(what: &str, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::Other(redact_url_passwords(&format!("{what}: {e}")))
}

impl QueenBare {
    /// The plan's queue, configured (and reset) by the adapter's setup; then an HTTP
    /// client of our own, built as the adapter builds its own.
    pub async fn start(o: &QueenOptions, plan: &BarePlan) -> Result<QueenBare, BrokerError> {
        if o.mode == PopMode::Targeted {
            return Err(BrokerError::Config {
                field: "queen.mode".into(),
                message: "the bare loop mirrors wildcard pops only; run the tax with --set queen.mode=wildcard".into(),
            });
        }
        let (topic, group) = plan.stream()?;
        let adapter = QueenBroker::new(o.clone())?;
        adapter.setup(&plan.topology).await?;
        adapter.close().await?;
        let http = super::client::http_client(o)?;
        let keys = plan.topology.keys.max(1);
        let lanes = plan.topology.lanes.clamp(1, keys);
        let mut pop_path = format!(
            "/api/v1/pop/queue/{}?batch={}&consumerGroup={}&autoAck={}",
            encode(topic),
            plan.batch.max(1),
            encode(group),
            o.mode == PopMode::AutoAck
        );
        if o.partitions_per_pop > 1 {
            pop_path.push_str(&format!("&partitions={}", o.partitions_per_pop));
        }
        if o.long_poll.is_zero() {
            pop_path.push_str("&wait=false");
        } else {
            pop_path.push_str(&format!("&wait=true&timeout={}", o.long_poll.as_millis()));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        Ok(QueenBare {
            http,
            base: o.url.trim_end_matches('/').to_string(),
            queue: topic.to_string(),
            group: group.to_string(),
            keys,
            lanes,
            workers: o.workers_for(lanes),
            pop_path,
            long_poll: o.long_poll,
            timeout: o.request_timeout,
            tx_nonce: format!("bare{now:x}{:x}", std::process::id()),
            tx_seq: AtomicU64::new(0),
        })
    }

    /// One pop (None when `stop` fired during it: a long poll is not waited out).
    async fn pop(&self, url: &str, k: &BareCounters, stop: &CancellationToken) -> Option<Popped> {
        let answer = async {
            let r = self
                .http
                .get(url)
                .timeout(self.timeout + self.long_poll + Duration::from_secs(1))
                .send()
                .await?;
            r.bytes().await
        };
        let bytes = tokio::select! {
            _ = stop.cancelled() => return None,
            b = answer => b,
        };
        match bytes.map(|b| serde_json::from_slice::<Popped>(&b)) {
            Ok(Ok(p)) => Some(p),
            _ => {
                k.errors.inc();
                Some(Popped {
                    lease_id: None,
                    messages: Vec::new(),
                })
            }
        }
    }

    /// One ack of everything popped, never cut short; the messages received.
    async fn ack(&self, popped: Popped, k: &BareCounters, auto_ack: bool) -> usize {
        let n = popped.messages.len();
        if n == 0 {
            return 0;
        }
        let bytes: usize = popped.messages.iter().map(|m| m.data.get().len()).sum();
        std::hint::black_box(bytes);
        k.consumed.add(n as u64);
        if auto_ack {
            k.acked.add(n as u64);
            return n;
        }
        let lease = popped.lease_id.as_deref().unwrap_or("");
        let ack = Ack {
            consumer_group: &self.group,
            acknowledgments: popped
                .messages
                .iter()
                .map(|m| AckItem {
                    transaction_id: &m.transaction_id,
                    partition_id: &m.partition_id,
                    lease_id: m
                        .lease_id
                        .as_deref()
                        .filter(|l| !l.is_empty())
                        .unwrap_or(lease),
                    status: "completed",
                    consumer_group: &self.group,
                })
                .collect(),
        };
        let answer = self
            .http
            .post(format!("{}/api/v1/ack/batch", self.base))
            .timeout(self.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&ack).unwrap_or_default())
            .send()
            .await;
        match answer {
            Ok(r) => match r
                .bytes()
                .await
                .map(|b| serde_json::from_slice::<Vec<Acked>>(&b))
            {
                Ok(Ok(v)) => {
                    let ok = v.iter().filter(|a| a.success).count() as u64;
                    k.acked.add(ok);
                    k.errors.add(n as u64 - ok.min(n as u64));
                }
                _ => k.errors.inc(),
            },
            Err(_) => k.errors.inc(),
        }
        n
    }

    async fn pop_loop(&self, k: &BareCounters, stop: &CancellationToken) {
        let url = format!("{}{}", self.base, self.pop_path);
        let auto_ack = self.pop_path.contains("autoAck=true");
        let mut empty = Duration::from_millis(5);
        while !stop.is_cancelled() {
            let t0 = Instant::now();
            let Some(popped) = self.pop(&url, k, stop).await else {
                return;
            };
            let n = self.ack(popped, k, auto_ack).await;
            if n > 0 {
                empty = Duration::from_millis(5);
            } else if t0.elapsed() < self.long_poll / 2 || self.long_poll.is_zero() {
                if nap(empty, stop).await {
                    return;
                }
                empty = (empty * 2).min(Duration::from_millis(100));
            }
        }
    }
}

#[async_trait]
impl BareClient for QueenBare {
    async fn publish(&self, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let partition = lane_key(key, self.lanes, self.keys);
        let first = self
            .tx_seq
            .fetch_add(payloads.len() as u64, Ordering::Relaxed);
        // The payloads are JSON documents already: written verbatim, as any client
        // holding serialised bodies would.
        let queue = serde_json::to_string(&self.queue).map_err(|e| err("push", e))?;
        let partition = serde_json::to_string(&partition).map_err(|e| err("push", e))?;
        let size: usize = payloads
            .iter()
            .map(|p| p.len() + 64 + queue.len() + partition.len())
            .sum();
        let mut body = Vec::with_capacity(size + 16);
        body.extend_from_slice(b"{\"items\":[");
        for (i, p) in payloads.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(b"{\"queue\":");
            body.extend_from_slice(queue.as_bytes());
            body.extend_from_slice(b",\"partition\":");
            body.extend_from_slice(partition.as_bytes());
            body.extend_from_slice(
                format!(
                    ",\"transactionId\":\"{}-{:x}\",\"payload\":",
                    self.tx_nonce,
                    first + i as u64
                )
                .as_bytes(),
            );
            body.extend_from_slice(p);
            body.push(b'}');
        }
        body.extend_from_slice(b"]}");
        let r = self
            .http
            .post(format!("{}/api/v1/push", self.base))
            .timeout(self.timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| err("push", e))?;
        let status = r.status();
        let body = r.bytes().await.map_err(|e| err("push", e))?;
        if !status.is_success() {
            return Err(err("push", format!("HTTP {status}")));
        }
        let answers: Vec<Pushed> = serde_json::from_slice(&body).map_err(|e| err("push", e))?;
        if answers.len() != payloads.len() {
            return Err(err(
                "push",
                format!("{} answers for {} items", answers.len(), payloads.len()),
            ));
        }
        match answers
            .iter()
            .find(|a| !matches!(a.status.as_str(), "queued" | "duplicate" | "buffered" | ""))
        {
            Some(a) => Err(err("push", format!("item {}", a.status))),
            None => Ok(()),
        }
    }

    async fn consume(&self, k: &BareCounters, stop: CancellationToken) {
        futures::future::join_all((0..self.workers).map(|_| self.pop_loop(k, &stop))).await;
    }

    async fn close(&self) {}
}
