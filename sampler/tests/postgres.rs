//! PostgreSQL internals against a live server (feature `postgres`). Skips
//! with a message when no server answers on 127.0.0.1:5432, unless `CI` is set
//! (the test command provisions PostgreSQL first): then it fails.
#![cfg(feature = "postgres")]

#[path = "../../adapters/tests/support/services.rs"]
#[allow(dead_code)]
mod services;
use std::time::Duration;

use sampler::{SamplerConfig, TargetSpec};

const DSN: &str = "postgres://postgres@127.0.0.1:5432/postgres";

#[test]
fn postgres_internals() {
    if !services::reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    // Some commits while sampling.
    let load = std::thread::spawn(|| {
        let end = std::time::Instant::now() + Duration::from_millis(3_500);
        while std::time::Instant::now() < end {
            let _ = std::process::Command::new("psql")
                .args([DSN, "-qAtc", "select 1"])
                .output();
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let cfg = SamplerConfig::new(vec![(
        "pg".into(),
        TargetSpec::Postgres { dsn: DSN.into() },
    )]);
    let h = sampler::start(cfg, &tmp.path().join("s.csv")).unwrap();
    std::thread::sleep(Duration::from_millis(3_300));
    let set = h.stop().unwrap();
    load.join().unwrap();
    let vals = |m: &str| -> Vec<f64> {
        set.series("pg", m)
            .into_iter()
            .filter_map(|(_, v)| v)
            .collect()
    };
    let commits = vals("commits_per_s");
    println!(
        "commits/s {commits:?} wal B/s {:?}",
        vals("wal_bytes_per_s")
    );
    assert!(!commits.is_empty() && commits.iter().all(|c| *c >= 0.0));
    assert!(commits.iter().any(|c| *c > 0.0), "{commits:?}");
    assert!(vals("db_size_bytes").iter().all(|s| *s > 1e6));
    assert!(!vals("dead_tuples").is_empty());
    assert!(!vals("backends").is_empty());
}
