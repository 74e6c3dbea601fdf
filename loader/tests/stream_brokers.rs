//! The stream workload on the real brokers available here, through the real binary:
//! PostgreSQL + pgmq on 127.0.0.1:5432 and RabbitMQ on 127.0.0.1:5672. A short cell
//! over a rotating window ends PASS with every created partition seen by both groups.
//!
//! When a server is not reachable the test prints SKIP and passes, unless `CI` is set
//! (then it fails).
#![cfg(any(feature = "pgmq", feature = "rabbitmq"))]

mod support;

use std::path::Path;

use serde_json::Value;
use support::{reachable, serial};

const SMOKE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scenarios/stream-smoke.yaml"
);

fn run(sets: &[&str]) -> (i32, Value, String) {
    // A small space the window covers in 2.5 s; 1000 msg/s in pushes of 10.
    let all: Vec<&str> = [
        "void.loader_cpu_max=1",
        "void.schedule_lag_p99_max=10s",
        "held.exploratory=true",
        "rate=1000",
        "duration=4s",
        "warmup=1s",
        "stream.partitions.space=500",
        "stream.partitions.window=50",
        "stream.partitions.rotate_step=50",
        "stream.partitions.rotate_every=250ms",
    ]
    .iter()
    .chain(sets)
    .copied()
    .collect();
    let (code, out, tmp) = support::run_raw(Path::new(SMOKE), &all);
    let text = std::fs::read_to_string(tmp.path().join("cell/result.json"))
        .unwrap_or_else(|e| panic!("no result.json ({e})\n{out}"));
    (code, serde_json::from_str(&text).unwrap(), out)
}

fn assert_clean(code: i32, r: &Value, out: &str, system: &str) {
    assert_eq!(code, 0, "{out}");
    assert_eq!(r["outcome"], "PASS");
    assert_eq!(r["system"], system);
    assert_eq!(r["workload"]["kind"], "stream");
    let created = r["partitions"]["created"].as_u64().unwrap();
    assert!(created > 0);
    for s in r["verdict"]["streams"].as_array().unwrap() {
        assert_eq!(s["properties_seen"].as_u64(), Some(created), "{s}");
        for k in ["gaps", "order_violations", "duplicates", "lost_tail"] {
            assert_eq!(s[k].as_u64(), Some(0), "{k}: {s}");
        }
    }
    let published = r["flows"]["S"]["published"].as_u64().unwrap();
    for g in r["groups"].as_array().unwrap() {
        assert_eq!(g["popped"].as_u64(), Some(published), "{g}");
        assert_eq!(g["acked"].as_u64(), Some(published), "{g}");
    }
}

#[cfg(feature = "pgmq")]
#[test]
fn pgmq_stream_cell_passes() {
    if !reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    let _one = serial();
    let (code, r, out) = run(&[
        "system=pgmq",
        "prefix=cbst-",
        "pgmq.readers=2",
        "pgmq.visibility_timeout=5s",
    ]);
    assert_clean(code, &r, &out, "pgmq");
    // pgmq times its deletes: the ack round trip is known.
    assert!(r["latency_ms"]["ack_round_trip_mean_ms"].as_f64().unwrap() > 0.0);
}

#[cfg(feature = "rabbitmq")]
#[test]
fn rabbitmq_stream_cell_passes_with_partitions_hashed_onto_lanes() {
    if !support::rabbitmq() {
        return;
    }
    let _one = serial();
    let (code, r, out) = run(&["system=rabbitmq", "prefix=cbst-", "stream.lanes=8"]);
    assert_clean(code, &r, &out, "rabbitmq");
    assert_eq!(r["workload"]["lanes"].as_u64(), Some(8));
}
