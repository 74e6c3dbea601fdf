//! Sampling cost: CPU used by this process (which does nothing but sample)
//! per second of run, with 1, 10 and 100 pid targets (`sleep` children),
//! plus the always-present host and loader targets.
//!
//! `CARGO_TARGET_DIR=/work/target-sampler cargo bench -p crossbench-sampler --bench overhead`
//! Env: `OVERHEAD_SECS` (default 10) per run, `OVERHEAD_RUNS` (default 3).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sampler::{SamplerConfig, TargetSpec};

/// CPU time of every thread of this process, in ns (schedstat has ns
/// resolution, unlike the 10 ms ticks of /proc/self/stat).
fn process_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// Process total from /proc/self/stat (10 ms ticks, includes start/stop and
/// exited threads) as a coarse cross-check.
fn process_cpu_ticks() -> u64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = &s[s.rfind(')').map_or(0, |i| i + 1)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn one_run(n: usize, secs: u64) -> (f64, f64, f64) {
    let mut kids: Vec<Child> = (0..n)
        .map(|_| {
            Command::new("sleep")
                .arg("3600")
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn sleep")
        })
        .collect();
    let targets = kids
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("p{i}"), TargetSpec::Pid(c.id())))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("samples.csv");
    let (t0, c0, k0) = (Instant::now(), process_cpu_ns(), process_cpu_ticks());
    let h = sampler::start(SamplerConfig::new(targets), &out).unwrap();
    std::thread::sleep(Duration::from_secs(secs));
    // Read before stopping: an exited thread's schedstat is gone.
    let cpu_ns = process_cpu_ns().saturating_sub(c0) as f64;
    let wall = t0.elapsed().as_secs_f64();
    let set = h.stop().unwrap();
    let ticks = process_cpu_ticks().saturating_sub(k0) as f64;
    for k in &mut kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    let rows_per_tick = set.rows.len() as f64 / (secs as f64 + 1.0);
    // ms of CPU per second of run == milli-cores.
    (cpu_ns / 1e6 / wall, ticks * 10.0 / wall, rows_per_tick)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing useful.
    let secs: u64 = std::env::var("OVERHEAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let runs: usize = std::env::var("OVERHEAD_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    println!("sampler overhead: {runs} runs x {secs} s per target count, 1 s interval");
    println!("| pid targets | rows/tick | sampler CPU, ms per s (median, schedstat) | (ticks cross-check) | all runs |");
    println!("|---|---|---|---|---|");
    for n in [1usize, 10, 100] {
        let r: Vec<(f64, f64, f64)> = (0..runs).map(|_| one_run(n, secs)).collect();
        let ms = median(r.iter().map(|x| x.0).collect());
        let tk = median(r.iter().map(|x| x.1).collect());
        let rows = median(r.iter().map(|x| x.2).collect());
        let all: Vec<String> = r.iter().map(|x| format!("{:.2}", x.0)).collect();
        println!(
            "| {n} | {rows:.0} | {ms:.2} | {tk:.1} | {} |",
            all.join(", ")
        );
    }
}
