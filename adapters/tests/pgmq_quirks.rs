//! pgmq behaviour beyond the adapter contract (the contract itself is the shared
//! suite: contract_pgmq.rs): one queue per (topic, group) and one row per group per
//! publish, the other grouped read (`read_fn: rr`) and the other ack (`ack: archive`).
//!
//! Needs PostgreSQL + pgmq on 127.0.0.1:5432 (scripts/provision/pgmq.sh). When it is
//! not there the tests print SKIP and pass, unless `CI` is set (then they fail).
#![cfg(feature = "pgmq")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use adapters::pgmq::options::{AckMode, ReadFn};
use adapters::pgmq::{PgmqBroker, PgmqOptions};
use adapters::{Broker, FanOut};
use support::contract::DEADLINE;
use support::{keys, publish_interleaved, topology, Consumers, Recorder};

/// One test at a time: they share the server and the 2 cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Materialised fan-out: a queue per (topic, group), a row per group per message,
/// keys hashed onto the lanes of every queue, the visibility timeout as the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_describes_one_queue_per_group() {
    if !support::ready::pgmq().await {
        return;
    }
    let _serial = SERIAL.lock().await;
    let b = PgmqBroker::new(PgmqOptions {
        visibility_timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .unwrap();
    let d = b
        .setup(&topology("qpg_describe", &["g-1", "g-2"], 20, 4))
        .await
        .expect("setup");
    assert_eq!(d.variant, "read_grouped_head/delete");
    assert_eq!(d.fan_out, FanOut::Materialised);
    assert_eq!(d.physical_queues, 2, "one queue per group");
    assert_eq!(d.ordered_lanes, 8, "4 lanes in each group's queue");
    assert_eq!(d.publishes_per_ingress_event, 2.0, "one row per group");
    assert_eq!(d.lease_ms, Some(5000));
    // The server's autovacuum is in the record, as the server has it (a CI image
    // can turn it off: then every figure that outlives a few seconds depends on it).
    let pool = sqlx::PgPool::connect(&PgmqOptions::default().dsn)
        .await
        .expect("connect");
    let autovacuum: String = sqlx::query_scalar("SELECT current_setting('autovacuum')")
        .fetch_one(&pool)
        .await
        .expect("autovacuum");
    assert!(
        d.notes[0].ends_with(&format!("autovacuum={autovacuum}")),
        "{:?}",
        d.notes
    );
    assert_eq!(
        d.notes.iter().any(|n| n.starts_with("autovacuum is off")),
        autovacuum != "on",
        "{:?}",
        d.notes
    );
    let c = b.counters();
    assert_eq!(c["pgmq_queues"], 2);
    assert_eq!(c["pgmq_lanes"], 4);
    b.close().await.unwrap();
}

/// `read_grouped_rr` hands over several messages of a key per read (head reads give
/// one), in order. One reader: rr races under several (PgmqOptions::read_fn says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_rr_reads_several_messages_per_key() {
    if !support::ready::pgmq().await {
        return;
    }
    let _serial = SERIAL.lock().await;
    let b = Arc::new(
        PgmqBroker::new(PgmqOptions {
            read_fn: ReadFn::Rr,
            readers: 1,
            visibility_timeout: Duration::from_secs(5),
            ..Default::default()
        })
        .unwrap(),
    );
    let topic = "qpg_rr";
    let d = b
        .setup(&topology(topic, &["g"], 4, 4))
        .await
        .expect("setup");
    assert_eq!(d.variant, "read_grouped_rr/delete");
    let names = keys(4);
    publish_interleaved(&*b, topic, &names, 0..10, 10).await;
    let rec = Recorder::new("g").arc();
    let run = Consumers::start(&b, topic, std::slice::from_ref(&rec), 10, 8);
    rec.wait_for(40, DEADLINE).await;
    run.finish().await;
    rec.assert_in_order(&names, 10, "");
    assert!(
        rec.largest_batch() > 1,
        "read_grouped_rr gave one message per batch"
    );
    b.close().await.unwrap();
}

/// `ack: archive` moves acknowledged rows into the queue's archive table: the queue is
/// empty afterwards and the archive holds every message once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_archive_moves_acked_rows_to_the_archive() {
    if !support::ready::pgmq().await {
        return;
    }
    let _serial = SERIAL.lock().await;
    let opts = PgmqOptions {
        ack: AckMode::Archive,
        ..Default::default()
    };
    let dsn = opts.dsn.clone();
    let b = Arc::new(PgmqBroker::new(opts).unwrap());
    let topic = "qpg_archive";
    let d = b
        .setup(&topology(topic, &["g"], 3, 3))
        .await
        .expect("setup");
    assert_eq!(d.variant, "read_grouped_head/archive");
    let names = keys(3);
    publish_interleaved(&*b, topic, &names, 0..5, 5).await;
    let rec = Recorder::new("g").arc();
    let run = Consumers::start(&b, topic, std::slice::from_ref(&rec), 10, 8);
    rec.wait_for(15, DEADLINE).await;
    run.finish().await;
    rec.assert_in_order(&names, 5, "");
    assert_eq!(b.counters()["pgmq_rows_acked"], 15);
    b.close().await.unwrap();

    let pool = sqlx::PgPool::connect(&dsn).await.expect("connect");
    let count = |table: &str| {
        let sql = format!("SELECT count(*) FROM pgmq.{table}");
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
                .fetch_one(&pool)
                .await
                .expect("count")
        }
    };
    // pgmq's tables for queue `qpg_archive_g`: q_<queue> and a_<queue>.
    assert_eq!(count("q_qpg_archive_g").await, 0, "rows left in the queue");
    assert_eq!(count("a_qpg_archive_g").await, 15, "rows in the archive");
    pool.close().await;
}
