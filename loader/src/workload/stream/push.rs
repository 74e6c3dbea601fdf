//! The stream producer: one pacer (a thread of its own, or a task on the runtime's
//! timer: `stream.push.pacer`) follows the open-loop schedule of push requests and
//! hands each to the push worker that owns its partitions, never waiting. A worker
//! whose queue is full sheds the request whole (counted in messages, no seq consumed,
//! so shedding never creates gaps). Every message is
//! stamped with its request's *scheduled* instant, so push and end-to-end latencies
//! are corrected for coordinated omission. `offered = published + shed + failed`.

use std::sync::Arc;

use adapters::{Broker, Counter, ErrorClass};
use bytes::Bytes;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cell::workload::Traffic;
use crate::measure::clock::Clock;
use crate::measure::counters::FlowCounters;
use crate::measure::histograms::Metric;
use crate::measure::outcomes::{GiveUp, Outcomes};
use crate::measure::window::RatedWindow;
use crate::pacing::doorbell::{handoff, Doorbell, Receiver};
use crate::pacing::pacer::{Paced, Pacer, PacerSinks, PacerSpec, Slot, Timing};
use crate::pacing::retry::publish_until;
use crate::pacing::schedule::Schedule;
use crate::scenario::stream::PacerDrive;
use crate::workload::stamp::key_of;
use crate::workload::stream::ledger::Ledger;
use crate::workload::stream::payload::Body;
use crate::workload::stream::rotation::Picker;

/// Push-side counters beyond the flow identity.
#[derive(Debug, Default)]
pub struct PushCounters {
    /// Requests the schedule owed.
    pub requests_offered: Counter,
    /// Requests fully acknowledged.
    pub requests_ok: Counter,
    /// Failed publish attempts by error class (each was retried), in the order of
    /// [`ErrorClass::ALL`].
    pub errors: [Counter; ErrorClass::ALL.len()],
}

impl PushCounters {
    pub fn error_total(&self) -> u64 {
        self.errors.iter().map(Counter::get).sum()
    }
    fn count_error(&self, e: &adapters::BrokerError) {
        self.errors[e.class().index()].inc();
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
    pub schedule_lag: Arc<Metric>,
}

impl Default for PushMetrics {
    fn default() -> Self {
        PushMetrics {
            push: Metric::new("push"),
            publish_rtt: Metric::new("publish-rtt"),
            schedule_lag: Arc::new(Metric::new("schedule-lag")),
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
    pub window: Arc<RatedWindow>,
    pub clock: Clock,
    pub body: Body,
    /// Fires when workers must stop retrying (what they hold fails).
    pub abandon: CancellationToken,
    /// How long after its scheduled instant a request may still be published.
    pub deadline: std::time::Duration,
    /// Where given-up messages are recorded for `produced.meta`.
    pub outcomes: Arc<Outcomes>,
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
    /// What wakes the pacer.
    pub drive: PacerDrive,
    /// Every partition's first seq: 1, or 2 after a completed space (whose seq 1
    /// went out before the warm-up).
    pub first_seq: u32,
}

#[derive(Debug)]
struct Request {
    /// (partition, first seq), all of one worker.
    parts: Vec<(u64, u32)>,
    per_partition: u32,
    ts: i64,
}

/// Start the pacer and the push workers for `traffic`.
pub fn start(plan: PushPlan, env: PushEnv, traffic: Traffic, timing: Timing) -> Paced {
    // A pacer thread of its own hands requests over through the doorbell (one
    // wake-up of one worker per ring, none of tokio's searching workers); a pacer
    // that is a task, or virtual time, wakes the workers directly.
    let mut workers = JoinSet::new();
    let bell = match (plan.drive, timing) {
        (PacerDrive::Thread, Timing::Real) => Doorbell::start().ok().map(|(bell, task)| {
            // Ends once the pacer drops its emit closure (and with it the senders).
            workers.spawn(async move {
                let _ = task.await;
            });
            bell
        }),
        _ => None,
    };
    let (senders, receivers) = handoff::<Request>(plan.workers as usize, plan.queue, bell);
    for rx in receivers {
        workers.spawn(worker(env.clone(), rx));
    }
    // The emit closure: the request's partitions (all of one worker), their next
    // seqs, the worker's queue.
    let mut picker = plan.picker.clone();
    let per = (plan.batch / picker.spread()) as u32;
    // The next seq of every partition: 4 bytes each, owned by the pacer.
    let mut next_seq: Vec<u32> = vec![plan.first_seq; plan.space as usize];
    let mut parts: Vec<u64> = Vec::with_capacity(picker.spread() as usize);
    let counters = env.counters.clone();
    let emit = move |slot: Slot| {
        parts.clear();
        let w = picker.pick(slot.due_us, &mut parts);
        counters.requests_offered.inc();
        if slot.skipped {
            return false;
        }
        let req = Request {
            parts: parts.iter().map(|&p| (p, next_seq[p as usize])).collect(),
            per_partition: per,
            ts: slot.ts,
        };
        match senders.try_send(w, req) {
            Ok(()) => {
                for &p in &parts {
                    next_seq[p as usize] += per;
                }
                true
            }
            Err(_) => false,
        }
    };
    let pacer = Pacer::new(
        PacerSpec {
            name: "pacer-stream".into(),
            schedule: Schedule {
                rate: plan.rate / plan.batch as f64,
                ramp: plan.ramp,
            },
            units_per_slot: plan.batch,
            run_for: traffic.run_for,
            start: traffic.start,
            start_us: traffic.start_us,
        },
        PacerSinks {
            counters: env.flow.clone(),
            window: env.window.clone(),
            lag: env.metrics.schedule_lag.clone(),
            clock: env.clock,
        },
        emit,
    );
    match plan.drive {
        PacerDrive::Thread => Paced::start(pacer, workers, timing),
        PacerDrive::Runtime => Paced::start_as_task(pacer, workers, timing),
    }
}

async fn worker(env: PushEnv, mut rx: Receiver<Request>) {
    let mut payloads: Vec<Bytes> = Vec::new();
    while let Some(req) = rx.recv().await {
        let n = req.per_partition as u64;
        let rated = env.window.is_rated(req.ts);
        let deadline = env.clock.instant_of(req.ts) + env.deadline;
        let mut ok_all = true;
        for &(p, first) in &req.parts {
            // Past the drain's deadline nothing queued is sent any more.
            let sent = if env.abandon.is_cancelled() {
                Err(GiveUp::Failed)
            } else {
                payloads.clear();
                payloads
                    .extend((0..req.per_partition).map(|i| env.body.encode(p, first + i, req.ts)));
                publish_until(
                    env.broker.as_ref(),
                    &env.topic,
                    &key_of(p),
                    &payloads,
                    deadline,
                    &env.abandon,
                    &env.flow.publish_retries,
                    |e| {
                        env.counters.count_error(e);
                        env.flow.count_error(e);
                    },
                )
                .await
                .map_err(|g| g.kind)
            };
            match sent {
                Ok(rtt) => {
                    env.metrics.publish_rtt.record(rtt.as_micros() as i64);
                    env.ledger.acked.raise(p, first + req.per_partition - 1);
                    env.ledger.created.mark(p);
                    env.flow.published.add(n);
                    if rated {
                        env.flow.published_rated.add(n);
                    }
                }
                Err(kind) => {
                    // Given up: recorded and dropped; the partition's later requests
                    // still go out.
                    let last = first + req.per_partition - 1;
                    env.outcomes.give_up(p, first as i64, last as i64, kind);
                    ok_all = false;
                    env.flow.failed.add(n);
                    if kind == GiveUp::Indeterminate {
                        env.flow.failed_indeterminate.add(n);
                    }
                }
            }
        }
        if ok_all {
            env.counters.requests_ok.inc();
            if rated {
                env.metrics.push.record(env.clock.now_us() - req.ts);
            }
        }
    }
}
