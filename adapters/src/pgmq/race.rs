//! pgmq's grouped reads raced by bare readers ([`crate::race`]): finding F3 as the
//! seed ran it, without the adapter's in-flight key guard.
//!
//! One run: a fresh queue `<prefix><fn>_<readers>_<pid>_<n>` (pgmq.create and its
//! FIFO index, as the adapter's setup builds a queue), a backlog of `plan.backlog`
//! rows spread round-robin over `plan.keys` groups (`x-pgmq-group` header) and kept
//! topped up by one producer task, then `plan.readers` reader tasks for the window.
//! Each reader issues the adapter's own SQL (`read_sql`: `SELECT … FROM
//! pgmq.read_grouped_rr($1,$2,$3)` or `read_grouped_head`), records in the shared
//! [`Ledger`] which groups it now holds, sleeps `plan.hold` (the processing), then
//! sends one `pgmq.delete` of the ids read (`ack_sql`) and releases the groups once
//! the delete returned. `read` (plain `pgmq.read`, no grouping at all) is the
//! control: it promises no exclusivity, so its breaches show the counting works.
//! The queue is dropped at the end, whatever happened.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::adapter::{ack_sql, connect_options, lazy_pool, read_sql, GROUP_HEADER};
use super::options::{redact_dsn, AckMode, ReadFn};
use super::PgmqOptions;
use crate::error::BrokerError;
use crate::nap::nap;
use crate::race::{ExclusivityProbe, Ledger, RaceError, RacePlan, RaceReport};

/// The ungrouped control read: pgmq.read hands out the oldest visible rows, any group.
const PLAIN_READ_SQL: &str = "SELECT msg_id, read_ct, message::text AS body, headers->>'x-pgmq-group' AS grp FROM pgmq.read($1::text, $2::int, $3::int)";

/// Rows per top-up `send_batch`.
const SEND_CHUNK: u64 = 2000;

/// A row as the adapter reads it: msg_id, read_ct, the body, the group header.
type Row = (i64, i32, String, Option<String>);

/// Queues made by this process (their names stay unique across runs).
static RUNS: AtomicU64 = AtomicU64::new(0);

fn sq(e: sqlx::Error) -> BrokerError {
    BrokerError::Other(redact_dsn(&e.to_string()))
}

/// The race probe over one server (the adapter's DSN and statement timeout).
#[derive(Debug)]
pub struct PgmqRace {
    o: PgmqOptions,
}

impl PgmqRace {
    pub fn new(o: PgmqOptions) -> PgmqRace {
        PgmqRace { o }
    }

    fn sql_of(read_fn: &str) -> Result<(&'static str, &'static str), RaceError> {
        Ok(match read_fn {
            "read_grouped_rr" => (read_sql(ReadFn::Rr), "rr"),
            "read_grouped_head" => (read_sql(ReadFn::Head), "head"),
            "read" => (PLAIN_READ_SQL, "plain"),
            other => {
                return Err(RaceError::UnknownReadFn {
                    got: other.to_string(),
                    known: "read_grouped_rr, read_grouped_head, read".into(),
                })
            }
        })
    }
}

/// What the tasks of one run share.
struct Shared {
    pool: PgPool,
    queue: String,
    read_sql: &'static str,
    plan: RacePlan,
    ledger: Mutex<Ledger>,
    sent: AtomicU64,
    deleted: AtomicU64,
    reads: AtomicU64,
    empty_reads: AtomicU64,
    rows_read: AtomicU64,
    redelivered: AtomicU64,
    errors: AtomicU64,
    stop: CancellationToken,
}

impl Shared {
    /// Sends `n` rows, continuing the round-robin over the keys.
    async fn send(&self, n: u64) -> Result<(), sqlx::Error> {
        let first = self.sent.load(Ordering::Relaxed);
        let keys = self.plan.keys;
        let mut bodies = Vec::with_capacity(n as usize);
        let mut headers = Vec::with_capacity(n as usize);
        for i in first..first + n {
            let key = format!("k{}", i % keys);
            bodies.push(format!("{{\"key\":\"{key}\",\"seq\":{}}}", i / keys));
            headers.push(serde_json::json!({ GROUP_HEADER: key }).to_string());
        }
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pgmq.send_batch($1::text, $2::text[]::jsonb[], $3::text[]::jsonb[])",
        )
        .bind(&self.queue)
        .bind(&bodies)
        .bind(&headers)
        .fetch_one(&self.pool)
        .await?;
        self.sent.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// Rows waiting or held: sent and not yet deleted.
    fn depth(&self) -> u64 {
        self.sent
            .load(Ordering::Relaxed)
            .saturating_sub(self.deleted.load(Ordering::Relaxed))
    }

    /// Keeps the backlog topped up every 10 ms until the window ends.
    async fn producer(&self) {
        while !self.stop.is_cancelled() {
            let want = self
                .plan
                .backlog
                .saturating_sub(self.depth())
                .min(SEND_CHUNK);
            if want > 0 && self.send(want).await.is_err() {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if nap(Duration::from_millis(50), &self.stop).await {
                    break;
                }
                continue;
            }
            if want < SEND_CHUNK && nap(Duration::from_millis(10), &self.stop).await {
                break;
            }
        }
    }

    /// One bare reader: read, hold, delete, until the window ends. A reader always
    /// deletes what it read, so no row is left held when it returns.
    async fn reader(&self, me: usize) {
        let vt = i32::try_from(self.plan.visibility_timeout_s).unwrap_or(i32::MAX);
        let lease = Duration::from_secs(u64::from(self.plan.visibility_timeout_s));
        let qty = i32::try_from(self.plan.read_qty).unwrap_or(i32::MAX);
        let mut backoff = Duration::from_millis(1);
        while !self.stop.is_cancelled() {
            let rows: Vec<Row> = match sqlx::query_as(self.read_sql)
                .bind(&self.queue)
                .bind(vt)
                .bind(qty)
                .fetch_all(&self.pool)
                .await
            {
                Ok(r) => r,
                Err(_) => {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    nap(Duration::from_millis(50), &self.stop).await;
                    continue;
                }
            };
            let now = Instant::now();
            self.reads.fetch_add(1, Ordering::Relaxed);
            if rows.is_empty() {
                self.empty_reads.fetch_add(1, Ordering::Relaxed);
                nap(backoff, &self.stop).await;
                backoff = (backoff * 2).min(Duration::from_millis(50));
                continue;
            }
            backoff = Duration::from_millis(1);
            self.rows_read
                .fetch_add(rows.len() as u64, Ordering::Relaxed);
            let again = rows.iter().filter(|r| r.1 > 1).count() as u64;
            self.redelivered.fetch_add(again, Ordering::Relaxed);
            let mut by_key: BTreeMap<String, u64> = BTreeMap::new();
            for r in &rows {
                *by_key
                    .entry(r.3.clone().unwrap_or_else(|| "_default_fifo_group".into()))
                    .or_default() += 1;
            }
            {
                let mut l = self.ledger.lock();
                for (k, n) in &by_key {
                    l.read(me, k, *n, now, lease);
                }
            }
            tokio::time::sleep(self.plan.hold).await;
            {
                let mut l = self.ledger.lock();
                for k in by_key.keys() {
                    l.deleting(me, k);
                }
            }
            let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
            for attempt in 0..3 {
                match sqlx::query_scalar::<_, i64>(ack_sql(AckMode::Delete))
                    .bind(&self.queue)
                    .bind(&ids)
                    .fetch_one(&self.pool)
                    .await
                {
                    Ok(n) => {
                        self.deleted.fetch_add(n.max(0) as u64, Ordering::Relaxed);
                        break;
                    }
                    Err(_) => {
                        self.errors.fetch_add(1, Ordering::Relaxed);
                        if attempt < 2 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            }
            let mut l = self.ledger.lock();
            for k in by_key.keys() {
                l.release(me, k);
            }
        }
    }
}

impl PgmqRace {
    async fn run_on(&self, sh: Arc<Shared>) -> Result<RaceReport, RaceError> {
        sqlx::query("SELECT pgmq.create($1::text)")
            .bind(&sh.queue)
            .execute(&sh.pool)
            .await
            .map_err(sq)?;
        sqlx::query("SELECT pgmq.create_fifo_index($1::text)")
            .bind(&sh.queue)
            .execute(&sh.pool)
            .await
            .map_err(sq)?;
        // The standing backlog, before any reader starts.
        while sh.sent.load(Ordering::Relaxed) < sh.plan.backlog {
            let n = (sh.plan.backlog - sh.sent.load(Ordering::Relaxed)).min(SEND_CHUNK);
            sh.send(n).await.map_err(sq)?;
        }
        let mut tasks = Vec::with_capacity(sh.plan.readers + 1);
        let p = sh.clone();
        tasks.push(tokio::spawn(async move { p.producer().await }));
        let t0 = Instant::now();
        for me in 0..sh.plan.readers {
            let r = sh.clone();
            tasks.push(tokio::spawn(async move { r.reader(me).await }));
        }
        tokio::time::sleep(sh.plan.window).await;
        sh.stop.cancel();
        let window_s = t0.elapsed().as_secs_f64();
        for t in tasks {
            if t.await.is_err() {
                sh.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        let depth_end: i64 = sqlx::query_scalar("SELECT queue_length FROM pgmq.metrics($1::text)")
            .bind(&sh.queue)
            .fetch_one(&sh.pool)
            .await
            .map_err(sq)?;
        let l = sh.ledger.lock();
        Ok(RaceReport {
            read_fn: sh.plan.read_fn.clone(),
            readers: sh.plan.readers,
            window_s,
            reads: sh.reads.load(Ordering::Relaxed),
            empty_reads: sh.empty_reads.load(Ordering::Relaxed),
            rows_read: sh.rows_read.load(Ordering::Relaxed),
            rows_deleted: sh.deleted.load(Ordering::Relaxed),
            rows_redelivered: sh.redelivered.load(Ordering::Relaxed),
            breaches: l.breaches,
            breached_keys: l.breached_keys(),
            ambiguous: l.ambiguous,
            deferred_rows: l.deferred_rows,
            errors: sh.errors.load(Ordering::Relaxed),
            depth_end: depth_end.max(0) as u64,
        })
    }
}

#[async_trait]
impl ExclusivityProbe for PgmqRace {
    fn read_fns(&self) -> Vec<&'static str> {
        vec!["read_grouped_rr", "read_grouped_head", "read"]
    }

    fn describe(&self) -> String {
        redact_dsn(&self.o.dsn)
    }

    async fn versions(&self) -> Result<Vec<(String, String)>, RaceError> {
        let opts = connect_options(&self.o, "crossbench-race")?;
        let pool = lazy_pool(1, opts);
        let server: String = sqlx::query_scalar("SELECT version()")
            .fetch_one(&pool)
            .await
            .map_err(sq)?;
        let ext: Option<String> =
            sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'pgmq'")
                .fetch_optional(&pool)
                .await
                .map_err(sq)?;
        pool.close().await;
        Ok(vec![
            ("server".into(), server),
            ("pgmq".into(), ext.unwrap_or_else(|| "not installed".into())),
        ])
    }

    async fn run(&self, plan: &RacePlan) -> Result<RaceReport, RaceError> {
        plan.validate()?;
        let (read_sql, short) = PgmqRace::sql_of(&plan.read_fn)?;
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let queue = format!(
            "{}{short}_{}_{}_{n}",
            plan.queue_prefix,
            plan.readers,
            std::process::id()
        );
        if queue.len() > 47 {
            return Err(RaceError::Plan(format!(
                "queue name {queue:?} is longer than pgmq's 47 characters: shorten the prefix"
            )));
        }
        let opts = connect_options(&self.o, "crossbench-race")?;
        let pool = lazy_pool(plan.readers as u32 + 3, opts);
        let sh = Arc::new(Shared {
            pool: pool.clone(),
            queue: queue.clone(),
            read_sql,
            plan: plan.clone(),
            ledger: Mutex::new(Ledger::default()),
            sent: AtomicU64::new(0),
            deleted: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            empty_reads: AtomicU64::new(0),
            rows_read: AtomicU64::new(0),
            redelivered: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            stop: CancellationToken::new(),
        });
        let r = self.run_on(sh.clone()).await;
        // Whatever happened: stop every task and drop the queue.
        sh.stop.cancel();
        let dropped = sqlx::query("SELECT pgmq.drop_queue($1::text)")
            .bind(&queue)
            .execute(&pool)
            .await;
        pool.close().await;
        let report = r?;
        dropped.map_err(sq)?;
        Ok(report)
    }
}
