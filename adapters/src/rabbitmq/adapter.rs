//! The RabbitMQ adapter (lapin 4).
//!
//! Layout (every name starts with `cb.<topic>`, so reset can find all of a run's
//! objects whatever lane count created them):
//!
//! * **lane-queues**: per topic one durable `direct` exchange `cb.<topic>`; per
//!   (topic, group, lane) one durable queue `cb.<topic>.<group>.l<lane>` bound with
//!   routing key `l<lane>`. The client picks the lane with FNV-1a (`lanes::lane_of`)
//!   over `min(lanes, keys)` lanes. One publish per message reaches the lane queue of
//!   every group (the broker copies it into one queue per group).
//! * **hash-exchange**: per topic one durable `fanout` exchange `cb.<topic>`; per
//!   (topic, group) an `x-consistent-hash` exchange `cb.<topic>.<group>.hash` bound
//!   to the fanout (exchange-to-exchange) and to `queues_per_group` queues
//!   `cb.<topic>.<group>.h<i>` (weight 1 each). Routing key = the ordering key, so
//!   the broker places keys. Again one client publish per message; the broker
//!   enqueues one copy per group.
//!
//! In both idioms one key lives in exactly one queue per group, and each queue has
//! exactly one consumer (its own channel, so a multiple-ack never touches another
//! consumer's deliveries). A consumer gathers up to `batch` deliveries (first one
//! blocking, then `linger`), groups them by key (AMQP `message_id`), runs the keys
//! concurrently and acks the whole set with one multiple-ack. If any key-batch was
//! refused, the acked key-batches are acked one delivery at a time and the channel is
//! closed: the broker requeues every unacked delivery of that consumer (the refused
//! ones *and* any later ones of the same key already prefetched) at their original
//! positions, so per-key order survives the redelivery. The channel is then reopened.
//!
//! Publishes are persistent, confirmed and `mandatory`: a message no queue takes (a
//! binding or queue not there, as after a restart that has not recovered it) comes
//! back with `basic.return` before its `basic.ack`, and its batch's publish fails
//! (`rabbit_returned`) instead of counting as landed. lapin pairs a return with the
//! first confirm a (multiple) ack completes, which may be another batch's; the
//! payload tells whose it is, and the batch that published it refuses itself when it
//! finds it among the returns handed to others. Every return is counted when it
//! arrives, so a batch whose confirms were all read before the other batch read its
//! own, and which is not caught, still shows in the count.
//!
//! A cluster: `rabbitmq.nodes` lists the other nodes. Every connection dials a node
//! and, when that fails or the connection is later lost, the next one in turn (`url`,
//! `nodes[0]`, …); consumer connection `i` starts on node `i mod n`. Quorum queues
//! are declared without `x-quorum-initial-group-size`: the server's default
//! (`quorum_cluster_size`, 3) members, led from the node the setup connection is on.
//! With `rabbitmq.management_url`, [`Broker::placement`] reads the management API
//! (rabbitmq/management.rs).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeBindOptions, ExchangeDeclareOptions, ExchangeDeleteOptions,
    QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ExchangeKind};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::cost;
use super::options::{Idiom, QueueType, RabbitOptions};
use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, Delivery, DeliveryGuarantee, Description, Disposition,
    Durability, FanOut, KeyBatch, StreamCounters, Topology,
};
use crate::counter::{self, Counter, CounterMap};
use crate::error::BrokerError;
use crate::lanes::{fnv1a32, lane_of};

/// Timeout of one control operation (connect, declare, channel open / close).
const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// Timeout of one connect when there are other nodes to try (`rabbitmq.nodes`): a
/// node that does not answer must not hold a reconnect for `OP_TIMEOUT`.
const NODE_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// With several loaders sharing the queues: how long a loader waits before it
/// registers as a standby consumer on the queues that are another loader's to serve.
const STANDBY_DELAY: Duration = Duration::from_secs(2);

/// How long the CLI may take (reset listing, cost snapshot).
const CTL_TIMEOUT: Duration = Duration::from_secs(30);

/// Adapter counters (`broker_stats`, every key prefixed `rabbit_`).
#[derive(Debug, Default, Serialize)]
struct Stats {
    logical_published: Counter,
    client_publishes: Counter,
    broker_copies: Counter,
    confirm_nacks: Counter,
    /// Publishes the broker returned as unroutable (`mandatory`): no queue took them.
    returned: Counter,
    publish_errors: Counter,
    deliveries: Counter,
    acked: Counter,
    refused: Counter,
    ack_errors: Counter,
    receive_errors: Counter,
    redelivered: Counter,
    multiple_acks: Counter,
    single_acks: Counter,
    channel_reopens: Counter,
    refusal_channel_closes: Counter,
    publish_reconnects: Counter,
    consumer_reconnects: Counter,
    gathered_sets: Counter,
    reset_deleted_queues: Counter,
    reset_deleted_exchanges: Counter,
    /// Class → count (`rabbit_errors_<class>`).
    errors: CounterMap,
}

impl Stats {
    fn error(&self, e: &BrokerError) {
        self.errors.inc(e.class().name());
    }
}

/// What the snapshot adds to the counters: the configuration, and what setup built
/// (absent before setup).
#[derive(Serialize)]
struct Gauges {
    publish_channels: u64,
    quorum: u64,
    queues: Option<u64>,
    queues_per_group: Option<u64>,
    consumer_connections: Option<u64>,
}

/// What `setup` built, read by `publish` and `consume`.
#[derive(Debug)]
struct Layout {
    idiom: Idiom,
    /// The loaders consuming every queue together, and which one this is.
    sharing: crate::broker::Sharing,
    /// Lanes per group (lane-queues) or queues per group (hash-exchange).
    queues_per_group: u64,
    topics: HashMap<String, TopicLayout>,
    physical_queues: u64,
    consumer_connections: usize,
}

#[derive(Debug)]
struct TopicLayout {
    exchange: String,
    groups: Vec<(String, Vec<String>)>,
}

/// One consumer connection, shared by up to `channels_per_connection` queue loops.
#[derive(Debug)]
struct ConnSlot {
    index: usize,
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// The node (0 = `url`, `i` = `nodes[i - 1]`) the connection is on, or starts on:
    /// `index mod n` at first, the next node's after a lost connection.
    node: AtomicUsize,
}

/// The publish connection and its confirm-mode channels.
#[derive(Debug, Default)]
struct PubState {
    conn: Option<Arc<Connection>>,
    /// The node the connection is on.
    node: usize,
    channels: Vec<Option<Channel>>,
}

/// After a failed connect, no new attempt before `retry_at` (50 ms doubling to 1 s):
/// callers get the last failure at once. Without it every publish retry and consumer
/// of a dead node opened a connection of its own, about a thousand a second, and
/// each failed attempt left memory behind in the client: the loader grew by 12 MB/s
/// while RabbitMQ was down (loader/tests/faults_real.rs, docs/reliability.md).
#[derive(Debug)]
struct ConnectGate {
    retry_at: Option<std::time::Instant>,
    backoff: Duration,
    last: String,
}

const CONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const CONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);

impl Default for ConnectGate {
    fn default() -> Self {
        ConnectGate {
            retry_at: None,
            backoff: CONNECT_BACKOFF_MIN,
            last: String::new(),
        }
    }
}

#[derive(Debug)]
struct Inner {
    opts: RabbitOptions,
    /// Every password of the section's URLs, replaced by `***` in every error text.
    secrets: Vec<String>,
    /// Makes this adapter's connection names its own (`crossbench-publish#<tag>`), so
    /// the management API's connection listing tells them apart from another
    /// loader's: the process id and the adapter's number in the process.
    tag: String,
    management: Option<super::management::Management>,
    layout: RwLock<Option<Arc<Layout>>>,
    publisher: Mutex<PubState>,
    pub_reconnect: tokio::sync::Mutex<()>,
    /// One per node: a node that failed is not dialed again before its backoff.
    connect_gate: Mutex<Vec<ConnectGate>>,
    slots: RwLock<Vec<Arc<ConnSlot>>>,
    next_slot: AtomicUsize,
    stats: Stats,
    /// Payloads of messages the broker returned unroutable whose confirm lapin handed
    /// to another batch's publish (it pairs a return with whichever confirm of a
    /// multiple ack completes first): the batch that published one refuses itself.
    returned_elsewhere: Mutex<Vec<Vec<u8>>>,
}

/// What setup built for one group of one topic.
#[derive(Debug, Clone)]
pub(super) struct Built {
    pub idiom: Idiom,
    /// The topic's exchange (direct for lane queues, fanout for the hash idiom).
    pub exchange: String,
    /// Lanes (lane-queues) or queues behind the hash exchange, per group.
    pub queues_per_group: u64,
    /// The group's queues.
    pub queues: Vec<String>,
    pub consumer_connections: usize,
}

/// The RabbitMQ broker adapter.
#[derive(Debug)]
pub struct RabbitBroker {
    inner: Arc<Inner>,
}

/// Adapters made in this process, for [`Inner::tag`].
static ADAPTERS: AtomicUsize = AtomicUsize::new(0);

impl RabbitBroker {
    pub fn new(options: RabbitOptions) -> Result<Self, BrokerError> {
        crate::options::Section::validate(&options)?;
        let management = super::management::Management::new(&options)?;
        let tag = format!(
            "{}.{}",
            std::process::id(),
            ADAPTERS.fetch_add(1, Ordering::Relaxed)
        );
        Ok(RabbitBroker {
            inner: Arc::new(Inner {
                secrets: options.secrets(),
                tag,
                management,
                connect_gate: Mutex::new(
                    (0..options.node_count())
                        .map(|_| ConnectGate::default())
                        .collect(),
                ),
                opts: options,
                layout: RwLock::new(None),
                publisher: Mutex::new(PubState::default()),
                pub_reconnect: tokio::sync::Mutex::new(()),
                slots: RwLock::new(Vec::new()),
                next_slot: AtomicUsize::new(0),
                stats: Stats::default(),
                returned_elsewhere: Mutex::new(Vec::new()),
            }),
        })
    }

    /// What setup built for `group` of `topic` (the bare loop's objects), if it ran.
    pub(super) fn built(&self, topic: &str, group: &str) -> Option<Built> {
        let layout = self.inner.layout.read().clone()?;
        let t = layout.topics.get(topic)?;
        let queues = t.groups.iter().find(|(g, _)| g == group)?.1.clone();
        Some(Built {
            idiom: layout.idiom,
            exchange: t.exchange.clone(),
            queues_per_group: layout.queues_per_group,
            queues,
            consumer_connections: layout.consumer_connections,
        })
    }

    /// Queue depths, memory and alarms of this run's queues via `rabbitmqctl`
    /// (`None` prefixes = every topic of the last setup).
    pub fn cost_snapshot(&self) -> Result<cost::Snapshot, String> {
        let prefixes = self.inner.prefixes();
        cost::snapshot(&self.inner.opts.rabbitmqctl, &prefixes, CTL_TIMEOUT)
    }
}

fn sstr(s: &str) -> ShortString {
    ShortString::from(s)
}

async fn timed<T, F>(what: &str, f: F) -> Result<T, String>
where
    F: std::future::Future<Output = lapin::Result<T>>,
{
    match tokio::time::timeout(OP_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer within {OP_TIMEOUT:?}")),
    }
}

impl Inner {
    fn redact(&self, text: impl Into<String>) -> String {
        let mut t = text.into();
        for p in &self.secrets {
            t = t.replace(p.as_str(), "***");
        }
        t
    }

    fn err_conn(&self, text: impl Into<String>) -> BrokerError {
        let e = BrokerError::Connection(self.redact(text));
        self.stats.error(&e);
        e
    }

    fn err_refused(&self, text: impl Into<String>) -> BrokerError {
        let e = BrokerError::Refused(self.redact(text));
        self.stats.error(&e);
        e
    }

    fn prefixes(&self) -> Vec<String> {
        match &*self.layout.read() {
            Some(l) => l.topics.keys().map(|t| format!("cb.{t}")).collect(),
            None => vec!["cb.".into()],
        }
    }

    /// A connection named `crossbench-<name>#<tag>` to node `start` (0 = `url`, `i` =
    /// `nodes[i - 1]`) or, when that fails, the next node in turn, and the node it is
    /// on. A node that failed is skipped until its backoff ran out ([`ConnectGate`]);
    /// when every node failed or waits, the error says why for each.
    async fn connect(&self, name: &str, start: usize) -> Result<(Connection, usize), BrokerError> {
        let n = self.opts.node_count();
        let timeout = if n > 1 {
            NODE_CONNECT_TIMEOUT
        } else {
            OP_TIMEOUT
        };
        let named = format!("{name}#{}", self.tag);
        let mut failures = Vec::new();
        for k in 0..n {
            let node = (start + k) % n;
            {
                let gates = self.connect_gate.lock();
                let g = &gates[node];
                if let Some(at) = g.retry_at {
                    let now = std::time::Instant::now();
                    if now < at {
                        failures.push(format!(
                            "{} (next connect attempt in {} ms)",
                            g.last,
                            (at - now).as_millis()
                        ));
                        continue;
                    }
                }
            }
            let at = self.redact(self.opts.node_url(node));
            let failure =
                match tokio::time::timeout(timeout, super::dial::open(&self.opts, node, &named))
                    .await
                {
                    Ok(Ok(c)) => {
                        self.connect_gate.lock()[node] = ConnectGate::default();
                        return Ok((c, node));
                    }
                    Ok(Err(e)) => match super::dial::failure(&self.opts, &e, &at) {
                        // The scenario's to fix: no retry can help.
                        BrokerError::Config { field, message } => {
                            let e = BrokerError::Config {
                                field,
                                message: self.redact(&message),
                            };
                            self.stats.error(&e);
                            return Err(e);
                        }
                        BrokerError::Connection(text) => text,
                        other => other.to_string(),
                    },
                    Err(_) => format!("connecting to {at} timed out after {timeout:?}"),
                };
            let failure = self.redact(&failure);
            {
                let mut gates = self.connect_gate.lock();
                let g = &mut gates[node];
                g.retry_at = Some(std::time::Instant::now() + g.backoff);
                g.backoff = (g.backoff * 2).min(CONNECT_BACKOFF_MAX);
                g.last = failure.clone();
            }
            failures.push(failure);
        }
        Err(self.err_conn(failures.join("; ")))
    }

    /// The names of the connections the adapter holds open now, in its order: the
    /// publish connection, then the consumer connections by index. A consumer
    /// connection being reopened (its lock held) is left out.
    fn open_connection_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self
            .publisher
            .lock()
            .conn
            .as_ref()
            .is_some_and(|c| c.status().connected())
        {
            names.push(format!("crossbench-publish#{}", self.tag));
        }
        for slot in self.slots.read().iter() {
            let open = slot
                .conn
                .try_lock()
                .is_ok_and(|c| c.as_ref().is_some_and(|c| c.status().connected()));
            if open {
                names.push(format!("crossbench-consume-{}#{}", slot.index, self.tag));
            }
        }
        names
    }

    /// Where the last setup's queues lead and are kept, and the node of each open
    /// connection, from the management API (`None` without `management_url` or
    /// before setup). The queues are one listing of the vhost, the connections
    /// another, asked at once, each bounded by [`super::management::TIMEOUT`]; a
    /// listing that failed leaves every queue unanswered (with why), or `connected`
    /// empty. A connection the listing does not show (the management database learns
    /// of a new connection within a few seconds) or shows twice is left out of
    /// `connected`.
    async fn placement(&self) -> Option<crate::placement::Placement> {
        let m = self.management.as_ref()?;
        let layout = self.layout.read().clone()?;
        let mut queues: Vec<String> = layout
            .topics
            .values()
            .flat_map(|t| t.groups.iter().flat_map(|(_, q)| q.iter().cloned()))
            .collect();
        queues.sort();
        let names = self.open_connection_names();
        let (listing, conns) = futures::join!(m.queues(), m.connections());
        let mut p = match listing {
            Ok(v) => super::management::place_queues(&v, &queues),
            Err(why) => {
                let why = self.redact(why);
                crate::placement::Placement {
                    unanswered: queues.into_iter().map(|q| (q, why.clone())).collect(),
                    ..Default::default()
                }
            }
        };
        if let Ok(c) = conns {
            p.connected = super::management::connected(&c, &names);
        }
        Some(p)
    }

    /// What the management API says of the cluster, for the provenance: its nodes and,
    /// for quorum queues, how many members the first queue has.
    async fn cluster_provenance(&self, first_queue: Option<&str>, p: &mut crate::Provenance) {
        let Some(m) = &self.management else {
            return;
        };
        match m.nodes().await {
            Ok(v) => p.report("cluster_nodes", super::management::nodes_text(&v)),
            Err(why) => p.not_reported("cluster nodes", self.redact(why)),
        }
        if self.opts.queue_type != QueueType::Quorum {
            return;
        }
        let Some(q) = first_queue else {
            return p.not_reported("queue replicas", "setup declared no queue");
        };
        match m.queue(q).await {
            Ok(v) => match super::management::members(&v) {
                Some(n) => {
                    p.setting("queue_replicas", n.to_string());
                    p.note(format!(
                        "queue_replicas: the members of {q} as the management API answered at setup"
                    ));
                }
                None => p.not_reported("queue replicas", format!("{q} has no `members`")),
            },
            Err(why) => p.not_reported("queue replicas", self.redact(why)),
        }
    }

    /// Ready messages in every queue of the last setup, by passive declares on a
    /// connection of its own. `None` when the node cannot be asked, or one queue's
    /// declare fails (then it cannot say what that queue holds).
    async fn held(&self) -> Option<crate::broker::Held> {
        let layout = self.layout().ok()?;
        let (conn, _) = self.connect("held", 0).await.ok()?;
        let counted = async {
            let ch = timed("open channel", conn.create_channel()).await.ok()?;
            let mut places = Vec::new();
            for t in layout.topics.values() {
                for (_, queues) in &t.groups {
                    for q in queues {
                        let passive = QueueDeclareOptions {
                            passive: true,
                            ..Default::default()
                        };
                        let queue = timed(
                            "queue.declare (passive)",
                            ch.queue_declare(sstr(q), passive, FieldTable::default()),
                        )
                        .await
                        .ok()?;
                        places.push((q.clone(), u64::from(queue.message_count())));
                    }
                }
            }
            Some(crate::broker::Held::from_places(places))
        }
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.close(200, sstr("held"))).await;
        counted
    }

    fn layout(&self) -> Result<Arc<Layout>, BrokerError> {
        self.layout
            .read()
            .clone()
            .ok_or_else(|| BrokerError::Other("rabbitmq: setup has not run".into()))
    }

    // ---------------------------------------------------------------- publish

    /// A live confirm-mode channel for slot `idx`, reconnecting when needed. Never
    /// holds a lock across a network wait except the reconnect lock.
    async fn pub_channel(&self, idx: usize) -> Result<Channel, BrokerError> {
        {
            let st = self.publisher.lock();
            if let (Some(c), Some(Some(ch))) = (&st.conn, st.channels.get(idx)) {
                if c.status().connected() && ch.status().connected() {
                    return Ok(ch.clone());
                }
            }
        }
        let _guard = self.pub_reconnect.lock().await;
        // Someone may have repaired it while we waited.
        let (conn, need_conn) = {
            let st = self.publisher.lock();
            if let (Some(c), Some(Some(ch))) = (&st.conn, st.channels.get(idx)) {
                if c.status().connected() && ch.status().connected() {
                    return Ok(ch.clone());
                }
            }
            match &st.conn {
                Some(c) if c.status().connected() => (Some(c.clone()), false),
                _ => (None, true),
            }
        };
        let conn = match conn {
            Some(c) if !need_conn => c,
            _ => {
                // A lost connection reconnects to the next node first.
                let (had, start) = {
                    let st = self.publisher.lock();
                    (st.conn.is_some(), st.node + usize::from(st.conn.is_some()))
                };
                let (c, node) = self.connect("publish", start).await?;
                let c = Arc::new(c);
                if had {
                    self.stats.publish_reconnects.inc();
                }
                let mut st = self.publisher.lock();
                st.conn = Some(c.clone());
                st.node = node;
                st.channels = vec![None; self.opts.publish_channels];
                c
            }
        };
        let ch = timed("open publish channel", conn.create_channel())
            .await
            .map_err(|e| self.err_conn(e))?;
        timed(
            "confirm.select",
            ch.confirm_select(ConfirmSelectOptions::default()),
        )
        .await
        .map_err(|e| self.err_conn(e))?;
        let mut st = self.publisher.lock();
        if st.channels.len() != self.opts.publish_channels {
            st.channels = vec![None; self.opts.publish_channels];
        }
        st.channels[idx] = Some(ch.clone());
        Ok(ch)
    }

    fn pub_channel_broken(&self, idx: usize, ch: &Channel) {
        let mut st = self.publisher.lock();
        if let Some(slot) = st.channels.get_mut(idx) {
            if slot.as_ref().is_some_and(|c| c.id() == ch.id()) {
                *slot = None;
            }
        }
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let layout = self.layout()?;
        let t = layout
            .topics
            .get(topic)
            .ok_or_else(|| BrokerError::UnknownTopic(topic.to_string()))?;
        let routing = match layout.idiom {
            Idiom::LaneQueues => format!("l{}", lane_of(key, layout.queues_per_group)),
            Idiom::HashExchange => key.to_string(),
        };
        let idx = fnv1a32(key.as_bytes()) as usize % self.opts.publish_channels;
        let ch = self.pub_channel(idx).await?;
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_message_id(sstr(key));
        let exchange = sstr(&t.exchange);
        let rk = sstr(&routing);
        // Pipelined: every publish of the batch goes out before any confirm is awaited.
        // Mandatory: a message no queue takes (a binding not yet recovered after a
        // restart) comes back, and is a failed publish; without it the broker confirms
        // the message it dropped.
        let mut confirms = Vec::with_capacity(payloads.len());
        for p in payloads {
            match ch
                .basic_publish(
                    exchange.clone(),
                    rk.clone(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    p,
                    props.clone(),
                )
                .await
            {
                Ok(c) => confirms.push(c),
                Err(e) => {
                    self.stats.publish_errors.add(payloads.len() as u64);
                    self.pub_channel_broken(idx, &ch);
                    return Err(self.err_conn(format!("basic.publish to {}: {e}", t.exchange)));
                }
            }
        }
        self.stats.client_publishes.add(payloads.len() as u64);
        let mut nacked = 0u64;
        let mut returned = 0u64;
        let mut failed: Option<String> = None;
        for c in confirms {
            match tokio::time::timeout(OP_TIMEOUT, c).await {
                Ok(Ok(Confirmation::Ack(None))) => {}
                Ok(Ok(Confirmation::Ack(Some(r)))) => {
                    // Counted here, whoever published it.
                    self.stats.returned.inc();
                    if payloads.iter().any(|p| p[..] == r.delivery.data[..]) {
                        returned += 1;
                    } else {
                        self.returned_elsewhere.lock().push(r.delivery.data);
                    }
                }
                Ok(Ok(Confirmation::Nack(_))) => nacked += 1,
                Ok(Ok(Confirmation::NotRequested)) => {
                    failed.get_or_insert_with(|| "channel not in confirm mode".into());
                }
                Ok(Err(e)) => {
                    failed.get_or_insert_with(|| format!("publisher confirm: {e}"));
                }
                Err(_) => {
                    failed.get_or_insert_with(|| {
                        format!("publisher confirm not received within {OP_TIMEOUT:?}")
                    });
                }
            }
        }
        if let Some(f) = failed {
            self.stats.publish_errors.add(payloads.len() as u64);
            self.pub_channel_broken(idx, &ch);
            return Err(self.err_conn(f));
        }
        {
            // A return of ours that lapin handed to another batch's confirm.
            let mut elsewhere = self.returned_elsewhere.lock();
            if !elsewhere.is_empty() {
                let before = elsewhere.len();
                elsewhere.retain(|d| !payloads.iter().any(|p| p[..] == d[..]));
                returned += (before - elsewhere.len()) as u64;
            }
        }
        if nacked > 0 || returned > 0 {
            self.stats.confirm_nacks.add(nacked);
            self.stats.publish_errors.add(payloads.len() as u64);
            let why = if nacked > 0 {
                format!(
                    "{nacked} of {} publishes to {} nacked by the broker",
                    payloads.len(),
                    t.exchange
                )
            } else {
                format!(
                    "{returned} of {} publishes to {} returned unroutable (no queue bound for routing key {routing})",
                    payloads.len(),
                    t.exchange
                )
            };
            return Err(self.err_refused(why));
        }
        let n = payloads.len() as u64;
        self.stats.logical_published.add(n);
        self.stats.broker_copies.add(n * t.groups.len() as u64);
        Ok(())
    }

    // ---------------------------------------------------------------- consume

    /// A fresh channel on consumer connection `slot`, reconnecting it when it is gone.
    async fn consumer_channel(&self, slot: &ConnSlot) -> Result<Channel, BrokerError> {
        let conn = {
            let mut g = slot.conn.lock().await;
            let alive = g.as_ref().is_some_and(|c| c.status().connected());
            if !alive {
                let had = g.is_some();
                // A lost connection reconnects to the next node first.
                let start = slot.node.load(Ordering::Relaxed) + usize::from(had);
                let (c, node) = self
                    .connect(&format!("consume-{}", slot.index), start)
                    .await?;
                slot.node.store(node, Ordering::Relaxed);
                if had {
                    self.stats.consumer_reconnects.inc();
                }
                *g = Some(Arc::new(c));
            }
            g.clone().expect("just set")
        };
        timed("open consumer channel", conn.create_channel())
            .await
            .map_err(|e| self.err_conn(e))
    }

    async fn close_channel(&self, ch: &Channel) {
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            ch.close(200, sstr("crossbench: requeue")),
        )
        .await;
    }

    /// One queue, one consumer, until `stop`. Never returns early: every failure is
    /// counted and the channel (and, when needed, the connection) reopened.
    async fn queue_loop(
        self: Arc<Self>,
        queue: String,
        slot: Arc<ConnSlot>,
        options: ConsumeOptions,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
    ) {
        let batch = options.batch.max(1);
        let prefetch = if self.opts.prefetch == 0 {
            batch.min(u16::MAX as usize) as u16
        } else {
            self.opts.prefetch
        };
        let counters = options.counters.clone();
        let mut backoff = Duration::from_millis(100);
        let mut first_open = true;
        while !stop.is_cancelled() {
            if !first_open {
                counters.reconnects.inc();
                self.stats.channel_reopens.inc();
            }
            first_open = false;
            let opened = async {
                let ch = self.consumer_channel(&slot).await?;
                timed(
                    "basic.qos",
                    ch.basic_qos(prefetch, BasicQosOptions::default()),
                )
                .await
                .map_err(|e| self.err_conn(e))?;
                let consumer = timed(
                    "basic.consume",
                    ch.basic_consume(
                        sstr(&queue),
                        sstr(""),
                        BasicConsumeOptions::default(),
                        FieldTable::default(),
                    ),
                )
                .await
                .map_err(|e| self.err_conn(format!("{queue}: {e}")))?;
                Ok::<_, BrokerError>((ch, consumer))
            }
            .await;
            let (ch, mut consumer) = match opened {
                Ok(x) => x,
                Err(_) => {
                    counters.receive_errors.inc();
                    self.stats.receive_errors.inc();
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            backoff = Duration::from_millis(100);
            // Gather / process / ack until the channel breaks or we stop.
            'sets: loop {
                let mut set: Vec<lapin::message::Delivery> = Vec::with_capacity(batch);
                let mut broken = false;
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => { break 'sets; }
                    d = consumer.next() => match d {
                        Some(Ok(d)) => set.push(d),
                        Some(Err(_)) | None => { broken = true; }
                    }
                }
                if !broken && set.len() < batch {
                    let deadline = tokio::time::Instant::now() + self.opts.linger;
                    while set.len() < batch {
                        tokio::select! {
                            biased;
                            d = consumer.next() => match d {
                                Some(Ok(d)) => set.push(d),
                                Some(Err(_)) | None => { broken = true; break; }
                            },
                            _ = tokio::time::sleep_until(deadline) => break,
                        }
                    }
                }
                if broken {
                    // Deliveries gathered before the break cannot be acked any more
                    // (their channel is gone); the broker requeues them.
                    counters.receive_errors.inc();
                    self.stats.receive_errors.inc();
                    self.stats.error(&BrokerError::Connection(String::new()));
                    break 'sets;
                }
                if stop.is_cancelled() {
                    break 'sets;
                }
                match self.process_set(&ch, set, &handler, &counters).await {
                    SetEnd::Continue => {}
                    SetEnd::Reopen => break 'sets,
                }
            }
            // Closing requeues whatever this consumer still holds unacked.
            self.close_channel(&ch).await;
        }
    }

    async fn process_set(
        &self,
        ch: &Channel,
        set: Vec<lapin::message::Delivery>,
        handler: &Arc<dyn BatchHandler>,
        counters: &Arc<StreamCounters>,
    ) -> SetEnd {
        let total = set.len() as u64;
        self.stats.deliveries.add(total);
        self.stats.gathered_sets.inc();
        let last_tag = set.iter().map(|d| d.delivery_tag).max().unwrap_or(0);
        // Group by key, keeping first-appearance order and per-key delivery order.
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut groups: Vec<(Arc<str>, Vec<u64>, Vec<Delivery>)> = Vec::new();
        let mut redelivered = 0u64;
        for d in set {
            let key = d
                .properties
                .message_id()
                .as_ref()
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|| d.routing_key.as_str().to_string());
            if d.redelivered {
                redelivered += 1;
            }
            let i = *index.entry(key.clone()).or_insert_with(|| {
                groups.push((Arc::from(key.as_str()), Vec::new(), Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(d.delivery_tag);
            groups[i].2.push(Delivery {
                payload: Bytes::from(d.data),
                redelivered: d.redelivered,
            });
        }
        if redelivered > 0 {
            counters.redelivered.add(redelivered);
            self.stats.redelivered.add(redelivered);
        }
        // Every key of the set concurrently; one key appears once per set.
        let results = futures::future::join_all(groups.iter().map(|(k, _, msgs)| {
            handler.handle(KeyBatch {
                key: k.clone(),
                messages: msgs.clone(),
            })
        }))
        .await;
        let refused: u64 = groups
            .iter()
            .zip(&results)
            .filter(|(_, r)| **r == Disposition::Refuse)
            .map(|(g, _)| g.1.len() as u64)
            .sum();
        if refused == 0 {
            let r = timed(
                "basic.ack",
                ch.basic_ack(last_tag, BasicAckOptions { multiple: true }),
            )
            .await;
            return match r {
                Ok(()) => {
                    self.stats.multiple_acks.inc();
                    self.stats.acked.add(total);
                    counters.acked.add(total);
                    SetEnd::Continue
                }
                Err(e) => {
                    let _ = self.err_conn(e);
                    self.stats.ack_errors.add(total);
                    counters.ack_errors.add(total);
                    SetEnd::Reopen
                }
            };
        }
        // Some key-batch was refused: ack the accepted deliveries one by one, then
        // close the channel so the broker requeues everything else this consumer holds
        // (refused batches and later prefetched deliveries) in queue order.
        self.stats.refused.add(refused);
        counters.refused.add(refused);
        for ((_, tags, _), r) in groups.iter().zip(&results) {
            if *r != Disposition::Ack {
                continue;
            }
            for &tag in tags {
                match timed(
                    "basic.ack",
                    ch.basic_ack(tag, BasicAckOptions { multiple: false }),
                )
                .await
                {
                    Ok(()) => {
                        self.stats.single_acks.inc();
                        self.stats.acked.inc();
                        counters.acked.inc();
                    }
                    Err(e) => {
                        let _ = self.err_conn(e);
                        self.stats.ack_errors.inc();
                        counters.ack_errors.inc();
                    }
                }
            }
        }
        self.stats.refusal_channel_closes.inc();
        SetEnd::Reopen
    }

    // ---------------------------------------------------------------- setup

    async fn admin_channels(&self, conn: &Connection) -> Result<Vec<Channel>, BrokerError> {
        let mut v = Vec::new();
        for _ in 0..self.opts.setup_channels {
            v.push(
                timed("open setup channel", conn.create_channel())
                    .await
                    .map_err(|e| self.err_conn(e))?,
            );
        }
        Ok(v)
    }

    /// Delete every queue and exchange whose name starts with `cb.<topic>` for a topic
    /// of `topology`. Lists them with `rabbitmqctl`; without the CLI it deletes the
    /// names a generous range of lane counts would have produced.
    async fn reset(
        &self,
        conn: &Connection,
        topology: &Topology,
    ) -> Result<Vec<String>, BrokerError> {
        let mut notes = Vec::new();
        let owned = |name: &str| {
            topology.topics.iter().any(|t| {
                let base = format!("cb.{}", t.name);
                name == base || name.starts_with(&format!("{base}."))
            })
        };
        let listed = match &self.management {
            // The cluster's listing, in the URL's vhost.
            Some(m) => {
                async {
                    let q = m.names("queues").await?;
                    let x = m.names("exchanges").await?;
                    Ok::<_, String>((q, x))
                }
                .await
            }
            None => {
                let ctl = self.opts.rabbitmqctl.clone();
                tokio::task::spawn_blocking(move || {
                    let q = cost::list_names(&ctl, "queues", CTL_TIMEOUT)?;
                    let x = cost::list_names(&ctl, "exchanges", CTL_TIMEOUT)?;
                    Ok::<_, String>((q, x))
                })
                .await
                .map_err(|e| BrokerError::Other(format!("reset listing task: {e}")))?
            }
        };
        let (queues, exchanges): (Vec<String>, Vec<String>) = match listed {
            Ok((q, x)) => (
                q.into_iter().filter(|n| owned(n)).collect(),
                x.into_iter().filter(|n| owned(n)).collect(),
            ),
            Err(e) => {
                let range = topology.lanes.max(topology.keys.min(4096)).max(1024);
                notes.push(format!(
                    "reset could not list queues ({}); deleted lane/hash queue names 0..{range} instead",
                    self.redact(e)
                ));
                let mut q = Vec::new();
                let mut x = Vec::new();
                for t in &topology.topics {
                    x.push(format!("cb.{}", t.name));
                    for g in &t.groups {
                        x.push(format!("cb.{}.{g}.hash", t.name));
                        for i in 0..range {
                            q.push(format!("cb.{}.{g}.l{i}", t.name));
                            q.push(format!("cb.{}.{g}.h{i}", t.name));
                        }
                    }
                }
                (q, x)
            }
        };
        let chans = self.admin_channels(conn).await?;
        let nq = queues.len() as u64;
        let nx = exchanges.len() as u64;
        run_spread(&chans, queues, |ch, name| async move {
            timed(
                "queue.delete",
                ch.queue_delete(sstr(&name), QueueDeleteOptions::default()),
            )
            .await
            .map(|_| ())
        })
        .await
        .map_err(|e| self.err_refused(format!("reset: {e}")))?;
        // Exchanges go one at a time, each topic exchange before the hash exchanges it
        // is bound to. CI once got INTERNAL_ERROR from a concurrent exchange.delete
        // here (RabbitMQ 3.10). The likely cause is a known crash when exchanges joined
        // by an exchange-to-exchange binding are deleted at once (rabbitmq-server#11951,
        // process_deletions finding the other exchange gone); it did not reproduce in
        // 30 resets here, so this removes the concurrency rather than proving the
        // cause. A handful of deletes: serial costs nothing that matters.
        let ch0 = &chans[0];
        for name in delete_order(exchanges) {
            timed(
                "exchange.delete",
                ch0.exchange_delete(sstr(&name), ExchangeDeleteOptions::default()),
            )
            .await
            .map_err(|e| self.err_refused(format!("reset: {e}")))?;
        }
        self.stats.reset_deleted_queues.add(nq);
        self.stats.reset_deleted_exchanges.add(nx);
        for ch in chans {
            self.close_channel(&ch).await;
        }
        Ok(notes)
    }

    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        match (topology.durability, self.opts.queue_type) {
            (Durability::Fsync, QueueType::Classic) => {
                return Err(BrokerError::Config {
                    field: "rabbitmq.queue_type".into(),
                    message: "durability: fsync needs quorum queues (classic queues do not fsync before the confirm); set rabbitmq.queue_type=quorum".into(),
                })
            }
            (Durability::Memory | Durability::None, _) => {
                return Err(BrokerError::Config {
                    field: "durability".into(),
                    message: "the rabbitmq adapter provides default (classic) or fsync (quorum), not memory".into(),
                })
            }
            _ => {}
        }
        let lanes = topology.lanes.min(topology.keys).max(1);
        let idiom = self.opts.idiom;
        let qpg = match idiom {
            Idiom::LaneQueues => lanes,
            Idiom::HashExchange => self.opts.hash_queues(lanes),
        };
        let (conn, setup_node) = self.connect("setup", 0).await?;
        let mut notes = Vec::new();
        if topology.reset {
            notes.extend(self.reset(&conn, topology).await?);
        }
        let chans = self.admin_channels(&conn).await?;
        let mut qargs = FieldTable::default();
        qargs.insert(
            sstr("x-queue-type"),
            AMQPValue::LongString(LongString::from(self.opts.queue_type.name())),
        );
        if topology.sharing.is_shared() {
            // Several loaders consume every queue: one consumer at a time per queue,
            // or a key's messages would be split between two processes.
            qargs.insert(sstr("x-single-active-consumer"), AMQPValue::Boolean(true));
            notes.push(format!(
                "shared by {} loaders: every queue has x-single-active-consumer (one consumer of all the loaders' receives a queue's deliveries)",
                topology.sharing.processes
            ));
        }
        let durable_x = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        let durable_q = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        // Exchanges first (serially: a handful), then queues and bindings spread.
        let mut topics = HashMap::new();
        let mut bindings: Vec<(String, String, String)> = Vec::new(); // (queue, exchange, key)
        let ch0 = &chans[0];
        let mut physical = 0u64;
        for t in &topology.topics {
            let xname = format!("cb.{}", t.name);
            let kind = match idiom {
                Idiom::LaneQueues => ExchangeKind::Direct,
                Idiom::HashExchange => ExchangeKind::Fanout,
            };
            timed(
                "exchange.declare",
                ch0.exchange_declare(sstr(&xname), kind, durable_x, FieldTable::default()),
            )
            .await
            .map_err(|e| {
                self.err_refused(format!(
                    "{xname}: {e} (run with reset, the default, after changing rabbitmq.idiom)"
                ))
            })?;
            let mut groups = Vec::new();
            for g in &t.groups {
                let mut queues = Vec::new();
                match idiom {
                    Idiom::LaneQueues => {
                        for i in 0..qpg {
                            let q = format!("cb.{}.{g}.l{i}", t.name);
                            bindings.push((q.clone(), xname.clone(), format!("l{i}")));
                            queues.push(q);
                        }
                    }
                    Idiom::HashExchange => {
                        let hx = format!("cb.{}.{g}.hash", t.name);
                        timed(
                            "exchange.declare x-consistent-hash",
                            ch0.exchange_declare(
                                sstr(&hx),
                                ExchangeKind::Custom("x-consistent-hash".into()),
                                durable_x,
                                FieldTable::default(),
                            ),
                        )
                        .await
                        .map_err(|e| {
                            self.err_refused(format!(
                                "{hx}: {e} (enable the plugin: rabbitmq-plugins enable rabbitmq_consistent_hash_exchange, or run scripts/provision/rabbitmq.sh)"
                            ))
                        })?;
                        timed(
                            "exchange.bind",
                            ch0.exchange_bind(
                                sstr(&hx),
                                sstr(&xname),
                                sstr(""),
                                ExchangeBindOptions::default(),
                                FieldTable::default(),
                            ),
                        )
                        .await
                        .map_err(|e| self.err_refused(format!("bind {hx} to {xname}: {e}")))?;
                        for i in 0..qpg {
                            let q = format!("cb.{}.{g}.h{i}", t.name);
                            // Binding key = weight on the hash ring.
                            bindings.push((q.clone(), hx.clone(), "1".into()));
                            queues.push(q);
                        }
                    }
                }
                physical += queues.len() as u64;
                groups.push((g.clone(), queues));
            }
            topics.insert(
                t.name.clone(),
                TopicLayout {
                    exchange: xname,
                    groups,
                },
            );
        }
        let qt = self.opts.queue_type.name();
        run_spread(&chans, bindings, |ch, (q, x, k)| {
            let qargs = qargs.clone();
            async move {
                timed(
                    "queue.declare",
                    ch.queue_declare(sstr(&q), durable_q, qargs),
                )
                .await
                .map_err(|e| {
                    format!("{q}: {e} (an existing queue of another type? keep reset on; queue_type={qt})")
                })?;
                timed(
                    "queue.bind",
                    ch.queue_bind(
                        sstr(&q),
                        sstr(&x),
                        sstr(&k),
                        QueueBindOptions::default(),
                        FieldTable::default(),
                    ),
                )
                .await
                .map_err(|e| format!("bind {q}: {e}"))
            }
        })
        .await
        .map_err(|e| self.err_refused(e))?;
        for ch in &chans {
            self.close_channel(ch).await;
        }
        let _ =
            tokio::time::timeout(Duration::from_secs(5), conn.close(200, sstr("setup done"))).await;

        // Consumer connections: enough that none carries more than
        // channels_per_connection consumer channels.
        let need = (physical as usize).div_ceil(self.opts.channels_per_connection);
        let nconn = need.max(self.opts.consumer_connections).max(1);
        {
            let mut slots = self.slots.write();
            if slots.len() < nconn {
                for i in slots.len()..nconn {
                    slots.push(Arc::new(ConnSlot {
                        index: i,
                        conn: tokio::sync::Mutex::new(None),
                        node: AtomicUsize::new(i % self.opts.node_count()),
                    }));
                }
            }
        }
        *self.layout.write() = Some(Arc::new(Layout {
            idiom,
            sharing: topology.sharing,
            queues_per_group: qpg,
            topics,
            physical_queues: physical,
            consumer_connections: nconn,
        }));

        let durability = match self.opts.queue_type {
            QueueType::Quorum => Durability::Fsync,
            QueueType::Classic => Durability::Default,
        };
        notes.push(match self.opts.queue_type {
            QueueType::Quorum => "quorum queues: a publisher confirm follows an fsync of the queue's Raft log (tier fsync)".into(),
            QueueType::Classic => "classic durable queues, persistent messages (delivery_mode 2), publisher confirms: the confirm follows the write to the message store / queue index, not an fsync per message (tier default)".into(),
        });
        notes.push(format!(
            "idiom {}: {} queues per group ({} lanes requested, clamped to {} keys); one consumer and one channel per queue over {nconn} consumer connections + 1 publish connection with {} confirm channels",
            idiom.name(),
            qpg,
            topology.lanes,
            topology.keys,
            self.opts.publish_channels
        ));
        notes.push(match idiom {
            Idiom::LaneQueues => "key placement: client-side FNV-1a 32 (key) mod lanes; hashing lanes=keys leaves about a third of the lane queues empty and doubles keys up on others".into(),
            Idiom::HashExchange => "key placement: broker-side x-consistent-hash on the routing key (= ordering key); the per-topic fanout exchange feeds each group's hash exchange (exchange-to-exchange binding)".into(),
        });
        notes.push("one client publish per message per topic; the broker enqueues one copy per group's queue (materialised fan-out: publishes_per_ingress_event counts the broker-side copies)".into());
        notes.push(format!(
            "consume: prefetch {} per consumer, gather up to batch with {:?} linger, group by message_id, keys concurrent, one multiple-ack per set; a refused key-batch: accepted ones acked singly, channel closed so the broker requeues the rest in order",
            if self.opts.prefetch == 0 { "= batch".to_string() } else { self.opts.prefetch.to_string() },
            self.opts.linger
        ));
        if topology.dedup_window_sec > 0 {
            notes.push(format!(
                "dedup window {} s requested: RabbitMQ has no broker-side dedup; not honoured",
                topology.dedup_window_sec
            ));
        }
        if !self.opts.nodes.is_empty() {
            notes.push(format!(
                "{} nodes (rabbitmq.url and rabbitmq.nodes): setup ran on node {setup_node}; consumer connection i starts on node i mod {}, a lost connection reconnects to the next node in turn",
                self.opts.node_count(),
                self.opts.node_count()
            ));
        }
        let mut provenance = super::handshake::provenance(
            super::handshake::server_properties(
                &self.opts,
                self.opts.node_url(setup_node),
                Duration::from_secs(10),
            )
            .await,
        );
        provenance.setting("queue_type", self.opts.queue_type.name());
        let first_queue = self.layout.read().as_ref().and_then(|l| {
            let t = topology.topics.first()?;
            let (_, q) = l.topics.get(&t.name)?.groups.first()?;
            q.first().cloned()
        });
        self.cluster_provenance(first_queue.as_deref(), &mut provenance)
            .await;
        provenance.note("queue_type: x-queue-type as the adapter declared it on every queue (a declare that the server answered, not read back)");
        Ok(Description {
            system: "rabbitmq".into(),
            variant: format!("{}/{}", idiom.name(), self.opts.queue_type.name()),
            durability,
            fan_out: FanOut::Materialised,
            delivery: DeliveryGuarantee::AtLeastOnce,
            ordered_lanes: physical,
            physical_queues: physical,
            consumer_members: physical,
            connections: nconn as u64 + 1,
            publishes_per_ingress_event: topology.materialised_publishes_per_ingress_event(),
            semantics_built_in_app: vec![
                "per-key batching: deliveries gathered per queue and grouped by message_id in the client".into(),
                match idiom {
                    Idiom::LaneQueues => "key → lane routing (FNV-1a) in the client".into(),
                    Idiom::HashExchange => "none for routing: the consistent-hash exchange places keys".into(),
                },
                "partial acknowledgement of a gathered set: single acks + channel close to requeue the refused remainder in order".into(),
                "consumer / connection recovery (channel reopen, reconnect) in the adapter".into(),
            ],
            notes,
            lease_ms: None,
            provenance,
        })
    }
}

enum SetEnd {
    Continue,
    Reopen,
}

/// Run `f(channel, item)` for every item, items spread round-robin over the
/// channels, each channel's share sequential, the channels concurrent. First error wins.
/// The order reset deletes exchanges in: sources (topic exchanges) before the
/// exchanges bound to them (`….hash`), so no delete removes a binding whose other
/// end is being deleted at the same time.
fn delete_order(mut exchanges: Vec<String>) -> Vec<String> {
    exchanges.sort_by_key(|n| (n.ends_with(".hash"), n.clone()));
    exchanges
}

async fn run_spread<T, F, Fut>(chans: &[Channel], items: Vec<T>, f: F) -> Result<(), String>
where
    F: Fn(Channel, T) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let n = chans.len().max(1);
    let mut shares: Vec<Vec<T>> = (0..n).map(|_| Vec::new()).collect();
    for (i, it) in items.into_iter().enumerate() {
        shares[i % n].push(it);
    }
    let f = &f;
    let results =
        futures::future::join_all(shares.into_iter().zip(chans).map(|(share, ch)| async move {
            for it in share {
                f(ch.clone(), it).await?;
            }
            Ok::<(), String>(())
        }))
        .await;
    results.into_iter().collect()
}

#[async_trait]
impl Broker for RabbitBroker {
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        self.inner
            .setup(topology)
            .await
            .map_err(super::refusal::topology_refusal)
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        self.inner.publish(topic, key, payloads).await
    }

    async fn consume(
        &self,
        topic: &str,
        group: &str,
        options: ConsumeOptions,
        handler: Arc<dyn BatchHandler>,
        stop: CancellationToken,
    ) -> Result<(), BrokerError> {
        let layout = self.inner.layout()?;
        let t = layout
            .topics
            .get(topic)
            .ok_or_else(|| BrokerError::UnknownTopic(topic.to_string()))?;
        let queues = t
            .groups
            .iter()
            .find(|(g, _)| g == group)
            .map(|(_, q)| q.clone())
            .ok_or_else(|| BrokerError::Other(format!("unknown group {group:?} on {topic:?}")))?;
        let slots: Vec<Arc<ConnSlot>> = self.inner.slots.read().clone();
        let nslots = layout.consumer_connections.min(slots.len()).max(1);
        let mut tasks = JoinSet::new();
        let sharing = layout.sharing;
        for (n, q) in queues.into_iter().enumerate() {
            let i = self.inner.next_slot.fetch_add(1, Ordering::Relaxed) % nslots;
            // Shared by several loaders (single active consumer): each loader
            // registers first on its share of the queues and waits before joining the
            // others' as a standby, so the active consumers spread over the loaders
            // instead of all landing on whichever registered first.
            let standby = sharing.is_shared() && n as u64 % sharing.processes != sharing.index;
            let inner = self.inner.clone();
            let (slot, options, handler, stop) = (
                slots[i].clone(),
                options.clone(),
                handler.clone(),
                stop.clone(),
            );
            tasks.spawn(async move {
                if standby {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(STANDBY_DELAY) => {}
                    }
                }
                inner.queue_loop(q, slot, options, handler, stop).await
            });
        }
        while let Some(r) = tasks.join_next().await {
            if let Err(e) = r {
                return Err(BrokerError::Other(format!(
                    "rabbitmq queue consumer panicked: {e}"
                )));
            }
        }
        Ok(())
    }

    async fn held(&self) -> Option<crate::broker::Held> {
        self.inner.held().await
    }

    /// From the management API (`rabbitmq.management_url`; `None` without it):
    /// [`Inner::placement`].
    async fn placement(&self) -> Option<crate::placement::Placement> {
        self.inner.placement().await
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = counter::snapshot("rabbit_", &self.inner.stats);
        let layout = self.inner.layout.read().clone();
        let gauges = Gauges {
            publish_channels: self.inner.opts.publish_channels as u64,
            quorum: u64::from(self.inner.opts.queue_type == QueueType::Quorum),
            queues: layout.as_ref().map(|l| l.physical_queues),
            queues_per_group: layout.as_ref().map(|l| l.queues_per_group),
            consumer_connections: layout.as_ref().map(|l| l.consumer_connections as u64),
        };
        m.extend(counter::snapshot("rabbit_", &gauges));
        if self.inner.opts.cost_snapshot {
            match self.cost_snapshot() {
                Ok(snap) => m.extend(snap.to_counters("rabbit_end_")),
                Err(_) => {
                    m.insert("rabbit_end_snapshot_failed".into(), 1);
                }
            }
        }
        m
    }

    async fn close(&self) -> Result<(), BrokerError> {
        let pubc = {
            let mut st = self.inner.publisher.lock();
            st.channels.clear();
            st.conn.take()
        };
        if let Some(c) = pubc {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.close(200, sstr("bye"))).await;
        }
        let slots: Vec<Arc<ConnSlot>> = self.inner.slots.read().clone();
        for s in slots {
            let c = s.conn.lock().await.take();
            if let Some(c) = c {
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), c.close(200, sstr("bye"))).await;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_deletes_topic_exchanges_before_the_hash_exchanges_bound_to_them() {
        let got = delete_order(vec![
            "cb.a.g1.hash".into(),
            "cb.b".into(),
            "cb.a".into(),
            "cb.b.g1.hash".into(),
        ]);
        assert_eq!(got, ["cb.a", "cb.b", "cb.a.g1.hash", "cb.b.g1.hash"]);
    }

    /// `broker_stats` keys as they were hand-listed before the snapshot was derived:
    /// the counters and the configuration always, the layout's once setup ran, one
    /// `rabbit_errors_<class>` per class seen, the end-of-run snapshot when asked for.
    #[test]
    fn snapshot_keys_are_unchanged() {
        let always = [
            "rabbit_ack_errors",
            "rabbit_acked",
            "rabbit_broker_copies",
            "rabbit_channel_reopens",
            "rabbit_client_publishes",
            "rabbit_confirm_nacks",
            "rabbit_consumer_reconnects",
            "rabbit_deliveries",
            "rabbit_gathered_sets",
            "rabbit_logical_published",
            "rabbit_multiple_acks",
            "rabbit_publish_channels",
            "rabbit_publish_errors",
            "rabbit_publish_reconnects",
            "rabbit_quorum",
            "rabbit_receive_errors",
            "rabbit_redelivered",
            "rabbit_refusal_channel_closes",
            "rabbit_refused",
            "rabbit_reset_deleted_exchanges",
            "rabbit_reset_deleted_queues",
            "rabbit_returned",
            "rabbit_single_acks",
        ];
        let keys = |b: &RabbitBroker| b.counters().into_keys().collect::<Vec<_>>();
        let b = RabbitBroker::new(RabbitOptions {
            cost_snapshot: false,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(keys(&b), always);
        *b.inner.layout.write() = Some(Arc::new(Layout {
            idiom: Idiom::LaneQueues,
            sharing: crate::broker::Sharing::ALONE,
            queues_per_group: 4,
            topics: HashMap::new(),
            physical_queues: 8,
            consumer_connections: 2,
        }));
        b.inner.stats.error(&BrokerError::Connection("x".into()));
        let mut want: Vec<&str> = always.to_vec();
        want.extend([
            "rabbit_queues",
            "rabbit_queues_per_group",
            "rabbit_consumer_connections",
            "rabbit_errors_connection",
        ]);
        want.sort_unstable();
        assert_eq!(keys(&b), want);
        assert_eq!(b.counters()["rabbit_queues"], 8);
        assert_eq!(b.counters()["rabbit_publish_channels"], 16);

        // The end-of-run snapshot, when its CLI fails, says so in one key.
        let b = RabbitBroker::new(RabbitOptions {
            rabbitmqctl: "/nonexistent/rabbitmqctl".into(),
            ..Default::default()
        })
        .unwrap();
        let mut want: Vec<&str> = always.to_vec();
        want.push("rabbit_end_snapshot_failed");
        want.sort_unstable();
        assert_eq!(keys(&b), want);
    }

    #[test]
    fn password_is_found_and_redacted() {
        let b = RabbitBroker::new(RabbitOptions {
            url: "amqp://u:s3cret@127.0.0.1:1/%2f".into(),
            nodes: vec!["amqp://u:n0de2@127.0.0.2:1/%2f".into()],
            management_url: "http://mon:m%40nage@127.0.0.1:15672".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            b.inner
                .redact("cannot connect to amqp://u:s3cret@127.0.0.1:1/%2f"),
            "cannot connect to amqp://u:***@127.0.0.1:1/%2f"
        );
        assert_eq!(
            b.inner.redact("n0de2 and m@nage and m%40nage"),
            "*** and *** and ***"
        );
    }

    #[tokio::test]
    async fn a_lost_connection_reconnects_to_the_next_node_and_a_failed_node_waits() {
        // Three nodes nobody listens on: a connect tries each in turn from its start.
        let b = RabbitBroker::new(RabbitOptions {
            url: "amqp://guest:guest@127.0.0.1:1/%2f".into(),
            nodes: vec![
                "amqp://guest:guest@127.0.0.1:2/%2f".into(),
                "amqp://guest:guest@127.0.0.1:3/%2f".into(),
            ],
            ..Default::default()
        })
        .unwrap();
        let e = b.inner.connect("t", 1).await.unwrap_err().to_string();
        let at = |port: u16| e.find(&format!("127.0.0.1:{port}")).unwrap();
        assert!(at(2) < at(3) && at(3) < at(1), "{e}");
        // All three now wait out their backoff: the next attempt fails at once.
        let e = b.inner.connect("t", 0).await.unwrap_err().to_string();
        assert_eq!(e.matches("next connect attempt").count(), 3, "{e}");
    }

    #[test]
    fn options_are_validated() {
        let bad = RabbitOptions {
            publish_channels: 0,
            ..Default::default()
        };
        assert!(matches!(
            RabbitBroker::new(bad),
            Err(BrokerError::Config { .. })
        ));
        let bad = RabbitOptions {
            url: "http://x".into(),
            ..Default::default()
        };
        assert!(RabbitBroker::new(bad).is_err());
    }
}
