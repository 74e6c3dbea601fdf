//! Ctrl-C and SIGTERM, through the real binary (a signal is what is under test): a
//! first signal ends the cell early with a short bounded drain and a complete record
//! (outcome INTERRUPTED, exit 130 or 143) that `crossbench verify` agrees with; a
//! second one exits at once and marks the record incomplete.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::{signal, stop_with, wait_rated};

/// A smoke cell long enough to interrupt (30 s rated), with the VOID rule relaxed.
fn start(out: &Path) -> Child {
    start_with(out, &[])
}

fn start_with(out: &Path, sets: &[&str]) -> Child {
    let mut c = support::binary();
    c.args(["run"]).arg(support::scenario("smoke.yaml"));
    for s in sets {
        c.args(["--set", s]);
    }
    c.args([
        "--set",
        "duration=30s",
        "--set",
        "warmup=1s",
        "--set",
        "void.loader_cpu_max=1",
        "--set",
        "void.schedule_lag_p99_max=1h",
        "--interrupt-drain",
        "5s",
        "-q",
        "--out",
    ])
    .arg(out)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

fn verify(dir: &Path) -> (i32, String) {
    let o = support::binary().arg("verify").arg(dir).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).to_string(),
    )
}

#[test]
fn a_sigint_ends_the_cell_with_a_complete_interrupted_record() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let child = start(&out);
    wait_rated(&out);
    std::thread::sleep(Duration::from_secs(2));
    let (o, stopped_in) = stop_with(child, 2, 130);
    let stdout = String::from_utf8_lossy(&o.stdout);
    // The drain after the signal is bounded (5 s here), not the rest of the 30 s cell.
    assert!(stopped_in < Duration::from_secs(20), "took {stopped_in:?}");
    let r = support::result(&out);
    assert_eq!(r["outcome"], "INTERRUPTED", "{}", support::summary(&r));
    assert!(
        r["time"]["rated_sec"].as_f64().unwrap() < 29.0,
        "the window as it ran"
    );
    assert!(stdout.contains("OUTCOME: INTERRUPTED"), "{stdout}");
    assert!(!out.join("INCOMPLETE").exists());
    let inv = std::fs::read_to_string(out.join("invocation.txt")).unwrap();
    assert!(inv.contains("outcome: INTERRUPTED"), "{inv}");
    // The record verifies the same way offline.
    let (code, table) = verify(&out);
    let recorded_pass = r["verdict"]["pass"].as_bool().unwrap();
    assert_eq!(
        code == 0,
        recorded_pass,
        "verify exit {code}; recorded pass {recorded_pass}\n{table}"
    );
    assert!(
        recorded_pass,
        "nothing was lost: {}",
        r["verdict"]["totals"]
    );
}

#[test]
fn a_sigterm_is_handled_like_a_sigint_with_its_own_code() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let child = start(&out);
    wait_rated(&out);
    stop_with(child, 15, 143);
    assert_eq!(support::result(&out)["outcome"], "INTERRUPTED");
}

#[test]
fn a_second_sigint_exits_at_once_and_marks_the_record_incomplete() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    // A slow broker behind its publishers: after the first signal the cell is still
    // busy publishing its backlog and draining when the second one comes.
    let child = start_with(&out, &["rate=2000", "mem.publish_delay=50ms"]);
    wait_rated(&out);
    signal(&child, 2);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    signal(&child, 2);
    let o = child.wait_with_output().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "exits at once: {:?}",
        t0.elapsed()
    );
    assert_eq!(o.status.code(), Some(130));
    assert!(
        out.join("INCOMPLETE").is_file(),
        "the record is marked incomplete"
    );
    let inv = std::fs::read_to_string(out.join("invocation.txt")).unwrap();
    assert!(inv.contains("outcome: INCOMPLETE"), "{inv}");
    assert!(!out.join("result.json").exists() || support::result(&out)["outcome"] != "PASS");
}
