//! Raw throughput: the adapter against Redis's own tool and Redis's bare loop on the
//! same server. Publish (`support::raw::Work`): the adapter publishing 50 000 payloads
//! of 256 B over 20 keys, 10 per call from 4 tasks, against `redis-benchmark`
//! (redis-tools) running `XADD` with 4 clients and pipelines of 10: a native tool, not
//! a copy of the bare loop, so it stays. Consume: the adapter's consume of that backlog
//! against Redis's bare loop, `adapters/src/redis/bare.rs` (the `redis` crate alone:
//! `XREADGROUP COUNT 100` / `XACK` over the 20 lane streams the adapter's setup builds,
//! the adapter's readers, the loop `crossbench selftest tax` runs), consuming the same
//! work it published itself; its publish rate is printed beside. Medians of three.
//! Ignored by default (a measurement, not a check):
//!   cargo test --release -p crossbench-adapters --features redis --test redis_raw_ratio \
//!     -- --ignored --nocapture
#![cfg(feature = "redis")]

mod support;

use std::process::Command;
use std::sync::Arc;

use adapters::redis::{RedisBroker, RedisOptions};
use adapters::{BarePlan, Broker, SystemOptions};
use support::raw::{median, Side, Work};

const KEYS: u64 = 20;
const N: u64 = 50_000;
const WORK: Work = Work {
    n: N,
    keys: KEYS,
    tasks: 4,
    per_call: 10,
    bytes: 256,
};

fn rate(d: std::time::Duration) -> f64 {
    N as f64 / d.as_secs_f64()
}

/// redis-benchmark's XADD rate (requests/s), same count, clients and pipeline depth.
fn benchmark_xadd() -> f64 {
    let _ = Command::new("redis-cli").args(["del", "rawbench"]).output();
    let o = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-n", &N.to_string()])
        .args([
            "-c",
            &WORK.tasks.to_string(),
            "-P",
            &WORK.per_call.to_string(),
        ])
        .args(["-q", "XADD", "rawbench", "*", "p", &"0".repeat(WORK.bytes)])
        .output()
        .expect("redis-benchmark (apt install redis-tools)");
    let text = String::from_utf8_lossy(&o.stdout);
    let _ = Command::new("redis-cli").args(["del", "rawbench"]).output();
    // "XADD rawbench * p 000…: 123456.79 requests per second, p50=…"
    text.rsplit(": ")
        .find_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no rate in {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with --release -- --ignored --nocapture"]
async fn redis_raw_ratio() {
    if !support::ready::redis() {
        return;
    }
    let plan = BarePlan {
        topology: support::topology("rawr", &["g"], KEYS, KEYS),
        batch: 100,
        lanes: 64,
    };
    let (mut ap, mut ac, mut xp, mut bp, mut bc) = (vec![], vec![], vec![], vec![], vec![]);
    for rep in 0..3 {
        let b = Arc::new(RedisBroker::new(RedisOptions::default()).unwrap());
        b.setup(&plan.topology).await.unwrap();
        let a = Side::adapter(b, &plan.topology, plan.batch, plan.lanes);
        ap.push(rate(a.publish(WORK).await));
        ac.push(rate(a.consume(N).await));
        a.close().await;
        xp.push(benchmark_xadd());
        let bare = Side::bare(&SystemOptions::Redis(RedisOptions::default()), &plan).await;
        bp.push(rate(bare.publish(WORK).await));
        bc.push(rate(bare.consume(N).await));
        bare.close().await;
        println!(
            "rep {rep}: XADD adapter {:.0}/s redis-benchmark {:.0}/s bare loop {:.0}/s; consume adapter {:.0}/s bare loop {:.0}/s",
            ap[rep], xp[rep], bp[rep], ac[rep], bc[rep]
        );
    }
    let (ap, ac, xp) = (median(ap), median(ac), median(xp));
    let (bp, bc) = (median(bp), median(bc));
    println!(
        "Redis raw ratio (medians of 3): XADD {ap:.0} / {xp:.0} = {:.2} (bare loop {bp:.0}: {:.2}); consume {ac:.0} / {bc:.0} = {:.2}",
        ap / xp,
        ap / bp,
        ac / bc
    );
}
