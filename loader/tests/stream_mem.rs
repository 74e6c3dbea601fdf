//! The stream workload end to end on the control broker, through the real binary:
//! a clean run passes with every partition seen by every group; injected faults fail
//! with exact counts; a ladder makes one cell per rate; bad stream sections exit 2.

mod support;

use serde_json::Value;
use support::{result, run_raw, scenario, u, verdict_stream};

fn group<'a>(r: &'a Value, name: &str) -> &'a Value {
    verdict_stream(r, name)
}

#[test]
fn stream_smoke_passes_and_every_group_sees_every_partition() {
    let (code, text, tmp) = run_raw(&scenario("stream-smoke.yaml"), &support::relaxed(&[]));
    let dir = tmp.path().join("cell");
    let r = result(&dir);
    assert_eq!(code, 0, "exit code\n{text}");
    assert_eq!(r["outcome"], "PASS");
    assert_eq!(r["workload"]["kind"], "stream");
    assert!(r["identity_holds"].as_bool().unwrap());
    let space = u(&r["workload"]["space"]);
    assert_eq!(space, 2000);
    // The window covered the space: every partition was created and every group's
    // log holds every partition.
    assert_eq!(u(&r["partitions"]["created"]), space);
    for g in ["stream_g1", "stream_g2"] {
        let s = group(&r, g);
        assert_eq!(u(&s["properties_seen"]), space, "{s}");
        assert_eq!(u(&s["gaps"]), 0);
        assert_eq!(u(&s["order_violations"]), 0);
        assert_eq!(u(&s["duplicates"]), 0);
        assert_eq!(u(&s["lost_tail"]), 0);
    }
    let f = &r["flows"]["S"];
    assert_eq!(
        u(&f["offered"]),
        u(&f["published"]) + u(&f["shed"]) + u(&f["failed"])
    );
    // Each group popped everything that was accepted.
    for g in r["groups"].as_array().unwrap() {
        assert_eq!(u(&g["popped"]), u(&f["published"]), "{g}");
        assert_eq!(u(&g["acked"]), u(&g["popped"]), "{g}");
    }
    assert!(r["latency_ms"]["e2e"]["count"].as_u64().unwrap() > 0);
    assert!(r["latency_ms"]["ack_round_trip_mean_ms"].as_f64().is_some());
    // The per-second report has the stream columns and one row per second.
    let csv = std::fs::read_to_string(dir.join("report.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("# crossbench report.csv v2 workload=stream")
    );
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "offered",
        "accepted",
        "shed",
        "popped",
        "acked",
        "push_err_connection",
        "push_err_topology_refused",
        "pop_errors",
        "ack_errors",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "e2e_p999_ms",
        "ack_rtt_mean_ms",
        "partitions_created",
    ] {
        assert!(header.contains(&col), "column {col} in {header:?}");
    }
    let created_col = header
        .iter()
        .position(|c| *c == "partitions_created")
        .unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() >= 4, "{} rows", rows.len());
    let created: Vec<u64> = rows
        .iter()
        .map(|r| r[created_col].parse().unwrap())
        .collect();
    assert!(created.windows(2).all(|w| w[0] <= w[1]), "{created:?}");
    for f in [
        "produced.meta",
        "stream_g1.log",
        "stream_g2.log",
        "samples.csv",
        "invocation.txt",
        "e2e.hlog",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
}

#[test]
fn pushes_spread_over_several_partitions_stay_in_order() {
    // Each request carries 2 messages for each of 5 partitions of the window.
    let (code, text, tmp) = run_raw(
        &scenario("stream-smoke.yaml"),
        &support::relaxed(&["stream.push.partitions_per_request=5", "duration=3s"]),
    );
    let r = result(&tmp.path().join("cell"));
    assert_eq!(code, 0, "{text}");
    assert_eq!(r["workload"]["partitions_per_request"], 5);
    for g in ["stream_g1", "stream_g2"] {
        let s = group(&r, g);
        assert_eq!(
            u(&s["properties_seen"]),
            u(&r["partitions"]["created"]),
            "{s}"
        );
        assert_eq!(u(&s["order_violations"]), 0, "{s}");
        assert_eq!(u(&s["gaps"]), 0, "{s}");
    }
}

/// stream-smoke as a process of its own ([`support::run_process`]): what the pacers
/// got is recorded process-wide, and this binary's other tests run pacers at the same
/// time.
fn smoke_process(sets: &[&str]) -> (i32, Value, String, tempfile::TempDir) {
    support::run_process(&scenario("stream-smoke.yaml"), &support::relaxed(sets))
}

/// The cell offered its whole schedule and every group saw it in order.
fn whole_schedule(r: &Value, text: &str) {
    assert_eq!(r["outcome"], "PASS", "{text}");
    let f = &r["flows"]["S"];
    assert_eq!(u(&f["shed"]), 0, "{f}");
    assert_eq!(
        u(&f["offered"]),
        u(&f["published"]),
        "every request of the schedule went out: {f}"
    );
    let lag = &r["latency_ms"]["schedule_lag"];
    assert!(u(&lag["count"]) > 0, "{lag}");
    for g in ["stream_g1", "stream_g2"] {
        let s = group(r, g);
        assert_eq!(u(&s["gaps"]), 0, "{s}");
        assert_eq!(u(&s["order_violations"]), 0, "{s}");
    }
}

/// The default pacer has a thread of its own, and the record says what priority that
/// thread got (root here: `fifo`; without the right, `nice` or `normal`), never `task`.
#[test]
fn the_default_pacer_thread_offers_the_whole_schedule_and_says_its_priority() {
    let (code, r, text, _tmp) = smoke_process(&["duration=3s"]);
    assert_eq!(code, 0, "{text}");
    let got = r["loader"]["pacer_priority"].as_str().unwrap_or("?");
    assert!(
        ["fifo", "nice", "normal"].contains(&got),
        "pacer_priority {got}: a thread pacer is never a task\n{text}"
    );
    whole_schedule(&r, &text);
}

/// `stream.push.pacer: runtime`: the pacer is a task on the runtime's `timerfd`. The
/// cell still offers its whole schedule and passes, and the record says the pacer was
/// a task; its schedule lag is measured, not hidden.
#[test]
fn a_pacer_on_the_runtime_timer_offers_the_whole_schedule() {
    let (code, r, text, _tmp) = smoke_process(&["stream.push.pacer=runtime", "duration=3s"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(r["loader"]["pacer_priority"], "task", "{text}");
    whole_schedule(&r, &text);
}

#[test]
fn injected_faults_fail_with_exact_counts() {
    let (code, text, tmp) = run_raw(
        &scenario("stream-smoke.yaml"),
        &[
            "duration=2s",
            r#"mem.faults=[{topic: stream, group: g1, kind: drop, at: 100}, {topic: stream, group: g2, kind: duplicate, at: 150}, {topic: stream, group: g1, kind: reorder, at: 305}]"#,
        ],
    );
    let r = result(&tmp.path().join("cell"));
    assert_eq!(code, 3, "a correctness failure exits 3\n{text}");
    assert_eq!(r["outcome"], "FAIL");
    let g1 = group(&r, "stream_g1");
    assert_eq!(u(&g1["gaps"]), 1, "{g1}");
    assert_eq!(u(&g1["order_violations"]), 1, "{g1}");
    assert_eq!(u(&g1["duplicates"]), 0, "{g1}");
    let g2 = group(&r, "stream_g2");
    assert_eq!(u(&g2["duplicates"]), 1, "{g2}");
    assert_eq!(u(&g2["gaps"]), 0, "{g2}");
    assert_eq!(u(&g2["order_violations"]), 0, "{g2}");
    assert_eq!(u(&r["broker_stats"]["mem_faults_applied"]), 3);
}

#[test]
fn a_ladder_makes_one_cell_per_rate() {
    // This test checks the ladder's mechanics, not the pacer's timing: on a loaded CI
    // machine a debug build can miss the 5 ms schedule-lag rule at the top rung and the
    // cell is (rightly) VOID. The VOID rule has tests of its own (pipeline_mem.rs), so
    // here it is relaxed and the rates kept low.
    let (code, text, tmp) = run_raw(
        &scenario("stream-smoke.yaml"),
        &[
            "rate=0",
            "stream.ladder=[500, 1500]",
            "duration=2s",
            "warmup=0s",
            "void.schedule_lag_p99_max=10s",
            "held.exploratory=true",
            "void.loader_cpu_max=1",
        ],
    );
    assert_eq!(code, 0, "{text}");
    let out = tmp.path().join("cell");
    let mut offered = Vec::new();
    for rate in [500u64, 1500] {
        let dir = out.join(format!("stream-smoke-r{rate}"));
        let r = result(&dir);
        assert_eq!(r["cell"], format!("stream-smoke-r{rate}"));
        assert_eq!(u(&r["workload"]["rate_msgs_per_sec"]), rate);
        assert_eq!(r["workload"]["ladder"], serde_json::json!([500, 1500]));
        assert_eq!(r["outcome"], "PASS");
        offered.push(r["throughput"]["offered_per_sec"].as_f64().unwrap());
    }
    // The offered rate follows the ladder.
    assert!(offered[1] > 2.0 * offered[0], "{offered:?}");
    let table = std::fs::read_to_string(out.join("ladder.csv")).unwrap();
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.contains("stream-smoke-r1500,PASS,1500"), "{table}");
}

#[test]
fn bad_stream_sections_exit_2_naming_the_field() {
    for (sets, field) in [
        (
            vec!["stream.partitions.window=5000"],
            "stream.partitions.window",
        ),
        (
            vec!["stream.push.partitions_per_request=3"],
            "stream.push.partitions_per_request",
        ),
        (vec!["stream.ladder=[1000]"], "stream.ladder"),
        (vec!["rate=0"], "rate"),
        (vec!["properties=10"], "properties"),
        (
            vec!["stream.consume.pop_partitions=4"],
            "stream.consume.pop_partitions",
        ),
        (vec!["stream.consume.groups=0"], "stream.consume.groups"),
        (
            vec!["stream.partitions.rotate_every=0s"],
            "stream.partitions.rotate_every",
        ),
        (
            vec!["stream.partitions.fixed=10"],
            "stream.partitions.fixed",
        ),
        (vec!["stream.bogus=1"], "bogus"),
        (vec!["stream.payload.bytes=10"], "stream.payload.bytes"),
        (vec!["stream.push.pacer=fast"], "stream.push.pacer"),
    ] {
        let (code, text, _tmp) = run_raw(&scenario("stream-smoke.yaml"), &sets);
        assert_eq!(code, 2, "{sets:?}: {text}");
        assert!(text.contains(field), "{sets:?} should name {field}: {text}");
    }
}

/// The partition wall: a system that refuses the partition space (the control broker
/// with a lane limit) leaves a REFUSED record with its answer, exit 5.
#[test]
fn a_refused_partition_count_is_the_cells_result() {
    let (code, out, tmp) = run_raw(
        &scenario("stream-smoke.yaml"),
        &["duration=2s", "warmup=0s", "mem.max_lanes=500"],
    );
    assert_eq!(code, 5, "exit code; output:\n{out}");
    let r = result(&tmp.path().join("cell"));
    assert_eq!(r["outcome"], "REFUSED");
    assert_eq!(r["workload"]["kind"], "stream");
    let answer = r["refused"]["answer"].as_str().unwrap();
    assert!(answer.contains("at most 500 lanes"), "answer: {answer}");
    assert!(out.contains("REFUSED"), "the summary says so:\n{out}");
}

#[test]
fn a_completed_space_exists_in_full_before_the_window_and_its_messages_are_checked() {
    // stream-smoke's window (100 of 2 000 partitions, moving 100 every 200 ms) would
    // create about 500 partitions a second inside the window; completed first, it
    // creates none there.
    let (code, text, tmp) = run_raw(
        &scenario("stream-smoke.yaml"),
        &support::relaxed(&["duration=2s", "stream.partitions.complete=true"]),
    );
    let dir = tmp.path().join("cell");
    let r = result(&dir);
    assert_eq!(code, 0, "exit code\n{text}");
    assert_eq!(r["outcome"], "PASS");
    let space = u(&r["workload"]["space"]);
    assert_eq!(u(&r["partitions"]["created"]), space);
    assert_eq!(u(&r["partitions"]["completed"]), space);
    assert_eq!(
        r["partitions"]["created_per_sec_rated"].as_f64(),
        Some(0.0),
        "no partition is created inside the rated window\n{}",
        r["partitions"]
    );
    assert!(r["time"]["hydration_sec"].as_f64().unwrap() > 0.0);
    // The completing messages are seq 1 of every partition, checked like the rest,
    // popped by every group besides the published ones, and no part of the offered
    // load (the identity holds on the paced flow alone).
    let f = &r["flows"]["S"];
    assert_eq!(
        u(&f["offered"]),
        u(&f["published"]) + u(&f["shed"]) + u(&f["failed"])
    );
    for g in ["stream_g1", "stream_g2"] {
        let s = group(&r, g);
        assert_eq!(u(&s["properties_seen"]), space, "{s}");
        assert_eq!(u(&s["gaps"]), 0, "{s}");
        assert_eq!(u(&s["duplicates"]), 0, "{s}");
        assert_eq!(u(&s["lost_tail"]), 0, "{s}");
    }
    for g in r["groups"].as_array().unwrap() {
        assert_eq!(u(&g["popped"]), u(&f["published"]) + space, "{g}");
    }
    let meta = std::fs::read_to_string(dir.join("produced.meta")).unwrap();
    let partitions = meta.lines().filter(|l| l.starts_with("S ")).count() as u64;
    assert_eq!(
        partitions, space,
        "every partition has a seq in produced.meta"
    );
}
