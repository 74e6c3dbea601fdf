//! The bare side of the tax: the system's bare loop (`adapters::bare`, the client
//! library alone) at the cell's rate, in a runtime built like the cell's.
//!
//! `push.workers` publisher tasks each own the partitions `p ≡ w (mod workers)` and
//! take turns over them; the n-th publish of all of them together is due at
//! `start + n / (rate / push.batch)`, spread over the workers as the cell's pacer
//! spreads its requests, and a task sleeps until its next one is due (a tokio timer,
//! no pacer thread). A publish is `push.batch` messages of one key (`p<partition>`),
//! each `{"p":…,"s":…,"x":"…"}` of the cell's payload size, retried after 50 ms if it
//! fails. The bare loop's own consumers run from the start. After the warm-up the
//! process's CPU and the messages received are noted, again at the window's end;
//! then the publishers stop and the consumers drain until they have received what
//! was published (or the scenario's `drain.max` has passed).

use std::sync::Arc;
use std::time::Duration;

use adapters::{BareClient, BareCounters};
use anyhow::Context;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::figures::{Side, SideRun};
use super::shape::Shape;
use crate::pacing::pacer::Timing;
use crate::record::host::process_cpu_seconds;

/// Run the bare side once (its own runtime, shut down before returning, so nothing
/// of it runs beside the next cell).
pub fn run(shape: &Shape, index: usize) -> anyhow::Result<SideRun> {
    let rt = crate::workload::runner::runtime::runtime(shape.scenario().threads, Timing::Real)?;
    let r = rt.block_on(drive(shape, index));
    rt.shutdown_timeout(Duration::from_secs(2));
    r
}

/// What the publishers share.
#[derive(Debug, Clone)]
struct Publishing {
    client: Arc<dyn BareClient>,
    counters: Arc<BareCounters>,
    stop: CancellationToken,
    start: Instant,
    /// Seconds between two publishes of all the workers together.
    every: f64,
    workers: u64,
    partitions: u64,
    batch: u64,
    bytes: usize,
}

async fn drive(shape: &Shape, index: usize) -> anyhow::Result<SideRun> {
    let s = shape.scenario();
    let client: Arc<dyn BareClient> = Arc::from(
        s.options
            .bare(&shape.plan)
            .await
            .context("starting the bare loop")?,
    );
    let counters = Arc::new(BareCounters::default());
    let stop_consumers = CancellationToken::new();
    let consumers = {
        let (c, k, stop) = (client.clone(), counters.clone(), stop_consumers.clone());
        tokio::spawn(async move { c.consume(&k, stop).await })
    };
    let p = Publishing {
        client: client.clone(),
        counters: counters.clone(),
        stop: CancellationToken::new(),
        start: Instant::now() + Duration::from_millis(100),
        every: shape.push_batch as f64 / s.rate as f64,
        workers: shape.push_workers.max(1),
        partitions: shape.partitions,
        batch: shape.push_batch,
        bytes: shape.payload_bytes,
    };
    let mut publishers = JoinSet::new();
    for w in 0..p.workers {
        publishers.spawn(publisher(p.clone(), w));
    }

    tokio::time::sleep_until(p.start + shape.warmup).await;
    let (cpu0, got0, t0) = (
        process_cpu_seconds(),
        counters.consumed.get(),
        Instant::now(),
    );
    tokio::time::sleep_until(p.start + shape.warmup + shape.window).await;
    let (cpu, got, wall) = (
        process_cpu_seconds() - cpu0,
        counters.consumed.get() - got0,
        t0.elapsed().as_secs_f64().max(1e-9),
    );

    p.stop.cancel();
    while publishers.join_next().await.is_some() {}
    let published = counters.published.get();
    let deadline = Instant::now() + s.drain.max.0;
    // Received and acknowledged: a loop whose ack is still in flight is waited for.
    while (counters.consumed.get() < published || counters.acked.get() < published)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_consumers.cancel();
    let _ = consumers.await;
    client.close().await;

    let consumed = counters.consumed.get();
    let acked = counters.acked.get();
    // Received and acknowledged: nothing left behind on the system.
    let complete = published > 0 && consumed >= published && acked >= published;
    let held =
        got as f64 >= cell_record::held::SERVED_MIN * s.rate as f64 * shape.window.as_secs_f64();
    let comparable = super::figures::within_rereads(published, consumed);
    Ok(SideRun {
        side: Side::Bare,
        run: index,
        cpu_seconds: cpu,
        window_sec: wall,
        deliveries_in_window: got,
        cpu_us_per_delivery: cpu * 1e6 / got.max(1) as f64,
        cpu_cores: cpu / wall,
        published,
        consumed,
        acked,
        errors: counters.errors.get(),
        complete,
        held,
        comparable,
        outcome: if !complete {
            "incomplete"
        } else if !comparable {
            "re-read"
        } else {
            "complete"
        }
        .into(),
    })
}

/// Publisher `w`: its partitions in turn, each publish at its due instant.
async fn publisher(p: Publishing, w: u64) {
    let mine: Vec<u64> = (w..p.partitions).step_by(p.workers as usize).collect();
    if mine.is_empty() {
        return;
    }
    let keys: Vec<String> = mine.iter().map(|q| format!("p{q}")).collect();
    let mut seqs = vec![0u64; mine.len()];
    let mut payloads = Vec::with_capacity(p.batch as usize);
    let mut n: u64 = 0;
    loop {
        // The (n · workers + w)-th publish of all the workers together.
        let due = p.start + Duration::from_secs_f64((n * p.workers + w) as f64 * p.every);
        tokio::select! {
            _ = p.stop.cancelled() => return,
            _ = tokio::time::sleep_until(due) => {}
        }
        let i = (n % mine.len() as u64) as usize;
        payloads.clear();
        for _ in 0..p.batch {
            seqs[i] += 1;
            payloads.push(adapters::bare::body(mine[i], seqs[i], p.bytes));
        }
        loop {
            match p.client.publish(&keys[i], &payloads).await {
                Ok(()) => {
                    p.counters.published.add(p.batch);
                    break;
                }
                Err(_) => {
                    p.counters.errors.inc();
                    tokio::select! {
                        _ = p.stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    }
                }
            }
        }
        n += 1;
    }
}
