//! The Queen adapter against a real Queen server. Needs `CROSSBENCH_QUEEN_URL` (e.g.
//! `http://127.0.0.1:6632`, see compose/queen/README.md); without it every test skips
//! with a message, also under `CI` (CI cannot provision Queen). With it set, a server
//! that does not answer fails the tests.
#![cfg(feature = "queen")]

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::queen::{PopMode, QueenBroker, QueenOptions};
use adapters::{
    BatchHandler, Broker, ConsumeOptions, DeliveryGuarantee, Disposition, Durability, KeyBatch,
    StreamCounters, TopicSpec, Topology,
};
use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use support::{parse, payload, queen_url};
use tokio_util::sync::CancellationToken;

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

fn topology(topic: &str, groups: &[&str], keys: u64, lanes: u64) -> Topology {
    Topology {
        topics: vec![TopicSpec {
            name: topic.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }],
        keys,
        lanes,
        durability: Durability::Default,
        dedup_window_sec: 0,
        reset: true,
    }
}

/// Records every delivery; checks that a key is never in two handler calls at once;
/// refuses the batch holding `refuse_once` the first time it arrives.
#[derive(Default)]
struct Recorder {
    seen: Mutex<HashMap<u64, Vec<(u64, bool)>>>,
    busy: Mutex<HashSet<Arc<str>>>,
    overlaps: Mutex<u64>,
    refuse_once: Mutex<Option<(u64, u64)>>,
    refused: Mutex<Vec<(u64, u64)>>,
    total: Mutex<u64>,
}

#[async_trait]
impl BatchHandler for Recorder {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        if !self.busy.lock().insert(batch.key.clone()) {
            *self.overlaps.lock() += 1;
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
        let mut refuse = false;
        {
            let mut r = self.refuse_once.lock();
            if let Some(target) = *r {
                if batch.messages.iter().any(|m| parse(&m.payload) == target) {
                    refuse = true;
                    *r = None;
                    *self.refused.lock() =
                        batch.messages.iter().map(|m| parse(&m.payload)).collect();
                }
            }
        }
        if !refuse {
            let mut seen = self.seen.lock();
            for m in &batch.messages {
                let (k, s) = parse(&m.payload);
                seen.entry(k).or_default().push((s, m.redelivered));
            }
            *self.total.lock() += batch.messages.len() as u64;
        }
        self.busy.lock().remove(&batch.key);
        if refuse {
            Disposition::Refuse
        } else {
            Disposition::Ack
        }
    }
}

async fn wait_for(rec: &Recorder, want: u64, limit: Duration) {
    let t0 = Instant::now();
    while *rec.total.lock() < want && t0.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publish `keys` x `per_key` messages in batches of 5, keys interleaved.
async fn publish_all(b: &QueenBroker, topic: &str, keys: u64, per_key: u64) {
    for round in 0..per_key / 5 {
        for k in 0..keys {
            let ps: Vec<Bytes> = (0..5).map(|i| payload(k, round * 5 + i)).collect();
            b.publish(topic, &format!("p{k}"), &ps)
                .await
                .expect("publish");
        }
    }
}

/// Two consumer groups read the same queue; each must get every message once, in
/// publish order per key, never one key in two handler calls at once.
async fn order_two_groups(mode: PopMode, name: &str) {
    let Some(url) = queen_url(name) else { return };
    let b = Arc::new(QueenBroker::new(options(&url, mode)).unwrap());
    let topic = unique(name);
    let (keys, per_key) = (10u64, 30u64);
    let d = b
        .setup(&topology(&topic, &["g-1", "g-2"], keys, keys))
        .await
        .expect("setup (is the Queen server at CROSSBENCH_QUEEN_URL up?)");
    eprintln!("Queen server version {}", b.server_version());
    assert_eq!(d.system, "queen");
    assert_eq!(d.variant, mode.name());
    assert_eq!(d.physical_queues, 1);
    assert_eq!(d.lease_ms, Some(5000));
    let want_guarantee = if mode == PopMode::AutoAck {
        DeliveryGuarantee::AtMostOnce
    } else {
        DeliveryGuarantee::AtLeastOnce
    };
    assert_eq!(d.delivery, want_guarantee);

    // Half before the consumers start, half while they run.
    publish_all(&b, &topic, keys, per_key / 2).await;
    let stop = CancellationToken::new();
    let mut recs = Vec::new();
    let mut tasks = Vec::new();
    for g in ["g-1", "g-2"] {
        let rec = Arc::new(Recorder::default());
        let counters = Arc::new(StreamCounters::default());
        let o = ConsumeOptions {
            batch: 4,
            lanes: 16,
            counters: counters.clone(),
        };
        let (b2, h, s, t) = (
            b.clone(),
            rec.clone() as Arc<dyn BatchHandler>,
            stop.clone(),
            topic.clone(),
        );
        tasks.push(tokio::spawn(
            async move { b2.consume(&t, g, o, h, s).await },
        ));
        recs.push((rec, counters));
    }
    for round in per_key / 10..per_key / 5 {
        for k in 0..keys {
            let ps: Vec<Bytes> = (0..5).map(|i| payload(k, round * 5 + i)).collect();
            b.publish(&topic, &format!("p{k}"), &ps)
                .await
                .expect("publish");
        }
    }
    let all = keys * per_key;
    for (rec, _) in &recs {
        wait_for(rec, all, Duration::from_secs(60)).await;
    }
    // A little longer: nothing more (no duplicates) may arrive.
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.cancel();
    for t in tasks {
        t.await.unwrap().expect("consume ends cleanly");
    }
    for (rec, counters) in &recs {
        assert_eq!(*rec.total.lock(), all, "every message once");
        assert_eq!(
            *rec.overlaps.lock(),
            0,
            "a key was in two handler calls at once"
        );
        let seen = rec.seen.lock();
        for k in 0..keys {
            let seqs: Vec<u64> = seen[&k].iter().map(|x| x.0).collect();
            assert_eq!(
                seqs,
                (0..per_key).collect::<Vec<_>>(),
                "key {k} out of order"
            );
        }
        assert_eq!(StreamCounters::get(&counters.acked), all);
        assert_eq!(StreamCounters::get(&counters.ack_errors), 0);
        assert_eq!(StreamCounters::get(&counters.receive_errors), 0);
    }
    let c: BTreeMap<String, u64> = b.counters();
    assert_eq!(
        c["queen_messages_pushed"], all,
        "native fan-out: one push serves both groups"
    );
    assert_eq!(c["queen_messages_popped"], 2 * all);
    if mode == PopMode::AutoAck {
        assert_eq!(c["queen_ack_requests"], 0, "auto-ack sends no acks");
    } else {
        assert_eq!(c["queen_acked"], 2 * all);
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
async fn queen_wildcard_in_order_per_key_two_groups() {
    order_two_groups(PopMode::Wildcard, "order-wild").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_targeted_in_order_per_key_two_groups() {
    order_two_groups(PopMode::Targeted, "order-targ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_auto_ack_in_order_per_key_two_groups() {
    order_two_groups(PopMode::AutoAck, "order-auto").await;
}

/// A refused batch comes back whole, at once (not after the lease), in order, flagged
/// redelivered; nothing is lost and nothing lands in the DLQ.
async fn refused_batch_redelivered(mode: PopMode, name: &str) {
    let Some(url) = queen_url(name) else { return };
    let mut o = options(&url, mode);
    // A lease far longer than the test: a refusal that waited for it would time out.
    o.lease_time = Duration::from_secs(60);
    let b = Arc::new(QueenBroker::new(o).unwrap());
    let topic = unique(name);
    b.setup(&topology(&topic, &["g"], 3, 3))
        .await
        .expect("setup");
    for k in 0..3u64 {
        let ps: Vec<Bytes> = (0..4).map(|i| payload(k, i)).collect();
        b.publish(&topic, &format!("p{k}"), &ps)
            .await
            .expect("publish");
    }
    let rec = Arc::new(Recorder::default());
    *rec.refuse_once.lock() = Some((1, 2));
    let counters = Arc::new(StreamCounters::default());
    let co = ConsumeOptions {
        batch: 10,
        lanes: 8,
        counters: counters.clone(),
    };
    let stop = CancellationToken::new();
    let t0 = Instant::now();
    let t = {
        let (b2, h, s, t) = (
            b.clone(),
            rec.clone() as Arc<dyn BatchHandler>,
            stop.clone(),
            topic.clone(),
        );
        tokio::spawn(async move { b2.consume(&t, "g", co, h, s).await })
    };
    wait_for(&rec, 12, Duration::from_secs(30)).await;
    let took = t0.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    t.await.unwrap().expect("consume");

    let refused = rec.refused.lock().clone();
    assert!(
        refused.contains(&(1, 2)),
        "the batch holding (1, 2) was refused: {refused:?}"
    );
    assert_eq!(
        *rec.total.lock(),
        12,
        "the refused batch came back, nothing lost or doubled"
    );
    assert!(
        took < Duration::from_secs(30),
        "the refused batch came back after {took:?}: it waited for the 60 s lease"
    );
    let seen = rec.seen.lock();
    let k1: Vec<u64> = seen[&1].iter().map(|x| x.0).collect();
    assert_eq!(k1, vec![0, 1, 2, 3], "key order survives the redelivery");
    for (k, s) in &refused {
        assert!(
            seen[k].iter().any(|&(s2, again)| s2 == *s && again),
            "({k}, {s}) came back flagged redelivered"
        );
    }
    assert_eq!(StreamCounters::get(&counters.refused), refused.len() as u64);
    assert_eq!(StreamCounters::get(&counters.acked), 12);
    assert_eq!(StreamCounters::get(&counters.ack_errors), 0);
    assert_eq!(*rec.overlaps.lock(), 0);
    let c = b.counters();
    assert!(c["queen_released_batches"] >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_wildcard_refused_batch_is_redelivered_whole() {
    refused_batch_redelivered(PopMode::Wildcard, "refuse-wild").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_targeted_refused_batch_is_redelivered_whole() {
    refused_batch_redelivered(PopMode::Targeted, "refuse-targ").await;
}

/// Keys hashed onto fewer partitions still come out in order per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queen_lanes_below_keys_hash_keys_onto_partitions() {
    let Some(url) = queen_url("lanes") else {
        return;
    };
    let b = Arc::new(QueenBroker::new(options(&url, PopMode::Targeted)).unwrap());
    let topic = unique("lanes");
    let d = b
        .setup(&topology(&topic, &["g"], 20, 4))
        .await
        .expect("setup");
    assert_eq!(d.ordered_lanes, 4);
    for k in 0..20u64 {
        b.publish(&topic, &format!("p{k}"), &[payload(k, 0), payload(k, 1)])
            .await
            .unwrap();
    }
    let rec = Arc::new(Recorder::default());
    let stop = CancellationToken::new();
    let co = ConsumeOptions {
        batch: 50,
        lanes: 8,
        counters: Arc::new(StreamCounters::default()),
    };
    let t = {
        let (b2, h, s, t) = (
            b.clone(),
            rec.clone() as Arc<dyn BatchHandler>,
            stop.clone(),
            topic.clone(),
        );
        tokio::spawn(async move { b2.consume(&t, "g", co, h, s).await })
    };
    wait_for(&rec, 40, Duration::from_secs(30)).await;
    stop.cancel();
    t.await.unwrap().unwrap();
    assert_eq!(*rec.total.lock(), 40);
    let seen = rec.seen.lock();
    for k in 0..20u64 {
        assert_eq!(seen[&k].iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1]);
    }
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
