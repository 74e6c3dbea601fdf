//! Raw throughput: the adapter against Redis's own tools on the same server.
//! Produce: `redis-benchmark` (redis-tools) running `XADD` with 4 clients, pipelines of
//! 10, 256-byte values, against the adapter publishing 10 payloads per call from 4
//! tasks. Consume: a bare `XREADGROUP COUNT 100` / `XACK` loop per lane stream (20
//! lanes) against the adapter's consume of the same backlog. Medians of three.
//! Ignored by default (a measurement, not a check):
//!   cargo test --release -p crossbench-adapters --features redis --test redis_raw_ratio \
//!     -- --ignored --nocapture
#![cfg(feature = "redis")]

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::redis::{RedisBroker, RedisOptions};
use adapters::{
    BatchHandler, Broker, ConsumeOptions, Disposition, KeyBatch, StreamCounters, TopicSpec,
    Topology,
};
use async_trait::async_trait;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

const KEYS: u64 = 20;
const N: u64 = 50_000;
const TASKS: u64 = 4;
const PER_CALL: u64 = 10;

fn topo() -> Topology {
    Topology {
        topics: vec![TopicSpec {
            name: "rawr".into(),
            groups: vec!["g".into()],
        }],
        keys: KEYS,
        lanes: KEYS,
        durability: adapters::Durability::Default,
        dedup_window_sec: 0,
        reset: true,
        sharing: adapters::Sharing::ALONE,
    }
}

fn body(i: u64) -> Bytes {
    Bytes::from(format!("{i:0>256}"))
}

async fn adapter_publish(b: &Arc<RedisBroker>) -> f64 {
    let t = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|w| {
            let b = b.clone();
            tokio::spawn(async move {
                let mut i = w * PER_CALL;
                while i < N {
                    let key = format!("p{}", (i / PER_CALL) % KEYS);
                    let ps: Vec<Bytes> = (i..i + PER_CALL).map(body).collect();
                    b.publish("rawr", &key, &ps).await.unwrap();
                    i += TASKS * PER_CALL;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    N as f64 / t.elapsed().as_secs_f64()
}

/// redis-benchmark's XADD rate (requests/s), same count, clients and pipeline depth.
fn benchmark_xadd() -> f64 {
    let _ = Command::new("redis-cli").args(["del", "rawbench"]).output();
    let o = Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-n",
            &N.to_string(),
            "-c",
            &TASKS.to_string(),
            "-P",
            &PER_CALL.to_string(),
            "-q",
            "XADD",
            "rawbench",
            "*",
            "p",
            &"0".repeat(256),
        ])
        .output()
        .expect("redis-benchmark (apt install redis-tools)");
    let text = String::from_utf8_lossy(&o.stdout);
    let _ = Command::new("redis-cli").args(["del", "rawbench"]).output();
    // "XADD rawbench * p 000…: 123456.79 requests per second, p50=…"
    text.rsplit(": ")
        .find_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no rate in {text:?}"))
}

struct Count(AtomicU64);

#[async_trait]
impl BatchHandler for Count {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        self.0
            .fetch_add(batch.messages.len() as u64, Ordering::Relaxed);
        Disposition::Ack
    }
}

async fn adapter_consume(b: &Arc<RedisBroker>) -> f64 {
    let count = Arc::new(Count(AtomicU64::new(0)));
    let stop = CancellationToken::new();
    let t = Instant::now();
    let run = {
        let (b, count, stop) = (b.clone(), count.clone(), stop.clone());
        tokio::spawn(async move {
            b.consume(
                "rawr",
                "g",
                ConsumeOptions {
                    batch: 100,
                    lanes: 64,
                    counters: Arc::new(StreamCounters::default()),
                },
                count,
                stop,
            )
            .await
        })
    };
    while count.0.load(Ordering::Relaxed) < N {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = N as f64 / t.elapsed().as_secs_f64();
    stop.cancel();
    run.await.unwrap().unwrap();
    rate
}

/// A bare XREADGROUP / XACK loop over the same lane streams, 2 readers (the adapter's
/// default), reading all its lanes with one command, acking each batch.
async fn bare_consume(group: &str) -> f64 {
    let client = redis::Client::open("redis://127.0.0.1:6379/").unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    for l in 0..KEYS {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(format!("cb:rawr:l{l}"))
            .arg(group)
            .arg("0")
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    let count = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let tasks: Vec<_> = (0..2u64)
        .map(|r| {
            let (client, count, group) = (client.clone(), count.clone(), group.to_string());
            tokio::spawn(async move {
                let mut c = client.get_multiplexed_async_connection().await.unwrap();
                let lanes: Vec<String> = (0..KEYS)
                    .filter(|l| l % 2 == r)
                    .map(|l| format!("cb:rawr:l{l}"))
                    .collect();
                while count.load(Ordering::Relaxed) < N {
                    let mut cmd = redis::cmd("XREADGROUP");
                    cmd.arg("GROUP").arg(&group).arg(format!("c{r}"));
                    cmd.arg("COUNT")
                        .arg(100)
                        .arg("BLOCK")
                        .arg(100)
                        .arg("STREAMS");
                    for l in &lanes {
                        cmd.arg(l);
                    }
                    for _ in &lanes {
                        cmd.arg(">");
                    }
                    let reply: Option<redis::streams::StreamReadReply> =
                        cmd.query_async(&mut c).await.unwrap();
                    let Some(reply) = reply else { continue };
                    for k in reply.keys {
                        let ids: Vec<&str> = k.ids.iter().map(|e| e.id.as_str()).collect();
                        let _: u64 = redis::cmd("XACK")
                            .arg(&k.key)
                            .arg(&group)
                            .arg(&ids)
                            .query_async(&mut c)
                            .await
                            .unwrap();
                        count.fetch_add(ids.len() as u64, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    while count.load(Ordering::Relaxed) < N {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = N as f64 / t.elapsed().as_secs_f64();
    for t in tasks {
        t.abort();
    }
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with --release -- --ignored --nocapture"]
async fn redis_raw_ratio() {
    if !support::ready::redis() {
        return;
    }
    let (mut ap, mut ac, mut bp, mut bc) = (vec![], vec![], vec![], vec![]);
    for rep in 0..3 {
        let b = Arc::new(RedisBroker::new(RedisOptions::default()).unwrap());
        b.setup(&topo()).await.unwrap();
        ap.push(adapter_publish(&b).await);
        ac.push(adapter_consume(&b).await);
        bp.push(benchmark_xadd());
        bc.push(bare_consume(&format!("bare{rep}")).await);
        println!(
            "rep {rep}: XADD adapter {:.0}/s redis-benchmark {:.0}/s; consume adapter {:.0}/s bare loop {:.0}/s",
            ap[rep], bp[rep], ac[rep], bc[rep]
        );
    }
    let (ap, ac, bp, bc) = (median(ap), median(ac), median(bp), median(bc));
    println!(
        "Redis raw ratio (medians of 3): XADD {ap:.0} / {bp:.0} = {:.2}; consume {ac:.0} / {bc:.0} = {:.2}",
        ap / bp,
        ac / bc
    );
}
