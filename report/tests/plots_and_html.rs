//! Plots and the HTML page from cell records with report.csv, samples.csv and an
//! e2e.hlog written here.

mod common;

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use common::{s, write, Spec};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use report::cell::load_all;
use report::{html, latency_log, plot};

/// rated window of the common spec: unix ms 1 000 000 … 1 030 000.
fn write_raw(dir: &Path, base_ms: u64) {
    let start = UNIX_EPOCH + Duration::from_millis(995_000);
    let mut out = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    {
        let mut b = IntervalLogWriterBuilder::new();
        b.with_start_time(start).with_base_time(start);
        let mut w = b.begin_log_with(&mut out, &mut ser).unwrap();
        for sec in 0..40u64 {
            for tag in ["A", "B"] {
                let mut h = Histogram::<u64>::new(3).unwrap();
                // warm-up seconds (first 5) are slow; rated ones around base_ms.
                let v = if sec < 5 {
                    5_000_000
                } else {
                    base_ms * 1000 + sec * 100
                };
                for i in 0..100 {
                    h.record(v + i * 10).unwrap();
                }
                w.write_histogram(
                    &h,
                    Duration::from_secs(sec),
                    Duration::from_secs(1),
                    Tag::new(tag),
                )
                .unwrap();
            }
        }
    }
    std::fs::write(dir.join("e2e.hlog"), out).unwrap();
    let mut rc = String::from("# crossbench report.csv v1\nt_s,unix_ms,phase,offered,published,shed,failed,errors,lag_msgs,delivered_x,delivered_y,schedule_lag_p99_ms,e2e_a_p50_ms,e2e_a_p99_ms,e2e_b_p50_ms,e2e_b_p99_ms\n");
    let mut sm =
        String::from("# crossbench samples v1\nunix_ms,elapsed_s,target,kind,metric,value\n");
    for sec in 0..40i64 {
        let unix = 995_000 + sec * 1000;
        rc.push_str(&format!(
            "{sec},{unix},rated,200,200,0,0,0,{},600,600,0.5,{},{},{},{}\n",
            sec * 3,
            base_ms,
            base_ms * 2,
            base_ms,
            base_ms * 2
        ));
        sm.push_str(&format!(
            "{unix},{sec}.000,postgres,process,cpu_cores,{}\n",
            1.0 + sec as f64 / 100.0
        ));
        sm.push_str(&format!(
            "{unix},{sec}.000,postgres,process,rss_bytes,{}\n",
            500_000_000 + sec * 1_000_000
        ));
        sm.push_str(&format!("{unix},{sec}.000,loader,loader,cpu_cores,0.3\n"));
        sm.push_str(&format!("{unix},{sec}.000,host,host,cpu_cores,\n"));
    }
    std::fs::write(dir.join("report.csv"), rc).unwrap();
    std::fs::write(dir.join("samples.csv"), sm).unwrap();
}

#[test]
fn hlog_rated_window_excludes_warmup() {
    let tmp = tempfile::tempdir().unwrap();
    let d = write(
        tmp.path(),
        &Spec {
            name: "c",
            ..Spec::default()
        },
    );
    write_raw(&d, 100);
    let all = latency_log::merged(&d.join("e2e.hlog"), "A", None, None).unwrap();
    let rated =
        latency_log::merged(&d.join("e2e.hlog"), "A", Some(1_000_000), Some(1_030_000)).unwrap();
    assert_eq!(all.len(), 4000);
    assert_eq!(rated.len(), 3000);
    assert!(all.max() >= 5_000_000);
    assert!(rated.max() < 200_000, "{}", rated.max());
    let pts = latency_log::cdf_points(&rated);
    assert!(pts.windows(2).all(|w| w[0].1 <= w[1].1), "CDF is monotone");
}

#[test]
fn plots_and_the_page_are_written_and_self_contained() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let a = write(
        &runs,
        &Spec {
            name: "pg-200",
            ..Spec::default()
        },
    );
    let b = write(
        &runs,
        &Spec {
            name: "pg-300",
            rate: 300,
            ..Spec::default()
        },
    );
    let v = write(
        &runs,
        &Spec {
            name: "pg-450",
            rate: 450,
            outcome: "VOID",
            void_reason: Some("pacer skipped events"),
            ..Spec::default()
        },
    );
    write_raw(&a, 100);
    write_raw(&b, 300);
    write_raw(&v, 900);
    let cells = load_all(&[s(&runs)]).unwrap();
    // By default the pictures are files beside the page, linked.
    let linked = html::write(&cells, &tmp.path().join("linked")).unwrap();
    let page = std::fs::read_to_string(&linked.index).unwrap();
    assert_eq!(page.matches("<img ").count(), 5);
    assert_eq!(page.matches("src=\"plots/").count(), 5, "images are files");
    assert!(!page.contains("data:image"), "nothing inline by default");
    // With `inline`, one self-contained file.
    let out = tmp.path().join("report");
    let sources = html::Sources {
        cells: &cells,
        campaigns: &[],
        gates: &[],
    };
    let w = html::write_page(&sources, &out, html::PageOptions { inline: true }).unwrap();
    // CDF, sweep, and one time series per cell.
    assert_eq!(w.pictures.len(), 2 + 3);
    for p in &w.pictures {
        let png = std::fs::read(&p.png).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{}", p.png.display());
        assert!(
            png.len() > 10_000,
            "{} is {} bytes: nothing drawn?",
            p.png.display(),
            png.len()
        );
        let svg = std::fs::read_to_string(&p.svg).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("<polyline"),
            "{}",
            p.svg.display()
        );
    }
    let page = std::fs::read_to_string(&w.index).unwrap();
    assert_eq!(page.matches("<img ").count(), 5);
    assert_eq!(
        page.matches("src=\"data:image/png;base64,").count(),
        5,
        "images are inline"
    );
    assert!(
        !page.contains("<script src") && !page.contains("<link "),
        "no external scripts or styles"
    );
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing fetched from the network"
    );
    assert!(
        page.contains("<h3>Cost to serve</h3>")
            && page.contains("<h3>Ceiling</h3>")
            && page.contains("<h3>Cardinality and the cost model</h3>")
    );
    assert!(
        page.contains("href=\"../runs/pg-200/result.json\""),
        "relative links to raw files"
    );
    assert!(
        page.contains("crossbench run scenarios/pg-300.yaml"),
        "the invocation is shown"
    );
    assert!(page.contains("VOID — not results of the system"));
    for f in [
        "cost-to-serve.md",
        "cost-to-serve.csv",
        "ceiling.md",
        "cardinality.csv",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // The timeseries reads samples.csv: system cores are postgres's.
    let ticks = report::samples::read(&a.join("samples.csv"), &["postgres".to_string()]).unwrap();
    assert_eq!(ticks.len(), 40);
    assert_eq!(ticks[10].system_cores, Some(1.1));
    assert_eq!(ticks[10].loader_cores, Some(0.3));
    assert_eq!(plot::slug("a b/c"), "a-b-c");
}

/// Stream cells are drawn against their push rate, on a picture of their own, never at
/// an ingress rate of 0 among the pipeline cells (issue 48).
#[test]
fn stream_cells_get_their_own_rate_axis() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    for (name, rate) in [("pg-200", 200), ("pg-300", 300)] {
        write(
            &runs,
            &Spec {
                name,
                rate,
                ..Spec::default()
            },
        );
    }
    for (name, push) in [("st-1000", 1000), ("st-2000", 2000)] {
        let d = write(
            &runs,
            &Spec {
                name,
                system: "redis",
                variant: "streams",
                rate: 0,
                ..Spec::default()
            },
        );
        common::patch(
            &d,
            "workload",
            serde_json::json!({"kind": "stream", "rate_events_per_sec": 0, "rate_msgs_per_sec": push, "properties": 100, "lanes": 100, "batch": 100, "payload_b": 2048}),
        );
        common::patch(
            &d,
            "latency_ms",
            serde_json::json!({"e2e": {"count": 100, "p50_ms": 5.0, "p90_ms": 6.0, "p95_ms": 7.0, "p99_ms": 8.0, "p999_ms": 9.0, "max_ms": 9.0}}),
        );
    }
    let cells = load_all(&[s(&runs)]).unwrap();
    let refs: Vec<_> = cells.iter().collect();
    assert_eq!(plot::sweep::rates(&refs, false), 2);
    assert_eq!(plot::sweep::rates(&refs, true), 2);
    let out = tmp.path().join("plots");
    let pipeline = plot::sweep::plot(&refs, &out.join("latency-vs-rate")).unwrap();
    let stream = plot::sweep::plot_stream(&refs, &out.join("latency-vs-push-rate")).unwrap();
    let svg = |p: &plot::Picture| std::fs::read_to_string(&p.svg).unwrap();
    let (pipe_svg, stream_svg) = (svg(&pipeline), svg(&stream));
    assert!(pipe_svg.contains("ingress events/s"), "pipeline axis");
    assert!(
        !pipe_svg.contains("redis"),
        "a stream cell on the ingress axis"
    );
    assert!(stream_svg.contains("messages/s"), "stream axis");
    assert!(stream_svg.contains("redis") && !stream_svg.contains("pgmq"));
    // The page draws both.
    let w = html::write(&cells, &tmp.path().join("report")).unwrap();
    let names: Vec<String> = w
        .pictures
        .iter()
        .map(|p| p.png.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n == "latency-vs-rate.png")
            && names.iter().any(|n| n == "latency-vs-push-rate.png"),
        "{names:?}"
    );
}
