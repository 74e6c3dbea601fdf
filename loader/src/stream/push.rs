//! The stream producer: one pacer thread follows the open-loop schedule of push
//! requests and hands each to the push worker that owns its partitions, never
//! waiting. A worker whose queue is full sheds the request whole (counted in
//! messages, no seq consumed, so shedding never creates gaps). Every message is
//! stamped with its request's *scheduled* instant, so push and end-to-end latencies
//! are corrected for coordinated omission. `offered = published + shed + failed`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use adapters::Broker;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::counters::{bump, FlowCounters};
use crate::histograms::Metric;
use crate::metrics::Window;
use crate::paced::Paced;
use crate::producer::{CATCH_UP_CAP, MIN_TICK};
use crate::retry::publish_until;
use crate::schedule::Schedule;
use crate::stamp::key_of;
use crate::stream::ledger::Ledger;
use crate::stream::payload::Body;
use crate::stream::window::Picker;

/// Error classes of `BrokerError::class`, in this order.
pub const ERROR_CLASSES: [&str; 6] = [
    "config",
    "connection",
    "refused",
    "timeout",
    "unknown_topic",
    "other",
];

/// Push-side counters beyond the flow identity.
#[derive(Debug, Default)]
pub struct PushCounters {
    /// Requests the schedule owed.
    pub requests_offered: AtomicU64,
    /// Requests fully acknowledged.
    pub requests_ok: AtomicU64,
    /// Failed publish attempts by error class (each was retried).
    pub errors: [AtomicU64; 6],
}

impl PushCounters {
    pub fn error_total(&self) -> u64 {
        self.errors.iter().map(|e| e.load(Ordering::Relaxed)).sum()
    }
    fn count_error(&self, e: &adapters::BrokerError) {
        let i = ERROR_CLASSES
            .iter()
            .position(|c| *c == e.class())
            .unwrap_or(ERROR_CLASSES.len() - 1);
        bump(&self.errors[i], 1);
    }
}

/// Latencies of the push side.
#[derive(Debug)]
pub struct PushMetrics {
    /// Request completion − scheduled instant (rated window).
    pub push: Metric,
    /// One `publish` call's round trip.
    pub publish_rtt: Metric,
    /// Pacer hand-over − scheduled instant.
    pub schedule_lag: Metric,
}

impl Default for PushMetrics {
    fn default() -> Self {
        PushMetrics {
            push: Metric::new("push"),
            publish_rtt: Metric::new("publish-rtt"),
            schedule_lag: Metric::new("schedule-lag"),
        }
    }
}

/// What the producer shares with the run.
#[derive(Debug, Clone)]
pub struct PushEnv {
    pub broker: Arc<dyn Broker>,
    pub topic: String,
    pub flow: Arc<FlowCounters>,
    pub counters: Arc<PushCounters>,
    pub metrics: Arc<PushMetrics>,
    pub ledger: Arc<Ledger>,
    pub window: Arc<Window>,
    pub body: Body,
    /// Fires when workers must stop retrying (what they hold fails).
    pub abandon: CancellationToken,
}

/// The static shape of the producer.
#[derive(Debug, Clone)]
pub struct PushPlan {
    /// Messages per second.
    pub rate: f64,
    pub ramp: f64,
    pub batch: u64,
    pub picker: Picker,
    pub workers: u64,
    /// Queue slots per worker.
    pub queue: usize,
    pub space: u64,
}

#[derive(Debug)]
struct Request {
    /// (partition, first seq), all of one worker.
    parts: Vec<(u64, u32)>,
    per_partition: u32,
    ts: i64,
}

/// The running producer of a stream cell.
pub type Pusher = Paced;

/// Start the pacer thread and the push workers.
pub fn start(
    plan: PushPlan,
    env: PushEnv,
    start: Instant,
    start_us: i64,
    run_for: Duration,
    rt: &tokio::runtime::Handle,
) -> Pusher {
    let mut senders = Vec::with_capacity(plan.workers as usize);
    let mut workers = JoinSet::new();
    for _ in 0..plan.workers {
        let (tx, rx) = mpsc::channel::<Request>(plan.queue.max(1));
        senders.push(tx);
        workers.spawn_on(worker(env.clone(), rx), rt);
    }
    Paced::start("pacer-stream".into(), workers, move |stop| {
        pace(plan, env, senders, start, start_us, run_for, stop)
    })
}

async fn worker(env: PushEnv, mut rx: mpsc::Receiver<Request>) {
    let mut abandoned = false;
    let mut payloads: Vec<Bytes> = Vec::new();
    while let Some(req) = rx.recv().await {
        let n = req.per_partition as u64;
        let rated = env.window.is_rated(req.ts);
        let mut ok_all = true;
        for &(p, first) in &req.parts {
            // Past the drain's deadline nothing queued is sent any more.
            abandoned |= env.abandon.is_cancelled();
            if abandoned {
                bump(&env.flow.failed, n);
                ok_all = false;
                continue;
            }
            payloads.clear();
            payloads.extend((0..req.per_partition).map(|i| env.body.encode(p, first + i, req.ts)));
            let sent = publish_until(
                env.broker.as_ref(),
                &env.topic,
                &key_of(p),
                &payloads,
                &env.abandon,
                &env.flow.publish_retries,
                |e| env.counters.count_error(e),
            )
            .await;
            if let Ok(rtt) = sent {
                env.metrics.publish_rtt.record(rtt.as_micros() as i64);
                env.ledger.acked.raise(p, first + req.per_partition - 1);
                env.ledger.created.mark(p);
                bump(&env.flow.published, n);
                if rated {
                    bump(&env.flow.published_rated, n);
                }
            } else {
                // Given up at stop: this and every later request of this worker fail,
                // so a partition's failed seqs are always its tail.
                abandoned = true;
                ok_all = false;
                bump(&env.flow.failed, n);
            }
        }
        if ok_all {
            bump(&env.counters.requests_ok, 1);
            if rated {
                env.metrics.push.record(crate::stage::now_us() - req.ts);
            }
        }
    }
}

fn pace(
    mut plan: PushPlan,
    env: PushEnv,
    senders: Vec<mpsc::Sender<Request>>,
    start: Instant,
    start_us: i64,
    run_for: Duration,
    stop: &AtomicBool,
) {
    crate::priority::raise_current_thread();
    let sched = Schedule {
        rate: plan.rate / plan.batch as f64,
        ramp: plan.ramp,
    };
    let spread = plan.picker_spread();
    let per = (plan.batch / spread) as u32;
    let total = sched.total_before(run_for.as_secs_f64());
    // The next seq of every partition: 4 bytes each, owned by this thread.
    let mut next_seq: Vec<u32> = vec![1; plan.space as usize];
    let mut k: u64 = 0;
    let flow = &env.flow;
    let mut lag_batch: Vec<i64> = Vec::with_capacity(256);
    let mut parts: Vec<u64> = Vec::with_capacity(spread as usize);
    while k < total && !stop.load(Ordering::Relaxed) {
        let now = start.elapsed().as_secs_f64();
        let owed = sched.owed(now).min(total);
        if owed > k + CATCH_UP_CAP {
            // The loader fell behind its own schedule: skipped requests are offered
            // and shed (the cell is VOID).
            let skip = owed - k - CATCH_UP_CAP;
            for _ in 0..skip {
                parts.clear();
                plan.picker.pick((sched.due(k) * 1e6) as u64, &mut parts);
            }
            bump(&flow.offered, skip * plan.batch);
            bump(&flow.shed_pacer, skip * plan.batch);
            bump(&env.counters.requests_offered, skip);
            k += skip;
        }
        let now_us = crate::stage::now_us();
        while k < owed {
            let due = sched.due(k);
            let ts = start_us + (due * 1e6) as i64;
            parts.clear();
            let w = plan.picker.pick((due * 1e6) as u64, &mut parts);
            bump(&flow.offered, plan.batch);
            bump(&env.counters.requests_offered, 1);
            if env.window.is_rated(ts) {
                bump(&flow.offered_rated, plan.batch);
            }
            let req = Request {
                parts: parts.iter().map(|&p| (p, next_seq[p as usize])).collect(),
                per_partition: per,
                ts,
            };
            match senders[w].try_send(req) {
                Ok(()) => {
                    for &p in &parts {
                        next_seq[p as usize] += per;
                    }
                }
                Err(_) => bump(&flow.shed_backpressure, plan.batch),
            }
            lag_batch.push(now_us - ts);
            k += 1;
        }
        env.metrics.schedule_lag.record_many(&lag_batch);
        lag_batch.clear();
        if k >= total {
            break;
        }
        let next_due = Duration::from_secs_f64(sched.due(k));
        let elapsed = start.elapsed();
        let wake = next_due.max(elapsed + MIN_TICK);
        if wake > elapsed {
            thread::sleep(wake - elapsed);
        }
    }
    drop(senders);
}

impl PushPlan {
    fn picker_spread(&self) -> u64 {
        self.picker.spread()
    }
}
