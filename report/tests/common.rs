//! Small cell records the tests write: a result.json with the fields the report
//! reads, plus optional report.csv / samples.csv.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::json;

#[derive(Debug, Clone)]
pub struct Spec {
    pub name: &'static str,
    pub system: &'static str,
    pub variant: &'static str,
    pub durability: &'static str,
    pub outcome: &'static str,
    pub rate: u64,
    pub properties: u64,
    pub lanes: u64,
    pub deliveries_per_sec: f64,
    pub served: f64,
    pub cores: Option<f64>,
    pub rss: f64,
    pub p50: f64,
    pub p99: f64,
    pub shed: u64,
    pub gaps: u64,
    pub void_reason: Option<&'static str>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            name: "cell",
            system: "pgmq",
            variant: "read_grouped_head/delete",
            durability: "default",
            outcome: "PASS",
            rate: 200,
            properties: 100,
            lanes: 1200,
            deliveries_per_sec: 1200.0,
            served: 1.0,
            cores: Some(1.5),
            rss: 1_073_741_824.0,
            p50: 150.0,
            p99: 250.0,
            shed: 0,
            gaps: 0,
            void_reason: None,
        }
    }
}

pub fn write(root: &Path, s: &Spec) -> PathBuf {
    let dir = root.join(s.name);
    std::fs::create_dir_all(&dir).unwrap();
    let v = json!({
        "schema_version": 1,
        "cell": s.name,
        "outcome": s.outcome,
        "system": s.system,
        "variant": s.variant,
        "durability": s.durability,
        "delivery": "at-least-once",
        "time": {"started_utc": "2026-11-30T00:00:00Z", "rated_start_unix_ms": 1_000_000, "rated_end_unix_ms": 1_030_000, "rated_sec": 30.0, "warmup_sec": 5.0, "drain_sec": 1.0},
        "host": {"hostname": "h", "cpu_model": "test cpu", "cores": 2, "memory_bytes": 8_589_934_592u64},
        "workload": {"rate_events_per_sec": s.rate, "properties": s.properties, "lanes": s.properties, "batch": 100, "payload_b": 2048},
        "provisioned": {"ordered_lanes": s.lanes, "physical_queues": 12, "consumer_members": 24, "connections": 4, "publishes_per_ingress_event": 6.0, "semantics_built_in_app": ["ordering by key"]},
        "flows": {"A": {"offered": 3000, "published": 3000 - s.shed, "shed": s.shed, "failed": 0}, "B": {"offered": 3000, "published": 3000, "shed": 0, "failed": 0}},
        "throughput": {"offered_per_sec": s.rate as f64, "deliveries_per_sec": s.deliveries_per_sec, "served_fraction": s.served, "reference_deliveries_per_sec": s.deliveries_per_sec * 1.1},
        "latency_ms": {
            "e2e_a": {"count": 100, "p50_ms": s.p50, "p90_ms": s.p50, "p95_ms": s.p99, "p99_ms": s.p99, "p999_ms": s.p99, "max_ms": s.p99},
            "e2e_b": {"count": 100, "p50_ms": s.p50 - 10.0, "p90_ms": s.p50, "p95_ms": s.p99 - 10.0, "p99_ms": s.p99 - 10.0, "p999_ms": s.p99, "max_ms": s.p99}
        },
        "loader": {"cpu_cores_mean": 0.3, "cores_available": 2.0, "peak_rss_bytes": 100_000_000},
        "drain": {"outcome": "caught-up", "seconds": 1.0},
        "void": {"void": s.void_reason.is_some(), "reasons": s.void_reason.map(|r| vec![r]).unwrap_or_default()},
        "verdict": {"pass": s.gaps == 0, "reasons": [], "totals": {"duplicates": 0, "gaps": s.gaps, "order_violations": 0, "in_flight": 0}},
        "cost": {"system_targets": ["postgres"], "system_cores_mean": s.cores, "system_memory_peak_bytes": s.rss, "system_disk_write_bytes_per_s_mean": 1_048_576.0, "disk_write_bytes_per_ingress_event": 5000.0, "physical_publishes_per_ingress_event": 6.0, "ingress_events_per_s": s.rate as f64, "loader_cores_mean": 0.3},
        "broker_stats": {},
        "warnings": []
    });
    std::fs::write(
        dir.join("result.json"),
        serde_json::to_string_pretty(&v).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("invocation.txt"),
        format!(
            "# crossbench invocation v1\ncommand: crossbench run scenarios/{}.yaml\n",
            s.name
        ),
    )
    .unwrap();
    dir
}

pub fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Set `key` (a top-level field) of the record in `dir` to `value`.
pub fn patch(dir: &Path, key: &str, value: serde_json::Value) {
    let p = dir.join("result.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v[key] = value;
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}
