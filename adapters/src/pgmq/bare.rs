//! pgmq's bare loop (crate::bare): sqlx and the pgmq functions the adapter calls,
//! nothing else. Publish: one `send_batch` of the key's payloads with the key's
//! group header. Consume: `readers` loops, each `read_grouped_head` (or `_rr`) of up
//! to `read_qty` rows (the plan's batch by default), then one `delete` (or
//! `archive`) of the ids read, then the next read; an empty read sleeps with the
//! adapter's backoff. The pool is built as the adapter builds its own (same size, no
//! ping per acquire).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::adapter::{ack_sql, read_sql, GROUP_HEADER};
use super::options::redact_dsn;
use super::{PgmqBroker, PgmqOptions};
use crate::bare::{BareClient, BareCounters, BarePlan};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::lanes::lane_key;

const SEND_SQL: &str = "SELECT count(*) FROM pgmq.send_batch($1::text, $2::text[]::jsonb[], array_fill($3::jsonb, ARRAY[$4::int]))";

/// A row as the adapter reads it: msg_id, read_ct, the body, the group header.
type Row = (i64, i32, String, Option<String>);

#[derive(Debug)]
pub struct PgmqBare {
    o: PgmqOptions,
    pool: PgPool,
    queue: String,
    keys: u64,
    lanes: u64,
    qty: i32,
}

impl PgmqBare {
    /// The plan's queue, built by the adapter's setup; then a pool of our own.
    pub async fn start(o: &PgmqOptions, plan: &BarePlan) -> Result<PgmqBare, BrokerError> {
        let (topic, group) = plan.stream()?;
        let adapter = PgmqBroker::new(o.clone())?;
        adapter.setup(&plan.topology).await?;
        adapter.close().await?;
        let opts = super::adapter::connect_options(o, "crossbench-bare")?;
        let size = if o.pool_size > 0 {
            o.pool_size
        } else {
            (o.readers as u32 + 16).min(90)
        };
        let pool = super::adapter::lazy_pool(size, opts);
        let keys = plan.topology.keys.max(1);
        Ok(PgmqBare {
            queue: super::adapter::queue_name(topic, group),
            qty: if o.read_qty > 0 {
                o.read_qty
            } else {
                plan.batch.max(1)
            }
            .min(i32::MAX as usize) as i32,
            lanes: plan.topology.lanes.clamp(1, keys),
            keys,
            o: o.clone(),
            pool,
        })
    }

    async fn reader(&self, c: &BareCounters, stop: &CancellationToken) {
        let mut backoff = self.o.empty_backoff;
        while !stop.is_cancelled() {
            let rows: Result<Vec<Row>, _> = sqlx::query_as(read_sql(self.o.read_fn))
                .bind(&self.queue)
                .bind(self.o.vt_secs())
                .bind(self.qty)
                .fetch_all(&self.pool)
                .await;
            let rows = match rows {
                Ok(r) => r,
                Err(_) => {
                    c.errors.inc();
                    nap(Duration::from_millis(50), stop).await;
                    continue;
                }
            };
            if rows.is_empty() {
                nap(backoff, stop).await;
                backoff = (backoff * 2).min(self.o.empty_backoff_max);
                continue;
            }
            backoff = self.o.empty_backoff;
            c.consumed.add(rows.len() as u64);
            let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
            loop {
                let r: Result<i64, _> = sqlx::query_scalar(ack_sql(self.o.ack))
                    .bind(&self.queue)
                    .bind(&ids)
                    .fetch_one(&self.pool)
                    .await;
                match r {
                    Ok(_) => {
                        c.acked.add(ids.len() as u64);
                        break;
                    }
                    Err(_) => {
                        c.errors.inc();
                        if nap(Duration::from_millis(50), stop).await {
                            break;
                        }
                    }
                }
            }
        }
    }
}

use crate::nap::nap;

#[async_trait]
impl BareClient for PgmqBare {
    async fn publish(&self, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        let header =
            serde_json::json!({ GROUP_HEADER: lane_key(key, self.lanes, self.keys) }).to_string();
        let bodies: Vec<&str> = payloads
            .iter()
            .map(|p| std::str::from_utf8(p).unwrap_or("{}"))
            .collect();
        sqlx::query_scalar::<_, i64>(SEND_SQL)
            .bind(&self.queue)
            .bind(bodies)
            .bind(header)
            .bind(payloads.len() as i32)
            .fetch_one(&self.pool)
            .await
            .map(|_| ())
            .map_err(|e| BrokerError::Other(redact_dsn(&e.to_string())))
    }

    async fn consume(&self, c: &BareCounters, stop: CancellationToken) {
        futures::future::join_all((0..self.o.readers).map(|_| self.reader(c, &stop))).await;
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}
