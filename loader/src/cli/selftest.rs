//! `crossbench selftest`: measurements of crossbench itself, not of a system.
//!
//! `selftest floor` is the floor of control-dense's work without crossbench: what a
//! bare tokio program, built like the cells (this binary: the same allocator, the same
//! tokio, a runtime of the same two workers), costs per message when it does only
//! what every delivery of the cell must do. At `--rate` messages/s (control-dense's
//! 72 000 deliveries/s) for `--secs`, a ticker task releases `rate/1000` messages
//! every millisecond; each message is one spawned task that sleeps its simulated work
//! (uniform 10–30 ms, one tokio timer), then records one HdrHistogram value and
//! appends one `<key>,<seq>` line to a buffered file, both under a mutex. No broker,
//! no pacer thread, no checker, no sampling. It prints the process's CPU time per
//! message, to set beside a cell's `loader.cpu_us_per_delivery`
//! (docs/performance.md).
//!
//! `selftest verify` times the checker as a user meets it: it writes a clean cell of
//! the reference's 12 stream logs (`checker::synth`, `--lines` lines over `--props`
//! properties, in the reference's `produced.meta` format by default), then runs this
//! binary's `crossbench verify <cell>` `--runs` times as a child process, so every
//! figure counts the process's start, the file reads and the verdict, and prints the
//! lines per second of each run with their median, beside `verify_dir` called in
//! this process on the same files (what the checker's own bench measures).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use parking_lot::Mutex;

use crate::cli::exit::Exit;
use crate::cli::BadInput;
use crate::record::host::process_cpu_seconds as cpu_seconds;

#[derive(Debug, Args)]
pub struct SelftestArgs {
    #[command(subcommand)]
    pub what: Selftest,
}

#[derive(Debug, Subcommand)]
pub enum Selftest {
    /// The floor of control-dense's work in a bare tokio program: CPU µs per message.
    Floor {
        /// Messages per second.
        #[arg(long, default_value_t = 72_000)]
        rate: u64,
        /// How long to run, in seconds.
        #[arg(long, default_value_t = 20)]
        secs: u64,
    },
    /// `crossbench verify` of a synthetic clean cell, as a child process: lines/s.
    Verify {
        /// Lines over the 12 logs.
        #[arg(long, default_value_t = 24_000_000)]
        lines: u64,
        /// Properties (keys), interleaved round-robin in every log.
        #[arg(long, default_value_t = 1000)]
        props: u64,
        /// Timed runs of each kind.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Where the cell is written (a fresh directory under it, removed at the end).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// The crossbench v1 `produced.meta` instead of the reference's.
        #[arg(long)]
        crossbench_meta: bool,
    },
}

pub fn selftest(a: SelftestArgs) -> anyhow::Result<Exit> {
    match a.what {
        Selftest::Floor { rate, secs } => floor(rate, secs),
        Selftest::Verify {
            lines,
            props,
            runs,
            dir,
            crossbench_meta,
        } => verify(lines, props, runs, dir, crossbench_meta),
    }
}

fn verify(
    lines: u64,
    props: u64,
    runs: usize,
    dir: Option<std::path::PathBuf>,
    crossbench_meta: bool,
) -> anyhow::Result<Exit> {
    use anyhow::Context;
    if !(12..=2_000_000_000).contains(&lines) {
        return Err(BadInput(format!("--lines {lines}: give 12 to 2 000 000 000")).into());
    }
    if props == 0 || props > 10_000_000 {
        return Err(BadInput(format!("--props {props}: give 1 to 10 000 000")).into());
    }
    if !(1..=100).contains(&runs) {
        return Err(BadInput(format!("--runs {runs}: give 1 to 100")).into());
    }
    let base = dir.unwrap_or_else(std::env::temp_dir);
    let cell = base.join(format!("crossbench-selftest-verify-{}", std::process::id()));
    let meta = if crossbench_meta {
        checker::synth::SynthMeta::CrossbenchV1
    } else {
        checker::synth::SynthMeta::Reference
    };
    let t = Instant::now();
    let written = checker::synth::write_clean_cell(&cell, lines, props, meta)
        .with_context(|| format!("writing the synthetic cell in {}", cell.display()))?;
    let bytes: u64 = std::fs::read_dir(&cell)?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!(
        "cell: {written} lines over 12 logs, {props} properties, {:.0} MB, {} produced.meta, written in {:.1} s ({})",
        bytes as f64 / 1e6,
        if crossbench_meta { "crossbench v1" } else { "reference" },
        t.elapsed().as_secs_f64(),
        cell.display()
    );
    let exe = std::env::current_exe().context("finding this binary")?;
    let result = (|| -> anyhow::Result<()> {
        let mut cli = Vec::new();
        for i in 0..runs {
            let t = Instant::now();
            let out = std::process::Command::new(&exe)
                .arg("verify")
                .arg(&cell)
                .stdout(std::process::Stdio::null())
                .output()
                .context("running crossbench verify")?;
            let secs = t.elapsed().as_secs_f64();
            anyhow::ensure!(
                out.status.success(),
                "crossbench verify of a clean cell exited {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            );
            println!(
                "  cli run {}: {secs:.3} s, {:.1} M lines/s",
                i + 1,
                written as f64 / secs / 1e6
            );
            cli.push(written as f64 / secs);
        }
        let mut lib = Vec::new();
        for i in 0..runs {
            let t = Instant::now();
            let v = checker::verify_dir(&cell, &checker::VerifyOptions::default())?;
            let secs = t.elapsed().as_secs_f64();
            anyhow::ensure!(
                v.pass && v.totals.delivered == written,
                "verify_dir of a clean cell: pass {} with {} of {written} lines",
                v.pass,
                v.totals.delivered
            );
            println!(
                "  in-process run {}: {secs:.3} s, {:.1} M lines/s",
                i + 1,
                written as f64 / secs / 1e6
            );
            lib.push(written as f64 / secs);
        }
        for (what, xs) in [
            ("crossbench verify (process)", &cli),
            ("verify_dir (in process)", &lib),
        ] {
            let mut v = xs.clone();
            v.sort_by(f64::total_cmp);
            println!(
                "{what}: median {:.1} M lines/s [min {:.1}, max {:.1}] over {} runs",
                v[v.len() / 2] / 1e6,
                v[0] / 1e6,
                v[v.len() - 1] / 1e6,
                v.len()
            );
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&cell);
    result?;
    Ok(Exit::Pass)
}

fn floor(rate: u64, secs: u64) -> anyhow::Result<Exit> {
    if rate < 1000 || !rate.is_multiple_of(1000) {
        return Err(BadInput(format!(
            "--rate {rate}: the floor releases rate/1000 messages every millisecond; give a multiple of 1000 (e.g. 72000)"
        ))
        .into());
    }
    if secs == 0 || secs > 3600 {
        return Err(BadInput(format!("--secs {secs}: give 1 to 3600 seconds")).into());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let dir = tempfile_dir()?;
    let log = Arc::new(Mutex::new(std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(dir.join("floor.log"))?,
    )));
    let hist = Arc::new(Mutex::new(crate::measure::histograms::new_hist()));
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let sent = rt.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let (mut seq, mut rng): (u64, u64) = (0, 0x9E37_79B9_7F4A_7C15);
        let end = tokio::time::Instant::now() + Duration::from_secs(secs);
        while tokio::time::Instant::now() < end {
            tick.tick().await;
            for _ in 0..rate / 1000 {
                seq += 1;
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let work = Duration::from_millis(10 + rng % 21);
                let (log, hist) = (log.clone(), hist.clone());
                let started = tokio::time::Instant::now();
                tokio::spawn(async move {
                    tokio::time::sleep(work).await;
                    hist.lock()
                        .saturating_record(started.elapsed().as_micros() as u64);
                    let (mut a, mut b) = (itoa::Buffer::new(), itoa::Buffer::new());
                    let mut l = log.lock();
                    let _ = l.write_all(a.format(seq % 1000).as_bytes());
                    let _ = l.write_all(b",");
                    let _ = l.write_all(b.format(seq).as_bytes());
                    let _ = l.write_all(b"\n");
                });
            }
        }
        // Let the last messages finish.
        tokio::time::sleep(Duration::from_millis(40)).await;
        seq
    });
    let (cpu, wall) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    let p50 = hist.lock().value_at_quantile(0.5) as f64 / 1000.0;
    println!(
        "floor: {sent} messages in {wall:.1} s ({:.0}/s), CPU {cpu:.2} s = {:.2} µs per message; work p50 {p50:.2} ms (drawn median 20 ms)",
        sent as f64 / wall,
        cpu * 1e6 / sent.max(1) as f64,
    );
    Ok(Exit::Pass)
}

/// A fresh directory under the system's temp dir for the floor's log.
fn tempfile_dir() -> std::io::Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("crossbench-floor-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
