//! pgmq's bare loop (crate::bare): sqlx and the pgmq functions the adapter calls,
//! nothing else. Publish: one `send_batch` of the key's payloads with the key's
//! group header. Consume, acknowledged the way the adapter acknowledges:
//! - `readers` loops, each `read_grouped_head` (or `_rr`) of up to `read_qty` rows
//!   (the plan's batch by default), as many as the stream's capacity allows (read and
//!   not yet deleted: twice the plan's lanes, at least one read's worth, as the
//!   adapter sizes it); an empty read sleeps with the adapter's backoff;
//! - the ids read go to one acker, which takes every completion waiting and deletes
//!   (or archives) them in one call, then returns their capacity. A reader does not
//!   wait for its delete before reading again.
//!
//! Until 2026-12-06 each reader deleted its own read before the next one, one
//! `delete` per read where the adapter's acker coalesces several: a plainer loop,
//! but not the adapter's acknowledgement mode, and it cost more per delivery than the
//! adapter (the taxes under 1 in docs/performance.md). The pool is built as the
//! adapter builds its own (same size, no ping per acquire).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sqlx::PgPool;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use super::adapter::{ack_sql, read_sql, take_capacity, GROUP_HEADER};
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
    /// Rows read and not yet deleted, at most (the adapter's per-stream capacity).
    cap: usize,
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
        let qty = if o.read_qty > 0 {
            o.read_qty
        } else {
            plan.batch.max(1)
        }
        .min(i32::MAX as usize) as i32;
        Ok(PgmqBare {
            queue: super::adapter::queue_name(topic, group),
            qty,
            cap: (plan.lanes.max(1) * 2).max(qty as usize),
            lanes: plan.topology.lanes.clamp(1, keys),
            keys,
            o: o.clone(),
            pool,
        })
    }

    /// One reader: capacity first (at least one row, at most a read's worth), then a
    /// read; the ids go to the acker with the capacity they hold.
    async fn reader(
        &self,
        c: &BareCounters,
        cap: &Arc<Semaphore>,
        acks: mpsc::UnboundedSender<Vec<i64>>,
        stop: &CancellationToken,
    ) {
        let mut backoff = self.o.empty_backoff;
        loop {
            let Some(got) = take_capacity(cap, self.qty as usize, stop).await else {
                break;
            };
            let rows: Result<Vec<Row>, _> = sqlx::query_as(read_sql(self.o.read_fn))
                .bind(&self.queue)
                .bind(self.o.vt_secs())
                .bind(got as i32)
                .fetch_all(&self.pool)
                .await;
            let rows = match rows {
                Ok(r) => r,
                Err(_) => {
                    cap.add_permits(got);
                    c.errors.inc();
                    if nap(Duration::from_millis(50), stop).await {
                        break;
                    }
                    continue;
                }
            };
            cap.add_permits(got - rows.len());
            if rows.is_empty() {
                if nap(backoff, stop).await {
                    break;
                }
                backoff = (backoff * 2).min(self.o.empty_backoff_max);
                continue;
            }
            backoff = self.o.empty_backoff;
            c.consumed.add(rows.len() as u64);
            if acks.send(rows.iter().map(|r| r.0).collect()).is_err() {
                break;
            }
        }
    }

    /// The stream's acker: every read waiting is deleted in one call, then its
    /// capacity goes back to the readers. A failed delete is tried again (the rows
    /// stay invisible meanwhile), until the run stops.
    async fn acker(
        &self,
        c: &BareCounters,
        cap: &Semaphore,
        mut acks: mpsc::UnboundedReceiver<Vec<i64>>,
        stop: &CancellationToken,
    ) {
        while let Some(mut ids) = acks.recv().await {
            while let Ok(more) = acks.try_recv() {
                ids.extend(more);
            }
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
            cap.add_permits(ids.len());
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
        let cap = Arc::new(Semaphore::new(self.cap));
        let (tx, rx) = mpsc::unbounded_channel();
        let readers = futures::future::join_all(
            (0..self.o.readers).map(|_| self.reader(c, &cap, tx.clone(), &stop)),
        );
        drop(tx);
        futures::future::join(readers, self.acker(c, &cap, rx, &stop)).await;
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}
