//! PostgreSQL internals (feature `postgres`): one query per tick over one
//! connection, reconnecting with back-off. The DSN is never printed.

use std::time::{Duration, Instant};

use sqlx::postgres::PgConnection;
use sqlx::Connection;

use crate::probe::{Counter, Metrics};

pub(crate) const PG_METRICS: &[&str] = &[
    "commits_per_s",
    "wal_bytes_per_s",
    "dead_tuples",
    "autovacuum_runs",
    "db_size_bytes",
    "backends",
    "pgmq_table_bytes",
    "pgmq_live_rows",
];

// pg_stat_wal exists from PostgreSQL 14.
const Q_WAL: &str = "SELECT \
    (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())::int8, \
    (SELECT wal_bytes FROM pg_stat_wal)::float8, \
    (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables)::int8, \
    (SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_user_tables)::int8, \
    pg_database_size(current_database())::int8, \
    (SELECT numbackends FROM pg_stat_database WHERE datname = current_database())::int8, \
    (SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_stat_user_tables WHERE schemaname = 'pgmq')::int8, \
    (SELECT coalesce(sum(n_live_tup), 0) FROM pg_stat_user_tables WHERE schemaname = 'pgmq' AND relname LIKE 'q\\_%')::int8";
const Q_NO_WAL: &str = "SELECT \
    (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())::int8, \
    NULL::float8, \
    (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables)::int8, \
    (SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_user_tables)::int8, \
    pg_database_size(current_database())::int8, \
    (SELECT numbackends FROM pg_stat_database WHERE datname = current_database())::int8, \
    (SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_stat_user_tables WHERE schemaname = 'pgmq')::int8, \
    (SELECT coalesce(sum(n_live_tup), 0) FROM pg_stat_user_tables WHERE schemaname = 'pgmq' AND relname LIKE 'q\\_%')::int8";

type Row = (
    Option<i64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const QUERY_TIMEOUT: Duration = Duration::from_millis(800);
const RETRY_AFTER: Duration = Duration::from_secs(5);

pub(crate) struct PgProbe {
    dsn: String,
    conn: Option<PgConnection>,
    no_wal: bool,
    retry_at: Option<Instant>,
    commits: Counter,
    wal: Counter,
    autovacuum: Counter,
    last: Option<Instant>,
}

impl PgProbe {
    /// A probe of the server `dsn` names. TLS only when the DSN asks (`sslmode=`): a
    /// server's offer is not taken up silently, as the adapters do not take it up
    /// (`adapters::tls::plain_unless_asked`, the same rule).
    pub(crate) fn new(dsn: String) -> Self {
        let dsn = if dsn.contains("sslmode=") {
            dsn
        } else {
            let sep = if dsn.contains('?') { '&' } else { '?' };
            format!("{dsn}{sep}sslmode=disable")
        };
        PgProbe {
            dsn,
            conn: None,
            no_wal: false,
            retry_at: None,
            commits: Counter::default(),
            wal: Counter::default(),
            autovacuum: Counter::default(),
            last: None,
        }
    }

    async fn query(&mut self) -> Option<Row> {
        if self.conn.is_none() {
            if self.retry_at.is_some_and(|t| Instant::now() < t) {
                return None;
            }
            match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect(&self.dsn)).await {
                Ok(Ok(c)) => self.conn = Some(c),
                _ => {
                    self.retry_at = Some(Instant::now() + RETRY_AFTER);
                    return None;
                }
            }
        }
        let conn = self.conn.as_mut()?;
        let q = if self.no_wal { Q_NO_WAL } else { Q_WAL };
        match tokio::time::timeout(
            QUERY_TIMEOUT,
            sqlx::query_as::<_, Row>(q).fetch_one(&mut *conn),
        )
        .await
        {
            Ok(Ok(r)) => Some(r),
            Ok(Err(sqlx::Error::Database(e))) if !self.no_wal => {
                // Most likely pg_stat_wal is missing (PostgreSQL < 14).
                let _ = e;
                self.no_wal = true;
                None
            }
            _ => {
                // Timeout or broken connection: drop it and reconnect later.
                self.conn = None;
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                None
            }
        }
    }

    pub(crate) async fn sample(&mut self) -> Metrics {
        let row = self.query().await;
        let now = Instant::now();
        let dt = self
            .last
            .map(|l| now.saturating_duration_since(l).as_secs_f64())
            .filter(|d| *d > 0.0);
        self.last = Some(now);
        let u = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        let (commits, wal, dead, av, size, backends, pgmq_bytes, pgmq_rows) = match row {
            Some(r) => (
                u(r.0),
                r.1.filter(|w| *w >= 0.0).map(|w| w as u64),
                r.2,
                u(r.3),
                r.4,
                r.5,
                r.6,
                r.7,
            ),
            None => (None, None, None, None, None, None, None, None),
        };
        let per_s = |d: Option<u64>| dt.and_then(|dt| d.map(|d| d as f64 / dt));
        let vals = [
            per_s(self.commits.delta(commits)),
            per_s(self.wal.delta(wal)),
            dead.map(|v| v as f64),
            self.autovacuum.delta(av).map(|d| d as f64),
            size.map(|v| v as f64),
            backends.map(|v| v as f64),
            pgmq_bytes.map(|v| v as f64),
            pgmq_rows.map(|v| v as f64),
        ];
        PG_METRICS
            .iter()
            .zip(vals)
            .map(|(m, v)| (m.to_string(), v))
            .collect()
    }
}
