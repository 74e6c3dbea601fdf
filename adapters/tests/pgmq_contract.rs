//! The pgmq adapter against a real PostgreSQL + pgmq (scripts/provision/pgmq.sh).
//! Skips (or fails under `CI`) when the server is not reachable.
#![cfg(feature = "pgmq")]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use adapters::pgmq::{PgmqBroker, PgmqOptions};
use adapters::{Broker, StreamCounters};
use support::{keys, publish_interleaved, topology, wait_all, Consumers, Recorder};

/// True when PostgreSQL answers on 127.0.0.1:5432 and has pgmq in `crossbench`.
async fn pg_ready(probe: &str) -> bool {
    const PROVISION: &str = "scripts/provision/pgmq.sh";
    support::reachable("127.0.0.1:5432", "PostgreSQL", PROVISION) && {
        let b = PgmqBroker::new(PgmqOptions::default()).unwrap();
        let mut t = topology(probe, &["g"], 1, 1);
        t.reset = false;
        b.setup(&t).await.is_ok()
            || support::absent("pgmq (in database crossbench)", "127.0.0.1:5432", PROVISION)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_in_order_per_key_two_groups() {
    if !pg_ready("probe-1").await {
        return;
    }
    let opts = PgmqOptions {
        readers: 3,
        visibility_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let b = Arc::new(PgmqBroker::new(opts).unwrap());
    let topic = "it-order";
    let d = b
        .setup(&topology(topic, &["g-1", "g-2"], 10, 10))
        .await
        .expect("setup");
    assert_eq!(d.physical_queues, 2);
    assert_eq!(d.publishes_per_ingress_event, 2.0);
    assert_eq!(d.lease_ms, Some(5000));

    // 10 keys x 30 messages, published in batches of 5 with keys interleaved.
    let names = keys(10);
    publish_interleaved(&*b, topic, &names, 0..30, 5).await;
    let recs = [Recorder::new("g-1").arc(), Recorder::new("g-2").arc()];
    let consumers = Consumers::start(&b, topic, &recs, 4, 16);
    wait_all(&recs, 300, Duration::from_secs(30)).await;
    let counters = consumers.finish().await;
    for (rec, counters) in recs.iter().zip(&counters) {
        assert_eq!(rec.processed(), 300, "every message once");
        rec.assert_in_order(&names, 30, "");
        assert_eq!(StreamCounters::get(&counters.acked), 300);
        assert_eq!(StreamCounters::get(&counters.receive_errors), 0);
    }
    let c: BTreeMap<String, u64> = b.counters();
    assert_eq!(
        c["pgmq_rows_sent"], 600,
        "materialised fan-out: one row per group"
    );
    assert_eq!(c["pgmq_logical_publishes"], 300);
    assert_eq!(c["pgmq_rows_acked"], 600);
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_refused_batch_comes_back_after_visibility_timeout() {
    if !pg_ready("probe-2").await {
        return;
    }
    let opts = PgmqOptions {
        readers: 2,
        visibility_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let b = Arc::new(PgmqBroker::new(opts).unwrap());
    let topic = "it-refuse";
    b.setup(&topology(topic, &["g"], 3, 3))
        .await
        .expect("setup");
    publish_interleaved(&*b, topic, &keys(3), 0..4, 4).await;
    let rec = Recorder::new("g").refusing(Some(("p1".into(), 2))).arc();
    let consumers = Consumers::start(&b, topic, std::slice::from_ref(&rec), 10, 8);
    rec.wait_for(12, Duration::from_secs(20)).await;
    let counters = consumers.finish().await;

    assert_eq!(
        rec.processed(),
        12,
        "the refused message came back and was processed"
    );
    let (refused_at, back_at) = rec.refused_then_back();
    let refused_at = refused_at.expect("refused once");
    let back_at = back_at.expect("redelivered, flagged redelivered");
    let waited = back_at - refused_at;
    assert!(
        waited >= Duration::from_millis(1500),
        "came back after {waited:?}, before the 2 s visibility timeout"
    );
    assert_eq!(
        rec.seqs("p1"),
        vec![0, 1, 2, 3],
        "key order survives the redelivery"
    );
    assert!(
        rec.deliveries("p1")[2].1,
        "the redelivered message is flagged"
    );
    assert_eq!(StreamCounters::get(&counters[0].refused), 1);
    assert!(StreamCounters::get(&counters[0].redelivered) >= 1);
    assert_eq!(rec.overlaps(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_lanes_below_keys_hash_keys_onto_groups() {
    if !pg_ready("probe-3").await {
        return;
    }
    let b = Arc::new(PgmqBroker::new(PgmqOptions::default()).unwrap());
    let topic = "it-lanes";
    let d = b
        .setup(&topology(topic, &["g"], 20, 4))
        .await
        .expect("setup");
    assert_eq!(d.ordered_lanes, 4);
    let names = keys(20);
    publish_interleaved(&*b, topic, &names, 0..2, 2).await;
    let rec = Recorder::new("g").arc();
    let consumers = Consumers::start(&b, topic, std::slice::from_ref(&rec), 50, 8);
    rec.wait_for(40, Duration::from_secs(20)).await;
    consumers.finish().await;
    assert_eq!(rec.processed(), 40);
    rec.assert_in_order(&names, 2, "");
}

#[tokio::test]
async fn pgmq_unreachable_server_is_a_clear_error_without_password() {
    // Port 1 on loopback: nothing listens there.
    let b = PgmqBroker::new(PgmqOptions {
        dsn: "postgres://u:hunter2@127.0.0.1:1/crossbench".into(),
        ..Default::default()
    })
    .unwrap();
    let e = b
        .setup(&{
            let mut t = topology("x", &["g"], 1, 1);
            t.reset = false;
            t
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("provision"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");
}
