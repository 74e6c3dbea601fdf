//! What the loader's end-to-end tests share: where the scenarios are, finding a
//! server (skip when run by hand, fail under `CI`, which the test command sets after
//! provisioning), and reading a cell's `result.json`.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};

use serde_json::Value;

#[path = "../../../adapters/tests/support/services.rs"]
mod services;
pub use services::{absent, queen_url, reachable};

/// One cell at a time within a test binary: the cells share the servers and 2 cores.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Hold `SERIAL`, even after another test panicked while holding it.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `scenarios/<name>` of this repository.
pub fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name)
}

/// The cell's `result.json`.
pub fn result(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("result.json"))
        .unwrap_or_else(|e| panic!("no result.json in {}: {e}", dir.display()));
    serde_json::from_str(&text).expect("result.json parses")
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// The checker's verdict on one stream (pipeline) or group (stream workload).
pub fn verdict_stream<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["verdict"]["streams"]
        .as_array()
        .expect("verdict.streams[]")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("stream {name} in verdict"))
}

/// A figure summed over the pipeline's twelve `streams[]`.
pub fn stream_sum(r: &Value, field: &str) -> u64 {
    r["streams"]
        .as_array()
        .expect("streams[]")
        .iter()
        .map(|s| s[field].as_u64().unwrap_or(0))
        .sum()
}

/// `crossbench run <scn> --out <tmp>/cell -q --set …`: (exit code, stdout and
/// stderr, the temporary directory that holds `cell`).
pub fn run_raw(scn: &Path, sets: &[&str]) -> (i32, String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_crossbench"));
    cmd.arg("run").arg(scn).arg("--out").arg(&out).arg("-q");
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    let o = cmd.output().expect("run crossbench");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text, tmp)
}

/// The cell PASSed with no gap, order violation, duplicate or lost tail.
pub fn assert_clean_pass(r: &Value) {
    assert_eq!(r["outcome"], "PASS", "outcome; verdict: {}", r["verdict"]);
    let t = &r["verdict"]["totals"];
    for k in ["gaps", "order_violations", "duplicates", "lost_tail"] {
        assert_eq!(t[k].as_u64(), Some(0), "{k} in {t}");
    }
}

/// The figures a failed cell assertion should show.
pub fn summary(r: &Value) -> String {
    format!(
        "outcome={} variant={} verdict={} warnings={} void={} broker_stats={}",
        r["outcome"], r["variant"], r["verdict"], r["warnings"], r["void"], r["broker_stats"]
    )
}

/// [`run_raw`], then the cell must have exited 0 and PASSed cleanly
/// ([`assert_clean_pass`]): its `result.json` and the directory holding `cell`.
pub fn run_passing(scn: &Path, sets: &[&str]) -> (Value, tempfile::TempDir) {
    let (code, text, tmp) = run_raw(scn, sets);
    let dir = tmp.path().join("cell");
    if !dir.join("result.json").exists() {
        panic!("exit code {code}, no result.json; output:\n{text}");
    }
    let r = result(&dir);
    assert_eq!(code, 0, "exit code; {}", summary(&r));
    assert_clean_pass(&r);
    (r, tmp)
}
