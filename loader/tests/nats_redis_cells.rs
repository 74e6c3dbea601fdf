//! NATS JetStream (127.0.0.1:4222, scripts/provision/nats.sh) and Redis Streams
//! (127.0.0.1:6379, scripts/provision/redis.sh) through the whole cell: the pipeline
//! smoke cell and a short stream cell on each PASS cleanly, and the record says what
//! each system is: NATS's tier is file storage (default) or memory; a Redis that
//! persists nothing (this machine's) is recorded as tier `none`, flagged NOT DURABLE,
//! never as a durable tier.
//!
//! When a server is not reachable the test prints SKIP and passes, unless `CI` is set
//! (then it fails).
#![cfg(any(feature = "nats", feature = "redis"))]

mod support;

use std::path::Path;

use serde_json::Value;
use support::{run_passing, serial, stream_sum};

fn scenario(name: &str) -> String {
    format!("{}/../scenarios/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A short pipeline cell: the smoke scenario, 6 s rated.
fn pipeline(file: &str, sets: &[&str]) -> Value {
    let mut all = vec!["duration=6s", "warmup=2s", "ramp=1s"];
    all.extend_from_slice(sets);
    let (r, _tmp) = run_passing(Path::new(&scenario(file)), &all);
    assert_eq!(stream_sum(&r, "ack_errors"), 0);
    r
}

/// A short stream cell (as stream_brokers.rs): a rotating window over 500 partitions.
fn stream(system: &str, sets: &[&str]) -> Value {
    let mut all = vec![
        "rate=1000",
        "duration=4s",
        "warmup=1s",
        "stream.partitions.space=500",
        "stream.partitions.window=50",
        "stream.partitions.rotate_step=50",
        "stream.partitions.rotate_every=250ms",
    ];
    let sys = format!("system={system}");
    all.push(&sys);
    all.extend_from_slice(sets);
    let (r, _tmp) = run_passing(Path::new(&scenario("stream-smoke.yaml")), &all);
    assert_eq!(r["workload"]["kind"], "stream");
    let created = r["partitions"]["created"].as_u64().unwrap();
    assert!(created > 0);
    for s in r["verdict"]["streams"].as_array().unwrap() {
        assert_eq!(s["properties_seen"].as_u64(), Some(created), "{s}");
    }
    let published = r["flows"]["S"]["published"].as_u64().unwrap();
    for g in r["groups"].as_array().unwrap() {
        assert_eq!(g["acked"].as_u64(), Some(published), "{g}");
    }
    r
}

#[cfg(feature = "nats")]
#[test]
fn nats_pipeline_and_stream_cells_pass() {
    if !support::nats() {
        return;
    }
    let _one = serial();
    let r = pipeline("nats-smoke.yaml", &[]);
    assert_eq!(r["system"], "nats");
    assert_eq!(r["variant"], "lane-consumers/file");
    assert_eq!(r["durability"], "default");
    assert_eq!(
        r["provisioned"]["publishes_per_ingress_event"].as_f64(),
        Some(2.0),
        "native fan-out"
    );
    assert!(
        r["broker_stats"]["nats_logical_publishes"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(r["broker_stats"]["nats_server_num_pending"], 0);
    let r = stream("nats", &["prefix=cbsn-", "nats.ack_wait=5s"]);
    assert_eq!(r["system"], "nats");
}

#[cfg(feature = "redis")]
#[test]
fn redis_pipeline_and_stream_cells_pass_and_record_the_found_tier() {
    if !support::redis() {
        return;
    }
    let _one = serial();
    let r = pipeline("redis-smoke.yaml", &[]);
    assert_eq!(r["system"], "redis");
    let stats = &r["broker_stats"];
    assert!(stats["redis_logical_publishes"].as_u64().unwrap() > 0);
    assert_eq!(stats["redis_server_group_lag"], 0);
    // The tier is the server's: a Redis without AOF is `none`, and flagged.
    if stats["redis_not_durable"] == 1 {
        assert_eq!(r["durability"], "none");
        assert_eq!(r["provisioned"]["durability"], "none");
        let warned = r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap_or("").starts_with("NOT DURABLE"));
        assert!(warned, "warnings: {}", r["warnings"]);
    } else {
        assert_ne!(r["durability"], "none");
    }
    let r = stream("redis", &["prefix=cbsr-", "redis.lease=5s"]);
    assert_eq!(r["system"], "redis");
}
