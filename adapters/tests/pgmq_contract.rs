//! The pgmq adapter against a real PostgreSQL + pgmq (scripts/provision/pgmq.sh).
//! Skips (or fails under `CI`) when the server is not reachable.
#![cfg(feature = "pgmq")]

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::pgmq::{PgmqBroker, PgmqOptions};
use adapters::{
    BatchHandler, Broker, ConsumeOptions, Disposition, Durability, KeyBatch, StreamCounters,
    TopicSpec, Topology,
};
use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use support::{parse, payload};
use tokio_util::sync::CancellationToken;

/// True when PostgreSQL answers on 127.0.0.1:5432 and has pgmq in `crossbench`.
async fn pg_ready(probe: &str) -> bool {
    const PROVISION: &str = "scripts/provision/pgmq.sh";
    support::reachable("127.0.0.1:5432", "PostgreSQL", PROVISION) && {
        let b = PgmqBroker::new(PgmqOptions::default()).unwrap();
        b.setup(&topology(probe, &["g"], 1, 1, false)).await.is_ok()
            || support::absent("pgmq (in database crossbench)", "127.0.0.1:5432", PROVISION)
    }
}

fn topology(topic: &str, groups: &[&str], keys: u64, lanes: u64, reset: bool) -> Topology {
    Topology {
        topics: vec![TopicSpec {
            name: topic.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }],
        keys,
        lanes,
        durability: Durability::Default,
        dedup_window_sec: 0,
        reset,
    }
}

/// Records every delivery; checks that a key is never in two handler calls at once.
#[derive(Default)]
struct Recorder {
    seen: Mutex<HashMap<u64, Vec<(u64, bool)>>>,
    busy: Mutex<HashSet<Arc<str>>>,
    overlaps: Mutex<u64>,
    /// (key, seq) to refuse the first time it arrives.
    refuse_once: Mutex<Option<(u64, u64, Option<Instant>)>>,
    refused_at: Mutex<Option<Instant>>,
    redelivered_at: Mutex<Option<Instant>>,
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
            if let Some((k, s, None)) = *r {
                if batch.messages.iter().any(|m| parse(&m.payload) == (k, s)) {
                    refuse = true;
                    *r = Some((k, s, Some(Instant::now())));
                    *self.refused_at.lock() = Some(Instant::now());
                }
            } else if let Some((k, s, Some(_))) = *r {
                if batch
                    .messages
                    .iter()
                    .any(|m| parse(&m.payload) == (k, s) && m.redelivered)
                    && self.redelivered_at.lock().is_none()
                {
                    *self.redelivered_at.lock() = Some(Instant::now());
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
        .setup(&topology(topic, &["g-1", "g-2"], 10, 10, true))
        .await
        .expect("setup");
    assert_eq!(d.physical_queues, 2);
    assert_eq!(d.publishes_per_ingress_event, 2.0);
    assert_eq!(d.lease_ms, Some(5000));

    // 10 keys x 30 messages, published in batches of 5 with keys interleaved.
    for round in 0..6u64 {
        for k in 0..10u64 {
            let ps: Vec<Bytes> = (0..5).map(|i| payload(k, round * 5 + i)).collect();
            b.publish(topic, &format!("p{k}"), &ps)
                .await
                .expect("publish");
        }
    }
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
        let (b2, h, s) = (
            b.clone(),
            rec.clone() as Arc<dyn BatchHandler>,
            stop.clone(),
        );
        tasks.push(tokio::spawn(
            async move { b2.consume(topic, g, o, h, s).await },
        ));
        recs.push((rec, counters));
    }
    for (rec, _) in &recs {
        wait_for(rec, 300, Duration::from_secs(30)).await;
    }
    stop.cancel();
    for t in tasks {
        t.await.unwrap().expect("consume ends cleanly");
    }
    for (rec, counters) in &recs {
        assert_eq!(*rec.total.lock(), 300, "every message once");
        assert_eq!(
            *rec.overlaps.lock(),
            0,
            "a key was in two handler calls at once"
        );
        let seen = rec.seen.lock();
        for k in 0..10u64 {
            let seqs: Vec<u64> = seen[&k].iter().map(|x| x.0).collect();
            assert_eq!(seqs, (0..30).collect::<Vec<_>>(), "key {k} out of order");
        }
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
    b.setup(&topology(topic, &["g"], 3, 3, true))
        .await
        .expect("setup");
    for k in 0..3u64 {
        let ps: Vec<Bytes> = (0..4).map(|i| payload(k, i)).collect();
        b.publish(topic, &format!("p{k}"), &ps)
            .await
            .expect("publish");
    }
    let rec = Arc::new(Recorder::default());
    *rec.refuse_once.lock() = Some((1, 2, None));
    let counters = Arc::new(StreamCounters::default());
    let o = ConsumeOptions {
        batch: 10,
        lanes: 8,
        counters: counters.clone(),
    };
    let stop = CancellationToken::new();
    let t = {
        let (b2, h, s) = (
            b.clone(),
            rec.clone() as Arc<dyn BatchHandler>,
            stop.clone(),
        );
        tokio::spawn(async move { b2.consume(topic, "g", o, h, s).await })
    };
    wait_for(&rec, 12, Duration::from_secs(20)).await;
    stop.cancel();
    t.await.unwrap().expect("consume");

    assert_eq!(
        *rec.total.lock(),
        12,
        "the refused message came back and was processed"
    );
    let refused_at = rec.refused_at.lock().expect("refused once");
    let back_at = rec
        .redelivered_at
        .lock()
        .expect("redelivered, flagged redelivered");
    let waited = back_at - refused_at;
    assert!(
        waited >= Duration::from_millis(1500),
        "came back after {waited:?}, before the 2 s visibility timeout"
    );
    let seen = rec.seen.lock();
    let k1: Vec<u64> = seen[&1].iter().map(|x| x.0).collect();
    assert_eq!(k1, vec![0, 1, 2, 3], "key order survives the redelivery");
    assert!(seen[&1][2].1, "the redelivered message is flagged");
    assert_eq!(StreamCounters::get(&counters.refused), 1);
    assert!(StreamCounters::get(&counters.redelivered) >= 1);
    assert_eq!(*rec.overlaps.lock(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_lanes_below_keys_hash_keys_onto_groups() {
    if !pg_ready("probe-3").await {
        return;
    }
    let b = Arc::new(PgmqBroker::new(PgmqOptions::default()).unwrap());
    let topic = "it-lanes";
    let d = b
        .setup(&topology(topic, &["g"], 20, 4, true))
        .await
        .expect("setup");
    assert_eq!(d.ordered_lanes, 4);
    for k in 0..20u64 {
        b.publish(topic, &format!("p{k}"), &[payload(k, 0), payload(k, 1)])
            .await
            .unwrap();
    }
    let rec = Arc::new(Recorder::default());
    let counters = Arc::new(StreamCounters::default());
    let stop = CancellationToken::new();
    let o = ConsumeOptions {
        batch: 50,
        lanes: 8,
        counters,
    };
    let t = {
        let (b2, h, s) = (
            b.clone(),
            rec.clone() as Arc<dyn BatchHandler>,
            stop.clone(),
        );
        tokio::spawn(async move { b2.consume(topic, "g", o, h, s).await })
    };
    wait_for(&rec, 40, Duration::from_secs(20)).await;
    stop.cancel();
    t.await.unwrap().unwrap();
    assert_eq!(*rec.total.lock(), 40);
    let seen = rec.seen.lock();
    for k in 0..20u64 {
        assert_eq!(seen[&k].iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1]);
    }
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
        .setup(&topology("x", &["g"], 1, 1, false))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("provision"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");
}
