//! The pgmq pipeline through the real `crossbench` binary against PostgreSQL + pgmq on
//! 127.0.0.1:5432 (scripts/provision/pgmq.sh). Skips (or fails under `CI`) when the
//! server is not reachable.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::{assert_clean_pass, result, run_passing, stream_sum};

const SMOKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/pgmq-smoke.yaml");
const DSN_DB: &str = "crossbench";

#[test]
fn pgmq_pipeline_smoke_passes() {
    if !support::pgmq_ready() {
        return;
    }
    // The window cut from 20 s to 8 s: the claim is a PASS on the broker.
    let (r, _tmp) = run_passing(Path::new(SMOKE), &["duration=8s"]);
    assert_eq!(r["system"], "pgmq");
    assert_eq!(
        r["provisioned"]["publishes_per_ingress_event"].as_f64(),
        Some(6.0)
    );
    let stats = &r["broker_stats"];
    assert!(stats["pgmq_rows_sent"].as_u64().unwrap() > 0);
    assert_eq!(stream_sum(&r, "ack_errors"), 0);
}

/// Terminate every backend of the crossbench database (except psql's own) mid-run: the
/// readers must count the failure, reconnect through the pool and the run still PASS.
#[test]
fn pgmq_pipeline_survives_backend_termination() {
    if !support::pgmq_ready() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("cell");
    let cell = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            support::run_into(
                Path::new(SMOKE),
                &support::relaxed(&["duration=15s", "name=pgmq-terminate"]),
                &dir,
            )
        })
    };
    // Wait until this run is in its rated window (it may first wait for the machine's
    // run lock while another cell runs), then kill its backends twice, 4 s apart.
    let wait_rated = Instant::now() + Duration::from_secs(240);
    loop {
        let csv = std::fs::read_to_string(dir.join("report.csv")).unwrap_or_default();
        if csv.contains(",rated,") {
            break;
        }
        assert!(
            Instant::now() < wait_rated,
            "the run never reached its rated window"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let t0 = Instant::now();
    let mut killed = 0u64;
    for at in [1u64, 5] {
        while t0.elapsed() < Duration::from_secs(at) {
            std::thread::sleep(Duration::from_millis(100));
        }
        killed += support::psql(&format!(
            "select count(*) from (select pg_terminate_backend(pid) from pg_stat_activity \
             where datname = '{DSN_DB}' and pid <> pg_backend_pid() \
             and application_name = 'crossbench-pgmq') t"
        ))
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    while !cell.is_finished() {
        assert!(Instant::now() < deadline, "the cell did not finish in time");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, _) = cell.join().unwrap();
    assert!(killed > 0, "no crossbench backends were found to terminate");
    let r = result(&dir);
    assert_eq!(code, 0, "exit code; verdict: {}", r["verdict"]);
    assert_clean_pass(&r);
    // The pool may notice a killed idle connection at checkout and replace it without
    // any call failing; but 24 readers poll all the time, so each kill catches some
    // in a call: that call fails, is counted, its connection dropped and replaced
    // (a reconnect), and the run goes on to PASS with work done after the kills.
    let stats = &r["broker_stats"];
    let dropped = stats["pgmq_connections_dropped"].as_u64().unwrap_or(0);
    let receive_errors = stream_sum(&r, "receive_errors");
    let reconnects = stream_sum(&r, "reconnects");
    let counts = format!(
        "terminated {killed} backends: dropped={dropped} receive_errors={receive_errors} reconnects={reconnects}"
    );
    assert!(receive_errors >= 1, "no failed call was counted; {counts}");
    assert!(reconnects >= 1, "no reconnect was counted; {counts}");
    assert!(dropped >= 1, "no connection was dropped; {counts}");
    assert_eq!(r["outcome"], "PASS", "{counts}");
    let csv = std::fs::read_to_string(dir.join("report.csv")).unwrap();
    let rows: Vec<&str> = csv
        .lines()
        .skip(2)
        .filter(|l| l.contains(",rated,") || l.contains(",drain,"))
        .collect();
    let after_kills: u64 = rows
        .iter()
        .rev()
        .take(3)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            f[9..21]
                .iter()
                .map(|x| x.parse::<u64>().unwrap_or(0))
                .sum::<u64>()
        })
        .sum();
    assert!(
        after_kills > 0,
        "nothing was delivered after the kills:\n{csv}"
    );
}
