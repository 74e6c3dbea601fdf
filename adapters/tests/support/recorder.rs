//! What a consumer group processed, as the contract tests check it: a batch handler
//! that records every delivery per key, notices a key in two handler calls at once and
//! a message filed under another key's batch, can refuse chosen batches and can be
//! slow on one key; plus starting and stopping the groups' consumers and publishing
//! `{"k":…,"seq":…}` payloads.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::lanes::lane_key;
use adapters::{
    BatchHandler, Broker, BrokerError, ConsumeOptions, Disposition, Durability, KeyBatch,
    StreamCounters, TopicSpec, Topology,
};
use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// The payload of message `seq` of key `key` (JSON: pgmq and Queen store JSON).
pub fn payload(key: &str, seq: u64) -> Bytes {
    Bytes::from(format!(r#"{{"k":"{key}","seq":{seq}}}"#))
}

/// (key, seq) of a [`payload`].
pub fn parse(p: &[u8]) -> (String, u64) {
    let v: serde_json::Value = serde_json::from_slice(p).expect("json payload");
    (
        v["k"].as_str().expect("a key").to_string(),
        v["seq"].as_u64().expect("a seq"),
    )
}

/// Key names `p0..p{n}`, as the workload names its properties.
pub fn keys(n: u64) -> Vec<String> {
    (0..n).map(|k| format!("p{k}")).collect()
}

/// One topic read by `groups`, reset at setup.
pub fn topology(topic: &str, groups: &[&str], keys: u64, lanes: u64) -> Topology {
    Topology {
        topics: vec![TopicSpec {
            name: topic.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }],
        keys,
        lanes,
        durability: Durability::Default,
        dedup_window_sec: 0,
        reset: true,
        sharing: adapters::Sharing::ALONE,
    }
}

/// Records what one group processed. Keys are the payloads' keys (a batch's own key
/// may be a lane holding several of them).
pub struct Recorder {
    pub group: String,
    /// Per key, each processed seq in order with its redelivered flag.
    seen: Mutex<HashMap<String, Vec<(u64, bool)>>>,
    /// Batch keys and payload keys in a handler call right now.
    in_flight: Mutex<HashSet<String>>,
    overlaps: AtomicU64,
    processed: AtomicU64,
    redelivered_seen: AtomicU64,
    /// Refuse, once each, the first batch holding one of these (key, seq).
    refuse: Mutex<Vec<(String, u64)>>,
    /// Every refused batch, its messages as (key, seq).
    refused: Mutex<Vec<Vec<(String, u64)>>>,
    refused_at: Mutex<Option<Instant>>,
    /// When a message of a refused batch was first handed over again.
    back_at: Mutex<Option<Instant>>,
    done_at: Mutex<HashMap<String, Instant>>,
    /// Every processed message as (key, seq), in the order the handler calls finished.
    log: Mutex<Vec<(String, u64)>>,
    /// Messages found in a batch whose key is not theirs.
    misfiled: Mutex<Vec<String>>,
    /// `Some((lanes, keys))`: a batch's key is the lane of its messages' keys
    /// (`lanes::lane_key`), not the key itself.
    lane_batches: Option<(u64, u64)>,
    batch_keys: Mutex<HashSet<String>>,
    /// The most messages one batch held.
    largest_batch: AtomicU64,
    /// Sleep per handler call, so keys overlap in time.
    work: Duration,
    /// Sleep per message of this key instead (the slow key).
    slow: Option<(String, Duration)>,
    /// Handler calls that may work at once, like a stage's lane budget; the others
    /// wait for a turn while their batch stays claimed.
    budget: Option<Arc<tokio::sync::Semaphore>>,
}

impl Recorder {
    pub fn new(group: &str) -> Self {
        Recorder {
            group: group.into(),
            seen: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashSet::new()),
            overlaps: AtomicU64::new(0),
            processed: AtomicU64::new(0),
            redelivered_seen: AtomicU64::new(0),
            refuse: Mutex::new(Vec::new()),
            refused: Mutex::new(Vec::new()),
            refused_at: Mutex::new(None),
            back_at: Mutex::new(None),
            done_at: Mutex::new(HashMap::new()),
            log: Mutex::new(Vec::new()),
            misfiled: Mutex::new(Vec::new()),
            lane_batches: None,
            batch_keys: Mutex::new(HashSet::new()),
            largest_batch: AtomicU64::new(0),
            work: Duration::from_millis(2),
            slow: None,
            budget: None,
        }
    }

    /// Refuse, once, the first batch that holds (key, seq).
    pub fn refusing(self, refuse: Option<(String, u64)>) -> Self {
        self.refusing_each(refuse.into_iter().collect())
    }

    /// Refuse, once each, the first batch that holds one of these (key, seq).
    pub fn refusing_each(self, refuse: Vec<(String, u64)>) -> Self {
        *self.refuse.lock() = refuse;
        self
    }

    /// Batches are lanes: a batch's key is `lane_key(key, lanes, keys)` of each of its
    /// messages' keys (by default it is the key itself).
    pub fn lane_batches(mut self, lanes: u64, keys: u64) -> Self {
        self.lane_batches = Some((lanes, keys));
        self
    }

    /// Sleep `per_message` for every message of `key`.
    pub fn slow_key(mut self, key: &str, per_message: Duration) -> Self {
        self.slow = Some((key.into(), per_message));
        self
    }

    pub fn work(mut self, per_call: Duration) -> Self {
        self.work = per_call;
        self
    }

    /// At most `calls` handler calls work at once.
    pub fn budget(mut self, calls: usize) -> Self {
        self.budget = Some(Arc::new(tokio::sync::Semaphore::new(calls)));
        self
    }

    pub fn arc(self) -> Arc<Self> {
        Arc::new(self)
    }

    /// Messages processed (refused batches not counted).
    pub fn processed(&self) -> u64 {
        self.processed.load(Ordering::Relaxed)
    }

    /// Handler calls that found their key already in another call.
    pub fn overlaps(&self) -> u64 {
        self.overlaps.load(Ordering::Relaxed)
    }

    /// Deliveries flagged redelivered, refused batches included.
    pub fn redelivered_seen(&self) -> u64 {
        self.redelivered_seen.load(Ordering::Relaxed)
    }

    pub fn refused_batches(&self) -> u64 {
        self.refused.lock().len() as u64
    }

    /// (key, seq) of every message in the first refused batch.
    pub fn refused(&self) -> Vec<(String, u64)> {
        self.refused.lock().first().cloned().unwrap_or_default()
    }

    /// Messages in refused batches, all of them.
    pub fn refused_messages(&self) -> u64 {
        self.refused.lock().iter().map(|b| b.len() as u64).sum()
    }

    /// When the first batch was refused, and when a message of a refused batch was
    /// first handed over again (at the start of that handler call).
    pub fn refused_then_back(&self) -> (Option<Instant>, Option<Instant>) {
        (*self.refused_at.lock(), *self.back_at.lock())
    }

    /// Messages found in a batch of another key (or lane), as `key in batch`.
    pub fn misfiled(&self) -> Vec<String> {
        self.misfiled.lock().clone()
    }

    /// The batch keys seen, sorted.
    pub fn batch_keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self.batch_keys.lock().iter().cloned().collect();
        k.sort();
        k
    }

    /// The most messages one batch held.
    pub fn largest_batch(&self) -> u64 {
        self.largest_batch.load(Ordering::Relaxed)
    }

    /// Every processed message as (key, seq), in the order the handler calls finished.
    pub fn log(&self) -> Vec<(String, u64)> {
        self.log.lock().clone()
    }

    /// Keys processed at least once.
    pub fn keys_seen(&self) -> Vec<String> {
        let mut k: Vec<String> = self.seen.lock().keys().cloned().collect();
        k.sort();
        k
    }

    /// The seqs of `key` in processing order.
    pub fn seqs(&self, key: &str) -> Vec<u64> {
        self.deliveries(key).into_iter().map(|(s, _)| s).collect()
    }

    /// The seqs of `key` in processing order, with their redelivered flags.
    pub fn deliveries(&self, key: &str) -> Vec<(u64, bool)> {
        self.seen.lock().get(key).cloned().unwrap_or_default()
    }

    /// When the last message of `key` was processed.
    pub fn done_at(&self, key: &str) -> Option<Instant> {
        self.done_at.lock().get(key).copied()
    }

    /// Every key has seqs `0..per_key` in order, for `keys` keys; the message names
    /// the first key that does not (and `context`).
    pub fn assert_in_order(&self, keys: &[String], per_key: u64, context: &str) {
        assert_eq!(
            self.overlaps(),
            0,
            "{}: a key was in two handler calls at once; {context}",
            self.group
        );
        let misfiled = self.misfiled();
        assert!(
            misfiled.is_empty(),
            "{}: messages in another key's batch: {misfiled:?}; {context}",
            self.group
        );
        assert_eq!(
            self.keys_seen(),
            sorted(keys),
            "{}: keys seen; {context}",
            self.group
        );
        let expect: Vec<u64> = (0..per_key).collect();
        for k in keys {
            assert_eq!(
                self.seqs(k),
                expect,
                "{} key {k}: processed order; {context}",
                self.group
            );
        }
    }

    /// Wait until `want` messages were processed, at most `limit`.
    pub async fn wait_for(&self, want: u64, limit: Duration) {
        wait_all(std::slice::from_ref(self), want, limit).await;
    }
}

fn sorted(keys: &[String]) -> Vec<String> {
    let mut k = keys.to_vec();
    k.sort();
    k
}

/// Wait until every recorder processed `want` messages, at most `limit`.
pub async fn wait_all<R: std::borrow::Borrow<Recorder>>(recs: &[R], want: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    while recs.iter().any(|r| r.borrow().processed() < want) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[async_trait]
impl BatchHandler for Recorder {
    async fn handle(&self, batch: KeyBatch) -> Disposition {
        let entered = Instant::now();
        let msgs: Vec<(String, u64, bool)> = batch
            .messages
            .iter()
            .map(|m| {
                let (k, s) = parse(&m.payload);
                (k, s, m.redelivered)
            })
            .collect();
        // The batch's key and its messages' keys are taken for the call: finding one
        // already taken is a key in two handler calls at once.
        let mut taken: Vec<String> = vec![format!("batch {}", batch.key)];
        for (k, _, _) in &msgs {
            let t = format!("key {k}");
            if !taken.contains(&t) {
                taken.push(t);
            }
        }
        {
            let mut held = self.in_flight.lock();
            for t in &taken {
                if !held.insert(t.clone()) {
                    self.overlaps.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.batch_keys.lock().insert(batch.key.to_string());
        self.largest_batch
            .fetch_max(msgs.len() as u64, Ordering::Relaxed);
        {
            let mut misfiled = self.misfiled.lock();
            for (k, s, _) in &msgs {
                let want = match self.lane_batches {
                    Some((lanes, keys)) => lane_key(k, lanes, keys),
                    None => k.clone(),
                };
                if *batch.key != *want {
                    misfiled.push(format!("({k}, {s}) in batch {}", batch.key));
                }
            }
        }
        let again = msgs.iter().filter(|m| m.2).count() as u64;
        self.redelivered_seen.fetch_add(again, Ordering::Relaxed);
        {
            let refused = self.refused.lock();
            let mut back = self.back_at.lock();
            if back.is_none()
                && msgs
                    .iter()
                    .any(|m| refused.iter().flatten().any(|r| r.0 == m.0 && r.1 == m.1))
            {
                *back = Some(entered);
            }
        }
        let pause = match &self.slow {
            Some((key, d)) if msgs.iter().any(|m| m.0 == *key) => *d * msgs.len() as u32,
            _ => self.work,
        };
        {
            let _turn = match &self.budget {
                Some(b) => Some(b.acquire().await.expect("budget open")),
                None => None,
            };
            tokio::time::sleep(pause).await;
        }
        let refuse = {
            let mut r = self.refuse.lock();
            match r
                .iter()
                .position(|(k, s)| msgs.iter().any(|m| m.0 == *k && m.1 == *s))
            {
                Some(i) => {
                    r.remove(i);
                    true
                }
                None => false,
            }
        };
        let release = |taken: &[String]| {
            let mut held = self.in_flight.lock();
            for t in taken {
                held.remove(t);
            }
        };
        if refuse {
            self.refused
                .lock()
                .push(msgs.iter().map(|m| (m.0.clone(), m.1)).collect());
            self.refused_at.lock().get_or_insert_with(Instant::now);
            release(&taken);
            return Disposition::Refuse;
        }
        let now = Instant::now();
        {
            let mut seen = self.seen.lock();
            let mut done = self.done_at.lock();
            let mut log = self.log.lock();
            for (k, s, again) in &msgs {
                seen.entry(k.clone()).or_default().push((*s, *again));
                done.insert(k.clone(), now);
                log.push((k.clone(), *s));
            }
        }
        self.processed
            .fetch_add(msgs.len() as u64, Ordering::Relaxed);
        release(&taken);
        Disposition::Ack
    }
}

/// The consumers of some groups of one topic, one per recorder.
pub struct Consumers {
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<Result<(), BrokerError>>>,
    pub counters: Vec<Arc<StreamCounters>>,
}

impl Consumers {
    /// Start one consumer per recorder (its group), pops of `batch`, `lanes` lanes.
    pub fn start<B: Broker + ?Sized + 'static>(
        broker: &Arc<B>,
        topic: &str,
        recs: &[Arc<Recorder>],
        batch: usize,
        lanes: usize,
    ) -> Consumers {
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        let mut counters = Vec::new();
        for rec in recs {
            let cnt = Arc::new(StreamCounters::default());
            counters.push(cnt.clone());
            let b = broker.clone();
            let h: Arc<dyn BatchHandler> = rec.clone();
            let opts = ConsumeOptions {
                batch,
                lanes,
                counters: cnt,
            };
            let (t, g, s) = (topic.to_string(), rec.group.clone(), stop.clone());
            tasks.push(tokio::spawn(
                async move { b.consume(&t, &g, opts, h, s).await },
            ));
        }
        Consumers {
            stop,
            tasks,
            counters,
        }
    }

    /// Stop the consumers; each must end cleanly within 60 s.
    pub async fn finish(self) -> Vec<Arc<StreamCounters>> {
        self.stop.cancel();
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .expect("consumers stop")
                .unwrap()
                .expect("consume ends cleanly");
        }
        self.counters
    }
}

/// Publish seqs `seqs` of every key, each key from its own task, in order; every
/// fourth call carries 3 payloads.
pub async fn publish_concurrently<B: Broker + ?Sized + 'static>(
    broker: &Arc<B>,
    topic: &str,
    keys: &[String],
    seqs: Range<u64>,
) {
    let mut pubs = Vec::new();
    for key in keys {
        let (b, t, key, to) = (broker.clone(), topic.to_string(), key.clone(), seqs.end);
        let mut seq = seqs.start;
        pubs.push(tokio::spawn(async move {
            while seq < to {
                let n = if seq.is_multiple_of(4) {
                    3.min(to - seq)
                } else {
                    1
                };
                let ps: Vec<Bytes> = (seq..seq + n).map(|s| payload(&key, s)).collect();
                b.publish(&t, &key, &ps).await.expect("publish");
                seq += n;
            }
        }));
    }
    for p in pubs {
        p.await.unwrap();
    }
}

/// Publish seqs `seqs` of every key from one task, `per_call` payloads per call, keys
/// interleaved call by call.
pub async fn publish_interleaved<B: Broker + ?Sized>(
    broker: &B,
    topic: &str,
    keys: &[String],
    seqs: Range<u64>,
    per_call: u64,
) {
    let mut from = seqs.start;
    while from < seqs.end {
        let to = (from + per_call).min(seqs.end);
        for key in keys {
            let ps: Vec<Bytes> = (from..to).map(|s| payload(key, s)).collect();
            broker.publish(topic, key, &ps).await.expect("publish");
        }
        from = to;
    }
}
