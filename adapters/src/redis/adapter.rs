//! The Redis Streams adapter (the `redis` crate: a tokio connection manager for
//! publishes, acks and claims; one multiplexed connection per reader for its blocking
//! reads).
//!
//! Topology: one stream per (topic, lane), `cb:<topic>:l<n>`: keys hash (FNV-1a,
//! `lanes::lane_of`) onto the lanes, and every entry carries its key (`k`) and its
//! payload (`p`). Every group of the topic is a consumer group on every lane stream
//! (native fan-out: one `XADD` serves every group). `MAXLEN` trimming is off unless
//! `redis.maxlen` asks for it (trimming drops what a group has not read).
//!
//! Publish: one pipeline of `XADD`s per key-batch (one round trip, in order).
//!
//! Consume: `readers` tasks per (topic, group); each owns a share of the lanes, so one
//! lane is read by one consumer only, and reads its free lanes with one
//! `XREADGROUP … COUNT batch BLOCK … STREAMS <lanes> > …`. A lane with a batch in the
//! stage is not read again until the batch is settled; a batch that finishes while a
//! read blocks wakes its reader (`CLIENT UNBLOCK`). A lane's batch is handed in runs of
//! one batch key, one at a time. The acked runs' `XACK`s go out on the reader's own
//! connection in one pipeline with its next `XREADGROUP`, ahead of it: Redis runs a
//! connection's commands in order, so the lane is read again only after its entries
//! are acknowledged, and a read, its acks and the wake-up cost one round trip instead
//! of an `XACK`, a `CLIENT UNBLOCK` and an empty read each. An ack that fails is sent
//! again with the next read (the lane is not read meanwhile), four times at most; then
//! the lane is held for the lease and its entries claimed back (duplicates). A refused
//! run (and what followed it in the lane) is left pending; the lane is held until the
//! lease has passed, then `XAUTOCLAIM … <lease> 0-0` takes it back in ID order, and
//! only when the lane has nothing pending does it read new entries.
//!
//! Durability: `CONFIG GET appendonly appendfsync save` at setup. `appendonly yes` with
//! `appendfsync always` is `fsync`, with `everysec` (or `no`) `default`; a server
//! without AOF is tier `none` (RDB snapshots alone lose everything since the last one)
//! and is flagged in the description, never reported as durable.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use ::redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};
use ::redis::{AsyncConnectionConfig, Client, FromRedisValue, RedisError, Value};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::sync::{OnceCell, Semaphore};
use tokio_util::sync::CancellationToken;

use super::RedisOptions;
use crate::broker::{
    BatchHandler, Broker, ConsumeOptions, Delivery, DeliveryGuarantee, Description, Disposition,
    Durability, FanOut, KeyBatch, StreamCounters, Topology,
};
use crate::counter::{self, Counter, CounterMap};
use crate::error::BrokerError;
use crate::lanes::{lane_key, lane_of};
use crate::redact::redact_url_passwords;

const PROVISION: &str = "scripts/provision/redis.sh";

/// The tier a server's persistence settings give, and what to say about it.
pub fn server_tier(appendonly: &str, appendfsync: &str, save: &str) -> (Durability, String) {
    let aof = appendonly.trim().eq_ignore_ascii_case("yes");
    let fsync = appendfsync.trim().to_ascii_lowercase();
    let save = save.trim();
    if aof && fsync == "always" {
        (
            Durability::Fsync,
            "appendonly yes, appendfsync always: every write is fsynced before the reply".into(),
        )
    } else if aof {
        (
            Durability::Default,
            format!("appendonly yes, appendfsync {fsync}: the AOF is fsynced about once a second (up to ~1 s of acknowledged writes can be lost)"),
        )
    } else if save.is_empty() {
        (
            Durability::None,
            "NOT DURABLE: this Redis persists nothing (appendonly no, save \"\"): every message is lost on a restart; tier none".into(),
        )
    } else {
        (
            Durability::None,
            format!("NOT DURABLE: appendonly no; RDB snapshots only (save \"{save}\"): everything since the last snapshot is lost on a restart; tier none"),
        )
    }
}

#[derive(Debug)]
struct TopicState {
    /// Lane streams, by lane index.
    streams: Vec<String>,
    groups: Vec<String>,
}

/// Adapter counters (`broker_stats`, every key prefixed `redis_`).
#[derive(Debug, Default, Serialize)]
struct Stats {
    logical_publishes: Counter,
    xadd_pipelines: Counter,
    reads: Counter,
    empty_reads: Counter,
    entries_read: Counter,
    acked: Counter,
    ack_calls: Counter,
    refused: Counter,
    /// Entries of a lane left pending behind a refused run (never handed).
    deferred: Counter,
    claims: Counter,
    claimed: Counter,
    unblocks: Counter,
    reconnects: Counter,
    errors: CounterMap,
}

impl Stats {
    fn error(&self, op: &str, e: &BrokerError) {
        self.errors.inc(format!("{op}_{}", e.class()));
    }
}

/// Server figures read at the end of each stream's consume (`XINFO GROUPS`, `XLEN`,
/// `INFO memory`).
#[derive(Debug, Default, Serialize)]
struct Server {
    server_group_pending: Counter,
    server_group_lag: Counter,
    server_stream_entries: Counter,
    server_used_memory_bytes: Counter,
}

#[derive(Serialize)]
struct Gauges {
    lanes: u64,
    lane_streams: u64,
    readers_per_stream: u64,
    lease_ms: u64,
    /// 0 none, 1 default, 2 fsync: the tier the server was found at.
    durability_tier: u64,
    /// 1 when the server persists nothing (tier none).
    not_durable: u64,
}

/// The Redis Streams broker.
#[derive(Debug)]
pub struct RedisBroker {
    options: RedisOptions,
    client: Client,
    manager: OnceCell<ConnectionManager>,
    topics: RwLock<HashMap<String, Arc<TopicState>>>,
    lanes: AtomicU64,
    keys: AtomicU64,
    topo_lanes: AtomicU64,
    tier: Mutex<Option<Durability>>,
    stats: Stats,
    server: Mutex<HashMap<(String, String), [u64; 4]>>,
}

pub(super) fn classify(e: RedisError) -> BrokerError {
    let text = redact_url_passwords(&e.to_string());
    if e.is_timeout() {
        BrokerError::Timeout(text)
    } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
        BrokerError::Connection(text)
    } else if matches!(e.kind(), ::redis::ErrorKind::Server(_)) {
        BrokerError::Refused(text)
    } else {
        BrokerError::Other(text)
    }
}

/// `[A-Za-z0-9_-]` only (a key pattern never sees a glob character).
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

fn field(e: &StreamId, name: &str) -> Bytes {
    match e.map.get(name) {
        Some(Value::BulkString(b)) => Bytes::copy_from_slice(b),
        Some(Value::SimpleString(s)) => Bytes::copy_from_slice(s.as_bytes()),
        _ => Bytes::new(),
    }
}

/// An integer out of a reply element.
fn int(v: &Value) -> u64 {
    match v {
        Value::Int(i) => (*i).max(0) as u64,
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        Value::SimpleString(s) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        _ => String::new(),
    }
}

/// A reply's (name, value) pairs: a RESP3 map or a RESP2 flat array.
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        Value::Array(a) => a
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (text(&c[0]), c[1].clone()))
            .collect(),
        _ => Vec::new(),
    }
}

use crate::nap::nap;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Lane {
    Free,
    Busy,
    /// Settled, its ack not yet sent: read again in the pipeline that carries the ack.
    Acking,
    /// Pending entries to claim back from this instant on.
    Held(Instant),
}

/// A settled lane batch.
struct Done {
    slot: usize,
    /// The lane has pending entries left (a refused run, or it was a claimed batch).
    held: Option<Instant>,
    /// The entry ids of its acked runs, to `XACK` ahead of the reader's next read.
    acked: Vec<String>,
}

/// Acked entries of one lane whose `XACK` has not been confirmed yet.
struct PendingAck {
    slot: usize,
    ids: Vec<String>,
    /// Pipelines that carried it and failed.
    tries: u32,
    /// After the ack, the lane is held until then (it was held when settled).
    held: Option<Instant>,
}

/// A pipeline (errors kept per command) holding one XACK per pending ack, in order.
fn ack_pipe(
    acks: &[PendingAck],
    streams: &[String],
    owned: &[usize],
    group: &str,
) -> ::redis::Pipeline {
    let mut pipe = ::redis::pipe();
    pipe.ignore_errors();
    for a in acks {
        pipe.cmd("XACK")
            .arg(&streams[owned[a.slot]])
            .arg(group)
            .arg(&a.ids);
    }
    pipe
}

/// How many pipelines may carry one ack before the lane is given up to the lease.
const ACK_TRIES: u32 = 4;

struct StreamCtx {
    group: String,
    batch: usize,
    counters: Arc<StreamCounters>,
    handler: Arc<dyn BatchHandler>,
    budget: Semaphore,
    stop: CancellationToken,
}

impl RedisBroker {
    pub fn new(options: RedisOptions) -> Result<Self, BrokerError> {
        crate::options::Section::validate(&options)?;
        let client = super::dial::client(&options)?;
        Ok(RedisBroker {
            options,
            client,
            manager: OnceCell::new(),
            topics: RwLock::new(HashMap::new()),
            lanes: AtomicU64::new(1),
            keys: AtomicU64::new(1),
            topo_lanes: AtomicU64::new(1),
            tier: Mutex::new(None),
            stats: Stats::default(),
            server: Mutex::new(HashMap::new()),
        })
    }

    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// The tier setup found the server at (`None` before setup).
    pub fn tier(&self) -> Option<Durability> {
        *self.tier.lock()
    }

    fn unreachable(&self, e: RedisError) -> BrokerError {
        super::dial::failure(&self.options, &e, PROVISION)
    }

    async fn connection(&self, response: Duration) -> Result<MultiplexedConnection, RedisError> {
        let cfg = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(response));
        self.client
            .get_multiplexed_async_connection_with_config(&cfg)
            .await
    }

    async fn manager(&self) -> Result<ConnectionManager, BrokerError> {
        self.manager
            .get_or_try_init(|| async {
                // A probe first: the manager retries a refused connection for a while.
                self.connection(self.options.response_timeout)
                    .await
                    .map_err(|e| self.unreachable(e))?;
                let cfg = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(5)))
                    .set_response_timeout(Some(self.options.response_timeout))
                    .set_number_of_retries(3);
                self.client
                    .get_connection_manager_with_config(cfg)
                    .await
                    .map_err(|e| self.unreachable(e))
            })
            .await
            .cloned()
    }

    fn ready(&self) -> Result<ConnectionManager, BrokerError> {
        self.manager
            .get()
            .cloned()
            .ok_or_else(|| BrokerError::Other("redis: setup has not run".into()))
    }

    fn topic(&self, name: &str) -> Result<Arc<TopicState>, BrokerError> {
        self.topics
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| BrokerError::UnknownTopic(name.to_string()))
    }

    fn batch_key(&self, key: &str) -> String {
        lane_key(
            key,
            self.topo_lanes.load(Ordering::Relaxed),
            self.keys.load(Ordering::Relaxed),
        )
    }

    async fn config_get(
        &self,
        m: &mut ConnectionManager,
        name: &str,
    ) -> Result<String, BrokerError> {
        let v: Value = ::redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(m)
            .await
            .map_err(classify)?;
        Ok(pairs(&v)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| text(&v))
            .unwrap_or_default())
    }

    /// Entries still pending in a lane's group.
    async fn pending(
        &self,
        conn: &mut MultiplexedConnection,
        stream: &str,
        group: &str,
    ) -> Result<u64, BrokerError> {
        let v: Value = ::redis::cmd("XPENDING")
            .arg(stream)
            .arg(group)
            .query_async(conn)
            .await
            .map_err(classify)?;
        Ok(match &v {
            Value::Array(a) => a.first().map(int).unwrap_or(0),
            _ => 0,
        })
    }

    /// Hand one lane batch to the stage in runs of one batch key, one at a time; the
    /// acked runs' ids go back to the reader, which `XACK`s them ahead of its next read.
    async fn settle(
        &self,
        s: &StreamCtx,
        slot: usize,
        entries: Vec<StreamId>,
        again: bool,
    ) -> Done {
        let counters = &s.counters;
        let mut runs: Vec<(String, Vec<StreamId>)> = Vec::new();
        for e in entries {
            let key = String::from_utf8_lossy(&field(&e, "k")).into_owned();
            let bk = self.batch_key(&key);
            match runs.last_mut() {
                Some((k, v)) if *k == bk => v.push(e),
                _ => runs.push((bk, vec![e])),
            }
        }
        let total: usize = runs.iter().map(|(_, r)| r.len()).sum();
        let mut handed = 0usize;
        let mut acked: Vec<String> = Vec::with_capacity(total);
        for (bk, run) in runs {
            let n = run.len();
            if again {
                counters.redelivered.add(n as u64);
            }
            let batch = KeyBatch {
                key: Arc::from(bk.as_str()),
                messages: run
                    .iter()
                    .map(|e| Delivery {
                        payload: field(e, "p"),
                        redelivered: again,
                    })
                    .collect(),
            };
            let disposition = {
                let _permit = s.budget.acquire().await.expect("never closed");
                s.handler.handle(batch).await
            };
            handed += n;
            match disposition {
                Disposition::Ack => acked.extend(run.into_iter().map(|e| e.id)),
                Disposition::Refuse => {
                    counters.refused.add(n as u64);
                    self.stats.refused.add(n as u64);
                    self.stats.deferred.add((total - handed) as u64);
                    return Done {
                        slot,
                        held: Some(Instant::now() + self.options.lease),
                        acked,
                    };
                }
            }
        }
        Done {
            slot,
            // A claimed batch may not have been all the lane had pending: look again.
            held: again.then(Instant::now),
            acked,
        }
    }

    /// Count the outcome of one lane's `XACK` carried by a pipeline: `ok`, or failed
    /// once more. Returns the ack when it is to be carried again.
    fn acked(
        &self,
        s: &StreamCtx,
        state: &mut [Lane],
        mut a: PendingAck,
        ok: bool,
    ) -> Option<PendingAck> {
        let n = a.ids.len() as u64;
        if ok {
            s.counters.acked.add(n);
            self.stats.acked.add(n);
            state[a.slot] = a.held.map_or(Lane::Free, Lane::Held);
            return None;
        }
        a.tries += 1;
        if a.tries < ACK_TRIES {
            // Not read again before its ack is through.
            state[a.slot] = Lane::Busy;
            return Some(a);
        }
        // Left pending: claimed back after the lease (duplicates).
        s.counters.ack_errors.add(n);
        state[a.slot] = Lane::Held(Instant::now() + self.options.lease);
        None
    }

    /// A reader connection and its client id (for `CLIENT UNBLOCK`).
    async fn reader_conn(&self, s: &StreamCtx) -> Option<(MultiplexedConnection, i64)> {
        let mut backoff = Duration::from_millis(50);
        loop {
            let r = async {
                let mut c = self
                    .connection(self.options.block + self.options.response_timeout)
                    .await?;
                let id: i64 = ::redis::cmd("CLIENT").arg("ID").query_async(&mut c).await?;
                Ok::<_, RedisError>((c, id))
            }
            .await;
            match r {
                Ok(c) => return Some(c),
                Err(e) => {
                    s.counters.receive_errors.inc();
                    self.stats.error("connect", &classify(e));
                    if nap(backoff, &s.stop).await {
                        return None;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Wake a reader blocked in `XREADGROUP` (a lane of it was just freed).
    async fn unblock(&self, blocking: &AtomicBool, id: i64) {
        let Ok(mut m) = self.ready() else { return };
        for _ in 0..5 {
            if !blocking.load(Ordering::Acquire) {
                return;
            }
            let r: Result<u64, RedisError> = ::redis::cmd("CLIENT")
                .arg("UNBLOCK")
                .arg(id)
                .query_async(&mut m)
                .await;
            self.stats.unblocks.inc();
            match r {
                Ok(1) => return,
                // Not blocked yet: the read is on its way; try again a moment later.
                Ok(_) => tokio::time::sleep(Duration::from_millis(1)).await,
                Err(_) => return,
            }
        }
    }

    /// One reader: its lanes, until `stop`.
    async fn reader(&self, s: &StreamCtx, t: &TopicState, idx: usize, owned: Vec<usize>) {
        let consumer = format!("c{idx}");
        let Some((mut conn, mut id)) = self.reader_conn(s).await else {
            return;
        };
        let slot_of: HashMap<&str, usize> = owned
            .iter()
            .enumerate()
            .map(|(slot, &l)| (t.streams[l].as_str(), slot))
            .collect();
        // Lanes with entries pending from before (another run, a crash) are held
        // until those are claimed back: new entries never overtake them.
        let mut state = vec![Lane::Free; owned.len()];
        for (slot, &l) in owned.iter().enumerate() {
            if let Ok(n) = self.pending(&mut conn, &t.streams[l], &s.group).await {
                if n > 0 {
                    state[slot] = Lane::Held(Instant::now());
                }
            }
        }
        let blocking = AtomicBool::new(false);
        let mut work = FuturesUnordered::new();
        // Acked entries to XACK ahead of the next read.
        let mut acks: Vec<PendingAck> = Vec::new();
        let mut err_backoff = Duration::from_millis(50);
        let lease_ms = self.options.lease.as_millis() as u64;
        loop {
            if s.stop.is_cancelled() {
                break;
            }
            // Batches the stage has finished since: their acks go with this read.
            while let Some(Some(d)) = work.next().now_or_never() {
                settled(&mut state, &mut acks, d);
            }
            // Claim back held lanes whose time has come.
            let now = Instant::now();
            for slot in 0..state.len() {
                let Lane::Held(at) = state[slot] else {
                    continue;
                };
                if at > now {
                    continue;
                }
                let stream = &t.streams[owned[slot]];
                self.stats.claims.inc();
                let r: Result<StreamAutoClaimReply, RedisError> = ::redis::cmd("XAUTOCLAIM")
                    .arg(stream)
                    .arg(&s.group)
                    .arg(&consumer)
                    .arg(lease_ms)
                    .arg("0-0")
                    .arg("COUNT")
                    .arg(s.batch)
                    .query_async(&mut conn)
                    .await;
                match r {
                    Ok(reply) if !reply.claimed.is_empty() => {
                        self.stats.claimed.add(reply.claimed.len() as u64);
                        state[slot] = Lane::Busy;
                        work.push(self.settle(s, slot, reply.claimed, true));
                    }
                    Ok(_) => match self.pending(&mut conn, stream, &s.group).await {
                        Ok(0) => state[slot] = Lane::Free,
                        _ => state[slot] = Lane::Held(now + Duration::from_millis(100)),
                    },
                    Err(e) => {
                        s.counters.receive_errors.inc();
                        self.stats.error("xautoclaim", &classify(e));
                        state[slot] = Lane::Held(now + Duration::from_millis(200));
                    }
                }
            }
            let readable: Vec<usize> = (0..state.len())
                .filter(|&i| matches!(state[i], Lane::Free | Lane::Acking))
                .collect();
            let next_held = state
                .iter()
                .filter_map(|l| match l {
                    Lane::Held(at) => Some(*at),
                    _ => None,
                })
                .min();
            if readable.is_empty() && acks.is_empty() {
                let until = next_held.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
                tokio::select! {
                    _ = s.stop.cancelled() => break,
                    Some(d) = work.next(), if !work.is_empty() => {
                        settled(&mut state, &mut acks, d);
                        // Every batch already settled frees its lane for the same read.
                        while let Some(Some(d)) = work.next().now_or_never() {
                            settled(&mut state, &mut acks, d);
                        }
                    }
                    _ = tokio::time::sleep_until(until.into()) => {}
                }
                continue;
            }
            // One pipeline: the acks first, then the read of every readable lane.
            let mut pipe = ack_pipe(&acks, &t.streams, &owned, &s.group);
            let read = !readable.is_empty();
            if read {
                let mut block = self.options.block;
                if let Some(at) = next_held {
                    block = block.min(at.saturating_duration_since(Instant::now()));
                }
                let block_ms = (block.as_millis() as u64).max(1);
                let cmd = pipe
                    .cmd("XREADGROUP")
                    .arg("GROUP")
                    .arg(&s.group)
                    .arg(&consumer)
                    .arg("COUNT")
                    .arg(s.batch)
                    .arg("BLOCK")
                    .arg(block_ms)
                    .arg("STREAMS");
                for &slot in &readable {
                    cmd.arg(&t.streams[owned[slot]]);
                }
                for _ in &readable {
                    cmd.arg(">");
                }
                blocking.store(true, Ordering::Release);
            }
            self.stats.ack_calls.add(acks.len() as u64);
            // Batches settled while this pipeline is out: their acks go with the next.
            let mut acks_later: Vec<PendingAck> = Vec::new();
            let r = {
                let call = pipe.query_async::<Vec<Value>>(&mut conn);
                tokio::pin!(call);
                // A freed lane wakes the read (CLIENT UNBLOCK) beside it, never in its
                // way: dropped with the read once it has answered.
                let mut wakes = FuturesUnordered::new();
                loop {
                    // The read first: it must be on the wire before a freed lane's
                    // CLIENT UNBLOCK can wake it.
                    tokio::select! {
                        biased;
                        r = &mut call => break Some(r),
                        Some(d) = work.next(), if !work.is_empty() => {
                            settled(&mut state, &mut acks_later, d);
                            if read && wakes.is_empty() {
                                wakes.push(self.unblock(&blocking, id));
                            }
                        }
                        Some(()) = wakes.next(), if !wakes.is_empty() => {}
                        _ = s.stop.cancelled() => break None,
                    }
                }
            };
            blocking.store(false, Ordering::Release);
            let Some(r) = r else { break };
            // The acks this pipeline carried: confirmed, or carried again.
            let carried = std::mem::take(&mut acks);
            let mut replies = match r {
                Ok(v) => v.into_iter(),
                Err(e) => {
                    let e = classify(e);
                    for a in carried {
                        self.stats.error("xack", &e);
                        acks.extend(self.acked(s, &mut state, a, false));
                    }
                    acks.append(&mut acks_later);
                    if !read {
                        if nap(err_backoff, &s.stop).await {
                            break;
                        }
                        err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                    s.counters.receive_errors.inc();
                    self.stats.error("xreadgroup", &e);
                    if nap(err_backoff, &s.stop).await {
                        break;
                    }
                    err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                    if matches!(e, BrokerError::Connection(_)) {
                        s.counters.reconnects.inc();
                        self.stats.reconnects.inc();
                        let Some((c, i)) = self.reader_conn(s).await else {
                            break;
                        };
                        conn = c;
                        id = i;
                    }
                    continue;
                }
            };
            for a in carried {
                let ok = !matches!(replies.next(), Some(Value::ServerError(_)) | None);
                if !ok {
                    self.stats
                        .error("xack", &BrokerError::Refused("XACK".into()));
                }
                acks.extend(self.acked(s, &mut state, a, ok));
            }
            acks.append(&mut acks_later);
            if !read {
                continue;
            }
            self.stats.reads.inc();
            let reply = match replies.next() {
                Some(Value::ServerError(e)) => Err(classify(RedisError::from(e))),
                Some(v) => Option::<StreamReadReply>::from_redis_value(v)
                    .map_err(|e| BrokerError::Other(format!("XREADGROUP reply: {e}"))),
                None => Err(BrokerError::Other("no reply to XREADGROUP".into())),
            };
            match reply {
                Ok(Some(reply)) if !reply.keys.is_empty() => {
                    err_backoff = Duration::from_millis(50);
                    for k in reply.keys {
                        if k.ids.is_empty() {
                            continue;
                        }
                        let Some(&slot) = slot_of.get(k.key.as_str()) else {
                            continue;
                        };
                        self.stats.entries_read.add(k.ids.len() as u64);
                        state[slot] = Lane::Busy;
                        work.push(self.settle(s, slot, k.ids, false));
                    }
                }
                Ok(_) => {
                    self.stats.empty_reads.inc();
                }
                Err(e) => {
                    s.counters.receive_errors.inc();
                    self.stats.error("xreadgroup", &e);
                    if nap(err_backoff, &s.stop).await {
                        break;
                    }
                    err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
        // Batches in the stage are finished, and their acks sent, before returning.
        while let Some(d) = work.next().await {
            settled(&mut state, &mut acks, d);
        }
        while !acks.is_empty() {
            let pipe = ack_pipe(&acks, &t.streams, &owned, &s.group);
            self.stats.ack_calls.add(acks.len() as u64);
            let r = pipe.query_async::<Vec<Value>>(&mut conn).await;
            let carried = std::mem::take(&mut acks);
            let mut replies = r.ok().map(Vec::into_iter);
            for a in carried {
                let ok = match replies.as_mut().and_then(Iterator::next) {
                    Some(v) => !matches!(v, Value::ServerError(_)),
                    None => false,
                };
                if !ok {
                    self.stats
                        .error("xack", &BrokerError::Refused("XACK".into()));
                }
                acks.extend(self.acked(s, &mut state, a, ok));
            }
            if !acks.is_empty() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    async fn read_server(&self, t: &TopicState, group: &str) {
        let Ok(mut m) = self.ready() else { return };
        let mut fig = [0u64; 4];
        for stream in &t.streams {
            let v: Result<Value, _> = ::redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(stream)
                .query_async(&mut m)
                .await;
            if let Ok(Value::Array(groups)) = v {
                for g in groups {
                    let p = pairs(&g);
                    let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                    if get("name").map(|v| text(&v)).as_deref() == Some(group) {
                        fig[0] += get("pending").map(|v| int(&v)).unwrap_or(0);
                        fig[1] += get("lag").map(|v| int(&v)).unwrap_or(0);
                    }
                }
            }
            let n: Result<u64, _> = ::redis::cmd("XLEN").arg(stream).query_async(&mut m).await;
            fig[2] += n.unwrap_or(0);
        }
        let info: Result<String, _> = ::redis::cmd("INFO").arg("memory").query_async(&mut m).await;
        if let Ok(info) = info {
            fig[3] = info
                .lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
        }
        self.server.lock().insert(
            (
                t.streams.first().cloned().unwrap_or_default(),
                group.to_string(),
            ),
            fig,
        );
    }
}

/// A lane batch the stage has finished: its lane is free again, or held, or waits
/// for its ack (readable in the pipeline that carries the ack, unless held).
fn settled(state: &mut [Lane], acks: &mut Vec<PendingAck>, d: Done) {
    if d.acked.is_empty() {
        state[d.slot] = d.held.map_or(Lane::Free, Lane::Held);
        return;
    }
    state[d.slot] = if d.held.is_some() {
        Lane::Busy
    } else {
        Lane::Acking
    };
    acks.push(PendingAck {
        slot: d.slot,
        ids: d.acked,
        tries: 0,
        held: d.held,
    });
}

/// The server's provenance from its `INFO server` answer: product (`server_name`
/// where the server gives one, as Valkey does; else Redis), `redis_version`, the build
/// (`redis_git_sha1`, `redis_build_id`) and `redis_mode`.
pub fn info_provenance(info: &str) -> crate::Provenance {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    };
    let product = field("server_name").unwrap_or_else(|| "Redis".into());
    let mut p = crate::Provenance::new(
        product,
        "INFO server; CONFIG GET appendonly, appendfsync, save",
    );
    p = match field("redis_version") {
        Some(v) => p.with_version(v),
        None => {
            p.not_reported("version", "INFO server has no redis_version");
            p
        }
    };
    let build: Vec<String> = ["redis_git_sha1", "redis_git_dirty", "redis_build_id"]
        .iter()
        .filter_map(|k| field(k).map(|v| format!("{k}={v}")))
        .collect();
    p = p.with_build(build.join(" "));
    for k in ["redis_mode", "os", "arch_bits"] {
        if let Some(v) = field(k) {
            p.report(k, v);
        }
    }
    p
}

#[async_trait]
impl Broker for RedisBroker {
    async fn setup(&self, topology: &Topology) -> Result<Description, BrokerError> {
        let o = &self.options;
        let mut m = self.manager().await?;
        let appendonly = self.config_get(&mut m, "appendonly").await?;
        let appendfsync = self.config_get(&mut m, "appendfsync").await?;
        let save = self.config_get(&mut m, "save").await?;
        let (tier, tier_note) = server_tier(&appendonly, &appendfsync, &save);
        if topology.durability == Durability::Fsync && tier != Durability::Fsync {
            return Err(BrokerError::Config {
                field: "durability".into(),
                message: format!(
                    "durability: fsync needs the server at appendonly yes, appendfsync always (server: appendonly {appendonly}, appendfsync {appendfsync})"
                ),
            });
        }
        *self.tier.lock() = Some(tier);
        // The server's account of itself; a server that will not say (INFO renamed or
        // refused) is a note in the record, not a failed setup.
        let info: Result<String, RedisError> =
            ::redis::cmd("INFO").arg("server").query_async(&mut m).await;
        let mut provenance = match info {
            Ok(text) => info_provenance(&text),
            Err(e) => {
                let mut p = crate::Provenance::new("Redis", "INFO server (not answered)");
                p.not_reported(
                    "version",
                    format!("INFO server: {}", redact_url_passwords(&e.to_string())),
                );
                p
            }
        };
        let version = provenance.version_or_not_reported().to_string();
        provenance.setting("appendonly", appendonly.clone());
        provenance.setting("appendfsync", appendfsync.clone());
        provenance.setting("save", save.clone());
        let keys = topology.keys.max(1);
        let lanes = topology.physical_lanes(self.options.max_lanes);
        let mut states = HashMap::new();
        for t in &topology.topics {
            let tok = token(&t.name);
            if topology.reset {
                let mut cursor: u64 = 0;
                loop {
                    let (next, found): (u64, Vec<String>) = ::redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(format!("cb:{tok}:*"))
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut m)
                        .await
                        .map_err(classify)?;
                    if !found.is_empty() {
                        let _: u64 = ::redis::cmd("DEL")
                            .arg(&found)
                            .query_async(&mut m)
                            .await
                            .map_err(classify)?;
                    }
                    cursor = next;
                    if cursor == 0 {
                        break;
                    }
                }
            }
            let streams: Vec<String> = (0..lanes).map(|l| format!("cb:{tok}:l{l}")).collect();
            let pairs_: Vec<(String, String)> = streams
                .iter()
                .flat_map(|s| t.groups.iter().map(move |g| (s.clone(), g.clone())))
                .collect();
            let creates = pairs_.into_iter().map(|(s, g)| {
                let mut m = m.clone();
                async move {
                    let r: Result<(), RedisError> = ::redis::cmd("XGROUP")
                        .arg("CREATE")
                        .arg(&s)
                        .arg(&g)
                        .arg("0")
                        .arg("MKSTREAM")
                        .query_async(&mut m)
                        .await;
                    match r {
                        Err(e) if !e.to_string().contains("BUSYGROUP") => Err(classify(e)),
                        _ => Ok(()),
                    }
                }
            });
            let results: Vec<Result<(), BrokerError>> = futures::stream::iter(creates)
                .buffer_unordered(32)
                .collect()
                .await;
            for r in results {
                r?;
            }
            states.insert(
                t.name.clone(),
                Arc::new(TopicState {
                    streams,
                    groups: t.groups.clone(),
                }),
            );
        }
        *self.topics.write() = states;
        self.keys.store(keys, Ordering::Relaxed);
        self.lanes.store(lanes, Ordering::Relaxed);
        self.topo_lanes
            .store(topology.lanes.clamp(1, keys), Ordering::Relaxed);
        let streams = topology.stream_count() as u64;
        let mut notes = vec![
            format!("redis {version}; CONFIG GET: appendonly {appendonly}, appendfsync {appendfsync}, save \"{save}\""),
            tier_note,
            format!(
                "one stream per (topic, lane), {lanes} lanes per topic; {} readers per group; lease (XAUTOCLAIM min-idle-time) {} ms; XREADGROUP BLOCK up to {} ms",
                o.readers,
                o.lease.as_millis(),
                o.block.as_millis()
            ),
        ];
        if tier != topology.durability && topology.durability != Durability::Memory {
            notes.push(format!(
                "durability {:?} was requested; the server's tier is {:?}, recorded as found",
                topology.durability, tier
            ));
        }
        if o.maxlen > 0 {
            notes.push(format!(
                "XADD MAXLEN ~ {}: trimming can drop entries a group has not read",
                o.maxlen
            ));
        } else {
            notes.push("MAXLEN trimming off".into());
        }
        if topology.dedup_window_sec > 0 {
            notes.push(format!(
                "dedup window {} s requested: Redis Streams have no broker-side dedup; not honoured",
                topology.dedup_window_sec
            ));
        }
        if lanes < keys {
            notes.push(format!(
                "{keys} keys hashed onto {lanes} lane streams (FNV-1a); a lane's keys are handed one run at a time"
            ));
        }
        Ok(Description {
            system: "redis".into(),
            variant: "lane-streams".into(),
            durability: tier,
            fan_out: FanOut::Native,
            delivery: DeliveryGuarantee::AtLeastOnce,
            ordered_lanes: lanes * streams,
            physical_queues: lanes * topology.topics.len() as u64,
            consumer_members: (o.readers as u64).min(lanes) * streams,
            connections: 1 + (o.readers as u64).min(lanes) * streams,
            publishes_per_ingress_event: topology.native_publishes_per_ingress_event(),
            semantics_built_in_app: vec![
                "per-key order: keys hashed onto lane streams, each lane read by one reader".into(),
                "a lane with a batch in the stage or a refused batch pending is not read (XREADGROUP >) until it is settled".into(),
                "redelivery after the lease: XAUTOCLAIM by min-idle-time".into(),
                "no dedup".into(),
            ],
            notes,
            lease_ms: Some(o.lease.as_millis() as u64),
            provenance,
        })
    }

    async fn publish(&self, topic: &str, key: &str, payloads: &[Bytes]) -> Result<(), BrokerError> {
        if payloads.is_empty() {
            return Ok(());
        }
        let t = self.topic(topic)?;
        let mut m = self.ready()?;
        let lane = lane_of(key, self.lanes.load(Ordering::Relaxed)) as usize;
        let stream = &t.streams[lane.min(t.streams.len() - 1)];
        let mut pipe = ::redis::pipe();
        for p in payloads {
            let c = pipe.cmd("XADD").arg(stream);
            if self.options.maxlen > 0 {
                c.arg("MAXLEN").arg("~").arg(self.options.maxlen);
            }
            c.arg("*").arg("k").arg(key).arg("p").arg(p.as_ref());
        }
        self.stats.xadd_pipelines.inc();
        match pipe.query_async::<Vec<String>>(&mut m).await {
            Ok(ids) => {
                self.stats.logical_publishes.add(ids.len() as u64);
                Ok(())
            }
            Err(e) => {
                let e = classify(e);
                self.stats.error("xadd", &e);
                Err(e)
            }
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
        if !t.groups.iter().any(|g| g == group) {
            return Err(BrokerError::Other(format!(
                "unknown group {group:?} on {topic:?}"
            )));
        }
        let ctx = StreamCtx {
            group: group.to_string(),
            batch: options.batch.max(1),
            counters: options.counters.clone(),
            handler,
            // Handler calls at once: twice the stage's lane budget (pgmq's read-ahead is too).
            budget: Semaphore::new(options.lanes.max(1) * 2),
            stop,
        };
        let readers = self.options.readers.min(t.streams.len()).max(1);
        let shares: Vec<Vec<usize>> = (0..readers)
            .map(|r| (0..t.streams.len()).filter(|l| l % readers == r).collect())
            .collect();
        futures::future::join_all(
            shares
                .into_iter()
                .enumerate()
                .map(|(i, owned)| self.reader(&ctx, &t, i, owned)),
        )
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.read_server(&t, group)).await;
        Ok(())
    }

    /// Entries no consumer of a group has been handed yet, per (lane stream, group):
    /// the group's `lag` in `XINFO GROUPS` (Redis >= 7), every lane stream in one
    /// pipeline on a connection of its own. Delivered entries not yet acked are taken
    /// (not counted). `None` before setup, on any error, and when the server cannot
    /// say: a `lag` of nil (entries deleted past the group's last-delivered id), or
    /// none at all (Redis < 7), or a group missing from its stream.
    async fn held(&self) -> Option<crate::broker::Held> {
        self.ready().ok()?;
        let streams: Vec<(String, Vec<String>)> = self
            .topics
            .read()
            .values()
            .flat_map(|t| t.streams.iter().map(|s| (s.clone(), t.groups.clone())))
            .collect();
        if streams.is_empty() {
            return Some(crate::broker::Held::default());
        }
        let counted = async {
            let mut conn = self.connection(Duration::from_secs(5)).await.ok()?;
            let mut pipe = ::redis::pipe();
            for (stream, _) in &streams {
                pipe.cmd("XINFO").arg("GROUPS").arg(stream);
            }
            let replies: Vec<Value> = pipe.query_async(&mut conn).await.ok()?;
            if replies.len() != streams.len() {
                return None;
            }
            let mut places = Vec::new();
            for ((stream, groups), reply) in streams.iter().zip(&replies) {
                let Value::Array(infos) = reply else {
                    return None;
                };
                let infos: Vec<Vec<(String, Value)>> = infos.iter().map(pairs).collect();
                for g in groups {
                    let info = infos
                        .iter()
                        .find(|p| p.iter().any(|(k, v)| k == "name" && text(v) == g.as_str()))?;
                    let lag = match info.iter().find(|(k, _)| k == "lag")?.1 {
                        Value::Int(n) if n >= 0 => n as u64,
                        _ => return None,
                    };
                    places.push((format!("{stream}/{g}"), lag));
                }
            }
            Some(crate::broker::Held::from_places(places))
        };
        tokio::time::timeout(Duration::from_secs(10), counted)
            .await
            .ok()?
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        let mut m = counter::snapshot("redis_", &self.stats);
        let server = Server::default();
        let figs = self.server.lock();
        let mut per_stream: HashMap<&str, u64> = HashMap::new();
        for ((stream, _), fig) in figs.iter() {
            server.server_group_pending.add(fig[0]);
            server.server_group_lag.add(fig[1]);
            per_stream.insert(stream.as_str(), fig[2]);
            server
                .server_used_memory_bytes
                .set(server.server_used_memory_bytes.get().max(fig[3]));
        }
        server.server_stream_entries.set(per_stream.values().sum());
        drop(figs);
        m.extend(counter::snapshot("redis_", &server));
        let tier = self.tier();
        let gauges = Gauges {
            lanes: self.lanes.load(Ordering::Relaxed),
            lane_streams: self
                .topics
                .read()
                .values()
                .map(|t| t.streams.len() as u64)
                .sum(),
            readers_per_stream: self.options.readers as u64,
            lease_ms: self.options.lease.as_millis() as u64,
            durability_tier: match tier {
                Some(Durability::Fsync) => 2,
                Some(Durability::Default) => 1,
                _ => 0,
            },
            not_durable: u64::from(matches!(tier, Some(Durability::None))),
        };
        m.extend(counter::snapshot("redis_", &gauges));
        m
    }

    async fn close(&self) -> Result<(), BrokerError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_server_gives_product_version_build_and_mode() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:ae4d7c971a948f0\r\nredis_mode:standalone\r\n";
        let p = info_provenance(info);
        assert_eq!(p.product, "Redis");
        assert_eq!(p.version.as_deref(), Some("7.0.15"));
        assert_eq!(
            p.build.as_deref(),
            Some("redis_git_sha1=00000000 redis_git_dirty=0 redis_build_id=ae4d7c971a948f0")
        );
        assert_eq!(p.reported["redis_mode"], "standalone");
        let valkey = info_provenance("server_name:valkey\r\nredis_version:7.2.4\r\n");
        assert_eq!(valkey.product, "valkey");
        let none = info_provenance("# Server\r\n");
        assert_eq!(none.version, None);
        assert_eq!(
            none.notes,
            vec!["version not reported: INFO server has no redis_version"]
        );
    }

    #[test]
    fn tiers_from_config() {
        assert_eq!(server_tier("yes", "always", "").0, Durability::Fsync);
        assert_eq!(
            server_tier("yes", "everysec", "3600 1").0,
            Durability::Default
        );
        let (t, note) = server_tier("no", "everysec", "");
        assert_eq!(t, Durability::None);
        assert!(note.contains("NOT DURABLE"), "{note}");
        let (t, note) = server_tier("no", "everysec", "3600 1 300 100");
        assert_eq!(t, Durability::None);
        assert!(note.contains("RDB"), "{note}");
    }

    #[test]
    fn snapshot_keys() {
        let b = RedisBroker::new(RedisOptions::default()).unwrap();
        let keys: Vec<String> = b.counters().into_keys().collect();
        for k in [
            "redis_logical_publishes",
            "redis_acked",
            "redis_refused",
            "redis_claimed",
            "redis_server_group_pending",
            "redis_server_group_lag",
            "redis_server_used_memory_bytes",
            "redis_not_durable",
            "redis_durability_tier",
        ] {
            assert!(keys.iter().any(|x| x == k), "{k} in {keys:?}");
        }
    }
}
