//! The NATS JetStream adapter (async-nats, JetStream API of nats-server 2.9).
//!
//! Topology: one stream per topic, `CB_<topic>`, over the subjects
//! `cb.<topic>.<lane>.<key>`: keys hash (FNV-1a, `lanes::lane_of`) onto `l0 … l<L-1>`.
//! Per group, one durable pull consumer per lane (`<group>_l<n>`, filter subject
//! `cb.<topic>.l<n>.*`), explicit acks, `ack_wait` the lease, `max_ack_pending`
//! bounding what one lane has out. One consumer per lane subject rather than one
//! consumer with `filter_subjects` over every lane: nats-server 2.9 (Debian's) has no
//! `filter_subjects` (2.10+), and a consumer's delivery order is its stream order
//! across all its subjects, so a refused message in one lane would hold back (or be
//! overtaken in) every lane the consumer serves. compose/nats/README.md says more.
//!
//! Publish: every payload of a key-batch is published at once (`PubAck` futures,
//! pipelined on the one connection, so the stream keeps their order), then every ack
//! is awaited. With a dedup window the stream's `duplicate_window` is set and every
//! message carries a `Nats-Msg-Id` derived from (topic, key, payload); a repeated
//! publish is acknowledged as a duplicate and stored once.
//!
//! Consume: one task per lane consumer, reading its pull stream; it hands the stage
//! what is there (up to `batch`), split into runs of one batch key, one run at a time,
//! so one lane (and so one key) is never in two handler calls. An acked run is acked
//! message by message; a refused run is nak'd with the lease as its delay, and the lane
//! then hands nothing with a later stream sequence before it is back: a later message
//! that arrives first is nak'd again with the time left (counted as deferred).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream, AckKind};
use async_trait::async_trait;
use bytes::Bytes;
use futures::{FutureExt, StreamExt, TryStreamExt};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::sync::{OnceCell, Semaphore};
use tokio_util::sync::CancellationToken;

use super::NatsOptions;
use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, Delivery, DeliveryGuarantee, Description, Disposition,
    Durability, FanOut, KeyBatch, Topology,
};
use crate::counter::{self, Counter, CounterMap};
use crate::error::BrokerError;
use crate::lanes::{lane_key, lane_of};
use crate::redact::redact_url_passwords;

const PROVISION: &str = "scripts/provision/nats.sh";

/// What `setup` built for one topic.
#[derive(Debug)]
struct TopicState {
    stream: String,
    /// The subject's topic token.
    token: String,
    /// group → its lane consumers, by lane index.
    consumers: HashMap<String, Vec<consumer::PullConsumer>>,
    dedup: bool,
}

/// Adapter counters (`broker_stats`, every key prefixed `nats_`).
#[derive(Debug, Default, Serialize)]
struct Stats {
    logical_publishes: Counter,
    publish_calls: Counter,
    /// Publishes the server acknowledged as duplicates (`Nats-Msg-Id` seen in the window).
    duplicates: Counter,
    fetched: Counter,
    acked: Counter,
    refused: Counter,
    redelivered: Counter,
    /// Deliveries of a lane held back behind a refused batch (nak'd again).
    deferred: Counter,
    /// Redeliveries of messages this lane had already acked (their ack wait ran out
    /// while they waited in the client): acked again, not handed.
    stale_redeliveries: Counter,
    /// First deliveries that came after later messages of their lane had been
    /// acked (a delivery lost in flight, in a failover, and redelivered after its ack
    /// wait): handed, out of order ([`AckedSeqs`]).
    late_deliveries: Counter,
    /// Deliveries under a stream sequence the lane had acked for a different message
    /// (another subject or payload): the server gave the sequence to a second message.
    /// Handed, never taken for a redelivery ([`AckedSeqs`]). 0 in every run measured
    /// so far (docs/reliability.md, "Deliveries NATS skipped").
    reused_sequences: Counter,
    /// Deliveries of a message this lane had acked under another stream sequence (same
    /// subject and payload): the stream holds the message twice, or the server answered
    /// a sequence with a message it holds elsewhere. Handed, as any at-least-once
    /// client would (the checker counts the duplicate); acking it acks the sequence, so
    /// whatever the stream holds there for the other replicas is skipped for this
    /// group. An upstream stage's second publish of a message gives one too, in every
    /// group of its topic (docs/reliability.md, "Deliveries NATS skipped").
    copies_under_new_sequence: Counter,
    naks: Counter,
    errors: CounterMap,
}

impl Stats {
    fn error(&self, op: &str, e: &BrokerError) {
        self.errors.inc(format!("{op}_{}", e.class()));
    }
}

/// Server-side figures read at the end of each stream's consume (stream and consumer
/// info), summed over the streams.
#[derive(Debug, Default, Serialize)]
struct Server {
    server_stream_messages: Counter,
    server_stream_bytes: Counter,
    server_num_pending: Counter,
    server_num_ack_pending: Counter,
    server_num_redelivered: Counter,
    /// Summed over lane consumers: the stream sequence each has acked up to.
    server_ack_floor_stream_seq_sum: Counter,
}

#[derive(Serialize)]
struct Gauges {
    lanes: u64,
    lane_consumers: u64,
    ack_wait_ms: u64,
}

/// The NATS JetStream broker.
#[derive(Debug)]
pub struct NatsBroker {
    options: NatsOptions,
    client: OnceCell<(async_nats::Client, jetstream::Context)>,
    topics: RwLock<HashMap<String, Arc<TopicState>>>,
    lanes: AtomicU64,
    keys: AtomicU64,
    topo_lanes: AtomicU64,
    stats: Stats,
    server: Mutex<HashMap<(String, String), [u64; 6]>>,
}

/// `[A-Za-z0-9_-]` only: a stream, consumer or subject token.
pub(super) fn token(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A key as one subject token: itself when it is a plain token, else `~` and its hex.
pub(super) fn key_token(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_string()
    } else {
        let mut s = String::with_capacity(1 + key.len() * 2);
        s.push('~');
        for b in key.bytes() {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

fn key_from_token(t: &str) -> String {
    match t.strip_prefix('~') {
        Some(hex) => {
            let bytes: Vec<u8> = (0..hex.len() / 2)
                .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        None => t.to_string(),
    }
}

/// The `Nats-Msg-Id` of a message: 128 bits over (topic, key, payload), so the same
/// publish repeated (a producer's retry) has the same id and nothing else does.
pub fn message_id(topic: &str, key: &str, payload: &[u8]) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in [topic.as_bytes(), b"\x00", key.as_bytes(), b"\x00", payload] {
        for &b in part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    let mut s = std::collections::hash_map::DefaultHasher::new();
    (topic, key, payload).hash(&mut s);
    format!("{h:016x}{:016x}", s.finish())
}

fn classify(text: String) -> BrokerError {
    let text = redact_url_passwords(&text);
    let l = text.to_ascii_lowercase();
    if l.contains("timed out") || l.contains("timeout") {
        BrokerError::Timeout(text)
    } else if l.contains("connect")
        || l.contains("broken pipe")
        || l.contains("disconnect")
        || l.contains("no responders")
    {
        BrokerError::Connection(text)
    } else {
        BrokerError::Other(text)
    }
}

fn publish_error(e: jetstream::context::PublishError) -> BrokerError {
    use jetstream::context::PublishErrorKind as K;
    let text = redact_url_passwords(&e.to_string());
    match e.kind() {
        K::TimedOut => BrokerError::Timeout(text),
        K::BrokenPipe => BrokerError::Connection(text),
        K::StreamNotFound => BrokerError::UnknownTopic(text),
        K::MaxPayloadExceeded | K::WrongLastMessageId | K::WrongLastSequence => {
            BrokerError::Refused(text)
        }
        _ => classify(text),
    }
}

/// A stream the server would not create: a replication it cannot give (a single
/// server asked for replicas, a cluster with fewer JetStream servers than asked) is
/// `nats.replicas`'s to fix; anything else as [`classify`] says.
fn stream_refused(replicas: u32, name: &str, text: String) -> BrokerError {
    let l = text.to_ascii_lowercase();
    if replicas > 1 && l.contains("replicas") && l.contains("not supported") {
        return BrokerError::Config {
            field: "nats.replicas".into(),
            message: redact_url_passwords(&format!(
                "creating stream {name} with {replicas} replicas, the server answered: {text}. This server is not in a JetStream cluster: set nats.replicas: 1, or point nats.url at a cluster's servers"
            )),
        };
    }
    if replicas > 1 && (l.contains("insufficient resources") || l.contains("no suitable peers")) {
        return BrokerError::Config {
            field: "nats.replicas".into(),
            message: redact_url_passwords(&format!(
                "creating stream {name} with {replicas} replicas, the server answered: {text}. The cluster has fewer JetStream servers up than nats.replicas = {replicas}: lower it, or bring the servers up"
            )),
        };
    }
    classify(format!("creating stream {name}: {text}"))
}

use crate::nap::nap;

impl NatsBroker {
    pub fn new(options: NatsOptions) -> Result<Self, BrokerError> {
        crate::options::Section::validate(&options)?;
        Ok(NatsBroker {
            options,
            client: OnceCell::new(),
            topics: RwLock::new(HashMap::new()),
            lanes: AtomicU64::new(1),
            keys: AtomicU64::new(1),
            topo_lanes: AtomicU64::new(1),
            stats: Stats::default(),
            server: Mutex::new(HashMap::new()),
        })
    }

    pub fn options(&self) -> &NatsOptions {
        &self.options
    }

    /// A new connection to the server, named `name`, and its JetStream context.
    async fn dial(
        &self,
        name: &str,
    ) -> Result<(async_nats::Client, jetstream::Context), BrokerError> {
        let client = super::dial::open(&self.options, name, PROVISION).await?;
        let mut js = jetstream::new(client.clone());
        js.set_timeout(self.options.request_timeout);
        Ok((client, js))
    }

    async fn connect(&self) -> Result<&(async_nats::Client, jetstream::Context), BrokerError> {
        self.client
            .get_or_try_init(|| self.dial("crossbench-nats"))
            .await
    }

    fn ready(&self) -> Result<&jetstream::Context, BrokerError> {
        self.client
            .get()
            .map(|(_, js)| js)
            .ok_or_else(|| BrokerError::Other("nats: setup has not run".into()))
    }

    fn topic(&self, name: &str) -> Result<Arc<TopicState>, BrokerError> {
        self.topics
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| BrokerError::UnknownTopic(name.to_string()))
    }

    /// What a delivery's batch key is: the key's logical lane as the topology names it
    /// (the key itself when every key has its own lane).
    fn batch_key(&self, key: &str) -> String {
        lane_key(
            key,
            self.topo_lanes.load(Ordering::Relaxed),
            self.keys.load(Ordering::Relaxed),
        )
    }

    /// Read the stream's and the lane consumers' info into the server figures.
    async fn read_server(&self, t: &TopicState, group: &str) {
        let Ok(js) = self.ready() else { return };
        let mut fig = [0u64; 6];
        if let Ok(mut s) = js.get_stream(&t.stream).await {
            if let Ok(i) = s.info().await {
                fig[0] = i.state.messages;
                fig[1] = i.state.bytes;
            }
        }
        let consumers = t.consumers.get(group).cloned().unwrap_or_default();
        let infos: Vec<_> = futures::stream::iter(consumers)
            .map(|mut c| async move { c.info().await.ok().cloned() })
            .buffer_unordered(16)
            .collect()
            .await;
        for i in infos.into_iter().flatten() {
            fig[2] += i.num_pending;
            fig[3] += i.num_ack_pending as u64;
            fig[4] += i.num_redelivered as u64;
            fig[5] += i.ack_floor.stream_sequence;
        }
        self.server
            .lock()
            .insert((t.stream.clone(), group.to_string()), fig);
    }

    /// One lane consumer, until `stop`.
    async fn lane(&self, c: consumer::PullConsumer, s: Arc<StreamCtx>) {
        let counters = &s.counters;
        let lease = self.options.ack_wait;
        let mut err_backoff = Duration::from_millis(50);
        // Refused (and deferred) stream sequences not yet back, and when the last
        // refusal's lease runs out.
        let mut waiting: BTreeSet<u64> = BTreeSet::new();
        let mut blocked_until = Instant::now();
        // The highest stream sequence this lane has acked: the lane is handed in
        // order, so everything at or below it was acked, and a delivery at or below it
        // is the server's redelivery of an acked message whose ack wait ran out while
        // it waited in the client (acked again, never handed twice).
        let mut floor: u64 = 0;
        let mut acked = AckedSeqs::default();
        'outer: loop {
            let messages = c
                .stream()
                .max_messages_per_batch(s.batch.max(1))
                .heartbeat(Duration::from_secs(5))
                .expires(Duration::from_secs(30))
                .messages()
                .await;
            let mut messages = match messages {
                Ok(m) => m,
                Err(e) => {
                    counters.receive_errors.inc();
                    self.stats.error("pull", &classify(e.to_string()));
                    if nap(err_backoff, &s.stop).await {
                        break;
                    }
                    err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            loop {
                let first = tokio::select! {
                    _ = s.stop.cancelled() => break 'outer,
                    m = messages.next() => m,
                };
                let first = match first {
                    Some(Ok(m)) => m,
                    Some(Err(e)) => {
                        // Missed heartbeats, a lost connection: counted, and the pull
                        // stream goes on (it re-issues its requests).
                        counters.receive_errors.inc();
                        self.stats.error("pull", &classify(e.to_string()));
                        if nap(err_backoff, &s.stop).await {
                            break 'outer;
                        }
                        err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                    None => continue 'outer,
                };
                err_backoff = Duration::from_millis(50);
                let mut got = vec![first];
                while got.len() < s.batch.max(1) {
                    match messages.next().now_or_never() {
                        Some(Some(Ok(m))) => got.push(m),
                        _ => break,
                    }
                }
                self.stats.fetched.add(got.len() as u64);
                // (message, stream sequence, delivery count, fingerprint), the reply
                // subject parsed once.
                let got: Vec<_> = got
                    .into_iter()
                    .map(|m| {
                        let (seq, delivered) = match m.info() {
                            Ok(i) => (i.stream_sequence, i.delivered),
                            Err(_) => (0, 1),
                        };
                        let print = fingerprint(m.subject.as_str(), &m.payload);
                        (m, seq, delivered, print)
                    })
                    .collect();
                let (got, superseded) = newest_copies(got, |&(_, seq, _, print)| (seq, print));
                self.stats.stale_redeliveries.add(superseded);

                // Keep the lane's order: nothing after a refused message until it is back.
                let mut accept = Vec::with_capacity(got.len());
                let mut defer = Vec::new();
                for (m, seq, delivered, print) in got {
                    if seq != 0 && acked.acked_elsewhere(seq, print).is_some() {
                        self.stats.copies_under_new_sequence.inc();
                    }
                    if seq != 0 && seq <= floor && !waiting.contains(&seq) {
                        match acked.seen(seq, print) {
                            Seen::Same => {
                                self.stats.stale_redeliveries.inc();
                                if let Err(e) = m.ack().await {
                                    self.stats.error("ack", &classify(e.to_string()));
                                }
                                continue;
                            }
                            Seen::Other => self.stats.reused_sequences.inc(),
                            Seen::Not => {}
                        }
                        self.stats.late_deliveries.inc();
                    }
                    let in_order = waiting.first().is_none_or(|&w| seq <= w);
                    if defer.is_empty() && in_order {
                        waiting.remove(&seq);
                        accept.push((m, seq, delivered > 1, print));
                    } else {
                        defer.push((m, seq));
                    }
                }
                if !defer.is_empty() {
                    let left = blocked_until.saturating_duration_since(Instant::now());
                    let delay = left + Duration::from_millis(20);
                    self.stats.deferred.add(defer.len() as u64);
                    for (m, seq) in defer {
                        waiting.insert(seq);
                        self.nak(&m, delay).await;
                    }
                }

                // Runs of one batch key, in order, one handler call at a time.
                let mut runs: Vec<(String, Run)> = Vec::new();
                for (m, seq, again, print) in accept {
                    let key = m
                        .subject
                        .as_str()
                        .rsplit('.')
                        .next()
                        .map(key_from_token)
                        .unwrap_or_default();
                    let bk = self.batch_key(&key);
                    match runs.last_mut() {
                        Some((k, v)) if *k == bk => v.push((m, seq, again, print)),
                        _ => runs.push((bk, vec![(m, seq, again, print)])),
                    }
                }
                let mut refused_at: Option<usize> = None;
                for (i, (bk, run)) in runs.iter().enumerate() {
                    let again = run.iter().filter(|(_, _, a, _)| *a).count() as u64;
                    if again > 0 {
                        counters.redelivered.add(again);
                        self.stats.redelivered.add(again);
                    }
                    let batch = KeyBatch {
                        key: Arc::from(bk.as_str()),
                        messages: run
                            .iter()
                            .map(|(m, _, a, _)| Delivery {
                                payload: m.payload.clone(),
                                redelivered: *a,
                            })
                            .collect(),
                    };
                    let disposition = {
                        let _permit = s.budget.acquire().await.expect("never closed");
                        s.handler.handle(batch).await
                    };
                    let n = run.len() as u64;
                    match disposition {
                        Disposition::Ack => {
                            let mut failed = 0u64;
                            for (m, _, _, _) in run {
                                if let Err(e) = m.ack().await {
                                    failed += 1;
                                    self.stats.error("ack", &classify(e.to_string()));
                                }
                            }
                            counters.acked.add(n - failed);
                            counters.ack_errors.add(failed);
                            self.stats.acked.add(n - failed);
                            if let Some(top) = run.iter().map(|(_, seq, _, _)| *seq).max() {
                                floor = floor.max(top);
                            }
                            for (_, seq, _, print) in run {
                                acked.insert(*seq, *print);
                            }
                        }
                        Disposition::Refuse => {
                            counters.refused.add(n);
                            self.stats.refused.add(n);
                            blocked_until = Instant::now() + lease;
                            for (m, seq, _, _) in run {
                                waiting.insert(*seq);
                                self.nak(m, lease).await;
                            }
                            refused_at = Some(i);
                            break;
                        }
                    }
                }
                if let Some(i) = refused_at {
                    // The runs after a refused one wait for it.
                    let rest: Vec<_> = runs.into_iter().skip(i + 1).collect();
                    let delay = lease + Duration::from_millis(20);
                    for (_, run) in rest {
                        self.stats.deferred.add(run.len() as u64);
                        for (m, seq, _, _) in run {
                            waiting.insert(seq);
                            self.nak(&m, delay).await;
                        }
                    }
                }
            }
        }
    }

    async fn nak(&self, m: &jetstream::Message, delay: Duration) {
        self.stats.naks.inc();
        if let Err(e) = m.ack_with(AckKind::Nak(Some(delay))).await {
            self.stats.error("nak", &classify(e.to_string()));
        }
    }
}

/// The stream sequences a lane acked most recently, at most [`AckedSeqs::KEPT`], each
/// with the [`fingerprint`] of the message it held. A delivery at or below the lane's
/// highest acked sequence is one of three things:
/// - a redelivery of a message the lane acked (its ack wait ran out while it waited in
///   the client): same sequence, same fingerprint; acked again, never handed twice;
/// - a first delivery that came late, after later ones (lost in flight in a failover
///   and redelivered after its ack wait): a sequence not kept here; handed, out of
///   order, counted as `late_deliveries`;
/// - a different message under a sequence the lane acked before: the server gave the
///   sequence out twice; handed, counted as `reused_sequences`. Taking the sequence
///   alone for the message would ack such a delivery away unseen, a loss the checker
///   would charge to the system.
///
/// A redelivery older than the kept window is handed again: a duplicate the checker
/// counts, never a message silently acked away.
#[derive(Debug, Default)]
struct AckedSeqs {
    set: BTreeMap<u64, u64>,
    /// The same acks by fingerprint: the sequence each message was acked under.
    at: HashMap<u64, u64>,
}

/// What a lane knows of a stream sequence it is handed again ([`AckedSeqs::seen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Acked, and the same message: a redelivery.
    Same,
    /// Acked, but for another message: the sequence was given out twice.
    Other,
    /// Not among the kept acks.
    Not,
}

impl AckedSeqs {
    const KEPT: usize = 4096;

    fn insert(&mut self, seq: u64, print: u64) {
        if let Some(old) = self.set.insert(seq, print) {
            if self.at.get(&old) == Some(&seq) {
                self.at.remove(&old);
            }
        }
        self.at.insert(print, seq);
        while self.set.len() > Self::KEPT {
            if let Some((s, p)) = self.set.pop_first() {
                if self.at.get(&p) == Some(&s) {
                    self.at.remove(&p);
                }
            }
        }
    }

    /// The other stream sequence this message was acked under, if any: the lane is
    /// handed a copy of a message it acked, under a new sequence.
    fn acked_elsewhere(&self, seq: u64, print: u64) -> Option<u64> {
        self.at.get(&print).copied().filter(|&s| s != seq)
    }

    fn seen(&self, seq: u64, print: u64) -> Seen {
        match self.set.get(&seq) {
            Some(&p) if p == print => Seen::Same,
            Some(_) => Seen::Other,
            None => Seen::Not,
        }
    }
}

/// A delivered message's identity apart from its stream sequence: a 64-bit hash of its
/// subject (topic, lane and key) and its payload (which carries the publish's stamp),
/// eight bytes a step (every delivery is hashed: a byte a step cost 0.1–0.2 µs of a
/// payload). Two deliveries with one sequence and one fingerprint are copies of one
/// message; two different messages of one lane collide with odds of about 2^-64.
fn fingerprint(subject: &str, payload: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in [subject.as_bytes(), payload] {
        let mut words = part.chunks_exact(8);
        for w in &mut words {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            h = (h ^ w).wrapping_mul(K);
            h ^= h >> 29;
        }
        let mut tail = [0u8; 8];
        tail[..words.remainder().len()].copy_from_slice(words.remainder());
        // The part's length closes it, so subject and payload never run together.
        h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
        h = (h ^ part.len() as u64).wrapping_mul(K);
        h ^= h >> 32;
    }
    h
}

/// One copy per stream sequence and fingerprint (by `id`; sequence 0, unknown, is never
/// merged), at the first copy's place in the fetch, and how many copies were dropped.
/// A message that waited in the client past its ack wait comes back from the server;
/// when the redelivery lands in the same fetch as the copy it replaces, the lane's
/// floor cannot tell it (neither is acked yet), so it is caught here. The newest copy
/// is kept: it holds the live delivery, whose ack or nak the server honours; the
/// superseded one is dropped unanswered (its lease is already over).
fn newest_copies<T>(got: Vec<T>, id: impl Fn(&T) -> (u64, u64)) -> (Vec<T>, u64) {
    let mut at: HashMap<(u64, u64), usize> = HashMap::with_capacity(got.len());
    let mut out: Vec<T> = Vec::with_capacity(got.len());
    let mut superseded = 0;
    for m in got {
        let s = id(&m);
        match at.get(&s) {
            Some(&i) if s.0 != 0 => {
                superseded += 1;
                out[i] = m;
            }
            _ => {
                at.insert(s, out.len());
                out.push(m);
            }
        }
    }
    (out, superseded)
}

/// One stream's answer into `p`: its leader (or `leaderless`), and the leader then the
/// other replicas by name.
fn place(
    p: &mut crate::placement::Placement,
    stream: String,
    cluster: Option<&stream::ClusterInfo>,
) {
    let leader = cluster
        .and_then(|c| c.leader.clone())
        .filter(|l| !l.is_empty());
    let mut replicas: Vec<String> = leader.iter().cloned().collect();
    for r in cluster.map(|c| c.replicas.as_slice()).unwrap_or_default() {
        if !replicas.contains(&r.name) {
            replicas.push(r.name.clone());
        }
    }
    match leader {
        Some(l) => {
            p.leaders.insert(stream.clone(), l);
        }
        None => p.leaderless.push(stream.clone()),
    }
    p.replicas.insert(stream, replicas);
}

/// One batch key's deliveries: (message, stream sequence, redelivered, fingerprint).
type Run = Vec<(jetstream::Message, u64, bool, u64)>;

/// What a stream's lane tasks share.
struct StreamCtx {
    batch: usize,
    counters: Arc<crate::broker::StreamCounters>,
    handler: Arc<dyn BatchHandler>,
    budget: Semaphore,
    stop: CancellationToken,
}

#[async_trait]
impl Broker for NatsBroker {
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        let o = &self.options;
        let storage = match topology.durability {
            Durability::Default => stream::StorageType::File,
            Durability::Fsync if o.syncs_always() => stream::StorageType::File,
            Durability::Fsync => {
                return Err(BrokerError::Config {
                    field: "durability".into(),
                    message: format!(
                        "JetStream fsyncs file storage every sync_interval, a server-wide setting (nats.sync_interval says {}); durability: fsync needs a server with `jetstream {{ sync_interval: always }}` (nats-server >= 2.10) and nats.sync_interval=always",
                        o.sync_interval
                    ),
                })
            }
            Durability::Memory | Durability::None => stream::StorageType::Memory,
        };
        let (client, js) = self.connect().await?;
        let info = client.server_info();
        let version = info.version.clone();
        let mut provenance = crate::Provenance::new("nats-server", "the server's INFO (async-nats server_info()), and the stream info JetStream answered on create")
            .with_version(&info.version);
        provenance.report("jetstream", info.jetstream.to_string());
        provenance.report("go", info.go.clone());
        provenance.report("proto", info.proto.to_string());
        let mut stream_storage: Option<String> = None;
        let mut stream_replicas: Option<usize> = None;
        let keys = topology.keys.max(1);
        let lanes = topology.physical_lanes(self.options.max_lanes);
        let max_ack_pending = if o.max_ack_pending > 0 {
            o.max_ack_pending
        } else {
            1000
        };
        let dedup = topology.dedup_window_sec > 0;
        let mut states = HashMap::new();
        for t in &topology.topics {
            let tok = token(&t.name);
            let name = format!("CB_{tok}");
            if topology.reset {
                if let Err(e) = js.delete_stream(&name).await {
                    let text = e.to_string();
                    if !text.contains("not found") {
                        return Err(classify(format!("deleting stream {name}: {text}")));
                    }
                }
            }
            let config = stream::Config {
                name: name.clone(),
                subjects: vec![format!("cb.{tok}.>")],
                storage,
                num_replicas: o.replicas as usize,
                retention: stream::RetentionPolicy::Limits,
                duplicate_window: if dedup {
                    Duration::from_secs(topology.dedup_window_sec)
                } else {
                    Duration::ZERO
                },
                ..Default::default()
            };
            let st = js
                .get_or_create_stream(config)
                .await
                .map_err(|e| stream_refused(o.replicas, &name, e.to_string()))?;
            let answered = &st.cached_info().config;
            let answer = format!(
                "{}, replicas {}",
                match answered.storage {
                    stream::StorageType::File => "file",
                    stream::StorageType::Memory => "memory",
                },
                answered.num_replicas
            );
            if stream_storage.as_ref().is_some_and(|a| *a != answer) {
                provenance.note(format!(
                    "stream {name} answered {answer}, unlike the first stream"
                ));
            }
            stream_storage.get_or_insert(answer);
            let replicas = answered.num_replicas.max(1);
            if replicas != o.replicas as usize {
                provenance.note(format!(
                    "stream {name} kept by {replicas} servers, nats.replicas asked {} (a stream of an earlier run, kept without reset?)",
                    o.replicas
                ));
            }
            stream_replicas.get_or_insert(replicas);
            let mut consumers = HashMap::new();
            for g in &t.groups {
                let made: Vec<consumer::PullConsumer> = futures::stream::iter(0..lanes)
                    .map(|l| {
                        let st = &st;
                        let cfg = consumer::pull::Config {
                            durable_name: Some(format!("{}_l{l}", token(g))),
                            filter_subject: format!("cb.{tok}.l{l}.*"),
                            ack_policy: consumer::AckPolicy::Explicit,
                            ack_wait: o.ack_wait,
                            max_ack_pending,
                            max_deliver: -1,
                            deliver_policy: consumer::DeliverPolicy::All,
                            ..Default::default()
                        };
                        async move {
                            let name = cfg.durable_name.clone().unwrap_or_default();
                            match st.get_consumer::<consumer::pull::Config>(&name).await {
                                Ok(c) => Ok(c),
                                Err(_) => st.create_consumer(cfg).await.map_err(|e| {
                                    classify(format!("creating consumer {name}: {e}"))
                                }),
                            }
                        }
                    })
                    .buffered(o.setup_concurrency)
                    .try_collect()
                    .await?;
                consumers.insert(g.clone(), made);
            }
            states.insert(
                t.name.clone(),
                Arc::new(TopicState {
                    stream: name,
                    token: tok,
                    consumers,
                    dedup,
                }),
            );
        }
        *self.topics.write() = states;
        self.keys.store(keys, Ordering::Relaxed);
        self.lanes.store(lanes, Ordering::Relaxed);
        self.topo_lanes
            .store(topology.lanes.clamp(1, keys), Ordering::Relaxed);
        let streams = topology.stream_count() as u64;
        let storage_name = match storage {
            stream::StorageType::File => "file",
            stream::StorageType::Memory => "memory",
        };
        let replicas_answered = match stream_replicas {
            Some(r) => format!("replicas {r} (as the server answered)"),
            None => "no stream created".into(),
        };
        let mut notes = vec![
            format!("nats-server {version}; JetStream, {storage_name} storage, {replicas_answered}"),
            match storage {
                stream::StorageType::File => format!(
                    "file storage is fsynced every sync_interval = {} (as stated by nats.sync_interval; nats-server's default is 2m): a PubAck means written to the page cache, not fsynced",
                    o.sync_interval
                ),
                stream::StorageType::Memory => {
                    "memory storage: nothing survives a server restart".into()
                }
            },
            format!(
                "one durable pull consumer per (group, lane): {lanes} lanes per stream, ack_wait {} ms (the lease; refused batches are nak'd with that delay), max_ack_pending {max_ack_pending}",
                o.ack_wait.as_millis()
            ),
        ];
        if dedup {
            notes.push(format!(
                "dedup: duplicate_window {} s, Nats-Msg-Id = hash of (topic, key, payload)",
                topology.dedup_window_sec
            ));
        } else {
            notes.push("dedup off: no Nats-Msg-Id".into());
        }
        if lanes < keys {
            notes.push(format!(
                "{keys} keys hashed onto {lanes} lane subjects (FNV-1a); a lane's keys are handed one run at a time"
            ));
        }
        match stream_storage {
            Some(a) => provenance.setting("stream_storage", a),
            None => provenance.not_reported("stream storage", "no stream was created"),
        }
        match stream_replicas {
            Some(r) => provenance.setting("stream_replicas", r.to_string()),
            None => provenance.not_reported("stream replicas", "no stream was created"),
        }
        if let Some(cluster) = &info.cluster {
            provenance.report("cluster", cluster.clone());
        }
        provenance.setting("sync_interval_stated", o.sync_interval.clone());
        provenance.not_reported(
            "JetStream sync_interval",
            "a server-wide setting that neither INFO nor the stream info carries; sync_interval_stated is the scenario's nats.sync_interval",
        );
        Ok(Description {
            system: "nats".into(),
            variant: format!("lane-consumers/{storage_name}"),
            durability: match storage {
                stream::StorageType::File if o.syncs_always() => Durability::Fsync,
                stream::StorageType::File => Durability::Default,
                stream::StorageType::Memory => Durability::Memory,
            },
            fan_out: FanOut::Native,
            delivery: DeliveryGuarantee::AtLeastOnce,
            ordered_lanes: lanes * streams,
            physical_queues: topology.topics.len() as u64,
            consumer_members: lanes * streams,
            connections: 1,
            publishes_per_ingress_event: topology.native_publishes_per_ingress_event(),
            semantics_built_in_app: vec![
                "per-key order: keys hashed onto lane subjects, one pull consumer per lane".into(),
                "a refused batch holds its lane: later deliveries are nak'd until it is back"
                    .into(),
                "a redelivery of what the lane already acked (ack wait run out in the client) is acked again, not handed twice".into(),
            ],
            notes,
            lease_ms: Some(o.ack_wait.as_millis() as u64),
            provenance,
        })
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let t = self.topic(topic)?;
        let js = self.ready()?;
        let lane = lane_of(key, self.lanes.load(Ordering::Relaxed));
        let subject = format!("cb.{}.l{lane}.{}", t.token, key_token(key));
        self.stats.publish_calls.inc();
        let mut acks = Vec::with_capacity(payloads.len());
        for p in payloads {
            let mut m = jetstream::message::PublishMessage::build().payload(p.clone());
            if t.dedup {
                m = m.message_id(message_id(topic, key, p));
            }
            match js.send_publish(subject.clone(), m).await {
                Ok(a) => acks.push(a),
                Err(e) => {
                    let e = publish_error(e);
                    self.stats.error("publish", &e);
                    return Err(e);
                }
            }
        }
        let mut first_err = None;
        let acks = acks.into_iter().map(std::future::IntoFuture::into_future);
        for r in futures::future::join_all(acks).await {
            match r {
                Ok(ack) => {
                    self.stats.logical_publishes.inc();
                    if ack.duplicate {
                        self.stats.duplicates.inc();
                    }
                }
                Err(e) => {
                    let e = publish_error(e);
                    self.stats.error("publish", &e);
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            None => Ok(()),
            Some(e) => Err(e),
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
        let t = self.topic(topic)?;
        let consumers =
            t.consumers.get(group).cloned().ok_or_else(|| {
                BrokerError::Other(format!("unknown group {group:?} on {topic:?}"))
            })?;
        let ctx = Arc::new(StreamCtx {
            batch: options.batch.max(1),
            counters: options.counters.clone(),
            handler,
            // Handler calls at once: twice the stage's lane budget (pgmq's read-ahead is too).
            budget: Semaphore::new(options.lanes.max(1) * 2),
            stop,
        });
        futures::future::join_all(consumers.into_iter().map(|c| self.lane(c, ctx.clone()))).await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.read_server(&t, group)).await;
        Ok(())
    }

    /// Messages not yet delivered to each lane consumer: `num_pending` of its consumer
    /// info, one place per (stream, group, lane) consumer, asked on a connection of its
    /// own. Delivered messages not yet acked (`num_ack_pending`) are taken (not
    /// counted), as a queue's ready count leaves out its unacked ones. `None` before
    /// setup and on any error (then it cannot say what that consumer holds).
    async fn held(&self) -> Option<crate::broker::Held> {
        self.ready().ok()?;
        let consumers: Vec<(String, String)> = self
            .topics
            .read()
            .values()
            .flat_map(|t| {
                t.consumers
                    .values()
                    .flatten()
                    .map(|c| (t.stream.clone(), c.cached_info().name.clone()))
            })
            .collect();
        let counted = async {
            let (client, js) = self.dial("crossbench-nats-held").await.ok()?;
            let infos: Vec<Option<(String, u64)>> = futures::stream::iter(consumers)
                .map(|(stream, name)| {
                    let js = &js;
                    async move {
                        let s = js.get_stream_no_info(&stream).await.ok()?;
                        let info = s.consumer_info(&name).await.ok()?;
                        Some((format!("{stream}/{name}"), info.num_pending))
                    }
                })
                .buffer_unordered(16)
                .collect()
                .await;
            drop((js, client));
            infos.into_iter().collect::<Option<Vec<_>>>()
        };
        let places = tokio::time::timeout(Duration::from_secs(10), counted)
            .await
            .ok()??;
        Some(crate::broker::Held::from_places(places))
    }

    /// Per stream of the last setup, its `stream.info()`: `cluster.leader` (none, or
    /// an empty name, puts the stream in `leaderless`) and the leader then
    /// `cluster.replicas`' names as `replicas`; a stream whose info did not come within
    /// `nats.request_timeout` (the streams are asked at once) is `unanswered`.
    /// `connected`: the `server_name` of the INFO the adapter's one connection got
    /// last, when it is connected (a client reconnecting elsewhere is left out until
    /// the new server's INFO comes). `None` before setup.
    async fn placement(&self) -> Option<crate::placement::Placement> {
        let (client, js) = self.client.get()?;
        let mut streams: Vec<String> = self
            .topics
            .read()
            .values()
            .map(|t| t.stream.clone())
            .collect();
        streams.sort();
        let timeout = self.options.request_timeout;
        let answers: Vec<(String, Result<Option<stream::ClusterInfo>, String>)> =
            futures::future::join_all(streams.into_iter().map(|name| async move {
                let asked = async {
                    // get_stream asks for the stream's info (one request).
                    js.get_stream(&name)
                        .await
                        .map(|s| s.cached_info().cluster.clone())
                        .map_err(|e| e.to_string())
                };
                let answer = match tokio::time::timeout(timeout, asked).await {
                    Ok(r) => r.map_err(|e| redact_url_passwords(&e)),
                    Err(_) => Err(format!("no stream info within {timeout:?}")),
                };
                (name, answer)
            }))
            .await;
        let mut p = crate::placement::Placement::default();
        for (name, answer) in answers {
            match answer {
                Ok(cluster) => place(&mut p, name, cluster.as_ref()),
                Err(why) => {
                    p.unanswered.insert(name, why);
                }
            }
        }
        if client.connection_state() == async_nats::connection::State::Connected {
            let server = client.server_info().server_name;
            if !server.is_empty() {
                p.connected.push(server);
            }
        }
        Some(p)
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = counter::snapshot("nats_", &self.stats);
        let server = Server::default();
        let figs = self.server.lock();
        let mut per_stream: HashMap<&str, (u64, u64)> = HashMap::new();
        for ((stream, _), fig) in figs.iter() {
            per_stream.insert(stream.as_str(), (fig[0], fig[1]));
        }
        for (messages, bytes) in per_stream.values() {
            server.server_stream_messages.add(*messages);
            server.server_stream_bytes.add(*bytes);
        }
        for fig in figs.values() {
            server.server_num_pending.add(fig[2]);
            server.server_num_ack_pending.add(fig[3]);
            server.server_num_redelivered.add(fig[4]);
            server.server_ack_floor_stream_seq_sum.add(fig[5]);
        }
        drop(figs);
        m.extend(counter::snapshot("nats_", &server));
        let lanes = self.lanes.load(Ordering::Relaxed);
        let gauges = Gauges {
            lanes,
            lane_consumers: self
                .topics
                .read()
                .values()
                .map(|t| t.consumers.values().map(|c| c.len() as u64).sum::<u64>())
                .sum(),
            ack_wait_ms: self.options.ack_wait.as_millis() as u64,
        };
        m.extend(counter::snapshot("nats_", &gauges));
        m
    }

    async fn close(&self) -> Result<(), BrokerError> {
        if let Some((c, _)) = self.client.get() {
            let _ = c.flush().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redelivery_in_the_same_fetch_replaces_its_copy_in_place() {
        // (stream sequence, delivery count, fingerprint): 3 and 4 came back while they
        // waited; 7 came twice holding two messages (a sequence given out twice):
        // both are kept.
        let got = vec![
            (3, 1, 30),
            (4, 1, 40),
            (7, 1, 70),
            (3, 2, 30),
            (7, 1, 71),
            (4, 2, 40),
            (0, 1, 1),
            (0, 1, 1),
        ];
        let (kept, superseded) = newest_copies(got, |m| (m.0, m.2));
        assert_eq!(
            kept,
            vec![
                (3, 2, 30),
                (4, 2, 40),
                (7, 1, 70),
                (7, 1, 71),
                (0, 1, 1),
                (0, 1, 1)
            ]
        );
        assert_eq!(superseded, 2);
    }

    #[test]
    fn placement_names_the_leader_first_and_a_stream_without_one_as_leaderless() {
        let cluster: stream::ClusterInfo = serde_json::from_str(
            r#"{"name":"cb","leader":"n2","replicas":[
                {"name":"n1","current":true,"active":1000,"lag":0},
                {"name":"n3","current":false,"active":2000,"offline":true}]}"#,
        )
        .unwrap();
        let mut p = crate::placement::Placement::default();
        place(&mut p, "CB_a".into(), Some(&cluster));
        let electing: stream::ClusterInfo = serde_json::from_str(
            r#"{"name":"cb","leader":"","replicas":[{"name":"n1","current":true,"active":1}]}"#,
        )
        .unwrap();
        place(&mut p, "CB_b".into(), Some(&electing));
        place(&mut p, "CB_c".into(), None);
        assert_eq!(p.leaders.len(), 1);
        assert_eq!(p.leaders["CB_a"], "n2");
        assert_eq!(p.replicas["CB_a"], ["n2", "n1", "n3"]);
        assert_eq!(p.leaderless, ["CB_b", "CB_c"]);
        assert_eq!(p.replicas["CB_b"], ["n1"]);
        assert!(p.replicas["CB_c"].is_empty());
    }

    #[test]
    fn a_replication_the_server_cannot_give_is_nats_replicas_to_fix() {
        let single = "jetstream error: replicas > 1 not supported in non-clustered mode (code 500, error code 10074)";
        match stream_refused(3, "CB_x", single.into()) {
            BrokerError::Config { field, message } => {
                assert_eq!(field, "nats.replicas");
                assert!(message.contains("not in a JetStream cluster"), "{message}");
            }
            e => panic!("{e:?}"),
        }
        let short = "jetstream error: insufficient resources (code 503, error code 10023)";
        assert!(matches!(
            stream_refused(5, "CB_x", short.into()),
            BrokerError::Config { field, .. } if field == "nats.replicas"
        ));
        assert!(matches!(
            stream_refused(1, "CB_x", short.into()),
            BrokerError::Other(_)
        ));
    }

    #[test]
    fn tokens_round_trip() {
        assert_eq!(key_token("p17"), "p17");
        let t = key_token("a.b c");
        assert!(t.starts_with('~') && !t.contains('.'));
        assert_eq!(key_from_token(&t), "a.b c");
        assert_eq!(token("cm.ota sync"), "cm_ota_sync");
    }

    #[test]
    fn message_ids_follow_the_publish() {
        let a = message_id("t", "p1", b"x");
        assert_eq!(a, message_id("t", "p1", b"x"));
        assert_ne!(a, message_id("t", "p2", b"x"));
        assert_ne!(a, message_id("t", "p1", b"y"));
        assert_eq!(a.len(), 32);
    }

    #[test]
    fn a_lane_remembers_its_recent_acks_and_nothing_older() {
        let mut a = AckedSeqs::default();
        for s in 1..=(AckedSeqs::KEPT as u64 + 10) {
            if s != 44 {
                a.insert(s, s * 10);
            }
        }
        // 44 was never acked: whatever the floor, it is not stale.
        assert_eq!(a.seen(44, 440), Seen::Not);
        let top = AckedSeqs::KEPT as u64 + 10;
        assert_eq!(a.seen(top, top * 10), Seen::Same);
        // The oldest fell out of the window (handed again if redelivered: a counted
        // duplicate, never a drop).
        assert_eq!(a.seen(1, 10), Seen::Not);
        assert_eq!(a.set.len(), AckedSeqs::KEPT);
    }

    /// CI of `c8e96ccb`, the NATS R3 partition cell: key 7 seq 83 of `cm-ota-prices`
    /// reached one of the topic's five groups; the other four had nothing pending at
    /// the end. The first suspect was the lane: one that takes a stream sequence alone
    /// for its message would ack away a new message under a sequence it had acked for
    /// another. (It was not the cause: `nats_reused_sequences` was 0 in every run
    /// since.) The same sequence with another subject or payload is not a redelivery.
    #[test]
    fn a_sequence_acked_for_one_message_does_not_hide_another() {
        let mut a = AckedSeqs::default();
        let first = fingerprint("cb.cm_ota_prices.l3.p7", br#"{"seq":82}"#);
        a.insert(83, first);
        assert_eq!(a.seen(83, first), Seen::Same);
        let other = fingerprint("cb.cm_ota_prices.l3.p7", br#"{"seq":83}"#);
        assert_ne!(other, first);
        assert_eq!(a.seen(83, other), Seen::Other);
        let elsewhere = fingerprint("cb.cm_ota_prices.l3.p8", br#"{"seq":82}"#);
        assert_eq!(a.seen(83, elsewhere), Seen::Other);
        // Subject and payload are not run together: each part's length closes it.
        assert_ne!(fingerprint("ab", b"c"), fingerprint("a", b"bc"));
        // A trailing zero is not padding: the length closes each part.
        assert_ne!(
            fingerprint("s", b"abcdefgh"),
            fingerprint("s", b"abcdefgh\0")
        );
        // One byte changed anywhere, in a whole word or in the tail, changes it.
        let base: Vec<u8> = (0u8..45).collect();
        let mut prints = std::collections::HashSet::new();
        prints.insert(fingerprint("s", &base));
        for i in 0..base.len() {
            let mut p = base.clone();
            p[i] ^= 0x20;
            assert!(prints.insert(fingerprint("s", &p)), "byte {i}");
        }
    }

    /// In the logs of a NATS partition run that skipped a message, the groups that
    /// missed it had been handed the message before it twice. A lane tells a copy of a
    /// message it acked, under another sequence, from a redelivery (the same sequence)
    /// and from a new message; it forgets the copy's first sequence with the window.
    #[test]
    fn a_copy_of_an_acked_message_under_another_sequence_is_seen() {
        let mut a = AckedSeqs::default();
        let m97 = fingerprint("cb.cm_ota_prices.l5.p3", br#"{"prop":3,"seq":97}"#);
        let m98 = fingerprint("cb.cm_ota_prices.l5.p1", br#"{"prop":1,"seq":98}"#);
        a.insert(500, m97);
        assert_eq!(a.acked_elsewhere(500, m97), None, "a redelivery is no copy");
        assert_eq!(a.acked_elsewhere(501, m97), Some(500));
        assert_eq!(
            a.acked_elsewhere(501, m98),
            None,
            "a new message is no copy"
        );
        // Acking the copy under 501 too: both sequences are kept, the newest answers.
        a.insert(501, m97);
        assert_eq!(a.acked_elsewhere(502, m97), Some(501));
        assert_eq!(a.seen(500, m97), Seen::Same);
        // A sequence acked again for another message no longer names the first.
        a.insert(501, m98);
        assert_eq!(a.acked_elsewhere(502, m97), None);
        assert_eq!(a.acked_elsewhere(502, m98), Some(501));
        // Out of the window, out of mind.
        for s in 1000..(1000 + AckedSeqs::KEPT as u64) {
            a.insert(s, s);
        }
        assert_eq!(a.acked_elsewhere(9, m98), None);
        assert!(a.at.len() <= AckedSeqs::KEPT, "{}", a.at.len());
    }

    #[test]
    fn snapshot_keys() {
        let b = NatsBroker::new(NatsOptions::default()).unwrap();
        let keys: Vec<String> = b.counters().into_keys().collect();
        for k in [
            "nats_logical_publishes",
            "nats_duplicates",
            "nats_acked",
            "nats_refused",
            "nats_deferred",
            "nats_server_num_pending",
            "nats_server_num_redelivered",
            "nats_server_ack_floor_stream_seq_sum",
            "nats_lanes",
        ] {
            assert!(keys.iter().any(|x| x == k), "{k} in {keys:?}");
        }
    }
}
