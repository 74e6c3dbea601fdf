//! What a person reads, pinned: the final summary, `report.csv` and `result.json` of
//! a small cell on the control broker, run in the runtime's paused virtual time so
//! every latency, count and rate is the same on any machine. What only the machine
//! decides (times of day, host, CPU, memory, sampled cost, paths) is redacted.

mod support;

use loader::cli::run::{execute, RunRequest};
use loader::pacing::pacer::Timing;

fn virtual_cell(scenario: &str, sets: &[&str]) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let mut req = RunRequest::new(support::scenario(scenario));
    req.sets = sets.iter().map(|s| s.to_string()).collect();
    req.out = Some(tmp.path().join("cell"));
    req.timing = Timing::Virtual;
    req.argv = vec!["crossbench".into(), "run".into(), scenario.into()];
    let done = execute(&req).expect("the cell runs");
    let summary = done.cells[0].2.clone();
    (tmp, summary)
}

fn main_figures_only(text: &str, dir: &std::path::Path) -> String {
    without_the_build(&text.replace(&dir.display().to_string(), "[DIR]"))
}

/// Whether this build is dirty is the tree's, not the cell's: its warning line left
/// out (tests/provenance_record.rs checks it).
fn without_the_build(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("warning:   DIRTY BUILD:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// result.json without what depends on the tree it was built from (the dirty warning).
fn result_without_the_build(dir: &std::path::Path) -> serde_json::Value {
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    if let Some(w) = r["warnings"].as_array_mut() {
        w.retain(|x| !x.as_str().unwrap_or_default().starts_with("DIRTY BUILD:"));
    }
    r
}

#[test]
fn smoke_summary_report_and_result_in_virtual_time() {
    let (tmp, summary) = virtual_cell("smoke.yaml", &["duration=3s", "warmup=1s"]);
    let dir = tmp.path().join("cell");
    let summary = main_figures_only(&summary, &dir);
    insta::with_settings!({filters => vec![
        (r"loader: .*", "loader: [MACHINE]"),
        (r"rated=\d+\.\ds", "rated=[S]"),
    ]}, {
        insta::assert_snapshot!("smoke_summary", summary);
    });
    let csv = std::fs::read_to_string(dir.join("report.csv")).unwrap();
    insta::with_settings!({filters => vec![(r"(?m)^(\d+),\d+,", "$1,[UNIX_MS],")]}, {
        insta::assert_snapshot!("smoke_report_csv", csv);
    });
    let r = result_without_the_build(&dir);
    insta::assert_json_snapshot!("smoke_result_json", r, {
        ".crossbench.git_commit" => "[BUILD]",
        ".crossbench.dirty" => "[BUILD]",
        ".time.started_utc" => "[T]",
        ".time.ended_utc" => "[T]",
        ".time.started_unix_ms" => "[T]",
        ".time.rated_start_unix_ms" => "[T]",
        ".time.rated_end_unix_ms" => "[T]",
        ".host" => "[HOST]",
        ".loader" => "[MACHINE]",
        ".cost" => "[SAMPLED]",
        ".verdict.dir" => "[DIR]",
    });
}

#[test]
fn stream_summary_report_and_result_in_virtual_time() {
    let (tmp, summary) = virtual_cell(
        "stream-smoke.yaml",
        &["duration=3s", "warmup=1s", "stream.consume.groups=2"],
    );
    let dir = tmp.path().join("cell");
    let summary = main_figures_only(&summary, &dir);
    insta::with_settings!({filters => vec![
        (r"loader: .*", "loader: [MACHINE]"),
        (r"ack rtt [0-9.]+ ms", "ack rtt [REAL] ms"),
    ]}, {
        insta::assert_snapshot!("stream_summary", summary);
    });
    let csv = std::fs::read_to_string(dir.join("report.csv")).unwrap();
    // The ack round trip of the control broker is a real-time measurement.
    insta::with_settings!({filters => vec![
        (r"(?m)^(\d+),\d+,", "$1,[UNIX_MS],"),
        (r"(?m),[0-9.]+,(\d+),(\d+)$", ",[REAL],$1,$2"),
    ]}, {
        insta::assert_snapshot!("stream_report_csv", csv);
    });
    let r = result_without_the_build(&dir);
    insta::assert_json_snapshot!("stream_result_json", r, {
        ".crossbench.git_commit" => "[BUILD]",
        ".crossbench.dirty" => "[BUILD]",
        ".time.started_utc" => "[T]",
        ".time.ended_utc" => "[T]",
        ".time.started_unix_ms" => "[T]",
        ".time.rated_start_unix_ms" => "[T]",
        ".time.rated_end_unix_ms" => "[T]",
        ".host" => "[HOST]",
        ".loader" => "[MACHINE]",
        ".cost" => "[SAMPLED]",
        ".verdict.dir" => "[DIR]",
        ".latency_ms.ack_round_trip_mean_ms" => "[REAL]",
    });
}
