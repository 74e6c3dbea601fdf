//! Several loaders, one cell (issue 20), through the real binary: each loader is a
//! process, as on several machines. On loopback: two loaders against RabbitMQ in the
//! `shared` topology and against pgmq in the `partitioned` one, each cell merged by
//! `crossbench merge`; a gap planted in one loader's log fails the merged verdict,
//! naming the loader; one loader is the ordinary cell; a loader that fails at setup,
//! or falls silent, ends the cell for the other within the barrier timeout, and both
//! records say why; bad loader flags are exit 2.
//!
//! `mem` cannot be shared by two processes, so the merged cells use real servers.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{reachable, result, u};

/// The relaxed VOID rule and a short cell, for every loader.
const SHORT: [&str; 6] = [
    "duration=8s",
    "warmup=2s",
    "void.loader_cpu_max=1",
    "void.schedule_lag_p99_max=10s",
    "held.exploratory=true",
    "loaders.barrier_timeout=60s",
];

/// Start loader `j` of `n` of `scn` (its record in `out`).
fn loader(scn: &str, j: u64, n: u64, port: u16, sets: &[&str], out: &Path) -> Child {
    loader_env(scn, j, n, port, sets, out, &[])
}

fn loader_env(
    scn: &str,
    j: u64,
    n: u64,
    port: u16,
    sets: &[&str],
    out: &Path,
    env: &[(&str, &str)],
) -> Child {
    let mut c = support::binary();
    c.args(["run"]).arg(support::scenario(scn));
    for s in SHORT.iter().chain(sets) {
        c.args(["--set", s]);
    }
    c.args([
        "--loader-index",
        &j.to_string(),
        "--loader-count",
        &n.to_string(),
        "--rendezvous",
        &format!("http://127.0.0.1:{port}"),
        "-q",
        "--out",
    ])
    .arg(out)
    .envs(env.iter().copied())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Wait for a loader (at most `limit`): its exit code and its output.
fn finish(mut c: Child, limit: Duration) -> (i32, String) {
    let t0 = Instant::now();
    loop {
        if let Some(status) = c.try_wait().unwrap() {
            let out = c.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return (status.code().unwrap_or(-1), text);
        }
        if t0.elapsed() > limit {
            let _ = c.kill();
            let out = c.wait_with_output().unwrap();
            panic!(
                "a loader did not end within {limit:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET /state` of the rendezvous on `port` (Null until it answers).
fn state(port: u16) -> Value {
    use std::io::{Read, Write};
    let Ok(mut sock) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return Value::Null;
    };
    let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
    if sock
        .write_all(b"GET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return Value::Null;
    }
    let mut buf = Vec::new();
    let _ = sock.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    text.split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok())
        .unwrap_or(Value::Null)
}

/// `crossbench merge <dirs> --out <out>`: exit code and output.
fn merge(dirs: &[PathBuf], out: &Path) -> (i32, String) {
    let o = support::binary()
        .arg("merge")
        .args(dirs)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn f(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for p in path.split('.') {
        cur = match p.parse::<usize>() {
            Ok(i) if cur.is_array() => &cur[i],
            _ => &cur[p],
        };
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number: {cur}"))
}

/// Run a cell of two loaders and merge it: the loaders' records and the merged one.
fn two_loaders(scn: &str, sets: &[&str], tmp: &Path) -> (Vec<Value>, Value, PathBuf, String) {
    let port = support::free_port();
    let dirs: Vec<PathBuf> = (0..2).map(|j| tmp.join(format!("loader-{j}"))).collect();
    let kids: Vec<Child> = (0..2)
        .map(|j| loader(scn, j, 2, port, sets, &dirs[j as usize]))
        .collect();
    let mut texts = Vec::new();
    for (j, k) in kids.into_iter().enumerate() {
        let (code, text) = finish(k, Duration::from_secs(300));
        assert!(
            dirs[j].join("result.json").exists(),
            "loader {j}: exit {code}, no result.json:\n{text}"
        );
        texts.push((code, text));
    }
    let records: Vec<Value> = dirs.iter().map(|d| result(d)).collect();
    for (j, (code, text)) in texts.iter().enumerate() {
        assert!(
            matches!(code, 0 | 8),
            "loader {j} exit {code}: {}\n{text}",
            records[j]
        );
    }
    let merged_dir = tmp.join("merged");
    let (code, text) = merge(&dirs, &merged_dir);
    assert!(
        merged_dir.join("result.json").exists(),
        "merge exit {code}:\n{text}"
    );
    let merged = result(&merged_dir);
    assert_eq!(
        code,
        0,
        "merge exit {code}:\n{text}\n{}",
        support::summary(&merged)
    );
    (records, merged, merged_dir, text)
}

/// What every merged cell must show: PASS, clean; its counts the sums of the
/// loaders'; its histograms' counts the sums of theirs.
fn assert_merged_is_the_sum(records: &[Value], m: &Value) {
    support::assert_clean_pass(m);
    for k in [
        "flows.A.offered",
        "flows.A.published",
        "flows.B.offered",
        "flows.B.published",
        "flows.A.offered_rated",
        "flows.B.published_rated",
    ] {
        let sum: f64 = records.iter().map(|r| f(r, k)).sum();
        assert_eq!(f(m, k), sum, "{k}: the merged figure is the loaders' sum");
        assert!(sum > 0.0, "{k}: nothing offered");
    }
    for k in [
        "throughput.window_deliveries_per_sec",
        "throughput.deliveries_per_sec",
    ] {
        let sum: f64 = records.iter().map(|r| f(r, k)).sum();
        assert!(
            (f(m, k) - sum).abs() < 1e-6,
            "{k}: {} against {sum}",
            f(m, k)
        );
    }
    // Delivered: every loader's processed messages, stream by stream.
    let processed: u64 = records
        .iter()
        .map(|r| support::stream_sum(r, "processed"))
        .sum();
    assert_eq!(u(&m["verdict"]["totals"]["delivered"]), processed);
    // A histogram's count is the sum of the loaders' counts, never an average.
    for k in ["e2e_a", "e2e_b", "schedule_lag", "ingress_publish"] {
        let sum: u64 = records
            .iter()
            .map(|r| u(&r["latency_ms"][k]["count"]))
            .sum();
        assert_eq!(u(&m["latency_ms"][k]["count"]), sum, "latency_ms.{k}.count");
        assert!(sum > 0, "latency_ms.{k}: empty");
    }
    assert_eq!(
        m["latency_ms"]["clocks"]["trusted"], true,
        "one host: one clock"
    );
    assert_eq!(u(&m["loaders"]["count"]), 2);
}

#[test]
fn two_loaders_share_one_rabbitmq_topology_and_merge_into_one_cell() {
    let _g = support::serial();
    if !support::rabbitmq() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (records, m, dir, text) = two_loaders("rabbit-smoke.yaml", &[], tmp.path());
    for (j, r) in records.iter().enumerate() {
        assert_eq!(r["outcome"], "SHARE", "loader {j}: {}", support::summary(r));
        assert_eq!(r["loaders"]["index"], j as u64);
        assert_eq!(r["loaders"]["topology"], "shared");
        // Every queue single-active-consumer, set up by loader 0 only.
        let notes = r["provisioned"]["notes"].to_string();
        assert!(notes.contains("x-single-active-consumer"), "{notes}");
    }
    assert_merged_is_the_sum(&records, &m);
    // Both loaders consumed: each registered first on its share of the queues.
    let lines = m["loaders"]["lines_per_loader"].as_array().unwrap();
    assert!(
        lines.iter().all(|l| l.as_u64().unwrap() > 0),
        "both loaders' consumers delivered: {lines:?}"
    );
    // The merged logs carry the loader of every line.
    let log = std::fs::read_to_string(dir.join("cm-avail_cm-db.log")).unwrap();
    assert!(
        log.lines().all(|l| l.split(',').count() == 4),
        "{}",
        &log[..200]
    );
    eprintln!("{text}");
}

#[test]
fn two_loaders_partitioned_on_pgmq_and_a_planted_gap_names_its_loader() {
    let _g = support::serial();
    if !reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (records, m, _dir, text) = two_loaders(
        "pgmq-smoke.yaml",
        &["loaders.topology=partitioned"],
        tmp.path(),
    );
    for (j, r) in records.iter().enumerate() {
        // A partitioned loader's logs hold all of its keys: its own verdict counts.
        assert_eq!(r["outcome"], "PASS", "loader {j}: {}", support::summary(r));
        assert_eq!(r["loaders"]["namespace"], format!("l{j}-"));
        assert_eq!(r["loaders"]["verified_alone"], true);
    }
    assert_merged_is_the_sum(&records, &m);
    // N namespaces: the system held N times the topology, and the record says so.
    let one = f(&records[0], "provisioned.physical_queues");
    assert_eq!(f(&m, "provisioned.physical_queues"), 2.0 * one);
    assert!(m["provisioned"]["notes"]
        .to_string()
        .contains("2x the topology"));
    assert_eq!(m["streams"][0]["stream"], "cm-avail_cm-db");
    eprintln!("{text}");

    // Plant a gap: drop one line of a key of loader 1 (not its last) from loader 1's
    // log of one stream, and merge again.
    let l1 = tmp.path().join("loader-1");
    let log = l1.join("l1-cm-ota-sync_ota-3.log");
    let body = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = body.lines().collect();
    let key = lines[0].split(',').next().unwrap().to_string();
    let victim = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.split(',').next() == Some(key.as_str()))
        .nth(3)
        .map(|(i, _)| i)
        .expect("a key with four lines");
    let kept: String = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    std::fs::write(&log, kept).unwrap();
    let out = tmp.path().join("merged-with-a-gap");
    let dirs = [tmp.path().join("loader-0"), l1];
    let (code, text) = merge(&dirs, &out);
    let r = result(&out);
    assert_eq!(code, 3, "a gap fails the merged cell:\n{text}");
    assert_eq!(r["outcome"], "FAIL");
    assert_eq!(u(&r["verdict"]["totals"]["gaps"]), 1, "{}", r["verdict"]);
    let reasons = r["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains(&format!("key {key} is produced by loader 1"))
            && reasons.contains("came from loader 1"),
        "the gap names its loader: {reasons}"
    );
}

/// The figures a plain cell and a one-loader cell of the same seed share.
fn comparable(r: &Value) -> Vec<(String, Value)> {
    let mut v = Vec::new();
    for k in [
        "outcome",
        "system",
        "workload",
        "invariants",
        "identity_holds",
        "provisioned",
    ] {
        v.push((k.to_string(), r[k].clone()));
    }
    for flow in ["A", "B"] {
        for k in [
            "offered",
            "published",
            "shed",
            "failed",
            "offered_rated",
            "published_rated",
        ] {
            v.push((format!("flows.{flow}.{k}"), r["flows"][flow][k].clone()));
        }
    }
    for k in [
        "delivered",
        "unique",
        "gaps",
        "duplicates",
        "order_violations",
    ] {
        v.push((
            format!("verdict.totals.{k}"),
            r["verdict"]["totals"][k].clone(),
        ));
    }
    v
}

#[test]
fn one_loader_is_the_ordinary_cell() {
    let _g = support::serial();
    let tmp = tempfile::tempdir().unwrap();
    let sets = ["duration=3s", "warmup=1s", "seed=7"];
    let (code, text) = support::run_into(
        &support::scenario("smoke.yaml"),
        &support::relaxed(&sets),
        &tmp.path().join("plain"),
    );
    assert_eq!(code, 0, "{text}");
    let plain = result(&tmp.path().join("plain"));
    let one = tmp.path().join("one");
    let mut c = support::binary();
    c.args(["run"]).arg(support::scenario("smoke.yaml"));
    for s in support::relaxed(&sets) {
        c.args(["--set", s]);
    }
    let o = c
        .args(["--loader-count", "1", "-q", "--out"])
        .arg(&one)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = result(&one);
    assert_eq!(comparable(&r), comparable(&plain));
    // The record's keys are the plain cell's and `loaders`.
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    let mut want = keys(&plain);
    want.push("loaders".into());
    want.sort();
    let mut got = keys(&r);
    got.sort();
    assert_eq!(got, want);
    assert_eq!(r["loaders"]["count"], 1);
    assert_eq!(r["loaders"]["verified_alone"], true);
    // Its logs are plain, and merging the one loader gives the same figures.
    let log = std::fs::read_to_string(one.join("cm-avail_cm-db.log")).unwrap();
    assert!(log.lines().all(|l| l.split(',').count() == 2));
    let (code, text) = merge(&[one], &tmp.path().join("merged"));
    assert_eq!(code, 0, "{text}");
    let m = result(&tmp.path().join("merged"));
    assert_eq!(comparable(&m), comparable(&plain));
}

#[test]
fn a_loader_failing_at_setup_ends_the_cell_for_both_and_both_records_say_why() {
    let _g = support::serial();
    if !reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let dirs: Vec<PathBuf> = (0..2)
        .map(|j| tmp.path().join(format!("loader-{j}")))
        .collect();
    let t0 = Instant::now();
    let k0 = loader(
        "pgmq-smoke.yaml",
        0,
        2,
        port,
        &["loaders.barrier_timeout=20s"],
        &dirs[0],
    );
    let k1 = loader_env(
        "pgmq-smoke.yaml",
        1,
        2,
        port,
        &["loaders.barrier_timeout=20s"],
        &dirs[1],
        &[("CROSSBENCH_FLEET_FAILPOINT", "setup")],
    );
    let (c1, t1) = finish(k1, Duration::from_secs(60));
    let (c0, t0text) = finish(k0, Duration::from_secs(60));
    // Nothing hangs: both ended well within the barrier timeout after the failure.
    assert!(t0.elapsed() < Duration::from_secs(45), "{:?}", t0.elapsed());
    assert_eq!(c1, 9, "loader 1 exit:\n{t1}");
    assert_eq!(c0, 9, "loader 0 exit:\n{t0text}");
    for (j, d) in dirs.iter().enumerate() {
        let r = result(d);
        assert_eq!(r["outcome"], "ABANDONED", "loader {j}: {r}");
        let why = r["abandoned"].to_string() + &r["loaders"]["abandoned"].to_string();
        assert!(
            why.contains("\"loader\":1") && why.contains("on purpose"),
            "loader {j}'s record names loader 1 and why: {why}"
        );
        assert_eq!(r["loaders"]["index"], j as u64);
    }
    // The merge of an abandoned cell is an abandoned cell.
    let (code, text) = merge(&dirs, &tmp.path().join("merged"));
    assert_eq!(code, 9, "{text}");
}

#[test]
fn a_silent_loader_ends_the_cell_within_the_silence_limit() {
    let _g = support::serial();
    if !reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let dir0 = tmp.path().join("loader-0");
    let t0 = Instant::now();
    let k0 = loader(
        "pgmq-smoke.yaml",
        0,
        2,
        port,
        &["loaders.barrier_timeout=8s"],
        &dir0,
    );
    // Loader 1 joins, and is killed as soon as the rendezvous has seen it: a loader
    // whose process died says nothing more.
    let k1 = loader(
        "pgmq-smoke.yaml",
        1,
        2,
        port,
        &["loaders.barrier_timeout=8s"],
        &tmp.path().join("loader-1"),
    );
    loop {
        if state(port)["members"][1]["joined"] == true {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "loader 1 never joined"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut k1 = k1;
    let killed_at = Instant::now();
    k1.kill().unwrap();
    let _ = k1.wait();
    let (c0, text) = finish(k0, Duration::from_secs(60));
    let took = killed_at.elapsed();
    assert_eq!(c0, 9, "{text}");
    let r = result(&dir0);
    assert_eq!(r["outcome"], "ABANDONED", "{r}");
    let why = r["abandoned"]["why"].as_str().unwrap_or("").to_string();
    assert!(why.contains("loader 1 stopped answering"), "{why}");
    // Silence limit: min(barrier timeout, 10 s) = 8 s, plus a beat.
    assert!(took < Duration::from_secs(20), "noticed after {took:?}");
}

#[test]
fn bad_loader_flags_are_exit_2_with_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<&str>, &str); 4] = [
        (
            "smoke.yaml",
            vec![
                "--loader-index",
                "2",
                "--loader-count",
                "2",
                "--rendezvous",
                "http://127.0.0.1:1",
            ],
            "--loader-index",
        ),
        (
            "pgmq-smoke.yaml",
            vec!["--loader-index", "0", "--loader-count", "2"],
            "--rendezvous",
        ),
        (
            "nats-smoke.yaml",
            vec![
                "--loader-index",
                "0",
                "--loader-count",
                "2",
                "--rendezvous",
                "http://127.0.0.1:1",
            ],
            "loaders.topology",
        ),
        (
            "smoke.yaml",
            vec![
                "--loader-count",
                "2",
                "--rendezvous",
                "http://127.0.0.1:1",
                "--set",
                "loaders.topology=partitioned",
            ],
            "--loader-index",
        ),
    ];
    for (i, (scn, args, field)) in cases.iter().enumerate() {
        let out = tmp.path().join(format!("c{i}"));
        let o = support::binary()
            .arg("run")
            .arg(support::scenario(scn))
            .args(args)
            .arg("--out")
            .arg(&out)
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "case {i}: {err}");
        assert!(err.contains(field), "case {i} names {field}: {err}");
        assert!(!out.join("result.json").exists(), "case {i} wrote a record");
    }
    // merge: a directory that is not a loader's, and a missing loader.
    let plain = tmp.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("result.json"), r#"{"outcome":"PASS"}"#).unwrap();
    let (code, text) = merge(&[plain], &tmp.path().join("m1"));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("not a loader's record"), "{text}");
    let l1 = tmp.path().join("l1");
    std::fs::create_dir_all(&l1).unwrap();
    std::fs::write(
        l1.join("result.json"),
        r#"{"outcome":"SHARE","cell":"c","loaders":{"index":1,"count":2,"topology":"shared"}}"#,
    )
    .unwrap();
    let (code, text) = merge(&[l1], &tmp.path().join("m2"));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("loader 0 of 2 is missing"), "{text}");
    // A loader's record whose outcome no crossbench wrote: an error, not a default.
    let l0 = tmp.path().join("l0");
    std::fs::create_dir_all(&l0).unwrap();
    std::fs::write(
        l0.join("result.json"),
        r#"{"schema_version":1,"outcome":"NOT-HELD","cell":"c","loaders":{"index":0,"count":1,"topology":"shared"}}"#,
    )
    .unwrap();
    let (code, text) = merge(&[l0], &tmp.path().join("m3"));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("unknown outcome \"NOT-HELD\""), "{text}");
}
