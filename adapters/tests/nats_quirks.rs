//! NATS JetStream behaviour beyond the adapter contract (the contract itself is the
//! shared suite: contract_nats.rs): a refused batch is nak'd with the ack wait as its
//! delay and comes back only after it (the server counts the redelivery), dedup by
//! `Nats-Msg-Id` on and off, and the durability tiers.
//!
//! Needs NATS with JetStream on 127.0.0.1:4222 (scripts/provision/nats.sh). When it is
//! not there the tests print SKIP and pass, unless `CI` is set (then they fail).
#![cfg(feature = "nats")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use adapters::nats::{NatsBroker, NatsOptions};
use adapters::{Broker, Durability, ErrorClass, FanOut, StreamCounters};
use support::contract::DEADLINE;
use support::{keys, payload, publish_interleaved, topology, Consumers, Recorder};

/// One test at a time: they share the server and the 2 cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const ACK_WAIT: Duration = Duration::from_secs(2);

fn broker() -> Arc<NatsBroker> {
    Arc::new(
        NatsBroker::new(NatsOptions {
            ack_wait: ACK_WAIT,
            ..Default::default()
        })
        .unwrap(),
    )
}

/// A refused batch is nak'd with the ack wait as its delay: it is back no sooner
/// than the lease after the refusal, whole, and the server's consumer info counts
/// its redelivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_refused_batch_comes_back_after_the_ack_wait() {
    if !support::ready::nats() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let b = broker();
    let d = b
        .setup(&topology("qn_refuse", &["g"], 2, 2))
        .await
        .expect("setup");
    assert_eq!(d.lease_ms, Some(2000));
    assert_eq!(d.fan_out, FanOut::Native);
    let names = keys(2);
    publish_interleaved(&*b, "qn_refuse", &names, 0..6, 6).await;
    let rec = Recorder::new("g").refusing(Some(("p0".into(), 0))).arc();
    let run = Consumers::start(&b, "qn_refuse", std::slice::from_ref(&rec), 10, 4);
    rec.wait_for(12, DEADLINE).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counters = run.finish().await;
    let (refused_at, back_at) = rec.refused_then_back();
    let waited = back_at.expect("back") - refused_at.expect("refused");
    assert!(
        waited + Duration::from_millis(50) >= ACK_WAIT,
        "the refused batch came back {waited:?} after the refusal, before the {ACK_WAIT:?} ack wait"
    );
    rec.assert_in_order(&names, 6, "nats refused");
    // The refused batch is what the fetch returned with p0's seq 0: all six of p0's
    // messages, or fewer when the server handed them out in more than one fetch (seen
    // once on a loaded machine: 1). Whatever its size, the stage's count, the
    // adapter's and its naks agree.
    let refused = StreamCounters::get(&counters[0].refused);
    assert!((1..=6).contains(&refused), "refused {refused}");
    let c = b.counters();
    assert_eq!(c["nats_refused"], refused, "{c:?}");
    assert!(c["nats_naks"] >= refused, "{c:?}");
    assert!(
        c["nats_server_num_redelivered"] == 0 && c["nats_server_num_ack_pending"] == 0,
        "everything acked at the end: {c:?}"
    );
    assert_eq!(c["nats_server_num_pending"], 0, "{c:?}");
    assert_eq!(c["nats_server_stream_messages"], 12, "{c:?}");
    b.close().await.unwrap();
}

/// Publish every message twice (a producer retrying): the copies a group gets.
async fn doubled(dedup_window_sec: u64, topic: &str) -> (u64, u64, Arc<NatsBroker>) {
    let b = broker();
    let mut t = topology(topic, &["g"], 2, 2);
    t.dedup_window_sec = dedup_window_sec;
    let d = b.setup(&t).await.expect("setup");
    assert!(
        d.notes.iter().any(|n| n.contains(if dedup_window_sec > 0 {
            "duplicate_window"
        } else {
            "dedup off"
        })),
        "{:?}",
        d.notes
    );
    let names = keys(2);
    for _ in 0..2 {
        for k in &names {
            let ps: Vec<_> = (0..10).map(|s| payload(k, s)).collect();
            b.publish(topic, k, &ps).await.expect("publish");
        }
    }
    let rec = Recorder::new("g").arc();
    let run = Consumers::start(&b, topic, std::slice::from_ref(&rec), 10, 4);
    let want = if dedup_window_sec > 0 { 20 } else { 40 };
    rec.wait_for(want, DEADLINE).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    run.finish().await;
    (rec.log().len() as u64, b.counters()["nats_duplicates"], b)
}

/// Dedup on: the second copy of every message is acknowledged as a duplicate and never
/// stored; off: both copies are stored and delivered. Duplicates are counted in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_dedup_by_msg_id_on_and_off() {
    if !support::ready::nats() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let (delivered, dups, b) = doubled(60, "qn_dedup_on").await;
    assert_eq!(dups, 20, "every second publish is a duplicate");
    assert_eq!(delivered, 20, "each message delivered once");
    assert_eq!(b.counters()["nats_server_stream_messages"], 20);
    let (delivered, dups, b) = doubled(0, "qn_dedup_off").await;
    assert_eq!(dups, 0, "no Nats-Msg-Id, no duplicate seen by the server");
    assert_eq!(delivered, 40, "both copies stored and delivered");
    assert_eq!(b.counters()["nats_server_stream_messages"], 40);
}

/// File storage is the default tier (the server's sync interval stated), memory
/// storage the memory tier; fsync is refused unless the operator states
/// `sync_interval: always`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_durability_tiers() {
    if !support::ready::nats() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let b = broker();
    let d = b.setup(&topology("qn_tier", &["g"], 2, 2)).await.unwrap();
    assert_eq!(d.durability, Durability::Default);
    assert_eq!(d.variant, "lane-consumers/file");
    assert!(
        d.notes.iter().any(|n| n.contains("sync_interval = 2m")),
        "{:?}",
        d.notes
    );
    let mut t = topology("qn_tier", &["g"], 2, 2);
    t.durability = Durability::Memory;
    let d = b.setup(&t).await.unwrap();
    assert_eq!(d.durability, Durability::Memory);
    assert_eq!(d.variant, "lane-consumers/memory");
    t.durability = Durability::Fsync;
    let e = b.setup(&t).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Config, "{e}");
    assert!(e.to_string().contains("sync_interval"), "{e}");
}

/// A batch whose handler outlasts the ack wait is redelivered by the server while it
/// is still being handled; the copy arrives after the batch was acked and is acked
/// again, never handed twice (found by the sparse cell: 6151 duplicates before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_redelivery_of_an_acked_batch_is_not_handed_twice() {
    if !support::ready::nats() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let b = Arc::new(
        NatsBroker::new(NatsOptions {
            ack_wait: Duration::from_millis(500),
            ..Default::default()
        })
        .unwrap(),
    );
    b.setup(&topology("qn_slow", &["g"], 2, 2)).await.unwrap();
    let names = keys(2);
    publish_interleaved(&*b, "qn_slow", &names, 0..5, 5).await;
    let rec = Recorder::new("g")
        .slow_key("p0", Duration::from_millis(250))
        .arc();
    let run = Consumers::start(&b, "qn_slow", std::slice::from_ref(&rec), 10, 4);
    rec.wait_for(10, DEADLINE).await;
    // Long enough for the server's redeliveries to arrive and be recognised.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    run.finish().await;
    rec.assert_in_order(&names, 5, "nats slow batch");
    let c = b.counters();
    assert!(
        c["nats_stale_redeliveries"] > 0,
        "no redelivery seen: {c:?}"
    );
    assert_eq!(c["nats_acked"], 10, "{c:?}");
}
