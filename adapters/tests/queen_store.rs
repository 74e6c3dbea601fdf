//! Queen's store vacuum (`queen.store_dsn`) against the real PostgreSQL on
//! 127.0.0.1:5432, without a Queen server: a database with dead rows in it is what a
//! Queen store becomes over a campaign on a server with `autovacuum = off`. The
//! vacuum must reclaim them (the server's own statistics say so) and report what it
//! found; a store that cannot be reached is an error naming the field, without the
//! password.
//!
//! Needs PostgreSQL (scripts/provision/pgmq.sh); when it is not there the tests print
//! SKIP and pass, unless `CI` is set (then they fail).
#![cfg(feature = "queen")]

mod support;

use std::time::Duration;

use adapters::queen::store::{vacuum, VACUUM_LIMIT};
use sqlx::Connection;
use support::reachable;

const ADMIN: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const DB: &str = "crossbench_queen_store_test";

async fn scratch_db() -> String {
    let mut admin = sqlx::PgConnection::connect(ADMIN).await.expect("connect");
    sqlx::raw_sql("DROP DATABASE IF EXISTS crossbench_queen_store_test WITH (FORCE)")
        .execute(&mut admin)
        .await
        .expect("drop");
    sqlx::raw_sql("CREATE DATABASE crossbench_queen_store_test")
        .execute(&mut admin)
        .await
        .expect("create");
    format!("postgres://postgres@127.0.0.1:5432/{DB}")
}

/// (vacuum_count, n_dead_tup) of `t`, in a connection of its own (a fresh
/// statistics snapshot).
async fn stats(dsn: &str, t: &str) -> (i64, i64) {
    let mut c = sqlx::PgConnection::connect(dsn).await.expect("connect");
    let r = sqlx::query_as(
        "SELECT vacuum_count, n_dead_tup FROM pg_stat_user_tables WHERE relname = $1",
    )
    .bind(t)
    .fetch_one(&mut c)
    .await
    .expect("stats");
    let _ = c.close().await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_is_vacuumed_and_the_record_says_what_it_found() {
    if !reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    let dsn = scratch_db().await;
    {
        // What a cell leaves in Queen's tables: rows inserted, then deleted.
        let mut c = sqlx::PgConnection::connect(&dsn).await.expect("connect");
        sqlx::raw_sql(
            "CREATE TABLE messages (id bigint PRIMARY KEY, body text);
             INSERT INTO messages SELECT g, repeat('x', 100) FROM generate_series(1, 5000) g;
             DELETE FROM messages;",
        )
        .execute(&mut c)
        .await
        .expect("fill");
        // Closing flushes this backend's statistics (the dead rows) to the server.
        c.close().await.expect("close");
    }
    // PostgreSQL publishes a closed backend's counts at once from version 15, within a
    // second before: wait until the dead rows are counted, as the vacuum will read them.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stats(&dsn, "messages").await.1 < 5000 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (vacuums_before, dead_before) = stats(&dsn, "messages").await;
    assert_eq!(dead_before, 5000, "the deleted rows are dead row versions");

    let v = vacuum(&dsn, VACUUM_LIMIT).await.expect("vacuum");
    assert_eq!(v.database, DB);
    assert!(
        v.dead_rows_before >= 5000,
        "the record counts the dead rows it found: {v:?}"
    );
    assert!(v.bytes_after > 0, "{v:?}");
    // The settings are the server's own.
    let mut c = sqlx::PgConnection::connect(&dsn).await.expect("connect");
    let (autovacuum,): (String,) = sqlx::query_as("SELECT current_setting('autovacuum')")
        .fetch_one(&mut c)
        .await
        .expect("setting");
    let _ = c.close().await;
    assert_eq!(v.settings.autovacuum, autovacuum);
    let notes = v.notes();
    assert!(
        notes[0].contains(&format!("autovacuum={autovacuum}")),
        "{notes:?}"
    );
    assert_eq!(notes.len(), if autovacuum == "on" { 1 } else { 2 });

    // The server says the table was vacuumed and holds no dead rows any more.
    let (vacuums_after, dead_after) = stats(&dsn, "messages").await;
    assert_eq!(
        vacuums_after,
        vacuums_before + 1,
        "one VACUUM ran on the table"
    );
    assert_eq!(dead_after, 0, "the VACUUM reclaimed the dead rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_names_the_field_without_the_password() {
    // Port 9 (discard) on loopback: nothing answers, the connect is refused at once.
    let e = vacuum(
        "postgres://bench:hunter2@127.0.0.1:9/queen",
        Duration::from_secs(5),
    )
    .await
    .expect_err("nothing listens there");
    let t = e.to_string();
    assert!(t.contains("queen.store_dsn"), "{t}");
    assert!(!t.contains("hunter2"), "{t}");
}
