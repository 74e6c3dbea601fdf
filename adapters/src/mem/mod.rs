//! `mem`: the in-process control broker.
//!
//! It honours the adapter contract exactly (per-key order, one key in flight per
//! group, whole-batch redelivery of refused batches, native fan-out) and costs as
//! little as possible, so a run on it measures the harness's own ceiling. It can also
//! be told to misbehave ([`Fault`]) so the checker can be shown to catch it, and to
//! publish slowly ([`MemOptions::publish_delay`]) so shedding can be shown.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, Delivery, DeliveryGuarantee, Description, Disposition,
    Durability, FanOut, KeyBatch, Topology,
};
use crate::counter::{self, Counter};
use crate::error::BrokerError;

mod options;
pub mod system;
pub use options::{Fault, FaultKind, MemOptions, PublishFault, PublishFaultKind};

/// A map keyed by a key or a topic's name, hashed with foldhash: the broker hashes a
/// key at every publish, claim and release, and std's SipHash resists flooding that
/// no one can do to an in-process map (it cost 7 % of control-dense's instructions).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Debug, Default)]
struct KeyState {
    /// The key whose slot this is (empty while the slot is free).
    key: Arc<str>,
    pending: VecDeque<Pending>,
    in_flight: bool,
    queued: bool,
    /// A message held back by a `Reorder` fault, released after the next batch.
    held: Option<Pending>,
}

#[derive(Debug, Clone)]
struct Pending {
    payload: Bytes,
    redelivered: bool,
    /// Dispatched before (so fault ordinals count each message once).
    seen: bool,
}

/// A group's keys: each key's state in a slot of `slots`, found by its key once per
/// publish (`keys`) and by its slot number after that. A claim and its release are
/// about 20 ms apart on control-dense, the map's line long cold by then: the release
/// and the claim reach the key's state by index, without hashing and comparing the
/// key again (the release's lookup was 3 % of control-dense's CPU, `perf`, issue 49).
#[derive(Debug, Default)]
struct GroupState {
    /// Each key's slot.
    keys: HashMap<Arc<str>, usize>,
    slots: Vec<KeyState>,
    /// Slots of forgotten keys, used again first.
    free: Vec<usize>,
    /// Slots of keys with a batch to hand out, in the order they became ready.
    ready: VecDeque<usize>,
    /// First-time dispatches so far (fault ordinals).
    dispatched: u64,
    /// A `Stall` fault was met: nothing more is handed out.
    stalled: bool,
}

impl GroupState {
    /// `key`'s slot, made (or a free one taken) the first time.
    fn slot_of(&mut self, key: &str) -> usize {
        if let Some(&i) = self.keys.get(key) {
            return i;
        }
        let key: Arc<str> = Arc::from(key);
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(KeyState::default());
                self.slots.len() - 1
            }
        };
        self.slots[i].key = key.clone();
        self.keys.insert(key, i);
        i
    }

    /// Forget the idle key in slot `i`: its slot is free for the next new key.
    fn forget(&mut self, i: usize) {
        let ks = std::mem::take(&mut self.slots[i]);
        self.keys.remove(&ks.key);
        self.free.push(i);
    }

    /// The states of the keys the group holds.
    fn states(&self) -> impl Iterator<Item = &KeyState> {
        self.keys.values().map(|&i| &self.slots[i])
    }
}

#[derive(Debug)]
struct Group {
    state: Mutex<GroupState>,
    notify: Notify,
    faults: Vec<Fault>,
    /// Idle keys the group keeps (see [`KEEP_IDLE_KEYS`]).
    keep_idle: usize,
    /// This stream's part of the broker's counters ([`MemStats`]).
    stats: GroupStats,
}

/// A stream's deliveries, acks and refusals, bumped by its own loop (one task).
#[derive(Debug, Default)]
struct GroupStats {
    delivered: Counter,
    acked: Counter,
    refused: Counter,
}

/// How many keys a group keeps while they are idle (nothing pending, nothing in
/// flight). Below it an idle key keeps its state, so a key that comes back every few
/// milliseconds is not re-created (an `Arc<str>`, a queue and a map insert, then their
/// removal) for every batch of every group; above it an idle key is forgotten, so the
/// group's memory follows the keys with messages, not every key ever used (the
/// million-partition space: docs/perf-stream.md). About 100 bytes per kept key.
const KEEP_IDLE_KEYS: usize = 4096;

#[derive(Debug)]
struct Topic {
    groups: Vec<(String, Arc<Group>)>,
    distinct_keys: Counter,
    census: Mutex<KeyCensus>,
    /// Publish calls so far (publish-fault ordinals).
    calls: Counter,
    /// Messages published to this topic.
    published: Counter,
    /// Publish faults of this topic, and the first payload of each call one hit
    /// (its retries get the same answer).
    publish_faults: Vec<PublishFault>,
    poisoned: Mutex<HashMap<Bytes, PublishFaultKind>>,
}

/// The distinct keys a topic has seen, in one bit per key for the harness's own
/// `p<N>` keys and a set for any other: a group forgets idle keys beyond
/// [`KEEP_IDLE_KEYS`] (so its memory follows the keys with messages, not every key
/// ever used), the census does not.
#[derive(Debug, Default)]
struct KeyCensus {
    bits: Vec<u64>,
    others: std::collections::HashSet<Box<str>>,
}

impl KeyCensus {
    /// Record `key`; true the first time.
    fn insert(&mut self, key: &str) -> bool {
        let n = key
            .strip_prefix('p')
            .filter(|d| {
                !d.is_empty()
                    && d.len() <= 9
                    && (d.len() == 1 || !d.starts_with('0'))
                    && d.bytes().all(|b| b.is_ascii_digit())
            })
            .and_then(|d| d.parse::<usize>().ok());
        match n {
            Some(n) => {
                let (w, b) = (n / 64, 1u64 << (n % 64));
                if self.bits.len() <= w {
                    self.bits.resize(w + 1, 0);
                }
                let fresh = self.bits[w] & b == 0;
                self.bits[w] |= b;
                fresh
            }
            None => {
                if self.others.contains(key) {
                    false
                } else {
                    self.others.insert(key.into())
                }
            }
        }
    }
}

/// The control broker's counters (`broker_stats`, every key prefixed `mem_`). Each
/// topic counts its publishes and each group (a stream, served by one task) its
/// deliveries, acks and refusals; the snapshot sums them. One struct bumped by every
/// publish, delivery and ack of every stream passed its cache line between the
/// runtime's workers at each (issue 49). The broker's own struct keeps the faults and
/// what topics dropped by a reset had counted.
#[derive(Debug, Default, Serialize)]
struct MemStats {
    published: Counter,
    delivered: Counter,
    acked: Counter,
    refused: Counter,
    faults_applied: Counter,
}

impl MemStats {
    /// Add `other`'s counts to these.
    fn add(&self, other: &MemStats) {
        self.published.add(other.published.get());
        self.delivered.add(other.delivered.get());
        self.acked.add(other.acked.get());
        self.refused.add(other.refused.get());
        self.faults_applied.add(other.faults_applied.get());
    }

    /// Add a topic's publishes and its groups' deliveries, acks and refusals.
    fn add_topic(&self, t: &Topic) {
        self.published.add(t.published.get());
        for (_, g) in &t.groups {
            self.delivered.add(g.stats.delivered.get());
            self.acked.add(g.stats.acked.get());
            self.refused.add(g.stats.refused.get());
        }
    }
}

/// What the snapshot adds to the counters: measured when asked.
#[derive(Serialize)]
struct MemGauges {
    distinct_keys: u64,
}

/// The control broker.
#[derive(Debug, Default)]
pub struct MemBroker {
    options: MemOptions,
    topics: RwLock<HashMap<String, Arc<Topic>>>,
    stats: Arc<MemStats>,
    limiter: Option<Arc<Limiter>>,
    /// Idle keys each group keeps ([`KEEP_IDLE_KEYS`]; tests lower it).
    keep_idle: usize,
}

/// A token bucket over every stream's deliveries (`max_deliveries_per_sec`): a
/// broker with a known capacity. Burst: a tenth of a second's worth.
#[derive(Debug)]
struct Limiter {
    rate: f64,
    state: tokio::sync::Mutex<(tokio::time::Instant, f64)>,
}

impl Limiter {
    fn new(rate: u64) -> Limiter {
        Limiter {
            rate: rate as f64,
            state: tokio::sync::Mutex::new((tokio::time::Instant::now(), rate as f64 / 10.0)),
        }
    }

    /// Wait until `n` deliveries may go out.
    async fn take(&self, n: u64) {
        let n = n as f64;
        let burst = (self.rate / 10.0).max(n);
        let mut st = self.state.lock().await;
        loop {
            let now = tokio::time::Instant::now();
            let (last, tokens) = *st;
            let tokens = (tokens + now.duration_since(last).as_secs_f64() * self.rate).min(burst);
            if tokens >= n {
                *st = (now, tokens - n);
                return;
            }
            *st = (now, tokens);
            // At least a millisecond: a deficit of a rounding error must not spin.
            let wait = ((n - tokens) / self.rate).max(0.001);
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }
}

/// What ended a consume loop's wait.
enum Woke {
    /// Batches finished (all that had, taken in one wake).
    Finished,
    /// A key may have become ready.
    Ready,
    Stop,
}

impl MemBroker {
    /// The answer a publish fault gives.
    fn fault_error(kind: PublishFaultKind) -> BrokerError {
        match kind {
            PublishFaultKind::RefuseButKeep => {
                BrokerError::Refused("mem publish fault: refused (but kept)".into())
            }
            PublishFaultKind::TimeoutButKeep | PublishFaultKind::Timeout => {
                BrokerError::Timeout("mem publish fault: no answer".into())
            }
        }
    }

    pub fn new(options: MemOptions) -> Self {
        MemBroker {
            limiter: (options.max_deliveries_per_sec > 0)
                .then(|| Arc::new(Limiter::new(options.max_deliveries_per_sec))),
            options,
            keep_idle: KEEP_IDLE_KEYS,
            ..Default::default()
        }
    }

    fn topic(&self, name: &str) -> Result<Arc<Topic>, BrokerError> {
        self.topics
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| BrokerError::UnknownTopic(name.to_string()))
    }

    fn group(&self, topic: &str, group: &str) -> Result<Arc<Group>, BrokerError> {
        let t = self.topic(topic)?;
        t.groups
            .iter()
            .find(|(g, _)| g == group)
            .map(|(_, g)| g.clone())
            .ok_or_else(|| BrokerError::Other(format!("unknown group {group:?} on {topic:?}")))
    }
}

impl Group {
    /// Take the next batch of one ready key, applying faults: the key, its slot (for
    /// [`Group::release`]) and the batch. Returns None when no key is ready.
    fn claim(
        &self,
        batch: usize,
        faults_applied: &Counter,
    ) -> Option<(Arc<str>, usize, Vec<Pending>)> {
        let mut st = self.state.lock();
        loop {
            if st.stalled {
                return None;
            }
            let slot = st.ready.pop_front()?;
            let mut dispatched = st.dispatched;
            let ks = &mut st.slots[slot];
            ks.queued = false;
            if ks.in_flight || ks.pending.is_empty() {
                continue;
            }
            let n = ks.pending.len().min(batch.max(1));
            let mut out: Vec<Pending> = Vec::with_capacity(n + 1);
            // Where a message held back by this very claim sits in `out`.
            let mut held_at: Option<usize> = None;
            let mut stall = false;
            for _ in 0..n {
                let mut m = ks.pending.pop_front().expect("n <= len");
                if !m.seen {
                    m.seen = true;
                    let ordinal = dispatched;
                    dispatched += 1;
                    if let Some(f) = self.faults.iter().find(|f| f.at == ordinal) {
                        faults_applied.inc();
                        match f.kind {
                            FaultKind::Stall => {
                                // Kept, never handed out: the broker still holds it.
                                m.seen = false;
                                dispatched -= 1;
                                ks.pending.push_front(m);
                                stall = true;
                                break;
                            }
                            FaultKind::Drop => continue,
                            FaultKind::Duplicate => out.push(m.clone()),
                            FaultKind::Reorder => {
                                held_at = Some(out.len());
                                ks.held = Some(m);
                                continue;
                            }
                        }
                    }
                }
                out.push(m);
            }
            // A held-back message goes out right after a later message of its key.
            let release_held = match held_at {
                Some(i) => out.len() > i,
                None => !out.is_empty(),
            };
            if release_held {
                if let Some(h) = ks.held.take() {
                    out.push(h);
                }
            }
            if stall {
                st.stalled = true;
                st.dispatched = dispatched;
                if out.is_empty() {
                    return None;
                }
                let ks = &mut st.slots[slot];
                ks.in_flight = true;
                return Some((ks.key.clone(), slot, out));
            }
            if out.is_empty() {
                // Everything taken was dropped or held: keep the key going.
                if !ks.pending.is_empty() {
                    ks.queued = true;
                    st.ready.push_back(slot);
                }
                st.dispatched = dispatched;
                continue;
            }
            ks.in_flight = true;
            let key = ks.key.clone();
            st.dispatched = dispatched;
            return Some((key, slot, out));
        }
    }

    /// Finish a batch: ack drops it, refuse puts it back at the head, in order.
    /// `slot` is the key's, as [`Group::claim`] gave it: an in-flight key keeps it.
    fn release(&self, slot: usize, msgs: Vec<Pending>, disposition: Disposition) {
        let wake = {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            let ks = &mut st.slots[slot];
            ks.in_flight = false;
            if disposition == Disposition::Refuse {
                for mut m in msgs.into_iter().rev() {
                    m.redelivered = true;
                    ks.pending.push_front(m);
                }
            }
            if !ks.pending.is_empty() && !ks.queued {
                ks.queued = true;
                st.ready.push_back(slot);
                true
            } else {
                if ks.pending.is_empty()
                    && !ks.queued
                    && ks.held.is_none()
                    && st.keys.len() > self.keep_idle
                {
                    // Idle, and the group keeps enough idle keys: forget it (it is
                    // re-created by its next publish).
                    st.forget(slot);
                }
                false
            }
        };
        if wake {
            self.notify.notify_one();
        }
    }
}

/// The control broker's provenance: crossbench's own version (it runs inside the
/// loader, so its build is the loader's, `crossbench.git_commit`).
fn own_provenance() -> crate::Provenance {
    let mut p = crate::Provenance::new(
        "crossbench control broker (in-process)",
        "the crate's own version (CARGO_PKG_VERSION)",
    )
    .with_version(env!("CARGO_PKG_VERSION"));
    p.note("runs inside the loader: its build is the loader's (crossbench.git_commit)");
    p.setting("storage", "memory (in-process, nothing persisted)");
    p
}

#[async_trait]
impl Broker for MemBroker {
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        let mut topics = self.topics.write();
        if topology.reset {
            // What the dropped topics counted stays in the broker's counters.
            for t in topics.values() {
                self.stats.add_topic(t);
            }
            topics.clear();
        }
        let max = self.options.max_lanes;
        if max > 0 && topology.lanes > max {
            let topic = topology.topics.first().map_or("", |t| t.name.as_str());
            return Err(BrokerError::TopologyRefused {
                what: format!("topic {topic} with {} ordered lanes", topology.lanes),
                answer: format!("control broker: at most {max} lanes per topic (mem.max_lanes)"),
            });
        }
        for f in &self.options.faults {
            let known = topology
                .topics
                .iter()
                .any(|t| t.name == f.topic && t.groups.contains(&f.group));
            if !known {
                return Err(BrokerError::Config {
                    field: "mem.faults".into(),
                    message: format!(
                        "fault names stream {}/{} which is not in the topology",
                        f.topic, f.group
                    ),
                });
            }
        }
        for f in &self.options.publish_faults {
            if !topology.topics.iter().any(|t| t.name == f.topic) {
                return Err(BrokerError::Config {
                    field: "mem.publish_faults".into(),
                    message: format!(
                        "publish fault names topic {} which is not in the topology",
                        f.topic
                    ),
                });
            }
        }
        for t in &topology.topics {
            topics.entry(t.name.clone()).or_insert_with(|| {
                Arc::new(Topic {
                    groups: t
                        .groups
                        .iter()
                        .map(|g| {
                            let faults = self
                                .options
                                .faults
                                .iter()
                                .filter(|f| f.topic == t.name && &f.group == g)
                                .cloned()
                                .collect();
                            (
                                g.clone(),
                                Arc::new(Group {
                                    state: Mutex::new(GroupState::default()),
                                    notify: Notify::new(),
                                    faults,
                                    keep_idle: self.keep_idle,
                                    stats: GroupStats::default(),
                                }),
                            )
                        })
                        .collect(),
                    distinct_keys: Counter::new(),
                    census: Mutex::new(KeyCensus::default()),
                    calls: Counter::new(),
                    published: Counter::new(),
                    publish_faults: self
                        .options
                        .publish_faults
                        .iter()
                        .filter(|f| f.topic == t.name)
                        .cloned()
                        .collect(),
                    poisoned: Mutex::new(HashMap::default()),
                })
            });
        }
        let streams = topology.stream_count() as u64;
        Ok(Description {
            system: "mem".into(),
            variant: String::new(),
            durability: Durability::Memory,
            fan_out: FanOut::Native,
            delivery: DeliveryGuarantee::ExactlyOnce,
            ordered_lanes: topology.keys * topology.topics.len() as u64,
            physical_queues: topology.topics.len() as u64,
            consumer_members: streams,
            connections: 0,
            // Native fan-out: one write per topic an event passes through.
            publishes_per_ingress_event: topology.native_publishes_per_ingress_event(),
            semantics_built_in_app: vec![],
            notes: vec!["in-process control broker: measures the harness's own ceiling".into()],
            lease_ms: None,
            provenance: own_provenance(),
        })
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if !self.options.publish_delay.is_zero() {
            tokio::time::sleep(self.options.publish_delay).await;
        }
        let t = self.topic(topic)?;
        // Publish faults: the call they hit, and every retry of it, get their answer.
        let mut answer: Option<PublishFaultKind> = None;
        if !t.publish_faults.is_empty() {
            let first = payloads.first().cloned().unwrap_or_default();
            if let Some(k) = t.poisoned.lock().get(&first) {
                return Err(Self::fault_error(*k));
            }
            let n = t.calls.get();
            t.calls.inc();
            if let Some(f) = t.publish_faults.iter().find(|f| f.at == n) {
                t.poisoned.lock().insert(first, f.kind);
                self.stats.faults_applied.inc();
                if f.kind == PublishFaultKind::Timeout {
                    return Err(Self::fault_error(f.kind));
                }
                answer = Some(f.kind);
            }
        }
        if t.census.lock().insert(key) {
            t.distinct_keys.inc();
        }
        for (_, g) in &t.groups {
            let mut guard = g.state.lock();
            let st = &mut *guard;
            let slot = st.slot_of(key);
            let ks = &mut st.slots[slot];
            for p in payloads {
                ks.pending.push_back(Pending {
                    payload: p.clone(),
                    redelivered: false,
                    seen: false,
                });
            }
            if !ks.in_flight && !ks.queued {
                ks.queued = true;
                st.ready.push_back(slot);
                drop(guard);
                g.notify.notify_one();
            }
        }
        t.published.add(payloads.len() as u64);
        match answer {
            Some(k) => Err(Self::fault_error(k)),
            None => Ok(()),
        }
    }

    async fn consume(
        &self,
        topic: &str,
        group: &str,
        options: ConsumeOptions,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
    ) -> Result<(), BrokerError> {
        let g = self.group(topic, group)?;
        // Enough concurrent batches that the broker never limits the stage: the stage's
        // own lane budget bounds the work in flight.
        let slots = options.lanes.max(16);
        let faults_applied = &self.stats.faults_applied;
        // Every batch in flight is a future of this one task, not a task of its own:
        // no spawn per key-batch, and the batches the work timer finishes in one tick
        // wake this task once, where each woke a task of its own (and often a parked
        // worker thread).
        let mut in_flight = FuturesUnordered::new();
        // One registration with the stop token for the whole loop, polled again at
        // each wait, rather than one cancellation future per batch.
        let stopped = stop.cancelled();
        tokio::pin!(stopped);
        // One registration for a key becoming ready, renewed only when it fires; it
        // is enabled before every look that may find nothing, so a publish between
        // the look and the wait is never missed.
        let ready = g.notify.notified();
        tokio::pin!(ready);
        ready.as_mut().enable();
        loop {
            if stop.is_cancelled() {
                break;
            }
            // Hand out every ready batch there is room for.
            while in_flight.len() < slots {
                let Some((key, slot, msgs)) = g.claim(options.batch, faults_applied) else {
                    break;
                };
                let n = msgs.len() as u64;
                if let Some(l) = &self.limiter {
                    // The limiter holds back new batches; the ones in flight still
                    // finish meanwhile.
                    let take = l.take(n);
                    tokio::pin!(take);
                    loop {
                        tokio::select! {
                            biased;
                            _ = &mut take => break,
                            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
                        }
                    }
                }
                g.stats.delivered.add(n);
                let redelivered = msgs.iter().filter(|m| m.redelivered).count() as u64;
                if redelivered > 0 {
                    options.counters.redelivered.add(redelivered);
                }
                let batch = KeyBatch {
                    key: key.clone(),
                    messages: msgs
                        .iter()
                        .map(|m| Delivery {
                            payload: m.payload.clone(),
                            redelivered: m.redelivered,
                        })
                        .collect(),
                };
                // The batch's future borrows what every batch shares from this loop
                // (it lives in `in_flight`, which this loop outlives): no reference
                // count taken and dropped per batch on lines both workers touch.
                let (handler, group, counters) = (&*handler, &*g, &*options.counters);
                in_flight.push(async move {
                    let d = handler.handle(batch).await;
                    match d {
                        Disposition::Ack => {
                            counters.acked.add(n);
                            group.stats.acked.add(n);
                        }
                        Disposition::Refuse => {
                            counters.refused.add(n);
                            group.stats.refused.add(n);
                        }
                    }
                    // The control broker's ack is the release of the key: timed so the
                    // ack round trip has a floor to compare real brokers with.
                    let t_ack = std::time::Instant::now();
                    group.release(slot, msgs, d);
                    if d == Disposition::Ack {
                        counters.ack_calls.inc();
                        counters.ack_micros.add(t_ack.elapsed().as_micros() as u64);
                    }
                });
            }
            // Wait for batches to finish (every one that has, in one wake), a key to
            // become ready (only while there is room for it), or the stop.
            let room = in_flight.len() < slots;
            let woke = std::future::poll_fn(|cx| {
                let mut finished = false;
                while let Poll::Ready(Some(())) = in_flight.poll_next_unpin(cx) {
                    finished = true;
                }
                if finished {
                    return Poll::Ready(Woke::Finished);
                }
                if room && ready.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Woke::Ready);
                }
                if stopped.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Woke::Stop);
                }
                Poll::Pending
            })
            .await;
            match woke {
                Woke::Finished => {}
                Woke::Ready => {
                    ready.set(g.notify.notified());
                    ready.as_mut().enable();
                }
                Woke::Stop => break,
            }
        }
        // Wait for every batch still in flight (each sees the stop and ends).
        while in_flight.next().await.is_some() {}
        Ok(())
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let topics = self.topics.read();
        let distinct_keys: u64 = topics.values().map(|t| t.distinct_keys.get()).sum();
        let sum = MemStats::default();
        sum.add(&self.stats);
        for t in topics.values() {
            sum.add_topic(t);
        }
        let mut m = counter::snapshot("mem_", &sum);
        m.extend(counter::snapshot("mem_", &MemGauges { distinct_keys }));
        m
    }

    /// Every group's messages not handed out (pending, and any held back by a
    /// `Reorder` fault), by `topic/group`.
    async fn held(&self) -> Option<crate::broker::Held> {
        let topics = self.topics.read();
        let places = topics.iter().flat_map(|(name, t)| {
            t.groups.iter().map(move |(g, group)| {
                let st = group.state.lock();
                let n: usize = st
                    .states()
                    .map(|k| k.pending.len() + usize::from(k.held.is_some()))
                    .sum();
                (format!("{name}/{g}"), n as u64)
            })
        });
        Some(crate::broker::Held::from_places(places.collect::<Vec<_>>()))
    }

    async fn close(&self) -> Result<(), BrokerError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::{StreamCounters, TopicSpec};

    struct AckAll;

    #[async_trait]
    impl BatchHandler for AckAll {
        async fn handle(&self, _batch: KeyBatch) -> Disposition {
            Disposition::Ack
        }
    }

    /// Publish `p0, p1, p0, other` to topic `t` (groups g1, g2) of a broker keeping
    /// `keep_idle` idle keys, serve all four messages in each group, and stop.
    /// One topic with `groups`, `keys` keys on as many lanes, reset at setup.
    fn one_topic(name: &str, groups: &[&str], keys: u64) -> Topology {
        Topology {
            topics: vec![TopicSpec {
                name: name.into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
            }],
            keys,
            lanes: keys,
            durability: Durability::Memory,
            dedup_window_sec: 0,
            reset: true,
            sharing: crate::broker::Sharing::ALONE,
        }
    }

    async fn serve_four(keep_idle: usize) -> (Arc<MemBroker>, Vec<Arc<StreamCounters>>) {
        let b = Arc::new(MemBroker {
            keep_idle,
            ..MemBroker::new(MemOptions::default())
        });
        b.setup(&one_topic("t", &["g1", "g2"], 3)).await.unwrap();
        for k in ["p0", "p1", "p0", "other"] {
            b.publish("t", k, &[Bytes::from_static(b"m")])
                .await
                .unwrap();
        }
        let stop = CancellationToken::new();
        let mut counters = Vec::new();
        let mut tasks = Vec::new();
        for g in ["g1", "g2"] {
            let c = Arc::new(StreamCounters::default());
            counters.push(c.clone());
            let (b, stop) = (b.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let opts = ConsumeOptions {
                    batch: 10,
                    lanes: 4,
                    counters: c,
                };
                b.consume("t", g, opts, Arc::new(AckAll), stop).await
            }));
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while counters.iter().any(|c| StreamCounters::get(&c.acked) < 4)
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.cancel();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        (b, counters)
    }

    #[tokio::test]
    async fn idle_keys_beyond_the_kept_ones_are_forgotten() {
        // Three keys served, two kept: the first key to go idle while the group held
        // three was forgotten, the next two were kept.
        let (b, counters) = serve_four(2).await;
        for c in &counters {
            assert_eq!(StreamCounters::get(&c.acked), 4);
        }
        for g in ["g1", "g2"] {
            let st = b.group("t", g).unwrap();
            let st = st.state.lock();
            assert_eq!(st.keys.len(), 2, "{g}");
            assert!(st.states().all(|k| k.pending.is_empty() && !k.in_flight));
        }
        // A kept key that comes back is served from its kept state; nothing is added.
        let kept: Vec<Arc<str>> = b
            .group("t", "g1")
            .unwrap()
            .state
            .lock()
            .keys
            .keys()
            .cloned()
            .collect();
        b.publish("t", &kept[0], &[Bytes::from_static(b"m")])
            .await
            .unwrap();
        assert_eq!(b.group("t", "g1").unwrap().state.lock().keys.len(), 2);
        assert_eq!(b.counters()["mem_distinct_keys"], 3);
    }

    #[tokio::test]
    async fn the_broker_counts_every_stream_and_keeps_the_counts_over_a_reset() {
        let (b, _) = serve_four(4096).await;
        let c = b.counters();
        // Four publishes, each delivered to and acked by both groups.
        assert_eq!(
            (
                c["mem_published"],
                c["mem_delivered"],
                c["mem_acked"],
                c["mem_refused"]
            ),
            (4, 8, 8, 0),
            "{c:?}"
        );
        // A setup with reset drops the topics; what they counted stays counted.
        b.setup(&one_topic("u", &["g"], 1)).await.unwrap();
        b.publish("u", "p0", &[Bytes::from_static(b"m")])
            .await
            .unwrap();
        let c = b.counters();
        assert_eq!((c["mem_published"], c["mem_acked"]), (5, 8), "{c:?}");
    }

    #[tokio::test]
    async fn idle_keys_are_forgotten_and_distinct_keys_counted_once() {
        // No idle key kept: every key is forgotten once served.
        let (b, counters) = serve_four(0).await;
        for c in &counters {
            assert_eq!(StreamCounters::get(&c.acked), 4);
            assert!(StreamCounters::get(&c.ack_calls) > 0);
        }
        // Three distinct keys over both groups, each counted once.
        assert_eq!(b.counters()["mem_distinct_keys"], 3);
        // Nothing pending: no group keeps a key's state.
        for g in ["g1", "g2"] {
            assert!(b.group("t", g).unwrap().state.lock().keys.is_empty(), "{g}");
        }
        // A key that comes back is served again and not counted twice.
        b.publish("t", "p1", &[Bytes::from_static(b"m")])
            .await
            .unwrap();
        assert_eq!(b.counters()["mem_distinct_keys"], 3);
        assert_eq!(
            b.group("t", "g1").unwrap().state.lock().keys.len(),
            1,
            "re-created on publish"
        );
    }

    /// `broker_stats` keys as they were hand-listed before the snapshot was derived.
    #[test]
    fn snapshot_keys_are_unchanged() {
        let b = MemBroker::new(MemOptions::default());
        let keys: Vec<String> = b.counters().into_keys().collect();
        assert_eq!(
            keys,
            [
                "mem_acked",
                "mem_delivered",
                "mem_distinct_keys",
                "mem_faults_applied",
                "mem_published",
                "mem_refused",
            ]
        );
    }

    #[test]
    fn census_tells_numbered_keys_from_others() {
        let mut c = KeyCensus::default();
        assert!(c.insert("p0"));
        assert!(!c.insert("p0"));
        assert!(c.insert("p999999"));
        assert!(c.insert("p"));
        assert!(!c.insert("p"));
        assert!(c.insert("l7"));
        assert!(c.insert("p01x"));
        // A leading zero is another key, not p1.
        assert!(c.insert("p1"));
        assert!(c.insert("p01"));
    }
}
