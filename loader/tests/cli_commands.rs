//! The commands no other test drives, through the real binary: `crossbench sample`
//! serving a `run --sampler URL`; `verify --prefix` on a reference-format directory
//! (exit 0 and 3) and on a directory that is not a cell (bad input, exit 2); an
//! internal error (exit 1); the run lock (a second run waits for the first); and a
//! reproducing page asked of two different campaigns (bad input, exit 2).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::{binary, result, scenario};

/// Kills and reaps a child on drop, even when the test panics.
struct Reap(Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// `crossbench sample` on loopback (the real binary), then a cell run with
/// `--sampler` against it: the cell's record holds the remote rows.
#[test]
fn sample_serves_a_run_with_sampler() {
    let addr = format!("127.0.0.1:{}", support::free_port());
    let mut child = binary()
        .args(["sample", "--listen", &addr, "--target", "init=pid:1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("crossbench sample starts");
    let stderr = child.stderr.take().unwrap();
    let server = Reap(child);
    let mut first = String::new();
    BufReader::new(stderr).read_line(&mut first).unwrap();
    assert!(
        first.contains(&format!("serving samples on http://{addr}/samples.csv")),
        "{first}"
    );
    let health = http_get(&addr, "/health").expect("the sampler answers /health");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");

    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let o = binary()
        .arg("run")
        .arg(scenario("smoke.yaml"))
        .args(["--set", "duration=2s", "--set", "warmup=0s"])
        .args(["--set", "void.loader_cpu_max=1"])
        .args(["--set", "void.schedule_lag_p99_max=10s"])
        .args(["--set", "held.exploratory=true"])
        .args(["--sampler", &format!("http://{addr}"), "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let remote = out.join("samples-remote.csv");
    let set =
        sampler::read_samples(&remote).unwrap_or_else(|e| panic!("{}: {e}", remote.display()));
    assert!(!set.rows.is_empty(), "no remote rows");
    // The remote machine's own targets: the one asked for and its host.
    let targets = set.targets();
    assert!(
        targets.iter().any(|t| t == "init") && targets.iter().any(|t| t == "host"),
        "{targets:?}"
    );
    // Rows only from the cell's start on (the pull asks since the cell started).
    let started = result(&out)["time"]["started_unix_ms"].as_u64().unwrap();
    assert!(
        set.rows.iter().all(|r| r.unix_ms >= started),
        "rows before the cell started ({started})"
    );
    drop(server);
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// A reference-harness log directory: its produced.meta dialect (no `# stream`
/// lines), the twelve stream logs under topic prefix `prefix`; properties 1 and 2,
/// seqs 1..=3 in both flows. `gap_in` drops seq 2 of property 1 from that stream.
fn reference_dir(dir: &Path, prefix: &str, gap_in: Option<&str>) {
    write(
        dir,
        "produced.meta",
        "# ackErr=0 base=1 system=kafka properties=2 rate=100\nA 1 3\nA 2 3\nB 1 3\nB 2 3\n",
    );
    let streams: Vec<String> = ["cm-avail_cm-db", "cm-prices_cm-cal"]
        .into_iter()
        .map(String::from)
        .chain((1..=5).map(|i| format!("cm-ota-sync_ota-{i}")))
        .chain((1..=5).map(|i| format!("cm-ota-prices_otap-{i}")))
        .collect();
    for s in streams {
        let body = if gap_in == Some(s.as_str()) {
            "1,1\n1,3\n2,1\n2,2\n2,3\n"
        } else {
            "1,1\n1,2\n1,3\n2,1\n2,2\n2,3\n"
        };
        write(dir, &format!("{prefix}{s}.log"), body);
    }
}

fn verify(args: &[&str], dir: &Path) -> (i32, String, String) {
    let o = binary().arg("verify").arg(dir).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn verify_with_prefix_reads_a_reference_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    std::fs::create_dir(&clean).unwrap();
    reference_dir(&clean, "x-", None);
    let json = tmp.path().join("verdict.json");
    let (code, out, err) = verify(
        &["--prefix", "x-", "--json", json.to_str().unwrap()],
        &clean,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("x-cm-ota-sync_ota-3"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["meta_format"], "reference");
    assert_eq!(v["pass"], true);
    assert_eq!(v["totals"]["streams"], 12);
    assert_eq!(v["totals"]["delivered"], 12 * 6);

    let gap = tmp.path().join("gap");
    std::fs::create_dir(&gap).unwrap();
    reference_dir(&gap, "x-", Some("cm-ota-sync_ota-3"));
    let (code, out, err) = verify(&["--prefix", "x-", "--json", json.to_str().unwrap()], &gap);
    assert_eq!(code, 3, "a gap is a FAIL: {out}{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["pass"], false);
    assert_eq!(v["totals"]["gaps"], 1, "{}", v["totals"]);
    assert_eq!(v["totals"]["failing_streams"], 1, "{}", v["totals"]);
}

/// A directory that is neither a cell nor a reference log directory is bad input
/// (exit 2) naming what is missing, not a FAIL: nothing was verified.
#[test]
fn verify_of_a_directory_that_is_not_a_cell_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "notes.txt", "not a cell\n");
    let (code, out, err) = verify(&[], tmp.path());
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("not a cell directory") && err.contains("produced.meta"),
        "{err}"
    );
    assert!(err.contains("cm-avail_cm-db.log"), "{err}");
    assert!(!out.contains("FAIL"), "no verdict is printed: {out}");
    // A reference directory verified without the prefix its logs carry: the same.
    reference_dir(tmp.path(), "x-", None);
    std::fs::remove_file(tmp.path().join("produced.meta")).unwrap();
    let (code, _, err) = verify(&[], tmp.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--prefix"), "{err}");
}

/// The harness failing (here: its run lock cannot be opened) is exit 1, with a
/// message naming what failed; no cell directory is created.
#[test]
fn an_internal_error_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let o = binary()
        .env("CROSSBENCH_LOCK", tmp.path().join("no-such-dir/run.lock"))
        .arg("run")
        .arg(scenario("smoke.yaml"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("run lock") && err.contains("no-such-dir"),
        "{err}"
    );
    assert!(!out.exists());
}

/// Two runs at once: the second waits for the first (and says so), then runs; its
/// cell starts after the first one's rated window ended.
#[test]
fn a_second_run_waits_for_the_run_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let lock = tmp.path().join("run.lock");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let start = |out: &Path, quiet: bool| {
        let mut c = binary();
        c.env("CROSSBENCH_LOCK", &lock)
            .arg("run")
            .arg(scenario("smoke.yaml"))
            .args(["--set", "duration=2s", "--set", "warmup=0s"])
            .args(["--set", "void.loader_cpu_max=1"])
            .args(["--set", "void.schedule_lag_p99_max=10s"])
            .args(["--set", "held.exploratory=true"])
            .arg("--out")
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if quiet {
            c.arg("-q");
        }
        Reap(c.spawn().unwrap())
    };
    let mut first = start(&a, true);
    // The first holds the lock once its cell directory exists.
    let t0 = Instant::now();
    while !a.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "first run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut second = start(&b, false);
    // Read the second run's console to its end (a closed pipe would fail its prints).
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = second.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the second run prints a line");
    assert!(
        line.contains("waiting for another crossbench run to finish"),
        "the second run says it waits: {line}"
    );
    assert!(!b.exists(), "the second run created its cell while waiting");
    assert_eq!(first.0.wait().unwrap().code(), Some(0));
    assert_eq!(second.0.wait().unwrap().code(), Some(0));
    reader.join().unwrap();
    let (ra, rb) = (result(&a), result(&b));
    let a_end = ra["time"]["rated_end_unix_ms"].as_u64().unwrap();
    let b_start = rb["time"]["started_unix_ms"].as_u64().unwrap();
    assert!(
        b_start >= a_end,
        "the second cell started at {b_start}, before the first's rated window ended at {a_end}"
    );
}

/// `compare --doc` over directories of two different campaigns: bad input (exit 2),
/// naming both, and no page written. Directories of one campaign are its sittings;
/// of two, they would mix methods on one page.
#[test]
fn a_reproducing_page_from_two_different_campaigns_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let campaign = |dir: &str, name: &str| {
        let d = tmp.path().join(dir);
        std::fs::create_dir_all(&d).unwrap();
        let json = format!(
            r#"{{"schema_version": 1, "campaign": "{name}", "status": "complete", "repeats": 3, "seed": 1, "arms": [], "cells": []}}"#
        );
        std::fs::write(d.join("campaign.json"), json).unwrap();
        d
    };
    let (a, b) = (
        campaign("a", "seed000-reproduce"),
        campaign("b", "findings"),
    );
    let page = tmp.path().join("reproducing.md");
    let published = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published");
    // `compare --doc <page> --campaign <first> --campaign <second>`
    let doc = |first: &Path, second: &Path| {
        binary()
            .args(["compare", "--published-dir"])
            .arg(&published)
            .arg("--doc")
            .arg(&page)
            .args(["--campaign".as_ref(), first.as_os_str()])
            .args(["--campaign".as_ref(), second.as_os_str()])
            .output()
            .unwrap()
    };
    let out = doc(&a, &b);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is campaign seed000-reproduce") && err.contains("is campaign findings"),
        "{err}"
    );
    assert!(!page.exists(), "nothing written");
    // The same directory twice is one campaign: the page is written.
    let ok = doc(&a, &a);
    let err = String::from_utf8_lossy(&ok.stderr);
    assert_eq!(ok.status.code(), Some(0), "{err}");
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .contains("--campaign"));
}
