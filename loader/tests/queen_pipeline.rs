//! The Queen pipeline through the real `crossbench` binary against a real Queen server
//! at `CROSSBENCH_QUEEN_URL` (see compose/queen/README.md). Without the variable the
//! tests skip with a message, also under `CI` (CI cannot provision Queen); with it set,
//! a server that does not answer fails them.
#![cfg(feature = "queen")]

mod support;

use std::path::Path;

use support::{queen_url, run_passing, stream_sum};

const SMOKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/queen-smoke.yaml");

/// R = 200, P = 50, 20 s rated, in `mode`: the cell must PASS with no gap, violation or
/// duplicate, no failed ack, and the token must not reach any file.
fn pipeline_passes(mode: &str) {
    let Some(url) = queen_url(&format!("queen_pipeline_{mode}")) else {
        return;
    };
    let token = "pipeline-test-token-4711";
    let sets = [
        format!("queen.url={url}"),
        format!("queen.mode={mode}"),
        format!("name=queen-smoke-{mode}"),
        "rate=200".into(),
        "properties=50".into(),
        "duration=20s".into(),
        format!("queen.token={token}"),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let (r, tmp) = run_passing(Path::new(SMOKE), &sets);
    let dir = tmp.path().join("cell");
    assert_eq!(r["system"], "queen");
    assert_eq!(r["provisioned"]["variant"], mode, "{}", r["provisioned"]);
    assert_eq!(
        r["provisioned"]["publishes_per_ingress_event"].as_f64(),
        Some(2.0),
        "native fan-out"
    );
    let stats = &r["broker_stats"];
    assert!(
        stats["queen_messages_pushed"].as_u64().unwrap() > 0,
        "{stats}"
    );
    assert_eq!(stream_sum(&r, "ack_errors"), 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if let Ok(text) = std::fs::read_to_string(&p) {
            assert!(
                !text.contains(token),
                "the token leaked into {}",
                p.display()
            );
        }
    }
}

#[test]
fn queen_pipeline_wildcard_passes() {
    pipeline_passes("wildcard");
}

#[test]
fn queen_pipeline_targeted_passes() {
    pipeline_passes("targeted");
}
