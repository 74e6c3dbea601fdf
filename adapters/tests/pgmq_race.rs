//! Finding F3 as the seed ran it, in short: pgmq's grouped reads raced by 8 bare
//! readers (`adapters::pgmq::race`, reached through the adapter's
//! `Broker::exclusivity_probe`, no in-flight key guard) for 5 s each.
//! `read_grouped_head` never hands a group to two readers at once (0 breaches);
//! `read_grouped_rr`'s breaches are counted and reported, never asserted (their
//! number depends on the machine's speed). The counting itself is shown to work on
//! the ungrouped control `pgmq.read` over 4 groups, where 8 readers holding 10 rows
//! each for 5 ms must overlap on a group.
//!
//! Needs PostgreSQL + pgmq on 127.0.0.1:5432 (scripts/provision/pgmq.sh). When it is
//! not there the tests print SKIP and pass, unless `CI` is set (then they fail).
//! Queues are `cbf3t_…`, dropped after each run. The 90 s runs at 4/16/64 readers
//! are `crossbench selftest race` (docs/performance.md).
#![cfg(feature = "pgmq")]

mod support;

use std::time::Duration;

use adapters::pgmq::{PgmqBroker, PgmqOptions};
use adapters::race::{RacePlan, RaceReport};
use adapters::Broker;

/// One test at a time: they share the server and the 2 cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn plan(read_fn: &str, keys: u64, secs: u64) -> RacePlan {
    RacePlan {
        read_fn: read_fn.into(),
        readers: 8,
        window: Duration::from_secs(secs),
        keys,
        backlog: 2000,
        read_qty: 10,
        hold: Duration::from_millis(5),
        visibility_timeout_s: 30,
        queue_prefix: "cbf3t_".into(),
    }
}

async fn run(p: &RacePlan) -> RaceReport {
    let b = PgmqBroker::new(PgmqOptions::default()).expect("default options");
    let probe = b.exclusivity_probe().expect("pgmq offers a race probe");
    let r = probe.run(p).await.expect("race run");
    println!("{r:?}");
    assert!(r.rows_read > 0, "{} read nothing: {r:?}", p.read_fn);
    assert_eq!(r.errors, 0, "{r:?}");
    assert!(
        r.deferred_rows >= r.breaches,
        "every breach defers a row: {r:?}"
    );
    assert!(r.breached_keys <= p.keys, "{r:?}");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_never_breaches_and_rr_is_counted() {
    if !support::ready::pgmq().await {
        return;
    }
    let _serial = SERIAL.lock().await;
    let head = run(&plan("read_grouped_head", 20, 5)).await;
    assert_eq!(
        head.breaches, 0,
        "read_grouped_head handed a group to two readers at once: {head:?}"
    );
    assert_eq!(head.breached_keys, 0);
    let rr = run(&plan("read_grouped_rr", 20, 5)).await;
    println!(
        "read_grouped_rr, 8 readers, 5 s: {} breaches ({:.0} per 90 s), {:.0} rows/s",
        rr.breaches,
        rr.breaches_per_90s(),
        rr.rows_per_s()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_counts_the_breaches_of_an_ungrouped_read() {
    if !support::ready::pgmq().await {
        return;
    }
    let _serial = SERIAL.lock().await;
    let plain = run(&plan("read", 4, 3)).await;
    assert!(
        plain.breaches > 0,
        "8 readers of plain pgmq.read over 4 groups, each holding 10 rows for 5 ms, must \
         overlap on a group; the probe counted none: {plain:?}"
    );
    assert!(
        plain.breached_keys >= 1 && plain.breached_keys <= 4,
        "{plain:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_read_function_is_refused_before_anything_is_created() {
    let b = PgmqBroker::new(PgmqOptions::default()).expect("default options");
    let probe = b.exclusivity_probe().expect("pgmq offers a race probe");
    let e = probe
        .run(&plan("read_grouped_xx", 4, 1))
        .await
        .expect_err("unknown function");
    assert!(e.to_string().contains("read_grouped_rr"), "{e}");
}
