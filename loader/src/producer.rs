//! The open-loop producer of one flow: a pacer thread that follows the schedule and
//! hands events to ordered publisher shards without ever waiting for them.
//!
//! Each property is pinned to one shard, so its events are published in seq order.
//! A shard whose queue is full sheds the event (counted, no seq consumed: shedding
//! never creates gaps). Hot properties get shards of their own, so a hot key's
//! backlog never delays the cold keys (the reference pinned the hot key together
//! with a fixed slice of cold keys). The pacer stamps every event with its
//! *scheduled* instant, so every latency is corrected for coordinated omission.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use adapters::Broker;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::counters::{bump, FlowCounters, SeqTable};
use crate::metrics::{Metrics, Window};
use crate::paced::Paced;
use crate::retry::publish_until;
use crate::schedule::Schedule;
use crate::selector::Selector;
use crate::stamp::{key_of, Stamp};

/// Catch-up cap: a pacer more than this many events behind skips the excess
/// (counted as offered and as pacer shed: the cell is VOID).
pub const CATCH_UP_CAP: u64 = 8192;
/// Minimum time between two pacer wake-ups.
pub const MIN_TICK: Duration = Duration::from_micros(250);

#[derive(Debug, Clone, Copy)]
struct Job {
    prop: u64,
    seq: i64,
    ts: i64,
}

/// Static description of one flow's producer.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    pub flow: u8,
    pub topic: String,
    pub rate: f64,
    pub ramp: f64,
    pub props: u64,
    pub hot_props: u64,
    pub hot_factor: u64,
    pub shards: u64,
    pub shard_queue: usize,
    /// Flow-B padding (the `rates` array), shared.
    pub padding: Option<Arc<Vec<u8>>>,
    /// First seq of paced traffic (1 after hydration's seq 0, else 1 too: base).
    pub first_seq: i64,
}

/// Shard of a property: hot properties (< H) get their own shard pool.
fn shard_of(prop: u64, hot: u64, hot_shards: u64, cold_shards: u64) -> usize {
    if prop < hot {
        (prop % hot_shards) as usize
    } else {
        (hot_shards + (prop - hot) % cold_shards) as usize
    }
}

/// Shared state the producer reports into.
#[derive(Debug, Clone)]
pub struct ProducerEnv {
    pub broker: Arc<dyn Broker>,
    pub counters: Arc<FlowCounters>,
    pub seqs: Arc<SeqTable>,
    pub metrics: Arc<Metrics>,
    pub window: Arc<Window>,
    /// Fires when publishers must give up retrying (the remaining jobs fail).
    pub abandon: CancellationToken,
}

fn encode(flow: u8, job: &Job, padding: Option<&[u8]>) -> Bytes {
    Bytes::from(
        Stamp {
            prop: job.prop,
            flow,
            seq: job.seq,
            ts: job.ts,
        }
        .encode(padding),
    )
}

/// Publish seq 0 of every property (hydration), `concurrency` at a time, all
/// stamped with one instant. The first error aborts.
pub async fn hydrate(
    spec: &FlowSpec,
    env: &ProducerEnv,
    concurrency: usize,
) -> Result<(), adapters::BrokerError> {
    let ts = crate::stage::now_us();
    let sem = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut set = JoinSet::new();
    for prop in 0..spec.props {
        let permit = sem.clone().acquire_owned().await.expect("open semaphore");
        let env = env.clone();
        let topic = spec.topic.clone();
        let payload = encode(
            spec.flow,
            &Job { prop, seq: 0, ts },
            spec.padding.as_deref().map(|v| v.as_slice()),
        );
        set.spawn(async move {
            let r = env.broker.publish(&topic, &key_of(prop), &[payload]).await;
            if r.is_ok() {
                env.seqs.ack(prop, 0);
                bump(&env.counters.hydration_published, 1);
            }
            drop(permit);
            r
        });
        while let Some(r) = set.try_join_next() {
            r.map_err(|e| adapters::BrokerError::Other(e.to_string()))??;
        }
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| adapters::BrokerError::Other(e.to_string()))??;
    }
    Ok(())
}

/// A running producer of one flow.
pub type Producer = Paced;

/// Start a flow's pacer thread and shard workers. Paced traffic starts at `start`
/// (wall clock `start_us`) and stops at `start + run_for`.
pub fn start(
    spec: FlowSpec,
    env: ProducerEnv,
    start: Instant,
    start_us: i64,
    run_for: Duration,
    runtime: &tokio::runtime::Handle,
) -> Producer {
    let (hot, hot_shards) =
        if spec.hot_props >= 1 && spec.hot_factor >= 2 && spec.hot_props < spec.props {
            (spec.hot_props, spec.hot_props.min(64))
        } else {
            (0, 0)
        };
    let cold_shards = spec.shards.clamp(1, (spec.props - hot).max(1));
    let total_shards = (hot_shards + cold_shards) as usize;
    let mut senders = Vec::with_capacity(total_shards);
    let mut workers = JoinSet::new();
    for _ in 0..total_shards {
        let (tx, mut rx) = mpsc::channel::<Job>(spec.shard_queue.max(1));
        senders.push(tx);
        let env = env.clone();
        let topic = spec.topic.clone();
        let flow = spec.flow;
        let padding = spec.padding.clone();
        workers.spawn_on(
            async move {
                let mut abandoned = false;
                while let Some(job) = rx.recv().await {
                    // Past the drain's deadline nothing queued is sent any more: a
                    // slow system must not stretch the drain by its whole backlog.
                    abandoned |= env.abandon.is_cancelled();
                    if abandoned {
                        bump(&env.counters.failed, 1);
                        continue;
                    }
                    let payload = encode(flow, &job, padding.as_deref().map(|v| v.as_slice()));
                    let sent = publish_until(
                        env.broker.as_ref(),
                        &topic,
                        &key_of(job.prop),
                        &[payload],
                        &env.abandon,
                        &env.counters.publish_retries,
                        |_| {},
                    )
                    .await;
                    match sent {
                        Ok(rtt) => {
                            env.metrics.publish.record(rtt.as_micros() as i64);
                            env.seqs.ack(job.prop, job.seq);
                            bump(&env.counters.published, 1);
                            if env.window.is_rated(job.ts) {
                                bump(&env.counters.published_rated, 1);
                            }
                        }
                        Err(_) => {
                            // Given up at stop: this and every later job of this shard fail,
                            // so a property's failed seqs are always its tail.
                            abandoned = true;
                            bump(&env.counters.failed, 1);
                        }
                    }
                }
            },
            runtime,
        );
    }
    let name = format!("pacer-{}", spec.flow as char);
    Paced::start(name, workers, move |stop| {
        pace(
            spec,
            env,
            senders,
            start,
            start_us,
            run_for,
            hot,
            hot_shards,
            cold_shards,
            stop,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn pace(
    spec: FlowSpec,
    env: ProducerEnv,
    senders: Vec<mpsc::Sender<Job>>,
    start: Instant,
    start_us: i64,
    run_for: Duration,
    hot: u64,
    hot_shards: u64,
    cold_shards: u64,
    stop: &AtomicBool,
) {
    crate::priority::raise_current_thread();
    let sched = Schedule {
        rate: spec.rate,
        ramp: spec.ramp,
    };
    let total = sched.total_before(run_for.as_secs_f64());
    let mut selector = Selector::new(spec.props, spec.hot_props, spec.hot_factor);
    let mut next_seq: Vec<i64> = vec![spec.first_seq; spec.props as usize];
    let mut k: u64 = 0;
    let counters = &env.counters;
    let lag = &env.metrics.schedule_lag;
    let mut lag_batch: Vec<i64> = Vec::with_capacity(256);
    while k < total && !stop.load(Ordering::Relaxed) {
        let now = start.elapsed().as_secs_f64();
        let owed = sched.owed(now).min(total);
        if owed > k + CATCH_UP_CAP {
            let skip = owed - k - CATCH_UP_CAP;
            // Skipped events are offered and shed: the loader could not keep up.
            for _ in 0..skip {
                selector.next_prop();
            }
            bump(&counters.offered, skip);
            bump(&counters.shed_pacer, skip);
            k += skip;
        }
        let now_us = crate::stage::now_us();
        while k < owed {
            let due = sched.due(k);
            let ts = start_us + (due * 1e6) as i64;
            let prop = selector.next_prop();
            let shard = shard_of(prop, hot, hot_shards, cold_shards);
            let seq = next_seq[prop as usize];
            bump(&counters.offered, 1);
            if env.window.is_rated(ts) {
                bump(&counters.offered_rated, 1);
            }
            match senders[shard].try_send(Job { prop, seq, ts }) {
                Ok(()) => {
                    next_seq[prop as usize] = seq + 1;
                }
                Err(_) => bump(&counters.shed_backpressure, 1),
            }
            lag_batch.push(now_us - ts);
            k += 1;
        }
        lag.record_many(&lag_batch);
        lag_batch.clear();
        if k >= total {
            break;
        }
        // Sleep until the next event is due, but never wake more often than MIN_TICK.
        let next_due = Duration::from_secs_f64(sched.due(k));
        let elapsed = start.elapsed();
        let wake = next_due.max(elapsed + MIN_TICK);
        if wake > elapsed {
            thread::sleep(wake - elapsed);
        }
    }
    // Stopped early or done: closing the queues lets the shards drain and finish.
    drop(senders);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_props_never_share_a_shard_with_cold_ones() {
        let (hot, hs, cs) = (2, 2, 64);
        for p in 0..1000u64 {
            let s = shard_of(p, hot, hs, cs);
            if p < hot {
                assert!(s < hs as usize);
            } else {
                assert!(s >= hs as usize && s < (hs + cs) as usize);
            }
        }
    }
}
