//! Queen's store: the PostgreSQL database a Queen server keeps its queues in, reached
//! directly when the scenario names it (`queen.store_dsn`).
//!
//! Queen's tables outlive every cell: a reset deletes a cell's queues, but the dead row
//! versions its messages, cursors and leases left behind stay until a VACUUM reclaims
//! them. On a server with `autovacuum = off` (the image these machines run) nothing
//! does, and each cell of a campaign runs on a bigger heap than the one before: one
//! sparse cell served 99, 46, 27, 26 and 21 % of its demand in five repeats, and 100 %
//! after one `VACUUM (ANALYZE)` (docs/performance.md, "Campaigns: the findings"). So a
//! cell given the store vacuums it at setup, after the reset and before any traffic,
//! and its record says what it found and how long it took: the vacuum is part of the
//! method, not a loop beside it.

use std::time::{Duration, Instant};

use sqlx::Connection;

use crate::error::BrokerError;
use crate::pg_settings::ServerSettings;

/// The longest a store's VACUUM may take before the cell is refused (a store that
/// needs longer needs a VACUUM FULL or a fresh database before measuring).
pub const VACUUM_LIMIT: Duration = Duration::from_secs(600);

/// What a vacuum of the store found and did.
#[derive(Debug, Clone, PartialEq)]
pub struct Vacuumed {
    /// The server's `fsync`, `synchronous_commit` and `autovacuum`.
    pub settings: ServerSettings,
    /// The database's name (`current_database()`).
    pub database: String,
    /// Dead row versions in the database's tables before the VACUUM, as the server's
    /// statistics count them.
    pub dead_rows_before: i64,
    /// The database's size after the VACUUM, bytes (a plain VACUUM keeps the pages it
    /// freed, so this is the heap the cell runs on).
    pub bytes_after: i64,
    /// How long `VACUUM (ANALYZE)` took.
    pub took: Duration,
}

impl Vacuumed {
    /// The record's notes.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = vec![format!(
            "Queen store (database {}) vacuumed at setup: VACUUM (ANALYZE) took {:.1} s and found {} dead row versions; {:.0} MiB after; {}",
            self.database,
            self.took.as_secs_f64(),
            self.dead_rows_before,
            self.bytes_after as f64 / (1024.0 * 1024.0),
            self.settings.describe()
        )];
        if !self.settings.autovacuums() {
            notes.push("autovacuum is off on Queen's PostgreSQL: the dead rows this cell leaves stay until the next cell's setup vacuums them, so the cell's own dead rows still grow while it runs".into());
        }
        notes
    }
}

/// The record's note when no store is given.
pub const NOT_VACUUMED: &str = "Queen store not vacuumed at setup (no queen.store_dsn): on a PostgreSQL with autovacuum off, the dead rows of earlier cells slow this one (docs/perf-queen.md)";

fn err(dsn: &str, what: &str, e: impl std::fmt::Display) -> BrokerError {
    BrokerError::Connection(crate::redact::redact_url_passwords(&format!(
        "queen.store_dsn {dsn}: {what}: {e}"
    )))
}

/// Connect to the store, read its settings and dead rows, `VACUUM (ANALYZE)` the whole
/// database, and say what it found. Refused (an error) when the VACUUM takes longer
/// than `limit`.
pub async fn vacuum(dsn: &str, limit: Duration) -> Result<Vacuumed, BrokerError> {
    // No TLS unless the DSN asks for it (`sslmode=`), as pgmq: the server's offer is
    // not taken up silently.
    let opts = crate::tls::plain_unless_asked(dsn)
        .parse::<sqlx::postgres::PgConnectOptions>()
        .map_err(|e| err(dsn, "parse", e))?;
    let mut conn = tokio::time::timeout(
        Duration::from_secs(10),
        <sqlx::PgConnection as sqlx::Connection>::connect_with(&opts),
    )
    .await
    .map_err(|_| err(dsn, "connect", "no answer in 10 s"))?
    .map_err(|e| err(dsn, "connect", e))?;
    let settings = ServerSettings::read(&mut conn)
        .await
        .map_err(|e| err(dsn, "read its settings", e))?;
    let (database, dead_rows_before): (String, i64) = sqlx::query_as(
        "SELECT current_database()::text, \
         (SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables)",
    )
    .fetch_one(&mut conn)
    .await
    .map_err(|e| err(dsn, "read its dead rows", e))?;
    let started = Instant::now();
    // The simple query protocol: VACUUM cannot run inside a transaction block.
    tokio::time::timeout(limit, sqlx::raw_sql("VACUUM (ANALYZE)").execute(&mut conn))
        .await
        .map_err(|_| {
            err(
                dsn,
                "VACUUM (ANALYZE)",
                format!(
                    "took over {} s; vacuum it by hand (or give the server a fresh database) before measuring",
                    limit.as_secs()
                ),
            )
        })?
        .map_err(|e| err(dsn, "VACUUM (ANALYZE)", e))?;
    let took = started.elapsed();
    let (bytes_after,): (i64,) = sqlx::query_as("SELECT pg_database_size(current_database())")
        .fetch_one(&mut conn)
        .await
        .map_err(|e| err(dsn, "read its size", e))?;
    let _ = conn.close().await;
    Ok(Vacuumed {
        settings,
        database,
        dead_rows_before,
        bytes_after,
        took,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(autovacuum: &str) -> Vacuumed {
        Vacuumed {
            settings: ServerSettings {
                fsync: "on".into(),
                synchronous_commit: "on".into(),
                autovacuum: autovacuum.into(),
                shared_buffers: "128MB".into(),
                server_version: "15.20".into(),
                version: "PostgreSQL 15.20".into(),
            },
            database: "queen".into(),
            dead_rows_before: 1_135_471,
            bytes_after: 600 * 1024 * 1024,
            took: Duration::from_millis(3900),
        }
    }

    #[test]
    fn notes_state_what_was_found_and_warn_when_autovacuum_is_off() {
        let on = v("on").notes();
        assert_eq!(on.len(), 1, "{on:?}");
        assert!(on[0].contains("database queen"), "{on:?}");
        assert!(on[0].contains("took 3.9 s"), "{on:?}");
        assert!(on[0].contains("1135471 dead row versions"), "{on:?}");
        assert!(on[0].contains("600 MiB"), "{on:?}");
        assert!(on[0].contains("autovacuum=on"), "{on:?}");
        let off = v("off").notes();
        assert_eq!(off.len(), 2, "{off:?}");
        assert!(off[1].starts_with("autovacuum is off"), "{off:?}");
    }

    #[test]
    fn errors_never_carry_the_password() {
        let e = err("postgres://u:hunter2@127.0.0.1/queen", "connect", "refused");
        let t = e.to_string();
        assert!(!t.contains("hunter2"), "{t}");
        assert!(t.contains("queen.store_dsn"), "{t}");
    }
}
