//! The live metrics endpoint (`--metrics-listen`) scraped by a real Prometheus: a
//! Prometheus of the test's own on loopback (its own configuration and data
//! directory, stopped at the end) scrapes a smoke cell once a second; afterwards the
//! test asks Prometheus' HTTP API what it saw, and checks it against the cell's
//! record. Also: a bad address and an address in use are refused before anything
//! runs, and the Grafana dashboard's every query names a series the endpoint serves.

mod support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A Prometheus of this test's own, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` on 127.0.0.1:`port` (HTTP/1.0: no chunking), the body.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Start a Prometheus on a free loopback port scraping `target` every second.
fn start_prometheus(dir: &Path, target: u16) -> Prometheus {
    let port = support::free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: crossbench\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prometheus starts");
    let p = Prometheus { child, port };
    let until = Instant::now() + Duration::from_secs(30);
    while get(port, "/-/ready").is_none_or(|b| !b.contains("Ready")) {
        assert!(
            Instant::now() < until,
            "Prometheus not ready in 30 s: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Its scrape loop has begun (a first scrape tried, and failed: nothing listens
    // yet), so that the scrapes cover the cell from its start.
    while get(port, "/api/v1/targets").is_none_or(|b| !b.contains("\"lastError\":\"Get")) {
        assert!(Instant::now() < until, "Prometheus never tried a scrape");
        std::thread::sleep(Duration::from_millis(200));
    }
    p
}

/// `query_range` from `start` to `end` (unix seconds), step 1 s: each series' labels
/// and its (time, value) points.
fn range(p: &Prometheus, q: &str, start: f64, end: f64) -> Vec<(Value, Vec<(f64, f64)>)> {
    let body = get(
        p.port,
        &format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=1",
            encode(q)
        ),
    )
    .expect("Prometheus answers");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(v["status"], "success", "{body}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let points = s["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p[0].as_f64().unwrap(),
                        p[1].as_str().unwrap().parse::<f64>().unwrap(),
                    )
                })
                .collect();
            (s["metric"].clone(), points)
        })
        .collect()
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A smoke cell scraped once a second: the delivered counter's increase over the
/// rated window matches the record's window deliveries within one scrape interval's
/// worth, each flow has its latency histogram, and the phase went through rated and
/// draining to done, with the record's outcome. One stream's consumer stalls (the
/// control broker's `stall` fault), so that the drain lasts its grace (3 s) and a
/// scrape once a second sees it: the control broker otherwise drains in 0.05 s.
#[test]
fn a_real_prometheus_scrapes_a_cell() {
    if !Path::new(PROMETHEUS).is_file() {
        support::unavailable(
            &format!("{PROMETHEUS} missing"),
            "run scripts/provision/prometheus.sh",
        );
        return;
    }
    let _g = support::serial();
    let tmp = tempfile::tempdir().unwrap();
    let mport = support::free_port();
    let prom = start_prometheus(tmp.path(), mport);
    let cell = tmp.path().join("cell");
    let start = now();
    let o = support::binary()
        .args(["run"])
        .arg(support::scenario("smoke.yaml"))
        .arg("--out")
        .arg(&cell)
        .args(["-q", "--metrics-listen", &format!("127.0.0.1:{mport}")])
        .args([
            "--set",
            "mem.faults=[{topic: cm-ota-sync, group: ota-3, kind: stall, at: 600}]",
            "--set",
            "drain.grace=3s",
        ])
        .output()
        .unwrap();
    let end = now() + 1.0;
    assert!(
        cell.join("result.json").is_file(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = support::result(&cell);
    assert_eq!(
        r["drain"]["outcome"], "stalled",
        "the drain lasted its grace"
    );
    let rated = range(&prom, "crossbench_phase{phase=\"rated\"}", start, end);
    assert_eq!(rated.len(), 1, "one phase series for the cell: {rated:?}");
    let rated_times: Vec<f64> = rated[0]
        .1
        .iter()
        .filter(|(_, v)| *v == 1.0)
        .map(|(t, _)| *t)
        .collect();
    // The rated window is 8 s: scraped once a second from its start.
    assert!(rated_times.len() >= 7, "rated seen at {rated_times:?}");
    assert_eq!(rated[0].0["cell"], "smoke");
    assert_eq!(rated[0].0["system"], "mem");
    for phase in ["draining", "done"] {
        let s = range(
            &prom,
            &format!("crossbench_phase{{phase=\"{phase}\"}}"),
            start,
            end,
        );
        assert!(
            s.iter().any(|(_, pts)| pts.iter().any(|(_, v)| *v == 1.0)),
            "phase {phase} never scraped: {s:?}"
        );
    }
    // The delivered counter over the rated window, as scraped, against the record.
    let delivered = range(&prom, "sum(crossbench_delivered_total)", start, end);
    let at = |t: f64| {
        delivered[0]
            .1
            .iter()
            .find(|(x, _)| (*x - t).abs() < 0.01)
            .map(|(_, v)| *v)
            .unwrap()
    };
    let (t0, t1) = (rated_times[0], *rated_times.last().unwrap());
    let scraped = at(t1) - at(t0);
    let per_sec = r["throughput"]["window_deliveries_per_sec"]
        .as_f64()
        .unwrap();
    let expected = per_sec * (t1 - t0);
    eprintln!(
        "delivered over {:.0} s of the rated window: {scraped} scraped, {expected:.0} from result.json's {per_sec:.1}/s",
        t1 - t0
    );
    assert!(
        (scraped - expected).abs() <= per_sec * 1.0,
        "scraped {scraped} deliveries over {:.0} s of the rated window; the record's rate gives {expected:.0} (±{per_sec:.0}, one scrape interval's worth)",
        t1 - t0
    );
    // Each flow's latency histogram.
    let hist = range(&prom, "crossbench_e2e_latency_seconds_count", start, end);
    let mut flows: Vec<String> = hist
        .iter()
        .map(|(m, _)| m["flow"].as_str().unwrap().to_string())
        .collect();
    flows.sort();
    assert_eq!(flows, ["A", "B"], "{hist:?}");
    let count_a = hist
        .iter()
        .find(|(m, _)| m["flow"] == "A")
        .and_then(|(_, p)| p.last())
        .unwrap()
        .1;
    assert!(count_a > 0.0, "flow A's histogram is empty");
    let outcome = range(&prom, "crossbench_outcome", start, end);
    assert!(
        outcome.iter().any(|(m, _)| m["outcome"] == r["outcome"]),
        "the record's outcome {}: {outcome:?}",
        r["outcome"]
    );
}

/// A bad address is bad input naming the flag (exit 2); an address in use is
/// refused before the cell starts; in both, nothing is written.
#[test]
fn a_bad_or_busy_address_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let o = support::binary()
        .args(["run"])
        .arg(support::scenario("smoke.yaml"))
        .arg("--out")
        .arg(&out)
        .args(["-q", "--metrics-listen", "localhost:x"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--metrics-listen"), "{err}");
    assert!(!out.exists(), "nothing written");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    for cmd in [
        vec![
            "run".to_string(),
            support::scenario("smoke.yaml").display().to_string(),
        ],
        vec![
            "campaign".to_string(),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../campaigns/ceiling.yaml")
                .display()
                .to_string(),
        ],
    ] {
        let o = support::binary()
            .args(&cmd)
            .arg("--out")
            .arg(&out)
            .args(["-q", "--metrics-listen", &format!("127.0.0.1:{port}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(
            err.contains("--metrics-listen") && err.contains("in use"),
            "{cmd:?}: {err}"
        );
        assert!(!out.exists(), "{cmd:?}: nothing written");
    }
}

/// Every query of the Grafana dashboard names a series the endpoint serves, and it
/// is templated on cell and loader.
#[test]
fn the_dashboard_queries_only_served_series() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../compose/grafana/crossbench.json");
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let served: Vec<&str> = loader::console::live::state::SERIES
        .iter()
        .map(|(n, _, _)| *n)
        .collect();
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for v in ["cell", "loader"] {
        assert!(vars.contains(&v), "templated on {v}: {vars:?}");
    }
    let mut n = 0;
    for panel in d["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap();
            n += 1;
            let names: Vec<&str> = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("crossbench_"))
                .collect();
            assert!(!names.is_empty(), "{expr}: names no crossbench series");
            for name in names {
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(name);
                assert!(
                    served.contains(&base) || served.contains(&name),
                    "panel {:?}: {name} is not served",
                    panel["title"]
                );
            }
        }
    }
    assert!(n >= 6, "{n} queries");
}
