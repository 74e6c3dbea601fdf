//! Redis Streams behaviour beyond the adapter contract (the contract itself is the
//! shared suite: contract_redis.rs): a refused batch stays pending and is reclaimed
//! with XAUTOCLAIM only after the lease, and the durability tier is read from the
//! server (CONFIG GET) and recorded as found: a Redis that persists nothing is tier
//! `none`, flagged, never a durable tier.
//!
//! Needs Redis on 127.0.0.1:6379 (scripts/provision/redis.sh). When it is not there the
//! tests print SKIP and pass, unless `CI` is set (then they fail).
#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use adapters::redis::{server_tier, RedisBroker, RedisOptions};
use adapters::{Broker, Durability, ErrorClass, StreamCounters};
use support::contract::DEADLINE;
use support::{keys, publish_interleaved, topology, Consumers, Recorder};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const LEASE: Duration = Duration::from_secs(2);

fn broker() -> Arc<RedisBroker> {
    Arc::new(
        RedisBroker::new(RedisOptions {
            lease: LEASE,
            block: Duration::from_millis(200),
            ..Default::default()
        })
        .unwrap(),
    )
}

/// The server's own persistence settings, read apart from the adapter.
async fn server_config(name: &str) -> String {
    let client = redis::Client::open("redis://127.0.0.1:6379/").unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async(&mut c)
        .await
        .unwrap();
    v.get(1).cloned().unwrap_or_default()
}

/// A refused batch is left pending; it is claimed back (XAUTOCLAIM, min-idle-time =
/// the lease) no sooner than the lease after the refusal, whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refused_batch_is_reclaimed_after_the_lease() {
    if !support::ready::redis() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let b = broker();
    let d = b
        .setup(&topology("qr_refuse", &["g"], 2, 2))
        .await
        .expect("setup");
    assert_eq!(d.lease_ms, Some(2000));
    let names = keys(2);
    publish_interleaved(&*b, "qr_refuse", &names, 0..6, 6).await;
    let rec = Recorder::new("g").refusing(Some(("p0".into(), 0))).arc();
    let run = Consumers::start(&b, "qr_refuse", std::slice::from_ref(&rec), 10, 4);
    rec.wait_for(12, DEADLINE).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counters = run.finish().await;
    let (refused_at, back_at) = rec.refused_then_back();
    let waited = back_at.expect("back") - refused_at.expect("refused");
    assert!(
        waited + Duration::from_millis(50) >= LEASE,
        "the refused batch came back {waited:?} after the refusal, before the {LEASE:?} lease"
    );
    rec.assert_in_order(&names, 6, "redis refused");
    assert_eq!(StreamCounters::get(&counters[0].refused), 6);
    assert_eq!(StreamCounters::get(&counters[0].redelivered), 6);
    let c = b.counters();
    assert_eq!(
        c["redis_claimed"], 6,
        "the refused batch, claimed back: {c:?}"
    );
    assert_eq!(c["redis_server_group_pending"], 0, "all acked: {c:?}");
    assert_eq!(c["redis_server_group_lag"], 0, "all read: {c:?}");
    assert_eq!(c["redis_server_stream_entries"], 12, "no trimming: {c:?}");
    assert!(c["redis_server_used_memory_bytes"] > 0, "{c:?}");
    b.close().await.unwrap();
}

/// The tier is the server's, read with CONFIG GET and recorded: this machine's Redis
/// keeps nothing (appendonly no, save "") and is tier `none`, flagged NOT DURABLE;
/// `fsync` is refused unless the server runs `appendfsync always`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_tier_is_read_from_the_server_and_never_blurred() {
    if !support::ready::redis() {
        return;
    }
    let _serial = SERIAL.lock().await;
    let (aof, fsync, save) = (
        server_config("appendonly").await,
        server_config("appendfsync").await,
        server_config("save").await,
    );
    let (want, _) = server_tier(&aof, &fsync, &save);
    let b = broker();
    let d = b.setup(&topology("qr_tier", &["g"], 2, 2)).await.unwrap();
    assert_eq!(d.durability, want, "{:?}", d.notes);
    assert_eq!(b.tier(), Some(want));
    assert!(
        d.notes.iter().any(|n| n.contains("CONFIG GET: appendonly")),
        "{:?}",
        d.notes
    );
    let c = b.counters();
    if aof != "yes" {
        // This machine's Redis: nothing on disk.
        assert_eq!(d.durability, Durability::None);
        assert!(
            d.notes.iter().any(|n| n.starts_with("NOT DURABLE")),
            "{:?}",
            d.notes
        );
        assert_eq!(c["redis_not_durable"], 1);
        assert_eq!(c["redis_durability_tier"], 0);
        assert_eq!(serde_json::to_value(d.durability).unwrap(), "none");
    } else {
        assert_ne!(d.durability, Durability::None);
        assert_eq!(c["redis_not_durable"], 0);
    }
    if want != Durability::Fsync {
        let mut t = topology("qr_tier", &["g"], 2, 2);
        t.durability = Durability::Fsync;
        let e = b.setup(&t).await.unwrap_err();
        assert_eq!(e.class(), ErrorClass::Config, "{e}");
        assert!(e.to_string().contains("appendfsync always"), "{e}");
    }
}
