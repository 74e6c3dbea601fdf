//! Checker throughput benchmark (plain main, `harness = false`).
//!
//! Generates a cell of 12 stream logs (the reference topology) with `--lines` lines in total,
//! properties interleaved round-robin, under `--dir` (default /work/bench-data), then runs
//! `verify_dir` `--runs` times per property count and prints lines/s, wall time and peak RSS.
//!
//! cargo bench -p crossbench-checker --bench verify -- --props 1000,1000000 --lines 100000000 --runs 3

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use checker::{reference_streams, verify_dir, VerifyOptions};

struct Args {
    props: Vec<u64>,
    lines: u64,
    runs: usize,
    dir: PathBuf,
    threads: usize,
    keep: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        props: vec![1000, 1_000_000],
        lines: 100_000_000,
        runs: 3,
        dir: PathBuf::from("/work/bench-data"),
        threads: 0,
        keep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().expect("flag needs a value");
        match k.as_str() {
            "--props" => a.props = v().split(',').map(|p| p.parse().expect("props")).collect(),
            "--lines" => a.lines = v().parse().expect("lines"),
            "--runs" => a.runs = v().parse().expect("runs"),
            "--dir" => a.dir = PathBuf::from(v()),
            "--threads" => a.threads = v().parse().expect("threads"),
            "--keep" => a.keep = true,
            _ => {} // e.g. --bench from cargo
        }
    }
    a
}

fn proc_status(key: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .map(|l| l[key.len()..].trim().to_string())
        })
        .unwrap_or_else(|| "n/a".into())
}

/// Reset the peak-RSS watermark (Linux: writing 5 to clear_refs resets VmHWM).
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// One stream log: line i is property i % props, seq base + i / props.
fn write_log(path: &Path, n: u64, props: u64, base: u64) {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).expect("create log"));
    let mut line = Vec::with_capacity(1 << 16);
    for i in 0..n {
        push_u64(&mut line, i % props);
        line.push(b',');
        push_u64(&mut line, base + i / props);
        line.push(b'\n');
        if line.len() > (1 << 16) - 64 {
            w.write_all(&line).expect("write");
            line.clear();
        }
    }
    w.write_all(&line).expect("write");
    w.flush().expect("flush");
}

fn generate(dir: &Path, total: u64, props: u64) -> u64 {
    std::fs::create_dir_all(dir).expect("mkdir");
    let streams = reference_streams("");
    let per = total / streams.len() as u64;
    let base = 1u64;
    let mut meta = String::from("# crossbench produced.meta v1\n");
    meta.push_str(&format!(
        "# ackErr=0 base={base} system=bench properties={props} rate=0 drain=caught-up delivery=exactly-once\n"
    ));
    for s in &streams {
        meta.push_str(&format!(
            "# stream name={} flow={} ackErr=0\n",
            s.name, s.flow
        ));
    }
    for flow in ["A", "B"] {
        for p in 0..props.min(per) {
            let count = per / props + u64::from(p < per % props);
            meta.push_str(&format!("{flow} {p} {}\n", base + count - 1));
        }
    }
    std::fs::write(dir.join("produced.meta"), meta).expect("meta");
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(s) = streams.get(i) else { break };
                write_log(&dir.join(format!("{}.log", s.name)), per, props, base);
            });
        }
    });
    per * streams.len() as u64
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn main() {
    let a = parse_args();
    println!(
        "checker bench: lines={} props={:?} runs={} threads={} state bytes per (stream, property)={}",
        a.lines,
        a.props,
        a.runs,
        if a.threads == 0 { "auto".to_string() } else { a.threads.to_string() },
        std::mem::size_of::<checker::PropState>()
    );
    for &props in &a.props {
        let dir = a.dir.join(format!("checker-{props}"));
        let t = Instant::now();
        let total = generate(&dir, a.lines, props);
        println!(
            "props={props}: generated {total} lines ({:.1} MB) in {:.1} s",
            dir_bytes(&dir) as f64 / 1e6,
            t.elapsed().as_secs_f64()
        );
        let opts = VerifyOptions {
            threads: a.threads,
            ..Default::default()
        };
        let mut rates = Vec::new();
        let mut walls = Vec::new();
        reset_hwm();
        let rss_before = proc_status("VmRSS:");
        for run in 0..a.runs.max(1) {
            let t = Instant::now();
            let v = verify_dir(&dir, &opts).expect("verify");
            let wall = t.elapsed().as_secs_f64();
            assert!(v.pass, "{:?}", v.reasons);
            assert_eq!(v.totals.delivered, total);
            let rate = total as f64 / wall;
            println!(
                "props={props} run={run}: wall {wall:.3} s, {:.1} M lines/s, VmHWM {}",
                rate / 1e6,
                proc_status("VmHWM:")
            );
            rates.push(rate);
            walls.push(wall);
        }
        rates.sort_by(f64::total_cmp);
        walls.sort_by(f64::total_cmp);
        println!(
            "RESULT props={props} lines={total} median wall {:.3} s, median {:.1} M lines/s (min {:.1}, max {:.1}), peak RSS (VmHWM during verify) {} (VmRSS before {rss_before})",
            walls[walls.len() / 2],
            rates[rates.len() / 2] / 1e6,
            rates[0] / 1e6,
            rates[rates.len() - 1] / 1e6,
            proc_status("VmHWM:")
        );
        if !a.keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
