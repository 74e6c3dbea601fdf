//! Queen behaviour beyond the adapter contract (the contract itself is the shared
//! suite: contract_queen.rs): what each pop mode is, the targeted sweep's bound on
//! leases, a reset that keeps other queues' cursors, `delayed_processing`, and the
//! dedup window's feature detection.
//!
//! Needs `CROSSBENCH_QUEEN_URL` (e.g. `http://127.0.0.1:6632`, see
//! compose/queen/README.md); without it every test skips with a message, also under
//! `CI` (CI cannot provision Queen). With it set, a server that does not answer fails
//! the tests.
#![cfg(feature = "queen")]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::queen::{PopMode, QueenBroker, QueenOptions};
use adapters::{Broker, DeliveryGuarantee, StreamCounters};
use support::{keys, publish_interleaved, queen_url, topology, wait_all, Consumers, Recorder};

fn options(url: &str, mode: PopMode) -> QueenOptions {
    QueenOptions {
        url: url.into(),
        mode,
        lease_time: Duration::from_secs(5),
        long_poll: Duration::from_millis(500),
        sweep_floor: Duration::from_millis(10),
        // Auto-ack allows one pop loop per stream (it releases partitions at pop).
        pop_workers: if mode == PopMode::AutoAck { 1 } else { 3 },
        partitions_per_pop: 3,
        ..Default::default()
    }
}

/// Topic names unique per test run, so runs never see each other's leftovers.
fn unique(name: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 1_000_000_000;
    format!("it-{name}-{n}")
}

/// What each pop mode is, beyond the contract: its variant and guarantee (auto-ack
/// is at-most-once), one queue per topic, native fan-out (one push serves both groups,
/// each pops its own copy), auto-ack sends no acks, targeted pops sweep, and nothing
/// failed on the way.
async fn mode_describes_itself(mode: PopMode, name: &str) {
    let Some(url) = queen_url(name) else { return };
    let b = Arc::new(QueenBroker::new(options(&url, mode)).unwrap());
    let topic = unique(name);
    let (keys_n, per_key) = (4u64, 5u64);
    let d = b
        .setup(&topology(&topic, &["g-1", "g-2"], keys_n, keys_n))
        .await
        .expect("setup (is the Queen server at CROSSBENCH_QUEEN_URL up?)");
    eprintln!("Queen server version {}", b.server_version());
    assert_eq!(d.system, "queen");
    assert_eq!(d.variant, mode.name());
    assert_eq!(d.physical_queues, 1);
    let want_guarantee = if mode == PopMode::AutoAck {
        DeliveryGuarantee::AtMostOnce
    } else {
        DeliveryGuarantee::AtLeastOnce
    };
    assert_eq!(d.delivery, want_guarantee);
    let names = keys(keys_n);
    publish_interleaved(&*b, &topic, &names, 0..per_key, 5).await;
    let recs = [Recorder::new("g-1").arc(), Recorder::new("g-2").arc()];
    let consumers = Consumers::start(&b, &topic, &recs, 4, 16);
    let all = keys_n * per_key;
    wait_all(&recs, all, Duration::from_secs(60)).await;
    consumers.finish().await;
    for rec in &recs {
        rec.assert_in_order(&names, per_key, "");
    }
    let c: BTreeMap<String, u64> = b.counters();
    assert_eq!(
        c["queen_messages_pushed"], all,
        "one push serves both groups"
    );
    assert_eq!(
        c["queen_messages_popped"],
        2 * all,
        "each group pops its copy"
    );
    if mode == PopMode::AutoAck {
        assert_eq!(c["queen_ack_requests"], 0, "auto-ack sends no acks");
    }
    if mode == PopMode::Targeted {
        assert!(c["queen_sweeps"] > 0);
    }
    assert!(
        !c.keys().any(|k| k.starts_with("queen_errors_")),
        "no request failed: {c:?}"
    );
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_wildcard_describes_itself() {
    mode_describes_itself(PopMode::Wildcard, "mode-wild").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_targeted_describes_itself() {
    mode_describes_itself(PopMode::Targeted, "mode-targ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_auto_ack_describes_itself() {
    mode_describes_itself(PopMode::AutoAck, "mode-auto").await;
}

/// A stage slower than the pops (2 handler calls at once, 150 ms each) with a 1 s
/// lease: the targeted sweep must not lease more partitions than the stage can take,
/// or batches wait past their lease, the server hands them out again and their acks
/// fail ("Invalid or expired lease"). Every message exactly once, no ack error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_targeted_never_leases_more_than_the_stage_takes() {
    let Some(url) = queen_url("claims") else {
        return;
    };
    let mut o = options(&url, PopMode::Targeted);
    o.lease_time = Duration::from_secs(1);
    let b = Arc::new(QueenBroker::new(o).unwrap());
    let topic = unique("claims");
    b.setup(&topology(&topic, &["g"], 24, 24))
        .await
        .expect("setup");
    let names = keys(24);
    publish_interleaved(&*b, &topic, &names, 0..3, 1).await;
    let rec = Recorder::new("g")
        .work(Duration::from_millis(150))
        .budget(2)
        .arc();
    // 72 messages, up to 24 partitions ready at once, for a stage of 2 lanes: about
    // 1.8 s of work if every partition came in one batch, well past the 1 s lease.
    let consumers = Consumers::start(&b, &topic, std::slice::from_ref(&rec), 10, 2);
    rec.wait_for(72, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let counters = consumers.finish().await;
    let c = b.counters();
    let context = format!("{c:?}");
    assert_eq!(rec.processed(), 72, "every message exactly once; {context}");
    rec.assert_in_order(&names, 3, &context);
    assert_eq!(StreamCounters::get(&counters[0].ack_errors), 0, "{context}");
    assert_eq!(c["queen_claim_slots"], 4, "2 x the stage's 2 lanes");
}

/// A reset drops only its own queue's cursors: a group of the same name reading
/// another queue keeps its place (it once lost it and replayed the queue whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_reset_leaves_other_queues_cursors_alone() {
    let Some(url) = queen_url("reset-scope") else {
        return;
    };
    let b = Arc::new(QueenBroker::new(options(&url, PopMode::Wildcard)).unwrap());
    let kept = unique("kept");
    b.setup(&topology(&kept, &["g"], 4, 4))
        .await
        .expect("setup");
    let names = keys(4);
    publish_interleaved(&*b, &kept, &names, 0..5, 5).await;
    let first = Recorder::new("g").arc();
    let consumers = Consumers::start(&b, &kept, std::slice::from_ref(&first), 10, 8);
    first.wait_for(20, Duration::from_secs(30)).await;
    consumers.finish().await;
    assert_eq!(first.processed(), 20);

    // Another topology with the same group name, reset at setup.
    let other = Arc::new(QueenBroker::new(options(&url, PopMode::Wildcard)).unwrap());
    other
        .setup(&topology(&unique("other"), &["g"], 4, 4))
        .await
        .expect("setup of the other queue");

    let again = Recorder::new("g").arc();
    let consumers = Consumers::start(&b, &kept, std::slice::from_ref(&again), 10, 8);
    tokio::time::sleep(Duration::from_secs(2)).await;
    consumers.finish().await;
    assert_eq!(
        again.processed(),
        0,
        "the other queue's reset rewound this queue's group: {:?}",
        again.keys_seen()
    );
}

/// `delayed_processing` reaches the queue (setup checks the server's echo) and holds a
/// message back from pops until it is that old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_delayed_processing_holds_messages_back() {
    let Some(url) = queen_url("delay") else {
        return;
    };
    let mut o = options(&url, PopMode::Wildcard);
    o.delayed_processing = Duration::from_secs(2);
    let b = Arc::new(QueenBroker::new(o).unwrap());
    let topic = unique("delay");
    let d = b
        .setup(&topology(&topic, &["g"], 2, 2))
        .await
        .expect("setup");
    assert!(
        d.notes.iter().any(|n| n.contains("delayedProcessing 2 s")),
        "{:?}",
        d.notes
    );
    let t0 = Instant::now();
    publish_interleaved(&*b, &topic, &keys(2), 0..3, 3).await;
    let rec = Recorder::new("g").arc();
    let consumers = Consumers::start(&b, &topic, std::slice::from_ref(&rec), 10, 4);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let early = rec.processed();
    rec.wait_for(6, Duration::from_secs(30)).await;
    let took = t0.elapsed();
    consumers.finish().await;
    assert_eq!(early, 0, "delivered before the 2 s delay");
    assert_eq!(rec.processed(), 6);
    assert!(
        took >= Duration::from_millis(1900),
        "all delivered after {took:?}"
    );
}

/// A requested dedup window is either configured (the server echoed it) or reported as
/// not supported by this server, never silently assumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_dedup_window_is_feature_detected() {
    let Some(url) = queen_url("dedup") else {
        return;
    };
    let b = QueenBroker::new(options(&url, PopMode::Wildcard)).unwrap();
    let topic = unique("dedup");
    let mut t = topology(&topic, &["g"], 1, 1);
    t.dedup_window_sec = 60;
    let d = b.setup(&t).await.expect("setup");
    let supported = b.counters()["queen_dedup_window_supported"] == 1;
    let note = d
        .notes
        .iter()
        .find(|n| n.contains("dedup window 60 s"))
        .expect("a note about the dedup window");
    if supported {
        assert!(note.contains("configured"), "{note}");
    } else {
        assert!(note.contains("not supported by this server"), "{note}");
    }
}
