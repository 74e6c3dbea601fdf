//! One consumer-group member: a librdkafka consumer with cooperative-sticky
//! assignment, manual commits, and one partition task per assigned partition.
//!
//! The rebalance callback (run by librdkafka from the member's poll of its main
//! queue) splits every newly assigned partition into its own queue *before* the
//! assignment takes effect, so no record of it ever lands in the shared queue, and
//! hands the queue to the member task. On revocation it waits until the partition's
//! task has finished its current set, then commits the revoked partitions' processed
//! offsets (see [`super::commit`]) before it returns, so the next owner starts after
//! the last commit and a key never runs in two members at once, provided the
//! coordinator hands a partition on only after its holder rejoined (Kafka's does;
//! where one does not, [`super::holders`] counts the overlap). Between rebalances a
//! commit loop commits the processed offsets of all partitions that advanced, in one
//! call, every `commit_interval`.
//!
//! Errors never end a member silently: fetch and commit errors are counted; a fatal
//! client error ends the consumer instance, and the member builds a new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::stream_consumer::StreamPartitionQueue;
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::commit::Committer;
use super::holders::Holders;
use super::options::KafkaOptions;
use super::partition::{self, PartitionCtl, PartitionJob};
use super::stats::Stats;
use crate::broker::{BatchHandler, StreamCounters};

pub(super) type Consumer = StreamConsumer<MemberCtx>;
pub(super) type PartitionQueue = StreamPartitionQueue<MemberCtx>;

/// How long a revocation waits for a partition's set in progress.
const REVOKE_WAIT: Duration = Duration::from_secs(30);

/// What the rebalance callback tells the member task.
enum Event {
    Assigned {
        partition: i32,
        queue: PartitionQueue,
        ctl: Arc<PartitionCtl>,
        consumer: Arc<Consumer>,
    },
}

/// The member's librdkafka context: the rebalance callback and client errors.
pub(super) struct MemberCtx {
    me: OnceLock<Weak<Consumer>>,
    topic: String,
    events: mpsc::UnboundedSender<Event>,
    parts: Mutex<HashMap<i32, Arc<PartitionCtl>>>,
    stop: CancellationToken,
    stats: Arc<Stats>,
    committer: Arc<Committer>,
    fatal: AtomicBool,
    /// Who holds each partition in this member's group, and this member's index.
    holders: Arc<Holders>,
    index: usize,
}

impl MemberCtx {
    fn revoke(&self, base: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        let mut busy = Vec::new();
        let mut revoked = Vec::new();
        for e in tpl.elements_for_topic(&self.topic) {
            revoked.push(e.partition());
            if let Some(ctl) = self.parts.lock().remove(&e.partition()) {
                self.stats.partitions_revoked.inc();
                if ctl.revoke() {
                    busy.push(ctl);
                }
            }
        }
        if revoked.is_empty() {
            return;
        }
        if !busy.is_empty() {
            self.stats.revoke_waits.inc();
        }
        // Wait for the sets in progress, then commit what the revoked partitions have
        // processed (waiting for a periodic commit in flight), before returning.
        let wait = || {
            let idle = busy.iter().all(|c| c.wait_idle(REVOKE_WAIT));
            self.committer.flush(base, Some(&revoked));
            idle
        };
        // Called on a runtime thread (the member's poll): let the runtime move its other
        // tasks away while this one waits for the partition tasks and the commit.
        let multi = tokio::runtime::Handle::try_current()
            .map(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
            .unwrap_or(false);
        let ok = if multi {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        };
        // Released once its set is finished and its offset committed.
        for p in &revoked {
            self.holders.release(*p, self.index);
        }
        if !ok {
            self.stats.revoke_wait_timeouts.inc();
        }
    }

    fn assign(&self, tpl: &TopicPartitionList) {
        let Some(consumer) = self.me.get().and_then(Weak::upgrade) else {
            return;
        };
        for e in tpl.elements_for_topic(&self.topic) {
            let p = e.partition();
            let Some(queue) = consumer.split_partition_queue(&self.topic, p) else {
                self.stats.error_class("split_partition_queue");
                continue;
            };
            if !self.holders.assign(p, self.index) {
                self.stats.assignment_overlaps.inc();
            }
            let ctl = PartitionCtl::new(&self.stop);
            if let Some(old) = self.parts.lock().insert(p, ctl.clone()) {
                old.revoke();
            }
            self.stats.partitions_assigned.inc();
            let _ = self.events.send(Event::Assigned {
                partition: p,
                queue,
                ctl,
                consumer: consumer.clone(),
            });
        }
    }
}

impl ClientContext for MemberCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if matches!(
            level,
            RDKafkaLogLevel::Emerg
                | RDKafkaLogLevel::Alert
                | RDKafkaLogLevel::Critical
                | RDKafkaLogLevel::Error
        ) {
            self.stats.error_class("client_log_error");
        }
        let _ = (fac, log_message);
    }

    fn error(&self, error: KafkaError, _reason: &str) {
        self.stats.client_errors.inc();
        if let KafkaError::Global(code) = &error {
            if *code == rdkafka::types::RDKafkaErrorCode::Fatal {
                self.fatal.store(true, Ordering::Relaxed);
            }
        }
    }
}

impl ConsumerContext for MemberCtx {
    fn pre_rebalance(&self, base: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.stats.rebalances.inc();
        match rebalance {
            Rebalance::Assign(tpl) => self.assign(tpl),
            Rebalance::Revoke(tpl) => self.revoke(base, tpl),
            Rebalance::Error(_) => self.stats.error_class("rebalance"),
        }
    }
}

/// Everything a member needs, shared by the members of one stage.
#[derive(Clone)]
pub(super) struct MemberSpec {
    pub opts: KafkaOptions,
    pub topic: Arc<str>,
    pub group_id: String,
    pub index: usize,
    pub handler: Arc<dyn BatchHandler>,
    pub counters: Arc<StreamCounters>,
    pub stats: Arc<Stats>,
    pub batch: usize,
    /// All members of the stage subscribe together (first start only).
    pub start: Arc<tokio::sync::Barrier>,
    /// Who holds each partition of the group (shared by the stage's members).
    pub holders: Arc<Holders>,
}

impl std::fmt::Debug for MemberSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MemberSpec({}/{}#{})",
            self.topic, self.group_id, self.index
        )
    }
}

pub(super) fn consumer_config(o: &KafkaOptions, group_id: &str, client_id: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &o.bootstrap_servers)
        .set("group.id", group_id)
        .set("client.id", client_id)
        .set("partition.assignment.strategy", o.assignment.name())
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("allow.auto.create.topics", "false")
        .set("enable.partition.eof", "false")
        .set(
            "session.timeout.ms",
            o.session_timeout.as_millis().to_string(),
        )
        .set(
            "heartbeat.interval.ms",
            (o.session_timeout.as_millis() / 3).max(100).to_string(),
        )
        .set(
            "fetch.wait.max.ms",
            o.fetch_wait_max.as_millis().to_string(),
        )
        .set("log_level", "3");
    super::security::apply(o, &mut c);
    c
}

/// Run one member until `stop`; a consumer instance that fails is replaced.
pub(super) async fn run(spec: MemberSpec, stop: CancellationToken) {
    let mut first = true;
    let mut backoff = Duration::from_millis(200);
    while !stop.is_cancelled() {
        if !first {
            spec.stats.member_restarts.inc();
            spec.counters.reconnects.inc();
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        let waited_barrier = !first;
        first = false;
        let started = Instant::now();
        run_instance(&spec, &stop, waited_barrier).await;
        if started.elapsed() > Duration::from_secs(30) {
            backoff = Duration::from_millis(200);
        }
    }
}

/// One consumer instance: returns on stop or on a fatal client error.
async fn run_instance(spec: &MemberSpec, stop: &CancellationToken, skip_barrier: bool) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let inst_stop = stop.child_token();
    let committer = Committer::new(&spec.topic, spec.counters.clone(), spec.stats.clone());
    let ctx = MemberCtx {
        me: OnceLock::new(),
        topic: spec.topic.to_string(),
        events: tx,
        parts: Mutex::new(HashMap::new()),
        stop: inst_stop.clone(),
        stats: spec.stats.clone(),
        committer: committer.clone(),
        fatal: AtomicBool::new(false),
        holders: spec.holders.clone(),
        index: spec.index,
    };
    let client_id = format!("crossbench-{}-{}", spec.group_id, spec.index);
    let cfg = consumer_config(&spec.opts, &spec.group_id, &client_id);
    let consumer: Arc<Consumer> = match cfg.create_with_context(ctx) {
        Ok(c) => Arc::new(c),
        Err(_) => {
            spec.stats.error_class("consumer_create");
            spec.counters.receive_errors.inc();
            if !skip_barrier {
                spec.start.wait().await;
            }
            return;
        }
    };
    let _ = consumer.context().me.set(Arc::downgrade(&consumer));
    spec.stats.member_starts.inc();
    if !skip_barrier {
        spec.start.wait().await;
    }
    if consumer.subscribe(&[&spec.topic]).is_err() {
        spec.stats.error_class("subscribe");
        spec.counters.receive_errors.inc();
        return;
    }
    let pause_at = spec.opts.pause_at(spec.batch);
    let mut tasks: JoinSet<()> = JoinSet::new();
    let commit_loop = tokio::spawn(commit_loop(
        committer.clone(),
        consumer.clone(),
        spec.opts.commit_interval,
        inst_stop.clone(),
    ));
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            ev = rx.recv() => match ev {
                Some(Event::Assigned { partition, queue, ctl, consumer }) => {
                    tasks.spawn(partition::run(PartitionJob {
                        consumer,
                        topic: spec.topic.clone(),
                        partition,
                        ctl,
                        committer: committer.clone(),
                        handler: spec.handler.clone(),
                        counters: spec.counters.clone(),
                        stats: spec.stats.clone(),
                        batch: spec.batch.max(1),
                        pause_at,
                    }, queue));
                }
                None => break,
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            m = consumer.recv() => match m {
                Ok(m) => {
                    // Every partition is split before it is assigned; a record here
                    // would bypass its partition task. Count it and send the partition
                    // back to it so it is read again in order.
                    spec.stats.stray_records.inc();
                    let _ = consumer.seek(
                        rdkafka::message::Message::topic(&m),
                        rdkafka::message::Message::partition(&m),
                        Offset::Offset(rdkafka::message::Message::offset(&m)),
                        Duration::ZERO,
                    );
                }
                Err(_) => {
                    spec.stats.fetch_errors.inc();
                    spec.counters.receive_errors.inc();
                    if consumer.context().fatal.load(Ordering::Relaxed)
                        || consumer.client().fatal_error().is_some()
                    {
                        spec.stats.error_class("fatal");
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    // Stop the partition tasks (they finish their current set and report it) and the
    // commit loop, commit what is left, then close the consumer off the runtime threads.
    inst_stop.cancel();
    while tasks.join_next().await.is_some() {}
    let _ = commit_loop.await;
    // Unprocessed assignment events hold the consumer too: drop them first so the
    // close below runs on a blocking thread, not on a runtime worker.
    rx.close();
    while rx.try_recv().is_ok() {}
    drop(rx);
    let _ = tokio::task::spawn_blocking(move || {
        committer.flush(consumer.as_ref(), None);
        consumer.unsubscribe();
        drop(consumer);
    })
    .await;
    spec.holders.release_all(spec.index);
}

/// Commit the processed offsets of every partition that advanced, one call per
/// `interval` at most, until `stop` (the member flushes the rest itself).
async fn commit_loop(
    committer: Arc<Committer>,
    consumer: Arc<Consumer>,
    interval: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
        let (c, k) = (committer.clone(), consumer.clone());
        let _ = tokio::task::spawn_blocking(move || c.flush(k.as_ref(), None)).await;
    }
}
