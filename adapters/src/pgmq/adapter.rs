//! The pgmq adapter (sqlx 0.9, plain SQL calls of the pgmq 1.13 functions).
//!
//! Topology: pgmq has no consumer groups, so every (topic, group) is its own queue
//! `<topic>_<group>` (non-alphanumerics → `_`, lower case) and a publish writes one row
//! per group of the topic (materialised fan-out). The ordering key (or its lane,
//! `lanes::lane_key`, when lanes < keys) travels in the `x-pgmq-group` header, which is
//! what pgmq's grouped reads order by; every queue gets pgmq's FIFO (GIN on headers)
//! index.
//!
//! Publish: one SQL statement per key-batch that calls `send_batch` once per group queue
//! of the topic. One statement is one implicit transaction: every group gets the batch or
//! none does (a retried publish never duplicates into some groups only), it costs one
//! round trip and one commit (one WAL flush) instead of one per group.
//!
//! Consume: `readers` loops per stream, each `read_grouped_head` (or `_rr`) → group the
//! rows by header group in msg_id order → one concurrent handler call per key → one
//! `delete` (or `archive`) of the acked ids. A per-stream in-flight key set keeps two
//! readers of one stream from handing the same key to the stage at once (possible when a
//! visibility timeout expires under a slow handler, and with `read_grouped_rr`'s race).
//! Refused batches are not deleted and reappear after the visibility timeout. Failed
//! calls are counted, backed off and retried; a connection-class failure drops the
//! connection so the pool reconnects.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool, Postgres, Row};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use super::options::{redact_dsn, AckMode, ReadFn};
use super::PgmqOptions;
use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, Delivery, DeliveryGuarantee, Description, Disposition,
    Durability, FanOut, KeyBatch, StreamCounters, Topology,
};
use crate::counter::{self, Counter, CounterMap};
use crate::error::BrokerError;
use crate::lanes::lane_key;

/// The header pgmq's grouped reads group by.
pub(super) const GROUP_HEADER: &str = "x-pgmq-group";

/// What `setup` learned about one topic.
#[derive(Debug)]
struct TopicState {
    /// (group, queue) in stream order.
    queues: Vec<(String, String)>,
    /// The publish statement: one `send_batch` CTE per queue.
    publish_sql: Arc<str>,
}

/// Adapter counters (`broker_stats`, every key prefixed `pgmq_`).
#[derive(Debug, Default, Serialize)]
struct Stats {
    logical_publishes: Counter,
    rows_sent: Counter,
    send_calls: Counter,
    reads: Counter,
    empty_reads: Counter,
    rows_read: Counter,
    ack_calls: Counter,
    rows_acked: Counter,
    ack_missing: Counter,
    rows_refused: Counter,
    rows_redelivered: Counter,
    rows_skipped_in_flight: Counter,
    rows_deferred: Counter,
    connections_dropped: Counter,
    ack_retries: Counter,
    /// `<op>_<class>` → count (`pgmq_errors_<op>_<class>`).
    errors: CounterMap,
}

impl Stats {
    fn error(&self, op: &str, e: &BrokerError) {
        self.errors.inc(format!("{op}_{}", e.class()));
    }
}

/// What the snapshot adds to the counters: the configuration and what setup built.
#[derive(Serialize)]
struct Gauges {
    readers_per_stream: u64,
    visibility_timeout_s: u64,
    pool_size: u64,
    lanes: u64,
    queues: u64,
    /// Open connections, once the pool exists.
    pool_open_conns: Option<u64>,
}

/// The pgmq broker.
#[derive(Debug)]
pub struct PgmqBroker {
    options: PgmqOptions,
    pool: OnceLock<PgPool>,
    pool_size: OnceLock<u32>,
    /// Why the pool is smaller than its default, when the server had fewer free
    /// connections (a note in the cell's description).
    pool_note: OnceLock<String>,
    topics: RwLock<HashMap<String, Arc<TopicState>>>,
    lanes: AtomicU64,
    keys: AtomicU64,
    stats: Stats,
    /// Processes using the server at once (several loaders of one cell).
    clients: u32,
}

/// A classified failure, plus whether the connection it happened on should be dropped.
fn classify(e: sqlx::Error) -> (BrokerError, bool) {
    let text = redact_dsn(&e.to_string());
    match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => (BrokerError::Connection(text), true),
        sqlx::Error::PoolTimedOut => (BrokerError::Timeout(format!("pool: {text}")), false),
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.to_string()).unwrap_or_default();
            match code.as_str() {
                // query_canceled (statement_timeout)
                "57014" => (BrokerError::Timeout(text), false),
                // admin_shutdown (pg_terminate_backend), crash_shutdown, cannot_connect_now,
                // too_many_connections, connection exceptions
                c if c.starts_with("57P") || c.starts_with("08") || c == "53300" => {
                    (BrokerError::Connection(text), true)
                }
                "42883" | "3F000" | "42P01" => (BrokerError::Config {
                    field: "pgmq".into(),
                    message: format!("{text} (is the pgmq extension installed? run scripts/provision/pgmq.sh)"),
                }, false),
                _ => (BrokerError::Refused(text), false),
            }
        }
        sqlx::Error::Configuration(_) => (
            BrokerError::Config {
                field: "pgmq.dsn".into(),
                message: text,
            },
            false,
        ),
        _ => (BrokerError::Other(text), false),
    }
}

/// The connection options of `o.dsn`, named `application` on the server and with the
/// statement timeout set; a DSN that does not parse is a config error (redacted). TLS
/// as `o.tls` asks (verify-full, or `require` when insecure); without it no TLS at
/// all, whatever the server offers, unless the DSN says `sslmode=`. The password
/// from `password_env` or `password_file` when one is given.
pub(crate) fn connect_options(
    o: &PgmqOptions,
    application: &str,
) -> Result<PgConnectOptions, BrokerError> {
    use sqlx::postgres::PgSslMode;
    let mut opts = PgConnectOptions::from_str(&o.dsn)
        .map_err(|e| BrokerError::Config {
            field: "pgmq.dsn".into(),
            message: redact_dsn(&e.to_string()),
        })?
        .application_name(application)
        .options([(
            "statement_timeout",
            format!("{}", o.statement_timeout.as_millis()),
        )]);
    if o.tls.on() {
        opts = opts.ssl_mode(if o.tls.insecure {
            PgSslMode::Require
        } else {
            PgSslMode::VerifyFull
        });
        if !o.tls.ca_file.is_empty() {
            opts = opts.ssl_root_cert(o.tls.ca_file.as_str());
        }
        if !o.tls.cert_file.is_empty() {
            opts = opts
                .ssl_client_cert(o.tls.cert_file.as_str())
                .ssl_client_key(o.tls.key_file.as_str());
        }
    } else if !o.dsn.contains("sslmode=") {
        opts = opts.ssl_mode(PgSslMode::Disable);
    }
    if let Some(pw) = o.password()? {
        opts = opts.password(&pw);
    }
    Ok(opts)
}

/// A failure to open the first connection, as a person can act on it: TLS refused
/// (the CA, the name), the login refused (the password), the server requiring TLS;
/// otherwise the server not reached. Each names the host and the field to fix.
fn first_connection_error(o: &PgmqOptions, e: sqlx::Error) -> BrokerError {
    let at = redact_dsn(&o.dsn);
    let url = url::Url::parse(&o.dsn).ok();
    let name = url
        .as_ref()
        .and_then(|u| u.host_str())
        .unwrap_or_default()
        .to_string();
    let host = match &url {
        Some(u) if !name.is_empty() => format!("{name}:{}", u.port().unwrap_or(5432)),
        _ => at.clone(),
    };
    let text = redact_dsn(&e.to_string());
    // rustls' verdicts reach sqlx as I/O errors of the handshake.
    let tls_failed = match &e {
        sqlx::Error::Tls(_) => true,
        sqlx::Error::Io(io) => {
            let t = io.to_string().to_ascii_lowercase();
            o.tls.on()
                && (t.contains("certificate") || t.contains("tls") || t.contains("handshake"))
        }
        _ => false,
    };
    match &e {
        _ if tls_failed => BrokerError::Config {
            field: if o.tls.ca_file.is_empty() {
                "pgmq.tls".into()
            } else {
                "pgmq.tls.ca_file".into()
            },
            message: format!(
                "TLS to PostgreSQL at {host} failed: {text}. The server's certificate must be signed by the CA in pgmq.tls.ca_file (or the system's roots) and carry the host name pgmq.dsn connects to ({name}): fix pgmq.tls.ca_file, or connect by the certificate's name in pgmq.dsn"
            ),
        },
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.to_string()).unwrap_or_default();
            let msg = db.message().to_string();
            match code.as_str() {
                "28P01" => BrokerError::Config {
                    field: "pgmq.password_env".into(),
                    message: format!(
                        "PostgreSQL at {host} refused the login: {msg}. Fix the password in pgmq.password_env (or pgmq.password_file), or the user in pgmq.dsn"
                    ),
                },
                "28000" if msg.contains("no encryption") && !o.tls.on() => BrokerError::Config {
                    field: "pgmq.tls".into(),
                    message: format!(
                        "PostgreSQL at {host} accepts this login only over TLS: {msg}. Set pgmq.tls (ca_file, the CA that signed its certificate)"
                    ),
                },
                "28000" => BrokerError::Config {
                    field: "pgmq.dsn".into(),
                    message: format!(
                        "PostgreSQL at {host} refused the login: {msg}. Fix the user or database in pgmq.dsn, or the server's pg_hba.conf"
                    ),
                },
                _ => BrokerError::Connection(format!(
                    "cannot connect to PostgreSQL at {at}: {text} (run scripts/provision/pgmq.sh)"
                )),
            }
        }
        _ => BrokerError::Connection(format!(
            "cannot connect to PostgreSQL at {at}: {text} (run scripts/provision/pgmq.sh)"
        )),
    }
}

/// A pool of at most `size` connections, opened as needed, waiting at most 10 s for
/// one. A ping per acquire would double the round trips: broken connections are
/// dropped on the error instead (close_on_drop).
pub(crate) fn lazy_pool(size: u32, opts: PgConnectOptions) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(10))
        .test_before_acquire(false)
        .connect_lazy_with(opts)
}

/// A pgmq queue name for (topic, group): lower case, `[a-z0-9_]` only.
pub fn queue_name(topic: &str, group: &str) -> String {
    format!("{topic}_{group}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn publish_sql(queues: usize) -> String {
    // $1 payloads (text[] of JSON documents), $2 header document, $3 row count,
    // $4.. queue names. Every CTE is referenced so Postgres runs every send_batch.
    let mut sql = String::from("WITH ");
    for i in 0..queues {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "q{i} AS (SELECT 1 FROM pgmq.send_batch(${}::text, $1::text[]::jsonb[], array_fill($2::jsonb, ARRAY[$3::int])))",
            i + 4
        ));
    }
    sql.push_str(" SELECT (0");
    for i in 0..queues {
        sql.push_str(&format!(" + (SELECT count(*) FROM q{i})"));
    }
    sql.push_str(")::bigint");
    sql
}

pub(super) fn read_sql(f: ReadFn) -> &'static str {
    match f {
        ReadFn::Head => "SELECT msg_id, read_ct, message::text AS body, headers->>'x-pgmq-group' AS grp FROM pgmq.read_grouped_head($1::text, $2::int, $3::int)",
        ReadFn::Rr => "SELECT msg_id, read_ct, message::text AS body, headers->>'x-pgmq-group' AS grp FROM pgmq.read_grouped_rr($1::text, $2::int, $3::int)",
    }
}

pub(super) fn ack_sql(a: AckMode) -> &'static str {
    match a {
        AckMode::Delete => "SELECT count(*) FROM pgmq.delete($1::text, $2::bigint[])",
        AckMode::Archive => "SELECT count(*) FROM pgmq.archive($1::text, $2::bigint[])",
    }
}

use crate::nap::nap;

/// One row of a grouped read.
struct Row_ {
    id: i64,
    read_ct: i32,
    body: String,
    group: String,
}

impl PgmqBroker {
    pub fn new(options: PgmqOptions) -> Result<Self, BrokerError> {
        crate::options::Section::validate(&options)?;
        // Parse the DSN now so a malformed one fails before anything runs.
        connect_options(&options, "crossbench-pgmq")?;
        Ok(PgmqBroker {
            options,
            pool: OnceLock::new(),
            pool_size: OnceLock::new(),
            pool_note: OnceLock::new(),
            topics: RwLock::new(HashMap::new()),
            lanes: AtomicU64::new(1),
            keys: AtomicU64::new(1),
            stats: Stats::default(),
            clients: 1,
        })
    }

    /// This adapter is one of `n` processes using the server at once (several
    /// loaders of one cell): its pool takes its share of the free connections.
    pub fn with_clients(mut self, n: u64) -> Self {
        self.clients = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        self
    }

    pub fn options(&self) -> &PgmqOptions {
        &self.options
    }

    /// The pool, created on first use. Its default size (readers × streams + 16, at
    /// most 90) is capped by the connections the server has free now, so a cell
    /// beside another PostgreSQL client (Queen's pool, say) does not wait 10 s for a
    /// connection that can never open; the cap is noted in the description. Too few
    /// free connections for one per stream and a few for the producers is an error
    /// that says so.
    async fn pool(&self, streams: usize) -> Result<&PgPool, BrokerError> {
        if let Some(p) = self.pool.get() {
            return Ok(p);
        }
        let opts = connect_options(&self.options, "crossbench-pgmq")?;
        let wanted = if self.options.pool_size > 0 {
            self.options.pool_size
        } else {
            ((self.options.readers * streams.max(1)) as u32 + 16).min(90)
        };
        let size = match free_connections(&opts).await {
            Ok(Some(free)) => {
                let minimum = streams as u32 + 4;
                // Several processes opening their pools at once all see the same free
                // connections: each takes its share.
                let room = free.saturating_sub(POOL_MARGIN) / self.clients;
                if room < minimum.min(wanted) {
                    return Err(BrokerError::Config {
                        field: "pgmq.pool_size".into(),
                        message: format!(
                            "the PostgreSQL server at {} has {free} free connections (max_connections less the reserved ones and those in use); this cell needs at least {} ({} streams, the producers and a margin of {POOL_MARGIN}): raise max_connections or end the other clients",
                            redact_dsn(&self.options.dsn),
                            minimum.min(wanted) + POOL_MARGIN,
                            streams
                        ),
                    });
                }
                if room < wanted {
                    let share = if self.clients > 1 {
                        format!(", shared by {} loaders", self.clients)
                    } else {
                        String::new()
                    };
                    let _ = self.pool_note.set(format!(
                        "pool capped at {room} connections (wanted {wanted}): the server had {free} free at setup, less a margin of {POOL_MARGIN}{share}"
                    ));
                    room
                } else {
                    wanted
                }
            }
            // Not readable (a role without pg_stat_activity rights): the default.
            Ok(None) => wanted,
            Err(e) => return Err(first_connection_error(&self.options, e)),
        };
        let pool = lazy_pool(size, opts);
        let _ = self.pool_size.set(size);
        let _ = self.pool.set(pool);
        Ok(self.pool.get().expect("just set"))
    }

    fn ready_pool(&self) -> Result<&PgPool, BrokerError> {
        self.pool.get().ok_or_else(|| {
            BrokerError::Other("pgmq: setup has not run (no connection pool)".into())
        })
    }

    fn topic(&self, name: &str) -> Result<Arc<TopicState>, BrokerError> {
        self.topics
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| BrokerError::UnknownTopic(name.to_string()))
    }

    async fn conn(&self, pool: &PgPool) -> Result<PoolConnection<Postgres>, (BrokerError, bool)> {
        pool.acquire().await.map_err(classify)
    }

    /// Run a fallible step; on a connection-class failure drop the connection.
    fn settle<T>(
        &self,
        conn: &mut PoolConnection<Postgres>,
        r: Result<T, sqlx::Error>,
    ) -> Result<T, (BrokerError, bool)> {
        r.map_err(|e| {
            let (err, drop_conn) = classify(e);
            if drop_conn {
                conn.close_on_drop();
                self.stats.connections_dropped.inc();
            }
            (err, drop_conn)
        })
    }

    /// A client-side guard a little longer than the server's statement timeout, for a
    /// connection that hangs without an error.
    fn guard(&self) -> Duration {
        self.options.statement_timeout + Duration::from_secs(5)
    }

    async fn read(
        &self,
        pool: &PgPool,
        queue: &str,
        qty: i32,
    ) -> Result<Vec<Row_>, (BrokerError, bool)> {
        let mut conn = self.conn(pool).await?;
        let q = sqlx::query(read_sql(self.options.read_fn))
            .bind(queue)
            .bind(self.options.vt_secs())
            .bind(qty);
        let r = match tokio::time::timeout(self.guard(), q.fetch_all(&mut *conn)).await {
            Ok(r) => r,
            Err(_) => {
                conn.close_on_drop();
                return Err((BrokerError::Timeout("read: no answer".into()), true));
            }
        };
        let rows = self.settle(&mut conn, r)?;
        rows.into_iter()
            .map(|r| {
                Ok(Row_ {
                    id: r.try_get("msg_id")?,
                    read_ct: r.try_get("read_ct")?,
                    body: r.try_get("body")?,
                    group: r.try_get::<Option<String>, _>("grp")?.unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(|e| (BrokerError::Other(redact_dsn(&e.to_string())), false))
    }

    async fn ack_once(
        &self,
        pool: &PgPool,
        queue: &str,
        ids: &[i64],
    ) -> Result<i64, (BrokerError, bool)> {
        let mut conn = self.conn(pool).await?;
        let q = sqlx::query_scalar::<_, i64>(ack_sql(self.options.ack))
            .bind(queue)
            .bind(ids);
        let r = match tokio::time::timeout(self.guard(), q.fetch_one(&mut *conn)).await {
            Ok(r) => r,
            Err(_) => {
                conn.close_on_drop();
                return Err((BrokerError::Timeout("ack: no answer".into()), true));
            }
        };
        self.settle(&mut conn, r)
    }

    /// Ack (delete/archive) ids, retrying a few times: the call is idempotent.
    async fn ack(
        &self,
        pool: &PgPool,
        queue: &str,
        ids: &[i64],
        counters: &StreamCounters,
    ) -> bool {
        let mut backoff = Duration::from_millis(50);
        for attempt in 0..4 {
            self.stats.ack_calls.inc();
            match self.ack_once(pool, queue, ids).await {
                Ok(n) => {
                    let n = n.max(0) as u64;
                    self.stats.rows_acked.add(n);
                    self.stats
                        .ack_missing
                        .add((ids.len() as u64).saturating_sub(n));
                    return true;
                }
                Err((e, reconnect)) => {
                    self.stats.error("ack", &e);
                    if reconnect {
                        counters.reconnects.inc();
                    }
                    if attempt < 3 {
                        self.stats.ack_retries.inc();
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                }
            }
        }
        false
    }

    /// Put rows back to visible at once (rows another reader's key holds, under `rr`).
    async fn release_rows(&self, pool: &PgPool, queue: &str, ids: &[i64]) {
        if let Ok(mut conn) = pool.acquire().await {
            let r = sqlx::query("SELECT count(*) FROM pgmq.set_vt($1::text, $2::bigint[], 0)")
                .bind(queue)
                .bind(ids)
                .execute(&mut *conn)
                .await;
            if let Err((e, _)) = self.settle(&mut conn, r) {
                self.stats.error("set_vt", &e);
            }
        }
    }

    /// One reader loop: read → claim keys → spawn one handler task per key. Completions
    /// go to the stream's acker through `done`; capacity (`cap`, in messages) bounds what
    /// is read but not yet acked, so a reader never waits for its slowest key before
    /// reading again (no per-read barrier) and never floods the stage.
    async fn reader(&self, s: &StreamCtx, done: mpsc::UnboundedSender<Done>) {
        let o = &self.options;
        let mut empty_backoff = o.empty_backoff;
        let mut err_backoff = Duration::from_millis(50);
        let counters = &s.counters;
        loop {
            let Some(got) = take_capacity(&s.cap, s.qty, &s.stop).await else {
                break;
            };
            let read = self.read(&s.pool, &s.queue, got as i32).await;
            let mut rows = match read {
                Ok(rows) => {
                    err_backoff = Duration::from_millis(50);
                    rows
                }
                Err((e, reconnect)) => {
                    s.cap.add_permits(got);
                    counters.receive_errors.inc();
                    if reconnect {
                        counters.reconnects.inc();
                    }
                    self.stats.error("read", &e);
                    if nap(err_backoff, &s.stop).await {
                        break;
                    }
                    err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            self.stats.reads.inc();
            s.cap.add_permits(got.saturating_sub(rows.len()));
            if rows.is_empty() {
                self.stats.empty_reads.inc();
                if nap(empty_backoff, &s.stop).await {
                    break;
                }
                empty_backoff = (empty_backoff * 2).min(o.empty_backoff_max);
                continue;
            }
            empty_backoff = o.empty_backoff;
            self.stats.rows_read.add(rows.len() as u64);
            if s.stop.is_cancelled() {
                // The run is over: leave the rows to their visibility timeout.
                s.cap.add_permits(rows.len());
                break;
            }

            // Group by key, msg_id order inside each key (UPDATE … RETURNING has no order).
            rows.sort_unstable_by_key(|r| r.id);
            let mut order: Vec<String> = Vec::new();
            let mut by_key: HashMap<String, Vec<Row_>> = HashMap::new();
            for r in rows {
                let slot = by_key.entry(r.group.clone()).or_default();
                if slot.is_empty() {
                    order.push(r.group.clone());
                }
                slot.push(r);
            }
            let mut claimed: Vec<(Arc<str>, Vec<Row_>)> = Vec::with_capacity(order.len());
            // Rows of a key this stream is still working on: `stale` are the very rows in
            // flight (their visibility timeout ran out under a slow handler: leave them
            // invisible, the handler's ack removes them); `early` are later rows of the
            // key (read between the ack's commit and the key's release, or by `rr`'s
            // race): make them visible again at once so they are not stuck behind the
            // timeout.
            let mut stale = 0usize;
            let mut early: Vec<i64> = Vec::new();
            {
                let mut held = s.in_flight.lock();
                for k in order {
                    let rows = by_key.remove(&k).expect("key was grouped");
                    let key: Arc<str> = Arc::from(k);
                    match held.get(&key) {
                        None => {
                            held.insert(key.clone(), rows.iter().map(|r| r.id).collect());
                            claimed.push((key, rows));
                        }
                        Some(ids) => {
                            for r in &rows {
                                if ids.contains(&r.id) {
                                    stale += 1;
                                } else {
                                    early.push(r.id);
                                }
                            }
                        }
                    }
                }
            }
            if stale + early.len() > 0 {
                s.cap.add_permits(stale + early.len());
                self.stats.rows_skipped_in_flight.add(stale as u64);
                self.stats.rows_deferred.add(early.len() as u64);
                if !early.is_empty() {
                    self.release_rows(&s.pool, &s.queue, &early).await;
                }
            }

            // One task per read runs the read's key-batches concurrently and reports
            // each as it finishes (a task per key-batch cost a spawn, and often a
            // wake-up of the other runtime worker, per message with one row per key).
            let mut batches: Vec<(Arc<str>, Vec<i64>, KeyBatch)> =
                Vec::with_capacity(claimed.len());
            for (key, rows) in claimed {
                let redelivered = rows.iter().filter(|r| r.read_ct > 1).count() as u64;
                if redelivered > 0 {
                    counters.redelivered.add(redelivered);
                    self.stats.rows_redelivered.add(redelivered);
                }
                let mut ids: Vec<i64> = Vec::with_capacity(rows.len());
                let mut messages = Vec::with_capacity(rows.len());
                for r in rows {
                    ids.push(r.id);
                    messages.push(Delivery {
                        payload: Bytes::from(r.body),
                        redelivered: r.read_ct > 1,
                    });
                }
                let batch = KeyBatch {
                    key: key.clone(),
                    messages,
                };
                batches.push((key, ids, batch));
            }
            let handler = s.handler.clone();
            let done = done.clone();
            tokio::spawn(async move {
                let handler = &handler;
                let mut calls: FuturesUnordered<_> = batches
                    .into_iter()
                    .map(|(key, ids, batch)| async move {
                        let disposition = handler.handle(batch).await;
                        Done {
                            key,
                            ids,
                            disposition,
                        }
                    })
                    .collect();
                while let Some(d) = calls.next().await {
                    let _ = done.send(d);
                }
            });
        }
    }

    /// The stream's acker: batches the completions that are ready into one delete (or
    /// archive), then frees their keys and capacity. Ends when every sender is gone.
    async fn acker(&self, s: &StreamCtx, mut done: mpsc::UnboundedReceiver<Done>) {
        let counters = &s.counters;
        while let Some(first) = done.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = done.try_recv() {
                batch.push(more);
            }
            let mut ack_ids: Vec<i64> = Vec::new();
            let mut n_all = 0usize;
            for d in &batch {
                n_all += d.ids.len();
                match d.disposition {
                    Disposition::Ack => ack_ids.extend_from_slice(&d.ids),
                    Disposition::Refuse => {
                        counters.refused.add(d.ids.len() as u64);
                        self.stats.rows_refused.add(d.ids.len() as u64);
                    }
                }
            }
            if !ack_ids.is_empty() {
                let t_ack = std::time::Instant::now();
                if self.ack(&s.pool, &s.queue, &ack_ids, counters).await {
                    counters.acked.add(ack_ids.len() as u64);
                    counters.ack_calls.inc();
                    counters.ack_micros.add(t_ack.elapsed().as_micros() as u64);
                } else {
                    counters.ack_errors.add(ack_ids.len() as u64);
                }
            }
            // Release the keys only once their rows are gone (or left to the timeout).
            {
                let mut held = s.in_flight.lock();
                for d in &batch {
                    held.remove(&d.key);
                }
            }
            s.cap.add_permits(n_all);
        }
    }
}

/// A reader's capacity before a read: at least one message (waiting for it, or for
/// `stop`: then `None`), at most `qty`, as much as is free. The permits are forgotten:
/// whoever deletes or gives back the rows adds them again. The adapter's readers and
/// the bare loop's take it the same way.
pub(super) async fn take_capacity(
    cap: &Semaphore,
    qty: usize,
    stop: &CancellationToken,
) -> Option<usize> {
    let first = tokio::select! {
        _ = stop.cancelled() => return None,
        p = cap.acquire() => p.expect("never closed"),
    };
    first.forget();
    let mut got = 1usize;
    let extra = cap.available_permits().min(qty.saturating_sub(1));
    if extra > 0 {
        if let Ok(p) = cap.try_acquire_many(extra as u32) {
            p.forget();
            got += extra;
        }
    }
    Some(got)
}

/// What a reader shares with its stream.
struct StreamCtx {
    pool: PgPool,
    queue: String,
    qty: usize,
    counters: Arc<StreamCounters>,
    handler: Arc<dyn BatchHandler>,
    in_flight: Mutex<HashMap<Arc<str>, Vec<i64>>>,
    cap: Arc<Semaphore>,
    stop: CancellationToken,
}

/// A finished handler call.
struct Done {
    key: Arc<str>,
    ids: Vec<i64>,
    disposition: Disposition,
}

/// Connections the pool leaves free on the server for everything else (psql, the
/// sampler's queries, another client that connects meanwhile).
const POOL_MARGIN: u32 = 4;

/// The server's free connections now: max_connections less the superuser-reserved
/// ones and every backend that holds a slot. `Ok(None)` when the settings cannot be
/// read; `Err` when nothing connects.
async fn free_connections(opts: &PgConnectOptions) -> Result<Option<u32>, sqlx::Error> {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect_with(opts).await?;
    let row: Result<(i64,), sqlx::Error> = sqlx::query_as(
        "SELECT current_setting('max_connections')::bigint \
              - current_setting('superuser_reserved_connections')::bigint \
              - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')",
    )
    .fetch_one(&mut c)
    .await;
    let _ = c.close().await;
    // This very connection is counted as in use, and is closed now.
    Ok(row.ok().map(|(n,)| (n + 1).max(0) as u32))
}

#[async_trait]
impl Broker for PgmqBroker {
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        let streams = topology.stream_count();
        let pool = self.pool(streams).await?.clone();
        let o = &self.options;
        let mut conn = pool.acquire().await.map_err(|e| {
            let (err, _) = classify(e);
            BrokerError::Connection(format!(
                "cannot connect to PostgreSQL at {}: {err} (run scripts/provision/pgmq.sh)",
                redact_dsn(&o.dsn)
            ))
        })?;
        let sq = |e: sqlx::Error| classify(e).0;

        // Preflight: the extension and the functions this configuration calls.
        let version: Option<String> =
            sqlx::query_scalar("SELECT extversion FROM pg_extension WHERE extname = 'pgmq'")
                .fetch_optional(&mut *conn)
                .await
                .map_err(sq)?;
        let Some(version) = version else {
            return Err(BrokerError::Config {
                field: "pgmq.dsn".into(),
                message: format!(
                    "the pgmq extension is not installed in the database of {}; run scripts/provision/pgmq.sh",
                    redact_dsn(&o.dsn)
                ),
            });
        };
        for f in [
            o.read_fn.sql_name(),
            "create_fifo_index",
            "send_batch",
            o.ack.sql_name(),
        ] {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'pgmq' AND p.proname = $1",
            )
            .bind(f)
            .fetch_one(&mut *conn)
            .await
            .map_err(sq)?;
            if n == 0 {
                return Err(BrokerError::Config {
                    field: "pgmq.read_fn".into(),
                    message: format!(
                        "pgmq {version} has no pgmq.{f}; it cannot express the workload (needs pgmq >= 1.11.1; scripts/provision/pgmq.sh installs 1.13.0)"
                    ),
                });
            }
        }
        // The server settings the record states, in one round trip. autovacuum is not a
        // refusal: the record says it, because it shapes every figure that outlives a
        // few seconds (each ack leaves a dead row version behind).
        let settings = crate::pg_settings::ServerSettings::read(&mut conn)
            .await
            .map_err(sq)?;
        match topology.durability {
            Durability::Memory | Durability::None => {
                return Err(BrokerError::Config {
                    field: "durability".into(),
                    message: "pgmq queues are WAL-logged PostgreSQL tables; use durability default or fsync".into(),
                })
            }
            Durability::Fsync
                if settings.fsync != "on" || settings.synchronous_commit == "off" =>
            {
                return Err(BrokerError::Config {
                    field: "durability".into(),
                    message: format!(
                        "durability fsync needs the server at fsync=on and synchronous_commit on (server: fsync={}, synchronous_commit={})",
                        settings.fsync, settings.synchronous_commit
                    ),
                })
            }
            _ => {}
        }

        // Queues.
        let mut seen: HashMap<String, (String, String)> = HashMap::new();
        let mut states = HashMap::new();
        for t in &topology.topics {
            let mut queues = Vec::new();
            for g in &t.groups {
                let q = queue_name(&t.name, g);
                if q.len() > 47 {
                    return Err(BrokerError::Config {
                        field: "prefix".into(),
                        message: format!("pgmq queue name {q:?} is longer than pgmq's 47 characters; use a shorter prefix"),
                    });
                }
                if let Some((t0, g0)) = seen.insert(q.clone(), (t.name.clone(), g.clone())) {
                    return Err(BrokerError::Config {
                        field: "topology".into(),
                        message: format!(
                            "streams {t0}/{g0} and {}/{g} map to the same pgmq queue {q:?}",
                            t.name
                        ),
                    });
                }
                if topology.reset {
                    sqlx::query("SELECT pgmq.drop_queue($1::text)")
                        .bind(&q)
                        .execute(&mut *conn)
                        .await
                        .map_err(sq)?;
                }
                sqlx::query("SELECT pgmq.create($1::text)")
                    .bind(&q)
                    .execute(&mut *conn)
                    .await
                    .map_err(sq)?;
                sqlx::query("SELECT pgmq.create_fifo_index($1::text)")
                    .bind(&q)
                    .execute(&mut *conn)
                    .await
                    .map_err(sq)?;
                queues.push((g.clone(), q));
            }
            let sql: Arc<str> = Arc::from(publish_sql(queues.len()));
            states.insert(
                t.name.clone(),
                Arc::new(TopicState {
                    queues,
                    publish_sql: sql,
                }),
            );
        }
        drop(conn);
        *self.topics.write() = states;
        let keys = topology.keys.max(1);
        let lanes = topology.lanes.clamp(1, keys);
        self.keys.store(keys, Ordering::Relaxed);
        self.lanes.store(lanes, Ordering::Relaxed);

        let mut notes = vec![
            format!("pgmq {version}; {}", settings.describe()),
            format!(
                "{} readers per stream, visibility timeout {} s, ack by {}",
                o.readers,
                o.vt_secs(),
                o.ack.sql_name()
            ),
            "message bodies are jsonb: PostgreSQL re-serialises them (key order, spaces), so the stage decodes every delivery on its slow path".into(),
        ];
        if o.read_fn == ReadFn::Head {
            notes.push("read_grouped_head yields at most one row per group per read: key-batches hold one message".into());
        } else {
            notes.push("read_grouped_rr races under concurrent readers (a reader can take later rows of a group whose head another holds)".into());
        }
        if topology.dedup_window_sec > 0 {
            notes.push(format!(
                "dedup window {} s requested: pgmq has no broker-side dedup; not honoured",
                topology.dedup_window_sec
            ));
        }
        if lanes < keys {
            notes.push(format!("{keys} keys hashed onto {lanes} groups (x-pgmq-group = l<fnv1a32(key) mod {lanes}>)"));
        }
        if !settings.autovacuums() {
            notes.push("autovacuum is off on this server: the dead row version each ack leaves is reclaimed only by page pruning or a manual VACUUM, so reads scan more of them as a cell goes on (the queues are dropped between cells, the server's other tables are not)".into());
        }
        if let Some(n) = self.pool_note.get() {
            notes.push(n.clone());
        }
        let mut provenance = settings.provenance("");
        provenance.source = "SHOW server_version, SELECT version(), current_setting(…), SELECT extversion FROM pg_extension WHERE extname = 'pgmq'".into();
        provenance.report("pgmq_extversion", version.clone());
        Ok(Description {
            system: "pgmq".into(),
            variant: format!("{}/{}", o.read_fn.sql_name(), o.ack.sql_name()),
            durability: topology.durability,
            fan_out: FanOut::Materialised,
            delivery: DeliveryGuarantee::AtLeastOnce,
            ordered_lanes: lanes * streams as u64,
            physical_queues: streams as u64,
            consumer_members: (o.readers * streams) as u64,
            connections: u64::from(*self.pool_size.get().unwrap_or(&0)),
            // Materialised: one row per consuming group of every topic an event passes
            // through (ingress + derived topic per flow): 1 + 5 = 6 in the pipeline.
            publishes_per_ingress_event: topology.materialised_publishes_per_ingress_event(),
            semantics_built_in_app: vec![
                "materialised fan-out: one queue per (topic, group), one row per group per publish"
                    .into(),
                "consumer groups: one queue per group".into(),
                "per-stream in-flight key set: one key per handler call across readers".into(),
                "polling reads with empty-read backoff (no push)".into(),
                format!(
                    "ack = {} after read = UPDATE (several row versions per delivery)",
                    o.ack.sql_name()
                ),
                "no dedup".into(),
            ],
            notes,
            lease_ms: Some(u64::from(o.vt_secs() as u32) * 1000),
            provenance,
        })
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let pool = self.ready_pool()?;
        let t = self.topic(topic)?;
        let lane = lane_key(
            key,
            self.lanes.load(Ordering::Relaxed),
            self.keys.load(Ordering::Relaxed),
        );
        let header = serde_json::json!({ GROUP_HEADER: lane }).to_string();
        let bodies: Vec<&str> = payloads
            .iter()
            .map(|p| std::str::from_utf8(p))
            .collect::<Result<_, _>>()
            .map_err(|_| {
                BrokerError::Refused("pgmq stores jsonb: payload is not UTF-8 JSON".into())
            })?;
        let mut q = sqlx::query_scalar::<_, i64>(AssertSqlSafe(t.publish_sql.clone()))
            .bind(bodies)
            .bind(header)
            .bind(payloads.len() as i32);
        for (_, name) in &t.queues {
            q = q.bind(name.as_str());
        }
        self.stats.send_calls.inc();
        let r: Result<i64, (BrokerError, bool)> = async {
            let mut conn = self.conn(pool).await?;
            let r = match tokio::time::timeout(self.guard(), q.fetch_one(&mut *conn)).await {
                Ok(r) => r,
                Err(_) => {
                    conn.close_on_drop();
                    return Err((BrokerError::Timeout("send_batch: no answer".into()), true));
                }
            };
            self.settle(&mut conn, r)
        }
        .await;
        match r {
            Ok(rows) => {
                self.stats.rows_sent.add(rows.max(0) as u64);
                self.stats.logical_publishes.add(payloads.len() as u64);
                Ok(())
            }
            Err((e, _)) => {
                self.stats.error("send", &e);
                Err(e)
            }
        }
    }

    async fn consume(
        &self,
        topic: &str,
        group: &str,
        options: ConsumeOptions,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
    ) -> Result<(), BrokerError> {
        let pool = self.ready_pool()?.clone();
        let t = self.topic(topic)?;
        let queue = t
            .queues
            .iter()
            .find(|(g, _)| g == group)
            .map(|(_, q)| q.clone())
            .ok_or_else(|| BrokerError::Other(format!("unknown group {group:?} on {topic:?}")))?;
        let qty = if self.options.read_qty > 0 {
            self.options.read_qty
        } else {
            options.batch.max(1)
        }
        .min(i32::MAX as usize) as i32;
        // Read-but-unacked messages per stream: enough to keep the stage's whole lane
        // budget busy while a read and a delete are on the wire.
        let cap = (options.lanes.max(1) * 2).max(qty as usize);
        let ctx = StreamCtx {
            pool,
            queue,
            qty: qty as usize,
            counters: options.counters.clone(),
            handler,
            in_flight: Mutex::new(HashMap::new()),
            cap: Arc::new(Semaphore::new(cap)),
            stop,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let readers = futures::future::join_all(
            (0..self.options.readers).map(|_| self.reader(&ctx, tx.clone())),
        );
        drop(tx);
        futures::future::join(readers, self.acker(&ctx, rx)).await;
        Ok(())
    }

    /// The rows of every queue of the last setup (`pgmq.metrics`: visible or not,
    /// every row not yet deleted or archived), in one round trip.
    async fn held(&self) -> Option<crate::broker::Held> {
        let pool = self.pool.get()?;
        let queues: Vec<String> = self
            .topics
            .read()
            .values()
            .flat_map(|t| t.queues.iter().map(|(_, q)| q.clone()))
            .collect();
        let rows: Vec<(String, i64)> = tokio::time::timeout(
            Duration::from_secs(10),
            sqlx::query_as(
                "SELECT q, (SELECT queue_length FROM pgmq.metrics(q)) FROM unnest($1::text[]) AS q",
            )
            .bind(&queues)
            .fetch_all(pool),
        )
        .await
        .ok()?
        .ok()?;
        Some(crate::broker::Held::from_places(
            rows.into_iter().map(|(q, n)| (q, n.max(0) as u64)),
        ))
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = counter::snapshot("pgmq_", &self.stats);
        let gauges = Gauges {
            readers_per_stream: self.options.readers as u64,
            visibility_timeout_s: self.options.vt_secs() as u64,
            pool_size: u64::from(*self.pool_size.get().unwrap_or(&0)),
            lanes: self.lanes.load(Ordering::Relaxed),
            queues: self
                .topics
                .read()
                .values()
                .map(|t| t.queues.len() as u64)
                .sum(),
            pool_open_conns: self.pool.get().map(|p| u64::from(p.size())),
        };
        m.extend(counter::snapshot("pgmq_", &gauges));
        m
    }

    /// The bare grouped reads without the in-flight key guard (finding F3).
    fn exclusivity_probe(&self) -> Option<Box<dyn crate::race::ExclusivityProbe>> {
        Some(Box::new(super::race::PgmqRace::new(self.options.clone())))
    }

    async fn close(&self) -> Result<(), BrokerError> {
        if let Some(p) = self.pool.get() {
            p.close().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_are_pgmq_safe() {
        assert_eq!(queue_name("cm-ota-sync", "ota-3"), "cm_ota_sync_ota_3");
        assert_eq!(queue_name("X.y", "G"), "x_y_g");
    }

    #[test]
    fn publish_sql_references_every_queue() {
        let s = publish_sql(3);
        for i in 0..3 {
            assert!(s.contains(&format!("q{i} AS")));
            assert!(s.contains(&format!("FROM q{i})")));
            assert!(s.contains(&format!("${}::text", i + 4)));
        }
    }

    /// `broker_stats` keys as they were hand-listed before the snapshot was derived:
    /// the counters and the configuration always, the pool's open connections once the
    /// pool exists, one `pgmq_errors_<op>_<class>` per failure seen.
    #[tokio::test]
    async fn snapshot_keys_are_unchanged() {
        let b = PgmqBroker::new(PgmqOptions::default()).unwrap();
        let always = [
            "pgmq_ack_calls",
            "pgmq_ack_missing",
            "pgmq_ack_retries",
            "pgmq_connections_dropped",
            "pgmq_empty_reads",
            "pgmq_lanes",
            "pgmq_logical_publishes",
            "pgmq_pool_size",
            "pgmq_queues",
            "pgmq_readers_per_stream",
            "pgmq_reads",
            "pgmq_rows_acked",
            "pgmq_rows_deferred",
            "pgmq_rows_read",
            "pgmq_rows_redelivered",
            "pgmq_rows_refused",
            "pgmq_rows_sent",
            "pgmq_rows_skipped_in_flight",
            "pgmq_send_calls",
            "pgmq_visibility_timeout_s",
        ];
        let keys = |b: &PgmqBroker| b.counters().into_keys().collect::<Vec<_>>();
        assert_eq!(keys(&b), always);
        // A lazy pool, as `pool()` builds it, connects nothing (`pool()` itself asks
        // the server for its free connections, so the test sets one directly).
        let opts = PgConnectOptions::from_str(&b.options.dsn).unwrap();
        let _ = b.pool.set(PgPoolOptions::new().connect_lazy_with(opts));
        b.stats.error("read", &BrokerError::Timeout("t".into()));
        let mut want: Vec<&str> = always.to_vec();
        want.extend(["pgmq_pool_open_conns", "pgmq_errors_read_timeout"]);
        want.sort_unstable();
        assert_eq!(keys(&b), want);
        assert_eq!(b.counters()["pgmq_visibility_timeout_s"], 30);
        assert_eq!(b.counters()["pgmq_readers_per_stream"], 2);
    }

    #[test]
    fn bad_dsn_is_redacted() {
        let e = PgmqBroker::new(PgmqOptions {
            dsn: "postgres://u:topsecret@h:notaport/db".into(),
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(!e.contains("topsecret"), "{e}");
    }
}
