//! `selftest floor`: the floor of control-dense's work in a bare tokio program (see
//! the parent module).

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cli::exit::Exit;
use crate::cli::BadInput;
use crate::record::host::process_cpu_seconds as cpu_seconds;

pub fn floor(rate: u64, secs: u64) -> anyhow::Result<Exit> {
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
