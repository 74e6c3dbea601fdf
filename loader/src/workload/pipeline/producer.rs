//! The open-loop producer of one flow: the shared pacer releases the flow's events on
//! schedule, and this module's emit closure picks each event's property and hands it
//! to the ordered publisher shard of that property, never waiting.
//!
//! Each property is pinned to one shard, so its events are published in seq order.
//! A shard whose queue is full sheds the event (counted, no seq consumed: shedding
//! never creates gaps). Hot properties get shards of their own, so a hot key's
//! backlog never delays the cold keys (the reference pinned the hot key together
//! with a fixed slice of cold keys). Every event is stamped with its *scheduled*
//! instant, so every latency is corrected for coordinated omission.
//!
//! One loader of several produces only its share of the keys ([`Share`]), at its
//! share of the rate: its selector walks its own keys, and its stamps carry its
//! index.

use std::sync::Arc;

use adapters::Broker;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cell::workload::Traffic;
use crate::fleet::Share;
use crate::measure::clock::Clock;
use crate::measure::counters::FlowCounters;
use crate::measure::outcomes::{GiveUp, Outcomes};
use crate::measure::window::RatedWindow;
use crate::pacing::pacer::{Paced, Pacer, PacerSinks, PacerSpec, Slot, Timing};
use crate::pacing::retry::publish_until;
use crate::pacing::schedule::Schedule;
use crate::pacing::work_timer::WorkTimer;
use crate::workload::pipeline::metrics::Metrics;
use crate::workload::pipeline::selector::Selector;
use crate::workload::pipeline::seqs::SeqTable;
use crate::workload::pipeline::topology::Flow;
use crate::workload::stamp::{key_of, Stamp};

#[derive(Debug, Clone, Copy)]
struct Job {
    prop: u64,
    seq: i64,
    ts: i64,
}

/// Static description of one flow's producer.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    pub flow: Flow,
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
    /// First seq of paced traffic (1: seq 0 is hydration's).
    pub first_seq: i64,
    /// The keys this loader produces (all of them in the ordinary cell).
    pub share: Share,
    /// The producer id the stamps carry (several loaders only).
    pub loader: Option<u32>,
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
    pub window: Arc<RatedWindow>,
    pub clock: Clock,
    /// Fires when publishers must give up retrying (the remaining jobs fail).
    pub abandon: CancellationToken,
    /// How long after its scheduled instant an event may still be published; past it
    /// the event is given up (failed or indeterminate) and dropped.
    pub deadline: std::time::Duration,
    /// Where given-up events are recorded for `produced.meta`.
    pub outcomes: Arc<Outcomes>,
}

fn encode(flow: Flow, job: &Job, padding: Option<&[u8]>, loader: Option<u32>) -> Bytes {
    Bytes::from(
        Stamp {
            prop: job.prop,
            flow: flow.letter(),
            seq: job.seq,
            ts: job.ts,
            loader,
        }
        .encode(padding),
    )
}

/// Publish seq 0 of every property of this loader's share (hydration),
/// `concurrency` at a time, all stamped with one instant. The first error aborts.
pub async fn hydrate(
    spec: &FlowSpec,
    env: &ProducerEnv,
    concurrency: usize,
) -> Result<(), adapters::BrokerError> {
    let ts = env.clock.now_us();
    let sem = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut set = JoinSet::new();
    for prop in spec.share.keys(spec.props) {
        let permit = sem.clone().acquire_owned().await.expect("open semaphore");
        let env = env.clone();
        let topic = spec.topic.clone();
        let payload = encode(
            spec.flow,
            &Job { prop, seq: 0, ts },
            spec.padding.as_deref().map(|v| v.as_slice()),
            spec.loader,
        );
        set.spawn(async move {
            let r = env.broker.publish(&topic, &key_of(prop), &[payload]).await;
            if r.is_ok() {
                env.seqs.ack(prop, 0);
                env.counters.hydration_published.inc();
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

/// Start a flow's pacer and shard workers for `traffic`; the pacer runs on `clock`
/// (in the clock's time) when one is given, else on its own in `timing`.
pub fn start(
    spec: FlowSpec,
    env: ProducerEnv,
    traffic: Traffic,
    timing: Timing,
    clock: Option<&WorkTimer>,
) -> Paced {
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
        let (tx, rx) = mpsc::channel::<Job>(spec.shard_queue.max(1));
        senders.push(tx);
        workers.spawn(shard(
            env.clone(),
            spec.topic.clone(),
            spec.flow,
            spec.padding.clone(),
            spec.loader,
            rx,
        ));
    }
    // The emit closure: the next property (of this loader's keys: the selector walks
    // local indices, hot ones first), its shard, its next seq.
    let share = spec.share;
    let mut selector = Selector::new(
        share.owned(spec.props),
        share.owned_hot(hot),
        spec.hot_factor,
    );
    let mut next_seq: Vec<i64> = vec![spec.first_seq; spec.props as usize];
    let emit = move |slot: Slot| {
        let prop = share.key(selector.next_prop());
        if slot.skipped {
            return false;
        }
        let shard = shard_of(prop, hot, hot_shards, cold_shards);
        let seq = next_seq[prop as usize];
        match senders[shard].try_send(Job {
            prop,
            seq,
            ts: slot.ts,
        }) {
            Ok(()) => {
                next_seq[prop as usize] = seq + 1;
                true
            }
            Err(_) => false,
        }
    };
    let pacer = Pacer::new(
        PacerSpec {
            name: format!("pacer-{}", spec.flow.name()),
            schedule: Schedule {
                rate: spec.rate,
                ramp: spec.ramp,
            },
            units_per_slot: 1,
            run_for: traffic.run_for,
            start: traffic.start,
            start_us: traffic.start_us,
        },
        PacerSinks {
            counters: env.counters.clone(),
            window: env.window.clone(),
            lag: env.metrics.schedule_lag.clone(),
            clock: env.clock,
        },
        emit,
    );
    match clock {
        Some(c) => c.pace(pacer, workers),
        None => Paced::start(pacer, workers, timing),
    }
}

/// One ordered publisher shard: publishes its queue's events one at a time, each
/// until accepted, past its deadline, or abandoned. A given-up event is recorded as
/// failed or indeterminate and dropped; the property's later events still go out
/// (their seqs follow it, so the checker sees exactly which seqs are not owed).
async fn shard(
    env: ProducerEnv,
    topic: String,
    flow: Flow,
    padding: Option<Arc<Vec<u8>>>,
    loader: Option<u32>,
    mut rx: mpsc::Receiver<Job>,
) {
    while let Some(job) = rx.recv().await {
        // Past the drain's deadline nothing queued is sent any more: a slow system
        // must not stretch the drain by its whole backlog.
        let deadline = env.clock.instant_of(job.ts) + env.deadline;
        let outcome = if env.abandon.is_cancelled() {
            Err(GiveUp::Failed)
        } else {
            let payload = encode(flow, &job, padding.as_deref().map(|v| v.as_slice()), loader);
            publish_until(
                env.broker.as_ref(),
                &topic,
                &key_of(job.prop),
                &[payload],
                deadline,
                &env.abandon,
                &env.counters.publish_retries,
                |e| env.counters.count_error(e),
            )
            .await
            .map_err(|g| g.kind)
        };
        match outcome {
            Ok(rtt) => {
                env.metrics.publish.record(rtt.as_micros() as i64);
                env.seqs.ack(job.prop, job.seq);
                env.counters.published.inc();
                if env.window.is_rated(job.ts) {
                    env.counters.published_rated.inc();
                }
            }
            Err(kind) => {
                env.outcomes.give_up(job.prop, job.seq, job.seq, kind);
                env.counters.failed.inc();
                if kind == GiveUp::Indeterminate {
                    env.counters.failed_indeterminate.inc();
                }
            }
        }
    }
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
